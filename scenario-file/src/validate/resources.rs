//! The resources the flows run against, read through their declarations
//! (`crate::resource_keys`): a database (and its `collapse`) and a key family, every key through
//! [`TableReader`], which applies the defaults and the declared bounds; here, what the
//! declaration cannot say: a key that applies only with another, and the bounds between keys.

use outagelab_sim::scenario::{
    Collapse, ConnectionLimit, DatabaseSpec, KeyDistribution, KeyFamilySpec,
};

use super::Validator;
use super::table::TableReader;
use crate::raw::RawValue;
use crate::resource_keys::{DATABASE, KEY_FAMILY, RawDatabase, RawKeyFamily};

/// A key family's `distribution`.
#[derive(Clone, Copy)]
enum Drawn {
    Uniform,
    Hot,
}

const DISTRIBUTIONS: &[(&str, Drawn)] = &[("uniform", Drawn::Uniform), ("hot", Drawn::Hot)];

impl Validator<'_> {
    pub(super) fn database(&mut self, name: &str, raw: &RawDatabase) -> Option<DatabaseSpec> {
        let table_span = self.key_span(&["databases", name]);
        let prefix = format!("databases.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &DATABASE, table_span);
        let latency = r.latency("latency").ok()?.expect("required");
        let capacity = r.count("capacity", None).ok()?;
        let max_connections = r.count("max_connections", None).ok()?;
        if max_connections.is_none() && r.written("connection_queue").is_some() {
            let message =
                "needs `max_connections`: without a limit no query waits for a connection";
            r.refuse("connection_queue", message);
            return None;
        }
        let queue_max = r
            .count("connection_queue", None)
            .ok()?
            .expect("declared with a default");
        let collapse = match r.table("collapse") {
            Some(mut table) => Some(collapse(&mut table)?),
            None => None,
        };
        Some(DatabaseSpec {
            name: name.to_owned(),
            latency,
            capacity,
            connections: max_connections.map(|max| ConnectionLimit { max, queue_max }),
            collapse,
        })
    }

    pub(super) fn key_family(&mut self, name: &str, raw: &RawKeyFamily) -> Option<KeyFamilySpec> {
        let table_span = self.key_span(&["keys", name]);
        let prefix = format!("keys.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &KEY_FAMILY, table_span);
        let count = r
            .count("count", None)
            .ok()?
            .expect("declared with a default");
        let hot_fields = ["hot_keys", "hot_share_percent"];
        let drawn = r.choice("distribution", DISTRIBUTIONS, None).ok()?;
        let distribution = match drawn.expect("declared with a default") {
            Drawn::Uniform => {
                for field in hot_fields {
                    if r.written(field).is_some() {
                        r.refuse(field, "applies to distribution = \"hot\" only");
                    }
                }
                KeyDistribution::Uniform
            }
            Drawn::Hot => {
                let (Some(hot_keys), Some(_)) =
                    (r.written("hot_keys"), r.written("hot_share_percent"))
                else {
                    let span = r.written_span("distribution");
                    let key = r.key("hot_keys");
                    let message = "a hot set needs hot_keys and hot_share_percent (e.g. 90% of \
                                   reads to 100 keys)";
                    r.validator.error(span, key, message);
                    return None;
                };
                let RawValue::Whole(hot) = hot_keys.get_ref() else {
                    unreachable!("a count is read as a whole number")
                };
                let hot = hot.0;
                let Some(hot) = u32::try_from(hot)
                    .ok()
                    .filter(|&hot| hot >= 1 && hot < count)
                else {
                    let message = format!(
                        "must be between 1 and count - 1 ({}), got {hot}",
                        count.saturating_sub(1)
                    );
                    r.refuse("hot_keys", message);
                    return None;
                };
                let share = r.percent("hot_share_percent", None).ok()?;
                KeyDistribution::Hot {
                    hot_keys: hot,
                    share_permille: share.expect("written"),
                }
            }
        };
        Some(KeyFamilySpec {
            name: name.to_owned(),
            count,
            distribution,
        })
    }
}

/// A database's collapse: `recover_below < above`, `throughput_percent` in 1..=99.
fn collapse(r: &mut TableReader) -> Option<Collapse> {
    let above = r.count("above", None).ok()?.expect("required");
    let throughput_percent = r.count("throughput_percent", None).ok()?.expect("required");
    let recover_below = r.count("recover_below", None).ok()?.expect("required");
    if recover_below >= above {
        let message = format!(
            "must be less than `above` ({above}): a database recovers once load falls below \
             where it collapsed"
        );
        r.refuse("recover_below", message);
        return None;
    }
    Some(Collapse {
        above,
        throughput_percent,
        recover_below,
    })
}

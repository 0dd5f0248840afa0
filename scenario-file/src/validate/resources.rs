//! The resources the flows run against, read through their declarations
//! (`crate::resource_keys`): a database (and its `collapse`), every key through
//! [`TableReader`], which applies the defaults and the declared bounds; here, what the
//! declaration cannot say: a key that applies only with another, and the bounds between keys.

use outagelab_sim::scenario::{Collapse, ConnectionLimit, DatabaseSpec};

use super::Validator;
use super::table::TableReader;
use crate::resource_keys::{DATABASE, RawDatabase};

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

//! The resources the flows run against, read through their declarations
//! (`crate::resource_keys`): a database (and its `collapse`), a key family and a Redis server
//! (and its `preload`), every key through
//! [`TableReader`], which applies the defaults and the declared bounds; here, what the
//! declaration cannot say: a key that applies only with another, and the bounds between keys.

use std::num::NonZeroU32;

use outagelab_sim::scenario::{
    Collapse, ConnectionLimit, DatabaseSpec, EvictionPolicy, EvictionSamples, KeyDistribution,
    KeyFamilySpec, MemorySpec, Preload, Replication, ServerSpec,
};

use super::table::TableReader;
use super::{Validator, default, limit};
use crate::kinds::Names;
use crate::raw::RawValue;
use crate::resource_keys::{DATABASE, KEY_FAMILY, RawDatabase, RawKeyFamily, RawServer, SERVER};

/// A key family's `distribution`.
#[derive(Clone, Copy)]
enum Drawn {
    Uniform,
    Hot,
}

const DISTRIBUTIONS: &[(&str, Drawn)] = &[("uniform", Drawn::Uniform), ("hot", Drawn::Hot)];

impl Validator<'_> {
    pub(super) fn server(
        &mut self,
        name: &str,
        raw: &RawServer,
        names: &Names,
        keys: &[KeyFamilySpec],
    ) -> ServerSpec {
        let table_span = self.key_span(&["servers", name]);
        let prefix = format!("servers.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &SERVER, table_span);
        let preload = preload(&mut r, names, keys);
        let command_cost = r
            .duration("command_cost", None)
            .ok()
            .flatten()
            .unwrap_or_default();
        let byte_rate = r.bandwidth("byte_rate").ok().flatten();
        let persistence = r.flag("persistence");
        let replica_of = replication(&mut r, name, names);
        let memory = memory(&mut r);
        let hz = r.count("hz", None).ok().flatten().unwrap_or(default::HZ);
        ServerSpec {
            preload,
            name: name.to_owned(),
            command_cost,
            byte_rate,
            persistence,
            replica_of,
            memory,
            hz: NonZeroU32::new(hz),
        }
    }

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

/// A server's `preload`: each entry's family, how many of its keys and their values' size.
fn preload(r: &mut TableReader, names: &Names, keys: &[KeyFamilySpec]) -> Vec<Preload> {
    let mut preload = Vec::new();
    let Some((_, entries)) = r.tables("preload") else {
        return preload;
    };
    for (index, entry) in entries.iter().enumerate() {
        let prefix = format!("{}.preload[{index}]", r.prefix);
        let mut e = r.over("preload", prefix, entry.get_ref(), entry.span());
        let written = e.name("key").expect("required");
        let key = e.key("key");
        let Some(family) = e.validator.resolve(&names.keys, &written, &key) else {
            continue;
        };
        let family_count = keys
            .iter()
            .find(|k| k.name == *written.get_ref())
            .map_or(0, |k| k.count);
        let count = match e.whole_in("count", 1..=family_count, "") {
            Ok(Some(count)) => count,
            Ok(None) => family_count,
            Err(_) => continue,
        };
        // A value's size is declared with its default.
        let Ok(Some(value_bytes)) = e.value_size("value") else {
            continue;
        };
        preload.push(Preload {
            family,
            count,
            value_bytes,
        });
    }
    preload
}

/// `replica_of` and `replication_lag`: a replica of another server (a primary).
fn replication(r: &mut TableReader, name: &str, names: &Names) -> Option<Replication> {
    let Some(primary_name) = r.name("replica_of") else {
        if r.written("replication_lag").is_some() {
            r.refuse(
                "replication_lag",
                "only a replica has a lag: give `replica_of` too",
            );
        }
        return None;
    };
    let key = r.key("replica_of");
    let primary = r.validator.resolve(&names.servers, &primary_name, &key)?;
    if primary_name.get_ref() == name {
        r.refuse("replica_of", "a server cannot replicate itself");
        return None;
    }
    if names
        .servers
        .get(primary_name.get_ref())
        .is_some_and(|(_, p)| p.keys.get("replica_of").is_some())
    {
        let message = format!(
            "`{}` is itself a replica: replicate its primary (chains are not modelled)",
            primary_name.get_ref()
        );
        r.refuse("replica_of", message);
        return None;
    }
    let lag = r
        .duration("replication_lag", None)
        .ok()
        .flatten()
        .unwrap_or_default();
    Some(Replication { primary, lag })
}

/// A server's memory settings: what a key costs, the limit, and the eviction policy, each
/// written or as declared.
fn memory(r: &mut TableReader) -> MemorySpec {
    let key_bytes = key_size(r, "key_bytes");
    let key_overhead = key_size(r, "key_overhead");
    // As in Redis, `maxmemory 0` is no limit.
    let maxmemory = r
        .size("maxmemory")
        .ok()
        .flatten()
        .filter(|bytes| *bytes > 0);
    let declared = r.default_word("maxmemory_policy");
    let mut policy = EvictionPolicy::from_name(declared.expect("declared with a default"))
        .expect("the declared default is a policy");
    if let Some(value) = r.name("maxmemory_policy") {
        let name = value.get_ref().as_str();
        match EvictionPolicy::from_name(name) {
            Some(written) => policy = written,
            None => {
                let known = EvictionPolicy::ALL.map(EvictionPolicy::name);
                let hint = crate::suggest::closest(name, known.iter().copied())
                    .map(|near| format!("did you mean `{near}`? "))
                    .unwrap_or_default();
                let message = format!(
                    "unknown policy `{name}`: {hint}(policies: {})",
                    known.join(", ")
                );
                r.refuse("maxmemory_policy", message);
            }
        }
    }
    let samples = r.count("maxmemory_samples", None);
    let samples = if r.flag("maxmemory_exact") {
        if r.written("maxmemory_samples").is_some() {
            r.refuse(
                "maxmemory_exact",
                "exact eviction looks at every candidate key: leave maxmemory_samples out",
            );
        }
        EvictionSamples::Exact
    } else {
        // Declared with a default, from 1; a refused count fails the file, so its stand-in
        // never runs.
        let samples = samples.ok().flatten().and_then(NonZeroU32::new);
        EvictionSamples::Sampled(samples.unwrap_or(NonZeroU32::MIN))
    };
    MemorySpec {
        key_bytes,
        key_overhead,
        maxmemory,
        policy,
        samples,
    }
}

/// `key_bytes` or `key_overhead`: at most 512 MiB. A refused size fails the file, so the 0
/// that stands in for it never runs.
fn key_size(r: &mut TableReader, field: &str) -> u32 {
    let Ok(Some(bytes)) = r.size(field) else {
        return 0;
    };
    match u32::try_from(bytes) {
        Ok(bytes) if u64::from(bytes) <= limit::VALUE_BYTES => bytes,
        _ => {
            let message = format!("{bytes} bytes is above 512MiB, more than a key of Redis takes");
            r.refuse(field, message);
            0
        }
    }
}

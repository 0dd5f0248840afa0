//! The keys of the resources the flows run against, declared once ([`KeySpec`]: name, value,
//! default, range, one line of doc): `[databases.<name>]` (and its `collapse`),
//! `[keys.<name>]` and `[servers.<name>]` (and its `preload`). From them come the readers
//! ([`RawDatabase`], [`RawKeyFamily`], [`RawServer`]), the validation's getters (`validate/resources.rs`, through
//! `validate/table.rs`), the missing-key messages' meanings and the key tables of
//! `docs/scenario-format.md` (checked by `tests/integration/docs_tables.rs`).

use serde::de::MapAccess;
use toml::Spanned;

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table,
};
use crate::raw::{Declared, RawTable, RawValue, Written, nested_table};
use crate::validate::limit;

/// A `[databases.<name>]` table as written.
pub type RawDatabase = RawTable<Database>;

/// A `[keys.<name>]` table as written.
pub type RawKeyFamily = RawTable<KeyFamily>;

/// A `[servers.<name>]` table as written.
pub type RawServer = RawTable<Server>;

/// The declaration of `[databases.<name>]`.
pub struct Database;
/// The declaration of a database's `collapse`.
pub struct Collapse;
/// The declaration of `[keys.<name>]`.
pub struct KeyFamily;

/// The declaration of `[servers.<name>]`.
pub struct Server;
/// The declaration of one entry of a server's `preload`.
pub struct Preload;

impl Declared for Server {
    const SPEC: &'static TableSpec = &SERVER;

    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        debug_assert_eq!(key.name, "preload");
        let entries = map.next_value::<Spanned<Vec<Spanned<RawTable<Preload>>>>>()?;
        let span = entries.span();
        let tables: Vec<Spanned<Written>> = entries
            .into_inner()
            .into_iter()
            .map(|entry| {
                let span = entry.span();
                Spanned::new(span, entry.into_inner().keys)
            })
            .collect();
        Ok(Spanned::new(span, RawValue::Tables(tables)))
    }
}

impl Declared for Preload {
    const SPEC: &'static TableSpec = &PRELOAD;
}

impl Declared for KeyFamily {
    const SPEC: &'static TableSpec = &KEY_FAMILY;
}

impl Declared for Database {
    const SPEC: &'static TableSpec = &DATABASE;

    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        debug_assert_eq!(key.name, "collapse");
        nested_table::<Collapse, M>(map)
    }
}

impl Declared for Collapse {
    const SPEC: &'static TableSpec = &COLLAPSE;
}

const DATABASE_KEYS: [KeySpec; 5] = [
    KeySpec {
        name: "latency",
        value: Value::Latency,
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "how long a query takes: a duration (`\"50ms\"`), or `{ distribution = \
              \"uniform\", min = \"49ms\", max = \"51ms\" }`, or `{ distribution = \
              \"exponential\", mean = \"5ms\", min = \"1ms\" }` (min plus an exponential; `min` \
              defaults to 0)",
    },
    KeySpec {
        name: "capacity",
        value: Value::Count,
        default: KeyDefault::Otherwise("none (never slows down)"),
        range: Range::Between {
            min: 1,
            max: u32::MAX,
            why: "a database of zero capacity runs nothing; leave it out for no limit",
        },
        doc: "queries that run at full speed; above it, running queries share it equally, so \
              each runs `capacity / running` as fast",
    },
    KeySpec {
        name: "max_connections",
        value: Value::Count,
        default: KeyDefault::Otherwise("none (no limit)"),
        range: Range::Between {
            min: 1,
            max: u32::MAX,
            why: "a database with no connection runs nothing; leave it out for no limit",
        },
        doc: "queries that hold a connection at once (running or waiting for an advisory \
              lock); a query that finds them all taken ends its request as `refused` (\"too \
              many connections\"), unless it may wait in the `connection_queue`",
    },
    KeySpec {
        name: "connection_queue",
        value: Value::Count,
        default: KeyDefault::Is("0"),
        range: Range::Between {
            min: 0,
            max: u32::MAX,
            why: "the queries that may wait for a connection",
        },
        doc: "with `max_connections`: queries that may wait for a connection, in arrival \
              order, holding no capacity (a full queue refuses); a waiting query's client-side \
              `timeout` runs meanwhile, and a query whose client gave up still takes its \
              connection when its turn comes",
    },
    KeySpec {
        name: "collapse",
        value: Value::Table(&COLLAPSE),
        default: KeyDefault::Otherwise("none (never collapses)"),
        range: Range::Any,
        doc: "makes the database thrash past a load (below): `{ above = N, \
              throughput_percent = P, recover_below = M }`",
    },
];

const DATABASE_NAMES: [&str; DATABASE_KEYS.len()] = key_names(&DATABASE_KEYS);

pub const DATABASE: TableSpec = TableSpec::plain("a database", &DATABASE_KEYS, &DATABASE_NAMES);

const COLLAPSE_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "above",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Between {
            min: 1,
            max: u32::MAX,
            why: "the running queries past which the database collapses",
        },
        doc: "once more than this many queries run, the database collapses",
    },
    KeySpec {
        name: "throughput_percent",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Between {
            min: 1,
            max: 99,
            why: "the share of its speed a collapsed database keeps",
        },
        doc: "a collapsed database runs each query at this % of the speed `capacity` sharing \
              gives it",
    },
    KeySpec {
        name: "recover_below",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Between {
            min: 1,
            max: u32::MAX,
            why: "the running queries below which it recovers",
        },
        doc: "it stays collapsed until fewer than this many run; less than `above`",
    },
];

const COLLAPSE_NAMES: [&str; COLLAPSE_KEYS.len()] = key_names(&COLLAPSE_KEYS);

pub const COLLAPSE: TableSpec =
    TableSpec::plain("a database's collapse", &COLLAPSE_KEYS, &COLLAPSE_NAMES);

const KEY_FAMILY_KEYS: [KeySpec; 4] = [
    KeySpec {
        name: "count",
        value: Value::Count,
        default: KeyDefault::Is("1"),
        range: Range::Between {
            min: 1,
            max: limit::KEYS_PER_FAMILY,
            why: "a family needs a key",
        },
        doc: "keys in the family (a family of one is a fixed key such as a counter or a lock)",
    },
    KeySpec {
        name: "distribution",
        value: Value::Enum(&["uniform", "hot"]),
        default: KeyDefault::Is("\"uniform\""),
        range: Range::Any,
        doc: "how a request draws its key: uniformly, or `\"hot\"`: `hot_share_percent` of the \
              draws go to the first `hot_keys` keys, the rest to the others (both uniformly)",
    },
    KeySpec {
        name: "hot_keys",
        value: Value::Count,
        default: KeyDefault::Otherwise("required with `\"hot\"`"),
        range: Range::Checked("from 1 to `count` - 1"),
        doc: "with `\"hot\"` only: the keys of the hot set, the family's first",
    },
    KeySpec {
        name: "hot_share_percent",
        value: Value::Number,
        default: KeyDefault::Otherwise("required with `\"hot\"`"),
        range: Range::Checked("from 0 to 100, to 0.1%"),
        doc: "with `\"hot\"` only: the share of the draws that go to the hot set",
    },
];

const KEY_FAMILY_NAMES: [&str; KEY_FAMILY_KEYS.len()] = key_names(&KEY_FAMILY_KEYS);

pub const KEY_FAMILY: TableSpec =
    TableSpec::plain("a key family", &KEY_FAMILY_KEYS, &KEY_FAMILY_NAMES);

/// `maxmemory_policy`'s words: `EvictionPolicy::ALL`'s names, in order (checked by a test).
pub const EVICTION_POLICIES: [&str; 5] = [
    "noeviction",
    "allkeys-lru",
    "volatile-lru",
    "allkeys-random",
    "volatile-ttl",
];

const SERVER_KEYS: [KeySpec; 13] = [
    KeySpec {
        name: "command_cost",
        value: Value::Duration,
        default: KeyDefault::Is("\"5us\""),
        range: Range::Any,
        doc: "fixed cost of any command",
    },
    KeySpec {
        name: "byte_rate",
        value: Value::Bandwidth,
        default: KeyDefault::Otherwise("none (bytes are free)"),
        range: Range::Checked("more than zero"),
        doc: "per-byte cost: request and reply bytes are processed at this rate",
    },
    KeySpec {
        name: "persistence",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "whether keys survive a `stop` fault",
    },
    KeySpec {
        name: "preload",
        value: Value::Tables(&PRELOAD),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "keys present at the start, without expiry: `[{ key = \"product\", count = 1000, \
              value = \"2KiB\" }]` (below)",
    },
    KeySpec {
        name: "key_bytes",
        value: Value::Size,
        default: KeyDefault::Is("\"16B\""),
        range: Range::Checked("up to 512 MiB"),
        doc: "bytes of every key's name, one size for every family",
    },
    KeySpec {
        name: "key_overhead",
        value: Value::Size,
        default: KeyDefault::Is("\"64B\""),
        range: Range::Checked("up to 512 MiB"),
        doc: "bytes the server spends on every key besides its name and value (dictionary \
              entry, object header, expiry)",
    },
    KeySpec {
        name: "maxmemory",
        value: Value::Size,
        default: KeyDefault::Otherwise("none (unlimited)"),
        range: Range::Any,
        doc: "the memory limit (`0` is no limit, as in Redis). Note Redis' `30mb` is \
              `\"30MiB\"` here",
    },
    KeySpec {
        name: "maxmemory_policy",
        value: Value::OneOf {
            values: &EVICTION_POLICIES,
            noun: "policy",
            plural: "policies",
        },
        default: KeyDefault::Is("\"noeviction\""),
        range: Range::Any,
        doc: "which key a server over its limit evicts (below; Redis' default is \
              `\"noeviction\"` too)",
    },
    KeySpec {
        name: "maxmemory_samples",
        value: Value::Count,
        default: KeyDefault::Is("5"),
        range: Range::Between {
            min: 1,
            max: 64,
            why: "an eviction looks at one key at least",
        },
        doc: "candidates an LRU or TTL eviction draws (Redis' default 5)",
    },
    KeySpec {
        name: "maxmemory_exact",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "`true`: evict the best of all candidates (exact LRU, or the key that expires \
              soonest) instead of the best of a sample; refused with `maxmemory_samples`",
    },
    KeySpec {
        name: "hz",
        value: Value::Count,
        default: KeyDefault::Is("10"),
        range: Range::Between {
            min: 1,
            max: 500,
            why: "Redis' cron runs at least once a second",
        },
        doc: "the server's cron frequency (Redis' default 10): a `pause` fault ends on the \
              first cron tick at or after its end, ticks falling every 1 s / hz (to the \
              nanosecond, rounded down) from time zero, so up to 100 ms late at 10 Hz",
    },
    KeySpec {
        name: "replica_of",
        value: Value::Ref("servers"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "this server is a replica of that primary (above)",
    },
    KeySpec {
        name: "replication_lag",
        value: Value::Duration,
        default: KeyDefault::Is("\"10ms\""),
        range: Range::Any,
        doc: "with `replica_of`: how far behind the primary it is",
    },
];

const SERVER_NAMES: [&str; SERVER_KEYS.len()] = key_names(&SERVER_KEYS);

pub const SERVER: TableSpec = TableSpec::plain("a server", &SERVER_KEYS, &SERVER_NAMES);

const PRELOAD_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "key",
        value: Value::Ref("keys"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the key family whose keys are present",
    },
    KeySpec {
        name: "count",
        value: Value::Count,
        default: KeyDefault::Otherwise("all of the family"),
        range: Range::Checked("from 1 to the family's `count`"),
        doc: "the family's first `count` keys are present",
    },
    KeySpec {
        name: "value",
        value: Value::Size,
        default: KeyDefault::Is("64"),
        range: Range::Checked("up to 512 MiB"),
        doc: "the size of each key's value",
    },
];

const PRELOAD_NAMES: [&str; PRELOAD_KEYS.len()] = key_names(&PRELOAD_KEYS);

pub const PRELOAD: TableSpec =
    TableSpec::plain("a server's preload", &PRELOAD_KEYS, &PRELOAD_NAMES);

/// The key table of `[servers.<name>]` in `docs/scenario-format.md`.
pub fn server_table() -> String {
    markdown_table(&SERVER)
}

/// The key table of a server's `preload` in `docs/scenario-format.md`.
pub fn preload_table() -> String {
    markdown_table(&PRELOAD)
}

/// The key table of `[databases.<name>]` in `docs/scenario-format.md`.
pub fn database_table() -> String {
    markdown_table(&DATABASE)
}

/// The key table of a database's `collapse` in `docs/scenario-format.md`.
pub fn collapse_table() -> String {
    markdown_table(&COLLAPSE)
}

/// The key table of `[keys.<name>]` in `docs/scenario-format.md`.
pub fn key_family_table() -> String {
    markdown_table(&KEY_FAMILY)
}

#[cfg(test)]
mod tests {
    use outagelab_sim::scenario::EvictionPolicy;

    #[test]
    fn the_eviction_policies_are_the_simulators() {
        assert_eq!(
            super::EVICTION_POLICIES,
            EvictionPolicy::ALL.map(EvictionPolicy::name)
        );
    }
}

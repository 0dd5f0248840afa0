//! The keys of the policies that keep state of their own, declared once ([`KeySpec`]: name,
//! value, default, range, one line of doc): `[caches.<name>]`, `[rate_limits.<name>]`,
//! `[kv_stores.<name>]`, `[throttles.<name>]` and `[locks.<name>]`. From them come the readers
//! ([`RawCache`], [`RawRateLimit`], [`RawKvStore`], [`RawThrottle`], [`RawLock`]), the
//! validation's getters (`validate/policies.rs`, through `validate/table.rs`), the missing-key
//! messages' meanings and the key tables of `docs/scenario-format.md` (checked by
//! `tests/integration/docs_tables.rs`).

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table,
};
use crate::raw::{Declared, RawTable};

/// A `[caches.<name>]` table as written.
pub type RawCache = RawTable<Cache>;
/// A `[rate_limits.<name>]` table as written.
pub type RawRateLimit = RawTable<RateLimit>;
/// A `[kv_stores.<name>]` table as written.
pub type RawKvStore = RawTable<KvStore>;
/// A `[throttles.<name>]` table as written.
pub type RawThrottle = RawTable<Throttle>;
/// A `[locks.<name>]` table as written.
pub type RawLock = RawTable<Lock>;

/// The declaration of `[caches.<name>]`.
pub struct Cache;
/// The declaration of `[rate_limits.<name>]`.
pub struct RateLimit;
/// The declaration of `[kv_stores.<name>]`.
pub struct KvStore;
/// The declaration of `[throttles.<name>]`.
pub struct Throttle;
/// The declaration of `[locks.<name>]`.
pub struct Lock;

impl Declared for Cache {
    const SPEC: &'static TableSpec = &CACHE;
}

impl Declared for RateLimit {
    const SPEC: &'static TableSpec = &RATE_LIMIT;
}

impl Declared for KvStore {
    const SPEC: &'static TableSpec = &KV_STORE;
}

impl Declared for Throttle {
    const SPEC: &'static TableSpec = &THROTTLE;
}

impl Declared for Lock {
    const SPEC: &'static TableSpec = &LOCK;
}

const CACHE_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "max_entries",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("at least 1"),
        doc: "the entries it holds at most; the least recently used goes first",
    },
    KeySpec {
        name: "max_bytes",
        value: Value::Size,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("at least 1"),
        doc: "the bytes its entries hold at most",
    },
    KeySpec {
        name: "ttl",
        value: Value::Duration,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("longer than zero"),
        doc: "an entry read `ttl` or more after its insert is a miss",
    },
];

const CACHE_NAMES: [&str; CACHE_KEYS.len()] = key_names(&CACHE_KEYS);

pub const CACHE: TableSpec = TableSpec::plain("a cache", &CACHE_KEYS, &CACHE_NAMES);

const RATE_LIMIT_KEYS: [KeySpec; 7] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled limiter admits everything",
    },
    KeySpec {
        name: "algorithm",
        value: Value::Enum(&["token_bucket", "gcra"]),
        default: KeyDefault::Is("\"token_bucket\""),
        range: Range::Any,
        doc: "a token bucket, or GCRA, which decides the same",
    },
    KeySpec {
        name: "capacity",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("at least 1"),
        doc: "the burst, in requests",
    },
    KeySpec {
        name: "rate",
        value: Value::Number,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("above 0, to 0.001"),
        doc: "refill, in requests per second (to 0.001/s)",
    },
    KeySpec {
        name: "store",
        value: Value::Ref("connections"),
        default: KeyDefault::Otherwise("none (local)"),
        range: Range::Any,
        doc: "the connection the buckets live behind; steps then name a `key`",
    },
    KeySpec {
        name: "when_unreachable",
        value: Value::Enum(&["open", "closed"]),
        default: KeyDefault::Is("\"open\""),
        range: Range::Any,
        doc: "`\"open\"`: admit unchecked (counted as `fail_open_admitted`); `\"closed\"`: \
              refuse",
    },
    KeySpec {
        name: "fail_closed_retry_after",
        value: Value::Duration,
        default: KeyDefault::Is("\"1s\""),
        range: Range::Any,
        doc: "with `\"closed\"`: the Retry-After of a refusal",
    },
];

const RATE_LIMIT_NAMES: [&str; RATE_LIMIT_KEYS.len()] = key_names(&RATE_LIMIT_KEYS);

pub const RATE_LIMIT: TableSpec =
    TableSpec::plain("a rate limiter", &RATE_LIMIT_KEYS, &RATE_LIMIT_NAMES);

const KV_STORE_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "read_latency",
        value: Value::Latency,
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "how long a `get` takes",
    },
    KeySpec {
        name: "write_latency",
        value: Value::Latency,
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "how long a `put` takes to land",
    },
    KeySpec {
        name: "staleness_max",
        value: Value::Duration,
        default: KeyDefault::Is("\"0s\""),
        range: Range::Any,
        doc: "a read may lag the latest write by up to this (uniform): an eventually \
              consistent store",
    },
];

const KV_STORE_NAMES: [&str; KV_STORE_KEYS.len()] = key_names(&KV_STORE_KEYS);

pub const KV_STORE: TableSpec = TableSpec::plain("a KV store", &KV_STORE_KEYS, &KV_STORE_NAMES);

const THROTTLE_KEYS: [KeySpec; 8] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled throttle admits everything",
    },
    KeySpec {
        name: "form",
        value: Value::Enum(&["atomic", "kv"]),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "`\"atomic\"`: check and increment in one step; `\"kv\"`: read the counter from \
              `store`, decide, then write it",
    },
    KeySpec {
        name: "inflight_max",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("at least 1"),
        doc: "the cap per key",
    },
    KeySpec {
        name: "retry_after",
        value: Value::Duration,
        default: KeyDefault::Is("\"1s\""),
        range: Range::Checked("whole seconds, longer than zero"),
        doc: "the Retry-After of a refusal",
    },
    KeySpec {
        name: "counter_ttl",
        value: Value::Duration,
        default: KeyDefault::Otherwise("none (never expires)"),
        range: Range::Checked("longer than zero, and than the store's `staleness_max`"),
        doc: "the counter's expiry, a crash safety net that also frees leaked slots",
    },
    KeySpec {
        name: "ttl_mode",
        value: Value::Enum(&["fixed", "refreshed"]),
        default: KeyDefault::Is("\"refreshed\""),
        range: Range::Any,
        doc: "with `counter_ttl`: `\"refreshed\"`: every write sets the expiry to write + TTL \
              (the plan); `\"fixed\"`: the expiry is set when the counter is created and kept",
    },
    KeySpec {
        name: "store",
        value: Value::Ref("kv_stores"),
        default: KeyDefault::Otherwise("required for `\"kv\"`, refused for `\"atomic\"`"),
        range: Range::Any,
        doc: "where a `\"kv\"` throttle keeps its counters",
    },
    KeySpec {
        name: "release_loss_percent",
        value: Value::Number,
        default: KeyDefault::Otherwise("`0`"),
        range: Range::Checked("from 0 to 100, to 0.1%"),
        doc: "chance that a release never lands: a fire-and-forget decrement lost",
    },
];

const THROTTLE_NAMES: [&str; THROTTLE_KEYS.len()] = key_names(&THROTTLE_KEYS);

pub const THROTTLE: TableSpec = TableSpec::plain("a throttle", &THROTTLE_KEYS, &THROTTLE_NAMES);

const LOCK_KEYS: [KeySpec; 4] = [
    KeySpec {
        name: "lease",
        value: Value::Duration,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("longer than zero"),
        doc: "the holder's expiry on the server (`PX`): a holder that never releases (its \
              request failed) holds the lock until then",
    },
    KeySpec {
        name: "retry_delay",
        value: Value::Duration,
        default: KeyDefault::Is("\"50ms\""),
        range: Range::Checked("longer than zero and at most `acquire_timeout`"),
        doc: "the wait after an attempt that found the lock taken",
    },
    KeySpec {
        name: "retry_jitter",
        value: Value::Enum(&["none", "full", "equal"]),
        default: KeyDefault::Is("\"none\""),
        range: Range::Any,
        doc: "`\"full\"`: each wait is uniform in [1 ns, `retry_delay`]; `\"equal\"`: in \
              [`retry_delay` − `retry_delay`/2, `retry_delay`] (a stream per lock, from the \
              seed)",
    },
    KeySpec {
        name: "acquire_timeout",
        value: Value::Duration,
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "an acquire still without the lock this long after it began fails with \
              `lock_timeout` (seed 000's `ELOCKTIMEOUT`, answered 503)",
    },
];

const LOCK_NAMES: [&str; LOCK_KEYS.len()] = key_names(&LOCK_KEYS);

pub const LOCK: TableSpec = TableSpec::plain("a lock", &LOCK_KEYS, &LOCK_NAMES);

/// The key table of `[caches.<name>]` in `docs/scenario-format.md`.
pub fn cache_table() -> String {
    markdown_table(&CACHE)
}

/// The key table of `[rate_limits.<name>]` in `docs/scenario-format.md`.
pub fn rate_limit_table() -> String {
    markdown_table(&RATE_LIMIT)
}

/// The key table of `[kv_stores.<name>]` in `docs/scenario-format.md`.
pub fn kv_store_table() -> String {
    markdown_table(&KV_STORE)
}

/// The key table of `[throttles.<name>]` in `docs/scenario-format.md`.
pub fn throttle_table() -> String {
    markdown_table(&THROTTLE)
}

/// The key table of `[locks.<name>]` in `docs/scenario-format.md`.
pub fn lock_table() -> String {
    markdown_table(&LOCK)
}

//! The keys of a flow step ([`STEP`]) and of its action tables, declared once ([`KeySpec`]: name, value,
//! default, range, one line of doc): `redis = { ... }`, `db = { ... }`, `work = { ... }` (a
//! distribution), `call = { ... }`, `cache = { ... }`, `throttle = { ... }`,
//! `rate_limit = { ... }` and `lock = { ... }`. From them come the readers
//! ([`RawRedisStep`], [`RawDbStep`], [`RawDistribution`], [`RawCallStep`], [`RawCacheStep`],
//! [`RawThrottleStep`], [`RawRateLimitStep`], [`RawLockStep`], which a [`RawStep`] holds),
//! the validation's getters (`validate/steps.rs`, through `validate/table.rs`), the
//! missing-key messages' meanings ([`action_table`]) and the key tables of
//! `docs/scenario-format.md` (checked by `tests/integration/docs_tables.rs`). The table of a
//! `work` step, [`DISTRIBUTION`], is every latency's written as a table (a database's, a
//! query's, a call's: `raw::RawLatency`). A step is itself a declared table: its actions,
//! of which it has one (`raw::STEP_ACTIONS`), then its own keys beside the action (its
//! policies, their order, what its result does to the request), read through the same
//! reader and checked in `validate.rs` (`Validator::step`); the own keys have their
//! reference table.

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table,
};
use serde::de::MapAccess;
use toml::Spanned;

use crate::raw::{Declared, RawTable, RawValue, nested_table};

/// A step's `cache = { ... }` as written.
pub type RawCacheStep = RawTable<CacheStep>;
/// A step's `throttle = { ... }` as written.
pub type RawThrottleStep = RawTable<ThrottleStep>;
/// A step's `rate_limit = { ... }` as written.
pub type RawRateLimitStep = RawTable<RateLimitStep>;
/// A step's `lock = { ... }` as written.
pub type RawLockStep = RawTable<LockStep>;

/// A latency written as a table (`work = { distribution = "uniform", ... }`), as written.
pub type RawDistribution = RawTable<DistributionTable>;

/// A step's `redis = { ... }` as written.
pub type RawRedisStep = RawTable<RedisStep>;
/// A step's `db = { ... }` as written.
pub type RawDbStep = RawTable<DbStep>;
/// A step's `call = { ... }` as written.
pub type RawCallStep = RawTable<CallStep>;

/// A flow step as written: its action and its own keys.
pub type RawStep = RawTable<Step>;

/// The declaration of a flow step.
pub struct Step;
/// The declaration of a step's `redis`.
pub struct RedisStep;
/// The declaration of a step's `db`.
pub struct DbStep;
/// The declaration of a step's `call`.
pub struct CallStep;
/// The declaration of a latency's table, a `work` step's.
pub struct DistributionTable;
/// The declaration of a step's `cache`.
pub struct CacheStep;
/// The declaration of a step's `throttle`.
pub struct ThrottleStep;
/// The declaration of a step's `rate_limit`.
pub struct RateLimitStep;
/// The declaration of a step's `lock`.
pub struct LockStep;

impl Declared for DistributionTable {
    const SPEC: &'static TableSpec = &DISTRIBUTION;
}

impl Declared for Step {
    const SPEC: &'static TableSpec = &STEP;

    /// An action's table, read as its own declaration says.
    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        match key.name {
            "redis" => nested_table::<RedisStep, M>(map),
            "db" => nested_table::<DbStep, M>(map),
            "call" => nested_table::<CallStep, M>(map),
            "cache" => nested_table::<CacheStep, M>(map),
            "throttle" => nested_table::<ThrottleStep, M>(map),
            "rate_limit" => nested_table::<RateLimitStep, M>(map),
            "lock" => nested_table::<LockStep, M>(map),
            name => unreachable!("a step declares no table `{name}`"),
        }
    }
}

impl Declared for RedisStep {
    const SPEC: &'static TableSpec = &REDIS_STEP;
    const EXAMPLE: Option<&'static str> =
        Some("redis = { command = \"GET\", connection = \"cache\", key = \"product\" }");
}

impl Declared for DbStep {
    const SPEC: &'static TableSpec = &DB_STEP;
    const EXAMPLE: Option<&'static str> = Some("db = { name = \"main\", timeout = \"1s\" }");
}

impl Declared for CallStep {
    const SPEC: &'static TableSpec = &CALL_STEP;
    const EXAMPLE: Option<&'static str> = Some("call = { latency = \"20ms\", error_percent = 5 }");
}

impl Declared for CacheStep {
    const SPEC: &'static TableSpec = &CACHE_STEP;
    const EXAMPLE: Option<&'static str> =
        Some("cache = { name = \"l1\", op = \"get\", key = \"product\" }");
}

impl Declared for ThrottleStep {
    const SPEC: &'static TableSpec = &THROTTLE_STEP;
    const EXAMPLE: Option<&'static str> =
        Some("throttle = { name = \"cascade\", op = \"acquire\", key = \"space\" }");
}

impl Declared for RateLimitStep {
    const SPEC: &'static TableSpec = &RATE_LIMIT_STEP;
    const EXAMPLE: Option<&'static str> = Some("rate_limit = { name = \"api\", key = \"bucket\" }");
}

impl Declared for LockStep {
    const SPEC: &'static TableSpec = &LOCK_STEP;
    const EXAMPLE: Option<&'static str> = Some(
        "lock = { name = \"files\", op = \"acquire\", mode = \"exclusive\", connection = \"c\", \
         key = \"lock\" }",
    );
}

/// The table of the step action `name`, as [`STEP`] declares it (a `work` step's is
/// [`DISTRIBUTION`]), for the messages of a key missing at `flows.<name>.steps[i].<action>`
/// (`suggest`); `None` for a key that is no action.
pub fn action_table(name: &str) -> Option<&'static TableSpec> {
    let key = STEP_KEYS[..ACTIONS].iter().find(|key| key.name == name)?;
    match key.value {
        Value::Table(spec) => Some(spec),
        Value::Latency => Some(&DISTRIBUTION),
        _ => None,
    }
}

const DISTRIBUTION_KEYS: [KeySpec; 4] = [
    KeySpec {
        name: "distribution",
        value: Value::Enum(&["uniform", "exponential"]),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "`\"uniform\"`: drawn evenly from `min` to `max`; `\"exponential\"`: `min` plus \
              an exponential of mean `mean`",
    },
    KeySpec {
        name: "min",
        value: Value::Duration,
        default: KeyDefault::Otherwise(
            "required with `\"uniform\"`, `\"0s\"` with `\"exponential\"`",
        ),
        range: Range::Any,
        doc: "the shortest draw",
    },
    KeySpec {
        name: "max",
        value: Value::Duration,
        default: KeyDefault::Otherwise(
            "required with `\"uniform\"`, refused with `\"exponential\"`",
        ),
        range: Range::Any,
        doc: "with `\"uniform\"` only: the longest draw, at least `min`",
    },
    KeySpec {
        name: "mean",
        value: Value::Duration,
        default: KeyDefault::Otherwise(
            "required with `\"exponential\"`, refused with `\"uniform\"`",
        ),
        range: Range::Any,
        doc: "with `\"exponential\"` only: the mean of the exponential added to `min`, longer \
              than zero",
    },
];

const DISTRIBUTION_NAMES: [&str; DISTRIBUTION_KEYS.len()] = key_names(&DISTRIBUTION_KEYS);

/// A latency's table: a `work` step's, and any latency's not written as a duration.
pub const DISTRIBUTION: TableSpec = TableSpec::plain(
    "a distribution table",
    &DISTRIBUTION_KEYS,
    &DISTRIBUTION_NAMES,
);

const REDIS_STEP_KEYS: [KeySpec; 7] = [
    KeySpec {
        name: "command",
        value: Value::Enum(&["GET", "SET", "SET NX PX", "INCR", "DEL", "PUBLISH"]),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the command the step sends: `\"SET NX PX\"` is a lock's, failing with \
              `lock_busy` if the key exists; `\"PUBLISH\"` sends the key to `channel`'s \
              subscribers (see Pub/Sub above)",
    },
    KeySpec {
        name: "connection",
        value: Value::Ref("connections"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the connection the command goes through (not a subscriber, which sends none)",
    },
    KeySpec {
        name: "key",
        value: Value::Ref("keys"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the family of the request's key, the command's key",
    },
    KeySpec {
        name: "value",
        value: Value::Size,
        default: KeyDefault::Is("64"),
        range: Range::Checked("up to 512 MiB"),
        doc: "with `\"SET\"` and `\"SET NX PX\"` only: the size of the value it writes",
    },
    KeySpec {
        name: "ttl",
        value: Value::Duration,
        default: KeyDefault::Otherwise(
            "none with `\"SET\"`: the key does not expire; required with `\"SET NX PX\"`",
        ),
        range: Range::Longer {
            why: "the key would expire as it is written",
        },
        doc: "with `\"SET\"` and `\"SET NX PX\"` only: the key's expiry (a SET NX PX's PX \
              argument)",
    },
    KeySpec {
        name: "replay_writes",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "on a reconnect slot, replay the command (a write) after its connection died too \
              (below)",
    },
    KeySpec {
        name: "channel",
        value: Value::Name("a channel's name"),
        default: KeyDefault::Otherwise("required with `\"PUBLISH\"`, refused with the others"),
        range: Range::Any,
        doc: "with `\"PUBLISH\"` only: the channel whose subscribers get the key",
    },
];

const REDIS_STEP_NAMES: [&str; REDIS_STEP_KEYS.len()] = key_names(&REDIS_STEP_KEYS);

pub const REDIS_STEP: TableSpec =
    TableSpec::plain("a redis step", &REDIS_STEP_KEYS, &REDIS_STEP_NAMES);

const DB_STEP_KEYS: [KeySpec; 6] = [
    KeySpec {
        name: "name",
        value: Value::Ref("databases"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the database the query runs on",
    },
    KeySpec {
        name: "timeout",
        value: Value::Duration,
        default: KeyDefault::Otherwise("none: the step waits for its query"),
        range: Range::Longer {
            why: "every query would time out",
        },
        doc: "client-side: the step fails with `timeout` after it, the query still running on \
              the database",
    },
    KeySpec {
        name: "latency",
        value: Value::Latency,
        default: KeyDefault::Otherwise("the database's `latency`"),
        range: Range::Any,
        doc: "this query's latency, instead of the database's",
    },
    KeySpec {
        name: "lock",
        value: Value::Ref("keys"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "an advisory lock (`pg_advisory_xact_lock`) on the request's key of this family: \
              the query waits, in arrival order and using no capacity, until the lock is free, \
              and holds it while it runs",
    },
    KeySpec {
        name: "key",
        value: Value::Ref("keys"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "the data the query reads, the request's key of this family, whose freshness is \
              followed (see \"Stale reads\")",
    },
    KeySpec {
        name: "write",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "with `key`: the query commits a new version of it",
    },
];

const DB_STEP_NAMES: [&str; DB_STEP_KEYS.len()] = key_names(&DB_STEP_KEYS);

pub const DB_STEP: TableSpec = TableSpec::plain("a db step", &DB_STEP_KEYS, &DB_STEP_NAMES);

const CALL_STEP_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "latency",
        value: Value::Latency,
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "how long the dependency takes to answer: a duration, or a distribution table \
              as a `work` step's",
    },
    KeySpec {
        name: "error_percent",
        value: Value::Number,
        default: KeyDefault::Is("0"),
        range: Range::Checked("0 to 100, to 0.1%"),
        doc: "the share of calls that fail, at the end of their latency",
    },
    KeySpec {
        name: "error",
        value: Value::Name("an error outcome"),
        default: KeyDefault::Is("\"server_error\""),
        range: Range::Any,
        doc: "the outcome a failed call answers: one error outcome (`\"timeout\"` for a \
              client timeout), not a status class",
    },
];

const CALL_STEP_NAMES: [&str; CALL_STEP_KEYS.len()] = key_names(&CALL_STEP_KEYS);

pub const CALL_STEP: TableSpec = TableSpec::plain("a call step", &CALL_STEP_KEYS, &CALL_STEP_NAMES);

const CACHE_STEP_KEYS: [KeySpec; 4] = [
    KeySpec {
        name: "name",
        value: Value::Ref("caches"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the L1 cache",
    },
    KeySpec {
        name: "op",
        value: Value::Enum(&["get", "put", "invalidate", "flush"]),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "`\"get\"` (a hit or a miss), `\"put\"`, `\"invalidate\"` (the request's key) or \
              `\"flush\"` (empties the cache)",
    },
    KeySpec {
        name: "key",
        value: Value::Ref("keys"),
        default: KeyDefault::Otherwise("required but with `\"flush\"`, which takes none"),
        range: Range::Any,
        doc: "the family of the request's key",
    },
    KeySpec {
        name: "value",
        value: Value::Size,
        default: KeyDefault::Is("64"),
        range: Range::Checked("up to 512 MiB"),
        doc: "with `\"put\"` only: the size of the value it stores",
    },
];

const CACHE_STEP_NAMES: [&str; CACHE_STEP_KEYS.len()] = key_names(&CACHE_STEP_KEYS);

pub const CACHE_STEP: TableSpec =
    TableSpec::plain("a cache step", &CACHE_STEP_KEYS, &CACHE_STEP_NAMES);

const THROTTLE_STEP_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "name",
        value: Value::Ref("throttles"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the throttle",
    },
    KeySpec {
        name: "op",
        value: Value::Enum(&["acquire", "release"]),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "`\"acquire\"`: a slot of the request's key (or fail with `rate_limited`); \
              `\"release\"`: give it back",
    },
    KeySpec {
        name: "key",
        value: Value::Ref("keys"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the family of the request's key, whose slots it counts",
    },
];

const THROTTLE_STEP_NAMES: [&str; THROTTLE_STEP_KEYS.len()] = key_names(&THROTTLE_STEP_KEYS);

pub const THROTTLE_STEP: TableSpec =
    TableSpec::plain("a throttle step", &THROTTLE_STEP_KEYS, &THROTTLE_STEP_NAMES);

const RATE_LIMIT_STEP_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "name",
        value: Value::Ref("rate_limits"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the rate limiter that checks the request",
    },
    KeySpec {
        name: "key",
        value: Value::Ref("keys"),
        default: KeyDefault::Otherwise("required with a limiter's `store`, refused without"),
        range: Range::Any,
        doc: "the family of the request's key: one bucket per key, in the store",
    },
    KeySpec {
        name: "replay_writes",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "with a limiter's `store`: on a reconnect slot, replay the check (a write) after \
              its connection died too (below)",
    },
];

const RATE_LIMIT_STEP_NAMES: [&str; RATE_LIMIT_STEP_KEYS.len()] = key_names(&RATE_LIMIT_STEP_KEYS);

pub const RATE_LIMIT_STEP: TableSpec = TableSpec::plain(
    "a rate limit step",
    &RATE_LIMIT_STEP_KEYS,
    &RATE_LIMIT_STEP_NAMES,
);

const LOCK_STEP_KEYS: [KeySpec; 5] = [
    KeySpec {
        name: "name",
        value: Value::Ref("locks"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the distributed lock (`[locks.<name>]`)",
    },
    KeySpec {
        name: "op",
        value: Value::Enum(&["acquire", "release"]),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "`\"acquire\"`: takes the lock, retrying while it is taken, or fails with \
              `lock_timeout`, the request holding its token; `\"release\"`: gives back the \
              lock the request holds (nothing if it holds none)",
    },
    KeySpec {
        name: "mode",
        value: Value::Enum(&["exclusive", "shared"]),
        default: KeyDefault::Otherwise("required with `\"acquire\"`, refused with `\"release\"`"),
        range: Range::Any,
        doc: "how an acquire holds the lock: `\"exclusive\"` (a writer) or `\"shared\"` (a \
              reader)",
    },
    KeySpec {
        name: "connection",
        value: Value::Ref("connections"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the connection its commands go through",
    },
    KeySpec {
        name: "key",
        value: Value::Ref("keys"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the family of the request's key, the lock's key",
    },
];

const LOCK_STEP_NAMES: [&str; LOCK_STEP_KEYS.len()] = key_names(&LOCK_STEP_KEYS);

pub const LOCK_STEP: TableSpec = TableSpec::plain("a lock step", &LOCK_STEP_KEYS, &LOCK_STEP_NAMES);

/// One of a step's actions, `name`: a table declared in `spec` (below, `STEP_ACTIONS`'s).
const fn action(name: &'static str, spec: &'static TableSpec, doc: &'static str) -> KeySpec {
    KeySpec {
        name,
        value: Value::Table(spec),
        default: KeyDefault::Otherwise(ONE_ACTION),
        range: Range::Any,
        doc,
    }
}

/// The default of each action: a step has one.
const ONE_ACTION: &str = "a step has exactly one action";

/// How many of [`STEP_KEYS`] are actions (before the step's own keys).
const ACTIONS: usize = 8;

/// A step's keys: its actions (of which it has one, `raw::STEP_ACTIONS`), then its own.
const STEP_KEYS: [KeySpec; ACTIONS + 10] = [
    action("redis", &REDIS_STEP, "a Redis command on a connection"),
    action("db", &DB_STEP, "a query on a database"),
    KeySpec {
        name: "work",
        value: Value::Latency,
        default: KeyDefault::Otherwise(ONE_ACTION),
        range: Range::Any,
        doc: "the service's own work, for a duration or one drawn from a distribution",
    },
    action(
        "call",
        &CALL_STEP,
        "a call to a dependency modelled only by its answers",
    ),
    action("cache", &CACHE_STEP, "an operation on an L1 cache"),
    action(
        "throttle",
        &THROTTLE_STEP,
        "a throttle's slot, taken or given back",
    ),
    action(
        "rate_limit",
        &RATE_LIMIT_STEP,
        "a check against a rate limiter",
    ),
    action(
        "lock",
        &LOCK_STEP,
        "a distributed lock, acquired or released",
    ),
    KeySpec {
        name: "breaker",
        value: Value::Policies("breakers"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "the circuit breakers the step passes before its action: an open one rejects it \
              before any I/O. On a lock acquire the whole loop of attempts runs inside the \
              step's layers: an open breaker fails it with `breaker_open` before any command, \
              and the breaker judges the acquire's result (a timed-out attempt, or \
              `lock_timeout` if its `counts` lists it)",
    },
    KeySpec {
        name: "bulkhead",
        value: Value::Policies("bulkheads"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "the bulkheads the step passes before its action: one may queue or shed it",
    },
    KeySpec {
        name: "semaphore",
        value: Value::Policies("semaphores"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "the semaphores the step passes before its action: one may drop it",
    },
    KeySpec {
        name: "retry",
        value: Value::Policies("retries"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "the retry policies the step passes: the layers inside one, and the action, run \
              again when the step fails with an error it retries on",
    },
    KeySpec {
        name: "adaptive_limit",
        value: Value::Policies("adaptive_limits"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "the adaptive concurrency limits the step passes: over its current limit, one \
              fails the step with `shed` at once",
    },
    KeySpec {
        name: "policies",
        value: Value::Words(&POLICY_KINDS),
        default: KeyDefault::Otherwise(
            "`[\"retry\", \"bulkhead\", \"semaphore\", \"breaker\", \"adaptive_limit\"]`, \
             those the step names",
        ),
        range: Range::Any,
        doc: "the order a request meets the step's policies, outermost first, by kind: e.g. \
              `[\"retry\", \"breaker\", \"bulkhead\"]`. It must list exactly the kinds the \
              step names, each once per policy of that kind; see \"Policy order\" below",
    },
    KeySpec {
        name: "on_error",
        value: Value::Enum(&["fail", "next", "ignore"]),
        default: KeyDefault::Is("\"fail\""),
        range: Range::Any,
        doc: "`\"fail\"`: the request ends with the error; `\"next\"`: go on (fail-open); \
              `\"ignore\"`: fire-and-forget, the request does not wait and the step's result \
              is only counted",
    },
    KeySpec {
        name: "on_hit",
        value: Value::Name("`\"next\"`, `\"finish\"` or a later step's `label`"),
        default: KeyDefault::Is("\"next\""),
        range: Range::Any,
        doc: "for a Redis GET or a cache get: `\"finish\"` (a hit ends the request \
              successfully: cache-aside), or the `label` of a later step to jump to",
    },
    KeySpec {
        name: "label",
        value: Value::Name("a name of the step's own"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "a name for the step, for `on_hit`, unique in its flow",
    },
    KeySpec {
        name: "finally",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "`true`: the step runs even when the request does not reach it (it failed \
              earlier, a hit finished it, or `on_hit` jumped past it), in the background, like \
              a lock release in a `finally` block",
    },
];

/// The kinds of policy a step's `policies` lists, in the order a step meets them when it
/// does not say (`sim::scenario::PolicyKind::DEFAULT_ORDER`).
const POLICY_KINDS: [&str; 5] = [
    "retry",
    "bulkhead",
    "semaphore",
    "breaker",
    "adaptive_limit",
];

const STEP_NAMES: [&str; STEP_KEYS.len()] = key_names(&STEP_KEYS);

/// A flow step: its action, one of several tables (`raw::STEP_ACTIONS`, read as it is read),
/// and its own keys beside it: the policies it passes and in which order, and what its
/// result does to the request.
pub const STEP: TableSpec = TableSpec {
    what: "a step",
    keys: &STEP_KEYS,
    names: &STEP_NAMES,
    one_of: Some(&crate::raw::STEP_ACTIONS),
};

/// A step's own keys, beside its action, for their reference table (the actions have a
/// table of their own in the reference).
const STEP_OWN: TableSpec = TableSpec::plain(
    "a step",
    STEP_KEYS.split_at(ACTIONS).1,
    STEP_NAMES.split_at(ACTIONS).1,
);

/// The key table of a step's own keys (beside its action) in `docs/scenario-format.md`.
pub fn step_table() -> String {
    markdown_table(&STEP_OWN)
}

/// The key table of a step's `work` (a latency's table) in `docs/scenario-format.md`.
pub fn work_step_table() -> String {
    markdown_table(&DISTRIBUTION)
}

/// The key table of a step's `redis`.
pub fn redis_step_table() -> String {
    markdown_table(&REDIS_STEP)
}

/// The key table of a step's `db`.
pub fn db_step_table() -> String {
    markdown_table(&DB_STEP)
}

/// The key table of a step's `call`.
pub fn call_step_table() -> String {
    markdown_table(&CALL_STEP)
}

/// The key table of a step's `cache` in `docs/scenario-format.md`.
pub fn cache_step_table() -> String {
    markdown_table(&CACHE_STEP)
}

/// The key table of a step's `throttle`.
pub fn throttle_step_table() -> String {
    markdown_table(&THROTTLE_STEP)
}

/// The key table of a step's `rate_limit`.
pub fn rate_limit_step_table() -> String {
    markdown_table(&RATE_LIMIT_STEP)
}

/// The key table of a step's `lock`.
pub fn lock_step_table() -> String {
    markdown_table(&LOCK_STEP)
}

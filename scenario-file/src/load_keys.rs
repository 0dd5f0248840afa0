//! The keys of a `[loads.<name>]` table and of each of its `stages`, and of the
//! `[callers.<name>]` a load names, declared once ([`KeySpec`]: name, value, default, range,
//! one line of doc). From them come the readers ([`RawLoad`], [`RawCaller`]), the validation's
//! getters (`validate/load.rs`, through `validate/table.rs`) and the key tables of
//! `docs/scenario-format.md` ([`reference_table`], [`stage_table`], [`caller_table`]; checked by `tests/integration/docs_tables.rs`). Which keys apply to which `arrivals` is the
//! validation's: each refusal says why.

use serde::de::MapAccess;
use toml::Spanned;

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table,
};
use crate::raw::{Declared, RawTable, RawValue, Written};
use crate::validate::limit;

/// A `[loads.<name>]` table as written.
pub type RawLoad = RawTable<Load>;

/// The declaration of `[loads.<name>]`.
pub struct Load;

/// The declaration of one stage of `stages = [{ ... }]`.
pub struct Stage;

/// A `[callers.<name>]` table as written.
pub type RawCaller = RawTable<Caller>;

/// The declaration of `[callers.<name>]`.
pub struct Caller;

impl Declared for Caller {
    const SPEC: &'static TableSpec = &CALLER;
}

impl Declared for Load {
    const SPEC: &'static TableSpec = &LOAD;

    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        debug_assert_eq!(key.name, "stages");
        let stages = map.next_value::<Spanned<Vec<Spanned<RawTable<Stage>>>>>()?;
        let span = stages.span();
        let tables: Vec<Spanned<Written>> = stages
            .into_inner()
            .into_iter()
            .map(|stage| {
                let span = stage.span();
                Spanned::new(span, stage.into_inner().keys)
            })
            .collect();
        Ok(Spanned::new(span, RawValue::Tables(tables)))
    }
}

impl Declared for Stage {
    const SPEC: &'static TableSpec = &STAGE;
}

impl RawLoad {
    /// Whether the load is written `enabled = false`.
    pub fn disabled(&self) -> bool {
        matches!(
            self.keys.get("enabled").map(Spanned::get_ref),
            Some(RawValue::Bool(false))
        )
    }
}

const LOAD_KEYS: [KeySpec; 15] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled load is checked but sends nothing, so a variant can switch it on",
    },
    KeySpec {
        name: "flow",
        value: Value::Ref("flows"),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "the request type sent",
    },
    KeySpec {
        name: "arrivals",
        value: Value::Enum(&["even", "poisson", "burst", "closed"]),
        default: KeyDefault::Required(MISSING),
        range: Range::Any,
        doc: "`\"even\"` (arrival i at start + i/rate, exactly), `\"poisson\"` (exponential \
              gaps), `\"burst\"` (`count` at once, in order), or `\"closed\"` (callers that \
              wait for each request: below)",
    },
    KeySpec {
        name: "rate",
        value: Value::Number,
        default: KeyDefault::Otherwise("required for even and poisson; 0 with `stages`"),
        range: Range::Checked("to 0.001/s"),
        doc: "requests per second (even, poisson); with `stages`, the rate at `start`",
    },
    KeySpec {
        name: "count",
        value: Value::Count,
        default: KeyDefault::Otherwise("none"),
        range: Range::Checked("at most 10 000 000 in a burst"),
        doc: "requests sent: even and poisson take exactly one of `count` and `duration` \
              (none with `stages` or `rate_file`); a burst takes `count`. `count = 0` sends \
              nothing (useful in sweeps)",
    },
    KeySpec {
        name: "duration",
        value: Value::Duration,
        default: KeyDefault::Otherwise("none"),
        range: Range::Longer {
            why: "the load would send nothing",
        },
        doc: "no request is sent at or after `start + duration` (those in flight run on); a \
              closed loop takes `iterations`, `duration` or both",
    },
    KeySpec {
        name: "start",
        value: Value::Duration,
        default: KeyDefault::Is("\"0s\""),
        range: Range::Any,
        doc: "when it starts sending",
    },
    KeySpec {
        name: "workers",
        value: Value::Count,
        default: KeyDefault::Otherwise("required for a closed loop"),
        range: Range::Between {
            min: 1,
            max: limit::WORKERS,
            why: "a closed loop needs a caller",
        },
        doc: "closed: its callers",
    },
    KeySpec {
        name: "think",
        value: Value::Latency,
        default: KeyDefault::Is("\"0s\""),
        range: Range::Any,
        doc: "closed: the wait between a request's end and the caller's next request (as a \
              database's `latency`), drawn per request",
    },
    KeySpec {
        name: "stagger",
        value: Value::Duration,
        default: KeyDefault::Is("\"0s\""),
        range: Range::Any,
        doc: "closed: a linear ramp of the callers: caller `i` sends its first request at \
              `start + stagger × i / workers`, so all of them are sending once `stagger` has \
              passed",
    },
    KeySpec {
        name: "iterations",
        value: Value::Count,
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "closed: requests per caller",
    },
    KeySpec {
        name: "caller",
        value: Value::Ref("callers"),
        default: KeyDefault::Otherwise("none: the requests go straight to the flow"),
        range: Range::Any,
        doc: "the `[callers.<name>]` whose calls they are",
    },
    KeySpec {
        name: "stages",
        value: Value::Tables(&STAGE),
        default: KeyDefault::Otherwise("none"),
        range: Range::Checked("1 to 100 000 stages"),
        doc: "even and poisson: a rate that changes over time (below)",
    },
    KeySpec {
        name: "rate_file",
        value: Value::Name("a path, from the scenario file's directory"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "even and poisson: the rate over time from a file of `time,rate` rows, such as an \
              incident's traffic, or a Prometheus `.json` (below)",
    },
    KeySpec {
        name: "rate_series",
        value: Value::Name("a Prometheus series, `name{label=\"value\"}`"),
        default: KeyDefault::Otherwise("the file's one series"),
        range: Range::Any,
        doc: "with a Prometheus `rate_file`: the series it follows (below)",
    },
];

const LOAD_NAMES: [&str; LOAD_KEYS.len()] = key_names(&LOAD_KEYS);

pub const LOAD: TableSpec = TableSpec::plain("a load", &LOAD_KEYS, &LOAD_NAMES);

const STAGE_KEYS: [KeySpec; 2] = [
    KeySpec {
        name: "duration",
        value: Value::Duration,
        default: KeyDefault::Required(MISSING),
        range: Range::Longer {
            why: "give a short stage for a step",
        },
        doc: "how long the rate takes to move to `target`",
    },
    KeySpec {
        name: "target",
        value: Value::Number,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("0 or more, to 0.001/s"),
        doc: "the rate at the stage's end, in requests per second",
    },
];

const STAGE_NAMES: [&str; STAGE_KEYS.len()] = key_names(&STAGE_KEYS);

pub const STAGE: TableSpec = TableSpec::plain("a stage", &STAGE_KEYS, &STAGE_NAMES);

const CALLER_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "timeout",
        value: Value::Duration,
        default: KeyDefault::Otherwise("none (waits for the service)"),
        range: Range::Longer {
            why: "a caller that gives up at once sends nothing useful",
        },
        doc: "per attempt; an attempt given up on ends with `timeout` for the caller",
    },
    KeySpec {
        name: "retry",
        value: Value::Ref("retries"),
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "a `[retries.<name>]` policy: its `retry_on` (which may list `timeout`), \
              attempts, backoff and budget, in the caller's own instance. An attempt refused \
              with a Retry-After (a throttle's `rate_limited` with its `retry_after`) is \
              retried no sooner than that, as HTTP clients honour the header",
    },
    KeySpec {
        name: "cancel_on_timeout",
        value: Value::Bool,
        default: KeyDefault::Is("false"),
        range: Range::Any,
        doc: "the service hears that the caller gave up on an attempt (the caller closes its \
              connection; the handler checks its request context between calls): the request \
              stops before its next step and ends `cancelled` (HTTP 499), its `finally` steps \
              still run. The step it is in runs to its end: a query waiting for the database, \
              or a command in an offline queue, is not called back. Needs a `timeout`",
    },
];

const CALLER_NAMES: [&str; CALLER_KEYS.len()] = key_names(&CALLER_KEYS);

pub const CALLER: TableSpec = TableSpec::plain("a caller", &CALLER_KEYS, &CALLER_NAMES);

/// The key table of `[callers.<name>]` in `docs/scenario-format.md`.
pub fn caller_table() -> String {
    markdown_table(&CALLER)
}

/// The key table of `[loads.<name>]` in `docs/scenario-format.md`, as markdown.
pub fn reference_table() -> String {
    markdown_table(&LOAD)
}

/// The key table of one of a load's `stages`.
pub fn stage_table() -> String {
    markdown_table(&STAGE)
}

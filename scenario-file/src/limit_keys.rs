//! The keys of the concurrency limits, declared once ([`KeySpec`]: name, value, default,
//! range, one line of doc): `[bulkheads.<name>]`, `[semaphores.<name>]` and
//! `[adaptive_limits.<name>]` with its algorithm's table (`aimd` or `gradient2`). From them
//! come the readers ([`RawBulkhead`], [`RawSemaphore`], [`RawAdaptiveLimit`]: the keys
//! accepted, each read as its value, one algorithm exactly), the validation's getters
//! (`validate/limits.rs`, through `validate/table.rs`), the missing-key messages' meanings and
//! the key tables of `docs/scenario-format.md` (checked by `tests/integration/docs_tables.rs`).

use serde::de::MapAccess;
use toml::Spanned;

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table,
};
use crate::one_of::OneOf;
use crate::raw::{Declared, RawTable, RawValue, nested_table};
use crate::validate::limit;

/// A `[bulkheads.<name>]` table as written.
pub type RawBulkhead = RawTable<Bulkhead>;
/// A `[semaphores.<name>]` table as written.
pub type RawSemaphore = RawTable<Semaphore>;
/// An `[adaptive_limits.<name>]` table as written.
pub type RawAdaptiveLimit = RawTable<AdaptiveLimit>;

/// The declaration of `[bulkheads.<name>]`.
pub struct Bulkhead;
/// The declaration of `[semaphores.<name>]`.
pub struct Semaphore;
/// The declaration of `[adaptive_limits.<name>]`.
pub struct AdaptiveLimit;
/// The declaration of an adaptive limit's `aimd = { ... }`.
pub struct Aimd;
/// The declaration of an adaptive limit's `gradient2 = { ... }`.
pub struct Gradient2;

impl Declared for Bulkhead {
    const SPEC: &'static TableSpec = &BULKHEAD;
}

impl Declared for Semaphore {
    const SPEC: &'static TableSpec = &SEMAPHORE;
}

impl Declared for AdaptiveLimit {
    const SPEC: &'static TableSpec = &ADAPTIVE_LIMIT;

    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        match key.name {
            "aimd" => nested_table::<Aimd, M>(map),
            name => {
                debug_assert_eq!(name, "gradient2");
                nested_table::<Gradient2, M>(map)
            }
        }
    }
}

impl Declared for Aimd {
    const SPEC: &'static TableSpec = &AIMD;
}

impl Declared for Gradient2 {
    const SPEC: &'static TableSpec = &GRADIENT2;
}

const BULKHEAD_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled bulkhead admits everything",
    },
    KeySpec {
        name: "max_concurrent",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("at least 1"),
        doc: "the calls let through at once (its permits)",
    },
    KeySpec {
        name: "queue",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Between {
            min: 0,
            max: limit::QUEUE,
            why: "",
        },
        doc: "waiters in FIFO order; when full, the step fails with `shed` at once (0 sheds \
              whenever no permit is free)",
    },
];

const BULKHEAD_NAMES: [&str; BULKHEAD_KEYS.len()] = key_names(&BULKHEAD_KEYS);

pub const BULKHEAD: TableSpec = TableSpec::plain("a bulkhead", &BULKHEAD_KEYS, &BULKHEAD_NAMES);

const SEMAPHORE_KEYS: [KeySpec; 3] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled semaphore admits everything",
    },
    KeySpec {
        name: "max_in_flight",
        value: Value::Count,
        default: KeyDefault::Otherwise("none"),
        range: Range::Checked("at least 1"),
        doc: "permits out at once",
    },
    KeySpec {
        name: "max_bytes",
        value: Value::Size,
        default: KeyDefault::Otherwise("none"),
        range: Range::Checked("at least 1"),
        doc: "bytes held by the permits out; at least one of the two caps",
    },
];

const SEMAPHORE_NAMES: [&str; SEMAPHORE_KEYS.len()] = key_names(&SEMAPHORE_KEYS);

pub const SEMAPHORE: TableSpec = TableSpec::plain("a semaphore", &SEMAPHORE_KEYS, &SEMAPHORE_NAMES);

const ADAPTIVE_LIMIT_KEYS: [KeySpec; 7] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled limit admits everything",
    },
    KeySpec {
        name: "limit_initial",
        value: Value::Count,
        default: KeyDefault::Otherwise("20, within `limit_min` and `limit_max`"),
        range: Range::Checked("from `limit_min` to `limit_max`"),
        doc: "where the limit starts",
    },
    KeySpec {
        name: "limit_min",
        value: Value::Count,
        default: KeyDefault::Otherwise("1"),
        range: Range::Checked("at least 1"),
        doc: "the floor; Netflix's builders use 20, which forbids shrinking below the start",
    },
    KeySpec {
        name: "limit_max",
        value: Value::Count,
        default: KeyDefault::Otherwise("200, or `limit_min` if above"),
        range: Range::Checked("at least `limit_min`"),
        doc: "the ceiling",
    },
    KeySpec {
        name: "aimd",
        value: Value::Table(&AIMD),
        default: KeyDefault::Otherwise("none: one of `aimd` and `gradient2`"),
        range: Range::Any,
        doc: "the algorithm AIMD: a drop, or a success slower than `timeout`, multiplies the \
              limit by `backoff_ratio` (truncated); another success adds 1 when at least half \
              the limit was in flight",
    },
    KeySpec {
        name: "gradient2",
        value: Value::Table(&GRADIENT2),
        default: KeyDefault::Otherwise("none: one of `aimd` and `gradient2`"),
        range: Range::Any,
        doc: "the algorithm Gradient2: the limit follows the ratio of a long-term average \
              latency to each call's latency; drops count only by their latency",
    },
    KeySpec {
        name: "drops",
        value: Value::Outcomes,
        default: KeyDefault::Otherwise("`[\"timeout\", \"refused\", \"shed\"]`"),
        range: Range::Any,
        doc: "which errors are drops; other errors are ignored",
    },
];

const ADAPTIVE_LIMIT_NAMES: [&str; ADAPTIVE_LIMIT_KEYS.len()] = key_names(&ADAPTIVE_LIMIT_KEYS);

/// An adaptive limit moves by exactly one algorithm.
const ALGORITHMS: OneOf = OneOf {
    tags: &[("aimd", || &AIMD_NAMES), ("gradient2", || &GRADIENT2_NAMES)],
    what: "an adaptive limit",
    tag_noun: "algorithm",
    advice: "give aimd or gradient2, not both",
    tag_required: true,
};

pub const ADAPTIVE_LIMIT: TableSpec = TableSpec {
    what: "an adaptive limit",
    keys: &ADAPTIVE_LIMIT_KEYS,
    names: &ADAPTIVE_LIMIT_NAMES,
    one_of: Some(&ALGORITHMS),
};

/// AIMD's keys; their defaults are Netflix's (`Algorithm::AIMD_NETFLIX`, checked by a test).
const AIMD_KEYS: [KeySpec; 2] = [
    KeySpec {
        name: "backoff_ratio",
        value: Value::Number,
        default: KeyDefault::Is("0.9"),
        range: Range::Checked("from 0.5, below 1"),
        doc: "what a drop multiplies the limit by",
    },
    KeySpec {
        name: "timeout",
        value: Value::Duration,
        default: KeyDefault::Is("\"5s\""),
        range: Range::Checked("longer than zero"),
        doc: "a success slower than this counts as a drop",
    },
];

const AIMD_NAMES: [&str; AIMD_KEYS.len()] = key_names(&AIMD_KEYS);

pub const AIMD: TableSpec = TableSpec::plain("an AIMD limit", &AIMD_KEYS, &AIMD_NAMES);

/// Gradient2's keys; their defaults are Netflix's (`Algorithm::GRADIENT2_NETFLIX`, checked
/// by a test).
const GRADIENT2_KEYS: [KeySpec; 4] = [
    KeySpec {
        name: "rtt_tolerance",
        value: Value::Number,
        default: KeyDefault::Is("1.5"),
        range: Range::Checked("at least 1"),
        doc: "how much slower than the long-term average a call may be before the limit falls",
    },
    KeySpec {
        name: "smoothing",
        value: Value::Number,
        default: KeyDefault::Is("0.2"),
        range: Range::Checked("above 0 and at most 1"),
        doc: "how far each new limit moves toward its target",
    },
    KeySpec {
        name: "long_window",
        value: Value::Count,
        default: KeyDefault::Is("600"),
        range: Range::Checked("at least 1"),
        doc: "the samples the long-term average spans",
    },
    KeySpec {
        name: "queue_size",
        value: Value::Count,
        default: KeyDefault::Is("4"),
        range: Range::Checked("at least 1"),
        doc: "calls allowed above the latency-derived limit",
    },
];

const GRADIENT2_NAMES: [&str; GRADIENT2_KEYS.len()] = key_names(&GRADIENT2_KEYS);

pub const GRADIENT2: TableSpec =
    TableSpec::plain("a Gradient2 limit", &GRADIENT2_KEYS, &GRADIENT2_NAMES);

/// The key table of `[bulkheads.<name>]` in `docs/scenario-format.md`.
pub fn bulkhead_table() -> String {
    markdown_table(&BULKHEAD)
}

/// The key table of `[semaphores.<name>]` in `docs/scenario-format.md`.
pub fn semaphore_table() -> String {
    markdown_table(&SEMAPHORE)
}

/// The key table of `[adaptive_limits.<name>]` in `docs/scenario-format.md`.
pub fn adaptive_limit_table() -> String {
    markdown_table(&ADAPTIVE_LIMIT)
}

/// The key table of an adaptive limit's `aimd` in `docs/scenario-format.md`.
pub fn aimd_table() -> String {
    markdown_table(&AIMD)
}

/// The key table of an adaptive limit's `gradient2` in `docs/scenario-format.md`.
pub fn gradient2_table() -> String {
    markdown_table(&GRADIENT2)
}

#[cfg(test)]
mod tests {
    use outagelab_model::adaptive_limit::{Algorithm, QueueSize};
    use outagelab_model::time::SimDuration;

    use super::*;

    fn number(spec: &TableSpec, name: &str) -> f64 {
        match spec.declared(name).default {
            KeyDefault::Is(text) => text.trim_matches('"').parse().expect("a number"),
            _ => panic!("`{name}` has no default"),
        }
    }

    #[test]
    fn the_declared_defaults_are_netflixs() {
        let Algorithm::Aimd {
            backoff_ratio,
            timeout,
        } = Algorithm::AIMD_NETFLIX
        else {
            unreachable!()
        };
        assert_eq!(number(&AIMD, "backoff_ratio"), backoff_ratio);
        assert_eq!(timeout, SimDuration::from_secs(5));
        assert_eq!(AIMD.declared("timeout").default, KeyDefault::Is("\"5s\""));
        let Algorithm::Gradient2 {
            rtt_tolerance,
            smoothing,
            long_window,
            queue_size,
        } = Algorithm::GRADIENT2_NETFLIX
        else {
            unreachable!()
        };
        assert_eq!(number(&GRADIENT2, "rtt_tolerance"), rtt_tolerance);
        assert_eq!(number(&GRADIENT2, "smoothing"), smoothing);
        assert_eq!(number(&GRADIENT2, "long_window"), f64::from(long_window));
        let QueueSize::Fixed(queue_size) = queue_size else {
            unreachable!("Netflix's default queue size is fixed")
        };
        assert_eq!(number(&GRADIENT2, "queue_size"), f64::from(queue_size));
    }
}

//! The keys of a `[breakers.<name>]` table and of its `failure_rate`, declared once
//! ([`KeySpec`]: name, value, default, range, one line of doc). From them come the reader
//! ([`RawBreaker`]: the keys accepted, each read as its value, one rule at most), the
//! validation's getters (`validate/breaker.rs` reads every key through `validate/table.rs`,
//! which applies the defaults and a preset's values as declared), the keys `validate
//! --explain` prints and their order (`explain.rs`), and the two key tables of
//! `docs/scenario-format.md` ([`reference_table`], [`failure_rate_table`]; checked by
//! `tests/integration/docs_tables.rs`).
//!
//! A key a preset gives is declared [`KeyDefault::Preset`]: left out, it is the preset's
//! value (`outagelab_model::presets::BREAKER_PRESETS`), and without a preset the default
//! inside.

use outagelab_model::presets::BREAKER_PRESETS;
use serde::de::MapAccess;
use toml::Spanned;

use crate::keys::{
    KeyDefault, KeySpec, MISSING, Range, TableSpec, Value, key_names, markdown_table, preset_names,
};
use crate::one_of::{Fields, OneOf};
use crate::raw::{Declared, RawTable, RawValue, nested_table};

/// A `[breakers.<name>]` table as written.
pub type RawBreaker = RawTable<Breaker>;

/// The declaration of `[breakers.<name>]`.
pub struct Breaker;

/// The declaration of a breaker's `failure_rate = { ... }`.
pub struct FailureRate;

impl Declared for Breaker {
    const SPEC: &'static TableSpec = &BREAKER;

    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        debug_assert_eq!(key.name, "failure_rate");
        nested_table::<FailureRate, M>(map)
    }
}

impl Declared for FailureRate {
    const SPEC: &'static TableSpec = &FAILURE_RATE;
}

/// The presets' names, in the model's order.
pub const PRESET_NAMES: [&str; BREAKER_PRESETS.len()] = preset_names!(BREAKER_PRESETS);

/// A value given as a duration longer than zero: the breaker's config refuses zero.
const LONGER: Range = Range::Checked("longer than zero");

const BREAKER_KEYS: [KeySpec; 19] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled breaker admits everything (variants switch it on)",
    },
    KeySpec {
        name: "preset",
        value: Value::OneOf {
            values: &PRESET_NAMES,
            noun: "breaker preset",
            plural: "presets",
        },
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "start from a library's defaults (below); every other key overrides it",
    },
    KeySpec {
        name: "failures",
        value: Value::Count,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none")),
        range: Range::Checked("at least 1"),
        doc: "rule 1: open after this many consecutive counted failures",
    },
    KeySpec {
        name: "failure_rate",
        value: Value::Table(&FAILURE_RATE),
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none")),
        range: Range::Any,
        doc: "rule 2, a table: `{ percent = 50, window_calls = 20, min_calls = 20 }` (below)",
    },
    KeySpec {
        name: "open_for",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Required("missing: give open_for, or a preset")),
        range: LONGER,
        doc: "how long it rejects calls once open, before its probes",
    },
    KeySpec {
        name: "half_open_probes",
        value: Value::Count,
        default: KeyDefault::Preset(&KeyDefault::Is("1")),
        range: Range::Any,
        doc: "the probes it admits when half-open",
    },
    KeySpec {
        name: "counts",
        value: Value::Outcomes,
        default: KeyDefault::Otherwise(
            "`[\"timeout\", \"refused\", \"connection_lost\"]`; with a `preset`, every error \
             (all outcomes but `ok`, `breaker_open` and `cancelled`), as the libraries count by \
             default",
        ),
        range: Range::Any,
        doc: "which errors count as failures; the others are uncounted (`uncounted_as` says \
              what they count as); a status class (`\"5xx\"`, `\"4xx\"`) stands for its \
              outcomes. `server_error`, the error replies (`oom`, `readonly`, `loading`, \
              `wrongtype`), `lock_busy` and `lock_timeout` may be added; `shed` only when some \
              step lists the breaker outside a layer that sheds: a bulkhead or semaphore listed \
              inside it (see `policies`), or an adaptive limit (inside it by default); \
              otherwise no shed reaches it",
    },
    KeySpec {
        name: "ignores",
        value: Value::Outcomes,
        default: KeyDefault::Otherwise("`[]`"),
        range: Range::Any,
        doc: "errors that count neither way, whatever `counts` and `uncounted_as` say: they \
              do not enter the window, and an ignored probe frees its slot (resilience4j's \
              `ignoreExceptions`, gobreaker's `IsExcluded`). An error may not be in both lists",
    },
    KeySpec {
        name: "late_failures",
        value: Value::Enum(&["ignored", "counted"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"ignored\"")),
        range: Range::Any,
        doc: "a counted failure of a call admitted before the breaker last changed state (a \
              command in flight when it opened, timing out later): `\"ignored\"` changes \
              nothing (resilience4j, Polly); `\"counted\"` counts it as a fresh failure: it \
              restarts an open breaker's `open_for` from that instant, reopens a half-open one, \
              enters a closed one's tally (a breaker that stamps `openedAt = now` on every \
              failure, as seed 000's does)",
    },
    KeySpec {
        name: "half_open_rule",
        value: Value::Enum(&["all_probes_succeed", "failure_rate"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"all_probes_succeed\"")),
        range: Range::Any,
        doc: "`\"all_probes_succeed\"`: every probe must succeed to close it, one failure \
              reopens it; `\"failure_rate\"`: once all `half_open_probes` have reported, reopen \
              if their failures reach the rule's `percent`, close otherwise (resilience4j; \
              needs `failure_rate`)",
    },
    KeySpec {
        name: "uncounted_as",
        value: Value::Enum(&["ignored", "success"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"ignored\"")),
        range: Range::Any,
        doc: "what an error outside `counts` (and outside `ignores`) is: `\"ignored\"` \
              (neither way; an ignored probe frees its slot; Polly v7) or `\"success\"` \
              (resilience4j's `recordExceptions`, opossum's `errorFilter`, Polly v8's \
              `ShouldHandle`, gobreaker's `IsSuccessful`)",
    },
    KeySpec {
        name: "half_open_max_wait",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none (wait for ever)")),
        range: LONGER,
        doc: "when the probes have not decided this long after the first probe was admitted, \
              open again (resilience4j's `maxWaitDurationInHalfOpenState`)",
    },
    KeySpec {
        name: "warm_up",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none")),
        range: Range::Any,
        doc: "no opening before this long after the start: results are tallied, and the first \
              one from then on that satisfies the rule opens it (opossum's `allowWarmUp`, whose \
              warm-up is its `rollingCountTimeout`: write `warm_up = \"10s\"`)",
    },
    KeySpec {
        name: "open_for_factor",
        value: Value::Number,
        default: KeyDefault::Preset(&KeyDefault::Is("1")),
        range: Range::Checked("at least 1, to 0.001"),
        doc: "each reopening from half-open lasts the previous opening times this; closing \
              starts again from `open_for`; above 1 needs `open_for_max`",
    },
    KeySpec {
        name: "open_for_max",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("`open_for`")),
        range: Range::Checked("at least `open_for`"),
        doc: "the longest opening",
    },
    KeySpec {
        name: "evaluate_on",
        value: Value::Enum(&["any", "failure"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"any\"")),
        range: Range::Any,
        doc: "when a `failure_rate` breaker compares its rate: after `\"any\"` result, or only \
              after a `\"failure\"` (Polly, opossum)",
    },
    KeySpec {
        name: "threshold",
        value: Value::Enum(&["reached", "exceeded"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"reached\"")),
        range: Range::Any,
        doc: "with `failure_rate`: `\"reached\"` opens when the rate is at least `percent` \
              (resilience4j, Polly), `\"exceeded\"` only above it (opossum's `errorRate > \
              errorThresholdPercentage`); the slow-call rate and the half-open rate rule \
              compare the same way. A rule the file writes as `failures` ignores the preset's",
    },
    KeySpec {
        name: "slow_call_duration",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none")),
        range: LONGER,
        doc: "with `slow_call_percent`, a slow-call rule (resilience4j's): a call that lasts \
              longer than this, from admission to result, is slow whatever its outcome; needs \
              `failure_rate`, whose window and `min_calls` it shares",
    },
    KeySpec {
        name: "slow_call_percent",
        value: Value::Number,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none")),
        range: Range::Checked("from 0 to 100, to 0.1%"),
        doc: "the breaker also opens when at least this share of the calls in the window were \
              slow; with `half_open_rule = \"failure_rate\"` the probes are held to it too",
    },
];

const BREAKER_NAMES: [&str; BREAKER_KEYS.len()] = key_names(&BREAKER_KEYS);

/// A breaker has one rule: `failures` or `failure_rate` (a preset may give it instead).
const BREAKER_RULES: OneOf = OneOf {
    tags: &[("failures", || &[]), ("failure_rate", failure_rate_keys)],
    what: "a breaker",
    tag_noun: "rule",
    advice: "give failures (consecutive) or failure_rate, not both",
    tag_required: false,
};

pub const BREAKER: TableSpec = TableSpec {
    what: "a breaker",
    keys: &BREAKER_KEYS,
    names: &BREAKER_NAMES,
    one_of: Some(&BREAKER_RULES),
};

/// The window a `failure_rate` counts over, when the file leaves it out.
const ONE_WINDOW: KeyDefault = KeyDefault::Otherwise("one of `window_calls` and `window`");

const FAILURE_RATE_KEYS: [KeySpec; 5] = [
    KeySpec {
        name: "percent",
        value: Value::Number,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("above 0 and at most 100, to 0.1%"),
        doc: "open when at least this share of the calls in the window failed (to 0.1%)",
    },
    KeySpec {
        name: "window_calls",
        value: Value::Count,
        default: ONE_WINDOW,
        range: Range::Checked("at least 1"),
        doc: "the window: the last N calls",
    },
    KeySpec {
        name: "window",
        value: Value::Duration,
        default: ONE_WINDOW,
        range: LONGER,
        doc: "the window: the calls of the last duration",
    },
    KeySpec {
        name: "window_slots",
        value: Value::Count,
        default: KeyDefault::Otherwise(
            "`10`; with a Polly preset, `1` for a `window` under 200 ms",
        ),
        range: Range::Checked("at least 1, dividing `window` into whole nanoseconds"),
        doc: "with `window`: a time window is kept in this many slots; calls leave it a slot at \
              a time. Polly keeps a sampling duration under 200 ms as one window \
              (`HealthMetrics.Create`)",
    },
    KeySpec {
        name: "min_calls",
        value: Value::Count,
        default: KeyDefault::Required(MISSING),
        range: Range::Checked("at least 1"),
        doc: "the window must hold this many calls before the rate counts",
    },
];

const FAILURE_RATE_NAMES: [&str; FAILURE_RATE_KEYS.len()] = key_names(&FAILURE_RATE_KEYS);

fn failure_rate_keys() -> &'static [&'static str] {
    &FAILURE_RATE_NAMES
}

/// A failure rate counts over one window: the last N calls or the calls of a duration.
const WINDOWS: OneOf = OneOf {
    tags: &[("window_calls", NO_KEYS), ("window", NO_KEYS)],
    what: "a failure rate",
    tag_noun: "window",
    advice: "give window_calls (the last N calls) or window (a duration), not both",
    tag_required: true,
};

const NO_KEYS: Fields = || &[];

pub const FAILURE_RATE: TableSpec = TableSpec {
    what: "a failure rate",
    keys: &FAILURE_RATE_KEYS,
    names: &FAILURE_RATE_NAMES,
    one_of: Some(&WINDOWS),
};

/// The key table of `[breakers.<name>]` in `docs/scenario-format.md`, as markdown.
pub fn reference_table() -> String {
    markdown_table(&BREAKER)
}

/// The key table of a breaker's `failure_rate` in `docs/scenario-format.md`.
pub fn failure_rate_table() -> String {
    markdown_table(&FAILURE_RATE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preset_names_are_the_models() {
        for preset in BREAKER_PRESETS {
            assert!(PRESET_NAMES.contains(&preset.name), "{}", preset.name);
        }
        assert_eq!(PRESET_NAMES.len(), BREAKER_PRESETS.len());
    }

    #[test]
    fn every_table_key_is_read_as_a_table() {
        for key in BREAKER.keys {
            if let Value::Table(spec) = key.value {
                assert_eq!(spec, &FAILURE_RATE, "{}", key.name);
            }
        }
    }
}

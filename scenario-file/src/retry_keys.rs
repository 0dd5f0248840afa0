//! The keys of a `[retries.<name>]` table, declared once ([`KeySpec`]: name, value, default,
//! range, one line of doc). From them come the reader ([`RawRetry`]), the validation's getters
//! (`validate/retry.rs`, through `validate/table.rs`, which applies a preset's values and the
//! defaults as declared), the keys `validate --explain` prints and their order, and the key
//! table of `docs/scenario-format.md` ([`reference_table`], checked by
//! `tests/integration/docs_tables.rs`). A key a preset gives is declared
//! [`KeyDefault::Preset`] (its value from `outagelab_model::presets::RETRY_PRESETS`).

use outagelab_model::presets::RETRY_PRESETS;

use crate::keys::{
    KeyDefault, KeySpec, Range, TableSpec, Value, key_names, markdown_table, preset_names,
};
use crate::raw::{Declared, RawTable};

/// A `[retries.<name>]` table as written.
pub type RawRetry = RawTable<Retry>;

/// The declaration of `[retries.<name>]`.
pub struct Retry;

impl Declared for Retry {
    const SPEC: &'static TableSpec = &RETRY;
}

/// The presets' names, in the model's order.
pub const PRESET_NAMES: [&str; RETRY_PRESETS.len()] = preset_names!(RETRY_PRESETS);

const RETRY_KEYS: [KeySpec; 14] = [
    KeySpec {
        name: "enabled",
        value: Value::Bool,
        default: KeyDefault::Is("true"),
        range: Range::Any,
        doc: "a disabled policy never retries",
    },
    KeySpec {
        name: "preset",
        value: Value::OneOf {
            values: &PRESET_NAMES,
            noun: "retry preset",
            plural: "presets",
        },
        default: KeyDefault::Otherwise("none"),
        range: Range::Any,
        doc: "start from a library's defaults (below); every other key overrides it",
    },
    KeySpec {
        name: "max_attempts",
        value: Value::Count,
        default: KeyDefault::Preset(&KeyDefault::Required(
            "missing: give max_attempts, or a preset",
        )),
        range: Range::Checked("at least 1"),
        doc: "attempts per step, the first included (1 never retries)",
    },
    KeySpec {
        name: "backoff",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Required("missing: give backoff, or a preset")),
        range: Range::Longer {
            why: "retries would follow the failure in a tight loop",
        },
        doc: "the first wait",
    },
    KeySpec {
        name: "backoff_factor",
        value: Value::Number,
        default: KeyDefault::Preset(&KeyDefault::Is("1")),
        range: Range::Checked("at least 1, to 0.001"),
        doc: "each wait is the previous one times this; above 1 needs `backoff_max`",
    },
    KeySpec {
        name: "backoff_max",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("`backoff`")),
        range: Range::Checked("at least `backoff`"),
        doc: "the ceiling",
    },
    KeySpec {
        name: "backoff_growth",
        value: Value::Enum(&["exponential", "fibonacci"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"exponential\"")),
        range: Range::Any,
        doc: "`\"exponential\"`: by `backoff_factor`; `\"fibonacci\"`: each wait is the sum of \
              the two before it (`backoff`, `backoff`, 2 × `backoff`, 3 ×, 5 ×, ...; the \
              `backon` crate's `FibonacciBackoff`), up to `backoff_max`, which it needs; no \
              `backoff_factor` with it",
    },
    KeySpec {
        name: "jitter",
        value: Value::Enum(&["none", "full", "equal", "decorrelated", "proportional"]),
        default: KeyDefault::Preset(&KeyDefault::Is("\"none\"")),
        range: Range::Any,
        doc: "`\"full\"` (uniform in 0..wait), `\"equal\"` (half plus uniform half), \
              `\"decorrelated\"` (AWS), `\"proportional\"` (uniform in wait ± wait × \
              `randomization_factor`, the backoff crate's; it may pass `backoff_max` by that \
              much, as there)",
    },
    KeySpec {
        name: "randomization_factor",
        value: Value::Number,
        // The backoff crate's default factor.
        default: KeyDefault::Preset(&KeyDefault::Is("0.5")),
        range: Range::Checked("from 0 to 1, to 0.001"),
        doc: "with `\"proportional\"`: the spread around each wait",
    },
    KeySpec {
        name: "elapsed_max",
        value: Value::Duration,
        default: KeyDefault::Preset(&KeyDefault::Otherwise("none")),
        range: Range::Any,
        doc: "give up when the next attempt would start later than this after the first (the \
              backoff crate's `max_elapsed_time`)",
    },
    KeySpec {
        name: "budget_percent",
        value: Value::Number,
        default: KeyDefault::Otherwise("none (no budget)"),
        range: Range::Checked("at most 100, to 0.1%"),
        doc: "retries may be at most this share of the step executions of the last \
              `budget_window`, plus `budget_min_per_second` × the window (Finagle's retry \
              budget)",
    },
    KeySpec {
        name: "budget_min_per_second",
        value: Value::Count,
        default: KeyDefault::Is("0"),
        range: Range::Any,
        doc: "with `budget_percent`: retries allowed each second whatever the share",
    },
    KeySpec {
        name: "budget_window",
        value: Value::Duration,
        default: KeyDefault::Is("\"10s\""),
        range: Range::Any,
        doc: "with `budget_percent`: how far back the share is counted",
    },
    KeySpec {
        name: "retry_on",
        value: Value::Outcomes,
        default: KeyDefault::Otherwise(
            "`[\"timeout\", \"refused\", \"connection_lost\", \"server_error\"]`",
        ),
        range: Range::Any,
        doc: "outcomes, or a status class: `\"5xx\"` (`\"4xx\"`) is every error outcome \
              answered with a 5xx (4xx) status, by the `[http]` table or the defaults (429 for \
              `rate_limited`, 503 for `breaker_open`, `shed` and `lock_timeout`, 500 for the \
              rest; never `cancelled`, which no policy sees), as an HTTP client retries by \
              status; add `lock_busy` to spin on a lock",
    },
];

const RETRY_NAMES: [&str; RETRY_KEYS.len()] = key_names(&RETRY_KEYS);

pub const RETRY: TableSpec = TableSpec::plain("a retry policy", &RETRY_KEYS, &RETRY_NAMES);

/// The key table of `[retries.<name>]` in `docs/scenario-format.md`, as markdown.
pub fn reference_table() -> String {
    markdown_table(&RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preset_names_are_the_models() {
        let names: Vec<&str> = RETRY_PRESETS.iter().map(|preset| preset.name).collect();
        assert_eq!(names, PRESET_NAMES);
    }
}

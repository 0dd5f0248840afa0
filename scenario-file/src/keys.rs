//! What a key of a table is, declared once: its name, the value it reads as, its default, its
//! range and one line of doc ([`KeySpec`]). The fault kinds (`fault_kinds.rs`) and the tables
//! declared key by key (`breaker_keys.rs`) are lists of these; from them come the raw reader
//! (`raw.rs`: [`crate::raw::RawFault`], [`crate::raw::RawTable`]), the validators' getters
//! (`validate/faults.rs`, `validate/table.rs`), `validate --explain`'s keys and the reference
//! tables of `docs/scenario-format.md`.

use crate::raw::{RawValue, Size, Text, Whole};

/// One key of a kind's table.
pub struct KeySpec {
    pub name: &'static str,
    pub value: Value,
    pub default: KeyDefault,
    pub range: Range,
    /// One line for the reference.
    pub doc: &'static str,
}

/// What a key's value is, and so the raw type it is read as.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Value {
    /// A duration with a unit, `"50ms"`.
    Duration,
    /// A size: a number of bytes or a string with a unit, `"30MiB"`.
    Size,
    /// A rate of bytes, `"100KiB/s"`.
    Bandwidth,
    /// A whole number.
    Count,
    /// A number, whole or not.
    Number,
    Bool,
    /// One of these words; anything else is refused as serde refuses an unknown variant.
    Enum(&'static [&'static str]),
    /// One of these words, refused as "unknown `noun` ... (`plural`: ...)".
    OneOf {
        values: &'static [&'static str],
        noun: &'static str,
        plural: &'static str,
    },
    /// The name of a resource of this table (`servers`, `keys`).
    Ref(&'static str),
    /// What a fault acts on: a server, a connection or a database (by name).
    Target,
}

/// What a key is when the table leaves it out.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum KeyDefault {
    /// The key must be given; the message says why and how, at the fault's `kind`.
    Required(&'static str),
    /// As if the file had written this value (TOML text).
    Is(&'static str),
    /// No fixed value: the build function decides, as this says.
    Otherwise(&'static str),
}

/// The values a key accepts beyond its type.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Range {
    Any,
    /// A duration longer than zero; `why` says what zero would mean.
    Longer {
        why: &'static str,
    },
    /// A number between two bounds, to a step; `refusal` is the message, in which `{value}`
    /// is the value written and `{range}` the bounds.
    Numbers {
        low: Bound,
        high: Bound,
        step: f64,
        refusal: &'static str,
    },
    /// A whole number from `min` to a maximum the kind's target gives (`max` names it);
    /// `why` says what a value below `min` would mean, `over` is the message above the
    /// maximum (`{value}` the value written, `{max}` the maximum).
    Whole {
        min: i64,
        max: &'static str,
        why: &'static str,
        over: &'static str,
    },
}

#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Bound {
    Above(f64),
    AtMost(f64),
    Below(f64),
}

impl Bound {
    pub fn admits(self, value: f64) -> bool {
        match self {
            Bound::Above(low) => value > low,
            Bound::AtMost(high) => value <= high,
            Bound::Below(high) => value < high,
        }
    }

    fn describe(self) -> String {
        match self {
            Bound::Above(low) => format!("above {low}"),
            Bound::AtMost(high) => format!("at most {high}"),
            Bound::Below(high) => format!("below {high}"),
        }
    }
}

impl Range {
    /// The bounds in words: "above 1 and at most 1000".
    pub fn describe(self) -> String {
        match self {
            Range::Any => String::new(),
            Range::Longer { .. } => "longer than zero".to_owned(),
            Range::Numbers { low, high, .. } => {
                format!("{} and {}", low.describe(), high.describe())
            }
            Range::Whole { min, max, .. } => format!("{min} to {max}"),
        }
    }
}

/// The value column of a key's row: what it is and its range.
pub fn describe_value(key: &KeySpec) -> String {
    let words = |values: &[&str]| {
        let quoted: Vec<String> = values.iter().map(|v| format!("`\"{v}\"`")).collect();
        match quoted.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => "a kind".to_owned(),
        }
    };
    let value = match key.value {
        Value::Duration => "a duration".to_owned(),
        Value::Size => "a size (bytes, or `\"30MiB\"`)".to_owned(),
        Value::Bandwidth => "a rate, `\"100KiB/s\"`".to_owned(),
        Value::Count => "a whole number".to_owned(),
        Value::Number => "a number".to_owned(),
        Value::Bool => "`true` or `false`".to_owned(),
        Value::Enum(values) | Value::OneOf { values, .. } => words(values),
        Value::Ref(table) => format!("a name in [{table}]"),
        Value::Target => "a name in [servers], [connections] or [databases]".to_owned(),
    };
    let range = key.range.describe();
    match key.range {
        Range::Any => value,
        Range::Numbers { step, .. } => format!("{value}, {range}, to {step}"),
        _ => format!("{value}, {range}"),
    }
}

/// A declared default, as if the file had written it (TOML text).
pub(crate) fn default_value(value: Value, text: &str) -> RawValue {
    let word = text.trim_matches('"').to_owned();
    match value {
        Value::Duration | Value::Bandwidth => RawValue::Text(Text(word)),
        Value::Size if text.starts_with('"') => RawValue::Size(Size::Text(word)),
        Value::Size => RawValue::Size(Size::Bytes(text.parse().expect("a default size"))),
        Value::Count => RawValue::Whole(Whole(text.parse().expect("a default count"))),
        Value::Number => RawValue::Number(text.parse().expect("a default number")),
        Value::Bool => RawValue::Bool(text.parse().expect("a default flag")),
        Value::Enum(_) | Value::OneOf { .. } | Value::Ref(_) | Value::Target => {
            RawValue::Word(word)
        }
    }
}

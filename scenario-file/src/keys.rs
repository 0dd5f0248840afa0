//! What a key of a table is, declared once: its name, the value it reads as, its default, its
//! range and one line of doc ([`KeySpec`]). The fault kinds (`fault_kinds.rs`) and the tables
//! declared key by key (`breaker_keys.rs`, `retry_keys.rs`, `connection_keys.rs`,
//! `load_keys.rs`, `limit_keys.rs`, `policy_keys.rs`, `resource_keys.rs`, `service_keys.rs`:
//! [`DECLARED_TABLES`]; a step's action tables in `step_keys.rs`) are lists of these; from them come the raw readers
//! (`raw.rs`: `RawFault`, `RawTable`), the validators' getters (`validate/faults.rs`,
//! `validate/table.rs`), `validate --explain`'s keys, the missing-key messages' meanings
//! (`suggest.rs`) and the reference tables of `docs/scenario-format.md` ([`markdown_table`]).

use std::fmt::Write as _;

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
    /// A list of outcomes, or status classes (`"5xx"`).
    Outcomes,
    /// A list of names of resources of this table.
    Refs(&'static str),
    /// The name of a policy of this table, or a list of names of policies of it (a step's
    /// `retry = ["per-try", "overall"]`).
    Policies(&'static str),
    /// A list of these words (a step's `policies`, kinds of policy).
    Words(&'static [&'static str]),
    /// A name of the file's own choosing (a Pub/Sub channel), in these words.
    Name(&'static str),
    /// A whole number, or `"unlimited"`.
    CountOrUnlimited,
    /// A duration, or a table naming a distribution (a database's `latency`).
    Latency,
    /// A list of tables, each of keys declared there.
    Tables(&'static TableSpec),
    /// A table of keys of its own, declared there.
    Table(&'static TableSpec),
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
    /// A `preset` gives it; without one, the default inside.
    Preset(&'static KeyDefault),
}

/// The values a key accepts beyond its type.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Range {
    Any,
    /// A duration longer than zero, refused as written; `why` says what zero would mean.
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
    /// Bounds checked beyond the value's type, by the table's validation or by its policy's
    /// config (whose refusal is placed at the key), in words for the reference: "at least 1".
    Checked(&'static str),
    /// A whole number from `min` to `max`, refused as written; `why` says what a value below
    /// `min` would mean.
    Between {
        min: u32,
        max: u32,
        why: &'static str,
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
            Range::Checked(words) => words.to_owned(),
            Range::Between {
                min, max: u32::MAX, ..
            } => format!("at least {min}"),
            Range::Between { min, max, .. } => format!("from {min} to {max}"),
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
        Value::Outcomes => "a list of outcomes (or `\"4xx\"`, `\"5xx\"`)".to_owned(),
        Value::Refs(table) => format!("a list of names in [{table}]"),
        Value::Policies(table) => format!("a name in [{table}], or a list of them"),
        Value::Words(values) => format!("a list of {}", words(values)),
        Value::Name(what) => what.to_owned(),
        Value::CountOrUnlimited => "a whole number, or `\"unlimited\"`".to_owned(),
        Value::Latency => "a duration, or a distribution table".to_owned(),
        Value::Tables(_) => "a list of tables (below)".to_owned(),
        Value::Table(_) => "a table (below)".to_owned(),
    };
    let range = key.range.describe();
    match key.range {
        Range::Any => value,
        Range::Checked(_) | Range::Between { .. } => format!("{value}, {range}"),
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
        Value::Name(_) => RawValue::Word(word),
        Value::Outcomes
        | Value::Refs(_)
        | Value::Policies(_)
        | Value::Words(_)
        | Value::Table(_)
        | Value::Tables(_)
        | Value::CountOrUnlimited
        | Value::Latency => {
            unreachable!("a list, a table or a limit has no default written as text")
        }
    }
}

/// The default column of a key's row.
pub fn describe_default(default: KeyDefault) -> String {
    match default {
        KeyDefault::Required(_) => "required".to_owned(),
        KeyDefault::Is(text) => format!("`{text}`"),
        KeyDefault::Otherwise(text) => text.to_owned(),
        KeyDefault::Preset(KeyDefault::Required(_)) => {
            "required, unless a `preset` gives it".to_owned()
        }
        KeyDefault::Preset(inner) => format!("{}, or the preset's", describe_default(*inner)),
    }
}

/// A table whose keys are declared one by one (`[breakers.<name>]`, a breaker's
/// `failure_rate`): read by [`crate::raw::RawTable`], checked through
/// `validate/table.rs`'s reader, its reference table made by [`markdown_table`].
pub struct TableSpec {
    /// For messages and the reader: "a breaker".
    pub what: &'static str,
    pub keys: &'static [KeySpec],
    /// The keys' names, in order (serde's list of expected fields): [`key_names`] of `keys`.
    pub names: &'static [&'static str],
    /// Keys of which at most one may be set (a breaker's rule), checked as they are read.
    pub one_of: Option<&'static crate::one_of::OneOf>,
}

/// A table is the one declaration it is.
impl PartialEq for TableSpec {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl std::fmt::Debug for TableSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TableSpec({})", self.what)
    }
}

/// What a missing key says when its declaration gives no message of its own: serde's
/// `missing field`, told with the key's doc (`suggest::serde_message_at`).
pub(crate) const MISSING: &str = "";

impl TableSpec {
    /// A table declared with no more than its meaning: no rule of keys at most one of which
    /// may be set.
    pub(crate) const fn plain(
        what: &'static str,
        keys: &'static [KeySpec],
        names: &'static [&'static str],
    ) -> TableSpec {
        TableSpec {
            what,
            keys,
            names,
            one_of: None,
        }
    }

    pub fn key(&self, name: &str) -> Option<&'static KeySpec> {
        self.keys.iter().find(|key| key.name == name)
    }

    /// The key `name`, which the caller knows is declared.
    pub fn declared(&self, name: &str) -> &'static KeySpec {
        self.key(name)
            .unwrap_or_else(|| panic!("{} declares no `{name}`", self.what))
    }
}

/// The `name` of each preset of a model's list (`presets::BREAKER_PRESETS`), as a const array
/// for the values of a `preset` key.
macro_rules! preset_names {
    ($presets:expr) => {{
        let mut names = [""; $presets.len()];
        let mut i = 0;
        while i < names.len() {
            names[i] = $presets[i].name;
            i += 1;
        }
        names
    }};
}

pub(crate) use preset_names;

/// The names of `keys`, in order, for a [`TableSpec`]'s `names`.
pub const fn key_names<const N: usize>(keys: &[KeySpec; N]) -> [&'static str; N] {
    let mut names = [""; N];
    let mut i = 0;
    while i < N {
        names[i] = keys[i].name;
        i += 1;
    }
    names
}

/// The reference table of `spec`'s keys, as markdown: key, value, default, meaning (the last
/// cell is what `suggest` quotes for a key that is missing).
pub fn markdown_table(spec: &TableSpec) -> String {
    let mut out = String::from("| key | value | default | meaning |\n|---|---|---|---|\n");
    for key in spec.keys {
        let value = describe_value(key);
        let default = describe_default(key.default);
        let name = key.name;
        let doc = key.doc;
        writeln!(out, "| `{name}` | {value} | {default} | {doc} |").expect("a String");
    }
    out
}

/// The root tables whose keys are declared one by one, and their declarations.
pub const DECLARED_TABLES: [(&str, &TableSpec); 18] = [
    ("breakers", &crate::breaker_keys::BREAKER),
    ("bulkheads", &crate::limit_keys::BULKHEAD),
    ("semaphores", &crate::limit_keys::SEMAPHORE),
    ("adaptive_limits", &crate::limit_keys::ADAPTIVE_LIMIT),
    ("retries", &crate::retry_keys::RETRY),
    ("caches", &crate::policy_keys::CACHE),
    ("rate_limits", &crate::policy_keys::RATE_LIMIT),
    ("kv_stores", &crate::policy_keys::KV_STORE),
    ("throttles", &crate::policy_keys::THROTTLE),
    ("locks", &crate::policy_keys::LOCK),
    ("connections", &crate::connection_keys::CONNECTION),
    ("loads", &crate::load_keys::LOAD),
    ("databases", &crate::resource_keys::DATABASE),
    ("keys", &crate::resource_keys::KEY_FAMILY),
    ("servers", &crate::resource_keys::SERVER),
    ("client_loops", &crate::connection_keys::CLIENT_LOOP),
    ("callers", &crate::load_keys::CALLER),
    ("services", &crate::service_keys::SERVICE),
];

/// The words the key `key` of the root table `table` takes, in order (a word list's, a
/// preset's names), for the fuzzer's generator: `declared_words("retries", "jitter")`.
pub fn declared_words(table: &str, key: &str) -> &'static [&'static str] {
    let (_, spec) = DECLARED_TABLES
        .iter()
        .find(|(name, _)| *name == table)
        .unwrap_or_else(|| panic!("[{table}] is not declared key by key"));
    match spec.declared(key).value {
        Value::Enum(words) | Value::OneOf { values: words, .. } => words,
        _ => panic!("`{table}.{key}` is not a list of words"),
    }
}

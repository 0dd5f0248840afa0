//! The scenario file as written: serde types that mirror the TOML, with spans where a later
//! check needs to point at a value. Nothing here is validated beyond its TOML type; see
//! `validate.rs` for the rules. The root table, `RawScenario`, is made in `kinds.rs` from the
//! list of resource kinds. A table whose keys are declared one by one (`crate::keys`: the
//! resources' tables, a flow step and its action tables in `step_keys.rs`) is read by one reader,
//! [`RawTable`], from its declaration, and a fault by [`RawFault`] from its kinds'; the other
//! types here are derived.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, Visitor};
use toml::Spanned;

use crate::fault_kinds::{self, FaultKindSpec};
use crate::keys::{KeyDefault, KeySpec, TableSpec, Value};
use crate::one_of::{OneOf, fields_of};
use crate::step_keys::{
    RawCacheStep, RawCallStep, RawDbStep, RawDistribution, RawLockStep, RawRateLimitStep,
    RawRedisStep, RawStep, RawThrottleStep,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeader {
    pub name: Spanned<String>,
    #[allow(dead_code)] // shown to readers of the file, not used by the run
    pub description: Option<String>,
    pub seed: Option<Spanned<Whole>>,
    /// The seeds on which the file's expectations hold, `"A..B"` (inclusive).
    pub seeds: Option<Spanned<String>>,
    /// Expectations every variant must meet.
    #[serde(default)]
    pub expect: Vec<Spanned<String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    pub horizon: Option<Spanned<Text>>,
    pub time_max: Option<Spanned<Text>>,
    pub events_max: Option<Spanned<Whole>>,
    pub memory_max: Option<Spanned<Size>>,
    pub ties: Option<TiesName>,
}

/// `[run] ties`: how same-instant events of one class take turns.
#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TiesName {
    Scheduled,
    Shuffled,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub bucket: Option<Spanned<Text>>,
    pub percentile_rule: Option<PercentileRuleName>,
}

/// `[report]`: what a study's table shows and how it chooses (`run --seeds`); the command
/// line's `--metric`, `--baseline`, `--constraint`, `--objective` and `--tie-break` take
/// precedence.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawReport {
    #[serde(default)]
    pub metrics: Vec<Spanned<String>>,
    pub baseline: Option<Spanned<String>>,
    #[serde(default)]
    pub constraints: Vec<Spanned<String>>,
    pub objective: Option<Spanned<String>>,
    pub tie_break: Option<Spanned<String>>,
    pub slo: Option<Spanned<RawSlo>>,
}

/// `[observed]`: a file of what was measured during the incident, the instant the run's time
/// 0 stands for, and which of its series to compare with which of the run's metrics.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawObserved {
    pub file: Spanned<String>,
    pub start: Option<Spanned<Instant>>,
    pub series: Spanned<BTreeMap<String, Spanned<RawObservedSeries>>>,
}

/// `[observed.series.<name>]`: the file's series (by its name and labels) and the run's metric.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawObservedSeries {
    pub name: Option<Spanned<String>>,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    pub metric: Spanned<String>,
}

/// `[fit]`: the unknowns `outagelab fit` searches to match `[observed]`, on which variant and
/// seeds, with how many runs a seed.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFit {
    pub variant: Option<Spanned<String>>,
    pub seeds: Option<Spanned<String>>,
    pub runs_max: Option<Spanned<Whole>>,
    pub unknowns: Spanned<BTreeMap<String, Spanned<RawUnknown>>>,
}

/// `[tune]`: the knobs `outagelab tune` searches, and how hard.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTune {
    pub variant: Option<Spanned<String>>,
    pub rounds: Option<Spanned<Whole>>,
    pub candidates: Option<Spanned<Whole>>,
    pub knobs: Spanned<BTreeMap<String, Spanned<RawUnknown>>>,
}

/// `"faults.pause.duration" = { min = "500ms", max = "5s" }`: a key the file writes, and the
/// range to search.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawUnknown {
    pub min: Spanned<Bound>,
    pub max: Spanned<Bound>,
}

/// A range's end: a number, or a string with a unit (a duration).
#[derive(Clone, Debug)]
pub enum Bound {
    Number(f64),
    Text(String),
}

impl<'de> Deserialize<'de> for Bound {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BoundVisitor;
        impl Visitor<'_> for BoundVisitor {
            type Value = Bound;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, or a duration such as \"500ms\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Bound, E> {
                Ok(Bound::Text(text.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Bound, E> {
                Ok(Bound::Number(number as f64))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Bound, E> {
                Ok(Bound::Number(number as f64))
            }
            fn visit_f64<E: de::Error>(self, number: f64) -> Result<Bound, E> {
                Ok(Bound::Number(number))
            }
        }
        deserializer.deserialize_any(BoundVisitor)
    }
}

/// An instant: Unix seconds (a number) or a string the `observed` crate reads (Unix seconds or
/// RFC 3339).
pub struct Instant(pub String);

impl<'de> Deserialize<'de> for Instant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InstantVisitor;
        impl Visitor<'_> for InstantVisitor {
            type Value = Instant;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "an instant: Unix seconds, or an RFC 3339 time as a string, such as \
                     \"2024-12-03T10:00:00Z\"",
                )
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Instant, E> {
                Ok(Instant(text.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Instant, E> {
                Ok(Instant(number.to_string()))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Instant, E> {
                Ok(Instant(number.to_string()))
            }
            fn visit_f64<E: de::Error>(self, number: f64) -> Result<Instant, E> {
                // Unix seconds with a fraction: to the millisecond, as a timestamp is read.
                Ok(Instant(format!("{number:.3}")))
            }
        }
        deserializer.deserialize_any(InstantVisitor)
    }
}

/// `slo = { latency = "200ms", percentile = 99 }`: what the charts mark as the objective.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSlo {
    pub latency: Spanned<Text>,
    pub percentile: Option<Spanned<f64>>,
}

/// `[http]`: the status each outcome is answered with.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Outcome name to status code; outcomes left out keep their default status.
    #[serde(default)]
    pub status: BTreeMap<String, Spanned<Whole>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PercentileRuleName {
    NearestRank,
    FloorIndex,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlow {
    pub steps: Spanned<Vec<Spanned<RawStep>>>,
}

/// The policies of one kind a step names: a name, or a list of names.
pub enum PolicyNames {
    One(String),
    Many(Vec<Spanned<String>>),
}

impl PolicyNames {
    /// The names of a key declared [`Value::Policies`], as [`RawTable`] read them.
    pub fn written(value: &Spanned<RawValue>) -> Spanned<PolicyNames> {
        let names = match value.get_ref() {
            RawValue::Word(name) => PolicyNames::One(name.clone()),
            RawValue::List(names) => PolicyNames::Many(names.clone()),
            _ => unreachable!("policies are read as a name or a list"),
        };
        Spanned::new(value.span(), names)
    }

    /// Each name with its span; `whole` is the span of the value as written (a lone name's).
    pub fn names(&self, whole: std::ops::Range<usize>) -> Vec<Spanned<String>> {
        match self {
            PolicyNames::One(name) => vec![Spanned::new(whole, name.clone())],
            PolicyNames::Many(names) => names.clone(),
        }
    }
}

impl<'de> Deserialize<'de> for PolicyNames {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Names;
        impl<'de> Visitor<'de> for Names {
            type Value = PolicyNames;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a policy's name, or a list of names of policies of one kind")
            }

            fn visit_str<E: de::Error>(self, name: &str) -> Result<PolicyNames, E> {
                Ok(PolicyNames::One(name.to_owned()))
            }

            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<PolicyNames, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<Spanned<String>>()? {
                    names.push(name);
                }
                Ok(PolicyNames::Many(names))
            }
        }
        deserializer.deserialize_any(Names)
    }
}

/// The actions of a step, of which it has exactly one (`step_keys::STEP`'s one-of), each
/// with the keys of its own table, for the message of a key written beside it.
pub(crate) const STEP_ACTIONS: OneOf = OneOf {
    tags: &[
        ("redis", fields_of::<RawRedisStep>),
        ("db", fields_of::<RawDbStep>),
        ("work", fields_of::<RawDistribution>),
        ("call", fields_of::<RawCallStep>),
        ("cache", fields_of::<RawCacheStep>),
        ("throttle", fields_of::<RawThrottleStep>),
        ("rate_limit", fields_of::<RawRateLimitStep>),
        ("lock", fields_of::<RawLockStep>),
    ],
    what: "a step",
    tag_noun: "action",
    advice: "give each action a step of its own",
    tag_required: true,
};

impl RawStep {
    /// The step's one action (a step without one, or with two, is not read): its key and its
    /// value as written.
    pub fn action(&self) -> (&'static str, &Spanned<RawValue>) {
        let is_action = |name: &&str| STEP_ACTIONS.tags.iter().any(|(tag, _)| tag == name);
        (self.keys.0.iter())
            .find(|(name, _)| is_action(name))
            .map(|(name, value)| (*name, value))
            .expect("a step is read only with one action")
    }
}

/// A `[faults.<name>]` table: the keys every fault has, then the keys of the kinds, each read
/// as the value its declaration says (`crate::fault_kinds`). A key no kind declares is refused
/// here, naming every key, as a derived struct with `deny_unknown_fields` would.
pub struct RawFault {
    /// A disabled fault is checked (a variant may enable it) and left out.
    pub enabled: Option<bool>,
    pub target: Spanned<String>,
    pub kind: Spanned<FaultKindName>,
    pub at: Spanned<Text>,
    pub duration: Option<Spanned<Text>>,
    /// The kinds' own keys as written, in the order `fault_kinds::all_keys` lists them; which
    /// of them this fault's kind takes is checked by the validator.
    pub keys: Vec<(&'static str, Spanned<RawValue>)>,
}

impl RawFault {
    /// The kind key `name` as written.
    pub fn key(&self, name: &str) -> Option<&Spanned<RawValue>> {
        self.keys
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }
}

/// A fault kind's key as written, in the raw type its declared [`Value`] reads.
#[derive(Clone)]
pub enum RawValue {
    /// A duration or a bandwidth.
    Text(Text),
    Size(Size),
    Whole(Whole),
    Number(f64),
    Bool(bool),
    /// A word of a list, or a resource's name.
    Word(String),
    /// A list of words (outcomes, names).
    List(Vec<Spanned<String>>),
    /// A number of retries, or none.
    Limit(RetryLimit),
    /// A duration or a distribution.
    Latency(RawLatency),
    /// A list of declared tables, each at its span.
    Tables(Vec<Spanned<Written>>),
    /// A declared table of its own.
    Table(Written),
}

impl<'de> Deserialize<'de> for RawFault {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_struct("RawFault", fault_kinds::all_keys(), FaultVisitor)
    }
}

/// A fault table's key: one of its own fields, or a kind's key and the value it reads as.
enum FaultKey {
    Enabled,
    Target,
    Kind,
    At,
    Duration,
    Of(&'static str, Value),
}

impl<'de> Deserialize<'de> for FaultKey {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = FaultKey;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a fault's key")
            }
            fn visit_str<E: de::Error>(self, key: &str) -> Result<FaultKey, E> {
                Ok(match key {
                    "enabled" => FaultKey::Enabled,
                    "target" => FaultKey::Target,
                    "kind" => FaultKey::Kind,
                    "at" => FaultKey::At,
                    "duration" => FaultKey::Duration,
                    _ => match fault_kinds::key_value(key) {
                        Some((name, value)) => FaultKey::Of(name, value),
                        None => return Err(E::unknown_field(key, fault_kinds::all_keys())),
                    },
                })
            }
        }
        deserializer.deserialize_identifier(KeyVisitor)
    }
}

struct FaultVisitor;

impl<'de> Visitor<'de> for FaultVisitor {
    type Value = RawFault;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a fault's table")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<RawFault, M::Error> {
        let (mut enabled, mut target, mut kind, mut at, mut duration) =
            (None, None, None, None, None);
        let mut keys = Vec::new();
        while let Some(key) = map.next_key::<FaultKey>()? {
            match key {
                FaultKey::Enabled => enabled = Some(map.next_value()?),
                FaultKey::Target => target = Some(map.next_value()?),
                FaultKey::Kind => kind = Some(map.next_value()?),
                FaultKey::At => at = Some(map.next_value()?),
                FaultKey::Duration => duration = Some(map.next_value()?),
                FaultKey::Of(name, value) => keys.push((name, read_value(&mut map, value)?)),
            }
        }
        let order = |name: &&str| fault_kinds::all_keys().iter().position(|key| key == name);
        keys.sort_by_key(|(name, _)| order(name));
        Ok(RawFault {
            enabled,
            target: target.ok_or_else(|| de::Error::missing_field("target"))?,
            kind: kind.ok_or_else(|| de::Error::missing_field("kind"))?,
            at: at.ok_or_else(|| de::Error::missing_field("at"))?,
            duration,
            keys,
        })
    }
}

/// The value of a kind's key, read as the raw type of its declared `value`.
fn read_value<'de, M: MapAccess<'de>>(
    map: &mut M,
    value: Value,
) -> Result<Spanned<RawValue>, M::Error> {
    fn wrap<T>(value: Spanned<T>, raw: fn(T) -> RawValue) -> Spanned<RawValue> {
        let span = value.span();
        Spanned::new(span, raw(value.into_inner()))
    }
    Ok(match value {
        Value::Duration | Value::Bandwidth => {
            wrap(map.next_value::<Spanned<Text>>()?, RawValue::Text)
        }
        Value::Size => wrap(map.next_value::<Spanned<Size>>()?, RawValue::Size),
        Value::Count => wrap(map.next_value::<Spanned<Whole>>()?, RawValue::Whole),
        Value::Number => wrap(map.next_value::<Spanned<f64>>()?, RawValue::Number),
        Value::Bool => wrap(map.next_value::<Spanned<bool>>()?, RawValue::Bool),
        Value::Enum(_) => wrap(map.next_value::<Spanned<Word>>()?, |word| {
            RawValue::Word(word.0)
        }),
        Value::OneOf { .. } | Value::Ref(_) | Value::Target | Value::Name(_) => {
            wrap(map.next_value::<Spanned<String>>()?, RawValue::Word)
        }
        Value::CountOrUnlimited => wrap(map.next_value::<Spanned<RetryLimit>>()?, RawValue::Limit),
        Value::Latency => wrap(map.next_value::<Spanned<RawLatency>>()?, RawValue::Latency),
        Value::Policies(_) => wrap(
            map.next_value::<Spanned<PolicyNames>>()?,
            |names| match names {
                PolicyNames::One(name) => RawValue::Word(name),
                PolicyNames::Many(names) => RawValue::List(names),
            },
        ),
        Value::Outcomes | Value::Refs(_) | Value::Words(_) | Value::Table(_) | Value::Tables(_) => {
            unreachable!("a list or a table is read by the table's reader")
        }
    })
}

/// A word of a list, read as serde reads a unit variant (TOML's refusal of another type is
/// the same as for an enum); whether it is one of the list is checked by the validator.
struct Word(String);

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct WordVisitor;
        impl<'de> Visitor<'de> for WordVisitor {
            type Value = Word;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a word")
            }
            fn visit_str<E: de::Error>(self, word: &str) -> Result<Word, E> {
                Ok(Word(word.to_owned()))
            }
            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Word, A::Error> {
                let (word, variant): (String, _) = data.variant()?;
                de::VariantAccess::unit_variant(variant)?;
                Ok(Word(word))
            }
        }
        deserializer.deserialize_enum("Word", &[], WordVisitor)
    }
}

/// A table whose keys are declared one by one in `S::SPEC` (`crate::keys::TableSpec`): each
/// key read as the raw type its declared value says; a key it does not declare refused here,
/// naming every key, and a required key missing refused as serde's `missing field`, as a
/// derived struct with `deny_unknown_fields` would; keys of which at most one may be set
/// checked by its `one_of` as they are read. Values are checked against their declaration
/// (words, ranges, references) by the validator's reader, `validate/table.rs`.
pub struct RawTable<S> {
    pub keys: Written,
    declared: PhantomData<S>,
}

impl<S> Clone for RawTable<S> {
    fn clone(&self) -> Self {
        RawTable {
            keys: self.keys.clone(),
            declared: PhantomData,
        }
    }
}

/// The keys of a declared table as written, in the order written.
#[derive(Clone, Default)]
pub struct Written(pub Vec<(&'static str, Spanned<RawValue>)>);

impl Written {
    pub fn get(&self, name: &str) -> Option<&Spanned<RawValue>> {
        self.0
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value)
    }
}

/// A table type declared in `SPEC`.
pub trait Declared: 'static {
    const SPEC: &'static TableSpec;

    /// What a table written as something else is told it should look like (`cache = { name
    /// = "l1", op = "get", key = "product" }`): "expected a table such as ...". Without one,
    /// `suggest` says to write a table or a section.
    const EXAMPLE: Option<&'static str> = None;

    /// Reads the value of the key `key`, declared a table ([`Value::Table`]): each such table
    /// is a type of its own, read as `Spanned<RawTable<Its>>`.
    fn nested<'de, M: MapAccess<'de>>(
        key: &'static KeySpec,
        _map: &mut M,
    ) -> Result<Spanned<RawValue>, M::Error> {
        unreachable!("{} declares no table `{}`", Self::SPEC.what, key.name)
    }
}

impl<'de, S: Declared> Deserialize<'de> for RawTable<S> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spec = S::SPEC;
        let visitor = TableVisitor::<S>(PhantomData);
        let keys = match spec.one_of {
            Some(one_of) => one_of.read(deserializer, |table| {
                table.deserialize_struct(spec.what, spec.names, visitor)
            })?,
            None => deserializer.deserialize_struct(spec.what, spec.names, visitor)?,
        };
        Ok(RawTable {
            keys,
            declared: PhantomData,
        })
    }
}

struct TableVisitor<S>(PhantomData<S>);

impl<'de, S: Declared> Visitor<'de> for TableVisitor<S> {
    type Value = Written;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match S::EXAMPLE {
            Some(example) => write!(f, "a table such as {example}"),
            // `suggest` recognises a table written as something else by this word.
            None => write!(f, "struct RawTable ({})", S::SPEC.what),
        }
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Written, M::Error> {
        let mut keys = Vec::new();
        while let Some(key) = map.next_key_seed(DeclaredKey(S::SPEC))? {
            let value = match key.value {
                Value::Table(_) | Value::Tables(_) => S::nested(key, &mut map)?,
                Value::Outcomes | Value::Refs(_) | Value::Words(_) => {
                    let list = map.next_value::<Spanned<Vec<Spanned<String>>>>()?;
                    let span = list.span();
                    Spanned::new(span, RawValue::List(list.into_inner()))
                }
                value => read_value(&mut map, value)?,
            };
            keys.push((key.name, value));
        }
        for key in S::SPEC.keys {
            let written = keys.iter().any(|(name, _)| *name == key.name);
            if matches!(key.default, KeyDefault::Required(_)) && !written {
                return Err(de::Error::missing_field(key.name));
            }
        }
        Ok(Written(keys))
    }
}

/// A key of a declared table: its declaration, or serde's refusal of an unknown field.
struct DeclaredKey(&'static TableSpec);

impl<'de> DeserializeSeed<'de> for DeclaredKey {
    type Value = &'static KeySpec;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for DeclaredKey {
    type Value = &'static KeySpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a key of {}", self.0.what)
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<&'static KeySpec, E> {
        self.0
            .key(key)
            .ok_or_else(|| E::unknown_field(key, self.0.names))
    }
}

/// A nested table's value, for [`Declared::nested`].
pub fn nested_table<'de, S: Declared, M: MapAccess<'de>>(
    map: &mut M,
) -> Result<Spanned<RawValue>, M::Error> {
    let table = map.next_value::<Spanned<RawTable<S>>>()?;
    let span = table.span();
    Ok(Spanned::new(span, RawValue::Table(table.into_inner().keys)))
}

/// A fault's `kind`: one of [`fault_kinds::FAULT_KINDS`].
#[derive(Clone, Copy)]
pub struct FaultKindName(pub &'static FaultKindSpec);

impl PartialEq for FaultKindName {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl<'de> Deserialize<'de> for FaultKindName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct NameVisitor;
        impl Visitor<'_> for NameVisitor {
            type Value = FaultKindName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a fault kind")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<FaultKindName, E> {
                match fault_kinds::kind(name) {
                    Some(kind) => Ok(FaultKindName(kind)),
                    None => Err(E::unknown_variant(name, fault_kinds::kind_names())),
                }
            }
        }
        struct KindVisitor;
        impl<'de> Visitor<'de> for KindVisitor {
            type Value = FaultKindName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a fault kind")
            }
            fn visit_enum<A: de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
                struct Seed;
                impl<'de> de::DeserializeSeed<'de> for Seed {
                    type Value = FaultKindName;
                    fn deserialize<D: Deserializer<'de>>(
                        self,
                        d: D,
                    ) -> Result<FaultKindName, D::Error> {
                        d.deserialize_identifier(NameVisitor)
                    }
                }
                let (kind, variant) = data.variant_seed(Seed)?;
                de::VariantAccess::unit_variant(variant)?;
                Ok(kind)
            }
        }
        deserializer.deserialize_enum("FaultKindName", fault_kinds::kind_names(), KindVisitor)
    }
}

/// A `[[variant]]` entry, without its `patch` (which is merged into the document, not
/// deserialised).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVariant {
    pub name: Spanned<String>,
    #[allow(dead_code)] // shown to readers of the file, not used by the run
    pub description: Option<String>,
    #[serde(default)]
    pub expect: Vec<Spanned<String>>,
    /// This variant's own expectations at a swept value (`"60" = ["..."]`), beside
    /// `[sweep.expect]`'s, which every variant has.
    #[serde(default)]
    pub expect_at: BTreeMap<String, Vec<Spanned<String>>>,
    /// The resources its patch creates on purpose (`"faults.down"`): a patch that names a
    /// resource the base file lacks is a warning unless it is listed here.
    #[serde(default)]
    pub creates: Vec<Spanned<String>>,
}

/// The `[sweep]` table, without its `values` (which are inserted into the document).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSweep {
    pub parameter: Spanned<String>,
    pub label: Option<String>,
    /// The variants this axis applies to (all without it): the others run once, at the
    /// file's value, instead of once per swept value.
    pub variants: Option<Spanned<Vec<Spanned<String>>>>,
    /// Expectations by swept value, e.g. `"60" = ["..."]`.
    #[serde(default)]
    pub expect: BTreeMap<String, Vec<Spanned<String>>>,
}

/// A quantity written as a string with a unit (a duration or a bandwidth); a bare number is
/// rejected with a hint, because `timeout = 100` could mean anything.
#[derive(Clone)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl Visitor<'_> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity with a unit, such as \"100ms\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
                Ok(Text(text.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Text, E> {
                Err(E::custom(format!(
                    "`{number}` has no unit: write it as a string with a unit, e.g. \"{number}ms\""
                )))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Text, E> {
                self.visit_i64(number as i64)
            }
            fn visit_f64<E: de::Error>(self, number: f64) -> Result<Text, E> {
                Err(E::custom(format!(
                    "`{number}` has no unit: write it as a string with a unit, e.g. \"{number}s\""
                )))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

/// A whole number as TOML writes it (signed, 64 bits); `validate.rs` checks it against the
/// range of what it counts.
#[derive(Clone)]
pub struct Whole(pub i64);

impl<'de> Deserialize<'de> for Whole {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct WholeVisitor;
        impl Visitor<'_> for WholeVisitor {
            type Value = Whole;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a whole number")
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Whole, E> {
                Ok(Whole(number))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Whole, E> {
                i64::try_from(number)
                    .map(Whole)
                    .map_err(|_| E::custom(format!("{number} is too large for a TOML integer")))
            }
            fn visit_f64<E: de::Error>(self, number: f64) -> Result<Whole, E> {
                Err(E::custom(format!("`{number}` is not a whole number")))
            }
        }
        deserializer.deserialize_any(WholeVisitor)
    }
}

/// A size: a whole number of bytes, or a string with a unit such as `"2MiB"`.
#[derive(Clone)]
pub enum Size {
    Bytes(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: a number of bytes or a string such as \"2MiB\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Size, E> {
                Ok(Size::Text(text.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Size, E> {
                u64::try_from(number)
                    .map(Size::Bytes)
                    .map_err(|_| E::custom(format!("a size cannot be negative ({number})")))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Size, E> {
                Ok(Size::Bytes(number))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// `max_retries`: a count, or `"unlimited"`.
#[derive(Clone)]
pub enum RetryLimit {
    Count(u64),
    Unlimited,
}

impl<'de> Deserialize<'de> for RetryLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LimitVisitor;
        impl Visitor<'_> for LimitVisitor {
            type Value = RetryLimit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of retries or \"unlimited\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<RetryLimit, E> {
                match text {
                    "unlimited" => Ok(RetryLimit::Unlimited),
                    _ => Err(E::custom(format!(
                        "`{text}` is not a retry limit: write a number or \"unlimited\""
                    ))),
                }
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<RetryLimit, E> {
                u64::try_from(number)
                    .map(RetryLimit::Count)
                    .map_err(|_| E::custom(format!("retries cannot be negative ({number})")))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<RetryLimit, E> {
                Ok(RetryLimit::Count(number))
            }
        }
        deserializer.deserialize_any(LimitVisitor)
    }
}

/// A latency (of a database, a query, a `work` step): a constant duration (`"50ms"`) or a
/// table naming a distribution, whose keys `step_keys::DISTRIBUTION` declares.
#[derive(Clone)]
pub enum RawLatency {
    Constant(Text),
    Distribution(RawDistribution),
}

impl<'de> Deserialize<'de> for RawLatency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LatencyVisitor;
        impl<'de> Visitor<'de> for LatencyVisitor {
            type Value = RawLatency;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration such as \"50ms\", or a table such as \
                     { distribution = \"uniform\", min = \"49ms\", max = \"51ms\" }",
                )
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<RawLatency, E> {
                Ok(RawLatency::Constant(Text(text.to_owned())))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<RawLatency, E> {
                Text::deserialize(de::value::I64Deserializer::new(number)).map(RawLatency::Constant)
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<RawLatency, M::Error> {
                RawDistribution::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawLatency::Distribution)
            }
        }
        deserializer.deserialize_any(LatencyVisitor)
    }
}

#[cfg(test)]
mod tests {
    use outagelab_sim::scenario::PolicyKind;

    use super::*;
    use crate::step_keys::STEP;

    /// A step's first keys are its actions, of which its one-of admits one, in its order.
    #[test]
    fn a_steps_first_keys_are_its_actions() {
        let one_of = STEP.one_of.expect("a step has one action");
        let tags: Vec<&str> = one_of.tags.iter().map(|(tag, _)| *tag).collect();
        assert_eq!(&STEP.names[..tags.len()], tags.as_slice());
    }

    /// The declared kinds of `policies` are the model's, in its default order, each the key
    /// a step names its policies of that kind with.
    #[test]
    fn a_steps_policy_keys_are_the_policy_kinds() {
        let kinds: Vec<&str> = PolicyKind::DEFAULT_ORDER.iter().map(|k| k.name()).collect();
        let Value::Words(words) = STEP.declared("policies").value else {
            panic!("`policies` is declared a list of words");
        };
        assert_eq!(words, kinds.as_slice());
        for kind in kinds {
            assert!(
                matches!(STEP.declared(kind).value, Value::Policies(_)),
                "`{kind}` names policies"
            );
        }
    }
}

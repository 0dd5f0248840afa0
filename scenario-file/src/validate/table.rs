//! A table declared key by key (`crate::keys::TableSpec`), read through [`TableReader`]: each
//! getter takes a key as its declaration says: the value written (its word, its bounds and
//! its units checked, a problem reported at the value), else the preset's value when the key
//! is declared to take one ([`KeyDefault::Preset`]), else its declared default.

use std::ops::Range as Span;

use outagelab_model::time::SimDuration;
use outagelab_sim::scenario::{ByteRate, Distribution};
use serde::de::Error as _;
use toml::Spanned;

use super::{PresetUse, Reported, Validator};
use crate::keys::{KeyDefault, KeySpec, Range, TableSpec, Value};
use crate::kinds::NameIndex;
use crate::raw::{RawValue, RetryLimit, Size, Text, Written};

/// One table's keys, read as declared. A getter that finds a problem reports it and returns
/// [`Reported`].
pub(crate) struct TableReader<'v, 'a, 'r> {
    pub validator: &'v mut Validator<'a>,
    /// The table's path: `breakers.redis`, `breakers.redis.failure_rate`.
    pub prefix: String,
    raw: &'r Written,
    spec: &'static TableSpec,
    /// The `preset` key's span when the table names one: where a value it gave is placed.
    preset_span: Option<Span<usize>>,
    /// Where a problem with no value of its own is placed: the table's key.
    pub table_span: Option<Span<usize>>,
}

impl<'v, 'a, 'r> TableReader<'v, 'a, 'r> {
    pub fn new(
        validator: &'v mut Validator<'a>,
        prefix: String,
        raw: &'r Written,
        spec: &'static TableSpec,
        table_span: Option<Span<usize>>,
    ) -> Self {
        let preset_span = raw.get("preset").map(Spanned::span);
        TableReader {
            validator,
            prefix,
            raw,
            spec,
            preset_span,
            table_span,
        }
    }

    /// The table `name` (declared [`Value::Table`]) as written, read through its own reader.
    pub fn table(&mut self, name: &str) -> Option<TableReader<'_, 'a, 'r>> {
        let Value::Table(spec) = self.declared(name).value else {
            unreachable!("`{name}` is not declared a table")
        };
        let value = self.written(name)?;
        let RawValue::Table(keys) = value.get_ref() else {
            unreachable!("a table is read as a table")
        };
        let span = Some(value.span());
        let prefix = self.key(name);
        Some(TableReader {
            validator: self.validator,
            prefix,
            raw: keys,
            spec,
            preset_span: None,
            table_span: span,
        })
    }

    /// A reader of one table of the list `list` (declared [`Value::Tables`]), whose keys are
    /// `keys`, at `span`, its path `prefix`.
    pub fn over(
        &mut self,
        list: &str,
        prefix: String,
        keys: &'r Written,
        span: Span<usize>,
    ) -> TableReader<'_, 'a, 'r> {
        let Value::Tables(spec) = self.declared(list).value else {
            unreachable!("`{list}` is not declared a list of tables")
        };
        TableReader {
            validator: self.validator,
            prefix,
            raw: keys,
            spec,
            preset_span: None,
            table_span: Some(span),
        }
    }

    /// The tables of the list `name` as written, and the list's span.
    pub fn tables(&self, name: &str) -> Option<(Span<usize>, &'r [Spanned<Written>])> {
        let value = self.written(name)?;
        let RawValue::Tables(tables) = value.get_ref() else {
            unreachable!("a list of tables is read as one")
        };
        Some((value.span(), tables))
    }

    /// The key's path: `breakers.redis.open_for`.
    pub fn key(&self, name: &str) -> String {
        format!("{}.{name}", self.prefix)
    }

    pub fn written(&self, name: &str) -> Option<&'r Spanned<RawValue>> {
        self.declared(name);
        self.raw.get(name)
    }

    pub fn written_span(&self, name: &str) -> Option<Span<usize>> {
        self.written(name).map(Spanned::span)
    }

    /// Where the key's value came from: where it is written, else the preset that gave it.
    pub fn span(&self, name: &str) -> Option<Span<usize>> {
        let preset = match self.declared(name).default {
            KeyDefault::Preset(_) => self.preset_span.clone(),
            _ => None,
        };
        self.written_span(name).or(preset)
    }

    /// Reports `message` at the key's value (or where it came from, or the table).
    pub fn refuse(&mut self, name: &str, message: impl Into<String>) -> Reported {
        let span = self.span(name).or(self.table_span.clone());
        let key = self.key(name);
        self.validator.error(span, key, message);
        Reported
    }

    /// Reports the key missing, with its declared message, at the table.
    pub fn missing(&mut self, name: &str) -> Reported {
        let message = match self.declared(name).default {
            KeyDefault::Required(message) | KeyDefault::Preset(&KeyDefault::Required(message)) => {
                message
            }
            _ => unreachable!("`{name}` is not required"),
        };
        let key = self.key(name);
        self.validator.error(self.table_span.clone(), key, message);
        Reported
    }

    /// The preset the table names (checked as declared), recorded for `--explain`.
    pub fn preset<P>(
        &mut self,
        find: fn(&str) -> Option<&'static P>,
    ) -> Result<Option<&'static P>, Reported> {
        let Some(name) = self.word("preset")? else {
            return Ok(None);
        };
        self.validator.presets.push(PresetUse {
            section: self.prefix.clone(),
            preset: name.to_owned(),
        });
        Ok(Some(
            find(name).expect("the declared presets are the model's"),
        ))
    }

    /// A flag: written, else the preset's (or the kind's own default, `preset`), else the
    /// declared default.
    pub fn flag_or(&mut self, name: &str, preset: Option<bool>) -> bool {
        match self.written(name).map(Spanned::get_ref) {
            Some(RawValue::Bool(flag)) => *flag,
            Some(_) => unreachable!("a flag is read as a boolean"),
            None => preset.unwrap_or_else(|| self.default_text(name) == Some("true")),
        }
    }

    pub fn flag(&mut self, name: &str) -> bool {
        match self.written(name).map(Spanned::get_ref) {
            Some(RawValue::Bool(flag)) => *flag,
            Some(_) => unreachable!("a flag is read as a boolean"),
            None => self.default_text(name) == Some("true"),
        }
    }

    /// A duration: written, else the preset's (`preset`), else the declared default.
    pub fn duration(
        &mut self,
        name: &str,
        preset: Option<SimDuration>,
    ) -> Result<Option<SimDuration>, Reported> {
        let Some(text) = self.text(name) else {
            return Ok(self.or_default(name, preset, |text| {
                SimDuration::from_nanos(
                    crate::units::parse_duration(text.trim_matches('"')).expect("defaults parse"),
                )
            }));
        };
        let key = self.key(name);
        let duration = match self.declared(name).range {
            Range::Longer { why } => self.validator.positive_duration(&text, &key, why),
            _ => self.validator.duration(&text, &key),
        };
        duration.map(Some).ok_or(Reported)
    }

    /// A whole number that fits a `u32` (its declared bounds are its config's to check).
    pub fn count(&mut self, name: &str, preset: Option<u32>) -> Result<Option<u32>, Reported> {
        let Some(value) = self.written(name) else {
            return Ok(self.or_default(name, preset, |text| text.parse().expect("a count")));
        };
        let whole = respan(value.clone(), |raw| match raw {
            RawValue::Whole(whole) => whole,
            _ => unreachable!("a count is read as a whole number"),
        });
        let key = self.key(name);
        let read = match self.declared(name).range {
            Range::Between { min, max, why } => self.validator.whole(&whole, &key, min..=max, why),
            _ => self.validator.whole::<u32>(&whole, &key, 0..=u32::MAX, ""),
        };
        read.map(Some).ok_or(Reported)
    }

    /// A whole number in `range`, a bound the table's other keys give (`why` says what a
    /// value below it would mean), as written.
    pub fn whole_in(
        &mut self,
        name: &str,
        range: std::ops::RangeInclusive<u32>,
        why: &str,
    ) -> Result<Option<u32>, Reported> {
        let Some(value) = self.written(name) else {
            return Ok(None);
        };
        let whole = respan(value.clone(), |raw| match raw {
            RawValue::Whole(whole) => whole,
            _ => unreachable!("a count is read as a whole number"),
        });
        let key = self.key(name);
        let read = self.validator.whole(&whole, &key, range, why);
        read.map(Some).ok_or(Reported)
    }

    /// A whole number from 0 to `max` (a count of requests).
    pub fn count_to(&mut self, name: &str, max: u64) -> Result<Option<u64>, Reported> {
        let Some(value) = self.written(name) else {
            return Ok(self.or_default(name, None, |text| text.parse().expect("a count")));
        };
        let whole = respan(value.clone(), |raw| match raw {
            RawValue::Whole(whole) => whole,
            _ => unreachable!("a count is read as a whole number"),
        });
        let key = self.key(name);
        let read = self.validator.whole(&whole, &key, 0..=max, "");
        read.map(Some).ok_or(Reported)
    }

    /// A size in bytes: written, else the declared default.
    pub fn size(&mut self, name: &str) -> Result<Option<u64>, Reported> {
        let Some(size) = self.written_size(name) else {
            return Ok(self.or_default(name, None, default_size));
        };
        let key = self.key(name);
        let read = self.validator.size_any(&size, &key);
        read.map(Some).ok_or(Reported)
    }

    /// A rate of bytes as written, more than zero (a bandwidth has no declared default).
    pub fn bandwidth(&mut self, name: &str) -> Result<Option<ByteRate>, Reported> {
        let Some(text) = self.text(name) else {
            return Ok(None);
        };
        let key = self.key(name);
        let read = self.validator.bandwidth(&text, &key);
        read.map(Some).ok_or(Reported)
    }

    /// The size of one Redis value (at most 512 MiB, Redis' limit): written, else the
    /// declared default.
    pub fn value_size(&mut self, name: &str) -> Result<Option<u32>, Reported> {
        let Some(size) = self.written_size(name) else {
            let bytes = self.or_default(name, None, default_size);
            return Ok(bytes.map(|bytes| u32::try_from(bytes).expect("a default fits")));
        };
        let key = self.key(name);
        let read = self.validator.size(&size, &key);
        read.map(Some).ok_or(Reported)
    }

    /// The resource the key `name` names (declared [`Value::Ref`]) as written, resolved in
    /// `index`; an unknown name is reported at the key.
    pub fn resolve<Raw, Id>(&mut self, name: &str, index: &NameIndex<'_, Raw, Id>) -> Option<Id> {
        let written = self.name(name)?;
        let key = self.key(name);
        self.validator.resolve(index, &written, &key)
    }

    /// A number as written (its bounds are its config's to check), else the declared default.
    pub fn float(&self, name: &str) -> Option<f64> {
        match self.number(name) {
            Some(number) => Some(*number.get_ref()),
            None => self
                .default_text(name)
                .map(|text| text.parse().expect("a default number")),
        }
    }

    /// A duration or a distribution: written, else the declared default.
    pub fn latency(&mut self, name: &str) -> Result<Option<Distribution>, Reported> {
        let Some(value) = self.written(name) else {
            return Ok(self.or_default(name, None, |text| {
                let nanos = crate::units::parse_duration(text.trim_matches('"'));
                Distribution::Constant(SimDuration::from_nanos(nanos.expect("defaults parse")))
            }));
        };
        let latency = respan(value.clone(), |raw| match raw {
            RawValue::Latency(latency) => latency,
            _ => unreachable!("a latency is read as a latency"),
        });
        let key = self.key(name);
        self.validator
            .latency(&latency, &key)
            .map(Some)
            .ok_or(Reported)
    }

    /// A number in thousandths (to 0.001).
    pub fn thousandths(
        &mut self,
        name: &str,
        preset: Option<u32>,
    ) -> Result<Option<u32>, Reported> {
        let Some(number) = self.number(name) else {
            return Ok(self.or_default(name, preset, |text| {
                let number: f64 = text.parse().expect("a number");
                (number * 1000.0).round() as u32
            }));
        };
        let key = self.key(name);
        let read = self.validator.thousandths(&number, &key);
        read.map(Some).ok_or(Reported)
    }

    /// A percentage to 0.1%, in thousandths of one (per mille of the whole).
    pub fn percent(&mut self, name: &str, preset: Option<u32>) -> Result<Option<u32>, Reported> {
        let Some(number) = self.number(name) else {
            return Ok(self.or_default(name, preset, |text| {
                let percent: f64 = text.parse().expect("a default percentage");
                (percent * 10.0).round() as u32
            }));
        };
        let key = self.key(name);
        let read = self.validator.percent_permille(&number, &key);
        read.map(Some).ok_or(Reported)
    }

    /// One of the declared words, as the `T` that `options` pairs it with.
    pub fn choice<T: Copy>(
        &mut self,
        name: &str,
        options: &[(&str, T)],
        preset: Option<T>,
    ) -> Result<Option<T>, Reported> {
        debug_assert!(
            matches!(self.declared(name).value, Value::Enum(words)
                if words.len() == options.len() && options.iter().all(|(w, _)| words.contains(w))),
            "`{name}`'s options are its declared words"
        );
        let pick = |word: &str| options.iter().find(|(w, _)| *w == word).map(|(_, t)| *t);
        match self.word(name)? {
            Some(word) => Ok(pick(word)),
            None => Ok(preset.or_else(|| {
                self.default_text(name)
                    .and_then(|text| pick(text.trim_matches('"')))
            })),
        }
    }

    /// The word written, if it is one of the declared words (as serde refuses an unknown
    /// variant, with a "did you mean" for a near miss).
    pub fn word(&mut self, name: &str) -> Result<Option<&'r str>, Reported> {
        let Some(value) = self.written(name) else {
            return Ok(None);
        };
        let RawValue::Word(word) = value.get_ref() else {
            unreachable!("a word is read as a string")
        };
        let message = match self.declared(name).value {
            Value::Enum(words) if !words.contains(&word.as_str()) => crate::suggest::serde_message(
                &serde::de::value::Error::unknown_variant(word, words).to_string(),
            ),
            Value::OneOf {
                values,
                noun,
                plural,
            } if !values.contains(&word.as_str()) => {
                format!("unknown {noun} `{word}` ({plural}: {})", values.join(", "))
            }
            _ => return Ok(Some(word.as_str())),
        };
        let key = self.key(name);
        self.validator.error(Some(value.span()), key, message);
        Err(Reported)
    }

    /// A whole number or `"unlimited"` (`None`): written, else the preset's, else `None`
    /// when left out without one.
    pub fn limit(
        &mut self,
        name: &str,
        preset: Option<Option<u32>>,
    ) -> Result<Option<Option<u32>>, Reported> {
        let Some(value) = self.written(name) else {
            return Ok(self.or_default(name, preset, |_| unreachable!("no default limit")));
        };
        match value.get_ref() {
            RawValue::Limit(RetryLimit::Unlimited) => Ok(Some(None)),
            RawValue::Limit(RetryLimit::Count(count)) => match u32::try_from(*count) {
                Ok(count) => Ok(Some(Some(count))),
                Err(_) => {
                    let message = format!(
                        "must be at most {} (or \"unlimited\"), not {count}",
                        u32::MAX
                    );
                    Err(self.refuse(name, message))
                }
            },
            _ => unreachable!("a limit is read as a limit"),
        }
    }

    /// A name as written (a reference, for [`Validator::resolve`]), at its span.
    pub fn name(&self, name: &str) -> Option<Spanned<String>> {
        let value = self.written(name)?;
        let RawValue::Word(word) = value.get_ref() else {
            unreachable!("a name is read as a string")
        };
        Some(Spanned::new(value.span(), word.clone()))
    }

    /// A list as written, for the validator's reader of outcomes.
    pub fn list(&self, name: &str) -> Option<Spanned<Vec<Spanned<String>>>> {
        let value = self.written(name)?;
        let RawValue::List(list) = value.get_ref() else {
            unreachable!("a list is read as a list")
        };
        Some(Spanned::new(value.span(), list.clone()))
    }

    fn text(&self, name: &str) -> Option<Spanned<Text>> {
        let value = self.written(name)?;
        Some(respan(value.clone(), |raw| match raw {
            RawValue::Text(text) => text,
            _ => unreachable!("a duration or a bandwidth is read as text"),
        }))
    }

    fn written_size(&self, name: &str) -> Option<Spanned<Size>> {
        let value = self.written(name)?;
        Some(respan(value.clone(), |raw| match raw {
            RawValue::Size(size) => size,
            _ => unreachable!("a size is read as a size"),
        }))
    }

    fn number(&self, name: &str) -> Option<Spanned<f64>> {
        let value = self.written(name)?;
        Some(respan(value.clone(), |raw| match raw {
            RawValue::Number(number) => number,
            _ => unreachable!("a number is read as a float"),
        }))
    }

    /// A key left out: the preset's value where the key takes one, else its default.
    fn or_default<T>(
        &self,
        name: &str,
        preset: Option<T>,
        parse: impl FnOnce(&str) -> T,
    ) -> Option<T> {
        let declared = self.declared(name);
        debug_assert!(
            preset.is_none() || matches!(declared.default, KeyDefault::Preset(_)),
            "a preset gives `{name}`, which is not declared to take it"
        );
        preset.or_else(|| self.default_text(name).map(parse))
    }

    /// The declared default of a word (`maxmemory_policy`'s), without its quotes.
    pub fn default_word(&self, name: &str) -> Option<&'static str> {
        self.default_text(name).map(|text| text.trim_matches('"'))
    }

    fn default_text(&self, name: &str) -> Option<&'static str> {
        match self.declared(name).default {
            KeyDefault::Is(text) | KeyDefault::Preset(&KeyDefault::Is(text)) => Some(text),
            _ => None,
        }
    }

    fn declared(&self, name: &str) -> &'static KeySpec {
        self.spec.declared(name)
    }
}

/// A declared default size (TOML text: a number of bytes, or a string with a unit) in bytes.
fn default_size(text: &str) -> u64 {
    match crate::keys::default_value(Value::Size, text) {
        RawValue::Size(Size::Bytes(bytes)) => bytes,
        RawValue::Size(Size::Text(text)) => {
            crate::units::parse_size(&text).expect("defaults parse")
        }
        _ => unreachable!("a size's default is read as a size"),
    }
}

/// `value` read as the raw type its declaration says, at the same span.
pub(super) fn respan<T>(value: Spanned<RawValue>, read: impl FnOnce(RawValue) -> T) -> Spanned<T> {
    let span = value.span();
    Spanned::new(span, read(value.into_inner()))
}

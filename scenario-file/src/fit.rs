//! `[fit]`: what `outagelab fit` may change to make a variant's run match `[observed]`.
//!
//! ```toml
//! [fit]
//! variant = "as it ran"     # the variant that is the incident (default: the first)
//! seeds = "1..5"            # each seed is fitted on its own, for the spread (default: the file's seed)
//! runs_max = 120            # runs a seed's search may take (default 120)
//!
//! [fit.unknowns]
//! "faults.pause.duration" = { min = "500ms", max = "10s" }
//! "connections.cache.command_timeout" = { min = "50ms", max = "2s" }
//! ```
//!
//! An unknown is a key the file writes (its value is where the search starts), a duration or
//! a number, with a range around that value. Every problem is said at its key.

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use toml::de::{DeTable, DeValue};

use crate::document::Value;
use crate::raw::{Bound, RawFit};
use crate::{Reader, ScenarioFile, units};

/// `[fit]`, checked against the file.
#[derive(Clone, Debug)]
pub struct FitSpec {
    /// The variant that is the incident.
    pub variant: String,
    pub seeds: RangeInclusive<u64>,
    /// At least 10.
    pub runs_max: u64,
    /// In key order; at least one.
    pub unknowns: Vec<Unknown>,
}

/// One key the fit searches.
#[derive(Clone, Debug, PartialEq)]
pub struct Unknown {
    pub key: String,
    pub kind: UnknownKind,
    /// `min < max`, both finite; durations in nanoseconds. `min <= start <= max` when the
    /// file was read for the command that starts there (`fit`, `tune`: see
    /// [`crate::Starts`]); an explored parameter's start may lie outside.
    pub min: f64,
    pub max: f64,
    /// The value the file writes.
    pub start: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnknownKind {
    /// Written as a string with a unit; searched to the microsecond.
    Duration,
    /// A size written with a unit (`"1MiB"`); searched to the byte.
    Size,
    /// A bandwidth written with a unit (`"100MiB/s"`); searched to the byte per second.
    Bandwidth,
    /// A whole number.
    Whole,
    Number,
}

impl Unknown {
    /// `value` (clamped to the range, rounded as the kind is) as the file writes it: a TOML
    /// value, such as `"2350000us"` or `412`.
    pub fn toml_value(&self, value: f64) -> String {
        let value = self.round(value);
        match self.kind {
            UnknownKind::Duration => format!("\"{}us\"", (value / 1000.0) as u64),
            UnknownKind::Size => format!("\"{}B\"", value as u64),
            UnknownKind::Bandwidth => format!("\"{}B/s\"", value as u64),
            UnknownKind::Whole => format!("{}", value as i64),
            UnknownKind::Number => format!("{value}"),
        }
    }

    /// `value` clamped to the range and rounded to what the file can write.
    pub fn round(&self, value: f64) -> f64 {
        let value = value.clamp(self.min, self.max);
        match self.kind {
            UnknownKind::Duration => (value / 1000.0).round() * 1000.0,
            UnknownKind::Whole | UnknownKind::Size | UnknownKind::Bandwidth => value.round(),
            UnknownKind::Number => (value * 1e6).round() / 1e6,
        }
    }

    /// `value` for a reader: `2.35 s`, `412`.
    pub fn show(&self, value: f64) -> String {
        let value = self.round(value);
        match self.kind {
            UnknownKind::Duration if value >= 1e9 => format!("{} s", trimmed(value / 1e9, 4)),
            UnknownKind::Duration => format!("{} ms", trimmed(value / 1e6, 3)),
            UnknownKind::Size => bytes_shown(value, ""),
            UnknownKind::Bandwidth => bytes_shown(value, "/s"),
            _ => trimmed(value, 4),
        }
    }
}

/// A count of bytes for a reader, in the largest binary unit it reaches: `1.5 MiB`, `512 B`.
fn bytes_shown(value: f64, per: &str) -> String {
    let units = [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)];
    let (unit, scale) = (units.into_iter())
        .find(|&(_, scale)| value >= scale as f64)
        .unwrap_or(("B", 1));
    format!("{} {unit}{per}", trimmed(value / scale as f64, 3))
}

/// `value` with at most `decimals` decimals, without trailing zeros.
fn trimmed(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

/// The fewest runs a seed's search may take: the first sample alone needs a few per unknown.
pub const FIT_RUNS_MIN: u64 = 10;
/// The most unknowns one fit searches.
pub const UNKNOWNS_MAX: usize = 8;

impl<'t> Reader<'_> {
    /// Reads `[fit]` against the built variants and `[observed]`.
    /// `observed_failed`: the file has an `[observed]` whose error was reported (not to be
    /// reported again as missing).
    pub(crate) fn fit(
        &mut self,
        value: Value<'t>,
        file: &ScenarioFile,
        observed_failed: bool,
    ) -> Option<FitSpec> {
        let raw = self.table::<RawFit>(value, "fit")?;
        let before = self.errors.len();
        let variant = match &raw.variant {
            Some(name) => match file.variants.iter().find(|v| &v.name == name.get_ref()) {
                Some(variant) => Some(variant),
                None => {
                    let names = file.variants.iter().map(|v| v.name.as_str());
                    let message = crate::not_a_variant(name.get_ref(), names);
                    self.refuse(name.span(), "fit.variant", message);
                    None
                }
            },
            None => file.variants.first(),
        };
        if file.observed.is_none() && !observed_failed {
            let message = "fits the run to what was observed: the file needs an [observed] \
                           table, with the series to match";
            self.refuse(raw.unknowns.span(), "fit", message);
        }
        let seeds = match &raw.seeds {
            Some(text) => match crate::parse_seed_range(text.get_ref()) {
                Ok(range) => Some(range),
                Err(message) => {
                    self.refuse(text.span(), "fit.seeds", message);
                    None
                }
            },
            None => Some(file.seed..=file.seed),
        };
        let runs_max = match &raw.runs_max {
            Some(runs) if runs.get_ref().0 < FIT_RUNS_MIN as i64 || runs.get_ref().0 > 100_000 => {
                let message = format!(
                    "{} runs is outside {FIT_RUNS_MIN}..=100000: a search needs a few runs per \
                     unknown",
                    runs.get_ref().0
                );
                self.refuse(runs.span(), "fit.runs_max", message);
                None
            }
            Some(runs) => Some(runs.get_ref().0 as u64),
            None => Some(120),
        };
        let entries = raw.unknowns.get_ref();
        if entries.is_empty() || entries.len() > UNKNOWNS_MAX {
            let message = format!(
                "has {} unknowns: name between 1 and {UNKNOWNS_MAX} keys to search",
                entries.len()
            );
            self.refuse(raw.unknowns.span(), "fit.unknowns", message);
        }
        let mut unknowns = Vec::new();
        for (key, entry) in entries {
            let at = format!("fit.unknowns.\"{key}\"");
            let written = variant.and_then(|v| v.settings.get(key));
            let Some(written) = written else {
                let message = format!(
                    "`{key}` is not a key the file writes{}: write its value in the file, \
                     where the search starts",
                    variant.map_or(String::new(), |v| format!(" for variant \"{}\"", v.name))
                );
                self.refuse(entry.span(), at, message);
                continue;
            };
            if let Some(message) = crate::swept_by_the_file(file, key, "fitting it") {
                self.refuse(entry.span(), at, message);
                continue;
            }
            let (min, max) = (&entry.get_ref().min, &entry.get_ref().max);
            match unknown_in(key, written, min.get_ref(), max.get_ref(), self.starts.fit) {
                Ok(unknown) => unknowns.push(unknown),
                Err((which, message)) => {
                    let span = match which {
                        End::Min => entry.get_ref().min.span(),
                        End::Max => entry.get_ref().max.span(),
                        End::Both => entry.span(),
                    };
                    self.refuse(span, at, message);
                }
            }
        }
        if self.errors.len() > before {
            return None;
        }
        Some(FitSpec {
            variant: variant?.name.clone(),
            seeds: seeds?,
            runs_max: runs_max?,
            unknowns,
        })
    }

    pub(crate) fn refuse(
        &mut self,
        span: std::ops::Range<usize>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.errors
            .push(self.source.diagnostic(Some(span), key, message));
    }
}

/// Which end of a range a problem is at.
#[derive(Debug)]
pub(crate) enum End {
    Min,
    Max,
    Both,
}

/// The key `key`, whose value the file writes as `written` (TOML text), over `min..=max`;
/// with `start_inside`, the written value must be in the range (a search starts there).
pub(crate) fn unknown_in(
    key: &str,
    written: &str,
    min: &Bound,
    max: &Bound,
    start_inside: bool,
) -> Result<Unknown, (End, String)> {
    let only = || {
        format!(
            "`{key}` is {written}: only durations, sizes, bandwidths and numbers can be searched"
        )
    };
    let kind_and_start = if let Some(text) =
        written.strip_prefix('"').and_then(|t| t.strip_suffix('"'))
    {
        // A duration, else a bandwidth (a size per second), else a size.
        (units::parse_duration(text).map(|ns| (UnknownKind::Duration, ns as f64)))
            .or_else(|_| units::parse_bandwidth(text).map(|b| (UnknownKind::Bandwidth, b as f64)))
            .or_else(|_| units::parse_size(text).map(|b| (UnknownKind::Size, b as f64)))
            .map_err(|_| only())
    } else if let Ok(whole) = written.parse::<i64>() {
        Ok((UnknownKind::Whole, whole as f64))
    } else if let Ok(number) = written.parse::<f64>() {
        Ok((UnknownKind::Number, number))
    } else {
        Err(only())
    };
    let (kind, start) = kind_and_start.map_err(|m| (End::Both, m))?;
    let end = |bound: &Bound, which: End| -> Result<f64, (End, String)> {
        let value = match (kind, bound) {
            (UnknownKind::Duration, Bound::Text(text)) => units::parse_duration(text)
                .map(|ns| ns as f64)
                .map_err(|m| (which, m))?,
            (UnknownKind::Size, Bound::Text(text)) => units::parse_size(text)
                .map(|b| b as f64)
                .map_err(|m| (which, m))?,
            (UnknownKind::Bandwidth, Bound::Text(text)) => units::parse_bandwidth(text)
                .map(|b| b as f64)
                .map_err(|m| (which, m))?,
            (
                UnknownKind::Duration | UnknownKind::Size | UnknownKind::Bandwidth,
                Bound::Number(n),
            ) => {
                let (what, example) = match kind {
                    UnknownKind::Duration => ("a duration", format!("{n}ms")),
                    UnknownKind::Size => ("a size", format!("{n}KiB")),
                    _ => ("a bandwidth", format!("{n}MiB/s")),
                };
                return Err((
                    which,
                    format!(
                        "`{key}` is {what}: write the range's end with a unit, e.g. \"{example}\""
                    ),
                ));
            }
            (_, Bound::Number(n)) if n.is_finite() => *n,
            (_, Bound::Number(n)) => return Err((which, format!("{n} is not a finite number"))),
            (_, Bound::Text(text)) => {
                return Err((which, format!("`{key}` is a number, not \"{text}\"")));
            }
        };
        Ok(value)
    };
    let (low, high) = (end(min, End::Min)?, end(max, End::Max)?);
    if low >= high {
        return Err((
            End::Both,
            "the range is empty: `min` must be below `max`".to_owned(),
        ));
    }
    if start_inside && !(low..=high).contains(&start) {
        return Err((
            End::Both,
            format!("the file's value, {written}, is outside the range: the search starts from it"),
        ));
    }
    Ok(Unknown {
        key: key.to_owned(),
        kind,
        min: low,
        max: high,
        start,
    })
}

/// `text` with the value at each dotted key of `values` replaced by its TOML text: the
/// scenario as fitted, comments and layout kept. A key must be one the text writes, through
/// tables (not array elements).
pub fn set_values(text: &str, values: &[(String, String)]) -> Result<String, String> {
    let parsed = DeTable::parse(text).map_err(|e| format!("not valid TOML: {}", e.message()))?;
    let root = parsed.get_ref();
    let mut edits: BTreeMap<usize, (usize, &str)> = BTreeMap::new();
    for (key, value) in values {
        let span = value_span(root, key)
            .ok_or_else(|| format!("`{key}` is not a key the file writes through tables"))?;
        edits.insert(span.start, (span.end, value.as_str()));
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, (end, value)) in edits {
        out.push_str(&text[at..start]);
        out.push_str(value);
        at = end;
    }
    out.push_str(&text[at..]);
    Ok(out)
}

/// The span of the value at dotted `key` (each part a table key, a part may itself hold dots
/// when the file quotes it; or an element's index in a list of tables, `steps.0`, as
/// [`crate::document::set_path`] and a variant's patch address it).
fn value_span(root: &DeTable<'_>, key: &str) -> Option<std::ops::Range<usize>> {
    let parts: Vec<&str> = key.split('.').collect();
    let mut table = root;
    let mut index = 0;
    // Bound: each turn takes at least one part.
    while index < parts.len() {
        // The longest run of parts that is one key of this table.
        let (mut taken, mut value) = (index + 1..=parts.len()).rev().find_map(|end| {
            table
                .get(parts[index..end].join(".").as_str())
                .map(|v| (end, v))
        })?;
        if let DeValue::Array(items) = value.get_ref()
            && taken < parts.len()
        {
            value = items.get(parts[taken].parse::<usize>().ok()?)?;
            taken += 1;
        }
        if taken == parts.len() {
            return Some(value.span());
        }
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => return None,
        }
        index = taken;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_replaced_where_the_file_writes_them() {
        let text = "# a comment\n[faults.pause]\nkind = \"pause\"\nduration = \"1s\" # guess\n\n\
                    [loads.a]\nrate = 100\nretry = { delay = \"5ms\" }\n";
        let fitted = set_values(
            text,
            &[
                ("faults.pause.duration".into(), "\"2350000us\"".into()),
                ("loads.a.rate".into(), "412".into()),
                ("loads.a.retry.delay".into(), "\"7000us\"".into()),
            ],
        )
        .unwrap();
        assert_eq!(
            fitted,
            "# a comment\n[faults.pause]\nkind = \"pause\"\nduration = \"2350000us\" # guess\n\n\
             [loads.a]\nrate = 412\nretry = { delay = \"7000us\" }\n"
        );
        let missing = set_values(text, &[("loads.a.duration".into(), "1".into())]);
        assert!(missing.unwrap_err().contains("not a key the file writes"));
        // Inside a list of tables, by the element's index (issue 29).
        let steps = "[flows.f]\nsteps = [{ work = \"1ms\" }, { redis = { value = \"1KiB\" } }]\n";
        let set = set_values(
            steps,
            &[("flows.f.steps.1.redis.value".into(), "\"2048B\"".into())],
        );
        assert_eq!(
            set.unwrap(),
            "[flows.f]\nsteps = [{ work = \"1ms\" }, { redis = { value = \"2048B\" } }]\n"
        );
        for key in [
            "flows.f.steps.2.work",
            "flows.f.steps.x.work",
            "flows.f.steps.0.work.x",
        ] {
            let missing = set_values(steps, &[(key.into(), "1".into())]);
            assert!(
                missing.unwrap_err().contains("not a key the file writes"),
                "{key}"
            );
        }
    }

    /// Sizes and bandwidths are searched to the byte and written back with a unit the file
    /// reads (issue 29).
    #[test]
    fn sizes_and_bandwidths_are_searched_in_bytes() {
        let size = unknown_in(
            "v",
            "\"1KiB\"",
            &Bound::Text("1KiB".into()),
            &Bound::Text("16MiB".into()),
            false,
        )
        .unwrap();
        assert_eq!(
            (size.kind, size.start, size.max),
            (UnknownKind::Size, 1024.0, 16_777_216.0)
        );
        assert_eq!(size.toml_value(5_000_000.4), "\"5000000B\"");
        assert_eq!(size.show(5_000_000.0), "4.768 MiB");
        assert_eq!(size.show(1024.0), "1 KiB");
        let rate = unknown_in(
            "b",
            "\"100MiB/s\"",
            &Bound::Text("50MiB/s".into()),
            &Bound::Text("1Gbit/s".into()),
            false,
        )
        .unwrap();
        assert_eq!(
            (rate.kind, rate.max),
            (UnknownKind::Bandwidth, 125_000_000.0)
        );
        assert_eq!(rate.toml_value(1e8), "\"100000000B/s\"");
        assert_eq!(
            crate::units::parse_bandwidth("100000000B/s"),
            Ok(100_000_000)
        );
        let unitless = unknown_in(
            "v",
            "\"1KiB\"",
            &Bound::Number(1.0),
            &Bound::Number(9.0),
            false,
        );
        assert!(
            unitless
                .unwrap_err()
                .1
                .contains("is a size: write the range's end with a unit")
        );
        let neither = unknown_in(
            "k",
            "\"pause\"",
            &Bound::Number(1.0),
            &Bound::Number(9.0),
            false,
        );
        assert!(
            neither
                .unwrap_err()
                .1
                .contains("only durations, sizes, bandwidths and numbers")
        );
    }

    #[test]
    fn values_round_to_what_the_file_can_write() {
        let pause = Unknown {
            key: "d".into(),
            kind: UnknownKind::Duration,
            min: 5e8,
            max: 1e10,
            start: 1e9,
        };
        assert_eq!(pause.toml_value(2_350_000_400.0), "\"2350000us\"");
        assert_eq!(pause.toml_value(1.0), "\"500000us\"");
        assert_eq!(pause.show(2_350_000_400.0), "2.35 s");
        assert_eq!(pause.show(7.5e8), "750 ms");
        let rate = Unknown {
            kind: UnknownKind::Whole,
            min: 1.0,
            max: 1000.0,
            start: 100.0,
            ..pause
        };
        assert_eq!(rate.toml_value(411.6), "412");
        assert_eq!(rate.show(2000.0), "1000");
    }
}

//! What was measured during an incident, read from the files monitoring systems export, so a
//! run can be drawn and scored beside it.
//!
//! Two formats:
//! - Prometheus's `query_range` answer (`/api/v1/query_range`, what Grafana's "Inspect > Data"
//!   and `promtool query range -o json` give): `{"status":"success","data":{"resultType":
//!   "matrix","result":[{"metric":{...},"values":[[1733220000,"1.5"],...]}]}}`; a series is
//!   named by its `__name__` label (empty for an expression's result) and its other labels;
//! - a CSV of `timestamp,series,value` rows, one sample a row, series interleaved as they
//!   like; the first row may be a header; `#` starts a comment line; a series name with a
//!   comma is quoted. Timestamps are Unix seconds (to the millisecond) or RFC 3339
//!   (`2024-12-03T10:00:00Z`).
//!
//! Every series is checked as it is read, and the first problem is reported as
//! `line:column: message`: samples out of time order or repeated, a gap (a sample missing
//! from the series' regular step, which the first two samples set), a value that is not a
//! finite number (`NaN`, `+Inf`), a file of the wrong shape (an instant `vector` instead of a
//! `matrix`, a failed query's `"status":"error"`).
//!
//! Architecture invariant: this crate reads files into plain values and knows nothing of
//! scenarios, runs or reports; times are integer milliseconds since the Unix epoch.

mod csv_file;
mod prometheus;
mod timestamp;

use std::collections::BTreeMap;
use std::fmt;

pub use timestamp::{format_utc, parse_timestamp};

/// The most samples one series may have (a week at a 1 s step is 604,800), and the most
/// series a file may have: a file is read whole, so these bound its memory.
pub const SAMPLES_MAX: usize = 1_000_000;
pub const SERIES_MAX: usize = 1_000;

/// One measured series: its name and labels, and samples at a regular step.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedSeries {
    /// Prometheus's `__name__` (empty for an expression's result), or the CSV's series.
    pub name: String,
    /// Prometheus's labels but `__name__`; empty for a CSV series.
    pub labels: BTreeMap<String, String>,
    /// At least two, in strictly increasing time, each `step_ms` after the one before.
    pub samples: Vec<Sample>,
    /// Positive.
    pub step_ms: i64,
}

/// A measured value at an instant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Milliseconds since the Unix epoch.
    pub unix_ms: i64,
    /// Finite.
    pub value: f64,
}

impl ObservedSeries {
    /// The series as Prometheus writes one: `name{label="value",...}`, labels in name order.
    pub fn display_name(&self) -> String {
        if self.labels.is_empty() {
            return self.name.clone();
        }
        let labels: Vec<String> = self
            .labels
            .iter()
            .map(|(label, value)| format!("{label}={value:?}"))
            .collect();
        format!("{}{{{}}}", self.name, labels.join(","))
    }

    /// Whether the series is called `name` (any name when `None`) and carries every label of
    /// `labels` with its value.
    pub fn matches(&self, name: Option<&str>, labels: &BTreeMap<String, String>) -> bool {
        name.is_none_or(|name| name == self.name)
            && labels
                .iter()
                .all(|(label, value)| self.labels.get(label) == Some(value))
    }
}

/// The series of one file, in the file's order.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedFile {
    pub series: Vec<ObservedSeries>,
}

/// Which format a file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    PrometheusJson,
    Csv,
}

impl Format {
    /// By the file name's extension: `.json` is Prometheus's, anything else is read as CSV.
    pub fn of_path(path: &std::path::Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(extension) if extension.eq_ignore_ascii_case("json") => Format::PrometheusJson,
            _ => Format::Csv,
        }
    }
}

/// A problem in a file, where it is: 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ObservedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

impl std::error::Error for ObservedError {}

impl ObservedFile {
    /// Reads `text` in `format`.
    pub fn parse(text: &str, format: Format) -> Result<ObservedFile, ObservedError> {
        let series = match format {
            Format::PrometheusJson => prometheus::parse(text)?,
            Format::Csv => csv_file::parse(text)?,
        };
        Ok(ObservedFile { series })
    }

    /// The one series called `name` (any name when `None`) with every label of `labels`; the
    /// error lists the file's series when none or several match.
    pub fn find(
        &self,
        name: Option<&str>,
        labels: &BTreeMap<String, String>,
    ) -> Result<&ObservedSeries, String> {
        let found: Vec<&ObservedSeries> = self
            .series
            .iter()
            .filter(|series| series.matches(name, labels))
            .collect();
        let listed = |series: &[&ObservedSeries]| {
            let names: Vec<String> = series
                .iter()
                .take(10)
                .map(|s| format!("`{}`", s.display_name()))
                .collect();
            let more = series.len().saturating_sub(10);
            let more = if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            };
            format!("{}{more}", names.join(", "))
        };
        match found.as_slice() {
            [one] => Ok(one),
            [] => {
                let all: Vec<&ObservedSeries> = self.series.iter().collect();
                Err(format!(
                    "no series of the file matches; it has {}",
                    listed(&all)
                ))
            }
            several => Err(format!(
                "{} series match ({}): name labels that pick one",
                several.len(),
                listed(several)
            )),
        }
    }
}

/// A series being read: its samples so far, checked one at a time.
#[derive(Default)]
struct SeriesBuilder {
    samples: Vec<Sample>,
}

impl SeriesBuilder {
    /// Adds the sample after the ones before it; the error says why it cannot follow them.
    fn push(&mut self, sample: Sample) -> Result<(), String> {
        if !sample.value.is_finite() {
            return Err(format!(
                "the value {} is not a finite number: a series of measurements has a number \
                 at every step (drop the sample, or export a query that gives one)",
                sample.value
            ));
        }
        if let Some(last) = self.samples.last() {
            if sample.unix_ms <= last.unix_ms {
                return Err(format!(
                    "the sample at {} is not after the one before it ({}): samples must be in \
                     time order, without repeats",
                    format_utc(sample.unix_ms),
                    format_utc(last.unix_ms)
                ));
            }
            let gap = sample.unix_ms - last.unix_ms;
            if let [first, second, ..] = self.samples.as_slice() {
                let step = second.unix_ms - first.unix_ms;
                if gap != step {
                    return Err(format!(
                        "a gap: the sample at {} is {} s after the one before, and the series' \
                         step (its first two samples) is {} s; export every step (Prometheus \
                         leaves out the steps without data: fill them, e.g. `or vector(0)`)",
                        format_utc(sample.unix_ms),
                        seconds(gap),
                        seconds(step)
                    ));
                }
            }
        }
        if self.samples.len() == SAMPLES_MAX {
            return Err(format!(
                "more than the {SAMPLES_MAX} samples a series may have"
            ));
        }
        self.samples.push(sample);
        Ok(())
    }

    /// The finished series; the error says why it is not one (fewer than two samples).
    fn finish(
        self,
        name: String,
        labels: BTreeMap<String, String>,
    ) -> Result<ObservedSeries, String> {
        let [first, second, ..] = self.samples.as_slice() else {
            return Err(format!(
                "the series `{name}` has {} sample(s): a series needs two at least, which set \
                 its step",
                self.samples.len()
            ));
        };
        let step_ms = second.unix_ms - first.unix_ms;
        Ok(ObservedSeries {
            name,
            labels,
            samples: self.samples,
            step_ms,
        })
    }
}

/// Milliseconds as seconds, without trailing zeros: `15`, `0.25`.
fn seconds(ms: i64) -> String {
    let text = format!("{}.{:03}", ms / 1000, (ms % 1000).abs());
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

//! `[observed]`: what was measured during the incident, read from the file it names and mapped
//! onto the run's metrics.
//!
//! ```toml
//! [observed]
//! file = "incident.json"            # Prometheus query_range JSON; any other name is a CSV
//! start = "2024-12-03T10:00:00Z"    # what the run's time 0 stands for (default: a step before the first sample)
//!
//! [observed.series.errors]          # a name for charts and the report
//! name = "http_requests:rate15s"    # the file's series (`__name__`, or the CSV's series)
//! labels = { code = "503" }         # and labels it carries (Prometheus)
//! metric = "failed_per_s"           # the run's metric it is compared with
//! ```
//!
//! Every problem is said at its key: a file that cannot be read or is not well formed (with
//! the file's own line and column), a metric the run does not have, a series the file does
//! not have or several that match.

use outagelab_observed::{Format, ObservedFile, parse_timestamp};
use outagelab_report::observed::{MappedSeries, ObservedMetric, ObservedSpec};
use outagelab_report::{CountKey, GaugeKey};

use crate::document::Value;
use crate::raw::RawObserved;
use crate::{Reader, ScenarioFile};

impl<'t> Reader<'_> {
    /// Reads `[observed]` and the file it names, against the built variants.
    pub(crate) fn observed(
        &mut self,
        value: Value<'t>,
        file: &ScenarioFile,
    ) -> Option<ObservedSpec> {
        let raw = self.table::<RawObserved>(value, "observed")?;
        let path = crate::beside(self.source.file, raw.file.get_ref());
        let read = std::fs::read_to_string(&path)
            .map_err(|error| format!("cannot read {}: {error}", path.display()))
            .and_then(|text| {
                ObservedFile::parse(&text, Format::of_path(&path))
                    .map_err(|error| format!("{}:{error}", path.display()))
            });
        let observed = match read {
            Ok(observed) => observed,
            Err(message) => {
                let at = Some(raw.file.span());
                self.errors
                    .push(self.source.diagnostic(at, "observed.file", message));
                return None;
            }
        };
        if raw.series.get_ref().is_empty() {
            let message = "names no series: add `[observed.series.<name>]` with the file's \
                           series and the run's `metric` to compare it with";
            let at = Some(raw.series.span());
            self.errors
                .push(self.source.diagnostic(at, "observed.series", message));
            return None;
        }
        let mut series = Vec::new();
        for (name, entry) in raw.series.get_ref() {
            let key = format!("observed.series.{name}");
            let entry_raw = entry.get_ref();
            let metric = ObservedMetric::parse(entry_raw.metric.get_ref())
                .and_then(|metric| runs_have(&metric, file).map(|()| metric));
            let metric = match metric {
                Ok(metric) => metric,
                Err(message) => {
                    let at = Some(entry_raw.metric.span());
                    let key = format!("{key}.metric");
                    self.errors.push(self.source.diagnostic(at, key, message));
                    continue;
                }
            };
            let wanted = entry_raw.name.as_ref().map(|n| n.get_ref().as_str());
            match observed.find(wanted, &entry_raw.labels) {
                Ok(found) => series.push(MappedSeries {
                    name: name.clone(),
                    metric,
                    series: found.clone(),
                }),
                Err(why) => {
                    let at = entry_raw.name.as_ref().map_or(entry.span(), |n| n.span());
                    let message = format!("{}: {why}", path.display());
                    self.errors
                        .push(self.source.diagnostic(Some(at), key, message));
                }
            }
        }
        let start_unix_ms = match &raw.start {
            Some(start) => match parse_timestamp(&start.get_ref().0) {
                Ok(ms) => ms,
                Err(message) => {
                    let at = Some(start.span());
                    self.errors
                        .push(self.source.diagnostic(at, "observed.start", message));
                    return None;
                }
            },
            // The first sample stands for the step before it: the run starts there.
            None => series
                .iter()
                .filter_map(|s| {
                    (s.series.samples.first()).map(|first| first.unix_ms - s.series.step_ms)
                })
                .min()?,
        };
        (series.len() == raw.series.get_ref().len()).then(|| ObservedSpec {
            file: raw.file.get_ref().clone(),
            start_unix_ms,
            series,
        })
    }
}

/// Whether some variant's run writes the series `metric` reads (requests and their latency
/// every run has; a gauge or a counter only a run with its resource).
fn runs_have(metric: &ObservedMetric, file: &ScenarioFile) -> Result<(), String> {
    let lookup = |gauge: Option<&GaugeKey>, count: Option<&CountKey>| {
        file.variants.iter().any(|variant| {
            outagelab_sim::empty_metrics(&variant.scenario).is_ok_and(|metrics| {
                gauge.is_some_and(|key| metrics.gauge(key).is_some())
                    || count.is_some_and(|key| metrics.counter(key).is_some())
            })
        })
    };
    let found = match metric {
        ObservedMetric::Ended(_) | ObservedMetric::Latency(_) => true,
        ObservedMetric::Gauge(key) => lookup(Some(key), None),
        ObservedMetric::Count(key) => lookup(None, Some(key)),
    };
    if found {
        Ok(())
    } else {
        Err(format!(
            "no variant's run has `{metric}`: the scenario has no such resource"
        ))
    }
}

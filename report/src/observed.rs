//! What was measured during an incident beside what the run simulated: each observed series
//! (read by `outagelab-observed`) mapped to a metric of the run's series, placed on the run's
//! clock, and scored against every variant.
//!
//! A sample stands for the step that ends at its timestamp, as Prometheus's `rate(x[step])`
//! at that step does: the sample at `t` is compared with the simulated metric over the
//! run's buckets whose middle lies in `(t - step, t]` (the one bucket holding the window's
//! middle when the step is narrower than a bucket). Over those buckets a rate is their count
//! over their width, a gauge is their largest value (the series hold each bucket's maximum),
//! and a latency percentile is their largest (exact when the step is one bucket; an upper
//! bound over several). A sample whose window the run did not cover (before 0, past the run's
//! end, or in a bucket a horizon cut short) is not compared.

use std::fmt;

use outagelab_observed::ObservedSeries;
pub use outagelab_observed::format_utc;
use serde::Serialize;

use crate::{CountKey, GaugeKey, Outcome, Series, VariantReport, Verdict};

/// A run's metric that an observed series can be compared with.
#[derive(Clone, Debug, PartialEq)]
pub enum ObservedMetric {
    /// Requests that ended per second: all of them, or those of one outcome, or every
    /// outcome but `ok` (`failed_per_s`).
    Ended(Ended),
    /// An event counter per second (`rejected_attempts_per_s`, `callers.web.failed_per_s`).
    Count(CountKey),
    /// The median, 95th or 99th percentile latency of the requests that ended, in ms.
    Latency(u8),
    /// A gauge's largest value (`in_flight`, `databases.pg.concurrency`).
    Gauge(GaugeKey),
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ended {
    All,
    Failed,
    Outcome(Outcome),
}

impl ObservedMetric {
    /// Reads a metric's name; the error lists the forms.
    pub fn parse(name: &str) -> Result<ObservedMetric, String> {
        let metric = match name {
            "requests_per_s" => Some(ObservedMetric::Ended(Ended::All)),
            "failed_per_s" => Some(ObservedMetric::Ended(Ended::Failed)),
            "p50_ms" => Some(ObservedMetric::Latency(50)),
            "p95_ms" => Some(ObservedMetric::Latency(95)),
            "p99_ms" => Some(ObservedMetric::Latency(99)),
            _ => match name.strip_suffix("_per_s") {
                Some(stem) => Outcome::from_name(stem)
                    .map(|outcome| ObservedMetric::Ended(Ended::Outcome(outcome)))
                    .or_else(|| CountKey::parse(stem).map(ObservedMetric::Count)),
                None => GaugeKey::parse(name).map(ObservedMetric::Gauge),
            },
        };
        metric.ok_or_else(|| {
            format!(
                "`{name}` is not a metric of a run's series: write `requests_per_s`, \
                 `failed_per_s`, an outcome per second (`ok_per_s`, `timeout_per_s`, ...), \
                 `p50_ms`, `p95_ms` or `p99_ms`, a counter per second \
                 (`rejected_attempts_per_s`, `callers.<name>.failed_per_s`, ...), or a gauge \
                 (`in_flight`, `databases.<name>.concurrency`, ...)"
            )
        })
    }

    /// The unit of its values, for an axis.
    pub fn unit(&self) -> &'static str {
        match self {
            ObservedMetric::Ended(_) | ObservedMetric::Count(_) => "/s",
            ObservedMetric::Latency(_) => "ms",
            ObservedMetric::Gauge(_) => "",
        }
    }

    /// The metric over buckets `first..=last` of `series` (all covered by the run); `None`
    /// when the series does not have it or, for a percentile, no request ended there.
    pub(crate) fn over(&self, series: &Series, first: usize, last: usize) -> Option<f64> {
        let buckets = first..=last;
        let seconds = (last - first + 1) as f64 * series.bucket_ms / 1000.0;
        let rate =
            |counts: &mut dyn Iterator<Item = u64>| counts.map(|c| c as f64).sum::<f64>() / seconds;
        match self {
            ObservedMetric::Ended(which) => {
                let mut counts = buckets.map(|i| {
                    let of = |outcome: &Outcome| {
                        series
                            .outcomes
                            .get(outcome.name())
                            .and_then(|v| v.get(i))
                            .copied()
                            .unwrap_or(0)
                    };
                    match which {
                        Ended::All => Outcome::ALL.iter().map(of).sum(),
                        Ended::Failed => Outcome::ALL.iter().filter(|o| o.is_error()).map(of).sum(),
                        Ended::Outcome(outcome) => of(outcome),
                    }
                });
                Some(rate(&mut counts))
            }
            ObservedMetric::Count(key) => {
                let values = series.count(key)?;
                Some(rate(
                    &mut buckets.map(|i| values.get(i).copied().unwrap_or(0)),
                ))
            }
            ObservedMetric::Latency(percent) => {
                let values = match percent {
                    50 => &series.p50_ms,
                    95 => &series.p95_ms,
                    _ => &series.p99_ms,
                };
                buckets
                    .filter_map(|i| values.get(i).copied().flatten())
                    .reduce(f64::max)
            }
            ObservedMetric::Gauge(key) => {
                let values = series.gauge(key)?;
                buckets
                    .filter_map(|i| values.get(i))
                    .max()
                    .map(|&v| v as f64)
            }
        }
    }
}

impl fmt::Display for ObservedMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObservedMetric::Ended(Ended::All) => f.write_str("requests_per_s"),
            ObservedMetric::Ended(Ended::Failed) => f.write_str("failed_per_s"),
            ObservedMetric::Ended(Ended::Outcome(o)) => write!(f, "{}_per_s", o.name()),
            ObservedMetric::Count(key) => write!(f, "{key}_per_s"),
            ObservedMetric::Latency(percent) => write!(f, "p{percent}_ms"),
            ObservedMetric::Gauge(key) => write!(f, "{key}"),
        }
    }
}

/// What a file says was observed and how to read it: checked, ready to compare.
#[derive(Clone, Debug)]
pub struct ObservedSpec {
    /// The file, as the scenario names it.
    pub file: String,
    /// The instant the run's time 0 stands for, in ms since the Unix epoch.
    pub start_unix_ms: i64,
    pub series: Vec<MappedSeries>,
}

/// One observed series and the run's metric it is compared with.
#[derive(Clone, Debug)]
pub struct MappedSeries {
    /// The scenario's name for it (`[observed.series.<name>]`).
    pub name: String,
    pub metric: ObservedMetric,
    pub series: ObservedSeries,
}

/// The observed series beside the run, in the report.
#[derive(Clone, Debug, Serialize)]
pub struct Observed {
    pub file: String,
    /// The instant the run's time 0 stands for: ms since the Unix epoch, and in RFC 3339 UTC.
    pub start_unix_ms: i64,
    pub start_utc: String,
    pub series: Vec<ObservedComparison>,
}

/// One observed series on the run's clock, and each variant's simulated values beside it.
#[derive(Clone, Debug, Serialize)]
pub struct ObservedComparison {
    pub name: String,
    /// The file's series, as Prometheus names one: `name{label="value"}`.
    pub source: String,
    pub metric: String,
    pub unit: &'static str,
    pub step_ms: f64,
    /// Each sample's timestamp on the run's clock (ms; the end of the step it stands for).
    pub at_ms: Vec<f64>,
    pub observed: Vec<f64>,
    /// One per variant, in the report's order.
    pub variants: Vec<SeriesFit>,
}

/// How far one variant's simulated values are from an observed series.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesFit {
    pub variant: String,
    /// The simulated metric over each sample's step; `None` where the run did not cover it.
    pub simulated: Vec<Option<f64>>,
    /// Samples compared (those with a simulated value).
    pub compared: u64,
    /// Root mean square of simulated minus observed over the compared samples.
    pub rmse: Option<f64>,
    /// The compared sample where they differ most: simulated minus observed, and when (no
    /// time when every sample matched).
    pub largest_difference: Option<f64>,
    pub largest_difference_at_ms: Option<f64>,
}

/// Places every observed series of `spec` on the run's clock and scores each variant.
pub fn compare(spec: &ObservedSpec, variants: &[VariantReport]) -> Observed {
    let series = spec
        .series
        .iter()
        .map(|mapped| {
            let at_ms: Vec<f64> = mapped
                .series
                .samples
                .iter()
                .map(|sample| (sample.unix_ms - spec.start_unix_ms) as f64)
                .collect();
            let observed: Vec<f64> = mapped.series.samples.iter().map(|s| s.value).collect();
            let step_ms = mapped.series.step_ms as f64;
            let fits = variants
                .iter()
                .map(|variant| {
                    let simulated: Vec<Option<f64>> = at_ms
                        .iter()
                        .map(|&end| simulated_over(&mapped.metric, variant, end - step_ms, end))
                        .collect();
                    fit(&variant.name, simulated, &observed, &at_ms)
                })
                .collect();
            ObservedComparison {
                name: mapped.name.clone(),
                source: mapped.series.display_name(),
                metric: mapped.metric.to_string(),
                unit: mapped.metric.unit(),
                step_ms,
                at_ms,
                observed,
                variants: fits,
            }
        })
        .collect();
    Observed {
        file: spec.file.clone(),
        start_unix_ms: spec.start_unix_ms,
        start_utc: format_utc(spec.start_unix_ms),
        series,
    }
}

/// The metric over the window `(from_ms, to_ms]` of the run, or `None` when the run did not
/// cover all of it.
fn simulated_over(
    metric: &ObservedMetric,
    variant: &VariantReport,
    from_ms: f64,
    to_ms: f64,
) -> Option<f64> {
    let series = &variant.series;
    let width = series.bucket_ms;
    if !(width.is_finite() && width > 0.0) || from_ms < 0.0 {
        return None;
    }
    // The buckets whose middle is in (from, to]: the bucket starts ascend.
    let middles_up_to =
        |at: f64| (series.start_ms).partition_point(|&start| start + width / 2.0 <= at);
    let (begin, end) = (middles_up_to(from_ms), middles_up_to(to_ms));
    let (first, last) = if end > begin {
        (begin, end - 1)
    } else {
        // A step narrower than a bucket: the bucket that holds the step's middle.
        let middle = (from_ms + to_ms) / 2.0;
        let holding = (series.start_ms).partition_point(|&start| start <= middle);
        let holding = holding.checked_sub(1)?;
        if middle >= series.start_ms[holding] + width {
            return None;
        }
        (holding, holding)
    };
    // A bucket the run did not see to its end holds part of its counts: a run cut off at a
    // horizon inside it did not see the rest. A run that ended by itself saw it empty.
    let ended_by_itself = matches!(variant.verdict, Verdict::Completed | Verdict::Stalled);
    let covered = series.start_ms[last] + width <= variant.end_ms || ended_by_itself;
    if !covered || to_ms > variant.end_ms.max(series.start_ms[last] + width) {
        return None;
    }
    metric.over(series, first, last)
}

/// The metrics [`to_prometheus`] writes, each a series per variant.
pub const EXPORTED: [&str; 4] = ["requests_per_s", "ok_per_s", "failed_per_s", "in_flight"];

/// The report's series as Prometheus's `query_range` answer (a `matrix`), one series per
/// variant and metric of [`EXPORTED`], named `outagelab_<metric>` with a `variant` label, a
/// sample at the end of each bucket the run covered, timed from the variant's `starts` entry
/// (ms since the Unix epoch; the last one for variants past the end of `starts`): what a run
/// looks like to `[observed]` (a live run's, as ground truth for `outagelab fit`). Every
/// bucket has a value, so the series have no gaps.
///
/// Prometheus stamps samples to the millisecond: a report whose buckets are not whole
/// milliseconds (a `[metrics] bucket` of 1500us) cannot be written, and the error says so.
pub fn to_prometheus(report: &crate::RunReport, starts: &[i64]) -> Result<String, String> {
    let mut result = Vec::new();
    for (index, variant) in report.variants.iter().enumerate() {
        let start_unix_ms = starts.get(index).or(starts.last()).copied().unwrap_or(0);
        let series = &variant.series;
        let width = series.bucket_ms;
        if !(width >= 1.0 && width.fract() == 0.0) {
            return Err(format!(
                "buckets of {width} ms: Prometheus stamps samples to the millisecond, so the \
                 series need buckets of whole milliseconds (`[metrics] bucket`)"
            ));
        }
        let ended_by_itself = matches!(variant.verdict, Verdict::Completed | Verdict::Stalled);
        let covered: Vec<usize> = (0..series.start_ms.len())
            .filter(|&i| series.start_ms[i] + width <= variant.end_ms || ended_by_itself)
            .filter(|&i| series.start_ms[i] < variant.end_ms)
            .collect();
        for name in EXPORTED {
            let metric = ObservedMetric::parse(name).expect("exported metrics parse");
            let values: Vec<serde_json::Value> = covered
                .iter()
                .filter_map(|&i| {
                    let value = metric.over(series, i, i)?;
                    let at_ms = start_unix_ms as f64 + series.start_ms[i] + width;
                    Some(serde_json::json!([at_ms / 1000.0, value.to_string()]))
                })
                .collect();
            result.push(serde_json::json!({
                "metric": { "__name__": format!("outagelab_{name}"), "variant": variant.name },
                "values": values,
            }));
        }
    }
    // Compact, as Prometheus answers, with one series a line.
    let lines: Vec<String> = (result.iter())
        .map(|series| serde_json::to_string(series).expect("JSON values serialise"))
        .collect();
    Ok(format!(
        "{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[\n{}\n]}}}}\n",
        lines.join(",\n")
    ))
}

fn fit(variant: &str, simulated: Vec<Option<f64>>, observed: &[f64], at_ms: &[f64]) -> SeriesFit {
    let mut compared = 0u64;
    let mut squares = 0.0;
    let mut largest: Option<(f64, f64)> = None;
    for ((simulated, observed), at) in simulated.iter().zip(observed).zip(at_ms) {
        let Some(simulated) = simulated else { continue };
        let difference = simulated - observed;
        compared += 1;
        squares += difference * difference;
        if largest.is_none_or(|(d, _)| difference.abs() > d.abs()) {
            largest = Some((difference, *at));
        }
    }
    SeriesFit {
        variant: variant.to_owned(),
        simulated,
        compared,
        rmse: (compared > 0).then(|| (squares / compared as f64).sqrt()),
        largest_difference: largest.map(|(d, _)| d),
        // Where every sample matched, no sample differs most.
        largest_difference_at_ms: largest.filter(|(d, _)| *d != 0.0).map(|(_, at)| at),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use outagelab_observed::Sample;

    use super::*;

    #[test]
    fn metric_names_read_back() {
        for name in [
            "requests_per_s",
            "failed_per_s",
            "ok_per_s",
            "timeout_per_s",
            "rejected_attempts_per_s",
            "callers.web.failed_per_s",
            "p99_ms",
            "in_flight",
            "databases.pg.concurrency",
        ] {
            let metric = ObservedMetric::parse(name).unwrap();
            assert_eq!(metric.to_string(), name);
        }
        for name in ["p98_ms", "nothing_per_s", "databases.pg", "ok"] {
            let error = ObservedMetric::parse(name).unwrap_err();
            assert!(error.contains("is not a metric"), "{error}");
        }
    }

    /// A run of 100 ms buckets over 1 s: bucket i has i ok and 1 timeout, in flight i.
    fn variant(verdict: Verdict, end_ms: f64) -> VariantReport {
        let mut series = Series {
            bucket_ms: 100.0,
            start_ms: (0..10).map(|i| i as f64 * 100.0).collect(),
            ..Series::default()
        };
        series.outcomes = BTreeMap::from([
            ("ok".to_owned(), (0..10).collect()),
            ("timeout".to_owned(), vec![1; 10]),
        ]);
        series.p99_ms = (0..10).map(|i| Some(i as f64 * 10.0)).collect();
        series
            .gauges_max
            .insert("in_flight".to_owned(), (0..10).collect());
        VariantReport {
            name: "base".to_owned(),
            sweep_x: None,
            verdict,
            percentile_rule: Default::default(),
            end_ms,
            events: 0,
            faults: Vec::new(),
            summary: Default::default(),
            series,
            log: Vec::new(),
            log_dropped: 0,
            runner: None,
        }
    }

    fn spec(metric: &str, step_ms: i64, values: &[f64]) -> ObservedSpec {
        let start = 1_733_220_000_000;
        let samples = values
            .iter()
            .enumerate()
            .map(|(i, &value)| Sample {
                unix_ms: start + (i as i64 + 1) * step_ms,
                value,
            })
            .collect();
        ObservedSpec {
            file: "incident.csv".to_owned(),
            start_unix_ms: start,
            series: vec![MappedSeries {
                name: "seen".to_owned(),
                metric: ObservedMetric::parse(metric).unwrap(),
                series: ObservedSeries {
                    name: "x".to_owned(),
                    labels: BTreeMap::new(),
                    samples,
                    step_ms,
                },
            }],
        }
    }

    #[test]
    fn each_sample_is_compared_with_the_step_before_it() {
        let run = [variant(Verdict::Completed, 1000.0)];
        // Steps of 200 ms: buckets (0, 1), (2, 3), ...: ok 1, 5, 9, 13, 17 in 0.2 s.
        let observed = compare(&spec("ok_per_s", 200, &[5.0, 25.0, 45.0, 65.0, 85.0]), &run);
        let seen = &observed.series[0];
        assert_eq!(seen.at_ms, [200.0, 400.0, 600.0, 800.0, 1000.0]);
        let fit = &seen.variants[0];
        assert_eq!(
            fit.simulated,
            [Some(5.0), Some(25.0), Some(45.0), Some(65.0), Some(85.0)]
        );
        assert_eq!((fit.compared, fit.rmse), (5, Some(0.0)));
        // Every sample matched: none differs most.
        assert_eq!(fit.largest_difference, Some(0.0));
        assert_eq!(fit.largest_difference_at_ms, None);
        assert_eq!(observed.start_utc, "2024-12-03T10:00:00Z");

        let failed = compare(
            &spec("failed_per_s", 200, &[10.0, 10.0, 10.0, 10.0, 4.0]),
            &run,
        );
        let fit = &failed.series[0].variants[0];
        assert_eq!(fit.rmse, Some((36.0f64 / 5.0).sqrt()));
        assert_eq!(fit.largest_difference, Some(6.0));
        assert_eq!(fit.largest_difference_at_ms, Some(1000.0));

        let gauges = compare(&spec("in_flight", 500, &[4.0, 9.0]), &run);
        assert_eq!(
            gauges.series[0].variants[0].simulated,
            [Some(4.0), Some(9.0)]
        );
        let p99 = compare(&spec("p99_ms", 300, &[0.0, 0.0, 0.0]), &run);
        assert_eq!(
            p99.series[0].variants[0].simulated,
            [Some(20.0), Some(50.0), Some(80.0)]
        );
        // A step narrower than a bucket reads the bucket that holds its middle.
        let fine = compare(&spec("in_flight", 50, &[0.0, 0.0, 0.0]), &run);
        assert_eq!(
            fine.series[0].variants[0].simulated,
            [Some(0.0), Some(0.0), Some(1.0)]
        );
    }

    #[test]
    fn a_run_exported_for_prometheus_reads_back_and_matches_itself() {
        let run = [variant(Verdict::Horizon, 950.0)];
        let report = crate::RunReport {
            scenario: "x".to_owned(),
            seed: 1,
            sweep: None,
            slo: None,
            variants: run.to_vec(),
            observed: None,
        };
        let start = 1_733_220_000_000;
        let text = to_prometheus(&report, &[start]).unwrap();
        let file = outagelab_observed::ObservedFile::parse(
            &text,
            outagelab_observed::Format::PrometheusJson,
        )
        .unwrap();
        assert_eq!(file.series.len(), EXPORTED.len());
        let series = file
            .find(
                Some("outagelab_ok_per_s"),
                &BTreeMap::from([("variant".to_owned(), "base".to_owned())]),
            )
            .unwrap();
        // Nine whole buckets (the horizon cut the tenth), each a sample at its end.
        assert_eq!(series.step_ms, 100);
        assert_eq!(series.samples.len(), 9);
        assert_eq!(series.samples[0].unix_ms, start + 100);
        assert_eq!(series.samples[8].value, 80.0);
        for (name, metric) in file.series.iter().zip(EXPORTED) {
            let spec = ObservedSpec {
                file: "x.json".to_owned(),
                start_unix_ms: start,
                series: vec![MappedSeries {
                    name: metric.to_owned(),
                    metric: ObservedMetric::parse(metric).unwrap(),
                    series: name.clone(),
                }],
            };
            let fit = &compare(&spec, &run).series[0].variants[0];
            assert_eq!((fit.compared, fit.rmse), (9, Some(0.0)), "{metric}");
        }
    }

    #[test]
    fn samples_the_run_did_not_cover_are_not_compared() {
        // Cut off by a horizon at 950 ms: the last bucket was not seen to its end.
        let run = [variant(Verdict::Horizon, 950.0)];
        let observed = compare(&spec("ok_per_s", 500, &[20.0, 7.0, 0.0]), &run);
        let fit = &observed.series[0].variants[0];
        // Buckets 0-4 ended 0 + 1 + 2 + 3 + 4 requests ok in 0.5 s.
        assert_eq!(fit.simulated, [Some(20.0), None, None]);
        assert_eq!((fit.compared, fit.rmse), (1, Some(0.0)));
        // A sample whose step starts before the run's time 0 is not compared either.
        let mut early = spec("ok_per_s", 500, &[1.0, 2.0]);
        early.start_unix_ms += 100;
        let fit = &compare(&early, &run).series[0].variants[0];
        assert_eq!(fit.simulated[0], None);
    }
}

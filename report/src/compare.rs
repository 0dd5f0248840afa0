//! Two run reports overlaid variant by variant (`outagelab compare A.json B.json`), typically a
//! simulated run and a live one of the same file: per bucket, the difference of their error
//! counts and of their p50 and p99 latency, and each one's failure window (the first and the
//! last bucket in which some request ended with an error).
//!
//! Input is the JSON `run --json` and `live --json` write, read back as the subset compared
//! ([`Runs`]): variants by name, their series, their faults, their swept value and their flows'
//! latency. Variants are paired by name; when each report has exactly one variant, those two
//! are paired whatever their names.
//!
//! Buckets: both series must have the same width, or be regrouped to a common one
//! (`bucket_ms`, a whole multiple of both). A regrouped bucket's counts are the sum of its
//! buckets'; its p50 and p99 are the largest of its buckets' (an upper bound: a report keeps
//! each bucket's percentiles, not its latencies). The shorter series is padded with empty
//! buckets (no request, no percentile).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Outcome, RunnerTiming, SweepInfo};

/// A run report as the comparison reads it (the JSON of `run --json` or `live --json`).
#[derive(Clone, Debug, Deserialize)]
pub struct Runs {
    pub scenario: String,
    #[serde(default)]
    pub sweep: Option<SweepInfo>,
    pub variants: Vec<Run>,
}

/// One variant of a report, as compared.
#[derive(Clone, Debug, Deserialize)]
pub struct Run {
    pub name: String,
    #[serde(default)]
    pub sweep_x: Option<f64>,
    pub series: Buckets,
    #[serde(default)]
    pub faults: Vec<Fault>,
    pub summary: Totals,
    /// A live run's runner timing (absent from a simulated report).
    #[serde(default)]
    pub runner: Option<RunnerTiming>,
}

/// A variant's time series, as compared.
#[derive(Clone, Debug, Deserialize)]
pub struct Buckets {
    pub bucket_ms: f64,
    pub start_ms: Vec<f64>,
    pub outcomes: BTreeMap<String, Vec<u64>>,
    pub p50_ms: Vec<Option<f64>>,
    pub p99_ms: Vec<Option<f64>>,
}

/// A fault window, for shading.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Fault {
    pub name: String,
    pub start_ms: f64,
    pub end_ms: Option<f64>,
}

/// A variant's totals, as compared: its flows' latency, and everything else its summary
/// holds (for [`SummaryRow`]s).
#[derive(Clone, Debug, Deserialize)]
pub struct Totals {
    #[serde(default)]
    pub flows: BTreeMap<String, FlowTotals>,
    #[serde(flatten)]
    pub rest: BTreeMap<String, serde_json::Value>,
}

/// One number both reports' summaries have for a variant (a count, a peak, a limit), side by
/// side: `servers.redis.oom_replies`, `connections.cache.fail_open`,
/// `connections.limits.slot.reconnects`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SummaryRow {
    pub metric: String,
    pub values: [f64; 2],
    /// Second minus first.
    pub difference: f64,
    /// `same`, `higher` or `lower` (the second report's against the first's).
    pub verdict: &'static str,
}

/// Every number both summaries have (the latency histogram's buckets left out: the flows'
/// percentiles and the series compare latency), in path order.
fn summary_rows(a: &Totals, b: &Totals) -> Vec<SummaryRow> {
    let flat = |totals: &Totals| {
        let value = serde_json::Value::Object(
            (totals.rest.iter())
                .filter(|(key, _)| key.as_str() != "latency_histogram")
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        );
        crate::study::flatten_value(&value)
    };
    let (a, b) = (flat(a), flat(b));
    (a.iter())
        .filter_map(|(metric, &x)| {
            let y = *b.get(metric)?;
            let verdict = match y.total_cmp(&x) {
                std::cmp::Ordering::Equal => "same",
                std::cmp::Ordering::Greater => "higher",
                std::cmp::Ordering::Less => "lower",
            };
            Some(SummaryRow {
                metric: metric.clone(),
                values: [x, y],
                difference: y - x,
                verdict,
            })
        })
        .collect()
}

#[derive(Clone, Debug, Deserialize)]
pub struct FlowTotals {
    pub latency_ms: BTreeMap<String, Percentiles>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: Option<f64>,
    pub p99: Option<f64>,
    pub max: Option<f64>,
}

impl Runs {
    /// Reads a report's JSON; the error says why it is not one (a study, for instance).
    pub fn from_json(text: &str) -> Result<Runs, String> {
        let runs: Runs = serde_json::from_str(text).map_err(|error| {
            format!("not a run report (the JSON `run --json` or `live --json` writes): {error}")
        })?;
        for run in &runs.variants {
            let buckets = &run.series;
            let len = buckets.start_ms.len();
            if !(buckets.bucket_ms.is_finite() && buckets.bucket_ms > 0.0) {
                return Err(format!(
                    "variant {:?}: a bucket width of {} ms",
                    run.name, buckets.bucket_ms
                ));
            }
            let columns_fit = buckets.p50_ms.len() == len
                && buckets.p99_ms.len() == len
                && buckets.outcomes.values().all(|column| column.len() == len);
            if !columns_fit {
                return Err(format!(
                    "variant {:?}: its series' columns are not all {len} buckets long",
                    run.name
                ));
            }
        }
        Ok(runs)
    }
}

/// A failure window: the first and the last bucket in which a request ended with an error.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Window {
    pub first_bucket: usize,
    pub last_bucket: usize,
    /// The start of the first bucket and the end of the last, in ms.
    pub start_ms: f64,
    pub end_ms: f64,
}

/// One variant of both reports, bucket by bucket. Index 0 is the first report, 1 the second;
/// every difference is second minus first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VariantComparison {
    /// The variant's name (`first vs second` when a lone variant of each was paired).
    pub name: String,
    pub sweep_x: [Option<f64>; 2],
    pub start_ms: Vec<f64>,
    /// Requests that ended with an error, per bucket.
    pub errors: [Vec<u64>; 2],
    pub errors_difference: Vec<i64>,
    pub p50_ms: [Vec<Option<f64>>; 2],
    pub p99_ms: [Vec<Option<f64>>; 2],
    /// `None` where either bucket has no percentile.
    pub p50_difference_ms: Vec<Option<f64>>,
    pub p99_difference_ms: Vec<Option<f64>>,
    /// `None`: no request ended with an error.
    pub windows: [Option<Window>; 2],
    /// How many buckets later the second window starts and ends (`None` unless both have
    /// one).
    pub window_shift_buckets: Option<[i64; 2]>,
    /// Each flow's p50 and largest latency over the run, in each report.
    pub flows: BTreeMap<String, [Percentiles; 2]>,
    pub faults: [Vec<Fault>; 2],
    /// Each live report's runner timing (how late it woke for the file's instants); `None`
    /// for a simulated one.
    pub runners: [Option<RunnerTiming>; 2],
    /// Every number both summaries have, side by side with a verdict.
    pub summary: Vec<SummaryRow>,
}

/// Both reports, overlaid.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// What each report is called (its file name, say).
    pub labels: [String; 2],
    pub scenarios: [String; 2],
    /// The first report's sweep, when it is one.
    pub sweep: Option<SweepInfo>,
    pub bucket_ms: f64,
    pub variants: Vec<VariantComparison>,
    /// Variants only one report has, by report.
    pub unmatched: [Vec<String>; 2],
}

impl Comparison {
    /// Pairs the variants of `first` and `second` and compares each pair over buckets of
    /// `bucket_ms` (default: the reports' own width, which must then be the same).
    pub fn of(
        labels: [String; 2],
        first: &Runs,
        second: &Runs,
        bucket_ms: Option<f64>,
    ) -> Result<Comparison, String> {
        let pairs = pair(first, second);
        let widths: Vec<f64> = (first.variants.iter().chain(&second.variants))
            .map(|run| run.series.bucket_ms)
            .collect();
        let width = match bucket_ms {
            Some(width) => {
                if !(width.is_finite() && width > 0.0) {
                    return Err(format!("a bucket of {width} ms"));
                }
                if let Some(bad) = widths.iter().find(|&&w| !is_multiple(width, w)) {
                    return Err(format!(
                        "{width} ms is not a whole number of the reports' {bad} ms buckets"
                    ));
                }
                width
            }
            None => {
                let width = widths.first().copied().unwrap_or(100.0);
                if let Some(other) = widths.iter().find(|&&w| w != width) {
                    return Err(format!(
                        "the reports' buckets differ ({width} ms and {other} ms): pass \
                         --bucket-ms with a whole multiple of both"
                    ));
                }
                width
            }
        };
        let variants = pairs
            .paired
            .iter()
            .map(|(name, a, b)| compare(name.clone(), a, b, width))
            .collect();
        Ok(Comparison {
            labels,
            scenarios: [first.scenario.clone(), second.scenario.clone()],
            sweep: first.sweep.clone(),
            bucket_ms: width,
            variants,
            unmatched: pairs.unmatched,
        })
    }
}

struct Pairs<'r> {
    paired: Vec<(String, &'r Run, &'r Run)>,
    unmatched: [Vec<String>; 2],
}

fn pair<'r>(first: &'r Runs, second: &'r Runs) -> Pairs<'r> {
    if let ([a], [b]) = (first.variants.as_slice(), second.variants.as_slice()) {
        let name = if a.name == b.name {
            a.name.clone()
        } else {
            format!("{} vs {}", a.name, b.name)
        };
        return Pairs {
            paired: vec![(name, a, b)],
            unmatched: [Vec::new(), Vec::new()],
        };
    }
    let paired = (first.variants.iter())
        .filter_map(|a| Some((a.name.clone(), a, find(second, &a.name)?)))
        .collect();
    let only = |runs: &Runs, other: &Runs| -> Vec<String> {
        (runs.variants.iter())
            .filter(|run| find(other, &run.name).is_none())
            .map(|run| run.name.clone())
            .collect()
    };
    Pairs {
        paired,
        unmatched: [only(first, second), only(second, first)],
    }
}

fn find<'r>(runs: &'r Runs, name: &str) -> Option<&'r Run> {
    runs.variants.iter().find(|run| run.name == name)
}

/// Whether `width` is a whole number of `bucket` (to a part in a million).
fn is_multiple(width: f64, bucket: f64) -> bool {
    let ratio = width / bucket;
    ratio >= 1.0 - 1e-9 && (ratio - ratio.round()).abs() <= 1e-6 * ratio
}

/// A series regrouped into buckets of `width`: errors summed, percentiles the largest.
struct Regrouped {
    errors: Vec<u64>,
    p50: Vec<Option<f64>>,
    p99: Vec<Option<f64>>,
}

fn regroup(buckets: &Buckets, width: f64) -> Regrouped {
    let per = (width / buckets.bucket_ms).round().max(1.0) as usize;
    let len = buckets.start_ms.len().div_ceil(per);
    let errors_at = |index: usize| -> u64 {
        (buckets.outcomes.iter())
            .filter(|(name, _)| name.as_str() != Outcome::Ok.name())
            .map(|(_, column)| column[index])
            .sum()
    };
    let largest = |column: &[Option<f64>], group: usize| {
        column[group * per..((group + 1) * per).min(column.len())]
            .iter()
            .flatten()
            .copied()
            .reduce(f64::max)
    };
    Regrouped {
        errors: (0..len)
            .map(|group| {
                (group * per..((group + 1) * per).min(buckets.start_ms.len()))
                    .map(errors_at)
                    .sum()
            })
            .collect(),
        p50: (0..len).map(|g| largest(&buckets.p50_ms, g)).collect(),
        p99: (0..len).map(|g| largest(&buckets.p99_ms, g)).collect(),
    }
}

fn window(errors: &[u64], width: f64) -> Option<Window> {
    let first = errors.iter().position(|&n| n > 0)?;
    let last = errors.iter().rposition(|&n| n > 0)?;
    Some(Window {
        first_bucket: first,
        last_bucket: last,
        start_ms: first as f64 * width,
        end_ms: (last + 1) as f64 * width,
    })
}

fn compare(name: String, a: &Run, b: &Run, width: f64) -> VariantComparison {
    let (mut ra, mut rb) = (regroup(&a.series, width), regroup(&b.series, width));
    let len = ra.errors.len().max(rb.errors.len());
    for regrouped in [&mut ra, &mut rb] {
        regrouped.errors.resize(len, 0);
        regrouped.p50.resize(len, None);
        regrouped.p99.resize(len, None);
    }
    let difference = |x: &[Option<f64>], y: &[Option<f64>]| -> Vec<Option<f64>> {
        x.iter().zip(y).map(|(x, y)| Some((*y)? - (*x)?)).collect()
    };
    let windows = [window(&ra.errors, width), window(&rb.errors, width)];
    let window_shift_buckets = match windows {
        [Some(wa), Some(wb)] => Some([
            wb.first_bucket as i64 - wa.first_bucket as i64,
            wb.last_bucket as i64 - wa.last_bucket as i64,
        ]),
        _ => None,
    };
    let flow_names: std::collections::BTreeSet<&String> = a
        .summary
        .flows
        .keys()
        .chain(b.summary.flows.keys())
        .collect();
    let all = |run: &Run, flow: &str| -> Percentiles {
        (run.summary.flows.get(flow))
            .and_then(|totals| totals.latency_ms.get("all"))
            .copied()
            .unwrap_or_default()
    };
    VariantComparison {
        name,
        sweep_x: [a.sweep_x, b.sweep_x],
        start_ms: (0..len).map(|index| index as f64 * width).collect(),
        errors_difference: (ra.errors.iter().zip(&rb.errors))
            .map(|(&x, &y)| y as i64 - x as i64)
            .collect(),
        p50_difference_ms: difference(&ra.p50, &rb.p50),
        p99_difference_ms: difference(&ra.p99, &rb.p99),
        windows,
        window_shift_buckets,
        flows: flow_names
            .into_iter()
            .map(|flow| (flow.clone(), [all(a, flow), all(b, flow)]))
            .collect(),
        faults: [a.faults.clone(), b.faults.clone()],
        runners: [a.runner.clone(), b.runner.clone()],
        summary: summary_rows(&a.summary, &b.summary),
        errors: [ra.errors, rb.errors],
        p50_ms: [ra.p50, rb.p50],
        p99_ms: [ra.p99, rb.p99],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-variant report of `errors` per bucket (every bucket's p50 is its index in ms).
    fn runs(name: &str, width: f64, errors: &[u64]) -> Runs {
        let len = errors.len();
        let text = serde_json::json!({
            "scenario": "s",
            "variants": [{
                "name": name,
                "sweep_x": null,
                "series": {
                    "bucket_ms": width,
                    "start_ms": (0..len).map(|i| i as f64 * width).collect::<Vec<_>>(),
                    "outcomes": { "ok": vec![1; len], "timeout": errors },
                    "p50_ms": (0..len).map(|i| Some(i as f64)).collect::<Vec<_>>(),
                    "p95_ms": vec![None::<f64>; len],
                    "p99_ms": vec![None::<f64>; len],
                },
                "faults": [],
                "summary": { "flows": {} },
            }],
        })
        .to_string();
        Runs::from_json(&text).unwrap()
    }

    fn labels() -> [String; 2] {
        ["a".to_owned(), "b".to_owned()]
    }

    #[test]
    fn a_live_reports_runner_timing_is_carried_and_a_simulated_one_has_none() {
        let simulated = runs("v", 100.0, &[0, 1]);
        let text = serde_json::json!({
            "scenario": "s",
            "variants": [{
                "name": "v",
                "series": {
                    "bucket_ms": 100.0,
                    "start_ms": [0.0, 100.0],
                    "outcomes": { "ok": [1, 1] },
                    "p50_ms": [1.0, 1.0],
                    "p99_ms": [1.0, 1.0],
                },
                "summary": { "flows": {} },
                "runner": { "wakes": 20, "late_wakes": 2, "worst_lateness_ms": 31.5, "worst_due_ms": 1.0 },
            }],
        })
        .to_string();
        let live = Runs::from_json(&text).unwrap();
        let comparison = Comparison::of(labels(), &simulated, &live, None).unwrap();
        let [first, second] = &comparison.variants[0].runners;
        assert_eq!(first, &None);
        assert_eq!(
            second,
            &Some(RunnerTiming {
                wakes: 20,
                late_wakes: 2,
                worst_lateness_ms: 31.5,
                worst_due_ms: 1.0,
            })
        );
    }

    #[test]
    fn windows_are_the_first_and_last_buckets_with_an_error() {
        let a = runs("v", 100.0, &[0, 0, 3, 0, 1, 0]);
        let b = runs("v", 100.0, &[0, 0, 0, 2, 2, 2, 0, 0]);
        let comparison = Comparison::of(labels(), &a, &b, None).unwrap();
        let v = &comparison.variants[0];
        assert_eq!(v.name, "v");
        let [wa, wb] = v.windows;
        assert_eq!(
            wa,
            Some(Window {
                first_bucket: 2,
                last_bucket: 4,
                start_ms: 200.0,
                end_ms: 500.0
            })
        );
        assert_eq!((wb.unwrap().first_bucket, wb.unwrap().last_bucket), (3, 5));
        assert_eq!(v.window_shift_buckets, Some([1, 1]));
        assert_eq!(v.errors_difference, vec![0, 0, -3, 2, 1, 2, 0, 0]);
        assert_eq!(v.start_ms.len(), 8, "padded to the longer series");
        assert_eq!(v.p50_difference_ms[1], Some(0.0));
        assert_eq!(v.p50_difference_ms[7], None, "the first has no bucket 7");
    }

    #[test]
    fn buckets_are_regrouped_to_a_common_multiple() {
        let a = runs("v", 50.0, &[1, 0, 0, 2, 0]);
        let b = runs("w", 100.0, &[1, 2, 0]);
        let refused = Comparison::of(labels(), &a, &b, None).unwrap_err();
        assert!(refused.contains("--bucket-ms"), "{refused}");
        assert!(Comparison::of(labels(), &a, &b, Some(150.0)).is_err());
        let comparison = Comparison::of(labels(), &a, &b, Some(100.0)).unwrap();
        let v = &comparison.variants[0];
        assert_eq!(
            v.name, "v vs w",
            "lone variants are paired whatever their names"
        );
        assert_eq!(v.errors, [vec![1, 2, 0], vec![1, 2, 0]]);
        // The largest p50 of each group: buckets 0-1 -> 1, 2-3 -> 3, 4 -> 4.
        assert_eq!(v.p50_ms[0], vec![Some(1.0), Some(3.0), Some(4.0)]);
        assert_eq!(v.window_shift_buckets, Some([0, 0]));
    }

    #[test]
    fn variants_pair_by_name_and_the_rest_are_listed() {
        let mut a = runs("x", 100.0, &[0]);
        a.variants.push(runs("y", 100.0, &[1]).variants.remove(0));
        let mut b = runs("y", 100.0, &[0]);
        b.variants.push(runs("z", 100.0, &[0]).variants.remove(0));
        let comparison = Comparison::of(labels(), &a, &b, None).unwrap();
        let names: Vec<&str> = comparison
            .variants
            .iter()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(names, ["y"]);
        assert_eq!(
            comparison.unmatched,
            [vec!["x".to_owned()], vec!["z".to_owned()]]
        );
        assert_eq!(comparison.variants[0].windows[1], None);
        assert_eq!(comparison.variants[0].window_shift_buckets, None);
    }

    #[test]
    fn what_is_not_a_run_report_is_refused() {
        assert!(Runs::from_json("{\"seeds\": [1, 2]}").is_err());
        let mut text = serde_json::to_value(serde_json::json!({
            "scenario": "s",
            "variants": [{"name": "v", "series": {"bucket_ms": 100.0, "start_ms": [0.0],
                "outcomes": {"ok": [1, 2]}, "p50_ms": [null], "p99_ms": [null]},
                "summary": {}}]
        }))
        .unwrap();
        let error = Runs::from_json(&text.to_string()).unwrap_err();
        assert!(error.contains("not all 1 buckets long"), "{error}");
        text["variants"][0]["series"]["outcomes"]["ok"] = serde_json::json!([1]);
        assert!(Runs::from_json(&text.to_string()).is_ok());
    }
}

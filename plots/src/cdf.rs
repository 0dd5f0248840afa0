//! The latency CDF: for each variant, the share of its ended requests that took at most each
//! latency, from the summary's latency histogram (`latency_histogram`: exact counts under
//! fixed edges, 20 a decade), on a logarithmic latency axis. Each line rises from zero at the
//! edge below its first bucket to 100% at its last: across each bucket, straight from its
//! lower edge to its upper one, and flat over the empty buckets between two. The file's
//! objective (`[report] slo`) is a vertical line at its latency, and a cross at its percentile
//! when it names one: a variant meets it where its line passes at or above the cross. One
//! panel for all variants (comparing them is the point): past ten, lines are told apart by
//! dash too, and a variant with the same distribution as an earlier one is marked.

use outagelab_report::{LatencyHistogram, Outcome, RunReport, Summary};

use crate::axes::format_number;

use crate::chart::{
    Axis, Chart, Dash, INK, Key, LegendEntry, Line, Marker, Panel, Rule, Stroke, variant_stroke,
};
use crate::latency::slo_label;

/// The ratio between an R20 edge and the one below it, about (1.12 at most).
const EDGE_BELOW: f64 = 1.0 / 1.12;

pub(crate) fn chart(report: &RunReport) -> Chart {
    let curves: Vec<Vec<(f64, f64)>> = report
        .variants
        .iter()
        .map(|variant| curve(&variant.summary.latency_histogram))
        .collect();
    let same_as: Vec<Option<usize>> = (0..curves.len())
        .map(|later| {
            let curve = &curves[later];
            (0..later).find(|&earlier| !curve.is_empty() && curves[earlier] == *curve)
        })
        .collect();
    let mut lines = Vec::new();
    let mut legend = vec![LegendEntry::heading("Variants")];
    for (index, curve) in curves.iter().enumerate() {
        let stroke = variant_stroke(index);
        if !curve.is_empty() {
            lines.push(Line {
                segments: vec![curve.clone()],
                stroke,
                marks: same_as[index].is_some(),
            });
        }
        let stroke = Stroke { width: 3, ..stroke };
        legend.push(LegendEntry {
            key: match same_as[index] {
                Some(_) => Key::Marked(stroke),
                None => Key::Line(stroke),
            },
            label: crate::multiples::variant_name(report, index, same_as[index]),
        });
    }
    let mut markers = Vec::new();
    let mut at_once = Vec::new();
    for (index, variant) in report.variants.iter().enumerate() {
        if let Some(refused) = refused_at_once(&variant.summary) {
            let color = variant_stroke(index).color;
            markers.push(Marker::cross((refused.edge_ms, refused.percent), color));
            at_once.push(LegendEntry {
                key: Key::Cross(color),
                label: format!(
                    "{}: {}% ({})",
                    variant.name,
                    format_number(refused.percent),
                    refused.outcomes
                ),
            });
        }
    }
    if !at_once.is_empty() {
        legend.push(LegendEntry::heading(
            "Ended at once, not served (to the cross)",
        ));
        legend.extend(at_once);
    }
    let slo = report.slo.as_ref();
    let latencies = curves.iter().flatten().map(|&(x, _)| x);
    let latencies = latencies.chain(slo.map(|slo| slo.latency_ms));
    let mut panel = Panel::new(
        latency_axis(latencies),
        Axis {
            description: "requests at or under (%)".to_owned(),
            range: 0.0..102.0,
            log: false,
            categories: false,
            category_names: Vec::new(),
            clock_start_unix_ms: None,
            zero_band: None,
        },
    );
    panel.lines = lines;
    panel.markers = markers;
    if let Some(slo) = slo {
        let stroke = Stroke {
            color: INK,
            dash: Dash::Dashed,
            width: 1,
        };
        panel.rules.push(Rule {
            at: slo.latency_ms,
            vertical: true,
            stroke,
            label: slo_label(slo),
            in_legend: true,
        });
        panel.markers.extend(
            (slo.percentile).map(|percentile| Marker::cross((slo.latency_ms, percentile), INK)),
        );
        legend.push(LegendEntry::heading("Objective"));
        legend.push(LegendEntry {
            key: Key::Line(stroke),
            label: slo_label(slo),
        });
    }
    Chart::stacked(
        "latency_cdf",
        format!("{}: latency CDF", report.scenario),
        vec![panel],
        legend,
    )
}

/// The requests of a variant that ended at once and were not served.
struct AtOnce {
    /// The upper edge of the histogram's first bucket, and the share of requests in it.
    edge_ms: f64,
    percent: f64,
    /// The outcomes that ended that fast, with their counts in all ("89 shed").
    outcomes: String,
}

/// The histogram's lowest bucket (1 µs) when no request in it succeeded (every `ok` took
/// longer): requests refused on arrival (shed, breaker open, rate limited), which the curve
/// would otherwise show as its fastest successes.
fn refused_at_once(summary: &Summary) -> Option<AtOnce> {
    let histogram = &summary.latency_histogram;
    let (&edge_ms, &count) = histogram.le_ms.first().zip(histogram.counts.first())?;
    let total: u64 = histogram.counts.iter().sum();
    if edge_ms > AT_ONCE_MS || count == 0 || total == 0 {
        return None;
    }
    let fastest = |outcome: &str| summary.latency_ms.get(outcome).and_then(|stats| stats.min);
    if fastest(Outcome::Ok.name()).is_some_and(|min| min <= edge_ms) {
        return None;
    }
    let outcomes = summary.outcomes.iter().filter(|&(outcome, &count)| {
        count > 0
            && outcome.as_str() != Outcome::Ok.name()
            && fastest(outcome).is_some_and(|min| min <= edge_ms)
    });
    let outcomes: Vec<String> = outcomes
        .map(|(outcome, count)| format!("{count} {outcome}"))
        .collect();
    if outcomes.is_empty() {
        return None;
    }
    Some(AtOnce {
        edge_ms,
        percent: count as f64 * 100.0 / total as f64,
        outcomes: format!("{} in all", outcomes.join(", ")),
    })
}

/// The histogram's lowest edge: a request under it ended at once.
const AT_ONCE_MS: f64 = 0.001;

/// `(latency_ms, percent at or under)` at each edge, from zero at the edge below the first,
/// and at the lower edge of a bucket that follows empty ones.
fn curve(histogram: &LatencyHistogram) -> Vec<(f64, f64)> {
    let total: u64 = histogram.counts.iter().sum();
    let Some(&first) = histogram.le_ms.first() else {
        return Vec::new();
    };
    if total == 0 || !first.is_finite() || first <= 0.0 {
        return Vec::new();
    }
    let percent = |count: u64| count as f64 * 100.0 / total as f64;
    let mut points = vec![(first * EDGE_BELOW, 0.0)];
    let mut below = 0u64;
    for (&edge, &count) in histogram.le_ms.iter().zip(&histogram.counts) {
        let &(previous_edge, _) = points.last().expect("the first point is there");
        // The edges are within 15% of each other: more is a gap of empty buckets.
        if edge * EDGE_BELOW > previous_edge * 1.05 {
            points.push((edge * EDGE_BELOW, percent(below)));
        }
        below += count;
        points.push((edge, percent(below)));
    }
    points
}

/// A log axis over the latencies, a margin each side; `1..10 ms` without any.
fn latency_axis(latencies: impl Iterator<Item = f64>) -> Axis {
    let positive = latencies.filter(|ms| ms.is_finite() && *ms > 0.0);
    let (min, max) = positive.fold((f64::INFINITY, 0.0_f64), |(min, max), ms| {
        (min.min(ms), max.max(ms))
    });
    let range = if min <= max {
        min / 1.5..max * 1.5
    } else {
        1.0..10.0
    };
    Axis {
        description: "latency (ms)".to_owned(),
        range,
        log: true,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_curve_rises_from_zero_below_its_first_bucket_to_100_percent() {
        let histogram = LatencyHistogram {
            le_ms: vec![1.0, 2.0, 50.0],
            counts: vec![1, 2, 1],
        };
        // 1.12 and 1.25 are empty between 1 and 2 (from 1.8), and 2.24 to 45 before 50.
        assert_eq!(
            curve(&histogram),
            [
                (EDGE_BELOW, 0.0),
                (1.0, 25.0),
                (2.0 * EDGE_BELOW, 25.0),
                (2.0, 75.0),
                (50.0 * EDGE_BELOW, 75.0),
                (50.0, 100.0)
            ]
        );
        let adjacent = LatencyHistogram {
            le_ms: vec![1.0, 1.12],
            counts: vec![1, 1],
        };
        assert_eq!(curve(&adjacent).len(), 3, "no gap between adjacent buckets");
        assert!(curve(&LatencyHistogram::default()).is_empty());
        let axis = latency_axis([1.0, 50.0].into_iter());
        assert!(axis.log);
        assert_eq!(axis.range, 1.0 / 1.5..75.0);
        assert_eq!(latency_axis(std::iter::empty()).range, 1.0..10.0);
    }

    /// The bulkhead variant of redis-dead-protection: 84 of its 500 requests were shed on
    /// arrival, and its CDF rose to 17% at 0.001 ms as if they were its fastest successes.
    #[test]
    fn requests_refused_at_once_are_marked_and_named() {
        use outagelab_report::{LatencyStats, PercentileRule, Series, VariantReport, Verdict};
        let stats = |count: u64, min: f64| LatencyStats {
            count,
            min: Some(min),
            ..LatencyStats::default()
        };
        let mut summary = Summary {
            latency_histogram: LatencyHistogram {
                le_ms: vec![0.001, 50.0, 56.0],
                counts: vec![84, 400, 16],
            },
            ..Summary::default()
        };
        summary.outcomes.insert("ok".to_owned(), 411);
        summary.outcomes.insert("shed".to_owned(), 89);
        summary.outcomes.insert("timeout".to_owned(), 0);
        summary.latency_ms.insert("ok".to_owned(), stats(411, 49.2));
        summary.latency_ms.insert("shed".to_owned(), stats(89, 0.0));
        let variant = VariantReport {
            name: "bulkhead".to_owned(),
            sweep_x: None,
            verdict: Verdict::Completed,
            percentile_rule: PercentileRule::NearestRank,
            end_ms: 1000.0,
            events: 0,
            faults: Vec::new(),
            summary,
            series: Series::default(),
            log: Vec::new(),
            log_dropped: 0,
            runner: None,
        };
        let mut report = RunReport {
            scenario: "s".to_owned(),
            seed: 1,
            sweep: None,
            slo: None,
            variants: vec![variant],
            observed: None,
        };
        let chart = chart(&report);
        let markers: Vec<(f64, f64)> = chart.panels[0].markers.iter().map(|m| m.at).collect();
        assert_eq!(markers, [(0.001, 16.8)]);
        let labels: Vec<&str> = chart.legend.iter().map(|e| e.label.as_str()).collect();
        assert!(
            labels.contains(&"bulkhead: 16.8% (89 shed in all)"),
            "{labels:?}"
        );
        // Successes as fast as that: the bucket is not said to be refusals.
        let ok = report.variants[0].summary.latency_ms.get_mut("ok").unwrap();
        ok.min = Some(0.0005);
        assert!(chart_markers_empty(&report));
    }

    fn chart_markers_empty(report: &RunReport) -> bool {
        chart(report).panels[0].markers.is_empty()
    }
}

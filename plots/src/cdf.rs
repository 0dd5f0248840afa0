//! The latency CDF: for each variant, the share of its ended requests that took at most each
//! latency, from the summary's latency histogram (`latency_histogram`: exact counts under
//! fixed edges, 20 a decade), on a logarithmic latency axis. Each line rises from zero at the
//! edge below its first bucket to 100% at its last: across each bucket, straight from its
//! lower edge to its upper one, and flat over the empty buckets between two. The file's
//! objective (`[report] slo`) is a vertical line at its latency, and a cross at its percentile
//! when it names one: a variant meets it where its line passes at or above the cross. One
//! panel for all variants (comparing them is the point): past ten, lines are told apart by
//! dash too, and a variant with the same distribution as an earlier one is marked.

use outagelab_report::{LatencyHistogram, RunReport};

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
        },
    );
    panel.lines = lines;
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
        });
        panel
            .markers
            .extend(slo.percentile.map(|percentile| Marker {
                at: (slo.latency_ms, percentile),
                color: INK,
            }));
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
}

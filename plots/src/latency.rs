//! Latency over time: the p99 (solid), p95 (dotted) and p50 (dashed) latency of the requests
//! that ended in each bucket, with the fault windows shaded and the file's latency objective
//! (`[report] slo`) as a reference line. Buckets where no request ended have no percentile
//! and leave a gap in the line. The y-axis turns logarithmic when latencies spread over more
//! than a factor of 50 (for example 2 ms normally, 5 s in timeouts). Many variants, or
//! variants whose lines would hide each other, get a panel each (see `multiples`).

use outagelab_report::{RunReport, Slo};

use crate::axes::{format_number, value_axis};
use crate::chart::segments;
use crate::chart::{Chart, Dash, INK, Key, LegendEntry, Stroke, y_values};
use crate::multiples::{Kind, Limit, OverTime, over_time, parts};
use crate::timeline::bucket_middles_s;

pub(crate) fn chart(report: &RunReport) -> Chart {
    let kinds = vec![
        Kind::new("p99 (solid)", Dash::Solid, 2),
        Kind::new("p95 (dotted)", Dash::Dotted, 1),
        Kind::new("p50 (dashed)", Dash::Dashed, 2),
    ];
    let slo: Vec<Limit> = report.slo.iter().map(slo_limit).collect();
    let parts = parts(report, |variant, part| {
        let series = &variant.series;
        part.limits = slo.clone();
        let percentiles = [&series.p99_ms, &series.p95_ms, &series.p50_ms];
        for (kind, values) in percentiles.into_iter().enumerate() {
            let points = bucket_middles_s(series).zip(values.iter().copied());
            part.push(kind, dots_if_flipping(segments(points)));
        }
    });
    let y = |lines: &[_], limits: &[f64]| {
        value_axis(
            "latency (ms)",
            y_values(lines).chain(limits.iter().copied()),
        )
    };
    let spec = OverTime {
        name: "latency",
        title: "latency over time",
        y: &y,
        heading: "Percentiles",
        kinds,
    };
    let mut chart = over_time(report, spec, &parts);
    // The objective in the legend too: its label beside the line is left out where the data
    // leaves no room clear of it, rather than written over the data (issue 31).
    if let Some(slo) = &report.slo {
        chart.legend.push(LegendEntry::heading("Objective"));
        chart.legend.push(LegendEntry {
            key: Key::Line(SLO_STROKE),
            label: slo_label(slo),
        });
    }
    chart
}

/// The objective's line, as [`crate::multiples`] draws a limit agreed by every variant.
const SLO_STROKE: Stroke = Stroke {
    color: INK,
    dash: Dash::Dashed,
    width: 1,
};

/// A percentile flips when it jumps by more than this factor, up or down, between buckets.
const FLIP_FACTOR: f64 = 10.0;
/// Where this many of a few consecutive steps ([`FLIP_WINDOW`]) flip, the line is a comb.
const FLIPS_MIN: usize = 3;
const FLIP_WINDOW: usize = 6;

/// A percentile that flips between two levels from bucket to bucket (a p95 where about 5% of
/// requests miss a cache: a hit's 0.2 ms in one bucket, a timeout's 100 ms in the next) is a
/// comb of vertical strokes as a line, which says nothing the two levels do not: where
/// [`FLIPS_MIN`] of [`FLIP_WINDOW`] consecutive steps flip, its points are drawn as dots. A
/// spike, or a fault's start and end, stays a line.
fn dots_if_flipping(segments: Vec<Vec<(f64, f64)>>) -> Vec<Vec<(f64, f64)>> {
    let mut drawn = Vec::new();
    for segment in segments {
        let flips: Vec<bool> = segment
            .windows(2)
            .map(|step| {
                let (low, high) = (step[0].1.min(step[1].1), step[0].1.max(step[1].1));
                high > low.max(f64::MIN_POSITIVE) * FLIP_FACTOR
            })
            .collect();
        let mut combed = vec![false; segment.len()];
        let window = FLIP_WINDOW.min(flips.len());
        for start in 0..=flips.len() - window {
            let flipped = flips[start..start + window].iter().filter(|&&f| f).count();
            if flipped >= FLIPS_MIN {
                for step in (start..start + window).filter(|&step| flips[step]) {
                    combed[step] = true;
                    combed[step + 1] = true;
                }
            }
        }
        let mut line = Vec::new();
        for (point, combed) in segment.into_iter().zip(combed) {
            if combed {
                if !line.is_empty() {
                    drawn.push(std::mem::take(&mut line));
                }
                drawn.push(vec![point]);
            } else {
                line.push(point);
            }
        }
        if !line.is_empty() {
            drawn.push(line);
        }
    }
    drawn
}

/// The objective as a reference line: `SLO p99 ≤ 200 ms`.
pub(crate) fn slo_limit(slo: &Slo) -> Limit {
    Limit {
        what: "SLO".to_owned(),
        value: slo.latency_ms,
        label: slo_label(slo),
        in_legend: true,
    }
}

pub(crate) fn slo_label(slo: &Slo) -> String {
    let latency = format_number(slo.latency_ms);
    match slo.percentile {
        Some(percentile) => format!("SLO p{} ≤ {latency} ms", format_number(percentile)),
        None => format!("SLO ≤ {latency} ms"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(values: &[f64]) -> Vec<Vec<(f64, f64)>> {
        vec![
            values
                .iter()
                .enumerate()
                .map(|(x, &y)| (x as f64, y))
                .collect(),
        ]
    }

    /// breaker-open-sweep's p95 flipped between a hit's 0.2 ms and a timeout's 100 ms from
    /// bucket to bucket while Redis hung: a comb of vertical strokes across the fault.
    #[test]
    fn a_percentile_flipping_between_two_levels_is_drawn_as_dots() {
        let flat = [1.0; 10];
        let comb: Vec<f64> = (0..16)
            .map(|i| if i % 2 == 0 { 1.0 } else { 100.0 })
            .collect();
        let values: Vec<f64> = [&flat[..], &comb, &flat].concat();
        let drawn = dots_if_flipping(line(&values));
        let dots = drawn.iter().filter(|segment| segment.len() == 1).count();
        assert!(dots >= 16, "a dot per bucket of the comb: {drawn:?}");
        let longest = drawn.iter().map(Vec::len).max().unwrap();
        assert!(longest >= 9, "the flat parts stay lines: {drawn:?}");
        for segment in &drawn {
            for step in segment.windows(2) {
                let ratio = step[0].1.max(step[1].1) / step[0].1.min(step[1].1);
                assert!(ratio <= FLIP_FACTOR, "a stroke of the comb: {step:?}");
            }
        }
        // A spike, and a fault's start and end, stay a line.
        let spike = [1.0, 1.0, 1.0, 200.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
        assert_eq!(dots_if_flipping(line(&spike)), line(&spike));
        let fault = [1.0, 1.0, 100.0, 100.0, 100.0, 100.0, 1.0, 1.0];
        assert_eq!(dots_if_flipping(line(&fault)), line(&fault));
        assert!(dots_if_flipping(Vec::new()).is_empty());
        assert_eq!(dots_if_flipping(line(&[5.0])), line(&[5.0]));
    }
}

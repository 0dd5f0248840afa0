//! The outage curve: how many requests per second failed (top panel) and succeeded (bottom
//! panel) over time, one line per variant, with the fault windows shaded. A request counts in
//! the bucket where it ended, so the curves show when failures were reported to callers.

use outagelab_report::{Outcome, RunReport, Series};

use crate::chart::{
    Chart, Dash, Line, Panel, Stroke, palette, segments, y_values, zero_based_axis,
};
use crate::timeline::{bucket_middles_s, bucket_ms, fault_shading, time_axis, variant_legend};

pub(crate) fn chart(report: &RunReport) -> Chart {
    let time = time_axis(report);
    let faults = fault_shading(report, &time);
    let lines = |count: fn(&Series, usize) -> u64| -> Vec<Line> {
        let lines = report
            .variants
            .iter()
            .enumerate()
            .map(|(index, variant)| Line {
                segments: segments(per_second(&variant.series, count)),
                stroke: Stroke {
                    color: palette(index),
                    dash: Dash::Solid,
                    width: 2,
                },
            });
        lines.collect()
    };
    let panel = |description: &str, lines: Vec<Line>| Panel {
        x: time.clone(),
        y: zero_based_axis(description, y_values(&lines)),
        bands: faults.bands.clone(),
        lines,
        markers: Vec::new(),
    };
    let failed = panel("failed requests per second", lines(errors_at));
    let succeeded = panel("successful requests per second", lines(ok_at));
    let mut legend = variant_legend(report);
    legend.extend(faults.legend);
    Chart {
        name: "outage",
        title: format!("{}: outage curve", report.scenario),
        panels: vec![failed, succeeded],
        legend,
    }
}

/// `count` of each bucket divided by the bucket width in seconds; no points when the series
/// has no usable bucket width.
fn per_second(series: &Series, count: fn(&Series, usize) -> u64) -> Vec<(f64, Option<f64>)> {
    let bucket_s = bucket_ms(series) / 1000.0;
    if bucket_s <= 0.0 {
        return Vec::new();
    }
    let rates = (0..series.len()).map(|index| Some(count(series, index) as f64 / bucket_s));
    bucket_middles_s(series).zip(rates).collect()
}

/// Like `Series::errors_at`, but a column shorter than `start_ms` counts as zero instead of
/// panicking.
fn errors_at(series: &Series, index: usize) -> u64 {
    let errors = series
        .outcomes
        .iter()
        .filter(|(name, _)| name.as_str() != Outcome::Ok.name());
    errors
        .map(|(_, counts)| counts.get(index).copied().unwrap_or(0))
        .sum()
}

fn ok_at(series: &Series, index: usize) -> u64 {
    let counts = series.outcomes.get(Outcome::Ok.name());
    counts
        .and_then(|counts| counts.get(index))
        .copied()
        .unwrap_or(0)
}

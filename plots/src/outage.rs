//! The outage curve: how many requests per second failed (top panel) and succeeded (bottom
//! panel) over time, one line per variant, with the fault windows shaded. A request counts in
//! the bucket where it ended, so the curves show when failures were reported to callers.
//! When a breaker ever left the closed state, a third panel shows each breaker's state over
//! time (the worst state in each bucket: 0 closed, 1 half-open, 2 open), one line per variant
//! and breaker, so the storm lines up with the breaker that caused it.

use std::collections::BTreeSet;

use outagelab_report::{GaugeKey, Outcome, RunReport, Series};

use crate::chart::{
    Chart, Dash, INK, Key, LegendEntry, Line, Panel, Stroke, palette, segments, y_values,
    zero_based_axis,
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
    let mut panels = vec![failed, succeeded];
    let mut legend = variant_legend(report);
    let breakers = breaker_lines(report);
    if !breakers.lines.is_empty() {
        let mut state = panel("breaker state", breakers.lines);
        state.y.range = -0.1..2.1;
        panels.push(state);
        legend.push(LegendEntry::heading(
            "Breakers (0 closed, 1 half-open, 2 open)",
        ));
        legend.extend(breakers.legend);
    }
    legend.extend(faults.legend);
    Chart {
        name: "outage",
        title: format!("{}: outage curve", report.scenario),
        panels,
        legend,
    }
}

struct BreakerLines {
    lines: Vec<Line>,
    legend: Vec<LegendEntry>,
}

/// One step line per variant and breaker that ever left the closed state: colour says the
/// variant, dash the breaker.
fn breaker_lines(report: &RunReport) -> BreakerLines {
    const DASHES: [Dash; 3] = [Dash::Solid, Dash::Dashed, Dash::Dotted];
    let left_closed = |values: &[u64]| values.iter().any(|&state| state > 0);
    let names: BTreeSet<String> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.gauges())
        .filter_map(|(key, values)| match key {
            GaugeKey::BreakerState(name) if left_closed(values) => Some(name),
            _ => None,
        })
        .collect();
    let mut lines = Vec::new();
    for (index, variant) in report.variants.iter().enumerate() {
        for (dash, name) in names.iter().enumerate() {
            let key = GaugeKey::BreakerState(name.clone());
            let Some(values) = variant.series.gauge(&key) else {
                continue;
            };
            let points = bucket_middles_s(&variant.series)
                .zip(values.iter().map(|&state| Some(state as f64)));
            lines.push(Line {
                segments: segments(points),
                stroke: Stroke {
                    color: palette(index),
                    dash: DASHES[dash % DASHES.len()],
                    width: 2,
                },
            });
        }
    }
    let legend = names
        .iter()
        .enumerate()
        .map(|(dash, name)| LegendEntry {
            key: Key::Line(Stroke {
                color: INK,
                dash: DASHES[dash % DASHES.len()],
                width: 2,
            }),
            label: name.clone(),
        })
        .collect();
    BreakerLines { lines, legend }
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

//! Throttle slots over time, drawn only when some variant switched a throttle on: for every
//! throttle, the slots truly held (`throttles.<name>.holders`) and what its stored counter says
//! is held (`throttles.<name>.counter`), the maximum of each bucket. Where the counter line
//! runs above the holders line, slots leaked (lost decrements) and the cap is smaller than it
//! looks; where holders run above the cap, a non-atomic counter admitted too many.

use std::collections::BTreeSet;

use outagelab_report::{GaugeKey, RunReport, VariantReport};

use crate::chart::{
    Chart, Dash, LegendEntry, Line, Stroke, palette, segments, y_values, zero_based_axis,
};
use crate::timeline::{bucket_middles_s, one_panel_over_time, style_entry};

/// Makes a throttle's gauge key from its name.
type GaugeOf = fn(String) -> GaugeKey;

/// The two gauges of a throttle, in legend order, with their line style.
const GAUGES: [(GaugeOf, Dash, &str); 2] = [
    (GaugeKey::ThrottleHolders, Dash::Solid, "slots held"),
    (GaugeKey::ThrottleCounter, Dash::Dashed, "counter says held"),
];

pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    let throttles: BTreeSet<&str> = report
        .variants
        .iter()
        .flat_map(|variant| {
            variant
                .summary
                .throttles
                .iter()
                .filter(|(_, throttle)| throttle.enabled)
                .map(|(name, _)| name.as_str())
        })
        .collect();
    if throttles.is_empty() {
        return None;
    }
    // Past the first throttle, lines get thinner so two throttles stay apart.
    let stroke = |variant: usize, throttle: usize, dash: Dash| Stroke {
        color: palette(variant),
        dash,
        width: if throttle == 0 { 2 } else { 1 },
    };
    let mut lines = Vec::new();
    for (variant_index, variant) in report.variants.iter().enumerate() {
        for (throttle_index, throttle) in throttles.iter().enumerate() {
            if !enabled(variant, throttle) {
                continue; // a switched-off throttle holds nothing: a flat zero says nothing
            }
            for (gauge, dash, _) in GAUGES {
                let key = gauge((*throttle).to_owned());
                let Some(values) = variant.series.gauge(&key) else {
                    continue;
                };
                let points = bucket_middles_s(&variant.series)
                    .zip(values.iter().map(|&value| Some(value as f64)));
                lines.push(Line {
                    segments: segments(points),
                    stroke: stroke(variant_index, throttle_index, dash),
                });
            }
        }
    }
    let y = zero_based_axis("slots (max per bucket)", y_values(&lines));
    let mut styles = vec![LegendEntry::heading("Gauges")];
    for (throttle_index, throttle) in throttles.iter().enumerate() {
        for (_, dash, label) in GAUGES {
            let Stroke { width, .. } = stroke(0, throttle_index, dash);
            styles.push(style_entry(
                dash,
                width,
                format!("throttle {throttle}: {label}"),
            ));
        }
    }
    Some(one_panel_over_time(
        report,
        "throttles",
        "throttle slots over time",
        y,
        lines,
        styles,
    ))
}

fn enabled(variant: &VariantReport, throttle: &str) -> bool {
    variant
        .summary
        .throttles
        .get(throttle)
        .is_some_and(|summary| summary.enabled)
}

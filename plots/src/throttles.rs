//! Throttle slots over time, drawn only when some variant switched a throttle on: for every
//! throttle, the slots truly held (`throttles.<name>.holders`) and what its stored counter says
//! is held (`throttles.<name>.counter`), the maximum of each bucket, with the throttle's cap
//! (`inflight_max`) as a reference line. Where the counter line runs above the holders line,
//! slots leaked (lost decrements) and the cap is smaller than it looks; where holders run
//! above the cap, a non-atomic counter admitted too many.

use std::collections::BTreeSet;

use outagelab_report::{GaugeKey, RunReport, VariantReport};

use crate::axes::count_axis;
use crate::chart::{Chart, Dash, segments};
use crate::multiples::{Kind, Limit, OverTime, over_time, parts};
use crate::timeline::gauge_points;

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
    let width = |throttle: usize| if throttle == 0 { 2 } else { 1 };
    let mut kinds = Vec::new();
    for (throttle_index, throttle) in throttles.iter().enumerate() {
        for (_, dash, label) in GAUGES {
            let label = format!("throttle {throttle}: {label}");
            kinds.push(Kind::new(label, dash, width(throttle_index)));
        }
    }
    let parts = parts(report, |variant, part| {
        for (throttle_index, throttle) in throttles.iter().enumerate() {
            let Some(summary) = variant.summary.throttles.get(*throttle) else {
                continue;
            };
            if !summary.enabled {
                continue; // a switched-off throttle holds nothing: a flat zero says nothing
            }
            for (gauge_index, (gauge, _, _)) in GAUGES.into_iter().enumerate() {
                let kind = throttle_index * GAUGES.len() + gauge_index;
                part.push(kind, gauge_line(variant, gauge((*throttle).to_owned())));
            }
            if summary.inflight_max > 0 {
                let what = format!("throttle {throttle}: inflight_max");
                part.limits
                    .push(Limit::new(what, summary.inflight_max as f64));
            }
        }
    });
    let y = |lines: &[_], limits: &[f64]| count_axis("slots (max per bucket)", lines, limits);
    let spec = OverTime {
        name: "throttles",
        title: "throttle slots over time",
        y: &y,
        heading: "Gauges",
        kinds,
    };
    Some(over_time(report, spec, &parts))
}

fn gauge_line(variant: &VariantReport, key: GaugeKey) -> Vec<Vec<(f64, f64)>> {
    match variant.series.gauge(&key) {
        Some(values) => segments(gauge_points(variant, values)),
        None => Vec::new(),
    }
}

//! Latency against a swept parameter: x is each variant's swept value, y is the median (p50,
//! all outcomes) latency of each flow, one line per flow. A cross marks a point where that flow
//! had timeouts, since a median can look fine while requests time out. Drawn only for sweeps.

use std::collections::BTreeSet;

use outagelab_report::{Outcome, RunReport, SweepInfo};

use crate::axes::value_axis;
use crate::chart::{
    Axis, Chart, INK, Key, LegendEntry, Line, Marker, Panel, Stroke, segments, variant_stroke,
    y_values,
};

/// `None` when the report is not a sweep.
pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    let sweep = report.sweep.as_ref()?;
    let mut variants: Vec<(f64, &_)> = report
        .variants
        .iter()
        .filter_map(|variant| Some((variant.sweep_x.filter(|x| x.is_finite())?, variant)))
        .collect();
    variants.sort_by(|a, b| a.0.total_cmp(&b.0));
    let flows: BTreeSet<&str> = variants
        .iter()
        .flat_map(|(_, variant)| variant.summary.flows.keys())
        .map(String::as_str)
        .collect();
    let mut lines = Vec::new();
    let mut markers = Vec::new();
    let mut legend = vec![LegendEntry::heading("Flows: p50 latency, all outcomes")];
    for (index, flow_name) in flows.iter().enumerate() {
        let stroke = variant_stroke(index);
        let color = stroke.color;
        let mut points = Vec::new();
        for (x, variant) in &variants {
            let flow = variant.summary.flows.get(*flow_name);
            let p50 = flow
                .and_then(|flow| flow.latency_ms.get("all"))
                .and_then(|all| all.p50);
            points.push((*x, p50));
            let timeouts = flow
                .and_then(|flow| flow.outcomes.get(Outcome::Timeout.name()))
                .copied();
            if let (Some(y), Some(1..)) = (p50, timeouts) {
                markers.push(Marker { at: (*x, y), color });
            }
        }
        lines.push(Line::new(segments(points), stroke));
        legend.push(LegendEntry {
            key: Key::Line(Stroke { width: 3, ..stroke }),
            label: (*flow_name).to_string(),
        });
    }
    if flows.is_empty() {
        legend.push(LegendEntry::heading("(no flows in this sweep)"));
    }
    legend.push(LegendEntry {
        key: Key::Cross(INK),
        label: "the flow had timeouts at this value".to_string(),
    });
    let y = value_axis("p50 latency (ms)", y_values(&lines));
    let x = x_axis(sweep, variants.iter().map(|(x, _)| *x));
    let mut panel = Panel::new(x, y);
    panel.lines = lines;
    panel.markers = markers;
    Some(Chart::stacked(
        "sweep",
        format!("{}: latency against {}", report.scenario, sweep.label),
        vec![panel],
        legend,
    ))
}

/// The swept values with 5% padding each side, so end points and their crosses stay visible.
fn x_axis(sweep: &SweepInfo, values: impl Iterator<Item = f64>) -> Axis {
    let (min, max) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(min, max), x| {
        (min.min(x), max.max(x))
    });
    let range = if min > max {
        0.0..1.0
    } else if max > min {
        let pad = (max - min) * 0.05;
        min - pad..max + pad
    } else {
        let pad = if min == 0.0 { 1.0 } else { min.abs() * 0.1 };
        min - pad..max + pad
    };
    let description = if sweep.unit.is_empty() {
        sweep.label.clone()
    } else {
        format!("{} ({})", sweep.label, sweep.unit)
    };
    Axis {
        description,
        range,
        log: false,
        categories: false,
    }
}

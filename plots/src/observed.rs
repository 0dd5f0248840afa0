//! What was observed during the incident beside what each variant simulated, drawn only when
//! the file has `[observed]`: one panel per observed series, the observed samples in a thick
//! black dashed line, each variant's simulated metric over the same steps in its colour, and
//! a ring where each variant differs most from what was observed. Both are drawn at the
//! middle of the step a sample stands for, on the incident's clock; fault windows shaded.

use outagelab_report::RunReport;
use outagelab_report::observed::ObservedComparison;

use crate::axes::value_axis;
use crate::chart::{Chart, Dash, Key, LegendEntry, Line, Marker, Panel, Stroke, segments};
use crate::chart::{INK, palette, variant_stroke, y_values};
use crate::timeline::{fault_shading, time_axis};

/// The observed line: near-black, dashed, thicker than a variant's.
const OBSERVED: Stroke = Stroke {
    color: INK,
    dash: Dash::Dashed,
    width: 3,
};

pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    let observed = report.observed.as_ref()?;
    let time = time_axis(report);
    let faults = fault_shading(report, &time, false);
    let panels = observed
        .series
        .iter()
        .map(|series| {
            let mut panel = panel(series);
            panel.x = time.clone();
            panel.bands = faults.bands.clone();
            panel
        })
        .collect();
    let mut legend = vec![LegendEntry::heading("Variants (simulated)")];
    legend.extend(report.variants.iter().enumerate().map(|(index, variant)| {
        let stroke = Stroke {
            width: 3,
            ..variant_stroke(index)
        };
        LegendEntry {
            key: Key::Line(stroke),
            label: variant.name.clone(),
        }
    }));
    legend.push(LegendEntry::heading(format!(
        "Observed ({})",
        observed.file
    )));
    legend.push(LegendEntry {
        key: Key::Line(OBSERVED),
        label: "measured during the incident".to_owned(),
    });
    legend.push(LegendEntry {
        key: Key::Ring(INK),
        label: "where a variant differs most".to_owned(),
    });
    legend.extend(faults.legend);
    Some(Chart::stacked(
        "observed",
        format!("{}: simulated against observed", report.scenario),
        panels,
        legend,
    ))
}

/// One series' panel: the variants' simulated values, the observed ones over them, and the
/// rings. Its x axis is the caller's.
fn panel(series: &ObservedComparison) -> Panel {
    let middle_s = |at_ms: f64| (at_ms - series.step_ms / 2.0) / 1000.0;
    let mut lines = Vec::new();
    let mut markers = Vec::new();
    for (index, fit) in series.variants.iter().enumerate() {
        let points = (series.at_ms.iter().zip(&fit.simulated)).map(|(&at, &v)| (middle_s(at), v));
        lines.push(Line::new(segments(points), variant_stroke(index)));
        let largest = fit.largest_difference_at_ms.and_then(|at| {
            let sample = series.at_ms.iter().position(|&a| a == at)?;
            Some((middle_s(at), fit.simulated[sample]?))
        });
        markers.extend(largest.map(|at| Marker::ring(at, palette(index))));
    }
    let points =
        (series.at_ms.iter().zip(&series.observed)).map(|(&at, &v)| (middle_s(at), Some(v)));
    lines.push(Line::new(segments(points), OBSERVED));
    let unit = if series.unit.is_empty() {
        String::new()
    } else {
        format!(" ({})", series.unit)
    };
    let y = value_axis(format!("{}{unit}", series.metric), y_values(&lines));
    let mut panel = Panel::new(y.clone(), y);
    panel.title = Some(format!(
        "{}: observed {} against simulated {}",
        series.name, series.source, series.metric
    ));
    panel.lines = lines;
    panel.markers = markers;
    panel
}

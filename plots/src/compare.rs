//! Two reports overlaid (`outagelab compare A.json B.json --plot DIR`), from a
//! [`Comparison`]: the first report's lines solid, the second's dashed, one colour per
//! variant.
//!
//! - `compare`: over time, three panels: requests that ended with an error per bucket, then
//!   the p99 and the p50 latency per bucket, with each report's fault windows shaded;
//! - `compare_sweep`, when both reports are sweeps: each flow's p50 latency against the swept
//!   value.

use std::path::{Path, PathBuf};

use outagelab_report::compare::Comparison;

use crate::PlotError;
use crate::axes::{format_number, value_axis, zero_based_axis};
use crate::chart::{
    Axis, Band, Chart, Dash, FAULT_GRAY, INK, Key, LegendEntry, Line, Panel, Stroke, palette,
    segments, y_values,
};

/// Writes the comparison's charts into `dir` (created if missing), each as PNG then SVG:
/// `compare`, then `compare_sweep` for sweeps.
pub fn write_compare_charts(
    comparison: &Comparison,
    dir: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    let mut charts = vec![over_time(comparison)];
    charts.extend(sweep(comparison));
    crate::write_each(&charts, dir)
}

const STYLES: [(Dash, u32); 2] = [(Dash::Solid, 2), (Dash::Dashed, 2)];

fn stroke(variant: usize, report: usize) -> Stroke {
    let (dash, width) = STYLES[report];
    Stroke {
        color: palette(variant),
        dash,
        width,
    }
}

/// The legend's two line styles, named by report.
fn report_styles(comparison: &Comparison) -> Vec<LegendEntry> {
    let mut legend = vec![LegendEntry::heading("Reports")];
    for (report, label) in comparison.labels.iter().enumerate() {
        let (dash, width) = STYLES[report];
        legend.push(LegendEntry {
            key: Key::Line(Stroke {
                color: INK,
                dash,
                width,
            }),
            label: label.clone(),
        });
    }
    legend
}

fn over_time(comparison: &Comparison) -> Chart {
    let width_ms = comparison.bucket_ms;
    let mut errors = Vec::new();
    let mut p99 = Vec::new();
    let mut p50 = Vec::new();
    // Each distinct fault window once: every variant of both reports usually has the same.
    let mut windows: Vec<(String, f64, Option<f64>)> = Vec::new();
    let mut end_ms: f64 = 0.0;
    let mut legend = vec![LegendEntry::heading("Variants")];
    for (index, variant) in comparison.variants.iter().enumerate() {
        let middles: Vec<f64> = (variant.start_ms.iter())
            .map(|start| (start + width_ms / 2.0) / 1000.0)
            .collect();
        end_ms = end_ms.max(variant.start_ms.len() as f64 * width_ms);
        for report in 0..2 {
            let count = |n: &u64| Some(*n as f64);
            errors.push(Line::new(
                segments(
                    middles
                        .iter()
                        .copied()
                        .zip(variant.errors[report].iter().map(count)),
                ),
                stroke(index, report),
            ));
            for (lines, values) in [
                (&mut p99, &variant.p99_ms[report]),
                (&mut p50, &variant.p50_ms[report]),
            ] {
                lines.push(Line::new(
                    segments(middles.iter().copied().zip(values.iter().copied())),
                    stroke(index, report),
                ));
            }
            for fault in &variant.faults[report] {
                end_ms = end_ms.max(fault.end_ms.unwrap_or(fault.start_ms));
                let window = (fault.name.clone(), fault.start_ms, fault.end_ms);
                if !windows.contains(&window) {
                    windows.push(window);
                }
            }
        }
        legend.push(LegendEntry {
            key: Key::Line(Stroke {
                color: palette(index),
                dash: Dash::Solid,
                width: 3,
            }),
            label: variant.name.clone(),
        });
    }
    legend.extend(report_styles(comparison));
    let axis_end_ms = if end_ms > 0.0 { end_ms } else { 1000.0 };
    let bands: Vec<Band> = windows
        .iter()
        .map(|(name, start_ms, end_ms)| band(name, *start_ms, end_ms.unwrap_or(axis_end_ms)))
        .collect();
    if !bands.is_empty() {
        legend.push(LegendEntry::heading("Faults (shaded, each report's)"));
        legend.push(LegendEntry {
            key: Key::Band {
                color: FAULT_GRAY,
                opacity: 0.12,
            },
            label: "a fault window".to_owned(),
        });
    }
    let time = Axis {
        description: "time (s)".to_owned(),
        range: 0.0..if end_ms > 0.0 { end_ms / 1000.0 } else { 1.0 },
        log: false,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band: None,
    };
    let panel = |y: Axis, lines: Vec<Line>| Panel {
        bands: bands.clone(),
        lines,
        ..Panel::new(time.clone(), y)
    };
    let errors_axis = zero_based_axis(
        format!("errors per {} ms", format_number(width_ms)),
        y_values(&errors),
    );
    let p99_axis = value_axis("p99 latency (ms)", y_values(&p99));
    let p50_axis = value_axis("p50 latency (ms)", y_values(&p50));
    Chart::stacked(
        "compare",
        format!(
            "{}: {} against {}",
            comparison.scenarios[0], comparison.labels[0], comparison.labels[1]
        ),
        vec![
            panel(errors_axis, errors),
            panel(p99_axis, p99),
            panel(p50_axis, p50),
        ],
        legend,
    )
}

/// A fault's window, labelled with its name; one with no end lasts to the end of the axis.
fn band(name: &str, start_ms: f64, end_ms: f64) -> Band {
    let start_s = start_ms / 1000.0;
    let end_s = end_ms / 1000.0;
    Band {
        edges: true,
        label: Some(name.to_owned()),
        ..Band::full_height(start_s..end_s.max(start_s + 0.005), FAULT_GRAY, 0.12)
    }
}

/// `None` unless every variant has a swept value in both reports.
fn sweep(comparison: &Comparison) -> Option<Chart> {
    let sweep = comparison.sweep.as_ref()?;
    let mut points: Vec<(f64, &_)> = (comparison.variants.iter())
        .map(|variant| Some((variant.sweep_x[0].filter(|x| x.is_finite())?, variant)))
        .collect::<Option<_>>()?;
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let flows: std::collections::BTreeSet<&String> = (points.iter())
        .flat_map(|(_, variant)| variant.flows.keys())
        .collect();
    let mut lines = Vec::new();
    let mut legend = vec![LegendEntry::heading("Flows: p50 latency, all outcomes")];
    for (index, flow) in flows.iter().enumerate() {
        for report in 0..2 {
            let values = points.iter().map(|(x, variant)| {
                let p50 = variant.flows.get(*flow).and_then(|pair| pair[report].p50);
                (*x, p50)
            });
            lines.push(Line::new(segments(values), stroke(index, report)));
        }
        legend.push(LegendEntry {
            key: Key::Line(Stroke {
                color: palette(index),
                dash: Dash::Solid,
                width: 3,
            }),
            label: (*flow).clone(),
        });
    }
    legend.extend(report_styles(comparison));
    let (min, max) = (points.first()?.0, points.last()?.0);
    let pad = if max > min { (max - min) * 0.05 } else { 1.0 };
    let description = if sweep.unit.is_empty() {
        sweep.label.clone()
    } else {
        format!("{} ({})", sweep.label, sweep.unit)
    };
    let x = Axis {
        description,
        range: min - pad..max + pad,
        log: false,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band: None,
    };
    let y = value_axis("p50 latency (ms)", y_values(&lines));
    Some(Chart::stacked(
        "compare_sweep",
        format!(
            "{}: latency against {}, {} and {}",
            comparison.scenarios[0], sweep.label, comparison.labels[0], comparison.labels[1]
        ),
        vec![Panel {
            lines,
            ..Panel::new(x, y)
        }],
        legend,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use outagelab_report::compare::Runs;

    /// A one-variant sweep report of `errors` per 100 ms bucket, written as its JSON.
    fn runs(errors: &[u64], sweep_x: f64) -> Runs {
        let len = errors.len();
        let list =
            |item: &dyn Fn(usize) -> String| (0..len).map(item).collect::<Vec<_>>().join(", ");
        let text = format!(
            r#"{{"scenario": "s",
                "sweep": {{"label": "K", "parameter": "loads.l.count", "unit": ""}},
                "variants": [{{"name": "v", "sweep_x": {sweep_x},
                    "series": {{"bucket_ms": 100.0, "start_ms": [{starts}],
                        "outcomes": {{"ok": [{ok}], "timeout": [{errors}]}},
                        "p50_ms": [{p50}], "p99_ms": [{p99}]}},
                    "faults": [{{"name": "pause", "start_ms": 100.0, "end_ms": 200.0}}],
                    "summary": {{"flows": {{"get": {{"latency_ms": {{"all":
                        {{"count": 3, "p50": 1.0, "p99": 2.0, "max": 2.0}}}}}}}}}}}}]}}"#,
            starts = list(&|i| format!("{}", i * 100)),
            ok = list(&|_| "1".to_owned()),
            errors = list(&|i| errors[i].to_string()),
            p50 = list(&|_| "1.0".to_owned()),
            p99 = list(&|_| "2.0".to_owned()),
        );
        Runs::from_json(&text).unwrap()
    }

    #[test]
    fn the_overlay_draws_both_reports_in_each_panel_and_renders_the_same_twice() {
        let (a, b) = (runs(&[0, 3, 1], 10.0), runs(&[0, 2, 2, 0], 10.0));
        let comparison =
            Comparison::of(["sim".to_owned(), "live".to_owned()], &a, &b, None).unwrap();
        let chart = over_time(&comparison);
        assert_eq!(chart.panels.len(), 3);
        for panel in &chart.panels {
            assert_eq!(panel.lines.len(), 2, "one line per report");
            assert_eq!(panel.lines[0].stroke.dash, Dash::Solid);
            assert_eq!(panel.lines[1].stroke.dash, Dash::Dashed);
            assert_eq!(
                panel.bands.len(),
                1,
                "the same fault in both reports, shaded once"
            );
        }
        assert_eq!(chart.panels[0].lines[1].segments[0].len(), 4);
        assert!(crate::embedded_font_registered());
        let once = crate::render::svg(&chart).unwrap();
        assert_eq!(once, crate::render::svg(&over_time(&comparison)).unwrap());
        let sweep = sweep(&comparison).expect("both are sweeps");
        assert_eq!(sweep.name, "compare_sweep");
        assert_eq!(sweep.panels[0].lines.len(), 2);
    }

    /// `compare` shaded and labelled each fault once per variant and report: six stacked
    /// bands and six "redis-dead" for three variants whose Redis died from the start.
    #[test]
    fn each_fault_window_is_shaded_and_labelled_once() {
        let (a, b) = (runs(&[0, 3, 1], 10.0), runs(&[0, 2, 2, 0], 10.0));
        let mut comparison =
            Comparison::of(["sim".to_owned(), "live".to_owned()], &a, &b, None).unwrap();
        let first = comparison.variants[0].clone();
        for name in ["v2", "v3"] {
            let mut variant = first.clone();
            variant.name = name.to_owned();
            comparison.variants.push(variant);
        }
        let chart = over_time(&comparison);
        for panel in &chart.panels {
            let labels: Vec<&str> = panel
                .bands
                .iter()
                .filter_map(|b| b.label.as_deref())
                .collect();
            assert_eq!(labels, ["pause"], "once for 3 variants of 2 reports");
        }
        // A window that differs between the reports is shaded for each.
        comparison.variants[1].faults[1][0].start_ms = 150.0;
        let chart = over_time(&comparison);
        assert_eq!(chart.panels[0].bands.len(), 2);
    }
}

//! What the three charts over time (outage, latency, concurrency) share: the time axis, the
//! shading of fault windows, and the variant legend.

use outagelab_report::{FaultWindow, RunReport, Series};

use crate::chart::{
    Axis, Band, Chart, Dash, FAULT_GRAY, INK, Key, LegendEntry, Line, Panel, Stroke, format_number,
    palette,
};

/// Seconds from 0 to the latest moment any variant reports (its end, its last bucket, a fault
/// edge); `0..1` when there is nothing, e.g. a run that ended at 0 ms.
pub(crate) fn time_axis(report: &RunReport) -> Axis {
    let end_ms = report
        .variants
        .iter()
        .flat_map(|variant| {
            let series = &variant.series;
            let series_end = series
                .start_ms
                .last()
                .map(|start| start + bucket_ms(series));
            let fault_edges = variant
                .faults
                .iter()
                .flat_map(|fault| [Some(fault.start_ms), fault.end_ms]);
            [Some(variant.end_ms), series_end]
                .into_iter()
                .chain(fault_edges)
                .flatten()
        })
        .filter(|ms| ms.is_finite())
        .fold(0.0_f64, f64::max);
    let end_s = if end_ms > 0.0 { end_ms / 1000.0 } else { 1.0 };
    Axis {
        description: "time (s)".to_string(),
        range: 0.0..end_s,
        log: false,
    }
}

/// The bucket width, or 0 when the report holds a nonsensical one.
pub(crate) fn bucket_ms(series: &Series) -> f64 {
    if series.bucket_ms.is_finite() && series.bucket_ms > 0.0 {
        series.bucket_ms
    } else {
        0.0
    }
}

/// The middle of each bucket, in seconds: where a bucket's value is plotted.
pub(crate) fn bucket_middles_s(series: &Series) -> impl Iterator<Item = f64> + '_ {
    let half_ms = bucket_ms(series) / 2.0;
    series
        .start_ms
        .iter()
        .map(move |start_ms| (start_ms + half_ms) / 1000.0)
}

/// One legend line per variant, in its palette colour.
pub(crate) fn variant_legend(report: &RunReport) -> Vec<LegendEntry> {
    let mut legend = vec![LegendEntry::heading("Variants")];
    legend.extend(
        report
            .variants
            .iter()
            .enumerate()
            .map(|(index, variant)| LegendEntry {
                key: Key::Line(Stroke {
                    color: palette(index),
                    dash: Dash::Solid,
                    width: 3,
                }),
                label: variant.name.clone(),
            }),
    );
    legend
}

/// Shaded fault windows and their legend.
pub(crate) struct FaultShading {
    pub bands: Vec<Band>,
    pub legend: Vec<LegendEntry>,
}

const SHARED_OPACITY: f64 = 0.18;

/// When every variant had the same fault windows they are shaded once, in gray, and each is
/// named in the legend with its times. Otherwise each variant's windows are shaded lightly in
/// that variant's colour and outlined in it, and the legend names the distinct faults.
pub(crate) fn fault_shading(report: &RunReport, time: &Axis) -> FaultShading {
    let Some(first) = report.variants.first() else {
        return FaultShading {
            bands: Vec::new(),
            legend: Vec::new(),
        };
    };
    if report
        .variants
        .iter()
        .all(|variant| variant.faults.is_empty())
    {
        return FaultShading {
            bands: Vec::new(),
            legend: Vec::new(),
        };
    }
    let min_width_s = (time.range.end - time.range.start) * 0.003;
    let band = |fault: &FaultWindow, run_end_ms: f64, color, opacity, edges| {
        let start_s = fault.start_ms / 1000.0;
        let end_s = fault.end_ms.unwrap_or(run_end_ms) / 1000.0;
        let end_s = if end_s.is_finite() {
            end_s.max(start_s + min_width_s)
        } else {
            time.range.end
        };
        Band {
            x: start_s..end_s,
            color,
            opacity,
            edges,
        }
    };
    let shared = report
        .variants
        .iter()
        .all(|variant| same_windows(&variant.faults, &first.faults));
    if shared {
        let axis_end_ms = time.range.end * 1000.0;
        let mut legend = vec![LegendEntry::heading("Faults (shaded)")];
        legend.extend(first.faults.iter().map(|fault| LegendEntry {
            key: Key::Band {
                color: FAULT_GRAY,
                opacity: SHARED_OPACITY,
            },
            label: format!("{}, {}", describe(fault), times(fault)),
        }));
        let bands = first
            .faults
            .iter()
            .map(|fault| band(fault, axis_end_ms, FAULT_GRAY, SHARED_OPACITY, false))
            .collect();
        return FaultShading { bands, legend };
    }
    // Overlapping windows of many variants add up: the more variants, the lighter each.
    let with_faults = report
        .variants
        .iter()
        .filter(|variant| !variant.faults.is_empty())
        .count();
    let opacity = (0.3 / with_faults as f64).clamp(0.04, 0.12);
    let mut bands = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (index, variant) in report.variants.iter().enumerate() {
        for fault in &variant.faults {
            bands.push(band(fault, variant.end_ms, palette(index), opacity, true));
            let name = describe(fault);
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let mut legend = vec![LegendEntry::heading(
        "Faults (shaded in each variant's colour)",
    )];
    legend.extend(names.into_iter().map(|label| LegendEntry {
        key: Key::Band {
            color: FAULT_GRAY,
            opacity: SHARED_OPACITY,
        },
        label,
    }));
    FaultShading { bands, legend }
}

fn same_windows(a: &[FaultWindow], b: &[FaultWindow]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            (&a.name, &a.target, &a.kind, a.start_ms, a.end_ms)
                == (&b.name, &b.target, &b.kind, b.start_ms, b.end_ms)
        })
}

fn describe(fault: &FaultWindow) -> String {
    format!("{}: {} on {}", fault.name, fault.kind, fault.target)
}

fn times(fault: &FaultWindow) -> String {
    let start = format_number(fault.start_ms / 1000.0);
    match fault.end_ms {
        // An instant (a client kill): a window of no width.
        Some(end_ms) if end_ms <= fault.start_ms => format!("at {start} s"),
        Some(end_ms) => format!("{start}-{} s", format_number(end_ms / 1000.0)),
        None => format!("from {start} s to the end"),
    }
}

/// A legend entry for a line style (drawn in ink: the colour says the variant).
pub(crate) fn style_entry(dash: Dash, width: u32, label: String) -> LegendEntry {
    LegendEntry {
        key: Key::Line(Stroke {
            color: INK,
            dash,
            width,
        }),
        label,
    }
}

/// A chart of one panel over time: `lines` against `y` with the fault windows shaded; the
/// legend lists the variants, then `styles` (what each line style means), then the faults.
pub(crate) fn one_panel_over_time(
    report: &RunReport,
    name: &'static str,
    title: &str,
    y: Axis,
    lines: Vec<Line>,
    styles: Vec<LegendEntry>,
) -> Chart {
    let time = time_axis(report);
    let faults = fault_shading(report, &time);
    let mut legend = variant_legend(report);
    legend.extend(styles);
    legend.extend(faults.legend);
    Chart {
        name,
        title: format!("{}: {title}", report.scenario),
        panels: vec![Panel {
            x: time,
            y,
            bands: faults.bands,
            lines,
            markers: Vec::new(),
        }],
        legend,
    }
}

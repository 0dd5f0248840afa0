//! One run's figures against a swept parameter; x is each variant's swept value. With chosen
//! metrics (`--metric`, else `[report] metrics`), one panel per metric (the first four), one
//! line per variant along the sweep, a variant the sweep skips as a dashed level. Without,
//! the median (p50, all outcomes) latency of each flow, one line per flow, and a cross where
//! that flow had timeouts, since a median can look fine while requests time out. Drawn only
//! for sweeps.

use std::collections::BTreeSet;

use outagelab_report::{Outcome, RunReport, SweepInfo};

use crate::axes::value_axis;
use crate::chart::{
    Axis, Chart, Dash, INK, Key, LegendEntry, Line, Marker, Panel, Stroke, segments,
    variant_stroke, y_values,
};
use crate::study::{PANELS_MAX, metric_description};

/// `None` when the report is not a sweep. `metrics` are the run's chosen metrics (summary
/// paths); empty draws each flow's median latency.
pub(crate) fn chart(report: &RunReport, metrics: &[String]) -> Option<Chart> {
    let sweep = report.sweep.as_ref()?;
    if !metrics.is_empty() {
        return Some(metrics_chart(report, sweep, metrics));
    }
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
                markers.push(Marker::cross((*x, y), color));
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

/// The chosen metrics against the swept value, a panel each (a metric no variant has a value
/// of is an empty panel that says so, not left out: the reader chose it).
fn metrics_chart(report: &RunReport, sweep: &SweepInfo, metrics: &[String]) -> Chart {
    let values: Vec<_> = (report.variants.iter())
        .map(|variant| outagelab_report::study::flatten(&variant.summary))
        .collect();
    let lines_of = series(report, &sweep.label);
    let xs = || (report.variants.iter()).filter_map(|v| v.sweep_x.filter(|x| x.is_finite()));
    let swept_range = xs().fold(None, |range: Option<(f64, f64)>, x| {
        Some(range.map_or((x, x), |(low, high)| (low.min(x), high.max(x))))
    });
    let level =
        |members: &[usize]| matches!(members, [index] if report.variants[*index].sweep_x.is_none());
    let mut panels = Vec::new();
    for metric in metrics.iter().take(PANELS_MAX) {
        let mut lines = Vec::new();
        for (s, (_, members)) in lines_of.iter().enumerate() {
            let stroke = variant_stroke(s);
            let value = |index: usize| values[index].get(metric).copied();
            if level(members) {
                if let (Some((low, high)), Some(y)) = (swept_range, value(members[0])) {
                    let dashed = Stroke {
                        dash: Dash::Dashed,
                        ..stroke
                    };
                    lines.push(Line::new(
                        segments([(low, Some(y)), (high, Some(y))]),
                        dashed,
                    ));
                }
                continue;
            }
            let points = (members.iter())
                .filter_map(|&index| Some((report.variants[index].sweep_x?, value(index))));
            lines.push(Line::new(segments(points), stroke));
        }
        let y = value_axis(metric_description(metric), y_values(&lines));
        let mut panel = Panel::new(x_axis(sweep, xs()), y);
        panel.lines = lines;
        panels.push(panel);
    }
    let mut legend = vec![LegendEntry::heading(format!(
        "one run, seed {}: the chosen metrics",
        report.seed
    ))];
    for (s, (label, members)) in lines_of.iter().enumerate() {
        legend.push(series_entry(s, label, level(members)));
    }
    Chart::stacked(
        "sweep",
        format!(
            "{}: the chosen metrics against {}",
            report.scenario, sweep.label
        ),
        panels,
        legend,
    )
}

/// The legend entry of line `index` along a sweep: its stroke, dashed and "(not swept)" for a
/// variant the sweep skips (drawn as a level).
pub(crate) fn series_entry(index: usize, label: &str, level: bool) -> LegendEntry {
    LegendEntry {
        key: Key::Line(Stroke {
            width: 3,
            dash: if level { Dash::Dashed } else { Dash::Solid },
            ..variant_stroke(index)
        }),
        label: if level {
            format!("{label} (not swept)")
        } else {
            label.to_owned()
        },
    }
}

/// The report's variants grouped into lines: those with the same name once the sweep's
/// `label=value` is taken out (`polly-v8 / open=1s` is on the line `polly-v8`), each in x
/// order; a variant the sweep skips is a line of its own.
fn series(report: &RunReport, label: &str) -> Vec<(String, Vec<usize>)> {
    let mut all: Vec<(String, Vec<usize>)> = Vec::new();
    for (index, variant) in report.variants.iter().enumerate() {
        let name = series_label(&variant.name, label);
        match all.iter_mut().find(|(other, _)| *other == name) {
            Some((_, members)) => members.push(index),
            None => all.push((name, vec![index])),
        }
    }
    for (_, members) in &mut all {
        let x = |i: usize| report.variants[i].sweep_x.unwrap_or(f64::NAN);
        members.sort_by(|&a, &b| x(a).total_cmp(&x(b)));
    }
    all
}

/// A swept variant's name without its `axis=value` part: `base / a=1, b=2` is `base / b=2`
/// on the axis `a`; `all` when nothing is left.
pub(crate) fn series_label(name: &str, axis: &str) -> String {
    let swept = format!("{axis}=");
    let (base, rest) = match name.split_once(" / ") {
        Some((base, rest)) => (base, rest),
        None => ("", name),
    };
    let others: Vec<&str> = (rest.split(", "))
        .filter(|part| !part.starts_with(&swept))
        .collect();
    let others = others.join(", ");
    let parts: Vec<&str> = [base, others.as_str()]
        .into_iter()
        .filter(|part| !part.is_empty())
        .collect();
    if parts.is_empty() {
        "all".to_owned()
    } else {
        parts.join(" / ")
    }
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
    if !sweep.values.is_empty() {
        return words_axis(description, sweep);
    }
    Axis {
        description,
        range,
        log: false,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band: None,
    }
}

/// A sweep over words (`sweep_x` is each value's index in the list): one tick per value,
/// labelled with its name, and half a step of room each side so the end points stay whole.
pub(crate) fn words_axis(description: String, sweep: &SweepInfo) -> Axis {
    Axis {
        description,
        range: -0.5..sweep.values.len() as f64 - 0.5,
        log: false,
        categories: true,
        category_names: sweep.values.clone(),
        clock_start_unix_ms: None,
        zero_band: None,
    }
}

//! Concurrency over time: for every database (`databases.<name>.concurrency`, queries running
//! at once, and `databases.<name>.lock_waiting`, queries waiting for an advisory lock, if any
//! query ever waited) and every bulkhead (`bulkheads.<name>.in_use`, permits held), the maximum
//! reached in each bucket. Colour says the variant, line style says the gauge; fault windows
//! shaded.

use std::collections::BTreeSet;

use outagelab_report::RunReport;

use crate::chart::{
    Chart, Dash, LegendEntry, Line, Stroke, palette, segments, y_values, zero_based_axis,
};
use crate::timeline::{bucket_middles_s, one_panel_over_time, style_entry};

const DASHES: [Dash; 3] = [Dash::Solid, Dash::Dashed, Dash::Dotted];

pub(crate) fn chart(report: &RunReport) -> Chart {
    let gauges: BTreeSet<&str> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.gauges_max.keys())
        .map(String::as_str)
        .filter(|key| gauge_label(key).is_some())
        .filter(|key| !is_idle_lock_gauge(report, key))
        .collect();
    let stroke = |variant: usize, gauge: usize| Stroke {
        color: palette(variant),
        dash: DASHES[gauge % DASHES.len()],
        // Past the three dash styles, gauges repeat a style with a thinner line.
        width: if gauge < DASHES.len() { 2 } else { 1 },
    };
    let mut lines = Vec::new();
    for (variant_index, variant) in report.variants.iter().enumerate() {
        let series = &variant.series;
        for (gauge_index, gauge) in gauges.iter().enumerate() {
            let Some(values) = series.gauges_max.get(*gauge) else {
                continue;
            };
            if !gauge_enabled(variant, gauge) {
                continue; // a switched-off bulkhead holds no permits: a flat zero says nothing
            }
            let points =
                bucket_middles_s(series).zip(values.iter().map(|&value| Some(value as f64)));
            lines.push(Line {
                segments: segments(points),
                stroke: stroke(variant_index, gauge_index),
            });
        }
    }
    let y = zero_based_axis("in use at once (max per bucket)", y_values(&lines));
    let mut styles = vec![LegendEntry::heading("Gauges")];
    if gauges.is_empty() {
        styles.push(LegendEntry::heading(
            "(no database or bulkhead gauges in this run)",
        ));
    }
    for (gauge_index, gauge) in gauges.iter().enumerate() {
        let Stroke { dash, width, .. } = stroke(0, gauge_index);
        styles.push(style_entry(
            dash,
            width,
            gauge_label(gauge).unwrap_or_default(),
        ));
    }
    one_panel_over_time(
        report,
        "concurrency",
        "concurrency over time",
        y,
        lines,
        styles,
    )
}

/// Whether the resource behind a gauge was switched on in this variant.
fn gauge_enabled(variant: &outagelab_report::VariantReport, key: &str) -> bool {
    key.strip_prefix("bulkheads.")
        .and_then(|rest| rest.strip_suffix(".in_use"))
        .and_then(|name| variant.summary.bulkheads.get(name))
        .is_none_or(|bulkhead| bulkhead.enabled)
}

/// A database's lock-waiting gauge when no variant ever had a query wait for a lock: every
/// database has one, and a flat zero line for each would only crowd the chart.
fn is_idle_lock_gauge(report: &RunReport, key: &str) -> bool {
    let Some(name) = key
        .strip_prefix("databases.")
        .and_then(|rest| rest.strip_suffix(".lock_waiting"))
    else {
        return false;
    };
    report.variants.iter().all(|variant| {
        variant
            .summary
            .databases
            .get(name)
            .is_none_or(|database| database.peak_lock_waiting == 0)
    })
}

/// The legend text of a gauge this chart shows; `None` for the gauges it leaves out.
fn gauge_label(key: &str) -> Option<String> {
    if let Some(name) = key
        .strip_prefix("databases.")
        .and_then(|rest| rest.strip_suffix(".concurrency"))
    {
        return Some(format!("database {name}: queries running"));
    }
    if let Some(name) = key
        .strip_prefix("databases.")
        .and_then(|rest| rest.strip_suffix(".lock_waiting"))
    {
        return Some(format!("database {name}: waiting for a lock"));
    }
    let name = key
        .strip_prefix("bulkheads.")
        .and_then(|rest| rest.strip_suffix(".in_use"))?;
    Some(format!("bulkhead {name}: permits in use"))
}

//! Concurrency over time: for every database (`databases.<name>.concurrency`, queries running
//! at once, and `databases.<name>.lock_waiting`, queries waiting for an advisory lock, if any
//! query ever waited) and every bulkhead (`bulkheads.<name>.in_use`, permits held), the maximum
//! reached in each bucket. Colour says the variant, line style says the gauge; fault windows
//! shaded.

use std::collections::BTreeMap;

use outagelab_report::{GaugeKey, RunReport};

use crate::chart::{
    Chart, LegendEntry, Line, Stroke, segments, variant_line_stroke, y_values, zero_based_axis,
};
use crate::timeline::{bucket_middles_s, one_panel_over_time, style_entry};

pub(crate) fn chart(report: &RunReport) -> Chart {
    // In name order (the order lines get their dash), as the series are stored.
    let gauges: Vec<GaugeKey> = report
        .variants
        .iter()
        .flat_map(|variant| {
            variant
                .series
                .gauges()
                .map(|(key, _)| (key.to_string(), key))
        })
        .filter(|(_, key)| gauge_label(key).is_some())
        .filter(|(_, key)| !is_idle_lock_gauge(report, key))
        .collect::<BTreeMap<String, GaugeKey>>()
        .into_values()
        .collect();
    let stroke = variant_line_stroke;
    let mut lines = Vec::new();
    for (variant_index, variant) in report.variants.iter().enumerate() {
        let series = &variant.series;
        for (gauge_index, gauge) in gauges.iter().enumerate() {
            let Some(values) = series.gauge(gauge) else {
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
fn gauge_enabled(variant: &outagelab_report::VariantReport, key: &GaugeKey) -> bool {
    match key {
        GaugeKey::BulkheadInUse(name) => variant
            .summary
            .bulkheads
            .get(name)
            .is_none_or(|bulkhead| bulkhead.enabled),
        _ => true,
    }
}

/// A database's lock-waiting gauge when no variant ever had a query wait for a lock: every
/// database has one, and a flat zero line for each would only crowd the chart.
fn is_idle_lock_gauge(report: &RunReport, key: &GaugeKey) -> bool {
    let GaugeKey::DatabaseLockWaiting(name) = key else {
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
fn gauge_label(key: &GaugeKey) -> Option<String> {
    match key {
        GaugeKey::DatabaseConcurrency(name) => Some(format!("database {name}: queries running")),
        GaugeKey::DatabaseLockWaiting(name) => Some(format!("database {name}: waiting for a lock")),
        GaugeKey::DatabaseConnectionWaiting(name) => {
            Some(format!("database {name}: waiting for a connection"))
        }
        GaugeKey::BulkheadInUse(name) => Some(format!("bulkhead {name}: permits in use")),
        _ => None,
    }
}

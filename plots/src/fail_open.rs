//! Fail-open over time, drawn only when something failed open: for every control that can
//! let requests through unchecked (`connections.<name>.fail_open`: steps on a connection that
//! failed and went on; `rate_limits.<name>.fail_open_admitted`: checks admitted because the
//! limiter's store was unreachable), how many per second. Outcomes alone hide this: a request
//! that failed open ends `ok`. Colour says the variant, line style says the control; fault
//! windows shaded.

use std::collections::BTreeMap;

use outagelab_report::{CountKey, RunReport};

use crate::chart::{
    Chart, LegendEntry, Line, Stroke, segments, variant_line_stroke, y_values, zero_based_axis,
};
use crate::timeline::{bucket_middles_s, bucket_ms, one_panel_over_time, style_entry};

pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    // Only the controls that failed open in some variant: the others are flat zero lines.
    // In name order (the order lines get their dash), as the series are stored.
    let controls: Vec<CountKey> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.counters())
        .filter(|(key, values)| label(key).is_some() && values.iter().any(|&v| v > 0))
        .map(|(key, _)| (key.to_string(), key))
        .collect::<BTreeMap<String, CountKey>>()
        .into_values()
        .collect();
    if controls.is_empty() {
        return None;
    }
    let stroke = variant_line_stroke;
    let mut lines = Vec::new();
    for (variant_index, variant) in report.variants.iter().enumerate() {
        let series = &variant.series;
        let bucket_s = bucket_ms(series) / 1000.0;
        if bucket_s <= 0.0 {
            continue;
        }
        for (control_index, control) in controls.iter().enumerate() {
            let Some(values) = series.count(control) else {
                continue;
            };
            let rates = values.iter().map(|&count| Some(count as f64 / bucket_s));
            lines.push(Line {
                segments: segments(bucket_middles_s(series).zip(rates)),
                stroke: stroke(variant_index, control_index),
            });
        }
    }
    let y = zero_based_axis("let through unchecked per second", y_values(&lines));
    let mut styles = vec![LegendEntry::heading("Controls")];
    for (control_index, control) in controls.iter().enumerate() {
        let Stroke { dash, width, .. } = stroke(0, control_index);
        styles.push(style_entry(dash, width, label(control).unwrap_or_default()));
    }
    Some(one_panel_over_time(
        report,
        "fail_open",
        "fail-open over time",
        y,
        lines,
        styles,
    ))
}

/// The legend text of a count this chart shows; `None` for counts it leaves out.
fn label(key: &CountKey) -> Option<String> {
    match key {
        CountKey::ConnectionFailOpen(name) => Some(format!("connection {name}: steps failed open")),
        CountKey::RateLimitFailOpenAdmitted(name) => {
            Some(format!("rate limit {name}: admitted unchecked"))
        }
        CountKey::ServerEvictedKeys(_)
        | CountKey::ServerExpiredKeys(_)
        | CountKey::RejectedAttempts => None,
    }
}

//! Breaker state as lanes of coloured spans, under the outage curve: one lane per variant
//! and breaker, for every breaker that left the closed state in some variant (a variant that
//! switched it off has no lane). Open is red, half-open amber, closed the lane's light gray;
//! each span covers its buckets whole (the worst state a bucket saw), so a state change is a
//! step at a bucket's edge, not a slope. Each lane is named at its left.

use std::collections::BTreeSet;

use outagelab_report::{GaugeKey, RunReport};
use plotters::style::RGBColor;

use crate::chart::{Axis, Band, Key, LegendEntry, Note, Panel};
use crate::timeline::covered_ms;

const OPEN: RGBColor = RGBColor(214, 39, 40);
const HALF_OPEN: RGBColor = RGBColor(255, 165, 0);
const CLOSED: RGBColor = RGBColor(120, 120, 120);
const STATE_OPACITY: f64 = 0.6;
const CLOSED_OPACITY: f64 = 0.08;
/// Pixels per lane, and around them (the panel's margin and x-axis).
const LANE_HEIGHT_PX: u32 = 20;
const AROUND_LANES_PX: u32 = 80;

pub(crate) struct Lanes {
    /// `None` when no breaker left the closed state.
    pub panel: Option<Panel>,
    pub legend: Vec<LegendEntry>,
}

pub(crate) fn lanes(report: &RunReport, time: &Axis) -> Lanes {
    let left_closed = |values: &[u64]| values.iter().any(|&state| state > 0);
    let names: BTreeSet<String> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.gauges())
        .filter_map(|(key, values)| match key {
            GaugeKey::BreakerState(name) if left_closed(values) => Some(name),
            _ => None,
        })
        .collect();
    let mut lanes = Vec::new();
    for variant in &report.variants {
        for name in &names {
            let enabled = variant.summary.breakers.get(name).is_none_or(|b| b.enabled);
            let key = GaugeKey::BreakerState(name.clone());
            if let (true, Some(values)) = (enabled, variant.series.gauge(&key)) {
                let label = if names.len() == 1 {
                    variant.name.clone()
                } else {
                    format!("{}: {name}", variant.name)
                };
                lanes.push((label, variant, values));
            }
        }
    }
    if lanes.is_empty() {
        return Lanes {
            panel: None,
            legend: Vec::new(),
        };
    }
    let count = lanes.len();
    let description = match names.iter().next() {
        Some(name) if names.len() == 1 => format!("breaker {name}"),
        _ => "breakers".to_owned(),
    };
    let y = Axis {
        description,
        range: 0.0..count as f64,
        log: false,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band: None,
    };
    let mut panel = Panel::new(time.clone(), y);
    panel.y_ticks = false;
    panel.wide = true;
    panel.height_px = Some(count as u32 * LANE_HEIGHT_PX + AROUND_LANES_PX);
    for (index, (label, variant, values)) in lanes.into_iter().enumerate() {
        // The first lane on top.
        let bottom = (count - 1 - index) as f64;
        let rows = bottom + 0.12..bottom + 0.88;
        let band = |x: std::ops::Range<f64>, color, opacity| Band {
            y: Some(rows.clone()),
            ..Band::full_height(x, color, opacity)
        };
        panel
            .bands
            .push(band(0.0..variant.end_ms / 1000.0, CLOSED, CLOSED_OPACITY));
        // Runs of buckets in the same state that is not closed, each from its first bucket's
        // start to its last bucket's end.
        let mut spans: Vec<(u64, f64, f64)> = Vec::new();
        for ((start, end), &state) in covered_ms(&variant.series, variant.end_ms).zip(values) {
            match spans.last_mut() {
                Some((last, _, until)) if *last == state && *until == start => *until = end,
                _ if state > 0 => spans.push((state, start, end)),
                _ => {}
            }
        }
        for (state, from, until) in spans {
            let color = if state >= 2 { OPEN } else { HALF_OPEN };
            let x = from / 1000.0..until / 1000.0;
            panel.bands.push(band(x, color, STATE_OPACITY));
        }
        let left = time.range.start + (time.range.end - time.range.start) * 0.005;
        panel.notes.push(Note {
            at: (left, bottom + 0.5),
            text: label,
        });
    }
    let entry = |color, label: &str| LegendEntry {
        key: Key::Band {
            color,
            opacity: STATE_OPACITY,
        },
        label: label.to_owned(),
    };
    let legend = vec![
        LegendEntry::heading("Breaker state (worst of each bucket)"),
        entry(OPEN, "open"),
        entry(HALF_OPEN, "half-open"),
    ];
    Lanes {
        panel: Some(panel),
        legend,
    }
}

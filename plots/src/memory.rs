//! Redis memory over time, drawn only when some variant's server has a memory limit (from its
//! file or a `maxmemory` fault): each server's `used_memory` (the most it reached in each
//! bucket), in MiB. Colour says the variant, line style says the server; fault windows shaded.

use std::collections::BTreeSet;

use outagelab_report::{GaugeKey, RunReport};

use crate::chart::{
    Chart, LegendEntry, Line, Stroke, segments, variant_line_stroke, y_values, zero_based_axis,
};
use crate::timeline::{bucket_middles_s, one_panel_over_time, style_entry};

const MIB: f64 = 1024.0 * 1024.0;

pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    // The servers that had a limit in some variant, in name order.
    let servers: BTreeSet<&str> = report
        .variants
        .iter()
        .flat_map(|variant| &variant.summary.servers)
        .filter(|(_, server)| server.maxmemory.is_some() || server.evicted_keys > 0)
        .map(|(name, _)| name.as_str())
        .collect();
    if servers.is_empty() {
        return None;
    }
    let stroke = variant_line_stroke;
    let mut lines = Vec::new();
    for (variant_index, variant) in report.variants.iter().enumerate() {
        let series = &variant.series;
        for (server_index, server) in servers.iter().enumerate() {
            let key = GaugeKey::ServerUsedMemory((*server).to_owned());
            let Some(values) = series.gauge(&key) else {
                continue;
            };
            let mib = values.iter().map(|&bytes| Some(bytes as f64 / MIB));
            lines.push(Line {
                segments: segments(bucket_middles_s(series).zip(mib)),
                stroke: stroke(variant_index, server_index),
            });
        }
    }
    let y = zero_based_axis("used memory (MiB)", y_values(&lines));
    let mut styles = vec![LegendEntry::heading("Servers")];
    for (server_index, server) in servers.iter().enumerate() {
        let Stroke { dash, width, .. } = stroke(0, server_index);
        styles.push(style_entry(dash, width, format!("server {server}")));
    }
    Some(one_panel_over_time(
        report,
        "memory",
        "Redis used memory over time",
        y,
        lines,
        styles,
    ))
}

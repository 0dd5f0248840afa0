//! Redis memory over time, drawn only when some variant's server has a memory limit (from its
//! file or a `maxmemory` fault): each server's `used_memory` (the most it reached in each
//! bucket), in MiB, with the limit in force at the end as a reference line. Line style says
//! the server; fault windows shaded.

use std::collections::BTreeSet;

use outagelab_report::{GaugeKey, RunReport};

use crate::axes::count_axis;
use crate::chart::{Chart, segments};
use crate::multiples::{Kind, Limit, OverTime, over_time, parts};
use crate::timeline::gauge_points;

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
    let kinds = Kind::styled(servers.iter().map(|server| format!("server {server}")));
    let parts = parts(report, |variant, part| {
        for (kind, server) in servers.iter().enumerate() {
            let key = GaugeKey::ServerUsedMemory((*server).to_owned());
            let Some(values) = variant.series.gauge(&key) else {
                continue;
            };
            let mib = gauge_points(variant, values).map(|(x, bytes)| (x, bytes.map(|b| b / MIB)));
            part.push(kind, segments(mib));
            let limit = variant
                .summary
                .servers
                .get(*server)
                .and_then(|s| s.maxmemory);
            let what = format!("server {server}: maxmemory at the end");
            part.limits
                .extend(limit.map(|bytes| Limit::new(what, bytes as f64 / MIB)));
        }
    });
    let y = |lines: &[_], limits: &[f64]| count_axis("used memory (MiB)", lines, limits);
    let spec = OverTime {
        name: "memory",
        title: "Redis used memory over time",
        y: &y,
        heading: "Servers",
        kinds,
    };
    Some(over_time(report, spec, &parts))
}

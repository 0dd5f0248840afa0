//! Concurrency over time: everything that waits or runs at once, as the maximum reached in
//! each bucket: requests in flight, each database's running queries and the queries waiting
//! for a lock or a connection, each connection's pending commands, each bulkhead's permits in
//! use and its queue, each semaphore's and adaptive limit's work in flight. A gauge that
//! stayed at zero in every variant is left out (a flat zero line would only crowd the chart),
//! and so is the gauge of a policy a variant switched off. The configured limits of what is
//! drawn (a database's capacity and connections, a bulkhead's permits and queue, a semaphore's
//! cap, a connection's `pending_max`) are labelled reference lines; the axis turns
//! logarithmic when a limit or a line would be lost next to a much larger one.

use std::collections::BTreeMap;

use outagelab_report::{GaugeKey, RunReport, VariantReport};

use crate::axes::count_axis;
use crate::chart::{Chart, segments};
use crate::multiples::{Kind, Limit, OverTime, over_time, parts};
use crate::timeline::gauge_points;

pub(crate) fn chart(report: &RunReport) -> Chart {
    // In name order (the order lines get their style), as the series are stored.
    let shown = |variant: &VariantReport, key: &GaugeKey, values: &[u64]| {
        label(key).is_some() && enabled(variant, key) && values.iter().any(|&v| v > 0)
    };
    let gauges: Vec<GaugeKey> = report
        .variants
        .iter()
        .flat_map(|variant| {
            let gauges = variant.series.gauges();
            gauges.filter(move |(key, values)| shown(variant, key, values))
        })
        .map(|(key, _)| (key.to_string(), key))
        .collect::<BTreeMap<String, GaugeKey>>()
        .into_values()
        .collect();
    let kinds = Kind::styled(gauges.iter().map(|gauge| label(gauge).unwrap_or_default()));
    let parts = parts(report, |variant, part| {
        for (kind, gauge) in gauges.iter().enumerate() {
            let Some(values) = variant.series.gauge(gauge) else {
                continue;
            };
            if !enabled(variant, gauge) {
                continue; // a switched-off bulkhead holds no permits: a flat zero says nothing
            }
            part.push(kind, segments(gauge_points(variant, values)));
            part.limits.extend(limits(variant, gauge));
        }
    });
    let heading = if gauges.is_empty() {
        "(nothing ran or waited at once in this run)"
    } else {
        "Gauges"
    };
    let y = |lines: &[_], limits: &[f64]| count_axis("at once (max per bucket)", lines, limits);
    let spec = OverTime {
        name: "concurrency",
        title: "concurrency over time",
        y: &y,
        heading,
        kinds,
    };
    over_time(report, spec, &parts)
}

/// Whether the policy behind a gauge was switched on in this variant.
fn enabled(variant: &VariantReport, key: &GaugeKey) -> bool {
    let summary = &variant.summary;
    match key {
        GaugeKey::BulkheadInUse(name) | GaugeKey::BulkheadQueued(name) => {
            summary.bulkheads.get(name).is_none_or(|b| b.enabled)
        }
        GaugeKey::SemaphoreInFlight(name) => summary.semaphores.get(name).is_none_or(|s| s.enabled),
        GaugeKey::AdaptiveLimitInFlight(name) => {
            summary.adaptive_limits.get(name).is_none_or(|a| a.enabled)
        }
        _ => true,
    }
}

/// The configured limits on what a gauge counts, in this variant.
fn limits(variant: &VariantReport, key: &GaugeKey) -> Vec<Limit> {
    let summary = &variant.summary;
    let limit =
        |what: String, value: Option<u64>| value.map(|value| Limit::new(what, value as f64));
    let limits = match key {
        GaugeKey::DatabaseConcurrency(name) => summary.databases.get(name).map_or(vec![], |db| {
            vec![
                limit(format!("database {name}: capacity"), db.capacity),
                limit(
                    format!("database {name}: max_connections"),
                    db.max_connections,
                ),
            ]
        }),
        GaugeKey::DatabaseConnectionWaiting(name) => {
            summary.databases.get(name).map_or(vec![], |db| {
                let queue = db.connection_queue_max.filter(|&queue| queue > 0);
                vec![limit(format!("database {name}: connection_queue"), queue)]
            })
        }
        GaugeKey::BulkheadInUse(name) => summary.bulkheads.get(name).map_or(vec![], |b| {
            vec![limit(
                format!("bulkhead {name}: max_concurrent"),
                Some(b.max_concurrent),
            )]
        }),
        GaugeKey::BulkheadQueued(name) => summary.bulkheads.get(name).map_or(vec![], |b| {
            let queue = Some(b.queue_max).filter(|&queue| queue > 0);
            vec![limit(format!("bulkhead {name}: queue"), queue)]
        }),
        GaugeKey::SemaphoreInFlight(name) => summary.semaphores.get(name).map_or(vec![], |s| {
            vec![limit(
                format!("semaphore {name}: max_in_flight"),
                s.max_in_flight,
            )]
        }),
        GaugeKey::ConnectionPending(name) => summary.connections.get(name).map_or(vec![], |c| {
            vec![limit(
                format!("connection {name}: pending_max"),
                c.pending_max,
            )]
        }),
        _ => Vec::new(),
    };
    limits.into_iter().flatten().collect()
}

/// The legend text of a gauge this chart shows; `None` for the gauges it leaves out (states,
/// bytes, memory, cache entries, throttle slots: other charts, or none).
fn label(key: &GaugeKey) -> Option<String> {
    Some(match key {
        GaugeKey::InFlight => "requests in flight".to_owned(),
        GaugeKey::DatabaseConcurrency(name) => format!("database {name}: queries running"),
        GaugeKey::DatabaseLockWaiting(name) => format!("database {name}: waiting for a lock"),
        GaugeKey::DatabaseConnectionWaiting(name) => {
            format!("database {name}: waiting for a connection")
        }
        GaugeKey::ConnectionPending(name) => format!("connection {name}: commands pending"),
        GaugeKey::BulkheadInUse(name) => format!("bulkhead {name}: permits in use"),
        GaugeKey::BulkheadQueued(name) => format!("bulkhead {name}: queued"),
        GaugeKey::SemaphoreInFlight(name) => format!("semaphore {name}: in flight"),
        GaugeKey::AdaptiveLimitInFlight(name) => format!("adaptive limit {name}: in flight"),
        GaugeKey::FlowInFlight(name) => format!("flow {name}: in flight"),
        GaugeKey::InstanceInFlight(name) => format!("instance {name}: in flight"),
        GaugeKey::DatabaseCollapsed(_)
        | GaugeKey::ConnectionConnected(_)
        | GaugeKey::SemaphoreBytes(_)
        | GaugeKey::AdaptiveLimit(_)
        | GaugeKey::CacheEntries(_)
        | GaugeKey::ThrottleHolders(_)
        | GaugeKey::ThrottleCounter(_)
        | GaugeKey::BreakerState(_)
        | GaugeKey::ServerUsedMemory(_) => return None,
    })
}

//! The limits a file configures reach the summary as written (the charts draw them as
//! reference lines, and expectations may compare a peak with its limit); a limit left out has
//! no value.

use std::path::Path;

use outagelab_report::Summary;

const FILE: &str = r#"[scenario]
name = "limits"

[servers.redis]

[connections.capped]
server = "redis"
pending_max = 64

[connections.open]
server = "redis"

[keys.k]

[databases.pool]
latency = "10ms"
capacity = 16
max_connections = 20
connection_queue = 5

[databases.unbounded]
latency = "10ms"

[bulkheads.db]
max_concurrent = 8
queue = 3

[semaphores.blobs]
max_in_flight = 4

[throttles.cascade]
form = "atomic"
inflight_max = 10
retry_after = "1s"

[flows.f]
steps = [
  { throttle = { name = "cascade", op = "acquire", key = "k" } },
  { redis = { command = "GET", connection = "capped", key = "k" }, semaphore = "blobs" },
  { redis = { command = "GET", connection = "open", key = "k" } },
  { db = { name = "pool" }, bulkhead = "db" },
  { db = { name = "unbounded" } },
]

[loads.l]
flow = "f"
arrivals = "burst"
count = 3
"#;

fn summary() -> Summary {
    let file = outagelab_scenario_file::parse(FILE, Path::new("limits.toml"))
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    let variant = &file.variants[0];
    let report = outagelab_sim::run(&variant.scenario).expect("runs");
    report.summary
}

#[test]
fn configured_limits_are_in_the_summary() {
    let summary = summary();
    let pool = &summary.databases["pool"];
    assert_eq!(
        (
            pool.capacity,
            pool.max_connections,
            pool.connection_queue_max
        ),
        (Some(16), Some(20), Some(5))
    );
    let unbounded = &summary.databases["unbounded"];
    assert_eq!(
        (
            unbounded.capacity,
            unbounded.max_connections,
            unbounded.connection_queue_max
        ),
        (None, None, None)
    );
    let bulkhead = &summary.bulkheads["db"];
    assert_eq!((bulkhead.max_concurrent, bulkhead.queue_max), (8, 3));
    let semaphore = &summary.semaphores["blobs"];
    assert_eq!(
        (semaphore.max_in_flight, semaphore.max_bytes),
        (Some(4), None)
    );
    assert_eq!(summary.throttles["cascade"].inflight_max, 10);
    assert_eq!(summary.connections["capped"].pending_max, Some(64));
    assert_eq!(summary.connections["open"].pending_max, None);
}

#[test]
fn an_expectation_can_compare_a_peak_with_its_limit() {
    let summary = summary();
    for (text, passed) in [
        (
            "bulkheads.db.peak_in_use <= bulkheads.db.max_concurrent",
            true,
        ),
        (
            "throttles.cascade.peak_holders <= throttles.cascade.inflight_max",
            true,
        ),
        ("databases.pool.capacity == 16", true),
        ("databases.unbounded.capacity > 0", false),
    ] {
        let expectation = outagelab_report::expect::Expectation::parse(text).unwrap();
        let evaluation = expectation.evaluate(&summary).unwrap();
        assert_eq!(evaluation.passed, passed, "{text}");
    }
}

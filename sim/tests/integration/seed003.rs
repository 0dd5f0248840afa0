//! The seed-003 lesson as a property of the mechanisms, whatever the seed: with Redis dead, a
//! breaker sends load to the database faster (higher peak), and only a bulkhead bounds it.

use crate::common;

use outagelab_sim::run;

#[test]
fn a_breaker_raises_the_database_peak_and_a_bulkhead_bounds_it() {
    for seed in 1..=5 {
        let peak = |breaker, bulkhead| {
            let mut scenario = common::seed003(breaker, bulkhead, 500);
            scenario.seed = seed;
            let report = run(&scenario).unwrap();
            assert_eq!(report.summary.requests, 500);
            assert_eq!(report.summary.unfinished, 0);
            report.summary.databases["main"].peak_concurrency
        };
        let (timeout_only, with_breaker, with_bulkhead) =
            (peak(false, false), peak(true, false), peak(true, true));
        assert!(
            with_breaker > timeout_only + 20,
            "seed {seed}: {with_breaker} vs {timeout_only}"
        );
        assert_eq!(with_bulkhead, 20, "seed {seed}");
    }
}

#[test]
fn with_a_breaker_most_requests_skip_the_redis_wait() {
    let report = run(&common::seed003(true, false, 500)).unwrap();
    let latency = &report.summary.latency_ms["all"];
    assert!(latency.p50.unwrap() < 55.0, "{latency:?}");
    assert!(latency.p99.unwrap() > 150.0, "{latency:?}");
    assert_eq!(report.summary.breakers["redis"].opened, 1);
}

#[test]
fn a_query_whose_caller_timed_out_keeps_its_bulkhead_permit_until_it_ends() {
    use outagelab_sim::scenario::{DatabaseId, Distribution, StepAction};
    let mut scenario = common::seed003(false, true, 200);
    scenario.bulkheads[0].config = outagelab_model::bulkhead::BulkheadConfig::new(5, 10).unwrap();
    scenario.databases[0].latency = Distribution::Constant(common::ms(500));
    scenario.flows[0].steps[1].action = StepAction::Database {
        database: DatabaseId(0),
        timeout: Some(common::ms(50)),
        latency: None,
        lock: None,
        data: None,
    };
    let report = run(&scenario).unwrap();
    let summary = &report.summary;
    assert_eq!(summary.databases["main"].peak_concurrency, 5);
    assert!(
        summary.outcomes["timeout"] > 0 && summary.outcomes["shed"] > 0,
        "{:?}",
        summary.outcomes
    );
}

/// A breaker's state gauge follows time alone: once open, it turns half-open `open_for` later
/// whether or not a request calls it then. Here the breaker's only flow stops sending after
/// 120 ms, and a second flow without layers (a database read every 10 ms) keeps events coming
/// in which no layer is called: the gauge must show half-open (1) from 5.1 s on, not stay open
/// (2) until the next call (there is none).
#[test]
fn a_breaker_gauge_turns_half_open_with_time_while_no_request_calls_it() {
    use outagelab_model::time::SimDuration;
    use outagelab_sim::scenario::FlowId;
    let mut scenario = common::seed003(true, false, 60);
    scenario.breakers[0].config =
        outagelab_model::breaker::BreakerConfig::new(5, SimDuration::from_secs(5), 1).unwrap();
    scenario
        .flows
        .push(common::flow("reads", vec![common::db_step(0)]));
    let mut background = common::even("background", 1, 100.0, 1000);
    background.flow = FlowId(1);
    scenario.loads.push(background);
    let report = run(&scenario).unwrap();
    assert_eq!(report.summary.breakers["redis"].opened, 1);
    let states = &report.series.gauges_max["breakers.redis.state"];
    let bucket_at = |ms: f64| {
        (report.series.start_ms.iter())
            .rposition(|&start| start <= ms)
            .expect("a bucket")
    };
    // Open before the 5 s are over, half-open after, with no call in between.
    assert_eq!(states[bucket_at(3000.0)], 2, "{states:?}");
    assert_eq!(states[bucket_at(6000.0)], 1, "{states:?}");
    assert_eq!(states[bucket_at(9500.0)], 1, "{states:?}");
}

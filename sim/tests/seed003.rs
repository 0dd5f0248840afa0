//! The seed-003 lesson as a property of the mechanisms, whatever the seed: with Redis dead, a
//! breaker sends load to the database faster (higher peak), and only a bulkhead bounds it.

mod common;

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

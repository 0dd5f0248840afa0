//! Cascade throttles in the simulator (seed 004), one behaviour per test: the atomic form holds
//! its cap, the KV form's read-then-increment over-admits, a slot whose release never lands
//! blocks later requests until the counter expires, and a release in `finally` survives a
//! failed step.

use crate::common;

use common::*;
use outagelab_model::throttle::{CounterTtl, ThrottleConfig};
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{ThrottleSummary, VariantReport};
use outagelab_sim::run;
use outagelab_sim::scenario::*;

/// Database `db` (100 ms queries, index 0), key family `space` (one key), KV store `kv`
/// (15 ms reads, 30 ms writes), and throttle `cascade` (index 0) capping `space` at `cap`.
fn base(cap: u32, form: ThrottleForm, ttl: CounterTtl) -> Scenario {
    let mut s = empty("throttle");
    s.databases.push(DatabaseSpec {
        name: "db".into(),
        latency: Distribution::Constant(ms(100)),
        capacity: None,
        connections: None,
        collapse: None,
    });
    s.keys.push(key("space", 1));
    s.kv_stores.push(KvStoreSpec {
        name: "kv".into(),
        read_latency: Distribution::Constant(ms(15)),
        write_latency: Distribution::Constant(ms(30)),
        staleness_max: SimDuration::ZERO,
    });
    s.throttles.push(ThrottleSpec {
        name: "cascade".into(),
        enabled: true,
        config: ThrottleConfig::new(cap, SimDuration::from_secs(1), ttl, SimDuration::ZERO)
            .unwrap(),
        form,
        release_loss_permille: 0,
    });
    s
}

fn throttle_step(op: ThrottleOp) -> StepSpec {
    StepSpec {
        action: StepAction::Throttle {
            throttle: ThrottleId(0),
            op,
            key: KeyFamilyId(0),
        },
        finally: op == ThrottleOp::Release,
        ..db_step(0)
    }
}

/// Acquire, a 100 ms query, release in `finally`.
fn cascade() -> FlowSpec {
    flow(
        "write",
        vec![
            throttle_step(ThrottleOp::Acquire),
            db_step(0),
            throttle_step(ThrottleOp::Release),
        ],
    )
}

fn kv() -> ThrottleForm {
    ThrottleForm::Kv {
        store: KvStoreId(0),
    }
}

fn outcome(report: &VariantReport, name: &str) -> u64 {
    report.summary.flows["write"].outcomes[name]
}

fn throttle(report: &VariantReport) -> &ThrottleSummary {
    &report.summary.throttles["cascade"]
}

#[test]
fn an_atomic_throttle_admits_its_cap_and_rejects_the_rest_of_a_burst() {
    let mut s = base(3, ThrottleForm::Atomic, CounterTtl::Never);
    s.flows.push(cascade());
    s.loads.push(burst("sync", 0, SimTime::ZERO, 8));
    let report = run(&s).unwrap();
    assert_eq!(
        (outcome(&report, "ok"), outcome(&report, "rate_limited")),
        (3, 5)
    );
    let summary = throttle(&report);
    assert_eq!((summary.admitted, summary.rejected), (3, 5));
    assert_eq!(summary.peak_holders, 3);
    assert_eq!(
        summary.rejected_below_cap, 0,
        "all rejections met a full cap"
    );
}

#[test]
fn a_kv_throttle_admits_every_acquire_that_read_before_the_first_increment_landed() {
    let mut s = base(3, kv(), CounterTtl::Never);
    s.flows.push(cascade());
    s.loads.push(burst("sync", 0, SimTime::ZERO, 8));
    // Three more after the burst's increments landed (15 ms read + 30 ms write), while its
    // queries still run. The 8 increments were lost updates (each wrote 0 + 1), so these read
    // 1, not 8, and are admitted too.
    s.loads.push(burst("late", 0, at_ms(60), 3));
    let report = run(&s).unwrap();
    let summary = throttle(&report);
    assert_eq!(summary.peak_holders, 11, "a cap of 3, and 11 held at once");
    assert_eq!((summary.admitted, summary.rejected), (11, 0));
    let counter_max = report.series.gauges_max["throttles.cascade.counter"]
        .iter()
        .max()
        .copied();
    assert_eq!(counter_max, Some(2), "the counter never saw more than 2");
}

#[test]
fn a_slot_whose_release_never_lands_blocks_others_until_the_counter_expires() {
    for ttl in [CounterTtl::Never, CounterTtl::FixedAtCreation(ms(1000))] {
        let mut s = base(1, ThrottleForm::Atomic, ttl);
        s.throttles[0].release_loss_permille = 1000; // every release lost
        s.flows.push(cascade());
        // One write every 200 ms for 2 s: never two at once.
        s.loads.push(even("sync", 0, 5.0, 10));
        let report = run(&s).unwrap();
        let summary = throttle(&report);
        assert_eq!(summary.peak_holders, 1);
        match ttl {
            CounterTtl::Never => {
                // The first write leaks its slot; every later one is turned away though
                // nobody holds a slot.
                assert_eq!((summary.admitted, summary.releases_lost), (1, 1));
                assert_eq!((summary.rejected, summary.rejected_below_cap), (9, 9));
            }
            _ => {
                // The counter, created at 0 ms, expires at 1000 ms: the write at 1000 ms gets
                // the slot (and leaks it in turn).
                assert_eq!((summary.admitted, summary.releases_lost), (2, 2));
                assert_eq!(summary.rejected_below_cap, 8);
            }
        }
    }
}

#[test]
fn a_release_in_finally_frees_the_slot_even_when_the_step_before_failed() {
    for finally in [false, true] {
        let mut s = base(1, ThrottleForm::Atomic, CounterTtl::Never);
        let mut failing = db_step(0);
        if let StepAction::Database { timeout, .. } = &mut failing.action {
            *timeout = Some(ms(10)); // 100 ms queries: always times out
        }
        let release = StepSpec {
            finally,
            ..throttle_step(ThrottleOp::Release)
        };
        s.flows.push(flow(
            "write",
            vec![throttle_step(ThrottleOp::Acquire), failing, release],
        ));
        s.loads.push(even("sync", 0, 5.0, 3));
        let report = run(&s).unwrap();
        let summary = throttle(&report);
        if finally {
            assert_eq!(
                outcome(&report, "timeout"),
                3,
                "each got the slot and timed out"
            );
            assert_eq!(summary.releases_lost, 0);
        } else {
            // The first ends at its timeout still holding the slot: it leaks.
            assert_eq!(outcome(&report, "timeout"), 1);
            assert_eq!(outcome(&report, "rate_limited"), 2);
            assert_eq!(summary.releases_lost, 1);
        }
    }
}

#[test]
fn a_disabled_throttle_admits_everything_and_counts_nothing() {
    let mut s = base(1, ThrottleForm::Atomic, CounterTtl::Never);
    s.throttles[0].enabled = false;
    s.flows.push(cascade());
    s.loads.push(burst("sync", 0, SimTime::ZERO, 5));
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "ok"), 5);
    let summary = throttle(&report);
    assert_eq!((summary.admitted, summary.peak_holders), (0, 0));
}

#[test]
fn two_throttles_in_one_flow_each_get_their_own_slot_back() {
    let mut s = base(100, ThrottleForm::Atomic, CounterTtl::Never);
    let second = ThrottleSpec {
        name: "user".into(),
        ..s.throttles[0].clone()
    };
    s.throttles.push(second);
    s.keys.push(key("user", 1));
    let step = |throttle: u32, op: ThrottleOp, family: u32| StepSpec {
        action: StepAction::Throttle {
            throttle: ThrottleId(throttle),
            op,
            key: KeyFamilyId(family),
        },
        finally: op == ThrottleOp::Release,
        ..db_step(0)
    };
    s.flows.push(flow(
        "write",
        vec![
            step(0, ThrottleOp::Acquire, 0),
            step(1, ThrottleOp::Acquire, 1),
            db_step(0),
            step(1, ThrottleOp::Release, 1),
            step(0, ThrottleOp::Release, 0),
        ],
    ));
    s.loads.push(even("sync", 0, 10.0, 20));
    let report = run(&s).unwrap();
    for name in ["cascade", "user"] {
        let summary = &report.summary.throttles[name];
        assert_eq!((summary.admitted, summary.releases_lost), (20, 0), "{name}");
    }
}

#[test]
fn two_kv_throttles_on_one_store_and_key_family_count_apart() {
    let mut s = base(1, kv(), CounterTtl::Never);
    let other = ThrottleSpec {
        name: "other".into(),
        ..s.throttles[0].clone()
    };
    s.throttles.push(other);
    s.flows.push(cascade());
    let mut other_flow = cascade();
    other_flow.name = "other".into();
    for step in &mut other_flow.steps {
        if let StepAction::Throttle { throttle, .. } = &mut step.action {
            *throttle = ThrottleId(1);
        }
    }
    s.flows.push(other_flow);
    // A holder of `cascade` (its cap; its increment lands at 45 ms), then an acquire of
    // `other` on the same space, which must not read `cascade`'s counter.
    s.loads.push(burst("cascade", 0, SimTime::ZERO, 1));
    s.loads.push(burst("other", 1, at_ms(60), 1));
    let report = run(&s).unwrap();
    let other = &report.summary.throttles["other"];
    assert_eq!((other.admitted, other.rejected), (1, 0));
}

#[test]
fn a_hit_that_finishes_the_request_still_runs_the_finally_release() {
    let mut s = base(1, ThrottleForm::Atomic, CounterTtl::Never);
    s.servers.push(server("redis"));
    s.servers[0].preload.push(Preload {
        family: KeyFamilyId(0),
        count: 1,
        value_bytes: 64,
    });
    s.connections.push(connection("c", 0));
    let get = StepSpec {
        on_hit: OnHit::Finish,
        ..redis_step(0, RedisCommand::Get, 0)
    };
    s.flows.push(flow(
        "cached",
        vec![
            throttle_step(ThrottleOp::Acquire),
            get,
            db_step(0),
            throttle_step(ThrottleOp::Release),
        ],
    ));
    s.loads.push(even("sync", 0, 10.0, 5));
    let report = run(&s).unwrap();
    let summary = throttle(&report);
    assert_eq!((summary.admitted, summary.rejected), (5, 0));
    assert_eq!(summary.releases_lost, 0);
}

#[test]
fn every_rejected_attempt_is_counted_in_its_bucket_retried_or_not() {
    use outagelab_model::backoff::{BackoffConfig, Jitter};
    use outagelab_model::retry::RetryConfig;
    let mut s = base(3, ThrottleForm::Atomic, CounterTtl::Never);
    let backoff = BackoffConfig::new(ms(5), 1000, ms(5), Jitter::None).unwrap();
    s.retries.push(RetrySpec {
        name: "client".into(),
        enabled: true,
        config: RetryConfig::new(2, backoff, None, None).unwrap(),
        retry_on: OutcomeSet::new([outagelab_report::Outcome::RateLimited]),
    });
    let mut flow = cascade();
    flow.steps[0].policies.push(PolicyRef::Retry(RetryId(0)));
    s.flows.push(flow);
    s.loads.push(burst("sync", 0, SimTime::ZERO, 8));
    let report = run(&s).unwrap();
    // At 0 s, 3 admitted and 5 answered 429; their retries, after the 1 s Retry-After, find
    // the first three gone: 3 more admitted, 2 answered 429 again, which end the requests.
    assert_eq!(outcome(&report, "rate_limited"), 2);
    let rejected = &report.series.counts["rejected_attempts"];
    assert_eq!(rejected.iter().sum::<u64>(), 7, "{rejected:?}");
    assert_eq!(rejected[0], 5, "the first five in the first bucket");
}

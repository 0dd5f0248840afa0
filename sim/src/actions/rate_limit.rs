//! A rate-limit step: a check costing one token. A local limiter (or a disabled one) answers
//! at once; one with a store checks and charges under the request's key with an `INCR` on the
//! store's connection, and waits for the reply. Either way the limiter decides the step's
//! result when it ends ([`decide`]): `rate_limited` when refused, and what an unreachable store
//! means is the limiter's `when_unreachable`.
//!
//! Buckets: a limiter with a store keeps one bucket per key it increments (a gateway's counter
//! per client: "20/s per client" over 1,000 clients is 1,000 buckets of 20/s), so its step's
//! key family says what is limited; a family of one key is one bucket for everyone. Those
//! buckets live in Redis: in a service of several instances, every instance's copy of the
//! limiter checks the same ones ([`RateLimitSpec::buckets_of`]), so "20/s" is 20/s for the
//! whole service, while each copy counts its own decisions. A local limiter is one bucket per
//! instance. The buckets held are in the run's memory estimate, once ([`memory_bytes`]).

use std::collections::BTreeMap;

use outagelab_model::rate_limit::{KeyedRateLimiter, RateLimitCounters};
use outagelab_model::time::SimTime;
use outagelab_report::{CountKey, RateLimitSummary};

use crate::actions::{Host, Started};
use crate::kernel::StepResult;
use crate::metrics::{CounterId, Metrics};
use crate::redis::Op;
use crate::rules::{self, StoreAnswer};
use crate::scenario::{
    ConnectionId, KeyFamilyId, RateLimitId, RateLimitSpec, RedisCommand, Scenario,
};

/// Every rate limiter's state: one slot per limiter, and one set of buckets per limiter that
/// keeps its own. Invariant: every slot's `buckets` indexes `buckets`, and two slots share an
/// index exactly when one's spec names the other in [`RateLimitSpec::buckets_of`] (or both name
/// the same one).
pub(super) struct RateLimiters {
    slots: Vec<RateLimitSlot>,
    buckets: Vec<KeyedRateLimiter>,
}

struct RateLimitSlot {
    /// Which of [`RateLimiters::buckets`] this limiter checks: one bucket per key of the
    /// store; a local limiter's one bucket is key 0.
    buckets: usize,
    /// This limiter's own decisions (one instance's, when the buckets are shared): what its
    /// summary reports.
    counters: RateLimitCounters,
    enabled: bool,
    store: Option<ConnectionId>,
    /// Checks admitted unchecked because the store could not be reached, per bucket.
    fail_open_counter: CounterId,
    /// The key whose bucket the store's answer is for: set by [`answered`] for the request
    /// whose reply came in, and taken by the [`decide`] that follows it at once.
    answered_key: Option<u64>,
}

/// One slot per rate limiter, each with its fail-open counter, and the buckets of each that
/// keeps its own.
pub(super) fn slots(scenario: &Scenario, metrics: &mut Metrics) -> RateLimiters {
    let mut buckets = Vec::new();
    let own: Vec<Option<usize>> = (scenario.rate_limits.iter())
        .map(|spec| {
            spec.buckets_of.is_none().then(|| {
                buckets.push(KeyedRateLimiter::new(spec.config));
                buckets.len() - 1
            })
        })
        .collect();
    let slots = (0u32..)
        .zip(&scenario.rate_limits)
        .map(|(id, spec): (u32, &RateLimitSpec)| RateLimitSlot {
            buckets: own[spec.buckets(RateLimitId(id)).index()]
                .expect("checked: the limiter whose buckets are shared keeps its own"),
            counters: RateLimitCounters::default(),
            fail_open_counter: metrics
                .add_counter(CountKey::RateLimitFailOpenAdmitted(spec.name.clone())),
            enabled: spec.enabled,
            store: spec.store,
            answered_key: None,
        })
        .collect();
    RateLimiters { slots, buckets }
}

/// What the limiters' buckets take now, at most: each set once, however many limiters check it.
pub(super) fn memory_bytes(rate_limits: &RateLimiters) -> u64 {
    (rate_limits.buckets.iter())
        .map(KeyedRateLimiter::memory_bytes)
        .sum()
}

/// Each limiter's own decisions, by its name (`api@k` for instance k's copy).
pub(super) fn summaries(
    rate_limits: &RateLimiters,
    scenario: &Scenario,
) -> BTreeMap<String, RateLimitSummary> {
    (scenario.rate_limits.iter())
        .zip(&rate_limits.slots)
        .map(|(spec, slot)| {
            let summary = crate::summaries::rate_limit(slot.enabled, &slot.counters);
            (spec.name.clone(), summary)
        })
        .collect()
}

/// Asks the store, when the limiter has one and is on; otherwise the step ends at once, and
/// [`decide`] asks the limiter.
pub(super) fn start(
    sim: &mut impl Host,
    slot: u32,
    limiter: RateLimitId,
    key: Option<KeyFamilyId>,
    replay_writes: bool,
) -> Started {
    let id = limiter;
    let limiter = &sim.actions().rate_limits.slots[id.index()];
    match rules::rate_limit_store(limiter.enabled, limiter.store, key) {
        Some((store, family)) => {
            let index = sim.key_of(slot, family);
            let op = Op {
                command: RedisCommand::Incr,
                family: family.0,
                index,
                version: 0,
            };
            match sim.issue_command(slot, store, op, replay_writes) {
                None => Started::Waits,
                Some(result) => {
                    sim.actions().rate_limits.slots[id.index()].answered_key =
                        Some(rules::rate_limit_bucket(Some((family, index))));
                    Started::Ended(result)
                }
            }
        }
        // A local limiter (or a disabled one) answers at once; `decide` asks it.
        None => Started::Ended(StepResult::Ok),
    }
}

/// The store's reply to the check of the request in `slot` came in: the [`decide`] that
/// follows is for the bucket of that request's key.
pub(super) fn answered(
    sim: &mut impl Host,
    slot: u32,
    limiter: RateLimitId,
    key: Option<KeyFamilyId>,
) {
    if let Some(family) = key {
        let index = sim.key_of(slot, family);
        sim.actions().rate_limits.slots[limiter.index()].answered_key =
            Some(rules::rate_limit_bucket(Some((family, index))));
    }
}

/// What a rate-limit step's result means once the limiter has had its say: `store` is what
/// the store's round trip returned (`Ok` for a local limiter), for the bucket of the key
/// [`answered`] named (key 0, the one bucket, for a local limiter) among the buckets the
/// limiter checks. The decision is counted by the limiter itself too.
pub(super) fn decide(
    rate_limits: &mut RateLimiters,
    now: SimTime,
    metrics: &mut Metrics,
    limiter: RateLimitId,
    store: StepResult,
) -> StepResult {
    let slot = &mut rate_limits.slots[limiter.index()];
    let key = slot.answered_key.take().unwrap_or(0);
    let buckets = &mut rate_limits.buckets[slot.buckets];
    let counters = &mut slot.counters;
    let answer = rules::rate_limit_answer(slot.enabled, store, |store| match store {
        StoreAnswer::Answered => {
            let decision = buckets.try_acquire(now, key, 1);
            counters.count(decision);
            decision
        }
        StoreAnswer::Unreachable => {
            let decision = buckets.on_store_unreachable(1);
            counters.count_unreachable(decision, 1);
            decision
        }
    });
    if answer.failed_open {
        metrics.count(slot.fail_open_counter);
    }
    answer.result
}

#[cfg(test)]
mod tests {
    use outagelab_model::rate_limit::{
        Algorithm, BucketConfig, KeyedRateLimiter, RateLimiterConfig, TokenRate,
        WhenStoreUnreachable,
    };
    use outagelab_report::PercentileRule;

    use outagelab_model::time::SimTime;

    use outagelab_report::VariantReport;

    use crate::kernel::StepResult;
    use crate::metrics::Metrics;

    use crate::actions::testing::{CONNECTION, KEY, ended, ms, run, scenario, step, work};
    use crate::scenario::{
        Arrivals, FaultKind, FaultSpec, FaultTarget, FlowId, FlowSpec, LoadEnd, LoadSpec, Rate,
        RateLimitId, RateLimitSpec, Scenario, ServerId, ServerSpec, ServiceSpec, Spread,
        StepAction, StepSpec,
    };

    /// A bucket of two tokens, one more a second, fail-open; checked in Redis when `stored`.
    fn limited(stored: bool) -> (Scenario, StepSpec) {
        let mut s = scenario();
        let rate = TokenRate::new(1, ms(1_000)).unwrap();
        let bucket = BucketConfig::new(2, rate).unwrap();
        let config = RateLimiterConfig::new(
            bucket,
            Algorithm::TokenBucket,
            WhenStoreUnreachable::FailOpen,
        )
        .unwrap();
        s.rate_limits.push(RateLimitSpec {
            name: "api".into(),
            enabled: true,
            config,
            store: stored.then_some(CONNECTION),
            buckets_of: None,
        });
        let check = step(StepAction::RateLimit {
            limiter: RateLimitId(0),
            key: stored.then_some(KEY),
        });
        (s, check)
    }

    /// "20/s" with a burst of 20 against 400 requests a second, evenly spaced, for 10 s: 4,000
    /// requests, each followed by 1 ms of work, on a service of `instances` instances (round
    /// robin). Checked in Redis under a family of `keys` client keys when `stored`; local
    /// (one bucket per instance) otherwise.
    fn twenty_a_second_on(instances: u32, keys: u32, stored: bool) -> VariantReport {
        crate::run(&twenty_a_second_scenario(instances, keys, stored)).expect("the scenario runs")
    }

    /// The scenario [`twenty_a_second_on`] runs.
    fn twenty_a_second_scenario(instances: u32, keys: u32, stored: bool) -> Scenario {
        let mut s = scenario();
        s.keys[0].count = keys;
        let bucket = BucketConfig::new(20, TokenRate::per_second(20).unwrap()).unwrap();
        let when = WhenStoreUnreachable::FailOpen;
        let config = RateLimiterConfig::new(bucket, Algorithm::TokenBucket, when).unwrap();
        s.rate_limits.push(RateLimitSpec {
            name: "api".into(),
            enabled: true,
            config,
            store: stored.then_some(CONNECTION),
            buckets_of: None,
        });
        let check = step(StepAction::RateLimit {
            limiter: RateLimitId(0),
            key: stored.then_some(KEY),
        });
        s.flows.push(FlowSpec {
            name: "flow".into(),
            steps: vec![check, work(ms(1))],
            instance: None,
        });
        s.loads.push(LoadSpec {
            name: "clients".into(),
            flow: FlowId(0),
            start: SimTime::ZERO,
            arrivals: Arrivals::Even {
                rate: Rate::per_second(400.0).unwrap(),
                end: LoadEnd::Count(4_000),
            },
            caller: None,
        });
        if instances > 1 {
            let service = ServiceSpec {
                name: "gateway".into(),
                instances,
                spread: Spread::RoundRobin,
            };
            crate::instances::expand(&mut s, service, &[FlowId(0)]).expect("one service");
        }
        s
    }

    /// [`twenty_a_second_on`] one instance, checked in Redis.
    fn twenty_a_second(keys: u32) -> VariantReport {
        twenty_a_second_on(1, keys, true)
    }

    /// Each instance's `(admitted, rejected)` of limiter `api` (`api@0`, ...), and their sum.
    fn per_instance(report: &VariantReport, instances: u32) -> (Vec<(u64, u64)>, (u64, u64)) {
        let counts: Vec<(u64, u64)> = (0..instances)
            .map(|k| &report.summary.rate_limits[&format!("api@{k}")])
            .map(|limiter| (limiter.admitted, limiter.rejected))
            .collect();
        let sum = counts.iter().fold((0, 0), |(a, r), c| (a + c.0, r + c.1));
        (counts, sum)
    }

    #[test]
    fn twenty_a_second_for_everyone_over_four_instances_is_still_twenty_a_second() {
        // The bucket lives in Redis, which all four instances reach: one bucket, so the hand
        // count of one instance holds (219 admitted, 3,781 refused), not four buckets' 876.
        // Round robin sends check k to instance k mod 4: the burst (checks 0-19) is 5 each,
        // and every refilled token (checks 20, 40, ..., 3,980) falls to instance 0.
        let report = twenty_a_second_on(4, 1, true);
        let (counts, sum) = per_instance(&report, 4);
        assert_eq!(sum, (219, 3_781));
        assert_eq!(counts, [(204, 796), (5, 995), (5, 995), (5, 995)]);
        assert_eq!(ended(&report, "ok"), 219);
        assert_eq!(ended(&report, "rate_limited"), 3_781);
    }

    #[test]
    fn twenty_a_second_per_client_over_four_instances_refuses_nothing_at_400_a_second() {
        // 1,000 clients' buckets, shared by the instances: 0.4 checks a second per client.
        let report = twenty_a_second_on(4, 1_000, true);
        assert_eq!(per_instance(&report, 4).1, (4_000, 0));
        assert_eq!(ended(&report, "ok"), 4_000);
    }

    #[test]
    fn a_local_limiter_over_four_instances_admits_four_buckets() {
        // In-process: one bucket per instance, each checked every 10 ms for 9,990 ms from its
        // first check: its burst of 20 plus 9,990 / 50 = 199 refilled tokens, 219 each.
        let report = twenty_a_second_on(4, 1, false);
        let (counts, sum) = per_instance(&report, 4);
        assert_eq!(counts, [(219, 781); 4]);
        assert_eq!(sum, (876, 3_124));
        assert_eq!(ended(&report, "ok"), 876);
    }

    #[test]
    fn twenty_a_second_per_client_over_a_thousand_clients_refuses_nothing_at_400_a_second() {
        // 400/s over 1,000 client keys is 0.4/s a client on average; a client is refused only
        // past 20 checks in its first second plus 20 a second after: none comes near. (One
        // bucket for every client, the old behaviour, refuses the 3,781 of the next test.)
        let report = twenty_a_second(1_000);
        assert_eq!(ended(&report, "ok"), 4_000);
        let limiter = &report.summary.rate_limits["api"];
        assert_eq!((limiter.admitted, limiter.rejected), (4_000, 0));
    }

    #[test]
    fn twenty_a_second_for_everyone_refuses_what_a_hand_count_says() {
        // One key: one bucket. Checks every 2.5 ms (each 2.005 ms after its arrival, all
        // shifted alike). The first 20 take the burst; a token comes back every 50 ms, that is
        // every 20th check, so checks 20, 40, ..., 3,980 pass too: 20 + 199 = 219 admitted,
        // 4,000 - 219 = 3,781 refused.
        let report = twenty_a_second(1);
        let limiter = &report.summary.rate_limits["api"];
        assert_eq!((limiter.admitted, limiter.rejected), (219, 3_781));
        assert_eq!(ended(&report, "ok"), 219);
        assert_eq!(ended(&report, "rate_limited"), 3_781);
    }

    #[test]
    fn instances_copies_of_a_stored_limiter_check_instance_zeros_buckets_and_a_local_ones_own() {
        for (stored, owners) in [
            (true, [None, Some(0), Some(0), Some(0)]),
            (false, [None; 4]),
        ] {
            let s = twenty_a_second_scenario(4, 1, stored);
            let limiters = &s.rate_limits;
            let names: Vec<&str> = limiters.iter().map(|spec| spec.name.as_str()).collect();
            assert_eq!(names, ["api@0", "api@1", "api@2", "api@3"]);
            let stores: Vec<_> = limiters
                .iter()
                .map(|spec| spec.store.map(|c| c.0))
                .collect();
            let each_its_own = [Some(0), Some(1), Some(2), Some(3)];
            assert_eq!(stores, if stored { each_its_own } else { [None; 4] });
            let shared: Vec<_> = limiters
                .iter()
                .map(|spec| spec.buckets_of.map(|l| l.0))
                .collect();
            assert_eq!(shared, owners, "stored: {stored}");
            let mut metrics = Metrics::new(1_000_000, 1, 0, PercentileRule::NearestRank);
            let slots = super::slots(&s, &mut metrics);
            assert_eq!(slots.buckets.len(), if stored { 1 } else { 4 });
        }
    }

    #[test]
    fn shared_buckets_are_held_and_estimated_once() {
        // Four instances check clients 0-9 each: ten buckets in Redis, not forty.
        let s = twenty_a_second_scenario(4, 1_000, true);
        let mut metrics = Metrics::new(1_000_000, 1, 0, PercentileRule::NearestRank);
        let mut limiters = super::slots(&s, &mut metrics);
        for (instance, client) in (0..4).flat_map(|i| (0..10).map(move |c| (i, c))) {
            limiters.slots[instance].answered_key = Some(client);
            let result = super::decide(
                &mut limiters,
                SimTime::ZERO,
                &mut metrics,
                RateLimitId(instance as u32),
                StepResult::Ok,
            );
            assert_eq!(result, StepResult::Ok);
        }
        assert_eq!(limiters.buckets[0].keys_held(), 10);
        let bytes = 10 * KeyedRateLimiter::BYTES_PER_KEY;
        assert_eq!(super::memory_bytes(&limiters), bytes);
        assert!(
            limiters
                .slots
                .iter()
                .all(|slot| slot.counters.admitted == 10)
        );
    }

    #[test]
    fn a_limiter_may_check_only_the_same_limiters_buckets_in_the_same_redis() {
        let check = |change: fn(&mut Scenario)| {
            let mut s = twenty_a_second_scenario(2, 1, true);
            change(&mut s);
            s.check_references()
        };
        assert_eq!(check(|_| {}), Ok(()));
        let refused = "rate limiter api@1 checks the buckets of api@0, which is not the same \
                       limiter in the same Redis keeping buckets of its own";
        let elsewhere = |s: &mut Scenario| {
            s.servers.push(ServerSpec::new("other"));
            s.connections[1].server = ServerId(1);
        };
        let disabled = |s: &mut Scenario| s.rate_limits[1].enabled = false;
        let local = |s: &mut Scenario| s.rate_limits[1].store = None;
        for change in [elsewhere, disabled, local] {
            assert_eq!(check(change).unwrap_err(), refused);
        }
        // The limiter named must keep its own: no chains.
        let chained = |s: &mut Scenario| s.rate_limits[0].buckets_of = Some(RateLimitId(1));
        let chained_refused = "rate limiter api@0 checks the buckets of api@1, which is not the \
                               same limiter in the same Redis keeping buckets of its own";
        assert_eq!(check(chained).unwrap_err(), chained_refused);
    }

    #[test]
    fn a_local_limiter_admits_its_bucket_and_refuses_the_rest_at_once() {
        let (s, check) = limited(false);
        // Three at once on a bucket of two: two go on to 1 ms of work, one is refused at 0.
        let report = run(s, vec![check, work(ms(1))], &[(0, 3)]);
        assert_eq!(ended(&report, "ok"), 2);
        assert_eq!(ended(&report, "rate_limited"), 1);
        assert_eq!(report.summary.latency_ms["rate_limited"].max, Some(0.0));
        assert_eq!(report.end_ms, 1.0);
        let limiter = &report.summary.rate_limits["api"];
        assert_eq!((limiter.admitted, limiter.rejected), (2, 1));
    }

    #[test]
    fn a_limiter_with_a_store_checks_in_a_round_trip() {
        // 2.005 ms to the store and back, then 1 ms of work.
        let (s, check) = limited(true);
        let report = run(s, vec![check, work(ms(1))], &[(0, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 3.005);
        assert_eq!(report.summary.rate_limits["api"].admitted, 1);
    }

    #[test]
    fn a_store_that_does_not_answer_lets_the_check_through_when_fail_open() {
        // The server hangs: the check's command times out at 5 ms, the limiter fails open,
        // and the request works its 1 ms.
        let (mut s, check) = limited(true);
        s.connections[0].command_timeout = Some(ms(5));
        s.faults.push(FaultSpec {
            name: "hang".into(),
            target: FaultTarget::Server(ServerId(0)),
            kind: FaultKind::Hang,
            at: SimTime::ZERO,
            duration: None,
        });
        let report = run(s, vec![check, work(ms(1))], &[(0, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 6.0);
        let limiter = &report.summary.rate_limits["api"];
        assert_eq!((limiter.admitted, limiter.fail_open_admitted), (0, 1));
    }
}

//! A rate-limit step: a check costing one token. A local limiter (or a disabled one) answers
//! at once; one with a store checks and charges under the request's key with an `INCR` on the
//! store's connection, and waits for the reply. Either way the limiter decides the step's
//! result when it ends ([`decide`]): `rate_limited` when refused, and what an unreachable store
//! means is the limiter's `when_unreachable`.
//!
//! Buckets: a limiter with a store keeps one bucket per key it increments (a gateway's counter
//! per client: "20/s per client" over 1,000 clients is 1,000 buckets of 20/s), so its step's
//! key family says what is limited; a family of one key is one bucket for everyone. A local
//! limiter is one bucket per instance. The buckets held are in the run's memory estimate
//! ([`memory_bytes`]).

use std::collections::BTreeMap;

use outagelab_model::rate_limit::KeyedRateLimiter;
use outagelab_model::time::SimTime;
use outagelab_report::{CountKey, RateLimitSummary};

use crate::actions::Started;
use crate::engine::Simulator;
use crate::kernel::StepResult;
use crate::metrics::{CounterId, Metrics};
use crate::redis::Op;
use crate::rules::{self, StoreAnswer};
use crate::scenario::{ConnectionId, KeyFamilyId, RateLimitId, RedisCommand, Scenario};

pub(super) struct RateLimitSlot {
    /// One bucket per key of the store; a local limiter's one bucket is key 0.
    limiter: KeyedRateLimiter,
    enabled: bool,
    store: Option<ConnectionId>,
    /// Checks admitted unchecked because the store could not be reached, per bucket.
    fail_open_counter: CounterId,
    /// The key whose bucket the store's answer is for: set by [`answered`] for the request
    /// whose reply came in, and taken by the [`decide`] that follows it at once.
    answered_key: Option<u64>,
}

/// One slot per rate limiter, each with its fail-open counter.
pub(super) fn slots(scenario: &Scenario, metrics: &mut Metrics) -> Vec<RateLimitSlot> {
    scenario
        .rate_limits
        .iter()
        .map(|spec| RateLimitSlot {
            fail_open_counter: metrics
                .add_counter(CountKey::RateLimitFailOpenAdmitted(spec.name.clone())),
            limiter: KeyedRateLimiter::new(spec.config),
            enabled: spec.enabled,
            store: spec.store,
            answered_key: None,
        })
        .collect()
}

/// What the limiters' buckets take now, at most.
pub(super) fn memory_bytes(rate_limits: &[RateLimitSlot]) -> u64 {
    rate_limits
        .iter()
        .map(|slot| slot.limiter.memory_bytes())
        .sum()
}

pub(super) fn summaries(
    rate_limits: &[RateLimitSlot],
    scenario: &Scenario,
) -> BTreeMap<String, RateLimitSummary> {
    scenario
        .rate_limits
        .iter()
        .zip(rate_limits)
        .map(|(spec, slot)| {
            let summary = crate::summaries::rate_limit(slot.enabled, &slot.limiter.counters());
            (spec.name.clone(), summary)
        })
        .collect()
}

/// Asks the store, when the limiter has one and is on; otherwise the step ends at once, and
/// [`decide`] asks the limiter.
pub(super) fn start(
    sim: &mut Simulator<'_>,
    slot: u32,
    limiter: RateLimitId,
    key: Option<KeyFamilyId>,
    replay_writes: bool,
) -> Started {
    let id = limiter;
    let limiter = &sim.actions.rate_limits[id.index()];
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
                    sim.actions.rate_limits[id.index()].answered_key =
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
    sim: &mut Simulator<'_>,
    slot: u32,
    limiter: RateLimitId,
    key: Option<KeyFamilyId>,
) {
    if let Some(family) = key {
        let index = sim.key_of(slot, family);
        sim.actions.rate_limits[limiter.index()].answered_key =
            Some(rules::rate_limit_bucket(Some((family, index))));
    }
}

/// What a rate-limit step's result means once the limiter has had its say: `store` is what
/// the store's round trip returned (`Ok` for a local limiter), for the bucket of the key
/// [`answered`] named (key 0, the one bucket, for a local limiter).
pub(super) fn decide(
    rate_limits: &mut [RateLimitSlot],
    now: SimTime,
    metrics: &mut Metrics,
    limiter: RateLimitId,
    store: StepResult,
) -> StepResult {
    let slot = &mut rate_limits[limiter.index()];
    let key = slot.answered_key.take().unwrap_or(0);
    let limiter = &mut slot.limiter;
    let answer = rules::rate_limit_answer(slot.enabled, store, |store| match store {
        StoreAnswer::Answered => limiter.try_acquire(now, key, 1),
        StoreAnswer::Unreachable => limiter.on_store_unreachable(1),
    });
    if answer.failed_open {
        metrics.count(slot.fail_open_counter);
    }
    answer.result
}

#[cfg(test)]
mod tests {
    use outagelab_model::rate_limit::{
        Algorithm, BucketConfig, RateLimiterConfig, TokenRate, WhenStoreUnreachable,
    };

    use outagelab_model::time::SimTime;

    use outagelab_report::VariantReport;

    use crate::actions::testing::{CONNECTION, KEY, ended, ms, run, scenario, step, work};
    use crate::scenario::{
        Arrivals, FaultKind, FaultSpec, FaultTarget, FlowId, FlowSpec, LoadEnd, LoadSpec, Rate,
        RateLimitId, RateLimitSpec, Scenario, ServerId, StepAction, StepSpec,
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
        });
        let check = step(StepAction::RateLimit {
            limiter: RateLimitId(0),
            key: stored.then_some(KEY),
        });
        (s, check)
    }

    /// "20/s" with a burst of 20, checked in Redis under a family of `keys` client keys,
    /// against 400 requests a second, evenly spaced, for 10 s: 4,000 requests, each followed
    /// by 1 ms of work.
    fn twenty_a_second(keys: u32) -> VariantReport {
        let mut s = scenario();
        s.keys[0].count = keys;
        let bucket = BucketConfig::new(20, TokenRate::per_second(20).unwrap()).unwrap();
        let when = WhenStoreUnreachable::FailOpen;
        let config = RateLimiterConfig::new(bucket, Algorithm::TokenBucket, when).unwrap();
        s.rate_limits.push(RateLimitSpec {
            name: "api".into(),
            enabled: true,
            config,
            store: Some(CONNECTION),
        });
        let check = step(StepAction::RateLimit {
            limiter: RateLimitId(0),
            key: Some(KEY),
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
        crate::run(&s).expect("the scenario runs")
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

//! The live wrappers make the simulator's decisions: the same sequence of calls, outcomes and
//! instants fed to a model type directly (as the simulator drives it) and through its live
//! wrapper (on a [`ManualClock`], with a scripted connector) gives the same decisions and the
//! same counters at every step. No Redis and no wall clock.

use std::collections::VecDeque;
use std::sync::Mutex;

use outagelab_live::ManualClock;
use outagelab_live::breaker::LiveBreaker;
use outagelab_live::semaphore::LiveSemaphore;
use outagelab_live::slot::{Connector, LiveLease, LiveSlot, Unavailable};
use outagelab_model::breaker::{Admit, Breaker, BreakerConfig, CallOutcome, Rejection};
use outagelab_model::reconnect::{
    Acquire, ConnectionError, Failure, FailureEffect, Lease, ReconnectConfig, ReconnectSlot,
    ReconnectStats,
};
use outagelab_model::semaphore::{Semaphore, SemaphoreConfig};
use outagelab_model::time::{SimDuration, SimTime};

fn ms(millis: u64) -> SimTime {
    SimTime::from_nanos(millis * 1_000_000)
}

/// A connector whose attempts succeed or fail as scripted, at once (the clock does not move
/// during a connect, so the attempt ends at the instant it started, as in the model script).
struct Scripted {
    outcomes: Mutex<VecDeque<bool>>,
}

impl Scripted {
    fn new(outcomes: &[bool]) -> Self {
        Scripted {
            outcomes: Mutex::new(outcomes.iter().copied().collect()),
        }
    }
}

impl Connector for Scripted {
    type Connection = ();
    type Error = &'static str;

    async fn connect(&self) -> Result<(), &'static str> {
        let ok = self
            .outcomes
            .lock()
            .unwrap()
            .pop_front()
            .expect("the script has an outcome for every attempt");
        if ok { Ok(()) } else { Err("refused") }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotStep {
    /// A caller asks for the connection.
    Acquire,
    /// The command on the lease last handed out failed at the connection level.
    FailLast,
    /// A command on the first lease ever handed out failed (late, against an old generation).
    FailFirst,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotDecision {
    Lease { generation: u64 },
    ConnectFailed { backoff: SimDuration },
    BackingOff { retry_in: SimDuration },
    Failure(FailureEffect),
}

const IO: Failure = Failure::Connection(ConnectionError::Io);

/// The model, driven as `sim/src/reconnect_slots.rs` drives it: acquire; on "connect", the
/// attempt is made and reported at once with the scripted outcome.
fn model_slot(
    script: &[(u64, SlotStep)],
    outcomes: &[bool],
) -> (Vec<SlotDecision>, ReconnectStats) {
    let mut slot = ReconnectSlot::new(ReconnectConfig::seed_001());
    let mut outcomes = outcomes.iter().copied();
    let mut connections = 0;
    let (mut first, mut last): (Option<Lease>, Option<Lease>) = (None, None);
    let mut decisions = Vec::new();
    for &(at, step) in script {
        let now = ms(at);
        let decision = match step {
            SlotStep::Acquire => match slot.acquire(now) {
                Acquire::Lease(lease) => {
                    first.get_or_insert(lease);
                    last = Some(lease);
                    SlotDecision::Lease {
                        generation: lease.generation().get(),
                    }
                }
                Acquire::Connect(ticket) => {
                    if outcomes.next().expect("scripted") {
                        connections += 1;
                        let lease = slot.on_connected(now, ticket, connections).lease;
                        first.get_or_insert(lease);
                        last = Some(lease);
                        SlotDecision::Lease {
                            generation: lease.generation().get(),
                        }
                    } else {
                        SlotDecision::ConnectFailed {
                            backoff: slot.on_connect_failed(now, ticket).backoff,
                        }
                    }
                }
                Acquire::Unavailable { retry_in } => SlotDecision::BackingOff { retry_in },
                Acquire::Wait(attempt) => {
                    panic!("no attempt spans two steps, got wait {attempt:?}")
                }
            },
            SlotStep::FailLast => {
                SlotDecision::Failure(slot.on_failure(now, last.as_ref().unwrap(), IO))
            }
            SlotStep::FailFirst => {
                SlotDecision::Failure(slot.on_failure(now, first.as_ref().unwrap(), IO))
            }
        };
        decisions.push(decision);
    }
    (decisions, slot.stats())
}

async fn live_slot(
    script: &[(u64, SlotStep)],
    outcomes: &[bool],
) -> (Vec<SlotDecision>, ReconnectStats) {
    let clock = ManualClock::new();
    let slot = LiveSlot::with_clock(
        ReconnectConfig::seed_001(),
        Scripted::new(outcomes),
        clock.clone(),
    );
    let (mut first, mut last): (Option<LiveLease<()>>, Option<LiveLease<()>>) = (None, None);
    let mut decisions = Vec::new();
    for &(at, step) in script {
        clock.set(ms(at));
        let decision = match step {
            SlotStep::Acquire => match slot.lease().await {
                Ok(lease) => {
                    let generation = lease.generation().get();
                    first.get_or_insert(lease.clone());
                    last = Some(lease);
                    SlotDecision::Lease { generation }
                }
                Err(Unavailable::ConnectFailed { backoff }) => {
                    SlotDecision::ConnectFailed { backoff }
                }
                Err(Unavailable::BackingOff { retry_in }) => SlotDecision::BackingOff { retry_in },
                Err(Unavailable::StillConnecting) => panic!("no attempt spans two steps"),
            },
            SlotStep::FailLast => {
                SlotDecision::Failure(slot.on_failure(last.as_ref().unwrap(), IO))
            }
            SlotStep::FailFirst => {
                SlotDecision::Failure(slot.on_failure(first.as_ref().unwrap(), IO))
            }
        };
        decisions.push(decision);
    }
    (decisions, slot.stats())
}

#[tokio::test]
async fn the_reconnect_slot_decides_the_same_live_and_simulated() {
    use SlotStep::*;
    // Connect, lose it, reconnect at once, then an outage: refused attempts paced by windows
    // of 100, 200, 400 ms (each measured from the failure), callers inside a window failing
    // open up to its last millisecond, a late failure against generation 1 that evicts
    // nothing, recovery as generation 3, and a late failure against it after its eviction.
    let script = [
        (0, Acquire),
        (5, Acquire),
        (10, FailLast),
        (11, Acquire),
        (20, FailLast),
        (21, Acquire),
        (50, Acquire),
        (120, Acquire),
        (121, Acquire),
        (300, Acquire),
        (321, Acquire),
        (700, Acquire),
        (720, Acquire),
        (721, FailFirst),
        (722, Acquire),
        (730, FailLast),
        (731, FailFirst),
    ];
    let outcomes = [true, true, false, false, false, true];
    let (simulated, simulated_stats) = model_slot(&script, &outcomes);
    let (live, live_stats) = live_slot(&script, &outcomes).await;
    assert_eq!(live, simulated);
    assert_eq!(live_stats, simulated_stats);
    assert_eq!(
        (
            simulated_stats.attempts_total,
            simulated_stats.connect_failures_total
        ),
        (6, 3)
    );
    // And the script says what it means to: the decisions, hand-checked.
    use SlotDecision as D;
    let backoff = SimDuration::from_millis;
    assert_eq!(
        simulated,
        vec![
            D::Lease { generation: 1 },
            D::Lease { generation: 1 },
            D::Failure(FailureEffect::Evicted),
            D::Lease { generation: 2 },
            D::Failure(FailureEffect::Evicted),
            D::ConnectFailed {
                backoff: backoff(100)
            },
            D::BackingOff {
                retry_in: backoff(71)
            },
            D::BackingOff {
                retry_in: backoff(1)
            },
            D::ConnectFailed {
                backoff: backoff(200)
            },
            D::BackingOff {
                retry_in: backoff(21)
            },
            D::ConnectFailed {
                backoff: backoff(400)
            },
            D::BackingOff {
                retry_in: backoff(21)
            },
            D::BackingOff {
                retry_in: backoff(1)
            },
            D::Failure(FailureEffect::NotCurrent),
            D::Lease { generation: 3 },
            D::Failure(FailureEffect::Evicted),
            D::Failure(FailureEffect::NotCurrent),
        ]
    );
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BreakerDecision {
    Admitted { probe: bool },
    Rejected(Rejection),
}

#[test]
fn the_breaker_decides_the_same_live_and_simulated() {
    use CallOutcome::*;
    let config = BreakerConfig::new(3, SimDuration::from_millis(100), 2).unwrap();
    // (admitted at, ends at, outcome if admitted): each call ends before the next starts, as
    // one caller's sequence; failures open it, open_for passes, probes close it, a failed
    // probe reopens it, an ignored probe frees its slot.
    let calls = [
        (0, 1, Success),
        (2, 3, Failure),
        (4, 5, Failure),
        (6, 7, Failure),
        (50, 51, Success),
        (107, 108, Success),
        (109, 110, Failure),
        (150, 151, Success),
        (210, 211, Ignored),
        (212, 213, Success),
        (214, 215, Success),
        (216, 217, Failure),
    ];
    let mut model = Breaker::new(config);
    let clock = ManualClock::new();
    let live = LiveBreaker::with_clock(config, clock.clone());
    for (index, &(start, end, outcome)) in calls.iter().enumerate() {
        let simulated = match model.try_admit(ms(start)) {
            Admit::Yes(ticket) => {
                let probe = ticket.is_probe();
                model.on_result(ms(end), ticket, outcome);
                BreakerDecision::Admitted { probe }
            }
            Admit::No(rejection) => BreakerDecision::Rejected(rejection),
        };
        clock.set(ms(start));
        let decided = match live.try_admit() {
            Ok(guard) => {
                let probe = guard.is_probe();
                clock.set(ms(end));
                guard.finish(outcome);
                BreakerDecision::Admitted { probe }
            }
            Err(rejection) => BreakerDecision::Rejected(rejection),
        };
        clock.set(ms(end));
        assert_eq!(decided, simulated, "call {index} at {start} ms");
        assert_eq!(
            live.state(),
            model.state_at(ms(end)),
            "state after call {index}"
        );
        assert_eq!(live.opened_total(), model.opened_total());
    }
    assert_eq!(
        model.opened_total(),
        2,
        "opened by failures, reopened by a failed probe"
    );
}

#[test]
fn the_semaphore_decides_the_same_live_and_simulated() {
    let config = SemaphoreConfig::new(Some(3), Some(5 << 20)).unwrap();
    let mut model = Semaphore::new(config);
    let live = LiveSemaphore::new(config);
    let mut model_permits = Vec::new();
    let mut live_permits = Vec::new();
    // Sizes in MiB to acquire; 0 releases the oldest permit held.
    let script = [2, 2, 2, 1, 6, 0, 2, 1, 1, 0, 0, 4, 0, 4];
    for (index, &mib) in script.iter().enumerate() {
        if mib == 0 {
            model.release(model_permits.remove(0));
            drop(live_permits.remove(0));
        } else {
            let bytes = mib << 20;
            let simulated = model.try_acquire(bytes);
            let decided = live.try_acquire(bytes);
            assert_eq!(
                decided
                    .as_ref()
                    .map(|permit| permit.bytes())
                    .map_err(|r| *r),
                simulated
                    .as_ref()
                    .map(|permit| permit.bytes())
                    .map_err(|r| *r),
                "step {index}: {mib} MiB"
            );
            if let (Ok(simulated), Ok(decided)) = (simulated, decided) {
                model_permits.push(simulated);
                live_permits.push(decided);
            }
        }
        assert_eq!(
            live.counters(),
            model.counters(),
            "counters after step {index}"
        );
    }
    assert!(
        model.counters().rejected_total() >= 3,
        "the script hit the caps"
    );
    for permit in model_permits {
        model.release(permit);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BulkheadStep {
    /// A call asks for a permit (the model names it by the number of calls before it).
    Acquire,
    /// The permit of the call numbered so is given back.
    Release(u64),
    /// The queued call numbered so gives up its place.
    Cancel(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BulkheadDecision {
    Granted,
    Queued,
    Shed,
    /// A released permit went to the call numbered so, or to nobody.
    HandedTo(Option<u64>),
    Cancelled(bool),
}

#[test]
fn the_bulkhead_decides_the_same_live_and_simulated() {
    use BulkheadStep::*;
    use outagelab_live::bulkhead::{BulkheadPermit, Entry, LiveBulkhead, Queued};
    use outagelab_model::bulkhead::{Acquire, Bulkhead, BulkheadConfig, Permit};
    let config = BulkheadConfig::new(2, 2).unwrap();
    // Two run, two queue, the fifth is shed; a release hands its permit to the oldest waiter;
    // a waiter that gives up leaves the queue and the next release skips it; a release with
    // nobody queued frees the permit.
    let script = [
        Acquire,
        Acquire,
        Acquire,
        Acquire,
        Acquire,
        Release(0),
        Acquire,
        Cancel(3),
        Release(1),
        Release(2),
        Acquire,
        Acquire,
        Acquire,
    ];
    let mut model = Bulkhead::new(config);
    let mut model_permits: std::collections::BTreeMap<u64, Permit> = Default::default();
    let live = LiveBulkhead::new(config);
    let mut live_permits: std::collections::BTreeMap<u64, BulkheadPermit> = Default::default();
    let mut live_queued: std::collections::BTreeMap<u64, Queued> = Default::default();
    let mut calls = 0;
    for (index, &step) in script.iter().enumerate() {
        let (simulated, decided) = match step {
            Acquire => {
                let call = calls;
                calls += 1;
                let simulated = match model.try_acquire(call) {
                    Acquire::Granted(permit) => {
                        model_permits.insert(call, permit);
                        BulkheadDecision::Granted
                    }
                    Acquire::Queued => BulkheadDecision::Queued,
                    Acquire::Shed => BulkheadDecision::Shed,
                };
                let decided = match live.try_acquire() {
                    Entry::Granted(permit) => {
                        live_permits.insert(call, permit);
                        BulkheadDecision::Granted
                    }
                    Entry::Queued(queued) => {
                        live_queued.insert(call, queued);
                        BulkheadDecision::Queued
                    }
                    Entry::Shed => BulkheadDecision::Shed,
                };
                (simulated, decided)
            }
            Release(call) => {
                let simulated = match model.release(model_permits.remove(&call).unwrap()) {
                    Some(grant) => {
                        model_permits.insert(grant.waiter, grant.permit);
                        BulkheadDecision::HandedTo(Some(grant.waiter))
                    }
                    None => BulkheadDecision::HandedTo(None),
                };
                drop(live_permits.remove(&call).unwrap());
                let handed = live_queued
                    .iter_mut()
                    .find_map(|(&waiter, queued)| Some((waiter, queued.try_take()?)));
                let decided = match handed {
                    Some((waiter, permit)) => {
                        live_queued.remove(&waiter);
                        live_permits.insert(waiter, permit);
                        BulkheadDecision::HandedTo(Some(waiter))
                    }
                    None => BulkheadDecision::HandedTo(None),
                };
                (simulated, decided)
            }
            Cancel(call) => {
                let simulated = BulkheadDecision::Cancelled(model.cancel(call));
                let decided = BulkheadDecision::Cancelled(live_queued.remove(&call).is_some());
                (simulated, decided)
            }
        };
        assert_eq!(decided, simulated, "step {index}: {step:?}");
        assert_eq!(
            live.occupancy(),
            (model.in_use(), model.queued()),
            "occupancy after step {index}"
        );
    }
    assert_eq!(model.in_use(), 2, "the script ends with the bulkhead full");
    for (_, permit) in model_permits {
        let _ = model.release(permit);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RetryStep {
    /// A request starts (the model names it by the number of requests before it).
    Request,
    /// An attempt of the request numbered so fails, the server asking for this wait (ms).
    Fail(usize, Option<u64>),
}

#[test]
fn the_retry_policy_decides_the_same_live_and_simulated() {
    use RetryStep::*;
    use outagelab_live::retry::LiveRetry;
    use outagelab_model::backoff::{BackoffConfig, Jitter};
    use outagelab_model::random::SplitMix64;
    use outagelab_model::retry::{RetryBudgetConfig, RetryConfig, RetryPolicy};
    let backoff = BackoffConfig::new(
        SimDuration::from_millis(100),
        2000,
        SimDuration::from_secs(1),
        Jitter::Full,
    )
    .unwrap();
    // 3 attempts; retries at most half the last second's requests plus one a second; no
    // Retry-After above 2 s.
    let budget = RetryBudgetConfig::new(500, 1, SimDuration::from_secs(1)).unwrap();
    let config =
        RetryConfig::new(3, backoff, Some(budget), Some(SimDuration::from_secs(2))).unwrap();
    // Jittered backoffs from one seeded source: retries granted on the reserve and on what
    // the requests earn, then the attempt cap, the budget spent, a Retry-After too long, the
    // window forgetting the old requests, and a Retry-After honoured.
    let script = [
        (0, Request),
        (1, Fail(0, None)),
        (2, Request),
        (3, Fail(1, None)),
        (10, Request),
        (11, Request),
        (12, Request),
        (13, Request),
        (14, Fail(1, None)),
        (200, Fail(0, None)),
        (400, Fail(0, None)),
        (401, Fail(2, Some(500))),
        (402, Fail(3, Some(3000))),
        (2500, Request),
        (2501, Fail(6, None)),
        (2600, Request),
        (2601, Fail(7, Some(300))),
    ];
    let mut model = RetryPolicy::new(config);
    let mut model_random = SplitMix64(7);
    let clock = ManualClock::new();
    let live = LiveRetry::with_clock(config, SplitMix64(7), clock.clone());
    let (mut model_requests, mut live_requests) = (Vec::new(), Vec::new());
    let mut decisions = Vec::new();
    for (index, &(at, step)) in script.iter().enumerate() {
        clock.set(ms(at));
        match step {
            Request => {
                model_requests.push(model.on_request(ms(at)));
                live_requests.push(live.on_request());
            }
            Fail(request, retry_after) => {
                let retry_after = retry_after.map(SimDuration::from_millis);
                let simulated = model.on_failure(
                    ms(at),
                    &mut model_requests[request],
                    retry_after,
                    &mut model_random,
                );
                let decided = live.on_failure(&mut live_requests[request], retry_after);
                assert_eq!(decided, simulated, "step {index}: {step:?} at {at} ms");
                decisions.push(simulated);
            }
        }
        assert_eq!(
            live.counters(),
            model.counters(),
            "counters after step {index}"
        );
    }
    // And the script says what it means to: the rule each failure met, hand-checked.
    use outagelab_model::retry::{GiveUpReason as Why, RetryDecision as D};
    let kinds: Vec<Option<Why>> = (decisions.iter())
        .map(|decision| match decision {
            D::Retry { .. } => None,
            D::GiveUp(reason) => Some(*reason),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            None,
            None,
            None,
            None,
            Some(Why::AttemptsExhausted),
            Some(Why::BudgetExhausted),
            Some(Why::RetryAfterTooLong),
            None,
            None,
        ]
    );
    let D::Retry { at } = decisions[8] else {
        unreachable!()
    };
    assert!(at >= ms(2901), "the Retry-After was honoured: {at}");
}

#[test]
fn the_rate_limiter_decides_the_same_live_and_simulated() {
    use outagelab_live::rate_limit::LiveRateLimiter;
    use outagelab_model::rate_limit::{
        Algorithm, BucketConfig, RateLimiter, RateLimiterConfig, TokenRate, WhenStoreUnreachable,
    };
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let bucket = BucketConfig::new(3, TokenRate::per_second(2).unwrap()).unwrap();
        let config =
            RateLimiterConfig::new(bucket, algorithm, WhenStoreUnreachable::FailOpen).unwrap();
        // (at ms, cost, store reachable): a burst empties the bucket, a rejection says when,
        // the refill admits again, a cost above capacity is too large, the store's outage
        // admits unchecked.
        let calls = [
            (0, 1, true),
            (1, 2, true),
            (2, 1, true),
            (400, 1, true),
            (501, 1, true),
            (600, 4, true),
            (700, 1, false),
            (701, 1, false),
            (2000, 3, true),
            (2001, 1, true),
        ];
        let mut model = RateLimiter::new(config);
        let clock = ManualClock::new();
        let live = LiveRateLimiter::with_clock(config, clock.clone());
        for (index, &(at, cost, reachable)) in calls.iter().enumerate() {
            clock.set(ms(at));
            let (simulated, decided) = if reachable {
                (model.try_acquire(ms(at), cost), live.try_acquire(cost))
            } else {
                (
                    model.on_store_unreachable(cost),
                    live.on_store_unreachable(cost),
                )
            };
            assert_eq!(decided, simulated, "{algorithm:?} call {index} at {at} ms");
            assert_eq!(live.tokens(), model.tokens(ms(at)));
            assert_eq!(live.counters(), model.counters());
        }
        let counters = model.counters();
        assert!(
            counters.rejected >= 2 && counters.too_large == 1 && counters.fail_open_admitted == 2,
            "{algorithm:?}: {counters:?}"
        );
    }
}

#[test]
fn the_adaptive_limit_decides_the_same_live_and_simulated() {
    use outagelab_live::adaptive_limit::{CallEnd, LiveAdaptiveLimit};
    use outagelab_model::adaptive_limit::{
        Acquire, AdaptiveLimit, AdaptiveLimitConfig, Algorithm, Outcome,
    };
    for algorithm in [Algorithm::AIMD_NETFLIX, Algorithm::GRADIENT2_NETFLIX] {
        let config = AdaptiveLimitConfig::new(4, 2, 8, algorithm).unwrap();
        let mut model = AdaptiveLimit::new(config);
        let clock = ManualClock::new();
        let live = LiveAdaptiveLimit::with_clock(config, clock.clone());
        // Rounds of calls admitted together at `at` and ended `rtt` later, each as `end`:
        // fills to the limit and past it (rejections), fast successes (the limit grows),
        // drops and slow calls (it shrinks), an ignored call (it stays).
        let rounds: [(u64, u64, usize, CallEnd); 8] = [
            (0, 5, 6, CallEnd::Success),
            (10, 5, 4, CallEnd::Success),
            (20, 5, 6, CallEnd::Success),
            (30, 50, 8, CallEnd::Success),
            (100, 5, 6, CallEnd::Dropped),
            (200, 5, 3, CallEnd::Ignored),
            (300, 900, 5, CallEnd::Success),
            (2000, 5, 9, CallEnd::Success),
        ];
        for (round, &(at, rtt, calls, end)) in rounds.iter().enumerate() {
            clock.set(ms(at));
            let mut permits = Vec::new();
            let mut guards = Vec::new();
            for call in 0..calls {
                let simulated = match model.try_acquire(ms(at)) {
                    Acquire::Granted(permit) => {
                        permits.push(permit);
                        true
                    }
                    Acquire::Rejected => false,
                };
                let decided = match live.try_acquire() {
                    Ok(guard) => {
                        guards.push(guard);
                        true
                    }
                    Err(_) => false,
                };
                assert_eq!(
                    decided, simulated,
                    "{algorithm:?} round {round} call {call}"
                );
            }
            clock.set(ms(at + rtt));
            let rtt = SimDuration::from_millis(rtt);
            let outcome = match end {
                CallEnd::Success => Outcome::Success { rtt },
                CallEnd::Dropped => Outcome::Dropped { rtt },
                CallEnd::Ignored => Outcome::Ignored,
            };
            for (permit, guard) in permits.into_iter().zip(guards) {
                model.release(ms(at).saturating_add(rtt), permit, outcome);
                guard.finish(end);
                assert_eq!(live.limit(), model.limit(), "{algorithm:?} round {round}");
            }
            assert_eq!(
                live.counters(),
                model.counters(),
                "{algorithm:?} round {round}"
            );
        }
        let counters = model.counters();
        assert!(
            counters.rejected > 0
                && counters.dropped > 0
                && counters.limit_max_seen > 4
                && counters.limit_min_seen < counters.limit_max_seen,
            "{algorithm:?}: {counters:?}"
        );
    }
}

#[test]
fn the_cache_decides_the_same_live_and_simulated() {
    use outagelab_live::cache::LiveCache;
    use outagelab_model::cache::{Cache, CacheConfig, CacheKey};
    // Two entries or 3 KiB at most, a TTL of 100 ms.
    let config = CacheConfig::new(2, 3 << 10, SimDuration::from_millis(100)).unwrap();
    #[derive(Clone, Copy, Debug)]
    enum Op {
        Get(u64),
        Put(u64, u64),
        Invalidate(u64),
        Flush,
    }
    // (at ms, op): stores, a hit, a third key evicting the least recently used, a value too
    // large, an expiry, an invalidation and a flush.
    let calls = [
        (0, Op::Put(1, 1024)),
        (1, Op::Put(2, 1024)),
        (2, Op::Get(1)),
        (3, Op::Put(3, 1024)),
        (4, Op::Get(2)),
        (5, Op::Put(4, 8 << 10)),
        (50, Op::Get(1)),
        (150, Op::Get(3)),
        (151, Op::Put(5, 512)),
        (152, Op::Invalidate(5)),
        (153, Op::Get(5)),
        (154, Op::Put(6, 512)),
        (155, Op::Flush),
        (156, Op::Get(6)),
    ];
    let mut model = Cache::new(config);
    let clock = ManualClock::new();
    let live = LiveCache::with_clock(config, clock.clone());
    for (index, &(at, op)) in calls.iter().enumerate() {
        clock.set(ms(at));
        let now = ms(at);
        let (simulated, decided) = match op {
            Op::Get(key) => (
                format!("{:?}", model.get(now, CacheKey::Id(key))),
                format!("{:?}", live.get(CacheKey::Id(key))),
            ),
            Op::Put(key, bytes) => (
                format!("{:?}", model.insert(now, CacheKey::Id(key), at, bytes)),
                format!("{:?}", live.insert(CacheKey::Id(key), at, bytes)),
            ),
            Op::Invalidate(key) => (
                format!("{:?}", model.invalidate(CacheKey::Id(key))),
                format!("{:?}", live.invalidate(CacheKey::Id(key))),
            ),
            Op::Flush => (
                format!("{:?}", model.flush()),
                format!("{:?}", live.flush()),
            ),
        };
        assert_eq!(decided, simulated, "call {index}: {op:?} at {at} ms");
        assert_eq!(live.len(), model.len());
        assert_eq!(live.counters(), model.counters());
    }
    let counters = model.counters();
    assert!(
        counters.hits >= 2
            && counters.evictions >= 1
            && counters.expirations >= 1
            && counters.invalidations == 1
            && counters.flushes == 1,
        "{counters:?}"
    );
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ThrottleStep {
    /// A cascade asks for a slot (named by the number of asks before it).
    Acquire,
    /// The cascade numbered so ends.
    Release(usize),
}

#[test]
fn the_cascade_throttle_decides_the_same_live_and_simulated() {
    use ThrottleStep::*;
    use outagelab_live::throttle::LiveThrottle;
    use outagelab_model::throttle::{AtomicThrottle, CounterTtl, Decision, ThrottleConfig};
    for ttl in [
        CounterTtl::Never,
        CounterTtl::FixedAtCreation(SimDuration::from_secs(5)),
    ] {
        let config =
            ThrottleConfig::new(2, SimDuration::from_secs(1), ttl, SimDuration::ZERO).unwrap();
        // A cap of 2: the third is refused with Retry-After 1 s until one ends; with a fixed
        // TTL the counter expires at 5 s under the slots still held, and two more get in.
        let script = [
            (0, Acquire),
            (1, Acquire),
            (2, Acquire),
            (3, Release(0)),
            (4, Acquire),
            (5, Acquire),
            (5000, Acquire),
            (5001, Acquire),
            (5002, Release(1)),
        ];
        let mut model = AtomicThrottle::new(config);
        let clock = ManualClock::new();
        let live = LiveThrottle::with_clock(config, clock.clone());
        let (mut model_slots, mut live_slots) = (Vec::new(), Vec::new());
        for (index, &(at, step)) in script.iter().enumerate() {
            clock.set(ms(at));
            match step {
                Acquire => {
                    let simulated = match model.try_acquire(ms(at)) {
                        Decision::Admit(slot) => {
                            model_slots.push(Some(slot));
                            Ok(())
                        }
                        Decision::Reject(rejection) => {
                            model_slots.push(None);
                            Err(rejection)
                        }
                    };
                    let decided = match live.try_acquire() {
                        Ok(slot) => {
                            live_slots.push(Some(slot));
                            Ok(())
                        }
                        Err(rejection) => {
                            live_slots.push(None);
                            Err(rejection)
                        }
                    };
                    assert_eq!(decided, simulated, "{ttl:?} step {index} at {at} ms");
                }
                Release(cascade) => {
                    let slot = model_slots[cascade].take().expect("it was admitted");
                    model.release(ms(at), slot);
                    drop(live_slots[cascade].take().expect("it was admitted"));
                }
            }
            assert_eq!(
                live.stats(),
                model.stats(),
                "{ttl:?} stats after step {index}"
            );
            assert_eq!(live.counter(), model.counter(ms(at)));
        }
        let stats = model.stats();
        assert!(stats.rejected >= 2, "{ttl:?}: {stats:?}");
        if ttl == CounterTtl::Never {
            assert_eq!(stats.holders_peak, 2, "the cap held");
        } else {
            assert!(
                stats.holders_peak > 2,
                "the expired counter let more in: {stats:?}"
            );
        }
        for slot in model_slots.into_iter().flatten() {
            model.release(ms(6000), slot);
        }
    }
}

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

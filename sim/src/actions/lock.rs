//! A lock step: an acquire or a release of a distributed lock on the request's key, each
//! attempt and the release a Redis command on the lock's connection. `model::lock`'s client
//! runs the acquire loop: a busy attempt waits ([`Waiting::LockRetry`]) and tries again until
//! the acquire's deadline (`lock_timeout`); an acquired lock is held until a release (a
//! release that finds its lease expired is refused and counted, and the step succeeds).

use std::collections::BTreeMap;

use outagelab_model::lock::{
    Acquiring, Attempt, AttemptEnd, AttemptReply, Held, LockClient, LockToken, ReleaseReply, Wake,
};
use outagelab_model::time::SimTime;
use outagelab_report::{LockSummary, Outcome};

use crate::actions::Host;
use crate::actions::{RequestHeld, Started, Timer, Waiting};
use crate::kernel::{StepResult, TimerKind};
use crate::redis::{Op, Redis};
use crate::rng::Stream;
use crate::scenario::{
    ConnectionId, KeyFamilyId, LockCommand, LockCommandKind, LockId, LockOp, RedisCommand,
    Scenario, StepAction,
};

pub(super) struct LockSlot {
    client: LockClient,
    /// Jitters the waits after busy attempts.
    rng: Stream,
}

/// One client per lock, its tokens in the namespace of the lock's index.
pub(super) fn slots(scenario: &Scenario) -> Vec<LockSlot> {
    scenario
        .locks
        .iter()
        .enumerate()
        .map(|(index, spec)| LockSlot {
            client: LockClient::new(spec.config, index as u32),
            rng: Stream::derive(scenario.seed, "lock", &spec.name),
        })
        .collect()
}

pub(super) fn summaries(
    locks: &[LockSlot],
    scenario: &Scenario,
    now: SimTime,
    redis: &Redis,
) -> BTreeMap<String, LockSummary> {
    scenario
        .locks
        .iter()
        .zip(locks)
        .enumerate()
        .map(|(index, (spec, slot))| {
            let counters = slot.client.counters();
            let server = redis.lock_stats(now, LockId(index as u32));
            let summary = LockSummary {
                acquired: counters.acquired,
                busy_retries: counters.busy_retries,
                timed_out: counters.timed_out,
                released: counters.released,
                release_refused: counters.release_refused,
                expired_leases: server.expired_leases,
                peak_writers: server.peak_writers,
                peak_readers: server.peak_readers,
            };
            (spec.name.clone(), summary)
        })
        .collect()
}

/// What a lock step's command in flight stands for.
pub(super) enum LockPending {
    /// An acquire's attempt.
    Attempt(Acquiring, Attempt),
    /// A release of the holder with this token.
    Release(LockToken),
}

/// Takes the last hold of `lock` in `held`, if any.
pub(super) fn take_held(held: &mut RequestHeld, lock: LockId) -> Option<(LockId, Held)> {
    let index = held.locks.iter().rposition(|(id, _)| *id == lock)?;
    Some(held.locks.remove(index))
}

/// Sends the acquire's first attempt or the release (or, after a slot's connection attempt or
/// for a replay, the command already in flight again).
pub(super) fn start(
    sim: &mut impl Host,
    slot: u32,
    lock: LockId,
    op: LockOp,
    connection: ConnectionId,
    key: KeyFamilyId,
) -> Started {
    let pending = match (sim.held(slot).lock_pending.take(), op) {
        // Sent again: after a slot's connection attempt, or replayed.
        (Some(pending), _) => pending,
        (None, LockOp::Acquire(mode)) => {
            let now = sim.now();
            let (acquiring, attempt) = sim.actions().locks[lock.index()].client.begin(now, mode);
            LockPending::Attempt(acquiring, attempt)
        }
        (None, LockOp::Release) => {
            let Some((_, held)) = take_held(sim.held(slot), lock) else {
                // Holds none: nothing to give back.
                return Started::Ended(StepResult::Ok);
            };
            let (token, _) = sim.actions().locks[lock.index()].client.release(held);
            LockPending::Release(token)
        }
    };
    command(sim, slot, lock, connection, key, pending)
}

/// The wait after a busy attempt of the request in `slot` is over: it attempts again, or its
/// acquire has timed out.
pub(super) fn on_timer(sim: &mut impl Host, slot: u32, acquiring: Acquiring) -> Started {
    let StepAction::Lock {
        lock,
        connection,
        key,
        ..
    } = sim.step_action(slot)
    else {
        unreachable!("a lock retry on a lock step");
    };
    let now = sim.now();
    match sim.actions().locks[lock.index()]
        .client
        .wake(now, acquiring)
    {
        Wake::Attempt(acquiring, attempt) => {
            let pending = LockPending::Attempt(acquiring, attempt);
            command(sim, slot, lock, connection, key, pending)
        }
        Wake::TimedOut => Started::Ended(StepResult::Error(Outcome::LockTimeout)),
    }
}

/// Sends a lock step's command for the request in `slot`, which keeps `pending` until the
/// result comes; the result goes through [`on_reply`].
fn command(
    sim: &mut impl Host,
    slot: u32,
    lock: LockId,
    connection: ConnectionId,
    key: KeyFamilyId,
    pending: LockPending,
) -> Started {
    let command = match &pending {
        LockPending::Attempt(acquiring, _) => LockCommand {
            token: acquiring.token(),
            kind: LockCommandKind::Acquire {
                mode: acquiring.mode(),
                lease: sim.actions().locks[lock.index()].client.config().lease(),
            },
        },
        &LockPending::Release(token) => LockCommand {
            token,
            kind: LockCommandKind::Release,
        },
    };
    sim.held(slot).lock_pending = Some(pending);
    let op = Op {
        command: RedisCommand::Lock(command),
        family: key.0,
        index: sim.key_of(slot, key),
        version: 0,
    };
    match sim.issue_command(slot, connection, op, false) {
        None => Started::Waits,
        Some(result) => match on_reply(sim, slot, lock, result) {
            Some(result) => Started::Ended(result),
            None => Started::Waits,
        },
    }
}

/// A lock step's command ended with `result`: what the step returns, or `None` when the
/// request waits to try again (the lock was taken, before the acquire's deadline).
pub(super) fn on_reply(
    sim: &mut impl Host,
    slot: u32,
    lock: LockId,
    result: StepResult,
) -> Option<StepResult> {
    let pending = sim.held(slot).lock_pending.take();
    // Each attempt is a write of its own: the next one is not a copy of this one.
    sim.close_origin(slot);
    let now = sim.now();
    let client = &mut sim.actions().locks[lock.index()].client;
    let (acquiring, attempt) = match pending.expect("a lock command keeps what it sent") {
        LockPending::Attempt(acquiring, attempt) => (acquiring, attempt),
        LockPending::Release(_) => {
            // A release that found no holder with its token (the lease had expired) is
            // refused, and counted; the step itself succeeds.
            client.on_released(match result {
                StepResult::Ok => ReleaseReply::Released,
                StepResult::Miss => ReleaseReply::NotHolder,
                _ => ReleaseReply::Failed,
            });
            return Some(match result {
                StepResult::Miss | StepResult::Hit => StepResult::Ok,
                other => other,
            });
        }
    };
    let reply = match result {
        StepResult::Ok => AttemptReply::Acquired,
        StepResult::Error(Outcome::LockBusy) => AttemptReply::Busy,
        _ => AttemptReply::Failed,
    };
    let slot_of_lock = &mut sim.actions().locks[lock.index()];
    let random = &mut slot_of_lock.rng;
    match slot_of_lock
        .client
        .on_reply(now, acquiring, attempt, reply, random)
    {
        AttemptEnd::Held(held) => {
            sim.held(slot).locks.push((lock, held));
            Some(StepResult::Ok)
        }
        AttemptEnd::Sleep { acquiring, until } => {
            let kept = sim.actions().lock_retries.insert(slot, acquiring);
            debug_assert!(kept.is_none(), "one wait at a time");
            sim.wait(slot, Waiting::LockRetry);
            sim.set_timer(slot, until, TimerKind::Action(Timer::LockRetry));
            None
        }
        AttemptEnd::TimedOut => Some(StepResult::Error(Outcome::LockTimeout)),
        AttemptEnd::Failed => Some(result),
    }
}

#[cfg(test)]
mod tests {
    use outagelab_model::lock::LockConfig;

    use crate::actions::testing::{CONNECTION, KEY, ended, ms, run, scenario, step, work};
    use crate::scenario::{LockId, LockMode, LockOp, LockSpec, StepAction};

    fn lock(op: LockOp) -> crate::scenario::StepSpec {
        step(StepAction::Lock {
            lock: LockId(0),
            op,
            connection: CONNECTION,
            key: KEY,
        })
    }

    fn with_lock(acquire_timeout_ms: u64) -> crate::scenario::Scenario {
        let mut s = scenario();
        let config = LockConfig::new(ms(1_000), ms(1), ms(acquire_timeout_ms)).unwrap();
        s.locks.push(LockSpec {
            name: "job".into(),
            config,
        });
        s
    }

    fn steps() -> Vec<crate::scenario::StepSpec> {
        vec![
            lock(LockOp::Acquire(LockMode::Exclusive)),
            work(ms(10)),
            lock(LockOp::Release),
        ]
    }

    #[test]
    fn an_acquire_and_a_release_are_a_round_trip_each() {
        // 2.005 ms to acquire, 10 ms of work, 2.005 ms to release.
        let report = run(with_lock(100), steps(), &[(0, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 14.01);
        let summary = &report.summary.locks["job"];
        assert_eq!((summary.acquired, summary.released), (1, 1));
        assert_eq!(summary.busy_retries, 0);
    }

    #[test]
    fn a_lock_held_past_the_acquire_timeout_fails_the_other_acquire() {
        // The first holds the lock until its release lands (at 14.01 ms); the second finds it
        // busy, tries again every 1 ms (jittered) and gives up 5 ms in.
        let report = run(with_lock(5), steps(), &[(0, 2)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(ended(&report, "lock_timeout"), 1);
        assert_eq!(report.end_ms, 14.01);
        let summary = &report.summary.locks["job"];
        assert_eq!((summary.acquired, summary.timed_out), (1, 1));
        assert!(summary.busy_retries >= 1);
    }
}

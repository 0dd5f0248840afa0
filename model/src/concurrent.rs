//! Concurrent forms of the policies: the same state machines, shared between threads.
//!
//! Each wrapper holds the sans-IO state machine behind a mutex from [`crate::sync`], so the
//! logic that threads run is exactly the logic the simulator drives; only the waiting is new.
//! Under `cfg(loom)` the mutex and condition variable are loom's, and the loom models at the
//! bottom of this file check the interleavings of two or three threads, up to the preemption
//! bound that the crate pins for every loom model.
//!
//! Time is still an argument: callers pass `now` (a real service would read its clock once
//! per call and pass it in).

use crate::breaker::{Admit, Breaker, BreakerConfig, CallOutcome, Ticket};
use crate::bulkhead::{Acquire, Bulkhead, BulkheadConfig, Grant, Permit, WaiterId};
use crate::sync::{Condvar, Mutex, lock};
use crate::time::SimTime;

/// A bulkhead shared by threads. [`SharedBulkhead::acquire`] blocks while the caller is queued.
///
/// Invariant (checked by loom): permits out never exceed `max_concurrent`, and after every
/// caller has released, none are out and none are queued.
pub struct SharedBulkhead {
    state: Mutex<BulkheadState>,
    granted: Condvar,
}

struct BulkheadState {
    bulkhead: Bulkhead,
    /// Permits passed to queued waiters that have not yet woken to collect them.
    handed_over: Vec<Grant>,
}

/// The call was shed: the queue was full.
#[derive(Debug, PartialEq, Eq)]
pub struct Shed;

impl SharedBulkhead {
    pub fn new(config: BulkheadConfig) -> Self {
        SharedBulkhead {
            state: Mutex::new(BulkheadState {
                bulkhead: Bulkhead::new(config),
                handed_over: Vec::new(),
            }),
            granted: Condvar::new(),
        }
    }

    /// Takes a permit, waiting in FIFO order if all are out; `Err(Shed)` if the queue is full.
    /// `waiter` must be unique among the callers waiting at the same time.
    pub fn acquire(&self, waiter: WaiterId) -> Result<Permit, Shed> {
        let mut state = lock(&self.state);
        match state.bulkhead.try_acquire(waiter) {
            Acquire::Granted(permit) => return Ok(permit),
            Acquire::Shed => return Err(Shed),
            Acquire::Queued => {}
        }
        loop {
            if let Some(index) = state.handed_over.iter().position(|g| g.waiter == waiter) {
                return Ok(state.handed_over.swap_remove(index).permit);
            }
            state = self
                .granted
                .wait(state)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }

    pub fn release(&self, permit: Permit) {
        let mut state = lock(&self.state);
        if let Some(grant) = state.bulkhead.release(permit) {
            state.handed_over.push(grant);
            self.granted.notify_all();
        }
    }

    /// Permits out and waiters queued, as one consistent reading.
    pub fn occupancy(&self) -> (u32, u32) {
        let state = lock(&self.state);
        (state.bulkhead.in_use(), state.bulkhead.queued())
    }
}

/// A circuit breaker shared by threads: the same [`Breaker`] behind a mutex, one lock per call.
///
/// Invariant (checked by a loom smoke model, which can only reorder whole calls): while
/// half-open, no more than `probes_max` calls are admitted.
pub struct SharedBreaker {
    breaker: Mutex<Breaker>,
}

impl SharedBreaker {
    pub fn new(config: BreakerConfig) -> Self {
        SharedBreaker {
            breaker: Mutex::new(Breaker::new(config)),
        }
    }

    pub fn try_admit(&self, now: SimTime) -> Admit {
        lock(&self.breaker).try_admit(now)
    }

    pub fn on_result(&self, now: SimTime, ticket: Ticket, outcome: CallOutcome) {
        lock(&self.breaker).on_result(now, ticket, outcome)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn threads_never_exceed_the_bulkhead_limit() {
        let bulkhead = Arc::new(SharedBulkhead::new(BulkheadConfig::new(2, 16).unwrap()));
        let active = Arc::new(AtomicU32::new(0));
        let peak = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..8)
            .map(|waiter| {
                let (bulkhead, active, peak) = (bulkhead.clone(), active.clone(), peak.clone());
                std::thread::spawn(move || {
                    for round in 0..50 {
                        let permit = bulkhead.acquire(waiter * 1000 + round).expect("queue fits");
                        let now = active.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        active.fetch_sub(1, Ordering::SeqCst);
                        bulkhead.release(permit);
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= 2);
        assert_eq!(bulkhead.occupancy(), (0, 0));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::time::SimDuration;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicU32, Ordering};

    /// Three threads through a bulkhead of one permit and a queue of one: whatever the
    /// interleaving, at most one is inside, shed calls never enter, and every permit comes back.
    /// The waiting is real here (a queued caller sleeps on the condition variable until a
    /// release hands it the permit), so loom checks the hand-over and the wake-ups, not only
    /// the order of lock acquisitions.
    #[test]
    fn loom_bulkhead_never_admits_more_than_its_maximum() {
        crate::sync::loom_model(|| {
            let bulkhead = Arc::new(SharedBulkhead::new(BulkheadConfig::new(1, 1).unwrap()));
            let inside = Arc::new(AtomicU32::new(0));
            let threads: Vec<_> = (0..3)
                .map(|waiter| {
                    let (bulkhead, inside) = (bulkhead.clone(), inside.clone());
                    loom::thread::spawn(move || {
                        if let Ok(permit) = bulkhead.acquire(waiter) {
                            let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(
                                now_inside <= 1,
                                "{now_inside} callers inside a bulkhead of 1"
                            );
                            inside.fetch_sub(1, Ordering::SeqCst);
                            bulkhead.release(permit);
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(
                bulkhead.occupancy(),
                (0, 0),
                "a permit or a waiter was lost"
            );
        });
    }

    /// A failure-rate breaker (time window) with two probes, and three threads that each ask
    /// once and report a success: whatever the interleaving, no more than two probes are
    /// admitted, exactly two in all (the third caller is refused, or admitted as an ordinary
    /// call once both probes succeeded), and the breaker ends closed with a window that holds
    /// nothing from before it opened.
    ///
    /// A smoke model, the only one for the breaker: [`SharedBreaker`] runs each whole call
    /// under one mutex, so all loom varies is the order in which the six calls take the lock.
    /// It checks that the wrapper adds no race of its own (the probe limit and the closing
    /// hold in every order of admissions and results); it does not check the breaker's rules,
    /// which the property tests do against a reference model, and there is no finer
    /// interleaving for it to find.
    #[test]
    fn loom_failure_rate_breaker_admits_at_most_its_probes() {
        use crate::breaker::{BreakerState, Rejection, Window};
        crate::sync::loom_model(|| {
            let window = Window::Time {
                length: SimDuration::from_millis(100),
                slots: 4,
            };
            let open_for = SimDuration::from_millis(10);
            let config = BreakerConfig::failure_rate(500, window, 2, open_for, 2).unwrap();
            let breaker = Arc::new(SharedBreaker::new(config));
            for outcome in [CallOutcome::Success, CallOutcome::Failure] {
                let Admit::Yes(ticket) = breaker.try_admit(SimTime::ZERO) else {
                    panic!("a closed breaker admits");
                };
                breaker.on_result(SimTime::ZERO, ticket, outcome);
            }
            assert_eq!(
                breaker.try_admit(SimTime::ZERO),
                Admit::No(Rejection::Open),
                "1 failure of 2 calls is 500 permille"
            );
            let after_open = SimTime::from_nanos(10_000_000);
            let probes = Arc::new(AtomicU32::new(0));
            let threads: Vec<_> = (0..3)
                .map(|_| {
                    let (breaker, probes) = (breaker.clone(), probes.clone());
                    loom::thread::spawn(move || match breaker.try_admit(after_open) {
                        Admit::Yes(ticket) if ticket.is_probe() => {
                            let admitted = probes.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(admitted <= 2, "{admitted} probes admitted, 2 allowed");
                            breaker.on_result(after_open, ticket, CallOutcome::Success);
                        }
                        Admit::Yes(ticket) => {
                            breaker.on_result(after_open, ticket, CallOutcome::Success);
                        }
                        Admit::No(rejection) => assert_eq!(rejection, Rejection::ProbesBusy),
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(probes.load(Ordering::SeqCst), 2);
            let state = lock(&breaker.breaker);
            assert_eq!(state.state(), BreakerState::Closed);
            let window = state
                .window_counts(after_open)
                .expect("a failure-rate breaker");
            assert!(
                window.calls <= 1,
                "only a call admitted after closing: {window:?}"
            );
            assert_eq!(window.failures, 0, "{window:?}");
        });
    }
}

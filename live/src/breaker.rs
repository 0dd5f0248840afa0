//! The circuit breaker as an async guard around a call: [`outagelab_model::breaker::Breaker`]
//! behind a mutex (held for one model call, never across an `.await`), with `now` from a
//! [`Clock`].
//!
//! A call is admitted at the instant it starts and its result recorded at the instant it ends,
//! as the simulator does. The caller's classifier decides how a result counts (the breaker
//! does not look at errors). A call whose future is dropped before it ends (the caller was
//! cancelled, a timeout around the guard fired, the task was aborted) reports that it was
//! cancelled ([`Breaker::on_cancelled`]): it frees a half-open probe's slot and counts neither
//! way under every preset, also those that count an ignored error as a success (the
//! simulator's steps always run to their end, so it never cancels one).

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::breaker::{
    Admit, Breaker, BreakerConfig, BreakerState, CallOutcome, Rejection, Ticket, Transition,
};

use crate::clock::{Clock, TokioClock};

pub struct LiveBreaker<C: Clock = TokioClock> {
    breaker: Mutex<Breaker>,
    clock: C,
}

impl LiveBreaker<TokioClock> {
    pub fn new(config: BreakerConfig) -> Self {
        Self::with_clock(config, TokioClock::start_now())
    }
}

impl<C: Clock> LiveBreaker<C> {
    pub fn with_clock(config: BreakerConfig, clock: C) -> Self {
        LiveBreaker {
            breaker: Mutex::new(Breaker::new(config)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks to make one call now. The guard must be finished with the call's outcome; dropped
    /// unfinished, it reports the call cancelled ([`Breaker::on_cancelled`]).
    pub fn try_admit(&self) -> Result<BreakerGuard<'_, C>, Rejection> {
        let now = self.clock.now();
        match self.lock().try_admit(now) {
            Admit::Yes(ticket) => Ok(BreakerGuard {
                breaker: self,
                ticket: Some(ticket),
            }),
            Admit::No(rejection) => Err(rejection),
        }
    }

    /// Runs `call` if the breaker admits it, and records its result as `classify` says.
    /// `Err(rejection)`: the call was not made.
    pub async fn call<T, Fut>(
        &self,
        classify: impl FnOnce(&T) -> CallOutcome,
        call: Fut,
    ) -> Result<T, Rejection>
    where
        Fut: Future<Output = T>,
    {
        let guard = self.try_admit()?;
        let result = call.await;
        guard.finish(classify(&result));
        Ok(result)
    }

    /// The state now (an open breaker whose `open_for` has passed reads as half-open).
    pub fn state(&self) -> BreakerState {
        let now = self.clock.now();
        self.lock().state_at(now)
    }

    pub fn opened_total(&self) -> u64 {
        self.lock().opened_total()
    }

    /// The oldest state change not yet taken (the model holds a bounded number): for counting
    /// and logging what the breaker did, as the simulator drains them.
    pub fn poll_transition(&self) -> Option<Transition> {
        self.lock().poll_transition()
    }
}

/// One admitted call. Finish it with the outcome; dropping it reports it cancelled, which
/// counts neither way.
#[must_use = "an admitted call must report its outcome"]
pub struct BreakerGuard<'a, C: Clock> {
    breaker: &'a LiveBreaker<C>,
    ticket: Option<Ticket>,
}

impl<C: Clock> BreakerGuard<'_, C> {
    pub fn is_probe(&self) -> bool {
        self.ticket.as_ref().is_some_and(Ticket::is_probe)
    }

    pub fn finish(mut self, outcome: CallOutcome) {
        if let Some(ticket) = self.ticket.take() {
            let now = self.breaker.clock.now();
            self.breaker.lock().on_result(now, ticket, outcome);
        }
    }
}

impl<C: Clock> Drop for BreakerGuard<'_, C> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let now = self.breaker.clock.now();
            self.breaker.lock().on_cancelled(now, ticket);
        }
    }
}

#[cfg(test)]
mod tests {
    use outagelab_model::breaker::{BreakerState, CallOutcome, Rejection};
    use outagelab_model::presets::BREAKER_PRESETS;
    use outagelab_model::time::SimTime;

    use super::LiveBreaker;
    use crate::clock::ManualClock;

    /// Under every preset (and the default configuration), a half-open probe whose caller
    /// stopped waiting leaves the breaker half-open and frees its slot for the next probe:
    /// it neither closes the breaker (four of the five presets count an ignored error as a
    /// success) nor reopens it. Then a probe that fails reopens it, as probes decide.
    #[test]
    fn a_dropped_probe_counts_neither_way_under_every_preset() {
        for preset in BREAKER_PRESETS {
            let config = preset.config().unwrap();
            let clock = ManualClock::new();
            let breaker = LiveBreaker::with_clock(config, clock.clone());
            // Open it: failures until it opens (every preset opens within 1000 calls, rate
            // rules after their minimum number of calls), each a millisecond apart.
            let mut at = 0;
            while breaker.state() != BreakerState::Open {
                assert!(at < 1000, "{}: never opened", preset.name);
                clock.set(SimTime::from_nanos(at * 1_000_000));
                if let Ok(guard) = breaker.try_admit() {
                    guard.finish(CallOutcome::Failure);
                }
                at += 1;
            }
            // Past the opening, as long as it lasts.
            clock.set(SimTime::from_nanos(at * 1_000_000).saturating_add(preset.open_for_max));
            assert_eq!(breaker.state(), BreakerState::HalfOpen, "{}", preset.name);
            let probes: Vec<_> = (0..preset.half_open_probes)
                .map(|_| breaker.try_admit().expect("a probe is admitted"))
                .collect();
            assert!(
                probes.iter().all(|probe| probe.is_probe()),
                "{}",
                preset.name
            );
            assert_eq!(
                breaker.try_admit().err(),
                Some(Rejection::ProbesBusy),
                "{}: every probe slot taken",
                preset.name
            );
            // The callers of every probe time out: the guards are dropped unfinished.
            drop(probes);
            assert_eq!(
                breaker.state(),
                BreakerState::HalfOpen,
                "{}: a dropped probe decided the breaker",
                preset.name
            );
            // Their slots are free again, and a failed probe reopens it.
            for _ in 0..preset.half_open_probes {
                let probe = breaker.try_admit().expect("the slot was freed");
                assert!(probe.is_probe(), "{}", preset.name);
                probe.finish(CallOutcome::Failure);
            }
            assert_eq!(breaker.state(), BreakerState::Open, "{}", preset.name);
        }
    }
}

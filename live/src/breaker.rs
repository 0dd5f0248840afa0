//! The circuit breaker as an async guard around a call: [`outagelab_model::breaker::Breaker`]
//! behind a mutex (held for one model call, never across an `.await`), with `now` from a
//! [`Clock`].
//!
//! A call is admitted at the instant it starts and its result recorded at the instant it ends,
//! as the simulator does. The caller's classifier decides how a result counts (the breaker
//! does not look at errors). A call whose future is dropped before it ends (the caller was
//! cancelled, or a timeout around the guard fired) reports [`CallOutcome::Ignored`]: it frees
//! a half-open probe's slot and counts neither way.

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
    /// unfinished, it reports [`CallOutcome::Ignored`].
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

/// One admitted call. Finish it with the outcome; dropping it reports `Ignored`.
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
        self.report(outcome);
    }

    fn report(&mut self, outcome: CallOutcome) {
        if let Some(ticket) = self.ticket.take() {
            let now = self.breaker.clock.now();
            self.breaker.lock().on_result(now, ticket, outcome);
        }
    }
}

impl<C: Clock> Drop for BreakerGuard<'_, C> {
    fn drop(&mut self) {
        self.report(CallOutcome::Ignored);
    }
}

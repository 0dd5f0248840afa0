//! The adaptive concurrency limit (Netflix's concurrency-limits) as an async guard around a
//! call: [`outagelab_model::adaptive_limit::AdaptiveLimit`] behind a mutex (held for one model
//! call, never across an `.await`), with `now` from a [`Clock`].
//!
//! A call is admitted at the instant it starts, below the limit of that instant, and its
//! sample is given at the instant it ends: its latency from admission, and how it ended as
//! the caller classifies it ([`CallEnd`]), as the simulator's layer does. A call whose future
//! is dropped before it ends frees its place as [`CallEnd::Ignored`] (a cancellation says
//! nothing about load).

use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::adaptive_limit::{
    Acquire, AdaptiveLimit, AdaptiveLimitConfig, AdaptiveLimitCounters, Permit,
};

use crate::clock::{Clock, TokioClock};

pub struct LiveAdaptiveLimit<C: Clock = TokioClock> {
    limit: Mutex<AdaptiveLimit>,
    clock: C,
}

/// The calls in flight had reached the limit: the call must not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected;

/// How an admitted call ended, as the caller classifies it (the model's, whose sample adds
/// the latency the guard measures).
pub use outagelab_model::adaptive_limit::CallEnd;

impl LiveAdaptiveLimit<TokioClock> {
    pub fn new(config: AdaptiveLimitConfig) -> Self {
        Self::with_clock(config, TokioClock::start_now())
    }
}

impl<C: Clock> LiveAdaptiveLimit<C> {
    pub fn with_clock(config: AdaptiveLimitConfig, clock: C) -> Self {
        LiveAdaptiveLimit {
            limit: Mutex::new(AdaptiveLimit::new(config)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, AdaptiveLimit> {
        self.limit.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks to make one call now. The guard must be finished with how the call ended;
    /// dropped unfinished, it reports [`CallEnd::DROPPED`].
    pub fn try_acquire(&self) -> Result<AdaptiveGuard<'_, C>, Rejected> {
        let now = self.clock.now();
        match self.lock().try_acquire(now) {
            Acquire::Granted(permit) => Ok(AdaptiveGuard {
                limit: self,
                permit: Some(permit),
            }),
            Acquire::Rejected => Err(Rejected),
        }
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.lock().limit()
    }

    pub fn in_flight(&self) -> u32 {
        self.lock().in_flight()
    }

    pub fn counters(&self) -> AdaptiveLimitCounters {
        self.lock().counters()
    }
}

/// One admitted call. Finish it with how it ended; dropping it reports `Ignored`.
#[must_use = "an admitted call must report how it ended"]
pub struct AdaptiveGuard<'a, C: Clock> {
    limit: &'a LiveAdaptiveLimit<C>,
    permit: Option<Permit>,
}

impl<C: Clock> AdaptiveGuard<'_, C> {
    pub fn finish(mut self, end: CallEnd) {
        self.report(end);
    }

    fn report(&mut self, end: CallEnd) {
        let Some(permit) = self.permit.take() else {
            return;
        };
        let now = self.limit.clock.now();
        // Its latency: from admission to now.
        let rtt = now.saturating_since(permit.acquired_at());
        self.limit.lock().release(now, permit, end.sample(rtt));
    }
}

impl<C: Clock> Drop for AdaptiveGuard<'_, C> {
    fn drop(&mut self) {
        self.report(CallEnd::DROPPED);
    }
}

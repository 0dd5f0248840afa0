//! The rate limiter, live: [`outagelab_model::rate_limit::RateLimiter`] behind a mutex (held
//! for one model call), with `now` from a [`Clock`]. A caller that checked against the store
//! asks [`LiveRateLimiter::try_acquire`]; one that could not reach it asks
//! [`LiveRateLimiter::on_store_unreachable`], which fails open or closed as configured. The
//! model decides and counts; this module reads the clock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::rate_limit::{Decision, RateLimitCounters, RateLimiter, RateLimiterConfig};

use crate::clock::{Clock, TokioClock};

pub struct LiveRateLimiter<C: Clock = TokioClock> {
    limiter: Mutex<RateLimiter>,
    clock: C,
}

impl LiveRateLimiter<TokioClock> {
    pub fn new(config: RateLimiterConfig) -> Self {
        Self::with_clock(config, TokioClock::start_now())
    }
}

impl<C: Clock> LiveRateLimiter<C> {
    pub fn with_clock(config: RateLimiterConfig, clock: C) -> Self {
        LiveRateLimiter {
            limiter: Mutex::new(RateLimiter::new(config)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, RateLimiter> {
        self.limiter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request of `cost` now: admitted and charged, or rejected with its exact wait.
    pub fn try_acquire(&self, cost: u64) -> Decision {
        let now = self.clock.now();
        self.lock().try_acquire(now, cost)
    }

    /// The store could not be reached for a request of `cost`.
    pub fn on_store_unreachable(&self, cost: u64) -> Decision {
        self.lock().on_store_unreachable(cost)
    }

    /// Whole tokens available now.
    pub fn tokens(&self) -> u64 {
        let now = self.clock.now();
        self.lock().tokens(now)
    }

    pub fn counters(&self) -> RateLimitCounters {
        self.lock().counters()
    }
}

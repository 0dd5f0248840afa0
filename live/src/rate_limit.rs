//! The rate limiter, live: [`outagelab_model::rate_limit::KeyedRateLimiter`] behind a mutex
//! (held for one model call), with `now` from a [`Clock`]. A caller that checked against the
//! store asks [`LiveRateLimiter::try_acquire_key`] for the bucket of its key (one per key of
//! the store, as the simulator keys them: `outagelab_sim::rules::rate_limit_bucket`), or
//! [`LiveRateLimiter::try_acquire`] for a local limiter's one bucket; one that could not reach
//! the store asks [`LiveRateLimiter::on_store_unreachable`], which fails open or closed as
//! configured. The model decides, counts and drops buckets that are full again; this module
//! reads the clock.

use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::rate_limit::{
    Decision, KeyedRateLimiter, RateLimitCounters, RateLimiterConfig,
};

use crate::clock::{Clock, TokioClock};

pub struct LiveRateLimiter<C: Clock = TokioClock> {
    limiter: Mutex<KeyedRateLimiter>,
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
            limiter: Mutex::new(KeyedRateLimiter::new(config)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, KeyedRateLimiter> {
        self.limiter.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request of `cost` now on the one bucket (a local limiter's): admitted and charged,
    /// or rejected with its exact wait.
    pub fn try_acquire(&self, cost: u64) -> Decision {
        self.try_acquire_key(0, cost)
    }

    /// A request of `cost` now on `key`'s bucket.
    pub fn try_acquire_key(&self, key: u64, cost: u64) -> Decision {
        let now = self.clock.now();
        self.lock().try_acquire(now, key, cost)
    }

    /// The store could not be reached for a request of `cost`.
    pub fn on_store_unreachable(&self, cost: u64) -> Decision {
        self.lock().on_store_unreachable(cost)
    }

    /// Whole tokens available now in the one bucket (a local limiter's).
    pub fn tokens(&self) -> u64 {
        self.tokens_of(0)
    }

    /// Whole tokens available now in `key`'s bucket.
    pub fn tokens_of(&self, key: u64) -> u64 {
        let now = self.clock.now();
        self.lock().tokens(now, key)
    }

    pub fn counters(&self) -> RateLimitCounters {
        self.lock().counters()
    }
}

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

#[cfg(test)]
mod tests {
    use outagelab_model::rate_limit::{Algorithm, BucketConfig, TokenRate, WhenStoreUnreachable};
    use outagelab_model::time::SimTime;

    use super::*;
    use crate::clock::ManualClock;

    /// Two tokens, one a second, per key: the buckets of two keys are apart, and the one
    /// bucket of a local limiter is key 0's.
    #[test]
    fn each_key_has_its_own_bucket_and_the_local_one_is_key_zero() {
        let bucket = BucketConfig::new(2, TokenRate::per_second(1).unwrap()).unwrap();
        let config = RateLimiterConfig::new(
            bucket,
            Algorithm::TokenBucket,
            WhenStoreUnreachable::FailOpen,
        )
        .unwrap();
        let clock = ManualClock::new();
        let limiter = LiveRateLimiter::with_clock(config, clock.clone());
        for key in [7, 7, 9, 9] {
            assert_eq!(limiter.try_acquire_key(key, 1), Decision::Admit);
        }
        assert!(matches!(
            limiter.try_acquire_key(7, 1),
            Decision::Reject { .. }
        ));
        assert_eq!((limiter.tokens_of(9), limiter.tokens()), (0, 2));
        assert_eq!(limiter.try_acquire(1), Decision::Admit);
        assert_eq!(limiter.tokens_of(0), 1, "the local bucket is key 0");
        clock.set(SimTime::from_nanos(1_000_000_000));
        assert_eq!(limiter.try_acquire_key(7, 1), Decision::Admit);
        let counters = limiter.counters();
        assert_eq!((counters.admitted, counters.rejected), (6, 1));
    }
}

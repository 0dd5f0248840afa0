//! Seed 004's cascade throttle, live, in its atomic form (check and increment in one step, as
//! a Redis script or a Durable Object does): [`outagelab_model::throttle::AtomicThrottle`]
//! for one key (one space) behind a mutex held for one model call, with `now` from a
//! [`Clock`] and a slot guard that releases when dropped, so a cancelled cascade cannot leak
//! its slot. A rejection carries the model's Retry-After.

use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::throttle::{
    AtomicThrottle, Decision, Rejection, Slot, ThrottleConfig, ThrottleStats,
};

use crate::clock::{Clock, TokioClock};

pub struct LiveThrottle<C: Clock = TokioClock> {
    throttle: Mutex<AtomicThrottle>,
    clock: C,
}

impl LiveThrottle<TokioClock> {
    pub fn new(config: ThrottleConfig) -> Self {
        Self::with_clock(config, TokioClock::start_now())
    }
}

impl<C: Clock> LiveThrottle<C> {
    pub fn with_clock(config: ThrottleConfig, clock: C) -> Self {
        LiveThrottle {
            throttle: Mutex::new(AtomicThrottle::new(config)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, AtomicThrottle> {
        self.throttle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot now, or the 429 the model answers.
    pub fn try_acquire(&self) -> Result<ThrottleSlot<'_, C>, Rejection> {
        let now = self.clock.now();
        match self.lock().try_acquire(now) {
            Decision::Admit(slot) => Ok(ThrottleSlot {
                throttle: self,
                slot: Some(slot),
            }),
            Decision::Reject(rejection) => Err(rejection),
        }
    }

    pub fn stats(&self) -> ThrottleStats {
        self.lock().stats()
    }

    /// The stored counter now (zero once it expired).
    pub fn counter(&self) -> u64 {
        let now = self.clock.now();
        self.lock().counter(now)
    }
}

/// A slot held; released (its decrement landing) when dropped.
#[must_use = "dropping the slot releases it at once"]
pub struct ThrottleSlot<'a, C: Clock> {
    throttle: &'a LiveThrottle<C>,
    slot: Option<Slot>,
}

impl<C: Clock> Drop for ThrottleSlot<'_, C> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let now = self.throttle.clock.now();
            self.throttle.lock().release(now, slot);
        }
    }
}

//! Bulkhead: a limit on concurrent calls, with a bounded FIFO queue in front of it.
//!
//! Call order: [`Bulkhead::try_acquire`] with a caller-chosen [`WaiterId`]. On
//! [`Acquire::Granted`] the caller holds a [`Permit`] and must hand it back to
//! [`Bulkhead::release`] exactly once. On [`Acquire::Queued`] the caller waits: a later
//! `release` returns a [`Grant`] naming it, or the caller gives up with [`Bulkhead::cancel`].
//! On [`Acquire::Shed`] the queue was full and the call must not be made.
//!
//! Invariants:
//! - permits out (`in_use`) never exceed `max_concurrent`;
//! - queued waiters never exceed `queue_max`;
//! - a waiter is queued only while every permit is out, and waiters are granted in arrival
//!   order;
//! - `Permit` cannot be copied or cloned, so a permit is returned at most once; dropping one
//!   without releasing it leaks capacity, which is what the `#[must_use]` warns about;
//! - a permit belongs to the bulkhead that granted it: releasing it into another bulkhead
//!   panics (a real `assert!`) before anything changes. A permit passed on to a queued waiter
//!   ([`Grant`]) stays the same permit.

use std::collections::VecDeque;

use crate::config::ConfigError;
use crate::instance::InstanceId;

/// A validated bulkhead configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkheadConfig {
    max_concurrent: u32,
    queue_max: u32,
}

impl BulkheadConfig {
    /// At most `max_concurrent` calls at once and at most `queue_max` waiting; `queue_max = 0`
    /// sheds every call that finds no free permit.
    pub fn new(max_concurrent: u32, queue_max: u32) -> Result<Self, ConfigError> {
        if max_concurrent == 0 {
            return Err(ConfigError::new(
                "max_concurrent",
                "must be at least 1 (a bulkhead of zero sheds everything)",
            ));
        }
        Ok(BulkheadConfig {
            max_concurrent,
            queue_max,
        })
    }

    pub fn max_concurrent(&self) -> u32 {
        self.max_concurrent
    }

    pub fn queue_max(&self) -> u32 {
        self.queue_max
    }
}

/// The caller's name for one waiting call (the simulator uses a request reference).
pub type WaiterId = u64;

/// The right to run one call inside the bulkhead. Give it back with [`Bulkhead::release`] of
/// the bulkhead that granted it.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit that is not released leaks bulkhead capacity"]
pub struct Permit {
    /// The bulkhead that granted it.
    owner: InstanceId,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Acquire {
    Granted(Permit),
    Queued,
    Shed,
}

/// A queued waiter that now holds a permit.
#[derive(Debug, PartialEq, Eq)]
pub struct Grant {
    pub waiter: WaiterId,
    pub permit: Permit,
}

#[derive(Clone, Debug)]
pub struct Bulkhead {
    /// Stamped into every permit, checked when one comes back.
    id: InstanceId,
    config: BulkheadConfig,
    in_use: u32,
    /// Waiters in arrival order; never longer than `config.queue_max`.
    queue: VecDeque<WaiterId>,
}

impl Bulkhead {
    pub fn new(config: BulkheadConfig) -> Self {
        Bulkhead {
            id: InstanceId::fresh(),
            config,
            in_use: 0,
            queue: VecDeque::with_capacity(config.queue_max.min(1024) as usize),
        }
    }

    pub fn config(&self) -> &BulkheadConfig {
        &self.config
    }

    /// Permits currently out.
    pub fn in_use(&self) -> u32 {
        self.in_use
    }

    /// Waiters currently queued.
    pub fn queued(&self) -> u32 {
        self.queue.len() as u32
    }

    pub fn try_acquire(&mut self, waiter: WaiterId) -> Acquire {
        if self.in_use < self.config.max_concurrent {
            debug_assert!(
                self.queue.is_empty(),
                "a waiter queued beside a free permit"
            );
            self.in_use += 1;
            Acquire::Granted(Permit { owner: self.id })
        } else if self.queue.len() < self.config.queue_max as usize {
            self.queue.push_back(waiter);
            Acquire::Queued
        } else {
            Acquire::Shed
        }
    }

    /// Returns a permit. If a waiter is queued, the permit passes straight to the oldest one.
    ///
    /// Panics if another bulkhead granted the permit (checked before anything changes).
    pub fn release(&mut self, permit: Permit) -> Option<Grant> {
        self.id.assert_issued(permit.owner, "a permit", "bulkhead");
        assert!(self.in_use > 0, "released more permits than were granted");
        match self.queue.pop_front() {
            Some(waiter) => Some(Grant { waiter, permit }),
            None => {
                drop(permit);
                self.in_use -= 1;
                None
            }
        }
    }

    /// Removes a queued waiter that gave up. Returns whether it was queued.
    pub fn cancel(&mut self, waiter: WaiterId) -> bool {
        match self.queue.iter().position(|&queued| queued == waiter) {
            Some(index) => {
                self.queue.remove(index);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulkhead(max_concurrent: u32, queue_max: u32) -> Bulkhead {
        Bulkhead::new(BulkheadConfig::new(max_concurrent, queue_max).unwrap())
    }

    fn granted(acquire: Acquire) -> Permit {
        match acquire {
            Acquire::Granted(permit) => permit,
            other => panic!("expected a permit, got {other:?}"),
        }
    }

    #[test]
    fn grants_up_to_the_limit_then_queues_then_sheds() {
        let mut b = bulkhead(2, 1);
        let p1 = granted(b.try_acquire(1));
        let _p2 = granted(b.try_acquire(2));
        assert_eq!(b.try_acquire(3), Acquire::Queued);
        assert_eq!(b.try_acquire(4), Acquire::Shed);
        assert_eq!((b.in_use(), b.queued()), (2, 1));
        let grant = b.release(p1).expect("the queued waiter gets the permit");
        assert_eq!(grant.waiter, 3);
        assert_eq!((b.in_use(), b.queued()), (2, 0));
    }

    #[test]
    fn waiters_are_granted_in_arrival_order() {
        let mut b = bulkhead(1, 3);
        let mut permit = granted(b.try_acquire(0));
        for waiter in 1..=3 {
            assert_eq!(b.try_acquire(waiter), Acquire::Queued);
        }
        for expected in 1..=3 {
            let grant = b.release(permit).unwrap();
            assert_eq!(grant.waiter, expected);
            permit = grant.permit;
        }
        assert_eq!(b.release(permit), None);
        assert_eq!(b.in_use(), 0);
    }

    #[test]
    fn a_zero_queue_sheds_at_once() {
        let mut b = bulkhead(1, 0);
        let _p = granted(b.try_acquire(1));
        assert_eq!(b.try_acquire(2), Acquire::Shed);
    }

    #[test]
    fn a_cancelled_waiter_is_not_granted() {
        let mut b = bulkhead(1, 2);
        let p = granted(b.try_acquire(1));
        assert_eq!(b.try_acquire(2), Acquire::Queued);
        assert_eq!(b.try_acquire(3), Acquire::Queued);
        assert!(b.cancel(2));
        assert!(!b.cancel(2));
        assert_eq!(b.release(p).unwrap().waiter, 3);
    }

    #[test]
    #[should_panic(expected = "a permit was handed back to a bulkhead that did not issue it")]
    fn a_permit_from_another_bulkhead_panics() {
        let mut issuer = bulkhead(1, 1);
        let mut other = bulkhead(1, 1);
        let _held = granted(other.try_acquire(1));
        assert_eq!(other.try_acquire(2), Acquire::Queued);
        // Without the check, this would hand `other`'s queued waiter a permit `other` never
        // freed.
        let _ = other.release(granted(issuer.try_acquire(3)));
    }

    #[test]
    fn zero_capacity_is_rejected() {
        let error = BulkheadConfig::new(0, 5).unwrap_err();
        assert_eq!(error.field, "max_concurrent");
        assert!(error.reason.contains("at least 1"));
    }
}

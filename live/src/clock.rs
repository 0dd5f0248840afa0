//! Time for the live wrappers: the one place in the workspace that reads a wall clock for a
//! policy decision.
//!
//! The model takes [`SimTime`], nanoseconds since the start of a run. Live, "the start of the
//! run" is the instant a [`TokioClock`] was made, and `now` is the tokio [`Instant`] elapsed
//! since then, in whole nanoseconds. Every wrapper reads time only through [`Clock::now`], so a
//! test can hand it a [`ManualClock`] and feed the wrapper the very instants it feeds the
//! model.
//!
//! tokio's `Instant` rather than `std`'s: it is the monotonic clock, and it follows
//! `tokio::time::pause` in a test runtime, so backoff windows can be stepped through without
//! sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use outagelab_model::time::{SimDuration, SimTime};
use tokio::time::Instant;

/// A source of `now` for the model's state machines. Implementations must never go backwards
/// (the model tolerates it, by taking the latest instant seen, but decisions then lag).
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> SimTime;
}

/// Wall-clock (monotonic) time since this clock was made.
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    start: Instant,
}

impl TokioClock {
    /// A clock whose `SimTime::ZERO` is now.
    pub fn start_now() -> Self {
        Self::start_at(Instant::now())
    }

    /// A clock whose `SimTime::ZERO` is `start` (before it, it reads zero).
    pub fn start_at(start: Instant) -> Self {
        TokioClock { start }
    }

    /// The instant this clock reads as `SimTime::ZERO`.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The instant this clock will read as `at` (for sleeping until it).
    pub fn instant_at(&self, at: SimTime) -> Instant {
        self.start + std::time::Duration::from_nanos(at.as_nanos())
    }
}

impl Clock for TokioClock {
    fn now(&self) -> SimTime {
        sim_time_since(self.start, Instant::now())
    }
}

/// `instant - start` as a [`SimTime`]: zero if `instant` is earlier, saturating at
/// [`SimTime::MAX`] (584 years) instead of wrapping.
pub fn sim_time_since(start: Instant, instant: Instant) -> SimTime {
    let nanos = instant.saturating_duration_since(start).as_nanos();
    SimTime::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// A model duration as a `std` duration (for timeouts and sleeps).
pub fn std_duration(duration: SimDuration) -> std::time::Duration {
    std::time::Duration::from_nanos(duration.as_nanos())
}

/// A clock that moves only when told to: for tests that feed the live wrapper and the model
/// the same instants. Clones share one reading.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the reading to `now`. Panics if that would move the clock backwards.
    pub fn set(&self, now: SimTime) {
        let before = self.nanos.swap(now.as_nanos(), Ordering::SeqCst);
        assert!(
            before <= now.as_nanos(),
            "a manual clock set backwards, from {before} ns to {now}"
        );
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SimTime {
        SimTime::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn instants_map_to_nanoseconds_since_the_start() {
        let start = Instant::now();
        assert_eq!(sim_time_since(start, start), SimTime::ZERO);
        assert_eq!(
            sim_time_since(start, start + Duration::from_millis(1500)),
            SimTime::from_nanos(1_500_000_000)
        );
        let later = start + Duration::from_secs(1);
        assert_eq!(
            sim_time_since(later, start),
            SimTime::ZERO,
            "before the start"
        );
    }

    #[test]
    fn a_manual_clock_reads_what_it_was_set_to() {
        let clock = ManualClock::new();
        let shared = clock.clone();
        assert_eq!(clock.now(), SimTime::ZERO);
        clock.set(SimTime::from_nanos(42));
        assert_eq!(shared.now(), SimTime::from_nanos(42));
    }

    #[test]
    #[should_panic(expected = "set backwards")]
    fn a_manual_clock_refuses_to_go_backwards() {
        let clock = ManualClock::new();
        clock.set(SimTime::from_nanos(10));
        clock.set(SimTime::from_nanos(9));
    }
}

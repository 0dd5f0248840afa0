//! Circuit breaker counting consecutive failures.
//!
//! ```text
//!            failures_max consecutive failures              open_for has passed
//!   Closed ───────────────────────────────────────▶ Open ───────────────────────▶ HalfOpen
//!     ▲                                               ▲                              │
//!     │          probes_max probes succeeded           │  a probe failed              │
//!     └────────────────────────────────────────────── ┴──────────────────────────────┘
//! ```
//!
//! Call order: [`Breaker::try_admit`] before each call; for every [`Admit::Yes`] exactly one
//! [`Breaker::on_result`] with the ticket it returned. A result whose ticket belongs to an
//! earlier state (for example a failure that arrives after the breaker opened) changes nothing.
//!
//! Invariants:
//! - `now` never goes backwards between calls;
//! - in `HalfOpen`, at most `probes_max` tickets are admitted; while they are out, every other
//!   caller is rejected. A probe that never reports back keeps the breaker half-open: that is
//!   the behaviour of a real breaker whose probe hangs, and a scenario can show it.

use crate::config::ConfigError;
use crate::time::{SimDuration, SimTime};

/// A validated breaker configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerConfig {
    failures_max: u32,
    open_for: SimDuration,
    probes_max: u32,
}

impl BreakerConfig {
    /// `failures_max` consecutive counted failures open the breaker; it stays open for
    /// `open_for`, then admits up to `probes_max` probes, all of which must succeed to close it.
    pub fn new(
        failures_max: u32,
        open_for: SimDuration,
        probes_max: u32,
    ) -> Result<Self, ConfigError> {
        if failures_max == 0 {
            return Err(ConfigError::new(
                "failures",
                "must be at least 1 (a breaker that opens on zero failures never closes)",
            ));
        }
        if open_for.is_zero() {
            return Err(ConfigError::new(
                "open_for",
                "must be longer than zero (use enabled = false to turn the breaker off)",
            ));
        }
        if probes_max == 0 {
            return Err(ConfigError::new(
                "half_open_probes",
                "must be at least 1 (with no probe the breaker could never close)",
            ));
        }
        Ok(BreakerConfig {
            failures_max,
            open_for,
            probes_max,
        })
    }

    pub fn failures_max(&self) -> u32 {
        self.failures_max
    }

    pub fn open_for(&self) -> SimDuration {
        self.open_for
    }

    pub fn probes_max(&self) -> u32 {
        self.probes_max
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

/// Permission to make one call. Hand it back to [`Breaker::on_result`] exactly once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "every admitted call must report its result with on_result"]
pub struct Ticket {
    epoch: u32,
    probe: bool,
}

impl Ticket {
    /// Whether this call is a half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe
    }
}

/// Why a call was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// The breaker is open.
    Open,
    /// The breaker is half-open and all its probes are out.
    ProbesBusy,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    Yes(Ticket),
    No(Rejection),
}

/// How a finished call counts, as decided by the caller's error classifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    Success,
    /// A failure that counts towards opening (for example a timeout or a refused connection).
    Failure,
    /// A result the classifier does not count either way (for example an application error).
    Ignored,
}

/// A change of state, reported through [`Breaker::poll_transition`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub at: SimTime,
    pub from: BreakerState,
    pub to: BreakerState,
}

/// Bound on transitions held for [`Breaker::poll_transition`]; older ones are dropped.
const TRANSITIONS_HELD_MAX: usize = 8;

/// A consecutive-failure circuit breaker. See the module documentation for the call order.
#[derive(Clone, Debug)]
pub struct Breaker {
    config: BreakerConfig,
    state: BreakerState,
    /// Incremented on every state change; tickets from an older epoch are ignored.
    epoch: u32,
    failures_consecutive: u32,
    opened_at: SimTime,
    probes_admitted: u32,
    probes_succeeded: u32,
    /// Transitions not yet polled, oldest first; at most `TRANSITIONS_HELD_MAX`.
    transitions: Vec<Transition>,
    /// Counts of transitions into `Open`, for reports.
    opened_total: u64,
}

impl Breaker {
    pub fn new(config: BreakerConfig) -> Self {
        Breaker {
            config,
            state: BreakerState::Closed,
            epoch: 0,
            failures_consecutive: 0,
            opened_at: SimTime::ZERO,
            probes_admitted: 0,
            probes_succeeded: 0,
            transitions: Vec::new(),
            opened_total: 0,
        }
    }

    pub fn config(&self) -> &BreakerConfig {
        &self.config
    }

    /// The state as of the last call; an `Open` breaker whose `open_for` has passed becomes
    /// `HalfOpen` at the next call that takes `now` (or [`Breaker::handle_timeout`]).
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// The state at `now`, counting an `Open` whose `open_for` has passed as `HalfOpen`
    /// (without changing anything).
    pub fn state_at(&self, now: SimTime) -> BreakerState {
        match self.next_deadline() {
            Some(deadline) if now >= deadline => BreakerState::HalfOpen,
            _ => self.state,
        }
    }

    /// How many times the breaker has opened.
    pub fn opened_total(&self) -> u64 {
        self.opened_total
    }

    /// When the breaker next changes state on its own (Open -> HalfOpen), if it will.
    pub fn next_deadline(&self) -> Option<SimTime> {
        match self.state {
            BreakerState::Open => Some(self.opened_at.saturating_add(self.config.open_for)),
            BreakerState::Closed | BreakerState::HalfOpen => None,
        }
    }

    /// Applies the passage of time: an `Open` breaker whose `open_for` has passed turns
    /// `HalfOpen`.
    pub fn handle_timeout(&mut self, now: SimTime) {
        if let Some(deadline) = self.next_deadline()
            && now >= deadline
        {
            self.probes_admitted = 0;
            self.probes_succeeded = 0;
            self.move_to(now, BreakerState::HalfOpen);
        }
    }

    /// Asks to make one call now.
    pub fn try_admit(&mut self, now: SimTime) -> Admit {
        self.handle_timeout(now);
        match self.state {
            BreakerState::Closed => Admit::Yes(Ticket {
                epoch: self.epoch,
                probe: false,
            }),
            BreakerState::Open => Admit::No(Rejection::Open),
            BreakerState::HalfOpen => {
                if self.probes_admitted < self.config.probes_max {
                    self.probes_admitted += 1;
                    Admit::Yes(Ticket {
                        epoch: self.epoch,
                        probe: true,
                    })
                } else {
                    Admit::No(Rejection::ProbesBusy)
                }
            }
        }
    }

    /// Reports how an admitted call ended.
    pub fn on_result(&mut self, now: SimTime, ticket: Ticket, outcome: CallOutcome) {
        self.handle_timeout(now);
        if ticket.epoch != self.epoch {
            return;
        }
        match (self.state, outcome) {
            (BreakerState::Closed, CallOutcome::Success) => self.failures_consecutive = 0,
            (BreakerState::Closed, CallOutcome::Failure) => {
                self.failures_consecutive += 1;
                if self.failures_consecutive >= self.config.failures_max {
                    self.open(now);
                }
            }
            (BreakerState::HalfOpen, CallOutcome::Success) => {
                self.probes_succeeded += 1;
                if self.probes_succeeded >= self.config.probes_max {
                    self.failures_consecutive = 0;
                    self.move_to(now, BreakerState::Closed);
                }
            }
            (BreakerState::HalfOpen, CallOutcome::Failure) => self.open(now),
            // An uncounted probe result frees its slot for another probe.
            (BreakerState::HalfOpen, CallOutcome::Ignored) => self.probes_admitted -= 1,
            (BreakerState::Closed, CallOutcome::Ignored) => {}
            // Tickets are never issued while open, and any ticket from before the breaker
            // opened carries an older epoch.
            (BreakerState::Open, _) => unreachable!("ticket of the current epoch while open"),
        }
    }

    /// The oldest state change not yet polled.
    pub fn poll_transition(&mut self) -> Option<Transition> {
        if self.transitions.is_empty() {
            None
        } else {
            Some(self.transitions.remove(0))
        }
    }

    fn open(&mut self, now: SimTime) {
        self.opened_at = now;
        self.opened_total += 1;
        self.move_to(now, BreakerState::Open);
    }

    fn move_to(&mut self, now: SimTime, to: BreakerState) {
        let from = self.state;
        self.state = to;
        self.epoch = self.epoch.wrapping_add(1);
        if self.transitions.len() == TRANSITIONS_HELD_MAX {
            self.transitions.remove(0);
        }
        self.transitions.push(Transition { at: now, from, to });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    fn breaker(failures: u32, open_for_ms: u64, probes: u32) -> Breaker {
        Breaker::new(
            BreakerConfig::new(failures, SimDuration::from_millis(open_for_ms), probes).unwrap(),
        )
    }

    fn admit(b: &mut Breaker, now: SimTime) -> Ticket {
        match b.try_admit(now) {
            Admit::Yes(ticket) => ticket,
            Admit::No(why) => panic!("rejected at {now}: {why:?}"),
        }
    }

    #[test]
    fn opens_after_consecutive_failures_and_a_success_resets_the_count() {
        let mut b = breaker(3, 1000, 1);
        for _ in 0..2 {
            let t = admit(&mut b, ms(0));
            b.on_result(ms(1), t, CallOutcome::Failure);
        }
        let t = admit(&mut b, ms(2));
        b.on_result(ms(3), t, CallOutcome::Success);
        for _ in 0..2 {
            let t = admit(&mut b, ms(4));
            b.on_result(ms(5), t, CallOutcome::Failure);
        }
        assert_eq!(b.state(), BreakerState::Closed);
        let t = admit(&mut b, ms(6));
        b.on_result(ms(7), t, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.try_admit(ms(8)), Admit::No(Rejection::Open));
        assert_eq!(b.next_deadline(), Some(ms(1007)));
        assert_eq!(b.state_at(ms(1006)), BreakerState::Open);
        assert_eq!(b.state_at(ms(1007)), BreakerState::HalfOpen);
    }

    #[test]
    fn ignored_results_do_not_count() {
        let mut b = breaker(1, 1000, 1);
        let t = admit(&mut b, ms(0));
        b.on_result(ms(1), t, CallOutcome::Ignored);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn half_open_admits_only_the_probes_and_closes_when_they_succeed() {
        let mut b = breaker(1, 100, 2);
        let t = admit(&mut b, ms(0));
        b.on_result(ms(10), t, CallOutcome::Failure);
        assert_eq!(b.try_admit(ms(109)), Admit::No(Rejection::Open));
        let p1 = admit(&mut b, ms(110));
        assert!(p1.is_probe());
        assert_eq!(b.state(), BreakerState::HalfOpen);
        let p2 = admit(&mut b, ms(111));
        assert_eq!(b.try_admit(ms(112)), Admit::No(Rejection::ProbesBusy));
        b.on_result(ms(113), p1, CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.on_result(ms(114), p2, CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn a_failed_probe_reopens_for_a_full_period() {
        let mut b = breaker(1, 100, 1);
        let t = admit(&mut b, ms(0));
        b.on_result(ms(0), t, CallOutcome::Failure);
        let probe = admit(&mut b, ms(100));
        b.on_result(ms(150), probe, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.next_deadline(), Some(ms(250)));
        assert_eq!(b.opened_total(), 2);
    }

    #[test]
    fn a_late_failure_from_before_opening_changes_nothing() {
        let mut b = breaker(1, 100, 1);
        let early = admit(&mut b, ms(0));
        let failing = admit(&mut b, ms(0));
        b.on_result(ms(1), failing, CallOutcome::Failure);
        let probe = admit(&mut b, ms(101));
        // The call admitted before the breaker opened fails only now, during half-open.
        b.on_result(ms(102), early, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::HalfOpen);
        b.on_result(ms(103), probe, CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn an_ignored_probe_frees_its_slot() {
        let mut b = breaker(1, 100, 1);
        let t = admit(&mut b, ms(0));
        b.on_result(ms(0), t, CallOutcome::Failure);
        let probe = admit(&mut b, ms(100));
        b.on_result(ms(101), probe, CallOutcome::Ignored);
        let again = admit(&mut b, ms(102));
        assert!(again.is_probe());
        b.on_result(ms(103), again, CallOutcome::Success);
    }

    #[test]
    fn transitions_are_reported_in_order() {
        let mut b = breaker(1, 100, 1);
        let t = admit(&mut b, ms(0));
        b.on_result(ms(5), t, CallOutcome::Failure);
        let probe = admit(&mut b, ms(105));
        b.on_result(ms(106), probe, CallOutcome::Success);
        let seen: Vec<_> = std::iter::from_fn(|| b.poll_transition()).collect();
        use BreakerState::*;
        assert_eq!(
            seen,
            vec![
                Transition {
                    at: ms(5),
                    from: Closed,
                    to: Open
                },
                Transition {
                    at: ms(105),
                    from: Open,
                    to: HalfOpen
                },
                Transition {
                    at: ms(106),
                    from: HalfOpen,
                    to: Closed
                },
            ]
        );
    }

    #[test]
    fn rejected_configs_say_which_field_and_why() {
        let cases = [
            (0, 1, 1, "failures: must be at least 1"),
            (1, 0, 1, "open_for: must be longer than zero"),
            (1, 1, 0, "half_open_probes: must be at least 1"),
        ];
        for (failures, open_ms, probes, expected) in cases {
            let error = BreakerConfig::new(failures, SimDuration::from_millis(open_ms), probes)
                .unwrap_err();
            assert!(error.to_string().starts_with(expected), "{error}");
        }
    }
}

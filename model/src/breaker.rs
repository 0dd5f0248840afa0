//! Circuit breaker: opens on consecutive failures or on a failure rate over a sliding window.
//!
//! ```text
//!              the trip rule fires                         the opening has passed
//!   Closed ───────────────────────────────────────▶ Open ───────────────────────▶ HalfOpen
//!     ▲                                               ▲                              │
//!     │          the probes decide to close            │  the probes decide to reopen, │
//!     │                                                │  or half_open_max_wait passed │
//!     └────────────────────────────────────────────── ┴──────────────────────────────┘
//! ```
//!
//! Every knob below has a default that keeps the breaker described first (all probes must
//! succeed, uncounted results ignored, no half-open limit, openings of `open_for` each, the
//! rate compared after every result); `crate::presets` names the combinations other
//! libraries use.
//!
//! # Trip rules ([`Trip`])
//!
//! While closed, the breaker tallies the results it is told about and opens when its rule fires:
//!
//! - [`Trip::Consecutive`] (built by [`BreakerConfig::new`]): `failures_max` failures in a row
//!   open it; a success resets the run.
//! - [`Trip::FailureRate`] (built by [`BreakerConfig::failure_rate`]): the failures among the
//!   calls in the window, as an exact integer comparison
//!   `failures × 1000 >= rate_permille × calls`, evaluated after every recorded result once the
//!   window holds at least `min_calls` calls (resilience4j's `failureRateThreshold`,
//!   `minimumNumberOfCalls`). The comparison is done after a success as well as after a
//!   failure: the call that brings the window up to `min_calls` decides, whatever its own
//!   outcome. Time alone never opens the breaker (a result must arrive).
//!   - [`Window::Calls`]`(n)`: the last `n` results (resilience4j's `COUNT_BASED`); the
//!     `n + 1`-th result pushes out the oldest.
//!   - [`Window::Time`]`{ length, slots }` (resilience4j's `TIME_BASED`): results in the last
//!     `length`, kept as `slots` counters, so memory does not grow with the call rate. Each
//!     slot is `slot_length = length / slots` long (the constructor requires an exact
//!     division) and slots are aligned to multiples of `slot_length` from [`SimTime::ZERO`]. A
//!     result recorded at `t` falls into slot `k = t / slot_length` and is counted until the
//!     instant `(k + slots) × slot_length`, when its slot is reused: it is counted for longer
//!     than `length - slot_length` and for at most `length` (exactly `length` when `t` is at
//!     the start of its slot). With one slot the window is a tumbling window of `length`.
//!     (The retry budget's window is the same slotted window, one implementation for both.)
//!
//! Results are recorded at the `now` of [`Breaker::on_result`] (when the call ends, not when it
//! was admitted). [`CallOutcome::Ignored`] results never enter the tally. The tally is cleared
//! when the breaker opens and nothing is tallied while it is open or half-open, so when it
//! closes again the tally starts empty (no run of failures, an empty window).
//!
//! A failure-rate breaker may also have a slow-call rule ([`SlowCalls`], resilience4j's
//! `slowCallDurationThreshold` and `slowCallRateThreshold`): a call that lasted longer than
//! its duration, from `try_admit` to `on_result`, is slow whatever its outcome, the window
//! counts slow calls beside failures, and the breaker opens when either rate is reached.
//!
//! With [`Threshold::Exceeded`] (opossum) the rate must pass its threshold, not reach it: `>` in
//! place of `>=` in every rate comparison above and in the half-open rate rule.
//!
//! [`EvaluateOn::Failure`] compares the rate only after a failure (Polly, opossum): then a
//! success never opens the breaker, and the window that reached `min_calls` on a success
//! opens at the next failure if the rate still holds.
//!
//! With a warm-up ([`BreakerConfig::with_warm_up`], opossum's `allowWarmUp`), results before
//! `SimTime::ZERO + warm_up` are tallied but never open the breaker; the first result from that
//! instant on that satisfies the rule opens it.
//!
//! # Half-open
//!
//! The same for every trip rule: when the opening has passed the breaker admits at most
//! `probes_max` probes, and decides by its [`HalfOpenRule`]:
//!
//! - [`HalfOpenRule::AllProbesSucceed`] (the default): all of them must succeed to close it;
//!   the first failed probe reopens it.
//! - [`HalfOpenRule::FailureRate`] (resilience4j): once `probes_max` probes have reported, it
//!   opens if `failures × 1000 >= rate_permille × probes_max` (the trip rule's rate) and
//!   closes otherwise.
//!
//! An ignored probe frees its slot for another probe. With `half_open_max_wait`, a breaker
//! whose probes have not decided within that time of the first probe's admission opens
//! again, dated at that instant (resilience4j's `maxWaitDurationInHalfOpenState`; its
//! half-open state starts at the first call after the wait, which is that first probe).
//!
//! # Openings
//!
//! An opening from closed lasts `open_for`. A reopening from half-open (no close in between)
//! lasts the previous opening times `open_for_factor_permille / 1000`, rounded up to a
//! nanosecond, capped at `open_for_max` (the [`crate::backoff`] step); closing starts again
//! from `open_for`. With the default factor of one every opening lasts `open_for`.
//!
//! # Uncounted and ignored results
//!
//! [`CallOutcome::Uncounted`] is an error the caller's classifier does not record; what it
//! counts as is the config's [`UncountedAs`]: [`UncountedAs::Ignored`] (the default) leaves it
//! out of everything above, [`UncountedAs::Success`] takes it for a success everywhere
//! (resilience4j, opossum and Polly v8 count an error they are told not to record as a
//! success). [`CallOutcome::Ignored`] counts neither way under either setting: resilience4j's
//! `ignoreExceptions` and gobreaker's `IsExcluded` are checked before the record rule, and a
//! call that ended without a result (its caller stopped waiting, [`Breaker::on_cancelled`])
//! has no reply to count, so none is made up.
//!
//! # Which results count: the classifier lives with the caller
//!
//! The breaker does not look at errors. The caller classifies every finished call as
//! [`CallOutcome::Success`], [`CallOutcome::Failure`] (counts towards opening),
//! [`CallOutcome::Uncounted`] (not recorded: as `uncounted_as` says) or
//! [`CallOutcome::Ignored`] (counts neither way), and passes only that. In the simulator the
//! classifier is the breaker's `ignores` and `counts` sets (`sim::scenario::BreakerSpec`,
//! mapped in `sim/src/policies.rs`, `BreakerSlot::exit`): an error in `ignores` is ignored, one
//! in `counts` is a failure, any other error is uncounted, and ok/hit/miss are successes.
//! Without a preset the default `counts` is network errors and timeouts (timeout, refused,
//! connection lost), as seed 003 asks: "count only network/timeout errors"; an application
//! error then neither opens nor closes the breaker. With a library's preset it is every
//! error, as the libraries count by default.
//!
//! # Transitions
//!
//! Every change of state is queued once, in the order it happened, and handed out oldest first
//! by [`Breaker::poll_transition`]. The change from `Open` to `HalfOpen` happens when
//! `open_for` has passed, but the breaker only learns it at the next call that takes `now`
//! ([`Breaker::try_admit`], [`Breaker::on_result`], [`Breaker::handle_timeout`]); its
//! transition carries the instant it became due (`opened at + open_for`), not the instant it
//! was noticed, so the report is the same whenever the caller looks. At most
//! [`TRANSITIONS_HELD_MAX`] transitions wait to be polled; beyond that the oldest is dropped
//! and counted in [`Breaker::transitions_dropped`], never lost silently. The simulator drains
//! the queue after every `on_result` (`sim/src/policies.rs`, `BreakerSlot::exit`); between two drains only
//! `try_admit` runs, which makes at most two transitions (`HalfOpen -> Open` when
//! `half_open_max_wait` has passed, then `Open -> HalfOpen`), so it never drops one. (Today it discards what it drains: the report counts openings through
//! [`Breaker::opened_total`] and shows the final state through [`Breaker::state_at`].)
//!
//! # Call order and invariants
//!
//! [`Breaker::try_admit`] before each call; for every [`Admit::Yes`] exactly one
//! [`Breaker::on_result`] with the ticket it returned. A result whose ticket belongs to an
//! earlier state (for example a failure that arrives after the breaker opened, or a result of
//! a call admitted before the breaker last closed) changes nothing, unless the config says
//! [`LateFailures::Counted`]: then such a failure counts as a fresh one (it restarts an open
//! breaker's `open_for`, reopens a half-open one, enters a closed one's tally).
//!
//! - `now` never goes backwards between calls. Should a caller break this (threads that read
//!   a clock and then race for the lock of [`crate::concurrent::SharedBreaker`]), the breaker
//!   takes the latest `now` it has seen instead ([`crate::time::LatestTime`]), so its windows
//!   never run backwards.
//! - A ticket belongs to the breaker that issued it: handing it to another breaker panics
//!   (a real `assert!`, in release builds too), rather than corrupting that breaker's probes
//!   or tally. A clone of a breaker accepts the tickets of the original (they share their
//!   state up to the clone).
//! - In `HalfOpen`, at most `probes_max` tickets are admitted; while they are out, every other
//!   caller is rejected. Without `half_open_max_wait`, a probe that never reports back keeps
//!   the breaker half-open: that is the behaviour of a real breaker whose probe hangs, and a
//!   scenario can show it.
//! - An opening lasts at least `open_for` and at most `open_for_max`.
//! - Memory is bounded by the configuration: a count window holds at most
//!   [`WINDOW_CALLS_MAX`] results, a time window at most [`WINDOW_SLOTS_MAX`] slots, the
//!   transition queue at most [`TRANSITIONS_HELD_MAX`] transitions.

use std::collections::VecDeque;

use crate::backoff::{BackoffConfig, FACTOR_PERMILLE_ONE, Jitter};
use crate::config::ConfigError;
use crate::instance::InstanceId;
use crate::time::{LatestTime, SimDuration, SimTime};
use crate::window::SlottedCounts;

/// The largest count window: it keeps one entry per call.
pub const WINDOW_CALLS_MAX: u32 = 100_000;

/// The most slots a time window may have: it keeps one pair of counters per slot.
pub const WINDOW_SLOTS_MAX: u32 = 1_000;

/// Bound on transitions held for [`Breaker::poll_transition`]; beyond it the oldest is dropped
/// and counted in [`Breaker::transitions_dropped`].
pub const TRANSITIONS_HELD_MAX: usize = 8;

/// The calls a failure-rate breaker looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The last `n` recorded results.
    Calls(u32),
    /// The results recorded in the last `length`, kept in `slots` slots of `length / slots`
    /// each (see the module documentation for the exact granularity).
    Time { length: SimDuration, slots: u32 },
}

impl Window {
    /// The length of one slot of a time window; `None` for a count window.
    pub fn slot_length(self) -> Option<SimDuration> {
        match self {
            Window::Calls(_) => None,
            Window::Time { length, slots } => Some(SimDuration::from_nanos(
                length.as_nanos() / u64::from(slots),
            )),
        }
    }
}

/// When a closed breaker opens. Only [`BreakerConfig`]'s constructors make a config from one,
/// so the values in a config's rule are always valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trip {
    /// `failures_max` consecutive failures.
    Consecutive { failures_max: u32 },
    /// `failures × 1000 >= rate_permille × calls` over `window`, once the window holds at least
    /// `min_calls` calls.
    FailureRate {
        rate_permille: u32,
        window: Window,
        min_calls: u32,
    },
}

/// A validated breaker configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerConfig {
    trip: Trip,
    open_for: SimDuration,
    probes_max: u32,
    late_failures: LateFailures,
    half_open_rule: HalfOpenRule,
    uncounted_as: UncountedAs,
    /// How long a half-open breaker waits for its probes, from the first probe's admission.
    half_open_max_wait: Option<SimDuration>,
    /// The open duration of consecutive openings: `open_for`, then grown by its factor up to
    /// its ceiling (a factor of one, the default, keeps every opening at `open_for`).
    open_growth: BackoffConfig,
    evaluate_on: EvaluateOn,
    slow_calls: Option<SlowCalls>,
    /// How long after the start the trip rule may not open the breaker.
    warm_up: Option<SimDuration>,
    threshold: Threshold,
}

/// Whether a failure-rate breaker's rate must reach its threshold or pass it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threshold {
    /// `failures × 1000 >= rate_permille × calls` (resilience4j, Polly).
    #[default]
    Reached,
    /// `failures × 1000 > rate_permille × calls`: strictly above (opossum's `errorRate >
    /// errorThresholdPercentage`).
    Exceeded,
}

/// The slow-call rule of a failure-rate breaker (resilience4j's `slowCallDurationThreshold`
/// and `slowCallRateThreshold`): a call that lasted longer than `duration` (from
/// [`Breaker::try_admit`] to [`Breaker::on_result`]) is slow, success or failure; the breaker
/// also opens when `slow × 1000 >= rate_permille × calls` over the same window, once it holds
/// `min_calls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowCalls {
    pub duration: SimDuration,
    pub rate_permille: u32,
}

/// How a half-open breaker decides from its probes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HalfOpenRule {
    /// Every probe must succeed; the first failed probe reopens the breaker (Polly, opossum,
    /// gobreaker, and outagelab before the knob existed).
    #[default]
    AllProbesSucceed,
    /// Once `probes_max` probes have reported, the breaker opens if their failures reach the
    /// trip rule's rate (`failures × 1000 >= rate_permille × probes_max`) and closes
    /// otherwise (resilience4j's `permittedNumberOfCallsInHalfOpenState`). Needs a
    /// [`Trip::FailureRate`] rule.
    FailureRate,
}

/// What a [`CallOutcome::Uncounted`] result counts as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UncountedAs {
    /// Nothing: it neither enters the tally nor decides a probe, and a probe so ended frees its
    /// slot, as a [`CallOutcome::Ignored`] one (Polly v7's unhandled exceptions).
    #[default]
    Ignored,
    /// A success (resilience4j's exceptions outside `recordExceptions`; opossum's
    /// `errorFilter`; an outcome Polly v8's `ShouldHandle` rejects; gobreaker's
    /// `IsSuccessful`).
    Success,
}

/// After which results a closed failure-rate breaker compares its rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EvaluateOn {
    /// After every recorded result (resilience4j).
    #[default]
    Any,
    /// Only after a failure (Polly, opossum, gobreaker): a success never opens the breaker,
    /// even the one that brings the window up to `min_calls`.
    Failure,
}

/// What a counted failure does when the call it ends was admitted in an earlier state (a call
/// that started while closed and timed out after the breaker opened, say).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LateFailures {
    /// Changes nothing (resilience4j, Polly: a result belongs to the state that admitted it).
    #[default]
    Ignored,
    /// Counts as if the call had just been admitted and failed: while closed it enters the
    /// tally, while open it restarts `open_for` from now, while half-open it reopens the
    /// breaker. This is the breaker that stamps `openedAt = now` on every recorded failure
    /// past its threshold, as seed 000's `circuit-breaker.ts` does: failures still arriving
    /// from calls that were in flight when it opened keep it open.
    Counted,
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
        Self::with_trip(Trip::Consecutive { failures_max }, open_for, probes_max)
    }

    /// The breaker opens when at least `rate_permille` ‰ of the calls in `window` failed
    /// (`failures × 1000 >= rate_permille × calls`), once the window holds at least `min_calls`
    /// calls; it stays open for `open_for`, then admits up to `probes_max` probes, all of which
    /// must succeed to close it.
    ///
    /// Seed 003's "opens after 5 failures" as a rate: `failure_rate(1000, Window::Calls(5), 5,
    /// ..)`, which opens on five failures in a row like `new(5, ..)`; resilience4j's defaults
    /// are `failure_rate(500, Window::Calls(100), 100, 60 s, 10)`.
    pub fn failure_rate(
        rate_permille: u32,
        window: Window,
        min_calls: u32,
        open_for: SimDuration,
        probes_max: u32,
    ) -> Result<Self, ConfigError> {
        if rate_permille == 0 {
            return Err(ConfigError::new(
                "failure_rate_permille",
                "must be at least 1 (a threshold of 0 would open the breaker on successes alone)",
            ));
        }
        if rate_permille > 1000 {
            return Err(ConfigError::new(
                "failure_rate_permille",
                format!("must be at most 1000 (every call failed), got {rate_permille}"),
            ));
        }
        match window {
            Window::Calls(0) => {
                return Err(ConfigError::new(
                    "window_calls",
                    "must be at least 1 (an empty window never sees a failure)",
                ));
            }
            Window::Calls(calls) if calls > WINDOW_CALLS_MAX => {
                return Err(ConfigError::new(
                    "window_calls",
                    format!(
                        "must be at most {WINDOW_CALLS_MAX} (the window keeps one entry per \
                         call), got {calls}"
                    ),
                ));
            }
            Window::Calls(_) => {}
            Window::Time { length, slots } => {
                if length.is_zero() {
                    return Err(ConfigError::new(
                        "window_length",
                        "must be longer than zero (an empty window never sees a failure)",
                    ));
                }
                if slots == 0 {
                    return Err(ConfigError::new(
                        "window_slots",
                        "must be at least 1 (the window keeps its calls in slots)",
                    ));
                }
                if slots > WINDOW_SLOTS_MAX {
                    return Err(ConfigError::new(
                        "window_slots",
                        format!(
                            "must be at most {WINDOW_SLOTS_MAX} (the window keeps two counters \
                             per slot), got {slots}"
                        ),
                    ));
                }
                if !length.as_nanos().is_multiple_of(u64::from(slots)) {
                    return Err(ConfigError::new(
                        "window_slots",
                        format!(
                            "{slots} slots do not divide window_length {length} into whole \
                             nanoseconds"
                        ),
                    ));
                }
            }
        }
        if min_calls == 0 {
            return Err(ConfigError::new(
                "min_calls",
                "must be at least 1 (with no calls there is no rate to compare)",
            ));
        }
        if let Window::Calls(calls) = window
            && min_calls > calls
        {
            return Err(ConfigError::new(
                "min_calls",
                format!(
                    "{min_calls} is more than window_calls {calls}, so the window could never \
                     hold enough calls to open the breaker"
                ),
            ));
        }
        let trip = Trip::FailureRate {
            rate_permille,
            window,
            min_calls,
        };
        Self::with_trip(trip, open_for, probes_max)
    }

    /// The checks every trip rule shares.
    fn with_trip(trip: Trip, open_for: SimDuration, probes_max: u32) -> Result<Self, ConfigError> {
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
            trip,
            open_for,
            probes_max,
            late_failures: LateFailures::Ignored,
            half_open_rule: HalfOpenRule::AllProbesSucceed,
            uncounted_as: UncountedAs::Ignored,
            half_open_max_wait: None,
            open_growth: BackoffConfig::new(open_for, FACTOR_PERMILLE_ONE, open_for, Jitter::None)?,
            evaluate_on: EvaluateOn::Any,
            slow_calls: None,
            warm_up: None,
            threshold: Threshold::Reached,
        })
    }

    /// The same config with a slow-call rule (see [`SlowCalls`]; `None`, the default, has
    /// none). Needs a [`Trip::FailureRate`] rule, whose window and `min_calls` it shares;
    /// under [`HalfOpenRule::FailureRate`] the probes are held to it too.
    pub fn with_slow_calls(self, slow_calls: Option<SlowCalls>) -> Result<Self, ConfigError> {
        if let Some(slow) = slow_calls {
            if let Trip::Consecutive { .. } = self.trip {
                return Err(ConfigError::new(
                    "slow_call_rate_permille",
                    "a slow-call rate is counted over the failure_rate rule's window, and this \
                     breaker opens on consecutive failures: give it failure_rate",
                ));
            }
            if slow.duration.is_zero() {
                return Err(ConfigError::new(
                    "slow_call_duration",
                    "must be longer than zero (every call would be slow)",
                ));
            }
            if slow.rate_permille == 0 || slow.rate_permille > 1000 {
                return Err(ConfigError::new(
                    "slow_call_rate_permille",
                    format!(
                        "must be from 1 to 1000 (every call slow), got {}",
                        slow.rate_permille
                    ),
                ));
            }
        }
        Ok(BreakerConfig { slow_calls, ..self })
    }

    pub fn slow_calls(&self) -> Option<SlowCalls> {
        self.slow_calls
    }

    /// The same config with `half_open_rule` as given (the default is
    /// [`HalfOpenRule::AllProbesSucceed`]). [`HalfOpenRule::FailureRate`] needs a
    /// [`Trip::FailureRate`] rule: its rate is the one the probes are held to.
    pub fn with_half_open_rule(self, half_open_rule: HalfOpenRule) -> Result<Self, ConfigError> {
        if half_open_rule == HalfOpenRule::FailureRate
            && let Trip::Consecutive { .. } = self.trip
        {
            return Err(ConfigError::new(
                "half_open_rule",
                "\"failure_rate\" holds the probes to the failure_rate rule's percent, and this \
                 breaker opens on consecutive failures: give it failure_rate, or keep \
                 \"all_probes_succeed\"",
            ));
        }
        Ok(BreakerConfig {
            half_open_rule,
            ..self
        })
    }

    /// The same config with uncounted ([`CallOutcome::Ignored`]) results counted as given (the
    /// default is [`UncountedAs::Ignored`]).
    pub fn with_uncounted_as(self, uncounted_as: UncountedAs) -> Self {
        BreakerConfig {
            uncounted_as,
            ..self
        }
    }

    /// The same config with a limit on how long a half-open breaker waits for its probes,
    /// counted from the first probe's admission; when it passes before the probes decide, the
    /// breaker opens again (resilience4j's `maxWaitDurationInHalfOpenState`). `None`, the
    /// default, waits for ever.
    pub fn with_half_open_max_wait(
        self,
        half_open_max_wait: Option<SimDuration>,
    ) -> Result<Self, ConfigError> {
        if half_open_max_wait.is_some_and(SimDuration::is_zero) {
            return Err(ConfigError::new(
                "half_open_max_wait",
                "must be longer than zero (leave it out to wait for the probes for ever)",
            ));
        }
        Ok(BreakerConfig {
            half_open_max_wait,
            ..self
        })
    }

    /// The same config with openings that grow: an opening that follows a half-open breaker
    /// (no close in between) lasts `factor_permille / 1000` times the one before, up to
    /// `open_for_max`; closing starts again from `open_for` (resilience4j's exponential
    /// wait-interval function, Polly v8's break-duration generator). Each step rounds up to a
    /// nanosecond, as the backoff does.
    pub fn with_open_growth(
        self,
        factor_permille: u32,
        open_for_max: SimDuration,
    ) -> Result<Self, ConfigError> {
        let open_growth =
            BackoffConfig::new(self.open_for, factor_permille, open_for_max, Jitter::None)
                .map_err(|error| match error.field {
                    "factor_permille" => ConfigError::new("open_for_factor", error.reason),
                    "ceiling" => ConfigError::new(
                        "open_for_max",
                        format!(
                            "must be at least open_for ({}): it caps openings that start there",
                            self.open_for
                        ),
                    ),
                    _ => error,
                })?;
        Ok(BreakerConfig {
            open_growth,
            ..self
        })
    }

    /// The same config comparing the failure rate after the results given (the default is
    /// [`EvaluateOn::Any`]).
    /// The same config with a warm-up: until `warm_up` has passed since [`SimTime::ZERO`] (the
    /// start of the run), the trip rule records results but does not open the breaker; the
    /// first result after it that satisfies the rule does (opossum's `allowWarmUp`, whose
    /// warm-up lasts its `rollingCountTimeout`). `None`, the default, has none.
    pub fn with_warm_up(self, warm_up: Option<SimDuration>) -> Self {
        BreakerConfig { warm_up, ..self }
    }

    pub fn warm_up(&self) -> Option<SimDuration> {
        self.warm_up
    }

    /// The same config with its rates compared by `threshold` (the default is
    /// [`Threshold::Reached`]): the trip rule's failure and slow-call rates, and the probes'
    /// under [`HalfOpenRule::FailureRate`]. Needs a [`Trip::FailureRate`] rule.
    pub fn with_threshold(self, threshold: Threshold) -> Result<Self, ConfigError> {
        if threshold == Threshold::Exceeded && matches!(self.trip, Trip::Consecutive { .. }) {
            return Err(ConfigError::new(
                "threshold",
                "compares a failure rate: it needs failure_rate, not consecutive failures",
            ));
        }
        Ok(BreakerConfig { threshold, ..self })
    }

    pub fn threshold(&self) -> Threshold {
        self.threshold
    }

    pub fn with_evaluate_on(self, evaluate_on: EvaluateOn) -> Self {
        BreakerConfig {
            evaluate_on,
            ..self
        }
    }

    pub fn half_open_rule(&self) -> HalfOpenRule {
        self.half_open_rule
    }

    pub fn uncounted_as(&self) -> UncountedAs {
        self.uncounted_as
    }

    pub fn half_open_max_wait(&self) -> Option<SimDuration> {
        self.half_open_max_wait
    }

    /// The growth factor of consecutive openings, in thousandths (1000: they do not grow).
    pub fn open_for_factor_permille(&self) -> u32 {
        self.open_growth.factor_permille()
    }

    /// The longest an opening lasts (`open_for` when openings do not grow).
    pub fn open_for_max(&self) -> SimDuration {
        self.open_growth.ceiling()
    }

    pub fn evaluate_on(&self) -> EvaluateOn {
        self.evaluate_on
    }

    /// The same config with `late_failures` as given (the default is
    /// [`LateFailures::Ignored`]).
    pub fn with_late_failures(self, late_failures: LateFailures) -> Self {
        BreakerConfig {
            late_failures,
            ..self
        }
    }

    pub fn late_failures(&self) -> LateFailures {
        self.late_failures
    }

    /// When the closed breaker opens.
    pub fn trip(&self) -> Trip {
        self.trip
    }

    /// The fewest counted failures that can open the breaker: `failures_max` for
    /// [`Trip::Consecutive`]; for [`Trip::FailureRate`], the failures needed among the first
    /// `min_calls` calls, `⌈rate_permille × min_calls / 1000⌉`.
    pub fn failures_max(&self) -> u32 {
        match self.trip {
            Trip::Consecutive { failures_max } => failures_max,
            Trip::FailureRate {
                rate_permille,
                min_calls,
                ..
            } => {
                let failures = (u64::from(rate_permille) * u64::from(min_calls)).div_ceil(1000);
                // At most `min_calls`, since `rate_permille <= 1000`.
                u32::try_from(failures).expect("failures needed fit the call count")
            }
        }
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

/// Permission to make one call. Hand it back to [`Breaker::on_result`] of the breaker that
/// issued it, exactly once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "every admitted call must report its result with on_result"]
pub struct Ticket {
    /// The breaker that issued it.
    owner: InstanceId,
    epoch: u64,
    probe: bool,
    /// When the call was admitted, for the slow-call rule.
    admitted_at: SimTime,
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

/// How a finished call counts, as decided by the caller's error classifier (see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    Success,
    /// A failure that counts towards opening (for example a timeout or a refused connection).
    Failure,
    /// A result that counts neither way under every configuration: it does not enter the
    /// tally, and a probe so ended frees its slot (resilience4j's `ignoreExceptions`,
    /// gobreaker's `IsExcluded`, a call whose caller stopped waiting).
    Ignored,
    /// A result the classifier does not record (an error outside the breaker's `counts`):
    /// what it counts as is the config's [`UncountedAs`], ignored by default, a success for
    /// the libraries whose unrecorded errors are successes (resilience4j's exceptions outside
    /// `recordExceptions`, opossum's `errorFilter`, Polly v8's `ShouldHandle`).
    Uncounted,
}

/// A change of state, reported through [`Breaker::poll_transition`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transition {
    pub at: SimTime,
    pub from: BreakerState,
    pub to: BreakerState,
}

/// What a failure-rate breaker's window holds at some instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WindowCounts {
    /// Successes and failures in the window (ignored results never enter it).
    pub calls: u64,
    pub failures: u64,
    /// Calls slower than the slow-call rule's duration (zero without the rule).
    pub slow: u64,
}

/// A circuit breaker. See the module documentation for the trip rules and the call order.
#[derive(Clone, Debug)]
pub struct Breaker {
    /// Stamped into every ticket, checked when one comes back.
    id: InstanceId,
    config: BreakerConfig,
    state: BreakerState,
    /// Incremented on every state change; tickets from an older epoch are ignored. A `u64`
    /// never wraps (one change a nanosecond lasts 584 years), so no old ticket can come back
    /// to life.
    epoch: u64,
    /// The results recorded while closed, as the trip rule needs them.
    tally: Tally,
    opened_at: SimTime,
    /// How long the current (or last) opening lasts: `open_for`, grown on each reopening
    /// from half-open when the config says so.
    open_duration: SimDuration,
    probes_admitted: u32,
    probes_succeeded: u32,
    /// Failed probes, for [`HalfOpenRule::FailureRate`].
    probes_failed: u32,
    /// Slow probes, for [`HalfOpenRule::FailureRate`] with a slow-call rule.
    probes_slow: u32,
    /// When the first probe of this half-open period was admitted, for `half_open_max_wait`.
    first_probe_at: Option<SimTime>,
    /// The latest `now` seen; an earlier `now` is taken as this one.
    latest: LatestTime,
    /// Transitions not yet polled, oldest first; at most `TRANSITIONS_HELD_MAX`.
    transitions: VecDeque<Transition>,
    /// Transitions dropped because the queue was full.
    transitions_dropped: u64,
    /// Counts of transitions into `Open`, for reports.
    opened_total: u64,
}

impl Breaker {
    pub fn new(config: BreakerConfig) -> Self {
        Breaker {
            id: InstanceId::fresh(),
            config,
            state: BreakerState::Closed,
            epoch: 0,
            tally: Tally::new(config.trip, config.slow_calls),
            opened_at: SimTime::ZERO,
            open_duration: config.open_for,
            probes_admitted: 0,
            probes_succeeded: 0,
            probes_failed: 0,
            probes_slow: 0,
            first_probe_at: None,
            latest: LatestTime::new(),
            transitions: VecDeque::with_capacity(TRANSITIONS_HELD_MAX),
            transitions_dropped: 0,
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

    /// The state at `now`, counting an `Open` whose `open_for` has passed as `HalfOpen`, and
    /// a `HalfOpen` whose `half_open_max_wait` has passed as `Open` (then `HalfOpen` again once
    /// that opening has passed), without changing anything.
    pub fn state_at(&self, now: SimTime) -> BreakerState {
        let now = self.latest.at(now);
        match self.state {
            BreakerState::Open if now >= self.open_deadline() => BreakerState::HalfOpen,
            BreakerState::HalfOpen => match self.half_open_deadline() {
                Some(expiry) if now >= expiry => {
                    let reopened_for = self.config.open_growth.grow(self.open_duration);
                    if now >= expiry.saturating_add(reopened_for) {
                        BreakerState::HalfOpen
                    } else {
                        BreakerState::Open
                    }
                }
                _ => BreakerState::HalfOpen,
            },
            state => state,
        }
    }

    /// The first instant after `now` at which [`Breaker::state_at`] answers differently, if
    /// no call is made in between (`SimTime::MAX` when only a call can change it): a caller
    /// that shows the state (a gauge) need not ask again before then. Exact: the state at
    /// every instant from `now` up to it is the state at `now`, and at it the state changes.
    pub fn state_holds_until(&self, now: SimTime) -> SimTime {
        let now = self.latest.at(now);
        let ahead = |at: SimTime| (at > now).then_some(at);
        let next = match self.state {
            BreakerState::Open => ahead(self.open_deadline()),
            BreakerState::HalfOpen => self.half_open_deadline().and_then(|expiry| {
                let reopened_for = self.config.open_growth.grow(self.open_duration);
                ahead(expiry).or_else(|| ahead(expiry.saturating_add(reopened_for)))
            }),
            BreakerState::Closed => None,
        };
        next.unwrap_or(SimTime::MAX)
    }

    /// How many times the breaker has opened.
    pub fn opened_total(&self) -> u64 {
        self.opened_total
    }

    /// How many transitions were dropped, unpolled, because [`TRANSITIONS_HELD_MAX`] were
    /// already waiting. Zero for a caller that polls after every call.
    pub fn transitions_dropped(&self) -> u64 {
        self.transitions_dropped
    }

    /// What the window of a failure-rate breaker holds at `now` (without changing anything);
    /// `None` for a consecutive-failure breaker. Empty while open or half-open.
    pub fn window_counts(&self, now: SimTime) -> Option<WindowCounts> {
        self.tally.window_counts(self.latest.at(now))
    }

    /// When the breaker next changes state on its own, if it will: Open -> HalfOpen when the
    /// opening has passed; HalfOpen -> Open when `half_open_max_wait` has passed since the
    /// first probe was admitted.
    pub fn next_deadline(&self) -> Option<SimTime> {
        match self.state {
            BreakerState::Open => Some(self.open_deadline()),
            BreakerState::HalfOpen => self.half_open_deadline(),
            BreakerState::Closed => None,
        }
    }

    /// How long the current (or last) opening lasts: `open_for`, unless openings grow.
    pub fn open_duration(&self) -> SimDuration {
        self.open_duration
    }

    fn open_deadline(&self) -> SimTime {
        self.opened_at.saturating_add(self.open_duration)
    }

    fn half_open_deadline(&self) -> Option<SimTime> {
        let wait = self.config.half_open_max_wait?;
        Some(self.first_probe_at?.saturating_add(wait))
    }

    /// Applies the passage of time: an `Open` breaker whose opening has passed turns
    /// `HalfOpen`, a `HalfOpen` one whose `half_open_max_wait` has passed turns `Open` (each
    /// transition is dated at its deadline).
    pub fn handle_timeout(&mut self, now: SimTime) {
        self.observe(now);
    }

    /// Asks to make one call now.
    pub fn try_admit(&mut self, now: SimTime) -> Admit {
        let now = self.observe(now);
        match self.state {
            BreakerState::Closed => Admit::Yes(Ticket {
                owner: self.id,
                epoch: self.epoch,
                probe: false,
                admitted_at: now,
            }),
            BreakerState::Open => Admit::No(Rejection::Open),
            BreakerState::HalfOpen => {
                if self.probes_admitted < self.config.probes_max {
                    self.probes_admitted += 1;
                    self.first_probe_at.get_or_insert(now);
                    Admit::Yes(Ticket {
                        owner: self.id,
                        epoch: self.epoch,
                        probe: true,
                        admitted_at: now,
                    })
                } else {
                    Admit::No(Rejection::ProbesBusy)
                }
            }
        }
    }

    /// Reports how an admitted call ended.
    ///
    /// Panics if `ticket` was issued by another breaker (checked before anything changes).
    pub fn on_result(&mut self, now: SimTime, ticket: Ticket, outcome: CallOutcome) {
        let outcome = match (outcome, self.config.uncounted_as) {
            (CallOutcome::Uncounted, UncountedAs::Success) => CallOutcome::Success,
            (CallOutcome::Uncounted, UncountedAs::Ignored) => CallOutcome::Ignored,
            (outcome, _) => outcome,
        };
        self.settle(now, ticket, outcome);
    }

    /// Reports that an admitted call ended without a result: its caller stopped waiting (a
    /// cancelled future, a timeout around the call, a task aborted). It counts neither way
    /// under every configuration, [`UncountedAs::Success`] included: that setting says how
    /// the library counts an error it was told not to record, and here no reply was seen at
    /// all. Counting it a success would let a half-open breaker close on a probe that never
    /// answered. A half-open probe's slot is freed for another probe.
    ///
    /// Panics if `ticket` was issued by another breaker (checked before anything changes).
    pub fn on_cancelled(&mut self, now: SimTime, ticket: Ticket) {
        self.settle(now, ticket, CallOutcome::Ignored);
    }

    /// Records `outcome` (already mapped by `uncounted_as`: never [`CallOutcome::Uncounted`])
    /// for `ticket`.
    fn settle(&mut self, now: SimTime, ticket: Ticket, outcome: CallOutcome) {
        debug_assert_ne!(outcome, CallOutcome::Uncounted, "mapped by on_result");
        self.id.assert_issued(ticket.owner, "a ticket", "breaker");
        let now = self.observe(now);
        let slow = self
            .config
            .slow_calls
            .is_some_and(|rule| now.saturating_since(ticket.admitted_at) > rule.duration);
        if ticket.epoch != self.epoch {
            if outcome == CallOutcome::Failure && self.config.late_failures == LateFailures::Counted
            {
                self.late_failure(now, slow);
            }
            return;
        }
        match (self.state, outcome) {
            (BreakerState::Closed, CallOutcome::Success) => {
                let reached = self.tally.record(now, false, slow, self.config.threshold);
                if reached && self.config.evaluate_on == EvaluateOn::Any && self.warmed_up(now) {
                    self.open(now);
                }
            }
            (BreakerState::Closed, CallOutcome::Failure) => {
                if self.tally.record(now, true, slow, self.config.threshold) && self.warmed_up(now)
                {
                    self.open(now);
                }
            }
            (BreakerState::Closed, CallOutcome::Ignored | CallOutcome::Uncounted) => {}
            (BreakerState::HalfOpen, CallOutcome::Success | CallOutcome::Failure) => {
                debug_assert!(ticket.probe, "a half-open ticket is a probe");
                self.probe_reported(now, outcome == CallOutcome::Failure, slow);
            }
            // An uncounted probe result frees its slot for another probe.
            (BreakerState::HalfOpen, CallOutcome::Ignored | CallOutcome::Uncounted) => {
                self.probes_admitted -= 1
            }
            // No ticket of the current epoch exists while open: none is issued while open,
            // opening starts a new epoch, the epoch never wraps, and a ticket of another
            // breaker was refused above.
            (BreakerState::Open, _) => {
                debug_assert!(false, "a ticket of the current epoch while open");
            }
        }
    }

    /// The oldest state change not yet polled. Each change is handed out once, in order.
    pub fn poll_transition(&mut self) -> Option<Transition> {
        self.transitions.pop_front()
    }

    /// A probe of the current half-open period reported a success or a failure (slow or not:
    /// only [`HalfOpenRule::FailureRate`] looks).
    fn probe_reported(&mut self, now: SimTime, failed: bool, slow: bool) {
        match self.config.half_open_rule {
            HalfOpenRule::AllProbesSucceed if failed => self.open(now),
            HalfOpenRule::AllProbesSucceed => {
                self.probes_succeeded += 1;
                if self.probes_succeeded >= self.config.probes_max {
                    self.close(now);
                }
            }
            HalfOpenRule::FailureRate => {
                if failed {
                    self.probes_failed += 1;
                } else {
                    self.probes_succeeded += 1;
                }
                self.probes_slow += u32::from(slow);
                let reported = self.probes_failed + self.probes_succeeded;
                if reported >= self.config.probes_max {
                    let Trip::FailureRate { rate_permille, .. } = self.config.trip else {
                        unreachable!("the config refuses a rate rule for probes without one");
                    };
                    let counts = WindowCounts {
                        calls: u64::from(reported),
                        failures: u64::from(self.probes_failed),
                        slow: u64::from(self.probes_slow),
                    };
                    let slow_rate = self.config.slow_calls.map(|rule| rule.rate_permille);
                    if rate_reached(counts, rate_permille, 1, slow_rate, self.config.threshold) {
                        self.open(now);
                    } else {
                        self.close(now);
                    }
                }
            }
        }
    }

    fn close(&mut self, now: SimTime) {
        debug_assert!(self.tally.is_empty(), "cleared when the breaker opened");
        self.open_duration = self.config.open_for;
        self.move_to(now, BreakerState::Closed);
    }

    /// Takes `now` into account: clamps it to the latest instant seen, turns a `HalfOpen`
    /// breaker whose `half_open_max_wait` has passed `Open`, and an `Open` one whose opening
    /// has passed `HalfOpen` (at most these two transitions, in this order: a breaker that
    /// has just turned half-open has admitted no probe, so it has no half-open deadline).
    /// Returns the instant to use.
    fn observe(&mut self, now: SimTime) -> SimTime {
        let now = self.latest.observe(now);
        if self.state == BreakerState::HalfOpen
            && let Some(expiry) = self.half_open_deadline()
            && now >= expiry
        {
            self.open(expiry);
        }
        if self.state == BreakerState::Open {
            let deadline = self.open_deadline();
            if now >= deadline {
                self.probes_admitted = 0;
                self.probes_succeeded = 0;
                self.probes_failed = 0;
                self.probes_slow = 0;
                self.first_probe_at = None;
                self.move_to(deadline, BreakerState::HalfOpen);
            }
        }
        debug_assert!(self.next_deadline().is_none_or(|deadline| deadline > now));
        now
    }

    /// A counted failure of a call admitted in an earlier state, under
    /// [`LateFailures::Counted`].
    /// Whether the warm-up (if any) is over at `now`: the trip rule may open the breaker.
    fn warmed_up(&self, now: SimTime) -> bool {
        self.config
            .warm_up
            .is_none_or(|warm_up| now >= SimTime::ZERO.saturating_add(warm_up))
    }

    fn late_failure(&mut self, now: SimTime, slow: bool) {
        match self.state {
            BreakerState::Closed => {
                if self.tally.record(now, true, slow, self.config.threshold) && self.warmed_up(now)
                {
                    self.open(now);
                }
            }
            // Still open: open for a full `open_for` from this failure (no new transition,
            // no new opening counted: the breaker never closed).
            BreakerState::Open => self.opened_at = now,
            BreakerState::HalfOpen => self.open(now),
        }
    }

    /// Opens the breaker at `now`: for `open_for` from closed, for the grown duration when it
    /// reopens from half-open.
    fn open(&mut self, now: SimTime) {
        self.open_duration = match self.state {
            BreakerState::HalfOpen => self.config.open_growth.grow(self.open_duration),
            BreakerState::Closed | BreakerState::Open => self.config.open_for,
        };
        self.opened_at = now;
        self.opened_total += 1;
        // Nothing is tallied while open or half-open, so the breaker closes with an empty
        // tally (and `window_counts` shows an empty window meanwhile).
        self.tally.clear();
        self.move_to(now, BreakerState::Open);
    }

    fn move_to(&mut self, at: SimTime, to: BreakerState) {
        let from = self.state;
        debug_assert_ne!(from, to, "a transition changes the state");
        self.state = to;
        self.epoch += 1;
        if self.transitions.len() == TRANSITIONS_HELD_MAX {
            self.transitions.pop_front();
            self.transitions_dropped += 1;
        }
        debug_assert!(
            self.transitions
                .back()
                .is_none_or(|last| last.at <= at && last.to == from),
            "transitions are queued in order and chain"
        );
        self.transitions.push_back(Transition { at, from, to });
    }
}

/// The results a closed breaker has recorded, in the form its trip rule needs.
#[derive(Clone, Debug)]
enum Tally {
    Consecutive {
        failures_max: u32,
        /// Failures since the last success (or since the breaker closed).
        failures: u32,
    },
    Calls {
        rate_permille: u32,
        min_calls: u32,
        /// The slow-call rule's rate, if there is one.
        slow_rate_permille: Option<u32>,
        window: CallWindow,
    },
    Time {
        rate_permille: u32,
        min_calls: u32,
        slow_rate_permille: Option<u32>,
        window: TimeWindow,
    },
}

impl Tally {
    fn new(trip: Trip, slow_calls: Option<SlowCalls>) -> Self {
        let slow_rate_permille = slow_calls.map(|rule| rule.rate_permille);
        match trip {
            Trip::Consecutive { failures_max } => Tally::Consecutive {
                failures_max,
                failures: 0,
            },
            Trip::FailureRate {
                rate_permille,
                window: Window::Calls(calls_max),
                min_calls,
            } => Tally::Calls {
                rate_permille,
                min_calls,
                slow_rate_permille,
                window: CallWindow::new(calls_max),
            },
            Trip::FailureRate {
                rate_permille,
                window: Window::Time { length, slots },
                min_calls,
            } => Tally::Time {
                rate_permille,
                min_calls,
                slow_rate_permille,
                window: TimeWindow::new(length, slots),
            },
        }
    }

    /// Records one success or failure at `now`, slow or not; returns whether the breaker must
    /// open.
    fn record(&mut self, now: SimTime, failed: bool, slow: bool, threshold: Threshold) -> bool {
        match self {
            Tally::Consecutive {
                failures_max,
                failures,
            } => {
                *failures = if failed { *failures + 1 } else { 0 };
                *failures >= *failures_max
            }
            Tally::Calls {
                rate_permille,
                min_calls,
                slow_rate_permille,
                window,
            } => {
                window.record(failed, slow);
                rate_reached(
                    window.counts(),
                    *rate_permille,
                    *min_calls,
                    *slow_rate_permille,
                    threshold,
                )
            }
            Tally::Time {
                rate_permille,
                min_calls,
                slow_rate_permille,
                window,
            } => {
                window.record(now, failed, slow);
                rate_reached(
                    window.counts(),
                    *rate_permille,
                    *min_calls,
                    *slow_rate_permille,
                    threshold,
                )
            }
        }
    }

    fn clear(&mut self) {
        match self {
            Tally::Consecutive { failures, .. } => *failures = 0,
            Tally::Calls { window, .. } => window.clear(),
            Tally::Time { window, .. } => window.clear(),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Tally::Consecutive { failures, .. } => *failures == 0,
            Tally::Calls { window, .. } => window.counts() == WindowCounts::default(),
            Tally::Time { window, .. } => window.counts() == WindowCounts::default(),
        }
    }

    fn window_counts(&self, now: SimTime) -> Option<WindowCounts> {
        match self {
            Tally::Consecutive { .. } => None,
            Tally::Calls { window, .. } => Some(window.counts()),
            Tally::Time { window, .. } => Some(window.counts_at(now)),
        }
    }
}

/// `failures × 1000 >= rate_permille × calls`, or with a slow-call rule
/// `slow × 1000 >= slow_rate_permille × calls`, once there are `min_calls` calls; exact. With
/// [`Threshold::Exceeded`], `>` in place of `>=`.
fn rate_reached(
    counts: WindowCounts,
    rate_permille: u32,
    min_calls: u32,
    slow_rate_permille: Option<u32>,
    threshold: Threshold,
) -> bool {
    debug_assert!(counts.failures <= counts.calls && counts.slow <= counts.calls);
    let reached = |count: u64, permille: u32| {
        let (share, bar) = (
            u128::from(count) * 1000,
            u128::from(permille) * u128::from(counts.calls),
        );
        match threshold {
            Threshold::Reached => share >= bar,
            Threshold::Exceeded => share > bar,
        }
    };
    counts.calls >= u64::from(min_calls)
        && (reached(counts.failures, rate_permille)
            || slow_rate_permille.is_some_and(|permille| reached(counts.slow, permille)))
}

/// The last `calls_max` results, oldest first.
#[derive(Clone, Debug)]
struct CallWindow {
    calls_max: u32,
    /// `(failed, slow)` per call; at most `calls_max` entries.
    outcomes: VecDeque<(bool, bool)>,
    /// The failures among `outcomes`.
    failures: u32,
    /// The slow calls among `outcomes`.
    slow: u32,
}

impl CallWindow {
    fn new(calls_max: u32) -> Self {
        debug_assert!((1..=WINDOW_CALLS_MAX).contains(&calls_max));
        CallWindow {
            calls_max,
            outcomes: VecDeque::new(),
            failures: 0,
            slow: 0,
        }
    }

    fn record(&mut self, failed: bool, slow: bool) {
        if self.outcomes.len() == self.calls_max as usize
            && let Some((old_failed, old_slow)) = self.outcomes.pop_front()
        {
            self.failures -= u32::from(old_failed);
            self.slow -= u32::from(old_slow);
        }
        self.outcomes.push_back((failed, slow));
        self.failures += u32::from(failed);
        self.slow += u32::from(slow);
        debug_assert!(self.outcomes.len() <= self.calls_max as usize);
    }

    fn counts(&self) -> WindowCounts {
        WindowCounts {
            calls: self.outcomes.len() as u64,
            failures: u64::from(self.failures),
            slow: u64::from(self.slow),
        }
    }

    fn clear(&mut self) {
        self.outcomes.clear();
        self.failures = 0;
        self.slow = 0;
    }
}

/// The results of a time window: calls and failures in a [`SlottedCounts`] (see the module
/// documentation for which results it holds at any instant).
#[derive(Clone, Debug)]
struct TimeWindow {
    /// Counter 0 counts calls, counter 1 failures, counter 2 slow calls.
    counts: SlottedCounts,
}

const CALLS: usize = 0;
const FAILURES: usize = 1;
const SLOW: usize = 2;

impl TimeWindow {
    fn new(length: SimDuration, slots: u32) -> Self {
        debug_assert!((1..=WINDOW_SLOTS_MAX).contains(&slots));
        debug_assert!(length.as_nanos().is_multiple_of(u64::from(slots)));
        let slot_length = SimDuration::from_nanos(length.as_nanos() / u64::from(slots));
        TimeWindow {
            counts: SlottedCounts::new(slot_length, slots),
        }
    }

    /// Records one result at `now` (the latest instant the breaker has seen).
    fn record(&mut self, now: SimTime, failed: bool, slow: bool) {
        let mut counts = [0; crate::window::COUNTERS];
        counts[CALLS] = 1;
        counts[FAILURES] = u64::from(failed);
        counts[SLOW] = u64::from(slow);
        self.counts.add(now, counts);
    }

    /// The sums, valid right after `record`.
    fn counts(&self) -> WindowCounts {
        window_counts(self.counts.sums())
    }

    /// The sums at `now`, without moving the window.
    fn counts_at(&self, now: SimTime) -> WindowCounts {
        window_counts(self.counts.sums_at(now))
    }

    fn clear(&mut self) {
        self.counts.clear();
    }
}

fn window_counts(sums: crate::window::Counts) -> WindowCounts {
    WindowCounts {
        calls: sums[CALLS],
        failures: sums[FAILURES],
        slow: sums[SLOW],
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

    fn counting_late_failures(failures: u32, open_for_ms: u64) -> Breaker {
        let config = BreakerConfig::new(failures, SimDuration::from_millis(open_for_ms), 1)
            .unwrap()
            .with_late_failures(LateFailures::Counted);
        Breaker::new(config)
    }

    #[test]
    fn a_counted_late_failure_while_open_restarts_the_open_period() {
        // Seed 000's breaker: calls in flight when it opened keep failing for two seconds,
        // and each failure stamps a new opening time.
        let mut b = counting_late_failures(1, 5000);
        let late = admit(&mut b, ms(0));
        let first = admit(&mut b, ms(0));
        b.on_result(ms(2000), first, CallOutcome::Failure);
        assert_eq!(b.next_deadline(), Some(ms(7000)));
        b.on_result(ms(3500), late, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.next_deadline(), Some(ms(8500)));
        assert_eq!(b.try_admit(ms(8499)), Admit::No(Rejection::Open));
        assert!(admit(&mut b, ms(8500)).is_probe());
        // Re-arming is not a new opening.
        assert_eq!(b.opened_total(), 1);
        let seen: Vec<_> = std::iter::from_fn(|| b.poll_transition()).collect();
        assert_eq!(
            seen.len(),
            2,
            "closed -> open, then open -> half-open: {seen:?}"
        );
        assert_eq!(seen[1].at, ms(8500));
    }

    #[test]
    fn a_counted_late_failure_reopens_a_half_open_breaker_and_enters_a_closed_tally() {
        let mut b = counting_late_failures(2, 100);
        let early = admit(&mut b, ms(0));
        for _ in 0..2 {
            let t = admit(&mut b, ms(0));
            b.on_result(ms(1), t, CallOutcome::Failure);
        }
        let probe = admit(&mut b, ms(101));
        b.on_result(ms(102), early, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
        assert_eq!(b.opened_total(), 2);
        // The probe admitted before the reopening no longer decides anything.
        b.on_result(ms(103), probe, CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[test]
    fn a_counted_late_failure_enters_the_tally_of_a_breaker_that_closed_since() {
        let mut b = counting_late_failures(2, 100);
        let old = admit(&mut b, ms(0));
        for _ in 0..2 {
            let t = admit(&mut b, ms(0));
            b.on_result(ms(1), t, CallOutcome::Failure);
        }
        let probe = admit(&mut b, ms(101));
        b.on_result(ms(102), probe, CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::Closed);
        // `old` was admitted two states ago; its failure is one of the two that reopen it.
        b.on_result(ms(103), old, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Closed);
        let t = admit(&mut b, ms(104));
        b.on_result(ms(105), t, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
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

    // ---- failure-rate breaker ----

    fn calls(n: u32) -> Window {
        Window::Calls(n)
    }

    fn time(length_ms: u64, slots: u32) -> Window {
        Window::Time {
            length: SimDuration::from_millis(length_ms),
            slots,
        }
    }

    fn rate_breaker(rate_permille: u32, window: Window, min_calls: u32) -> Breaker {
        let open_for = SimDuration::from_millis(100);
        Breaker::new(
            BreakerConfig::failure_rate(rate_permille, window, min_calls, open_for, 1).unwrap(),
        )
    }

    /// Admits and reports one call that ends at `at`.
    fn call(b: &mut Breaker, at: SimTime, outcome: CallOutcome) {
        let ticket = admit(b, at);
        b.on_result(at, ticket, outcome);
    }

    fn counts(calls: u64, failures: u64) -> Option<WindowCounts> {
        Some(WindowCounts {
            calls,
            failures,
            slow: 0,
        })
    }

    #[test]
    fn rejected_failure_rate_configs_say_exactly_which_field_and_why() {
        let ok_window = calls(10);
        let huge = WINDOW_CALLS_MAX + 1;
        let too_many_slots = WINDOW_SLOTS_MAX + 1;
        let cases = [
            (
                0,
                ok_window,
                1,
                1,
                1,
                "failure_rate_permille: must be at least 1 (a threshold of 0 would open the breaker on successes alone)",
            ),
            (
                1001,
                ok_window,
                1,
                1,
                1,
                "failure_rate_permille: must be at most 1000 (every call failed), got 1001",
            ),
            (
                500,
                calls(0),
                1,
                1,
                1,
                "window_calls: must be at least 1 (an empty window never sees a failure)",
            ),
            (
                500,
                calls(huge),
                1,
                1,
                1,
                "window_calls: must be at most 100000 (the window keeps one entry per call), got 100001",
            ),
            (
                500,
                time(0, 1),
                1,
                1,
                1,
                "window_length: must be longer than zero (an empty window never sees a failure)",
            ),
            (
                500,
                time(10, 0),
                1,
                1,
                1,
                "window_slots: must be at least 1 (the window keeps its calls in slots)",
            ),
            (
                500,
                time(10_000, too_many_slots),
                1,
                1,
                1,
                "window_slots: must be at most 1000 (the window keeps two counters per slot), got 1001",
            ),
            (
                500,
                time(10, 3),
                1,
                1,
                1,
                "window_slots: 3 slots do not divide window_length 10ms into whole nanoseconds",
            ),
            (
                500,
                Window::Time {
                    length: SimDuration::from_nanos(5),
                    slots: 10,
                },
                1,
                1,
                1,
                "window_slots: 10 slots do not divide window_length 5ns into whole nanoseconds",
            ),
            (
                500,
                ok_window,
                0,
                1,
                1,
                "min_calls: must be at least 1 (with no calls there is no rate to compare)",
            ),
            (
                500,
                ok_window,
                11,
                1,
                1,
                "min_calls: 11 is more than window_calls 10, so the window could never hold enough calls to open the breaker",
            ),
            (
                500,
                time(10, 2),
                0,
                1,
                1,
                "min_calls: must be at least 1 (with no calls there is no rate to compare)",
            ),
            (
                500,
                ok_window,
                10,
                0,
                1,
                "open_for: must be longer than zero (use enabled = false to turn the breaker off)",
            ),
            (
                500,
                ok_window,
                10,
                1,
                0,
                "half_open_probes: must be at least 1 (with no probe the breaker could never close)",
            ),
        ];
        for (rate, window, min_calls, open_ms, probes, expected) in cases {
            let open_for = SimDuration::from_millis(open_ms);
            let error =
                BreakerConfig::failure_rate(rate, window, min_calls, open_for, probes).unwrap_err();
            assert_eq!(error.to_string(), expected);
        }
    }

    #[test]
    fn accepted_failure_rate_configs_keep_their_rule() {
        let open_for = SimDuration::from_secs(60);
        let check = |rate, window, min_calls, failures_max| {
            let config =
                BreakerConfig::failure_rate(rate, window, min_calls, open_for, 10).unwrap();
            let trip = Trip::FailureRate {
                rate_permille: rate,
                window,
                min_calls,
            };
            assert_eq!(config.trip(), trip);
            assert_eq!(config.failures_max(), failures_max, "{trip:?}");
            assert_eq!((config.open_for(), config.probes_max()), (open_for, 10));
        };
        // resilience4j's defaults: half of the last 100 calls, at least 100 calls.
        check(500, calls(100), 100, 50);
        check(1000, calls(1), 1, 1);
        check(1, calls(WINDOW_CALLS_MAX), WINDOW_CALLS_MAX, 100);
        check(333, time(1000, 10), 7, 3);
        // A time window has no upper bound on its calls, so neither has min_calls.
        check(1000, time(1, 1), u32::MAX, u32::MAX);
        let consecutive = BreakerConfig::new(5, open_for, 1).unwrap();
        assert_eq!(consecutive.trip(), Trip::Consecutive { failures_max: 5 });
        assert_eq!(
            time(1000, 10).slot_length(),
            Some(SimDuration::from_millis(100))
        );
        assert_eq!(calls(3).slot_length(), None);
    }

    /// Feeds results to a fresh breaker and returns its state after each.
    fn states_after(mut b: Breaker, results: &[(u64, CallOutcome)]) -> Vec<BreakerState> {
        results
            .iter()
            .map(|&(at_ms, outcome)| {
                call(&mut b, ms(at_ms), outcome);
                b.state()
            })
            .collect()
    }

    #[test]
    fn opens_at_exactly_the_threshold_once_min_calls_are_reached() {
        use BreakerState::{Closed as C, Open as O};
        use CallOutcome::{Failure as F, Success as S};
        let check =
            |rate, window, min_calls, outcomes: &[CallOutcome], expected: &[BreakerState]| {
                let results: Vec<_> = outcomes.iter().map(|&o| (0, o)).collect();
                let seen = states_after(rate_breaker(rate, window, min_calls), &results);
                assert_eq!(
                    seen, expected,
                    "rate {rate}, {window:?}, min_calls {min_calls}, {outcomes:?}"
                );
            };
        // 2 of 4 is exactly 500 permille: it opens on the fourth call, a success.
        check(500, calls(4), 4, &[F, S, F, S], &[C, C, C, O]);
        check(500, time(1000, 10), 4, &[F, S, F, S], &[C, C, C, O]);
        // One permille more and 2 of 4 is not enough.
        check(501, calls(4), 4, &[F, S, F, S], &[C, C, C, C]);
        // 100% of the calls failed, but there are not yet min_calls of them.
        check(500, calls(10), 3, &[F, F, S], &[C, C, O]);
        check(1000, calls(5), 5, &[F, F, F, F, S, F], &[C, C, C, C, C, C]);
        check(1000, calls(5), 5, &[F, F, F, F, F], &[C, C, C, C, O]);
        // 1 of 3 is 333.3 permille: enough for 333, not for 334.
        check(333, calls(3), 3, &[S, F, S], &[C, C, O]);
        check(334, calls(3), 3, &[S, F, S], &[C, C, C]);
        // Seed 003's "opens after 5 failures" as a rate: the same as five in a row.
        check(
            1000,
            calls(5),
            5,
            &[F, F, F, F, S, F, F, F, F, F],
            &[C, C, C, C, C, C, C, C, C, O],
        );
    }

    #[test]
    fn a_count_window_forgets_its_oldest_call() {
        let mut b = rate_breaker(500, calls(4), 4);
        call(&mut b, ms(0), CallOutcome::Failure);
        for _ in 0..3 {
            call(&mut b, ms(0), CallOutcome::Success);
        }
        assert_eq!(b.window_counts(ms(0)), counts(4, 1));
        call(&mut b, ms(0), CallOutcome::Success);
        assert_eq!(
            b.window_counts(ms(0)),
            counts(4, 0),
            "the failure was pushed out"
        );
        call(&mut b, ms(0), CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Closed, "1 of 4");
        call(&mut b, ms(0), CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open, "2 of 4");
    }

    #[test]
    fn a_time_window_forgets_calls_at_the_end_of_their_last_slot() {
        // 100 ms in 4 slots of 25 ms: [0, 25), [25, 50), ...
        let mut b = rate_breaker(600, time(100, 4), 2);
        call(&mut b, ms(10), CallOutcome::Failure);
        // Slot 0 is reused from 100 ms: the failure is forgotten after 90 ms, not 100.
        assert_eq!(b.window_counts(ms(99)), counts(1, 1));
        assert_eq!(b.window_counts(ms(100)), counts(0, 0));
        call(&mut b, ms(30), CallOutcome::Success);
        // A result at the start of its slot is counted for exactly the window's length.
        call(&mut b, ms(50), CallOutcome::Success);
        assert_eq!(b.window_counts(ms(149)), counts(1, 0));
        assert_eq!(b.window_counts(ms(150)), counts(0, 0));
        // At 100 ms the failure is gone: the failure of this call makes 1 of 3, not 2 of 4.
        call(&mut b, ms(100), CallOutcome::Failure);
        assert_eq!(b.window_counts(ms(100)), counts(3, 1));
        assert_eq!(b.state(), BreakerState::Closed);
        // A long gap empties every slot, however long it is.
        call(&mut b, ms(10_000), CallOutcome::Failure);
        assert_eq!(b.window_counts(ms(10_000)), counts(1, 1));
        assert_eq!(b.state(), BreakerState::Closed, "1 call, min_calls 2");
        call(&mut b, ms(10_024), CallOutcome::Success);
        assert_eq!(
            b.state(),
            BreakerState::Closed,
            "1 of 2 is below 600 permille"
        );
        call(&mut b, ms(10_025), CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open, "2 of 3");
    }

    #[test]
    fn a_time_window_of_one_slot_is_a_tumbling_window() {
        let mut b = rate_breaker(1000, time(100, 1), 2);
        call(&mut b, ms(99), CallOutcome::Failure);
        call(&mut b, ms(100), CallOutcome::Failure);
        assert_eq!(
            b.window_counts(ms(100)),
            counts(1, 1),
            "a new window began at 100 ms"
        );
        assert_eq!(b.state(), BreakerState::Closed);
        call(&mut b, ms(199), CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open);
    }

    #[test]
    fn ignored_outcomes_do_not_enter_the_window() {
        for window in [calls(2), time(100, 4)] {
            let mut b = rate_breaker(500, window, 2);
            call(&mut b, ms(0), CallOutcome::Failure);
            for _ in 0..5 {
                call(&mut b, ms(1), CallOutcome::Ignored);
            }
            assert_eq!(b.window_counts(ms(1)), counts(1, 1), "{window:?}");
            assert_eq!(b.state(), BreakerState::Closed, "{window:?}");
            call(&mut b, ms(2), CallOutcome::Success);
            assert_eq!(b.state(), BreakerState::Open, "{window:?}: 1 of 2");
        }
    }

    #[test]
    fn a_consecutive_breaker_has_no_window() {
        let b = breaker(3, 100, 1);
        assert_eq!(b.window_counts(ms(0)), None);
    }

    /// One script for the half-open state, whatever opened the breaker: returns every
    /// decision, state and transition so that rules can be compared.
    fn half_open_script(config: BreakerConfig) -> (Vec<String>, Vec<Transition>) {
        let mut b = Breaker::new(config);
        let mut seen = Vec::new();
        let mut note = |b: &Breaker, what: &str| seen.push(format!("{what} -> {:?}", b.state()));
        let t = admit(&mut b, ms(0));
        b.on_result(ms(5), t, CallOutcome::Failure);
        note(&b, "failure");
        assert_eq!(b.try_admit(ms(104)), Admit::No(Rejection::Open));
        let p1 = admit(&mut b, ms(105));
        let p2 = admit(&mut b, ms(106));
        assert!(p1.is_probe() && p2.is_probe());
        assert_eq!(b.try_admit(ms(107)), Admit::No(Rejection::ProbesBusy));
        b.on_result(ms(108), p1, CallOutcome::Ignored);
        note(&b, "ignored probe");
        let p3 = admit(&mut b, ms(109));
        b.on_result(ms(110), p2, CallOutcome::Success);
        note(&b, "probe success");
        b.on_result(ms(111), p3, CallOutcome::Failure);
        note(&b, "probe failure");
        assert_eq!(b.next_deadline(), Some(ms(211)));
        let p4 = admit(&mut b, ms(300));
        let p5 = admit(&mut b, ms(300));
        b.on_result(ms(301), p4, CallOutcome::Success);
        b.on_result(ms(302), p5, CallOutcome::Success);
        note(&b, "both probes succeeded");
        assert!(
            !admit(&mut b, ms(303)).is_probe(),
            "a closed breaker admits non-probes"
        );
        let transitions = std::iter::from_fn(|| b.poll_transition()).collect();
        (seen, transitions)
    }

    #[test]
    fn half_open_behaves_the_same_whatever_the_trip_rule() {
        let open_for = SimDuration::from_millis(100);
        let consecutive = BreakerConfig::new(1, open_for, 2).unwrap();
        let expected = half_open_script(consecutive);
        use BreakerState::*;
        let dates: Vec<_> = expected.1.iter().map(|t| (t.at, t.from, t.to)).collect();
        assert_eq!(
            dates,
            [
                (ms(5), Closed, Open),
                (ms(105), Open, HalfOpen),
                (ms(111), HalfOpen, Open),
                (ms(211), Open, HalfOpen),
                (ms(302), HalfOpen, Closed),
            ]
        );
        for window in [calls(1), calls(3), time(50, 5)] {
            let config = BreakerConfig::failure_rate(1000, window, 1, open_for, 2).unwrap();
            assert_eq!(half_open_script(config), expected, "{window:?}");
        }
    }

    #[test]
    fn closing_starts_an_empty_window() {
        let mut b = rate_breaker(500, calls(4), 2);
        call(&mut b, ms(0), CallOutcome::Success);
        call(&mut b, ms(0), CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open, "1 of 2");
        assert_eq!(
            b.window_counts(ms(0)),
            counts(0, 0),
            "nothing is tallied while open"
        );
        call(&mut b, ms(100), CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::Closed);
        assert_eq!(b.window_counts(ms(100)), counts(0, 0));
        // Had the window kept the success and the failure, this would make 2 of 3.
        call(&mut b, ms(101), CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Closed, "1 call, min_calls 2");
    }

    #[test]
    fn a_result_from_before_the_breaker_closed_changes_nothing() {
        let mut b = rate_breaker(500, calls(2), 1);
        let old = admit(&mut b, ms(0));
        call(&mut b, ms(0), CallOutcome::Failure);
        call(&mut b, ms(100), CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::Closed);
        b.on_result(ms(101), old, CallOutcome::Failure);
        assert_eq!(b.window_counts(ms(101)), counts(0, 0));
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn open_to_half_open_is_reported_once_dated_at_its_deadline() {
        let mut b = rate_breaker(1000, calls(1), 1);
        call(&mut b, ms(5), CallOutcome::Failure);
        let opened = b.poll_transition();
        assert_eq!(
            opened.map(|t| (t.at, t.to)),
            Some((ms(5), BreakerState::Open))
        );
        assert_eq!(
            b.poll_transition(),
            None,
            "each transition is handed out once"
        );
        // Nobody looks until 150 ms; the breaker has been half-open since 105 ms.
        b.handle_timeout(ms(150));
        b.handle_timeout(ms(160));
        let _probe = admit(&mut b, ms(170));
        let half_open = Transition {
            at: ms(105),
            from: BreakerState::Open,
            to: BreakerState::HalfOpen,
        };
        assert_eq!(b.poll_transition(), Some(half_open));
        assert_eq!(b.poll_transition(), None);
        assert_eq!(b.transitions_dropped(), 0);
    }

    #[test]
    fn a_full_transition_queue_counts_what_it_drops() {
        let mut b = breaker(1, 100, 1);
        // Four cycles of Closed -> Open -> HalfOpen -> Closed, never polled: 12 transitions.
        let mut expected = Vec::new();
        for cycle in 0..4 {
            let start = cycle * 1000;
            call(&mut b, ms(start), CallOutcome::Failure);
            call(&mut b, ms(start + 100), CallOutcome::Success);
            use BreakerState::*;
            for (at, from, to) in [
                (0, Closed, Open),
                (100, Open, HalfOpen),
                (100, HalfOpen, Closed),
            ] {
                expected.push(Transition {
                    at: ms(start + at),
                    from,
                    to,
                });
            }
        }
        assert_eq!(b.transitions_dropped(), 4);
        let held: Vec<_> = std::iter::from_fn(|| b.poll_transition()).collect();
        assert_eq!(held, expected[4..], "the newest are kept, oldest first");
        call(&mut b, ms(5000), CallOutcome::Failure);
        assert_eq!(b.poll_transition().map(|t| t.to), Some(BreakerState::Open));
        assert_eq!(b.transitions_dropped(), 4, "polling in time drops nothing");
    }

    #[test]
    fn a_now_earlier_than_one_already_seen_counts_as_the_latest() {
        let mut b = rate_breaker(1000, time(100, 4), 2);
        let late = admit(&mut b, ms(0));
        call(&mut b, ms(200), CallOutcome::Failure);
        // This result says 10 ms, but the breaker has seen 200 ms: it lands in 200 ms's slot.
        b.on_result(ms(10), late, CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open, "2 of 2 at 200 ms");
        let opened = b.poll_transition().expect("opened");
        assert_eq!((opened.at, opened.to), (ms(200), BreakerState::Open));
    }

    #[test]
    #[should_panic(expected = "a ticket was handed back to a breaker that did not issue it")]
    fn a_ticket_from_another_breaker_panics() {
        let mut issuer = breaker(1, 100, 1);
        let mut other = breaker(1, 100, 1);
        let ticket = admit(&mut issuer, ms(0));
        // Without the check, this failure would open `other`, which admitted nothing.
        other.on_result(ms(1), ticket, CallOutcome::Failure);
    }

    #[test]
    fn a_clone_accepts_the_tickets_of_the_original() {
        let mut original = breaker(1, 100, 1);
        let ticket = admit(&mut original, ms(0));
        let mut copy = original.clone();
        copy.on_result(ms(1), ticket, CallOutcome::Failure);
        assert_eq!(copy.state(), BreakerState::Open);
    }

    // ---- the time window against its documented rule ----

    mod time_window_rule {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Written from the module documentation, not from the slot arithmetic: a result
            /// recorded `age = now - t` ago is counted for longer than `length - slot_length`
            /// and for at most `length`, and exactly while `age < length - (t mod
            /// slot_length)` ("counted until (k + slots) × slot_length"). The breaker never
            /// opens here (`min_calls` is out of reach), so every result stays in the window.
            #[test]
            fn a_time_window_counts_each_result_for_the_documented_age(
                slots in 1u32..=5,
                slot_millis in 1u64..=20,
                steps in prop::collection::vec(
                    (0u64..=30_000_001, any::<bool>(), any::<bool>()),
                    1..100,
                ),
            ) {
                let slot = slot_millis * 1_000_000;
                let length = slot * u64::from(slots);
                let window = Window::Time { length: SimDuration::from_nanos(length), slots };
                let config = BreakerConfig::failure_rate(
                    1000, window, u32::MAX, SimDuration::from_secs(1), 1,
                ).unwrap();
                let mut b = Breaker::new(config);
                let mut results: Vec<(u64, bool)> = Vec::new();
                let mut now = 0u64;
                for (step, failed, record) in steps {
                    now += step;
                    if record {
                        let outcome = if failed { CallOutcome::Failure } else { CallOutcome::Success };
                        call(&mut b, SimTime::from_nanos(now), outcome);
                        results.push((now, failed));
                    }
                    let tally = |counted: &dyn Fn(u64, u64) -> bool| {
                        let kept: Vec<bool> = results
                            .iter()
                            .filter(|&&(t, _)| counted(t, now - t))
                            .map(|&(_, failed)| failed)
                            .collect();
                        WindowCounts {
                            calls: kept.len() as u64,
                            failures: kept.iter().filter(|&&f| f).count() as u64,
                            slow: 0,
                        }
                    };
                    let certain = tally(&|_, age| age <= length - slot);
                    let possible = tally(&|_, age| age < length);
                    let exact = tally(&|t, age| age < length - t % slot);
                    let got = b.window_counts(SimTime::from_nanos(now)).unwrap();
                    prop_assert!(certain.calls <= got.calls && got.calls <= possible.calls,
                        "at {}: {:?} not within {:?} ..= {:?}", now, got, certain, possible);
                    prop_assert!(certain.failures <= got.failures && got.failures <= possible.failures,
                        "at {}: {:?} not within {:?} ..= {:?}", now, got, certain, possible);
                    prop_assert_eq!(got, exact, "at {}", now);
                    prop_assert_eq!(b.state(), BreakerState::Closed);
                }
            }
        }
    }

    // ---- the knobs other libraries need ----

    fn rate_config(rate_permille: u32, calls: u32, probes: u32) -> BreakerConfig {
        let open_for = SimDuration::from_millis(100);
        BreakerConfig::failure_rate(rate_permille, Window::Calls(calls), calls, open_for, probes)
            .unwrap()
    }

    /// Opens `b` with `n` failures at `at`.
    fn trip(b: &mut Breaker, at: SimTime, n: u32) {
        for _ in 0..n {
            call(b, at, CallOutcome::Failure);
        }
        assert_eq!(b.state(), BreakerState::Open);
    }

    /// Admits `outcomes.len()` probes at `at`, then reports them in order at `at + 1 ms`;
    /// returns the state after each report.
    fn probes(b: &mut Breaker, at: SimTime, outcomes: &[CallOutcome]) -> Vec<BreakerState> {
        let tickets: Vec<Ticket> = outcomes.iter().map(|_| admit(b, at)).collect();
        assert!(tickets.iter().all(Ticket::is_probe));
        let later = SimTime::from_nanos(at.as_nanos() + 1_000_000);
        tickets
            .into_iter()
            .zip(outcomes)
            .map(|(ticket, &outcome)| {
                b.on_result(later, ticket, outcome);
                b.state()
            })
            .collect()
    }

    #[test]
    fn a_failure_rate_half_open_rule_waits_for_every_probe_and_compares_their_rate() {
        use BreakerState::*;
        use CallOutcome::*;
        let config = rate_config(500, 4, 4)
            .with_half_open_rule(HalfOpenRule::FailureRate)
            .unwrap();
        let mut b = Breaker::new(config);
        trip(&mut b, ms(0), 4);
        // One failure in four probes is 25%, below 50%: it closes.
        let states = probes(&mut b, ms(100), &[Failure, Success, Success, Success]);
        assert_eq!(states, [HalfOpen, HalfOpen, HalfOpen, Closed]);
        trip(&mut b, ms(200), 4);
        // Two in four is 50%, at the threshold: it reopens.
        let states = probes(&mut b, ms(300), &[Success, Failure, Success, Failure]);
        assert_eq!(states, [HalfOpen, HalfOpen, HalfOpen, Open]);
        assert_eq!(b.opened_total(), 3);
        // The default rule reopens on the first failed probe.
        let mut b = Breaker::new(rate_config(500, 4, 4));
        trip(&mut b, ms(0), 4);
        let states = probes(&mut b, ms(100), &[Success, Failure]);
        assert_eq!(states, [HalfOpen, Open]);
    }

    #[test]
    fn a_failure_rate_half_open_rule_needs_a_rate() {
        let config = BreakerConfig::new(3, SimDuration::from_millis(100), 2).unwrap();
        let error = config
            .with_half_open_rule(HalfOpenRule::FailureRate)
            .unwrap_err();
        assert_eq!(error.field, "half_open_rule");
        assert!(error.reason.contains("consecutive failures"), "{error}");
        assert!(
            config
                .with_half_open_rule(HalfOpenRule::AllProbesSucceed)
                .is_ok()
        );
    }

    #[test]
    fn uncounted_results_can_count_as_successes() {
        use CallOutcome::*;
        // 50% of 2 calls: an uncounted result and a failure.
        let results = [(1, Uncounted), (2, Failure)];
        let ignoring = Breaker::new(rate_config(500, 2, 1));
        assert_eq!(
            states_after(ignoring, &results),
            [BreakerState::Closed, BreakerState::Closed]
        );
        let config = rate_config(500, 2, 1).with_uncounted_as(UncountedAs::Success);
        assert_eq!(
            states_after(Breaker::new(config), &results),
            [BreakerState::Closed, BreakerState::Open]
        );
        // An uncounted probe closes the breaker instead of freeing its slot.
        let mut b = Breaker::new(config);
        trip(&mut b, ms(0), 2);
        assert_eq!(
            probes(&mut b, ms(100), &[Uncounted]),
            [BreakerState::Closed]
        );
        // A cancelled one (no result seen) does not: it frees its slot, and counts in no
        // window either.
        let mut b = Breaker::new(config);
        trip(&mut b, ms(0), 2);
        let Admit::Yes(probe) = b.try_admit(ms(100)) else {
            panic!("half-open admits a probe")
        };
        b.on_cancelled(ms(101), probe);
        assert_eq!(b.state_at(ms(101)), BreakerState::HalfOpen);
        assert!(
            matches!(b.try_admit(ms(102)), Admit::Yes(_)),
            "the slot is free"
        );
    }

    /// A threshold that must be exceeded: 50% of 4 calls opens a breaker whose rate must reach
    /// 50%, not one whose rate must pass it; 3 of 4 opens both. Consecutive failures have no
    /// rate to exceed.
    #[test]
    fn an_exceeded_threshold_needs_a_rate_above_it() {
        use CallOutcome::*;
        let results = [
            (1, Success),
            (2, Success),
            (3, Failure),
            (4, Failure),
            (5, Failure),
        ];
        let reached = Breaker::new(rate_config(500, 4, 1));
        assert_eq!(
            states_after(reached, &results[..4]),
            [
                BreakerState::Closed,
                BreakerState::Closed,
                BreakerState::Closed,
                BreakerState::Open
            ]
        );
        let config = rate_config(500, 4, 1)
            .with_threshold(Threshold::Exceeded)
            .unwrap();
        assert_eq!(
            states_after(Breaker::new(config), &results),
            [
                BreakerState::Closed,
                BreakerState::Closed,
                BreakerState::Closed,
                BreakerState::Closed,
                BreakerState::Open
            ]
        );
        let consecutive = BreakerConfig::new(3, SimDuration::from_millis(100), 1).unwrap();
        let error = consecutive.with_threshold(Threshold::Exceeded).unwrap_err();
        assert_eq!(error.field, "threshold");
    }

    /// A warm-up tallies results without opening; the first result at or after its end that
    /// satisfies the rule opens the breaker, counting what the warm-up tallied.
    #[test]
    fn a_warm_up_holds_the_trip_rule_until_it_ends() {
        let config = BreakerConfig::new(3, SimDuration::from_millis(100), 1)
            .unwrap()
            .with_warm_up(Some(SimDuration::from_millis(50)));
        let mut b = Breaker::new(config);
        for at in [0, 10, 20, 49] {
            call(&mut b, ms(at), CallOutcome::Failure);
        }
        assert_eq!(
            b.state(),
            BreakerState::Closed,
            "four failures in the warm-up"
        );
        call(&mut b, ms(50), CallOutcome::Failure);
        assert_eq!(b.state(), BreakerState::Open, "the fifth, at its end");
        // Without the warm-up the third failure opens it.
        let mut b = Breaker::new(config.with_warm_up(None));
        for at in [0, 10, 20] {
            call(&mut b, ms(at), CallOutcome::Failure);
        }
        assert_eq!(b.state(), BreakerState::Open);
    }

    /// resilience4j's ignored exceptions stay ignored when its unrecorded ones are successes:
    /// `Ignored` counts neither way under `UncountedAs::Success` (before the split of
    /// `Uncounted` from `Ignored`, both became successes).
    #[test]
    fn ignored_results_stay_ignored_when_uncounted_ones_are_successes() {
        use CallOutcome::*;
        let config = rate_config(500, 2, 1).with_uncounted_as(UncountedAs::Success);
        // An ignored result and a failure: one call in a window that needs two, so closed
        // (taken for a success, it would be 50% of two and open it).
        let mut b = Breaker::new(config);
        call(&mut b, ms(1), Ignored);
        call(&mut b, ms(2), Failure);
        assert_eq!(b.window_counts(ms(2)).map(|w| w.calls), Some(1));
        assert_eq!(b.state(), BreakerState::Closed);
        // An ignored probe frees its slot, where an uncounted one closes the breaker.
        let mut b = Breaker::new(config);
        trip(&mut b, ms(0), 2);
        assert_eq!(
            probes(&mut b, ms(100), &[Ignored]),
            [BreakerState::HalfOpen]
        );
        assert!(
            matches!(b.try_admit(ms(100)), Admit::Yes(_)),
            "the slot is free"
        );
    }

    #[test]
    fn half_open_max_wait_reopens_a_breaker_whose_probe_never_answers() {
        let config = BreakerConfig::new(1, SimDuration::from_millis(100), 1)
            .unwrap()
            .with_half_open_max_wait(Some(SimDuration::from_millis(50)))
            .unwrap();
        let mut b = Breaker::new(config);
        trip(&mut b, ms(0), 1);
        // Half-open from 100 ms, but the wait counts from the first probe, at 120 ms.
        assert_eq!(b.state_at(ms(150)), BreakerState::HalfOpen);
        let hung = admit(&mut b, ms(120));
        assert_eq!(b.next_deadline(), Some(ms(170)));
        assert_eq!(b.state_at(ms(169)), BreakerState::HalfOpen);
        assert_eq!(b.state_at(ms(170)), BreakerState::Open);
        assert_eq!(b.state_at(ms(270)), BreakerState::HalfOpen);
        assert_eq!(b.try_admit(ms(170)), Admit::No(Rejection::Open));
        assert_eq!(b.opened_total(), 2);
        assert_eq!(b.next_deadline(), Some(ms(270)));
        // The hung probe answers at last: it belongs to a period that is over.
        b.on_result(ms(200), hung, CallOutcome::Success);
        assert_eq!(b.state(), BreakerState::Open);
        let seen: Vec<_> = std::iter::from_fn(|| b.poll_transition()).collect();
        let at: Vec<_> = seen.iter().map(|t| (t.at, t.to)).collect();
        use BreakerState::*;
        assert_eq!(
            at,
            [(ms(0), Open), (ms(100), HalfOpen), (ms(170), Open)],
            "{seen:?}"
        );
        // A long silence: both deadlines pass before the next call, which is a probe.
        // A long silence: the second probe hangs too; its wait ends at 330 ms, that opening at
        // 430 ms, and the next call, much later, is a probe of the third half-open period.
        let again = admit(&mut b, ms(280));
        assert!(again.is_probe());
        assert!(admit(&mut b, ms(10_000)).is_probe());
        assert_eq!(b.opened_total(), 3);
    }

    #[test]
    fn half_open_max_wait_must_be_longer_than_zero() {
        let config = BreakerConfig::new(1, SimDuration::from_millis(100), 1).unwrap();
        let error = config
            .with_half_open_max_wait(Some(SimDuration::ZERO))
            .unwrap_err();
        assert_eq!(error.field, "half_open_max_wait");
        assert!(config.with_half_open_max_wait(None).is_ok());
    }

    #[test]
    fn openings_grow_while_probes_fail_and_start_over_when_the_breaker_closes() {
        let config = BreakerConfig::new(1, SimDuration::from_millis(100), 1)
            .unwrap()
            .with_open_growth(2000, SimDuration::from_millis(350))
            .unwrap();
        let mut b = Breaker::new(config);
        trip(&mut b, ms(0), 1);
        assert_eq!(b.next_deadline(), Some(ms(100)));
        assert_eq!(
            probes(&mut b, ms(100), &[CallOutcome::Failure]),
            [BreakerState::Open]
        );
        assert_eq!(b.open_duration(), SimDuration::from_millis(200));
        assert_eq!(b.next_deadline(), Some(ms(301)));
        assert_eq!(
            probes(&mut b, ms(301), &[CallOutcome::Failure]),
            [BreakerState::Open]
        );
        // 400 ms, capped at 350 ms.
        assert_eq!(b.next_deadline(), Some(ms(652)));
        assert_eq!(
            probes(&mut b, ms(652), &[CallOutcome::Success]),
            [BreakerState::Closed]
        );
        trip(&mut b, ms(700), 1);
        assert_eq!(b.next_deadline(), Some(ms(800)));
    }

    #[test]
    fn rejected_open_growth_says_which_key_and_why() {
        let config = BreakerConfig::new(1, SimDuration::from_millis(100), 1).unwrap();
        let error = config
            .with_open_growth(999, SimDuration::from_millis(500))
            .unwrap_err();
        assert_eq!(error.field, "open_for_factor");
        let error = config
            .with_open_growth(2000, SimDuration::from_millis(99))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "open_for_max: must be at least open_for (100ms): it caps openings that start there"
        );
        let kept = config
            .with_open_growth(1000, SimDuration::from_millis(100))
            .unwrap();
        assert_eq!(kept, config, "a factor of one is the default");
    }

    #[test]
    fn evaluating_on_failures_only_lets_a_success_pass_the_threshold() {
        use CallOutcome::*;
        let results = [
            (1, Failure),
            (2, Failure),
            (3, Success),
            (4, Success),
            (5, Failure),
        ];
        let any = Breaker::new(rate_config(500, 4, 1));
        assert_eq!(
            states_after(any, &results[..4])[3],
            BreakerState::Open,
            "the 4th call, a success, brings the window to 50%"
        );
        let on_failure = rate_config(500, 4, 1).with_evaluate_on(EvaluateOn::Failure);
        let states = states_after(Breaker::new(on_failure), &results);
        assert_eq!(states[3], BreakerState::Closed);
        // F S S F: still 50%, now after a failure.
        assert_eq!(states[4], BreakerState::Open);
    }

    fn slow_config(calls: u32, probes: u32) -> BreakerConfig {
        rate_config(500, calls, probes)
            .with_slow_calls(Some(SlowCalls {
                duration: SimDuration::from_millis(1000),
                rate_permille: 500,
            }))
            .unwrap()
    }

    /// Admits a call at `from_ms` and reports it at `to_ms`.
    fn lasting(b: &mut Breaker, from_ms: u64, to_ms: u64, outcome: CallOutcome) {
        let ticket = admit(b, ms(from_ms));
        b.on_result(ms(to_ms), ticket, outcome);
    }

    #[test]
    fn slow_calls_open_a_breaker_whose_failures_do_not() {
        use CallOutcome::*;
        let mut b = Breaker::new(slow_config(4, 1));
        // Exactly the duration is not slow; longer is, success or failure.
        let (first, second) = (admit(&mut b, ms(0)), admit(&mut b, ms(0)));
        b.on_result(ms(1000), first, Success);
        b.on_result(ms(1001), second, Success);
        lasting(&mut b, 1001, 1002, Failure);
        assert_eq!(
            b.window_counts(ms(1002)),
            Some(WindowCounts {
                calls: 3,
                failures: 1,
                slow: 1
            })
        );
        assert_eq!(b.state(), BreakerState::Closed);
        // The fourth call, slow: 2 slow in 4 is 50%, while 1 failure in 4 is 25%.
        lasting(&mut b, 1002, 2003, Success);
        assert_eq!(b.state(), BreakerState::Open);
        // Without the rule the same calls leave it closed.
        let mut b = Breaker::new(rate_config(500, 4, 1));
        let (first, second) = (admit(&mut b, ms(0)), admit(&mut b, ms(0)));
        b.on_result(ms(1000), first, Success);
        b.on_result(ms(1001), second, Success);
        lasting(&mut b, 1001, 1002, Failure);
        lasting(&mut b, 1002, 2003, Success);
        assert_eq!(b.state(), BreakerState::Closed);
    }

    #[test]
    fn slow_probes_reopen_under_the_failure_rate_half_open_rule() {
        use CallOutcome::*;
        let config = slow_config(2, 2)
            .with_half_open_rule(HalfOpenRule::FailureRate)
            .unwrap();
        let mut b = Breaker::new(config);
        trip(&mut b, ms(0), 2);
        let first = admit(&mut b, ms(100));
        let second = admit(&mut b, ms(100));
        b.on_result(ms(101), first, Success);
        b.on_result(ms(1200), second, Success);
        assert_eq!(b.state(), BreakerState::Open, "1 slow probe in 2 is 50%");
    }

    #[test]
    fn rejected_slow_call_rules_say_which_key_and_why() {
        let slow = |millis, rate_permille| {
            Some(SlowCalls {
                duration: SimDuration::from_millis(millis),
                rate_permille,
            })
        };
        let consecutive = BreakerConfig::new(3, SimDuration::from_millis(100), 1).unwrap();
        let error = consecutive.with_slow_calls(slow(1000, 500)).unwrap_err();
        assert_eq!(error.field, "slow_call_rate_permille");
        let rate = rate_config(500, 4, 1);
        assert_eq!(
            rate.with_slow_calls(slow(0, 500)).unwrap_err().field,
            "slow_call_duration"
        );
        for bad in [0, 1001] {
            let error = rate.with_slow_calls(slow(1000, bad)).unwrap_err();
            assert_eq!(error.field, "slow_call_rate_permille", "{bad}");
        }
        assert_eq!(rate.with_slow_calls(None).unwrap(), rate);
    }

    // ---- the knobs, against the breaker's own promises ----

    mod knob_properties {
        use super::super::*;
        use proptest::prelude::*;

        fn knobbed_config() -> impl Strategy<Value = BreakerConfig> {
            (
                (1u32..=1000, 1u32..=6, 1u64..=60, 1u32..=3),
                (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
                (prop::option::of(1u64..=40), 1000u32..=3000, 0u64..=100),
                prop::option::of((1u64..=20, 1u32..=1000)),
            )
                .prop_map(
                    |(
                        (rate, calls, open_ms, probes),
                        (rate_probes, as_success, on_failure, counted),
                        (max_wait_ms, factor, extra_ms),
                        slow,
                    )| {
                        let open_for = SimDuration::from_millis(open_ms);
                        let config = BreakerConfig::failure_rate(
                            rate,
                            Window::Calls(calls),
                            calls,
                            open_for,
                            probes,
                        )
                        .unwrap();
                        let rule = if rate_probes {
                            HalfOpenRule::FailureRate
                        } else {
                            HalfOpenRule::AllProbesSucceed
                        };
                        let config = config
                            .with_half_open_rule(rule)
                            .unwrap()
                            .with_half_open_max_wait(max_wait_ms.map(SimDuration::from_millis))
                            .unwrap()
                            .with_open_growth(factor, SimDuration::from_millis(open_ms + extra_ms))
                            .unwrap()
                            .with_slow_calls(slow.map(|(ms, rate_permille)| SlowCalls {
                                duration: SimDuration::from_millis(ms),
                                rate_permille,
                            }))
                            .unwrap()
                            .with_uncounted_as(if as_success {
                                UncountedAs::Success
                            } else {
                                UncountedAs::Ignored
                            })
                            .with_evaluate_on(if on_failure {
                                EvaluateOn::Failure
                            } else {
                                EvaluateOn::Any
                            });
                        config.with_late_failures(if counted {
                            LateFailures::Counted
                        } else {
                            LateFailures::Ignored
                        })
                    },
                )
        }

        #[derive(Clone, Debug)]
        enum Op {
            Wait(u64),
            Admit,
            Report(usize, CallOutcome),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                2 => (0u64..=30).prop_map(Op::Wait),
                3 => Just(Op::Admit),
                3 => (any::<usize>(), prop_oneof![
                    Just(CallOutcome::Failure),
                    Just(CallOutcome::Success),
                    Just(CallOutcome::Ignored),
                    Just(CallOutcome::Uncounted),
                ]).prop_map(|(index, outcome)| Op::Report(index, outcome)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            /// Whatever the knobs: `state_at` foretells what the passage of time does, every
            /// deadline lies ahead, openings last from `open_for` to `open_for_max`, at most
            /// `probes_max` probes are out in a half-open period, and transitions chain in
            /// time order.
            #[test]
            fn the_knobs_keep_the_breaker_s_promises(
                config in knobbed_config(),
                ops in prop::collection::vec(op(), 1..150),
            ) {
                let mut b = Breaker::new(config);
                let mut now = SimTime::ZERO;
                let mut out: Vec<Ticket> = Vec::new();
                let mut last: Option<Transition> = None;
                for op in ops {
                    match op {
                        Op::Wait(ms) => {
                            now = now.saturating_add(SimDuration::from_millis(ms));
                            for later in [now, now.saturating_add(SimDuration::from_millis(45))] {
                                let mut future = b.clone();
                                future.handle_timeout(later);
                                prop_assert_eq!(b.state_at(later), future.state(), "at {}", later);
                            }
                            b.handle_timeout(now);
                        }
                        Op::Admit => {
                            if let Admit::Yes(ticket) = b.try_admit(now) {
                                out.push(ticket);
                            }
                        }
                        Op::Report(index, outcome) => {
                            if !out.is_empty() {
                                let ticket = out.swap_remove(index % out.len());
                                b.on_result(now, ticket, outcome);
                            }
                        }
                    }
                    prop_assert!(b.next_deadline().is_none_or(|deadline| deadline > now));
                    // `state_holds_until` is exact: the state holds up to it, and changes there.
                    let state = b.state_at(now);
                    let until = b.state_holds_until(now);
                    prop_assert!(until > now);
                    let last_held = SimTime::from_nanos(until.as_nanos().saturating_sub(1));
                    let midway = SimTime::from_nanos(now.as_nanos() / 2 + last_held.as_nanos() / 2);
                    for at in [now, midway, last_held] {
                        prop_assert_eq!(b.state_at(at), state, "at {} (held until {})", at, until);
                    }
                    if until != SimTime::MAX {
                        prop_assert_ne!(b.state_at(until), state, "at {}", until);
                    }
                    prop_assert!(config.open_for() <= b.open_duration());
                    prop_assert!(b.open_duration() <= config.open_for_max());
                    if b.state() == BreakerState::HalfOpen {
                        let probes = out
                            .iter()
                            .filter(|t| t.probe && t.epoch == b.epoch)
                            .count();
                        prop_assert!(probes <= config.probes_max() as usize);
                    }
                    while let Some(transition) = b.poll_transition() {
                        if let Some(previous) = last {
                            prop_assert_eq!(previous.to, transition.from);
                            prop_assert!(previous.at <= transition.at);
                        }
                        prop_assert!(transition.at <= now);
                        last = Some(transition);
                    }
                }
            }
        }
    }

    // ---- against a reference model ----

    mod reference {
        use super::super::*;
        use super::ms;
        use proptest::prelude::*;

        /// The obvious model: every counted result since the breaker last closed, in a list,
        /// and every question answered by going over the list from scratch.
        struct Reference {
            config: BreakerConfig,
            state: BreakerState,
            epoch: u32,
            opened_at: SimTime,
            probes_out: u32,
            probes_succeeded: u32,
            /// `(when, failed)` of every success and failure recorded while closed.
            history: Vec<(SimTime, bool)>,
            opened_total: u64,
            /// Every transition not yet polled (unbounded).
            unpolled: Vec<Transition>,
        }

        /// A ticket as the reference sees it: its epoch and whether it is a probe.
        type RefTicket = (u32, bool);

        impl Reference {
            fn new(config: BreakerConfig) -> Self {
                Reference {
                    config,
                    state: BreakerState::Closed,
                    epoch: 0,
                    opened_at: SimTime::ZERO,
                    probes_out: 0,
                    probes_succeeded: 0,
                    history: Vec::new(),
                    opened_total: 0,
                    unpolled: Vec::new(),
                }
            }

            fn go(&mut self, at: SimTime, to: BreakerState) {
                self.unpolled.push(Transition {
                    at,
                    from: self.state,
                    to,
                });
                self.state = to;
                self.epoch += 1;
                if to != BreakerState::HalfOpen {
                    self.history.clear();
                }
                if to == BreakerState::Open {
                    self.opened_at = at;
                    self.opened_total += 1;
                }
                self.probes_out = 0;
                self.probes_succeeded = 0;
            }

            fn pass_time(&mut self, now: SimTime) {
                let deadline = self.opened_at.saturating_add(self.config.open_for());
                if self.state == BreakerState::Open && now >= deadline {
                    self.go(deadline, BreakerState::HalfOpen);
                }
            }

            /// The results the trip rule looks at, at `now`.
            fn in_window(&self, now: SimTime) -> Vec<bool> {
                match self.config.trip() {
                    Trip::Consecutive { .. } => self.history.iter().map(|h| h.1).collect(),
                    Trip::FailureRate {
                        window: Window::Calls(n),
                        ..
                    } => {
                        let skip = self.history.len().saturating_sub(n as usize);
                        self.history[skip..].iter().map(|h| h.1).collect()
                    }
                    Trip::FailureRate {
                        window: Window::Time { length, slots },
                        ..
                    } => {
                        let width = length.as_nanos() / u64::from(slots);
                        let slot = |t: SimTime| t.as_nanos() / width;
                        self.history
                            .iter()
                            .filter(|(t, _)| slot(*t) + u64::from(slots) > slot(now))
                            .map(|h| h.1)
                            .collect()
                    }
                }
            }

            fn window_counts(&self, now: SimTime) -> Option<WindowCounts> {
                let results = self.in_window(now);
                match self.config.trip() {
                    Trip::Consecutive { .. } => None,
                    Trip::FailureRate { .. } => Some(WindowCounts {
                        calls: results.len() as u64,
                        failures: results.iter().filter(|&&f| f).count() as u64,
                        slow: 0,
                    }),
                }
            }

            fn tripped(&self, now: SimTime) -> bool {
                let results = self.in_window(now);
                match self.config.trip() {
                    Trip::Consecutive { failures_max } => {
                        results.iter().rev().take_while(|&&f| f).count() >= failures_max as usize
                    }
                    Trip::FailureRate {
                        rate_permille,
                        min_calls,
                        ..
                    } => {
                        let failures = results.iter().filter(|&&f| f).count() as u64;
                        let calls = results.len() as u64;
                        calls >= u64::from(min_calls)
                            && failures * 1000 >= u64::from(rate_permille) * calls
                    }
                }
            }

            fn admit(&mut self, now: SimTime) -> Result<RefTicket, Rejection> {
                self.pass_time(now);
                match self.state {
                    BreakerState::Closed => Ok((self.epoch, false)),
                    BreakerState::Open => Err(Rejection::Open),
                    BreakerState::HalfOpen if self.probes_out < self.config.probes_max() => {
                        self.probes_out += 1;
                        Ok((self.epoch, true))
                    }
                    BreakerState::HalfOpen => Err(Rejection::ProbesBusy),
                }
            }

            fn result(&mut self, now: SimTime, (epoch, _): RefTicket, outcome: CallOutcome) {
                self.pass_time(now);
                if epoch != self.epoch {
                    return;
                }
                let failed = match outcome {
                    CallOutcome::Success => false,
                    CallOutcome::Failure => true,
                    // The reference's configs keep the default uncounted_as (ignored).
                    CallOutcome::Ignored | CallOutcome::Uncounted => {
                        if self.state == BreakerState::HalfOpen {
                            self.probes_out -= 1;
                        }
                        return;
                    }
                };
                match self.state {
                    BreakerState::Closed => {
                        self.history.push((now, failed));
                        if self.tripped(now) {
                            self.go(now, BreakerState::Open);
                        }
                    }
                    BreakerState::HalfOpen if failed => self.go(now, BreakerState::Open),
                    BreakerState::HalfOpen => {
                        self.probes_succeeded += 1;
                        if self.probes_succeeded == self.config.probes_max() {
                            self.go(now, BreakerState::Closed);
                        }
                    }
                    BreakerState::Open => unreachable!("no ticket of an open epoch"),
                }
            }

            fn state_at(&self, now: SimTime) -> BreakerState {
                let deadline = self.opened_at.saturating_add(self.config.open_for());
                if self.state == BreakerState::Open && now >= deadline {
                    BreakerState::HalfOpen
                } else {
                    self.state
                }
            }
        }

        #[derive(Clone, Debug)]
        enum Op {
            /// Let this many nanoseconds pass.
            Wait(u64),
            Admit,
            /// Report the result of the outstanding call at this index (modulo their number).
            Report(usize, CallOutcome),
            /// Drain the transitions.
            Poll,
        }

        fn op() -> impl Strategy<Value = Op> {
            let nanos_extra = prop_oneof![Just(0u64), Just(1), Just(999_999)];
            prop_oneof![
                2 => (0u64..=30, nanos_extra).prop_map(|(millis, extra)| Op::Wait(millis * 1_000_000 + extra)),
                4 => Just(Op::Admit),
                4 => (any::<usize>(), prop_oneof![
                    3 => Just(CallOutcome::Failure),
                    3 => Just(CallOutcome::Success),
                    1 => Just(CallOutcome::Ignored),
                    1 => Just(CallOutcome::Uncounted),
                ]).prop_map(|(index, outcome)| Op::Report(index, outcome)),
                1 => Just(Op::Poll),
            ]
        }

        fn open_for_and_probes() -> impl Strategy<Value = (SimDuration, u32)> {
            (1u64..=60, 1u32..=3)
                .prop_map(|(millis, probes)| (SimDuration::from_millis(millis), probes))
        }

        fn rate() -> impl Strategy<Value = u32> {
            prop_oneof![1u32..=1000, Just(1000), Just(500), Just(334), Just(333)]
        }

        fn consecutive_config() -> impl Strategy<Value = BreakerConfig> {
            (1u32..=4, open_for_and_probes()).prop_map(|(failures, (open_for, probes))| {
                BreakerConfig::new(failures, open_for, probes).unwrap()
            })
        }

        fn count_window_config() -> impl Strategy<Value = BreakerConfig> {
            (rate(), 1u32..=6, open_for_and_probes())
                .prop_flat_map(|(rate, n, timing)| (Just(rate), Just(n), 1..=n, Just(timing)))
                .prop_map(|(rate, n, min_calls, (open_for, probes))| {
                    BreakerConfig::failure_rate(rate, Window::Calls(n), min_calls, open_for, probes)
                        .unwrap()
                })
        }

        fn time_window_config() -> impl Strategy<Value = BreakerConfig> {
            (rate(), 1u32..=5, 1u64..=20, 1u32..=6, open_for_and_probes()).prop_map(
                |(rate, slots, slot_millis, min_calls, (open_for, probes))| {
                    let length = SimDuration::from_millis(slot_millis * u64::from(slots));
                    let window = Window::Time { length, slots };
                    BreakerConfig::failure_rate(rate, window, min_calls, open_for, probes).unwrap()
                },
            )
        }

        fn check(config: BreakerConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
            let mut breaker = Breaker::new(config);
            let mut reference = Reference::new(config);
            let mut outstanding: Vec<(Ticket, RefTicket)> = Vec::new();
            let mut now = ms(0);
            // Transitions dropped in the intervals between polls already made.
            let mut dropped_before_last_poll = 0;
            for op in ops {
                match op {
                    Op::Wait(nanos) => {
                        now = SimTime::from_nanos(now.as_nanos() + nanos);
                        breaker.handle_timeout(now);
                        reference.pass_time(now);
                    }
                    Op::Admit => match (breaker.try_admit(now), reference.admit(now)) {
                        (Admit::Yes(ticket), Ok(expected)) => {
                            prop_assert_eq!(ticket.is_probe(), expected.1);
                            outstanding.push((ticket, expected));
                        }
                        (Admit::No(rejection), Err(expected)) => {
                            prop_assert_eq!(rejection, expected)
                        }
                        (got, expected) => {
                            prop_assert!(false, "at {now}: {got:?}, expected {expected:?}")
                        }
                    },
                    Op::Report(index, outcome) => {
                        if !outstanding.is_empty() {
                            let (ticket, expected) =
                                outstanding.swap_remove(index % outstanding.len());
                            breaker.on_result(now, ticket, outcome);
                            reference.result(now, expected, outcome);
                        }
                    }
                    Op::Poll => {
                        let polled: Vec<_> =
                            std::iter::from_fn(|| breaker.poll_transition()).collect();
                        let all = std::mem::take(&mut reference.unpolled);
                        let dropped = all.len().saturating_sub(TRANSITIONS_HELD_MAX);
                        dropped_before_last_poll += dropped as u64;
                        prop_assert_eq!(&polled[..], &all[dropped..]);
                    }
                }
                prop_assert_eq!(breaker.state(), reference.state, "at {}", now);
                prop_assert_eq!(breaker.state_at(now), reference.state_at(now));
                let later = SimTime::from_nanos(now.as_nanos() + 7_000_000);
                prop_assert_eq!(breaker.state_at(later), reference.state_at(later));
                prop_assert_eq!(breaker.window_counts(now), reference.window_counts(now));
                prop_assert_eq!(breaker.window_counts(later), reference.window_counts(later));
                prop_assert_eq!(breaker.opened_total(), reference.opened_total);
                let deadline = (reference.state == BreakerState::Open)
                    .then(|| reference.opened_at.saturating_add(config.open_for()));
                prop_assert_eq!(breaker.next_deadline(), deadline);
                let dropped_since = reference
                    .unpolled
                    .len()
                    .saturating_sub(TRANSITIONS_HELD_MAX);
                prop_assert_eq!(
                    breaker.transitions_dropped(),
                    dropped_before_last_poll + dropped_since as u64
                );
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]

            #[test]
            fn consecutive_breaker_matches_the_reference(
                config in consecutive_config(),
                ops in prop::collection::vec(op(), 1..120),
            ) {
                check(config, ops)?;
            }

            #[test]
            fn count_window_breaker_matches_the_reference(
                config in count_window_config(),
                ops in prop::collection::vec(op(), 1..120),
            ) {
                check(config, ops)?;
            }

            #[test]
            fn time_window_breaker_matches_the_reference(
                config in time_window_config(),
                ops in prop::collection::vec(op(), 1..120),
            ) {
                check(config, ops)?;
            }
        }
    }
}

//! Adaptive concurrency limit: a cap on calls in flight that moves with the measured load, as
//! in Netflix's concurrency-limits.
//!
//! Admission is that library's `SimpleLimiter`: a call is admitted while fewer than `limit`
//! calls are in flight and rejected otherwise, at once (there is no queue). Each finished call
//! is a sample that may move the limit, by one of two algorithms ([`Algorithm`]), both
//! transcribed from Netflix/concurrency-limits v0.5.4 (the algorithms are unchanged at commit
//! 78a74b9, January 2026), `concurrency-limits-core/src/main/java/com/netflix/concurrency/limits/`:
//!
//! - [`Algorithm::Aimd`] (`limit/AIMDLimit.java`): additive increase, multiplicative decrease.
//!   On a drop, or a success slower than `timeout`, `limit = (int) (limit × backoff_ratio)`
//!   (truncated); otherwise, when `in_flight × 2 >= limit`, `limit = limit + 1`; then the limit
//!   is clamped to `[limit_min, limit_max]`.
//! - [`Algorithm::Gradient2`] (`limit/Gradient2Limit.java`): compares each sample's rtt (the
//!   short-term rtt) with a long-term average of rtts (`measurement/ExpAvgMeasurement.java`,
//!   the arithmetic mean of the first [`GRADIENT2_WARMUP_SAMPLES`] samples, then an
//!   exponential average with factor `2 / (long_window + 1)`). Per sample, in this order:
//!
//!   ```text
//!   queue      = queue_size(trunc(estimated))
//!   long       = long_average.add(rtt)
//!   if long / rtt > 2:            long_average ×= 0.95     (recover after a long overload)
//!   if in_flight < estimated / 2: stop; the limit stays    (the caller, not the server, limits)
//!   gradient   = max(0.5, min(1.0, rtt_tolerance × long / rtt))
//!   estimated' = estimated × gradient + queue
//!   estimated  = estimated × (1 − smoothing) + estimated' × smoothing
//!   estimated  = max(limit_min, min(limit_max, estimated))
//!   limit      = trunc(estimated)
//!   ```
//!
//!   Gradient2 does not look at whether the call was dropped (`didDrop` is unused in
//!   Netflix's `_update`), only at its rtt: a drop is a sample like any other.
//!
//! In both, `in_flight` is the number of calls in flight when the sampled call was admitted,
//! itself included (Netflix's `AbstractLimiter.createListener` records it at admission), and
//! the limit moved is the limit when the sample arrives.
//!
//! Two deliberate departures from the Java: a configuration the Java accepts with a warning or
//! not at all checked (an initial limit outside `[limit_min, limit_max]`, a smoothing of 0, a
//! queue size of 0, and so on) is refused by [`AdaptiveLimitConfig::new`]; and Gradient2 takes
//! an rtt of zero as 1 ns, where the Java would compute `0 / 0` on a first sample of 0 ns and
//! set the limit to 0 (`(int) NaN`). No other rtt is changed.
//!
//! # Determinism
//!
//! Time is an integer (nanoseconds); only the ratios and Gradient2's estimates are `f64`. Every
//! floating-point step is an IEEE-754 binary64 basic operation (`+`, `−`, `×`, `÷`,
//! comparison) with round-to-nearest-even, a conversion from an integer (exact below 2^53,
//! rounded to nearest above) or a truncating conversion to an integer (`as u32`): no `ln`,
//! `exp`, `sqrt` or `log10` (the log10 queue size is an integer logarithm), and Rust never
//! fuses a multiply and an add on its own. So a sequence of calls gives bit-identical limits
//! on every platform whose `f64` is IEEE-754 binary64 (every Rust tier-1 target; not a 32-bit
//! x86 without SSE2, whose x87 registers round differently), and the same limits as the Java
//! for the same samples (but for the zero rtt above), since Java evaluates the same operations
//! in the same order.
//!
//! # Call order and invariants
//!
//! [`AdaptiveLimit::try_acquire`] before each call; for every [`Acquire::Granted`] exactly one
//! [`AdaptiveLimit::release`] with the permit and the call's [`Outcome`]. On
//! [`Acquire::Rejected`] the call must not be made.
//!
//! - At admission, the calls in flight, the admitted one included, never exceed the limit of
//!   that moment ([`Permit::in_flight_at_acquire`] `<=` [`Permit::limit_at_acquire`]). The
//!   limit can later fall below the calls in flight (a drop lowers it while they run); then
//!   nothing is admitted until enough of them end, as with Netflix's adjustable semaphore.
//! - `limit_min <= limit <= limit_max` at every moment.
//! - [`Permit`] cannot be copied or cloned and `release` takes it by value, so each permit is
//!   released at most once; dropping one without releasing it leaks capacity, which is what the
//!   `#[must_use]` warns about. A permit belongs to the limiter that granted it: releasing it
//!   into another panics (a real `assert!`) before anything changes.
//! - `now` never goes backwards between calls; should a caller break this (threads that read a
//!   clock and then race for the lock of [`SharedAdaptiveLimit`]), the limiter takes the latest
//!   `now` it has seen instead ([`LatestTime`]). Neither algorithm reads the time (Netflix's
//!   take a start time and ignore it); `now` stamps each permit ([`Permit::acquired_at`]), so
//!   a caller can measure the rtt it reports as `now − acquired_at`.
//! - Memory is constant: the limiter keeps counters and, for Gradient2, its estimate and one
//!   average, never a list of samples.

use crate::config::ConfigError;
use crate::instance::InstanceId;
use crate::sync::{Mutex, lock};
use crate::time::{LatestTime, SimDuration, SimTime};

/// Gradient2's long-term rtt is the plain mean of this many first samples before it becomes an
/// exponential average (the `warmupWindow` of 10 that `Gradient2Limit` gives
/// `ExpAvgMeasurement`).
pub const GRADIENT2_WARMUP_SAMPLES: u32 = 10;

/// When the long-term rtt is more than this many times a sample's rtt, Gradient2 shrinks it by
/// [`GRADIENT2_DRIFT_DECAY`] at once instead of waiting for the average to come down.
const GRADIENT2_DRIFT_RATIO: f64 = 2.0;
const GRADIENT2_DRIFT_DECAY: f64 = 0.95;

/// Gradient2's gradient is clamped to `[GRADIENT2_GRADIENT_MIN, 1]`: one sample can at most
/// halve the estimate before smoothing, so an outlier cannot shed everything.
const GRADIENT2_GRADIENT_MIN: f64 = 0.5;

/// How much room Gradient2 leaves for queueing: the amount the estimate may grow by per sample
/// while latency stays low (before smoothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueSize {
    /// The same allowance at every limit (Netflix's `queueSize(int)`; its default is 4).
    Fixed(u32),
    /// `baseline + max(1, ⌊log10(limit)⌋)` (Netflix's `Log10RootIntFunction.create(baseline)`),
    /// in integers.
    Log10Root { baseline: u32 },
}

impl QueueSize {
    /// The allowance at a limit of `limit`.
    pub fn at(self, limit: u32) -> u32 {
        match self {
            QueueSize::Fixed(queue_size) => queue_size,
            QueueSize::Log10Root { baseline } => {
                // Java's `Math.max(1, (int) Math.log10(limit))`: log10 is exact at powers of
                // ten, so its truncation is the integer logarithm; log10(0) = -inf gives 1.
                let log10 = limit.checked_ilog10().unwrap_or(0).max(1);
                baseline.saturating_add(log10)
            }
        }
    }
}

/// How the limit moves. Only [`AdaptiveLimitConfig::new`] makes a config from one, so the
/// values in a config's algorithm are always valid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Algorithm {
    /// Netflix's `AIMDLimit`: a drop, or a success slower than `timeout`, multiplies the limit
    /// by `backoff_ratio` (in `[0.5, 1)`, truncated); any other success adds one when at least
    /// half the limit was in flight.
    Aimd {
        backoff_ratio: f64,
        timeout: SimDuration,
    },
    /// Netflix's `Gradient2Limit`: the limit follows the ratio of a long-term average rtt to
    /// each sample's rtt (see the module documentation for the formulas).
    Gradient2 {
        /// How much slower than the long-term rtt a sample may be before the limit shrinks
        /// (at least 1; 2.0 accepts twice the latency).
        rtt_tolerance: f64,
        /// The weight of each new estimate, in `(0, 1]` (1: the new estimate replaces the old).
        smoothing: f64,
        /// The long-term average's window in samples (at least 1): factor `2 / (n + 1)`.
        long_window: u32,
        queue_size: QueueSize,
    },
}

impl Algorithm {
    /// `AIMDLimit.Builder`'s defaults: backoff ratio 0.9, timeout 5 s. (Its limits default to
    /// initial 20, min 20, max 200.)
    pub const AIMD_NETFLIX: Algorithm = Algorithm::Aimd {
        backoff_ratio: 0.9,
        timeout: SimDuration::from_secs(5),
    };

    /// `Gradient2Limit.Builder`'s defaults: tolerance 1.5, smoothing 0.2, long window 600,
    /// queue size 4. (Its limits default to initial 20, min 20, max 200.)
    pub const GRADIENT2_NETFLIX: Algorithm = Algorithm::Gradient2 {
        rtt_tolerance: 1.5,
        smoothing: 0.2,
        long_window: 600,
        queue_size: QueueSize::Fixed(4),
    };
}

/// A validated adaptive limit configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdaptiveLimitConfig {
    limit_initial: u32,
    limit_min: u32,
    limit_max: u32,
    algorithm: Algorithm,
}

/// `value` as a finite float in `range`, or the error that names `field`.
fn finite_in(
    field: &'static str,
    value: f64,
    range: impl std::ops::RangeBounds<f64> + std::fmt::Debug,
    why: &str,
) -> Result<(), ConfigError> {
    if !value.is_finite() {
        return Err(ConfigError::new(
            field,
            format!("must be a finite number, got {value}"),
        ));
    }
    if !range.contains(&value) {
        return Err(ConfigError::new(
            field,
            format!("must be in {range:?} ({why}), got {value}"),
        ));
    }
    Ok(())
}

impl AdaptiveLimitConfig {
    /// The limit starts at `limit_initial` and stays within `[limit_min, limit_max]`; it moves
    /// as `algorithm` says.
    ///
    /// Netflix's defaults: `new(20, 20, 200, Algorithm::AIMD_NETFLIX)` or
    /// `new(20, 20, 200, Algorithm::GRADIENT2_NETFLIX)`.
    pub fn new(
        limit_initial: u32,
        limit_min: u32,
        limit_max: u32,
        algorithm: Algorithm,
    ) -> Result<Self, ConfigError> {
        if limit_min == 0 {
            return Err(ConfigError::new(
                "limit_min",
                "must be at least 1 (at a limit of zero nothing is admitted, so no sample could \
                 ever raise it)",
            ));
        }
        if limit_max < limit_min {
            return Err(ConfigError::new(
                "limit_max",
                format!("{limit_max} is below limit_min {limit_min}"),
            ));
        }
        if !(limit_min..=limit_max).contains(&limit_initial) {
            return Err(ConfigError::new(
                "limit_initial",
                format!(
                    "{limit_initial} is outside [limit_min, limit_max] = [{limit_min}, {limit_max}]"
                ),
            ));
        }
        match algorithm {
            Algorithm::Aimd {
                backoff_ratio,
                timeout,
            } => {
                finite_in(
                    "backoff_ratio",
                    backoff_ratio,
                    0.5..1.0,
                    "as AIMDLimit requires: below 0.5 one drop more than halves the limit, \
                     1 never backs off",
                )?;
                if timeout.is_zero() {
                    return Err(ConfigError::new(
                        "timeout",
                        "must be longer than zero (every success would count as a drop)",
                    ));
                }
            }
            Algorithm::Gradient2 {
                rtt_tolerance,
                smoothing,
                long_window,
                queue_size,
            } => {
                finite_in(
                    "rtt_tolerance",
                    rtt_tolerance,
                    1.0..,
                    "as Gradient2Limit requires: below 1 the limit shrinks at steady latency",
                )?;
                finite_in(
                    "smoothing",
                    smoothing,
                    // Not `RangeInclusive`: its `Debug` would print `0.0..=1.0`, which reads as
                    // if 0 were allowed.
                    (
                        std::ops::Bound::Excluded(0.0),
                        std::ops::Bound::Included(1.0),
                    ),
                    "0 would never move the limit",
                )?;
                if long_window == 0 {
                    return Err(ConfigError::new(
                        "long_window",
                        "must be at least 1 (the average's factor 2 / (n + 1) must not exceed 1)",
                    ));
                }
                if queue_size == QueueSize::Fixed(0) {
                    return Err(ConfigError::new(
                        "queue_size",
                        "must be at least 1 (with no room for queueing the limit can only shrink)",
                    ));
                }
            }
        }
        Ok(AdaptiveLimitConfig {
            limit_initial,
            limit_min,
            limit_max,
            algorithm,
        })
    }

    pub fn limit_initial(&self) -> u32 {
        self.limit_initial
    }

    pub fn limit_min(&self) -> u32 {
        self.limit_min
    }

    pub fn limit_max(&self) -> u32 {
        self.limit_max
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

/// The right to run one call under the limit. Give it back, with the call's outcome, to
/// [`AdaptiveLimit::release`] of the limiter that granted it.
///
/// Not `Clone`, not `Copy`: `release` consumes it, so it cannot be released twice.
///
/// ```compile_fail,E0382
/// use outagelab_model::adaptive_limit::{
///     Acquire, AdaptiveLimit, AdaptiveLimitConfig, Algorithm, Outcome,
/// };
/// use outagelab_model::SimTime;
/// let config = AdaptiveLimitConfig::new(1, 1, 1, Algorithm::AIMD_NETFLIX).unwrap();
/// let mut limit = AdaptiveLimit::new(config);
/// let Acquire::Granted(permit) = limit.try_acquire(SimTime::ZERO) else { panic!() };
/// limit.release(SimTime::ZERO, permit, Outcome::Ignored);
/// limit.release(SimTime::ZERO, permit, Outcome::Ignored); // moved by the first release
/// ```
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a permit that is not released leaks adaptive limit capacity"]
pub struct Permit {
    /// The limiter that granted it.
    owner: InstanceId,
    acquired_at: SimTime,
    in_flight_at_acquire: u32,
    limit_at_acquire: u32,
}

impl Permit {
    /// When it was granted (the latest `now` the limiter had seen).
    pub fn acquired_at(&self) -> SimTime {
        self.acquired_at
    }

    /// Calls in flight right after this one was admitted, itself included: the `inflight` the
    /// algorithms see when its sample arrives.
    pub fn in_flight_at_acquire(&self) -> u32 {
        self.in_flight_at_acquire
    }

    /// The limit when it was granted; never below [`Permit::in_flight_at_acquire`].
    pub fn limit_at_acquire(&self) -> u32 {
        self.limit_at_acquire
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Acquire {
    Granted(Permit),
    /// The calls in flight had reached the limit; the call must not be made.
    Rejected,
}

/// How an admitted call ended, as the caller classifies it (the limiter does not look at
/// errors, as the breaker does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The call completed in `rtt`.
    Success { rtt: SimDuration },
    /// The call failed in a way that means too much load: a timeout, an overload answer, a
    /// rejection by the server. `rtt` is the time it took all the same; AIMD ignores it,
    /// Gradient2 uses it as it would a success's.
    Dropped { rtt: SimDuration },
    /// The call ended in a way that says nothing about load (a client error, a cancellation):
    /// it frees its place and does not move the limit.
    Ignored,
}

/// How an admitted call ended, before its latency is known: what a caller's classifier (the
/// simulator's layer and the live guard, through `outagelab_sim::rules`) decides, and the
/// [`Outcome`] it becomes with the call's `rtt` ([`CallEnd::sample`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallEnd {
    Success,
    /// A sign of too much load (a timeout, an overload answer).
    Dropped,
    /// Says nothing about load (a client error, a call dropped before it ended).
    Ignored,
}

impl CallEnd {
    /// How a call dropped before it ended counts (its caller gave up, its task was aborted):
    /// it frees its place and says nothing about load.
    pub const DROPPED: CallEnd = CallEnd::Ignored;

    /// The sample of a call that ended this way `rtt` after it was admitted.
    pub fn sample(self, rtt: SimDuration) -> Outcome {
        match self {
            CallEnd::Success => Outcome::Success { rtt },
            CallEnd::Dropped => Outcome::Dropped { rtt },
            CallEnd::Ignored => Outcome::Ignored,
        }
    }
}

/// Occupancy, limit and event counts of an adaptive limit.
///
/// Event counts are `u64`: at one event per nanosecond they last 584 years. They add up:
/// `admitted = succeeded + dropped + ignored + in_flight`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AdaptiveLimitCounters {
    /// The limit now.
    pub limit: u32,
    /// Calls in flight now.
    pub in_flight: u32,
    /// The most calls ever in flight at once.
    pub in_flight_peak: u32,
    /// The lowest and highest limit ever held, the initial one included.
    pub limit_min_seen: u32,
    pub limit_max_seen: u32,
    pub admitted: u64,
    pub rejected: u64,
    /// Releases by outcome.
    pub succeeded: u64,
    pub dropped: u64,
    pub ignored: u64,
    /// Successes that AIMD counted as drops because their rtt exceeded its timeout (also
    /// counted in `succeeded`).
    pub succeeded_over_timeout: u64,
    /// Samples that raised or lowered the limit (a sample that left it unchanged is in
    /// neither).
    pub limit_increases: u64,
    pub limit_decreases: u64,
}

/// What an algorithm keeps between samples; its parameters stay in the config.
#[derive(Clone, Copy, Debug)]
enum Estimator {
    /// AIMD keeps nothing but the limit.
    Aimd,
    Gradient2 {
        /// The limit before truncation; the limit is its truncation.
        estimated_limit: f64,
        rtt_long: ExpAverage,
    },
}

/// Netflix's `ExpAvgMeasurement`: the mean of the first [`GRADIENT2_WARMUP_SAMPLES`] samples,
/// then `value × (1 − f) + sample × f` with `f = 2 / (window + 1)`. In nanoseconds.
#[derive(Clone, Copy, Debug)]
struct ExpAverage {
    value: f64,
    sum: f64,
    count: u32,
    factor: f64,
}

impl ExpAverage {
    fn new(window: u32) -> Self {
        ExpAverage {
            value: 0.0,
            sum: 0.0,
            count: 0,
            factor: 2.0 / (f64::from(window) + 1.0),
        }
    }

    fn add(&mut self, sample: f64) -> f64 {
        if self.count < GRADIENT2_WARMUP_SAMPLES {
            self.count += 1;
            self.sum += sample;
            self.value = self.sum / f64::from(self.count);
        } else {
            self.value = self.value * (1.0 - self.factor) + sample * self.factor;
        }
        self.value
    }
}

impl Estimator {
    fn new(config: &AdaptiveLimitConfig) -> Self {
        match config.algorithm {
            Algorithm::Aimd { .. } => Estimator::Aimd,
            Algorithm::Gradient2 { long_window, .. } => Estimator::Gradient2 {
                estimated_limit: f64::from(config.limit_initial),
                rtt_long: ExpAverage::new(long_window),
            },
        }
    }

    /// The limit after one sample: `limit` is the limit now, `in_flight` the calls in flight
    /// when the sampled call was admitted. The result is within `[limit_min, limit_max]`.
    fn next_limit(
        &mut self,
        config: &AdaptiveLimitConfig,
        limit: u32,
        rtt: SimDuration,
        in_flight: u32,
        dropped: bool,
    ) -> u32 {
        let (min, max) = (config.limit_min, config.limit_max);
        match (config.algorithm, self) {
            (
                Algorithm::Aimd {
                    backoff_ratio,
                    timeout,
                },
                Estimator::Aimd,
            ) => {
                let next = if dropped || rtt > timeout {
                    // Java's `(int) (currentLimit * backoffRatio)`: the product is below
                    // `limit`, so the truncation fits.
                    (f64::from(limit) * backoff_ratio) as u32
                } else if u64::from(in_flight) * 2 >= u64::from(limit) {
                    limit.saturating_add(1)
                } else {
                    limit
                };
                next.clamp(min, max)
            }
            (
                Algorithm::Gradient2 {
                    rtt_tolerance,
                    smoothing,
                    queue_size,
                    ..
                },
                Estimator::Gradient2 {
                    estimated_limit,
                    rtt_long,
                },
            ) => {
                let estimated = *estimated_limit;
                // `estimated` is within `[limit_min, limit_max]`, so it truncates into a u32.
                let queue = f64::from(queue_size.at(estimated as u32));
                // The one departure from the Java: a zero rtt is taken as 1 ns.
                let rtt_short = rtt.as_nanos().max(1) as f64;
                let rtt_long_now = rtt_long.add(rtt_short);
                if rtt_long_now / rtt_short > GRADIENT2_DRIFT_RATIO {
                    rtt_long.value *= GRADIENT2_DRIFT_DECAY;
                }
                if f64::from(in_flight) < estimated / 2.0 {
                    return estimated as u32;
                }
                // `rtt_short >= 1` and the long rtt is finite, so this is never NaN (at most
                // +inf, which the clamp turns into 1); `clamp` is then Java's
                // `Math.max(0.5, Math.min(1.0, ..))`.
                let gradient =
                    (rtt_tolerance * rtt_long_now / rtt_short).clamp(GRADIENT2_GRADIENT_MIN, 1.0);
                let proposed = estimated * gradient + queue;
                let smoothed = estimated * (1.0 - smoothing) + proposed * smoothing;
                let clamped = smoothed.clamp(f64::from(min), f64::from(max));
                *estimated_limit = clamped;
                clamped as u32
            }
            (algorithm, estimator) => {
                unreachable!("{estimator:?} was made from another algorithm than {algorithm:?}")
            }
        }
    }
}

/// An adaptive concurrency limit with no queue. See the module documentation for the
/// algorithms, the call order and the invariants.
#[derive(Clone, Debug)]
pub struct AdaptiveLimit {
    /// Stamped into every permit, checked when one comes back.
    id: InstanceId,
    config: AdaptiveLimitConfig,
    latest: LatestTime,
    estimator: Estimator,
    /// Holds `limit` and `in_flight` too: one place for the occupancy.
    counters: AdaptiveLimitCounters,
}

impl AdaptiveLimit {
    pub fn new(config: AdaptiveLimitConfig) -> Self {
        let limit = config.limit_initial;
        AdaptiveLimit {
            id: InstanceId::fresh(),
            config,
            latest: LatestTime::new(),
            estimator: Estimator::new(&config),
            counters: AdaptiveLimitCounters {
                limit,
                limit_min_seen: limit,
                limit_max_seen: limit,
                ..AdaptiveLimitCounters::default()
            },
        }
    }

    pub fn config(&self) -> &AdaptiveLimitConfig {
        &self.config
    }

    /// The limit now.
    pub fn limit(&self) -> u32 {
        self.counters.limit
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> u32 {
        self.counters.in_flight
    }

    pub fn counters(&self) -> AdaptiveLimitCounters {
        self.counters
    }

    /// Admits the call if fewer than `limit` calls are in flight, at once; otherwise rejects
    /// it. Never queues.
    pub fn try_acquire(&mut self, now: SimTime) -> Acquire {
        let now = self.latest.observe(now);
        if !self.has_room() {
            self.counters.rejected += 1;
            return Acquire::Rejected;
        }
        let permit = self.grant(now);
        debug_assert!(permit.in_flight_at_acquire <= permit.limit_at_acquire);
        Acquire::Granted(permit)
    }

    /// Whether a call would be admitted now. The check half of `try_acquire`.
    fn has_room(&self) -> bool {
        self.counters.in_flight < self.counters.limit
    }

    /// Counts one more call in flight and hands out its permit, without checking the limit:
    /// the increment half of `try_acquire`, which checks first. (Kept apart only so that a
    /// loom model can split the two and show the race.)
    fn grant(&mut self, now: SimTime) -> Permit {
        let counters = &mut self.counters;
        counters.in_flight += 1;
        counters.in_flight_peak = counters.in_flight_peak.max(counters.in_flight);
        counters.admitted += 1;
        Permit {
            owner: self.id,
            acquired_at: now,
            in_flight_at_acquire: counters.in_flight,
            limit_at_acquire: counters.limit,
        }
    }

    /// Returns a permit this limiter granted, with how the call ended; a success or a drop
    /// moves the limit as the algorithm says.
    ///
    /// Panics if another limiter granted the permit, or if no call is in flight (the paired
    /// check of what `try_acquire` wrote); both are checked before anything changes.
    pub fn release(&mut self, now: SimTime, permit: Permit, outcome: Outcome) {
        self.id
            .assert_issued(permit.owner, "a permit", "concurrency limiter");
        assert!(
            self.counters.in_flight >= 1,
            "released a permit with no call in flight: it was not granted by this limiter"
        );
        self.latest.observe(now);
        self.counters.in_flight -= 1;
        let (rtt, dropped) = match outcome {
            Outcome::Success { rtt } => {
                self.counters.succeeded += 1;
                if let Algorithm::Aimd { timeout, .. } = self.config.algorithm
                    && rtt > timeout
                {
                    self.counters.succeeded_over_timeout += 1;
                }
                (rtt, false)
            }
            Outcome::Dropped { rtt } => {
                self.counters.dropped += 1;
                (rtt, true)
            }
            Outcome::Ignored => {
                self.counters.ignored += 1;
                return;
            }
        };
        let limit = self.estimator.next_limit(
            &self.config,
            self.counters.limit,
            rtt,
            permit.in_flight_at_acquire,
            dropped,
        );
        self.set_limit(limit);
    }

    fn set_limit(&mut self, limit: u32) {
        debug_assert!((self.config.limit_min..=self.config.limit_max).contains(&limit));
        let counters = &mut self.counters;
        if limit > counters.limit {
            counters.limit_increases += 1;
        } else if limit < counters.limit {
            counters.limit_decreases += 1;
        }
        counters.limit = limit;
        counters.limit_min_seen = counters.limit_min_seen.min(limit);
        counters.limit_max_seen = counters.limit_max_seen.max(limit);
    }
}

/// An [`AdaptiveLimit`] shared by threads: the same state machine behind a mutex, one lock per
/// call, so the check against the limit and the increment of the calls in flight happen in one
/// critical section.
///
/// Invariant (checked by loom): at admission, the calls in flight never exceed the limit of
/// that moment, and once every thread has released its permit, none are in flight.
pub struct SharedAdaptiveLimit {
    limit: Mutex<AdaptiveLimit>,
}

impl SharedAdaptiveLimit {
    pub fn new(config: AdaptiveLimitConfig) -> Self {
        SharedAdaptiveLimit {
            limit: Mutex::new(AdaptiveLimit::new(config)),
        }
    }

    pub fn try_acquire(&self, now: SimTime) -> Acquire {
        lock(&self.limit).try_acquire(now)
    }

    pub fn release(&self, now: SimTime, permit: Permit, outcome: Outcome) {
        lock(&self.limit).release(now, permit, outcome)
    }

    /// The limit, the calls in flight and every count, as one consistent reading.
    pub fn counters(&self) -> AdaptiveLimitCounters {
        lock(&self.limit).counters()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn ms(millis: u64) -> SimDuration {
        SimDuration::from_millis(millis)
    }

    fn success(millis: u64) -> Outcome {
        Outcome::Success { rtt: ms(millis) }
    }

    fn dropped(millis: u64) -> Outcome {
        Outcome::Dropped { rtt: ms(millis) }
    }

    fn aimd(backoff_ratio: f64, timeout: SimDuration) -> Algorithm {
        Algorithm::Aimd {
            backoff_ratio,
            timeout,
        }
    }

    fn gradient2(rtt_tolerance: f64, smoothing: f64, long_window: u32) -> Algorithm {
        Algorithm::Gradient2 {
            rtt_tolerance,
            smoothing,
            long_window,
            queue_size: QueueSize::Fixed(4),
        }
    }

    fn limiter(initial: u32, min: u32, max: u32, algorithm: Algorithm) -> AdaptiveLimit {
        AdaptiveLimit::new(AdaptiveLimitConfig::new(initial, min, max, algorithm).unwrap())
    }

    fn granted(acquire: Acquire) -> Permit {
        match acquire {
            Acquire::Granted(permit) => permit,
            Acquire::Rejected => panic!("expected a permit, got a rejection"),
        }
    }

    /// Acquires until the limiter rejects; returns the permits, oldest first.
    fn fill(limit: &mut AdaptiveLimit) -> Vec<Permit> {
        std::iter::from_fn(|| match limit.try_acquire(SimTime::ZERO) {
            Acquire::Granted(permit) => Some(permit),
            Acquire::Rejected => None,
        })
        .collect()
    }

    /// Fills the limiter but for one place, so that every call admitted next is admitted at
    /// full load (`in_flight = limit`); returns the permits held.
    fn at_load(limit: &mut AdaptiveLimit) -> Vec<Permit> {
        let mut permits = fill(limit);
        let newest = permits.pop().expect("a limit is at least 1");
        limit.release(SimTime::ZERO, newest, Outcome::Ignored);
        permits
    }

    /// One more call, admitted and ended at once with `outcome`; returns the limit after it.
    fn sample(limit: &mut AdaptiveLimit, outcome: Outcome) -> u32 {
        let permit = granted(limit.try_acquire(SimTime::ZERO));
        limit.release(SimTime::ZERO, permit, outcome);
        limit.limit()
    }

    /// Gradient2's long-term rtt, in nanoseconds.
    fn rtt_long(limit: &AdaptiveLimit) -> f64 {
        match limit.estimator {
            Estimator::Gradient2 { rtt_long, .. } => rtt_long.value,
            Estimator::Aimd => panic!("not a Gradient2 limiter"),
        }
    }

    // ---- admission ----

    #[test]
    fn rejects_at_the_limit_and_admits_after_a_release() {
        let mut limit = limiter(2, 1, 10, Algorithm::AIMD_NETFLIX);
        let first = granted(limit.try_acquire(SimTime::ZERO));
        let second = granted(limit.try_acquire(SimTime::ZERO));
        assert_eq!(
            (first.in_flight_at_acquire(), second.in_flight_at_acquire()),
            (1, 2)
        );
        assert_eq!(second.limit_at_acquire(), 2);
        assert_eq!(limit.try_acquire(SimTime::ZERO), Acquire::Rejected);
        limit.release(SimTime::ZERO, first, Outcome::Ignored);
        let third = granted(limit.try_acquire(SimTime::ZERO));
        assert_eq!(third.in_flight_at_acquire(), 2);
        let counters = limit.counters();
        assert_eq!((counters.admitted, counters.rejected), (3, 1));
        assert_eq!((counters.in_flight, counters.in_flight_peak), (2, 2));
        limit.release(SimTime::ZERO, second, Outcome::Ignored);
        limit.release(SimTime::ZERO, third, Outcome::Ignored);
        assert_eq!(limit.in_flight(), 0);
    }

    #[test]
    fn a_limit_lowered_below_the_calls_in_flight_admits_nothing_until_enough_end() {
        let mut limit = limiter(10, 1, 10, aimd(0.5, SimDuration::from_secs(5)));
        let mut permits = fill(&mut limit);
        assert_eq!(permits.len(), 10);
        limit.release(SimTime::ZERO, permits.pop().unwrap(), dropped(1));
        assert_eq!((limit.limit(), limit.in_flight()), (5, 9));
        while limit.in_flight() > 5 {
            limit.release(SimTime::ZERO, permits.pop().unwrap(), Outcome::Ignored);
        }
        assert_eq!(limit.try_acquire(SimTime::ZERO), Acquire::Rejected);
        limit.release(SimTime::ZERO, permits.pop().unwrap(), Outcome::Ignored);
        permits.push(granted(limit.try_acquire(SimTime::ZERO)));
        for permit in permits {
            limit.release(SimTime::ZERO, permit, Outcome::Ignored);
        }
    }

    #[test]
    fn permits_carry_the_latest_time_seen() {
        let mut limit = limiter(2, 1, 2, Algorithm::AIMD_NETFLIX);
        let late = granted(limit.try_acquire(SimTime::from_nanos(10)));
        let early = granted(limit.try_acquire(SimTime::from_nanos(5)));
        assert_eq!(late.acquired_at(), SimTime::from_nanos(10));
        assert_eq!(early.acquired_at(), SimTime::from_nanos(10));
        limit.release(SimTime::from_nanos(20), late, Outcome::Ignored);
        limit.release(SimTime::from_nanos(20), early, Outcome::Ignored);
    }

    #[test]
    #[should_panic(
        expected = "a permit was handed back to a concurrency limiter that did not issue it"
    )]
    fn a_permit_from_another_limiter_panics() {
        let mut issuer = limiter(1, 1, 1, Algorithm::AIMD_NETFLIX);
        let mut other = limiter(1, 1, 1, Algorithm::AIMD_NETFLIX);
        let _held = granted(other.try_acquire(SimTime::ZERO));
        // Without the check, `other` would count a call it never admitted as ended.
        other.release(
            SimTime::ZERO,
            granted(issuer.try_acquire(SimTime::ZERO)),
            Outcome::Ignored,
        );
    }

    /// Threads hammer a shared AIMD limit of at most 4, with a drop now and then, tracking
    /// who is inside in their own atomic: never more than the maximum inside, every permit
    /// admitted within its limit, and every permit back at the end.
    #[test]
    fn threads_never_exceed_the_shared_limit() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU32, Ordering};
        let config = AdaptiveLimitConfig::new(4, 1, 4, aimd(0.5, ms(100))).unwrap();
        let shared = Arc::new(SharedAdaptiveLimit::new(config));
        let inside = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..6u64)
            .map(|thread| {
                let (shared, inside) = (shared.clone(), inside.clone());
                std::thread::spawn(move || {
                    for round in 0..2000u64 {
                        let now = SimTime::from_nanos(round);
                        if let Acquire::Granted(permit) = shared.try_acquire(now) {
                            assert!(permit.in_flight_at_acquire() <= permit.limit_at_acquire());
                            let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(now_inside <= 4, "{now_inside} inside a limit of at most 4");
                            inside.fetch_sub(1, Ordering::SeqCst);
                            let outcome = if (thread + round) % 7 == 0 {
                                dropped(1)
                            } else {
                                success(1)
                            };
                            shared.release(now, permit, outcome);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let counters = shared.counters();
        assert_eq!(counters.in_flight, 0);
        assert_eq!(counters.admitted + counters.rejected, 6 * 2000);
        assert_eq!(counters.admitted, counters.succeeded + counters.dropped);
        assert!(counters.in_flight_peak <= 4 && counters.limit_max_seen <= 4);
    }

    // ---- AIMD ----

    #[test]
    fn aimd_ten_successes_at_full_load_raise_the_limit_by_ten() {
        let mut limit = limiter(10, 1, 100, Algorithm::AIMD_NETFLIX);
        let mut permits = fill(&mut limit);
        for round in 1..=10 {
            // The newest call was admitted with the limit full: in_flight × 2 >= limit.
            let newest = permits.pop().unwrap();
            assert_eq!(newest.in_flight_at_acquire(), limit.limit());
            limit.release(SimTime::ZERO, newest, success(10));
            assert_eq!(limit.limit(), 10 + round);
            permits.extend(fill(&mut limit));
            assert_eq!(permits.len() as u32, limit.limit());
        }
        let counters = limit.counters();
        assert_eq!(
            (counters.limit_increases, counters.limit_decreases),
            (10, 0)
        );
        assert_eq!((counters.limit_min_seen, counters.limit_max_seen), (10, 20));
        for permit in permits {
            limit.release(SimTime::ZERO, permit, Outcome::Ignored);
        }
    }

    /// Ten calls admitted at a limit of 10 (in flight 1..=10 at admission) end newest first:
    /// a success raises the limit while `in_flight × 2 >= limit`, with the limit of the
    /// moment the sample arrives: 10×2 >= 10, 9×2 >= 11, 8×2 >= 12, 7×2 >= 13, then 6×2 < 14.
    #[test]
    fn aimd_raises_only_on_samples_from_at_least_half_load() {
        let mut limit = limiter(10, 1, 100, Algorithm::AIMD_NETFLIX);
        let permits = fill(&mut limit);
        let mut limits = Vec::new();
        for permit in permits.into_iter().rev() {
            limit.release(SimTime::ZERO, permit, success(10));
            limits.push(limit.limit());
        }
        assert_eq!(limits, [11, 12, 13, 14, 14, 14, 14, 14, 14, 14]);
    }

    /// Netflix's `(int) (limit × 0.9)`, truncated, down to the minimum and no further.
    #[test]
    fn aimd_drops_multiply_by_the_backoff_ratio_and_truncate() {
        let check = |initial, min, backoff_ratio, expected: &[u32]| {
            let mut limit = limiter(initial, min, initial, aimd(backoff_ratio, ms(100)));
            let limits: Vec<u32> = expected
                .iter()
                .map(|_| sample(&mut limit, dropped(1)))
                .collect();
            assert_eq!(limits, expected, "from {initial} at ratio {backoff_ratio}");
        };
        check(
            20,
            1,
            0.9,
            &[18, 16, 14, 12, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 1],
        );
        check(7, 1, 0.5, &[3, 1, 1]);
        check(7, 4, 0.5, &[4, 4]);
        check(100, 1, 0.99, &[99, 98, 97]);
        let mut limit = limiter(20, 1, 20, aimd(0.9, ms(100)));
        for _ in 0..15 {
            sample(&mut limit, dropped(1));
        }
        let counters = limit.counters();
        assert_eq!((counters.limit_decreases, counters.limit_min_seen), (14, 1));
        assert_eq!(counters.dropped, 15);
    }

    #[test]
    fn aimd_a_success_slower_than_the_timeout_is_a_drop() {
        let mut limit = limiter(10, 1, 10, aimd(0.9, ms(100)));
        assert_eq!(
            sample(&mut limit, success(100)),
            10,
            "at the timeout: a success"
        );
        let slow = Outcome::Success {
            rtt: SimDuration::from_nanos(100_000_001),
        };
        assert_eq!(sample(&mut limit, slow), 9, "past the timeout: a drop");
        let counters = limit.counters();
        assert_eq!(
            (
                counters.succeeded,
                counters.succeeded_over_timeout,
                counters.dropped
            ),
            (2, 1, 0)
        );
    }

    #[test]
    fn aimd_never_rises_above_the_maximum() {
        let mut limit = limiter(3, 1, 3, Algorithm::AIMD_NETFLIX);
        let permits = fill(&mut limit);
        for permit in permits.into_iter().rev() {
            limit.release(SimTime::ZERO, permit, success(1));
        }
        assert_eq!(limit.limit(), 3);
        assert_eq!(limit.counters().limit_increases, 0);
    }

    #[test]
    fn an_ignored_call_frees_its_place_and_leaves_the_limit() {
        for algorithm in [Algorithm::AIMD_NETFLIX, Algorithm::GRADIENT2_NETFLIX] {
            let mut limit = limiter(20, 1, 200, algorithm);
            let permits = fill(&mut limit);
            for permit in permits {
                limit.release(SimTime::ZERO, permit, Outcome::Ignored);
            }
            let counters = limit.counters();
            assert_eq!((counters.limit, counters.in_flight), (20, 0));
            assert_eq!((counters.ignored, counters.admitted), (20, 20));
            assert_eq!(counters.limit_increases + counters.limit_decreases, 0);
        }
    }

    // ---- Gradient2 ----

    /// Smoothing 1 and tolerance 1, so the estimate is exactly `limit × gradient + 4`. Twenty
    /// calls admitted at a limit of 20 end newest first:
    /// - 100 ms: long = mean(100) = 100, gradient 1, 20 + 4 = 24;
    /// - 200 ms: long = mean(100, 200) = 150, gradient 0.75, 24 × 0.75 + 4 = 22;
    /// - 10 s: long = mean(100, 200, 10 000) = 3433.3, gradient 0.34 clamped to 0.5,
    ///   22 × 0.5 + 4 = 15;
    /// - the oldest call (admitted with 1 in flight, under 15 / 2): the limit stays 15, and
    ///   long = mean(.., 100) = 2600 > 2 × 100 is cut to 2600 × 0.95 = 2470.
    #[test]
    fn gradient2_hand_computed_sequence() {
        let mut limit = limiter(20, 1, 200, gradient2(1.0, 1.0, 600));
        let mut permits = fill(&mut limit);
        let mut newest = || permits.pop().unwrap();
        let (p20, p19, p18) = (newest(), newest(), newest());
        let mut limits = Vec::new();
        for (permit, rtt) in [(p20, 100), (p19, 200), (p18, 10_000)] {
            limit.release(SimTime::ZERO, permit, success(rtt));
            limits.push(limit.limit());
        }
        assert_eq!(limits, [24, 22, 15]);
        let oldest = permits.remove(0);
        assert_eq!(oldest.in_flight_at_acquire(), 1);
        limit.release(SimTime::ZERO, oldest, success(100));
        assert_eq!(limit.limit(), 15, "app-limited: the limit stays");
        assert!(
            (rtt_long(&limit) - 2.47e9).abs() < 1.0,
            "{}",
            rtt_long(&limit)
        );
        for permit in permits {
            limit.release(SimTime::ZERO, permit, Outcome::Ignored);
        }
        let counters = limit.counters();
        assert_eq!((counters.limit_increases, counters.limit_decreases), (1, 2));
        assert_eq!((counters.limit_min_seen, counters.limit_max_seen), (15, 24));
    }

    /// Netflix's defaults at a steady rtt: each sample moves the estimate by
    /// `queue × smoothing = 4 × 0.2 = 0.8` (the gradient is 1), from 20. The limit is its
    /// truncation; the steps checked stay clear of whole numbers (20.8, 21.6, 22.4, 23.2, then
    /// 24.8 and 25.6 after the sample that reaches 24.0).
    #[test]
    fn gradient2_defaults_grow_by_queue_times_smoothing_at_a_steady_rtt() {
        let mut limit = limiter(20, 20, 200, Algorithm::GRADIENT2_NETFLIX);
        // Nineteen calls stay in flight, so every sample was admitted with 20 in flight.
        let ballast = at_load(&mut limit);
        let limits: Vec<u32> = (0..7).map(|_| sample(&mut limit, success(50))).collect();
        assert_eq!(limits[..4], [20, 21, 22, 23]);
        assert_eq!(limits[5..], [24, 25]);
        release_all(&mut limit, ballast);
    }

    fn release_all(limit: &mut AdaptiveLimit, permits: Vec<Permit>) {
        for permit in permits {
            limit.release(SimTime::ZERO, permit, Outcome::Ignored);
        }
    }

    /// A long window of 3 (factor 2 / 4 = 0.5): the first ten samples are averaged, the
    /// eleventh is mixed in half and half, and a sample under half the average cuts it.
    #[test]
    fn gradient2_long_rtt_is_a_mean_then_an_exponential_average() {
        let mut limit = limiter(20, 1, 200, gradient2(1.5, 0.2, 3));
        for (index, rtt) in [100, 300, 200, 200, 200, 200, 200, 200, 200, 200]
            .into_iter()
            .enumerate()
        {
            sample(&mut limit, success(rtt));
            // 100, then (100 + 300) / 2 = 200, and 200 ever after.
            let mean = if index == 0 { 100e6 } else { 200e6 };
            assert_eq!(rtt_long(&limit), mean, "after sample {}", index + 1);
        }
        sample(&mut limit, success(400));
        assert_eq!(rtt_long(&limit), 300e6, "200 × 0.5 + 400 × 0.5");
        sample(&mut limit, success(100));
        assert_eq!(rtt_long(&limit), 200e6, "exactly twice the sample: not cut");
        sample(&mut limit, success(40));
        // 200 × 0.5 + 40 × 0.5 = 120, more than twice 40: cut to 120 × 0.95 = 114.
        assert!(
            (rtt_long(&limit) - 114e6).abs() < 1e-6,
            "{}",
            rtt_long(&limit)
        );
    }

    /// Gradient2 reads only the rtt: a drop moves the limit exactly as a success would.
    #[test]
    fn gradient2_treats_a_drop_as_a_sample_of_its_rtt() {
        let mut by_success = limiter(20, 1, 200, Algorithm::GRADIENT2_NETFLIX);
        let mut by_drop = by_success.clone();
        let (ballast_s, ballast_d) = (at_load(&mut by_success), at_load(&mut by_drop));
        for rtt in [10, 10, 30, 90, 5] {
            let s = by_success.limit();
            let permit_s = granted(by_success.try_acquire(SimTime::ZERO));
            by_success.release(SimTime::ZERO, permit_s, success(rtt));
            let permit_d = granted(by_drop.try_acquire(SimTime::ZERO));
            by_drop.release(SimTime::ZERO, permit_d, dropped(rtt));
            assert_eq!(by_success.limit(), by_drop.limit(), "from {s} at {rtt} ms");
        }
        release_all(&mut by_success, ballast_s);
        release_all(&mut by_drop, ballast_d);
    }

    /// Regression: the Java divides by a zero rtt; on a first sample of 0 ns it computes
    /// `0 / 0` and sets the limit to `(int) NaN = 0`. Here zero counts as 1 ns.
    #[test]
    fn gradient2_a_zero_rtt_keeps_the_limit_finite() {
        let mut limit = limiter(20, 1, 200, Algorithm::GRADIENT2_NETFLIX);
        let ballast = at_load(&mut limit);
        assert_eq!(
            sample(&mut limit, success(0)),
            20,
            "20 × 0.8 + 24 × 0.2 = 20.8"
        );
        assert_eq!(rtt_long(&limit), 1.0);
        release_all(&mut limit, ballast);
    }

    #[test]
    fn gradient2_stays_at_the_maximum_at_a_steady_rtt() {
        let mut limit = limiter(21, 1, 22, gradient2(1.0, 1.0, 600));
        let ballast = at_load(&mut limit);
        assert_eq!(sample(&mut limit, success(5)), 22, "21 + 4 clamped to 22");
        assert_eq!(sample(&mut limit, success(5)), 22);
        assert_eq!(limit.counters().limit_increases, 1);
        release_all(&mut limit, ballast);
    }

    #[test]
    fn log10_queue_size_matches_netflix_table() {
        let cases = [
            (0, 1),
            (1, 1),
            (9, 1),
            (10, 1),
            (99, 1),
            (100, 2),
            (999, 2),
            (1000, 3),
            (u32::MAX, 9),
        ];
        for (limit, log10) in cases {
            assert_eq!(
                QueueSize::Log10Root { baseline: 0 }.at(limit),
                log10,
                "at {limit}"
            );
            assert_eq!(QueueSize::Log10Root { baseline: 4 }.at(limit), log10 + 4);
        }
        assert_eq!(QueueSize::Fixed(4).at(1000), 4);
    }

    // ---- configuration ----

    /// `AdaptiveLimitConfig::new(limits, algorithm)` is refused, naming `field`, with a reason
    /// that contains `reason`.
    fn refused(limits: (u32, u32, u32), algorithm: Algorithm, field: &str, reason: &str) {
        let (initial, min, max) = limits;
        let error = AdaptiveLimitConfig::new(initial, min, max, algorithm).unwrap_err();
        assert_eq!(error.field, field, "{error}");
        assert!(error.reason.contains(reason), "{error}");
    }

    const GOOD: (u32, u32, u32) = (20, 20, 200);

    #[test]
    fn zero_or_inverted_limits_are_refused() {
        let algorithm = Algorithm::AIMD_NETFLIX;
        refused((0, 0, 10), algorithm, "limit_min", "at least 1");
        refused((5, 10, 9), algorithm, "limit_max", "below limit_min 10");
        refused(
            (4, 5, 10),
            algorithm,
            "limit_initial",
            "outside [limit_min, limit_max]",
        );
        refused((11, 5, 10), algorithm, "limit_initial", "outside");
        refused((0, 1, 10), algorithm, "limit_initial", "outside");
    }

    #[test]
    fn aimd_ratios_and_timeouts_out_of_range_are_refused() {
        let timeout = SimDuration::from_secs(5);
        for ratio in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            refused(GOOD, aimd(ratio, timeout), "backoff_ratio", "finite");
        }
        for ratio in [0.49, 1.0, 1.5, 0.0, -0.9] {
            refused(
                GOOD,
                aimd(ratio, timeout),
                "backoff_ratio",
                "must be in 0.5..1.0",
            );
        }
        refused(
            GOOD,
            aimd(0.9, SimDuration::ZERO),
            "timeout",
            "longer than zero",
        );
    }

    #[test]
    fn gradient2_parameters_out_of_range_are_refused() {
        for tolerance in [f64::NAN, f64::INFINITY] {
            refused(
                GOOD,
                gradient2(tolerance, 0.2, 600),
                "rtt_tolerance",
                "finite",
            );
        }
        refused(
            GOOD,
            gradient2(0.99, 0.2, 600),
            "rtt_tolerance",
            "must be in 1.0..",
        );
        for smoothing in [f64::NAN, f64::NEG_INFINITY] {
            refused(GOOD, gradient2(1.5, smoothing, 600), "smoothing", "finite");
        }
        for smoothing in [0.0, -0.1, 1.01] {
            refused(
                GOOD,
                gradient2(1.5, smoothing, 600),
                "smoothing",
                "Excluded(0.0)",
            );
        }
        refused(GOOD, gradient2(1.5, 0.2, 0), "long_window", "at least 1");
        let no_queue = Algorithm::Gradient2 {
            rtt_tolerance: 1.5,
            smoothing: 0.2,
            long_window: 600,
            queue_size: QueueSize::Fixed(0),
        };
        refused(GOOD, no_queue, "queue_size", "at least 1");
    }

    #[test]
    fn the_edges_of_every_range_are_accepted() {
        let algorithms = [
            Algorithm::AIMD_NETFLIX,
            Algorithm::GRADIENT2_NETFLIX,
            aimd(0.5, SimDuration::from_nanos(1)),
            aimd(0.999_999, SimDuration::MAX),
            gradient2(1.0, 1.0, 1),
            gradient2(1e300, f64::MIN_POSITIVE, u32::MAX),
            Algorithm::Gradient2 {
                rtt_tolerance: 1.0,
                smoothing: 0.5,
                long_window: 1,
                queue_size: QueueSize::Log10Root { baseline: 0 },
            },
        ];
        for algorithm in algorithms {
            for (initial, min, max) in [GOOD, (1, 1, 1), (u32::MAX, 1, u32::MAX)] {
                let config = AdaptiveLimitConfig::new(initial, min, max, algorithm).unwrap();
                assert_eq!(config.limit_initial(), initial);
                assert_eq!(config.algorithm(), algorithm);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod properties {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// Let this many nanoseconds pass.
        Wait(u64),
        Acquire,
        /// End the held call at this index (modulo the number held), if any.
        Release(usize, Outcome),
    }

    fn rtt() -> impl Strategy<Value = SimDuration> {
        let nanos_extra = prop_oneof![Just(0u64), Just(1), Just(999_999)];
        (0u64..=120, nanos_extra)
            .prop_map(|(millis, extra)| SimDuration::from_nanos(millis * 1_000_000 + extra))
    }

    fn op() -> impl Strategy<Value = Op> {
        let outcome = prop_oneof![
            3 => rtt().prop_map(|rtt| Outcome::Success { rtt }),
            2 => rtt().prop_map(|rtt| Outcome::Dropped { rtt }),
            1 => Just(Outcome::Ignored),
        ];
        prop_oneof![
            1 => (0u64..=5_000_000).prop_map(Op::Wait),
            5 => Just(Op::Acquire),
            4 => (any::<usize>(), outcome).prop_map(|(index, outcome)| Op::Release(index, outcome)),
        ]
    }

    /// `(initial, min, max)` with `1 <= min <= initial <= max <= 10`.
    fn limits() -> impl Strategy<Value = (u32, u32, u32)> {
        (1u32..=4, 0u32..=6)
            .prop_flat_map(|(min, spread)| (min..=min + spread, Just(min), Just(min + spread)))
    }

    fn aimd_config() -> impl Strategy<Value = AdaptiveLimitConfig> {
        let ratio = prop_oneof![0.5f64..1.0, Just(0.5), Just(0.9), Just(0.999)];
        (limits(), ratio, 1u64..=100).prop_map(|((initial, min, max), backoff_ratio, millis)| {
            let timeout = SimDuration::from_millis(millis);
            let algorithm = Algorithm::Aimd {
                backoff_ratio,
                timeout,
            };
            AdaptiveLimitConfig::new(initial, min, max, algorithm).unwrap()
        })
    }

    fn gradient2_config() -> impl Strategy<Value = AdaptiveLimitConfig> {
        let rtt_tolerance = prop_oneof![1.0f64..3.0, Just(1.0), Just(1.5)];
        let smoothing = (1u32..=100).prop_map(|percent| f64::from(percent) / 100.0);
        let queue_size = prop_oneof![
            (1u32..=4).prop_map(QueueSize::Fixed),
            (0u32..=2).prop_map(|baseline| QueueSize::Log10Root { baseline }),
        ];
        (limits(), rtt_tolerance, smoothing, 1u32..=20, queue_size).prop_map(
            |((initial, min, max), rtt_tolerance, smoothing, long_window, queue_size)| {
                let algorithm = Algorithm::Gradient2 {
                    rtt_tolerance,
                    smoothing,
                    long_window,
                    queue_size,
                };
                AdaptiveLimitConfig::new(initial, min, max, algorithm).unwrap()
            },
        )
    }

    /// `AIMDLimit._update`, read straight off the Java: the limit after a sample from a call
    /// admitted with `in_flight` in flight, when the limit is `limit`.
    fn aimd_reference(
        config: &AdaptiveLimitConfig,
        limit: u32,
        in_flight: u32,
        outcome: Outcome,
    ) -> u32 {
        let Algorithm::Aimd {
            backoff_ratio,
            timeout,
        } = config.algorithm()
        else {
            unreachable!("an AIMD config");
        };
        let next = match outcome {
            Outcome::Ignored => return limit,
            Outcome::Success { rtt } if rtt <= timeout => {
                if in_flight * 2 >= limit {
                    limit + 1
                } else {
                    limit
                }
            }
            Outcome::Success { .. } | Outcome::Dropped { .. } => {
                (f64::from(limit) * backoff_ratio).floor() as u32
            }
        };
        next.max(config.limit_min()).min(config.limit_max())
    }

    /// Drives the sequential form and the shared form with the same operations and checks,
    /// after every step, the invariants of the module documentation and that the counters add
    /// up; for AIMD, also every new limit against the reference.
    fn check(config: AdaptiveLimitConfig, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let (min, max) = (config.limit_min(), config.limit_max());
        let mut limit = AdaptiveLimit::new(config);
        let shared = SharedAdaptiveLimit::new(config);
        // Calls in flight: the sequential form's permit and the shared form's.
        let mut held: Vec<(Permit, Permit)> = Vec::new();
        let mut now = SimTime::ZERO;
        let (mut acquires, mut held_peak) = (0u64, 0u32);
        let (mut increases, mut decreases) = (0u64, 0u64);
        for op in ops {
            let limit_before = limit.limit();
            match op {
                Op::Wait(nanos) => now = SimTime::from_nanos(now.as_nanos() + nanos),
                Op::Acquire => {
                    acquires += 1;
                    match (limit.try_acquire(now), shared.try_acquire(now)) {
                        (Acquire::Granted(permit), Acquire::Granted(twin)) => {
                            let in_flight = held.len() as u32 + 1;
                            prop_assert!(in_flight <= limit_before, "admitted over the limit");
                            prop_assert_eq!(permit.in_flight_at_acquire(), in_flight);
                            prop_assert_eq!(permit.limit_at_acquire(), limit_before);
                            prop_assert_eq!(permit.acquired_at(), now);
                            held.push((permit, twin));
                            held_peak = held_peak.max(in_flight);
                        }
                        (Acquire::Rejected, Acquire::Rejected) => {
                            prop_assert!(held.len() as u32 >= limit_before, "rejected with room");
                        }
                        (sequential, shared) => {
                            prop_assert!(false, "the forms disagree: {sequential:?} and {shared:?}")
                        }
                    }
                }
                Op::Release(index, outcome) => {
                    if !held.is_empty() {
                        let (permit, twin) = held.swap_remove(index % held.len());
                        let in_flight = permit.in_flight_at_acquire();
                        limit.release(now, permit, outcome);
                        shared.release(now, twin, outcome);
                        if outcome == Outcome::Ignored {
                            prop_assert_eq!(
                                limit.limit(),
                                limit_before,
                                "an ignored call moved it"
                            );
                        }
                        if let Algorithm::Aimd { .. } = config.algorithm() {
                            let expected =
                                aimd_reference(&config, limit_before, in_flight, outcome);
                            prop_assert_eq!(
                                limit.limit(),
                                expected,
                                "{:?} from {}",
                                outcome,
                                limit_before
                            );
                        }
                    }
                }
            }
            let counters = limit.counters();
            prop_assert_eq!(shared.counters(), counters);
            prop_assert!(
                (min..=max).contains(&counters.limit),
                "limit {} outside",
                counters.limit
            );
            increases += u64::from(counters.limit > limit_before);
            decreases += u64::from(counters.limit < limit_before);
            prop_assert_eq!(
                (counters.limit_increases, counters.limit_decreases),
                (increases, decreases)
            );
            prop_assert!(
                min <= counters.limit_min_seen && counters.limit_min_seen <= counters.limit
            );
            prop_assert!(
                counters.limit <= counters.limit_max_seen && counters.limit_max_seen <= max
            );
            prop_assert_eq!(counters.in_flight as usize, held.len());
            prop_assert_eq!(counters.in_flight_peak, held_peak);
            prop_assert_eq!(counters.admitted + counters.rejected, acquires);
            prop_assert_eq!(
                counters.admitted,
                counters.succeeded
                    + counters.dropped
                    + counters.ignored
                    + u64::from(counters.in_flight)
            );
        }
        for (permit, twin) in held {
            limit.release(now, permit, Outcome::Ignored);
            shared.release(now, twin, Outcome::Ignored);
        }
        prop_assert_eq!(limit.in_flight(), 0);
        prop_assert_eq!(shared.counters(), limit.counters());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn aimd_keeps_its_invariants_and_matches_the_reference(
            config in aimd_config(),
            ops in prop::collection::vec(op(), 1..150),
        ) {
            check(config, ops)?;
        }

        #[test]
        fn gradient2_keeps_its_invariants(
            config in gradient2_config(),
            ops in prop::collection::vec(op(), 1..150),
        ) {
            check(config, ops)?;
        }
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicU32, Ordering};

    /// The bug [`SharedAdaptiveLimit`] is written to avoid: the check against the limit and
    /// the increment of the calls in flight in two critical sections, as a caller would get by
    /// asking "is there room?" and then "take a place" under a lock taken twice. Test-only: it
    /// exists to show that loom finds the race.
    struct CheckThenIncrement {
        limit: Mutex<AdaptiveLimit>,
    }

    impl CheckThenIncrement {
        fn try_acquire(&self, now: SimTime) -> Acquire {
            let has_room = lock(&self.limit).has_room();
            // Another thread can take the last place here.
            if has_room {
                Acquire::Granted(lock(&self.limit).grant(now))
            } else {
                Acquire::Rejected
            }
        }
    }

    /// Three threads through a shared AIMD limit of 2 (min 1, ratio 0.5); the first ends its
    /// call with a drop, which lowers the limit to 1 while the others may be inside, and the
    /// others' successes may raise it back. Whatever the interleaving: every admission is
    /// within the limit of its moment, never more than the maximum are inside, the limit
    /// moves by exactly the recorded steps, and every permit comes back.
    ///
    /// Each call runs under the one mutex, so loom varies the order in which the calls take
    /// the lock (and where the threads' own counting falls between them); the counterexample
    /// below shows that a split check and increment would not survive that.
    #[test]
    fn loom_adaptive_limit_never_admits_over_the_limit() {
        crate::sync::loom_model(|| {
            let algorithm = Algorithm::Aimd {
                backoff_ratio: 0.5,
                timeout: SimDuration::from_secs(1),
            };
            let config = AdaptiveLimitConfig::new(2, 1, 2, algorithm).unwrap();
            let shared = Arc::new(SharedAdaptiveLimit::new(config));
            let inside = Arc::new(AtomicU32::new(0));
            let threads: Vec<_> = (0..3u64)
                .map(|thread| {
                    let (shared, inside) = (shared.clone(), inside.clone());
                    loom::thread::spawn(move || {
                        let now = SimTime::from_nanos(thread);
                        let Acquire::Granted(permit) = shared.try_acquire(now) else {
                            return false;
                        };
                        assert!(
                            permit.in_flight_at_acquire() <= permit.limit_at_acquire(),
                            "admitted as call {} under a limit of {}",
                            permit.in_flight_at_acquire(),
                            permit.limit_at_acquire()
                        );
                        let now_inside = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now_inside <= 2, "{now_inside} inside a limit of at most 2");
                        inside.fetch_sub(1, Ordering::SeqCst);
                        let rtt = SimDuration::from_millis(1);
                        let outcome = if thread == 0 {
                            Outcome::Dropped { rtt }
                        } else {
                            Outcome::Success { rtt }
                        };
                        shared.release(now, permit, outcome);
                        true
                    })
                })
                .collect();
            let admitted: Vec<bool> = threads.into_iter().map(|t| t.join().unwrap()).collect();
            let counters = shared.counters();
            assert_eq!(counters.in_flight, 0, "a permit was not given back");
            assert_eq!(counters.admitted + counters.rejected, 3);
            assert_eq!(counters.admitted, counters.succeeded + counters.dropped);
            // Only a place held by another thread can turn a caller away, and a limit of 1
            // needs the drop, whose call had then ended: at most one is refused.
            assert!(counters.admitted >= 2, "{counters:?}");
            // The drop lowers 2 to 1 (only the first thread drops, so the limit is 2 before);
            // a later success raises it back (in flight at admission × 2 >= 1).
            assert_eq!(counters.limit_decreases, u64::from(admitted[0]));
            assert!(counters.limit_increases <= counters.limit_decreases);
            assert_eq!(
                u64::from(counters.limit),
                2 - counters.limit_decreases + counters.limit_increases
            );
        });
    }

    /// Two threads, a limit of 1, places held until both are done, through the split check
    /// and increment: loom must find the interleaving where both see room and both are
    /// admitted, and also executions where one is turned away. The test fails if loom stops
    /// finding the counterexample.
    #[test]
    fn loom_adaptive_limit_check_then_increment_exceeds_the_limit() {
        let (executions, over_limit) = crate::sync::loom_count_executions(1, || {
            let config = AdaptiveLimitConfig::new(1, 1, 1, Algorithm::AIMD_NETFLIX).unwrap();
            let racy = Arc::new(CheckThenIncrement {
                limit: Mutex::new(AdaptiveLimit::new(config)),
            });
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let racy = racy.clone();
                    loom::thread::spawn(move || match racy.try_acquire(SimTime::ZERO) {
                        Acquire::Granted(permit) => Some(permit),
                        Acquire::Rejected => None,
                    })
                })
                .collect();
            let permits: Vec<Permit> = threads
                .into_iter()
                .filter_map(|thread| thread.join().unwrap())
                .collect();
            // No permit was released before both threads finished: these were held at once.
            let held_at_once = permits.len();
            let mut limit = lock(&racy.limit);
            let over_limit = permits
                .iter()
                .any(|permit| permit.in_flight_at_acquire() > permit.limit_at_acquire());
            assert_eq!(
                over_limit,
                held_at_once > 1,
                "the permits tell the same story"
            );
            for permit in permits {
                limit.release(SimTime::ZERO, permit, Outcome::Ignored);
            }
            held_at_once > 1
        });
        assert!(
            over_limit > 0,
            "loom found no execution over the limit in {executions} executions"
        );
        assert!(
            over_limit < executions,
            "every one of {executions} executions went over the limit"
        );
    }
}

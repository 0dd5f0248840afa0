//! Rate limiting: a token bucket and GCRA, in exact integer arithmetic, and what the limiter
//! does when its store cannot be reached.
//!
//! Both algorithms answer the same question — may a request of cost `n` pass at `now`? — with
//! [`Decision::Admit`], [`Decision::Reject`] and the exact `retry_after`, or
//! [`Decision::TooLarge`] for a cost above the bucket's capacity, which no wait can admit.
//!
//! Fixed point. A rate is `tokens` per `period`, kept as a reduced fraction ([`TokenRate`]).
//! Both algorithms count in *units*: one token is `period` units (the period in nanoseconds,
//! after reduction) and each nanosecond of refill adds `tokens` units. Every refill is then an
//! integer, so nothing is rounded until a `retry_after` is rounded up to the nanosecond, and
//! the two algorithms, which are the same algorithm written two ways, make the same decisions
//! (a property test checks them against each other and against a brute-force model).
//!
//! - [`TokenBucket`] keeps the level (`0..=capacity` tokens, in units) and the time it was last
//!   brought up to date, and refills lazily from `now`.
//! - [`Gcra`] keeps the theoretical arrival time (TAT) only. With emission interval
//!   `T = period / tokens` and burst tolerance `τ = (capacity - 1)·T`, a request of cost `n` at
//!   `t` conforms iff `max(TAT, t) + n·T - t <= τ + T`, and then `TAT = max(TAT, t) + n·T`.
//!   The bucket's level at `t` is `capacity - (TAT - t) / T`, which is why the two agree.
//!
//! Where the limiter's state lives in a store (Redis, seeds 001 and 003), a caller that cannot
//! reach it asks [`RateLimiter::on_store_unreachable`] instead, which fails open (admit,
//! unchecked and unrecorded) or closed (reject) as configured, and counts either.
//!
//! A limiter whose state lives in a store keeps one bucket per key ([`KeyedRateLimiter`]): a
//! gateway that limits each client to 20/s increments one Redis counter per client, so 1,000
//! clients at 20/s each are 1,000 buckets, not one. It holds a bucket only while it is not
//! full (a full bucket is the same as a new one), so what it holds is bounded by the keys
//! checked within one fill time, and at most by the number of keys.
//!
//! Invariants:
//! - `now` never goes backwards between calls. A `now` earlier than one already seen is
//!   treated as the latest seen ([`LatestTime`]): it refills nothing and moves nothing back.
//!   Its `retry_after` is still relative to the caller's own `now`, so that retrying at
//!   `now + retry_after` works whatever the caller's clock said;
//! - the level never exceeds `capacity`, however long the bucket idles (equivalently,
//!   `TAT <= t + capacity·T`);
//! - a rejected request changes nothing, and at `now + retry_after` (the `now` the caller
//!   passed) the same request is admitted if nothing else was admitted meanwhile (and not one
//!   nanosecond sooner);
//! - no arithmetic overflows: the config bounds `capacity × period` to 64 bits, and products
//!   of a time and a rate are taken in 128 bits.

use std::collections::BTreeMap;

use crate::config::ConfigError;
use crate::time::{LatestTime, SimDuration, SimTime};

/// A refill rate: `tokens` every `period`, exact. Stored reduced (10 per 2 s is 5 per 1 s).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenRate {
    tokens: u64,
    period_nanos: u64,
}

impl TokenRate {
    /// `tokens` tokens every `period`; both must be positive.
    pub fn new(tokens: u64, period: SimDuration) -> Result<Self, ConfigError> {
        let period_nanos = period.as_nanos();
        if tokens == 0 && period_nanos == 0 {
            return Err(ConfigError::new(
                "rate",
                "0 tokens per 0ns is undefined (the integer form of NaN): give a positive \
                 number of tokens per a period longer than zero",
            ));
        }
        if tokens == 0 {
            return Err(ConfigError::new(
                "rate",
                "must be more than zero tokens per period (a bucket that never refills admits \
                 one burst and then nothing, forever)",
            ));
        }
        if period_nanos == 0 {
            return Err(ConfigError::new(
                "rate",
                "needs a period longer than zero (tokens per 0ns is an infinite rate)",
            ));
        }
        let divisor = gcd(tokens, period_nanos);
        Ok(TokenRate {
            tokens: tokens / divisor,
            period_nanos: period_nanos / divisor,
        })
    }

    /// `tokens` tokens every second.
    pub fn per_second(tokens: u64) -> Result<Self, ConfigError> {
        TokenRate::new(tokens, SimDuration::from_secs(1))
    }

    /// `millitokens` thousandths of a token every second: the form in which the simulator
    /// keeps rates read from a scenario file (`333.5` per second is 333 500).
    pub fn per_second_milli(millitokens: u64) -> Result<Self, ConfigError> {
        TokenRate::new(millitokens, SimDuration::from_secs(1_000))
    }

    /// Tokens added every [`TokenRate::period`] (in lowest terms).
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    pub fn period(&self) -> SimDuration {
        SimDuration::from_nanos(self.period_nanos)
    }
}

/// Greatest common divisor. Euclid's loop runs at most about 93 times for 64-bit inputs.
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A validated bucket: `capacity` tokens, refilled at `rate`. Both algorithms take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketConfig {
    capacity: u64,
    rate: TokenRate,
    /// `capacity × rate.period_nanos`: a full bucket, in units. Fits in a `u64` by validation.
    full_units: u64,
}

impl BucketConfig {
    /// At most `capacity` tokens (the largest burst), refilled at `rate`.
    pub fn new(capacity: u64, rate: TokenRate) -> Result<Self, ConfigError> {
        if capacity == 0 {
            return Err(ConfigError::new(
                "capacity",
                "must be at least 1 (a bucket that holds no token rejects every request)",
            ));
        }
        let Some(full_units) = capacity.checked_mul(rate.period_nanos) else {
            return Err(ConfigError::new(
                "capacity",
                format!(
                    "must be at most {} for a rate of {} per {} (the bucket is counted in fixed \
                     point as capacity × period in nanoseconds, which must fit in 64 bits)",
                    u64::MAX / rate.period_nanos,
                    rate.tokens,
                    rate.period()
                ),
            ));
        };
        Ok(BucketConfig {
            capacity,
            rate,
            full_units,
        })
    }

    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    pub fn rate(&self) -> TokenRate {
        self.rate
    }

    /// Time for an empty bucket to fill, rounded up to the nanosecond.
    pub fn fill_time(&self) -> SimDuration {
        self.wait_for(self.full_units)
    }

    /// Time for `deficit_units` to refill, rounded up; at most the fill time, so it fits.
    fn wait_for(&self, deficit_units: u64) -> SimDuration {
        SimDuration::from_nanos(deficit_units.div_ceil(self.rate.tokens))
    }

    /// The units a request of `cost` takes, or `None` if it exceeds the capacity.
    fn cost_units(&self, cost: u64) -> Option<u64> {
        if cost > self.capacity {
            return None;
        }
        Some(
            cost.checked_mul(self.rate.period_nanos)
                .expect("cost <= capacity, and capacity × period fits"),
        )
    }
}

/// The answer to one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Admit,
    /// Not now. The same request would be admitted at `now + retry_after`, with `now` the
    /// instant the caller passed (even one earlier than the limiter has seen), if nothing else
    /// is admitted meanwhile, and not one nanosecond sooner.
    Reject {
        retry_after: SimDuration,
    },
    /// The cost exceeds the bucket's capacity: no wait would admit it.
    TooLarge,
}

/// A token bucket with lazy refill.
///
/// Call order: [`TokenBucket::try_acquire`] for each request, with `now` never going backwards.
/// It starts full.
///
/// Invariants: `level_units <= full_units`, so the level never passes `capacity` tokens;
/// the level is as of `latest`, the latest `now` seen.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    config: BucketConfig,
    /// Tokens in the bucket as of `latest`, in units (a token is `period` units).
    level_units: u64,
    latest: LatestTime,
}

impl TokenBucket {
    pub fn new(config: BucketConfig) -> Self {
        TokenBucket {
            config,
            level_units: config.full_units,
            latest: LatestTime::new(),
        }
    }

    pub fn config(&self) -> &BucketConfig {
        &self.config
    }

    /// Whole tokens available at `now`, without changing anything.
    pub fn tokens(&self, now: SimTime) -> u64 {
        self.level_at(now) / self.config.rate.period_nanos
    }

    pub fn try_acquire(&mut self, now: SimTime, cost: u64) -> Decision {
        self.level_units = self.level_at(now);
        let latest = self.latest.observe(now);
        let Some(need_units) = self.config.cost_units(cost) else {
            return Decision::TooLarge;
        };
        if self.level_units >= need_units {
            self.level_units -= need_units;
            Decision::Admit
        } else {
            let wait = self.config.wait_for(need_units - self.level_units);
            Decision::Reject {
                retry_after: retry_after_from(now, latest, wait),
            }
        }
    }

    /// The level at `now` (or at the latest instant seen, if `now` is earlier), capped at full.
    fn level_at(&self, now: SimTime) -> u64 {
        let elapsed_nanos = now.saturating_since(self.latest.get()).as_nanos();
        // At most (2^64 - 1)^2 + 2^64 - 1 < 2^128.
        let level = u128::from(self.level_units)
            + u128::from(elapsed_nanos) * u128::from(self.config.rate.tokens);
        let level = level.min(u128::from(self.config.full_units));
        u64::try_from(level).expect("capped at full_units, a u64")
    }
}

/// The `retry_after` to report to a caller whose clock said `now`, when the limiter decided at
/// `latest` (`latest >= now`; later if the caller's `now` was behind) that the request fits
/// `wait` after that: retrying at `now + retry_after` is retrying at `latest + wait`.
fn retry_after_from(now: SimTime, latest: SimTime, wait: SimDuration) -> SimDuration {
    debug_assert!(latest >= now);
    wait.saturating_add(latest.saturating_since(now))
}

/// The generic cell rate algorithm (virtual scheduling form), generalised to a cost of `n`
/// cells. See the module documentation for the rule; it is parameterised by the same
/// [`BucketConfig`] as [`TokenBucket`], with `T = period / tokens` and `τ = (capacity - 1)·T`.
///
/// Call order: [`Gcra::try_acquire`] for each request, with `now` never going backwards.
/// It starts with `TAT = 0`: a full bucket.
///
/// Invariants: time is kept scaled by `rate.tokens` (so `T` is the integer `period`);
/// `tat_scaled <= scaled(latest) + capacity·T`; `latest` is the latest `now` seen.
#[derive(Clone, Debug)]
pub struct Gcra {
    config: BucketConfig,
    /// The theoretical arrival time, in nanoseconds × `rate.tokens`.
    tat_scaled: u128,
    latest: LatestTime,
}

impl Gcra {
    pub fn new(config: BucketConfig) -> Self {
        Gcra {
            config,
            tat_scaled: 0,
            latest: LatestTime::new(),
        }
    }

    pub fn config(&self) -> &BucketConfig {
        &self.config
    }

    /// The theoretical arrival time, rounded up to the nanosecond: a request of cost 1 at or
    /// after `TAT - τ` conforms.
    pub fn theoretical_arrival(&self) -> SimTime {
        let nanos = self
            .tat_scaled
            .div_ceil(u128::from(self.config.rate.tokens));
        SimTime::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }

    /// Whole tokens available at `now`, without changing anything (the bucket's view:
    /// `capacity - (TAT - t) / T`, rounded down).
    pub fn tokens(&self, now: SimTime) -> u64 {
        let backlog = self.backlog_units(self.scaled(self.latest.at(now)));
        (self.config.full_units - backlog) / self.config.rate.period_nanos
    }

    pub fn try_acquire(&mut self, now: SimTime, cost: u64) -> Decision {
        let latest = self.latest.observe(now);
        let t = self.scaled(latest);
        let Some(need_units) = self.config.cost_units(cost) else {
            return Decision::TooLarge;
        };
        // max(TAT, t) + n·T - t, which conforms iff it is at most τ + T = capacity·T.
        let after_units = u128::from(self.backlog_units(t)) + u128::from(need_units);
        let full_units = u128::from(self.config.full_units);
        if after_units <= full_units {
            // t < 2^128 - 2^65 + 2 and after_units <= 2^64 - 1: no overflow.
            self.tat_scaled = t + after_units;
            Decision::Admit
        } else {
            let excess = u64::try_from(after_units - full_units).expect("below need_units");
            Decision::Reject {
                retry_after: retry_after_from(now, latest, self.config.wait_for(excess)),
            }
        }
    }

    /// `t` in scaled time: nanoseconds × `rate.tokens`. At most (2^64 - 1)^2.
    fn scaled(&self, t: SimTime) -> u128 {
        u128::from(t.as_nanos()) * u128::from(self.config.rate.tokens)
    }

    /// `max(TAT - t, 0)`, the bucket's emptiness in units; at most `full_units` for any
    /// `t >= scaled(latest)`.
    fn backlog_units(&self, t: u128) -> u64 {
        let backlog = self.tat_scaled.saturating_sub(t);
        u64::try_from(backlog)
            .ok()
            .filter(|&backlog| backlog <= self.config.full_units)
            .expect("TAT - t <= capacity·T")
    }
}

/// Which algorithm a [`RateLimiter`] runs. They decide identically; they differ in what they
/// store (a level and a time, or one time), which matters when the state lives in Redis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    TokenBucket,
    Gcra,
}

/// What the limiter answers when its store cannot be reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WhenStoreUnreachable {
    /// Admit unchecked; the spend is not recorded (seed 001's contract).
    FailOpen,
    /// Reject, telling the caller to come back after `retry_after`.
    FailClosed { retry_after: SimDuration },
}

/// A validated rate limiter configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimiterConfig {
    bucket: BucketConfig,
    algorithm: Algorithm,
    when_store_unreachable: WhenStoreUnreachable,
}

impl RateLimiterConfig {
    pub fn new(
        bucket: BucketConfig,
        algorithm: Algorithm,
        when_store_unreachable: WhenStoreUnreachable,
    ) -> Result<Self, ConfigError> {
        if let WhenStoreUnreachable::FailClosed { retry_after } = when_store_unreachable
            && retry_after.is_zero()
        {
            return Err(ConfigError::new(
                "fail_closed_retry_after",
                "must be longer than zero (a zero Retry-After sends clients straight back to a \
                 limiter whose store is down)",
            ));
        }
        Ok(RateLimiterConfig {
            bucket,
            algorithm,
            when_store_unreachable,
        })
    }

    pub fn bucket(&self) -> &BucketConfig {
        &self.bucket
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    pub fn when_store_unreachable(&self) -> WhenStoreUnreachable {
        self.when_store_unreachable
    }
}

/// Decisions a [`RateLimiter`] has made, by kind. `u64` counts: 584 years at one a nanosecond.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimitCounters {
    /// Admitted after a check against the store.
    pub admitted: u64,
    pub rejected: u64,
    pub too_large: u64,
    /// Admitted unchecked because the store was unreachable (fail-open).
    pub fail_open_admitted: u64,
    /// Cost of the fail-open admissions: spend the store never recorded (saturating).
    pub fail_open_cost: u64,
    /// Rejected because the store was unreachable (fail-closed).
    pub fail_closed_rejected: u64,
}

impl RateLimitCounters {
    /// Counts one checked decision (the store answered). A limiter counts its own; a caller
    /// that shares one limiter among several (instances checking one Redis counter) counts
    /// each one's decisions with this too.
    pub fn count(&mut self, decision: Decision) {
        match decision {
            Decision::Admit => self.admitted += 1,
            Decision::Reject { .. } => self.rejected += 1,
            Decision::TooLarge => self.too_large += 1,
        }
    }

    /// Counts one decision of `cost` made without the store: an admission is a fail-open, a
    /// refusal a fail-closed one.
    pub fn count_unreachable(&mut self, decision: Decision, cost: u64) {
        match decision {
            Decision::Admit => {
                self.fail_open_admitted += 1;
                self.fail_open_cost = self.fail_open_cost.saturating_add(cost);
            }
            Decision::Reject { .. } | Decision::TooLarge => self.fail_closed_rejected += 1,
        }
    }
}

#[derive(Clone, Debug)]
enum Limiter {
    TokenBucket(TokenBucket),
    Gcra(Gcra),
}

/// A rate limiter: one algorithm, the store-unreachable policy, and counters.
///
/// Call order: for each request, [`RateLimiter::try_acquire`] if the store answered (its
/// `now` is when the store evaluated it), or [`RateLimiter::on_store_unreachable`] if it did
/// not. The unreachable path leaves the bucket untouched: a fail-open request is neither
/// checked nor charged.
///
/// Invariants: those of the algorithm; every call increments exactly one decision counter.
#[derive(Clone, Debug)]
pub struct RateLimiter {
    config: RateLimiterConfig,
    limiter: Limiter,
    counters: RateLimitCounters,
}

impl RateLimiter {
    pub fn new(config: RateLimiterConfig) -> Self {
        RateLimiter {
            limiter: Limiter::new(&config),
            config,
            counters: RateLimitCounters::default(),
        }
    }

    pub fn config(&self) -> &RateLimiterConfig {
        &self.config
    }

    pub fn counters(&self) -> RateLimitCounters {
        self.counters
    }

    /// Whole tokens available at `now`, without changing anything.
    pub fn tokens(&self, now: SimTime) -> u64 {
        match &self.limiter {
            Limiter::TokenBucket(bucket) => bucket.tokens(now),
            Limiter::Gcra(gcra) => gcra.tokens(now),
        }
    }

    /// Checks a request of `cost` against the bucket and charges it if admitted.
    pub fn try_acquire(&mut self, now: SimTime, cost: u64) -> Decision {
        let decision = self.limiter.try_acquire(now, cost);
        self.counters.count(decision);
        decision
    }

    /// The store could not be reached for a request of `cost`: answers per
    /// [`WhenStoreUnreachable`] without touching the bucket.
    pub fn on_store_unreachable(&mut self, cost: u64) -> Decision {
        unreachable_decision(&self.config, &mut self.counters, cost)
    }
}

impl Limiter {
    fn new(config: &RateLimiterConfig) -> Limiter {
        match config.algorithm {
            Algorithm::TokenBucket => Limiter::TokenBucket(TokenBucket::new(config.bucket)),
            Algorithm::Gcra => Limiter::Gcra(Gcra::new(config.bucket)),
        }
    }

    fn try_acquire(&mut self, now: SimTime, cost: u64) -> Decision {
        match self {
            Limiter::TokenBucket(bucket) => bucket.try_acquire(now, cost),
            Limiter::Gcra(gcra) => gcra.try_acquire(now, cost),
        }
    }

    /// Whether the bucket is full at `now` (no later than the latest instant it has seen, or
    /// later): then it decides every later request as a new bucket would.
    fn is_full(&self, now: SimTime) -> bool {
        match self {
            Limiter::TokenBucket(bucket) => bucket.level_at(now) == bucket.config.full_units,
            Limiter::Gcra(gcra) => gcra.backlog_units(gcra.scaled(gcra.latest.at(now))) == 0,
        }
    }
}

/// Keys held before the first sweep of full buckets; later sweeps wait for twice as many as
/// the previous sweep kept, so sweeping costs O(1) a request, amortised.
const SWEEP_KEYS_MIN: usize = 1_024;

/// A rate limiter with one bucket per key, all of one configuration, counted together: the
/// limiter of a store that keeps a counter per key (a Redis `INCR` on `ratelimit:<client>`).
///
/// Call order: as [`RateLimiter`], with the request's key: [`KeyedRateLimiter::try_acquire`]
/// if the store answered, [`KeyedRateLimiter::on_store_unreachable`] if it did not (which
/// touches no bucket, so it takes no key).
///
/// Invariants: a key's bucket is created full on its first check, and dropped once full again
/// (a sweep, when the number held doubles since the last): so the buckets held are at most the
/// keys checked since their fill time plus the keys of the last sweep, never more than the keys
/// checked at all. Iteration is in key order (a `BTreeMap`), so a run is deterministic. Time
/// is the limiter's latest `now` for every bucket, so a bucket created late never starts
/// earlier than one swept.
#[derive(Clone, Debug)]
pub struct KeyedRateLimiter {
    config: RateLimiterConfig,
    buckets: BTreeMap<u64, Limiter>,
    counters: RateLimitCounters,
    latest: LatestTime,
    /// The number of buckets held at which full ones are next swept out.
    sweep_at: usize,
}

impl KeyedRateLimiter {
    /// Bytes one key's bucket takes in the map, at most: a B-tree node is at least half full,
    /// so an entry takes at most twice its size, plus a pointer of the node's.
    pub const BYTES_PER_KEY: u64 =
        2 * (std::mem::size_of::<u64>() + std::mem::size_of::<Limiter>()) as u64 + 8;

    pub fn new(config: RateLimiterConfig) -> Self {
        KeyedRateLimiter {
            config,
            buckets: BTreeMap::new(),
            counters: RateLimitCounters::default(),
            latest: LatestTime::new(),
            sweep_at: SWEEP_KEYS_MIN,
        }
    }

    /// As [`KeyedRateLimiter::new`], sweeping from `sweep_at` buckets on (tests sweep often).
    #[cfg(test)]
    fn sweeping_from(config: RateLimiterConfig, sweep_at: usize) -> Self {
        KeyedRateLimiter {
            sweep_at,
            ..KeyedRateLimiter::new(config)
        }
    }

    pub fn config(&self) -> &RateLimiterConfig {
        &self.config
    }

    /// Every key's decisions, summed.
    pub fn counters(&self) -> RateLimitCounters {
        self.counters
    }

    /// The buckets held now (keys checked and not yet full again, swept or not).
    pub fn keys_held(&self) -> usize {
        self.buckets.len()
    }

    /// What the buckets take, at most ([`KeyedRateLimiter::BYTES_PER_KEY`] each).
    pub fn memory_bytes(&self) -> u64 {
        self.buckets.len() as u64 * Self::BYTES_PER_KEY
    }

    /// Whole tokens in `key`'s bucket at `now`, without changing anything.
    pub fn tokens(&self, now: SimTime, key: u64) -> u64 {
        let at = self.latest.at(now);
        match self.buckets.get(&key) {
            Some(Limiter::TokenBucket(bucket)) => bucket.tokens(at),
            Some(Limiter::Gcra(gcra)) => gcra.tokens(at),
            None => self.config.bucket.capacity,
        }
    }

    /// Checks a request of `cost` against `key`'s bucket and charges it if admitted.
    pub fn try_acquire(&mut self, now: SimTime, key: u64, cost: u64) -> Decision {
        let at = self.latest.observe(now);
        if self.buckets.len() >= self.sweep_at && !self.buckets.contains_key(&key) {
            self.buckets.retain(|_, bucket| !bucket.is_full(at));
            self.sweep_at = (2 * self.buckets.len()).max(self.sweep_at.min(SWEEP_KEYS_MIN));
        }
        let config = &self.config;
        let bucket = self
            .buckets
            .entry(key)
            .or_insert_with(|| Limiter::new(config));
        let decision = match bucket.try_acquire(at, cost) {
            Decision::Reject { retry_after } => Decision::Reject {
                retry_after: retry_after_from(now, at, retry_after),
            },
            decision => decision,
        };
        self.counters.count(decision);
        decision
    }

    /// The store could not be reached for a request of `cost`: answers per
    /// [`WhenStoreUnreachable`] without touching any bucket.
    pub fn on_store_unreachable(&mut self, cost: u64) -> Decision {
        unreachable_decision(&self.config, &mut self.counters, cost)
    }
}

/// What a limiter configured as `config` answers for a store it could not reach, counted.
fn unreachable_decision(
    config: &RateLimiterConfig,
    counters: &mut RateLimitCounters,
    cost: u64,
) -> Decision {
    let decision = match config.when_store_unreachable {
        WhenStoreUnreachable::FailOpen => Decision::Admit,
        WhenStoreUnreachable::FailClosed { retry_after } => Decision::Reject { retry_after },
    };
    counters.count_unreachable(decision, cost);
    decision
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    fn ns(nanos: u64) -> SimTime {
        SimTime::from_nanos(nanos)
    }

    fn reject(retry_after: SimDuration) -> Decision {
        Decision::Reject { retry_after }
    }

    fn bucket(capacity: u64, tokens: u64, period: SimDuration) -> BucketConfig {
        BucketConfig::new(capacity, TokenRate::new(tokens, period).unwrap()).unwrap()
    }

    /// Both algorithms, driven in lockstep; every decision and level must match.
    struct Both {
        bucket: TokenBucket,
        gcra: Gcra,
    }

    impl Both {
        fn new(config: BucketConfig) -> Self {
            Both {
                bucket: TokenBucket::new(config),
                gcra: Gcra::new(config),
            }
        }

        fn try_acquire(&mut self, now: SimTime, cost: u64) -> Decision {
            let decision = self.bucket.try_acquire(now, cost);
            assert_eq!(
                self.gcra.try_acquire(now, cost),
                decision,
                "GCRA and token bucket disagree at {now} for cost {cost}"
            );
            assert_eq!(self.gcra.tokens(now), self.bucket.tokens(now));
            decision
        }
    }

    /// Runs `(time, cost, expected)` steps on both algorithms.
    fn check(config: BucketConfig, steps: &[(SimTime, u64, Decision)]) {
        let mut both = Both::new(config);
        for &(now, cost, expected) in steps {
            assert_eq!(
                both.try_acquire(now, cost),
                expected,
                "at {now}, cost {cost}"
            );
        }
    }

    fn keyed(capacity: u64, per_second: u64, algorithm: Algorithm) -> KeyedRateLimiter {
        let bucket = bucket(capacity, per_second, SimDuration::from_secs(1));
        let when = WhenStoreUnreachable::FailOpen;
        KeyedRateLimiter::new(RateLimiterConfig::new(bucket, algorithm, when).unwrap())
    }

    #[test]
    fn each_key_has_its_own_bucket() {
        // 2 tokens, 1 a second, per key: two keys admit two each at 0, and refuse a third each.
        for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
            let mut limiter = keyed(2, 1, algorithm);
            for key in [7, 9, 7, 9] {
                assert_eq!(limiter.try_acquire(ms(0), key, 1), Decision::Admit);
            }
            for key in [7, 9] {
                let refused = limiter.try_acquire(ms(0), key, 1);
                assert_eq!(refused, reject(SimDuration::from_secs(1)), "{algorithm:?}");
            }
            assert_eq!(limiter.tokens(ms(0), 7), 0);
            assert_eq!(limiter.tokens(ms(0), 8), 2, "a key never checked is full");
            let counters = limiter.counters();
            assert_eq!((counters.admitted, counters.rejected), (4, 2));
            assert_eq!(limiter.keys_held(), 2);
        }
    }

    #[test]
    fn full_buckets_are_swept_so_what_is_held_stays_bounded() {
        // 100,000 keys checked once each, one every millisecond, on buckets of 1 token a
        // second: a bucket is full again 1 s after its check, so at most about 1,000 are not
        // full at a time, and a sweep keeps those. Without sweeps it would hold 100,000.
        let mut limiter = keyed(1, 1, Algorithm::TokenBucket);
        let mut held_max = 0;
        for key in 0..100_000u64 {
            assert_eq!(limiter.try_acquire(ms(key), key, 1), Decision::Admit);
            held_max = held_max.max(limiter.keys_held());
        }
        assert!(held_max <= 2 * 1_001 + 1, "held up to {held_max} buckets");
        assert_eq!(
            limiter.memory_bytes(),
            limiter.keys_held() as u64 * KeyedRateLimiter::BYTES_PER_KEY
        );
        // A swept key starts full again: admitted, once.
        assert_eq!(limiter.try_acquire(ms(100_000), 0, 1), Decision::Admit);
        assert_eq!(
            limiter.try_acquire(ms(100_000), 0, 1),
            reject(SimDuration::from_secs(1))
        );
    }

    #[test]
    fn a_late_caller_on_a_new_key_is_checked_at_the_latest_instant() {
        // Key 1 checked at 5 s; key 2 first checked by a caller whose clock says 1 s: its
        // bucket starts at 5 s, and its retry_after counts from the caller's 1 s.
        let mut limiter = keyed(1, 1, Algorithm::Gcra);
        assert_eq!(limiter.try_acquire(ms(5_000), 1, 1), Decision::Admit);
        assert_eq!(limiter.try_acquire(ms(1_000), 2, 1), Decision::Admit);
        let refused = limiter.try_acquire(ms(1_000), 2, 1);
        assert_eq!(refused, reject(SimDuration::from_secs(5)));
    }

    #[test]
    fn a_burst_of_capacity_is_admitted_then_rejected_until_one_interval_refills() {
        // 5 tokens, 10 per second: one token every 100 ms.
        let config = bucket(5, 10, SimDuration::from_secs(1));
        let mut steps = vec![(ms(0), 1, Decision::Admit); 5];
        steps.extend([
            (ms(0), 1, reject(SimDuration::from_millis(100))),
            (ms(40), 1, reject(SimDuration::from_millis(60))),
            (
                SimTime::from_nanos(99_999_999),
                1,
                reject(SimDuration::from_nanos(1)),
            ),
            (ms(100), 1, Decision::Admit),
            (ms(100), 1, reject(SimDuration::from_millis(100))),
        ]);
        check(config, &steps);
    }

    #[test]
    fn retry_after_is_exact_for_a_cost_of_several_tokens_at_a_fractional_interval() {
        // 3 tokens per second: an interval of 333_333_333⅓ ns.
        let config = bucket(4, 3, SimDuration::from_secs(1));
        check(
            config,
            &[
                (ms(0), 4, Decision::Admit),
                // Two tokens take 666_666_666⅔ ns: rounded up.
                (ms(0), 2, reject(SimDuration::from_nanos(666_666_667))),
                (ns(666_666_666), 2, reject(SimDuration::from_nanos(1))),
                (ns(666_666_667), 2, Decision::Admit),
                // ⅓ ns of refill is carried, not lost: 1 token is due at 1_000_000_000.
                (
                    ns(666_666_667),
                    1,
                    reject(SimDuration::from_nanos(333_333_333)),
                ),
                (ns(1_000_000_000), 1, Decision::Admit),
            ],
        );
    }

    #[test]
    fn a_cost_above_capacity_is_too_large_and_a_zero_cost_always_passes() {
        let config = bucket(3, 1, SimDuration::from_secs(1));
        check(
            config,
            &[
                (ms(0), 4, Decision::TooLarge),
                (ms(0), 3, Decision::Admit),
                (ms(0), 0, Decision::Admit),
                (ms(0), 4, Decision::TooLarge),
                (ms(0), 1, reject(SimDuration::from_secs(1))),
            ],
        );
    }

    #[test]
    fn idle_time_never_fills_beyond_capacity() {
        // The fastest rate and the longest idle: the product needs 128 bits, the level stays 3.
        let config = bucket(3, u64::MAX, SimDuration::from_nanos(1));
        let mut both = Both::new(config);
        assert_eq!(both.try_acquire(ms(0), 3), Decision::Admit);
        let end = SimTime::MAX;
        assert_eq!(both.bucket.tokens(end), 3);
        for _ in 0..3 {
            assert_eq!(both.try_acquire(end, 1), Decision::Admit);
        }
        // Even at u64::MAX tokens per nanosecond, time cannot advance past the end.
        assert_eq!(both.try_acquire(end, 1), reject(SimDuration::from_nanos(1)));
        assert_eq!(both.gcra.theoretical_arrival(), SimTime::MAX);
    }

    #[test]
    fn time_going_backwards_refills_nothing() {
        let config = bucket(2, 1, SimDuration::from_millis(10));
        check(
            config,
            &[
                (ms(100), 2, Decision::Admit),
                (ms(105), 1, reject(SimDuration::from_millis(5))),
                // An earlier `now` counts as the latest seen (105 ms), not as a rewind; the
                // request fits at 110 ms, which is `retry_after` from the caller's own `now`.
                (ms(50), 1, reject(SimDuration::from_millis(60))),
                (ms(0), 1, reject(SimDuration::from_millis(110))),
                (ms(110), 1, Decision::Admit),
            ],
        );
    }

    #[test]
    fn the_refill_phase_follows_the_last_take_not_multiples_of_the_interval() {
        // One token every 10 ns. A token taken at 5 ns from a full bucket is back at 15 ns, not
        // at 10 ns: refill is continuous, and a full bucket wastes what would overflow it. A
        // model that adds a whole token at each multiple of the interval would admit at 10 ns.
        let config = bucket(1, 1, SimDuration::from_nanos(10));
        check(
            config,
            &[
                (ns(5), 1, Decision::Admit),
                (ns(10), 1, reject(SimDuration::from_nanos(5))),
                (ns(15), 1, Decision::Admit),
            ],
        );
    }

    #[test]
    fn evenly_spaced_arrivals_above_the_rate_settle_into_one_admit_in_two() {
        // 10 per second, capacity 3; arrivals every 50 ms (20 per second).
        let config = bucket(3, 10, SimDuration::from_secs(1));
        let mut both = Both::new(config);
        let admitted: Vec<bool> = (0..20)
            .map(|i| both.try_acquire(ms(50 * i), 1) == Decision::Admit)
            .collect();
        // The first 5 ride on the 3 in the bucket plus the 2 refilled meanwhile; then every
        // other one, since two arrivals come per refilled token.
        let expected: Vec<bool> = (0..20).map(|i| i < 5 || i % 2 == 0).collect();
        assert_eq!(admitted, expected);
    }

    #[test]
    fn bursty_arrivals_get_one_capacity_per_burst_plus_the_refill_between() {
        // Bursts of 8 every 500 ms against 4 tokens at 4 per second: the first burst gets the
        // 4 in the bucket, each later one the 2 refilled in 500 ms.
        let config = bucket(4, 4, SimDuration::from_secs(1));
        let mut both = Both::new(config);
        let admitted_per_burst: Vec<usize> = (0..4)
            .map(|burst| {
                (0..8)
                    .filter(|_| both.try_acquire(ms(500 * burst), 1) == Decision::Admit)
                    .count()
            })
            .collect();
        assert_eq!(admitted_per_burst, vec![4, 2, 2, 2]);
    }

    #[test]
    fn rates_are_kept_exact_and_reduced() {
        let rate = TokenRate::new(10, SimDuration::from_secs(2)).unwrap();
        assert_eq!(
            (rate.tokens(), rate.period()),
            (1, SimDuration::from_millis(200))
        );
        let rate = TokenRate::per_second_milli(333_500).unwrap();
        assert_eq!(
            (rate.tokens(), rate.period()),
            (667, SimDuration::from_secs(2))
        );
        assert_eq!(
            bucket(2, 3, SimDuration::from_secs(1)).fill_time(),
            SimDuration::from_nanos(666_666_667)
        );
    }

    #[test]
    fn rejected_configs_say_which_field_and_why() {
        let second = SimDuration::from_secs(1);
        let cases = [
            (
                1,
                0,
                second,
                "rate: must be more than zero tokens per period",
            ),
            (
                1,
                5,
                SimDuration::ZERO,
                "rate: needs a period longer than zero",
            ),
            (
                1,
                0,
                SimDuration::ZERO,
                "rate: 0 tokens per 0ns is undefined",
            ),
            (0, 5, second, "capacity: must be at least 1"),
            // 2^64 / 10^9 is about 1.8 × 10^10 tokens at one per second.
            (
                u64::MAX / 1_000_000_000 + 1,
                1,
                second,
                "capacity: must be at most 18446744073 for a rate of 1 per 1s",
            ),
            (
                u64::MAX,
                1,
                SimDuration::from_nanos(2),
                "capacity: must be at most 9223372036854775807",
            ),
        ];
        for (capacity, tokens, period, expected) in cases {
            let error = TokenRate::new(tokens, period)
                .and_then(|rate| BucketConfig::new(capacity, rate))
                .unwrap_err();
            assert!(error.to_string().starts_with(expected), "{error}");
        }
        // The largest bucket that fits is accepted, and reduction can make one fit.
        assert!(
            BucketConfig::new(u64::MAX / 1_000_000_000, TokenRate::per_second(1).unwrap()).is_ok()
        );
        assert!(BucketConfig::new(u64::MAX, TokenRate::per_second(1_000_000_000).unwrap()).is_ok());

        let error = RateLimiterConfig::new(
            bucket(1, 1, second),
            Algorithm::Gcra,
            WhenStoreUnreachable::FailClosed {
                retry_after: SimDuration::ZERO,
            },
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("fail_closed_retry_after: must be longer than zero"),
            "{error}"
        );
    }

    fn limiter(algorithm: Algorithm, when: WhenStoreUnreachable) -> RateLimiter {
        let config = bucket(2, 1, SimDuration::from_secs(1));
        RateLimiter::new(RateLimiterConfig::new(config, algorithm, when).unwrap())
    }

    #[test]
    fn an_unreachable_store_fails_open_unchecked_and_counted() {
        for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
            let mut l = limiter(algorithm, WhenStoreUnreachable::FailOpen);
            assert_eq!(l.try_acquire(ms(0), 2), Decision::Admit);
            // Redis is down: everything passes, even past the bucket, and nothing is charged.
            for _ in 0..3 {
                assert_eq!(l.on_store_unreachable(2), Decision::Admit);
            }
            // Redis is back: the bucket is where the last checked request left it.
            assert_eq!(
                l.try_acquire(ms(500), 1),
                reject(SimDuration::from_millis(500))
            );
            assert_eq!(l.tokens(ms(1000)), 1);
            assert_eq!(
                l.counters(),
                RateLimitCounters {
                    admitted: 1,
                    rejected: 1,
                    fail_open_admitted: 3,
                    fail_open_cost: 6,
                    ..RateLimitCounters::default()
                }
            );
        }
    }

    #[test]
    fn an_unreachable_store_fails_closed_with_the_configured_retry_after() {
        let when = WhenStoreUnreachable::FailClosed {
            retry_after: SimDuration::from_secs(1),
        };
        let mut l = limiter(Algorithm::TokenBucket, when);
        assert_eq!(l.on_store_unreachable(1), reject(SimDuration::from_secs(1)));
        assert_eq!(l.try_acquire(ms(0), 3), Decision::TooLarge);
        assert_eq!(l.tokens(ms(0)), 2, "the failed-closed request took nothing");
        assert_eq!(
            l.counters(),
            RateLimitCounters {
                too_large: 1,
                fail_closed_rejected: 1,
                ..RateLimitCounters::default()
            }
        );
    }

    #[test]
    fn a_callers_own_tally_of_the_decisions_is_the_limiters_count() {
        // Two callers sharing one limiter (two instances, one Redis counter) each count their
        // own decisions; together they are the limiter's counters.
        let mut l = KeyedRateLimiter::new(
            RateLimiterConfig::new(
                bucket(2, 1, SimDuration::from_secs(1)),
                Algorithm::TokenBucket,
                WhenStoreUnreachable::FailOpen,
            )
            .unwrap(),
        );
        let mut tallies = [RateLimitCounters::default(); 2];
        for (caller, cost) in [(0, 1), (1, 1), (0, 1), (1, 3)] {
            tallies[caller].count(l.try_acquire(ms(0), 7, cost));
        }
        tallies[1].count_unreachable(l.on_store_unreachable(4), 4);
        assert_eq!(
            (tallies[0], tallies[1]),
            (
                RateLimitCounters {
                    admitted: 1,
                    rejected: 1,
                    ..RateLimitCounters::default()
                },
                RateLimitCounters {
                    admitted: 1,
                    too_large: 1,
                    fail_open_admitted: 1,
                    fail_open_cost: 4,
                    ..RateLimitCounters::default()
                }
            )
        );
        let sum = RateLimitCounters {
            admitted: 2,
            rejected: 1,
            too_large: 1,
            fail_open_admitted: 1,
            fail_open_cost: 4,
            fail_closed_rejected: 0,
        };
        assert_eq!(l.counters(), sum);
    }

    /// The reference: tick one nanosecond at a time, adding `tokens` units per tick up to
    /// `capacity × period` units, and find `retry_after` by ticking a copy forward until the
    /// request fits. No division, no lazy refill, no reduced rate.
    #[derive(Clone)]
    struct Ticking {
        capacity: u64,
        units_per_token: u64,
        units_per_nanosecond: u64,
        level_units: u64,
        now_nanos: u64,
    }

    impl Ticking {
        fn tick(&mut self) {
            self.now_nanos += 1;
            self.level_units = (self.level_units + self.units_per_nanosecond)
                .min(self.capacity * self.units_per_token);
        }

        fn try_acquire(&mut self, now_nanos: u64, cost: u64) -> Decision {
            while self.now_nanos < now_nanos {
                self.tick();
            }
            if cost > self.capacity {
                return Decision::TooLarge;
            }
            let need = cost * self.units_per_token;
            if self.level_units >= need {
                self.level_units -= need;
                return Decision::Admit;
            }
            let mut future = self.clone();
            while future.level_units < need {
                future.tick();
            }
            reject(SimDuration::from_nanos(future.now_nanos - self.now_nanos))
        }
    }

    proptest! {
        /// Small parameters, every nanosecond ticked: both algorithms make every decision of
        /// the brute-force model, `retry_after` included.
        #[test]
        fn both_algorithms_match_a_ticking_reference(
            capacity in 1u64..=6,
            tokens in 1u64..=4,
            period_nanos in 1u64..=40,
            steps in prop::collection::vec((0u64..=60, 0u64..=8), 1..60),
        ) {
            let config = bucket(capacity, tokens, SimDuration::from_nanos(period_nanos));
            let mut both = Both::new(config);
            let mut reference = Ticking {
                capacity,
                units_per_token: period_nanos,
                units_per_nanosecond: tokens,
                level_units: capacity * period_nanos,
                now_nanos: 0,
            };
            let mut now = 0;
            for (step, cost) in steps {
                now += step;
                let expected = reference.try_acquire(now, cost);
                prop_assert_eq!(both.try_acquire(ns(now), cost), expected, "at {}ns", now);
            }
        }

        /// A keyed limiter decides each key as a limiter of its own would, whatever the other
        /// keys do and however often full buckets are swept.
        #[test]
        fn a_keyed_limiter_decides_each_key_as_its_own_limiter(
            capacity in 1u64..=5,
            per_second in 1u64..=50,
            steps in prop::collection::vec((0u64..=200, 0u64..30, 1u64..=3), 1..400),
        ) {
            let config = RateLimiterConfig::new(
                bucket(capacity, per_second, SimDuration::from_secs(1)),
                Algorithm::TokenBucket,
                WhenStoreUnreachable::FailOpen,
            )
            .unwrap();
            let mut keyed = KeyedRateLimiter::sweeping_from(config, 4);
            let mut alone: BTreeMap<u64, RateLimiter> = BTreeMap::new();
            let mut now = 0;
            for (step_ms, key, cost) in steps {
                now += step_ms;
                let own = alone.entry(key).or_insert_with(|| RateLimiter::new(config));
                prop_assert_eq!(
                    keyed.try_acquire(ms(now), key, cost),
                    own.try_acquire(ms(now), cost),
                    "key {} at {} ms", key, now
                );
            }
        }

        /// Wide parameters, including time going backwards: the algorithms agree, and every
        /// `retry_after` is exact (admitted then, rejected one nanosecond before).
        #[test]
        fn the_algorithms_agree_and_retry_after_is_exact_at_any_scale(
            capacity in 1u64..=1_000_000,
            tokens in 1u64..=1_000_000_000,
            period_nanos in 1u64..=1_000_000_000_000,
            steps in prop::collection::vec((-1_000i64..=10_000_000_000, any::<u64>()), 1..40),
        ) {
            let rate = TokenRate::new(tokens, SimDuration::from_nanos(period_nanos)).unwrap();
            let config = BucketConfig::new(capacity, rate);
            prop_assume!(config.is_ok());
            let mut both = Both::new(config.unwrap());
            let mut now: u64 = 0;
            for (step, cost) in steps {
                now = now.saturating_add_signed(step);
                // Up to one more than the capacity, so that `TooLarge` comes up too.
                let cost = cost % (capacity + 2);
                let before = both.bucket.clone();
                let decision = both.try_acquire(ns(now), cost);
                if let Decision::Reject { retry_after } = decision {
                    // Relative to the caller's `now`, even when it was behind the bucket's.
                    let at = now + retry_after.as_nanos();
                    prop_assert_eq!(before.clone().try_acquire(ns(at), cost), Decision::Admit);
                    prop_assert_ne!(before.clone().try_acquire(ns(at - 1), cost), Decision::Admit);
                }
            }
        }
    }
}

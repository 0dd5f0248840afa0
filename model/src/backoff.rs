//! Exponential (or Fibonacci) backoff with a ceiling and a choice of jitter.
//!
//! Without jitter, the delay after the n-th failure (n = 1, 2, ...) is
//! `min(ceiling, base · factor^(n-1))`: seed 001's reconnect backoff is a base of 100 ms, a
//! factor of 2 and a ceiling of 5 s, so 100 ms, 200 ms, 400 ms, ..., 3.2 s, 5 s, 5 s, ...
//!
//! The factor is an exact rational in thousandths (`factor_permille`, 2000 = doubling). Each
//! step multiplies the previous delay by `factor_permille / 1000` and rounds *up* to a whole
//! nanosecond, so the sequence is exactly `base · factor^(n-1)` whenever that is a whole
//! number of nanoseconds (always, for whole factors such as 2000) and never stalls below the
//! ceiling: any factor above 1000 permille grows every delay by at least one nanosecond.
//!
//! With [`Growth::Fibonacci`] (the `backon` crate's `FibonacciBackoff`) each delay is the sum of
//! the two before it, capped at the ceiling: `base, base, 2·base, 3·base, 5·base, ...`; the
//! factor is then one (a config refuses another).
//!
//! Jitter follows the AWS Architecture Blog's "Exponential Backoff and Jitter", with `d` the
//! delay above:
//!
//! | [`Jitter`] | delay |
//! |---|---|
//! | `None` | `d` |
//! | `Full` | uniform in `[0, d]` |
//! | `Equal` | `d - d/2` plus uniform in `[0, d/2]` (`d/2` rounded down), so in `[d - d/2, d]` |
//! | `Decorrelated` | `min(ceiling, uniform in [base, 3 · previous delay])`, the first previous delay being `base`; the factor is not used |
//! | `Proportional` | uniform in `[d - δ, d + δ]` with `δ = ⌊d · randomization_permille / 1000⌋` (the `backoff` crate's randomization factor, and most clients'); it may pass the ceiling by up to `δ`, as there: the ceiling caps `d`, not the jittered delay |
//!
//! Randomness comes only from the [`RandomBits`] the caller passes in: `Jitter::None` draws
//! nothing, every other kind draws exactly one 64-bit word per delay, so a seeded run replays.
//! Time is integer nanoseconds throughout; every product is taken in `u128` and clamped to the
//! ceiling, so no attempt number (up to `u32::MAX`) overflows.

use crate::config::ConfigError;
use crate::random::{RandomBits, below};
use crate::time::SimDuration;

/// `factor_permille` of a factor of one: the delay stays at `base`.
pub const FACTOR_PERMILLE_ONE: u32 = 1000;

/// How a delay is randomised. See the module documentation for the formulas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Jitter {
    /// The exponential delay itself.
    None,
    /// Uniform in `[0, d]`.
    Full,
    /// Uniform in `[d - d/2, d]`.
    Equal,
    /// `min(ceiling, uniform in [base, 3 · previous delay])`.
    Decorrelated,
    /// Uniform in `[d - δ, d + δ]`, `δ = ⌊d · randomization_permille / 1000⌋`; at most 1000
    /// (δ = d).
    Proportional { randomization_permille: u32 },
}

/// How the delay grows from one failure to the next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Growth {
    /// Each delay is the one before times `factor_permille / 1000`, rounded up.
    #[default]
    Exponential,
    /// Each delay is the sum of the two before it (the first two are `base`).
    Fibonacci,
}

/// The largest randomization factor, in thousandths: the delay ranges over `[0, 2d]`.
pub const RANDOMIZATION_PERMILLE_MAX: u32 = 1000;

/// A validated backoff configuration.
///
/// Invariants: `base > 0`, `factor_permille >= 1000`, `base <= ceiling`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackoffConfig {
    base: SimDuration,
    factor_permille: u32,
    ceiling: SimDuration,
    jitter: Jitter,
    growth: Growth,
}

impl BackoffConfig {
    /// The first delay is `base`; each next one is `factor_permille / 1000` times the one
    /// before, up to `ceiling`; `jitter` randomises each delay.
    pub fn new(
        base: SimDuration,
        factor_permille: u32,
        ceiling: SimDuration,
        jitter: Jitter,
    ) -> Result<Self, ConfigError> {
        if base.is_zero() {
            return Err(ConfigError::new(
                "base",
                "must be longer than zero (a zero delay never grows and retries in a tight loop)",
            ));
        }
        if factor_permille < FACTOR_PERMILLE_ONE {
            return Err(ConfigError::new(
                "factor_permille",
                format!(
                    "must be at least 1000 (a factor of 1); {factor_permille} would shrink \
                     the delay after every failure"
                ),
            ));
        }
        if let Jitter::Proportional {
            randomization_permille,
        } = jitter
            && randomization_permille > RANDOMIZATION_PERMILLE_MAX
        {
            return Err(ConfigError::new(
                "randomization_permille",
                format!(
                    "must be at most 1 (delays from 0 to twice the wait), not {}.{:03}: a \
                     larger factor would make negative delays",
                    randomization_permille / 1000,
                    randomization_permille % 1000
                ),
            ));
        }
        if ceiling < base {
            return Err(ConfigError::new(
                "ceiling",
                format!("must be at least the base ({base}): it caps delays that start there"),
            ));
        }
        Ok(BackoffConfig {
            base,
            factor_permille,
            ceiling,
            jitter,
            growth: Growth::Exponential,
        })
    }

    /// The same config growing by `growth`. [`Growth::Fibonacci`] needs a factor of one: its
    /// delays are sums, not products.
    pub fn with_growth(self, growth: Growth) -> Result<Self, ConfigError> {
        if growth == Growth::Fibonacci && self.factor_permille != FACTOR_PERMILLE_ONE {
            return Err(ConfigError::new(
                "factor_permille",
                "a Fibonacci backoff has no factor: each delay is the sum of the two before it",
            ));
        }
        Ok(BackoffConfig { growth, ..self })
    }

    pub fn growth(&self) -> Growth {
        self.growth
    }

    pub fn base(&self) -> SimDuration {
        self.base
    }

    pub fn factor_permille(&self) -> u32 {
        self.factor_permille
    }

    pub fn ceiling(&self) -> SimDuration {
        self.ceiling
    }

    pub fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The longest delay [`Backoff::next_delay`] returns: the ceiling, plus its `δ` under
    /// [`Jitter::Proportional`].
    pub fn delay_max(&self) -> SimDuration {
        match self.jitter {
            Jitter::Proportional {
                randomization_permille,
            } => {
                let ceiling = self.ceiling.as_nanos();
                SimDuration::from_nanos(
                    ceiling.saturating_add(spread(ceiling, randomization_permille)),
                )
            }
            Jitter::None | Jitter::Full | Jitter::Equal | Jitter::Decorrelated => self.ceiling,
        }
    }

    /// The delay after failure number `attempt` (1-based) before jitter:
    /// `min(ceiling, base · factor^(attempt-1))`, each step rounded up to a nanosecond.
    /// `attempt = 0` is treated as 1.
    ///
    /// Cost: one multiplication per step until the ceiling is reached, whatever `attempt` is.
    /// That is at most 64 steps for doubling, and at most [`GROWTH_STEPS_MAX`] for the slowest
    /// valid factor (1001 permille from 1 ns to a ceiling of `u64::MAX` ns).
    pub fn delay_unjittered(&self, attempt: u32) -> SimDuration {
        let (mut previous, mut delay) = (SimDuration::ZERO, self.base);
        for _ in 1..attempt {
            let next = self.next_unjittered(previous, delay);
            if next == delay && (self.growth == Growth::Exponential || previous == delay) {
                // At the ceiling, or a factor of exactly one: nothing changes any more.
                break;
            }
            (previous, delay) = (delay, next);
        }
        delay
    }

    /// The unjittered delay after `delay`, whose own predecessor was `previous` (zero before
    /// the first): one step of the growth, capped at the ceiling. A Fibonacci step at least
    /// doubles the delay every two steps, so it reaches any ceiling within 128 steps.
    fn next_unjittered(&self, previous: SimDuration, delay: SimDuration) -> SimDuration {
        match self.growth {
            Growth::Exponential => self.grow(delay),
            Growth::Fibonacci => previous.saturating_add(delay).min(self.ceiling),
        }
    }

    /// One step: `ceil(delay · factor_permille / 1000)`, capped at the ceiling. Strictly
    /// greater than `delay` below the ceiling whenever `factor_permille > 1000`.
    pub(crate) fn grow(&self, delay: SimDuration) -> SimDuration {
        if delay >= self.ceiling {
            return self.ceiling;
        }
        let product = u128::from(delay.as_nanos()) * u128::from(self.factor_permille);
        let grown = product.div_ceil(u128::from(FACTOR_PERMILLE_ONE));
        let ceiling = self.ceiling.as_nanos();
        SimDuration::from_nanos(u64::try_from(grown).map_or(ceiling, |g| g.min(ceiling)))
    }
}

/// Upper bound on the steps [`BackoffConfig::delay_unjittered`] takes before the delay reaches
/// its ceiling, over every valid configuration (the worst is 1001 permille, 1 ns, `u64::MAX`).
/// Monotone in every parameter, so this one case is the worst; a unit test recomputes it.
pub const GROWTH_STEPS_MAX: u32 = 38_049;

/// The backoff of one caller (one request's retries, one connection's reconnects).
///
/// Call order: [`Backoff::next_delay`] after each failure, which returns how long to wait
/// before the next attempt and counts the failure; [`Backoff::reset`] after a success, so the
/// next failure starts again from `base`.
///
/// Invariants:
/// - `next_delay` returns at most [`BackoffConfig::delay_max`] (the ceiling, but for
///   `Jitter::Proportional`); with `Jitter::Decorrelated` at least `base`;
/// - without jitter the n-th delay since the last reset is exactly
///   [`BackoffConfig::delay_unjittered`]`(n)`; with `Full` or `Equal` jitter it is at most that;
/// - `attempts()` counts delays handed out since the last reset, saturating at `u32::MAX`;
/// - each call costs O(1): the unjittered delay is carried from one call to the next.
///
/// It holds no time: the caller adds the delay to its own `now`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Backoff {
    config: BackoffConfig,
    /// Delays handed out since the last reset.
    attempts: u32,
    /// `config.delay_unjittered(attempts + 1)`: the delay the next call starts from.
    unjittered_next: SimDuration,
    /// `config.delay_unjittered(attempts)` (zero before the first): a Fibonacci step adds it.
    unjittered_last: SimDuration,
    /// The last delay handed out, or `base` before the first; decorrelated jitter grows from
    /// it. Always within `[0, ceiling]`, and within `[base, ceiling]` for decorrelated jitter.
    previous: SimDuration,
}

impl Backoff {
    pub fn new(config: BackoffConfig) -> Self {
        Backoff {
            config,
            attempts: 0,
            unjittered_next: config.base,
            unjittered_last: SimDuration::ZERO,
            previous: config.base,
        }
    }

    pub fn config(&self) -> &BackoffConfig {
        &self.config
    }

    /// Delays handed out since creation or the last [`Backoff::reset`].
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Starts over from `base`, as after a success.
    pub fn reset(&mut self) {
        self.attempts = 0;
        self.unjittered_next = self.config.base;
        self.unjittered_last = SimDuration::ZERO;
        self.previous = self.config.base;
    }

    /// Counts one more failure and returns how long to wait before the next attempt.
    pub fn next_delay(&mut self, random: &mut impl RandomBits) -> SimDuration {
        let exponential = self.unjittered_next;
        self.unjittered_next = self
            .config
            .next_unjittered(self.unjittered_last, exponential);
        self.unjittered_last = exponential;
        self.attempts = self.attempts.saturating_add(1);
        let nanos = exponential.as_nanos();
        let delay = match self.config.jitter {
            Jitter::None => nanos,
            Jitter::Full => uniform_inclusive(random, 0, nanos),
            Jitter::Equal => {
                let half = nanos / 2;
                (nanos - half) + uniform_inclusive(random, 0, half)
            }
            Jitter::Decorrelated => {
                let base = self.config.base.as_nanos();
                // previous >= base, so the range is never empty.
                let high = self.previous.as_nanos().saturating_mul(3);
                uniform_inclusive(random, base, high).min(self.config.ceiling.as_nanos())
            }
            Jitter::Proportional {
                randomization_permille,
            } => {
                let delta = spread(nanos, randomization_permille);
                uniform_inclusive(random, nanos - delta, nanos.saturating_add(delta))
            }
        };
        let delay = SimDuration::from_nanos(delay);
        debug_assert!(
            delay <= self.config.delay_max(),
            "{delay} above the maximum"
        );
        self.previous = delay;
        delay
    }
}

/// `⌊nanos · randomization_permille / 1000⌋`, at most `nanos`.
fn spread(nanos: u64, randomization_permille: u32) -> u64 {
    let delta =
        u128::from(nanos) * u128::from(randomization_permille) / u128::from(FACTOR_PERMILLE_ONE);
    u64::try_from(delta).map_or(nanos, |delta| delta.min(nanos))
}

/// A uniform draw from `low..=high`, from exactly one word of `random`.
fn uniform_inclusive(random: &mut impl RandomBits, low: u64, high: u64) -> u64 {
    debug_assert!(low <= high);
    let span = high - low;
    if span == u64::MAX {
        random.next_u64()
    } else {
        low + below(random, span + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::random::SplitMix64;
    use proptest::prelude::*;

    fn ms(millis: u64) -> SimDuration {
        SimDuration::from_millis(millis)
    }

    fn config(
        base: SimDuration,
        factor: u32,
        ceiling: SimDuration,
        jitter: Jitter,
    ) -> BackoffConfig {
        BackoffConfig::new(base, factor, ceiling, jitter).unwrap()
    }

    /// Seed 001: 100 ms, doubling, capped at 5 s.
    fn seed_001(jitter: Jitter) -> BackoffConfig {
        config(ms(100), 2000, ms(5000), jitter)
    }

    /// A source that must not be drawn from.
    struct NoRandom;

    impl RandomBits for NoRandom {
        fn next_u64(&mut self) -> u64 {
            panic!("drew a random word where none was needed");
        }
    }

    /// Fibonacci: each delay the sum of the two before, capped; a factor is refused.
    #[test]
    fn fibonacci_delays_add_the_two_before() {
        let config = config(ms(100), 1000, ms(1000), Jitter::None)
            .with_growth(Growth::Fibonacci)
            .unwrap();
        let expected = [100, 100, 200, 300, 500, 800, 1000, 1000];
        let unjittered: Vec<u64> = (1..=8)
            .map(|n| config.delay_unjittered(n).as_nanos() / 1_000_000)
            .collect();
        assert_eq!(unjittered, expected);
        let mut backoff = Backoff::new(config);
        let handed: Vec<u64> = (0..8)
            .map(|_| backoff.next_delay(&mut NoRandom).as_nanos() / 1_000_000)
            .collect();
        assert_eq!(handed, expected);
        backoff.reset();
        assert_eq!(backoff.next_delay(&mut NoRandom), ms(100));
        assert_eq!(backoff.next_delay(&mut NoRandom), ms(100));
        assert_eq!(config.delay_unjittered(u32::MAX), ms(1000));
        let error = seed_001(Jitter::None)
            .with_growth(Growth::Fibonacci)
            .unwrap_err();
        assert_eq!(error.field, "factor_permille");
    }

    #[test]
    fn rejected_configs_say_which_field_and_why() {
        let cases = [
            (
                (0, 2000, 5000),
                "base: must be longer than zero (a zero delay never grows and retries in a \
                 tight loop)",
            ),
            (
                (100, 999, 5000),
                "factor_permille: must be at least 1000 (a factor of 1); 999 would shrink the \
                 delay after every failure",
            ),
            (
                (100, 0, 5000),
                "factor_permille: must be at least 1000 (a factor of 1); 0 would shrink the \
                 delay after every failure",
            ),
            (
                (100, 2000, 99),
                "ceiling: must be at least the base (100ms): it caps delays that start there",
            ),
        ];
        for ((base_ms, factor, ceiling_ms), expected) in cases {
            let error =
                BackoffConfig::new(ms(base_ms), factor, ms(ceiling_ms), Jitter::Full).unwrap_err();
            assert_eq!(error.to_string(), expected);
        }
        // The edges are accepted: a factor of exactly one, a ceiling equal to the base.
        assert!(BackoffConfig::new(ms(100), 1000, ms(100), Jitter::None).is_ok());
    }

    #[test]
    fn seed_001_doubles_from_100ms_and_holds_at_5s() {
        let mut backoff = Backoff::new(seed_001(Jitter::None));
        let delays: Vec<u64> = (0..9)
            .map(|_| backoff.next_delay(&mut NoRandom).as_nanos() / 1_000_000)
            .collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
        assert_eq!(backoff.attempts(), 9);
        for (attempt, expected) in (1..).zip(delays) {
            assert_eq!(
                seed_001(Jitter::None).delay_unjittered(attempt),
                ms(expected)
            );
        }
    }

    #[test]
    fn a_success_starts_the_sequence_over() {
        let mut backoff = Backoff::new(seed_001(Jitter::None));
        for _ in 0..4 {
            backoff.next_delay(&mut NoRandom);
        }
        backoff.reset();
        assert_eq!(backoff.attempts(), 0);
        assert_eq!(backoff.next_delay(&mut NoRandom), ms(100));
        assert_eq!(backoff.next_delay(&mut NoRandom), ms(200));
    }

    #[test]
    fn the_ceiling_holds_at_attempt_1000_and_u32_max_without_overflow() {
        let seed = seed_001(Jitter::None);
        assert_eq!(seed.delay_unjittered(1000), ms(5000));
        assert_eq!(seed.delay_unjittered(u32::MAX), ms(5000));
        // The widest configuration: the largest factor up to the end of representable time.
        let widest = config(
            SimDuration::from_nanos(1),
            u32::MAX,
            SimDuration::MAX,
            Jitter::None,
        );
        assert_eq!(
            widest.delay_unjittered(2),
            SimDuration::from_nanos(4_294_968)
        );
        assert_eq!(widest.delay_unjittered(u32::MAX), SimDuration::MAX);
        // A backoff that has counted (almost) every attempt: the count saturates, the delay holds.
        let mut backoff = Backoff::new(seed);
        for _ in 0..8 {
            backoff.next_delay(&mut NoRandom);
        }
        backoff.attempts = u32::MAX - 1;
        assert_eq!(backoff.next_delay(&mut NoRandom), ms(5000));
        assert_eq!(backoff.next_delay(&mut NoRandom), ms(5000));
        assert_eq!(backoff.attempts(), u32::MAX);
    }

    #[test]
    fn fractional_factors_round_up_and_never_stall() {
        let one_and_a_half = config(ms(100), 1500, ms(1000), Jitter::None);
        let delays: Vec<SimDuration> = (1..=7)
            .map(|n| one_and_a_half.delay_unjittered(n))
            .collect();
        let expected = [
            100_000_000,
            150_000_000,
            225_000_000,
            337_500_000,
            506_250_000,
            759_375_000,
            1_000_000_000,
        ];
        assert_eq!(delays, expected.map(SimDuration::from_nanos));
        // 1 ns · 1.001 rounds up to 2 ns: the delay grows even where the factor is tiny.
        let slowest = config(
            SimDuration::from_nanos(1),
            1001,
            SimDuration::from_nanos(5),
            Jitter::None,
        );
        let mut backoff = Backoff::new(slowest);
        let delays: Vec<u64> = (0..6)
            .map(|_| backoff.next_delay(&mut NoRandom).as_nanos())
            .collect();
        assert_eq!(delays, [1, 2, 3, 4, 5, 5]);
        // A factor of exactly one keeps the base, and stops computing at once.
        let constant = config(ms(100), 1000, ms(5000), Jitter::None);
        assert_eq!(constant.delay_unjittered(u32::MAX), ms(100));
    }

    #[test]
    fn the_slowest_growth_reaches_the_ceiling_within_the_stated_bound() {
        let slowest = config(
            SimDuration::from_nanos(1),
            1001,
            SimDuration::MAX,
            Jitter::None,
        );
        let mut delay = slowest.base();
        let mut steps = 0u32;
        while delay < slowest.ceiling() {
            delay = slowest.grow(delay);
            steps += 1;
        }
        assert_eq!(steps, GROWTH_STEPS_MAX);
        assert_eq!(slowest.delay_unjittered(u32::MAX), SimDuration::MAX);
    }

    /// Draws `draws` delays, each from a fresh backoff (so from the first attempt), and checks
    /// that every one lies in `[low, high]` and that each tenth of that range gets its share.
    fn check_uniform_first_delay(config: BackoffConfig, low: SimDuration, high: SimDuration) {
        const DRAWS: u64 = 20_000;
        const BUCKETS: u64 = 10;
        let mut random = SplitMix64(7);
        let mut counts = [0u64; BUCKETS as usize];
        let (low, high) = (low.as_nanos(), high.as_nanos());
        let (mut seen_min, mut seen_max) = (u64::MAX, 0);
        for _ in 0..DRAWS {
            let delay = Backoff::new(config).next_delay(&mut random).as_nanos();
            assert!(
                (low..=high).contains(&delay),
                "{delay} outside [{low}, {high}]"
            );
            seen_min = seen_min.min(delay);
            seen_max = seen_max.max(delay);
            let bucket = (delay - low) * BUCKETS / (high - low + 1);
            counts[bucket as usize] += 1;
        }
        let expected = DRAWS / BUCKETS;
        for (bucket, &count) in counts.iter().enumerate() {
            // 2000 expected per bucket, standard deviation about 42: 15% is over 7 sigma.
            assert!(
                count.abs_diff(expected) < expected * 15 / 100,
                "{config:?}: bucket {bucket} has {count}, expected about {expected}"
            );
        }
        let tolerance = (high - low) / 500;
        assert!(
            seen_min - low <= tolerance,
            "lowest draw {seen_min}, range starts at {low}"
        );
        assert!(
            high - seen_max <= tolerance,
            "highest draw {seen_max}, range ends at {high}"
        );
    }

    #[test]
    fn full_jitter_covers_zero_to_the_delay() {
        check_uniform_first_delay(
            config(ms(1000), 2000, ms(5000), Jitter::Full),
            ms(0),
            ms(1000),
        );
    }

    #[test]
    fn equal_jitter_covers_the_upper_half_of_the_delay() {
        check_uniform_first_delay(
            config(ms(1000), 2000, ms(5000), Jitter::Equal),
            ms(500),
            ms(1000),
        );
    }

    #[test]
    fn decorrelated_jitter_starts_between_base_and_three_bases() {
        check_uniform_first_delay(
            config(ms(100), 2000, ms(5000), Jitter::Decorrelated),
            ms(100),
            ms(300),
        );
    }

    #[test]
    fn jitter_stays_under_the_ceiling_over_long_runs() {
        let cases = [
            (Jitter::Full, ms(0)),
            (Jitter::Equal, ms(0)),
            (Jitter::Decorrelated, ms(100)),
        ];
        for (jitter, floor) in cases {
            let config = seed_001(jitter);
            let mut backoff = Backoff::new(config);
            let mut random = SplitMix64(11);
            let mut at_ceiling = 0;
            for attempt in 1..=5000u32 {
                let delay = backoff.next_delay(&mut random);
                assert!(floor <= delay && delay <= ms(5000), "{jitter:?}: {delay}");
                if jitter != Jitter::Decorrelated {
                    assert!(
                        delay <= config.delay_unjittered(attempt),
                        "{jitter:?}: {delay}"
                    );
                }
                at_ceiling += u32::from(delay == ms(5000));
            }
            // Full and equal jitter reach the exact ceiling only by chance (1 in 5e9 per draw);
            // decorrelated jitter is clamped to it often once 3 · previous passes it.
            if jitter == Jitter::Decorrelated {
                assert!(
                    at_ceiling > 100,
                    "decorrelated reached the ceiling {at_ceiling} times"
                );
            }
        }
    }

    /// A source that always draws the same word: 0 gives the low end of a range, `u64::MAX`
    /// the high end.
    struct Fixed(u64);

    impl RandomBits for Fixed {
        fn next_u64(&mut self) -> u64 {
            self.0
        }
    }

    fn proportional(randomization_permille: u32) -> Jitter {
        Jitter::Proportional {
            randomization_permille,
        }
    }

    #[test]
    fn proportional_jitter_spans_the_randomization_factor_around_the_delay() {
        // The backoff crate's defaults: 500 ms, × 1.5, up to 60 s, randomization factor 0.5.
        let defaults = config(ms(500), 1500, ms(60_000), proportional(500));
        let ends = |word| {
            let mut backoff = Backoff::new(defaults);
            let delays: Vec<u64> = (0..3)
                .map(|_| backoff.next_delay(&mut Fixed(word)).as_nanos() / 1_000_000)
                .collect();
            delays
        };
        // 500 ms in [250, 750], 750 ms in [375, 1125], 1125 ms in [562.5, 1687.5].
        assert_eq!(ends(0), [250, 375, 562]);
        assert_eq!(ends(u64::MAX), [750, 1125, 1687]);
        // At the ceiling the delay may pass it by δ, as the crate's does.
        assert_eq!(defaults.delay_max(), ms(90_000));
        let mut capped = Backoff::new(config(ms(60_000), 1500, ms(60_000), proportional(500)));
        assert_eq!(capped.next_delay(&mut Fixed(u64::MAX)), ms(90_000));
        // A factor of 0 draws a word but keeps the delay; 1000 spans [0, 2d].
        let mut none = Backoff::new(config(ms(100), 1000, ms(100), proportional(0)));
        assert_eq!(none.next_delay(&mut Fixed(u64::MAX)), ms(100));
        let mut widest = Backoff::new(config(ms(100), 1000, ms(100), proportional(1000)));
        assert_eq!(widest.next_delay(&mut Fixed(0)), ms(0));
        assert_eq!(widest.next_delay(&mut Fixed(u64::MAX)), ms(200));
    }

    #[test]
    fn a_randomization_factor_above_one_is_refused() {
        let error = BackoffConfig::new(ms(100), 1000, ms(100), proportional(1001)).unwrap_err();
        assert_eq!(error.field, "randomization_permille");
        assert!(BackoffConfig::new(ms(100), 1000, ms(100), proportional(1000)).is_ok());
    }

    #[test]
    fn jitter_draws_one_word_per_delay_and_none_draws_nothing() {
        struct Counting(SplitMix64, u32);
        impl RandomBits for Counting {
            fn next_u64(&mut self) -> u64 {
                self.1 += 1;
                self.0.next_u64()
            }
        }
        for (jitter, words) in [
            (Jitter::None, 0),
            (Jitter::Full, 10),
            (Jitter::Equal, 10),
            (Jitter::Decorrelated, 10),
            (proportional(500), 10),
        ] {
            let mut backoff = Backoff::new(seed_001(jitter));
            let mut random = Counting(SplitMix64(3), 0);
            for _ in 0..10 {
                backoff.next_delay(&mut random);
            }
            assert_eq!(random.1, words, "{jitter:?}");
        }
    }

    #[test]
    fn full_range_draws_do_not_overflow() {
        // Full jitter over a delay of u64::MAX nanoseconds: the span is every u64.
        let widest = config(SimDuration::MAX, 1000, SimDuration::MAX, Jitter::Full);
        let mut backoff = Backoff::new(widest);
        let mut random = SplitMix64(0);
        let first = backoff.next_delay(&mut random);
        assert_eq!(first.as_nanos(), SplitMix64(0).next_u64());
        let decorrelated = config(
            SimDuration::MAX,
            1000,
            SimDuration::MAX,
            Jitter::Decorrelated,
        );
        assert_eq!(
            Backoff::new(decorrelated).next_delay(&mut random),
            SimDuration::MAX
        );
    }

    /// The reference model: recomputes everything from the definitions, from scratch, in
    /// `u128`, with no carried state but the attempt count and the last delay.
    struct Reference {
        config: BackoffConfig,
        attempts: u32,
        previous: u128,
    }

    impl Reference {
        fn next_delay(&mut self, random: &mut SplitMix64) -> u64 {
            let (base, ceiling) = (
                u128::from(self.config.base.as_nanos()),
                u128::from(self.config.ceiling.as_nanos()),
            );
            self.attempts += 1;
            let mut d = base;
            for _ in 1..self.attempts {
                d = (d * u128::from(self.config.factor_permille))
                    .div_ceil(1000)
                    .min(ceiling);
            }
            let uniform = |random: &mut SplitMix64, low: u128, high: u128| {
                low + ((u128::from(random.next_u64()) * (high - low + 1)) >> 64)
            };
            let delay = match self.config.jitter {
                Jitter::None => d,
                Jitter::Full => uniform(random, 0, d),
                Jitter::Equal => d - d / 2 + uniform(random, 0, d / 2),
                Jitter::Decorrelated => uniform(random, base, self.previous * 3).min(ceiling),
                Jitter::Proportional {
                    randomization_permille,
                } => {
                    let delta = d * u128::from(randomization_permille) / 1000;
                    uniform(random, d - delta, d + delta)
                }
            };
            self.previous = delay;
            u64::try_from(delay).unwrap()
        }
    }

    fn jitter_strategy() -> impl Strategy<Value = Jitter> {
        prop_oneof![
            Just(Jitter::None),
            Just(Jitter::Full),
            Just(Jitter::Equal),
            Just(Jitter::Decorrelated),
            (0u32..=1000).prop_map(|randomization_permille| Jitter::Proportional {
                randomization_permille
            }),
        ]
    }

    fn config_strategy() -> impl Strategy<Value = BackoffConfig> {
        (
            1u64..=2_000_000_000,
            1000u32..=4000,
            1u64..=100_000,
            jitter_strategy(),
        )
            .prop_map(|(base, factor, ceiling_times, jitter)| {
                let base = SimDuration::from_nanos(base);
                let ceiling =
                    SimDuration::from_nanos(base.as_nanos().saturating_mul(ceiling_times));
                config(base, factor, ceiling, jitter)
            })
    }

    proptest! {
        /// In `failures`, `true` is a failure (`next_delay`), `false` a success (`reset`).
        #[test]
        fn backoff_matches_the_reference_model(
            config in config_strategy(),
            seed in any::<u64>(),
            failures in prop::collection::vec(any::<bool>(), 0..200),
        ) {
            let mut backoff = Backoff::new(config);
            let mut reference = Reference { config, attempts: 0, previous: u128::from(config.base.as_nanos()) };
            let (mut random, mut reference_random) = (SplitMix64(seed), SplitMix64(seed));
            for failure in failures {
                if failure {
                    let delay = backoff.next_delay(&mut random);
                    prop_assert_eq!(delay.as_nanos(), reference.next_delay(&mut reference_random));
                    prop_assert!(delay <= config.delay_max());
                } else {
                    backoff.reset();
                    reference.attempts = 0;
                    reference.previous = u128::from(config.base.as_nanos());
                }
                prop_assert_eq!(backoff.attempts(), reference.attempts);
            }
        }

        /// An independent reference for the unjittered sequence, written from the module
        /// documentation's words and checked by multiplication only (the reference model
        /// above reuses the implementation's `div_ceil`): each delay is the previous one times
        /// `factor_permille / 1000` rounded up to a whole nanosecond, i.e. the least `x` with
        /// `1000 · x >= factor_permille · previous`, then capped at the ceiling; it never
        /// stalls below the ceiling; and whenever `base · factor^(n-1)` is a whole number of
        /// nanoseconds, the delay is exactly that (capped).
        #[test]
        fn unjittered_delays_follow_the_documented_rounding(
            base in prop_oneof![1u64..=2_000_000_000, (1u64..=1000).prop_map(|m| m << 24)],
            factor in prop_oneof![1000u32..=4000, Just(1125), Just(1250), Just(1500), Just(1750)],
            ceiling_times in 1u64..=100_000,
            attempts in 2u32..=60,
        ) {
            let ceiling = base.saturating_mul(ceiling_times);
            let config = config(
                SimDuration::from_nanos(base),
                factor,
                SimDuration::from_nanos(ceiling),
                Jitter::None,
            );
            let (f, cap) = (u128::from(factor), u128::from(ceiling));
            prop_assert_eq!(config.delay_unjittered(1).as_nanos(), base);
            // base · factor^(n-1) / 1000^(n-1), while it fits.
            let (mut numerator, mut denominator) = (Some(u128::from(base)), Some(1u128));
            for n in 2..=attempts {
                let previous = u128::from(config.delay_unjittered(n - 1).as_nanos());
                let delay = u128::from(config.delay_unjittered(n).as_nanos());
                prop_assert!(delay <= cap);
                if delay < cap {
                    prop_assert!(1000 * delay >= f * previous, "n {}: {} too small", n, delay);
                    prop_assert!(1000 * (delay - 1) < f * previous, "n {}: {} not the least", n, delay);
                } else {
                    // Capped: the rounded-up product is at least the ceiling.
                    prop_assert!(1000 * (cap - 1) < f * previous, "n {}: capped too early", n);
                }
                if factor > 1000 && previous < cap {
                    prop_assert!(delay > previous, "n {}: stalled at {}", n, previous);
                }
                numerator = numerator.and_then(|value| value.checked_mul(f));
                denominator = denominator.and_then(|value| value.checked_mul(1000));
                if let (Some(numerator), Some(denominator)) = (numerator, denominator)
                    && numerator % denominator == 0
                {
                    prop_assert_eq!(delay, (numerator / denominator).min(cap), "n {}", n);
                }
            }
        }

        /// For whole factors the delay is exactly `min(ceiling, base · k^(n-1))`, at any n.
        #[test]
        fn whole_factors_are_exact_powers(
            base in 1u64..=u64::MAX,
            k in 1u32..=16,
            ceiling_extra in any::<u64>(),
            attempt in 1u32..=u32::MAX,
        ) {
            let ceiling = base.saturating_add(ceiling_extra);
            let config = config(SimDuration::from_nanos(base), k * 1000, SimDuration::from_nanos(ceiling), Jitter::None);
            let exact = u128::from(k)
                .checked_pow(attempt - 1)
                .and_then(|power| power.checked_mul(u128::from(base)))
                .map_or(ceiling, |delay| u64::try_from(delay.min(u128::from(ceiling))).unwrap());
            prop_assert_eq!(config.delay_unjittered(attempt).as_nanos(), exact);
        }
    }
}

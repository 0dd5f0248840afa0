//! Backoff and retry test cases of the `backoff` crate, tokio-retry and the AWS Architecture
//! Blog's formulas, replayed against outagelab's `Backoff` and `RetryPolicy`.
//!
//! Sources:
//! - ihrwein/backoff: `src/exponential.rs` at 7198500 (0.4.x) and `tests/exponential.rs` at
//!   0c88d76;
//! - srijs/rust-tokio-retry: `src/strategy/exponential_backoff.rs` at 4160d84;
//! - "Exponential Backoff And Jitter", AWS Architecture Blog (Marc Brooker, 2015): the full,
//!   equal and decorrelated formulas;
//! - Xuanwo/backon: `backon/src/backoff/fibonacci.rs` at db212c0 (1.5.2), through the
//!   `backon-fibonacci` preset.
//!
//! A peer that draws a float `f` in [0, 1) is replayed by the 64-bit word `⌊f · 2^64⌋`, the
//! word outagelab maps to the same place in its range (it draws one word per delay).

use outagelab_model::backoff::{Backoff, BackoffConfig, Jitter};
use outagelab_model::presets::{
    AWS_FULL_JITTER, BACKOFF_CRATE, BACKON_FIBONACCI, RetryPreset, TOKIO_RETRY,
};
use outagelab_model::random::RandomBits;
use outagelab_model::retry::{GiveUpReason, RetryDecision, RetryPolicy};
use outagelab_model::{SimDuration, SimTime};

/// Always the same word.
struct Word(u64);

impl RandomBits for Word {
    fn next_u64(&mut self) -> u64 {
        self.0
    }
}

/// The word for the fraction `numerator / denominator` of the range.
fn fraction(numerator: u64, denominator: u64) -> Word {
    Word(((u128::from(numerator) << 64) / u128::from(denominator)) as u64)
}

/// The low end of every range.
fn low() -> Word {
    Word(0)
}

/// The high end of every range.
fn high() -> Word {
    Word(u64::MAX)
}

fn ms(millis: u64) -> SimDuration {
    SimDuration::from_millis(millis)
}

fn proportional(randomization_permille: u32) -> Jitter {
    Jitter::Proportional {
        randomization_permille,
    }
}

/// `count` delays of a fresh backoff, all drawn with `word`, in nanoseconds.
fn delays(config: BackoffConfig, word: &mut Word, count: usize) -> Vec<u64> {
    let mut backoff = Backoff::new(config);
    (0..count)
        .map(|_| backoff.next_delay(word).as_nanos())
        .collect()
}

fn millis_of(nanos: Vec<u64>) -> Vec<u64> {
    nanos.into_iter().map(|n| n / 1_000_000).collect()
}

fn expect<T: PartialEq + std::fmt::Debug>(got: T, expected: T) -> Result<(), String> {
    if got == expected {
        Ok(())
    } else {
        Err(format!("got {got:?}, expected {expected:?}"))
    }
}

struct Case {
    peer_test: &'static str,
    differs: Option<&'static str>,
    check: fn() -> Result<(), String>,
}

/// The backoff crate's `get_randomized_interval`: factor 0.5 around 2 ns gives 1, 2 or 3 ns,
/// a third of the draws each.
fn randomized_interval(
    numerator: u64,
    denominator: u64,
    expected_nanos: u64,
) -> Result<(), String> {
    let config = BackoffConfig::new(
        SimDuration::from_nanos(2),
        1000,
        SimDuration::from_nanos(2),
        proportional(500),
    )
    .map_err(|e| e.to_string())?;
    expect(
        delays(config, &mut fraction(numerator, denominator), 1),
        vec![expected_nanos],
    )
}

/// The waits a retry policy with `preset`'s values hands out, in milliseconds, until it gives
/// up (backon's iterator ends: `None`).
fn retry_waits_ms(preset: RetryPreset) -> Result<Vec<u64>, String> {
    let mut policy = RetryPolicy::new(preset.config().map_err(|e| e.to_string())?);
    let mut request = policy.on_request(SimTime::ZERO);
    let mut now = SimTime::ZERO;
    let mut waits = Vec::new();
    while let RetryDecision::Retry { at } = policy.on_failure(now, &mut request, None, &mut low()) {
        waits.push((at.as_nanos() - now.as_nanos()) / 1_000_000);
        now = at;
        assert!(waits.len() <= 100, "a preset that never gives up");
    }
    Ok(waits)
}

/// backon's `FibonacciBuilder` with its test's settings, through the preset.
fn backon(min_delay_ms: u64, max_delay_ms: u64, max_times: u32) -> RetryPreset {
    RetryPreset {
        max_attempts: max_times + 1,
        backoff: ms(min_delay_ms),
        backoff_max: ms(max_delay_ms),
        ..BACKON_FIBONACCI
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            peer_test: "backoff get_randomized_interval: f(0.5, 0.0, 2ns) = 1ns (7198500)",
            differs: None,
            check: || randomized_interval(0, 100, 1),
        },
        Case {
            peer_test: "backoff get_randomized_interval: f(0.5, 0.33, 2ns) = 1ns (7198500)",
            differs: None,
            check: || randomized_interval(33, 100, 1),
        },
        Case {
            peer_test: "backoff get_randomized_interval: f(0.5, 0.34, 2ns) = 2ns (7198500)",
            differs: None,
            check: || randomized_interval(34, 100, 2),
        },
        Case {
            peer_test: "backoff get_randomized_interval: f(0.5, 0.66, 2ns) = 2ns (7198500)",
            differs: None,
            check: || randomized_interval(66, 100, 2),
        },
        Case {
            peer_test: "backoff get_randomized_interval: f(0.5, 0.67, 2ns) = 3ns (7198500)",
            differs: None,
            check: || randomized_interval(67, 100, 3),
        },
        Case {
            peer_test: "backoff get_randomized_interval: f(0.5, 0.99, 2ns) = 3ns (7198500)",
            differs: None,
            check: || randomized_interval(99, 100, 3),
        },
        Case {
            peer_test: "backoff tests/exponential.rs backoff: 500ms x2 to 5s, factor 0.1 (0c88d76)",
            differs: None,
            // The intervals the test lists, and every delay within 10% of its interval.
            check: || {
                let config = BackoffConfig::new(ms(500), 2000, ms(5000), proportional(100))
                    .map_err(|e| e.to_string())?;
                let intervals: Vec<u64> = (1..=10)
                    .map(|n| config.delay_unjittered(n).as_nanos() / 1_000_000)
                    .collect();
                expect(
                    intervals.clone(),
                    vec![500, 1000, 2000, 4000, 5000, 5000, 5000, 5000, 5000, 5000],
                )?;
                let lowest: Vec<u64> = intervals.iter().map(|i| i - i / 10).collect();
                let highest: Vec<u64> = intervals.iter().map(|i| i + i / 10).collect();
                expect(millis_of(delays(config, &mut low(), 10)), lowest)?;
                expect(millis_of(delays(config, &mut high(), 10)), highest)
            },
        },
        Case {
            peer_test: "backoff tests/exponential.rs max_elapsed_time: 1000s elapsed of 900s gives up (0c88d76)",
            differs: None,
            check: || {
                let mut policy =
                    RetryPolicy::new(BACKOFF_CRATE.config().map_err(|e| e.to_string())?);
                let mut request = policy.on_request(SimTime::ZERO);
                let failed_at = SimTime::ZERO.saturating_add(SimDuration::from_secs(1000));
                expect(
                    policy.on_failure(failed_at, &mut request, None, &mut high()),
                    RetryDecision::GiveUp(GiveUpReason::ElapsedExceeded),
                )
            },
        },
        Case {
            peer_test: "backoff next_backoff: retries while elapsed + delay <= max_elapsed_time (7198500)",
            differs: None,
            // 899.25 s elapsed, a delay of 750 ms at the high end: ends at 900 s exactly.
            check: || {
                let mut policy =
                    RetryPolicy::new(BACKOFF_CRATE.config().map_err(|e| e.to_string())?);
                let mut request = policy.on_request(SimTime::ZERO);
                let failed_at = SimTime::ZERO.saturating_add(ms(899_250));
                let end = SimTime::ZERO.saturating_add(SimDuration::from_secs(900));
                expect(
                    policy.on_failure(failed_at, &mut request, None, &mut high()),
                    RetryDecision::Retry { at: end },
                )?;
                let mut request = policy.on_request(SimTime::ZERO);
                expect(
                    policy.on_failure(
                        SimTime::ZERO.saturating_add(ms(899_251)),
                        &mut request,
                        None,
                        &mut high(),
                    ),
                    RetryDecision::GiveUp(GiveUpReason::ElapsedExceeded),
                )
            },
        },
        Case {
            peer_test: "backoff exponential_backoff_default_builder (7198500)",
            differs: None,
            check: || {
                let config = BACKOFF_CRATE.config().map_err(|e| e.to_string())?;
                let backoff = config.backoff();
                expect(
                    (
                        backoff.base(),
                        backoff.factor_permille(),
                        backoff.ceiling(),
                        backoff.jitter(),
                        config.elapsed_max(),
                    ),
                    (
                        ms(500),
                        1500,
                        ms(60_000),
                        proportional(500),
                        Some(SimDuration::from_secs(900)),
                    ),
                )
            },
        },
        Case {
            peer_test: "backoff exponential_backoff_builder: randomization_factor 4.0 accepted (7198500)",
            differs: Some(
                "the crate takes any factor, and one above 1 makes negative delays (its \
                 min_interval goes below zero); outagelab refuses a factor above 1",
            ),
            check: || {
                let refused = BackoffConfig::new(ms(1000), 3000, ms(2000), proportional(4000));
                expect(refused.map_err(|e| e.field), Err("randomization_permille"))
            },
        },
        Case {
            peer_test: "tokio-retry returns_some_exponential_base_10 (4160d84)",
            differs: None,
            check: || {
                let config = BackoffConfig::new(ms(10), 10_000, SimDuration::MAX, Jitter::None)
                    .map_err(|e| e.to_string())?;
                expect(
                    millis_of(delays(config, &mut low(), 3)),
                    vec![10, 100, 1000],
                )
            },
        },
        Case {
            peer_test: "tokio-retry returns_some_exponential_base_2 (4160d84)",
            differs: None,
            check: || {
                let config = BackoffConfig::new(ms(2), 2000, SimDuration::MAX, Jitter::None)
                    .map_err(|e| e.to_string())?;
                expect(millis_of(delays(config, &mut low(), 3)), vec![2, 4, 8])
            },
        },
        Case {
            peer_test: "tokio-retry saturates_at_maximum_value (4160d84)",
            differs: Some(
                "tokio-retry counts in milliseconds up to u64::MAX ms; outagelab's durations \
                 are u64 nanoseconds, so the case is replayed in nanoseconds: MAX - 1, then \
                 MAX, then MAX",
            ),
            check: || {
                let config = BackoffConfig::new(
                    SimDuration::from_nanos(u64::MAX - 1),
                    2000,
                    SimDuration::MAX,
                    Jitter::None,
                )
                .map_err(|e| e.to_string())?;
                expect(
                    delays(config, &mut low(), 3),
                    vec![u64::MAX - 1, u64::MAX, u64::MAX],
                )
            },
        },
        Case {
            peer_test: "tokio-retry README: ExponentialBackoff::from_millis(10).map(jitter).take(3)",
            differs: None,
            // Three retries at most, each at most 10 ms, 100 ms, 1 s; then the request fails.
            check: || {
                let mut policy = RetryPolicy::new(TOKIO_RETRY.config().map_err(|e| e.to_string())?);
                let mut request = policy.on_request(SimTime::ZERO);
                let mut now = SimTime::ZERO;
                let mut waits = Vec::new();
                for _ in 0..3 {
                    match policy.on_failure(now, &mut request, None, &mut high()) {
                        RetryDecision::Retry { at } => {
                            waits.push(at.saturating_since(now).as_nanos() / 1_000_000);
                            now = at;
                        }
                        other => return Err(format!("{other:?}")),
                    }
                }
                expect(waits, vec![10, 100, 1000])?;
                expect(
                    policy.on_failure(now, &mut request, None, &mut high()),
                    RetryDecision::GiveUp(GiveUpReason::AttemptsExhausted),
                )
            },
        },
        Case {
            peer_test: "tokio-retry max_delay below the first delay (0.3.0 source; no named test)",
            differs: Some(
                "tokio-retry returns max_delay for every delay above it, even the first; \
                 outagelab refuses backoff_max below backoff (more often a slip of units than \
                 a wish), and the same waits are written backoff = backoff_max",
            ),
            check: || {
                let refused = BackoffConfig::new(ms(20), 2000, ms(10), Jitter::None);
                expect(refused.map_err(|e| e.field), Err("ceiling"))?;
                let written = BackoffConfig::new(ms(10), 1000, ms(10), Jitter::None)
                    .map_err(|e| e.to_string())?;
                expect(millis_of(delays(written, &mut low(), 3)), vec![10, 10, 10])
            },
        },
        Case {
            peer_test: "AWS blog, Full Jitter: sleep = random_between(0, min(cap, base * 2 ** attempt))",
            differs: None,
            check: || {
                let config = BackoffConfig::new(ms(100), 2000, ms(1000), Jitter::Full)
                    .map_err(|e| e.to_string())?;
                expect(millis_of(delays(config, &mut low(), 6)), vec![0; 6])?;
                expect(
                    millis_of(delays(config, &mut high(), 6)),
                    vec![100, 200, 400, 800, 1000, 1000],
                )
            },
        },
        Case {
            peer_test: "AWS blog, Equal Jitter: temp = min(cap, base * 2 ** attempt); sleep = temp / 2 + random_between(0, temp / 2)",
            differs: None,
            check: || {
                let config = BackoffConfig::new(ms(100), 2000, ms(1000), Jitter::Equal)
                    .map_err(|e| e.to_string())?;
                expect(
                    millis_of(delays(config, &mut low(), 6)),
                    vec![50, 100, 200, 400, 500, 500],
                )?;
                expect(
                    millis_of(delays(config, &mut high(), 6)),
                    vec![100, 200, 400, 800, 1000, 1000],
                )
            },
        },
        Case {
            peer_test: "AWS blog, Decorrelated Jitter: sleep = min(cap, random_between(base, sleep * 3))",
            differs: None,
            check: || {
                let config = BackoffConfig::new(ms(100), 1000, ms(1000), Jitter::Decorrelated)
                    .map_err(|e| e.to_string())?;
                expect(
                    millis_of(delays(config, &mut low(), 3)),
                    vec![100, 100, 100],
                )?;
                expect(
                    millis_of(delays(config, &mut high(), 4)),
                    vec![300, 900, 1000, 1000],
                )
            },
        },
        Case {
            peer_test: "AWS SDKs standard retry mode: min(b * 2^i, 20s), b in [0, 1] s, 3 attempts",
            differs: None,
            check: || {
                let mut policy =
                    RetryPolicy::new(AWS_FULL_JITTER.config().map_err(|e| e.to_string())?);
                let mut request = policy.on_request(SimTime::ZERO);
                let first = policy.on_failure(SimTime::ZERO, &mut request, None, &mut high());
                expect(
                    first,
                    RetryDecision::Retry {
                        at: SimTime::ZERO.saturating_add(ms(1000)),
                    },
                )?;
                let at = SimTime::ZERO.saturating_add(ms(1000));
                let second = policy.on_failure(at, &mut request, None, &mut high());
                expect(
                    second,
                    RetryDecision::Retry {
                        at: at.saturating_add(ms(2000)),
                    },
                )?;
                expect(
                    policy.on_failure(at, &mut request, None, &mut high()),
                    RetryDecision::GiveUp(GiveUpReason::AttemptsExhausted),
                )
            },
        },
        Case {
            peer_test: "backon fibonacci.rs test_fibonacci_default (db212c0)",
            differs: None,
            check: || expect(retry_waits_ms(BACKON_FIBONACCI)?, vec![1000, 1000, 2000]),
        },
        Case {
            peer_test: "backon fibonacci.rs test_fibonacci_min_delay (db212c0)",
            differs: None,
            check: || {
                expect(
                    retry_waits_ms(backon(500, 60_000, 3))?,
                    vec![500, 500, 1000],
                )
            },
        },
        Case {
            peer_test: "backon fibonacci.rs test_fibonacci_max_delay (db212c0)",
            differs: None,
            check: || {
                expect(
                    retry_waits_ms(backon(1000, 2000, 4))?,
                    vec![1000, 1000, 2000, 2000],
                )
            },
        },
        Case {
            peer_test: "backon fibonacci.rs test_fibonacci_max_times (db212c0)",
            differs: None,
            check: || {
                expect(
                    retry_waits_ms(backon(1000, 60_000, 6))?,
                    vec![1000, 1000, 2000, 3000, 5000, 8000],
                )
            },
        },
    ]
}

#[test]
fn backoff_and_retry_peers() {
    let cases = cases();
    assert!(cases.len() >= 10, "{} cases", cases.len());
    let mut failed = Vec::new();
    for case in &cases {
        assert!(case.differs.is_none_or(|why| !why.is_empty()));
        if let Err(why) = (case.check)() {
            failed.push(format!("{}: {why}", case.peer_test));
        }
    }
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

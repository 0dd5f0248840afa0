//! Presets: the defaults of the libraries people run, as data, so a scenario names the
//! library (`preset = "resilience4j"`) instead of spelling every knob: breakers, retry
//! policies, and Redis clients' connection settings.
//!
//! This is the one place the values live: the scenario file reader starts from a preset's
//! table and lets the file override it key by key, `outagelab validate --explain` prints the
//! values that result, and the conformance tests (`model/tests/conformance_*.rs`) replay each
//! library's own test cases against its preset. Each table cites the library, its version and
//! where the value comes from; docs/scenario-format.md repeats the tables.
//!
//! What a preset cannot say, because the model has no such knob, is listed in its `notes`
//! (opossum's call timeout and its counting of rejected calls, Polly's second probe after a
//! break duration without an answer). The classifier (which errors count as failures, which
//! count neither way) stays the breaker's `counts` and `ignores` sets, as for any breaker; with
//! a preset and no `counts` written, the file reader sets it to every error, which is what each
//! of these libraries counts by default, and a preset's `uncounted_as` says what an error
//! outside `counts` is (resilience4j's unrecorded exceptions are successes, its ignored ones
//! are `ignores`).

use crate::backoff::{BackoffConfig, FACTOR_PERMILLE_ONE, Growth, Jitter};
use crate::breaker::{
    BreakerConfig, EvaluateOn, HalfOpenRule, LateFailures, SlowCalls, Threshold, Trip, UncountedAs,
    Window,
};
use crate::config::ConfigError;
use crate::retry::RetryConfig;
use crate::time::SimDuration;

/// A breaker's settings as a library ships them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerPreset {
    /// The name a scenario gives (`preset = "..."`).
    pub name: &'static str,
    /// The library, its version, and where the values are documented.
    pub source: &'static str,
    /// What the library does that the preset cannot express, or expresses approximately.
    pub notes: &'static str,
    pub trip: Trip,
    pub open_for: SimDuration,
    pub half_open_probes: u32,
    pub half_open_rule: HalfOpenRule,
    pub uncounted_as: UncountedAs,
    pub half_open_max_wait: Option<SimDuration>,
    /// Growth of consecutive openings, in thousandths (1000: none).
    pub open_for_factor_permille: u32,
    /// The ceiling of growing openings; `open_for` when they do not grow.
    pub open_for_max: SimDuration,
    pub evaluate_on: EvaluateOn,
    pub late_failures: LateFailures,
    pub slow_calls: Option<SlowCalls>,
    /// A time window shorter than this is kept as a single window, whatever the number of
    /// slots a longer one has (Polly's 200 ms: [`POLLY_SINGLE_WINDOW_BELOW`]); `None`: every
    /// time window has [`WINDOW_SLOTS_DEFAULT`] slots unless the file says.
    pub single_window_below: Option<SimDuration>,
    /// How long after the start the trip rule may not open the breaker (opossum's
    /// `allowWarmUp`, off by default).
    pub warm_up: Option<SimDuration>,
    /// Whether a failure rate must reach its threshold or pass it (opossum).
    pub threshold: Threshold,
}

/// The slots of a time window whose slots the scenario does not give.
pub const WINDOW_SLOTS_DEFAULT: u32 = 10;

/// Polly (v7's `AdvancedCircuitController`, v8's `HealthMetrics.Create`) keeps a sampling
/// duration shorter than `ResolutionOfCircuitTimer × NumberOfWindows` = 20 ms × 10 = 200 ms
/// as one window (`SingleHealthMetrics`), and a longer one as 10 (`RollingHealthMetrics`).
pub const POLLY_SINGLE_WINDOW_BELOW: SimDuration = SimDuration::from_millis(200);

impl BreakerPreset {
    /// The slots of a time window of `length` whose slots the scenario does not give: one
    /// below the preset's `single_window_below`, [`WINDOW_SLOTS_DEFAULT`] otherwise.
    pub fn window_slots(&self, length: SimDuration) -> u32 {
        window_slots(Some(self), length)
    }

    /// The preset's values as a breaker configuration. Every preset here is valid (a unit
    /// test builds each one).
    pub fn config(&self) -> Result<BreakerConfig, ConfigError> {
        let base = match self.trip {
            Trip::Consecutive { failures_max } => {
                BreakerConfig::new(failures_max, self.open_for, self.half_open_probes)
            }
            Trip::FailureRate {
                rate_permille,
                window,
                min_calls,
            } => BreakerConfig::failure_rate(
                rate_permille,
                window,
                min_calls,
                self.open_for,
                self.half_open_probes,
            ),
        }?;
        base.with_half_open_rule(self.half_open_rule)?
            .with_threshold(self.threshold)?
            .with_uncounted_as(self.uncounted_as)
            .with_half_open_max_wait(self.half_open_max_wait)?
            .with_open_growth(self.open_for_factor_permille, self.open_for_max)?
            .with_slow_calls(self.slow_calls)
            .map(|config| {
                config
                    .with_evaluate_on(self.evaluate_on)
                    .with_late_failures(self.late_failures)
                    .with_warm_up(self.warm_up)
            })
    }
}

/// The slots of a time window of `length` whose slots the scenario does not give, under
/// `preset` if there is one (see [`BreakerPreset::window_slots`]).
pub fn window_slots(preset: Option<&BreakerPreset>, length: SimDuration) -> u32 {
    match preset.and_then(|preset| preset.single_window_below) {
        Some(below) if length < below => 1,
        _ => WINDOW_SLOTS_DEFAULT,
    }
}

const fn secs(secs: u64) -> SimDuration {
    SimDuration::from_secs(secs)
}

/// resilience4j 2.2.0, `CircuitBreakerConfig` defaults (`DEFAULT_*` constants in
/// `CircuitBreakerConfig.java`; the same table in the "CircuitBreaker" page of
/// resilience4j.readme.io).
pub const RESILIENCE4J: BreakerPreset = BreakerPreset {
    name: "resilience4j",
    source: "resilience4j 2.2.0 CircuitBreakerConfig defaults: failureRateThreshold 50, \
             slidingWindowType COUNT_BASED, slidingWindowSize 100, minimumNumberOfCalls 100, \
             waitDurationInOpenState 60s, permittedNumberOfCallsInHalfOpenState 10, \
             maxWaitDurationInHalfOpenState 0 (wait for ever), slowCallRateThreshold 100 over \
             slowCallDurationThreshold 60s",
    notes: "an exception outside recordExceptions counts as a success (uncounted_as = \
            \"success\"), one in ignoreExceptions neither way (the breaker's ignores); \
            automaticTransitionFromOpenToHalfOpenEnabled false: half-open starts at the first \
            call after the wait, which is where outagelab starts half_open_max_wait too. \
            Cannot be expressed: the manual transitions (transitionToOpenState, \
            transitionToForcedOpenState, transitionToDisabledState, transitionToClosedState, \
            reset) are calls a program makes at run time, and a scenario has no event that \
            acts on a breaker (its faults act on servers, connections and the network; \
            enabled = false only switches a breaker off for a whole variant)",
    trip: Trip::FailureRate {
        rate_permille: 500,
        window: Window::Calls(100),
        min_calls: 100,
    },
    open_for: secs(60),
    half_open_probes: 10,
    half_open_rule: HalfOpenRule::FailureRate,
    uncounted_as: UncountedAs::Success,
    half_open_max_wait: None,
    open_for_factor_permille: FACTOR_PERMILLE_ONE,
    open_for_max: secs(60),
    evaluate_on: EvaluateOn::Any,
    late_failures: LateFailures::Ignored,
    slow_calls: Some(SlowCalls {
        duration: secs(60),
        rate_permille: 1000,
    }),
    single_window_below: None,
    warm_up: None,
    threshold: Threshold::Reached,
};

/// Polly 8.5 (`Polly.Core`), `CircuitBreakerStrategyOptions` defaults (pollydocs.org,
/// strategies/circuit-breaker, "Defaults").
pub const POLLY_V8: BreakerPreset = BreakerPreset {
    name: "polly-v8",
    source: "Polly 8.5 CircuitBreakerStrategyOptions defaults: FailureRatio 0.1, \
             MinimumThroughput 100, SamplingDuration 30s (kept in 10 windows; a \
             SamplingDuration under 200 ms is one window, HealthMetrics.Create), BreakDuration \
             5s, no BreakDurationGenerator; one probe in half-open",
    notes: "the ratio is compared only on a failure (evaluate_on = \"failure\"); an outcome \
            ShouldHandle rejects is a success; a probe with no answer after BreakDuration lets \
            Polly admit another probe, which outagelab does not model (it waits, or reopens \
            with half_open_max_wait); Polly's windows start at the first result after the \
            last one ended, outagelab's are aligned to multiples of their length from the \
            start",
    trip: Trip::FailureRate {
        rate_permille: 100,
        window: Window::Time {
            length: secs(30),
            slots: 10,
        },
        min_calls: 100,
    },
    open_for: secs(5),
    half_open_probes: 1,
    half_open_rule: HalfOpenRule::AllProbesSucceed,
    uncounted_as: UncountedAs::Success,
    half_open_max_wait: None,
    open_for_factor_permille: FACTOR_PERMILLE_ONE,
    open_for_max: secs(5),
    evaluate_on: EvaluateOn::Failure,
    late_failures: LateFailures::Ignored,
    slow_calls: None,
    single_window_below: Some(POLLY_SINGLE_WINDOW_BELOW),
    warm_up: None,
    threshold: Threshold::Reached,
};

/// Polly 7.2.4, `AdvancedCircuitBreaker`: it has no defaults, so the values are the wiki's
/// example (github.com/App-vNext/Polly/wiki/Advanced-Circuit-Breaker).
pub const POLLY_V7_ADVANCED: BreakerPreset = BreakerPreset {
    name: "polly-v7-advanced",
    source: "Polly 7.2.4 AdvancedCircuitBreaker, the wiki's example: failureThreshold 0.5, \
             samplingDuration 10s (10 windows; under 200 ms, one window), minimumThroughput \
             8, durationOfBreak 30s; one probe in half-open",
    notes: "the threshold is compared only on a failure; an exception the policy does not \
            handle is rethrown and counts neither way (uncounted_as = \"ignored\"), but in \
            half-open Polly v7 then admits the next probe only after another durationOfBreak, \
            where outagelab frees the probe's slot at once",
    trip: Trip::FailureRate {
        rate_permille: 500,
        window: Window::Time {
            length: secs(10),
            slots: 10,
        },
        min_calls: 8,
    },
    open_for: secs(30),
    half_open_probes: 1,
    half_open_rule: HalfOpenRule::AllProbesSucceed,
    uncounted_as: UncountedAs::Ignored,
    half_open_max_wait: None,
    open_for_factor_permille: FACTOR_PERMILLE_ONE,
    open_for_max: secs(30),
    evaluate_on: EvaluateOn::Failure,
    late_failures: LateFailures::Ignored,
    slow_calls: None,
    single_window_below: Some(POLLY_SINGLE_WINDOW_BELOW),
    warm_up: None,
    threshold: Threshold::Reached,
};

/// opossum 8.1 (Node.js), `CircuitBreaker` option defaults (README, "Options", and
/// `lib/circuit.js`).
pub const OPOSSUM: BreakerPreset = BreakerPreset {
    name: "opossum",
    source: "opossum 8.1 defaults: errorThresholdPercentage 50, resetTimeout 30s, \
             rollingCountTimeout 10s, rollingCountBuckets 10, volumeThreshold 0; one probe in \
             half-open; errorFilter'd errors emit success",
    notes: "opossum opens when the error rate is strictly above 50% (threshold = \
            \"exceeded\"); volumeThreshold 0 is min_calls 1; opossum counts rejected calls as fires and keeps its rolling window across \
            openings, outagelab counts only results and clears the window when it opens; \
            opossum's own call timeout (10s) is the scenario's command timeout here; \
            allowWarmUp false: with allowWarmUp true, write warm_up = rollingCountTimeout \
            (\"10s\"), during which no failure opens it",
    trip: Trip::FailureRate {
        rate_permille: 500,
        window: Window::Time {
            length: secs(10),
            slots: 10,
        },
        min_calls: 1,
    },
    open_for: secs(30),
    half_open_probes: 1,
    half_open_rule: HalfOpenRule::AllProbesSucceed,
    uncounted_as: UncountedAs::Success,
    half_open_max_wait: None,
    open_for_factor_permille: FACTOR_PERMILLE_ONE,
    open_for_max: secs(30),
    evaluate_on: EvaluateOn::Failure,
    late_failures: LateFailures::Ignored,
    slow_calls: None,
    single_window_below: None,
    warm_up: None,
    threshold: Threshold::Exceeded,
};

/// sony/gobreaker v2.4.0, `Settings` zero values (README and `v2/gobreaker.go` at fed8e9e).
pub const GOBREAKER: BreakerPreset = BreakerPreset {
    name: "gobreaker",
    source: "sony/gobreaker v2.4.0 Settings defaults (v2/gobreaker.go): MaxRequests 0 (= 1), \
             Interval 0 (counts never cleared while closed), BucketPeriod 0, Timeout 0 (= 60s), \
             ReadyToTrip ConsecutiveFailures > 5, IsSuccessful err == nil, IsExcluded none",
    notes: "MaxRequests consecutive successes close a half-open breaker, any failure reopens \
            it; IsSuccessful says which errors count (the breaker's counts, the others \
            successes) and IsExcluded which count neither way (its ignores); a result whose \
            request started in an earlier generation is dropped, and with Interval 0 a \
            generation ends only with a change of state: late_failures = \"ignored\". Not \
            modelled, for a file that writes a window: with an Interval and no BucketPeriod, \
            each interval (from the breaker's closing) is a generation of its own, so a \
            request that spans its end counts neither way, where outagelab's one-slot window \
            (from the start) counts it in the next; with a BucketPeriod a result counts in the \
            bucket its request started in, outagelab's in the slot it ends in",
    trip: Trip::Consecutive { failures_max: 6 },
    open_for: secs(60),
    half_open_probes: 1,
    half_open_rule: HalfOpenRule::AllProbesSucceed,
    uncounted_as: UncountedAs::Success,
    half_open_max_wait: None,
    open_for_factor_permille: FACTOR_PERMILLE_ONE,
    open_for_max: secs(60),
    evaluate_on: EvaluateOn::Failure,
    late_failures: LateFailures::Ignored,
    slow_calls: None,
    single_window_below: None,
    warm_up: None,
    threshold: Threshold::Reached,
};

/// Every breaker preset, in the order the documentation lists them.
pub const BREAKER_PRESETS: [BreakerPreset; 5] = [
    RESILIENCE4J,
    POLLY_V8,
    POLLY_V7_ADVANCED,
    OPOSSUM,
    GOBREAKER,
];

/// The breaker preset called `name`.
pub fn breaker_preset(name: &str) -> Option<&'static BreakerPreset> {
    BREAKER_PRESETS.iter().find(|preset| preset.name == name)
}

/// A retry policy's backoff and limits as a library ships them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPreset {
    pub name: &'static str,
    pub source: &'static str,
    pub notes: &'static str,
    /// Attempts, the first included.
    pub max_attempts: u32,
    pub backoff: SimDuration,
    pub backoff_factor_permille: u32,
    pub backoff_max: SimDuration,
    pub backoff_growth: Growth,
    pub jitter: Jitter,
    pub elapsed_max: Option<SimDuration>,
}

impl RetryPreset {
    /// The preset's values as a retry configuration, with no budget and no Retry-After limit.
    pub fn config(&self) -> Result<RetryConfig, ConfigError> {
        let backoff = BackoffConfig::new(
            self.backoff,
            self.backoff_factor_permille,
            self.backoff_max,
            self.jitter,
        )?
        .with_growth(self.backoff_growth)?;
        RetryConfig::new(self.max_attempts, backoff, None, None)?.with_elapsed_max(self.elapsed_max)
    }
}

/// The `backoff` crate 0.4.0, `ExponentialBackoff::default()` (`backoff::default` constants).
pub const BACKOFF_CRATE: RetryPreset = RetryPreset {
    name: "backoff-crate",
    source: "backoff 0.4.0 ExponentialBackoff::default(): initial_interval 500ms, \
             randomization_factor 0.5, multiplier 1.5, max_interval 60s, max_elapsed_time 15min",
    notes: "no attempt limit, only the elapsed time (max_attempts is the largest number); the \
            crate draws a float and rounds, outagelab draws an integer in the same range",
    max_attempts: u32::MAX,
    backoff: SimDuration::from_millis(500),
    backoff_factor_permille: 1500,
    backoff_max: secs(60),
    backoff_growth: Growth::Exponential,
    jitter: Jitter::Proportional {
        randomization_permille: 500,
    },
    elapsed_max: Some(secs(15 * 60)),
};

/// tokio-retry 0.3.0: `ExponentialBackoff::from_millis(10).map(jitter).take(3)`, the README's
/// example (the strategy has no defaults: `from_millis(b)` starts at `b` ms and multiplies by
/// `b`).
pub const TOKIO_RETRY: RetryPreset = RetryPreset {
    name: "tokio-retry",
    source: "tokio-retry 0.3.0 README: ExponentialBackoff::from_millis(10).map(jitter).take(3): \
             10ms, 100ms, 1s, each scaled by a uniform draw in [0, 1)",
    notes: "no max_delay (the delay saturates at u64::MAX ms there, at the largest duration \
            here); tokio-retry clamps a max_delay below the first delay, outagelab refuses a \
            backoff_max below backoff",
    max_attempts: 4,
    backoff: SimDuration::from_millis(10),
    backoff_factor_permille: 10_000,
    backoff_max: SimDuration::MAX,
    backoff_growth: Growth::Exponential,
    jitter: Jitter::Full,
    elapsed_max: None,
};

/// AWS: the full-jitter formula of "Exponential Backoff and Jitter" (AWS Architecture Blog,
/// 2015) with the values of the SDKs' standard retry mode (AWS SDKs and Tools reference
/// guide, "Retry behavior": `min(b · 2^i, 20 s)`, `b` uniform in [0, 1] s, 3 attempts).
pub const AWS_FULL_JITTER: RetryPreset = RetryPreset {
    name: "aws-full-jitter",
    source: "AWS Architecture Blog \"Exponential Backoff and Jitter\" (full jitter: \
             random_between(0, min(cap, base * 2^attempt))), with the AWS SDKs' standard mode: \
             base 1s, cap 20s, max_attempts 3",
    notes: "the SDKs' retry quota (token bucket) is not part of the preset: give \
            budget_percent for a budget",
    max_attempts: 3,
    backoff: secs(1),
    backoff_factor_permille: 2000,
    backoff_max: secs(20),
    backoff_growth: Growth::Exponential,
    jitter: Jitter::Full,
    elapsed_max: None,
};

/// backon 1.5, `FibonacciBuilder::default()` (`backon/src/backoff/fibonacci.rs` at db212c0).
pub const BACKON_FIBONACCI: RetryPreset = RetryPreset {
    name: "backon-fibonacci",
    source: "backon 1.5.2 FibonacciBuilder::default(): min_delay 1s, max_delay 60s, max_times 3, \
             jitter false: delays 1s, 1s, 2s (then 3s, 5s, 8s, ... with more times)",
    notes: "max_times counts retries, max_attempts the first attempt too (4); backon's \
            with_jitter() adds min_delay times a uniform draw to each delay, which no \
            outagelab jitter does",
    max_attempts: 4,
    backoff: secs(1),
    backoff_factor_permille: FACTOR_PERMILLE_ONE,
    backoff_max: secs(60),
    backoff_growth: Growth::Fibonacci,
    jitter: Jitter::None,
    elapsed_max: None,
};

/// Every retry preset, in the order the documentation lists them.
pub const RETRY_PRESETS: [RetryPreset; 4] = [
    BACKOFF_CRATE,
    TOKIO_RETRY,
    AWS_FULL_JITTER,
    BACKON_FIBONACCI,
];

/// The retry preset called `name`.
pub fn retry_preset(name: &str) -> Option<&'static RetryPreset> {
    RETRY_PRESETS.iter().find(|preset| preset.name == name)
}

/// What a client does when its connection is lost (the scenario's `reconnect` key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientReconnect {
    /// Reconnects after `min(n · reconnect_delay, reconnect_delay_max)`.
    Always,
    /// The first connection is the only one.
    Never,
}

/// How a client's delay between reconnect attempts grows (the scenario's `reconnect_growth`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReconnectGrowth {
    /// Attempt `n` waits `min(n · reconnect_delay, reconnect_delay_max)` (ioredis'
    /// `retryStrategy`).
    #[default]
    Linear,
    /// Attempt `n` waits `min(reconnect_delay · 2^(n-1), reconnect_delay_max)` (lettuce's
    /// `Delay.exponential()`).
    Doubling,
}

impl ReconnectGrowth {
    /// The delay before reconnect attempt `attempt` (1-based), capped at `max`; exact integer
    /// arithmetic, saturating at `max`.
    pub fn delay(self, delay: SimDuration, max: SimDuration, attempt: u32) -> SimDuration {
        let factor = match self {
            ReconnectGrowth::Linear => Some(u64::from(attempt)),
            ReconnectGrowth::Doubling => 1u64.checked_shl(attempt.saturating_sub(1)),
        };
        factor
            .and_then(|factor| delay.checked_mul(factor))
            .map_or(max, |delay| delay.min(max))
    }
}

/// A Redis client's connection settings as a library ships them (the keys of a scenario's
/// `[connections.<name>]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientPreset {
    pub name: &'static str,
    pub source: &'static str,
    pub notes: &'static str,
    /// `None`: wait for a reply for ever.
    pub command_timeout: Option<SimDuration>,
    pub offline_queue: bool,
    /// Times a command may outlive a lost link; `None` is unlimited.
    pub max_retries: Option<u32>,
    pub connect_timeout: SimDuration,
    pub reconnect_delay: SimDuration,
    pub reconnect_delay_max: SimDuration,
    pub reconnect_growth: ReconnectGrowth,
    pub reconnect: ClientReconnect,
    /// `None`: no limit on the commands a connection holds.
    pub pending_max: Option<u32>,
}

/// ioredis 5.x defaults (`lib/redis/RedisOptions.ts`): they are also the scenario format's
/// defaults for a connection.
pub const IOREDIS: ClientPreset = ClientPreset {
    name: "ioredis",
    source: "ioredis 5.x defaults: commandTimeout none, enableOfflineQueue true, \
             maxRetriesPerRequest 20, connectTimeout 10000 ms, retryStrategy \
             min(times * 50, 2000) ms, no queue limit",
    notes: "ioredis counts maxRetriesPerRequest per connection and flushes its whole queue \
            every max + 1 failed attempts; outagelab counts per command",
    command_timeout: None,
    offline_queue: true,
    max_retries: Some(20),
    connect_timeout: secs(10),
    reconnect_delay: SimDuration::from_millis(50),
    reconnect_delay_max: secs(2),
    reconnect_growth: ReconnectGrowth::Linear,
    reconnect: ClientReconnect::Always,
    pending_max: None,
};

/// redis-rs 1.8.1 (the version `Cargo.lock` pins, which `outagelab live` runs),
/// `Client::get_multiplexed_async_connection()` with the default `AsyncConnectionConfig`
/// (`src/client.rs`: `DEFAULT_RESPONSE_TIMEOUT`, `DEFAULT_CONNECTION_TIMEOUT`).
pub const REDIS_RS_MULTIPLEXED: ClientPreset = ClientPreset {
    name: "redis-rs-multiplexed",
    source: "redis-rs 1.8.1 MultiplexedConnection, default AsyncConnectionConfig \
             (src/client.rs): response_timeout 500 ms, connection_timeout 1 s, no \
             reconnection (a dropped connection fails every pending and later command)",
    notes: "connect_timeout is unused here because the connection exists at start and is \
            never replaced; the response timeout also runs while a command waits for a place \
            in the request channel, which holds 50 commands (pipeline_buffer_size) and makes \
            further callers wait: outagelab does not model that channel (no pending_max), so \
            its timeout runs from the send",
    command_timeout: Some(SimDuration::from_millis(500)),
    offline_queue: false,
    max_retries: Some(0),
    connect_timeout: secs(1),
    reconnect_delay: SimDuration::from_millis(50),
    reconnect_delay_max: secs(2),
    reconnect_growth: ReconnectGrowth::Linear,
    reconnect: ClientReconnect::Never,
    pending_max: None,
};

/// lettuce 7.7 (redis/lettuce at b0bcdd8), a `RedisClient` connection with the default
/// `ClientOptions` and `ClientResources`.
pub const LETTUCE: ClientPreset = ClientPreset {
    name: "lettuce",
    source: "lettuce 7.7 defaults: RedisURI.DEFAULT_TIMEOUT 60 s (applied to commands by \
             ClientOptions.DEFAULT_TIMEOUT_OPTIONS = TimeoutOptions.enabled()), \
             DEFAULT_AUTO_RECONNECT true with DisconnectedBehavior.DEFAULT (commands are \
             accepted while disconnected), DEFAULT_REPLAY_FILTER replays every queued command \
             after a reconnect, DEFAULT_REQUEST_QUEUE_SIZE Integer.MAX_VALUE, \
             SocketOptions.DEFAULT_CONNECT_TIMEOUT 10 s, ClientResources.DEFAULT_RECONNECT_DELAY \
             Delay.exponential(): 2^(n-1) ms, from 0 to 30 s",
    notes: "one multiplexed connection, as modelled; lettuce re-sends a command after every \
            reconnect until it times out (max_retries unlimited), so a write may run twice \
            (at least once); lettuce's timeout starts when the command is written to the \
            endpoint, offline or not, which is when outagelab's starts",
    command_timeout: Some(secs(60)),
    offline_queue: true,
    max_retries: None,
    connect_timeout: secs(10),
    reconnect_delay: SimDuration::from_millis(1),
    reconnect_delay_max: secs(30),
    reconnect_growth: ReconnectGrowth::Doubling,
    reconnect: ClientReconnect::Always,
    pending_max: None,
};

/// Every client preset, in the order the documentation lists them.
pub const CLIENT_PRESETS: [ClientPreset; 3] = [IOREDIS, REDIS_RS_MULTIPLEXED, LETTUCE];

/// The client preset called `name`.
pub fn client_preset(name: &str) -> Option<&'static ClientPreset> {
    CLIENT_PRESETS.iter().find(|preset| preset.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_a_valid_config_and_names_are_unique() {
        for preset in BREAKER_PRESETS {
            let config = preset
                .config()
                .unwrap_or_else(|e| panic!("{}: {e}", preset.name));
            assert_eq!(config.trip(), preset.trip);
            assert_eq!(config.half_open_rule(), preset.half_open_rule);
            assert_eq!(config.open_for_max(), preset.open_for_max);
            assert!(!preset.source.is_empty() && !preset.notes.is_empty());
            assert_eq!(
                breaker_preset(preset.name).map(|p| p.name),
                Some(preset.name)
            );
        }
        for preset in RETRY_PRESETS {
            let config = preset
                .config()
                .unwrap_or_else(|e| panic!("{}: {e}", preset.name));
            assert_eq!(config.max_attempts(), preset.max_attempts);
            assert_eq!(config.elapsed_max(), preset.elapsed_max);
            assert_eq!(retry_preset(preset.name).map(|p| p.name), Some(preset.name));
        }
        let mut names: Vec<&str> = BREAKER_PRESETS.iter().map(|p| p.name).collect();
        names.extend(RETRY_PRESETS.iter().map(|p| p.name));
        names.extend(CLIENT_PRESETS.iter().map(|p| p.name));
        for preset in CLIENT_PRESETS {
            assert!(
                preset.reconnect_delay <= preset.reconnect_delay_max,
                "{}",
                preset.name
            );
            assert!(!preset.connect_timeout.is_zero() && !preset.reconnect_delay.is_zero());
            assert_eq!(
                client_preset(preset.name).map(|p| p.name),
                Some(preset.name)
            );
        }
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
        assert_eq!(breaker_preset("hystrix"), None);
    }

    /// A preset's own time window has the slots its rule gives a window of that length.
    #[test]
    fn every_preset_s_window_follows_its_slot_rule() {
        for preset in BREAKER_PRESETS {
            if let Trip::FailureRate {
                window: Window::Time { length, slots },
                ..
            } = preset.trip
            {
                assert_eq!(preset.window_slots(length), slots, "{}", preset.name);
            }
        }
    }

    /// Polly's `HealthMetricsTests.Create_Ok` (App-vNext/Polly 173d6d1,
    /// `test/Polly.Core.Tests/CircuitBreaker/Health/HealthMetricsTests.cs`): 100 and 199 ms
    /// are one window (`SingleHealthMetrics`), 200 and 201 ms are ten (`RollingHealthMetrics`).
    /// The other presets keep ten slots for any length.
    #[test]
    fn polly_keeps_a_sampling_duration_under_200_ms_as_one_window() {
        let ms = SimDuration::from_millis;
        for polly in [POLLY_V8, POLLY_V7_ADVANCED] {
            let slots: Vec<u32> = [100, 199, 200, 201]
                .map(|length| polly.window_slots(ms(length)))
                .to_vec();
            assert_eq!(slots, [1, 1, 10, 10], "{}", polly.name);
        }
        for other in [RESILIENCE4J, OPOSSUM, GOBREAKER] {
            assert_eq!(other.window_slots(ms(100)), 10, "{}", other.name);
        }
        assert_eq!(window_slots(None, ms(100)), WINDOW_SLOTS_DEFAULT);
    }
}

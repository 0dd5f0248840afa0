//! The scenario file as written: serde types that mirror the TOML, with spans where a later
//! check needs to point at a value. Nothing here is validated beyond its TOML type; see
//! `validate.rs` for the rules.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawScenario {
    pub scenario: RawHeader,
    #[serde(default)]
    pub run: RawRun,
    #[serde(default)]
    pub metrics: RawMetrics,
    #[serde(default)]
    pub servers: BTreeMap<String, RawServer>,
    #[serde(default)]
    pub connections: BTreeMap<String, RawConnection>,
    #[serde(default)]
    pub databases: BTreeMap<String, RawDatabase>,
    #[serde(default)]
    pub keys: BTreeMap<String, RawKeys>,
    #[serde(default)]
    pub breakers: BTreeMap<String, RawBreaker>,
    #[serde(default)]
    pub bulkheads: BTreeMap<String, RawBulkhead>,
    #[serde(default)]
    pub semaphores: BTreeMap<String, RawSemaphore>,
    #[serde(default)]
    pub retries: BTreeMap<String, RawRetry>,
    #[serde(default)]
    pub caches: BTreeMap<String, RawCache>,
    #[serde(default)]
    pub rate_limits: BTreeMap<String, RawRateLimit>,
    #[serde(default)]
    pub kv_stores: BTreeMap<String, RawKvStore>,
    #[serde(default)]
    pub throttles: BTreeMap<String, RawThrottle>,
    #[serde(default)]
    pub flows: BTreeMap<String, RawFlow>,
    #[serde(default)]
    pub loads: BTreeMap<String, RawLoad>,
    #[serde(default)]
    pub faults: BTreeMap<String, RawFault>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeader {
    pub name: Spanned<String>,
    #[allow(dead_code)] // shown to readers of the file, not used by the run
    pub description: Option<String>,
    pub seed: Option<Spanned<u64>>,
    /// Expectations every variant must meet.
    #[serde(default)]
    pub expect: Vec<Spanned<String>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRun {
    pub horizon: Option<Spanned<Text>>,
    pub time_max: Option<Spanned<Text>>,
    pub events_max: Option<Spanned<u64>>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawMetrics {
    pub bucket: Option<Spanned<Text>>,
    pub percentile_rule: Option<PercentileRuleName>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PercentileRuleName {
    NearestRank,
    FloorIndex,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub command_cost: Option<Spanned<Text>>,
    pub byte_rate: Option<Spanned<Text>>,
    pub persistence: Option<bool>,
    #[serde(default)]
    pub preload: Vec<Spanned<RawPreload>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPreload {
    pub key: Spanned<String>,
    pub count: Option<Spanned<u64>>,
    pub value: Option<Spanned<Size>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConnection {
    pub server: Spanned<String>,
    pub latency: Option<Spanned<Text>>,
    pub bandwidth: Option<Spanned<Text>>,
    pub command_timeout: Option<Spanned<Text>>,
    pub offline_queue: Option<Spanned<bool>>,
    pub max_retries: Option<Spanned<RetryLimit>>,
    pub connect_timeout: Option<Spanned<Text>>,
    pub reconnect_delay: Option<Spanned<Text>>,
    pub reconnect_delay_max: Option<Spanned<Text>>,
    pub connected_at_start: Option<bool>,
    pub reconnect: Option<Spanned<ReconnectName>>,
    pub pending_max: Option<Spanned<u64>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReconnectName {
    Always,
    Never,
    Slot,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDatabase {
    pub latency: Spanned<RawLatency>,
    pub capacity: Option<Spanned<u64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKeys {
    pub count: Option<Spanned<u64>>,
    pub distribution: Option<Spanned<KeyDistributionName>>,
    pub hot_keys: Option<Spanned<u64>>,
    pub hot_share_percent: Option<Spanned<f64>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyDistributionName {
    Uniform,
    Hot,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    pub enabled: Option<bool>,
    /// Consecutive-failure rule.
    pub failures: Option<Spanned<u64>>,
    /// Failure-rate rule: the rate, and a window of calls or of time.
    pub failure_rate_percent: Option<Spanned<f64>>,
    pub window_calls: Option<Spanned<u64>>,
    pub window: Option<Spanned<Text>>,
    pub window_slots: Option<Spanned<u64>>,
    pub min_calls: Option<Spanned<u64>>,
    pub open_for: Spanned<Text>,
    pub half_open_probes: Option<Spanned<u64>>,
    pub counts: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBulkhead {
    pub enabled: Option<bool>,
    pub max_concurrent: Spanned<u64>,
    pub queue: Spanned<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSemaphore {
    pub enabled: Option<bool>,
    pub max_in_flight: Option<Spanned<u64>>,
    pub max_bytes: Option<Spanned<Size>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRateLimit {
    pub enabled: Option<bool>,
    pub algorithm: Option<RateAlgorithmName>,
    pub capacity: Spanned<u64>,
    pub rate: Spanned<f64>,
    pub store: Option<Spanned<String>>,
    pub when_unreachable: Option<WhenUnreachableName>,
    pub fail_closed_retry_after: Option<Spanned<Text>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RateAlgorithmName {
    TokenBucket,
    Gcra,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhenUnreachableName {
    Open,
    Closed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    pub max_entries: Spanned<u64>,
    pub max_bytes: Spanned<Size>,
    pub ttl: Spanned<Text>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOpName {
    Get,
    Put,
    Invalidate,
    Flush,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKvStore {
    pub read_latency: Spanned<RawLatency>,
    pub write_latency: Spanned<RawLatency>,
    pub staleness_max: Option<Spanned<Text>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawThrottle {
    pub enabled: Option<bool>,
    pub form: Spanned<ThrottleFormName>,
    pub inflight_max: Spanned<u64>,
    pub retry_after: Option<Spanned<Text>>,
    pub counter_ttl: Option<Spanned<Text>>,
    pub ttl_mode: Option<Spanned<TtlModeName>>,
    pub store: Option<Spanned<String>>,
    pub release_loss_percent: Option<Spanned<f64>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThrottleFormName {
    Atomic,
    Kv,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TtlModeName {
    Fixed,
    Refreshed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRetry {
    pub enabled: Option<bool>,
    pub max_attempts: Spanned<u64>,
    pub backoff: Spanned<Text>,
    pub backoff_factor: Option<Spanned<f64>>,
    pub backoff_max: Option<Spanned<Text>>,
    pub jitter: Option<JitterName>,
    pub budget_percent: Option<Spanned<f64>>,
    pub budget_min_per_second: Option<Spanned<u64>>,
    pub budget_window: Option<Spanned<Text>>,
    pub retry_on: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterName {
    None,
    Full,
    Equal,
    Decorrelated,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFlow {
    pub steps: Spanned<Vec<Spanned<RawStep>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub redis: Option<Spanned<RedisCommandName>>,
    pub db: Option<Spanned<String>>,
    pub work: Option<Spanned<Text>>,
    pub cache: Option<Spanned<String>>,
    /// A cache op (`get`, `put`, `invalidate`, `flush`) or a throttle op (`acquire`,
    /// `release`).
    pub op: Option<Spanned<String>>,
    pub throttle: Option<Spanned<String>>,
    pub rate_limit: Option<Spanned<String>>,
    pub connection: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
    pub value: Option<Spanned<Size>>,
    pub ttl: Option<Spanned<Text>>,
    pub timeout: Option<Spanned<Text>>,
    /// A database step's own latency (else the database's).
    pub latency: Option<Spanned<RawLatency>>,
    /// A database step's advisory lock: a key family.
    pub lock: Option<Spanned<String>>,
    pub breaker: Option<Spanned<String>>,
    pub bulkhead: Option<Spanned<String>>,
    pub semaphore: Option<Spanned<String>>,
    pub retry: Option<Spanned<String>>,
    pub on_error: Option<OnErrorName>,
    /// `"next"`, `"finish"`, or the label of a later step.
    pub on_hit: Option<Spanned<String>>,
    /// A name for this step, for `on_hit` to jump to.
    pub label: Option<Spanned<String>>,
    /// Runs even when an earlier step failed the request.
    pub finally: Option<bool>,
    /// On a reconnect slot, replay the step's write after a connection-level failure too.
    pub replay_writes: Option<Spanned<bool>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum RedisCommandName {
    #[serde(rename = "GET")]
    Get,
    #[serde(rename = "SET")]
    Set,
    #[serde(rename = "SET NX PX")]
    SetNxPx,
    #[serde(rename = "INCR")]
    Incr,
    #[serde(rename = "DEL")]
    Del,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnErrorName {
    Fail,
    Next,
    Ignore,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLoad {
    pub enabled: Option<bool>,
    pub flow: Spanned<String>,
    pub arrivals: Spanned<ArrivalsName>,
    pub rate: Option<Spanned<f64>>,
    pub count: Option<Spanned<u64>>,
    pub duration: Option<Spanned<Text>>,
    pub start: Option<Spanned<Text>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArrivalsName {
    Even,
    Poisson,
    Burst,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawFault {
    pub target: Spanned<String>,
    pub kind: FaultKindName,
    pub at: Spanned<Text>,
    pub duration: Option<Spanned<Text>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKindName {
    Pause,
    Hang,
    Stop,
    Kill,
}

/// A `[[variant]]` entry, without its `patch` (which is merged into the document, not
/// deserialised).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVariant {
    pub name: Spanned<String>,
    #[allow(dead_code)] // shown to readers of the file, not used by the run
    pub description: Option<String>,
    #[serde(default)]
    pub expect: Vec<Spanned<String>>,
}

/// The `[sweep]` table, without its `values` (which are inserted into the document).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSweep {
    pub parameter: Spanned<String>,
    pub label: Option<String>,
    /// Expectations by swept value, e.g. `"60" = ["..."]`.
    #[serde(default)]
    pub expect: BTreeMap<String, Vec<Spanned<String>>>,
}

/// A quantity written as a string with a unit (a duration or a bandwidth); a bare number is
/// rejected with a hint, because `timeout = 100` could mean anything.
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct TextVisitor;
        impl Visitor<'_> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity with a unit, such as \"100ms\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Text, E> {
                Ok(Text(text.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Text, E> {
                Err(E::custom(format!(
                    "`{number}` has no unit: write it as a string with a unit, e.g. \"{number}ms\""
                )))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Text, E> {
                self.visit_i64(number as i64)
            }
            fn visit_f64<E: de::Error>(self, number: f64) -> Result<Text, E> {
                Err(E::custom(format!(
                    "`{number}` has no unit: write it as a string with a unit, e.g. \"{number}s\""
                )))
            }
        }
        deserializer.deserialize_any(TextVisitor)
    }
}

/// A size: a whole number of bytes, or a string with a unit such as `"2MiB"`.
pub enum Size {
    Bytes(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SizeVisitor;
        impl Visitor<'_> for SizeVisitor {
            type Value = Size;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a size: a number of bytes or a string such as \"2MiB\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Size, E> {
                Ok(Size::Text(text.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<Size, E> {
                u64::try_from(number)
                    .map(Size::Bytes)
                    .map_err(|_| E::custom(format!("a size cannot be negative ({number})")))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<Size, E> {
                Ok(Size::Bytes(number))
            }
        }
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// `max_retries`: a count, or `"unlimited"`.
pub enum RetryLimit {
    Count(u64),
    Unlimited,
}

impl<'de> Deserialize<'de> for RetryLimit {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LimitVisitor;
        impl Visitor<'_> for LimitVisitor {
            type Value = RetryLimit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number of retries or \"unlimited\"")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<RetryLimit, E> {
                match text {
                    "unlimited" => Ok(RetryLimit::Unlimited),
                    _ => Err(E::custom(format!(
                        "`{text}` is not a retry limit: write a number or \"unlimited\""
                    ))),
                }
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<RetryLimit, E> {
                u64::try_from(number)
                    .map(RetryLimit::Count)
                    .map_err(|_| E::custom(format!("retries cannot be negative ({number})")))
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<RetryLimit, E> {
                Ok(RetryLimit::Count(number))
            }
        }
        deserializer.deserialize_any(LimitVisitor)
    }
}

/// A database latency: a constant duration (`"50ms"`) or a table naming a distribution.
pub enum RawLatency {
    Constant(Text),
    Distribution(RawDistribution),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDistribution {
    pub distribution: Spanned<DistributionName>,
    pub min: Option<Spanned<Text>>,
    pub max: Option<Spanned<Text>>,
    pub mean: Option<Spanned<Text>>,
}

#[derive(Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistributionName {
    Uniform,
    Exponential,
}

impl<'de> Deserialize<'de> for RawLatency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LatencyVisitor;
        impl<'de> Visitor<'de> for LatencyVisitor {
            type Value = RawLatency;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a duration such as \"50ms\", or a table such as \
                     { distribution = \"uniform\", min = \"49ms\", max = \"51ms\" }",
                )
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<RawLatency, E> {
                Ok(RawLatency::Constant(Text(text.to_owned())))
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<RawLatency, E> {
                Text::deserialize(de::value::I64Deserializer::new(number)).map(RawLatency::Constant)
            }
            fn visit_map<M: MapAccess<'de>>(self, map: M) -> Result<RawLatency, M::Error> {
                RawDistribution::deserialize(de::value::MapAccessDeserializer::new(map))
                    .map(RawLatency::Distribution)
            }
        }
        deserializer.deserialize_any(LatencyVisitor)
    }
}

//! From the file as written ([`RawScenario`]) to a scenario the simulator can run
//! ([`Scenario`]): defaults applied, names resolved to ids, every value checked. Problems are
//! collected, each pointing at the value (or key) at fault, rather than stopping at the first.

use std::collections::{BTreeMap, BTreeSet};
use std::num::NonZeroU32;
use std::ops::Range;

use outagelab_model::ConfigError;
use outagelab_model::backoff::{BackoffConfig, FACTOR_PERMILLE_ONE, Jitter};
use outagelab_model::breaker::{BreakerConfig, Window};
use outagelab_model::bulkhead::BulkheadConfig;
use outagelab_model::cache::CacheConfig;
use outagelab_model::rate_limit::{
    Algorithm, BucketConfig, RateLimiterConfig, TokenRate, WhenStoreUnreachable,
};
use outagelab_model::reconnect::ReconnectConfig;
use outagelab_model::retry::{RetryBudgetConfig, RetryConfig};
use outagelab_model::semaphore::SemaphoreConfig;
use outagelab_model::throttle::{CounterTtl, ThrottleConfig};
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{Outcome, PercentileRule};
use outagelab_sim::BUCKETS_MAX;
use outagelab_sim::scenario::*;
use toml::Spanned;
use toml::de::DeValue;

use crate::diagnostic::{Diagnostic, Source};
use crate::document::Table;
use crate::raw::*;
use crate::units::{parse_bandwidth, parse_duration, parse_size};

/// Defaults for what a file may leave out; the reference (docs/scenario-format.md) lists them.
mod default {
    pub const SEED: u64 = 1;
    pub const BUCKET: &str = "100ms";
    pub const COMMAND_COST: &str = "5us";
    pub const LATENCY: &str = "100us";
    pub const MAX_RETRIES: u32 = 20;
    pub const CONNECT_TIMEOUT: &str = "10s";
    pub const RECONNECT_DELAY: &str = "50ms";
    pub const RECONNECT_DELAY_MAX: &str = "2s";
    /// A reconnect slot's backoff after a failed attempt, doubling to the maximum (seed 001).
    pub const SLOT_BACKOFF: &str = "100ms";
    pub const SLOT_BACKOFF_MAX: &str = "5s";
    pub const VALUE: u64 = 64;
}

/// Bounds on sizes that would exhaust memory rather than describe a system.
mod limit {
    pub const KEYS_PER_FAMILY: u64 = 10_000_000;
    pub const VALUE_BYTES: u64 = 512 * 1024 * 1024;
    pub const BURST: u64 = 10_000_000;
    pub const QUEUE: u64 = 10_000_000;
}

pub(crate) struct Validator<'a> {
    source: &'a Source<'a>,
    root: &'a Table<'a>,
    pub errors: Vec<Diagnostic>,
}

/// Names of every resource, each mapped to its index (resources are numbered in name order).
struct Names<'r> {
    servers: BTreeMap<&'r str, u32>,
    connections: BTreeMap<&'r str, u32>,
    databases: BTreeMap<&'r str, u32>,
    keys: BTreeMap<&'r str, u32>,
    breakers: BTreeMap<&'r str, u32>,
    bulkheads: BTreeMap<&'r str, u32>,
    semaphores: BTreeMap<&'r str, u32>,
    retries: BTreeMap<&'r str, u32>,
    caches: BTreeMap<&'r str, u32>,
    rate_limits: BTreeMap<&'r str, u32>,
    /// Rate limiters that keep their buckets in a store (their steps name a key).
    rate_limits_with_store: BTreeSet<&'r str>,
    kv_stores: BTreeMap<&'r str, u32>,
    throttles: BTreeMap<&'r str, u32>,
    flows: BTreeMap<&'r str, u32>,
}

fn index<V>(map: &BTreeMap<String, V>) -> BTreeMap<&str, u32> {
    map.keys()
        .enumerate()
        .map(|(index, name)| (name.as_str(), index as u32))
        .collect()
}

impl<'a> Validator<'a> {
    pub fn new(source: &'a Source<'a>, root: &'a Table<'a>) -> Self {
        Validator {
            source,
            root,
            errors: Vec::new(),
        }
    }

    pub fn error(
        &mut self,
        span: Option<Range<usize>>,
        key: impl Into<String>,
        message: impl Into<String>,
    ) {
        self.errors.push(self.source.diagnostic(span, key, message));
    }

    /// Span of the key at `path` in the document, for problems with a name or a table.
    fn key_span(&self, path: &[&str]) -> Option<Range<usize>> {
        let (last, parents) = path.split_last()?;
        let mut table = self.root;
        for part in parents {
            match table.get(*part).map(Spanned::get_ref) {
                Some(DeValue::Table(inner)) => table = inner,
                _ => return None,
            }
        }
        table.get_key_value(*last).map(|(key, _)| key.span())
    }

    fn duration(&mut self, value: &Spanned<Text>, key: &str) -> Option<SimDuration> {
        match parse_duration(&value.get_ref().0) {
            Ok(nanos) => Some(SimDuration::from_nanos(nanos)),
            Err(message) => {
                self.error(Some(value.span()), key, message);
                None
            }
        }
    }

    /// A duration that must be longer than zero; `why` says what zero would mean.
    fn positive_duration(
        &mut self,
        value: &Spanned<Text>,
        key: &str,
        why: &str,
    ) -> Option<SimDuration> {
        let duration = self.duration(value, key)?;
        if duration.is_zero() {
            self.error(
                Some(value.span()),
                key,
                format!("must be longer than zero ({why})"),
            );
            return None;
        }
        Some(duration)
    }

    fn duration_or(
        &mut self,
        value: &Option<Spanned<Text>>,
        key: &str,
        default: &str,
    ) -> SimDuration {
        match value {
            Some(value) => self.duration(value, key).unwrap_or_default(),
            None => SimDuration::from_nanos(parse_duration(default).expect("defaults parse")),
        }
    }

    fn bandwidth(&mut self, value: &Spanned<Text>, key: &str) -> Option<ByteRate> {
        match parse_bandwidth(&value.get_ref().0) {
            Ok(bytes) => ByteRate::new(bytes).or_else(|| {
                self.error(
                    Some(value.span()),
                    key,
                    "must be more than zero bytes per second",
                );
                None
            }),
            Err(message) => {
                self.error(Some(value.span()), key, message);
                None
            }
        }
    }

    /// A size in bytes, of any magnitude.
    fn size_any(&mut self, value: &Spanned<Size>, key: &str) -> Option<u64> {
        match value.get_ref() {
            Size::Bytes(bytes) => Some(*bytes),
            Size::Text(text) => match parse_size(text) {
                Ok(bytes) => Some(bytes),
                Err(message) => {
                    self.error(Some(value.span()), key, message);
                    None
                }
            },
        }
    }

    /// The size of one Redis value (at most 512 MiB, Redis' limit).
    fn size(&mut self, value: &Spanned<Size>, key: &str) -> Option<u32> {
        let bytes = self.size_any(value, key)?;
        if bytes > limit::VALUE_BYTES {
            self.error(
                Some(value.span()),
                key,
                format!("{bytes} bytes is above Redis' limit of 512MiB for one value"),
            );
            return None;
        }
        Some(bytes as u32)
    }

    /// A count that must be in `min..=max`.
    fn count(
        &mut self,
        value: &Spanned<u64>,
        key: &str,
        min: u64,
        max: u64,
        why: &str,
    ) -> Option<u64> {
        let count = *value.get_ref();
        if count < min {
            self.error(
                Some(value.span()),
                key,
                format!("must be at least {min} ({why})"),
            );
            None
        } else if count > max {
            self.error(
                Some(value.span()),
                key,
                format!("{count} is above the limit of {max}"),
            );
            None
        } else {
            Some(count)
        }
    }

    fn reference(
        &mut self,
        value: &Spanned<String>,
        key: &str,
        kind: &str,
        names: &BTreeMap<&str, u32>,
    ) -> Option<u32> {
        let name = value.get_ref().as_str();
        names.get(name).copied().or_else(|| {
            let known: Vec<&str> = names.keys().copied().collect();
            let message = if known.is_empty() {
                format!("unknown {kind} `{name}`: the scenario defines none")
            } else {
                format!("unknown {kind} `{name}` (defined: {})", known.join(", "))
            };
            self.error(Some(value.span()), key, message);
            None
        })
    }

    /// Reports a policy's rejected config at the key it came from. Policies name their fields
    /// in their own units; the few that the file writes differently are renamed here.
    fn config_error(&mut self, error: ConfigError, prefix: &str, spans: &[(&str, Range<usize>)]) {
        let span = spans
            .iter()
            .find(|(field, _)| *field == error.field)
            .map(|(_, span)| span.clone());
        let key = match error.field {
            "failure_rate_permille" => "failure_rate_percent",
            "window_length" => "window",
            field => field,
        };
        let reason = if error.field == "failure_rate_permille" {
            format!("{} (in tenths of a percent)", error.reason)
        } else {
            error.reason
        };
        self.error(span, format!("{prefix}.{key}"), reason);
    }

    fn check_names<V>(&mut self, section: &str, map: &BTreeMap<String, V>) {
        for name in map.keys() {
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid {
                let span = self.key_span(&[section, name]);
                self.error(
                    span,
                    format!("{section}.{name}"),
                    "a name may hold only letters, digits, `_` and `-` (it is used in metric paths)",
                );
            }
        }
    }

    pub fn scenario(&mut self, raw: &RawScenario, name: &str) -> Option<Scenario> {
        let errors_before = self.errors.len();
        let sections: [(&str, Vec<&String>); 15] = [
            ("servers", raw.servers.keys().collect()),
            ("connections", raw.connections.keys().collect()),
            ("databases", raw.databases.keys().collect()),
            ("keys", raw.keys.keys().collect()),
            ("breakers", raw.breakers.keys().collect()),
            ("bulkheads", raw.bulkheads.keys().collect()),
            ("semaphores", raw.semaphores.keys().collect()),
            ("retries", raw.retries.keys().collect()),
            ("caches", raw.caches.keys().collect()),
            ("rate_limits", raw.rate_limits.keys().collect()),
            ("kv_stores", raw.kv_stores.keys().collect()),
            ("throttles", raw.throttles.keys().collect()),
            ("flows", raw.flows.keys().collect()),
            ("loads", raw.loads.keys().collect()),
            ("faults", raw.faults.keys().collect()),
        ];
        for (section, names) in &sections {
            let map: BTreeMap<String, ()> = names.iter().map(|n| ((*n).clone(), ())).collect();
            self.check_names(section, &map);
        }
        let names = Names {
            servers: index(&raw.servers),
            connections: index(&raw.connections),
            databases: index(&raw.databases),
            keys: index(&raw.keys),
            breakers: index(&raw.breakers),
            bulkheads: index(&raw.bulkheads),
            semaphores: index(&raw.semaphores),
            retries: index(&raw.retries),
            caches: index(&raw.caches),
            rate_limits: index(&raw.rate_limits),
            kv_stores: index(&raw.kv_stores),
            throttles: index(&raw.throttles),
            rate_limits_with_store: raw
                .rate_limits
                .iter()
                .filter(|(_, limit)| limit.store.is_some())
                .map(|(name, _)| name.as_str())
                .collect(),
            flows: index(&raw.flows),
        };
        let limits = self.limits(&raw.run);
        let bucket = self.bucket(&raw.metrics, limits.horizon);
        let percentile_rule = match raw.metrics.percentile_rule {
            None | Some(PercentileRuleName::NearestRank) => PercentileRule::NearestRank,
            Some(PercentileRuleName::FloorIndex) => PercentileRule::FloorIndex,
        };
        let keys: Vec<KeyFamilySpec> = raw
            .keys
            .iter()
            .filter_map(|(name, keys)| self.key_family(name, keys))
            .collect();
        let servers = raw
            .servers
            .iter()
            .map(|(name, server)| self.server(name, server, &names, &keys))
            .collect();
        let connections = raw
            .connections
            .iter()
            .filter_map(|(name, c)| self.connection(name, c, &names))
            .collect();
        let databases = raw
            .databases
            .iter()
            .filter_map(|(name, db)| self.database(name, db))
            .collect();
        let breakers = raw
            .breakers
            .iter()
            .filter_map(|(name, b)| self.breaker(name, b))
            .collect();
        let bulkheads = raw
            .bulkheads
            .iter()
            .filter_map(|(name, b)| self.bulkhead(name, b))
            .collect();
        let semaphores = raw
            .semaphores
            .iter()
            .filter_map(|(name, semaphore)| self.semaphore(name, semaphore))
            .collect();
        let retries = raw
            .retries
            .iter()
            .filter_map(|(name, retry)| self.retry(name, retry))
            .collect();
        let caches = raw
            .caches
            .iter()
            .filter_map(|(name, cache)| self.cache(name, cache))
            .collect();
        let rate_limits = raw
            .rate_limits
            .iter()
            .filter_map(|(name, limit)| self.rate_limit(name, limit, &names))
            .collect();
        let kv_stores: Vec<KvStoreSpec> = raw
            .kv_stores
            .iter()
            .filter_map(|(name, store)| self.kv_store(name, store))
            .collect();
        let throttles = raw
            .throttles
            .iter()
            .filter_map(|(name, throttle)| self.throttle(name, throttle, &names, &kv_stores))
            .collect();
        let flows = raw
            .flows
            .iter()
            .filter_map(|(name, flow)| self.flow(name, flow, &names))
            .collect();
        if raw.loads.is_empty() {
            self.error(
                None,
                "loads",
                "the scenario has no [loads.<name>] table: nothing would run",
            );
        }
        // A disabled load is still checked (a variant may enable it), then left out.
        let loads: Vec<LoadSpec> = raw
            .loads
            .iter()
            .filter_map(|(name, load)| {
                let spec = self.load(name, load, &names, limits.horizon)?;
                load.enabled.unwrap_or(true).then_some(spec)
            })
            .collect();
        if !raw.loads.is_empty() && raw.loads.values().all(|load| load.enabled == Some(false)) {
            self.error(
                None,
                "loads",
                "every load is disabled (`enabled = false`): nothing would run",
            );
        }
        let faults = raw
            .faults
            .iter()
            .filter_map(|(name, fault)| {
                self.fault(name, fault, &names, &raw.databases, limits.horizon)
            })
            .collect();
        if self.errors.len() > errors_before {
            return None;
        }
        let scenario = Scenario {
            name: name.to_owned(),
            seed: raw
                .scenario
                .seed
                .as_ref()
                .map_or(default::SEED, |s| *s.get_ref()),
            limits,
            bucket,
            percentile_rule,
            servers,
            connections,
            databases,
            keys,
            breakers,
            bulkheads,
            semaphores,
            retries,
            caches,
            rate_limits,
            kv_stores,
            throttles,
            flows,
            loads,
            faults,
        };
        scenario
            .check_references()
            .expect("validated references always resolve");
        Some(scenario)
    }

    fn limits(&mut self, run: &RawRun) -> RunLimits {
        let run_length = |this: &mut Self, value: &Spanned<Text>, key: &str, why: &str| {
            let duration = this.positive_duration(value, key, why)?;
            if duration > RunLimits::LENGTH_MAX {
                this.error(
                    Some(value.span()),
                    key,
                    format!(
                        "{duration} is too long to simulate (at most 2^62 ns, about 146 years)"
                    ),
                );
                return None;
            }
            Some(duration)
        };
        let horizon = run.horizon.as_ref().and_then(|h| {
            run_length(
                self,
                h,
                "run.horizon",
                "a run of zero length simulates nothing",
            )
        });
        let time_max = match &run.time_max {
            Some(value) => {
                let time_max = run_length(self, value, "run.time_max", "the run could not start");
                if let (Some(time_max), Some(horizon)) = (time_max, horizon)
                    && time_max < horizon
                {
                    self.error(
                        Some(value.span()),
                        "run.time_max",
                        format!("{time_max} is shorter than the horizon {horizon}"),
                    );
                }
                time_max.map_or(RunLimits::TIME_MAX_DEFAULT, |d| {
                    SimTime::ZERO.saturating_add(d)
                })
            }
            None => RunLimits::TIME_MAX_DEFAULT
                .max(SimTime::ZERO.saturating_add(horizon.unwrap_or_default())),
        };
        let events_max = match &run.events_max {
            Some(value) => self
                .count(
                    value,
                    "run.events_max",
                    1,
                    u64::MAX,
                    "a run needs at least one event",
                )
                .unwrap_or(1),
            None => RunLimits::EVENTS_MAX_DEFAULT,
        };
        RunLimits {
            horizon: horizon.map(|h| SimTime::ZERO.saturating_add(h)),
            time_max,
            events_max,
        }
    }

    fn bucket(&mut self, metrics: &RawMetrics, horizon: Option<SimTime>) -> SimDuration {
        let Some(value) = &metrics.bucket else {
            return SimDuration::from_nanos(parse_duration(default::BUCKET).expect("default"));
        };
        let Some(bucket) =
            self.positive_duration(value, "metrics.bucket", "the series would have no width")
        else {
            return SimDuration::from_millis(100);
        };
        if let Some(horizon) = horizon {
            // Buckets from 0 up to and including the one that starts at the horizon.
            let buckets = horizon.as_nanos() / bucket.as_nanos() + 1;
            if buckets > BUCKETS_MAX {
                self.error(
                    Some(value.span()),
                    "metrics.bucket",
                    format!(
                        "{buckets} buckets to the horizon, more than the {BUCKETS_MAX} a series keeps: \
                         use a wider bucket"
                    ),
                );
            }
        }
        bucket
    }

    fn server(
        &mut self,
        name: &str,
        raw: &RawServer,
        names: &Names,
        keys: &[KeyFamilySpec],
    ) -> ServerSpec {
        let key = |field: &str| format!("servers.{name}.{field}");
        let mut preload = Vec::new();
        for (index, entry) in raw.preload.iter().enumerate() {
            let raw_entry = entry.get_ref();
            let prefix = format!("servers.{name}.preload[{index}]");
            let Some(family) = self.reference(
                &raw_entry.key,
                &format!("{prefix}.key"),
                "key family",
                &names.keys,
            ) else {
                continue;
            };
            let family_count = keys
                .iter()
                .find(|k| k.name == *raw_entry.key.get_ref())
                .map_or(0, |k| k.count);
            let count = match &raw_entry.count {
                Some(count) => match self.count(
                    count,
                    &format!("{prefix}.count"),
                    1,
                    u64::from(family_count),
                    "",
                ) {
                    Some(count) => count as u32,
                    None => continue,
                },
                None => family_count,
            };
            let value_bytes = match &raw_entry.value {
                Some(value) => match self.size(value, &format!("{prefix}.value")) {
                    Some(bytes) => bytes,
                    None => continue,
                },
                None => default::VALUE as u32,
            };
            preload.push(Preload {
                family: KeyFamilyId(family),
                count,
                value_bytes,
            });
        }
        ServerSpec {
            preload,
            name: name.to_owned(),
            command_cost: self.duration_or(
                &raw.command_cost,
                &key("command_cost"),
                default::COMMAND_COST,
            ),
            byte_rate: raw
                .byte_rate
                .as_ref()
                .and_then(|rate| self.bandwidth(rate, &key("byte_rate"))),
            persistence: raw.persistence.unwrap_or(false),
        }
    }

    fn connection(
        &mut self,
        name: &str,
        raw: &RawConnection,
        names: &Names,
    ) -> Option<ConnectionSpec> {
        let key = |field: &str| format!("connections.{name}.{field}");
        let server = self.reference(&raw.server, &key("server"), "server", &names.servers);
        let command_timeout = raw.command_timeout.as_ref().and_then(|t| {
            self.positive_duration(
                t,
                &key("command_timeout"),
                "every command would fail; leave it out to wait forever",
            )
        });
        let slot = matches!(
            raw.reconnect.as_ref().map(|r| *r.get_ref()),
            Some(ReconnectName::Slot)
        );
        if slot {
            if let Some(queue) = raw.offline_queue.as_ref().filter(|q| *q.get_ref()) {
                self.error(
                    Some(queue.span()),
                    key("offline_queue"),
                    "a reconnect slot has no offline queue: a command runs on the live connection or fails at once",
                );
            }
            if let Some(retries) = &raw.max_retries {
                self.error(
                    Some(retries.span()),
                    key("max_retries"),
                    "a reconnect slot carries no command over a lost connection (a read-only one is replayed once on a fresh connection)",
                );
            }
        }
        let max_retries = match raw.max_retries.as_ref().map(Spanned::get_ref) {
            None => Some(default::MAX_RETRIES),
            Some(RetryLimit::Unlimited) => None,
            Some(RetryLimit::Count(count)) => Some(u32::try_from(*count).unwrap_or(u32::MAX)),
        };
        let connect_timeout = match &raw.connect_timeout {
            Some(t) => self.positive_duration(
                t,
                &key("connect_timeout"),
                "no connection could ever be made",
            )?,
            None => self.duration_or(&None, "", default::CONNECT_TIMEOUT),
        };
        let (delay_default, delay_max_default) = if slot {
            (default::SLOT_BACKOFF, default::SLOT_BACKOFF_MAX)
        } else {
            (default::RECONNECT_DELAY, default::RECONNECT_DELAY_MAX)
        };
        let reconnect_delay = match &raw.reconnect_delay {
            Some(delay) => self
                .positive_duration(
                    delay,
                    &key("reconnect_delay"),
                    "a refused connection would be retried in a loop that never lets time pass",
                )
                .unwrap_or_default(),
            None => self.duration_or(&None, "", delay_default),
        };
        let reconnect_delay_max = self.duration_or(
            &raw.reconnect_delay_max,
            &key("reconnect_delay_max"),
            delay_max_default,
        );
        if reconnect_delay > reconnect_delay_max {
            let span = raw
                .reconnect_delay
                .as_ref()
                .or(raw.reconnect_delay_max.as_ref())
                .map(Spanned::span);
            self.error(
                span,
                key("reconnect_delay"),
                format!("{reconnect_delay} is above reconnect_delay_max {reconnect_delay_max}"),
            );
        }
        let pending_max = match &raw.pending_max {
            Some(max) => Some(
                self.count(
                    max,
                    &key("pending_max"),
                    1,
                    u64::from(u32::MAX),
                    "every command would be shed; leave it out for no limit",
                )
                .and_then(|max| NonZeroU32::new(max as u32))?,
            ),
            None => None,
        };
        Some(ConnectionSpec {
            pending_max,
            name: name.to_owned(),
            server: ServerId(server?),
            latency: self.duration_or(&raw.latency, &key("latency"), default::LATENCY),
            bandwidth: raw
                .bandwidth
                .as_ref()
                .and_then(|b| self.bandwidth(b, &key("bandwidth"))),
            command_timeout,
            offline_queue: raw.offline_queue.as_ref().map_or(!slot, |q| *q.get_ref()),
            max_retries,
            connect_timeout,
            reconnect_delay,
            reconnect_delay_max,
            connected_at_start: raw.connected_at_start.unwrap_or(true),
            reconnect: match raw.reconnect.as_ref().map(|r| *r.get_ref()) {
                None | Some(ReconnectName::Always) => Reconnect::Always,
                Some(ReconnectName::Never) => Reconnect::Never,
                Some(ReconnectName::Slot) => {
                    // Checked above: a delay is longer than zero and at most the maximum.
                    match ReconnectConfig::new(
                        reconnect_delay.max(SimDuration::from_nanos(1)),
                        reconnect_delay_max.max(reconnect_delay),
                    ) {
                        Ok(config) => Reconnect::Slot(config),
                        Err(error) => {
                            let span = raw.reconnect.as_ref().map(Spanned::span);
                            self.error(span, key("reconnect"), error.reason);
                            return None;
                        }
                    }
                }
            },
        })
    }

    fn database(&mut self, name: &str, raw: &RawDatabase) -> Option<DatabaseSpec> {
        let key = |field: &str| format!("databases.{name}.{field}");
        let latency = self.latency(&raw.latency, &key("latency"))?;
        let capacity = match &raw.capacity {
            Some(capacity) => Some(self.count(
                capacity,
                &key("capacity"),
                1,
                u64::from(u32::MAX),
                "a database of zero capacity runs nothing; leave it out for no limit",
            )? as u32),
            None => None,
        };
        Some(DatabaseSpec {
            name: name.to_owned(),
            latency,
            capacity,
        })
    }

    /// A latency: a constant duration or a distribution table.
    fn latency(&mut self, raw: &Spanned<RawLatency>, key: &str) -> Option<Distribution> {
        match raw.get_ref() {
            RawLatency::Constant(text) => {
                let value = Spanned::new(raw.span(), Text(text.0.clone()));
                Some(Distribution::Constant(self.duration(&value, key)?))
            }
            RawLatency::Distribution(table) => self.distribution(table, key),
        }
    }

    fn distribution(&mut self, raw: &RawDistribution, key: &str) -> Option<Distribution> {
        let field = |f: &str| format!("{key}.{f}");
        let kind = raw.distribution.get_ref();
        let forbid = |this: &mut Self, value: &Option<Spanned<Text>>, name: &str, why: &str| {
            if let Some(value) = value {
                this.error(Some(value.span()), field(name), why.to_owned());
            }
        };
        let require = |this: &mut Self, value: &Option<Spanned<Text>>, name: &str| match value {
            Some(value) => this.duration(value, &field(name)),
            None => {
                this.error(
                    Some(raw.distribution.span()),
                    field(name),
                    "is required by this distribution".to_owned(),
                );
                None
            }
        };
        match kind {
            DistributionName::Uniform => {
                forbid(
                    self,
                    &raw.mean,
                    "mean",
                    "a uniform distribution has min and max, not a mean",
                );
                let (min, max) = (
                    require(self, &raw.min, "min"),
                    require(self, &raw.max, "max"),
                );
                match Distribution::uniform(min?, max?) {
                    Ok(distribution) => Some(distribution),
                    Err(error) => {
                        let span = raw.min.as_ref().map(Spanned::span);
                        self.error(span, field(error.field), error.reason);
                        None
                    }
                }
            }
            DistributionName::Exponential => {
                forbid(
                    self,
                    &raw.max,
                    "max",
                    "an exponential distribution has no maximum",
                );
                let min = self.duration_or(&raw.min, &field("min"), "0s");
                let mean = require(self, &raw.mean, "mean")?;
                match Distribution::exponential(min, mean) {
                    Ok(distribution) => Some(distribution),
                    Err(error) => {
                        let span = raw.mean.as_ref().map(Spanned::span);
                        self.error(span, field(error.field), error.reason);
                        None
                    }
                }
            }
        }
    }

    fn breaker(&mut self, name: &str, raw: &RawBreaker) -> Option<BreakerSpec> {
        let prefix = format!("breakers.{name}");
        let open_for = self.duration(&raw.open_for, &format!("{prefix}.open_for"))?;
        let probes = raw
            .half_open_probes
            .as_ref()
            .map_or(1, |p| u32::try_from(*p.get_ref()).unwrap_or(u32::MAX));
        let clamp = |value: &Spanned<u64>| u32::try_from(*value.get_ref()).unwrap_or(u32::MAX);
        let mut spans = vec![("open_for", raw.open_for.span())];
        if let Some(p) = &raw.half_open_probes {
            spans.push(("half_open_probes", p.span()));
        }
        let rate_keys = [
            ("window_calls", raw.window_calls.as_ref().map(Spanned::span)),
            ("window", raw.window.as_ref().map(Spanned::span)),
            ("window_slots", raw.window_slots.as_ref().map(Spanned::span)),
            ("min_calls", raw.min_calls.as_ref().map(Spanned::span)),
        ];
        let config = match (&raw.failures, &raw.failure_rate_percent) {
            (Some(failures), None) => {
                for (key, span) in rate_keys {
                    if let Some(span) = span {
                        self.error(
                            Some(span),
                            format!("{prefix}.{key}"),
                            "belongs to a failure-rate breaker (failure_rate_percent), not to one \
                             that counts consecutive failures",
                        );
                    }
                }
                spans.push(("failures", failures.span()));
                BreakerConfig::new(clamp(failures), open_for, probes)
            }
            (None, Some(rate)) => {
                let permille = rate.get_ref() * 10.0;
                if !(permille.is_finite() && permille == permille.round()) {
                    self.error(
                        Some(rate.span()),
                        format!("{prefix}.failure_rate_percent"),
                        format!(
                            "{} is not a percentage to one decimal place",
                            rate.get_ref()
                        ),
                    );
                    return None;
                }
                spans.push(("failure_rate_permille", rate.span()));
                let window = match (&raw.window_calls, &raw.window) {
                    (Some(calls), None) => {
                        if let Some(slots) = &raw.window_slots {
                            self.error(
                                Some(slots.span()),
                                format!("{prefix}.window_slots"),
                                "applies to a time window (window), not to window_calls",
                            );
                        }
                        spans.push(("window_calls", calls.span()));
                        Window::Calls(clamp(calls))
                    }
                    (None, Some(length)) => {
                        let length = self.duration(length, &format!("{prefix}.window"))?;
                        let slots = raw.window_slots.as_ref().map_or(10, clamp);
                        spans.push(("window_length", raw.window.as_ref().expect("set").span()));
                        if let Some(slots) = &raw.window_slots {
                            spans.push(("window_slots", slots.span()));
                        }
                        Window::Time { length, slots }
                    }
                    _ => {
                        self.error(
                            Some(rate.span()),
                            format!("{prefix}.window_calls"),
                            "a failure-rate breaker needs exactly one window: window_calls (the \
                             last N calls) or window (a duration)",
                        );
                        return None;
                    }
                };
                let Some(min_calls) = &raw.min_calls else {
                    self.error(
                        Some(rate.span()),
                        format!("{prefix}.min_calls"),
                        "a failure-rate breaker needs min_calls, the calls the window must hold \
                         before the rate counts",
                    );
                    return None;
                };
                spans.push(("min_calls", min_calls.span()));
                let permille = if permille < 0.0 {
                    u32::MAX
                } else {
                    permille.min(f64::from(u32::MAX)) as u32
                };
                BreakerConfig::failure_rate(permille, window, clamp(min_calls), open_for, probes)
            }
            (Some(failures), Some(_)) => {
                self.error(
                    Some(failures.span()),
                    format!("{prefix}.failures"),
                    "give failures (consecutive) or failure_rate_percent, not both",
                );
                return None;
            }
            (None, None) => {
                self.error(
                    Some(raw.open_for.span()),
                    format!("{prefix}.failures"),
                    "a breaker needs a rule to open: failures (consecutive) or \
                     failure_rate_percent with a window",
                );
                return None;
            }
        };
        let config = match config {
            Ok(config) => config,
            Err(error) => {
                self.config_error(error, &prefix, &spans);
                return None;
            }
        };
        let counts = match &raw.counts {
            None => OutcomeSet::network_errors(),
            Some(list) => {
                let mut outcomes = Vec::new();
                for entry in list.get_ref() {
                    let key = format!("{prefix}.counts");
                    match Outcome::from_name(entry.get_ref()) {
                        Some(Outcome::Ok) => {
                            self.error(Some(entry.span()), key, "`ok` is a success, not a failure to count")
                        }
                        Some(outcome @ (Outcome::BreakerOpen | Outcome::Shed)) => self.error(
                            Some(entry.span()),
                            key,
                            format!("`{outcome}` is decided before the breaker is asked, so it never reaches it"),
                        ),
                        Some(outcome) => outcomes.push(outcome),
                        None => {
                            let known: Vec<&str> = Outcome::ALL[1..].iter().map(|o| o.name()).collect();
                            self.error(
                                Some(entry.span()),
                                key,
                                format!("unknown outcome `{}` (outcomes: {})", entry.get_ref(), known.join(", ")),
                            );
                        }
                    }
                }
                OutcomeSet::new(outcomes)
            }
        };
        Some(BreakerSpec {
            name: name.to_owned(),
            enabled: raw.enabled.unwrap_or(true),
            config,
            counts,
        })
    }

    fn bulkhead(&mut self, name: &str, raw: &RawBulkhead) -> Option<BulkheadSpec> {
        let prefix = format!("bulkheads.{name}");
        let queue = self.count(&raw.queue, &format!("{prefix}.queue"), 0, limit::QUEUE, "")?;
        let max_concurrent = u32::try_from(*raw.max_concurrent.get_ref()).unwrap_or(u32::MAX);
        match BulkheadConfig::new(max_concurrent, queue as u32) {
            Ok(config) => Some(BulkheadSpec {
                name: name.to_owned(),
                enabled: raw.enabled.unwrap_or(true),
                config,
            }),
            Err(error) => {
                self.config_error(
                    error,
                    &prefix,
                    &[("max_concurrent", raw.max_concurrent.span())],
                );
                None
            }
        }
    }

    fn semaphore(&mut self, name: &str, raw: &RawSemaphore) -> Option<SemaphoreSpec> {
        let prefix = format!("semaphores.{name}");
        let max_in_flight = raw
            .max_in_flight
            .as_ref()
            .map(|n| u32::try_from(*n.get_ref()).unwrap_or(u32::MAX));
        let max_bytes = match &raw.max_bytes {
            Some(size) => Some(self.size_any(size, &format!("{prefix}.max_bytes"))?),
            None => None,
        };
        match SemaphoreConfig::new(max_in_flight, max_bytes) {
            Ok(config) => Some(SemaphoreSpec {
                name: name.to_owned(),
                enabled: raw.enabled.unwrap_or(true),
                config,
            }),
            Err(error) => {
                let mut spans = Vec::new();
                if let Some(n) = &raw.max_in_flight {
                    spans.push(("max_in_flight", n.span()));
                }
                if let Some(b) = &raw.max_bytes {
                    spans.push(("max_bytes", b.span()));
                }
                let span = spans.first().map(|(_, span)| span.clone());
                let key = format!("{prefix}.{}", error.field);
                let at = spans
                    .iter()
                    .find(|(field, _)| *field == error.field)
                    .map(|(_, span)| span.clone())
                    .or(span)
                    .or_else(|| self.key_span(&["semaphores", name]));
                self.error(at, key, error.reason);
                None
            }
        }
    }

    fn key_family(&mut self, name: &str, raw: &RawKeys) -> Option<KeyFamilySpec> {
        let key = |field: &str| format!("keys.{name}.{field}");
        let count = match &raw.count {
            Some(count) => self.count(
                count,
                &key("count"),
                1,
                limit::KEYS_PER_FAMILY,
                "a family needs a key",
            )?,
            None => 1,
        } as u32;
        let hot_fields = [
            ("hot_keys", raw.hot_keys.as_ref().map(Spanned::span)),
            (
                "hot_share_percent",
                raw.hot_share_percent.as_ref().map(Spanned::span),
            ),
        ];
        let distribution = match raw.distribution.as_ref().map(|d| (d.span(), *d.get_ref())) {
            None | Some((_, KeyDistributionName::Uniform)) => {
                for (field, span) in hot_fields {
                    if let Some(span) = span {
                        self.error(
                            Some(span),
                            key(field),
                            "applies to distribution = \"hot\" only",
                        );
                    }
                }
                KeyDistribution::Uniform
            }
            Some((span, KeyDistributionName::Hot)) => {
                let (Some(hot_keys), Some(share)) = (&raw.hot_keys, &raw.hot_share_percent) else {
                    self.error(
                        Some(span),
                        key("hot_keys"),
                        "a hot set needs hot_keys and hot_share_percent (e.g. 90% of reads to 100 keys)",
                    );
                    return None;
                };
                let hot = *hot_keys.get_ref();
                if hot == 0 || hot >= u64::from(count) {
                    self.error(
                        Some(hot_keys.span()),
                        key("hot_keys"),
                        format!(
                            "must be between 1 and count - 1 ({}), got {hot}",
                            count.saturating_sub(1)
                        ),
                    );
                    return None;
                }
                KeyDistribution::Hot {
                    hot_keys: hot as u32,
                    share_permille: self.percent_permille(share, &key("hot_share_percent"))?,
                }
            }
        };
        Some(KeyFamilySpec {
            name: name.to_owned(),
            count,
            distribution,
        })
    }

    fn rate_limit(
        &mut self,
        name: &str,
        raw: &RawRateLimit,
        names: &Names,
    ) -> Option<RateLimitSpec> {
        let prefix = format!("rate_limits.{name}");
        let key = |field: &str| format!("{prefix}.{field}");
        let store = match &raw.store {
            Some(store) => Some(ConnectionId(self.reference(
                store,
                &key("store"),
                "connection",
                &names.connections,
            )?)),
            None => None,
        };
        let rate = match Rate::per_second(*raw.rate.get_ref()) {
            Ok(rate) => rate,
            Err(error) => {
                self.error(Some(raw.rate.span()), key("rate"), error.reason);
                return None;
            }
        };
        let spans = [("capacity", raw.capacity.span()), ("rate", raw.rate.span())];
        let token_rate = match TokenRate::per_second_milli(rate.millirequests_per_second()) {
            Ok(token_rate) => token_rate,
            Err(error) => {
                self.config_error(error, &prefix, &spans);
                return None;
            }
        };
        let bucket = match BucketConfig::new(*raw.capacity.get_ref(), token_rate) {
            Ok(bucket) => bucket,
            Err(error) => {
                self.config_error(error, &prefix, &spans);
                return None;
            }
        };
        let algorithm = match raw.algorithm {
            None | Some(RateAlgorithmName::TokenBucket) => Algorithm::TokenBucket,
            Some(RateAlgorithmName::Gcra) => Algorithm::Gcra,
        };
        let when_unreachable = match raw.when_unreachable {
            None | Some(WhenUnreachableName::Open) => {
                if let Some(after) = &raw.fail_closed_retry_after {
                    self.error(
                        Some(after.span()),
                        key("fail_closed_retry_after"),
                        "applies to when_unreachable = \"closed\" only",
                    );
                }
                WhenStoreUnreachable::FailOpen
            }
            Some(WhenUnreachableName::Closed) => WhenStoreUnreachable::FailClosed {
                retry_after: self.duration_or(
                    &raw.fail_closed_retry_after,
                    &key("fail_closed_retry_after"),
                    "1s",
                ),
            },
        };
        match RateLimiterConfig::new(bucket, algorithm, when_unreachable) {
            Ok(config) => Some(RateLimitSpec {
                name: name.to_owned(),
                enabled: raw.enabled.unwrap_or(true),
                config,
                store,
            }),
            Err(error) => {
                let span = raw.fail_closed_retry_after.as_ref().map(Spanned::span);
                self.error(span, key(error.field), error.reason);
                None
            }
        }
    }

    fn kv_store(&mut self, name: &str, raw: &RawKvStore) -> Option<KvStoreSpec> {
        let key = |field: &str| format!("kv_stores.{name}.{field}");
        Some(KvStoreSpec {
            name: name.to_owned(),
            read_latency: self.latency(&raw.read_latency, &key("read_latency"))?,
            write_latency: self.latency(&raw.write_latency, &key("write_latency"))?,
            staleness_max: self.duration_or(&raw.staleness_max, &key("staleness_max"), "0s"),
        })
    }

    fn throttle(
        &mut self,
        name: &str,
        raw: &RawThrottle,
        names: &Names,
        stores: &[KvStoreSpec],
    ) -> Option<ThrottleSpec> {
        let prefix = format!("throttles.{name}");
        let key = |field: &str| format!("{prefix}.{field}");
        let (form, staleness) = match raw.form.get_ref() {
            ThrottleFormName::Atomic => {
                if let Some(store) = &raw.store {
                    self.error(
                        Some(store.span()),
                        key("store"),
                        "an atomic throttle keeps no store (its check-and-increment is one step)",
                    );
                }
                (ThrottleForm::Atomic, SimDuration::ZERO)
            }
            ThrottleFormName::Kv => {
                let Some(store) = &raw.store else {
                    self.error(
                        Some(raw.form.span()),
                        key("store"),
                        "a KV throttle needs a store: a [kv_stores.<name>]",
                    );
                    return None;
                };
                let id = self.reference(store, &key("store"), "KV store", &names.kv_stores)?;
                let staleness = stores
                    .iter()
                    .find(|spec| spec.name == *store.get_ref())
                    .map_or(SimDuration::ZERO, |spec| spec.staleness_max);
                (
                    ThrottleForm::Kv {
                        store: KvStoreId(id),
                    },
                    staleness,
                )
            }
        };
        let retry_after = self.duration_or(&raw.retry_after, &key("retry_after"), "1s");
        let counter_ttl = match (&raw.counter_ttl, &raw.ttl_mode) {
            (None, Some(mode)) => {
                self.error(Some(mode.span()), key("ttl_mode"), "says how counter_ttl applies, but there is no counter_ttl (leave both out for a counter that never expires)");
                return None;
            }
            (None, None) => CounterTtl::Never,
            (Some(ttl), mode) => {
                let ttl = self.duration(ttl, &key("counter_ttl"))?;
                match mode.as_ref().map(|m| *m.get_ref()) {
                    None | Some(TtlModeName::Refreshed) => CounterTtl::RefreshedOnWrite(ttl),
                    Some(TtlModeName::Fixed) => CounterTtl::FixedAtCreation(ttl),
                }
            }
        };
        let release_loss_permille = match &raw.release_loss_percent {
            Some(percent) => self.percent_permille(percent, &key("release_loss_percent"))?,
            None => 0,
        };
        let inflight_max = u32::try_from(*raw.inflight_max.get_ref()).unwrap_or(u32::MAX);
        match ThrottleConfig::new(inflight_max, retry_after, counter_ttl, staleness) {
            Ok(config) => Some(ThrottleSpec {
                name: name.to_owned(),
                enabled: raw.enabled.unwrap_or(true),
                config,
                form,
                release_loss_permille,
            }),
            Err(error) => {
                let mut spans = vec![("inflight_max", raw.inflight_max.span())];
                spans.extend(raw.retry_after.as_ref().map(|r| ("retry_after", r.span())));
                spans.extend(raw.counter_ttl.as_ref().map(|t| ("counter_ttl", t.span())));
                spans.extend(raw.store.as_ref().map(|s| ("kv_staleness_max", s.span())));
                self.config_error(error, &prefix, &spans);
                None
            }
        }
    }

    fn cache(&mut self, name: &str, raw: &RawCache) -> Option<CacheSpec> {
        let prefix = format!("caches.{name}");
        let ttl = self.duration(&raw.ttl, &format!("{prefix}.ttl"))?;
        let max_bytes = self.size_any(&raw.max_bytes, &format!("{prefix}.max_bytes"))?;
        let max_entries = u32::try_from(*raw.max_entries.get_ref()).unwrap_or(u32::MAX);
        match CacheConfig::new(max_entries, max_bytes, ttl) {
            Ok(config) => Some(CacheSpec {
                name: name.to_owned(),
                config,
            }),
            Err(error) => {
                let spans = [
                    ("max_entries", raw.max_entries.span()),
                    ("max_bytes", raw.max_bytes.span()),
                    ("ttl", raw.ttl.span()),
                ];
                self.config_error(error, &prefix, &spans);
                None
            }
        }
    }

    fn retry(&mut self, name: &str, raw: &RawRetry) -> Option<RetrySpec> {
        let prefix = format!("retries.{name}");
        let key = |field: &str| format!("{prefix}.{field}");
        let base = self.positive_duration(
            &raw.backoff,
            &key("backoff"),
            "retries would follow the failure in a tight loop",
        )?;
        let factor_permille = match &raw.backoff_factor {
            None => FACTOR_PERMILLE_ONE,
            Some(factor) => self.thousandths(factor, &key("backoff_factor"))?,
        };
        let ceiling = match &raw.backoff_max {
            Some(max) => self.duration(max, &key("backoff_max"))?,
            None if factor_permille > FACTOR_PERMILLE_ONE => {
                let span = raw.backoff_factor.as_ref().map(Spanned::span);
                self.error(
                    span,
                    key("backoff_max"),
                    "a growing backoff (backoff_factor above 1) needs backoff_max, its ceiling",
                );
                return None;
            }
            None => base,
        };
        let jitter = match raw.jitter {
            None | Some(JitterName::None) => Jitter::None,
            Some(JitterName::Full) => Jitter::Full,
            Some(JitterName::Equal) => Jitter::Equal,
            Some(JitterName::Decorrelated) => Jitter::Decorrelated,
        };
        let mut spans = vec![
            ("base", raw.backoff.span()),
            ("max_attempts", raw.max_attempts.span()),
        ];
        spans.extend(
            raw.backoff_factor
                .as_ref()
                .map(|f| ("factor_permille", f.span())),
        );
        spans.extend(raw.backoff_max.as_ref().map(|m| ("ceiling", m.span())));
        spans.extend(
            raw.budget_percent
                .as_ref()
                .map(|b| ("ratio_permille", b.span())),
        );
        spans.extend(raw.budget_window.as_ref().map(|w| ("ttl", w.span())));
        spans.extend(
            raw.budget_min_per_second
                .as_ref()
                .map(|m| ("min_retries_per_second", m.span())),
        );
        let renames = [
            ("base", "backoff"),
            ("factor_permille", "backoff_factor"),
            ("ceiling", "backoff_max"),
            ("ratio_permille", "budget_percent"),
            ("ttl", "budget_window"),
            ("min_retries_per_second", "budget_min_per_second"),
        ];
        let report = |this: &mut Self, error: ConfigError| {
            let span = spans
                .iter()
                .find(|(field, _)| *field == error.field)
                .map(|(_, span)| span.clone());
            let field = renames
                .iter()
                .find(|(model, _)| *model == error.field)
                .map_or(error.field, |(_, file)| *file);
            this.error(span, key(field), error.reason);
        };
        let backoff = match BackoffConfig::new(base, factor_permille, ceiling, jitter) {
            Ok(backoff) => backoff,
            Err(error) => {
                report(self, error);
                return None;
            }
        };
        let budget = match &raw.budget_percent {
            None => {
                for (field, span) in [
                    (
                        "budget_min_per_second",
                        raw.budget_min_per_second.as_ref().map(Spanned::span),
                    ),
                    (
                        "budget_window",
                        raw.budget_window.as_ref().map(Spanned::span),
                    ),
                ] {
                    if let Some(span) = span {
                        self.error(
                            Some(span),
                            key(field),
                            "needs budget_percent, which turns the budget on",
                        );
                    }
                }
                None
            }
            Some(percent) => {
                let thousandths = self.thousandths(percent, &key("budget_percent"))?;
                if !thousandths.is_multiple_of(100) {
                    self.error(
                        Some(percent.span()),
                        key("budget_percent"),
                        format!(
                            "{}% is finer than the 0.1% a budget is kept to",
                            percent.get_ref()
                        ),
                    );
                    return None;
                }
                let ratio_permille = thousandths / 100;
                let window = self.duration_or(&raw.budget_window, &key("budget_window"), "10s");
                let floor = raw
                    .budget_min_per_second
                    .as_ref()
                    .map_or(0, |m| u32::try_from(*m.get_ref()).unwrap_or(u32::MAX));
                match RetryBudgetConfig::new(ratio_permille, floor, window) {
                    Ok(budget) => Some(budget),
                    Err(error) => {
                        report(self, error);
                        return None;
                    }
                }
            }
        };
        let max_attempts = u32::try_from(*raw.max_attempts.get_ref()).unwrap_or(u32::MAX);
        let config = match RetryConfig::new(max_attempts, backoff, budget, None) {
            Ok(config) => config,
            Err(error) => {
                report(self, error);
                return None;
            }
        };
        let retry_on = match &raw.retry_on {
            None => OutcomeSet::new([
                Outcome::Timeout,
                Outcome::Refused,
                Outcome::ConnectionLost,
                Outcome::ServerError,
            ]),
            Some(list) => self.error_outcomes(list, &key("retry_on"))?,
        };
        Some(RetrySpec {
            name: name.to_owned(),
            enabled: raw.enabled.unwrap_or(true),
            config,
            retry_on,
        })
    }

    /// A non-negative number with at most three decimals, as an exact count of thousandths.
    fn thousandths(&mut self, value: &Spanned<f64>, key: &str) -> Option<u32> {
        let scaled = value.get_ref() * 1000.0;
        if !(scaled.is_finite()
            && scaled >= 0.0
            && scaled == scaled.round()
            && scaled <= f64::from(u32::MAX))
        {
            self.error(
                Some(value.span()),
                key,
                format!(
                    "{} is not a non-negative number with at most 3 decimals",
                    value.get_ref()
                ),
            );
            return None;
        }
        Some(scaled as u32)
    }

    /// A percentage from 0 to 100 to 0.1%, in thousandths of the whole (permille).
    fn percent_permille(&mut self, value: &Spanned<f64>, key: &str) -> Option<u32> {
        let thousandths = self.thousandths(value, key)?;
        if !thousandths.is_multiple_of(100) || thousandths > 100_000 {
            self.error(
                Some(value.span()),
                key,
                format!(
                    "{} is not a percentage from 0 to 100, to 0.1%",
                    value.get_ref()
                ),
            );
            return None;
        }
        Some(thousandths / 100)
    }

    /// A list of error outcomes (for what a policy counts or acts on).
    fn error_outcomes(
        &mut self,
        list: &Spanned<Vec<Spanned<String>>>,
        key: &str,
    ) -> Option<OutcomeSet> {
        let errors_before = self.errors.len();
        let mut outcomes = Vec::new();
        for entry in list.get_ref() {
            match Outcome::from_name(entry.get_ref()) {
                Some(Outcome::Ok) => {
                    self.error(Some(entry.span()), key, "`ok` is a success, not an error")
                }
                Some(outcome) => outcomes.push(outcome),
                None => {
                    let known: Vec<&str> = Outcome::ALL[1..].iter().map(|o| o.name()).collect();
                    self.error(
                        Some(entry.span()),
                        key,
                        format!(
                            "unknown outcome `{}` (outcomes: {})",
                            entry.get_ref(),
                            known.join(", ")
                        ),
                    );
                }
            }
        }
        (self.errors.len() == errors_before).then(|| OutcomeSet::new(outcomes))
    }

    fn flow(&mut self, name: &str, raw: &RawFlow, names: &Names) -> Option<FlowSpec> {
        if raw.steps.get_ref().is_empty() {
            self.error(
                Some(raw.steps.span()),
                format!("flows.{name}.steps"),
                "a flow needs at least one step",
            );
            return None;
        }
        let errors_before = self.errors.len();
        let mut labels: BTreeMap<&str, u16> = BTreeMap::new();
        for (index, step) in raw.steps.get_ref().iter().enumerate() {
            if let Some(label) = &step.get_ref().label
                && labels.insert(label.get_ref(), index as u16).is_some()
            {
                self.error(
                    Some(label.span()),
                    format!("flows.{name}.steps[{index}].label"),
                    format!("two steps are labelled `{}`", label.get_ref()),
                );
            }
        }
        let steps: Vec<StepSpec> = raw
            .steps
            .get_ref()
            .iter()
            .enumerate()
            .filter_map(|(index, step)| {
                let prefix = format!("flows.{name}.steps[{index}]");
                self.step(&prefix, index, step, names, &labels)
            })
            .collect();
        (self.errors.len() == errors_before).then(|| FlowSpec {
            name: name.to_owned(),
            steps,
        })
    }

    fn step(
        &mut self,
        prefix: &str,
        index: usize,
        spanned: &Spanned<RawStep>,
        names: &Names,
        labels: &BTreeMap<&str, u16>,
    ) -> Option<StepSpec> {
        let raw = spanned.get_ref();
        let key = |field: &str| format!("{prefix}.{field}");
        let actions = [
            raw.redis.is_some(),
            raw.db.is_some(),
            raw.work.is_some(),
            raw.cache.is_some(),
            raw.rate_limit.is_some(),
            raw.throttle.is_some(),
        ];
        if actions.iter().filter(|&&set| set).count() != 1 {
            self.error(
                Some(spanned.span()),
                prefix,
                "a step does exactly one thing: set one of `redis`, `db`, `work`, `cache`, \
                 `rate_limit` or `throttle`",
            );
            return None;
        }
        if raw.cache.is_none()
            && raw.throttle.is_none()
            && let Some(op) = &raw.op
        {
            self.error(
                Some(op.span()),
                key("op"),
                "applies to a cache or throttle step only",
            );
        }
        let not_here = |this: &mut Self, span: Option<Range<usize>>, field: &str, what: &str| {
            if let Some(span) = span {
                this.error(Some(span), key(field), format!("does not apply to {what}"));
            }
        };
        let on_hit = match raw.on_hit.as_ref() {
            None => None,
            Some(hit) => {
                let target = match hit.get_ref().as_str() {
                    "next" => OnHit::Next,
                    "finish" => OnHit::Finish,
                    label => match labels.get(label) {
                        Some(&target) if usize::from(target) > index => OnHit::Goto(target),
                        Some(&target) => {
                            self.error(
                                Some(hit.span()),
                                key("on_hit"),
                                format!(
                                    "`{label}` is step {target}, not after this one: a hit may \
                                     only jump forward"
                                ),
                            );
                            return None;
                        }
                        None => {
                            let known: Vec<&str> = labels.keys().copied().collect();
                            self.error(
                                Some(hit.span()),
                                key("on_hit"),
                                format!(
                                    "`{label}` is not \"next\", \"finish\" or a step label \
                                     (labels here: {})",
                                    if known.is_empty() {
                                        "none".to_owned()
                                    } else {
                                        known.join(", ")
                                    }
                                ),
                            );
                            return None;
                        }
                    },
                };
                Some((hit.span(), target))
            }
        };
        let action = if let Some(command) = &raw.redis {
            let command_name = *command.get_ref();
            if raw.timeout.is_some() {
                not_here(
                    self,
                    raw.timeout.as_ref().map(Spanned::span),
                    "timeout",
                    "a Redis step (its timeout is the connection's command_timeout)",
                );
            }
            if command_name != RedisCommandName::Get {
                not_here(
                    self,
                    on_hit.as_ref().map(|h| h.0.clone()),
                    "on_hit",
                    "a command other than GET",
                );
            }
            let takes_value = matches!(
                command_name,
                RedisCommandName::Set | RedisCommandName::SetNxPx
            );
            if !takes_value {
                not_here(
                    self,
                    raw.value.as_ref().map(Spanned::span),
                    "value",
                    "a command that writes no value",
                );
                not_here(
                    self,
                    raw.ttl.as_ref().map(Spanned::span),
                    "ttl",
                    "a command that sets no expiry",
                );
            }
            let connection = match &raw.connection {
                Some(c) => self.reference(c, &key("connection"), "connection", &names.connections),
                None => {
                    self.error(
                        Some(command.span()),
                        key("connection"),
                        "a Redis step needs a connection",
                    );
                    None
                }
            };
            let family = match &raw.key {
                Some(k) => self.reference(k, &key("key"), "key family", &names.keys),
                None => {
                    self.error(
                        Some(command.span()),
                        key("key"),
                        "a Redis step needs a key (a [keys.<name>] family)",
                    );
                    None
                }
            };
            let value_bytes = match &raw.value {
                Some(value) if takes_value => self.size(value, &key("value"))?,
                _ => default::VALUE as u32,
            };
            let ttl = match &raw.ttl {
                Some(ttl) if takes_value => Some(self.positive_duration(
                    ttl,
                    &key("ttl"),
                    "the key would expire as it is written",
                )?),
                _ => None,
            };
            let command = match command_name {
                RedisCommandName::Get => RedisCommand::Get,
                RedisCommandName::Incr => RedisCommand::Incr,
                RedisCommandName::Del => RedisCommand::Del,
                RedisCommandName::Set => RedisCommand::Set { value_bytes, ttl },
                RedisCommandName::SetNxPx => {
                    let Some(ttl) = ttl else {
                        self.error(
                            Some(command.span()),
                            key("ttl"),
                            "SET NX PX needs a ttl (the PX argument)",
                        );
                        return None;
                    };
                    RedisCommand::SetNxPx { value_bytes, ttl }
                }
            };
            StepAction::Redis {
                connection: ConnectionId(connection?),
                command,
                key: KeyFamilyId(family?),
            }
        } else if let Some(throttle) = &raw.throttle {
            let what = "a throttle step";
            for (field, span) in [
                ("connection", raw.connection.as_ref().map(Spanned::span)),
                ("value", raw.value.as_ref().map(Spanned::span)),
                ("ttl", raw.ttl.as_ref().map(Spanned::span)),
                ("timeout", raw.timeout.as_ref().map(Spanned::span)),
                ("on_hit", on_hit.as_ref().map(|h| h.0.clone())),
            ] {
                not_here(self, span, field, what);
            }
            let id = self.reference(throttle, &key("throttle"), "throttle", &names.throttles);
            let op = match raw.op.as_ref().map(|op| (op.span(), op.get_ref().as_str())) {
                Some((_, "acquire")) => ThrottleOp::Acquire,
                Some((_, "release")) => ThrottleOp::Release,
                Some((span, other)) => {
                    self.error(
                        Some(span),
                        key("op"),
                        format!("`{other}` is not a throttle op: \"acquire\" or \"release\""),
                    );
                    return None;
                }
                None => {
                    self.error(
                        Some(throttle.span()),
                        key("op"),
                        "a throttle step needs op: \"acquire\" or \"release\"",
                    );
                    return None;
                }
            };
            let Some(family) = &raw.key else {
                self.error(
                    Some(throttle.span()),
                    key("key"),
                    "a throttle counts per key: name a [keys.<name>] family",
                );
                return None;
            };
            let family = self.reference(family, &key("key"), "key family", &names.keys);
            StepAction::Throttle {
                throttle: ThrottleId(id?),
                op,
                key: KeyFamilyId(family?),
            }
        } else if let Some(limit) = &raw.rate_limit {
            let what = "a rate-limit step";
            for (field, span) in [
                ("connection", raw.connection.as_ref().map(Spanned::span)),
                ("value", raw.value.as_ref().map(Spanned::span)),
                ("ttl", raw.ttl.as_ref().map(Spanned::span)),
                ("timeout", raw.timeout.as_ref().map(Spanned::span)),
                ("on_hit", on_hit.as_ref().map(|h| h.0.clone())),
            ] {
                not_here(self, span, field, what);
            }
            let limiter = self.reference(
                limit,
                &key("rate_limit"),
                "rate limiter",
                &names.rate_limits,
            )?;
            let has_store = names
                .rate_limits_with_store
                .contains(limit.get_ref().as_str());
            let family = match (&raw.key, has_store) {
                (Some(k), true) => {
                    Some(self.reference(k, &key("key"), "key family", &names.keys)?)
                }
                (None, false) => None,
                (Some(k), false) => {
                    self.error(
                        Some(k.span()),
                        key("key"),
                        "a limiter without a store keeps no keys",
                    );
                    return None;
                }
                (None, true) => {
                    self.error(
                        Some(limit.span()),
                        key("key"),
                        "a limiter with a store checks a key: name a [keys.<name>] family",
                    );
                    return None;
                }
            };
            StepAction::RateLimit {
                limiter: RateLimitId(limiter),
                key: family.map(KeyFamilyId),
            }
        } else if let Some(cache) = &raw.cache {
            let what = "a cache step";
            for (field, span) in [
                ("connection", raw.connection.as_ref().map(Spanned::span)),
                ("ttl", raw.ttl.as_ref().map(Spanned::span)),
                ("timeout", raw.timeout.as_ref().map(Spanned::span)),
            ] {
                not_here(self, span, field, what);
            }
            let cache_id = self.reference(cache, &key("cache"), "cache", &names.caches);
            let Some(op) = &raw.op else {
                self.error(
                    Some(cache.span()),
                    key("op"),
                    "a cache step needs op: \"get\", \"put\", \"invalidate\" or \"flush\"",
                );
                return None;
            };
            let op_name = match op.get_ref().as_str() {
                "get" => CacheOpName::Get,
                "put" => CacheOpName::Put,
                "invalidate" => CacheOpName::Invalidate,
                "flush" => CacheOpName::Flush,
                other => {
                    self.error(
                        Some(op.span()),
                        key("op"),
                        format!("`{other}` is not a cache op: \"get\", \"put\", \"invalidate\" or \"flush\""),
                    );
                    return None;
                }
            };
            if op_name != CacheOpName::Get {
                not_here(
                    self,
                    on_hit.as_ref().map(|h| h.0.clone()),
                    "on_hit",
                    "a cache op other than get",
                );
            }
            if op_name != CacheOpName::Put {
                not_here(
                    self,
                    raw.value.as_ref().map(Spanned::span),
                    "value",
                    "a cache op other than put",
                );
            }
            let family = match (&raw.key, op_name) {
                (Some(_), CacheOpName::Flush) => {
                    not_here(
                        self,
                        raw.key.as_ref().map(Spanned::span),
                        "key",
                        "a flush (it empties the cache)",
                    );
                    None
                }
                (Some(k), _) => Some(self.reference(k, &key("key"), "key family", &names.keys)?),
                (None, CacheOpName::Flush) => None,
                (None, _) => {
                    self.error(
                        Some(op.span()),
                        key("key"),
                        "this cache op needs a key (a [keys.<name>] family)",
                    );
                    return None;
                }
            };
            let op = match op_name {
                CacheOpName::Get => CacheOp::Get,
                CacheOpName::Put => CacheOp::Put {
                    value_bytes: match &raw.value {
                        Some(value) => self.size(value, &key("value"))?,
                        None => default::VALUE as u32,
                    },
                },
                CacheOpName::Invalidate => CacheOp::Invalidate,
                CacheOpName::Flush => CacheOp::Flush,
            };
            StepAction::Cache {
                cache: CacheId(cache_id?),
                op,
                key: family.map(KeyFamilyId),
            }
        } else {
            let what = if raw.db.is_some() {
                "a database step"
            } else {
                "a work step"
            };
            for (field, span) in [
                ("connection", raw.connection.as_ref().map(Spanned::span)),
                ("key", raw.key.as_ref().map(Spanned::span)),
                ("value", raw.value.as_ref().map(Spanned::span)),
                ("ttl", raw.ttl.as_ref().map(Spanned::span)),
                ("on_hit", on_hit.as_ref().map(|h| h.0.clone())),
            ] {
                not_here(self, span, field, what);
            }
            if let Some(database) = &raw.db {
                let database = self.reference(database, &key("db"), "database", &names.databases);
                let timeout = match &raw.timeout {
                    Some(t) => Some(self.positive_duration(
                        t,
                        &key("timeout"),
                        "every query would time out",
                    )?),
                    None => None,
                };
                let latency = match &raw.latency {
                    Some(latency) => Some(self.latency(latency, &key("latency"))?),
                    None => None,
                };
                let lock = match &raw.lock {
                    Some(lock) => Some(KeyFamilyId(self.reference(
                        lock,
                        &key("lock"),
                        "key family",
                        &names.keys,
                    )?)),
                    None => None,
                };
                StepAction::Database {
                    database: DatabaseId(database?),
                    timeout,
                    latency,
                    lock,
                }
            } else {
                not_here(
                    self,
                    raw.timeout.as_ref().map(Spanned::span),
                    "timeout",
                    what,
                );
                let work = raw.work.as_ref().expect("one action is set");
                StepAction::Work {
                    duration: self.duration(work, &key("work"))?,
                }
            }
        };
        if !matches!(action, StepAction::Database { .. }) {
            for (field, span) in [
                ("latency", raw.latency.as_ref().map(Spanned::span)),
                ("lock", raw.lock.as_ref().map(Spanned::span)),
            ] {
                not_here(self, span, field, "a step other than a database query");
            }
        }
        let on_error = match raw.on_error {
            None | Some(OnErrorName::Fail) => OnError::Fail,
            Some(OnErrorName::Next) => OnError::Next,
            Some(OnErrorName::Ignore) => OnError::Ignore,
        };
        if on_error == OnError::Ignore
            && let Some((span, OnHit::Finish | OnHit::Goto(_))) = &on_hit
        {
            self.error(
                Some(span.clone()),
                key("on_hit"),
                "a fire-and-forget step (on_error = \"ignore\") does not steer its request",
            );
        }
        let breaker = raw
            .breaker
            .as_ref()
            .and_then(|b| self.reference(b, &key("breaker"), "breaker", &names.breakers));
        let bulkhead = raw
            .bulkhead
            .as_ref()
            .and_then(|b| self.reference(b, &key("bulkhead"), "bulkhead", &names.bulkheads));
        let semaphore = raw
            .semaphore
            .as_ref()
            .and_then(|b| self.reference(b, &key("semaphore"), "semaphore", &names.semaphores));
        let retry = raw
            .retry
            .as_ref()
            .and_then(|r| self.reference(r, &key("retry"), "retry policy", &names.retries));
        // Meaningful on a reconnect slot only, but allowed on any connection, so that variants
        // can compare a slot with other reconnect designs.
        let replay_writes = match &raw.replay_writes {
            None => false,
            Some(flag) => {
                let sends_command = match action {
                    StepAction::Redis { .. } => true,
                    StepAction::RateLimit { .. } => raw.rate_limit.as_ref().is_some_and(|l| {
                        names.rate_limits_with_store.contains(l.get_ref().as_str())
                    }),
                    _ => false,
                };
                if !sends_command {
                    self.error(
                        Some(flag.span()),
                        key("replay_writes"),
                        "applies to a Redis step, or a rate-limit step with a store: the steps \
                         that send a command a reconnect slot could replay",
                    );
                }
                *flag.get_ref()
            }
        };
        Some(StepSpec {
            action,
            breaker: breaker.map(BreakerId),
            bulkhead: bulkhead.map(BulkheadId),
            semaphore: semaphore.map(SemaphoreId),
            retry: retry.map(RetryId),
            on_error,
            on_hit: on_hit.map_or(OnHit::Next, |(_, target)| target),
            finally: raw.finally.unwrap_or(false),
            replay_writes,
        })
    }

    fn load(
        &mut self,
        name: &str,
        raw: &RawLoad,
        names: &Names,
        horizon: Option<SimTime>,
    ) -> Option<LoadSpec> {
        let key = |field: &str| format!("loads.{name}.{field}");
        let flow = self.reference(&raw.flow, &key("flow"), "flow", &names.flows);
        let start = SimTime::ZERO.saturating_add(self.duration_or(&raw.start, &key("start"), "0s"));
        if let (Some(horizon), Some(start_value)) = (horizon, &raw.start)
            && start > horizon
        {
            self.error(
                Some(start_value.span()),
                key("start"),
                format!(
                    "starts at {}, after the horizon {}: it would never run",
                    since_zero(start),
                    since_zero(horizon)
                ),
            );
        }
        let arrivals = match raw.arrivals.get_ref() {
            ArrivalsName::Burst => {
                for (field, span) in [
                    ("rate", raw.rate.as_ref().map(Spanned::span)),
                    ("duration", raw.duration.as_ref().map(Spanned::span)),
                ] {
                    if let Some(span) = span {
                        self.error(
                            Some(span),
                            key(field),
                            "does not apply to a burst (it sends `count` requests at once)",
                        );
                    }
                }
                let Some(count) = &raw.count else {
                    self.error(
                        Some(raw.arrivals.span()),
                        key("count"),
                        "a burst needs a count",
                    );
                    return None;
                };
                Arrivals::Burst {
                    count: self.count(count, &key("count"), 0, limit::BURST, "")?,
                }
            }
            kind @ (ArrivalsName::Even | ArrivalsName::Poisson) => {
                let rate = match &raw.rate {
                    Some(rate) => match Rate::per_second(*rate.get_ref()) {
                        Ok(rate) => Some(rate),
                        Err(error) => {
                            self.error(Some(rate.span()), key("rate"), error.reason);
                            None
                        }
                    },
                    None => {
                        self.error(
                            Some(raw.arrivals.span()),
                            key("rate"),
                            "needs a rate (requests per second)",
                        );
                        None
                    }
                };
                let end = match (&raw.count, &raw.duration) {
                    (Some(count), None) => Some(LoadEnd::Count(*count.get_ref())),
                    (None, Some(duration)) => self
                        .positive_duration(
                            duration,
                            &key("duration"),
                            "the load would send nothing",
                        )
                        .map(|d| LoadEnd::Until(start.saturating_add(d))),
                    (count, _) => {
                        let span = count
                            .as_ref()
                            .map(Spanned::span)
                            .unwrap_or(raw.arrivals.span());
                        self.error(
                            Some(span),
                            key("count"),
                            "give exactly one of `count` or `duration`",
                        );
                        None
                    }
                };
                let (rate, end) = (rate?, end?);
                match kind {
                    ArrivalsName::Even => Arrivals::Even { rate, end },
                    _ => Arrivals::Poisson { rate, end },
                }
            }
        };
        Some(LoadSpec {
            name: name.to_owned(),
            flow: FlowId(flow?),
            start,
            arrivals,
        })
    }

    fn fault(
        &mut self,
        name: &str,
        raw: &RawFault,
        names: &Names,
        databases: &BTreeMap<String, RawDatabase>,
        horizon: Option<SimTime>,
    ) -> Option<FaultSpec> {
        let key = |field: &str| format!("faults.{name}.{field}");
        let is_server = names.servers.contains_key(raw.target.get_ref().as_str());
        let target = if !is_server && databases.contains_key(raw.target.get_ref()) {
            self.error(
                Some(raw.target.span()),
                key("target"),
                format!(
                    "`{}` is a database: faults can target Redis servers only",
                    raw.target.get_ref()
                ),
            );
            None
        } else {
            self.reference(&raw.target, &key("target"), "server", &names.servers)
        };
        let at = SimTime::ZERO.saturating_add(self.duration(&raw.at, &key("at"))?);
        if let Some(horizon) = horizon
            && at > horizon
        {
            self.error(
                Some(raw.at.span()),
                key("at"),
                format!(
                    "starts at {}, after the horizon {}: it would never happen",
                    since_zero(at),
                    since_zero(horizon)
                ),
            );
        }
        let kind = match raw.kind {
            FaultKindName::Pause => FaultKind::Pause,
            FaultKindName::Hang => FaultKind::Hang,
            FaultKindName::Stop => FaultKind::Stop,
            FaultKindName::Kill => FaultKind::Kill,
        };
        let duration = match (&raw.duration, kind) {
            (Some(d), FaultKind::Kill) => {
                self.error(
                    Some(d.span()),
                    key("duration"),
                    "a kill happens at one instant (the server keeps running): leave duration out",
                );
                return None;
            }
            // An instant: it ends where it starts.
            (None, FaultKind::Kill) => Some(SimDuration::ZERO),
            (Some(d), _) => Some(self.positive_duration(
                d,
                &key("duration"),
                "leave it out for a fault that never ends",
            )?),
            (None, _) => None,
        };
        Some(FaultSpec {
            name: name.to_owned(),
            target: FaultTarget::Server(ServerId(target?)),
            kind,
            at,
            duration,
        })
    }
}

fn since_zero(t: SimTime) -> SimDuration {
    t.saturating_since(SimTime::ZERO)
}

//! From the file as written ([`RawScenario`]) to a scenario the simulator can run
//! ([`Scenario`]): defaults applied, names resolved to ids, every value checked. Problems are
//! collected, each pointing at the value (or key) at fault, rather than stopping at the first.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::{Range, RangeInclusive};

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{Outcome, PercentileRule};
use outagelab_sim::HttpSpec;
use outagelab_sim::scenario::*;
use toml::Spanned;

use crate::diagnostic::{Diagnostic, Source};
use crate::document::Table;
use crate::kinds::{NameIndex, Names, RawScenario};
use crate::raw::*;
use crate::step_keys::RawStep;
use crate::units::{parse_bandwidth, parse_duration, parse_size};
use table::TableReader;

mod breaker;
mod connection;
mod faults;
mod limits;
mod load;
mod policies;
mod resources;
mod retry;
mod service;
mod steps;
mod table;

pub(crate) use faults::{FaultReader, Reported};

/// Defaults for what a file may leave out; the reference (docs/scenario-format.md) lists them.
mod default {
    pub const SEED: u64 = 1;
    pub const BUCKET: &str = "100ms";
    pub const MAX_RETRIES: u32 = 20;
    pub const RECONNECT_DELAY: &str = "50ms";
    pub const RECONNECT_DELAY_MAX: &str = "2s";
    /// A reconnect slot's backoff after a failed attempt, doubling to the maximum (seed 001).
    pub const SLOT_BACKOFF: &str = "100ms";
    pub const SLOT_BACKOFF_MAX: &str = "5s";
    /// A server's cron frequency (Redis' `hz`).
    pub const HZ: u32 = 10;
    /// redis-rs 0.27's `ConnectionManager`: delays of 100 ms · 2^n (its factor 100, base 2),
    /// 6 retries (`connection_keys.rs`); it sets no maximum delay, and 6 retries never pass
    /// 6.4 s.
    pub const MANAGER_FACTOR: &str = "100ms";
    pub const MANAGER_DELAY_MAX: &str = "10s";
}

/// Bounds on sizes that would exhaust memory rather than describe a system.
pub(crate) mod limit {
    pub const KEYS_PER_FAMILY: u32 = 10_000_000;
    pub const VALUE_BYTES: u64 = 512 * 1024 * 1024;
    pub const BURST: u64 = 10_000_000;
    pub const WORKERS: u32 = 1_000_000;
    pub const QUEUE: u32 = 10_000_000;
    /// Stages of one load's rate (an incident's traffic curve at one stage per 10 s for a
    /// day is 8,640).
    pub const STAGES: usize = 100_000;
}

pub(crate) struct Validator<'a> {
    source: &'a Source<'a>,
    root: &'a Table<'a>,
    pub errors: Vec<Diagnostic>,
    /// What is probably a mistake but still runs: the file is accepted with these.
    pub warnings: Vec<Diagnostic>,
    /// The presets the file names, in the order they were read.
    pub presets: Vec<PresetUse>,
    /// Every resource something names, as `(table, name)`: what [`Self::resolve`] found.
    pub used: BTreeSet<(&'static str, String)>,
    /// The HTTP status of each outcome (the `[http]` table's, else the defaults), read before
    /// anything that names outcomes by status class (`retry_on = ["5xx"]`).
    statuses: [u16; Outcome::COUNT],
    /// Pub/Sub channels by name, in the order first named: a channel's id is its place here.
    channels: Vec<String>,
    /// The channels of PUBLISH steps and their keys, checked against the subscribers once
    /// every connection is read.
    published: Vec<(Spanned<String>, String)>,
    /// Faults on a connection (by fault name, with the target as written and its key),
    /// resolved against the scenario's connections once its services are expanded.
    fault_targets: Vec<(String, Spanned<String>, String)>,
}

/// The most instances a service may have: each copies its flows and their per-instance
/// resources.
pub const INSTANCES_MAX: u32 = 1000;

/// A breaker or retry policy whose values start from a library's preset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresetUse {
    /// The table: `breakers.<name>` or `retries.<name>`.
    pub section: String,
    /// The preset's name, as in `outagelab_model::presets`.
    pub preset: String,
}

impl<'a> Validator<'a> {
    pub fn new(source: &'a Source<'a>, root: &'a Table<'a>) -> Self {
        Validator {
            source,
            root,
            errors: Vec::new(),
            warnings: Vec::new(),
            presets: Vec::new(),
            used: BTreeSet::new(),
            statuses: Outcome::ALL.map(Outcome::default_http_status),
            channels: Vec::new(),
            published: Vec::new(),
            fault_targets: Vec::new(),
        }
    }

    /// The id of channel `name`, named for the first time or not.
    fn channel_id(&mut self, name: &str) -> ChannelId {
        let index = match self.channels.iter().position(|c| c == name) {
            Some(index) => index,
            None => {
                self.channels.push(name.to_owned());
                self.channels.len() - 1
            }
        };
        ChannelId(index as u32)
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
        crate::document::key_span(self.root, path)
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

    /// A whole number in `range`, as `T`; out of it, a located error naming the bound it
    /// crosses (`why` says what a value below the range would mean). Nothing is clamped: a
    /// number that does not fit `T` is out of range.
    fn whole<T>(
        &mut self,
        value: &Spanned<Whole>,
        key: &str,
        range: RangeInclusive<T>,
        why: &str,
    ) -> Option<T>
    where
        T: Copy + PartialOrd + fmt::Display + Into<i128> + TryFrom<i64>,
    {
        let number = value.get_ref().0;
        let (min, max) = (*range.start(), *range.end());
        let message = if i128::from(number) < min.into() {
            if why.is_empty() {
                format!("must be at least {min}, not {number}")
            } else {
                format!("must be at least {min} ({why})")
            }
        } else {
            match T::try_from(number) {
                Ok(whole) if range.contains(&whole) => return Some(whole),
                _ => format!("must be at most {max}, not {number}"),
            }
        };
        self.error(Some(value.span()), key, message);
        None
    }

    /// The id of the resource `value` names, or a located error listing the names there are.
    /// The one way a reference is read, so it is also where a resource is marked as used.
    fn resolve<Raw, Id>(
        &mut self,
        index: &NameIndex<Raw, Id>,
        value: &Spanned<String>,
        key: &str,
    ) -> Option<Id> {
        let name = value.get_ref().as_str();
        match index.get(name) {
            Some((id, _)) => {
                self.used.insert((index.table, name.to_owned()));
                Some(id)
            }
            None => {
                let known: Vec<&str> = index.names().collect();
                let kind = index.noun;
                let message = if known.is_empty() {
                    format!("unknown {kind} `{name}`: the scenario defines none")
                } else if let Some(near) = crate::suggest::closest(name, known.iter().copied()) {
                    format!(
                        "unknown {kind} `{name}`: did you mean `{near}`? (defined: {})",
                        known.join(", ")
                    )
                } else {
                    format!("unknown {kind} `{name}` (defined: {})", known.join(", "))
                };
                self.error(Some(value.span()), key, message);
                None
            }
        }
    }

    fn check_names(&mut self, section: &str, names: &[&str]) {
        for &name in names {
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
        for (section, names) in raw.sections() {
            self.check_names(section, &names);
        }
        let names = Names::new(raw);
        let limits = self.limits(&raw.run);
        let ties = match raw.run.ties {
            None | Some(TiesName::Scheduled) => TieOrder::Scheduled,
            Some(TiesName::Shuffled) => TieOrder::Shuffled,
        };
        let bucket = self.bucket(&raw.metrics);
        let percentile_rule = match raw.metrics.percentile_rule {
            None | Some(PercentileRuleName::NearestRank) => PercentileRule::NearestRank,
            Some(PercentileRuleName::FloorIndex) => PercentileRule::FloorIndex,
        };
        // Each kind in the order its checks need: a server's preload needs the key families,
        // a throttle its KV store.
        let keys = self.each(&raw.keys, Self::key_family);
        let servers = self.each(&raw.servers, |v, name, server| {
            Some(v.server(name, server, &names, &keys))
        });
        let client_loops = self.each(&raw.client_loops, Self::client_loop);
        let connections = self.each(&raw.connections, |v, name, connection| {
            v.connection(name, connection, &names)
        });
        let databases = self.each(&raw.databases, Self::database);
        let breakers = self.each(&raw.breakers, Self::breaker);
        let bulkheads = self.each(&raw.bulkheads, Self::bulkhead);
        let semaphores = self.each(&raw.semaphores, Self::semaphore);
        let adaptive_limits = self.each(&raw.adaptive_limits, Self::adaptive_limit);
        // Before the retries: their `retry_on` may name a status class.
        let http = raw.http.as_ref().map(|http| self.http(http));
        if let Some(http) = &http {
            self.statuses = http.status;
        }
        let retries = self.each(&raw.retries, Self::retry);
        let callers = self.each(&raw.callers, |v, name, caller| {
            v.caller(name, caller, &names)
        });
        let caches = self.each(&raw.caches, Self::cache);
        let rate_limits = self.each(&raw.rate_limits, |v, name, limit| {
            v.rate_limit(name, limit, &names)
        });
        let kv_stores = self.each(&raw.kv_stores, Self::kv_store);
        let throttles = self.each(&raw.throttles, |v, name, throttle| {
            v.throttle(name, throttle, &names, &kv_stores)
        });
        let locks = self.each(&raw.locks, Self::lock);
        let flows = self.each(&raw.flows, |v, name, flow| v.flow(name, flow, &names));
        self.check_sheds_reach_breakers(raw, &names, &flows);
        let loads = self.loads(raw, &names, limits.horizon);
        // A disabled fault is still checked (a variant may enable it), then left out.
        let faults = self.each(&raw.faults, |v, name, fault| {
            let spec = v.fault(name, fault, &names, limits.horizon)?;
            fault.enabled.unwrap_or(true).then_some(spec)
        });
        let seed = self.seed(&raw.scenario);
        if self.errors.len() > errors_before {
            return None;
        }
        let scenario = Scenario {
            name: name.to_owned(),
            seed,
            limits,
            ties,
            bucket,
            percentile_rule,
            servers,
            connections,
            databases,
            keys,
            breakers,
            bulkheads,
            semaphores,
            adaptive_limits,
            retries,
            caches,
            rate_limits,
            kv_stores,
            throttles,
            locks,
            flows,
            loads,
            faults,
            http,
            callers,
            services: Vec::new(),
            channels: std::mem::take(&mut self.channels),
            client_loops,
        };
        self.expand(scenario, raw, &names, errors_before)
    }

    /// The loads that run: each checked, a disabled one then left out (a variant may enable
    /// it); a file with none, or with every one disabled, would run nothing.
    fn loads(
        &mut self,
        raw: &RawScenario,
        names: &Names,
        horizon: Option<SimTime>,
    ) -> Vec<LoadSpec> {
        if raw.loads.is_empty() {
            self.error(
                None,
                "loads",
                "the scenario has no [loads.<name>] table: nothing would run",
            );
        }
        let loads: Vec<LoadSpec> = raw
            .loads
            .iter()
            .filter_map(|(name, load)| {
                let spec = self.load(name, load, names, horizon)?;
                (!load.disabled()).then_some(spec)
            })
            .collect();
        if !raw.loads.is_empty() && raw.loads.values().all(|load| load.disabled()) {
            self.error(
                None,
                "loads",
                "every load is disabled (`enabled = false`): nothing would run",
            );
        }
        loads
    }

    /// The run's root seed (TOML's integers are signed: the largest a file can write is
    /// `i64::MAX`).
    fn seed(&mut self, header: &RawHeader) -> u64 {
        match &header.seed {
            Some(seed) => self
                .whole(seed, "scenario.seed", 0..=i64::MAX.unsigned_abs(), "")
                .unwrap_or(default::SEED),
            None => default::SEED,
        }
    }

    /// The scenario once every table is read: its channels checked, its services expanded
    /// into instances, its faults on connections pointed at them, its references checked.
    fn expand(
        &mut self,
        mut scenario: Scenario,
        raw: &RawScenario,
        names: &Names,
        errors_before: usize,
    ) -> Option<Scenario> {
        self.check_published_channels(&scenario);
        for (name, service) in &raw.services {
            self.service(&mut scenario, name, service, names);
        }
        self.resolve_fault_targets(&mut scenario);
        if self.errors.len() > errors_before {
            return None;
        }
        scenario
            .check_references()
            .expect("validated references always resolve");
        Some(scenario)
    }

    /// Points each fault on a connection at it, by the name the file gave: `name` for a
    /// connection outside any service, `name@k` for instance k's copy.
    fn resolve_fault_targets(&mut self, scenario: &mut Scenario) {
        for (fault, target, key) in std::mem::take(&mut self.fault_targets) {
            let name = target.get_ref().as_str();
            let found = scenario.connections.iter().position(|c| c.name == name);
            let Some(index) = found else {
                let known: Vec<&str> = scenario
                    .connections
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect();
                let copies = scenario
                    .connections
                    .iter()
                    .any(|c| c.name == format!("{name}@0"));
                let message = if copies {
                    format!(
                        "`{name}` runs on every instance of its service: name one, `{name}@0` \
                         to `{name}@{}`",
                        known
                            .iter()
                            .filter(|k| k.starts_with(&format!("{name}@")))
                            .count()
                            - 1
                    )
                } else {
                    format!(
                        "unknown connection `{name}` (connections: {})",
                        known.join(", ")
                    )
                };
                self.error(Some(target.span()), key, message);
                continue;
            };
            if let Some(spec) = scenario.faults.iter_mut().find(|f| f.name == fault) {
                spec.target = FaultTarget::Connection(ConnectionId(index as u32));
            }
        }
    }

    /// A PUBLISH to a channel nobody subscribes to reaches no one: a misspelt channel loses
    /// every invalidation silently, so it is an error.
    fn check_published_channels(&mut self, scenario: &Scenario) {
        let subscribed: Vec<&str> = scenario
            .connections
            .iter()
            .filter_map(|c| c.subscription?.channel)
            .map(|channel| scenario.channels[channel.index()].as_str())
            .collect();
        for (channel, key) in std::mem::take(&mut self.published) {
            let name = channel.get_ref().as_str();
            if subscribed.contains(&name) {
                continue;
            }
            let message = match crate::suggest::closest(name, subscribed.iter().copied()) {
                Some(near) => {
                    format!("no connection subscribes to channel `{name}`: did you mean `{near}`?")
                }
                None if subscribed.is_empty() => format!(
                    "no connection subscribes to channel `{name}`: the message would reach no \
                     one (give a connection `subscribe = {{ channel = \"{name}\", invalidates = \
                     \"...\" }}`)"
                ),
                None => format!(
                    "no connection subscribes to channel `{name}` (subscribed: {})",
                    subscribed.join(", ")
                ),
            };
            self.error(Some(channel.span()), key, message);
        }
    }

    /// A breaker that counts `shed` hears of a shed only from a layer that sheds (a bulkhead,
    /// a semaphore, an adaptive limit) listed inside it on some step: in the default order a
    /// bulkhead or semaphore sheds before the breaker is asked, an adaptive limit after.
    /// Counting `shed` where no step can deliver one is a silent mistake, so it is an error.
    fn check_sheds_reach_breakers(&mut self, raw: &RawScenario, names: &Names, flows: &[FlowSpec]) {
        let sheds_reach = |breaker: BreakerId| {
            flows.iter().flat_map(|flow| &flow.steps).any(|step| {
                let at = step
                    .policies
                    .iter()
                    .position(|p| *p == PolicyRef::Breaker(breaker));
                at.is_some_and(|at| step.policies[at + 1..].iter().any(|p| p.kind().sheds()))
            })
        };
        for (name, breaker) in &raw.breakers {
            let Some((index, _)) = names.breakers.get(name.as_str()) else {
                continue;
            };
            let Some(RawValue::List(counts)) = breaker.keys.get("counts").map(Spanned::get_ref)
            else {
                continue;
            };
            for entry in counts {
                if Outcome::from_name(entry.get_ref()) == Some(Outcome::Shed) && !sheds_reach(index)
                {
                    self.error(
                        Some(entry.span()),
                        format!("breakers.{name}.counts"),
                        "`shed` reaches a breaker only from a bulkhead, semaphore or adaptive limit \
                         listed inside it, and no step does that: list the breaker first, e.g. \
                         policies = [\"breaker\", \"bulkhead\"]",
                    );
                }
            }
        }
    }

    /// Validates every resource of one kind, in name order (their ids), keeping those that
    /// pass (the scenario is dropped if any failed).
    fn each<Raw, Spec>(
        &mut self,
        tables: &BTreeMap<String, Raw>,
        mut validate: impl FnMut(&mut Self, &str, &Raw) -> Option<Spec>,
    ) -> Vec<Spec> {
        tables
            .iter()
            .filter_map(|(name, table)| validate(self, name, table))
            .collect()
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
                .whole(
                    value,
                    "run.events_max",
                    1..=u64::MAX,
                    "a run needs at least one event",
                )
                .unwrap_or(1),
            None => RunLimits::EVENTS_MAX_DEFAULT,
        };
        let memory_max = match &run.memory_max {
            Some(value) => match self.size_any(value, "run.memory_max") {
                Some(0) => {
                    self.error(
                        Some(value.span()),
                        "run.memory_max",
                        "must be more than zero (a run holds its requests and its series)",
                    );
                    RunLimits::MEMORY_MAX_DEFAULT
                }
                Some(bytes) => bytes,
                None => RunLimits::MEMORY_MAX_DEFAULT,
            },
            None => RunLimits::MEMORY_MAX_DEFAULT,
        };
        RunLimits {
            horizon: horizon.map(|h| SimTime::ZERO.saturating_add(h)),
            time_max,
            events_max,
            memory_max,
        }
    }

    /// `[http]`: the defaults (`Outcome::default_http_status`) with the file's statuses.
    fn http(&mut self, raw: &RawHttp) -> HttpSpec {
        let mut spec = HttpSpec::default();
        for (name, code) in &raw.status {
            let key = format!("http.status.{name}");
            let Some(outcome) = Outcome::from_name(name) else {
                let known = Outcome::ALL.iter().map(|o| o.name());
                let reason = match crate::suggest::closest(name, known) {
                    Some(near) => format!("unknown outcome `{name}`; did you mean `{near}`?"),
                    None => {
                        let known: Vec<&str> = Outcome::ALL.iter().map(|o| o.name()).collect();
                        format!("unknown outcome `{name}` (outcomes: {})", known.join(", "))
                    }
                };
                self.error(Some(code.span()), key, reason);
                continue;
            };
            let (range, why) = if outcome == Outcome::Ok {
                (
                    200u16..=299,
                    "a request that ended ok is answered with a 2xx status",
                )
            } else {
                (200u16..=599, "an HTTP status code")
            };
            if let Some(code) = self.whole(code, &key, range, why) {
                spec.status[outcome.index()] = code;
            }
        }
        spec
    }

    fn bucket(&mut self, metrics: &RawMetrics) -> SimDuration {
        let Some(value) = &metrics.bucket else {
            return SimDuration::from_nanos(parse_duration(default::BUCKET).expect("default"));
        };
        let Some(bucket) =
            self.positive_duration(value, "metrics.bucket", "the series would have no width")
        else {
            return SimDuration::from_millis(100);
        };
        // Any width is fine: a series widens its buckets rather than hold more than
        // `BUCKETS_MAX` of them, so a narrow bucket costs no memory.
        bucket
    }

    /// A latency: a constant duration or a distribution table.
    fn latency(&mut self, raw: &Spanned<RawLatency>, key: &str) -> Option<Distribution> {
        match raw.get_ref() {
            RawLatency::Constant(text) => {
                let value = Spanned::new(raw.span(), Text(text.0.clone()));
                Some(Distribution::Constant(self.duration(&value, key)?))
            }
            RawLatency::Distribution(table) => self.distribution(key, raw.span(), table),
        }
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
    pub(super) fn error_outcomes(
        &mut self,
        list: &Spanned<Vec<Spanned<String>>>,
        key: &str,
    ) -> Option<OutcomeSet> {
        let errors_before = self.errors.len();
        let mut outcomes = Vec::new();
        for entry in list.get_ref() {
            // A status class: every error outcome answered with a status in it.
            if let Some(class) = match entry.get_ref().as_str() {
                "4xx" => Some(4),
                "5xx" => Some(5),
                _ => None,
            } {
                let before = outcomes.len();
                outcomes.extend(
                    Outcome::ALL[1..]
                        .iter()
                        .copied()
                        .filter(|&o| o != Outcome::Cancelled)
                        .filter(|o| self.statuses[o.index()] / 100 == class),
                );
                if outcomes.len() == before {
                    let message = format!(
                        "no outcome is answered with a {class}xx status (see [http] status)"
                    );
                    self.error(Some(entry.span()), key, message);
                }
                continue;
            }
            match Outcome::from_name(entry.get_ref()) {
                Some(Outcome::Ok) => {
                    self.error(Some(entry.span()), key, "`ok` is a success, not an error")
                }
                Some(Outcome::Cancelled) => self.error(
                    Some(entry.span()),
                    key,
                    "`cancelled` ends a request whose caller has gone: no step, policy or \
                     caller sees it",
                ),
                Some(outcome) => outcomes.push(outcome),
                None => {
                    let known: Vec<&str> = Outcome::ALL[1..]
                        .iter()
                        .filter(|&&o| o != Outcome::Cancelled)
                        .map(|o| o.name())
                        .collect();
                    let name = entry.get_ref();
                    let hint = crate::suggest::closest(name, known.iter().copied())
                        .map(|near| format!(": did you mean `{near}`?"))
                        .unwrap_or_default();
                    self.error(
                        Some(entry.span()),
                        key,
                        format!(
                            "unknown outcome `{name}`{hint} (outcomes: {}; or a status class, \
                             4xx or 5xx)",
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
        // Steps are numbered in 16 bits (a hit may jump to a step by number).
        let steps_max = usize::from(u16::MAX);
        if raw.steps.get_ref().len() > steps_max {
            self.error(
                Some(raw.steps.span()),
                format!("flows.{name}.steps"),
                format!(
                    "{} steps are more than the {steps_max} a flow may have",
                    raw.steps.get_ref().len()
                ),
            );
            return None;
        }
        let errors_before = self.errors.len();
        let mut labels: BTreeMap<&str, u16> = BTreeMap::new();
        for (index, step) in raw.steps.get_ref().iter().enumerate() {
            let index = u16::try_from(index).expect("the number of steps was checked");
            if let Some(label) = step.get_ref().keys.get("label")
                && let RawValue::Word(written) = label.get_ref()
                && labels.insert(written, index).is_some()
            {
                self.error(
                    Some(label.span()),
                    format!("flows.{name}.steps[{index}].label"),
                    format!("two steps are labelled `{written}`"),
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
                let spec = self.step(&prefix, index, step, names, &labels)?;
                let last = index + 1 == raw.steps.get_ref().len();
                if step.get_ref().keys.get("on_error").is_none() && spec.can_fail() && !last {
                    self.warnings.push(self.source.diagnostic(
                        Some(step.span()),
                        prefix,
                        "can fail and has no on_error: an error here ends the request (fail-closed, \
                         the default); write on_error = \"fail\" to say so, or \"next\" to go on \
                         without it (fail-open)",
                    ));
                }
                Some(spec)
            })
            .collect();
        (self.errors.len() == errors_before).then(|| FlowSpec {
            name: name.to_owned(),
            steps,
            instance: None,
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
        let on_hit = match self.step_reader(prefix, spanned).name("on_hit") {
            None => None,
            Some(hit) => Some(self.on_hit(&hit, &format!("{prefix}.on_hit"), index, labels)?),
        };
        let action = self.step_action(prefix, spanned, names)?;
        let on_error = self.steering(prefix, spanned, &action, &on_hit);
        let replay_writes = self.replay_writes(prefix, spanned, names);
        let policies = self.step_policies(prefix, spanned, names)?;
        Some(StepSpec {
            action,
            policies,
            on_error,
            on_hit: on_hit.map_or(OnHit::Next, |(_, target)| target),
            finally: self.step_reader(prefix, spanned).flag("finally"),
            replay_writes,
        })
    }

    /// A reader of the step `step`'s keys, at `prefix`: `flows.f.steps[0]`.
    fn step_reader<'v, 'r>(
        &'v mut self,
        prefix: &str,
        step: &'r Spanned<RawStep>,
    ) -> TableReader<'v, 'a, 'r> {
        let (keys, span) = (&step.get_ref().keys, Some(step.span()));
        TableReader::new(self, prefix.to_owned(), keys, &crate::step_keys::STEP, span)
    }

    /// Where a hit (a Redis GET or cache get that found its value) sends the request: the
    /// next step, the end, or a labelled step after this one, with the value's span.
    fn on_hit(
        &mut self,
        hit: &Spanned<String>,
        key: &str,
        index: usize,
        labels: &BTreeMap<&str, u16>,
    ) -> Option<(Range<usize>, OnHit)> {
        let target = match hit.get_ref().as_str() {
            "next" => OnHit::Next,
            "finish" => OnHit::Finish,
            label => match labels.get(label) {
                Some(&target) if usize::from(target) > index => OnHit::Goto(target),
                Some(&target) => {
                    self.error(
                        Some(hit.span()),
                        key,
                        format!(
                            "`{label}` is step {target}, not after this one: a hit may \
                             only jump forward"
                        ),
                    );
                    return None;
                }
                None => {
                    let known: Vec<&str> = labels.keys().copied().collect();
                    let targets = ["next", "finish"].into_iter().chain(known.clone());
                    let hint = crate::suggest::closest(label, targets)
                        .map(|near| format!(": did you mean `{near}`?"))
                        .unwrap_or_default();
                    self.error(
                        Some(hit.span()),
                        key,
                        format!(
                            "`{label}` is not \"next\", \"finish\" or a step \
                             label{hint} (labels here: {})",
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

    /// The step's action, read by its own function in `validate/steps.rs` from its table.
    fn step_action(
        &mut self,
        prefix: &str,
        spanned: &Spanned<RawStep>,
        names: &Names,
    ) -> Option<StepAction> {
        let (action, _) = spanned.get_ref().action();
        let mut step = self.step_reader(prefix, spanned);
        if action == "work" {
            let duration = step.latency("work").ok()??;
            return Some(StepAction::Work { duration });
        }
        let r = &mut step.table(action).expect("an action is a table but work");
        match action {
            "redis" => steps::redis_step(r, names),
            "db" => steps::db_step(r, names),
            "call" => steps::call_step(r),
            "cache" => steps::cache_step(r, names),
            "throttle" => steps::throttle_step(r, names),
            "rate_limit" => steps::rate_limit_step(r, names),
            "lock" => steps::lock_step(r, names),
            action => unreachable!("a step declares no action `{action}`"),
        }
    }

    /// The keys that steer the request around the step, checked against its action: a hit
    /// needs a step that can hit, and a fire-and-forget step steers nothing and acquires no
    /// lock.
    fn steering(
        &mut self,
        prefix: &str,
        spanned: &Spanned<RawStep>,
        action: &StepAction,
        on_hit: &Option<(Range<usize>, OnHit)>,
    ) -> OnError {
        let key = |field: &str| format!("{prefix}.{field}");
        let can_hit = matches!(
            action,
            StepAction::Redis {
                command: RedisCommand::Get,
                ..
            } | StepAction::Cache {
                op: CacheOp::Get,
                ..
            }
        );
        if let Some((span, _)) = &on_hit
            && !can_hit
        {
            self.error(
                Some(span.clone()),
                key("on_hit"),
                "applies to a step that can hit only: a Redis GET or a cache get",
            );
        }
        // A word that is none of them is reported (the file is refused), the step then read
        // as failing closed.
        let on_error = (self.step_reader(prefix, spanned))
            .choice("on_error", ON_ERRORS, None)
            .ok()
            .flatten()
            .unwrap_or(OnError::Fail);
        if on_error == OnError::Ignore
            && let Some((span, OnHit::Finish | OnHit::Goto(_))) = &on_hit
        {
            self.error(
                Some(span.clone()),
                key("on_hit"),
                "a fire-and-forget step (on_error = \"ignore\") does not steer its request",
            );
        }
        if let (OnError::Ignore, ("lock", lock)) = (on_error, spanned.get_ref().action())
            && let StepAction::Lock {
                op: LockOp::Acquire(_),
                ..
            } = *action
        {
            self.error(
                Some(lock.span()),
                key("on_error"),
                "a fire-and-forget acquire (on_error = \"ignore\") holds the lock for nobody until its lease ends: let the request wait for it",
            );
        }
        on_error
    }

    /// The policies the step names, by kind, in the order a request meets them.
    fn step_policies(
        &mut self,
        prefix: &str,
        spanned: &Spanned<RawStep>,
        names: &Names,
    ) -> Option<Vec<PolicyRef>> {
        let key = |field: &str| format!("{prefix}.{field}");
        let written = |kind: PolicyKind| {
            let value = spanned.get_ref().keys.get(kind.name());
            value.map(PolicyNames::written)
        };
        let named = [
            self.named(
                PolicyKind::Retry,
                &written(PolicyKind::Retry),
                &key("retry"),
                |v, name, at| v.resolve(&names.retries, name, at).map(PolicyRef::Retry),
            ),
            self.named(
                PolicyKind::Bulkhead,
                &written(PolicyKind::Bulkhead),
                &key("bulkhead"),
                |v, name, at| {
                    v.resolve(&names.bulkheads, name, at)
                        .map(PolicyRef::Bulkhead)
                },
            ),
            self.named(
                PolicyKind::Semaphore,
                &written(PolicyKind::Semaphore),
                &key("semaphore"),
                |v, name, at| {
                    v.resolve(&names.semaphores, name, at)
                        .map(PolicyRef::Semaphore)
                },
            ),
            self.named(
                PolicyKind::Breaker,
                &written(PolicyKind::Breaker),
                &key("breaker"),
                |v, name, at| v.resolve(&names.breakers, name, at).map(PolicyRef::Breaker),
            ),
            self.named(
                PolicyKind::AdaptiveLimit,
                &written(PolicyKind::AdaptiveLimit),
                &key("adaptive_limit"),
                |v, name, at| {
                    v.resolve(&names.adaptive_limits, name, at)
                        .map(PolicyRef::AdaptiveLimit)
                },
            ),
        ];
        let order = self.step_reader(prefix, spanned).list("policies");
        self.policy_order(order.as_ref(), &key("policies"), &named)
    }

    /// The policies of `kind` a step names at `path`, in the order written (one name, or a
    /// list), each resolved by `resolve`; with the span of the value as written. A name given
    /// twice is an error: a request would pass the same policy twice.
    fn named(
        &mut self,
        kind: PolicyKind,
        raw: &Option<Spanned<PolicyNames>>,
        path: &str,
        mut resolve: impl FnMut(&mut Self, &Spanned<String>, &str) -> Option<PolicyRef>,
    ) -> Named {
        let Some(raw) = raw else {
            return Named {
                kind,
                policies: Vec::new(),
                span: None,
            };
        };
        let names = raw.get_ref().names(raw.span());
        if names.is_empty() {
            self.error(
                Some(raw.span()),
                path.to_owned(),
                format!("lists no {}: name one, or leave the key out", kind.name()),
            );
        }
        let mut policies = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let at = match raw.get_ref() {
                PolicyNames::One(_) => path.to_owned(),
                PolicyNames::Many(_) => format!("{path}[{index}]"),
            };
            if names[..index].iter().any(|n| n.get_ref() == name.get_ref()) {
                self.error(
                    Some(name.span()),
                    at,
                    format!(
                        "names {} `{}` twice: a request would pass it twice",
                        kind.name(),
                        name.get_ref()
                    ),
                );
                continue;
            }
            policies.extend(resolve(self, name, &at));
        }
        Named {
            kind,
            policies,
            span: Some(raw.span()),
        }
    }

    /// The step's policies in the order a request meets them: as `policies` lists them (the
    /// n-th listing of a kind is its n-th name), or in [`PolicyKind::DEFAULT_ORDER`] when the
    /// step names at most one policy of each kind.
    fn policy_order(
        &mut self,
        order: Option<&Spanned<Vec<Spanned<String>>>>,
        path: &str,
        named: &[Named],
    ) -> Option<Vec<PolicyRef>> {
        let Some(order) = order else {
            return self.default_order(path, named);
        };
        let mut policies = Vec::new();
        let mut listed: Vec<PolicyKind> = Vec::new();
        let mut ok = true;
        for (index, entry) in order.get_ref().iter().enumerate() {
            let at = format!("{path}[{index}]");
            let Some(kind) = self.listed_kind(entry, &at) else {
                ok = false;
                continue;
            };
            let nth = listed.iter().filter(|&&k| k == kind).count();
            listed.push(kind);
            match self.listed_policy(entry, at, of(named, kind), nth) {
                Some(policy) => policies.push(policy),
                None => ok = false,
            }
        }
        // Unlisted kinds are reported only when the list itself was understood: a misspelt
        // kind would otherwise be reported twice.
        let ok = ok && self.check_unlisted(order.span(), path, named, &listed);
        ok.then_some(policies)
    }

    /// A step's policies without a `policies` list: in [`PolicyKind::DEFAULT_ORDER`], which
    /// needs at most one of each kind.
    fn default_order(&mut self, path: &str, named: &[Named]) -> Option<Vec<PolicyRef>> {
        let mut ok = true;
        for several in named.iter().filter(|n| n.policies.len() > 1) {
            let kind = several.kind.name();
            self.error(
                several.span.clone(),
                path.to_owned(),
                format!(
                    "the step names {} {kind} policies: list \"{kind}\" in `policies` once \
                     for each, where a request meets it (the first listed is the first named)",
                    several.policies.len()
                ),
            );
            ok = false;
        }
        ok.then(|| {
            (PolicyKind::DEFAULT_ORDER.iter())
                .flat_map(|&kind| of(named, kind).policies.iter().copied())
                .collect()
        })
    }

    /// The kind an entry of `policies` names, or an error at it (with the nearest kind).
    fn listed_kind(&mut self, entry: &Spanned<String>, at: &str) -> Option<PolicyKind> {
        let name = entry.get_ref().as_str();
        let kind = PolicyKind::DEFAULT_ORDER
            .into_iter()
            .find(|kind| kind.name() == name);
        if kind.is_none() {
            let known: Vec<&str> = PolicyKind::DEFAULT_ORDER.iter().map(|k| k.name()).collect();
            let message = match crate::suggest::closest(name, known.iter().copied()) {
                Some(near) => format!(
                    "\"{name}\" is not a policy kind: did you mean \"{near}\"? (the kinds are {})",
                    known.join(", ")
                ),
                None => format!(
                    "\"{name}\" is not a policy kind; the kinds are {}",
                    known.join(", ")
                ),
            };
            self.error(Some(entry.span()), at, message);
        }
        kind
    }

    /// The policy the `nth` listing of its kind stands for: the kind's `nth` name, or an
    /// error at the entry when the step names fewer.
    fn listed_policy(
        &mut self,
        entry: &Spanned<String>,
        at: String,
        named: &Named,
        nth: usize,
    ) -> Option<PolicyRef> {
        let (kind, instances) = (named.kind, &named.policies);
        if let Some(&policy) = instances.get(nth) {
            return Some(policy);
        }
        let message = if instances.is_empty() {
            format!(
                "the step lists {0} but names no {0}: add {0} = \"...\" to the step",
                kind.name()
            )
        } else {
            format!(
                "{0} is listed {1} times but the step names {2}: each listing takes \
                 one name of `{0} = [\"...\", ...]`, in order",
                kind.name(),
                nth + 1,
                instances.len()
            )
        };
        self.error(Some(entry.span()), at, message);
        None
    }

    /// Whether `policies` lists each kind the step names as often as it names it; each kind
    /// it does not is reported at the list.
    fn check_unlisted(
        &mut self,
        span: Range<usize>,
        path: &str,
        named: &[Named],
        listed: &[PolicyKind],
    ) -> bool {
        let mut ok = true;
        for named in named {
            let (kind, count) = (named.kind, named.policies.len());
            let times = listed.iter().filter(|&&k| k == kind).count();
            let message = if count > 0 && times == 0 {
                let article = if kind.name().starts_with('a') {
                    "an"
                } else {
                    "a"
                };
                format!(
                    "the step names {article} {0} but `policies` does not list it: add \"{0}\" \
                     where a request meets it",
                    kind.name(),
                )
            } else if times < count {
                format!(
                    "the step names {count} {0} policies but `policies` lists \"{0}\" {times} \
                     times: list it once for each, where a request meets it",
                    kind.name()
                )
            } else {
                continue;
            };
            self.error(Some(span.clone()), path.to_owned(), message);
            ok = false;
        }
        ok
    }

    /// `replay_writes`, in the table of an action that sends a command a reconnect slot
    /// could replay: a Redis step, or a rate-limit step with a store. Meaningful on a slot
    /// only, but allowed on any connection, so that variants can compare a slot with other
    /// reconnect designs.
    fn replay_writes(&mut self, prefix: &str, spanned: &Spanned<RawStep>, names: &Names) -> bool {
        let (action, _) = spanned.get_ref().action();
        if !matches!(action, "redis" | "rate_limit") {
            return false;
        }
        let mut step = self.step_reader(prefix, spanned);
        let r = &mut step.table(action).expect("the action is a table");
        match action {
            "redis" => r.flag("replay_writes"),
            _ => steps::rate_limit_replays(r, names),
        }
    }

    /// A rate in requests per second that may be zero, in thousandths.
    fn rate_or_zero(&mut self, value: &Spanned<f64>, key: &str) -> Option<u64> {
        let rate = *value.get_ref();
        if rate == 0.0 {
            return Some(0);
        }
        if rate.is_nan() || rate < 0.0 {
            self.error(
                Some(value.span()),
                key,
                format!("must be zero or more requests per second, not {rate}"),
            );
            return None;
        }
        match Rate::per_second(rate) {
            Ok(rate) => Some(rate.millirequests_per_second()),
            Err(error) => {
                self.error(Some(value.span()), key, error.reason);
                None
            }
        }
    }
}

fn since_zero(t: SimTime) -> SimDuration {
    t.saturating_since(SimTime::ZERO)
}

/// A step's `on_error`, by its declared words.
const ON_ERRORS: &[(&str, OnError)] = &[
    ("fail", OnError::Fail),
    ("next", OnError::Next),
    ("ignore", OnError::Ignore),
];

/// The policies of one kind a step names, resolved, in the order written, with the span of
/// the value as written.
struct Named {
    kind: PolicyKind,
    policies: Vec<PolicyRef>,
    span: Option<std::ops::Range<usize>>,
}

/// The policies of `kind` among those a step names.
fn of(named: &[Named], kind: PolicyKind) -> &Named {
    (named.iter().find(|n| n.kind == kind)).expect("every kind is named, maybe empty")
}

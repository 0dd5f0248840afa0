//! A structure-aware scenario generator: from a seed, a scenario file that declares a random
//! selection of every resource kind, flows whose steps use every step action under every
//! policy kind, loads of every arrival kind, faults of every kind, variants and sweeps.
//!
//! Runs stay small (a few hundred requests, horizons of seconds) so one takes milliseconds.
//! Most files are meant to be valid, and most are; about one in four is written in an
//! "absurd" mode where a few values are replaced by zero, negatives, NaN, infinities, huge
//! numbers or malformed units, and references sometimes name nothing, to exercise
//! validation and the limits it lets through.
//!
//! What the generator covers is checked by tests ([`RESOURCE_TABLES`], [`FAULT_KINDS`],
//! [`STEP_ACTIONS`], [`POLICY_KINDS`] against the format's own lists, and every entry seen in
//! a few hundred generated files).

use std::fmt::Write as _;

use crate::rng::Rng;

/// Every resource table of the format (`resource_kinds!` in `scenario-file/src/kinds.rs`).
pub const RESOURCE_TABLES: [&str; 20] = [
    "servers",
    "client_loops",
    "connections",
    "databases",
    "keys",
    "breakers",
    "bulkheads",
    "semaphores",
    "adaptive_limits",
    "retries",
    "caches",
    "rate_limits",
    "kv_stores",
    "throttles",
    "locks",
    "callers",
    "services",
    "flows",
    "loads",
    "faults",
];

/// Every fault kind (`FaultKindName` in `scenario-file/src/raw.rs`).
pub const FAULT_KINDS: [&str; 10] = [
    "pause",
    "hang",
    "stop",
    "kill",
    "maxmemory",
    "flushall",
    "error_reply",
    "disconnect",
    "failover",
    "crash",
];

/// Every step action.
pub const STEP_ACTIONS: [&str; 7] = [
    "redis",
    "db",
    "work",
    "cache",
    "throttle",
    "rate_limit",
    "lock",
];

/// Every policy kind a step may name.
pub const POLICY_KINDS: [&str; 5] = [
    "retry",
    "bulkhead",
    "semaphore",
    "breaker",
    "adaptive_limit",
];

const DURATION_ABSURD: &[&str] = &[
    "\"0s\"",
    "\"-1ms\"",
    "\"1ns\"",
    "\"NaN\"",
    "\"nanms\"",
    "\"1e308s\"",
    "\"10000000h\"",
    "\"\"",
    "0",
    "-1",
    "\"5\"",
    "\"1.5.5ms\"",
    "\"18446744073709551615ns\"",
    "\"2562047h\"",
    "1e308",
    "nan",
    "inf",
];
const COUNT_ABSURD: &[&str] = &[
    "0",
    "-1",
    "4294967296",
    "10000000",
    "1e308",
    "\"NaN\"",
    "9223372036854775807",
    "nan",
    "inf",
    "-inf",
    "1.5",
    "\"3\"",
    "true",
];
const SIZE_ABSURD: &[&str] = &[
    "\"0B\"",
    "\"-1B\"",
    "\"1e308B\"",
    "\"16EiB\"",
    "18446744073709551615",
    "0",
    "-1",
    "\"1.5B\"",
    "\"NaNKiB\"",
    "\"4294967296GiB\"",
];
const RATE_ABSURD: &[&str] = &[
    "0", "-1", "1e9", "1e308", "nan", "1e-9", "inf", "\"fast\"", "10000000", "0.0001",
];
const BANDWIDTH_ABSURD: &[&str] = &[
    "\"0B/s\"",
    "\"1bit/s\"",
    "\"1e308GiB/s\"",
    "\"-1MiB/s\"",
    "\"NaNB/s\"",
    "\"1B/s\"",
];
const PERCENT_ABSURD: &[&str] = &["0", "100", "101", "-5", "nan", "1e308", "0.0001"];

/// A scenario file drawn from `seed`.
pub fn generate(seed: u64) -> String {
    let mut rng = Rng::new(seed, 0, 1);
    let absurd_percent = if rng.chance(75) { 0 } else { rng.range(2, 10) };
    let mut generator = Generator {
        rng,
        absurd_percent,
        out: String::new(),
        names: Names::default(),
    };
    generator.file();
    generator.out
}

#[derive(Default)]
struct Names {
    /// Servers, each with the server it replicates (if it is a replica).
    servers: Vec<(String, Option<String>)>,
    client_loops: Vec<String>,
    /// Connections that send commands, each with its server.
    connections: Vec<(String, String)>,
    /// Subscribers: name, server, channel.
    subscribers: Vec<(String, String, Option<String>)>,
    databases: Vec<String>,
    keys: Vec<String>,
    breakers: Vec<String>,
    bulkheads: Vec<String>,
    semaphores: Vec<String>,
    adaptive_limits: Vec<String>,
    retries: Vec<String>,
    caches: Vec<String>,
    /// Rate limiters, each with whether it has a store.
    rate_limits: Vec<(String, bool)>,
    kv_stores: Vec<String>,
    throttles: Vec<String>,
    locks: Vec<String>,
    callers: Vec<String>,
    flows: Vec<String>,
    /// Loads, each with whether it has a `rate` (a sweep may vary it).
    loads: Vec<(String, bool)>,
    breakers_toggle: Vec<String>,
    /// The service's instances, when the flows run in one (faults on a connection name a copy).
    instances: Option<u64>,
    /// The run's horizon in microseconds, if it has one: faults start before it.
    horizon_us: Option<u64>,
}

struct Generator {
    rng: Rng,
    /// Chance, in percent, that a value is replaced by an absurd one.
    absurd_percent: u64,
    out: String,
    names: Names,
}

impl Generator {
    fn absurd(&mut self) -> bool {
        self.absurd_percent > 0 && self.rng.chance(self.absurd_percent)
    }

    fn pick_absurd(&mut self, values: &[&str]) -> String {
        (*self.rng.pick(values)).to_owned()
    }

    fn line(&mut self, key: &str, value: &str) {
        let _ = writeln!(self.out, "{key} = {value}");
    }

    fn table(&mut self, name: &str) {
        let _ = writeln!(self.out, "\n[{name}]");
    }

    /// A duration between `low_us` and `high_us` microseconds, in the unit that writes it
    /// shortest.
    fn duration(&mut self, low_us: u64, high_us: u64) -> String {
        if self.absurd() {
            return self.pick_absurd(DURATION_ABSURD);
        }
        quoted(&duration_text(self.rng.range(low_us, high_us)))
    }

    fn count(&mut self, low: u64, high: u64) -> String {
        if self.absurd() {
            return self.pick_absurd(COUNT_ABSURD);
        }
        self.rng.range(low, high).to_string()
    }

    fn size(&mut self, low: u64, high: u64) -> String {
        if self.absurd() {
            return self.pick_absurd(SIZE_ABSURD);
        }
        let bytes = self.rng.range(low, high);
        if bytes % 1024 == 0 && bytes > 0 {
            quoted(&format!("{}KiB", bytes / 1024))
        } else if self.rng.chance(50) {
            bytes.to_string()
        } else {
            quoted(&format!("{bytes}B"))
        }
    }

    fn rate(&mut self, low: u64, high: u64) -> String {
        if self.absurd() {
            return self.pick_absurd(RATE_ABSURD);
        }
        let whole = self.rng.range(low, high);
        if self.rng.chance(20) {
            format!("{whole}.5")
        } else {
            whole.to_string()
        }
    }

    fn bandwidth(&mut self) -> String {
        if self.absurd() {
            return self.pick_absurd(BANDWIDTH_ABSURD);
        }
        let amount = self.rng.range(1, 200);
        quoted(&format!(
            "{amount}{}",
            self.rng.pick(&["MiB/s", "KiB/s", "Mbit/s", "Gbit/s"])
        ))
    }

    fn percent(&mut self, low: u64, high: u64) -> String {
        if self.absurd() {
            return self.pick_absurd(PERCENT_ABSURD);
        }
        self.rng.range(low, high).to_string()
    }

    fn boolean(&mut self) -> String {
        if self.absurd() {
            return self.pick_absurd(&["1", "\"yes\""]);
        }
        self.rng.chance(50).to_string()
    }

    /// A latency: a duration or a distribution table.
    fn latency(&mut self, low_us: u64, high_us: u64) -> String {
        match self.rng.below(4) {
            0 => {
                let min = self.duration(low_us, high_us);
                let max = self.duration(high_us, high_us * 2);
                format!("{{ distribution = \"uniform\", min = {min}, max = {max} }}")
            }
            1 => {
                let mean = self.duration(low_us, high_us);
                if self.rng.chance(50) {
                    let min = self.duration(0, low_us);
                    format!("{{ distribution = \"exponential\", mean = {mean}, min = {min} }}")
                } else {
                    format!("{{ distribution = \"exponential\", mean = {mean} }}")
                }
            }
            _ => self.duration(low_us, high_us),
        }
    }

    /// One of `names`, or (in absurd mode, now and then) a name nothing has.
    fn reference(&mut self, names: &[String]) -> String {
        if names.is_empty() || self.absurd() {
            return quoted("missing");
        }
        quoted(self.rng.pick(names).as_str())
    }

    /// Each kind's resources: 0 to `most`, more often some than none.
    fn how_many(&mut self, most: u64) -> u64 {
        if self.rng.chance(35) {
            0
        } else {
            self.rng.range(1, most)
        }
    }

    fn file(&mut self) {
        self.declare_names();
        self.header();
        self.servers();
        self.client_loops();
        self.connections();
        self.databases();
        self.keys();
        self.breakers();
        self.bulkheads();
        self.semaphores();
        self.adaptive_limits();
        self.retries();
        self.caches();
        self.rate_limits();
        self.kv_stores();
        self.throttles();
        self.locks();
        self.callers();
        self.flows();
        self.services();
        self.loads();
        self.faults();
        self.http_and_report();
        self.variants();
        self.sweep();
    }

    /// Decides what exists before anything is written, so references can name it.
    fn declare_names(&mut self) {
        let servers = self.rng.range(1, 2);
        for index in 0..servers {
            self.names.servers.push((format!("redis{index}"), None));
        }
        if self.rng.chance(50) {
            self.names
                .servers
                .push(("replica".into(), Some("redis0".into())));
        }
        if self.rng.chance(20) {
            self.names.client_loops.push("loop".into());
        }
        let connections = self.rng.range(1, 3);
        for index in 0..connections {
            let server = self.names.servers[index as usize % servers as usize]
                .0
                .clone();
            self.names
                .connections
                .push((format!("conn{index}"), server));
        }
        let caches = self.how_many(2);
        self.names.caches = (0..caches).map(|i| format!("l1_{i}")).collect();
        if !self.names.caches.is_empty() && self.rng.chance(30) {
            let channel = self.rng.chance(80).then(|| "inv".to_owned());
            self.names
                .subscribers
                .push(("sub".into(), "redis0".into(), channel));
        }
        let count = self.how_many(2);
        self.names.databases = (0..count).map(|i| format!("db{i}")).collect();
        let count = self.rng.range(1, 3);
        self.names.keys = (0..count).map(|i| format!("k{i}")).collect();
        let count = self.how_many(2);
        self.names.breakers = (0..count).map(|i| format!("br{i}")).collect();
        let count = self.how_many(2);
        self.names.bulkheads = (0..count).map(|i| format!("bh{i}")).collect();
        let count = self.how_many(2);
        self.names.semaphores = (0..count).map(|i| format!("sem{i}")).collect();
        let count = self.how_many(2);
        self.names.adaptive_limits = (0..count).map(|i| format!("al{i}")).collect();
        let count = self.how_many(3);
        self.names.retries = (0..count).map(|i| format!("rt{i}")).collect();
        let count = self.how_many(2);
        for index in 0..count {
            let store = self.rng.chance(50);
            self.names.rate_limits.push((format!("rl{index}"), store));
        }
        let count = self.how_many(2);
        self.names.kv_stores = (0..count).map(|i| format!("kv{i}")).collect();
        let count = self.how_many(2);
        self.names.throttles = (0..count).map(|i| format!("th{i}")).collect();
        let count = self.how_many(2);
        self.names.locks = (0..count).map(|i| format!("lk{i}")).collect();
        if self.rng.chance(25) {
            self.names.callers.push("upstream".into());
        }
        let count = self.rng.range(1, 3);
        self.names.flows = (0..count).map(|i| format!("f{i}")).collect();
    }

    fn header(&mut self) {
        self.table("scenario");
        self.line("name", &quoted("generated"));
        let seed = if self.absurd() {
            self.pick_absurd(&["-1", "9223372036854775807", "1.5", "\"x\""])
        } else {
            self.rng.range(0, 1000).to_string()
        };
        self.line("seed", &seed);
        if self.rng.chance(30) {
            let expect = self.expectations();
            self.line("expect", &expect);
        }
        if self.rng.chance(85) {
            self.table("run");
            let horizon_us = self.rng.range(100_000, 3_000_000);
            self.names.horizon_us = Some(horizon_us);
            let horizon = if self.absurd() {
                self.pick_absurd(DURATION_ABSURD)
            } else {
                quoted(&duration_text(horizon_us))
            };
            self.line("horizon", &horizon);
            if self.rng.chance(10) {
                let events = self.count(1, 100_000);
                self.line("events_max", &events);
            }
            if self.rng.chance(10) {
                let memory = self.size(1, 1 << 30);
                self.line("memory_max", &memory);
            }
            if self.rng.chance(5) {
                let time_max = self.duration(1, 10_000_000);
                self.line("time_max", &time_max);
            }
        }
        if self.rng.chance(20) {
            self.table("metrics");
            let bucket = self.duration(1_000, 500_000);
            self.line("bucket", &bucket);
            let rule = if self.rng.chance(50) {
                "\"floor_index\""
            } else {
                "\"nearest_rank\""
            };
            self.line("percentile_rule", rule);
        }
    }

    fn expectations(&mut self) -> String {
        let mut items = Vec::new();
        for _ in 0..self.rng.range(1, 3) {
            let item = match self.rng.below(6) {
                0 => "requests >= 0".to_owned(),
                1 => format!("outcomes.ok >= {}", self.rng.range(0, 100)),
                2 => format!("latency_ms.all.p99 < {}", self.rng.range(1, 2000)),
                3 => "unfinished == 0".to_owned(),
                4 => format!("outcomes.timeout in 0..{}", self.rng.range(0, 50)),
                _ if self.absurd() => "no.such.metric > 1".to_owned(),
                _ => "latency_ms.all.p50 <= latency_ms.all.max".to_owned(),
            };
            items.push(quoted(&item));
        }
        format!("[{}]", items.join(", "))
    }

    fn servers(&mut self) {
        let servers = self.names.servers.clone();
        for (name, primary) in servers {
            self.table(&format!("servers.{name}"));
            if let Some(primary) = primary {
                self.line("replica_of", &quoted(&primary));
                if self.rng.chance(50) {
                    let lag = self.duration(0, 50_000);
                    self.line("replication_lag", &lag);
                }
            }
            if self.rng.chance(40) {
                let cost = self.duration(1, 100);
                self.line("command_cost", &cost);
            }
            if self.rng.chance(15) {
                let rate = self.bandwidth();
                self.line("byte_rate", &rate);
            }
            if self.rng.chance(20) {
                let persistence = self.boolean();
                self.line("persistence", &persistence);
            }
            if self.rng.chance(40) {
                let key = self.reference(&self.names.keys.clone());
                let value = self.size(1, 4096);
                let preload = if self.rng.chance(50) {
                    let count = self.count(1, 1);
                    format!("[{{ key = {key}, count = {count}, value = {value} }}]")
                } else {
                    format!("[{{ key = {key}, value = {value} }}]")
                };
                self.line("preload", &preload);
            }
            if self.rng.chance(10) {
                let bytes = self.size(1, 64);
                self.line("key_bytes", &bytes);
            }
            if self.rng.chance(10) {
                let bytes = self.size(0, 128);
                self.line("key_overhead", &bytes);
            }
            if self.rng.chance(30) {
                let limit = self.size(0, 200_000);
                self.line("maxmemory", &limit);
                let policy = *self.rng.pick(&[
                    "noeviction",
                    "allkeys-lru",
                    "volatile-lru",
                    "allkeys-random",
                    "volatile-ttl",
                ]);
                self.line("maxmemory_policy", &quoted(policy));
                if self.rng.chance(30) {
                    let samples = self.count(1, 64);
                    self.line("maxmemory_samples", &samples);
                } else if self.rng.chance(20) {
                    self.line("maxmemory_exact", "true");
                }
            }
            if self.rng.chance(15) {
                let hz = self.count(1, 500);
                self.line("hz", &hz);
            }
        }
    }

    fn client_loops(&mut self) {
        for name in self.names.client_loops.clone() {
            self.table(&format!("client_loops.{name}"));
            let rate = self.bandwidth();
            self.line("write_rate", &rate);
            if self.rng.chance(40) {
                let rate = self.bandwidth();
                self.line("copy_rate", &rate);
                let size = self.size(1, 65536);
                self.line("copy_before_yield", &size);
            }
        }
    }

    fn connections(&mut self) {
        for (name, server) in self.names.connections.clone() {
            self.table(&format!("connections.{name}"));
            self.line("server", &quoted(&server));
            if self.rng.chance(10) {
                let preset = *self.rng.pick(&["ioredis", "redis-rs-multiplexed"]);
                self.line("preset", &quoted(preset));
            }
            if self.rng.chance(40) {
                let latency = self.duration(10, 2_000);
                self.line("latency", &latency);
            }
            if self.rng.chance(15) {
                let bandwidth = self.bandwidth();
                self.line("bandwidth", &bandwidth);
            }
            if self.rng.chance(50) {
                let timeout = self.duration(1_000, 500_000);
                self.line("command_timeout", &timeout);
            }
            let reconnect = *self
                .rng
                .pick(&["always", "always", "never", "slot", "manager"]);
            if reconnect != "always" || self.rng.chance(30) {
                self.line("reconnect", &quoted(reconnect));
            }
            if reconnect != "slot" {
                if self.rng.chance(20) {
                    let queue = self.boolean();
                    self.line("offline_queue", &queue);
                }
                if self.rng.chance(20) {
                    let retries = if self.rng.chance(20) {
                        quoted("unlimited")
                    } else {
                        self.count(0, 30)
                    };
                    self.line("max_retries", &retries);
                }
            }
            if reconnect == "manager" && self.rng.chance(50) {
                let retries = self.count(0, 10);
                self.line("reconnect_retries", &retries);
            }
            if self.rng.chance(20) {
                let timeout = self.duration(1_000, 2_000_000);
                self.line("connect_timeout", &timeout);
            }
            if self.rng.chance(20) {
                let delay = self.duration(1_000, 200_000);
                self.line("reconnect_delay", &delay);
                let delay_max = self.duration(200_000, 3_000_000);
                self.line("reconnect_delay_max", &delay_max);
            }
            if self.rng.chance(10) {
                let connected = self.boolean();
                self.line("connected_at_start", &connected);
            }
            if let Some(client_loop) = self.names.client_loops.first().cloned()
                && self.rng.chance(60)
            {
                self.line("client_loop", &quoted(&client_loop));
            }
            if self.rng.chance(10) {
                let lateness = self.duration(0, 5_000);
                self.line("timer_lateness", &lateness);
            }
            if self.rng.chance(20) {
                let pending = self.count(1, 50);
                self.line("pending_max", &pending);
            }
            if self.rng.chance(10) {
                let follows = self.boolean();
                self.line("follows_failover", &follows);
            }
            if let Some((subscriber, sub_server, _)) = self.names.subscribers.first().cloned()
                && sub_server == server
                && self.rng.chance(40)
            {
                let tracking = if self.rng.chance(50) {
                    let family = self.reference(&self.names.keys.clone());
                    format!(
                        "{{ redirect = {}, bcast = [{family}] }}",
                        quoted(&subscriber)
                    )
                } else {
                    format!("{{ redirect = {} }}", quoted(&subscriber))
                };
                self.line("tracking", &tracking);
            }
        }
        for (name, server, channel) in self.names.subscribers.clone() {
            self.table(&format!("connections.{name}"));
            self.line("server", &quoted(&server));
            let cache = self.reference(&self.names.caches.clone());
            let flush = self.boolean();
            let subscribe = match channel {
                Some(channel) => format!(
                    "{{ channel = {}, invalidates = {cache}, flush_on_reconnect = {flush} }}",
                    quoted(&channel)
                ),
                None => format!("{{ invalidates = {cache} }}"),
            };
            self.line("subscribe", &subscribe);
        }
    }

    fn databases(&mut self) {
        for name in self.names.databases.clone() {
            self.table(&format!("databases.{name}"));
            let latency = self.latency(500, 50_000);
            self.line("latency", &latency);
            if self.rng.chance(50) {
                let capacity = self.count(1, 20);
                self.line("capacity", &capacity);
            }
            if self.rng.chance(30) {
                let connections = self.count(1, 20);
                self.line("max_connections", &connections);
                if self.rng.chance(50) {
                    let queue = self.count(0, 20);
                    self.line("connection_queue", &queue);
                }
            }
            if self.rng.chance(15) {
                let above = self.rng.range(2, 20);
                let recover = self.rng.range(1, above - 1);
                let percent = self.percent(1, 99);
                let collapse = format!(
                    "{{ above = {above}, throughput_percent = {percent}, recover_below = {recover} }}"
                );
                self.line("collapse", &collapse);
            }
        }
    }

    fn keys(&mut self) {
        for name in self.names.keys.clone() {
            self.table(&format!("keys.{name}"));
            let count = self.count(1, 200);
            self.line("count", &count);
            if self.rng.chance(25) {
                self.line("distribution", &quoted("hot"));
                let hot = self.count(1, 5);
                self.line("hot_keys", &hot);
                let share = self.percent(1, 99);
                self.line("hot_share_percent", &share);
            }
        }
    }

    fn breakers(&mut self) {
        for name in self.names.breakers.clone() {
            self.table(&format!("breakers.{name}"));
            if self.rng.chance(15) {
                self.line("enabled", "false");
                self.names.breakers_toggle.push(name.clone());
            }
            let preset = self.rng.chance(20);
            if preset {
                let preset = *self.rng.pick(&[
                    "resilience4j",
                    "polly-v8",
                    "polly-v7-advanced",
                    "opossum",
                    "gobreaker",
                ]);
                self.line("preset", &quoted(preset));
            }
            let rate_rule = self.rng.chance(50);
            if rate_rule {
                let percent = self.percent(1, 100);
                let window_calls = self.rng.range(1, 50);
                let min_calls = self.count(1, window_calls);
                let window = if self.rng.chance(50) {
                    format!("window_calls = {window_calls}")
                } else {
                    // Slots that divide the window into whole milliseconds.
                    let slots = self.rng.range(1, 10);
                    let window = self.rng.range(1, 500) * slots;
                    format!("window = \"{window}ms\", window_slots = {slots}")
                };
                self.line(
                    "failure_rate",
                    &format!("{{ percent = {percent}, {window}, min_calls = {min_calls} }}"),
                );
            } else if !preset || self.rng.chance(50) {
                let failures = self.count(1, 10);
                self.line("failures", &failures);
            }
            if !preset || self.rng.chance(50) {
                let open_for = self.duration(1_000, 2_000_000);
                self.line("open_for", &open_for);
            }
            if self.rng.chance(30) {
                let probes = self.count(1, 5);
                self.line("half_open_probes", &probes);
            }
            if self.rng.chance(30) {
                let mut counts = vec!["\"timeout\""];
                for outcome in [
                    "\"refused\"",
                    "\"connection_lost\"",
                    "\"server_error\"",
                    "\"oom\"",
                    "\"readonly\"",
                    "\"loading\"",
                    "\"lock_timeout\"",
                ] {
                    if self.rng.chance(40) {
                        counts.push(outcome);
                    }
                }
                self.line("counts", &format!("[{}]", counts.join(", ")));
            }
            if rate_rule && self.rng.chance(20) {
                self.line("half_open_rule", &quoted("failure_rate"));
            }
            if self.rng.chance(20) {
                let uncounted = *self.rng.pick(&["ignored", "success"]);
                self.line("uncounted_as", &quoted(uncounted));
            }
            if self.rng.chance(10) {
                let wait = self.duration(1_000, 1_000_000);
                self.line("half_open_max_wait", &wait);
            }
            if self.rng.chance(10) {
                self.line("open_for_factor", "2");
                let max = self.duration(2_000_000, 10_000_000);
                self.line("open_for_max", &max);
            }
            if rate_rule && self.rng.chance(15) {
                let slow = self.duration(1_000, 200_000);
                self.line("slow_call_duration", &slow);
                let percent = self.percent(1, 100);
                self.line("slow_call_percent", &percent);
            }
            if rate_rule && self.rng.chance(20) {
                let on = *self.rng.pick(&["any", "failure"]);
                self.line("evaluate_on", &quoted(on));
            }
            if self.rng.chance(15) {
                let late = *self.rng.pick(&["ignored", "counted"]);
                self.line("late_failures", &quoted(late));
            }
        }
    }

    fn bulkheads(&mut self) {
        for name in self.names.bulkheads.clone() {
            self.table(&format!("bulkheads.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let max = self.count(1, 10);
            self.line("max_concurrent", &max);
            let queue = self.count(0, 20);
            self.line("queue", &queue);
        }
    }

    fn semaphores(&mut self) {
        for name in self.names.semaphores.clone() {
            self.table(&format!("semaphores.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let both = self.rng.below(3);
            if both != 1 {
                let max = self.count(1, 10);
                self.line("max_in_flight", &max);
            }
            if both != 0 {
                let bytes = self.size(64, 100_000);
                self.line("max_bytes", &bytes);
            }
        }
    }

    fn adaptive_limits(&mut self) {
        for name in self.names.adaptive_limits.clone() {
            self.table(&format!("adaptive_limits.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            if self.rng.chance(50) {
                let min = self.rng.range(1, 5);
                let initial = self.rng.range(min, 30);
                let max = self.rng.range(initial, 100);
                self.line("limit_min", &min.to_string());
                let initial = if self.absurd() {
                    self.pick_absurd(COUNT_ABSURD)
                } else {
                    initial.to_string()
                };
                self.line("limit_initial", &initial);
                self.line("limit_max", &max.to_string());
            }
            if self.rng.chance(50) {
                let ratio = *self.rng.pick(&["0.5", "0.9", "0.99"]);
                let ratio = if self.absurd() {
                    self.pick_absurd(&["1", "0.1", "nan", "-1"])
                } else {
                    ratio.to_owned()
                };
                let timeout = self.duration(1_000, 1_000_000);
                self.line(
                    "aimd",
                    &format!("{{ backoff_ratio = {ratio}, timeout = {timeout} }}"),
                );
            } else {
                let window = self.count(1, 1000);
                let queue = self.count(1, 10);
                self.line(
                    "gradient2",
                    &format!(
                        "{{ rtt_tolerance = 1.5, smoothing = 0.2, long_window = {window}, queue_size = {queue} }}"
                    ),
                );
            }
            if self.rng.chance(20) {
                self.line("drops", "[\"timeout\", \"shed\"]");
            }
        }
    }

    fn retries(&mut self) {
        for name in self.names.retries.clone() {
            self.table(&format!("retries.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let preset = self.rng.chance(15);
            if preset {
                let preset = *self
                    .rng
                    .pick(&["backoff-crate", "tokio-retry", "aws-full-jitter"]);
                self.line("preset", &quoted(preset));
                // The presets' own waits are seconds long: keep runs short.
                if preset == "backoff-crate" {
                    self.line("max_attempts", "3");
                    self.line("elapsed_max", "\"2s\"");
                }
            } else {
                let attempts = self.count(1, 5);
                self.line("max_attempts", &attempts);
                let backoff_us = self.rng.range(1, 100_000);
                let backoff = if self.absurd() {
                    self.pick_absurd(DURATION_ABSURD)
                } else {
                    quoted(&duration_text(backoff_us))
                };
                self.line("backoff", &backoff);
                if self.rng.chance(40) {
                    self.line("backoff_factor", "2");
                    let max = quoted(&duration_text(backoff_us * self.rng.range(1, 20)));
                    self.line("backoff_max", &max);
                }
            }
            if self.rng.chance(30) {
                let jitter =
                    *self
                        .rng
                        .pick(&["none", "full", "equal", "decorrelated", "proportional"]);
                self.line("jitter", &quoted(jitter));
                if jitter == "proportional" && self.rng.chance(50) {
                    self.line("randomization_factor", "0.25");
                }
            }
            if self.rng.chance(15) {
                let elapsed = self.duration(1_000, 2_000_000);
                self.line("elapsed_max", &elapsed);
            }
            if self.rng.chance(20) {
                let percent = self.percent(1, 50);
                self.line("budget_percent", &percent);
                let min = self.count(0, 10);
                self.line("budget_min_per_second", &min);
                let window = self.duration(100_000, 10_000_000);
                self.line("budget_window", &window);
            }
            if self.rng.chance(30) {
                let retry_on = *self.rng.pick(&[
                    "[\"timeout\"]",
                    "[\"timeout\", \"refused\", \"shed\"]",
                    "[\"5xx\"]",
                    "[\"lock_busy\", \"timeout\"]",
                    "[\"rate_limited\"]",
                ]);
                self.line("retry_on", retry_on);
            }
        }
    }

    fn caches(&mut self) {
        for name in self.names.caches.clone() {
            self.table(&format!("caches.{name}"));
            let entries = self.count(1, 100);
            self.line("max_entries", &entries);
            let bytes = self.size(64, 1_000_000);
            self.line("max_bytes", &bytes);
            let ttl = self.duration(1_000, 5_000_000);
            self.line("ttl", &ttl);
        }
    }

    fn rate_limits(&mut self) {
        for (name, store) in self.names.rate_limits.clone() {
            self.table(&format!("rate_limits.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            if self.rng.chance(30) {
                let algorithm = *self.rng.pick(&["token_bucket", "gcra"]);
                self.line("algorithm", &quoted(algorithm));
            }
            let capacity = self.count(1, 50);
            self.line("capacity", &capacity);
            let rate = self.rate(1, 200);
            self.line("rate", &rate);
            if store {
                let connections: Vec<String> = self
                    .names
                    .connections
                    .iter()
                    .map(|(name, _)| name.clone())
                    .collect();
                let store = self.reference(&connections);
                self.line("store", &store);
                let unreachable = *self.rng.pick(&["open", "closed"]);
                self.line("when_unreachable", &quoted(unreachable));
                if unreachable == "closed" && self.rng.chance(50) {
                    let retry_after = self.duration(1_000, 2_000_000);
                    self.line("fail_closed_retry_after", &retry_after);
                }
            }
        }
    }

    fn kv_stores(&mut self) {
        for name in self.names.kv_stores.clone() {
            self.table(&format!("kv_stores.{name}"));
            let read = self.latency(100, 20_000);
            self.line("read_latency", &read);
            let write = self.latency(100, 40_000);
            self.line("write_latency", &write);
            if self.rng.chance(30) {
                let staleness = self.duration(0, 100_000);
                self.line("staleness_max", &staleness);
            }
        }
    }

    fn throttles(&mut self) {
        for name in self.names.throttles.clone() {
            self.table(&format!("throttles.{name}"));
            if self.rng.chance(10) {
                self.line("enabled", "false");
            }
            let kv = !self.names.kv_stores.is_empty() && self.rng.chance(50);
            self.line("form", &quoted(if kv { "kv" } else { "atomic" }));
            if kv {
                let store = self.reference(&self.names.kv_stores.clone());
                self.line("store", &store);
            }
            let max = self.count(1, 10);
            self.line("inflight_max", &max);
            if self.rng.chance(50) {
                // Retry-After carries whole seconds.
                let retry_after = if self.absurd() {
                    self.pick_absurd(DURATION_ABSURD)
                } else {
                    quoted(&format!("{}s", self.rng.range(1, 2)))
                };
                self.line("retry_after", &retry_after);
            }
            if self.rng.chance(30) {
                let ttl = self.duration(10_000, 5_000_000);
                self.line("counter_ttl", &ttl);
                let mode = *self.rng.pick(&["refreshed", "fixed"]);
                self.line("ttl_mode", &quoted(mode));
            }
            if self.rng.chance(20) {
                let loss = self.percent(0, 50);
                self.line("release_loss_percent", &loss);
            }
        }
    }

    fn locks(&mut self) {
        for name in self.names.locks.clone() {
            self.table(&format!("locks.{name}"));
            let lease = self.duration(1_000, 3_000_000);
            self.line("lease", &lease);
            let timeout_us = self.rng.range(1_000, 1_000_000);
            let delay = quoted(&duration_text(self.rng.range(1, timeout_us)));
            if self.rng.chance(70) {
                self.line("retry_delay", &delay);
            }
            if self.rng.chance(30) {
                let jitter = *self.rng.pick(&["none", "full", "equal"]);
                self.line("retry_jitter", &quoted(jitter));
            }
            let timeout = if self.absurd() {
                self.pick_absurd(DURATION_ABSURD)
            } else {
                quoted(&duration_text(timeout_us))
            };
            self.line("acquire_timeout", &timeout);
        }
    }

    fn callers(&mut self) {
        for name in self.names.callers.clone() {
            self.table(&format!("callers.{name}"));
            let timeout = self.rng.chance(70);
            if timeout {
                let timeout = self.duration(1_000, 1_000_000);
                self.line("timeout", &timeout);
            }
            if timeout && self.rng.chance(40) {
                self.line("cancel_on_timeout", "true");
            }
            if !self.names.retries.is_empty() && self.rng.chance(50) {
                // A retry policy of the caller's own: with a service, one its flows use
                // would be refused (each instance would share it).
                self.line("retry", &quoted("caller_retry"));
                self.table("retries.caller_retry");
                let attempts = self.count(1, 4);
                self.line("max_attempts", &attempts);
                let backoff = self.duration(1_000, 100_000);
                self.line("backoff", &backoff);
                self.line("retry_on", "[\"timeout\", \"5xx\"]");
            }
        }
    }

    fn flows(&mut self) {
        for name in self.names.flows.clone() {
            self.table(&format!("flows.{name}"));
            let steps = self.rng.range(1, 5) as usize;
            let mut written = Vec::new();
            for index in 0..steps {
                written.push(self.step(index, steps));
            }
            let _ = writeln!(self.out, "steps = [\n  {},\n]", written.join(",\n  "));
        }
    }

    /// One step: an action, its policies, what its result does.
    fn step(&mut self, index: usize, steps: usize) -> String {
        let mut available = vec!["work"];
        if !self.names.connections.is_empty() {
            available.push("redis");
        }
        if !self.names.databases.is_empty() {
            available.push("db");
        }
        if !self.names.caches.is_empty() {
            available.push("cache");
        }
        if !self.names.throttles.is_empty() {
            available.push("throttle");
        }
        if !self.names.rate_limits.is_empty() {
            available.push("rate_limit");
        }
        if !self.names.locks.is_empty() {
            available.push("lock");
        }
        let action = *self.rng.pick(&available);
        let keys = self.names.keys.clone();
        let connections: Vec<String> = self
            .names
            .connections
            .iter()
            .map(|(name, _)| name.clone())
            .collect();
        let mut parts = Vec::new();
        let mut can_hit = false;
        let mut acquire = false;
        let mut release = false;
        match action {
            "redis" => {
                let (connection, server) = self.rng.pick(&self.names.connections).clone();
                let publish_channel = self
                    .names
                    .subscribers
                    .iter()
                    .find(|(_, sub_server, channel)| sub_server == &server && channel.is_some())
                    .and_then(|(_, _, channel)| channel.clone());
                let mut commands = vec!["GET", "GET", "SET", "INCR", "DEL", "SET NX PX"];
                if publish_channel.is_some() || self.absurd() {
                    commands.push("PUBLISH");
                }
                let command = *self.rng.pick(&commands);
                let key = self.reference(&keys);
                let mut table = format!(
                    "command = {}, connection = {}, key = {key}",
                    quoted(command),
                    quoted(&connection)
                );
                if matches!(command, "SET" | "SET NX PX") && self.rng.chance(60) {
                    let _ = write!(table, ", value = {}", self.size(1, 8192));
                }
                if command == "SET NX PX" || (command == "SET" && self.rng.chance(30)) {
                    let _ = write!(table, ", ttl = {}", self.duration(1_000, 2_000_000));
                }
                if command == "PUBLISH" {
                    let channel = publish_channel.unwrap_or_else(|| "nobody".into());
                    let _ = write!(table, ", channel = {}", quoted(&channel));
                }
                if command != "GET" && self.rng.chance(15) {
                    table.push_str(", replay_writes = true");
                }
                can_hit = command == "GET";
                parts.push(format!("redis = {{ {table} }}"));
            }
            "db" => {
                let name = self.reference(&self.names.databases.clone());
                let mut table = format!("name = {name}");
                if self.rng.chance(40) {
                    let _ = write!(table, ", timeout = {}", self.duration(1_000, 200_000));
                }
                if self.rng.chance(20) {
                    let _ = write!(table, ", latency = {}", self.latency(100, 20_000));
                }
                if self.rng.chance(15) {
                    let _ = write!(table, ", lock = {}", self.reference(&keys));
                }
                if self.rng.chance(25) {
                    let _ = write!(table, ", key = {}", self.reference(&keys));
                    if self.rng.chance(50) {
                        table.push_str(", write = true");
                    }
                }
                parts.push(format!("db = {{ {table} }}"));
            }
            "work" => {
                let latency = self.latency(10, 20_000);
                parts.push(format!("work = {latency}"));
            }
            "cache" => {
                let name = self.reference(&self.names.caches.clone());
                let op = *self.rng.pick(&["get", "get", "put", "invalidate", "flush"]);
                let mut table = format!("name = {name}, op = {}", quoted(op));
                if op != "flush" {
                    let _ = write!(table, ", key = {}", self.reference(&keys));
                }
                if op == "put" && self.rng.chance(50) {
                    let _ = write!(table, ", value = {}", self.size(1, 4096));
                }
                can_hit = op == "get";
                parts.push(format!("cache = {{ {table} }}"));
            }
            "throttle" => {
                let name = self.reference(&self.names.throttles.clone());
                let op = if index + 1 < steps || self.rng.chance(30) {
                    "acquire"
                } else {
                    "release"
                };
                acquire = op == "acquire";
                release = op == "release";
                let key = self.reference(&keys);
                parts.push(format!(
                    "throttle = {{ name = {name}, op = {}, key = {key} }}",
                    quoted(op)
                ));
            }
            "rate_limit" => {
                let (name, store) = self.rng.pick(&self.names.rate_limits).clone();
                let mut table = format!("name = {}", quoted(&name));
                if store != self.absurd() {
                    let _ = write!(table, ", key = {}", self.reference(&keys));
                }
                if store && self.rng.chance(10) {
                    table.push_str(", replay_writes = true");
                }
                parts.push(format!("rate_limit = {{ {table} }}"));
            }
            _ => {
                let name = self.reference(&self.names.locks.clone());
                let connection = self.reference(&connections);
                let key = self.reference(&keys);
                let op = if index + 1 < steps || self.rng.chance(30) {
                    "acquire"
                } else {
                    "release"
                };
                let mut table = format!(
                    "name = {name}, op = {}, connection = {connection}, key = {key}",
                    quoted(op)
                );
                if op == "acquire" {
                    let mode = *self.rng.pick(&["exclusive", "shared"]);
                    let _ = write!(table, ", mode = {}", quoted(mode));
                }
                acquire = op == "acquire";
                release = op == "release";
                parts.push(format!("lock = {{ {table} }}"));
            }
        }
        // Policies around the action.
        let mut kinds = Vec::new();
        let policy_sets = [
            ("breaker", self.names.breakers.clone(), 25),
            ("bulkhead", self.names.bulkheads.clone(), 20),
            ("semaphore", self.names.semaphores.clone(), 15),
            ("retry", self.names.retries.clone(), 25),
            ("adaptive_limit", self.names.adaptive_limits.clone(), 12),
        ];
        for (kind, names, chance) in policy_sets {
            if names.is_empty() || !self.rng.chance(chance) {
                continue;
            }
            if kind == "retry" && names.len() >= 2 && self.rng.chance(25) {
                // An overall retry and a per-try one, placed by `policies`.
                parts.push(format!(
                    "retry = [{}, {}]",
                    quoted(&names[0]),
                    quoted(&names[1])
                ));
                kinds.push(kind);
                kinds.push(kind);
            } else {
                let name = self.reference(&names);
                parts.push(format!("{kind} = {name}"));
                kinds.push(kind);
            }
        }
        let twice = kinds.windows(2).any(|pair| pair[0] == pair[1]);
        if !kinds.is_empty() && (twice || self.rng.chance(30)) {
            // A random order, outermost first (Fisher-Yates).
            for i in (1..kinds.len()).rev() {
                let j = self.rng.below(i as u64 + 1) as usize;
                kinds.swap(i, j);
            }
            let listed: Vec<String> = kinds.iter().map(|kind| quoted(kind)).collect();
            parts.push(format!("policies = [{}]", listed.join(", ")));
        }
        let on_error = if acquire && action == "lock" {
            *self.rng.pick(&["fail", "next"])
        } else {
            *self.rng.pick(&["fail", "next", "ignore", "fail"])
        };
        let written = self.rng.chance(80) || self.absurd();
        if written {
            parts.push(format!("on_error = {}", quoted(on_error)));
        }
        // A fire-and-forget step does not steer its request.
        if can_hit && !(written && on_error == "ignore") && self.rng.chance(50) {
            let target = if index + 1 < steps && self.rng.chance(40) {
                format!("s{}", self.rng.range(index as u64 + 1, steps as u64 - 1))
            } else {
                self.rng.pick(&["finish", "next"]).to_string()
            };
            parts.push(format!("on_hit = {}", quoted(&target)));
        }
        if index > 0 {
            parts.push(format!("label = {}", quoted(&format!("s{index}"))));
        }
        if release && self.rng.chance(70) {
            parts.push("finally = true".into());
        }
        format!("{{ {} }}", parts.join(", "))
    }

    fn services(&mut self) {
        if !self.rng.chance(20) {
            return;
        }
        self.table("services.api");
        let instances = self.rng.range(1, 3);
        self.names.instances = Some(instances);
        let instances = if self.absurd() {
            self.pick_absurd(&["0", "1001", "-1"])
        } else {
            instances.to_string()
        };
        self.line("instances", &instances);
        let flows: Vec<String> = self.names.flows.iter().map(|f| quoted(f)).collect();
        self.line("flows", &format!("[{}]", flows.join(", ")));
        if self.rng.chance(40) {
            let spread = *self.rng.pick(&["round_robin", "random"]);
            self.line("spread", &quoted(spread));
        }
    }

    fn loads(&mut self) {
        let loads = self.rng.range(1, 2);
        for index in 0..loads {
            let name = format!("load{index}");
            self.table(&format!("loads.{name}"));
            let flow = self.reference(&self.names.flows.clone());
            self.line("flow", &flow);
            let arrivals = *self
                .rng
                .pick(&["even", "poisson", "poisson", "burst", "closed"]);
            self.line("arrivals", &quoted(arrivals));
            let mut has_rate = false;
            match arrivals {
                "even" | "poisson" => {
                    let rate_per_s = self.rng.range(5, 400);
                    let rate = if self.absurd() {
                        self.pick_absurd(RATE_ABSURD)
                    } else {
                        rate_per_s.to_string()
                    };
                    self.line("rate", &rate);
                    has_rate = true;
                    if self.rng.chance(50) {
                        let count = self.count(0, 200);
                        self.line("count", &count);
                    } else {
                        // At most about 300 requests.
                        let most_us = 300_000_000 / rate_per_s;
                        let duration = self.duration(1_000, most_us.min(2_000_000));
                        self.line("duration", &duration);
                    }
                }
                "burst" => {
                    let count = self.count(0, 100);
                    self.line("count", &count);
                }
                _ => {
                    let workers = self.count(1, 10);
                    self.line("workers", &workers);
                    if self.rng.chance(50) {
                        let think = self.latency(0, 50_000);
                        self.line("think", &think);
                    }
                    if self.rng.chance(20) {
                        let stagger = self.duration(0, 100_000);
                        self.line("stagger", &stagger);
                    }
                    let iterations = self.rng.chance(60);
                    if iterations {
                        let count = self.count(1, 20);
                        self.line("iterations", &count);
                    }
                    if !iterations || self.rng.chance(30) {
                        let duration = self.duration(1_000, 1_000_000);
                        self.line("duration", &duration);
                    }
                }
            }
            if self.rng.chance(30) {
                let latest = self
                    .names
                    .horizon_us
                    .map_or(500_000, |h| (h - 1).min(500_000));
                let start = self.duration(0, latest);
                self.line("start", &start);
            }
            if index > 0 && self.rng.chance(5) {
                self.line("enabled", "false");
            }
            if let Some(caller) = self.names.callers.first().cloned()
                && self.rng.chance(70)
            {
                self.line("caller", &quoted(&caller));
            }
            self.names.loads.push((name, has_rate));
        }
    }

    fn faults(&mut self) {
        let faults = self.rng.range(0, 3);
        for index in 0..faults {
            self.table(&format!("faults.fault{index}"));
            let mut kind = *self.rng.pick(&FAULT_KINDS);
            let has_replica = self.names.servers.iter().any(|(_, p)| p.is_some());
            if kind == "failover" && !has_replica && !self.absurd() {
                kind = "stop";
            }
            let servers: Vec<String> = self.names.servers.iter().map(|(n, _)| n.clone()).collect();
            let target = match kind {
                "disconnect" => self.connection_target(),
                "kill" if self.rng.chance(30) => self.connection_target(),
                "failover" => quoted(
                    self.names
                        .servers
                        .iter()
                        .find_map(|(_, primary)| primary.clone())
                        .as_deref()
                        .unwrap_or("redis0"),
                ),
                _ => self.reference(&servers),
            };
            self.line("target", &target);
            self.line("kind", &quoted(kind));
            let latest = self.names.horizon_us.map_or(1_500_000, |h| h - 1);
            let at = self.duration(0, latest);
            self.line("at", &at);
            let instant = matches!(kind, "kill" | "maxmemory" | "flushall");
            if (!instant && self.rng.chance(80)) || self.absurd() {
                let duration = self.duration(1_000, 1_500_000);
                self.line("duration", &duration);
            }
            match kind {
                "pause" if self.rng.chance(40) => {
                    let mode = *self.rng.pick(&["all", "write"]);
                    self.line("mode", &quoted(mode));
                }
                "maxmemory" => {
                    let limit = self.size(0, 100_000);
                    self.line("maxmemory", &limit);
                }
                "error_reply" => {
                    let error = *self.rng.pick(&["readonly", "loading", "wrongtype", "oom"]);
                    self.line("error", &quoted(error));
                    if self.rng.chance(40) {
                        let commands = *self.rng.pick(&["all", "write"]);
                        self.line("commands", &quoted(commands));
                    }
                }
                "failover" => {
                    self.line("replica", &quoted("replica"));
                    if self.rng.chance(30) {
                        self.line("unreachable", "true");
                    }
                }
                _ => {}
            }
            if self.rng.chance(5) {
                self.line("enabled", "false");
            }
        }
    }

    /// A connection a fault can target: in a service, one instance's copy.
    fn connection_target(&mut self) -> String {
        let connections: Vec<String> = self
            .names
            .connections
            .iter()
            .map(|(name, _)| name.clone())
            .collect();
        let name = self.rng.pick(&connections).clone();
        // A connection the service's flows reach has a copy per instance; one they do not
        // keeps its name.
        match self.names.instances {
            Some(instances) if self.rng.chance(40) => {
                quoted(&format!("{name}@{}", self.rng.below(instances)))
            }
            _ => quoted(&name),
        }
    }

    fn http_and_report(&mut self) {
        if self.rng.chance(20) {
            self.table("http");
            if self.rng.chance(50) {
                let code = if self.absurd() {
                    self.pick_absurd(&["99", "600", "200"])
                } else {
                    self.rng.range(500, 599).to_string()
                };
                self.line("status", &format!("{{ timeout = {code}, shed = 429 }}"));
            }
        }
        if self.rng.chance(10) {
            self.table("report");
            self.line("metrics", "[\"outcomes.ok\", \"latency_ms.all.p99\"]");
            if self.rng.chance(50) {
                let latency = self.duration(1_000, 1_000_000);
                let percentile = self.percent(1, 99);
                self.line(
                    "slo",
                    &format!("{{ latency = {latency}, percentile = {percentile} }}"),
                );
            }
        }
    }

    fn variants(&mut self) {
        if self.rng.chance(50) {
            return;
        }
        for index in 0..self.rng.range(1, 3) {
            let _ = writeln!(self.out, "\n[[variant]]");
            self.line("name", &quoted(&format!("v{index}")));
            let patch = match self.rng.below(5) {
                0 => {
                    let (connection, _) = self.rng.pick(&self.names.connections).clone();
                    let timeout = self.duration(1_000, 200_000);
                    Some(format!(
                        "{{ connections = {{ {connection} = {{ command_timeout = {timeout} }} }} }}"
                    ))
                }
                1 if !self.names.breakers_toggle.is_empty() => {
                    let breaker = self.names.breakers_toggle[0].clone();
                    Some(format!(
                        "{{ breakers = {{ {breaker} = {{ enabled = true }} }} }}"
                    ))
                }
                2 => {
                    let (load, _) = self.rng.pick(&self.names.loads).clone();
                    Some(format!(
                        "{{ loads = {{ {load} = {{ start = {} }} }} }}",
                        self.duration(0, 300_000)
                    ))
                }
                3 if !self.names.databases.is_empty() => {
                    let database = self.names.databases[0].clone();
                    Some(format!(
                        "{{ databases = {{ {database} = {{ latency = {} }} }} }}",
                        self.duration(100, 50_000)
                    ))
                }
                _ => None,
            };
            if let Some(patch) = patch {
                self.line("patch", &patch);
            }
            if self.rng.chance(20) {
                let expect = self.expectations();
                self.line("expect", &expect);
            }
        }
    }

    fn sweep(&mut self) {
        let rated: Vec<String> = self
            .names
            .loads
            .iter()
            .filter(|(_, rate)| *rate)
            .map(|(name, _)| name.clone())
            .collect();
        if rated.is_empty() || !self.rng.chance(10) {
            return;
        }
        let load = self.rng.pick(&rated).clone();
        self.table("sweep");
        self.line("parameter", &quoted(&format!("loads.{load}.rate")));
        self.line("label", &quoted("rate"));
        let values: Vec<String> = (0..self.rng.range(1, 3))
            .map(|_| self.rate(1, 300))
            .collect();
        self.line("values", &format!("[{}]", values.join(", ")));
    }
}

fn quoted(text: &str) -> String {
    format!("\"{text}\"")
}

/// `micros` in the largest unit that writes it exactly.
fn duration_text(micros: u64) -> String {
    if micros == 0 {
        "0s".to_owned()
    } else if micros % 1_000_000 == 0 {
        format!("{}s", micros / 1_000_000)
    } else if micros % 1_000 == 0 {
        format!("{}ms", micros / 1_000)
    } else {
        format!("{micros}us")
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// The names a reader's message lists after "expected one of" (or "expected"), for a
    /// file that has an unknown name where `kind` goes.
    fn listed_by_reader(text: &str) -> Vec<String> {
        let message = outagelab_scenario_file::parse(text, Path::new("probe.toml"))
            .err()
            .expect("the probe is refused")
            .to_string();
        let listed = message
            .split_once("expected one of ")
            .or_else(|| message.split_once("expected "))
            .unwrap_or_else(|| panic!("no list in: {message}"))
            .1;
        listed
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    }

    const HEADER: &str = "[scenario]\nname = \"probe\"\n";

    #[test]
    fn the_lists_are_the_formats() {
        let mut tables = listed_by_reader(&format!("{HEADER}[nope]\n"));
        tables.retain(|t| {
            ![
                "scenario", "run", "metrics", "http", "variant", "sweep", "report",
            ]
            .contains(&t.as_str())
        });
        assert_eq!(tables, RESOURCE_TABLES, "the format's resource tables");
        let faults = listed_by_reader(&format!(
            "{HEADER}[servers.r]\n[faults.f]\ntarget = \"r\"\nkind = \"nope\"\nat = \"1s\"\n"
        ));
        let mut expected: Vec<&str> = FAULT_KINDS.to_vec();
        expected.sort_unstable();
        let mut faults: Vec<&str> = faults.iter().map(String::as_str).collect();
        faults.sort_unstable();
        assert_eq!(faults, expected, "the format's fault kinds");
    }

    /// Every table, fault kind, action and policy kind turns up in a few hundred files.
    #[test]
    fn covers_every_kind() {
        let texts: Vec<String> = (0..300).map(generate).collect();
        let seen = |needle: &str| texts.iter().any(|text| text.contains(needle));
        for table in RESOURCE_TABLES {
            assert!(seen(&format!("[{table}.")), "no [{table}.*]");
        }
        for kind in FAULT_KINDS {
            assert!(seen(&format!("kind = \"{kind}\"")), "no {kind} fault");
        }
        for action in STEP_ACTIONS {
            assert!(seen(&format!("{{ {action} = ")), "no {action} step");
        }
        for kind in POLICY_KINDS {
            assert!(seen(&format!(", {kind} = ")), "no step with a {kind}");
        }
        for arrivals in ["even", "poisson", "burst", "closed"] {
            assert!(
                seen(&format!("arrivals = \"{arrivals}\"")),
                "no {arrivals} load"
            );
        }
        assert!(seen("[[variant]]") && seen("[sweep]") && seen("[http]"));
    }

    /// Most generated files are valid: the generator reaches the simulator, not only the
    /// reader.
    #[test]
    fn most_files_read() {
        let read = (0..200)
            .filter(|&seed| {
                outagelab_scenario_file::parse(&generate(seed), Path::new("g.toml")).is_ok()
            })
            .count();
        assert!(read >= 110, "only {read} of 200 generated files read");
    }

    #[test]
    fn the_same_seed_gives_the_same_file() {
        assert_eq!(generate(7), generate(7));
        assert_ne!(generate(7), generate(8));
    }
}

//! The generator's traffic and trouble: flows and their steps, services, loads, faults,
//! `[http]` and `[report]`, variants and sweeps.

use std::fmt::Write as _;

use outagelab_scenario_file::{
    Bound, FaultKindSpec, FaultOn, KeyDefault, KeyRange, KeyValue, fault_kind,
};

use super::*;

impl Generator {
    pub(super) fn flows(&mut self) {
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
    pub(super) fn step(&mut self, index: usize, steps: usize) -> String {
        let names = &self.names;
        let available: Vec<&str> = [
            ("work", true),
            ("call", true),
            ("redis", !names.connections.is_empty()),
            ("db", !names.databases.is_empty()),
            ("cache", !names.caches.is_empty()),
            ("throttle", !names.throttles.is_empty()),
            ("rate_limit", !names.rate_limits.is_empty()),
            ("lock", !names.locks.is_empty()),
        ]
        .into_iter()
        .filter_map(|(action, possible)| possible.then_some(action))
        .collect();
        let action = *self.rng.pick(&available);
        let keys = self.names.keys.clone();
        let connections = self.names.connection_names();
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
            "call" => {
                let latency = self.latency(10, 50_000);
                let mut table = format!("latency = {latency}");
                if self.rng.chance(75) {
                    let percent = self.percent(0, 100);
                    let _ = write!(table, ", error_percent = {percent}");
                }
                if self.rng.chance(30) {
                    // A status class is refused here: only as an absurd value.
                    let error = if self.absurd() {
                        "5xx"
                    } else {
                        *self.rng.pick(&["timeout", "server_error", "refused"])
                    };
                    let _ = write!(table, ", error = {}", quoted(error));
                }
                parts.push(format!("call = {{ {table} }}"));
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

    pub(super) fn services(&mut self) {
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

    pub(super) fn loads(&mut self) {
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
                "even" | "poisson" if self.rng.chance(20) => {
                    // A staged load: from `rate` (or 0) through up to four stages, about 300
                    // requests at most.
                    let mut peak = 0;
                    if self.rng.chance(70) {
                        peak = self.rng.range(0, 400);
                        let rate = if self.absurd() {
                            self.pick_absurd(RATE_ABSURD)
                        } else {
                            peak.to_string()
                        };
                        self.line("rate", &rate);
                        has_rate = true;
                    }
                    let fewest = if self.absurd() { 0 } else { 1 };
                    let stages = self.rng.range(fewest, 4);
                    let entries: Vec<String> = (0..stages)
                        .map(|_| {
                            let target = self.rng.range(0, 400);
                            peak = peak.max(target);
                            let most_us = 300_000_000 / peak.max(1) / stages.max(1);
                            let duration = self.duration(1, most_us.min(2_000_000));
                            let target = if self.absurd() {
                                self.pick_absurd(RATE_ABSURD)
                            } else {
                                target.to_string()
                            };
                            format!("{{ duration = {duration}, target = {target} }}")
                        })
                        .collect();
                    self.line("stages", &format!("[{}]", entries.join(", ")));
                }
                "even" | "poisson" => {
                    let rate_per_s = self.rng.range(5, 400);
                    let rate = if self.absurd() {
                        self.pick_absurd(RATE_ABSURD)
                    } else {
                        self.names.written.push(Written {
                            key: format!("loads.{name}.rate"),
                            value: Value::Whole(rate_per_s),
                        });
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
                    self.optional(50, "think", |g| g.latency(0, 50_000));
                    self.optional(20, "stagger", |g| g.duration(0, 100_000));
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

    pub(super) fn faults(&mut self) {
        let faults = self.rng.range(0, 3);
        for index in 0..faults {
            self.table(&format!("faults.fault{index}"));
            let mut kind = *self.rng.pick(fault_kinds());
            let has_replica = self.names.servers.iter().any(|(_, p)| p.is_some());
            if kind == "failover" && !has_replica && !self.absurd() {
                kind = "stop";
            }
            if kind == "pool_exhausted" && self.names.pooled.is_empty() && !self.absurd() {
                kind = "refuse";
            }
            let declared = |kind| fault_kind(kind).expect("a declared kind");
            let database_kind = declared(kind).on == FaultOn::Database;
            if database_kind && self.names.databases.is_empty() && !self.absurd() {
                kind = "hang";
            }
            let spec = declared(kind);
            let servers: Vec<String> = self.names.servers.iter().map(|(n, _)| n.clone()).collect();
            let target = match (kind, spec.on) {
                (_, FaultOn::Connection { .. }) => self.connection_target(),
                ("pool_exhausted", _) if !self.names.pooled.is_empty() => {
                    self.reference(&self.names.pooled.clone())
                }
                (_, FaultOn::Database) if !self.names.databases.is_empty() => {
                    self.reference(&self.names.databases.clone())
                }
                (_, FaultOn::ServerOrConnection) if self.rng.chance(30) => self.connection_target(),
                ("failover", _) => quoted(
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
            let at = self.duration_written(format!("faults.fault{index}.at"), 0, latest);
            self.line("at", &at);
            let instant = spec.instant.is_some();
            if (!instant && self.rng.chance(80)) || self.absurd() {
                let key = format!("faults.fault{index}.duration");
                let duration = self.duration_written(key, 1_000, 1_500_000);
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
                "slow" => {
                    let slowdown = if self.absurd() {
                        self.pick_absurd(&["1", "0.5", "-2", "1e9", "nan"])
                    } else {
                        format!("{}.{}", self.rng.range(1, 50), self.rng.below(10))
                    };
                    self.line("slowdown", &slowdown);
                }
                "latency" => {
                    let added = self.duration(1, 200_000);
                    self.line("latency", &added);
                    self.optional(40, "jitter", |g| g.duration(0, 50_000));
                }
                "bandwidth" => {
                    let rate = self.bandwidth();
                    self.line("bandwidth", &rate);
                }
                "packet_loss" => {
                    let loss = if self.absurd() {
                        self.pick_absurd(&["0", "100", "-1", "nan"])
                    } else {
                        format!("{}.{}", self.rng.range(0, 30), self.rng.range(1, 9))
                    };
                    self.line("loss", &loss);
                    self.optional(40, "retransmit", |g| g.duration(1_000, 1_000_000));
                }
                "slow_close" => {
                    let delay = self.duration(1, 2_000_000);
                    self.line("delay", &delay);
                }
                "pool_exhausted" if self.rng.chance(60) => {
                    let held = self.count(1, 8);
                    self.line("connections", &held);
                }
                "lock_held" => {
                    if !self.absurd() {
                        let family = self.reference(&self.names.keys.clone());
                        self.line("key", &family);
                    }
                }
                "failover" => {
                    self.line("replica", &quoted("replica"));
                    if self.rng.chance(30) {
                        self.line("unreachable", "true");
                    }
                }
                _ => self.required_keys(spec),
            }
            if self.rng.chance(5) {
                self.line("enabled", "false");
            }
        }
    }

    /// The keys `spec` requires, each with a value drawn from its declaration: what a fault
    /// kind without lines of its own above gets, so that a new kind's files read from the
    /// start. A key whose value has no draw here is left out (the file is refused for it).
    fn required_keys(&mut self, spec: &FaultKindSpec) {
        for key in spec.keys {
            if !matches!(key.default, KeyDefault::Required(_)) {
                continue;
            }
            let value = match (key.value, key.range) {
                (KeyValue::Number, KeyRange::Numbers { low, high, .. }) => {
                    self.number_between(low, high)
                }
                (KeyValue::Count, _) => self.count(1, 8),
                (KeyValue::Duration, _) => self.duration(1, 1_000_000),
                (KeyValue::Size, _) => self.size(0, 100_000),
                (KeyValue::Bandwidth, _) => self.bandwidth(),
                (KeyValue::Bool, _) => self.boolean(),
                (KeyValue::Enum(words) | KeyValue::OneOf { values: words, .. }, _) => {
                    let word: &&str = self.rng.pick(words);
                    quoted(word)
                }
                _ => continue,
            };
            self.line(key.name, &value);
        }
    }

    /// A number inside the declared bounds, to a tenth (absurd: one outside them, or none).
    fn number_between(&mut self, low: Bound, high: Bound) -> String {
        if self.absurd() {
            return self.pick_absurd(&["0", "-2", "1e9", "nan"]);
        }
        let bound = |bound| match bound {
            Bound::Above(value) | Bound::AtMost(value) | Bound::Below(value) => value,
        };
        let (low, high) = (bound(low), bound(high));
        // Tenths strictly inside (low, high), at most 50 above low; the middle of a range
        // narrower than two tenths.
        let tenths = ((high - low).min(50.0) * 10.0) as u64;
        if tenths < 2 {
            return format!("{}", (low + high) / 2.0);
        }
        let value = low + self.rng.range(1, tenths - 1) as f64 / 10.0;
        format!("{value:.1}")
    }

    /// A connection a fault can target: in a service, one instance's copy.
    pub(super) fn connection_target(&mut self) -> String {
        let connections = self.names.connection_names();
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

    pub(super) fn http_and_report(&mut self) {
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

    pub(super) fn variants(&mut self) {
        if self.rng.chance(50) {
            return;
        }
        for index in 0..self.rng.range(1, 3) {
            let _ = writeln!(self.out, "\n[[variant]]");
            self.line("name", &quoted(&format!("v{index}")));
            self.names.variants.push(format!("v{index}"));
            let patch = match self.rng.below(5) {
                0 => {
                    let (connection, _) = self.rng.pick(&self.names.connections).clone();
                    let timeout = self.duration(1_000, 200_000);
                    (self.names.patched).push(format!("connections.{connection}.command_timeout"));
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
            self.optional(20, "expect", |g| g.expectations());
        }
    }

    pub(super) fn sweep(&mut self) {
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
        self.names.swept = true;
        self.names.patched.push(format!("loads.{load}.rate"));
        self.table("sweep");
        self.line("parameter", &quoted(&format!("loads.{load}.rate")));
        self.line("label", &quoted("rate"));
        let values: Vec<String> = (0..self.rng.range(1, 3))
            .map(|_| self.rate(1, 300))
            .collect();
        self.line("values", &format!("[{}]", values.join(", ")));
    }
}

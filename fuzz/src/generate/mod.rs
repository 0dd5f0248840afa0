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
//! What the generator covers is checked by tests ([`RESOURCE_TABLES`], [`fault_kinds`],
//! [`STEP_ACTIONS`], [`POLICY_KINDS`] against the format's own lists, and every entry seen in
//! a few hundred generated files).

use std::fmt::Write as _;

use crate::rng::Rng;

mod commands;
mod resources;
mod traffic;

pub use commands::COMMAND_TABLES;

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

/// Every fault kind, in the order the file format declares them
/// (`scenario-file/src/fault_kinds.rs`): a kind declared there is generated here.
pub fn fault_kinds() -> &'static [&'static str] {
    outagelab_scenario_file::fault_kind_names()
}

/// Every step action.
pub const STEP_ACTIONS: [&str; 8] = [
    "redis",
    "db",
    "work",
    "call",
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
    /// Databases with a `max_connections` (a pool to exhaust).
    pooled: Vec<String>,
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
    /// Numeric keys the file writes with a sane value, for the command tables that search
    /// keys (`[fit.unknowns]`, `[explore.params]`, `[tune.knobs]`, `[map]` axes).
    written: Vec<Written>,
    /// The `[[variant]]` names, and the keys their patches (or the sweep) set.
    variants: Vec<String>,
    patched: Vec<String>,
    /// Whether the file has a `[sweep]` (whose variants are named by their values).
    swept: bool,
    /// The keys `[explore.params]` draws (tune may not tune them).
    explored: Vec<String>,
}

/// A key the file writes and its value.
#[derive(Clone)]
struct Written {
    key: String,
    value: Value,
}

#[derive(Clone, Copy)]
enum Value {
    Micros(u64),
    Whole(u64),
}

impl Names {
    /// The connections that send commands, by name.
    fn connection_names(&self) -> Vec<String> {
        self.connections
            .iter()
            .map(|(name, _)| name.clone())
            .collect()
    }
}

/// `prefix0`, `prefix1`, ... : `count` names.
fn numbered(prefix: &str, count: u64) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}{i}")).collect()
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

    /// `key = value()` with this chance, in percent.
    fn optional(&mut self, percent: u64, key: &str, value: impl FnOnce(&mut Self) -> String) {
        if self.rng.chance(percent) {
            let value = value(self);
            self.line(key, &value);
        }
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

    /// [`Self::duration`] for `key`, recorded in [`Names::written`] unless absurd (the same
    /// draws, so a file reads the same either way).
    fn duration_written(&mut self, key: String, low_us: u64, high_us: u64) -> String {
        if self.absurd() {
            return self.pick_absurd(DURATION_ABSURD);
        }
        let micros = self.rng.range(low_us, high_us);
        self.names.written.push(Written {
            key,
            value: Value::Micros(micros),
        });
        quoted(&duration_text(micros))
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
        if bytes.is_multiple_of(1024) && bytes > 0 {
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
        self.commands();
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
        self.names.databases = numbered("db", self.how_many(2));
        let count = self.rng.range(1, 3);
        self.names.keys = (0..count).map(|i| format!("k{i}")).collect();
        self.names.breakers = numbered("br", self.how_many(2));
        self.names.bulkheads = numbered("bh", self.how_many(2));
        self.names.semaphores = numbered("sem", self.how_many(2));
        self.names.adaptive_limits = numbered("al", self.how_many(2));
        self.names.retries = numbered("rt", self.how_many(3));
        let count = self.how_many(2);
        for index in 0..count {
            let store = self.rng.chance(50);
            self.names.rate_limits.push((format!("rl{index}"), store));
        }
        self.names.kv_stores = numbered("kv", self.how_many(2));
        self.names.throttles = numbered("th", self.how_many(2));
        self.names.locks = numbered("lk", self.how_many(2));
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
        self.optional(30, "expect", |g| g.expectations());
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
            self.optional(10, "events_max", |g| g.count(1, 100_000));
            self.optional(10, "memory_max", |g| g.size(1, 1 << 30));
            self.optional(5, "time_max", |g| g.duration(1, 10_000_000));
            self.optional(8, "ties", |g| {
                if g.absurd() {
                    quoted("random")
                } else {
                    quoted(g.rng.pick::<&str>(&["shuffled", "scheduled"]))
                }
            });
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
}

fn quoted(text: &str) -> String {
    format!("\"{text}\"")
}

/// `micros` in the largest unit that writes it exactly.
fn duration_text(micros: u64) -> String {
    if micros == 0 {
        "0s".to_owned()
    } else if micros.is_multiple_of(1_000_000) {
        format!("{}s", micros / 1_000_000)
    } else if micros.is_multiple_of(1_000) {
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
            .expect_err("the probe is refused")
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
    /// The least that runs: a server, a connection, a flow and its load.
    const RUNS: &str = "[servers.r]\n[connections.c]\nserver = \"r\"\n[keys.k]\ncount = 1\n\
        [flows.f]\nsteps = [{ redis = { command = \"GET\", connection = \"c\", key = \"k\" } }]\n\
        [loads.l]\nflow = \"f\"\narrivals = \"even\"\nrate = 10\nduration = \"1s\"\n";

    #[test]
    fn the_lists_are_the_formats() {
        for table in COMMAND_TABLES {
            let message = outagelab_scenario_file::parse(
                &format!("{HEADER}{RUNS}[{table}]\nnope = 1\n"),
                Path::new("probe.toml"),
            )
            .expect_err("an unknown key is refused")
            .to_string();
            assert!(
                message.contains(&format!("{table}.nope")),
                "[{table}]: {message}"
            );
        }
        let mut tables = listed_by_reader(&format!("{HEADER}[nope]\n"));
        tables.retain(|t| {
            ![
                "scenario", "run", "metrics", "http", "variant", "sweep", "report",
            ]
            .contains(&t.as_str())
                && !COMMAND_TABLES.contains(&t.as_str())
        });
        assert_eq!(tables, RESOURCE_TABLES, "the format's resource tables");
        let faults = listed_by_reader(&format!(
            "{HEADER}[servers.r]\n[faults.f]\ntarget = \"r\"\nkind = \"nope\"\nat = \"1s\"\n"
        ));
        let mut expected: Vec<&str> = fault_kinds().to_vec();
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
        for kind in fault_kinds() {
            assert!(seen(&format!("kind = \"{kind}\"")), "no {kind} fault");
        }
        for action in STEP_ACTIONS {
            assert!(seen(&format!("{{ {action} = ")), "no {action} step");
        }
        for kind in POLICY_KINDS {
            assert!(seen(&format!(", {kind} = ")), "no step with a {kind}");
        }
        for arrivals in outagelab_scenario_file::declared_words("loads", "arrivals") {
            assert!(
                seen(&format!("arrivals = \"{arrivals}\"")),
                "no {arrivals} load"
            );
        }
        assert!(seen("stages = [{ duration = "), "no staged load");
        assert!(seen("[[variant]]") && seen("[sweep]") && seen("[http]"));
        for table in COMMAND_TABLES {
            assert!(seen(&format!("\n[{table}]\n")), "no [{table}]");
        }
        assert!(seen("ties = \"shuffled\""), "no shuffled ties");
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

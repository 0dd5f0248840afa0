//! The tables other commands read from a scenario file: `[observed]` and `[fit]`
//! (`outagelab run` and `fit`), `[explore]` and `[tune]`, `[map]`. The keys they search are
//! keys the file writes ([`Names::written`]), so most tables are valid; absurd mode breaks a
//! few values and names.

use super::*;

/// Every command table, in the order the generator writes them.
pub const COMMAND_TABLES: [&str; 5] = ["observed", "fit", "explore", "tune", "map"];

/// The observed file the generated `[observed]` tables read: bundled beside the scenarios,
/// so a file the harness reads as `scenarios/input.toml` finds it.
const OBSERVED_FILE: &str = "postmortem-pause.observed.json";
/// Its series, by `__name__`.
const OBSERVED_SERIES: [&str; 4] = [
    "outagelab_requests_per_s",
    "outagelab_failed_per_s",
    "outagelab_ok_per_s",
    "outagelab_in_flight",
];
/// Fault kinds a template may mix on a server: none needs a key of its own.
const SERVER_KINDS: [&str; 5] = ["pause", "hang", "stop", "kill", "crash"];

impl Generator {
    pub(super) fn commands(&mut self) {
        if self.rng.chance(12) {
            self.observed();
            if self.rng.chance(50) {
                self.fit();
            }
        }
        if self.rng.chance(12) {
            self.explore();
            if self.rng.chance(40) {
                self.tune();
            }
        }
        // `[map]` needs a horizon, a fault's duration and a rate to vary (absurd mode tries
        // without).
        let mappable = self.names.horizon_us.is_some()
            && !self
                .free_keys(|key| key.starts_with("faults.") && key.ends_with(".duration"))
                .is_empty()
            && !self.free_keys(|key| key.ends_with(".rate")).is_empty();
        if self.rng.chance(10) && (mappable || self.absurd()) {
            self.map();
        }
    }

    /// A metric of the run's series, as `[observed]` and `[map]` name them.
    fn series_metric(&mut self) -> String {
        let mut metrics = vec![
            "requests_per_s".to_owned(),
            "failed_per_s".into(),
            "ok_per_s".into(),
            "timeout_per_s".into(),
            "p50_ms".into(),
            "p99_ms".into(),
            "in_flight".into(),
        ];
        if let Some(database) = self.names.databases.first() {
            metrics.push(format!("databases.{database}.concurrency"));
        }
        if self.absurd() {
            metrics = vec![
                "no_such_metric".into(),
                "databases.missing.concurrency".into(),
            ];
        }
        quoted(&self.rng.pick(&metrics).clone())
    }

    fn observed(&mut self) {
        self.table("observed");
        let file = if self.absurd() {
            // Missing, and a file of the wrong format (read as CSV).
            self.pick_absurd(&["\"missing.json\"", "\"postmortem-pause.toml\"", "\"\""])
        } else {
            quoted(OBSERVED_FILE)
        };
        self.line("file", &file);
        if self.rng.chance(50) {
            let start = match self.rng.below(3) {
                _ if self.absurd() => {
                    self.pick_absurd(&["\"yesterday\"", "-1", "1e308", "nan", "\"2026-13-40\""])
                }
                0 => "1796358439".to_owned(),
                1 => "1796358438.5".to_owned(),
                _ => quoted("2026-12-04T04:27:19Z"),
            };
            self.line("start", &start);
        }
        for index in 0..self.rng.range(1, 3) {
            self.table(&format!("observed.series.s{index}"));
            let name = if self.absurd() {
                quoted("not_in_the_file")
            } else {
                quoted(self.rng.pick::<&str>(&OBSERVED_SERIES))
            };
            self.line("name", &name);
            if self.rng.chance(30) {
                let value = if self.absurd() { "other" } else { "base" };
                self.line("labels", &format!("{{ variant = {} }}", quoted(value)));
            }
            let metric = self.series_metric();
            self.line("metric", &metric);
        }
    }

    /// The keys the file writes that no variant patches and no sweep sets (a command varies
    /// them), those `pick` takes.
    fn free_keys(&self, pick: impl Fn(&str) -> bool) -> Vec<Written> {
        (self.names.written.iter())
            .filter(|w| !self.names.patched.contains(&w.key) && pick(&w.key))
            .cloned()
            .collect()
    }

    /// `{ min = ..., max = ... }` around a written value (or, in absurd mode, a broken range);
    /// a fault's start stays within the horizon.
    fn range_around(&mut self, written: &Written) -> String {
        if self.absurd() {
            return self.pick_absurd(&[
                "{ min = \"2s\", max = \"1s\" }",
                "{ min = 5, max = 5 }",
                "{ min = \"1s\" }",
                "{ min = 1, max = \"1s\" }",
                "{ min = nan, max = 1 }",
                "\"1s\"",
            ]);
        }
        match written.value {
            Value::Micros(micros) => {
                let low = self.rng.range(0, micros / 2);
                let mut high = micros + self.rng.range(1, micros.max(1_000));
                if written.key.ends_with(".at")
                    && let Some(horizon) = self.names.horizon_us
                {
                    high = high.min(horizon.saturating_sub(1)).max(micros + 1);
                }
                format!(
                    "{{ min = {}, max = {} }}",
                    quoted(&duration_text(low)),
                    quoted(&duration_text(high))
                )
            }
            Value::Whole(whole) => {
                let low = self.rng.range(1, whole.max(1));
                let high = whole + self.rng.range(1, whole.max(1));
                format!("{{ min = {low}, max = {high} }}")
            }
        }
    }

    /// 1 to `most` free keys (see [`Self::free_keys`]) but those explore draws, each with a
    /// range around its value: `[fit.unknowns]`, `[tune.knobs]`.
    fn searched_keys(&mut self, table: &str, most: u64) {
        let explored = self.names.explored.clone();
        let mut keys = self.free_keys(|key| !explored.iter().any(|e| e == key));
        if keys.is_empty() || self.absurd() {
            keys.push(Written {
                key: "loads.missing.rate".into(),
                value: Value::Whole(100),
            });
        }
        self.table(table);
        for _ in 0..self.rng.range(1, most) {
            if keys.is_empty() {
                break;
            }
            let at = self.rng.below(keys.len() as u64) as usize;
            let written = keys.swap_remove(at);
            let range = self.range_around(&written);
            self.line(&quoted(&written.key), &range);
        }
    }

    /// A seed range: `"1..N"` (or an absurd one).
    fn seeds(&mut self, most: u64) -> String {
        if self.absurd() {
            return self.pick_absurd(&[
                "\"5..1\"",
                "\"1..\"",
                "\"a..b\"",
                "3",
                "\"0..18446744073709551615\"",
            ]);
        }
        let first = self.rng.range(0, 20);
        quoted(&format!("{first}..{}", first + self.rng.range(0, most - 1)))
    }

    /// The variant a command runs: a `[[variant]]`'s name, or `base` when there is none (a
    /// sweep names its own: then, or in absurd mode, a name no variant has).
    fn variant_name(&mut self) -> String {
        if self.names.swept || self.absurd() {
            return quoted("missing");
        }
        match self.names.variants.is_empty() {
            true => quoted("base"),
            false => quoted(&self.rng.pick(&self.names.variants.clone()).clone()),
        }
    }

    fn fit(&mut self) {
        self.table("fit");
        if !self.names.swept || self.absurd() {
            self.optional(30, "variant", |g| g.variant_name());
        }
        self.optional(30, "seeds", |g| g.seeds(3));
        self.optional(70, "runs_max", |g| g.count(10, 40));
        self.searched_keys("fit.unknowns", 3);
    }

    fn explore(&mut self) {
        self.table("explore");
        if self.rng.chance(20) && (!self.names.swept || self.absurd()) {
            let name = self.variant_name();
            self.line("variants", &format!("[{name}]"));
        }
        self.optional(50, "seeds", |g| g.seeds(20));
        let shuffled = self.rng.chance(25);
        if shuffled {
            let ties = if self.absurd() { "random" } else { "shuffled" };
            self.line("ties", &quoted(ties));
        }
        let runs = self.count(1, 12);
        self.line("runs_max", &runs);
        self.optional(50, "faults_max", |g| g.count(1, 3));
        let shrink = self.count(0, 20);
        self.line("shrink_runs_max", &shrink);
        if self.rng.chance(30) {
            let objective = match self.rng.below(4) {
                _ if self.absurd() => "max no.such.metric",
                0 => "max outcomes.timeout",
                1 => "max latency_ms.all.p99",
                2 => "min outcomes.ok",
                _ => "max unfinished",
            };
            self.line("objective", &quoted(objective));
            self.optional(50, "refine", |g| g.count(0, 8));
        }
        let templates = if shuffled {
            self.rng.range(0, 2)
        } else {
            self.rng.range(1, 2)
        };
        for index in 0..templates {
            self.table(&format!("explore.faults.t{index}"));
            self.template();
        }
        let params = self.free_keys(|_| true);
        if !params.is_empty() && self.rng.chance(40) {
            self.table("explore.params");
            let written = self.rng.pick(&params).clone();
            let range = self.range_around(&written);
            self.line(&quoted(&written.key), &range);
            self.names.explored.push(written.key);
        }
    }

    /// One fault template: a target and kinds that go together, ranges for `at` and
    /// `duration`, and the keys its kind needs.
    fn template(&mut self) {
        let servers: Vec<String> = self.names.servers.iter().map(|(n, _)| n.clone()).collect();
        let horizon_us = self.names.horizon_us.unwrap_or(1_500_000);
        let choice = self.rng.below(5);
        let (target, kind, extra): (String, String, Option<String>) = match choice {
            1 => {
                let target = self.connection_target();
                let added = self.duration(1_000, 200_000);
                (
                    target,
                    quoted("latency"),
                    Some(format!("latency = {added}")),
                )
            }
            2 => (self.connection_target(), quoted("disconnect"), None),
            3 if !self.names.databases.is_empty() => {
                let target = self.reference(&self.names.databases.clone());
                (target, quoted("slow"), Some("slowdown = 4.0".to_owned()))
            }
            4 => {
                let target = self.reference(&servers);
                let error = *self.rng.pick(&["readonly", "loading", "oom"]);
                (
                    target,
                    quoted("error_reply"),
                    Some(format!("error = {}", quoted(error))),
                )
            }
            _ => {
                let target = if servers.len() > 1 && self.rng.chance(40) {
                    format!(
                        "[{}]",
                        servers
                            .iter()
                            .map(|s| quoted(s))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                } else {
                    self.reference(&servers)
                };
                let mut kinds: Vec<String> = (0..self.rng.range(1, 3))
                    .map(|_| quoted(self.rng.pick::<&str>(&SERVER_KINDS)))
                    .collect();
                kinds.sort_unstable();
                kinds.dedup();
                let kind = if kinds.len() == 1 {
                    kinds[0].clone()
                } else {
                    format!("[{}]", kinds.join(", "))
                };
                (target, kind, None)
            }
        };
        self.line("target", &target);
        let kind = if self.absurd() { quoted("nope") } else { kind };
        self.line("kind", &kind);
        let at_low = self.rng.range(0, horizon_us / 2);
        let at = if self.absurd() {
            self.pick_absurd(&[
                "{ min = \"2s\", max = \"1s\" }",
                "\"1s\"",
                "{ max = \"1s\" }",
            ])
        } else {
            format!(
                "{{ min = {}, max = {} }}",
                quoted(&duration_text(at_low / 1_000 * 1_000)),
                quoted(&duration_text(horizon_us / 1_000 * 1_000))
            )
        };
        self.line("at", &at);
        // `kill` happens at one instant: a template that may draw it has no duration.
        if self.rng.chance(70) && !kind.contains("\"kill\"") {
            let low = self.rng.range(1, 200) * 1_000;
            let high = low + self.rng.range(0, 1_000) * 1_000;
            self.line(
                "duration",
                &format!(
                    "{{ min = {}, max = {} }}",
                    quoted(&duration_text(low)),
                    quoted(&duration_text(high))
                ),
            );
        }
        if let Some(extra) = extra {
            let _ = writeln!(self.out, "{extra}");
        }
        if self.rng.chance(3) && self.absurd() {
            self.line("enabled", "false");
        }
    }

    fn tune(&mut self) {
        self.table("tune");
        if !self.names.swept || self.absurd() {
            self.optional(30, "variant", |g| g.variant_name());
        }
        self.optional(60, "rounds", |g| g.count(1, 2));
        self.optional(70, "candidates", |g| g.count(1, 4));
        self.searched_keys("tune.knobs", 2);
    }

    fn map(&mut self) {
        let keys =
            |written: Vec<Written>| -> Vec<String> { written.into_iter().map(|w| w.key).collect() };
        let durations =
            keys(self.free_keys(|key| key.starts_with("faults.") && key.ends_with(".duration")));
        let rates = keys(self.free_keys(|key| key.ends_with(".rate")));
        self.table("map");
        if !self.names.swept || self.absurd() {
            self.optional(20, "variants", |g| {
                let name = g.variant_name();
                format!("[{name}]")
            });
        }
        self.optional(40, "seeds", |g| g.seeds(3));
        let trigger_key = if durations.is_empty() || self.absurd() {
            "faults.missing.duration".to_owned()
        } else {
            self.rng.pick(&durations).clone()
        };
        let fault = trigger_key
            .trim_start_matches("faults.")
            .trim_end_matches(".duration")
            .to_owned();
        self.line("fault", &quoted(&fault));
        // Room after the fault starts, for its length and the recovery window to end
        // before the horizon (when the file writes both).
        let starts_us = (self.names.written.iter())
            .find(|w| w.key == format!("faults.{fault}.at"))
            .and_then(|w| match w.value {
                Value::Micros(micros) => Some(micros),
                Value::Whole(_) => None,
            });
        let room_us = match (self.names.horizon_us, starts_us) {
            (Some(horizon), Some(at)) => horizon.saturating_sub(at).max(4_000),
            _ => 1_000_000,
        };
        let triggers: Vec<String> = (0..self.rng.range(1, 3))
            .map(|_| self.duration(1_000, room_us / 2))
            .collect();
        self.line(
            "trigger",
            &format!(
                "{{ key = {}, values = [{}] }}",
                quoted(&trigger_key),
                triggers.join(", ")
            ),
        );
        let load_key = match rates.is_empty() {
            true => "loads.load0.rate".to_owned(),
            false => self.rng.pick(&rates).clone(),
        };
        let loads: Vec<String> = (0..self.rng.range(1, 3))
            .map(|_| self.rate(1, 400))
            .collect();
        self.line(
            "load",
            &format!(
                "{{ key = {}, values = [{}] }}",
                quoted(&load_key),
                loads.join(", ")
            ),
        );
        let metric = self.series_metric();
        let at_most = self.count(0, 50);
        let window = self.duration(1_000, room_us / 4);
        self.line(
            "recovered",
            &format!("{{ metric = {metric}, at_most = {at_most}, for = {window} }}"),
        );
    }
}

//! Invariants of a run's JSON report (what `outagelab run --json` writes), checked on the
//! text as a reader gets it, not on the simulator's own counters (its monitors, inside the
//! run, check those):
//!
//! - **conservation**: requests = the sum of the outcomes + unfinished, for the whole variant,
//!   each flow, each service instance and each caller; the flows' requests add up to the
//!   variant's;
//! - **latency counts**: each outcome's latency count is that outcome's count, `all` is their
//!   sum, and the latency histogram holds that many (edges ascending);
//! - **percentiles ordered**: in every latency table, min <= p50 <= p90 <= p95 <= p99 <= p999
//!   and max (a percentile is its histogram bucket's upper edge, at most 0.1% above the exact
//!   value, so up to that much above `max`), min <= mean <= max, and no value without a count;
//!   in every series bucket p50 <= p95 <= p99;
//! - **summary = series**: each outcome's count summed over the series' buckets is the
//!   summary's (unless the series says it was truncated), every column as long as the series;
//! - **limits**: an enabled bulkhead's peak in use and peak queued within `max_concurrent` and
//!   `queue_max` (its gauges too), a database's peak concurrency within `max_connections` and
//!   peak waiting within `connection_queue_max`, an enabled semaphore's peak within
//!   `max_in_flight`, a connection's peak pending within `pending_max` (while it had one link
//!   at a time: a reconnect slot's replaced link and its replacement each hold up to it), at
//!   most one writer of a lock's key, an adaptive limit's final limit between the lowest and
//!   highest it reached;
//! - **breaker transitions**: half-openings at most openings, closings at most half-openings;
//! - **http**: the status counts add up to the classes' and to the ended requests.

use serde_json::{Map, Value};

/// One broken invariant: which, in which variant, and the numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub variant: String,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (variant \"{}\"): {}",
            self.invariant, self.variant, self.detail
        )
    }
}

/// Every invariant the report `json` breaks; empty when it holds them all.
pub fn check(json: &str) -> Vec<Violation> {
    let mut checker = Checker {
        violations: Vec::new(),
        variant: String::new(),
    };
    let report: Value = match serde_json::from_str(json) {
        Ok(report) => report,
        Err(error) => {
            checker.fail("json", format!("not JSON: {error}"));
            return checker.violations;
        }
    };
    let Some(variants) = report.get("variants").and_then(Value::as_array) else {
        checker.fail("json", "no `variants` array".into());
        return checker.violations;
    };
    for variant in variants {
        checker.variant = variant
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        checker.variant(variant);
    }
    checker.violations
}

struct Checker {
    violations: Vec<Violation>,
    variant: String,
}

fn number(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}

fn float(value: &Value, key: &str) -> Option<f64> {
    value.get(key).and_then(Value::as_f64)
}

fn object<'a>(value: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    value.get(key).and_then(Value::as_object)
}

/// The sum of an object's numbers (an outcome table).
fn total(table: Option<&Map<String, Value>>) -> u64 {
    table.map_or(0, |table| table.values().filter_map(Value::as_u64).sum())
}

impl Checker {
    fn fail(&mut self, invariant: &'static str, detail: String) {
        self.violations.push(Violation {
            invariant,
            variant: self.variant.clone(),
            detail,
        });
    }

    fn expect_equal(&mut self, invariant: &'static str, what: &str, left: u64, right: u64) {
        if left != right {
            self.fail(invariant, format!("{what}: {left} != {right}"));
        }
    }

    fn expect_within(&mut self, what: &str, value: Option<u64>, limit: Option<u64>) {
        if let (Some(value), Some(limit)) = (value, limit)
            && value > limit
        {
            self.fail("limits", format!("{what}: {value} > {limit}"));
        }
    }

    fn variant(&mut self, variant: &Value) {
        let Some(summary) = variant.get("summary") else {
            self.fail("json", "no summary".into());
            return;
        };
        self.conservation(summary);
        self.latency_counts(summary);
        self.percentiles(summary, "summary");
        self.limits(summary);
        self.breakers(summary);
        self.http(summary);
        if let Some(series) = variant.get("series") {
            self.series(summary, series);
        } else {
            self.fail("json", "no series".into());
        }
    }

    /// Requests = outcomes + unfinished, for every table that counts requests.
    fn conservation(&mut self, summary: &Value) {
        let conserved = |checker: &mut Checker, what: &str, table: &Value| {
            let requests = number(table, "requests").unwrap_or(0);
            let ended = total(object(table, "outcomes"));
            let unfinished = number(table, "unfinished").unwrap_or(0);
            checker.expect_equal(
                "conservation",
                &format!("{what}: requests vs outcomes {ended} + unfinished {unfinished}"),
                requests,
                ended + unfinished,
            );
        };
        conserved(self, "variant", summary);
        let mut flow_requests = 0;
        for (name, flow) in object(summary, "flows").into_iter().flatten() {
            conserved(self, &format!("flows.{name}"), flow);
            flow_requests += number(flow, "requests").unwrap_or(0);
        }
        self.expect_equal(
            "conservation",
            "variant requests vs the flows' sum",
            number(summary, "requests").unwrap_or(0),
            flow_requests,
        );
        for (name, service) in object(summary, "services").into_iter().flatten() {
            for (index, instance) in object(service, "instances").into_iter().flatten() {
                conserved(
                    self,
                    &format!("services.{name}.instances.{index}"),
                    instance,
                );
            }
        }
        for (name, caller) in object(summary, "callers").into_iter().flatten() {
            conserved(self, &format!("callers.{name}"), caller);
        }
    }

    /// Each outcome's latency count is the outcome's count; the histogram holds them all.
    fn latency_counts(&mut self, summary: &Value) {
        let outcomes = object(summary, "outcomes");
        let ended = total(outcomes);
        let latency = summary.get("latency_ms");
        let count_of = |key: &str| {
            latency
                .and_then(|l| l.get(key))
                .and_then(|s| number(s, "count"))
                .unwrap_or(0)
        };
        self.expect_equal(
            "latency_counts",
            "latency_ms.all.count vs ended requests",
            count_of("all"),
            ended,
        );
        for (outcome, count) in outcomes.into_iter().flatten() {
            if let Some(count) = count.as_u64() {
                self.expect_equal(
                    "latency_counts",
                    &format!("latency_ms.{outcome}.count vs outcomes.{outcome}"),
                    count_of(outcome),
                    count,
                );
            }
        }
        let Some(histogram) = summary.get("latency_histogram") else {
            return;
        };
        let edges: Vec<f64> = histogram
            .get("le_ms")
            .and_then(Value::as_array)
            .map(|edges| edges.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        let counts: Vec<u64> = histogram
            .get("counts")
            .and_then(Value::as_array)
            .map(|counts| counts.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        self.expect_equal(
            "latency_counts",
            "latency_histogram: edges vs counts",
            edges.len() as u64,
            counts.len() as u64,
        );
        self.expect_equal(
            "latency_counts",
            "latency_histogram's sum vs latency_ms.all.count",
            counts.iter().sum(),
            count_of("all"),
        );
        if edges.windows(2).any(|pair| pair[0] >= pair[1]) {
            self.fail(
                "latency_counts",
                "latency_histogram edges not ascending".into(),
            );
        }
    }

    /// Every latency table under `value` (found by its shape), in order.
    fn percentiles(&mut self, value: &Value, path: &str) {
        match value {
            Value::Object(map) => {
                if map.contains_key("count") && map.contains_key("p50") && map.contains_key("max") {
                    self.latency_table(value, path);
                    return;
                }
                for (key, child) in map {
                    self.percentiles(child, &format!("{path}.{key}"));
                }
            }
            Value::Array(items) => {
                for (index, child) in items.iter().enumerate() {
                    self.percentiles(child, &format!("{path}[{index}]"));
                }
            }
            _ => {}
        }
    }

    fn latency_table(&mut self, stats: &Value, path: &str) {
        const ORDER: [&str; 6] = ["min", "p50", "p90", "p95", "p99", "p999"];
        let count = number(stats, "count").unwrap_or(0);
        let values: Vec<Option<f64>> = ORDER
            .iter()
            .chain(&["max", "mean"])
            .map(|key| float(stats, key))
            .collect();
        if count == 0 {
            if values.iter().any(Option::is_some) {
                self.fail(
                    "percentiles_ordered",
                    format!("{path}: values without a count"),
                );
            }
            return;
        }
        let Some(values) = values.into_iter().collect::<Option<Vec<f64>>>() else {
            self.fail(
                "percentiles_ordered",
                format!("{path}: a value missing, count {count}"),
            );
            return;
        };
        let (max, mean) = (values[6], values[7]);
        // A percentile is its bucket's upper edge: up to 0.1% above the exact value.
        let slack = |x: f64| x * 1.001 + 1e-9;
        for pair in ORDER
            .iter()
            .zip(&values[..6])
            .collect::<Vec<_>>()
            .windows(2)
        {
            let ((low_name, low), (high_name, high)) = (pair[0], pair[1]);
            if *low > slack(*high) {
                self.fail(
                    "percentiles_ordered",
                    format!("{path}: {low_name} {low} > {high_name} {high}"),
                );
            }
        }
        for (name, value) in ORDER.iter().zip(&values[..6]) {
            if *value > slack(max) {
                self.fail(
                    "percentiles_ordered",
                    format!("{path}: {name} {value} > max {max}"),
                );
            }
        }
        let min = values[0];
        if mean < min * 0.999_999 - 1e-9 || mean > slack(max) || !mean.is_finite() {
            self.fail(
                "percentiles_ordered",
                format!("{path}: mean {mean} outside [min {min}, max {max}]"),
            );
        }
    }

    fn limits(&mut self, summary: &Value) {
        for (name, bulkhead) in object(summary, "bulkheads").into_iter().flatten() {
            if bulkhead.get("enabled") != Some(&Value::Bool(true)) {
                continue;
            }
            self.expect_within(
                &format!("bulkheads.{name}.peak_in_use vs max_concurrent"),
                number(bulkhead, "peak_in_use"),
                number(bulkhead, "max_concurrent"),
            );
            self.expect_within(
                &format!("bulkheads.{name}.peak_queued vs queue_max"),
                number(bulkhead, "peak_queued"),
                number(bulkhead, "queue_max"),
            );
        }
        for (name, database) in object(summary, "databases").into_iter().flatten() {
            self.expect_within(
                &format!("databases.{name}.peak_concurrency vs max_connections"),
                number(database, "peak_concurrency"),
                number(database, "max_connections"),
            );
            self.expect_within(
                &format!("databases.{name}.peak_waiting vs connection_queue_max"),
                number(database, "peak_waiting"),
                number(database, "connection_queue_max"),
            );
        }
        for (name, semaphore) in object(summary, "semaphores").into_iter().flatten() {
            if semaphore.get("enabled") != Some(&Value::Bool(true)) {
                continue;
            }
            self.expect_within(
                &format!("semaphores.{name}.peak_in_flight vs max_in_flight"),
                number(semaphore, "peak_in_flight"),
                number(semaphore, "max_in_flight"),
            );
        }
        for (name, connection) in object(summary, "connections").into_iter().flatten() {
            // `pending_max` bounds each link; `peak_pending` counts every link of the name at
            // once, and a reconnect slot's replaced link keeps its timed-out commands until
            // they end, beside its replacement's (fuzz/findings/seed2-*-slot-pending.toml).
            let replaced = connection
                .get("slot")
                .and_then(|slot| slot.get("evictions"))
                .and_then(Value::as_u64)
                .is_some_and(|evictions| evictions > 0);
            if replaced {
                continue;
            }
            self.expect_within(
                &format!("connections.{name}.peak_pending vs pending_max"),
                number(connection, "peak_pending"),
                number(connection, "pending_max"),
            );
        }
        for (name, lock) in object(summary, "locks").into_iter().flatten() {
            self.expect_within(
                &format!("locks.{name}.peak_writers"),
                number(lock, "peak_writers"),
                Some(1),
            );
        }
        for (name, limit) in object(summary, "adaptive_limits").into_iter().flatten() {
            let (low, last, high) = (
                number(limit, "limit_min_seen"),
                number(limit, "final_limit"),
                number(limit, "limit_max_seen"),
            );
            if let (Some(low), Some(last), Some(high)) = (low, last, high)
                && !(low <= last && last <= high)
            {
                self.fail(
                    "limits",
                    format!(
                        "adaptive_limits.{name}: final limit {last} outside [{low}, {high}] seen"
                    ),
                );
            }
        }
    }

    fn breakers(&mut self, summary: &Value) {
        for (name, breaker) in object(summary, "breakers").into_iter().flatten() {
            let (opened, half_opened, closed) = (
                number(breaker, "opened").unwrap_or(0),
                number(breaker, "half_opened").unwrap_or(0),
                number(breaker, "closed").unwrap_or(0),
            );
            if half_opened > opened || closed > half_opened {
                self.fail(
                    "breaker_transitions",
                    format!(
                        "breakers.{name}: opened {opened}, half-opened {half_opened}, closed {closed}"
                    ),
                );
            }
        }
    }

    fn http(&mut self, summary: &Value) {
        let Some(http) = summary.get("http") else {
            return;
        };
        let statuses = total(object(http, "status"));
        let classes: u64 = ["2xx", "4xx", "5xx"]
            .iter()
            .filter_map(|class| number(http, class))
            .sum();
        self.expect_equal("http", "status counts vs classes", statuses, classes);
        self.expect_equal(
            "http",
            "status counts vs ended requests",
            statuses,
            total(object(summary, "outcomes")),
        );
    }

    fn series(&mut self, summary: &Value, series: &Value) {
        let buckets = series
            .get("start_ms")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let columns = [
            ("outcomes", object(series, "outcomes")),
            ("gauges_max", object(series, "gauges_max")),
            ("counts", object(series, "counts")),
        ];
        for (group, table) in columns {
            for (name, column) in table.into_iter().flatten() {
                let length = column.as_array().map_or(0, Vec::len);
                if length != buckets {
                    self.fail(
                        "summary_equals_series",
                        format!("series.{group}.{name}: {length} buckets, not {buckets}"),
                    );
                }
            }
        }
        for key in ["p50_ms", "p95_ms", "p99_ms"] {
            let length = series
                .get(key)
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if length != buckets {
                self.fail(
                    "summary_equals_series",
                    format!("series.{key}: {length} buckets, not {buckets}"),
                );
            }
        }
        let column = |key: &str| -> Vec<Option<f64>> {
            series
                .get(key)
                .and_then(Value::as_array)
                .map(|values| values.iter().map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let (p50, p95, p99) = (column("p50_ms"), column("p95_ms"), column("p99_ms"));
        for bucket in 0..p50.len().min(p95.len()).min(p99.len()) {
            if let (Some(a), Some(b), Some(c)) = (p50[bucket], p95[bucket], p99[bucket])
                && !(a <= b && b <= c)
            {
                self.fail(
                    "percentiles_ordered",
                    format!("series bucket {bucket}: p50 {a}, p95 {b}, p99 {c}"),
                );
            }
        }
        if series.get("truncated") == Some(&Value::Bool(true)) {
            return;
        }
        let summed = object(series, "outcomes");
        for (outcome, count) in object(summary, "outcomes").into_iter().flatten() {
            let in_series: u64 = summed
                .and_then(|table| table.get(outcome))
                .and_then(Value::as_array)
                .map_or(0, |values| values.iter().filter_map(Value::as_u64).sum());
            self.expect_equal(
                "summary_equals_series",
                &format!("outcomes.{outcome} summed over the series vs the summary"),
                in_series,
                count.as_u64().unwrap_or(0),
            );
        }
        // Gauges of a limited policy stay within its limit.
        let gauges = object(series, "gauges_max");
        let gauge_max = |key: &str| {
            gauges
                .and_then(|g| g.get(key))
                .and_then(Value::as_array)
                .and_then(|values| values.iter().filter_map(Value::as_u64).max())
        };
        for (name, bulkhead) in object(summary, "bulkheads").into_iter().flatten() {
            if bulkhead.get("enabled") == Some(&Value::Bool(true)) {
                self.expect_within(
                    &format!("series bulkheads.{name}.in_use vs max_concurrent"),
                    gauge_max(&format!("bulkheads.{name}.in_use")),
                    number(bulkhead, "max_concurrent"),
                );
            }
        }
    }
}

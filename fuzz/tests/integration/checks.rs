//! The report checks: every bundled scenario's report holds them all (no false alarms), and
//! each check fires on a report doctored to break its invariant (a check that cannot fail
//! checks nothing).

use std::path::Path;

use outagelab_fuzz::check::check;
use outagelab_fuzz::mutate::BUNDLED;
use outagelab_report::{RunReport, write};
use serde_json::Value;

/// The JSON `outagelab run FILE --json` writes for `text`.
fn report_json(text: &str) -> String {
    let path = Path::new(outagelab_fuzz::mutate::SCENARIOS).join("t.toml");
    let file = outagelab_scenario_file::parse(text, &path).expect("the file reads");
    let variants = file
        .variants
        .iter()
        .map(|variant| {
            let mut report = outagelab_sim::run(&variant.scenario).expect("the run ends");
            report.sweep_x = variant.sweep_x;
            report
        })
        .collect();
    write::to_json(&RunReport {
        scenario: file.name,
        seed: file.seed,
        sweep: file.sweep,
        slo: file.report.slo,
        variants,
        observed: None,
    })
}

/// A small run with every table the checks read: a bulkhead, a database with a connection
/// limit, a breaker, a lock, a caller, a service, `[http]`.
const SMALL: &str = r#"
[scenario]
name = "small"

[run]
horizon = "2s"

[servers.redis]

[connections.cache]
server = "redis"
command_timeout = "20ms"
pending_max = 50

[databases.main]
latency = "10ms"
max_connections = 4
connection_queue = 2

[keys.product]
count = 10

[bulkheads.pool]
max_concurrent = 3
queue = 2

[breakers.redis]
failures = 3
open_for = "200ms"

[locks.files]
lease = "1s"
acquire_timeout = "100ms"

[callers.upstream]
timeout = "50ms"

[flows.read]
steps = [
  { lock = { name = "files", op = "acquire", mode = "shared", connection = "cache", key = "product" }, on_error = "fail" },
  { redis = { command = "GET", connection = "cache", key = "product" }, breaker = "redis", on_error = "next", on_hit = "finish" },
  { db = { name = "main" }, bulkhead = "pool", on_error = "fail" },
  { lock = { name = "files", op = "release", connection = "cache", key = "product" }, finally = true },
]

[services.api]
instances = 2
flows = ["read"]

[loads.steady]
flow = "read"
arrivals = "even"
rate = 400
duration = "1s"
caller = "upstream"

[faults.pause]
target = "redis"
kind = "pause"
at = "300ms"
duration = "300ms"

[http]
"#;

#[test]
fn every_bundled_report_holds_every_invariant() {
    for (name, text) in BUNDLED {
        let violations = check(&report_json(text));
        assert!(violations.is_empty(), "{name}: {violations:?}");
    }
}

/// `SMALL`'s report with `doctor` applied to its first variant.
fn doctored(doctor: impl Fn(&mut Value)) -> Vec<&'static str> {
    let mut report: Value = serde_json::from_str(&report_json(SMALL)).expect("JSON");
    doctor(&mut report["variants"][0]);
    let mut invariants: Vec<&str> = check(&report.to_string())
        .into_iter()
        .map(|violation| violation.invariant)
        .collect();
    invariants.dedup();
    invariants
}

fn add(value: &mut Value, amount: i64) {
    *value = Value::from(value.as_i64().expect("a count") + amount);
}

#[test]
fn small_report_is_clean_and_rich() {
    let json = report_json(SMALL);
    assert_eq!(check(&json), vec![]);
    let report: Value = serde_json::from_str(&json).expect("JSON");
    let summary = &report["variants"][0]["summary"];
    // The doctored cases below need these to be there and non-trivial.
    assert!(summary["requests"].as_u64() > Some(300));
    assert!(summary["bulkheads"]["pool@0"]["peak_in_use"].as_u64() > Some(0));
    assert!(summary["breakers"]["redis@0"].is_object());
    assert!(summary["callers"]["upstream"]["requests"].as_u64() > Some(0));
    assert!(summary["http"].is_object());
}

/// A change to a variant's report.
type Doctor = Box<dyn Fn(&mut Value)>;

#[test]
fn each_check_fires_on_a_doctored_report() {
    let cases: Vec<(&str, Doctor)> = vec![
        (
            "conservation",
            Box::new(|v| add(&mut v["summary"]["unfinished"], 1)),
        ),
        (
            "conservation",
            Box::new(|v| add(&mut v["summary"]["flows"]["read"]["requests"], 1)),
        ),
        (
            "conservation",
            Box::new(|v| add(&mut v["summary"]["callers"]["upstream"]["unfinished"], 1)),
        ),
        (
            "conservation",
            Box::new(|v| {
                add(
                    &mut v["summary"]["services"]["api"]["instances"]["1"]["requests"],
                    -1,
                )
            }),
        ),
        (
            "latency_counts",
            Box::new(|v| add(&mut v["summary"]["latency_histogram"]["counts"][0], 1)),
        ),
        (
            "percentiles_ordered",
            Box::new(|v| {
                let p99 = v["summary"]["latency_ms"]["all"]["p99"].clone();
                v["summary"]["latency_ms"]["all"]["p50"] =
                    Value::from(p99.as_f64().expect("p99") * 2.0);
            }),
        ),
        (
            "percentiles_ordered",
            Box::new(|v| v["summary"]["latency_ms"]["all"]["mean"] = Value::from(1e9)),
        ),
        (
            "limits",
            Box::new(|v| add(&mut v["summary"]["bulkheads"]["pool@0"]["peak_in_use"], 10)),
        ),
        (
            "limits",
            Box::new(|v| {
                add(
                    &mut v["summary"]["databases"]["main"]["peak_concurrency"],
                    10,
                )
            }),
        ),
        (
            "limits",
            Box::new(|v| v["summary"]["locks"]["files@1"]["peak_writers"] = Value::from(2)),
        ),
        (
            "limits",
            Box::new(|v| {
                add(
                    &mut v["summary"]["connections"]["cache@0"]["peak_pending"],
                    100,
                )
            }),
        ),
        (
            "breaker_transitions",
            Box::new(|v| add(&mut v["summary"]["breakers"]["redis@0"]["half_opened"], 100)),
        ),
        (
            "http",
            Box::new(|v| add(&mut v["summary"]["http"]["2xx"], 1)),
        ),
        (
            "summary_equals_series",
            Box::new(|v| {
                let ok = v["series"]["outcomes"]["ok"]
                    .as_array_mut()
                    .expect("ok column");
                let last = ok.len() - 1;
                add(&mut ok[last], 1);
            }),
        ),
        (
            "summary_equals_series",
            Box::new(|v| {
                v["series"]["p50_ms"]
                    .as_array_mut()
                    .expect("p50 column")
                    .pop();
            }),
        ),
    ];
    for (expected, doctor) in cases {
        let fired = doctored(doctor);
        assert!(
            fired.contains(&expected),
            "{expected} did not fire: {fired:?}"
        );
    }
}

/// `pending_max` bounds each link; a reconnect slot that replaced its link counts the old
/// link's timed-out commands beside the new one's (fuzz/findings/seed2-*-slot-pending.toml).
#[test]
fn a_replaced_links_commands_are_not_held_to_one_links_limit() {
    let fired = doctored(|v| {
        let cache = &mut v["summary"]["connections"]["cache@0"];
        add(&mut cache["peak_pending"], 100);
        cache["slot"]["evictions"] = Value::from(1);
    });
    assert!(!fired.contains(&"limits"), "{fired:?}");
}

#[test]
fn not_json_is_a_violation() {
    let violations = check("{\"variants\": [");
    assert_eq!(violations.len(), 1);
    assert_eq!(violations[0].invariant, "json");
}

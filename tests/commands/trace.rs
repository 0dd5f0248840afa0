//! `run --trace PATH --trace-sample N`: one request's path as Chrome's trace event format, and
//! a trace that leaves the run as it was.

use crate::common;

use std::num::NonZeroU64;
use std::path::Path;

use common::{outagelab, scratch};
use outagelab_report::trace::TraceWhat;

fn load(file: &str) -> outagelab_scenario_file::ScenarioFile {
    outagelab_scenario_file::load(Path::new(env!("CARGO_MANIFEST_DIR")).join(file).as_path())
        .unwrap_or_else(|d| panic!("{d}"))
}

#[test]
fn tracing_leaves_every_figure_of_the_run_as_it_was() {
    let file = load("scenarios/redis-dead-protection.toml");
    for variant in &file.variants {
        let scenario = &variant.scenario;
        let plain = outagelab_sim::run(scenario).unwrap();
        let (traced, trace) = outagelab_sim::run_traced(
            scenario,
            outagelab_sim::Bugs::default(),
            &mut |_| {},
            NonZeroU64::new(7),
        )
        .unwrap();
        let json = |report| {
            outagelab_report::write::to_json(&outagelab_report::RunReport {
                scenario: String::new(),
                seed: 0,
                sweep: None,
                slo: None,
                variants: vec![report],
                observed: None,
            })
        };
        assert_eq!(json(plain), json(traced), "{}", variant.name);
        let trace = trace.expect("a trace was asked for");
        // 500 requests, every 7th from the first: numbers 0, 7, ..., 497.
        assert_eq!(trace.requests, 72, "{}", variant.name);
        let started: Vec<u64> = trace
            .events
            .iter()
            .filter(|e| matches!(e.what, TraceWhat::Started { .. }))
            .filter_map(|e| e.request)
            .collect();
        assert_eq!(started, (0..500).step_by(7).collect::<Vec<u64>>());
        let ended = trace
            .events
            .iter()
            .filter(|e| matches!(e.what, TraceWhat::Ended { .. }))
            .count();
        assert_eq!(ended, 72, "every traced request ends once");
    }
}

#[test]
fn a_trace_shows_a_fail_open_read_wait_out_its_timeout_then_query_the_database() {
    let dir = scratch("trace");
    let path = dir.join("trace.json");
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--trace",
        path.to_str().unwrap(),
        "--trace-sample",
        "250",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("(6 requests traced, 1 in 250 of each variant;"),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let trace: serde_json::Value = serde_json::from_str(&text).unwrap();
    let events = trace["traceEvents"].as_array().unwrap();
    // Variant 1 (timeout only) is process 1; request #0 is track 1.
    let on = |pid: u64, tid: u64, name: &str| {
        events
            .iter()
            .find(|e| e["pid"] == pid && e["tid"] == tid && e["name"] == name)
            .unwrap_or_else(|| panic!("no {name} on {pid}/{tid}: {text}"))
    };
    let ms = |e: &serde_json::Value, key: &str| e[key].as_f64().unwrap() / 1000.0;
    let request = on(1, 1, "read: ok");
    assert!((149.0..=151.0).contains(&ms(request, "dur")), "{request}");
    let wait = on(1, 1, "waiting for a reply on cache");
    assert_eq!(ms(wait, "dur"), 100.0, "the command timeout");
    on(1, 1, "step ended: timeout (on_error next)");
    let query = on(1, 1, "query on main");
    assert!((49.0..=51.0).contains(&ms(query, "dur")), "{query}");
    assert_eq!(
        ms(query, "ts"),
        100.0,
        "the query starts when the timeout fails open"
    );
    // With the breaker open (variant 2, request #250 at 500 ms), the read skips Redis.
    on(2, 251, "refused by breaker redis: breaker_open");
    // Each variant is named, and so is each request's track; the fault is on every track.
    on(3, 0, "process_name");
    assert!(text.contains("\"request #250 (read)\""));
    on(1, 0, "fault redis-dead started (hang)");

    // The same run, the same bytes.
    let again = dir.join("again.json");
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--trace",
        again.to_str().unwrap(),
        "--trace-sample",
        "250",
    ]);
    assert!(output.status.success());
    assert_eq!(text, std::fs::read_to_string(again).unwrap());
}

#[test]
fn a_trace_needs_one_run_and_a_sample_of_at_least_one() {
    for (args, message) in [
        (
            vec!["--seeds", "1..2", "--trace", "t.json"],
            "cannot be used with",
        ),
        (
            vec!["--trace", "t.json", "--trace-sample", "0"],
            "--trace-sample",
        ),
        (vec!["--trace-sample", "5"], "--trace"),
    ] {
        let mut all = vec!["run", "scenarios/redis-dead-protection.toml"];
        all.extend(args);
        let output = outagelab(&all);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(message), "{all:?}: {stderr}");
    }
}

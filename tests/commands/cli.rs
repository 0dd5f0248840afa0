//! The command line as a user meets it: output that is the same bytes for the same seed from
//! separate processes, and exit codes that CI can rely on.

use crate::common;

use std::path::Path;

use common::{outagelab, scratch};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A bundled scenario's text, for a test to change.
fn bundled(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

/// The lines under the table that say what an error does.
fn routing(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|line| line.starts_with("on error"))
        .collect()
}

#[test]
fn the_same_seed_gives_byte_identical_json_from_two_processes() {
    let dir = scratch("determinism");
    let mut outputs = Vec::new();
    for run in ["first", "second"] {
        let json = dir.join(format!("{run}.json"));
        let csv = dir.join(run);
        let output = outagelab(&[
            "run",
            "scenarios/redis-dead-protection.toml",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ]);
        assert!(output.status.success(), "{}", text(&output.stderr));
        outputs.push((
            std::fs::read(&json).unwrap(),
            std::fs::read(csv.join("series.csv")).unwrap(),
        ));
    }
    assert!(outputs[0].0.len() > 1000);
    assert_eq!(outputs[0], outputs[1], "two runs of the same seed differ");
    let report: serde_json::Value = serde_json::from_slice(&outputs[0].0).unwrap();
    let names: Vec<&str> = report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "timeout only (fail-open)",
            "timeout + breaker",
            "timeout + breaker + DB bulkhead"
        ]
    );
    assert!(
        report["variants"][0]["series"]["start_ms"]
            .as_array()
            .unwrap()
            .len()
            > 10
    );
}

#[test]
fn another_seed_gives_other_draws() {
    let dir = scratch("seeds");
    let mut reports = Vec::new();
    for seed in ["1", "2"] {
        let json = dir.join(format!("{seed}.json"));
        let output = outagelab(&[
            "run",
            "scenarios/redis-dead-protection.toml",
            "--seed",
            seed,
            "--json",
            json.to_str().unwrap(),
        ]);
        assert!(output.status.code().is_some());
        reports.push(std::fs::read(&json).unwrap());
    }
    assert_ne!(reports[0], reports[1]);
}

#[test]
fn the_run_prints_one_row_per_variant_and_passes() {
    let output = outagelab(&["run", "scenarios/redis-dead-protection.toml"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    for row in [
        "timeout only (fail-open)",
        "timeout + breaker",
        "timeout + breaker + DB bulkhead",
    ] {
        let rows = stdout
            .lines()
            .filter(|line| line.starts_with(&format!("{row}  ")));
        assert_eq!(rows.count(), 1, "{row}: {stdout}");
    }
    assert!(
        stdout.contains("expectations: 19 held, 0 failed"),
        "{stdout}"
    );
    // Every variant routes errors alike: said once, under the table.
    assert_eq!(
        routing(&stdout),
        ["on error: read: GET cache -> next (fail-open); db main -> fail"],
        "{stdout}"
    );
}

#[test]
fn the_table_names_the_variants_that_route_errors_differently() {
    let dir = scratch("routing");
    let original = bundled("redis-dead-protection.toml");
    let file = dir.join("closed.toml");
    let closed = "\n[[variant]]\nname = \"fail-closed\"\n[variant.patch.flows.read.steps.0]\non_error = \"fail\"\n";
    std::fs::write(&file, format!("{original}{closed}")).unwrap();
    let output = outagelab(&["run", file.to_str().unwrap()]);
    let stdout = text(&output.stdout);
    assert_eq!(
        routing(&stdout),
        [
            "on error in \"fail-closed\": read: GET cache -> fail; db main -> fail",
            "on error in the other 3 variants: read: GET cache -> next (fail-open); db main -> fail",
        ],
        "{stdout}"
    );
}

#[test]
fn metric_on_one_run_adds_a_column_per_metric_with_the_summary_s_value() {
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--metric",
        "outcomes.shed",
        "--metric",
        "databases.main.peak_concurrency",
        "--json",
        "-",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let table = text(&output.stderr);
    let header = table
        .lines()
        .find(|line| line.starts_with("variant") && line.contains("outcomes.shed"))
        .unwrap_or_else(|| panic!("no metrics table: {table}"));
    assert!(
        header.contains("databases.main.peak_concurrency"),
        "{header}"
    );
    let bulkhead = &report["variants"][2];
    let row = table
        .lines()
        .rev()
        .find(|line| line.starts_with("timeout + breaker + DB bulkhead "))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().rev().take(2).collect();
    assert_eq!(
        cells,
        [
            bulkhead["summary"]["databases"]["main"]["peak_concurrency"].to_string(),
            bulkhead["summary"]["outcomes"]["shed"].to_string(),
        ],
        "{row}"
    );
}

#[test]
fn a_bad_file_exits_2_naming_file_line_column_and_key() {
    let dir = scratch("bad");
    let file = dir.join("bad.toml");
    std::fs::write(
        &file,
        "[scenario]\nname = \"x\"\n[databases.db]\nlatency = \"10ms\"\ncapacity = 0\n",
    )
    .unwrap();
    for command in ["run", "validate"] {
        let output = outagelab(&[command, file.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains("bad.toml:5:12: databases.db.capacity: must be at least 1"),
            "{stderr}"
        );
    }
    let output = outagelab(&["run", "no/such/file.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("no/such/file.toml: cannot read the file"));
}

/// The mistakes a newcomer makes first, each answered with what to write instead (issue 18):
/// a rate with a unit, a missing required key (its meaning quoted from the reference), an SLO
/// written as a string (at `report.slo`, not `report`), a latency expectation with a unit,
/// and a baseline that is no variant (listing the variants).
#[test]
fn a_newcomer_s_mistakes_are_answered_with_the_fix() {
    let dir = scratch("newcomer-mistakes");
    let base = bundled("redis-dead-protection.toml");
    let cases = [
        (
            base.replace("rate = 500\n", "rate = \"1500/s\"\n"),
            "loads.peak.rate: `1500/s` is a number with a unit, but `rate` is a plain number (a \
             rate is requests per second): write `rate = 1500`",
        ),
        (
            base.replace("queue = 50\n", ""),
            "bulkheads.db: missing field `queue`, which a `[bulkheads.<name>]` requires: waiters \
             in FIFO order; when full, the step fails with `shed` at once",
        ),
        (
            base.replace(
                "slo = { latency = \"200ms\", percentile = 99 }",
                "slo = \"p99 < 200ms\"",
            ),
            "report.slo: expected a table, found string \"p99 < 200ms\": write it as e.g. \
             `slo = { latency = \"200ms\", percentile = 99 }`",
        ),
        (
            base.replace(
                "\"unfinished == 0\",",
                "\"unfinished == 0\", \"p99 < 300ms\",",
            ),
            "expect: `300ms` has a unit: an expectation compares plain numbers, each metric in \
             the unit its name says (`latency_ms` in milliseconds, sizes in bytes), e.g. \
             `latency_ms.all.p99 < 300`. `p99` alone is no metric",
        ),
        (
            base.replace(
                "slo = { latency = \"200ms\", percentile = 99 }",
                "slo = { latency = \"200ms\", percentile = 99 }\nbaseline = \"breaker\"",
            ),
            "report.baseline: \"breaker\" is not a variant (the variants: \"timeout only \
             (fail-open)\", \"timeout + breaker\", \"timeout + breaker + DB bulkhead\")",
        ),
    ];
    for (index, (text_of_file, message)) in cases.iter().enumerate() {
        assert_ne!(text_of_file, &base, "case {index} changed the file");
        let file = dir.join(format!("mistake-{index}.toml"));
        std::fs::write(&file, text_of_file).unwrap();
        let output = outagelab(&["validate", file.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(2), "case {index}");
        let stderr = text(&output.stderr);
        assert!(stderr.contains(message), "case {index}: {stderr}");
    }
}

/// A newcomer's first minutes: `init` writes each template, and what it wrote validates
/// without a warning and runs with every expectation held; it never overwrites a file, names
/// the templates when given another, and writes to standard output for `-`.
#[test]
fn init_writes_each_template_and_what_it_wrote_runs() {
    let dir = scratch("init");
    for template in ["cache-aside", "lock-guarded-writes", "gateway-rate-limit"] {
        let path = dir.join(format!("{template}.toml"));
        let path = path.to_str().unwrap();
        let output = outagelab(&["init", path, "--template", template]);
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
        assert!(text(&output.stderr).contains(&format!("next: outagelab run {path}")));
        let checked = outagelab(&["validate", "--strict", path]);
        assert_eq!(checked.status.code(), Some(0), "{}", text(&checked.stderr));
        let run = outagelab(&["run", path, "--quiet"]);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{template}: {}",
            text(&run.stdout)
        );
        assert!(
            text(&run.stdout).contains("0 failed"),
            "{}",
            text(&run.stdout)
        );
        let again = outagelab(&["init", path, "--template", template]);
        assert_eq!(again.status.code(), Some(2));
        assert!(text(&again.stderr).contains("init never overwrites a file"));
    }
    let unknown = outagelab(&[
        "init",
        dir.join("x.toml").to_str().unwrap(),
        "--template",
        "kafka",
    ]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("no template \"kafka\"; the templates:"));
    assert!(text(&unknown.stderr).contains("lock-guarded-writes"));
    let stdout = outagelab(&["init", "-"]);
    assert_eq!(stdout.status.code(), Some(0));
    assert_eq!(text(&stdout.stdout), bundled("quick-start.toml"));
}

#[test]
fn a_failed_expectation_exits_1_and_says_how_to_reproduce() {
    let dir = scratch("failing");
    let original = bundled("redis-dead-protection.toml");
    let file = dir.join("stricter.toml");
    std::fs::write(
        &file,
        original.replace("\"outcomes.shed in 89..91\"", "\"outcomes.shed == 0\""),
    )
    .unwrap();
    let output = outagelab(&["run", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("FAIL  timeout + breaker + DB bulkhead: outcomes.shed == 0 (actual 89)"),
        "{stdout}"
    );
    assert!(text(&output.stderr).contains("--seed 1"));
}

#[test]
fn every_bundled_scenario_validates_without_a_warning_under_strict() {
    let mut files: Vec<_> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
            .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for file in files {
        let output = outagelab(&["validate", "--strict", file.to_str().unwrap()]);
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "{}: {stderr}", file.display());
        assert!(stderr.is_empty(), "{}: {stderr}", file.display());
    }
}

#[test]
fn warnings_go_to_standard_error_and_strict_makes_them_errors() {
    let dir = scratch("warnings");
    let file = dir.join("unused.toml");
    let original = bundled("redis-dead-protection.toml");
    std::fs::write(&file, format!("{original}\n[servers.spare]\n")).unwrap();
    let path = file.to_str().unwrap();
    let warning = "warning: ";
    let located = "unused.toml:";
    let message = ": servers.spare: no variant uses this server";
    for command in ["validate", "run"] {
        let output = outagelab(&[command, path]);
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "{command}: {stderr}");
        let line = stderr
            .lines()
            .find(|line| line.starts_with(warning))
            .unwrap_or_else(|| panic!("{command}: no warning in {stderr}"));
        assert!(line.contains(located) && line.contains(message), "{line}");
        assert!(!text(&output.stdout).contains(warning), "{command}");

        let strict = outagelab(&[command, "--strict", path]);
        assert_eq!(strict.status.code(), Some(2), "{command} --strict");
        let stderr = text(&strict.stderr);
        assert!(stderr.contains(message), "{stderr}");
        assert!(
            stderr.contains("--strict: 1 warning, so the file is refused"),
            "{stderr}"
        );
        assert!(
            text(&strict.stdout).is_empty(),
            "nothing runs: {}",
            text(&strict.stdout)
        );
    }
    let seeds = outagelab(&["run", "--strict", "--seeds", "1..2", path]);
    assert_eq!(seeds.status.code(), Some(2));
}

#[test]
fn validate_explain_prints_each_preset_s_values_per_variant() {
    let output = outagelab(&["validate", "--explain", "scenarios/breaker-libraries.toml"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let out = text(&output.stdout);
    for expected in [
        "# variant resilience4j\n[breakers.redis]\n  preset = \"resilience4j\"",
        "# variant polly-v8\n[breakers.redis]\n  preset = \"polly-v8\"",
        "    # source: opossum 8.1 defaults",
        "  failure_rate = { percent = 50, window_calls = 100, min_calls = 100 }\n  open_for = \"60s\"\n  half_open_probes = 10\n",
        "  half_open_rule = \"failure_rate\"",
        "  failure_rate = { percent = 50, window = \"10s\", window_slots = 10, min_calls = 1 }",
        "  threshold = \"exceeded\"",
        "  evaluate_on = \"failure\"",
    ] {
        assert!(out.contains(expected), "no `{expected}` in:\n{out}");
    }
    // Without --explain, one line.
    let plain = outagelab(&["validate", "scenarios/breaker-libraries.toml"]);
    assert_eq!(text(&plain.stdout).lines().count(), 1);
}

#[test]
fn a_run_that_outgrows_its_memory_budget_exits_1_naming_the_budget() {
    // Redis hangs and every read times out, but the commands stay queued on the connection
    // (a hung server never answers them): what the run holds grows with every request.
    let dir = scratch("memory-budget");
    let file = dir.join("hung.toml");
    std::fs::write(
        &file,
        r#"[scenario]
name = "hung"

[run]
memory_max = "8MiB"

[servers.redis]

[connections.cache]
server = "redis"
command_timeout = "100ms"

[keys.k]

[flows.read]
steps = [{ redis = { command = "GET", connection = "cache", key = "k" }, on_error = "next" }]

[loads.l]
flow = "read"
arrivals = "even"
rate = 100000
count = 10000000

[faults.hang]
target = "redis"
kind = "hang"
at = "0s"
"#,
    )
    .unwrap();
    let output = outagelab(&["run", file.to_str().unwrap()]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("(memory_budget)"), "{stderr}");
    assert!(stderr.contains("[run] memory_max"), "{stderr}");
    assert!(stderr.contains("reproduce with: outagelab run"), "{stderr}");
    // One event that spawns a burst of a million requests is stopped inside the burst, not
    // after it: the check counts requests spawned and advanced, not only events.
    let burst = dir.join("burst.toml");
    let text_of_file = std::fs::read_to_string(&file).unwrap().replace(
        "arrivals = \"even\"\nrate = 100000\ncount = 10000000",
        "arrivals = \"burst\"\ncount = 1000000",
    );
    assert!(text_of_file.contains("\"burst\""));
    std::fs::write(&burst, text_of_file).unwrap();
    let output = outagelab(&["run", burst.to_str().unwrap()]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("(memory_budget) at 0 ms"), "{stderr}");
}

#[test]
fn outputs_never_overwrite_the_scenario_or_each_other() {
    let dir = scratch("unsafe-outputs");
    let input = dir.join("scenario.toml");
    let original = std::fs::read("scenarios/redis-dead-protection.toml").unwrap();
    std::fs::write(&input, &original).unwrap();
    let input = input.to_str().unwrap();
    let csv = dir.join("csv");
    let series = csv.join("series.csv");
    let events = dir.join("events.jsonl");
    let events = events.to_str().unwrap();
    let cases: [(Vec<&str>, &str); 5] = [
        (
            vec!["run", input, "--json", input],
            "is the scenario file itself",
        ),
        (vec!["run", input, "--events", input], "--events"),
        (
            vec!["run", input, "--json", events, "--events", events],
            "is where --json writes",
        ),
        (
            vec![
                "run",
                input,
                "--csv",
                csv.to_str().unwrap(),
                "--json",
                series.to_str().unwrap(),
            ],
            "is where --csv writes series.csv",
        ),
        (
            vec!["run", input, "--json", dir.to_str().unwrap()],
            "is a directory",
        ),
    ];
    for (args, message) in cases {
        let output = outagelab(&args);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(output.stdout.is_empty(), "refused before running");
    }
    assert_eq!(
        std::fs::read(input).unwrap(),
        original,
        "the scenario is intact"
    );
}

#[test]
fn json_to_standard_output_keeps_it_one_document_and_files_appear_whole() {
    let output = outagelab(&["run", "scenarios/redis-dead-protection.toml", "--json", "-"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("standard output is one JSON document");
    assert_eq!(report["variants"].as_array().unwrap().len(), 3);
    assert!(text(&output.stderr).contains("expectations: 19 held"));
    assert!(!Path::new(env!("CARGO_MANIFEST_DIR")).join("-").exists());

    let dir = scratch("whole-files");
    let (json, csv, plot) = (dir.join("r.json"), dir.join("csv"), dir.join("charts"));
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    // Status lines go to standard error; standard output is the table.
    assert!(!text(&output.stdout).contains("wrote "));
    assert!(text(&output.stderr).contains(&format!("wrote {}", json.display())));
    for folder in [&dir, &csv, &plot] {
        for entry in std::fs::read_dir(folder).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            assert!(
                !name.contains(".partial"),
                "a partial file was left: {name}"
            );
        }
    }
    assert!(std::fs::metadata(plot.join("outage.png")).unwrap().len() > 1000);
}

#[test]
fn the_events_log_holds_every_breaker_transition_the_summary_counts() {
    let dir = scratch("events");
    let (json, events) = (dir.join("r.json"), dir.join("events.jsonl"));
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--json",
        json.to_str().unwrap(),
        "--events",
        events.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&events)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
        .collect();
    let mut transitions = 0;
    for variant in report["variants"].as_array().unwrap() {
        let name = variant["name"].as_str().unwrap();
        let of_variant: Vec<&serde_json::Value> =
            lines.iter().filter(|l| l["variant"] == name).collect();
        let times: Vec<f64> = of_variant
            .iter()
            .map(|l| l["at_ms"].as_f64().unwrap())
            .collect();
        assert!(times.is_sorted(), "{name}: in time order");
        for (breaker, summary) in variant["summary"]["breakers"].as_object().unwrap() {
            let count = |event: &str| {
                let matching = of_variant.iter().filter(|l| {
                    l["event"] == event && l["target_kind"] == "breaker" && l["target"] == **breaker
                });
                matching.count() as u64
            };
            for (event, field) in [
                ("breaker_open", "opened"),
                ("breaker_half_open", "half_opened"),
                ("breaker_closed", "closed"),
            ] {
                let counted = summary[field].as_u64().unwrap();
                assert_eq!(count(event), counted, "{name}: {breaker} {event}");
                transitions += counted;
            }
        }
        let fault_lines = of_variant.iter().filter(|l| l["target_kind"] == "fault");
        let faults = variant["faults"].as_array().unwrap();
        let ends = faults.iter().filter(|f| !f["end_ms"].is_null()).count();
        assert_eq!(
            fault_lines.count(),
            faults.len() + ends,
            "{name}: a line per start and end"
        );
    }
    assert!(
        transitions > 0,
        "the scenario's breakers open: the test compares something"
    );
}

#[test]
fn a_seed_range_runs_every_seed_and_names_the_first_that_fails() {
    let output = outagelab(&["run", "scenarios/retry-storm.toml", "--seeds", "stated"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(stdout.contains("on seeds 1..20 (20 seeds x "), "{stdout}");
    assert!(stdout.contains("seeds with a failure: none"), "{stdout}");

    // An expectation that holds on some seeds only: the run says which seed broke it first.
    let dir = scratch("seed-range");
    let file = dir.join("fragile.toml");
    let original = std::fs::read_to_string("scenarios/gateway-rate-limit.toml").unwrap();
    let fragile = original.replace(
        "expect = [\"requests in 4300..4700\"]",
        "expect = [\"requests in 4480..4520\"]",
    );
    assert_ne!(
        fragile, original,
        "the test edits the expectation it means to"
    );
    std::fs::write(&file, fragile).unwrap();
    let output = outagelab(&["run", file.to_str().unwrap(), "--seeds", "1..6"]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("requests in 4480..4520"), "{stdout}");
    assert!(stderr.contains("reproduce with: outagelab run"), "{stderr}");
    assert!(stderr.contains("--seed "), "{stderr}");

    for (args, message) in [
        (vec!["--seeds", "5..1"], "the range 5..1 is empty"),
        (vec!["--seeds", "1..2000"], "is more than 1000"),
        (
            vec!["--seeds", "1..2", "--events", "x"],
            "cannot be used with",
        ),
        (vec!["--metric", "outcomes.okk"], "`outcomes` has no `okk`"),
        (
            vec!["--seeds", "1..2", "--seed", "3"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["run", "scenarios/retry-storm.toml"];
        all.extend(args);
        let output = outagelab(&all);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(message), "{all:?}: {stderr}");
    }
    let without = dir.join("no-range.toml");
    std::fs::write(&without, original.replace("seeds = \"1..20\"\n", "")).unwrap();
    let output = outagelab(&["run", without.to_str().unwrap(), "--seeds", "stated"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("states no seed range"));
}

#[test]
fn set_overrides_a_key_and_the_reproduce_line_carries_it() {
    let file = "scenarios/redis-dead-protection.toml";
    // 400 requests instead of 500: the file's expectations on counts fail, and the command
    // printed to reproduce the run must carry the override to fail the same way.
    let set = [
        "--set",
        "loads.peak.count=400",
        "--set",
        "faults.redis-dead.at=\"0s\"",
    ];
    let output = outagelab(&[&["run", file][..], &set].concat());
    assert_eq!(output.status.code(), Some(1), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("(actual 400)"));
    let reproduce = format!(
        "reproduce with: outagelab run {file} --seed 1 --set loads.peak.count=400 --set 'faults.redis-dead.at=\"0s\"'"
    );
    assert!(
        text(&output.stderr).contains(&reproduce),
        "{}",
        text(&output.stderr)
    );
    let seeds = outagelab(&[&["run", file, "--seeds", "1..2"][..], &set].concat());
    assert_eq!(seeds.status.code(), Some(1));
    assert!(
        text(&seeds.stderr).contains(&reproduce),
        "{}",
        text(&seeds.stderr)
    );
    // The HTML page's command too.
    let dir = scratch("set-html");
    let page = dir.join("page.html");
    let html = outagelab(&[&["run", file, "--html", page.to_str().unwrap()][..], &set].concat());
    assert_eq!(html.status.code(), Some(1));
    let page = std::fs::read_to_string(&page).unwrap();
    assert!(
        page.contains("--set loads.peak.count=400"),
        "the page's command"
    );
}

#[test]
fn a_bad_set_exits_2_naming_the_flag() {
    let file = "scenarios/redis-dead-protection.toml";
    for (set, expected) in [
        (
            "loads.peek.rate=400",
            ": --set loads.peek.rate=400: loads.peek.rate: the scenario has no `loads.peek`, so `loads.peek.rate` cannot be set: did you mean `loads.peak`?",
        ),
        (
            "loads.peak.rate=-1",
            ": --set loads.peak.rate=-1: loads.peak.rate: must be a positive number",
        ),
        (
            "scenario.seed=7",
            ": --set scenario.seed=7: scenario.seed: the seed is a parameter of the run: use --seed N",
        ),
        ("nothing", "`nothing` is not KEY=VALUE"),
        // Issue 29: a step is reached by its index, as a variant's patch reaches it.
        (
            "flows.read.steps.2.on_error=\"next\"",
            ": --set flows.read.steps.2.on_error=\"next\": flows.read.steps.2.on_error: `flows.read.steps` has 2 elements (from 0), so `flows.read.steps.2.on_error` cannot be set",
        ),
        (
            "flows.read.steps.first.on_error=\"next\"",
            "`flows.read.steps` is a list: name an element by its index (`flows.read.steps.0`)",
        ),
        (
            "flows.read.steps.0.on_error=\"explode\"",
            ": --set flows.read.steps.0.on_error=\"explode\": flows.read.steps[0].on_error: unknown variant `explode`",
        ),
    ] {
        for command in ["validate", "run"] {
            let output = outagelab(&[command, file, "--set", set]);
            assert_eq!(output.status.code(), Some(2), "{command} --set {set}");
            let stderr = text(&output.stderr);
            assert!(stderr.contains(expected), "{command} --set {set}: {stderr}");
        }
    }
    let output = outagelab(&["validate", file, "--set", "loads.peak.rate=400"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    // A key inside a step is set where the file writes it.
    let output = outagelab(&[
        "validate",
        file,
        "--set",
        "flows.read.steps.1.on_error=\"fail\"",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn set_makes_a_missing_table_whose_keys_all_have_defaults() {
    let file = "scenarios/redis-dead-protection.toml";
    assert!(!bundled("redis-dead-protection.toml").contains("[run]"));
    for set in ["run.memory_max=\"1GiB\"", "metrics.bucket=\"500ms\""] {
        let output = outagelab(&["validate", file, "--set", set]);
        assert!(
            output.status.success(),
            "--set {set}: {}",
            text(&output.stderr)
        );
    }
    let output = outagelab(&["validate", file, "--set", "run.nope=1"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains(": --set run.nope=1: "), "{stderr}");
    assert!(stderr.contains("nope"), "{stderr}");
}

#[test]
fn the_file_s_slo_reaches_the_json_and_the_charts() {
    let dir = scratch("slo");
    let (json, plot) = (dir.join("r.json"), dir.join("charts"));
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(
        report["slo"],
        serde_json::json!({"latency_ms": 200.0, "percentile": 99.0})
    );
    for chart in ["latency", "latency_cdf"] {
        let svg = std::fs::read_to_string(plot.join(format!("{chart}.svg"))).unwrap();
        assert!(svg.contains("SLO p99 ≤ 200 ms"), "{chart}.svg");
    }
}

#[test]
fn a_dash_output_goes_to_standard_output_alone() {
    let file = "scenarios/redis-dead-protection.toml";
    for (flag, start) in [
        ("--events", "{\"variant\":"),
        ("--report", "<!DOCTYPE html>"),
        ("--trace", "{\"traceEvents\":["),
        ("--json", "{"),
    ] {
        let output = outagelab(&["run", file, flag, "-"]);
        assert!(
            output.status.success(),
            "{flag} -: {}",
            text(&output.stderr)
        );
        let stdout = text(&output.stdout);
        assert!(stdout.starts_with(start), "{flag} -: {stdout:.200}");
        // The table went to standard error.
        assert!(
            text(&output.stderr).contains("redis-dead-protection (seed 1): 3 variants"),
            "{flag} -"
        );
    }
    let output = outagelab(&["run", file, "--json", "-", "--events", "-"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output.stderr).contains("--json - and --events - both ask for standard output"),
        "{}",
        text(&output.stderr)
    );
    for flag in ["--csv", "--plot"] {
        let output = outagelab(&["run", file, flag, "-"]);
        assert_eq!(output.status.code(), Some(2), "{flag} -");
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains(&format!("{flag} - is refused: {flag} writes several files")),
            "{stderr}"
        );
    }
    assert!(!Path::new(env!("CARGO_MANIFEST_DIR")).join("-").exists());
}

/// Runs the binary with `args` and `input` on its standard input.
fn with_stdin(args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_outagelab"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

#[test]
fn a_dash_file_is_read_from_standard_input() {
    let name = "redis-dead-protection.toml";
    let from_file = outagelab(&["run", &format!("scenarios/{name}")]);
    let from_stdin = with_stdin(&["run", "-"], &bundled(name));
    assert!(from_stdin.status.success(), "{}", text(&from_stdin.stderr));
    assert_eq!(text(&from_stdin.stdout), text(&from_file.stdout));
    // A run from standard input that fails says how to run it again: from a saved file.
    let failing = with_stdin(
        &["run", "-", "--set", "loads.peak.count=400"],
        &bundled(name),
    );
    assert_eq!(failing.status.code(), Some(1));
    assert!(
        text(&failing.stderr).contains(
            "reproduce with: outagelab run scenario.toml --seed 1 --set loads.peak.count=400 \
             (the scenario came from standard input: save it as scenario.toml)"
        ),
        "{}",
        text(&failing.stderr)
    );
    let output = with_stdin(&["validate", "-"], &bundled(name));
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("<stdin>: ok (3 variants)"));
    let output = with_stdin(&["validate", "-"], "[scenario]\nname = 3\n");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("<stdin>:2:8: scenario.name:"), "{stderr}");
}

#[test]
fn variants_that_end_the_same_way_share_one_note() {
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--set",
        "run.horizon=\"1s\"",
    ]);
    let stdout = text(&output.stdout);
    let notes: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("ended by"))
        .collect();
    assert_eq!(
        notes,
        [
            "note: 3 variants (\"timeout only (fail-open)\", \"timeout + breaker\", \"timeout + breaker + DB bulkhead\") ended by horizon at 1000 ms"
        ],
        "{stdout}"
    );
}

#[test]
fn explain_marks_the_values_the_file_set() {
    let stdout = common::succeed(&[
        "validate",
        "scenarios/redis-dead-protection.toml",
        "--explain",
    ]);
    assert!(
        stdout.contains("\n  failures = 5  # set in the file\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\n  half_open_probes = 1\n"), "{stdout}");
}

/// The header line of the side-by-side table a run printed.
fn table_header(stdout: &str) -> Vec<String> {
    let line = stdout
        .lines()
        .find(|line| line.starts_with("variant "))
        .unwrap_or_else(|| panic!("no table in {stdout}"));
    line.split("  ")
        .map(str::trim)
        .filter(|cell| !cell.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The side-by-side table's columns came and went with the counts (a `shed` column only when
/// something was shed), so two runs of one file printed tables that did not line up. They are
/// decided from the file, and `--columns` chooses them.
#[test]
fn table_columns_are_the_file_s_whatever_the_counts_and_columns_chooses_them() {
    let file = "scenarios/redis-dead-protection.toml";
    let run = |extra: &[&str]| {
        let output = outagelab(&[&["run", file, "--quiet"][..], extra].concat());
        // A bulkhead that sheds nothing fails the file's own expectations: exit 1.
        assert!(
            matches!(output.status.code(), Some(0 | 1)),
            "{}",
            text(&output.stderr)
        );
        text(&output.stdout)
    };
    // The bulkhead sheds 89 requests; with a queue of 1,000 it sheds none.
    let shedding = run(&[]);
    let not_shedding = run(&["--set", "bulkheads.db.queue=1000"]);
    // The errors column says which kinds it counts.
    assert!(
        (shedding.lines()).any(|line| line.starts_with("timeout + breaker + DB bulkhead")
            && line.contains(" 89 shed ")),
        "{shedding}"
    );
    let header = table_header(&shedding);
    assert_eq!(header, table_header(&not_shedding), "{not_shedding}");
    assert_eq!(
        header,
        [
            "variant",
            "requests",
            "ok",
            "errors",
            "unfinished",
            "p50 ms",
            "p95 ms",
            "p99 ms",
            "peak main"
        ]
    );
    // Chosen, in the order given; an error kind is a column of its own.
    let chosen = run(&["--columns", "requests,shed,timeout,ok,p99"]);
    assert_eq!(
        table_header(&chosen),
        ["variant", "requests", "shed", "timeout", "ok", "p99 ms"]
    );
    let bulkhead = chosen
        .lines()
        .find(|line| line.starts_with("timeout + breaker + DB bulkhead"))
        .unwrap();
    let cells: Vec<&str> = bulkhead.split_whitespace().collect();
    assert_eq!(cells[cells.len() - 5..][..4], ["500", "89", "0", "411"]);
    // The report's table has the same columns.
    let dir = scratch("columns-report");
    let page = dir.join("r.md");
    run(&["--columns", "ok,shed", "--report", page.to_str().unwrap()]);
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.contains("| variant | ok | shed |\n"), "{page}");

    // Unknown names are each named, with the valid ones; a name twice and none are refused.
    for (columns, message) in [
        (
            "ok,nope,p99,bogus",
            "--columns: no column named `nope`, `bogus` (the columns: requests, ok, errors, \
             timeout,",
        ),
        ("ok,p99,ok", "--columns names `ok` twice"),
        ("", "--columns is empty"),
    ] {
        let output = outagelab(&["run", file, "--columns", columns]);
        assert_eq!(output.status.code(), Some(2), "{columns}");
        assert!(
            text(&output.stderr).contains(message),
            "{columns}: {}",
            text(&output.stderr)
        );
        assert!(output.stdout.is_empty(), "nothing ran");
    }
    let output = outagelab(&["run", file, "--seeds", "1..2", "--columns", "ok"]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "a study's table has metrics as columns"
    );
}

/// The single-run sweep chart drew each flow's median latency whatever the file chose: it
/// draws `[report] metrics`, or `--metric`, against the swept value.
#[test]
fn the_sweep_chart_draws_the_file_s_metrics_or_the_command_s() {
    let file = "scenarios/breaker-open-sweep.toml";
    let chart = |extra: &[&str], name: &str| {
        let dir = scratch(name);
        let args = [
            &["run", file, "--quiet", "--plot", dir.to_str().unwrap()][..],
            extra,
        ]
        .concat();
        let output = outagelab(&args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        std::fs::read_to_string(dir.join("sweep.svg")).unwrap()
    };
    // The file's `[report] metrics`.
    let svg = chart(&[], "sweep-metrics-file");
    for metric in [
        "connections.cache.timeouts (count)",
        "databases.main.queries (count)",
        "breakers.redis.opened (count)",
    ] {
        assert!(svg.contains(metric), "{metric}");
    }
    assert!(!svg.contains("p50 latency"));
    // `--metric` takes precedence.
    let svg = chart(&["--metric", "latency_ms.all.p99"], "sweep-metrics-flag");
    assert!(svg.contains("latency_ms.all.p99 (ms)"));
    assert!(!svg.contains("connections.cache.timeouts"));
}

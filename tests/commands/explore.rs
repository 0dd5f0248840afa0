//! `outagelab explore`: schedules drawn from `[explore]` find what breaks a design that writes
//! no fault of its own, the breaking schedule is shrunk and written as a scenario file that
//! `run` fails on the same way, the findings are the same on any number of threads, and bad
//! `[explore]` tables are refused at their key.

use std::path::Path;

use crate::common;

use common::{outagelab, scratch};

const BUNDLED: &str = "scenarios/explore-reconnect-slot.toml";

/// Runs `explore` and returns its exit code and standard output.
fn explore(args: &[&str]) -> (Option<i32>, String) {
    let mut all = vec!["explore"];
    all.extend_from_slice(args);
    all.push("--quiet");
    let output = outagelab(&all);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    (output.status.code(), stdout)
}

/// The block of finding `number` in explore's output.
fn finding(stdout: &str, number: usize) -> &str {
    let start = stdout
        .find(&format!("\nfinding {number}: "))
        .unwrap_or_else(|| panic!("no finding {number}: {stdout}"));
    let rest = &stdout[start + 1..];
    let end = rest[1..].find("\nfinding ").map_or(rest.len(), |e| e + 1);
    &rest[..end]
}

/// The block of the finding whose headline holds `text`.
fn finding_with<'s>(stdout: &'s str, text: &str) -> (usize, &'s str) {
    (1..10)
        .map_while(|n| {
            stdout
                .contains(&format!("\nfinding {n}: "))
                .then(|| (n, finding(stdout, n)))
        })
        .find(|(_, block)| block.lines().next().is_some_and(|l| l.contains(text)))
        .unwrap_or_else(|| panic!("no finding with {text}: {stdout}"))
}

/// `finding-N.toml`'s faults: the `[faults.*]` tables it has.
fn faults_in(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().filter(|l| l.starts_with("[faults.")).count()
}

#[test]
fn a_planted_bug_is_found_shrunk_and_reproduced_by_run() {
    let dir = scratch("explore-planted");
    let out = dir.join("found");
    let (code, stdout) = explore(&[
        BUNDLED,
        "--out",
        out.to_str().unwrap(),
        "--plant-bug",
        "slot-ignores-generation",
    ]);
    assert_eq!(code, Some(1), "{stdout}");
    // Found within the file's 300 schedules, though the file writes no fault.
    let (number, block) = finding_with(
        &stdout,
        "variant \"reconnect slot\": invariant violated: no stale-generation eviction",
    );
    assert!(block.contains("shrunk in "), "{block}");
    assert!(block.contains(": seed "), "{block}");
    // The reproducer holds one fault, and run fails on it the same way with the bug...
    let reproducer = out.join(format!("finding-{number}.toml"));
    assert_eq!(faults_in(&reproducer), 1, "{block}");
    let shrunk_line = block.lines().find(|l| l.contains("shrunk in")).unwrap();
    assert!(shrunk_line.contains("1 fault: "), "{shrunk_line}");
    let ran = outagelab(&[
        "run",
        reproducer.to_str().unwrap(),
        "--plant-bug",
        "slot-ignores-generation",
    ]);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert_eq!(ran.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "variant \"reconnect slot\": invariant violated: no stale-generation eviction"
        ),
        "{stderr}"
    );
    // ...and without it, the slot breaks no invariant under the same schedule.
    let clean = outagelab(&["run", reproducer.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&clean.stderr);
    assert!(!stderr.contains("invariant violated"), "{stderr}");
}

#[test]
fn without_the_bug_only_the_design_that_never_reconnects_breaks() {
    let dir = scratch("explore-clean");
    let out = dir.join("found");
    let (code, stdout) = explore(&[BUNDLED, "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(!stdout.contains("variant \"reconnect slot\""), "{stdout}");
    let (number, block) = finding_with(
        &stdout,
        "variant \"OnceCell\": expectation failed: connections.budgets.fail_open <= 3500",
    );
    let reproducer = out.join(format!("finding-{number}.toml"));
    assert_eq!(faults_in(&reproducer), 1, "{block}");
    let ran = outagelab(&["run", reproducer.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL  OnceCell: connections.budgets.fail_open <= 3500"),
        "{stdout}"
    );
    assert!(!stdout.contains("FAIL  reconnect slot"), "{stdout}");
    // Beside it, the report of that run: the figure that breaks the claim.
    let report = common::read_report(&out.join(format!("finding-{number}.json")));
    let once_cell = (report["variants"].as_array().unwrap().iter())
        .find(|v| v["name"] == "OnceCell")
        .unwrap();
    let fail_open = once_cell["summary"]["connections"]["budgets"]["fail_open"].as_u64();
    assert!(fail_open.is_some_and(|n| n > 3500), "{fail_open:?}");
}

#[test]
fn the_findings_are_the_same_on_any_number_of_threads() {
    let dir = scratch("explore-threads");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED))
        .unwrap()
        .replace("runs_max = 300", "runs_max = 60")
        .replace("faults_max = 1", "faults_max = 3");
    let file = dir.join("explore.toml");
    std::fs::write(&file, text).unwrap();
    let out = dir.join("found");
    let args = |jobs: &'static str| {
        vec![
            file.to_str().unwrap().to_owned(),
            "--out".to_owned(),
            out.to_str().unwrap().to_owned(),
            "--seed".to_owned(),
            "7".to_owned(),
            "--jobs".to_owned(),
            jobs.to_owned(),
        ]
    };
    let run = |jobs| {
        let args = args(jobs);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let result = explore(&args);
        let written = std::fs::read_to_string(out.join("finding-1.toml")).unwrap();
        (result, written)
    };
    let one = run("1");
    let two = run("2");
    assert_eq!(one, two);
    assert!(one.0.1.contains("--seed 7"), "{}", one.0.1);
    // Another seed draws other schedules.
    let (_, other) = explore(&[file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_ne!(one.0.1, other);
}

#[test]
fn bad_explore_tables_are_refused_at_their_key() {
    let dir = scratch("explore-bad");
    let base =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED)).unwrap();
    let head = &base[..base.find("[explore]").unwrap()];
    let template = "[explore.faults.server]\ntarget = \"redis\"\nkind = \"pause\"\n\
                    at = { min = \"1s\", max = \"15s\" }\n";
    let cases = [
        (format!("[explore]\nrunz_max = 3\n{template}"), "explore.runz_max: is not a key of [explore]"),
        (format!("[explore]\nvariants = [\"nope\"]\n{template}"), "\"nope\" is not a variant"),
        (format!("[explore]\nruns_max = 0\n{template}"), "explore.runs_max: 0 is outside 1..=1000000"),
        ("[explore]\nruns_max = 5\n".to_owned(), "explore: varies nothing"),
        (
            "[explore.faults.server]\ntarget = \"redis\"\nkind = \"pause\"\nat = { min = \"5s\", max = \"1s\" }\n".to_owned(),
            "explore.faults.server.at: the range is empty",
        ),
        (
            "[explore.faults.server]\ntarget = \"redis\"\nkind = \"kill\"\nat = { min = \"1s\", max = \"5s\" }\nduration = { min = \"1s\", max = \"2s\" }\n".to_owned(),
            "explore.faults.server.duration: `kill` happens at one instant",
        ),
        (
            "[explore.faults.server]\ntarget = \"redis\"\nat = { min = \"1s\", max = \"5s\" }\n".to_owned(),
            "explore.faults.server: needs a `kind`",
        ),
        (
            format!("{template}[explore.params]\n\"loads.steady.count\" = {{ min = 1, max = 9 }}\n"),
            "`loads.steady.count` is not a key the file writes",
        ),
    ];
    for (index, (explore_table, expected)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{index}.toml"));
        std::fs::write(&file, format!("{head}{explore_table}")).unwrap();
        let output = outagelab(&["explore", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{explore_table}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{explore_table}\n{stderr}\nnot {expected}"
        );
        assert!(stderr.contains(&format!("bad{index}.toml:")), "{stderr}");
    }
    // A template the file refuses (a target it does not have), before anything runs.
    let file = dir.join("refused.toml");
    let refused = template.replace("target = \"redis\"", "target = \"nope\"");
    std::fs::write(&file, format!("{head}{refused}")).unwrap();
    let output = outagelab(&["explore", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("explore.faults.server: a pause fault on nope at 1 s: the file refuses it"),
        "{stderr}"
    );
    // A range end the file refuses (a start past the horizon), named as the drawn fault, not
    // as a line past the end of the file.
    let file = dir.join("late.toml");
    let late = template.replace("max = \"15s\"", "max = \"10m\"");
    std::fs::write(&file, format!("{head}{late}")).unwrap();
    let output = outagelab(&["explore", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("a pause fault on redis at 600 s: the file refuses it")
            && stderr.contains("(a drawn fault): faults.explored-1.at: starts at 600s"),
        "{stderr}"
    );
    // A parameter a chosen variant's patch sets.
    let file = dir.join("patched.toml");
    let patched = head.replace(
        "budgets = { reconnect = \"never\" } } }",
        "budgets = { reconnect = \"never\" } }, loads = { steady = { rate = 100 } } }",
    );
    std::fs::write(
        &file,
        format!("{patched}{template}[explore.params]\n\"loads.steady.rate\" = {{ min = 100, max = 900 }}\n"),
    )
    .unwrap();
    let output = outagelab(&["explore", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("sets it in its patch"), "{stderr}");
    // A file without [explore].
    let output = outagelab(&["explore", "scenarios/quick-start.toml"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has no [explore] table"), "{stderr}");
}

/// Each claim's line in explore's summary, `variant "...": what: N of M schedules`, in order.
fn claim_counts(stdout: &str) -> Vec<String> {
    let mut claims: Vec<String> = (stdout.lines())
        .filter_map(|line| line.strip_prefix("  broke "))
        .map(str::to_owned)
        .collect();
    claims.sort();
    claims
}

/// Issue 29: a design with two flaws. OnceCell never reconnects either connection and
/// claims each fails open at most 3,500 times: a server fault breaks both claims, a network
/// fault on one connection breaks only its own. Every schedule is judged against both
/// claims, so written in either order they report the same counts and both findings, each
/// shrunk on its own (when a schedule was tallied only under its first failed claim, the
/// second one's count depended on which came first).
#[test]
fn two_flaws_are_counted_and_found_the_same_in_either_claim_order() {
    let dir = scratch("explore-claim-order");
    let written = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED))
        .unwrap()
        .replace("runs_max = 300", "runs_max = 40\nshrink_runs_max = 12");
    let claims = [
        "\"connections.budgets.fail_open <= 3500\"",
        "\"connections.cache.fail_open <= 3500\"",
    ];
    let in_order = format!("expect = [{}, {}]", claims[0], claims[1]);
    let swapped = format!("expect = [{}, {}]", claims[1], claims[0]);
    let once_cell = "reconnect = \"never\" } } }\n";
    assert!(written.contains(&format!("{once_cell}{in_order}")));
    let mut outputs = Vec::new();
    for (name, text) in [
        ("in-order", written.clone()),
        (
            "swapped",
            written.replace(
                &format!("{once_cell}{in_order}"),
                &format!("{once_cell}{swapped}"),
            ),
        ),
    ] {
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(&file, text).unwrap();
        let out = dir.join(name);
        let (code, stdout) = explore(&[file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{stdout}");
        outputs.push(stdout);
    }
    let counts = claim_counts(&outputs[0]);
    assert_eq!(counts, claim_counts(&outputs[1]), "{outputs:#?}");
    let once_cell_counts: Vec<u64> = (counts.iter())
        .filter(|line| line.starts_with("variant \"OnceCell\""))
        .map(|line| {
            let of = line.rsplit(": ").next().unwrap();
            of.split(' ').next().unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(once_cell_counts.len(), 2, "{counts:#?}");
    // Both claims broke, and neither only where the other held.
    assert!(once_cell_counts.iter().all(|&n| n > 0), "{counts:#?}");
    for stdout in &outputs {
        for claim in ["budgets", "cache"] {
            let headline = format!(
                "variant \"OnceCell\": expectation failed: connections.{claim}.fail_open <= 3500"
            );
            let (_, block) = finding_with(stdout, &headline);
            assert!(block.contains("shrunk in "), "{block}");
        }
    }
}

/// Issue 29, point 4: "what blob size breaks us". A step's value size is drawn as a
/// parameter by the address a variant's patch uses (`flows.upload.steps.0.redis.value`), and
/// so is a connection's bandwidth: at 100 MiB/s with a 50 ms timeout, a SET of about 5 MiB
/// or more times out. The shrunk reproducer names the size, and `run` fails on it.
const BLOB_SIZE: &str = r#"[scenario]
name = "blob size"
seed = 1

[servers.redis]

[connections.c]
server = "redis"
command_timeout = "50ms"
bandwidth = "100MiB/s"

[keys.blob]

[flows.upload]
steps = [{ redis = { command = "SET", connection = "c", key = "blob", value = "1KiB" }, on_error = "fail" }]

[loads.uploads]
flow = "upload"
arrivals = "even"
rate = 10
count = 10

[[variant]]
name = "uploads"
expect = ["outcomes.timeout == 0"]

[explore]
runs_max = 12

[explore.params]
"flows.upload.steps.0.redis.value" = { min = "1KiB", max = "16MiB" }
"connections.c.bandwidth" = { min = "50MiB/s", max = "200MiB/s" }
"#;

#[test]
fn a_value_size_inside_a_step_and_a_bandwidth_are_drawn_and_shrunk() {
    let dir = scratch("explore-blob-size");
    let file = dir.join("blob.toml");
    std::fs::write(&file, BLOB_SIZE).unwrap();
    common::succeed(&["run", file.to_str().unwrap()]);
    let out = dir.join("found");
    let (code, stdout) = explore(&[file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}");
    let (number, block) = finding_with(
        &stdout,
        "variant \"uploads\": expectation failed: outcomes.timeout == 0",
    );
    let shrunk = block.lines().find(|l| l.contains("shrunk in")).unwrap();
    // Both shown in their units; the size bisected toward the file's to a few MiB.
    let size = (shrunk.split("flows.upload.steps.0.redis.value = ").nth(1))
        .unwrap_or_else(|| panic!("{shrunk}"));
    let mib: f64 = (size.strip_suffix(" MiB").and_then(|mib| mib.parse().ok()))
        .unwrap_or_else(|| panic!("{shrunk}"));
    assert!((2.0..8.0).contains(&mib), "{shrunk}");
    // The reproducer writes the size where the step has it, in bytes.
    let reproducer = out.join(format!("finding-{number}.toml"));
    let text = std::fs::read_to_string(&reproducer).unwrap();
    assert!(text.contains("key = \"blob\", value = \""), "{text}");
    assert!(!text.contains("value = \"1KiB\""), "{text}");
    let ran = outagelab(&["run", reproducer.to_str().unwrap()]);
    assert_eq!(
        ran.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
    // A key the file does not write is refused where [explore.params] names it.
    let missing = BLOB_SIZE.replace(
        "\"connections.c.bandwidth\" = {",
        "\"flows.upload.steps.1.redis.value\" = {",
    );
    std::fs::write(&file, missing).unwrap();
    let refused = outagelab(&["validate", file.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "blob.toml:32:38: explore.params.\"flows.upload.steps.1.redis.value\": \
             `flows.upload.steps.1.redis.value` is not a key the file writes"
        ),
        "{stderr}"
    );
}

/// Two loads meet one bulkhead permit at the same instants, and the file claims load `a` is
/// never shed: true under the fixed rule (its arrivals were scheduled first), an accident of
/// order. With `ties = "shuffled"` explore finds it and the reproducer fails under `run`.
const SWARM: &str = r#"[scenario]
name = "ties"
seed = 1

[bulkheads.one]
max_concurrent = 1
queue = 0

[flows.a]
steps = [{ work = "5ms", bulkhead = "one" }]

[flows.b]
steps = [{ work = "5ms", bulkhead = "one" }]

[loads.a]
flow = "a"
arrivals = "even"
rate = 100
duration = "1s"

[loads.b]
flow = "b"
arrivals = "even"
rate = 100
duration = "1s"

[[variant]]
name = "first come"
expect = ["flows.a.outcomes.shed == 0"]

[explore]
seeds = "1..100"
runs_max = 10
ties = "shuffled"
"#;

#[test]
fn a_design_that_holds_only_by_an_accident_of_same_instant_order_is_found() {
    let dir = scratch("explore-ties");
    let file = dir.join("swarm.toml");
    std::fs::write(&file, SWARM).unwrap();
    // As written, under the fixed rule, the claim holds.
    common::succeed(&["run", file.to_str().unwrap()]);
    let out = dir.join("found");
    let (code, stdout) = explore(&[file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(stdout.contains("held 0, broke 10"), "{stdout}");
    let block = finding(&stdout, 1);
    assert!(block.contains("no fault: ties shuffled"), "{block}");
    let reproducer = out.join("finding-1.toml");
    let text = std::fs::read_to_string(&reproducer).unwrap();
    assert!(text.ends_with("\n[run]\nties = \"shuffled\"\n"), "{text}");
    let ran = outagelab(&["run", reproducer.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL  first come: flows.a.outcomes.shed == 0"),
        "{stdout}"
    );
}

/// `[run] ties = "shuffled"`: the permit goes to either load, about evenly, in an order that
/// is the same for the same seed and differs across seeds.
#[test]
fn shuffled_ties_split_a_contended_permit_and_stay_deterministic_per_seed() {
    let dir = scratch("explore-ties-run");
    let file = dir.join("swarm.toml");
    let shuffled = SWARM.replace("[[variant]]", "[run]\nties = \"shuffled\"\n\n[[variant]]");
    std::fs::write(&file, shuffled).unwrap();
    let shed = |seed: &str, name: &str| -> (u64, u64, String) {
        let json = dir.join(name);
        outagelab(&[
            "run",
            file.to_str().unwrap(),
            "--seed",
            seed,
            "--json",
            json.to_str().unwrap(),
        ]);
        let report = common::read_report(&json);
        let flows = &report["variants"][0]["summary"]["flows"];
        let count = |flow: &str| flows[flow]["outcomes"]["shed"].as_u64().unwrap();
        (
            count("a"),
            count("b"),
            std::fs::read_to_string(&json).unwrap(),
        )
    };
    let (a, b, first) = shed("3", "one.json");
    // Every instant sheds exactly one of the two; neither load takes them all.
    assert_eq!(a + b, 100, "{a} + {b}");
    assert!((20..=80).contains(&a), "a shed {a} of 100");
    let (_, _, again) = shed("3", "two.json");
    assert_eq!(first, again, "the same seed gives the same bytes");
    let (other, _, _) = shed("4", "three.json");
    assert_ne!(a, other, "another seed draws another order");
}

/// An exploration cut into the pods of a Kubernetes Indexed Job (`--shard auto`), each a
/// process of its own, merges into exactly what one machine prints and writes.
#[test]
fn shards_of_an_indexed_job_merge_into_the_findings_of_one_machine() {
    let dir = scratch("explore-shards");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED))
        .unwrap()
        .replace("runs_max = 300", "runs_max = 40");
    let file = dir.join("explore.toml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    let one_out = dir.join("one");
    let (code, one) = explore(&[file, "--out", one_out.to_str().unwrap(), "--seed", "5"]);
    assert_eq!(code, Some(1), "{one}");
    let mut parts = Vec::new();
    for index in 0..3 {
        let part = dir.join(format!("part{index}.json"));
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_outagelab"))
            .args(["explore", file, "--seed", "5", "--quiet", "--shard", "auto"])
            .args(["--json", part.to_str().unwrap()])
            .env("JOB_COMPLETION_INDEX", index.to_string())
            .env("JOB_COMPLETIONS", "3")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert_eq!(output.status.code(), Some(0), "{stdout}");
        assert!(
            stdout.contains(&format!("shard {}/3: ", index + 1)),
            "{stdout}"
        );
        parts.push(part.to_str().unwrap().to_owned());
    }
    let merged_out = dir.join("merged");
    let merge = |parts: &[&str]| {
        let mut args = vec![file, "--out", merged_out.to_str().unwrap(), "--merge"];
        args.extend_from_slice(parts);
        explore(&args)
    };
    let (code, merged) = merge(&[&parts[2], &parts[0], &parts[1]]);
    assert_eq!(code, Some(1), "{merged}");
    // The same lines, but for where the reproducers were written.
    let merged = merged.replace(merged_out.to_str().unwrap(), one_out.to_str().unwrap());
    assert_eq!(merged, one);
    for n in 1..=2 {
        let name = format!("finding-{n}.toml");
        let a = std::fs::read_to_string(one_out.join(&name)).unwrap();
        let b = std::fs::read_to_string(merged_out.join(&name)).unwrap();
        let b = b.replace(merged_out.to_str().unwrap(), one_out.to_str().unwrap());
        assert_eq!(a, b, "{name}");
    }
    // A shard that names no slice of its count is refused, not a panic.
    let forged = dir.join("forged.json");
    let text = std::fs::read_to_string(&parts[0])
        .unwrap()
        .replace("\"index\": 1,", "\"index\": 0,");
    std::fs::write(&forged, text).unwrap();
    let output = outagelab(&[
        "explore",
        file,
        "--merge",
        forged.to_str().unwrap(),
        &parts[1],
        &parts[2],
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is not one of 3 shards"), "{stderr}");
    // A shard missing, or given twice, is refused.
    for (given, message) in [
        (
            vec![parts[0].as_str(), parts[1].as_str()],
            "shard 3/3 is missing",
        ),
        (
            vec![parts[0].as_str(), parts[0].as_str(), parts[2].as_str()],
            "shard 1/3 is given twice",
        ),
    ] {
        let mut args = vec!["explore", file, "--merge"];
        args.extend(given);
        let output = outagelab(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(message), "{stderr}");
    }
}

/// Seed 000 explored: today breaks from an upload burst alone (no stall needed), shrunk to a
/// burst that the split connection with per-role breakers survives; the split design breaks
/// only with a stall of the Redis its locks live on, of at least its 2 s command timeout.
#[test]
fn seed_000_breaks_today_from_a_burst_and_the_split_design_only_from_a_long_stall() {
    let dir = scratch("explore-seed000");
    let out = dir.join("found");
    let (code, stdout) = explore(&[
        "scenarios/seed000-explore.toml",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{stdout}");
    let (today, block) = finding_with(&stdout, "variant \"today\": expectation failed");
    let shrunk = block.lines().find(|l| l.contains("shrunk in")).unwrap();
    assert!(
        shrunk.contains("no fault: loads.upload.count = "),
        "{shrunk}"
    );
    let count: u32 = shrunk.rsplit("= ").next().unwrap().trim().parse().unwrap();
    assert!((2..=400).contains(&count), "{shrunk}");
    // Under today's shrunk schedule, the split design holds and today fails.
    let ran = outagelab(&[
        "run",
        out.join(format!("finding-{today}.toml")).to_str().unwrap(),
    ]);
    let report = String::from_utf8_lossy(&ran.stdout);
    assert_eq!(ran.status.code(), Some(1), "{report}");
    assert!(
        report.contains("FAIL  today: http.share_5xx_percent <= 5"),
        "{report}"
    );
    assert!(
        !report.contains("FAIL  split + breaker per role"),
        "{report}"
    );
    // The split design's own finding needs a stall past the command timeout.
    let (_, block) = finding_with(&stdout, "variant \"split + breaker per role\"");
    let shrunk = block.lines().find(|l| l.contains("shrunk in")).unwrap();
    let seconds: f64 = shrunk
        .split(" for ")
        .nth(1)
        .and_then(|rest| rest.split(" s").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{shrunk}"));
    assert!(shrunk.contains("on redis") && seconds >= 2.0, "{shrunk}");
}

/// `objective = "max ..."`: the worst schedule by a summary metric is reported, refined
/// around (never worse than the worst drawn), written as `worst.toml`, whose run gives the
/// reported value; the same on any number of threads.
#[test]
fn the_worst_schedule_by_an_objective_is_refined_and_written() {
    let dir = scratch("explore-objective");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/seed000-explore.toml"),
    )
    .unwrap()
    .replace(
        "runs_max = 100",
        "runs_max = 24\nobjective = \"max http.window_5xx_ms\"\nrefine = 16",
    );
    let file = dir.join("objective.toml");
    std::fs::write(&file, text).unwrap();
    let out = dir.join("found");
    let run = |jobs: &str| {
        let (_, stdout) = explore(&[
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--jobs",
            jobs,
        ]);
        stdout
    };
    let stdout = run("1");
    assert_eq!(stdout, run("2"));
    let value_after = |marker: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| l.contains(marker))
            .unwrap_or_else(|| panic!("no {marker}: {stdout}"));
        let after = line.split(marker).nth(1).unwrap();
        after.split_whitespace().next().unwrap().parse().unwrap()
    };
    let drawn = value_after("worst by max http.window_5xx_ms: ");
    let refined = value_after("refined around it in 16 schedules: ");
    assert!(refined >= drawn, "{stdout}");
    // The written schedule gives the refined value.
    let json = dir.join("worst.json");
    outagelab(&[
        "run",
        out.join("worst.toml").to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let report = common::read_report(&json);
    let line = stdout
        .lines()
        .find(|l| l.contains("refined around"))
        .unwrap();
    let variant = line
        .split("(variant \"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let ran = (report["variants"].as_array().unwrap().iter())
        .find(|v| v["name"] == variant)
        .unwrap();
    let value = ran["summary"]["http"]["window_5xx_ms"].as_f64().unwrap();
    assert!((value - refined).abs() < 1e-3, "{value} vs {refined}");
    // Refining needs an objective, and an objective a metric the runs have.
    for (replace, expected) in [
        (
            "objective = \"max http.window_5xx_ms\"\n",
            "explore.refine: refines around the worst",
        ),
        ("max http.window_5xx_ms", "explore.objective: "),
    ] {
        let text = std::fs::read_to_string(&file).unwrap();
        let broken = if replace.starts_with("objective") {
            text.replace(replace, "")
        } else {
            text.replace(replace, "max http.nope")
        };
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, broken).unwrap();
        let output = outagelab(&["explore", bad.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}\nnot {expected}");
    }
}

/// `--time-max` stops the search between chunks of 256 schedules and says how many it judged;
/// `--runs` with that count gives exactly the same findings, on any machine.
#[test]
fn a_time_budget_stops_between_chunks_and_runs_reproduces_what_it_judged() {
    let dir = scratch("explore-time");
    let out = dir.join("found");
    let (_, stopped) = explore(&[
        BUNDLED,
        "--out",
        out.to_str().unwrap(),
        "--runs",
        "600",
        "--time-max",
        "1ns",
    ]);
    assert!(
        stopped.contains("--time-max stopped the search after 256 of 600 schedules: `--runs 256`"),
        "{stopped}"
    );
    let (_, again) = explore(&[BUNDLED, "--out", out.to_str().unwrap(), "--runs", "256"]);
    let without_note: String = stopped
        .lines()
        .filter(|l| !l.starts_with("(--time-max"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(without_note, again);
    assert!(again.contains(": 256 schedules of 1 fault"), "{again}");
}

/// An explored parameter may leave `[fit]`'s range: the postmortem file fits its pause's
/// duration in 500 ms to 4 s, and explore draws it at 5 to 8 s. The schedules run (nothing
/// refused), they break the incident variant's expectations, and `run` fails the written
/// reproducer the same way instead of refusing its `[fit]` table.
#[test]
fn an_explored_parameter_may_leave_the_range_fit_starts_in() {
    let dir = scratch("explore-past-fit");
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/postmortem-pause.toml"),
    )
    .unwrap();
    let file = dir.join("postmortem.toml");
    std::fs::write(
        &file,
        format!(
            "{text}\n[explore]\nvariants = [\"as it ran\"]\nruns_max = 3\nshrink_runs_max = 20\n\
             [explore.params]\n\"faults.pause.duration\" = {{ min = \"5s\", max = \"8s\" }}\n"
        ),
    )
    .unwrap();
    // The observed file, beside it.
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/postmortem-pause.observed.json"),
        dir.join("postmortem-pause.observed.json"),
    )
    .unwrap();
    let out = dir.join("found");
    let (code, stdout) = explore(&[file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}");
    assert!(
        stdout.contains("broke 3, refused by the file 0"),
        "{stdout}"
    );
    let reproducer = out.join("finding-1.toml");
    let run = outagelab(&["run", reproducer.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("expectation failed")
            || String::from_utf8_lossy(&run.stdout).contains("FAIL"),
        "{stderr}"
    );
}

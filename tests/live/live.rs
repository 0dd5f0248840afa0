//! `outagelab live`'s command line: what it refuses before touching a server (exit 2, the file,
//! the variant and the key named), with no server needed.

use crate::common;

use common::{outagelab, scratch};

#[test]
fn a_feature_a_live_run_cannot_do_is_refused_by_file_variant_and_key() {
    let dir = scratch("live-refusals");
    let file = dir.join("pending.toml");
    std::fs::write(
        &file,
        r#"[scenario]
name = "pending"

[servers.redis]

[connections.c]
server = "redis"
pending_max = 10

[keys.k]
count = 1

[flows.read]
steps = [{ redis = { command = "GET", connection = "c", key = "k" } }]

[loads.l]
flow = "read"
arrivals = "burst"
count = 1
"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    // Port 9 (discard) on loopback: nothing is sent, since the file is refused first.
    let output = outagelab(&["live", file, "--redis", "127.0.0.1:9"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{file}: variant \"base\": connections.c.pending_max: a client's request-queue \
             limit is not enforced by the live client"
        )),
        "{stderr}"
    );

    let output = outagelab(&[
        "live",
        "scenarios/closed-loop-pause.toml",
        "--redis",
        "127.0.0.1:9",
        "--variant",
        "closed loop",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--variant \"closed loop\": scenarios/closed-loop-pause.toml has no such variant (it has: \"closed loop, 50 callers\", \"open loop, same mean rate\")"),
        "{stderr}"
    );

    let output = outagelab(&[
        "live",
        "scenarios/closed-loop-pause.toml",
        "--redis",
        "127.0.0.1:9",
        "--horizon",
        "0s",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("--horizon: must be longer than zero")
    );
}

/// `compare` puts every number the two summaries share side by side, with a verdict: on
/// seed 001's forwarder file, the fail-opens and the reconnects; and a run with a longer cut
/// (`--set`) against the file's own says which of them moved, and which way.
#[test]
fn compare_puts_the_summaries_side_by_side_fail_opens_and_reconnects_included() {
    let dir = scratch("compare-summaries");
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let file = "scenarios/forwarder-outage.toml";
    assert_eq!(
        outagelab(&["run", file, "--json", a]).status.code(),
        Some(0)
    );
    let longer = "faults.network.duration=\"2s\"";
    // The file's expectations are for its own 1.2 s cut: the longer one fails some (exit 1),
    // and still writes its report.
    let output = outagelab(&["run", file, "--json", b, "--set", longer]);
    assert_eq!(output.status.code(), Some(1));
    let output = outagelab(&["compare", a, b]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    println!("{stdout}");
    assert!(stdout.contains("network cut: summaries ("), "{stdout}");
    let line = |metric: &str| -> Vec<String> {
        (stdout.lines())
            .find(|line| line.split_whitespace().next() == Some(metric))
            .unwrap_or_else(|| panic!("no row {metric}:\n{stdout}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // A cut 0.8 s longer: more requests fail open, and the reconnect that came after the
    // file's cut has not come by the end of the run.
    let fail_open = line("connections.cache.fail_open");
    assert_eq!(fail_open[4], "higher", "{fail_open:?}");
    assert!(fail_open[3].starts_with('+'), "{fail_open:?}");
    let reconnects = line("connections.cache.slot.reconnects");
    assert_eq!(reconnects[1..], ["1", "0", "-1", "lower"], "{reconnects:?}");
    // `--json -`: the comparison alone on standard output (the tables on standard error),
    // every shared number in it; `--plot -` refused, as it writes several files.
    let output = outagelab(&["compare", a, b, "--json", "-"]);
    assert_eq!(output.status.code(), Some(0));
    let written: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one document");
    let rows = written["variants"][0]["summary"].as_array().unwrap();
    let row = (rows.iter())
        .find(|row| row["metric"] == "connections.cache.fail_open")
        .expect("the fail-opens are in the JSON");
    assert_eq!(row["verdict"], "higher", "{row}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("summaries ("));
    let output = outagelab(&["compare", a, b, "--plot", "-"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--plot - is refused"));
}

/// `compare` of a run with itself: every difference is zero and the failure windows coincide;
/// with the buckets regrouped to 500 ms the window is the same time, coarser.
#[test]
fn a_report_compared_with_itself_differs_by_nothing() {
    let dir = scratch("compare-itself");
    let json = dir.join("sim.json");
    let json = json.to_str().unwrap();
    let output = outagelab(&["run", "scenarios/closed-loop-pause.toml", "--json", json]);
    assert_eq!(output.status.code(), Some(0));
    let plots = dir.join("charts");
    let comparison = dir.join("comparison.json");
    let output = outagelab(&[
        "compare",
        json,
        json,
        "--plot",
        plots.to_str().unwrap(),
        "--json",
        comparison.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    println!("{stdout}");
    // 150 timeouts in the closed loop, from 2.5 s to 3.6 s (the end of the bucket at 3.5 s).
    assert_eq!(
        row(&stdout, "closed loop, 50 callers"),
        [
            "150", "150", "2.5-3.6", "2.5-3.6", "+0 / +0", "0", "0.0", "0.0"
        ],
        "{stdout}"
    );
    for chart in ["compare.png", "compare.svg"] {
        assert!(plots.join(chart).is_file(), "{chart}");
    }
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&comparison).unwrap()).unwrap();
    assert_eq!(
        written["variants"][0]["window_shift_buckets"],
        serde_json::json!([0, 0])
    );

    let output = outagelab(&["compare", json, json, "--bucket-ms", "500"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        row(&stdout, "closed loop, 50 callers")[2..4],
        ["2.5-4.0", "2.5-4.0"],
        "{stdout}"
    );
    let output = outagelab(&["compare", json, json, "--bucket-ms", "150"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("150 ms is not a whole number of the reports' 100 ms buckets")
    );
    let output = outagelab(&["compare", json, "Cargo.toml"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("Cargo.toml: not a run report"));
    assert!(
        !stdout.contains("runner"),
        "a simulation has no runner: {stdout}"
    );

    // The same report as a live run whose runner woke late once: said under the table.
    let mut live: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    live["variants"][0]["runner"] = serde_json::json!({
        "wakes": 51, "late_wakes": 1, "worst_lateness_ms": 31.5, "worst_due_ms": 1.0,
    });
    let live_json = dir.join("late.json");
    std::fs::write(&live_json, live.to_string()).unwrap();
    let output = outagelab(&["compare", json, live_json.to_str().unwrap()]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "B's runner in closed loop, 50 callers: 1 of 51 timed wake-ups (arrivals, sends, \
             fault starts) came more than 10 ms late, the latest 31.5 ms late (due at 1.0 ms)"
        ),
        "{stdout}"
    );
}

/// The cells after the name of the table row that starts with `name` (cells are separated by
/// two spaces or more).
fn row(text: &str, name: &str) -> Vec<String> {
    let line = text
        .lines()
        .find(|line| line.starts_with(name))
        .unwrap_or_else(|| panic!("no row {name:?} in\n{text}"));
    line[name.len()..]
        .split("  ")
        .map(str::trim)
        .filter(|cell| !cell.is_empty())
        .map(str::to_owned)
        .collect()
}

/// A file for the exit-code tests below: 2 s of reads, two variants.
const TWO_VARIANTS: &str = r#"[scenario]
name = "exits"
[run]
horizon = "2s"
[servers.redis]
[connections.c]
server = "redis"
command_timeout = "100ms"
reconnect = "slot"
[keys.k]
count = 1
[flows.read]
steps = [{ redis = { command = "GET", connection = "c", key = "k" } }]
[loads.l]
flow = "read"
arrivals = "even"
rate = 20
duration = "2s"
[[variant]]
name = "first"
[[variant]]
name = "second"
"#;

/// `live`'s exit codes, as docs/commands.md gives them: an address without a port is a wrong
/// command line (2, nothing sent); a server that cannot be reached is 1, with a valid JSON
/// that lists every variant as not run and says why.
#[test]
fn a_bad_address_exits_2_and_an_unreachable_server_exits_1_with_its_report() {
    let dir = scratch("live-exits");
    let file = dir.join("exits.toml");
    std::fs::write(&file, TWO_VARIANTS).unwrap();
    let file = file.to_str().unwrap();
    let output = outagelab(&["live", file, "--redis", "notahost"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--redis: \"notahost\" has no port"),
        "{stderr}"
    );

    // A loopback port nothing listens on: connections are refused at once.
    let port = outagelab_live::testing::free_port().to_string();
    let json = dir.join("unreachable.json");
    let output = outagelab(&[
        "live",
        file,
        "--redis",
        &format!("127.0.0.1:{port}"),
        "--json",
        json.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("not run: the server could not be set up"),
        "{stderr}"
    );
    let report = common::read_report(&json);
    assert_eq!(report["variants"].as_array().unwrap().len(), 0);
    let not_run: Vec<&str> = (report["live"]["not_run"].as_array().unwrap().iter())
        .map(|not_run| not_run["name"].as_str().unwrap())
        .collect();
    assert_eq!(not_run, ["first", "second"]);
    assert_eq!(report["live"]["events"][0]["event"], "server_unreachable");
}

/// SIGINT of `outagelab live` itself, 0.8 s into a 2 s variant: it ends at once (exit 130)
/// and writes the JSON of what it measured, the variant `interrupted` and the next not run.
#[test]
fn sigint_ends_a_live_run_with_the_report_of_what_it_measured() {
    let Some(server) = outagelab_live::testing::RedisServer::start() else {
        return;
    };
    let dir = scratch("live-sigint");
    let file = dir.join("exits.toml");
    std::fs::write(&file, TWO_VARIANTS).unwrap();
    let json = dir.join("interrupted.json");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_outagelab"))
        .args(["live", file.to_str().unwrap(), "--redis", &server.address()])
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    // Once the first variant runs (its line on standard error), then 0.8 s more.
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
    assert!(line.starts_with("live 1/2: first"), "{line}");
    std::thread::sleep(std::time::Duration::from_millis(800));
    let sent = std::time::Instant::now();
    let status = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    // Bounded: the run ends within the grace; a run that did not would be killed below.
    let deadline = sent + std::time::Duration::from_secs(20);
    let exited = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let took = sent.elapsed();
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    let status = exited.unwrap_or_else(|| panic!("still running 20 s after SIGINT: {rest}"));
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("interrupted (SIGINT)"), "{rest}");
    let report = common::read_report(&json);
    assert_eq!(report["variants"][0]["verdict"], "interrupted");
    let end_ms = report["variants"][0]["end_ms"].as_f64().unwrap();
    assert!((500.0..2000.0).contains(&end_ms), "{end_ms}");
    assert_eq!(report["live"]["not_run"][0]["name"], "second");
    assert_eq!(report["live"]["interrupted"], true);
    println!("ended {took:?} after SIGINT");
    if outagelab_live::testing::timing_tests("that SIGINT ends a live run within the grace") {
        assert!(took < outagelab_live::run::GRACE, "{took:?}");
    }
}

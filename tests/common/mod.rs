//! What the command-line tests share: the binary, run from the checkout, and a scratch
//! directory per test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the `outagelab` binary with `args` from the checkout's root.
pub fn outagelab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_outagelab"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs")
}

/// A fresh directory under the target directory for this test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the binary with `args` and returns its standard output; fails the test, with its
/// standard error, unless it exits 0.
#[allow(dead_code, reason = "not every test binary needs a command to succeed")]
pub fn succeed(args: &[&str]) -> String {
    let output = outagelab(args);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// A report (`run --json`, `live --json`) read back.
#[allow(dead_code, reason = "not every test binary reads a report")]
pub fn read_report(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the report was written"))
        .expect("the report is JSON")
}

/// The variant named `name` of a report.
#[allow(dead_code, reason = "not every test binary reads a report")]
pub fn variant<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    (report["variants"]
        .as_array()
        .expect("a report has variants")
        .iter())
    .find(|variant| variant["name"] == name)
    .unwrap_or_else(|| panic!("no variant {name}"))
}

/// `file` simulated (`run`) and run live against the server at `address` (`live`), each with
/// `extra` arguments, their reports written in `dir` and read back: (simulated, live).
#[allow(dead_code, reason = "only the live test binaries run both")]
pub fn simulated_and_live(
    file: &str,
    address: &str,
    dir: &Path,
    extra: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let (simulated, live) = (dir.join("simulated.json"), dir.join("live.json"));
    let run = ["run", file, "--json", simulated.to_str().unwrap()];
    succeed(&[&run[..], extra].concat());
    let live_args = [
        "live",
        file,
        "--redis",
        address,
        "--json",
        live.to_str().unwrap(),
    ];
    succeed(&[&live_args[..], extra].concat());
    (read_report(&simulated), read_report(&live))
}

/// A Redis pause, `pause` long from 2 s, under a Poisson load of `rate` GETs a second for
/// `seconds`, on seed 3: an incident to observe and fit.
#[allow(dead_code, reason = "only the observed-series tests use it")]
pub fn pause_incident(pause: &str, rate: u32, seconds: u32) -> String {
    format!(
        r#"[scenario]
name = "incident"
seed = 3

[servers.redis]

[connections.cache]
server = "redis"

[keys.k]

[flows.read]
steps = [{{ redis = {{ command = "GET", connection = "cache", key = "k" }} }}]

[loads.steady]
flow = "read"
arrivals = "poisson"
rate = {rate}
duration = "{seconds}s"

[faults.pause]
target = "redis"
kind = "pause"
at = "2s"
duration = "{pause}"
"#
    )
}

/// The first variant's ok requests per second and most requests in flight over each of the
/// first `seconds` seconds (ten 100 ms buckets), as the `timestamp,series,value` rows of an
/// observed CSV (`requests_ok`, `in_flight`) from 2024-12-03T10:00:00Z, each value times
/// `scale`.
#[allow(dead_code, reason = "only the observed-series tests use it")]
pub fn per_second_csv(report: &serde_json::Value, seconds: usize, scale: f64) -> String {
    use std::fmt::Write as _;
    let series = &report["variants"][0]["series"];
    assert_eq!(series["bucket_ms"], 100.0);
    let ok: Vec<u64> = serde_json::from_value(series["outcomes"]["ok"].clone()).unwrap();
    let in_flight: Vec<u64> =
        serde_json::from_value(series["gauges_max"]["in_flight"].clone()).unwrap();
    let mut csv = String::from("timestamp,series,value\n");
    for second in 0..seconds {
        let window = second * 10..(second + 1) * 10;
        let at = 1_733_220_000 + second as u64 + 1;
        let ok_per_s: u64 = ok[window.clone()].iter().sum();
        let most = in_flight[window].iter().max().unwrap();
        writeln!(csv, "{at},requests_ok,{}", ok_per_s as f64 * scale).unwrap();
        writeln!(csv, "{at},in_flight,{}", *most as f64 * scale).unwrap();
    }
    csv
}

/// `[observed]` reading [`per_second_csv`]'s rows from `incident.csv`: `served` as
/// `ok_per_s`, `waiting` as `in_flight`.
#[allow(dead_code, reason = "only the observed-series tests use it")]
pub const OBSERVED_PER_SECOND: &str = r#"
[observed]
file = "incident.csv"
start = "2024-12-03T10:00:00Z"

[observed.series.served]
name = "requests_ok"
metric = "ok_per_s"

[observed.series.waiting]
name = "in_flight"
metric = "in_flight"
"#;

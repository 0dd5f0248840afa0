//! `[observed]`: an incident's measured series beside the run. A run compared with its own
//! series, exported as an observed file, differs by nothing; a file that differs is scored by
//! how much and where; every bad reference is refused at its key.

use std::path::Path;

use crate::common;

use common::{outagelab, read_report, scratch, succeed};

/// A Redis pause under a steady load: requests pile up for a second, then drain.
fn scenario() -> String {
    common::pause_incident("1s", 200, 6)
}

fn own_series(report: &serde_json::Value, scale: f64) -> String {
    common::per_second_csv(report, 6, scale)
}

use common::OBSERVED_PER_SECOND as OBSERVED;

fn run_with(dir: &Path, observed_csv: &str) -> serde_json::Value {
    std::fs::write(dir.join("incident.csv"), observed_csv).unwrap();
    let file = dir.join("scenario.toml");
    std::fs::write(&file, format!("{}{OBSERVED}", scenario())).unwrap();
    let json = dir.join("with.json");
    let page = dir.join("page.html");
    let stdout = succeed(&[
        "run",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--report",
        page.to_str().unwrap(),
    ]);
    // The review page has the scores and the chart of observed against simulated.
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.contains("<h3>Simulated against what was observed</h3>"));
    assert!(page.contains("<figure id=\"chart-observed\">"));
    assert!(
        stdout.contains("simulated against observed (time 0 is 2024-12-03T10:00:00Z)"),
        "{stdout}"
    );
    read_report(&json)
}

fn bare_run(dir: &Path) -> serde_json::Value {
    let file = dir.join("bare.toml");
    std::fs::write(&file, scenario()).unwrap();
    let json = dir.join("bare.json");
    succeed(&[
        "run",
        file.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    read_report(&json)
}

#[test]
fn a_run_compared_with_its_own_series_differs_by_nothing() {
    let dir = scratch("observed-own");
    let bare = bare_run(&dir);
    assert!(bare.get("observed").is_none(), "no [observed], no block");
    let report = run_with(&dir, &own_series(&bare, 1.0));
    let observed = &report["observed"];
    assert_eq!(observed["start_unix_ms"], 1_733_220_000_000_i64);
    for series in observed["series"].as_array().unwrap() {
        let fit = &series["variants"][0];
        assert_eq!(fit["compared"], 6, "{series}");
        assert_eq!(fit["rmse"], 0.0, "{series}");
        assert_eq!(series["at_ms"][0], 1000.0);
    }
    // The pause shows: requests wait in flight during it, far more than in a quiet second.
    let waiting = &observed["series"][1];
    assert_eq!(waiting["name"], "waiting");
    let observed_in_flight: Vec<f64> = serde_json::from_value(waiting["observed"].clone()).unwrap();
    assert!(
        observed_in_flight[2] > 10.0 * observed_in_flight[0].max(1.0),
        "{observed_in_flight:?}"
    );
    // Adding [observed] changes nothing of the run itself.
    assert_eq!(report["variants"], bare["variants"]);
}

#[test]
fn a_file_that_differs_is_scored_by_how_much_and_where() {
    let dir = scratch("observed-doubled");
    let bare = bare_run(&dir);
    let report = run_with(&dir, &own_series(&bare, 2.0));
    let served = &report["observed"]["series"][0];
    assert_eq!(served["metric"], "ok_per_s");
    let observed: Vec<f64> = serde_json::from_value(served["observed"].clone()).unwrap();
    let fit = &served["variants"][0];
    // Simulated is half of each observed value: the difference is -observed/2.
    let squares: f64 = observed.iter().map(|o| (o / 2.0) * (o / 2.0)).sum();
    let rmse = fit["rmse"].as_f64().unwrap();
    assert!((rmse - (squares / 6.0).sqrt()).abs() < 1e-9, "{rmse}");
    let (largest_at, largest) = observed
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .unwrap();
    assert_eq!(fit["largest_difference"].as_f64().unwrap(), -largest / 2.0);
    assert_eq!(
        fit["largest_difference_at_ms"],
        (largest_at as f64 + 1.0) * 1000.0
    );
}

#[test]
fn bad_references_and_bad_files_are_refused_at_their_key() {
    let dir = scratch("observed-bad");
    std::fs::write(
        dir.join("incident.csv"),
        "timestamp,series,value\n1,requests_ok,5\n2,requests_ok,5\n3,requests_ok,NaN\n",
    )
    .unwrap();
    std::fs::write(dir.join("good.csv"), "1,requests_ok,5\n2,requests_ok,6\n").unwrap();
    let cases = [
        (
            "[observed]\nfile = \"missing.csv\"\n[observed.series.a]\nmetric = \"ok_per_s\"\n",
            "observed.file: cannot read",
        ),
        (
            "[observed]\nfile = \"incident.csv\"\n[observed.series.a]\nmetric = \"ok_per_s\"\n",
            "incident.csv:4:15: the value NaN is not a finite number",
        ),
        (
            "[observed]\nfile = \"good.csv\"\n[observed.series.a]\nmetric = \"okay_per_s\"\n",
            "observed.series.a.metric: `okay_per_s` is not a metric",
        ),
        (
            "[observed]\nfile = \"good.csv\"\n[observed.series.a]\nmetric = \"databases.pg.concurrency\"\n",
            "observed.series.a.metric: no variant's run has `databases.pg.concurrency`",
        ),
        (
            "[observed]\nfile = \"good.csv\"\n[observed.series.a]\nname = \"errors\"\nmetric = \"ok_per_s\"\n",
            "observed.series.a: ",
        ),
        (
            "[observed]\nfile = \"good.csv\"\nstart = \"noon\"\n[observed.series.a]\nmetric = \"ok_per_s\"\n",
            "observed.start: `noon` is neither",
        ),
        (
            "[observed]\nfile = \"good.csv\"\n[observed.series]\n",
            "observed.series: names no series",
        ),
        (
            "[observed]\nfile = \"good.csv\"\nstep = 1\n[observed.series.a]\nmetric = \"ok_per_s\"\n",
            "observed.step",
        ),
    ];
    for (index, (observed, expected)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{index}.toml"));
        std::fs::write(&file, format!("{}{observed}", scenario())).unwrap();
        let output = outagelab(&["validate", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{observed}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{observed}\n{stderr}\nnot {expected}"
        );
        // Every message names the scenario file, line and column.
        assert!(stderr.contains(&format!("bad{index}.toml:")), "{stderr}");
    }
}

/// A load that follows an observed request-rate series (`rate_file` in Prometheus's format):
/// a run's own requests per second, exported with `--prometheus`, drive a second run that
/// sends as many requests, on the same curve.
#[test]
fn a_load_follows_an_observed_request_rate_series() {
    let dir = scratch("observed-rate");
    let ramp = "[scenario]\nname = \"ramp\"\n\n[flows.quick]\nsteps = [{ work = \"1us\" }]\n\n\
                [loads.users]\nflow = \"quick\"\narrivals = \"even\"\nrate = 0\n\
                stages = [{ duration = \"2s\", target = 400 }, { duration = \"1s\", target = 400 }]\n";
    let first = dir.join("ramp.toml");
    std::fs::write(&first, ramp).unwrap();
    let exported = dir.join("traffic.json");
    succeed(&[
        "run",
        first.to_str().unwrap(),
        "--prometheus",
        exported.to_str().unwrap(),
    ]);
    let follow = |series: &str| {
        format!(
            "[scenario]\nname = \"replay\"\n\n[flows.quick]\nsteps = [{{ work = \"1us\" }}]\n\n\
             [loads.users]\nflow = \"quick\"\narrivals = \"even\"\nrate_file = \"traffic.json\"\n{series}"
        )
    };
    let replay = dir.join("replay.toml");
    std::fs::write(
        &replay,
        follow("rate_series = 'outagelab_requests_per_s{variant=\"base\"}'\n"),
    )
    .unwrap();
    let json = dir.join("replay.json");
    succeed(&[
        "run",
        replay.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    // 0 -> 400/s over 2 s and 400/s for 1 s: 400 + 400 requests. The replay follows the
    // exported buckets (their ends, linearly between): within a bucket's worth of the curve.
    let requests = read_report(&json)["variants"][0]["summary"]["requests"]
        .as_u64()
        .unwrap();
    assert!((760..=800).contains(&requests), "{requests}");
    // The file has a series per metric: the load must say which.
    for (series, expected) in [
        (
            "",
            "has 4 series: choose the request rate with `rate_series`",
        ),
        (
            "rate_series = \"nothing\"\n",
            "has no series `nothing`; it has `outagelab_requests_per_s{variant=\"base\"}`",
        ),
    ] {
        std::fs::write(&replay, follow(series)).unwrap();
        let output = outagelab(&["validate", replay.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("loads.users.rate_file"), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}\nnot {expected}");
    }
}

/// Prometheus stamps samples to the millisecond: a run whose buckets are not whole
/// milliseconds is refused by `--prometheus` with the reason (exit 2, as any output it cannot
/// write).
#[test]
fn prometheus_export_refuses_buckets_that_are_not_whole_milliseconds() {
    let dir = scratch("observed-prom-bucket");
    let file = dir.join("fine.toml");
    std::fs::write(
        &file,
        format!("{}\n[metrics]\nbucket = \"1500us\"\n", scenario()),
    )
    .unwrap();
    let prom = dir.join("out.json");
    let output = outagelab(&[
        "run",
        file.to_str().unwrap(),
        "--prometheus",
        prom.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("buckets of 1.5 ms: Prometheus stamps samples to the millisecond"),
        "{stderr}"
    );
}

/// `start` may be Unix seconds written as a TOML float; it is read to the millisecond.
#[test]
fn a_start_in_unix_seconds_with_a_fraction_is_read() {
    let dir = scratch("observed-float-start");
    std::fs::write(dir.join("good.csv"), "1,requests_ok,5\n2,requests_ok,6\n").unwrap();
    let file = dir.join("float.toml");
    let observed = "[observed]\nfile = \"good.csv\"\nstart = 1733220000.5\n\
                    [observed.series.a]\nname = \"requests_ok\"\nmetric = \"ok_per_s\"\n";
    std::fs::write(&file, format!("{}{observed}", scenario())).unwrap();
    let stdout = succeed(&["run", file.to_str().unwrap()]);
    assert!(
        stdout.contains("time 0 is 2024-12-03T10:00:00.5Z"),
        "{stdout}"
    );
}

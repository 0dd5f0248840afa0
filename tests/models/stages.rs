//! Loads whose rate changes stage by stage (k6's ramping arrival rate), from the file to the
//! report: the arrivals follow the curve, by hand.

use std::path::Path;

use outagelab_report::VariantReport;

use crate::common;

fn run(load: &str) -> VariantReport {
    let text = format!(
        "[scenario]\nname = \"stages\"\n\n[flows.quick]\nsteps = [{{ work = \"1us\" }}]\n\n\
         [loads.users]\nflow = \"quick\"\n{load}"
    );
    let file = outagelab_scenario_file::parse(&text, Path::new("stages.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    outagelab_sim::run(&file.variants[0].scenario).unwrap()
}

#[test]
fn an_even_ramp_sends_the_area_under_its_curve_bucket_by_bucket() {
    // 0 -> 1000/s over 1 s: Λ(t) = 500·t², so request i arrives at sqrt(i / 500) s and the
    // 100 ms bucket k holds 500·((k+1)² − k²)/100 = 5·(2k + 1) of them: 5, 15, ..., 95.
    let report = run("arrivals = \"even\"\nstages = [{ duration = \"1s\", target = 1000 }]\n");
    assert_eq!(report.summary.requests, 500);
    let ok = &report.series.outcomes["ok"];
    let expected: Vec<u64> = (0..10).map(|k| 5 * (2 * k + 1)).collect();
    assert_eq!(ok[..10], expected[..]);
    assert!(ok[10..].iter().all(|&n| n == 0));
}

#[test]
fn a_poisson_load_holds_ramps_and_stops_with_its_last_stage() {
    // 100/s for 1 s, a ramp to 500/s over 1 s, 500/s for 1 s: 100 + 300 + 500 requests on
    // average; none after 3 s. Over 10 seeds the mean is within 3% of 900 and each second
    // holds what its stage does.
    let mut per_second = [0u64; 4];
    for seed in 1..=10 {
        let text = format!(
            "[scenario]\nname = \"stages\"\nseed = {seed}\n\n[flows.quick]\n\
             steps = [{{ work = \"1us\" }}]\n\n[loads.users]\nflow = \"quick\"\n\
             arrivals = \"poisson\"\nrate = 100\nstages = [\n  {{ duration = \"1s\", target = 100 }},\n  \
             {{ duration = \"1s\", target = 500 }},\n  {{ duration = \"1s\", target = 500 }},\n]\n"
        );
        let file = outagelab_scenario_file::parse(&text, Path::new("stages.toml")).unwrap();
        let report = outagelab_sim::run(&file.variants[0].scenario).unwrap();
        for (bucket, n) in report.series.outcomes["ok"].iter().enumerate() {
            per_second[bucket / 10] += n;
        }
    }
    let mean = per_second.map(|n| n as f64 / 10.0);
    assert!((mean[0] - 100.0).abs() < 10.0, "{mean:?}");
    assert!((mean[1] - 300.0).abs() < 18.0, "{mean:?}");
    assert!((mean[2] - 500.0).abs() < 22.0, "{mean:?}");
    assert_eq!(mean[3], 0.0, "nothing after the last stage");
}

#[test]
fn a_staged_load_is_checked_key_by_key() {
    let cases = [
        (
            "arrivals = \"even\"\nrate = 10\nduration = \"1s\"\nstages = [{ duration = \"1s\", target = 5 }]\n",
            "loads.users.duration",
            "ends with its last stage",
        ),
        (
            "arrivals = \"poisson\"\nstages = []\n",
            "loads.users.stages",
            "at least one stage",
        ),
        (
            "arrivals = \"even\"\nstages = [{ duration = \"1s\", target = 5 }, { duration = \"0s\", target = 5 }]\n",
            "loads.users.stages[1].duration",
            "longer than zero",
        ),
        (
            "arrivals = \"even\"\nstages = [{ duration = \"1s\", target = -5 }]\n",
            "loads.users.stages[0].target",
            "zero or more",
        ),
        (
            "arrivals = \"even\"\nstages = [{ duration = \"1s\", target = nan }]\n",
            "loads.users.stages[0].target",
            "zero or more",
        ),
        (
            "arrivals = \"even\"\nstages = [{ duration = \"1s\", target = 0 }]\n",
            "loads.users.stages",
            "would send nothing",
        ),
        (
            "arrivals = \"burst\"\ncount = 3\nstages = [{ duration = \"1s\", target = 5 }]\n",
            "loads.users.stages",
            "even or Poisson",
        ),
        (
            "arrivals = \"even\"\nstages = [{ duration = \"1s\", target = 5, hold = true }]\n",
            "hold",
            "unknown field",
        ),
        (
            "arrivals = \"even\"\nstages = [{ duration = \"3000000h\", target = 5 }, { duration = \"3000000h\", target = 5 }]\n",
            "loads.users.stages[1].duration",
            "latest instant",
        ),
    ];
    for (load, key, reason) in cases {
        let text = format!(
            "[scenario]\nname = \"stages\"\n\n[flows.quick]\nsteps = [{{ work = \"1us\" }}]\n\n\
             [loads.users]\nflow = \"quick\"\n{load}"
        );
        let error = match outagelab_scenario_file::parse(&text, Path::new("stages.toml")) {
            Ok(_) => panic!("accepted: {load}"),
            Err(error) => error.to_string(),
        };
        assert!(
            error.contains(key) && error.contains(reason) && error.contains("stages.toml:"),
            "{load}\n-> {error}"
        );
    }
}

#[test]
fn a_rate_file_replays_an_incidents_traffic_through_the_command_line() {
    // Unix timestamps 10 s apart: 100/s, up to 300/s, down to 0: the area under the rows'
    // curve, 2,000 + 1,500 = 3,500 requests, evenly.
    let dir = common::scratch("rate-file");
    std::fs::write(
        dir.join("traffic.csv"),
        "# from the incident's dashboard\ntime,rate\n1733220000,100\n1733220010,300\n\
         1733220020,0\n",
    )
    .unwrap();
    let scenario = dir.join("incident.toml");
    std::fs::write(
        &scenario,
        "[scenario]\nname = \"incident\"\n\n[flows.quick]\nsteps = [{ work = \"1us\" }]\n\n\
         [loads.users]\nflow = \"quick\"\narrivals = \"even\"\nrate_file = \"traffic.csv\"\n",
    )
    .unwrap();
    let json = dir.join("report.json");
    // Run from elsewhere: the file is found beside the scenario.
    common::succeed(&[
        "run",
        scenario.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ]);
    let report = common::read_report(&json);
    let summary = &report["variants"][0]["summary"];
    assert_eq!(summary["requests"], 3500);
    // A row out of order is named with the rate file's own line and column, at the key.
    std::fs::write(dir.join("traffic.csv"), "0,100\n10,300\n10,0\n").unwrap();
    let output = common::outagelab(&["run", scenario.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "bad input");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("incident.toml:10:13: loads.users.rate_file: ")
            && stderr.contains("traffic.csv:3:1: the time 10 is not after the row before's"),
        "{stderr}"
    );
    // `rate_series` chooses among a Prometheus file's series: not a CSV's, and not alone.
    let text = std::fs::read_to_string(&scenario).unwrap();
    for (extra, expected) in [
        (
            "rate_series = \"x\"\n",
            "loads.users.rate_series: a CSV of `time,rate` rows is one series",
        ),
        (
            "",
            "loads.users.rate_series: chooses the series of a Prometheus `rate_file`: give one",
        ),
    ] {
        let body = if extra.is_empty() {
            text.replace(
                "rate_file = \"traffic.csv\"\n",
                "rate = 5\nrate_series = \"x\"\n",
            )
        } else {
            format!("{text}{extra}")
        };
        std::fs::write(&scenario, body).unwrap();
        std::fs::write(dir.join("traffic.csv"), "0,100\n10,300\n").unwrap();
        let output = common::outagelab(&["validate", scenario.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}\nnot {expected}");
    }
}

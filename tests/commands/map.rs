//! `outagelab map`: the bundled retry storm's metastability map puts the boundary where seed
//! 003 says (unbudgeted retries stop recovering where a retry budget still does), the map is
//! the same on any number of threads, and bad `[map]` tables are refused at their key.

use std::path::Path;

use crate::common;

use common::{outagelab, read_report, scratch, succeed};

const BUNDLED: &str = "scenarios/retry-storm-map.toml";

/// The phase of every seed at (trigger, load) for `variant` in a `--json` map: the seeds'
/// times to recover.
fn point(map: &serde_json::Value, variant: &str, trigger: &str, load: &str) -> Vec<Option<f64>> {
    let index = |axis: &str, value: &str| {
        (map[axis]["values"].as_array().unwrap().iter())
            .position(|v| v.as_str() == Some(value))
            .unwrap_or_else(|| panic!("{axis} has no {value}"))
    };
    let (t, l) = (index("trigger", trigger), index("load", load));
    let variant = (map["variants"].as_array().unwrap().iter())
        .find(|v| v["name"] == variant)
        .unwrap();
    let point = (variant["points"].as_array().unwrap().iter())
        .find(|p| p["trigger"] == t && p["load"] == l)
        .unwrap();
    serde_json::from_value(point["recovered_ms"].clone()).unwrap()
}

#[test]
fn a_retry_budget_moves_the_boundary_where_the_storm_stops_recovering() {
    let dir = scratch("map-storm");
    let json = dir.join("map.json");
    let plot = dir.join("plot");
    let stdout = succeed(&[
        "map",
        BUNDLED,
        "--json",
        json.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        stdout.contains("recovered = failed_per_s <= 10 for 2 s after `slowdown` ends"),
        "{stdout}"
    );
    let map = read_report(&json);
    // A slowdown of 1 s at 1400/s: without a budget the retries keep the database past
    // capacity to the horizon on every seed; with one it recovers on every seed, a few
    // seconds after the slowdown ends; without retries it recovers sooner still.
    let never = point(&map, "3 attempts", "\"1s\"", "1400");
    assert!(never.iter().all(Option::is_none), "{never:?}");
    let budget = point(&map, "3 attempts, 10% budget", "\"1s\"", "1400");
    assert!(
        budget.iter().all(|r| r.is_some_and(|ms| ms < 6000.0)),
        "{budget:?}"
    );
    let plain = point(&map, "no retries", "\"1s\"", "1400");
    let slowest = |times: &[Option<f64>]| times.iter().flatten().copied().fold(0.0, f64::max);
    assert!(
        slowest(&plain) < slowest(&budget),
        "{plain:?} vs {budget:?}"
    );
    // On the other side of the boundary: a 100 ms slowdown, from which all recover.
    for variant in ["no retries", "3 attempts", "3 attempts, 10% budget"] {
        let times = point(&map, variant, "\"100ms\"", "1400");
        assert!(times.iter().all(Option::is_some), "{variant}: {times:?}");
    }
    // And past the budget's edge too: 1800/s is beyond what a 10% budget saves.
    let past = point(&map, "3 attempts, 10% budget", "\"1s\"", "1800");
    assert!(past.iter().all(Option::is_none), "{past:?}");
    // The phase diagram is drawn.
    let svg = std::fs::read_to_string(plot.join("map.svg")).unwrap();
    assert!(svg.contains("3 attempts, 10% budget") && svg.contains("never"));
}

/// The bundled map cut to 2 triggers by 2 loads, written in `dir`.
fn small_map(dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED))
        .unwrap()
        .replace(
            "values = [\"100ms\", \"250ms\", \"500ms\", \"1s\", \"2s\", \"4s\"]",
            "values = [\"250ms\", \"1s\"]",
        )
        .replace(
            "values = [800, 1000, 1200, 1400, 1600, 1800]",
            "values = [1000, 1600]",
        );
    let file = dir.join("small.toml");
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn the_map_is_the_same_on_any_number_of_threads() {
    let dir = scratch("map-threads");
    let file = small_map(&dir);
    let run = |jobs: &str, name: &str| {
        let json = dir.join(name);
        let stdout = succeed(&[
            "map",
            file.to_str().unwrap(),
            "--jobs",
            jobs,
            "--quiet",
            "--json",
            json.to_str().unwrap(),
        ]);
        (stdout.replace(name, ""), std::fs::read(json).unwrap())
    };
    assert_eq!(run("1", "one.json"), run("2", "two.json"));
}

/// Three shards (given to `--merge` in any order) make the same table, JSON and charts as
/// one machine; parts of another map, a part given twice or a missing one are refused.
#[test]
fn shards_merged_make_the_same_map_as_one_machine() {
    let dir = scratch("map-shards");
    // Odd trigger lengths: times to recover that a float read back must keep to the last bit.
    let text = std::fs::read_to_string(small_map(&dir)).unwrap().replace(
        "values = [\"250ms\", \"1s\"]",
        "values = [\"123457us\", \"1001001us\"]",
    );
    let file = dir.join("odd.toml");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    let whole = dir.join("whole.json");
    let one = succeed(&[
        "map",
        file,
        "--quiet",
        "--json",
        whole.to_str().unwrap(),
        "--plot",
        dir.join("one").to_str().unwrap(),
    ]);
    let parts: Vec<String> = (1..=3)
        .map(|k| {
            let part = dir.join(format!("part-{k}.json"));
            let said = succeed(&[
                "map",
                file,
                "--quiet",
                "--shard",
                &format!("{k}/3"),
                "--json",
                part.to_str().unwrap(),
            ]);
            assert!(said.contains(&format!("shard {k}/3:")), "{said}");
            part.to_str().unwrap().to_owned()
        })
        .collect();
    let merged = dir.join("merged.json");
    let mut args = vec![
        "map",
        file,
        "--quiet",
        "--json",
        merged.to_str().unwrap(),
        "--plot",
    ];
    let plot = dir.join("merged");
    args.push(plot.to_str().unwrap());
    args.push("--merge");
    args.extend([parts[2].as_str(), parts[0].as_str(), parts[1].as_str()]);
    let joined = succeed(&args);
    let table = |stdout: &str| {
        (stdout.lines())
            .filter(|line| !line.starts_with("wrote "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(table(&joined), table(&one));
    assert_eq!(
        std::fs::read_to_string(&merged).unwrap(),
        std::fs::read_to_string(&whole).unwrap()
    );
    assert_eq!(
        std::fs::read(plot.join("map.svg")).unwrap(),
        std::fs::read(dir.join("one").join("map.svg")).unwrap()
    );
    let refused = |args: &[&str], expected: &str| {
        let output = outagelab(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{args:?}: {stderr}\nnot {expected}"
        );
    };
    refused(
        &["map", file, "--merge", &parts[0], &parts[1]],
        "shard 3/3 is missing",
    );
    refused(
        &["map", file, "--merge", &parts[0], &parts[0], &parts[1]],
        "shard 1/3 is given twice",
    );
    refused(
        &[
            "map",
            file,
            "--set",
            "databases.main.latency=\"20ms\"",
            "--merge",
            &parts[0],
            &parts[1],
            &parts[2],
        ],
        "is a shard of another map",
    );
    refused(&["map", file, "--merge", file], "not a map's shard");
    // A part edited by hand: a time to recover no run gives.
    let forged = dir.join("forged.json");
    let text = std::fs::read_to_string(&parts[0]).unwrap();
    let list = text.find("\"recovered_ms\": [").unwrap();
    let value = list
        + text[list..]
            .find(|c: char| c.is_ascii_digit() || c == 'n')
            .unwrap();
    let end = value + text[value..].find([',', '\n']).unwrap();
    std::fs::write(&forged, format!("{}-5.0{}", &text[..value], &text[end..])).unwrap();
    let forged = forged.to_str().unwrap();
    refused(
        &["map", file, "--merge", forged, &parts[1], &parts[2]],
        "holds -5 as a time to recover",
    );
}

#[test]
fn bad_map_tables_are_refused_at_their_key() {
    let dir = scratch("map-bad");
    let base =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED)).unwrap();
    let head = &base[..base.find("[map]").unwrap()];
    let trigger = "trigger = { key = \"faults.slowdown.duration\", values = [\"1s\"] }\n";
    let load = "load = { key = \"loads.base.rate\", values = [1000] }\n";
    let recovered = "recovered = { metric = \"failed_per_s\", at_most = 10, for = \"2s\" }\n";
    let map = |fault: &str, trigger: &str, load: &str, recovered: &str| {
        format!("[map]\nfault = \"{fault}\"\n{trigger}{load}{recovered}")
    };
    let cases = [
        (
            map("nope", trigger, load, recovered),
            "map.fault: `nope` is not a fault of the file",
        ),
        (
            map(
                "slowdown",
                &trigger.replace("slowdown.duration", "slowdown.length"),
                load,
                recovered,
            ),
            "map.trigger.key: `faults.slowdown.length` is not a key the file writes",
        ),
        (
            map(
                "slowdown",
                trigger,
                load,
                &recovered.replace("failed_per_s", "fails"),
            ),
            "map.recovered.metric: `fails` is not a metric",
        ),
        (
            map(
                "slowdown",
                trigger,
                load,
                &recovered.replace("\"2s\"", "\"0s\""),
            ),
            "map.recovered.for: longer than zero",
        ),
        (map("slowdown", trigger, load, ""), "map: needs `recovered`"),
        (
            map(
                "slowdown",
                trigger,
                "load = { key = \"loads.base.rate\", values = [] }\n",
                recovered,
            ),
            "map.load.values: has 0 values",
        ),
    ];
    for (index, (table, expected)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{index}.toml"));
        std::fs::write(&file, format!("{head}{table}")).unwrap();
        let output = outagelab(&["map", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{table}: {stderr}");
        assert!(
            stderr.contains(expected),
            "{table}\n{stderr}\nnot {expected}"
        );
        assert!(stderr.contains(&format!("bad{index}.toml:")), "{stderr}");
    }
    // A value the file refuses, and a file without a horizon, before anything runs.
    for (text, expected) in [
        (
            format!(
                "{head}{}",
                map(
                    "slowdown",
                    trigger,
                    "load = { key = \"loads.base.rate\", values = [0] }\n",
                    recovered
                )
            ),
            "[map] point faults.slowdown.duration = \"1s\", loads.base.rate = 0: the file refuses it",
        ),
        (
            format!(
                "{}{}",
                head.replace("horizon = \"20s\"", ""),
                map("slowdown", trigger, load, recovered)
            ),
            "has no [run] horizon",
        ),
        (
            format!(
                "{head}{}",
                map(
                    "slowdown",
                    &trigger.replace("\"1s\"", "\"19s\""),
                    load,
                    recovered
                )
            ),
            "recovery could not be seen",
        ),
    ] {
        let file = dir.join("refused.toml");
        std::fs::write(&file, text).unwrap();
        let output = outagelab(&["map", file.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}\nnot {expected}");
    }
}

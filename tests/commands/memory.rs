//! The memory budget holds for the process, not only for what it counts: runs that would
//! outgrow `[run] memory_max` end with exit 1 and a valid report under an address-space cap
//! equal to the budget (they aborted with SIGABRT, exit 134, before), long or narrow series
//! widen instead of growing, and the variants of one file share one budget.

use crate::common;

use std::path::Path;
use std::process::{Command, Output};

use common::{outagelab, read_report, scratch};

/// The budget the mutated files set, and the address-space cap they run under (`ulimit -v`,
/// in KiB): the same.
const BUDGET: &str = "256MiB";
const CAP_KIB: u64 = 256 * 1024;

/// Runs the binary with `args` under an address-space cap of `cap_kib`, as `ulimit -v` sets
/// it: an allocation past it fails, and Rust aborts the process (exit 134).
fn outagelab_capped(cap_kib: u64, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {cap_kib} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_outagelab"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("sh runs")
}

/// `scenarios/quick-start.toml` with `from` replaced by `to`, its expectations dropped and
/// `memory_max` set to [`BUDGET`], written to `dir/name.toml`.
fn quick_start_with(dir: &Path, name: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/quick-start.toml"),
    )
    .unwrap();
    let base = text.split("# Each variant is the base").next().unwrap();
    assert!(base.contains(from), "{from}");
    let changed = base
        .replace(from, to)
        .replace(
            "expect = [\"requests in 5800..6200\", \"unfinished == 0\"]",
            "",
        )
        .replace("seeds = \"1..20\"", "")
        + &format!("\n[run]\nmemory_max = \"{BUDGET}\"\n");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, changed).unwrap();
    path.to_str().unwrap().to_owned()
}

/// [`quick_start_with`] a series of 8192 buckets of a second (to its horizon, 8191 s) and
/// `memory_max` set to `memory_max` (a TOML value).
fn long_series_file(dir: &Path, name: &str, memory_max: &str) -> String {
    let file = quick_start_with(
        dir,
        name,
        "[loads.peak]",
        "[metrics]\nbucket = \"1s\"\n\n[loads.peak]",
    );
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace(&format!("\"{BUDGET}\""), memory_max)
        .replace("[run]\n", "[run]\nhorizon = \"8191s\"\n");
    std::fs::write(&file, text).unwrap();
    file
}

const LOAD: &str = "arrivals = \"poisson\"\nrate = 1000\nduration = \"6s\"";

#[test]
fn mutated_files_end_within_a_cap_equal_to_their_budget() {
    // Three of the fuzzer's aborts (exit 134, "memory allocation of N bytes failed"), each a
    // bundled file with one key changed: a burst of 10^7 requests (one Vec growth of the
    // request slab asked for far more than the budget while the counted estimate was under
    // it), a load of 10^9 requests/s, and a 1 ns metrics bucket (a million buckets per
    // series). The first two must stop at the budget, the third fits once its series widens.
    let dir = scratch("memory-capped");
    let cases = [
        (
            "burst",
            quick_start_with(
                &dir,
                "burst",
                LOAD,
                "arrivals = \"burst\"\ncount = 10000000",
            ),
            1,
        ),
        (
            "rate",
            quick_start_with(&dir, "rate", "rate = 1000\n", "rate = 1000000000\n"),
            1,
        ),
        (
            "bucket",
            quick_start_with(
                &dir,
                "bucket",
                "[loads.peak]",
                "[metrics]\nbucket = \"1ns\"\n\n[loads.peak]",
            ),
            0,
        ),
    ];
    for (name, file, code) in cases {
        let json = dir.join(format!("{name}.json"));
        let output = outagelab_capped(CAP_KIB, &["run", &file, "--json", json.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(code), "{name}: {stderr}");
        // What it wrote is a whole report, whatever stopped the run.
        let report = read_report(&json);
        let verdict = report["variants"][0]["verdict"].as_str().unwrap();
        if code == 1 {
            assert_eq!(verdict, "memory_budget", "{name}");
            assert!(stderr.contains("(memory_budget)"), "{name}: {stderr}");
            assert!(stderr.contains("[run] memory_max"), "{name}: {stderr}");
        } else {
            let series = &report["variants"][0]["series"];
            assert_eq!(series["bucket_ms_asked"], 1e-6, "{name}");
            assert!(
                series["start_ms"].as_array().unwrap().len() <= 8192,
                "{name}"
            );
        }
    }
}

#[test]
fn the_variants_of_a_file_share_one_budget() {
    // Each variant keeps a long series (8192 buckets of a second) that `run` holds for its
    // outputs while the next variant runs. One alone fits 16 MiB; eight together do not:
    // the budget is the process's, so the later ones stop at it. Before, each variant had a
    // budget of its own and all eight completed, whatever the process held.
    let dir = scratch("memory-shared");
    let one = long_series_file(&dir, "one", "\"16MiB\"");
    let text = std::fs::read_to_string(&one).unwrap();
    let output = outagelab(&["run", &one, "--quiet"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let eight = dir.join("eight.toml");
    let variants: String = (0..8)
        .map(|i| {
            let patch = format!("{{ loads = {{ peak = {{ rate = {} }} }} }}", 1000 + i);
            format!("\n[[variant]]\nname = \"v{i}\"\npatch = {patch}\n")
        })
        .collect();
    std::fs::write(&eight, text + &variants).unwrap();
    let json = dir.join("eight.json");
    let output = outagelab(&[
        "run",
        eight.to_str().unwrap(),
        "--quiet",
        "--json",
        json.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let report = read_report(&json);
    let verdicts: Vec<&str> = (report["variants"].as_array().unwrap().iter())
        .map(|v| v["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts[0], "completed", "{verdicts:?}");
    assert_eq!(verdicts[7], "memory_budget", "{verdicts:?}");
    // Once one stops, the ones after it do too: what is held only grows.
    let first_stopped = verdicts.iter().position(|v| *v == "memory_budget").unwrap();
    assert!(
        verdicts[first_stopped..]
            .iter()
            .all(|v| *v == "memory_budget"),
        "{verdicts:?}"
    );
}

#[test]
fn a_study_in_a_shared_budget_is_the_same_on_any_number_of_threads() {
    // Sixteen runs of about 3 MB each in a budget of 3.8 MB: four at a time crowd each other
    // out (the budget refuses what the others hold), one at a time they do not. A refused
    // run is run again alone, so the study is the same bytes whatever ran beside what (a run
    // that needs more than the budget alone stops at it either way).
    let dir = scratch("memory-study");
    let file = long_series_file(&dir, "study", "3800000");
    let reports: Vec<Vec<u8>> = ["1", "4"]
        .into_iter()
        .map(|jobs| {
            let json = dir.join(format!("jobs-{jobs}.json"));
            let output = outagelab(&[
                "run",
                &file,
                "--seeds",
                "1..16",
                "--jobs",
                jobs,
                "--quiet",
                "--json",
                json.to_str().unwrap(),
            ]);
            assert!(
                matches!(output.status.code(), Some(0 | 1)),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            std::fs::read(json).unwrap()
        })
        .collect();
    assert!(reports[0] == reports[1], "--jobs 1 and --jobs 4 differ");
}

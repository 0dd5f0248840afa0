//! CI's small campaign: a few hundred generated and mutated inputs through the real binary
//! (workers, address-space cap, timeout), with no panic, no monitor stop, no invariant
//! violation and no hang. The seed is fixed so CI is repeatable; `OUTAGELAB_FUZZ_SEED`
//! explores another (the failure message prints the command that replays it).
//!
//! An abort (a failed allocation under the workers' address-space cap) is a finding like
//! the rest: the process-wide memory budget (issue 21) stops a run that would grow past it.

use std::process::Command;

use serde_json::Value;

#[test]
fn small_campaign_finds_nothing() {
    let seed: u64 = std::env::var("OUTAGELAB_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_203);
    let inputs = 300;
    let out = std::env::temp_dir().join(format!("outagelab-fuzz-ci-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let started = std::time::Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_outagelab-fuzz"))
        .args(["--inputs", &inputs.to_string(), "--seed", &seed.to_string()])
        .args([
            "--jobs",
            "2",
            "--timeout-s",
            "60",
            "--minimise-max",
            "1",
            "--quiet",
        ])
        .arg("--out")
        .arg(&out)
        .status()
        .expect("the fuzz binary runs");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("report.json written"),
    )
    .expect("report.json is JSON");
    let text = std::fs::read_to_string(out.join("report.txt")).expect("report.txt written");
    eprintln!("{text}(in {:.1} s)", started.elapsed().as_secs_f64());
    let count = |class: &str| report["classes"][class].as_u64().expect("a count");
    let total: u64 = [
        "rejected",
        "ok",
        "expectation_failed",
        "budget",
        "monitor",
        "violation",
    ]
    .iter()
    .chain(&["panic", "abort", "timeout"])
    .map(|class| count(class))
    .sum();
    assert_eq!(total, inputs, "every input has one class");
    let replay = format!(
        "OUTAGELAB_FUZZ_SEED={seed} cargo test -p outagelab-fuzz --test campaign; findings in {}",
        out.display()
    );
    for class in ["panic", "abort", "monitor", "violation", "timeout"] {
        assert_eq!(count(class), 0, "{class} found: {replay}\n{text}");
    }
    // The campaign reaches the simulator, not only the reader.
    assert!(
        count("ok") + count("expectation_failed") >= inputs / 4,
        "{text}"
    );
    assert!(count("rejected") >= inputs / 10, "{text}");
    assert!(status.success(), "exit {status} without findings");
    let _ = std::fs::remove_dir_all(&out);
}

/// The same seed gives the same report, whatever the number of workers.
#[test]
fn jobs_do_not_change_the_report() {
    let run = |jobs: &str| {
        let out =
            std::env::temp_dir().join(format!("outagelab-fuzz-jobs-{jobs}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        Command::new(env!("CARGO_BIN_EXE_outagelab-fuzz"))
            .args(["--inputs", "60", "--seed", "5", "--jobs", jobs, "--quiet"])
            .args(["--minimise-max", "0"])
            .arg("--out")
            .arg(&out)
            .status()
            .expect("the fuzz binary runs");
        let report = std::fs::read_to_string(out.join("report.json")).expect("report.json");
        let _ = std::fs::remove_dir_all(&out);
        report
    };
    assert_eq!(run("1"), run("3"));
}

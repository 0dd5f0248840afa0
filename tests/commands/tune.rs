//! `outagelab tune`: the min-max loop on the bundled retry policy returns a setting that
//! survives every breaking schedule it kept and a fresh exploration, and `run` confirms it on
//! the written files (while the file's own setting fails the same schedules); the loop is the
//! same on any number of threads; ranges in which nothing survives say so; bad `[tune]`
//! tables are refused at their key.

use std::path::Path;

use crate::common;

use common::{outagelab, scratch};

const BUNDLED: &str = "scenarios/tune-retry-budget.toml";

fn tune(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["tune"];
    all.extend_from_slice(args);
    all.push("--quiet");
    let output = outagelab(&all);
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn bundled() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(BUNDLED)).unwrap()
}

#[test]
fn the_tuned_setting_survives_what_broke_the_file_s_own_and_run_confirms_it() {
    let dir = scratch("tune-bundled");
    let tuned = dir.join("tuned.toml");
    let checks = dir.join("checks");
    let (code, stdout, stderr) = tune(&[
        BUNDLED,
        "--write",
        tuned.to_str().unwrap(),
        "--out",
        checks.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    assert!(
        stdout.contains("survives every breaking schedule kept"),
        "{stdout}"
    );
    // The file as written broke in the first round.
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("round 1: ") && !first.ends_with(": 0 broke it"),
        "{first}"
    );
    // `run` passes on the tuned file.
    let ran = outagelab(&["run", tuned.to_str().unwrap()]);
    assert_eq!(
        ran.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&ran.stdout)
    );
    // The first round's schedules broke the file's own setting: check-1 is one of them.
    let kept = std::fs::read_dir(&checks).unwrap().count();
    assert!(kept >= 1, "nothing kept");
    for number in 1..=kept.min(4) {
        let check = checks.join(format!("check-{number}.toml"));
        // The file's own setting fails the same schedule.
        let text = std::fs::read_to_string(&check).unwrap();
        let own = text
            .lines()
            .map(|line| {
                if line.starts_with("budget_percent = ") {
                    "budget_percent = 50".to_owned()
                } else if line.starts_with("backoff = ") {
                    "backoff = \"50ms\"".to_owned()
                } else if line.starts_with("max_attempts = ") {
                    "max_attempts = 3".to_owned()
                } else {
                    line.to_owned()
                }
            })
            .collect::<Vec<String>>()
            .join("\n");
        let original = dir.join("original.toml");
        std::fs::write(&original, own).unwrap();
        let ran = outagelab(&["run", original.to_str().unwrap()]);
        let out = String::from_utf8_lossy(&ran.stdout);
        assert_eq!(ran.status.code(), Some(1), "{out}");
        assert!(out.contains("FAIL  ours: outcomes.ok > 20000"), "{out}");
    }
    // And every kept schedule passes against the tuned setting.
    for number in 1..=kept {
        let check = checks.join(format!("check-{number}.toml"));
        let ran = outagelab(&["run", check.to_str().unwrap()]);
        assert_eq!(ran.status.code(), Some(0), "{}", check.display());
    }
}

#[test]
fn the_loop_is_the_same_on_any_number_of_threads() {
    let dir = scratch("tune-threads");
    let file = dir.join("small.toml");
    std::fs::write(
        &file,
        bundled()
            .replace("runs_max = 40", "runs_max = 12")
            .replace("candidates = 40", "candidates = 8"),
    )
    .unwrap();
    let run = |jobs: &str| {
        let out = dir.join(format!("out{jobs}"));
        let (code, stdout, _) = tune(&[
            file.to_str().unwrap(),
            "--jobs",
            jobs,
            "--out",
            out.to_str().unwrap(),
        ]);
        (code, stdout.replace(out.to_str().unwrap(), "OUT"))
    };
    assert_eq!(run("1"), run("2"));
}

#[test]
fn ranges_in_which_nothing_survives_say_so() {
    let dir = scratch("tune-none");
    let file = dir.join("none.toml");
    let text = bundled()
        .replace(
            "\"retries.client.budget_percent\" = { min = 1, max = 50 }",
            "\"retries.client.budget_percent\" = { min = 45, max = 50 }",
        )
        .replace(
            "\"retries.client.backoff\" = { min = \"10ms\", max = \"400ms\" }",
            "\"retries.client.backoff\" = { min = \"40ms\", max = \"60ms\" }",
        )
        .replace(
            "\"retries.client.max_attempts\" = { min = 1, max = 3 }",
            "\"retries.client.max_attempts\" = { min = 2, max = 3 }",
        )
        .replace("candidates = 40", "candidates = 6");
    std::fs::write(&file, text).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = tune(&[file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("none of the settings tried in the knobs' ranges survives"),
        "{stdout}"
    );
}

#[test]
fn bad_tune_tables_are_refused_at_their_key() {
    let dir = scratch("tune-bad");
    let base = bundled();
    let head = &base[..base.find("[tune]").unwrap()];
    let without_explore = &base[..base.find("[explore]").unwrap()];
    let knob = |entry: &str| format!("[tune]\n[tune.knobs]\n{entry}\n");
    let budget = "\"retries.client.budget_percent\"";
    let cases = [
        (
            format!(
                "{head}{}",
                knob("\"retries.client.budget_min\" = { min = 1, max = 9 }")
            ),
            "`retries.client.budget_min` is not a key the file writes",
        ),
        (
            format!(
                "{head}{}",
                knob(&format!("{budget} = {{ min = 1, max = 20 }}"))
            ),
            "the file's value, 50, is outside the range",
        ),
        (
            format!("{head}[tune]\nrounds = 0\n[tune.knobs]\n{budget} = {{ min = 1, max = 50 }}\n"),
            "tune.rounds: 0 is outside 1..=20",
        ),
        (
            format!(
                "{without_explore}{}",
                knob(&format!("{budget} = {{ min = 1, max = 50 }}"))
            ),
            "the file needs an [explore] table",
        ),
        (
            format!(
                "{head}[tune]\nvariant = \"theirs\"\n[tune.knobs]\n{budget} = {{ min = 1, max = 50 }}\n"
            ),
            "tune.variant: \"theirs\" is not a variant",
        ),
    ];
    for (index, (text, expected)) in cases.iter().enumerate() {
        let file = dir.join(format!("bad{index}.toml"));
        std::fs::write(&file, text).unwrap();
        let (code, _, stderr) = tune(&[file.to_str().unwrap()]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains(expected), "{stderr}\nnot {expected}");
        assert!(stderr.contains(&format!("bad{index}.toml:")), "{stderr}");
    }
    // A range end the file refuses, before anything runs.
    let file = dir.join("refused.toml");
    let text = base.replace(
        "\"retries.client.backoff\" = { min = \"10ms\", max = \"400ms\" }",
        "\"retries.client.backoff\" = { min = \"10ms\", max = \"1s\" }",
    );
    std::fs::write(&file, text).unwrap();
    let (code, _, stderr) = tune(&[file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("[tune] knob `retries.client.backoff` at 1 s: the file refuses it"),
        "{stderr}"
    );
}

/// When the rounds run out with the last exploration still breaking the setting, it says so
/// (exit 1), and the checks it writes are only of schedules the setting survives.
#[test]
fn out_of_rounds_says_so_and_writes_only_checks_the_setting_survives() {
    let dir = scratch("tune-rounds");
    let file = dir.join("rounds.toml");
    let text = bundled()
        .replace("runs_max = 40", "runs_max = 3")
        .replace("rounds = 3", "rounds = 1")
        .replace(
            "\"retries.client.max_attempts\" = { min = 1, max = 3 }\n",
            "",
        );
    std::fs::write(&file, text).unwrap();
    let out = dir.join("out");
    let (code, stdout, stderr) = tune(&[file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    // Seed 1: one tuning, and the next exploration still breaks the setting once.
    assert!(
        stdout.contains("survives the 2 schedules kept, but its last exploration found 1"),
        "{stdout}"
    );
    let checks: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(
        checks.len(),
        2,
        "only the schedules the setting was tuned against"
    );
    for entry in checks {
        let check = entry.unwrap().path();
        let ran = outagelab(&["run", check.to_str().unwrap()]);
        assert_eq!(ran.status.code(), Some(0), "{}", check.display());
    }
}

//! `run --seeds` as a study: means with intervals, paired differences, constraints and the
//! best variant, expectations over the seeds, threads that change nothing, and shards that
//! merge into exactly the unsharded file.

use crate::common;

use common::{outagelab, scratch};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const FILE: &str = "scenarios/redis-dead-protection.toml";

#[test]
fn threads_and_shards_do_not_change_a_byte() {
    let dir = scratch("study-shards");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", FILE, "--seeds", "1..5", "--quiet"];
        args.extend(extra);
        let output = outagelab(&args);
        assert!(
            output.status.success(),
            "{args:?}: {}",
            text(&output.stderr)
        );
        output
    };
    run(&["--jobs", "1", "--json", &path("one.json")]);
    run(&["--jobs", "2", "--json", &path("two.json")]);
    let one = std::fs::read(dir.join("one.json")).unwrap();
    assert_eq!(one, std::fs::read(dir.join("two.json")).unwrap());
    for k in 1..=3 {
        let output = run(&[
            "--shard",
            &format!("{k}/3"),
            "--json",
            &path(&format!("s{k}.json")),
        ]);
        assert!(text(&output.stderr).contains(&format!("shard {k}/3: 5 of 15 runs")));
        assert!(output.stdout.is_empty(), "a shard judges nothing");
    }
    // Any order of the shards gives the unsharded file, byte for byte.
    let merged = path("merged.json");
    let output = outagelab(&[
        "merge",
        &path("s2.json"),
        &path("s3.json"),
        &path("s1.json"),
        "--json",
        &merged,
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).contains("expectations: 19 of 19 held"));
    assert_eq!(std::fs::read(&merged).unwrap(), one);

    // A missing shard, a shard given twice, a whole study, or a shard of another study.
    let other = path("other.json");
    run(&[
        "--metric",
        "outcomes.shed",
        "--shard",
        "1/3",
        "--json",
        &other,
    ]);
    for (shards, message) in [
        (vec![path("s1.json"), path("s2.json")], "missing shard 3/3"),
        (
            vec![path("s1.json"), path("s1.json"), path("s3.json")],
            "are both shard 1/3",
        ),
        (vec![path("one.json")], "is a whole study"),
        (
            vec![path("s2.json"), other.clone(), path("s3.json")],
            "not a shard of the same study",
        ),
    ] {
        let mut args = vec!["merge".to_owned()];
        args.extend(shards);
        args.extend(["--json".to_owned(), path("bad.json")]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let output = outagelab(&args);
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            text(&output.stderr).contains(message),
            "{}",
            text(&output.stderr)
        );
    }
}

#[test]
fn the_table_gives_means_intervals_paired_differences_and_the_best_point() {
    let output = outagelab(&[
        "run",
        FILE,
        "--seeds",
        "1..8",
        "--metric",
        "latency_ms.all.p99",
        "--metric",
        "databases.main.peak_concurrency",
        "--constraint",
        "databases.main.peak_concurrency <= 30",
        "--objective",
        "min latency_ms.all.p99",
        "--json",
        "-",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let table = text(&output.stderr);
    assert!(
        table.contains("on seeds 1..8 (8 seeds x 3 variants = 24 runs"),
        "{table}"
    );
    assert!(
        table.contains("vs baseline: the difference from \"timeout only (fail-open)\""),
        "{table}"
    );
    // One row per variant, the metrics as columns (each mean, then its difference from the
    // baseline), the verdict last, naming the constraint a point breaks.
    let lines: Vec<&str> = table.lines().collect();
    let header = lines
        .iter()
        .position(|line| line.starts_with("variant "))
        .unwrap_or_else(|| panic!("{table}"));
    let words: Vec<&str> = lines[header].split_whitespace().collect();
    assert_eq!(
        words,
        [
            "variant",
            "latency_ms.all.p99",
            "vs",
            "baseline",
            "databases.main.peak_concurrency",
            "vs",
            "baseline",
            "constraints"
        ],
        "{table}"
    );
    let rows = &lines[header + 1..header + 4];
    assert!(rows[0].starts_with("timeout only (fail-open) "), "{table}");
    assert!(rows[0].trim_end().ends_with("best"), "{table}");
    assert!(
        rows[1].starts_with("timeout + breaker ")
            && rows[1].ends_with("not satisfied: databases.main.peak_concurrency <= 30"),
        "{table}"
    );
    assert!(rows[2].trim_end().ends_with("  satisfied"), "{table}");
    assert!(
        lines[header + 4].starts_with("(mean over the seeds"),
        "{table}"
    );
    // Only the first variant (peak 26) and the bulkhead (20) satisfy the constraint; of the
    // two, the first has the lower p99.
    assert!(
        table.contains("best under the constraints (min latency_ms.all.p99): timeout only"),
        "{table}"
    );
    let study: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let variants = study["variants"].as_array().unwrap();
    let satisfies: Vec<bool> = variants
        .iter()
        .map(|v| v["satisfies"].as_bool().unwrap())
        .collect();
    assert_eq!(satisfies, [true, false, true]);
    // The bulkhead's p99 is about 115 ms above the baseline's on every seed: the paired
    // interval is narrow and excludes zero.
    let p99 = &variants[2]["metrics"]["latency_ms.all.p99"];
    let paired = &p99["vs_baseline"];
    let (low, high) = (
        paired["ci95"][0].as_f64().unwrap(),
        paired["ci95"][1].as_f64().unwrap(),
    );
    assert!(100.0 < low && high < 130.0 && high - low < 5.0, "{paired}");
    // The mean is the mean of the rows.
    let rows: Vec<f64> = study["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["variant"] == 2)
        .map(|row| row["metrics"]["latency_ms.all.p99"].as_f64().unwrap())
        .collect();
    assert_eq!(rows.len(), 8);
    let mean = rows.iter().sum::<f64>() / 8.0;
    assert_eq!(p99["mean"].as_f64().unwrap(), mean);
}

/// The breaker sweep's objective (fewest database queries) cannot tell its best points apart
/// on 5 seeds: the study says so, names the points tied with the best, and a tie-break
/// chooses among those only.
#[test]
fn a_best_point_tied_with_others_is_flagged_and_a_tie_break_chooses_among_them() {
    let study = |extra: &[&str]| {
        let args = [
            &[
                "run",
                "scenarios/breaker-open-sweep.toml",
                "--seeds",
                "1..5",
                "--json",
                "-",
            ][..],
            extra,
        ]
        .concat();
        let output = outagelab(&args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let study: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
        let marks = |key: &str| -> Vec<String> {
            (study["variants"].as_array().unwrap().iter())
                .filter(|v| v[key] == true)
                .map(|v| v["name"].as_str().unwrap().to_owned())
                .collect()
        };
        (text(&output.stderr), marks("best"), marks("tied"))
    };
    let (table, best, tied) = study(&[]);
    assert_eq!(best.len(), 1, "{table}");
    assert!(!tied.is_empty(), "{table}");
    assert!(table.contains("TIED on the objective with"), "{table}");
    assert!(table.contains("tied with best"), "{table}");
    // Fewest timeouts among the tied points, which a tie-break on timeouts picks.
    let (table, best_by_timeouts, tied_then) =
        study(&["--tie-break", "min connections.cache.timeouts"]);
    assert!(table.contains("chosen by the tie-break"), "{table}");
    let mut level = [best.clone(), tied.clone()].concat();
    level.sort();
    let mut level_then = [best_by_timeouts.clone(), tied_then].concat();
    level_then.sort();
    assert_eq!(
        level, level_then,
        "a tie-break chooses among the same points"
    );
    assert_ne!(best, best_by_timeouts, "{table}");
    // A tie-break without an objective has nothing to break.
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--seeds",
        "1..2",
        "--tie-break",
        "min latency_ms.all.p99",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("give --objective"));
}

#[test]
fn expectations_on_the_mean_a_quantile_or_a_share_of_seeds() {
    let dir = scratch("study-scopes");
    let file = dir.join("scopes.toml");
    let original = std::fs::read_to_string("scenarios/gateway-rate-limit.toml").unwrap();
    // `requests` moves with the seed around 4500: a tight plain range fails on some seeds,
    // while the same range on the mean, and a share of seeds, can hold.
    let scoped = original.replace(
        "expect = [\"requests in 4300..4700\"]",
        "expect = [\"requests in 4480..4520\", \"mean requests in 4300..4700\", \
         \"p90 requests < 4700\", \"at least 10% of seeds: requests in 4480..4520\", \
         \"at least 100% of seeds: requests in 4480..4520\"]",
    );
    assert_ne!(scoped, original);
    std::fs::write(&file, scoped).unwrap();
    let output = outagelab(&["run", file.to_str().unwrap(), "--seeds", "1..10"]);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    let line = |needle: &str| {
        stdout
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("no line with {needle}: {stdout}"))
            .to_owned()
    };
    assert!(line("mean requests in 4300..4700").contains("yes (mean 4"));
    assert!(line("p90 requests < 4700").contains("yes (p90 4"));
    let held = line("  requests in 4480..4520");
    let fraction = held.split_whitespace().find(|w| w.contains("/10")).unwrap();
    let held_on: u64 = fraction.split('/').next().unwrap().parse().unwrap();
    assert!(
        (1..10).contains(&held_on),
        "a range that holds on some seeds: {held}"
    );
    assert!(line("at least 10% of seeds").contains("yes (share %"));
    assert!(line("at least 100% of seeds").contains("NO (share %"));
    assert!(stderr.contains("reproduce with: outagelab run"), "{stderr}");

    // On its own seed, a scoped expectation reads as its plain form.
    let output = outagelab(&["run", file.to_str().unwrap(), "--seed", "1"]);
    assert!(
        text(&output.stdout).contains("expectations:"),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn names_that_name_nothing_are_refused_before_anything_runs() {
    for (args, message) in [
        (
            vec!["--metric", "latency_ms.all.p98"],
            "`latency_ms.all` has no `p98`",
        ),
        (
            vec!["--baseline", "nope"],
            "--baseline \"nope\" is not a variant",
        ),
        (
            vec!["--constraint", "mean outcomes.ok > 1"],
            "without a prefix",
        ),
        (
            vec!["--objective", "lowest outcomes.ok"],
            "write `min <metric>`",
        ),
        (vec!["--json", "x.json", "--shard", "0/3"], "is not a shard"),
        (vec!["--json", "x.json", "--shard", "4/3"], "is not a shard"),
        (vec!["--shard", "1/3"], "--json"),
    ] {
        let mut all = vec!["run", FILE, "--seeds", "1..2"];
        all.extend(args);
        let output = outagelab(&all);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{all:?}: {stderr}");
        assert!(stderr.contains(message), "{all:?}: {stderr}");
    }
}

#[test]
fn the_bundled_sweep_marks_the_points_that_satisfy_its_constraint_and_the_cheapest_of_them() {
    let dir = scratch("study-sweep");
    let output = outagelab(&[
        "run",
        "scenarios/breaker-open-sweep.toml",
        "--seeds",
        "1..4",
        "--json",
        "-",
        "--plot",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let study: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    // The file's [report]: at most 100 reads waited out the timeout; the fewest queries.
    assert_eq!(
        study["selection"]["constraints"][0],
        "connections.cache.timeouts <= 100"
    );
    let variants = study["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 15, "3 rules x 5 open durations");
    let mean = |v: &serde_json::Value, metric: &str| v["metrics"][metric]["mean"].as_f64().unwrap();
    let mut best: Option<(f64, &str)> = None;
    for variant in variants {
        let satisfies = mean(variant, "connections.cache.timeouts") <= 100.0;
        assert_eq!(
            variant["satisfies"].as_bool(),
            Some(satisfies),
            "{}",
            variant["name"]
        );
        let queries = mean(variant, "databases.main.queries");
        if satisfies && best.is_none_or(|(b, _)| queries < b) {
            best = Some((queries, variant["name"].as_str().unwrap()));
        }
        // Each point carries its swept value as a column.
        assert_eq!(variant["point"][0][0], "open");
    }
    let best = best.expect("some point satisfies the constraint").1;
    let marked: Vec<&str> = variants
        .iter()
        .filter(|v| v["best"] == true)
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    assert_eq!(marked, [best]);
    // resilience4j's ten probes per half-open break the constraint at the shortest duration.
    assert_eq!(variants[0]["name"], "resilience4j / open=500ms");
    assert_eq!(variants[0]["satisfies"], false);
    let table = text(&output.stderr);
    assert!(
        table.contains(&format!(
            "best under the constraints (min databases.main.queries): {best}"
        )),
        "{table}"
    );
    for chart in ["study.png", "study.svg"] {
        assert!(
            std::fs::metadata(dir.join(chart)).unwrap().len() > 10_000,
            "{chart}"
        );
    }
}

/// `--shard auto` in the tasks of a Slurm array (`--array=1-3`): each process reads its slice
/// from Slurm's variables, and the parts merge into the unsharded study, byte for byte.
#[test]
fn shards_of_a_slurm_array_find_their_slice_and_merge_into_the_whole() {
    let dir = scratch("study-shards-auto");
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let whole = path("whole.json");
    let output = outagelab(&["run", FILE, "--seeds", "1..4", "--quiet", "--json", &whole]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut parts = Vec::new();
    for task in 1..=3 {
        let part = path(&format!("task{task}.json"));
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_outagelab"))
            .args(["run", FILE, "--seeds", "1..4", "--quiet", "--shard", "auto"])
            .args(["--json", &part])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .env("SLURM_ARRAY_TASK_MIN", "1")
            .env("SLURM_ARRAY_TASK_COUNT", "3")
            .output()
            .unwrap();
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!("shard {task}/3: 4 of 12 runs")),
            "{stderr}"
        );
        parts.push(part);
    }
    let merged = path("merged.json");
    let mut args = vec!["merge"];
    args.extend(parts.iter().map(String::as_str));
    args.extend(["--json", &merged]);
    let output = outagelab(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        std::fs::read(&merged).unwrap(),
        std::fs::read(&whole).unwrap()
    );
    // Outside an array job, `auto` says what it looked for.
    let output = outagelab(&[
        "run", FILE, "--seeds", "1..4", "--shard", "auto", "--json", &merged,
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("neither a Kubernetes Indexed Job"));
}

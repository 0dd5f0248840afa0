//! The commands over many runs (`explore`, `tune`, `map`, `fit`) on generated files: the
//! fuzz generator's `[explore]`, `[tune]`, `[map]`, `[observed]` and `[fit]` tables, over
//! scenarios of every resource and fault kind, a few in absurd mode. Each command ends with
//! 0, 1 or 2 and no panic; a refusal names the file; what a command writes is a file `run`
//! reads, and an explore finding fails again under `run` as it said.
//!
//! `OUTAGELAB_GENERATED_SEEDS=N` tries N generated files (default 1000, about 20 s in a debug
//! build).

use std::path::Path;

use crate::common;

use common::{outagelab, scratch};

/// Every command a generated file has a table for: (command, table).
const COMMANDS: [(&str, &str); 4] = [
    ("explore", "[explore]"),
    ("tune", "[tune]"),
    ("map", "[map]"),
    ("fit", "[fit]"),
];

#[test]
fn commands_on_generated_files_end_cleanly_and_what_they_write_runs() {
    let seeds: u64 = std::env::var("OUTAGELAB_GENERATED_SEEDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1000);
    let dir = scratch("generated-commands");
    // The generated [observed] tables read the bundled observed file beside the scenario.
    let observed = "postmortem-pause.observed.json";
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("scenarios")
            .join(observed),
        dir.join(observed),
    )
    .unwrap();
    // Per command: [ended 0, ended 1, refused].
    let mut ends = [[0u32; 3]; COMMANDS.len()];
    let mut reproduced = 0;
    for seed in 0..seeds {
        let text = outagelab_fuzz::generate::generate(seed);
        for (index, (command, table)) in COMMANDS.iter().enumerate() {
            if !text.lines().any(|line| line == *table) {
                continue;
            }
            let name = format!("g{seed}-{command}");
            let file = dir.join(format!("{name}.toml"));
            std::fs::write(&file, &text).unwrap();
            let out = dir.join(&name);
            let written = dir.join(format!("{name}.written.toml"));
            let (file, out, written) = (
                file.to_str().unwrap(),
                out.to_str().unwrap(),
                written.to_str().unwrap(),
            );
            let mut args = vec![*command, file];
            match *command {
                "explore" => args.extend(["--out", out, "--quiet"]),
                "tune" => args.extend(["--out", out, "--write", written, "--quiet"]),
                "map" => args.push("--quiet"),
                _ => args.extend(["--write", written]),
            }
            let output = outagelab(&args);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let what = format!("{command} on generated file {seed}:\n{stderr}\n{text}");
            assert!(!stderr.contains("panicked"), "{what}");
            match output.status.code() {
                Some(0) => ends[index][0] += 1,
                Some(1) => ends[index][1] += 1,
                Some(2) => {
                    ends[index][2] += 1;
                    assert!(stderr.contains(file), "a refusal names the file: {what}");
                }
                other => panic!("exit {other:?}: {what}"),
            }
            if *command == "explore" && output.status.code() == Some(1) {
                reproduced += findings_fail_again(Path::new(out), &what);
            }
            if Path::new(written).exists() {
                let run = outagelab(&["run", written]);
                let code = run.status.code();
                assert!(
                    matches!(code, Some(0 | 1)),
                    "run refuses what {command} wrote ({code:?}): {}\n{what}",
                    String::from_utf8_lossy(&run.stderr)
                );
            }
        }
    }
    eprintln!("[ended 0, ended 1, refused] per command over {seeds} generated files:");
    for ((command, _), ends) in COMMANDS.iter().zip(&ends) {
        eprintln!("  {command}: {ends:?}");
    }
    eprintln!("  explore findings that failed again under run: {reproduced}");
    // The generator reaches each command's runs, not only its reader's refusals.
    // (About 60 explorations, 20 tunings, 18 maps and 37 fits run on the first 1,000 files;
    // 3 explorations find what they reproduce.)
    if seeds >= 1000 {
        for ((command, _), ends) in COMMANDS.iter().zip(&ends) {
            assert!(ends[0] + ends[1] >= 10, "{command} ran only {ends:?}");
        }
        assert!(reproduced >= 1, "no explore finding to run again");
    }
}

/// Runs each `finding-N.toml` explore wrote in `out`: each must fail again (exit 1).
/// Returns how many there were.
fn findings_fail_again(out: &Path, what: &str) -> u32 {
    let mut count = 0;
    for entry in std::fs::read_dir(out).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !(name.starts_with("finding-") && name.ends_with(".toml")) {
            continue;
        }
        let run = outagelab(&["run", path.to_str().unwrap()]);
        assert_eq!(
            run.status.code(),
            Some(1),
            "{name} does not fail again: {}\n{what}",
            String::from_utf8_lossy(&run.stderr)
        );
        count += 1;
    }
    count
}

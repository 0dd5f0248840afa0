//! Every past finding in `fuzz/findings/` stays fixed: each file is run again in a worker
//! process under the campaign's 4 GiB address-space cap, with the file's own time limit (the
//! harness's time cap off, as the findings were found with it off), and must end as a run, a
//! budget stop or a rejection, never as a finding (an abort, a panic, a monitor stop, a
//! violated invariant, a hang). A new finding goes in that directory once fixed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use outagelab_fuzz::campaign::{Config, run_isolated};
use outagelab_fuzz::run::Harness;

#[test]
fn past_findings_stay_fixed() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("findings");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&directory)
        .expect("fuzz/findings is there")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no findings in {}", directory.display());
    let out = std::env::temp_dir().join(format!("outagelab-fuzz-findings-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("a scratch directory");
    let config = Config {
        seed: 0,
        inputs: 1,
        jobs: 1,
        out: out.clone(),
        harness: Harness {
            events_max: 1_000_000,
            input_events_max: 10_000_000,
            time_max_s: 0,
        },
        memory_cap_mib: 4096,
        timeout: Duration::from_secs(60),
        minimise_max: 0,
        minimise_tries: 0,
        exe: PathBuf::from(env!("CARGO_BIN_EXE_outagelab-fuzz")),
        progress: false,
    };
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a finding's file");
        let outcome = run_isolated(&config, &text, &out.join("candidate.toml")).expect("it ran");
        eprintln!("{}: {:?}", file.display(), outcome.class);
        if outcome.class.is_finding() {
            found.push(format!("{}: {outcome:?}", file.display()));
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(found.is_empty(), "findings again:\n{}", found.join("\n"));
}

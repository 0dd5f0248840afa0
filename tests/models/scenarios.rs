//! Every bundled scenario is valid, runs to a real end, and meets the expectations it carries:
//! the figures reproduced from the seed documents are checked on every `cargo test`. The
//! README's quick start is one of them, and shows what it prints.

use std::path::{Path, PathBuf};
use std::process::Command;

use outagelab_scenario_file::load;

fn bundled() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios/ exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_bundled_scenario_meets_its_expectations() {
    let files = bundled();
    assert!(files.len() >= 3, "bundled scenarios: {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let scenario = load(file).unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
        let expectations: usize = scenario.variants.iter().map(|v| v.expectations.len()).sum();
        assert!(expectations > 0, "{} checks nothing", file.display());
        for variant in &scenario.variants {
            let report = outagelab_sim::run(&variant.scenario).expect("validated scenarios run");
            assert!(
                !report.verdict.is_budget(),
                "{}: {} hit its budget",
                file.display(),
                variant.name
            );
            let summary = &report.summary;
            let ended: u64 = summary.outcomes.values().sum();
            assert_eq!(
                ended + summary.unfinished,
                summary.requests,
                "{}",
                variant.name
            );
            for located in &variant.expectations {
                let evaluation = located
                    .expectation
                    .evaluate(summary)
                    .expect("paths were checked");
                if !evaluation.passed {
                    failures.push(format!(
                        "{} [{}] {}: actual {:?}",
                        located.location, variant.name, located.expectation, evaluation.actual
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "failed expectations:\n{}",
        failures.join("\n")
    );
}

/// The README's quick start is the bundled file, and the README shows what running it prints:
/// a newcomer who copies the file gets the table they read.
#[test]
fn the_readme_quick_start_is_the_bundled_file_and_shows_what_it_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let file = std::fs::read_to_string(root.join("scenarios/quick-start.toml")).expect("file");
    assert!(
        readme.contains(&format!("```toml\n{file}```")),
        "README.md's quick start is not scenarios/quick-start.toml: paste the file into it"
    );
    let command = "$ outagelab run scenarios/quick-start.toml --plot out\n";
    let start = readme
        .find(command)
        .expect("README.md runs the quick start")
        + command.len();
    let shown: Vec<&str> = readme[start..]
        .lines()
        .take_while(|line| !line.starts_with("wrote ") && !line.starts_with("```"))
        .collect();
    let output = Command::new(env!("CARGO_BIN_EXE_outagelab"))
        .args(["run", "scenarios/quick-start.toml"])
        .current_dir(root)
        .output()
        .expect("the binary runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let printed: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        shown, printed,
        "README.md's quick-start output is not what the run prints: paste it again"
    );
}

//! Every bundled scenario is valid, runs to a real end, and meets the expectations it carries:
//! the figures reproduced from the seed documents are checked on every `cargo test`.

use std::path::{Path, PathBuf};

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

//! `run --seeds A..B`: every variant on every seed of a range, and each expectation's result
//! across them. A bundled file states the range its expectations hold on (`[scenario] seeds`);
//! `--seeds stated` checks exactly that, which is what CI runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use outagelab_scenario_file::ScenarioFile;
use outagelab_sim::Bugs;

/// One expectation of one variant, across the seeds.
#[derive(Default)]
struct Across {
    held: u64,
    runs: u64,
    /// Lowest and highest value seen (a metric with no value is not counted here).
    low: Option<f64>,
    high: Option<f64>,
    /// The first seed it failed on.
    first_failure: Option<(u64, Option<f64>)>,
}

/// What a multi-seed run found.
pub struct SeedsOutcome {
    pub text: String,
    /// The seeds on which something failed (an expectation, a budget), in order.
    pub failed_seeds: Vec<u64>,
}

/// Runs every variant of `scenario` on each seed of `seeds`. A run that broke an invariant
/// stops everything: the error names the variant and the seed.
pub fn run(
    scenario: &ScenarioFile,
    seeds: std::ops::RangeInclusive<u64>,
    quiet: bool,
) -> Result<SeedsOutcome, (String, u64, outagelab_sim::SimError)> {
    // Keyed by (variant index, expectation index): the file's order.
    let mut across: BTreeMap<(usize, usize), Across> = BTreeMap::new();
    let mut budget_stops: Vec<(u64, String)> = Vec::new();
    let mut failed_seeds = Vec::new();
    let (low, high) = (*seeds.start(), *seeds.end());
    for seed in seeds {
        let mut this = scenario.clone();
        this.seed = seed;
        for variant in &mut this.variants {
            variant.scenario.seed = seed;
        }
        let report = crate::simulate(&this, Bugs::default(), quiet)
            .map_err(|(variant, error)| (variant, seed, error))?;
        let mut failed = false;
        for (v, (variant, result)) in this.variants.iter().zip(&report.variants).enumerate() {
            if result.verdict.is_budget() {
                failed = true;
                budget_stops.push((seed, variant.name.clone()));
            }
            for (e, located) in variant.expectations.iter().enumerate() {
                let entry = across.entry((v, e)).or_default();
                entry.runs += 1;
                let (passed, actual) = match located.expectation.evaluate(&result.summary) {
                    Ok(evaluation) => (evaluation.passed, evaluation.actual),
                    Err(_) => (false, None),
                };
                if let Some(value) = actual {
                    entry.low = Some(entry.low.map_or(value, |low| low.min(value)));
                    entry.high = Some(entry.high.map_or(value, |high| high.max(value)));
                }
                if passed {
                    entry.held += 1;
                } else {
                    failed = true;
                    entry.first_failure.get_or_insert((seed, actual));
                }
            }
        }
        if failed {
            failed_seeds.push(seed);
        }
    }
    let runs = high - low + 1;
    let mut text = format!(
        "{} on seeds {low}..{high} ({runs} seed{} x {} variant{})\n\n",
        scenario.name,
        if runs == 1 { "" } else { "s" },
        scenario.variants.len(),
        if scenario.variants.len() == 1 {
            ""
        } else {
            "s"
        },
    );
    let value = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v}"));
    let mut rows = vec![[
        "variant".to_owned(),
        "expectation".to_owned(),
        "held".to_owned(),
        "lowest".to_owned(),
        "highest".to_owned(),
        "first failing seed".to_owned(),
    ]];
    for ((v, e), entry) in &across {
        let variant = &scenario.variants[*v];
        let failing = entry
            .first_failure
            .map_or_else(String::new, |(seed, actual)| {
                format!("{seed} (actual {})", value(actual))
            });
        rows.push([
            variant.name.clone(),
            variant.expectations[*e].expectation.to_string(),
            format!("{}/{}", entry.held, entry.runs),
            value(entry.low),
            value(entry.high),
            failing,
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            rows.iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        writeln!(text, "{}", cells.join("  ").trim_end()).unwrap();
    }
    for (seed, variant) in &budget_stops {
        writeln!(
            text,
            "note: \"{variant}\" on seed {seed} was stopped by its run budget"
        )
        .unwrap();
    }
    let held: u64 = across.values().map(|a| a.held).sum();
    let checked: u64 = across.values().map(|a| a.runs).sum();
    writeln!(
        text,
        "\nexpectations: {held} of {checked} held; seeds with a failure: {}",
        if failed_seeds.is_empty() {
            "none".to_owned()
        } else {
            failed_seeds
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    )
    .unwrap();
    Ok(SeedsOutcome { text, failed_seeds })
}

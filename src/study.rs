//! `run --seeds A..B`: every variant on every seed of a range, run on all cores, and what a
//! design review reads from it: each chosen metric's mean with a 95% interval, each variant's
//! paired difference from the baseline, the points that satisfy the constraints and the best
//! one, and every expectation judged over the seeds. A bundled file states the range its
//! expectations hold on (`[scenario] seeds`); `--seeds stated` checks exactly that, which is
//! what CI runs. The statistics themselves are in `outagelab_report::study`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use outagelab_report::expect::{Expectation, Scope};
use outagelab_report::study::{Across, Objective, RunRow, Selection, Shard, Study, StudyVariant};
use outagelab_scenario_file::ScenarioFile;
use outagelab_sim::{Bugs, SimError};
use rayon::prelude::*;

use crate::table::Table;

/// How to run a study, from the command line and the file's `[report]` table.
pub struct Plan {
    pub seeds: std::ops::RangeInclusive<u64>,
    pub selection: Selection,
    /// The variant the others are compared with; the first when not named.
    pub baseline: Option<String>,
    pub shard: Option<Shard>,
    /// Threads; all cores when not given.
    pub jobs: Option<usize>,
    pub quiet: bool,
}

/// What the table shows when neither `--metric` nor `[report] metrics` chooses.
pub fn default_metrics(scenario: &ScenarioFile) -> Vec<String> {
    let mut metrics = vec![
        "outcomes.ok".to_owned(),
        "latency_ms.all.p50".to_owned(),
        "latency_ms.all.p95".to_owned(),
        "latency_ms.all.p99".to_owned(),
    ];
    if scenario.variants.iter().any(|v| v.scenario.http.is_some()) {
        metrics.push("http.share_5xx_percent".to_owned());
    }
    metrics
}

/// Refuses metrics, constraints, an objective or a baseline that name nothing, before
/// anything runs.
pub fn check_plan(scenario: &ScenarioFile, plan: &Plan) -> Result<(), String> {
    let known = |metric: &str, what: &str| -> Result<(), String> {
        scenario
            .check_metric(metric)
            .map_err(|e| format!("{what} `{metric}`: {e}"))
    };
    for metric in &plan.selection.metrics {
        known(metric, "--metric")?;
    }
    for constraint in &plan.selection.constraints {
        let parsed = Expectation::parse(constraint)
            .map_err(|e| format!("--constraint `{constraint}`: {e}"))?;
        if parsed.scope() != Scope::EachSeed {
            return Err(format!(
                "--constraint `{constraint}`: a constraint is judged on the mean over the seeds \
                 already; write it without a prefix"
            ));
        }
        known(&parsed.metric(), "--constraint")?;
    }
    if let Some(objective) = &plan.selection.objective {
        let parsed = Objective::parse(objective)?;
        known(&parsed.metric, "--objective")?;
    }
    if let Some(tie_break) = &plan.selection.tie_break {
        let parsed = Objective::parse(tie_break)?;
        known(&parsed.metric, "--tie-break")?;
        if plan.selection.objective.is_none() {
            return Err(format!(
                "--tie-break `{tie_break}` chooses among points tied on the objective: give \
                 --objective (or `[report] objective`) too"
            ));
        }
    }
    if let Some(baseline) = &plan.baseline
        && !scenario.variants.iter().any(|v| &v.name == baseline)
    {
        let names: Vec<&str> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
        return Err(format!(
            "--baseline \"{baseline}\" is not a variant (the variants: \"{}\")",
            names.join("\", \"")
        ));
    }
    Ok(())
}

/// Runs the study's runs (a shard's only, with `--shard`) on `plan.jobs` threads. A run that
/// broke an invariant stops everything: the error names the variant and the seed. The rows
/// come back in run order whatever the threads did, so the study is the same with any number
/// of them.
pub fn run(scenario: &ScenarioFile, plan: &Plan) -> Result<Study, (String, u64, SimError)> {
    let baseline = plan
        .baseline
        .clone()
        .unwrap_or_else(|| scenario.variants[0].name.clone());
    let variants = scenario
        .variants
        .iter()
        .map(|variant| StudyVariant {
            name: variant.name.clone(),
            sweep_x: variant.sweep_x,
            point: variant.sweep_values.clone(),
            expectations: variant
                .expectations
                .iter()
                .map(|e| e.expectation.to_string())
                .collect(),
            verdicts: Vec::new(),
            metrics: Default::default(),
            satisfies: None,
            best: false,
            tied: false,
        })
        .collect();
    let mut study = Study::header(
        &scenario.name,
        [*plan.seeds.start(), *plan.seeds.end()],
        &baseline,
        scenario.sweep.clone(),
        plan.selection.clone(),
        variants,
    );
    study.shard = plan.shard;
    let runs: Vec<u64> = (0..study.run_count())
        .filter(|&run| plan.shard.is_none_or(|shard| shard.holds(run)))
        .collect();
    let progress = RunsProgress::new(runs.len() as u64, plan.quiet);
    // One budget for every run on every thread; a run it refuses only because the others held
    // part of it (`crowded_out`) comes back `None`, and runs again below, alone.
    let budget = crate::process_budget(scenario);
    let one = |&run: &u64, alone: bool| -> Result<Option<RunRow>, (String, u64, SimError)> {
        let (seed, index) = study.run_at(run);
        let variant = &scenario.variants[index];
        let mut runnable = variant.scenario.clone();
        runnable.seed = seed;
        let ran =
            outagelab_sim::run_in_budget(&runnable, Bugs::default(), &mut |_| {}, None, &budget)
                .map_err(|error| (variant.name.clone(), seed, error))?;
        if ran.crowded_out && !alone {
            return Ok(None);
        }
        let report = ran.report;
        progress.one_done();
        let expectations: Vec<Expectation> = variant
            .expectations
            .iter()
            .map(|e| e.expectation.clone())
            .collect();
        Ok(Some(RunRow::new(
            seed,
            index,
            report.verdict,
            &report.summary,
            &expectations,
        )))
    };
    let at_once = |run: &u64| one(run, false);
    let rows: Vec<Result<Option<RunRow>, _>> = match plan.jobs {
        Some(jobs) => match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
            Ok(pool) => pool.install(|| runs.par_iter().map(at_once).collect()),
            Err(_) => runs.iter().map(at_once).collect(),
        },
        None => runs.par_iter().map(at_once).collect(),
    };
    // The crowded-out runs again, one at a time, in run order: alone, a run's result is its
    // own, so the study is the same whatever ran beside what.
    let mut kept = Vec::with_capacity(rows.len());
    for (run, row) in runs.iter().zip(rows) {
        match row? {
            Some(row) => kept.push(row),
            None => kept.extend(one(run, true)?),
        }
    }
    progress.done();
    study.runs = kept;
    if study.shard.is_none() {
        study
            .finish()
            .expect("a study of every run with a checked baseline finishes");
    }
    Ok(study)
}

/// For one run (no `--seeds`): the chosen metrics of each variant, one column each, with a
/// sweep's values as columns first.
pub fn run_metrics_table(
    scenario: &ScenarioFile,
    report: &outagelab_report::RunReport,
    metrics: &[String],
) -> Table {
    let axes: Vec<String> = scenario
        .sweep_axes
        .iter()
        .map(|axis| axis.label.clone())
        .collect();
    let mut header = vec!["variant".to_owned()];
    header.extend(axes.iter().cloned());
    header.extend(metrics.iter().cloned());
    let mut rows = Vec::new();
    for (variant, result) in scenario.variants.iter().zip(&report.variants) {
        let values = outagelab_report::study::flatten(&result.summary);
        let mut row = vec![variant.name.clone()];
        row.extend(variant.sweep_values.iter().map(|(_, value)| value.clone()));
        row.extend(
            metrics
                .iter()
                .map(|m| values.get(m).map_or_else(|| "-".to_owned(), |v| number(*v))),
        );
        rows.push(row);
    }
    Table { header, rows }
}

/// Seeds on which something failed: a plain expectation, or a run stopped by its budget.
pub fn failed_seeds(study: &Study) -> Vec<u64> {
    let mut seeds: Vec<u64> =
        study
            .runs
            .iter()
            .filter(|row| {
                let variant = &study.variants[row.variant];
                row.verdict.is_budget()
                    || variant.expectations.iter().zip(&row.expectations).any(
                        |(text, evaluation)| {
                            let plain = Expectation::parse(text)
                                .is_ok_and(|e| e.scope() == Scope::EachSeed);
                            plain && !evaluation.as_ref().is_some_and(|e| e.passed)
                        },
                    )
            })
            .map(|row| row.seed)
            .collect();
    seeds.dedup();
    seeds
}

/// Whether every expectation held over the seeds and no run hit its budget.
pub fn all_held(study: &Study) -> bool {
    study
        .variants
        .iter()
        .all(|v| v.verdicts.iter().all(|j| j.held))
        && !study.runs.iter().any(|row| row.verdict.is_budget())
}

/// The study as text: the metrics table, then the expectations.
pub fn render(study: &Study) -> String {
    let [low, high] = study.seeds;
    let seeds = high - low + 1;
    let count = study.variants.len();
    let mut text = format!(
        "{} on seeds {low}..{high} ({seeds} seed{} x {count} variant{} = {} runs, on common \
         random numbers)\n\n",
        study.scenario,
        plural(seeds),
        plural(count as u64),
        study.run_count(),
    );
    text.push_str(&align(&metrics_table(study)));
    writeln!(text, "{}", metrics_note(study)).unwrap();
    if let Some(best) = study.variants.iter().find(|v| v.best) {
        text.push('\n');
        text.push_str(&best_sentence(study, best));
        text.push('\n');
    } else if study.variants.iter().any(|v| v.satisfies.is_some()) {
        text.push_str("\nno variant satisfies every constraint\n");
    }
    text.push('\n');
    if let Some((table, _)) = expectations_table(study) {
        text.push_str(&align(&table));
    }
    for row in study.runs.iter().filter(|row| row.verdict.is_budget()) {
        writeln!(
            text,
            "note: \"{}\" on seed {} was stopped by its run budget ({})",
            study.variants[row.variant].name,
            row.seed,
            row.verdict.name()
        )
        .unwrap();
    }
    let judged: Vec<_> = study.variants.iter().flat_map(|v| &v.verdicts).collect();
    let held = judged.iter().filter(|j| j.held).count();
    let failed = failed_seeds(study);
    writeln!(
        text,
        "\nexpectations: {held} of {} held; seeds with a failure: {}",
        judged.len(),
        if failed.is_empty() {
            "none".to_owned()
        } else {
            failed
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        }
    )
    .unwrap();
    text
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// One row per point (a variant, or a variant at a sweep's value), with its swept values,
/// then per chosen metric two columns: the mean with its 95% interval (`4842 ±30.2`), and the
/// paired difference from the baseline with its own; then, with constraints, the point's
/// verdict: `best`, `tied with best`, `satisfied`, or `not satisfied:` and the constraints its
/// means break.
pub fn metrics_table(study: &Study) -> Table {
    let axes: Vec<String> = study
        .variants
        .first()
        .map(|v| v.point.iter().map(|(label, _)| label.clone()).collect())
        .unwrap_or_default();
    let constrained = study.variants.iter().any(|v| v.satisfies.is_some());
    let mut header = vec!["variant".to_owned()];
    header.extend(axes.iter().cloned());
    for metric in &study.selection.metrics {
        header.push(metric.clone());
        header.push("vs baseline".to_owned());
    }
    if constrained {
        header.push("constraints".to_owned());
    }
    let mut rows = Vec::new();
    for variant in &study.variants {
        let mut row = vec![variant.name.clone()];
        for (label, value) in &variant.point {
            debug_assert!(axes.contains(label), "every point has the same axes");
            row.push(value.clone());
        }
        for metric in &study.selection.metrics {
            match variant.metrics.get(metric) {
                Some(Across {
                    mean,
                    ci95,
                    vs_baseline,
                    ..
                }) => {
                    row.push(with_interval(number(*mean), *mean, *ci95));
                    row.push(match vs_baseline {
                        Some(paired) => {
                            with_interval(signed(paired.mean), paired.mean, paired.ci95)
                        }
                        None => "-".to_owned(),
                    });
                }
                None => row.extend(["no value".to_owned(), "-".to_owned()]),
            }
        }
        if constrained {
            row.push(match variant.satisfies {
                _ if variant.best => "best".to_owned(),
                _ if variant.tied => "tied with best".to_owned(),
                Some(true) => "satisfied".to_owned(),
                Some(false) => format!(
                    "not satisfied: {}",
                    study.broken_constraints(variant).join("; ")
                ),
                None => String::new(),
            });
        }
        rows.push(row);
    }
    Table { header, rows }
}

/// `shown` (a mean, or a difference) with the half-width of its 95% interval, which is
/// symmetric about it: `4842 ±30.2`; the figure alone without an interval (one seed). A
/// half-width below a billionth of the mean is the rounding of a sum of equal values, and is
/// shown `±0`.
fn with_interval(shown: String, mean: f64, ci95: Option<[f64; 2]>) -> String {
    match ci95 {
        Some([low, high]) => {
            let noise = 1e-9 * mean.abs().max(1.0);
            let half = (high - low) / 2.0;
            debug_assert!(
                (mean - low - half).abs() <= noise,
                "Student's t interval is symmetric about its mean"
            );
            let half = if half < noise { 0.0 } else { half };
            format!("{shown} ±{}", number(half))
        }
        None => shown,
    }
}

/// Which point is best, and with which it is tied (their objective's 95% intervals overlap,
/// so the seeds cannot tell them apart): the study's answer in one sentence.
pub fn best_sentence(study: &Study, best: &StudyVariant) -> String {
    let objective = study.selection.objective.as_deref().unwrap_or_default();
    let tied: Vec<String> = (study.variants.iter())
        .filter(|v| v.tied)
        .map(|v| format!("\"{}\"", v.name))
        .collect();
    let mut sentence = format!("best under the constraints ({objective}): {}", best.name);
    match (&study.selection.tie_break, tied.is_empty()) {
        (_, true) => {}
        (Some(tie_break), false) => sentence.push_str(&format!(
            ", chosen by the tie-break ({tie_break}) among the points tied with it on the \
             objective (95% intervals overlap): {}",
            tied.join(", ")
        )),
        (None, false) => sentence.push_str(&format!(
            "; TIED on the objective with {} (their 95% intervals overlap, so these seeds \
             cannot tell them apart: run more seeds, or add a tie-break such as \
             `--tie-break \"min latency_ms.all.p99\"`)",
            tied.join(", ")
        )),
    }
    sentence
}

/// What the metrics table's numbers are.
pub fn metrics_note(study: &Study) -> String {
    format!(
        "(mean over the seeds ± the half-width of its 95% CI, by Student's t; \
         vs baseline: the difference from \"{}\", paired seed by seed, ± its own)",
        study.baseline
    )
}

/// Every expectation of every variant, judged over the seeds, and whether each held; `None`
/// when the file has none.
pub fn expectations_table(study: &Study) -> Option<(Table, Vec<bool>)> {
    let value = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), number);
    let header = [
        "variant",
        "expectation",
        "held",
        "lowest",
        "highest",
        "first failing seed",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut rows = Vec::new();
    let mut held_flags = Vec::new();
    for variant in &study.variants {
        for (e, (text, judged)) in variant
            .expectations
            .iter()
            .zip(&variant.verdicts)
            .enumerate()
        {
            let scope = Expectation::parse(text).map(|e| e.scope()).ok();
            let held = match scope {
                Some(Scope::EachSeed) | None => format!("{}/{}", judged.seeds_held, judged.seeds),
                Some(scope) => format!(
                    "{} ({} {})",
                    if judged.held { "yes" } else { "NO" },
                    match scope {
                        Scope::Mean => "mean".to_owned(),
                        Scope::Quantile(p) => format!("p{p}"),
                        _ => "share %".to_owned(),
                    },
                    value(judged.value)
                ),
            };
            let first_failing = match (scope, judged.first_failing_seed) {
                (Some(Scope::EachSeed), Some(seed)) => {
                    let actual = study
                        .runs
                        .iter()
                        .find(|row| {
                            row.seed == seed && study.variants[row.variant].name == variant.name
                        })
                        .and_then(|row| row.expectations.get(e).cloned().flatten()?.actual);
                    format!("{seed} (actual {})", value(actual))
                }
                _ => String::new(),
            };
            held_flags.push(judged.held);
            rows.push(vec![
                variant.name.clone(),
                text.clone(),
                held,
                value(judged.low),
                value(judged.high),
                first_failing,
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some((Table { header, rows }, held_flags))
}

/// A table as text, every column left-aligned.
pub fn align(table: &Table) -> String {
    let rows: Vec<&Vec<String>> = std::iter::once(&table.header).chain(&table.rows).collect();
    let columns = rows.iter().map(|row| row.len()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|row| row.get(c).map_or(0, |cell| cell.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        writeln!(text, "{}", cells.join("  ").trim_end()).unwrap();
    }
    text
}

/// A figure with as many decimals as its size deserves: 500, 151.0, 2.35, 0.053, 4.1e-5.
fn number(x: f64) -> String {
    let magnitude = x.abs();
    if x == x.trunc() && magnitude < 1e15 {
        format!("{x:.0}")
    } else if magnitude >= 10.0 {
        format!("{x:.1}")
    } else if magnitude >= 1.0 {
        format!("{x:.2}")
    } else if magnitude >= 0.01 {
        format!("{x:.3}")
    } else {
        format!("{x:.1e}")
    }
}

fn signed(x: f64) -> String {
    if x > 0.0 {
        format!("+{}", number(x))
    } else {
        number(x)
    }
}

/// A bar of runs done on standard error: on a terminal only, once the study has taken a
/// second, never with `--quiet`. It reads the wall clock, which the simulation never does.
pub(crate) struct RunsProgress {
    bar: Option<indicatif::ProgressBar>,
    done: AtomicU64,
    started: std::time::Instant,
}

impl RunsProgress {
    pub(crate) fn new(total: u64, quiet: bool) -> RunsProgress {
        use std::io::IsTerminal;
        let shown = !quiet && std::io::stderr().is_terminal();
        RunsProgress {
            bar: shown.then(|| {
                let bar = indicatif::ProgressBar::hidden();
                bar.set_length(total);
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "runs [{bar:30}] {pos}/{len}, {elapsed}",
                ) {
                    bar.set_style(style);
                }
                bar
            }),
            done: AtomicU64::new(0),
            started: std::time::Instant::now(),
        }
    }

    pub(crate) fn one_done(&self) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if let Some(bar) = &self.bar {
            if bar.is_hidden() && self.started.elapsed() >= std::time::Duration::from_secs(1) {
                bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
            bar.set_position(done);
        }
    }

    pub(crate) fn done(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_is_shown_with_its_interval_s_half_width() {
        let check = |mean: f64, ci95: Option<[f64; 2]>, expected: &str| {
            assert_eq!(with_interval(number(mean), mean, ci95), expected);
        };
        check(4842.0, Some([4811.8, 4872.2]), "4842 ±30.2");
        check(0.405, Some([0.405, 0.405]), "0.405 ±0");
        check(3.0, None, "3");
        // A sum of twenty equal p99s leaves a half-width of 1.4e-14: rounding, not spread.
        check(
            100.00000000000001,
            Some([99.99999999999999, 100.00000000000003]),
            "100.0 ±0",
        );
        assert_eq!(
            with_interval(signed(-1148.8), -1148.8, Some([-1170.1, -1127.5])),
            "-1148.8 ±21.3"
        );
    }
}

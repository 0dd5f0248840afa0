//! `run --report PATH`: what a design review or a postmortem reads, as one self-contained HTML
//! page or as Markdown (`page.rs` writes either). For one run: the side-by-side table, every
//! expectation with its value, what each variant changes, the fault windows, the charts and
//! the log of state changes. For a seed range (`--seeds`): the means with their intervals and
//! paired differences, the best point under the constraints, the expectations over the seeds,
//! what each variant changes from the baseline, the study chart, and one draw (the range's
//! first seed) with its charts and state changes. Both begin with the file's own statement of
//! what it models and assumes, and give the command that reproduces them. Nothing here reads a
//! clock: the same run gives the same bytes.

use outagelab_report::RunReport;
use outagelab_report::study::Study;
use outagelab_scenario_file::{ScenarioFile, differences};

use crate::Checked;
use crate::page::{Format, Page};
use crate::study;
use crate::table::{self, Table};

/// Entries of the state-change log shown per variant; the rest are counted (`--events` writes
/// them all).
const LOG_ROWS_MAX: usize = 200;

/// Changed keys shown per variant; the rest are counted.
const DIFFERENCES_MAX: usize = 40;

/// One run of every variant on one seed.
pub struct RunView<'a> {
    pub report: &'a RunReport,
    pub checked: &'a [Checked],
    /// `(name, svg document)`.
    pub charts: &'a [(&'static str, String)],
    /// The side-by-side table's columns.
    pub columns: &'a [table::Column],
}

/// The page of one run. `command` reproduces it.
pub fn run_page(format: Format, file: &ScenarioFile, run: &RunView, command: &str) -> String {
    let report = run.report;
    let mut page = Page::new(format, &format!("{}: outagelab report", report.scenario));
    page.heading(1, &report.scenario);
    describe(&mut page, file);
    let variants = report.variants.len();
    page.paragraph(&format!(
        "Seed {}, {variants} variant{}, simulated in virtual time. Reproduce with `{command}`.",
        report.seed,
        plural(variants as u64)
    ));
    assumptions(&mut page, file);
    page.heading(2, "Variants side by side");
    side_by_side(&mut page, run, file);
    expectations(&mut page, run.checked);
    changes(&mut page, file, &file.variants[0].name);
    faults(&mut page, report);
    charts(&mut page, run.charts);
    state_changes(&mut page, report);
    page.finish()
}

/// The page of a study. `sample` is every variant on the range's first seed; `study_chart` the
/// study's own chart, when it has one.
pub fn study_page(
    format: Format,
    file: &ScenarioFile,
    result: &Study,
    study_chart: Option<&str>,
    sample: &RunView,
    command: &str,
) -> String {
    let [low, high] = result.seeds;
    let mut page = Page::new(format, &format!("{}: outagelab study", result.scenario));
    page.heading(1, &result.scenario);
    describe(&mut page, file);
    let seeds = high - low + 1;
    let count = result.variants.len() as u64;
    page.paragraph(&format!(
        "Seeds {low} to {high}: {seeds} seed{} x {count} variant{} = {} runs in virtual time, \
         on common random numbers (on one seed, every variant draws the same arrivals and \
         latencies wherever it does the same thing). Differences are from the baseline, \
         `{}`. Reproduce with `{command}`.",
        plural(seeds),
        plural(count),
        result.run_count(),
        result.baseline
    ));
    assumptions(&mut page, file);

    page.heading(2, "Variants over the seeds");
    let table = study::metrics_table(result);
    let classes: Vec<&str> = (result.variants.iter())
        .map(|v| if v.best { "best" } else { "" })
        .collect();
    page.table("study", &table, Some(&classes));
    page.paragraph(&study::metrics_note(result));
    let constraints = &result.selection.constraints;
    if !constraints.is_empty() {
        let written: Vec<String> = constraints.iter().map(|c| format!("`{c}`")).collect();
        page.paragraph(&format!(
            "Constraints, on the means: {}.",
            written.join(", ")
        ));
    }
    match result.variants.iter().find(|v| v.best) {
        Some(best) => {
            let sentence = study::best_sentence(result, best);
            let mut letters = sentence.chars();
            let first = letters.next().map(|c| c.to_ascii_uppercase());
            page.paragraph(&format!(
                "{}{}.",
                first.into_iter().collect::<String>(),
                letters.as_str()
            ))
        }
        None if result.variants.iter().any(|v| v.satisfies.is_some()) => {
            page.paragraph("No variant satisfies every constraint.")
        }
        None => {}
    }

    if let Some((table, held)) = study::expectations_table(result) {
        let passed = held.iter().filter(|h| **h).count();
        page.heading(
            2,
            &format!(
                "Expectations over the seeds: {passed} held, {} failed",
                held.len() - passed
            ),
        );
        let classes: Vec<&str> = held
            .iter()
            .map(|h| if *h { "held" } else { "fail" })
            .collect();
        page.table("expectations", &table, Some(&classes));
    }
    let stopped: Vec<String> = result
        .runs
        .iter()
        .filter(|row| row.verdict.is_budget())
        .map(|row| {
            format!(
                "\"{}\" on seed {} was stopped by its run budget ({}): its figures are incomplete",
                result.variants[row.variant].name,
                row.seed,
                row.verdict.name()
            )
        })
        .collect();
    if !stopped.is_empty() {
        page.list("budget", &stopped);
    }
    changes(&mut page, file, &result.baseline);
    if let Some(svg) = study_chart {
        page.heading(2, "The study's chart");
        page.figure("study", svg);
    }

    let report = sample.report;
    page.heading(2, &format!("One draw: seed {}", report.seed));
    page.paragraph(&format!(
        "Every variant on seed {}, the first of the range: its table, charts and state \
         changes. Reproduce it alone with `outagelab run {} --seed {}`.",
        report.seed,
        file_argument(command),
        report.seed
    ));
    side_by_side(&mut page, sample, file);
    faults(&mut page, report);
    charts(&mut page, sample.charts);
    state_changes(&mut page, report);
    page.finish()
}

/// The scenario file argument of a reproduce command (`outagelab run FILE ...`).
fn file_argument(command: &str) -> &str {
    command
        .strip_prefix("outagelab run ")
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or("FILE")
}

fn plural(n: u64) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn describe(page: &mut Page, file: &ScenarioFile) {
    if let Some(description) = &file.description {
        page.paragraph(description);
    }
}

fn assumptions(page: &mut Page, file: &ScenarioFile) {
    if !file.preamble.is_empty() {
        page.heading(2, "What the file models and assumes");
        page.preformatted("assumptions", &file.preamble);
    }
}

fn side_by_side(page: &mut Page, run: &RunView, file: &ScenarioFile) {
    let report = run.report;
    page.table("summary", &table::summary_table(report, run.columns), None);
    for note in table::notes(report, file) {
        page.paragraph(&note);
    }
    if let Some(flows) = table::flows_table(report) {
        page.heading(
            3,
            "Latency by flow (p50 ms, then errors and unfinished requests)",
        );
        page.table("flows", &flows, None);
    }
    if let Some(callers) = table::callers_table(report) {
        page.heading(3, "Calls as their callers saw them");
        page.table("callers", &callers, None);
    }
    if let Some(instances) = table::instances_table(report) {
        page.heading(3, "Requests by instance of each service");
        page.table("instances", &instances, None);
    }
    if let (Some(observed), Some(table)) = (&report.observed, table::observed_table(report)) {
        page.heading(3, "Simulated against what was observed");
        page.paragraph(&format!(
            "Read from {}; the run's time 0 is {}. Each sample stands for the step that ends \
             at it, and is compared with the simulated metric over that step: the difference \
             is simulated minus observed.",
            observed.file, observed.start_utc
        ));
        page.table("observed", &table, None);
    }
}

fn expectations(page: &mut Page, checked: &[Checked]) {
    let held = checked.iter().filter(|c| c.passed).count();
    page.heading(
        2,
        &format!("Expectations: {held} held, {} failed", checked.len() - held),
    );
    if checked.is_empty() {
        return;
    }
    let header = ["variant", "expectation", "result", "value", "where"]
        .map(str::to_owned)
        .to_vec();
    let rows = checked
        .iter()
        .map(|check| {
            let value = match &check.actual {
                Ok(value) | Err(value) => value.clone(),
            };
            vec![
                check.variant.clone(),
                format!("`{}`", check.expectation),
                if check.passed { "held" } else { "FAILED" }.to_owned(),
                value,
                check.location.clone(),
            ]
        })
        .collect();
    let classes: Vec<&str> = checked
        .iter()
        .map(|c| if c.passed { "held" } else { "fail" })
        .collect();
    page.table("expectations", &Table { header, rows }, Some(&classes));
}

/// What each variant changes from `baseline`, key by key, as the file sets them (a patch and
/// the swept values alike).
fn changes(page: &mut Page, file: &ScenarioFile, baseline: &str) {
    let Some(base) = file.variants.iter().find(|v| v.name == baseline) else {
        return;
    };
    if file.variants.len() < 2 {
        return;
    }
    page.heading(2, &format!("What each variant changes from \"{baseline}\""));
    let header = ["variant", "key", baseline, "this variant"]
        .map(str::to_owned)
        .to_vec();
    let mut rows = Vec::new();
    let mut same = Vec::new();
    for variant in file.variants.iter().filter(|v| v.name != baseline) {
        let changed = differences(base, variant);
        if changed.is_empty() {
            same.push(format!("`{}`", variant.name));
            continue;
        }
        let shown = changed.len().min(DIFFERENCES_MAX);
        for (index, difference) in changed.iter().take(shown).enumerate() {
            let unset = || "(not set)".to_owned();
            rows.push(vec![
                if index == 0 {
                    variant.name.clone()
                } else {
                    String::new()
                },
                format!("`{}`", difference.key),
                difference.baseline.clone().unwrap_or_else(unset),
                difference.variant.clone().unwrap_or_else(unset),
            ]);
        }
        if changed.len() > shown {
            rows.push(vec![
                String::new(),
                format!("and {} more keys", changed.len() - shown),
                String::new(),
                String::new(),
            ]);
        }
    }
    if !rows.is_empty() {
        page.table("changes", &Table { header, rows }, None);
    }
    if !same.is_empty() {
        page.paragraph(&format!(
            "The same settings as \"{baseline}\" (any difference is in expectations only): {}.",
            same.join(", ")
        ));
    }
}

fn faults(page: &mut Page, report: &RunReport) {
    let faults: std::collections::BTreeSet<String> = report
        .variants
        .iter()
        .flat_map(|v| &v.faults)
        .map(|f| {
            let end = f
                .end_ms
                .map_or_else(|| "the end".to_owned(), |end| format!("{end} ms"));
            format!(
                "{}: {} on {}, from {} ms to {end}",
                f.name, f.kind, f.target, f.start_ms
            )
        })
        .collect();
    if !faults.is_empty() {
        page.heading(2, "Faults");
        page.list("faults", &faults.into_iter().collect::<Vec<_>>());
    }
}

fn charts(page: &mut Page, charts: &[(&'static str, String)]) {
    if charts.is_empty() {
        return;
    }
    page.heading(2, "Charts");
    for (name, svg) in charts {
        page.figure(name, svg);
    }
}

fn state_changes(page: &mut Page, report: &RunReport) {
    page.heading(2, "State changes");
    if report.variants.iter().all(|v| v.log.is_empty()) {
        page.paragraph("No breaker, reconnect slot, fault or memory limit changed state.");
        return;
    }
    // Each variant's log closed, its size on the line that opens it: eleven variants' logs
    // open made the page 16,000 px long (issue 31).
    for variant in report.variants.iter().filter(|v| !v.log.is_empty()) {
        let changes = variant.log.len() as u64 + variant.log_dropped;
        let noun = if changes == 1 { "change" } else { "changes" };
        page.start_collapsed("log", &format!("{}: {changes} state {noun}", variant.name));
        let rows = variant
            .log
            .iter()
            .take(LOG_ROWS_MAX)
            .map(|entry| {
                let detail = match (entry.from, entry.link) {
                    (Some(from), _) => format!("from {from}"),
                    (_, Some(link)) => format!("link {link}"),
                    _ => String::new(),
                };
                vec![
                    format!("{:.3}", entry.at_ms),
                    entry.event.clone(),
                    format!("{} {}", entry.target_kind, entry.target),
                    detail,
                ]
            })
            .collect();
        let header = ["at ms", "event", "what", "detail"]
            .map(str::to_owned)
            .to_vec();
        page.table("log", &Table { header, rows }, None);
        let hidden = variant.log.len().saturating_sub(LOG_ROWS_MAX) as u64 + variant.log_dropped;
        if hidden > 0 {
            page.paragraph(&format!(
                "{hidden} more (run with `--events PATH` for all that were kept)"
            ));
        }
        page.end_collapsed();
    }
}

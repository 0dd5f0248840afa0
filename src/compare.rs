//! `outagelab compare A.json B.json`: two run reports overlaid variant by variant
//! (`outagelab_report::compare`), printed as tables, written as JSON and drawn.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use outagelab_report::compare::{Comparison, Runs, VariantComparison, Window};

use crate::say;
use crate::table::Table;

/// Most bucket rows printed per variant; the rest are in `--json`.
const BUCKET_ROWS_MAX: usize = 60;

pub fn run(
    reports: [&Path; 2],
    bucket_ms: Option<f64>,
    json: Option<&Path>,
    plot: Option<&Path>,
) -> ExitCode {
    if plot == Some(Path::new("-")) {
        eprintln!(
            "compare: --plot - is refused: --plot writes several files into a directory, and \
             standard output holds one; give a directory name"
        );
        return ExitCode::from(2);
    }
    let to_stdout = json == Some(Path::new("-"));
    if to_stdout {
        crate::stdout_is_a_document();
    }
    let mut read = Vec::with_capacity(2);
    for path in reports {
        let parsed = std::fs::read_to_string(path)
            .map_err(|error| error.to_string())
            .and_then(|text| Runs::from_json(&text));
        match parsed {
            Ok(runs) => read.push(runs),
            Err(error) => {
                eprintln!("compare: {}: {error}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    let labels = reports.map(|path| path.display().to_string());
    let comparison = match Comparison::of(labels, &read[0], &read[1], bucket_ms) {
        Ok(comparison) => comparison,
        Err(message) => {
            eprintln!("compare: {message}");
            return ExitCode::from(2);
        }
    };
    say(&render(&comparison));
    if let Some(path) = json {
        let mut text =
            serde_json::to_string_pretty(&comparison).expect("a comparison always serialises");
        text.push('\n');
        if to_stdout {
            let mut stdout = std::io::stdout().lock();
            let _ = std::io::Write::write_all(&mut stdout, text.as_bytes())
                .and_then(|()| std::io::Write::flush(&mut stdout));
        } else {
            if let Err(error) = outagelab_report::write::replace_file(path, text.as_bytes()) {
                eprintln!("cannot write {}: {error}", path.display());
                return ExitCode::from(2);
            }
            eprintln!("wrote {}", path.display());
        }
    }
    if let Some(dir) = plot
        && let Err(code) = crate::say_written(outagelab_plots::compare::write_compare_charts(
            &comparison,
            dir,
        ))
    {
        return code;
    }
    ExitCode::SUCCESS
}

fn seconds(window: Option<Window>) -> String {
    window.map_or_else(
        || "none".to_owned(),
        |w| format!("{:.1}-{:.1}", w.start_ms / 1000.0, w.end_ms / 1000.0),
    )
}

fn largest_gap(values: &[Option<f64>]) -> String {
    values
        .iter()
        .flatten()
        .map(|v| v.abs())
        .reduce(f64::max)
        .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

/// The comparison as text: a row per variant, then each variant's buckets around its failure
/// windows.
pub fn render(comparison: &Comparison) -> String {
    let [a, b] = &comparison.labels;
    let mut out = format!(
        "compare: A = {a}, B = {b} (scenario {}), buckets of {} ms; differences are B - A\n\n",
        comparison.scenarios[0], comparison.bucket_ms
    );
    let mut table = Table {
        header: [
            "variant",
            "errors A",
            "errors B",
            "failing A s",
            "failing B s",
            "shift start/end",
            "max |d errors|",
            "max |d p50| ms",
            "max |d p99| ms",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows: Vec::new(),
    };
    for variant in &comparison.variants {
        let [errors_a, errors_b] = &variant.errors;
        table.rows.push(vec![
            variant.name.clone(),
            errors_a.iter().sum::<u64>().to_string(),
            errors_b.iter().sum::<u64>().to_string(),
            seconds(variant.windows[0]),
            seconds(variant.windows[1]),
            variant
                .window_shift_buckets
                .map_or_else(|| "-".to_owned(), |[s, e]| format!("{s:+} / {e:+}")),
            (variant.errors_difference.iter())
                .map(|d| d.unsigned_abs())
                .max()
                .unwrap_or(0)
                .to_string(),
            largest_gap(&variant.p50_difference_ms),
            largest_gap(&variant.p99_difference_ms),
        ]);
    }
    out.push_str(&table.render());
    out.push_str(
        "(failing: from the start of the first bucket with an error to the end of the last; \
         shift: how many buckets later B's starts and ends)\n",
    );
    for variant in &comparison.variants {
        for (report, runner) in variant.runners.iter().enumerate() {
            if let Some(late) = runner.as_ref().and_then(|runner| runner.late_summary()) {
                writeln!(
                    out,
                    "{}'s runner in {}: {late}: what was due then went out as a burst",
                    ["A", "B"][report],
                    variant.name,
                )
                .unwrap();
            }
        }
    }
    for (report, names) in comparison.unmatched.iter().enumerate() {
        if !names.is_empty() {
            let which = ["A", "B"][report];
            writeln!(out, "only in {which}: {}", names.join(", ")).unwrap();
        }
    }
    for variant in &comparison.variants {
        out.push_str(&summaries(variant));
    }
    for variant in &comparison.variants {
        out.push_str(&buckets(variant));
    }
    out
}

/// Most summary rows printed per variant; the rest are in `--json`.
const SUMMARY_ROWS_MAX: usize = 60;

/// Every count, peak and limit both summaries have that is not zero on both sides, side by
/// side with the difference and a verdict (all of them, zeros too, are in `--json`).
fn summaries(variant: &VariantComparison) -> String {
    let rows: Vec<_> = (variant.summary.iter())
        .filter(|row| row.values != [0.0, 0.0])
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let number = |v: f64| {
        if v.fract() == 0.0 && v.abs() < 1e15 {
            format!("{v:.0}")
        } else {
            format!("{v:.2}")
        }
    };
    let mut table = Table {
        header: ["metric", "A", "B", "d", "B vs A"]
            .map(str::to_owned)
            .to_vec(),
        rows: Vec::new(),
    };
    for row in rows.iter().take(SUMMARY_ROWS_MAX) {
        table.rows.push(vec![
            row.metric.clone(),
            number(row.values[0]),
            number(row.values[1]),
            if row.difference == 0.0 {
                String::new()
            } else {
                format!(
                    "{}{}",
                    if row.difference > 0.0 { "+" } else { "" },
                    number(row.difference)
                )
            },
            row.verdict.to_owned(),
        ]);
    }
    let differ = rows.iter().filter(|row| row.verdict != "same").count();
    let mut out = format!(
        "\n{}: summaries ({differ} of {} numbers differ; zeros on both sides left out)\n\n",
        variant.name,
        rows.len()
    );
    out.push_str(&table.render());
    if rows.len() > SUMMARY_ROWS_MAX {
        writeln!(out, "({} more in --json)", rows.len() - SUMMARY_ROWS_MAX).unwrap();
    }
    out
}

/// The buckets of one variant from one before its earliest failure window to one after its
/// latest (at most [`BUCKET_ROWS_MAX`]); nothing when neither report has an error.
fn buckets(variant: &VariantComparison) -> String {
    let windows: Vec<Window> = variant.windows.iter().flatten().copied().collect();
    let (Some(first), Some(last)) = (
        windows.iter().map(|w| w.first_bucket).min(),
        windows.iter().map(|w| w.last_bucket).max(),
    ) else {
        return String::new();
    };
    let from = first.saturating_sub(1);
    let to = (last + 1).min(variant.start_ms.len() - 1);
    let shown = to - from + 1;
    let mut table = Table {
        header: [
            "from s", "errors A", "errors B", "d", "p50 A", "p50 B", "p99 A", "p99 B",
        ]
        .map(str::to_owned)
        .to_vec(),
        rows: Vec::new(),
    };
    for index in (from..=to).take(BUCKET_ROWS_MAX) {
        table.rows.push(vec![
            format!("{:.1}", variant.start_ms[index] / 1000.0),
            variant.errors[0][index].to_string(),
            variant.errors[1][index].to_string(),
            format!("{:+}", variant.errors_difference[index]),
            ms(variant.p50_ms[0][index]),
            ms(variant.p50_ms[1][index]),
            ms(variant.p99_ms[0][index]),
            ms(variant.p99_ms[1][index]),
        ]);
    }
    let mut out = format!(
        "\n{}: buckets around the failure windows (ms)\n\n",
        variant.name
    );
    out.push_str(&table.render());
    if shown > BUCKET_ROWS_MAX {
        writeln!(out, "({} more buckets in --json)", shown - BUCKET_ROWS_MAX).unwrap();
    }
    out
}

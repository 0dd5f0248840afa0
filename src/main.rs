//! `outagelab`: run a scenario file's variants side by side, check its expectations, and write
//! the report as JSON, CSV and charts.
//!
//! Exit codes: 0 when every run completed and every expectation held; 1 when an expectation
//! failed, a run was cut short by its budget, or a run broke an invariant (a monitor fired);
//! 2 when the file or the command line is wrong.

mod table;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Parser, Subcommand};
use outagelab_report::{RunReport, Verdict, write};
use outagelab_scenario_file::ScenarioFile;
use outagelab_sim::{Bugs, SimError};

#[derive(Parser)]
#[command(
    name = "outagelab",
    version,
    about = "Simulate how services behave when Redis or a database is slow, full, or gone"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run every variant of a scenario file and compare them.
    Run {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Use this seed instead of the file's.
        #[arg(long)]
        seed: Option<u64>,
        /// Write the full report (summaries and time series) as JSON to this file.
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Write series.csv and summary.csv into this directory.
        #[arg(long, value_name = "DIR")]
        csv: Option<PathBuf>,
        /// Write the charts (PNG and SVG) into this directory.
        #[arg(long, value_name = "DIR")]
        plot: Option<PathBuf>,
        /// Show no progress bar (it shows on a terminal for variants that run over a second).
        #[arg(long)]
        quiet: bool,
        /// Plant a bug on purpose, to see an invariant monitor catch it (for tests).
        #[arg(long, hide = true, value_name = "BUG", value_parser = clap::builder::PossibleValuesParser::new(Bugs::NAMES))]
        plant_bug: Option<String>,
    },
    /// Check a scenario file without running it.
    Validate {
        /// The scenario file (TOML).
        file: PathBuf,
        /// Print the values each breaker and retry policy runs with, per variant: what its
        /// preset expanded to after the file's overrides, with the preset's source.
        #[arg(long)]
        explain: bool,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Validate { file, explain } => match outagelab_scenario_file::load(&file) {
            Ok(scenario) => {
                let count = scenario.variants.len();
                let plural = if count == 1 { "" } else { "s" };
                say(&format!(
                    "{}: ok ({count} variant{plural})\n",
                    file.display()
                ));
                if explain {
                    for variant in &scenario.variants {
                        say(&format!(
                            "\n# variant {}\n{}",
                            variant.name,
                            outagelab_scenario_file::explain(variant)
                        ));
                    }
                }
                ExitCode::SUCCESS
            }
            Err(diagnostics) => {
                eprintln!("{diagnostics}");
                ExitCode::from(2)
            }
        },
        Command::Run {
            file,
            seed,
            json,
            csv,
            plot,
            quiet,
            plant_bug,
        } => {
            let bugs = plant_bug
                .as_deref()
                .and_then(Bugs::named)
                .unwrap_or_default();
            run(
                &file,
                seed,
                bugs,
                quiet,
                json.as_deref(),
                csv.as_deref(),
                plot.as_deref(),
            )
        }
    }
}

fn run(
    file: &Path,
    seed: Option<u64>,
    bugs: Bugs,
    quiet: bool,
    json: Option<&Path>,
    csv: Option<&Path>,
    plot: Option<&Path>,
) -> ExitCode {
    if let Err(message) = check_outputs(file, json, csv, plot) {
        eprintln!("{message}");
        return ExitCode::from(2);
    }
    if json == Some(Path::new("-")) {
        STDOUT_IS_JSON.store(true, Ordering::Relaxed);
    }
    let mut scenario = match outagelab_scenario_file::load(file) {
        Ok(scenario) => scenario,
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            return ExitCode::from(2);
        }
    };
    if let Some(seed) = seed {
        scenario.seed = seed;
        for variant in &mut scenario.variants {
            variant.scenario.seed = seed;
        }
    }
    let report = match simulate(&scenario, bugs, quiet) {
        Ok(report) => report,
        Err((variant, error)) => {
            eprintln!("variant \"{variant}\": {error}");
            let planted = (bugs != Bugs::default())
                .then(|| {
                    Bugs::NAMES
                        .into_iter()
                        .find(|name| Bugs::named(name) == Some(bugs))
                        .map(|name| format!(" --plant-bug {name}"))
                })
                .flatten()
                .unwrap_or_default();
            eprintln!(
                "reproduce with: outagelab run {} --seed {}{planted}",
                file.display(),
                scenario.seed
            );
            return ExitCode::from(1);
        }
    };
    say(&table::render(&report));
    let mut failed = false;
    for variant in &report.variants {
        if variant.verdict.is_budget() {
            failed = true;
            let advice = match variant.verdict {
                Verdict::MemoryBudget => {
                    "what it holds (requests in flight, queued commands, its series) passed \
                     [run] memory_max: raise it, shorten the run or widen [metrics] bucket, or \
                     look for work that piles up without end"
                }
                _ => "raise [run] events_max or time_max, or look for a feedback loop",
            };
            eprintln!(
                "variant \"{}\" was stopped by its run budget ({}) at {} ms: its figures are \
                 incomplete; {advice}",
                variant.name,
                variant.verdict.name(),
                variant.end_ms
            );
        }
    }
    failed |= !check_expectations(&scenario, &report);
    let outputs: [(Option<&Path>, Writer); 3] =
        [(json, write_json), (csv, write_csv), (plot, write_plots)];
    for (target, writer) in outputs {
        if let Some(target) = target {
            match writer(&report, target) {
                Ok(paths) => {
                    for path in paths {
                        eprintln!("wrote {}", path.display());
                    }
                }
                Err(message) => {
                    eprintln!("{message}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    if failed {
        eprintln!(
            "reproduce with: outagelab run {} --seed {}",
            file.display(),
            scenario.seed
        );
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Set when `--json -` sends the report to standard output: everything else goes to standard
/// error then, so the output stays one JSON document.
static STDOUT_IS_JSON: AtomicBool = AtomicBool::new(false);

/// Refuses outputs that would overwrite the scenario file or each other, before anything runs.
fn check_outputs(
    file: &Path,
    json: Option<&Path>,
    csv: Option<&Path>,
    plot: Option<&Path>,
) -> Result<(), String> {
    // Compared as absolute paths, with `.` and `..` resolved where the path exists.
    let absolute = |path: &Path| {
        std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_owned())
    };
    let input = absolute(file);
    let Some(json) = json.filter(|json| *json != Path::new("-")) else {
        return Ok(());
    };
    let json_path = absolute(json);
    if json_path == input {
        return Err(format!(
            "--json {} is the scenario file itself: writing the report there would destroy it",
            json.display()
        ));
    }
    if json_path.is_dir() {
        return Err(format!(
            "--json {} is a directory: give a file name (or - for standard output)",
            json.display()
        ));
    }
    if let Some(dir) = csv {
        let dir = absolute(dir);
        for name in ["series.csv", "summary.csv"] {
            if json_path == dir.join(name) {
                return Err(format!(
                    "--json {} is where --csv writes {name}: choose another name",
                    json.display()
                ));
            }
        }
    }
    if let Some(dir) = plot
        && json_path.parent() == Some(absolute(dir).as_path())
        && json_path
            .extension()
            .is_some_and(|extension| extension == "png" || extension == "svg")
    {
        return Err(format!(
            "--json {} is in the --plot directory with a chart's extension: a chart may \
             overwrite it",
            json.display()
        ));
    }
    Ok(())
}

/// Writes to standard output (to standard error when it carries the JSON). A reader that went away (`outagelab run ... | head`) is not an
/// error worth a panic: the rest of the output is dropped and the exit code stays meaningful.
fn say(text: &str) {
    if STDOUT_IS_JSON.load(Ordering::Relaxed) {
        eprint!("{text}");
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// Writes one kind of output for a report to a path; returns the files written.
type Writer = fn(&RunReport, &Path) -> Result<Vec<PathBuf>, String>;

/// Runs every variant on the file's seed. Fails with the first variant whose run broke an
/// invariant.
fn simulate(
    scenario: &ScenarioFile,
    bugs: Bugs,
    quiet: bool,
) -> Result<RunReport, (String, SimError)> {
    let count = scenario.variants.len();
    let variants = scenario
        .variants
        .iter()
        .enumerate()
        .map(|(index, variant)| {
            let label = format!("variant {}/{count}: {}", index + 1, variant.name);
            let horizon = variant.scenario.limits.horizon.map(|h| h.as_nanos());
            let mut progress = Progress::new(label, horizon, quiet);
            let mut report = outagelab_sim::run_observed(&variant.scenario, bugs, &mut |now| {
                progress.at(now.as_nanos())
            })
            .map_err(|error| (variant.name.clone(), error))?;
            progress.done();
            report.sweep_x = variant.sweep_x;
            Ok(report)
        })
        .collect::<Result<_, _>>()?;
    Ok(RunReport {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        sweep: scenario.sweep.clone(),
        variants,
    })
}

/// A progress bar on standard error for one variant's run: shown only on a terminal, only
/// once the run has taken a second (a quick run prints nothing), and never with `--quiet`. It
/// reads the wall clock, which the simulation never does: it cannot change a result.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: String,
    /// Nanoseconds of virtual time the run goes to, when it has a horizon.
    end_nanos: Option<u64>,
    started: std::time::Instant,
}

impl Progress {
    fn new(label: String, end_nanos: Option<u64>, quiet: bool) -> Progress {
        use std::io::IsTerminal;
        let shown = !quiet && std::io::stderr().is_terminal();
        Progress {
            bar: shown.then(indicatif::ProgressBar::hidden),
            label,
            end_nanos,
            started: std::time::Instant::now(),
        }
    }

    /// The run has reached `now_nanos` of virtual time.
    fn at(&mut self, now_nanos: u64) {
        let Some(bar) = &self.bar else {
            return;
        };
        if bar.is_hidden() {
            if self.started.elapsed() < std::time::Duration::from_secs(1) {
                return;
            }
            let style = match self.end_nanos {
                Some(end) => {
                    bar.set_length(end / 1_000_000);
                    "{msg} [{bar:30}] {pos}/{len} ms simulated, {elapsed}"
                }
                None => "{spinner} {msg}: {pos} ms simulated, {elapsed}",
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(style) {
                bar.set_style(style);
            }
            bar.set_message(self.label.clone());
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        bar.set_position(now_nanos / 1_000_000);
    }

    fn done(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Prints a count of the expectations that held and every one that did not; returns whether
/// all held.
fn check_expectations(scenario: &ScenarioFile, report: &RunReport) -> bool {
    let (mut held, mut failures) = (0, Vec::new());
    for (variant, result) in scenario.variants.iter().zip(&report.variants) {
        for located in &variant.expectations {
            let expectation = &located.expectation;
            match expectation.evaluate(&result.summary) {
                Ok(evaluation) if evaluation.passed => held += 1,
                Ok(evaluation) => {
                    let actual = evaluation
                        .actual
                        .map_or_else(|| "no value".to_owned(), |value| value.to_string());
                    failures.push(format!(
                        "  FAIL  {}: {expectation} (actual {actual})  [{}]",
                        variant.name, located.location
                    ));
                }
                Err(message) => failures.push(format!(
                    "  FAIL  {}: {expectation}: {message}  [{}]",
                    variant.name, located.location
                )),
            }
        }
    }
    if held + failures.len() > 0 {
        let mut text = format!("\nexpectations: {held} held, {} failed\n", failures.len());
        for failure in &failures {
            text.push_str(failure);
            text.push('\n');
        }
        say(&text);
    }
    failures.is_empty()
}

fn write_json(report: &RunReport, path: &Path) -> Result<Vec<PathBuf>, String> {
    if let Some(parent) = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && path != Path::new("-"))
    {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    if path == Path::new("-") {
        let mut stdout = std::io::stdout().lock();
        let _ = stdout
            .write_all(write::to_json(report).as_bytes())
            .and_then(|()| stdout.flush());
        return Ok(Vec::new());
    }
    write::replace_file(path, write::to_json(report).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(vec![path.to_owned()])
}

fn write_csv(report: &RunReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let files = [
        (dir.join("series.csv"), write::series_csv(report)),
        (dir.join("summary.csv"), write::summary_csv(report)),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        write::replace_file(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

fn write_plots(report: &RunReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    outagelab_plots::write_charts(report, dir).map_err(|e| e.to_string())
}

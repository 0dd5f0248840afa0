//! `outagelab explore FILE`: draw fault schedules from the file's `[explore]` table, run the
//! chosen variants under each, and keep the schedules that break the design: a monitor fires
//! (an invariant broken), one of the variant's own expectations fails, or the run stops on its
//! budget (what `outagelab run` exits 1 on). Every schedule is judged against every claim: a
//! schedule that breaks two expectations counts for both, so the counts do not depend on the
//! order the claims are written in. Each way of breaking found (one per claim) is shrunk on its
//! own, proptest style, to a small schedule that still breaks that claim, and written as a
//! scenario file that `outagelab run` reproduces.
//!
//! Deterministic from `--seed`: schedule `i` is drawn from a stream of its own (the seed and
//! `i`), schedules run on every core and come back in their order, and the shrinking runs one
//! candidate at a time; so the findings are the same with any `--jobs`.
//!
//! Here: the request, the tally, the command's flow and what it prints and writes. Drawing
//! schedules and writing them into the file's text is in `draw.rs`, judging and tallying them
//! (and joining shards) in `search.rs`, shrinking a finding in `shrink.rs`, refining the
//! worst by the objective in `refine.rs`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use outagelab_report::study::Shard;
use outagelab_scenario_file::{ExploreSpec, Override};
use outagelab_sim::Bugs;
use serde::{Deserialize, Serialize};

use crate::study::RunsProgress;

mod coverage;
mod draw;
mod refine;
mod search;
mod shrink;

/// What the command line asks of an exploration.
pub struct Request {
    pub sets: Vec<Override>,
    /// The exploration's own seed: which schedules are drawn.
    pub seed: u64,
    pub jobs: Option<usize>,
    /// Where the reproducers go.
    pub out: PathBuf,
    pub bugs: Bugs,
    /// The name `--plant-bug` was given, for the reproducing command.
    pub bug_name: Option<String>,
    pub quiet: bool,
    /// Draw and judge only this slice of the schedules, and write the tally to `json`.
    pub shard: Option<Shard>,
    pub json: Option<PathBuf>,
    /// Join these shards' tallies instead of searching, then shrink and write as one run.
    pub merge: Vec<PathBuf>,
    /// Instead of `[explore] runs_max`.
    pub runs: Option<u64>,
    /// Stop drawing after the chunk of 256 schedules during which this much wall-clock time
    /// has passed: the findings are then those of the schedules judged, which `--runs` with
    /// their count gives again exactly.
    pub time_max: Option<std::time::Duration>,
}

/// One fault of a schedule: indices into the template's lists, times in nanoseconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Fault {
    template: usize,
    target: usize,
    kind: usize,
    at: u64,
    /// `None`: an instant kind, or a template without a duration (the fault lasts to the end).
    duration: Option<u64>,
}

/// A fault schedule, with the run seed and the parameters it was drawn with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Schedule {
    pub(crate) seed: u64,
    pub(crate) faults: Vec<Fault>,
    /// One per `[explore.params]` key; `None`: the file's own value.
    pub(crate) params: Vec<Option<f64>>,
}

/// How a schedule broke the design: which variant, and what failed. Two schedules break it
/// the same way when these are equal.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) struct Way {
    pub(crate) variant: String,
    pub(crate) what: String,
}

/// What a schedule did.
pub(crate) enum Outcome {
    Held,
    /// Each variant that broke (in the file's order), the way and the message `run` prints
    /// for it: never empty.
    Broke(Vec<(Way, String)>),
    /// The file refuses the schedule (e.g. two overlapping `stop`s of one server): why.
    Refused(String),
}

/// What a schedule did, and each variant's value of the objective (`[explore] objective`)
/// where it ran to a report and the metric has one.
pub(crate) struct Judged {
    pub(crate) outcome: Outcome,
    pub(crate) scores: Vec<(String, f64)>,
    /// What the runs reached, for a coverage-guided search (empty in a random one).
    pub(crate) reached: Vec<coverage::Reached>,
}

/// The worst schedule by the objective: which variant, its value, and the schedule's number
/// (its drawn schedule).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Worst {
    pub(crate) variant: String,
    pub(crate) value: f64,
    pub(crate) index: u64,
}

/// One way of breaking found, with how often and where first (schedule `first` is drawn
/// again from the seed and its number).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Finding {
    pub(crate) way: Way,
    pub(crate) message: String,
    pub(crate) count: u64,
    pub(crate) first: u64,
    /// A schedule found by refining or mutated by a coverage-guided search (not drawn by
    /// number): kept as it is.
    #[serde(skip)]
    pub(crate) refined: Option<Schedule>,
}

/// What the schedules of an exploration (or of one shard of it) did: what `--shard` writes and
/// `--merge` joins. The findings in the order first found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Tally {
    pub(crate) scenario: String,
    /// FNV-1a of the file's text, the command line's `--set`s and planted bug: shards of one
    /// exploration have the same.
    pub(crate) file_hash: String,
    pub(crate) seed: u64,
    pub(crate) runs_max: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) shard: Option<Shard>,
    pub(crate) held: u64,
    /// Schedules that broke at least one variant.
    pub(crate) broke: u64,
    pub(crate) refused: u64,
    /// The first schedule the file refused, by number, and why.
    pub(crate) first_refusal: Option<(u64, String)>,
    pub(crate) findings: Vec<Finding>,
    /// With an objective: the worst schedule found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) worst: Option<Worst>,
    /// The worst schedule, when a coverage-guided search mutated it (not drawn by number).
    #[serde(skip)]
    pub(crate) worst_schedule: Option<Schedule>,
}

impl Tally {
    /// Schedules judged: `runs_max`, or fewer when `--time-max` stopped the search.
    fn judged(&self) -> u64 {
        self.held + self.broke + self.refused
    }
}

pub fn run(file: &Path, request: &Request) -> ExitCode {
    let (text, scenario, spec) = match crate::read_for(
        file,
        &request.sets,
        "explore",
        "name the faults and parameters to draw and their ranges",
        |s| s.explore.clone(),
    ) {
        Ok(read) => read,
        Err(code) => return code,
    };
    let mut spec = spec;
    if let Some(runs) = request.runs {
        spec.runs_max = runs;
    }
    let explorer = Explorer {
        name: scenario.name.clone(),
        text: &text,
        file,
        spec: &spec,
        sets: &request.sets,
        bugs: request.bugs,
        budget: crate::process_budget(&scenario),
    };
    if let Err(message) = explorer.check_templates() {
        eprintln!("{}: {message}", file.display());
        return ExitCode::from(2);
    }
    if spec.search == outagelab_scenario_file::Search::Coverage
        && (request.shard.is_some() || !request.merge.is_empty())
    {
        // Each batch of a coverage-guided search mutates what the batches before it found.
        eprintln!(
            "{}: [explore] search = \"coverage\" does not shard: each batch of schedules \
             mutates what the batches before it reached; shard a random search (search = \
             \"random\", the default)",
            file.display()
        );
        return ExitCode::from(2);
    }
    // The wall clock only measures the search (schedules a second, on standard error), never
    // decides what it finds.
    let started = std::time::Instant::now();
    let tally = if request.merge.is_empty() {
        crate::on_threads(request.jobs, || {
            explorer.search(request.seed, request.quiet, request.shard, request.time_max)
        })
    } else {
        let mut parts = Vec::new();
        for path in &request.merge {
            let read = std::fs::read_to_string(path)
                .map_err(|e| e.to_string())
                .and_then(|text| serde_json::from_str::<Tally>(&text).map_err(|e| e.to_string()));
            match read {
                Ok(tally) => parts.push((path.clone(), tally)),
                Err(error) => {
                    eprintln!(
                        "--merge: {}: not an exploration's shard: {error}",
                        path.display()
                    );
                    return ExitCode::from(2);
                }
            }
        }
        match explorer.merge(&parts) {
            Ok(tally) => tally,
            Err(message) => {
                eprintln!("{message}");
                return ExitCode::from(2);
            }
        }
    };
    if let Some(shard) = tally.shard {
        let json = request
            .json
            .as_deref()
            .expect("clap requires --json with --shard");
        let text = serde_json::to_string_pretty(&tally).expect("a tally serialises") + "\n";
        if let Err(error) = std::fs::write(json, text) {
            eprintln!("cannot write {}: {error}", json.display());
            return ExitCode::from(2);
        }
        let bug = (request.bug_name.iter())
            .flat_map(|bug| ["--plant-bug".to_owned(), bug.clone()])
            .collect::<Vec<_>>();
        say(&format!(
            "shard {}/{}: {} held, {} broke, {} refused; wrote {}; join every shard with `{}`",
            shard.index,
            shard.count,
            tally.held,
            tally.broke,
            tally.refused,
            json.display(),
            crate::shard::merge_command("explore", file, &request.sets, &bug)
        ));
        return ExitCode::SUCCESS;
    }
    let searched_for = request.merge.is_empty().then(|| started.elapsed());
    explorer.conclude(tally, &scenario.name, request, searched_for)
}

impl Explorer<'_> {
    /// Prints the tally, shrinks each finding and writes its reproducer: the same for one
    /// search and for merged shards.
    fn conclude(
        &self,
        mut tally: Tally,
        name: &str,
        request: &Request,
        searched_for: Option<std::time::Duration>,
    ) -> ExitCode {
        let spec = self.spec;
        say(&format!(
            "explore \"{name}\" (--seed {}): {} schedules of {} on seeds {}..{}, variants {}\n\
             held {}, broke {}, refused by the file {}{}",
            tally.seed,
            tally.judged(),
            self.what_varies(),
            spec.seeds.start(),
            spec.seeds.end(),
            quoted(&spec.variants),
            tally.held,
            tally.broke,
            tally.refused,
            tally
                .first_refusal
                .as_ref()
                .map_or(String::new(), |(_, why)| format!(
                    " (the first: {})",
                    self.in_file_terms(why).lines().next().unwrap_or_default()
                )),
        ));
        if let Some(elapsed) = searched_for
            && !request.quiet
        {
            // On standard error: what standard output says is the same bytes on any machine.
            let seconds = elapsed.as_secs_f64().max(1e-9);
            eprintln!(
                "  {:.1} schedules/s: {} judged in {seconds:.2} s of wall-clock time",
                tally.judged() as f64 / seconds,
                tally.judged(),
            );
        }
        if tally.held == 0 && tally.broke == 0 && tally.refused > 0 {
            let why = tally
                .first_refusal
                .as_ref()
                .map_or("", |(_, why)| why.as_str());
            eprintln!(
                "{}: every schedule drawn was refused by the file, so nothing was judged: \
                 narrow [explore]'s ranges; the first refusal:\n{}",
                self.file.display(),
                self.in_file_terms(why)
            );
            return ExitCode::from(2);
        }
        // Per claim: every schedule is judged against every claim of every variant, so each
        // count is the schedules that broke that claim, whatever else they broke.
        for finding in &tally.findings {
            say(&format!(
                "  broke variant \"{}\": {}: {} of {} schedules",
                finding.way.variant,
                finding.way.what,
                finding.count,
                tally.judged()
            ));
        }
        if tally.judged() < spec.runs_max {
            say(&format!(
                "(--time-max stopped the search after {} of {} schedules: `--runs {}` judges \
                 exactly these again)",
                tally.judged(),
                spec.runs_max,
                tally.judged()
            ));
        }
        if let Err(error) = std::fs::create_dir_all(&request.out) {
            eprintln!("cannot create {}: {error}", request.out.display());
            return ExitCode::from(2);
        }
        if let Some(objective) = &spec.objective
            && let Err(message) = self.report_worst(&mut tally, objective, request)
        {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
        if tally.findings.is_empty() {
            say("\nno schedule broke the design");
            return ExitCode::SUCCESS;
        }
        for (index, finding) in tally.findings.iter().enumerate() {
            let number = index + 1;
            say(&format!(
                "\nfinding {number}: variant \"{}\": {} ({})\n  {}",
                finding.way.variant,
                finding.way.what,
                match finding.refined {
                    Some(_) if finding.first >= spec.runs_max => {
                        format!("found while refining, schedule #{}", finding.first)
                    }
                    Some(_) => format!(
                        "{} of {} schedules, first #{}, a mutation",
                        finding.count,
                        tally.judged(),
                        finding.first
                    ),
                    None => format!(
                        "{} of {} schedules, first #{}",
                        finding.count,
                        tally.judged(),
                        finding.first
                    ),
                },
                finding.message.lines().next().unwrap_or_default()
            ));
            let drawn =
                (finding.refined.clone()).unwrap_or_else(|| self.draw(tally.seed, finding.first));
            say(&format!("  as drawn: {}", self.describe(&drawn)));
            let (shrunk, runs) = self.shrink(&drawn, &finding.way);
            say(&format!(
                "  shrunk in {runs} runs: {}",
                self.describe(&shrunk)
            ));
            let path = request.out.join(format!("finding-{number}.toml"));
            let written = self
                .reproducer(
                    &shrunk,
                    &finding.way,
                    &path,
                    tally.seed,
                    request.bug_name.as_deref(),
                )
                .and_then(|reproducer| {
                    std::fs::write(&path, &reproducer.text)
                        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
                    Ok(reproducer.command)
                });
            match written {
                Ok(command) => say(&format!(
                    "  wrote {}; reproduce with: {command}",
                    path.display()
                )),
                Err(message) => {
                    eprintln!("{message}");
                    return ExitCode::from(2);
                }
            }
            match self.report_of(&path) {
                Ok(Some(json)) => say(&format!(
                    "  wrote {} (the report of that run)",
                    json.display()
                )),
                Ok(None) => {}
                Err(message) => {
                    eprintln!("{message}");
                    return ExitCode::from(2);
                }
            }
        }
        // Like `run`, a broken design is exit 1: CI can run an exploration as a check.
        ExitCode::from(1)
    }
    /// The worst schedule by the objective: as drawn, then refined around (`[explore]
    /// refine` schedules, each a nudge of the worst so far), written as `worst.toml`. Breaks
    /// met while refining join the findings.
    fn report_worst(
        &self,
        tally: &mut Tally,
        objective: &outagelab_scenario_file::ExploreObjective,
        request: &Request,
    ) -> Result<(), String> {
        let direction = if objective.maximise { "max" } else { "min" };
        let Some(drawn) = tally.worst.clone() else {
            say(&format!(
                "\nworst by {direction} {}: no run gave it a value",
                objective.metric
            ));
            return Ok(());
        };
        let mut schedule =
            (tally.worst_schedule.clone()).unwrap_or_else(|| self.draw(tally.seed, drawn.index));
        say(&format!(
            "\nworst by {direction} {}: {} (variant \"{}\"), schedule #{}: {}",
            objective.metric,
            number(drawn.value),
            drawn.variant,
            drawn.index,
            self.describe(&schedule)
        ));
        let mut worst = drawn.clone();
        if self.spec.refine > 0 {
            (schedule, worst) = self.refine(tally, schedule, drawn);
            say(&format!(
                "  refined around it in {} schedules: {} (variant \"{}\"): {}",
                self.spec.refine,
                number(worst.value),
                worst.variant,
                self.describe(&schedule)
            ));
        }
        let path = request.out.join("worst.toml");
        let header = format!(
            "The worst schedule `outagelab explore {} --seed {}` found by {direction} {}: {} \
             (variant \"{}\")\nunder {}.\nRun with: {{command}}",
            self.file.display(),
            tally.seed,
            objective.metric,
            number(worst.value),
            worst.variant,
            self.describe(&schedule)
        );
        let written = self.standalone(&schedule, &path, request.bug_name.as_deref(), &header)?;
        std::fs::write(&path, &written.text)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        say(&format!(
            "  wrote {}; run with: {}",
            path.display(),
            written.command
        ));
        Ok(())
    }

    /// The report of `run` on the reproducer at `path`, written beside it as JSON
    /// (`finding-N.json`); `None` when the run stops on a broken invariant, which leaves no
    /// report (its message is the finding's).
    fn report_of(&self, path: &Path) -> Result<Option<PathBuf>, String> {
        let scenario = outagelab_scenario_file::load_with(path, self.sets)
            .map_err(|diagnostics| diagnostics.to_string())?;
        match crate::simulate(&scenario, self.bugs, true, None) {
            Ok((report, _)) => {
                let json = path.with_extension("json");
                crate::write_json(&report, &json)?;
                Ok(Some(json))
            }
            Err(_) => Ok(None),
        }
    }
}

/// A figure for a reader: at most 4 decimals, no trailing zeros.
fn number(value: f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_owned()
}

fn say(text: &str) {
    crate::say_line(text);
}

fn quoted(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    quoted.join(", ")
}

/// A reproducer: the file's text with the schedule written in, and the command that runs it.
pub(crate) struct Reproducer {
    pub(crate) text: String,
    pub(crate) command: String,
}

pub(crate) struct Explorer<'a> {
    /// The scenario's name.
    pub(crate) name: String,
    pub(crate) text: &'a str,
    pub(crate) file: &'a Path,
    pub(crate) spec: &'a ExploreSpec,
    pub(crate) sets: &'a [Override],
    pub(crate) bugs: Bugs,
    /// One memory budget for the runs on every thread, as a study has.
    pub(crate) budget: outagelab_sim::MemoryBudget,
}

/// Nanoseconds in a millisecond: schedules are drawn to the millisecond.
const MS: u64 = 1_000_000;

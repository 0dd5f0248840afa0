//! `outagelab explore FILE`: draw fault schedules from the file's `[explore]` table, run the
//! chosen variants under each, and keep the schedules that break the design: a monitor fires
//! (an invariant broken), one of the variant's own expectations fails, or the run stops on its
//! budget (what `outagelab run` exits 1 on). Each way of breaking found is shrunk, proptest
//! style, to a small schedule that still breaks the design the same way, and written as a
//! scenario file that `outagelab run` reproduces.
//!
//! Deterministic from `--seed`: schedule `i` is drawn from a stream of its own (the seed and
//! `i`), schedules run on every core and come back in their order, and the shrinking runs one
//! candidate at a time; so the findings are the same with any `--jobs`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use outagelab_report::VariantReport;
use outagelab_report::expect::metric_value;
use outagelab_report::study::Shard;
use outagelab_scenario_file::{ExploreSpec, INSTANT_KINDS, Override, ScenarioFile, set_values};
use outagelab_sim::{Bugs, SimError, Stream};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::study::RunsProgress;

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
    /// A schedule found by refining (not drawn by number): kept as it is.
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
        say(&format!(
            "shard {}/{}: {} held, {} broke, {} refused; wrote {}; join every shard with \
             `outagelab explore {} --merge ...`",
            shard.index,
            shard.count,
            tally.held,
            tally.broke,
            tally.refused,
            json.display(),
            crate::shell_word(&file.display().to_string())
        ));
        return ExitCode::SUCCESS;
    }
    explorer.conclude(tally, &scenario.name, request)
}

impl Explorer<'_> {
    /// Prints the tally, shrinks each finding and writes its reproducer: the same for one
    /// search and for merged shards.
    fn conclude(&self, mut tally: Tally, name: &str, request: &Request) -> ExitCode {
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
                    Some(_) => format!("found while refining, schedule #{}", finding.first),
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
        let mut schedule = self.draw(tally.seed, drawn.index);
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

    /// Hill-climbing from `start`: batches of nudged copies of the worst so far, judged on
    /// all cores and taken in their order (the same with any `--jobs`); a copy that is worse
    /// still by the objective becomes the one nudged next.
    fn refine(&self, tally: &mut Tally, start: Schedule, drawn: Worst) -> (Schedule, Worst) {
        const BATCH: u64 = 8;
        let (mut current, mut worst) = (start, drawn);
        let mut next = 0;
        while next < self.spec.refine {
            let batch: Vec<u64> = (next..(next + BATCH).min(self.spec.refine)).collect();
            let judged: Vec<(Schedule, Option<Judged>)> = batch
                .par_iter()
                .map(|&k| {
                    // Wide steps first, narrow last: a quarter of each range down to a
                    // twentieth.
                    let done = k as f64 / self.spec.refine as f64;
                    let scale = 0.25 - 0.2 * done;
                    let schedule = self.nudge(&current, tally.seed, k, scale);
                    let judged = self.judge(&schedule, false, None);
                    (schedule, judged)
                })
                .collect();
            let mut best = current.clone();
            for (&k, (schedule, judged)) in batch.iter().zip(judged) {
                let Some(judged) = judged.or_else(|| self.judge(&schedule, true, None)) else {
                    continue;
                };
                let index = self.spec.runs_max + k;
                let mut candidate = Some(worst.clone());
                self.note_worst(&mut candidate, &judged.scores, index);
                if let Some(candidate) = candidate.filter(|c| c.index == index) {
                    worst = candidate;
                    best = schedule.clone();
                }
                if let Outcome::Broke(broke) = judged.outcome {
                    for (way, message) in broke {
                        if !tally.findings.iter().any(|f| f.way == way) {
                            tally.findings.push(Finding {
                                way,
                                message,
                                count: 1,
                                first: index,
                                refined: Some(schedule.clone()),
                            });
                        }
                    }
                }
            }
            current = best;
            next += BATCH;
        }
        (current, worst)
    }

    /// `base` with each fault's start and length, and each parameter, moved by up to `scale`
    /// of its range (to the millisecond; within the range), from a stream of the seed and
    /// `k`.
    fn nudge(&self, base: &Schedule, seed: u64, k: u64, scale: f64) -> Schedule {
        let mut stream = Stream::derive(seed, "refine", &k.to_string());
        let mut nudged = base.clone();
        let mut moved = |value: u64, (low, high): (u64, u64)| -> u64 {
            let step = (((high - low) as f64 * scale) as u64 / MS).max(1);
            let delta = stream.below(2 * step + 1) as i64 - step as i64;
            let ms = (value / MS) as i64 + delta;
            (ms.max(0) as u64 * MS).clamp(low, high)
        };
        for fault in &mut nudged.faults {
            let template = &self.spec.faults[fault.template];
            fault.at = moved(fault.at, template.at);
            if let (Some(duration), Some(range)) =
                (fault.duration, self.duration_of(fault.template, fault.kind))
            {
                fault.duration = Some(moved(duration, range));
            }
        }
        nudged
            .faults
            .sort_by_key(|f| (f.at, f.template, f.target, f.kind));
        for (param, value) in self.spec.params.iter().zip(&mut nudged.params) {
            if let Some(value) = value {
                let x = stream.below(2_000_001) as f64 / 1e6 - 1.0;
                *value = param.round(*value + x * (param.max - param.min) * scale);
            }
        }
        nudged
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

impl Explorer<'_> {
    /// "1 to 2 faults" / "parameters" for the headline.
    fn what_varies(&self) -> String {
        let faults = match self.spec.faults_max {
            0 => String::new(),
            1 => "1 fault".to_owned(),
            n => format!("1 to {n} faults"),
        };
        let params = match self.spec.params.len() {
            0 => String::new(),
            1 => "1 parameter".to_owned(),
            n => format!("{n} parameters"),
        };
        let mut varies: Vec<String> = [faults, params]
            .into_iter()
            .filter(|p| !p.is_empty())
            .collect();
        if self.spec.shuffle_ties {
            varies.push("same-instant ties shuffled".to_owned());
        }
        varies.join(" and ")
    }

    /// Every target and kind of every template, at the range's start, must be a fault the
    /// file takes: a template the file refuses would make every schedule refused.
    pub(crate) fn check_templates(&self) -> Result<(), String> {
        let bare = Schedule {
            seed: *self.spec.seeds.start(),
            faults: Vec::new(),
            params: vec![None; self.spec.params.len()],
        };
        self.load(&bare)
            .map_err(|why| format!("[explore]: the file with no drawn fault is refused:\n{why}"))?;
        for (t, template) in self.spec.faults.iter().enumerate() {
            for target in 0..template.targets.len() {
                for kind in 0..template.kinds.len() {
                    // The ranges' starts together, and their ends together.
                    let duration = self.duration_of(t, kind);
                    for (at, length) in [
                        (template.at.0, duration.map(|(low, _)| low)),
                        (template.at.1, duration.map(|(_, high)| high)),
                    ] {
                        let fault = Fault {
                            template: t,
                            target,
                            kind,
                            at,
                            duration: length,
                        };
                        let schedule = Schedule {
                            seed: *self.spec.seeds.start(),
                            faults: vec![fault],
                            params: vec![None; self.spec.params.len()],
                        };
                        if let Err(why) = self.load(&schedule) {
                            return Err(format!(
                                "explore.faults.{}: a {} fault on {} at {}: the file refuses \
                                 it:\n{}",
                                template.name,
                                template.kinds[kind],
                                template.targets[target],
                                seconds(at),
                                self.in_file_terms(&why)
                            ));
                        }
                    }
                }
            }
        }
        for (index, param) in self.spec.params.iter().enumerate() {
            for end in [param.min, param.max] {
                let mut params = vec![None; self.spec.params.len()];
                params[index] = Some(end);
                let schedule = Schedule {
                    seed: *self.spec.seeds.start(),
                    faults: Vec::new(),
                    params,
                };
                let loaded = self.load(&schedule).map_err(|why| {
                    format!(
                        "explore.params.\"{}\" at {}: the file refuses it:\n{}",
                        param.key,
                        param.show(end),
                        self.in_file_terms(&why)
                    )
                })?;
                // A key a variant's patch sets would not change that variant's runs.
                for variant in
                    (loaded.variants.iter()).filter(|v| self.spec.variants.contains(&v.name))
                {
                    if variant.settings.get(&param.key) != Some(&param.toml_value(end)) {
                        return Err(format!(
                            "explore.params.\"{}\": variant \"{}\" sets it in its patch, so \
                             drawing it would not change that variant; draw a key of the base",
                            param.key, variant.name
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A refusal of a file with drawn faults, in the terms of the user's file: a location on
    /// a line past its end (a drawn fault's) is named as the drawn fault, not as a line the
    /// file does not have.
    fn in_file_terms(&self, message: &str) -> String {
        let lines = self.text.lines().count();
        let prefix = format!("{}:", self.file.display());
        (message.lines())
            .map(|line| {
                let located = line.strip_prefix(&prefix).and_then(|rest| {
                    let (number, rest) = rest.split_once(':')?;
                    let (_, rest) = rest.split_once(':')?;
                    let number: usize = number.parse().ok()?;
                    (number > lines).then(|| format!("(a drawn fault):{rest}"))
                });
                located.unwrap_or_else(|| line.to_owned())
            })
            .collect::<Vec<String>>()
            .join("\n")
    }

    /// The range a fault of template `t` and kind `kind` draws its duration from.
    fn duration_of(&self, t: usize, kind: usize) -> Option<(u64, u64)> {
        let template = &self.spec.faults[t];
        if INSTANT_KINDS.contains(&template.kinds[kind].as_str()) {
            None
        } else {
            template.duration
        }
    }

    /// Schedule `index` of the exploration seeded `seed`: from a stream of its own.
    pub(crate) fn draw(&self, seed: u64, index: u64) -> Schedule {
        let mut stream = Stream::derive(seed, "explore", &index.to_string());
        let mut pick = |n: usize| stream.below(n as u64) as usize;
        let seeds = self.spec.seeds.clone();
        let run_seed = seeds.start() + pick((seeds.end() - seeds.start() + 1) as usize) as u64;
        let count = match self.spec.faults_max {
            0 => 0,
            n => 1 + pick(n as usize),
        };
        let mut faults = Vec::with_capacity(count);
        for _ in 0..count {
            let t = pick(self.spec.faults.len());
            let template = &self.spec.faults[t];
            let target = pick(template.targets.len());
            let kind = pick(template.kinds.len());
            let mut within = |(low, high): (u64, u64)| {
                // To the millisecond where the range holds whole ones; else its start.
                let (first, last) = (low.div_ceil(MS), high / MS);
                if first > last {
                    low
                } else {
                    (first + pick((last - first + 1) as usize) as u64) * MS
                }
            };
            let at = within(template.at);
            let duration = self.duration_of(t, kind).map(&mut within);
            faults.push(Fault {
                template: t,
                target,
                kind,
                at,
                duration,
            });
        }
        faults.sort_by_key(|f| (f.at, f.template, f.target, f.kind));
        let params = (self.spec.params.iter())
            .map(|param| {
                // A uniform draw in the range, to one part in a million.
                let x = pick(1_000_001) as f64 / 1e6;
                Some(param.round(param.min + x * (param.max - param.min)))
            })
            .collect();
        Schedule {
            seed: run_seed,
            faults,
            params,
        }
    }

    /// The file's text with the schedule's parameters written in and its faults appended.
    fn schedule_text(&self, schedule: &Schedule) -> Result<String, String> {
        let edits: Vec<(String, String)> = (self.spec.params.iter().zip(&schedule.params))
            .filter_map(|(param, value)| value.map(|v| (param.key.clone(), param.toml_value(v))))
            .collect();
        let mut text = set_values(self.text, &edits)?;
        if self.spec.shuffle_ties {
            text = with_shuffled_ties(&text)?;
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        for (index, fault) in schedule.faults.iter().enumerate() {
            let template = &self.spec.faults[fault.template];
            text.push_str(&format!(
                "\n[faults.explored-{}]\ntarget = \"{}\"\nkind = \"{}\"\nat = \"{}\"\n",
                index + 1,
                template.targets[fault.target],
                template.kinds[fault.kind],
                duration_text(fault.at)
            ));
            if let Some(duration) = fault.duration {
                text.push_str(&format!("duration = \"{}\"\n", duration_text(duration)));
            }
            for (key, value) in &template.extra {
                text.push_str(&format!("{key} = {value}\n"));
            }
        }
        Ok(text)
    }

    /// The file under `schedule`, as `run` reads it.
    fn load(&self, schedule: &Schedule) -> Result<ScenarioFile, String> {
        let text = self.schedule_text(schedule)?;
        outagelab_scenario_file::parse_with(&text, self.file, self.sets)
            .map_err(|diagnostics| diagnostics.to_string())
    }

    /// Runs the chosen variants (or only `only`) under `schedule`, each to its end: every
    /// variant is judged, so one that breaks the same schedule as another is seen too.
    /// `None`: a run was crowded out of the memory budget by runs on other threads (run it
    /// again `alone`).
    pub(crate) fn judge(
        &self,
        schedule: &Schedule,
        alone: bool,
        only: Option<&str>,
    ) -> Option<Judged> {
        let refused = |why: String| {
            Some(Judged {
                outcome: Outcome::Refused(why),
                scores: Vec::new(),
            })
        };
        let file = match self.load(schedule) {
            Ok(file) => file,
            Err(why) => return refused(why),
        };
        let mut broke = Vec::new();
        let mut scores = Vec::new();
        for name in &self.spec.variants {
            if only.is_some_and(|only| only != name) {
                continue;
            }
            let Some(variant) = file.variants.iter().find(|v| &v.name == name) else {
                return refused(format!("no variant \"{name}\""));
            };
            let mut scenario = variant.scenario.clone();
            scenario.seed = schedule.seed;
            let ran =
                outagelab_sim::run_in_budget(&scenario, self.bugs, &mut |_| {}, None, &self.budget);
            let ran = match ran {
                Ok(ran) => ran,
                Err(SimError::InvariantViolated(violation)) => {
                    let way = Way {
                        variant: name.clone(),
                        what: format!("invariant violated: {}", violation.invariant.name()),
                    };
                    broke.push((way, violation.to_string()));
                    continue;
                }
                Err(error) => return refused(error.to_string()),
            };
            if ran.crowded_out && !alone {
                return None;
            }
            if let Some(objective) = &self.spec.objective
                && let Ok(Some(value)) = metric_value(&ran.report.summary, &objective.metric)
            {
                scores.push((name.clone(), value));
            }
            if let Some(found) = broken(name, variant, &ran.report) {
                broke.push(found);
            }
        }
        let outcome = if broke.is_empty() {
            Outcome::Held
        } else {
            Outcome::Broke(broke)
        };
        Some(Judged { outcome, scores })
    }

    /// Draws and judges the schedules (of `shard`, or all `runs_max`).
    pub(crate) fn search(
        &self,
        seed: u64,
        quiet: bool,
        shard: Option<Shard>,
        time_max: Option<std::time::Duration>,
    ) -> Tally {
        // The wall clock decides only how many chunks run, never what a schedule does.
        let started = std::time::Instant::now();
        let numbers: Vec<u64> = (0..self.spec.runs_max)
            .filter(|&i| shard.is_none_or(|shard| shard.holds(i)))
            .collect();
        let progress = RunsProgress::new(numbers.len() as u64, quiet);
        let mut tally = self.empty_tally(seed, shard);
        // In chunks, so a long exploration holds the outcomes of one chunk at a time.
        for chunk in numbers.chunks(256) {
            // At least one chunk, so a budget always judges something.
            if tally.judged() > 0 && time_max.is_some_and(|limit| started.elapsed() >= limit) {
                break;
            }
            let judged: Vec<(Schedule, Option<Judged>)> = chunk
                .par_iter()
                .map(|&index| {
                    let schedule = self.draw(seed, index);
                    let outcome = self.judge(&schedule, false, None);
                    progress.one_done();
                    (schedule, outcome)
                })
                .collect();
            for (&index, (schedule, outcome)) in chunk.iter().zip(judged) {
                // A run crowded out of the budget runs again alone, in order.
                let judged = outcome.unwrap_or_else(|| {
                    self.judge(&schedule, true, None)
                        .expect("a run alone is never crowded out")
                });
                self.note_worst(&mut tally.worst, &judged.scores, index);
                match judged.outcome {
                    Outcome::Held => tally.held += 1,
                    Outcome::Refused(why) => {
                        tally.refused += 1;
                        tally.first_refusal.get_or_insert((index, why));
                    }
                    Outcome::Broke(broke) => {
                        tally.broke += 1;
                        for (way, message) in broke {
                            match tally.findings.iter_mut().find(|f| f.way == way) {
                                Some(finding) => finding.count += 1,
                                None => tally.findings.push(Finding {
                                    way,
                                    message,
                                    count: 1,
                                    first: index,
                                    refined: None,
                                }),
                            }
                        }
                    }
                }
            }
        }
        progress.done();
        tally
    }

    /// Keeps in `worst` the worse of it and the best of `scores` (schedule `index`) by the
    /// objective; ties go to the lower number, so the order schedules are seen in does not
    /// matter.
    fn note_worst(&self, worst: &mut Option<Worst>, scores: &[(String, f64)], index: u64) {
        let Some(objective) = &self.spec.objective else {
            return;
        };
        let worse = |a: f64, b: f64| if objective.maximise { a > b } else { a < b };
        for (variant, value) in scores {
            let replace = match worst {
                None => true,
                Some(known) => {
                    worse(*value, known.value) || (*value == known.value && index < known.index)
                }
            };
            if replace {
                *worst = Some(Worst {
                    variant: variant.clone(),
                    value: *value,
                    index,
                });
            }
        }
    }

    /// A tally of nothing yet, for this file and `seed`.
    fn empty_tally(&self, seed: u64, shard: Option<Shard>) -> Tally {
        let mut hash = 0xcbf2_9ce4_8422_2325_u64;
        let mut sets: Vec<String> = self.sets.iter().map(ToString::to_string).collect();
        // A planted bug changes every run: shards must agree on it too.
        sets.push(format!("{:?}", self.bugs));
        for byte in self
            .text
            .bytes()
            .chain([0])
            .chain(sets.join("\n").into_bytes())
        {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
        Tally {
            scenario: self.name.clone(),
            file_hash: format!("{hash:016x}"),
            seed,
            runs_max: self.spec.runs_max,
            shard,
            held: 0,
            broke: 0,
            refused: 0,
            first_refusal: None,
            findings: Vec::new(),
            worst: None,
        }
    }

    /// The shards' tallies joined: exactly the tally one unsharded search gives.
    fn merge(&self, parts: &[(PathBuf, Tally)]) -> Result<Tally, String> {
        let (first_path, first) = parts.first().ok_or("--merge: no shard given")?;
        let count = first.shard.map(|s| s.count).ok_or(format!(
            "--merge: {} is not a shard (written by explore --shard K/N --json)",
            first_path.display()
        ))?;
        if !(1..=crate::shard::SHARDS_MAX).contains(&count) {
            return Err(format!(
                "--merge: {} says it is one of {count} shards: not a slice (1 to {})",
                first_path.display(),
                crate::shard::SHARDS_MAX
            ));
        }
        let mut merged = self.empty_tally(first.seed, None);
        let mut seen = vec![false; count as usize];
        for (path, part) in parts {
            let same = part.file_hash == merged.file_hash
                && part.seed == merged.seed
                && part.runs_max == merged.runs_max;
            if !same {
                return Err(format!(
                    "--merge: {} is a shard of another exploration (another file, --set, \
                     --plant-bug, --seed or runs_max) than {}",
                    path.display(),
                    first_path.display()
                ));
            }
            let Some(shard) = part
                .shard
                .filter(|s| s.count == count && (1..=count).contains(&s.index))
            else {
                return Err(format!(
                    "--merge: {} is not one of {count} shards",
                    path.display()
                ));
            };
            let slot = &mut seen[(shard.index - 1) as usize];
            if *slot {
                return Err(format!(
                    "--merge: shard {}/{count} is given twice ({})",
                    shard.index,
                    path.display()
                ));
            }
            *slot = true;
            merged.held += part.held;
            merged.broke += part.broke;
            merged.refused += part.refused;
            if let Some((index, why)) = &part.first_refusal
                && merged
                    .first_refusal
                    .as_ref()
                    .is_none_or(|(at, _)| index < at)
            {
                merged.first_refusal = Some((*index, why.clone()));
            }
            if let Some(worst) = &part.worst {
                let scores = [(worst.variant.clone(), worst.value)];
                self.note_worst(&mut merged.worst, &scores, worst.index);
            }
            for finding in &part.findings {
                match merged.findings.iter_mut().find(|f| f.way == finding.way) {
                    Some(known) => {
                        known.count += finding.count;
                        if finding.first < known.first {
                            known.first = finding.first;
                            known.message = finding.message.clone();
                        }
                    }
                    None => merged.findings.push(finding.clone()),
                }
            }
        }
        if let Some(missing) = seen.iter().position(|s| !s) {
            return Err(format!(
                "--merge: shard {}/{count} is missing: give every shard's JSON",
                missing + 1
            ));
        }
        // In the order first found, as one search finds them.
        merged.findings.sort_by_key(|f| f.first);
        Ok(merged)
    }

    /// Whether `schedule` breaks the design `way`.
    fn breaks(&self, schedule: &Schedule, way: &Way) -> bool {
        matches!(
            self.judge(schedule, true, Some(&way.variant)),
            Some(Judged { outcome: Outcome::Broke(found), .. })
                if found.iter().any(|(found, _)| found == way)
        )
    }

    /// A smaller schedule that still breaks the design `way`, and the runs it took: faults
    /// dropped, parameters back to the file's values (or bisected toward them), durations
    /// shortened to the least that
    /// still breaks it (to the millisecond, within the template's range), then times and
    /// parameters rounded (starts to the second, 100 ms or 10 ms; durations up to 100 ms or
    /// 10 ms, so the least length found stays close; parameters to 1, 2 significant digits). Each
    /// candidate is tried in a fixed order and kept if it still breaks the design the same
    /// way; within `[explore] shrink_runs_max` runs.
    pub(crate) fn shrink(&self, drawn: &Schedule, way: &Way) -> (Schedule, u64) {
        let mut best = drawn.clone();
        let mut runs = 0;
        let budget = self.spec.shrink_runs_max;
        let mut attempt = |candidate: &Schedule, best: &mut Schedule| -> bool {
            if runs >= budget || candidate == best {
                return false;
            }
            runs += 1;
            let kept = self.breaks(candidate, way);
            if kept {
                *best = candidate.clone();
            }
            kept
        };
        // Fewer faults: drop each, last first, while any can go.
        let mut index = best.faults.len();
        while index > 0 {
            index -= 1;
            let mut candidate = best.clone();
            candidate.faults.remove(index);
            attempt(&candidate, &mut best);
        }
        // The file's own parameters; else the value nearest the file's that still breaks it,
        // by bisection (fewer requests, a smaller burst).
        for index in 0..best.params.len() {
            let mut candidate = best.clone();
            candidate.params[index] = None;
            if attempt(&candidate, &mut best) {
                continue;
            }
            let param = &self.spec.params[index];
            let Some(value) = best.params[index] else {
                continue;
            };
            let (mut holds, mut breaks) = (param.round(param.start), value);
            for _ in 0..40 {
                let middle = param.round((holds + breaks) / 2.0);
                if middle == holds || middle == breaks {
                    break;
                }
                let mut candidate = best.clone();
                candidate.params[index] = Some(middle);
                if attempt(&candidate, &mut best) {
                    breaks = middle;
                } else {
                    holds = middle;
                }
            }
        }
        // Shorter faults: the least duration that still breaks it, by bisection.
        for index in 0..best.faults.len() {
            let fault = &best.faults[index];
            let (Some(duration), Some((low, _))) =
                (fault.duration, self.duration_of(fault.template, fault.kind))
            else {
                continue;
            };
            let with = |d: u64, best: &Schedule| {
                let mut candidate = best.clone();
                candidate.faults[index].duration = Some(d);
                candidate
            };
            if attempt(&with(low, &best), &mut best) {
                continue;
            }
            let (mut fails, mut holds) = (low, duration);
            while holds - fails > MS {
                // The middle, on a whole millisecond strictly between the two.
                let middle = (fails + (holds - fails) / 2).div_ceil(MS) * MS;
                if middle <= fails || middle >= holds {
                    break;
                }
                if attempt(&with(middle, &best), &mut best) {
                    holds = middle;
                } else {
                    fails = middle;
                }
            }
        }
        // Rounder times: each start, then each duration (rounded up: a longer fault breaks
        // what a shorter one did, most often), to the coarsest step that still breaks it.
        for index in 0..best.faults.len() {
            let template = &self.spec.faults[best.faults[index].template];
            for step in [1_000 * MS, 100 * MS, 10 * MS] {
                let at = best.faults[index].at;
                let candidates = [at / step * step, at.div_ceil(step) * step];
                let mut rounded = false;
                for candidate_at in candidates {
                    if !(template.at.0..=template.at.1).contains(&candidate_at) {
                        continue;
                    }
                    let mut candidate = best.clone();
                    candidate.faults[index].at = candidate_at;
                    if attempt(&candidate, &mut best) {
                        rounded = true;
                        break;
                    }
                }
                if rounded || best.faults[index].at.is_multiple_of(step) {
                    break;
                }
            }
            let fault = &best.faults[index];
            if let (Some(duration), Some((low, high))) =
                (fault.duration, self.duration_of(fault.template, fault.kind))
            {
                // Up to 100 ms at most: a shortest length found stays close to the least.
                for step in [100 * MS, 10 * MS] {
                    let up = duration.div_ceil(step) * step;
                    if up == duration {
                        break;
                    }
                    if (low..=high).contains(&up) {
                        let mut candidate = best.clone();
                        candidate.faults[index].duration = Some(up);
                        if attempt(&candidate, &mut best) {
                            break;
                        }
                    }
                }
            }
        }
        // Rounder parameters.
        for index in 0..best.params.len() {
            let Some(value) = best.params[index] else {
                continue;
            };
            let param = &self.spec.params[index];
            for digits in [1, 2] {
                let rounded = param.round(significant(value, digits));
                if rounded == value {
                    break;
                }
                let mut candidate = best.clone();
                candidate.params[index] = Some(rounded);
                if attempt(&candidate, &mut best) {
                    break;
                }
            }
        }
        (best, runs)
    }

    /// `seed 734, 2 faults: kill on redis at 12.3 s; pause on redis at 30 s for 2.3 s;
    /// loads.steady.rate = 1200`.
    pub(crate) fn describe(&self, schedule: &Schedule) -> String {
        let mut parts: Vec<String> = schedule
            .faults
            .iter()
            .map(|fault| {
                let template = &self.spec.faults[fault.template];
                let mut text = format!(
                    "{} on {} at {}",
                    template.kinds[fault.kind],
                    template.targets[fault.target],
                    seconds(fault.at)
                );
                if let Some(duration) = fault.duration {
                    text.push_str(&format!(" for {}", seconds(duration)));
                }
                text
            })
            .collect();
        for (param, value) in self.spec.params.iter().zip(&schedule.params) {
            if let Some(value) = value {
                parts.push(format!("{} = {}", param.key, param.show(*value)));
            }
        }
        let faults = match schedule.faults.len() {
            0 => "no fault".to_owned(),
            1 => "1 fault".to_owned(),
            n => format!("{n} faults"),
        };
        if self.spec.shuffle_ties {
            parts.push("ties shuffled".to_owned());
        }
        if parts.is_empty() {
            format!("seed {}, {faults}", schedule.seed)
        } else {
            format!("seed {}, {faults}: {}", schedule.seed, parts.join("; "))
        }
    }

    /// The scenario file that reproduces `schedule`: the file with its parameters and faults
    /// written in (paths it reads made absolute when written elsewhere), the run seed as its
    /// seed, and a comment that says what it breaks.
    /// The scenario file that reproduces `schedule`, written to `output`: the file with its
    /// parameters and faults written in (paths it reads made absolute when written
    /// elsewhere), the run seed as its seed; and the command that runs it. `header` goes on
    /// top, as comment lines (it may name `{command}`, replaced by the command).
    pub(crate) fn standalone(
        &self,
        schedule: &Schedule,
        output: &Path,
        bug_name: Option<&str>,
        header: &str,
    ) -> Result<Reproducer, String> {
        let mut text = self.schedule_text(schedule)?;
        let mut edits = crate::fit::relocated_paths(&text, self.file, output)?;
        let seed_written = set_values(&text, &[("scenario.seed".to_owned(), "0".to_owned())]);
        if seed_written.is_ok() {
            edits.push(("scenario.seed".to_owned(), schedule.seed.to_string()));
        }
        text = set_values(&text, &edits)?;
        let mut command = format!(
            "outagelab run {}",
            crate::shell_word(&output.display().to_string())
        );
        if seed_written.is_err() {
            command.push_str(&format!(" --seed {}", schedule.seed));
        }
        for set in self.sets {
            command.push_str(&format!(" --set {}", crate::shell_word(&set.to_string())));
        }
        if let Some(bug) = bug_name {
            command.push_str(&format!(" --plant-bug {bug}"));
        }
        let header: String = (header.replace("{command}", &command).lines())
            .map(|line| format!("# {line}\n"))
            .collect();
        Ok(Reproducer {
            text: format!("{header}{text}"),
            command,
        })
    }

    /// The reproducer of a finding: [`Explorer::standalone`] with a header that says what it
    /// breaks and how it was found.
    pub(crate) fn reproducer(
        &self,
        schedule: &Schedule,
        way: &Way,
        output: &Path,
        explore_seed: u64,
        bug_name: Option<&str>,
    ) -> Result<Reproducer, String> {
        let header = format!(
            "Found by `outagelab explore {} --seed {explore_seed}`, shrunk: variant \"{}\" \
             breaks ({})\nunder {} (drawn faults: `[faults.explored-*]`, at the end).\n\
             Reproduce with: {{command}}",
            self.file.display(),
            way.variant,
            way.what,
            self.describe(schedule),
        );
        self.standalone(schedule, output, bug_name, &header)
    }
}

/// `text` with `[run] ties = "shuffled"`: the value replaced where the file writes it, else a
/// line under its `[run]` header, else a `[run]` table at the end.
fn with_shuffled_ties(text: &str) -> Result<String, String> {
    const LINE: &str = "ties = \"shuffled\"\n";
    if let Ok(text) = set_values(text, &[("run.ties".to_owned(), "\"shuffled\"".to_owned())]) {
        return Ok(text);
    }
    let mut out = String::with_capacity(text.len() + 32);
    let mut placed = false;
    for line in text.split_inclusive('\n') {
        out.push_str(line);
        let code = line.split('#').next().unwrap_or_default().trim();
        if !placed && code == "[run]" {
            if !line.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(LINE);
            placed = true;
        }
    }
    if !placed {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\n[run]\n");
        out.push_str(LINE);
    }
    Ok(out)
}

/// How `report` breaks the design, if it does: a run stopped on its budget, or the first of
/// the variant's expectations that failed.
fn broken(
    name: &str,
    variant: &outagelab_scenario_file::Variant,
    report: &VariantReport,
) -> Option<(Way, String)> {
    if report.verdict.is_budget() {
        let what = format!("stopped by its run budget ({})", report.verdict.name());
        let message = format!("{what} at {} ms", report.end_ms);
        return Some((
            Way {
                variant: name.to_owned(),
                what,
            },
            message,
        ));
    }
    for located in &variant.expectations {
        let expectation = &located.expectation;
        let (passed, actual) = match expectation.evaluate(&report.summary) {
            Ok(evaluation) => (
                evaluation.passed,
                evaluation
                    .actual
                    .map_or_else(|| "no value".to_owned(), |value| value.to_string()),
            ),
            Err(message) => (false, message),
        };
        if !passed {
            let what = format!("expectation failed: {expectation}");
            let message = format!("{what} (actual {actual}), at {}", located.location);
            return Some((
                Way {
                    variant: name.to_owned(),
                    what,
                },
                message,
            ));
        }
    }
    None
}

/// A duration as the file writes it: `"1200ms"`, `"1500us"`.
fn duration_text(nanos: u64) -> String {
    if nanos.is_multiple_of(MS) {
        format!("{}ms", nanos / MS)
    } else if nanos.is_multiple_of(1000) {
        format!("{}us", nanos / 1000)
    } else {
        format!("{nanos}ns")
    }
}

/// `12.3 s`, `250 ms`.
fn seconds(nanos: u64) -> String {
    if nanos >= 1_000 * MS {
        let text = format!("{:.3}", nanos as f64 / 1e9);
        format!("{} s", text.trim_end_matches('0').trim_end_matches('.'))
    } else {
        let text = format!("{:.3}", nanos as f64 / 1e6);
        format!("{} ms", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

/// `value` to `digits` significant digits.
fn significant(value: f64, digits: i32) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let scale = 10f64.powi(digits - 1 - value.abs().log10().floor() as i32);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffled_ties_are_written_where_the_file_can_take_them() {
        let written = "[run]\nties = \"scheduled\"\n";
        assert_eq!(
            with_shuffled_ties(written).unwrap(),
            "[run]\nties = \"shuffled\"\n"
        );
        let header = "[scenario]\nname = \"x\"\n[run] # limits\nhorizon = \"1s\"\n";
        assert_eq!(
            with_shuffled_ties(header).unwrap(),
            "[scenario]\nname = \"x\"\n[run] # limits\nties = \"shuffled\"\nhorizon = \"1s\"\n"
        );
        let none = "[scenario]\nname = \"x\"";
        assert_eq!(
            with_shuffled_ties(none).unwrap(),
            "[scenario]\nname = \"x\"\n\n[run]\nties = \"shuffled\"\n"
        );
    }

    #[test]
    fn values_round_to_significant_digits() {
        assert_eq!(significant(1234.0, 1), 1000.0);
        assert_eq!(significant(1234.0, 2), 1200.0);
        assert_eq!(significant(0.0456, 1), 0.05);
        assert_eq!(duration_text(1_200 * MS), "1200ms");
        assert_eq!(duration_text(1_500_000 + 500), "1500500ns");
        assert_eq!(seconds(12_300 * MS), "12.3 s");
        assert_eq!(seconds(250 * MS), "250 ms");
    }
}

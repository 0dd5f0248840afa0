//! `outagelab tune FILE`: which settings of the design's own knobs survive the worst outage we
//! can find? A min-max loop over the file's `[tune]` knobs against its `[explore]` ranges:
//! explore the design as it is set; keep every schedule that breaks it, as drawn; try
//! `[tune] candidates` settings of the knobs (the current one, then a Halton sample of the
//! knobs' box) against every schedule kept and against the file with no drawn fault; move to
//! the surviving setting nearest the file's own (the smallest change; ties to the earlier
//! candidate); explore again. It ends when an exploration of the tuned setting finds nothing
//! (the setting survives every breaking schedule found, and a fresh search), when no
//! candidate survives (none in the ranges does), or after `[tune] rounds` tunings.
//!
//! Deterministic: round `r` explores with the seed `--seed + r`, candidates come from a fixed
//! sequence, and every choice is made in a fixed order, whatever `--jobs` is.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use outagelab_scenario_file::{Override, ScenarioFile, TuneSpec, set_values};
use rayon::prelude::*;

use crate::explore::{Explorer, Judged, Outcome, Schedule};

pub struct Request {
    pub sets: Vec<Override>,
    pub seed: u64,
    pub jobs: Option<usize>,
    /// The tuned file.
    pub write: Option<PathBuf>,
    /// Where each kept schedule is written against the tuned setting (`check-N.toml`).
    pub out: PathBuf,
}

/// How a tuning ended.
enum Ending {
    /// The setting's exploration found nothing.
    Survives,
    /// No candidate survived every kept schedule.
    NoneSurvive,
    /// The rounds ran out with the last exploration still finding this many schedules.
    OutOfRounds(usize),
}

pub fn run(file: &Path, request: &Request) -> ExitCode {
    let (text, scenario, (explore, tune)) = match crate::read_for(
        file,
        &request.sets,
        "tune",
        "name the knobs to tune and their ranges; the file needs [explore] too",
        |s| s.explore.clone().zip(s.tune.clone()),
    ) {
        Ok(read) => read,
        Err(code) => return code,
    };
    // Only the tuned design runs.
    let mut explore = explore;
    explore.variants = vec![tune.variant.clone()];
    let tuner = Tuner {
        text: &text,
        file,
        scenario: &scenario,
        explore: &explore,
        tune: &tune,
        sets: &request.sets,
    };
    if let Err(message) = tuner.check_knobs() {
        eprintln!("{}: {message}", file.display());
        return ExitCode::from(2);
    }
    let result = crate::on_threads(request.jobs, || tuner.tune(request));
    let (setting, kept, ending) = match result {
        Ok(result) => result,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
    };
    match ending {
        Ending::NoneSurvive => {
            crate::say_line(&format!(
                "\nnone of the settings tried in the knobs' ranges survives the {} breaking \
                 schedules kept: widen the ranges, add a knob, or change the design",
                kept.len()
            ));
            return ExitCode::from(1);
        }
        Ending::Survives => crate::say_line(&format!(
            "\nthe setting {} survives every breaking schedule kept ({}) and a fresh \
             exploration of {} schedules",
            tuner.show(&setting),
            kept.len(),
            explore.runs_max
        )),
        Ending::OutOfRounds(new) => crate::say_line(&format!(
            "\nafter {} tunings, the setting {} survives the {} schedules kept, but its last \
             exploration found {new} that break it: raise [tune] rounds",
            tune.rounds,
            tuner.show(&setting),
            kept.len()
        )),
    }
    if let Err(message) = tuner.write(&setting, &kept, request) {
        eprintln!("{message}");
        return ExitCode::from(2);
    }
    match ending {
        Ending::Survives => ExitCode::SUCCESS,
        _ => ExitCode::from(1),
    }
}

struct Tuner<'a> {
    text: &'a str,
    file: &'a Path,
    scenario: &'a ScenarioFile,
    explore: &'a outagelab_scenario_file::ExploreSpec,
    tune: &'a TuneSpec,
    sets: &'a [Override],
}

impl Tuner<'_> {
    /// The file's text with the knobs at `setting`.
    fn text_at(&self, setting: &[f64]) -> Result<String, String> {
        let edits: Vec<(String, String)> = (self.tune.knobs.iter().zip(setting))
            .map(|(knob, &value)| (knob.key.clone(), knob.toml_value(value)))
            .collect();
        set_values(self.text, &edits)
    }

    /// An explorer of the design at `text`.
    fn explorer<'e>(&'e self, text: &'e str) -> Explorer<'e> {
        Explorer {
            name: self.scenario.name.clone(),
            text,
            file: self.file,
            spec: self.explore,
            sets: self.sets,
            bugs: outagelab_sim::Bugs::default(),
            budget: crate::process_budget(self.scenario),
        }
    }

    /// Each knob's range ends, the others at the file's values, must be settings the file
    /// takes and the tuned variant keeps (not one its patch sets).
    fn check_knobs(&self) -> Result<(), String> {
        let starts: Vec<f64> = self.tune.knobs.iter().map(|k| k.start).collect();
        for (index, knob) in self.tune.knobs.iter().enumerate() {
            for end in [knob.min, knob.max] {
                let mut setting = starts.clone();
                setting[index] = end;
                let text = self.text_at(&setting)?;
                let loaded = outagelab_scenario_file::parse_with(&text, self.file, self.sets)
                    .map_err(|d| {
                        format!(
                            "[tune] knob `{}` at {}: the file refuses it:\n{d}",
                            knob.key,
                            knob.show(end)
                        )
                    })?;
                let variant = loaded.variants.iter().find(|v| v.name == self.tune.variant);
                if variant.and_then(|v| v.settings.get(&knob.key)) != Some(&knob.toml_value(end)) {
                    return Err(format!(
                        "[tune] knob `{}`: variant \"{}\" sets it in its patch, so tuning could \
                         not change it; tune a key of the base",
                        knob.key, self.tune.variant
                    ));
                }
            }
        }
        self.explorer(&self.text_at(&starts)?).check_templates()
    }

    /// `retries.client.budget_percent = 12, retries.client.backoff = 180 ms`.
    fn show(&self, setting: &[f64]) -> String {
        let parts: Vec<String> = (self.tune.knobs.iter().zip(setting))
            .map(|(knob, &value)| format!("{} = {}", knob.key, knob.show(value)))
            .collect();
        parts.join(", ")
    }

    /// How far `setting` is from the file's own, each knob's change over its range.
    fn distance(&self, setting: &[f64]) -> f64 {
        (self.tune.knobs.iter().zip(setting))
            .map(|(knob, &value)| ((value - knob.start) / (knob.max - knob.min)).powi(2))
            .sum::<f64>()
            .sqrt()
    }

    /// Whether the design at `setting` holds with no drawn fault and under every `kept`
    /// schedule (stopping at the first that breaks it).
    /// `Ok(None)`: a run was crowded out of the memory budget by runs on other threads (judge
    /// it again `alone`).
    fn survives(
        &self,
        setting: &[f64],
        kept: &[Schedule],
        alone: bool,
    ) -> Result<Option<bool>, String> {
        let text = self.text_at(setting)?;
        let explorer = self.explorer(&text);
        let bare = Schedule {
            seed: self.scenario.seed,
            faults: Vec::new(),
            params: vec![None; self.explore.params.len()],
        };
        for schedule in std::iter::once(&bare).chain(kept) {
            match explorer.judge(schedule, alone, None).map(|j| j.outcome) {
                Some(Outcome::Held) => {}
                Some(Outcome::Broke(_)) => return Ok(Some(false)),
                // A schedule the setting's file refuses cannot be run: not a survivor.
                Some(Outcome::Refused(_)) => return Ok(Some(false)),
                None => return Ok(None),
            }
        }
        Ok(Some(true))
    }

    /// The loop: explore and keep what breaks, tune; explore again.
    fn tune(&self, request: &Request) -> Result<(Vec<f64>, Vec<Schedule>, Ending), String> {
        let mut setting: Vec<f64> = self.tune.knobs.iter().map(|k| k.start).collect();
        let mut kept: Vec<Schedule> = Vec::new();
        for round in 0..=self.tune.rounds {
            let text = self.text_at(&setting)?;
            let explorer = self.explorer(&text);
            let seed = request.seed.wrapping_add(u64::from(round));
            let breaking = self.breaking(&explorer, seed);
            crate::say_line(&format!(
                "round {}: {}: exploring {} schedules (--seed {seed}): {} broke it",
                round + 1,
                self.show(&setting),
                self.explore.runs_max,
                breaking.len(),
            ));
            let Some(first) = breaking.first() else {
                return Ok((setting, kept, Ending::Survives));
            };
            crate::say_line(&format!("  the first: {}", explorer.describe(first)));
            if round == self.tune.rounds {
                // Not kept: the setting was never tuned against them, and the checks written
                // are of schedules it survives.
                return Ok((setting, kept, Ending::OutOfRounds(breaking.len())));
            }
            for schedule in breaking {
                if !kept.contains(&schedule) {
                    kept.push(schedule);
                }
            }
            // The candidates: the current setting, then a Halton sample of the box.
            let dimensions = self.tune.knobs.len();
            let candidates: Vec<Vec<f64>> = std::iter::once(setting.clone())
                .chain((1..self.tune.candidates).map(|i| {
                    let unit = crate::fit::halton(i, dimensions);
                    (self.tune.knobs.iter().zip(unit))
                        .map(|(knob, x)| knob.round(knob.min + x * (knob.max - knob.min)))
                        .collect()
                }))
                .collect();
            let judged: Vec<Result<Option<bool>, String>> = candidates
                .par_iter()
                .map(|candidate| self.survives(candidate, &kept, false))
                .collect();
            let mut best: Option<(f64, usize)> = None;
            let mut survivors = 0;
            for (index, judged) in judged.into_iter().enumerate() {
                // Crowded out of the memory budget: again, alone, in order.
                let survived = match judged? {
                    Some(survived) => survived,
                    None => self
                        .survives(&candidates[index], &kept, true)?
                        .unwrap_or(false),
                };
                if survived {
                    survivors += 1;
                    let distance = self.distance(&candidates[index]);
                    if best.is_none_or(|(d, _)| distance < d) {
                        best = Some((distance, index));
                    }
                }
            }
            crate::say_line(&format!(
                "  tuning: {survivors} of {} settings survive the {} schedules kept",
                candidates.len(),
                kept.len()
            ));
            match best {
                Some((_, index)) => setting = candidates[index].clone(),
                None => return Ok((setting, kept, Ending::NoneSurvive)),
            }
        }
        unreachable!("the last round returns")
    }

    /// Every schedule of an exploration of `explorer`'s design (seeded `seed`) that breaks
    /// it, as drawn, in order: what the next setting must survive. Not shrunk: a shrunk
    /// schedule is the mildest that breaks this setting, and a setting that survives only the
    /// mildest is no answer.
    fn breaking(&self, explorer: &Explorer<'_>, seed: u64) -> Vec<Schedule> {
        let numbers: Vec<u64> = (0..self.explore.runs_max).collect();
        let mut breaking = Vec::new();
        // In chunks, as explore does, so what is held at once stays bounded.
        for chunk in numbers.chunks(256) {
            let judged: Vec<(Schedule, Option<Judged>)> = chunk
                .par_iter()
                .map(|&index| {
                    let schedule = explorer.draw(seed, index);
                    let outcome = explorer.judge(&schedule, false, None);
                    (schedule, outcome)
                })
                .collect();
            for (schedule, outcome) in judged {
                // A run crowded out of the memory budget runs again alone, in order.
                let outcome = outcome.or_else(|| explorer.judge(&schedule, true, None));
                if matches!(outcome.map(|j| j.outcome), Some(Outcome::Broke(_))) {
                    breaking.push(schedule);
                }
            }
        }
        breaking
    }

    /// The tuned file (`--write`), and each kept schedule against the tuned setting
    /// (`DIR/check-N.toml`, which `run` passes when the setting survives it).
    fn write(&self, setting: &[f64], kept: &[Schedule], request: &Request) -> Result<(), String> {
        let text = self.text_at(setting)?;
        if let Some(path) = &request.write {
            let edits = crate::fit::relocated_paths(&text, self.file, path)?;
            let tuned = set_values(&text, &edits)?;
            std::fs::write(path, tuned)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            crate::say_line(&format!("wrote {}", path.display()));
        }
        std::fs::create_dir_all(&request.out)
            .map_err(|e| format!("cannot create {}: {e}", request.out.display()))?;
        let explorer = self.explorer(&text);
        for (index, schedule) in kept.iter().enumerate() {
            let path = request.out.join(format!("check-{}.toml", index + 1));
            let header = format!(
                "A breaking schedule `outagelab tune {}` kept, against the tuned setting\n\
                 ({}): variant \"{}\" under {}.\nCheck with: {{command}}",
                self.file.display(),
                self.show(setting),
                self.tune.variant,
                explorer.describe(schedule)
            );
            let check = explorer.standalone(schedule, &path, None, &header)?;
            std::fs::write(&path, check.text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            if index == 0 {
                crate::say_line(&format!(
                    "wrote {} kept schedules against the tuned setting to {} (check-1.toml to \
                     check-{}.toml); check each with: {}",
                    kept.len(),
                    request.out.display(),
                    kept.len(),
                    check.command
                ));
            }
        }
        Ok(())
    }
}

//! Judging schedules: each run under the chosen variants, on every core in chunks taken in
//! their order, tallied (what broke, how often, first where; the worst by the objective);
//! and the tallies of shards joined.

use outagelab_report::VariantReport;
use outagelab_report::expect::metric_value;
use outagelab_scenario_file::Search;
use outagelab_sim::SimError;
use rayon::prelude::*;

use super::coverage;

use super::*;

impl Explorer<'_> {
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
                reached: Vec::new(),
            })
        };
        let file = match self.load(schedule) {
            Ok(file) => file,
            Err(why) => return refused(why),
        };
        let mut broke = Vec::new();
        let mut scores = Vec::new();
        let mut reached = Vec::new();
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
            if self.spec.search == Search::Coverage {
                reached.extend(coverage::reached(name, &ran.report.summary));
            }
            broke.extend(broken(name, variant, &ran.report));
        }
        let outcome = if broke.is_empty() {
            Outcome::Held
        } else {
            Outcome::Broke(broke)
        };
        Some(Judged {
            outcome,
            scores,
            reached,
        })
    }

    /// Draws and judges the schedules (of `shard`, or all `runs_max`).
    pub(crate) fn search(
        &self,
        seed: u64,
        quiet: bool,
        shard: Option<Shard>,
        time_max: Option<std::time::Duration>,
    ) -> Tally {
        if self.spec.search == Search::Coverage {
            assert!(
                shard.is_none(),
                "refused by the command: a coverage-guided search does not shard"
            );
            return self.search_by_coverage(seed, quiet, time_max);
        }
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
                self.count(&mut tally, index, judged, None);
            }
        }
        progress.done();
        tally
    }

    /// Counts schedule `index`'s judgement in `tally`: held, refused, or each way it broke
    /// (a new finding where first); the worst by the objective. `kept`: the schedule, when
    /// it is not drawn again from the seed and its number (a mutation of a coverage-guided
    /// search), so a finding or the worst keeps it.
    pub(super) fn count(
        &self,
        tally: &mut Tally,
        index: u64,
        judged: Judged,
        kept: Option<&Schedule>,
    ) {
        let before = tally.worst.as_ref().map(|worst| worst.index);
        self.note_worst(&mut tally.worst, &judged.scores, index);
        if tally.worst.as_ref().map(|worst| worst.index) != before {
            // A new worst: kept when it is a mutation, drawn again by number when not.
            tally.worst_schedule = kept.cloned();
        }
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
                            refined: kept.cloned(),
                        }),
                    }
                }
            }
        }
    }

    /// Keeps in `worst` the worse of it and the best of `scores` (schedule `index`) by the
    /// objective; ties go to the lower number, so the order schedules are seen in does not
    /// matter.
    pub(super) fn note_worst(
        &self,
        worst: &mut Option<Worst>,
        scores: &[(String, f64)],
        index: u64,
    ) {
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
    pub(super) fn empty_tally(&self, seed: u64, shard: Option<Shard>) -> Tally {
        Tally {
            scenario: self.name.clone(),
            file_hash: crate::shard::fingerprint(self.text, self.sets, self.bugs),
            seed,
            runs_max: self.spec.runs_max,
            shard,
            held: 0,
            broke: 0,
            refused: 0,
            first_refusal: None,
            findings: Vec::new(),
            worst: None,
            worst_schedule: None,
        }
    }

    /// The shards' tallies joined: exactly the tally one unsharded search gives.
    pub(super) fn merge(&self, parts: &[(PathBuf, Tally)]) -> Result<Tally, String> {
        let slices = parts
            .iter()
            .map(|(path, part)| (path.as_path(), part.shard));
        crate::shard::check_slices("explore", slices).map_err(|why| format!("--merge: {why}"))?;
        let (first_path, first) = &parts[0];
        let mut merged = self.empty_tally(first.seed, None);
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
        // In the order first found, as one search finds them.
        merged.findings.sort_by_key(|f| f.first);
        Ok(merged)
    }
}

/// Every way `report` breaks the design: a run stopped on its budget (whose figures are
/// those of a run cut short, so its expectations are not judged), or each of the variant's
/// expectations that failed, every one judged on its own. In the order of their text, so
/// that what a schedule breaks does not depend on the order the claims are written in.
pub(super) fn broken(
    name: &str,
    variant: &outagelab_scenario_file::Variant,
    report: &VariantReport,
) -> Vec<(Way, String)> {
    if report.verdict.is_budget() {
        let what = format!("stopped by its run budget ({})", report.verdict.name());
        let message = format!("{what} at {} ms", report.end_ms);
        let way = Way {
            variant: name.to_owned(),
            what,
        };
        return vec![(way, message)];
    }
    let mut broken = Vec::new();
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
            let way = Way {
                variant: name.to_owned(),
                what,
            };
            broken.push((way, message));
        }
    }
    broken.sort_by(|a, b| a.0.what.cmp(&b.0.what));
    // The same claim written twice is one way of breaking.
    broken.dedup_by(|a, b| a.0 == b.0);
    broken
}

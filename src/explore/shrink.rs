//! Shrinking a finding, proptest style: a smaller schedule that still breaks the design the
//! same way, within `[explore] shrink_runs_max` runs. The passes repeat until a whole round
//! of them leaves the schedule as it was (a fixed point, as QuickCheck and proptest repeat
//! their shrink steps until none applies): a start rounded late in one round can make a much
//! shorter fault enough, which only the next round's bisection finds.

use super::*;

/// The most rounds of passes one shrink runs: each round that changes the schedule is
/// followed by another, and a round that only undoes and redoes a rounding (a length
/// bisected down, then rounded up again) ends the shrink too.
const ROUNDS_MAX: usize = 16;

/// The candidates a shrink has judged, so a round that tries one again does not run it
/// again: runs are bounded by `budget`, and the memo by the runs.
struct Attempts<'e, 'a> {
    explorer: &'e Explorer<'a>,
    way: &'e Way,
    runs: u64,
    budget: u64,
    judged: Vec<(Schedule, bool)>,
}

impl Attempts<'_, '_> {
    /// Whether `candidate` still breaks the design the same way; if it does, it becomes
    /// `best`. Nothing once the budget is spent (a candidate judged before is still known).
    fn try_one(&mut self, candidate: &Schedule, best: &mut Schedule) -> bool {
        if candidate == best {
            return false;
        }
        let known = (self.judged.iter()).find(|(judged, _)| judged == candidate);
        let kept = match known {
            Some(&(_, kept)) => kept,
            None if self.runs >= self.budget => return false,
            None => {
                self.runs += 1;
                let kept = self.explorer.breaks(candidate, self.way);
                self.judged.push((candidate.clone(), kept));
                kept
            }
        };
        if kept {
            *best = candidate.clone();
        }
        kept
    }
}

impl Explorer<'_> {
    /// Whether `schedule` breaks the design `way`.
    pub(super) fn breaks(&self, schedule: &Schedule, way: &Way) -> bool {
        matches!(
            self.judge(schedule, true, Some(&way.variant)),
            Some(Judged { outcome: Outcome::Broke(found), .. })
                if found.iter().any(|(found, _)| found == way)
        )
    }

    /// A smaller schedule that still breaks the design `way`, and the runs it took: rounds of
    /// [`Explorer::shrink_round`]'s passes until one leaves the schedule as a round before
    /// left it, at most [`ROUNDS_MAX`], within `[explore] shrink_runs_max` runs.
    pub(crate) fn shrink(&self, drawn: &Schedule, way: &Way) -> (Schedule, u64) {
        let mut attempts = self.attempts(way);
        let mut best = drawn.clone();
        let mut ends = vec![best.clone()];
        for _ in 0..ROUNDS_MAX {
            self.shrink_round(&mut best, &mut attempts);
            if ends.contains(&best) {
                break;
            }
            ends.push(best.clone());
        }
        (best, attempts.runs)
    }

    fn attempts<'e>(&'e self, way: &'e Way) -> Attempts<'e, 'e> {
        Attempts {
            explorer: self,
            way,
            runs: 0,
            budget: self.spec.shrink_runs_max,
            judged: Vec::new(),
        }
    }

    /// One round of the passes: faults dropped, parameters back to the file's values (or
    /// bisected toward them), durations shortened to the least that still breaks it (to the
    /// millisecond, within the template's range), then times and parameters rounded (starts
    /// to the second, 100 ms or 10 ms; durations up to 100 ms or 10 ms, so the least length
    /// found stays close; parameters to 1, 2 significant digits). Each candidate is tried in
    /// a fixed order and kept if it still breaks the design the same way.
    fn shrink_round(&self, best: &mut Schedule, attempts: &mut Attempts<'_, '_>) {
        let mut attempt = |candidate: &Schedule, best: &mut Schedule| -> bool {
            attempts.try_one(candidate, best)
        };
        // Fewer faults: drop each, last first, while any can go.
        let mut index = best.faults.len();
        while index > 0 {
            index -= 1;
            let mut candidate = best.clone();
            candidate.faults.remove(index);
            attempt(&candidate, best);
        }
        // The file's own parameters; else the value nearest the file's that still breaks it,
        // by bisection (fewer requests, a smaller burst).
        for index in 0..best.params.len() {
            let mut candidate = best.clone();
            candidate.params[index] = None;
            if attempt(&candidate, best) {
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
                if attempt(&candidate, best) {
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
            if attempt(&with(low, best), best) {
                continue;
            }
            let (mut fails, mut holds) = (low, duration);
            while holds - fails > MS {
                // The middle, on a whole millisecond strictly between the two.
                let middle = (fails + (holds - fails) / 2).div_ceil(MS) * MS;
                if middle <= fails || middle >= holds {
                    break;
                }
                if attempt(&with(middle, best), best) {
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
                    if attempt(&candidate, best) {
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
                        if attempt(&candidate, best) {
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
                if attempt(&candidate, best) {
                    break;
                }
            }
        }
    }
}

/// `value` to `digits` significant digits.
pub(super) fn significant(value: f64, digits: i32) -> f64 {
    if value == 0.0 || !value.is_finite() {
        return value;
    }
    let scale = 10f64.powi(digits - 1 - value.abs().log10().floor() as i32);
    (value * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One GET at 2 s with a 100 ms timeout, claimed never to time out: a `hang` breaks it
    /// when it covers 2 s and lasts past about 2.1 s.
    const COVERING: &str = r#"[scenario]
name = "covering"
seed = 1

[servers.redis]

[connections.c]
server = "redis"
command_timeout = "100ms"

[keys.k]

[flows.f]
steps = [{ redis = { command = "GET", connection = "c", key = "k" }, on_error = "fail" }]

[loads.one]
flow = "f"
arrivals = "burst"
count = 1
start = "2s"

[[variant]]
name = "v"
expect = ["outcomes.timeout == 0"]

[explore]
seeds = "1..1"
runs_max = 1
faults_max = 1
shrink_runs_max = 200

[explore.faults.stall]
target = "redis"
kind = "hang"
at = { min = "1s", max = "3s" }
duration = { min = "50ms", max = "3s" }
"#;

    /// Issue 29, point 3: a hang from 1.37 s for 2 s. The first round bisects its length at
    /// that start (731 ms, to reach past 2.1 s), then rounds the start up to 2 s and the
    /// length up to 800 ms: not minimal, since from 2 s a hang of about 100 ms is enough.
    /// Only a second round, bisecting again at the new start, finds that (rounded up to
    /// 100 ms); a third changes nothing more.
    #[test]
    fn shrinking_repeats_its_passes_until_none_changes_the_schedule() {
        let path = Path::new("covering.toml");
        let file = outagelab_scenario_file::parse(COVERING, path).unwrap();
        let spec = file.explore.clone().unwrap();
        let explorer = Explorer {
            name: "covering".into(),
            text: COVERING,
            file: path,
            spec: &spec,
            sets: &[],
            bugs: outagelab_sim::Bugs::default(),
            budget: crate::process_budget(&file),
        };
        let way = Way {
            variant: "v".into(),
            what: "expectation failed: outcomes.timeout == 0".into(),
        };
        let drawn = Schedule {
            seed: 1,
            faults: vec![Fault {
                template: 0,
                target: 0,
                kind: 0,
                at: 1_370 * MS,
                duration: Some(2_000 * MS),
            }],
            params: Vec::new(),
        };
        assert!(explorer.breaks(&drawn, &way));
        let timing = |schedule: &Schedule| {
            let fault = &schedule.faults[0];
            (fault.at / MS, fault.duration.map(|d| d / MS))
        };
        let mut once = drawn.clone();
        explorer.shrink_round(&mut once, &mut explorer.attempts(&way));
        assert_eq!(timing(&once), (2_000, Some(800)), "one round");
        let (shrunk, runs) = explorer.shrink(&drawn, &way);
        assert_eq!(timing(&shrunk), (2_000, Some(100)), "to a fixed point");
        assert!(explorer.breaks(&shrunk, &way));
        // The shortest the template allows does not break it.
        let mut shorter = shrunk.clone();
        shorter.faults[0].duration = Some(50 * MS);
        assert!(!explorer.breaks(&shorter, &way));
        assert!(runs <= spec.shrink_runs_max, "{runs} runs");
    }

    #[test]
    fn values_round_to_significant_digits() {
        assert_eq!(significant(1234.0, 1), 1000.0);
        assert_eq!(significant(1234.0, 2), 1200.0);
        assert_eq!(significant(0.0456, 1), 0.05);
    }
}

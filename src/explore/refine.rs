//! Refining the worst schedule by the objective: hill climbing around it after the random
//! schedules.

use outagelab_sim::Stream;
use rayon::prelude::*;

use super::*;

impl Explorer<'_> {
    /// Hill-climbing from `start`: batches of nudged copies of the worst so far, judged on
    /// all cores and taken in their order (the same with any `--jobs`); a copy that is worse
    /// still by the objective becomes the one nudged next.
    pub(super) fn refine(
        &self,
        tally: &mut Tally,
        start: Schedule,
        drawn: Worst,
    ) -> (Schedule, Worst) {
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
    pub(super) fn nudge(&self, base: &Schedule, seed: u64, k: u64, scale: f64) -> Schedule {
        let mut stream = Stream::derive(seed, "refine", &k.to_string());
        self.nudge_with(base, &mut stream, scale)
    }

    /// [`Explorer::nudge`] by draws from `stream`.
    pub(super) fn nudge_with(&self, base: &Schedule, stream: &mut Stream, scale: f64) -> Schedule {
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
}

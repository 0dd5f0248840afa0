//! Shrinking a finding, proptest style: a smaller schedule that still breaks the design the
//! same way, within `[explore] shrink_runs_max` runs.

use super::*;

impl Explorer<'_> {
    /// Whether `schedule` breaks the design `way`.
    pub(super) fn breaks(&self, schedule: &Schedule, way: &Way) -> bool {
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

    #[test]
    fn values_round_to_significant_digits() {
        assert_eq!(significant(1234.0, 1), 1000.0);
        assert_eq!(significant(1234.0, 2), 1200.0);
        assert_eq!(significant(0.0456, 1), 0.05);
    }
}

//! A metastability map: a grid of trigger sizes (a pause's or a slowdown's length) by loads,
//! each point run on several seeds and judged recovered, with the time it took after the
//! trigger ended, or not recovered within the horizon (Bronson et al., HotOS '21: a
//! metastable failure is one that outlives its trigger). One map per variant, so that a fix
//! (a retry budget) shows as the boundary between the two phases moving.
//!
//! What "recovered" means is the file's: a metric of the run's series (`failed_per_s`,
//! `p99_ms`, `in_flight`, ...) at most a bound over every bucket of a window of `hold`, the
//! first such window starting at or after the trigger's end. The time to recover is from the
//! trigger's end to that window's start (to the bucket).

use serde::{Deserialize, Serialize};

use crate::Series;
use crate::observed::ObservedMetric;

/// What `outagelab map` writes with `--json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MapReport {
    pub scenario: String,
    /// The seeds each point ran on, both included.
    pub seeds: [u64; 2],
    /// The x-axis: the trigger's size.
    pub trigger: MapAxis,
    /// The y-axis: the load.
    pub load: MapAxis,
    /// The fault whose end starts the recovery clock.
    pub fault: String,
    /// The definition of recovered, in words: `failed_per_s <= 1 for 2 s`.
    pub recovered: String,
    pub variants: Vec<MapVariant>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MapAxis {
    /// The dotted key the axis sets.
    pub key: String,
    /// Each value as the file would write it (TOML text), in order.
    pub values: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MapVariant {
    pub name: String,
    /// Load by load, then trigger by trigger: point `load * triggers + trigger`.
    pub points: Vec<MapPoint>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MapPoint {
    pub trigger: usize,
    pub load: usize,
    /// Per seed, in order: the ms from the trigger's end to recovery, or `None` when the run
    /// did not recover within its horizon.
    pub recovered_ms: Vec<Option<f64>>,
}

/// A point's class over its seeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// On every seed.
    Recovered,
    /// On some seeds only.
    Mixed,
    /// On none.
    NotRecovered,
}

impl MapPoint {
    /// Seeds on which the run recovered.
    pub fn recovered(&self) -> usize {
        self.recovered_ms.iter().filter(|r| r.is_some()).count()
    }

    pub fn phase(&self) -> Phase {
        match self.recovered() {
            0 => Phase::NotRecovered,
            n if n == self.recovered_ms.len() => Phase::Recovered,
            _ => Phase::Mixed,
        }
    }

    /// The median time to recover over the seeds that recovered (the lower middle of an even
    /// count, so it is one of the measured times).
    pub fn median_ms(&self) -> Option<f64> {
        let mut times: Vec<f64> = self.recovered_ms.iter().flatten().copied().collect();
        times.sort_by(f64::total_cmp);
        times.get(times.len().saturating_sub(1) / 2).copied()
    }

    /// The cell's text: `1.2 s` (recovered on every seed, the median), `3/5` (on some),
    /// `never`.
    pub fn label(&self) -> String {
        match self.phase() {
            Phase::NotRecovered => "never".to_owned(),
            Phase::Mixed => format!("{}/{}", self.recovered(), self.recovered_ms.len()),
            Phase::Recovered => {
                let ms = self.median_ms().unwrap_or(0.0);
                if ms >= 1000.0 {
                    format!("{:.1} s", ms / 1000.0)
                } else {
                    format!("{ms:.0} ms")
                }
            }
        }
    }
}

/// What counts as recovered: `metric` at most `at_most` in every bucket of a window of
/// `hold_ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct Recovery {
    pub metric: ObservedMetric,
    pub at_most: f64,
    pub hold_ms: f64,
}

impl Recovery {
    /// `failed_per_s <= 1 for 2 s`.
    pub fn describe(&self) -> String {
        let hold = if self.hold_ms >= 1000.0 {
            format!("{} s", self.hold_ms / 1000.0)
        } else {
            format!("{} ms", self.hold_ms)
        };
        format!("{} <= {} for {hold}", self.metric, self.at_most)
    }

    /// The ms from `from_ms` (the trigger's end) to the start of the first window of buckets,
    /// all starting at or after `from_ms`, that covers `hold_ms` with the metric at most the
    /// bound in each; `None` when no such window fits in what the run covered (`end_ms`; a run
    /// that `ended_by_itself` has nothing more to come, so buckets past its end are quiet). A
    /// bucket without a value (a percentile where no request ended) is within the bound.
    pub fn recovered_after(
        &self,
        series: &Series,
        end_ms: f64,
        ended_by_itself: bool,
        from_ms: f64,
    ) -> Option<f64> {
        let width = series.bucket_ms;
        if !(width.is_finite() && width > 0.0) {
            return None;
        }
        let needed = ((self.hold_ms / width).ceil() as usize).max(1);
        let first = series.start_ms.partition_point(|&start| start < from_ms);
        let mut run_start: Option<usize> = None;
        for index in first..series.start_ms.len() {
            let covered = series.start_ms[index] + width <= end_ms;
            if !covered && !ended_by_itself {
                return None;
            }
            let quiet = !covered
                || self
                    .metric
                    .over(series, index, index)
                    .is_none_or(|value| value <= self.at_most);
            if quiet {
                let start = *run_start.get_or_insert(index);
                if index + 1 - start >= needed {
                    return Some((series.start_ms[start] - from_ms).max(0.0));
                }
            } else {
                run_start = None;
            }
        }
        // A run that ended by itself is quiet from its last bucket on.
        let start = if ended_by_itself {
            run_start.or(Some(series.start_ms.len()))
        } else {
            None
        }?;
        let at = series.start_ms.get(start).copied().unwrap_or_else(|| {
            series
                .start_ms
                .last()
                .map_or(from_ms, |s| s + width)
                .max(from_ms)
        });
        Some((at - from_ms).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// A series of 100 ms buckets with `failed` failures (timeouts) in each.
    fn series(failed: &[u64]) -> Series {
        let mut outcomes = BTreeMap::new();
        outcomes.insert("timeout".to_owned(), failed.to_vec());
        outcomes.insert("ok".to_owned(), vec![10; failed.len()]);
        Series {
            bucket_ms: 100.0,
            start_ms: (0..failed.len()).map(|i| i as f64 * 100.0).collect(),
            outcomes,
            ..Series::default()
        }
    }

    fn recovery(at_most: f64, hold_ms: f64) -> Recovery {
        Recovery {
            metric: ObservedMetric::parse("failed_per_s").unwrap(),
            at_most,
            hold_ms,
        }
    }

    #[test]
    fn recovery_is_the_first_quiet_window_after_the_trigger_ends() {
        // Failures (10 a bucket = 100/s) until 600 ms, one stray at 800 ms, quiet after.
        let s = series(&[10, 10, 10, 10, 10, 10, 0, 0, 1, 0, 0, 0, 0, 0]);
        let end = 1400.0;
        // Trigger ended at 300 ms; quiet means at most 5/s for 300 ms: from 900 ms.
        assert_eq!(
            recovery(5.0, 300.0).recovered_after(&s, end, false, 300.0),
            Some(600.0)
        );
        // Tolerating 10/s, the window 600-800 ms already counts.
        assert_eq!(
            recovery(10.0, 200.0).recovered_after(&s, end, false, 300.0),
            Some(300.0)
        );
        // A window longer than what is left: not recovered within the horizon.
        assert_eq!(
            recovery(5.0, 600.0).recovered_after(&s, end, false, 300.0),
            None
        );
        // Unless the run ended by itself: nothing more was to come.
        assert_eq!(
            recovery(5.0, 600.0).recovered_after(&s, end, true, 300.0),
            Some(600.0)
        );
        // Never quiet.
        let busy = series(&[10; 14]);
        assert_eq!(
            recovery(5.0, 100.0).recovered_after(&busy, end, false, 300.0),
            None
        );
    }

    #[test]
    fn a_point_is_classed_by_its_seeds() {
        let point = |recovered_ms: Vec<Option<f64>>| MapPoint {
            trigger: 0,
            load: 0,
            recovered_ms,
        };
        let all = point(vec![Some(1200.0), Some(400.0), Some(2000.0)]);
        assert_eq!(
            (all.phase(), all.label()),
            (Phase::Recovered, "1.2 s".to_owned())
        );
        let some = point(vec![Some(100.0), None, Some(300.0)]);
        assert_eq!(
            (some.phase(), some.label()),
            (Phase::Mixed, "2/3".to_owned())
        );
        let none = point(vec![None, None]);
        assert_eq!(
            (none.phase(), none.label()),
            (Phase::NotRecovered, "never".to_owned())
        );
        assert_eq!(
            point(vec![Some(300.0), Some(100.0)]).median_ms(),
            Some(100.0)
        );
    }
}

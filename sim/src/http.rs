//! Requests as HTTP answers: each outcome maps to a status (`[http]` in the scenario), and the
//! tally keeps what seed 000's fault table reports, in constant memory: answers by status,
//! the first and last 5xx, and the 2xx answers since the last 5xx.

use std::collections::BTreeMap;

use outagelab_model::time::SimTime;
use outagelab_report::{HttpSummary, Outcome};

/// The status each outcome is answered with; validated in `200..=599`, `ok` in `200..=299`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpSpec {
    pub status: [u16; Outcome::COUNT],
}

impl Default for HttpSpec {
    fn default() -> Self {
        HttpSpec {
            status: Outcome::ALL.map(Outcome::default_http_status),
        }
    }
}

/// What the report says about a run's answers beyond the counts by outcome (which the
/// metrics keep): the first and last 5xx and the 2xx since. Only ends count: a request still
/// in flight at the end of the run has given no answer.
#[derive(Clone, Debug)]
pub struct HttpTally {
    spec: HttpSpec,
    first_5xx: Option<SimTime>,
    last_5xx: Option<SimTime>,
    ok_after_last_5xx: u64,
}

impl HttpTally {
    pub fn new(spec: HttpSpec) -> Self {
        HttpTally {
            spec,
            first_5xx: None,
            last_5xx: None,
            ok_after_last_5xx: 0,
        }
    }

    /// A request ended at `now` with `outcome`; `now` never goes backwards.
    pub fn record(&mut self, now: SimTime, outcome: Outcome) {
        match self.spec.status[outcome.index()] / 100 {
            5 => {
                self.first_5xx.get_or_insert(now);
                self.last_5xx = Some(now);
                self.ok_after_last_5xx = 0;
            }
            2 => self.ok_after_last_5xx += 1,
            _ => {}
        }
    }

    /// The summary, given the ended requests by outcome name (the report's `outcomes`).
    pub fn summary(&self, ended_by_outcome: &BTreeMap<String, u64>) -> HttpSummary {
        let mut status: BTreeMap<u16, u64> = BTreeMap::new();
        let mut ended_total = 0;
        for outcome in Outcome::ALL {
            let ended = ended_by_outcome.get(outcome.name()).copied().unwrap_or(0);
            ended_total += ended;
            if ended > 0 {
                *status.entry(self.spec.status[outcome.index()]).or_default() += ended;
            }
        }
        let class = |hundreds: u16| -> u64 {
            status
                .iter()
                .filter(|(code, _)| **code / 100 == hundreds)
                .map(|(_, n)| n)
                .sum()
        };
        let (class_2xx, class_4xx, class_5xx) = (class(2), class(4), class(5));
        let ended = ended_total;
        let ms = |t: SimTime| t.as_nanos() as f64 / 1e6;
        HttpSummary {
            status: status
                .into_iter()
                .map(|(code, n)| (code.to_string(), n))
                .collect(),
            class_2xx,
            class_4xx,
            class_5xx,
            share_5xx_percent: (ended > 0).then(|| class_5xx as f64 * 100.0 / ended as f64),
            first_5xx_ms: self.first_5xx.map(ms),
            last_5xx_ms: self.last_5xx.map(ms),
            window_5xx_ms: self
                .first_5xx
                .zip(self.last_5xx)
                .map(|(first, last)| ms(last) - ms(first)),
            ok_after_last_5xx: self.ok_after_last_5xx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    /// Records the ends in order, as the engine does, and summarises with their counts.
    fn summarise(spec: HttpSpec, ends: &[(u64, Outcome)]) -> HttpSummary {
        let mut tally = HttpTally::new(spec);
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for &(millis, outcome) in ends {
            tally.record(at(millis), outcome);
            *counts.entry(outcome.name().to_owned()).or_default() += 1;
        }
        tally.summary(&counts)
    }

    #[test]
    fn the_window_runs_from_the_first_to_the_last_5xx_and_recovery_counts_2xx_after_it() {
        use Outcome::*;
        let ends = [
            (10, Ok),
            (2000, Timeout),     // 500
            (2001, RateLimited), // 429: neither 2xx nor 5xx
            (3000, BreakerOpen), // 503
            (9100, Shed),        // 503
            (9200, Ok),
            (9300, Ok),
        ];
        let summary = summarise(HttpSpec::default(), &ends);
        assert_eq!(summary.first_5xx_ms, Some(2000.0));
        assert_eq!(summary.last_5xx_ms, Some(9100.0));
        assert_eq!(summary.window_5xx_ms, Some(7100.0));
        assert_eq!(summary.ok_after_last_5xx, 2);
        assert_eq!(
            (summary.class_2xx, summary.class_4xx, summary.class_5xx),
            (3, 1, 3)
        );
        assert_eq!(summary.share_5xx_percent, Some(300.0 / 7.0));
        let status: Vec<(&str, u64)> = summary
            .status
            .iter()
            .map(|(c, n)| (c.as_str(), *n))
            .collect();
        assert_eq!(status, [("200", 3), ("429", 1), ("500", 1), ("503", 2)]);
    }

    #[test]
    fn a_run_that_ends_failing_has_no_2xx_after_its_last_5xx() {
        let ends = [(1, Outcome::Ok), (2, Outcome::BreakerOpen)];
        assert_eq!(summarise(HttpSpec::default(), &ends).ok_after_last_5xx, 0);
    }

    #[test]
    fn the_scenario_decides_the_status_of_each_outcome() {
        let mut spec = HttpSpec::default();
        spec.status[Outcome::Timeout.index()] = 504;
        spec.status[Outcome::LockBusy.index()] = 409;
        let summary = summarise(spec, &[(1, Outcome::Timeout), (2, Outcome::LockBusy)]);
        assert_eq!(summary.status.get("504"), Some(&1));
        assert_eq!((summary.class_4xx, summary.class_5xx), (1, 1));
        assert_eq!(summary.window_5xx_ms, Some(0.0));
    }

    #[test]
    fn nothing_ended_means_no_share_and_no_window() {
        let summary = summarise(HttpSpec::default(), &[]);
        assert_eq!(summary.share_5xx_percent, None);
        assert_eq!(summary.window_5xx_ms, None);
        assert!(summary.status.is_empty());
    }
}

//! A coverage-guided search (`[explore] search = "coverage"`), AFL style: a schedule whose
//! runs reach a model state none before it reached joins a corpus, and about half of the
//! schedules after it are mutations of one from the corpus (its faults' starts and lengths
//! and its parameters nudged, as refining nudges, by a scale drawn per mutation), the rest
//! drawn as the random search draws them.
//!
//! What a run reached is read from its summary, which every run reports: no hook in the
//! engine. A state is one figure of one resource of one variant in a band ([`band`]: four
//! to each power of two): a breaker's transitions (opened, half-opened, closed) and its
//! rejections; a queue's or a pool's peak (a bulkhead's in use and queued, a semaphore's and
//! an adaptive limit's in flight, a connection's pending commands); the first and then each
//! larger band of sheds, rejections, timeouts, disconnects, failed connects, fail-opens,
//! retries and retry budgets spent; and the requests by outcome.
//!
//! Deterministic from the seed with any `--jobs`: schedules are made and judged in batches
//! of [`BATCH`]; a batch is made from the corpus as the batches before it left it, judged on
//! every core, and taken in its order.

use std::collections::BTreeSet;

use outagelab_report::Summary;
use outagelab_sim::Stream;
use rayon::prelude::*;

use super::*;

/// Schedules made from one state of the corpus and judged together.
const BATCH: u64 = 16;

/// How a mutation nudges: a quarter of each range, a tenth, a twentieth or a fiftieth, one
/// drawn per mutation (wide jumps and fine steps both).
const SCALES: [f64; 4] = [0.25, 0.1, 0.05, 0.02];

/// One model state a run reached: `figure` of resource `name` of `variant`, in `band`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Reached {
    pub(crate) variant: String,
    pub(crate) figure: Figure,
    /// The breaker's, bulkhead's, connection's, ... name; the outcome's for `Outcome`.
    pub(crate) name: String,
    /// 0 for 0, else 1 + the figure's base-2 logarithm, rounded down.
    pub(crate) band: u8,
}

/// The figures of a summary a coverage-guided search tells states apart by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Figure {
    BreakerOpened,
    BreakerHalfOpened,
    BreakerClosed,
    BreakerRejected,
    BulkheadPeakInUse,
    BulkheadPeakQueued,
    BulkheadShed,
    SemaphorePeakInFlight,
    SemaphoreRejected,
    AdaptiveLimitPeakInFlight,
    AdaptiveLimitRejected,
    ConnectionPeakPending,
    ConnectionTimeouts,
    ConnectionDisconnects,
    ConnectionConnectFailures,
    ConnectionFailOpen,
    RetryRetries,
    RetryGaveUpBudget,
    RateLimitRejected,
    RateLimitFailOpen,
    Outcome,
}

/// The band of a figure: 0, 1, 2 and 3 each a band of its own, then four bands to each
/// power of two (4, 5, 6, 7; 8-9, 10-11, 12-13, 14-15; 16-19, ...): a quarter of an octave,
/// so a queue's peak of 150 and one of 210 are states apart (in bands of whole powers of
/// two, as AFL buckets its hit counts, both are 128-255; measured in docs/explore.md).
pub(crate) fn band(value: u64) -> u8 {
    if value < 4 {
        return value as u8;
    }
    let octave = u64::BITS - 1 - value.leading_zeros();
    let quarter = (value >> (octave - 2)) & 3;
    (4 * (octave - 1) + quarter as u32) as u8
}

/// Every state a run of `variant` with `summary` reached, in order.
pub(crate) fn reached(variant: &str, summary: &Summary) -> Vec<Reached> {
    let mut states = Vec::new();
    let mut add = |figure: Figure, name: &str, value: u64| {
        states.push(Reached {
            variant: variant.to_owned(),
            figure,
            name: name.to_owned(),
            band: band(value),
        });
    };
    for (name, breaker) in &summary.breakers {
        add(Figure::BreakerOpened, name, breaker.opened);
        add(Figure::BreakerHalfOpened, name, breaker.half_opened);
        add(Figure::BreakerClosed, name, breaker.closed);
        add(Figure::BreakerRejected, name, breaker.rejected);
    }
    for (name, bulkhead) in &summary.bulkheads {
        add(Figure::BulkheadPeakInUse, name, bulkhead.peak_in_use);
        add(Figure::BulkheadPeakQueued, name, bulkhead.peak_queued);
        add(Figure::BulkheadShed, name, bulkhead.shed);
    }
    for (name, semaphore) in &summary.semaphores {
        add(
            Figure::SemaphorePeakInFlight,
            name,
            semaphore.peak_in_flight,
        );
        add(Figure::SemaphoreRejected, name, semaphore.rejected);
    }
    for (name, limit) in &summary.adaptive_limits {
        add(
            Figure::AdaptiveLimitPeakInFlight,
            name,
            limit.peak_in_flight,
        );
        add(Figure::AdaptiveLimitRejected, name, limit.rejected);
    }
    for (name, connection) in &summary.connections {
        add(Figure::ConnectionPeakPending, name, connection.peak_pending);
        add(Figure::ConnectionTimeouts, name, connection.timeouts);
        add(Figure::ConnectionDisconnects, name, connection.disconnects);
        add(
            Figure::ConnectionConnectFailures,
            name,
            connection.connect_failures,
        );
        add(Figure::ConnectionFailOpen, name, connection.fail_open);
    }
    for (name, retry) in &summary.retries {
        add(Figure::RetryRetries, name, retry.retries);
        add(Figure::RetryGaveUpBudget, name, retry.gave_up_budget);
    }
    for (name, limiter) in &summary.rate_limits {
        add(Figure::RateLimitRejected, name, limiter.rejected);
        add(Figure::RateLimitFailOpen, name, limiter.fail_open_admitted);
    }
    for (outcome, count) in &summary.outcomes {
        add(Figure::Outcome, outcome, *count);
    }
    states
}

/// The states reached so far, and the schedules that first reached some.
#[derive(Default)]
pub(crate) struct Corpus {
    seen: BTreeSet<Reached>,
    /// In the order they joined. Bound: one per schedule judged, at most `runs_max`; in
    /// practice as many as there are states (each joins with one new state at least).
    schedules: Vec<Schedule>,
}

impl Corpus {
    /// Takes in what `schedule` reached: true (and it joins) when some state is new.
    pub(crate) fn offer(&mut self, schedule: &Schedule, reached: &[Reached]) -> bool {
        let mut new = false;
        for state in reached {
            new |= self.seen.insert(state.clone());
        }
        if new {
            self.schedules.push(schedule.clone());
        }
        new
    }
}

impl Explorer<'_> {
    /// Schedule `index` of a coverage-guided search with `corpus` as the batches before it
    /// left it: drawn as the random search draws it (and `false`), or a mutation of one of
    /// the corpus (and `true`), by a stream of the seed and `index`.
    pub(super) fn make(&self, corpus: &Corpus, seed: u64, index: u64) -> (Schedule, bool) {
        let mut stream = Stream::derive(seed, "coverage", &index.to_string());
        if corpus.schedules.is_empty() || stream.below(2) == 0 {
            return (self.draw(seed, index), false);
        }
        let parent = &corpus.schedules[stream.below(corpus.schedules.len() as u64) as usize];
        let scale = SCALES[stream.below(SCALES.len() as u64) as usize];
        (self.nudge_with(parent, &mut stream, scale), true)
    }

    /// The coverage-guided search of `runs_max` schedules (see the module).
    pub(super) fn search_by_coverage(
        &self,
        seed: u64,
        quiet: bool,
        time_max: Option<std::time::Duration>,
    ) -> Tally {
        let started = std::time::Instant::now();
        let progress = RunsProgress::new(self.spec.runs_max, quiet);
        let mut tally = self.empty_tally(seed, None);
        let mut corpus = Corpus::default();
        let mut next = 0;
        while next < self.spec.runs_max {
            // As the random search: stop only at a multiple of 256 schedules.
            if next > 0
                && next % 256 == 0
                && time_max.is_some_and(|limit| started.elapsed() >= limit)
            {
                break;
            }
            let batch: Vec<u64> = (next..(next + BATCH).min(self.spec.runs_max)).collect();
            let made: Vec<(Schedule, bool)> = (batch.iter())
                .map(|&index| self.make(&corpus, seed, index))
                .collect();
            let judged: Vec<Option<Judged>> = made
                .par_iter()
                .map(|(schedule, _)| {
                    let judged = self.judge(schedule, false, None);
                    progress.one_done();
                    judged
                })
                .collect();
            for ((&index, (schedule, mutated)), judged) in batch.iter().zip(made).zip(judged) {
                let judged = judged.unwrap_or_else(|| {
                    self.judge(&schedule, true, None)
                        .expect("a run alone is never crowded out")
                });
                corpus.offer(&schedule, &judged.reached);
                let kept = mutated.then_some(&schedule);
                self.count(&mut tally, index, judged, kept);
            }
            next += BATCH;
        }
        progress.done();
        tally
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coverage-guided search of the bundled stall-and-burst file, 96 schedules on
    /// `jobs` threads.
    fn search_stall_burst(jobs: usize) -> Tally {
        with_stall_burst("", |explorer| {
            crate::on_threads(Some(jobs), || explorer.search(3, true, None, None))
        })
    }

    /// `work` on an explorer of the bundled stall-and-burst file with `search = "coverage"`,
    /// 96 schedules and `extra` lines in `[explore]`.
    fn with_stall_burst<T>(extra: &str, work: impl FnOnce(&Explorer<'_>) -> T) -> T {
        let file = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scenarios/explore-stall-burst.toml"
        ));
        let text = std::fs::read_to_string(file).unwrap().replace(
            "runs_max = 300",
            &format!("runs_max = 96\nsearch = \"coverage\"\n{extra}"),
        );
        let scenario = outagelab_scenario_file::parse(&text, file).unwrap();
        let spec = scenario.explore.clone().unwrap();
        assert_eq!(spec.search, outagelab_scenario_file::Search::Coverage);
        let explorer = Explorer {
            name: scenario.name.clone(),
            text: &text,
            file,
            spec: &spec,
            sets: &[],
            bugs: Bugs::default(),
            budget: crate::process_budget(&scenario),
        };
        work(&explorer)
    }

    /// The worst schedule by the objective is the one that gave its value, whether a
    /// mutation or a draw: judged again, it scores the same.
    #[test]
    fn the_worst_of_a_coverage_search_is_the_schedule_that_scored_it() {
        with_stall_burst(
            "objective = \"max bulkheads.pool.peak_queued\"",
            |explorer| {
                // On seed 8 a drawn schedule takes the worst over from a mutation: the
                // mutation, kept, once stood for the drawn one.
                let tally = explorer.search(8, true, None, None);
                let worst = tally.worst.clone().expect("every run has a queue");
                let schedule = (tally.worst_schedule.clone())
                    .unwrap_or_else(|| explorer.draw(tally.seed, worst.index));
                let again = explorer.judge(&schedule, true, None).unwrap();
                assert_eq!(again.scores, vec![(worst.variant.clone(), worst.value)]);
            },
        );
    }

    /// One thread or two: the same tally, findings, counts and kept mutations alike; and
    /// the search did mutate (a finding first met in a mutation keeps its schedule).
    #[test]
    fn a_coverage_search_is_the_same_on_any_number_of_threads() {
        let one = search_stall_burst(1);
        assert_eq!(one, search_stall_burst(2));
        assert!(one.held + one.broke == 96, "{one:?}");
        assert!(
            one.findings.iter().any(|f| f.refined.is_some()),
            "no finding first met in a mutation: {one:?}"
        );
    }

    #[test]
    fn bands_are_quarters_of_powers_of_two() {
        let cases = [
            (0, 0),
            (1, 1),
            (3, 3),
            (4, 4),
            (7, 7),
            (8, 8),
            (9, 8),
            (10, 9),
            (15, 11),
            (16, 12),
            (19, 12),
            (20, 13),
            (150, 24),
            (210, 26),
            (u64::MAX, 251),
        ];
        for (value, expected) in cases {
            assert_eq!(band(value), expected, "{value}");
        }
    }

    /// A run whose only difference from the one before is a breaker that opened (and went
    /// half-open and closed again) reaches new states, and joins the corpus; the same run
    /// again reaches nothing new.
    #[test]
    fn a_new_breaker_transition_is_a_new_state() {
        let mut summary = Summary::default();
        summary
            .breakers
            .insert("locks".to_owned(), Default::default());
        let schedule = Schedule {
            seed: 1,
            faults: Vec::new(),
            params: Vec::new(),
        };
        let mut corpus = Corpus::default();
        assert!(corpus.offer(&schedule, &reached("today", &summary)));
        assert!(!corpus.offer(&schedule, &reached("today", &summary)));
        for transition in 0..3 {
            let breaker = summary.breakers.get_mut("locks").unwrap();
            match transition {
                0 => breaker.opened = 1,
                1 => breaker.half_opened = 1,
                _ => breaker.closed = 1,
            }
            let states = reached("today", &summary);
            assert!(corpus.offer(&schedule, &states), "transition {transition}");
            assert!(!corpus.offer(&schedule, &states));
        }
        // A fourth opening is a new band; a ninth is the eighth's.
        let breaker = summary.breakers.get_mut("locks").unwrap();
        breaker.opened = 4;
        assert!(corpus.offer(&schedule, &reached("today", &summary)));
        summary.breakers.get_mut("locks").unwrap().opened = 8;
        assert!(corpus.offer(&schedule, &reached("today", &summary)));
        summary.breakers.get_mut("locks").unwrap().opened = 9;
        assert!(!corpus.offer(&schedule, &reached("today", &summary)));
        // The same figure of another variant is a state of its own.
        assert!(corpus.offer(&schedule, &reached("split", &summary)));
        assert_eq!(corpus.schedules.len(), 7);
    }
}

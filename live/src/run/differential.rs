//! The differential test of the layers: every step of every live-capable bundled file
//! (`scenarios/*.toml`, each variant that [`super::check`] accepts) that has policies or is a
//! rate limit is run through the simulator's layer path (`outagelab_sim::StepLayers`: its
//! slots, its `actions::decide`) and through the live runner's ([`Layers::pass`], the code a
//! live run drives, here on a [`ManualClock`] with a scripted action instead of a server), on
//! the same recorded results, and the two must decide alike: the same step result (or the
//! same drop), the same instants at which the action was called (what was admitted, what was
//! retried and when), and after every request the same summary of every policy (a breaker's
//! state, openings, half-openings, closings and rejections; a bulkhead's and a semaphore's
//! counts; a retry's retries and give-ups; an adaptive limit's samples and limit; a rate
//! limiter's admissions, rejections and fail-opens).
//!
//! The recorded results are drawn from a seeded stream per file, variant and step: per
//! action call, what its I/O returned (a success, a hit, a miss, or any error a step can
//! return, in stretches of mostly healthy and mostly failing calls) or that the attempt was
//! dropped while it ran (its caller gave up: the live runner drops its future, the
//! simulator's `StepLayers` cancels its layers), and how long it took; per request, the pause
//! before the next, now and then longer than a breaker's opening. Requests run one at a time.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{Outcome, Summary};
use outagelab_sim::scenario::{PolicyRef, StepAction, StepSpec};
use outagelab_sim::{Scenario, StepLayers, StepResult, Stream};

use super::layers::{Around, Layers};
use super::{WorkDone, check};
use crate::bulkhead::DetachedPermit;
use crate::clock::{Clock, ManualClock};

/// Requests per step and path.
const REQUESTS: usize = 300;

/// One action call as recorded: what its I/O returned (`None`: the attempt was dropped while
/// it ran) and how long it took.
#[derive(Clone, Copy, Debug)]
struct Call {
    result: Option<StepResult>,
    took: SimDuration,
}

/// What a path did with one request: the step's result (`None`: dropped), the instant it
/// ended, and the instants at which it called the action.
type Decided = (Option<StepResult>, SimTime, Vec<SimTime>);

/// The recorded results of one step: the action calls (the k-th call of either path gets
/// the k-th) and the pauses between requests.
struct Recording {
    calls: Vec<Call>,
    pauses: Vec<SimDuration>,
}

impl Recording {
    fn draw(scenario: &Scenario, name: &str) -> Recording {
        let mut stream = Stream::derive(scenario.seed, "differential", name);
        let errors: Vec<Outcome> = (Outcome::ALL.iter().copied())
            .filter(|outcome| !matches!(outcome, Outcome::Ok | Outcome::Cancelled))
            .collect();
        let ms = SimDuration::from_millis;
        // Long enough for any breaker of the file to half-open, now and then.
        let long = (scenario.breakers.iter())
            .map(|spec| spec.config.open_for_max())
            .max()
            .unwrap_or(SimDuration::ZERO)
            .saturating_add(ms(1_000));
        let calls_max = REQUESTS * usize::from(u8::MAX);
        let calls = (0..calls_max)
            .map(|k| {
                // Stretches of 40 calls, mostly healthy then mostly failing.
                let failing_percent = if (k / 40) % 2 == 0 { 15 } else { 80 };
                let result = if stream.below(100) < 4 {
                    None
                } else if stream.below(100) < failing_percent {
                    let kind = errors[stream.below(errors.len() as u64) as usize];
                    Some(StepResult::Error(kind))
                } else {
                    Some(
                        [StepResult::Ok, StepResult::Hit, StepResult::Miss]
                            [stream.below(3) as usize],
                    )
                };
                let took = SimDuration::from_nanos(stream.below(ms(300).as_nanos()));
                Call { result, took }
            })
            .collect();
        let pauses = (0..REQUESTS)
            .map(|_| {
                let most = if stream.below(100) < 15 { long } else { ms(20) };
                SimDuration::from_nanos(stream.below(most.as_nanos() + 1))
            })
            .collect();
        Recording { calls, pauses }
    }
}

/// The live runner's side: the action is the recording, waits move the manual clock.
struct Scripted<'r> {
    clock: ManualClock,
    recording: &'r Recording,
    next: AtomicUsize,
    called_at: Mutex<Vec<SimTime>>,
    /// The call that was dropped, if the last one was.
    dropped: Mutex<bool>,
}

impl Around for Scripted<'_> {
    fn act(&self) -> Pin<Box<dyn Future<Output = (StepResult, Option<WorkDone>)> + Send + '_>> {
        let call = self.recording.calls[self.next.fetch_add(1, Ordering::SeqCst)];
        let now = self.clock.now();
        self.called_at.lock().unwrap().push(now);
        self.clock.set(now.saturating_add(call.took));
        match call.result {
            Some(result) => Box::pin(std::future::ready((result, None))),
            None => {
                *self.dropped.lock().unwrap() = true;
                Box::pin(std::future::pending())
            }
        }
    }

    fn sleep_until(&self, at: SimTime) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        if at > self.clock.now() {
            self.clock.set(at);
        }
        Box::pin(std::future::ready(()))
    }

    fn keep_until_done(&self, _: usize, _: DetachedPermit, _: WorkDone) {
        unreachable!("no recorded work outlives its step");
    }

    fn observe(&self, _: PolicyRef) {}

    fn rate_limit_failed_open(&self, _: usize) {}

    fn rejected_attempt(&self) {}
}

/// The policies' sections of a summary, as text to compare.
fn sections(summary: &Summary) -> String {
    serde_json::to_string(&(
        &summary.breakers,
        &summary.bulkheads,
        &summary.semaphores,
        &summary.retries,
        &summary.adaptive_limits,
        &summary.rate_limits,
    ))
    .unwrap()
}

/// Runs `step` through both paths on `recording`; the first request whose decisions differ
/// is the error.
fn compare(scenario: &Scenario, step: &StepSpec, recording: &Recording) -> Result<usize, String> {
    let mut simulated = StepLayers::new(scenario);
    let clock = ManualClock::new();
    let live = Layers::new(scenario, clock.clone());
    let scripted = Scripted {
        clock: clock.clone(),
        recording,
        next: AtomicUsize::new(0),
        called_at: Mutex::new(Vec::new()),
        dropped: Mutex::new(false),
    };
    let mut sim_calls = 0;
    let mut now = SimTime::ZERO;
    for (request, pause) in recording.pauses.iter().enumerate() {
        now = now.saturating_add(*pause);
        // The simulator's path.
        let mut called_at = Vec::new();
        let (result, ended) = simulated.run_step(step, now, |at| {
            let call = recording.calls[sim_calls];
            sim_calls += 1;
            called_at.push(at);
            (call.result, at.saturating_add(call.took))
        });
        let sim: Decided = (result, ended, called_at);
        let sim_summary = sections(&simulated.summarize(ended));
        // The live runner's path, from the same instant.
        clock.set(now);
        scripted.called_at.lock().unwrap().clear();
        *scripted.dropped.lock().unwrap() = false;
        let mut pass = live.pass(&scripted, scenario, step, 0);
        let result = match pass.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(end) => Some(end.result),
            Poll::Pending => {
                assert!(
                    *scripted.dropped.lock().unwrap(),
                    "request {request}: the live path waits on something other than a dropped call"
                );
                drop(pass); // the caller gave up: its guards report from their drop
                None
            }
        };
        let live_decided: Decided = (
            result,
            clock.now(),
            std::mem::take(&mut *scripted.called_at.lock().unwrap()),
        );
        let mut live_summary = Summary::default();
        live.summarize(scenario, &mut live_summary);
        let live_summary = sections(&live_summary);
        if sim != live_decided || sim_summary != live_summary {
            return Err(format!(
                "request {request} from {now}:\n  simulated {sim:?}\n       live {live_decided:?}\n  \
                 simulated {sim_summary}\n       live {live_summary}"
            ));
        }
        now = ended;
    }
    Ok(sim_calls)
}

/// The bundled files, by name.
fn bundled() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

/// Whether the layers decide anything for `step`.
fn has_layers(step: &StepSpec) -> bool {
    !step.policies.is_empty() || matches!(step.action, StepAction::RateLimit { .. })
}

#[test]
fn every_live_capable_bundled_step_decides_alike_simulated_and_live() {
    let mut compared = Vec::new();
    let mut failures = Vec::new();
    for path in bundled() {
        let file = outagelab_scenario_file::load(&path).unwrap_or_else(|d| panic!("{d}"));
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        for variant in &file.variants {
            let scenario = &variant.scenario;
            if check(scenario).is_err() {
                continue;
            }
            for flow in &scenario.flows {
                for (index, step) in flow.steps.iter().enumerate() {
                    if !has_layers(step) {
                        continue;
                    }
                    let name = format!("{stem} [{}] {}.steps[{index}]", variant.name, flow.name);
                    let recording = Recording::draw(scenario, &name);
                    match compare(scenario, step, &recording) {
                        Ok(calls) => compared.push(format!("{name}: {calls} calls")),
                        Err(error) => failures.push(format!("{name}: {error}")),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!("{}", compared.join("\n"));
    // Today's live-capable bundled files put a retry, a breaker and a bulkhead on their steps.
    assert!(compared.len() >= 3, "compared only {compared:?}");
}

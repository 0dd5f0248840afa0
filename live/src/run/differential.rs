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

use std::collections::VecDeque;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Mutex;
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

/// The live runner's side: the action is the script, waits move the manual clock.
struct Scripted {
    clock: ManualClock,
    calls: Mutex<VecDeque<Call>>,
    called_at: Mutex<Vec<SimTime>>,
    /// The last call was dropped.
    dropped: Mutex<bool>,
}

impl Around for Scripted {
    fn act(&self) -> Pin<Box<dyn Future<Output = (StepResult, Option<WorkDone>)> + Send + '_>> {
        let call = (self.calls.lock().unwrap().pop_front()).expect("a call was scripted");
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
        unreachable!("no scripted work outlives its step");
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

/// One step of a scenario on both paths, each with its own state and its own copy of the
/// scripted calls.
struct Both<'s> {
    scenario: &'s Scenario,
    step: &'s StepSpec,
    simulated: StepLayers<'s>,
    sim_calls: VecDeque<Call>,
    live: Layers<ManualClock>,
    scripted: Scripted,
}

impl<'s> Both<'s> {
    fn new(scenario: &'s Scenario, step: &'s StepSpec) -> Both<'s> {
        let clock = ManualClock::new();
        Both {
            scenario,
            step,
            simulated: StepLayers::new(scenario),
            sim_calls: VecDeque::new(),
            live: Layers::new(scenario, clock.clone()),
            scripted: Scripted {
                clock,
                calls: Mutex::default(),
                called_at: Mutex::default(),
                dropped: Mutex::default(),
            },
        }
    }

    /// The next action calls, in the order either path makes them.
    fn script(&mut self, calls: impl IntoIterator<Item = Call>) {
        for call in calls {
            self.sim_calls.push_back(call);
            self.scripted.calls.lock().unwrap().push_back(call);
        }
    }

    /// One request from `now` on both paths: what they decided and the simulated summary,
    /// or how they differ.
    fn request(&mut self, now: SimTime) -> Result<(Decided, Summary), String> {
        // The simulator's path.
        let mut called_at = Vec::new();
        let sim_calls = &mut self.sim_calls;
        let (result, ended) = self.simulated.run_step(self.step, now, |at| {
            let call = sim_calls.pop_front().expect("a call was scripted");
            called_at.push(at);
            (call.result, at.saturating_add(call.took))
        });
        let sim: Decided = (result, ended, called_at);
        let sim_summary = self.simulated.summarize(ended);
        // The live runner's path, from the same instant.
        let scripted = &self.scripted;
        scripted.clock.set(now);
        scripted.called_at.lock().unwrap().clear();
        *scripted.dropped.lock().unwrap() = false;
        let mut pass = self.live.pass(scripted, self.scenario, self.step, 0);
        let result = match pass.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(end) => Some(end.result),
            Poll::Pending => {
                assert!(
                    *scripted.dropped.lock().unwrap(),
                    "the live path waits on something other than a dropped call"
                );
                drop(pass); // the caller gave up: its guards report from their drop
                None
            }
        };
        let called_at = std::mem::take(&mut *scripted.called_at.lock().unwrap());
        let live: Decided = (result, scripted.clock.now(), called_at);
        let mut live_summary = Summary::default();
        self.live.summarize(self.scenario, &mut live_summary);
        let (sim_sections, live_sections) = (sections(&sim_summary), sections(&live_summary));
        if sim != live || sim_sections != live_sections {
            return Err(format!(
                "from {now}:\n  simulated {sim:?}\n       live {live:?}\n  \
                 simulated {sim_sections}\n       live {live_sections}"
            ));
        }
        Ok((sim, sim_summary))
    }
}

/// Runs `step` through both paths on `recording`; the first request whose decisions differ
/// is the error. Returns how many calls were made.
fn compare(scenario: &Scenario, step: &StepSpec, recording: &Recording) -> Result<usize, String> {
    let mut both = Both::new(scenario, step);
    both.script(recording.calls.iter().copied());
    let mut now = SimTime::ZERO;
    for (request, pause) in recording.pauses.iter().enumerate() {
        now = now.saturating_add(*pause);
        let ((_, ended, _), _) = both
            .request(now)
            .map_err(|error| format!("request {request} {error}"))?;
        now = ended;
    }
    Ok(recording.calls.len() - both.sim_calls.len())
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

/// The dropped-guard case on both paths, under every breaker preset: a half-open probe
/// dropped while it runs (its caller gave up) counts neither way and frees its slot, on the
/// simulator's path (`Layer::cancel`) and on the live runner's (the guard's drop), which
/// decide alike throughout; then failing probes reopen the breaker. (Four of the five presets
/// count an ignored result as a success: a drop reported as one would close it.)
#[test]
fn a_dropped_probe_counts_neither_way_on_both_paths_under_every_preset() {
    use outagelab_model::presets::BREAKER_PRESETS;

    let ms = SimDuration::from_millis;
    let failure = Call {
        result: Some(StepResult::Error(Outcome::Timeout)),
        took: ms(1),
    };
    let dropped = Call {
        result: None,
        took: ms(1),
    };
    for preset in BREAKER_PRESETS {
        let text = format!(
            "[scenario]\nname = \"dropped-probe\"\n[breakers.b]\npreset = \"{}\"\n\
             [flows.f]\nsteps = [{{ work = \"1ms\", breaker = \"b\" }}]\n\
             [loads.l]\nflow = \"f\"\narrivals = \"burst\"\ncount = 1\n",
            preset.name
        );
        let file = outagelab_scenario_file::parse(&text, Path::new("dropped-probe.toml"))
            .unwrap_or_else(|d| panic!("{}: {d}", preset.name));
        let scenario = &file.variants[0].scenario;
        let step = &scenario.flows[0].steps[0];
        let mut both = Both::new(scenario, step);
        let state = |summary: &Summary| summary.breakers["b"].final_state.clone();
        let request = |both: &mut Both<'_>, now: SimTime| {
            both.request(now)
                .unwrap_or_else(|error| panic!("{}: {error}", preset.name))
        };
        // Open it: failures 1 ms apart (every preset opens within 1000 calls).
        let mut now = SimTime::ZERO;
        for calls in 0.. {
            assert!(calls < 1000, "{}: never opened", preset.name);
            both.script([failure]);
            let ((_, ended, _), summary) = request(&mut both, now);
            now = ended.saturating_add(ms(1));
            if state(&summary) == "open" {
                break;
            }
        }
        // Past the opening, as long as it lasts: every probe's caller gives up.
        now = now.saturating_add(preset.open_for_max);
        for _ in 0..preset.half_open_probes {
            both.script([dropped]);
            let ((result, ended, called), summary) = request(&mut both, now);
            assert_eq!(
                (result, called.len()),
                (None, 1),
                "{}: a probe ran",
                preset.name
            );
            assert_eq!(
                state(&summary),
                "half_open",
                "{}: a drop decided",
                preset.name
            );
            now = ended;
        }
        // Its slots are free again: probes that fail reopen it.
        for _ in 0..preset.half_open_probes {
            both.script([failure]);
            let ((result, ended, called), _) = request(&mut both, now);
            assert_eq!(called.len(), 1, "{}: the slot was not freed", preset.name);
            assert_eq!(result, Some(StepResult::Error(Outcome::Timeout)));
            now = ended;
            if state(&both.simulated.summarize(now)) == "open" {
                break;
            }
        }
        let summary = both.simulated.summarize(now);
        assert_eq!(state(&summary), "open", "{}", preset.name);
        assert_eq!(summary.breakers["b"].closed, 0, "{}", preset.name);
    }
}

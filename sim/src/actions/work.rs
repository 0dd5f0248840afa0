//! A work step: the service's own time (parsing, auth, rendering), drawn per request from its
//! flow's stream. It waits for a timer and cannot fail.

use crate::actions::{Started, Timer, Waiting};
use crate::engine::{Simulator, Stage, Wait};
use crate::kernel::TimerKind;
use crate::rng::Stream;
use crate::scenario::{Distribution, Scenario};

/// One stream per flow, which all its work steps draw from.
pub(super) fn streams(scenario: &Scenario) -> Vec<Stream> {
    scenario
        .flows
        .iter()
        .map(|flow| Stream::derive(scenario.seed, "work", &flow.name))
        .collect()
}

/// Draws the work's duration and waits it out; the timer ends the step `ok`.
pub(super) fn start(sim: &mut Simulator<'_>, slot: u32, duration: &Distribution) -> Started {
    let flow = sim.request(slot).flow.index();
    let duration = sim.actions.work_rngs[flow].duration(duration);
    sim.set_stage(slot, Stage::Waiting(Wait::Action(Waiting::Work)));
    let at = sim.now.saturating_add(duration);
    sim.set_timer(slot, at, TimerKind::Action(Timer::Work));
    Started::Waits
}

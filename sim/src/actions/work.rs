//! A work step: the service's own time (parsing, auth, rendering), drawn per request from its
//! flow's stream. It waits for a timer and cannot fail.

use crate::actions::Host;
use crate::actions::{Started, Timer, Waiting};
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
pub(super) fn start(sim: &mut impl Host, slot: u32, duration: &Distribution) -> Started {
    let flow = sim.flow_of(slot).index();
    let duration = sim.actions().work_rngs[flow].duration(duration);
    sim.wait(slot, Waiting::Work);
    let at = sim.now().saturating_add(duration);
    sim.set_timer(slot, at, TimerKind::Action(Timer::Work));
    Started::Waits
}

#[cfg(test)]
mod tests {
    use crate::actions::testing::{ended, ms, run, scenario, work};

    #[test]
    fn work_steps_take_their_duration_one_after_the_other() {
        // 10 ms, then 5 ms: two requests sent together end together, at 15 ms.
        let report = run(scenario(), vec![work(ms(10)), work(ms(5))], &[(0, 2)]);
        assert_eq!(ended(&report, "ok"), 2);
        assert_eq!(report.end_ms, 15.0);
    }

    #[test]
    fn a_work_step_of_zero_ends_at_its_start() {
        let report = run(scenario(), vec![work(ms(0))], &[(3, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 3.0);
    }
}

//! A call step: a dependency modelled only by its answers (a payments API, another team's
//! service), for designs whose question is what the policies around it do, not why it fails.
//! Each call draws its latency and then whether it fails from its flow's own stream for
//! calls, waits the latency out, and answers `ok` or the step's error.
//!
//! Invariant: a call's answer depends only on the scenario's seed, the flow and how many
//! calls that flow made before it, so adding a call step to one flow changes no other flow's
//! draws, and no `work` step's.

use outagelab_report::Outcome;

use crate::actions::Host;
use crate::actions::{Started, Timer, Waiting};
use crate::kernel::TimerKind;
use crate::rng::Stream;
use crate::scenario::{Distribution, Scenario};

/// One stream per flow, which all its call steps draw from.
pub(super) fn streams(scenario: &Scenario) -> Vec<Stream> {
    scenario
        .flows
        .iter()
        .map(|flow| Stream::derive(scenario.seed, "call", &flow.name))
        .collect()
}

/// Draws the call's latency and answer (`rules::call_answer`, which a live run draws by
/// too), and waits the latency out.
pub(super) fn start(
    sim: &mut impl Host,
    slot: u32,
    latency: &Distribution,
    error_permille: u32,
    error: Outcome,
) -> Started {
    let flow = sim.flow_of(slot).index();
    let stream = &mut sim.actions().call_rngs[flow];
    let (latency, answer) = crate::rules::call_answer(stream, latency, error_permille, error);
    sim.wait(slot, Waiting::Call(answer));
    let at = sim.now().saturating_add(latency);
    sim.set_timer(slot, at, TimerKind::Action(Timer::Call));
    Started::Waits
}

#[cfg(test)]
mod tests {
    use outagelab_model::time::SimDuration;
    use outagelab_report::Outcome;

    use crate::actions::testing::{ended, ms, run, scenario, step, work};
    use crate::scenario::{Distribution, OnError, StepAction, StepSpec};

    fn call(latency: SimDuration, error_permille: u32, error: Outcome) -> StepSpec {
        step(StepAction::Call {
            latency: Distribution::Constant(latency),
            error_permille,
            error,
        })
    }

    #[test]
    fn a_call_answers_after_its_latency() {
        // 20 ms, then 5 ms of work: three requests sent at 1 ms end at 26 ms.
        let report = run(
            scenario(),
            vec![call(ms(20), 0, Outcome::ServerError), work(ms(5))],
            &[(1, 3)],
        );
        assert_eq!(ended(&report, "ok"), 3);
        assert_eq!(report.end_ms, 26.0);
    }

    #[test]
    fn a_call_that_always_fails_fails_with_its_error_at_the_end_of_its_latency() {
        let report = run(
            scenario(),
            vec![call(ms(7), 1000, Outcome::Timeout)],
            &[(0, 4)],
        );
        assert_eq!(ended(&report, "timeout"), 4);
        assert_eq!(report.end_ms, 7.0);
        assert_eq!(report.summary.latency_ms["timeout"].max, Some(7.0));
    }

    /// 1000 calls at 25%: the count of failures is binomial (mean 250, sd 13.7); the seed is
    /// fixed, so the figure is exact, and a draw that ignored the share would be far out.
    #[test]
    fn a_share_of_calls_fails() {
        let report = run(
            scenario(),
            vec![call(ms(1), 250, Outcome::ServerError)],
            &[(0, 1000)],
        );
        let failed = ended(&report, "server_error");
        assert!((200..=300).contains(&failed), "{failed} of 1000 failed");
        assert_eq!(ended(&report, "ok") + failed, 1000);
    }

    /// A failed call that goes on is followed by its next step: the error is the step's.
    #[test]
    fn a_failed_call_that_goes_on_runs_the_next_step() {
        let mut first = call(ms(3), 1000, Outcome::ServerError);
        first.on_error = OnError::Next;
        let report = run(scenario(), vec![first, work(ms(2))], &[(0, 2)]);
        assert_eq!(ended(&report, "ok"), 2);
        assert_eq!(report.end_ms, 5.0);
    }

    #[test]
    fn the_draws_are_the_seeds() {
        let failures = |seed| {
            let mut s = scenario();
            s.seed = seed;
            ended(
                &run(s, vec![call(ms(1), 500, Outcome::ServerError)], &[(0, 200)]),
                "server_error",
            )
        };
        assert_eq!(failures(1), failures(1));
        assert!((2..6).any(|seed| failures(seed) != failures(1)));
    }
}

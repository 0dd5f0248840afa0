//! A step's layers driven by hand, outside a run (the differential tests' harness): the
//! policies' slots and the actions' decision of a step's result, walked as the engine walks
//! them. Above both layers it drives (see ARCHITECTURE.md, "Layers of the simulator").

use outagelab_model::time::SimTime;
use outagelab_report::Summary;

use crate::kernel::{RequestRef, StepResult};
use crate::metrics::Metrics;
use crate::policies::{Enter, Entrant, Exit, Hold, Leaving, PlantedBugs, Policies};
use crate::rules;
use crate::scenario::Scenario;

/// A step's layers driven by hand, one request at a time, outside a run: the simulator's own
/// slots ([`Policies`]) and its decision of a step's result (`actions::decide`), walked as the
/// engine walks them for a request alone (enter outermost first; a refusal or the action's
/// result leaves them innermost first; a retry's `Again` runs the inner layers again at its
/// instant). It is what a differential test holds another harness to (`outagelab-live`'s
/// layers, on the same recorded results), so it has no events, no mechanisms and no work
/// that outlives its step.
pub struct StepLayers<'s> {
    scenario: &'s Scenario,
    policies: Policies,
    actions: crate::actions::Actions,
    metrics: Metrics,
}

impl<'s> StepLayers<'s> {
    pub fn new(scenario: &'s Scenario) -> StepLayers<'s> {
        let mut metrics = Metrics::new(
            scenario.bucket.as_nanos(),
            scenario.flows.len(),
            scenario.databases.len(),
            scenario.percentile_rule,
        );
        let policies = Policies::new(scenario, &mut metrics, PlantedBugs::default());
        let actions = crate::actions::Actions::new(scenario, &mut metrics);
        StepLayers {
            scenario,
            policies,
            actions,
            metrics,
        }
    }

    /// One request's run of `step` from `now`: `act(now)` is its action, started at `now`,
    /// returning what its I/O returned and the instant it ended, or `None` with the instant
    /// the attempt was dropped at (its caller gave up while it ran: every layer it is inside
    /// is `Layer::cancel`led, innermost first). Returns what the step returned (`None` when
    /// dropped) and the instant it ended. Bounded: a retry's attempts are bounded by its
    /// policy.
    pub fn run_step(
        &mut self,
        step: &crate::scenario::StepSpec,
        mut now: SimTime,
        mut act: impl FnMut(SimTime) -> (Option<StepResult>, SimTime),
    ) -> (Option<StepResult>, SimTime) {
        let entrant = Entrant {
            waiter: RequestRef { slot: 0, token: 0 },
            bytes: rules::request_bytes(&step.action),
        };
        let mut holds: Vec<Hold> = Vec::new();
        let mut first = 0;
        loop {
            let mut refused = None;
            for &policy in &step.policies[first..] {
                match self.policies.enter(policy, now, &entrant) {
                    Enter::Pass(hold) => holds.push(hold),
                    Enter::Queued => unreachable!("a request alone is never queued"),
                    Enter::Refused(outcome) => {
                        refused = Some(outcome);
                        break;
                    }
                }
            }
            let io_result = match refused {
                Some(outcome) => StepResult::Error(outcome),
                None => {
                    let (result, ended) = act(now);
                    now = ended;
                    let Some(result) = result else {
                        while let Some(hold) = holds.pop() {
                            self.policies.cancel(step.policies[holds.len()], now, hold);
                        }
                        return (None, now);
                    };
                    result
                }
            };
            let (actions, metrics) = (&mut self.actions, &mut self.metrics);
            let result =
                crate::actions::decide(actions, now, metrics, &step.action, io_result, refused);
            let leaving = Leaving {
                result,
                io_result,
                retry_after: None,
                work_still_running: false,
            };
            let mut again = None;
            while let Some(hold) = holds.pop() {
                let policy = step.policies[holds.len()];
                match self.policies.exit(policy, now, hold, &leaving) {
                    Exit::Left(_) => {}
                    Exit::Again { at, hold } => {
                        holds.push(hold);
                        again = Some(at);
                        break;
                    }
                    Exit::Kept(_) => unreachable!("no work outlives a step here"),
                }
            }
            match again {
                Some(at) => {
                    first = holds.len();
                    now = at;
                }
                None => return (Some(result), now),
            }
        }
    }

    /// The policies' and rate limiters' sections of a summary at `now`.
    pub fn summarize(&self, now: SimTime) -> Summary {
        let mut summary = Summary::default();
        self.policies.summarize(self.scenario, now, &mut summary);
        summary.rate_limits = self.actions.rate_limit_summaries(self.scenario);
        summary
    }
}

//! Tiny scenarios built in code, for the actions' tests: one flow, requests sent in bursts,
//! run to their end.

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::VariantReport;

use crate::scenario::{
    Arrivals, ConnectionId, ConnectionSpec, Distribution, FlowId, FlowSpec, KeyDistribution,
    KeyFamilyId, KeyFamilySpec, LoadSpec, OnError, OnHit, Scenario, ServerId, ServerSpec,
    StepAction, StepSpec,
};

pub(crate) fn ms(millis: u64) -> SimDuration {
    SimDuration::from_millis(millis)
}

/// A scenario with one Redis server (5 us a command) behind one connection 1 ms away each way,
/// so a command's round trip is 2.005 ms, and one family of a single key.
pub(crate) fn scenario() -> Scenario {
    let mut s = Scenario::empty("actions");
    s.servers.push(ServerSpec::new("redis"));
    let mut connection = ConnectionSpec::new("cache", ServerId(0));
    connection.latency = ms(1);
    s.connections.push(connection);
    s.keys.push(KeyFamilySpec {
        name: "key".into(),
        count: 1,
        distribution: KeyDistribution::Uniform,
    });
    s
}

/// The connection and the key family of [`scenario`].
pub(crate) const CONNECTION: ConnectionId = ConnectionId(0);
pub(crate) const KEY: KeyFamilyId = KeyFamilyId(0);

pub(crate) fn step(action: StepAction) -> StepSpec {
    StepSpec {
        action,
        policies: Vec::new(),
        on_error: OnError::Fail,
        on_hit: OnHit::Next,
        finally: false,
        replay_writes: false,
    }
}

pub(crate) fn work(duration: SimDuration) -> StepSpec {
    step(StepAction::Work {
        duration: Distribution::Constant(duration),
    })
}

/// Runs `steps` as the scenario's one flow, with `count` requests sent at each of `at_ms`.
pub(crate) fn run(mut s: Scenario, steps: Vec<StepSpec>, bursts: &[(u64, u64)]) -> VariantReport {
    s.flows.push(FlowSpec {
        name: "flow".into(),
        steps,
        instance: None,
    });
    for (index, &(at_ms, count)) in bursts.iter().enumerate() {
        s.loads.push(LoadSpec {
            name: format!("burst {index}"),
            flow: FlowId(0),
            start: SimTime::ZERO.saturating_add(ms(at_ms)),
            arrivals: Arrivals::Burst { count },
            caller: None,
        });
    }
    crate::run(&s).expect("the scenario runs")
}

/// How many requests of `report` ended with `outcome`.
pub(crate) fn ended(report: &VariantReport, outcome: &str) -> u64 {
    report.summary.outcomes[outcome]
}

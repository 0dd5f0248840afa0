//! The engine driven event by event through the calls `run_traced` makes, for tests that
//! assert its state between events (as quinn's tests drive a `Connection`): a tiny scenario
//! built in code (`actions::testing`), then [`Stepper::step`] runs one event at a time and the
//! test reads the clock, the requests' stages and the counts.

use outagelab_model::bulkhead::BulkheadConfig;
use outagelab_model::time::{SimDuration, SimTime};

use super::{Bugs, Simulator, Slot, Stage};
use crate::actions::testing::{CONNECTION, KEY, ms, scenario, step, work};
use crate::observe::Observation;
use crate::scenario::{
    Arrivals, BulkheadId, BulkheadSpec, FlowId, FlowSpec, LoadSpec, PolicyRef, RedisCommand,
    Scenario, StepAction, StepSpec,
};

struct Stepper<'s> {
    simulator: Simulator<'s>,
}

impl<'s> Stepper<'s> {
    fn new(scenario: &'s Scenario) -> Stepper<'s> {
        scenario.check_references().expect("a well-formed scenario");
        let observation = Observation::new(scenario);
        Stepper {
            simulator: Simulator::new(scenario, Bugs::default(), observation, &super::UNBOUNDED),
        }
    }

    /// Runs the next event; its instant, or `None` when none is left.
    fn step(&mut self) -> Option<SimTime> {
        let (at, event) = self.simulator.events.pop()?;
        self.simulator.process(at, event);
        assert!(self.simulator.monitors.violation().is_none());
        Some(at)
    }

    /// Runs every event due at or before `at`; the instants they ran at.
    fn run_until(&mut self, at: SimTime) -> Vec<SimTime> {
        let mut ran = Vec::new();
        while self
            .simulator
            .events
            .peek_time()
            .is_some_and(|next| next <= at)
        {
            ran.extend(self.step());
        }
        ran
    }

    /// Each live request's stage, in arrival order (then by slot, for requests that arrived
    /// at one instant: in arrival order while no slot has been freed).
    fn stages(&self) -> Vec<&'static str> {
        let mut live: Vec<_> = (self.simulator.slots.iter())
            .filter_map(Slot::live_request)
            .enumerate()
            .map(|(slot, request)| (request.started, slot, request.stage.name()))
            .collect();
        live.sort();
        live.into_iter().map(|(_, _, stage)| stage).collect()
    }

    fn in_flight(&self) -> u64 {
        self.simulator.in_flight
    }

    /// Requests that ended with `outcome` so far.
    fn ended(&self, outcome: outagelab_report::Outcome) -> u64 {
        self.simulator.observation.metrics.outcome_counts()[outcome.name()]
    }
}

fn at_ms(millis: u64) -> SimTime {
    SimTime::ZERO.saturating_add(ms(millis))
}

fn with_flow(mut s: Scenario, steps: Vec<StepSpec>, loads: &[(u64, u64)]) -> Scenario {
    s.flows.push(FlowSpec {
        name: "flow".into(),
        steps,
        instance: None,
    });
    for (index, &(at, count)) in loads.iter().enumerate() {
        s.loads.push(LoadSpec {
            name: format!("burst {index}"),
            flow: FlowId(0),
            start: at_ms(at),
            arrivals: Arrivals::Burst { count },
            caller: None,
        });
    }
    s
}

#[test]
fn a_get_takes_its_round_trip_event_by_event() {
    // 1 ms each way and 5 us on the server: the command reaches the server at 1 ms, the server
    // is done at 1.005 ms, the reply is back at 2.005 ms, and the request ends there.
    let get = step(StepAction::Redis {
        connection: CONNECTION,
        command: RedisCommand::Get,
        key: KEY,
    });
    let s = with_flow(scenario(), vec![get], &[(0, 1)]);
    let mut stepper = Stepper::new(&s);
    assert_eq!(stepper.step(), Some(SimTime::ZERO), "the arrival");
    assert_eq!(stepper.stages(), ["waiting for a reply"]);
    assert_eq!(stepper.in_flight(), 1);
    let us = |micros: u64| SimTime::ZERO.saturating_add(SimDuration::from_micros(micros));
    assert_eq!(
        stepper.step(),
        Some(us(1_000)),
        "the command reaches the server"
    );
    assert_eq!(stepper.step(), Some(us(1_005)), "the server is done");
    assert_eq!(stepper.stages(), ["waiting for a reply"]);
    assert_eq!(stepper.step(), Some(us(2_005)), "the reply is back");
    assert_eq!(stepper.stages(), Vec::<&str>::new());
    assert_eq!(stepper.in_flight(), 0);
    assert_eq!(stepper.ended(outagelab_report::Outcome::Ok), 1);
}

#[test]
fn a_permit_freed_as_a_request_arrives_goes_to_the_queue_head_and_the_newcomer_queues() {
    // A bulkhead of 1 with a queue of 1 around 10 ms of work. A arrives at 0 and works until
    // 10 ms; B arrives at 5 ms and queues; C arrives at 10 ms, the instant A's work ends. Work
    // ending runs before arrivals at one instant (the same-instant rule), so A's permit goes
    // to B, the queue's head, and C finds the queue empty and waits there: nobody is shed.
    let mut s = scenario();
    s.bulkheads.push(BulkheadSpec {
        name: "bulkhead".into(),
        enabled: true,
        config: BulkheadConfig::new(1, 1).expect("a valid bulkhead"),
    });
    let mut guarded = work(ms(10));
    guarded.policies = vec![PolicyRef::Bulkhead(BulkheadId(0))];
    let s = with_flow(s, vec![guarded], &[(0, 1), (5, 1), (10, 1)]);
    let mut stepper = Stepper::new(&s);
    stepper.run_until(at_ms(5));
    assert_eq!(stepper.stages(), ["working", "queued"]);
    let ran = stepper.run_until(at_ms(10));
    assert_eq!(ran, [at_ms(10), at_ms(10)], "A's work ends, then C arrives");
    assert_eq!(stepper.stages(), ["working", "queued"], "B works, C queued");
    assert_eq!(stepper.ended(outagelab_report::Outcome::Shed), 0);
    assert_eq!(stepper.ended(outagelab_report::Outcome::Ok), 1);
    stepper.run_until(at_ms(30));
    assert_eq!(stepper.ended(outagelab_report::Outcome::Ok), 3);
    assert_eq!(stepper.in_flight(), 0);
}

#[test]
fn the_stage_a_request_is_in_names_what_it_waits_for() {
    // Every stage the harness can see has a name: a request neither started nor ended is
    // never shown as "start" between events (requests made runnable are advanced before the
    // next event).
    let s = with_flow(scenario(), vec![work(ms(1)), work(ms(1))], &[(0, 3)]);
    let mut stepper = Stepper::new(&s);
    while stepper.step().is_some() {
        for stage in stepper.stages() {
            assert_ne!(stage, Stage::Start.name());
            assert_ne!(stage, Stage::Acting.name());
        }
    }
    assert_eq!(stepper.ended(outagelab_report::Outcome::Ok), 3);
}

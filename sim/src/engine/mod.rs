//! The engine: the event loop, request flows, and the policies attached to their steps.
//!
//! A request runs its flow's steps in order. A step's request passes the step's policy layers
//! in the order the step lists them ([`crate::policies`]): it may queue in one, or be refused
//! by one before any I/O. Then it acts: a Redis command, a database query, local work, a
//! rate-limit or throttle check, a cache operation. When the step ends, the request leaves
//! its layers innermost first (a retry may send it back in), and goes on, finishes, or fails
//! according to the step's `on_error` and `on_hit`.
//!
//! A request is an explicit state: its [`Stage`] says what it does or waits for, and its
//! holds say what it holds for each layer it is inside. Requests live in a slab of slots
//! addressed by index. A request that waits hands out a [`RequestRef`] (slot and token); when
//! the wait ends the token is bumped, so a second answer to the same wait (a reply after a
//! timeout, a completion after a query timeout) is dropped. Requests that became runnable
//! during an event are advanced, in order, before the next event.
//!
//! Invariant: every request that arrives ends exactly once, or is counted as unfinished when
//! the run stops; the monitors ([`crate::monitors`]) check it, and the policies' limits,
//! after every event.

mod arrivals;
use arrivals::LoadState;
pub use arrivals::SENDS_AT_ONE_INSTANT_MAX;
mod drain;
mod flow;
mod host;
mod memory;
mod report;
#[cfg(test)]
mod stepping;

use std::collections::{BTreeMap, VecDeque};

use outagelab_model::reconnect::{ConnectionError, Failure, FailureEffect, Lease, should_replay};
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::trace::{Trace, TraceWhat};
use outagelab_report::{
    FaultWindow, LogEntry, Outcome, ServiceSummary, Summary, VariantReport, Verdict,
};

use crate::actions::{self, Actions, RequestHeld, Started, Waiting, Woken};
use crate::budget::{Account, MemoryBudget, MemoryCheck, UNBOUNDED};
use crate::callers::{CallNext, CallRef, Callers};
use crate::database::Databases;
use crate::error::SimError;
use crate::journal;
use crate::kernel::{Event, EventQueue, RequestRef, StepResult, TimerKind};
use crate::metrics::Metrics;
use crate::monitors::Monitors;
use crate::observe::{Observation, Sources};
use crate::open_loop::OpenLoopClock;
use crate::policies::{Enter, Entrant, Exit, Handover, Hold, Leaving, PlantedBugs, Policies};
use crate::reconnect_slots::{ReconnectSlots, SlotAcquire, link_of};
use crate::redis::{LinkEvent, Op, Redis};
use crate::rng::{Stream, key_index};
use crate::scenario::{
    Arrivals, ConnectionId, DatabaseId, FaultTarget, FlowId, KeyFamilyId, LoadId, OnError, OnHit,
    PolicyRef, Scenario, ServerId, Spread, StepSpec,
};
use crate::trace::Tracer;
use crate::versions::{DataKey, Versions};

/// Runs one scenario to its end and reports what happened.
///
/// Fails when the scenario's cross-references are broken (which the scenario file reader
/// never produces), or when a monitor sees an invariant broken: the run stops there.
pub fn run(scenario: &Scenario) -> Result<VariantReport, SimError> {
    run_with_bugs(scenario, Bugs::default())
}

/// Bugs to plant on purpose, to show that the invariant monitors catch them. Only tests
/// (and the command line's hidden `--plant-bug`) set one; a scenario file cannot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bugs {
    /// A bulkhead lets one request in past its limit.
    pub bulkhead_admits_one_too_many: bool,
    /// A request refused with `shed` disappears without ending.
    pub shed_request_vanishes: bool,
    /// A reconnect slot without its generation check: a failure seen through an old lease
    /// retires the live link.
    pub slot_ignores_generation: bool,
    /// A reconnect slot replays writes whatever the step opted into.
    pub slot_replays_every_write: bool,
}

impl Bugs {
    /// The names the command line accepts, with the bug each plants.
    pub const NAMES: [&'static str; 4] = [
        "bulkhead-admits-one-too-many",
        "shed-request-vanishes",
        "slot-ignores-generation",
        "slot-replays-every-write",
    ];

    /// The bug named `name` (one of [`Bugs::NAMES`]).
    pub fn named(name: &str) -> Option<Bugs> {
        let mut bugs = Bugs::default();
        match name {
            "bulkhead-admits-one-too-many" => bugs.bulkhead_admits_one_too_many = true,
            "shed-request-vanishes" => bugs.shed_request_vanishes = true,
            "slot-ignores-generation" => bugs.slot_ignores_generation = true,
            "slot-replays-every-write" => bugs.slot_replays_every_write = true,
            _ => return None,
        }
        Some(bugs)
    }
}

/// [`run`] with bugs planted on purpose (see [`Bugs`]).
pub fn run_with_bugs(scenario: &Scenario, bugs: Bugs) -> Result<VariantReport, SimError> {
    run_observed(scenario, bugs, &mut |_| {})
}

/// How often [`run_observed`] reports progress, in events.
pub const PROGRESS_EVERY_EVENTS: u64 = 1 << 16;

/// [`run_with_bugs`], calling `progress` with the virtual time reached every
/// [`PROGRESS_EVERY_EVENTS`] events, for a caller that shows progress. What it does with it
/// cannot change the run.
pub fn run_observed(
    scenario: &Scenario,
    bugs: Bugs,
    progress: &mut dyn FnMut(SimTime),
) -> Result<VariantReport, SimError> {
    run_traced(scenario, bugs, progress, None).map(|(report, _)| report)
}

/// [`run_observed`], tracing every `sample_every`-th request (in arrival order, from the
/// first; at most [`crate::TRACED_REQUESTS_MAX`]) when it is given: the trace comes back
/// beside the report, which tracing does not change.
pub fn run_traced(
    scenario: &Scenario,
    bugs: Bugs,
    progress: &mut dyn FnMut(SimTime),
    sample_every: Option<std::num::NonZeroU64>,
) -> Result<(VariantReport, Option<Trace>), SimError> {
    run_in_budget(scenario, bugs, progress, sample_every, &UNBOUNDED)
        .map(|run| (run.report, run.trace))
}

/// A run in a process's memory budget ([`crate::budget`]): its report, its trace, and whether
/// the budget stopped it only because of what others held.
pub struct BudgetedRun {
    pub report: VariantReport,
    pub trace: Option<Trace>,
    /// The run was stopped by the budget (`memory_budget`) while other runs or kept results
    /// held part of it: alone, it would have gone on. A caller that runs several at once runs
    /// it again once nothing else runs, so that its result is the one it has alone.
    pub crowded_out: bool,
}

/// [`run_traced`], charging what the run holds to `budget`, which other runs of the process
/// may share; the run is also held to its own `memory_max`.
pub fn run_in_budget<'s>(
    scenario: &'s Scenario,
    bugs: Bugs,
    progress: &mut dyn FnMut(SimTime),
    sample_every: Option<std::num::NonZeroU64>,
    budget: &'s MemoryBudget,
) -> Result<BudgetedRun, SimError> {
    scenario
        .check_references()
        .map_err(SimError::BrokenReference)?;
    let mut simulator = Simulator::new(scenario, bugs, Observation::new(scenario), budget);
    simulator.tracer = sample_every.map(Tracer::new);
    let verdict = simulator.run_to_end(progress);
    if let Some(violation) = simulator.monitors.take_violation() {
        return Err(SimError::InvariantViolated(violation));
    }
    let trace = simulator.tracer.take().map(|t| t.finish(simulator.now));
    let crowded_out = verdict == Verdict::MemoryBudget && simulator.memory.account().crowded_out();
    Ok(BudgetedRun {
        report: simulator.report(verdict),
        trace,
        crowded_out,
    })
}

/// The summary a run of this scenario would have, with every count at zero: it names every
/// metric an expectation may refer to.
pub fn summary_shape(scenario: &Scenario) -> Result<Summary, SimError> {
    scenario
        .check_references()
        .map_err(SimError::BrokenReference)?;
    Ok(Simulator::new(
        scenario,
        Bugs::default(),
        Observation::new(scenario),
        &UNBOUNDED,
    )
    .summary())
}

/// The metrics a run of this scenario records into, with every gauge and counter it
/// registers and nothing recorded yet: for a run of the same scenario outside the simulator
/// (`outagelab live`) to record into, so that its series have the same names
/// ([`Metrics::gauge`] and [`Metrics::counter`] find them).
pub fn empty_metrics(scenario: &Scenario) -> Result<Metrics, SimError> {
    scenario
        .check_references()
        .map_err(SimError::BrokenReference)?;
    let observation = Observation::new(scenario);
    Ok(
        Simulator::new(scenario, Bugs::default(), observation, &UNBOUNDED)
            .observation
            .metrics,
    )
}

/// Whether a request counts as one of the run's requests, or is a step running on its own.
///
/// Fan-out (hedged requests, parallel reads) fits this shape without touching the rest: a
/// `Child { parent: RequestRef }` role for the copies a step spawns, and a
/// `Wait::Children { pending }` stage in which the parent waits until enough children have
/// settled it, the others being abandoned through their tokens like a reply after a timeout.
/// No policy uses it yet, so it is not built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Main,
    /// A fire-and-forget step (or a `finally` step the request will not reach) running on its
    /// own: it runs this one step, and its outcome is counted apart from the requests.
    Background,
}

/// What a request is doing. Only the first three stages are runnable.
pub(crate) enum Stage {
    /// About to start its current step.
    Start,
    /// Entering the step's layers; `next` is the position of the next one to enter.
    Entering { next: u8 },
    /// Running the step's action: first, or again after a slot's connection attempt ended,
    /// or as a replay on a fresh connection.
    Acting,
    /// Queued in the layer at `layer`, which hands it its hold when a place frees up.
    Queued { layer: u8 },
    /// Waiting for its action to end.
    Waiting(Wait),
    /// Waiting out a retry's backoff; then enters the layers from `next` again.
    Backoff { next: u8 },
}

/// What a request's action waits for: an answer of one of the engine's mechanisms, or a wait
/// of the action's own.
pub(crate) enum Wait {
    /// A Redis reply (or the command's timeout, or the link's loss).
    Reply,
    /// A database query (or its timeout).
    Query,
    /// A reconnect slot's connection attempt.
    SlotConnect,
    /// A wait the action keeps, and ends through its own timer.
    Action(Waiting),
}

impl Stage {
    /// For messages.
    fn name(&self) -> &'static str {
        match self {
            Stage::Start => "start",
            Stage::Entering { .. } => "entering",
            Stage::Acting => "acting",
            Stage::Queued { .. } => "queued",
            Stage::Waiting(Wait::Reply) => "waiting for a reply",
            Stage::Waiting(Wait::Query) => "waiting for a query",
            Stage::Waiting(Wait::SlotConnect) => "waiting for a connection attempt",
            Stage::Waiting(Wait::Action(waiting)) => waiting.name(),
            Stage::Backoff { .. } => "backing off",
        }
    }
}

pub(crate) use crate::versions::{HeldValue, ValueFrom};

pub(crate) struct Request {
    pub(crate) flow: FlowId,
    step: u16,
    role: Role,
    stage: Stage,
    started: SimTime,
    /// Seeds the key each step draws from its key family.
    key_seed: u64,
    /// A Retry-After the last refusal asked for, for the retry policy.
    pub(crate) retry_after: Option<SimDuration>,
    /// The reconnect slot and lease the current step's command runs on.
    lease: Option<(ConnectionId, Lease)>,
    /// Whether the current step's command was already replayed (a replay is made once).
    replayed: bool,
    /// The write the current step's copies belong to, when a slot may replay it.
    pub(crate) origin: Option<u64>,
    /// The closed-loop caller that sent it, which sends again when it ends.
    worker: Option<(LoadId, u32)>,
    /// The call (and its attempt number) it is an attempt of, when its load has a caller.
    call: Option<(CallRef, u32)>,
    /// Its number in the trace, when `run --trace` sampled it.
    trace: Option<u64>,
    /// The value it last read or wrote of a key whose versions are followed, and where from.
    pub(crate) value: Option<HeldValue>,
    /// Its caller gave up on it and told the service: it stops before its next step.
    cancelled: bool,
}

impl Request {
    fn new(flow: FlowId, step: u16, role: Role, started: SimTime, key_seed: u64) -> Request {
        Request {
            flow,
            step,
            role,
            stage: Stage::Start,
            started,
            key_seed,
            retry_after: None,
            lease: None,
            replayed: false,
            origin: None,
            cancelled: false,
            worker: None,
            call: None,
            trace: None,
            value: None,
        }
    }
}

struct Slot {
    /// Bumped whenever the request in this slot stops waiting, and kept across reuse.
    token: u32,
    /// Whether `request` is a live request; when not, it is the last one the slot held, ended
    /// (kept in place, not wrapped in an `Option`, so that a look-up is one index).
    live: bool,
    request: Request,
    /// What the request holds for each layer of its step it is inside, outermost first. Kept
    /// with the slot so that its storage is reused by the next request.
    holds: Vec<Hold>,
    /// What the request holds of its actions' state (throttle slots, locks): kept with the
    /// slot, like `holds`, so that a request that holds nothing moves nothing, and emptied
    /// when the request is freed.
    held: RequestHeld,
}

impl Slot {
    /// The request in the slot, if it is live.
    fn live_request(&self) -> Option<&Request> {
        self.live.then_some(&self.request)
    }
}

/// How a step ended: its action ran and returned, or a layer refused it before it ran.
#[derive(Clone, Copy)]
enum Ended {
    Action(StepResult),
    Refused(Outcome),
}

/// What waits for a database query whose caller timed out.
enum AfterQuery {
    /// A hold kept past its step (a bulkhead's permit, for its connection): given back.
    Release(PolicyRef, Hold),
    /// A retry inside a pool, parked on the abandoned query's connection: it runs again when
    /// the query ends and its backoff (until the time given) is over.
    Retry(RequestRef, SimTime),
}

/// What a step's end means for its request.
enum Next {
    /// Go on with the request's next step.
    Continue,
    /// The request does not go on now: it has ended, or it waits (to retry the step).
    Stop,
}

/// The engine's state. The event loop is driven from [`run_traced`]: `run_to_end` pops each
/// event, `dispatch` hands it to its mechanism or handler, `drain` delivers what the
/// mechanisms produced and advances the requests that became runnable, and the
/// [`Observation`] reads the mechanisms' gauges. The step actions ([`crate::actions`]) reach the engine's mechanisms through the
/// `pub(crate)` fields and methods here (the clock, the queue, Redis, the databases, a
/// request's stage, timers and key), and keep their own state in `actions`.
pub(crate) struct Simulator<'s> {
    scenario: &'s Scenario,
    bugs: Bugs,
    pub(crate) now: SimTime,
    pub(crate) events: EventQueue,
    events_processed: u64,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    runnable: VecDeque<RequestRef>,
    in_flight: u64,
    loads: Vec<LoadState>,
    loads_active: usize,
    /// A closed loop whose caller kept sending at one instant (see `on_worker_sends`): the
    /// run stops.
    zero_time_loop: Option<LoadId>,
    pub(crate) redis: Redis,
    pub(crate) databases: Databases,
    policies: Policies,
    /// The step actions' own state (caches, rate limiters, throttles, lock clients).
    pub(crate) actions: Actions,
    /// What waits for a database query whose caller timed out, by the waiter reference the
    /// database still holds. Never larger than the number of running queries.
    after_queries: BTreeMap<(u32, u32), AfterQuery>,
    /// What the run records: every metric, and the handles of the engine's own series.
    pub(crate) observation: Observation,
    /// The calls of loads that go through a caller.
    callers: Callers,
    monitors: Monitors,
    /// The run's account with the process's memory budget, and its checks.
    memory: MemoryCheck<'s>,
    /// The most policy layers a step of the scenario has (for the memory estimate).
    layers_max: usize,
    reconnect_slots: ReconnectSlots,
    /// The sampled requests' events, when the run is traced.
    tracer: Option<Tracer>,
    /// The committed versions of followed data.
    pub(crate) versions: Versions,
}

impl<'s> Simulator<'s> {
    /// The state at the start of a run of `scenario`, recording into `observation` (built
    /// for the same scenario) and charging what it holds to `budget`.
    fn new(
        scenario: &'s Scenario,
        bugs: Bugs,
        mut observation: Observation,
        budget: &'s MemoryBudget,
    ) -> Self {
        let mut events = EventQueue::new(scenario.ties, scenario.seed);
        let mut monitors = Monitors::new(scenario);
        for (index, c) in (0u32..).zip(&scenario.connections) {
            if matches!(c.reconnect, crate::scenario::Reconnect::Slot(_)) && c.connected_at_start {
                // The slot holds the connection's own entry as its first link.
                monitors.link_connected(ConnectionId(index), ConnectionId(index));
            }
        }
        let planted = PlantedBugs {
            bulkhead_admits_one_too_many: bugs.bulkhead_admits_one_too_many,
        };
        let policies = Policies::new(scenario, &mut observation.metrics, planted);
        let actions = Actions::new(scenario, &mut observation.metrics);
        let (loads, loads_active) = arrivals::start_loads(scenario, &mut events);
        for (index, fault) in scenario.faults.iter().enumerate() {
            let id = crate::scenario::FaultId(index as u32);
            events.schedule(fault.at, Event::FaultStarts(id));
            if let Some(end) = fault.end() {
                events.schedule(end, Event::FaultEnds(id));
            }
        }
        let redis = Redis::new(scenario, &mut events);
        Simulator {
            scenario,
            bugs,
            now: SimTime::ZERO,
            events,
            events_processed: 0,
            slots: Vec::new(),
            free_slots: Vec::new(),
            runnable: VecDeque::new(),
            in_flight: 0,
            loads,
            loads_active,
            zero_time_loop: None,
            redis,
            databases: Databases::new(scenario),
            policies,
            actions,
            after_queries: BTreeMap::new(),
            observation,
            callers: Callers::new(scenario),
            monitors,
            memory: MemoryCheck::new(Account::new(budget, scenario.limits.memory_max)),
            layers_max: scenario
                .flows
                .iter()
                .flat_map(|flow| &flow.steps)
                .map(|step| step.policies.len())
                .max()
                .unwrap_or(0),
            reconnect_slots: ReconnectSlots::new(scenario),
            tracer: None,
            versions: Versions::default(),
        }
    }

    /// Runs until the horizon if there is one (background work such as reconnects and late
    /// replies goes on after the last request ended), otherwise until every request has
    /// ended; a budget, a stall or a broken invariant stops it earlier.
    fn run_to_end(&mut self, progress: &mut dyn FnMut(SimTime)) -> Verdict {
        let limits = self.scenario.limits;
        let ended = |simulator: &Self| {
            if simulator.in_flight == 0
                && simulator.loads_active == 0
                && simulator.callers.in_flight() == 0
            {
                Verdict::Completed
            } else {
                Verdict::Horizon
            }
        };
        loop {
            if self.over_memory_budget() {
                return Verdict::MemoryBudget;
            }
            if limits.horizon.is_none()
                && self.loads_active == 0
                && self.in_flight == 0
                && self.callers.in_flight() == 0
            {
                return Verdict::Completed;
            }
            // Taken out before the checks: when one stops the run, the event is not processed
            // and nothing reads the queue again.
            let next = self.events.pop();
            if let Some(horizon) = limits.horizon
                && next.as_ref().is_none_or(|&(at, _)| at > horizon)
            {
                // Nothing more happens before the horizon.
                self.now = self.now.max(horizon);
                return ended(self);
            }
            let Some((at, event)) = next else {
                // Requests wait for something that will never answer.
                return Verdict::Stalled;
            };
            if at > limits.time_max {
                self.now = limits.time_max;
                return Verdict::TimeBudget;
            }
            if self.events_processed >= limits.events_max {
                return Verdict::EventBudget;
            }
            if self.events_processed.is_multiple_of(PROGRESS_EVERY_EVENTS) {
                progress(self.now);
            }
            self.process(at, event);
            if self.monitors.violation().is_some() {
                // The caller reports the violation instead of the figures.
                return Verdict::Stalled;
            }
            if self.zero_time_loop.is_some() {
                return Verdict::ZeroTimeLoop;
            }
        }
    }

    /// One event: the clock moves to `at`, the event's mechanism or handler runs, what it
    /// left is taken in `DRAIN_ORDER` (advancing the requests it made runnable), the
    /// observation reads the gauges, and the monitors check that every request is counted.
    fn process(&mut self, at: SimTime, event: Event) {
        self.now = at;
        self.observation.metrics.advance_to(at);
        self.events_processed += 1;
        self.dispatch(event);
        self.drain();
        self.observe();
        self.monitors.check_conservation(self.now);
    }

    fn dispatch(&mut self, event: Event) {
        let now = self.now;
        let events = &mut self.events;
        match event {
            Event::Arrival(load) => self.on_arrival(load),
            Event::WorkerSends { load, worker } => self.on_worker_sends(load, worker),
            Event::CallerTimeout { call, attempt } => {
                if let Some((end, cancel)) = self.callers.timed_out(now, call, attempt) {
                    // The slot still holds that attempt unless it ended meanwhile (its token
                    // moves on with every step, so the attempt is known by its call).
                    if let Some(request) = cancel {
                        let entry = &mut self.slots[request.slot as usize];
                        if entry.live && entry.request.call == Some((call, attempt)) {
                            entry.request.cancelled = true;
                        }
                    }
                    self.after_attempt(call, end);
                }
            }
            Event::CallerRetry { call } => self.attempt(call),
            Event::RequestTimer { request, kind } => self.on_request_timer(request, kind),
            Event::Redis(event) => self.redis.handle(now, event, events),
            Event::Database(event) => self.databases.handle(now, event, events),
            Event::FaultStarts(fault) | Event::FaultEnds(fault) => {
                let on = matches!(event, Event::FaultStarts(_));
                let spec = &self.scenario.faults[fault.index()];
                if let Some(tracer) = &mut self.tracer {
                    let what = TraceWhat::Fault {
                        name: spec.name.clone(),
                        kind: spec.kind.name().to_owned(),
                        started: on,
                    };
                    tracer.record(now, None, what);
                }
                match spec.target {
                    FaultTarget::Server(server) => {
                        self.redis.fault(now, server, spec.kind, on, events)
                    }
                    FaultTarget::Connection(connection) => self
                        .redis
                        .connection_fault(now, connection, spec.kind, on, events),
                    FaultTarget::Database(database) => {
                        self.databases.fault(now, database, spec.kind, on, events)
                    }
                }
            }
        }
    }

    /// Hands the mechanisms to the observation, which reads their gauges at the end of an
    /// event.
    fn observe(&mut self) {
        let redis_changed = self.redis.take_changed();
        let sources = Sources {
            in_flight: self.in_flight,
            redis: &mut self.redis,
            redis_changed,
            databases: &mut self.databases,
            reconnect_slots: &self.reconnect_slots,
            actions: &mut self.actions,
            policies: &mut self.policies,
        };
        self.observation.after_event(self.now, sources);
    }

    /// A new request of `flow`, starting now at `step` with `role`, in a free slot: written
    /// in place into the slot (a request is large, and is not built apart and moved in).
    fn allocate(&mut self, flow: FlowId, step: u16, role: Role, key_seed: u64) -> RequestRef {
        if role == Role::Main {
            self.monitors.went_live();
        }
        let now = self.now;
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => self.new_slot(),
        };
        let entry = &mut self.slots[slot as usize];
        debug_assert!(!entry.live && entry.holds.is_empty());
        entry.live = true;
        entry.request = Request::new(flow, step, role, now, key_seed);
        RequestRef {
            slot,
            token: entry.token,
        }
    }

    /// A slot added at the end of the slab, free: its request is a placeholder, not live.
    #[cold]
    fn new_slot(&mut self) -> u32 {
        if self.slots.len() == self.slots.capacity() {
            self.grow_slab();
        }
        self.slots.push(Slot {
            token: 0,
            live: false,
            request: Request::new(FlowId(0), 0, Role::Main, SimTime::ZERO, 0),
            holds: Vec::new(),
            held: RequestHeld::default(),
        });
        u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 live requests")
    }

    fn is_live(&self, request: RequestRef) -> bool {
        let slot = &self.slots[request.slot as usize];
        slot.token == request.token && slot.live
    }

    pub(crate) fn current_ref(&self, slot: u32) -> RequestRef {
        RequestRef {
            slot,
            token: self.slots[slot as usize].token,
        }
    }

    /// The request in `slot`: one index, and a liveness check only with debug assertions (in
    /// every test). Invariant: `slot` holds a live request. Every caller has it from
    /// `allocate`, or from a `RequestRef` that [`Self::is_live`] accepted, and uses it before
    /// the request is freed (`free` asserts, with debug assertions, that it frees a live one).
    /// A freed slot still holds its ended request, so a stale read would not fail by itself:
    /// the assertion is what catches one in the tests.
    pub(crate) fn request_mut(&mut self, slot: u32) -> &mut Request {
        let entry = &mut self.slots[slot as usize];
        debug_assert!(entry.live);
        &mut entry.request
    }

    /// The request in `slot`, which is live (as for [`Self::request_mut`]).
    pub(crate) fn request(&self, slot: u32) -> &Request {
        let entry = &self.slots[slot as usize];
        debug_assert!(entry.live);
        &entry.request
    }

    /// The index of the flow whose figures a request of `flow` counts in.
    fn reports_as(&self, flow: FlowId) -> usize {
        self.scenario.flows[flow.index()].reports_as(flow).index()
    }

    /// The step the request in `slot` is on (which exists: a request past its last step has
    /// ended).
    pub(crate) fn step_of(&self, slot: u32) -> &'s StepSpec {
        let scenario = self.scenario;
        let request = self.request(slot);
        &scenario.flows[request.flow.index()].steps[usize::from(request.step)]
    }
}

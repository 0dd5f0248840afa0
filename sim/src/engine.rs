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

use std::collections::{BTreeMap, VecDeque};

use outagelab_model::reconnect::{ConnectionError, Failure, FailureEffect, Lease, should_replay};
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::trace::{Trace, TraceWhat};
use outagelab_report::{
    CountKey, FaultWindow, GaugeKey, InstanceSummary, LogEntry, Outcome, ServiceSummary, Summary,
    VariantReport, Verdict,
};

use crate::actions::{self, Actions, RequestHeld, Started, Waiting, Woken};
use crate::callers::{CallNext, CallRef, Callers};
use crate::database::Databases;
use crate::error::SimError;
use crate::http::HttpTally;
use crate::journal;
use crate::kernel::{Event, EventQueue, RequestRef, StepResult, TimerKind};
use crate::metrics::{CounterId, GaugeId, Latency, Metrics};
use crate::monitors::Monitors;
use crate::policies::{Enter, Entrant, Exit, Handover, Hold, Leaving, PlantedBugs, Policies};
use crate::reconnect_slots::{ReconnectSlots, SlotAcquire, link_of};
use crate::redis::{LinkEvent, Op, Redis};
use crate::rng::{Stream, key_index};
use crate::scenario::{
    Arrivals, ConnectionId, DatabaseId, FaultTarget, FlowId, KeyFamilyId, LoadEnd, LoadId, OnError,
    OnHit, PolicyRef, Scenario, ServerId, Spread, StepSpec,
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
    scenario
        .check_references()
        .map_err(SimError::BrokenReference)?;
    let mut simulator = Simulator::new(scenario, bugs);
    simulator.tracer = sample_every.map(Tracer::new);
    let verdict = simulator.run_to_end(progress);
    if let Some(violation) = simulator.monitors.take_violation() {
        return Err(SimError::InvariantViolated(violation));
    }
    let trace = simulator.tracer.take().map(|t| t.finish(simulator.now));
    Ok((simulator.report(verdict), trace))
}

/// The summary a run of this scenario would have, with every count at zero: it names every
/// metric an expectation may refer to.
pub fn summary_shape(scenario: &Scenario) -> Result<Summary, SimError> {
    scenario
        .check_references()
        .map_err(SimError::BrokenReference)?;
    Ok(Simulator::new(scenario, Bugs::default()).summary())
}

/// The metrics a run of this scenario records into, with every gauge and counter it
/// registers and nothing recorded yet: for a run of the same scenario outside the simulator
/// (`outagelab live`) to record into, so that its series have the same names
/// ([`Metrics::gauge`] and [`Metrics::counter`] find them).
pub fn empty_metrics(scenario: &Scenario) -> Result<Metrics, SimError> {
    scenario
        .check_references()
        .map_err(SimError::BrokenReference)?;
    Ok(Simulator::new(scenario, Bugs::default()).metrics)
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
    /// What it holds of its actions' state (throttle slots, locks).
    pub(crate) held: RequestHeld,
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

/// A value a request holds: its key, its version, and where it read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeldValue {
    pub(crate) key: DataKey,
    pub(crate) version: u64,
    pub(crate) from: ValueFrom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueFrom {
    /// A database query read it, or committed it.
    Database,
    /// A Redis `GET` found a copy.
    Redis,
    /// An in-process cache held a copy.
    Cache,
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
            held: RequestHeld::default(),
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
    request: Option<Request>,
    /// What the request holds for each layer of its step it is inside, outermost first. Kept
    /// with the slot so that its storage is reused by the next request.
    holds: Vec<Hold>,
}

/// A Redis server's memory series: its used memory, and its evictions and expirations (with
/// the totals already counted, so each event adds only what is new).
struct ServerSeries {
    used_memory: GaugeId,
    evicted: (u64, CounterId),
    expired: (u64, CounterId),
}

struct LoadState {
    rng: Stream,
    issued: u64,
    /// Poisson loads: the next arrival, in nanoseconds with 32 fractional bits, so gaps
    /// shorter than a nanosecond still add up to the right rate.
    next_arrival_q32: u128,
    /// Closed loops: the requests each caller has sent.
    workers: Vec<u64>,
    /// Closed loops: callers that will send again (the load is active while one is).
    workers_active: u32,
    /// A load of a service's flow: the copies of the flow it spreads over, one per instance.
    spread: Option<Spreading>,
}

/// How a load picks the instance of each request it sends.
struct Spreading {
    /// One per instance, in instance order.
    flows: Vec<FlowId>,
    how: Spread,
    /// Round robin: the instance of the next request.
    next: usize,
    /// Random: its own stream, so the load's other draws stay as they are.
    rng: Stream,
}

impl Spreading {
    fn pick(&mut self) -> FlowId {
        let index = match self.how {
            Spread::RoundRobin => {
                let index = self.next;
                self.next = (self.next + 1) % self.flows.len();
                index
            }
            Spread::Random => self.rng.below(self.flows.len() as u64) as usize,
        };
        self.flows[index]
    }
}

/// One instance's requests (per flow copy) and how they ended, for the services' summaries.
#[derive(Clone, Copy, Default)]
struct InstanceTally {
    requests: u64,
    outcomes: [u64; Outcome::COUNT],
}

/// Every this much work (events, requests spawned or advanced), a run's memory estimate is
/// checked against its budget: often enough that a run cannot outgrow it by much in between
/// (each adds a few hundred bytes at most), rarely enough to cost nothing.
const MEMORY_CHECK_EVERY: u64 = 4096;

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

/// What one event can leave for [`Simulator::drain`] to take: the mechanisms' outputs and
/// the requests made runnable, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// Pub/Sub messages and resubscriptions, delivered to the clients' caches.
    Messages,
    /// Reconnect-slot links made or lost.
    LinkEvents,
    /// A server executed a write a second time (a monitor's violation).
    WritesAppliedTwice,
    /// Redis commands answered or failed on the client's side.
    RedisReplies,
    /// Database queries answered (or, for a caller that timed out, what it kept released).
    QueriesAnswered,
    /// Time spent waiting for an advisory lock, recorded.
    LockWaits,
    /// Database queries past their client-side timeout.
    QueryTimeouts,
    /// Database queries refused (no connection free).
    QueryRefusals,
    /// Requests whose next step can run now, oldest first.
    RunnableRequests,
}

/// The order in which [`Simulator::drain`] takes outputs left at one instant: results first,
/// in the order the mechanisms report them, and only then the requests they made runnable,
/// one at a time. Documented in `docs/scenario-format.md` ("Events at the same instant");
/// the test `the_drain_order_is_the_documented_one` holds the two together.
pub(crate) const DRAIN_ORDER: [Output; 9] = [
    Output::Messages,
    Output::LinkEvents,
    Output::WritesAppliedTwice,
    Output::RedisReplies,
    Output::QueriesAnswered,
    Output::LockWaits,
    Output::QueryTimeouts,
    Output::QueryRefusals,
    Output::RunnableRequests,
];

/// What [`Simulator::take_output`] did.
enum Taken {
    Nothing,
    Some,
    /// The run is over its memory budget: stop draining.
    Stop,
}

/// The engine's state. The event loop is driven from [`run_traced`]: `run_to_end` pops each
/// event, `dispatch` hands it to its mechanism or handler, `drain` delivers what the
/// mechanisms produced and advances the requests that became runnable, `refresh_gauges`
/// observes. The step actions ([`crate::actions`]) reach the engine's mechanisms through the
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
    pub(crate) redis: Redis,
    pub(crate) databases: Databases,
    policies: Policies,
    /// The step actions' own state (caches, rate limiters, throttles, lock clients).
    pub(crate) actions: Actions,
    /// What waits for a database query whose caller timed out, by the waiter reference the
    /// database still holds. Never larger than the number of running queries.
    after_queries: BTreeMap<(u32, u32), AfterQuery>,
    metrics: Metrics,
    /// Ended requests as HTTP answers, when the scenario maps outcomes to statuses.
    http: Option<HttpTally>,
    /// The calls of loads that go through a caller.
    callers: Callers,
    monitors: Monitors,
    /// Work since the memory estimate was last checked, and whether it was over the budget.
    work_since_memory_check: u64,
    memory_exceeded: bool,
    /// The most policy layers a step of the scenario has (for the memory estimate).
    layers_max: usize,
    in_flight_gauge: GaugeId,
    /// Step attempts answered `rate_limited` (429), per bucket.
    rejected_attempts: CounterId,
    /// Per caller: its calls that ended ok, and those that failed.
    caller_counters: Vec<(CounterId, CounterId)>,
    /// Per database: queries running, and queries waiting for a lock.
    database_gauges: Vec<(GaugeId, GaugeId)>,
    /// The connection-waiting gauge of each database with a connection limit.
    connection_waiting_gauges: Vec<(DatabaseId, GaugeId)>,
    /// The collapsed gauge (0 or 1) of each database that may collapse.
    collapsed_gauges: Vec<(DatabaseId, GaugeId)>,
    connection_gauges: Vec<GaugeId>,
    reconnect_slots: ReconnectSlots,
    /// Per slot connection: the `connected` gauge.
    slot_gauges: Vec<(ConnectionId, GaugeId)>,
    /// Per connection: its steps that failed and went on (fail-open), in total and per bucket.
    fail_open: Vec<(u64, CounterId)>,
    server_series: Vec<ServerSeries>,
    /// The sampled requests' events, when the run is traced.
    tracer: Option<Tracer>,
    /// Per flow (copies of a service's flows included), when the scenario has a service.
    instance_tallies: Vec<InstanceTally>,
    /// Per flow (copies included): the in-flight gauges its requests count in, its base
    /// flow's (with several flows) and its instance's (in a service), each with its count.
    flow_gauges: Vec<[Option<usize>; 2]>,
    in_flight_by: Vec<(u64, GaugeId)>,
    /// Per flow (a base flow counting its copies): requests in flight now, and the most.
    flow_in_flight: Vec<(u64, u64)>,
    /// The committed versions of followed data.
    pub(crate) versions: Versions,
    /// Per flow: requests that ended ok serving a copy older than the last commit of its
    /// key, and how long it had been out of date.
    /// (The histogram is allocated on a flow's first stale read.)
    stale_reads: Vec<(u64, Option<Latency>)>,
}

impl<'s> Simulator<'s> {
    fn new(scenario: &'s Scenario, bugs: Bugs) -> Self {
        let mut events = EventQueue::default();
        let mut metrics = Metrics::new(
            scenario.bucket.as_nanos(),
            scenario.flows.len(),
            scenario.databases.len(),
            scenario.percentile_rule,
        );
        let in_flight_gauge = metrics.add_gauge(GaugeKey::InFlight);
        // In flight per flow (with several) and per instance of a service, over time.
        let mut in_flight_by: Vec<(u64, GaugeId)> = Vec::new();
        let base_flows = (scenario.flows.iter().enumerate())
            .filter(|(index, flow)| flow.reports_as(FlowId(*index as u32)).index() == *index)
            .count();
        let mut flow_gauge_of_base: BTreeMap<usize, usize> = BTreeMap::new();
        let mut instance_gauge: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        let flow_gauges: Vec<[Option<usize>; 2]> = (scenario.flows.iter().enumerate())
            .map(|(index, flow)| {
                let base = flow.reports_as(FlowId(index as u32));
                let by_flow = (base_flows > 1).then(|| {
                    *flow_gauge_of_base.entry(base.index()).or_insert_with(|| {
                        let name = scenario.flows[base.index()].name.clone();
                        in_flight_by.push((0, metrics.add_gauge(GaugeKey::FlowInFlight(name))));
                        in_flight_by.len() - 1
                    })
                });
                let by_instance = flow.instance.map(|instance| {
                    let key = (instance.service.0, instance.index);
                    *instance_gauge.entry(key).or_insert_with(|| {
                        let service = &scenario.services[instance.service.index()].name;
                        let name = format!("{service}@{}", instance.index);
                        in_flight_by.push((0, metrics.add_gauge(GaugeKey::InstanceInFlight(name))));
                        in_flight_by.len() - 1
                    })
                });
                [by_flow, by_instance]
            })
            .collect();
        let rejected_attempts = metrics.add_counter(CountKey::RejectedAttempts);
        let caller_counters = scenario
            .callers
            .iter()
            .map(|caller| {
                (
                    metrics.add_counter(CountKey::CallerOk(caller.name.clone())),
                    metrics.add_counter(CountKey::CallerFailed(caller.name.clone())),
                )
            })
            .collect();
        let database_gauges = scenario
            .databases
            .iter()
            .map(|db| {
                (
                    metrics.add_gauge(GaugeKey::DatabaseConcurrency(db.name.clone())),
                    metrics.add_gauge(GaugeKey::DatabaseLockWaiting(db.name.clone())),
                )
            })
            .collect();
        let connection_waiting_gauges = scenario
            .databases
            .iter()
            .enumerate()
            .filter(|(_, db)| db.connections.is_some())
            .map(|(index, db)| {
                let key = GaugeKey::DatabaseConnectionWaiting(db.name.clone());
                (DatabaseId(index as u32), metrics.add_gauge(key))
            })
            .collect();
        let collapsed_gauges = scenario
            .databases
            .iter()
            .enumerate()
            .filter(|(_, db)| db.collapse.is_some())
            .map(|(index, db)| {
                let key = GaugeKey::DatabaseCollapsed(db.name.clone());
                (DatabaseId(index as u32), metrics.add_gauge(key))
            })
            .collect();
        let connection_gauges = scenario
            .connections
            .iter()
            .map(|c| metrics.add_gauge(GaugeKey::ConnectionPending(c.name.clone())))
            .collect();
        let fail_open = scenario
            .connections
            .iter()
            .map(|c| {
                (
                    0,
                    metrics.add_counter(CountKey::ConnectionFailOpen(c.name.clone())),
                )
            })
            .collect();
        let server_series = scenario
            .servers
            .iter()
            .map(|server| ServerSeries {
                used_memory: metrics.add_gauge(GaugeKey::ServerUsedMemory(server.name.clone())),
                evicted: (
                    0,
                    metrics.add_counter(CountKey::ServerEvictedKeys(server.name.clone())),
                ),
                expired: (
                    0,
                    metrics.add_counter(CountKey::ServerExpiredKeys(server.name.clone())),
                ),
            })
            .collect();
        let mut monitors = Monitors::new(scenario);
        let slot_gauges = scenario
            .connections
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.reconnect, crate::scenario::Reconnect::Slot(_)))
            .map(|(index, c)| {
                let id = ConnectionId(index as u32);
                if c.connected_at_start {
                    // The slot holds the connection's own entry as its first link.
                    monitors.link_connected(id, id);
                }
                let gauge = metrics.add_gauge(GaugeKey::ConnectionConnected(c.name.clone()));
                (id, gauge)
            })
            .collect();
        let planted = PlantedBugs {
            bulkhead_admits_one_too_many: bugs.bulkhead_admits_one_too_many,
        };
        let policies = Policies::new(scenario, &mut metrics, planted);
        let actions = Actions::new(scenario, &mut metrics);
        let mut loads = Vec::with_capacity(scenario.loads.len());
        let mut loads_active = 0;
        for (index, load) in scenario.loads.iter().enumerate() {
            let id = LoadId(index as u32);
            let instances = scenario.instance_flows(load.flow);
            let spread = (instances.len() > 1).then(|| {
                let service = scenario.flows[load.flow.index()]
                    .instance
                    .expect("a flow with copies belongs to a service")
                    .service;
                Spreading {
                    flows: instances,
                    how: scenario.services[service.index()].spread,
                    next: 0,
                    rng: Stream::derive(scenario.seed, "load spread", &load.name),
                }
            });
            let mut state = LoadState {
                rng: Stream::derive(scenario.seed, "load", &load.name),
                issued: 0,
                next_arrival_q32: u128::from(load.start.as_nanos()) << 32,
                workers: Vec::new(),
                workers_active: 0,
                spread,
            };
            let any = match load.arrivals {
                Arrivals::Burst { count } => count > 0,
                Arrivals::Even { end, .. } | Arrivals::Poisson { end, .. } => match end {
                    LoadEnd::Count(count) => count > 0,
                    LoadEnd::Until(until) => load.start < until,
                },
                Arrivals::Closed(closed) => {
                    let starts = (0..closed.workers).map(|worker| {
                        let offset = u128::from(closed.stagger.as_nanos()) * u128::from(worker)
                            / u128::from(closed.workers);
                        let offset = u64::try_from(offset).expect("below the stagger");
                        (
                            worker,
                            load.start.saturating_add(SimDuration::from_nanos(offset)),
                        )
                    });
                    for (worker, at) in starts {
                        if closed.iterations != Some(0) && closed.until.is_none_or(|u| at < u) {
                            state.workers_active += 1;
                            events.schedule(at, Event::WorkerSends { load: id, worker });
                        }
                    }
                    state.workers = vec![0; closed.workers as usize];
                    if state.workers_active > 0 {
                        loads_active += 1;
                    }
                    false
                }
            };
            loads.push(state);
            if any {
                loads_active += 1;
                events.schedule(load.start, Event::Arrival(id));
            }
        }
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
            redis,
            databases: Databases::new(scenario),
            policies,
            actions,
            after_queries: BTreeMap::new(),
            metrics,
            http: scenario.http.map(HttpTally::new),
            callers: Callers::new(scenario),
            monitors,
            work_since_memory_check: 0,
            memory_exceeded: false,
            layers_max: scenario
                .flows
                .iter()
                .flat_map(|flow| &flow.steps)
                .map(|step| step.policies.len())
                .max()
                .unwrap_or(0),
            in_flight_gauge,
            rejected_attempts,
            caller_counters,
            database_gauges,
            connection_waiting_gauges,
            collapsed_gauges,
            connection_gauges,
            reconnect_slots: ReconnectSlots::new(scenario),
            slot_gauges,
            fail_open,
            server_series,
            tracer: None,
            instance_tallies: if scenario.services.is_empty() {
                Vec::new()
            } else {
                vec![InstanceTally::default(); scenario.flows.len()]
            },
            versions: Versions::default(),
            flow_gauges,
            in_flight_by,
            flow_in_flight: vec![(0, 0); scenario.flows.len()],
            stale_reads: (0..scenario.flows.len()).map(|_| (0, None)).collect(),
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
            let next = self.events.peek_time();
            if let Some(horizon) = limits.horizon
                && next.is_none_or(|at| at > horizon)
            {
                // Nothing more happens before the horizon.
                self.now = self.now.max(horizon);
                return ended(self);
            }
            let Some(at) = next else {
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
            let (at, event) = self.events.pop().expect("peeked");
            self.now = at;
            self.metrics.advance_to(at);
            self.events_processed += 1;
            self.dispatch(event);
            self.drain();
            self.refresh_gauges();
            self.monitors.check_conservation(self.now);
            if self.monitors.violation().is_some() {
                // The caller reports the violation instead of the figures.
                return Verdict::Stalled;
            }
        }
    }

    /// Counts one piece of work that may grow what the run holds (an event, a request spawned
    /// or advanced) and, every [`MEMORY_CHECK_EVERY`] of them, checks the estimate against
    /// the budget: true from the first check over it on. Counting work rather than events
    /// catches a single event that spawns a burst of millions.
    fn over_memory_budget(&mut self) -> bool {
        if !self.memory_exceeded {
            self.work_since_memory_check += 1;
            if self.work_since_memory_check >= MEMORY_CHECK_EVERY {
                self.work_since_memory_check = 0;
                self.memory_exceeded = self.memory_estimate() > self.scenario.limits.memory_max;
            }
        }
        self.memory_exceeded
    }

    /// What the run holds now, in bytes: the parts that grow with what is in flight or with
    /// the length of the run (everything else is fixed by the scenario's size).
    fn memory_estimate(&self) -> u64 {
        // A slot with its request, and room for a hold of every layer of the deepest step.
        let per_slot = std::mem::size_of::<Slot>() + self.layers_max * std::mem::size_of::<Hold>();
        let slots = (self.slots.capacity() * per_slot) as u64;
        let queues = (self.free_slots.capacity() * 4 + self.runnable.capacity() * 8) as u64;
        slots
            + queues
            + self.events.len() as u64 * EventQueue::ENTRY_BYTES
            + self.redis.memory_bytes()
            + self.databases.memory_bytes()
            + self.after_queries.len() as u64 * 64
            + self.metrics.series_bytes()
            + self
                .loads
                .iter()
                .map(|l| l.workers.len() as u64 * 8)
                .sum::<u64>()
            + self.callers.memory_bytes()
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
                    if let Some(request) = cancel
                        && let Some(live) = self.slots[request.slot as usize].request.as_mut()
                        && live.call == Some((call, attempt))
                    {
                        live.cancelled = true;
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
                }
            }
        }
    }

    /// Delivers every result produced by the last event, then advances every request that
    /// became runnable, until nothing is left to do at this instant. The mechanisms' outputs
    /// are taken in [`DRAIN_ORDER`]: each time, the first kind that has any is taken whole,
    /// then the order starts again from the top (what taking it produced may be of an earlier
    /// kind).
    fn drain(&mut self) {
        'again: loop {
            for output in DRAIN_ORDER {
                match self.take_output(output) {
                    Taken::Nothing => {}
                    Taken::Some => continue 'again,
                    Taken::Stop => return,
                }
            }
            return;
        }
    }

    /// Takes every output of one kind, if there is any.
    fn take_output(&mut self, output: Output) -> Taken {
        match output {
            Output::Messages => {
                if self.redis.messages.is_empty() && self.redis.resubscribed.is_empty() {
                    return Taken::Nothing;
                }
                self.deliver_messages();
            }
            Output::LinkEvents => {
                if self.redis.link_events.is_empty() {
                    return Taken::Nothing;
                }
                let link_events = std::mem::take(&mut self.redis.link_events);
                for &event in &link_events {
                    self.on_link_event(event);
                }
                self.redis.link_events = link_events;
                self.redis.link_events.clear();
            }
            Output::WritesAppliedTwice => {
                let Some(link) = self.redis.applied_twice.pop() else {
                    return Taken::Nothing;
                };
                let owner = self.redis.owner_of(link);
                let name = &self.scenario.connections[owner.index()].name;
                let detail = format!(
                    "the server executed a write a second time on link {} (a replay of a write \
                     whose step did not set replay_writes)",
                    link.0
                );
                self.monitors.write_applied_twice(self.now, name, detail);
            }
            Output::RedisReplies => {
                if self.redis.completions.is_empty() {
                    return Taken::Nothing;
                }
                let completions = std::mem::take(&mut self.redis.completions);
                for &(request, result, version) in &completions {
                    if result == StepResult::Hit && self.is_live(request) {
                        // A Redis read found a copy: the request now holds its version.
                        self.hold_value(request.slot, version, ValueFrom::Redis);
                    }
                    self.settle(request, result);
                }
                self.redis.completions = completions;
                self.redis.completions.clear();
            }
            Output::QueriesAnswered => {
                if self.databases.completions.is_empty() {
                    return Taken::Nothing;
                }
                let completions = std::mem::take(&mut self.databases.completions);
                for &request in &completions {
                    match self.after_queries.remove(&(request.slot, request.token)) {
                        None => {
                            if self.is_live(request) {
                                let action = &self.step_of(request.slot).action;
                                actions::on_query_answered(self, request.slot, action);
                            }
                            self.settle(request, StepResult::Ok)
                        }
                        // The caller timed out; what it kept is free only now.
                        Some(AfterQuery::Release(policy, hold)) => self.release_kept(policy, hold),
                        Some(AfterQuery::Retry(retry, at)) => {
                            if self.is_live(retry) {
                                let (at, kind) = (at.max(self.now), TimerKind::Backoff);
                                let event = Event::RequestTimer {
                                    request: retry,
                                    kind,
                                };
                                self.events.schedule(at, event);
                            }
                        }
                    }
                }
                self.databases.completions = completions;
                self.databases.completions.clear();
            }
            Output::LockWaits => {
                if self.databases.lock_waits.is_empty() {
                    return Taken::Nothing;
                }
                self.record_lock_waits();
            }
            Output::QueryTimeouts => {
                if self.databases.timeouts.is_empty() {
                    return Taken::Nothing;
                }
                let timeouts = std::mem::take(&mut self.databases.timeouts);
                for &request in &timeouts {
                    self.settle(request, StepResult::Error(Outcome::Timeout));
                }
                self.databases.timeouts = timeouts;
                self.databases.timeouts.clear();
            }
            Output::QueryRefusals => {
                if self.databases.refusals.is_empty() {
                    return Taken::Nothing;
                }
                let refusals = std::mem::take(&mut self.databases.refusals);
                for &request in &refusals {
                    self.settle(request, StepResult::Error(Outcome::Refused));
                }
                self.databases.refusals = refusals;
                self.databases.refusals.clear();
            }
            Output::RunnableRequests => {
                let Some(request) = self.runnable.pop_front() else {
                    return Taken::Nothing;
                };
                if self.over_memory_budget() {
                    return Taken::Stop; // the run stops at its next turn
                }
                if self.is_live(request) {
                    self.advance(request.slot);
                }
            }
        }
        Taken::Some
    }

    pub(crate) fn record_lock_waits(&mut self) {
        for (database, nanos) in self.databases.lock_waits.drain(..) {
            self.metrics.record_lock_wait(database.index(), nanos);
        }
    }

    /// Sets every gauge to its value at the end of an event (a gauge's series is the largest
    /// of these in each bucket). A gauge whose source cannot have changed in the event is left
    /// as it is: setting a gauge to the value it holds changes nothing.
    fn refresh_gauges(&mut self) {
        self.metrics.set_gauge(self.in_flight_gauge, self.in_flight);
        if self.databases.take_changed() {
            for (index, &(running_gauge, waiting_gauge)) in self.database_gauges.iter().enumerate()
            {
                let id = DatabaseId(index as u32);
                let running = self.databases.running(id) as u64;
                self.metrics.set_gauge(running_gauge, running);
                self.metrics
                    .set_gauge(waiting_gauge, self.databases.lock_waiting(id));
            }
            for &(id, gauge) in &self.connection_waiting_gauges {
                let waiting = self.databases.connection_waiting(id);
                self.metrics.set_gauge(gauge, waiting);
            }
            for &(id, gauge) in &self.collapsed_gauges {
                let collapsed = self.databases.collapsed(id);
                self.metrics.set_gauge(gauge, u64::from(collapsed));
            }
        }
        for (index, &gauge) in self.connection_gauges.iter().enumerate() {
            let pending = self.redis.pending(ConnectionId(index as u32));
            self.metrics.set_gauge(gauge, pending);
        }
        for &(connection, gauge) in &self.slot_gauges {
            let connected = self.reconnect_slots.connected(connection);
            self.metrics.set_gauge(gauge, u64::from(connected));
        }
        self.actions.observe(self.now, &mut self.metrics);
        for (index, series) in self.server_series.iter_mut().enumerate() {
            let memory = self.redis.server_summary(self.now, ServerId(index as u32));
            self.metrics
                .set_gauge(series.used_memory, memory.used_memory);
            for ((seen, counter), total) in [
                (&mut series.evicted, memory.evicted_keys),
                (&mut series.expired, memory.expired_keys),
            ] {
                self.metrics.count_many(*counter, total - *seen);
                *seen = total;
            }
        }
        self.policies.observe(self.now, &mut self.metrics);
    }

    fn on_arrival(&mut self, id: LoadId) {
        let spec = &self.scenario.loads[id.index()];
        let (rate, end, poisson) = match spec.arrivals {
            Arrivals::Burst { count } => {
                for _ in 0..count {
                    if self.over_memory_budget() {
                        break; // the run stops at its next turn
                    }
                    self.send(id, None);
                }
                self.loads_active -= 1;
                return;
            }
            Arrivals::Even { rate, end } => (rate, end, false),
            Arrivals::Poisson { rate, end } => (rate, end, true),
            Arrivals::Closed(_) => unreachable!("a closed loop's callers send on their own"),
        };
        self.send(id, None);
        let state = &mut self.loads[id.index()];
        let next = if poisson {
            let gap = rate.exponential_gap_q32(state.rng.neg_ln_uniform_q32());
            state.next_arrival_q32 = state.next_arrival_q32.saturating_add(gap);
            u64::try_from(state.next_arrival_q32 >> 32)
                .ok()
                .map(SimTime::from_nanos)
        } else {
            rate.even_offset(state.issued)
                .and_then(|offset| spec.start.checked_add(offset))
        };
        let more = match (end, next) {
            (_, None) => false,
            (LoadEnd::Count(count), Some(_)) => state.issued < count,
            (LoadEnd::Until(until), Some(next)) => next < until,
        };
        match next {
            Some(next) if more => self.events.schedule(next, Event::Arrival(id)),
            _ => self.loads_active -= 1,
        }
    }

    /// A new request of load `id` arrives now.
    fn spawn(&mut self, id: LoadId) -> RequestRef {
        self.spawn_with_keys(id, None)
    }

    /// [`Self::spawn`], with the keys of `same_keys` (a caller's retry asks for the same
    /// product page again) instead of fresh ones; the load still makes its draw, so its
    /// other draws stay as they are.
    fn spawn_with_keys(&mut self, id: LoadId, same_keys: Option<u64>) -> RequestRef {
        let state = &mut self.loads[id.index()];
        let flow = match &mut state.spread {
            Some(spreading) => spreading.pick(),
            None => self.scenario.loads[id.index()].flow,
        };
        state.issued += 1;
        let drawn = state.rng.next_u64();
        let key_seed = same_keys.unwrap_or(drawn);
        let request = self.allocate(Request::new(flow, 0, Role::Main, self.now, key_seed));
        if let Some(tracer) = &mut self.tracer
            && let Some(number) = tracer.arrived()
        {
            self.request_mut(request.slot).trace = Some(number);
            let flow = self.scenario.flows[flow.index()].name.clone();
            self.trace(request.slot, TraceWhat::Started { flow });
        }
        self.in_flight += 1;
        self.count_in_flight(flow, true);
        self.monitors.arrived();
        self.metrics.record_arrival(self.reports_as(flow));
        if let Some(tally) = self.instance_tallies.get_mut(flow.index()) {
            tally.requests += 1;
        }
        self.runnable.push_back(request);
        request
    }

    /// Caller `worker` of the closed loop `id` sends its next request.
    fn on_worker_sends(&mut self, id: LoadId, worker: u32) {
        self.loads[id.index()].workers[worker as usize] += 1;
        self.send(id, Some(worker));
    }

    /// Load `id` sends a request now (from closed-loop caller `worker`, if any): straight to
    /// the service, or as a call of the load's caller, whose first attempt starts now.
    fn send(&mut self, id: LoadId, worker: Option<u32>) {
        let worker = worker.map(|worker| (id, worker));
        match self.scenario.loads[id.index()].caller {
            None => {
                let request = self.spawn(id);
                self.request_mut(request.slot).worker = worker;
            }
            Some(caller) => {
                let call = self.callers.start(self.now, caller, id, worker);
                self.attempt(call);
            }
        }
    }

    /// The next attempt of `call`: a request of its load's flow, and the caller's timeout.
    fn attempt(&mut self, call: CallRef) {
        let load = self.callers.load_of(call);
        let request = self.spawn_with_keys(load, self.callers.key_seed(call));
        let key_seed = self.request(request.slot).key_seed;
        let (attempt, deadline) = self.callers.attempting(self.now, call, request, key_seed);
        self.request_mut(request.slot).call = Some((call, attempt));
        if let Some(deadline) = deadline {
            self.events
                .schedule(deadline, Event::CallerTimeout { call, attempt });
        }
    }

    /// What the caller does after an attempt ended or timed out.
    fn after_attempt(&mut self, call: CallRef, end: CallNext) {
        match end {
            CallNext::Retry { at } => self.events.schedule(at, Event::CallerRetry { call }),
            CallNext::Ended { caller, ok, worker } => {
                let (ok_calls, failed_calls) = self.caller_counters[caller.index()];
                self.metrics.count(if ok { ok_calls } else { failed_calls });
                if let Some((load, worker)) = worker {
                    self.worker_done_with(load, worker);
                }
            }
        }
    }

    /// The request of caller `worker` of the closed loop `id` has ended: it thinks, then
    /// sends again, unless it has sent its iterations or its load's time is up.
    fn worker_done_with(&mut self, id: LoadId, worker: u32) {
        let Arrivals::Closed(closed) = self.scenario.loads[id.index()].arrivals else {
            unreachable!("only closed-loop requests have a caller");
        };
        let state = &mut self.loads[id.index()];
        let sent = state.workers[worker as usize];
        let think = state.rng.duration(&closed.think);
        let next = self.now.saturating_add(think);
        let more = closed.iterations.is_none_or(|n| sent < n)
            && closed.until.is_none_or(|until| next < until);
        if more {
            self.events
                .schedule(next, Event::WorkerSends { load: id, worker });
        } else {
            state.workers_active -= 1;
            if state.workers_active == 0 {
                self.loads_active -= 1;
            }
        }
    }

    fn allocate(&mut self, request: Request) -> RequestRef {
        if request.role == Role::Main {
            self.monitors.went_live();
        }
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Slot {
                    token: 0,
                    request: None,
                    holds: Vec::new(),
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 live requests")
            }
        };
        let entry = &mut self.slots[slot as usize];
        debug_assert!(entry.request.is_none() && entry.holds.is_empty());
        entry.request = Some(request);
        RequestRef {
            slot,
            token: entry.token,
        }
    }

    fn is_live(&self, request: RequestRef) -> bool {
        let slot = &self.slots[request.slot as usize];
        slot.token == request.token && slot.request.is_some()
    }

    pub(crate) fn current_ref(&self, slot: u32) -> RequestRef {
        RequestRef {
            slot,
            token: self.slots[slot as usize].token,
        }
    }

    pub(crate) fn request_mut(&mut self, slot: u32) -> &mut Request {
        self.slots[slot as usize]
            .request
            .as_mut()
            .expect("a live request")
    }

    pub(crate) fn request(&self, slot: u32) -> &Request {
        self.slots[slot as usize]
            .request
            .as_ref()
            .expect("a live request")
    }

    /// A request of `flow` arrived (`true`) or ended: the in-flight gauges of its flow and its
    /// instance follow.
    fn count_in_flight(&mut self, flow: FlowId, arrived: bool) {
        let base = self.reports_as(flow);
        let (now, peak) = &mut self.flow_in_flight[base];
        if arrived {
            *now += 1;
            *peak = (*peak).max(*now);
        } else {
            *now -= 1;
        }
        for index in self.flow_gauges[flow.index()].into_iter().flatten() {
            let (count, gauge) = &mut self.in_flight_by[index];
            if arrived {
                *count += 1;
            } else {
                *count -= 1;
            }
            self.metrics.set_gauge(*gauge, *count);
        }
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

    /// Runs the request in `slot` until it waits or ends.
    fn advance(&mut self, slot: u32) {
        loop {
            let scenario = self.scenario;
            let request = self.request(slot);
            let role = request.role;
            let flow = &scenario.flows[request.flow.index()];
            let step_index = usize::from(request.step);
            if step_index == flow.steps.len() {
                self.end_request(slot, Outcome::Ok);
                return;
            }
            let step = &flow.steps[step_index];
            let next = match request.stage {
                Stage::Start if request.cancelled && role == Role::Main => {
                    // It stops here: this step has not run, so a `finally` one still runs,
                    // as the later ones do (`end_request` runs those).
                    let flow_id = request.flow;
                    self.run_skipped_finally(slot, flow_id, step_index..step_index + 1);
                    self.end_request(slot, Outcome::Cancelled);
                    return;
                }
                Stage::Start => {
                    if self.tracer.is_some() {
                        let (step_number, action) = (request.step, scenario.step_name(step));
                        let what = TraceWhat::Step {
                            step: step_number,
                            action,
                        };
                        self.trace(slot, what);
                    }
                    if step.on_error == OnError::Ignore && role == Role::Main {
                        self.spawn_background(slot, step_index as u16);
                        self.next_step(slot);
                    } else {
                        self.set_stage(slot, Stage::Entering { next: 0 });
                    }
                    Next::Continue
                }
                Stage::Entering { next } => self.enter_layer(slot, step, next),
                Stage::Acting => self.act(slot, step),
                ref stage @ (Stage::Queued { .. } | Stage::Waiting(_) | Stage::Backoff { .. }) => {
                    unreachable!("only runnable requests are advanced, not {}", stage.name())
                }
            };
            if let Next::Stop = next {
                return;
            }
        }
    }

    /// Moves the request in `slot` to the start of its next step.
    fn next_step(&mut self, slot: u32) {
        let request = self.request_mut(slot);
        request.step += 1;
        request.stage = Stage::Start;
    }

    /// Enters the layer at position `next` of `step` (or starts the action past the last).
    fn enter_layer(&mut self, slot: u32, step: &StepSpec, next: u8) -> Next {
        let Some(&policy) = step.policies.get(usize::from(next)) else {
            self.set_stage(slot, Stage::Acting);
            return Next::Continue;
        };
        let entrant = Entrant {
            waiter: self.current_ref(slot),
            bytes: actions::request_bytes(&step.action),
        };
        let entered = self.policies.enter(policy, self.now, &entrant);
        if self.tracer.is_some() {
            let name = self.scenario.policy_name(policy);
            let text = match entered {
                Enter::Pass(_) => format!("admitted by {name}"),
                Enter::Queued => format!("queued by {name}"),
                Enter::Refused(outcome) => format!("refused by {name}: {}", outcome.name()),
            };
            self.trace(slot, TraceWhat::Decision { text });
        }
        match entered {
            Enter::Pass(hold) => {
                let ceiling = self.policies.ceiling(policy);
                self.monitors
                    .entered(self.scenario, self.now, policy, ceiling);
                self.slots[slot as usize].holds.push(hold);
                self.set_stage(slot, Stage::Entering { next: next + 1 });
                Next::Continue
            }
            Enter::Queued => {
                self.set_stage(slot, Stage::Queued { layer: next });
                Next::Stop
            }
            Enter::Refused(outcome) => self.finish_step(slot, Ended::Refused(outcome)),
        }
    }

    /// Runs the action of `step` for the request in `slot`.
    fn act(&mut self, slot: u32, step: &StepSpec) -> Next {
        let started = actions::start(self, slot, step);
        self.conclude(slot, started)
    }

    /// The step of the request in `slot` ends with its action's result, if it has one.
    fn conclude(&mut self, slot: u32, started: Started) -> Next {
        match started {
            Started::Waits => Next::Stop,
            Started::Ended(result) => self.finish_step(slot, Ended::Action(result)),
        }
    }

    /// Moves the request in `slot` to `stage`, and traces the change when it is sampled.
    pub(crate) fn set_stage(&mut self, slot: u32, stage: Stage) {
        if self.tracer.is_some() && self.request(slot).trace.is_some() {
            let label = self.stage_label(slot, &stage);
            self.trace(slot, TraceWhat::Stage { stage: label });
        }
        self.request_mut(slot).stage = stage;
    }

    /// A stage as a trace names it: what the request waits for, and on what.
    fn stage_label(&self, slot: u32, stage: &Stage) -> String {
        let step = self.step_of(slot);
        let scenario = self.scenario;
        match (stage, &step.action) {
            (Stage::Start | Stage::Entering { .. } | Stage::Acting, _) => "running".to_owned(),
            (Stage::Queued { layer }, _) => {
                let policy = step.policies[usize::from(*layer)];
                format!("queued in {}", scenario.policy_name(policy))
            }
            (Stage::Backoff { next }, _) => {
                let policy = step.policies[usize::from(*next) - 1];
                format!("backing off ({})", scenario.policy_name(policy))
            }
            (Stage::Waiting(wait @ (Wait::Reply | Wait::Query)), action) => {
                let (reply, query) = (matches!(wait, Wait::Reply), matches!(wait, Wait::Query));
                actions::wait_label(scenario, action, reply, query)
                    .unwrap_or_else(|| stage.name().to_owned())
            }
            (stage, _) => stage.name().to_owned(),
        }
    }

    /// Records `what` of the request in `slot`, when the run is traced and it is sampled.
    fn trace(&mut self, slot: u32, what: TraceWhat) {
        let number = self.request(slot).trace;
        if let (Some(tracer), Some(number)) = (&mut self.tracer, number) {
            tracer.record(self.now, Some(number), what);
        }
    }

    pub(crate) fn set_timer(&mut self, slot: u32, at: SimTime, kind: TimerKind) {
        let request = self.current_ref(slot);
        self.events
            .schedule(at, Event::RequestTimer { request, kind });
    }

    /// The request in `slot` read `version` of the key its step names from a copy (`from`).
    pub(crate) fn hold_value(&mut self, slot: u32, version: u64, from: ValueFrom) {
        let Some(family) = actions::value_family(&self.step_of(slot).action) else {
            return;
        };
        let key = (family.0, self.key_of(slot, family));
        self.request_mut(slot).value = Some(HeldValue { key, version, from });
    }

    /// The version of the value of `key` the request in `slot` holds, for a copy it writes
    /// (a `SET`, an L1 put); 0 when it holds none of that key.
    pub(crate) fn value_version(&self, slot: u32, key: DataKey) -> u64 {
        match self.request(slot).value {
            Some(value) if value.key == key => value.version,
            _ => 0,
        }
    }

    /// The key of `family` the request in `slot` uses (drawn from its key seed, so every step
    /// of the request that names the family uses the same key).
    pub(crate) fn key_of(&self, slot: u32, family: KeyFamilyId) -> u32 {
        let request = self.request(slot);
        let spec = &self.scenario.keys[family.index()];
        key_index(request.key_seed, family.0, spec.count, spec.distribution)
    }

    /// Starts step `step` of the request in `slot` as a background request of its own.
    fn spawn_background(&mut self, slot: u32, step: u16) {
        let (now, scenario) = (self.now, self.scenario);
        let request = self.request(slot);
        let (flow, key_seed) = (request.flow, request.key_seed);
        // A release hands the background request what it releases (a throttle slot, a lock).
        let action = &scenario.flows[flow.index()].steps[usize::from(step)].action;
        let held = actions::hand_to_background(&mut self.request_mut(slot).held, action);
        let mut background = Request::new(flow, step, Role::Background, now, key_seed);
        background.held = held;
        let background = self.allocate(background);
        // Run it now, so that its command is written before the request's next one.
        self.advance(background.slot);
    }

    fn on_request_timer(&mut self, request: RequestRef, kind: TimerKind) {
        if !self.is_live(request) {
            return;
        }
        let stage = std::mem::replace(&mut self.request_mut(request.slot).stage, Stage::Acting);
        match (kind, stage) {
            (TimerKind::Backoff, Stage::Backoff { next }) => {
                self.set_stage(request.slot, Stage::Entering { next });
                self.runnable.push_back(request); // run the inner layers again
            }
            (TimerKind::Action(timer), Stage::Waiting(Wait::Action(waiting))) => {
                match actions::on_timer(self, request.slot, timer, waiting) {
                    Woken::Reply(result) => self.settle(request, result),
                    Woken::Step(started) => {
                        if let Next::Continue = self.conclude(request.slot, started) {
                            let next = self.current_ref(request.slot);
                            self.runnable.push_back(next);
                        }
                    }
                }
            }
            (kind, stage) => unreachable!("a {kind:?} timer for a request {}", stage.name()),
        }
    }

    /// Sends `op` for the request in `slot` on `connection`, through its reconnect slot if it
    /// is one. Returns the result at once when there is one; `None` when the request waits
    /// (for the reply, or for a slot's connection attempt).
    pub(crate) fn issue_command(
        &mut self,
        slot: u32,
        connection: ConnectionId,
        op: Op,
        replay_writes: bool,
    ) -> Option<StepResult> {
        let (now, waiter) = (self.now, self.current_ref(slot));
        if !self.reconnect_slots.is_slot(connection) {
            self.set_stage(slot, Stage::Waiting(Wait::Reply));
            return self
                .redis
                .issue(now, connection, op, waiter, None, &mut self.events);
        }
        let acquired = self.reconnect_slots.acquire(
            now,
            connection,
            waiter,
            &mut self.redis,
            &mut self.events,
        );
        let lease = match acquired {
            SlotAcquire::Lease(lease) => lease,
            SlotAcquire::Parked => {
                self.set_stage(slot, Stage::Waiting(Wait::SlotConnect));
                return None;
            }
            SlotAcquire::Unavailable => return Some(StepResult::Error(Outcome::Refused)),
        };
        // Every write is tied to an origin, so that its copies' executions add up whatever the
        // step opted into: a second one without `replay_writes` is a monitor's violation.
        let origin = match (op.command.is_read_only(), self.request(slot).origin) {
            (true, _) => None,
            (false, Some(origin)) => Some(origin),
            (false, None) => Some(self.redis.open_origin(connection, replay_writes)),
        };
        let lease = if replay_writes && origin.is_some() {
            lease.with_replay_writes()
        } else {
            lease
        };
        let request = self.request_mut(slot);
        request.lease = Some((connection, lease));
        request.origin = origin;
        self.set_stage(slot, Stage::Waiting(Wait::Reply));
        let result =
            self.redis
                .issue(now, link_of(&lease), op, waiter, origin, &mut self.events)?;
        // The leased link was lost since: report it, and maybe replay.
        if self.slot_command_ended(slot, result) {
            return None;
        }
        Some(result)
    }

    /// A slot link's connection attempt ended: the callers parked on it ask their slot again.
    fn on_link_event(&mut self, event: LinkEvent) {
        let link = match event {
            LinkEvent::Connected(link) | LinkEvent::ConnectFailed(link) => link,
        };
        let owner = self.redis.owner_of(link);
        if let LinkEvent::Connected(link) = event {
            self.monitors.link_connected(owner, link);
        }
        let woken = self.reconnect_slots.on_link_event(self.now, owner, event);
        for request in woken {
            if self.is_live(request) {
                self.set_stage(request.slot, Stage::Acting);
                self.runnable.push_back(request);
            }
        }
    }

    /// The command of the request in `slot` ended with `result`. If it ran on a reconnect
    /// slot, a connection-level failure is reported through its lease (evicting the link if
    /// it is still the live one) and, when the replay rules allow and it was not replayed
    /// yet, the command is run once more on a fresh connection: returns true then.
    fn slot_command_ended(&mut self, slot: u32, result: StepResult) -> bool {
        let Some((connection, lease)) = self.request_mut(slot).lease.take() else {
            return false;
        };
        let failure = match result {
            StepResult::Error(Outcome::Timeout) => {
                Failure::Connection(ConnectionError::ResponseTimeout)
            }
            StepResult::Error(Outcome::ConnectionLost) => Failure::Connection(ConnectionError::Io),
            // A demoted primary: the connection reached the wrong node (seed 001 evicts it).
            StepResult::Error(Outcome::ReadOnly) => Failure::Connection(ConnectionError::ReadOnly),
            // WRONGTYPE, OOM, LOADING: the server refused one command; the connection is fine.
            StepResult::Error(outcome) if outcome.is_server_error() => Failure::Server,
            _ => return false,
        };
        let now = self.now;
        let effect = self
            .reconnect_slots
            .on_failure(now, connection, &lease, failure);
        let lease_link = link_of(&lease);
        let victim = match effect {
            FailureEffect::Evicted => Some(lease_link),
            // A slot without its generation check would evict whatever link is live now.
            FailureEffect::NotCurrent if self.bugs.slot_ignores_generation => {
                self.reconnect_slots.live_link(connection)
            }
            _ => None,
        };
        if let Some(victim) = victim {
            let scenario = self.scenario;
            self.monitors
                .link_retired(scenario, now, connection, lease_link, victim);
            self.redis.retire_link(victim);
        }
        let command = actions::replayed_command(&self.step_of(slot).action);
        let lease = if self.bugs.slot_replays_every_write {
            lease.with_replay_writes()
        } else {
            lease
        };
        let request = self.request_mut(slot);
        if request.replayed || !should_replay(&[command.replay_kind()], failure, &lease) {
            return false;
        }
        request.replayed = true;
        self.set_stage(slot, Stage::Acting);
        self.reconnect_slots.record_replay(connection);
        let again = self.current_ref(slot);
        self.runnable.push_back(again);
        true
    }

    /// A waiting request's step ended with `result`.
    fn settle(&mut self, request: RequestRef, result: StepResult) {
        if !self.is_live(request) {
            return;
        }
        if self.slot_command_ended(request.slot, result) {
            return; // replayed on a fresh connection
        }
        let action = &self.step_of(request.slot).action;
        let Some(result) = actions::on_reply(self, request.slot, action, result) else {
            return; // waits on (to try a lock again)
        };
        if let Next::Continue = self.finish_step(request.slot, Ended::Action(result)) {
            if self.past_last_step(request.slot) {
                // Nothing is left for it to do: it ends now rather than after a trip through
                // the runnable queue (ending touches nothing another request waits on).
                self.end_request(request.slot, Outcome::Ok);
            } else {
                let next = self.current_ref(request.slot);
                self.runnable.push_back(next);
            }
        }
    }

    /// Whether the request in `slot` has run every step of its flow.
    fn past_last_step(&self, slot: u32) -> bool {
        let request = self.request(slot);
        usize::from(request.step) == self.scenario.flows[request.flow.index()].steps.len()
    }

    /// Ends the current step of the request in `slot` with what its action (or a refusing
    /// layer) returned: the request leaves the layers it is inside, innermost first (a retry
    /// may send it back in), and the step's routing applies.
    fn finish_step(&mut self, slot: u32, ended: Ended) -> Next {
        let now = self.now;
        let waited_as = self.current_ref(slot);
        self.slots[slot as usize].token = self.slots[slot as usize].token.wrapping_add(1);
        let step = self.step_of(slot);
        let request = self.request_mut(slot);
        request.lease = None;
        request.replayed = false;
        let origin = request.origin.take();
        // A Retry-After belongs to the step that was refused, retried or not.
        let retry_after = request.retry_after.take();
        if let Some(origin) = origin {
            self.redis.close_origin(origin); // no further copy of this write will be sent
        }
        // What the step returns: what its I/O returned, as its action decides it
        // (`actions::decide`: a rate limiter's decision on what its store answered).
        let (io_result, refused) = match ended {
            Ended::Action(result) => (result, None),
            Ended::Refused(outcome) => (StepResult::Error(outcome), Some(outcome)),
        };
        let (state, metrics) = (&mut self.actions, &mut self.metrics);
        let result = actions::decide(state, now, metrics, &step.action, io_result, refused);
        if result == StepResult::Error(Outcome::RateLimited) {
            self.metrics.count(self.rejected_attempts); // a 429, retried or not
        }
        let leaving = Leaving {
            result,
            io_result,
            retry_after,
            work_still_running: actions::outlives_timeout(&step.action)
                && io_result == StepResult::Error(Outcome::Timeout),
        };
        while let Some(hold) = self.slots[slot as usize].holds.pop() {
            let depth = self.slots[slot as usize].holds.len();
            let policy = step.policies[depth];
            match self.policies.exit(policy, now, hold, &leaving) {
                Exit::Left(handover) => {
                    self.monitors.left(policy);
                    if let Some(handover) = handover {
                        self.hand_over(policy, handover);
                    }
                }
                Exit::Again { at, hold } => {
                    self.slots[slot as usize].holds.push(hold);
                    let next = u8::try_from(depth + 1).expect("a step has few layers");
                    self.set_stage(slot, Stage::Backoff { next });
                    let in_a_pool = step.policies[..depth]
                        .iter()
                        .any(|&outer| self.policies.layer(outer).pools_work());
                    if leaving.work_still_running && in_a_pool {
                        // The retry runs inside a pool whose connection the abandoned query
                        // still holds: it goes again on that connection once the database has
                        // finished the query, and not before its backoff ends.
                        let retry = AfterQuery::Retry(self.current_ref(slot), at);
                        self.after_query(waited_as, retry);
                    } else {
                        self.set_timer(slot, at, TimerKind::Backoff);
                    }
                    return Next::Stop;
                }
                Exit::Kept(hold) => self.after_query(waited_as, AfterQuery::Release(policy, hold)),
            }
        }
        self.route(slot, step, result, retry_after)
    }

    /// A subscriber's message invalidates its key in the subscriber's cache; a subscriber back
    /// after a loss empties its cache if it flushes on reconnect (it cannot know what it
    /// missed).
    fn deliver_messages(&mut self) {
        let scenario = self.scenario;
        for (subscriber, family, index) in std::mem::take(&mut self.redis.messages) {
            let subscription = scenario.connections[subscriber.index()]
                .subscription
                .expect("messages go to subscribers");
            (self.actions).invalidate(subscription.invalidates, family, index);
        }
        for subscriber in std::mem::take(&mut self.redis.resubscribed) {
            let subscription = scenario.connections[subscriber.index()]
                .subscription
                .expect("only subscribers resubscribe");
            if subscription.flush_on_reconnect {
                self.actions.flush(subscription.invalidates);
            }
        }
    }

    /// Records what waits for the query `waited_as` was waiting on.
    fn after_query(&mut self, waited_as: RequestRef, what: AfterQuery) {
        let previous = self
            .after_queries
            .insert((waited_as.slot, waited_as.token), what);
        // A bulkhead keeps its hold only when it is inside the retry, and the retry waits only
        // when it is inside the bulkhead: never both for one query.
        assert!(previous.is_none(), "one thing waits for a query");
    }

    /// After its layers: the request goes on, finishes, or fails by the step's rules;
    /// `retry_after` is what a refusal of the step asked its client to wait.
    fn route(
        &mut self,
        slot: u32,
        step: &StepSpec,
        result: StepResult,
        retry_after: Option<SimDuration>,
    ) -> Next {
        let request = self.request(slot);
        if request.role == Role::Background {
            let outcome = match result {
                StepResult::Error(kind) => kind,
                StepResult::Ok | StepResult::Hit | StepResult::Miss => Outcome::Ok,
            };
            let flow = self.reports_as(request.flow);
            self.metrics.record_background_end(flow, outcome);
            self.free(slot);
            return Next::Stop;
        }
        if self.tracer.is_some() {
            let text = match result {
                StepResult::Ok => "step ended: ok".to_owned(),
                StepResult::Hit => format!("step ended: hit (on_hit {})", step.on_hit.name()),
                StepResult::Miss => "step ended: miss".to_owned(),
                StepResult::Error(kind) => format!(
                    "step ended: {} (on_error {})",
                    kind.name(),
                    step.on_error.name()
                ),
            };
            self.trace(slot, TraceWhat::Decision { text });
        }
        if let (StepResult::Error(kind), OnError::Next, Some(connection)) = (
            result,
            step.on_error,
            actions::fail_open_connection(&step.action),
        ) && !matches!(kind, Outcome::LockBusy | Outcome::RateLimited)
        {
            // Let through unchecked: Redis could not be reached, or was not asked (a breaker
            // open, a write dropped). A lock found taken is an answer, not a fail-open.
            let (total, counter) = &mut self.fail_open[connection.index()];
            *total += 1;
            self.metrics.count(*counter);
            if self.reconnect_slots.is_slot(connection) {
                self.reconnect_slots.record_fail_open(connection);
            }
        }
        match (result, step.on_hit) {
            (StepResult::Hit, OnHit::Finish) => {
                self.end_request(slot, Outcome::Ok);
                return Next::Stop;
            }
            (StepResult::Hit, OnHit::Goto(target)) => {
                // A jump over a `finally` step does not skip it: it runs in the background.
                let request = self.request(slot);
                let (flow, from) = (request.flow, usize::from(request.step));
                self.run_skipped_finally(slot, flow, from + 1..usize::from(target));
                let request = self.request_mut(slot);
                request.step = target;
                request.stage = Stage::Start;
                return Next::Continue;
            }
            (StepResult::Error(Outcome::Shed), _)
                if step.on_error == OnError::Fail && self.bugs.shed_request_vanishes =>
            {
                self.free(slot); // the planted bug: gone without a trace
                return Next::Stop;
            }
            (StepResult::Error(kind), _) if step.on_error == OnError::Fail => {
                self.end_request_asking(slot, kind, retry_after);
                return Next::Stop;
            }
            _ => {}
        }
        self.next_step(slot);
        Next::Continue
    }

    /// Gives back a hold that outlived its step.
    fn release_kept(&mut self, policy: PolicyRef, hold: Hold) {
        self.monitors.left(policy);
        if let Some(handover) = self.policies.layer(policy).release_kept(hold) {
            self.hand_over(policy, handover);
        }
    }

    /// A request queued in `policy` gets its place: it goes on entering its step's layers.
    fn hand_over(&mut self, policy: PolicyRef, handover: Handover) {
        let Handover { waiter, hold } = handover;
        if !self.is_live(waiter) {
            // Waiters never leave a queue early today; if one did, pass the place on.
            let layer = self.policies.layer(policy);
            let ceiling = layer.ceiling();
            self.monitors
                .entered(self.scenario, self.now, policy, ceiling);
            self.release_kept(policy, hold);
            return;
        }
        let ceiling = self.policies.ceiling(policy);
        self.monitors
            .entered(self.scenario, self.now, policy, ceiling);
        let &Stage::Queued { layer } = &self.request(waiter.slot).stage else {
            unreachable!("a handover goes to a queued request");
        };
        self.slots[waiter.slot as usize].holds.push(hold);
        let next = layer + 1;
        self.set_stage(waiter.slot, Stage::Entering { next });
        self.runnable.push_back(waiter);
    }

    /// Starts, in the background, every `finally` step of `steps` that the request in `slot`
    /// will not reach.
    fn run_skipped_finally(&mut self, slot: u32, flow: FlowId, steps: std::ops::Range<usize>) {
        let scenario = self.scenario;
        for index in steps {
            if scenario.flows[flow.index()].steps[index].finally {
                self.spawn_background(slot, index as u16);
            }
        }
    }

    fn end_request(&mut self, slot: u32, outcome: Outcome) {
        self.end_request_asking(slot, outcome, None);
    }

    /// Ends the request in `slot` with `outcome`; a refusal's `retry_after` goes to the caller
    /// that made the attempt, whose retry waits at least that long.
    fn end_request_asking(
        &mut self,
        slot: u32,
        outcome: Outcome,
        retry_after: Option<SimDuration>,
    ) {
        let (now, scenario) = (self.now, self.scenario);
        let request = self.request(slot);
        debug_assert_eq!(request.role, Role::Main);
        // The request ends at this step (failed, or finished early by a hit): the `finally`
        // steps after it still run, in the background.
        let (flow, ended_at) = (request.flow, usize::from(request.step));
        self.run_skipped_finally(
            slot,
            flow,
            ended_at + 1..scenario.flows[flow.index()].steps.len(),
        );
        let outcome_name = outcome.name().to_owned();
        self.trace(
            slot,
            TraceWhat::Ended {
                outcome: outcome_name,
            },
        );
        let request = self.request(slot);
        let (flow, latency) = (request.flow, now.saturating_since(request.started));
        let (worker, call) = (request.worker, request.call);
        if let (Outcome::Ok, Some(value)) = (outcome, request.value)
            && value.from != ValueFrom::Database
            && let Some(age) = self.versions.out_of_date_for(now, value.key, value.version)
        {
            let tally =
                &mut self.stale_reads[self.scenario.flows[flow.index()].reports_as(flow).index()];
            tally.0 += 1;
            tally
                .1
                .get_or_insert_with(Latency::new)
                .record(age.as_nanos());
        }
        self.metrics
            .record_end(self.reports_as(flow), outcome, latency.as_nanos());
        if let Some(tally) = self.instance_tallies.get_mut(flow.index()) {
            tally.outcomes[outcome.index()] += 1;
        }
        if let Some(http) = &mut self.http {
            http.record(now, outcome);
        }
        self.in_flight -= 1;
        self.count_in_flight(flow, false);
        self.monitors.ended();
        self.free(slot);
        if let Some((load, worker)) = worker {
            self.worker_done_with(load, worker);
        }
        if let Some((call, attempt)) = call
            && let Some(end) = self
                .callers
                .answered(now, call, attempt, outcome, retry_after)
        {
            self.after_attempt(call, end);
        }
    }

    fn free(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        // Not `take`n out of its slot: a request is large, and only two fields are needed.
        let request = entry.request.as_mut().expect("freeing a live request");
        let (role, held) = (request.role, std::mem::take(&mut request.held));
        entry.request = None;
        debug_assert!(entry.holds.is_empty(), "a request ends outside its layers");
        entry.token = entry.token.wrapping_add(1);
        self.free_slots.push(slot);
        if role == Role::Main {
            self.monitors.went_away();
        }
        self.actions.request_freed(self.now, held);
    }

    fn summary(&mut self) -> Summary {
        let (scenario, now) = (self.scenario, self.now);
        let flows = scenario.flows.len();
        let (mut unfinished, mut background_unfinished) = (vec![0u64; flows], vec![0u64; flows]);
        for request in self.slots.iter().filter_map(|slot| slot.request.as_ref()) {
            match request.role {
                Role::Background => background_unfinished[self.reports_as(request.flow)] += 1,
                Role::Main => unfinished[self.reports_as(request.flow)] += 1,
            }
        }
        let mut summary = Summary {
            requests: self.metrics.requests(),
            outcomes: self.metrics.outcome_counts(),
            unfinished: self.in_flight,
            latency_ms: self.metrics.latency_stats(),
            latency_histogram: self.metrics.latency_histogram(),
            flows: scenario
                .flows
                .iter()
                .enumerate()
                .filter(|(index, flow)| flow.reports_as(FlowId(*index as u32)).index() == *index)
                .map(|(index, flow)| {
                    let mut summary = self.metrics.flow_summary(
                        index,
                        unfinished[index],
                        background_unfinished[index],
                    );
                    summary.peak_in_flight = self.flow_in_flight[index].1;
                    let (stale, age) = &self.stale_reads[index];
                    summary.stale_reads = *stale;
                    if let Some(age) = age {
                        summary.stale_age_ms = age.stats(scenario.percentile_rule);
                    }
                    (flow.name.clone(), summary)
                })
                .collect(),
            databases: scenario
                .databases
                .iter()
                .enumerate()
                .map(|(index, db)| {
                    let mut summary = self.databases.summary(DatabaseId(index as u32), self.now);
                    summary.lock_wait_ms = self.metrics.lock_wait_stats(index);
                    (db.name.clone(), summary)
                })
                .collect(),
            caches: self.actions.cache_summaries(scenario),
            rate_limits: self.actions.rate_limit_summaries(scenario),
            throttles: self.actions.throttle_summaries(scenario),
            locks: self.actions.lock_summaries(scenario, now, &self.redis),
            connections: scenario
                .connections
                .iter()
                .enumerate()
                .map(|(index, c)| {
                    let id = ConnectionId(index as u32);
                    let mut summary = self.redis.connection_summary(id);
                    summary.fail_open = self.fail_open[index].0;
                    summary.pending_max = c.pending_max.map(|max| u64::from(max.get()));
                    if let Some(slot) = self.reconnect_slots.summary(id) {
                        summary.slot = slot;
                    }
                    (c.name.clone(), summary)
                })
                .collect(),
            servers: scenario
                .servers
                .iter()
                .enumerate()
                .map(|(index, server)| {
                    let summary = self.redis.server_summary(now, ServerId(index as u32));
                    (server.name.clone(), summary)
                })
                .collect(),
            ..Summary::default()
        };
        summary.http = self
            .http
            .as_ref()
            .map(|http| http.summary(&summary.outcomes));
        let callers = self.callers.summaries(scenario.percentile_rule);
        summary.callers = scenario
            .callers
            .iter()
            .zip(callers)
            .map(|(spec, caller)| (spec.name.clone(), caller))
            .collect();
        summary.services = self.services_summary();
        self.policies.summarize(scenario, self.now, &mut summary);
        summary
    }

    /// Each service's instances: the requests of every copy of its flows, by instance.
    fn services_summary(&self) -> BTreeMap<String, ServiceSummary> {
        let scenario = self.scenario;
        let mut in_flight = vec![0u64; scenario.flows.len()];
        for request in self.slots.iter().filter_map(|slot| slot.request.as_ref()) {
            if request.role == Role::Main {
                in_flight[request.flow.index()] += 1;
            }
        }
        let mut services: BTreeMap<String, ServiceSummary> = BTreeMap::new();
        for (service_index, service) in scenario.services.iter().enumerate() {
            let mut instances = BTreeMap::new();
            for number in 0..service.instances {
                let mut tally = InstanceTally::default();
                let mut unfinished = 0;
                for (flow, spec) in scenario.flows.iter().enumerate() {
                    let Some(instance) = spec.instance else {
                        continue;
                    };
                    if instance.service.index() != service_index || instance.index != number {
                        continue;
                    }
                    let counted = &self.instance_tallies[flow];
                    tally.requests += counted.requests;
                    for (sum, count) in tally.outcomes.iter_mut().zip(counted.outcomes) {
                        *sum += count;
                    }
                    unfinished += in_flight[flow];
                }
                let outcomes = Outcome::ALL
                    .into_iter()
                    .map(|o| (o.name().to_owned(), tally.outcomes[o.index()]))
                    .collect();
                let summary = InstanceSummary {
                    requests: tally.requests,
                    outcomes,
                    unfinished,
                };
                instances.insert(number.to_string(), summary);
            }
            services.insert(service.name.clone(), ServiceSummary { instances });
        }
        services
    }

    fn report(mut self, verdict: Verdict) -> VariantReport {
        let summary = self.summary();
        let end = self.now;
        let series = self.metrics.finish_series(end);
        let scenario = self.scenario;
        let ms = |t: SimTime| t.as_nanos() as f64 / 1e6;
        let faults: Vec<FaultWindow> = scenario
            .faults
            .iter()
            .filter(|fault| fault.at <= end)
            .map(|fault| FaultWindow {
                name: fault.name.clone(),
                target: scenario.target_name(fault.target).to_owned(),
                kind: fault.kind.name().to_owned(),
                start_ms: ms(fault.at),
                end_ms: fault.end().filter(|&e| e <= end).map(ms),
            })
            .collect();
        let (log, log_dropped) = self.log(&faults);
        VariantReport {
            name: scenario.name.clone(),
            sweep_x: None,
            verdict,
            percentile_rule: scenario.percentile_rule,
            end_ms: ms(end),
            events: self.events_processed,
            faults,
            summary,
            series,
            log,
            log_dropped,
            runner: None,
        }
    }

    /// The run's state changes in time order: faults, then servers' memory milestones, then
    /// breakers, then reconnect slots at the same instant (see `journal`).
    fn log(&self, faults: &[FaultWindow]) -> (Vec<LogEntry>, u64) {
        let mut entries = Vec::new();
        for fault in faults {
            let entry = |at_ms: f64, event: &str| LogEntry {
                at_ms,
                event: event.to_owned(),
                target_kind: "fault",
                target: fault.name.clone(),
                from: None,
                link: None,
            };
            entries.push(entry(fault.start_ms, "fault_started"));
            if let Some(end_ms) = fault.end_ms {
                entries.push(entry(end_ms, "fault_ended"));
            }
        }
        for (index, server) in self.scenario.servers.iter().enumerate() {
            let milestones = self.redis.memory_milestones(ServerId(index as u32));
            for (event, at) in milestones {
                let Some(at) = at else { continue };
                entries.push(LogEntry {
                    at_ms: journal::ms(at),
                    event: event.to_owned(),
                    target_kind: "server",
                    target: server.name.clone(),
                    from: None,
                    link: None,
                });
            }
        }
        let mut dropped = self.policies.log(self.scenario, &mut entries);
        dropped += self.reconnect_slots.log(self.scenario, &mut entries);
        (journal::merge(entries), dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::DRAIN_ORDER;

    /// The order in which one event's outputs are taken decides same-instant outcomes, so it
    /// is written down for users; this holds the code to what is written (and fails when
    /// either changes alone).
    #[test]
    fn the_drain_order_is_the_documented_one() {
        let docs = include_str!("../../docs/scenario-format.md");
        let section = docs
            .split("(`sim/src/engine.rs`, `DRAIN_ORDER`):")
            .nth(1)
            .expect("the same-instant section lists the drain order");
        let documented: Vec<&str> = section
            .lines()
            .skip_while(|line| line.trim().is_empty())
            .take_while(|line| !line.trim().is_empty())
            .filter_map(|line| {
                let (number, rest) = line.split_once(". `")?;
                number.trim().parse::<u32>().ok()?;
                rest.split('`').next()
            })
            .collect();
        let code: Vec<String> = DRAIN_ORDER.iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(documented, code);
    }
}

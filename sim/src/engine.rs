//! The engine: the event loop, request flows, and the policies attached to their steps.
//!
//! A request runs its flow's steps in order. For each step it enters the step's bulkhead (it
//! may queue, or be shed), asks the step's breaker (it may be rejected before any I/O), then
//! acts: a Redis command, a database query or local work. When the step ends, its permit is
//! released, its result reported to the breaker, and the request goes on, finishes, or fails
//! according to the step's `on_error` and `on_hit`.
//!
//! Requests live in a slab of slots addressed by index. A request that waits hands out a
//! [`RequestRef`] (slot and token); when the wait ends the token is bumped, so a second answer
//! to the same wait (a reply after a timeout, a completion after a query timeout) is dropped.
//! Requests that became runnable during an event are advanced, in order, before the next event.
//!
//! Invariant: every request that arrives ends exactly once, or is counted as unfinished when
//! the run stops.

use std::collections::{BTreeMap, VecDeque};

use outagelab_model::breaker::{Admit, Breaker, BreakerState, CallOutcome, Ticket};
use outagelab_model::bulkhead::{Acquire, Bulkhead, Permit};
use outagelab_model::cache::{Cache, CacheKey, Lookup};
use outagelab_model::rate_limit::{Decision as RateDecision, RateLimiter};
use outagelab_model::reconnect::{ConnectionError, Failure, FailureEffect, Lease, should_replay};
use outagelab_model::retry::{RetryDecision, RetryPolicy, RetryState};
use outagelab_model::semaphore::{Permit as SemaphorePermit, Semaphore};
use outagelab_model::throttle::KvKey;
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{
    BreakerSummary, BulkheadSummary, CacheSummary, FaultWindow, Outcome, RateLimitSummary,
    RetrySummary, SemaphoreSummary, Summary, VariantReport, Verdict,
};

use crate::database::{Databases, Query};
use crate::kernel::{Event, EventQueue, RequestRef, StepResult};
use crate::metrics::{CounterId, GaugeId, Metrics};
use crate::reconnect_slots::{ReconnectSlots, SlotAcquire, link_of};
use crate::redis::{LinkEvent, Op, Redis};
use crate::rng::{Stream, key_index};
use crate::scenario::{
    Arrivals, BreakerId, BulkheadId, CacheOp, ConnectionId, DatabaseId, FaultTarget, FlowId,
    KeyFamilyId, LoadEnd, LoadId, OnError, OnHit, OutcomeSet, RateLimitId, RedisCommand, Scenario,
    SemaphoreId, StepAction, StepSpec, ThrottleId, ThrottleOp,
};
use crate::throttles::{Held, Phase, Progress, Throttles};

/// Runs one scenario to its end and reports what happened.
///
/// Fails only when the scenario's cross-references are broken (which the scenario file reader
/// never produces).
pub fn run(scenario: &Scenario) -> Result<VariantReport, String> {
    scenario.check_references()?;
    let mut simulator = Simulator::new(scenario);
    let verdict = simulator.run_to_end();
    Ok(simulator.report(verdict))
}

/// The summary a run of this scenario would have, with every count at zero: it names every
/// metric an expectation may refer to.
pub fn summary_shape(scenario: &Scenario) -> Result<Summary, String> {
    scenario.check_references()?;
    Ok(Simulator::new(scenario).summary())
}

struct Request {
    flow: FlowId,
    step: u16,
    /// A fire-and-forget step running on its own: it runs this one step, and its outcome is
    /// counted apart from the requests.
    background: bool,
    started: SimTime,
    /// Seeds the key each step draws from its key family.
    key_seed: u64,
    permit: Option<(BulkheadId, Permit)>,
    semaphore_permit: Option<(SemaphoreId, SemaphorePermit)>,
    ticket: Option<(BreakerId, Ticket)>,
    /// The retry state of the current step, from its first attempt until it ends for good.
    retry: Option<RetryState>,
    /// Whether the request is waiting out a retry's backoff (its timer re-runs the step).
    retry_waiting: bool,
    /// A Retry-After the last refusal asked for, for the retry policy.
    retry_after: Option<SimDuration>,
    /// The throttle slots the request holds, at most one per throttle.
    throttle_held: Vec<Held>,
    /// The KV step of a throttle the request waits on.
    throttle_phase: Option<(ThrottleId, KvKey, Phase)>,
    /// The reconnect slot and lease the current step's command runs on.
    lease: Option<(ConnectionId, Lease)>,
    /// Whether the current step's command was already replayed (a replay is made once).
    replayed: bool,
    /// The write the current step's copies belong to, when a slot may replay it.
    origin: Option<u64>,
    /// Run the current step's action without its gates again (bulkhead, semaphore, breaker
    /// were passed before it waited for a reconnect slot, or before its replay).
    resume_action: bool,
}

struct Slot {
    /// Bumped whenever the request in this slot stops waiting, and kept across reuse.
    token: u32,
    request: Option<Request>,
}

struct BreakerSlot {
    breaker: Breaker,
    enabled: bool,
    counts: OutcomeSet,
    rejected: u64,
    /// Transitions into half-open and into closed (openings are counted by the breaker).
    half_opened: u64,
    closed: u64,
    /// 0 closed, 1 half-open, 2 open: the series shows the worst state in each bucket.
    state_gauge: GaugeId,
}

impl BreakerSlot {
    /// Takes the breaker's transitions as they happen and counts them.
    fn drain_transitions(&mut self) {
        while let Some(transition) = self.breaker.poll_transition() {
            match transition.to {
                BreakerState::HalfOpen => self.half_opened += 1,
                BreakerState::Closed => self.closed += 1,
                BreakerState::Open => {}
            }
        }
    }
}

fn state_level(state: BreakerState) -> u64 {
    match state {
        BreakerState::Closed => 0,
        BreakerState::HalfOpen => 1,
        BreakerState::Open => 2,
    }
}

struct BulkheadSlot {
    bulkhead: Bulkhead,
    enabled: bool,
    shed: u64,
    peak_in_use: u64,
    peak_queued: u64,
    in_use_gauge: GaugeId,
    queued_gauge: GaugeId,
}

struct RetrySlot {
    policy: RetryPolicy,
    enabled: bool,
    retry_on: OutcomeSet,
    /// Draws the backoff's jitter.
    random: Stream,
}

struct RateLimitSlot {
    limiter: RateLimiter,
    enabled: bool,
    store: Option<ConnectionId>,
    /// Checks admitted unchecked because the store could not be reached, per bucket.
    fail_open_counter: CounterId,
}

struct CacheSlot {
    cache: Cache,
    entries_gauge: GaugeId,
}

/// What a throttle's chart shows: slots truly held, and what its counter says is held. The gap
/// is leaked slots (or holders the counter lost).
struct ThrottleGauges {
    holders: GaugeId,
    counter: GaugeId,
}

struct SemaphoreSlot {
    semaphore: Semaphore,
    enabled: bool,
    in_flight_gauge: GaugeId,
    bytes_gauge: GaugeId,
}

struct LoadState {
    rng: Stream,
    issued: u64,
    /// Poisson loads: the next arrival, in nanoseconds with 32 fractional bits, so gaps
    /// shorter than a nanosecond still add up to the right rate.
    next_arrival_q32: u128,
}

/// Where a step stands after its gates.
enum Gates {
    /// Every gate let it through: run the action.
    Passed,
    /// Queued in a bulkhead: the release of a permit makes it runnable.
    Waiting,
    /// A gate refused it; the step ended with that error.
    Ended(Next),
}

/// What a step's end means for its request.
enum Next {
    /// Go on with the request's next step.
    Continue,
    /// The request does not go on now: it has ended, or it waits to retry the step.
    Stop,
}

struct Simulator<'s> {
    scenario: &'s Scenario,
    now: SimTime,
    events: EventQueue,
    events_processed: u64,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    runnable: VecDeque<RequestRef>,
    in_flight: u64,
    loads: Vec<LoadState>,
    loads_active: usize,
    redis: Redis,
    databases: Databases,
    breakers: Vec<BreakerSlot>,
    bulkheads: Vec<BulkheadSlot>,
    semaphores: Vec<SemaphoreSlot>,
    retries: Vec<RetrySlot>,
    caches: Vec<CacheSlot>,
    rate_limits: Vec<RateLimitSlot>,
    throttles: Throttles,
    throttle_gauges: Vec<ThrottleGauges>,
    /// Permits of database queries whose caller timed out, by the waiter reference the
    /// database still holds; returned when the query ends. Never larger than the number of
    /// running queries.
    held_by_queries: BTreeMap<(u32, u32), (BulkheadId, Permit)>,
    metrics: Metrics,
    in_flight_gauge: GaugeId,
    /// Per database: queries running, and queries waiting for a lock.
    database_gauges: Vec<(GaugeId, GaugeId)>,
    connection_gauges: Vec<GaugeId>,
    reconnect_slots: ReconnectSlots,
    /// Per slot connection: the `connected` gauge.
    slot_gauges: Vec<(ConnectionId, GaugeId)>,
    /// Per connection: its steps that failed and went on (fail-open), in total and per bucket.
    fail_open: Vec<(u64, CounterId)>,
}

impl<'s> Simulator<'s> {
    fn new(scenario: &'s Scenario) -> Self {
        let mut events = EventQueue::default();
        let mut metrics = Metrics::new(
            scenario.bucket.as_nanos(),
            scenario.flows.len(),
            scenario.databases.len(),
            scenario.percentile_rule,
        );
        let in_flight_gauge = metrics.add_gauge("in_flight".to_owned());
        let database_gauges = scenario
            .databases
            .iter()
            .map(|db| {
                (
                    metrics.add_gauge(format!("databases.{}.concurrency", db.name)),
                    metrics.add_gauge(format!("databases.{}.lock_waiting", db.name)),
                )
            })
            .collect();
        let connection_gauges = scenario
            .connections
            .iter()
            .map(|c| metrics.add_gauge(format!("connections.{}.pending", c.name)))
            .collect();
        let fail_open = scenario
            .connections
            .iter()
            .map(|c| {
                (
                    0,
                    metrics.add_counter(format!("connections.{}.fail_open", c.name)),
                )
            })
            .collect();
        let slot_gauges = scenario
            .connections
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.reconnect, crate::scenario::Reconnect::Slot(_)))
            .map(|(index, c)| {
                let gauge = metrics.add_gauge(format!("connections.{}.connected", c.name));
                (ConnectionId(index as u32), gauge)
            })
            .collect();
        let bulkheads = scenario
            .bulkheads
            .iter()
            .map(|spec| BulkheadSlot {
                bulkhead: Bulkhead::new(spec.config),
                enabled: spec.enabled,
                shed: 0,
                peak_in_use: 0,
                peak_queued: 0,
                in_use_gauge: metrics.add_gauge(format!("bulkheads.{}.in_use", spec.name)),
                queued_gauge: metrics.add_gauge(format!("bulkheads.{}.queued", spec.name)),
            })
            .collect();
        let semaphores = scenario
            .semaphores
            .iter()
            .map(|spec| SemaphoreSlot {
                semaphore: Semaphore::new(spec.config),
                enabled: spec.enabled,
                in_flight_gauge: metrics.add_gauge(format!("semaphores.{}.in_flight", spec.name)),
                bytes_gauge: metrics.add_gauge(format!("semaphores.{}.bytes", spec.name)),
            })
            .collect();
        let throttle_gauges = scenario
            .throttles
            .iter()
            .map(|spec| ThrottleGauges {
                holders: metrics.add_gauge(format!("throttles.{}.holders", spec.name)),
                counter: metrics.add_gauge(format!("throttles.{}.counter", spec.name)),
            })
            .collect();
        let rate_limits = scenario
            .rate_limits
            .iter()
            .map(|spec| RateLimitSlot {
                fail_open_counter: metrics
                    .add_counter(format!("rate_limits.{}.fail_open_admitted", spec.name)),
                limiter: RateLimiter::new(spec.config),
                enabled: spec.enabled,
                store: spec.store,
            })
            .collect();
        let caches = scenario
            .caches
            .iter()
            .map(|spec| CacheSlot {
                cache: Cache::new(spec.config),
                entries_gauge: metrics.add_gauge(format!("caches.{}.entries", spec.name)),
            })
            .collect();
        let retries = scenario
            .retries
            .iter()
            .map(|spec| RetrySlot {
                policy: RetryPolicy::new(spec.config),
                enabled: spec.enabled,
                retry_on: spec.retry_on,
                random: Stream::derive(scenario.seed, "retry", &spec.name),
            })
            .collect();
        let breakers = scenario
            .breakers
            .iter()
            .map(|spec| BreakerSlot {
                breaker: Breaker::new(spec.config),
                enabled: spec.enabled,
                counts: spec.counts,
                rejected: 0,
                half_opened: 0,
                closed: 0,
                state_gauge: metrics.add_gauge(format!("breakers.{}.state", spec.name)),
            })
            .collect();
        let mut loads = Vec::with_capacity(scenario.loads.len());
        let mut loads_active = 0;
        for (index, load) in scenario.loads.iter().enumerate() {
            loads.push(LoadState {
                rng: Stream::derive(scenario.seed, "load", &load.name),
                issued: 0,
                next_arrival_q32: u128::from(load.start.as_nanos()) << 32,
            });
            let any = match load.arrivals {
                Arrivals::Burst { count } => count > 0,
                Arrivals::Even { end, .. } | Arrivals::Poisson { end, .. } => match end {
                    LoadEnd::Count(count) => count > 0,
                    LoadEnd::Until(until) => load.start < until,
                },
            };
            if any {
                loads_active += 1;
                events.schedule(load.start, Event::Arrival(LoadId(index as u32)));
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
            breakers,
            bulkheads,
            semaphores,
            retries,
            caches,
            rate_limits,
            throttles: Throttles::new(scenario),
            throttle_gauges,
            held_by_queries: BTreeMap::new(),
            metrics,
            in_flight_gauge,
            database_gauges,
            connection_gauges,
            reconnect_slots: ReconnectSlots::new(scenario),
            slot_gauges,
            fail_open,
        }
    }

    /// Runs until the horizon if there is one (background work such as reconnects and late
    /// replies goes on after the last request ended), otherwise until every request has
    /// ended; a budget or a stall stops it earlier.
    fn run_to_end(&mut self) -> Verdict {
        let limits = self.scenario.limits;
        let ended = |simulator: &Self| {
            if simulator.in_flight == 0 && simulator.loads_active == 0 {
                Verdict::Completed
            } else {
                Verdict::Horizon
            }
        };
        loop {
            if limits.horizon.is_none() && self.loads_active == 0 && self.in_flight == 0 {
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
            let (at, event) = self.events.pop().expect("peeked");
            self.now = at;
            self.metrics.advance_to(at);
            self.events_processed += 1;
            self.dispatch(event);
            self.drain();
            self.refresh_gauges();
        }
    }

    fn dispatch(&mut self, event: Event) {
        let now = self.now;
        let events = &mut self.events;
        match event {
            Event::Arrival(load) => self.on_arrival(load),
            Event::RequestTimer(request) => self.on_request_timer(request),
            Event::Redis(event) => self.redis.handle(now, event, events),
            Event::Database(event) => self.databases.handle(now, event, events),
            Event::FaultStarts(fault) | Event::FaultEnds(fault) => {
                let on = matches!(event, Event::FaultStarts(_));
                let spec = &self.scenario.faults[fault.index()];
                match spec.target {
                    FaultTarget::Server(server) => {
                        self.redis.fault(now, server, spec.kind, on, events)
                    }
                }
            }
        }
    }

    /// Delivers every result produced by the last event, then advances every request that
    /// became runnable, until nothing is left to do at this instant.
    fn drain(&mut self) {
        loop {
            if !self.redis.link_events.is_empty() {
                let link_events = std::mem::take(&mut self.redis.link_events);
                for &event in &link_events {
                    self.on_link_event(event);
                }
                self.redis.link_events = link_events;
                self.redis.link_events.clear();
            } else if !self.redis.completions.is_empty() {
                let completions = std::mem::take(&mut self.redis.completions);
                for &(request, result) in &completions {
                    self.settle(request, result);
                }
                self.redis.completions = completions;
                self.redis.completions.clear();
            } else if !self.databases.completions.is_empty() {
                let completions = std::mem::take(&mut self.databases.completions);
                for &request in &completions {
                    match self.held_by_queries.remove(&(request.slot, request.token)) {
                        // The caller timed out; its connection is free only now.
                        Some((bulkhead, permit)) => self.release(bulkhead, permit),
                        None => self.settle(request, StepResult::Ok),
                    }
                }
                self.databases.completions = completions;
                self.databases.completions.clear();
            } else if !self.databases.lock_waits.is_empty() {
                self.record_lock_waits();
            } else if !self.databases.timeouts.is_empty() {
                let timeouts = std::mem::take(&mut self.databases.timeouts);
                for &request in &timeouts {
                    self.settle(request, StepResult::Error(Outcome::Timeout));
                }
                self.databases.timeouts = timeouts;
                self.databases.timeouts.clear();
            } else if let Some(request) = self.runnable.pop_front() {
                if self.is_live(request) {
                    self.advance(request.slot);
                }
            } else {
                return;
            }
        }
    }

    fn record_lock_waits(&mut self) {
        for (database, nanos) in self.databases.lock_waits.drain(..) {
            self.metrics.record_lock_wait(database.index(), nanos);
        }
    }

    fn refresh_gauges(&mut self) {
        self.metrics.set_gauge(self.in_flight_gauge, self.in_flight);
        for (index, &(running_gauge, waiting_gauge)) in self.database_gauges.iter().enumerate() {
            let id = DatabaseId(index as u32);
            let running = self.databases.running(id) as u64;
            self.metrics.set_gauge(running_gauge, running);
            self.metrics
                .set_gauge(waiting_gauge, self.databases.lock_waiting(id));
        }
        for (index, &gauge) in self.connection_gauges.iter().enumerate() {
            let pending = self.redis.pending(ConnectionId(index as u32));
            self.metrics.set_gauge(gauge, pending);
        }
        for &(connection, gauge) in &self.slot_gauges {
            let connected = self.reconnect_slots.connected(connection);
            self.metrics.set_gauge(gauge, u64::from(connected));
        }
        for slot in &self.semaphores {
            let (in_flight, bytes) = (slot.semaphore.in_flight(), slot.semaphore.bytes_in_flight());
            self.metrics
                .set_gauge(slot.in_flight_gauge, u64::from(in_flight));
            self.metrics.set_gauge(slot.bytes_gauge, bytes);
        }
        for slot in &self.caches {
            self.metrics
                .set_gauge(slot.entries_gauge, slot.cache.len() as u64);
        }
        for (index, gauges) in self.throttle_gauges.iter().enumerate() {
            let (holders, counter) = self.throttles.gauges(self.now, ThrottleId(index as u32));
            self.metrics.set_gauge(gauges.holders, holders);
            self.metrics.set_gauge(gauges.counter, counter);
        }
        for slot in &self.breakers {
            let level = state_level(slot.breaker.state_at(self.now));
            self.metrics.set_gauge(slot.state_gauge, level);
        }
        for slot in &mut self.bulkheads {
            let (in_use, queued) = (slot.bulkhead.in_use(), slot.bulkhead.queued());
            self.metrics.set_gauge(slot.in_use_gauge, u64::from(in_use));
            self.metrics.set_gauge(slot.queued_gauge, u64::from(queued));
        }
    }

    fn on_arrival(&mut self, id: LoadId) {
        let spec = &self.scenario.loads[id.index()];
        let (rate, end, poisson) = match spec.arrivals {
            Arrivals::Burst { count } => {
                for _ in 0..count {
                    self.spawn(id);
                }
                self.loads_active -= 1;
                return;
            }
            Arrivals::Even { rate, end } => (rate, end, false),
            Arrivals::Poisson { rate, end } => (rate, end, true),
        };
        self.spawn(id);
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
    fn spawn(&mut self, id: LoadId) {
        let flow = self.scenario.loads[id.index()].flow;
        let state = &mut self.loads[id.index()];
        state.issued += 1;
        let key_seed = state.rng.next_u64();
        let request = self.allocate(Request {
            flow,
            step: 0,
            background: false,
            started: self.now,
            key_seed,
            permit: None,
            semaphore_permit: None,
            ticket: None,
            retry: None,
            retry_waiting: false,
            retry_after: None,
            throttle_held: Vec::new(),
            throttle_phase: None,
            lease: None,
            replayed: false,
            origin: None,
            resume_action: false,
        });
        self.in_flight += 1;
        self.metrics.record_arrival(flow.index());
        self.runnable.push_back(request);
    }

    fn allocate(&mut self, request: Request) -> RequestRef {
        let slot = match self.free_slots.pop() {
            Some(slot) => slot,
            None => {
                self.slots.push(Slot {
                    token: 0,
                    request: None,
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 live requests")
            }
        };
        let entry = &mut self.slots[slot as usize];
        debug_assert!(entry.request.is_none());
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

    fn current_ref(&self, slot: u32) -> RequestRef {
        RequestRef {
            slot,
            token: self.slots[slot as usize].token,
        }
    }

    fn request_mut(&mut self, slot: u32) -> &mut Request {
        self.slots[slot as usize]
            .request
            .as_mut()
            .expect("a live request")
    }

    /// Runs the request in `slot` until it waits or ends.
    fn advance(&mut self, slot: u32) {
        loop {
            let request = self.request_mut(slot);
            let (flow_id, step_index, background) =
                (request.flow, request.step as usize, request.background);
            let flow = &self.scenario.flows[flow_id.index()];
            if step_index == flow.steps.len() {
                self.end_request(slot, Outcome::Ok);
                return;
            }
            let step = &flow.steps[step_index];
            // Gates already passed before a wait for a reconnect slot, or before a replay.
            let resume = std::mem::take(&mut self.request_mut(slot).resume_action);
            if !resume {
                if step.on_error == OnError::Ignore && !background {
                    self.spawn_background(slot, step_index as u16);
                    self.request_mut(slot).step += 1;
                    continue;
                }
                match self.pass_gates(slot, step) {
                    Gates::Passed => {}
                    Gates::Waiting => return,
                    Gates::Ended(Next::Continue) => continue,
                    Gates::Ended(Next::Stop) => return,
                }
            }
            let waiter = self.current_ref(slot);
            match step.action {
                StepAction::Redis { connection, .. } => {
                    let op = self
                        .redis_op(slot, step)
                        .expect("a Redis step has a command");
                    match self.issue_command(slot, connection, op, step.replay_writes) {
                        None => return,
                        Some(result) => match self.end_step(slot, result) {
                            Next::Continue => continue,
                            Next::Stop => return,
                        },
                    }
                }
                StepAction::Database {
                    database,
                    timeout,
                    latency,
                    lock,
                } => {
                    let query = Query {
                        waiter,
                        timeout,
                        latency,
                        lock: lock.map(|family| (family.0, self.key_of(slot, family))),
                    };
                    self.databases
                        .start(self.now, database, query, &mut self.events);
                    self.record_lock_waits();
                    return;
                }
                StepAction::Work { duration } => {
                    self.events.schedule(
                        self.now.saturating_add(duration),
                        Event::RequestTimer(waiter),
                    );
                    return;
                }
                StepAction::RateLimit { limiter, key } => {
                    let slot_entry = &self.rate_limits[limiter.index()];
                    match (slot_entry.enabled, slot_entry.store, key) {
                        (true, Some(store), Some(family)) => {
                            let op = Op {
                                command: RedisCommand::Incr,
                                family: family.0,
                                index: self.key_of(slot, family),
                            };
                            match self.issue_command(slot, store, op, step.replay_writes) {
                                None => return,
                                Some(result) => match self.end_step(slot, result) {
                                    Next::Continue => continue,
                                    Next::Stop => return,
                                },
                            }
                        }
                        // A local limiter (or a disabled one) answers at once; end_step asks it.
                        _ => match self.end_step(slot, StepResult::Ok) {
                            Next::Continue => continue,
                            Next::Stop => return,
                        },
                    }
                }
                StepAction::Throttle { throttle, op, key } => {
                    let kv_key = u64::from(key.0) << 32 | u64::from(self.key_of(slot, key));
                    let progress = match op {
                        ThrottleOp::Acquire => {
                            if let Some(old) = self.take_held(slot, throttle) {
                                // A second acquire of the same throttle drops the first slot.
                                self.throttles.leak(self.now, old);
                            }
                            self.throttles.acquire(self.now, throttle, kv_key)
                        }
                        ThrottleOp::Release => match self.take_held(slot, throttle) {
                            Some(held) => self.throttles.release(self.now, held),
                            None => Progress::Done,
                        },
                    };
                    match self.throttle_progress(slot, progress) {
                        Some(Next::Continue) => continue,
                        Some(Next::Stop) | None => return,
                    }
                }
                StepAction::Cache { cache, op, key } => {
                    let key = key.map(|family| CacheKey::pair(family.0, self.key_of(slot, family)));
                    let key = || key.expect("validated: every cache op but flush has a key");
                    let (now, cache) = (self.now, &mut self.caches[cache.index()].cache);
                    let result = match op {
                        CacheOp::Get => match cache.get(now, key()) {
                            Lookup::Hit { .. } => StepResult::Hit,
                            Lookup::Miss | Lookup::Expired => StepResult::Miss,
                        },
                        CacheOp::Put { value_bytes } => {
                            let _ = cache.insert(now, key(), 0, u64::from(value_bytes));
                            StepResult::Ok
                        }
                        CacheOp::Invalidate => {
                            cache.invalidate(key());
                            StepResult::Ok
                        }
                        CacheOp::Flush => {
                            cache.flush();
                            StepResult::Ok
                        }
                    };
                    match self.end_step(slot, result) {
                        Next::Continue => continue,
                        Next::Stop => return,
                    }
                }
            }
        }
    }

    /// Takes the current step's retry state, bulkhead permit, semaphore permit and breaker
    /// ticket, in that order, before its action runs.
    fn pass_gates(&mut self, slot: u32, step: &StepSpec) -> Gates {
        if let Some(retry) = step.retry
            && self.retries[retry.index()].enabled
            && self.request_mut(slot).retry.is_none()
        {
            let state = self.retries[retry.index()].policy.on_request(self.now);
            self.request_mut(slot).retry = Some(state);
        }
        if let Some(bulkhead) = step.bulkhead
            && self.bulkheads[bulkhead.index()].enabled
            && self.request_mut(slot).permit.is_none()
        {
            let waiter = self.current_ref(slot).to_waiter();
            let entry = &mut self.bulkheads[bulkhead.index()];
            match entry.bulkhead.try_acquire(waiter) {
                Acquire::Granted(permit) => {
                    entry.peak_in_use = entry.peak_in_use.max(u64::from(entry.bulkhead.in_use()));
                    self.request_mut(slot).permit = Some((bulkhead, permit));
                }
                Acquire::Queued => {
                    entry.peak_queued = entry.peak_queued.max(u64::from(entry.bulkhead.queued()));
                    return Gates::Waiting; // a release hands the permit over
                }
                Acquire::Shed => {
                    entry.shed += 1;
                    return Gates::Ended(self.end_step(slot, StepResult::Error(Outcome::Shed)));
                }
            }
        }
        if let Some(semaphore) = step.semaphore
            && self.semaphores[semaphore.index()].enabled
        {
            let bytes = self.redis_op(slot, step).map_or(0, Op::request_bytes);
            match self.semaphores[semaphore.index()]
                .semaphore
                .try_acquire(bytes)
            {
                Ok(permit) => self.request_mut(slot).semaphore_permit = Some((semaphore, permit)),
                Err(_) => {
                    return Gates::Ended(self.end_step(slot, StepResult::Error(Outcome::Shed)));
                }
            }
        }
        if let Some(breaker) = step.breaker
            && self.breakers[breaker.index()].enabled
        {
            let entry = &mut self.breakers[breaker.index()];
            let admit = entry.breaker.try_admit(self.now);
            entry.drain_transitions();
            match admit {
                Admit::Yes(ticket) => self.request_mut(slot).ticket = Some((breaker, ticket)),
                Admit::No(_) => {
                    entry.rejected += 1;
                    return Gates::Ended(
                        self.end_step(slot, StepResult::Error(Outcome::BreakerOpen)),
                    );
                }
            }
        }
        Gates::Passed
    }

    /// The command a Redis step of the request in `slot` sends; `None` for other steps.
    fn redis_op(&self, slot: u32, step: &StepSpec) -> Option<Op> {
        let StepAction::Redis { command, key, .. } = step.action else {
            return None;
        };
        Some(Op {
            command,
            family: key.0,
            index: self.key_of(slot, key),
        })
    }

    /// The key of `family` the request in `slot` uses (drawn from its key seed, so every step
    /// of the request that names the family uses the same key).
    fn key_of(&self, slot: u32, family: KeyFamilyId) -> u32 {
        let request = self.slots[slot as usize]
            .request
            .as_ref()
            .expect("a live request");
        let spec = &self.scenario.keys[family.index()];
        key_index(request.key_seed, family.0, spec.count, spec.distribution)
    }

    /// Takes the slot of `throttle` that the request in `slot` holds, if any.
    fn take_held(&mut self, slot: u32, throttle: ThrottleId) -> Option<Held> {
        let held = &mut self.request_mut(slot).throttle_held;
        let index = held.iter().position(|h| h.throttle() == throttle)?;
        Some(held.swap_remove(index))
    }

    /// Applies a throttle step's progress to the request in `slot`: it holds the slot it was
    /// given, waits for a KV step (`None`), or ends the step.
    fn throttle_progress(&mut self, slot: u32, progress: Progress) -> Option<Next> {
        let result = match progress {
            Progress::Admitted(held) => {
                self.request_mut(slot).throttle_held.push(held);
                StepResult::Ok
            }
            Progress::Rejected { retry_after } => {
                self.request_mut(slot).retry_after = Some(retry_after);
                StepResult::Error(Outcome::RateLimited)
            }
            Progress::Done => StepResult::Ok,
            Progress::Wait {
                after,
                throttle,
                key,
                phase,
                admitted,
            } => {
                let waiter = self.current_ref(slot);
                let request = self.request_mut(slot);
                request.throttle_held.extend(admitted);
                request.throttle_phase = Some((throttle, key, phase));
                self.events
                    .schedule(self.now.saturating_add(after), Event::RequestTimer(waiter));
                return None;
            }
        };
        Some(self.end_step(slot, result))
    }

    /// Starts step `step` of the request in `slot` as a background request of its own.
    fn spawn_background(&mut self, slot: u32, step: u16) {
        let (now, scenario) = (self.now, self.scenario);
        let request = self.request_mut(slot);
        // A throttle release hands back the slot the request holds of its throttle, so that
        // slot goes with it.
        let throttle_held =
            match scenario.flows[request.flow.index()].steps[usize::from(step)].action {
                StepAction::Throttle {
                    op: ThrottleOp::Release,
                    throttle,
                    ..
                } => self.take_held(slot, throttle).into_iter().collect(),
                _ => Vec::new(),
            };
        let request = self.request_mut(slot);
        let background = Request {
            flow: request.flow,
            step,
            background: true,
            started: now,
            key_seed: request.key_seed,
            permit: None,
            semaphore_permit: None,
            ticket: None,
            retry: None,
            retry_waiting: false,
            retry_after: None,
            throttle_held,
            throttle_phase: None,
            lease: None,
            replayed: false,
            origin: None,
            resume_action: false,
        };
        let background = self.allocate(background);
        // Run it now, so that its command is written before the request's next one.
        self.advance(background.slot);
    }

    fn on_request_timer(&mut self, request: RequestRef) {
        if !self.is_live(request) {
            return;
        }
        let scenario = self.scenario;
        let current = self.request_mut(request.slot);
        if current.retry_waiting {
            current.retry_waiting = false;
            self.runnable.push_back(request); // run the step again
            return;
        }
        if let Some((throttle, key, phase)) = current.throttle_phase.take() {
            let progress = self.throttles.resume(self.now, throttle, key, phase);
            if let Some(Next::Continue) = self.throttle_progress(request.slot, progress) {
                let next = self.current_ref(request.slot);
                self.runnable.push_back(next);
            }
            return;
        }
        let current = self.request_mut(request.slot);
        let step = &scenario.flows[current.flow.index()].steps[current.step as usize];
        debug_assert!(
            matches!(step.action, StepAction::Work { .. }),
            "only work steps and retries set request timers"
        );
        self.settle(request, StepResult::Ok);
    }

    /// Sends `op` for the request in `slot` on `connection`, through its reconnect slot if it
    /// is one. Returns the result at once when there is one; `None` when the request waits
    /// (for the reply, or for a slot's connection attempt).
    fn issue_command(
        &mut self,
        slot: u32,
        connection: ConnectionId,
        op: Op,
        replay_writes: bool,
    ) -> Option<StepResult> {
        let (now, waiter) = (self.now, self.current_ref(slot));
        if !self.reconnect_slots.is_slot(connection) {
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
            SlotAcquire::Parked => return None,
            SlotAcquire::Unavailable => return Some(StepResult::Error(Outcome::Refused)),
        };
        let (lease, origin) = if replay_writes && !op.command.is_read_only() {
            let origin = match self.request_mut(slot).origin {
                Some(origin) => origin,
                None => self.redis.open_origin(connection),
            };
            (lease.with_replay_writes(), Some(origin))
        } else {
            (lease, None)
        };
        let request = self.request_mut(slot);
        request.lease = Some((connection, lease));
        request.origin = origin;
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
        let woken = self.reconnect_slots.on_link_event(self.now, owner, event);
        for request in woken {
            if self.is_live(request) {
                self.request_mut(request.slot).resume_action = true;
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
            StepResult::Error(Outcome::ServerError) => Failure::Server,
            _ => return false,
        };
        let (now, scenario) = (self.now, self.scenario);
        let effect = self
            .reconnect_slots
            .on_failure(now, connection, &lease, failure);
        if effect == FailureEffect::Evicted {
            self.redis.retire_link(link_of(&lease));
        }
        let request = self.request_mut(slot);
        let step = &scenario.flows[request.flow.index()].steps[request.step as usize];
        let command = match step.action {
            StepAction::Redis { command, .. } => command,
            _ => RedisCommand::Incr, // a rate limiter's check-and-charge script writes
        };
        if request.replayed || !should_replay(&[command.replay_kind()], failure, &lease) {
            return false;
        }
        request.replayed = true;
        request.resume_action = true;
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
        if let Next::Continue = self.end_step(request.slot, result) {
            let next = self.current_ref(request.slot);
            self.runnable.push_back(next);
        }
    }

    /// Ends the current step of the request in `slot`: returns its permit, reports to its
    /// breaker, and applies the step's routing.
    fn end_step(&mut self, slot: u32, result: StepResult) -> Next {
        let (now, scenario) = (self.now, self.scenario);
        let waited_as = self.current_ref(slot);
        self.slots[slot as usize].token = self.slots[slot as usize].token.wrapping_add(1);
        let request = self.request_mut(slot);
        request.lease = None;
        request.replayed = false;
        if let Some(origin) = request.origin.take() {
            self.redis.close_origin(origin); // no further copy of this write will be sent
        }
        let request = self.request_mut(slot);
        let (permit, ticket) = (request.permit.take(), request.ticket.take());
        if let Some((semaphore, permit)) = request.semaphore_permit.take() {
            self.semaphores[semaphore.index()].semaphore.release(permit);
        }
        let request = self.request_mut(slot);
        let step_action = scenario.flows[request.flow.index()].steps[request.step as usize].action;
        if let Some((bulkhead, permit)) = permit {
            let query_still_running = matches!(step_action, StepAction::Database { .. })
                && result == StepResult::Error(Outcome::Timeout);
            if query_still_running {
                // A bulkhead on a database step stands for its connection pool: a query whose
                // caller gave up still holds its connection until the database finishes it.
                self.held_by_queries
                    .insert((waited_as.slot, waited_as.token), (bulkhead, permit));
            } else {
                self.release(bulkhead, permit);
            }
        }
        if let Some((breaker, ticket)) = ticket {
            let entry = &mut self.breakers[breaker.index()];
            let outcome = match result {
                StepResult::Ok | StepResult::Hit | StepResult::Miss => CallOutcome::Success,
                StepResult::Error(kind) if entry.counts.contains(kind) => CallOutcome::Failure,
                StepResult::Error(_) => CallOutcome::Ignored,
            };
            entry.breaker.on_result(now, ticket, outcome);
            entry.drain_transitions();
        }
        let result = match step_action {
            StepAction::RateLimit { limiter, .. } => self.rate_limit_decision(limiter, result),
            _ => result,
        };
        let step = &scenario.flows[self.request_mut(slot).flow.index()].steps
            [self.request_mut(slot).step as usize];
        // A Retry-After belongs to the step that was refused, retried or not.
        let retry_after = self.request_mut(slot).retry_after.take();
        if let Some(retry) = step.retry
            && let Some(mut state) = self.request_mut(slot).retry.take()
        {
            let entry = &mut self.retries[retry.index()];
            if let StepResult::Error(kind) = result
                && entry.retry_on.contains(kind)
            {
                let decision =
                    entry
                        .policy
                        .on_failure(now, &mut state, retry_after, &mut entry.random);
                if let RetryDecision::Retry { at } = decision {
                    let request = self.request_mut(slot);
                    request.retry = Some(state);
                    request.retry_waiting = true;
                    let waiter = self.current_ref(slot);
                    self.events.schedule(at, Event::RequestTimer(waiter));
                    return Next::Stop;
                }
            }
        }
        let request = self.request_mut(slot);
        if request.background {
            let outcome = match result {
                StepResult::Error(kind) => kind,
                StepResult::Ok | StepResult::Hit | StepResult::Miss => Outcome::Ok,
            };
            let flow = request.flow.index();
            self.metrics.record_background_end(flow, outcome);
            self.free(slot);
            return Next::Stop;
        }
        let step = &scenario.flows[request.flow.index()].steps[request.step as usize];
        if let (StepResult::Error(kind), OnError::Next, StepAction::Redis { connection, .. }) =
            (result, step.on_error, step.action)
            && !matches!(kind, Outcome::LockBusy | Outcome::RateLimited)
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
        let request = self.request_mut(slot);
        match (result, step.on_hit) {
            (StepResult::Hit, OnHit::Finish) => {
                self.end_request(slot, Outcome::Ok);
                return Next::Stop;
            }
            (StepResult::Hit, OnHit::Goto(target)) => {
                // A jump over a `finally` step does not skip it: it runs in the background.
                let (flow, from) = (request.flow, usize::from(request.step));
                self.run_skipped_finally(slot, flow, from + 1..usize::from(target));
                self.request_mut(slot).step = target;
                return Next::Continue;
            }
            (StepResult::Error(kind), _) if step.on_error == OnError::Fail => {
                self.end_request(slot, kind);
                return Next::Stop;
            }
            _ => {}
        }
        request.step += 1;
        Next::Continue
    }

    /// What a rate-limit step's result means once the limiter has had its say: `store` is what
    /// the store's round trip returned (`Ok` for a local limiter).
    fn rate_limit_decision(&mut self, limiter: RateLimitId, store: StepResult) -> StepResult {
        let (now, slot) = (self.now, &mut self.rate_limits[limiter.index()]);
        if !slot.enabled {
            return StepResult::Ok;
        }
        let decision = match store {
            StepResult::Ok | StepResult::Hit | StepResult::Miss => slot.limiter.try_acquire(now, 1),
            StepResult::Error(_) => slot.limiter.on_store_unreachable(1),
        };
        if let (StepResult::Error(_), RateDecision::Admit) = (store, decision) {
            self.metrics.count(slot.fail_open_counter);
        }
        match decision {
            RateDecision::Admit => StepResult::Ok,
            RateDecision::Reject { .. } | RateDecision::TooLarge => {
                StepResult::Error(Outcome::RateLimited)
            }
        }
    }

    fn release(&mut self, bulkhead: BulkheadId, permit: Permit) {
        let entry = &mut self.bulkheads[bulkhead.index()];
        if let Some(grant) = entry.bulkhead.release(permit) {
            let waiter = RequestRef::from_waiter(grant.waiter);
            if self.is_live(waiter) {
                self.request_mut(waiter.slot).permit = Some((bulkhead, grant.permit));
                self.runnable.push_back(waiter);
            } else {
                // Waiters never leave the queue early today; if one did, pass the permit on.
                self.release(bulkhead, grant.permit);
            }
        }
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
        let (now, scenario) = (self.now, self.scenario);
        let request = self.request_mut(slot);
        debug_assert!(!request.background);
        // The request ends at this step (failed, or finished early by a hit): the `finally`
        // steps after it still run, in the background.
        let (flow, ended_at) = (request.flow, usize::from(request.step));
        self.run_skipped_finally(
            slot,
            flow,
            ended_at + 1..scenario.flows[flow.index()].steps.len(),
        );
        let request = self.request_mut(slot);
        let (flow, latency) = (request.flow, now.saturating_since(request.started));
        self.metrics
            .record_end(flow.index(), outcome, latency.as_nanos());
        self.in_flight -= 1;
        self.free(slot);
    }

    fn free(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        let mut request = entry.request.take().expect("freeing a live request");
        for held in request.throttle_held.drain(..) {
            self.throttles.leak(self.now, held); // ended without releasing its slot
        }
        let entry = &mut self.slots[slot as usize];
        debug_assert!(
            request.permit.is_none()
                && request.semaphore_permit.is_none()
                && request.ticket.is_none()
        );
        entry.token = entry.token.wrapping_add(1);
        self.free_slots.push(slot);
    }

    fn summary(&self) -> Summary {
        let scenario = self.scenario;
        let flows = scenario.flows.len();
        let (mut unfinished, mut background_unfinished) = (vec![0u64; flows], vec![0u64; flows]);
        for request in self.slots.iter().filter_map(|slot| slot.request.as_ref()) {
            if request.background {
                background_unfinished[request.flow.index()] += 1;
            } else {
                unfinished[request.flow.index()] += 1;
            }
        }
        Summary {
            requests: self.metrics.requests(),
            outcomes: self.metrics.outcome_counts(),
            unfinished: self.in_flight,
            latency_ms: self.metrics.latency_stats(),
            flows: scenario
                .flows
                .iter()
                .enumerate()
                .map(|(index, flow)| {
                    let summary = self.metrics.flow_summary(
                        index,
                        unfinished[index],
                        background_unfinished[index],
                    );
                    (flow.name.clone(), summary)
                })
                .collect(),
            databases: scenario
                .databases
                .iter()
                .enumerate()
                .map(|(index, db)| {
                    let mut summary = self.databases.summary(DatabaseId(index as u32));
                    summary.lock_wait_ms = self.metrics.lock_wait_stats(index);
                    (db.name.clone(), summary)
                })
                .collect(),
            bulkheads: scenario
                .bulkheads
                .iter()
                .zip(&self.bulkheads)
                .map(|(spec, slot)| {
                    let summary = BulkheadSummary {
                        enabled: slot.enabled,
                        peak_in_use: slot.peak_in_use,
                        peak_queued: slot.peak_queued,
                        shed: slot.shed,
                    };
                    (spec.name.clone(), summary)
                })
                .collect(),
            semaphores: scenario
                .semaphores
                .iter()
                .zip(&self.semaphores)
                .map(|(spec, slot)| {
                    let counters = slot.semaphore.counters();
                    let summary = SemaphoreSummary {
                        enabled: slot.enabled,
                        acquired: counters.acquired,
                        peak_in_flight: u64::from(counters.in_flight_peak),
                        peak_bytes: counters.bytes_in_flight_peak,
                        rejected: counters.rejected_total(),
                    };
                    (spec.name.clone(), summary)
                })
                .collect(),
            retries: scenario
                .retries
                .iter()
                .zip(&self.retries)
                .map(|(spec, slot)| {
                    let counters = slot.policy.counters();
                    let summary = RetrySummary {
                        enabled: slot.enabled,
                        requests: counters.requests,
                        retries: counters.retries_granted,
                        gave_up_attempts: counters.attempts_exhausted,
                        gave_up_budget: counters.budget_exhausted,
                    };
                    (spec.name.clone(), summary)
                })
                .collect(),
            caches: scenario
                .caches
                .iter()
                .zip(&self.caches)
                .map(|(spec, slot)| {
                    let counters = slot.cache.counters();
                    let summary = CacheSummary {
                        hits: counters.hits,
                        misses: counters.misses,
                        expirations: counters.expirations,
                        evictions: counters.evictions,
                        invalidations: counters.invalidations,
                        flushes: counters.flushes,
                    };
                    (spec.name.clone(), summary)
                })
                .collect(),
            rate_limits: scenario
                .rate_limits
                .iter()
                .zip(&self.rate_limits)
                .map(|(spec, slot)| {
                    let counters = slot.limiter.counters();
                    let summary = RateLimitSummary {
                        enabled: slot.enabled,
                        admitted: counters.admitted,
                        rejected: counters.rejected + counters.too_large,
                        fail_open_admitted: counters.fail_open_admitted,
                        fail_closed_rejected: counters.fail_closed_rejected,
                    };
                    (spec.name.clone(), summary)
                })
                .collect(),
            throttles: scenario
                .throttles
                .iter()
                .enumerate()
                .map(|(index, spec)| {
                    let summary = self.throttles.summary(ThrottleId(index as u32));
                    (spec.name.clone(), summary)
                })
                .collect(),
            breakers: scenario
                .breakers
                .iter()
                .zip(&self.breakers)
                .map(|(spec, slot)| {
                    let state = match slot.breaker.state_at(self.now) {
                        BreakerState::Closed => "closed",
                        BreakerState::Open => "open",
                        BreakerState::HalfOpen => "half_open",
                    };
                    let summary = BreakerSummary {
                        enabled: slot.enabled,
                        opened: slot.breaker.opened_total(),
                        half_opened: slot.half_opened,
                        closed: slot.closed,
                        rejected: slot.rejected,
                        final_state: state.to_owned(),
                    };
                    (spec.name.clone(), summary)
                })
                .collect(),
            connections: scenario
                .connections
                .iter()
                .enumerate()
                .map(|(index, c)| {
                    let id = ConnectionId(index as u32);
                    let mut summary = self.redis.connection_summary(id);
                    summary.fail_open = self.fail_open[index].0;
                    if let Some(slot) = self.reconnect_slots.summary(id) {
                        summary.slot = slot;
                    }
                    (c.name.clone(), summary)
                })
                .collect(),
        }
    }

    fn report(mut self, verdict: Verdict) -> VariantReport {
        let summary = self.summary();
        let end = self.now;
        let series = self.metrics.finish_series(end);
        let scenario = self.scenario;
        let ms = |t: SimTime| t.as_nanos() as f64 / 1e6;
        let faults = scenario
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
        }
    }
}

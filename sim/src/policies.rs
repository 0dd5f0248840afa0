//! Policy layers: the policies a step's request passes through, in the order the step lists
//! them (outermost first), like tower's layers.
//!
//! Every policy is driven through one small interface, [`Layer`]: a request *enters* it (and
//! passes holding something, is queued, or is refused with an outcome), and later *exits* it
//! with the step's result (the layer is left, or a retry asks to run the inner layers again
//! after a delay, or the layer is kept until work that outlives the step ends). The engine
//! iterates a step's list and knows no policy by name; what differs between policies lives in
//! their `impl Layer` below, and the decisions themselves in `outagelab-model`.
//!
//! Order is a real choice: with a breaker outside a bulkhead, a request the bulkhead sheds is
//! reported to the breaker (and counts as a failure when the breaker counts `shed`); with the
//! breaker inside, the breaker never hears of it. A retry outside a bulkhead gives its permit
//! back while it waits out the backoff; inside, it keeps the permit.
//!
//! Adding a policy: its state machine in `outagelab-model`; its spec, id and [`PolicyRef`]
//! variant in `scenario.rs`; here a slot type with an `impl Layer`, its construction in
//! [`Policies::new`], one entry in the list of `on_layer!`, and its section of the summary in
//! [`Policies::summarize`]; its report type in `outagelab-report`.

use outagelab_model::adaptive_limit::{
    Acquire as AdaptiveAcquire, AdaptiveLimit, CallEnd, Permit as AdaptivePermit,
};
use outagelab_model::breaker::{Admit, Breaker, BreakerState, Ticket, Transition};
use outagelab_model::bulkhead::{Acquire, Bulkhead, Permit};
use outagelab_model::retry::{RetryDecision, RetryPolicy, RetryState};
use outagelab_model::semaphore::{Permit as SemaphorePermit, Semaphore};
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{GaugeKey, LogEntry, Outcome, Summary};

use crate::journal::{self, Journal};
use crate::kernel::{RequestRef, StepResult};
use crate::metrics::{GaugeId, Metrics};
use crate::rng::Stream;
use crate::rules::{self, BreakerTally, BulkheadTally};
use crate::scenario::{BreakerClassifier, OutcomeSet, PolicyRef, Scenario};
use crate::summaries;

/// What a request holds for a layer it passed, until it exits it.
#[derive(Debug)]
pub(crate) enum Hold {
    /// Passed a disabled policy: nothing to give back.
    Open,
    Bulkhead(Permit),
    Semaphore(SemaphorePermit),
    Breaker(Ticket),
    /// The request's retry state, kept by the retry layer ([`RetrySlot`]) at this index.
    Retry(u32),
    AdaptiveLimit(AdaptivePermit),
}

/// Who asks to enter a layer.
pub(crate) struct Entrant {
    /// Where to hand a permit that frees up later (a queued bulkhead waiter).
    pub waiter: RequestRef,
    /// Bytes the step sends (a Redis command's request), for byte caps.
    pub bytes: u64,
}

/// A layer's answer to a request that enters it.
#[derive(Debug)]
pub(crate) enum Enter {
    Pass(Hold),
    /// Queued: the layer hands the request its hold later, through a [`Handover`].
    Queued,
    /// Refused: the step ends with this error, reported to the layers outside this one.
    Refused(Outcome),
}

/// How the step ended, as the layers see it on the way out.
pub(crate) struct Leaving {
    /// What the step returns: what a retry reacts to.
    pub result: StepResult,
    /// What the step's I/O returned: what a breaker judges the called service by. It differs
    /// from `result` on a rate-limit step, whose result is the limiter's decision on what its
    /// store answered (a 429 is not a failure of Redis; a fail-open admission hides one).
    pub io_result: StepResult,
    /// A wait the refusing server asked for (HTTP Retry-After), for retry policies.
    pub retry_after: Option<SimDuration>,
    /// The step's work goes on after the step ended: a database query whose caller timed
    /// out still holds its connection until the database finishes it.
    pub work_still_running: bool,
}

/// A queued request that now passes a layer, holding `hold`.
#[derive(Debug)]
pub(crate) struct Handover {
    pub waiter: RequestRef,
    pub hold: Hold,
}

/// A layer's answer to a request that exits it.
#[derive(Debug)]
pub(crate) enum Exit {
    /// Left; a queued request may pass in its place.
    Left(Option<Handover>),
    /// Run the layers inside this one (and the action) again at `at`; the request keeps
    /// `hold` for this layer meanwhile.
    Again { at: SimTime, hold: Hold },
    /// Still held until the step's work ends ([`Layer::release_kept`]).
    Kept(Hold),
}

/// One policy as the engine drives it.
///
/// Call order per request and layer: `enter`; then, if it passed (or was handed over after a
/// queue), exactly one `exit` with what it was given, or `Again` and later another `exit`.
pub(crate) trait Layer {
    fn enter(&mut self, now: SimTime, entrant: &Entrant) -> Enter;
    fn exit(&mut self, now: SimTime, hold: Hold, leaving: &Leaving) -> Exit;
    /// The attempt inside this layer was dropped before its step ended: gives back `hold`,
    /// counting nothing the attempt did not see (what a dropped attempt is: `rules`' module
    /// documentation). The engine runs every step to its end and never calls this; a
    /// [`crate::StepLayers`] does, for an attempt the live runner drops.
    fn cancel(&mut self, now: SimTime, hold: Hold);
    /// Gives back a hold kept past its step ([`Exit::Kept`]).
    fn release_kept(&mut self, hold: Hold) -> Option<Handover> {
        let _ = hold;
        None
    }
    /// The most requests that may be inside the layer at once, when it bounds them: what the
    /// limit monitor checks the engine's own count against when a request enters.
    fn ceiling(&self) -> Option<u64> {
        None
    }
    /// Sets this layer's gauges for the instant `now`.
    fn observe(&mut self, now: SimTime, metrics: &mut Metrics);
}

pub(crate) struct BreakerSlot {
    breaker: Breaker,
    enabled: bool,
    classifier: BreakerClassifier,
    /// Its rejections and transitions (openings are counted by the breaker).
    tally: BreakerTally,
    /// 0 closed, 1 half-open, 2 open: the series shows the worst state in each bucket.
    state_gauge: GaugeId,
    /// Until when the gauge holds the breaker's state ([`Breaker::state_holds_until`]), unless
    /// a call moves it (`gauge_stale`): before then, observing it again changes nothing.
    gauge_holds_until: SimTime,
    /// A call may have moved the state or the instant it next moves by itself: a transition
    /// was taken, or the call was made half-open (a first probe starts `half_open_max_wait`).
    gauge_stale: bool,
    /// Every transition, for the run's log.
    log: Journal<Transition>,
}

impl BreakerSlot {
    /// Sets the state gauge for the instant `now`, unless it already holds the state: no call
    /// moved the breaker since it was set and the state cannot have moved with time alone yet.
    fn observe_state(&mut self, now: SimTime, metrics: &mut Metrics) {
        if !self.gauge_stale && now < self.gauge_holds_until {
            return;
        }
        self.gauge_stale = false;
        let level = rules::breaker_level(self.breaker.state_at(now));
        metrics.set_gauge(self.state_gauge, level);
        self.gauge_holds_until = self.breaker.state_holds_until(now);
    }

    /// Takes the breaker's transitions as they happen, counts and logs them.
    /// Called after every call to the breaker.
    fn drain_transitions(&mut self) {
        if self.breaker.state() == BreakerState::HalfOpen {
            self.gauge_stale = true;
        }
        while let Some(transition) = self.breaker.poll_transition() {
            self.log.record(transition.at, transition);
            self.tally.transition(&transition);
            self.gauge_stale = true;
        }
    }
}

impl Layer for BreakerSlot {
    fn enter(&mut self, now: SimTime, _: &Entrant) -> Enter {
        if !self.enabled {
            return Enter::Pass(Hold::Open);
        }
        let admit = self.breaker.try_admit(now);
        self.drain_transitions();
        match admit {
            Admit::Yes(ticket) => Enter::Pass(Hold::Breaker(ticket)),
            Admit::No(_) => {
                self.tally.rejected += 1;
                Enter::Refused(Outcome::BreakerOpen)
            }
        }
    }

    fn exit(&mut self, now: SimTime, hold: Hold, leaving: &Leaving) -> Exit {
        let Hold::Breaker(ticket) = hold else {
            return Exit::Left(None);
        };
        let outcome = rules::breaker_outcome(self.classifier, leaving.io_result);
        self.breaker.on_result(now, ticket, outcome);
        self.drain_transitions();
        Exit::Left(None)
    }

    fn cancel(&mut self, now: SimTime, hold: Hold) {
        if let Hold::Breaker(ticket) = hold {
            self.breaker.on_cancelled(now, ticket);
            self.drain_transitions();
        }
    }

    fn observe(&mut self, now: SimTime, metrics: &mut Metrics) {
        self.gauge_stale = true;
        self.observe_state(now, metrics);
    }
}

pub(crate) struct BulkheadSlot {
    bulkhead: Bulkhead,
    enabled: bool,
    tally: BulkheadTally,
    in_use_gauge: GaugeId,
    queued_gauge: GaugeId,
    /// Test-only sabotage: admit one request more than the limit.
    admits_one_too_many: bool,
    /// Requests let in past the limit by the sabotage, still inside.
    smuggled: u32,
}

impl Layer for BulkheadSlot {
    fn enter(&mut self, _: SimTime, entrant: &Entrant) -> Enter {
        if !self.enabled {
            return Enter::Pass(Hold::Open);
        }
        if self.admits_one_too_many
            && self.smuggled == 0
            && self.bulkhead.in_use() == self.bulkhead.config().max_concurrent()
        {
            self.smuggled += 1;
            return Enter::Pass(Hold::Open);
        }
        match self.bulkhead.try_acquire(entrant.waiter.to_waiter()) {
            Acquire::Granted(permit) => {
                let (in_use, queued) = (self.bulkhead.in_use(), self.bulkhead.queued());
                self.tally.occupancy(in_use, queued);
                Enter::Pass(Hold::Bulkhead(permit))
            }
            Acquire::Queued => {
                let (in_use, queued) = (self.bulkhead.in_use(), self.bulkhead.queued());
                self.tally.occupancy(in_use, queued);
                Enter::Queued
            }
            Acquire::Shed => {
                self.tally.shed += 1;
                Enter::Refused(Outcome::Shed)
            }
        }
    }

    fn exit(&mut self, _: SimTime, hold: Hold, leaving: &Leaving) -> Exit {
        if leaving.work_still_running && self.enabled {
            // A bulkhead in front of a database stands for its connection pool: a query
            // whose caller gave up holds its connection until the database finishes it.
            return Exit::Kept(hold);
        }
        Exit::Left(self.release_kept(hold))
    }

    fn cancel(&mut self, _: SimTime, hold: Hold) {
        let handover = self.release_kept(hold);
        assert!(
            handover.is_none(),
            "a dropped attempt's permit goes to no waiter here"
        );
    }

    fn release_kept(&mut self, hold: Hold) -> Option<Handover> {
        let Hold::Bulkhead(permit) = hold else {
            if self.smuggled > 0 && matches!(hold, Hold::Open) && self.enabled {
                self.smuggled -= 1;
            }
            return None;
        };
        let grant = self.bulkhead.release(permit)?;
        Some(Handover {
            waiter: RequestRef::from_waiter(grant.waiter),
            hold: Hold::Bulkhead(grant.permit),
        })
    }

    fn ceiling(&self) -> Option<u64> {
        self.enabled
            .then(|| u64::from(self.bulkhead.config().max_concurrent()))
    }

    fn observe(&mut self, _: SimTime, metrics: &mut Metrics) {
        metrics.set_gauge(self.in_use_gauge, u64::from(self.bulkhead.in_use()));
        metrics.set_gauge(self.queued_gauge, u64::from(self.bulkhead.queued()));
    }
}

pub(crate) struct SemaphoreSlot {
    semaphore: Semaphore,
    enabled: bool,
    in_flight_gauge: GaugeId,
    bytes_gauge: GaugeId,
}

impl Layer for SemaphoreSlot {
    fn enter(&mut self, _: SimTime, entrant: &Entrant) -> Enter {
        if !self.enabled {
            return Enter::Pass(Hold::Open);
        }
        match self.semaphore.try_acquire(entrant.bytes) {
            Ok(permit) => Enter::Pass(Hold::Semaphore(permit)),
            Err(_) => Enter::Refused(Outcome::Shed),
        }
    }

    fn exit(&mut self, _: SimTime, hold: Hold, _: &Leaving) -> Exit {
        if let Hold::Semaphore(permit) = hold {
            self.semaphore.release(permit);
        }
        Exit::Left(None)
    }

    fn cancel(&mut self, _: SimTime, hold: Hold) {
        if let Hold::Semaphore(permit) = hold {
            self.semaphore.release(permit);
        }
    }

    fn ceiling(&self) -> Option<u64> {
        self.semaphore
            .config()
            .max_in_flight()
            .filter(|_| self.enabled)
            .map(u64::from)
    }

    fn observe(&mut self, _: SimTime, metrics: &mut Metrics) {
        let in_flight = self.semaphore.in_flight();
        metrics.set_gauge(self.in_flight_gauge, u64::from(in_flight));
        metrics.set_gauge(self.bytes_gauge, self.semaphore.bytes_in_flight());
    }
}

pub(crate) struct RetrySlot {
    policy: RetryPolicy,
    enabled: bool,
    retry_on: OutcomeSet,
    /// Draws the backoff's jitter.
    random: Stream,
    /// The retry state of each request inside the layer, at the index its hold carries (a
    /// state is as large as its backoff's config: kept here, a hold stays small). Invariant:
    /// an index is in `free` exactly when no hold carries it.
    states: Vec<RetryState>,
    free: Vec<u32>,
}

impl RetrySlot {
    /// Keeps `state` for a request entering the layer: the index its hold carries.
    fn keep(&mut self, state: RetryState) -> u32 {
        match self.free.pop() {
            Some(index) => {
                self.states[index as usize] = state;
                index
            }
            None => {
                self.states.push(state);
                u32::try_from(self.states.len() - 1).expect("under 2^32 requests inside")
            }
        }
    }

    /// Bytes its kept states take (they grow with the requests inside the layer at once).
    fn memory_bytes(&self) -> u64 {
        (self.states.capacity() * std::mem::size_of::<RetryState>() + self.free.capacity() * 4)
            as u64
    }
}

impl Layer for RetrySlot {
    fn enter(&mut self, now: SimTime, _: &Entrant) -> Enter {
        if !self.enabled {
            return Enter::Pass(Hold::Open);
        }
        let state = self.policy.on_request(now);
        Enter::Pass(Hold::Retry(self.keep(state)))
    }

    fn exit(&mut self, now: SimTime, hold: Hold, leaving: &Leaving) -> Exit {
        let Hold::Retry(index) = hold else {
            return Exit::Left(None);
        };
        if rules::retries(self.retry_on, leaving.result) {
            let state = &mut self.states[index as usize];
            let decision =
                self.policy
                    .on_failure(now, state, leaving.retry_after, &mut self.random);
            if let RetryDecision::Retry { at } = decision {
                return Exit::Again {
                    at,
                    hold: Hold::Retry(index),
                };
            }
        }
        self.free.push(index);
        Exit::Left(None)
    }

    /// A dropped attempt ends its request's step: no more attempts, nothing charged.
    fn cancel(&mut self, _: SimTime, hold: Hold) {
        if let Hold::Retry(index) = hold {
            self.free.push(index);
        }
    }

    fn observe(&mut self, _: SimTime, _: &mut Metrics) {}
}

pub(crate) struct AdaptiveLimitSlot {
    limit: AdaptiveLimit,
    enabled: bool,
    drops: OutcomeSet,
    limit_gauge: GaugeId,
    in_flight_gauge: GaugeId,
}

impl Layer for AdaptiveLimitSlot {
    fn enter(&mut self, now: SimTime, _: &Entrant) -> Enter {
        if !self.enabled {
            return Enter::Pass(Hold::Open);
        }
        match self.limit.try_acquire(now) {
            AdaptiveAcquire::Granted(permit) => Enter::Pass(Hold::AdaptiveLimit(permit)),
            AdaptiveAcquire::Rejected => Enter::Refused(Outcome::Shed),
        }
    }

    fn exit(&mut self, now: SimTime, hold: Hold, leaving: &Leaving) -> Exit {
        let Hold::AdaptiveLimit(permit) = hold else {
            return Exit::Left(None);
        };
        // The latency of the call it admitted, from admission to the step's end.
        let rtt = now.saturating_since(permit.acquired_at());
        let sample = rules::adaptive_limit_end(self.drops, leaving.io_result).sample(rtt);
        self.limit.release(now, permit, sample);
        Exit::Left(None)
    }

    fn cancel(&mut self, now: SimTime, hold: Hold) {
        if let Hold::AdaptiveLimit(permit) = hold {
            let rtt = now.saturating_since(permit.acquired_at());
            self.limit
                .release(now, permit, CallEnd::DROPPED.sample(rtt));
        }
    }

    /// The limit of the moment: checked when a request enters, which is when the model
    /// admits only below it. (The limit may later fall below the calls in flight; a call in
    /// flight is not revoked.)
    fn ceiling(&self) -> Option<u64> {
        self.enabled.then(|| u64::from(self.limit.limit()))
    }

    fn observe(&mut self, _: SimTime, metrics: &mut Metrics) {
        metrics.set_gauge(self.limit_gauge, u64::from(self.limit.limit()));
        metrics.set_gauge(self.in_flight_gauge, u64::from(self.limit.in_flight()));
    }
}

/// Every policy instance of a run, by kind, addressed by [`PolicyRef`].
/// Runs `$call` with `$layer` bound to the slot `$policy` names, with its own type: the one
/// place that maps a [`PolicyRef`] to its slot (a new policy adds its arm here).
macro_rules! on_layer {
    ($policies:expr, $policy:expr, $layer:ident => $call:expr) => {
        on_layer!(@arms $policies, $policy, $layer => $call;
            Breaker breakers, Bulkhead bulkheads, Semaphore semaphores, Retry retries,
            AdaptiveLimit adaptive_limits)
    };
    (@arms $policies:expr, $policy:expr, $layer:ident => $call:expr;
        $($variant:ident $slots:ident),*) => {
        match $policy {
            $(PolicyRef::$variant(id) => {
                let $layer = &mut $policies.$slots[id.index()];
                $call
            })*
        }
    };
}

pub(crate) struct Policies {
    breakers: Vec<BreakerSlot>,
    bulkheads: Vec<BulkheadSlot>,
    semaphores: Vec<SemaphoreSlot>,
    retries: Vec<RetrySlot>,
    adaptive_limits: Vec<AdaptiveLimitSlot>,
    /// A layer was called through `Policies` (`layer`, `enter`, `exit`) since the last
    /// [`Policies::observe`]: its state may have changed.
    touched: bool,
    /// The least of the breakers' `gauge_holds_until` at the last [`Policies::observe`]: until
    /// then, and while no call touches a layer, no gauge here can move.
    breakers_hold_until: SimTime,
}

/// Bugs a test may plant in the policies, to show that the monitors catch them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PlantedBugs {
    pub bulkhead_admits_one_too_many: bool,
}

impl Policies {
    pub fn new(scenario: &Scenario, metrics: &mut Metrics, bugs: PlantedBugs) -> Policies {
        let gauge = |metrics: &mut Metrics, key: fn(String) -> GaugeKey, name: &str| {
            metrics.add_gauge(key(name.to_owned()))
        };
        let bulkheads = scenario
            .bulkheads
            .iter()
            .map(|spec| BulkheadSlot {
                bulkhead: Bulkhead::new(spec.config),
                enabled: spec.enabled,
                tally: BulkheadTally::default(),
                in_use_gauge: gauge(metrics, GaugeKey::BulkheadInUse, &spec.name),
                queued_gauge: gauge(metrics, GaugeKey::BulkheadQueued, &spec.name),
                admits_one_too_many: bugs.bulkhead_admits_one_too_many,
                smuggled: 0,
            })
            .collect();
        let semaphores = scenario
            .semaphores
            .iter()
            .map(|spec| SemaphoreSlot {
                semaphore: Semaphore::new(spec.config),
                enabled: spec.enabled,
                in_flight_gauge: gauge(metrics, GaugeKey::SemaphoreInFlight, &spec.name),
                bytes_gauge: gauge(metrics, GaugeKey::SemaphoreBytes, &spec.name),
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
                states: Vec::new(),
                free: Vec::new(),
            })
            .collect();
        let breakers = scenario
            .breakers
            .iter()
            .map(|spec| BreakerSlot {
                breaker: Breaker::new(spec.config),
                enabled: spec.enabled,
                classifier: spec.classifier(),
                tally: BreakerTally::default(),
                state_gauge: gauge(metrics, GaugeKey::BreakerState, &spec.name),
                gauge_holds_until: SimTime::ZERO,
                gauge_stale: true,
                log: Journal::default(),
            })
            .collect();
        let adaptive_limits = scenario
            .adaptive_limits
            .iter()
            .map(|spec| AdaptiveLimitSlot {
                limit: AdaptiveLimit::new(spec.config),
                enabled: spec.enabled,
                drops: spec.drops,
                limit_gauge: gauge(metrics, GaugeKey::AdaptiveLimit, &spec.name),
                in_flight_gauge: gauge(metrics, GaugeKey::AdaptiveLimitInFlight, &spec.name),
            })
            .collect();
        Policies {
            breakers,
            bulkheads,
            semaphores,
            retries,
            adaptive_limits,
            touched: true,
            breakers_hold_until: SimTime::ZERO,
        }
    }

    /// The layer a step names.
    pub fn layer(&mut self, policy: PolicyRef) -> &mut dyn Layer {
        self.touched = true;
        on_layer!(self, policy, layer => layer as &mut dyn Layer)
    }

    /// [`Layer::enter`] of the layer `policy` names, called without `dyn` (every request
    /// enters and exits its layers: this is the engine's hot path).
    pub fn enter(&mut self, policy: PolicyRef, now: SimTime, entrant: &Entrant) -> Enter {
        self.touched = true;
        on_layer!(self, policy, layer => layer.enter(now, entrant))
    }

    /// [`Layer::exit`] of the layer `policy` names, called without `dyn`.
    pub fn exit(&mut self, policy: PolicyRef, now: SimTime, hold: Hold, leaving: &Leaving) -> Exit {
        self.touched = true;
        on_layer!(self, policy, layer => layer.exit(now, hold, leaving))
    }

    /// [`Layer::cancel`] of the layer `policy` names.
    pub fn cancel(&mut self, policy: PolicyRef, now: SimTime, hold: Hold) {
        self.touched = true;
        on_layer!(self, policy, layer => layer.cancel(now, hold));
    }

    /// [`Layer::ceiling`] of the layer `policy` names, called without `dyn`.
    pub fn ceiling(&mut self, policy: PolicyRef) -> Option<u64> {
        on_layer!(self, policy, layer => layer.ceiling())
    }

    /// Bytes the layers keep per request inside them (the retry layers' states), which grow
    /// with the requests in flight.
    pub fn memory_bytes(&self) -> u64 {
        self.retries.iter().map(RetrySlot::memory_bytes).sum()
    }

    /// Every layer, for gauges. This runs after every event; in most of them no layer was
    /// called and no breaker's state moved with time, and it is one test.
    #[inline]
    pub fn observe(&mut self, now: SimTime, metrics: &mut Metrics) {
        if !self.touched && now < self.breakers_hold_until {
            return;
        }
        // One loop per kind (not a chain of `dyn Layer`), each call direct and inlined. A
        // breaker's state moves with time alone (open turns half-open) at instants it can
        // tell, so its gauge is set after a call or once such an instant is reached; the
        // other gauges move only in calls, which all go through `layer`, so they are set only
        // after one (setting a gauge to its value is a no-op).
        if !std::mem::replace(&mut self.touched, false) {
            // Only time moved: the breakers' gauges, and until when they all hold.
            let mut hold_until = SimTime::MAX;
            for layer in &mut self.breakers {
                layer.observe_state(now, metrics);
                hold_until = hold_until.min(layer.gauge_holds_until);
            }
            self.breakers_hold_until = hold_until;
            return;
        }
        for layer in &mut self.breakers {
            layer.observe_state(now, metrics);
        }
        // The next event without a call looks at the breakers again, and learns until when
        // (learning it here too cost the bench's build, where a layer is called in almost
        // every event, 14 to 17 instructions a request).
        self.breakers_hold_until = SimTime::ZERO;
        for layer in &mut self.semaphores {
            layer.observe(now, metrics);
        }
        for layer in &mut self.bulkheads {
            layer.observe(now, metrics);
        }
        for layer in &mut self.adaptive_limits {
            layer.observe(now, metrics);
        }
    }

    /// Writes every policy's section of the summary.
    /// Each breaker's transitions (in breaker order) for the run's log, and how many could
    /// not be kept.
    pub fn log(&self, scenario: &Scenario, entries: &mut Vec<LogEntry>) -> u64 {
        let mut dropped = 0;
        for (spec, slot) in scenario.breakers.iter().zip(&self.breakers) {
            let transitions = slot.log.entries();
            entries.extend(transitions.map(|(_, t)| journal::breaker_entry(&spec.name, t)));
            dropped += slot.log.dropped();
        }
        dropped
    }

    pub fn summarize(&self, scenario: &Scenario, now: SimTime, summary: &mut Summary) {
        summary.adaptive_limits = scenario
            .adaptive_limits
            .iter()
            .zip(&self.adaptive_limits)
            .map(|(spec, slot)| {
                let summary = summaries::adaptive_limit(slot.enabled, &slot.limit.counters());
                (spec.name.clone(), summary)
            })
            .collect();
        summary.bulkheads = scenario
            .bulkheads
            .iter()
            .zip(&self.bulkheads)
            .map(|(spec, slot)| {
                let summary = summaries::bulkhead(slot.enabled, &spec.config, &slot.tally);
                (spec.name.clone(), summary)
            })
            .collect();
        summary.semaphores = scenario
            .semaphores
            .iter()
            .zip(&self.semaphores)
            .map(|(spec, slot)| {
                let counters = slot.semaphore.counters();
                let summary = summaries::semaphore(slot.enabled, &spec.config, &counters);
                (spec.name.clone(), summary)
            })
            .collect();
        summary.retries = scenario
            .retries
            .iter()
            .zip(&self.retries)
            .map(|(spec, slot)| {
                let summary = summaries::retry(slot.enabled, &slot.policy.counters());
                (spec.name.clone(), summary)
            })
            .collect();
        summary.breakers = scenario
            .breakers
            .iter()
            .zip(&self.breakers)
            .map(|(spec, slot)| {
                let (opened, state) = (slot.breaker.opened_total(), slot.breaker.state_at(now));
                let summary = summaries::breaker(slot.enabled, &slot.tally, opened, state);
                (spec.name.clone(), summary)
            })
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outagelab_model::backoff::{BackoffConfig, Jitter};
    use outagelab_model::retry::RetryConfig;
    use outagelab_model::time::SimDuration;

    fn retry_layer(attempts: u32) -> RetrySlot {
        let ms = SimDuration::from_millis;
        let backoff = BackoffConfig::new(ms(10), 2000, ms(100), Jitter::None).unwrap();
        RetrySlot {
            policy: RetryPolicy::new(RetryConfig::new(attempts, backoff, None, None).unwrap()),
            enabled: true,
            retry_on: OutcomeSet::new([Outcome::Timeout]),
            random: Stream::derive(1, "retry", "test"),
            states: Vec::new(),
            free: Vec::new(),
        }
    }

    fn leaving(result: StepResult) -> Leaving {
        Leaving {
            result,
            io_result: result,
            retry_after: None,
            work_still_running: false,
        }
    }

    fn entrant() -> Entrant {
        Entrant {
            waiter: RequestRef { slot: 0, token: 0 },
            bytes: 0,
        }
    }

    #[test]
    fn each_request_inside_a_retry_layer_keeps_its_own_attempts_and_a_freed_state_is_reused() {
        // Two requests inside at once, each with its own state: A fails twice and is out of
        // attempts at its third, while B, which entered between, still has its own two.
        let mut layer = retry_layer(3);
        let now = SimTime::ZERO;
        let timeout = leaving(StepResult::Error(Outcome::Timeout));
        let Enter::Pass(a) = layer.enter(now, &entrant()) else {
            panic!("enters")
        };
        let Enter::Pass(b) = layer.enter(now, &entrant()) else {
            panic!("enters")
        };
        assert!(matches!((&a, &b), (Hold::Retry(0), Hold::Retry(1))));
        let Exit::Again { hold: a, .. } = layer.exit(now, a, &timeout) else {
            panic!("retries")
        };
        let Exit::Again { hold: a, .. } = layer.exit(now, a, &timeout) else {
            panic!("retries")
        };
        assert!(
            matches!(layer.exit(now, a, &timeout), Exit::Left(None)),
            "3 attempts made"
        );
        let Exit::Again { hold: b, .. } = layer.exit(now, b, &timeout) else {
            panic!("B's own")
        };
        // A's state is free again: the next request gets it, fresh.
        let Enter::Pass(c) = layer.enter(now, &entrant()) else {
            panic!("enters")
        };
        assert!(matches!(c, Hold::Retry(0)));
        let Exit::Again { hold: c, .. } = layer.exit(now, c, &timeout) else {
            panic!("fresh")
        };
        assert!(matches!(
            layer.exit(now, b, &leaving(StepResult::Ok)),
            Exit::Left(None)
        ));
        layer.cancel(now, c);
        assert_eq!(
            layer.free.len(),
            2,
            "both states free once nobody is inside"
        );
    }
}

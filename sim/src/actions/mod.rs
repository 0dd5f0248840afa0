//! Step actions: what a step does once its request is inside the step's layers.
//!
//! Each of the eight actions of [`StepAction`] has its module here, and each says three
//! things: what the action starts (a Redis command, a query, a timer, a local decision), what
//! its request waits for meanwhile ([`Waiting`], for the waits that are the action's own), and
//! how what came back becomes the step's [`StepResult`]. This module is the one interface the
//! engine drives them through, and the only place that matches on the kind of an action:
//!
//! - [`start`] runs the action: it ends at once ([`Started::Ended`]) or its request waits
//!   ([`Started::Waits`], its stage set);
//! - [`on_timer`] takes a timer the action set (a work step's end, a throttle's KV round trip,
//!   a lock's retry wait);
//! - [`on_reply`] sees what a mechanism answered (a Redis reply, a query's end) before the step
//!   ends with it, and may keep the request waiting (a busy lock, tried again later);
//! - [`decide`] turns what the step's I/O returned into the step's result (a rate limiter's
//!   decision on what its store answered);
//! - the rest answer the engine's questions about a step (how big its request is, which key's
//!   value it holds, which connection a fail-open counts against, what is still running after
//!   a timeout).
//!
//! An action sees the engine only as a [`Host`] (`host.rs`): the clock, its own state, what
//! its request holds and waits for, its keys and values, a Redis command to send and a query
//! to start; it cannot reach the layers, monitors or loads. The engine's `Simulator` is the
//! one implementation, and the actions are generic over it, so each call is direct. An
//! action's own state (caches, rate limiters, lock clients, throttles, the work and call
//! steps' streams) lives in [`Actions`], and what a request holds of them in its
//! [`RequestHeld`]. Dispatch is a `match` on the step's action, with no allocation and no
//! dynamic call per step.

pub(crate) mod cache;
pub(crate) mod call;
pub(crate) mod db;
mod host;
pub(crate) mod lock;
pub(crate) mod rate_limit;
pub(crate) mod redis;
pub(crate) mod throttle;
pub(crate) mod work;

use std::collections::BTreeMap;

use outagelab_model::lock::Held as LockHeld;
use outagelab_model::time::SimTime;
use outagelab_report::{CacheSummary, LockSummary, Outcome, RateLimitSummary, ThrottleSummary};

use crate::kernel::StepResult;
use crate::metrics::Metrics;
use crate::redis::Redis;
use crate::rng::Stream;
use crate::scenario::{
    KeyFamilyId, LockOp, RedisCommand, Scenario, StepAction, StepSpec, ThrottleOp,
};
use crate::throttles::Held as ThrottleHeld;

pub(crate) use host::Host;

/// The state of every action that keeps some: one entry per cache, rate limiter, lock and
/// throttle of the scenario, and the streams of the work and call steps.
pub(crate) struct Actions {
    caches: Vec<cache::CacheSlot>,
    rate_limits: rate_limit::RateLimiters,
    throttles: throttle::ThrottleSlots,
    /// One client per lock, its tokens in the namespace of the lock's index.
    locks: Vec<lock::LockSlot>,
    /// Per flow, the draws of its `work` steps' durations (a constant draws nothing).
    work_rngs: Vec<Stream>,
    /// Per flow, the draws of its `call` steps' latencies and failures.
    call_rngs: Vec<Stream>,
    /// What a request waiting for a throttle's KV round trip ([`Waiting::ThrottleKv`]) goes on
    /// with, by its slot; and a lock acquire's state while it waits to try again
    /// ([`Waiting::LockRetry`]). Kept here, not in the request's stage, so that a stage holds
    /// nothing to drop and writing one is a store. An entry lives from the wait's start to its
    /// timer (the request's token does not move meanwhile, so the timer always finds it).
    kv_waits: BTreeMap<u32, throttle::KvWait>,
    lock_retries: BTreeMap<u32, outagelab_model::lock::Acquiring>,
}

impl Actions {
    /// Registers the actions' gauges and counters (throttles, then rate limiters, then caches).
    pub fn new(scenario: &Scenario, metrics: &mut Metrics) -> Actions {
        let throttles = throttle::ThrottleSlots::new(scenario, metrics);
        let rate_limits = rate_limit::slots(scenario, metrics);
        let caches = cache::slots(scenario, metrics);
        Actions {
            caches,
            rate_limits,
            throttles,
            locks: lock::slots(scenario),
            work_rngs: work::streams(scenario),
            call_rngs: call::streams(scenario),
            kv_waits: BTreeMap::new(),
            lock_retries: BTreeMap::new(),
        }
    }

    /// Sets the actions' gauges to their values now (caches' entries, then throttles'). A
    /// scenario without caches or throttles has no gauge here, and this is one test per event.
    #[inline]
    pub fn observe(&mut self, now: SimTime, metrics: &mut Metrics) {
        if self.caches.is_empty() && self.throttles.is_empty() {
            return;
        }
        cache::observe(&self.caches, metrics);
        self.throttles.observe(now, metrics);
    }

    /// A request ended holding `held`: what it holds is dropped (a throttle slot it did not
    /// release leaks), and `held` is left empty for the slot's next request.
    pub fn request_freed(&mut self, now: SimTime, held: &mut RequestHeld) {
        if held.throttles.is_empty() && held.locks.is_empty() && held.lock_pending.is_none() {
            return; // every request ends here; most hold nothing
        }
        for slot in held.throttles.drain(..) {
            self.throttles.throttles.leak(now, slot); // ended without releasing its slot
        }
        held.locks.clear();
        held.lock_pending = None;
    }

    /// A subscriber's message invalidates the key `(family, index)` in `cache`.
    pub fn invalidate(&mut self, cache: crate::scenario::CacheId, family: u32, index: u32) {
        cache::invalidate(&mut self.caches, cache, family, index);
    }

    /// Empties `cache` (a subscriber back after a loss that flushes on reconnect).
    pub fn flush(&mut self, cache: crate::scenario::CacheId) {
        cache::flush(&mut self.caches, cache);
    }

    pub fn cache_summaries(&self, scenario: &Scenario) -> BTreeMap<String, CacheSummary> {
        cache::summaries(&self.caches, scenario)
    }

    /// What the actions hold that grows with the run: the rate limiters' buckets per key.
    pub fn memory_bytes(&self) -> u64 {
        rate_limit::memory_bytes(&self.rate_limits)
    }

    pub fn rate_limit_summaries(&self, scenario: &Scenario) -> BTreeMap<String, RateLimitSummary> {
        rate_limit::summaries(&self.rate_limits, scenario)
    }

    pub fn throttle_summaries(&self, scenario: &Scenario) -> BTreeMap<String, ThrottleSummary> {
        self.throttles.summaries(scenario)
    }

    pub fn lock_summaries(
        &self,
        scenario: &Scenario,
        now: SimTime,
        redis: &Redis,
    ) -> BTreeMap<String, LockSummary> {
        lock::summaries(&self.locks, scenario, now, redis)
    }
}

/// What a request holds of the actions' state across its steps.
#[derive(Default)]
pub(crate) struct RequestHeld {
    /// The throttle slots the request holds, at most one per throttle.
    throttles: Vec<ThrottleHeld>,
    /// The current lock step's command in flight (or waiting for a slot's connection).
    lock_pending: Option<lock::LockPending>,
    /// The locks the request holds, in the order it took them.
    locks: Vec<(crate::scenario::LockId, LockHeld)>,
}

/// What an action's request waits for, when the wait is the action's own (a Redis reply or a
/// query is the engine's: its mechanisms answer it).
pub(crate) enum Waiting {
    /// Its own local work.
    Work,
    /// A call's latency, and what the call will answer at its end.
    Call(StepResult),
    /// A KV round trip of a throttle (what it goes on with is in `Actions::kv_waits`, like the
    /// next one's state: these waits are rare, and a request's stage stays small and plain).
    ThrottleKv,
    /// A lock acquire's wait after a busy attempt (its state in `Actions::lock_retries`).
    LockRetry,
}

impl Waiting {
    /// For messages.
    pub fn name(&self) -> &'static str {
        match self {
            Waiting::Work => "working",
            Waiting::Call(_) => "waiting for a call",
            Waiting::ThrottleKv => "waiting for a KV round trip",
            Waiting::LockRetry => "waiting to try a lock again",
        }
    }
}

/// What an action's timer is for; checked against the request's [`Waiting`] when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// A work step's local work is done.
    Work,
    /// A call's latency is over: it answers.
    Call,
    /// A throttle's KV round trip is over: take its next step.
    ThrottleKv,
    /// A lock acquire's wait after a busy attempt is over: attempt again, or time out.
    LockRetry,
}

/// What starting an action (or waking it) came to.
pub(crate) enum Started {
    /// The step's action ended at once with this result.
    Ended(StepResult),
    /// The request waits; its stage says for what.
    Waits,
}

/// What an action's timer came to.
pub(crate) enum Woken {
    /// The wait is over as a reply would end it: the engine settles the step with this.
    Reply(StepResult),
    /// The action took its next step (it ended, or waits again).
    Step(Started),
}

/// Runs the action of `step` for the request in `slot`.
pub(crate) fn start(sim: &mut impl Host, slot: u32, step: &StepSpec) -> Started {
    match step.action {
        StepAction::Redis {
            connection,
            command,
            key,
        } => redis::start(sim, slot, connection, command, key, step.replay_writes),
        StepAction::Database {
            database,
            timeout,
            latency,
            lock,
            data: _,
        } => db::start(sim, slot, database, timeout, latency, lock),
        StepAction::Work { duration } => work::start(sim, slot, &duration),
        StepAction::Call {
            latency,
            error_permille,
            error,
        } => call::start(sim, slot, &latency, error_permille, error),
        StepAction::RateLimit { limiter, key } => {
            rate_limit::start(sim, slot, limiter, key, step.replay_writes)
        }
        StepAction::Throttle { throttle, op, key } => throttle::start(sim, slot, throttle, op, key),
        StepAction::Cache { cache, op, key } => cache::start(sim, slot, cache, op, key),
        StepAction::Lock {
            lock,
            op,
            connection,
            key,
        } => lock::start(sim, slot, lock, op, connection, key),
    }
}

/// A timer the action of the request in `slot` set has fired; `waiting` is what it waited for.
pub(crate) fn on_timer(sim: &mut impl Host, slot: u32, timer: Timer, waiting: Waiting) -> Woken {
    match (timer, waiting) {
        (Timer::Work, Waiting::Work) => Woken::Reply(StepResult::Ok),
        (Timer::Call, Waiting::Call(answer)) => Woken::Reply(answer),
        (Timer::ThrottleKv, Waiting::ThrottleKv) => {
            let wait = sim.actions().kv_waits.remove(&slot);
            let wait = wait.expect("a KV round trip's wait is kept until its timer");
            Woken::Step(throttle::on_timer(sim, slot, wait))
        }
        (Timer::LockRetry, Waiting::LockRetry) => {
            let acquiring = sim.actions().lock_retries.remove(&slot);
            let acquiring = acquiring.expect("a lock retry's acquire is kept until its timer");
            Woken::Step(lock::on_timer(sim, slot, acquiring))
        }
        (timer, waiting) => unreachable!("a {timer:?} timer for a request {}", waiting.name()),
    }
}

/// What the mechanism answered the action of the request in `slot` (`result`): what the step
/// returns, or `None` when the request waits on (to try a lock again).
pub(crate) fn on_reply(
    sim: &mut impl Host,
    slot: u32,
    action: &StepAction,
    result: StepResult,
) -> Option<StepResult> {
    match *action {
        StepAction::Lock { lock, .. } => lock::on_reply(sim, slot, lock, result),
        StepAction::RateLimit { limiter, key } => {
            rate_limit::answered(sim, slot, limiter, key);
            Some(result)
        }
        _ => Some(result),
    }
}

/// A query of the request in `slot` answered (not timed out): a database step that reads or
/// writes followed data holds its version now.
pub(crate) fn on_query_answered(sim: &mut impl Host, slot: u32, action: &StepAction) {
    if let StepAction::Database {
        data: Some(data), ..
    } = *action
    {
        db::answered(sim, slot, data);
    }
}

/// What a step returns, from what its I/O returned (`io_result`) and the layer that refused it
/// (`refused`, when one did): for a rate-limit step, the limiter's decision on what its store
/// answered. An open breaker around the store means the store was not asked, which the
/// limiter's `when_unreachable` answers (as it would a timeout); a layer that sheds the step
/// refuses the request itself, and the limiter is not consulted.
pub(crate) fn decide(
    actions: &mut Actions,
    now: SimTime,
    metrics: &mut Metrics,
    action: &StepAction,
    io_result: StepResult,
    refused: Option<Outcome>,
) -> StepResult {
    match *action {
        StepAction::RateLimit { limiter, .. } if crate::rules::limiter_decides(refused) => {
            rate_limit::decide(&mut actions.rate_limits, now, metrics, limiter, io_result)
        }
        _ => io_result,
    }
}

/// The key family whose value a step holds when it reads a copy (a Redis `GET`, a cache get).
pub(crate) fn value_family(action: &StepAction) -> Option<KeyFamilyId> {
    match *action {
        StepAction::Redis { key, .. } => Some(key),
        StepAction::Cache { key: Some(key), .. } => Some(key),
        _ => None,
    }
}

/// The command whose replay rules apply when the step's command failed on a reconnect slot.
pub(crate) fn replayed_command(action: &StepAction) -> RedisCommand {
    match *action {
        StepAction::Redis { command, .. } => command,
        _ => RedisCommand::Incr, // a rate limiter's check-and-charge script writes
    }
}

/// Whether the step's work goes on after its caller timed out (a database runs the query to
/// its end): a hold kept for it is given back only then.
pub(crate) fn outlives_timeout(action: &StepAction) -> bool {
    matches!(action, StepAction::Database { .. })
}

/// What a waiting step waits on, as a trace names it: the connection of a reply, the database
/// of a query. `None` when the stage's own name says it.
pub(crate) fn wait_label(
    scenario: &Scenario,
    action: &StepAction,
    reply: bool,
    query: bool,
) -> Option<String> {
    match *action {
        StepAction::Redis { connection, .. } | StepAction::Lock { connection, .. } if reply => {
            Some(format!(
                "waiting for a reply on {}",
                scenario.connections[connection.index()].name
            ))
        }
        StepAction::Database { database, .. } if query => Some(format!(
            "query on {}",
            scenario.databases[database.index()].name
        )),
        _ => None,
    }
}

/// What a request hands to the background request that runs its step `action` on its own: a
/// release goes with what it releases (the throttle slot, the lock it holds).
pub(crate) fn hand_to_background(held: &mut RequestHeld, action: &StepAction) -> RequestHeld {
    let mut handed = RequestHeld::default();
    match *action {
        StepAction::Throttle {
            op: ThrottleOp::Release,
            throttle,
            ..
        } => handed.throttles.extend(throttle::take_held(held, throttle)),
        StepAction::Lock {
            op: LockOp::Release,
            lock,
            ..
        } => handed.locks.extend(lock::take_held(held, lock)),
        _ => {}
    }
    handed
}

#[cfg(test)]
pub(crate) mod testing;

//! Callers in front of a service: each request of a load that names a caller is a call, and
//! each of the caller's attempts is a request of the flow. The caller gives up on an attempt
//! after its timeout, and the service's request keeps running, since nothing tells it (seed
//! 003: an upstream that times out at 30 s and retries triples the requests in flight). It
//! retries by its own instance of a retry policy (its own budget and jitter stream).
//!
//! This module keeps the calls and decides; the engine spawns the attempts, sets the timers
//! and hands back what ended. Invariants: a call ends exactly once; an attempt's end or
//! timeout counts only while it is the call's current attempt (a late end of an abandoned
//! attempt, or of an attempt of a call whose slot was reused, changes nothing); the calls in
//! flight are counted, so a run does not end while a call waits to retry.

use outagelab_model::retry::{RetryDecision, RetryPolicy, RetryState};
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{CallerSummary, Outcome, PercentileRule};

use crate::kernel::RequestRef;
use crate::metrics::Latency;
use crate::rng::Stream;
use crate::scenario::{CallerId, LoadId, OutcomeSet, Scenario};

/// A call, named by its slot and the slot's token at the time (a reused slot has another).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CallRef {
    pub slot: u32,
    pub token: u32,
}

/// What an attempt's end means for its call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallNext {
    /// Make the next attempt at `at`.
    Retry { at: SimTime },
    /// The call ended (`ok` or not); its closed-loop caller, if any, goes on.
    Ended {
        caller: CallerId,
        ok: bool,
        worker: Option<(LoadId, u32)>,
    },
}

struct Call {
    caller: CallerId,
    /// The load whose flow each attempt runs.
    load: LoadId,
    started: SimTime,
    retry: Option<RetryState>,
    /// Attempts made so far; the current one is numbered `attempts`.
    attempts: u32,
    /// The service's request of the current attempt, while the caller waits for it.
    current: Option<RequestRef>,
    /// When the current (or last) attempt was sent.
    attempt_started: SimTime,
    /// The keys of the first attempt, which every retry asks for again.
    key_seed: Option<u64>,
    worker: Option<(LoadId, u32)>,
}

struct Slot {
    token: u32,
    call: Option<Call>,
}

struct CallerState {
    timeout: Option<outagelab_model::time::SimDuration>,
    /// Whether the service hears that this caller gave up on an attempt.
    cancels: bool,
    policy: Option<(RetryPolicy, OutcomeSet)>,
    random: Stream,
    calls: u64,
    outcomes: [u64; Outcome::COUNT],
    attempts: u64,
    retries: u64,
    abandoned: u64,
    latency: Latency,
    /// Start times of the earliest and the latest call that failed.
    failed_calls: Option<(SimTime, SimTime)>,
    /// When the earliest attempt the caller gave up on was sent.
    first_abandoned: Option<SimTime>,
}

pub(crate) struct Callers {
    callers: Vec<CallerState>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    in_flight: u64,
}

impl Callers {
    pub fn new(scenario: &Scenario) -> Callers {
        let callers = scenario
            .callers
            .iter()
            .map(|spec| CallerState {
                timeout: spec.timeout,
                cancels: spec.cancel_on_timeout,
                // A disabled policy never retries, in front of a service as on a step.
                policy: spec
                    .retry
                    .map(|id| &scenario.retries[id.index()])
                    .filter(|retry| retry.enabled)
                    .map(|retry| (RetryPolicy::new(retry.config), retry.retry_on)),
                random: Stream::derive(scenario.seed, "caller", &spec.name),
                calls: 0,
                outcomes: [0; Outcome::COUNT],
                attempts: 0,
                retries: 0,
                abandoned: 0,
                latency: Latency::new(),
                failed_calls: None,
                first_abandoned: None,
            })
            .collect();
        Callers {
            callers,
            slots: Vec::new(),
            free: Vec::new(),
            in_flight: 0,
        }
    }

    /// Calls started and not ended.
    pub fn in_flight(&self) -> u64 {
        self.in_flight
    }

    /// Bytes the calls in flight hold, for the run's memory estimate.
    pub fn memory_bytes(&self) -> u64 {
        (self.slots.capacity() * std::mem::size_of::<Slot>() + self.free.capacity() * 4) as u64
    }

    /// A call of `caller` starts now.
    pub fn start(
        &mut self,
        now: SimTime,
        caller: CallerId,
        load: LoadId,
        worker: Option<(LoadId, u32)>,
    ) -> CallRef {
        let state = &mut self.callers[caller.index()];
        state.calls += 1;
        let retry = state
            .policy
            .as_mut()
            .map(|(policy, _)| policy.on_request(now));
        let call = Call {
            caller,
            load,
            started: now,
            retry,
            attempts: 0,
            current: None,
            attempt_started: now,
            key_seed: None,
            worker,
        };
        self.in_flight += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                let entry = &mut self.slots[slot as usize];
                entry.token = entry.token.wrapping_add(1);
                entry.call = Some(call);
                slot
            }
            None => {
                self.slots.push(Slot {
                    token: 0,
                    call: Some(call),
                });
                u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 calls at once")
            }
        };
        CallRef {
            slot,
            token: self.slots[slot as usize].token,
        }
    }

    fn call_mut(&mut self, call: CallRef) -> Option<&mut Call> {
        let slot = self.slots.get_mut(call.slot as usize)?;
        if slot.token != call.token {
            return None;
        }
        slot.call.as_mut()
    }

    /// The call's next attempt is `request` (with the keys `key_seed` draws), sent now:
    /// returns its number and, if the caller has a timeout, when it gives up on it.
    pub fn attempting(
        &mut self,
        now: SimTime,
        call: CallRef,
        request: RequestRef,
        key_seed: u64,
    ) -> (u32, Option<SimTime>) {
        let live = self.call_mut(call).expect("an attempt of a live call");
        live.attempts += 1;
        live.current = Some(request);
        live.attempt_started = now;
        live.key_seed.get_or_insert(key_seed);
        let (attempt, caller) = (live.attempts, live.caller);
        let state = &mut self.callers[caller.index()];
        state.attempts += 1;
        (attempt, state.timeout.map(|t| now.saturating_add(t)))
    }

    /// Attempt `attempt` of `call` answered with `outcome` (a refusal may ask for a wait,
    /// `retry_after`, which a retry honours as HTTP's Retry-After); `None` when the caller no
    /// longer waits for it (it gave up on it, or the call ended).
    pub fn answered(
        &mut self,
        now: SimTime,
        call: CallRef,
        attempt: u32,
        outcome: Outcome,
        retry_after: Option<SimDuration>,
    ) -> Option<CallNext> {
        let live = self.call_mut(call)?;
        if live.attempts != attempt || live.current.is_none() {
            return None;
        }
        live.current = None;
        Some(self.decide(now, call, outcome, retry_after))
    }

    /// The caller's timeout for attempt `attempt` of `call` fell due; `None` when that
    /// attempt had already answered. The service's request is left running; with it comes
    /// the request to cancel, when the caller cancels what it gives up on.
    pub fn timed_out(
        &mut self,
        now: SimTime,
        call: CallRef,
        attempt: u32,
    ) -> Option<(CallNext, Option<RequestRef>)> {
        let live = self.call_mut(call)?;
        if live.attempts != attempt {
            return None;
        }
        let abandoned = live.current.take()?;
        let (caller, sent) = (live.caller, live.attempt_started);
        let state = &mut self.callers[caller.index()];
        state.abandoned += 1;
        state.first_abandoned = Some(state.first_abandoned.map_or(sent, |first| first.min(sent)));
        let cancel = state.cancels.then_some(abandoned);
        Some((self.decide(now, call, Outcome::Timeout, None), cancel))
    }

    /// An attempt of `call` ended with `outcome`: retry (not before `retry_after`), or end
    /// the call.
    fn decide(
        &mut self,
        now: SimTime,
        call: CallRef,
        outcome: Outcome,
        retry_after: Option<SimDuration>,
    ) -> CallNext {
        let slot = &mut self.slots[call.slot as usize];
        let live = slot.call.as_mut().expect("a live call");
        let state = &mut self.callers[live.caller.index()];
        if outcome != Outcome::Ok
            && let (Some((policy, retry_on)), Some(retry)) = (&mut state.policy, &mut live.retry)
            && retry_on.contains(outcome)
            && let RetryDecision::Retry { at } =
                policy.on_failure(now, retry, retry_after, &mut state.random)
        {
            state.retries += 1;
            return CallNext::Retry { at };
        }
        let ended = slot.call.take().expect("a live call");
        self.free.push(call.slot);
        self.in_flight -= 1;
        state.outcomes[outcome.index()] += 1;
        state
            .latency
            .record(now.saturating_since(ended.started).as_nanos());
        let ok = outcome == Outcome::Ok;
        if !ok {
            let (first, last) = state
                .failed_calls
                .get_or_insert((ended.started, ended.started));
            *first = (*first).min(ended.started);
            *last = (*last).max(ended.started);
        }
        CallNext::Ended {
            caller: ended.caller,
            ok,
            worker: ended.worker,
        }
    }

    /// The keys every attempt of `call` uses: `None` before its first attempt.
    pub fn key_seed(&self, call: CallRef) -> Option<u64> {
        self.slots[call.slot as usize]
            .call
            .as_ref()
            .and_then(|live| live.key_seed)
    }

    /// The load whose flow the attempts of `call` run; `call` is live (a retry is
    /// scheduled only for a live call, and nothing else ends it meanwhile).
    pub fn load_of(&self, call: CallRef) -> LoadId {
        let slot = &self.slots[call.slot as usize];
        debug_assert_eq!(slot.token, call.token);
        slot.call.as_ref().expect("a live call").load
    }

    /// Each caller's figures, in the scenario's order.
    pub fn summaries(&self, rule: PercentileRule) -> impl Iterator<Item = CallerSummary> + '_ {
        let mut unfinished = vec![0u64; self.callers.len()];
        for call in self.slots.iter().filter_map(|slot| slot.call.as_ref()) {
            unfinished[call.caller.index()] += 1;
        }
        let ms = |t: SimTime| t.as_nanos() as f64 / 1e6;
        self.callers
            .iter()
            .zip(unfinished)
            .map(move |(state, unfinished)| CallerSummary {
                requests: state.calls,
                outcomes: Outcome::ALL
                    .into_iter()
                    .map(|o| (o.name().to_owned(), state.outcomes[o.index()]))
                    .collect(),
                unfinished,
                attempts: state.attempts,
                retries: state.retries,
                abandoned: state.abandoned,
                latency_ms: state.latency.stats(rule),
                first_failed_call_ms: state.failed_calls.map(|(first, _)| ms(first)),
                last_failed_call_ms: state.failed_calls.map(|(_, last)| ms(last)),
                first_abandoned_ms: state.first_abandoned.map(ms),
            })
    }
}

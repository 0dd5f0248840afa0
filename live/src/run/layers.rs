//! The policy layers of a live step (breaker, semaphore, bulkhead, retry, adaptive limit, rate
//! limit): each the model's live form, fed by the rules the simulator's layers call
//! (`outagelab_sim::rules`: what a breaker counts, what an adaptive limit samples, what a
//! retry tries again, what a rate limiter answers for a store it did not reach), and what the
//! runner counts beside them for the summary (`outagelab_sim::summaries`).
//!
//! [`Layers`] knows no connection and no server: the step's action, its waits and its
//! records come from an [`Around`], so that a test drives the very same code on a manual
//! clock with recorded results (`differential.rs`, against the simulator's
//! `outagelab_sim::StepLayers`).

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use outagelab_model::retry::RetryDecision;
use outagelab_model::time::SimTime;
use outagelab_report::{Outcome, Summary};
use outagelab_sim::rules::{self, BreakerTally, BulkheadTally, StoreAnswer};
use outagelab_sim::scenario::{
    BreakerClassifier, BulkheadId, ConnectionId, KeyFamilyId, OutcomeSet, PolicyRef, StepAction,
    StepSpec,
};
use outagelab_sim::{Scenario, StepResult, Stream, summaries};

use super::{StepEnd, WorkDone, locked, work_done};
use crate::bulkhead::{DetachedPermit, Entry};
use crate::clock::Clock;
use crate::{
    LiveAdaptiveLimit, LiveBreaker, LiveBulkhead, LiveRateLimiter, LiveRetry, LiveSemaphore,
};

/// What a step's layers need from the run around them.
pub(super) trait Around: Sync {
    /// The step's action: what its I/O returned, and the end of its work when that outlives
    /// the step (a query whose caller timed out).
    fn act(&self) -> Pin<Box<dyn Future<Output = (StepResult, Option<WorkDone>)> + Send + '_>>;
    /// Waits until `at` (a retry's instant).
    fn sleep_until(&self, at: SimTime) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
    /// Keeps bulkhead `index`'s `permit` until `work` is done, then gives it back (the
    /// simulator's `Exit::Kept`), whatever the request does meanwhile.
    fn keep_until_done(&self, index: usize, permit: DetachedPermit, work: WorkDone);
    /// `policy`'s state changed: its gauges.
    fn observe(&self, policy: PolicyRef);
    /// Rate limiter `index` admitted a check its store did not answer.
    fn rate_limit_failed_open(&self, index: usize);
    /// A step ended `rate_limited` (a 429, retried or not).
    fn rejected_attempt(&self);
    /// The rate-limit bucket of the request's key of `family` (`rules::rate_limit_bucket`);
    /// 0, the one bucket, for `None` or a harness without keys.
    fn rate_limit_bucket(&self, family: Option<KeyFamilyId>) -> u64 {
        let _ = family;
        0
    }
}

pub(super) struct LiveBreakerSlot<C: Clock> {
    pub live: LiveBreaker<C>,
    pub enabled: bool,
    classifier: BreakerClassifier,
    pub tally: Mutex<BreakerTally>,
}

pub(super) struct LiveSemaphoreSlot {
    pub live: LiveSemaphore,
    enabled: bool,
}

pub(super) struct LiveBulkheadSlot {
    pub live: LiveBulkhead,
    enabled: bool,
    tally: Mutex<BulkheadTally>,
}

/// A retry policy, one per file (its budget shared by the steps that name it), drawing its
/// jitter from the stream the simulator gives the same policy.
pub(super) struct LiveRetrySlot<C: Clock> {
    live: LiveRetry<Stream, C>,
    enabled: bool,
    retry_on: OutcomeSet,
}

/// An adaptive limit, sampling the errors in `drops` as drops.
pub(super) struct LiveAdaptiveLimitSlot<C: Clock> {
    pub live: LiveAdaptiveLimit<C>,
    enabled: bool,
    drops: OutcomeSet,
}

/// A rate limiter: the model's, deciding on what its store (when it has one) answered.
pub(super) struct LiveRateLimitSlot<C: Clock> {
    live: LiveRateLimiter<C>,
    pub enabled: bool,
    pub store: Option<ConnectionId>,
}

/// Every policy of a live run, by kind, in the file's order, each on `C`'s time.
pub(super) struct Layers<C: Clock> {
    pub breakers: Vec<LiveBreakerSlot<C>>,
    pub semaphores: Vec<LiveSemaphoreSlot>,
    pub bulkheads: Vec<LiveBulkheadSlot>,
    retries: Vec<LiveRetrySlot<C>>,
    pub rate_limits: Vec<LiveRateLimitSlot<C>>,
    pub adaptive_limits: Vec<LiveAdaptiveLimitSlot<C>>,
}

type Pass<'a> = Pin<Box<dyn Future<Output = StepEnd> + Send + 'a>>;

impl<C: Clock + Clone> Layers<C> {
    /// The live forms of `scenario`'s policies, on `clock`.
    pub fn new(scenario: &Scenario, clock: C) -> Layers<C> {
        let seed = scenario.seed;
        Layers {
            breakers: (scenario.breakers.iter())
                .map(|spec| LiveBreakerSlot {
                    live: LiveBreaker::with_clock(spec.config, clock.clone()),
                    enabled: spec.enabled,
                    classifier: spec.classifier(),
                    tally: Mutex::default(),
                })
                .collect(),
            semaphores: (scenario.semaphores.iter())
                .map(|spec| LiveSemaphoreSlot {
                    live: LiveSemaphore::new(spec.config),
                    enabled: spec.enabled,
                })
                .collect(),
            bulkheads: (scenario.bulkheads.iter())
                .map(|spec| LiveBulkheadSlot {
                    live: LiveBulkhead::new(spec.config),
                    enabled: spec.enabled,
                    tally: Mutex::default(),
                })
                .collect(),
            retries: (scenario.retries.iter())
                .map(|spec| LiveRetrySlot {
                    live: LiveRetry::with_clock(
                        spec.config,
                        Stream::derive(seed, "retry", &spec.name),
                        clock.clone(),
                    ),
                    enabled: spec.enabled,
                    retry_on: spec.retry_on,
                })
                .collect(),
            // One limiter each: only instances' copies share buckets (`buckets_of`), and
            // `check` refuses services.
            rate_limits: (scenario.rate_limits.iter())
                .map(|spec| LiveRateLimitSlot {
                    live: LiveRateLimiter::with_clock(spec.config, clock.clone()),
                    enabled: spec.enabled,
                    store: spec.store,
                })
                .collect(),
            adaptive_limits: (scenario.adaptive_limits.iter())
                .map(|spec| LiveAdaptiveLimitSlot {
                    live: LiveAdaptiveLimit::with_clock(spec.config, clock.clone()),
                    enabled: spec.enabled,
                    drops: spec.drops,
                })
                .collect(),
        }
    }
}

impl<C: Clock> Layers<C> {
    /// `step` of `scenario` from its policy at position `depth` inwards, then its action.
    pub fn pass<'a, A: Around>(
        &'a self,
        around: &'a A,
        scenario: &'a Scenario,
        step: &'a StepSpec,
        depth: usize,
    ) -> Pass<'a> {
        Box::pin(async move {
            let Some(&policy) = step.policies.get(depth) else {
                let (io, work) = around.act().await;
                let result = self.step_result(around, step, io, None);
                return StepEnd { result, io, work };
            };
            let inner = || self.pass(around, scenario, step, depth + 1);
            match policy {
                PolicyRef::Breaker(id) => {
                    let slot = &self.breakers[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let admitted = slot.live.try_admit();
                    self.breaker_moved(around, policy, slot);
                    let Ok(guard) = admitted else {
                        locked(&slot.tally).rejected += 1;
                        return self.refused(around, step, Outcome::BreakerOpen);
                    };
                    let end = inner().await;
                    guard.finish(rules::breaker_outcome(slot.classifier, end.io));
                    self.breaker_moved(around, policy, slot);
                    end
                }
                PolicyRef::Semaphore(id) => {
                    let slot = &self.semaphores[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let bytes = rules::request_bytes(&step.action);
                    let Ok(permit) = slot.live.try_acquire(bytes) else {
                        return self.refused(around, step, Outcome::Shed);
                    };
                    around.observe(policy);
                    let end = inner().await;
                    drop(permit);
                    around.observe(policy);
                    end
                }
                PolicyRef::Bulkhead(id) => {
                    let slot = &self.bulkheads[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let permit = match slot.live.try_acquire() {
                        Entry::Granted(permit) => permit,
                        Entry::Queued(queued) => {
                            self.bulkhead_moved(around, id.index());
                            queued.await
                        }
                        Entry::Shed => {
                            locked(&slot.tally).shed += 1;
                            return self.refused(around, step, Outcome::Shed);
                        }
                    };
                    self.bulkhead_moved(around, id.index());
                    let end = inner().await;
                    match &end.work {
                        // A bulkhead in front of a database stands for its connection pool
                        // (`rules::in_a_pool`): a query whose caller gave up holds its
                        // connection until it ends.
                        Some(work) => {
                            around.keep_until_done(id.index(), permit.detach(), work.clone())
                        }
                        None => {
                            drop(permit);
                            self.bulkhead_moved(around, id.index());
                        }
                    }
                    end
                }
                PolicyRef::Retry(id) => {
                    let slot = &self.retries[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    // The whole step again (its inner layers and action) after the backoff
                    // the model names, as the simulator runs it.
                    let mut state = slot.live.on_request();
                    loop {
                        let end = inner().await;
                        if !rules::retries(slot.retry_on, end.result) {
                            return end;
                        }
                        // No Retry-After: its one source, a throttle's refusal, is not run
                        // live (`check`).
                        match slot.live.on_failure(&mut state, None) {
                            RetryDecision::Retry { at } => {
                                around.sleep_until(at).await;
                                if let Some(work) = end.work
                                    && rules::in_a_pool(scenario, &step.policies[..depth])
                                {
                                    // The retry runs inside a pool whose connection the
                                    // abandoned query still holds: it goes again on that
                                    // connection once the query is over, as simulated.
                                    work_done(work).await;
                                }
                            }
                            RetryDecision::GiveUp(_) => return end,
                        }
                    }
                }
                PolicyRef::AdaptiveLimit(id) => {
                    let slot = &self.adaptive_limits[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let admitted = slot.live.try_acquire();
                    around.observe(policy);
                    let Ok(guard) = admitted else {
                        return self.refused(around, step, Outcome::Shed);
                    };
                    let end = inner().await;
                    // The sample is of what the step's I/O returned, as simulated.
                    guard.finish(rules::adaptive_limit_end(slot.drops, end.io));
                    around.observe(policy);
                    end
                }
            }
        })
    }

    /// How a step ends when a layer refuses it with `outcome`.
    fn refused(&self, around: &impl Around, step: &StepSpec, outcome: Outcome) -> StepEnd {
        let io = StepResult::Error(outcome);
        let result = self.step_result(around, step, io, Some(outcome));
        StepEnd {
            result,
            io,
            work: None,
        }
    }

    /// What a step returns given what its I/O returned and the layer that refused it, if one
    /// did (the simulator's `actions::decide`): for a rate-limit step whose limiter decides
    /// (`rules::limiter_decides`), the limiter's answer; for any other, the I/O's result.
    fn step_result(
        &self,
        around: &impl Around,
        step: &StepSpec,
        io: StepResult,
        refused: Option<Outcome>,
    ) -> StepResult {
        let result = match step.action {
            StepAction::RateLimit { limiter, key } if rules::limiter_decides(refused) => {
                let slot = &self.rate_limits[limiter.index()];
                // One bucket per key of the store, as simulated; a local limiter's one bucket.
                let bucket = around.rate_limit_bucket(key.filter(|_| slot.store.is_some()));
                let answer = rules::rate_limit_answer(slot.enabled, io, |store| match store {
                    StoreAnswer::Answered => slot.live.try_acquire_key(bucket, 1),
                    StoreAnswer::Unreachable => slot.live.on_store_unreachable(1),
                });
                if answer.failed_open {
                    around.rate_limit_failed_open(limiter.index());
                }
                answer.result
            }
            _ => io,
        };
        if result == StepResult::Error(Outcome::RateLimited) {
            around.rejected_attempt();
        }
        result
    }

    /// Takes the breaker's transitions into its tally, and its gauge.
    fn breaker_moved(&self, around: &impl Around, policy: PolicyRef, slot: &LiveBreakerSlot<C>) {
        {
            let mut tally = locked(&slot.tally);
            while let Some(transition) = slot.live.poll_transition() {
                tally.transition(&transition);
            }
        }
        around.observe(policy);
    }

    /// Follows bulkhead `index`'s occupancy into its peaks, and its gauges.
    fn bulkhead_moved(&self, around: &impl Around, index: usize) {
        self.bulkhead_peaks(index);
        around.observe(PolicyRef::Bulkhead(BulkheadId(index as u32)));
    }

    /// Follows bulkhead `index`'s occupancy into its peaks.
    pub fn bulkhead_peaks(&self, index: usize) {
        let slot = &self.bulkheads[index];
        let (in_use, queued) = slot.live.occupancy();
        locked(&slot.tally).occupancy(in_use, queued);
    }

    /// The policies' and rate limiters' sections of the summary, as the simulator writes
    /// them.
    pub fn summarize(&self, scenario: &Scenario, summary: &mut Summary) {
        for (spec, slot) in scenario.breakers.iter().zip(&self.breakers) {
            let (opened, state) = (slot.live.opened_total(), slot.live.state());
            let tally = *locked(&slot.tally);
            let breaker = summaries::breaker(slot.enabled, &tally, opened, state);
            summary.breakers.insert(spec.name.clone(), breaker);
        }
        for (spec, slot) in scenario.semaphores.iter().zip(&self.semaphores) {
            let counters = slot.live.counters();
            let semaphore = summaries::semaphore(slot.enabled, &spec.config, &counters);
            summary.semaphores.insert(spec.name.clone(), semaphore);
        }
        for (spec, slot) in scenario.rate_limits.iter().zip(&self.rate_limits) {
            let limiter = summaries::rate_limit(slot.enabled, &slot.live.counters());
            summary.rate_limits.insert(spec.name.clone(), limiter);
        }
        for (spec, slot) in scenario.adaptive_limits.iter().zip(&self.adaptive_limits) {
            let limit = summaries::adaptive_limit(slot.enabled, &slot.live.counters());
            summary.adaptive_limits.insert(spec.name.clone(), limit);
        }
        for (spec, slot) in scenario.bulkheads.iter().zip(&self.bulkheads) {
            let tally = *locked(&slot.tally);
            let bulkhead = summaries::bulkhead(slot.enabled, &spec.config, &tally);
            summary.bulkheads.insert(spec.name.clone(), bulkhead);
        }
        for (spec, slot) in scenario.retries.iter().zip(&self.retries) {
            let retry = summaries::retry(slot.enabled, &slot.live.counters());
            summary.retries.insert(spec.name.clone(), retry);
        }
    }
}

//! A rate-limit step: a check costing one token. A local limiter (or a disabled one) answers
//! at once; one with a store checks and charges under the request's key with an `INCR` on the
//! store's connection, and waits for the reply. Either way the limiter decides the step's
//! result when it ends ([`decide`]): `rate_limited` when refused, and what an unreachable store
//! means is the limiter's `when_unreachable`.

use std::collections::BTreeMap;

use outagelab_model::rate_limit::{Decision, RateLimiter};
use outagelab_model::time::SimTime;
use outagelab_report::{CountKey, Outcome, RateLimitSummary};

use crate::actions::Started;
use crate::engine::Simulator;
use crate::kernel::StepResult;
use crate::metrics::{CounterId, Metrics};
use crate::redis::Op;
use crate::scenario::{ConnectionId, KeyFamilyId, RateLimitId, RedisCommand, Scenario};

pub(super) struct RateLimitSlot {
    limiter: RateLimiter,
    enabled: bool,
    store: Option<ConnectionId>,
    /// Checks admitted unchecked because the store could not be reached, per bucket.
    fail_open_counter: CounterId,
}

/// One slot per rate limiter, each with its fail-open counter.
pub(super) fn slots(scenario: &Scenario, metrics: &mut Metrics) -> Vec<RateLimitSlot> {
    scenario
        .rate_limits
        .iter()
        .map(|spec| RateLimitSlot {
            fail_open_counter: metrics
                .add_counter(CountKey::RateLimitFailOpenAdmitted(spec.name.clone())),
            limiter: RateLimiter::new(spec.config),
            enabled: spec.enabled,
            store: spec.store,
        })
        .collect()
}

pub(super) fn summaries(
    rate_limits: &[RateLimitSlot],
    scenario: &Scenario,
) -> BTreeMap<String, RateLimitSummary> {
    scenario
        .rate_limits
        .iter()
        .zip(rate_limits)
        .map(|(spec, slot)| {
            let summary = crate::summaries::rate_limit(slot.enabled, &slot.limiter.counters());
            (spec.name.clone(), summary)
        })
        .collect()
}

/// Asks the store, when the limiter has one and is on; otherwise the step ends at once, and
/// [`decide`] asks the limiter.
pub(super) fn start(
    sim: &mut Simulator<'_>,
    slot: u32,
    limiter: RateLimitId,
    key: Option<KeyFamilyId>,
    replay_writes: bool,
) -> Started {
    let limiter = &sim.actions.rate_limits[limiter.index()];
    match (limiter.enabled, limiter.store, key) {
        (true, Some(store), Some(family)) => {
            let op = Op {
                command: RedisCommand::Incr,
                family: family.0,
                index: sim.key_of(slot, family),
                version: 0,
            };
            match sim.issue_command(slot, store, op, replay_writes) {
                None => Started::Waits,
                Some(result) => Started::Ended(result),
            }
        }
        // A local limiter (or a disabled one) answers at once; `decide` asks it.
        _ => Started::Ended(StepResult::Ok),
    }
}

/// What a rate-limit step's result means once the limiter has had its say: `store` is what
/// the store's round trip returned (`Ok` for a local limiter).
pub(super) fn decide(
    rate_limits: &mut [RateLimitSlot],
    now: SimTime,
    metrics: &mut Metrics,
    limiter: RateLimitId,
    store: StepResult,
) -> StepResult {
    let slot = &mut rate_limits[limiter.index()];
    if !slot.enabled {
        return StepResult::Ok;
    }
    let decision = match store {
        StepResult::Ok | StepResult::Hit | StepResult::Miss => slot.limiter.try_acquire(now, 1),
        StepResult::Error(_) => slot.limiter.on_store_unreachable(1),
    };
    if let (StepResult::Error(_), Decision::Admit) = (store, decision) {
        metrics.count(slot.fail_open_counter);
    }
    match decision {
        Decision::Admit => StepResult::Ok,
        Decision::Reject { .. } | Decision::TooLarge => StepResult::Error(Outcome::RateLimited),
    }
}

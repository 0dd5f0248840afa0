//! A throttle step: an acquire or a release of a slot of a throttle, under the request's key.
//! An atomic throttle answers at once; a KV throttle reads and writes its counter in a store,
//! each round trip a wait ([`KvWait`]) before its next phase. An acquire admitted holds its
//! slot until a release (or leaks it when the request ends without one); one refused is
//! `rate_limited` with the throttle's Retry-After.

use std::collections::BTreeMap;

use outagelab_model::throttle::KvKey;
use outagelab_model::time::SimTime;
use outagelab_report::{GaugeKey, Outcome, ThrottleSummary};

use crate::actions::Host;
use crate::actions::{RequestHeld, Started, Timer, Waiting};
use crate::kernel::{StepResult, TimerKind};
use crate::metrics::{GaugeId, Metrics};
use crate::scenario::{KeyFamilyId, Scenario, ThrottleId, ThrottleOp};
use crate::throttles::{Held, Phase, Progress, Throttles};

/// The scenario's throttles and their charts.
pub(super) struct ThrottleSlots {
    pub(super) throttles: Throttles,
    gauges: Vec<Gauges>,
}

/// What a throttle's chart shows: slots truly held, and what its counter says is held. The gap
/// is leaked slots (or holders the counter lost).
struct Gauges {
    holders: GaugeId,
    counter: GaugeId,
}

impl ThrottleSlots {
    pub(super) fn new(scenario: &Scenario, metrics: &mut Metrics) -> ThrottleSlots {
        let gauges = scenario
            .throttles
            .iter()
            .map(|spec| Gauges {
                holders: metrics.add_gauge(GaugeKey::ThrottleHolders(spec.name.clone())),
                counter: metrics.add_gauge(GaugeKey::ThrottleCounter(spec.name.clone())),
            })
            .collect();
        ThrottleSlots {
            throttles: Throttles::new(scenario),
            gauges,
        }
    }

    /// No throttle in the scenario (so no gauge to set).
    pub(super) fn is_empty(&self) -> bool {
        self.gauges.is_empty()
    }

    pub(super) fn observe(&mut self, now: SimTime, metrics: &mut Metrics) {
        for (index, gauges) in self.gauges.iter().enumerate() {
            let (holders, counter) = self.throttles.gauges(now, ThrottleId(index as u32));
            metrics.set_gauge(gauges.holders, holders);
            metrics.set_gauge(gauges.counter, counter);
        }
    }

    pub(super) fn summaries(&self, scenario: &Scenario) -> BTreeMap<String, ThrottleSummary> {
        scenario
            .throttles
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                let mut summary = self.throttles.summary(ThrottleId(index as u32));
                summary.inflight_max = u64::from(spec.config.inflight_max());
                (spec.name.clone(), summary)
            })
            .collect()
    }
}

/// A KV round trip of a throttle a request waits for.
pub(crate) struct KvWait {
    throttle: ThrottleId,
    key: KvKey,
    phase: Phase,
}

/// Takes the slot of `throttle` that `held` holds, if any.
pub(super) fn take_held(held: &mut RequestHeld, throttle: ThrottleId) -> Option<Held> {
    let index = held
        .throttles
        .iter()
        .position(|h| h.throttle() == throttle)?;
    Some(held.throttles.swap_remove(index))
}

/// Acquires or releases; a second acquire of the same throttle drops the first slot.
pub(super) fn start(
    sim: &mut impl Host,
    slot: u32,
    throttle: ThrottleId,
    op: ThrottleOp,
    key: KeyFamilyId,
) -> Started {
    let kv_key = u64::from(key.0) << 32 | u64::from(sim.key_of(slot, key));
    let now = sim.now();
    let progress = match op {
        ThrottleOp::Acquire => {
            if let Some(old) = take_held(sim.held(slot), throttle) {
                // A second acquire of the same throttle drops the first slot.
                sim.actions().throttles.throttles.leak(now, old);
            }
            (sim.actions().throttles.throttles).acquire(now, throttle, kv_key)
        }
        ThrottleOp::Release => match take_held(sim.held(slot), throttle) {
            Some(held) => sim.actions().throttles.throttles.release(now, held),
            None => Progress::Done,
        },
    };
    progress_of(sim, slot, progress)
}

/// The KV round trip the request in `slot` waited for is over: the throttle's next phase.
pub(super) fn on_timer(sim: &mut impl Host, slot: u32, wait: KvWait) -> Started {
    let KvWait {
        throttle,
        key,
        phase,
    } = wait;
    let now = sim.now();
    let progress = (sim.actions().throttles.throttles).resume(now, throttle, key, phase);
    progress_of(sim, slot, progress)
}

/// Applies a throttle step's progress to the request in `slot`: it holds the slot it was
/// given, waits for a KV step, or ends the step.
fn progress_of(sim: &mut impl Host, slot: u32, progress: Progress) -> Started {
    let result = match progress {
        Progress::Admitted(held) => {
            sim.held(slot).throttles.push(held);
            StepResult::Ok
        }
        Progress::Rejected { retry_after } => {
            sim.set_retry_after(slot, retry_after);
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
            sim.held(slot).throttles.extend(admitted);
            let wait = KvWait {
                throttle,
                key,
                phase,
            };
            let kept = sim.actions().kv_waits.insert(slot, wait);
            debug_assert!(kept.is_none(), "one wait at a time");
            sim.wait(slot, Waiting::ThrottleKv);
            let at = sim.now().saturating_add(after);
            sim.set_timer(slot, at, TimerKind::Action(Timer::ThrottleKv));
            return Started::Waits;
        }
    };
    Started::Ended(result)
}

#[cfg(test)]
mod tests {
    use outagelab_model::throttle::{CounterTtl, ThrottleConfig};

    use crate::actions::testing::{KEY, ended, ms, run, scenario, step, work};
    use crate::scenario::{StepAction, ThrottleForm, ThrottleId, ThrottleOp, ThrottleSpec};

    fn throttle(op: ThrottleOp) -> crate::scenario::StepSpec {
        step(StepAction::Throttle {
            throttle: ThrottleId(0),
            op,
            key: KEY,
        })
    }

    #[test]
    fn an_atomic_throttle_holds_its_slot_until_the_release() {
        let mut s = scenario();
        let config = ThrottleConfig::new(1, ms(1_000), CounterTtl::Never, ms(0)).unwrap();
        s.throttles.push(ThrottleSpec {
            name: "one".into(),
            enabled: true,
            config,
            form: ThrottleForm::Atomic,
            release_loss_permille: 0,
        });
        let steps = vec![
            throttle(ThrottleOp::Acquire),
            work(ms(10)),
            throttle(ThrottleOp::Release),
        ];
        // Of two at 0, one holds the slot for 10 ms, the other is refused; one at 10 ms finds
        // the slot given back and ends at 20 ms.
        let report = run(s, steps, &[(0, 2), (10, 1)]);
        assert_eq!(ended(&report, "ok"), 2);
        assert_eq!(ended(&report, "rate_limited"), 1);
        assert_eq!(report.end_ms, 20.0);
        let summary = &report.summary.throttles["one"];
        assert_eq!((summary.admitted, summary.rejected), (2, 1));
        assert_eq!(summary.peak_holders, 1);
    }
}

//! A cache step: a get, put, invalidate or flush on an in-process cache, which takes no time.
//! A get that finds its key is a `hit` and holds the version it found; a put copies the value
//! the request holds.

use std::collections::BTreeMap;

use outagelab_model::cache::{Cache, CacheKey, Lookup};
use outagelab_report::{CacheSummary, GaugeKey};

use crate::actions::{Host, Started};
use crate::kernel::StepResult;
use crate::metrics::{GaugeId, Metrics};
use crate::scenario::{CacheId, CacheOp, KeyFamilyId, Scenario};
use crate::versions::ValueFrom;

pub(super) struct CacheSlot {
    cache: Cache,
    entries_gauge: GaugeId,
}

/// One slot per cache, each with its entries' gauge.
pub(super) fn slots(scenario: &Scenario, metrics: &mut Metrics) -> Vec<CacheSlot> {
    scenario
        .caches
        .iter()
        .map(|spec| CacheSlot {
            cache: Cache::new(spec.config),
            entries_gauge: metrics.add_gauge(GaugeKey::CacheEntries(spec.name.clone())),
        })
        .collect()
}

pub(super) fn observe(caches: &[CacheSlot], metrics: &mut Metrics) {
    for slot in caches {
        metrics.set_gauge(slot.entries_gauge, slot.cache.len() as u64);
    }
}

pub(super) fn invalidate(caches: &mut [CacheSlot], cache: CacheId, family: u32, index: u32) {
    caches[cache.index()]
        .cache
        .invalidate(CacheKey::pair(family, index));
}

pub(super) fn flush(caches: &mut [CacheSlot], cache: CacheId) {
    caches[cache.index()].cache.flush();
}

pub(super) fn summaries(
    caches: &[CacheSlot],
    scenario: &Scenario,
) -> BTreeMap<String, CacheSummary> {
    scenario
        .caches
        .iter()
        .zip(caches)
        .map(|(spec, slot)| {
            let summary = crate::summaries::cache(&slot.cache.counters());
            (spec.name.clone(), summary)
        })
        .collect()
}

/// Runs the operation; it ends at once.
pub(super) fn start(
    sim: &mut impl Host,
    slot: u32,
    cache: CacheId,
    op: CacheOp,
    key: Option<KeyFamilyId>,
) -> Started {
    let data_key = key.map(|family| (family.0, sim.key_of(slot, family)));
    let key = data_key.map(|(family, index)| CacheKey::pair(family, index));
    let key = || key.expect("validated: every cache op but flush has a key");
    // A put copies the value the request holds (its version, when of this key).
    let version = data_key.map_or(0, |k| sim.value_version(slot, k));
    let now = sim.now();
    let cache = &mut sim.actions().caches[cache.index()].cache;
    let result = match op {
        CacheOp::Get => match cache.get(now, key()) {
            Lookup::Hit { version, .. } => {
                sim.hold_value(slot, version, ValueFrom::Cache);
                StepResult::Hit
            }
            Lookup::Miss | Lookup::Expired => StepResult::Miss,
        },
        CacheOp::Put { value_bytes } => {
            let _ = cache.insert(now, key(), version, u64::from(value_bytes));
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
    Started::Ended(result)
}

#[cfg(test)]
mod tests {
    use outagelab_model::cache::CacheConfig;

    use crate::actions::testing::{KEY, ended, ms, run, scenario, step, work};
    use crate::scenario::{CacheId, CacheOp, CacheSpec, OnHit, StepAction};

    fn op(op: CacheOp) -> crate::scenario::StepSpec {
        step(StepAction::Cache {
            cache: CacheId(0),
            op,
            key: Some(KEY),
        })
    }

    #[test]
    fn a_get_misses_until_a_put_and_a_hit_takes_no_time() {
        let mut s = scenario();
        s.caches.push(CacheSpec {
            name: "l1".into(),
            config: CacheConfig::new(10, 10_000, ms(1_000)).unwrap(),
        });
        let mut get = op(CacheOp::Get);
        get.on_hit = OnHit::Finish;
        let put = op(CacheOp::Put { value_bytes: 100 });
        // The first request misses, works 1 ms and puts; the second, at 10 ms, hits and
        // finishes at once.
        let report = run(s, vec![get, work(ms(1)), put], &[(0, 1), (10, 1)]);
        assert_eq!(ended(&report, "ok"), 2);
        assert_eq!(report.end_ms, 10.0);
        let cache = &report.summary.caches["l1"];
        assert_eq!((cache.hits, cache.misses), (1, 1));
        assert_eq!(report.summary.latency_ms["all"].min, Some(0.0));
    }
}

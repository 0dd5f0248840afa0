//! A cache step: a get, put, invalidate or flush on an in-process cache, which takes no time.
//! A get that finds its key is a `hit` and holds the version it found; a put copies the value
//! the request holds.

use std::collections::BTreeMap;

use outagelab_model::cache::{Cache, CacheKey, Lookup};
use outagelab_report::{CacheSummary, GaugeKey};

use crate::actions::Started;
use crate::engine::{Simulator, ValueFrom};
use crate::kernel::StepResult;
use crate::metrics::{GaugeId, Metrics};
use crate::scenario::{CacheId, CacheOp, KeyFamilyId, Scenario};

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
    sim: &mut Simulator<'_>,
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
    let (now, cache) = (sim.now, &mut sim.actions.caches[cache.index()].cache);
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

//! Cascade throttles (seed 004) and the key-value stores the non-atomic form keeps its counters
//! in, driven step by step in virtual time.
//!
//! The atomic form decides in one step. The KV form is the plan as written: an acquire reads
//! the counter (one read latency later, possibly stale), decides, and writes counter + 1 (one
//! write latency later); a release reads and writes counter - 1 the same way. Requests of the
//! same key interleave between those steps, which is what lets the KV form admit over its cap
//! or erase a decrement. A release may be lost (fire-and-forget), with a configured chance.
//!
//! The decisions are `outagelab-model`'s throttles; this module only sequences their steps and
//! keeps one throttle per (throttle, key). Each KV throttle stores its counter under a store
//! key of its own, so two throttles that share a store and a key family never share a counter.
//!
//! Gauges are read after every event, so they must not cost a walk over every key a throttle
//! has seen: each throttle keeps the set of its *active* keys (touched since the last gauge
//! reading, or holding a slot or a non-zero counter then), and the gauges sum over those only.

use std::collections::{BTreeMap, BTreeSet};

use outagelab_model::throttle::{
    AtomicThrottle, Decision, KvAcquire, KvKey, KvStore, KvThrottle, PendingAcquire,
    PendingRelease, Slot, Stored, ThrottleConfig, ThrottleStats, Write,
};
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::ThrottleSummary;

use crate::rng::Stream;
use crate::scenario::{Distribution, KvStoreId, Scenario, ThrottleForm, ThrottleId};

/// A slot a request holds.
pub(crate) struct Held {
    throttle: ThrottleId,
    key: KvKey,
    slot: Slot,
}

impl Held {
    /// The throttle that issued it.
    pub fn throttle(&self) -> ThrottleId {
        self.throttle
    }
}

/// The KV step a request waits on.
pub(crate) enum Phase {
    ReadForAcquire(PendingAcquire),
    WriteIncrement(Write),
    ReadForRelease(PendingRelease),
    WriteDecrement(Write),
}

/// Where a throttle step stands after a call.
pub(crate) enum Progress {
    /// Admitted: the request holds the slot and goes on.
    Admitted(Held),
    /// Rejected: answer 429 with this Retry-After.
    Rejected { retry_after: SimDuration },
    /// The step is done (a release, or a disabled throttle).
    Done,
    /// Wait this long, then call [`Throttles::resume`] with the phase. `admitted` is a slot the
    /// request holds from now on (an acquire waiting for its increment to land).
    Wait {
        after: SimDuration,
        throttle: ThrottleId,
        key: KvKey,
        phase: Phase,
        admitted: Option<Held>,
    },
}

enum Counters {
    Atomic(AtomicThrottle),
    Kv(KvThrottle),
}

impl Counters {
    fn stats(&self) -> ThrottleStats {
        match self {
            Counters::Atomic(throttle) => throttle.stats(),
            Counters::Kv(throttle) => throttle.stats(),
        }
    }
}

struct ThrottleSlot {
    enabled: bool,
    form: ThrottleForm,
    /// Chance (in thousandths) that a release is lost.
    release_loss_permille: u32,
    /// One throttle per key, created on first use.
    per_key: BTreeMap<KvKey, Counters>,
    /// Keys that may hold a slot or a non-zero counter (see the module documentation).
    active: BTreeSet<KvKey>,
    /// Acquires rejected while fewer than the cap truly held a slot of their key: the slots
    /// the counter still counts were leaked (or a stale read overcounted).
    rejected_below_cap: u64,
    random: Stream,
}

struct StoreSlot {
    store: KvStore,
    read_latency: Distribution,
    write_latency: Distribution,
    random: Stream,
}

impl StoreSlot {
    fn read_after(&mut self) -> SimDuration {
        self.random.duration(&self.read_latency)
    }

    fn write_after(&mut self) -> SimDuration {
        self.random.duration(&self.write_latency)
    }

    /// How far behind the latest write a read is: uniform up to the store's staleness.
    fn lag(&mut self) -> SimDuration {
        let max = self.store.staleness_max().as_nanos();
        SimDuration::from_nanos(self.random.below(max.saturating_add(1)))
    }
}

pub(crate) struct Throttles {
    throttles: Vec<ThrottleSlot>,
    stores: Vec<StoreSlot>,
    /// The configs, for creating per-key throttles.
    configs: Vec<ThrottleConfig>,
    /// The store key the last KV throttle created counts under: one per (throttle, key).
    last_store_key: KvKey,
}

impl Throttles {
    pub fn new(scenario: &Scenario) -> Throttles {
        Throttles {
            throttles: scenario
                .throttles
                .iter()
                .map(|spec| ThrottleSlot {
                    enabled: spec.enabled,
                    form: spec.form,
                    release_loss_permille: spec.release_loss_permille,
                    per_key: BTreeMap::new(),
                    active: BTreeSet::new(),
                    rejected_below_cap: 0,
                    random: Stream::derive(scenario.seed, "throttle", &spec.name),
                })
                .collect(),
            stores: scenario
                .kv_stores
                .iter()
                .map(|spec| StoreSlot {
                    store: KvStore::new(spec.staleness_max),
                    read_latency: spec.read_latency,
                    write_latency: spec.write_latency,
                    random: Stream::derive(scenario.seed, "kv_store", &spec.name),
                })
                .collect(),
            configs: scenario.throttles.iter().map(|spec| spec.config).collect(),
            last_store_key: 0,
        }
    }

    /// The throttle of `key`, created on first use; the key counts as active from now.
    fn counters(&mut self, id: ThrottleId, key: KvKey) -> &mut Counters {
        let config = self.configs[id.index()];
        let slot = &mut self.throttles[id.index()];
        let form = slot.form;
        slot.active.insert(key);
        let last_store_key = &mut self.last_store_key;
        slot.per_key.entry(key).or_insert_with(|| match form {
            ThrottleForm::Atomic => Counters::Atomic(AtomicThrottle::new(config)),
            ThrottleForm::Kv { .. } => {
                *last_store_key += 1;
                Counters::Kv(KvThrottle::new(config, *last_store_key))
            }
        })
    }

    /// Counts a rejection of `key`, and whether it came while fewer than the cap held a slot.
    fn rejected(&mut self, id: ThrottleId, key: KvKey, retry_after: SimDuration) -> Progress {
        let cap = u64::from(self.configs[id.index()].inflight_max());
        if self.counters(id, key).stats().holders < cap {
            self.throttles[id.index()].rejected_below_cap += 1;
        }
        Progress::Rejected { retry_after }
    }

    fn store_of(&self, id: ThrottleId) -> Option<KvStoreId> {
        match self.throttles[id.index()].form {
            ThrottleForm::Atomic => None,
            ThrottleForm::Kv { store } => Some(store),
        }
    }

    /// A request asks for a slot of `key`.
    pub fn acquire(&mut self, now: SimTime, id: ThrottleId, key: KvKey) -> Progress {
        if !self.throttles[id.index()].enabled {
            return Progress::Done;
        }
        let store = self.store_of(id);
        match self.counters(id, key) {
            Counters::Atomic(throttle) => match throttle.try_acquire(now) {
                Decision::Admit(slot) => Progress::Admitted(Held {
                    throttle: id,
                    key,
                    slot,
                }),
                Decision::Reject(rejection) => self.rejected(id, key, rejection.retry_after),
            },
            Counters::Kv(throttle) => {
                let pending = throttle.begin_acquire(now);
                let store = store.expect("a KV throttle has a store");
                Progress::Wait {
                    after: self.stores[store.index()].read_after(),
                    throttle: id,
                    key,
                    phase: Phase::ReadForAcquire(pending),
                    admitted: None,
                }
            }
        }
    }

    /// A request gives its slot back (or loses the release, by chance).
    pub fn release(&mut self, now: SimTime, held: Held) -> Progress {
        let Held {
            throttle: id,
            key,
            slot,
        } = held;
        let entry = &mut self.throttles[id.index()];
        let lost = entry.random.below(1000) < u64::from(entry.release_loss_permille);
        let store = self.store_of(id);
        match self.counters(id, key) {
            Counters::Atomic(throttle) => {
                if lost {
                    throttle.lose_release(slot);
                } else {
                    throttle.release(now, slot);
                }
                Progress::Done
            }
            Counters::Kv(throttle) => {
                let pending = throttle.release(now, slot);
                if lost {
                    throttle.lose_release(pending);
                    return Progress::Done;
                }
                let store = store.expect("a KV throttle has a store");
                Progress::Wait {
                    after: self.stores[store.index()].read_after(),
                    throttle: id,
                    key,
                    phase: Phase::ReadForRelease(pending),
                    admitted: None,
                }
            }
        }
    }

    /// A request ended holding a slot without releasing it: the slot leaks.
    pub fn leak(&mut self, now: SimTime, held: Held) {
        let Held {
            throttle: id,
            key,
            slot,
        } = held;
        match self.counters(id, key) {
            Counters::Atomic(throttle) => throttle.lose_release(slot),
            Counters::Kv(throttle) => {
                let pending = throttle.release(now, slot);
                throttle.lose_release(pending);
            }
        }
    }

    fn kv(&mut self, id: ThrottleId, key: KvKey) -> &mut KvThrottle {
        match self.counters(id, key) {
            Counters::Kv(throttle) => throttle,
            Counters::Atomic(_) => unreachable!("only KV throttles have steps to resume"),
        }
    }

    /// Reads the counter of `key` from the throttle's store as a read at `now` sees it, and
    /// draws how long the write that follows will take.
    fn read(&mut self, now: SimTime, id: ThrottleId, key: KvKey) -> (Option<Stored>, SimDuration) {
        let store_key = self.kv(id, key).key();
        let store_id = self.store_of(id).expect("a KV throttle has a store");
        let store = &mut self.stores[store_id.index()];
        let lag = store.lag();
        (store.store.get(now, store_key, lag), store.write_after())
    }

    /// A write of `key`'s counter lands; the key is active again (its counter may now be
    /// non-zero).
    fn land(&mut self, now: SimTime, id: ThrottleId, key: KvKey, write: Write) {
        self.throttles[id.index()].active.insert(key);
        let store_id = self.store_of(id).expect("a KV throttle has a store");
        self.stores[store_id.index()].store.apply(now, write);
    }

    /// The wait of a KV step is over: take the next step.
    pub fn resume(&mut self, now: SimTime, id: ThrottleId, key: KvKey, phase: Phase) -> Progress {
        match phase {
            Phase::ReadForAcquire(pending) => {
                let (read, write_after) = self.read(now, id, key);
                match self.kv(id, key).finish_acquire(now, pending, read) {
                    // The slot is held from now; the request waits for its increment to land,
                    // as the plan's `await kv.put(...)` does.
                    KvAcquire::Admit { slot, write } => Progress::Wait {
                        after: write_after,
                        throttle: id,
                        key,
                        phase: Phase::WriteIncrement(write),
                        admitted: Some(Held {
                            throttle: id,
                            key,
                            slot,
                        }),
                    },
                    KvAcquire::Reject(rejection) => self.rejected(id, key, rejection.retry_after),
                }
            }
            Phase::ReadForRelease(pending) => {
                let (read, write_after) = self.read(now, id, key);
                let write = self.kv(id, key).finish_release(now, pending, read);
                Progress::Wait {
                    after: write_after,
                    throttle: id,
                    key,
                    phase: Phase::WriteDecrement(write),
                    admitted: None,
                }
            }
            Phase::WriteIncrement(write) | Phase::WriteDecrement(write) => {
                self.land(now, id, key, write);
                Progress::Done
            }
        }
    }

    /// Slots held right now, and the stored counters as an up-to-date read sees them now, over
    /// every key of the throttle (the counters are above the holders by the slots leaked, and
    /// below them by holders the counter lost). Walks the active keys only, and forgets those
    /// that hold nothing and count nothing: they become active again when next touched.
    pub fn gauges(&mut self, now: SimTime, id: ThrottleId) -> (u64, u64) {
        let store = self
            .store_of(id)
            .map(|store| &self.stores[store.index()].store);
        let slot = &mut self.throttles[id.index()];
        let (mut holders, mut counter) = (0, 0);
        let per_key = &slot.per_key;
        slot.active.retain(|key| {
            let counters = &per_key[key];
            let held = counters.stats().holders;
            let counted = match (counters, store) {
                (Counters::Atomic(throttle), _) => throttle.counter(now),
                (Counters::Kv(throttle), Some(store)) => throttle.counter(now, store),
                (Counters::Kv(_), None) => unreachable!("a KV throttle has a store"),
            };
            holders += held;
            counter += counted;
            held > 0 || counted > 0
        });
        (holders, counter)
    }

    pub fn summary(&self, id: ThrottleId) -> ThrottleSummary {
        let slot = &self.throttles[id.index()];
        let mut summary = ThrottleSummary {
            enabled: slot.enabled,
            rejected_below_cap: slot.rejected_below_cap,
            ..ThrottleSummary::default()
        };
        for counters in slot.per_key.values() {
            let stats = counters.stats();
            summary.admitted += stats.admitted;
            summary.rejected += stats.rejected;
            summary.releases_lost += stats.releases_lost;
            summary.peak_holders = summary.peak_holders.max(stats.holders_peak);
        }
        summary
    }
}

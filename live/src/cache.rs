//! The in-process cache (an L1), live: [`outagelab_model::cache::Cache`] behind a mutex (held
//! for one model call), with `now` from a [`Clock`]. The model decides what is stored, served,
//! expired and evicted, and counts; this module reads the clock. Entries carry the version the
//! caller gives them, as in the simulator (a live run, which follows no data versions, gives 0).

use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::cache::{Cache, CacheConfig, CacheCounters, CacheKey, Insert, Lookup};

use crate::clock::{Clock, TokioClock};

pub struct LiveCache<C: Clock = TokioClock> {
    cache: Mutex<Cache>,
    clock: C,
}

impl LiveCache<TokioClock> {
    pub fn new(config: CacheConfig) -> Self {
        Self::with_clock(config, TokioClock::start_now())
    }
}

impl<C: Clock> LiveCache<C> {
    pub fn with_clock(config: CacheConfig, clock: C) -> Self {
        LiveCache {
            cache: Mutex::new(Cache::new(config)),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Reads `key` now: a live entry, nothing, or an entry that has just expired.
    pub fn get(&self, key: CacheKey) -> Lookup {
        let now = self.clock.now();
        self.lock().get(now, key)
    }

    /// Stores `bytes` of `version` under `key` now, making room as the model does.
    pub fn insert(&self, key: CacheKey, version: u64, bytes: u64) -> Insert {
        let now = self.clock.now();
        self.lock().insert(now, key, version, bytes)
    }

    /// Removes `key`'s entry; whether there was one.
    pub fn invalidate(&self, key: CacheKey) -> bool {
        self.lock().invalidate(key)
    }

    /// Removes every entry; how many there were.
    pub fn flush(&self) -> usize {
        self.lock().flush()
    }

    /// Entries held now (expired ones not yet reclaimed included, as the model counts them).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub fn counters(&self) -> CacheCounters {
        self.lock().counters()
    }
}

//! A server's keys, and the commands and replies that read and write them; the memory the keys
//! take, and what the server does over its `maxmemory`.
//!
//! One table per key family, allocated on the first write to the family. A key is live until
//! its expiry instant (exclusive).
//!
//! Memory: each live key takes `key_bytes + value bytes + key_overhead` ([`MemorySpec`]).
//! Expiry is exact: before every command, and whenever its memory is read, the server removes
//! every key whose expiry instant has come (counted in `expired_keys`). Redis' lazy expiry plus
//! its sampled active cycle reach the same keys a little later; this is the limit it tends to.
//!
//! Over `maxmemory`, before every command (as Redis' `processCommand` calls
//! `performEvictions`), the server evicts keys per its policy until its memory is at or under
//! the limit. If it cannot (`noeviction`, or a `volatile-*` policy with no key that has a TTL),
//! a command flagged `denyoom` ([`RedisCommand::denyoom`]) gets an OOM error reply; reads and
//! `DEL` still run. A command may take the memory over the limit (a large `SET` just under
//! it): the next command evicts.
//!
//! Choosing a victim: `allkeys-random` draws one candidate; the LRU and TTL policies draw
//! `maxmemory_samples` candidates, with replacement, and evict the least recently used (the
//! soonest to expire; the first drawn on a tie), or with exact sampling take the best of all
//! candidates from an ordered index. Draws come from the server's own seeded stream, from a
//! dense vector of candidate keys (live keys, and live keys with a TTL) kept with swap-remove
//! positions, so a draw is O(1) and memory grows with the number of keys only. (Redis keeps a
//! pool of 16 good candidates across evictions; sampling afresh each time is a little less
//! accurate than that pool, and exact sampling is the bound both tend to.)

use std::collections::BTreeSet;

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::Outcome;

use super::locks::LockTable;
use crate::kernel::StepResult;
use crate::rng::Stream;
use crate::scenario::{
    ErrorReply, EvictionPolicy, EvictionSamples, MemorySpec, Preload, RedisCommand,
};

/// Size of a reply without a value (`+OK`, `:1`, `$-1`), in bytes.
const REPLY_OVERHEAD_BYTES: u64 = 8;
/// Bytes of a message pushed to a subscriber beyond the reply overhead (channel and key).
const PUSH_BYTES: u64 = 48;
/// Bytes of an `INCR` counter's value.
const COUNTER_VALUE_BYTES: u32 = 8;

/// One command as the server sees it: what to do to which key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub command: RedisCommand,
    pub family: u32,
    pub index: u32,
    /// The version of the value a `SET` writes (see `crate::versions`); 0 when unknown.
    pub version: u64,
}

impl Op {
    /// Bytes the command puts on the wire (its value included).
    pub fn request_bytes(self) -> u64 {
        self.command.request_bytes()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    Ok,
    Hit {
        value_bytes: u32,
        /// The version of the value it read (0 when unknown).
        version: u64,
    },
    Miss,
    /// `SET NX` found the key taken.
    NotSet,
    /// An error reply: the command did not run.
    Error(ErrorReply),
    /// Not a reply: a message pushed to a subscriber (a published key, or a tracking
    /// invalidation), naming a key.
    Push {
        family: u32,
        index: u32,
    },
}

impl Reply {
    /// Bytes the reply puts on the wire (its value included).
    pub(super) fn bytes(self) -> u64 {
        REPLY_OVERHEAD_BYTES
            + match self {
                Reply::Hit { value_bytes, .. } => u64::from(value_bytes),
                Reply::Error(error) => error.message().len() as u64,
                Reply::Push { .. } => PUSH_BYTES,
                Reply::Ok | Reply::Miss | Reply::NotSet => 0,
            }
    }

    pub(super) fn result(self) -> StepResult {
        match self {
            Reply::Ok => StepResult::Ok,
            Reply::Hit { .. } => StepResult::Hit,
            Reply::Miss => StepResult::Miss,
            Reply::NotSet => StepResult::Error(Outcome::LockBusy),
            Reply::Error(error) => StepResult::Error(error.outcome()),
            Reply::Push { .. } => unreachable!("a push answers no command"),
        }
    }
}

/// A key: its family and its index in the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    family: u32,
    index: u32,
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    /// 0: no key. `u64::MAX`: no expiry. Otherwise the instant (ns) the key expires.
    expires_at: u64,
    value_bytes: u32,
    /// The version of the value a `SET` wrote (0 for other writes).
    version: u64,
    counter: i64,
    /// When a command last read or wrote it (ns).
    last_access: u64,
    /// Its place in `Keyspace::live`, while it is live.
    live_slot: u32,
    /// Its place in `Keyspace::volatile`, while it is live with an expiry.
    volatile_slot: u32,
}

impl Entry {
    fn present(&self) -> bool {
        self.expires_at != 0
    }

    fn volatile(&self) -> bool {
        self.present() && self.expires_at != u64::MAX
    }
}

/// A server's memory counters over the run (Redis' `INFO` names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct MemoryStats {
    pub used_memory_peak: u64,
    pub evicted_keys: u64,
    pub expired_keys: u64,
    pub oom_replies: u64,
    /// For the run's log: when the server first found itself over its limit, first evicted a
    /// key, first refused a command with OOM.
    pub first_over_limit: Option<SimTime>,
    pub first_eviction: Option<SimTime>,
    pub first_oom: Option<SimTime>,
}

/// A server's keys: one table per key family, allocated on first write.
pub(super) struct Keyspace {
    families: Vec<Vec<Entry>>,
    /// Keys per family (the size of its table once allocated).
    counts: Vec<u32>,
    /// The lock keys, apart from the plain ones.
    pub(super) locks: LockTable,
    memory: MemorySpec,
    /// The limit in force (a `maxmemory` fault changes it).
    maxmemory: Option<u64>,
    /// Every live key, in no order; an entry knows its place (`live_slot`).
    live: Vec<Key>,
    /// Every live key with an expiry; an entry knows its place (`volatile_slot`).
    volatile: Vec<Key>,
    /// Every live key with an expiry, soonest first: what expires next.
    expiries: BTreeSet<(u64, Key)>,
    /// With exact LRU eviction only: the policy's candidates, least recently used first.
    lru: Option<BTreeSet<(u64, Key)>>,
    used_memory: u64,
    /// Set when `used_memory` or the expired and evicted counts may have changed (a key
    /// stored, removed or all cleared), until the observer takes it: what lets it skip a
    /// server whose memory series cannot have moved.
    memory_changed: bool,
    /// Set when the soonest expiry may have moved sooner (a key stored with an expiry), when
    /// an expiry event for the server has fired, and at the start, until [`Redis`] takes it:
    /// what lets it skip, after an event, a server whose next expiry cannot need an earlier
    /// event. Removing keys only moves the soonest expiry later, which the pending event
    /// covers.
    ///
    /// [`Redis`]: super::Redis
    expiry_check: bool,
    /// Draws eviction candidates.
    rng: Stream,
    pub(super) stats: MemoryStats,
}

impl Keyspace {
    pub(super) fn new(counts: Vec<u32>, memory: MemorySpec, rng: Stream) -> Self {
        let exact_lru = memory.samples == EvictionSamples::Exact
            && matches!(
                memory.policy,
                EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru
            );
        Keyspace {
            families: counts.iter().map(|_| Vec::new()).collect(),
            counts,
            locks: LockTable::default(),
            maxmemory: memory.maxmemory,
            memory,
            live: Vec::new(),
            volatile: Vec::new(),
            expiries: BTreeSet::new(),
            lru: exact_lru.then(BTreeSet::new),
            used_memory: 0,
            memory_changed: true,
            expiry_check: true,
            rng,
            stats: MemoryStats::default(),
        }
    }

    /// Bytes the live keys take (after the last `expire_due`).
    pub(super) fn used_memory(&self) -> u64 {
        self.used_memory
    }

    /// Whether the memory series may have changed since the last call, and clears the mark.
    pub(super) fn take_memory_changed(&mut self) -> bool {
        std::mem::take(&mut self.memory_changed)
    }

    /// Whether the next expiry must be looked at ([`Keyspace::mark_expiry_check`]), and
    /// clears the mark.
    pub(super) fn take_expiry_check(&mut self) -> bool {
        std::mem::take(&mut self.expiry_check)
    }

    /// The server's pending expiry event has fired: its next expiry must be looked at.
    pub(super) fn mark_expiry_check(&mut self) {
        self.expiry_check = true;
    }

    pub(super) fn maxmemory(&self) -> Option<u64> {
        self.maxmemory
    }

    /// `CONFIG SET maxmemory`: the new limit, and evictions at once to get under it.
    pub(super) fn set_maxmemory(&mut self, now: SimTime, maxmemory: Option<u64>) {
        self.maxmemory = maxmemory;
        self.expire_due(now);
        self.make_room(now);
    }

    /// The process starts again: with `persistence` it keeps its keys, without it has none;
    /// either way its limit is the configured one again (`CONFIG SET` is not persisted).
    pub(super) fn restart(&mut self, now: SimTime, persistence: bool) {
        if !persistence {
            self.clear();
        }
        self.maxmemory = self.memory.maxmemory;
        self.expire_due(now);
    }

    /// Forgets every key (`FLUSHALL`, or a restart without persistence).
    pub(super) fn clear(&mut self) {
        for family in &mut self.families {
            *family = Vec::new();
        }
        self.locks.clear();
        self.live = Vec::new();
        self.volatile = Vec::new();
        self.expiries.clear();
        if let Some(lru) = &mut self.lru {
            lru.clear();
        }
        self.used_memory = 0;
        self.memory_changed = true;
    }

    /// Stores the first `count` keys of a family, without expiry.
    pub(super) fn preload(&mut self, preload: Preload) {
        for index in 0..preload.count {
            let key = Key {
                family: preload.family.0,
                index,
            };
            self.store(SimTime::ZERO, key, preload.value_bytes, 0, u64::MAX);
        }
    }

    /// The entry of `key`, present or not. A family's table grows on demand, doubling up to
    /// the family's count, so that a family of a million keys of which a thousand are used
    /// (a preload of the hot ones) holds a thousand entries, not a million.
    fn entry(&mut self, key: Key) -> &mut Entry {
        let table = &mut self.families[key.family as usize];
        let index = key.index as usize;
        if index >= table.len() {
            let count = self.counts[key.family as usize] as usize;
            let len = (index + 1)
                .next_power_of_two()
                .max(64)
                .min(count.max(index + 1));
            table.resize(len, Entry::default());
        }
        &mut table[index]
    }

    fn cost(&self, value_bytes: u32) -> u64 {
        u64::from(self.memory.key_bytes)
            + u64::from(value_bytes)
            + u64::from(self.memory.key_overhead)
    }

    /// Whether the exact LRU index holds a key with (`volatile`) or without an expiry.
    fn lru_tracks(&self, volatile: bool) -> bool {
        self.lru.is_some() && (self.memory.policy == EvictionPolicy::AllKeysLru || volatile)
    }

    /// Writes `key` (a new one, or over a live one): its value, its expiry, its access.
    fn store(&mut self, now: SimTime, key: Key, value_bytes: u32, version: u64, expires_at: u64) {
        let added = self.cost(value_bytes);
        let old = *self.entry(key);
        self.memory_changed = true;
        if old.present() {
            self.used_memory -= self.cost(old.value_bytes);
            if old.volatile() {
                self.unlist_volatile(key);
            }
            if self.lru_tracks(old.volatile())
                && let Some(lru) = &mut self.lru
            {
                lru.remove(&(old.last_access, key));
            }
        } else {
            self.live.push(key);
        }
        let live_slot = if old.present() {
            old.live_slot
        } else {
            (self.live.len() - 1) as u32
        };
        self.used_memory += added;
        self.stats.used_memory_peak = self.stats.used_memory_peak.max(self.used_memory);
        let entry = Entry {
            expires_at,
            value_bytes,
            version,
            counter: 0,
            last_access: now.as_nanos(),
            live_slot,
            volatile_slot: self.volatile.len() as u32,
        };
        *self.entry(key) = entry;
        if entry.volatile() {
            self.volatile.push(key);
            self.expiries.insert((expires_at, key));
            self.expiry_check = true;
        }
        if self.lru_tracks(entry.volatile())
            && let Some(lru) = &mut self.lru
        {
            lru.insert((entry.last_access, key));
        }
    }

    /// A command read or wrote a live key: it is now the most recently used.
    fn touch(&mut self, now: SimTime, key: Key) {
        let entry = *self.entry(key);
        if self.lru_tracks(entry.volatile())
            && let Some(lru) = &mut self.lru
        {
            lru.remove(&(entry.last_access, key));
            lru.insert((now.as_nanos(), key));
        }
        self.entry(key).last_access = now.as_nanos();
    }

    /// Removes a live key (deleted, expired or evicted) and frees its memory.
    fn remove(&mut self, key: Key) {
        let entry = *self.entry(key);
        if !entry.present() {
            return;
        }
        // (Expiry and eviction count their keys only after a removal, so this marks theirs.)
        self.memory_changed = true;
        self.used_memory -= self.cost(entry.value_bytes);
        let slot = entry.live_slot as usize;
        self.live.swap_remove(slot);
        if let Some(&moved) = self.live.get(slot) {
            self.entry(moved).live_slot = slot as u32;
        }
        if entry.volatile() {
            self.unlist_volatile(key);
        }
        if self.lru_tracks(entry.volatile())
            && let Some(lru) = &mut self.lru
        {
            lru.remove(&(entry.last_access, key));
        }
        *self.entry(key) = Entry::default();
    }

    /// Takes a live key with an expiry out of the volatile vector and the expiry index.
    fn unlist_volatile(&mut self, key: Key) {
        let entry = *self.entry(key);
        let slot = entry.volatile_slot as usize;
        self.volatile.swap_remove(slot);
        if let Some(&moved) = self.volatile.get(slot) {
            self.entry(moved).volatile_slot = slot as u32;
        }
        self.expiries.remove(&(entry.expires_at, key));
    }

    /// The earliest instant a key expires at, if any key has an expiry.
    pub(super) fn next_expiry(&self) -> Option<SimTime> {
        (self.expiries.first()).map(|&(at, _)| SimTime::from_nanos(at))
    }

    /// Removes every key whose expiry instant has come by `now`.
    pub(super) fn expire_due(&mut self, now: SimTime) {
        while let Some(&(expires_at, key)) = self.expiries.first()
            && expires_at <= now.as_nanos()
        {
            self.remove(key);
            self.stats.expired_keys += 1;
        }
    }

    /// Evicts per the policy until the memory is at or under the limit; false when it cannot
    /// (no limit: true). Bound: each round evicts a key.
    fn make_room(&mut self, now: SimTime) -> bool {
        let Some(maxmemory) = self.maxmemory else {
            return true;
        };
        if self.used_memory > maxmemory {
            self.stats.first_over_limit.get_or_insert(now);
        }
        while self.used_memory > maxmemory {
            let Some(victim) = self.victim() else {
                return false;
            };
            self.remove(victim);
            self.stats.evicted_keys += 1;
            self.stats.first_eviction.get_or_insert(now);
        }
        true
    }

    /// The key the policy evicts next; `None` when it has no candidate.
    fn victim(&mut self) -> Option<Key> {
        let policy = self.memory.policy;
        let candidates = match policy {
            EvictionPolicy::NoEviction => return None,
            EvictionPolicy::AllKeysLru | EvictionPolicy::AllKeysRandom => &self.live,
            EvictionPolicy::VolatileLru | EvictionPolicy::VolatileTtl => &self.volatile,
        };
        if candidates.is_empty() {
            return None;
        }
        let draw = |rng: &mut Stream| candidates[rng.below(candidates.len() as u64) as usize];
        let samples = match (policy, self.memory.samples) {
            (EvictionPolicy::AllKeysRandom, _) => return Some(draw(&mut self.rng)),
            (EvictionPolicy::VolatileTtl, EvictionSamples::Exact) => {
                return self.expiries.first().map(|&(_, key)| key);
            }
            (_, EvictionSamples::Exact) => {
                return self.lru.as_ref()?.first().map(|&(_, key)| key);
            }
            (_, EvictionSamples::Sampled(samples)) => samples.get(),
        };
        // Lower is evicted first: the oldest access, or the soonest expiry.
        let score = |entry: &Entry| match policy {
            EvictionPolicy::VolatileTtl => entry.expires_at,
            _ => entry.last_access,
        };
        let mut best: Option<(u64, Key)> = None;
        for _ in 0..samples {
            let key = draw(&mut self.rng);
            let entry = &self.families[key.family as usize][key.index as usize];
            let scored = (score(entry), key);
            if best.is_none_or(|(best_score, _)| scored.0 < best_score) {
                best = Some(scored);
            }
        }
        best.map(|(_, key)| key)
    }

    /// Runs `op` at `now` as the server does: keys due expire, the server evicts if it is
    /// over its limit, and a command that may grow memory is refused with OOM when it could
    /// not get under it.
    pub(super) fn execute(&mut self, now: SimTime, op: Op) -> Reply {
        self.expire_due(now);
        if !self.make_room(now) && op.command.denyoom() {
            self.stats.oom_replies += 1;
            self.stats.first_oom.get_or_insert(now);
            return Reply::Error(ErrorReply::Oom);
        }
        self.run(now, op)
    }

    /// Applies a write its primary ran: a replica applies what the primary sends whatever its
    /// own memory (Redis' `replica-ignore-maxmemory yes`); keys due expire first.
    pub(super) fn replicate(&mut self, now: SimTime, op: Op) {
        self.expire_due(now);
        self.run(now, op);
    }

    /// Executes `op` at `now`, whatever the memory (keys due expire first): for tests of the
    /// commands apart from the memory limit.
    #[cfg(test)]
    pub(super) fn apply(&mut self, now: SimTime, op: Op) -> Reply {
        self.expire_due(now);
        self.run(now, op)
    }

    /// Executes `op` at `now`; the keys due have expired already.
    fn run(&mut self, now: SimTime, op: Op) -> Reply {
        if let RedisCommand::Lock(command) = op.command {
            return self.locks.apply(now, op.family, op.index, command);
        }
        let expiry = |ttl: Option<SimDuration>| {
            ttl.map_or(u64::MAX, |ttl| now.saturating_add(ttl).as_nanos().max(1))
        };
        let key = Key {
            family: op.family,
            index: op.index,
        };
        let entry = *self.entry(key);
        let live = entry.present();
        match op.command {
            RedisCommand::Get if live => {
                self.touch(now, key);
                Reply::Hit {
                    value_bytes: entry.value_bytes,
                    version: entry.version,
                }
            }
            RedisCommand::Get => Reply::Miss,
            RedisCommand::Set { value_bytes, ttl } => {
                self.store(now, key, value_bytes, op.version, expiry(ttl));
                Reply::Ok
            }
            RedisCommand::SetNxPx { .. } if live => {
                self.touch(now, key);
                Reply::NotSet
            }
            RedisCommand::SetNxPx { value_bytes, ttl } => {
                self.store(now, key, value_bytes, 0, expiry(Some(ttl)));
                Reply::Ok
            }
            RedisCommand::Incr => {
                if live {
                    self.touch(now, key);
                } else {
                    self.store(now, key, COUNTER_VALUE_BYTES, 0, u64::MAX);
                }
                let entry = self.entry(key);
                entry.counter = entry.counter.saturating_add(1);
                Reply::Ok
            }
            RedisCommand::Del => {
                self.remove(key);
                Reply::Ok
            }
            // The server delivers the message (`Redis::publish`); no key changes.
            RedisCommand::Publish { .. } => Reply::Ok,
            RedisCommand::Lock(_) => unreachable!("lock commands go to the lock table"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::KeyFamilyId;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    /// A keyspace of one family of `count` keys, with the default memory settings.
    fn keyspace(count: u32) -> Keyspace {
        with_memory(count, MemorySpec::DEFAULT)
    }

    fn with_memory(count: u32, memory: MemorySpec) -> Keyspace {
        Keyspace::new(vec![count], memory, Stream::derive(1, "server", "redis"))
    }

    fn op(command: RedisCommand, index: u32) -> Op {
        Op {
            command,
            family: 0,
            index,
            version: 0,
        }
    }

    fn set(value_bytes: u32, ttl_ms: Option<u64>) -> RedisCommand {
        RedisCommand::Set {
            value_bytes,
            ttl: ttl_ms.map(SimDuration::from_millis),
        }
    }

    fn set_nx(value_bytes: u32, ttl_ms: u64) -> RedisCommand {
        RedisCommand::SetNxPx {
            value_bytes,
            ttl: SimDuration::from_millis(ttl_ms),
        }
    }

    /// Applies each `(ms, command, key index)` in turn on a family of 4 keys; returns the replies.
    fn check(steps: &[(u64, RedisCommand, u32)], expected: &[Reply]) {
        let mut keyspace = keyspace(4);
        let replies: Vec<Reply> = steps
            .iter()
            .map(|&(at, command, index)| keyspace.apply(ms(at), op(command, index)))
            .collect();
        assert_eq!(replies, expected);
    }

    #[test]
    fn get_reads_what_set_wrote_and_del_removed() {
        use RedisCommand::{Del, Get};
        check(
            &[
                (0, Get, 1),
                (0, set(100, None), 1),
                (1, Get, 1),
                (1, Get, 2), // another key of the family
                (2, Del, 1),
                (3, Get, 1),
            ],
            &[
                Reply::Miss,
                Reply::Ok,
                Reply::Hit {
                    value_bytes: 100,
                    version: 0,
                },
                Reply::Miss,
                Reply::Ok,
                Reply::Miss,
            ],
        );
    }

    #[test]
    fn a_key_is_live_until_its_expiry_instant_exclusive() {
        use RedisCommand::Get;
        check(
            &[(10, set(5, Some(20)), 0), (29, Get, 0), (30, Get, 0)],
            &[
                Reply::Ok,
                Reply::Hit {
                    value_bytes: 5,
                    version: 0,
                },
                Reply::Miss,
            ],
        );
    }

    #[test]
    fn set_nx_sets_only_a_missing_or_expired_key() {
        check(
            &[
                (0, set_nx(1, 100), 0),
                (50, set_nx(2, 100), 0),  // held: the lock is busy
                (100, set_nx(3, 100), 0), // expired at 100: taken again
                (150, RedisCommand::Get, 0),
            ],
            &[
                Reply::Ok,
                Reply::NotSet,
                Reply::Ok,
                Reply::Hit {
                    value_bytes: 3,
                    version: 0,
                },
            ],
        );
        assert_eq!(Reply::NotSet.result(), StepResult::Error(Outcome::LockBusy));
    }

    #[test]
    fn incr_counts_from_zero_and_makes_the_key_live() {
        let mut keyspace = keyspace(4);
        for _ in 0..3 {
            assert_eq!(keyspace.apply(ms(0), op(RedisCommand::Incr, 3)), Reply::Ok);
        }
        assert_eq!(
            keyspace
                .entry(Key {
                    family: 0,
                    index: 3
                })
                .counter,
            3
        );
        assert_eq!(
            keyspace.apply(ms(1), op(RedisCommand::Get, 3)),
            Reply::Hit {
                value_bytes: 8,
                version: 0
            }
        );
    }

    /// A family's table holds the keys in use, not the family's count: 1,000 hot keys of a
    /// billion cost about a thousand entries, and a key far out grows it only to there.
    #[test]
    fn a_familys_table_grows_with_the_keys_used() {
        let mut large = keyspace(1_000_000_000);
        large.preload(Preload {
            family: KeyFamilyId(0),
            count: 1000,
            value_bytes: 7,
        });
        assert_eq!(large.families[0].len(), 1024);
        large.apply(ms(1), op(set(7, None), 5000));
        assert_eq!(large.families[0].len(), 8192);
        assert_consistent(&large);
        // A small family is held whole.
        let mut small = keyspace(3);
        small.apply(ms(1), op(set(7, None), 2));
        assert_eq!(small.families[0].len(), 3);
    }

    #[test]
    fn preloaded_keys_never_expire_and_clear_forgets_them() {
        let mut keyspace = keyspace(4);
        keyspace.preload(Preload {
            family: KeyFamilyId(0),
            count: 2,
            value_bytes: 7,
        });
        let get = |keyspace: &mut Keyspace, index| {
            keyspace.apply(
                SimTime::from_nanos(u64::MAX - 1),
                op(RedisCommand::Get, index),
            )
        };
        assert_eq!(
            get(&mut keyspace, 1),
            Reply::Hit {
                value_bytes: 7,
                version: 0
            }
        );
        assert_eq!(get(&mut keyspace, 2), Reply::Miss);
        keyspace.clear();
        assert_eq!(get(&mut keyspace, 0), Reply::Miss);
    }

    #[test]
    fn wire_sizes_count_the_value_once() {
        assert_eq!(op(set(2 << 20, None), 0).request_bytes(), 32 + (2 << 20));
        assert_eq!(op(RedisCommand::Get, 0).request_bytes(), 32);
        assert_eq!(
            Reply::Hit {
                value_bytes: 100,
                version: 0
            }
            .bytes(),
            108
        );
        assert_eq!(Reply::Miss.bytes(), 8);
    }

    // Memory. Keys cost 16 bytes of name and 64 of overhead (the defaults): a SET of 100
    // bytes takes 180.

    /// A limit of `maxmemory` bytes with `policy`, sampling `samples` keys (`None`: exact).
    fn limited(
        count: u32,
        maxmemory: u64,
        policy: EvictionPolicy,
        samples: Option<u32>,
    ) -> Keyspace {
        with_memory(
            count,
            MemorySpec {
                maxmemory: Some(maxmemory),
                policy,
                samples: samples.map_or(EvictionSamples::Exact, |n| {
                    EvictionSamples::Sampled(std::num::NonZeroU32::new(n).unwrap())
                }),
                ..MemorySpec::DEFAULT
            },
        )
    }

    /// Runs `(ms, command, key index)` through `execute`, as the server does.
    fn run(keyspace: &mut Keyspace, steps: &[(u64, RedisCommand, u32)]) -> Vec<Reply> {
        steps
            .iter()
            .map(|&(at, command, index)| keyspace.execute(ms(at), op(command, index)))
            .collect()
    }

    /// The keyspace's books agree with its tables: memory, the live and volatile vectors and
    /// their positions, the expiry and LRU indexes.
    fn assert_consistent(keyspace: &Keyspace) {
        let mut used = 0;
        let (mut live, mut volatile) = (0, 0);
        for (family, table) in keyspace.families.iter().enumerate() {
            for (index, entry) in table.iter().enumerate() {
                if !entry.present() {
                    continue;
                }
                let key = Key {
                    family: family as u32,
                    index: index as u32,
                };
                used += keyspace.cost(entry.value_bytes);
                live += 1;
                assert_eq!(keyspace.live[entry.live_slot as usize], key);
                if entry.volatile() {
                    volatile += 1;
                    assert_eq!(keyspace.volatile[entry.volatile_slot as usize], key);
                    assert!(keyspace.expiries.contains(&(entry.expires_at, key)));
                }
                if keyspace.lru_tracks(entry.volatile()) {
                    let lru = keyspace.lru.as_ref().unwrap();
                    assert!(lru.contains(&(entry.last_access, key)));
                }
            }
        }
        assert_eq!(keyspace.used_memory(), used);
        assert_eq!(keyspace.live.len(), live);
        assert_eq!(keyspace.volatile.len(), volatile);
        assert_eq!(keyspace.expiries.len(), volatile);
        if let Some(lru) = &keyspace.lru {
            let tracked = match keyspace.memory.policy {
                EvictionPolicy::AllKeysLru => live,
                _ => volatile,
            };
            assert_eq!(lru.len(), tracked);
        }
    }

    #[test]
    fn a_key_takes_its_name_its_value_and_the_overhead_until_it_is_deleted() {
        let mut keyspace = keyspace(4);
        keyspace.apply(ms(0), op(set(100, None), 0));
        assert_eq!(keyspace.used_memory(), 180);
        keyspace.apply(ms(1), op(set(50, None), 0)); // an overwrite: 130, not 310
        assert_eq!(keyspace.used_memory(), 130);
        keyspace.apply(ms(2), op(set(10, None), 1));
        assert_eq!(keyspace.used_memory(), 220);
        keyspace.apply(ms(3), op(RedisCommand::Incr, 2)); // a counter: 8 bytes of value
        assert_eq!(keyspace.used_memory(), 308);
        keyspace.apply(ms(4), op(RedisCommand::Del, 0));
        keyspace.apply(ms(4), op(RedisCommand::Del, 3)); // no such key: nothing freed
        assert_eq!(keyspace.used_memory(), 178);
        assert_eq!(keyspace.stats.used_memory_peak, 308);
        assert_consistent(&keyspace);
    }

    #[test]
    fn an_expired_key_frees_its_memory_at_its_expiry_instant() {
        let mut keyspace = keyspace(4);
        keyspace.apply(ms(10), op(set(100, Some(20)), 0));
        keyspace.apply(ms(10), op(set(100, Some(20)), 1));
        keyspace.apply(ms(15), op(set(100, None), 1)); // a SET without TTL clears it
        keyspace.expire_due(ms(29));
        assert_eq!(keyspace.used_memory(), 360);
        keyspace.expire_due(ms(30));
        assert_eq!(keyspace.used_memory(), 180);
        assert_eq!(keyspace.stats.expired_keys, 1);
        assert_consistent(&keyspace);
    }

    #[test]
    fn over_the_limit_noeviction_refuses_writes_but_serves_reads_and_del() {
        use RedisCommand::{Del, Get, Incr};
        let mut keyspace = limited(4, 200, EvictionPolicy::NoEviction, Some(5));
        let oom = Reply::Error(ErrorReply::Oom);
        let replies = run(
            &mut keyspace,
            &[
                (0, set(100, None), 0), // 0 -> 180
                (1, set(100, None), 1), // 180 is under 200: runs, 360
                (2, set(100, None), 2), // over: refused
                (3, Incr, 3),           // may grow memory: refused
                (4, Get, 0),            // a read runs
                (5, Del, 1),            // DEL runs and frees: 180
                (6, set(100, None), 2), // under again: runs, 360
            ],
        );
        assert_eq!(
            replies,
            [
                Reply::Ok,
                Reply::Ok,
                oom,
                oom,
                Reply::Hit {
                    value_bytes: 100,
                    version: 0
                },
                Reply::Ok,
                Reply::Ok,
            ]
        );
        assert_eq!(keyspace.stats.oom_replies, 2);
        assert_eq!(keyspace.stats.evicted_keys, 0);
        assert_eq!(oom.result(), StepResult::Error(Outcome::Oom));
    }

    #[test]
    fn allkeys_lru_evicts_the_least_recently_used_key_exactly() {
        use RedisCommand::Get;
        // Values of 20 bytes cost 100 each; room for three.
        let mut keyspace = limited(8, 300, EvictionPolicy::AllKeysLru, None);
        let replies = run(
            &mut keyspace,
            &[
                (0, set(20, None), 0),
                (1, set(20, None), 1),
                (2, set(20, None), 2),
                (3, Get, 0),           // key 0 is now the most recently used
                (4, set(20, None), 3), // 300 is not over 300: runs, 400
                (5, Get, 1),           // over: key 1 (last used at 1 ms) goes first
                (6, Get, 0),
            ],
        );
        assert_eq!(replies[5], Reply::Miss);
        assert_eq!(
            replies[6],
            Reply::Hit {
                value_bytes: 20,
                version: 0
            }
        );
        assert_eq!(keyspace.stats.evicted_keys, 1);
        assert_eq!(keyspace.used_memory(), 300);
        assert_consistent(&keyspace);
    }

    #[test]
    fn sampled_lru_evicts_the_oldest_of_its_samples() {
        // Two keys and 64 draws: both are drawn (with any seed, but with probability 2^-63),
        // so the older goes. With one draw, some key goes.
        for (samples, survivor) in [(64, Some(1)), (1, None)] {
            let mut keyspace = limited(2, 100, EvictionPolicy::AllKeysLru, Some(samples));
            run(
                &mut keyspace,
                &[(0, set(20, None), 0), (1, set(20, None), 1)],
            );
            keyspace.apply(ms(2), op(RedisCommand::Get, 1));
            assert!(keyspace.make_room(ms(2)));
            assert_eq!(keyspace.live.len(), 1);
            if let Some(survivor) = survivor {
                assert_eq!(keyspace.live[0].index, survivor);
            }
            assert_consistent(&keyspace);
        }
    }

    #[test]
    fn volatile_policies_evict_only_keys_with_a_ttl_and_refuse_when_there_is_none() {
        use RedisCommand::Get;
        for policy in [EvictionPolicy::VolatileLru, EvictionPolicy::VolatileTtl] {
            let mut keyspace = limited(4, 200, policy, Some(5));
            let replies = run(
                &mut keyspace,
                &[
                    (0, set(100, None), 0),
                    (1, set(100, Some(60_000)), 1),
                    (2, set(100, None), 2), // over: key 1, the only one with a TTL, goes
                    (3, Get, 1),
                    (4, set(100, None), 3), // over, and no key has a TTL: refused
                    (5, Get, 0),
                ],
            );
            assert_eq!(
                replies[2..],
                [
                    Reply::Ok,
                    Reply::Miss,
                    Reply::Error(ErrorReply::Oom),
                    Reply::Hit {
                        value_bytes: 100,
                        version: 0
                    },
                ],
                "{policy:?}"
            );
            assert_eq!(keyspace.stats.evicted_keys, 1);
        }
    }

    #[test]
    fn volatile_ttl_evicts_the_key_that_expires_soonest() {
        for samples in [None, Some(64)] {
            let mut keyspace = limited(4, 300, EvictionPolicy::VolatileTtl, samples);
            run(
                &mut keyspace,
                &[
                    (0, set(20, Some(30_000)), 0),
                    (0, set(20, Some(10_000)), 1),
                    (0, set(20, Some(20_000)), 2),
                    (0, set(20, None), 3),
                    (1, RedisCommand::Get, 3),
                ],
            );
            assert!(
                !keyspace
                    .entry(Key {
                        family: 0,
                        index: 1
                    })
                    .present()
            );
            assert_eq!(keyspace.stats.evicted_keys, 1, "{samples:?}");
            assert_consistent(&keyspace);
        }
    }

    #[test]
    fn allkeys_random_evicts_until_under_the_limit() {
        let mut keyspace = limited(16, 500, EvictionPolicy::AllKeysRandom, Some(5));
        for index in 0..16 {
            keyspace.execute(ms(u64::from(index)), op(set(20, None), index));
        }
        // Five keys fill the 500 bytes; the sixth SET finds 500, not over, and runs. Each
        // later one finds 600 and evicts one key first: 10 evicted, 6 live.
        assert_eq!(keyspace.stats.evicted_keys, 10);
        assert_eq!(keyspace.used_memory(), 600);
        assert_consistent(&keyspace);
    }

    #[test]
    fn a_lower_maxmemory_evicts_at_once_and_flushall_frees_everything() {
        let mut keyspace = limited(8, 1_000, EvictionPolicy::AllKeysLru, None);
        for index in 0..8 {
            keyspace.execute(ms(u64::from(index)), op(set(20, None), index));
        }
        assert_eq!(keyspace.used_memory(), 800);
        keyspace.set_maxmemory(ms(10), Some(250));
        assert_eq!(
            (keyspace.used_memory(), keyspace.stats.evicted_keys),
            (200, 6)
        );
        // The two most recent survive.
        assert!(
            keyspace
                .entry(Key {
                    family: 0,
                    index: 7
                })
                .present()
        );
        assert!(
            keyspace
                .entry(Key {
                    family: 0,
                    index: 6
                })
                .present()
        );
        keyspace.clear();
        assert_eq!(keyspace.used_memory(), 0);
        assert_eq!(
            keyspace.apply(ms(11), op(RedisCommand::Get, 7)),
            Reply::Miss
        );
        assert_consistent(&keyspace);
        // Lifting the limit: nothing is refused any more.
        let mut keyspace = limited(4, 100, EvictionPolicy::NoEviction, Some(5));
        run(&mut keyspace, &[(0, set(100, None), 0)]);
        keyspace.set_maxmemory(ms(1), None);
        assert_eq!(keyspace.execute(ms(2), op(set(100, None), 1)), Reply::Ok);
    }

    #[test]
    fn a_restart_goes_back_to_the_configured_limit_and_keeps_keys_only_with_persistence() {
        for persistence in [false, true] {
            let mut keyspace = limited(4, 1_000, EvictionPolicy::NoEviction, Some(5));
            run(&mut keyspace, &[(0, set(100, None), 0)]);
            keyspace.set_maxmemory(ms(1), Some(100));
            keyspace.restart(ms(2), persistence);
            assert_eq!(keyspace.maxmemory(), Some(1_000));
            let kept = if persistence { 180 } else { 0 };
            assert_eq!(keyspace.used_memory(), kept);
        }
    }

    #[test]
    fn preloaded_keys_take_memory() {
        let mut keyspace = keyspace(4);
        keyspace.preload(Preload {
            family: KeyFamilyId(0),
            count: 3,
            value_bytes: 20,
        });
        assert_eq!(keyspace.used_memory(), 300);
        assert_consistent(&keyspace);
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        /// One step: advance the clock, then a command on a key.
        #[derive(Clone, Debug)]
        struct Step {
            advance_ms: u64,
            command: RedisCommand,
            index: u32,
        }

        fn step() -> impl Strategy<Value = Step> {
            let command = prop_oneof![
                Just(RedisCommand::Get),
                Just(RedisCommand::Del),
                Just(RedisCommand::Incr),
                (0u32..400, proptest::option::of(1u64..50)).prop_map(|(value_bytes, ttl)| {
                    RedisCommand::Set {
                        value_bytes,
                        ttl: ttl.map(SimDuration::from_millis),
                    }
                }),
                (0u32..400, 1u64..50).prop_map(|(value_bytes, ttl)| RedisCommand::SetNxPx {
                    value_bytes,
                    ttl: SimDuration::from_millis(ttl),
                }),
            ];
            (0u64..10, command, 0u32..24).prop_map(|(advance_ms, command, index)| Step {
                advance_ms,
                command,
                index,
            })
        }

        proptest! {
            /// Under an evicting policy the memory is never over the limit once the server
            /// has made room, if it could; under noeviction no command that may grow memory
            /// runs while the memory is over it; and the books always add up.
            #[test]
            fn memory_stays_within_the_limit_the_policy_can_keep(
                policy in proptest::sample::select(EvictionPolicy::ALL.to_vec()),
                samples in proptest::option::of(1u32..8),
                maxmemory in 0u64..3_000,
                steps in proptest::collection::vec(step(), 1..200),
            ) {
                let mut keyspace = limited(24, maxmemory, policy, samples);
                let mut now = 0;
                for step in steps {
                    now += step.advance_ms;
                    keyspace.expire_due(ms(now));
                    let over = keyspace.used_memory() > maxmemory;
                    let reply = keyspace.execute(ms(now), op(step.command, step.index));
                    let refused = reply == Reply::Error(ErrorReply::Oom);
                    if policy == EvictionPolicy::NoEviction {
                        prop_assert_eq!(refused, over && step.command.denyoom());
                    } else if matches!(
                        policy,
                        EvictionPolicy::AllKeysLru | EvictionPolicy::AllKeysRandom
                    ) {
                        // Every key is a candidate: making room always succeeds.
                        prop_assert!(!refused);
                    }
                    // At most the command's own key is over: the room was made before it.
                    let made_room = keyspace.make_room(ms(now));
                    if made_room {
                        prop_assert!(keyspace.used_memory() <= maxmemory);
                    } else {
                        prop_assert!(matches!(
                            policy,
                            EvictionPolicy::NoEviction
                                | EvictionPolicy::VolatileLru
                                | EvictionPolicy::VolatileTtl
                        ));
                    }
                    assert_consistent(&keyspace);
                }
            }
        }
    }
}

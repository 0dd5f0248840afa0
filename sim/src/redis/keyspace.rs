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

use crate::kernel::StepResult;
use crate::rng::Stream;
use crate::scenario::{
    ErrorReply, EvictionPolicy, EvictionSamples, MemorySpec, Preload, RedisCommand,
};

/// Protocol overhead of one command on the wire (command name, key, framing), in bytes.
const COMMAND_OVERHEAD_BYTES: u64 = 32;
/// Size of a reply without a value (`+OK`, `:1`, `$-1`), in bytes.
const REPLY_OVERHEAD_BYTES: u64 = 8;
/// Bytes of an `INCR` counter's value.
const COUNTER_VALUE_BYTES: u32 = 8;

/// One command as the server sees it: what to do to which key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    pub command: RedisCommand,
    pub family: u32,
    pub index: u32,
}

impl Op {
    /// Bytes the command puts on the wire (its value included).
    pub fn request_bytes(self) -> u64 {
        Op::command_bytes(self.command)
    }

    /// Bytes a command puts on the wire, whatever its key: what a step sends can be known
    /// before its key is drawn.
    pub fn command_bytes(command: RedisCommand) -> u64 {
        COMMAND_OVERHEAD_BYTES
            + match command {
                RedisCommand::Set { value_bytes, .. }
                | RedisCommand::SetNxPx { value_bytes, .. } => u64::from(value_bytes),
                RedisCommand::Get | RedisCommand::Incr | RedisCommand::Del => 0,
            }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Reply {
    Ok,
    Hit {
        value_bytes: u32,
    },
    Miss,
    /// `SET NX` found the key taken.
    NotSet,
    /// An error reply: the command did not run.
    Error(ErrorReply),
}

impl Reply {
    /// Bytes the reply puts on the wire (its value included).
    pub(super) fn bytes(self) -> u64 {
        REPLY_OVERHEAD_BYTES
            + match self {
                Reply::Hit { value_bytes } => u64::from(value_bytes),
                Reply::Error(error) => error.message().len() as u64,
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
}

/// A server's keys: one table per key family, allocated on first write.
pub(super) struct Keyspace {
    families: Vec<Vec<Entry>>,
    /// Keys per family (the size of its table once allocated).
    counts: Vec<u32>,
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
            maxmemory: memory.maxmemory,
            memory,
            live: Vec::new(),
            volatile: Vec::new(),
            expiries: BTreeSet::new(),
            lru: exact_lru.then(BTreeSet::new),
            used_memory: 0,
            rng,
            stats: MemoryStats::default(),
        }
    }

    /// Bytes the live keys take (after the last `expire_due`).
    pub(super) fn used_memory(&self) -> u64 {
        self.used_memory
    }

    pub(super) fn maxmemory(&self) -> Option<u64> {
        self.maxmemory
    }

    /// `CONFIG SET maxmemory`: the new limit, and evictions at once to get under it.
    pub(super) fn set_maxmemory(&mut self, now: SimTime, maxmemory: Option<u64>) {
        self.maxmemory = maxmemory;
        self.expire_due(now);
        self.make_room();
    }

    /// Forgets every key (`FLUSHALL`, or a restart without persistence).
    pub(super) fn clear(&mut self) {
        for family in &mut self.families {
            *family = Vec::new();
        }
        self.live = Vec::new();
        self.volatile = Vec::new();
        self.expiries.clear();
        if let Some(lru) = &mut self.lru {
            lru.clear();
        }
        self.used_memory = 0;
    }

    /// Stores the first `count` keys of a family, without expiry.
    pub(super) fn preload(&mut self, preload: Preload) {
        for index in 0..preload.count {
            let key = Key {
                family: preload.family.0,
                index,
            };
            self.store(SimTime::ZERO, key, preload.value_bytes, u64::MAX);
        }
    }

    fn entry(&mut self, key: Key) -> &mut Entry {
        let table = &mut self.families[key.family as usize];
        if table.is_empty() {
            table.resize(self.counts[key.family as usize] as usize, Entry::default());
        }
        &mut table[key.index as usize]
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
    fn store(&mut self, now: SimTime, key: Key, value_bytes: u32, expires_at: u64) {
        let added = self.cost(value_bytes);
        let old = *self.entry(key);
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
            counter: 0,
            last_access: now.as_nanos(),
            live_slot,
            volatile_slot: self.volatile.len() as u32,
        };
        *self.entry(key) = entry;
        if entry.volatile() {
            self.volatile.push(key);
            self.expiries.insert((expires_at, key));
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
    fn make_room(&mut self) -> bool {
        let Some(maxmemory) = self.maxmemory else {
            return true;
        };
        while self.used_memory > maxmemory {
            let Some(victim) = self.victim() else {
                return false;
            };
            self.remove(victim);
            self.stats.evicted_keys += 1;
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
        if !self.make_room() && op.command.denyoom() {
            self.stats.oom_replies += 1;
            return Reply::Error(ErrorReply::Oom);
        }
        self.apply(now, op)
    }

    /// Executes `op` at `now`, whatever the memory (keys due expire first).
    pub(super) fn apply(&mut self, now: SimTime, op: Op) -> Reply {
        self.expire_due(now);
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
                }
            }
            RedisCommand::Get => Reply::Miss,
            RedisCommand::Set { value_bytes, ttl } => {
                self.store(now, key, value_bytes, expiry(ttl));
                Reply::Ok
            }
            RedisCommand::SetNxPx { .. } if live => {
                self.touch(now, key);
                Reply::NotSet
            }
            RedisCommand::SetNxPx { value_bytes, ttl } => {
                self.store(now, key, value_bytes, expiry(Some(ttl)));
                Reply::Ok
            }
            RedisCommand::Incr => {
                if live {
                    self.touch(now, key);
                } else {
                    self.store(now, key, COUNTER_VALUE_BYTES, u64::MAX);
                }
                let entry = self.entry(key);
                entry.counter = entry.counter.saturating_add(1);
                Reply::Ok
            }
            RedisCommand::Del => {
                self.remove(key);
                Reply::Ok
            }
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
                Reply::Hit { value_bytes: 100 },
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
            &[Reply::Ok, Reply::Hit { value_bytes: 5 }, Reply::Miss],
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
                Reply::Hit { value_bytes: 3 },
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
            Reply::Hit { value_bytes: 8 }
        );
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
        assert_eq!(get(&mut keyspace, 1), Reply::Hit { value_bytes: 7 });
        assert_eq!(get(&mut keyspace, 2), Reply::Miss);
        keyspace.clear();
        assert_eq!(get(&mut keyspace, 0), Reply::Miss);
    }

    #[test]
    fn wire_sizes_count_the_value_once() {
        assert_eq!(op(set(2 << 20, None), 0).request_bytes(), 32 + (2 << 20));
        assert_eq!(op(RedisCommand::Get, 0).request_bytes(), 32);
        assert_eq!(Reply::Hit { value_bytes: 100 }.bytes(), 108);
        assert_eq!(Reply::Miss.bytes(), 8);
    }
}

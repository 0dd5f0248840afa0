//! A server's lock keys: what the lock commands (`RedisCommand::Lock`) read and write.
//!
//! Each lock key (a key of a family, as the lock's steps name it) is an
//! [`outagelab_model::lock::LockKey`]: a writer or readers, each with its token and lease. The
//! keys live in a table of their own, apart from the keyspace's plain keys: a `GET` of a lock
//! key does not see the lock (the scenario file keeps lock keys and plain keys apart by
//! family). Leases expire as Redis expires keys, approximated as exact: before every lock
//! command, every holder whose lease ended at or before that instant is removed and counted as
//! an expired lease of its lock. So the table holds only the holders live at the last lock
//! command, and a key with none is removed: memory is bounded by the live holders (and each
//! key's readers by [`outagelab_model::lock::READERS_MAX`]).
//!
//! Replies: an acquire is `Ok` (taken) or `NotSet` (busy); a release is `Ok` (deleted) or
//! `Miss` (no holder had the token: refused).
//!
//! The leases' ends are kept in one queue per lease length, in the order they were taken: the
//! table's time only moves forward, so each queue is in order of its ends, and the earliest
//! ends are at the queues' fronts (no search tree, whose insert and removal were a fifth of a
//! lock command's cost). A release leaves its lease's entry in its queue; an entry whose holder
//! is gone is skipped when it comes to the front, and the queues are compacted when such
//! entries outnumber the live holders by more than [`STALE_SLACK`], so what they keep stays
//! bounded by the live holders.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use outagelab_model::lock::{Holder, LockKey, LockToken};
use outagelab_model::time::{SimDuration, SimTime};

use super::keyspace::Reply;
use crate::scenario::{LockCommand, LockCommandKind};

/// Entries of released leases the queues may keep beyond twice the live holders before they
/// are compacted.
const STALE_SLACK: usize = 64;

/// Emptied keys' reader storage kept for new keys: at most this many, each of at most
/// [`SPARE_ROOM_MAX`] readers.
const SPARE_MAX: usize = 64;
const SPARE_ROOM_MAX: usize = 16;

/// What a server counts per lock (by its tokens' namespace, which is the lock's index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LockServerStats {
    /// Holders removed because their lease ended.
    pub expired_leases: u64,
    /// The most live holders of one key at once.
    pub peak_writers: u64,
    pub peak_readers: u64,
}

/// A lease as its queue keeps it: when it ends (ns), its key, its holder's token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Lease {
    end: u64,
    family: u32,
    index: u32,
    token: LockToken,
}

/// The leases of one length, in the order they were taken, which is the order of their ends.
struct LeaseQueue {
    lease: SimDuration,
    leases: VecDeque<Lease>,
}

#[derive(Default)]
pub(super) struct LockTable {
    /// The keys with a holder, by `(family, index)` packed into one number. A hash map with
    /// a fixed hasher, and never iterated, so its order reaches no output: every lock
    /// command finds, adds or drops its key here (a `BTreeMap`'s search, insert and removal
    /// cost `explore` on seed000 1.2% more instructions than SipHash; [`PackedKeyHasher`] is
    /// a multiply and a few shifts).
    keys: HashMap<u64, LockKey, BuildHasherDefault<PackedKeyHasher>>,
    /// Every lease taken and not yet come to its queue's front, by lease length. Invariant:
    /// each holder in `keys` has at least one entry here with its token, key and end.
    queues: Vec<LeaseQueue>,
    /// Entries in `queues`.
    entries: usize,
    /// Holders in `keys`.
    live: usize,
    /// Emptied keys' reader storage, for the next new keys.
    spare: Vec<Vec<Holder>>,
    /// The leases due in one `expire`, kept for its storage (empty between calls).
    due: Vec<Lease>,
    /// By lock (token namespace); grown on first use.
    stats: Vec<LockServerStats>,
}

impl LockTable {
    /// Forgets every lock (a restart without persistence).
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        for queue in &mut self.queues {
            queue.leases.clear();
        }
        self.entries = 0;
        self.live = 0;
    }

    /// Executes a lock command on key `index` of `family` at `now`.
    pub(super) fn apply(
        &mut self,
        now: SimTime,
        family: u32,
        index: u32,
        command: LockCommand,
    ) -> Reply {
        self.expire(now);
        let token = command.token;
        let mut entry = match self.keys.entry(pack(family, index)) {
            Entry::Occupied(entry) => entry,
            Entry::Vacant(entry) => {
                let storage = self.spare.pop().unwrap_or_default();
                entry.insert_entry(LockKey::with_storage(storage))
            }
        };
        let key = entry.get_mut();
        let reply = match command.kind {
            LockCommandKind::Acquire { mode, lease } => {
                if key.try_acquire(now, mode, token, lease) {
                    let (writers, readers) = key.holders(now);
                    // The lock's one promise, checked where it is kept.
                    assert!(
                        writers <= 1 && (writers == 0 || readers == 0),
                        "lock key {family}:{index} has {writers} writers and {readers} readers"
                    );
                    let stats = stats_mut(&mut self.stats, token);
                    stats.peak_writers = stats.peak_writers.max(writers as u64);
                    stats.peak_readers = stats.peak_readers.max(readers as u64);
                    let end = now.saturating_add(lease).as_nanos();
                    let lease_entry = Lease {
                        end,
                        family,
                        index,
                        token,
                    };
                    queue_mut(&mut self.queues, lease).push_back(lease_entry);
                    self.entries += 1;
                    self.live += 1;
                    Reply::Ok
                } else {
                    Reply::NotSet
                }
            }
            LockCommandKind::Release => match key.release(now, token) {
                Some(_) => {
                    self.live -= 1;
                    Reply::Ok
                }
                None => Reply::Miss,
            },
        };
        if entry.get().is_empty() {
            recycle(&mut self.spare, entry.remove());
        }
        if self.entries > 2 * self.live + STALE_SLACK {
            self.compact();
        }
        reply
    }

    /// Removes every holder whose lease ended at or before `now`, in the order of
    /// `(end, family, index, token)` whatever queue each came from: the order of the search
    /// tree the queues replaced. It decides the order of a key's remaining readers (a reader
    /// leaves by a swap with the last), and so which of a token's two reads of one key a
    /// later release takes.
    fn expire(&mut self, now: SimTime) {
        let now = now.as_nanos();
        let mut due = std::mem::take(&mut self.due);
        for queue in &mut self.queues {
            while let Some(&lease) = queue.leases.front()
                && lease.end <= now
            {
                queue.leases.pop_front();
                due.push(lease);
            }
        }
        due.sort_unstable();
        self.entries -= due.len();
        for lease in due.drain(..) {
            let Entry::Occupied(mut entry) = self.keys.entry(pack(lease.family, lease.index))
            else {
                continue; // released, and the key is free
            };
            let end = SimTime::from_nanos(lease.end);
            if entry.get_mut().expire_lease(lease.token, end).is_none() {
                continue; // released (or taken again with another end)
            }
            self.live -= 1;
            stats_mut(&mut self.stats, lease.token).expired_leases += 1;
            if entry.get().is_empty() {
                recycle(&mut self.spare, entry.remove());
            }
        }
        self.due = due;
    }

    /// Drops the queues' entries whose holder is gone (released). Order is kept.
    #[cold]
    #[inline(never)]
    fn compact(&mut self) {
        let keys = &self.keys;
        let holds = |lease: &Lease| {
            keys.get(&pack(lease.family, lease.index))
                .is_some_and(|key| key.holding(lease.token, SimTime::from_nanos(lease.end)) > 0)
        };
        self.entries = 0;
        for queue in &mut self.queues {
            queue.leases.retain(holds);
            self.entries += queue.leases.len();
        }
    }

    /// Lock `lock`'s counts at `now`: the leases ended by then count as expired, swept or not.
    pub(super) fn stats(&self, now: SimTime, lock: u32) -> LockServerStats {
        let mut stats = self.stats.get(lock as usize).copied().unwrap_or_default();
        // The ended leases still in a queue whose holder is still kept: an entry may be there
        // twice (a token released and taken again at the same instant), its holder once.
        let mut ended: Vec<Lease> = (self.queues.iter())
            .flat_map(|queue| queue.leases.iter())
            .filter(|lease| lease.end <= now.as_nanos() && lease.token.namespace() == lock)
            .copied()
            .collect();
        ended.sort_unstable();
        ended.dedup();
        stats.expired_leases += (ended.iter())
            .map(|lease| {
                let key = self.keys.get(&pack(lease.family, lease.index));
                key.map_or(0, |key| {
                    key.holding(lease.token, SimTime::from_nanos(lease.end))
                })
            })
            .sum::<usize>() as u64;
        stats
    }

    /// Holders kept now.
    #[cfg(test)]
    fn holders(&self) -> usize {
        self.live
    }

    /// Bytes the table holds beyond its fixed size: each lease's entry and its share of its
    /// key (a few dozen bytes each, counted as 96), and the spare reader storage.
    pub(super) fn memory_bytes(&self) -> u64 {
        let spare: usize = self.spare.iter().map(Vec::capacity).sum();
        self.entries as u64 * 96 + (spare * std::mem::size_of::<Holder>()) as u64
    }
}

/// Lock `token`'s counts, grown to hold it.
fn stats_mut(stats: &mut Vec<LockServerStats>, token: LockToken) -> &mut LockServerStats {
    let lock = token.namespace() as usize;
    if stats.len() <= lock {
        stats.resize(lock + 1, LockServerStats::default());
    }
    &mut stats[lock]
}

/// The queue of the leases of length `lease`, added on first use (a scenario has a few).
fn queue_mut(queues: &mut Vec<LeaseQueue>, lease: SimDuration) -> &mut VecDeque<Lease> {
    let index = match queues.iter().position(|queue| queue.lease == lease) {
        Some(index) => index,
        None => {
            queues.push(LeaseQueue {
                lease,
                leases: VecDeque::new(),
            });
            queues.len() - 1
        }
    };
    &mut queues[index].leases
}

/// Keeps an emptied key's reader storage for a later key, while there is room.
fn recycle(spare: &mut Vec<Vec<Holder>>, key: LockKey) {
    let storage = key.into_storage();
    if spare.len() < SPARE_MAX && storage.capacity() <= SPARE_ROOM_MAX {
        spare.push(storage);
    }
}

/// A key `(family, index)` as one number.
fn pack(family: u32, index: u32) -> u64 {
    u64::from(family) << 32 | u64::from(index)
}

/// The lock table's hasher: a packed key through SplitMix64's finalizer, so that both halves
/// reach the low bits the map places by and the high bits it tags by. Fixed, so a run's
/// layout is the same on every machine (the map is never iterated either).
#[derive(Default)]
pub(super) struct PackedKeyHasher(u64);

impl Hasher for PackedKeyHasher {
    fn finish(&self) -> u64 {
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outagelab_model::lock::Mode;
    use outagelab_model::time::SimDuration;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    /// A token of lock `lock`.
    fn token(lock: u64, serial: u64) -> LockToken {
        LockToken::new(lock << LockToken::SERIAL_BITS | serial)
    }

    fn acquire(mode: Mode, token: LockToken, lease_ms: u64) -> LockCommand {
        LockCommand {
            token,
            kind: LockCommandKind::Acquire {
                mode,
                lease: SimDuration::from_millis(lease_ms),
            },
        }
    }

    fn release(token: LockToken) -> LockCommand {
        LockCommand {
            token,
            kind: LockCommandKind::Release,
        }
    }

    /// Applies each `(ms, command, key index)` of family 0 in turn; returns the replies.
    fn check(table: &mut LockTable, steps: &[(u64, LockCommand, u32)], expected: &[Reply]) {
        let replies: Vec<Reply> = steps
            .iter()
            .map(|&(at, command, index)| table.apply(ms(at), 0, index, command))
            .collect();
        assert_eq!(replies, expected);
    }

    #[test]
    fn exclusive_and_shared_holders_exclude_each_other_per_key() {
        use Mode::{Exclusive, Shared};
        let mut table = LockTable::default();
        check(
            &mut table,
            &[
                (0, acquire(Exclusive, token(0, 1), 100), 0),
                (1, acquire(Exclusive, token(0, 2), 100), 0), // busy
                (1, acquire(Shared, token(0, 3), 100), 0),    // busy: a writer holds it
                (1, acquire(Shared, token(0, 4), 100), 1),    // another key
                (2, acquire(Shared, token(0, 5), 100), 1),
                (3, acquire(Exclusive, token(0, 6), 100), 1), // busy: readers hold it
                (4, release(token(0, 1)), 0),
                (5, acquire(Shared, token(0, 3), 100), 0),
            ],
            &[
                Reply::Ok,
                Reply::NotSet,
                Reply::NotSet,
                Reply::Ok,
                Reply::Ok,
                Reply::NotSet,
                Reply::Ok,
                Reply::Ok,
            ],
        );
        let stats = table.stats(ms(5), 0);
        assert_eq!((stats.peak_writers, stats.peak_readers), (1, 2));
        assert_eq!(stats.expired_leases, 0);
        assert_eq!(table.holders(), 3);
    }

    #[test]
    fn a_dead_holders_lease_expires_and_its_late_release_is_refused() {
        use Mode::Exclusive;
        let mut table = LockTable::default();
        check(
            &mut table,
            &[
                (0, acquire(Exclusive, token(1, 1), 100), 0),
                (99, acquire(Exclusive, token(1, 2), 100), 0), // still held
                (100, acquire(Exclusive, token(1, 2), 100), 0), // the lease ended at 100
                (150, release(token(1, 1)), 0),                // late: refused, not deleted
                (160, acquire(Exclusive, token(1, 3), 100), 0), // still the successor's
                (170, release(token(1, 2)), 0),
            ],
            &[
                Reply::Ok,
                Reply::NotSet,
                Reply::Ok,
                Reply::Miss,
                Reply::NotSet,
                Reply::Ok,
            ],
        );
        assert_eq!(table.stats(ms(170), 1).expired_leases, 1);
        assert_eq!(table.holders(), 0, "nothing is kept for a free key");
        assert!(table.keys.is_empty());
        // Counted per lock: lock 0 saw nothing.
        assert_eq!(table.stats(ms(170), 0), LockServerStats::default());
    }

    #[test]
    fn leases_that_ended_since_the_last_command_count_as_expired() {
        let mut table = LockTable::default();
        table.apply(ms(0), 0, 0, acquire(Mode::Shared, token(0, 1), 100));
        table.apply(ms(0), 0, 0, acquire(Mode::Shared, token(0, 2), 300));
        assert_eq!(table.stats(ms(99), 0).expired_leases, 0);
        assert_eq!(table.stats(ms(100), 0).expired_leases, 1);
        assert_eq!(table.stats(ms(300), 0).expired_leases, 2);
        table.clear();
        assert_eq!(table.holders(), 0);
    }

    /// The lock table as a search tree of leases (as it was before its lease queues, but a
    /// multiset, and expiring the holder with the lease's end: a token can hold a key twice,
    /// as a reader whose acquire's reply was lost and who tried again), removed on release,
    /// and every key in an ordered map. The property below holds the table to it.
    #[derive(Default)]
    struct Reference {
        keys: std::collections::BTreeMap<u64, LockKey>,
        leases: std::collections::BTreeMap<(u64, u32, u32, LockToken), usize>,
        expired: Vec<u64>,
    }

    impl Reference {
        fn apply(&mut self, now: SimTime, family: u32, index: u32, command: LockCommand) -> Reply {
            self.expire(now);
            let token = command.token;
            let key = self.keys.entry(pack(family, index)).or_default();
            let reply = match command.kind {
                LockCommandKind::Acquire { mode, lease } => {
                    if key.try_acquire(now, mode, token, lease) {
                        let ends = now.saturating_add(lease).as_nanos();
                        *self.leases.entry((ends, family, index, token)).or_default() += 1;
                        Reply::Ok
                    } else {
                        Reply::NotSet
                    }
                }
                LockCommandKind::Release => match key.release(now, token) {
                    Some(holder) => {
                        let lease = (holder.expires_at.as_nanos(), family, index, token);
                        let count = self.leases.get_mut(&lease).expect("a holder's lease");
                        *count -= 1;
                        if *count == 0 {
                            self.leases.remove(&lease);
                        }
                        Reply::Ok
                    }
                    None => Reply::Miss,
                },
            };
            self.keys.retain(|_, key| !key.is_empty());
            reply
        }

        fn expire(&mut self, now: SimTime) {
            while let Some((&first, &count)) = self.leases.first_key_value()
                && first.0 <= now.as_nanos()
            {
                self.leases.pop_first();
                let (end, family, index, token) = first;
                let key = self.keys.get_mut(&pack(family, index)).expect("a held key");
                for _ in 0..count {
                    let end = SimTime::from_nanos(end);
                    key.expire_lease(token, end).expect("a lease's holder");
                }
                *self.count(token.namespace()) += count as u64;
            }
            self.keys.retain(|_, key| !key.is_empty());
        }

        fn count(&mut self, lock: u32) -> &mut u64 {
            if self.expired.len() <= lock as usize {
                self.expired.resize(lock as usize + 1, 0);
            }
            &mut self.expired[lock as usize]
        }

        fn expired_by(&self, now: SimTime, lock: u32) -> u64 {
            let swept = self.expired.get(lock as usize).copied().unwrap_or(0);
            let ended: usize = (self.leases.iter())
                .filter(|(lease, _)| lease.0 <= now.as_nanos() && lease.3.namespace() == lock)
                .map(|(_, count)| count)
                .sum();
            swept + ended as u64
        }
    }

    /// Leases due at one command expire in the search tree's order of `(end, key, token)`,
    /// whatever queue holds them: the order decides which of a token's two reads of one key a
    /// release takes (a reader leaves by a swap with the last), and with it when the key is
    /// free. Found by review: two lease lengths, and two grants at one instant with the
    /// larger token first; expiring queue by queue, in each queue's order, frees the key a
    /// lease early in both.
    #[test]
    fn leases_due_together_expire_in_the_search_trees_order_whatever_their_queue() {
        use Mode::{Exclusive, Shared};
        let a = token(0, 3);
        let runs: [&[(u64, LockCommand)]; 2] = [
            &[
                (0, acquire(Shared, token(0, 1), 100)),
                (84, acquire(Shared, token(0, 2), 10)),
                (84, acquire(Shared, a, 100)),
                (91, acquire(Shared, a, 100)),
                (105, release(a)),
                (147, acquire(Exclusive, token(0, 0), 100)),
                (187, acquire(Exclusive, token(0, 0), 100)),
            ],
            &[
                (0, acquire(Shared, token(0, 2), 100)),
                (0, acquire(Shared, token(0, 1), 100)),
                (7, acquire(Shared, a, 100)),
                (14, acquire(Shared, a, 100)),
                (100, release(a)),
                (110, acquire(Exclusive, token(0, 0), 100)),
            ],
        ];
        for (run, steps) in runs.iter().enumerate() {
            let mut table = LockTable::default();
            let mut reference = Reference::default();
            for &(now, command) in steps.iter() {
                let got = table.apply(ms(now), 0, 0, command);
                let want = reference.apply(ms(now), 0, 0, command);
                assert_eq!(got, want, "run {run} at {now} ms");
                assert_eq!(
                    table.stats(ms(now + 40), 0).expired_leases,
                    reference.expired_by(ms(now + 40), 0),
                    "run {run} at {now} ms"
                );
            }
        }
    }

    proptest::proptest! {
        /// Any run of acquires and releases (tokens reused, keys shared, three lease lengths,
        /// time moving forward, sometimes not at all) gets the same replies from the table as
        /// from the search tree it replaced, keeps the same holders, and counts the same
        /// expired leases at any later instant; long leases keep released entries in their queue
        /// until the compaction takes them.
        #[test]
        fn the_lease_queues_answer_as_a_search_tree_of_leases(
            steps in proptest::collection::vec(
                (0u64..4, 0u32..2, 0u32..3, 0u64..2, 0u64..4, 0u8..3, 0usize..4),
                1..1000,
            )
        ) {
            let mut table = LockTable::default();
            let mut reference = Reference::default();
            let mut now = 0;
            for (advance, family, index, lock, serial, what, lease) in steps {
                now += advance * 7;
                let token = token(lock, serial);
                let lease = [10, 100, 10_000, 10_000][lease];
                let command = match what {
                    0 => acquire(Mode::Exclusive, token, lease),
                    1 => acquire(Mode::Shared, token, lease),
                    _ => release(token),
                };
                let got = table.apply(ms(now), family, index, command);
                let want = reference.apply(ms(now), family, index, command);
                proptest::prop_assert_eq!(got, want, "at {} ms", now);
                let held: usize = reference.leases.values().sum();
                proptest::prop_assert_eq!(table.holders(), held);
                proptest::prop_assert!(table.entries <= 2 * table.live + STALE_SLACK);
                for lock in 0..2 {
                    for later in [0, 10, 40, 200] {
                        proptest::prop_assert_eq!(
                            table.stats(ms(now + later), lock).expired_leases,
                            reference.expired_by(ms(now + later), lock),
                            "lock {} at {} ms", lock, now + later
                        );
                    }
                }
            }
        }
    }
}

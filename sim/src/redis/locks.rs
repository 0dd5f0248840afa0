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

use std::collections::{BTreeSet, HashMap};
use std::hash::{BuildHasherDefault, DefaultHasher};

use outagelab_model::lock::{LockKey, LockToken};
use outagelab_model::time::SimTime;

use super::keyspace::Reply;
use crate::scenario::{LockCommand, LockCommandKind};

/// What a server counts per lock (by its tokens' namespace, which is the lock's index).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LockServerStats {
    /// Holders removed because their lease ended.
    pub expired_leases: u64,
    /// The most live holders of one key at once.
    pub peak_writers: u64,
    pub peak_readers: u64,
}

#[derive(Default)]
pub(super) struct LockTable {
    /// The keys with a holder, by `(family, index)` packed into one number. A hash map with
    /// a fixed (unseeded) hasher, and never iterated, so its order reaches no output: every
    /// lock command finds, adds or drops its key here, and a `BTreeMap`'s search, insert and
    /// removal cost `explore` on seed000 1.2% more instructions.
    keys: HashMap<u64, LockKey, BuildHasherDefault<DefaultHasher>>,
    /// Every holder by the end of its lease: (instant in ns, family, index, token).
    leases: BTreeSet<(u64, u32, u32, LockToken)>,
    /// By lock (token namespace); grown on first use.
    stats: Vec<LockServerStats>,
}

impl LockTable {
    /// Forgets every lock (a restart without persistence).
    pub(super) fn clear(&mut self) {
        self.keys.clear();
        self.leases.clear();
    }

    fn stats_mut(&mut self, token: LockToken) -> &mut LockServerStats {
        let lock = token.namespace() as usize;
        if self.stats.len() <= lock {
            self.stats.resize(lock + 1, LockServerStats::default());
        }
        &mut self.stats[lock]
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
        let packed = pack(family, index);
        let key = self.keys.entry(packed).or_default();
        let reply = match command.kind {
            LockCommandKind::Acquire { mode, lease } => {
                if key.try_acquire(now, mode, token, lease) {
                    let ends = now.saturating_add(lease).as_nanos();
                    self.leases.insert((ends, family, index, token));
                    let (writers, readers) = key.holders(now);
                    // The lock's one promise, checked where it is kept.
                    assert!(
                        writers <= 1 && (writers == 0 || readers == 0),
                        "lock key {family}:{index} has {writers} writers and {readers} readers"
                    );
                    let stats = self.stats_mut(token);
                    stats.peak_writers = stats.peak_writers.max(writers as u64);
                    stats.peak_readers = stats.peak_readers.max(readers as u64);
                    Reply::Ok
                } else {
                    Reply::NotSet
                }
            }
            LockCommandKind::Release => match key.release(now, token) {
                Some(holder) => {
                    let ends = holder.expires_at.as_nanos();
                    self.leases.remove(&(ends, family, index, token));
                    Reply::Ok
                }
                None => Reply::Miss,
            },
        };
        if self.keys.get(&packed).is_some_and(LockKey::is_empty) {
            self.keys.remove(&packed);
        }
        reply
    }

    /// Removes every holder whose lease ended at or before `now`.
    fn expire(&mut self, now: SimTime) {
        while let Some(&first) = self.leases.first()
            && first.0 <= now.as_nanos()
        {
            self.leases.pop_first();
            let (_, family, index, token) = first;
            let packed = pack(family, index);
            let key = self.keys.get_mut(&packed);
            let expired = key.and_then(|key| key.expire(token)).is_some();
            debug_assert!(expired, "a lease outlives its holder");
            self.stats_mut(token).expired_leases += 1;
            if self.keys.get(&packed).is_some_and(LockKey::is_empty) {
                self.keys.remove(&packed);
            }
        }
    }

    /// Lock `lock`'s counts at `now`: the leases ended by then count as expired, swept or not.
    pub(super) fn stats(&self, now: SimTime, lock: u32) -> LockServerStats {
        let mut stats = self.stats.get(lock as usize).copied().unwrap_or_default();
        stats.expired_leases += self
            .leases
            .iter()
            .take_while(|lease| lease.0 <= now.as_nanos())
            .filter(|lease| lease.3.namespace() == lock)
            .count() as u64;
        stats
    }

    /// Holders kept now (each a few dozen bytes).
    pub(super) fn holders(&self) -> usize {
        self.leases.len()
    }
}

/// A key `(family, index)` as one number.
fn pack(family: u32, index: u32) -> u64 {
    u64::from(family) << 32 | u64::from(index)
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
}

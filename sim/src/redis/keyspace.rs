//! A server's keys, and the commands and replies that read and write them.
//!
//! One table per key family, allocated on the first write to the family. A key is live until
//! its expiry instant (exclusive); expired keys are not swept, they read as absent.

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::Outcome;

use super::locks::{self, LockTable};
use crate::kernel::StepResult;
use crate::scenario::{Preload, RedisCommand};

/// Protocol overhead of one command on the wire (command name, key, framing), in bytes.
const COMMAND_OVERHEAD_BYTES: u64 = 32;
/// Size of a reply without a value (`+OK`, `:1`, `$-1`), in bytes.
const REPLY_OVERHEAD_BYTES: u64 = 8;

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
                RedisCommand::Lock(_) => locks::TOKEN_BYTES,
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
}

impl Reply {
    /// Bytes the reply puts on the wire (its value included).
    pub(super) fn bytes(self) -> u64 {
        REPLY_OVERHEAD_BYTES
            + match self {
                Reply::Hit { value_bytes } => u64::from(value_bytes),
                Reply::Ok | Reply::Miss | Reply::NotSet => 0,
            }
    }

    pub(super) fn result(self) -> StepResult {
        match self {
            Reply::Ok => StepResult::Ok,
            Reply::Hit { .. } => StepResult::Hit,
            Reply::Miss => StepResult::Miss,
            Reply::NotSet => StepResult::Error(Outcome::LockBusy),
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Entry {
    /// 0: no key. `u64::MAX`: no expiry. Otherwise the instant (ns) the key expires.
    expires_at: u64,
    value_bytes: u32,
    counter: i64,
}

impl Entry {
    fn live(&self, now: SimTime) -> bool {
        self.expires_at != 0 && now.as_nanos() < self.expires_at
    }
}

/// A server's keys: one table per key family, allocated on first write.
pub(super) struct Keyspace {
    families: Vec<Vec<Entry>>,
    /// Keys per family (the size of its table once allocated).
    counts: Vec<u32>,
    /// The lock keys, apart from the plain ones.
    pub(super) locks: LockTable,
}

impl Keyspace {
    pub(super) fn new(counts: Vec<u32>) -> Self {
        Keyspace {
            families: counts.iter().map(|_| Vec::new()).collect(),
            counts,
            locks: LockTable::default(),
        }
    }

    /// Forgets every key (a restart without persistence).
    pub(super) fn clear(&mut self) {
        for family in &mut self.families {
            *family = Vec::new();
        }
        self.locks.clear();
    }

    /// Stores the first `count` keys of a family, without expiry.
    pub(super) fn preload(&mut self, preload: Preload) {
        for index in 0..preload.count {
            *self.entry(preload.family.0, index) = Entry {
                expires_at: u64::MAX,
                value_bytes: preload.value_bytes,
                counter: 0,
            };
        }
    }

    fn entry(&mut self, family: u32, index: u32) -> &mut Entry {
        let table = &mut self.families[family as usize];
        if table.is_empty() {
            table.resize(self.counts[family as usize] as usize, Entry::default());
        }
        &mut table[index as usize]
    }

    /// Executes `op` at `now`.
    pub(super) fn apply(&mut self, now: SimTime, op: Op) -> Reply {
        if let RedisCommand::Lock(command) = op.command {
            return self.locks.apply(now, op.family, op.index, command);
        }
        let expiry = |ttl: Option<SimDuration>| {
            ttl.map_or(u64::MAX, |ttl| now.saturating_add(ttl).as_nanos().max(1))
        };
        let entry = self.entry(op.family, op.index);
        let live = entry.live(now);
        match op.command {
            RedisCommand::Get if live => Reply::Hit {
                value_bytes: entry.value_bytes,
            },
            RedisCommand::Get => Reply::Miss,
            RedisCommand::Set { value_bytes, ttl } => {
                *entry = Entry {
                    expires_at: expiry(ttl),
                    value_bytes,
                    counter: 0,
                };
                Reply::Ok
            }
            RedisCommand::SetNxPx { .. } if live => Reply::NotSet,
            RedisCommand::SetNxPx { value_bytes, ttl } => {
                *entry = Entry {
                    expires_at: expiry(Some(ttl)),
                    value_bytes,
                    counter: 0,
                };
                Reply::Ok
            }
            RedisCommand::Incr => {
                if !live {
                    *entry = Entry {
                        expires_at: u64::MAX,
                        value_bytes: 8,
                        counter: 0,
                    };
                }
                entry.counter = entry.counter.saturating_add(1);
                Reply::Ok
            }
            RedisCommand::Del => {
                *entry = Entry::default();
                Reply::Ok
            }
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
        let mut keyspace = Keyspace::new(vec![4]);
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
        let mut keyspace = Keyspace::new(vec![4]);
        for _ in 0..3 {
            assert_eq!(keyspace.apply(ms(0), op(RedisCommand::Incr, 3)), Reply::Ok);
        }
        assert_eq!(keyspace.entry(0, 3).counter, 3);
        assert_eq!(
            keyspace.apply(ms(1), op(RedisCommand::Get, 3)),
            Reply::Hit { value_bytes: 8 }
        );
    }

    #[test]
    fn preloaded_keys_never_expire_and_clear_forgets_them() {
        let mut keyspace = Keyspace::new(vec![4]);
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

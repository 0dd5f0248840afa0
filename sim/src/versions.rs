//! The committed versions of the data the databases hold, per key, and how long a copy of an
//! older version has been out of date: what makes a read served from a cache stale.
//!
//! A key's first commit makes version 1 (a key never written is at version 0, which is also
//! what a copy of unknown origin carries). Each key keeps the instants of its last
//! [`RECENT_COMMITS`] commits, so a stale copy's age is exact when it is at most that many
//! versions behind, and a lower bound (the oldest instant kept) otherwise. Memory grows with
//! the keys written, not with the commits.

use std::collections::{BTreeMap, VecDeque};

use outagelab_model::time::{SimDuration, SimTime};

/// Commit instants kept per key.
pub const RECENT_COMMITS: usize = 8;

/// A key: its family and its index in the family.
pub(crate) type DataKey = (u32, u32);

#[derive(Default)]
struct Committed {
    version: u64,
    /// The instants of the last commits, oldest first: the last one made `version`.
    recent: VecDeque<SimTime>,
}

#[derive(Default)]
pub(crate) struct Versions {
    keys: BTreeMap<DataKey, Committed>,
}

impl Versions {
    /// The version a read of `key` gets now.
    pub fn current(&self, key: DataKey) -> u64 {
        self.keys.get(&key).map_or(0, |c| c.version)
    }

    /// A write of `key` commits at `now`: its new version.
    pub fn commit(&mut self, now: SimTime, key: DataKey) -> u64 {
        let committed = self.keys.entry(key).or_default();
        committed.version += 1;
        if committed.recent.len() == RECENT_COMMITS {
            committed.recent.pop_front();
        }
        committed.recent.push_back(now);
        committed.version
    }

    /// How long a copy of `version` of `key` has been out of date at `now`: since the commit
    /// of the next version; `None` when it is the current one.
    pub fn out_of_date_for(&self, now: SimTime, key: DataKey, version: u64) -> Option<SimDuration> {
        let committed = self.keys.get(&key)?;
        if version >= committed.version {
            return None;
        }
        // recent[i] made version `committed.version - len + 1 + i`.
        let first_kept = committed.version + 1 - committed.recent.len() as u64;
        let next = version + 1;
        let superseded_at = if next >= first_kept {
            committed.recent[(next - first_kept) as usize]
        } else {
            committed.recent[0]
        };
        Some(now.saturating_since(superseded_at))
    }
}

/// A value a request holds: its key, its version, and where it read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeldValue {
    pub(crate) key: DataKey,
    pub(crate) version: u64,
    pub(crate) from: ValueFrom,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValueFrom {
    /// A database query read it, or committed it.
    Database,
    /// A Redis `GET` found a copy.
    Redis,
    /// An in-process cache held a copy.
    Cache,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> SimTime {
        SimTime::from_nanos(ms * 1_000_000)
    }

    #[test]
    fn a_copy_is_out_of_date_from_the_commit_after_it() {
        let mut versions = Versions::default();
        let key = (0, 7);
        assert_eq!(versions.current(key), 0);
        assert_eq!(
            versions.out_of_date_for(at(5), key, 0),
            None,
            "never written"
        );
        assert_eq!(versions.commit(at(10), key), 1);
        assert_eq!(versions.commit(at(30), key), 2);
        assert_eq!(versions.current(key), 2);
        let age = |version| versions.out_of_date_for(at(100), key, version);
        assert_eq!(age(2), None);
        assert_eq!(age(1), Some(SimDuration::from_millis(70)));
        assert_eq!(age(0), Some(SimDuration::from_millis(90)));
        assert_eq!(versions.current((0, 8)), 0, "each key on its own");
    }

    #[test]
    fn past_the_commits_kept_the_age_is_a_lower_bound() {
        let mut versions = Versions::default();
        let key = (1, 0);
        for ms in 1..=20 {
            versions.commit(at(ms), key);
        }
        // Versions 13..=20 were made at 13..=20 ms; version 2 was superseded at 3 ms, which
        // is forgotten: the age counts from 13 ms.
        assert_eq!(
            versions.out_of_date_for(at(50), key, 12),
            Some(SimDuration::from_millis(37))
        );
        assert_eq!(
            versions.out_of_date_for(at(50), key, 2),
            Some(SimDuration::from_millis(37))
        );
    }
}

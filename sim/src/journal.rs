//! The run's log of state changes, for diagnosis: breaker transitions, reconnect-slot links
//! lost and made, fault windows, a server's first time over its memory limit, first eviction
//! and first OOM. Seed 000's outage "produced zero log lines beyond request
//! logs"; this is the log it lacked (`outagelab run --events PATH` writes it as JSON lines).
//!
//! Each source keeps its own entries, in the order they happened, and the report merges them
//! by time ([`merge`]): a stable sort, so entries of one instant keep their source order
//! (faults, then breakers, then slots, each by index) and the log is the same on every run.
//! Memory is bounded: a source keeps at most [`ENTRIES_MAX`] entries and counts the rest, so
//! the run's memory estimate leaves the log out.

use outagelab_model::breaker::{BreakerState, Transition};
use outagelab_model::time::SimTime;
use outagelab_report::LogEntry;

/// The most entries one source (a breaker, a slot) keeps; later ones are counted, not kept.
pub(crate) const ENTRIES_MAX: usize = 10_000;

/// One source's entries.
#[derive(Clone, Debug)]
pub(crate) struct Journal<T> {
    entries: Vec<(SimTime, T)>,
    dropped: u64,
}

impl<T> Default for Journal<T> {
    fn default() -> Self {
        Journal {
            entries: Vec::new(),
            dropped: 0,
        }
    }
}

impl<T> Journal<T> {
    pub fn record(&mut self, at: SimTime, what: T) {
        if self.entries.len() < ENTRIES_MAX {
            self.entries.push((at, what));
        } else {
            self.dropped += 1;
        }
    }

    pub fn entries(&self) -> impl Iterator<Item = &(SimTime, T)> {
        self.entries.iter()
    }

    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// What happened on a reconnect slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotChange {
    /// A connection attempt succeeded: the slot holds `link`.
    Connected {
        link: u64,
    },
    ConnectFailed,
    /// A failure on the live link evicted it.
    Lost {
        link: u64,
    },
}

pub(crate) fn ms(at: SimTime) -> f64 {
    at.as_nanos() as f64 / 1e6
}

pub(crate) fn breaker_entry(name: &str, transition: &Transition) -> LogEntry {
    let state = |state: BreakerState| match state {
        BreakerState::Closed => "closed",
        BreakerState::Open => "open",
        BreakerState::HalfOpen => "half_open",
    };
    LogEntry {
        at_ms: ms(transition.at),
        event: format!("breaker_{}", state(transition.to)),
        target_kind: "breaker",
        target: name.to_owned(),
        from: Some(state(transition.from)),
        link: None,
    }
}

pub(crate) fn slot_entry(connection: &str, at: SimTime, change: SlotChange) -> LogEntry {
    let (event, link) = match change {
        SlotChange::Connected { link } => ("slot_connected", Some(link)),
        SlotChange::ConnectFailed => ("slot_connect_failed", None),
        SlotChange::Lost { link } => ("slot_lost", Some(link)),
    };
    LogEntry {
        at_ms: ms(at),
        event: event.to_owned(),
        target_kind: "connection",
        target: connection.to_owned(),
        from: None,
        link,
    }
}

/// Sorts entries gathered source by source into time order, keeping the order of entries of
/// one instant.
pub(crate) fn merge(mut entries: Vec<LogEntry>) -> Vec<LogEntry> {
    entries.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_journal_counts_what_it_drops() {
        let mut journal = Journal::default();
        for i in 0..ENTRIES_MAX as u64 + 3 {
            journal.record(SimTime::from_nanos(i), ());
        }
        assert_eq!(journal.entries().count(), ENTRIES_MAX);
        assert_eq!(journal.dropped(), 3);
    }

    #[test]
    fn merging_orders_by_time_and_keeps_the_order_of_one_instant() {
        let at = |ms: u64| SimTime::from_nanos(ms * 1_000_000);
        let entries = vec![
            slot_entry("c", at(5), SlotChange::ConnectFailed),
            slot_entry("c", at(2), SlotChange::Lost { link: 1 }),
            slot_entry("c", at(2), SlotChange::Connected { link: 2 }),
        ];
        let merged: Vec<(f64, String)> = merge(entries)
            .into_iter()
            .map(|e| (e.at_ms, e.event))
            .collect();
        assert_eq!(
            merged,
            [
                (2.0, "slot_lost".to_owned()),
                (2.0, "slot_connected".to_owned()),
                (5.0, "slot_connect_failed".to_owned())
            ]
        );
    }
}

//! The event queue: what happens next, in virtual time.
//!
//! Events are ordered by `(time, insertion sequence)`, so events at the same instant run in the
//! order they were scheduled. Events are small `Copy` values naming entities by index; the
//! heap's storage is reused, so a run in steady state allocates nothing per event.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use outagelab_model::time::SimTime;

use outagelab_report::Outcome;

use crate::database::DatabaseEvent;
use crate::redis::RedisEvent;
use crate::scenario::{FaultId, LoadId};

/// How one step of a request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StepResult {
    Ok,
    /// A `GET` found its key.
    Hit,
    /// A `GET` did not find its key.
    Miss,
    Error(Outcome),
}

/// A reference to a request that is waiting for something. It is stale (and the event that
/// carries it is dropped) once the request stopped waiting: every request bumps its token
/// whenever a wait ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RequestRef {
    pub slot: u32,
    pub token: u32,
}

impl RequestRef {
    /// As a bulkhead waiter id.
    pub fn to_waiter(self) -> u64 {
        u64::from(self.slot) << 32 | u64::from(self.token)
    }

    pub fn from_waiter(waiter: u64) -> RequestRef {
        RequestRef {
            slot: (waiter >> 32) as u32,
            token: waiter as u32,
        }
    }
}

/// What a request's timer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerKind {
    /// A work step's local work is done.
    Work,
    /// A retry's backoff is over: enter the step's inner layers again.
    Backoff,
    /// A throttle's KV round trip is over: take its next step.
    ThrottleKv,
}

/// Everything the queue holds: the engine's own events, and each mechanism's, which the engine
/// hands back to that mechanism's `handle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The next arrival (or burst) of a load generator.
    Arrival(LoadId),
    /// A timer a request set: what it means is its kind, and the request's stage says the
    /// same (the two are checked against each other).
    RequestTimer {
        request: RequestRef,
        kind: TimerKind,
    },
    FaultStarts(FaultId),
    FaultEnds(FaultId),
    Redis(RedisEvent),
    Database(DatabaseEvent),
}

impl From<RedisEvent> for Event {
    fn from(event: RedisEvent) -> Event {
        Event::Redis(event)
    }
}

impl From<DatabaseEvent> for Event {
    fn from(event: DatabaseEvent) -> Event {
        Event::Database(event)
    }
}

struct Scheduled {
    at: SimTime,
    seq: u64,
    event: Event,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

#[derive(Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Scheduled>,
    next_seq: u64,
}

impl EventQueue {
    pub fn schedule(&mut self, at: SimTime, event: impl Into<Event>) {
        self.heap.push(Scheduled {
            at,
            seq: self.next_seq,
            event: event.into(),
        });
        self.next_seq += 1;
    }

    /// Events waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Bytes one waiting event takes in the queue.
    pub const ENTRY_BYTES: u64 = std::mem::size_of::<Scheduled>() as u64;

    pub fn peek_time(&self) -> Option<SimTime> {
        self.heap.peek().map(|scheduled| scheduled.at)
    }

    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        self.heap
            .pop()
            .map(|scheduled| (scheduled.at, scheduled.event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_instant_events_keep_their_insertion_order() {
        let mut queue = EventQueue::default();
        let t = |nanos| SimTime::from_nanos(nanos);
        queue.schedule(t(5), Event::Arrival(LoadId(2)));
        queue.schedule(t(3), Event::Arrival(LoadId(0)));
        queue.schedule(t(5), Event::Arrival(LoadId(3)));
        queue.schedule(t(3), Event::Arrival(LoadId(1)));
        let order: Vec<_> = std::iter::from_fn(|| queue.pop()).collect();
        assert_eq!(
            order,
            vec![
                (t(3), Event::Arrival(LoadId(0))),
                (t(3), Event::Arrival(LoadId(1))),
                (t(5), Event::Arrival(LoadId(2))),
                (t(5), Event::Arrival(LoadId(3))),
            ]
        );
    }

    #[test]
    fn events_stay_small() {
        assert!(std::mem::size_of::<Event>() <= 16);
    }

    #[test]
    fn waiter_ids_round_trip() {
        let r = RequestRef {
            slot: 7,
            token: u32::MAX,
        };
        assert_eq!(RequestRef::from_waiter(r.to_waiter()), r);
    }
}

//! Reconnect slots (seed 001) in virtual time: `outagelab_model::reconnect::ReconnectSlot`
//! decides, this module sequences it against the links of [`crate::redis`].
//!
//! Per connection with `reconnect = "slot"`:
//! - a caller asks the slot before each command. A lease names the live link; "connect" makes
//!   this caller the single flight: a new link starts its attempt and the caller waits for it;
//!   "wait" parks the caller under the attempt in progress; "unavailable" (a backoff window)
//!   fails the step at once with `refused`;
//! - when the attempt ends (a [`LinkEvent`]), it is reported to the slot, and every caller
//!   parked under it, connector first, asks again, in the order they parked;
//! - a command that fails with a connection-level error (`timeout`, `connection_lost`) is
//!   reported through the lease it ran on: the slot evicts the live link only if the lease is
//!   of that generation, and the engine then retires the link (it drains and closes). A
//!   failure through an older lease changes nothing and is counted as `stale_failures`.
//!
//! Invariants: at most one attempt per slot is in progress (the model's single flight, and
//! `attempt` below holds at most one); every parked caller is woken exactly once, by the end
//! of the attempt it parked under.

use outagelab_model::reconnect::{
    Acquire, AttemptTicket, Failure, FailureEffect, Lease, ReconnectSlot,
};
use outagelab_model::time::SimTime;
use outagelab_report::{LogEntry, SlotSummary};

use crate::journal::{self, Journal, SlotChange};
use crate::kernel::{EventQueue, RequestRef};
use crate::redis::{LinkEvent, Redis};
use crate::scenario::{ConnectionId, Reconnect, Scenario};

struct SlotEntry {
    slot: ReconnectSlot,
    /// The attempt in progress: its ticket and the link it is made on.
    attempt: Option<(AttemptTicket, ConnectionId)>,
    /// Callers waiting for the attempt in progress, in the order they asked.
    parked: Vec<RequestRef>,
    stats: SlotSummary,
    /// Links made, failed and lost, for the run's log.
    log: Journal<SlotChange>,
}

/// What a caller of [`ReconnectSlots::acquire`] does next.
pub(crate) enum SlotAcquire {
    /// Run the command on the link the lease names.
    Lease(Lease),
    /// The caller is parked until an attempt ends; it is handed back by
    /// [`ReconnectSlots::on_link_event`].
    Parked,
    /// A backoff window is open: fail at once.
    Unavailable,
}

pub(crate) struct ReconnectSlots {
    /// One per connection of the scenario; `None` for connections that are not slots.
    slots: Vec<Option<SlotEntry>>,
}

/// The link a lease runs on.
pub(crate) fn link_of(lease: &Lease) -> ConnectionId {
    link(lease.connection())
}

/// A link as the model's slot names it.
fn link(id: outagelab_model::reconnect::ConnectionId) -> ConnectionId {
    ConnectionId(u32::try_from(id).expect("link ids are u32"))
}

impl ReconnectSlots {
    /// A slot per `reconnect = "slot"` connection. One that is connected at the start holds
    /// its first link (the connection's own entry, connected by [`Redis::new`]) as generation 1.
    pub fn new(scenario: &Scenario) -> ReconnectSlots {
        let slots = scenario
            .connections
            .iter()
            .enumerate()
            .map(|(index, spec)| {
                let Reconnect::Slot(config) = spec.reconnect else {
                    return None;
                };
                let mut slot = ReconnectSlot::new(config);
                if spec.connected_at_start {
                    let Acquire::Connect(ticket) = slot.acquire(SimTime::ZERO) else {
                        unreachable!("a new slot is empty");
                    };
                    slot.on_connected(SimTime::ZERO, ticket, index as u64);
                }
                Some(SlotEntry {
                    slot,
                    attempt: None,
                    parked: Vec::new(),
                    stats: SlotSummary::default(),
                    log: Journal::default(),
                })
            })
            .collect();
        ReconnectSlots { slots }
    }

    pub fn is_slot(&self, connection: ConnectionId) -> bool {
        self.slots[connection.index()].is_some()
    }

    fn entry(&mut self, connection: ConnectionId) -> &mut SlotEntry {
        self.slots[connection.index()]
            .as_mut()
            .expect("only slot connections are asked")
    }

    /// `caller` wants to run a command on `connection` now.
    pub fn acquire(
        &mut self,
        now: SimTime,
        connection: ConnectionId,
        caller: RequestRef,
        redis: &mut Redis,
        events: &mut EventQueue,
    ) -> SlotAcquire {
        let entry = self.entry(connection);
        match entry.slot.acquire(now) {
            Acquire::Lease(lease) => SlotAcquire::Lease(lease),
            Acquire::Connect(ticket) => {
                debug_assert!(entry.attempt.is_none(), "single flight");
                let link = redis.open_link(now, connection, events);
                entry.attempt = Some((ticket, link));
                entry.parked.push(caller);
                SlotAcquire::Parked
            }
            Acquire::Wait(_) => {
                entry.stats.waited += 1;
                entry.parked.push(caller);
                SlotAcquire::Parked
            }
            Acquire::Unavailable { .. } => {
                entry.stats.unavailable += 1;
                SlotAcquire::Unavailable
            }
        }
    }

    /// The attempt on a link of `connection` ended: reports it to the slot and returns the
    /// callers to wake, in the order they parked.
    pub fn on_link_event(
        &mut self,
        now: SimTime,
        connection: ConnectionId,
        event: LinkEvent,
    ) -> Vec<RequestRef> {
        let entry = self.entry(connection);
        let (ticket, link) = entry
            .attempt
            .take()
            .expect("a link event ends the attempt in progress");
        match event {
            LinkEvent::Connected(ended) => {
                debug_assert_eq!(ended, link);
                entry.slot.on_connected(now, ticket, u64::from(link.0));
                let link = u64::from(link.0);
                entry.log.record(now, SlotChange::Connected { link });
            }
            LinkEvent::ConnectFailed(ended) => {
                debug_assert_eq!(ended, link);
                entry.slot.on_connect_failed(now, ticket);
                entry.log.record(now, SlotChange::ConnectFailed);
            }
        }
        std::mem::take(&mut entry.parked)
    }

    /// A command run on `lease` failed; returns what the slot did.
    pub fn on_failure(
        &mut self,
        now: SimTime,
        connection: ConnectionId,
        lease: &Lease,
        failure: Failure,
    ) -> FailureEffect {
        let entry = self.entry(connection);
        let effect = entry.slot.on_failure(now, lease, failure);
        match effect {
            FailureEffect::NotCurrent => entry.stats.stale_failures += 1,
            FailureEffect::Evicted => {
                let link = lease.connection();
                entry.log.record(now, SlotChange::Lost { link });
            }
            FailureEffect::ConnectionKept => {}
        }
        effect
    }

    /// The link the slot of `connection` holds now, if any.
    pub fn live_link(&self, connection: ConnectionId) -> Option<ConnectionId> {
        let entry = self.slots[connection.index()].as_ref()?;
        entry.slot.live_connection().map(link)
    }

    pub fn record_replay(&mut self, connection: ConnectionId) {
        self.entry(connection).stats.replays += 1;
    }

    pub fn record_fail_open(&mut self, connection: ConnectionId) {
        self.entry(connection).slot.record_fail_open();
    }

    /// Whether the slot holds a live connection (seed 001's `connected` gauge).
    pub fn connected(&self, connection: ConnectionId) -> bool {
        self.slots[connection.index()]
            .as_ref()
            .is_some_and(|entry| entry.slot.stats().connected)
    }

    /// Every slot's log entries (in connection order), and how many could not be kept.
    pub fn log(&self, scenario: &Scenario, entries: &mut Vec<LogEntry>) -> u64 {
        let mut dropped = 0;
        for (spec, entry) in scenario.connections.iter().zip(&self.slots) {
            let Some(entry) = entry else { continue };
            let changes = entry.log.entries();
            entries
                .extend(changes.map(|&(at, change)| journal::slot_entry(&spec.name, at, change)));
            dropped += entry.log.dropped();
        }
        dropped
    }

    /// The slot's counters, if `connection` is a slot.
    pub fn summary(&self, connection: ConnectionId) -> Option<SlotSummary> {
        self.slots[connection.index()].as_ref().map(|entry| {
            let stats = entry.slot.stats();
            SlotSummary {
                reconnects: stats.reconnects_total,
                evictions: stats.evictions_total,
                ..entry.stats.clone()
            }
        })
    }
}

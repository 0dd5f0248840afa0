//! The links of reconnect slots (`reconnect = "slot"`), and the writes a slot may replay.
//!
//! A slot is one logical connection made of physical links that never reconnect by
//! themselves: the engine's slot layer (`reconnect_slots.rs`) opens a link per connection
//! attempt ([`Redis::open_link`]), hears how the attempt ended through `link_events`, and
//! retires a link its slot evicted ([`Redis::retire_link`]); a retired link drains the commands
//! already on it and is then closed and kept for reuse. The logical connection's own entry is
//! its first link (connected at the start, or made by its first attempt).
//!
//! A write a slot replays on a fresh link is a second command, tied to the first by an
//! *origin* whose executions are added up until every copy is gone: a write the server
//! executed more than once over all its copies counts in `writes_applied_twice`.

use outagelab_model::time::SimTime;

use super::Redis;
use super::connection::Connection;
use crate::kernel::EventQueue;
use crate::scenario::ConnectionId;

/// The copies of one write a slot may replay: how many are still on some link, how often the
/// server executed any of them, and whether its request may still send another.
pub(super) struct Origin {
    owner: ConnectionId,
    pub(super) copies: u32,
    pub(super) executions: u32,
    open: bool,
    /// Whether the step opted into replaying this write (`replay_writes`): a second execution
    /// is then a figure (`writes_applied_twice`); otherwise it is a bug the monitor reports.
    pub(super) replay_allowed: bool,
}

impl Origin {
    /// Counts one execution by the server; true when it is a second execution of a write
    /// nobody allowed to be replayed.
    pub(super) fn executed(&mut self) -> bool {
        self.executions += 1;
        self.executions == 2 && !self.replay_allowed
    }
}

impl Redis {
    /// Starts a connection attempt on a new link of slot `owner`; its end comes as a
    /// [`LinkEvent`](super::LinkEvent).
    pub fn open_link(
        &mut self,
        now: SimTime,
        owner: ConnectionId,
        events: &mut EventQueue,
    ) -> ConnectionId {
        self.changed = true;
        let id = match self.free_links[owner.index()].pop() {
            Some(id) => id,
            None => {
                let id = ConnectionId(
                    u32::try_from(self.connections.len()).expect("fewer than 2^32 links"),
                );
                let first = &self.connections[owner.index()];
                let mut link = Connection::new(first.spec.clone(), owner, self.seed);
                link.set_toxics(self.toxics[owner.index()].clone());
                self.servers[link.spec.server.index()].connections.push(id);
                self.connections.push(link);
                id
            }
        };
        self.connections[id.index()].retired = false;
        self.start_connect(now, id, events);
        id
    }

    /// The slot evicted `link`: it takes no new command, and closes once the commands already
    /// on it have ended (at once if there are none).
    pub fn retire_link(&mut self, link: ConnectionId) {
        self.changed = true;
        self.connections[link.index()].retired = true;
        self.close_if_drained(link);
    }

    /// Closes a retired link with no command left and keeps it for reuse.
    pub(super) fn close_if_drained(&mut self, id: ConnectionId) {
        let connection = &mut self.connections[id.index()];
        if !(connection.retired && connection.commands.is_empty()) {
            return;
        }
        connection.retired = false;
        connection.drop_link();
        self.free_links[connection.owner.index()].push(id);
    }

    /// A new write on slot `owner`: its copies (a replay makes a second one) are tied together
    /// under the id returned, so the server's executions of it are counted together whatever
    /// the step opted into. Close it with [`Redis::close_origin`] when its request can send no
    /// further copy.
    pub fn open_origin(&mut self, owner: ConnectionId, replay_allowed: bool) -> u64 {
        let id = self.next_origin;
        self.next_origin += 1;
        self.origins.insert(
            id,
            Origin {
                owner,
                copies: 0,
                executions: 0,
                open: true,
                replay_allowed,
            },
        );
        id
    }

    pub fn close_origin(&mut self, origin: u64) {
        if let Some(entry) = self.origins.get_mut(&origin) {
            entry.open = false;
        }
        self.settle_origin(origin);
    }

    /// A copy of `origin` left its link.
    pub(super) fn origin_copy_gone(&mut self, origin: u64) {
        if let Some(entry) = self.origins.get_mut(&origin) {
            entry.copies -= 1;
        }
        self.settle_origin(origin);
    }

    /// Forgets an origin whose copies are all gone and whose request sends no more, counting
    /// a write the server applied more than once.
    fn settle_origin(&mut self, origin: u64) {
        let Some(entry) = self.origins.get(&origin) else {
            return;
        };
        if entry.open || entry.copies > 0 {
            return;
        }
        if entry.executions > 1 {
            let owner = entry.owner;
            self.connections[owner.index()].stats.writes_applied_twice += 1;
        }
        self.origins.remove(&origin);
    }
}

#[cfg(test)]
mod tests {
    use outagelab_model::reconnect::ReconnectConfig;

    use super::super::LinkEvent;
    use super::super::testing::{Harness, get};
    use crate::kernel::StepResult;
    use crate::scenario::{ConnectionId, Reconnect};

    /// Connection 0 a reconnect slot, connected at the start.
    fn slot() -> Harness {
        Harness::with(1, |scenario| {
            let spec = &mut scenario.connections[0];
            spec.reconnect = Reconnect::Slot(ReconnectConfig::seed_001());
            spec.offline_queue = false;
        })
    }

    #[test]
    fn a_retired_link_drains_its_commands_then_closes_and_is_reused() {
        let mut redis = slot();
        redis.issue_at(0, 0, get(0), 0);
        // At 10 us the slot opens a second link and retires the first, whose command is out.
        let second = redis.open_link_at(10, 0);
        assert_eq!(second, ConnectionId(1));
        redis.retire_link_at(10, ConnectionId(0));
        redis.run();
        // The retired link still delivers its reply; the new link connects after a round trip.
        assert_eq!(redis.finished(), vec![(0, 205, StepResult::Miss)]);
        assert_eq!(
            redis.link_events(),
            vec![(210, LinkEvent::Connected(second))]
        );
        // The first link closed once drained, so the next attempt reuses it.
        assert_eq!(redis.open_link_at(1_000, 0), ConnectionId(0));
        redis.run();
        assert_eq!(redis.summary().connect_attempts, 2);
    }

    #[test]
    fn a_slot_link_that_is_lost_fails_its_commands_and_does_not_reconnect() {
        let mut redis = slot();
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(50, crate::scenario::FaultKind::Kill, true);
        redis.issue_at(60_000, 0, get(1), 1);
        redis.run();
        let lost = StepResult::Error(outagelab_report::Outcome::ConnectionLost);
        assert_eq!(redis.finished(), vec![(0, 150, lost), (1, 60_000, lost)]);
        assert_eq!(redis.summary().connect_attempts, 0);
    }
}

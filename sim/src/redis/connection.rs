//! The client side of a connection: commands waiting for replies, timeouts, and the link's
//! life (connect, lose, reconnect).
//!
//! A connection is multiplexed, as in ioredis and redis-rs: the client writes commands in FIFO
//! order into an outbound [`Pipe`]; the server reads them in that order; replies come back
//! through an inbound pipe, in order. A small command written behind large ones waits for
//! their bytes: head-of-line blocking.
//!
//! The client keeps every command it has not had a reply for, in order: the first `sent` were
//! written to the current link, the rest wait offline. A command whose client-side timeout
//! fires stays there: a real server still executes a command whose caller gave up. Every
//! change of link (lost, attempt failed, connected) bumps the connection's `epoch`, and events
//! of an older epoch are dropped.
//!
//! Events: `CommandTimeout` (one armed per connection, for its oldest command that may be due),
//! `ReplyArrives`, `ConnectAnswered`, `ConnectTimeout`, `ReconnectDue` and `ConnectionClosed`.

use std::collections::VecDeque;

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{ConnectionSummary, Outcome};

use super::client_loop::{Due, Sent, Written};
use super::keyspace::{Op, Reply};
use super::pipe::{Pipe, ToxicTimeline};
use super::{LinkEvent, Redis, RedisEvent, is_slot, is_write};
use crate::kernel::{EventQueue, RequestRef, StepResult};
use crate::rng::Stream;
use crate::scenario::{ConnectionId, ConnectionSpec, Reconnect, ServerId};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Link {
    Connected,
    Connecting,
    /// Waiting for the reconnect delay to pass.
    Down,
}

pub(super) struct Command {
    pub(super) seq: u64,
    pub(super) op: Op,
    waiter: RequestRef,
    /// When the client-side timeout fires (`SimTime::MAX` without one). Every command on a
    /// connection has the same timeout, so deadlines grow with `seq`.
    deadline: SimTime,
    timed_out: bool,
    /// Links this command has outlived (lost connections and failed attempts).
    retries: u32,
    /// Times the server executed it (more than once after a resend).
    pub(super) executions: u32,
    /// The write this command is a copy of, when a slot may replay it (see `slot_links`).
    pub(super) origin: Option<u64>,
}

pub(super) struct Connection {
    pub(super) spec: ConnectionSpec,
    /// The logical connection this is a link of (itself, but for a slot's later links).
    pub(super) owner: ConnectionId,
    /// A slot evicted this link: it takes no new command and closes once drained.
    pub(super) retired: bool,
    pub(super) link: Link,
    pub(super) epoch: u32,
    /// Commands with `seq` below this have timed out or ended; the next timeout to fire is
    /// that of the first command at or after it.
    timeout_cursor: u64,
    /// Whether a `CommandTimeout` event is scheduled. There is at most one per connection, so
    /// the event queue holds no timer for commands that were answered in time.
    timeout_armed: bool,
    /// Commands without a reply, in issue order: `commands[..sent]` were written to the
    /// current link, the rest wait offline. Never holds a command twice.
    pub(super) commands: VecDeque<Command>,
    sent: usize,
    next_seq: u64,
    /// Consecutive failed connection attempts (1 right after losing a working link).
    attempts_failed: u32,
    /// Commands on the wire to the server, by `seq`: the command itself stays in `commands`,
    /// which holds every command of the link until its reply or the link's end.
    pub(super) outbound: Pipe<u64>,
    /// Whether the server holds this connection open.
    pub(super) server_open: bool,
    /// Commands that reached the server and wait for its thread, by `seq`.
    pub(super) input: VecDeque<u64>,
    /// Whether the server has this connection in its ready ring or is executing its command;
    /// a connection is put back in the ring only when its command is done.
    pub(super) scheduled: bool,
    /// Replies on the wire to the client.
    pub(super) inbound: Pipe<(u64, Reply)>,
    pub(super) stats: ConnectionSummary,
    /// The server it is connected (or connecting) to: its spec's, or after a failover it
    /// follows, the promoted replica.
    pub(super) server: ServerId,
    /// A `ConnectionManager` that gave up reconnecting: the next command starts again.
    manager_idle: bool,
    /// A `ConnectionManager`'s draws of its reconnect delays (full jitter).
    pub(super) jitter: Option<Stream>,
}

impl Connection {
    /// A link of `owner`, down, with nothing on it.
    pub(super) fn new(spec: ConnectionSpec, owner: ConnectionId, seed: u64) -> Connection {
        let draws = |direction: &str| {
            Stream::derive(seed, "toxic jitter", &format!("{}/{direction}", spec.name))
        };
        Connection {
            owner,
            retired: false,
            link: Link::Down,
            epoch: 0,
            timeout_cursor: 0,
            timeout_armed: false,
            commands: VecDeque::new(),
            sent: 0,
            next_seq: 0,
            attempts_failed: 0,
            outbound: Pipe::new(spec.bandwidth, spec.latency, draws("out")),
            server_open: false,
            input: VecDeque::new(),
            scheduled: false,
            inbound: Pipe::new(spec.bandwidth, spec.latency, draws("in")),
            stats: ConnectionSummary::default(),
            server: spec.server,
            manager_idle: false,
            jitter: None,
            spec,
        }
    }

    /// What this link sends either way takes the toxics of its connection over the run.
    pub(super) fn set_toxics(&mut self, toxics: ToxicTimeline) {
        self.outbound.set_toxics(toxics.clone());
        self.inbound.set_toxics(toxics);
    }

    /// The connection, if `epoch` is its current link's: an event of an older link is stale.
    pub(super) fn of_epoch(&mut self, epoch: u32) -> Option<&mut Connection> {
        (self.epoch == epoch).then_some(self)
    }

    /// Where the command `seq` (on the wire or at the server) is in `commands`. A link's
    /// commands leave only from the front, after their reply, or all at once when the link is
    /// dropped with its wires and input, so one that reached the server is still here.
    /// Sequence numbers rise by one per command issued, so `seq`'s place is its distance from
    /// the front's; only a carry-over after a lost link (which keeps some commands and fails
    /// others) leaves gaps, and then a binary search over the rising numbers finds it.
    pub(super) fn command_index(&self, seq: u64) -> usize {
        let front = self.commands.front().map_or(seq, |command| command.seq);
        let guess = usize::try_from(seq.wrapping_sub(front)).unwrap_or(usize::MAX);
        let index = match self.commands.get(guess) {
            Some(command) if command.seq == seq => guess,
            _ => self.commands.partition_point(|command| command.seq < seq),
        };
        assert!(
            self.commands
                .get(index)
                .is_some_and(|command| command.seq == seq),
            "a command at the server is held by its client"
        );
        index
    }

    /// The link is gone: its wires and the server's unread input are dropped, the server no
    /// longer holds it open, and events of the old link become stale. Commands stay for the
    /// caller to carry over or fail.
    pub(super) fn drop_link(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        self.link = Link::Down;
        self.outbound.reset();
        self.inbound.reset();
        self.input.clear();
        self.server_open = false;
        self.sent = 0;
    }

    /// Writes a command to the current link.
    fn transmit(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        seq: u64,
        op: Op,
        events: &mut EventQueue,
    ) {
        let arrives = self.outbound.send(now, seq, op.request_bytes());
        events.schedule(
            arrives,
            RedisEvent::CommandArrives {
                connection: id,
                epoch: self.epoch,
            },
        );
    }
}

impl Redis {
    /// A request issues a command. Returns the result at once when the connection cannot take
    /// it (down, with the offline queue off: `refused`; holding `pending_max` commands:
    /// `shed`); otherwise the result comes later through `completions`.
    pub fn issue(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        op: Op,
        waiter: RequestRef,
        origin: Option<u64>,
        events: &mut EventQueue,
    ) -> Option<StepResult> {
        self.changed = true;
        let connection = &mut self.connections[id.index()];
        let manager = matches!(connection.spec.reconnect, Reconnect::Manager { .. });
        if connection.link != Link::Connected && !connection.spec.offline_queue && !manager {
            // A slot's link that was lost: writing to it fails like a broken pipe.
            let error = if is_slot(&connection.spec) {
                Outcome::ConnectionLost
            } else {
                Outcome::Refused
            };
            return Some(StepResult::Error(error));
        }
        if let Some(max) = connection.spec.pending_max
            && connection.commands.len() >= max.get() as usize
        {
            return Some(StepResult::Error(Outcome::Shed));
        }
        if let Some(entry) = origin.and_then(|origin| self.origins.get_mut(&origin)) {
            entry.copies += 1;
        }
        let connection = &mut self.connections[id.index()];
        let seq = connection.next_seq;
        connection.next_seq += 1;
        // The client's timer fires its lateness after the deadline.
        let deadline = connection
            .spec
            .command_timeout
            .map_or(SimTime::MAX, |timeout| {
                now.saturating_add(timeout)
                    .saturating_add(connection.spec.timer_lateness)
            });
        connection.commands.push_back(Command {
            seq,
            op,
            waiter,
            deadline,
            timed_out: false,
            retries: 0,
            executions: 0,
            origin,
        });
        connection.stats.commands += 1;
        let owner = connection.owner;
        let (pending, peak) = &mut self.pending[owner.index()];
        *pending += 1;
        *peak = (*peak).max(*pending);
        self.mark_pending(owner);
        self.queued += 1;
        let connection = &mut self.connections[id.index()];
        if deadline != SimTime::MAX && !connection.timeout_armed {
            connection.timeout_armed = true;
            events.schedule(deadline, RedisEvent::CommandTimeout { connection: id });
        }
        if connection.link == Link::Connected {
            connection.sent += 1;
            self.send(now, id, seq, op, events);
        } else if connection.manager_idle {
            // A ConnectionManager that gave up starts a new reconnect for this command.
            connection.manager_idle = false;
            connection.attempts_failed = 0;
            self.start_connect(now, id, events);
        }
        None
    }

    /// Sends a command issued now on `id` (connected): at once without an event loop; else
    /// once its loop has built it (and, with a writer's turn, copied it in its batch's turn).
    fn send(&mut self, now: SimTime, id: ConnectionId, seq: u64, op: Op, events: &mut EventQueue) {
        let connection = &mut self.connections[id.index()];
        let Some(client_loop) = connection.spec.client_loop else {
            connection.transmit(now, id, seq, op, events);
            return;
        };
        let epoch = connection.epoch;
        let closed = self.client_loops[client_loop.index()].close_passed(now);
        self.transmit_sent(closed, events);
        let written = self.client_loops[client_loop.index()].write(
            now,
            id,
            op.request_bytes(),
            (epoch, seq, op),
        );
        match written {
            Written::At(at) => {
                self.connections[id.index()].transmit(at, id, seq, op, events);
            }
            Written::Batched {
                opened: Some((batch, at)),
            } => events.schedule(at, RedisEvent::LoopTurn { client_loop, batch }),
            Written::Batched { opened: None } => {}
        }
    }

    /// A client loop's look at a batch: its turns, once its builds are over.
    pub(super) fn on_loop_turn(
        &mut self,
        now: SimTime,
        client_loop: crate::scenario::ClientLoopId,
        batch: u64,
        events: &mut EventQueue,
    ) {
        match self.client_loops[client_loop.index()].turn_due(now, batch) {
            Due::Again(at) => events.schedule(at, RedisEvent::LoopTurn { client_loop, batch }),
            Due::Sent(sent) => self.transmit_sent(sent, events),
            Due::Gone => {}
        }
    }

    /// Puts a batch's commands on their pipes as they leave the client, each on the link it
    /// was issued on (one lost since resends its commands itself).
    fn transmit_sent(&mut self, sent: Vec<Sent<(u32, u64, Op)>>, events: &mut EventQueue) {
        for Sent {
            connection: id,
            item: (epoch, seq, op),
            at,
        } in sent
        {
            let connection = &mut self.connections[id.index()];
            if connection.epoch == epoch && connection.link == Link::Connected {
                connection.transmit(at, id, seq, op, events);
            }
        }
    }

    pub(super) fn on_reply_arrives(&mut self, id: ConnectionId, epoch: u32) {
        let Some(connection) = self.connections[id.index()].of_epoch(epoch) else {
            return; // an event of a link since gone
        };
        let (seq, reply) = connection.inbound.receive();
        if let Reply::Push { family, index } = reply {
            connection.stats.messages += 1;
            self.messages.push((id, family, index));
            return;
        }
        let command = connection
            .commands
            .pop_front()
            .expect("a reply answers a sent command");
        assert_eq!(command.seq, seq, "replies come back in order");
        connection.sent -= 1;
        connection.stats.replies += 1;
        if !command.timed_out {
            let version = match reply {
                Reply::Hit { version, .. } => version,
                _ => 0,
            };
            self.completions
                .push((command.waiter, reply.result(), version));
        }
        self.command_gone(id, &command);
        self.close_if_drained(id);
    }

    /// Times out every command whose deadline has passed, then arms the timer for the next.
    pub(super) fn on_command_timeout(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        connection.timeout_armed = false;
        let cursor = connection.timeout_cursor;
        let start = connection
            .commands
            .partition_point(|command| command.seq < cursor);
        for index in start..connection.commands.len() {
            let command = &mut connection.commands[index];
            if command.deadline > now {
                if command.deadline != SimTime::MAX {
                    connection.timeout_armed = true;
                    events.schedule(
                        command.deadline,
                        RedisEvent::CommandTimeout { connection: id },
                    );
                }
                return;
            }
            connection.timeout_cursor = command.seq + 1;
            command.timed_out = true;
            connection.stats.timeouts += 1;
            self.completions
                .push((command.waiter, StepResult::Error(Outcome::Timeout), 0));
        }
    }

    /// A command leaves its link (answered, or failed with the link): a write the server
    /// applied more than once is counted now, or when its last copy goes.
    fn command_gone(&mut self, id: ConnectionId, command: &Command) {
        let owner = self.connections[id.index()].owner;
        self.pending[owner.index()].0 -= 1;
        self.mark_pending(owner);
        self.queued -= 1;
        match command.origin {
            Some(origin) => self.origin_copy_gone(origin),
            None => {
                if command.executions > 1 && is_write(command.op.command) {
                    self.connections[id.index()].stats.writes_applied_twice += 1;
                }
            }
        }
    }

    pub(super) fn on_connection_closed(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        if connection.epoch != epoch || connection.link != Link::Connected {
            return;
        }
        connection.stats.disconnects += 1;
        connection.attempts_failed = 0;
        self.link_lost(now, id, false, events);
    }

    /// The link is gone (closed, or an attempt refused or timed out): drop the wires, carry
    /// each command over or fail it, and schedule the next attempt; a slot's link instead
    /// tells the slot that its attempt failed.
    fn link_lost(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        attempt_failed: bool,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        let sent = connection.sent;
        connection.drop_link();
        let (offline_queue, max_retries) =
            (connection.spec.offline_queue, connection.spec.max_retries);
        let manager = match connection.spec.reconnect {
            Reconnect::Manager { retries } => Some(retries),
            _ => None,
        };
        // A ConnectionManager that has run out of attempts gives up: what waits fails.
        let gives_up =
            manager.is_some_and(|retries| attempt_failed && connection.attempts_failed >= retries);
        let mut gone = Vec::new();
        let commands = std::mem::take(&mut connection.commands);
        for (index, mut command) in commands.into_iter().enumerate() {
            command.retries = command.retries.saturating_add(1);
            let keep = match manager {
                // What was on the lost link fails; what waits for the reconnect stays.
                Some(_) => index >= sent && !gives_up,
                None => offline_queue && max_retries.is_none_or(|max| command.retries <= max),
            };
            let error = if manager.is_some() && index >= sent {
                Outcome::Refused
            } else {
                Outcome::ConnectionLost
            };
            if keep {
                connection.commands.push_back(command);
            } else {
                if !command.timed_out {
                    self.completions
                        .push((command.waiter, StepResult::Error(error), 0));
                }
                gone.push(command);
            }
        }
        connection.attempts_failed += 1;
        let reconnect = connection.spec.reconnect;
        for command in &gone {
            self.command_gone(id, command);
        }
        match reconnect {
            Reconnect::Always => {}
            Reconnect::Never => return, // the link stays down for good
            Reconnect::Manager { .. } if gives_up => {
                self.connections[id.index()].manager_idle = true;
                return;
            }
            Reconnect::Manager { .. } if !attempt_failed => {
                // The first attempt goes at once, as tokio-retry's first try does.
                self.connections[id.index()].attempts_failed = 0;
                self.start_connect(now, id, events);
                return;
            }
            Reconnect::Manager { .. } => {
                let connection = &mut self.connections[id.index()];
                let spec = &connection.spec;
                let exponential = spec
                    .reconnect_delay
                    .checked_mul(1u64 << connection.attempts_failed.min(62))
                    .map_or(spec.reconnect_delay_max, |d| {
                        d.min(spec.reconnect_delay_max)
                    });
                let jitter = connection
                    .jitter
                    .as_mut()
                    .expect("a manager draws its delays")
                    .below(1 << 20);
                let nanos = (u128::from(exponential.as_nanos()) * u128::from(jitter)) >> 20;
                let delay = SimDuration::from_nanos(nanos as u64);
                events.schedule(
                    now.saturating_add(delay),
                    RedisEvent::ReconnectDue {
                        connection: id,
                        epoch: connection.epoch,
                    },
                );
                return;
            }
            Reconnect::Slot(_) => {
                // A slot's link never reconnects itself: the slot opens a new one.
                if attempt_failed {
                    self.link_events.push(LinkEvent::ConnectFailed(id));
                }
                self.close_if_drained(id);
                return;
            }
        }
        let connection = &mut self.connections[id.index()];
        let delay = connection
            .spec
            .reconnect_delay_for(connection.attempts_failed);
        events.schedule(
            now.saturating_add(delay),
            RedisEvent::ReconnectDue {
                connection: id,
                epoch: connection.epoch,
            },
        );
    }

    pub(super) fn on_reconnect_due(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        if self.connections[id.index()].epoch == epoch {
            self.start_connect(now, id, events);
        }
    }

    pub(super) fn start_connect(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        connection.link = Link::Connecting;
        connection.stats.connect_attempts += 1;
        let epoch = connection.epoch;
        events.schedule(
            now.saturating_add(connection.spec.latency),
            RedisEvent::ConnectArrives {
                connection: id,
                epoch,
            },
        );
        events.schedule(
            now.saturating_add(connection.spec.connect_timeout),
            RedisEvent::ConnectTimeout {
                connection: id,
                epoch,
            },
        );
    }

    pub(super) fn on_connect_answered(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        accepted: bool,
        events: &mut EventQueue,
    ) {
        let Some(connection) = self.connections[id.index()].of_epoch(epoch) else {
            return; // an event of a link since gone
        };
        // The server may have stopped while the acceptance was on its way.
        if !(accepted && connection.server_open) {
            connection.stats.connect_failures += 1;
            self.link_lost(now, id, true, events);
            return;
        }
        connection.epoch = connection.epoch.wrapping_add(1);
        connection.link = Link::Connected;
        connection.attempts_failed = 0;
        if is_slot(&connection.spec) {
            self.link_events.push(LinkEvent::Connected(id));
        }
        if connection.spec.subscription.is_some() && connection.stats.disconnects > 0 {
            self.resubscribed.push(id);
        }
        connection.sent = connection.commands.len();
        for index in 0..self.connections[id.index()].commands.len() {
            let connection = &self.connections[id.index()];
            let (seq, op) = (
                connection.commands[index].seq,
                connection.commands[index].op,
            );
            self.send(now, id, seq, op, events);
        }
    }

    pub(super) fn on_connect_timeout(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        if connection.epoch == epoch && connection.link == Link::Connecting {
            connection.stats.connect_failures += 1;
            self.link_lost(now, id, true, events);
        }
    }
}

#[cfg(test)]
mod tests {
    use outagelab_model::time::SimDuration;
    use outagelab_report::Outcome;

    use super::super::testing::{Harness, get};
    use crate::kernel::StepResult;
    use crate::scenario::{FaultKind, PauseMode};

    #[test]
    fn a_command_is_found_by_its_sequence_number_with_or_without_gaps_before_it() {
        use super::super::testing::set;
        use super::{Command, Connection, ConnectionId};
        use crate::kernel::RequestRef;
        use crate::scenario::{ConnectionSpec, ServerId};
        use outagelab_model::time::SimTime;

        let mut connection =
            Connection::new(ConnectionSpec::new("c", ServerId(0)), ConnectionId(0), 1);
        let command = |seq: u64| Command {
            seq,
            op: set(0, 10),
            waiter: RequestRef { slot: 0, token: 0 },
            deadline: SimTime::MAX,
            timed_out: false,
            retries: 0,
            executions: 0,
            origin: None,
        };
        // Rising by one from 5 (as issued), then the gaps a carry-over after a lost link
        // leaves: the place by distance from the front misses, and the search finds it.
        let seqs = [5, 6, 7, 9, 12, 13, 20];
        for seq in seqs {
            connection.commands.push_back(command(seq));
        }
        for (index, seq) in seqs.into_iter().enumerate() {
            assert_eq!(connection.command_index(seq), index, "seq {seq}");
        }
        // The front gone, as after its reply.
        connection.commands.pop_front();
        for (index, seq) in seqs.into_iter().enumerate().skip(1) {
            assert_eq!(connection.command_index(seq), index - 1, "seq {seq}");
        }
        let missing =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| connection.command_index(8)));
        assert!(missing.is_err(), "a command not held is a broken invariant");
    }

    const TIMEOUT: StepResult = StepResult::Error(Outcome::Timeout);
    const SHED: StepResult = StepResult::Error(Outcome::Shed);

    /// One connection whose commands time out after 50 ms, to a server paused from the start.
    fn paused_with_timeout() -> Harness {
        let mut redis = Harness::with(1, |scenario| {
            scenario.connections[0].command_timeout = Some(SimDuration::from_millis(50));
        });
        redis.fault_at(0, FaultKind::Pause(PauseMode::All), true);
        redis
    }

    #[test]
    fn the_oldest_command_times_out_first_and_each_at_its_own_deadline() {
        // Commands issued at 0, 10 and 20 ms to a paused server.
        let mut redis = paused_with_timeout();
        for slot in 0..3 {
            redis.issue_at(u64::from(slot) * 10_000, 0, get(slot), slot);
        }
        redis.run_until(65_000);
        assert_eq!(
            redis.finished(),
            vec![(0, 50_000, TIMEOUT), (1, 60_000, TIMEOUT)]
        );
        assert_eq!(redis.summary().timeouts, 2);
    }

    #[test]
    fn a_command_that_timed_out_is_still_executed_and_its_late_reply_is_dropped() {
        let mut redis = paused_with_timeout();
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(80_000, FaultKind::Pause(PauseMode::All), false);
        redis.issue_at(80_000, 0, get(1), 1);
        redis.run();
        // The first command runs when the pause ends (80 ms), but its caller gave up at 50.
        // The second, issued at 80 ms, runs from 80.1 to 80.105 ms and is answered at 80.205.
        assert_eq!(
            redis.finished(),
            vec![(0, 50_000, TIMEOUT), (1, 80_205, StepResult::Miss)]
        );
        let summary = redis.summary();
        assert_eq!((summary.executed, summary.replies), (2, 2));
        assert_eq!(redis.pending(), 0);
    }

    #[test]
    fn a_full_connection_sheds_new_commands_until_replies_free_it() {
        // At most 2 pending. The server is paused until 80 ms; timeouts at 50 ms.
        let mut redis = Harness::with(1, |scenario| {
            let spec = &mut scenario.connections[0];
            spec.command_timeout = Some(SimDuration::from_millis(50));
            spec.pending_max = std::num::NonZeroU32::new(2);
        });
        redis.fault_at(0, FaultKind::Pause(PauseMode::All), true);
        for slot in 0..3 {
            redis.issue_at(0, 0, get(slot), slot);
        }
        // Timed out, the first two are still held: the server will execute them.
        redis.issue_at(60_000, 0, get(3), 3);
        assert_eq!(redis.queued(), 2);
        redis.fault_at(80_000, FaultKind::Pause(PauseMode::All), false);
        // Their replies land at 80.105 and 80.11 ms; then there is room again.
        redis.issue_at(80_110, 0, get(4), 4);
        redis.run();
        assert_eq!(
            redis.finished(),
            vec![
                (2, 0, SHED),
                (0, 50_000, TIMEOUT),
                (1, 50_000, TIMEOUT),
                (3, 60_000, SHED),
                (4, 80_315, StepResult::Miss),
            ]
        );
        assert_eq!(redis.queued(), 0);
    }

    #[test]
    fn a_lost_link_carries_its_commands_over_and_resends_them_on_the_next() {
        // CLIENT KILL at 50 us, while the command is on its way: the close reaches the client
        // at 150 us; it reconnects after 50 ms (at 50.15 ms), the handshake takes 200 us, and
        // the command goes again: 100 us there, 5 us of work, 100 us back.
        let mut redis = Harness::new(1);
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(50, FaultKind::Kill, true);
        redis.run();
        assert_eq!(redis.finished(), vec![(0, 50_555, StepResult::Miss)]);
        let summary = redis.summary();
        assert_eq!((summary.disconnects, summary.connect_attempts), (1, 1));
    }

    #[test]
    fn without_an_offline_queue_a_lost_link_fails_its_commands_and_refuses_new_ones() {
        let mut redis = Harness::with(1, |scenario| {
            scenario.connections[0].offline_queue = false;
        });
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(50, FaultKind::Kill, true);
        redis.issue_at(1_000, 0, get(1), 1);
        redis.run();
        assert_eq!(
            redis.finished(),
            vec![
                (0, 150, StepResult::Error(Outcome::ConnectionLost)),
                (1, 1_000, StepResult::Error(Outcome::Refused)),
            ]
        );
    }

    #[test]
    fn a_small_command_waits_behind_another_connection_s_big_write_on_one_event_loop() {
        // A 1 MB/s loop: the 1 000 000-byte SET (plus 32 bytes of command) takes it 1 000 032
        // us to write; the GET on the other connection is written after it, 32 us later.
        let with_loop = |shared: bool| {
            let mut redis = Harness::with(2, |scenario| {
                if shared {
                    scenario.client_loops.push(crate::scenario::ClientLoopSpec {
                        name: "node".into(),
                        write_rate: crate::scenario::ByteRate::new(1_000_000).unwrap(),
                        writer: None,
                    });
                    for connection in &mut scenario.connections {
                        connection.client_loop = Some(crate::scenario::ClientLoopId(0));
                    }
                }
            });
            redis.issue_at(0, 0, super::super::testing::set(1, 1_000_000), 1);
            redis.issue_at(0, 1, get(2), 2);
            redis.run();
            redis
                .finished_us()
                .into_iter()
                .find(|(slot, _)| *slot == 2)
                .unwrap()
                .1
        };
        // Alone, the GET reaches the server at 100 us and is answered at 205 us (the server
        // runs the SET from 100 us too, 5 us each).
        assert!(with_loop(false) < 300, "{}", with_loop(false));
        // Behind the SET's write: out at 1 000 064 us, at the server 100 us later.
        let shared = with_loop(true);
        assert!((1_000_164..1_000_300).contains(&shared), "{shared}");
    }

    #[test]
    fn a_writer_s_turn_sends_a_burst_once_built_and_holds_a_later_command_behind_it() {
        // A loop that builds at 1 MB/s and whose writer copies at 2 MB/s, 1.5 MB at most in
        // its turn: two SETs of 1 000 032 bytes on connection 0 at 0, a GET on connection 1 at
        // 1 us. The SETs are built by 2 000 064 us and only then copied: the first leaves at
        // 2 500 080 us, the second at 3 000 096. The GET, issued while the loop was busy,
        // waits for the turn (750 000 us of it), is built by 2 750 096 us and copied in 16.
        let mut redis = Harness::with(2, |scenario| {
            let rate = |bytes| crate::scenario::ByteRate::new(bytes).unwrap();
            scenario.client_loops.push(crate::scenario::ClientLoopSpec {
                name: "tokio".into(),
                write_rate: rate(1_000_000),
                writer: Some(crate::scenario::WriterTurn {
                    copy_rate: rate(2_000_000),
                    copy_before_yield: 1_500_000,
                }),
            });
            for connection in &mut scenario.connections {
                connection.client_loop = Some(crate::scenario::ClientLoopId(0));
            }
        });
        redis.issue_at(0, 0, super::super::testing::set(1, 1_000_000), 1);
        redis.issue_at(0, 0, super::super::testing::set(2, 1_000_000), 2);
        redis.issue_at(1, 1, get(3), 3);
        redis.run();
        let finished: std::collections::BTreeMap<_, _> = redis.finished_us().into_iter().collect();
        // Each at the server 100 us after it leaves, answered within a few us, back in 100.
        let within = |slot: u32, left: u64| (left + 200..left + 300).contains(&finished[&slot]);
        assert!(within(1, 2_500_080), "{finished:?}");
        assert!(within(2, 3_000_096), "{finished:?}");
        assert!(within(3, 2_750_112), "{finished:?}");
    }

    #[test]
    fn a_late_timer_fires_its_lateness_after_the_deadline() {
        let mut redis = Harness::with(1, |scenario| {
            scenario.connections[0].command_timeout =
                Some(outagelab_model::time::SimDuration::from_millis(100));
            scenario.connections[0].timer_lateness =
                outagelab_model::time::SimDuration::from_millis(1);
        });
        redis.fault_at(0, FaultKind::Hang, true);
        redis.issue_at(0, 0, get(0), 0);
        redis.run_until(200_000);
        assert_eq!(redis.finished(), vec![(0, 101_000, TIMEOUT)]);
    }

    /// One connection managed as redis-rs' ConnectionManager does: 2 retries, delays of
    /// 10 ms · 2^n up to 1 s, full jitter.
    fn managed() -> Harness {
        Harness::with(1, |scenario| {
            let connection = &mut scenario.connections[0];
            connection.reconnect = crate::scenario::Reconnect::Manager { retries: 2 };
            connection.reconnect_delay = outagelab_model::time::SimDuration::from_millis(10);
            connection.reconnect_delay_max = outagelab_model::time::SimDuration::from_secs(1);
            connection.offline_queue = false;
        })
    }

    #[test]
    fn a_manager_fails_what_was_on_the_lost_link_and_reconnects_at_once() {
        let mut redis = managed();
        redis.fault_at(0, FaultKind::Pause(PauseMode::All), true);
        redis.issue_at(0, 0, get(0), 1); // held by the pause
        redis.fault_at(1_000, FaultKind::Kill, false); // no-op: kill's end
        redis.fault_at(1_000, FaultKind::Kill, true);
        redis.issue_at(1_050, 0, get(1), 2); // while the client has not heard of the close
        redis.fault_at(5_000, FaultKind::Pause(PauseMode::All), false);
        redis.run();
        let results: Vec<(u32, StepResult)> = redis
            .finished()
            .into_iter()
            .map(|(slot, _, result)| (slot, result))
            .collect();
        // Both were written to the killed link: both fail, neither is replayed; the client
        // reconnected at once (one attempt) and nothing else failed.
        assert_eq!(
            results,
            [
                (1, StepResult::Error(Outcome::ConnectionLost)),
                (2, StepResult::Error(Outcome::ConnectionLost)),
            ]
        );
        assert_eq!(redis.summary().connect_attempts, 1);
    }

    #[test]
    fn a_manager_makes_its_retries_then_refuses_what_waits_until_the_next_command() {
        let mut redis = managed();
        redis.fault_at(0, FaultKind::Stop, true);
        redis.run_until(10_000);
        // Attempts: at once, then after up to 20 ms and up to 40 ms: three, all refused.
        redis.issue_at(10_000, 0, get(0), 1); // waits for the reconnect
        redis.run_until(1_000_000);
        assert_eq!(redis.summary().connect_attempts, 3);
        assert_eq!(
            redis
                .finished()
                .last()
                .map(|&(slot, _, result)| (slot, result)),
            Some((1, StepResult::Error(Outcome::Refused)))
        );
        // The server is back; the next command starts a new reconnect and is served.
        redis.fault_at(2_000_000, FaultKind::Stop, false);
        redis.issue_at(2_000_000, 0, get(0), 2);
        redis.run();
        assert_eq!(
            redis
                .finished()
                .last()
                .map(|&(slot, _, result)| (slot, result)),
            Some((2, StepResult::Miss))
        );
        assert_eq!(redis.summary().connect_attempts, 4);
    }
}

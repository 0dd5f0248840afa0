//! A Redis server: one thread executing one command at a time, round-robin over connections.
//!
//! A command costs a fixed part plus a per-byte part (request and reply bytes). The server
//! serves its connections round-robin: a command on one connection waits for the command
//! being executed, not for another connection's backlog. Commands on one connection run in
//! the order they arrived.
//!
//! Events: `CommandArrives` (a command reaches the server's input for its connection),
//! `ServerDone` (the thread finished a command; its reply goes on the wire), and
//! `ConnectArrives` (a connection attempt reaches the server, which accepts, refuses or, hung,
//! says nothing).

use std::collections::VecDeque;

use outagelab_model::time::{SimDuration, SimTime};

use super::keyspace::{Keyspace, Op, Reply};
use super::{Redis, RedisEvent, is_write};
use crate::kernel::EventQueue;
use crate::rng::Stream;
use crate::scenario::{ByteRate, CommandScope, ConnectionId, ErrorReply, ServerId, ServerSpec};
use crate::slowdowns::Slowdowns;

/// The command the thread is executing (or, hung, has finished but not answered).
pub(super) struct Executing {
    pub(super) connection: ConnectionId,
    /// The connection's link when the command started: a reply to an older link is dropped.
    connection_epoch: u32,
    seq: u64,
    reply: Reply,
}

pub(super) struct Server {
    command_cost: SimDuration,
    byte_rate: Option<ByteRate>,
    pub(super) persistence: bool,
    /// Nesting depth of each fault kind in force (`paused_writes`: write-only pauses).
    pub(super) paused: u32,
    pub(super) paused_writes: u32,
    pub(super) hung: u32,
    pub(super) stopped: u32,
    /// Crashes in force: the address answers no connection attempt.
    pub(super) unreachable: u32,
    /// Bumped when the process stops, so the completion of an aborted command is dropped.
    pub(super) epoch: u32,
    pub(super) executing: Option<Executing>,
    /// A command that finished while the process was hung: its reply goes out when the hang
    /// ends (a frozen process sends nothing).
    pub(super) parked: Option<Executing>,
    /// Connections with a command waiting, in round-robin order. May hold connections whose
    /// input was since dropped; they are skipped. Bound: each connection at most once (see
    /// `Connection::scheduled`).
    pub(super) ready: VecDeque<ConnectionId>,
    /// Connections whose next command is a write held by a write-only pause; they go back in
    /// the ring when it ends. Bound: each connection at most once (it stays `scheduled`).
    pub(super) blocked: Vec<ConnectionId>,
    /// `cpu_throttle` faults in force: a command started while one lasts costs that many
    /// times its time on the thread.
    pub(super) slowdowns: Slowdowns,
    /// Error-reply faults in force, oldest first: the first that covers a command answers it.
    /// Bound: one per fault of the scenario.
    pub(super) error_replies: Vec<(ErrorReply, CommandScope)>,
    /// The period of the server's cron (`1 s / hz`); `None` has no cron rounding.
    pub(super) cron_period: Option<SimDuration>,
    pub(super) keyspace: Keyspace,
    /// Every connection (and slot link) made to this server.
    pub(super) connections: Vec<ConnectionId>,
    /// While it is a replica: its primary and lag. A replica answers clients' writes with
    /// `READONLY`; promoted, it is a primary.
    pub(super) replica_of: Option<crate::scenario::Replication>,
}

impl Server {
    /// A server running, idle, with its preloaded keys; `key_counts` is keys per family; its
    /// evictions draw from the stream of `seed` and its name.
    pub(super) fn new(spec: &ServerSpec, key_counts: Vec<u32>, seed: u64) -> Server {
        let rng = Stream::derive(seed, "server", &spec.name);
        let mut keyspace = Keyspace::new(key_counts, spec.memory, rng);
        spec.preload.iter().for_each(|&p| keyspace.preload(p));
        Server {
            command_cost: spec.command_cost,
            byte_rate: spec.byte_rate,
            persistence: spec.persistence,
            paused: 0,
            paused_writes: 0,
            hung: 0,
            stopped: 0,
            unreachable: 0,
            epoch: 0,
            executing: None,
            parked: None,
            ready: VecDeque::new(),
            blocked: Vec::new(),
            error_replies: Vec::new(),
            slowdowns: Slowdowns::default(),
            cron_period: spec
                .hz
                .map(|hz| SimDuration::from_nanos(1_000_000_000 / u64::from(hz.get()))),
            keyspace,
            connections: Vec::new(),
            replica_of: spec.replica_of,
        }
    }

    pub(super) fn accepts_work(&self) -> bool {
        self.paused == 0 && self.hung == 0 && self.stopped == 0
    }

    /// Runs a command: an error-reply fault in force that covers it answers it; otherwise the
    /// keyspace does (which may refuse it with OOM).
    fn execute(&mut self, now: SimTime, op: Op) -> Reply {
        let fault = self
            .error_replies
            .iter()
            .find(|(_, commands)| commands.covers(op.command));
        // A replica is read-only to its clients (`replica-read-only yes`).
        let fault = match (fault, self.replica_of) {
            (None, Some(_)) if is_write(op.command) => {
                Some(&(ErrorReply::ReadOnly, CommandScope::Writes))
            }
            (fault, _) => fault,
        };
        match fault {
            Some(&(error, _)) => {
                if error == ErrorReply::Oom {
                    self.keyspace.stats.oom_replies += 1;
                }
                Reply::Error(error)
            }
            None => self.keyspace.execute(now, op),
        }
    }

    /// Time the thread spends on a command that moves `bytes` (request and reply), times the
    /// slowest `cpu_throttle` in force (rounded down to the nanosecond).
    fn cost(&self, bytes: u64) -> SimDuration {
        let cost = self.command_cost.saturating_add(
            self.byte_rate
                .map_or(SimDuration::ZERO, |rate| rate.time_for(bytes)),
        );
        if self.slowdowns.at_full_speed() {
            return cost;
        }
        let slowed = u128::from(cost.as_nanos()) * u128::from(self.slowdowns.permille()) / 1000;
        SimDuration::from_nanos(u64::try_from(slowed).unwrap_or(u64::MAX))
    }
}

impl Redis {
    pub(super) fn on_command_arrives(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        let Some(connection) = self.connections[id.index()].of_epoch(epoch) else {
            return; // an event of a link since gone
        };
        let seq = connection.outbound.receive();
        if !connection.server_open {
            return; // the server is gone; the client will find out and resend
        }
        let server = connection.server;
        let thread = &self.servers[server.index()];
        // A connection's first command goes the way through, which gives its input the room
        // it keeps (the memory estimate counts a queue's spare room, and a budget reads it).
        if !connection.scheduled
            && connection.input.capacity() != 0
            && thread.executing.is_none()
            && thread.accepts_work()
            && thread.paused_writes == 0
            && thread.ready.is_empty()
        {
            // The server is idle and no other connection waits: the command runs now, as it
            // would from the front of the ring and of its connection's input, without going
            // through them (the connection is in the ring's place until its reply is sent).
            debug_assert!(
                connection.input.is_empty(),
                "an unscheduled connection's input"
            );
            connection.scheduled = true;
            let index = connection.command_index(seq);
            self.execute_command(now, server, id, seq, index, events);
            return;
        }
        connection.input.push_back(seq);
        if !connection.scheduled {
            connection.scheduled = true;
            self.servers[server.index()].ready.push_back(id);
        }
        self.try_execute(now, server, events);
    }

    /// Starts the next command, round-robin across connections, if the thread is free. A
    /// connection with more commands goes back to the end of the ring when this one is done,
    /// so a command arriving on another connection waits only for the command being executed.
    pub(super) fn try_execute(&mut self, now: SimTime, id: ServerId, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        if server.executing.is_some() || !server.accepts_work() {
            return;
        }
        while let Some(connection_id) = server.ready.pop_front() {
            let connection = &mut self.connections[connection_id.index()];
            let Some(&seq) = connection.input.front() else {
                connection.scheduled = false;
                continue; // its input was dropped with its link
            };
            let index = connection.command_index(seq);
            let op = connection.commands[index].op;
            if server.paused_writes > 0 && is_write(op.command) {
                // Held, with the commands behind it on its connection, until the pause ends.
                server.blocked.push(connection_id);
                continue;
            }
            connection.input.pop_front();
            self.execute_command(now, id, connection_id, seq, index, events);
            return;
        }
    }

    /// The idle server `id` executes the command `seq` of `connection_id`, at `index` in its
    /// commands (taken from the connection's input, or just arrived at an idle server with
    /// no other connection waiting): its reply is ready when the command's cost has passed
    /// (`ServerDone`).
    #[inline(always)]
    fn execute_command(
        &mut self,
        now: SimTime,
        id: ServerId,
        connection_id: ConnectionId,
        seq: u64,
        index: usize,
        events: &mut EventQueue,
    ) {
        let server = &mut self.servers[id.index()];
        let connection = &mut self.connections[connection_id.index()];
        let command = &mut connection.commands[index];
        let op = command.op;
        let reply = server.execute(now, op);
        command.executions += 1;
        if let Some(entry) = command.origin.and_then(|o| self.origins.get_mut(&o))
            && entry.executed()
        {
            self.applied_twice.push(connection_id);
        }
        let cost = server.cost(op.request_bytes() + reply.bytes());
        server.executing = Some(Executing {
            connection: connection_id,
            connection_epoch: connection.epoch,
            seq,
            reply,
        });
        connection.stats.executed += 1;
        events.schedule(
            now.saturating_add(cost),
            RedisEvent::ServerDone {
                server: id,
                epoch: server.epoch,
            },
        );
        self.after_execute(now, id, connection_id, op, reply, events);
    }

    pub(super) fn on_server_done(
        &mut self,
        now: SimTime,
        id: ServerId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        let server = &mut self.servers[id.index()];
        if server.epoch != epoch {
            return;
        }
        let done = server
            .executing
            .take()
            .expect("a completion per started command");
        if server.hung > 0 {
            server.parked = Some(done);
            return;
        }
        self.send_reply(now, id, done, events);
        self.try_execute(now, id, events);
    }

    /// The server thread is done with a command: its reply goes on the wire, and its
    /// connection goes back in the ring if it has more.
    pub(super) fn send_reply(
        &mut self,
        now: SimTime,
        id: ServerId,
        done: Executing,
        events: &mut EventQueue,
    ) {
        let server = &mut self.servers[id.index()];
        let connection = &mut self.connections[done.connection.index()];
        if connection.input.is_empty() {
            connection.scheduled = false;
        } else {
            server.ready.push_back(done.connection);
        }
        if connection.epoch == done.connection_epoch && connection.server_open {
            let reply = (done.seq, done.reply);
            let arrives = connection.inbound.send(now, reply, done.reply.bytes());
            events.schedule(
                arrives,
                RedisEvent::ReplyArrives {
                    connection: done.connection,
                    epoch: connection.epoch,
                },
            );
        }
    }

    /// A connection attempt reaches the server: a stopped one refuses it, a hung one says
    /// nothing (the client's connect timeout decides), a running one accepts it.
    pub(super) fn on_connect_arrives(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        let Some(connection) = self.connections[id.index()].of_epoch(epoch) else {
            return; // an event of a link since gone
        };
        // A connection that follows failovers connects to whichever server now holds its
        // address's role; it moves to that server's list of connections.
        let target = if connection.spec.follows_failover {
            self.route[connection.spec.server.index()]
        } else {
            connection.spec.server
        };
        if target != connection.server {
            let previous = connection.server;
            connection.server = target;
            self.servers[previous.index()]
                .connections
                .retain(|&c| c != id);
            self.servers[target.index()].connections.push(id);
        }
        let connection = &mut self.connections[id.index()];
        let server = &self.servers[target.index()];
        let cut = self
            .cut
            .get(connection.owner.index())
            .is_some_and(|&n| n > 0);
        // A dead host answers nothing; a stopped process, or a cut link, refuses at once; a
        // frozen process accepts nothing and says nothing.
        let accepted = if server.unreachable > 0 {
            return; // no answer: the connect timeout decides
        } else if server.stopped > 0 || cut {
            false
        } else if server.hung > 0 {
            return;
        } else {
            connection.server_open = true;
            true
        };
        events.schedule(
            now.saturating_add(connection.spec.latency),
            RedisEvent::ConnectAnswered {
                connection: id,
                epoch,
                accepted,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Harness, get, set, set_with_ttl};
    use crate::scenario::ByteRate;

    #[test]
    fn one_connection_is_served_in_arrival_order_one_command_at_a_time() {
        // 100 us each way, 5 us per command: three commands issued at 0 reach the server at
        // 100 us and end at 105, 110, 115 us; each reply takes 100 us back.
        let mut redis = Harness::new(1);
        for slot in 0..3 {
            redis.issue_at(0, 0, get(slot), slot);
        }
        redis.run();
        assert_eq!(redis.finished_us(), vec![(0, 205), (1, 210), (2, 215)]);
    }

    #[test]
    fn connections_take_turns_so_a_backlog_does_not_block_another_connection() {
        // Connection 0 sends three commands, connection 1 one, all at 0. Round-robin runs
        // c0, c1, c0, c0: connection 1's command ends second, not fourth.
        let mut redis = Harness::new(2);
        for slot in 0..3 {
            redis.issue_at(0, 0, get(slot), slot);
        }
        redis.issue_at(0, 1, get(3), 3);
        redis.run();
        assert_eq!(
            redis.finished_us(),
            vec![(0, 205), (3, 210), (1, 215), (2, 220)]
        );
    }

    #[test]
    fn a_large_value_costs_its_bytes_on_the_server_thread_and_the_next_command_waits() {
        // A server at 1 byte per microsecond: a SET of 999 960 bytes moves 1 000 000 bytes
        // (32 of command, 8 of reply), so it runs from 100 us to 100 + 5 + 1 000 000 us. The
        // GET of another key behind it (40 bytes) runs next, for 5 + 40 us.
        let mut redis = Harness::with(1, |scenario| {
            scenario.servers[0].byte_rate = ByteRate::new(1_000_000);
        });
        redis.issue_at(0, 0, set(0, 999_960), 0);
        redis.issue_at(0, 0, get(1), 1);
        redis.run();
        assert_eq!(
            redis.finished_us(),
            vec![(0, 1_000_105 + 100), (1, 1_000_150 + 100)]
        );
    }

    #[test]
    fn a_key_expires_through_its_own_event_and_reading_memory_changes_nothing() {
        // A SET with a 1 ms TTL reaches the server at 100 us, so the key expires at 1 100 us.
        // Nothing else happens after its reply (205 us): only the expiry's own event can
        // remove it.
        let mut redis = Harness::new(1);
        redis.issue_at(0, 0, set_with_ttl(0, 1_000, 1), 0);
        redis.run_until(1_099);
        let before = redis.server();
        assert!(before.used_memory > 0, "{before:?}");
        assert_eq!(before.expired_keys, 0);
        // Reading again, even past the expiry instant, changes nothing.
        let again = redis.server();
        assert_eq!(
            (again.used_memory, again.expired_keys),
            (before.used_memory, before.expired_keys)
        );
        redis.run_until(1_100);
        let after = redis.server();
        assert_eq!(after.expired_keys, 1, "expired at its instant");
        assert_eq!(after.used_memory, 0);
    }

    #[test]
    fn a_command_run_at_once_by_an_idle_server_leaves_the_memory_the_ring_would() {
        // Apart, two GETs each find the server idle (the second, at 1 ms, runs at once);
        // sent together, the second waits in the connection's input. Once all are answered
        // the estimate is the same: the input keeps the room a command passing through it
        // leaves (a budget reads it).
        let mut apart = Harness::new(1);
        apart.issue_at(0, 0, get(0), 0);
        apart.issue_at(1_000, 0, get(0), 1);
        apart.run();
        let mut together = Harness::new(1);
        together.issue_at(0, 0, get(0), 0);
        together.issue_at(0, 0, get(0), 1);
        together.run();
        assert_eq!(apart.finished().len(), 2);
        assert_eq!(together.finished().len(), 2);
        assert_eq!(apart.memory_bytes(), together.memory_bytes());
    }

    #[test]
    fn keys_set_one_after_another_expire_each_at_its_own_instant() {
        // Three SETs reach the server at 100, 1 100 and 2 100 us; the first has a 5 ms TTL,
        // the second a 1 ms one (it expires first, at 2 100 us, before the first's 5 100),
        // the third a 4 ms one (6 100). After each expiry's event, the next soonest needs an
        // event of its own: the one already pending is gone.
        let mut redis = Harness::new(3);
        redis.issue_at(0, 0, set_with_ttl(0, 1_000, 5), 0);
        redis.issue_at(1_000, 0, set_with_ttl(1, 1_000, 1), 1);
        redis.issue_at(2_000, 0, set_with_ttl(2, 1_000, 4), 2);
        for (until, expired) in [(2_099, 0), (2_100, 1), (5_099, 1), (5_100, 2), (6_100, 3)] {
            redis.run_until(until);
            assert_eq!(redis.server().expired_keys, expired, "at {until} us");
        }
        assert_eq!(redis.server().used_memory, 0);
    }
}

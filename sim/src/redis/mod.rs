//! Redis servers and the client connections to them.
//!
//! A **connection** is multiplexed, as in ioredis and redis-rs: the client writes commands in
//! FIFO order into an outbound pipe with a bandwidth and a one-way latency; the server reads
//! them in that order; replies come back through an inbound pipe, in order. A small command
//! written behind large ones waits for their bytes: head-of-line blocking.
//!
//! A **server** has one thread. It executes one command at a time, costing a fixed part plus a
//! per-byte part, and serves its connections round-robin: a command on one connection waits
//! for the command being executed, not for another connection's backlog.
//!
//! The client side of a connection keeps every command it has not had a reply for, in order:
//! the first `sent` were written to the current link, the rest wait offline. A command whose
//! client-side timeout fires stays there: a real server still executes a command whose caller
//! gave up. Every change of link (lost, attempt failed, connected) bumps the connection's
//! `epoch`, and events of an older epoch are dropped.
//!
//! A **reconnect slot** (`reconnect = "slot"`) is one logical connection made of physical
//! links that never reconnect by themselves: the engine's slot layer (`reconnect_slots.rs`) opens a
//! link per connection attempt ([`Redis::open_link`]), hears how the attempt ended through
//! `link_events`, and retires a link its slot evicted ([`Redis::retire_link`]); a retired link
//! drains the commands already on it and is then closed and kept for reuse. The logical
//! connection's own entry is its first link (connected at the start, or made by its first
//! attempt). Summaries add up every link of a connection.
//!
//! Writes applied twice: each command counts the times the server executed it. A write
//! executed more than once (resent after a lost link, as ioredis' offline queue does) is
//! counted in `writes_applied_twice` when it leaves the client; a write a slot replays on a
//! fresh link is a second command, tied to the first by an *origin* whose executions are
//! added up until both copies are gone.

use std::collections::{BTreeMap, VecDeque};

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{ConnectionSummary, Outcome};

use crate::kernel::{Event, EventQueue, RequestRef, StepResult};
use crate::scenario::{
    ByteRate, ConnectionId, ConnectionSpec, Preload, Reconnect, RedisCommand, Scenario, ServerId,
};

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
        COMMAND_OVERHEAD_BYTES
            + match self.command {
                RedisCommand::Set { value_bytes, .. }
                | RedisCommand::SetNxPx { value_bytes, .. } => u64::from(value_bytes),
                RedisCommand::Get | RedisCommand::Incr | RedisCommand::Del => 0,
            }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reply {
    Ok,
    Hit {
        value_bytes: u32,
    },
    Miss,
    /// `SET NX` found the key taken.
    NotSet,
}

impl Reply {
    fn bytes(self) -> u64 {
        REPLY_OVERHEAD_BYTES
            + match self {
                Reply::Hit { value_bytes } => u64::from(value_bytes),
                Reply::Ok | Reply::Miss | Reply::NotSet => 0,
            }
    }

    fn result(self) -> StepResult {
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
struct Keyspace {
    families: Vec<Vec<Entry>>,
    counts: Vec<u32>,
}

impl Keyspace {
    fn new(counts: Vec<u32>) -> Self {
        Keyspace {
            families: counts.iter().map(|_| Vec::new()).collect(),
            counts,
        }
    }

    fn clear(&mut self) {
        for family in &mut self.families {
            *family = Vec::new();
        }
    }

    /// Stores the first `count` keys of a family, without expiry.
    fn preload(&mut self, preload: Preload) {
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

    fn apply(&mut self, now: SimTime, op: Op) -> Reply {
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
        }
    }
}

struct Executing {
    connection: ConnectionId,
    connection_epoch: u32,
    seq: u64,
    reply: Reply,
}

struct Server {
    command_cost: SimDuration,
    byte_rate: Option<ByteRate>,
    persistence: bool,
    /// Nesting depth of each fault kind in force.
    paused: u32,
    hung: u32,
    stopped: u32,
    /// Bumped when the process stops, so the completion of an aborted command is dropped.
    epoch: u32,
    executing: Option<Executing>,
    /// A command that finished while the process was hung: its reply goes out when the hang
    /// ends (a frozen process sends nothing).
    parked: Option<Executing>,
    /// Connections with a command waiting, in round-robin order. May hold connections whose
    /// input was since dropped; they are skipped.
    ready: VecDeque<ConnectionId>,
    keyspace: Keyspace,
    connections: Vec<ConnectionId>,
}

impl Server {
    fn accepts_work(&self) -> bool {
        self.paused == 0 && self.hung == 0 && self.stopped == 0
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Link {
    Connected,
    Connecting,
    /// Waiting for the reconnect delay to pass.
    Down,
}

/// One direction of a connection: items leave one after another at the pipe's bandwidth and
/// arrive one latency later, so arrival times never decrease and items arrive in order.
struct Pipe<T> {
    /// When the pipe finishes sending what it holds.
    free_at: SimTime,
    /// Items on the wire, oldest first.
    in_flight: VecDeque<T>,
}

impl<T> Pipe<T> {
    fn new() -> Self {
        Pipe {
            free_at: SimTime::ZERO,
            in_flight: VecDeque::new(),
        }
    }

    /// Puts `item` of `bytes` on the wire now; returns when it arrives.
    fn send(&mut self, now: SimTime, item: T, bytes: u64, spec: &ConnectionSpec) -> SimTime {
        let wire_time = spec
            .bandwidth
            .map_or(SimDuration::ZERO, |rate| rate.time_for(bytes));
        self.free_at = self.free_at.max(now).saturating_add(wire_time);
        self.in_flight.push_back(item);
        self.free_at.saturating_add(spec.latency)
    }

    /// The oldest item, which has just arrived.
    fn receive(&mut self) -> T {
        self.in_flight
            .pop_front()
            .expect("one arrival event per item on the wire")
    }

    /// When something sent now (after everything already on the wire) would arrive, if it
    /// takes no time to send, such as a FIN.
    fn arrival_after_queue(&self, now: SimTime, spec: &ConnectionSpec) -> SimTime {
        self.free_at.max(now).saturating_add(spec.latency)
    }

    /// Drops everything on the wire: the link it was on is gone, and a new link starts idle.
    fn reset(&mut self) {
        self.in_flight.clear();
        self.free_at = SimTime::ZERO;
    }
}

struct Command {
    seq: u64,
    op: Op,
    waiter: RequestRef,
    /// When the client-side timeout fires (`SimTime::MAX` without one). Every command on a
    /// connection has the same timeout, so deadlines grow with `seq`.
    deadline: SimTime,
    timed_out: bool,
    /// Links this command has outlived (lost connections and failed attempts).
    retries: u32,
    /// Times the server executed it (more than once after a resend).
    executions: u32,
    /// The write this command is a copy of, when a slot may replay it (see the module doc).
    origin: Option<u64>,
}

struct Connection {
    spec: ConnectionSpec,
    /// The logical connection this is a link of (itself, but for a slot's later links).
    owner: ConnectionId,
    /// A slot evicted this link: it takes no new command and closes once drained.
    retired: bool,
    link: Link,
    epoch: u32,
    /// Commands with `seq` below this have timed out or ended; the next timeout to fire is
    /// that of the first command at or after it.
    timeout_cursor: u64,
    /// Whether a `CommandTimeout` event is scheduled. There is at most one per connection, so
    /// the event queue holds no timer for commands that were answered in time.
    timeout_armed: bool,
    /// Commands without a reply, in issue order: `commands[..sent]` were written to the
    /// current link, the rest wait offline. Never holds a command twice.
    commands: VecDeque<Command>,
    sent: usize,
    next_seq: u64,
    /// Consecutive failed connection attempts (1 right after losing a working link).
    attempts_failed: u32,
    /// Commands on the wire to the server.
    outbound: Pipe<(u64, Op)>,
    /// Whether the server holds this connection open.
    server_open: bool,
    /// Commands that reached the server and wait for its thread.
    input: VecDeque<(u64, Op)>,
    /// Whether the server has this connection in its ready ring or is executing its command;
    /// a connection is put back in the ring only when its command is done.
    scheduled: bool,
    /// Replies on the wire to the client.
    inbound: Pipe<(u64, Reply)>,
    stats: ConnectionSummary,
}

impl Connection {
    /// The link is gone: its wires and the server's unread input are dropped, the server no
    /// longer holds it open, and events of the old link become stale. Commands stay for the
    /// caller to carry over or fail.
    fn drop_link(&mut self) {
        self.epoch = self.epoch.wrapping_add(1);
        self.link = Link::Down;
        self.outbound.reset();
        self.inbound.reset();
        self.input.clear();
        self.server_open = false;
        self.sent = 0;
    }

    /// A link of `owner`, down, with nothing on it.
    fn new(spec: ConnectionSpec, owner: ConnectionId) -> Connection {
        Connection {
            spec,
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
            outbound: Pipe::new(),
            server_open: false,
            input: VecDeque::new(),
            scheduled: false,
            inbound: Pipe::new(),
            stats: ConnectionSummary::default(),
        }
    }
}

/// How a slot link's connection attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkEvent {
    Connected(ConnectionId),
    ConnectFailed(ConnectionId),
}

/// The copies of one write a slot may replay: how many are still on some link, how often the
/// server executed any of them, and whether its request may still send another.
struct Origin {
    owner: ConnectionId,
    copies: u32,
    executions: u32,
    open: bool,
}

/// All servers and connections of a run.
pub(crate) struct Redis {
    servers: Vec<Server>,
    /// The scenario's connections first (index = `ConnectionId`), then the later links of
    /// reconnect slots.
    connections: Vec<Connection>,
    /// Closed slot links, per owner, ready to be reused by the next attempt.
    free_links: Vec<Vec<ConnectionId>>,
    /// Per connection (over all its links): commands waiting now, and the most at once.
    pending: Vec<(u64, u64)>,
    origins: BTreeMap<u64, Origin>,
    next_origin: u64,
    /// Results for waiting requests, produced by the last call; the engine drains it.
    pub completions: Vec<(RequestRef, StepResult)>,
    /// Ends of slot links' connection attempts, produced by the last call; the engine drains it.
    pub link_events: Vec<LinkEvent>,
}

fn is_slot(spec: &ConnectionSpec) -> bool {
    matches!(spec.reconnect, Reconnect::Slot(_))
}

fn is_write(command: RedisCommand) -> bool {
    !command.is_read_only()
}

impl Redis {
    pub fn new(scenario: &Scenario, events: &mut EventQueue) -> Redis {
        let key_counts: Vec<u32> = scenario.keys.iter().map(|family| family.count).collect();
        let mut servers: Vec<Server> = scenario
            .servers
            .iter()
            .map(|spec| Server {
                command_cost: spec.command_cost,
                byte_rate: spec.byte_rate,
                persistence: spec.persistence,
                paused: 0,
                hung: 0,
                stopped: 0,
                epoch: 0,
                executing: None,
                parked: None,
                ready: VecDeque::new(),
                keyspace: {
                    let mut keyspace = Keyspace::new(key_counts.clone());
                    spec.preload.iter().for_each(|&p| keyspace.preload(p));
                    keyspace
                },
                connections: Vec::new(),
            })
            .collect();
        let mut redis = Redis {
            servers: Vec::new(),
            connections: Vec::new(),
            free_links: vec![Vec::new(); scenario.connections.len()],
            pending: vec![(0, 0); scenario.connections.len()],
            origins: BTreeMap::new(),
            next_origin: 0,
            completions: Vec::new(),
            link_events: Vec::new(),
        };
        for (index, spec) in scenario.connections.iter().enumerate() {
            let id = ConnectionId(index as u32);
            servers[spec.server.index()].connections.push(id);
            redis.connections.push(Connection::new(spec.clone(), id));
        }
        redis.servers = servers;
        for index in 0..redis.connections.len() {
            let id = ConnectionId(index as u32);
            let connection = &mut redis.connections[index];
            if connection.spec.connected_at_start {
                connection.link = Link::Connected;
                connection.server_open = true;
            } else if is_slot(&connection.spec) {
                // A slot that starts unconnected connects on its first caller, on this entry.
                redis.free_links[index].push(id);
            } else {
                redis.start_connect(SimTime::ZERO, id, events);
            }
        }
        redis
    }

    /// The links of logical connection `owner`: itself, then a slot's later links.
    fn links_of(&self, owner: ConnectionId) -> impl Iterator<Item = &Connection> {
        std::iter::once(&self.connections[owner.index()]).chain(
            self.connections[self.free_links.len()..]
                .iter()
                .filter(move |link| link.owner == owner),
        )
    }

    /// Commands waiting on a connection (sent or offline), over all its links.
    pub fn pending(&self, connection: ConnectionId) -> u64 {
        self.pending[connection.index()].0
    }

    /// A connection's counters, added up over all its links.
    pub fn connection_summary(&self, connection: ConnectionId) -> ConnectionSummary {
        let mut total = ConnectionSummary::default();
        for link in self.links_of(connection) {
            let stats = &link.stats;
            total.commands += stats.commands;
            total.executed += stats.executed;
            total.replies += stats.replies;
            total.timeouts += stats.timeouts;
            total.disconnects += stats.disconnects;
            total.connect_attempts += stats.connect_attempts;
            total.connect_failures += stats.connect_failures;
            total.writes_applied_twice += stats.writes_applied_twice;
        }
        total.peak_pending = self.pending[connection.index()].1;
        total
    }

    /// The logical connection `link` belongs to.
    pub fn owner_of(&self, link: ConnectionId) -> ConnectionId {
        self.connections[link.index()].owner
    }

    /// Starts a connection attempt on a new link of slot `owner`; its end comes as a
    /// [`LinkEvent`].
    pub fn open_link(
        &mut self,
        now: SimTime,
        owner: ConnectionId,
        events: &mut EventQueue,
    ) -> ConnectionId {
        let id = match self.free_links[owner.index()].pop() {
            Some(id) => id,
            None => {
                let id = ConnectionId(
                    u32::try_from(self.connections.len()).expect("fewer than 2^32 links"),
                );
                let first = &self.connections[owner.index()];
                let link = Connection::new(first.spec.clone(), owner);
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
        self.connections[link.index()].retired = true;
        self.close_if_drained(link);
    }

    /// Closes a retired link with no command left and keeps it for reuse.
    fn close_if_drained(&mut self, id: ConnectionId) {
        let connection = &mut self.connections[id.index()];
        if !(connection.retired && connection.commands.is_empty()) {
            return;
        }
        connection.retired = false;
        connection.drop_link();
        self.free_links[connection.owner.index()].push(id);
    }

    /// A new write that a slot may replay: its copies are tied together under the id returned.
    /// Close it with [`Redis::close_origin`] when its request can send no further copy.
    pub fn open_origin(&mut self, owner: ConnectionId) -> u64 {
        let id = self.next_origin;
        self.next_origin += 1;
        self.origins.insert(
            id,
            Origin {
                owner,
                copies: 0,
                executions: 0,
                open: true,
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

    /// A command leaves its link (answered, or failed with the link): a write the server
    /// applied more than once is counted now, or when its last copy goes.
    fn command_gone(&mut self, id: ConnectionId, command: &Command) {
        let owner = self.connections[id.index()].owner;
        self.pending[owner.index()].0 -= 1;
        match command.origin {
            Some(origin) => {
                if let Some(entry) = self.origins.get_mut(&origin) {
                    entry.copies -= 1;
                }
                self.settle_origin(origin);
            }
            None => {
                if command.executions > 1 && is_write(command.op.command) {
                    self.connections[id.index()].stats.writes_applied_twice += 1;
                }
            }
        }
    }

    /// A request issues a command. Returns the result at once when the connection cannot take
    /// it (down, with the offline queue off); otherwise the result comes later through
    /// `completions`.
    pub fn issue(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        op: Op,
        waiter: RequestRef,
        origin: Option<u64>,
        events: &mut EventQueue,
    ) -> Option<StepResult> {
        let connection = &mut self.connections[id.index()];
        if connection.link != Link::Connected && !connection.spec.offline_queue {
            // A slot's link that was lost: writing to it fails like a broken pipe.
            let error = if is_slot(&connection.spec) {
                Outcome::ConnectionLost
            } else {
                Outcome::Refused
            };
            return Some(StepResult::Error(error));
        }
        if let Some(entry) = origin.and_then(|origin| self.origins.get_mut(&origin)) {
            entry.copies += 1;
        }
        let connection = &mut self.connections[id.index()];
        let seq = connection.next_seq;
        connection.next_seq += 1;
        let deadline = connection
            .spec
            .command_timeout
            .map_or(SimTime::MAX, |timeout| now.saturating_add(timeout));
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
        let connection = &mut self.connections[id.index()];
        if deadline != SimTime::MAX && !connection.timeout_armed {
            connection.timeout_armed = true;
            events.schedule(deadline, Event::CommandTimeout { connection: id });
        }
        if connection.link == Link::Connected {
            connection.sent += 1;
            Self::transmit(now, id, connection, seq, op, events);
        }
        None
    }

    fn transmit(
        now: SimTime,
        id: ConnectionId,
        connection: &mut Connection,
        seq: u64,
        op: Op,
        events: &mut EventQueue,
    ) {
        let arrives =
            connection
                .outbound
                .send(now, (seq, op), op.request_bytes(), &connection.spec);
        events.schedule(
            arrives,
            Event::CommandArrives {
                connection: id,
                epoch: connection.epoch,
            },
        );
    }

    pub fn on_command_arrives(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        if connection.epoch != epoch {
            return;
        }
        let wire = connection.outbound.receive();
        if !connection.server_open {
            return; // the server is gone; the client will find out and resend
        }
        connection.input.push_back(wire);
        let server = connection.spec.server;
        if !connection.scheduled {
            connection.scheduled = true;
            self.servers[server.index()].ready.push_back(id);
        }
        self.try_execute(now, server, events);
    }

    /// Starts the next command, round-robin across connections, if the thread is free. A
    /// connection with more commands goes back to the end of the ring when this one is done,
    /// so a command arriving on another connection waits only for the command being executed.
    fn try_execute(&mut self, now: SimTime, id: ServerId, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        if server.executing.is_some() || !server.accepts_work() {
            return;
        }
        while let Some(connection_id) = server.ready.pop_front() {
            let connection = &mut self.connections[connection_id.index()];
            let Some((seq, op)) = connection.input.pop_front() else {
                connection.scheduled = false;
                continue; // its input was dropped with its link
            };
            let reply = server.keyspace.apply(now, op);
            let index = connection.commands.partition_point(|c| c.seq < seq);
            if let Some(command) = connection.commands.get_mut(index)
                && command.seq == seq
            {
                command.executions += 1;
                if let Some(entry) = command.origin.and_then(|o| self.origins.get_mut(&o)) {
                    entry.executions += 1;
                }
            }
            let bytes = op.request_bytes() + reply.bytes();
            let cost = server.command_cost.saturating_add(
                server
                    .byte_rate
                    .map_or(SimDuration::ZERO, |r| r.time_for(bytes)),
            );
            server.executing = Some(Executing {
                connection: connection_id,
                connection_epoch: connection.epoch,
                seq,
                reply,
            });
            connection.stats.executed += 1;
            events.schedule(
                now.saturating_add(cost),
                Event::ServerDone {
                    server: id,
                    epoch: server.epoch,
                },
            );
            return;
        }
    }

    pub fn on_server_done(
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
    fn send_reply(&mut self, now: SimTime, id: ServerId, done: Executing, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        let connection = &mut self.connections[done.connection.index()];
        if connection.input.is_empty() {
            connection.scheduled = false;
        } else {
            server.ready.push_back(done.connection);
        }
        if connection.epoch == done.connection_epoch && connection.server_open {
            let reply = (done.seq, done.reply);
            let arrives = connection
                .inbound
                .send(now, reply, done.reply.bytes(), &connection.spec);
            events.schedule(
                arrives,
                Event::ReplyArrives {
                    connection: done.connection,
                    epoch: connection.epoch,
                },
            );
        }
    }

    pub fn on_reply_arrives(&mut self, id: ConnectionId, epoch: u32) {
        let connection = &mut self.connections[id.index()];
        if connection.epoch != epoch {
            return;
        }
        let (seq, reply) = connection.inbound.receive();
        let command = connection
            .commands
            .pop_front()
            .expect("a reply answers a sent command");
        assert_eq!(command.seq, seq, "replies come back in order");
        connection.sent -= 1;
        connection.stats.replies += 1;
        if !command.timed_out {
            self.completions.push((command.waiter, reply.result()));
        }
        self.command_gone(id, &command);
        self.close_if_drained(id);
    }

    /// Times out every command whose deadline has passed, then arms the timer for the next.
    pub fn on_command_timeout(&mut self, now: SimTime, id: ConnectionId, events: &mut EventQueue) {
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
                    events.schedule(command.deadline, Event::CommandTimeout { connection: id });
                }
                return;
            }
            connection.timeout_cursor = command.seq + 1;
            command.timed_out = true;
            connection.stats.timeouts += 1;
            self.completions
                .push((command.waiter, StepResult::Error(Outcome::Timeout)));
        }
    }

    pub fn on_connection_closed(
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
        connection.drop_link();
        let (offline_queue, max_retries) =
            (connection.spec.offline_queue, connection.spec.max_retries);
        let mut gone = Vec::new();
        let commands = std::mem::take(&mut connection.commands);
        for mut command in commands {
            command.retries = command.retries.saturating_add(1);
            let keep = offline_queue && max_retries.is_none_or(|max| command.retries <= max);
            if keep {
                connection.commands.push_back(command);
            } else {
                if !command.timed_out {
                    self.completions
                        .push((command.waiter, StepResult::Error(Outcome::ConnectionLost)));
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
            Event::ReconnectDue {
                connection: id,
                epoch: connection.epoch,
            },
        );
    }

    pub fn on_reconnect_due(
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

    fn start_connect(&mut self, now: SimTime, id: ConnectionId, events: &mut EventQueue) {
        let connection = &mut self.connections[id.index()];
        connection.link = Link::Connecting;
        connection.stats.connect_attempts += 1;
        let epoch = connection.epoch;
        events.schedule(
            now.saturating_add(connection.spec.latency),
            Event::ConnectArrives {
                connection: id,
                epoch,
            },
        );
        events.schedule(
            now.saturating_add(connection.spec.connect_timeout),
            Event::ConnectTimeout {
                connection: id,
                epoch,
            },
        );
    }

    pub fn on_connect_arrives(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        if connection.epoch != epoch {
            return;
        }
        let server = &self.servers[connection.spec.server.index()];
        let accepted = if server.stopped > 0 {
            false
        } else if server.hung > 0 {
            return; // no answer: the connect timeout decides
        } else {
            connection.server_open = true;
            true
        };
        events.schedule(
            now.saturating_add(connection.spec.latency),
            Event::ConnectAnswered {
                connection: id,
                epoch,
                accepted,
            },
        );
    }

    pub fn on_connect_answered(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        epoch: u32,
        accepted: bool,
        events: &mut EventQueue,
    ) {
        let connection = &mut self.connections[id.index()];
        if connection.epoch != epoch {
            return;
        }
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
        connection.sent = connection.commands.len();
        for index in 0..connection.commands.len() {
            let (seq, op) = (
                connection.commands[index].seq,
                connection.commands[index].op,
            );
            Self::transmit(now, id, connection, seq, op, events);
        }
    }

    pub fn on_connect_timeout(
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

    pub fn pause(&mut self, now: SimTime, id: ServerId, on: bool, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        adjust(&mut server.paused, on);
        self.try_execute(now, id, events);
    }

    pub fn hang(&mut self, now: SimTime, id: ServerId, on: bool, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        adjust(&mut server.hung, on);
        if server.hung == 0
            && let Some(done) = server.parked.take()
        {
            self.send_reply(now, id, done, events);
        }
        self.try_execute(now, id, events);
    }

    /// Stops (`on`) or starts the process.
    pub fn stop(&mut self, now: SimTime, id: ServerId, on: bool, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        adjust(&mut server.stopped, on);
        if !on {
            if server.stopped == 0 && !server.persistence {
                server.keyspace.clear();
            }
            return;
        }
        if server.stopped > 1 {
            return;
        }
        server.epoch = server.epoch.wrapping_add(1);
        server.executing = None;
        server.parked = None;
        server.ready.clear();
        self.drop_clients(now, id, events);
    }

    /// `CLIENT KILL` of every client: the server drops each connection (input not yet
    /// executed, and the reply of a command it is executing, are lost) and keeps running.
    ///
    /// CLIENT KILL is itself a command: a hung or stopped process cannot run it, so then it
    /// does nothing.
    pub fn kill(&mut self, now: SimTime, id: ServerId, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        if server.hung > 0 || server.stopped > 0 {
            return;
        }
        // Every client goes, so none stays in the ring; a command being executed finishes,
        // and its reply is dropped with its connection.
        server.ready.clear();
        self.drop_clients(now, id, events);
    }

    /// The server closes every connection it holds open; each client hears it after the
    /// replies already on the wire.
    fn drop_clients(&mut self, now: SimTime, id: ServerId, events: &mut EventQueue) {
        let server = &self.servers[id.index()];
        let executing = server.executing.as_ref().map(|done| done.connection);
        for &connection_id in &server.connections {
            let connection = &mut self.connections[connection_id.index()];
            // The connection whose command is being executed stays scheduled until that
            // command is done, which puts it back in the ring only if it has more input.
            connection.scheduled = executing == Some(connection_id);
            connection.input.clear();
            if connection.server_open {
                connection.server_open = false;
                // The close reaches the client after the replies already on the wire.
                let closed_at = connection
                    .inbound
                    .arrival_after_queue(now, &connection.spec);
                events.schedule(
                    closed_at,
                    Event::ConnectionClosed {
                        connection: connection_id,
                        epoch: connection.epoch,
                    },
                );
            }
        }
    }
}

fn adjust(depth: &mut u32, on: bool) {
    if on {
        *depth += 1;
    } else {
        *depth = depth.saturating_sub(1);
    }
}

//! Redis servers and the client connections to them.
//!
//! [`Redis`] is the facade the engine drives: requests issue commands through it
//! ([`Redis::issue`]), every event it scheduled comes back through [`Redis::handle`], faults go
//! in through [`Redis::fault`], and results come out through `completions` (and, for reconnect
//! slots, `link_events`). It knows nothing of flows or policies.
//!
//! The mechanisms, one module each:
//! - [`keyspace`]: a server's keys, the commands that read and write them and their replies,
//!   the memory the keys take, their expiry and eviction;
//! - [`pipe`]: one direction of a connection, with a bandwidth and a latency;
//! - [`server`]: one thread, one command at a time, round-robin over connections;
//! - [`connection`]: the client side: commands awaiting replies, timeouts, reconnects;
//! - [`faults`]: pause, hang, stop and kill of a server, a new `maxmemory`, `FLUSHALL`, and
//!   error replies for a while;
//! - [`slot_links`]: the links of reconnect slots and the writes a slot may replay;
//! - [`pubsub`]: what a server pushes to subscribers (PUBLISH, client tracking);
//! - [`replication`]: replicas following a primary, and what a failover keeps.
//!
//! Summaries add up every link of a connection. Writes applied twice: each command counts the
//! times the server executed it. A write executed more than once (resent after a lost link, as
//! ioredis' offline queue does) is counted in `writes_applied_twice` when it leaves the client;
//! a slot's replayed copies are added up through their origin (see [`slot_links`]).

mod client_loop;
mod connection;
mod faults;
mod keyspace;
mod locks;
mod pipe;
mod pubsub;
mod replication;
mod server;
mod slot_links;

use std::collections::BTreeMap;

use outagelab_model::time::SimTime;
use outagelab_report::{ConnectionSummary, ServerSummary};

use crate::kernel::{Class, EventQueue, RequestRef, StepResult};
use crate::scenario::{
    ConnectionId, ConnectionSpec, FaultTarget, LockId, PauseMode, Reconnect, RedisCommand,
    Scenario, ServerId,
};
use connection::{Connection, Link};
pub(crate) use keyspace::Op;
pub(crate) use locks::LockServerStats;
use server::Server;
use slot_links::Origin;

/// What happens next to a Redis server or connection; scheduled by [`Redis`] and handed back
/// to [`Redis::handle`]. An `epoch` is that of the connection's link (or of the server's
/// process) when the event was scheduled: an event of an older one is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedisEvent {
    /// The client-side timeout of the oldest command on a connection that may be due.
    CommandTimeout { connection: ConnectionId },
    /// The oldest command in the connection's outbound pipe reaches the server.
    CommandArrives {
        connection: ConnectionId,
        epoch: u32,
    },
    /// The server finishes executing its current command.
    ServerDone { server: ServerId, epoch: u32 },
    /// The oldest reply in the connection's inbound pipe reaches the client.
    ReplyArrives {
        connection: ConnectionId,
        epoch: u32,
    },
    /// A connection attempt reaches the server.
    ConnectArrives {
        connection: ConnectionId,
        epoch: u32,
    },
    /// The answer to a connection attempt reaches the client.
    ConnectAnswered {
        connection: ConnectionId,
        epoch: u32,
        accepted: bool,
    },
    /// A connection attempt has had no answer for the connect timeout.
    ConnectTimeout {
        connection: ConnectionId,
        epoch: u32,
    },
    /// Time to attempt a reconnect.
    ReconnectDue {
        connection: ConnectionId,
        epoch: u32,
    },
    /// Keys of `server` whose expiry has come are removed (an event of its own, so that
    /// reading the server's memory never changes it).
    KeysExpire { server: ServerId },
    /// The client learns that the server closed the connection.
    ConnectionClosed {
        connection: ConnectionId,
        epoch: u32,
    },
    /// A `CLIENT PAUSE` whose fault ended is lifted on this cron tick.
    PauseEnds { server: ServerId, mode: PauseMode },
    /// The oldest write on its way to this replica (`Redis::replication`) arrives.
    Replicate { replica: ServerId },
    /// A client loop looks at a batch of commands whose builds may be over, to give its
    /// writers their turn (`client_loop`).
    LoopTurn {
        client_loop: crate::scenario::ClientLoopId,
        batch: u64,
    },
}

impl RedisEvent {
    /// Its place among the events due at the same nanosecond: the two timeouts are deadlines,
    /// everything else is something arriving or finishing.
    #[inline(always)]
    pub fn class(&self) -> Class {
        match self {
            RedisEvent::CommandTimeout { .. }
            | RedisEvent::ConnectTimeout { .. }
            | RedisEvent::KeysExpire { .. } => Class::Deadline,
            RedisEvent::CommandArrives { .. }
            | RedisEvent::ServerDone { .. }
            | RedisEvent::ReplyArrives { .. }
            | RedisEvent::ConnectArrives { .. }
            | RedisEvent::ConnectAnswered { .. }
            | RedisEvent::ReconnectDue { .. }
            | RedisEvent::ConnectionClosed { .. }
            | RedisEvent::Replicate { .. }
            | RedisEvent::LoopTurn { .. } => Class::Finish,
            // The end of a fault, a little late.
            RedisEvent::PauseEnds { .. } => Class::Fault,
        }
    }
}

/// How a slot link's connection attempt ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkEvent {
    Connected(ConnectionId),
    ConnectFailed(ConnectionId),
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
    /// The connections whose `pending` changed since the last [`Redis::drain_pending`], each
    /// once, with `pending_marked` saying which are in it: the gauges of the others hold.
    pending_changed: Vec<ConnectionId>,
    pending_marked: Vec<bool>,
    /// Commands waiting now over every connection: the sum of `pending`'s first halves.
    queued: u64,
    origins: BTreeMap<u64, Origin>,
    next_origin: u64,
    /// Results for waiting requests, produced by the last call; the engine drains it.
    /// Each with the version of the value a hit read (0 for anything else).
    pub completions: Vec<(RequestRef, StepResult, u64)>,
    /// Ends of slot links' connection attempts, produced by the last call; the engine drains it.
    pub link_events: Vec<LinkEvent>,
    /// Links on which the server just executed, a second time, a write whose step did not
    /// opt into replaying it; the engine drains it into the monitors.
    pub applied_twice: Vec<ConnectionId>,
    /// Messages that reached a subscriber (`pubsub`): the subscriber and the key they name;
    /// the engine drains it.
    pub messages: Vec<(ConnectionId, u32, u32)>,
    /// Subscribers whose link came back after a loss; the engine drains it.
    pub resubscribed: Vec<ConnectionId>,
    tracking: pubsub::TrackingTable,
    /// Per connection: `disconnect` faults in force (its attempts are refused while any is).
    cut: Vec<u32>,
    /// Per connection: its `latency`, `bandwidth`, `packet_loss` and `slow_close` faults
    /// over the run; every link of the connection sends with them.
    toxics: Vec<pipe::ToxicTimeline>,
    /// The run's seed: each link's streams of jitter draws derive from it.
    seed: u64,
    /// Per server address: the server that holds its role now (itself, until a failover
    /// promotes a replica in its place).
    route: Vec<ServerId>,
    /// Per server (a replica): the writes on their way to it, oldest first, each with when
    /// it arrives and its primary's process epoch when it ran. Bound: the writes its primary
    /// runs in one replication lag.
    replication: Vec<std::collections::VecDeque<(SimTime, u32, Op)>>,
    /// Per client event loop: what it has been given to build and write; a command in a
    /// batch is its connection's link (epoch), sequence number and operation.
    client_loops: Vec<client_loop::ClientLoop<(u32, u64, Op)>>,
    /// Per server: the instant of its pending `KeysExpire` event, if one is scheduled (at or
    /// before its earliest key's expiry).
    expiry_scheduled: Vec<Option<SimTime>>,
    /// A call that may move a gauge's source (a connection's pending commands, a server's
    /// memory, evictions and expirations) was made since the last [`Redis::take_changed`]:
    /// `handle`, `issue`, `fault`, `connection_fault`, `open_link` and `retire_link`, the
    /// only calls that change them.
    changed: bool,
    /// Whether an executed command can have follow-ups: a replica to copy a write to, a
    /// tracking connection to tell, or a subscriber to push to (`after_execute`). Set once
    /// from the scenario: replicas are only ever promoted away, and connections' specs do
    /// not change, so a scenario with none of them runs none of that per command.
    follow_ups: bool,
}

/// The toxics of connection `id` over the run, from the scenario's faults on it.
fn toxic_timeline(scenario: &Scenario, id: ConnectionId) -> pipe::ToxicTimeline {
    let faults: Vec<_> = (scenario.faults.iter())
        .filter(|fault| fault.target == FaultTarget::Connection(id))
        .map(|fault| (fault.at, fault.end(), fault.kind))
        .collect();
    pipe::ToxicTimeline::new(&faults)
}

fn is_slot(spec: &ConnectionSpec) -> bool {
    matches!(spec.reconnect, Reconnect::Slot(_))
}

fn is_write(command: RedisCommand) -> bool {
    !command.is_read_only()
}

impl Redis {
    /// Every server running; every connection connected at the start, or its first attempt
    /// scheduled (a slot's waits for its first caller).
    pub fn new(scenario: &Scenario, events: &mut EventQueue) -> Redis {
        let key_counts: Vec<u32> = scenario.keys.iter().map(|family| family.count).collect();
        let mut servers: Vec<Server> = scenario
            .servers
            .iter()
            .map(|spec| Server::new(spec, key_counts.clone(), scenario.seed))
            .collect();
        let mut redis = Redis {
            servers: Vec::new(),
            connections: Vec::new(),
            free_links: vec![Vec::new(); scenario.connections.len()],
            pending: vec![(0, 0); scenario.connections.len()],
            pending_changed: Vec::new(),
            pending_marked: vec![false; scenario.connections.len()],
            queued: 0,
            origins: BTreeMap::new(),
            next_origin: 0,
            completions: Vec::new(),
            link_events: Vec::new(),
            applied_twice: Vec::new(),
            messages: Vec::new(),
            resubscribed: Vec::new(),
            tracking: Default::default(),
            cut: vec![0; scenario.connections.len()],
            toxics: (0..scenario.connections.len() as u32)
                .map(|index| toxic_timeline(scenario, ConnectionId(index)))
                .collect(),
            seed: scenario.seed,
            route: (0..scenario.servers.len() as u32).map(ServerId).collect(),
            replication: vec![Default::default(); scenario.servers.len()],
            client_loops: (scenario.client_loops.iter())
                .map(client_loop::ClientLoop::new)
                .collect(),
            expiry_scheduled: vec![None; scenario.servers.len()],
            changed: true,
            follow_ups: scenario.servers.iter().any(|s| s.replica_of.is_some())
                || (scenario.connections.iter())
                    .any(|c| c.tracking.is_some() || c.subscription.is_some()),
        };
        // A replica starts with what its primary starts with (a full sync before the run).
        for (replica, spec) in scenario.servers.iter().enumerate() {
            if let Some(replication) = spec.replica_of {
                for &preload in &scenario.servers[replication.primary.index()].preload {
                    servers[replica].keyspace.preload(preload);
                }
            }
        }
        for (index, spec) in scenario.connections.iter().enumerate() {
            let id = ConnectionId(index as u32);
            servers[spec.server.index()].connections.push(id);
            let mut connection = Connection::new(spec.clone(), id, scenario.seed);
            connection.set_toxics(redis.toxics[index].clone());
            if matches!(spec.reconnect, Reconnect::Manager { .. }) {
                connection.jitter = Some(crate::rng::Stream::derive(
                    scenario.seed,
                    "reconnect",
                    &spec.name,
                ));
            }
            redis.connections.push(connection);
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
        redis.schedule_expiries(events);
        redis
    }

    /// Schedules a `KeysExpire` event for each server whose earliest key expires before its
    /// pending one (if any). Called at the end of every entry point that may set or move a
    /// key's expiry, so that keys expire at their instant, through an event, and reading a
    /// server's memory ([`Redis::server_summary`]) never changes it.
    ///
    /// A server whose keyspace has not marked an expiry check is skipped: its soonest expiry
    /// can only have moved later since the last look, and its pending event (if any) is at
    /// or before it (a test build checks it).
    fn schedule_expiries(&mut self, events: &mut EventQueue) {
        for (index, server) in self.servers.iter_mut().enumerate() {
            let scheduled = &mut self.expiry_scheduled[index];
            if !server.keyspace.take_expiry_check() {
                debug_assert!(
                    (server.keyspace.next_expiry())
                        .is_none_or(|at| scheduled.is_some_and(|pending| pending <= at)),
                    "server {index}'s next expiry needs an event its keyspace did not mark"
                );
                continue;
            }
            let Some(at) = server.keyspace.next_expiry() else {
                continue;
            };
            if scheduled.is_none_or(|pending| at < pending) {
                *scheduled = Some(at);
                let server = ServerId(index as u32);
                events.schedule(at, RedisEvent::KeysExpire { server });
            }
        }
    }

    /// Runs an event this `Redis` scheduled, now that it is due.
    pub fn handle(&mut self, now: SimTime, event: RedisEvent, events: &mut EventQueue) {
        self.changed = true;
        match event {
            RedisEvent::CommandTimeout { connection } => {
                self.on_command_timeout(now, connection, events)
            }
            RedisEvent::CommandArrives { connection, epoch } => {
                self.on_command_arrives(now, connection, epoch, events)
            }
            RedisEvent::ServerDone { server, epoch } => {
                self.on_server_done(now, server, epoch, events)
            }
            RedisEvent::ReplyArrives { connection, epoch } => {
                self.on_reply_arrives(connection, epoch)
            }
            RedisEvent::ConnectArrives { connection, epoch } => {
                self.on_connect_arrives(now, connection, epoch, events)
            }
            RedisEvent::ConnectAnswered {
                connection,
                epoch,
                accepted,
            } => self.on_connect_answered(now, connection, epoch, accepted, events),
            RedisEvent::ConnectTimeout { connection, epoch } => {
                self.on_connect_timeout(now, connection, epoch, events)
            }
            RedisEvent::ReconnectDue { connection, epoch } => {
                self.on_reconnect_due(now, connection, epoch, events)
            }
            RedisEvent::ConnectionClosed { connection, epoch } => {
                self.on_connection_closed(now, connection, epoch, events)
            }
            RedisEvent::PauseEnds { server, mode } => self.pause(now, server, mode, false, events),
            RedisEvent::Replicate { replica } => self.on_replicate(now, replica),
            RedisEvent::LoopTurn { client_loop, batch } => {
                self.on_loop_turn(now, client_loop, batch, events)
            }
            RedisEvent::KeysExpire { server } => {
                let scheduled = &mut self.expiry_scheduled[server.index()];
                if *scheduled == Some(now) {
                    *scheduled = None;
                }
                let keyspace = &mut self.servers[server.index()].keyspace;
                keyspace.expire_due(now);
                keyspace.mark_expiry_check();
            }
        }
        self.schedule_expiries(events);
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
    /// Whether a gauge's source may have changed since the last call (see `changed`).
    pub fn take_changed(&mut self) -> bool {
        std::mem::replace(&mut self.changed, false)
    }

    /// Calls `each` with every connection whose commands waiting changed since the last call,
    /// and their number now.
    #[inline]
    pub fn drain_pending(&mut self, mut each: impl FnMut(ConnectionId, u64)) {
        for &connection in &self.pending_changed {
            self.pending_marked[connection.index()] = false;
            each(connection, self.pending[connection.index()].0);
        }
        self.pending_changed.clear();
    }

    /// `connection`'s commands waiting changed (by one, up or down).
    #[inline]
    fn mark_pending(&mut self, connection: ConnectionId) {
        let marked = &mut self.pending_marked[connection.index()];
        if !*marked {
            *marked = true;
            self.pending_changed.push(connection);
        }
    }

    /// Bytes the commands in flight take: each is held once, by its connection, until it
    /// ends; the wire and the server's input hold only its sequence number. Plus the writes'
    /// origins and the lock tables.
    pub fn memory_bytes(&self) -> u64 {
        let per_command =
            std::mem::size_of::<connection::Command>() + 2 * std::mem::size_of::<u64>();
        let locks: u64 = (self.servers.iter())
            .map(|s| s.keyspace.locks.memory_bytes())
            .sum();
        let replicating: usize = self.replication.iter().map(|q| q.len()).sum();
        // A connection's queues are growable rings: the room they keep beyond what they hold
        // (up to as much again, after a doubling) is allocated too.
        let room: usize = (self.connections.iter())
            .map(|link| {
                (link.commands.capacity() - link.commands.len())
                    * std::mem::size_of::<connection::Command>()
                    + (link.input.capacity() - link.input.len()) * 8
                    + link.outbound.memory_bytes()
                    + link.inbound.memory_bytes()
            })
            .sum();
        self.queued_commands() * per_command as u64
            + room as u64
            + replicating as u64 * 48
            + self.origins.len() as u64 * 64
            + locks
    }

    /// Lock `lock`'s counts over every server at `now`: expired leases added up, peaks the
    /// largest.
    pub fn lock_stats(&self, now: SimTime, lock: LockId) -> LockServerStats {
        let mut total = LockServerStats::default();
        for server in &self.servers {
            let stats = server.keyspace.locks.stats(now, lock.0);
            total.expired_leases += stats.expired_leases;
            total.peak_writers = total.peak_writers.max(stats.peak_writers);
            total.peak_readers = total.peak_readers.max(stats.peak_readers);
        }
        total
    }

    /// Commands held now over every connection and link: issued and neither answered nor
    /// failed with their link, timed-out ones included. What Redis's memory grows with: each
    /// costs one `Command` on its client side and, at most, one entry on the wire or in the
    /// server's input.
    pub fn queued_commands(&self) -> u64 {
        self.queued
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
            total.messages += stats.messages;
            total.messages_missed += stats.messages_missed;
        }
        total.peak_pending = self.pending[connection.index()].1;
        total
    }

    /// A server's used memory now, and its evicted and expired keys so far, if they may have
    /// changed since the last call (`None`: they are as they were then).
    #[inline]
    pub fn server_memory_changed(&mut self, server: ServerId) -> Option<(u64, u64, u64)> {
        let changed = self.servers[server.index()].keyspace.take_memory_changed();
        changed.then(|| self.server_memory(server))
    }

    /// A server's used memory now, and its evicted and expired keys so far: what its gauge
    /// and counters follow.
    #[inline]
    pub fn server_memory(&self, server: ServerId) -> (u64, u64, u64) {
        let keyspace = &self.servers[server.index()].keyspace;
        let stats = &keyspace.stats;
        (
            keyspace.used_memory(),
            stats.evicted_keys,
            stats.expired_keys,
        )
    }

    /// A server's memory now and its memory counters so far. Reading it changes nothing:
    /// keys expire through their own event (`RedisEvent::KeysExpire`).
    pub fn server_summary(&self, server: ServerId) -> ServerSummary {
        let keyspace = &self.servers[server.index()].keyspace;
        let stats = keyspace.stats;
        ServerSummary {
            used_memory: keyspace.used_memory(),
            used_memory_peak: stats.used_memory_peak,
            maxmemory: keyspace.maxmemory(),
            evicted_keys: stats.evicted_keys,
            expired_keys: stats.expired_keys,
            oom_replies: stats.oom_replies,
        }
    }

    /// For the run's log: when `server` first went over its memory limit, first evicted a
    /// key, first answered OOM.
    pub fn memory_milestones(&self, server: ServerId) -> [(&'static str, Option<SimTime>); 3] {
        let stats = self.servers[server.index()].keyspace.stats;
        [
            ("memory_limit_reached", stats.first_over_limit),
            ("first_eviction", stats.first_eviction),
            ("first_oom", stats.first_oom),
        ]
    }

    /// The logical connection `link` belongs to.
    pub fn owner_of(&self, link: ConnectionId) -> ConnectionId {
        self.connections[link.index()].owner
    }
}

/// A small Redis driven by hand, for the mechanisms' unit tests.
#[cfg(test)]
mod testing {
    use super::*;
    use crate::kernel::Event;
    use crate::scenario::{FaultKind, KeyDistribution, KeyFamilySpec};

    /// A `GET` of key `index` of family 0.
    pub fn get(index: u32) -> Op {
        Op {
            command: RedisCommand::Get,
            family: 0,
            index,
            version: 0,
        }
    }

    /// A `SET` of key `index` of family 0, without expiry.
    pub fn set(index: u32, value_bytes: u32) -> Op {
        Op {
            command: RedisCommand::Set {
                value_bytes,
                ttl: None,
            },
            family: 0,
            index,
            version: 0,
        }
    }

    /// A `SET` of key `index` of family 0 that expires `ttl_ms` after it runs.
    pub fn set_with_ttl(index: u32, value_bytes: u32, ttl_ms: u64) -> Op {
        let mut op = set(index, value_bytes);
        op.command = RedisCommand::Set {
            value_bytes,
            ttl: Some(outagelab_model::time::SimDuration::from_millis(ttl_ms)),
        };
        op
    }

    fn us(micros: u64) -> SimTime {
        SimTime::from_nanos(micros * 1_000)
    }

    /// Requests are named by their slot; times are in microseconds.
    pub struct Harness {
        redis: Redis,
        events: EventQueue,
        now: SimTime,
        /// (slot, when, result), in the order results came.
        finished: Vec<(u32, SimTime, StepResult)>,
        /// (when, what) of every slot link's attempt that ended.
        link_events: Vec<(SimTime, LinkEvent)>,
        /// (when, subscriber, family, index) of every message that reached a subscriber.
        messages: Vec<(SimTime, ConnectionId, u32, u32)>,
        resubscribed: Vec<ConnectionId>,
    }

    impl Harness {
        /// One server (5 us per command), `connections` connections to it (100 us one way,
        /// unlimited bandwidth, no timeout, offline queue, connected at the start), one
        /// family of 16 keys.
        pub fn new(connections: u32) -> Harness {
            Self::with(connections, |_| {})
        }

        /// As [`Harness::new`], with the scenario changed by `edit` first.
        pub fn with(connections: u32, edit: impl FnOnce(&mut Scenario)) -> Harness {
            let mut scenario = Scenario::empty("redis");
            scenario
                .servers
                .push(crate::scenario::ServerSpec::new("redis"));
            for index in 0..connections {
                let name = format!("c{index}");
                scenario
                    .connections
                    .push(ConnectionSpec::new(&name, ServerId(0)));
            }
            scenario.keys.push(KeyFamilySpec {
                name: "key".into(),
                count: 16,
                distribution: KeyDistribution::Uniform,
            });
            edit(&mut scenario);
            let mut events = EventQueue::default();
            let redis = Redis::new(&scenario, &mut events);
            Harness {
                redis,
                events,
                now: SimTime::ZERO,
                finished: Vec::new(),
                link_events: Vec::new(),
                messages: Vec::new(),
                resubscribed: Vec::new(),
            }
        }

        /// Runs every event due at or before `at_us`.
        pub fn run_until(&mut self, at_us: u64) {
            while self.events.peek_time().is_some_and(|t| t <= us(at_us)) {
                let (now, event) = self.events.pop().expect("peeked");
                let Event::Redis(event) = event else {
                    unreachable!("only Redis schedules here")
                };
                self.now = now;
                self.redis.handle(now, event, &mut self.events);
                self.collect();
            }
            self.now = self.now.max(us(at_us));
        }

        /// Runs every event left.
        pub fn run(&mut self) {
            self.run_until(u64::MAX / 1_000);
        }

        /// At `at_us`, request `slot` issues `op` on connection `connection`.
        pub fn issue_at(&mut self, at_us: u64, connection: u32, op: Op, slot: u32) {
            self.run_until(at_us);
            let waiter = RequestRef { slot, token: 0 };
            let now = self.now;
            if let Some(result) = self.redis.issue(
                now,
                ConnectionId(connection),
                op,
                waiter,
                None,
                &mut self.events,
            ) {
                self.finished.push((slot, now, result));
            }
        }

        /// At `at_us`, a fault of `kind` on the server starts (`on`) or ends.
        pub fn fault_at(&mut self, at_us: u64, kind: FaultKind, on: bool) {
            self.run_until(at_us);
            let now = self.now;
            self.redis
                .fault(now, ServerId(0), kind, on, &mut self.events);
            self.collect();
        }

        /// At `at_us`, a fault of `kind` on connection `connection` starts (`on`) or ends.
        pub fn connection_fault_at(
            &mut self,
            at_us: u64,
            connection: u32,
            kind: FaultKind,
            on: bool,
        ) {
            self.run_until(at_us);
            let now = self.now;
            self.redis
                .connection_fault(now, ConnectionId(connection), kind, on, &mut self.events);
            self.collect();
        }

        /// At `at_us`, slot `owner` opens a link for an attempt.
        pub fn open_link_at(&mut self, at_us: u64, owner: u32) -> ConnectionId {
            self.run_until(at_us);
            let now = self.now;
            self.redis
                .open_link(now, ConnectionId(owner), &mut self.events)
        }

        /// At `at_us`, a slot retires `link`.
        pub fn retire_link_at(&mut self, at_us: u64, link: ConnectionId) {
            self.run_until(at_us);
            self.redis.retire_link(link);
        }

        fn collect(&mut self) {
            for (waiter, result, _) in self.redis.completions.drain(..) {
                self.finished.push((waiter.slot, self.now, result));
            }
            for event in self.redis.link_events.drain(..) {
                self.link_events.push((self.now, event));
            }
            for (subscriber, family, index) in self.redis.messages.drain(..) {
                self.messages.push((self.now, subscriber, family, index));
            }
            self.resubscribed.append(&mut self.redis.resubscribed);
        }

        /// (microseconds, subscriber, family, index) of every message delivered.
        pub fn messages(&self) -> Vec<(u64, ConnectionId, u32, u32)> {
            self.messages
                .iter()
                .map(|&(at, c, f, i)| (at.as_nanos() / 1_000, c, f, i))
                .collect()
        }

        /// Subscribers whose link came back after a loss, in order.
        pub fn resubscribed(&self) -> Vec<ConnectionId> {
            self.resubscribed.clone()
        }

        /// Connection `index`'s counters.
        pub fn connection(&self, index: u32) -> ConnectionSummary {
            self.redis.connection_summary(ConnectionId(index))
        }

        /// (microseconds, event) of every slot link's attempt that ended.
        pub fn link_events(&self) -> Vec<(u64, LinkEvent)> {
            self.link_events
                .iter()
                .map(|&(at, event)| (at.as_nanos() / 1_000, event))
                .collect()
        }

        /// Server 0's memory now.
        pub fn server(&self) -> ServerSummary {
            self.redis.server_summary(ServerId(0))
        }

        /// Connection 0's counters.
        pub fn summary(&self) -> ConnectionSummary {
            self.redis.connection_summary(ConnectionId(0))
        }

        /// What the run's memory estimate counts of Redis ([`Redis::memory_bytes`]).
        pub fn memory_bytes(&self) -> u64 {
            self.redis.memory_bytes()
        }

        /// Commands waiting on connection 0.
        pub fn pending(&self) -> u64 {
            self.redis.pending[0].0
        }

        /// Commands held over every connection.
        pub fn queued(&self) -> u64 {
            self.redis.queued_commands()
        }

        /// (slot, microseconds, result) of every request that has its result.
        pub fn finished(&self) -> Vec<(u32, u64, StepResult)> {
            self.finished
                .iter()
                .map(|&(slot, at, result)| (slot, at.as_nanos() / 1_000, result))
                .collect()
        }

        /// (slot, microseconds) of every request that has its result.
        pub fn finished_us(&self) -> Vec<(u32, u64)> {
            self.finished()
                .into_iter()
                .map(|(slot, at, _)| (slot, at))
                .collect()
        }
    }
}

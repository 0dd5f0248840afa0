//! Databases: queries with a drawn latency, counted concurrency, and optional degradation.
//!
//! Each query needs `latency` of work, drawn from the database's distribution when it starts.
//! Up to `capacity` queries run at full speed; above it they share the capacity equally
//! (processor sharing), so each runs `capacity / running` as fast. Without a capacity the
//! database never slows down, which is what the seed-003 measurement assumed.
//!
//! Implementation: a work clock counts the work every running query has received so far (in
//! nanoseconds, fixed point with 32 fractional bits). A query finishes when the clock reaches
//! its start reading plus its latency; running queries sit in a min-heap by that target, and
//! one wake-up event is scheduled for the earliest. A change in the number of running queries
//! changes the clock's speed, so the wake-up is recomputed and the old event made stale by a
//! generation number.
//!
//! Client-side query timeouts are kept here too, in deadline order, with one timer event per
//! database for the earliest: a query answered in time removes its deadline, so the event queue
//! holds no timer for it. A query that times out keeps running (the database does not know the
//! client gave up).
//!
//! Advisory locks (`pg_advisory_xact_lock`): a query may name a lock key. It runs only while it
//! holds the lock, from when it gets it until it ends; queries waiting for a held lock queue in
//! arrival order and use no capacity while they wait (a waiting backend burns no CPU), but
//! they still wait — and a client's connection pool (a bulkhead) stays taken meanwhile, which
//! is how a lock convoy starves unrelated queries. How long each query waited is reported.
//!
//! Connection limit (`max_connections`): a query holds a connection from when the database
//! takes it until it ends, whether running or waiting for a lock. A query that finds every
//! connection taken is refused at once ("too many connections"), or, with a
//! `connection_queue`, waits for one in arrival order (refused when the queue is full). A
//! query waiting for a connection holds no capacity; its client-side timeout runs meanwhile,
//! and a query whose client gave up still takes its connection when its turn comes (the
//! database does not know). Refusals and the most queries waiting are reported.
//!
//! Collapse (thrashing): once more than `above` queries run, each runs at `throughput_percent`
//! of the speed capacity sharing gives it (the work clock's speed is a fraction, integers
//! only), until fewer than `recover_below` run. The state is updated wherever the wake-up is
//! recomputed, that is after every change in the running set, with the clock read at `now`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::DatabaseSummary;

use crate::kernel::{Class, EventQueue, RequestRef};
use crate::rng::Stream;
use crate::scenario::{Collapse, DatabaseId, Distribution, FaultKind, Scenario};
use crate::slowdowns::Slowdowns;

const ONE_Q32: u128 = 1 << 32;

/// An advisory lock's key: (key family, key index).
pub(crate) type LockKey = (u32, u32);

/// What happens next to a database; scheduled by [`Databases`] and handed back to
/// [`Databases::handle`]. An event of an older `generation` than the database's was replaced
/// by a later one and is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DatabaseEvent {
    /// A database's next query may have finished.
    Wake {
        database: DatabaseId,
        generation: u32,
    },
    /// A database's earliest query timeout may be due.
    Timeout {
        database: DatabaseId,
        generation: u32,
    },
}

impl DatabaseEvent {
    /// Its place among the events due at the same nanosecond: a query that finishes exactly
    /// at its deadline is in time.
    #[inline(always)]
    pub fn class(&self) -> Class {
        match self {
            DatabaseEvent::Wake { .. } => Class::Finish,
            DatabaseEvent::Timeout { .. } => Class::Deadline,
        }
    }
}

/// A query handed to a database.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Query {
    pub waiter: RequestRef,
    /// The client gives up after this; the query goes on.
    pub timeout: Option<SimDuration>,
    /// Replaces the database's latency distribution for this query.
    pub latency: Option<Distribution>,
    /// An advisory lock the query holds while it runs.
    pub lock: Option<LockKey>,
}

/// A running query's place in the heap of running queries, ordered by when it finishes (work
/// clock target), then by start order (unique); `query` is its entry in
/// `Database::running_queries`. Only what the heap compares and moves: every wake-up pops
/// one, and a small entry is cheaper to move through the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Running {
    target: u128,
    order: u64,
    query: u32,
}

/// What a running query carries besides its place in the heap.
#[derive(Clone, Copy, Debug)]
struct RunningQuery {
    waiter: RequestRef,
    /// When the client gives up (`SimTime::MAX` for never).
    deadline: SimTime,
    lock: Option<LockKey>,
}

impl Ord for Running {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.target, self.order).cmp(&(other.target, other.order))
    }
}

impl PartialOrd for Running {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }

    // The heap compares with these on every push and pop: one test each, not an `Ordering`.
    fn lt(&self, other: &Self) -> bool {
        self.target < other.target || (self.target == other.target && self.order < other.order)
    }

    fn le(&self, other: &Self) -> bool {
        !other.lt(self)
    }

    fn gt(&self, other: &Self) -> bool {
        other.lt(self)
    }

    fn ge(&self, other: &Self) -> bool {
        !self.lt(other)
    }
}

/// A query waiting for a lock, and since when.
#[derive(Clone, Copy, Debug)]
struct LockWaiter {
    order: u64,
    query: Query,
    deadline: SimTime,
    since: SimTime,
}

/// A query the database has taken (given its start order and deadline), before it has a
/// connection; what waits in the connection queue.
#[derive(Clone, Copy, Debug)]
struct Admitted {
    order: u64,
    query: Query,
    deadline: SimTime,
}

struct Database {
    latency: Distribution,
    capacity: Option<u32>,
    /// Connections (running or lock-waiting queries) at most; `None` for no limit.
    max_connections: Option<u32>,
    /// Queries that may wait for a connection; 0 refuses at once.
    connection_queue_max: u32,
    /// Queries waiting for a connection, in arrival order; at most `connection_queue_max`.
    connection_waiting: VecDeque<Admitted>,
    peak_connection_waiting: u64,
    refused_total: u64,
    collapse: Option<Collapse>,
    /// Since when the database is collapsed, if it is.
    collapsed_since: Option<SimTime>,
    collapses_total: u64,
    /// Time spent collapsed in collapses that have ended, in nanoseconds.
    collapsed_ns_total: u64,
    rng: Stream,
    /// Work each running query has received, in nanoseconds (Q32 fixed point).
    work_clock_q32: u128,
    clock_read_at: SimTime,
    /// Running queries, earliest to finish first.
    running: BinaryHeap<Reverse<Running>>,
    /// The running queries' entries, by `Running::query`; an entry is reused once its query
    /// ends (`free_running`), so there are never more than the most queries run at once.
    running_queries: Vec<RunningQuery>,
    free_running: Vec<u32>,
    /// Held advisory locks, each with the queries waiting for it in arrival order.
    locks: BTreeMap<LockKey, VecDeque<LockWaiter>>,
    lock_waiting: u64,
    peak_lock_waiting: u64,
    started_total: u64,
    generation: u32,
    wake_at: Option<SimTime>,
    peak_running: u64,
    /// Deadlines of running queries whose waiter has not yet timed out, by (deadline, start
    /// order); never longer than `running`.
    deadlines: BTreeMap<(SimTime, u64), RequestRef>,
    timeout_generation: u32,
    timeout_wake_at: Option<SimTime>,
    /// The `slow` faults in force: while one lasts, its work runs that many times slower.
    slowdowns: Slowdowns,
    /// While a `refuse` fault lasts (counted: two at once refuse until both end): every
    /// query that starts is refused.
    refusing: u32,
    /// While `pool_exhausted` faults last: connections something else holds, added up.
    connections_held: u32,
    /// Key families whose every lock something else holds (`lock_held` faults, counted: two
    /// at once hold it until both end).
    families_held: BTreeMap<u32, u32>,
    /// Queries waiting for a lock of a held family, in arrival order (counted in
    /// `lock_waiting`: each holds its connection).
    family_waiting: VecDeque<LockWaiter>,
}

impl Database {
    /// Connections taken: queries running or waiting for a lock.
    fn connections(&self) -> u64 {
        self.running.len() as u64 + self.lock_waiting
    }

    /// Whether every connection is taken, by its queries or by a `pool_exhausted` fault.
    fn connections_full(&self) -> bool {
        self.max_connections.is_some_and(|max| {
            self.connections() + u64::from(self.connections_held) >= u64::from(max)
        })
    }

    /// Each running query's speed as a fraction (numerator, denominator) of full speed:
    /// `capacity / running` above capacity, times `throughput_percent / 100` while collapsed,
    /// times `1000 / permille` while a `slow` fault of `permille` lasts.
    fn speed(&self) -> (u128, u128) {
        let running = self.running.len() as u128;
        let (mut numerator, mut denominator) = match self.capacity {
            Some(capacity) if running > u128::from(capacity) => (u128::from(capacity), running),
            _ => (1, 1),
        };
        if !self.slowdowns.at_full_speed() {
            numerator *= 1000;
            denominator *= u128::from(self.slowdowns.permille());
        }
        match (self.collapse, self.collapsed_since) {
            (Some(collapse), Some(_)) => (
                numerator * u128::from(collapse.throughput_percent),
                denominator * 100,
            ),
            _ => (numerator, denominator),
        }
    }

    /// Moves the work clock to `now`.
    fn read_clock(&mut self, now: SimTime) {
        let elapsed = u128::from(now.saturating_since(self.clock_read_at).as_nanos());
        if !self.running.is_empty() {
            let (numerator, denominator) = self.speed();
            // At full speed (the common case) without the 128-bit division: the same value.
            self.work_clock_q32 += if numerator == denominator {
                elapsed * ONE_Q32
            } else {
                elapsed * ONE_Q32 * numerator / denominator
            };
        }
        self.clock_read_at = now;
    }

    /// Collapses when running queries pass `above`, recovers when they fall below
    /// `recover_below`. Call with the work clock read at `now`, after the running set changed.
    fn update_collapse(&mut self, now: SimTime) {
        let Some(collapse) = self.collapse else {
            return;
        };
        let running = self.running.len() as u64;
        match self.collapsed_since {
            None if running > u64::from(collapse.above) => {
                self.collapsed_since = Some(now);
                self.collapses_total += 1;
            }
            Some(since) if running < u64::from(collapse.recover_below) => {
                self.collapsed_ns_total += now.saturating_since(since).as_nanos();
                self.collapsed_since = None;
            }
            _ => {}
        }
    }

    /// Schedules the wake-up for the earliest finishing query, if it moved.
    fn reschedule(&mut self, now: SimTime, id: DatabaseId, events: &mut EventQueue) {
        self.update_collapse(now);
        let (numerator, denominator) = self.speed();
        let wake_at = self.running.peek().map(|Reverse(first)| {
            let remaining = first.target.saturating_sub(self.work_clock_q32);
            let nanos = if numerator == denominator {
                remaining.div_ceil(ONE_Q32) // a shift: the same value, at full speed
            } else {
                (remaining * denominator).div_ceil(ONE_Q32 * numerator)
            };
            SimTime::from_nanos(
                now.as_nanos()
                    .saturating_add(u64::try_from(nanos).unwrap_or(u64::MAX)),
            )
        });
        if wake_at == self.wake_at {
            return;
        }
        self.wake_at = wake_at;
        self.generation = self.generation.wrapping_add(1);
        if let Some(at) = wake_at {
            events.schedule(
                at,
                DatabaseEvent::Wake {
                    database: id,
                    generation: self.generation,
                },
            );
        }
    }
}

pub(crate) struct Databases {
    databases: Vec<Database>,
    /// Requests whose query finished in the last call; the engine drains it.
    pub completions: Vec<RequestRef>,
    /// Requests whose query timed out in the last call; the engine drains it.
    pub timeouts: Vec<RequestRef>,
    /// How long each query that got its lock in the last call waited for it, in nanoseconds;
    /// the engine drains it.
    pub lock_waits: Vec<(DatabaseId, u64)>,
    /// Requests whose query was refused in the last call (no connection free and no room to
    /// wait for one); the engine drains it.
    pub refusals: Vec<RequestRef>,
    /// A query started or an event ran since the last [`Databases::take_changed`]: the
    /// running and lock-waiting counts may have moved.
    changed: bool,
}

impl Databases {
    pub fn new(scenario: &Scenario) -> Databases {
        Databases {
            databases: scenario
                .databases
                .iter()
                .map(|spec| Database {
                    latency: spec.latency,
                    capacity: spec.capacity,
                    max_connections: spec.connections.map(|limit| limit.max),
                    connection_queue_max: spec.connections.map_or(0, |limit| limit.queue_max),
                    connection_waiting: VecDeque::new(),
                    peak_connection_waiting: 0,
                    refused_total: 0,
                    collapse: spec.collapse,
                    collapsed_since: None,
                    collapses_total: 0,
                    collapsed_ns_total: 0,
                    rng: Stream::derive(scenario.seed, "database", &spec.name),
                    work_clock_q32: 0,
                    clock_read_at: SimTime::ZERO,
                    running: BinaryHeap::new(),
                    running_queries: Vec::new(),
                    free_running: Vec::new(),
                    locks: BTreeMap::new(),
                    lock_waiting: 0,
                    peak_lock_waiting: 0,
                    started_total: 0,
                    generation: 0,
                    wake_at: None,
                    peak_running: 0,
                    deadlines: BTreeMap::new(),
                    timeout_generation: 0,
                    timeout_wake_at: None,
                    slowdowns: Slowdowns::default(),
                    refusing: 0,
                    connections_held: 0,
                    families_held: BTreeMap::new(),
                    family_waiting: VecDeque::new(),
                })
                .collect(),
            completions: Vec::new(),
            timeouts: Vec::new(),
            lock_waits: Vec::new(),
            refusals: Vec::new(),
            changed: true,
        }
    }

    /// Whether the counts [`Databases::running`] and [`Databases::lock_waiting`] report may
    /// have changed since the last call (they change only in `start` and `handle`).
    pub fn take_changed(&mut self) -> bool {
        std::mem::replace(&mut self.changed, false)
    }

    /// Queries waiting for an advisory lock.
    pub fn lock_waiting(&self, id: DatabaseId) -> u64 {
        self.databases[id.index()].lock_waiting
    }

    /// Bytes the queries in flight take (running, or waiting for a lock, with its entry).
    pub fn memory_bytes(&self) -> u64 {
        let running = (std::mem::size_of::<Running>() + std::mem::size_of::<RunningQuery>()) as u64;
        let waiting = std::mem::size_of::<LockWaiter>() as u64 + 64;
        self.databases
            .iter()
            .map(|db| {
                db.running.len() as u64 * running
                    + (db.lock_waiting + db.connection_waiting.len() as u64) * waiting
            })
            .sum()
    }

    /// Queries waiting for a connection.
    pub fn connection_waiting(&self, id: DatabaseId) -> u64 {
        self.databases[id.index()].connection_waiting.len() as u64
    }

    pub fn running(&self, id: DatabaseId) -> usize {
        self.databases[id.index()].running.len()
    }

    /// Whether a database is collapsed (thrashing).
    pub fn collapsed(&self, id: DatabaseId) -> bool {
        self.databases[id.index()].collapsed_since.is_some()
    }

    /// Its summary at `now`, the end of the run (a collapse still on counts until then).
    pub fn summary(&self, id: DatabaseId, now: SimTime) -> DatabaseSummary {
        let database = &self.databases[id.index()];
        let ongoing_ns = database
            .collapsed_since
            .map_or(0, |since| now.saturating_since(since).as_nanos());
        DatabaseSummary {
            queries: database.started_total,
            peak_concurrency: database.peak_running,
            peak_lock_waiting: database.peak_lock_waiting,
            lock_wait_ms: Default::default(),
            refused: database.refused_total,
            peak_waiting: database.peak_connection_waiting,
            collapses: database.collapses_total,
            collapsed_ms: (database.collapsed_ns_total + ongoing_ns) / 1_000_000,
            // The configured limits: `summaries::set_database_limits`, from the spec.
            ..DatabaseSummary::default()
        }
    }

    /// Runs an event these databases scheduled, now that it is due.
    pub fn handle(&mut self, now: SimTime, event: DatabaseEvent, events: &mut EventQueue) {
        self.changed = true;
        match event {
            DatabaseEvent::Wake {
                database,
                generation,
            } => self.on_wake(now, database, generation, events),
            DatabaseEvent::Timeout {
                database,
                generation,
            } => self.on_timeout_wake(now, database, generation, events),
        }
    }

    /// A fault on database `id` starts (`on`) or ends: a `slow` one changes the speed of its
    /// work from this instant (the work clock read first, the next completion rescheduled), a
    /// `refuse` one refuses the queries that start while it lasts, a `pool_exhausted` one
    /// holds connections while it lasts and, at its end, gives them to the oldest waiters.
    pub fn fault(
        &mut self,
        now: SimTime,
        id: DatabaseId,
        kind: FaultKind,
        on: bool,
        events: &mut EventQueue,
    ) {
        self.changed = true;
        let database = &mut self.databases[id.index()];
        match kind {
            FaultKind::Slow { slowdown_permille } => {
                database.read_clock(now);
                database.slowdowns.set(slowdown_permille, on);
                database.reschedule(now, id, events);
            }
            FaultKind::Refuse if on => database.refusing += 1,
            FaultKind::Refuse => database.refusing = database.refusing.saturating_sub(1),
            FaultKind::PoolExhausted { connections } => {
                database.connections_held = if on {
                    database.connections_held.saturating_add(connections)
                } else {
                    database.connections_held.saturating_sub(connections)
                };
                if !on {
                    self.admit_waiting(now, id, events);
                }
            }
            FaultKind::LockHeld { family } => {
                let holders = database.families_held.entry(family.0).or_insert(0);
                if on {
                    *holders += 1;
                    return;
                }
                *holders = holders.saturating_sub(1);
                if *holders > 0 {
                    return;
                }
                database.families_held.remove(&family.0);
                // The family's waiters queue for their own locks, in arrival order.
                let (freed, kept) = std::mem::take(&mut database.family_waiting)
                    .into_iter()
                    .partition(|waiter| waiter.query.lock.is_some_and(|key| key.0 == family.0));
                database.family_waiting = kept;
                let freed: VecDeque<LockWaiter> = freed;
                database.lock_waiting -= freed.len() as u64;
                for waiter in freed {
                    self.acquire(now, id, waiter, events);
                }
            }
            other => unreachable!("validated: a `{}` fault on a database", other.name()),
        }
    }

    /// Hands a query to the database: it runs at once, waits for its lock, waits for a
    /// connection, or is refused (pushed to `refusals`).
    pub fn start(&mut self, now: SimTime, id: DatabaseId, query: Query, events: &mut EventQueue) {
        self.changed = true;
        let database = &mut self.databases[id.index()];
        if database.refusing > 0 {
            database.refused_total += 1;
            self.refusals.push(query.waiter);
            return;
        }
        let queue_full =
            database.connection_waiting.len() as u64 >= u64::from(database.connection_queue_max);
        if database.connections_full() && queue_full {
            database.refused_total += 1;
            self.refusals.push(query.waiter);
            return;
        }
        let order = database.started_total;
        database.started_total += 1;
        let deadline = query
            .timeout
            .map_or(SimTime::MAX, |t| now.saturating_add(t));
        if deadline != SimTime::MAX {
            database.deadlines.insert((deadline, order), query.waiter);
            if database
                .timeout_wake_at
                .is_none_or(|armed| deadline < armed)
            {
                database.arm_timeout(deadline, id, events);
            }
        }
        if database.connections_full() {
            database.connection_waiting.push_back(Admitted {
                order,
                query,
                deadline,
            });
            let waiting = database.connection_waiting.len() as u64;
            database.peak_connection_waiting = database.peak_connection_waiting.max(waiting);
            return;
        }
        if query.lock.is_none() {
            // What `connect` and `acquire` come to for a query without a lock, without moving
            // the query through their entries: it runs now.
            self.run(now, id, order, query, deadline, events);
            return;
        }
        let admitted = Admitted {
            order,
            query,
            deadline,
        };
        self.connect(now, id, admitted, events);
    }

    /// A query that has a connection: it runs, or waits for its lock.
    fn connect(
        &mut self,
        now: SimTime,
        id: DatabaseId,
        admitted: Admitted,
        events: &mut EventQueue,
    ) {
        let Admitted {
            order,
            query,
            deadline,
        } = admitted;
        let waiter = LockWaiter {
            order,
            query,
            deadline,
            since: now,
        };
        let database = &mut self.databases[id.index()];
        if query
            .lock
            .is_some_and(|key| database.families_held.contains_key(&key.0))
        {
            database.family_waiting.push_back(waiter);
            database.lock_waiting += 1;
            database.peak_lock_waiting = database.peak_lock_waiting.max(database.lock_waiting);
            return;
        }
        self.acquire(now, id, waiter, events);
    }

    /// A query that has a connection takes its lock and runs, or queues for the lock behind
    /// its holder; one without a lock runs. How long it waited is counted from `since`.
    fn acquire(
        &mut self,
        now: SimTime,
        id: DatabaseId,
        waiter: LockWaiter,
        events: &mut EventQueue,
    ) {
        let database = &mut self.databases[id.index()];
        if let Some(key) = waiter.query.lock {
            if let Some(waiters) = database.locks.get_mut(&key) {
                waiters.push_back(waiter);
                database.lock_waiting += 1;
                database.peak_lock_waiting = database.peak_lock_waiting.max(database.lock_waiting);
                return;
            }
            database.locks.insert(key, VecDeque::new());
            let waited = now.saturating_since(waiter.since).as_nanos();
            self.lock_waits.push((id, waited));
        }
        let LockWaiter {
            order,
            query,
            deadline,
            ..
        } = waiter;
        self.run(now, id, order, query, deadline, events);
    }

    /// Starts the work of a query that may run now.
    fn run(
        &mut self,
        now: SimTime,
        id: DatabaseId,
        order: u64,
        query: Query,
        deadline: SimTime,
        events: &mut EventQueue,
    ) {
        let database = &mut self.databases[id.index()];
        database.read_clock(now);
        let latency = query.latency.unwrap_or(database.latency);
        let work = u128::from(database.rng.duration(&latency).as_nanos());
        let entry = RunningQuery {
            waiter: query.waiter,
            deadline,
            lock: query.lock,
        };
        let index = match database.free_running.pop() {
            Some(index) => {
                database.running_queries[index as usize] = entry;
                index
            }
            None => {
                database.running_queries.push(entry);
                u32::try_from(database.running_queries.len() - 1).expect("under 2^32 queries")
            }
        };
        database.running.push(Reverse(Running {
            target: database.work_clock_q32 + work * ONE_Q32,
            order,
            query: index,
        }));
        database.peak_running = database.peak_running.max(database.running.len() as u64);
        database.reschedule(now, id, events);
    }

    fn on_wake(&mut self, now: SimTime, id: DatabaseId, generation: u32, events: &mut EventQueue) {
        let database = &mut self.databases[id.index()];
        if database.generation != generation {
            return;
        }
        database.read_clock(now);
        database.wake_at = None;
        let mut granted = Vec::new();
        while let Some(&Reverse(done)) = database.running.peek() {
            if done.target > database.work_clock_q32 {
                break;
            }
            database.running.pop();
            database.free_running.push(done.query);
            let RunningQuery {
                waiter,
                deadline,
                lock,
            } = database.running_queries[done.query as usize];
            if deadline != SimTime::MAX {
                // Only a query with a timeout has a deadline entry (see `start`).
                database.deadlines.remove(&(deadline, done.order));
            }
            self.completions.push(waiter);
            if let Some(key) = lock {
                // The transaction ends: the lock passes to the oldest waiter, if any.
                let waiters = database
                    .locks
                    .get_mut(&key)
                    .expect("a held lock has an entry");
                match waiters.pop_front() {
                    Some(next) => {
                        database.lock_waiting -= 1;
                        granted.push(next);
                    }
                    None => {
                        database.locks.remove(&key);
                    }
                }
            }
        }
        database.reschedule(now, id, events);
        // Most queries hold no lock: then nothing was granted, and nothing is to drop.
        if !granted.is_empty() {
            for next in granted {
                let waited = now.saturating_since(next.since).as_nanos();
                self.lock_waits.push((id, waited));
                self.run(now, id, next.order, next.query, next.deadline, events);
            }
        }
        self.admit_waiting(now, id, events);
    }

    /// Connections freed: the oldest waiters take them.
    fn admit_waiting(&mut self, now: SimTime, id: DatabaseId, events: &mut EventQueue) {
        loop {
            let database = &mut self.databases[id.index()];
            if database.connections_full() {
                break;
            }
            let Some(next) = database.connection_waiting.pop_front() else {
                break;
            };
            self.connect(now, id, next, events);
        }
    }

    /// Times out every waiter whose deadline has passed; their queries keep running.
    fn on_timeout_wake(
        &mut self,
        now: SimTime,
        id: DatabaseId,
        generation: u32,
        events: &mut EventQueue,
    ) {
        let database = &mut self.databases[id.index()];
        if database.timeout_generation != generation {
            return;
        }
        database.timeout_wake_at = None;
        while let Some(entry) = database.deadlines.first_entry() {
            let (deadline, _) = *entry.key();
            if deadline > now {
                database.arm_timeout(deadline, id, events);
                break;
            }
            self.timeouts.push(entry.remove());
        }
    }
}

impl Database {
    fn arm_timeout(&mut self, at: SimTime, id: DatabaseId, events: &mut EventQueue) {
        self.timeout_generation = self.timeout_generation.wrapping_add(1);
        self.timeout_wake_at = Some(at);
        events.schedule(
            at,
            DatabaseEvent::Timeout {
                database: id,
                generation: self.timeout_generation,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::Event;
    use crate::scenario::{ConnectionLimit, DatabaseSpec};
    use outagelab_model::time::SimDuration;

    fn databases(capacity: Option<u32>) -> Databases {
        limited(capacity, None)
    }

    fn limited(capacity: Option<u32>, connections: Option<ConnectionLimit>) -> Databases {
        let mut scenario = Scenario::empty("db");
        scenario.databases.push(DatabaseSpec {
            name: "main".into(),
            latency: Distribution::Constant(SimDuration::from_millis(10)),
            capacity,
            connections,
            collapse: None,
        });
        Databases::new(&scenario)
    }

    /// Starts `count` 10 ms queries at t=0 on a limited database; returns the slots refused at
    /// once, then which query finished when (slot, ms), and the summary.
    fn limited_run(
        capacity: Option<u32>,
        max: u32,
        queue_max: u32,
        count: u32,
    ) -> (Vec<u32>, Vec<(u32, u64)>, DatabaseSummary) {
        let mut dbs = limited(capacity, Some(ConnectionLimit { max, queue_max }));
        let mut events = start_all(&mut dbs, count);
        let refused = dbs.refusals.drain(..).map(|r| r.slot).collect();
        let finished = run_to_end(&mut dbs, &mut events);
        (refused, finished, dbs.summary(DatabaseId(0), SimTime::ZERO))
    }

    /// Starts one query per latency (ms) at t=0 on a database that collapses to 50 % above
    /// `above` running queries and recovers below `recover_below`; returns (slot, ms) finish
    /// times and the summary at the end.
    fn collapse_run(
        above: u32,
        recover_below: u32,
        latencies_ms: &[u64],
    ) -> (Vec<(u32, u64)>, DatabaseSummary) {
        let mut scenario = Scenario::empty("db");
        scenario.databases.push(DatabaseSpec {
            name: "main".into(),
            latency: Distribution::Constant(SimDuration::from_millis(10)),
            capacity: None,
            connections: None,
            collapse: Some(Collapse {
                above,
                throughput_percent: 50,
                recover_below,
            }),
        });
        let mut dbs = Databases::new(&scenario);
        let mut events = EventQueue::default();
        for (slot, &ms) in (0..).zip(latencies_ms) {
            let query = Query {
                waiter: RequestRef { slot, token: 0 },
                timeout: None,
                latency: Some(Distribution::Constant(SimDuration::from_millis(ms))),
                lock: None,
            };
            dbs.start(SimTime::ZERO, DatabaseId(0), query, &mut events);
        }
        let finished = run_to_end(&mut dbs, &mut events);
        let end = SimTime::from_nanos(finished.last().map_or(0, |&(_, ms)| ms) * 1_000_000);
        assert!(!dbs.collapsed(DatabaseId(0)), "no query runs at the end");
        (finished, dbs.summary(DatabaseId(0), end))
    }

    #[test]
    fn at_its_threshold_a_database_does_not_collapse() {
        // Three queries, collapse above three: full speed.
        let (finished, summary) = collapse_run(3, 2, &[10, 10, 10]);
        assert_eq!(finished, vec![(0, 10), (1, 10), (2, 10)]);
        assert_eq!((summary.collapses, summary.collapsed_ms), (0, 0));
    }

    #[test]
    fn a_collapsed_database_runs_at_its_share_until_load_falls_below_recovery() {
        // Four queries (10, 20, 30, 30 ms of work) at t=0, collapse above three at 50 %,
        // recover below two. Collapsed from t=0: each runs at half speed, so 10 ms of work
        // ends at 20 ms and 20 ms of work at 40 ms. At 20 ms three run and at 40 ms two: not
        // below two, still collapsed. The last two end at 60 ms (30 ms of work at half
        // speed), when it recovers: one collapse of 60 ms.
        let (finished, summary) = collapse_run(3, 2, &[10, 20, 30, 30]);
        assert_eq!(finished, vec![(0, 20), (1, 40), (2, 60), (3, 60)]);
        assert_eq!((summary.collapses, summary.collapsed_ms), (1, 60));
        // Five queries (four of 10 ms, one of 30 ms): the four end at 20 ms at half speed,
        // leaving one running, below two: it recovers at 20 ms and the last query's 20 ms of
        // work left run at full speed, ending at 40 ms.
        let (finished, summary) = collapse_run(3, 2, &[10, 10, 10, 10, 30]);
        assert_eq!(finished, vec![(0, 20), (1, 20), (2, 20), (3, 20), (4, 40)]);
        assert_eq!((summary.collapses, summary.collapsed_ms), (1, 20));
    }

    #[test]
    fn past_the_connection_limit_queries_are_refused_at_once() {
        // Two connections, no queue: the third query is refused at t=0; the two others run at
        // full speed and end at 10 ms.
        let (refused, finished, summary) = limited_run(None, 2, 0, 3);
        assert_eq!(refused, vec![2]);
        assert_eq!(finished, vec![(0, 10), (1, 10)]);
        assert_eq!(
            (summary.queries, summary.refused, summary.peak_waiting),
            (2, 1, 0)
        );
    }

    #[test]
    fn a_connection_queue_waits_in_order_and_refuses_when_full() {
        // Two connections and a queue of one: query 2 waits and runs from 10 ms to 20 ms,
        // query 3 finds the queue full and is refused.
        let (refused, finished, summary) = limited_run(None, 2, 1, 4);
        assert_eq!(refused, vec![3]);
        assert_eq!(finished, vec![(0, 10), (1, 10), (2, 20)]);
        assert_eq!(
            (summary.queries, summary.refused, summary.peak_waiting),
            (3, 1, 1)
        );
        assert_eq!(
            summary.peak_concurrency, 2,
            "a waiting query holds no capacity"
        );
    }

    #[test]
    fn the_connection_limit_keeps_capacity_sharing() {
        // Capacity 1, two connections, queue of two: queries 0 and 1 share the capacity and
        // end at 20 ms; then 2 and 3 take the connections and end at 40 ms.
        let (refused, finished, summary) = limited_run(Some(1), 2, 2, 4);
        assert!(refused.is_empty());
        assert_eq!(finished, vec![(0, 20), (1, 20), (2, 40), (3, 40)]);
        assert_eq!(summary.peak_waiting, 2);
    }

    /// Starts `count` queries (slots 0..count, no timeout) at t=0; returns their events.
    fn start_all(dbs: &mut Databases, count: u32) -> EventQueue {
        let mut events = EventQueue::default();
        for slot in 0..count {
            let query = Query {
                waiter: RequestRef { slot, token: 0 },
                timeout: None,
                latency: None,
                lock: None,
            };
            dbs.start(SimTime::ZERO, DatabaseId(0), query, &mut events);
        }
        events
    }

    /// Starts `count` queries at t=0 and returns when each finished, in ms.
    fn finish_times(capacity: Option<u32>, count: u32) -> Vec<u64> {
        let mut dbs = databases(capacity);
        let mut events = start_all(&mut dbs, count);
        run_to_end(&mut dbs, &mut events)
            .into_iter()
            .map(|(_, ms)| ms)
            .collect()
    }

    #[test]
    fn running_comparisons_agree_with_the_order() {
        let running = |target, order| Running {
            target,
            order,
            query: 0,
        };
        let all = [
            running(5, 1),
            running(5, 2),
            running(1 << 70, 0),
            running((1 << 70) + 1, 0),
            running(6, 0),
        ];
        for a in &all {
            for b in &all {
                let order = a.cmp(b);
                assert_eq!(a < b, order.is_lt(), "{a:?} < {b:?}");
                assert_eq!(a <= b, order.is_le(), "{a:?} <= {b:?}");
                assert_eq!(a > b, order.is_gt(), "{a:?} > {b:?}");
                assert_eq!(a >= b, order.is_ge(), "{a:?} >= {b:?}");
            }
        }
    }

    /// Runs every wake-up until none is left; returns which query finished when (slot, ms).
    fn run_to_end(dbs: &mut Databases, events: &mut EventQueue) -> Vec<(u32, u64)> {
        let mut finished = Vec::new();
        while let Some((at, event)) = events.pop() {
            let Event::Database(event @ DatabaseEvent::Wake { .. }) = event else {
                unreachable!("only databases schedule here, and no query has a timeout")
            };
            dbs.handle(at, event, events);
            for done in dbs.completions.drain(..) {
                finished.push((done.slot, at.as_nanos() / 1_000_000));
            }
        }
        finished
    }

    #[test]
    fn without_capacity_queries_never_slow_down() {
        assert_eq!(finish_times(None, 4), vec![10, 10, 10, 10]);
    }

    #[test]
    fn over_capacity_queries_share_it() {
        // Four 10 ms queries on a capacity of two: each runs at half speed, all end at 20 ms.
        assert_eq!(finish_times(Some(2), 4), vec![20, 20, 20, 20]);
        // At or under capacity, full speed.
        assert_eq!(finish_times(Some(4), 4), vec![10, 10, 10, 10]);
    }

    #[test]
    fn queries_on_one_lock_take_turns_and_others_run_beside_them() {
        let mut dbs = databases(None);
        let mut events = EventQueue::default();
        let query = |slot, lock| Query {
            waiter: RequestRef { slot, token: 0 },
            timeout: None,
            latency: None,
            lock,
        };
        for (slot, lock) in [
            (0, Some((0, 7))),
            (1, Some((0, 7))),
            (2, Some((0, 8))),
            (3, None),
        ] {
            dbs.start(SimTime::ZERO, DatabaseId(0), query(slot, lock), &mut events);
        }
        assert_eq!(dbs.running(DatabaseId(0)), 3);
        assert_eq!(dbs.lock_waiting(DatabaseId(0)), 1);
        let finished = run_to_end(&mut dbs, &mut events);
        // Slot 1 waits the 10 ms slot 0 holds lock 7, then runs its own 10 ms.
        assert_eq!(finished, vec![(0, 10), (2, 10), (3, 10), (1, 20)]);
        let waits: Vec<u64> = dbs
            .lock_waits
            .iter()
            .map(|&(_, nanos)| nanos / 1_000_000)
            .collect();
        assert_eq!(waits, vec![0, 0, 10]);
        assert_eq!(
            dbs.summary(DatabaseId(0), SimTime::ZERO).peak_lock_waiting,
            1
        );
    }

    #[test]
    fn concurrency_is_counted() {
        let mut dbs = databases(None);
        let mut events = EventQueue::default();
        for slot in 0..3 {
            let query = Query {
                waiter: RequestRef { slot, token: 0 },
                timeout: None,
                latency: None,
                lock: None,
            };
            dbs.start(SimTime::ZERO, DatabaseId(0), query, &mut events);
        }
        assert_eq!(dbs.running(DatabaseId(0)), 3);
        assert_eq!(
            dbs.summary(DatabaseId(0), SimTime::ZERO).peak_concurrency,
            3
        );
    }
}

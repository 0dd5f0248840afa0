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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::DatabaseSummary;

use crate::kernel::{Event, EventQueue, RequestRef};
use crate::rng::Stream;
use crate::scenario::{DatabaseId, Distribution, Scenario};

const ONE_Q32: u128 = 1 << 32;

/// A running query: (work clock target, start order, waiter slot, waiter token, timeout
/// deadline or `SimTime::MAX`). Ordered by target, then start order.
type RunningQuery = (u128, u64, u32, u32, SimTime);

struct Database {
    latency: Distribution,
    capacity: Option<u32>,
    rng: Stream,
    /// Work each running query has received, in nanoseconds (Q32 fixed point).
    work_clock_q32: u128,
    clock_read_at: SimTime,
    /// Running queries, earliest to finish first.
    running: BinaryHeap<Reverse<RunningQuery>>,
    started_total: u64,
    generation: u32,
    wake_at: Option<SimTime>,
    peak_running: u64,
    /// Deadlines of running queries whose waiter has not yet timed out, by (deadline, start
    /// order); never longer than `running`.
    deadlines: BTreeMap<(SimTime, u64), RequestRef>,
    timeout_generation: u32,
    timeout_wake_at: Option<SimTime>,
}

impl Database {
    /// Moves the work clock to `now`.
    fn read_clock(&mut self, now: SimTime) {
        let elapsed = u128::from(now.saturating_since(self.clock_read_at).as_nanos());
        let running = self.running.len() as u128;
        self.work_clock_q32 += match self.capacity {
            Some(capacity) if running > u128::from(capacity) => {
                elapsed * ONE_Q32 * u128::from(capacity) / running
            }
            _ if running == 0 => 0,
            _ => elapsed * ONE_Q32,
        };
        self.clock_read_at = now;
    }

    /// Schedules the wake-up for the earliest finishing query, if it moved.
    fn reschedule(&mut self, now: SimTime, id: DatabaseId, events: &mut EventQueue) {
        let wake_at = self.running.peek().map(|Reverse((target, ..))| {
            let remaining = target.saturating_sub(self.work_clock_q32);
            let running = self.running.len() as u128;
            let nanos = match self.capacity {
                Some(capacity) if running > u128::from(capacity) => {
                    (remaining * running).div_ceil(ONE_Q32 * u128::from(capacity))
                }
                _ => remaining.div_ceil(ONE_Q32),
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
                Event::DatabaseWake {
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
                    rng: Stream::derive(scenario.seed, "database", &spec.name),
                    work_clock_q32: 0,
                    clock_read_at: SimTime::ZERO,
                    running: BinaryHeap::new(),
                    started_total: 0,
                    generation: 0,
                    wake_at: None,
                    peak_running: 0,
                    deadlines: BTreeMap::new(),
                    timeout_generation: 0,
                    timeout_wake_at: None,
                })
                .collect(),
            completions: Vec::new(),
            timeouts: Vec::new(),
        }
    }

    pub fn running(&self, id: DatabaseId) -> usize {
        self.databases[id.index()].running.len()
    }

    pub fn summary(&self, id: DatabaseId) -> DatabaseSummary {
        let database = &self.databases[id.index()];
        DatabaseSummary {
            queries: database.started_total,
            peak_concurrency: database.peak_running,
        }
    }

    /// Starts a query for `waiter`, which gives up after `timeout` if one is set.
    pub fn start(
        &mut self,
        now: SimTime,
        id: DatabaseId,
        waiter: RequestRef,
        timeout: Option<SimDuration>,
        events: &mut EventQueue,
    ) {
        let database = &mut self.databases[id.index()];
        database.read_clock(now);
        let work = u128::from(database.rng.duration(&database.latency).as_nanos());
        let target = database.work_clock_q32 + work * ONE_Q32;
        let order = database.started_total;
        let deadline = timeout.map_or(SimTime::MAX, |t| now.saturating_add(t));
        database.running.push(Reverse((
            target,
            order,
            waiter.slot,
            waiter.token,
            deadline,
        )));
        if deadline != SimTime::MAX {
            database.deadlines.insert((deadline, order), waiter);
            if database
                .timeout_wake_at
                .is_none_or(|armed| deadline < armed)
            {
                database.arm_timeout(deadline, id, events);
            }
        }
        database.started_total += 1;
        database.peak_running = database.peak_running.max(database.running.len() as u64);
        database.reschedule(now, id, events);
    }

    pub fn on_wake(
        &mut self,
        now: SimTime,
        id: DatabaseId,
        generation: u32,
        events: &mut EventQueue,
    ) {
        let database = &mut self.databases[id.index()];
        if database.generation != generation {
            return;
        }
        database.read_clock(now);
        database.wake_at = None;
        while let Some(&Reverse((target, order, slot, token, deadline))) = database.running.peek() {
            if target > database.work_clock_q32 {
                break;
            }
            database.running.pop();
            database.deadlines.remove(&(deadline, order));
            self.completions.push(RequestRef { slot, token });
        }
        database.reschedule(now, id, events);
    }

    /// Times out every waiter whose deadline has passed; their queries keep running.
    pub fn on_timeout_wake(
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
            Event::DatabaseTimeout {
                database: id,
                generation: self.timeout_generation,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{DatabaseSpec, RunLimits};
    use outagelab_model::time::SimDuration;

    fn databases(capacity: Option<u32>) -> Databases {
        let scenario = Scenario {
            name: "db".into(),
            seed: 1,
            limits: RunLimits {
                horizon: None,
                time_max: RunLimits::TIME_MAX_DEFAULT,
                events_max: 1000,
            },
            bucket: SimDuration::from_millis(100),
            percentile_rule: Default::default(),
            servers: vec![],
            connections: vec![],
            databases: vec![DatabaseSpec {
                name: "main".into(),
                latency: Distribution::Constant(SimDuration::from_millis(10)),
                capacity,
            }],
            keys: vec![],
            breakers: vec![],
            bulkheads: vec![],
            semaphores: vec![],
            retries: vec![],
            caches: vec![],
            rate_limits: vec![],
            flows: vec![],
            loads: vec![],
            faults: vec![],
        };
        Databases::new(&scenario)
    }

    /// Starts `count` queries at t=0 and returns when each finished, in ms.
    fn finish_times(capacity: Option<u32>, count: u32) -> Vec<u64> {
        let mut dbs = databases(capacity);
        let mut events = EventQueue::default();
        for slot in 0..count {
            dbs.start(
                SimTime::ZERO,
                DatabaseId(0),
                RequestRef { slot, token: 0 },
                None,
                &mut events,
            );
        }
        let mut finished = Vec::new();
        while let Some((at, event)) = events.pop() {
            let Event::DatabaseWake {
                database,
                generation,
            } = event
            else {
                unreachable!()
            };
            dbs.on_wake(at, database, generation, &mut events);
            for _ in dbs.completions.drain(..) {
                finished.push(at.as_nanos() / 1_000_000);
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
    fn concurrency_is_counted() {
        let mut dbs = databases(None);
        let mut events = EventQueue::default();
        for slot in 0..3 {
            dbs.start(
                SimTime::ZERO,
                DatabaseId(0),
                RequestRef { slot, token: 0 },
                None,
                &mut events,
            );
        }
        assert_eq!(dbs.running(DatabaseId(0)), 3);
        assert_eq!(dbs.summary(DatabaseId(0)).peak_concurrency, 3);
    }
}

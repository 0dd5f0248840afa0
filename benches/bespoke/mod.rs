//! The seed-003 model written by hand: the speed of light for the engine.
//!
//! The same model as `scenarios/redis-dead-protection.toml`'s bulkhead variant, with nothing
//! the model does not need: evenly spaced arrivals; a cache read on a hung Redis, so every
//! command the breaker admits times out; a consecutive-failure breaker around that read; on any
//! error the request falls through to the database behind a bulkhead. Requests are not
//! objects (they differ only in when they arrived, which nothing here reads), the bulkhead's
//! queue is a count, the database is one event per query, and the only metrics are the
//! outcome counts.
//!
//! It draws the database's latencies from the same stream as the engine, in the same order, so
//! it must give the same outcome counts: the bench asserts it.
//!
//! Events at the same instant run in the order they were scheduled, as in the engine; the one
//! place the two could order ties differently is two events at the same nanosecond where one
//! is a query's end, since the engine keeps one wake-up per database and this loop one event
//! per query. Such a tie needs two instants equal to the nanosecond; the assertion would catch
//! one that changed a count, and none does in the bench's runs.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use outagelab_model::time::SimTime;
use outagelab_sim::Stream;
use outagelab_sim::scenario::{Arrivals, Distribution, LoadEnd};

/// What a run of the hand-written model ended with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcomes {
    pub ok: u64,
    pub shed: u64,
}

/// The model's parameters, read from a scenario of the seed-003 shape.
pub struct Model {
    seed: u64,
    database: String,
    latency: Distribution,
    /// Arrival `i` is at `first + even_offset(i)`.
    rate: outagelab_sim::scenario::Rate,
    first: SimTime,
    requests: u64,
    command_timeout_nanos: u64,
    failures_max: u32,
    open_for_nanos: u64,
    probes_max: u32,
    max_concurrent: u32,
    queue_max: u32,
}

impl Model {
    /// The parameters of `scenario`; panics if it is not the seed-003 shape (one even load of a
    /// fixed count, one connection with a command timeout, one enabled breaker, one enabled
    /// bulkhead, one database that never degrades).
    pub fn of(scenario: &outagelab_sim::Scenario) -> Model {
        let [load] = &scenario.loads[..] else {
            panic!("one load")
        };
        let Arrivals::Even {
            rate,
            end: LoadEnd::Count(requests),
        } = load.arrivals
        else {
            panic!("evenly spaced arrivals of a fixed count");
        };
        let [connection] = &scenario.connections[..] else {
            panic!("one connection")
        };
        let [breaker] = &scenario.breakers[..] else {
            panic!("one breaker")
        };
        let [bulkhead] = &scenario.bulkheads[..] else {
            panic!("one bulkhead")
        };
        let [database] = &scenario.databases[..] else {
            panic!("one database")
        };
        assert!(breaker.enabled && bulkhead.enabled && database.capacity.is_none());
        assert!(matches!(
            breaker.config.trip(),
            outagelab_model::breaker::Trip::Consecutive { .. }
        ));
        Model {
            seed: scenario.seed,
            database: database.name.clone(),
            latency: database.latency,
            rate,
            first: load.start,
            requests,
            command_timeout_nanos: connection
                .command_timeout
                .expect("a command timeout")
                .as_nanos(),
            failures_max: breaker.config.failures_max(),
            open_for_nanos: breaker.config.open_for().as_nanos(),
            probes_max: breaker.config.probes_max(),
            max_concurrent: bulkhead.config.max_concurrent(),
            queue_max: bulkhead.config.queue_max(),
        }
    }

    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Runs the model to the end.
    pub fn run(&self) -> Outcomes {
        Run::new(self).run()
    }
}

/// Event kinds, in the low bits of an event's key.
const ARRIVAL: u64 = 0;
const COMMAND_TIMEOUT: u64 = 1;
const QUERY_DONE: u64 = 2;
const KIND_BITS: u32 = 2;

enum BreakerState {
    Closed { failures: u32 },
    Open { until_nanos: u64 },
    HalfOpen { probes: u32 },
}

struct Run<'m> {
    model: &'m Model,
    /// `(time, sequence << KIND_BITS | kind)`, earliest first: ties keep scheduling order.
    events: BinaryHeap<Reverse<(u64, u64)>>,
    sequence: u64,
    issued: u64,
    breaker: BreakerState,
    /// Bumped on every change of breaker state: a result from an older state counts for
    /// nothing.
    breaker_epoch: u64,
    /// The breaker epoch of each command in flight, oldest first (they time out in order).
    commands: VecDeque<u64>,
    in_use: u32,
    queued: u32,
    rng: Stream,
    outcomes: Outcomes,
}

impl<'m> Run<'m> {
    fn new(model: &'m Model) -> Self {
        Run {
            model,
            events: BinaryHeap::with_capacity(256),
            sequence: 0,
            issued: 0,
            breaker: BreakerState::Closed { failures: 0 },
            breaker_epoch: 0,
            commands: VecDeque::with_capacity(64),
            in_use: 0,
            queued: 0,
            rng: Stream::derive(model.seed, "database", &model.database),
            outcomes: Outcomes::default(),
        }
    }

    fn schedule(&mut self, at_nanos: u64, kind: u64) {
        self.events
            .push(Reverse((at_nanos, self.sequence << KIND_BITS | kind)));
        self.sequence += 1;
    }

    fn run(mut self) -> Outcomes {
        if self.model.requests > 0 {
            self.schedule(self.model.first.as_nanos(), ARRIVAL);
        }
        while let Some(Reverse((now, key))) = self.events.pop() {
            match key & ((1 << KIND_BITS) - 1) {
                ARRIVAL => self.on_arrival(now),
                COMMAND_TIMEOUT => self.on_command_timeout(now),
                _ => self.on_query_done(now),
            }
        }
        self.outcomes
    }

    fn on_arrival(&mut self, now: u64) {
        self.issued += 1;
        if self.issued < self.model.requests {
            let offset = self.model.rate.even_offset(self.issued).expect("in range");
            let next = self.model.first.as_nanos() + offset.as_nanos();
            self.schedule(next, ARRIVAL);
        }
        if self.breaker_admits(now) {
            // Redis is hung: the command's only answer is its timeout.
            self.commands.push_back(self.breaker_epoch);
            self.schedule(now + self.model.command_timeout_nanos, COMMAND_TIMEOUT);
        } else {
            self.enter_database(now); // fail-open
        }
    }

    fn on_command_timeout(&mut self, now: u64) {
        let epoch = self.commands.pop_front().expect("a command per timeout");
        self.observe_breaker(now);
        if epoch == self.breaker_epoch {
            match &mut self.breaker {
                BreakerState::Closed { failures } => {
                    *failures += 1;
                    if *failures >= self.model.failures_max {
                        self.open_breaker(now);
                    }
                }
                BreakerState::HalfOpen { .. } => self.open_breaker(now),
                BreakerState::Open { .. } => unreachable!("no ticket is issued while open"),
            }
        }
        self.enter_database(now); // fail-open
    }

    fn on_query_done(&mut self, now: u64) {
        self.outcomes.ok += 1;
        if self.queued > 0 {
            // The permit passes to the oldest waiter, whose query starts now.
            self.queued -= 1;
            self.start_query(now);
        } else {
            self.in_use -= 1;
        }
    }

    /// `Open` turns `HalfOpen` once `open_for` has passed.
    fn observe_breaker(&mut self, now: u64) {
        if let BreakerState::Open { until_nanos } = self.breaker
            && now >= until_nanos
        {
            self.breaker = BreakerState::HalfOpen { probes: 0 };
            self.breaker_epoch += 1;
        }
    }

    fn breaker_admits(&mut self, now: u64) -> bool {
        self.observe_breaker(now);
        match &mut self.breaker {
            BreakerState::Closed { .. } => true,
            BreakerState::Open { .. } => false,
            BreakerState::HalfOpen { probes } => {
                let admit = *probes < self.model.probes_max;
                *probes += u32::from(admit);
                admit
            }
        }
    }

    fn open_breaker(&mut self, now: u64) {
        self.breaker = BreakerState::Open {
            until_nanos: now + self.model.open_for_nanos,
        };
        self.breaker_epoch += 1;
    }

    /// The database step: through the bulkhead (granted, queued, or shed), then the query.
    fn enter_database(&mut self, now: u64) {
        if self.in_use < self.model.max_concurrent {
            self.in_use += 1;
            self.start_query(now);
        } else if self.queued < self.model.queue_max {
            self.queued += 1;
        } else {
            self.outcomes.shed += 1;
        }
    }

    fn start_query(&mut self, now: u64) {
        let latency = self.rng.duration(&self.model.latency).as_nanos();
        self.schedule(now + latency, QUERY_DONE);
    }
}

//! What a live run records, in the simulator's own metrics ([`outagelab_sim::Metrics`]): the
//! same buckets, histograms, percentile rule and rounding, so a live report and a simulated
//! one differ only in what happened.
//!
//! One mutex around it, held for one record (never across an `.await`); every record reads
//! `now` under the lock, so the metrics see time in order.

use outagelab_model::time::SimTime;
use outagelab_report::{CountKey, GaugeKey, Outcome};
use outagelab_sim::scenario::{FlowId, Reconnect};
use outagelab_sim::{CounterId, GaugeId, HttpTally, Metrics, Scenario};

/// A gauge with its current value and the highest it reached.
pub(crate) struct Level {
    id: GaugeId,
    current: u64,
    pub peak: u64,
}

impl Level {
    fn new(metrics: &Metrics, key: GaugeKey) -> Level {
        Level {
            id: gauge(metrics, &key),
            current: 0,
            peak: 0,
        }
    }

    fn set(&mut self, metrics: &mut Metrics, value: u64) {
        self.current = value;
        self.peak = self.peak.max(value);
        metrics.set_gauge(self.id, value);
    }

    fn add(&mut self, metrics: &mut Metrics, delta: i64) {
        let value = self.current.saturating_add_signed(delta);
        self.set(metrics, value);
    }
}

/// The gauge the simulator registers as `key` (it registers one for every resource).
fn gauge(metrics: &Metrics, key: &GaugeKey) -> GaugeId {
    metrics
        .gauge(key)
        .unwrap_or_else(|| panic!("the simulator registers the gauge {key}"))
}

fn counter(metrics: &Metrics, key: &CountKey) -> CounterId {
    metrics
        .counter(key)
        .unwrap_or_else(|| panic!("the simulator registers the counter {key}"))
}

/// What a connection did, as its summary counts it.
#[derive(Default)]
pub(crate) struct ConnectionTally {
    pub commands: u64,
    pub replies: u64,
    pub timeouts: u64,
    pub disconnects: u64,
    pub fail_open: u64,
}

/// A server's series: its memory, and its evictions and expirations per bucket.
pub(crate) struct ServerSeries {
    used_memory: GaugeId,
    evicted: CounterId,
    expired: CounterId,
}

pub(crate) struct Recorder {
    pub metrics: Metrics,
    last: SimTime,
    in_flight: Level,
    /// Requests of each flow started and not ended.
    pub flow_in_flight: Vec<u64>,
    /// The most requests of each flow in flight at once.
    pub flow_peak_in_flight: Vec<u64>,
    /// Fire-and-forget steps of each flow started and not ended.
    pub background_in_flight: Vec<u64>,
    /// Loads still sending.
    pub loads_active: u64,
    http: Option<HttpTally>,
    pub databases: Vec<Level>,
    pub database_queries: Vec<u64>,
    pub pending: Vec<Level>,
    pub connected: Vec<Option<GaugeId>>,
    pub connections: Vec<ConnectionTally>,
    fail_open: Vec<CounterId>,
    /// Per rate limiter: requests admitted unchecked because its store could not be reached.
    rate_limit_fail_open: Vec<CounterId>,
    /// Attempts a rate limiter refused (a 429, retried or not).
    rejected_attempts: CounterId,
    pub breakers: Vec<GaugeId>,
    /// Per adaptive limit: its limit, its calls in flight.
    pub adaptive_limits: Vec<(GaugeId, GaugeId)>,
    /// Per in-process cache: its entries.
    pub cache_entries: Vec<GaugeId>,
    pub semaphores: Vec<(GaugeId, GaugeId)>,
    /// Per bulkhead: permits out, waiters queued.
    pub bulkheads: Vec<(GaugeId, GaugeId)>,
    servers: Vec<ServerSeries>,
}

impl Recorder {
    /// Records into the metrics the simulator would record this scenario into: the same
    /// gauges and counters, under the same names, a series for every resource it declares.
    pub fn new(scenario: &Scenario) -> Recorder {
        let metrics = outagelab_sim::empty_metrics(scenario)
            .expect("a scenario the file reader validated has sound references");
        let in_flight = Level::new(&metrics, GaugeKey::InFlight);
        let databases = (scenario.databases.iter())
            .map(|d| Level::new(&metrics, GaugeKey::DatabaseConcurrency(d.name.clone())))
            .collect();
        let pending = (scenario.connections.iter())
            .map(|c| Level::new(&metrics, GaugeKey::ConnectionPending(c.name.clone())))
            .collect();
        let connected = (scenario.connections.iter())
            .map(|c| {
                matches!(c.reconnect, Reconnect::Slot(_))
                    .then(|| gauge(&metrics, &GaugeKey::ConnectionConnected(c.name.clone())))
            })
            .collect();
        let fail_open = (scenario.connections.iter())
            .map(|c| counter(&metrics, &CountKey::ConnectionFailOpen(c.name.clone())))
            .collect();
        let rate_limit_fail_open = (scenario.rate_limits.iter())
            .map(|r| {
                counter(
                    &metrics,
                    &CountKey::RateLimitFailOpenAdmitted(r.name.clone()),
                )
            })
            .collect();
        let rejected_attempts = counter(&metrics, &CountKey::RejectedAttempts);
        let adaptive_limits = (scenario.adaptive_limits.iter())
            .map(|a| {
                (
                    gauge(&metrics, &GaugeKey::AdaptiveLimit(a.name.clone())),
                    gauge(&metrics, &GaugeKey::AdaptiveLimitInFlight(a.name.clone())),
                )
            })
            .collect();
        let cache_entries = (scenario.caches.iter())
            .map(|c| gauge(&metrics, &GaugeKey::CacheEntries(c.name.clone())))
            .collect();
        let breakers = (scenario.breakers.iter())
            .map(|b| gauge(&metrics, &GaugeKey::BreakerState(b.name.clone())))
            .collect();
        let bulkheads = (scenario.bulkheads.iter())
            .map(|b| {
                (
                    gauge(&metrics, &GaugeKey::BulkheadInUse(b.name.clone())),
                    gauge(&metrics, &GaugeKey::BulkheadQueued(b.name.clone())),
                )
            })
            .collect();
        let semaphores = (scenario.semaphores.iter())
            .map(|s| {
                (
                    gauge(&metrics, &GaugeKey::SemaphoreInFlight(s.name.clone())),
                    gauge(&metrics, &GaugeKey::SemaphoreBytes(s.name.clone())),
                )
            })
            .collect();
        let servers = (scenario.servers.iter())
            .map(|s| ServerSeries {
                used_memory: gauge(&metrics, &GaugeKey::ServerUsedMemory(s.name.clone())),
                evicted: counter(&metrics, &CountKey::ServerEvictedKeys(s.name.clone())),
                expired: counter(&metrics, &CountKey::ServerExpiredKeys(s.name.clone())),
            })
            .collect();
        Recorder {
            metrics,
            last: SimTime::ZERO,
            in_flight,
            flow_in_flight: vec![0; scenario.flows.len()],
            flow_peak_in_flight: vec![0; scenario.flows.len()],
            background_in_flight: vec![0; scenario.flows.len()],
            loads_active: 0,
            http: scenario.http.map(HttpTally::new),
            databases,
            database_queries: vec![0; scenario.databases.len()],
            pending,
            connected,
            connections: (0..scenario.connections.len())
                .map(|_| ConnectionTally::default())
                .collect(),
            fail_open,
            rate_limit_fail_open,
            rejected_attempts,
            breakers,
            adaptive_limits,
            cache_entries,
            semaphores,
            bulkheads,
            servers,
        }
    }

    /// What the server said now: its memory, and the keys it evicted and expired since it
    /// last said.
    pub fn server_sampled(
        &mut self,
        now: SimTime,
        server: usize,
        used_memory: u64,
        evicted: u64,
        expired: u64,
    ) {
        self.at(now);
        let series = &self.servers[server];
        self.metrics.set_gauge(series.used_memory, used_memory);
        self.metrics.count_many(series.evicted, evicted);
        self.metrics.count_many(series.expired, expired);
    }

    /// Moves the metrics to `now` (never backwards) and returns the instant recorded.
    pub fn at(&mut self, now: SimTime) -> SimTime {
        let now = now.max(self.last);
        self.last = now;
        self.metrics.advance_to(now);
        now
    }

    pub fn arrived(&mut self, now: SimTime, flow: FlowId) {
        self.at(now);
        self.metrics.record_arrival(flow.index());
        let in_flight = &mut self.flow_in_flight[flow.index()];
        *in_flight += 1;
        let peak = &mut self.flow_peak_in_flight[flow.index()];
        *peak = (*peak).max(*in_flight);
        self.in_flight.add(&mut self.metrics, 1);
    }

    /// A request of `flow` that started at `started` ended now with `outcome`.
    pub fn ended(&mut self, now: SimTime, flow: FlowId, started: SimTime, outcome: Outcome) {
        let now = self.at(now);
        let latency = now.saturating_since(started);
        self.metrics
            .record_end(flow.index(), outcome, latency.as_nanos());
        if let Some(http) = &mut self.http {
            http.record(now, outcome);
        }
        self.flow_in_flight[flow.index()] -= 1;
        self.in_flight.add(&mut self.metrics, -1);
    }

    pub fn background_started(&mut self, flow: FlowId) {
        self.background_in_flight[flow.index()] += 1;
    }

    pub fn background_ended(&mut self, now: SimTime, flow: FlowId, outcome: Outcome) {
        self.at(now);
        self.metrics.record_background_end(flow.index(), outcome);
        self.background_in_flight[flow.index()] -= 1;
    }

    /// Whether nothing is left to wait for: every load has stopped sending and every request
    /// has ended (fire-and-forget steps do not keep a run going, as in the simulator).
    pub fn is_done(&self) -> bool {
        self.loads_active == 0 && self.flow_in_flight.iter().all(|&n| n == 0)
    }

    pub fn in_flight(&self) -> u64 {
        self.flow_in_flight.iter().sum()
    }

    pub fn query_started(&mut self, now: SimTime, database: usize) {
        self.at(now);
        self.database_queries[database] += 1;
        self.databases[database].add(&mut self.metrics, 1);
    }

    pub fn query_ended(&mut self, now: SimTime, database: usize) {
        self.at(now);
        self.databases[database].add(&mut self.metrics, -1);
    }

    pub fn command_issued(&mut self, now: SimTime, connection: usize) {
        self.at(now);
        self.connections[connection].commands += 1;
        self.pending[connection].add(&mut self.metrics, 1);
    }

    pub fn command_ended(&mut self, now: SimTime, connection: usize, ending: CommandEnd) {
        self.at(now);
        let tally = &mut self.connections[connection];
        match ending {
            CommandEnd::Reply => tally.replies += 1,
            CommandEnd::Timeout => tally.timeouts += 1,
            CommandEnd::Lost => tally.disconnects += 1,
            // Refused before it reached a link: not one of the connection's commands, as the
            // simulator does not count a command its connection refuses.
            CommandEnd::NotSent => tally.commands -= 1,
        }
        self.pending[connection].add(&mut self.metrics, -1);
    }

    /// A step on `connection` failed and the request went on (`on_error = "next"`).
    pub fn failed_open(&mut self, now: SimTime, connection: usize) {
        self.at(now);
        self.connections[connection].fail_open += 1;
        self.metrics.count(self.fail_open[connection]);
    }

    /// Rate limiter `limiter` let a request through unchecked: its store could not be reached.
    pub fn rate_limit_failed_open(&mut self, now: SimTime, limiter: usize) {
        self.at(now);
        self.metrics.count(self.rate_limit_fail_open[limiter]);
    }

    /// A rate limiter refused an attempt.
    pub fn rejected_attempt(&mut self, now: SimTime) {
        self.at(now);
        self.metrics.count(self.rejected_attempts);
    }

    pub fn set_gauge(&mut self, now: SimTime, gauge: GaugeId, value: u64) {
        self.at(now);
        self.metrics.set_gauge(gauge, value);
    }

    pub fn http(&self) -> Option<&HttpTally> {
        self.http.as_ref()
    }
}

/// How a command's wait ended, for its connection's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommandEnd {
    /// The server answered (an error reply too).
    Reply,
    Timeout,
    /// The connection went away under it.
    Lost,
    /// It never reached the wire (no connection to send it on).
    NotSent,
}

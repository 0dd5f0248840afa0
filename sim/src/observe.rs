//! What a run records: the one place the engine reports into. It owns the run's
//! [`Metrics`] and every series handle the engine's own figures need (requests in flight, by
//! flow and by instance; 429s; callers' calls; fail-opens; databases', connections' and
//! servers' gauges; stale reads; HTTP statuses), so the engine keeps no metric of its own.
//!
//! The engine tells it what happened (a request arrived or ended, a call ended, a step failed
//! open, a lock wait ended) and, at the end of each event, hands it the mechanisms to read
//! ([`Sources`]): [`Observation::after_event`] sets each gauge to its source's value at that
//! instant. Reading never changes what is read: a Redis server's keys expire through their own
//! event (`RedisEvent::KeysExpire`), not when their memory is looked at.
//!
//! Invariant: a gauge's series holds, per bucket, the largest of the values its source had at
//! the end of the events of that bucket; a gauge whose source cannot have changed in an event
//! is not set again (setting a gauge to the value it holds changes nothing): each mechanism
//! says whether it was called since the last event (`take_changed`), Redis which connections'
//! commands waiting changed (`drain_pending`), a breaker when its state next moves with time
//! alone.

use std::collections::BTreeMap;

use outagelab_model::time::SimTime;
use outagelab_report::{CountKey, GaugeKey, InstanceSummary, Outcome, ServiceSummary};

use crate::actions::Actions;
use crate::database::Databases;
use crate::http::HttpTally;
use crate::metrics::{CounterId, GaugeId, Latency, Metrics};
use crate::policies::Policies;
use crate::reconnect_slots::ReconnectSlots;
use crate::redis::Redis;
use crate::scenario::{CallerId, ConnectionId, DatabaseId, FlowId, Reconnect, Scenario, ServerId};

/// The mechanisms whose gauges are read at the end of each event.
pub(crate) struct Sources<'a> {
    /// Requests in flight (main requests, not background steps).
    pub in_flight: u64,
    pub redis: &'a mut Redis,
    /// Whether a Redis gauge's source may have changed in the event ([`Redis::take_changed`]):
    /// when not, its gauges hold their values and are not set again.
    pub redis_changed: bool,
    pub databases: &'a mut Databases,
    pub reconnect_slots: &'a ReconnectSlots,
    pub actions: &'a mut Actions,
    pub policies: &'a mut Policies,
}

/// The run's recorder: [`Metrics`] and the handles of the engine's own series.
pub(crate) struct Observation {
    pub(crate) metrics: Metrics,
    in_flight: GaugeId,
    /// Step attempts answered `rate_limited` (429), per bucket.
    rejected_attempts: CounterId,
    /// Per caller: its calls that ended ok, and those that failed.
    caller_counters: Vec<(CounterId, CounterId)>,
    /// Per database: queries running, and queries waiting for a lock.
    database_gauges: Vec<(GaugeId, GaugeId)>,
    /// The connection-waiting gauge of each database with a connection limit.
    connection_waiting_gauges: Vec<(DatabaseId, GaugeId)>,
    /// The collapsed gauge (0 or 1) of each database that may collapse.
    collapsed_gauges: Vec<(DatabaseId, GaugeId)>,
    /// Per connection: commands pending.
    connection_gauges: Vec<GaugeId>,
    /// Per slot connection: the `connected` gauge.
    slot_gauges: Vec<(ConnectionId, GaugeId)>,
    /// Per connection: its steps that failed and went on (fail-open), in total and per bucket.
    fail_open: Vec<(u64, CounterId)>,
    server_series: Vec<ServerSeries>,
    /// Per flow (copies of a service's flows included), when the scenario has a service.
    instance_tallies: Vec<InstanceTally>,
    /// Per flow (copies included): the in-flight gauges its requests count in, its base
    /// flow's (with several flows) and its instance's (in a service), as indices into
    /// `in_flight_by`.
    flow_gauges: Vec<[Option<usize>; 2]>,
    /// Those gauges, each with its count now.
    in_flight_by: Vec<(u64, GaugeId)>,
    /// Per flow (a base flow counting its copies): requests in flight now, and the most.
    flow_in_flight: Vec<(u64, u64)>,
    /// Per base flow: requests that ended ok serving a copy older than the last commit of its
    /// key, and how long it had been out of date (allocated on the flow's first stale read).
    stale_reads: Vec<(u64, Option<Latency>)>,
    /// Ended requests as HTTP answers, when the scenario maps outcomes to statuses.
    http: Option<HttpTally>,
}

/// A Redis server's memory series: its used memory, and its evictions and expirations (with
/// the totals already counted, so each event adds only what is new).
struct ServerSeries {
    used_memory: GaugeId,
    evicted: (u64, CounterId),
    expired: (u64, CounterId),
}

/// One instance's requests (per flow copy) and how they ended, for the services' summaries.
#[derive(Clone, Copy, Default)]
struct InstanceTally {
    requests: u64,
    outcomes: [u64; Outcome::COUNT],
}

impl Observation {
    /// The recorder of a run of `scenario`, with every series of the engine's own figures
    /// registered (the policies and actions register theirs into [`Observation::metrics`]).
    pub(crate) fn new(scenario: &Scenario) -> Observation {
        let mut metrics = Metrics::for_run(
            scenario.bucket.as_nanos(),
            scenario.limits.horizon,
            scenario.flows.len(),
            scenario.databases.len(),
            scenario.percentile_rule,
        );
        let in_flight = metrics.add_gauge(GaugeKey::InFlight);
        let (flow_gauges, in_flight_by) = in_flight_gauges(scenario, &mut metrics);
        let rejected_attempts = metrics.add_counter(CountKey::RejectedAttempts);
        let caller_counters = (scenario.callers.iter())
            .map(|caller| {
                (
                    metrics.add_counter(CountKey::CallerOk(caller.name.clone())),
                    metrics.add_counter(CountKey::CallerFailed(caller.name.clone())),
                )
            })
            .collect();
        let database_gauges = (scenario.databases.iter())
            .map(|db| {
                (
                    metrics.add_gauge(GaugeKey::DatabaseConcurrency(db.name.clone())),
                    metrics.add_gauge(GaugeKey::DatabaseLockWaiting(db.name.clone())),
                )
            })
            .collect();
        let databases = || (0u32..).zip(&scenario.databases);
        let connection_waiting_gauges = databases()
            .filter(|(_, db)| db.connections.is_some())
            .map(|(index, db)| {
                let key = GaugeKey::DatabaseConnectionWaiting(db.name.clone());
                (DatabaseId(index), metrics.add_gauge(key))
            })
            .collect();
        let collapsed_gauges = databases()
            .filter(|(_, db)| db.collapse.is_some())
            .map(|(index, db)| {
                let key = GaugeKey::DatabaseCollapsed(db.name.clone());
                (DatabaseId(index), metrics.add_gauge(key))
            })
            .collect();
        let connection_gauges = (scenario.connections.iter())
            .map(|c| metrics.add_gauge(GaugeKey::ConnectionPending(c.name.clone())))
            .collect();
        let fail_open = (scenario.connections.iter())
            .map(|c| {
                let counter = metrics.add_counter(CountKey::ConnectionFailOpen(c.name.clone()));
                (0, counter)
            })
            .collect();
        let server_series = (scenario.servers.iter())
            .map(|server| ServerSeries {
                used_memory: metrics.add_gauge(GaugeKey::ServerUsedMemory(server.name.clone())),
                evicted: (
                    0,
                    metrics.add_counter(CountKey::ServerEvictedKeys(server.name.clone())),
                ),
                expired: (
                    0,
                    metrics.add_counter(CountKey::ServerExpiredKeys(server.name.clone())),
                ),
            })
            .collect();
        let slot_gauges = ((0u32..).zip(&scenario.connections))
            .filter(|(_, c)| matches!(c.reconnect, Reconnect::Slot(_)))
            .map(|(index, c)| {
                let gauge = metrics.add_gauge(GaugeKey::ConnectionConnected(c.name.clone()));
                (ConnectionId(index), gauge)
            })
            .collect();
        Observation {
            metrics,
            in_flight,
            rejected_attempts,
            caller_counters,
            database_gauges,
            connection_waiting_gauges,
            collapsed_gauges,
            connection_gauges,
            slot_gauges,
            fail_open,
            server_series,
            instance_tallies: if scenario.services.is_empty() {
                Vec::new()
            } else {
                vec![InstanceTally::default(); scenario.flows.len()]
            },
            flow_gauges,
            in_flight_by,
            flow_in_flight: vec![(0, 0); scenario.flows.len()],
            stale_reads: (0..scenario.flows.len()).map(|_| (0, None)).collect(),
            http: scenario.http.map(HttpTally::new),
        }
    }

    /// A request of `flow` (a copy of base flow `base`) arrived.
    pub(crate) fn arrived(&mut self, flow: FlowId, base: usize) {
        self.count_in_flight(flow, base, true);
        self.metrics.record_arrival(base);
        if let Some(tally) = self.instance_tallies.get_mut(flow.index()) {
            tally.requests += 1;
        }
    }

    /// A request of `flow` (a copy of base flow `base`) ended at `now` with `outcome`, after
    /// `latency_nanos`; `stale_for` is how long the copy it served had been out of date, when
    /// it ended ok on one.
    pub(crate) fn ended(
        &mut self,
        now: SimTime,
        flow: FlowId,
        base: usize,
        outcome: Outcome,
        latency_nanos: u64,
        stale_for: Option<u64>,
    ) {
        if let Some(age) = stale_for {
            let (count, ages) = &mut self.stale_reads[base];
            *count += 1;
            ages.get_or_insert_with(Latency::new).record(age);
        }
        self.metrics.record_end(base, outcome, latency_nanos);
        if let Some(tally) = self.instance_tallies.get_mut(flow.index()) {
            tally.outcomes[outcome.index()] += 1;
        }
        if let Some(http) = &mut self.http {
            http.record(now, outcome);
        }
        self.count_in_flight(flow, base, false);
    }

    /// A background step of base flow `base` ended with `outcome`.
    pub(crate) fn background_ended(&mut self, base: usize, outcome: Outcome) {
        self.metrics.record_background_end(base, outcome);
    }

    /// A step attempt was answered `rate_limited` (a 429), retried or not.
    pub(crate) fn attempt_rate_limited(&mut self) {
        self.metrics.count(self.rejected_attempts);
    }

    /// A call of `caller` ended, ok or failed.
    pub(crate) fn call_ended(&mut self, caller: CallerId, ok: bool) {
        let (ok_calls, failed_calls) = self.caller_counters[caller.index()];
        self.metrics.count(if ok { ok_calls } else { failed_calls });
    }

    /// A step on `connection` failed and the request went on unchecked.
    pub(crate) fn failed_open(&mut self, connection: ConnectionId) {
        let (total, counter) = &mut self.fail_open[connection.index()];
        *total += 1;
        self.metrics.count(*counter);
    }

    /// Steps on `connection` that failed open so far.
    pub(crate) fn fail_opens(&self, connection: ConnectionId) -> u64 {
        self.fail_open[connection.index()].0
    }

    /// A query of `database` waited `nanos` for its lock.
    pub(crate) fn lock_waited(&mut self, database: DatabaseId, nanos: u64) {
        self.metrics.record_lock_wait(database.index(), nanos);
    }

    /// The most requests of base flow `base` in flight at once.
    pub(crate) fn peak_in_flight(&self, base: usize) -> u64 {
        self.flow_in_flight[base].1
    }

    /// Base flow `base`'s stale reads, and how out of date they were.
    pub(crate) fn stale_reads(&self, base: usize) -> (u64, Option<&Latency>) {
        let (count, ages) = &self.stale_reads[base];
        (*count, ages.as_ref())
    }

    pub(crate) fn http(&self) -> Option<&HttpTally> {
        self.http.as_ref()
    }

    /// Sets every gauge whose source may have changed to its source's value at the end of an
    /// event at `now`. The event loop runs this after every event: what a scenario does not
    /// have, or what did not change, costs a test each, and the rest is out of line.
    #[inline]
    pub(crate) fn after_event(&mut self, now: SimTime, sources: Sources<'_>) {
        self.metrics.set_gauge(self.in_flight, sources.in_flight);
        if sources.databases.take_changed() {
            self.observe_databases(sources.databases);
        }
        if sources.redis_changed {
            self.observe_redis(sources.redis);
        }
        if !self.slot_gauges.is_empty() {
            self.observe_slots(sources.reconnect_slots);
        }
        sources.actions.observe(now, &mut self.metrics);
        sources.policies.observe(now, &mut self.metrics);
    }

    /// Each database's running and waiting gauges, its connections' waiting and its collapse.
    #[inline(never)]
    fn observe_databases(&mut self, databases: &Databases) {
        let metrics = &mut self.metrics;
        for (index, &(running, waiting)) in (0u32..).zip(&self.database_gauges) {
            let id = DatabaseId(index);
            metrics.set_gauge(running, databases.running(id) as u64);
            metrics.set_gauge(waiting, databases.lock_waiting(id));
        }
        for &(id, gauge) in &self.connection_waiting_gauges {
            metrics.set_gauge(gauge, databases.connection_waiting(id));
        }
        for &(id, gauge) in &self.collapsed_gauges {
            metrics.set_gauge(gauge, u64::from(databases.collapsed(id)));
        }
    }

    /// The pending gauge of each connection whose commands waiting changed, and each server's
    /// memory series.
    #[inline(never)]
    fn observe_redis(&mut self, redis: &mut Redis) {
        let metrics = &mut self.metrics;
        let gauges = &self.connection_gauges;
        redis.drain_pending(|connection, pending| {
            metrics.set_gauge(gauges[connection.index()], pending);
        });
        for (index, series) in (0u32..).zip(&mut self.server_series) {
            let server = ServerId(index);
            let Some((used, evicted, expired)) = redis.server_memory_changed(server) else {
                // Unmarked, the server's memory is as last seen: a test build checks it.
                debug_assert_eq!(
                    redis.server_memory(server),
                    (
                        metrics.gauge_now(series.used_memory),
                        series.evicted.0,
                        series.expired.0
                    ),
                    "server {index}'s memory changed without its keyspace marking it"
                );
                continue;
            };
            metrics.set_gauge(series.used_memory, used);
            let (seen, counter) = &mut series.evicted;
            if evicted != *seen {
                metrics.count_many(*counter, evicted - *seen);
                *seen = evicted;
            }
            let (seen, counter) = &mut series.expired;
            if expired != *seen {
                metrics.count_many(*counter, expired - *seen);
                *seen = expired;
            }
        }
    }

    /// Each reconnect slot's `connected` gauge.
    #[inline(never)]
    fn observe_slots(&mut self, reconnect_slots: &ReconnectSlots) {
        for &(connection, gauge) in &self.slot_gauges {
            let connected = reconnect_slots.connected(connection);
            self.metrics.set_gauge(gauge, u64::from(connected));
        }
    }

    /// Each service's instances: the requests of every copy of its flows, by instance, with
    /// `in_flight[flow]` main requests of each flow copy not ended.
    pub(crate) fn services_summary(
        &self,
        scenario: &Scenario,
        in_flight: &[u64],
    ) -> BTreeMap<String, ServiceSummary> {
        let mut services: BTreeMap<String, ServiceSummary> = BTreeMap::new();
        for (service_index, service) in scenario.services.iter().enumerate() {
            let mut instances = BTreeMap::new();
            for number in 0..service.instances {
                let mut tally = InstanceTally::default();
                let mut unfinished = 0;
                for (flow, spec) in scenario.flows.iter().enumerate() {
                    let Some(instance) = spec.instance else {
                        continue;
                    };
                    if instance.service.index() != service_index || instance.index != number {
                        continue;
                    }
                    let counted = &self.instance_tallies[flow];
                    tally.requests += counted.requests;
                    for (sum, count) in tally.outcomes.iter_mut().zip(counted.outcomes) {
                        *sum += count;
                    }
                    unfinished += in_flight[flow];
                }
                let outcomes = Outcome::ALL
                    .into_iter()
                    .map(|o| (o.name().to_owned(), tally.outcomes[o.index()]))
                    .collect();
                let summary = InstanceSummary {
                    requests: tally.requests,
                    outcomes,
                    unfinished,
                };
                instances.insert(number.to_string(), summary);
            }
            services.insert(service.name.clone(), ServiceSummary { instances });
        }
        services
    }

    /// A request of `flow` arrived (`true`) or ended: the in-flight gauges of its flow and its
    /// instance follow.
    fn count_in_flight(&mut self, flow: FlowId, base: usize, arrived: bool) {
        let (now, peak) = &mut self.flow_in_flight[base];
        if arrived {
            *now += 1;
            *peak = (*peak).max(*now);
        } else {
            *now -= 1;
        }
        if self.in_flight_by.is_empty() {
            return; // one flow and no services: no gauge by flow or instance
        }
        for index in self.flow_gauges[flow.index()].into_iter().flatten() {
            let (count, gauge) = &mut self.in_flight_by[index];
            if arrived {
                *count += 1;
            } else {
                *count -= 1;
            }
            self.metrics.set_gauge(*gauge, *count);
        }
    }
}

/// The in-flight gauges by base flow (with several flows) and by service instance, and for
/// each flow (copies included) the indices of the ones its requests count in.
#[allow(clippy::type_complexity)]
fn in_flight_gauges(
    scenario: &Scenario,
    metrics: &mut Metrics,
) -> (Vec<[Option<usize>; 2]>, Vec<(u64, GaugeId)>) {
    let mut in_flight_by: Vec<(u64, GaugeId)> = Vec::new();
    let base_flows = (0u32..)
        .zip(&scenario.flows)
        .filter(|&(index, flow)| flow.reports_as(FlowId(index)) == FlowId(index))
        .count();
    let mut flow_gauge_of_base: BTreeMap<usize, usize> = BTreeMap::new();
    let mut instance_gauge: BTreeMap<(u32, u32), usize> = BTreeMap::new();
    let flow_gauges = (0u32..)
        .zip(&scenario.flows)
        .map(|(index, flow)| {
            let base = flow.reports_as(FlowId(index));
            let by_flow = (base_flows > 1).then(|| {
                *flow_gauge_of_base.entry(base.index()).or_insert_with(|| {
                    let name = scenario.flows[base.index()].name.clone();
                    in_flight_by.push((0, metrics.add_gauge(GaugeKey::FlowInFlight(name))));
                    in_flight_by.len() - 1
                })
            });
            let by_instance = flow.instance.map(|instance| {
                let key = (instance.service.0, instance.index);
                *instance_gauge.entry(key).or_insert_with(|| {
                    let service = &scenario.services[instance.service.index()].name;
                    let name = format!("{service}@{}", instance.index);
                    in_flight_by.push((0, metrics.add_gauge(GaugeKey::InstanceInFlight(name))));
                    in_flight_by.len() - 1
                })
            });
            [by_flow, by_instance]
        })
        .collect();
    (flow_gauges, in_flight_by)
}

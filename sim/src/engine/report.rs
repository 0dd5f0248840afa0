//! The run's summary, report and log, built from the simulator's state at its end.

#[allow(unused_imports)]
use super::*;

impl<'s> Simulator<'s> {
    pub(super) fn summary(&mut self) -> Summary {
        let (scenario, now) = (self.scenario, self.now);
        let flows = scenario.flows.len();
        let (mut unfinished, mut background_unfinished) = (vec![0u64; flows], vec![0u64; flows]);
        for request in self.slots.iter().filter_map(Slot::live_request) {
            match request.role {
                Role::Background => background_unfinished[self.reports_as(request.flow)] += 1,
                Role::Main => unfinished[self.reports_as(request.flow)] += 1,
            }
        }
        let mut summary = Summary {
            requests: self.observation.metrics.requests(),
            outcomes: self.observation.metrics.outcome_counts(),
            unfinished: self.in_flight,
            latency_ms: self.observation.metrics.latency_stats(),
            latency_histogram: self.observation.metrics.latency_histogram(),
            flows: scenario
                .flows
                .iter()
                .enumerate()
                .filter(|(index, flow)| flow.reports_as(FlowId(*index as u32)).index() == *index)
                .map(|(index, flow)| {
                    let mut summary = self.observation.metrics.flow_summary(
                        index,
                        unfinished[index],
                        background_unfinished[index],
                    );
                    summary.peak_in_flight = self.observation.peak_in_flight(index);
                    let (stale, age) = self.observation.stale_reads(index);
                    summary.stale_reads = stale;
                    if let Some(age) = age {
                        summary.stale_age_ms = age.stats(scenario.percentile_rule);
                    }
                    (flow.name.clone(), summary)
                })
                .collect(),
            databases: scenario
                .databases
                .iter()
                .enumerate()
                .map(|(index, db)| {
                    let mut summary = self.databases.summary(DatabaseId(index as u32), self.now);
                    summary.lock_wait_ms = self.observation.metrics.lock_wait_stats(index);
                    crate::summaries::set_database_limits(&mut summary, db);
                    (db.name.clone(), summary)
                })
                .collect(),
            caches: self.actions.cache_summaries(scenario),
            rate_limits: self.actions.rate_limit_summaries(scenario),
            throttles: self.actions.throttle_summaries(scenario),
            locks: self.actions.lock_summaries(scenario, now, &self.redis),
            connections: scenario
                .connections
                .iter()
                .enumerate()
                .map(|(index, c)| {
                    let id = ConnectionId(index as u32);
                    let mut summary = self.redis.connection_summary(id);
                    summary.fail_open = self.observation.fail_opens(id);
                    summary.pending_max = c.pending_max.map(|max| u64::from(max.get()));
                    if let Some(slot) = self.reconnect_slots.summary(id) {
                        summary.slot = slot;
                    }
                    (c.name.clone(), summary)
                })
                .collect(),
            servers: scenario
                .servers
                .iter()
                .enumerate()
                .map(|(index, server)| {
                    let summary = self.redis.server_summary(ServerId(index as u32));
                    (server.name.clone(), summary)
                })
                .collect(),
            ..Summary::default()
        };
        summary.http = (self.observation.http()).map(|http| http.summary(&summary.outcomes));
        let callers = self.callers.summaries(scenario.percentile_rule);
        summary.callers = scenario
            .callers
            .iter()
            .zip(callers)
            .map(|(spec, caller)| (spec.name.clone(), caller))
            .collect();
        summary.services = self.services_summary();
        self.policies.summarize(scenario, self.now, &mut summary);
        summary
    }

    /// Each service's instances: the requests of every copy of its flows, by instance.
    pub(super) fn services_summary(&self) -> BTreeMap<String, ServiceSummary> {
        let mut in_flight = vec![0u64; self.scenario.flows.len()];
        for request in self.slots.iter().filter_map(Slot::live_request) {
            if request.role == Role::Main {
                in_flight[request.flow.index()] += 1;
            }
        }
        self.observation.services_summary(self.scenario, &in_flight)
    }

    pub(super) fn report(mut self, verdict: Verdict) -> VariantReport {
        let summary = self.summary();
        let end = self.now;
        let series = self.observation.metrics.finish_series(end);
        let scenario = self.scenario;
        let ms = |t: SimTime| t.as_nanos() as f64 / 1e6;
        let faults: Vec<FaultWindow> = scenario
            .faults
            .iter()
            .filter(|fault| fault.at <= end)
            .map(|fault| FaultWindow {
                name: fault.name.clone(),
                target: scenario.target_name(fault.target).to_owned(),
                kind: fault.kind.name().to_owned(),
                start_ms: ms(fault.at),
                end_ms: fault.end().filter(|&e| e <= end).map(ms),
            })
            .collect();
        let (log, log_dropped) = self.log(&faults);
        VariantReport {
            name: scenario.name.clone(),
            sweep_x: None,
            verdict,
            percentile_rule: scenario.percentile_rule,
            end_ms: ms(end),
            events: self.events_processed,
            faults,
            summary,
            series,
            log,
            log_dropped,
            runner: None,
        }
    }

    /// The run's state changes in time order: faults, then servers' memory milestones, then
    /// breakers, then reconnect slots at the same instant (see `journal`).
    pub(super) fn log(&self, faults: &[FaultWindow]) -> (Vec<LogEntry>, u64) {
        let mut entries = Vec::new();
        for fault in faults {
            let entry = |at_ms: f64, event: &str| LogEntry {
                at_ms,
                event: event.to_owned(),
                target_kind: "fault",
                target: fault.name.clone(),
                from: None,
                link: None,
            };
            entries.push(entry(fault.start_ms, "fault_started"));
            if let Some(end_ms) = fault.end_ms {
                entries.push(entry(end_ms, "fault_ended"));
            }
        }
        for (index, server) in self.scenario.servers.iter().enumerate() {
            let milestones = self.redis.memory_milestones(ServerId(index as u32));
            for (event, at) in milestones {
                let Some(at) = at else { continue };
                entries.push(LogEntry {
                    at_ms: journal::ms(at),
                    event: event.to_owned(),
                    target_kind: "server",
                    target: server.name.clone(),
                    from: None,
                    link: None,
                });
            }
        }
        let mut dropped = self.policies.log(self.scenario, &mut entries);
        dropped += self.reconnect_slots.log(self.scenario, &mut entries);
        (journal::merge(entries), dropped)
    }
}

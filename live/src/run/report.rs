//! A live variant's report, of the shape a simulated one has.

#[allow(unused_imports)]
use super::*;

/// The run's report: the simulator's summary shape, filled with what was measured.
pub(super) fn report(
    run: &Run,
    name: &str,
    sweep_x: Option<f64>,
    verdict: Verdict,
    ended_at: SimTime,
    faults: Vec<FaultWindow>,
    servers: outagelab_report::ServerSummary,
) -> VariantReport {
    let scenario = &run.scenario;
    let mut recorder = run.recorder();
    let mut summary = outagelab_sim::summary_shape(scenario)
        .expect("a scenario the file reader validated has sound references");
    let series = recorder.metrics.finish_series(ended_at);
    summary.requests = recorder.metrics.requests();
    summary.outcomes = recorder.metrics.outcome_counts();
    summary.unfinished = recorder.in_flight();
    summary.latency_ms = recorder.metrics.latency_stats();
    summary.latency_histogram = recorder.metrics.latency_histogram();
    for (index, flow) in scenario.flows.iter().enumerate() {
        let mut flow_summary = recorder.metrics.flow_summary(
            index,
            recorder.flow_in_flight[index],
            recorder.background_in_flight[index],
        );
        flow_summary.peak_in_flight = recorder.flow_peak_in_flight[index];
        summary.flows.insert(flow.name.clone(), flow_summary);
    }
    for (index, database) in scenario.databases.iter().enumerate() {
        let entry = summary.databases.entry(database.name.clone()).or_default();
        *entry = DatabaseSummary {
            queries: recorder.database_queries[index],
            peak_concurrency: recorder.databases[index].peak,
            ..DatabaseSummary::default()
        };
        summaries::set_database_limits(entry, database);
    }
    run.layers.summarize(scenario, &mut summary);
    for (spec, live) in scenario.caches.iter().zip(&run.caches) {
        (summary.caches).insert(spec.name.clone(), summaries::cache(&live.counters()));
    }
    for (index, (spec, connection)) in scenario
        .connections
        .iter()
        .zip(&run.connections)
        .enumerate()
    {
        let tally = &recorder.connections[index];
        // A connection the file has connected at the start was made before the run's clock
        // started, as a simulated one is there without an attempt: that connect is not one of
        // the run's.
        let before_run = u64::from(spec.connected_at_start);
        let (attempts, failures, slot) = match connection.slot() {
            Some(slot) => {
                let stats = slot.stats();
                let counters = slot.counters();
                (
                    stats.attempts_total.saturating_sub(before_run),
                    stats.connect_failures_total,
                    SlotSummary {
                        reconnects: stats.reconnects_total,
                        evictions: stats.evictions_total,
                        stale_failures: counters.stale_failures_total,
                        waited: counters.waited_total,
                        unavailable: counters.unavailable_total,
                        replays: counters.replays_total,
                    },
                )
            }
            None => (0, 0, SlotSummary::default()),
        };
        summary.connections.insert(
            spec.name.clone(),
            ConnectionSummary {
                commands: tally.commands,
                replies: tally.replies,
                timeouts: tally.timeouts,
                disconnects: tally.disconnects,
                connect_attempts: attempts,
                connect_failures: failures,
                peak_pending: recorder.pending[index].peak,
                fail_open: tally.fail_open,
                slot,
                ..ConnectionSummary::default()
            },
        );
    }
    if let Some(server) = scenario.servers.first() {
        summary.servers.insert(server.name.clone(), servers);
    }
    if let Some(http) = recorder.http() {
        summary.http = Some(http.summary(&summary.outcomes));
    }
    VariantReport {
        name: name.to_owned(),
        sweep_x,
        verdict,
        percentile_rule: scenario.percentile_rule,
        end_ms: ended_at.as_nanos() as f64 / 1e6,
        events: 0,
        faults,
        summary,
        series,
        log: Vec::new(),
        log_dropped: 0,
        runner: Some(locked(&run.timing).clone()),
    }
}

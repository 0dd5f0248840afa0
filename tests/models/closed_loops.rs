//! Closed-loop loads: callers that wait for each request before thinking and sending the next,
//! checked against hand-computed timelines.

use std::path::Path;

use outagelab_report::VariantReport;

const SERVICE: &str = r#"
[scenario]
name = "closed"

[servers.redis]

[connections.c]
server = "redis"
latency = "100us"
command_timeout = "1s"

[keys.k]
count = 100

[flows.work]
steps = [{ work = "5ms" }]

[flows.get]
steps = [{ redis = { command = "GET", connection = "c", key = "k" } }]
"#;

fn run(extra: &str) -> VariantReport {
    let text = format!("{SERVICE}\n{extra}");
    let file = outagelab_scenario_file::parse(&text, Path::new("closed.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    outagelab_sim::run(&file.variants[0].scenario).unwrap()
}

#[test]
fn each_caller_sends_after_its_last_request_ended_and_its_think_time() {
    // Caller 0 sends at 0, 15, 30 ms (5 ms of work, 10 ms of thinking), its last request ends
    // at 35 ms; caller 1 starts half the stagger later, at 5 ms, and ends at 40 ms.
    let report = run(
        "[loads.l]\nflow = \"work\"\narrivals = \"closed\"\nworkers = 2\nthink = \"10ms\"\n\
         stagger = \"10ms\"\niterations = 3\n",
    );
    assert_eq!(report.summary.requests, 6);
    assert_eq!(report.summary.outcomes["ok"], 6);
    assert_eq!(report.end_ms, 40.0);
}

#[test]
fn a_duration_stops_new_requests_not_the_ones_in_flight() {
    // Sends at 0, 5 and 10 ms; the next would be at 15 ms, past the 12 ms duration.
    let report = run(
        "[loads.l]\nflow = \"work\"\narrivals = \"closed\"\nworkers = 1\nduration = \"12ms\"\n",
    );
    assert_eq!(report.summary.requests, 3);
    assert_eq!(report.end_ms, 15.0);
}

#[test]
fn callers_stuck_on_a_paused_redis_send_nothing_until_it_answers() {
    // 50 callers, a 2 s pause and a 1 s command timeout: each caller's request times out once,
    // its next one waits out the rest of the pause and succeeds. An open loop at the same mean
    // rate would keep sending into the pause and time out hundreds of times more.
    let report = run(
        "[run]\nhorizon = \"10s\"\n\n[loads.l]\nflow = \"get\"\narrivals = \"closed\"\n\
         workers = 50\nthink = \"10ms\"\nstagger = \"10ms\"\nduration = \"8s\"\n\n\
         [faults.p]\ntarget = \"redis\"\nkind = \"pause\"\nat = \"3s\"\nduration = \"2s\"\n",
    );
    assert_eq!(report.summary.outcomes["timeout"], 50);
    assert_eq!(report.summary.unfinished, 0);
    // Between 3 s and 5.1 s (the pause, then the cron tick) nothing new is sent but the
    // 50 retries after the timeouts.
    let ok_at = |ms: f64| {
        let index = (ms / report.series.bucket_ms) as usize;
        report.series.outcomes["ok"][index]
    };
    assert_eq!(ok_at(4000.0), 0);
    assert!(
        ok_at(2000.0) > 400,
        "50 callers every 10.2 ms: about 490 a bucket"
    );
}

#[test]
fn bad_closed_loops_are_refused_at_their_key() {
    for (load, message) in [
        (
            "arrivals = \"closed\"\niterations = 3",
            "loads.l.workers: a closed loop needs `workers`",
        ),
        (
            "arrivals = \"closed\"\nworkers = 0\niterations = 3",
            "loads.l.workers: must be at least 1",
        ),
        (
            "arrivals = \"closed\"\nworkers = 2",
            "loads.l.iterations: a closed loop needs an end",
        ),
        (
            "arrivals = \"closed\"\nworkers = 2\nrate = 5\niterations = 1",
            "loads.l.rate: does not apply to a closed loop",
        ),
        (
            "arrivals = \"poisson\"\nrate = 5\ncount = 1\nworkers = 2",
            "loads.l.workers: applies to a closed loop",
        ),
    ] {
        let text = format!("{SERVICE}\n[loads.l]\nflow = \"work\"\n{load}\n");
        let error = outagelab_scenario_file::parse(&text, Path::new("closed.toml"))
            .err()
            .unwrap_or_else(|| panic!("{load}: accepted"))
            .to_string();
        assert!(error.contains(message), "{load}: {error}");
    }
}

/// Two callers without think time share a bulkhead of one permit and no queue: while one
/// holds the permit for its 5 ms of work, the other is shed at once and sends again at the
/// same instant, forever. The run stops as a zero-time loop instead of hanging until its event
/// budget; with a think time the same loop runs to its end.
#[test]
fn a_caller_that_sends_forever_at_one_instant_stops_the_run() {
    let bulkhead = "[bulkheads.one]\nmax_concurrent = 1\nqueue = 0\n\
        [flows.guarded]\nsteps = [{ work = \"5ms\", bulkhead = \"one\" }]\n";
    let looping = run(&format!(
        "{bulkhead}[loads.l]\nflow = \"guarded\"\narrivals = \"closed\"\nworkers = 2\n\
         duration = \"1s\"\n"
    ));
    assert_eq!(looping.verdict, outagelab_report::Verdict::ZeroTimeLoop);
    assert_eq!(looping.end_ms, 0.0);
    let sends = u64::from(outagelab_sim::SENDS_AT_ONE_INSTANT_MAX);
    assert!(looping.summary.requests > sends && looping.summary.requests < sends + 10);
    let thinking = run(&format!(
        "{bulkhead}[loads.l]\nflow = \"guarded\"\narrivals = \"closed\"\nworkers = 2\n\
         think = \"1ms\"\nduration = \"1s\"\n"
    ));
    assert_eq!(thinking.verdict, outagelab_report::Verdict::Completed);
    assert!(
        thinking.summary.outcomes["shed"] > 0,
        "{:?}",
        thinking.summary.outcomes
    );
}

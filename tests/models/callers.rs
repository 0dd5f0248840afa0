//! Callers in front of a service (seed 003's upstream with its own timeout and retries),
//! checked against hand-computed timelines.

use std::path::Path;

use outagelab_report::VariantReport;

const SERVICE: &str = r#"
[scenario]
name = "callers"

[flows.slow]
steps = [{ work = "100ms" }]

[retries.upstream]
max_attempts = 3
backoff = "10ms"
jitter = "none"
retry_on = ["timeout"]

[callers.proxy]
timeout = "30ms"
retry = "upstream"
"#;

fn run(extra: &str) -> VariantReport {
    let text = format!("{SERVICE}\n{extra}");
    let file = outagelab_scenario_file::parse(&text, Path::new("callers.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    outagelab_sim::run(&file.variants[0].scenario).unwrap()
}

#[test]
fn a_caller_that_times_out_and_retries_leaves_every_attempt_running_in_the_service() {
    // Attempt 1 at 0 ms, given up at 30; attempt 2 at 40, given up at 70; attempt 3 at 80,
    // given up at 110: the call fails with a timeout at 110 ms. The service runs all three to
    // the end (100, 140, 180 ms), three at once between 80 and 100 ms.
    let report = run(
        "[loads.users]\nflow = \"slow\"\narrivals = \"burst\"\ncount = 1\ncaller = \"proxy\"\n",
    );
    let proxy = &report.summary.callers["proxy"];
    assert_eq!(
        (
            proxy.requests,
            proxy.attempts,
            proxy.retries,
            proxy.abandoned
        ),
        (1, 3, 2, 3)
    );
    assert_eq!(proxy.outcomes["timeout"], 1);
    assert_eq!(proxy.latency_ms.max, Some(110.0));
    assert_eq!(report.summary.requests, 3, "the service saw every attempt");
    assert_eq!(
        report.summary.outcomes["ok"], 3,
        "and finished each of them"
    );
    assert_eq!(report.end_ms, 180.0);
    let in_flight = report
        .series
        .gauges_max
        .get("in_flight")
        .expect("the in-flight gauge");
    assert_eq!(in_flight.iter().max(), Some(&3));
    // The failed call started at 0 ms: the users' failure window opens there, and the
    // callers' series counts one failed call and no ok one.
    assert_eq!(
        (proxy.first_failed_call_ms, proxy.last_failed_call_ms),
        (Some(0.0), Some(0.0))
    );
    assert_eq!(proxy.first_abandoned_ms, Some(0.0));
    let counts = &report.series.counts;
    assert_eq!(counts["callers.proxy.failed"].iter().sum::<u64>(), 1);
    assert_eq!(counts["callers.proxy.ok"].iter().sum::<u64>(), 0);
}

#[test]
fn a_caller_that_cancels_stops_the_abandoned_attempt_before_its_next_step() {
    // Steps of 10, 40 and 50 ms. Attempt 1 at 0 ms is given up on at 30, in its second step,
    // and stops when that step ends, at 50; attempt 2 at 40, given up at 70, stops at 90;
    // attempt 3 at 80, given up at 110, stops at 130. Without cancelling they run to 100, 140
    // and 180 ms, three at once from 80 to 100 ms; cancelled, never more than two.
    let two_steps = r#"
[flows.two]
steps = [{ work = "10ms" }, { work = "40ms" }, { work = "50ms" }]

[loads.users]
flow = "two"
arrivals = "burst"
count = 1
caller = "proxy"
"#;
    let cancelling = SERVICE.replace(
        "timeout = \"30ms\"\nretry",
        "timeout = \"30ms\"\ncancel_on_timeout = true\nretry",
    );
    let text = format!("{cancelling}\n{two_steps}");
    let file = outagelab_scenario_file::parse(&text, Path::new("callers.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let report = outagelab_sim::run(&file.variants[0].scenario).unwrap();
    assert_eq!(report.summary.callers["proxy"].outcomes["timeout"], 1);
    assert_eq!(report.summary.outcomes["cancelled"], 3);
    assert_eq!(report.end_ms, 130.0);
    let in_flight = &report.series.gauges_max["in_flight"];
    assert_eq!(in_flight.iter().max(), Some(&2));
    // The same caller without cancelling: every attempt runs both steps.
    let report = run(two_steps);
    assert_eq!(report.summary.outcomes["ok"], 3);
    assert_eq!(report.end_ms, 180.0);
}

#[test]
fn a_cancelled_request_still_runs_the_finally_step_it_stopped_in_front_of() {
    // Given up on at 30 ms in its 50 ms first step, the request stops at 50 ms in front of its
    // `finally` INCR, which runs all the same (in the background, within the 1 s horizon):
    // Redis ends with the counter (88 bytes).
    let report = run(r#"
[run]
horizon = "1s"

[servers.redis]

[connections.c]
server = "redis"

[keys.counter]
count = 1

[flows.release]
steps = [{ work = "50ms" }, { redis = { command = "INCR", connection = "c", key = "counter" }, finally = true }]

[loads.users]
flow = "release"
arrivals = "burst"
count = 1
caller = "cancelling"

[retries.once]
max_attempts = 1
backoff = "10ms"
retry_on = ["timeout"]

[callers.cancelling]
timeout = "30ms"
retry = "once"
cancel_on_timeout = true
"#);
    assert_eq!(report.summary.outcomes["cancelled"], 1);
    assert_eq!(report.summary.servers["redis"].used_memory, 88);
}

#[test]
fn a_retry_asks_for_the_same_key_as_the_attempt_it_replaces() {
    // One call, three attempts, each an INCR of a key drawn from a million: the retries
    // ask for the same product page again, so Redis ends with one counter at 3 (88 bytes:
    // 16 of name, 8 of value, 64 of overhead), not three counters at 1.
    let report = run(r#"
[servers.redis]

[connections.c]
server = "redis"

[keys.page]
count = 1000000

[flows.count]
steps = [{ redis = { command = "INCR", connection = "c", key = "page" } }, { work = "100ms" }]

[loads.users]
flow = "count"
arrivals = "burst"
count = 1
caller = "proxy"
"#);
    assert_eq!(report.summary.callers["proxy"].attempts, 3);
    assert_eq!(report.summary.servers["redis"].used_memory, 88);
}

#[test]
fn an_answer_before_the_timeout_ends_the_call_and_a_closed_loop_waits_for_the_call() {
    // Work of 20 ms answers inside the 30 ms timeout: one attempt per call. The closed-loop
    // caller sends its next call when the call (not an attempt) ends: at 0, 20, 40 ms.
    let report = run(
        "[flows.quick]\nsteps = [{ work = \"20ms\" }]\n\n[loads.users]\nflow = \"quick\"\n\
         arrivals = \"closed\"\nworkers = 1\niterations = 3\ncaller = \"proxy\"\n",
    );
    let proxy = &report.summary.callers["proxy"];
    assert_eq!((proxy.requests, proxy.attempts, proxy.retries), (3, 3, 0));
    assert_eq!(proxy.outcomes["ok"], 3);
    assert_eq!(report.end_ms, 60.0);
}

#[test]
fn a_closed_loop_behind_a_timing_out_caller_sends_again_after_the_call_fails() {
    // Each call gives up at 110 ms (three attempts); the worker's next call starts then, while
    // the service still runs the last attempts of the previous one.
    let report = run(
        "[loads.users]\nflow = \"slow\"\narrivals = \"closed\"\nworkers = 1\niterations = 2\n\
         caller = \"proxy\"\n",
    );
    let proxy = &report.summary.callers["proxy"];
    assert_eq!((proxy.requests, proxy.attempts), (2, 6));
    assert_eq!(proxy.outcomes["timeout"], 2);
    assert_eq!(report.summary.requests, 6);
    // The second call's third attempt starts at 110 + 80 = 190 ms and ends at 290 ms.
    assert_eq!(report.end_ms, 290.0);
}

#[test]
fn bad_callers_are_refused_at_their_key() {
    for (extra, message) in [
        (
            "[callers.p]\ntimeout = \"0s\"",
            "callers.p.timeout: must be longer than zero",
        ),
        (
            "[callers.p]\nretry = \"nope\"",
            "callers.p.retry: unknown retry policy `nope`",
        ),
        (
            "[callers.p]\ncancel_on_timeout = true",
            "callers.p.cancel_on_timeout: a caller without a `timeout` never gives up",
        ),
        (
            "[loads.l]\nflow = \"slow\"\narrivals = \"burst\"\ncount = 1\ncaller = \"prox\"",
            "loads.l.caller: unknown caller `prox`",
        ),
    ] {
        let mut text = format!("{SERVICE}\n{extra}\n");
        if !extra.starts_with("[loads") {
            text.push_str("\n[loads.l]\nflow = \"slow\"\narrivals = \"burst\"\ncount = 1\n");
        }
        let error = outagelab_scenario_file::parse(&text, Path::new("callers.toml"))
            .err()
            .unwrap_or_else(|| panic!("{extra}: accepted"))
            .to_string();
        assert!(error.contains(message), "{extra}: {error}");
    }
}

#[test]
fn a_caller_retrying_a_429_waits_out_its_retry_after_before_the_next_attempt() {
    // A cap of one in flight that answers 429 with Retry-After: 1 s. Two calls at 0 ms: the
    // first holds the slot for 100 ms; the second is refused at once and its caller, whose
    // own backoff is 10 ms, waits the 1 s the answer asked for: one retry, admitted at 1000
    // ms, done at 1100 ms. A caller that ignored Retry-After would be refused again at 10,
    // 30, ... ms until its attempts ran out.
    let report = run(r#"
[keys.space]
count = 1

[throttles.cap]
form = "atomic"
inflight_max = 1
retry_after = "1s"

[retries.client]
max_attempts = 5
backoff = "10ms"
jitter = "none"
retry_on = ["rate_limited"]

[callers.desktop]
retry = "client"

[flows.write]
steps = [
  { throttle = { name = "cap", op = "acquire", key = "space" } },
  { work = "100ms" },
  { throttle = { name = "cap", op = "release", key = "space" }, finally = true, on_error = "ignore" },
]

[loads.sync]
flow = "write"
arrivals = "burst"
count = 2
caller = "desktop"
"#);
    let desktop = &report.summary.callers["desktop"];
    assert_eq!(
        (desktop.requests, desktop.attempts, desktop.retries),
        (2, 3, 1)
    );
    assert_eq!(desktop.outcomes["ok"], 2);
    assert_eq!(desktop.latency_ms.max, Some(1100.0));
    assert_eq!(
        report.summary.outcomes["rate_limited"], 1,
        "the refused attempt"
    );
}

/// The simulator's side of the dropped-guard case, under every breaker preset: a caller that
/// gives up on an attempt while its step runs inside a breaker (a half-open probe included)
/// and says so (`cancel_on_timeout`) stops the request before its next step, but the step runs
/// to its end and the breaker counts its own result: every transition and count of the
/// breaker is the same as when the service does not hear the cancel. (The live runner's
/// guard dropped mid-call counts neither way: `live/src/run/differential.rs`; the simulator
/// never drops a step.)
#[test]
fn a_caller_cancel_inside_a_breaker_leaves_the_breaker_to_the_step_under_every_preset() {
    for preset in outagelab_model::presets::BREAKER_PRESETS {
        // Redis hangs from 1 s to 6 s: GETs time out at 50 ms and open the breaker; after
        // it, a GET takes 40 ms. The caller gives up on every attempt at 10 ms.
        let open_ms = preset.open_for_max.as_nanos() / 1_000_000;
        let until_ms = 6_000 + 2 * open_ms + 5_000;
        let file = |cancel: bool| {
            format!(
                "[scenario]\nname = \"cancel-in-breaker\"\n[run]\nhorizon = \"{until_ms}ms\"\n\
                 [servers.redis]\n[connections.c]\nserver = \"redis\"\nlatency = \"20ms\"\n\
                 command_timeout = \"50ms\"\n[keys.k]\ncount = 1\n\
                 [breakers.b]\npreset = \"{}\"\n\
                 [flows.read]\nsteps = [{{ redis = {{ command = \"GET\", connection = \"c\", \
                 key = \"k\" }}, breaker = \"b\", on_error = \"next\" }}, {{ work = \"1ms\" }}]\n\
                 [callers.upstream]\ntimeout = \"10ms\"\ncancel_on_timeout = {cancel}\n\
                 [loads.users]\nflow = \"read\"\narrivals = \"even\"\nrate = 50\n\
                 duration = \"{}ms\"\ncaller = \"upstream\"\n\
                 [faults.down]\ntarget = \"redis\"\nkind = \"hang\"\nat = \"1s\"\n\
                 duration = \"5s\"\n",
                preset.name,
                until_ms - 1_000
            )
        };
        let run = |cancel: bool| {
            let text = file(cancel);
            let parsed = outagelab_scenario_file::parse(&text, Path::new("cancel.toml"))
                .unwrap_or_else(|e| panic!("{}: {e}", preset.name));
            outagelab_sim::run(&parsed.variants[0].scenario).unwrap()
        };
        let (heard, unheard) = (run(true), run(false));
        let breaker = &heard.summary.breakers["b"];
        assert!(
            heard.summary.outcomes["cancelled"] > 0,
            "{}: the service heard no cancel",
            preset.name
        );
        assert!(
            breaker.opened > 0 && breaker.half_opened > 0 && breaker.closed > 0,
            "{}: probes did not decide the breaker: {breaker:?}",
            preset.name
        );
        assert_eq!(
            serde_json::to_string(&(&heard.summary.breakers, &heard.log)).unwrap(),
            serde_json::to_string(&(&unheard.summary.breakers, &unheard.log)).unwrap(),
            "{}: a cancel heard inside the breaker changed it",
            preset.name
        );
    }
}

#[test]
fn an_even_load_through_a_retrying_caller_sends_its_count_of_calls_on_time() {
    // 4 calls at 10/s (0, 100, 200, 300 ms), each retried twice by the caller: the load's
    // count and spacing are its own calls', whatever its caller's attempts. (The load once
    // counted every attempt as one of its requests, so it stopped after 2 calls.)
    let report = run(
        "[loads.users]\nflow = \"slow\"\narrivals = \"even\"\nrate = 10\ncount = 4\n\
         caller = \"proxy\"\n",
    );
    let proxy = &report.summary.callers["proxy"];
    assert_eq!((proxy.requests, proxy.attempts), (4, 12));
    assert_eq!(report.summary.requests, 12);
    // The last call starts at 300 ms and fails at 410 ms; its last attempt ends at 480 ms.
    assert_eq!(report.end_ms, 480.0);
}

#[test]
fn a_caller_whose_retry_policy_is_disabled_does_not_retry() {
    // The policy a variant switches on: off, the call fails with its first attempt, at 30 ms.
    // (A caller once retried through a disabled policy.)
    let text = format!(
        "{}\n[loads.users]\nflow = \"slow\"\narrivals = \"burst\"\ncount = 1\ncaller = \"proxy\"\n",
        SERVICE.replace(
            "[retries.upstream]\n",
            "[retries.upstream]\nenabled = false\n"
        )
    );
    let file = outagelab_scenario_file::parse(&text, Path::new("callers.toml")).unwrap();
    let report = outagelab_sim::run(&file.variants[0].scenario).unwrap();
    let proxy = &report.summary.callers["proxy"];
    assert_eq!((proxy.requests, proxy.attempts, proxy.retries), (1, 1, 0));
    assert_eq!(proxy.latency_ms.max, Some(30.0));
}

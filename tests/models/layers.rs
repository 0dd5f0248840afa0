//! Policy layers in declared order, through whole runs of small scenario files: the cases an
//! independent review found, kept as regression tests.

use std::path::Path;

use outagelab_report::Summary;

/// Runs every variant of `text`; returns each variant's name and summary.
fn run(text: &str) -> Vec<(String, Summary)> {
    let file = outagelab_scenario_file::parse(text, Path::new("layers.toml"))
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    file.variants
        .iter()
        .map(|variant| {
            let report = outagelab_sim::run(&variant.scenario).expect("runs");
            (variant.name.clone(), report.summary)
        })
        .collect()
}

/// A retry inside a bulkhead on a database step retries a timed-out query while the abandoned
/// query still holds the pool's connection: the retry must wait for it, or the database runs
/// more queries than the pool has connections (it reached 15 against a pool of 5).
#[test]
fn a_retry_inside_a_bulkhead_never_runs_more_queries_than_the_pool() {
    let runs = run(r#"
[scenario]
name = "retry-in-pool"

[databases.main]
latency = { distribution = "uniform", min = "180ms", max = "220ms" }

[bulkheads.pool]
max_concurrent = 5
queue = 20

[retries.client]
max_attempts = 3
backoff = "10ms"

[flows.read]
steps = [{ db = { name = "main", timeout = "100ms" }, retry = "client", bulkhead = "pool", policies = ["bulkhead", "retry"] }]

[loads.peak]
flow = "read"
arrivals = "even"
rate = 100
duration = "2s"

[[variant]]
name = "bulkhead outside retry"

[[variant]]
name = "retry outside bulkhead"
[variant.patch.flows.read.steps.0]
policies = ["retry", "bulkhead"]
"#);
    for (name, summary) in &runs {
        let peak = summary.databases["main"].peak_concurrency;
        assert!(peak <= 5, "{name}: {peak} queries at once in a pool of 5");
        assert!(summary.retries["client"].retries > 0, "{name}: it retried");
    }
}

/// A bulkhead that sheds a rate-limit step refuses the request; only an open breaker (the
/// store not asked) lets the limiter's `when_unreachable` answer. A shed used to become a
/// fail-open admission.
#[test]
fn a_shed_rate_limit_step_is_shed_not_admitted_unchecked() {
    let runs = run(r#"
[scenario]
name = "shed-limit"

[servers.redis]

[connections.c]
server = "redis"
latency = "1ms"

[databases.main]
latency = "50ms"

[bulkheads.pool]
max_concurrent = 1
queue = 0

[rate_limits.rl]
capacity = 1000
rate = 1000
store = "c"
when_unreachable = "open"

[keys.k]
count = 1

[flows.f]
steps = [
  { rate_limit = { name = "rl", key = "k" }, bulkhead = "pool" },
  { db = { name = "main" } },
]

[loads.l]
flow = "f"
arrivals = "burst"
count = 50
"#);
    let summary = &runs[0].1;
    assert_eq!(summary.bulkheads["pool"].shed, 49);
    assert_eq!(summary.outcomes["shed"], 49);
    assert_eq!(summary.rate_limits["rl"].fail_open_admitted, 0);
    assert_eq!(summary.databases["main"].queries, 1);
}

/// Reads of one key at 500/s for 4 s through breaker `b` (written `breaker`), on a Redis
/// server with `faults` (error replies, say); a failed read goes on (`on_error = "next"`).
fn error_replies(breaker: &str, faults: &str) -> String {
    format!(
        r#"
[scenario]
name = "error-replies"

[servers.redis]

[connections.c]
server = "redis"

[keys.k]

[breakers.b]
{breaker}

[flows.read]
steps = [{{ redis = {{ command = "GET", connection = "c", key = "k" }}, breaker = "b", on_error = "next" }}]

[loads.l]
flow = "read"
arrivals = "even"
rate = 500
duration = "4s"
{faults}"#
    )
}

/// Redis answers `loading` (a restarting server) from 1 s to 3 s.
const LOADING_1S_TO_3S: &str = r#"
[faults.restarting]
target = "redis"
kind = "error_reply"
error = "loading"
at = "1s"
duration = "2s"
"#;

/// A breaker with a library's preset counts what the library counts by default: every error.
/// Redis answers `loading` (a restarting server) to 1,000 reads over 2 s: every preset's
/// breaker opens after as many error replies as its library's rule needs; a breaker without
/// a preset counts only network errors and timeouts (seed 003's rule) and stays closed; and a
/// preset with `counts` written keeps what the file says.
#[test]
fn every_breaker_preset_counts_error_replies_as_its_library_does() {
    let file = |breaker: &str| error_replies(breaker, LOADING_1S_TO_3S);
    let opened = |breaker: &str| {
        let runs = run(&file(breaker));
        runs[0].1.breakers["b"].opened
    };
    // (opened, `loading` replies that reached a caller before it opened), by the library's
    // rule: the window holds 500 successes (1 s at 500/s) when the errors start.
    let expected = [
        // 100-call window, 50%: 50 failures after 50 successes.
        ("resilience4j", 1, 50),
        // 10% of 500 + f calls over 30 s: f = 56 (55.6 rounded up).
        ("polly-v8", 1, 56),
        // 50% over 10 s: as many failures as successes, 500.
        ("polly-v7-advanced", 1, 500),
        // strictly above 50% (threshold = "exceeded"): 501.
        ("opossum", 1, 501),
        // more than 5 consecutive failures: 6.
        ("gobreaker", 1, 6),
    ];
    assert_eq!(
        expected.map(|(name, ..)| name),
        outagelab_model::presets::BREAKER_PRESETS.map(|preset| preset.name),
        "one case per preset"
    );
    for (name, opened_expected, loading_expected) in expected {
        let runs = run(&file(&format!("preset = \"{name}\"")));
        let summary = &runs[0].1;
        // 2,000 reads, 500 of them before the errors start; every read after the opening is
        // refused (it stays open past the end: no preset's opening is shorter than 5 s).
        let breaker = &summary.breakers["b"];
        let seen = (breaker.opened, 2_000 - 500 - breaker.rejected);
        assert_eq!(seen, (opened_expected, loading_expected), "{name}");
    }
    assert_eq!(
        opened("failures = 5\nopen_for = \"1s\""),
        0,
        "network errors only"
    );
    assert_eq!(
        opened("preset = \"gobreaker\"\ncounts = [\"timeout\"]"),
        0,
        "a preset with counts written keeps them"
    );
    // opossum's allowWarmUp: no opening before warm_up; the errors end at 3 s.
    assert_eq!(opened("preset = \"opossum\"\nwarm_up = \"3s\""), 0);
    assert_eq!(opened("preset = \"opossum\"\nwarm_up = \"2500ms\""), 1);
}

/// An error a breaker `ignores` counts neither way, where one outside `counts` under the
/// resilience4j preset is a success (its `recordExceptions` / `ignoreExceptions`). Redis
/// answers `wrongtype` for the first second (500 reads), then `loading` for two (1,000): with
/// `wrongtype` ignored the 10 s window reaches its 1,000 calls only with the last `loading`
/// reply, all failures; with `wrongtype` not recorded (a success) it holds 500 successes and
/// opens at 50% after 500 `loading` replies.
#[test]
fn ignored_errors_count_neither_way_and_unrecorded_ones_are_successes() {
    let wrongtype = r#"
[faults.wrong]
target = "redis"
kind = "error_reply"
error = "wrongtype"
at = "0s"
duration = "1s"
"#;
    let file = |classifier: &str| {
        let breaker = format!(
            "preset = \"resilience4j\"\nfailure_rate = {{ percent = 50, window = \"10s\", \
             min_calls = 1000 }}\n{classifier}"
        );
        error_replies(&breaker, &format!("{wrongtype}{LOADING_1S_TO_3S}"))
    };
    // `loading` replies before it opened: the reads admitted after the first 500.
    let loading_before_open = |classifier: &str| {
        let runs = run(&file(classifier));
        let breaker = &runs[0].1.breakers["b"];
        (breaker.opened, 2_000 - 500 - breaker.rejected)
    };
    assert_eq!(loading_before_open("ignores = [\"wrongtype\"]"), (1, 1000));
    assert_eq!(loading_before_open("counts = [\"loading\"]"), (1, 500));
}

/// lettuce's reconnect delays double (`Delay.exponential()`: 2^(n-1) ms up to 30 s), where
/// ioredis' grow by 50 ms per attempt up to 2 s. Redis stops from 1 s to 11 s (connections
/// refused at once): lettuce's attempt n starts about 2^n - 1 ms after the loss, so 13 fail
/// inside the outage (the 13th at 8.191 s after it) and the 14th, 16.383 s after it,
/// connects at 17.4 s, with 17 reads waiting (one a second, offline); ioredis' attempt n
/// starts 25·n·(n+1) ms after the loss, so 19 fail (the 19th at 9.5 s) and the 20th connects
/// at 11.5 s. With linear 1 ms steps lettuce would make 140 attempts.
#[test]
fn the_lettuce_preset_doubles_its_reconnect_delays() {
    let file = |preset: &str| {
        format!(
            r#"
[scenario]
name = "reconnects"

[servers.redis]

[connections.c]
server = "redis"
preset = "{preset}"

[keys.k]

[flows.read]
steps = [{{ redis = {{ command = "GET", connection = "c", key = "k" }} }}]

[loads.l]
flow = "read"
arrivals = "even"
rate = 1
duration = "30s"

[faults.down]
target = "redis"
kind = "stop"
at = "1s"
duration = "10s"
"#
        )
    };
    for (preset, attempts, failures, pending) in [("lettuce", 14, 13, 17), ("ioredis", 20, 19, 11)]
    {
        let runs = run(&file(preset));
        let c = &runs[0].1.connections["c"];
        let seen = (c.connect_attempts, c.connect_failures, c.peak_pending);
        assert_eq!(seen, (attempts, failures, pending), "{preset}");
    }
}

/// Two retries on one step, where `policies` places them: a per-try retry inside the breaker
/// and an overall retry outside it. Against a Redis that never answers (100 ms timeouts), each
/// request makes 2 x 3 = 6 attempts through the breaker (which counts no timeout here, so it
/// stays closed); the inner policy is entered once per outer attempt.
#[test]
fn two_retries_on_one_step_nest_in_the_order_policies_lists_them() {
    let runs = run(r#"
[scenario]
name = "two-retries"

[servers.redis]

[connections.cache]
server = "redis"
command_timeout = "100ms"

[keys.k]

[breakers.redis]
failures = 5
open_for = "5s"
counts = ["refused"]

[retries.overall]
max_attempts = 2
backoff = "10ms"

[retries.per-try]
max_attempts = 3
backoff = "1ms"

[flows.read]
steps = [{ redis = { command = "GET", connection = "cache", key = "k" }, retry = ["overall", "per-try"], breaker = "redis", policies = ["retry", "breaker", "retry"] }]

[loads.one]
flow = "read"
arrivals = "burst"
count = 10

[faults.hang]
target = "redis"
kind = "hang"
at = "0s"
"#);
    let (_, summary) = &runs[0];
    assert_eq!(summary.outcomes["timeout"], 10);
    let (overall, per_try) = (&summary.retries["overall"], &summary.retries["per-try"]);
    assert_eq!((overall.requests, overall.retries), (10, 10), "{overall:?}");
    assert_eq!((per_try.requests, per_try.retries), (20, 40), "{per_try:?}");
    assert_eq!(summary.connections["cache"].timeouts, 60);
    let breaker = &summary.breakers["redis"];
    assert_eq!((breaker.opened, breaker.rejected), (0, 0), "{breaker:?}");
}

/// Two policies of one kind need `policies` to place them, and each listing takes one name.
#[test]
fn two_policies_of_one_kind_must_each_be_placed() {
    let base = r#"
[scenario]
name = "two-retries"

[databases.main]
latency = "10ms"

[retries.a]
max_attempts = 2
backoff = "1ms"

[retries.b]
max_attempts = 2
backoff = "1ms"

[flows.read]
steps = [{ db = { name = "main" }, STEP }]

[loads.one]
flow = "read"
arrivals = "burst"
count = 1
"#;
    let error = |step: &str| {
        let text = base.replace("STEP", step);
        match outagelab_scenario_file::parse(&text, Path::new("two.toml")) {
            Ok(_) => panic!("{step}: accepted"),
            Err(diagnostics) => diagnostics.to_string(),
        }
    };
    let unplaced = error(r#"retry = ["a", "b"]"#);
    assert!(
        unplaced.contains("names 2 retry policies: list \"retry\" in `policies` once for each"),
        "{unplaced}"
    );
    let once = error(r#"retry = ["a", "b"], policies = ["retry"]"#);
    assert!(once.contains("lists \"retry\" 1 times"), "{once}");
    let thrice = error(r#"retry = ["a", "b"], policies = ["retry", "retry", "retry"]"#);
    assert!(
        thrice.contains("retry is listed 3 times but the step names 2"),
        "{thrice}"
    );
    let twice = error(r#"retry = ["a", "a"], policies = ["retry", "retry"]"#);
    assert!(twice.contains("names retry `a` twice"), "{twice}");
    let placed = base.replace(
        "STEP",
        r#"retry = ["a", "b"], policies = ["retry", "retry"]"#,
    );
    outagelab_scenario_file::parse(&placed, Path::new("two.toml")).expect("placed: accepted");
}

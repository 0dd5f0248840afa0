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

/// A breaker with a library's preset counts what the library counts by default: every error.
/// Redis answers `loading` (a restarting server) to 1,000 reads over 2 s: every preset's
/// breaker opens, as resilience4j, Polly, opossum and gobreaker would; a breaker without a
/// preset counts only network errors and timeouts (seed 003's rule) and stays closed; and a
/// preset with `counts` written keeps what the file says.
#[test]
fn every_breaker_preset_counts_error_replies_as_its_library_does() {
    let file = |breaker: &str| {
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

[faults.restarting]
target = "redis"
kind = "error_reply"
error = "loading"
at = "1s"
duration = "2s"
"#
        )
    };
    let opened = |breaker: &str| {
        let runs = run(&file(breaker));
        runs[0].1.breakers["b"].opened
    };
    for preset in outagelab_model::presets::BREAKER_PRESETS {
        assert!(
            opened(&format!("preset = \"{}\"", preset.name)) >= 1,
            "{}: 1,000 loading replies opened no breaker",
            preset.name
        );
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

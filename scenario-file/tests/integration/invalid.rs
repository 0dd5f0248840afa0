//! Invalid scenario files: each is rejected, without a panic, with a message that names the
//! file, line, column and key, and says what is wrong.

use std::path::Path;

/// A small valid scenario; cases change or add to it.
const BASE: &str = r#"[scenario]
name = "t"

[servers.redis]

[connections.c]
server = "redis"
command_timeout = "100ms"

[keys.k]

[databases.db]
latency = "10ms"

[flows.f]
steps = [{ redis = { command = "GET", connection = "c", key = "k" }, on_error = "next" }, { db = { name = "db" } }]

[loads.l]
flow = "f"
arrivals = "even"
rate = 10
count = 5
"#;

/// Rejects `text` with a first message equal to `t.toml:{expected}` (an `expected` that starts
/// with a space is a problem of the whole file, which has no line).
/// Checks every case and reports all that failed at once, not just the first.
fn check_all(cases: &[(String, &str)]) {
    let mut wrong = Vec::new();
    for (text, expected) in cases {
        if std::panic::catch_unwind(|| check(text, expected)).is_err() {
            wrong.push(expected);
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases failed: {wrong:#?}",
        wrong.len(),
        cases.len()
    );
}

fn check(text: &str, expected: &str) {
    let outcome =
        std::panic::catch_unwind(|| outagelab_scenario_file::parse(text, Path::new("t.toml")));
    let Ok(result) = outcome else {
        panic!("parsing panicked on:\n{text}");
    };
    let diagnostics = match result {
        Ok(_) => panic!("accepted, but expected `{expected}`:\n{text}"),
        Err(diagnostics) => diagnostics,
    };
    let first = diagnostics.0[0].to_string();
    assert_eq!(first, format!("t.toml:{expected}"), "all: {diagnostics}");
}

/// BASE with `old` replaced by `new`.
fn with(old: &str, new: &str) -> String {
    assert!(BASE.contains(old), "BASE has no `{old}`");
    BASE.replacen(old, new, 1)
}

/// `count` `[[variant]]` entries, two lines each: `name = "v0"`, `"v1"`, ...
fn variants(count: usize) -> String {
    (0..count)
        .map(|index| format!("[[variant]]\nname = \"v{index}\"\n"))
        .collect()
}

/// A one-line array of `count` swept counts: `[0, 1, 2, ...]`.
fn sweep_values(count: usize) -> String {
    let values: Vec<String> = (0..count).map(|value| value.to_string()).collect();
    format!("[{}]", values.join(", "))
}

/// Accepts `text` with a warning equal to `t.toml:{expected}` among its warnings.
fn check_warning(text: &str, expected: &str) {
    let file = outagelab_scenario_file::parse(text, Path::new("t.toml"))
        .unwrap_or_else(|diagnostics| panic!("refused: {diagnostics}\n{text}"));
    check_warning_in(file, &format!("t.toml:{expected}"));
}

/// `file` has a warning that reads `expected`.
fn check_warning_in(file: outagelab_scenario_file::ScenarioFile, expected: &str) {
    let warnings: Vec<String> = file.warnings.iter().map(ToString::to_string).collect();
    assert!(
        warnings.iter().any(|w| w == expected),
        "expected `{expected}`, warned: {warnings:#?}"
    );
}

/// Accepts `text` without a warning.
fn check_silent(text: &str) {
    let file = outagelab_scenario_file::parse(text, Path::new("t.toml"))
        .unwrap_or_else(|diagnostics| panic!("refused: {diagnostics}\n{text}"));
    let warnings: Vec<String> = file.warnings.iter().map(ToString::to_string).collect();
    assert!(warnings.is_empty(), "warned: {warnings:#?}\n{text}");
}

#[test]
fn the_base_is_valid() {
    let file = outagelab_scenario_file::parse(BASE, Path::new("t.toml")).unwrap();
    assert_eq!(file.variants.len(), 1);
    check_silent(BASE);
}

/// BASE with one `[[variant]]` named "v" whose patch is `patch`, and `header` lines before it.
fn with_variant(header: &str, patch: &str) -> String {
    format!("{BASE}\n[[variant]]\nname = \"v\"\n{header}patch = {patch}\n")
}

#[test]
fn warned_files() {
    let cases: Vec<(String, &str)> = vec![
        (
            with_variant("", r#"{ servers = { replica = { hz = 5 } } }"#),
            "26:23: variant \"v\" patch.servers.replica: the base file has no servers.replica, so this patch creates it: if it should, say so with creates = [\"servers.replica\"] in the variant",
        ),
        (
            // A whole section the base has none of.
            with_variant(
                "",
                r#"{ caches = { l1 = { max_entries = 10, max_bytes = "1MiB", ttl = "1s" } } }"#,
            ),
            "26:22: variant \"v\" patch.caches.l1: the base file has no caches.l1, so this patch creates it: if it should, say so with creates = [\"caches.l1\"] in the variant",
        ),
        (
            // Declared, the creation is no longer a warning; that nothing uses it still is.
            with_variant(
                "creates = [\"servers.replica\"]\n",
                r#"{ servers = { replica = { hz = 5 } } }"#,
            ),
            "27:23: servers.replica: nothing uses this server: nothing names it (remove it, or name it where it should be used)",
        ),
        (
            format!("{BASE}\n[caches.l1]\nmax_entries = 10\nmax_bytes = \"1MiB\"\nttl = \"1s\"\n"),
            "24:9: caches.l1: nothing uses this cache: nothing names it (remove it, or name it where it should be used)",
        ),
        (
            // The limiter is unused; its store is named (by the limiter), so only one warning.
            format!(
                "{BASE}\n[connections.store]\nserver = \"redis\"\n\n[rate_limits.api]\ncapacity = 5\nrate = 1.0\nstore = \"store\"\n"
            ),
            "27:14: rate_limits.api: nothing uses this rate limiter: nothing names it (remove it, or name it where it should be used)",
        ),
        (
            // With variants, a resource is unused when no variant names it.
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\n{}",
                variants(2)
            ),
            "24:11: breakers.b: no variant uses this breaker: nothing names it (remove it, or name it where it should be used)",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, expected) in &cases {
        if std::panic::catch_unwind(|| check_warning(text, expected)).is_err() {
            wrong.push(expected);
        }
    }
    assert!(wrong.is_empty(), "{} cases failed: {wrong:#?}", wrong.len());
}

/// Issue 31: a limiter with a store has a bucket per key, so a family left at its default of
/// one key is one bucket for everyone, which a file must say (`count = 1`).
#[test]
fn a_stored_limit_on_a_family_of_one_unstated_key_says_it_is_one_bucket_for_everyone() {
    let limited = |keys: &str| {
        with(
            "[keys.k]\n",
            &format!("{keys}\n[rate_limits.api]\ncapacity = 20\nrate = 20\nstore = \"c\"\n"),
        )
        .replacen(
            "steps = [",
            "steps = [{ rate_limit = { name = \"api\", key = \"k\" }, on_error = \"next\" }, ",
            1,
        )
    };
    check_warning(
        &limited("[keys.k]\n"),
        "21:47: flows.f.steps[0].rate_limit.key: checks one bucket for everyone: the limiter \
         keeps a bucket per key and `keys.k` has one key (no count); write `count = 1` there to \
         mean one limit for the whole service, or the number of clients (`count = 1000`) for a \
         limit per client",
    );
    check_silent(&limited("[keys.k]\ncount = 1\n"));
    check_silent(&limited("[keys.k]\ncount = 1000\n"));
}

#[test]
fn a_step_that_can_fail_and_is_not_last_says_what_an_error_does() {
    let implicit = "can fail and has no on_error: an error here ends the request (fail-closed, the default); write on_error = \"fail\" to say so, or \"next\" to go on without it (fail-open)";
    // BASE with `first` as a step before its own.
    let step = |first: &str| with("steps = [", &format!("steps = [{first}, "));
    check_warning(
        &step(r#"{ redis = { command = "GET", connection = "c", key = "k" } }"#),
        &format!("16:10: flows.f.steps[0]: {implicit}"),
    );
    // Local work cannot fail, but a bulkhead around it can shed it.
    check_warning(
        &(step(r#"{ work = "1ms", bulkhead = "b" }"#)
            + "\n[bulkheads.b]\nmax_concurrent = 1\nqueue = 0\n"),
        &format!("16:10: flows.f.steps[0]: {implicit}"),
    );
    // Said, or unable to fail, or the last step (whose error ends the request either way).
    let retry = "\n[retries.r]\nmax_attempts = 2\nbackoff = \"1ms\"\nretry_on = [\"timeout\"]\n";
    check_silent(&step(
        r#"{ redis = { command = "GET", connection = "c", key = "k" }, on_error = "fail" }"#,
    ));
    check_silent(&step(r#"{ work = "1ms" }"#));
    // A retry only repeats what fails inside it.
    check_silent(&(step(r#"{ work = "1ms", retry = "r" }"#) + retry));
}

#[test]
fn error_routing_names_each_step_that_can_fail_and_what_an_error_there_does() {
    let file = outagelab_scenario_file::parse(BASE, Path::new("t.toml")).unwrap();
    assert_eq!(
        outagelab_scenario_file::error_routing(&file.variants[0].scenario),
        [(
            "f".to_owned(),
            "GET c -> next (fail-open); db db -> fail".to_owned()
        )]
    );
    let text = with(
        "{ db = { name = \"db\" } }",
        "{ work = \"1ms\" }, { redis = { command = \"SET\", connection = \"c\", key = \"k\" }, on_error = \"ignore\" }, { redis = { command = \"GET\", connection = \"c\", key = \"k\" } }",
    );
    let file = outagelab_scenario_file::parse(&text, Path::new("t.toml")).unwrap();
    assert_eq!(
        outagelab_scenario_file::error_routing(&file.variants[0].scenario),
        [(
            "f".to_owned(),
            "GET c (step 0) -> next (fail-open); SET c -> ignore (fire-and-forget); GET c (step 3) -> fail"
                .to_owned()
        )],
        "work cannot fail; two steps that read alike are numbered"
    );
}

#[test]
fn what_is_used_somewhere_or_declared_is_not_warned_about() {
    let breaker = "\n[breakers.b]\nenabled = false\nfailures = 5\nopen_for = \"5s\"\n";
    // A disabled breaker that a step names is used: a variant may enable it.
    check_silent(&format!(
        "{}{breaker}",
        with(
            "{ db = { name = \"db\" } }",
            "{ db = { name = \"db\" }, breaker = \"b\" }"
        )
    ));
    // Named in one variant only: used.
    check_silent(&format!(
        "{BASE}{breaker}\n[[variant]]\nname = \"base\"\n\n[[variant]]\nname = \"guarded\"\n[variant.patch.flows.f.steps.1]\nbreaker = \"b\"\n"
    ));
    // A fault is a root: nothing names it, and a variant that creates one says so.
    check_silent(&with_variant(
        "creates = [\"faults.down\"]\n",
        r#"{ faults = { down = { target = "redis", kind = "stop", at = "1s" } } }"#,
    ));
}

#[test]
fn rejected_files() {
    let cases: Vec<(String, &str)> = vec![
        (
            with("[servers.redis]", "[servers.redis"),
            "4:15: not valid TOML: unclosed table, expected `]`",
        ),
        (
            with("[servers.redis]", "[servers.redis]\ncost = \"5us\""),
            "5:1: servers.redis.cost: unknown field `cost`, expected one of `command_cost`, `byte_rate`, `persistence`, `preload`, `key_bytes`, `key_overhead`, `maxmemory`, `maxmemory_policy`, `maxmemory_samples`, `maxmemory_exact`, `hz`, `replica_of`, `replication_lag`",
        ),
        (
            with("name = \"t\"", "seed = 3"),
            "1:1: scenario: missing field `name`, which `[scenario]` requires: the scenario's \
             name in reports and chart titles (docs/scenario-format.md)",
        ),
        (
            with("command_timeout = \"100ms\"", "command_timeout = 100"),
            "8:19: connections.c.command_timeout: `100` has no unit: write it as a string with a unit, e.g. \"100ms\"",
        ),
        (
            with(
                "command_timeout = \"100ms\"",
                "command_timeout = \"100 parsecs\"",
            ),
            "8:19: connections.c.command_timeout: `100 parsecs` has an unknown unit `parsecs`: write a number and a unit (ns, us, ms, s, m, h), e.g. \"100ms\" or \"1.5s\"",
        ),
        (
            with("command_timeout = \"100ms\"", "command_timeout = \"0s\""),
            "8:19: connections.c.command_timeout: must be longer than zero (every command would fail; leave it out to wait forever)",
        ),
        (
            with("command_timeout = \"100ms\"", "pending_max = 0"),
            "8:15: connections.c.pending_max: must be at least 1 (every command would be shed; leave it out for no limit)",
        ),
        (
            with("latency = \"10ms\"", "latency = \"10ms\"\ncapacity = 0"),
            "14:12: databases.db.capacity: must be at least 1 (a database of zero capacity runs nothing; leave it out for no limit)",
        ),
        (
            with(
                "latency = \"10ms\"",
                "latency = \"10ms\"\nmax_connections = 0",
            ),
            "14:19: databases.db.max_connections: must be at least 1 (a database with no connection runs nothing; leave it out for no limit)",
        ),
        (
            with(
                "latency = \"10ms\"",
                "latency = \"10ms\"\nconnection_queue = 5",
            ),
            "14:20: databases.db.connection_queue: needs `max_connections`: without a limit no query waits for a connection",
        ),
        (
            with(
                "latency = \"10ms\"",
                "latency = \"10ms\"\nmax_connections = 2\nconnection_queue = -1",
            ),
            "15:20: databases.db.connection_queue: must be at least 0 (the queries that may wait for a connection)",
        ),
        (
            with(
                "latency = \"10ms\"",
                "latency = \"10ms\"\ncollapse = { above = 5, throughput_percent = 100, recover_below = 2 }",
            ),
            "14:46: databases.db.collapse.throughput_percent: must be at most 99, not 100",
        ),
        (
            with(
                "latency = \"10ms\"",
                "latency = \"10ms\"\ncollapse = { above = 5, throughput_percent = 50, recover_below = 5 }",
            ),
            "14:66: databases.db.collapse.recover_below: must be less than `above` (5): a database recovers once load falls below where it collapsed",
        ),
        (
            with("rate = 10", "rate = -5"),
            "21:8: loads.l.rate: must be a positive number of requests per second, not -5",
        ),
        (
            with("rate = 10", "rate = nan"),
            "21:8: loads.l.rate: must be a positive number of requests per second, not NaN",
        ),
        (
            with("server = \"redis\"", "server = \"redsi\""),
            "7:10: connections.c.server: unknown server `redsi`: did you mean `redis`? (defined: redis)",
        ),
        (
            with("flow = \"f\"", "flow = \"g\""),
            "19:8: loads.l.flow: unknown flow `g` (defined: f)",
        ),
        (
            format!("{BASE}\n[run]\nhorizon = \"99999999999h\"\n"),
            "25:11: run.horizon: `99999999999h` is too large to fit (at most 18446744073709551615 nanoseconds)",
        ),
        (
            format!("{BASE}\n[run]\nmemory_max = \"0MiB\"\n"),
            "25:14: run.memory_max: must be more than zero (a run holds its requests and its series)",
        ),
        (
            format!("{BASE}\n[bulkheads.b]\nmax_concurrent = 0\nqueue = 5\n"),
            "25:18: bulkheads.b.max_concurrent: must be at least 1 (a bulkhead of zero sheds everything)",
        ),
        (
            format!("{BASE}\n[breakers.b]\nfailures = 0\nopen_for = \"5s\"\n"),
            "25:12: breakers.b.failures: must be at least 1 (a breaker that opens on zero failures never closes)",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\ncounts = [\"timeout\", \"ok\"]\n"
            ),
            "27:22: breakers.b.counts: `ok` is a success, not an error",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\ncounts = [\"timeout\", \"loading\"]\nignores = [\"loading\"]\n"
            ),
            "28:12: breakers.b.ignores: `loading` is in counts too: an error is either counted or ignored",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\npreset = \"opossum\"\nfailures = 5\nthreshold = \"exceeded\"\n"
            ),
            "27:13: breakers.b.threshold: compares a failure rate: it needs failure_rate, not consecutive failures",
        ),
        (
            format!("{BASE}\n[breakers.b]\npreset = \"opossum\"\nwarm_up = \"soon\"\n"),
            "26:11: breakers.b.warm_up: `soon` has an unknown unit `soon`: write a number and a unit (ns, us, ms, s, m, h), e.g. \"100ms\" or \"1.5s\"",
        ),
        (
            format!("{BASE}\n[breakers.b]\npreset = \"gobreaker\"\nignores = [\"loadin\"]\n"),
            "26:12: breakers.b.ignores: unknown outcome `loadin`: did you mean `loading`? (outcomes: timeout, refused, connection_lost, breaker_open, shed, server_error, lock_busy, rate_limited, lock_timeout, oom, readonly, loading, wrongtype; or a status class, 4xx or 5xx)",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\" }, redis = { command = \"GET\", connection = \"c\", key = \"k\" } }",
            ),
            "16:115: flows.f.steps[1].redis: a step has one action (`redis`, `db`, `work`, `call`, `cache`, `throttle`, `rate_limit`, `lock`), and this one already has `db`: give each action a step of its own",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ redis = { command = \"SET NX PX\", connection = \"c\", key = \"k\" } }",
            ),
            "16:113: flows.f.steps[1].redis.ttl: SET NX PX needs a ttl (the PX argument)",
        ),
        (
            with("command = \"GET\"", "command = \"GETT\""),
            "16:32: flows.f.steps[0].redis.command: unknown variant `GETT`: did you mean `GET`? (expected one of `GET`, `SET`, `SET NX PX`, `INCR`, `DEL`, `PUBLISH`)",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\" }, on_hit = \"finish\" }",
            ),
            "16:124: flows.f.steps[1].on_hit: applies to a step that can hit only: a Redis GET or a cache get",
        ),
        (
            with(
                "latency = \"10ms\"",
                "latency = { distribution = \"uniform\", min = \"20ms\", max = \"10ms\" }",
            ),
            "13:45: databases.db.latency.min: 20ms is above max 10ms",
        ),
        (
            with(
                "[connections.c]",
                "[connections.c]\nreconnect_delay = \"5s\"",
            ),
            "7:19: connections.c.reconnect_delay: 5s is above reconnect_delay_max 2s",
        ),
        (
            with("[servers.redis]", "[servers.\"re.dis\"]"),
            "4:10: servers.re.dis: a name may hold only letters, digits, `_` and `-` (it is used in metric paths)",
        ),
        (
            format!("{BASE}\n[faults.down]\ntarget = \"db\"\nkind = \"stop\"\nat = \"1s\"\n"),
            "25:10: faults.down.target: a `stop` fault acts on Redis: a database takes `slow`, `refuse`, `pool_exhausted` or `lock_held`",
        ),
        (
            format!(
                "{BASE}\n[run]\nhorizon = \"2s\"\n[faults.down]\ntarget = \"redis\"\nkind = \"stop\"\nat = \"60s\"\n"
            ),
            "29:6: faults.down.at: starts at 60s, after the horizon 2s: it would never happen",
        ),
        (
            with(
                "name = \"t\"",
                "name = \"t\"\nexpect = [\"databases.nope.peak_concurrency < 3\"]",
            ),
            "3:11: expect: unknown metric `databases.nope.peak_concurrency`: `databases` has no `nope` (it has: db)",
        ),
        (
            with(
                "name = \"t\"",
                "name = \"t\"\nexpect = [\"outcomes.ok => 3\"]",
            ),
            "3:11: expect: `=>` is not a comparison: use <, <=, ==, !=, >= or >",
        ),
        (
            format!(
                "{BASE}\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"b\"\npatch = {{ loads = {{ l = {{ rate = 0 }} }} }}\n"
            ),
            "28:34: loads.l.rate: must be a positive number of requests per second, not 0 (in variant \"b\")",
        ),
        (
            format!("{BASE}\n[[variant]]\nname = \"a\"\n[[variant]]\nname = \"a\"\n"),
            "27:8: variant[1].name: two variants are named \"a\"",
        ),
        (
            format!("{BASE}\n[sweep]\nparameter = \"loads.nope.count\"\nvalues = [1, 2]\n"),
            "25:13: sweep.parameter: the scenario has no `loads.nope`, so `loads.nope.count` cannot be set",
        ),
        (
            with(
                "[loads.l]\nflow = \"f\"\narrivals = \"even\"\nrate = 10\ncount = 5\n",
                "",
            ),
            " loads: the scenario has no [loads.<name>] table: nothing would run",
        ),
        (
            with("count = 5", "count = 5\nduration = \"1s\""),
            "22:9: loads.l.count: give exactly one of `count` or `duration`",
        ),
        (
            format!("{BASE}\n[semaphores.s]\nmax_in_flight = 0\n"),
            "25:17: semaphores.s.max_in_flight: must be at least 1 (a cap of zero drops every write; leave it out for no cap)",
        ),
        (
            format!("{BASE}\n[semaphores.s]\n"),
            "24:13: semaphores.s.max_in_flight: or max_bytes must be set (a semaphore with neither cap bounds nothing)",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nbackoff_max = \"9s\"\nbackoff_factor = 2\nbackoff_growth = \"fibonacci\"\n"
            ),
            "28:18: retries.r.backoff_factor: a Fibonacci backoff has no factor: each delay is the sum of the two before it",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nbackoff_growth = \"fibonacci\"\n"
            ),
            "27:18: retries.r.backoff_max: a growing backoff (fibonacci) needs backoff_max, its ceiling",
        ),
        (
            format!("{BASE}\n[retries.r]\nmax_attempts = 0\nbackoff = \"1s\"\n"),
            "25:16: retries.r.max_attempts: must be at least 1 (it counts the first attempt; 1 means never retry)",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nbackoff_factor = nan\n"
            ),
            "27:18: retries.r.backoff_factor: NaN is not a non-negative number with at most 3 decimals",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nretry_on = [\"okay\"]\n"
            ),
            "27:13: retries.r.retry_on: unknown outcome `okay` (outcomes: timeout, refused, connection_lost, breaker_open, shed, server_error, lock_busy, rate_limited, lock_timeout, oom, readonly, loading, wrongtype; or a status class, 4xx or 5xx)",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\" }, retry = \"nope\" }",
            ),
            "16:123: flows.f.steps[1].retry: unknown retry policy `nope`: the scenario defines none",
        ),
        (
            format!("{BASE}\n[caches.l1]\nmax_entries = 0\nmax_bytes = \"1MiB\"\nttl = \"1s\"\n"),
            "25:15: caches.l1.max_entries: must be at least 1 (a cache of zero entries stores nothing; leave the L1 out)",
        ),
        (
            format!(
                "{BASE}\n[caches.l1]\nmax_entries = 10\nmax_bytes = \"1MiB\"\nttl = \"1s\"\n[flows.g]\nsteps = [{{ cache = {{ name = \"l1\", op = \"fetch\", key = \"k\" }} }}]\n"
            ),
            "29:40: flows.g.steps[0].cache.op: unknown variant `fetch`, expected one of `get`, `put`, `invalidate`, `flush`",
        ),
        (
            format!("{BASE}\n[rate_limits.rl]\ncapacity = 10\nrate = -1\n"),
            "26:8: rate_limits.rl.rate: must be a positive number of requests per second, not -1",
        ),
        (
            format!("{BASE}\n[rate_limits.rl]\ncapacity = 0\nrate = 1\n"),
            "25:12: rate_limits.rl.capacity: must be at least 1 (a bucket that holds no token rejects every request)",
        ),
        (
            format!("{BASE}\n[kv_stores.cf]\nread_latency = \"-1ms\"\nwrite_latency = \"30ms\"\n"),
            "25:16: kv_stores.cf.read_latency: `-1ms` is negative: write a number and a unit (ns, us, ms, s, m, h), e.g. \"100ms\" or \"1.5s\"",
        ),
        (
            format!("{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 0\n"),
            "26:16: throttles.t.inflight_max: must be at least 1 (a cap of zero rejects every write)",
        ),
        (
            format!("{BASE}\n[throttles.t]\nform = \"kv\"\ninflight_max = 10\n"),
            "25:8: throttles.t.store: a KV throttle needs a store: a [kv_stores.<name>]",
        ),
        (
            format!(
                "{BASE}\n[kv_stores.cf]\nread_latency = \"1ms\"\nwrite_latency = \"1ms\"\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\nstore = \"cf\"\n"
            ),
            "30:9: throttles.t.store: an atomic throttle keeps no store (its check-and-increment is one step)",
        ),
        (
            format!("{BASE}\n[throttles.t]\nform = \"kv\"\ninflight_max = 10\nstore = \"nope\"\n"),
            "27:9: throttles.t.store: unknown KV store `nope`: the scenario defines none",
        ),
        (
            format!(
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\nrelease_loss_percent = 200\n"
            ),
            "27:24: throttles.t.release_loss_percent: 200 is not a percentage from 0 to 100, to 0.1%",
        ),
        (
            format!(
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\nttl_mode = \"fixed\"\n"
            ),
            "27:12: throttles.t.ttl_mode: says how counter_ttl applies, but there is no counter_ttl (leave both out for a counter that never expires)",
        ),
        (
            format!(
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\n[flows.g]\nsteps = [{{ throttle = {{ name = \"t\", key = \"k\" }} }}]\n"
            ),
            "28:23: flows.g.steps[0].throttle: missing field `op`, which a step's `throttle` \
             requires: `\"acquire\"`: a slot of the request's key (or fail with \
             `rate_limited`); `\"release\"`: give it back (docs/scenario-format.md)",
        ),
        (
            format!(
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\n[flows.g]\nsteps = [{{ throttle = {{ name = \"t\", op = \"get\", key = \"k\" }} }}]\n"
            ),
            "28:42: flows.g.steps[0].throttle.op: unknown variant `get`, expected `acquire` or `release`",
        ),
        (
            format!(
                "{BASE}\n[flows.g]\nsteps = [{{ throttle = {{ name = \"t\", op = \"acquire\", key = \"k\" }} }}]\n"
            ),
            "25:32: flows.g.steps[0].throttle.name: unknown throttle `t`: the scenario defines none",
        ),
        (
            format!(
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\n[flows.g]\nsteps = [{{ throttle = {{ name = \"t\", op = \"acquire\" }} }}]\n"
            ),
            "28:23: flows.g.steps[0].throttle: missing field `key`, which a step's `throttle` \
             requires: the family of the request's key, whose slots it counts \
             (docs/scenario-format.md)",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\" }, op = \"get\" }",
            ),
            "16:115: flows.f.steps[1].op: belongs inside the action's table (`cache`, `throttle`, `lock`), e.g. cache = { …, op = … }",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\", lock = \"nope\" } }",
            ),
            "16:120: flows.f.steps[1].db.lock: unknown key family `nope` (defined: k)",
        ),
        (
            with("[loads.l]", "[loads.l]\nenabled = false"),
            " loads: every load is disabled (`enabled = false`): nothing would run",
        ),
        (
            with(
                "command_timeout = \"100ms\"",
                "command_timeout = \"100ms\"\nreconnect = \"slot\"\noffline_queue = true",
            ),
            "10:17: connections.c.offline_queue: a reconnect slot has no offline queue: a command runs on the live connection or fails at once",
        ),
        (
            with(
                "command_timeout = \"100ms\"",
                "command_timeout = \"100ms\"\nreconnect = \"slot\"\nmax_retries = 3",
            ),
            "10:15: connections.c.max_retries: a reconnect slot carries no command over a lost connection (a read-only one is replayed once on a fresh connection)",
        ),
        (
            with(
                "command_timeout = \"100ms\"",
                "command_timeout = \"100ms\"\nreconnect = \"slot\"\nreconnect_delay = \"10s\"",
            ),
            "10:19: connections.c.reconnect_delay: 10s is above reconnect_delay_max 5s",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\" }, replay_writes = true }",
            ),
            "16:115: flows.f.steps[1].replay_writes: belongs inside the action's table (`redis`, `rate_limit`), e.g. redis = { …, replay_writes = … }",
        ),
        (
            with(
                "count = 5",
                "count = 5\n\n[faults.k]\ntarget = \"redis\"\nkind = \"kill\"\nat = \"1s\"\nduration = \"1s\"",
            ),
            "28:12: faults.k.duration: a kill happens at one instant (the server keeps running): leave duration out",
        ),
        // Redis memory: the eviction settings and the memory faults.
        (
            with("[servers.redis]", "[servers.redis]\nmaxmemory_samples = 0"),
            "5:21: servers.redis.maxmemory_samples: must be at least 1 (an eviction looks at one key at least)",
        ),
        (
            with(
                "[servers.redis]",
                "[servers.redis]\nmaxmemory_policy = \"allkeys-lfu\"",
            ),
            "5:20: servers.redis.maxmemory_policy: unknown policy `allkeys-lfu`: did you mean `allkeys-lru`? (policies: noeviction, allkeys-lru, volatile-lru, allkeys-random, volatile-ttl)",
        ),
        (
            with(
                "[servers.redis]",
                "[servers.redis]\nmaxmemory_samples = 10\nmaxmemory_exact = true",
            ),
            "6:19: servers.redis.maxmemory_exact: exact eviction looks at every candidate key: leave maxmemory_samples out",
        ),
        (
            with(
                "[servers.redis]",
                "[servers.redis]\nkey_overhead = \"1GiB\"",
            ),
            "5:16: servers.redis.key_overhead: 1073741824 bytes is above 512MiB, more than a key of Redis takes",
        ),
        (
            with("[servers.redis]", "[servers.redis]\nhz = 0"),
            "5:6: servers.redis.hz: must be at least 1 (Redis' cron runs at least once a second)",
        ),
        (
            with(
                "count = 5",
                "count = 5\n\n[faults.m]\ntarget = \"redis\"\nkind = \"maxmemory\"\nat = \"1s\"\nmaxmemory = \"30MiB\"\nduration = \"1s\"",
            ),
            "29:12: faults.m.duration: a maxmemory change happens at one instant (the new limit stays): leave duration out",
        ),
        (
            with(
                "count = 5",
                "count = 5\n\n[faults.m]\ntarget = \"redis\"\nkind = \"maxmemory\"\nat = \"1s\"",
            ),
            "26:8: faults.m.maxmemory: a `maxmemory` fault sets a new limit: give it, e.g. `maxmemory = \"30MiB\"` (0 lifts the limit)",
        ),
        (
            with(
                "count = 5",
                "count = 5\n\n[faults.h]\ntarget = \"redis\"\nkind = \"hang\"\nat = \"1s\"\nmode = \"write\"",
            ),
            "28:8: faults.h.mode: only a `pause` fault takes `mode`, not a `hang` one (a `hang` fault takes no keys of its own)",
        ),
        (
            with(
                "count = 5",
                "count = 5\n\n[faults.e]\ntarget = \"redis\"\nkind = \"error_reply\"\nat = \"1s\"",
            ),
            "26:8: faults.e.error: an `error_reply` fault needs the error it answers with: one of oom, readonly, loading, wrongtype",
        ),
        (
            with(
                "count = 5",
                "count = 5\n\n[faults.e]\ntarget = \"redis\"\nkind = \"error_reply\"\nat = \"1s\"\nerror = \"moved\"",
            ),
            "28:9: faults.e.error: unknown error reply `moved` (errors: oom, readonly, loading, wrongtype)",
        ),
        // A step's action is a table under the action's name; its keys go nowhere else.
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ redis = \"GET\", connection = \"c\", key = \"k\" }",
            ),
            "16:108: flows.f.steps[1].connection: belongs inside the action's table (`redis`, `lock`), e.g. redis = { …, connection = … }",
        ),
        (
            with("{ db = { name = \"db\" } }", "{ redis = \"GET\" }"),
            "16:101: flows.f.steps[1].redis: invalid type: string \"GET\", expected a table such as redis = { command = \"GET\", connection = \"cache\", key = \"product\" }",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\", connection = \"c\" } }",
            ),
            "16:113: flows.f.steps[1].db.connection: unknown field `connection`, expected one of `name`, `timeout`, `latency`, `lock`, `key`, `write`",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\", write = true } }",
            ),
            "16:121: flows.f.steps[1].db.write: a write commits a new version of a key: give the key family it writes (`key = \"...\"`)",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\", key = \"kk\" } }",
            ),
            "16:119: flows.f.steps[1].db.key: unknown key family `kk` (defined: k)",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { name = \"db\" }, timeout = \"1s\" }",
            ),
            "16:115: flows.f.steps[1].timeout: belongs inside the action's table (`db`), e.g. db = { …, timeout = … }",
        ),
        (
            with("{ db = { name = \"db\" } }", "{ on_error = \"next\" }"),
            "16:91: flows.f.steps[1]: a step has no action: give it one of `redis`, `db`, `work`, `call`, `cache`, `throttle`, `rate_limit`, `lock`",
        ),
        (
            with(
                "{ db = { name = \"db\" } }",
                "{ db = { timeout = \"1s\" } }",
            ),
            "16:98: flows.f.steps[1].db: missing field `name`, which a step's `db` requires: the \
             database the query runs on (docs/scenario-format.md)",
        ),
        (
            with("key = \"k\" }", "key = \"k\", value = \"1KiB\" }"),
            "16:76: flows.f.steps[0].redis.value: applies to SET and SET NX PX only: this command writes no value",
        ),
        (
            format!(
                "{BASE}\n[rate_limits.rl]\ncapacity = 10\nrate = 1\n[flows.g]\nsteps = [{{ rate_limit = {{ name = \"rl\", replay_writes = true }} }}]\n"
            ),
            "28:56: flows.g.steps[0].rate_limit.replay_writes: applies to a rate limiter with a store: a local one sends no command a reconnect slot could replay",
        ),
        (
            format!(
                "{BASE}\n[caches.l1]\nmax_entries = 10\nmax_bytes = \"1MiB\"\nttl = \"1s\"\n[flows.g]\nsteps = [{{ cache = {{ name = \"l1\", op = \"flush\", key = \"k\" }} }}]\n"
            ),
            "29:55: flows.g.steps[0].cache.key: a flush empties the whole cache: it takes no key",
        ),
        // A patch of one step's action merges into the action's table.
        (
            format!(
                "{BASE}\n[[variant]]\nname = \"a\"\n[variant.patch.flows.f.steps.0.redis]\nconnection = \"nope\"\n"
            ),
            "27:14: flows.f.steps[0].redis.connection: unknown connection `nope` (defined: c)",
        ),
        (
            format!(
                "{BASE}\n[[variant]]\nname = \"a\"\n[variant.patch.flows.f.steps.1]\nwork = \"1ms\"\n"
            ),
            "27:1: flows.f.steps[1].work: a step has one action (`redis`, `db`, `work`, `call`, `cache`, `throttle`, `rate_limit`, `lock`), and this one already has `db`: give each action a step of its own",
        ),
        // A breaker has one rule: `failures` or `failure_rate`, whose window is one of two.
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nfailure_rate = {{ percent = 50, window_calls = 20, min_calls = 20 }}\nopen_for = \"5s\"\n"
            ),
            "25:1: breakers.b.failures: a breaker has one rule (`failures`, `failure_rate`), and this one already has `failure_rate`: give failures (consecutive) or failure_rate, not both",
        ),
        (
            format!("{BASE}\n[breakers.b]\nopen_for = \"5s\"\n"),
            "24:11: breakers.b: a breaker has no rule: give it one of `failures`, `failure_rate`, or a preset",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate_percent = 50\nwindow_calls = 20\nmin_calls = 20\nopen_for = \"5s\"\n"
            ),
            "25:1: breakers.b.failure_rate_percent: unknown field `failure_rate_percent`, expected one of `enabled`, `preset`, `failures`, `failure_rate`, `open_for`, `half_open_probes`, `counts`, `ignores`, `late_failures`, `half_open_rule`, `uncounted_as`, `half_open_max_wait`, `warm_up`, `open_for_factor`, `open_for_max`, `evaluate_on`, `threshold`, `slow_call_duration`, `slow_call_percent`",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\nlate_failures = \"reopen\"\n"
            ),
            "27:17: breakers.b.late_failures: unknown variant `reopen`, expected `ignored` or `counted`",
        ),
        (
            BASE.replace("name = \"t\"\n", "name = \"t\"\nseeds = \"1-20\"\n"),
            "3:9: scenario.seeds: `1-20` is not a seed range: write it as A..B, e.g. 1..20",
        ),
        (
            format!("{BASE}\n[http]\nstatus = {{ timout = 504 }}\n"),
            "25:21: http.status.timout: unknown outcome `timout`; did you mean `timeout`?",
        ),
        (
            format!("{BASE}\n[http]\nstatus = {{ ok = 503 }}\n"),
            "25:17: http.status.ok: must be at most 299, not 503",
        ),
        (
            format!("{BASE}\n[http]\nstatus = {{ timeout = 99 }}\n"),
            "25:22: http.status.timeout: must be at least 200 (an HTTP status code)",
        ),
        (
            format!("{BASE}\n[breakers.b]\nfailures = 5\nmin_calls = 20\nopen_for = \"5s\"\n"),
            "26:1: breakers.b.min_calls: belongs inside the rule's table (`failure_rate`), e.g. failure_rate = { …, min_calls = … }",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate = {{ percent = 50, window_calls = 20, window = \"10s\", min_calls = 20 }}\nopen_for = \"5s\"\n"
            ),
            "25:32: breakers.b.failure_rate.window_calls: a failure rate has one window (`window_calls`, `window`), and this one already has `window`: give window_calls (the last N calls) or window (a duration), not both",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate = {{ percent = 50, min_calls = 20 }}\nopen_for = \"5s\"\n"
            ),
            "25:16: breakers.b.failure_rate: a failure rate has no window: give it one of `window_calls`, `window`",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate = {{ percent = 50, window_calls = 20, window_slots = 5, min_calls = 20 }}\nopen_for = \"5s\"\n"
            ),
            "25:66: breakers.b.failure_rate.window_slots: applies to a time window (window), not to window_calls",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate = {{ percent = 12.34, window_calls = 20, min_calls = 20 }}\nopen_for = \"5s\"\n"
            ),
            "25:28: breakers.b.failure_rate.percent: 12.34 is not a percentage from 0 to 100, to 0.1%",
        ),
        (
            // The default of 10 slots must divide the window too; the error points at the window.
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate = {{ percent = 50, window = \"15ns\", min_calls = 1 }}\nopen_for = \"5s\"\n"
            ),
            "25:41: breakers.b.failure_rate.window_slots: 10 slots do not divide window_length 15ns into whole nanoseconds",
        ),
        // Presets and the knobs other libraries need.
        (
            format!("{BASE}\n[breakers.b]\npreset = \"hystrix\"\n"),
            "25:10: breakers.b.preset: unknown breaker preset `hystrix` (presets: resilience4j, polly-v8, polly-v7-advanced, opossum, gobreaker)",
        ),
        (
            format!("{BASE}\n[breakers.b]\nfailures = 5\n"),
            "24:11: breakers.b.open_for: missing: give open_for, or a preset",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\nhalf_open_rule = \"failure_rate\"\n"
            ),
            "27:18: breakers.b.half_open_rule: \"failure_rate\" holds the probes to the failure_rate rule's percent, and this breaker opens on consecutive failures: give it failure_rate, or keep \"all_probes_succeed\"",
        ),
        (
            // The preset's half-open rule needs the rate the file replaced: the error points
            // at the preset, which gave the value.
            format!("{BASE}\n[breakers.b]\npreset = \"resilience4j\"\nfailures = 5\n"),
            "25:10: breakers.b.half_open_rule: \"failure_rate\" holds the probes to the failure_rate rule's percent, and this breaker opens on consecutive failures: give it failure_rate, or keep \"all_probes_succeed\"",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\nhalf_open_max_wait = \"0s\"\n"
            ),
            "27:22: breakers.b.half_open_max_wait: must be longer than zero (leave it out to wait for the probes for ever)",
        ),
        (
            format!("{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\nopen_for_factor = 2\n"),
            "27:19: breakers.b.open_for_max: growing openings (open_for_factor above 1) need open_for_max, their ceiling",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\nopen_for_factor = 2\nopen_for_max = \"1s\"\n"
            ),
            "28:16: breakers.b.open_for_max: must be at least open_for (5s): it caps openings that start there",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\nevaluate_on = \"success\"\n"
            ),
            "27:15: breakers.b.evaluate_on: unknown variant `success`, expected `any` or `failure`",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\nslow_call_duration = \"1s\"\nslow_call_percent = 50\n"
            ),
            "28:21: breakers.b.slow_call_percent: a slow-call rate is counted over the failure_rate rule's window, and this breaker opens on consecutive failures: give it failure_rate",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate = {{ percent = 50, window_calls = 20, min_calls = 20 }}\nopen_for = \"5s\"\nslow_call_duration = \"1s\"\n"
            ),
            "27:22: breakers.b.slow_call_percent: a slow-call rule needs slow_call_percent too: the share of slow calls that opens the breaker",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\npreset = \"resilience4j\"\nslow_call_duration = \"0s\"\n"
            ),
            "26:22: breakers.b.slow_call_duration: must be longer than zero (every call would be slow)",
        ),
        (
            with(
                "[connections.c]\n",
                "[connections.c]\nreconnect = \"manager\"\nreconnect_growth = \"doubling\"\n",
            ),
            "8:20: connections.c.reconnect_growth: applies to reconnect = \"always\": a slot's backoff doubles and a manager's is redis-rs' own",
        ),
        (
            with(
                "[connections.c]\n",
                "[connections.c]\npreset = \"go-redis\"\n",
            ),
            "7:10: connections.c.preset: unknown client preset `go-redis` (presets: ioredis, redis-rs-multiplexed, lettuce)",
        ),
        (
            // The preset's 50 ms first delay is above the file's maximum: reported at the preset.
            with(
                "[connections.c]\n",
                "[connections.c]\npreset = \"ioredis\"\nreconnect_delay_max = \"10ms\"\n",
            ),
            "7:10: connections.c.reconnect_delay: 50ms is above reconnect_delay_max 10ms",
        ),
        (
            format!("{BASE}\n[retries.r]\npreset = \"polly\"\n"),
            "25:10: retries.r.preset: unknown retry preset `polly` (presets: backoff-crate, tokio-retry, aws-full-jitter, backon-fibonacci)",
        ),
        (
            format!("{BASE}\n[retries.r]\nmax_attempts = 3\n"),
            "24:10: retries.r.backoff: missing: give backoff, or a preset",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\njitter = \"full\"\nrandomization_factor = 0.5\n"
            ),
            "28:24: retries.r.randomization_factor: applies to jitter = \"proportional\" only",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\npreset = \"backoff-crate\"\nrandomization_factor = 1.5\n"
            ),
            "26:24: retries.r.randomization_factor: must be at most 1 (delays from 0 to twice the wait), not 1.500: a larger factor would make negative delays",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nelapsed_max = \"0s\"\n"
            ),
            "27:15: retries.r.elapsed_max: must be longer than zero (with no time to retry in, use max_attempts = 1)",
        ),
        (
            // Issue 29: in the file's percent, not the model's permille ("at most 1000 ... 1500").
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nbudget_percent = 150\n"
            ),
            "27:18: retries.r.budget_percent: must be at most 100 (one retry per request), not 150: more would let retries outnumber the requests they retry",
        ),
        (
            // A base above the preset's ceiling: the ceiling came from the preset.
            format!("{BASE}\n[retries.r]\npreset = \"aws-full-jitter\"\nbackoff = \"30s\"\n"),
            "25:10: retries.r.backoff_max: must be at least the base (30s): it caps delays that start there",
        ),
        // Whole numbers out of range are refused where they are written, never clamped.
        (
            format!("{BASE}\n[bulkheads.b]\nmax_concurrent = 5000000000\nqueue = 5\n"),
            "25:18: bulkheads.b.max_concurrent: must be at most 4294967295, not 5000000000",
        ),
        (
            format!("{BASE}\n[bulkheads.b]\nmax_concurrent = 5\nqueue = -1\n"),
            "26:9: bulkheads.b.queue: must be at least 0, not -1",
        ),
        (
            format!("{BASE}\n[bulkheads.b]\nmax_concurrent = 5\nqueue = 1.5\n"),
            "26:9: bulkheads.b.queue: `1.5` is not a whole number",
        ),
        (
            with(
                "command_timeout = \"100ms\"",
                "command_timeout = \"100ms\"\nmax_retries = 5000000000",
            ),
            "9:15: connections.c.max_retries: must be at most 4294967295 (or \"unlimited\"), not 5000000000",
        ),
        (
            with("name = \"t\"", "name = \"t\"\nseed = -1"),
            "3:8: scenario.seed: must be at least 0, not -1",
        ),
        (
            with("[keys.k]", "[keys.k]\ncount = 20000000"),
            "11:9: keys.k.count: must be at most 10000000, not 20000000",
        ),
        (
            with("count = 5", "count = -5"),
            "22:9: loads.l.count: must be at least 0, not -5",
        ),
        (
            with(
                "[servers.redis]",
                "[servers.redis]\npreload = [{ key = \"k\", count = 2 }]",
            ),
            "5:33: servers.redis.preload[0].count: must be at most 1, not 2",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailure_rate = {{ percent = 50, window_calls = 99999999999, min_calls = 20 }}\nopen_for = \"5s\"\n"
            ),
            "25:47: breakers.b.failure_rate.window_calls: must be at most 4294967295, not 99999999999",
        ),
        (
            format!("{BASE}\n[retries.r]\nmax_attempts = 4294967296\nbackoff = \"1s\"\n"),
            "25:16: retries.r.max_attempts: must be at most 4294967295, not 4294967296",
        ),
        (
            // Steps are numbered in 16 bits: one more was truncated, then panicked.
            format!(
                "{BASE}\n[flows.long]\nsteps = [{}]\n",
                vec!["{ work = \"1ms\" }"; 65_536].join(", ")
            ),
            "25:9: flows.long.steps: 65536 steps are more than the 65535 a flow may have",
        ),
        (
            // 200 variants of a 1 500-value sweep: refused before any of the 300 000 runs is
            // built (it took minutes and gigabytes to validate).
            format!(
                "{BASE}\n[sweep]\nparameter = \"loads.l.count\"\nvalues = {}\n{}",
                sweep_values(1500),
                variants(200)
            ),
            "26:10: sweep.values: 200 variants × 1500 swept values = 300000 runs, more than the 10000 a file may expand to: sweep fewer values, or split the variants over several files",
        ),
        (
            format!(
                "{BASE}\n[sweep]\nparameter = \"loads.l.count\"\nvalues = {}\n{}",
                sweep_values(5001),
                variants(2)
            ),
            "26:10: sweep.values: 2 variants × 5001 swept values = 10002 runs, more than the 10000 a file may expand to: sweep fewer values, or split the variants over several files",
        ),
        (
            format!(
                "{BASE}\n[sweep]\nparameter = \"loads.l.count\"\nvalues = {}\n",
                sweep_values(10_001),
            ),
            "26:10: sweep.values: 1 variant × 10001 swept values = 10001 runs, more than the 10000 a file may expand to: sweep fewer values, or split the variants over several files",
        ),
        (
            format!("{BASE}\n{}", variants(10_001)),
            "20024:1: variant[10000]: 10001 variants are more than the 10000 runs a file may expand to: split them over several files",
        ),
        (
            format!(
                "{BASE}\n[client_loops.tokio]\nwrite_rate = \"700MiB/s\"\ncopy_rate = \"1GiB/s\"\n"
            ),
            "26:13: client_loops.tokio.copy_rate: needs copy_before_yield too: the writer's turn is its copy rate and how much it copies before it yields",
        ),
        (
            format!(
                "{BASE}\n[client_loops.tokio]\nwrite_rate = \"700MiB/s\"\ncopy_before_yield = \"8MiB\"\n"
            ),
            "26:21: client_loops.tokio.copy_before_yield: needs copy_rate too: the writer's turn is its copy rate and how much it copies before it yields",
        ),
        (
            format!(
                "{BASE}\n[client_loops.tokio]\nwrite_rate = \"700MiB/s\"\ncopy_rate = \"1GiB/s\"\ncopy_before_yield = 0\n"
            ),
            "27:21: client_loops.tokio.copy_before_yield: must be more than zero bytes: a writer that yields before copying anything never writes",
        ),
        (
            format!(
                "{BASE}\n[client_loops.tokio]\nwrite_rate = \"700MiB/s\"\ncopy_rate = \"0MiB/s\"\ncopy_before_yield = \"8MiB\"\n"
            ),
            "26:13: client_loops.tokio.copy_rate: must be more than zero bytes per second",
        ),
    ];
    assert!(cases.len() >= 15);
    check_all(&cases);
}

#[test]
fn misspelt_keys_values_and_labels_get_a_suggestion() {
    let labelled = |on_hit: &str| {
        with(
            "on_error = \"next\" }",
            &format!("on_error = \"next\", on_hit = \"{on_hit}\" }}"),
        )
        .replace(
            "{ db = { name = \"db\" } }",
            "{ db = { name = \"db\" }, label = \"query\" }",
        )
    };
    let cases: Vec<(String, &str)> = vec![
        (
            with("command_timeout = \"100ms\"", "comand_timeout = \"100ms\""),
            "8:1: connections.c.comand_timeout: unknown field `comand_timeout`: did you mean `command_timeout`? (expected one of `preset`, `server`, `latency`, `bandwidth`, `command_timeout`, `offline_queue`, `max_retries`, `connect_timeout`, `reconnect_delay`, `reconnect_delay_max`, `reconnect_growth`, `connected_at_start`, `reconnect`, `pending_max`, `subscribe`, `tracking`, `follows_failover`, `client_loop`, `timer_lateness`, `reconnect_retries`)",
        ),
        (
            // An unknown table is an unknown field of the root.
            with("[keys.k]", "[key.k]"),
            "10:2: key.k: unknown field `key`: did you mean `keys`? (expected one of `scenario`, `run`, `metrics`, `http`, `servers`, `client_loops`, `connections`, `databases`, `keys`, `breakers`, `bulkheads`, `semaphores`, `adaptive_limits`, `retries`, `caches`, `rate_limits`, `kv_stores`, `throttles`, `locks`, `callers`, `services`, `flows`, `loads`, `faults`)",
        ),
        (
            // Issue 31: `pool` is what a newcomer calls the pool; the message says its name.
            with("latency = \"10ms\"", "latency = \"10ms\"\npool = 20"),
            "14:1: databases.db.pool: unknown field `pool`: the pool is `max_connections` (its size; `connection_queue` is its wait queue) (expected one of `latency`, `capacity`, `max_connections`, `connection_queue`, `collapse`)",
        ),
        (
            // Issue 31: a failover aimed at a connection is aimed at its server, not made
            // right by a replica that follows the connection.
            format!(
                "{BASE}\n[servers.replica]\nreplica_of = \"redis\"\n\n[faults.x]\ntarget = \"c\"\nkind = \"failover\"\nreplica = \"replica\"\nat = \"1s\"\n"
            ),
            "28:10: faults.x.target: a `failover` acts on a server, and `c` is a connection: target its server (`target = \"redis\"`)",
        ),
        (
            format!("{BASE}\n[faults.x]\ntarget = \"redis\"\nkind = \"hnag\"\nat = \"1s\"\n"),
            "26:8: faults.x.kind: unknown variant `hnag`: did you mean `hang`? (expected one of `pause`, `hang`, `stop`, `kill`, `maxmemory`, `flushall`, `error_reply`, `disconnect`, `failover`, `crash`, `cpu_throttle`, `slow`, `refuse`, `pool_exhausted`, `lock_held`, `latency`, `bandwidth`, `packet_loss`, `slow_close`)",
        ),
        (
            labelled("qurey"),
            "16:98: flows.f.steps[0].on_hit: `qurey` is not \"next\", \"finish\" or a step label: did you mean `query`? (labels here: query)",
        ),
        (
            labelled("finsh"),
            "16:98: flows.f.steps[0].on_hit: `finsh` is not \"next\", \"finish\" or a step label: did you mean `finish`? (labels here: query)",
        ),
        (
            // Too far from every label for a suggestion: the list only.
            labelled("fill"),
            "16:98: flows.f.steps[0].on_hit: `fill` is not \"next\", \"finish\" or a step label (labels here: query)",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nretry_on = [\"timout\"]\n"
            ),
            "27:13: retries.r.retry_on: unknown outcome `timout`: did you mean `timeout`? (outcomes: timeout, refused, connection_lost, breaker_open, shed, server_error, lock_busy, rate_limited, lock_timeout, oom, readonly, loading, wrongtype; or a status class, 4xx or 5xx)",
        ),
        (
            format!(
                "{BASE}\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nretry_on = [\"cancelled\"]\n"
            ),
            "27:13: retries.r.retry_on: `cancelled` ends a request whose caller has gone: no step, policy or caller sees it",
        ),
        (
            format!(
                "{BASE}\n[breakers.b]\nfailures = 3\nopen_for = \"1s\"\ncounts = [\"cancelled\"]\n"
            ),
            "27:11: breakers.b.counts: `cancelled` ends a request whose caller has gone: no step, policy or caller sees it",
        ),
        (
            // With 429s answered as 503, no outcome is a 4xx.
            format!(
                "{BASE}\n[http]\nstatus = {{ rate_limited = 503 }}\n\n[retries.r]\nmax_attempts = 3\nbackoff = \"1s\"\nretry_on = [\"4xx\"]\n"
            ),
            "30:13: retries.r.retry_on: no outcome is answered with a 4xx status (see [http] status)",
        ),
    ];
    check_all(&cases);
}

#[test]
fn a_fault_targets_the_server_even_when_a_database_shares_its_name() {
    let text = with("[servers.redis]", "[servers.db]")
        .replace("server = \"redis\"", "server = \"db\"")
        + "\n[faults.down]\ntarget = \"db\"\nkind = \"stop\"\nat = \"1s\"\n";
    let file = outagelab_scenario_file::parse(&text, Path::new("t.toml"))
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    assert_eq!(file.variants[0].scenario.faults.len(), 1);
}

/// BASE with a bulkhead `b` and a breaker `x`, and its database step written as `step`.
fn with_policies(step: &str, counts: &str) -> String {
    let text = with("{ db = { name = \"db\" } }", step);
    format!(
        "{text}\n[bulkheads.b]\nmax_concurrent = 2\nqueue = 0\n\n[breakers.x]\nfailures = 5\nopen_for = \"5s\"\ncounts = {counts}\n"
    )
}

#[test]
fn policy_order_mistakes() {
    let network = r#"["timeout"]"#;
    let sheds = r#"["timeout", "shed"]"#;
    let cases: Vec<(String, &str)> = vec![
        (
            with_policies(
                r#"{ db = { name = "db" }, bulkhead = "b", policies = ["bulkhed"] }"#,
                network,
            ),
            "16:143: flows.f.steps[1].policies[0]: \"bulkhed\" is not a policy kind: did you mean \"bulkhead\"? (the kinds are retry, bulkhead, semaphore, breaker, adaptive_limit)",
        ),
        (
            with_policies(
                r#"{ db = { name = "db" }, bulkhead = "b", policies = ["bulkhead", "bulkhead"] }"#,
                network,
            ),
            "16:155: flows.f.steps[1].policies[1]: bulkhead is listed 2 times but the step names 1: each listing takes one name of `bulkhead = [\"...\", ...]`, in order",
        ),
        (
            with_policies(
                r#"{ db = { name = "db" }, policies = ["breaker"] }"#,
                network,
            ),
            "16:127: flows.f.steps[1].policies[0]: the step lists breaker but names no breaker: add breaker = \"...\" to the step",
        ),
        (
            with_policies(
                r#"{ db = { name = "db" }, bulkhead = "b", breaker = "x", policies = ["breaker"] }"#,
                network,
            ),
            "16:157: flows.f.steps[1].policies: the step names a bulkhead but `policies` does not list it: add \"bulkhead\" where a request meets it",
        ),
        (
            // In the default order the bulkhead sheds before the breaker is asked.
            with_policies(
                r#"{ db = { name = "db" }, bulkhead = "b", breaker = "x" }"#,
                sheds,
            ),
            "31:22: breakers.x.counts: `shed` reaches a breaker only from a bulkhead, semaphore or adaptive limit listed inside it, and no step does that: list the breaker first, e.g. policies = [\"breaker\", \"bulkhead\"]",
        ),
    ];
    for (text, expected) in &cases {
        check(text, expected);
    }
    // An adaptive limit is inside the breaker by default: its sheds reach it.
    let adaptive = format!(
        "{}\n[adaptive_limits.a]\naimd = {{}}\n",
        with_policies(
            r#"{ db = { name = "db" }, breaker = "x", adaptive_limit = "a" }"#,
            sheds
        )
    );
    outagelab_scenario_file::parse(&adaptive, Path::new("t.toml")).expect("sheds reach it");
    // Listed outside the bulkhead, the breaker does hear of sheds.
    let outside = with_policies(
        r#"{ db = { name = "db" }, bulkhead = "b", breaker = "x", policies = ["breaker", "bulkhead"] }"#,
        sheds,
    );
    outagelab_scenario_file::parse(&outside, Path::new("t.toml")).expect("sheds reach it");
}

#[test]
fn adaptive_limit_mistakes() {
    let limit = |body: &str| format!("{BASE}\n[adaptive_limits.a]\n{body}\n");
    let cases: Vec<(String, &str)> = vec![
        (
            limit("aimd = { backoff_ratio = 0.9 }\ngradient2 = { smoothing = 0.2 }"),
            "26:1: adaptive_limits.a.gradient2: an adaptive limit has one algorithm (`aimd`, `gradient2`), and this one already has `aimd`: give aimd or gradient2, not both",
        ),
        (
            limit("limit_max = 10"),
            "24:1: adaptive_limits.a: an adaptive limit has no algorithm: give it one of `aimd`, `gradient2`",
        ),
        (
            limit("aimd = { smoothing = 0.2 }"),
            "25:10: adaptive_limits.a.aimd.smoothing: unknown field `smoothing`, expected `backoff_ratio` or `timeout`",
        ),
        (
            // Bounds the other way round: refused, not a panic while picking a default.
            limit("limit_min = 10\nlimit_max = 5\naimd = {}"),
            "26:13: adaptive_limits.a.limit_max: 5 is below limit_min 10",
        ),
        (
            limit("aimd = { backoff_ratio = 1.5 }"),
            "25:26: adaptive_limits.a.aimd.backoff_ratio: must be in 0.5..1.0 (as AIMDLimit requires: below 0.5 one drop more than halves the limit, 1 never backs off), got 1.5",
        ),
        (
            limit("gradient2 = { long_window = 0 }"),
            "25:29: adaptive_limits.a.gradient2.long_window: must be at least 1 (the average's factor 2 / (n + 1) must not exceed 1)",
        ),
        (
            limit("aimd = {}\ndrops = [\"ok\"]"),
            "26:10: adaptive_limits.a.drops: `ok` is a success, not an error",
        ),
        (
            format!(
                "{}\n[adaptive_limits.a]\naimd = {{}}\n",
                with(
                    "{ db = { name = \"db\" } }",
                    "{ db = { name = \"db\" }, adaptive_limit = \"b\" }"
                )
            ),
            "16:132: flows.f.steps[1].adaptive_limit: unknown adaptive limit `b` (defined: a)",
        ),
    ];
    for (text, expected) in &cases {
        check(text, expected);
    }
}

#[test]
fn no_variant_or_sweep_may_change_the_seed() {
    let why = "the seed is a parameter of the run, not of a variant: every variant runs on the \
               same seed so that they compare on the same random draws, and the header's seed \
               and `--seed` reproduce the run only if no variant changes it; use --seed N for \
               another draw";
    let patch = format!("{BASE}\n[[variant]]\nname = \"a\"\n[variant.patch.scenario]\nseed = 7\n");
    check(
        &patch,
        &format!("27:1: variant[0].patch.scenario.seed: {why}"),
    );
    let sweep = format!("{BASE}\n[sweep]\nparameter = \"scenario.seed\"\nvalues = [1, 2]\n");
    check(&sweep, &format!("25:13: sweep.parameter: {why}"));
}

#[test]
fn a_patch_that_misspells_a_resource_is_refused_not_run_as_a_new_one() {
    let typo = format!(
        "{BASE}\n[[variant]]\nname = \"typo\"\npatch = {{ servers = {{ rediss = {{ command_cost = \"1ms\" }} }} }}\n"
    );
    check(
        &typo,
        "26:23: variant \"typo\" patch.servers.rediss: the base file has no servers.rediss: did you mean `redis`? (a patch that names a new resource creates it)",
    );
    // A new resource whose name is not a near miss is created, with a warning.
    let new = format!(
        "{BASE}\n[[variant]]\nname = \"new\"\npatch = {{ servers = {{ replica = {{ command_cost = \"1ms\" }} }} }}\n"
    );
    check_warning(
        &new,
        "26:23: variant \"new\" patch.servers.replica: the base file has no servers.replica, so this patch creates it: if it should, say so with creates = [\"servers.replica\"] in the variant",
    );
    // `creates` names only what the patch creates.
    let patch = r#"{ servers = { replica = { hz = 5 } } }"#;
    check(
        &with_variant("creates = [\"servers.redis\"]\n", patch),
        "26:12: variant \"v\" creates: `servers.redis` is not created by this variant: the base file has it already, so the patch changes it rather than creating it",
    );
    check(
        &with_variant("creates = [\"servers.other\"]\n", patch),
        "26:12: variant \"v\" creates: `servers.other` is not created by this variant: the patch does not name it: write it as `table.name` of a resource the patch adds, e.g. \"faults.down\"",
    );
}

/// BASE with a lock `l` of `lock` (its keys, one a line) after the key family, and its database
/// step replaced by `step`.
fn with_lock(lock: &str, step: &str) -> String {
    with("[keys.k]", &format!("[keys.k]\n\n[locks.l]\n{lock}")).replacen(
        r#"{ db = { name = "db" } }"#,
        step,
        1,
    )
}

#[test]
fn bad_locks_are_refused_at_their_key() {
    let lock = "lease = \"30s\"\nretry_delay = \"50ms\"\nacquire_timeout = \"200ms\"";
    let acquire = r#"{ lock = { name = "l", op = "acquire", mode = "exclusive", connection = "c", key = "k" } }"#;
    let cases: Vec<(String, &str)> = vec![
        (
            with_lock(&lock.replace("\"30s\"", "\"0s\""), acquire),
            "13:9: locks.l.lease: must be longer than zero (a lock with a zero lease expires as it is taken and excludes nobody)",
        ),
        (
            with_lock(&lock.replace("\"50ms\"", "\"300ms\""), acquire),
            "14:15: locks.l.retry_delay: must be at most acquire_timeout (200ms), or the acquire never retries; it is 300ms",
        ),
        (
            with_lock(&lock.replace("\"50ms\"", "\"0ms\""), acquire),
            "14:15: locks.l.retry_delay: must be longer than zero (a zero delay spins on a taken lock)",
        ),
        (
            with_lock(lock, &acquire.replace(r#"mode = "exclusive", "#, "")),
            "21:119: flows.f.steps[1].lock.mode: an acquire says how it holds the lock: mode = \"exclusive\" (a writer) or \"shared\" (a reader)",
        ),
        (
            with_lock(
                lock,
                r#"{ lock = { name = "l", op = "release", mode = "shared", connection = "c", key = "k" } }"#,
            ),
            "21:137: flows.f.steps[1].lock.mode: a release gives back the lock the request holds, in the mode it took it: leave mode out",
        ),
        (
            with_lock(lock, &acquire.replace(r#"name = "l""#, r#"name = "m""#)),
            "21:109: flows.f.steps[1].lock.name: unknown lock `m` (defined: l)",
        ),
        (
            with_lock(
                lock,
                &acquire.replace(r#"mode = "exclusive""#, r#"mode = "write""#),
            ),
            "21:137: flows.f.steps[1].lock.mode: unknown variant `write`, expected `exclusive` or `shared`",
        ),
        (
            with_lock(
                lock,
                &acquire.replace(" } }", r#" }, on_error = "ignore" }"#),
            ),
            "21:100: flows.f.steps[1].on_error: a fire-and-forget acquire (on_error = \"ignore\") holds the lock for nobody until its lease ends: let the request wait for it",
        ),
    ];
    check_all(&cases);
}

#[test]
fn memory_keys_memory_faults_and_the_error_reply_outcomes_are_read() {
    use outagelab_sim::scenario::{
        CommandScope, ErrorReply, EvictionPolicy, EvictionSamples, FaultKind, PauseMode,
    };
    let text = with(
        "[servers.redis]",
        "[servers.redis]\nmaxmemory = \"30MiB\"\nmaxmemory_policy = \"volatile-ttl\"\n\
         maxmemory_exact = true\nkey_bytes = \"40B\"\nkey_overhead = 100\nhz = 100",
    ) + "\n[breakers.b]\nfailures = 5\nopen_for = \"5s\"\ncounts = [\"oom\", \"readonly\", \"loading\", \"wrongtype\"]\n\
         \n[faults.full]\ntarget = \"redis\"\nkind = \"maxmemory\"\nat = \"1s\"\nmaxmemory = 0\n\
         \n[faults.flush]\ntarget = \"redis\"\nkind = \"flushall\"\nat = \"2s\"\n\
         \n[faults.demoted]\ntarget = \"redis\"\nkind = \"error_reply\"\nerror = \"readonly\"\nat = \"3s\"\nduration = \"1s\"\n\
         \n[faults.loading]\ntarget = \"redis\"\nkind = \"error_reply\"\nerror = \"loading\"\nat = \"3s\"\n\
         \n[faults.writes]\ntarget = \"redis\"\nkind = \"pause\"\nmode = \"write\"\nat = \"4s\"\nduration = \"1s\"\n";
    let file = outagelab_scenario_file::parse(&text, Path::new("t.toml")).unwrap();
    let scenario = &file.variants[0].scenario;
    let server = &scenario.servers[0];
    assert_eq!(server.memory.maxmemory, Some(30 << 20));
    assert_eq!(server.memory.policy, EvictionPolicy::VolatileTtl);
    assert_eq!(server.memory.samples, EvictionSamples::Exact);
    assert_eq!(
        (server.memory.key_bytes, server.memory.key_overhead),
        (40, 100)
    );
    assert_eq!(server.hz.map(|hz| hz.get()), Some(100));
    let kinds: Vec<FaultKind> = scenario.faults.iter().map(|fault| fault.kind).collect();
    assert_eq!(
        kinds,
        // In name order: demoted, flush, full, loading, writes.
        [
            // READONLY answers writes by default (a replica serves reads); LOADING everything.
            FaultKind::ErrorReply {
                error: ErrorReply::ReadOnly,
                commands: CommandScope::Writes,
            },
            FaultKind::FlushAll,
            FaultKind::MaxMemory(None), // 0 lifts the limit, as in Redis
            FaultKind::ErrorReply {
                error: ErrorReply::Loading,
                commands: CommandScope::All,
            },
            FaultKind::Pause(PauseMode::Write),
        ]
    );
    let counts = scenario.breakers[0].counts;
    for outcome in ErrorReply::ALL.map(ErrorReply::outcome) {
        assert!(counts.contains(outcome), "{outcome}");
    }
    // Defaults: no limit, noeviction, 5 samples, 16-byte keys, 64 bytes of overhead, 10 Hz.
    let file = outagelab_scenario_file::parse(BASE, Path::new("t.toml")).unwrap();
    let server = &file.variants[0].scenario.servers[0];
    assert_eq!(server.memory, outagelab_sim::scenario::MemorySpec::DEFAULT);
    assert_eq!(server.hz.map(|hz| hz.get()), Some(10));
}

/// BASE read with `--set` flags `sets` (each `KEY=VALUE`).
fn parse_set(
    text: &str,
    sets: &[&str],
) -> Result<outagelab_scenario_file::ScenarioFile, outagelab_scenario_file::Diagnostics> {
    let overrides: Vec<_> = sets
        .iter()
        .map(|set| outagelab_scenario_file::Override::parse(set).unwrap())
        .collect();
    outagelab_scenario_file::parse_with(text, Path::new("t.toml"), &overrides)
}

#[test]
fn rejected_overrides_name_their_flag() {
    let swept = format!("{BASE}\n[sweep]\nparameter = \"loads.l.count\"\nvalues = [1, 2]\n");
    let cases: Vec<(&str, &[&str], &str)> = vec![
        (
            BASE,
            &["loads.l.rate=-5"],
            "t.toml: --set loads.l.rate=-5: loads.l.rate: must be a positive number of requests per second, not -5",
        ),
        (
            BASE,
            &["loads.l.rte=5"],
            "t.toml: --set loads.l.rte=5: loads.l.rte: unknown field `rte`: did you mean `rate`? (expected one of `enabled`, `flow`, `arrivals`, `rate`, `count`, `duration`, `start`, `workers`, `think`, `stagger`, `iterations`, `caller`, `stages`, `rate_file`, `rate_series`)",
        ),
        (
            BASE,
            &["connections.c.command_timeout=\"0s\""],
            "t.toml: --set connections.c.command_timeout=\"0s\": connections.c.command_timeout: must be longer than zero (every command would fail; leave it out to wait forever)",
        ),
        (
            BASE,
            &["loads.l.flow=\"g\""],
            "t.toml: --set loads.l.flow=\"g\": loads.l.flow: unknown flow `g` (defined: f)",
        ),
        (
            BASE,
            &["databases.dbb.latency=\"5ms\""],
            "t.toml: --set databases.dbb.latency=\"5ms\": databases.dbb.latency: the scenario has no `databases.dbb`, so `databases.dbb.latency` cannot be set: did you mean `databases.db`?",
        ),
        (
            BASE,
            &["database.db.latency=\"5ms\""],
            "t.toml: --set database.db.latency=\"5ms\": database.db.latency: the scenario has no `database`, so `database.db.latency` cannot be set: did you mean `databases`?",
        ),
        (
            BASE,
            &["loads.l.rate=fast"],
            "t.toml: --set loads.l.rate=fast: loads.l.rate: `fast` is not a TOML value (invalid boolean, expected `false`): a string is written in quotes, e.g. --set 'loads.l.rate=\"10s\"'",
        ),
        (
            BASE,
            &["loads.l.rate=5\nflow = \"g\""],
            "t.toml: --set loads.l.rate=5\nflow = \"g\": loads.l.rate: holds more than one TOML value",
        ),
        (
            BASE,
            &["scenario.seed=5"],
            "t.toml: --set scenario.seed=5: scenario.seed: the seed is a parameter of the run: use --seed N (or --seeds A..B), not --set scenario.seed",
        ),
        (
            BASE,
            &["variant.name=\"x\""],
            "t.toml: --set variant.name=\"x\": variant.name: --set changes the base scenario, before variants are merged; `variant` is read apart from it: change it in the file",
        ),
        (
            BASE,
            &["loads..rate=5"],
            "t.toml: --set loads..rate=5: loads..rate: must name a key as a dotted path, e.g. loads.peak.rate",
        ),
        (
            &swept,
            &["loads.l.count=3"],
            "t.toml: --set loads.l.count=3: loads.l.count: `loads.l.count` is swept (values 2): each point sets it, so this would change nothing",
        ),
    ];
    let mut wrong = Vec::new();
    for (text, sets, expected) in &cases {
        let first = match parse_set(text, sets) {
            Ok(_) => "accepted".to_owned(),
            Err(diagnostics) => diagnostics.0[0].to_string(),
        };
        if first != *expected {
            wrong.push(format!(
                "{sets:?}\n  got      {first}\n  expected {expected}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    for bad in ["nokey", "=5", " = 5"] {
        assert!(
            outagelab_scenario_file::Override::parse(bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn overrides_change_the_base_before_the_variants_patch_it() {
    let text = format!(
        "{BASE}\n[[variant]]\nname = \"as set\"\n\n[[variant]]\nname = \"patched\"\npatch = {{ servers = {{ redis = {{ hz = 20 }} }} }}\n"
    );
    let file = parse_set(&text, &["servers.redis.hz=50", "scenario.name=\"renamed\""])
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    assert_eq!(file.name, "renamed");
    let hz: Vec<Option<u32>> = file
        .variants
        .iter()
        .map(|v| v.scenario.servers[0].hz.map(|hz| hz.get()))
        .collect();
    assert_eq!(
        hz,
        [Some(50), Some(20)],
        "a variant's patch wins over --set"
    );
    // A table as the value, and a key the base leaves out.
    let file = parse_set(BASE, &["run={ horizon = \"2s\" }"]).unwrap();
    assert!(file.variants[0].scenario.limits.horizon.is_some());
    // A resource created by --set is unused: warned, at its flag.
    check_warning_in(
        parse_set(BASE, &["servers.spare={}"]).unwrap(),
        "t.toml: --set servers.spare={}: servers.spare: nothing uses this server: nothing names it (remove it, or name it where it should be used)",
    );
}

#[test]
fn a_latency_slo_is_read_and_bad_ones_are_refused_at_their_key() {
    let slo = |table: &str| format!("{BASE}\n[report]\nslo = {table}\n");
    let read = |table: &str| {
        let file = outagelab_scenario_file::parse(&slo(table), Path::new("t.toml")).unwrap();
        file.report.slo.map(|slo| (slo.latency_ms, slo.percentile))
    };
    assert_eq!(
        read(r#"{ latency = "200ms", percentile = 99.9 }"#),
        Some((200.0, Some(99.9)))
    );
    assert_eq!(read(r#"{ latency = "1.5s" }"#), Some((1500.0, None)));
    let file = outagelab_scenario_file::parse(BASE, Path::new("t.toml")).unwrap();
    assert!(file.report.slo.is_none(), "no [report], no SLO");
    let line = BASE.lines().count() + 3;
    check_all(&[
        (
            slo(r#"{ latency = "0ms" }"#),
            &format!("{line}:19: report.slo.latency: must be longer than zero"),
        ),
        (
            slo(r#"{ latency = "200ms", percentile = 100 }"#),
            &format!("{line}:41: report.slo.percentile: must be above 0 and below 100"),
        ),
        (
            slo(r#"{ latency = "200ms", p99 = 1 }"#),
            &format!(
                "{line}:28: report.slo.p99: unknown field `p99`, expected `latency` or \
                 `percentile`"
            ),
        ),
    ]);
}

/// A call step's share of failures is a percentage, and its error one error outcome.
#[test]
fn call_steps() {
    // After the database step, with `on_error` when it can fail.
    let step = |step: &str| {
        let steps = format!("{{ db = {{ name = \"db\" }}, on_error = \"fail\" }}, {step}");
        with("{ db = { name = \"db\" } }", &steps)
    };
    let call = |table: &str| step(&format!("{{ call = {{ {table} }}, on_error = \"fail\" }}"));
    check_silent(&call(
        "latency = \"20ms\", error_percent = 2.5, error = \"timeout\"",
    ));
    // A call that never fails needs no on_error.
    check_silent(&step(
        "{ call = { latency = { distribution = \"exponential\", mean = \"5ms\" } } }",
    ));
    check_all(&[
        (
            call("latency = \"20ms\", error_percent = 101"),
            "16:181: flows.f.steps[2].call.error_percent: 101 is not a percentage from 0 to 100, to 0.1%",
        ),
        (
            call("latency = \"20ms\", error_percent = -1"),
            "16:181: flows.f.steps[2].call.error_percent: -1 is not a non-negative number with at most 3 decimals",
        ),
        (
            call("latency = \"20ms\", error = \"ok\""),
            "16:173: flows.f.steps[2].call.error: `ok` is a success, not an error",
        ),
        (
            call("latency = \"20ms\", error = \"5xx\""),
            "16:173: flows.f.steps[2].call.error: a call fails with one outcome: name one (such as \"server_error\" or \"timeout\"), not a status class",
        ),
        (
            call("latency = \"20ms\", error = \"timout\""),
            "16:173: flows.f.steps[2].call.error: unknown outcome `timout`: did you mean `timeout`? (outcomes: timeout, refused, connection_lost, breaker_open, shed, server_error, lock_busy, rate_limited, lock_timeout, oom, readonly, loading, wrongtype; or a status class, 4xx or 5xx)",
        ),
        (
            call("error_percent = 5"),
            "16:145: flows.f.steps[2].call: missing field `latency`, which a step's `call` \
             requires: how long the dependency takes to answer: a duration, or a distribution \
             table as a `work` step's (docs/scenario-format.md)",
        ),
        (
            call("latency = \"20ms\", errors = 5"),
            "16:165: flows.f.steps[2].call.errors: unknown field `errors`: did you mean `error`? (expected one of `latency`, `error_percent`, `error`)",
        ),
        (
            call("latency = \"fast\""),
            "16:157: flows.f.steps[2].call.latency: `fast` has an unknown unit `fast`: write a number and a unit (ns, us, ms, s, m, h), e.g. \"100ms\" or \"1.5s\"",
        ),
    ]);
}

/// A work step's table is a distribution, whose keys depend on the distribution it names.
#[test]
fn work_steps() {
    let work = |table: &str| {
        let steps = format!(
            "{{ db = {{ name = \"db\" }}, on_error = \"fail\" }}, {{ work = {{ {table} }} }}"
        );
        with("{ db = { name = \"db\" } }", &steps)
    };
    check_silent(&work(
        "distribution = \"uniform\", min = \"1ms\", max = \"7ms\"",
    ));
    check_silent(&work("distribution = \"exponential\", mean = \"5ms\""));
    check_all(&[
        (
            work("min = \"1ms\", max = \"7ms\""),
            "16:145: flows.f.steps[2].work: missing field `distribution`, which a step's `work` requires: `\"uniform\"`: drawn evenly from `min` to `max`; `\"exponential\"`: `min` plus an exponential of mean `mean` (docs/scenario-format.md)",
        ),
        (
            work("distribution = \"uniform\", min = \"1ms\""),
            "16:162: flows.f.steps[2].work.max: is required by this distribution",
        ),
        (
            work("distribution = \"exponential\", mean = \"5ms\", max = \"9ms\""),
            "16:197: flows.f.steps[2].work.max: an exponential distribution has no maximum",
        ),
        (
            work("distribution = \"unifrm\", min = \"1ms\", max = \"7ms\""),
            "16:162: flows.f.steps[2].work.distribution: unknown variant `unifrm`: did you mean `uniform`? (expected `uniform` or `exponential`)",
        ),
    ]);
}

/// Database faults: `slow` (with its slowdown), `refuse` and `pool_exhausted` (on a pool)
/// act on a database only, and a database takes no other kind.
#[test]
fn database_faults() {
    let fault = |body: &str| format!("{BASE}\n[faults.f]\n{body}\n");
    check_silent(&fault(
        "target = \"db\"\nkind = \"slow\"\nat = \"1s\"\nduration = \"2s\"\nslowdown = 2.5",
    ));
    check_silent(&fault("target = \"db\"\nkind = \"refuse\"\nat = \"1s\""));
    check_all(&[
        (
            fault("target = \"redis\"\nkind = \"slow\"\nat = \"1s\"\nslowdown = 2"),
            "25:10: faults.f.target: a `slow` fault acts on a database: target one of [databases]",
        ),
        (
            fault("target = \"c\"\nkind = \"refuse\"\nat = \"1s\""),
            "25:10: faults.f.target: a `refuse` fault acts on a database: target one of [databases]",
        ),
        (
            fault("target = \"db\"\nkind = \"kill\"\nat = \"1s\""),
            "25:10: faults.f.target: a `kill` fault acts on Redis: a database takes `slow`, `refuse`, `pool_exhausted` or `lock_held`",
        ),
        (
            fault("target = \"db\"\nkind = \"slow\"\nat = \"1s\""),
            "26:8: faults.f.slowdown: a `slow` fault runs its database's queries slower: say how many times, e.g. `slowdown = 4`",
        ),
        (
            fault("target = \"db\"\nkind = \"slow\"\nat = \"1s\"\nslowdown = 1"),
            "28:12: faults.f.slowdown: 1 is not a slowdown: give how many times slower, above 1 and at most 1000",
        ),
        (
            fault("target = \"db\"\nkind = \"slow\"\nat = \"1s\"\nslowdown = 1e9"),
            "28:12: faults.f.slowdown: 1000000000 is not a slowdown: give how many times slower, above 1 and at most 1000",
        ),
        (
            fault("target = \"db\"\nkind = \"refuse\"\nat = \"1s\"\nslowdown = 2"),
            "28:12: faults.f.slowdown: only a `cpu_throttle` or `slow` fault takes `slowdown`, not a `refuse` one (a `refuse` fault takes no keys of its own)",
        ),
        (
            fault("target = \"dbb\"\nkind = \"refuse\"\nat = \"1s\""),
            "25:10: faults.f.target: unknown database `dbb`: did you mean `db`? (defined: db)",
        ),
        (
            fault("target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\""),
            "25:10: faults.f.target: `db` has no `max_connections`: there is no pool to exhaust (give the database a limit)",
        ),
    ]);
    // `lock_held`: a key family's locks, on a database.
    check_silent(&fault(
        "target = \"db\"\nkind = \"lock_held\"\nat = \"1s\"\nduration = \"2s\"\nkey = \"k\"",
    ));
    check_all(&[
        (
            fault("target = \"db\"\nkind = \"lock_held\"\nat = \"1s\""),
            "26:8: faults.f.key: a `lock_held` fault holds the advisory locks of a key family (a table lock): name it, e.g. `key = \"accounts\"`",
        ),
        (
            fault("target = \"db\"\nkind = \"lock_held\"\nat = \"1s\"\nkey = \"kk\""),
            "28:7: faults.f.key: unknown key family `kk` (defined: k)",
        ),
        (
            fault("target = \"redis\"\nkind = \"lock_held\"\nat = \"1s\"\nkey = \"k\""),
            "25:10: faults.f.target: a `lock_held` fault acts on a database: target one of [databases]",
        ),
        (
            fault("target = \"db\"\nkind = \"refuse\"\nat = \"1s\"\nkey = \"k\""),
            "28:7: faults.f.key: only a `lock_held` fault takes `key`, not a `refuse` one (a `refuse` fault takes no keys of its own)",
        ),
    ]);
    // `pool_exhausted` on a database with a pool of 4: all of it by default, or some.
    let pooled = |body: &str| {
        let base = BASE.replace(
            "latency = \"10ms\"\n",
            "latency = \"10ms\"\nmax_connections = 4\n",
        );
        format!("{base}\n[faults.f]\n{body}\n")
    };
    check_silent(&pooled(
        "target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\"\nduration = \"2s\"",
    ));
    check_silent(&pooled(
        "target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\"\nconnections = 3",
    ));
    check_all(&[
        (
            pooled("target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\"\nconnections = 5"),
            "29:15: faults.f.connections: 5 connections of a pool of 4 (`max_connections`): at most 4",
        ),
        (
            pooled("target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\"\nconnections = 0"),
            "29:15: faults.f.connections: must be at least 1 (a fault that holds no connection does nothing)",
        ),
        (
            pooled("target = \"db\"\nkind = \"refuse\"\nat = \"1s\"\nconnections = 2"),
            "29:15: faults.f.connections: only a `pool_exhausted` fault takes `connections`, not a `refuse` one (a `refuse` fault takes no keys of its own)",
        ),
        (
            pooled("target = \"redis\"\nkind = \"pool_exhausted\"\nat = \"1s\""),
            "26:10: faults.f.target: a `pool_exhausted` fault acts on a database: target one of [databases]",
        ),
    ]);
}

/// Connection toxics: `latency` (with its `jitter`) and `bandwidth` act on one connection.
#[test]
fn connection_toxics() {
    let fault = |body: &str| format!("{BASE}\n[faults.f]\n{body}\n");
    check_silent(&fault(
        "target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\"\nduration = \"2s\"\nloss = 2.5\nretransmit = \"300ms\"",
    ));
    check_silent(&fault(
        "target = \"c\"\nkind = \"slow_close\"\nat = \"1s\"\ndelay = \"500ms\"",
    ));
    check_silent(&fault(
        "target = \"c\"\nkind = \"latency\"\nat = \"1s\"\nduration = \"2s\"\nlatency = \"50ms\"\njitter = \"10ms\"",
    ));
    check_silent(&fault(
        "target = \"c\"\nkind = \"bandwidth\"\nat = \"1s\"\nbandwidth = \"100KiB/s\"",
    ));
    check_all(&[
        (
            fault("target = \"c\"\nkind = \"latency\"\nat = \"1s\""),
            "26:8: faults.f.latency: a `latency` fault adds a delay to what the connection sends: give it, e.g. `latency = \"50ms\"`",
        ),
        (
            fault("target = \"c\"\nkind = \"latency\"\nat = \"1s\"\nlatency = \"0ms\""),
            "28:11: faults.f.latency: a `latency` fault of 0 without jitter does nothing",
        ),
        (
            fault("target = \"c\"\nkind = \"latency\"\nat = \"1s\"\nlatency = \"fast\""),
            "28:11: faults.f.latency: `fast` has an unknown unit `fast`: write a number and a unit (ns, us, ms, s, m, h), e.g. \"100ms\" or \"1.5s\"",
        ),
        (
            fault("target = \"redis\"\nkind = \"latency\"\nat = \"1s\"\nlatency = \"5ms\""),
            "25:10: faults.f.target: a `latency` fault acts on what one client connection sends: target a connection",
        ),
        (
            fault("target = \"db\"\nkind = \"bandwidth\"\nat = \"1s\"\nbandwidth = \"1MiB/s\""),
            "25:10: faults.f.target: a `bandwidth` fault acts on what one client connection sends: target a connection",
        ),
        (
            fault("target = \"c\"\nkind = \"bandwidth\"\nat = \"1s\""),
            "26:8: faults.f.bandwidth: a `bandwidth` fault limits what the connection sends: give the rate, e.g. `bandwidth = \"100KiB/s\"`",
        ),
        (
            fault("target = \"c\"\nkind = \"bandwidth\"\nat = \"1s\"\nbandwidth = \"0B/s\""),
            "28:13: faults.f.bandwidth: must be more than zero bytes per second",
        ),
        (
            fault("target = \"c\"\nkind = \"disconnect\"\nat = \"1s\"\njitter = \"5ms\""),
            "28:10: faults.f.jitter: only a `latency` fault takes `jitter`, not a `disconnect` one (a `disconnect` fault takes no keys of its own)",
        ),
        (
            fault("target = \"c\"\nkind = \"slow_close\"\nat = \"1s\""),
            "26:8: faults.f.delay: a `slow_close` fault holds a close back: give how long, e.g. `delay = \"500ms\"`",
        ),
        (
            fault("target = \"c\"\nkind = \"slow_close\"\nat = \"1s\"\ndelay = \"0s\""),
            "28:9: faults.f.delay: must be longer than zero (a close held back no time)",
        ),
        (
            fault("target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\""),
            "26:8: faults.f.loss: a `packet_loss` fault loses a share of what the connection sends: give it in percent, e.g. `loss = 2`",
        ),
        (
            fault("target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\"\nloss = 100"),
            "28:8: faults.f.loss: 100 is not a share of transmissions lost: above 0 and below 100 percent (at 100 nothing would ever arrive)",
        ),
        (
            fault(
                "target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\"\nloss = 1\nretransmit = \"0s\"",
            ),
            "29:14: faults.f.retransmit: must be longer than zero (a lost packet is sent again after it)",
        ),
        (
            fault("target = \"redis\"\nkind = \"packet_loss\"\nat = \"1s\"\nloss = 1"),
            "25:10: faults.f.target: a `packet_loss` fault acts on what one client connection sends: target a connection",
        ),
        (
            fault("target = \"c\"\nkind = \"latency\"\nat = \"1s\"\nlatency = \"5ms\"\nloss = 1"),
            "29:8: faults.f.loss: only a `packet_loss` fault takes `loss`, not a `latency` one (a `latency` fault takes `latency`, `jitter`)",
        ),
    ]);
}

/// A Redis step's table: its keys read as declared (`step_keys::REDIS_STEP`), the keys of
/// some commands refused on the others.
#[test]
fn redis_step_mistakes() {
    let set = |keys: &str| {
        with(
            "command = \"GET\", connection = \"c\", key = \"k\" }",
            &format!("command = \"SET\", connection = \"c\", key = \"k\"{keys} }}"),
        )
    };
    check_all(&[
        (
            with("command = \"GET\", ", ""),
            // Said from its declaration since the redis table was declared (it said no more
            // than "missing field `command`" before).
            "16:20: flows.f.steps[0].redis: missing field `command`, which a step's `redis` \
             requires: the command the step sends: `\"SET NX PX\"` is a lock's, failing with \
             `lock_busy` if the key exists; `\"PUBLISH\"` sends the key to `channel`'s \
             subscribers (see Pub/Sub above) (docs/scenario-format.md)",
        ),
        (
            with("key = \"k\" }", "key = \"k\", size = 1 }"),
            "16:68: flows.f.steps[0].redis.size: unknown field `size`, expected one of `command`, `connection`, `key`, `value`, `ttl`, `replay_writes`, `channel`",
        ),
        (
            with("key = \"k\" }", "key = \"k\", channel = \"news\" }"),
            "16:78: flows.f.steps[0].redis.channel: applies to PUBLISH only: this command sends no message",
        ),
        (
            with("key = \"k\" }", "key = \"k\", ttl = \"1s\" }"),
            "16:74: flows.f.steps[0].redis.ttl: applies to SET and SET NX PX only: this command writes no value",
        ),
        (
            with("command = \"GET\"", "command = \"PUBLISH\""),
            "16:32: flows.f.steps[0].redis.channel: PUBLISH needs the channel it sends the key to (`channel = \"...\"`)",
        ),
        (
            with("command = \"GET\"", "command = 1"),
            "16:32: flows.f.steps[0].redis.command: wanted string or table",
        ),
        (
            set(", ttl = \"0s\""),
            "16:74: flows.f.steps[0].redis.ttl: must be longer than zero (the key would expire as it is written)",
        ),
        (
            set(", value = \"1GiB\""),
            "16:76: flows.f.steps[0].redis.value: 1073741824 bytes is above Redis' limit of 512MiB for one value",
        ),
        (
            set(", ttl = 5"),
            "16:74: flows.f.steps[0].redis.ttl: `5` has no unit: write it as a string with a unit, e.g. \"5ms\"",
        ),
    ]);
}

/// A step's own keys, beside its action: read as `step_keys::STEP` declares them, with the
/// messages the derived struct that read them before gave.
#[test]
fn step_key_mistakes() {
    let step = |keys: &str| {
        with(
            "{ db = { name = \"db\" } }",
            &format!("{{ db = {{ name = \"db\" }}{keys} }}"),
        )
    };
    check_all(&[
        (
            step(", timeout_ms = 5"),
            "16:115: flows.f.steps[1].timeout_ms: unknown field `timeout_ms`, expected one of `redis`, `db`, `work`, `call`, `cache`, `throttle`, `rate_limit`, `lock`, `breaker`, `bulkhead`, `semaphore`, `retry`, `adaptive_limit`, `policies`, `on_error`, `on_hit`, `label`, `finally`",
        ),
        (
            step(", on_error = \"nxt\""),
            "16:126: flows.f.steps[1].on_error: unknown variant `nxt`: did you mean `next`? (expected one of `fail`, `next`, `ignore`)",
        ),
        (
            step(", on_error = 1"),
            "16:126: flows.f.steps[1].on_error: wanted string or table",
        ),
        (
            step(", finally = \"yes\""),
            "16:125: flows.f.steps[1].finally: invalid type: string \"yes\", expected a boolean",
        ),
        (
            step(", on_hit = 5"),
            "16:124: flows.f.steps[1].on_hit: invalid type: integer `5`, expected a string",
        ),
        (
            step(", label = [\"a\"]"),
            "16:123: flows.f.steps[1].label: invalid type: sequence, expected a string",
        ),
        (
            step(", breaker = 5"),
            "16:125: flows.f.steps[1].breaker: invalid type: integer `5`, expected a policy's name, or a list of names of policies of one kind",
        ),
        (
            step(", breaker = [5]"),
            "16:126: flows.f.steps[1].breaker[0]: invalid type: integer `5`, expected a string",
        ),
        (
            step(", policies = \"retry\""),
            "16:126: flows.f.steps[1].policies: invalid type: string \"retry\", expected a sequence",
        ),
        (
            step(", policies = [\"retri\"]"),
            "16:127: flows.f.steps[1].policies[0]: \"retri\" is not a policy kind: did you mean \"retry\"? (the kinds are retry, bulkhead, semaphore, breaker, adaptive_limit)",
        ),
        (
            with("{ db = { name = \"db\" } }", "\"db\""),
            "16:91: flows.f.steps[1]: expected a table, found string \"db\": write it as `steps[1] = { ... }` or a `[flows.f.steps[1]]` section",
        ),
        (
            step(", label = \"a\" }, { work = \"1ms\", label = \"a\""),
            "16:154: flows.f.steps[2].label: two steps are labelled `a`",
        ),
    ]);
}

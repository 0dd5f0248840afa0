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
steps = [{ redis = "GET", connection = "c", key = "k", on_error = "next" }, { db = "db" }]

[loads.l]
flow = "f"
arrivals = "even"
rate = 10
count = 5
"#;

/// Rejects `text` with a first message equal to `t.toml:{expected}` (an `expected` that starts
/// with a space is a problem of the whole file, which has no line).
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

#[test]
fn the_base_is_valid() {
    let file = outagelab_scenario_file::parse(BASE, Path::new("t.toml")).unwrap();
    assert_eq!(file.variants.len(), 1);
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
            "5:1: servers.redis.cost: unknown field `cost`, expected one of `command_cost`, `byte_rate`, `persistence`, `preload`",
        ),
        (
            with("name = \"t\"", "seed = 3"),
            "1:1: scenario: missing field `name`",
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
            with("rate = 10", "rate = -5"),
            "21:8: loads.l.rate: must be a positive number of requests per second, not -5",
        ),
        (
            with("rate = 10", "rate = nan"),
            "21:8: loads.l.rate: must be a positive number of requests per second, not NaN",
        ),
        (
            with("server = \"redis\"", "server = \"redsi\""),
            "7:10: connections.c.server: unknown server `redsi` (defined: redis)",
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
            format!("{BASE}\n[run]\nhorizon = \"1h\"\n[metrics]\nbucket = \"1ms\"\n"),
            "27:10: metrics.bucket: 3600001 buckets to the horizon, more than the 1000000 a series keeps: use a wider bucket",
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
            "27:22: breakers.b.counts: `ok` is a success, not a failure to count",
        ),
        (
            with("{ db = \"db\" }", "{ db = \"db\", redis = \"GET\" }"),
            "16:77: flows.f.steps[1]: a step does exactly one thing: set one of `redis`, `db`, `work`, `cache`, `rate_limit` or `throttle`",
        ),
        (
            with(
                "{ db = \"db\" }",
                "{ redis = \"SET NX PX\", connection = \"c\", key = \"k\" }",
            ),
            "16:87: flows.f.steps[1].ttl: SET NX PX needs a ttl (the PX argument)",
        ),
        (
            with("redis = \"GET\"", "redis = \"GETT\""),
            "16:20: flows.f.steps[0].redis: unknown variant `GETT`, expected one of `GET`, `SET`, `SET NX PX`, `INCR`, `DEL`",
        ),
        (
            with("{ db = \"db\" }", "{ db = \"db\", on_hit = \"finish\" }"),
            "16:99: flows.f.steps[1].on_hit: does not apply to a database step",
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
            "25:10: faults.down.target: `db` is a database: faults can target Redis servers only",
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
            "27:13: retries.r.retry_on: unknown outcome `okay` (outcomes: timeout, refused, connection_lost, breaker_open, shed, server_error, lock_busy, rate_limited)",
        ),
        (
            with("{ db = \"db\" }", "{ db = \"db\", retry = \"nope\" }"),
            "16:98: flows.f.steps[1].retry: unknown retry policy `nope`: the scenario defines none",
        ),
        (
            format!("{BASE}\n[caches.l1]\nmax_entries = 0\nmax_bytes = \"1MiB\"\nttl = \"1s\"\n"),
            "25:15: caches.l1.max_entries: must be at least 1 (a cache of zero entries stores nothing; leave the L1 out)",
        ),
        (
            format!(
                "{BASE}\n[caches.l1]\nmax_entries = 10\nmax_bytes = \"1MiB\"\nttl = \"1s\"\n[flows.g]\nsteps = [{{ cache = \"l1\", op = \"fetch\", key = \"k\" }}]\n"
            ),
            "29:31: flows.g.steps[0].op: `fetch` is not a cache op: \"get\", \"put\", \"invalidate\" or \"flush\"",
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
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\n[flows.g]\nsteps = [{{ throttle = \"t\", key = \"k\" }}]\n"
            ),
            "28:23: flows.g.steps[0].op: a throttle step needs op: \"acquire\" or \"release\"",
        ),
        (
            format!(
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\n[flows.g]\nsteps = [{{ throttle = \"t\", op = \"get\", key = \"k\" }}]\n"
            ),
            "28:33: flows.g.steps[0].op: `get` is not a throttle op: \"acquire\" or \"release\"",
        ),
        (
            format!(
                "{BASE}\n[flows.g]\nsteps = [{{ throttle = \"t\", op = \"acquire\", key = \"k\" }}]\n"
            ),
            "25:23: flows.g.steps[0].throttle: unknown throttle `t`: the scenario defines none",
        ),
        (
            format!(
                "{BASE}\n[throttles.t]\nform = \"atomic\"\ninflight_max = 10\n[flows.g]\nsteps = [{{ throttle = \"t\", op = \"acquire\" }}]\n"
            ),
            "28:23: flows.g.steps[0].key: a throttle counts per key: name a [keys.<name>] family",
        ),
        (
            with("{ db = \"db\" }", "{ db = \"db\", op = \"get\" }"),
            "16:95: flows.f.steps[1].op: applies to a cache or throttle step only",
        ),
        (
            with("{ db = \"db\" }", "{ db = \"db\", lock = \"nope\" }"),
            "16:97: flows.f.steps[1].lock: unknown key family `nope` (defined: k)",
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
            with("{ db = \"db\" }", "{ db = \"db\", replay_writes = true }"),
            "16:106: flows.f.steps[1].replay_writes: applies to a Redis step, or a rate-limit step with a store: the steps that send a command a reconnect slot could replay",
        ),
        (
            with(
                "count = 5",
                "count = 5\n\n[faults.k]\ntarget = \"redis\"\nkind = \"kill\"\nat = \"1s\"\nduration = \"1s\"",
            ),
            "28:12: faults.k.duration: a kill happens at one instant (the server keeps running): leave duration out",
        ),
    ];
    assert!(cases.len() >= 15);
    let mut wrong = Vec::new();
    for (text, expected) in &cases {
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

#[test]
fn a_fault_targets_the_server_even_when_a_database_shares_its_name() {
    let text = with("[servers.redis]", "[servers.db]")
        .replace("server = \"redis\"", "server = \"db\"")
        + "\n[faults.down]\ntarget = \"db\"\nkind = \"stop\"\nat = \"1s\"\n";
    let file = outagelab_scenario_file::parse(&text, Path::new("t.toml"))
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    assert_eq!(file.variants[0].scenario.faults.len(), 1);
}

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
            "16:77: flows.f.steps[1]: a step does exactly one thing: set one of `redis`, `db`, `work`, `cache` or `rate_limit`",
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

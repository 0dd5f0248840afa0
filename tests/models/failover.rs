//! Replicas and failover: a replica follows its primary's writes a lag behind; a failover kills
//! the primary and, after its detection and election time, promotes the replica, which has the
//! data (but the writes of its last lag); a restart of the primary instead comes back empty and
//! sends a second miss wave to the database. Checked on small hand-counted runs.

use std::path::Path;

use outagelab_report::VariantReport;

const BASE: &str = r#"
[scenario]
name = "failover"

[run]
horizon = "30s"

[servers.redis]
preload = [{ key = "product" }]

[servers.replica]
replica_of = "redis"
replication_lag = "50ms"

[connections.cache]
server = "redis"
command_timeout = "100ms"
offline_queue = false

[keys.product]
count = 10000

[databases.main]
latency = "5ms"

[flows.read]
steps = [
  { redis = { command = "GET", connection = "cache", key = "product" }, on_hit = "finish", on_error = "next" },
  { db = { name = "main" }, on_error = "fail" },
  { redis = { command = "SET", connection = "cache", key = "product", ttl = "300s" }, on_error = "next" },
]

[loads.users]
flow = "read"
arrivals = "even"
rate = 100
duration = "25s"
"#;

fn run(extra: &str) -> VariantReport {
    let text = format!("{BASE}{extra}");
    let file = outagelab_scenario_file::parse(&text, Path::new("failover.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    outagelab_sim::run(&file.variants[0].scenario).unwrap()
}

#[test]
fn a_promoted_replica_has_the_data_and_a_restarted_primary_is_empty() {
    // Every read hits the warm primary until it dies at 5 s; from then until 15 s every
    // read times out and goes to the database (1000 reads). After a failover the promoted
    // replica has every key: the reads hit again. After a restart the server is empty: the
    // next 1000 reads (of 10 000 keys) nearly all miss, a second wave on the database.
    let failover = run(
        "\n[faults.primary-dies]\ntarget = \"redis\"\nkind = \"failover\"\nreplica = \"replica\"\nat = \"5s\"\nduration = \"10s\"\n",
    );
    let restart = run(
        "\n[faults.primary-dies]\ntarget = \"redis\"\nkind = \"stop\"\nat = \"5s\"\nduration = \"10s\"\n",
    );
    let queries = |r: &VariantReport| r.summary.databases["main"].queries;
    let during = 1000;
    assert!(
        (during..during + 60).contains(&queries(&failover)),
        "failover: {}",
        queries(&failover)
    );
    assert!(
        queries(&restart) > during + 800,
        "restart: {} (the second wave)",
        queries(&restart)
    );
    assert_eq!(failover.summary.outcomes["ok"], 2500);
    // Every read after the promotion went to the replica (the connection follows).
    assert!(failover.summary.servers["replica"].used_memory > 0);
}

#[test]
fn a_client_that_does_not_follow_failovers_stays_on_the_dead_address() {
    let text = BASE.replace(
        "offline_queue = false\n",
        "offline_queue = false\nfollows_failover = false\n",
    );
    let file = outagelab_scenario_file::parse(
        &format!(
            "{text}\n[faults.primary-dies]\ntarget = \"redis\"\nkind = \"failover\"\nreplica = \"replica\"\nat = \"5s\"\nduration = \"10s\"\n"
        ),
        Path::new("failover.toml"),
    )
    .unwrap();
    let report = outagelab_sim::run(&file.variants[0].scenario).unwrap();
    // From 5 s to the end every read goes to the database: 2000 of 2500.
    assert!(report.summary.databases["main"].queries >= 2000);
}

#[test]
fn a_failover_names_a_replica_of_its_target() {
    for (fault, expected) in [
        (
            "kind = \"failover\"\nat = \"5s\"",
            "faults.f.replica: a `failover` promotes a replica",
        ),
        (
            "kind = \"failover\"\nreplica = \"redis\"\nat = \"5s\"",
            "faults.f.replica: `redis` is not a replica of `redis`",
        ),
        (
            "kind = \"pause\"\nreplica = \"replica\"\nat = \"5s\"",
            "faults.f.replica: only a `failover` fault takes `replica`",
        ),
    ] {
        let text = format!("{BASE}\n[faults.f]\ntarget = \"redis\"\n{fault}\n");
        let message = outagelab_scenario_file::parse(&text, Path::new("f.toml"))
            .unwrap_err()
            .to_string();
        assert!(message.contains(expected), "{expected}: {message}");
    }
    let chain = BASE.replace(
        "[servers.replica]\nreplica_of = \"redis\"",
        "[servers.replica]\nreplica_of = \"replica\"",
    );
    let message = outagelab_scenario_file::parse(&chain, Path::new("f.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("a server cannot replicate itself"),
        "{message}"
    );
}

//! What every fault kind's declaration (`scenario-file/src/fault_kinds.rs`) promises, tried on
//! a few kinds: an unknown key is refused naming the valid keys, a value out of its range is
//! refused with the range, and a key left out takes its declared default.

use std::path::Path;

use outagelab_model::time::SimDuration;
use outagelab_sim::scenario::{FaultKind, PauseMode};

/// A Redis server with a connection, a database with a pool of 4, and a load; a case adds
/// `[faults.f]`.
const BASE: &str = r#"[scenario]
name = "t"

[servers.redis]

[servers.replica]
replica_of = "redis"

[connections.c]
server = "redis"

[databases.db]
latency = "10ms"
max_connections = 4

[flows.f]
steps = [{ redis = { command = "GET", connection = "c", key = "k" } }, { db = { name = "db" } }]

[keys.k]

[loads.l]
flow = "f"
arrivals = "even"
rate = 10
count = 5
"#;

fn with_fault(body: &str) -> String {
    format!("{BASE}\n[faults.f]\n{body}\n")
}

/// Every message `body` is refused with.
fn refusals(body: &str) -> String {
    match outagelab_scenario_file::parse(&with_fault(body), Path::new("t.toml")) {
        Ok(_) => panic!("accepted:\n{body}"),
        Err(diagnostics) => diagnostics.to_string(),
    }
}

/// The one fault `body` makes.
fn fault(body: &str) -> FaultKind {
    let file = outagelab_scenario_file::parse(&with_fault(body), Path::new("t.toml"))
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    let faults = &file.variants[0].scenario.faults;
    assert_eq!(faults.len(), 1);
    faults[0].kind
}

#[test]
fn an_unknown_key_is_refused_naming_every_key() {
    let message = refusals("target = \"redis\"\nkind = \"pause\"\nat = \"1s\"\nbogus = 1");
    assert!(
        message.contains(
            "faults.f.bogus: unknown field `bogus`, expected one of `enabled`, `target`, `kind`, \
             `at`, `duration`, `mode`"
        ),
        "{message}"
    );
    for key in [
        "maxmemory",
        "slowdown",
        "latency",
        "jitter",
        "loss",
        "retransmit",
        "delay",
    ] {
        assert!(message.contains(&format!("`{key}`")), "{key}: {message}");
    }
}

#[test]
fn a_key_of_another_kind_is_refused_naming_the_kinds_own_keys() {
    let message =
        refusals("target = \"c\"\nkind = \"latency\"\nat = \"1s\"\nlatency = \"5ms\"\nloss = 2");
    assert!(
        message.contains(
            "faults.f.loss: only a `packet_loss` fault takes `loss`, not a `latency` one \
             (a `latency` fault takes `latency`, `jitter`)"
        ),
        "{message}"
    );
    let message = refusals("target = \"redis\"\nkind = \"stop\"\nat = \"1s\"\nmode = \"write\"");
    assert!(
        message.contains("(a `stop` fault takes no keys of its own)"),
        "{message}"
    );
}

#[test]
fn a_value_out_of_its_range_is_refused_with_the_range() {
    for (body, expected) in [
        (
            "target = \"db\"\nkind = \"slow\"\nat = \"1s\"\nslowdown = 0.5",
            "faults.f.slowdown: 0.5 is not a slowdown: give how many times slower, above 1 and \
             at most 1000",
        ),
        (
            "target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\"\nloss = -1",
            "faults.f.loss: -1 is not a share of transmissions lost: above 0 and below 100 percent",
        ),
        (
            "target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\"\nloss = 1\nretransmit = \"0s\"",
            "faults.f.retransmit: must be longer than zero (a lost packet is sent again after it)",
        ),
        (
            "target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\"\nconnections = 0",
            "faults.f.connections: must be at least 1",
        ),
        (
            "target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\"\nconnections = 9",
            "faults.f.connections: 9 connections of a pool of 4 (`max_connections`): at most 4",
        ),
        (
            "target = \"redis\"\nkind = \"pause\"\nat = \"1s\"\nmode = \"reads\"",
            "faults.f.mode: unknown variant `reads`, expected `all` or `write`",
        ),
    ] {
        let message = refusals(body);
        assert!(message.contains(expected), "{expected}\n{message}");
    }
}

#[test]
fn a_key_left_out_takes_its_declared_default() {
    assert_eq!(
        fault("target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\"\nloss = 1"),
        FaultKind::PacketLoss {
            ppm: 10_000,
            retransmit: SimDuration::from_millis(200),
        }
    );
    assert_eq!(
        fault("target = \"c\"\nkind = \"latency\"\nat = \"1s\"\nlatency = \"5ms\""),
        FaultKind::Latency {
            added: SimDuration::from_millis(5),
            jitter: SimDuration::ZERO,
        }
    );
    assert_eq!(
        fault("target = \"redis\"\nkind = \"pause\"\nat = \"1s\""),
        FaultKind::Pause(PauseMode::All)
    );
    assert!(matches!(
        fault("target = \"redis\"\nkind = \"failover\"\nat = \"1s\"\nreplica = \"replica\""),
        FaultKind::Failover {
            unreachable: false,
            ..
        }
    ));
    // No fixed default: all of the pool.
    assert_eq!(
        fault("target = \"db\"\nkind = \"pool_exhausted\"\nat = \"1s\""),
        FaultKind::PoolExhausted { connections: 4 }
    );
}

#[test]
fn a_required_key_left_out_is_refused_at_kind() {
    let message = refusals("target = \"redis\"\nkind = \"maxmemory\"\nat = \"1s\"");
    assert!(
        message.contains(
            "t.toml:29:8: faults.f.maxmemory: a `maxmemory` fault sets a new limit: give it"
        ),
        "{message}"
    );
}

#[test]
fn explain_prints_a_faults_keys_with_their_defaults() {
    let text = with_fault("target = \"c\"\nkind = \"packet_loss\"\nat = \"1s\"\nloss = 2");
    let file = outagelab_scenario_file::parse(&text, Path::new("t.toml"))
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    let explained = outagelab_scenario_file::explain(&file.variants[0]);
    let expected = "[faults.f]\n  target = \"c\"  # set in the file\n  kind = \"packet_loss\"  # \
                    set in the file\n  at = \"1s\"  # set in the file\n  duration = none: the \
                    fault lasts to the end\n  loss = 2  # set in the file\n  retransmit = \
                    \"200ms\"\n";
    assert!(explained.contains(expected), "{explained}");
}

/// `cpu_throttle` (the kind added to show that a new kind is its declaration, its mechanism
/// and its tests): on a server, with its `slowdown` in thousandths; refused on a database,
/// without a slowdown, or with one that does not slow.
#[test]
fn a_cpu_throttle_acts_on_a_server_with_its_slowdown() {
    assert_eq!(
        fault("target = \"redis\"\nkind = \"cpu_throttle\"\nat = \"1s\"\nslowdown = 2.5"),
        FaultKind::CpuThrottle {
            slowdown_permille: 2500
        }
    );
    for (body, expected) in [
        (
            "target = \"db\"\nkind = \"cpu_throttle\"\nat = \"1s\"\nslowdown = 2",
            "t.toml:28:10: faults.f.target: a `cpu_throttle` fault acts on Redis: a database \
             takes `slow`, `refuse`, `pool_exhausted` or `lock_held`",
        ),
        (
            "target = \"redis\"\nkind = \"cpu_throttle\"\nat = \"1s\"",
            "t.toml:29:8: faults.f.slowdown: a `cpu_throttle` fault runs its server's commands \
             slower: say how many times, e.g. `slowdown = 4`",
        ),
        (
            "target = \"redis\"\nkind = \"cpu_throttle\"\nat = \"1s\"\nslowdown = 1",
            "faults.f.slowdown: 1 is not a slowdown: give how many times slower, above 1 and \
             at most 1000",
        ),
    ] {
        let message = refusals(body);
        assert!(message.contains(expected), "{expected}\n{message}");
    }
}

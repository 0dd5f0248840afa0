//! Seed 001's forwarder test, live against simulated: `scenarios/forwarder-outage.toml` cuts
//! the network between the gateway and Redis for 1.2 s (a `stop` with `persistence`; in the
//! second variant a `disconnect` of one connection). `outagelab live` puts a TCP forwarder in
//! front of each connection and takes it down for the fault, against a `redis-server` the
//! test starts; `outagelab run` simulates the same file. Per variant and connection, the live
//! run must fail open in the same 100 ms buckets (the first and the last within one), as many
//! times and with as many commands (within 5%, or 3 for small counts: a live caller arriving
//! on the edge of a bucket), with as many failed connect attempts (one per backoff window) and
//! reconnects; and the rate limiter must admit, refuse and admit unchecked as many requests
//! (within the same). A runner that woke late (a busy machine: the report's `runner` measures
//! it) widens the counts' bound by the requests of the time it lost, so the test adapts to a
//! busy machine instead of failing on it. (That
//! the spend is never applied twice is the file's own expectation, on the simulated side: a
//! live run does not see what the server applied.)
//!
//! Both sides run the same reconnect slot (the model's `ReconnectSlot`; live through
//! `LiveSlot`), so this checks the harness as much as the simulator: that a forwarder taken
//! down reads to the slot as a dropped and refused network does in the simulator.
//!
//! Its own test binary (about 10 s), so that no other test of this crate competes for the cores.

use crate::common;

use common::{read_report, scratch, simulated_and_live, succeed};
use outagelab_live::testing::RedisServer;

const FILE: &str = "scenarios/forwarder-outage.toml";
const VARIANTS: [&str; 2] = ["network cut", "one link cut"];
const CONNECTIONS: [&str; 3] = ["cache", "limits", "budgets"];

/// What a connection did in one variant of a report.
#[derive(Debug, PartialEq)]
struct Seen {
    /// Commands that reached the connection (a slot's refusals are not).
    commands: u64,
    fail_open: u64,
    /// The first and the last bucket with a request let through unchecked.
    window: Option<(usize, usize)>,
    connect_failures: u64,
    reconnects: u64,
}

fn seen(report: &serde_json::Value, variant: &str, connection: &str) -> Seen {
    let variant = common::variant(report, variant);
    let summary = &variant["summary"]["connections"][connection];
    let number = |value: &serde_json::Value| value.as_u64().unwrap();
    let buckets = &variant["series"]["counts"][format!("connections.{connection}.fail_open")];
    let open: Vec<usize> = (buckets
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter())
    .enumerate()
    .filter(|(_, count)| number(count) > 0)
    .map(|(index, _)| index)
    .collect();
    Seen {
        commands: number(&summary["commands"]),
        fail_open: number(&summary["fail_open"]),
        window: open.first().zip(open.last()).map(|(a, b)| (*a, *b)),
        connect_failures: number(&summary["connect_failures"]),
        reconnects: number(&summary["slot"]["reconnects"]),
    }
}

/// `live` within 5% of `simulated`, or within 3 for small counts, and `extra` more: a live
/// caller arriving on the edge of a bucket, or of a token, can fall on the other side (the
/// limiter's 26 rejections were 28 in one live run). Equal when the simulation says none.
fn close_to(live: u64, simulated: u64, extra: u64) -> bool {
    let slack = if simulated == 0 {
        0
    } else {
        (simulated / 20).max(3)
    };
    live.abs_diff(simulated) <= slack + extra
}

/// The requests a late runner of `variant` may have sent on the other side of an instant:
/// the file's rate, 150 a second, of its latest wake-up's lateness; 0 when it was never late.
fn late_requests(live: &serde_json::Value, variant: &str) -> u64 {
    let runner = &common::variant(live, variant)["runner"];
    if runner["late_wakes"].as_u64().unwrap() > 0 {
        (150.0 * runner["worst_lateness_ms"].as_f64().unwrap() / 1e3).ceil() as u64
    } else {
        0
    }
}

#[test]
fn a_cut_network_fails_open_live_in_the_window_the_simulation_says() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = scratch("live-outage");
    let address = server.address();
    let (simulated, live) = simulated_and_live(FILE, &address, &dir, &[]);
    for variant in VARIANTS {
        // A runner that woke late (a busy machine) sent what was due as a burst: the requests
        // of the time lost, the file's rate (150 a second) of the latest wake-up's lateness,
        // can fall on the other side of the cut, or of a token (a bound for one late stretch;
        // the run's start, which was the late stretch in CI once, is opened again until it is
        // on time). Counts are held to that much more; on a machine that kept up, to none.
        let lost = late_requests(&live, variant);
        for connection in CONNECTIONS {
            let (sim, measured) = (
                seen(&simulated, variant, connection),
                seen(&live, variant, connection),
            );
            println!("{variant}, {connection}: simulated {sim:?}, live {measured:?}");
            let context = format!("{variant}, {connection}: simulated {sim:?}, live {measured:?}");
            match (sim.window, measured.window) {
                (None, None) => {}
                (Some((first, last)), Some((live_first, live_last))) => assert!(
                    first.abs_diff(live_first) <= 1 && last.abs_diff(live_last) <= 1,
                    "the fail-open window is more than a bucket off: {context}"
                ),
                _ => panic!("one side failed open and the other did not: {context}"),
            }
            assert!(
                close_to(measured.fail_open, sim.fail_open, lost)
                    && close_to(measured.commands, sim.commands, lost),
                "fail-open or command counts further apart than close_to allows: {context}"
            );
            assert_eq!(
                (measured.connect_failures, measured.reconnects),
                (sim.connect_failures, sim.reconnects),
                "connect failures and reconnects: {context}"
            );
        }
    }
    // The rate limiter's decisions: the model's on both sides, on what its store answered
    // (and unchecked while the store was cut off).
    for variant in VARIANTS {
        let decisions = |report: &serde_json::Value| {
            let variant = common::variant(report, variant);
            let limiter = &variant["summary"]["rate_limits"]["tenant"];
            ["admitted", "rejected", "fail_open_admitted"].map(|key| limiter[key].as_u64().unwrap())
        };
        let (sim, measured) = (decisions(&simulated), decisions(&live));
        // A full bucket lost the tokens of the time a late runner lost (`late_requests`).
        let runner = &common::variant(&live, variant)["runner"];
        let lost_tokens = late_requests(&live, variant);
        println!(
            "{variant}, the limiter's admitted, rejected, fail-open: simulated {sim:?}, live \
             {measured:?}; the live runner's timing {runner}"
        );
        assert!(
            sim.iter()
                .zip(&measured)
                .all(|(&sim, &live)| close_to(live, sim, lost_tokens)),
            "{variant}: the limiter decided otherwise: simulated {sim:?}, live {measured:?}, \
             the runner's timing {runner}"
        );
    }
    // A run that ends while the network is still cut lists the fault all the same, from its
    // start (the simulated report does).
    let short = dir.join("short.json");
    succeed(&[
        "live",
        FILE,
        "--redis",
        &address,
        "--variant",
        "network cut",
        "--horizon",
        "1500ms",
        "--json",
        short.to_str().unwrap(),
    ]);
    let faults = &read_report(&short)["variants"][0]["faults"];
    assert_eq!(faults.as_array().map(Vec::len), Some(1), "{faults}");
    assert_eq!(faults[0]["name"], "network", "{faults}");
    let start = faults[0]["start_ms"].as_f64().unwrap();
    assert!((1000.0..1050.0).contains(&start), "{faults}");
    // The simulated side is what the file's header says: both controls fail open from the
    // cut at 1 s to the attempt at 2.5 s, after four refused attempts.
    let cut = seen(&simulated, "network cut", "budgets");
    assert_eq!((cut.window, cut.connect_failures), (Some((10, 25)), 4));
}

/// A limit of 20 a second, burst 20, kept in Redis under a family of `clients` keys, against
/// 400 checks a second, evenly spaced, for 2 s (800 checks).
fn twenty_a_second(clients: u32) -> String {
    format!(
        r#"[scenario]
name = "per-client-limit"

[run]
horizon = "3s"

[servers.redis]

[connections.limits]
server = "redis"
command_timeout = "500ms"

[keys.client]
count = {clients}

[rate_limits.api]
capacity = 20
rate = 20
store = "limits"

[flows.request]
steps = [{{ rate_limit = {{ name = "api", key = "client" }}, on_error = "next" }}]

[loads.clients]
flow = "request"
arrivals = "even"
rate = 400
duration = "2s"
"#
    )
}

/// Issue 31: a limiter kept in Redis has a bucket per key, simulated and live. "20/s per
/// client over 1,000 clients" at 400 a second refuses nothing (0.4 a second a client); "20/s
/// for everyone" (one key) admits the burst of 20 and then a token every 50 ms, every 20th
/// check: 20 + 39 = 59 of the 800 (the last check at 1.9975 s), and refuses 741. The live run
/// is held to the simulated counts within `close_to` (a live check on the edge of a token).
#[test]
fn a_limit_per_client_is_a_bucket_per_client_simulated_and_live() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = scratch("live-per-client-limit");
    for (clients, admitted, rejected) in [(1_000, 800, 0), (1, 59, 741)] {
        let file = dir.join(format!("clients-{clients}.toml"));
        std::fs::write(&file, twenty_a_second(clients)).unwrap();
        let (simulated, live) =
            simulated_and_live(file.to_str().unwrap(), &server.address(), &dir, &[]);
        let decisions = |report: &serde_json::Value| {
            let limiter = &report["variants"][0]["summary"]["rate_limits"]["api"];
            ["admitted", "rejected"].map(|key| limiter[key].as_u64().unwrap())
        };
        let (sim, measured) = (decisions(&simulated), decisions(&live));
        println!("{clients} clients: simulated {sim:?}, live {measured:?}");
        assert_eq!(sim, [admitted, rejected], "{clients} clients, simulated");
        let lost = (400.0
            * live["variants"][0]["runner"]["worst_lateness_ms"]
                .as_f64()
                .unwrap()
            / 1e3)
            .ceil() as u64;
        assert!(
            sim.iter()
                .zip(&measured)
                .all(|(&sim, &live)| close_to(live, sim, lost)),
            "{clients} clients: simulated {sim:?}, live {measured:?}"
        );
    }
}

//! Seed 003's retry storm, live against simulated: `scenarios/retry-storm.toml` (1,500 reads/s
//! with a spike to 2,400/s into a database of capacity 40, shared above it; 200 ms timeouts;
//! no retries, 3 attempts, 3 attempts with a 10% budget) run for real (`outagelab live`: the
//! database stood in by the work of each query's drawn latency, shared as simulated; the retry
//! policy and its budget through their live forms) and simulated. Per variant the live run
//! must end as many requests ok, run as many queries and retry as often, each within 5%, and
//! show the file's lesson: unbudgeted retries keep the database overloaded after the spike (a
//! metastable failure), a budget lets it recover.
//!
//! It takes the file's 10 s per variant, 30 s in all, in its own test binary so that no other
//! test competes for the cores. Timing-sensitive: how many requests a live run gets through
//! in 10 s of wall-clock time is the machine's throughput (on two busy cores the live database
//! ran a third fewer queries), so it runs only with `OUTAGELAB_TIMING_TESTS` set, as in
//! `.ci/run`'s timing step.

use crate::common;

use common::{scratch, simulated_and_live};
use outagelab_live::testing::{RedisServer, timing_tests};

const FILE: &str = "scenarios/retry-storm.toml";
const VARIANTS: [&str; 3] = ["no retries", "3 attempts", "3 attempts, 10% budget"];

/// Requests ended ok, queries run, retries granted.
fn figures(report: &serde_json::Value, variant: &str) -> [u64; 3] {
    let summary = &common::variant(report, variant)["summary"];
    [
        &summary["outcomes"]["ok"],
        &summary["databases"]["main"]["queries"],
        &summary["retries"]["client"]["retries"],
    ]
    .map(|value| value.as_u64().unwrap())
}

#[test]
fn a_retry_storm_overloads_the_database_live_as_simulated() {
    if !timing_tests(
        "seed 003's retry storm, live against simulated (throughput in wall-clock time)",
    ) {
        return;
    }
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = scratch("live-retry-storm");
    let (simulated, live) = simulated_and_live(FILE, &server.address(), &dir, &[]);
    for variant in VARIANTS {
        let (sim, measured) = (figures(&simulated, variant), figures(&live, variant));
        println!("{variant}: ok, queries, retries: simulated {sim:?}, live {measured:?}");
        for (name, (sim, live)) in ["ok", "queries", "retries"]
            .iter()
            .zip(sim.iter().zip(&measured))
        {
            assert!(
                live.abs_diff(*sim) * 20 <= *sim,
                "{variant}: {name} live {live} against simulated {sim}, more than 5% apart"
            );
        }
    }
    // The lesson, live: without a budget most requests fail to the end; with one, most succeed.
    let ok = |variant: &str| figures(&live, variant)[0];
    assert!(ok("3 attempts") < 5_000, "{}", ok("3 attempts"));
    assert!(ok("3 attempts, 10% budget") > 9_000);
}

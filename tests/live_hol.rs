//! Seed 000's head-of-line curve, live against simulated after calibration (issue 10's "done
//! when"): an INCR behind K queued 2 MiB SETs on the same connection
//! (`scenarios/shared-connection-hol.toml`), run for real against a `redis-server` the test
//! starts (`outagelab live`), and simulated with the connection figures `outagelab calibrate`
//! measures on that server (`outagelab run --set`, the snippet's values pasted over both
//! connections). The shared INCR's latency must agree within 25% at K = 30, 60 and 120.
//!
//! The calibration is a burst of 120 SETs, the largest K held: on this project's machine a
//! 2 MiB SET costs more the longer the burst (about a quarter more in one of 260 than in one
//! of 60: the client and the server hold every queued value's buffers at once), while a
//! simulated connection has one bandwidth, so the largest burst compared is the one measured
//! and the shorter ones run a little faster than simulated.
//!
//! Not held to the bound, and said in the README's validation table: K = 260, not run here
//! (1.7 s a run, and over by the growth above); K = 10, run and printed: a burst of 50 ms
//! carries the fixed costs of a burst (the first SET packed before anything is on the wire,
//! the last executed after it has all arrived) that a calibration of 120 spreads thinner, and
//! it is the most easily disturbed by other load (from -12% to +36% here). Nor is the separate
//! connection's INCR: the live client is one event loop (as ioredis' Node is), and that INCR
//! waits for the loop to finish writing the SETs it was handed first, a cost the simulator does
//! not model (it predicts a round trip). What the test checks of it is the HOL effect itself:
//! from K = 60, the separate INCR is faster than the shared one.
//!
//! Timing on a shared machine: each round is a calibration, a live run of every K and the
//! simulation with that calibration, and the difference held is the median over [`ROUNDS`]
//! rounds of each round's own (a round's parts are seconds apart, so a machine that slows
//! down for a while moves them together). Each is a process of its own as a user runs them:
//! on loopback most of a 2 MiB SET's cost is the client's (copying the value into the command,
//! packing it, the page faults of fresh buffers), and a process that has already written big
//! values reuses its memory and writes the next ones twice as fast or more, so each
//! measurement starts as fresh as the others.
//!
//! A measurement that misses the bound is taken once more, and the test fails if that one
//! misses too: the bound is not widened, a measurement that other load disturbed is retaken.
//!
//! Its own test binary, so that no other test of this crate competes for the two cores. About
//! 15 s (30 s when it retakes).

mod common;

use std::path::Path;

use common::{outagelab, scratch};
use outagelab_live::testing::RedisServer;

const FILE: &str = "scenarios/shared-connection-hol.toml";
/// The sweep's values that are run live: every one but K = 0 (a bare round trip: no SET is
/// queued, and 25% of ~0.1 ms is below the live run's millisecond timers) and K = 260 (see
/// the module's documentation).
const KS: [u64; 4] = [10, 30, 60, 120];
/// Those held to [`AGREEMENT`]: K = 10 is printed only (see the module's documentation).
const HELD: [u64; 3] = [30, 60, 120];
const ROUNDS: usize = 5;
/// The calibration's burst: the largest K held (see the module's documentation); `calibrate`
/// measures 60 by default, seed 000's figure.
const CALIBRATION_SETS: u64 = 120;
const AGREEMENT: f64 = 0.25;

fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut values: Vec<f64> = values.collect();
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The INCR latency (ms) of `flow` in each variant `K=k` of a report.
fn incr_latency(report: &serde_json::Value, flow: &str, k: u64) -> f64 {
    let variant = (report["variants"].as_array().unwrap().iter())
        .find(|v| v["name"] == format!("published fit / K={k}"))
        .unwrap_or_else(|| panic!("no variant K={k}"));
    let all = &variant["summary"]["flows"][flow]["latency_ms"]["all"];
    assert_eq!(all["count"], 1, "one INCR in {flow} at K={k}");
    all["max"].as_f64().unwrap()
}

fn read(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// One round: this machine's figures (`outagelab calibrate`: half the round trip one way, the
/// bandwidth of queued 2 MiB SETs), the live curve (`outagelab live` for each K), and the
/// simulated one with those figures.
struct Round {
    /// The snippet's `latency` and `bandwidth` values, as written.
    snippet: [String; 2],
    /// Per K: the shared and the separate INCR, live and simulated with this round's
    /// calibration.
    live: Vec<[f64; 2]>,
    simulated: Vec<[f64; 2]>,
}

fn run_ok(args: &[&str], codes: &[i32]) -> String {
    let output = outagelab(args);
    assert!(
        output
            .status
            .code()
            .is_some_and(|code| codes.contains(&code)),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The value of `key = "..."` in the calibration's snippet.
fn snippet_value(snippet: &str, key: &str) -> String {
    let line = (snippet.lines())
        .find(|line| line.starts_with(&format!("{key} = ")))
        .unwrap_or_else(|| panic!("no {key} in\n{snippet}"));
    line[key.len() + 3..].to_owned()
}

fn round(server: &RedisServer, dir: &Path, index: usize) -> Round {
    let address = server.address();
    let sets = CALIBRATION_SETS.to_string();
    let snippet = run_ok(&["calibrate", "--redis", &address, "--sets", &sets], &[0]);
    let measured = ["latency", "bandwidth"].map(|key| snippet_value(&snippet, key));
    let live = KS
        .iter()
        .map(|&k| {
            let json = dir.join(format!("live-{index}-{k}.json"));
            let variant = format!("published fit / K={k}");
            let args = ["live", FILE, "--redis", &address, "--variant", &variant];
            run_ok(
                &[&args[..], &["--json", json.to_str().unwrap()]].concat(),
                &[0],
            );
            let report = read(&json);
            [
                incr_latency(&report, "incr_shared", k),
                incr_latency(&report, "incr_separate", k),
            ]
        })
        .collect();
    let simulated = simulated(&measured, dir, index);
    Round {
        snippet: measured,
        live,
        simulated,
    }
}

/// The simulated curve with `snippet` pasted over both connections (the server's own cost
/// stays the file's, 10 us plus 4 GiB/s, well under the connection's).
fn simulated(snippet: &[String; 2], dir: &Path, index: usize) -> Vec<[f64; 2]> {
    let sets: Vec<String> = ["shared", "separate"]
        .iter()
        .flat_map(|connection| {
            [
                format!("connections.{connection}.latency={}", snippet[0]),
                format!("connections.{connection}.bandwidth={}", snippet[1]),
            ]
        })
        .collect();
    let json = dir.join(format!("simulated-{index}.json"));
    let mut args = vec!["run", FILE, "--json", json.to_str().unwrap()];
    for set in &sets {
        args.extend(["--set", set.as_str()]);
    }
    // The file's own expectations are for its published fit (exit 1 when they fail on this
    // machine's figures); only the report is read here.
    run_ok(&args, &[0, 1]);
    let report = read(&json);
    KS.iter()
        .map(|&k| {
            [
                incr_latency(&report, "incr_shared", k),
                incr_latency(&report, "incr_separate", k),
            ]
        })
        .collect()
}

#[test]
fn an_incr_behind_queued_sets_takes_as_long_live_as_the_calibrated_simulation_says() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = scratch("live-hol");
    // A measurement that misses is taken once more (other load on a shared machine can
    // disturb all five rounds of one); the bound is the same, and both must miss to fail.
    let first = measure(&server, &dir);
    if first.is_empty() {
        return;
    }
    println!("missed, measuring again:\n{}", first.join("\n"));
    let second = measure(&server, &dir);
    assert!(
        second.is_empty(),
        "the live HOL curve does not agree with the calibrated simulation within {}%, twice:\n\
         {}\nthen\n{}",
        AGREEMENT * 100.0,
        first.join("\n"),
        second.join("\n")
    );
}

/// Five rounds, their table printed; what missed the bounds.
fn measure(server: &RedisServer, dir: &Path) -> Vec<String> {
    let rounds: Vec<Round> = (0..ROUNDS).map(|index| round(server, dir, index)).collect();
    for (index, round) in rounds.iter().enumerate() {
        println!(
            "round {index}: calibrated latency {}, bandwidth {}; shared INCR live/simulated, \
             separate INCR live, ms: {}",
            round.snippet[0],
            round.snippet[1],
            (round.live.iter().zip(&round.simulated))
                .map(|([shared, separate], [simulated, _])| {
                    format!("{shared:.0}/{simulated:.0} {separate:.0}")
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    println!(
        "medians of {ROUNDS} rounds; diff: the median of each round's live against its own \
         calibrated simulation"
    );
    println!("K    shared live ms  shared sim ms  diff    separate live ms  separate sim ms");
    let mut failures = Vec::new();
    for (index, &k) in KS.iter().enumerate() {
        let of = |pick: &dyn Fn(&Round) -> f64| median(rounds.iter().map(pick));
        let shared = of(&|r| r.live[index][0]);
        let separate = of(&|r| r.live[index][1]);
        let shared_sim = of(&|r| r.simulated[index][0]);
        let separate_sim = of(&|r| r.simulated[index][1]);
        let difference = of(&|r| r.live[index][0] / r.simulated[index][0] - 1.0);
        let held = if HELD.contains(&k) {
            ""
        } else {
            "  (printed, not held)"
        };
        println!(
            "{k:<4} {shared:>14.1}  {shared_sim:>13.1}  {:>+5.1}%  {separate:>16.1}  {separate_sim:>15.1}{held}",
            difference * 100.0
        );
        if HELD.contains(&k) && difference.abs() > AGREEMENT {
            failures.push(format!(
                "K={k}: live {shared:.1} ms against simulated {shared_sim:.1} ms (rounds' \
                 median difference {:+.1}%)",
                difference * 100.0
            ));
        }
        if k >= 60 && separate >= shared {
            failures.push(format!(
                "K={k}: the separate connection's INCR ({separate:.1} ms) was not faster than \
                 the shared one's ({shared:.1} ms)"
            ));
        }
    }
    failures
}

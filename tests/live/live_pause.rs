//! A CLIENT PAUSE under a closed-loop load, live against simulated (issue 10's "done when"):
//! `scenarios/closed-loop-pause.toml`'s closed loop (50 callers, a GET each, 500 ms timeout,
//! 10 ms think) through a 2 s pause, run for real against a `redis-server` the test starts
//! (`outagelab live`) and simulated (`outagelab run`), then overlaid (`outagelab compare`): the
//! failure window (the first and the last 100 ms bucket in which a request timed out) must
//! start and end within one bucket of the simulated one.
//!
//! Both runs get the same three `--set`s, so they run the same file: the pause at 1 s and the
//! run ended at 4 s (the file's 2 s and 7 s would only add idle seconds), and `hz = 100`. The
//! last: a real pause ends on the server's first cron tick after its nominal end, at a phase
//! of its own, so with the file's 10 ticks a second it ends up to 100 ms late; the callers'
//! last requests of the pause time out 30 ms after its end (sent 1.53 s into it, with a 500 ms
//! timeout), so an end more than 30 ms late adds a fourth round of timeouts half a second
//! later (one live run in four, here, with the file's `hz`). The simulator puts its ticks at
//! multiples of 1 s / hz from the run's start, where the pause's end falls on one; at 100
//! ticks a second the real end is at most 10 ms late, inside the 30 ms.
//!
//! Its own test binary (about 5 s), so that no other test of this crate competes for the cores.

use crate::common;

use common::{scratch, succeed};
use outagelab_live::testing::RedisServer;

const FILE: &str = "scenarios/closed-loop-pause.toml";
const VARIANT: &str = "closed loop, 50 callers";
const SETS: [&str; 3] = [
    "faults.pause.at=\"1s\"",
    "run.horizon=\"4s\"",
    "servers.redis.hz=100",
];

fn with_sets<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    for set in SETS {
        all.extend(["--set", set]);
    }
    all
}

#[test]
fn a_live_pause_fails_requests_in_the_window_the_simulation_says() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = scratch("live-pause");
    let simulated = dir.join("simulated.json");
    let live = dir.join("live.json");
    let comparison = dir.join("comparison.json");
    let (simulated, live, comparison) = (
        simulated.to_str().unwrap(),
        live.to_str().unwrap(),
        comparison.to_str().unwrap(),
    );
    succeed(&with_sets(&["run", FILE, "--json", simulated]));
    let address = server.address();
    let args = ["live", FILE, "--redis", &address, "--variant", VARIANT];
    succeed(&with_sets(&[&args[..], &["--json", live]].concat()));
    let table = succeed(&["compare", simulated, live, "--json", comparison]);
    println!("{table}");

    let compared: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(comparison).unwrap()).unwrap();
    let variant = (compared["variants"].as_array().unwrap().iter())
        .find(|v| v["name"] == VARIANT)
        .expect("the closed loop is in both reports");
    let window = |report: usize| {
        let window = &variant["windows"][report];
        assert!(!window.is_null(), "report {report} has a failure window");
        [
            window["start_ms"].as_f64().unwrap(),
            window["end_ms"].as_f64().unwrap(),
        ]
    };
    let ([sim_start, sim_end], [live_start, live_end]) = (window(0), window(1));
    let errors = |report: usize| -> u64 {
        (variant["errors"][report].as_array().unwrap().iter())
            .map(|n| n.as_u64().unwrap())
            .sum()
    };
    println!(
        "failure window: simulated {sim_start:.0}-{sim_end:.0} ms ({} timeouts), live \
         {live_start:.0}-{live_end:.0} ms ({} timeouts)",
        errors(0),
        errors(1)
    );
    let shift = &variant["window_shift_buckets"];
    let [start_shift, end_shift] = [0, 1].map(|i| shift[i].as_i64().unwrap());
    assert!(
        start_shift.abs() <= 1 && end_shift.abs() <= 1,
        "the live window starts {start_shift:+} and ends {end_shift:+} buckets from the \
         simulated one (at most one bucket either way):\n{table}"
    );
    // The simulated window is what the file's header says: from the first timeouts 500 ms into
    // the pause to the end of the bucket of the third.
    assert_eq!([sim_start, sim_end], [1500.0, 2600.0]);
}

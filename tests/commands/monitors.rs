//! The invariant monitors, seen from the command line: each planted bug makes a bundled
//! scenario stop with exit 1, a message that names the invariant, the simulated time and the
//! entity, and the command that reproduces it. The same files without the bug exit 0 (see
//! `scenarios.rs`, which runs every bundled file and checks its expectations).

use std::process::Command;

/// Runs `file` with `bug` planted and checks what the monitor says.
fn check(file: &str, bug: &str, invariant: &str, entity: &str) {
    let output = Command::new(env!("CARGO_BIN_EXE_outagelab"))
        .args(["run", file, "--plant-bug", bug])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{bug} on {file}: {stderr}");
    let expected = format!("invariant violated: {invariant} at ");
    assert!(stderr.contains(&expected), "{bug}: {stderr}");
    assert!(stderr.contains(" ms (simulated), "), "{bug}: {stderr}");
    assert!(stderr.contains(&format!(", {entity}: ")), "{bug}: {stderr}");
    let reproduce = format!("reproduce with: outagelab run {file} --seed 1 --plant-bug {bug}");
    assert!(stderr.contains(&reproduce), "{bug}: {stderr}");
    assert!(
        output.stdout.is_empty(),
        "a run that broke an invariant prints no figures"
    );
}

#[test]
fn a_bulkhead_that_admits_one_too_many_is_caught() {
    check(
        "scenarios/redis-dead-protection.toml",
        "bulkhead-admits-one-too-many",
        "limit never exceeded",
        "bulkhead db",
    );
}

#[test]
fn a_request_that_vanishes_without_ending_is_caught() {
    check(
        "scenarios/redis-dead-protection.toml",
        "shed-request-vanishes",
        "request conservation",
        "requests",
    );
}

#[test]
fn a_slot_without_its_generation_check_is_caught_evicting_the_replacement() {
    check(
        "scenarios/reconnect-slot.toml",
        "slot-ignores-generation",
        "no stale-generation eviction",
        "connection cache",
    );
}

#[test]
fn a_slot_that_replays_a_write_nobody_opted_into_is_caught_applying_it_twice() {
    check(
        "scenarios/reconnect-slot.toml",
        "slot-replays-every-write",
        "no write applied twice",
        "connection budgets",
    );
}

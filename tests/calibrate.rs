//! `outagelab calibrate`'s snippet is a valid `[connections]` table: pasted over the HOL
//! scenario's shared connection, the file still validates.

use std::path::Path;
use std::time::Duration;

use outagelab_live::calibrate::{Calibration, Plan};

#[test]
fn the_calibration_snippet_validates_in_the_hol_scenario() {
    let measured = Calibration {
        plan: Plan::SEED_000,
        round_trip_median: Duration::from_micros(17),
        sets_elapsed: Duration::from_millis(156),
        bytes_per_second: 800 << 20,
    };
    let snippet = measured.snippet("shared", "redis");
    assert!(
        snippet.contains("latency = \"8us\"\nbandwidth = \"800MiB/s\"\n"),
        "{snippet}"
    );
    let path = Path::new("scenarios/shared-connection-hol.toml");
    let original = std::fs::read_to_string(path).expect("the bundled HOL scenario");
    let table =
        "[connections.shared]\nserver = \"redis\"\nlatency = \"100us\"\nbandwidth = \"100MiB/s\"\n";
    assert!(
        original.contains(table),
        "the HOL file still has its shared connection"
    );
    let calibrated = original.replace(table, &snippet);
    if let Err(diagnostics) = outagelab_scenario_file::parse(&calibrated, path) {
        panic!("the calibrated file does not validate:\n{diagnostics}\n{calibrated}");
    }
}

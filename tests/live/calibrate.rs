//! `outagelab calibrate`'s snippet is a valid `[servers]`, `[client_loops]` and `[connections]`
//! table: pasted over the HOL scenario's server and shared connection, the file still
//! validates.

use std::path::Path;
use std::time::Duration;

use outagelab_live::calibrate::{Calibration, LoopTurns, Plan};

#[test]
fn the_calibration_snippet_validates_in_the_hol_scenario() {
    let measured = Calibration {
        plan: Plan::SEED_000,
        round_trip_median: Duration::from_micros(17),
        // 60 SETs of 2 MiB, built in 60 ms, then the writer 1 ms a SET and the pipe 1.5 ms
        // (151 - 60 = 1 + 60 x 1.5).
        sets_elapsed: Duration::from_micros(151_017),
        burst: LoopTurns {
            build: Duration::from_millis(60),
            writer: Duration::from_millis(20),
        },
        // 4 SETs, 8 MiB, copied in 4 ms: 2000 MiB/s, so 40 MiB in the big burst's turn.
        small_burst: LoopTurns {
            build: Duration::from_millis(4),
            writer: Duration::from_millis(4),
        },
        incr_server_nanos: 1_500,
        set_server_nanos: 301_500,
    };
    let snippet = measured.snippet("shared", "redis");
    assert!(
        snippet.contains(
            "write_rate = \"2000MiB/s\"\ncopy_rate = \"2000MiB/s\"\ncopy_before_yield = 41943040\n"
        ),
        "{snippet}"
    );
    assert!(
        snippet
            .contains("latency = \"8us\"\nbandwidth = \"1333MiB/s\"\nclient_loop = \"shared\"\n"),
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
    let server = "[servers.redis]\ncommand_cost = \"10us\"\nbyte_rate = \"4GiB/s\"\n";
    assert!(
        original.contains(server),
        "the HOL file still has its server"
    );
    let calibrated = original.replace(server, "").replace(table, &snippet);
    assert!(
        calibrated
            .contains("[servers.redis]\ncommand_cost = \"1500ns\"\nbyte_rate = \"6666MiB/s\"\n"),
        "{calibrated}"
    );
    if let Err(diagnostics) = outagelab_scenario_file::parse(&calibrated, path) {
        panic!("the calibrated file does not validate:\n{diagnostics}\n{calibrated}");
    }
}

//! `calibrate` against a real `redis-server` (started by the test), on a small plan.

use std::time::Duration;

use outagelab_live::calibrate::{KEY_PREFIX, Plan, calibrate};
use outagelab_live::testing::{RedisServer, timing_tests};

/// On one thread, as `outagelab calibrate` runs it: the client loop's share is one thread's.
#[tokio::test(flavor = "current_thread")]
async fn calibration_measures_a_round_trip_a_loop_and_a_bandwidth_and_cleans_up() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let plan = Plan {
        pings: 20,
        sets: 8,
        set_bytes: 256 << 10,
        incrs: 50,
        small_sets: 2,
    };
    let measured =
        tokio::time::timeout(Duration::from_secs(20), calibrate(&server.address(), plan))
            .await
            .expect("bounded")
            .expect("calibrated");
    assert!(measured.round_trip_median > Duration::ZERO);
    assert!(
        measured.round_trip_median < Duration::from_millis(100),
        "{measured:?}"
    );
    assert!(measured.sets_elapsed >= measured.round_trip_median);
    // Loopback moves 2 MiB in well under a second, and the loop copies it faster still.
    assert!(measured.bytes_per_second() > 2 << 20, "{measured:?}");
    assert!(measured.loop_bytes_per_second() > 2 << 20, "{measured:?}");
    assert!(measured.copy_bytes_per_second() > 2 << 20, "{measured:?}");
    // The loop's share is part of the burst, whose last reply comes after the loop built it
    // and the writer had its turn; on a busy machine the turns are the scheduler's, so these
    // hold where timing is (`TIMING_TESTS_VAR`). The copy before a yield is clamped to the
    // bursts by construction.
    if timing_tests("that a calibration's loop turns fit inside its burst") {
        assert!(
            measured.burst.build + measured.burst.writer < measured.sets_elapsed,
            "{measured:?}"
        );
    }
    assert!(
        (2 * (256 << 10)..=8 * (256 << 10)).contains(&measured.copy_before_yield()),
        "{measured:?}"
    );
    // The server's own figures: an INCR takes well under a millisecond to execute.
    assert!(
        (1..1_000_000).contains(&measured.incr_server_nanos),
        "{measured:?}"
    );
    assert!(measured.set_server_nanos > 0, "{measured:?}");
    let snippet = measured.snippet("calibrated", "redis");
    assert!(
        snippet.contains("[servers.redis]\ncommand_cost = \""),
        "{snippet}"
    );
    assert!(snippet.contains("[client_loops.calibrated]\nwrite_rate = \""));
    assert!(snippet.contains("MiB/s\"\ncopy_rate = \""), "{snippet}");
    assert!(snippet.contains("\ncopy_before_yield = "), "{snippet}");
    assert!(snippet.contains("[connections.calibrated]\nserver = \"redis\"\nlatency = \""));
    assert!(
        snippet.contains("client_loop = \"calibrated\"\n"),
        "{snippet}"
    );
    assert!(snippet.contains("MiB/s\"\n"), "{snippet}");

    let client = redis::Client::open(format!("redis://{}/", server.address())).unwrap();
    let mut connection = client.get_multiplexed_async_connection().await.unwrap();
    let left: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{KEY_PREFIX}*"))
        .query_async(&mut connection)
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "the calibration deleted its keys: {left:?}"
    );
}

/// On a runtime of several threads the loop it would measure is not one thread's: refused
/// before anything is sent (no server needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calibration_on_several_threads_is_refused() {
    let error = calibrate("127.0.0.1:1", Plan::SEED_000)
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("current-thread"), "{error}");
}

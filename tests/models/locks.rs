//! Distributed locks as a step, through whole runs of small scenario files with hand-computed
//! timings. Every file has one server (5 us a command) behind a connection with 1 ms each way,
//! so a lock command sent at t is applied at t + 1 ms and answered at t + 2.005 ms (later when
//! it queues behind another command at the server).

use std::path::Path;

use outagelab_report::Summary;

/// The server, the connection, the lock key and the lock `files` with `lock`'s keys, then
/// `rest`.
fn file(lock: &str, rest: &str) -> String {
    format!(
        r#"
[scenario]
name = "locks"
expect = ["locks.files.peak_writers <= 1", "outcomes.lock_timeout == locks.files.timed_out"]

[servers.redis]

[connections.c]
server = "redis"
latency = "1ms"

[keys.lock]

[locks.files]
{lock}

{rest}
"#
    )
}

/// Runs every variant of `text` and checks its expectations; returns each variant's name and
/// summary.
fn run(text: &str) -> Vec<(String, Summary)> {
    let file = outagelab_scenario_file::parse(text, Path::new("locks.toml"))
        .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
    file.variants
        .iter()
        .map(|variant| {
            let report = outagelab_sim::run(&variant.scenario).expect("runs");
            for located in &variant.expectations {
                let evaluation = located.expectation.evaluate(&report.summary).unwrap();
                assert!(
                    evaluation.passed,
                    "{}: {evaluation:?}",
                    located.expectation.text()
                );
            }
            (variant.name.clone(), report.summary)
        })
        .collect()
}

fn run_one(text: &str) -> Summary {
    run(text).remove(0).1
}

/// The slowest request of `flow`, in ms.
fn max_ms(summary: &Summary, flow: &str) -> f64 {
    summary.flows[flow].latency_ms["all"]
        .max
        .unwrap_or_else(|| panic!("{flow} has no ended request"))
}

fn assert_near(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() < 0.05,
        "{what}: {actual} ms, expected {expected} ms"
    );
}

const ACQUIRE: &str = r#"{ lock = { name = "files", op = "acquire", mode = "exclusive", connection = "c", key = "lock" } }"#;
const SHARED: &str = r#"{ lock = { name = "files", op = "acquire", mode = "shared", connection = "c", key = "lock" } }"#;
const RELEASE: &str =
    r#"{ lock = { name = "files", op = "release", connection = "c", key = "lock" } }"#;

fn burst(name: &str, flow: &str, start: &str, count: u32) -> String {
    format!(
        "[loads.{name}]\nflow = \"{flow}\"\narrivals = \"burst\"\ncount = {count}\nstart = \"{start}\"\n"
    )
}

/// Five writers at once take turns: each holds the lock for its 20 ms of work, so the last
/// ends after 100 ms, and the server never saw two holders. Five readers at once all hold it
/// together.
#[test]
fn writers_take_turns_and_readers_share() {
    let text = file(
        r#"lease = "30s"
retry_delay = "5ms"
acquire_timeout = "10s""#,
        &format!(
            "[flows.write]\nsteps = [{ACQUIRE}, {{ work = \"20ms\" }}, {RELEASE}]\n\
             [flows.read]\nsteps = [{SHARED}, {{ work = \"20ms\" }}, {RELEASE}]\n\
             {}\n{}",
            burst("writers", "write", "0s", 5),
            burst("readers", "read", "1s", 5),
        ),
    );
    let summary = run_one(&text);
    assert_eq!(summary.outcomes["ok"], 10);
    let lock = &summary.locks["files"];
    assert_eq!((lock.acquired, lock.released), (10, 10));
    assert_eq!((lock.peak_writers, lock.peak_readers), (1, 5));
    assert_eq!(lock.expired_leases, 0);
    assert!(lock.busy_retries > 0);
    let writers = max_ms(&summary, "write");
    assert!(writers > 5.0 * 20.0, "the writers overlapped: {writers} ms");
    // Readers: acquire (2.005 ms, the last queued 20 us behind the others), work, release.
    let readers = max_ms(&summary, "read");
    assert!(
        readers < 25.0,
        "the readers waited for each other: {readers} ms"
    );
}

/// Three readers hold the lock from 1 ms to their releases at 53.005-53.015 ms. A writer
/// arriving at 10 ms is busy every 7.005 ms (a 2.005 ms round trip and a 5 ms delay) until its
/// seventh attempt, applied at 11 + 6 × 7.005 = 53.03 ms: it holds until its release is
/// applied at 65.035 ms and ends at 66.04 ms (56.04 ms after it came). A reader arriving at
/// 55 ms is busy at 56 and 63.005 ms, holds from 70.01 ms, and ends at 123.02 ms (68.02 ms).
#[test]
fn readers_exclude_a_writer_and_a_writer_excludes_readers() {
    let text = file(
        r#"lease = "30s"
retry_delay = "5ms"
acquire_timeout = "1s""#,
        &format!(
            "[flows.read]\nsteps = [{SHARED}, {{ work = \"50ms\" }}, {RELEASE}]\n\
             [flows.write]\nsteps = [{ACQUIRE}, {{ work = \"10ms\" }}, {RELEASE}]\n\
             [flows.late_read]\nsteps = [{SHARED}, {{ work = \"50ms\" }}, {RELEASE}]\n\
             {}\n{}\n{}",
            burst("readers", "read", "0s", 3),
            burst("writer", "write", "10ms", 1),
            burst("late_reader", "late_read", "55ms", 1),
        ),
    );
    let summary = run_one(&text);
    assert_eq!(summary.outcomes["ok"], 5);
    assert_near(max_ms(&summary, "write"), 56.04, "the writer");
    assert_near(max_ms(&summary, "late_read"), 68.02, "the late reader");
    let lock = &summary.locks["files"];
    assert_eq!(lock.busy_retries, 6 + 2);
    assert_eq!(
        (lock.acquired, lock.released, lock.release_refused),
        (5, 5, 0)
    );
    assert_eq!((lock.peak_writers, lock.peak_readers), (1, 3));
}

/// A holder whose request fails (its query times out) never releases: its 100 ms lease,
/// taken at 1 ms, ends at 101 ms. The next request, from 20 ms, is busy until its attempt
/// applied at 21 + 12 × 7.005 = 105.06 ms, and ends at 108.07 ms (88.07 ms). With the release
/// as a `finally` step, the failed request gives the lock back at 13.005 ms, and the next one
/// takes it at its first attempt.
#[test]
fn a_dead_holders_lease_expires_unless_a_finally_release_frees_it() {
    let text = file(
        r#"lease = "100ms"
retry_delay = "5ms"
acquire_timeout = "1s""#,
        &format!(
            "[databases.main]\nlatency = \"50ms\"\n\
             [flows.dies]\nsteps = [{ACQUIRE}, {{ db = {{ name = \"main\", timeout = \"10ms\" }} }}, {RELEASE}]\n\
             [flows.next]\nsteps = [{ACQUIRE}, {RELEASE}]\n\
             {}\n{}\n\
             [[variant]]\nname = \"no finally\"\n\
             [[variant]]\nname = \"finally\"\n\
             [variant.patch.flows.dies.steps.2]\nfinally = true\n",
            burst("dies", "dies", "0s", 1),
            burst("next", "next", "20ms", 1),
        ),
    );
    let runs = run(&text);
    let (_, leaked) = &runs[0];
    assert_eq!(leaked.outcomes["timeout"], 1);
    assert_near(max_ms(leaked, "next"), 88.07, "after the lease expired");
    let lock = &leaked.locks["files"];
    assert_eq!(
        (lock.acquired, lock.released, lock.expired_leases),
        (2, 1, 1)
    );
    assert_eq!(lock.busy_retries, 12);
    let (_, released) = &runs[1];
    assert_eq!(released.outcomes["timeout"], 1);
    assert_near(max_ms(released, "next"), 4.01, "after the finally release");
    let lock = &released.locks["files"];
    assert_eq!(
        (lock.acquired, lock.released, lock.expired_leases),
        (2, 2, 0)
    );
    assert_eq!(lock.busy_retries, 0);
}

/// A holder that outlives its 50 ms lease (taken at 1 ms, ended at 51 ms) releases at
/// 103.005 ms, after another took the lock at 61 ms: its compare-and-delete finds the other's
/// token and is refused, and the other's lock stays until its own release at 108.005 ms.
#[test]
fn a_release_after_the_lease_expired_is_refused() {
    let text = file(
        r#"lease = "50ms"
retry_delay = "5ms"
acquire_timeout = "1s""#,
        &format!(
            "[flows.slow]\nsteps = [{ACQUIRE}, {{ work = \"100ms\" }}, {RELEASE}]\n\
             [flows.other]\nsteps = [{ACQUIRE}, {{ work = \"45ms\" }}, {RELEASE}]\n\
             {}\n{}",
            burst("slow", "slow", "0s", 1),
            burst("other", "other", "60ms", 1),
        ),
    );
    let summary = run_one(&text);
    assert_eq!(summary.outcomes["ok"], 2);
    let lock = &summary.locks["files"];
    assert_eq!(
        (lock.acquired, lock.released, lock.release_refused),
        (2, 1, 1)
    );
    assert_eq!(lock.expired_leases, 1);
    assert_eq!(lock.busy_retries, 0);
}

/// The lock stays taken: with retry_delay 50 ms and acquire_timeout 200 ms, a contender from
/// 10 ms is busy at replies 12.005, 64.01, 116.015 and 168.02 ms; the sleep after the last is
/// cut to the deadline, 210 ms, where it fails with `lock_timeout`, 200 ms after it came. A
/// breaker counting `lock_timeout` opens on it.
#[test]
fn an_acquire_times_out_at_its_deadline() {
    let text = file(
        r#"lease = "30s"
retry_delay = "50ms"
acquire_timeout = "200ms""#,
        &format!(
            "[breakers.locks]\nfailures = 1\nopen_for = \"10s\"\ncounts = [\"timeout\", \"lock_timeout\"]\n\
             [flows.hold]\nsteps = [{ACQUIRE}, {{ work = \"1s\" }}, {RELEASE}]\n\
             [flows.contend]\nsteps = [{{ lock = {{ name = \"files\", op = \"acquire\", mode = \"exclusive\", connection = \"c\", key = \"lock\" }}, breaker = \"locks\" }}]\n\
             {}\n{}",
            burst("hold", "hold", "0s", 1),
            burst("contend", "contend", "10ms", 1),
        ),
    );
    let summary = run_one(&text);
    assert_eq!(summary.outcomes["lock_timeout"], 1);
    assert_eq!(summary.outcomes["ok"], 1);
    assert_near(max_ms(&summary, "contend"), 200.0, "the acquire timeout");
    let lock = &summary.locks["files"];
    assert_eq!((lock.timed_out, lock.busy_retries), (1, 4));
    assert_eq!(summary.breakers["locks"].opened, 1);
    assert_eq!(summary.connections["c"].commands, 2 + 4);
}

/// An open breaker fails the acquire before any Redis I/O; a Redis error during an acquire
/// (a timeout on a paused server) ends the step with that error at once.
#[test]
fn an_open_breaker_refuses_the_acquire_without_a_command() {
    let text = file(
        r#"lease = "30s"
retry_delay = "50ms"
acquire_timeout = "10s""#,
        &format!(
            "[breakers.redis]\nfailures = 1\nopen_for = \"10s\"\n\
             [flows.acquire]\nsteps = [{{ lock = {{ name = \"files\", op = \"acquire\", mode = \"shared\", connection = \"c\", key = \"lock\" }}, breaker = \"redis\" }}]\n\
             {}\n{}\n\
             [faults.pause]\ntarget = \"redis\"\nkind = \"pause\"\nat = \"0s\"\nduration = \"1s\"\n",
            burst("first", "acquire", "0s", 1),
            burst("second", "acquire", "200ms", 1),
        ),
    )
    .replace("latency = \"1ms\"", "latency = \"1ms\"\ncommand_timeout = \"100ms\"");
    let summary = run_one(&text);
    assert_eq!(summary.outcomes["timeout"], 1);
    assert_eq!(summary.outcomes["breaker_open"], 1);
    assert_eq!(
        summary.connections["c"].commands, 1,
        "the refused acquire sent nothing"
    );
    assert_near(max_ms(&summary, "acquire"), 100.0, "the timed-out attempt");
    let lock = &summary.locks["files"];
    assert_eq!(
        (lock.acquired, lock.busy_retries, lock.timed_out),
        (0, 0, 0)
    );
}

/// With jitter the waits are shorter than `retry_delay` (full: down to 1 ns; equal: down to
/// half), so more attempts fit before the deadline; the acquire still fails at the deadline, or
/// at the reply of an attempt in flight then (at most one round trip, 2.005 ms, later).
#[test]
fn jittered_retries_still_time_out_at_the_deadline() {
    let text = file(
        r#"lease = "30s"
retry_delay = "50ms"
acquire_timeout = "200ms""#,
        &format!(
            "[flows.hold]\nsteps = [{ACQUIRE}, {{ work = \"1s\" }}, {RELEASE}]\n\
             [flows.contend]\nsteps = [{ACQUIRE}]\n\
             {}\n{}\n\
             [[variant]]\nname = \"full\"\npatch = {{ locks = {{ files = {{ retry_jitter = \"full\" }} }} }}\n\
             [[variant]]\nname = \"equal\"\npatch = {{ locks = {{ files = {{ retry_jitter = \"equal\" }} }} }}\n",
            burst("hold", "hold", "0s", 1),
            burst("contend", "contend", "10ms", 20),
        ),
    );
    for (name, summary) in run(&text) {
        assert_eq!(summary.outcomes["lock_timeout"], 20, "{name}");
        let latency = max_ms(&summary, "contend");
        assert!((200.0..=202.01).contains(&latency), "{name}: {latency} ms");
        let min = summary.flows["contend"].latency_ms["all"].min.unwrap();
        assert!(min >= 200.0, "{name}: {min} ms");
        // Without jitter each contender retries 4 times; with it, more often.
        let retries = summary.locks["files"].busy_retries;
        assert!(retries > 20 * 4, "{name}: {retries} retries");
    }
}

/// On a reconnect slot that connects on its first caller, the acquire waits for the
/// connection attempt and is then sent: the attempt it made is kept, not begun again.
#[test]
fn an_acquire_on_an_unconnected_slot_waits_for_the_connection() {
    let text = file(
        r#"lease = "30s"
acquire_timeout = "1s""#,
        &format!(
            "[flows.use]\nsteps = [{ACQUIRE}, {{ work = \"5ms\" }}, {RELEASE}]\n{}",
            burst("use", "use", "0s", 2),
        ),
    )
    .replace(
        "latency = \"1ms\"",
        "latency = \"1ms\"\nreconnect = \"slot\"\noffline_queue = false\nconnected_at_start = false",
    );
    let summary = run_one(&text);
    assert_eq!(summary.outcomes["ok"], 2);
    let lock = &summary.locks["files"];
    assert_eq!((lock.acquired, lock.released, lock.busy_retries), (2, 2, 1));
    assert_eq!(summary.connections["c"].slot.waited, 1);
}

/// An acquire that timed out on a paused server is still executed when the pause ends (at
/// 500 ms): the lock is then held by nobody until its 1 s lease ends at 1500 ms. A request
/// from 600 ms is busy every 52.005 ms until its attempt applied at 601 + 18 × 52.005 =
/// 1537.09 ms, and ends at 1540.1 ms (940.1 ms).
#[test]
fn an_acquire_that_timed_out_still_takes_the_lock_for_nobody() {
    let text = file(
        r#"lease = "1s"
retry_delay = "50ms"
acquire_timeout = "2s""#,
        &format!(
            "[flows.use]\nsteps = [{ACQUIRE}, {RELEASE}]\n{}\n{}\n\
             [faults.pause]\ntarget = \"redis\"\nkind = \"pause\"\nat = \"0s\"\nduration = \"500ms\"\n",
            burst("first", "use", "0s", 1),
            burst("second", "use", "600ms", 1),
        ),
    )
    .replace("latency = \"1ms\"", "latency = \"1ms\"\ncommand_timeout = \"100ms\"");
    let summary = run_one(&text);
    assert_eq!(
        (summary.outcomes["timeout"], summary.outcomes["ok"]),
        (1, 1)
    );
    assert_near(
        summary.latency_ms["ok"].max.unwrap(),
        940.1,
        "the second request",
    );
    let lock = &summary.locks["files"];
    assert_eq!((lock.acquired, lock.busy_retries), (1, 18));
    assert_eq!((lock.released, lock.expired_leases), (1, 1));
}

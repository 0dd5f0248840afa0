//! The Redis mechanisms, one behaviour per test: head-of-line blocking on a connection, a fair
//! server thread, commands executed after their caller gave up, pauses, hangs, stops, the
//! offline queue and retries across reconnects.

use crate::common;

use common::*;
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{VariantReport, Verdict};
use outagelab_sim::run;
use outagelab_sim::scenario::*;

/// One server, one connection `a` (index 0), key families `k` (1 key) and `blob` (1000 keys).
fn base() -> Scenario {
    let mut s = empty("redis");
    s.servers.push(server("redis"));
    s.connections.push(connection("a", 0));
    s.keys.push(key("k", 1));
    s.keys.push(key("blob", 1000));
    s
}

fn flow_latency(report: &VariantReport, flow: &str) -> f64 {
    report.summary.flows[flow].latency_ms["all"].max.unwrap()
}

fn outcome(report: &VariantReport, flow: &str, outcome: &str) -> u64 {
    report.summary.flows[flow].outcomes[outcome]
}

fn set(value_bytes: u32) -> RedisCommand {
    RedisCommand::Set {
        value_bytes,
        ttl: None,
    }
}

#[test]
fn a_small_command_waits_for_the_bytes_queued_before_it_on_its_connection() {
    let mut s = base();
    s.connections[0].bandwidth = ByteRate::new(1_000_000); // 1 MB/s: 1 ms per KB
    s.connections.push(connection("b", 0));
    s.connections[1].bandwidth = ByteRate::new(1_000_000);
    s.flows
        .push(flow("blob", vec![redis_step(0, set(100_000), 1)]));
    s.flows.push(flow(
        "incr_same",
        vec![redis_step(0, RedisCommand::Incr, 0)],
    ));
    s.flows.push(flow(
        "incr_other",
        vec![redis_step(1, RedisCommand::Incr, 0)],
    ));
    s.loads.push(burst("blobs", 0, SimTime::ZERO, 5));
    s.loads.push(burst("same", 1, at_ms(1), 1));
    s.loads.push(burst("other", 2, at_ms(1), 1));
    let report = run(&s).unwrap();
    // Five 100 KB values at 1 MB/s: the INCR behind them is sent after ~500 ms.
    let same = flow_latency(&report, "incr_same");
    assert!((499.0..502.0).contains(&same), "{same}");
    // The same command on another connection to the same server does not wait for them.
    let other = flow_latency(&report, "incr_other");
    assert!(other < 1.0, "{other}");
}

#[test]
fn the_server_serves_connections_round_robin() {
    let mut s = base();
    s.servers[0].command_cost = ms(1);
    s.connections.push(connection("b", 0));
    s.flows
        .push(flow("busy", vec![redis_step(0, RedisCommand::Incr, 0)]));
    s.flows
        .push(flow("one", vec![redis_step(1, RedisCommand::Incr, 0)]));
    s.loads.push(burst("busy", 0, SimTime::ZERO, 100));
    s.loads.push(burst("one", 1, at_ms(10), 1));
    let report = run(&s).unwrap();
    // 100 commands of 1 ms each are queued on `a`; the command on `b` waits for the one being
    // executed (up to 1 ms) and then goes next, not after the other 90.
    let one = flow_latency(&report, "one");
    assert!(one <= 2.2, "{one}");
    assert!(flow_latency(&report, "busy") > 100.0);
}

#[test]
fn a_command_whose_caller_timed_out_is_still_executed() {
    let mut s = base();
    s.connections[0].command_timeout = Some(ms(10));
    s.flows
        .push(flow("incr", vec![redis_step(0, RedisCommand::Incr, 0)]));
    s.loads.push(burst("incr", 0, SimTime::ZERO, 3));
    s.faults.push(fault(
        "pause",
        0,
        FaultKind::Pause(PauseMode::All),
        SimTime::ZERO,
        Some(ms(50)),
    ));
    s.limits.horizon = Some(at_ms(200));
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "incr", "timeout"), 3);
    let connection = &report.summary.connections["a"];
    assert_eq!(connection.timeouts, 3);
    // The pause ends at 50 ms; the server then runs all three and replies to nobody.
    assert_eq!(connection.executed, 3);
    assert_eq!(connection.replies, 3);
}

#[test]
fn a_pause_delays_commands_until_it_ends() {
    let mut s = base();
    s.flows
        .push(flow("get", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(burst("get", 0, at_ms(100), 1));
    s.faults.push(fault(
        "pause",
        0,
        FaultKind::Pause(PauseMode::All),
        SimTime::ZERO,
        Some(ms(600)),
    ));
    let report = run(&s).unwrap();
    let latency = flow_latency(&report, "get");
    assert!((500.0..501.0).contains(&latency), "{latency}");
    assert_eq!(report.faults.len(), 1);
    assert_eq!(report.faults[0].end_ms, Some(600.0));
}

#[test]
fn without_a_timeout_a_hung_server_leaves_requests_waiting_forever() {
    let mut s = base();
    s.flows
        .push(flow("get", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(burst("get", 0, at_ms(10), 4));
    s.faults
        .push(fault("hang", 0, FaultKind::Hang, SimTime::ZERO, None));
    let report = run(&s).unwrap();
    assert_eq!(report.verdict, Verdict::Stalled);
    assert_eq!(report.summary.unfinished, 4);
    s.limits.horizon = Some(at_ms(5_000));
    let report = run(&s).unwrap();
    assert_eq!(report.verdict, Verdict::Horizon);
    assert_eq!(report.summary.unfinished, 4);
    assert_eq!(report.end_ms, 5_000.0);
}

#[test]
fn without_a_horizon_a_run_stops_at_its_time_budget_after_the_events_due_by_then() {
    let mut s = base();
    s.flows
        .push(flow("get", vec![redis_step(0, RedisCommand::Get, 0)]));
    // One request a second for 1 000 s; the budget ends with the third arrival's instant.
    s.loads.push(even("get", 0, 1.0, 1_000));
    s.limits.time_max = at_ms(2_000);
    let report = run(&s).unwrap();
    assert_eq!(report.verdict, Verdict::TimeBudget);
    assert_eq!(report.end_ms, 2_000.0);
    // The arrivals at 0, 1 and 2 s ran (the last due exactly at the budget); its GET was
    // still on its way when the budget ended.
    assert_eq!(report.summary.requests, 3);
    assert_eq!(report.summary.unfinished, 1);
    // With a horizon before the budget, the horizon ends it, after the events due by then.
    s.limits.horizon = Some(at_ms(1_000));
    let report = run(&s).unwrap();
    assert_eq!(report.verdict, Verdict::Horizon);
    assert_eq!(report.end_ms, 1_000.0);
    assert_eq!(report.summary.requests, 2);
}

/// The connection learns of a stop at 100 ms; a GET is issued at 200 ms; Redis is back at
/// `back_ms` (or never).
fn stopped(offline_queue: bool, timeout: Option<u64>, back_ms: Option<u64>) -> Scenario {
    let mut s = base();
    s.connections[0].offline_queue = offline_queue;
    s.connections[0].command_timeout = timeout.map(ms);
    s.flows
        .push(flow("get", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(burst("get", 0, at_ms(200), 1));
    let duration = back_ms.map(|back| ms(back - 100));
    s.faults
        .push(fault("stop", 0, FaultKind::Stop, at_ms(100), duration));
    s.limits.horizon = Some(at_ms(10_000));
    s
}

#[test]
fn a_stopped_server_with_no_offline_queue_refuses_at_once() {
    let report = run(&stopped(false, Some(100), None)).unwrap();
    assert_eq!(outcome(&report, "get", "refused"), 1);
    assert_eq!(flow_latency(&report, "get"), 0.0);
}

#[test]
fn with_an_offline_queue_a_command_times_out_while_disconnected() {
    let report = run(&stopped(true, Some(100), None)).unwrap();
    assert_eq!(outcome(&report, "get", "timeout"), 1);
    assert_eq!(flow_latency(&report, "get"), 100.0);
    let connection = &report.summary.connections["a"];
    assert_eq!(connection.disconnects, 1);
    assert!(connection.connect_failures >= 5, "{connection:?}");
}

#[test]
fn the_offline_queue_holds_a_command_until_the_server_is_back() {
    let report = run(&stopped(true, None, Some(700))).unwrap();
    assert_eq!(outcome(&report, "get", "ok"), 1);
    // Sent after the first reconnect attempt that finds the server up.
    let latency = flow_latency(&report, "get");
    assert!((500.0..1300.0).contains(&latency), "{latency}");
    assert_eq!(report.summary.connections["a"].executed, 1);
}

#[test]
fn a_queued_command_fails_after_its_retries_across_reconnects() {
    let mut s = stopped(true, None, None);
    s.connections[0].max_retries = Some(3);
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "get", "connection_lost"), 1);
    // The link is lost at 100.1 ms; attempts are refused at 150.3 and 250.5 ms (delays 50 and
    // 100 ms, plus a 0.2 ms round trip each). The GET, queued at 200 ms, outlives the refusals
    // at 250.5, 400.7 and 600.9 ms and fails with the fourth, at 851.1 ms.
    let latency = flow_latency(&report, "get");
    assert!((651.0..651.2).contains(&latency), "{latency}");
}

#[test]
fn a_restart_without_persistence_empties_the_keyspace() {
    for persistence in [false, true] {
        let mut s = base();
        s.servers[0].persistence = persistence;
        s.flows.push(flow("write", vec![redis_step(0, set(10), 0)]));
        let mut read = redis_step(0, RedisCommand::Get, 0);
        read.on_hit = OnHit::Finish;
        let failing_db = StepSpec {
            action: StepAction::Work {
                duration: Distribution::Constant(SimDuration::from_secs(1)),
            },
            ..db_step(0)
        };
        s.flows.push(flow("read", vec![read, failing_db]));
        s.loads.push(burst("write", 0, SimTime::ZERO, 1));
        s.loads.push(burst("read", 1, at_ms(2_000), 1));
        s.faults.push(fault(
            "restart",
            0,
            FaultKind::Stop,
            at_ms(100),
            Some(ms(100)),
        ));
        let report = run(&s).unwrap();
        // A hit finishes the read at once; a miss goes on to the one-second step.
        let read_latency = flow_latency(&report, "read");
        if persistence {
            assert!(read_latency < 1.0, "the key survived: {read_latency}");
        } else {
            assert!(read_latency > 1000.0, "the key is gone: {read_latency}");
        }
    }
}

#[test]
fn a_lock_is_refused_while_held_and_granted_once_released() {
    let mut s = base();
    let lock = RedisCommand::SetNxPx {
        value_bytes: 16,
        ttl: SimDuration::from_secs(30),
    };
    s.flows.push(flow(
        "locked",
        vec![
            redis_step(0, lock, 0),
            StepSpec {
                action: StepAction::Work {
                    duration: Distribution::Constant(ms(10)),
                },
                ..db_step(0)
            },
            redis_step(0, RedisCommand::Del, 0),
        ],
    ));
    s.loads.push(burst("first", 0, SimTime::ZERO, 1));
    s.loads.push(burst("contender", 0, at_ms(5), 1));
    s.loads.push(burst("after", 0, at_ms(50), 1));
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "locked", "ok"), 2);
    assert_eq!(outcome(&report, "locked", "lock_busy"), 1);
}

#[test]
fn a_new_link_does_not_wait_for_bytes_lost_with_the_old_one() {
    let mut s = base();
    s.connections[0].bandwidth = ByteRate::new(100 * 1024 * 1024);
    s.connections[0].max_retries = Some(0);
    s.connections[0].reconnect_delay = ms(10);
    s.flows
        .push(flow("blob", vec![redis_step(0, set(2 * 1024 * 1024), 1)]));
    s.flows
        .push(flow("get", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(burst("blobs", 0, SimTime::ZERO, 100));
    s.loads.push(burst("probe", 1, at_ms(200), 1));
    s.faults
        .push(fault("stop", 0, FaultKind::Stop, at_ms(10), Some(ms(20))));
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "blob", "connection_lost"), 100);
    // The 200 MB that were queued died with the old link; the probe goes out at once.
    let probe = flow_latency(&report, "get");
    assert!(probe < 1.0, "{probe}");
}

#[test]
fn a_hung_server_sends_no_reply_until_the_hang_ends() {
    let mut s = base();
    s.servers[0].command_cost = ms(10);
    s.flows
        .push(flow("get", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(burst("get", 0, SimTime::ZERO, 1));
    s.faults
        .push(fault("hang", 0, FaultKind::Hang, at_ms(5), Some(ms(95))));
    let report = run(&s).unwrap();
    // The command was running when the process froze; its reply leaves when it thaws at 100 ms.
    let latency = flow_latency(&report, "get");
    assert!((100.0..100.5).contains(&latency), "{latency}");
}

#[test]
fn a_lock_step_with_a_retry_policy_waits_for_the_holder() {
    use outagelab_model::backoff::{BackoffConfig, Jitter};
    use outagelab_model::retry::RetryConfig;
    let mut s = base();
    let backoff = BackoffConfig::new(ms(5), 1000, ms(5), Jitter::None).unwrap();
    s.retries.push(RetrySpec {
        name: "spin".into(),
        enabled: true,
        config: RetryConfig::new(100, backoff, None, None).unwrap(),
        retry_on: OutcomeSet::new([outagelab_report::Outcome::LockBusy]),
    });
    let lock = RedisCommand::SetNxPx {
        value_bytes: 16,
        ttl: SimDuration::from_secs(30),
    };
    let mut acquire = redis_step(0, lock, 0);
    acquire.policies.push(PolicyRef::Retry(RetryId(0)));
    let hold = StepSpec {
        action: StepAction::Work {
            duration: Distribution::Constant(ms(22)),
        },
        ..db_step(0)
    };
    s.flows.push(flow(
        "locked",
        vec![acquire, hold, redis_step(0, RedisCommand::Del, 0)],
    ));
    s.loads.push(burst("two", 0, SimTime::ZERO, 2));
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "locked", "ok"), 2);
    // The second spins every 5 ms while the first holds the lock for 22 ms.
    let retries = &report.summary.retries["spin"];
    assert_eq!((retries.requests, retries.retries), (2, 5));
    let slowest = flow_latency(&report, "locked");
    assert!((47.0..49.0).contains(&slowest), "{slowest}");
}

#[test]
fn a_finally_step_runs_after_the_request_failed() {
    for finally in [false, true] {
        let mut s = base();
        s.servers.push(server("broken"));
        let mut broken = connection("broken", 1);
        broken.command_timeout = Some(ms(10));
        s.connections.push(broken);
        s.faults
            .push(fault("hang", 1, FaultKind::Hang, SimTime::ZERO, None));
        let lock = RedisCommand::SetNxPx {
            value_bytes: 16,
            ttl: SimDuration::from_secs(30),
        };
        let release = StepSpec {
            finally,
            ..redis_step(0, RedisCommand::Del, 0)
        };
        s.flows.push(flow(
            "locked",
            vec![
                redis_step(0, lock, 0),
                redis_step(1, RedisCommand::Get, 0),
                release,
            ],
        ));
        s.loads.push(burst("first", 0, SimTime::ZERO, 1));
        s.loads.push(burst("second", 0, at_ms(50), 1));
        s.limits.horizon = Some(at_ms(200));
        let report = run(&s).unwrap();
        // Both fail at the broken GET; the second only gets that far if the first released.
        let (timeouts, busy) = (
            outcome(&report, "locked", "timeout"),
            outcome(&report, "locked", "lock_busy"),
        );
        if finally {
            assert_eq!((timeouts, busy), (2, 0));
        } else {
            assert_eq!((timeouts, busy), (1, 1));
        }
    }
}

#[test]
fn after_a_kill_during_a_command_the_server_still_serves_connections_in_turn() {
    // The server is executing a 10 ms GET of `a` when it kills its clients. Both connections
    // reconnect and send 20 GETs each: they must alternate, as before the kill.
    let mut s = base();
    s.servers[0].command_cost = ms(10);
    s.connections.push(connection("b", 0));
    for c in &mut s.connections {
        c.offline_queue = false;
        c.reconnect_delay = ms(1);
    }
    let mut first = redis_step(0, RedisCommand::Get, 0);
    first.on_error = OnError::Next;
    s.flows.push(flow("first", vec![first]));
    s.flows
        .push(flow("fa", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.flows
        .push(flow("fb", vec![redis_step(1, RedisCommand::Get, 0)]));
    s.loads.push(burst("first", 0, SimTime::ZERO, 1));
    s.loads.push(burst("a", 1, at_ms(8), 20));
    s.loads.push(burst("b", 2, at_ms(8), 20));
    s.faults.push(kill(at_ms(5)));
    let report = run(&s).unwrap();
    let median = |flow: &str| report.summary.flows[flow].latency_ms["all"].p50.unwrap();
    let (a, b) = (median("fa"), median("fb"));
    assert!(
        (a - b).abs() < 20.0,
        "a {a} ms, b {b} ms: one connection got two turns"
    );
}

#[test]
fn a_frozen_server_cannot_kill_its_clients() {
    // CLIENT KILL is a command: during a hang it does not run, and the connection survives.
    let mut s = base();
    s.flows
        .push(flow("read", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.faults
        .push(fault("hang", 0, FaultKind::Hang, at_ms(10), Some(ms(20))));
    s.faults.push(kill(at_ms(20)));
    s.loads.push(burst("after", 0, at_ms(40), 1));
    let report = run(&s).unwrap();
    assert_eq!(report.summary.connections["a"].disconnects, 0);
    assert_eq!(report.summary.outcomes["ok"], 1);
}

/// 200 writes of 1000-byte blobs (1080 bytes a key with the default 16-byte name and 64 bytes
/// of overhead) at 1000/s, to a server with room for 30 under `policy`.
fn full_server(policy: EvictionPolicy) -> VariantReport {
    let mut s = base();
    s.servers[0].memory.maxmemory = Some(30 * 1080);
    s.servers[0].memory.policy = policy;
    let write = RedisCommand::Set {
        value_bytes: 1000,
        ttl: None,
    };
    s.flows.push(flow("write", vec![redis_step(0, write, 1)]));
    s.loads.push(even("writes", 0, 1000.0, 200));
    run(&s).unwrap()
}

#[test]
fn a_full_server_evicts_under_allkeys_lru_and_refuses_writes_under_noeviction() {
    use outagelab_report::expect::Expectation;
    use outagelab_report::{CountKey, GaugeKey};
    let holds = |report: &VariantReport, text: &str| {
        let expectation = Expectation::parse(text).unwrap();
        expectation.evaluate(&report.summary).unwrap().passed
    };
    let lru = full_server(EvictionPolicy::AllKeysLru);
    let server = &lru.summary.servers["redis"];
    assert_eq!(lru.summary.outcomes["ok"], 200);
    assert!(server.evicted_keys > 0);
    // Room is made before each write: at most one key over the limit, ever.
    assert!(server.used_memory_peak <= 31 * 1080, "{server:?}");
    assert!(holds(&lru, "servers.redis.evicted_keys > 0"));
    assert!(holds(&lru, "outcomes.oom == 0"));
    // The series add up to the summary.
    let memory = lru
        .series
        .gauge(&GaugeKey::ServerUsedMemory("redis".into()))
        .unwrap();
    assert_eq!(memory.iter().max(), Some(&server.used_memory_peak));
    let evicted = lru
        .series
        .count(&CountKey::ServerEvictedKeys("redis".into()))
        .unwrap();
    assert_eq!(evicted.iter().sum::<u64>(), server.evicted_keys);

    // Under noeviction the 31st distinct key is the last write to run: the memory stays
    // over the limit for good, and every later write gets OOM (reads would still run).
    let full = full_server(EvictionPolicy::NoEviction);
    let server = &full.summary.servers["redis"];
    assert_eq!(server.used_memory, 31 * 1080);
    assert_eq!(server.evicted_keys, 0);
    assert!(full.summary.outcomes["oom"] > 100);
    assert_eq!(full.summary.outcomes["oom"], server.oom_replies);
    assert!(holds(&full, "servers.redis.oom_replies == outcomes.oom"));
}

#[test]
fn a_connections_pending_gauge_rises_with_its_queue_and_falls_to_zero_once_all_are_answered() {
    // 50 GETs at once to a server paused for 300 ms: all wait on the connection, then all are
    // answered; the gauge is set where the count changes, so each change must reach it.
    let mut s = base();
    s.flows
        .push(flow("read", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(burst("readers", 0, SimTime::ZERO, 50));
    s.faults.push(fault(
        "pause",
        0,
        FaultKind::Pause(PauseMode::All),
        SimTime::ZERO,
        Some(ms(300)),
    ));
    s.limits.horizon = Some(at_ms(2000));
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "read", "ok"), 50);
    let gauge = &report.series.gauges_max["connections.a.pending"];
    assert_eq!(gauge.iter().max(), Some(&50), "{gauge:?}");
    assert_eq!(gauge.last(), Some(&0), "{gauge:?}");
    assert_eq!(report.summary.connections["a"].peak_pending, 50);
}

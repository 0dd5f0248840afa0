//! Reconnect slots in the simulator (seed 001), one behaviour per test: recovery after a
//! client kill, replay of reads and not of writes, single flight, backoff windows during an
//! outage, the generation guard under timeouts, and writes applied twice (by an opted-in
//! replay, or by an offline queue resending a command whose reply was lost).

use crate::common;

use common::*;
use outagelab_model::reconnect::ReconnectConfig;
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{ConnectionSummary, VariantReport};
use outagelab_sim::run;
use outagelab_sim::scenario::*;

/// One server; connection `c` (index 0) as a slot with seed 001's backoff (100 ms doubling to
/// 5 s), 500 µs one-way, a 100 ms command timeout; key family `k` (10 keys).
fn base() -> Scenario {
    let mut s = empty("slot");
    s.servers.push(server("redis"));
    let mut c = connection("c", 0);
    c.latency = SimDuration::from_micros(500);
    c.command_timeout = Some(ms(100));
    c.offline_queue = false;
    c.reconnect = Reconnect::Slot(ReconnectConfig::seed_001());
    s.connections.push(c);
    s.keys.push(key("k", 10));
    s
}

/// One step running `command` on `c`; failures go on (fail-open).
fn fail_open(command: RedisCommand) -> StepSpec {
    StepSpec {
        on_error: OnError::Next,
        ..redis_step(0, command, 0)
    }
}

fn conn(report: &VariantReport) -> &ConnectionSummary {
    &report.summary.connections["c"]
}

/// Requests of flow 0 at `per_second` from `start` until `until`.
fn steady(s: &mut Scenario, per_second: f64, start: SimTime, until: SimTime) {
    s.loads.push(LoadSpec {
        name: "steady".into(),
        flow: FlowId(0),
        start,
        arrivals: Arrivals::Even {
            rate: Rate::per_second(per_second).unwrap(),
            end: LoadEnd::Until(until),
        },
        caller: None,
    });
}

#[test]
fn after_a_client_kill_the_next_caller_reconnects_and_a_read_is_replayed() {
    let mut s = base();
    s.flows
        .push(flow("read", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(burst("before", 0, at_ms(5), 1));
    s.faults.push(kill(at_ms(10)));
    s.loads.push(burst("after", 0, at_ms(20), 1));
    let report = run(&s).unwrap();
    // The GET after the kill hits the dead connection, evicts it, and is replayed on a new
    // one: the caller sees a normal answer (a miss), one round trip plus a connect later.
    assert_eq!(report.summary.outcomes["ok"], 2);
    let c = conn(&report);
    assert_eq!(
        (c.slot.evictions, c.slot.reconnects, c.slot.replays),
        (1, 1, 1)
    );
    assert_eq!((c.connect_attempts, c.connect_failures), (1, 0));
    // Connect (two one-way trips) then the GET (two more).
    let slowest = report.summary.latency_ms["all"].max.unwrap();
    assert!((2.0..2.1).contains(&slowest), "{slowest}");
}

#[test]
fn a_write_whose_connection_died_is_not_replayed_but_the_next_caller_reconnects() {
    let mut s = base();
    s.flows
        .push(flow("spend", vec![fail_open(RedisCommand::Incr)]));
    s.faults.push(kill(at_ms(10)));
    s.loads.push(burst("first", 0, at_ms(20), 1));
    s.loads.push(burst("second", 0, at_ms(30), 1));
    let report = run(&s).unwrap();
    let c = conn(&report);
    // The first INCR fails (fail-open: the spend is unrecorded) and is not replayed.
    assert_eq!((c.fail_open, c.slot.replays), (1, 0));
    // The second finds the slot empty, connects, and is recorded.
    assert_eq!((c.slot.reconnects, c.executed), (1, 1));
}

#[test]
fn callers_arriving_together_while_redis_is_down_make_one_attempt() {
    let mut s = base();
    s.connections[0].connected_at_start = false;
    s.flows
        .push(flow("read", vec![fail_open(RedisCommand::Get)]));
    s.faults
        .push(fault("down", 0, FaultKind::Stop, SimTime::ZERO, None));
    s.loads.push(burst("burst", 0, at_ms(5), 500));
    // A second burst inside the backoff window that the failure opened (100 ms).
    s.loads.push(burst("again", 0, at_ms(50), 500));
    let report = run(&s).unwrap();
    let c = conn(&report);
    assert_eq!((c.connect_attempts, c.connect_failures), (1, 1));
    assert_eq!(
        c.slot.waited, 499,
        "all but the connector waited for its attempt"
    );
    assert_eq!(
        c.slot.unavailable, 1000,
        "then every caller failed open at once"
    );
    assert_eq!(c.fail_open, 1000);
    assert!(report.summary.latency_ms["all"].max.unwrap() < 1.01);
}

#[test]
fn during_an_outage_attempts_back_off_from_100_ms_doubling_to_5_s() {
    let mut s = base();
    s.flows
        .push(flow("read", vec![fail_open(RedisCommand::Get)]));
    steady(&mut s, 1000.0, SimTime::ZERO, at_ms(30_000));
    s.faults.push(fault(
        "down",
        0,
        FaultKind::Stop,
        at_ms(1000),
        Some(SimDuration::from_secs(20)),
    ));
    let report = run(&s).unwrap();
    let c = conn(&report);
    // Down from 1 s to 21 s. Attempts fail at 1 s, then after windows of 0.1, 0.2, 0.4, 0.8,
    // 1.6, 3.2, 5, 5 s (at 1.1, 1.3, 1.7, 2.5, 4.1, 7.3, 12.3, 17.3 s); the attempt at 22.3 s
    // connects. Nine failures for 21 300 callers.
    assert_eq!((c.connect_attempts, c.connect_failures), (10, 9));
    assert_eq!(c.slot.reconnects, 1);
    assert!(
        (21_250..21_350).contains(&c.fail_open),
        "failed open from 1 s to 22.3 s: {}",
        c.fail_open
    );
}

#[test]
fn a_late_timeout_on_an_evicted_connection_leaves_its_replacement_alone() {
    let mut s = base();
    s.flows
        .push(flow("read", vec![fail_open(RedisCommand::Get)]));
    steady(&mut s, 1000.0, SimTime::ZERO, at_ms(3000));
    // CLIENT PAUSE for 1 s: every command in flight times out after 100 ms.
    s.faults.push(fault(
        "pause",
        0,
        FaultKind::Pause(PauseMode::All),
        at_ms(1000),
        Some(SimDuration::from_secs(1)),
    ));
    let report = run(&s).unwrap();
    let c = conn(&report);
    // The first timeout on a connection evicts it; the hundred others on it come later and
    // change nothing. So about one eviction per 100 ms of pause, not one per timeout.
    assert!(c.timeouts > 900, "{}", c.timeouts);
    assert!(
        (8..=12).contains(&c.slot.evictions),
        "evictions {}",
        c.slot.evictions
    );
    assert!(c.slot.stale_failures > 800, "{}", c.slot.stale_failures);
    assert_eq!(c.slot.evictions, c.slot.reconnects);
}

#[test]
fn only_an_opted_in_replay_applies_a_write_twice() {
    for replay_writes in [false, true] {
        let mut s = base();
        let spend = StepSpec {
            replay_writes,
            ..fail_open(RedisCommand::Incr)
        };
        s.flows.push(flow("spend", vec![spend]));
        steady(&mut s, 1000.0, SimTime::ZERO, at_ms(2000));
        s.faults.push(fault(
            "pause",
            0,
            FaultKind::Pause(PauseMode::All),
            at_ms(500),
            Some(ms(500)),
        ));
        let report = run(&s).unwrap();
        let c = conn(&report);
        if replay_writes {
            // Each INCR that timed out in the pause ran again on a fresh connection, and the
            // server ran both copies once the pause ended.
            assert!(c.slot.replays > 400, "{}", c.slot.replays);
            assert!(c.writes_applied_twice > 400, "{}", c.writes_applied_twice);
        } else {
            assert_eq!((c.slot.replays, c.writes_applied_twice), (0, 0));
            assert!(c.timeouts > 400);
        }
    }
}

#[test]
fn an_offline_queue_resends_a_write_whose_reply_was_lost() {
    // ioredis' defaults: the INCR is being executed (10 ms) when the server kills its clients;
    // the reply is lost, the client keeps the command, reconnects and sends it again.
    let mut s = base();
    s.servers[0].command_cost = ms(10);
    let c = &mut s.connections[0];
    c.reconnect = Reconnect::Always;
    c.offline_queue = true;
    c.command_timeout = None;
    s.flows
        .push(flow("spend", vec![redis_step(0, RedisCommand::Incr, 0)]));
    s.loads.push(burst("one", 0, SimTime::ZERO, 1));
    s.faults.push(kill(at_ms(5)));
    let report = run(&s).unwrap();
    assert_eq!(report.summary.outcomes["ok"], 1);
    let c = conn(&report);
    assert_eq!((c.executed, c.writes_applied_twice), (2, 1));
}

#[test]
fn a_lock_found_taken_is_an_answer_not_a_fail_open() {
    let mut s = base();
    s.servers[0].preload.push(Preload {
        family: KeyFamilyId(0),
        count: 10,
        value_bytes: 16,
    });
    let lock = RedisCommand::SetNxPx {
        value_bytes: 16,
        ttl: SimDuration::from_secs(1),
    };
    s.flows.push(flow("lock", vec![fail_open(lock)]));
    s.loads.push(burst("lockers", 0, SimTime::ZERO, 5));
    let report = run(&s).unwrap();
    let c = conn(&report);
    assert_eq!(c.fail_open, 0);
    assert_eq!(report.summary.flows["lock"].outcomes["ok"], 5);
}

#[test]
fn peak_pending_adds_up_the_links_of_a_slot() {
    // An open-ended pause: every 100 ms a timeout evicts the link and its commands stay on it,
    // so the commands waiting pile up across links.
    let mut s = base();
    s.flows
        .push(flow("read", vec![fail_open(RedisCommand::Get)]));
    steady(&mut s, 200.0, SimTime::ZERO, at_ms(10_000));
    s.faults.push(fault(
        "pause",
        0,
        FaultKind::Pause(PauseMode::All),
        at_ms(1000),
        None,
    ));
    s.limits.horizon = Some(at_ms(10_000));
    let report = run(&s).unwrap();
    let c = conn(&report);
    let gauge = report.series.gauges_max["connections.c.pending"]
        .iter()
        .max()
        .copied()
        .unwrap();
    assert!(gauge > 1000, "{gauge}");
    assert_eq!(c.peak_pending, gauge);
}

#[test]
fn readonly_evicts_the_slot_connection_and_the_other_error_replies_keep_it() {
    // A write at 5 ms meets an error reply (seed 001: "READONLY after failover" evicts; a
    // WRONGTYPE is one command's error). The request fails with the error, counted by kind;
    // a write after the fault reconnects only if the connection was evicted.
    for (error, evictions) in [
        (ErrorReply::ReadOnly, 1),
        (ErrorReply::WrongType, 0),
        (ErrorReply::Oom, 0),
        (ErrorReply::Loading, 0),
    ] {
        let mut s = base();
        let write = RedisCommand::Set {
            value_bytes: 10,
            ttl: None,
        };
        s.flows.push(flow("write", vec![redis_step(0, write, 0)]));
        s.loads.push(burst("during", 0, at_ms(5), 1));
        s.loads.push(burst("after", 0, at_ms(20), 1));
        let kind = FaultKind::ErrorReply {
            error,
            commands: CommandScope::All,
        };
        s.faults
            .push(fault("error", 0, kind, at_ms(0), Some(ms(10))));
        let report = run(&s).unwrap();
        let outcomes = &report.summary.outcomes;
        assert_eq!(outcomes[error.outcome().name()], 1, "{error:?}");
        assert_eq!(outcomes["ok"], 1, "{error:?}");
        let c = conn(&report);
        assert_eq!(
            (c.slot.evictions, c.slot.reconnects),
            (evictions, evictions),
            "{error:?}"
        );
    }
}

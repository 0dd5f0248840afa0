//! The same-instant rule (`kernel::Class`) through whole runs: of the events due at the same
//! nanosecond, work finishing runs before timeouts, timeouts before faults, faults before new
//! arrivals. Each case here sits exactly on such a tie.

use crate::common;

use common::*;
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_sim::run;
use outagelab_sim::scenario::*;

/// Outcome counts of a run, the zeros left out.
fn outcomes(scenario: &Scenario) -> Vec<(String, u64)> {
    let report = run(scenario).unwrap();
    assert_eq!(report.summary.unfinished, 0);
    report
        .summary
        .outcomes
        .into_iter()
        .filter(|&(_, count)| count > 0)
        .collect()
}

fn count(name: &str, n: u64) -> Vec<(String, u64)> {
    vec![(name.to_owned(), n)]
}

/// A 10 ms query behind a bulkhead of one permit and no queue, a request every 10 ms.
fn one_permit(requests: u64) -> Scenario {
    let mut s = empty("one-permit");
    s.databases.push(DatabaseSpec {
        name: "db".into(),
        latency: Distribution::Constant(ms(10)),
        capacity: None,
        connections: None,
        collapse: None,
    });
    s.bulkheads.push(bulkhead("db", 1, 0));
    let mut query = db_step(0);
    query.policies.push(PolicyRef::Bulkhead(BulkheadId(0)));
    s.flows.push(flow("query", vec![query]));
    s.loads.push(even("queries", 0, 100.0, requests));
    s
}

#[test]
fn a_query_ending_as_the_next_request_arrives_hands_it_the_permit() {
    // Each arrival coincides with the previous query's end: the permit is free for it.
    assert_eq!(outcomes(&one_permit(50)), count("ok", 50));
}

#[test]
fn a_query_answered_exactly_at_its_timeout_is_in_time() {
    let mut s = one_permit(5);
    s.flows[0].steps[0].action = StepAction::Database {
        database: DatabaseId(0),
        timeout: Some(ms(10)),
        latency: None,
        lock: None,
        data: None,
    };
    assert_eq!(outcomes(&s), count("ok", 5));
}

#[test]
fn a_reply_arriving_exactly_at_the_command_timeout_is_in_time() {
    // 100 us each way and 5 us of work: the reply lands at 205 us, the timeout's instant.
    let mut s = empty("reply-at-deadline");
    s.servers.push(server("redis"));
    let mut c = connection("cache", 0);
    c.command_timeout = Some(SimDuration::from_micros(205));
    s.connections.push(c);
    s.keys.push(key("k", 10));
    let mut set = redis_step(
        0,
        RedisCommand::Set {
            value_bytes: 10,
            ttl: None,
        },
        0,
    );
    set.on_error = OnError::Fail;
    s.flows.push(flow("set", vec![set]));
    s.loads.push(burst("sets", 0, SimTime::ZERO, 3));
    // The three run one after another on the server, 5 us apart: only the first is in time.
    assert_eq!(
        outcomes(&s),
        vec![("ok".to_owned(), 1), ("timeout".to_owned(), 2)]
    );
}

#[test]
fn a_request_arriving_as_a_pause_ends_runs_at_once_and_one_arriving_as_it_starts_waits() {
    // A request every 10 ms; the server is paused over [10 ms, 20 ms): the request of 10 ms
    // waits until 20 ms, the one of 20 ms does not wait. With a 1 ms timeout, only the one
    // arriving as the pause starts times out.
    let mut s = empty("pause-edges");
    s.servers.push(server("redis"));
    let mut c = connection("cache", 0);
    c.latency = SimDuration::ZERO;
    c.command_timeout = Some(ms(1));
    s.connections.push(c);
    s.keys.push(key("k", 10));
    s.flows
        .push(flow("get", vec![redis_step(0, RedisCommand::Get, 0)]));
    s.loads.push(even("gets", 0, 100.0, 4));
    s.faults.push(fault(
        "pause",
        0,
        FaultKind::Pause(PauseMode::All),
        at_ms(10),
        Some(ms(10)),
    ));
    let report = run(&s).unwrap();
    assert_eq!(report.summary.outcomes["timeout"], 1);
    assert_eq!(report.summary.outcomes["ok"], 3);
}

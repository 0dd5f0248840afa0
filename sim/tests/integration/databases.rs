//! A database's connection limit and capacity through whole runs: refused queries end their
//! requests as `refused`, and a flow slows down when an unrelated flow loads the same database.

use crate::common;

use common::*;
use outagelab_report::VariantReport;
use outagelab_sim::run;
use outagelab_sim::scenario::*;

/// Database `db` (10 ms queries, index 0) with `capacity` and `connections`.
fn base(capacity: Option<u32>, connections: Option<ConnectionLimit>) -> Scenario {
    let mut s = empty("databases");
    s.databases.push(DatabaseSpec {
        name: "db".into(),
        latency: Distribution::Constant(ms(10)),
        capacity,
        connections,
        collapse: None,
    });
    s
}

fn outcome(report: &VariantReport, flow: &str, name: &str) -> u64 {
    report.summary.flows[flow]
        .outcomes
        .get(name)
        .copied()
        .unwrap_or(0)
}

fn max_ms(report: &VariantReport, flow: &str) -> f64 {
    report.summary.flows[flow].latency_ms["all"].max.unwrap()
}

#[test]
fn a_query_past_the_connection_limit_ends_its_request_as_refused() {
    // Two connections, a queue of one: of four queries at t=0, two run (0-10 ms), one waits
    // and runs 10-20 ms, and one is refused at once.
    let limit = ConnectionLimit {
        max: 2,
        queue_max: 1,
    };
    let mut s = base(None, Some(limit));
    s.flows.push(flow("read", vec![db_step(0)]));
    s.loads.push(burst("burst", 0, at_ms(0), 4));
    let report = run(&s).unwrap();
    assert_eq!(outcome(&report, "read", "ok"), 3);
    assert_eq!(outcome(&report, "read", "refused"), 1);
    assert_eq!(max_ms(&report, "read"), 20.0);
    let database = &report.summary.databases["db"];
    assert_eq!((database.refused, database.peak_waiting), (1, 1));
}

#[test]
fn an_unrelated_flow_slows_down_with_a_shared_database() {
    // Capacity 1. Alone, a login query takes 10 ms. With four report queries started at the
    // same instant, five queries share the capacity and each ends at 50 ms.
    let login_alone = {
        let mut s = base(Some(1), None);
        s.flows.push(flow("login", vec![db_step(0)]));
        s.loads.push(burst("logins", 0, at_ms(0), 1));
        run(&s).unwrap()
    };
    assert_eq!(max_ms(&login_alone, "login"), 10.0);
    let mut s = base(Some(1), None);
    s.flows.push(flow("login", vec![db_step(0)]));
    s.flows.push(flow("report", vec![db_step(0)]));
    s.loads.push(burst("logins", 0, at_ms(0), 1));
    s.loads.push(burst("reports", 1, at_ms(0), 4));
    let report = run(&s).unwrap();
    assert_eq!(max_ms(&report, "login"), 50.0);
    assert_eq!(outcome(&report, "login", "ok"), 1);
}

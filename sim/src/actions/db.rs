//! A database step: one query, with its own timeout, latency and advisory lock if it names
//! them. It waits for the query's end (or its timeout, or a refusal); a query that reads or
//! writes followed data holds the committed version when it answers.

use outagelab_model::time::SimDuration;

use crate::actions::{Host, Started};
use crate::database::Query;
use crate::scenario::{DataAccess, DatabaseId, Distribution, KeyFamilyId};
use crate::versions::{HeldValue, ValueFrom};

/// Starts the query.
pub(super) fn start(
    sim: &mut impl Host,
    slot: u32,
    database: DatabaseId,
    timeout: Option<SimDuration>,
    latency: Option<Distribution>,
    lock: Option<KeyFamilyId>,
) -> Started {
    let query = Query {
        waiter: sim.current_ref(slot),
        timeout,
        latency,
        lock: lock.map(|family| (family.0, sim.key_of(slot, family))),
    };
    sim.start_query(slot, database, query);
    Started::Waits
}

/// The query of the request in `slot` answered: it holds the committed version of its key
/// now, or commits a new one.
pub(super) fn answered(sim: &mut impl Host, slot: u32, data: DataAccess) {
    let key = (data.key.0, sim.key_of(slot, data.key));
    let now = sim.now();
    let version = if data.write {
        sim.versions().commit(now, key)
    } else {
        sim.versions().current(key)
    };
    let from = ValueFrom::Database;
    sim.set_value(slot, HeldValue { key, version, from });
}

#[cfg(test)]
mod tests {
    use crate::actions::testing::{ended, ms, run, scenario, step};
    use outagelab_model::time::SimTime;

    use crate::scenario::{
        DatabaseId, DatabaseSpec, Distribution, FaultKind, FaultSpec, FaultTarget, Scenario,
        StepAction,
    };

    /// A database answering every query in 40 ms.
    fn database() -> Scenario {
        let mut s = scenario();
        s.databases.push(DatabaseSpec {
            name: "main".into(),
            latency: Distribution::Constant(ms(40)),
            capacity: None,
            connections: None,
            collapse: None,
        });
        s
    }

    /// A query that takes the advisory lock of the request's key.
    fn locked() -> Vec<crate::scenario::StepSpec> {
        vec![step(StepAction::Database {
            database: DatabaseId(0),
            timeout: None,
            latency: None,
            lock: Some(crate::actions::testing::KEY),
            data: None,
        })]
    }

    fn query_step(timeout_ms: Option<u64>) -> crate::scenario::StepSpec {
        step(StepAction::Database {
            database: DatabaseId(0),
            timeout: timeout_ms.map(ms),
            latency: None,
            lock: None,
            data: None,
        })
    }

    #[test]
    fn a_query_ends_when_the_database_answers() {
        let report = run(database(), vec![query_step(None)], &[(0, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 40.0);
    }

    /// `database()` with a fault on it from `at_ms` for `duration_ms`.
    fn with_fault(kind: FaultKind, at_ms: u64, duration_ms: u64) -> Scenario {
        let mut s = database();
        s.faults.push(FaultSpec {
            name: "db-fault".into(),
            target: FaultTarget::Database(DatabaseId(0)),
            kind,
            at: SimTime::ZERO.saturating_add(ms(at_ms)),
            duration: Some(ms(duration_ms)),
        });
        s
    }

    /// A 40 ms query under a 4x slowdown from 10 ms to 30 ms: 10 ms of work by 10 ms, 5 more
    /// by 30 ms, and the last 25 at full speed: it ends at 55 ms. One sent at 30 ms, after the
    /// fault, takes its 40 ms.
    #[test]
    fn a_slow_fault_slows_the_work_done_while_it_lasts() {
        let slow = FaultKind::Slow {
            slowdown_permille: 4000,
        };
        let report = run(with_fault(slow, 10, 20), vec![query_step(None)], &[(0, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 55.0);
        let report = run(with_fault(slow, 10, 20), vec![query_step(None)], &[(30, 1)]);
        assert_eq!(report.end_ms, 70.0);
        // One that starts inside it, at 20 ms: 2.5 ms of work by 30 ms (10 ms at a quarter),
        // then 37.5 ms at full speed: it ends at 67.5 ms.
        let report = run(with_fault(slow, 10, 20), vec![query_step(None)], &[(20, 1)]);
        assert_eq!(report.end_ms, 67.5);
    }

    /// Queries that start while a `refuse` fault lasts (`[5 ms, 15 ms)`) are refused at once;
    /// one already running finishes, and one at its end runs.
    #[test]
    fn a_refuse_fault_refuses_the_queries_that_start_while_it_lasts() {
        let report = run(
            with_fault(FaultKind::Refuse, 5, 10),
            vec![query_step(None)],
            &[(0, 1), (5, 2), (14, 1), (15, 1)],
        );
        assert_eq!(ended(&report, "refused"), 3);
        assert_eq!(ended(&report, "ok"), 2);
        assert_eq!(report.summary.databases["main"].refused, 3);
        assert_eq!(report.summary.databases["main"].queries, 2);
        assert_eq!(report.end_ms, 55.0);
    }

    /// A pool of 2 connections with a queue of 1, and something else holding `held` of them
    /// from 10 ms to 100 ms. A query at 0 ms holds its connection to its end at 40 ms; of two
    /// at 20 ms, one waits and one is refused (the queue is full). Holding both, the waiter
    /// gets a connection only when the fault ends: it ends at 140 ms. Holding one, it gets
    /// the first query's at 40 ms and ends at 80 ms.
    #[test]
    fn a_pool_exhausted_fault_holds_connections_while_it_lasts() {
        for (held, end_ms) in [(2, 140.0), (1, 80.0)] {
            let mut s = with_fault(FaultKind::PoolExhausted { connections: held }, 10, 90);
            s.databases[0].connections = Some(crate::scenario::ConnectionLimit {
                max: 2,
                queue_max: 1,
            });
            let report = run(s, vec![query_step(None)], &[(0, 1), (20, 2)]);
            let main = &report.summary.databases["main"];
            assert_eq!((ended(&report, "ok"), ended(&report, "refused")), (2, 1));
            assert_eq!((main.refused, main.peak_waiting, main.queries), (1, 1, 2));
            assert_eq!(report.end_ms, end_ms, "holding {held}");
        }
        // Built in code, on a database without a pool: refused before it runs.
        let unlimited = with_fault(FaultKind::PoolExhausted { connections: 1 }, 10, 90);
        match crate::run(&unlimited) {
            Err(crate::SimError::BrokenReference(error)) => assert_eq!(
                error,
                "fault db-fault holds 1 connections of main, whose limit is none"
            ),
            other => panic!("ran: {:?}", other.map(|report| report.summary.requests)),
        }
    }

    /// Queries of 40 ms that each take the advisory lock of the request's key (one key), at
    /// 0, 20 and 50 ms. Alone, they take turns: 0-40, 40-80, 80-120. With something else
    /// holding the family's locks from 10 ms to 100 ms, the one running at 10 ms finishes at
    /// 40, the one at 20 ms waits for the fault's end (80 ms) and runs 100-140, the one at 50
    /// queues behind it and runs 140-180 (waited 90 ms); both waited at once.
    #[test]
    fn a_lock_held_fault_holds_a_key_familys_locks_while_it_lasts() {
        let bursts = [(0, 1), (20, 1), (50, 1)];
        let alone = run(database(), locked(), &bursts);
        assert_eq!(alone.end_ms, 120.0);
        let held = FaultKind::LockHeld {
            family: crate::actions::testing::KEY,
        };
        let report = run(with_fault(held, 10, 90), locked(), &bursts);
        let main = &report.summary.databases["main"];
        assert_eq!(ended(&report, "ok"), 3);
        assert_eq!(report.end_ms, 180.0);
        assert_eq!(main.peak_lock_waiting, 2);
        assert_eq!(main.lock_wait_ms.max, Some(90.0));
        // A fault that ends before anyone needed the lock changes nothing.
        let early = run(with_fault(held, 1, 5), locked(), &[(10, 1), (20, 1)]);
        assert_eq!(early.end_ms, 90.0);
    }

    /// Issue 29: each timed database fault ends exactly when it ends. The same queries
    /// behind no fault, a short one (from 10 ms to 100 ms) and a long one (from 10 ms to
    /// 30.01 s), by hand:
    /// - `slow` 4x, a 40 ms query at 0: 40 ms; 10 ms of work by 10 ms, 22.5 more by 100 ms
    ///   (90 ms at a quarter), the last 7.5 at full speed: 107.5 ms; behind the long one the
    ///   last 30 ms of work at a quarter: 130 ms.
    /// - `pool_exhausted` of both connections of a pool of 2 with a queue of 3, queries at 0
    ///   and two at 20 ms: 80 ms (the third gets the first's connection at 40 ms); the two
    ///   at 20 ms wait for the end and run 100-140 ms, or 30.01-30.05 s.
    /// - `lock_held` of the key's family, locking queries at 0, 20 and 50 ms: 120 ms in
    ///   turns; the one at 20 ms waits for the end, the one at 50 behind it: 180 ms, or
    ///   30.09 s.
    /// - `refuse`, queries at 0 and 50 ms: both run (90 ms); the one at 50 ms is refused by
    ///   either fault, and the run ends with its refusal, at 50 ms.
    #[test]
    fn every_database_fault_ends_when_it_ends() {
        let pooled = |mut s: Scenario| {
            s.databases[0].connections = Some(crate::scenario::ConnectionLimit {
                max: 2,
                queue_max: 3,
            });
            s
        };
        let slow = FaultKind::Slow {
            slowdown_permille: 4000,
        };
        let pool = FaultKind::PoolExhausted { connections: 2 };
        let lock = FaultKind::LockHeld {
            family: crate::actions::testing::KEY,
        };
        type Case = (
            FaultKind,
            fn() -> Vec<crate::scenario::StepSpec>,
            &'static [(u64, u64)],
        );
        let cases: [(Case, [f64; 3]); 4] = [
            (
                (slow, || vec![query_step(None)], &[(0, 1)]),
                [40.0, 107.5, 130.0],
            ),
            (
                (pool, || vec![query_step(None)], &[(0, 1), (20, 2)]),
                [80.0, 140.0, 30_050.0],
            ),
            (
                (lock, locked, &[(0, 1), (20, 1), (50, 1)]),
                [120.0, 180.0, 30_090.0],
            ),
            (
                (
                    FaultKind::Refuse,
                    || vec![query_step(None)],
                    &[(0, 1), (50, 1)],
                ),
                [90.0, 50.0, 50.0],
            ),
        ];
        for ((kind, steps, bursts), [none, short, long]) in cases {
            let file = |fault: Option<u64>| {
                let s = match fault {
                    Some(duration_ms) => with_fault(kind, 10, duration_ms),
                    None => database(),
                };
                if kind == pool { pooled(s) } else { s }
            };
            let end = |fault| run(file(fault), steps(), bursts).end_ms;
            assert_eq!(end(None), none, "{} without the fault", kind.name());
            assert_eq!(end(Some(90)), short, "{} of 90 ms", kind.name());
            assert_eq!(end(Some(30_000)), long, "{} of 30 s", kind.name());
        }
    }

    /// Two faults of a kind at once: each ends on its own. A 40 ms query under 4x from 10
    /// to 30 ms and 2x from 20 to 50 ms (the slowest holds): 10 ms of work by 10, 5 by 30
    /// (4x), 10 by 50 (2x), the last 15 at full speed: 65 ms. A pool of 2 with one
    /// connection held from 10 to 100 ms and another from 20 to 60 ms: a query at 30 ms
    /// waits for the second's end and runs 60-100 ms.
    #[test]
    fn overlapping_database_faults_each_end_on_their_own() {
        let mut s = with_fault(
            FaultKind::Slow {
                slowdown_permille: 4000,
            },
            10,
            20,
        );
        let mut second = s.faults[0].clone();
        second.kind = FaultKind::Slow {
            slowdown_permille: 2000,
        };
        second.at = SimTime::ZERO.saturating_add(ms(20));
        second.duration = Some(ms(30));
        s.faults.push(second);
        assert_eq!(run(s, vec![query_step(None)], &[(0, 1)]).end_ms, 65.0);
        let held = FaultKind::PoolExhausted { connections: 1 };
        let mut s = with_fault(held, 10, 90);
        let mut second = s.faults[0].clone();
        second.at = SimTime::ZERO.saturating_add(ms(20));
        second.duration = Some(ms(40));
        s.faults.push(second);
        s.databases[0].connections = Some(crate::scenario::ConnectionLimit {
            max: 2,
            queue_max: 1,
        });
        assert_eq!(run(s, vec![query_step(None)], &[(30, 1)]).end_ms, 100.0);
    }

    /// A scenario built in code with a fault on the wrong kind of target is refused before it
    /// runs, instead of reaching a mechanism that cannot take it.
    #[test]
    fn a_fault_on_the_wrong_kind_of_target_is_refused() {
        let mut on_redis = with_fault(FaultKind::Refuse, 0, 10);
        on_redis.faults[0].target = FaultTarget::Server(crate::scenario::ServerId(0));
        let mut on_database = with_fault(FaultKind::Hang, 0, 10);
        on_database.faults[0].name = "hang".into();
        for (scenario, message) in [
            (
                on_redis,
                "fault db-fault: a `refuse` fault cannot act on redis",
            ),
            (on_database, "fault hang: a `hang` fault cannot act on main"),
        ] {
            match crate::run(&scenario) {
                Err(crate::SimError::BrokenReference(error)) => assert_eq!(error, message),
                other => panic!("ran: {:?}", other.map(|report| report.summary.requests)),
            }
        }
    }

    #[test]
    fn a_query_past_its_timeout_ends_the_step_at_the_timeout() {
        // The step fails at 30 ms; the database still runs the query to 40 ms, after the
        // request has ended (the run stops with its last request).
        let report = run(database(), vec![query_step(Some(30))], &[(0, 1)]);
        assert_eq!(ended(&report, "timeout"), 1);
        assert_eq!(report.end_ms, 30.0);
        assert_eq!(report.summary.latency_ms["all"].max, Some(30.0));
    }
}

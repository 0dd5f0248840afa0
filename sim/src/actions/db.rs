//! A database step: one query, with its own timeout, latency and advisory lock if it names
//! them. It waits for the query's end (or its timeout, or a refusal); a query that reads or
//! writes followed data holds the committed version when it answers.

use outagelab_model::time::SimDuration;

use crate::actions::Started;
use crate::database::Query;
use crate::engine::{HeldValue, Simulator, Stage, ValueFrom, Wait};
use crate::scenario::{DataAccess, DatabaseId, Distribution, KeyFamilyId};

/// Starts the query.
pub(super) fn start(
    sim: &mut Simulator<'_>,
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
    sim.set_stage(slot, Stage::Waiting(Wait::Query));
    sim.databases
        .start(sim.now, database, query, &mut sim.events);
    sim.record_lock_waits();
    Started::Waits
}

/// The query of the request in `slot` answered: it holds the committed version of its key
/// now, or commits a new one.
pub(super) fn answered(sim: &mut Simulator<'_>, slot: u32, data: DataAccess) {
    let key = (data.key.0, sim.key_of(slot, data.key));
    let version = if data.write {
        sim.versions.commit(sim.now, key)
    } else {
        sim.versions.current(key)
    };
    let from = ValueFrom::Database;
    sim.request_mut(slot).value = Some(HeldValue { key, version, from });
}

#[cfg(test)]
mod tests {
    use crate::actions::testing::{ended, ms, run, scenario, step};
    use crate::scenario::{DatabaseId, DatabaseSpec, Distribution, StepAction};

    /// A database answering every query in 40 ms.
    fn database() -> crate::scenario::Scenario {
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

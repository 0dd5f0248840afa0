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

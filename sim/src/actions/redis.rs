//! A Redis step: one command on a connection (or its reconnect slot), about the request's key
//! of a family. It waits for the reply (or the command's timeout, or the link's loss); the
//! reply is the step's result (`hit` or `miss` for a `GET`), and a `GET` that hits holds the
//! version it read.

use crate::actions::{Host, Started};
use crate::redis::Op;
use crate::scenario::{ConnectionId, KeyFamilyId, RedisCommand};

/// Sends the step's command.
pub(super) fn start(
    sim: &mut impl Host,
    slot: u32,
    connection: ConnectionId,
    command: RedisCommand,
    key: KeyFamilyId,
    replay_writes: bool,
) -> Started {
    let op = op(sim, slot, command, key);
    match sim.issue_command(slot, connection, op, replay_writes) {
        None => Started::Waits,
        Some(result) => Started::Ended(result),
    }
}

/// The command the request in `slot` sends: `command` on its key of `key`, carrying the
/// version of that key's value it holds (what a `SET` writes).
fn op(sim: &impl Host, slot: u32, command: RedisCommand, key: KeyFamilyId) -> Op {
    let index = sim.key_of(slot, key);
    Op {
        command,
        family: key.0,
        index,
        version: sim.value_version(slot, (key.0, index)),
    }
}

#[cfg(test)]
mod tests {
    use crate::actions::testing::{CONNECTION, KEY, ended, run, scenario, step};
    use crate::scenario::{OnHit, RedisCommand, StepAction};

    fn command(command: RedisCommand) -> crate::scenario::StepSpec {
        step(StepAction::Redis {
            connection: CONNECTION,
            command,
            key: KEY,
        })
    }

    #[test]
    fn a_command_takes_a_round_trip_and_the_servers_cost() {
        // 1 ms there, 5 us on the server, 1 ms back; a GET of a key never written misses,
        // which goes on.
        let report = run(scenario(), vec![command(RedisCommand::Get)], &[(0, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 2.005);
        assert_eq!(report.summary.servers["redis"].used_memory, 0);
    }

    #[test]
    fn a_get_after_a_set_hits_and_may_finish_the_request() {
        let set = command(RedisCommand::Set {
            value_bytes: 100,
            ttl: None,
        });
        let mut get = command(RedisCommand::Get);
        get.on_hit = OnHit::Finish;
        // The third step is never reached: the hit finishes the request, at two round trips.
        let never = command(RedisCommand::Del);
        let report = run(scenario(), vec![set, get, never], &[(0, 1)]);
        assert_eq!(ended(&report, "ok"), 1);
        assert_eq!(report.end_ms, 4.01);
    }
}

//! A Redis step: one command on a connection (or its reconnect slot), about the request's key
//! of a family. It waits for the reply (or the command's timeout, or the link's loss); the
//! reply is the step's result (`hit` or `miss` for a `GET`), and a `GET` that hits holds the
//! version it read.

use crate::actions::Started;
use crate::engine::Simulator;
use crate::redis::Op;
use crate::scenario::{ConnectionId, KeyFamilyId, RedisCommand};

/// Sends the step's command.
pub(super) fn start(
    sim: &mut Simulator<'_>,
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
fn op(sim: &Simulator<'_>, slot: u32, command: RedisCommand, key: KeyFamilyId) -> Op {
    let index = sim.key_of(slot, key);
    Op {
        command,
        family: key.0,
        index,
        version: sim.value_version(slot, (key.0, index)),
    }
}

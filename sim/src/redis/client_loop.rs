//! A client's event loop, in virtual time: one thread that builds every command of its
//! connections and hands it to the connection, one after another (seed 000: a Node process;
//! `outagelab live`: a tokio current-thread runtime).
//!
//! - **Building** a command of `n` bytes takes the loop `n / write_rate` (copying the value
//!   into the command, packing it). Commands are built in the order they are issued, so a
//!   small command on one connection waits behind the large ones of another, though its own
//!   pipe is idle. A command leaves the client, to its connection's pipe, once built.
//! - **The writer's first turn** (`copy_rate` and `copy_before_yield`, tokio's and the
//!   `redis` crate's case, which `outagelab calibrate` measures): a connection's writer is a
//!   task of the loop too, woken by the first command handed to it, so it runs once the loop
//!   has built the commands of its batch, and it writes into the socket, at `copy_rate`, as
//!   long as the socket takes bytes, up to `copy_before_yield` of what was handed to it. A
//!   batch is what the loop takes together: the commands issued at one instant, and those
//!   issued later but before the loop got to them (tasks woken while it was busy run back to
//!   back once it is free). What is issued after the loop got to a batch waits for the
//!   batch's turns (its writers were woken first). What the writer copies past its turn, it
//!   copies a little at a time while the socket drains; the loop is mostly idle then, waiting
//!   on the socket, and that time is not charged to it.
//!
//! Simplified, and said where it is documented for users: a command leaves for its pipe once
//! it is built, not when its writer copies it, and a reply is never delayed by the loop. So a
//! command on another connection in the same batch as a burst goes out before the burst's
//! turn (in tokio it waits for the writers woken before its own); seed 000's INCR, due 1 ms
//! after its burst, is in the next batch and waits, as it does live.
//!
//! Invariants: the loop's `free_at` never goes backwards; a loop without a writer's turn is
//! exactly a FIFO at `write_rate`; each batch's turns are charged once, after its builds and
//! before anything of a later batch.

use outagelab_model::time::SimTime;

use crate::scenario::{ByteRate, ClientLoopSpec, ConnectionId};

#[derive(Clone, Debug)]
pub(super) struct ClientLoop {
    write_rate: ByteRate,
    /// The writer's copy rate and the most it copies in its first turn.
    writer: Option<(ByteRate, u64)>,
    /// When the loop is done with what it was given so far (its turns due included once
    /// they are settled).
    free_at: SimTime,
    /// The open batch's turns, due after its builds: per connection, in the order its writer
    /// was woken, the bytes handed to it.
    turns: Vec<(ConnectionId, u64)>,
    /// When the loop got to the open batch: a command issued by then joins it.
    batch_reached: SimTime,
}

impl ClientLoop {
    pub(super) fn new(spec: &ClientLoopSpec) -> Self {
        ClientLoop {
            write_rate: spec.write_rate,
            writer: spec
                .writer
                .map(|writer| (writer.copy_rate, writer.copy_before_yield)),
            free_at: SimTime::ZERO,
            turns: Vec::new(),
            batch_reached: SimTime::ZERO,
        }
    }

    /// A command of `bytes` on `connection`, issued at `now`: when it leaves the client,
    /// built.
    pub(super) fn write(&mut self, now: SimTime, connection: ConnectionId, bytes: u64) -> SimTime {
        if now > self.batch_reached {
            self.settle_turns();
        }
        if self.writer.is_some() && self.turns.is_empty() {
            self.batch_reached = self.free_at.max(now);
        }
        self.free_at = self
            .free_at
            .max(now)
            .saturating_add(self.write_rate.time_for(bytes));
        if self.writer.is_some() {
            match self.turns.iter_mut().find(|(id, _)| *id == connection) {
                Some((_, handed)) => *handed = handed.saturating_add(bytes),
                None => self.turns.push((connection, bytes)),
            }
        }
        self.free_at
    }

    /// The open batch's turns, taken after its builds: each writer copies what it was handed,
    /// up to its turn's most.
    fn settle_turns(&mut self) {
        let Some((copy_rate, most)) = self.writer else {
            return;
        };
        for (_, handed) in self.turns.drain(..) {
            self.free_at = (self.free_at).saturating_add(copy_rate.time_for(handed.min(most)));
        }
    }
}

#[cfg(test)]
mod tests {
    use outagelab_model::time::SimDuration;

    use super::*;
    use crate::scenario::WriterTurn;

    const MIB: u64 = 1 << 20;
    const A: ConnectionId = ConnectionId(0);
    const B: ConnectionId = ConnectionId(1);

    fn rate(mib_per_second: u64) -> ByteRate {
        ByteRate::new(mib_per_second * MIB).unwrap()
    }

    /// Builds at 1 MiB per ms; with a writer, copies at 2 MiB per ms, 10 MiB at most in its
    /// first turn.
    fn client_loop(writer: bool) -> ClientLoop {
        ClientLoop::new(&ClientLoopSpec {
            name: "tokio".into(),
            write_rate: rate(1000),
            writer: writer.then(|| WriterTurn {
                copy_rate: rate(2000),
                copy_before_yield: 10 * MIB,
            }),
        })
    }

    fn ms(ms: u64) -> SimTime {
        SimTime::ZERO.saturating_add(SimDuration::from_millis(ms))
    }

    /// K blobs of 2 MiB on A at 0, then a small command on B at 1 ms: when B's leaves.
    fn small_after(writer: bool, blobs: u64) -> SimTime {
        let mut client = client_loop(writer);
        for _ in 0..blobs {
            client.write(SimTime::ZERO, A, 2 * MIB);
        }
        client.write(ms(1), B, 0)
    }

    #[test]
    fn without_a_writer_the_loop_is_a_fifo_at_its_write_rate() {
        let mut client = client_loop(false);
        assert_eq!(client.write(SimTime::ZERO, A, 2 * MIB), ms(2));
        assert_eq!(client.write(SimTime::ZERO, A, 2 * MIB), ms(4));
        assert_eq!(small_after(false, 3), ms(6));
        // Idle in between: a later command starts when it is issued.
        assert_eq!(client.write(ms(10), B, MIB), ms(11));
    }

    #[test]
    fn the_writer_copies_a_burst_after_its_builds_and_before_a_later_command() {
        // 3 blobs: built by 6 ms, the writer copies their 6 MiB in 3 ms, then B's command.
        assert_eq!(small_after(true, 3), ms(9));
        // The burst's own commands leave as they are built.
        let mut client = client_loop(true);
        assert_eq!(client.write(SimTime::ZERO, A, 2 * MIB), ms(2));
        assert_eq!(client.write(SimTime::ZERO, A, 2 * MIB), ms(4));
    }

    #[test]
    fn the_writer_yields_after_its_first_turn() {
        // 30 blobs: built by 60 ms, then 10 MiB copied in 5 ms, not 60 MiB in 30.
        assert_eq!(small_after(true, 30), ms(65));
        assert_eq!(small_after(true, 5), ms(15));
    }

    #[test]
    fn each_connection_handed_commands_at_an_instant_takes_a_turn() {
        let mut client = client_loop(true);
        client.write(SimTime::ZERO, A, 4 * MIB);
        client.write(SimTime::ZERO, B, 2 * MIB);
        client.write(SimTime::ZERO, A, 2 * MIB);
        // Built by 8 ms; A's turn 6 MiB (3 ms), B's 2 MiB (1 ms).
        assert_eq!(client.write(ms(1), ConnectionId(2), 0), ms(12));
        // Settled once: a command later still finds the loop free at 12 ms.
        assert_eq!(client.write(ms(2), ConnectionId(2), 0), ms(12));
    }

    #[test]
    fn commands_issued_while_the_loop_is_busy_are_one_batch_with_one_turn() {
        let mut client = client_loop(true);
        for _ in 0..30 {
            client.write(SimTime::ZERO, A, 2 * MIB);
        }
        // Built by 60 ms, A's turn to 65. Three 4 MiB commands on B at 1, 2 and 3 ms: the loop
        // gets to them at 65 and builds them back to back, to 77; a command at 4 ms joins them.
        for at in 1..=3 {
            client.write(ms(at), B, 4 * MIB);
        }
        assert_eq!(client.write(ms(4), ConnectionId(2), 0), ms(77));
        // Then B's one turn, 10 of its 12 MiB (5 ms), not three of 4 MiB (6 ms).
        assert_eq!(client.write(ms(78), ConnectionId(2), 0), ms(82));
    }

    #[test]
    fn a_turn_is_charged_once_a_later_instant_comes() {
        let mut client = client_loop(true);
        client.write(SimTime::ZERO, A, 2 * MIB);
        // Idle long after: the turn (1 ms) was over by then and delays nothing.
        assert_eq!(client.write(ms(50), B, MIB), ms(51));
    }
}

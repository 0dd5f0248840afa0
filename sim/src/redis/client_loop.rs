//! A client's event loop, in virtual time: one thread that builds every command of its
//! connections and hands it to the connection, one after another (seed 000: a Node process;
//! `outagelab live`: a tokio current-thread runtime).
//!
//! - **Building** a command of `n` bytes takes the loop `n / write_rate` (copying the value
//!   into the command, packing it). Commands are built in the order they are issued, so a
//!   small command on one connection waits behind the large ones of another, though its own
//!   pipe is idle. Without a writer's turn, a command leaves the client, to its connection's
//!   pipe, once built (Node writes a command to its socket when it is issued).
//! - **The writer's turn** (`copy_rate` and `copy_before_yield`, tokio's and the `redis`
//!   crate's case, which `outagelab calibrate` measures): a connection's writer is a task of
//!   the loop too, woken by the first command handed to it, so it runs once the loop has built
//!   every command of its batch, and no byte of the batch leaves before. A batch is what the
//!   loop takes together: the commands issued at one instant, and those issued later but
//!   before the loop got to them (tasks woken while it was busy run back to back once it is
//!   free). The writers then take their turns in the order they were woken: each copies what
//!   it was handed into the socket at `copy_rate`, a command leaving once copied, and the loop
//!   is busy for up to `copy_before_yield` of it (a writer writes as long as the socket takes
//!   bytes). Past that, the writer copies a little at a time while the socket drains; the
//!   loop is mostly idle then, and that time is not charged to it. What is issued after the
//!   loop got to a batch waits for the batch's turns (its writers were woken first). The
//!   turns are taken when the builds end ([`ClientLoop::turn_due`], the simulator's
//!   `LoopTurn` event), or before, by the first command of a later batch
//!   ([`ClientLoop::close_passed`]).
//!
//! Simplified: a reply is never delayed by the loop.
//!
//! Invariants: the loop's `free_at` never goes backwards; a loop without a writer's turn is
//! exactly a FIFO at `write_rate`, its commands leaving as built; each batch's turns are
//! taken once, after its builds and before anything of a later batch is built; a writer's
//! commands leave in the order they were handed to it.

use outagelab_model::time::SimTime;

use crate::scenario::{ByteRate, ClientLoopSpec, ConnectionId};

/// A command handed to a writer, and when it leaves the client (copied into its socket).
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Sent<T> {
    pub connection: ConnectionId,
    pub item: T,
    pub at: SimTime,
}

/// What became of a command written to the loop.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Written {
    /// It leaves at this instant (a loop without a writer's turn: once built).
    At(SimTime),
    /// It leaves at its batch's turn. A batch it opened is to be looked at
    /// ([`ClientLoop::turn_due`]) at the given instant, its builds' end so far.
    Batched { opened: Option<(u64, SimTime)> },
}

/// What the loop's look at a batch found.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Due<T> {
    /// Still building (more joined it): look again then.
    Again(SimTime),
    /// Its turns taken: its commands, with when each leaves.
    Sent(Vec<Sent<T>>),
    /// Already closed by a later command.
    Gone,
}

#[derive(Clone, Debug)]
pub(super) struct ClientLoop<T> {
    write_rate: ByteRate,
    /// The writer's copy rate and the most it copies in its first turn.
    writer: Option<(ByteRate, u64)>,
    /// When the loop is done with what it was given so far (the open batch's builds, and the
    /// turns of the batches before it).
    free_at: SimTime,
    /// The open batch's commands, in the order they were issued, with their bytes.
    batch: Vec<(ConnectionId, T, u64)>,
    /// The open batch's number (counted from 1; 0 before the first).
    batch_id: u64,
    /// When the loop got to the open batch: a command issued by then joins it.
    batch_reached: SimTime,
}

impl<T> ClientLoop<T> {
    pub(super) fn new(spec: &ClientLoopSpec) -> Self {
        ClientLoop {
            write_rate: spec.write_rate,
            writer: spec
                .writer
                .map(|writer| (writer.copy_rate, writer.copy_before_yield)),
            free_at: SimTime::ZERO,
            batch: Vec::new(),
            batch_id: 0,
            batch_reached: SimTime::ZERO,
        }
    }

    /// Closes the open batch if `now` is after the loop got to it (a command issued now comes
    /// after its turns): its commands, with when each leaves. Called before [`write`].
    ///
    /// [`write`]: ClientLoop::write
    pub(super) fn close_passed(&mut self, now: SimTime) -> Vec<Sent<T>> {
        if now > self.batch_reached {
            self.close()
        } else {
            Vec::new()
        }
    }

    /// A command of `bytes` on `connection`, issued at `now` (after [`close_passed`]).
    ///
    /// [`close_passed`]: ClientLoop::close_passed
    pub(super) fn write(
        &mut self,
        now: SimTime,
        connection: ConnectionId,
        bytes: u64,
        item: T,
    ) -> Written {
        let opens = self.writer.is_some() && self.batch.is_empty();
        if opens {
            self.batch_id += 1;
            self.batch_reached = self.free_at.max(now);
        }
        self.free_at = self
            .free_at
            .max(now)
            .saturating_add(self.write_rate.time_for(bytes));
        if self.writer.is_none() {
            return Written::At(self.free_at);
        }
        self.batch.push((connection, item, bytes));
        Written::Batched {
            opened: opens.then_some((self.batch_id, self.free_at)),
        }
    }

    /// The loop looks at batch `batch` at `now`, the end of its builds as they stood.
    pub(super) fn turn_due(&mut self, now: SimTime, batch: u64) -> Due<T> {
        if batch != self.batch_id || self.batch.is_empty() {
            Due::Gone
        } else if self.free_at > now {
            Due::Again(self.free_at)
        } else {
            Due::Sent(self.close())
        }
    }

    /// The open batch's turns, taken after its builds, writer by writer in the order each was
    /// woken (its first command): each copies what it was handed at the copy rate, and the
    /// loop is charged up to the turn's most. A command leaves once copied.
    fn close(&mut self) -> Vec<Sent<T>> {
        let Some((copy_rate, most)) = self.writer else {
            return Vec::new();
        };
        let mut writers: Vec<ConnectionId> = Vec::new();
        let mut commands: Vec<(usize, (ConnectionId, T, u64))> = (self.batch.drain(..))
            .map(|command| {
                let rank = match writers.iter().position(|id| *id == command.0) {
                    Some(rank) => rank,
                    None => {
                        writers.push(command.0);
                        writers.len() - 1
                    }
                };
                (rank, command)
            })
            .collect();
        // Stable: each writer's commands stay in the order they were handed to it.
        commands.sort_by_key(|(rank, _)| *rank);
        let mut sent = Vec::with_capacity(commands.len());
        let mut turn = self.free_at;
        let mut writer: Option<(usize, u64)> = None;
        for (rank, (connection, item, bytes)) in commands {
            let copied = match writer {
                Some((current, copied)) if current == rank => copied,
                Some((_, copied)) => {
                    turn = turn.saturating_add(copy_rate.time_for(copied.min(most)));
                    0
                }
                None => 0,
            }
            .saturating_add(bytes);
            writer = Some((rank, copied));
            let at = turn.saturating_add(copy_rate.time_for(copied));
            sent.push(Sent {
                connection,
                item,
                at,
            });
        }
        if let Some((_, copied)) = writer {
            turn = turn.saturating_add(copy_rate.time_for(copied.min(most)));
        }
        self.free_at = turn;
        sent
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
    const C: ConnectionId = ConnectionId(2);

    fn rate(mib_per_second: u64) -> ByteRate {
        ByteRate::new(mib_per_second * MIB).unwrap()
    }

    /// Builds at 1 MiB per ms; with a writer, copies at 2 MiB per ms, 10 MiB at most in its
    /// first turn. A command is named by a number.
    fn client_loop(writer: bool) -> ClientLoop<u32> {
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

    fn us(us: u64) -> SimTime {
        SimTime::ZERO.saturating_add(SimDuration::from_micros(us))
    }

    /// What a write that opened batch `batch`, to be looked at `at`, says.
    fn opens(batch: u64, at: SimTime) -> Written {
        Written::Batched {
            opened: Some((batch, at)),
        }
    }

    /// What a write that joined the open batch says.
    const JOINED: Written = Written::Batched { opened: None };

    /// Writes as the simulator does (closing a passed batch first); what left, as (command,
    /// instant), and what the write said.
    fn write(
        client: &mut ClientLoop<u32>,
        now: SimTime,
        connection: ConnectionId,
        mib: u64,
        name: u32,
    ) -> (Vec<(u32, SimTime)>, Written) {
        let closed = client.close_passed(now);
        let written = client.write(now, connection, mib * MIB, name);
        (left(closed), written)
    }

    fn left(sent: Vec<Sent<u32>>) -> Vec<(u32, SimTime)> {
        sent.into_iter().map(|sent| (sent.item, sent.at)).collect()
    }

    /// The batch's turns once its builds are over.
    fn turns(client: &mut ClientLoop<u32>, batch: u64, at: SimTime) -> Vec<(u32, SimTime)> {
        match client.turn_due(at, batch) {
            Due::Sent(sent) => left(sent),
            other => panic!("batch {batch} at {at:?}: {other:?}"),
        }
    }

    #[test]
    fn without_a_writer_the_loop_is_a_fifo_at_its_write_rate() {
        let mut client = client_loop(false);
        assert_eq!(
            write(&mut client, SimTime::ZERO, A, 2, 1).1,
            Written::At(ms(2))
        );
        assert_eq!(
            write(&mut client, SimTime::ZERO, B, 2, 2).1,
            Written::At(ms(4))
        );
        assert_eq!(write(&mut client, ms(1), B, 0, 3).1, Written::At(ms(4)));
        // Idle in between: a later command starts when it is issued.
        assert_eq!(write(&mut client, ms(10), B, 1, 4).1, Written::At(ms(11)));
    }

    #[test]
    fn a_burst_leaves_as_its_writer_copies_it_after_every_build() {
        let mut client = client_loop(true);
        let (_, opened) = write(&mut client, SimTime::ZERO, A, 2, 1);
        assert_eq!(opened, opens(1, ms(2)));
        for name in 2..=3 {
            let (_, joined) = write(&mut client, SimTime::ZERO, A, 2, name);
            assert_eq!(joined, JOINED);
        }
        // Looked at when the first build ended: two more were built since.
        assert_eq!(client.turn_due(ms(2), 1), Due::Again(ms(6)));
        // Built by 6 ms; the writer copies each 2 MiB in 1 ms.
        assert_eq!(
            turns(&mut client, 1, ms(6)),
            [(1, ms(7)), (2, ms(8)), (3, ms(9))]
        );
        assert_eq!(client.turn_due(ms(6), 1), Due::Gone);
        // A command issued later waits for the turn: built at 9 ms, copied at once.
        let (_, opened) = write(&mut client, ms(1), B, 0, 4);
        assert_eq!(opened, opens(2, ms(9)));
        assert_eq!(turns(&mut client, 2, ms(9)), [(4, ms(9))]);
    }

    #[test]
    fn a_command_issued_after_the_loop_got_to_a_batch_closes_it() {
        let mut client = client_loop(true);
        for name in 1..=3 {
            write(&mut client, SimTime::ZERO, A, 2, name);
        }
        let (closed, opened) = write(&mut client, ms(1), B, 0, 4);
        assert_eq!(closed, [(1, ms(7)), (2, ms(8)), (3, ms(9))]);
        assert_eq!(opened, opens(2, ms(9)));
        assert_eq!(client.turn_due(ms(6), 1), Due::Gone);
    }

    #[test]
    fn the_writer_yields_after_its_first_turn() {
        let mut client = client_loop(true);
        for name in 0..30 {
            write(&mut client, SimTime::ZERO, A, 2, name);
        }
        // Built by 60 ms; the loop is charged 10 MiB of copying (5 ms), and B's command,
        // issued at 1 ms, leaves then; A's burst goes on leaving as it is copied, to 90 ms.
        let (closed, _) = write(&mut client, ms(1), B, 0, 99);
        assert_eq!(closed.first(), Some(&(0, ms(61))));
        assert_eq!(closed.last(), Some(&(29, ms(90))));
        assert_eq!(turns(&mut client, 2, ms(65)), [(99, ms(65))]);
    }

    #[test]
    fn each_writer_takes_its_turn_in_the_order_it_was_woken() {
        let mut client = client_loop(true);
        write(&mut client, SimTime::ZERO, A, 4, 1);
        write(&mut client, SimTime::ZERO, B, 2, 2);
        write(&mut client, SimTime::ZERO, A, 2, 3);
        // Built by 8 ms; A's turn copies its 6 MiB (3 ms), then B's its 2 MiB (1 ms).
        assert_eq!(
            turns(&mut client, 1, ms(8)),
            [(1, ms(10)), (3, ms(11)), (2, ms(12))]
        );
        let (_, opened) = write(&mut client, ms(9), C, 0, 4);
        assert_eq!(opened, opens(2, ms(12)));
    }

    #[test]
    fn commands_issued_while_the_loop_is_busy_are_one_batch_with_one_turn() {
        let mut client = client_loop(true);
        for name in 0..30 {
            write(&mut client, SimTime::ZERO, A, 2, name);
        }
        // Built by 60 ms, A's turn to 65. Three 4 MiB commands on B at 1, 2 and 3 ms: the loop
        // gets to them at 65 and builds them back to back, to 77; one on C at 4 ms joins them.
        let (_, opened) = write(&mut client, ms(1), B, 4, 31);
        assert_eq!(opened, opens(2, ms(69)));
        for (at, name) in [(2, 32), (3, 33)] {
            let (closed, joined) = write(&mut client, ms(at), B, 4, name);
            assert_eq!((closed, joined), (vec![], JOINED));
        }
        write(&mut client, ms(4), C, 0, 34);
        // B's one turn: its commands leave as copied (2 ms each), the loop charged 10 of its
        // 12 MiB (5 ms); then C's.
        assert_eq!(
            turns(&mut client, 2, ms(77)),
            [(31, ms(79)), (32, ms(81)), (33, ms(83)), (34, ms(82))]
        );
    }

    #[test]
    fn a_batch_once_idle_is_turned_when_its_builds_end() {
        let mut client = client_loop(true);
        write(&mut client, SimTime::ZERO, A, 2, 1);
        assert_eq!(turns(&mut client, 1, ms(2)), [(1, ms(3))]);
        // Idle long after: a new batch from when it is issued.
        let (_, opened) = write(&mut client, ms(50), B, 1, 2);
        assert_eq!(opened, opens(2, ms(51)));
        assert_eq!(turns(&mut client, 2, ms(51)), [(2, us(51_500))]);
    }
}

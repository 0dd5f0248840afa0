//! Faults of a Redis server: pause, hang, stop and kill; a new `maxmemory`, `FLUSHALL`; error
//! replies, or a throttled CPU, for a while.
//!
//! Faults nest: a server is paused (hung, stopped) while at least one fault of that kind is in
//! force. What each kind does is documented on [`FaultKind`].
//!
//! A `CLIENT PAUSE` ends on the server's cron tick (`hz`), the first at or after its nominal
//! end: its end is a `PauseEnds` event at that tick. A hang has no cron (the process is
//! frozen) and ends exactly at its end.

use outagelab_model::time::{SimDuration, SimTime};

use super::{Redis, RedisEvent};
use crate::kernel::EventQueue;
use crate::scenario::{ConnectionId, FaultKind, PauseMode, ServerId};

impl Redis {
    /// A fault of `kind` on server `id` starts (`on`) or ends. A kill is an instant: its end
    /// does nothing.
    pub fn fault(
        &mut self,
        now: SimTime,
        id: ServerId,
        kind: FaultKind,
        on: bool,
        events: &mut EventQueue,
    ) {
        self.changed = true;
        self.server_fault(now, id, kind, on, events);
        // A pause or hang that ends here runs the commands held (`try_execute`), which may
        // store keys with an expiry.
        self.schedule_expiries(events);
    }

    fn server_fault(
        &mut self,
        now: SimTime,
        id: ServerId,
        kind: FaultKind,
        on: bool,
        events: &mut EventQueue,
    ) {
        let server = &mut self.servers[id.index()];
        match kind {
            FaultKind::Pause(mode) if on => self.pause(now, id, mode, true, events),
            FaultKind::Pause(mode) => {
                let tick = server
                    .cron_period
                    .map_or(now, |period| next_tick(now, period));
                if tick > now {
                    events.schedule(tick, RedisEvent::PauseEnds { server: id, mode });
                } else {
                    self.pause(now, id, mode, false, events);
                }
            }
            FaultKind::Hang => self.hang(now, id, on, events),
            FaultKind::Stop => self.stop(now, id, on, events),
            FaultKind::Crash => {
                adjust(&mut self.servers[id.index()].unreachable, on);
                self.stop(now, id, on, events);
            }
            FaultKind::CpuThrottle { slowdown_permille } => {
                server.slowdowns.set(slowdown_permille, on);
            }
            FaultKind::Kill if on => self.kill(now, id, events),
            FaultKind::MaxMemory(limit) if on => server.keyspace.set_maxmemory(now, limit),
            FaultKind::FlushAll if on => server.keyspace.clear(),
            FaultKind::Kill | FaultKind::MaxMemory(_) | FaultKind::FlushAll => {}
            FaultKind::Disconnect => unreachable!("validated: a disconnect acts on a connection"),
            FaultKind::Slow { .. }
            | FaultKind::Refuse
            | FaultKind::PoolExhausted { .. }
            | FaultKind::LockHeld { .. } => {
                unreachable!("validated: a `{}` fault acts on a database", kind.name())
            }
            FaultKind::Latency { .. }
            | FaultKind::Bandwidth(_)
            | FaultKind::PacketLoss { .. }
            | FaultKind::SlowClose { .. } => {
                unreachable!("validated: a `{}` fault acts on a connection", kind.name())
            }
            // The primary's process dies and stays down: it is replaced, not restarted.
            // A dead host stays dead too: its address answers nothing from then on.
            FaultKind::Failover { unreachable, .. } if on => {
                if unreachable {
                    adjust(&mut self.servers[id.index()].unreachable, true);
                }
                self.stop(now, id, true, events);
            }
            FaultKind::Failover { replica, .. } => self.promote(id, replica),
            FaultKind::ErrorReply { error, commands } => {
                let fault = (error, commands);
                if on {
                    server.error_replies.push(fault);
                } else if let Some(position) = server.error_replies.iter().position(|&f| f == fault)
                {
                    server.error_replies.remove(position);
                }
            }
        }
    }

    /// A pause of `mode` starts (`on`) or ends (on its cron tick). When the last write-only
    /// pause ends, the connections it held go back in the ring.
    pub(super) fn pause(
        &mut self,
        now: SimTime,
        id: ServerId,
        mode: PauseMode,
        on: bool,
        events: &mut EventQueue,
    ) {
        let server = &mut self.servers[id.index()];
        match mode {
            PauseMode::All => adjust(&mut server.paused, on),
            PauseMode::Write => adjust(&mut server.paused_writes, on),
        }
        if server.paused_writes == 0 {
            let blocked = std::mem::take(&mut server.blocked);
            server.ready.extend(blocked);
        }
        self.try_execute(now, id, events);
    }

    fn hang(&mut self, now: SimTime, id: ServerId, on: bool, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        adjust(&mut server.hung, on);
        if server.hung == 0
            && let Some(done) = server.parked.take()
        {
            self.send_reply(now, id, done, events);
        }
        self.try_execute(now, id, events);
    }

    /// Stops (`on`) or starts the process.
    fn stop(&mut self, now: SimTime, id: ServerId, on: bool, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        adjust(&mut server.stopped, on);
        if !on {
            if server.stopped == 0 {
                server.keyspace.restart(now, server.persistence);
            }
            return;
        }
        if server.stopped > 1 {
            return;
        }
        server.epoch = server.epoch.wrapping_add(1);
        server.executing = None;
        server.parked = None;
        server.ready.clear();
        self.drop_clients(now, id, events);
    }

    /// `CLIENT KILL` of every client: the server drops each connection (input not yet
    /// executed, and the reply of a command it is executing, are lost) and keeps running.
    ///
    /// CLIENT KILL is itself a command: a hung or stopped process cannot run it, so then it
    /// does nothing.
    fn kill(&mut self, now: SimTime, id: ServerId, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        if server.hung > 0 || server.stopped > 0 {
            return;
        }
        // Every client goes, so none stays in the ring; a command being executed finishes,
        // and its reply is dropped with its connection.
        server.ready.clear();
        self.drop_clients(now, id, events);
    }

    /// The server closes every connection it holds open; each client hears it after the
    /// replies already on the wire.
    fn drop_clients(&mut self, now: SimTime, id: ServerId, events: &mut EventQueue) {
        let server = &mut self.servers[id.index()];
        server.blocked.clear(); // their input goes with their connections
        let connections = self.servers[id.index()].connections.clone();
        for connection_id in connections {
            self.drop_client(now, connection_id, events);
        }
    }

    /// The server closes one connection (its input not yet executed goes with it); the client
    /// hears it after the replies already on the wire.
    fn drop_client(&mut self, now: SimTime, connection_id: ConnectionId, events: &mut EventQueue) {
        let connection = &self.connections[connection_id.index()];
        let server = &mut self.servers[connection.server.index()];
        let executing = server.executing.as_ref().map(|done| done.connection);
        server.ready.retain(|&c| c != connection_id);
        server.blocked.retain(|&c| c != connection_id);
        let connection = &mut self.connections[connection_id.index()];
        // The connection whose command is being executed stays scheduled until that
        // command is done, which puts it back in the ring only if it has more input.
        connection.scheduled = executing == Some(connection_id);
        connection.input.clear();
        if connection.server_open {
            connection.server_open = false;
            // The close reaches the client after the replies already on the wire.
            let closed_at = connection.inbound.arrival_after_queue(now);
            events.schedule(
                closed_at,
                RedisEvent::ConnectionClosed {
                    connection: connection_id,
                    epoch: connection.epoch,
                },
            );
        }
    }

    /// `replica` takes over from `primary`: it stops replicating and takes writes, and every
    /// address that led to `primary` now leads to it, for the connections that follow
    /// failovers (from their next connection attempt).
    fn promote(&mut self, primary: ServerId, replica: ServerId) {
        self.servers[replica.index()].replica_of = None;
        for route in &mut self.route {
            if *route == primary {
                *route = replica;
            }
        }
    }

    /// A fault on one client connection starts (`on`) or ends: `kill` closes it (CLIENT KILL
    /// of that client; it may reconnect at once), `disconnect` cuts it from its server until
    /// the end (the link drops and attempts are refused).
    pub fn connection_fault(
        &mut self,
        now: SimTime,
        id: ConnectionId,
        kind: FaultKind,
        on: bool,
        events: &mut EventQueue,
    ) {
        self.changed = true;
        match kind {
            FaultKind::Kill if on => {
                let server = &self.servers[self.connections[id.index()].server.index()];
                // CLIENT KILL is a command: a hung or stopped server cannot run it.
                if server.hung == 0 && server.stopped == 0 {
                    self.drop_client(now, id, events);
                }
            }
            FaultKind::Kill => {}
            FaultKind::Disconnect => {
                adjust(&mut self.cut[id.index()], on);
                if on {
                    self.drop_client(now, id, events);
                }
            }
            // A toxic's start and end are in its connection's timeline from the start (every
            // fault's are known), which the pipes read as they send: an end that comes while
            // bytes are on the wire or held is an end for them too (`pipe`).
            FaultKind::Latency { .. }
            | FaultKind::Bandwidth(_)
            | FaultKind::PacketLoss { .. }
            | FaultKind::SlowClose { .. } => {}
            _ => unreachable!(
                "validated: a `{}` fault cannot act on a connection",
                kind.name()
            ),
        }
    }
}

/// The first cron tick at or after `now`: ticks fall at multiples of `period` from zero.
fn next_tick(now: SimTime, period: SimDuration) -> SimTime {
    let period = period.as_nanos().max(1);
    SimTime::from_nanos(now.as_nanos().div_ceil(period).saturating_mul(period))
}

/// One more (`on`) or one fewer fault of a kind in force.
fn adjust(depth: &mut u32, on: bool) {
    if on {
        *depth += 1;
    } else {
        *depth = depth.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{Harness, get, set};
    use crate::kernel::StepResult;
    use crate::scenario::FaultKind::{Hang, Kill, Stop};
    use crate::scenario::PauseMode;
    use outagelab_model::time::SimDuration;

    const PAUSE: crate::scenario::FaultKind = crate::scenario::FaultKind::Pause(PauseMode::All);

    #[test]
    fn a_paused_server_holds_its_input_until_the_pause_ends() {
        // The command reaches the server at 100 us and runs when the pause ends at 10 ms.
        let mut redis = Harness::new(1);
        redis.fault_at(0, PAUSE, true);
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(10_000, PAUSE, false);
        redis.run();
        assert_eq!(redis.finished_us(), vec![(0, 10_105)]);
    }

    #[test]
    fn pauses_nest_and_the_server_resumes_when_the_last_one_ends() {
        let mut redis = Harness::new(1);
        redis.fault_at(0, PAUSE, true);
        redis.fault_at(0, PAUSE, true);
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(10_000, PAUSE, false);
        redis.fault_at(20_000, PAUSE, false);
        redis.run();
        assert_eq!(redis.finished_us(), vec![(0, 20_105)]);
    }

    #[test]
    fn a_hung_server_keeps_the_reply_it_finished_and_runs_nothing_more() {
        // The first command runs from 100 to 105 us; the hang from 102 us holds its reply
        // until 20 ms. The second arrives at 1.1 ms and runs after the hang.
        let mut redis = Harness::new(1);
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(102, Hang, true);
        redis.issue_at(1_000, 0, get(1), 1);
        redis.fault_at(20_000, Hang, false);
        redis.run();
        assert_eq!(redis.finished_us(), vec![(0, 20_100), (1, 20_105)]);
    }

    /// A SET at 0, a stop from 1 ms to 11 ms, a GET of the key at 60 ms (after the client
    /// reconnected at 51.3 ms): the reply the GET gets.
    fn get_after_restart(persistence: bool) -> StepResult {
        let mut redis = Harness::with(1, |scenario| {
            scenario.servers[0].persistence = persistence;
        });
        redis.issue_at(0, 0, set(0, 10), 0);
        redis.fault_at(1_000, Stop, true);
        redis.fault_at(11_000, Stop, false);
        redis.issue_at(60_000, 0, get(0), 1);
        redis.run();
        let finished = redis.finished();
        assert_eq!(finished.len(), 2);
        assert_eq!(finished[1].1, 60_205);
        finished[1].2
    }

    #[test]
    fn a_restart_keeps_the_keys_only_with_persistence() {
        assert_eq!(get_after_restart(false), StepResult::Miss);
        assert_eq!(get_after_restart(true), StepResult::Hit);
    }

    #[test]
    fn a_kill_cannot_run_on_a_hung_server() {
        // The kill during the hang does nothing: the command's reply comes when the hang ends.
        let mut redis = Harness::new(1);
        redis.fault_at(0, Hang, true);
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(5_000, Kill, true);
        redis.fault_at(10_000, Hang, false);
        redis.run();
        assert_eq!(redis.finished_us(), vec![(0, 10_105)]);
        let summary = redis.summary();
        assert_eq!(summary.disconnects, 0);
    }

    use crate::scenario::{CommandScope, ErrorReply, EvictionPolicy, FaultKind, MemorySpec};
    use outagelab_report::Outcome;

    /// A server with a cron at 10 Hz (ticks every 100 ms), as a file's default.
    fn with_cron() -> Harness {
        Harness::with(1, |scenario| {
            scenario.servers[0].hz = std::num::NonZeroU32::new(10);
        })
    }

    #[test]
    fn a_client_pause_ends_on_the_first_cron_tick_at_or_after_its_end() {
        // A pause from 0 to 50 ms ends on the tick at 100 ms; one to 200 ms, on that tick.
        for (end_us, runs_at_us) in [(50_000, 100_000), (200_000, 200_000)] {
            let mut redis = with_cron();
            redis.fault_at(0, PAUSE, true);
            redis.issue_at(0, 0, get(0), 0);
            redis.fault_at(end_us, PAUSE, false);
            redis.run();
            assert_eq!(redis.finished_us(), vec![(0, runs_at_us + 105)]);
        }
    }

    #[test]
    fn a_hang_ends_exactly_at_its_end_a_frozen_process_has_no_cron() {
        let mut redis = with_cron();
        redis.fault_at(0, Hang, true);
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(50_000, Hang, false);
        redis.run();
        assert_eq!(redis.finished_us(), vec![(0, 50_105)]);
    }

    #[test]
    fn a_write_pause_serves_reads_and_holds_a_write_with_what_is_behind_it() {
        // Connection 0 sends a SET then a GET; connection 1 a GET. The pause holds writes
        // until 10 ms: connection 1's GET is served at once; connection 0's GET waits behind
        // its SET, as a paused client's pipeline does.
        let mut redis = Harness::new(2);
        let write_pause = FaultKind::Pause(PauseMode::Write);
        redis.fault_at(0, write_pause, true);
        redis.issue_at(0, 0, set(0, 10), 0);
        redis.issue_at(0, 0, get(1), 1);
        redis.issue_at(0, 1, get(2), 2);
        redis.fault_at(10_000, write_pause, false);
        redis.run();
        assert_eq!(
            redis.finished_us(),
            vec![(2, 205), (0, 10_105), (1, 10_110)]
        );
    }

    #[test]
    fn an_error_reply_fault_answers_the_commands_it_covers_while_it_lasts() {
        // A demoted primary from 0 to 10 ms: writes get READONLY, reads are served.
        let readonly = FaultKind::ErrorReply {
            error: ErrorReply::ReadOnly,
            commands: CommandScope::Writes,
        };
        let mut redis = Harness::new(1);
        redis.fault_at(0, readonly, true);
        redis.issue_at(0, 0, set(0, 10), 0);
        redis.issue_at(0, 0, get(0), 1);
        redis.fault_at(10_000, readonly, false);
        redis.issue_at(20_000, 0, set(0, 10), 2);
        redis.run();
        assert_eq!(
            redis.finished(),
            vec![
                (0, 205, StepResult::Error(Outcome::ReadOnly)),
                (1, 210, StepResult::Miss),
                (2, 20_205, StepResult::Ok),
            ]
        );
    }

    #[test]
    fn a_maxmemory_fault_brings_oom_and_flushall_frees_the_memory() {
        // One key of 100 bytes takes 180; a limit of 100 under noeviction refuses the next
        // SET; FLUSHALL empties the server, and the SET after it runs.
        let mut redis = Harness::with(1, |scenario| {
            scenario.servers[0].memory = MemorySpec {
                policy: EvictionPolicy::NoEviction,
                ..MemorySpec::DEFAULT
            };
        });
        redis.issue_at(0, 0, set(0, 100), 0);
        redis.run_until(1_000);
        assert_eq!(redis.server().used_memory, 180);
        redis.fault_at(1_000, FaultKind::MaxMemory(Some(100)), true);
        redis.issue_at(2_000, 0, set(1, 100), 1);
        redis.issue_at(2_000, 0, get(0), 2);
        redis.fault_at(3_000, FaultKind::FlushAll, true);
        assert_eq!(redis.server().used_memory, 0);
        redis.issue_at(4_000, 0, set(1, 100), 3);
        redis.run();
        let results: Vec<StepResult> = redis.finished().into_iter().map(|f| f.2).collect();
        assert_eq!(
            results,
            [
                StepResult::Ok,
                StepResult::Error(Outcome::Oom),
                StepResult::Hit,
                StepResult::Ok,
            ]
        );
        let server = redis.server();
        assert_eq!((server.used_memory, server.oom_replies), (180, 1));
        assert_eq!(server.maxmemory, Some(100));
    }

    #[test]
    fn a_cpu_throttle_slows_the_commands_that_start_while_it_lasts_and_the_slowest_holds() {
        // 100 us each way, 5 us a command. A GET reaching the server at 100 us is running when
        // a 4x throttle starts at 102 us: it keeps its 5 us (reply at 205). Two GETs issued at
        // 1 ms take 20 us each (1 220, 1 240). A 2x throttle since 500 us holds once the 4x
        // ends at 2 ms: a GET then takes 10 us (2 210); after both, 5 us again (3 205).
        let throttle = |times: u32| FaultKind::CpuThrottle {
            slowdown_permille: times * 1000,
        };
        let mut redis = Harness::new(1);
        redis.issue_at(0, 0, get(0), 0);
        redis.fault_at(102, throttle(4), true);
        redis.fault_at(500, throttle(2), true);
        redis.issue_at(1_000, 0, get(1), 1);
        redis.issue_at(1_000, 0, get(2), 2);
        redis.fault_at(2_000, throttle(4), false);
        redis.issue_at(2_000, 0, get(3), 3);
        redis.fault_at(2_500, throttle(2), false);
        redis.issue_at(3_000, 0, get(4), 4);
        redis.run();
        assert_eq!(
            redis.finished_us(),
            vec![(0, 205), (1, 1_220), (2, 1_240), (3, 2_210), (4, 3_205)]
        );
    }

    #[test]
    fn a_server_restarted_inside_a_cpu_throttle_stays_throttled() {
        // Its container is throttled, not the process: a 4x throttle from the start, a stop
        // from 1 ms to 2 ms; a GET at 1 s, on the reconnected link, takes 20 us.
        let mut redis = Harness::new(1);
        let throttle = FaultKind::CpuThrottle {
            slowdown_permille: 4000,
        };
        redis.fault_at(0, throttle, true);
        redis.fault_at(1_000, FaultKind::Stop, true);
        redis.fault_at(2_000, FaultKind::Stop, false);
        redis.issue_at(1_000_000, 0, get(0), 0);
        redis.run();
        assert_eq!(redis.finished_us(), vec![(0, 1_000_220)]);
    }

    #[test]
    fn a_crashed_node_answers_no_attempt_and_comes_back_empty() {
        // A crash at 1 ms drops the link; the client hears it at 1.1 ms and reconnects 50 ms
        // later, into silence: the attempt waits out its 10 s connect timeout. The node is
        // back at 5 s, empty: the next attempt (after the timeout and a 100 ms delay) is
        // answered, and the SET of before the crash is gone.
        let mut redis = Harness::new(1);
        redis.issue_at(0, 0, set(3, 10), 0);
        redis.fault_at(1_000, crate::scenario::FaultKind::Crash, true);
        redis.fault_at(5_000_000, crate::scenario::FaultKind::Crash, false);
        redis.run_until(10_500_000);
        let summary = redis.summary();
        assert_eq!(summary.connect_failures, 1, "one attempt timed out");
        redis.issue_at(10_500_000, 0, get(3), 1);
        redis.run_until(11_000_000);
        assert_eq!(
            redis
                .finished()
                .last()
                .map(|&(slot, _, result)| (slot, result)),
            Some((1, StepResult::Miss))
        );
    }

    #[test]
    fn a_cut_link_is_refused_even_while_its_server_is_hung() {
        // The server freezes at 1 ms; at 2 ms the client's network is cut too. Its reconnect
        // 50 ms after the drop is refused by the cut at once, not left to its 10 s connect
        // timeout by the frozen server behind it.
        let mut redis = Harness::new(1);
        redis.fault_at(1_000, crate::scenario::FaultKind::Hang, true);
        redis.connection_fault_at(2_000, 0, crate::scenario::FaultKind::Disconnect, true);
        redis.run_until(1_000_000);
        assert!(
            redis.summary().connect_failures >= 1,
            "refused within a second"
        );
    }

    /// One connection with a toxic fault of `kind` on it from `from_us` to `until_us`
    /// (`None`: to the end of the run), and `edit` done to the scenario.
    fn with_toxic(
        kind: FaultKind,
        from_us: u64,
        until_us: Option<u64>,
        edit: impl FnOnce(&mut crate::scenario::Scenario),
    ) -> Harness {
        Harness::with(1, |scenario| {
            let at = outagelab_model::time::SimTime::from_nanos(from_us * 1_000);
            scenario.faults.push(crate::scenario::FaultSpec {
                name: "toxic".into(),
                target: crate::scenario::FaultTarget::Connection(crate::scenario::ConnectionId(0)),
                kind,
                at,
                duration: until_us.map(|until| SimDuration::from_micros(until - from_us)),
            });
            edit(scenario);
        })
    }

    #[test]
    fn a_latency_toxic_delays_commands_and_replies_sent_while_it_lasts() {
        // 100 us each way and 5 us a command: a GET takes 205 us. 50 ms added from 1 ms to
        // 200 ms: one issued at 10 ms reaches the server at 60.1 ms and its reply is back at
        // 110.205 ms; one issued at 199 ms is held until the end, reaches the server at
        // 200.1 ms, and its reply takes 100 us: 200.205 ms; one at 300 ms takes 205 us.
        let latency = crate::scenario::FaultKind::Latency {
            added: SimDuration::from_millis(50),
            jitter: SimDuration::ZERO,
        };
        let mut redis = with_toxic(latency, 1_000, Some(200_000), |_| {});
        redis.issue_at(10_000, 0, get(0), 0);
        redis.issue_at(199_000, 0, get(0), 1);
        redis.issue_at(300_000, 0, get(0), 2);
        redis.run();
        assert_eq!(
            redis.finished_us(),
            vec![(0, 110_205), (1, 200_205), (2, 300_205)]
        );
    }

    /// A GET at 10 ms held by a CLIENT PAUSE from 1 ms; the network is cut at 20 ms. The
    /// client hears the drop one way later, at 20.1 ms; with a 300 ms `slow_close` on the
    /// connection, at 320.1 ms: until then it counts no disconnect and tries no reconnect.
    /// A `slow_close` that ends at 100 ms lets the close go then.
    #[test]
    fn a_slow_close_holds_back_the_drop_a_client_hears() {
        let cases = [
            (None, 20_100),
            (Some(30_000_000), 320_100),
            (Some(100_000), 100_000),
        ];
        for (until_us, heard_us) in cases {
            let run_to = |at_us: u64| {
                let close = FaultKind::SlowClose {
                    delay: SimDuration::from_millis(300),
                };
                let mut redis = match until_us {
                    Some(until) => with_toxic(close, 0, Some(until), |_| {}),
                    None => Harness::new(1),
                };
                redis.fault_at(1_000, FaultKind::Pause(PauseMode::All), true);
                redis.issue_at(10_000, 0, get(0), 0);
                redis.connection_fault_at(20_000, 0, FaultKind::Disconnect, true);
                redis.run_until(at_us);
                redis.summary()
            };
            let before = run_to(heard_us - 1);
            let after = run_to(heard_us);
            assert_eq!(
                (before.disconnects, before.connect_attempts),
                (0, 0),
                "slow close to {until_us:?} us"
            );
            assert_eq!(after.disconnects, 1, "slow close to {until_us:?} us");
        }
    }

    /// Issue 29's case: ten SETs of 1 MiB issued at once on a connection of 100 MiB/s and
    /// 100 us one way, behind a 1 MiB/s `bandwidth` fault from 0. Each SET is 1,048,608
    /// bytes (32 of framing): 10.000306 ms at 100 MiB/s, 1.000030518 s at 1 MiB/s; the
    /// server takes 5 us each and its 8-byte replies take 77 ns (7,630 ns at 1 MiB/s).
    /// - No fault: the last SET is on the wire at 100.00306 ms, its reply back at
    ///   100.208137 ms.
    /// - A fault of 100 ms: 104,857 bytes go in it, the first SET's other 943,751 take
    ///   9.000311 ms more, the other nine 10.000306 ms each: the last reply is back at
    ///   199.208142 ms, about 0.2 s.
    /// - A fault of 30 s: a second a SET, 10.00030518 s, and the reply at 10.000517 s.
    #[test]
    fn a_bandwidth_fault_throttles_ten_large_sets_only_while_it_lasts() {
        let throttle = FaultKind::Bandwidth(crate::scenario::ByteRate::new(1 << 20).unwrap());
        let last_reply_us = |until_us: Option<u64>| {
            let edit = |scenario: &mut crate::scenario::Scenario| {
                scenario.connections[0].bandwidth = crate::scenario::ByteRate::new(100 << 20);
            };
            let mut redis = match until_us {
                Some(until) => with_toxic(throttle, 0, Some(until), edit),
                None => Harness::with(1, edit),
            };
            for slot in 0..10 {
                redis.issue_at(0, 0, set(slot, 1 << 20), slot);
            }
            redis.run();
            let finished = redis.finished_us();
            assert_eq!(finished.len(), 10);
            finished[9].1
        };
        assert_eq!(last_reply_us(None), 100_208);
        assert_eq!(last_reply_us(Some(100_000)), 199_208);
        assert_eq!(last_reply_us(Some(30_000_000)), 10_000_517);
    }
}

//! Replicas: asynchronous replication from a primary, and what a failover keeps.
//!
//! Each write a primary runs (not a `PUBLISH`) is sent to each of its replicas and arrives
//! `lag` later; it applies then if the primary's process has not ended since (a stop, or the
//! start of a failover, bumps its epoch): so the writes within one lag of the primary's end
//! are lost, as with Redis' asynchronous replication. A replica applies writes whatever its
//! own memory limit (`replica-ignore-maxmemory yes`), and answers its own clients' writes
//! with `READONLY`. A failover (`faults.rs`) promotes it: it stops following and takes
//! writes, and connections that follow failovers are routed to it.

use outagelab_model::time::SimTime;

use super::keyspace::Op;
use super::{Redis, RedisEvent};
use crate::kernel::EventQueue;
use crate::scenario::ServerId;

impl Redis {
    /// Sends a write `server` ran to each of its replicas, to arrive after the replica's lag.
    pub(super) fn replicate(
        &mut self,
        now: SimTime,
        server: ServerId,
        op: Op,
        events: &mut EventQueue,
    ) {
        let epoch = self.servers[server.index()].epoch;
        for index in 0..self.servers.len() {
            let Some(replication) = self.servers[index].replica_of else {
                continue;
            };
            if replication.primary != server {
                continue;
            }
            let at = now.saturating_add(replication.lag);
            self.replication[index].push_back((at, epoch, op));
            let replica = ServerId(index as u32);
            events.schedule(at, RedisEvent::Replicate { replica });
        }
    }

    /// The writes due at `replica` arrive: each applies if its primary has not ended since
    /// it ran (a write within the lag of the primary's end is lost) and the replica is still
    /// one (promoted, it no longer follows).
    pub(super) fn on_replicate(&mut self, now: SimTime, replica: ServerId) {
        while let Some(&(at, epoch, op)) = self.replication[replica.index()].front() {
            if at > now {
                break;
            }
            self.replication[replica.index()].pop_front();
            let Some(replication) = self.servers[replica.index()].replica_of else {
                continue;
            };
            if self.servers[replication.primary.index()].epoch == epoch {
                self.servers[replica.index()].keyspace.replicate(now, op);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::kernel::StepResult;
    use crate::scenario::{
        ConnectionSpec, ErrorReply, FaultKind, Replication, ServerId, ServerSpec,
    };
    use outagelab_model::time::SimDuration;
    use outagelab_report::Outcome;

    /// Server 0 is a primary; server 1 replicates it 1 ms behind. Connections 0 and 1 go to
    /// the primary (1 does not follow failovers), 2 to the replica.
    fn pair() -> Harness {
        Harness::with(2, |scenario| {
            let mut replica = ServerSpec::new("replica");
            replica.replica_of = Some(Replication {
                primary: ServerId(0),
                lag: SimDuration::from_millis(1),
            });
            scenario.servers.push(replica);
            scenario.connections[1].follows_failover = false;
            scenario
                .connections
                .push(ConnectionSpec::new("to-replica", ServerId(1)));
        })
    }

    const FAILOVER: FaultKind = FaultKind::Failover {
        replica: ServerId(1),
        unreachable: false,
    };

    #[test]
    fn a_write_reaches_the_replica_one_lag_after_the_primary_ran_it() {
        let mut redis = pair();
        redis.issue_at(0, 0, set(4, 10), 1);
        // The primary runs the SET at 100 us; the replica has it from 1 100 us.
        redis.issue_at(500, 2, get(4), 2);
        redis.issue_at(2_000, 2, get(4), 3);
        redis.run();
        let results: Vec<(u32, StepResult)> = redis
            .finished()
            .into_iter()
            .map(|(s, _, r)| (s, r))
            .collect();
        assert_eq!(
            results,
            [
                (1, StepResult::Ok),
                (2, StepResult::Miss),
                (3, StepResult::Hit)
            ]
        );
    }

    #[test]
    fn a_replica_answers_its_clients_writes_with_readonly() {
        let mut redis = pair();
        redis.issue_at(0, 2, set(4, 10), 1);
        redis.run();
        assert_eq!(
            redis.finished(),
            [(1, 205, StepResult::Error(ErrorReply::ReadOnly.outcome()))]
        );
        assert_eq!(ErrorReply::ReadOnly.outcome(), Outcome::ReadOnly);
    }

    #[test]
    fn a_failover_keeps_what_was_replicated_loses_the_last_lag_and_moves_the_followers() {
        let mut redis = pair();
        redis.issue_at(0, 0, set(1, 10), 1); // replicated at 1.1 ms
        redis.issue_at(10_000, 0, set(2, 10), 2); // run at 10.1 ms: still on its way at 10.5
        redis.fault_at(10_500, FAILOVER, true);
        // Promoted at 50 ms. Connection 0 follows: its next attempt goes to the replica.
        redis.fault_at(50_000, FAILOVER, false);
        redis.issue_at(200_000, 0, get(1), 3);
        redis.issue_at(200_000, 0, get(2), 4);
        redis.issue_at(200_000, 0, set(3, 10), 5);
        // Connection 1 keeps its address: the dead primary refuses it for good.
        redis.issue_at(200_000, 1, get(1), 6);
        redis.run_until(3_000_000);
        let result = |slot: u32| {
            redis
                .finished()
                .into_iter()
                .find(|(s, _, _)| *s == slot)
                .map(|(_, _, r)| r)
        };
        assert_eq!(
            result(3),
            Some(StepResult::Hit),
            "replicated before the end"
        );
        assert_eq!(result(4), Some(StepResult::Miss), "within the lag: lost");
        assert_eq!(
            result(5),
            Some(StepResult::Ok),
            "the promoted replica takes writes"
        );
        assert_ne!(
            result(6),
            Some(StepResult::Hit),
            "no answer from the old address"
        );
        assert!(redis.connection(1).connect_failures > 0);
    }

    #[test]
    fn an_unreachable_failover_leaves_the_old_address_silent_while_followers_move() {
        // The primary's host dies at 1 ms: connection 1 (not following failovers) hears the
        // link drop at 1.1 ms and reconnects 50 ms later into silence, where a refused attempt
        // would have failed at once. Its 10 s connect timeout runs out at 10.051 s; connection
        // 0 follows the replica promoted at 20 ms and is answered.
        let mut redis = pair();
        let unreachable = FaultKind::Failover {
            replica: ServerId(1),
            unreachable: true,
        };
        redis.fault_at(1_000, unreachable, true);
        redis.fault_at(20_000, unreachable, false);
        redis.issue_at(9_000_000, 1, get(1), 1);
        redis.issue_at(200_000, 0, set(2, 10), 2);
        redis.run_until(9_500_000);
        assert_eq!(redis.connection(1).connect_failures, 0, "still waiting");
        assert!(
            redis
                .finished()
                .iter()
                .any(|&(s, _, r)| (s, r) == (2, StepResult::Ok))
        );
        redis.run_until(10_100_000);
        assert_eq!(
            redis.connection(1).connect_failures,
            1,
            "timed out, not refused"
        );
    }
}

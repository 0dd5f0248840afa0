//! Pub/Sub and client tracking: what a server pushes to subscriber connections after it runs
//! a command.
//!
//! - `PUBLISH channel key` sends the key to every connection subscribed to the channel on
//!   that server whose link is up at that instant. Delivery is at-most-once: a subscriber
//!   whose link is down gets nothing and never will (counted as `messages_missed`); a message
//!   on the wire when the link dies is lost with it.
//! - `CLIENT TRACKING` (RESP2, with `REDIRECT` to a subscriber): in default mode the server
//!   remembers, per key, the tracking connections that read it (a `GET`), and when any
//!   connection writes the key (`SET`, `SET NX` that set it, `INCR`, `DEL`) it sends one
//!   invalidation to each of their redirect connections and forgets them, so a key is
//!   invalidated once until it is read again. BCAST connections get an invalidation for every
//!   write of a key of their families and are remembered by nothing. Keys that expire or are
//!   evicted send nothing here (Redis does send them); the tracking table is not emptied when
//!   a tracking link is lost (Redis forgets a closed client's keys).
//!
//! A pushed message travels the subscriber's inbound pipe like a reply (`Reply::Push`); on
//! arrival it goes to `Redis::messages` for the engine, which invalidates the key in the
//! subscriber's cache. A subscriber whose link comes back after a loss goes to
//! `Redis::resubscribed`, for a cache that flushes on reconnect.

use std::collections::{BTreeMap, BTreeSet};

use outagelab_model::time::SimTime;

use super::connection::Link;
use super::keyspace::{Op, Reply};
use super::{Redis, RedisEvent, is_write};
use crate::kernel::EventQueue;
use crate::scenario::{ConnectionId, RedisCommand, ServerId};

/// The keys tracking connections (default mode) have read and not been told about since:
/// `(server, family, index)` to the connections (owners) that read it.
#[derive(Default)]
pub(super) struct TrackingTable {
    readers: BTreeMap<(ServerId, u32, u32), BTreeSet<ConnectionId>>,
}

impl Redis {
    /// What the server pushes after running `op` for `connection` (its reply was `reply`).
    pub(super) fn after_execute(
        &mut self,
        now: SimTime,
        server: ServerId,
        connection: ConnectionId,
        op: Op,
        reply: Reply,
        events: &mut EventQueue,
    ) {
        if !self.follow_ups || matches!(reply, Reply::Error(_) | Reply::NotSet) {
            return;
        }
        if is_write(op.command) && !matches!(op.command, RedisCommand::Publish { .. }) {
            self.replicate(now, server, op, events);
        }
        if let RedisCommand::Publish { channel } = op.command {
            let subscribers: Vec<ConnectionId> = self
                .scenario_connections()
                .filter(|(_, c)| {
                    c.server == server
                        && c.spec
                            .subscription
                            .is_some_and(|s| s.channel == Some(channel))
                })
                .map(|(id, _)| id)
                .collect();
            for subscriber in subscribers {
                self.push(now, subscriber, op, events);
            }
            return;
        }
        let owner = self.connections[connection.index()].owner;
        let key = (server, op.family, op.index);
        match op.command {
            RedisCommand::Get => {
                let tracks = self.connections[owner.index()]
                    .spec
                    .tracking
                    .as_ref()
                    .is_some_and(|t| t.bcast.is_empty());
                if tracks {
                    self.tracking.readers.entry(key).or_default().insert(owner);
                }
            }
            RedisCommand::Set { .. }
            | RedisCommand::SetNxPx { .. }
            | RedisCommand::Incr
            | RedisCommand::Del => {
                let mut told: Vec<ConnectionId> = self
                    .tracking
                    .readers
                    .remove(&key)
                    .into_iter()
                    .flatten()
                    .collect();
                told.extend(
                    self.scenario_connections()
                        .filter(|(_, c)| {
                            c.server == server
                                && c.spec.tracking.as_ref().is_some_and(|t| {
                                    t.bcast.iter().any(|family| family.0 == op.family)
                                })
                        })
                        .map(|(id, _)| id),
                );
                for tracker in told {
                    let redirect = self.connections[tracker.index()]
                        .spec
                        .tracking
                        .as_ref()
                        .expect("only tracking connections are told")
                        .redirect;
                    self.push(now, redirect, op, events);
                }
            }
            RedisCommand::Publish { .. } | RedisCommand::Lock(_) => {}
        }
    }

    /// The scenario's own connections (not a slot's later links), with their ids.
    fn scenario_connections(&self) -> impl Iterator<Item = (ConnectionId, &super::Connection)> {
        self.connections[..self.free_links.len()]
            .iter()
            .enumerate()
            .map(|(index, c)| (ConnectionId(index as u32), c))
    }

    /// Pushes the key of `op` to `subscriber` now, if its link is up; else it is missed.
    fn push(&mut self, now: SimTime, subscriber: ConnectionId, op: Op, events: &mut EventQueue) {
        let connection = &mut self.connections[subscriber.index()];
        if connection.link != Link::Connected || !connection.server_open {
            connection.stats.messages_missed += 1;
            return;
        }
        let message = Reply::Push {
            family: op.family,
            index: op.index,
        };
        let arrives = connection
            .inbound
            .send(now, (u64::MAX, message), message.bytes());
        events.schedule(
            arrives,
            RedisEvent::ReplyArrives {
                connection: subscriber,
                epoch: connection.epoch,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::kernel::StepResult;
    use crate::scenario::{
        CacheId, ChannelId, ConnectionId, FaultKind, RedisCommand, Subscription, Tracking,
    };

    fn publish(index: u32) -> crate::redis::Op {
        crate::redis::Op {
            command: RedisCommand::Publish {
                channel: ChannelId(0),
            },
            family: 0,
            index,
            version: 0,
        }
    }

    /// Connection 0 sends; 1 and 2 subscribe to channel 0 (1 flushes its cache on reconnect).
    fn harness(edit: impl FnOnce(&mut crate::scenario::Scenario)) -> Harness {
        Harness::with(3, |scenario| {
            scenario.channels.push("inv".into());
            for (index, flush) in [(1, true), (2, false)] {
                scenario.connections[index].subscription = Some(Subscription {
                    channel: Some(ChannelId(0)),
                    invalidates: CacheId(0),
                    flush_on_reconnect: flush,
                });
            }
            edit(scenario);
        })
    }

    #[test]
    fn a_publish_reaches_every_subscriber_one_way_later() {
        let mut redis = harness(|_| {});
        redis.issue_at(0, 0, publish(7), 1);
        redis.run();
        // The command reaches the server at 100 us and runs for 5 us; each message leaves at
        // 100 us and takes 100 us to its subscriber.
        assert_eq!(redis.finished(), [(1, 205, StepResult::Ok)]);
        assert_eq!(
            redis.messages(),
            [(200, ConnectionId(1), 0, 7), (200, ConnectionId(2), 0, 7)]
        );
    }

    #[test]
    fn a_subscriber_whose_link_is_down_misses_the_message_for_good() {
        // CLIENT KILL drops every link. The publisher reconnects 50 ms later and sends its
        // queued PUBLISH; subscriber 1 reconnects only after 1 s, and subscriber 2 never: the
        // message finds neither, and is not delivered when subscriber 1 comes back.
        let mut redis = harness(|scenario| {
            let slow = outagelab_model::time::SimDuration::from_secs(1);
            scenario.connections[1].reconnect_delay = slow;
            scenario.connections[1].reconnect_delay_max = slow;
            scenario.connections[2].reconnect = crate::scenario::Reconnect::Never;
        });
        redis.fault_at(0, FaultKind::Kill, true);
        redis.issue_at(0, 0, publish(3), 1);
        redis.run();
        assert_eq!(
            redis.finished().len(),
            1,
            "the publish ran once reconnected"
        );
        assert!(redis.messages().is_empty(), "{:?}", redis.messages());
        assert_eq!(redis.connection(1).messages_missed, 1);
        assert_eq!(redis.connection(2).messages_missed, 1);
        // Subscriber 1 came back (and flushes its cache on reconnect); 2 did not.
        assert_eq!(redis.resubscribed(), [ConnectionId(1)]);
    }

    #[test]
    fn tracking_invalidates_a_read_key_once_until_it_is_read_again() {
        // Connection 0 tracks (default mode) and redirects to subscriber 2; 1 writes.
        let mut redis = harness(|scenario| {
            scenario.connections[2].subscription = Some(Subscription {
                channel: None,
                invalidates: CacheId(0),
                flush_on_reconnect: false,
            });
            scenario.connections[1].subscription = None;
            scenario.connections[0].tracking = Some(Tracking {
                redirect: ConnectionId(2),
                bcast: Vec::new(),
            });
        });
        redis.issue_at(0, 0, get(4), 1);
        redis.issue_at(1_000, 1, set(4, 10), 2);
        redis.issue_at(2_000, 1, set(4, 11), 3);
        redis.issue_at(3_000, 0, get(4), 4);
        redis.issue_at(4_000, 1, set(4, 12), 5);
        redis.issue_at(5_000, 1, set(5, 12), 6);
        redis.run();
        // The first write after each read sends one invalidation; the second does not, nor
        // does a write of a key never read.
        assert_eq!(
            redis.messages(),
            [
                (1_200, ConnectionId(2), 0, 4),
                (4_200, ConnectionId(2), 0, 4)
            ]
        );
    }

    #[test]
    fn bcast_tracking_invalidates_every_write_of_its_families() {
        let mut redis = harness(|scenario| {
            scenario.connections[1].subscription = None;
            scenario.connections[0].tracking = Some(Tracking {
                redirect: ConnectionId(2),
                bcast: vec![crate::scenario::KeyFamilyId(0)],
            });
        });
        redis.issue_at(0, 1, set(4, 10), 1);
        redis.issue_at(1_000, 1, set(4, 11), 2);
        redis.run();
        assert_eq!(
            redis.messages(),
            [(200, ConnectionId(2), 0, 4), (1_200, ConnectionId(2), 0, 4)]
        );
    }
}

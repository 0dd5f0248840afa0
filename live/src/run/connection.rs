//! A scenario connection, live: one `redis` multiplexed connection made before the run (the
//! simulator's `reconnect = "never"` and, while nothing drops it, `"always"`), or a
//! [`LiveSlot`] (`reconnect = "slot"`), which owns its connections' lifetime.
//!
//! A command is built as the scenario says (`GET`, `SET` with its value and `PX` TTL, `SET NX
//! PX`, `INCR`, `DEL`), sent with the connection's `command_timeout` as the client's response
//! timeout, and its reply or error read back as the step result the simulator would give.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use outagelab_model::time::SimTime;
use outagelab_report::Outcome;
use outagelab_sim::StepResult;
use outagelab_sim::scenario::{ConnectionSpec, Reconnect, RedisCommand};
use redis::aio::MultiplexedConnection;
use redis::{Cmd, RedisError, Value};

use crate::clock::{TokioClock, std_duration};
use crate::run::record::CommandEnd;
use crate::slot::{LiveSlot, QueryError, RedisConnector};

pub(crate) enum Link {
    /// One connection for the whole run; after it is lost, commands fail (or wait offline
    /// until their timeout) as the simulated client's would with no reconnect.
    Plain {
        connection: MultiplexedConnection,
        lost: AtomicBool,
    },
    /// Boxed: a slot is far larger than a plain connection, and a run holds one link per
    /// connection of the file.
    Slot(Box<LiveSlot<RedisConnector, TokioClock>>),
}

pub(crate) struct Connection {
    pub spec: ConnectionSpec,
    pub link: Link,
}

impl Connection {
    /// Opens the connection (a slot connects now only if the file says it is connected at
    /// the start, as the simulator's slot is).
    pub async fn open(
        spec: &ConnectionSpec,
        address: &str,
        clock: TokioClock,
    ) -> Result<Connection, RedisError> {
        let response_timeout = spec.command_timeout.map(std_duration);
        let connect_timeout = std_duration(spec.connect_timeout).max(Duration::from_millis(1));
        let connector =
            RedisConnector::with_response_timeout(address, connect_timeout, response_timeout)?;
        let link = match spec.reconnect {
            Reconnect::Slot(config) => {
                let slot = LiveSlot::with_clock(config, connector, clock);
                if spec.connected_at_start {
                    slot.lease().await.map_err(|unavailable| {
                        RedisError::from(std::io::Error::new(
                            std::io::ErrorKind::ConnectionRefused,
                            format!("the reconnect slot could not connect: {unavailable:?}"),
                        ))
                    })?;
                }
                Link::Slot(Box::new(slot))
            }
            Reconnect::Manager { .. } => unreachable!("refused by the live check"),
            Reconnect::Always | Reconnect::Never => {
                use crate::slot::Connector;
                Link::Plain {
                    connection: connector.connect().await?,
                    lost: AtomicBool::new(false),
                }
            }
        };
        Ok(Connection {
            spec: spec.clone(),
            link,
        })
    }

    /// Runs `command` on the key `key` (a value of `value`'s first bytes for a write), issued
    /// at `issued` (for an offline wait). `replay_writes` is the step's opt-in for a slot.
    pub async fn execute(
        &self,
        command: RedisCommand,
        key: &str,
        value: &[u8],
        replay_writes: bool,
        issued: SimTime,
        clock: &TokioClock,
    ) -> (StepResult, CommandEnd) {
        let cmd = build(command, key, value);
        match &self.link {
            Link::Plain { connection, lost } => {
                if lost.load(Ordering::SeqCst) {
                    return self.after_loss(issued, clock, false).await;
                }
                let mut connection = connection.clone();
                match cmd.query_async::<Value>(&mut connection).await {
                    Ok(reply) => (read_reply(command, reply), CommandEnd::Reply),
                    Err(error) => {
                        let outcome = outcome_of(&error);
                        if outcome == Outcome::ConnectionLost {
                            lost.store(true, Ordering::SeqCst);
                            if self.spec.reconnect == Reconnect::Never {
                                return self.after_loss(issued, clock, true).await;
                            }
                        }
                        (StepResult::Error(outcome), ending(outcome))
                    }
                }
            }
            Link::Slot(slot) => {
                match slot
                    .query::<Value>(command.replay_kind(), &cmd, replay_writes)
                    .await
                {
                    Ok(reply) => (read_reply(command, reply), CommandEnd::Reply),
                    // No connection: the slot's callers fail at once.
                    Err(QueryError::Unavailable(_)) => {
                        (StepResult::Error(Outcome::Refused), CommandEnd::NotSent)
                    }
                    Err(QueryError::Failed { error, .. }) => {
                        let outcome = outcome_of(&error);
                        (StepResult::Error(outcome), ending(outcome))
                    }
                }
            }
        }
    }

    /// A command on a connection that was lost and never reconnects (`in_flight`: it was on
    /// the wire when the connection went): with the offline queue on, it is kept offline
    /// (within `max_retries`) and times out, or waits for good without a timeout; otherwise
    /// it fails, `connection_lost` if it was on the wire and `refused` if it is new.
    async fn after_loss(
        &self,
        issued: SimTime,
        clock: &TokioClock,
        in_flight: bool,
    ) -> (StepResult, CommandEnd) {
        let kept = self.spec.offline_queue && (!in_flight || self.spec.max_retries != Some(0));
        if !kept {
            return if in_flight {
                (StepResult::Error(Outcome::ConnectionLost), CommandEnd::Lost)
            } else {
                (StepResult::Error(Outcome::Refused), CommandEnd::NotSent)
            };
        }
        match self.spec.command_timeout {
            Some(timeout) => {
                tokio::time::sleep_until(clock.instant_at(issued.saturating_add(timeout))).await;
                (StepResult::Error(Outcome::Timeout), CommandEnd::Timeout)
            }
            // Nothing will ever send it: it waits until the run ends (then it is unfinished).
            None => std::future::pending().await,
        }
    }

    /// The reconnect slot's, for the summary.
    pub fn slot(&self) -> Option<&LiveSlot<RedisConnector, TokioClock>> {
        match &self.link {
            Link::Slot(slot) => Some(slot),
            Link::Plain { .. } => None,
        }
    }
}

/// The command as it goes to the server.
fn build(command: RedisCommand, key: &str, value: &[u8]) -> Cmd {
    let value_of = |bytes: u32| &value[..bytes as usize];
    let mut cmd;
    match command {
        RedisCommand::Get => {
            cmd = redis::cmd("GET");
            cmd.arg(key);
        }
        RedisCommand::Set { value_bytes, ttl } => {
            cmd = redis::cmd("SET");
            cmd.arg(key).arg(value_of(value_bytes));
            if let Some(ttl) = ttl {
                cmd.arg("PX").arg(millis_at_least_one(ttl.as_nanos()));
            }
        }
        RedisCommand::SetNxPx { value_bytes, ttl } => {
            cmd = redis::cmd("SET");
            cmd.arg(key)
                .arg(value_of(value_bytes))
                .arg("NX")
                .arg("PX")
                .arg(millis_at_least_one(ttl.as_nanos()));
        }
        RedisCommand::Incr => {
            cmd = redis::cmd("INCR");
            cmd.arg(key);
        }
        RedisCommand::Del => {
            cmd = redis::cmd("DEL");
            cmd.arg(key);
        }
        RedisCommand::Lock(_) | RedisCommand::Publish { .. } => {
            unreachable!("refused by the live check")
        }
    }
    cmd
}

/// A TTL in whole milliseconds, rounded up (Redis' `PX` takes milliseconds, at least 1).
fn millis_at_least_one(nanos: u64) -> u64 {
    nanos.div_ceil(1_000_000).max(1)
}

/// What a reply means for the step, as the simulator reads its own replies: a `GET` that finds
/// its key is a hit, one that does not a miss; a `SET NX` that finds the key taken is
/// `lock_busy`.
fn read_reply(command: RedisCommand, reply: Value) -> StepResult {
    match (command, reply) {
        (RedisCommand::Get, Value::Nil) => StepResult::Miss,
        (RedisCommand::Get, _) => StepResult::Hit,
        (RedisCommand::SetNxPx { .. }, Value::Nil) => StepResult::Error(Outcome::LockBusy),
        _ => StepResult::Ok,
    }
}

/// The outcome a `redis` error stands for: the client's response timeout, a refused connect,
/// a connection gone under the command, or the server's error reply by its code.
pub(crate) fn outcome_of(error: &RedisError) -> Outcome {
    if error.is_timeout() {
        Outcome::Timeout
    } else if error.is_connection_refusal() {
        Outcome::Refused
    } else if error.is_io_error() || error.is_connection_dropped() {
        Outcome::ConnectionLost
    } else {
        match error.code() {
            Some("OOM") => Outcome::Oom,
            Some("READONLY") => Outcome::ReadOnly,
            Some("LOADING") => Outcome::Loading,
            Some("WRONGTYPE") => Outcome::WrongType,
            _ => Outcome::ServerError,
        }
    }
}

fn ending(outcome: Outcome) -> CommandEnd {
    match outcome {
        Outcome::Timeout => CommandEnd::Timeout,
        Outcome::ConnectionLost => CommandEnd::Lost,
        Outcome::Refused => CommandEnd::NotSent,
        _ => CommandEnd::Reply,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::{ErrorKind, ServerErrorKind};

    #[test]
    fn errors_read_as_the_simulator_names_them() {
        use std::io::{Error, ErrorKind as Io};
        let check = |error: RedisError, expected: Outcome| {
            assert_eq!(outcome_of(&error), expected, "{error:?}");
        };
        check(Error::new(Io::TimedOut, "late").into(), Outcome::Timeout);
        check(
            Error::new(Io::ConnectionRefused, "no").into(),
            Outcome::Refused,
        );
        check(
            Error::new(Io::ConnectionReset, "reset").into(),
            Outcome::ConnectionLost,
        );
        check(
            (ErrorKind::Server(ServerErrorKind::ReadOnly), "READONLY").into(),
            Outcome::ReadOnly,
        );
        check(
            (ErrorKind::Server(ServerErrorKind::BusyLoading), "LOADING").into(),
            Outcome::Loading,
        );
    }

    #[test]
    fn replies_read_as_hits_misses_and_busy_locks() {
        let nx = RedisCommand::SetNxPx {
            value_bytes: 1,
            ttl: outagelab_model::time::SimDuration::from_millis(5),
        };
        assert_eq!(read_reply(RedisCommand::Get, Value::Nil), StepResult::Miss);
        assert_eq!(
            read_reply(RedisCommand::Get, Value::BulkString(b"v".to_vec())),
            StepResult::Hit
        );
        assert_eq!(
            read_reply(nx, Value::Nil),
            StepResult::Error(Outcome::LockBusy)
        );
        assert_eq!(read_reply(nx, Value::Okay), StepResult::Ok);
        assert_eq!(
            read_reply(RedisCommand::Incr, Value::Int(3)),
            StepResult::Ok
        );
        assert_eq!(millis_at_least_one(1), 1);
        assert_eq!(millis_at_least_one(2_000_001), 3);
    }
}

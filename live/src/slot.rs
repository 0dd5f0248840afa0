//! The reconnect slot on tokio: [`outagelab_model::reconnect::ReconnectSlot`] deciding, a real
//! connection per generation held beside it.
//!
//! The model decides everything: who connects, who waits, who fails open, whether a failure
//! evicts, whether a command is replayed. This module only does what the model cannot: it runs
//! the connect (through a [`Connector`]), wakes the callers parked under an attempt when that
//! attempt is reported, and keeps the connection handle of the live generation. It follows the
//! model's "Waking the waiters" recipe and the bounds of
//! [`outagelab_model::reconnect::SharedReconnectSlot::lease`]: a call waits for at most one
//! attempt and makes at most one.
//!
//! Locking: one `std` mutex around the model and the live handle, held only for a model call
//! and a handle clone, never across an `.await`. The connect runs outside it, so callers that
//! find a live connection never wait behind a connect.
//!
//! Waking: a `watch` channel carries the id of the last attempt that ended (ids only grow).
//! A caller told to wait for attempt `N` subscribes while it holds the lock, so the report of
//! `N`, made under the same lock, cannot slip past it; it then waits until the channel reads
//! `N` or more. A connect whose future is dropped (the caller was cancelled) is reported as a
//! failed attempt at the instant it started, as the model's `AttemptInFlight` does, so nobody
//! waits on it forever.

use std::future::Future;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use outagelab_model::reconnect::{
    Acquire, AttemptId, AttemptTicket, Command, ConnectionError, ConnectionId, Failure,
    FailureEffect, Generation, Lease, ReconnectConfig, ReconnectSlot, ReconnectStats,
    should_replay,
};
use outagelab_model::time::{SimDuration, SimTime};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, ErrorKind, FromRedisValue, RedisError, RedisResult};
use tokio::sync::watch;

use crate::clock::{Clock, TokioClock};

/// Opens one connection. The slot calls it from the single caller the model chose.
pub trait Connector: Send + Sync + 'static {
    /// A handle that callers clone and share (a multiplexed connection).
    type Connection: Clone + Send + Sync + 'static;
    type Error: std::fmt::Debug + Send;

    /// One attempt, bounded in time by the connector (a connect timeout): the slot reports it
    /// when it returns, and every caller parked under it waits that long at most.
    fn connect(&self) -> impl Future<Output = Result<Self::Connection, Self::Error>> + Send;
}

/// Connects to one Redis server with the `redis` crate's multiplexed connection on tokio.
///
/// The client's own reconnect logic is not used (no `ConnectionManager`): the slot owns the
/// connection's lifetime, which is what seed 001 is about.
#[derive(Clone)]
pub struct RedisConnector {
    client: Client,
    config: AsyncConnectionConfig,
    connect_timeout: Duration,
}

impl RedisConnector {
    /// To `address` (`host:port`, no scheme), with seed 001's bounds: the connect and every
    /// response time out after the given durations (the redis crate's defaults are 1 s and
    /// 500 ms; they are set explicitly so that a dependency bump cannot change them).
    pub fn new(
        address: &str,
        connect_timeout: Duration,
        response_timeout: Duration,
    ) -> RedisResult<Self> {
        Self::with_response_timeout(address, connect_timeout, Some(response_timeout))
    }

    /// As [`RedisConnector::new`]; `None` waits for every response as long as it takes (a
    /// scenario connection without a `command_timeout`).
    pub fn with_response_timeout(
        address: &str,
        connect_timeout: Duration,
        response_timeout: Option<Duration>,
    ) -> RedisResult<Self> {
        let client = Client::open(format!("redis://{address}/"))?;
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(response_timeout);
        Ok(RedisConnector {
            client,
            config,
            connect_timeout,
        })
    }
}

impl Connector for RedisConnector {
    type Connection = MultiplexedConnection;
    type Error = RedisError;

    async fn connect(&self) -> Result<MultiplexedConnection, RedisError> {
        // The client applies the connect timeout; the outer one bounds the whole handshake
        // too, so a connect can never outlive twice the timeout.
        let bound = self.connect_timeout.saturating_mul(2);
        let connecting = self
            .client
            .get_multiplexed_async_connection_with_config(&self.config);
        match tokio::time::timeout(bound, connecting).await {
            Ok(result) => result,
            Err(_) => Err(RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connect did not finish within twice the connect timeout",
            ))),
        }
    }
}

/// Why a caller got no connection: it fails open at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unavailable {
    /// A backoff window is open ([`Acquire::Unavailable`]).
    BackingOff { retry_in: SimDuration },
    /// This caller made the attempt, and it failed; it opened a window of `backoff`.
    ConnectFailed { backoff: SimDuration },
    /// After waiting for one attempt, another was in progress: the caller does not wait twice.
    StillConnecting,
}

/// A caller's copy of the live connection and the model's lease on it.
#[derive(Clone)]
pub struct LiveLease<Conn> {
    lease: Lease,
    connection: Conn,
}

impl<Conn> LiveLease<Conn> {
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    pub fn generation(&self) -> Generation {
        self.lease.generation()
    }

    /// The connection handle (commands run on it directly bypass the slot's failure reports,
    /// which is what a test that inspects the connection wants).
    pub fn connection(&self) -> &Conn {
        &self.connection
    }
}

/// Counters the live wrapper keeps beside the model's [`ReconnectStats`]: what callers were
/// told, as the simulator's `SlotSummary` counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlotCounters {
    /// Commands the model said to replay after a connection-level failure: each asked the slot
    /// for a fresh connection once more (and ran again if it got one; during an outage the
    /// replay fails open instead).
    pub replays_total: u64,
    /// Commands that failed on a connection-level error and were not replayed (writes).
    pub not_replayed_total: u64,
    /// Callers told to wait for the attempt in progress ([`Acquire::Wait`]).
    pub waited_total: u64,
    /// Callers that found a backoff window open ([`Acquire::Unavailable`]).
    pub unavailable_total: u64,
    /// Connection-level failures reported through a lease whose connection was no longer the
    /// live one ([`FailureEffect::NotCurrent`]).
    pub stale_failures_total: u64,
}

/// Why [`LiveSlot::run`] has no answer.
#[derive(Debug)]
pub enum QueryError {
    /// No connection to run it on: fail open.
    Unavailable(Unavailable),
    /// It ran and failed. `failure` is how the slot classified the error; `replayed` says
    /// whether it was run a second time (`error` is then the second run's error).
    Failed {
        error: RedisError,
        failure: Failure,
        replayed: bool,
    },
}

impl QueryError {
    /// Whether Redis could not be reached (as opposed to rejecting this one command): the
    /// case in which a consumer fails open and calls [`LiveSlot::record_fail_open`].
    pub fn is_unreachable(&self) -> bool {
        match self {
            QueryError::Unavailable(_) => true,
            QueryError::Failed { failure, .. } => matches!(failure, Failure::Connection(_)),
        }
    }
}

/// How a `redis` error counts for the slot: connection-level errors (I/O, a reset, a response
/// timeout, an error the client marks unrecoverable, READONLY) evict; a server's rejection of
/// one command (WRONGTYPE, a script error) does not.
pub fn classify(error: &RedisError) -> Failure {
    if error.is_timeout() {
        Failure::Connection(ConnectionError::ResponseTimeout)
    } else if error.is_io_error() || error.is_connection_dropped() {
        Failure::Connection(ConnectionError::Io)
    } else if error.kind() == ErrorKind::Server(redis::ServerErrorKind::ReadOnly) {
        Failure::Connection(ConnectionError::ReadOnly)
    } else if error.is_unrecoverable_error() {
        Failure::Connection(ConnectionError::Unrecoverable)
    } else {
        Failure::Server
    }
}

/// What a turn of [`LiveSlot::lease`] does once the lock is released.
enum Next<Conn> {
    Done(Result<LiveLease<Conn>, Unavailable>),
    Connect(AttemptTicket),
    Wait(watch::Receiver<u64>, AttemptId),
}

struct State<Conn> {
    slot: ReconnectSlot,
    /// The handle of the live generation: `Some` exactly when the model holds a live
    /// connection, with the id the model knows it by.
    live: Option<(ConnectionId, Conn)>,
    /// Ids handed to the model for connections made; the first is 1.
    connections_made: u64,
    counters: SlotCounters,
}

/// One consumer's reconnect slot (seed 001's `ReconnectingRedis`). See the module documentation.
pub struct LiveSlot<K: Connector, C: Clock = TokioClock> {
    state: Mutex<State<K::Connection>>,
    /// The id of the last attempt that ended (0: none yet).
    attempt_ended: watch::Sender<u64>,
    connector: K,
    clock: C,
}

impl<K: Connector> LiveSlot<K, TokioClock> {
    /// A slot on the wall clock, starting now.
    pub fn new(config: ReconnectConfig, connector: K) -> Self {
        Self::with_clock(config, connector, TokioClock::start_now())
    }
}

impl<K: Connector, C: Clock> LiveSlot<K, C> {
    pub fn with_clock(config: ReconnectConfig, connector: K, clock: C) -> Self {
        LiveSlot {
            state: Mutex::new(State {
                slot: ReconnectSlot::new(config),
                live: None,
                connections_made: 0,
                counters: SlotCounters::default(),
            }),
            attempt_ended: watch::Sender::new(0),
            connector,
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<K::Connection>> {
        // The model keeps its invariants between calls, so a panic elsewhere cannot leave it
        // half-updated (as in model/src/sync.rs).
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The model's counters (seed 001's metrics): connected, attempts, reconnects, connect
    /// failures, evictions, fail-open.
    pub fn stats(&self) -> ReconnectStats {
        self.lock().slot.stats()
    }

    pub fn counters(&self) -> SlotCounters {
        self.lock().counters
    }

    /// Counts one request let through because Redis could not be reached.
    pub fn record_fail_open(&self) {
        self.lock().slot.record_fail_open();
    }

    /// A lease on the live connection, connecting first if the model says this caller is the
    /// single flight, or waiting for the attempt in progress; `Err` means fail open now.
    pub async fn lease(&self) -> Result<LiveLease<K::Connection>, Unavailable> {
        let mut waited = false;
        // Bounded: at most two turns, the second only after waiting for one attempt.
        loop {
            let now = self.clock.now();
            let next = {
                let mut state = self.lock();
                match state.slot.acquire(now) {
                    Acquire::Lease(lease) => {
                        let (id, connection) = state
                            .live
                            .as_ref()
                            .expect("the model leased a connection, so one is live");
                        assert_eq!(*id, lease.connection(), "the handle is the leased one");
                        Next::Done(Ok(LiveLease {
                            lease,
                            connection: connection.clone(),
                        }))
                    }
                    Acquire::Unavailable { retry_in } => {
                        state.counters.unavailable_total += 1;
                        Next::Done(Err(Unavailable::BackingOff { retry_in }))
                    }
                    Acquire::Connect(ticket) => Next::Connect(ticket),
                    Acquire::Wait(_) if waited => Next::Done(Err(Unavailable::StillConnecting)),
                    // Subscribed under the lock: the report of `attempt` comes after.
                    Acquire::Wait(attempt) => {
                        state.counters.waited_total += 1;
                        Next::Wait(self.attempt_ended.subscribe(), attempt)
                    }
                }
            };
            match next {
                Next::Done(result) => return result,
                Next::Connect(ticket) => return self.connect(now, ticket).await,
                Next::Wait(mut ended, attempt) => {
                    waited = true;
                    // The sender lives as long as `self`, so this returns once the attempt
                    // ended (the connector bounds how long that takes).
                    let _ = ended.wait_for(|last| *last >= attempt.get()).await;
                }
            }
        }
    }

    async fn connect(
        &self,
        started_at: SimTime,
        ticket: AttemptTicket,
    ) -> Result<LiveLease<K::Connection>, Unavailable> {
        let mut in_flight = AttemptInFlight {
            slot: self,
            started_at,
            ticket: Some(ticket),
        };
        let result = self.connector.connect().await;
        let ended_at = self.clock.now();
        let ticket = in_flight.ticket.take().expect("reported once");
        let attempt = ticket.attempt();
        let outcome = {
            let mut state = self.lock();
            match result {
                Ok(connection) => {
                    state.connections_made += 1;
                    let id = state.connections_made;
                    let connected = state.slot.on_connected(ended_at, ticket, id);
                    state.live = Some((id, connection.clone()));
                    Ok(LiveLease {
                        lease: connected.lease,
                        connection,
                    })
                }
                Err(_) => {
                    let failed = state.slot.on_connect_failed(ended_at, ticket);
                    Err(Unavailable::ConnectFailed {
                        backoff: failed.backoff,
                    })
                }
            }
        };
        self.report_attempt_ended(attempt);
        outcome
    }

    fn report_attempt_ended(&self, attempt: AttemptId) {
        self.attempt_ended.send_replace(attempt.get());
    }

    /// Reports that a command on `lease` failed with `failure` (see [`classify`]); a
    /// connection-level failure of the live generation evicts it and drops its handle.
    pub fn on_failure(&self, lease: &LiveLease<K::Connection>, failure: Failure) -> FailureEffect {
        let now = self.clock.now();
        let mut state = self.lock();
        let effect = state.slot.on_failure(now, &lease.lease, failure);
        match effect {
            FailureEffect::Evicted => state.live = None,
            FailureEffect::NotCurrent => state.counters.stale_failures_total += 1,
            FailureEffect::ConnectionKept => {}
        }
        effect
    }

    /// Runs `operation` on a leased connection: the slot's whole contract for one command (or
    /// pipeline) whose kinds are `commands`. A failure is classified and reported (a
    /// connection-level one of the live generation evicts it), and the operation runs once more
    /// on a fresh connection if the model's [`should_replay`] says so (read-only, or
    /// `replay_writes`). At most one replay: if it fails too, the caller gives up.
    pub async fn run<T, F, Fut>(
        &self,
        commands: &[Command],
        replay_writes: bool,
        operation: F,
    ) -> Result<T, QueryError>
    where
        F: Fn(K::Connection) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let leased = self.lease().await.map_err(QueryError::Unavailable)?;
        let error = match operation(leased.connection.clone()).await {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let failure = classify(&error);
        self.on_failure(&leased, failure);
        let lease = if replay_writes {
            leased.lease.with_replay_writes()
        } else {
            leased.lease
        };
        if !should_replay(commands, failure, &lease) {
            if matches!(failure, Failure::Connection(_)) {
                self.lock().counters.not_replayed_total += 1;
            }
            return Err(QueryError::Failed {
                error,
                failure,
                replayed: false,
            });
        }
        self.lock().counters.replays_total += 1;
        let fresh = match self.lease().await {
            Ok(fresh) => fresh,
            Err(unavailable) => return Err(QueryError::Unavailable(unavailable)),
        };
        match operation(fresh.connection.clone()).await {
            Ok(value) => Ok(value),
            Err(error) => {
                let failure = classify(&error);
                self.on_failure(&fresh, failure);
                Err(QueryError::Failed {
                    error,
                    failure,
                    replayed: true,
                })
            }
        }
    }
}

impl<K, C> LiveSlot<K, C>
where
    K: Connector<Connection = MultiplexedConnection>,
    C: Clock,
{
    /// One command of kind `command` (the kind decides replay), as [`LiveSlot::run`].
    pub async fn query<T: FromRedisValue>(
        &self,
        command: Command,
        cmd: &redis::Cmd,
        replay_writes: bool,
    ) -> Result<T, QueryError> {
        self.run(&[command], replay_writes, |mut connection| async move {
            cmd.query_async(&mut connection).await
        })
        .await
    }

    /// A pipeline whose commands are of the kinds `commands`, in order: replayed only if all
    /// are read-only (or `replay_writes`).
    pub async fn query_pipeline<T: FromRedisValue>(
        &self,
        commands: &[Command],
        pipeline: &redis::Pipeline,
        replay_writes: bool,
    ) -> Result<T, QueryError> {
        self.run(commands, replay_writes, |mut connection| async move {
            pipeline.query_async(&mut connection).await
        })
        .await
    }
}

/// A connect in progress; dropped unfinished (the caller was cancelled), it reports a failed
/// attempt at the instant it started and wakes the callers parked under it.
struct AttemptInFlight<'a, K: Connector, C: Clock> {
    slot: &'a LiveSlot<K, C>,
    started_at: SimTime,
    ticket: Option<AttemptTicket>,
}

impl<K: Connector, C: Clock> Drop for AttemptInFlight<'_, K, C> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            let attempt = ticket.attempt();
            self.slot
                .lock()
                .slot
                .on_connect_failed(self.started_at, ticket);
            self.slot.report_attempt_ended(attempt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::ServerErrorKind;

    fn check(error: RedisError, expected: Failure) {
        assert_eq!(classify(&error), expected, "{error:?}");
    }

    #[test]
    fn connection_level_errors_evict_and_a_rejected_command_does_not() {
        use std::io::{Error, ErrorKind as Io};
        let connection = |error| Failure::Connection(error);
        check(
            Error::new(Io::BrokenPipe, "pipe").into(),
            connection(ConnectionError::Io),
        );
        check(
            Error::new(Io::ConnectionReset, "reset").into(),
            connection(ConnectionError::Io),
        );
        check(
            Error::new(Io::UnexpectedEof, "closed").into(),
            connection(ConnectionError::Io),
        );
        check(
            Error::new(Io::TimedOut, "no reply").into(),
            connection(ConnectionError::ResponseTimeout),
        );
        check(
            (ErrorKind::Server(ServerErrorKind::ReadOnly), "READONLY").into(),
            connection(ConnectionError::ReadOnly),
        );
        check(
            (
                ErrorKind::Server(ServerErrorKind::ResponseError),
                "WRONGTYPE",
            )
                .into(),
            Failure::Server,
        );
        check(
            (ErrorKind::Server(ServerErrorKind::NoScript), "NOSCRIPT").into(),
            Failure::Server,
        );
    }
}

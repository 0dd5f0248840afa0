//! Reconnect slot: one replaceable connection to Redis, shared by every caller of one consumer
//! (seed 001: the budget enforcer, the rate limiter and the response cache each own one).
//!
//! ```text
//!                 acquire: slot empty, or backoff window over
//!   Empty ─────────────────────────────────────────────────────▶ Connecting(attempt N)
//!     ▲                                                             │        │
//!     │ connection-level failure                       on_connected│        │on_connect_failed
//!     │ reported through a lease of the live generation             ▼        ▼
//!     └──────────────────────────────────────────────────── Live(generation G)   BackingOff(until)
//!                                                                                    │
//!                              acquire at or after `until` starts attempt N+1 ◀──────┘
//! ```
//!
//! Call order:
//! - [`ReconnectSlot::acquire`] before each command (or pipeline). It answers with
//!   - [`Acquire::Lease`]: run the command on the leased connection;
//!   - [`Acquire::Connect`]: this caller is the single flight; it connects, then reports exactly
//!     once, with [`ReconnectSlot::on_connected`] or [`ReconnectSlot::on_connect_failed`];
//!   - [`Acquire::Wait`]`(N)`: attempt `N` is in progress; park the caller under `N` and
//!     call `acquire` once more when attempt `N` ends (see "Waking the waiters" below);
//!   - [`Acquire::Unavailable`]: a backoff window is open; fail open at once, without waiting.
//! - When a command fails, [`ReconnectSlot::on_failure`] with the lease it ran on, then
//!   [`should_replay`] to decide whether to run it once more on a fresh connection.
//! - A consumer that lets a request through because Redis could not be reached calls
//!   [`ReconnectSlot::record_fail_open`] (the response cache backs no control and does not).
//!
//! # Waking the waiters
//!
//! The slot never wakes anyone: it is sans-IO. The callers told to [`Acquire::Wait`]`(N)` are
//! released when attempt `N` ends, and only then; an attempt ends exactly when its ticket is
//! reported, and both reports say which attempt ended ([`Connected::attempt`],
//! [`ConnectFailed::attempt`]). So the driver:
//! 1. on [`Acquire::Wait`]`(N)`, parks the caller under `N` (the simulator: in a list per
//!    attempt, in arrival order, so that the wake-up order is deterministic);
//! 2. reports the attempt's end with [`ReconnectSlot::on_connected`] or
//!    [`ReconnectSlot::on_connect_failed`], at the instant the connect ended;
//! 3. then wakes every caller parked under the attempt the report names, in the order they
//!    parked, each calling `acquire` once more at its wake-up time. They find the new
//!    connection (a lease), or the backoff window that the failure opened (unavailable).
//!
//! No other event ends an attempt, so nothing else needs to wake a parked caller, and at most
//! one attempt is in progress at a time, so the callers parked under `N` are all the callers
//! parked. [`SharedReconnectSlot`] does the same with a condition variable.
//!
//! Invariants:
//! - at most one connection attempt is in progress at any moment (single flight);
//! - a failure evicts the live connection only if it was reported through a lease of that very
//!   generation: a late failure against an old connection never evicts its replacement;
//! - losing a connection that worked is not a failed attempt: the next caller connects at once;
//! - after `n` consecutive failed attempts no attempt starts for
//!   `min(backoff_initial * 2^(n-1), backoff_max)`, measured from the failure (the `now` of
//!   [`ReconnectSlot::on_connect_failed`], the instant the connect ended, not the instant it
//!   started); so at most one attempt per backoff window, however many callers arrive;
//! - generations and attempt ids only grow, and `now` is treated as never going backwards: a
//!   `now` earlier than one already seen (threads that read the clock, then raced for the lock)
//!   counts as the latest one seen ([`LatestTime`]);
//! - leases and attempt tickets belong to the slot that issued them: handing one to another
//!   slot panics (a real `assert!`) instead of evicting that slot's connection or ending its
//!   attempt.
//!
//! The driver bounds each connect with its own connect timeout and then reports
//! `on_connect_failed`, as the redis client's connection timeout does; a ticket that never
//! reports keeps every later caller waiting, which is what a hung connect without a timeout does.
//!
//! The backoff windows (100 ms doubling to 5 s in seed 001) are [`crate::backoff`]'s unjittered
//! delays.

use std::fmt;

use crate::backoff::{BackoffConfig, Jitter};
use crate::config::ConfigError;
use crate::instance::InstanceId;
use crate::sync::{Condvar, Mutex, lock};
use crate::time::{LatestTime, SimDuration, SimTime};

/// A validated reconnect configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReconnectConfig {
    /// Doubling from `backoff_initial` to `backoff_max`, without jitter.
    backoff: BackoffConfig,
}

/// Doubling, in the backoff's fixed-point factor.
const DOUBLING_PERMILLE: u32 = 2000;

impl ReconnectConfig {
    /// After the first failed attempt no attempt is made for `backoff_initial`; each further
    /// consecutive failure doubles the window, up to `backoff_max`.
    pub fn new(
        backoff_initial: SimDuration,
        backoff_max: SimDuration,
    ) -> Result<Self, ConfigError> {
        if backoff_initial.is_zero() {
            return Err(ConfigError::new(
                "backoff_initial",
                "must be longer than zero (a zero backoff retries a dead server in a tight loop \
                 and never fails open)",
            ));
        }
        if backoff_max < backoff_initial {
            return Err(ConfigError::new(
                "backoff_max",
                format!(
                    "must be at least backoff_initial ({backoff_initial}), since the ceiling caps \
                     windows that start at backoff_initial; it is {backoff_max}"
                ),
            ));
        }
        let backoff = BackoffConfig::new(
            backoff_initial,
            DOUBLING_PERMILLE,
            backoff_max,
            Jitter::None,
        )?;
        Ok(ReconnectConfig { backoff })
    }

    /// Seed 001's values: 100 ms after the first failure, doubling, capped at 5 s.
    pub fn seed_001() -> Self {
        Self::new(SimDuration::from_millis(100), SimDuration::from_secs(5))
            .expect("seed 001's backoff is valid")
    }

    pub fn backoff_initial(&self) -> SimDuration {
        self.backoff.base()
    }

    pub fn backoff_max(&self) -> SimDuration {
        self.backoff.ceiling()
    }

    /// The backoff window after `failures_consecutive` (at least 1) failed attempts in a row:
    /// `min(backoff_initial * 2^(failures_consecutive - 1), backoff_max)`, without overflow.
    pub fn backoff_after(&self, failures_consecutive: u32) -> SimDuration {
        debug_assert!(failures_consecutive >= 1, "no backoff before a failure");
        self.backoff.delay_unjittered(failures_consecutive)
    }
}

/// The driver's name for one open connection (the simulator's connection handle).
pub type ConnectionId = u64;

/// The number of a connection held by the slot: the first connection is generation 1, each
/// replacement one more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Generation(u64);

impl Generation {
    pub fn get(self) -> u64 {
        self.0
    }
}

/// The number of a connection attempt: the first is attempt 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId(u64);

impl AttemptId {
    pub fn get(self) -> u64 {
        self.0
    }
}

/// A copy of the slot's connection, as a caller took it: the connection and its generation.
///
/// Taking a lease changes nothing in the slot, and a lease needs no returning: it is the clone
/// of a multiplexed connection handle. Its generation is what lets a late failure be told apart
/// from a failure of the live connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The slot that issued it.
    slot: InstanceId,
    connection: ConnectionId,
    generation: Generation,
    replay_writes: bool,
}

impl Lease {
    pub fn connection(&self) -> ConnectionId {
        self.connection
    }

    pub fn generation(&self) -> Generation {
        self.generation
    }

    /// Opts this lease into replaying writes after a connection-level failure. Only for a
    /// caller that has worked out what a double application costs: seed 001's rate-limit
    /// admission script, for which a replay can over-count one request but never under-count.
    pub fn with_replay_writes(self) -> Lease {
        Lease {
            replay_writes: true,
            ..self
        }
    }

    pub fn replays_writes(&self) -> bool {
        self.replay_writes
    }
}

/// The right and the duty to make connection attempt [`AttemptTicket::attempt`]. Hand it back
/// exactly once, to [`ReconnectSlot::on_connected`] or [`ReconnectSlot::on_connect_failed`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "every attempt must be reported, or every later caller waits on it forever"]
pub struct AttemptTicket {
    /// The slot that issued it.
    slot: InstanceId,
    attempt: AttemptId,
}

impl AttemptTicket {
    pub fn attempt(&self) -> AttemptId {
        self.attempt
    }
}

/// What a caller of [`ReconnectSlot::acquire`] does next.
#[derive(Debug, PartialEq, Eq)]
pub enum Acquire {
    /// A live connection: run the command on it.
    Lease(Lease),
    /// The slot is empty and nobody is connecting: this caller connects, now.
    Connect(AttemptTicket),
    /// Another caller is connecting: wait for that attempt to end (the report that names it,
    /// see the module documentation), then acquire once more.
    Wait(AttemptId),
    /// The last attempt failed and its backoff window is still open: fail open at once.
    Unavailable { retry_in: SimDuration },
}

/// The report of an attempt that connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Connected {
    /// The attempt that ended: wake every caller told to [`Acquire::Wait`] for it.
    pub attempt: AttemptId,
    /// The new live connection, for the caller that connected.
    pub lease: Lease,
}

/// The report of an attempt that failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectFailed {
    /// The attempt that ended: wake every caller told to [`Acquire::Wait`] for it (they will
    /// find the backoff window open and fail open).
    pub attempt: AttemptId,
    /// The backoff window the failure opened.
    pub backoff: SimDuration,
    /// When it closes: from then on the next caller connects.
    pub retry_at: SimTime,
}

/// A connection-level error: the connection cannot be trusted with another command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionError {
    /// An I/O error, a broken pipe or a reset.
    Io,
    /// No reply within the response timeout.
    ResponseTimeout,
    /// An error the client marks unrecoverable.
    Unrecoverable,
    /// READONLY: the primary this connection reached was demoted by a failover.
    ReadOnly,
}

/// Why a command failed, as the caller's error classifier decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The connection died or was demoted; it must be replaced.
    Connection(ConnectionError),
    /// The server rejected this one command (WRONGTYPE, a script error); the connection is fine.
    Server,
}

/// What [`ReconnectSlot::on_failure`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureEffect {
    /// The lease's connection was the live one; the slot is now empty.
    Evicted,
    /// The lease's connection was already evicted or replaced; the slot is unchanged.
    NotCurrent,
    /// A server error for one command; the connection stays.
    ConnectionKept,
}

/// A Redis command, as far as replaying it is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    Get,
    MGet,
    LRange,
    Exists,
    Ttl,
    PTtl,
    Ping,
    Set,
    IncrBy,
    IncrByFloat,
    Expire,
    Del,
    /// A Lua script (the rate-limit admission script checks and charges in one call).
    EvalSha,
    /// A message to a channel's subscribers: not on the allowlist, since a replay sends it
    /// twice.
    Publish,
}

impl Command {
    /// The replay allowlist of seed 001. Anything else, scripts included, counts as a write.
    pub const READ_ONLY: [Command; 7] = [
        Command::Get,
        Command::MGet,
        Command::LRange,
        Command::Exists,
        Command::Ttl,
        Command::PTtl,
        Command::Ping,
    ];

    pub fn is_read_only(self) -> bool {
        Command::READ_ONLY.contains(&self)
    }

    /// The name Redis knows the command by.
    pub fn name(self) -> &'static str {
        match self {
            Command::Get => "GET",
            Command::MGet => "MGET",
            Command::LRange => "LRANGE",
            Command::Exists => "EXISTS",
            Command::Ttl => "TTL",
            Command::PTtl => "PTTL",
            Command::Ping => "PING",
            Command::Set => "SET",
            Command::IncrBy => "INCRBY",
            Command::IncrByFloat => "INCRBYFLOAT",
            Command::Expire => "EXPIRE",
            Command::Del => "DEL",
            Command::EvalSha => "EVALSHA",
            Command::Publish => "PUBLISH",
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether `commands` (one command, or a pipeline in order), which failed with `failure` on the
/// connection of `lease`, is run once more on a fresh connection.
///
/// Only a connection-level failure is replayed: a server error is an answer. A replay happens
/// if every command is read-only, or if the lease opted into replaying writes. Writes are not
/// replayed by default because "never sent" and "sent, reply lost" look the same: replaying an
/// INCRBYFLOAT after a lost reply charges twice. An empty pipeline sent nothing, so there is
/// nothing to replay. A replay is made at most once: if it fails too, the caller gives up.
pub fn should_replay(commands: &[Command], failure: Failure, lease: &Lease) -> bool {
    match failure {
        Failure::Server => false,
        Failure::Connection(_) => {
            !commands.is_empty()
                && (lease.replay_writes || commands.iter().all(|command| command.is_read_only()))
        }
    }
}

/// Counters in the shape of seed 001's metrics, for one consumer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconnectStats {
    /// The `connected` gauge: true (1) while the slot holds a live connection; false (0) before
    /// the first connection, once the connection was evicted, and once an attempt failed.
    pub connected: bool,
    /// Connection attempts started.
    pub attempts_total: u64,
    /// Attempts that connected.
    pub connects_total: u64,
    /// Connections made after the first one, each replacing a lost connection.
    pub reconnects_total: u64,
    /// Attempts that failed.
    pub connect_failures_total: u64,
    /// Live connections evicted by a connection-level failure.
    pub evictions_total: u64,
    /// Requests let through because Redis could not be reached, as the consumer reported them.
    pub fail_open_total: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    /// No connection, and nothing stops the next caller from connecting.
    Empty,
    Live {
        connection: ConnectionId,
        generation: Generation,
    },
    Connecting {
        attempt: AttemptId,
    },
    /// The last attempt failed; none starts before `until`.
    BackingOff {
        until: SimTime,
    },
}

/// The reconnect slot of one consumer. See the module documentation for the call order.
#[derive(Clone, Debug)]
pub struct ReconnectSlot {
    /// Stamped into every lease and ticket, checked when one comes back.
    id: InstanceId,
    config: ReconnectConfig,
    state: SlotState,
    /// Failed attempts since the last successful one; sets the next backoff window.
    failures_consecutive: u32,
    /// The generation of the latest connection made; 0 before the first.
    generation_last: u64,
    /// The latest `now` seen; earlier ones are read as this one.
    latest: LatestTime,
    stats: ReconnectStats,
}

impl ReconnectSlot {
    pub fn new(config: ReconnectConfig) -> Self {
        ReconnectSlot {
            id: InstanceId::fresh(),
            config,
            state: SlotState::Empty,
            failures_consecutive: 0,
            generation_last: 0,
            latest: LatestTime::new(),
            stats: ReconnectStats::default(),
        }
    }

    pub fn config(&self) -> &ReconnectConfig {
        &self.config
    }

    pub fn stats(&self) -> ReconnectStats {
        ReconnectStats {
            connected: matches!(self.state, SlotState::Live { .. }),
            ..self.stats
        }
    }

    /// The connection the slot holds now, if any (what the next lease will name).
    pub fn live_connection(&self) -> Option<ConnectionId> {
        match self.state {
            SlotState::Live { connection, .. } => Some(connection),
            _ => None,
        }
    }

    /// The attempt in progress, if any. A caller told to [`Acquire::Wait`] for attempt `N` may
    /// go on once this is no longer `Some(N)` (which is when the report of attempt `N`
    /// returns).
    pub fn attempt_in_progress(&self) -> Option<AttemptId> {
        match self.state {
            SlotState::Connecting { attempt } => Some(attempt),
            _ => None,
        }
    }

    /// Failed attempts since the last successful one.
    pub fn failures_consecutive(&self) -> u32 {
        self.failures_consecutive
    }

    /// When the open backoff window closes, if one is open: from then on the next caller
    /// connects. Nothing else in the slot changes with time alone.
    pub fn next_deadline(&self) -> Option<SimTime> {
        match self.state {
            SlotState::BackingOff { until } if until > self.latest.get() => Some(until),
            _ => None,
        }
    }

    /// Asks for the connection, before a command. See [`Acquire`] for what to do with the answer.
    pub fn acquire(&mut self, now: SimTime) -> Acquire {
        let now = self.advance_to(now);
        match self.state {
            SlotState::Live {
                connection,
                generation,
            } => Acquire::Lease(Lease {
                slot: self.id,
                connection,
                generation,
                replay_writes: false,
            }),
            SlotState::Connecting { attempt } => Acquire::Wait(attempt),
            SlotState::BackingOff { until } if now < until => Acquire::Unavailable {
                retry_in: until.saturating_since(now),
            },
            SlotState::Empty | SlotState::BackingOff { .. } => {
                self.stats.attempts_total += 1;
                let attempt = AttemptId(self.stats.attempts_total);
                self.state = SlotState::Connecting { attempt };
                Acquire::Connect(AttemptTicket {
                    slot: self.id,
                    attempt,
                })
            }
        }
    }

    /// Reports that the attempt of `ticket` opened `connection` at `now`; it becomes the live
    /// connection, one generation newer than the last, and the backoff resets. The callers
    /// waiting on [`Connected::attempt`] may acquire again: they will lease it.
    ///
    /// Panics if `ticket` is not the attempt in progress of this slot.
    pub fn on_connected(
        &mut self,
        now: SimTime,
        ticket: AttemptTicket,
        connection: ConnectionId,
    ) -> Connected {
        self.advance_to(now);
        self.finish_attempt(&ticket);
        self.generation_last += 1;
        let generation = Generation(self.generation_last);
        self.stats.connects_total += 1;
        if self.stats.connects_total > 1 {
            self.stats.reconnects_total += 1;
        }
        self.failures_consecutive = 0;
        self.state = SlotState::Live {
            connection,
            generation,
        };
        Connected {
            attempt: ticket.attempt,
            lease: Lease {
                slot: self.id,
                connection,
                generation,
                replay_writes: false,
            },
        }
    }

    /// Reports that the attempt of `ticket` failed (refused, unreachable, or past the driver's
    /// connect timeout) at `now`, the instant the connect ended. Opens a backoff window from
    /// `now`. The callers waiting on [`ConnectFailed::attempt`] may acquire again: they will
    /// find the window open.
    ///
    /// Panics if `ticket` is not the attempt in progress of this slot.
    pub fn on_connect_failed(&mut self, now: SimTime, ticket: AttemptTicket) -> ConnectFailed {
        let now = self.advance_to(now);
        self.finish_attempt(&ticket);
        self.failures_consecutive = self.failures_consecutive.saturating_add(1);
        self.stats.connect_failures_total += 1;
        let backoff = self.config.backoff_after(self.failures_consecutive);
        let retry_at = now.saturating_add(backoff);
        self.state = SlotState::BackingOff { until: retry_at };
        ConnectFailed {
            attempt: ticket.attempt,
            backoff,
            retry_at,
        }
    }

    /// Reports that a command run on `lease` failed. A connection-level failure evicts the live
    /// connection only if `lease` is of its generation; the next caller then connects at once.
    ///
    /// Panics if another slot issued `lease` (checked before anything changes).
    pub fn on_failure(&mut self, now: SimTime, lease: &Lease, failure: Failure) -> FailureEffect {
        self.id
            .assert_issued(lease.slot, "a lease", "reconnect slot");
        debug_assert!(
            lease.generation.0 <= self.generation_last,
            "a lease from the future"
        );
        self.advance_to(now);
        if failure == Failure::Server {
            return FailureEffect::ConnectionKept;
        }
        match self.state {
            SlotState::Live {
                connection,
                generation,
            } if generation == lease.generation => {
                debug_assert_eq!(
                    connection, lease.connection,
                    "one generation, two connections"
                );
                self.stats.evictions_total += 1;
                self.state = SlotState::Empty;
                FailureEffect::Evicted
            }
            _ => FailureEffect::NotCurrent,
        }
    }

    /// Counts one request that a consumer let through because Redis could not be reached (no
    /// connection, or the admission command failed).
    pub fn record_fail_open(&mut self) {
        self.stats.fail_open_total += 1;
    }

    fn advance_to(&mut self, now: SimTime) -> SimTime {
        self.latest.observe(now)
    }

    fn finish_attempt(&self, ticket: &AttemptTicket) {
        self.id
            .assert_issued(ticket.slot, "an attempt ticket", "reconnect slot");
        assert_eq!(
            self.state,
            SlotState::Connecting {
                attempt: ticket.attempt
            },
            "attempt {} reported, but it is not the attempt in progress",
            ticket.attempt.0
        );
    }
}

/// A reconnect slot shared by threads: the same state machine behind a mutex, with a condition
/// variable on which callers wait for the attempt in progress.
///
/// The connect itself runs outside the lock, so callers that find a live connection never wait
/// behind a connect. Invariants (checked by loom): at most one `connect` runs at any moment;
/// a late failure never evicts the replacement.
pub struct SharedReconnectSlot {
    slot: Mutex<ReconnectSlot>,
    attempt_finished: Condvar,
}

impl SharedReconnectSlot {
    pub fn new(config: ReconnectConfig) -> Self {
        SharedReconnectSlot {
            slot: Mutex::new(ReconnectSlot::new(config)),
            attempt_finished: Condvar::new(),
        }
    }

    /// A lease on the live connection, or `None` when Redis cannot be reached and the caller
    /// should fail open.
    ///
    /// If the slot is empty and no attempt is in progress, this caller runs `connect` (without
    /// holding the lock). `connect` returns the connection (`None`: the attempt failed) and
    /// the instant the attempt ended, read from the caller's clock after it returned; the
    /// attempt is reported at that instant, so a failure's backoff window is measured from the
    /// failure, not from `now`. If an attempt is in progress, this caller waits for it, then
    /// asks once more. Bound: a call waits for at most one attempt and makes at most one; if it
    /// finds a second attempt in progress after waiting for the first, it fails open rather
    /// than wait again. A `connect` that panics counts as a failed attempt, reported at `now`
    /// (its end was never read), so the callers waiting on it are released.
    pub fn lease(
        &self,
        now: SimTime,
        connect: impl FnOnce() -> (Option<ConnectionId>, SimTime),
    ) -> Option<Lease> {
        let mut slot = lock(&self.slot);
        let mut waited = false;
        // Bounded: at most two turns, the second only after waiting.
        loop {
            match slot.acquire(now) {
                Acquire::Lease(lease) => return Some(lease),
                Acquire::Unavailable { .. } => return None,
                Acquire::Connect(ticket) => {
                    drop(slot);
                    let attempt = AttemptInFlight {
                        shared: self,
                        started_at: now,
                        ticket: Some(ticket),
                    };
                    let (connection, ended_at) = connect();
                    return attempt.finish(connection, ended_at);
                }
                Acquire::Wait(_) if waited => return None,
                Acquire::Wait(attempt) => {
                    waited = true;
                    while slot.attempt_in_progress() == Some(attempt) {
                        slot = self
                            .attempt_finished
                            .wait(slot)
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                    }
                }
            }
        }
    }

    pub fn on_failure(&self, now: SimTime, lease: &Lease, failure: Failure) -> FailureEffect {
        lock(&self.slot).on_failure(now, lease, failure)
    }

    pub fn record_fail_open(&self) {
        lock(&self.slot).record_fail_open()
    }

    pub fn stats(&self) -> ReconnectStats {
        lock(&self.slot).stats()
    }
}

/// An attempt whose connect is running. Finishing it reports the outcome at the instant the
/// connect ended and wakes the waiters; dropping it unfinished (the connect panicked) reports a
/// failed attempt at the instant it started.
struct AttemptInFlight<'a> {
    shared: &'a SharedReconnectSlot,
    started_at: SimTime,
    ticket: Option<AttemptTicket>,
}

impl AttemptInFlight<'_> {
    fn finish(mut self, connection: Option<ConnectionId>, ended_at: SimTime) -> Option<Lease> {
        let ticket = self.ticket.take().expect("an attempt finishes once");
        let lease = {
            let mut slot = lock(&self.shared.slot);
            match connection {
                Some(connection) => Some(slot.on_connected(ended_at, ticket, connection).lease),
                None => {
                    slot.on_connect_failed(ended_at, ticket);
                    None
                }
            }
        };
        self.shared.attempt_finished.notify_all();
        lease
    }
}

impl Drop for AttemptInFlight<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            lock(&self.shared.slot).on_connect_failed(self.started_at, ticket);
            self.shared.attempt_finished.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    fn slot() -> ReconnectSlot {
        ReconnectSlot::new(ReconnectConfig::seed_001())
    }

    fn connect_ticket(slot: &mut ReconnectSlot, now: SimTime) -> AttemptTicket {
        match slot.acquire(now) {
            Acquire::Connect(ticket) => ticket,
            other => panic!("expected to connect at {now}, got {other:?}"),
        }
    }

    fn lease(slot: &mut ReconnectSlot, now: SimTime) -> Lease {
        match slot.acquire(now) {
            Acquire::Lease(lease) => lease,
            other => panic!("expected a lease at {now}, got {other:?}"),
        }
    }

    /// Connects at `now` with `connection` and returns the new lease.
    fn connect(slot: &mut ReconnectSlot, now: SimTime, connection: ConnectionId) -> Lease {
        let ticket = connect_ticket(slot, now);
        slot.on_connected(now, ticket, connection).lease
    }

    /// Makes one attempt at `now` that fails at once; returns the backoff window it opened.
    fn fail_attempt(slot: &mut ReconnectSlot, now: SimTime) -> SimDuration {
        let ticket = connect_ticket(slot, now);
        slot.on_connect_failed(now, ticket).backoff
    }

    fn unavailable(slot: &mut ReconnectSlot, now: SimTime) -> SimDuration {
        match slot.acquire(now) {
            Acquire::Unavailable { retry_in } => retry_in,
            other => panic!("expected unavailable at {now}, got {other:?}"),
        }
    }

    const IO: Failure = Failure::Connection(ConnectionError::Io);

    #[test]
    fn rejected_configs_say_which_field_and_why() {
        let cases = [
            (0, 5000, "backoff_initial: must be longer than zero"),
            (
                100,
                99,
                "backoff_max: must be at least backoff_initial (100ms)",
            ),
            (
                100,
                0,
                "backoff_max: must be at least backoff_initial (100ms)",
            ),
        ];
        for (initial_ms, max_ms, expected) in cases {
            let error = ReconnectConfig::new(
                SimDuration::from_millis(initial_ms),
                SimDuration::from_millis(max_ms),
            )
            .unwrap_err();
            assert!(error.to_string().starts_with(expected), "{error}");
        }
    }

    #[test]
    fn accepted_configs_include_a_fixed_window() {
        for (initial_ms, max_ms) in [(100, 5000), (100, 100), (1, 1)] {
            let config = ReconnectConfig::new(
                SimDuration::from_millis(initial_ms),
                SimDuration::from_millis(max_ms),
            )
            .unwrap();
            assert_eq!(
                config.backoff_after(1),
                SimDuration::from_millis(initial_ms)
            );
            assert_eq!(config.backoff_after(30), SimDuration::from_millis(max_ms));
        }
        assert_eq!(
            ReconnectConfig::new(SimDuration::from_millis(100), SimDuration::from_secs(5)),
            Ok(ReconnectConfig::seed_001())
        );
    }

    #[test]
    fn backoff_saturates_instead_of_overflowing() {
        let config = ReconnectConfig::new(SimDuration::from_nanos(1), SimDuration::MAX).unwrap();
        assert_eq!(config.backoff_after(64), SimDuration::from_nanos(1 << 63));
        assert_eq!(config.backoff_after(65), SimDuration::MAX);
        assert_eq!(config.backoff_after(u32::MAX), SimDuration::MAX);
        let mut slot = ReconnectSlot::new(config);
        for _ in 0..70 {
            let now = slot.next_deadline().unwrap_or(SimTime::ZERO);
            fail_attempt(&mut slot, now);
        }
        assert_eq!(
            slot.next_deadline(),
            None,
            "the window runs to the end of time"
        );
        assert!(matches!(
            slot.acquire(SimTime::MAX),
            Acquire::Unavailable { .. } | Acquire::Connect(_)
        ));
    }

    #[test]
    fn connects_on_first_use_and_then_leases_the_same_connection() {
        let mut s = slot();
        assert_eq!(s.stats(), ReconnectStats::default());
        let ticket = connect_ticket(&mut s, ms(0));
        assert_eq!(ticket.attempt().get(), 1);
        assert_eq!(s.attempt_in_progress(), Some(ticket.attempt()));
        let first = s.on_connected(ms(2), ticket, 7).lease;
        assert_eq!((first.connection(), first.generation().get()), (7, 1));
        assert!(!first.replays_writes());
        assert_eq!(lease(&mut s, ms(3)), first);
        assert_eq!(lease(&mut s, ms(4)), first);
        let stats = s.stats();
        assert!(stats.connected);
        assert_eq!((stats.attempts_total, stats.connects_total), (1, 1));
        assert_eq!(stats.reconnects_total, 0);
        assert_eq!(s.next_deadline(), None);
    }

    #[test]
    fn callers_wait_on_the_attempt_in_progress_then_get_its_connection() {
        let mut s = slot();
        let ticket = connect_ticket(&mut s, ms(0));
        let attempt = ticket.attempt();
        for _ in 0..3 {
            assert_eq!(s.acquire(ms(1)), Acquire::Wait(attempt));
        }
        let connected = s.on_connected(ms(5), ticket, 1);
        assert_eq!(
            connected.attempt, attempt,
            "the report names the attempt waited on"
        );
        let first = connected.lease;
        assert_eq!(s.attempt_in_progress(), None);
        assert_eq!(lease(&mut s, ms(5)), first);
        assert_eq!(s.stats().attempts_total, 1);
    }

    #[test]
    fn a_stale_generation_failure_does_not_evict_the_replacement() {
        let mut s = slot();
        let old = connect(&mut s, ms(0), 1);
        let late = lease(&mut s, ms(1));
        assert_eq!(s.on_failure(ms(2), &old, IO), FailureEffect::Evicted);
        let replacement = connect(&mut s, ms(3), 2);
        assert_eq!(replacement.generation().get(), 2);
        // A command that ran on the old connection fails only now.
        let timeout = Failure::Connection(ConnectionError::ResponseTimeout);
        assert_eq!(
            s.on_failure(ms(4), &late, timeout),
            FailureEffect::NotCurrent
        );
        assert_eq!(lease(&mut s, ms(5)), replacement);
        let stats = s.stats();
        assert!(stats.connected);
        assert_eq!((stats.evictions_total, stats.reconnects_total), (1, 1));
    }

    #[test]
    fn a_failure_while_the_slot_is_empty_or_connecting_changes_nothing() {
        let mut s = slot();
        let old = connect(&mut s, ms(0), 1);
        assert_eq!(s.on_failure(ms(1), &old, IO), FailureEffect::Evicted);
        assert_eq!(s.on_failure(ms(1), &old, IO), FailureEffect::NotCurrent);
        let ticket = connect_ticket(&mut s, ms(2));
        assert_eq!(s.on_failure(ms(2), &old, IO), FailureEffect::NotCurrent);
        assert_eq!(s.attempt_in_progress(), Some(ticket.attempt()));
        s.on_connected(ms(3), ticket, 2);
        assert_eq!(s.stats().evictions_total, 1);
    }

    #[test]
    fn wrongtype_keeps_the_connection() {
        let mut s = slot();
        let live = connect(&mut s, ms(0), 1);
        assert_eq!(
            s.on_failure(ms(1), &live, Failure::Server),
            FailureEffect::ConnectionKept
        );
        assert_eq!(lease(&mut s, ms(2)), live);
        assert_eq!(s.stats().evictions_total, 0);
    }

    #[test]
    fn every_connection_level_error_evicts() {
        let errors = [
            ConnectionError::Io,
            ConnectionError::ResponseTimeout,
            ConnectionError::Unrecoverable,
            ConnectionError::ReadOnly,
        ];
        for error in errors {
            let mut s = slot();
            let live = connect(&mut s, ms(0), 1);
            let effect = s.on_failure(ms(1), &live, Failure::Connection(error));
            assert_eq!(effect, FailureEffect::Evicted, "{error:?}");
            assert!(!s.stats().connected, "{error:?}");
        }
    }

    #[test]
    fn losing_a_working_connection_reconnects_at_once_without_backoff() {
        let mut s = slot();
        // Two failed attempts first, so a backoff would show if one were applied.
        fail_attempt(&mut s, ms(0));
        fail_attempt(&mut s, ms(100));
        let live = connect(&mut s, ms(300), 1);
        assert_eq!(s.failures_consecutive(), 0);
        assert_eq!(s.on_failure(ms(400), &live, IO), FailureEffect::Evicted);
        // Same instant: the next caller connects straight away.
        let replacement = connect(&mut s, ms(400), 2);
        assert_eq!(replacement.generation().get(), 2);
        // And a failure right after the loss backs off from the start, 100 ms.
        assert_eq!(
            s.on_failure(ms(500), &replacement, IO),
            FailureEffect::Evicted
        );
        assert_eq!(fail_attempt(&mut s, ms(500)), SimDuration::from_millis(100));
        let stats = s.stats();
        assert_eq!(stats.connect_failures_total, 3);
        assert_eq!(stats.reconnects_total, 1);
    }

    #[test]
    fn failed_attempts_back_off_100_200_400_to_5000_exactly() {
        let expected_ms = [100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000];
        let mut s = slot();
        let mut now = ms(0);
        for window_ms in expected_ms {
            let window = fail_attempt(&mut s, now);
            assert_eq!(window, SimDuration::from_millis(window_ms));
            let end = now.saturating_add(window);
            assert_eq!(s.next_deadline(), Some(end));
            let just_before = SimTime::from_nanos(end.as_nanos() - 1);
            assert_eq!(unavailable(&mut s, just_before), SimDuration::from_nanos(1));
            now = end;
        }
        let stats = s.stats();
        assert_eq!(stats.attempts_total, expected_ms.len() as u64);
        assert_eq!(stats.connect_failures_total, expected_ms.len() as u64);
        assert!(!stats.connected);
    }

    #[test]
    fn a_late_attempt_backs_off_from_when_it_failed() {
        let mut s = slot();
        fail_attempt(&mut s, ms(0));
        // Nobody came for a while; the attempt starts at 3 s and fails at 3.5 s.
        let ticket = connect_ticket(&mut s, ms(3000));
        let failed = s.on_connect_failed(ms(3500), ticket);
        assert_eq!(
            (failed.backoff, failed.retry_at),
            (SimDuration::from_millis(200), ms(3700))
        );
        assert_eq!(unavailable(&mut s, ms(3600)), SimDuration::from_millis(100));
        assert_eq!(s.next_deadline(), Some(ms(3700)));
    }

    #[test]
    fn callers_inside_the_window_fail_open_at_once_and_are_counted() {
        let mut s = slot();
        fail_attempt(&mut s, ms(10));
        for (at_ms, retry_in_ms) in [(10, 100), (50, 60), (109, 1)] {
            assert_eq!(
                unavailable(&mut s, ms(at_ms)),
                SimDuration::from_millis(retry_in_ms)
            );
            s.record_fail_open();
        }
        let stats = s.stats();
        assert_eq!(stats.fail_open_total, 3);
        assert_eq!((stats.attempts_total, stats.connect_failures_total), (1, 1));
        let ticket = connect_ticket(&mut s, ms(110));
        assert_eq!(ticket.attempt().get(), 2, "the window is over at 110 ms");
        s.on_connected(ms(111), ticket, 1);
    }

    #[test]
    fn a_burst_of_500_callers_makes_one_attempt_and_counts_one_failure() {
        let mut s = slot();
        let ticket = connect_ticket(&mut s, ms(0));
        let attempt = ticket.attempt();
        // 499 more arrive while the connect is in flight; they wait on it.
        for caller in 1..500u64 {
            assert_eq!(
                s.acquire(SimTime::from_nanos(caller)),
                Acquire::Wait(attempt)
            );
        }
        assert_eq!(s.on_connect_failed(ms(1), ticket).attempt, attempt);
        // All 500 (the connecting caller included) ask again and fail open, inside one window.
        for caller in 0..500u64 {
            let now = ms(1).saturating_add(SimDuration::from_micros(caller));
            unavailable(&mut s, now);
            s.record_fail_open();
        }
        let stats = s.stats();
        assert_eq!(stats.attempts_total, 1);
        assert_eq!(stats.connect_failures_total, 1);
        assert_eq!(stats.fail_open_total, 500);
    }

    #[test]
    fn the_gauge_over_an_outage_and_a_restart() {
        let mut s = slot();
        let gauge = |s: &ReconnectSlot| {
            let stats = s.stats();
            (
                stats.connected,
                stats.reconnects_total,
                stats.connect_failures_total,
            )
        };
        assert_eq!(gauge(&s), (false, 0, 0), "before the warm-up");
        let before = connect(&mut s, ms(0), 1);
        assert_eq!(gauge(&s), (true, 0, 0), "connected before");
        // Redis goes away at 1 s; the next command fails on the dead connection.
        assert_eq!(s.on_failure(ms(1000), &before, IO), FailureEffect::Evicted);
        assert_eq!(gauge(&s), (false, 0, 0), "evicted");
        let mut now = ms(1000);
        let mut failures = 0;
        // Down until 4 s: attempts at 1000, 1100, 1300, 1700, 2500 (+1600 = 4100) fail.
        while now < ms(4000) {
            let window = fail_attempt(&mut s, now);
            failures += 1;
            assert_eq!(gauge(&s), (false, 0, failures), "during, at {now}");
            unavailable(&mut s, now);
            now = now.saturating_add(window);
        }
        assert_eq!((failures, now), (5, ms(4100)));
        // Redis is back; the first caller after the window reconnects, once.
        connect(&mut s, now, 2);
        assert_eq!(gauge(&s), (true, 1, 5), "reconnected once after");
        lease(&mut s, ms(5000));
        assert_eq!(gauge(&s), (true, 1, 5));
    }

    #[test]
    fn time_that_goes_backwards_reads_as_the_latest_seen() {
        let mut s = slot();
        fail_attempt(&mut s, ms(100));
        assert_eq!(unavailable(&mut s, ms(150)), SimDuration::from_millis(50));
        // A caller that read the clock earlier and took the lock later.
        assert_eq!(unavailable(&mut s, ms(20)), SimDuration::from_millis(50));
    }

    #[test]
    #[should_panic(expected = "not the attempt in progress")]
    fn reporting_an_attempt_twice_is_a_caller_bug() {
        let mut s = slot();
        let ticket = connect_ticket(&mut s, ms(0));
        let copy = AttemptTicket {
            slot: ticket.slot,
            attempt: ticket.attempt,
        };
        s.on_connected(ms(1), ticket, 1);
        s.on_connect_failed(ms(2), copy);
    }

    #[test]
    #[should_panic(expected = "a lease was handed back to a reconnect slot that did not issue it")]
    fn a_lease_from_another_slot_panics() {
        let (mut issuer, mut other) = (slot(), slot());
        let foreign = connect(&mut issuer, ms(0), 1);
        let _own = connect(&mut other, ms(0), 1);
        // Same generation and connection number: without the check, this failure would evict
        // `other`'s live connection.
        other.on_failure(ms(1), &foreign, IO);
    }

    #[test]
    #[should_panic(
        expected = "an attempt ticket was handed back to a reconnect slot that did not issue it"
    )]
    fn an_attempt_ticket_from_another_slot_panics() {
        let (mut issuer, mut other) = (slot(), slot());
        let foreign = connect_ticket(&mut issuer, ms(0));
        let _own = connect_ticket(&mut other, ms(0));
        // Both are attempt 1: without the check, this would end `other`'s attempt.
        other.on_connected(ms(1), foreign, 1);
    }

    /// The call order of the module documentation, driven as the simulator drives it: callers
    /// told to wait are parked under the attempt they wait for, and woken when the report of
    /// that attempt names it.
    #[test]
    fn the_report_of_an_attempt_names_the_waiters_it_releases() {
        let mut s = slot();
        let mut parked: Vec<(AttemptId, u32)> = Vec::new();
        let ticket = connect_ticket(&mut s, ms(0));
        for caller in 1..=3 {
            match s.acquire(ms(1)) {
                Acquire::Wait(attempt) => parked.push((attempt, caller)),
                other => panic!("caller {caller}: {other:?}"),
            }
        }
        let failed = s.on_connect_failed(ms(10), ticket);
        let woken: Vec<u32> = parked
            .iter()
            .filter(|(attempt, _)| *attempt == failed.attempt)
            .map(|&(_, caller)| caller)
            .collect();
        assert_eq!(
            woken,
            [1, 2, 3],
            "every waiter of the attempt, in arrival order"
        );
        parked.clear();
        for _ in woken {
            assert_eq!(unavailable(&mut s, ms(10)), SimDuration::from_millis(100));
        }
        // The next attempt starts when the window closes; its own report releases its waiters.
        let ticket = connect_ticket(&mut s, failed.retry_at);
        let second = ticket.attempt();
        assert_ne!(second, failed.attempt);
        assert_eq!(s.acquire(failed.retry_at), Acquire::Wait(second));
        let connected = s.on_connected(ms(150), ticket, 9);
        assert_eq!(connected.attempt, second);
        assert_eq!(lease(&mut s, ms(150)), connected.lease);
    }

    fn check_replay(commands: &[Command], failure: Failure, opted_in: bool, expected: bool) {
        let mut s = slot();
        let mut lease = connect(&mut s, ms(0), 1);
        if opted_in {
            lease = lease.with_replay_writes();
        }
        assert_eq!(
            should_replay(commands, failure, &lease),
            expected,
            "{commands:?} after {failure:?}, replay_writes = {opted_in}"
        );
    }

    #[test]
    fn each_read_only_command_is_replayed_after_a_connection_failure() {
        for command in Command::READ_ONLY {
            check_replay(&[command], IO, false, true);
            check_replay(&[command], Failure::Server, false, false);
        }
        let names: Vec<_> = Command::READ_ONLY.iter().map(|c| c.to_string()).collect();
        assert_eq!(
            names,
            ["GET", "MGET", "LRANGE", "EXISTS", "TTL", "PTTL", "PING"]
        );
    }

    #[test]
    fn replay_rules() {
        use Command::*;
        let readonly = Failure::Connection(ConnectionError::ReadOnly);
        let cases: [(&[Command], Failure, bool, bool); 12] = [
            (&[IncrByFloat], IO, false, false),
            (&[Set], IO, false, false),
            (&[Del], readonly, false, false),
            (&[EvalSha], IO, false, false),
            (&[EvalSha], IO, true, true),
            (&[IncrByFloat], IO, true, true),
            (&[EvalSha], Failure::Server, true, false),
            (
                &[MGet, Get, LRange, Exists, Ttl, PTtl, Ping],
                IO,
                false,
                true,
            ),
            (&[Get, IncrBy, Expire], IO, false, false),
            (&[MGet, IncrByFloat], IO, false, false),
            (&[MGet, IncrByFloat], IO, true, true),
            (&[], IO, true, false),
        ];
        for (commands, failure, opted_in, expected) in cases {
            check_replay(commands, failure, opted_in, expected);
        }
    }

    /// A reference model, written for seed 001's values only, with the windows as a table.
    mod reference {
        use super::*;
        use proptest::prelude::*;

        const WINDOWS_MS: [u64; 7] = [100, 200, 400, 800, 1600, 3200, 5000];

        #[derive(Default)]
        struct Model {
            now_ms: u64,
            live_generation: Option<u64>,
            connecting: Option<u64>,
            window_end_ms: Option<u64>,
            failures_in_a_row: usize,
            generations: u64,
            attempts: u64,
            connects: u64,
            failures: u64,
            evictions: u64,
            fail_opens: u64,
        }

        #[derive(Debug, PartialEq, Eq)]
        enum Decision {
            Lease(u64),
            Connect(u64),
            Wait(u64),
            Unavailable { retry_in_ms: u64 },
        }

        impl Model {
            fn acquire(&mut self) -> Decision {
                if let Some(generation) = self.live_generation {
                    return Decision::Lease(generation);
                }
                if let Some(attempt) = self.connecting {
                    return Decision::Wait(attempt);
                }
                if let Some(end) = self.window_end_ms
                    && self.now_ms < end
                {
                    return Decision::Unavailable {
                        retry_in_ms: end - self.now_ms,
                    };
                }
                self.attempts += 1;
                self.connecting = Some(self.attempts);
                Decision::Connect(self.attempts)
            }

            fn connected(&mut self) {
                self.connecting = None;
                self.generations += 1;
                self.live_generation = Some(self.generations);
                self.connects += 1;
                self.failures_in_a_row = 0;
                self.window_end_ms = None;
            }

            fn connect_failed(&mut self) {
                self.connecting = None;
                self.failures += 1;
                self.failures_in_a_row += 1;
                let window = WINDOWS_MS[(self.failures_in_a_row - 1).min(WINDOWS_MS.len() - 1)];
                self.window_end_ms = Some(self.now_ms + window);
            }

            fn failure(&mut self, generation: u64, failure: Failure) -> FailureEffect {
                if failure == Failure::Server {
                    FailureEffect::ConnectionKept
                } else if self.live_generation == Some(generation) {
                    self.live_generation = None;
                    self.evictions += 1;
                    FailureEffect::Evicted
                } else {
                    FailureEffect::NotCurrent
                }
            }

            fn stats(&self) -> ReconnectStats {
                ReconnectStats {
                    connected: self.live_generation.is_some(),
                    attempts_total: self.attempts,
                    connects_total: self.connects,
                    reconnects_total: self.connects.saturating_sub(1),
                    connect_failures_total: self.failures,
                    evictions_total: self.evictions,
                    fail_open_total: self.fail_opens,
                }
            }
        }

        #[derive(Clone, Debug)]
        enum Step {
            Acquire,
            ConnectOk,
            ConnectFail,
            /// A failure reported through the `n`th lease handed out (modulo how many there are).
            Failure(usize, Failure),
            FailOpen,
            AdvanceMs(u64),
        }

        fn step() -> impl Strategy<Value = Step> {
            let failure = prop_oneof![
                Just(Failure::Server),
                Just(Failure::Connection(ConnectionError::Io)),
                Just(Failure::Connection(ConnectionError::ReadOnly)),
            ];
            let advance_ms = prop_oneof![Just(0u64), Just(1), Just(100), Just(200), 0u64..6_000,];
            prop_oneof![
                4 => Just(Step::Acquire),
                2 => Just(Step::ConnectOk),
                3 => Just(Step::ConnectFail),
                3 => (any::<usize>(), failure).prop_map(|(n, f)| Step::Failure(n, f)),
                1 => Just(Step::FailOpen),
                3 => advance_ms.prop_map(Step::AdvanceMs),
            ]
        }

        fn decision(acquire: &Acquire) -> Decision {
            match acquire {
                Acquire::Lease(lease) => Decision::Lease(lease.generation().get()),
                Acquire::Connect(ticket) => Decision::Connect(ticket.attempt().get()),
                Acquire::Wait(attempt) => Decision::Wait(attempt.get()),
                Acquire::Unavailable { retry_in } => {
                    assert_eq!(retry_in.as_nanos() % 1_000_000, 0, "whole milliseconds");
                    Decision::Unavailable {
                        retry_in_ms: retry_in.as_nanos() / 1_000_000,
                    }
                }
            }
        }

        fn run(steps: &[Step]) -> Result<(), TestCaseError> {
            let mut s = slot();
            let mut model = Model::default();
            let mut ticket: Option<AttemptTicket> = None;
            let mut leases: Vec<Lease> = Vec::new();
            let mut next_connection: ConnectionId = 100;
            for (index, step) in steps.iter().enumerate() {
                let now = ms(model.now_ms);
                match *step {
                    Step::Acquire => {
                        let acquired = s.acquire(now);
                        prop_assert_eq!(decision(&acquired), model.acquire(), "step {}", index);
                        match acquired {
                            Acquire::Lease(lease) => leases.push(lease),
                            Acquire::Connect(new) => {
                                prop_assert!(ticket.is_none(), "two attempts in flight");
                                ticket = Some(new);
                            }
                            Acquire::Wait(_) | Acquire::Unavailable { .. } => {}
                        }
                    }
                    Step::ConnectOk => {
                        if let Some(ticket) = ticket.take() {
                            next_connection += 1;
                            leases.push(s.on_connected(now, ticket, next_connection).lease);
                            model.connected();
                        }
                    }
                    Step::ConnectFail => {
                        if let Some(ticket) = ticket.take() {
                            s.on_connect_failed(now, ticket);
                            model.connect_failed();
                        }
                    }
                    Step::Failure(n, failure) => {
                        if !leases.is_empty() {
                            let lease = leases[n % leases.len()];
                            let effect = s.on_failure(now, &lease, failure);
                            let expected = model.failure(lease.generation().get(), failure);
                            prop_assert_eq!(effect, expected, "step {}", index);
                        }
                    }
                    Step::FailOpen => {
                        s.record_fail_open();
                        model.fail_opens += 1;
                    }
                    Step::AdvanceMs(millis) => model.now_ms += millis,
                }
                prop_assert_eq!(s.stats(), model.stats(), "step {}: {:?}", index, step);
                let expected_deadline = model
                    .window_end_ms
                    .filter(|&end| end > model.now_ms && model.live_generation.is_none())
                    .filter(|_| model.connecting.is_none())
                    .map(ms);
                // The slot learns the time only from calls; compare once it has seen `now`.
                if s.latest.get() == ms(model.now_ms) {
                    prop_assert_eq!(s.next_deadline(), expected_deadline, "step {}", index);
                }
            }
            Ok(())
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(512))]
            #[test]
            fn the_slot_matches_the_reference_model(
                steps in proptest::collection::vec(step(), 1..80)
            ) {
                run(&steps)?;
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod concurrent_tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    /// Eight threads lease, lose and replace one connection: never two connects at once, and
    /// every eviction is followed by exactly one replacement.
    #[test]
    fn threads_never_connect_twice_at_once() {
        let shared = Arc::new(SharedReconnectSlot::new(ReconnectConfig::seed_001()));
        let connecting = Arc::new(AtomicU32::new(0));
        let peak = Arc::new(AtomicU32::new(0));
        let connections = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|thread| {
                let (shared, connecting, peak, connections) = (
                    shared.clone(),
                    connecting.clone(),
                    peak.clone(),
                    connections.clone(),
                );
                std::thread::spawn(move || {
                    for round in 0..200u64 {
                        let lease = shared.lease(SimTime::ZERO, || {
                            let now = connecting.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            connecting.fetch_sub(1, Ordering::SeqCst);
                            let connection = connections.fetch_add(1, Ordering::SeqCst) + 1;
                            (Some(connection), SimTime::ZERO)
                        });
                        if let Some(lease) = lease
                            && (round + thread) % 7 == 0
                        {
                            let io = Failure::Connection(ConnectionError::Io);
                            shared.on_failure(SimTime::ZERO, &lease, io);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(peak.load(Ordering::SeqCst), 1);
        let stats = shared.stats();
        assert_eq!(stats.connect_failures_total, 0);
        assert_eq!(stats.connects_total, connections.load(Ordering::SeqCst));
        // Each connection but the live one (if any) was evicted once.
        assert_eq!(
            stats.evictions_total + u64::from(stats.connected),
            stats.connects_total
        );
    }

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    /// The attempt starts at 0 ms and fails at 500 ms: the 100 ms window runs from the
    /// failure, to 600 ms, not from the start (which would have let a caller at 550 ms make a
    /// second attempt against a server that just refused).
    #[test]
    fn a_failed_connect_backs_off_from_when_it_ended() {
        let shared = SharedReconnectSlot::new(ReconnectConfig::seed_001());
        assert_eq!(shared.lease(ms(0), || (None, ms(500))), None);
        let mut attempts = 0;
        let at_550 = shared.lease(ms(550), || {
            attempts += 1;
            (Some(1), ms(550))
        });
        assert_eq!((at_550, attempts), (None, 0), "inside the window");
        let at_600 = shared.lease(ms(600), || (Some(2), ms(601)));
        assert_eq!(at_600.map(|lease| lease.connection()), Some(2));
        let stats = shared.stats();
        assert_eq!((stats.attempts_total, stats.connect_failures_total), (2, 1));
    }

    #[test]
    fn a_connect_that_panics_counts_as_a_failed_attempt() {
        let shared = SharedReconnectSlot::new(ReconnectConfig::seed_001());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            shared.lease(SimTime::ZERO, || panic!("connect panicked"))
        }));
        assert!(panicked.is_err());
        let stats = shared.stats();
        assert_eq!((stats.attempts_total, stats.connect_failures_total), (1, 1));
        // Not wedged: inside the window callers fail open; after it they connect.
        assert_eq!(
            shared.lease(SimTime::ZERO, || (Some(1), SimTime::ZERO)),
            None
        );
        let after = SimTime::from_nanos(100_000_000);
        assert_eq!(
            shared
                .lease(after, || (Some(1), after))
                .map(|l| l.connection()),
            Some(1)
        );
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::{Arc, AtomicBool, AtomicU32, Ordering};

    const NOW: SimTime = SimTime::ZERO;
    const IO: Failure = Failure::Connection(ConnectionError::Io);

    /// Both threads ran commands on connection 1 and both see it die. Whatever the order of
    /// their reports and reconnects, exactly one replacement is made, and a report that arrives
    /// after the replacement (thread A's old lease, once B has reconnected) leaves it in place.
    #[test]
    fn loom_reconnect_stale_failure_never_evicts_the_replacement() {
        crate::sync::loom_model(|| {
            let shared = Arc::new(SharedReconnectSlot::new(ReconnectConfig::seed_001()));
            let old = shared.lease(NOW, || (Some(1), NOW)).unwrap();
            let other = shared.clone();
            let b = loom::thread::spawn(move || {
                other.on_failure(NOW, &old, IO);
                other.lease(NOW, || (Some(2), NOW))
            });
            shared.on_failure(NOW, &old, IO);
            let a = shared.lease(NOW, || (Some(2), NOW));
            let b = b.join().unwrap();
            let (a, b) = (a.expect("A leases"), b.expect("B leases"));
            assert_eq!(a, b, "the replacement was evicted by a stale report");
            assert_eq!(a.generation().get(), 2);
            let stats = shared.stats();
            assert!(stats.connected);
            assert_eq!(stats.evictions_total, 1);
            assert_eq!(stats.connects_total, 2, "one replacement, not two");
            assert_eq!(shared.lease(NOW, || (Some(3), NOW)), Some(a));
        });
    }

    /// Three callers find the slot empty. At most one connect runs at any moment and, whether
    /// it succeeds or fails, exactly one attempt is made.
    fn single_flight(connect_succeeds: bool) {
        crate::sync::loom_model(move || {
            let shared = Arc::new(SharedReconnectSlot::new(ReconnectConfig::seed_001()));
            let connecting = Arc::new(AtomicU32::new(0));
            let attempts = Arc::new(AtomicU32::new(0));
            let caller = {
                let (shared, connecting, attempts) =
                    (shared.clone(), connecting.clone(), attempts.clone());
                move || {
                    shared.lease(NOW, || {
                        let now = connecting.fetch_add(1, Ordering::SeqCst) + 1;
                        assert!(now <= 1, "{now} connects in flight");
                        attempts.fetch_add(1, Ordering::SeqCst);
                        connecting.fetch_sub(1, Ordering::SeqCst);
                        (connect_succeeds.then_some(1), NOW)
                    })
                }
            };
            let threads: Vec<_> = (0..2)
                .map(|_| loom::thread::spawn(caller.clone()))
                .collect();
            let mut leases = vec![caller()];
            leases.extend(threads.into_iter().map(|t| t.join().unwrap()));
            assert_eq!(attempts.load(Ordering::SeqCst), 1, "one attempt in all");
            let expected = connect_succeeds.then(|| leases[0].unwrap());
            assert!(leases.iter().all(|&l| l == expected), "{leases:?}");
            let stats = shared.stats();
            assert_eq!(stats.attempts_total, 1);
            assert_eq!(stats.connect_failures_total, u64::from(!connect_succeeds));
        });
    }

    #[test]
    fn loom_reconnect_single_flight_when_the_connect_succeeds() {
        single_flight(true);
    }

    #[test]
    fn loom_reconnect_single_flight_when_the_connect_fails() {
        single_flight(false);
    }

    /// One socket between the client and Redis. The server applies a request that reached it,
    /// then writes the reply; a third party (a restart, CLIENT KILL, a proxy's idle timeout)
    /// cuts the socket at any moment. A reply written after the cut is lost.
    #[derive(Default)]
    struct Wire {
        request_sent: bool,
        reply_delivered: bool,
        cut: bool,
    }

    struct Outcome {
        /// How many times the server applied the write.
        applied: u32,
        /// The server applied the write and the cut then swallowed its reply.
        reply_lost_after_apply: bool,
    }

    /// The client sends one write over connection 1 while the server thread answers and the
    /// cutting thread kills the socket; on a connection-level failure the client follows
    /// [`should_replay`] and, if it says so, replays the write on a fresh connection. The race
    /// that matters is the reply arriving versus the connection being declared dead.
    fn write_over_a_dying_connection(command: Command, replay_writes: bool) -> Outcome {
        let shared = Arc::new(SharedReconnectSlot::new(ReconnectConfig::seed_001()));
        let wire = Arc::new((Mutex::new(Wire::default()), Condvar::new()));
        let applied = Arc::new(AtomicU32::new(0));
        let reply_lost = Arc::new(AtomicBool::new(false));

        let server = {
            let (wire, applied, reply_lost) = (wire.clone(), applied.clone(), reply_lost.clone());
            loom::thread::spawn(move || {
                let (state, changed) = &*wire;
                let arrived = {
                    let mut state = lock(state);
                    loop {
                        if state.request_sent {
                            break true;
                        }
                        if state.cut {
                            break false;
                        }
                        state = changed.wait(state).unwrap();
                    }
                };
                if arrived {
                    applied.fetch_add(1, Ordering::SeqCst);
                    let mut state = lock(state);
                    if state.cut {
                        reply_lost.store(true, Ordering::SeqCst);
                    } else {
                        state.reply_delivered = true;
                        changed.notify_all();
                    }
                }
            })
        };
        let cutter = {
            let wire = wire.clone();
            loom::thread::spawn(move || {
                let (state, changed) = &*wire;
                lock(state).cut = true;
                changed.notify_all();
            })
        };

        let mut lease = shared.lease(NOW, || (Some(1), NOW)).unwrap();
        if replay_writes {
            lease = lease.with_replay_writes();
        }
        let replied = {
            let (state, changed) = &*wire;
            let mut state = lock(state);
            if state.cut {
                false // never sent: the write meets a dead connection
            } else {
                state.request_sent = true;
                changed.notify_all();
                loop {
                    if state.reply_delivered {
                        break true;
                    }
                    if state.cut {
                        break false; // the same BrokenPipe whether or not it was applied
                    }
                    state = changed.wait(state).unwrap();
                }
            }
        };
        if !replied {
            assert_eq!(shared.on_failure(NOW, &lease, IO), FailureEffect::Evicted);
            if should_replay(&[command], IO, &lease) {
                let fresh = shared.lease(NOW, || (Some(2), NOW)).expect("Redis is back");
                assert_eq!(fresh.generation().get(), 2);
                applied.fetch_add(1, Ordering::SeqCst); // the fresh connection stays up
            }
        }
        server.join().unwrap();
        cutter.join().unwrap();
        Outcome {
            applied: applied.load(Ordering::SeqCst),
            reply_lost_after_apply: reply_lost.load(Ordering::SeqCst),
        }
    }

    /// A budget charge (INCRBYFLOAT) without the opt-in is applied at most once, and exactly
    /// once when the server applied it and only the reply was lost. Also checks that loom
    /// explored that lost-reply interleaving, so the assertion is not vacuous.
    #[test]
    fn loom_reconnect_lost_reply_write_is_applied_once_without_replay_writes() {
        let bound = crate::sync::LOOM_PREEMPTION_BOUND;
        let (executions, lost_replies) = crate::sync::loom_count_executions(bound, || {
            let outcome = write_over_a_dying_connection(Command::IncrByFloat, false);
            assert!(outcome.applied <= 1, "charged {} times", outcome.applied);
            if outcome.reply_lost_after_apply {
                assert_eq!(outcome.applied, 1);
            }
            outcome.reply_lost_after_apply
        });
        assert!(
            lost_replies > 0,
            "loom never explored a reply lost after the write was applied in {executions} \
             executions"
        );
    }

    /// The rate-limit admission script with `replay_writes`: it is never under-counted, and
    /// loom must find the interleaving that charges it twice (the server applied it, the cut
    /// swallowed the reply, the client replayed). The double charges are counted outside the
    /// model rather than caught as a panic, so only this counterexample counts, not any panic,
    /// and the test fails if loom ever stops finding it.
    #[test]
    fn loom_reconnect_replay_writes_double_charge_is_found() {
        let bound = crate::sync::LOOM_PREEMPTION_BOUND;
        let (executions, double_charges) = crate::sync::loom_count_executions(bound, || {
            let outcome = write_over_a_dying_connection(Command::EvalSha, true);
            assert!(outcome.applied >= 1, "an admission was not counted");
            if outcome.applied == 2 {
                assert!(
                    outcome.reply_lost_after_apply,
                    "charged twice with its reply"
                );
            }
            outcome.applied == 2
        });
        assert!(
            double_charges > 0,
            "no double charge in {executions} executions"
        );
        assert!(
            double_charges < executions,
            "the double charge needs the race; it happened every time"
        );
    }
}

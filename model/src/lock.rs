//! Distributed read-write lock over Redis (seed 000's `distributed-rw-lock`): the client's
//! acquire loop, and the lock's state on the server.
//!
//! The client ([`LockClient`], one per lock of a process) acquires with a loop:
//!
//! ```text
//!  begin ──▶ attempt ──reply──▶ Acquired ─────────────────────────────▶ Held(token)
//!               ▲                Busy ── deadline not reached ──▶ Sleep(until) ──wake──┐
//!               │                 │                                                    │
//!               │                 └── deadline reached ──────────────▶ TimedOut        │
//!               │                Failed (timeout, refused, ...) ─────▶ Failed          │
//!               └──────────────────────────── wake before the deadline ◀───────────────┘
//!                                             wake at the deadline ──▶ TimedOut
//! ```
//!
//! Call order: [`LockClient::begin`], then send the attempt's command and hand its reply to
//! [`LockClient::on_reply`] exactly once; after [`AttemptEnd::Sleep`] call
//! [`LockClient::wake`] at `until`, which gives the next attempt or the timeout. A
//! [`Held`] lock is given back through [`LockClient::release`] (whose command is a
//! compare-and-delete with its token), whose reply goes to [`LockClient::on_released`]. A
//! holder that never releases (its request failed) holds until its lease expires on the server.
//!
//! Timing: the acquire deadline is `begin`'s `now` plus `acquire_timeout`. A busy reply at
//! `t` sleeps until `min(t + retry_delay, deadline)` (the delay jittered if the config says,
//! [`RetryJitter`], with randomness the caller passes in); waking at the deadline is a
//! timeout, so a lock that stays taken fails its acquire exactly `acquire_timeout` after it
//! began (unless the last attempt's reply comes later: an attempt in flight is always waited
//! for). A busy reply
//! at or after the deadline is a timeout at once. A failed attempt (a Redis error) ends the
//! acquire with that error, as the seed's acquire rethrows it.
//!
//! The server side of one lock key is [`LockKey`]: at most one exclusive holder (a writer) or
//! any number of shared holders (readers, at most [`READERS_MAX`]), each with its own token and
//! lease expiry. An exclusive acquire (`SET NX PX`) fails while a writer or any live reader
//! holds the key; a shared acquire (a script) fails while a live writer holds it, and adds the
//! reader otherwise. A release is a compare-and-delete (a script): it removes the holder with
//! the caller's token, and nothing else. [`LockKey::delete`] is the plain `DEL` a naive release
//! sends, which removes whoever holds the key: after a lease expired and another took the
//! lock, it deletes the successor's lock. [`SharedLockKey`] is the key behind a mutex (a Redis
//! server runs one command at a time), which loom checks.
//!
//! Invariants:
//! - tokens are unique per client, and a [`Held`], an [`Attempt`] or an [`Acquiring`] is
//!   handed back only to the client that issued it (a real `assert!`);
//! - an attempt's reply is reported once: [`Attempt`] cannot be copied or cloned;
//! - on the server, a live writer and a live reader never hold one key together, nor two live
//!   writers.

use crate::config::ConfigError;
use crate::instance::InstanceId;
use crate::random::{RandomBits, below};
use crate::sync::{Mutex, lock};
use crate::time::{SimDuration, SimTime};

/// The most readers one key holds at once; a shared acquire beyond is answered busy. It bounds
/// a key's memory on the server (a script that keeps readers in a capped sorted set).
pub const READERS_MAX: usize = 4096;

/// How the wait after a busy attempt varies, so that contenders that collided do not retry in
/// step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RetryJitter {
    /// Exactly `retry_delay`.
    #[default]
    None,
    /// Uniform in `[1 ns, retry_delay]` (never zero: a retry always waits).
    Full,
    /// Uniform in `[retry_delay - retry_delay / 2, retry_delay]`.
    Equal,
}

/// A validated lock configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockConfig {
    lease: SimDuration,
    retry_delay: SimDuration,
    jitter: RetryJitter,
    acquire_timeout: SimDuration,
}

impl LockConfig {
    /// `lease`: the lock key's expiry (PX); `retry_delay`: the wait after a busy attempt;
    /// `acquire_timeout`: how long an acquire may go on before it fails.
    pub fn new(
        lease: SimDuration,
        retry_delay: SimDuration,
        acquire_timeout: SimDuration,
    ) -> Result<Self, ConfigError> {
        if lease.is_zero() {
            return Err(ConfigError::new(
                "lease",
                "must be longer than zero (a lock with a zero lease expires as it is taken and \
                 excludes nobody)",
            ));
        }
        if retry_delay.is_zero() {
            return Err(ConfigError::new(
                "retry_delay",
                "must be longer than zero (a zero delay spins on a taken lock)",
            ));
        }
        if retry_delay > acquire_timeout {
            return Err(ConfigError::new(
                "retry_delay",
                format!(
                    "must be at most acquire_timeout ({acquire_timeout}), or the acquire never \
                     retries; it is {retry_delay}"
                ),
            ));
        }
        Ok(LockConfig {
            lease,
            retry_delay,
            jitter: RetryJitter::None,
            acquire_timeout,
        })
    }

    /// The same, with the wait after a busy attempt jittered.
    pub fn with_jitter(self, jitter: RetryJitter) -> Self {
        LockConfig { jitter, ..self }
    }

    pub fn jitter(&self) -> RetryJitter {
        self.jitter
    }

    /// The wait after a busy attempt: `retry_delay`, jittered with a draw from `random` (none
    /// without jitter).
    pub fn retry_wait(&self, random: &mut impl RandomBits) -> SimDuration {
        let delay = self.retry_delay.as_nanos();
        let nanos = match self.jitter {
            RetryJitter::None => delay,
            RetryJitter::Full => 1 + below(random, delay),
            RetryJitter::Equal => delay - delay / 2 + below(random, delay / 2 + 1),
        };
        SimDuration::from_nanos(nanos)
    }

    pub fn lease(&self) -> SimDuration {
        self.lease
    }

    pub fn retry_delay(&self) -> SimDuration {
        self.retry_delay
    }

    pub fn acquire_timeout(&self) -> SimDuration {
        self.acquire_timeout
    }
}

/// How a lock is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One holder, no readers (a writer).
    Exclusive,
    /// Any number of readers, no writer.
    Shared,
}

/// The value an acquire writes to the key, which only its holder knows: a release deletes the
/// key's holder only if it carries this token. A client's tokens are its namespace times
/// 2^[`LockToken::SERIAL_BITS`] plus a serial number, so clients of different namespaces never
/// write the same token (a real client writes a random UUID).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LockToken(u64);

impl LockToken {
    /// Bits of a token's serial number: 2^40 acquires per client.
    pub const SERIAL_BITS: u32 = 40;

    pub fn new(value: u64) -> Self {
        LockToken(value)
    }

    pub fn get(self) -> u64 {
        self.0
    }

    /// The namespace of the client that issued it.
    pub fn namespace(self) -> u32 {
        (self.0 >> Self::SERIAL_BITS) as u32
    }
}

/// One acquire in progress: kept by the caller between attempts.
#[derive(Debug, PartialEq, Eq)]
pub struct Acquiring {
    client: InstanceId,
    token: LockToken,
    mode: Mode,
    deadline: SimTime,
}

impl Acquiring {
    pub fn token(&self) -> LockToken {
        self.token
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn deadline(&self) -> SimTime {
        self.deadline
    }
}

/// The right and the duty to send one acquire command; its reply goes back to
/// [`LockClient::on_reply`], once.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "every attempt's reply must be reported"]
pub struct Attempt {
    client: InstanceId,
    token: LockToken,
}

/// A lock held: give it back with [`LockClient::release`]. Dropping it leaves the lock to its
/// lease.
#[derive(Debug, PartialEq, Eq)]
pub struct Held {
    client: InstanceId,
    token: LockToken,
    mode: Mode,
}

impl Held {
    pub fn token(&self) -> LockToken {
        self.token
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }
}

/// What the server answered an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttemptReply {
    Acquired,
    Busy,
    /// No answer: a timeout, a refused or lost connection, a server error.
    Failed,
}

/// What follows an attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum AttemptEnd {
    Held(Held),
    /// Taken: wait until `until`, then [`LockClient::wake`].
    Sleep {
        acquiring: Acquiring,
        until: SimTime,
    },
    /// Taken, and the deadline has passed.
    TimedOut,
    /// The command failed: the acquire ends with its error.
    Failed,
}

/// What follows a sleep.
#[derive(Debug, PartialEq, Eq)]
pub enum Wake {
    Attempt(Acquiring, Attempt),
    TimedOut,
}

/// What the server answered a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleaseReply {
    /// The holder with the token was deleted.
    Released,
    /// No holder carries the token (its lease expired, and maybe another took the lock).
    NotHolder,
    /// No answer: the lock is left to its lease.
    Failed,
}

/// A client's counts, for the report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockCounters {
    pub acquired: u64,
    /// Busy attempts followed by another attempt.
    pub busy_retries: u64,
    pub timed_out: u64,
    /// Acquires ended by a failed command.
    pub failed: u64,
    pub released: u64,
    /// Releases that found no holder with their token.
    pub release_refused: u64,
}

/// The client side of one lock: issues tokens and runs the acquire loops. See the module
/// documentation for the call order.
#[derive(Debug)]
pub struct LockClient {
    id: InstanceId,
    config: LockConfig,
    /// The high bits of every token it issues (at most 2^24 namespaces).
    namespace: u32,
    /// The serial number of the next token.
    next_serial: u64,
    counters: LockCounters,
}

impl LockClient {
    /// A client whose tokens are in `namespace` (below 2^24): give each client of a run its
    /// own, and tokens never collide on a shared key.
    pub fn new(config: LockConfig, namespace: u32) -> Self {
        assert!(
            namespace < 1 << (64 - LockToken::SERIAL_BITS),
            "lock token namespace {namespace} is too large"
        );
        LockClient {
            id: InstanceId::fresh(),
            config,
            namespace,
            next_serial: 1,
            counters: LockCounters::default(),
        }
    }

    pub fn config(&self) -> &LockConfig {
        &self.config
    }

    pub fn counters(&self) -> LockCounters {
        self.counters
    }

    /// Starts an acquire at `now` with a fresh token: send the first attempt now.
    pub fn begin(&mut self, now: SimTime, mode: Mode) -> (Acquiring, Attempt) {
        assert!(
            self.next_serial < 1 << LockToken::SERIAL_BITS,
            "a lock client ran out of tokens"
        );
        let token =
            LockToken(u64::from(self.namespace) << LockToken::SERIAL_BITS | self.next_serial);
        self.next_serial += 1;
        let acquiring = Acquiring {
            client: self.id,
            token,
            mode,
            deadline: now.saturating_add(self.config.acquire_timeout),
        };
        let attempt = Attempt {
            client: self.id,
            token,
        };
        (acquiring, attempt)
    }

    /// The reply to `attempt` came at `now`; `random` jitters the wait if the lock was taken.
    pub fn on_reply(
        &mut self,
        now: SimTime,
        acquiring: Acquiring,
        attempt: Attempt,
        reply: AttemptReply,
        random: &mut impl RandomBits,
    ) -> AttemptEnd {
        self.id
            .assert_issued(acquiring.client, "an acquire", "lock");
        self.id.assert_issued(attempt.client, "an attempt", "lock");
        assert_eq!(
            attempt.token, acquiring.token,
            "an attempt answers its own acquire"
        );
        match reply {
            AttemptReply::Acquired => {
                self.counters.acquired += 1;
                AttemptEnd::Held(Held {
                    client: self.id,
                    token: acquiring.token,
                    mode: acquiring.mode,
                })
            }
            AttemptReply::Failed => {
                self.counters.failed += 1;
                AttemptEnd::Failed
            }
            AttemptReply::Busy if now >= acquiring.deadline => {
                self.counters.timed_out += 1;
                AttemptEnd::TimedOut
            }
            AttemptReply::Busy => {
                self.counters.busy_retries += 1;
                let until = now
                    .saturating_add(self.config.retry_wait(random))
                    .min(acquiring.deadline);
                AttemptEnd::Sleep { acquiring, until }
            }
        }
    }

    /// The sleep after a busy attempt ended at `now`.
    pub fn wake(&mut self, now: SimTime, acquiring: Acquiring) -> Wake {
        self.id
            .assert_issued(acquiring.client, "an acquire", "lock");
        if now >= acquiring.deadline {
            self.counters.timed_out += 1;
            return Wake::TimedOut;
        }
        let attempt = Attempt {
            client: self.id,
            token: acquiring.token,
        };
        Wake::Attempt(acquiring, attempt)
    }

    /// Gives `held` back: send a compare-and-delete of its token, and report the reply to
    /// [`LockClient::on_released`].
    pub fn release(&mut self, held: Held) -> (LockToken, Mode) {
        self.id.assert_issued(held.client, "a held lock", "lock");
        (held.token, held.mode)
    }

    pub fn on_released(&mut self, reply: ReleaseReply) {
        match reply {
            ReleaseReply::Released => self.counters.released += 1,
            ReleaseReply::NotHolder => self.counters.release_refused += 1,
            ReleaseReply::Failed => {}
        }
    }
}

/// One holder of a key on the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    pub token: LockToken,
    /// The instant its lease ends (exclusive).
    pub expires_at: SimTime,
}

impl Holder {
    fn live(&self, now: SimTime) -> bool {
        now < self.expires_at
    }
}

/// The server's state of one lock key: a writer, or readers. See the module documentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LockKey {
    writer: Option<Holder>,
    readers: Vec<Holder>,
}

impl LockKey {
    /// An acquire of `mode` with `token` at `now`: true if it now holds the key for `lease`.
    /// Holders whose lease has ended are dropped first.
    pub fn try_acquire(
        &mut self,
        now: SimTime,
        mode: Mode,
        token: LockToken,
        lease: SimDuration,
    ) -> bool {
        self.drop_expired(now);
        let holder = Holder {
            token,
            expires_at: now.saturating_add(lease),
        };
        match mode {
            Mode::Exclusive if self.writer.is_none() && self.readers.is_empty() => {
                self.writer = Some(holder);
                true
            }
            Mode::Shared if self.writer.is_none() && self.readers.len() < READERS_MAX => {
                self.readers.push(holder);
                true
            }
            Mode::Exclusive | Mode::Shared => false,
        }
    }

    /// A compare-and-delete: removes the live holder carrying `token`, and returns it.
    pub fn release(&mut self, now: SimTime, token: LockToken) -> Option<Holder> {
        self.drop_expired(now);
        if self.writer.is_some_and(|writer| writer.token == token) {
            return self.writer.take();
        }
        let index = self.readers.iter().position(|r| r.token == token)?;
        Some(self.readers.swap_remove(index))
    }

    /// A plain `DEL`: removes every holder, whoever they are. What a naive release sends.
    pub fn delete(&mut self) {
        self.writer = None;
        self.readers.clear();
    }

    /// Removes the holder carrying `token` whatever its lease (its lease ended): returns it.
    pub fn expire(&mut self, token: LockToken) -> Option<Holder> {
        if self.writer.is_some_and(|writer| writer.token == token) {
            return self.writer.take();
        }
        let index = self.readers.iter().position(|r| r.token == token)?;
        Some(self.readers.swap_remove(index))
    }

    /// Removes one holder carrying `token` whose lease ends at `expires_at`, and returns it:
    /// `None` when there is none (that lease was released, or the key was taken again).
    pub fn expire_lease(&mut self, token: LockToken, expires_at: SimTime) -> Option<Holder> {
        let holder = Holder { token, expires_at };
        if self.writer == Some(holder) {
            return self.writer.take();
        }
        let index = self.readers.iter().position(|r| *r == holder)?;
        Some(self.readers.swap_remove(index))
    }

    /// How many holders carry `token` with a lease ending at `expires_at` (live or not).
    pub fn holding(&self, token: LockToken, expires_at: SimTime) -> usize {
        let holder = Holder { token, expires_at };
        usize::from(self.writer == Some(holder))
            + self.readers.iter().filter(|r| **r == holder).count()
    }

    /// An empty key that keeps `storage`'s room for its readers (see [`LockKey::into_storage`]):
    /// a server that frees and takes keys all the time allocates only while the most keys
    /// held at once grows.
    pub fn with_storage(mut storage: Vec<Holder>) -> LockKey {
        storage.clear();
        LockKey {
            writer: None,
            readers: storage,
        }
    }

    /// The room this key kept for its readers, emptied, for [`LockKey::with_storage`].
    pub fn into_storage(self) -> Vec<Holder> {
        let mut readers = self.readers;
        readers.clear();
        readers
    }

    fn drop_expired(&mut self, now: SimTime) {
        if self.writer.is_some_and(|writer| !writer.live(now)) {
            self.writer = None;
        }
        self.readers.retain(|reader| reader.live(now));
    }

    /// Live (writers, readers) at `now`: (1, 0), (0, n) or (0, 0).
    pub fn holders(&self, now: SimTime) -> (usize, usize) {
        let writers = usize::from(self.writer.is_some_and(|w| w.live(now)));
        let readers = self.readers.iter().filter(|r| r.live(now)).count();
        (writers, readers)
    }

    /// Whether nobody holds the key, live or not (its memory can go).
    pub fn is_empty(&self) -> bool {
        self.writer.is_none() && self.readers.is_empty()
    }
}

/// A lock key behind a mutex: each call is one command, atomic on the server. For threads, and
/// for loom.
#[derive(Debug, Default)]
pub struct SharedLockKey {
    key: Mutex<LockKey>,
}

impl SharedLockKey {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn try_acquire(
        &self,
        now: SimTime,
        mode: Mode,
        token: LockToken,
        lease: SimDuration,
    ) -> bool {
        lock(&self.key).try_acquire(now, mode, token, lease)
    }

    /// Compare-and-delete.
    pub fn release(&self, now: SimTime, token: LockToken) -> bool {
        lock(&self.key).release(now, token).is_some()
    }

    /// Plain `DEL`.
    pub fn delete(&self) {
        lock(&self.key).delete();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::random::SplitMix64;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    fn d(millis: u64) -> SimDuration {
        SimDuration::from_millis(millis)
    }

    fn config(lease: u64, retry_delay: u64, acquire_timeout: u64) -> LockConfig {
        LockConfig::new(d(lease), d(retry_delay), d(acquire_timeout)).unwrap()
    }

    #[test]
    fn absurd_configs_are_refused_at_their_field() {
        let check = |lease, retry, timeout, field: &str| {
            let error = LockConfig::new(d(lease), d(retry), d(timeout)).unwrap_err();
            assert_eq!(error.field, field, "{error}");
        };
        check(0, 50, 200, "lease");
        check(1000, 0, 200, "retry_delay");
        check(1000, 300, 200, "retry_delay");
        assert!(LockConfig::new(d(1), d(200), d(200)).is_ok());
    }

    /// A step of the client's loop, for [`check_loop`]: a reply at `ms`, or a wake at `ms`.
    enum Event {
        Reply(u64, AttemptReply),
        Wake(u64),
    }

    /// Drives one acquire begun at `begin_ms` through `events`; returns what each ended as.
    fn check_loop(config: LockConfig, begin_ms: u64, events: &[Event], expected: &[&str]) {
        let mut client = LockClient::new(config, 0);
        let (acquiring, attempt) = client.begin(ms(begin_ms), Mode::Exclusive);
        let mut state = Some((acquiring, Some(attempt)));
        let mut seen = Vec::new();
        for event in events {
            let (acquiring, attempt) = state.take().expect("the loop has ended");
            match *event {
                Event::Reply(at, reply) => {
                    let attempt = attempt.expect("an attempt in flight");
                    match client.on_reply(ms(at), acquiring, attempt, reply, &mut SplitMix64(0)) {
                        AttemptEnd::Held(held) => seen.push(format!("held {}", held.token().get())),
                        AttemptEnd::Sleep { acquiring, until } => {
                            seen.push(format!("sleep until {}", until.as_nanos() / 1_000_000));
                            state = Some((acquiring, None));
                        }
                        AttemptEnd::TimedOut => seen.push("timed out".into()),
                        AttemptEnd::Failed => seen.push("failed".into()),
                    }
                }
                Event::Wake(at) => {
                    assert!(attempt.is_none(), "a wake while an attempt is in flight");
                    match client.wake(ms(at), acquiring) {
                        Wake::Attempt(acquiring, attempt) => {
                            seen.push("attempt".into());
                            state = Some((acquiring, Some(attempt)));
                        }
                        Wake::TimedOut => seen.push("timed out".into()),
                    }
                }
            }
        }
        assert_eq!(seen, expected);
    }

    #[test]
    fn a_free_lock_is_held_at_the_first_reply() {
        check_loop(
            config(30_000, 50, 200),
            0,
            &[Event::Reply(1, AttemptReply::Acquired)],
            &["held 1"],
        );
    }

    #[test]
    fn a_taken_lock_is_retried_every_delay_and_times_out_at_the_deadline() {
        // retry_delay 50 ms, acquire_timeout 200 ms, a 1 ms round trip: attempts at 0, 51,
        // 102, 153; the sleep after the busy reply at 154 is cut to the deadline, 200.
        use AttemptReply::Busy;
        check_loop(
            config(30_000, 50, 200),
            0,
            &[
                Event::Reply(1, Busy),
                Event::Wake(51),
                Event::Reply(52, Busy),
                Event::Wake(102),
                Event::Reply(103, Busy),
                Event::Wake(153),
                Event::Reply(154, Busy),
                Event::Wake(200),
            ],
            &[
                "sleep until 51",
                "attempt",
                "sleep until 102",
                "attempt",
                "sleep until 153",
                "attempt",
                "sleep until 200",
                "timed out",
            ],
        );
    }

    #[test]
    fn a_busy_reply_after_the_deadline_times_out_at_once_and_a_late_acquire_holds() {
        use AttemptReply::{Acquired, Busy};
        check_loop(
            config(30_000, 50, 200),
            0,
            &[Event::Reply(250, Busy)],
            &["timed out"],
        );
        check_loop(
            config(30_000, 50, 200),
            0,
            &[Event::Reply(250, Acquired)],
            &["held 1"],
        );
    }

    #[test]
    fn a_failed_attempt_ends_the_acquire_with_its_error() {
        use AttemptReply::{Busy, Failed};
        check_loop(
            config(30_000, 50, 200),
            10,
            &[
                Event::Reply(11, Busy),
                Event::Wake(61),
                Event::Reply(62, Failed),
            ],
            &["sleep until 61", "attempt", "failed"],
        );
    }

    #[test]
    fn counters_follow_the_loop_and_tokens_are_fresh() {
        let mut client = LockClient::new(config(1000, 50, 100), 3);
        let (first, attempt) = client.begin(ms(0), Mode::Shared);
        let AttemptEnd::Sleep { acquiring, .. } = client.on_reply(
            ms(1),
            first,
            attempt,
            AttemptReply::Busy,
            &mut SplitMix64(0),
        ) else {
            panic!("busy before the deadline sleeps");
        };
        assert_eq!(client.wake(ms(100), acquiring), Wake::TimedOut);
        let (second, attempt) = client.begin(ms(200), Mode::Shared);
        let second_token = second.token();
        assert_eq!(second.token(), LockToken(3 << 40 | 2));
        assert_eq!(second.token().namespace(), 3);
        let AttemptEnd::Held(held) = client.on_reply(
            ms(201),
            second,
            attempt,
            AttemptReply::Acquired,
            &mut SplitMix64(0),
        ) else {
            panic!("acquired holds");
        };
        assert_eq!(client.release(held), (second_token, Mode::Shared));
        client.on_released(ReleaseReply::NotHolder);
        assert_eq!(
            client.counters(),
            LockCounters {
                acquired: 1,
                busy_retries: 1,
                timed_out: 1,
                failed: 0,
                released: 0,
                release_refused: 1,
            }
        );
    }

    #[test]
    #[should_panic(expected = "a held lock was handed back to a lock that did not issue it")]
    fn a_lock_held_from_another_client_panics() {
        let mut one = LockClient::new(config(1000, 50, 100), 3);
        let mut other = LockClient::new(config(1000, 50, 100), 3);
        let (acquiring, attempt) = one.begin(ms(0), Mode::Exclusive);
        let AttemptEnd::Held(held) = one.on_reply(
            ms(1),
            acquiring,
            attempt,
            AttemptReply::Acquired,
            &mut SplitMix64(0),
        ) else {
            panic!("acquired holds");
        };
        let _ = other.release(held);
    }

    #[test]
    fn jittered_waits_stay_in_their_range_and_are_never_zero() {
        let config = config(1000, 50, 200);
        let mut random = SplitMix64(7);
        let waits = |jitter, random: &mut SplitMix64| {
            let config = config.with_jitter(jitter);
            (0..1000)
                .map(|_| config.retry_wait(random).as_nanos())
                .collect::<Vec<u64>>()
        };
        assert!(
            waits(RetryJitter::None, &mut random)
                .iter()
                .all(|&w| w == 50_000_000)
        );
        let full = waits(RetryJitter::Full, &mut random);
        assert!(full.iter().all(|&w| (1..=50_000_000).contains(&w)));
        assert!(
            full.iter().any(|&w| w < 25_000_000),
            "full jitter spans the range"
        );
        let equal = waits(RetryJitter::Equal, &mut random);
        assert!(
            equal
                .iter()
                .all(|&w| (25_000_000..=50_000_000).contains(&w))
        );
        // The smallest delay: full jitter still waits 1 ns, equal jitter 1 ns.
        let tiny = LockConfig::new(d(1000), SimDuration::from_nanos(1), d(200)).unwrap();
        for jitter in [RetryJitter::Full, RetryJitter::Equal] {
            assert_eq!(
                tiny.with_jitter(jitter).retry_wait(&mut random).as_nanos(),
                1
            );
        }
    }

    fn t(value: u64) -> LockToken {
        LockToken(value)
    }

    #[test]
    fn writers_exclude_everyone_and_readers_exclude_writers() {
        let (ex, sh) = (Mode::Exclusive, Mode::Shared);
        let mut key = LockKey::default();
        assert!(key.try_acquire(ms(0), ex, t(1), d(100)));
        assert!(!key.try_acquire(ms(10), ex, t(2), d(100)), "two writers");
        assert!(
            !key.try_acquire(ms(10), sh, t(3), d(100)),
            "a reader with a writer"
        );
        assert_eq!(key.holders(ms(10)), (1, 0));
        assert!(key.release(ms(20), t(1)).is_some());
        assert!(key.try_acquire(ms(30), sh, t(4), d(100)));
        assert!(key.try_acquire(ms(40), sh, t(5), d(100)));
        assert_eq!(key.holders(ms(40)), (0, 2));
        assert!(
            !key.try_acquire(ms(50), ex, t(6), d(100)),
            "a writer with readers"
        );
        // The first reader's lease ends at 130, the second's at 140: then a writer gets in.
        assert!(!key.try_acquire(ms(135), ex, t(7), d(100)));
        assert!(key.try_acquire(ms(140), ex, t(8), d(100)));
    }

    #[test]
    fn compare_and_delete_spares_a_successor_and_plain_del_does_not() {
        let ex = Mode::Exclusive;
        let mut key = LockKey::default();
        assert!(key.try_acquire(ms(0), ex, t(1), d(100)));
        // The lease ends at 100; another takes the lock; the first holder releases late.
        assert!(key.try_acquire(ms(100), ex, t(2), d(100)));
        assert_eq!(
            key.release(ms(150), t(1)),
            None,
            "the successor's lock is kept"
        );
        assert_eq!(key.holders(ms(150)), (1, 0));
        key.delete();
        assert_eq!(
            key.holders(ms(150)),
            (0, 0),
            "a plain DEL frees the successor's lock"
        );
        assert!(key.is_empty());
    }

    #[test]
    fn expire_removes_one_holder_and_readers_are_capped() {
        let sh = Mode::Shared;
        let mut key = LockKey::default();
        for token in 0..READERS_MAX as u64 {
            assert!(key.try_acquire(ms(0), sh, t(token), d(100)));
        }
        assert!(
            !key.try_acquire(ms(0), sh, t(u64::MAX), d(100)),
            "over the cap"
        );
        assert_eq!(key.expire(t(7)).map(|h| h.token), Some(t(7)));
        assert_eq!(key.expire(t(7)), None);
        assert_eq!(key.holders(ms(0)), (0, READERS_MAX - 1));
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::{Arc, AtomicBool, AtomicU32, Ordering};

    const LEASE: SimDuration = SimDuration::from_millis(100);
    /// When the first holder's lease has ended.
    const AT: SimTime = SimTime::from_nanos(100_000_000);

    /// Token 1 took the lock at 0 with a 100 ms lease and is late: at 100 its lease has ended.
    /// Its holder releases (with `release`) while two others each try to take the lock at 100
    /// and, if they get it, hold it a moment and give it back with a compare-and-delete.
    /// Returns whether two held the lock at once.
    fn late_release_races_two_acquires(release: fn(&SharedLockKey)) -> bool {
        let key = Arc::new(SharedLockKey::new());
        assert!(key.try_acquire(SimTime::ZERO, Mode::Exclusive, LockToken(1), LEASE));
        let at = AT;
        let holders = Arc::new(AtomicU32::new(0));
        let two_at_once = Arc::new(AtomicBool::new(false));
        let late = {
            let key = key.clone();
            loom::thread::spawn(move || release(&key))
        };
        let takers: Vec<_> = (2..4)
            .map(|token| {
                let (key, holders, two_at_once) =
                    (key.clone(), holders.clone(), two_at_once.clone());
                loom::thread::spawn(move || {
                    if key.try_acquire(at, Mode::Exclusive, LockToken(token), LEASE) {
                        if holders.fetch_add(1, Ordering::SeqCst) + 1 > 1 {
                            two_at_once.store(true, Ordering::SeqCst);
                        }
                        holders.fetch_sub(1, Ordering::SeqCst);
                        key.release(at, LockToken(token));
                    }
                })
            })
            .collect();
        late.join().unwrap();
        for taker in takers {
            taker.join().unwrap();
        }
        two_at_once.load(Ordering::SeqCst)
    }

    /// With a compare-and-delete, the late release finds its token gone and deletes nothing:
    /// whatever the interleaving, one holder at a time.
    #[test]
    fn loom_lock_compare_and_delete_keeps_one_holder() {
        crate::sync::loom_model(|| {
            let two = late_release_races_two_acquires(|key| {
                key.release(AT, LockToken(1));
            });
            assert!(!two, "two holders at once");
        });
    }

    /// With a plain `DEL`, loom must find the interleaving where the late holder deletes its
    /// successor's lock and a third takes it while the successor still holds it; and also
    /// executions where it does not happen. Fails if loom stops finding the counterexample.
    #[test]
    fn loom_lock_plain_del_release_lets_two_hold() {
        let (executions, two) = crate::sync::loom_count_executions(2, || {
            late_release_races_two_acquires(SharedLockKey::delete)
        });
        assert!(
            two > 0,
            "loom found no two holders in {executions} executions"
        );
        assert!(
            two < executions,
            "every one of {executions} executions had two holders"
        );
    }

    /// Two readers and a writer, each taking the lock once and giving it back: a writer is
    /// never inside with a reader.
    #[test]
    fn loom_lock_readers_and_a_writer_exclude_each_other() {
        crate::sync::loom_model(|| {
            let key = Arc::new(SharedLockKey::new());
            let (readers, writers) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
            let threads: Vec<_> = [Mode::Shared, Mode::Shared, Mode::Exclusive]
                .into_iter()
                .zip(1..)
                .map(|(mode, token)| {
                    let (key, readers, writers) = (key.clone(), readers.clone(), writers.clone());
                    loom::thread::spawn(move || {
                        let token = LockToken(token);
                        if !key.try_acquire(SimTime::ZERO, mode, token, LEASE) {
                            return;
                        }
                        let (mine, others) = match mode {
                            Mode::Shared => (&readers, &writers),
                            Mode::Exclusive => (&writers, &readers),
                        };
                        mine.fetch_add(1, Ordering::SeqCst);
                        assert_eq!(others.load(Ordering::SeqCst), 0, "a reader with a writer");
                        mine.fetch_sub(1, Ordering::SeqCst);
                        assert!(key.release(SimTime::ZERO, token));
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
        });
    }
}

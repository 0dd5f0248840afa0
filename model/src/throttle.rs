//! Cascade throttle (seed 004): at most `inflight_max` cascades in flight per space, counted in
//! a store under one key per space (`inflight:{space}`). A request that finds the counter at the
//! cap is rejected with HTTP 429 and `Retry-After: 1`.
//!
//! Three forms, so that a design review can put them side by side:
//!
//! 1. [`AtomicThrottle`]: check-and-increment in one step (a Redis script, a Durable Object).
//!    With [`CounterTtl::Never`] it never admits more than the cap.
//! 2. [`KvThrottle`] over a [`KvStore`]: the plan as written. An acquire reads the counter and,
//!    if it is below the cap, writes counter + 1; a release reads and writes counter - 1, fire
//!    and forget. The read and the write are separate steps the caller performs, so the
//!    simulator can put latency between them and run other requests' steps in between; the
//!    store may also answer a read from a replica that lags behind (eventual consistency).
//! 3. Counter expiry ([`CounterTtl`]), which applies to both forms above: every write sets a TTL
//!    as a safety net for crashed workers, either once when the counter is created
//!    ([`CounterTtl::FixedAtCreation`]) or again on every write
//!    ([`CounterTtl::RefreshedOnWrite`], the plan's "TTL 60s on every KV write").
//!
//! What the forms let a review check (each is a test below):
//! - two read-then-increment acquires that read the same value both write value + 1: with the
//!   counter at 9 and a cap of 10, both are admitted and 11 cascades hold a slot;
//! - a stale read admits over the cap the same way;
//! - an acquire that interleaves with a release erases the decrement: a slot leaks although no
//!   release was lost;
//! - a lost decrement leaks a slot; a refreshed TTL under steady traffic never expires, so the
//!   leak is permanent; a fixed TTL frees it, but also frees every slot still held, so right
//!   after expiry up to twice the cap run at once;
//! - a refreshed TTL also expires under a cascade that outlives it with no other write (the
//!   seed's p99 lock wait of 203 s is longer than the 60 s TTL);
//! - a deferred cascade releases its slot when the handler returns
//!   ([`AtomicThrottle::release_early`], [`KvThrottle::release_early`]), so more than the cap
//!   of cascades run.
//!
//! Holders are counted separately from the stored counter ([`ThrottleStats`]): `holders` is the
//! true number of admitted slots not yet released, whatever the counter says, so
//! over-admission shows as `holders_peak > inflight_max`, and [`AtomicThrottle::drift`] /
//! [`KvThrottle::drift`] give `counter - holders` (positive: leaked slots; negative: holders the
//! counter does not see).
//!
//! Concurrent forms for threads, checked by loom: [`SharedAtomicThrottle`] (a compare-and-swap
//! loop on one atomic) and [`SharedKvThrottle`] (a mutex-guarded [`KvStore`] whose get and put
//! are separate critical sections, so the race is between the two calls). Every form decides
//! with the same two functions of the counter value it read (`decide_acquire` and
//! `decide_release` of [`ThrottleConfig`]), so what loom checks is what the simulator drives.
//!
//! Invariants of every form:
//! - `now` never goes backwards between calls. The store ([`KvStore`]) takes an earlier `now`
//!   as the latest it has seen ([`LatestTime`]): threads of [`SharedKvThrottle`] that read a
//!   clock and then race for the store's lock arrive out of order through no fault of their
//!   own. The sans-IO throttles ([`AtomicThrottle`], [`KvThrottle`]) do the same, and also
//!   `debug_assert!` it, since there a backwards `now` can only be a bug of the one caller
//!   that drives them;
//! - every [`Slot`] is released exactly once (`Slot` cannot be copied or cloned), and only to
//!   the throttle that issued it: a slot, a pending acquire or release, or deferred work handed
//!   to another throttle panics (a real `assert!`);
//! - the stored counter never goes below zero: a decrement of zero (for example after the
//!   counter expired) writes zero.

use std::collections::{BTreeMap, VecDeque};

use crate::config::ConfigError;
use crate::instance::InstanceId;
use crate::sync::{AtomicU32, Mutex, Ordering, lock};
use crate::time::{LatestTime, SimDuration, SimTime};

/// When the stored counter expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CounterTtl {
    /// The counter never expires (a Durable Object without an alarm): a leaked slot stays
    /// leaked forever, and nothing ever frees slots that are still held.
    Never,
    /// The write that creates the counter sets the expiry to creation + TTL, and later writes
    /// keep it: every write is [`Expiry::Keep`], which the store resolves against the version
    /// live when the put lands (Redis `SET ... KEEPTTL` followed by `EXPIRE ... NX`). A write
    /// that lands after the counter expired creates it afresh, whatever its writer read. The
    /// counter disappears that long after creation whatever the traffic, which frees leaked
    /// slots and held ones alike.
    FixedAtCreation(SimDuration),
    /// Every write sets the expiry to write + TTL (the plan: "TTL 60s on every KV write"). The
    /// counter lives as long as some write comes at least once per TTL.
    RefreshedOnWrite(SimDuration),
}

impl CounterTtl {
    /// The TTL, if the counter expires at all.
    pub fn ttl(self) -> Option<SimDuration> {
        match self {
            CounterTtl::Never => None,
            CounterTtl::FixedAtCreation(ttl) | CounterTtl::RefreshedOnWrite(ttl) => Some(ttl),
        }
    }

    /// The expiry every write of the counter carries. It does not depend on what the writer
    /// read: a fixed TTL is kept by the store, from the version live when the put lands.
    fn write_expiry(self) -> Expiry {
        match self {
            CounterTtl::Never => Expiry::Never,
            CounterTtl::RefreshedOnWrite(ttl) => Expiry::After(ttl),
            CounterTtl::FixedAtCreation(ttl) => Expiry::Keep { or_after: ttl },
        }
    }
}

/// A validated throttle configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThrottleConfig {
    inflight_max: u32,
    retry_after: SimDuration,
    counter_ttl: CounterTtl,
    kv_staleness_max: SimDuration,
}

impl ThrottleConfig {
    /// At most `inflight_max` slots per key; a rejection tells the client to come back after
    /// `retry_after`; the counter expires as `counter_ttl` says; a read of the KV form may lag
    /// up to `kv_staleness_max` behind the latest write (zero: every read is up to date).
    ///
    /// The plan: `ThrottleConfig::new(10, 1 s, CounterTtl::RefreshedOnWrite(60 s), 0)`.
    pub fn new(
        inflight_max: u32,
        retry_after: SimDuration,
        counter_ttl: CounterTtl,
        kv_staleness_max: SimDuration,
    ) -> Result<Self, ConfigError> {
        if inflight_max == 0 {
            return Err(ConfigError::new(
                "inflight_max",
                "must be at least 1 (a cap of zero rejects every write)",
            ));
        }
        if retry_after.is_zero() {
            return Err(ConfigError::new(
                "retry_after",
                "must be longer than zero (a Retry-After of zero sends every rejected client \
                 straight back)",
            ));
        }
        if !retry_after
            .as_nanos()
            .is_multiple_of(SimDuration::from_secs(1).as_nanos())
        {
            return Err(ConfigError::new(
                "retry_after",
                format!(
                    "{retry_after} is not a whole number of seconds (the Retry-After header \
                     carries whole seconds)"
                ),
            ));
        }
        if let Some(ttl) = counter_ttl.ttl() {
            if ttl.is_zero() {
                return Err(ConfigError::new(
                    "counter_ttl",
                    "must be longer than zero (a counter that expires as it is written never \
                     counts anything)",
                ));
            }
            if kv_staleness_max > ttl {
                return Err(ConfigError::new(
                    "kv_staleness_max",
                    format!(
                        "{kv_staleness_max} is longer than counter_ttl {ttl} (a read that far \
                         behind could miss a counter for its whole life)"
                    ),
                ));
            }
        }
        Ok(ThrottleConfig {
            inflight_max,
            retry_after,
            counter_ttl,
            kv_staleness_max,
        })
    }

    pub fn inflight_max(&self) -> u32 {
        self.inflight_max
    }

    pub fn retry_after(&self) -> SimDuration {
        self.retry_after
    }

    pub fn counter_ttl(&self) -> CounterTtl {
        self.counter_ttl
    }

    pub fn kv_staleness_max(&self) -> SimDuration {
        self.kv_staleness_max
    }

    /// The check every form makes on the counter value it read (0 when the counter is absent
    /// or expired): the value to write, or the rejection.
    fn decide_acquire(&self, value: u64) -> Result<u64, Rejection> {
        if value >= u64::from(self.inflight_max) {
            Err(Rejection {
                retry_after: self.retry_after,
                counter_seen: value,
            })
        } else {
            Ok(value + 1)
        }
    }

    /// The decrement every form writes: the value read minus one, never below zero.
    fn decide_release(&self, value: u64) -> u64 {
        value.saturating_sub(1)
    }
}

/// The right to one slot. Give it back exactly once, to the throttle that issued it:
/// `release`, `release_early` or (to model a decrement that never lands) the form's
/// `lose_release`.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a slot that is never released leaks throttle capacity"]
pub struct Slot {
    /// The throttle that issued it.
    owner: InstanceId,
}

/// A rejected acquire: answer 429 with `Retry-After: retry_after`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub retry_after: SimDuration,
    /// The counter value the acquire read (at least the cap).
    pub counter_seen: u64,
}

impl Rejection {
    /// The HTTP status of the rejection (Too Many Requests).
    pub const STATUS: u16 = 429;
}

/// The answer of a one-step acquire.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    Admit(Slot),
    Reject(Rejection),
}

/// Work (a deferred cascade) that goes on after its slot was released. Hand it to the form's
/// `end_deferred` when the work finishes.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "deferred work counts as running until end_deferred"]
pub struct DeferredWork {
    /// The throttle whose slot it held.
    owner: InstanceId,
}

/// What the throttle has seen, for reports. Holders are counted from the slots handed out and
/// given back, never from the stored counter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThrottleStats {
    pub admitted: u64,
    pub rejected: u64,
    /// Slots admitted and not yet released: the true number of holders.
    pub holders: u64,
    /// The most `holders` there have been at once; above the cap means over-admission.
    pub holders_peak: u64,
    /// Work whose slot was released early ([`DeferredWork`]) and that has not ended.
    pub deferred_running: u64,
    /// The most `holders + deferred_running` there have been at once: cascades actually running.
    pub running_peak: u64,
    /// Releases the caller dropped (the decrement never landed): slots leaked, cumulative.
    /// Whether a leak still blocks admission is what `drift` shows.
    pub releases_lost: u64,
}

impl ThrottleStats {
    /// Cascades running now: slots held plus deferred work whose slot was released.
    pub fn running(&self) -> u64 {
        self.holders + self.deferred_running
    }
}

/// The bookkeeping both sans-IO forms share.
#[derive(Clone, Debug)]
struct Ledger {
    /// Stamped into every token the throttle issues, checked when one comes back.
    id: InstanceId,
    stats: ThrottleStats,
    latest: LatestTime,
}

impl Ledger {
    fn new() -> Self {
        Ledger {
            id: InstanceId::fresh(),
            stats: ThrottleStats::default(),
            latest: LatestTime::new(),
        }
    }

    /// Takes `now` into account and returns the instant to use: the latest seen. The one
    /// caller of a sans-IO throttle never goes backwards, so a `now` earlier than the latest
    /// is its bug (asserted in debug builds); in release builds it is read as the latest.
    fn observe(&mut self, now: SimTime) -> SimTime {
        debug_assert!(
            now >= self.latest.get(),
            "time went backwards: {now} after {}",
            self.latest.get()
        );
        self.latest.observe(now)
    }

    /// Panics unless this throttle issued a token stamped `owner`.
    #[track_caller]
    fn check_owner(&self, owner: InstanceId, token: &str) {
        self.id.assert_issued(owner, token, "throttle");
    }

    fn admit(&mut self) -> Slot {
        let stats = &mut self.stats;
        stats.admitted += 1;
        stats.holders += 1;
        stats.holders_peak = stats.holders_peak.max(stats.holders);
        stats.running_peak = stats.running_peak.max(stats.running());
        Slot { owner: self.id }
    }

    fn reject(&mut self, rejection: Rejection) -> Rejection {
        self.stats.rejected += 1;
        rejection
    }

    fn end_holder(&mut self, slot: Slot) {
        self.check_owner(slot.owner, "a slot");
        assert!(
            self.stats.holders > 0,
            "released more slots than were admitted"
        );
        self.stats.holders -= 1;
    }

    fn defer(&mut self) -> DeferredWork {
        self.stats.deferred_running += 1;
        DeferredWork { owner: self.id }
    }

    fn end_deferred(&mut self, work: DeferredWork) {
        self.check_owner(work.owner, "deferred work");
        assert!(
            self.stats.deferred_running > 0,
            "ended more deferred work than was deferred"
        );
        self.stats.deferred_running -= 1;
    }

    fn drift(&self, counter: u64) -> i64 {
        counter as i64 - self.stats.holders as i64
    }
}

/// The key of one counter: `inflight:{space}` in the plan; the simulator uses the space's
/// number.
pub type KvKey = u64;

/// How long a written value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    Never,
    /// `ttl` after the put is applied (KV `expirationTtl`).
    After(SimDuration),
    /// At this instant (KV `expiration`); an instant already past makes the value invisible at
    /// once.
    At(SimTime),
    /// The expiry of the version live when the put is applied (Redis `SET ... KEEPTTL`), or,
    /// if no version is live then (the key is absent or has expired), `or_after` after the put
    /// (`EXPIRE ... NX`), since the write creates the key afresh. Resolved by
    /// [`KvStore::put`] against the store's newest version, never against what the writer
    /// read: a put that lands after the key expired and was created again keeps the new
    /// key's expiry instead of writing an expiry that has already passed.
    ///
    /// (A bare `KEEPTTL` on an absent key would make it persistent; for a counter whose TTL is
    /// a safety net against leaks, that would turn a fixed TTL into no TTL, so this variant
    /// does not model it.)
    Keep {
        or_after: SimDuration,
    },
}

/// A value as a read returned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stored {
    pub value: u64,
    pub written_at: SimTime,
    /// [`SimTime::MAX`] for a value that never expires.
    pub expires_at: SimTime,
}

/// A put the throttle asks for; the caller applies it with [`KvStore::apply`] when it lands, or
/// never (a failed put).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use = "a write that is never applied is a lost update"]
pub struct Write {
    pub key: KvKey,
    pub value: u64,
    pub expiry: Expiry,
}

/// A sans-IO key-value store with expiring values and, optionally, stale reads.
///
/// A read that lags `lag` behind returns exactly what an up-to-date read would have returned at
/// `now - lag`: the last value written at or before that instant, unless it had expired by
/// then. `lag` is chosen by the caller (the simulator draws it from its own random stream) and
/// is at most `staleness_max`; `lag = 0` is an up-to-date read. Two reads may see versions out of
/// order, as replicas of an eventually consistent store do.
///
/// Invariants:
/// - `now` never goes backwards across `get` and `put`: an earlier `now` is taken as the
///   latest seen ([`LatestTime`]), since threads sharing a store (as [`SharedKvThrottle`]'s
///   do) read their clocks before they take its lock, and so arrive out of order without any
///   bug. Nothing is asserted here;
/// - per key, versions are held in write order, and only the versions some future read could
///   still return: the newest one written at or before `now - staleness_max` and every later
///   one. So a key holds at most 1 + (writes in the last `staleness_max`) versions.
#[derive(Clone, Debug)]
pub struct KvStore {
    staleness_max: SimDuration,
    keys: BTreeMap<KvKey, VecDeque<Stored>>,
    latest: LatestTime,
    writes_total: u64,
}

impl KvStore {
    /// A store whose reads may lag up to `staleness_max` (use the throttle config's
    /// `kv_staleness_max`).
    pub fn new(staleness_max: SimDuration) -> Self {
        KvStore {
            staleness_max,
            keys: BTreeMap::new(),
            latest: LatestTime::new(),
            writes_total: 0,
        }
    }

    pub fn staleness_max(&self) -> SimDuration {
        self.staleness_max
    }

    /// Reads `key` as a replica `lag` behind the latest write would. Panics if `lag` is more
    /// than `staleness_max`. A `now` earlier than the latest the store has seen reads as that
    /// latest instant.
    pub fn get(&self, now: SimTime, key: KvKey, lag: SimDuration) -> Option<Stored> {
        let now = self.latest.at(now);
        assert!(
            lag <= self.staleness_max,
            "a read {lag} behind, more than the store's staleness_max {}",
            self.staleness_max
        );
        let as_of = SimTime::from_nanos(now.as_nanos().saturating_sub(lag.as_nanos()));
        self.keys
            .get(&key)?
            .iter()
            .rev()
            .find(|version| version.written_at <= as_of)
            .filter(|version| as_of < version.expires_at)
            .copied()
    }

    /// Writes `value` under `key`, replacing what a later read sees. The put is applied at
    /// `now`, or at the latest instant the store has seen if `now` is earlier; that is also the
    /// instant [`Expiry::After`] counts from and [`Expiry::Keep`] is resolved at.
    pub fn put(&mut self, now: SimTime, key: KvKey, value: u64, expiry: Expiry) {
        let now = self.latest.observe(now);
        self.writes_total += 1;
        let versions = self.keys.entry(key).or_default();
        let expires_at = match expiry {
            Expiry::Never => SimTime::MAX,
            Expiry::After(ttl) => now.saturating_add(ttl),
            Expiry::At(at) => at,
            Expiry::Keep { or_after } => match versions.back() {
                Some(live) if now < live.expires_at => live.expires_at,
                _ => now.saturating_add(or_after),
            },
        };
        versions.push_back(Stored {
            value,
            written_at: now,
            expires_at,
        });
        // Every future read sees the store as of `horizon` or later, so a version followed by
        // one written at or before the horizon can never be returned again.
        let horizon =
            SimTime::from_nanos(now.as_nanos().saturating_sub(self.staleness_max.as_nanos()));
        while versions.len() >= 2 && versions[1].written_at <= horizon {
            versions.pop_front();
        }
    }

    /// Applies a write the throttle asked for.
    pub fn apply(&mut self, now: SimTime, write: Write) {
        self.put(now, write.key, write.value, write.expiry);
    }

    /// Versions held for `key` (see the bound in the type's documentation).
    pub fn versions_held(&self, key: KvKey) -> usize {
        self.keys.get(&key).map_or(0, VecDeque::len)
    }

    pub fn writes_total(&self) -> u64 {
        self.writes_total
    }
}

/// Form 1: check-and-increment in one step.
///
/// Call order: [`AtomicThrottle::try_acquire`]; for every [`Decision::Admit`] exactly one of
/// [`AtomicThrottle::release`], [`AtomicThrottle::release_early`] (then
/// [`AtomicThrottle::end_deferred`] when the deferred work ends) or
/// [`AtomicThrottle::lose_release`].
///
/// Invariant: with [`CounterTtl::Never`] and no lost release, `holders <= inflight_max` and
/// the counter equals `holders`. An expiring counter can drop to zero under slots still held,
/// after which up to another `inflight_max` are admitted.
#[derive(Clone, Debug)]
pub struct AtomicThrottle {
    config: ThrottleConfig,
    /// The counter, as a store with one key and up-to-date reads.
    counter: KvStore,
    ledger: Ledger,
}

/// The key of an [`AtomicThrottle`]'s own counter.
const ATOMIC_KEY: KvKey = 0;

impl AtomicThrottle {
    pub fn new(config: ThrottleConfig) -> Self {
        AtomicThrottle {
            config,
            counter: KvStore::new(SimDuration::ZERO),
            ledger: Ledger::new(),
        }
    }

    pub fn config(&self) -> &ThrottleConfig {
        &self.config
    }

    pub fn stats(&self) -> ThrottleStats {
        self.ledger.stats
    }

    /// Reads, checks and increments the counter in one step.
    pub fn try_acquire(&mut self, now: SimTime) -> Decision {
        let now = self.ledger.observe(now);
        match self.config.decide_acquire(self.counter(now)) {
            Ok(value) => {
                let expiry = self.config.counter_ttl.write_expiry();
                self.counter.put(now, ATOMIC_KEY, value, expiry);
                Decision::Admit(self.ledger.admit())
            }
            Err(rejection) => Decision::Reject(self.ledger.reject(rejection)),
        }
    }

    /// The holder is done and its decrement lands. Panics if another throttle issued `slot`.
    pub fn release(&mut self, now: SimTime, slot: Slot) {
        let now = self.ledger.observe(now);
        self.ledger.end_holder(slot);
        let value = self.config.decide_release(self.counter(now));
        let expiry = self.config.counter_ttl.write_expiry();
        self.counter.put(now, ATOMIC_KEY, value, expiry);
    }

    /// The slot is released now but the work goes on (a deferred cascade: the handler returned
    /// before the cascade ran). The work counts in `running` until
    /// [`AtomicThrottle::end_deferred`].
    pub fn release_early(&mut self, now: SimTime, slot: Slot) -> DeferredWork {
        self.release(now, slot);
        self.ledger.defer()
    }

    /// Deferred work finished.
    pub fn end_deferred(&mut self, work: DeferredWork) {
        self.ledger.end_deferred(work);
    }

    /// The holder is done but its decrement never lands (a fire-and-forget release that was
    /// dropped): the slot leaks until the counter expires, if it ever does.
    pub fn lose_release(&mut self, slot: Slot) {
        self.ledger.end_holder(slot);
        self.ledger.stats.releases_lost += 1;
    }

    /// The stored counter (zero once it expired).
    pub fn counter(&self, now: SimTime) -> u64 {
        self.read(now).map_or(0, |stored| stored.value)
    }

    /// `counter - holders`: positive for leaked slots, negative for holders the counter lost.
    pub fn drift(&self, now: SimTime) -> i64 {
        self.ledger.drift(self.counter(now))
    }

    /// When the counter expires, if it exists and expires at all.
    pub fn counter_expires_at(&self, now: SimTime) -> Option<SimTime> {
        self.read(now)
            .map(|stored| stored.expires_at)
            .filter(|&at| at != SimTime::MAX)
    }

    fn read(&self, now: SimTime) -> Option<Stored> {
        self.counter.get(now, ATOMIC_KEY, SimDuration::ZERO)
    }
}

/// An acquire between its two steps: read [`PendingAcquire::key`] from the store, then hand the
/// result to [`KvThrottle::finish_acquire`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "an acquire is finished with finish_acquire"]
pub struct PendingAcquire {
    key: KvKey,
    /// The throttle that began it.
    owner: InstanceId,
}

impl PendingAcquire {
    pub fn key(&self) -> KvKey {
        self.key
    }
}

/// A released slot whose decrement has not been written: read [`PendingRelease::key`], then
/// [`KvThrottle::finish_release`], or drop the decrement with [`KvThrottle::lose_release`].
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a release is finished with finish_release or dropped with lose_release"]
pub struct PendingRelease {
    key: KvKey,
    /// The throttle whose slot it releases.
    owner: InstanceId,
}

impl PendingRelease {
    pub fn key(&self) -> KvKey {
        self.key
    }
}

/// The answer of [`KvThrottle::finish_acquire`].
#[derive(Debug, PartialEq, Eq)]
pub enum KvAcquire {
    /// Admitted; the increment is `write`, which the caller applies when the put lands.
    Admit {
        slot: Slot,
        write: Write,
    },
    Reject(Rejection),
}

/// Form 2: read-then-increment over a [`KvStore`] with separate get and put (the plan).
///
/// The throttle never touches the store: it says what to read and what to write, and the
/// caller performs each step when it chooses, so other requests' steps can run in between.
///
/// ```text
/// acquire:  begin_acquire(now) -> pending
///           store.get(now, pending.key(), lag) -> read
///           finish_acquire(now, pending, read) -> Admit { slot, write } | Reject(rejection)
///           store.apply(now, write)                 (when the put lands; never, if it fails)
/// release:  release(now, slot) -> pending           (the handler returned: the holder is gone)
///           store.get(now, pending.key(), lag) -> read
///           finish_release(now, pending, read) -> write
///           store.apply(now, write)
///       or  lose_release(pending)                   (fire and forget: the decrement never lands)
/// ```
///
/// For a deferred cascade, [`KvThrottle::release_early`] releases the slot when the handler
/// returns and hands back a [`DeferredWork`] that counts as running until
/// [`KvThrottle::end_deferred`], as the plan does ("release slot when handler returns, not when
/// deferred cascade completes").
///
/// Invariants: none on the cap. With reads that are up to date and each acquire's and
/// release's get and put applied with nothing in between, this form behaves exactly like
/// [`AtomicThrottle`] (a property test checks it); any interleaving or stale read can admit
/// over the cap or lose a decrement.
#[derive(Clone, Debug)]
pub struct KvThrottle {
    config: ThrottleConfig,
    key: KvKey,
    ledger: Ledger,
}

impl KvThrottle {
    /// A throttle for the counter under `key`. Throttles of different keys share one store.
    pub fn new(config: ThrottleConfig, key: KvKey) -> Self {
        KvThrottle {
            config,
            key,
            ledger: Ledger::new(),
        }
    }

    pub fn config(&self) -> &ThrottleConfig {
        &self.config
    }

    pub fn key(&self) -> KvKey {
        self.key
    }

    pub fn stats(&self) -> ThrottleStats {
        self.ledger.stats
    }

    /// Starts an acquire: the caller reads the counter next.
    pub fn begin_acquire(&mut self, now: SimTime) -> PendingAcquire {
        self.ledger.observe(now);
        PendingAcquire {
            key: self.key,
            owner: self.ledger.id,
        }
    }

    /// Decides on the value the acquire read (`None`: the counter was absent or expired).
    pub fn finish_acquire(
        &mut self,
        now: SimTime,
        pending: PendingAcquire,
        read: Option<Stored>,
    ) -> KvAcquire {
        self.ledger.check_owner(pending.owner, "a pending acquire");
        debug_assert_eq!(pending.key, self.key);
        self.ledger.observe(now);
        match self
            .config
            .decide_acquire(read.map_or(0, |stored| stored.value))
        {
            Ok(value) => KvAcquire::Admit {
                slot: self.ledger.admit(),
                write: Write {
                    key: self.key,
                    value,
                    expiry: self.config.counter_ttl.write_expiry(),
                },
            },
            Err(rejection) => KvAcquire::Reject(self.ledger.reject(rejection)),
        }
    }

    /// The holder is done; its decrement is still to be read and written. Panics if another
    /// throttle issued `slot`.
    pub fn release(&mut self, now: SimTime, slot: Slot) -> PendingRelease {
        self.ledger.observe(now);
        self.ledger.end_holder(slot);
        PendingRelease {
            key: self.key,
            owner: self.ledger.id,
        }
    }

    /// The slot is released now but the work goes on (a deferred cascade). The work counts in
    /// `running` until [`KvThrottle::end_deferred`].
    pub fn release_early(&mut self, now: SimTime, slot: Slot) -> (PendingRelease, DeferredWork) {
        let pending = self.release(now, slot);
        (pending, self.ledger.defer())
    }

    /// Deferred work finished.
    pub fn end_deferred(&mut self, work: DeferredWork) {
        self.ledger.end_deferred(work);
    }

    /// The decrement to write, given the value the release read.
    pub fn finish_release(
        &mut self,
        now: SimTime,
        pending: PendingRelease,
        read: Option<Stored>,
    ) -> Write {
        self.ledger.check_owner(pending.owner, "a pending release");
        debug_assert_eq!(pending.key, self.key);
        self.ledger.observe(now);
        Write {
            key: self.key,
            value: self
                .config
                .decide_release(read.map_or(0, |stored| stored.value)),
            expiry: self.config.counter_ttl.write_expiry(),
        }
    }

    /// The decrement never lands (the worker was evicted, the put failed, the promise was
    /// dropped): the slot leaks until the counter expires, if it ever does.
    pub fn lose_release(&mut self, pending: PendingRelease) {
        self.ledger.check_owner(pending.owner, "a pending release");
        self.ledger.stats.releases_lost += 1;
    }

    /// The counter as an up-to-date read of `store` sees it.
    pub fn counter(&self, now: SimTime, store: &KvStore) -> u64 {
        store
            .get(now, self.key, SimDuration::ZERO)
            .map_or(0, |stored| stored.value)
    }

    /// `counter - holders`: positive for leaked slots (lost or erased decrements), negative for
    /// holders the counter does not see (lost increments, expiry). Releases begun but not yet
    /// written count as leaked until they land.
    pub fn drift(&self, now: SimTime, store: &KvStore) -> i64 {
        self.ledger.drift(self.counter(now, store))
    }
}

/// Form 1 for threads: a compare-and-swap loop on one atomic counter, deciding with the same
/// `decide_acquire` and `decide_release` as every other form.
///
/// TTL: the counter is one atomic with no clock, so it cannot expire. Rather than ignore a
/// config that asks for expiry, [`SharedAtomicThrottle::new`] refuses any `counter_ttl` but
/// [`CounterTtl::Never`]; with `Never`, the sans-IO [`AtomicThrottle`] makes the same
/// decisions (a test drives both with the same calls). It takes no time.
///
/// Invariant (checked by loom): the counter never exceeds `inflight_max`, so neither do the
/// holders; it equals the holders once every thread is done.
pub struct SharedAtomicThrottle {
    /// Stamped into every slot, checked when one comes back.
    id: InstanceId,
    config: ThrottleConfig,
    inflight: AtomicU32,
}

impl SharedAtomicThrottle {
    /// Refuses a config whose counter expires (see the type's documentation).
    pub fn new(config: &ThrottleConfig) -> Result<Self, ConfigError> {
        if config.counter_ttl != CounterTtl::Never {
            return Err(ConfigError::new(
                "counter_ttl",
                "must be never for the lock-free throttle (its counter is one atomic with no \
                 clock, so it cannot expire); use the KV form to model a counter with a TTL",
            ));
        }
        Ok(SharedAtomicThrottle {
            id: InstanceId::fresh(),
            config: *config,
            inflight: AtomicU32::new(0),
        })
    }

    pub fn config(&self) -> &ThrottleConfig {
        &self.config
    }

    /// Increments the counter if it is below the cap, in one atomic step.
    ///
    /// Bound: the loop retries only when another thread changed the counter between the load
    /// and the compare-and-swap (lock-free, not wait-free).
    pub fn try_acquire(&self) -> Decision {
        let mut current = self.inflight.load(Ordering::Acquire);
        loop {
            let next = match self.config.decide_acquire(u64::from(current)) {
                Ok(next) => u32::try_from(next).expect("at most inflight_max, a u32"),
                Err(rejection) => return Decision::Reject(rejection),
            };
            match self
                .inflight
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Decision::Admit(Slot { owner: self.id }),
                Err(actual) => current = actual,
            }
        }
    }

    /// Gives a slot back. Panics if another throttle issued it, or if the counter is already
    /// zero (it counts the holders exactly, since it never expires). Same loop bound as
    /// `try_acquire`.
    pub fn release(&self, slot: Slot) {
        self.id.assert_issued(slot.owner, "a slot", "throttle");
        let mut current = self.inflight.load(Ordering::Acquire);
        loop {
            assert!(current > 0, "released more slots than were admitted");
            let next =
                u32::try_from(self.config.decide_release(u64::from(current))).expect("below a u32");
            match self
                .inflight
                .compare_exchange(current, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    pub fn inflight(&self) -> u32 {
        self.inflight.load(Ordering::Acquire)
    }
}

/// Form 2 for threads: the [`KvThrottle`] logic over a mutex-guarded [`KvStore`]. The get and
/// the put are separate critical sections, as a KV store's separate calls are, so another
/// thread can run between them. Reads are up to date: the race alone is enough.
///
/// No invariant on the cap: loom finds the interleaving that exceeds it.
pub struct SharedKvThrottle {
    /// Stamped into every slot, checked when one comes back.
    id: InstanceId,
    config: ThrottleConfig,
    key: KvKey,
    store: Mutex<KvStore>,
}

impl SharedKvThrottle {
    pub fn new(config: ThrottleConfig, key: KvKey) -> Self {
        SharedKvThrottle {
            id: InstanceId::fresh(),
            config,
            key,
            store: Mutex::new(KvStore::new(config.kv_staleness_max)),
        }
    }

    /// Reads the counter, then (in a second call) writes counter + 1 if it was below the cap.
    /// Threads may pass their `now`s out of order; the store takes each as the latest it has
    /// seen.
    pub fn try_acquire(&self, now: SimTime) -> Decision {
        let value = self.read(now);
        // The lock is released here: other threads may read and write before the put.
        match self.config.decide_acquire(value) {
            Ok(value) => {
                let expiry = self.config.counter_ttl.write_expiry();
                lock(&self.store).put(now, self.key, value, expiry);
                Decision::Admit(Slot { owner: self.id })
            }
            Err(rejection) => Decision::Reject(rejection),
        }
    }

    /// Reads the counter, then (in a second call) writes counter - 1. Panics if another
    /// throttle issued `slot`.
    pub fn release(&self, now: SimTime, slot: Slot) {
        self.id.assert_issued(slot.owner, "a slot", "throttle");
        let value = self.config.decide_release(self.read(now));
        let expiry = self.config.counter_ttl.write_expiry();
        lock(&self.store).put(now, self.key, value, expiry);
    }

    fn read(&self, now: SimTime) -> u64 {
        lock(&self.store)
            .get(now, self.key, SimDuration::ZERO)
            .map_or(0, |stored| stored.value)
    }

    /// The counter as an up-to-date read sees it.
    pub fn counter(&self, now: SimTime) -> u64 {
        lock(&self.store)
            .get(now, self.key, SimDuration::ZERO)
            .map_or(0, |stored| stored.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL_60S: SimDuration = SimDuration::from_secs(60);

    fn secs(secs: u64) -> SimTime {
        SimTime::from_nanos(SimDuration::from_secs(secs).as_nanos())
    }

    fn config(counter_ttl: CounterTtl, kv_staleness_max: SimDuration) -> ThrottleConfig {
        ThrottleConfig::new(10, SimDuration::from_secs(1), counter_ttl, kv_staleness_max).unwrap()
    }

    /// The plan: cap 10, Retry-After 1 s, TTL 60 s refreshed on every write, fresh reads.
    fn planned() -> ThrottleConfig {
        config(CounterTtl::RefreshedOnWrite(TTL_60S), SimDuration::ZERO)
    }

    fn admitted(decision: Decision) -> Slot {
        match decision {
            Decision::Admit(slot) => slot,
            Decision::Reject(rejection) => panic!("rejected: {rejection:?}"),
        }
    }

    /// A KV acquire whose get and put run back to back, with a read `lag` behind.
    fn kv_acquire(
        throttle: &mut KvThrottle,
        store: &mut KvStore,
        now: SimTime,
        lag: SimDuration,
    ) -> Decision {
        let pending = throttle.begin_acquire(now);
        let read = store.get(now, pending.key(), lag);
        match throttle.finish_acquire(now, pending, read) {
            KvAcquire::Admit { slot, write } => {
                store.apply(now, write);
                Decision::Admit(slot)
            }
            KvAcquire::Reject(rejection) => Decision::Reject(rejection),
        }
    }

    /// A KV release whose get and put run back to back.
    fn kv_release(throttle: &mut KvThrottle, store: &mut KvStore, now: SimTime, slot: Slot) {
        let pending = throttle.release(now, slot);
        let read = store.get(now, pending.key(), SimDuration::ZERO);
        let write = throttle.finish_release(now, pending, read);
        store.apply(now, write);
    }

    fn kv_admitted(throttle: &mut KvThrottle, store: &mut KvStore, now: SimTime) -> Slot {
        admitted(kv_acquire(throttle, store, now, SimDuration::ZERO))
    }

    fn check_rejected(
        inflight_max: u32,
        retry_after: SimDuration,
        counter_ttl: CounterTtl,
        kv_staleness_max: SimDuration,
        field: &str,
        reason: &str,
    ) {
        let error = ThrottleConfig::new(inflight_max, retry_after, counter_ttl, kv_staleness_max)
            .unwrap_err();
        assert_eq!((error.field, error.reason.as_str()), (field, reason));
    }

    #[test]
    fn absurd_configs_are_rejected_with_the_key_and_the_reason() {
        let s1 = SimDuration::from_secs(1);
        let zero = SimDuration::ZERO;
        let refreshed = CounterTtl::RefreshedOnWrite(TTL_60S);
        check_rejected(
            0,
            s1,
            refreshed,
            zero,
            "inflight_max",
            "must be at least 1 (a cap of zero rejects every write)",
        );
        check_rejected(
            10,
            zero,
            refreshed,
            zero,
            "retry_after",
            "must be longer than zero (a Retry-After of zero sends every rejected client \
             straight back)",
        );
        check_rejected(
            10,
            SimDuration::from_millis(1500),
            refreshed,
            zero,
            "retry_after",
            "1.5s is not a whole number of seconds (the Retry-After header carries whole seconds)",
        );
        for zero_ttl in [
            CounterTtl::FixedAtCreation(zero),
            CounterTtl::RefreshedOnWrite(zero),
        ] {
            check_rejected(
                10,
                s1,
                zero_ttl,
                zero,
                "counter_ttl",
                "must be longer than zero (a counter that expires as it is written never counts \
                 anything)",
            );
        }
        check_rejected(
            10,
            s1,
            CounterTtl::FixedAtCreation(TTL_60S),
            SimDuration::from_secs(61),
            "kv_staleness_max",
            "61s is longer than counter_ttl 60s (a read that far behind could miss a counter for \
             its whole life)",
        );
    }

    #[test]
    fn boundary_configs_are_accepted() {
        let s1 = SimDuration::from_secs(1);
        // Staleness equal to the TTL (Cloudflare KV: up to 60 s of lag, a 60 s minimum TTL).
        assert!(ThrottleConfig::new(1, s1, CounterTtl::RefreshedOnWrite(TTL_60S), TTL_60S).is_ok());
        // With a counter that never expires, any staleness is coherent.
        let day = SimDuration::from_secs(86_400);
        assert!(ThrottleConfig::new(1, s1, CounterTtl::Never, day).is_ok());
    }

    #[test]
    fn atomic_form_admits_ten_and_rejects_the_eleventh_with_retry_after_one_second() {
        let mut throttle = AtomicThrottle::new(planned());
        let _slots: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(0))))
            .collect();
        assert_eq!(
            throttle.try_acquire(secs(0)),
            Decision::Reject(Rejection {
                retry_after: SimDuration::from_secs(1),
                counter_seen: 10,
            })
        );
        assert_eq!(Rejection::STATUS, 429);
        let stats = throttle.stats();
        assert_eq!((stats.admitted, stats.rejected, stats.holders), (10, 1, 10));
        assert_eq!(throttle.counter(secs(0)), 10);
        assert_eq!(throttle.counter_expires_at(secs(0)), Some(secs(60)));
    }

    #[test]
    fn release_frees_a_slot() {
        let mut throttle = AtomicThrottle::new(planned());
        let mut slots: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(0))))
            .collect();
        throttle.release(secs(1), slots.pop().unwrap());
        assert_eq!(throttle.counter(secs(1)), 9);
        slots.push(admitted(throttle.try_acquire(secs(2))));
        assert!(matches!(throttle.try_acquire(secs(2)), Decision::Reject(_)));
        for slot in slots {
            throttle.release(secs(3), slot);
        }
        assert_eq!((throttle.counter(secs(3)), throttle.drift(secs(3))), (0, 0));
        assert_eq!(throttle.stats().holders_peak, 10);
    }

    #[test]
    fn two_interleaved_acquires_at_nine_are_both_admitted() {
        let mut store = KvStore::new(SimDuration::ZERO);
        let mut throttle = KvThrottle::new(planned(), 7);
        let _nine: Vec<Slot> = (0..9)
            .map(|_| kv_admitted(&mut throttle, &mut store, secs(0)))
            .collect();
        // Two requests read the counter before either writes.
        let first = throttle.begin_acquire(secs(1));
        let second = throttle.begin_acquire(secs(1));
        let first_read = store.get(secs(1), first.key(), SimDuration::ZERO);
        let second_read = store.get(secs(1), second.key(), SimDuration::ZERO);
        assert_eq!(first_read.map(|s| s.value), Some(9));
        assert_eq!(second_read.map(|s| s.value), Some(9));
        let mut slots = Vec::new();
        for (pending, read) in [(first, first_read), (second, second_read)] {
            match throttle.finish_acquire(secs(1), pending, read) {
                KvAcquire::Admit { slot, write } => {
                    assert_eq!(write.value, 10);
                    store.apply(secs(1), write);
                    slots.push(slot);
                }
                KvAcquire::Reject(rejection) => panic!("rejected: {rejection:?}"),
            }
        }
        let stats = throttle.stats();
        assert_eq!((stats.holders, stats.holders_peak), (11, 11));
        assert_eq!(throttle.counter(secs(1), &store), 10);
        assert_eq!(throttle.drift(secs(1), &store), -1);
        // The counter is at the cap now, so the next acquire is turned away.
        assert!(matches!(
            kv_acquire(&mut throttle, &mut store, secs(2), SimDuration::ZERO),
            Decision::Reject(_)
        ));
    }

    #[test]
    fn a_stale_read_admits_over_the_cap() {
        let staleness = SimDuration::from_secs(5);
        let mut store = KvStore::new(staleness);
        let mut throttle =
            KvThrottle::new(config(CounterTtl::RefreshedOnWrite(TTL_60S), staleness), 1);
        let mut slots: Vec<Slot> = (0..9)
            .map(|_| kv_admitted(&mut throttle, &mut store, secs(0)))
            .collect();
        slots.push(kv_admitted(&mut throttle, &mut store, secs(1)));
        assert_eq!(throttle.counter(secs(2), &store), 10);
        // A replica 2 s behind still shows the 9 written at t=0.
        let late = kv_acquire(
            &mut throttle,
            &mut store,
            secs(2),
            SimDuration::from_secs(2),
        );
        let _eleventh = admitted(late);
        assert_eq!(throttle.stats().holders_peak, 11);
        // An up-to-date read is rejected.
        assert!(matches!(
            kv_acquire(&mut throttle, &mut store, secs(2), SimDuration::ZERO),
            Decision::Reject(Rejection {
                counter_seen: 10,
                ..
            })
        ));
    }

    #[test]
    fn an_acquire_interleaved_with_a_release_erases_the_decrement() {
        let mut store = KvStore::new(SimDuration::ZERO);
        let mut throttle = KvThrottle::new(planned(), 1);
        let held = kv_admitted(&mut throttle, &mut store, secs(0));
        let release = throttle.release(secs(1), held);
        let acquire = throttle.begin_acquire(secs(1));
        let release_read = store.get(secs(1), release.key(), SimDuration::ZERO);
        let acquire_read = store.get(secs(1), acquire.key(), SimDuration::ZERO);
        let decrement = throttle.finish_release(secs(1), release, release_read);
        store.apply(secs(1), decrement);
        let KvAcquire::Admit { slot: _slot, write } =
            throttle.finish_acquire(secs(1), acquire, acquire_read)
        else {
            panic!("a counter of 1 admits");
        };
        store.apply(secs(1), write);
        // One holder, counter 2: a slot leaked although no release was lost.
        assert_eq!(throttle.counter(secs(1), &store), 2);
        assert_eq!(throttle.drift(secs(1), &store), 1);
        assert_eq!(throttle.stats().releases_lost, 0);
    }

    /// A slot leaks at t=0; then one request every 30 s acquires and releases. Returns the
    /// counter just after each release, every 30 s from 30 s to 600 s.
    fn leaked_counter_under_steady_traffic(counter_ttl: CounterTtl) -> Vec<u64> {
        let mut store = KvStore::new(SimDuration::ZERO);
        let mut throttle = KvThrottle::new(config(counter_ttl, SimDuration::ZERO), 3);
        let leaked = kv_admitted(&mut throttle, &mut store, secs(0));
        let pending = throttle.release(secs(0), leaked);
        throttle.lose_release(pending);
        assert_eq!(throttle.stats().releases_lost, 1);
        (1..=20)
            .map(|step| {
                let now = secs(step * 30);
                let slot = kv_admitted(&mut throttle, &mut store, now);
                kv_release(&mut throttle, &mut store, now, slot);
                assert_eq!(throttle.stats().holders, 0);
                throttle.counter(now, &store)
            })
            .collect()
    }

    #[test]
    fn a_refreshed_ttl_under_a_write_every_30s_keeps_a_leaked_slot_forever() {
        let counters = leaked_counter_under_steady_traffic(CounterTtl::RefreshedOnWrite(TTL_60S));
        assert_eq!(counters, vec![1; 20]);
    }

    #[test]
    fn a_fixed_ttl_frees_a_leaked_slot_after_60s() {
        let counters = leaked_counter_under_steady_traffic(CounterTtl::FixedAtCreation(TTL_60S));
        // At 30 s the leak still counts; the counter created at 0 s expires at 60 s.
        assert_eq!(counters[0], 1);
        assert_eq!(&counters[1..], &[0; 19]);
    }

    #[test]
    fn a_counter_that_never_expires_keeps_a_leaked_slot_forever() {
        let counters = leaked_counter_under_steady_traffic(CounterTtl::Never);
        assert_eq!(counters, vec![1; 20]);
    }

    #[test]
    fn a_fixed_ttl_also_frees_held_slots_so_twice_the_cap_run() {
        let mut throttle = AtomicThrottle::new(config(
            CounterTtl::FixedAtCreation(TTL_60S),
            SimDuration::ZERO,
        ));
        let first: Vec<Slot> = (0..10)
            .map(|step| admitted(throttle.try_acquire(secs(step))))
            .collect();
        assert!(matches!(
            throttle.try_acquire(secs(59)),
            Decision::Reject(_)
        ));
        // The first ten cascades still run at 60 s, but the counter created at 0 s expired.
        let second: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(60))))
            .collect();
        assert_eq!(throttle.stats().holders_peak, 20);
        assert_eq!(throttle.drift(secs(60)), -10);
        for slot in first.into_iter().chain(second) {
            throttle.release(secs(61), slot);
        }
        // The twenty decrements bottom out at zero rather than going negative.
        assert_eq!(throttle.counter(secs(61)), 0);
    }

    #[test]
    fn a_refreshed_ttl_expires_under_cascades_longer_than_the_ttl() {
        let mut throttle = AtomicThrottle::new(planned());
        let _long: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(0))))
            .collect();
        assert_eq!(throttle.counter_expires_at(secs(0)), Some(secs(60)));
        // No write for 60 s (the cascades wait on the advisory lock; p99 was 203 s).
        let _more: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(60))))
            .collect();
        assert_eq!(throttle.stats().holders_peak, 20);
    }

    #[test]
    fn a_counter_that_never_expires_holds_the_cap_through_long_cascades() {
        let mut throttle = AtomicThrottle::new(config(CounterTtl::Never, SimDuration::ZERO));
        let _slots: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(0))))
            .collect();
        assert_eq!(throttle.counter_expires_at(secs(0)), None);
        assert!(matches!(
            throttle.try_acquire(secs(100_000)),
            Decision::Reject(_)
        ));
    }

    #[test]
    fn releasing_when_the_handler_returns_lets_deferred_cascades_exceed_the_cap() {
        let mut throttle = AtomicThrottle::new(planned());
        let slots: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(0))))
            .collect();
        // The handlers return at 1 s; their cascades run on.
        let deferred: Vec<DeferredWork> = slots
            .into_iter()
            .map(|slot| throttle.release_early(secs(1), slot))
            .collect();
        let _next: Vec<Slot> = (0..10)
            .map(|_| admitted(throttle.try_acquire(secs(2))))
            .collect();
        let stats = throttle.stats();
        assert_eq!(
            (stats.holders_peak, stats.running(), stats.running_peak),
            (10, 20, 20)
        );
        for work in deferred {
            throttle.end_deferred(work);
        }
        assert_eq!(throttle.stats().running(), 10);
    }

    #[test]
    fn kv_form_release_early_counts_the_deferred_cascade_as_running() {
        let mut store = KvStore::new(SimDuration::ZERO);
        let mut throttle = KvThrottle::new(planned(), 1);
        let slot = kv_admitted(&mut throttle, &mut store, secs(0));
        let (pending, work) = throttle.release_early(secs(1), slot);
        let read = store.get(secs(1), pending.key(), SimDuration::ZERO);
        let write = throttle.finish_release(secs(1), pending, read);
        store.apply(secs(1), write);
        let stats = throttle.stats();
        assert_eq!((stats.holders, stats.running()), (0, 1));
        assert_eq!(throttle.counter(secs(1), &store), 0);
        throttle.end_deferred(work);
        assert_eq!(throttle.stats().running(), 0);
    }

    #[test]
    fn spaces_use_separate_keys_in_one_store() {
        let mut store = KvStore::new(SimDuration::ZERO);
        let mut busy = KvThrottle::new(planned(), 1);
        let mut quiet = KvThrottle::new(planned(), 2);
        let _slots: Vec<Slot> = (0..10)
            .map(|_| kv_admitted(&mut busy, &mut store, secs(0)))
            .collect();
        assert!(matches!(
            kv_acquire(&mut busy, &mut store, secs(0), SimDuration::ZERO),
            Decision::Reject(_)
        ));
        let slot = kv_admitted(&mut quiet, &mut store, secs(0));
        assert_eq!(
            (
                busy.counter(secs(0), &store),
                quiet.counter(secs(0), &store)
            ),
            (10, 1)
        );
        kv_release(&mut quiet, &mut store, secs(1), slot);
    }

    #[test]
    fn a_release_after_the_counter_expired_writes_zero_with_a_new_ttl() {
        let mut store = KvStore::new(SimDuration::ZERO);
        let mut throttle = KvThrottle::new(planned(), 1);
        let slot = kv_admitted(&mut throttle, &mut store, secs(0));
        let pending = throttle.release(secs(90), slot);
        assert_eq!(store.get(secs(90), pending.key(), SimDuration::ZERO), None);
        let write = throttle.finish_release(secs(90), pending, None);
        assert_eq!(
            write,
            Write {
                key: 1,
                value: 0,
                expiry: Expiry::After(TTL_60S)
            }
        );
    }

    #[test]
    fn the_store_holds_only_the_versions_a_stale_read_can_still_see() {
        let mut store = KvStore::new(SimDuration::from_secs(10));
        for second in 0..100 {
            store.put(secs(second), 5, second, Expiry::Never);
            assert!(store.versions_held(5) <= 11);
        }
        // Written at 99 s: the newest is 99; 10 s behind, the value written at 89 s.
        let value_at = |lag| {
            store
                .get(secs(99), 5, SimDuration::from_secs(lag))
                .unwrap()
                .value
        };
        assert_eq!((value_at(0), value_at(10)), (99, 89));
        assert_eq!(store.writes_total(), 100);
    }

    #[test]
    fn an_up_to_date_store_holds_one_version_per_key() {
        let mut store = KvStore::new(SimDuration::ZERO);
        for value in 0..5 {
            store.put(secs(1), 9, value, Expiry::After(TTL_60S));
        }
        assert_eq!(store.versions_held(9), 1);
        assert_eq!(store.get(secs(1), 9, SimDuration::ZERO).unwrap().value, 4);
    }

    #[test]
    #[should_panic(expected = "more than the store's staleness_max")]
    fn a_read_more_stale_than_configured_is_a_caller_bug() {
        let store = KvStore::new(SimDuration::from_secs(1));
        let _ = store.get(secs(5), 1, SimDuration::from_secs(2));
    }

    /// Only in the sans-IO throttles, whose one caller never goes backwards, and only in
    /// debug builds; the store itself takes a late `now` as the latest (below).
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "time went backwards")]
    fn time_going_backwards_is_a_caller_bug_of_the_sans_io_throttle() {
        let mut throttle = AtomicThrottle::new(planned());
        let _slot = throttle.try_acquire(secs(5));
        let _ = throttle.try_acquire(secs(4));
    }

    #[test]
    fn the_store_takes_a_late_now_as_the_latest_it_has_seen() {
        let mut store = KvStore::new(SimDuration::ZERO);
        store.put(secs(10), 1, 7, Expiry::After(TTL_60S));
        // A writer that read its clock at 4 s lands after the write at 10 s: it is applied at
        // 10 s, and its TTL counts from there.
        store.put(secs(4), 1, 8, Expiry::After(TTL_60S));
        let read = store.get(secs(3), 1, SimDuration::ZERO).unwrap();
        assert_eq!(
            (read.value, read.written_at, read.expires_at),
            (8, secs(10), secs(70))
        );
    }

    /// Two threads read their clocks (5 s, then 4 s) and reach the store in the other order:
    /// an ordinary race of the shared form, which used to hit the store's "time went
    /// backwards" panic.
    #[test]
    fn the_shared_kv_form_accepts_threads_that_pass_now_out_of_order() {
        let throttle = SharedKvThrottle::new(planned(), 1);
        let Decision::Admit(first) = throttle.try_acquire(secs(5)) else {
            panic!("an empty counter admits");
        };
        let Decision::Admit(second) = throttle.try_acquire(secs(4)) else {
            panic!("a counter of 1 admits");
        };
        assert_eq!(throttle.counter(secs(5)), 2);
        throttle.release(secs(3), first);
        throttle.release(secs(5), second);
        assert_eq!(throttle.counter(secs(5)), 0);
    }

    /// The review's repro: a counter created at 0 s with a fixed 60 s TTL; A reads it at 59 s
    /// and its put lands at 61 s; meanwhile B found it expired at 60.5 s and created it anew.
    /// A's write must keep B's expiry, not write the expired one it read (which erased B's
    /// counter, so the next acquire saw an empty counter).
    #[test]
    fn a_fixed_ttl_write_landing_after_expiry_keeps_the_new_counters_expiry() {
        let fixed = config(CounterTtl::FixedAtCreation(TTL_60S), SimDuration::ZERO);
        let mut store = KvStore::new(SimDuration::ZERO);
        let mut throttle = KvThrottle::new(fixed, 1);
        let created = kv_admitted(&mut throttle, &mut store, secs(0));
        kv_release(&mut throttle, &mut store, secs(1), created);
        assert_eq!(
            store.get(secs(1), 1, SimDuration::ZERO).unwrap().expires_at,
            secs(60)
        );
        // A reads at 59 s.
        let a = throttle.begin_acquire(secs(59));
        let a_read = store.get(secs(59), a.key(), SimDuration::ZERO);
        assert_eq!(
            a_read.map(|read| (read.value, read.expires_at)),
            Some((0, secs(60)))
        );
        let KvAcquire::Admit {
            slot: _a_slot,
            write: a_write,
        } = throttle.finish_acquire(secs(59), a, a_read)
        else {
            panic!("a counter of 0 admits");
        };
        assert_eq!(a_write.expiry, Expiry::Keep { or_after: TTL_60S });
        // B, at 60.5 s, finds the counter expired and creates it again.
        let b_at = SimTime::from_nanos(60_500_000_000);
        let _b_slot = kv_admitted(&mut throttle, &mut store, b_at);
        let b_expiry = SimTime::from_nanos(120_500_000_000);
        assert_eq!(
            store.get(b_at, 1, SimDuration::ZERO).unwrap().expires_at,
            b_expiry
        );
        // A's put lands at 61 s.
        store.apply(secs(61), a_write);
        let after = store
            .get(secs(61), 1, SimDuration::ZERO)
            .expect("B's counter survives");
        assert_eq!((after.value, after.expires_at), (1, b_expiry));
        assert_eq!(throttle.counter(secs(61), &store), 1);
    }

    #[test]
    fn keep_creates_a_missing_or_expired_key_with_a_fresh_ttl() {
        let mut store = KvStore::new(SimDuration::ZERO);
        let keep = Expiry::Keep { or_after: TTL_60S };
        store.put(secs(0), 1, 1, keep);
        assert_eq!(
            store.get(secs(0), 1, SimDuration::ZERO).unwrap().expires_at,
            secs(60)
        );
        store.put(secs(30), 1, 2, keep);
        assert_eq!(
            store
                .get(secs(30), 1, SimDuration::ZERO)
                .unwrap()
                .expires_at,
            secs(60)
        );
        // At 60 s the key has expired: the write creates it again.
        store.put(secs(60), 1, 3, keep);
        assert_eq!(
            store
                .get(secs(60), 1, SimDuration::ZERO)
                .unwrap()
                .expires_at,
            secs(120)
        );
    }

    #[test]
    #[should_panic(expected = "a slot was handed back to a throttle that did not issue it")]
    fn a_slot_of_another_atomic_throttle_panics() {
        let mut issuer = AtomicThrottle::new(planned());
        let mut other = AtomicThrottle::new(planned());
        let _held = admitted(other.try_acquire(secs(0)));
        let foreign = admitted(issuer.try_acquire(secs(0)));
        other.release(secs(1), foreign);
    }

    #[test]
    #[should_panic(expected = "a slot was handed back to a throttle that did not issue it")]
    fn a_slot_of_another_kv_throttle_panics() {
        let mut store = KvStore::new(SimDuration::ZERO);
        // The same key, so nothing but the owner tells the two apart.
        let mut issuer = KvThrottle::new(planned(), 1);
        let mut other = KvThrottle::new(planned(), 1);
        let foreign = kv_admitted(&mut issuer, &mut store, secs(0));
        let _ = other.release(secs(1), foreign);
    }

    #[test]
    #[should_panic(expected = "a pending acquire was handed back to a throttle that did not")]
    fn a_pending_acquire_of_another_kv_throttle_panics() {
        let mut issuer = KvThrottle::new(planned(), 1);
        let mut other = KvThrottle::new(planned(), 1);
        let pending = issuer.begin_acquire(secs(0));
        let _ = other.finish_acquire(secs(0), pending, None);
    }

    #[test]
    #[should_panic(expected = "a slot was handed back to a throttle that did not issue it")]
    fn a_slot_of_another_shared_atomic_throttle_panics() {
        let never = config(CounterTtl::Never, SimDuration::ZERO);
        let issuer = SharedAtomicThrottle::new(&never).unwrap();
        let other = SharedAtomicThrottle::new(&never).unwrap();
        let _held = admitted(other.try_acquire());
        other.release(admitted(issuer.try_acquire()));
    }

    #[test]
    #[should_panic(expected = "a slot was handed back to a throttle that did not issue it")]
    fn a_slot_of_another_shared_kv_throttle_panics() {
        let issuer = SharedKvThrottle::new(planned(), 1);
        let other = SharedKvThrottle::new(planned(), 1);
        let _held = admitted(other.try_acquire(secs(0)));
        other.release(secs(1), admitted(issuer.try_acquire(secs(0))));
    }

    #[test]
    fn the_lock_free_throttle_refuses_a_counter_that_expires() {
        for ttl in [
            CounterTtl::FixedAtCreation(TTL_60S),
            CounterTtl::RefreshedOnWrite(TTL_60S),
        ] {
            let error = SharedAtomicThrottle::new(&config(ttl, SimDuration::ZERO))
                .err()
                .expect("refused");
            assert_eq!(error.field, "counter_ttl");
            assert!(
                error
                    .reason
                    .starts_with("must be never for the lock-free throttle")
            );
        }
    }

    /// One thread, the same calls: the lock-free form decides as the sans-IO atomic form does
    /// with a counter that never expires, rejections included.
    #[test]
    fn the_lock_free_throttle_decides_as_the_atomic_form() {
        let never = ThrottleConfig::new(
            3,
            SimDuration::from_secs(2),
            CounterTtl::Never,
            SimDuration::ZERO,
        )
        .unwrap();
        let shared = SharedAtomicThrottle::new(&never).unwrap();
        let mut sans_io = AtomicThrottle::new(never);
        let mut held = Vec::new();
        for round in 0..12u64 {
            if round % 3 == 2
                && let Some((a, b)) = held.pop()
            {
                shared.release(a);
                sans_io.release(secs(round), b);
            }
            match (shared.try_acquire(), sans_io.try_acquire(secs(round))) {
                (Decision::Admit(a), Decision::Admit(b)) => held.push((a, b)),
                (Decision::Reject(a), Decision::Reject(b)) => assert_eq!(a, b),
                (a, b) => panic!("round {round}: lock-free {a:?}, sans-IO {b:?}"),
            }
            assert_eq!(u64::from(shared.inflight()), sans_io.counter(secs(round)));
        }
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Acquire,
            /// Release the held slot at this index (modulo the number held).
            Release(usize),
            LoseRelease(usize),
            AdvanceMillis(u64),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => Just(Op::Acquire),
                3 => any::<usize>().prop_map(Op::Release),
                1 => any::<usize>().prop_map(Op::LoseRelease),
                2 => (0u64..40_000).prop_map(Op::AdvanceMillis),
            ]
        }

        fn counter_ttl() -> impl Strategy<Value = CounterTtl> {
            let ttl = (1u64..=60).prop_map(SimDuration::from_secs);
            prop_oneof![
                Just(CounterTtl::Never),
                ttl.clone().prop_map(CounterTtl::FixedAtCreation),
                ttl.prop_map(CounterTtl::RefreshedOnWrite),
            ]
        }

        /// A counter with an expiry instant, written out longhand.
        #[derive(Default)]
        struct ReferenceCounter {
            /// (value, expires_at) as last written; `None` before the first write.
            written: Option<(u64, SimTime)>,
            holders: u64,
            holders_peak: u64,
            admitted: u64,
            rejected: u64,
            releases_lost: u64,
        }

        impl ReferenceCounter {
            fn live(&self, now: SimTime) -> Option<(u64, SimTime)> {
                self.written.filter(|&(_, expires_at)| now < expires_at)
            }

            fn write(&mut self, now: SimTime, ttl: CounterTtl, value: u64) {
                let live = self.live(now);
                let expires_at = match ttl {
                    CounterTtl::Never => SimTime::MAX,
                    CounterTtl::RefreshedOnWrite(ttl) => now.saturating_add(ttl),
                    CounterTtl::FixedAtCreation(ttl) => {
                        live.map_or(now.saturating_add(ttl), |(_, at)| at)
                    }
                };
                self.written = Some((value, expires_at));
            }

            /// Some(counter seen) on rejection, None on admission.
            fn acquire(&mut self, now: SimTime, ttl: CounterTtl, cap: u64) -> Option<u64> {
                let count = self.live(now).map_or(0, |(value, _)| value);
                if count >= cap {
                    self.rejected += 1;
                    return Some(count);
                }
                self.write(now, ttl, count + 1);
                self.admitted += 1;
                self.holders += 1;
                self.holders_peak = self.holders_peak.max(self.holders);
                None
            }

            fn release(&mut self, now: SimTime, ttl: CounterTtl) {
                let count = self.live(now).map_or(0, |(value, _)| value);
                self.write(now, ttl, count.saturating_sub(1));
                self.holders -= 1;
            }
        }

        proptest! {
            /// The atomic form against a plain counter with expiry; with a counter that never
            /// expires, holders never pass the cap.
            #[test]
            fn atomic_form_matches_a_plain_counter(
                cap in 1u32..5,
                ttl in counter_ttl(),
                ops in prop::collection::vec(op(), 0..200),
            ) {
                let config =
                    ThrottleConfig::new(cap, SimDuration::from_secs(1), ttl, SimDuration::ZERO)
                        .unwrap();
                let mut throttle = AtomicThrottle::new(config);
                let mut reference = ReferenceCounter::default();
                let mut held: Vec<Slot> = Vec::new();
                let mut now = SimTime::ZERO;
                for op in ops {
                    match op {
                        Op::Acquire => {
                            let expected = reference.acquire(now, ttl, u64::from(cap));
                            match throttle.try_acquire(now) {
                                Decision::Admit(slot) => {
                                    prop_assert_eq!(expected, None);
                                    held.push(slot);
                                }
                                Decision::Reject(rejection) => {
                                    prop_assert_eq!(expected, Some(rejection.counter_seen));
                                    prop_assert_eq!(rejection.retry_after, SimDuration::from_secs(1));
                                }
                            }
                        }
                        Op::Release(index) if !held.is_empty() => {
                            let slot = held.swap_remove(index % held.len());
                            throttle.release(now, slot);
                            reference.release(now, ttl);
                        }
                        Op::LoseRelease(index) if !held.is_empty() => {
                            let slot = held.swap_remove(index % held.len());
                            throttle.lose_release(slot);
                            reference.holders -= 1;
                            reference.releases_lost += 1;
                        }
                        Op::Release(_) | Op::LoseRelease(_) => {}
                        Op::AdvanceMillis(millis) => {
                            now = now.saturating_add(SimDuration::from_millis(millis));
                        }
                    }
                    let stats = throttle.stats();
                    let expected_count = reference.live(now).map_or(0, |(value, _)| value);
                    prop_assert_eq!(throttle.counter(now), expected_count);
                    prop_assert_eq!(
                        (stats.admitted, stats.rejected, stats.holders, stats.holders_peak),
                        (reference.admitted, reference.rejected, reference.holders, reference.holders_peak)
                    );
                    prop_assert_eq!(stats.releases_lost, reference.releases_lost);
                    prop_assert_eq!(stats.holders, held.len() as u64);
                    if ttl == CounterTtl::Never {
                        prop_assert!(stats.holders_peak <= u64::from(cap));
                        if stats.releases_lost == 0 {
                            prop_assert_eq!(throttle.drift(now), 0);
                        }
                    }
                }
            }

            /// With up-to-date reads and each get and put back to back, the KV form is the
            /// atomic form.
            #[test]
            fn kv_form_without_interleaving_is_the_atomic_form(
                cap in 1u32..5,
                ttl in counter_ttl(),
                ops in prop::collection::vec(op(), 0..200),
            ) {
                let config =
                    ThrottleConfig::new(cap, SimDuration::from_secs(1), ttl, SimDuration::ZERO)
                        .unwrap();
                let mut atomic = AtomicThrottle::new(config);
                let mut store = KvStore::new(SimDuration::ZERO);
                let mut kv = KvThrottle::new(config, 4);
                let mut held: Vec<(Slot, Slot)> = Vec::new();
                let mut now = SimTime::ZERO;
                for op in ops {
                    match op {
                        Op::Acquire => {
                            match (
                                atomic.try_acquire(now),
                                kv_acquire(&mut kv, &mut store, now, SimDuration::ZERO),
                            ) {
                                (Decision::Admit(a), Decision::Admit(k)) => held.push((a, k)),
                                (Decision::Reject(a), Decision::Reject(k)) => prop_assert_eq!(a, k),
                                (a, k) => prop_assert!(false, "atomic {:?}, kv {:?}", a, k),
                            }
                        }
                        Op::Release(index) if !held.is_empty() => {
                            let (a, k) = held.swap_remove(index % held.len());
                            atomic.release(now, a);
                            kv_release(&mut kv, &mut store, now, k);
                        }
                        Op::LoseRelease(index) if !held.is_empty() => {
                            let (a, k) = held.swap_remove(index % held.len());
                            atomic.lose_release(a);
                            let pending = kv.release(now, k);
                            kv.lose_release(pending);
                        }
                        Op::Release(_) | Op::LoseRelease(_) => {}
                        Op::AdvanceMillis(millis) => {
                            now = now.saturating_add(SimDuration::from_millis(millis));
                        }
                    }
                    prop_assert_eq!(atomic.stats(), kv.stats());
                    prop_assert_eq!(atomic.counter(now), kv.counter(now, &store));
                }
            }
        }

        #[derive(Clone, Debug)]
        enum StoreOp {
            Put {
                key: KvKey,
                value: u64,
                expiry: ExpiryChoice,
            },
            Get {
                key: KvKey,
                /// Lag as a share of `staleness_max`, in thousandths.
                lag_permille: u64,
            },
            AdvanceMillis(u64),
        }

        #[derive(Clone, Copy, Debug)]
        enum ExpiryChoice {
            Never,
            AfterMillis(u64),
            /// `now + offset - 10 s`: sometimes already past.
            AtOffsetMillis(u64),
            KeepOrAfterMillis(u64),
        }

        fn store_op() -> impl Strategy<Value = StoreOp> {
            let expiry = prop_oneof![
                Just(ExpiryChoice::Never),
                (0u64..30_000).prop_map(ExpiryChoice::AfterMillis),
                (0u64..30_000).prop_map(ExpiryChoice::AtOffsetMillis),
                (0u64..30_000).prop_map(ExpiryChoice::KeepOrAfterMillis),
            ];
            prop_oneof![
                3 => (0u64..3, 0u64..20, expiry)
                    .prop_map(|(key, value, expiry)| StoreOp::Put { key, value, expiry }),
                3 => (0u64..3, 0u64..=1000)
                    .prop_map(|(key, lag_permille)| StoreOp::Get { key, lag_permille }),
                2 => (0u64..5_000).prop_map(StoreOp::AdvanceMillis),
            ]
        }

        proptest! {
            /// The store against a map that keeps every write forever.
            #[test]
            fn kv_store_matches_a_map_with_expiry_and_full_history(
                staleness_millis in prop_oneof![Just(0u64), 0u64..20_000],
                ops in prop::collection::vec(store_op(), 0..200),
            ) {
                let staleness_max = SimDuration::from_millis(staleness_millis);
                let mut store = KvStore::new(staleness_max);
                // key -> every (written_at, value, expires_at), in write order.
                let mut history: BTreeMap<KvKey, Vec<(SimTime, u64, SimTime)>> = BTreeMap::new();
                let mut now = SimTime::ZERO;
                for op in ops {
                    match op {
                        StoreOp::Put { key, value, expiry } => {
                            let (expiry, expires_at) = match expiry {
                                ExpiryChoice::Never => (Expiry::Never, SimTime::MAX),
                                ExpiryChoice::AfterMillis(millis) => {
                                    let ttl = SimDuration::from_millis(millis);
                                    (Expiry::After(ttl), now.saturating_add(ttl))
                                }
                                ExpiryChoice::AtOffsetMillis(millis) => {
                                    let at = SimTime::from_nanos(
                                        (now.as_nanos() + millis * 1_000_000)
                                            .saturating_sub(10_000_000_000),
                                    );
                                    (Expiry::At(at), at)
                                }
                                ExpiryChoice::KeepOrAfterMillis(millis) => {
                                    let ttl = SimDuration::from_millis(millis);
                                    // The last write, if it has not expired yet.
                                    let live = history
                                        .get(&key)
                                        .and_then(|writes| writes.last())
                                        .filter(|last| now < last.2);
                                    let expires_at =
                                        live.map_or(now.saturating_add(ttl), |last| last.2);
                                    (Expiry::Keep { or_after: ttl }, expires_at)
                                }
                            };
                            store.put(now, key, value, expiry);
                            history.entry(key).or_default().push((now, value, expires_at));
                        }
                        StoreOp::Get { key, lag_permille } => {
                            let lag = SimDuration::from_nanos(
                                staleness_max.as_nanos() / 1000 * lag_permille,
                            );
                            let as_of = now.as_nanos().saturating_sub(lag.as_nanos());
                            let expected = history
                                .get(&key)
                                .and_then(|writes| {
                                    writes.iter().rev().find(|w| w.0.as_nanos() <= as_of)
                                })
                                .filter(|w| as_of < w.2.as_nanos())
                                .map(|&(written_at, value, expires_at)| Stored {
                                    value,
                                    written_at,
                                    expires_at,
                                });
                            prop_assert_eq!(store.get(now, key, lag), expected);
                        }
                        StoreOp::AdvanceMillis(millis) => {
                            now = now.saturating_add(SimDuration::from_millis(millis));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod thread_tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    fn config(inflight_max: u32) -> ThrottleConfig {
        ThrottleConfig::new(
            inflight_max,
            SimDuration::from_secs(1),
            CounterTtl::Never,
            SimDuration::ZERO,
        )
        .unwrap()
    }

    #[test]
    fn threads_never_exceed_the_atomic_cap() {
        let throttle = Arc::new(SharedAtomicThrottle::new(&config(3)).unwrap());
        let holders = Arc::new(AtomicU64::new(0));
        let peak = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (throttle, holders, peak) = (throttle.clone(), holders.clone(), peak.clone());
                std::thread::spawn(move || {
                    for _ in 0..200 {
                        if let Decision::Admit(slot) = throttle.try_acquire() {
                            let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            holders.fetch_sub(1, Ordering::SeqCst);
                            throttle.release(slot);
                        }
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        assert!(peak.load(Ordering::SeqCst) <= 3);
        assert_eq!(throttle.inflight(), 0);
    }

    #[test]
    fn the_shared_kv_form_alone_admits_up_to_the_cap_and_releases() {
        let throttle = SharedKvThrottle::new(config(2), 1);
        let now = SimTime::ZERO;
        let first = throttle.try_acquire(now);
        let second = throttle.try_acquire(now);
        assert!(matches!(
            throttle.try_acquire(now),
            Decision::Reject(Rejection {
                counter_seen: 2,
                ..
            })
        ));
        for decision in [first, second] {
            let Decision::Admit(slot) = decision else {
                panic!("a counter below the cap admits");
            };
            throttle.release(now, slot);
        }
        assert_eq!(throttle.counter(now), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use crate::sync::Arc;

    fn config(inflight_max: u32) -> ThrottleConfig {
        ThrottleConfig::new(
            inflight_max,
            SimDuration::from_secs(1),
            CounterTtl::Never,
            SimDuration::ZERO,
        )
        .unwrap()
    }

    /// Three threads race for a cap of two and keep what they get until all are done:
    /// whatever the interleaving, at most two are admitted, and every slot comes back.
    #[test]
    fn loom_throttle_atomic_never_admits_more_than_the_cap() {
        crate::sync::loom_model(|| {
            let throttle = Arc::new(SharedAtomicThrottle::new(&config(2)).unwrap());
            let holders = Arc::new(AtomicU32::new(0));
            let threads: Vec<_> = (0..3)
                .map(|_| {
                    let (throttle, holders) = (throttle.clone(), holders.clone());
                    loom::thread::spawn(move || match throttle.try_acquire() {
                        Decision::Admit(slot) => {
                            let now_holding = holders.fetch_add(1, Ordering::SeqCst) + 1;
                            assert!(now_holding <= 2, "{now_holding} holders, cap 2");
                            Some(slot)
                        }
                        Decision::Reject(rejection) => {
                            assert_eq!(rejection.counter_seen, 2, "rejected below the cap");
                            None
                        }
                    })
                })
                .collect();
            let slots: Vec<Slot> = threads
                .into_iter()
                .filter_map(|thread| thread.join().unwrap())
                .collect();
            assert_eq!(slots.len(), 2, "a free slot was refused");
            for slot in slots {
                throttle.release(slot);
            }
            assert_eq!(throttle.inflight(), 0, "a slot was not given back");
        });
    }

    /// Two threads, a cap of one, each acquiring and releasing twice: a released slot can be
    /// taken again, and never by two holders at once.
    #[test]
    fn loom_throttle_atomic_reuses_released_slots_within_the_cap() {
        crate::sync::loom_model(|| {
            let throttle = Arc::new(SharedAtomicThrottle::new(&config(1)).unwrap());
            let holders = Arc::new(AtomicU32::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (throttle, holders) = (throttle.clone(), holders.clone());
                    loom::thread::spawn(move || {
                        for _ in 0..2 {
                            if let Decision::Admit(slot) = throttle.try_acquire() {
                                let now_holding = holders.fetch_add(1, Ordering::SeqCst) + 1;
                                assert!(now_holding <= 1, "{now_holding} holders, cap 1");
                                holders.fetch_sub(1, Ordering::SeqCst);
                                throttle.release(slot);
                            }
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            assert_eq!(throttle.inflight(), 0, "a slot was not given back");
        });
    }

    /// Two threads, a cap of one, slots held until both are done: loom must find the
    /// interleaving where both read 0 and both are admitted, and also executions where one is
    /// turned away. The test fails if loom stops finding the counterexample.
    #[test]
    fn loom_throttle_read_then_increment_exceeds_the_cap() {
        let (executions, over_cap) = crate::sync::loom_count_executions(1, || {
            let throttle = Arc::new(SharedKvThrottle::new(config(1), 1));
            let holders = Arc::new(AtomicU32::new(0));
            let threads: Vec<_> = (0..2)
                .map(|_| {
                    let (throttle, holders) = (throttle.clone(), holders.clone());
                    loom::thread::spawn(move || match throttle.try_acquire(SimTime::ZERO) {
                        Decision::Admit(slot) => {
                            holders.fetch_add(1, Ordering::SeqCst);
                            Some(slot)
                        }
                        Decision::Reject(_) => None,
                    })
                })
                .collect();
            let slots: Vec<Slot> = threads
                .into_iter()
                .filter_map(|thread| thread.join().unwrap())
                .collect();
            // No slot was released before both threads finished: these held at once.
            let held_at_once = holders.load(Ordering::SeqCst);
            for slot in slots {
                throttle.release(SimTime::ZERO, slot);
            }
            held_at_once > 1
        });
        assert!(
            over_cap > 0,
            "loom found no execution over the cap in {executions} executions"
        );
        assert!(
            over_cap < executions,
            "every one of {executions} executions went over the cap"
        );
    }

    /// One slot held; one thread releases it while another acquires: loom must find the
    /// interleaving where the acquire's write erases the release's, leaving a phantom slot.
    #[test]
    fn loom_throttle_read_then_increment_erases_a_release() {
        let (executions, leaked) = crate::sync::loom_count_executions(1, || {
            let throttle = Arc::new(SharedKvThrottle::new(config(2), 1));
            let Decision::Admit(held) = throttle.try_acquire(SimTime::ZERO) else {
                panic!("an empty counter admits");
            };
            let releaser = {
                let throttle = throttle.clone();
                loom::thread::spawn(move || throttle.release(SimTime::ZERO, held))
            };
            let acquirer = {
                let throttle = throttle.clone();
                loom::thread::spawn(move || throttle.try_acquire(SimTime::ZERO))
            };
            releaser.join().unwrap();
            let holders = match acquirer.join().unwrap() {
                Decision::Admit(_slot) => 1,
                Decision::Reject(rejection) => panic!("a cap of 2 rejected: {rejection:?}"),
            };
            throttle.counter(SimTime::ZERO) > holders
        });
        assert!(
            leaked > 0,
            "loom found no lost decrement in {executions} executions"
        );
    }
}

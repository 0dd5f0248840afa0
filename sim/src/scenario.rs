//! A validated scenario: everything one simulation run needs, in types that cannot hold bad
//! values.
//!
//! The scenario file reader (`scenario-file/`) is the only place that builds these from text;
//! tests build them directly. Resources are held in vectors and referred to by typed index
//! ([`ServerId`], [`FlowId`], ...), never by pointer or by name. Constructors that can fail
//! return [`ConfigError`] naming the scenario-file key at fault.

use std::num::{NonZeroU32, NonZeroU64};

use outagelab_model::ConfigError;
use outagelab_model::adaptive_limit::AdaptiveLimitConfig;
use outagelab_model::breaker::BreakerConfig;
use outagelab_model::bulkhead::BulkheadConfig;
use outagelab_model::cache::CacheConfig;
use outagelab_model::lock::{LockConfig, LockToken};
pub use outagelab_model::presets::ReconnectGrowth;
use outagelab_model::rate_limit::RateLimiterConfig;
use outagelab_model::reconnect::ReconnectConfig;
use outagelab_model::retry::RetryConfig;
use outagelab_model::semaphore::SemaphoreConfig;
use outagelab_model::throttle::ThrottleConfig;
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::{Outcome, PercentileRule};

pub use outagelab_model::lock::Mode as LockMode;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id!(/// Index into [`Scenario::servers`].
    ServerId);
id!(/// Index into [`Scenario::connections`].
    ConnectionId);
id!(/// Index into [`Scenario::databases`].
    DatabaseId);
id!(/// Index into [`Scenario::keys`].
    KeyFamilyId);
id!(/// Index into [`Scenario::breakers`].
    BreakerId);
id!(/// Index into [`Scenario::bulkheads`].
    BulkheadId);
id!(/// Index into [`Scenario::semaphores`].
    SemaphoreId);
id!(/// Index into [`Scenario::retries`].
    RetryId);
id!(/// Index into [`Scenario::caches`].
    CacheId);
id!(/// Index into [`Scenario::rate_limits`].
    RateLimitId);
id!(/// Index into [`Scenario::throttles`].
    ThrottleId);
id!(/// Index into [`Scenario::locks`].
    LockId);
id!(/// Index into [`Scenario::kv_stores`].
    KvStoreId);
id!(/// Index into [`Scenario::adaptive_limits`].
    AdaptiveLimitId);
id!(/// Index into [`Scenario::flows`].
    FlowId);
id!(/// Index into [`Scenario::loads`].
    LoadId);
id!(/// Index into [`Scenario::faults`].
    FaultId);
id!(/// Index into [`Scenario::callers`].
    CallerId);
id!(/// Index into [`Scenario::services`].
    ServiceId);
id!(/// Index into [`Scenario::channels`].
    ChannelId);
id!(/// Index into [`Scenario::client_loops`].
    ClientLoopId);

/// One fully resolved scenario (a variant of a scenario file is one of these).
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    /// Root seed; every entity derives its own random stream from it and its name.
    pub seed: u64,
    pub limits: RunLimits,
    /// How events due at the same instant, of the same class, take turns.
    pub ties: TieOrder,
    /// Width of the time-series buckets.
    pub bucket: SimDuration,
    /// How percentiles pick their rank.
    pub percentile_rule: PercentileRule,
    pub servers: Vec<ServerSpec>,
    pub connections: Vec<ConnectionSpec>,
    pub databases: Vec<DatabaseSpec>,
    pub keys: Vec<KeyFamilySpec>,
    pub breakers: Vec<BreakerSpec>,
    pub bulkheads: Vec<BulkheadSpec>,
    pub semaphores: Vec<SemaphoreSpec>,
    pub adaptive_limits: Vec<AdaptiveLimitSpec>,
    pub retries: Vec<RetrySpec>,
    pub caches: Vec<CacheSpec>,
    pub rate_limits: Vec<RateLimitSpec>,
    pub kv_stores: Vec<KvStoreSpec>,
    pub throttles: Vec<ThrottleSpec>,
    pub locks: Vec<LockSpec>,
    /// Callers in front of loads: an upstream proxy, a browser, a sync client.
    pub callers: Vec<CallerSpec>,
    pub flows: Vec<FlowSpec>,
    pub loads: Vec<LoadSpec>,
    pub faults: Vec<FaultSpec>,
    /// How ended requests are answered, when the file has an `[http]` table.
    pub http: Option<crate::HttpSpec>,
    /// Services of several instances (pods), each instance with its own copies of the
    /// per-instance resources its flows use; see [`crate::instances`].
    pub services: Vec<ServiceSpec>,
    /// Pub/Sub channel names, in the order the file first names them.
    pub channels: Vec<String>,
    /// Client event loops that connections share (a Node process, a tokio runtime thread).
    pub client_loops: Vec<ClientLoopSpec>,
}

/// A client's event loop: one thread that builds every command of its connections, one
/// after another, at `write_rate` (copying the bytes into the command). A small command on
/// one connection waits behind the large writes of another connection of the same loop,
/// though its own pipe is idle. With a `writer`, each connection's writer also takes its turn
/// on the loop (see `redis::client_loop`).
#[derive(Clone, Debug)]
pub struct ClientLoopSpec {
    pub name: String,
    pub write_rate: ByteRate,
    pub writer: Option<WriterTurn>,
}

/// A connection's writer on its client's loop: once the loop has built a batch (what was
/// issued before the loop got to it), it copies its share into the socket at `copy_rate`, each
/// command leaving once copied, and the loop builds nothing of a later batch until it has
/// copied up to `copy_before_yield` bytes (`redis::client_loop`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterTurn {
    pub copy_rate: ByteRate,
    /// Positive.
    pub copy_before_yield: u64,
}

/// A service run as several instances (pods): each has its own connections, caches,
/// breakers, bulkheads, semaphores, adaptive limits, retry policies, rate limiters and lock
/// clients, while servers, databases, KV stores, throttles and callers are shared, and so are
/// the buckets of a rate limiter with a store (they are in Redis:
/// [`RateLimitSpec::buckets_of`]). A load that sends one of the service's flows spreads its
/// requests over the instances.
#[derive(Clone, Debug)]
pub struct ServiceSpec {
    pub name: String,
    pub instances: u32,
    pub spread: Spread,
}

/// How a load picks the instance of each request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Spread {
    /// Instance 0, 1, ..., then 0 again, in the order the load sends.
    RoundRobin,
    /// Uniformly at random, from the load's own stream for it.
    Random,
}

/// Which instance of which service a flow is the copy for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowInstance {
    pub service: ServiceId,
    /// From 0.
    pub index: u32,
    /// The flow as the file wrote it (instance 0's copy): what the flow's figures and loads
    /// name.
    pub base: FlowId,
}

/// How events due at the same instant and of the same class (see the rule in
/// docs/scenario-format.md, "Events at the same instant") take turns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TieOrder {
    /// In the order they were scheduled: the fixed rule.
    #[default]
    Scheduled,
    /// In an order drawn from the run's seed: a design whose outcome depends on an accident
    /// of that order shows it across seeds (a swarm test). The classes keep their order.
    Shuffled,
}

/// Bounds that end a run. A run always ends: at `horizon` if set, when every request has
/// ended, when nothing is left that could end the requests still in flight, or at a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLimits {
    /// Stop here and count requests still in flight as unfinished.
    pub horizon: Option<SimTime>,
    /// Budget: the latest virtual time a run may reach.
    pub time_max: SimTime,
    /// Budget: the most events a run may process.
    pub events_max: u64,
    /// Budget: the most memory a run may hold, in bytes, as the simulator estimates it from
    /// what it keeps (requests in flight, queued commands and events, running queries, the
    /// time series so far). The estimate is a count, not a reading of the allocator, so a run
    /// stops at the same instant on every machine.
    pub memory_max: u64,
}

impl RunLimits {
    /// Virtual time a run may reach when the scenario sets no horizon: one day.
    pub const TIME_MAX_DEFAULT: SimTime = SimTime::from_nanos(86_400 * 1_000_000_000);
    /// Events a run may process unless the scenario says otherwise.
    pub const EVENTS_MAX_DEFAULT: u64 = 200_000_000;
    /// Memory a run may hold unless the scenario says otherwise: 4 GiB, a sixth of the
    /// project's 24 GiB machines, so a few variants in one process still fit.
    pub const MEMORY_MAX_DEFAULT: u64 = 4 << 30;
    /// The longest run (horizon or time budget) the simulator accepts: 2^62 ns, about 146
    /// years; latencies up to this length are measured without saturating.
    pub const LENGTH_MAX: SimDuration = SimDuration::from_nanos(1 << 62);
}

/// Bytes per second, at least one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ByteRate(NonZeroU64);

impl ByteRate {
    pub fn new(bytes_per_second: u64) -> Option<ByteRate> {
        NonZeroU64::new(bytes_per_second).map(ByteRate)
    }

    pub fn bytes_per_second(self) -> u64 {
        self.0.get()
    }

    /// Time to move `bytes` at this rate, rounded up to the nanosecond.
    pub fn time_for(self, bytes: u64) -> SimDuration {
        let nanos = (u128::from(bytes) * 1_000_000_000).div_ceil(u128::from(self.0.get()));
        SimDuration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// Requests per second, kept exactly as thousandths of a request per second (so `333.333`
/// is representable and arrival times are computed in integers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    millirequests_per_second: NonZeroU64,
}

impl Rate {
    /// Smallest rate: one request per 1000 seconds.
    pub const MIN_PER_SECOND: f64 = 0.001;
    /// Largest rate: one request per nanosecond.
    pub const MAX_PER_SECOND: f64 = 1e9;

    /// Rejects NaN, infinities, zero, negatives, and rates outside
    /// [`Rate::MIN_PER_SECOND`, `Rate::MAX_PER_SECOND`].
    pub fn per_second(rate: f64) -> Result<Rate, ConfigError> {
        if !rate.is_finite() || rate <= 0.0 {
            return Err(ConfigError::new(
                "rate",
                format!("must be a positive number of requests per second, not {rate}"),
            ));
        }
        if !(Self::MIN_PER_SECOND..=Self::MAX_PER_SECOND).contains(&rate) {
            return Err(ConfigError::new(
                "rate",
                format!(
                    "{rate}/s is outside {}/s..{}/s",
                    Self::MIN_PER_SECOND,
                    Self::MAX_PER_SECOND
                ),
            ));
        }
        let milli = (rate * 1000.0).round();
        if (rate * 1000.0 - milli).abs() > 1e-6 * milli.max(1.0) {
            return Err(ConfigError::new(
                "rate",
                format!("{rate}/s is finer than the 0.001/s a rate is kept to"),
            ));
        }
        let milli = milli as u64;
        Ok(Rate {
            millirequests_per_second: NonZeroU64::new(milli).expect("rate >= 0.001/s"),
        })
    }

    pub fn millirequests_per_second(self) -> u64 {
        self.millirequests_per_second.get()
    }

    /// Offset of arrival number `index` from the first one, when evenly spaced: exactly
    /// `floor(index / rate)`, computed in integers.
    pub fn even_offset(self, index: u64) -> Option<SimDuration> {
        let nanos =
            u128::from(index) * 1_000_000_000_000 / u128::from(self.millirequests_per_second());
        u64::try_from(nanos).ok().map(SimDuration::from_nanos)
    }

    /// An exponential gap between arrivals (mean `1 / rate`) in nanoseconds with 32 fractional
    /// bits, given `-ln(u)` of a uniform draw `u` in the same fixed point. Keeping the fraction
    /// lets a Poisson process at a high rate keep its exact mean.
    pub fn exponential_gap_q32(self, neg_ln_uniform_q32: u64) -> u128 {
        1_000_000_000_000 * u128::from(neg_ln_uniform_q32)
            / u128::from(self.millirequests_per_second())
    }
}

#[derive(Clone, Debug)]
pub struct ServerSpec {
    pub name: String,
    /// Fixed cost of executing any command.
    pub command_cost: SimDuration,
    /// Per-byte part of the cost (request and reply bytes); `None` makes bytes free.
    pub byte_rate: Option<ByteRate>,
    /// Whether keys survive a stop and start.
    pub persistence: bool,
    /// Keys present when the run starts (a warm cache), without expiry.
    pub preload: Vec<Preload>,
    /// How the server counts its memory and what it does over its limit.
    pub memory: MemorySpec,
    /// The server's cron frequency (`hz`): a `CLIENT PAUSE` ends on the first tick at or
    /// after its nominal end, ticks falling at multiples of `1 s / hz` (to the nanosecond,
    /// rounded down) from time zero. `None`: a pause ends exactly at its end (tests that
    /// compute times by hand); the file always sets it (default 10).
    pub hz: Option<NonZeroU32>,
    /// A replica of this primary: it applies each write the primary runs `lag` after it
    /// (asynchronous replication), answers writes from clients with `READONLY`, and can be
    /// promoted by a `failover` of the primary.
    pub replica_of: Option<Replication>,
}

/// How a replica follows its primary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Replication {
    pub primary: ServerId,
    /// How far behind the primary it is: a write reaches it this long after the primary ran
    /// it, if the primary is still running then (a write within `lag` of the primary's end is
    /// lost).
    pub lag: SimDuration,
}

/// A Redis server's memory: each live key takes `key_bytes + value bytes + key_overhead`
/// (an `INCR` counter's value is 8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemorySpec {
    /// Bytes of every key's name.
    pub key_bytes: u32,
    /// Bytes the server spends on every key besides its name and value (dictionary entry,
    /// object header, expiry).
    pub key_overhead: u32,
    /// The limit at the start (`maxmemory`); `None` is unlimited (Redis' `maxmemory 0`).
    pub maxmemory: Option<u64>,
    pub policy: EvictionPolicy,
    pub samples: EvictionSamples,
}

impl MemorySpec {
    /// 16-byte keys, 64 bytes of overhead each, no limit, `noeviction`, 5 samples.
    pub const DEFAULT: MemorySpec = MemorySpec {
        key_bytes: 16,
        key_overhead: 64,
        maxmemory: None,
        policy: EvictionPolicy::NoEviction,
        samples: EvictionSamples::Sampled(NonZeroU32::new(5).expect("5 is not zero")),
    };
}

/// Redis' `maxmemory-policy`: which key a server over its limit evicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionPolicy {
    /// Evict nothing: a command that may grow memory gets an OOM error reply.
    NoEviction,
    /// The least recently used key (read or written).
    AllKeysLru,
    /// The least recently used key among those with a TTL.
    VolatileLru,
    /// A random key.
    AllKeysRandom,
    /// The key with a TTL that expires soonest.
    VolatileTtl,
}

impl EvictionPolicy {
    pub const ALL: [EvictionPolicy; 5] = [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileTtl,
    ];

    /// The name Redis (and the scenario file) gives it.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    pub fn from_name(name: &str) -> Option<EvictionPolicy> {
        Self::ALL.into_iter().find(|policy| policy.name() == name)
    }
}

/// How many keys an eviction looks at to choose its victim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictionSamples {
    /// Draws this many candidates (with replacement, from the server's seeded stream) and
    /// evicts the best of them, as Redis' `maxmemory-samples` does.
    Sampled(NonZeroU32),
    /// Evicts the best key of all candidates: exact LRU (or exact nearest expiry).
    Exact,
}

/// The first `count` keys of a family, present at the start with values of `value_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preload {
    pub family: KeyFamilyId,
    pub count: u32,
    pub value_bytes: u32,
}

/// A client connection (multiplexed: one FIFO pipe in each direction) to one server.
#[derive(Clone, Debug)]
pub struct ConnectionSpec {
    pub name: String,
    pub server: ServerId,
    /// One-way network latency.
    pub latency: SimDuration,
    /// Pipe bandwidth in each direction; `None` is unlimited.
    pub bandwidth: Option<ByteRate>,
    /// Client-side command timeout; `None` waits forever (ioredis' default).
    pub command_timeout: Option<SimDuration>,
    /// Queue commands while disconnected (true) or fail them at once (false).
    pub offline_queue: bool,
    /// Times a command may be carried over a lost connection before it fails; `None` is
    /// unlimited.
    pub max_retries: Option<u32>,
    pub connect_timeout: SimDuration,
    /// Delay before reconnect attempt `n` is `min(n * reconnect_delay, reconnect_delay_max)`
    /// (ioredis' default strategy is 50 ms steps up to 2 s), or with doubling growth
    /// `min(reconnect_delay · 2^(n-1), reconnect_delay_max)` (lettuce's).
    pub reconnect_delay: SimDuration,
    pub reconnect_delay_max: SimDuration,
    /// How the delay grows with `reconnect = "always"` (the other modes have their own).
    pub reconnect_growth: ReconnectGrowth,
    /// Whether the connection is established before the run starts.
    pub connected_at_start: bool,
    pub reconnect: Reconnect,
    /// Most commands a link holds without a reply (sent, offline, or timed out and not yet
    /// answered); one issued beyond it fails at once with `shed`, as lettuce's
    /// `requestQueueSize` and node-redis' `commandsQueueMaxLength` do. `None` is unlimited
    /// (ioredis has no such limit).
    pub pending_max: Option<NonZeroU32>,
    /// A connection in subscriber mode: it sends no command, and acts on the messages it
    /// receives.
    pub subscription: Option<Subscription>,
    /// CLIENT TRACKING on this connection: the server sends invalidations of what it reads.
    pub tracking: Option<Tracking>,
    /// After a failover of its server, connect to the promoted replica (Sentinel, cluster
    /// clients); `false` keeps connecting to the address it was given.
    pub follows_failover: bool,
    /// The event loop that writes its commands, shared with other connections; `None`: the
    /// connection writes at once.
    pub client_loop: Option<ClientLoopId>,
    /// How late the client's timers fire after their deadline (Node's timers run on the next
    /// turn of a busy loop): a command timeout of 100 ms with 1 ms of lateness fails at
    /// 101 ms.
    pub timer_lateness: SimDuration,
}

/// A subscriber connection (`SUBSCRIBE`, or the `REDIRECT` target of client tracking). Each
/// message it receives names a key, which it invalidates in its instance's cache. Pub/Sub is
/// at-most-once: a message published while its link is down is never delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// The channel it subscribes to; `None` when it only receives the invalidations of
    /// tracking connections that redirect to it.
    pub channel: Option<ChannelId>,
    pub invalidates: CacheId,
    /// Empty the cache when the link comes back after a loss: the subscriber cannot know what
    /// it missed meanwhile.
    pub flush_on_reconnect: bool,
}

/// `CLIENT TRACKING ON REDIRECT <id>` (RESP2): the server sends an invalidation to `redirect`
/// (a subscriber on the same server) when a key the tracking connection read is written.
/// Default mode remembers each key the connection read and sends one invalidation per key
/// until it is read again; BCAST sends one for every write of a key of `bcast`'s families,
/// remembering nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracking {
    pub redirect: ConnectionId,
    /// BCAST's prefixes, as key families; empty for default mode.
    pub bcast: Vec<KeyFamilyId>,
}

/// What a client does when its connection is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reconnect {
    /// Reconnects after `reconnect_delay` (ioredis, redis-rs' connection manager).
    Always,
    /// Never reconnects: the first connection was the only one (a `OnceCell`, seed 001's old
    /// design); once it is lost every command fails.
    Never,
    /// A reconnect slot (seed 001's design, `outagelab_model::reconnect`): the live connection
    /// is replaced only when a caller reports a connection-level failure on it; the next
    /// caller connects (single flight, others wait for that attempt); failed attempts open
    /// backoff windows in which callers fail at once (`refused`); a read-only command whose
    /// connection died is replayed once on a fresh one. No offline queue.
    Slot(ReconnectConfig),
    /// redis-rs' `ConnectionManager`: the commands on a lost link fail (`connection_lost`,
    /// nothing is replayed); one reconnect runs for everyone, attempt `n` after
    /// `min(reconnect_delay · 2^n, reconnect_delay_max)` scaled by a uniform draw in [0, 1)
    /// (full jitter), at most `retries` attempts; commands issued meanwhile wait for it and
    /// go out on the new link, or fail `refused` when it gives up. The next command after
    /// that starts a new reconnect.
    Manager { retries: u32 },
}

impl ConnectionSpec {
    /// The delay before reconnect attempt `attempt` (1-based).
    pub fn reconnect_delay_for(&self, attempt: u32) -> SimDuration {
        self.reconnect_growth
            .delay(self.reconnect_delay, self.reconnect_delay_max, attempt)
    }
}

#[derive(Clone, Debug)]
pub struct DatabaseSpec {
    pub name: String,
    /// Time a query takes when the database is not over capacity.
    pub latency: Distribution,
    /// Queries the database runs at full speed; above it, running queries share it and each
    /// runs slower (processor sharing). `None` never degrades.
    pub capacity: Option<u32>,
    /// A connection limit; `None` for none.
    pub connections: Option<ConnectionLimit>,
    /// Thrashing past a load; `None` never collapses.
    pub collapse: Option<Collapse>,
}

/// A database's collapse: once more than `above` queries run, each runs at
/// `throughput_percent` of the speed capacity sharing gives it, until fewer than
/// `recover_below` run. Validated: `recover_below < above`, `throughput_percent` in 1..=99.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Collapse {
    pub above: u32,
    pub throughput_percent: u32,
    pub recover_below: u32,
}

/// A database's connection limit: at most `max` queries hold a connection (running or
/// waiting for a lock); up to `queue_max` more wait for one in arrival order, and the rest
/// are refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimit {
    /// Non-zero.
    pub max: u32,
    pub queue_max: u32,
}

/// A distribution of durations. Sampling uses integers only, so draws are identical on every
/// platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    Constant(SimDuration),
    /// Uniform over `[min, max]`, to the nanosecond.
    Uniform {
        min: SimDuration,
        max: SimDuration,
    },
    /// `min` plus an exponential with the given mean.
    Exponential {
        min: SimDuration,
        mean: SimDuration,
    },
}

impl Distribution {
    pub fn uniform(min: SimDuration, max: SimDuration) -> Result<Distribution, ConfigError> {
        if min > max {
            return Err(ConfigError::new("min", format!("{min} is above max {max}")));
        }
        Ok(Distribution::Uniform { min, max })
    }

    pub fn exponential(min: SimDuration, mean: SimDuration) -> Result<Distribution, ConfigError> {
        if mean.is_zero() {
            return Err(ConfigError::new(
                "mean",
                "must be longer than zero (use a constant latency instead)",
            ));
        }
        Ok(Distribution::Exponential { min, mean })
    }
}

/// A named family of keys: a request draws one key of the family for each step that names it
/// (the same key for every step of the request). A family of one is a single fixed key.
#[derive(Clone, Debug)]
pub struct KeyFamilySpec {
    pub name: String,
    pub count: u32,
    pub distribution: KeyDistribution,
}

/// How a request picks its key in a family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyDistribution {
    Uniform,
    /// A share of the requests (in thousandths) go to the first `hot_keys` keys, uniformly;
    /// the rest to the other keys, uniformly. `0 < hot_keys < count`.
    Hot {
        hot_keys: u32,
        share_permille: u32,
    },
}

/// A set of outcomes (used to say which errors a breaker counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OutcomeSet(u16);

impl OutcomeSet {
    pub fn new(outcomes: impl IntoIterator<Item = Outcome>) -> Self {
        OutcomeSet(
            outcomes
                .into_iter()
                .fold(0, |bits, outcome| bits | 1 << outcome.index()),
        )
    }

    /// Network errors and timeouts: what a breaker around a remote store should count.
    pub fn network_errors() -> Self {
        Self::new([Outcome::Timeout, Outcome::Refused, Outcome::ConnectionLost])
    }

    /// Every error a call can end with: all outcomes but `ok`, `breaker_open` (the breaker's
    /// own refusal) and `cancelled` (no step sees it). What the breaker libraries count by
    /// default (resilience4j, Polly, opossum and gobreaker record every exception or error).
    pub fn every_error() -> Self {
        Self::new(
            (Outcome::ALL.iter().copied())
                .filter(|o| !matches!(o, Outcome::Ok | Outcome::BreakerOpen | Outcome::Cancelled)),
        )
    }

    pub fn contains(self, outcome: Outcome) -> bool {
        self.0 & (1 << outcome.index()) != 0
    }
}

#[derive(Clone, Debug)]
pub struct BreakerSpec {
    pub name: String,
    /// A disabled breaker admits every call (variants switch breakers on and off).
    pub enabled: bool,
    pub config: BreakerConfig,
    /// Which error outcomes count as failures; the others are uncounted (the config's
    /// `uncounted_as` says what they count as).
    pub counts: OutcomeSet,
    /// Which error outcomes count neither way, whatever `counts` and `uncounted_as` say
    /// (resilience4j's `ignoreExceptions`, gobreaker's `IsExcluded`). Empty by default.
    pub ignores: OutcomeSet,
}

impl BreakerSpec {
    /// The breaker's error classifier, for the simulator and the live runner alike.
    pub fn classifier(&self) -> BreakerClassifier {
        BreakerClassifier {
            counts: self.counts,
            ignores: self.ignores,
        }
    }
}

/// Which errors a breaker counts and which it ignores; the rule that applies them, shared by
/// the simulator and the live runner, is `rules::breaker_outcome`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerClassifier {
    pub counts: OutcomeSet,
    pub ignores: OutcomeSet,
}

#[derive(Clone, Debug)]
pub struct BulkheadSpec {
    pub name: String,
    /// A disabled bulkhead admits every call.
    pub enabled: bool,
    pub config: BulkheadConfig,
}

/// A cap on work in flight by count and by bytes, with no queue: work over the cap is dropped
/// (a `shed` error of its step). Seed 000's fix for fire-and-forget blob writes.
#[derive(Clone, Debug)]
pub struct SemaphoreSpec {
    pub name: String,
    pub enabled: bool,
    pub config: SemaphoreConfig,
}

/// An adaptive concurrency limit (Netflix's concurrency-limits): a cap on calls in flight that
/// grows while calls succeed and shrinks when they are dropped; over it a call is refused with
/// `shed` at once.
#[derive(Clone, Debug)]
pub struct AdaptiveLimitSpec {
    pub name: String,
    /// A disabled limit admits every call.
    pub enabled: bool,
    pub config: AdaptiveLimitConfig,
    /// Which errors are drops (the signal of too much load that lowers the limit); other
    /// errors are ignored, successes are samples of their latency.
    pub drops: OutcomeSet,
}

/// A client's retry policy: a step that names it tries again, after a backoff and with the
/// budget's permission, when it fails with one of `retry_on`. One budget per policy: steps
/// that name the same policy share it.
#[derive(Clone, Debug)]
pub struct RetrySpec {
    pub name: String,
    /// A disabled policy never retries.
    pub enabled: bool,
    pub config: RetryConfig,
    pub retry_on: OutcomeSet,
}

/// An in-process (L1) cache: bounded by entries and bytes, least recently used first out, with
/// a TTL. Reading and writing it takes no virtual time.
#[derive(Clone, Debug)]
pub struct CacheSpec {
    pub name: String,
    pub config: CacheConfig,
}

/// A rate limiter. With a `store`, each check is a round trip to Redis on that connection (the
/// bucket's arithmetic is the limiter's; the command stands for the check-and-charge script),
/// and a check whose round trip fails follows `when_store_unreachable`; without one the
/// limiter is local and answers at once.
#[derive(Clone, Debug)]
pub struct RateLimitSpec {
    pub name: String,
    /// A disabled limiter admits everything.
    pub enabled: bool,
    pub config: RateLimiterConfig,
    pub store: Option<ConnectionId>,
    /// The limiter whose buckets this one checks, when they are not its own: an instance's
    /// copy of a limiter with a store checks the counters in Redis that every instance
    /// reaches, which instance 0's copy holds ([`crate::instances`]). `None`: its own.
    ///
    /// Invariant ([`Scenario::check_references`]): the limiter named keeps its own buckets,
    /// has the same config and `enabled`, and a store on the same server as this one's.
    pub buckets_of: Option<RateLimitId>,
}

impl RateLimitSpec {
    /// The limiter whose buckets the limiter `id` (this one) checks: itself, or the one
    /// [`RateLimitSpec::buckets_of`] names.
    pub fn buckets(&self, id: RateLimitId) -> RateLimitId {
        self.buckets_of.unwrap_or(id)
    }
}

/// A key-value store with separate reads and writes (Cloudflare KV, say): a read takes
/// `read_latency` and may lag the latest write by up to `staleness_max`; a write lands
/// `write_latency` after it is sent.
#[derive(Clone, Debug)]
pub struct KvStoreSpec {
    pub name: String,
    pub read_latency: Distribution,
    pub write_latency: Distribution,
    pub staleness_max: SimDuration,
}

/// A per-key cap on work in flight (seed 004's cascade throttle).
#[derive(Clone, Debug)]
pub struct ThrottleSpec {
    pub name: String,
    /// A disabled throttle admits everything.
    pub enabled: bool,
    pub config: ThrottleConfig,
    pub form: ThrottleForm,
    /// Chance, in thousandths, that a release is lost (a fire-and-forget decrement).
    pub release_loss_permille: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThrottleForm {
    /// Check-and-increment in one step.
    Atomic,
    /// Read, then increment, on a KV store: not atomic.
    Kv { store: KvStoreId },
}

/// What a throttle step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThrottleOp {
    /// Take a slot of the request's key, or fail with `rate_limited` (429).
    Acquire,
    /// Give back the slot the request holds (nothing if it holds none).
    Release,
}

/// A distributed read-write lock over Redis (seed 000): its steps name the connection and the
/// key family it lives on.
#[derive(Clone, Debug)]
pub struct LockSpec {
    pub name: String,
    pub config: LockConfig,
}

/// What a lock step does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOp {
    /// Take the lock on the request's key, retrying while it is taken, or fail with
    /// `lock_timeout` after the lock's `acquire_timeout`.
    Acquire(LockMode),
    /// Give back the lock the request holds (a compare-and-delete with its token; nothing if it
    /// holds none).
    Release,
}

/// A lock command as it goes to the server, with the token of the acquire it belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LockCommand {
    pub token: LockToken,
    pub kind: LockCommandKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockCommandKind {
    /// Exclusive: `SET key token NX PX lease`, taken also while a live reader holds the key;
    /// shared: a script that adds a reader with its own lease unless a live writer holds it.
    Acquire { mode: LockMode, lease: SimDuration },
    /// A compare-and-delete script: removes the holder carrying the token.
    Release,
}

impl LockCommand {
    /// Whether it is a write that needs memory (refused when the server is out of memory and
    /// does not evict). The one place that says so for the lock commands: an acquire stores a
    /// key or a reader; a release only deletes, which a full server still runs.
    pub fn needs_memory(self) -> bool {
        matches!(self.kind, LockCommandKind::Acquire { .. })
    }
}

/// What a cache step does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOp {
    /// A hit or a miss (an expired entry is a miss).
    Get,
    Put {
        value_bytes: u32,
    },
    Invalidate,
    /// Empties the whole cache (what a pod does when its invalidation feed reconnects).
    Flush,
}

/// A request type: steps run in order.
#[derive(Clone, Debug)]
pub struct FlowSpec {
    pub name: String,
    pub steps: Vec<StepSpec>,
    /// For a flow of a service of several instances: which instance's copy it is. Every copy
    /// counts in the figures of its `base`.
    pub instance: Option<FlowInstance>,
}

impl FlowSpec {
    /// The flow whose figures this one's requests count in: its base for an instance's copy,
    /// itself otherwise.
    pub fn reports_as(&self, id: FlowId) -> FlowId {
        self.instance.map_or(id, |instance| instance.base)
    }
}

#[derive(Clone, Debug)]
pub struct StepSpec {
    pub action: StepAction,
    /// The policies a request passes through before the action, outermost first: it enters
    /// each in this order, and leaves them in the reverse order when the step ends. At most one
    /// of each kind. See [`PolicyKind::DEFAULT_ORDER`] for the order a file gets when it does
    /// not say.
    pub policies: Vec<PolicyRef>,
    pub on_error: OnError,
    pub on_hit: OnHit,
    /// Runs even when the request does not reach it: an earlier step failed it, a hit finished
    /// it, or `on_hit` jumped past this step. It then runs in the background: a lock release
    /// or a slot release in a `finally` block.
    pub finally: bool,
    /// On a `reconnect = slot` connection, replay this step's command after a connection-level
    /// failure even if it writes (seed 001's opt-in for the rate-limit admission script): the
    /// write may then be applied twice, which `writes_applied_twice` counts.
    pub replay_writes: bool,
}

impl StepSpec {
    /// Whether the step can end in an error, so that its `on_error` decides something: its
    /// action can fail (everything but local work, an in-process cache op and a call that
    /// never fails), or a policy
    /// around it can refuse it (every kind but a retry, which only repeats what fails inside).
    pub fn can_fail(&self) -> bool {
        let action_can_fail = !matches!(
            self.action,
            StepAction::Work { .. }
                | StepAction::Cache { .. }
                | StepAction::Call {
                    error_permille: 0,
                    ..
                }
        );
        action_can_fail
            || self
                .policies
                .iter()
                .any(|policy| policy.kind() != PolicyKind::Retry)
    }
}

/// A policy instance a step passes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyRef {
    /// Tries the layers inside it and the action again, after a backoff and with its budget's
    /// permission, when the step fails with an error the policy retries on.
    Retry(RetryId),
    /// A full bulkhead queues the request; a full queue refuses it with `shed`.
    Bulkhead(BulkheadId),
    /// Taken with the step's request bytes; over a cap the step fails with `shed` at once.
    Semaphore(SemaphoreId),
    /// An open breaker refuses the step with `breaker_open` before any I/O.
    Breaker(BreakerId),
    /// Over its current limit, the step is refused with `shed` at once.
    AdaptiveLimit(AdaptiveLimitId),
}

impl PolicyRef {
    pub fn kind(self) -> PolicyKind {
        match self {
            PolicyRef::Retry(_) => PolicyKind::Retry,
            PolicyRef::Bulkhead(_) => PolicyKind::Bulkhead,
            PolicyRef::Semaphore(_) => PolicyKind::Semaphore,
            PolicyRef::Breaker(_) => PolicyKind::Breaker,
            PolicyRef::AdaptiveLimit(_) => PolicyKind::AdaptiveLimit,
        }
    }

    /// Its index among the policies of its kind.
    pub fn index(self) -> usize {
        match self {
            PolicyRef::Retry(id) => id.index(),
            PolicyRef::Bulkhead(id) => id.index(),
            PolicyRef::Semaphore(id) => id.index(),
            PolicyRef::Breaker(id) => id.index(),
            PolicyRef::AdaptiveLimit(id) => id.index(),
        }
    }
}

/// The kinds of policy a step can list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PolicyKind {
    Retry,
    Bulkhead,
    Semaphore,
    Breaker,
    AdaptiveLimit,
}

impl PolicyKind {
    /// Every kind, in declaration order: `kind as usize` is its index here.
    pub const ALL: [PolicyKind; 5] = [
        PolicyKind::Retry,
        PolicyKind::Bulkhead,
        PolicyKind::Semaphore,
        PolicyKind::Breaker,
        PolicyKind::AdaptiveLimit,
    ];

    /// The order of a step that does not list its policies, outermost first: a retry tries the
    /// whole step again; the bulkhead is entered before the semaphore and the breaker, so a
    /// request queued in it holds nothing else, and a shed is not a breaker failure.
    ///
    /// An adaptive limit comes last: it measures the latency of the call it admits, so
    /// nothing else should stand between them.
    pub const DEFAULT_ORDER: [PolicyKind; 5] = [
        PolicyKind::Retry,
        PolicyKind::Bulkhead,
        PolicyKind::Semaphore,
        PolicyKind::Breaker,
        PolicyKind::AdaptiveLimit,
    ];

    /// Whether a policy of this kind can refuse a request with `shed` (what a breaker listed
    /// outside it may count). Exhaustive, so a new kind must say.
    pub fn sheds(self) -> bool {
        match self {
            PolicyKind::Bulkhead | PolicyKind::Semaphore | PolicyKind::AdaptiveLimit => true,
            PolicyKind::Retry | PolicyKind::Breaker => false,
        }
    }

    /// The name a scenario file uses for the kind (its step key).
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::Retry => "retry",
            PolicyKind::Bulkhead => "bulkhead",
            PolicyKind::Semaphore => "semaphore",
            PolicyKind::Breaker => "breaker",
            PolicyKind::AdaptiveLimit => "adaptive_limit",
        }
    }
}

impl Scenario {
    /// How many policies of `kind` the scenario declares.
    pub fn policy_count(&self, kind: PolicyKind) -> usize {
        match kind {
            PolicyKind::Retry => self.retries.len(),
            PolicyKind::Bulkhead => self.bulkheads.len(),
            PolicyKind::Semaphore => self.semaphores.len(),
            PolicyKind::Breaker => self.breakers.len(),
            PolicyKind::AdaptiveLimit => self.adaptive_limits.len(),
        }
    }

    /// What a step does, as messages name it: `GET cache`, `db main`, `work`, `throttle
    /// cascade acquire`.
    pub fn step_name(&self, step: &StepSpec) -> String {
        match step.action {
            StepAction::Redis {
                connection,
                command,
                ..
            } => format!(
                "{} {}",
                command.name(),
                self.connections[connection.index()].name
            ),
            StepAction::Database { database, .. } => {
                format!("db {}", self.databases[database.index()].name)
            }
            StepAction::Work { .. } => "work".to_owned(),
            StepAction::Call { .. } => "call".to_owned(),
            StepAction::RateLimit { limiter, .. } => {
                format!("rate_limit {}", self.rate_limits[limiter.index()].name)
            }
            StepAction::Throttle { throttle, op, .. } => {
                let op = match op {
                    ThrottleOp::Acquire => "acquire",
                    ThrottleOp::Release => "release",
                };
                format!("throttle {} {op}", self.throttles[throttle.index()].name)
            }
            StepAction::Cache { cache, op, .. } => {
                let op = match op {
                    CacheOp::Get => "get",
                    CacheOp::Put { .. } => "put",
                    CacheOp::Invalidate => "invalidate",
                    CacheOp::Flush => "flush",
                };
                format!("cache {} {op}", self.caches[cache.index()].name)
            }
            StepAction::Lock { lock, op, .. } => {
                let op = match op {
                    LockOp::Acquire(_) => "acquire",
                    LockOp::Release => "release",
                };
                format!("lock {} {op}", self.locks[lock.index()].name)
            }
        }
    }

    /// A policy as messages name it: `bulkhead db`.
    pub fn policy_name(&self, policy: PolicyRef) -> String {
        let name = match policy {
            PolicyRef::Retry(id) => &self.retries[id.index()].name,
            PolicyRef::Bulkhead(id) => &self.bulkheads[id.index()].name,
            PolicyRef::Semaphore(id) => &self.semaphores[id.index()].name,
            PolicyRef::Breaker(id) => &self.breakers[id.index()].name,
            PolicyRef::AdaptiveLimit(id) => &self.adaptive_limits[id.index()].name,
        };
        format!("{} {name}", policy.kind().name().replace('_', " "))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepAction {
    Redis {
        connection: ConnectionId,
        command: RedisCommand,
        key: KeyFamilyId,
    },
    Database {
        database: DatabaseId,
        /// Client-side query timeout; the query keeps running on the database.
        timeout: Option<SimDuration>,
        /// This query's latency, instead of the database's.
        latency: Option<Distribution>,
        /// An advisory lock (a key of this family) the query holds while it runs.
        lock: Option<KeyFamilyId>,
        /// The data the query reads or writes, when its freshness is followed: the request's
        /// key of a family, whose committed version it reads (or makes, for a write).
        data: Option<DataAccess>,
    },
    /// Local work (the service's own time: parsing, auth, rendering) that cannot fail; its
    /// duration is drawn per request from the flow's own random stream.
    Work { duration: Distribution },
    /// A call to a dependency modelled only by its answers (a payments API, another team's
    /// service): its latency drawn per call, and `error_permille` thousandths of calls
    /// failing with `error` at the end of that latency. Both draws come from the flow's own
    /// stream for calls, latency first.
    Call {
        latency: Distribution,
        error_permille: u32,
        error: Outcome,
    },
    /// A rate-limit check, costing one token: `rate_limited` when refused. A limiter with a
    /// store checks under `key` on its connection.
    RateLimit {
        limiter: RateLimitId,
        key: Option<KeyFamilyId>,
    },
    /// A throttle step on the request's key of `key`.
    Throttle {
        throttle: ThrottleId,
        op: ThrottleOp,
        key: KeyFamilyId,
    },
    /// An operation on an in-process cache; takes no time. Every op but `Flush` has a key.
    Cache {
        cache: CacheId,
        op: CacheOp,
        key: Option<KeyFamilyId>,
    },
    /// A distributed lock step on the request's key of `key`, through `connection`: each
    /// attempt and the release are Redis commands.
    Lock {
        lock: LockId,
        op: LockOp,
        connection: ConnectionId,
        key: KeyFamilyId,
    },
}

/// What a database step does to the request's key of a family: read the committed value, or
/// commit a new one (its version is the last one plus one). A value carries its version as it
/// is copied into Redis and into L1 caches, so a read served from a copy older than the last
/// commit is counted stale.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataAccess {
    pub key: KeyFamilyId,
    pub write: bool,
}

/// Protocol overhead of one command on the wire (command name, key, framing), in bytes.
pub(crate) const COMMAND_OVERHEAD_BYTES: u64 = 32;
/// Bytes of a lock's token on the wire (a UUID).
pub(crate) const LOCK_TOKEN_BYTES: u64 = 36;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedisCommand {
    Get,
    Set {
        value_bytes: u32,
        ttl: Option<SimDuration>,
    },
    /// `SET key value NX PX ttl`: a lock. Fails with `lock_busy` when the key exists.
    SetNxPx {
        value_bytes: u32,
        ttl: SimDuration,
    },
    Incr,
    Del,
    /// `PUBLISH channel key`: the step's key is the message (an invalidation).
    Publish {
        channel: ChannelId,
    },
    /// A lock step's command (an acquire attempt or a release); a write (see
    /// [`LockCommand::needs_memory`]).
    Lock(LockCommand),
}

impl RedisCommand {
    /// Whether executing it twice does the same as once: the replay allowlist of seed 001.
    pub fn is_read_only(self) -> bool {
        self.replay_kind().is_read_only()
    }

    /// The command as the replay rules of `outagelab_model::reconnect` know it.
    pub fn replay_kind(self) -> outagelab_model::reconnect::Command {
        use outagelab_model::reconnect::Command;
        match self {
            RedisCommand::Get => Command::Get,
            RedisCommand::Set { .. } | RedisCommand::SetNxPx { .. } => Command::Set,
            RedisCommand::Incr => Command::IncrBy,
            RedisCommand::Del => Command::Del,
            RedisCommand::Publish { .. } => Command::Publish,
            RedisCommand::Lock(lock) => match lock.kind {
                LockCommandKind::Acquire {
                    mode: LockMode::Exclusive,
                    ..
                } => Command::Set,
                LockCommandKind::Acquire { .. } | LockCommandKind::Release => Command::EvalSha,
            },
        }
    }

    /// Whether Redis flags the command `denyoom` (it may grow memory): over `maxmemory`, a
    /// server that cannot evict enough refuses it with an OOM error reply. Reads and `DEL` run.
    /// The one place that says so: a new command is classified here.
    pub fn denyoom(self) -> bool {
        match self {
            RedisCommand::Set { .. } | RedisCommand::SetNxPx { .. } | RedisCommand::Incr => true,
            RedisCommand::Get | RedisCommand::Del | RedisCommand::Publish { .. } => false,
            // A lock acquire is a SET NX or a script that adds a reader; a release only deletes.
            RedisCommand::Lock(lock) => lock.needs_memory(),
        }
    }

    /// Bytes the command puts on the wire (its value included), whatever its key: what a
    /// semaphore's byte cap counts for a step that sends it.
    pub fn request_bytes(self) -> u64 {
        COMMAND_OVERHEAD_BYTES
            + match self {
                RedisCommand::Set { value_bytes, .. }
                | RedisCommand::SetNxPx { value_bytes, .. } => u64::from(value_bytes),
                RedisCommand::Get
                | RedisCommand::Incr
                | RedisCommand::Del
                | RedisCommand::Publish { .. } => 0,
                RedisCommand::Lock(_) => LOCK_TOKEN_BYTES,
            }
    }

    pub fn name(self) -> &'static str {
        match self {
            RedisCommand::Get => "GET",
            RedisCommand::Set { .. } => "SET",
            RedisCommand::SetNxPx { .. } => "SET NX PX",
            RedisCommand::Incr => "INCR",
            RedisCommand::Del => "DEL",
            RedisCommand::Publish { .. } => "PUBLISH",
            RedisCommand::Lock(lock) => match lock.kind {
                LockCommandKind::Acquire {
                    mode: LockMode::Exclusive,
                    ..
                } => "SET NX PX (lock)",
                LockCommandKind::Acquire { .. } => "EVALSHA (shared lock)",
                LockCommandKind::Release => "EVALSHA (compare-and-delete)",
            },
        }
    }
}

/// What an error of a step does to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// The request ends with the step's error.
    Fail,
    /// The request goes on to the next step (fail-open).
    Next,
    /// Fire-and-forget: the request does not wait for the step at all; the step runs in the
    /// background and its errors are only counted.
    Ignore,
}

impl OnError {
    /// As the file writes it.
    pub fn name(self) -> &'static str {
        match self {
            OnError::Fail => "fail",
            OnError::Next => "next",
            OnError::Ignore => "ignore",
        }
    }
}

/// What a cache hit (a `GET` that found its key) does to its request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnHit {
    Next,
    /// The request ends successfully (a cache-aside read that needs no database).
    Finish,
    /// The request goes on at this later step (e.g. to fill an L1 with what L2 returned).
    Goto(u16),
}

impl OnHit {
    /// As a message says it: `next`, `finish`, `goto step 3`.
    pub fn name(self) -> String {
        match self {
            OnHit::Next => "next".to_owned(),
            OnHit::Finish => "finish".to_owned(),
            OnHit::Goto(step) => format!("goto step {step}"),
        }
    }
}

/// An open-loop arrival process sending one request type.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub name: String,
    pub flow: FlowId,
    pub start: SimTime,
    pub arrivals: Arrivals,
    /// The caller each of its requests goes through, if any: then a request of the load is a
    /// call, and each of the caller's attempts is a request of the flow.
    pub caller: Option<CallerId>,
}

/// A caller in front of a service (seed 003's upstream with a 30 s timeout that retries): it
/// sends a request, gives up on it after `timeout` (the request keeps running in the
/// service: nothing tells it), and retries by `retry`. What the load's users see is the
/// call's outcome; what the service sees is every attempt.
#[derive(Clone, Debug)]
pub struct CallerSpec {
    pub name: String,
    /// The caller's own timeout per attempt; `None` waits as long as the service takes.
    pub timeout: Option<SimDuration>,
    /// How it retries (its own instance of the policy: its own budget); the policy's
    /// `retry_on` says which outcomes, `timeout` included, it retries.
    pub retry: Option<RetryId>,
    /// Whether the service hears that the caller gave up on an attempt (the caller closes
    /// its connection; the service checks its request context between steps): the request
    /// stops before its next step and ends `cancelled`. The step it is in runs to its end.
    pub cancel_on_timeout: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Arrivals {
    /// Arrival `i` at `start + floor(i / rate)`.
    Even { rate: Rate, end: LoadEnd },
    /// Exponential gaps with mean `1 / rate`.
    Poisson { rate: Rate, end: LoadEnd },
    /// A rate that changes stage by stage (k6's ramping arrival rate), evenly spaced or
    /// Poisson: see [`RateStages`] and `open_loop` for the instants. It ends with its last
    /// stage.
    Staged { stages: RateStages, poisson: bool },
    /// `count` requests at `start`, in order.
    Burst { count: u64 },
    /// A closed loop: callers that each send one request, wait for its end, think, and send
    /// the next (a load generator's connections, a sync client's workers).
    Closed(ClosedLoop),
}

/// A closed-loop load. Each iteration is one request with its own outcome; a caller sends
/// nothing while its request is in flight, so a load of hung requests stops sending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClosedLoop {
    /// Callers, at least one.
    pub workers: u32,
    /// The wait between a request's end and the same caller's next request.
    pub think: Distribution,
    /// Caller `i` sends its first request at `start + stagger × i / workers`.
    pub stagger: SimDuration,
    /// Requests per caller; `None` for no limit.
    pub iterations: Option<u64>,
    /// No request is sent at or after this instant; `None` for no limit. At least one of
    /// `iterations` and `until` is set.
    pub until: Option<SimTime>,
}

/// A load's rate over time: it starts at `start_milli` and each stage moves it linearly to
/// the stage's target over the stage's duration (a stage whose target is the rate it starts
/// at holds it; a step is a very short stage). Rates are in thousandths of a request per
/// second, like [`Rate`], and may be zero: a load at rate zero sends nothing until its rate
/// rises.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RateStages {
    /// The rate at the load's start (k6's `startRate`).
    pub start_milli: u64,
    /// At least one; each longer than zero.
    pub stages: Vec<RateStage>,
}

/// One stage of [`RateStages`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateStage {
    pub duration: SimDuration,
    /// The rate at the stage's end, in thousandths of a request per second.
    pub target_milli: u64,
}

impl RateStages {
    /// How long the stages last together (the load sends nothing after).
    pub fn duration(&self) -> SimDuration {
        self.stages.iter().fold(SimDuration::ZERO, |total, stage| {
            total.saturating_add(stage.duration)
        })
    }

    /// The requests the stages send on average: the area under the rate curve.
    pub fn expected_requests(&self) -> f64 {
        let mut from = self.start_milli;
        let mut total = 0.0;
        for stage in &self.stages {
            let seconds = stage.duration.as_nanos() as f64 / 1e9;
            total += (from + stage.target_milli) as f64 / 2000.0 * seconds;
            from = stage.target_milli;
        }
        total
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadEnd {
    /// After this many requests.
    Count(u64),
    /// No arrival at or after this instant.
    Until(SimTime),
}

#[derive(Clone, Debug)]
pub struct FaultSpec {
    pub name: String,
    pub target: FaultTarget,
    pub kind: FaultKind,
    pub at: SimTime,
    /// `None` lasts to the end of the run.
    pub duration: Option<SimDuration>,
}

impl FaultSpec {
    pub fn end(&self) -> Option<SimTime> {
        self.duration.map(|d| self.at.saturating_add(d))
    }
}

/// What a fault acts on, each with its own kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    Server(ServerId),
    /// One client connection: `kill` (CLIENT KILL of that client) or `disconnect`.
    Connection(ConnectionId),
    /// A database: `slow` or `refuse`.
    Database(DatabaseId),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// `CLIENT PAUSE`: commands are accepted but not executed until the pause ends (with
    /// `Write`, only writes wait: reads are served); new connections are accepted. The pause
    /// ends on the server's first cron tick at or after the fault's end (see `ServerSpec::hz`).
    Pause(PauseMode),
    /// The process stops (`docker pause`, SIGSTOP): no replies, connections stay open, and
    /// connection attempts get no answer.
    Hang,
    /// The process exits: connections are dropped and new ones refused until it starts again
    /// at the end of the fault; without persistence its keys are gone.
    Stop,
    /// The node dies (an OOM-killed pod, a lost host): connections are dropped, and its
    /// address answers nothing while the fault lasts, so connection attempts wait out their
    /// connect timeout; at the end a new process starts there, empty unless `persistence`.
    Crash,
    /// `CLIENT KILL` of every client, at one instant: connections are dropped (a reply not yet
    /// on the wire is lost), the process keeps running with its keys, and new connections are
    /// accepted at once. Takes no duration.
    Kill,
    /// `CONFIG SET maxmemory`: from this instant the server's limit is this many bytes
    /// (`None`: unlimited), and it evicts at once to get under it. Takes no duration.
    MaxMemory(Option<u64>),
    /// `FLUSHALL`: every key is gone at this instant. Takes no duration.
    FlushAll,
    /// A failover away from this primary: the primary's process dies at the start (as a
    /// `stop`, and it stays down); at the end (detection and election done), `replica` is
    /// promoted: it takes writes, and every connection that follows failovers
    /// (`follows_failover`, as Sentinel- and cluster-aware clients do) connects to it from its
    /// next attempt. It has the writes it had replicated; those within its lag of the
    /// primary's end are lost. With `unreachable`, the primary's host dies with it (as a
    /// `crash`): its address answers nothing from the start, so a connection attempt there
    /// waits out its connect timeout instead of being refused.
    Failover {
        replica: ServerId,
        unreachable: bool,
    },
    /// While it lasts, the server answers the commands in `commands` with this error reply
    /// instead of running them (a demoted replica's `READONLY`, a restarting server's
    /// `LOADING`).
    ErrorReply {
        error: ErrorReply,
        commands: CommandScope,
    },
    /// On a server: while it lasts, its thread runs `slowdown_permille / 1000` times slower
    /// (a container's CPU quota, a noisy neighbour, a BGSAVE fork copying pages): a command
    /// that starts takes that many times its cost, set when it starts. With several at once,
    /// the slowest holds; a restart inside it stays throttled.
    CpuThrottle { slowdown_permille: u32 },
    /// On a connection: the network between the client and its server is cut while it
    /// lasts. The link drops (the client hears it after what is already on the wire) and every connection
    /// attempt is refused until the fault ends; the server and its other clients are not
    /// touched.
    Disconnect,
    /// On a database: while it lasts, every query's work runs `slowdown_permille / 1000`
    /// times slower (a vacuum, a noisy neighbour, a cold cache after a restart): queries
    /// running when it starts slow down from that instant, and speed up again at its end.
    /// With several at once, the slowest holds.
    Slow { slowdown_permille: u32 },
    /// On a database: while it lasts, every query that starts is refused at once (`refused`:
    /// the listener gone, `max_connections` taken by something else); queries already running
    /// finish.
    Refuse,
    /// On a database with `max_connections`: while it lasts, something else holds
    /// `connections` of them (a batch job, a leaked pool, another service): queries that
    /// find the rest taken wait in the connection queue or are refused, as when the pool is
    /// full; at its end the held connections come back and the oldest waiters take them.
    PoolExhausted { connections: u32 },
    /// On a database: while it lasts, something else holds every advisory lock of key family
    /// `family` (a migration's table lock, a long transaction): a query that needs one waits,
    /// holding its connection, until the fault ends, then queues for its own lock in arrival
    /// order. Queries that hold one, or already wait for one, when it starts take their turns
    /// as before: the fault holds the locks against queries that ask after it starts.
    LockHeld { family: KeyFamilyId },
    /// On a connection: while it lasts, every command and reply sent on it takes `added`
    /// longer one way, drawn per item from `added ± jitter` (toxiproxy's `latency` toxic, in
    /// both directions); nothing overtakes what was sent before it. Toxics on one connection
    /// add up.
    Latency {
        added: SimDuration,
        jitter: SimDuration,
    },
    /// On a connection: while it lasts, what is sent on it in either direction moves at this
    /// rate instead of the connection's `bandwidth` (toxiproxy's `bandwidth` toxic); with
    /// several, the slowest holds.
    Bandwidth(ByteRate),
    /// On a connection: while it lasts, each command or reply sent on it is lost with
    /// probability `ppm` per million on each transmission and sent again after TCP's
    /// retransmission timeout, `retransmit`, doubled at each loss (Linux's backoff): it
    /// arrives `retransmit × (2^k - 1)` late after `k` losses (at most
    /// [`crate::rules::Toxics::LOSSES_MAX`]), and what was sent after it waits behind it (TCP
    /// keeps the stream's order). Losses combine: `1 - Π (1 - p)`.
    PacketLoss { ppm: u32, retransmit: SimDuration },
    /// On a connection: while it lasts, a close takes `delay` longer to reach the other side
    /// (toxiproxy's `slow_close`): a client whose connection the server drops (a `kill`, a
    /// `stop`) hears it that much later, with its commands still waiting. Several add up.
    SlowClose { delay: SimDuration },
}

/// Which commands a `CLIENT PAUSE` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseMode {
    /// Every command (`CLIENT PAUSE ms ALL`).
    All,
    /// Writes only (`CLIENT PAUSE ms WRITE`): reads are served.
    Write,
}

/// Which commands a fault acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandScope {
    All,
    /// Commands that are not read-only (see [`RedisCommand::is_read_only`]).
    Writes,
}

impl CommandScope {
    pub fn covers(self, command: RedisCommand) -> bool {
        match self {
            CommandScope::All => true,
            CommandScope::Writes => !command.is_read_only(),
        }
    }
}

/// An error reply a Redis server gives instead of running a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorReply {
    /// Over `maxmemory`, a command that may grow memory.
    Oom,
    /// A replica (a primary demoted by a failover) refuses writes.
    ReadOnly,
    /// The server is loading its dataset after a restart.
    Loading,
    /// The key holds another type than the command works on.
    WrongType,
}

impl ErrorReply {
    pub const ALL: [ErrorReply; 4] = [
        ErrorReply::Oom,
        ErrorReply::ReadOnly,
        ErrorReply::Loading,
        ErrorReply::WrongType,
    ];

    /// The outcome a caller gets; its name is also the name the scenario file uses.
    pub fn outcome(self) -> Outcome {
        match self {
            ErrorReply::Oom => Outcome::Oom,
            ErrorReply::ReadOnly => Outcome::ReadOnly,
            ErrorReply::Loading => Outcome::Loading,
            ErrorReply::WrongType => Outcome::WrongType,
        }
    }

    /// The error line Redis sends.
    pub fn message(self) -> &'static str {
        match self {
            ErrorReply::Oom => "OOM command not allowed when used memory > 'maxmemory'.",
            ErrorReply::ReadOnly => "READONLY You can't write against a read only replica.",
            ErrorReply::Loading => "LOADING Redis is loading the dataset in memory",
            ErrorReply::WrongType => {
                "WRONGTYPE Operation against a key holding the wrong kind of value"
            }
        }
    }
}

impl FaultKind {
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Pause(_) => "pause",
            FaultKind::Hang => "hang",
            FaultKind::Stop => "stop",
            FaultKind::Crash => "crash",
            FaultKind::CpuThrottle { .. } => "cpu_throttle",
            FaultKind::Kill => "kill",
            FaultKind::MaxMemory(_) => "maxmemory",
            FaultKind::FlushAll => "flushall",
            FaultKind::ErrorReply { .. } => "error_reply",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Failover { .. } => "failover",
            FaultKind::Slow { .. } => "slow",
            FaultKind::Refuse => "refuse",
            FaultKind::PoolExhausted { .. } => "pool_exhausted",
            FaultKind::LockHeld { .. } => "lock_held",
            FaultKind::Latency { .. } => "latency",
            FaultKind::Bandwidth(_) => "bandwidth",
            FaultKind::PacketLoss { .. } => "packet_loss",
            FaultKind::SlowClose { .. } => "slow_close",
        }
    }

    /// Whether it acts on a database (and only there).
    pub fn on_database(self) -> bool {
        matches!(
            self,
            FaultKind::Slow { .. }
                | FaultKind::Refuse
                | FaultKind::PoolExhausted { .. }
                | FaultKind::LockHeld { .. }
        )
    }

    /// Whether it happens at one instant (and takes no duration).
    pub fn is_instant(self) -> bool {
        match self {
            FaultKind::Kill | FaultKind::MaxMemory(_) | FaultKind::FlushAll => true,
            FaultKind::Pause(_)
            | FaultKind::Hang
            | FaultKind::Stop
            | FaultKind::Crash
            | FaultKind::CpuThrottle { .. } => false,
            FaultKind::ErrorReply { .. } | FaultKind::Disconnect | FaultKind::Failover { .. } => {
                false
            }
            FaultKind::Slow { .. } | FaultKind::Refuse | FaultKind::PoolExhausted { .. } => false,
            FaultKind::LockHeld { .. } => false,
            FaultKind::Latency { .. }
            | FaultKind::Bandwidth(_)
            | FaultKind::PacketLoss { .. }
            | FaultKind::SlowClose { .. } => false,
        }
    }
}

impl Scenario {
    /// Checks [`RateLimitSpec::buckets_of`]'s invariant: a limiter checks another's buckets
    /// only when they are one limiter's counters in one Redis: the other keeps its own, with
    /// the same config and `enabled`, behind a store on the same server. Ids are in range.
    fn check_shared_buckets(&self) -> Result<(), String> {
        let server = |spec: &RateLimitSpec| spec.store.map(|c| self.connections[c.index()].server);
        for spec in &self.rate_limits {
            let Some(owner) = spec.buckets_of else {
                continue;
            };
            let owner = &self.rate_limits[owner.index()];
            let same_server = server(spec).is_some() && server(spec) == server(owner);
            if owner.buckets_of.is_some()
                || !same_server
                || owner.config != spec.config
                || owner.enabled != spec.enabled
            {
                return Err(format!(
                    "rate limiter {} checks the buckets of {}, which is not the same limiter in \
                     the same Redis keeping buckets of its own",
                    spec.name, owner.name
                ));
            }
        }
        Ok(())
    }

    /// Checks every cross-reference, so a scenario built by hand cannot make the simulator
    /// index out of bounds. The file reader builds scenarios that always pass.
    pub fn check_references(&self) -> Result<(), String> {
        // Every id within its vector first (one loop over every spec's references), so that
        // the checks below may index.
        if let Some(dangling) = self.first_dangling_reference() {
            return Err(dangling);
        }
        self.check_shared_buckets()?;
        self.check_connections()?;
        self.check_servers()?;
        self.check_steps()?;
        self.check_instances()?;
        self.check_faults()?;
        for family in &self.keys {
            if family.count == 0 {
                return Err(format!("key family {} has no keys", family.name));
            }
        }
        if self.bucket.is_zero() {
            return Err("the series bucket width is zero".into());
        }
        Ok(())
    }

    /// Subscribers are not slots, and tracking redirects to a subscriber on its server.
    fn check_connections(&self) -> Result<(), String> {
        for connection in &self.connections {
            if connection.subscription.is_some()
                && matches!(connection.reconnect, Reconnect::Slot(_))
            {
                return Err(format!(
                    "subscriber {} cannot be a reconnect slot (a slot reconnects on a caller's \
                     command, and a subscriber sends none)",
                    connection.name
                ));
            }
            if let Some(tracking) = &connection.tracking {
                let redirect = &self.connections[tracking.redirect.index()];
                if redirect.subscription.is_none() || redirect.server != connection.server {
                    return Err(format!(
                        "connection {} redirects its tracking to {}, which is not a subscriber \
                         on the same server",
                        connection.name, redirect.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Replicas replicate primaries, and preloads fit their key families.
    fn check_servers(&self) -> Result<(), String> {
        for (index, server) in self.servers.iter().enumerate() {
            if let Some(replication) = server.replica_of {
                let primary = &self.servers[replication.primary.index()];
                if replication.primary.index() == index || primary.replica_of.is_some() {
                    return Err(format!(
                        "server {} replicates {}, which is not a primary",
                        server.name, primary.name
                    ));
                }
            }
            for preload in &server.preload {
                if preload.count > self.keys[preload.family.index()].count {
                    return Err(format!(
                        "server {} preloads more keys than its family has",
                        server.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Each flow's steps: jumps go forward, a policy is listed once, commands go to connections that take them, keys are where they are needed.
    fn check_steps(&self) -> Result<(), String> {
        for flow in &self.flows {
            if flow.steps.len() > usize::from(u16::MAX) {
                return Err(format!(
                    "flow {} has more than {} steps",
                    flow.name,
                    u16::MAX
                ));
            }
            for (index, step) in flow.steps.iter().enumerate() {
                if let OnHit::Goto(target) = step.on_hit
                    && !(index < usize::from(target) && usize::from(target) < flow.steps.len())
                {
                    return Err(format!(
                        "step {index} of flow {} jumps to step {target}, which is not after it",
                        flow.name
                    ));
                }
                // Two policies of one kind are layers like any two (an inner and an outer
                // retry); one policy twice would make a request pass it twice.
                for (position, policy) in step.policies.iter().enumerate() {
                    if step.policies[..position].contains(policy) {
                        return Err(format!(
                            "step {index} of flow {} lists {} twice",
                            flow.name,
                            self.policy_name(*policy)
                        ));
                    }
                }
                if let StepAction::Redis { connection, .. } = step.action
                    && self.connections[connection.index()].subscription.is_some()
                {
                    return Err(format!(
                        "a step of flow {} sends a command on subscriber {}, which takes none",
                        flow.name,
                        self.connections[connection.index()].name
                    ));
                }
                if let StepAction::RateLimit { limiter, key } = step.action
                    && self.rate_limits[limiter.index()].store.is_some() != key.is_some()
                {
                    return Err(format!(
                        "a rate-limit step in flow {} has a key exactly when its limiter has a \
                         store",
                        flow.name
                    ));
                }
                if let StepAction::Cache { key: None, op, .. } = step.action
                    && op != CacheOp::Flush
                {
                    return Err(format!("a cache {op:?} in flow {} has no key", flow.name));
                }
            }
        }
        Ok(())
    }

    /// Instances of a service: within its count, copies of its instance 0, and loads send instance 0.
    fn check_instances(&self) -> Result<(), String> {
        for (index, flow) in self.flows.iter().enumerate() {
            if let Some(instance) = flow.instance {
                let service = &self.services[instance.service.index()];
                if instance.index >= service.instances.max(1) {
                    return Err(format!(
                        "flow {} is instance {} of service {}, which has {}",
                        flow.name, instance.index, service.name, service.instances
                    ));
                }
                let base = &self.flows[instance.base.index()];
                if base.instance.map(|i| i.base) != Some(instance.base)
                    || (instance.index == 0) != (instance.base.index() == index)
                {
                    return Err(format!(
                        "flow {} is a copy of flow {}, which is not instance 0 of its service",
                        flow.name, base.name
                    ));
                }
            }
        }
        for load in &self.loads {
            if self.flows[load.flow.index()]
                .instance
                .is_some_and(|instance| instance.index != 0)
            {
                return Err(format!(
                    "load {} sends a copy of a service's flow: it sends the flow itself, and \
                     each request goes to an instance",
                    load.name
                ));
            }
        }
        Ok(())
    }

    /// Faults act on targets of their kind, fail over to replicas of their target and hold connections a pool has.
    fn check_faults(&self) -> Result<(), String> {
        for fault in &self.faults {
            let on_connection = matches!(fault.target, FaultTarget::Connection(_));
            if let (FaultKind::Failover { replica, .. }, FaultTarget::Server(primary)) =
                (fault.kind, fault.target)
                && (self.servers[replica.index()].replica_of).is_none_or(|r| r.primary != primary)
            {
                return Err(format!(
                    "fault {} fails over to {}, which is not a replica of its target",
                    fault.name,
                    self.servers[replica.index()].name
                ));
            }
            let fits = match fault.kind {
                FaultKind::Kill => true,
                FaultKind::Disconnect
                | FaultKind::Latency { .. }
                | FaultKind::Bandwidth(_)
                | FaultKind::PacketLoss { .. }
                | FaultKind::SlowClose { .. } => on_connection,
                _ => !on_connection,
            };
            if !fits {
                return Err(format!(
                    "fault {} of kind {} cannot act on its target",
                    fault.name,
                    fault.kind.name()
                ));
            }
        }
        for fault in &self.faults {
            let on_database = matches!(fault.target, FaultTarget::Database(_));
            if fault.kind.on_database() != on_database {
                return Err(format!(
                    "fault {}: a `{}` fault cannot act on {}",
                    fault.name,
                    fault.kind.name(),
                    self.target_name(fault.target)
                ));
            }
            if let (FaultKind::PoolExhausted { connections }, FaultTarget::Database(id)) =
                (fault.kind, fault.target)
            {
                let max = self.databases[id.index()]
                    .connections
                    .map(|limit| limit.max);
                if !max.is_some_and(|max| (1..=max).contains(&connections)) {
                    return Err(format!(
                        "fault {} holds {connections} connections of {}, whose limit is {}",
                        fault.name,
                        self.databases[id.index()].name,
                        max.map_or("none".to_owned(), |max| max.to_string())
                    ));
                }
            }
        }
        Ok(())
    }

    /// The name of what a fault acts on. `target` must pass [`Scenario::check_references`].
    pub fn target_name(&self, target: FaultTarget) -> &str {
        match target {
            FaultTarget::Server(server) => &self.servers[server.index()].name,
            FaultTarget::Connection(connection) => &self.connections[connection.index()].name,
            FaultTarget::Database(database) => &self.databases[database.index()].name,
        }
    }

    /// A scenario with nothing in it (seed 1, 100 ms buckets, default limits), for code that
    /// builds scenarios without a file, such as tests, to fill in.
    pub fn empty(name: &str) -> Scenario {
        Scenario {
            name: name.into(),
            seed: 1,
            limits: RunLimits {
                horizon: None,
                time_max: RunLimits::TIME_MAX_DEFAULT,
                events_max: RunLimits::EVENTS_MAX_DEFAULT,
                memory_max: RunLimits::MEMORY_MAX_DEFAULT,
            },
            ties: TieOrder::Scheduled,
            bucket: SimDuration::from_millis(100),
            percentile_rule: Default::default(),
            servers: vec![],
            connections: vec![],
            databases: vec![],
            keys: vec![],
            breakers: vec![],
            bulkheads: vec![],
            semaphores: vec![],
            adaptive_limits: vec![],
            retries: vec![],
            caches: vec![],
            rate_limits: vec![],
            kv_stores: vec![],
            throttles: vec![],
            locks: vec![],
            callers: vec![],
            flows: vec![],
            loads: vec![],
            faults: vec![],
            http: None,
            services: vec![],
            channels: vec![],
            client_loops: vec![],
        }
    }
}

impl ServerSpec {
    /// A server costing 5 us a command, with no byte rate, no persistence and nothing
    /// preloaded, for code that builds scenarios without a file (tests).
    pub fn new(name: &str) -> ServerSpec {
        ServerSpec {
            name: name.into(),
            command_cost: SimDuration::from_micros(5),
            byte_rate: None,
            persistence: false,
            preload: vec![],
            memory: MemorySpec::DEFAULT,
            hz: None,
            replica_of: None,
        }
    }
}

impl ConnectionSpec {
    /// A connection to `server`, 100 us one way, with ioredis' defaults (no command timeout,
    /// an offline queue, 20 retries, reconnects 50 ms apart per attempt up to 2 s, a 10 s
    /// connect timeout), connected at the start, for code that builds scenarios without a file
    /// (tests).
    pub fn new(name: &str, server: ServerId) -> ConnectionSpec {
        ConnectionSpec {
            name: name.into(),
            server,
            latency: SimDuration::from_micros(100),
            bandwidth: None,
            command_timeout: None,
            offline_queue: true,
            max_retries: Some(20),
            connect_timeout: SimDuration::from_secs(10),
            reconnect_delay: SimDuration::from_millis(50),
            reconnect_delay_max: SimDuration::from_secs(2),
            reconnect_growth: ReconnectGrowth::Linear,
            connected_at_start: true,
            reconnect: Reconnect::Always,
            pending_max: None,
            subscription: None,
            tracking: None,
            follows_failover: true,
            client_loop: None,
            timer_lateness: SimDuration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_kind_indexes_the_list_of_all_kinds() {
        for (index, kind) in PolicyKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, index);
        }
        let mut sorted = PolicyKind::DEFAULT_ORDER;
        sorted.sort();
        assert_eq!(
            sorted,
            PolicyKind::ALL,
            "the default order lists every kind once"
        );
    }

    #[test]
    fn even_arrivals_are_exact_in_integers() {
        let rate = Rate::per_second(500.0).unwrap();
        assert_eq!(rate.even_offset(1), Some(SimDuration::from_millis(2)));
        assert_eq!(rate.even_offset(499), Some(SimDuration::from_millis(998)));
        let third = Rate::per_second(3.0).unwrap();
        assert_eq!(third.even_offset(1).unwrap().as_nanos(), 333_333_333);
        assert_eq!(third.even_offset(3).unwrap().as_nanos(), 1_000_000_000);
    }

    #[test]
    fn absurd_rates_are_rejected() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e-9, 2e9, 0.0014] {
            assert!(Rate::per_second(rate).is_err(), "{rate}");
        }
        assert!(Rate::per_second(333.333).is_ok());
    }

    #[test]
    fn byte_rates_round_transfer_time_up() {
        let rate = ByteRate::new(100 * 1024 * 1024).unwrap();
        assert_eq!(rate.time_for(2 * 1024 * 1024), SimDuration::from_millis(20));
        assert_eq!(
            ByteRate::new(3).unwrap().time_for(1).as_nanos(),
            333_333_334
        );
    }

    #[test]
    fn reconnect_delay_grows_linearly_to_its_cap() {
        let spec = ConnectionSpec::new("c", ServerId(0));
        assert_eq!(spec.reconnect_delay_for(1), SimDuration::from_millis(50));
        assert_eq!(spec.reconnect_delay_for(3), SimDuration::from_millis(150));
        assert_eq!(spec.reconnect_delay_for(100), SimDuration::from_secs(2));
        assert_eq!(
            spec.reconnect_delay_for(u32::MAX),
            SimDuration::from_secs(2)
        );
    }

    /// lettuce's `Delay.exponential()`: 1 ms · 2^(n-1) up to 30 s (attempt 16 is 32.768 s).
    #[test]
    fn reconnect_delay_doubles_to_its_cap() {
        let spec = ConnectionSpec {
            reconnect_delay: SimDuration::from_millis(1),
            reconnect_delay_max: SimDuration::from_secs(30),
            reconnect_growth: ReconnectGrowth::Doubling,
            ..ConnectionSpec::new("c", ServerId(0))
        };
        let delays_ms: Vec<u64> = [1, 2, 3, 10, 15, 16, 64, u32::MAX]
            .map(|n| spec.reconnect_delay_for(n).as_nanos() / 1_000_000)
            .to_vec();
        assert_eq!(delays_ms, [1, 2, 4, 512, 16_384, 30_000, 30_000, 30_000]);
    }
}

//! Every reference a scenario's specs hold to another resource, declared once per spec: a
//! spec's [`References::references`] shows each of its typed ids (a step's connection and
//! key family, a connection's server and client loop, a load's flow and caller, ...) to a
//! visitor, which may move it.
//!
//! [`Scenario::check_references`] is a loop over these (is every id within its vector?), and
//! [`crate::instances`]' copy of a service's resources per pod is another (which resources do
//! its flows reach, and where is each copy?). A spec field that refers to a resource and is
//! left out here would be missed by both: [`unvisited_ids`] counts the typed ids in each
//! spec's `Debug` text against those visited, and a test holds every bundled file to it.

use crate::scenario::*;

/// A kind of resource a spec may refer to: one per typed id, one per vector of [`Scenario`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Server,
    Connection,
    ClientLoop,
    Database,
    KeyFamily,
    Channel,
    Breaker,
    Bulkhead,
    Semaphore,
    AdaptiveLimit,
    Retry,
    Cache,
    RateLimit,
    KvStore,
    Throttle,
    Lock,
    Caller,
    Flow,
    Service,
}

impl Kind {
    /// Every kind, in declaration order.
    pub const ALL: [Kind; 19] = [
        Kind::Server,
        Kind::Connection,
        Kind::ClientLoop,
        Kind::Database,
        Kind::KeyFamily,
        Kind::Channel,
        Kind::Breaker,
        Kind::Bulkhead,
        Kind::Semaphore,
        Kind::AdaptiveLimit,
        Kind::Retry,
        Kind::Cache,
        Kind::RateLimit,
        Kind::KvStore,
        Kind::Throttle,
        Kind::Lock,
        Kind::Caller,
        Kind::Flow,
        Kind::Service,
    ];

    /// As messages name it ("key family").
    pub fn name(self) -> &'static str {
        match self {
            Kind::Server => "server",
            Kind::Connection => "connection",
            Kind::ClientLoop => "client loop",
            Kind::Database => "database",
            Kind::KeyFamily => "key family",
            Kind::Channel => "channel",
            Kind::Breaker => "breaker",
            Kind::Bulkhead => "bulkhead",
            Kind::Semaphore => "semaphore",
            Kind::AdaptiveLimit => "adaptive limit",
            Kind::Retry => "retry policy",
            Kind::Cache => "cache",
            Kind::RateLimit => "rate limiter",
            Kind::KvStore => "KV store",
            Kind::Throttle => "throttle",
            Kind::Lock => "lock",
            Kind::Caller => "caller",
            Kind::Flow => "flow",
            Kind::Service => "service",
        }
    }

    /// Whether each instance (pod) of a service has its own copy of a resource of this kind
    /// (see [`crate::instances`]); the others (servers, databases, key families, KV stores,
    /// throttles, callers, ...) are shared by every instance. A rate limiter's copies share
    /// its buckets when it has a store ([`RateLimitSpec::buckets_of`]).
    pub fn per_instance(self) -> bool {
        matches!(
            self,
            Kind::Connection
                | Kind::ClientLoop
                | Kind::Breaker
                | Kind::Bulkhead
                | Kind::Semaphore
                | Kind::AdaptiveLimit
                | Kind::Retry
                | Kind::Cache
                | Kind::RateLimit
                | Kind::Lock
        )
    }

    /// The type name of this kind's id, as `Debug` writes it (`ConnectionId`).
    pub fn id_type(self) -> &'static str {
        match self {
            Kind::Server => "ServerId",
            Kind::Connection => "ConnectionId",
            Kind::ClientLoop => "ClientLoopId",
            Kind::Database => "DatabaseId",
            Kind::KeyFamily => "KeyFamilyId",
            Kind::Channel => "ChannelId",
            Kind::Breaker => "BreakerId",
            Kind::Bulkhead => "BulkheadId",
            Kind::Semaphore => "SemaphoreId",
            Kind::AdaptiveLimit => "AdaptiveLimitId",
            Kind::Retry => "RetryId",
            Kind::Cache => "CacheId",
            Kind::RateLimit => "RateLimitId",
            Kind::KvStore => "KvStoreId",
            Kind::Throttle => "ThrottleId",
            Kind::Lock => "LockId",
            Kind::Caller => "CallerId",
            Kind::Flow => "FlowId",
            Kind::Service => "ServiceId",
        }
    }
}

/// A visitor of references: the kind of resource, and its index (which it may move).
pub type Visit<'v> = dyn FnMut(Kind, &mut u32) + 'v;

/// A spec that refers to other resources by id.
pub trait References: std::fmt::Debug {
    /// Shows `visit` every reference the spec holds, in a fixed order.
    fn references(&mut self, visit: &mut Visit<'_>);
}

impl References for ConnectionSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        visit(Kind::Server, &mut self.server.0);
        if let Some(client_loop) = &mut self.client_loop {
            visit(Kind::ClientLoop, &mut client_loop.0);
        }
        if let Some(subscription) = &mut self.subscription {
            visit(Kind::Cache, &mut subscription.invalidates.0);
            if let Some(channel) = &mut subscription.channel {
                visit(Kind::Channel, &mut channel.0);
            }
        }
        if let Some(tracking) = &mut self.tracking {
            visit(Kind::Connection, &mut tracking.redirect.0);
            for family in &mut tracking.bcast {
                visit(Kind::KeyFamily, &mut family.0);
            }
        }
    }
}

impl References for ServerSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        if let Some(replication) = &mut self.replica_of {
            visit(Kind::Server, &mut replication.primary.0);
        }
        for preload in &mut self.preload {
            visit(Kind::KeyFamily, &mut preload.family.0);
        }
    }
}

impl References for ThrottleSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        if let ThrottleForm::Kv { store } = &mut self.form {
            visit(Kind::KvStore, &mut store.0);
        }
    }
}

impl References for RateLimitSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        if let Some(store) = &mut self.store {
            visit(Kind::Connection, &mut store.0);
        }
        if let Some(limiter) = &mut self.buckets_of {
            visit(Kind::RateLimit, &mut limiter.0);
        }
    }
}

impl References for FlowSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        if let Some(instance) = &mut self.instance {
            visit(Kind::Service, &mut instance.service.0);
            visit(Kind::Flow, &mut instance.base.0);
        }
        for step in &mut self.steps {
            step.references(visit);
        }
    }
}

impl References for StepSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        for policy in &mut self.policies {
            match policy {
                PolicyRef::Retry(id) => visit(Kind::Retry, &mut id.0),
                PolicyRef::Bulkhead(id) => visit(Kind::Bulkhead, &mut id.0),
                PolicyRef::Semaphore(id) => visit(Kind::Semaphore, &mut id.0),
                PolicyRef::Breaker(id) => visit(Kind::Breaker, &mut id.0),
                PolicyRef::AdaptiveLimit(id) => visit(Kind::AdaptiveLimit, &mut id.0),
            }
        }
        match &mut self.action {
            StepAction::Redis {
                connection,
                command,
                key,
            } => {
                visit(Kind::Connection, &mut connection.0);
                visit(Kind::KeyFamily, &mut key.0);
                if let RedisCommand::Publish { channel } = command {
                    visit(Kind::Channel, &mut channel.0);
                }
            }
            StepAction::Database {
                database,
                lock,
                data,
                ..
            } => {
                visit(Kind::Database, &mut database.0);
                if let Some(lock) = lock {
                    visit(Kind::KeyFamily, &mut lock.0);
                }
                if let Some(data) = data {
                    visit(Kind::KeyFamily, &mut data.key.0);
                }
            }
            StepAction::Work { .. } | StepAction::Call { .. } => {}
            StepAction::RateLimit { limiter, key } => {
                visit(Kind::RateLimit, &mut limiter.0);
                if let Some(key) = key {
                    visit(Kind::KeyFamily, &mut key.0);
                }
            }
            StepAction::Throttle { throttle, key, .. } => {
                visit(Kind::Throttle, &mut throttle.0);
                visit(Kind::KeyFamily, &mut key.0);
            }
            StepAction::Cache { cache, key, .. } => {
                visit(Kind::Cache, &mut cache.0);
                if let Some(key) = key {
                    visit(Kind::KeyFamily, &mut key.0);
                }
            }
            StepAction::Lock {
                lock,
                connection,
                key,
                ..
            } => {
                visit(Kind::Lock, &mut lock.0);
                visit(Kind::Connection, &mut connection.0);
                visit(Kind::KeyFamily, &mut key.0);
            }
        }
    }
}

impl References for LoadSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        visit(Kind::Flow, &mut self.flow.0);
        if let Some(caller) = &mut self.caller {
            visit(Kind::Caller, &mut caller.0);
        }
    }
}

impl References for CallerSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        if let Some(retry) = &mut self.retry {
            visit(Kind::Retry, &mut retry.0);
        }
    }
}

impl References for FaultSpec {
    fn references(&mut self, visit: &mut Visit<'_>) {
        match &mut self.target {
            FaultTarget::Server(server) => visit(Kind::Server, &mut server.0),
            FaultTarget::Connection(connection) => visit(Kind::Connection, &mut connection.0),
            FaultTarget::Database(database) => visit(Kind::Database, &mut database.0),
        }
        match &mut self.kind {
            FaultKind::Failover { replica, .. } => visit(Kind::Server, &mut replica.0),
            FaultKind::LockHeld { family } => visit(Kind::KeyFamily, &mut family.0),
            _ => {}
        }
    }
}

/// A spec that refers to nothing.
macro_rules! no_references {
    ($($spec:ty),*) => {
        $(impl References for $spec {
            fn references(&mut self, _: &mut Visit<'_>) {}
        })*
    };
}
no_references!(
    DatabaseSpec,
    KeyFamilySpec,
    BreakerSpec,
    BulkheadSpec,
    SemaphoreSpec,
    AdaptiveLimitSpec,
    RetrySpec,
    CacheSpec,
    KvStoreSpec,
    LockSpec,
    ServiceSpec,
    ClientLoopSpec,
    String
);

/// What [`each_spec`] calls with each spec: its kind (`None` for loads and faults), its index
/// and the spec.
pub type EachSpec<'e> = dyn FnMut(Option<Kind>, u32, &mut dyn References) + 'e;

/// Calls `each` with every spec of `scenario` that may hold references, as the kind of
/// resource it is (or `None` for loads and faults, which nothing refers to) and its index.
/// The one list of the scenario's vectors: a new vector of specs is added here.
pub fn each_spec(scenario: &mut Scenario, each: &mut EachSpec<'_>) {
    fn all<T: References>(specs: &mut [T], kind: Option<Kind>, each: &mut EachSpec<'_>) {
        for (index, spec) in (0u32..).zip(specs) {
            each(kind, index, spec);
        }
    }
    all(&mut scenario.servers, Some(Kind::Server), each);
    all(&mut scenario.connections, Some(Kind::Connection), each);
    all(&mut scenario.client_loops, Some(Kind::ClientLoop), each);
    all(&mut scenario.databases, Some(Kind::Database), each);
    all(&mut scenario.keys, Some(Kind::KeyFamily), each);
    all(&mut scenario.channels, Some(Kind::Channel), each);
    all(&mut scenario.breakers, Some(Kind::Breaker), each);
    all(&mut scenario.bulkheads, Some(Kind::Bulkhead), each);
    all(&mut scenario.semaphores, Some(Kind::Semaphore), each);
    all(
        &mut scenario.adaptive_limits,
        Some(Kind::AdaptiveLimit),
        each,
    );
    all(&mut scenario.retries, Some(Kind::Retry), each);
    all(&mut scenario.caches, Some(Kind::Cache), each);
    all(&mut scenario.rate_limits, Some(Kind::RateLimit), each);
    all(&mut scenario.kv_stores, Some(Kind::KvStore), each);
    all(&mut scenario.throttles, Some(Kind::Throttle), each);
    all(&mut scenario.locks, Some(Kind::Lock), each);
    all(&mut scenario.callers, Some(Kind::Caller), each);
    all(&mut scenario.flows, Some(Kind::Flow), each);
    all(&mut scenario.services, Some(Kind::Service), each);
    all(&mut scenario.loads, None, each);
    all(&mut scenario.faults, None, each);
}

impl Scenario {
    /// How many resources of `kind` the scenario has.
    pub fn count_of(&self, kind: Kind) -> usize {
        match kind {
            Kind::Server => self.servers.len(),
            Kind::Connection => self.connections.len(),
            Kind::ClientLoop => self.client_loops.len(),
            Kind::Database => self.databases.len(),
            Kind::KeyFamily => self.keys.len(),
            Kind::Channel => self.channels.len(),
            Kind::Breaker => self.breakers.len(),
            Kind::Bulkhead => self.bulkheads.len(),
            Kind::Semaphore => self.semaphores.len(),
            Kind::AdaptiveLimit => self.adaptive_limits.len(),
            Kind::Retry => self.retries.len(),
            Kind::Cache => self.caches.len(),
            Kind::RateLimit => self.rate_limits.len(),
            Kind::KvStore => self.kv_stores.len(),
            Kind::Throttle => self.throttles.len(),
            Kind::Lock => self.locks.len(),
            Kind::Caller => self.callers.len(),
            Kind::Flow => self.flows.len(),
            Kind::Service => self.services.len(),
        }
    }

    /// The name of resource `index` of `kind` (which exists).
    pub fn resource_name(&self, kind: Kind, index: u32) -> &str {
        let i = index as usize;
        match kind {
            Kind::Server => &self.servers[i].name,
            Kind::Connection => &self.connections[i].name,
            Kind::ClientLoop => &self.client_loops[i].name,
            Kind::Database => &self.databases[i].name,
            Kind::KeyFamily => &self.keys[i].name,
            Kind::Channel => &self.channels[i],
            Kind::Breaker => &self.breakers[i].name,
            Kind::Bulkhead => &self.bulkheads[i].name,
            Kind::Semaphore => &self.semaphores[i].name,
            Kind::AdaptiveLimit => &self.adaptive_limits[i].name,
            Kind::Retry => &self.retries[i].name,
            Kind::Cache => &self.caches[i].name,
            Kind::RateLimit => &self.rate_limits[i].name,
            Kind::KvStore => &self.kv_stores[i].name,
            Kind::Throttle => &self.throttles[i].name,
            Kind::Lock => &self.locks[i].name,
            Kind::Caller => &self.callers[i].name,
            Kind::Flow => &self.flows[i].name,
            Kind::Service => &self.services[i].name,
        }
    }

    /// The first reference of any spec to a resource that does not exist, as a message.
    pub(crate) fn first_dangling_reference(&self) -> Option<String> {
        let counts: Vec<usize> = Kind::ALL.iter().map(|&kind| self.count_of(kind)).collect();
        let mut dangling = None;
        // The visitors take specs mutably (so that `instances` can move references): check a
        // copy of each spec, which costs a clone per spec once per run.
        let mut copy = self.clone();
        each_spec(&mut copy, &mut |_, _, spec| {
            spec.references(&mut |kind, index| {
                let len = counts[kind as usize];
                if dangling.is_none() && *index as usize >= len {
                    dangling = Some(format!(
                        "{} #{index} does not exist (there are {len})",
                        kind.name()
                    ));
                }
            });
        });
        dangling
    }
}

/// How many ids of each kind a spec's `Debug` text holds, beside how many its
/// [`References`] visitor shows, for each spec of `scenario` whose two differ: empty when
/// every typed id of every spec is visited. (Tests hold every bundled file to it, so that a
/// new field holding an id cannot be left out of its spec's visitor.)
pub fn unvisited_ids(scenario: &Scenario) -> Vec<String> {
    let mut copy = scenario.clone();
    let mut found = Vec::new();
    each_spec(&mut copy, &mut |_, _, spec| {
        let text = format!("{spec:?}");
        let mut visited = [0usize; Kind::ALL.len()];
        spec.references(&mut |kind, _| visited[kind as usize] += 1);
        for kind in Kind::ALL {
            let written = text.matches(&format!("{}(", kind.id_type())).count();
            if written != visited[kind as usize] {
                found.push(format!(
                    "{} {} written, {} visited in {text}",
                    written,
                    kind.id_type(),
                    visited[kind as usize]
                ));
            }
        }
    });
    found
}

//! The resource kinds of a scenario file, declared once. Each line of `resource_kinds!` names
//! a kind's table, its raw type (in `raw.rs`), the id that refers to one (in
//! `outagelab_sim::scenario`) and what a reference to one is called in messages. From it come:
//!
//! - the kind's field of [`RawScenario`], a map from name to raw table;
//! - its [`NameIndex`] in [`Names`]: names to ids (resources are numbered in name order), for
//!   [`crate::validate`] to resolve a reference with one call that reports an unknown name;
//! - its entry in [`RawScenario::sections`], whose names are checked once for all kinds.
//!
//! What stays per kind is what differs: its raw type and its validation into a spec.

use std::collections::BTreeMap;

use outagelab_sim::scenario::*;
use serde::Deserialize;

use crate::breaker_keys::RawBreaker;
use crate::connection_keys::{RawClientLoop, RawConnection};
use crate::limit_keys::{RawAdaptiveLimit, RawBulkhead, RawSemaphore};
use crate::load_keys::{RawCaller, RawLoad};
use crate::policy_keys::{RawCache, RawKvStore, RawLock, RawRateLimit, RawThrottle};
use crate::raw::*;
use crate::resource_keys::{RawDatabase, RawKeyFamily, RawServer};
use crate::retry_keys::RawRetry;
use crate::service_keys::RawService;

macro_rules! resource_kinds {
    ($($table:ident: $raw:ty => $id:ident, $noun:literal;)*) => {
        /// The scenario file as written.
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct RawScenario {
            pub scenario: RawHeader,
            #[serde(default)]
            pub run: RawRun,
            #[serde(default)]
            pub metrics: RawMetrics,
            /// How ended requests are answered over HTTP; no table, no HTTP view.
            pub http: Option<RawHttp>,
            $(
                #[serde(default)]
                pub $table: BTreeMap<String, $raw>,
            )*
        }

        impl RawScenario {
            /// Every resource table's name and the names of its resources.
            pub fn sections(&self) -> Vec<(&'static str, Vec<&str>)> {
                vec![$(
                    (
                        stringify!($table),
                        self.$table.keys().map(String::as_str).collect(),
                    ),
                )*]
            }
        }

        /// Whether `table` is the root table of a resource kind (`servers`, `flows`, ...).
        pub fn is_resource_section(table: &str) -> bool {
            [$(stringify!($table),)*].contains(&table)
        }

        /// What one resource of the kind whose root table is `table` is called in messages.
        pub fn noun(table: &str) -> &'static str {
            match table {
                $(stringify!($table) => $noun,)*
                _ => "resource",
            }
        }

        /// The names of every resource, by kind. (Nothing refers to a load or a fault by
        /// name, but they are numbered like every kind.)
        #[allow(dead_code)]
        pub struct Names<'r> {
            $(pub $table: NameIndex<'r, $raw, $id>,)*
        }

        impl<'r> Names<'r> {
            pub fn new(raw: &'r RawScenario) -> Self {
                Names {
                    $($table: NameIndex::new(&raw.$table, stringify!($table), $noun, $id),)*
                }
            }
        }
    };
}

resource_kinds! {
    servers: RawServer => ServerId, "server";
    client_loops: RawClientLoop => ClientLoopId, "client event loop";
    connections: RawConnection => ConnectionId, "connection";
    databases: RawDatabase => DatabaseId, "database";
    keys: RawKeyFamily => KeyFamilyId, "key family";
    breakers: RawBreaker => BreakerId, "breaker";
    bulkheads: RawBulkhead => BulkheadId, "bulkhead";
    semaphores: RawSemaphore => SemaphoreId, "semaphore";
    adaptive_limits: RawAdaptiveLimit => AdaptiveLimitId, "adaptive limit";
    retries: RawRetry => RetryId, "retry policy";
    caches: RawCache => CacheId, "cache";
    rate_limits: RawRateLimit => RateLimitId, "rate limiter";
    kv_stores: RawKvStore => KvStoreId, "KV store";
    throttles: RawThrottle => ThrottleId, "throttle";
    locks: RawLock => LockId, "lock";
    callers: RawCaller => CallerId, "caller";
    services: RawService => ServiceId, "service";
    flows: RawFlow => FlowId, "flow";
    loads: RawLoad => LoadId, "load";
    faults: RawFault => FaultId, "fault";
}

/// The kinds nothing refers to by name: what a run starts from (a load sends requests, a
/// fault acts on a server, a service runs flows on its instances). Every other resource is
/// there to be named by something, so one that nothing names is reported as unused.
pub const ROOTS: [&str; 3] = ["loads", "faults", "services"];

impl Names<'_> {
    /// Whether the rate limiter `name` keeps its buckets in a store (its steps name a key).
    pub fn has_store(&self, name: &str) -> bool {
        self.rate_limits
            .get(name)
            .is_some_and(|(_, limiter)| limiter.keys.get("store").is_some())
    }
}

/// The resources of one kind by name, each with its id: its position in name order, which is
/// also its index in the scenario's vector of that kind.
pub struct NameIndex<'r, Raw, Id> {
    tables: &'r BTreeMap<String, Raw>,
    ids: BTreeMap<&'r str, u32>,
    /// The kind's root table: `connections`, `keys`.
    pub table: &'static str,
    /// What one is called in messages: "connection", "key family".
    pub noun: &'static str,
    id: fn(u32) -> Id,
}

impl<'r, Raw, Id> NameIndex<'r, Raw, Id> {
    fn new(
        tables: &'r BTreeMap<String, Raw>,
        table: &'static str,
        noun: &'static str,
        id: fn(u32) -> Id,
    ) -> Self {
        let ids = tables
            .keys()
            .enumerate()
            .map(|(index, name)| {
                let index = u32::try_from(index).expect("fewer than 2^32 tables fit in a file");
                (name.as_str(), index)
            })
            .collect();
        NameIndex {
            tables,
            ids,
            table,
            noun,
            id,
        }
    }

    /// The id of the resource `name`, and its table as written.
    pub fn get(&self, name: &str) -> Option<(Id, &'r Raw)> {
        let index = *self.ids.get(name)?;
        Some(((self.id)(index), &self.tables[name]))
    }

    pub fn contains(&self, name: &str) -> bool {
        self.ids.contains_key(name)
    }

    /// Every name, in order.
    pub fn names(&self) -> impl Iterator<Item = &'r str> + '_ {
        self.ids.keys().copied()
    }
}

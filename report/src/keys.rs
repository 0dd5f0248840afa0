//! The names of the time series, as one type shared by the simulator that writes them and the
//! charts that read them: a renamed series is renamed for both, and a chart cannot ask for a
//! series by a name nobody writes.
//!
//! In a report a series is keyed by its name as a string (`bulkheads.db.in_use`), so the JSON
//! stays plain; [`GaugeKey`] and [`CountKey`] print that name and read it back. A name is
//! `<section>.<resource>.<field>`, except `in_flight`; resource names hold no `.` (the scenario
//! file allows only letters, digits, `_` and `-`).

use std::fmt;

macro_rules! series_keys {
    (
        $(#[$doc:meta])*
        $key:ident { $($(#[$variant_doc:meta])* $variant:ident => $section:literal, $field:literal;)* }
        $(plain { $($(#[$plain_doc:meta])* $plain:ident => $plain_name:literal;)* })?
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum $key {
            $($($(#[$plain_doc])* $plain,)*)?
            $($(#[$variant_doc])* $variant(String),)*
        }

        impl $key {
            /// Reads a series name back; `None` for a name this kind of key does not write.
            pub fn parse(name: &str) -> Option<$key> {
                $($(if name == $plain_name {
                    return Some($key::$plain);
                })*)?
                let (section, rest) = name.split_once('.')?;
                let (resource, field) = rest.rsplit_once('.')?;
                if resource.is_empty() || resource.contains('.') {
                    return None;
                }
                let resource = resource.to_owned();
                match (section, field) {
                    $(($section, $field) => Some($key::$variant(resource)),)*
                    _ => None,
                }
            }

            /// The resource the series is about (`None` for a series about the whole run).
            pub fn resource(&self) -> Option<&str> {
                match self {
                    $($($key::$plain => None,)*)?
                    $($key::$variant(name) => Some(name),)*
                }
            }
        }

        impl fmt::Display for $key {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self {
                    $($($key::$plain => f.write_str($plain_name),)*)?
                    $($key::$variant(name) => write!(f, "{}.{}.{}", $section, name, $field),)*
                }
            }
        }
    };
}

series_keys! {
    /// A gauge's series: the maximum it reached in each bucket.
    GaugeKey {
        /// Queries running on a database.
        DatabaseConcurrency => "databases", "concurrency";
        /// Queries waiting for an advisory lock.
        DatabaseLockWaiting => "databases", "lock_waiting";
        /// Queries waiting for a connection (only for a database with `max_connections`).
        DatabaseConnectionWaiting => "databases", "connection_waiting";
        /// A database is collapsed (1) or not (0) (only for a database with `collapse`).
        DatabaseCollapsed => "databases", "collapsed";
        /// Commands a connection has issued and not yet seen end.
        ConnectionPending => "connections", "pending";
        /// A reconnect slot holds a connection (1) or not (0).
        ConnectionConnected => "connections", "connected";
        /// Permits a bulkhead has handed out.
        BulkheadInUse => "bulkheads", "in_use";
        /// Requests queued for a bulkhead's permit.
        BulkheadQueued => "bulkheads", "queued";
        SemaphoreInFlight => "semaphores", "in_flight";
        SemaphoreBytes => "semaphores", "bytes";
        /// An adaptive limit's current limit.
        AdaptiveLimit => "adaptive_limits", "limit";
        AdaptiveLimitInFlight => "adaptive_limits", "in_flight";
        CacheEntries => "caches", "entries";
        /// Slots a throttle's requests truly hold.
        ThrottleHolders => "throttles", "holders";
        /// What a throttle's counter says is held.
        ThrottleCounter => "throttles", "counter";
        /// 0 closed, 1 half-open, 2 open: the worst state of the bucket.
        BreakerState => "breakers", "state";
        /// Bytes a Redis server's live keys take (keys, values and per-key overhead).
        ServerUsedMemory => "servers", "used_memory";
        /// Requests of a flow in flight (with several flows), every instance's.
        FlowInFlight => "flows", "in_flight";
        /// Requests in flight on one instance of a service (`api@1`).
        InstanceInFlight => "services", "in_flight";
    }
    plain {
        /// Requests in flight.
        InFlight => "in_flight";
    }
}

series_keys! {
    /// An event counter's series: the events of each bucket.
    CountKey {
        /// Steps on a connection that failed and went on: requests let through unchecked.
        ConnectionFailOpen => "connections", "fail_open";
        /// Checks a rate limiter admitted unchecked because its store could not be reached.
        RateLimitFailOpenAdmitted => "rate_limits", "fail_open_admitted";
        /// Keys a Redis server evicted to get under its `maxmemory`.
        ServerEvictedKeys => "servers", "evicted_keys";
        /// Keys a Redis server removed when their TTL ran out.
        ServerExpiredKeys => "servers", "expired_keys";
        /// Calls of a caller that ended ok, by the bucket they ended in: the users' view.
        CallerOk => "callers", "ok";
        /// Calls of a caller that ended otherwise (its last attempt failed or timed out).
        CallerFailed => "callers", "failed";
    }
    plain {
        /// Step attempts answered `rate_limited` (a 429, from a throttle or a rate limit),
        /// whether the request then retried or ended with it: the outcomes count only the
        /// last attempt of each request.
        RejectedAttempts => "rejected_attempts";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_as_the_key_that_printed_them() {
        let keys = [
            GaugeKey::InFlight,
            GaugeKey::BulkheadInUse("db-pool_2".into()),
            GaugeKey::DatabaseLockWaiting("main".into()),
            GaugeKey::DatabaseConnectionWaiting("main".into()),
            GaugeKey::AdaptiveLimit("aimd".into()),
            GaugeKey::BreakerState("redis".into()),
            GaugeKey::ServerUsedMemory("redis".into()),
        ];
        for key in keys {
            assert_eq!(
                GaugeKey::parse(&key.to_string()),
                Some(key.clone()),
                "{key}"
            );
        }
        let count = CountKey::RateLimitFailOpenAdmitted("api".into());
        assert_eq!(count.to_string(), "rate_limits.api.fail_open_admitted");
        assert_eq!(CountKey::parse(&count.to_string()), Some(count));
        let evicted = CountKey::ServerEvictedKeys("redis".into());
        assert_eq!(evicted.to_string(), "servers.redis.evicted_keys");
        assert_eq!(CountKey::parse(&evicted.to_string()), Some(evicted));
        let rejected = CountKey::RejectedAttempts;
        assert_eq!(rejected.to_string(), "rejected_attempts");
        assert_eq!(rejected.resource(), None);
        assert_eq!(CountKey::parse("rejected_attempts"), Some(rejected));
    }

    #[test]
    fn the_names_are_the_ones_reports_have_always_used() {
        assert_eq!(GaugeKey::InFlight.to_string(), "in_flight");
        assert_eq!(
            GaugeKey::DatabaseConcurrency("main".into()).to_string(),
            "databases.main.concurrency"
        );
        assert_eq!(
            GaugeKey::ConnectionConnected("cache".into()).to_string(),
            "connections.cache.connected"
        );
        assert_eq!(
            CountKey::ConnectionFailOpen("cache".into()).to_string(),
            "connections.cache.fail_open"
        );
    }

    #[test]
    fn other_names_are_not_keys() {
        for name in [
            "",
            "in_flight.x",
            "bulkheads.db",
            "bulkheads..in_use",
            "bulkheads.a.b.in_use",
            "bulkheads.db.in_flight",
            "nothing.db.in_use",
            "connections.cache.fail_open",
        ] {
            assert_eq!(GaugeKey::parse(name), None, "{name}");
        }
        assert_eq!(CountKey::parse("connections.cache.pending"), None);
    }
}

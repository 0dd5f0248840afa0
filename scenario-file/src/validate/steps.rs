//! A step's action tables declared in `crate::step_keys` (`redis`, `db`, `work`'s
//! distribution, `call`, `cache`, `throttle`, `rate_limit`, `lock`), read through
//! [`TableReader`], each action's function given its table's reader by
//! `Validator::step_action`; here, what the declaration cannot say: the keys that apply to
//! one Redis `command`, one `op` (or one distribution) only, each refusal saying why, a
//! Redis step's connection that must send commands, and a rate limiter's `key` and
//! `replay_writes`, which depend on whether the limiter has a store.

use std::ops::Range as Span;

use outagelab_report::Outcome;
use outagelab_sim::scenario::{
    CacheOp, DataAccess, Distribution, LockMode, LockOp, OutcomeSet, RedisCommand, StepAction,
    ThrottleOp,
};
use toml::Spanned;

use super::Validator;
use super::table::TableReader;
use crate::kinds::Names;
use crate::step_keys::{DISTRIBUTION, RawDistribution};

/// A latency table's `distribution`, before its durations are read.
#[derive(Clone, Copy)]
enum DistributionName {
    Uniform,
    Exponential,
}

const DISTRIBUTIONS: &[(&str, DistributionName)] = &[
    ("uniform", DistributionName::Uniform),
    ("exponential", DistributionName::Exponential),
];

/// A Redis step's `command`, before the keys of some commands only are read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RedisCommandName {
    Get,
    Set,
    SetNxPx,
    Incr,
    Del,
    Publish,
}

const REDIS_COMMANDS: &[(&str, RedisCommandName)] = &[
    ("GET", RedisCommandName::Get),
    ("SET", RedisCommandName::Set),
    ("SET NX PX", RedisCommandName::SetNxPx),
    ("INCR", RedisCommandName::Incr),
    ("DEL", RedisCommandName::Del),
    ("PUBLISH", RedisCommandName::Publish),
];

/// A cache step's `op`, before a put's value is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CacheOpName {
    Get,
    Put,
    Invalidate,
    Flush,
}

const CACHE_OPS: &[(&str, CacheOpName)] = &[
    ("get", CacheOpName::Get),
    ("put", CacheOpName::Put),
    ("invalidate", CacheOpName::Invalidate),
    ("flush", CacheOpName::Flush),
];

const THROTTLE_OPS: &[(&str, ThrottleOp)] = &[
    ("acquire", ThrottleOp::Acquire),
    ("release", ThrottleOp::Release),
];

/// A lock step's `op`, before an acquire's mode is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LockOpName {
    Acquire,
    Release,
}

const LOCK_OPS: &[(&str, LockOpName)] = &[
    ("acquire", LockOpName::Acquire),
    ("release", LockOpName::Release),
];

const LOCK_MODES: &[(&str, LockMode)] = &[
    ("exclusive", LockMode::Exclusive),
    ("shared", LockMode::Shared),
];

impl Validator<'_> {
    /// A latency written as a table, at `span` (a `work` step's, a database's `latency`),
    /// its path `key`.
    pub(super) fn distribution(
        &mut self,
        key: &str,
        span: Span<usize>,
        raw: &RawDistribution,
    ) -> Option<Distribution> {
        let mut r = TableReader::new(self, key.to_owned(), &raw.keys, &DISTRIBUTION, Some(span));
        let kind = r.choice("distribution", DISTRIBUTIONS, None).ok()??;
        // A key this distribution needs is reported at its `distribution`.
        let require = |r: &mut TableReader, name: &str| match r.written(name) {
            Some(_) => r.duration(name, None).ok()?,
            None => {
                let (span, key) = (r.written_span("distribution"), r.key(name));
                r.validator
                    .error(span, key, "is required by this distribution");
                None
            }
        };
        match kind {
            DistributionName::Uniform => {
                if r.written("mean").is_some() {
                    r.refuse("mean", "a uniform distribution has min and max, not a mean");
                }
                let (min, max) = (require(&mut r, "min"), require(&mut r, "max"));
                Distribution::uniform(min?, max?).map_err(|error| {
                    let span = r.written_span("min");
                    let key = r.key(error.field);
                    r.validator.error(span, key, error.reason);
                })
            }
            DistributionName::Exponential => {
                if r.written("max").is_some() {
                    r.refuse("max", "an exponential distribution has no maximum");
                }
                // A min that is not a duration is reported, and the mean still read.
                let min = r.duration("min", None).ok().flatten().unwrap_or_default();
                let mean = require(&mut r, "mean")?;
                Distribution::exponential(min, mean).map_err(|error| {
                    let span = r.written_span("mean");
                    let key = r.key(error.field);
                    r.validator.error(span, key, error.reason);
                })
            }
        }
        .ok()
    }
}

/// A Redis command on a connection, on the request's key of a family: a SET's value and
/// ttl, a PUBLISH's channel, refused on the commands that take none.
pub(super) fn redis_step(r: &mut TableReader, names: &Names) -> Option<StepAction> {
    let command_name = r.choice("command", REDIS_COMMANDS, None).ok()??;
    let takes_value = matches!(
        command_name,
        RedisCommandName::Set | RedisCommandName::SetNxPx
    );
    for name in ["value", "ttl"] {
        if !takes_value && r.written(name).is_some() {
            let message = "applies to SET and SET NX PX only: this command writes no value";
            r.refuse(name, message);
        }
    }
    if command_name != RedisCommandName::Publish && r.written("channel").is_some() {
        r.refuse(
            "channel",
            "applies to PUBLISH only: this command sends no message",
        );
    }
    let connection = r.resolve("connection", &names.connections);
    let family = r.resolve("key", &names.keys);
    let written = r
        .name("connection")
        .expect("a redis step is read with its connection");
    if (names.connections.get(written.get_ref())).is_some_and(|(_, target)| target.subscribes()) {
        let message = format!(
            "`{}` is a subscriber: it sends no commands (give the step a connection of its \
                 own)",
            written.get_ref()
        );
        r.refuse("connection", message);
        return None;
    }
    let command = match command_name {
        RedisCommandName::Get => RedisCommand::Get,
        RedisCommandName::Incr => RedisCommand::Incr,
        RedisCommandName::Del => RedisCommand::Del,
        RedisCommandName::Publish => {
            let Some(channel) = r.name("channel") else {
                let message = "PUBLISH needs the channel it sends the key to \
                                   (`channel = \"...\"`)";
                let (span, key) = (r.written_span("command"), r.key("channel"));
                r.validator.error(span, key, message);
                return None;
            };
            let key = r.key("channel");
            let id = r.validator.channel_id(channel.get_ref());
            r.validator.published.push((channel, key));
            RedisCommand::Publish { channel: id }
        }
        RedisCommandName::Set => RedisCommand::Set {
            // A value's size is declared with its default.
            value_bytes: r.value_size("value").ok()??,
            ttl: r.duration("ttl", None).ok()?,
        },
        RedisCommandName::SetNxPx => {
            let value_bytes = r.value_size("value").ok()??;
            let Some(ttl) = r.duration("ttl", None).ok()? else {
                let (span, key) = (r.written_span("command"), r.key("ttl"));
                let message = "SET NX PX needs a ttl (the PX argument)";
                r.validator.error(span, key, message);
                return None;
            };
            RedisCommand::SetNxPx { value_bytes, ttl }
        }
    };
    Some(StepAction::Redis {
        connection: connection?,
        command,
        key: family?,
    })
}

/// A query: its database, its own timeout and latency, the lock it waits for and the
/// data it reads or writes.
pub(super) fn db_step(r: &mut TableReader, names: &Names) -> Option<StepAction> {
    let database = r.resolve("name", &names.databases);
    let timeout = r.duration("timeout", None).ok()?;
    let latency = r.latency("latency").ok()?;
    let lock = match r.written("lock") {
        Some(_) => Some(r.resolve("lock", &names.keys)?),
        None => None,
    };
    let data = match (r.written("key"), r.written("write")) {
        (Some(_), _) => Some(DataAccess {
            key: r.resolve("key", &names.keys)?,
            write: r.flag("write"),
        }),
        (None, Some(_)) => {
            let message = "a write commits a new version of a key: give the key family \
                               it writes (`key = \"...\"`)";
            r.refuse("write", message);
            return None;
        }
        (None, None) => None,
    };
    Some(StepAction::Database {
        database: database?,
        timeout,
        latency,
        lock,
        data,
    })
}

/// A call step: its latency, and the share of calls that fail with which error.
pub(super) fn call_step(r: &mut TableReader) -> Option<StepAction> {
    let latency = r.latency("latency").ok().flatten();
    let error_permille = r.percent("error_percent", None).ok().flatten();
    let error = match r.name("error") {
        None => {
            let word = r
                .default_word("error")
                .expect("a call's error has a default");
            Outcome::from_name(word)
        }
        Some(name) => {
            let list = Spanned::new(name.span(), vec![name.clone()]);
            let key = r.key("error");
            let set = r.validator.error_outcomes(&list, &key)?;
            let one = Outcome::ALL.into_iter().find(|&o| set.contains(o));
            if one.is_none() || set != OutcomeSet::new(one) {
                r.refuse(
                        "error",
                        "a call fails with one outcome: name one (such as \"server_error\" or \"timeout\"), not a status class",
                    );
                return None;
            }
            one
        }
    };
    Some(StepAction::Call {
        latency: latency?,
        error_permille: error_permille?,
        error: error?,
    })
}

pub(super) fn cache_step(r: &mut TableReader, names: &Names) -> Option<StepAction> {
    let cache = r.resolve("name", &names.caches);
    let op_name = r.choice("op", CACHE_OPS, None).ok()??;
    if op_name != CacheOpName::Put && r.written("value").is_some() {
        r.refuse(
            "value",
            "applies to op = \"put\" only: no other cache op writes a value",
        );
    }
    let family = match (r.name("key"), op_name) {
        (Some(_), CacheOpName::Flush) => {
            r.refuse("key", "a flush empties the whole cache: it takes no key");
            return None;
        }
        (Some(family), _) => {
            let key = r.key("key");
            Some(r.validator.resolve(&names.keys, &family, &key)?)
        }
        (None, CacheOpName::Flush) => None,
        (None, _) => {
            let span = r.written_span("op");
            let key = r.key("key");
            let message = "this cache op needs a key (a [keys.<name>] family)";
            r.validator.error(span, key, message);
            return None;
        }
    };
    let op = match op_name {
        CacheOpName::Get => CacheOp::Get,
        CacheOpName::Put => CacheOp::Put {
            // A value's size is declared with its default.
            value_bytes: r.value_size("value").ok()??,
        },
        CacheOpName::Invalidate => CacheOp::Invalidate,
        CacheOpName::Flush => CacheOp::Flush,
    };
    Some(StepAction::Cache {
        cache: cache?,
        op,
        key: family,
    })
}

pub(super) fn throttle_step(r: &mut TableReader, names: &Names) -> Option<StepAction> {
    let throttle = r.resolve("name", &names.throttles);
    let family = r.resolve("key", &names.keys);
    let op = r.choice("op", THROTTLE_OPS, None).ok()??;
    Some(StepAction::Throttle {
        throttle: throttle?,
        op,
        key: family?,
    })
}

pub(super) fn lock_step(r: &mut TableReader, names: &Names) -> Option<StepAction> {
    let lock = r.resolve("name", &names.locks);
    let connection = r.resolve("connection", &names.connections);
    let family = r.resolve("key", &names.keys);
    let op = match (r.choice("op", LOCK_OPS, None).ok()??, r.written("mode")) {
        (LockOpName::Acquire, Some(_)) => {
            LockOp::Acquire(r.choice("mode", LOCK_MODES, None).ok()??)
        }
        (LockOpName::Acquire, None) => {
            let span = r.written_span("op");
            let key = r.key("mode");
            r.validator.error(
                    span,
                    key,
                    "an acquire says how it holds the lock: mode = \"exclusive\" (a writer) or \"shared\" (a reader)",
                );
            return None;
        }
        (LockOpName::Release, Some(_)) => {
            r.refuse(
                    "mode",
                    "a release gives back the lock the request holds, in the mode it took it: leave mode out",
                );
            return None;
        }
        (LockOpName::Release, None) => LockOp::Release,
    };
    Some(StepAction::Lock {
        lock: lock?,
        op,
        connection: connection?,
        key: family?,
    })
}

pub(super) fn rate_limit_step(r: &mut TableReader, names: &Names) -> Option<StepAction> {
    let limiter = r.resolve("name", &names.rate_limits)?;
    let name = r
        .name("name")
        .expect("a rate limit step is read with its name");
    let has_store = names.has_store(name.get_ref());
    let family = match (r.name("key"), has_store) {
        (Some(family), true) => {
            let id = r.resolve("key", &names.keys)?;
            // One bucket per key: a family left at its default of one key is one bucket
            // for every request, which a file means only if it says so.
            if let Some((_, keys)) = names.keys.get(family.get_ref())
                && keys.keys.get("count").is_none()
            {
                let key = r.key("key");
                let warning = r.validator.source.diagnostic(
                    Some(family.span()),
                    key,
                    format!(
                        "checks one bucket for everyone: the limiter keeps a bucket per key \
                             and `keys.{}` has one key (no count); write `count = 1` there to \
                             mean one limit for the whole service, or the number of clients \
                             (`count = 1000`) for a limit per client",
                        family.get_ref()
                    ),
                );
                r.validator.warnings.push(warning);
            }
            Some(id)
        }
        (None, false) => None,
        (Some(_), false) => {
            r.refuse("key", "a limiter without a store keeps no keys");
            return None;
        }
        (None, true) => {
            r.refuse(
                "key",
                "a limiter with a store checks a key: name a [keys.<name>] family",
            );
            return None;
        }
    };
    Some(StepAction::RateLimit {
        limiter,
        key: family,
    })
}

/// A rate-limit step's `replay_writes`, which applies to a limiter with a store only.
pub(super) fn rate_limit_replays(r: &mut TableReader, names: &Names) -> bool {
    if r.written("replay_writes").is_none() {
        return false;
    }
    let name = r
        .name("name")
        .expect("a rate limit step is read with its name");
    if !names.has_store(name.get_ref()) {
        r.refuse(
            "replay_writes",
            "applies to a rate limiter with a store: a local one sends no command a \
                 reconnect slot could replay",
        );
    }
    r.flag("replay_writes")
}

#[cfg(test)]
mod tests {
    use crate::keys::KeyDefault;

    /// A value written by a Redis step, a preload and a cache put has one default size.
    #[test]
    fn the_declared_value_defaults_agree() {
        let redis = crate::step_keys::REDIS_STEP.declared("value").default;
        assert_eq!(redis, KeyDefault::Is("64"));
        for spec in [
            &crate::resource_keys::PRELOAD,
            &crate::step_keys::CACHE_STEP,
        ] {
            let default = spec.declared("value").default;
            assert_eq!(default, redis, "{}", spec.what);
        }
    }
}

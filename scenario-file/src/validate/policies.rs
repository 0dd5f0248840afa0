//! The policies that keep state of their own, read through their declarations
//! (`crate::policy_keys`): a cache, a rate limiter, a KV store, a throttle and a lock, every
//! key through [`TableReader`], which applies the defaults as declared; here, what the
//! declaration cannot say: the keys that apply only with another, and the configs' refusals
//! placed at the key they came from.

use outagelab_model::cache::CacheConfig;
use outagelab_model::lock::{LockConfig, RetryJitter};
use outagelab_model::rate_limit::{
    Algorithm, BucketConfig, RateLimiterConfig, TokenRate, WhenStoreUnreachable,
};
use outagelab_model::throttle::{CounterTtl, ThrottleConfig};
use outagelab_model::time::SimDuration;
use outagelab_sim::scenario::{
    CacheSpec, KvStoreSpec, LockSpec, Rate, RateLimitSpec, ThrottleForm, ThrottleSpec,
};

use super::table::TableReader;
use super::{Reported, Validator};
use crate::kinds::Names;
use crate::policy_keys::{
    CACHE, KV_STORE, LOCK, RATE_LIMIT, RawCache, RawKvStore, RawLock, RawRateLimit, RawThrottle,
    THROTTLE,
};

type Reader<'v, 'a, 'r> = TableReader<'v, 'a, 'r>;

impl Validator<'_> {
    pub(super) fn cache(&mut self, name: &str, raw: &RawCache) -> Option<CacheSpec> {
        let table_span = self.key_span(&["caches", name]);
        let prefix = format!("caches.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &CACHE, table_span);
        let ttl = r.duration("ttl", None).ok()?.expect("required");
        let max_bytes = r.size("max_bytes").ok()?.expect("required");
        let max_entries = r.count("max_entries", None).ok()?.expect("required");
        let config = CacheConfig::new(max_entries, max_bytes, ttl);
        let config = config.map_err(|error| r.refuse(error.field, error.reason));
        Some(CacheSpec {
            name: name.to_owned(),
            config: config.ok()?,
        })
    }

    pub(super) fn rate_limit(
        &mut self,
        name: &str,
        raw: &RawRateLimit,
        names: &Names,
    ) -> Option<RateLimitSpec> {
        let table_span = self.key_span(&["rate_limits", name]);
        let prefix = format!("rate_limits.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &RATE_LIMIT, table_span);
        let store = match r.name("store") {
            Some(store) => {
                let key = r.key("store");
                Some(r.validator.resolve(&names.connections, &store, &key)?)
            }
            None => None,
        };
        let bucket = bucket(&mut r).ok()?;
        let algorithm = r.choice("algorithm", RATE_ALGORITHMS, None).ok()?;
        let when_unreachable = when_unreachable(&mut r).ok()?;
        let algorithm = algorithm.expect("declared with a default");
        let config = RateLimiterConfig::new(bucket, algorithm, when_unreachable);
        let config = config.map_err(|error| {
            let (span, key) = (r.written_span(error.field), r.key(error.field));
            r.validator.error(span, key, error.reason);
        });
        Some(RateLimitSpec {
            name: name.to_owned(),
            enabled: r.flag("enabled"),
            config: config.ok()?,
            store,
            buckets_of: None,
        })
    }

    pub(super) fn kv_store(&mut self, name: &str, raw: &RawKvStore) -> Option<KvStoreSpec> {
        let table_span = self.key_span(&["kv_stores", name]);
        let prefix = format!("kv_stores.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &KV_STORE, table_span);
        let read_latency = r.latency("read_latency").ok()?.expect("required");
        let write_latency = r.latency("write_latency").ok()?.expect("required");
        Some(KvStoreSpec {
            name: name.to_owned(),
            read_latency,
            write_latency,
            staleness_max: duration_or_zero(&mut r, "staleness_max"),
        })
    }

    pub(super) fn throttle(
        &mut self,
        name: &str,
        raw: &RawThrottle,
        names: &Names,
        stores: &[KvStoreSpec],
    ) -> Option<ThrottleSpec> {
        let table_span = self.key_span(&["throttles", name]);
        let prefix = format!("throttles.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &THROTTLE, table_span);
        let (form, staleness) = throttle_form(&mut r, names, stores)?;
        let retry_after = duration_or_zero(&mut r, "retry_after");
        let counter_ttl = counter_ttl(&mut r).ok()?;
        let release_loss_permille = r.percent("release_loss_percent", None).ok()?;
        let inflight_max = r.count("inflight_max", None).ok()?.expect("required");
        let config = ThrottleConfig::new(inflight_max, retry_after, counter_ttl, staleness);
        let config = config.map_err(|error| {
            // The store's staleness is refused at the store that has it.
            let written = match error.field {
                "kv_staleness_max" => "store",
                field => field,
            };
            let (span, key) = (r.written_span(written), r.key(error.field));
            r.validator.error(span, key, error.reason);
        });
        Some(ThrottleSpec {
            name: name.to_owned(),
            enabled: r.flag("enabled"),
            config: config.ok()?,
            form,
            release_loss_permille: release_loss_permille.unwrap_or(0),
        })
    }

    pub(super) fn lock(&mut self, name: &str, raw: &RawLock) -> Option<LockSpec> {
        let table_span = self.key_span(&["locks", name]);
        let prefix = format!("locks.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &LOCK, table_span);
        let lease = r.duration("lease", None);
        let retry_delay = duration_or_zero(&mut r, "retry_delay");
        let acquire_timeout = r.duration("acquire_timeout", None);
        let jitter = r.choice("retry_jitter", LOCK_JITTERS, None).ok()?;
        let (lease, acquire_timeout) = (lease.ok()?, acquire_timeout.ok()?);
        let config = LockConfig::new(
            lease.expect("required"),
            retry_delay,
            acquire_timeout.expect("required"),
        );
        let config = config.map_err(|error| {
            // A retry delay left at its default is refused at the timeout it exceeds.
            let span = r.written_span(error.field);
            let span = span.or_else(|| r.written_span("acquire_timeout"));
            let key = r.key(error.field);
            r.validator.error(span, key, error.reason);
        });
        let jitter = jitter.expect("declared with a default");
        Some(LockSpec {
            name: name.to_owned(),
            config: config.ok()?.with_jitter(jitter),
        })
    }
}

/// A duration written or its declared default; one refused is reported and read as zero
/// (which the config then refuses too).
fn duration_or_zero(r: &mut Reader, name: &str) -> SimDuration {
    match r.duration(name, None) {
        Ok(duration) => duration.expect("declared with a default"),
        Err(Reported) => SimDuration::ZERO,
    }
}

/// A rate limiter's bucket: its refill rate, then its capacity.
fn bucket(r: &mut Reader) -> Result<BucketConfig, Reported> {
    let per_second = r.float("rate").expect("required");
    let rate = Rate::per_second(per_second).map_err(|error| r.refuse("rate", error.reason))?;
    let token_rate = TokenRate::per_second_milli(rate.millirequests_per_second())
        .map_err(|error| r.refuse(error.field, error.reason))?;
    let capacity = r.count_to("capacity", u64::MAX)?.expect("required");
    BucketConfig::new(capacity, token_rate).map_err(|error| r.refuse(error.field, error.reason))
}

const RATE_ALGORITHMS: &[(&str, Algorithm)] = &[
    ("token_bucket", Algorithm::TokenBucket),
    ("gcra", Algorithm::Gcra),
];

/// What a limiter does when its store is unreachable; `fail_closed_retry_after` applies only
/// when it refuses.
fn when_unreachable(r: &mut Reader) -> Result<WhenStoreUnreachable, Reported> {
    let closed = r.choice(
        "when_unreachable",
        &[("open", false), ("closed", true)],
        None,
    )?;
    if closed.expect("declared with a default") {
        let retry_after = duration_or_zero(r, "fail_closed_retry_after");
        return Ok(WhenStoreUnreachable::FailClosed { retry_after });
    }
    if r.written("fail_closed_retry_after").is_some() {
        let message = "applies to when_unreachable = \"closed\" only";
        r.refuse("fail_closed_retry_after", message);
    }
    Ok(WhenStoreUnreachable::FailOpen)
}

/// A throttle's form, with the staleness of the store a `"kv"` one reads.
fn throttle_form(
    r: &mut Reader,
    names: &Names,
    stores: &[KvStoreSpec],
) -> Option<(ThrottleForm, SimDuration)> {
    let kv = r
        .choice("form", &[("atomic", false), ("kv", true)], None)
        .ok()?;
    let store = r.name("store");
    if !kv.expect("required") {
        if store.is_some() {
            let message = "an atomic throttle keeps no store (its check-and-increment is one step)";
            r.refuse("store", message);
        }
        return Some((ThrottleForm::Atomic, SimDuration::ZERO));
    }
    let Some(store) = store else {
        let (span, key) = (r.written_span("form"), r.key("store"));
        let message = "a KV throttle needs a store: a [kv_stores.<name>]";
        r.validator.error(span, key, message);
        return None;
    };
    let key = r.key("store");
    let id = r.validator.resolve(&names.kv_stores, &store, &key)?;
    let staleness = stores
        .iter()
        .find(|spec| spec.name == *store.get_ref())
        .map_or(SimDuration::ZERO, |spec| spec.staleness_max);
    Some((ThrottleForm::Kv { store: id }, staleness))
}

/// A throttle's counter expiry, and how writes move it (`ttl_mode`, which needs it).
fn counter_ttl(r: &mut Reader) -> Result<CounterTtl, Reported> {
    let refreshed = r.choice("ttl_mode", &[("fixed", false), ("refreshed", true)], None)?;
    let mode_written = r.written("ttl_mode").is_some();
    let Some(ttl) = r.duration("counter_ttl", None)? else {
        if mode_written {
            return Err(r.refuse(
                "ttl_mode",
                "says how counter_ttl applies, but there is no counter_ttl (leave both out for \
                 a counter that never expires)",
            ));
        }
        return Ok(CounterTtl::Never);
    };
    Ok(match refreshed.expect("declared with a default") {
        true => CounterTtl::RefreshedOnWrite(ttl),
        false => CounterTtl::FixedAtCreation(ttl),
    })
}

const LOCK_JITTERS: &[(&str, RetryJitter)] = &[
    ("none", RetryJitter::None),
    ("full", RetryJitter::Full),
    ("equal", RetryJitter::Equal),
];

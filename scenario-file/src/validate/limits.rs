//! The concurrency limits read through their declarations (`crate::limit_keys`): a bulkhead,
//! a semaphore and an adaptive limit with its algorithm, every key through [`TableReader`],
//! which applies the defaults as declared; here, what the declaration cannot say: the
//! defaults of an adaptive limit's bounds, which follow each other, and the configs'
//! refusals placed at the key they came from.

use outagelab_model::ConfigError;
use outagelab_model::adaptive_limit::{AdaptiveLimitConfig, Algorithm, QueueSize};
use outagelab_model::bulkhead::BulkheadConfig;
use outagelab_model::semaphore::SemaphoreConfig;
use outagelab_report::Outcome;
use outagelab_sim::scenario::{AdaptiveLimitSpec, BulkheadSpec, OutcomeSet, SemaphoreSpec};

use super::table::TableReader;
use super::{Reported, Validator};
use crate::limit_keys::{
    ADAPTIVE_LIMIT, BULKHEAD, RawAdaptiveLimit, RawBulkhead, RawSemaphore, SEMAPHORE,
};
use crate::raw::RawValue;

type Reader<'v, 'a, 'r> = TableReader<'v, 'a, 'r>;

impl Validator<'_> {
    pub(super) fn bulkhead(&mut self, name: &str, raw: &RawBulkhead) -> Option<BulkheadSpec> {
        let table_span = self.key_span(&["bulkheads", name]);
        let prefix = format!("bulkheads.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &BULKHEAD, table_span);
        let queue = r.count("queue", None);
        let max_concurrent = r.count("max_concurrent", None).ok()?.expect("required");
        let queue = queue.ok()?.expect("required");
        let config = BulkheadConfig::new(max_concurrent, queue);
        let config = config.map_err(|error| r.refuse(error.field, error.reason));
        Some(BulkheadSpec {
            name: name.to_owned(),
            enabled: r.flag("enabled"),
            config: config.ok()?,
        })
    }

    pub(super) fn semaphore(&mut self, name: &str, raw: &RawSemaphore) -> Option<SemaphoreSpec> {
        let table_span = self.key_span(&["semaphores", name]);
        let prefix = format!("semaphores.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &SEMAPHORE, table_span);
        let max_in_flight = r.count("max_in_flight", None).ok()?;
        let max_bytes = r.size("max_bytes").ok()?;
        let config = SemaphoreConfig::new(max_in_flight, max_bytes);
        let config = config.map_err(|error| r.refuse(error.field, error.reason));
        Some(SemaphoreSpec {
            name: name.to_owned(),
            enabled: r.flag("enabled"),
            config: config.ok()?,
        })
    }

    pub(super) fn adaptive_limit(
        &mut self,
        name: &str,
        raw: &RawAdaptiveLimit,
    ) -> Option<AdaptiveLimitSpec> {
        let table_span = self.key_span(&["adaptive_limits", name]);
        let prefix = format!("adaptive_limits.{name}");
        let mut r = TableReader::new(self, prefix, &raw.keys, &ADAPTIVE_LIMIT, table_span);
        let (limit_initial, limit_min, limit_max) = bounds(&mut r);
        let algorithm = algorithm(&mut r).ok()?;
        let config = AdaptiveLimitConfig::new(limit_initial, limit_min, limit_max, algorithm);
        let config = config.map_err(|error| refuse_config(&mut r, error)).ok()?;
        let drops = match r.list("drops") {
            None => OutcomeSet::new([Outcome::Timeout, Outcome::Refused, Outcome::Shed]),
            Some(list) => {
                let key = r.key("drops");
                r.validator.error_outcomes(&list, &key)?
            }
        };
        Some(AdaptiveLimitSpec {
            name: name.to_owned(),
            enabled: r.flag("enabled"),
            config,
            drops,
        })
    }
}

/// The limit's start and bounds, `(initial, min, max)`. Defaults: initial 20 and max 200 as
/// Netflix's builders, but min 1 (theirs is 20, which would forbid shrinking below the
/// start); a default never falls outside the bounds the file gives.
fn bounds(r: &mut Reader) -> (u32, u32, u32) {
    let limit_min = r.count("limit_min", None);
    let limit_max = r.count("limit_max", None);
    let limit_initial = r.count("limit_initial", None);
    // A bound refused is reported, and its default stands in for it.
    let limit_min = limit_min.ok().flatten().unwrap_or(1);
    let limit_max = limit_max.ok().flatten().unwrap_or(200.max(limit_min));
    // Not `clamp`: it panics on bounds the config is about to refuse.
    let limit_initial = limit_initial.ok().flatten();
    let limit_initial = limit_initial.unwrap_or(20.max(limit_min).min(limit_max));
    (limit_initial, limit_min, limit_max)
}

/// The algorithm's table (the reader took exactly one), its keys written or its defaults.
fn algorithm(r: &mut Reader) -> Result<Algorithm, Reported> {
    if let Some(mut aimd) = r.table("aimd") {
        let timeout = aimd.duration("timeout", None)?;
        return Ok(Algorithm::Aimd {
            backoff_ratio: aimd
                .float("backoff_ratio")
                .expect("declared with a default"),
            timeout: timeout.expect("declared with a default"),
        });
    }
    let mut gradient = r.table("gradient2").expect("one algorithm is read");
    let long_window = gradient.count("long_window", None)?;
    let queue_size = gradient.count("queue_size", None)?;
    Ok(Algorithm::Gradient2 {
        rtt_tolerance: gradient.float("rtt_tolerance").expect("declared"),
        smoothing: gradient.float("smoothing").expect("declared"),
        long_window: long_window.expect("declared with a default"),
        queue_size: QueueSize::Fixed(queue_size.expect("declared with a default")),
    })
}

/// The config's refusal, at the key its field came from: the limit's own, or its
/// algorithm's (in that table, at the limit's table when not written).
fn refuse_config(r: &mut Reader, error: ConfigError) -> Reported {
    if ADAPTIVE_LIMIT.key(error.field).is_some() {
        return r.refuse(error.field, error.reason);
    }
    let table = ["aimd", "gradient2"]
        .into_iter()
        .find(|table| r.written(table).is_some())
        .expect("one algorithm is read");
    let span = match r.written(table).map(|value| value.get_ref()) {
        Some(RawValue::Table(keys)) => keys.get(error.field).map(|value| value.span()),
        _ => None,
    };
    let span = span.or(r.table_span.clone());
    let key = format!("{}.{table}.{}", r.prefix, error.field);
    r.validator.error(span, key, error.reason);
    Reported
}

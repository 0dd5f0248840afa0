//! The model's counters as the report's summaries: one place for each, so that a simulated
//! run and a live one (`outagelab live`, which drives the same model types) report them alike.

use outagelab_model::adaptive_limit::AdaptiveLimitCounters;
use outagelab_model::breaker::BreakerState;
use outagelab_model::bulkhead::BulkheadConfig;
use outagelab_model::cache::CacheCounters;
use outagelab_model::rate_limit::RateLimitCounters;
use outagelab_model::retry::RetryCounters;
use outagelab_model::semaphore::{SemaphoreConfig, SemaphoreCounters};
use outagelab_report::{
    AdaptiveLimitSummary, BreakerSummary, BulkheadSummary, CacheSummary, DatabaseSummary,
    RateLimitSummary, RetrySummary, SemaphoreSummary,
};

use crate::rules::{BreakerTally, BulkheadTally};
use crate::scenario::DatabaseSpec;

/// `opened` is the model's count; `state` its state at the run's end.
pub fn breaker(
    enabled: bool,
    tally: &BreakerTally,
    opened: u64,
    state: BreakerState,
) -> BreakerSummary {
    let final_state = match state {
        BreakerState::Closed => "closed",
        BreakerState::Open => "open",
        BreakerState::HalfOpen => "half_open",
    };
    BreakerSummary {
        enabled,
        opened,
        half_opened: tally.half_opened,
        closed: tally.closed,
        rejected: tally.rejected,
        final_state: final_state.to_owned(),
    }
}

pub fn bulkhead(enabled: bool, config: &BulkheadConfig, tally: &BulkheadTally) -> BulkheadSummary {
    BulkheadSummary {
        enabled,
        peak_in_use: tally.peak_in_use,
        peak_queued: tally.peak_queued,
        shed: tally.shed,
        max_concurrent: u64::from(config.max_concurrent()),
        queue_max: u64::from(config.queue_max()),
    }
}

pub fn semaphore(
    enabled: bool,
    config: &SemaphoreConfig,
    counters: &SemaphoreCounters,
) -> SemaphoreSummary {
    SemaphoreSummary {
        enabled,
        acquired: counters.acquired,
        peak_in_flight: u64::from(counters.in_flight_peak),
        peak_bytes: counters.bytes_in_flight_peak,
        rejected: counters.rejected_total(),
        max_in_flight: config.max_in_flight().map(u64::from),
        max_bytes: config.max_bytes(),
    }
}

pub fn retry(enabled: bool, counters: &RetryCounters) -> RetrySummary {
    RetrySummary {
        enabled,
        requests: counters.requests,
        retries: counters.retries_granted,
        gave_up_attempts: counters.attempts_exhausted,
        gave_up_budget: counters.budget_exhausted,
    }
}

pub fn adaptive_limit(enabled: bool, counters: &AdaptiveLimitCounters) -> AdaptiveLimitSummary {
    AdaptiveLimitSummary {
        enabled,
        admitted: counters.admitted,
        rejected: counters.rejected,
        dropped: counters.dropped,
        final_limit: u64::from(counters.limit),
        limit_min_seen: u64::from(counters.limit_min_seen),
        limit_max_seen: u64::from(counters.limit_max_seen),
        peak_in_flight: u64::from(counters.in_flight_peak),
    }
}

/// A request too large for the bucket is a rejection too.
pub fn rate_limit(enabled: bool, counters: &RateLimitCounters) -> RateLimitSummary {
    RateLimitSummary {
        enabled,
        admitted: counters.admitted,
        rejected: counters.rejected + counters.too_large,
        fail_open_admitted: counters.fail_open_admitted,
        fail_closed_rejected: counters.fail_closed_rejected,
    }
}

pub fn cache(counters: &CacheCounters) -> CacheSummary {
    CacheSummary {
        hits: counters.hits,
        misses: counters.misses,
        expirations: counters.expirations,
        evictions: counters.evictions,
        invalidations: counters.invalidations,
        flushes: counters.flushes,
    }
}

/// A database's configured limits, for the reference lines of its charts: the same in a
/// simulated run and a live one, which stands the database in as the simulator models it.
pub fn set_database_limits(summary: &mut DatabaseSummary, spec: &DatabaseSpec) {
    summary.capacity = spec.capacity.map(u64::from);
    summary.max_connections = spec.connections.map(|limit| u64::from(limit.max));
    summary.connection_queue_max = spec.connections.map(|limit| u64::from(limit.queue_max));
}

//! The model's counters as the report's summaries: one place for each, so that a simulated
//! run and a live one (`outagelab live`, which drives the same model types) report them alike.

use outagelab_model::adaptive_limit::AdaptiveLimitCounters;
use outagelab_model::cache::CacheCounters;
use outagelab_model::rate_limit::RateLimitCounters;
use outagelab_report::{AdaptiveLimitSummary, CacheSummary, RateLimitSummary};

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

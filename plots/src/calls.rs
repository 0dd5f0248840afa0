//! Calls over time, as the callers saw them, drawn only when the file has a caller
//! (`[callers.<name>]`): for each caller, calls that ended ok and calls that failed per second,
//! by the bucket they ended in. The outage curve counts the service's requests, and an attempt
//! the caller gave up on still ends `ok` there when the service finishes it later; this chart
//! is what the users behind the upstream lived through. Line style says the caller and what
//! ended; fault windows shaded.

use outagelab_report::{CountKey, RunReport};

use crate::chart::Chart;
use crate::multiples::counts_over_time;

pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    let spec = (
        "calls",
        "calls as their callers saw them",
        "calls/s",
        "Calls",
    );
    counts_over_time(report, label, false, spec)
}

/// The legend text of a count this chart shows; `None` for counts it leaves out.
fn label(key: &CountKey) -> Option<String> {
    match key {
        CountKey::CallerFailed(name) => Some(format!("{name}: failed calls")),
        CountKey::CallerOk(name) => Some(format!("{name}: ok calls")),
        CountKey::ConnectionFailOpen(_)
        | CountKey::RateLimitFailOpenAdmitted(_)
        | CountKey::ServerEvictedKeys(_)
        | CountKey::ServerExpiredKeys(_)
        | CountKey::RejectedAttempts => None,
    }
}

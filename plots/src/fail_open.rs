//! Fail-open over time, drawn only when something failed open: for every control that can
//! let requests through unchecked (`connections.<name>.fail_open`: steps on a connection that
//! failed and went on; `rate_limits.<name>.fail_open_admitted`: checks admitted because the
//! limiter's store was unreachable), how many per second. Outcomes alone hide this: a request
//! that failed open ends `ok`. Line style says the control; fault windows shaded.

use outagelab_report::{CountKey, RunReport};

use crate::chart::Chart;
use crate::multiples::counts_over_time;

pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    // Only the controls that failed open in some variant: the others are flat zero lines.
    let spec = (
        "fail_open",
        "fail-open over time",
        "let through unchecked per second",
        "Controls",
    );
    counts_over_time(report, label, true, spec)
}

/// The legend text of a count this chart shows; `None` for counts it leaves out.
fn label(key: &CountKey) -> Option<String> {
    match key {
        CountKey::ConnectionFailOpen(name) => Some(format!("connection {name}: steps failed open")),
        CountKey::RateLimitFailOpenAdmitted(name) => {
            Some(format!("rate limit {name}: admitted unchecked"))
        }
        CountKey::ServerEvictedKeys(_)
        | CountKey::ServerExpiredKeys(_)
        | CountKey::CallerOk(_)
        | CountKey::CallerFailed(_)
        | CountKey::RejectedAttempts => None,
    }
}

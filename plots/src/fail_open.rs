//! Fail-open over time, drawn only when something failed open: for every control that can
//! let requests through unchecked (`connections.<name>.fail_open`: steps on a connection that
//! failed and went on; `rate_limits.<name>.fail_open_admitted`: checks admitted because the
//! limiter's store was unreachable), how many per second. Outcomes alone hide this: a request
//! that failed open ends `ok`. Line style says the control; fault windows shaded.

use std::collections::BTreeMap;

use outagelab_report::{CountKey, RunReport};

use crate::axes::count_axis;
use crate::chart::{Chart, segments};
use crate::multiples::{Kind, OverTime, over_time, parts};
use crate::timeline::rates;

pub(crate) fn chart(report: &RunReport) -> Option<Chart> {
    // Only the controls that failed open in some variant: the others are flat zero lines.
    // In name order (the order lines get their dash), as the series are stored.
    let controls: Vec<CountKey> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.counters())
        .filter(|(key, values)| label(key).is_some() && values.iter().any(|&v| v > 0))
        .map(|(key, _)| (key.to_string(), key))
        .collect::<BTreeMap<String, CountKey>>()
        .into_values()
        .collect();
    if controls.is_empty() {
        return None;
    }
    let kinds = Kind::styled(
        controls
            .iter()
            .map(|control| label(control).unwrap_or_default()),
    );
    let parts = parts(report, |variant, part| {
        for (kind, control) in controls.iter().enumerate() {
            if let Some(values) = variant.series.count(control) {
                let per_second = rates(variant, |bucket| values.get(bucket).copied().unwrap_or(0));
                part.push(kind, segments(per_second));
            }
        }
    });
    let y =
        |lines: &[_], limits: &[f64]| count_axis("let through unchecked per second", lines, limits);
    let spec = OverTime {
        name: "fail_open",
        title: "fail-open over time",
        y: &y,
        heading: "Controls",
        kinds,
    };
    Some(over_time(report, spec, &parts))
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
        | CountKey::RejectedAttempts => None,
    }
}

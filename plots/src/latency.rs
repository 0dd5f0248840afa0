//! Latency over time: the p99 (solid), p95 (dotted) and p50 (dashed) latency of the requests
//! that ended in each bucket, with the fault windows shaded and the file's latency objective
//! (`[report] slo`) as a reference line. Buckets where no request ended have no percentile
//! and leave a gap in the line. The y-axis turns logarithmic when latencies spread over more
//! than a factor of 50 (for example 2 ms normally, 5 s in timeouts). Many variants, or
//! variants whose lines would hide each other, get a panel each (see `multiples`).

use outagelab_report::{RunReport, Slo};

use crate::axes::{format_number, value_axis};
use crate::chart::segments;
use crate::chart::{Chart, Dash, y_values};
use crate::multiples::{Kind, Limit, OverTime, over_time, parts};
use crate::timeline::bucket_middles_s;

pub(crate) fn chart(report: &RunReport) -> Chart {
    let kinds = vec![
        Kind::new("p99 (solid)", Dash::Solid, 2),
        Kind::new("p95 (dotted)", Dash::Dotted, 1),
        Kind::new("p50 (dashed)", Dash::Dashed, 2),
    ];
    let slo: Vec<Limit> = report.slo.iter().map(slo_limit).collect();
    let parts = parts(report, |variant, part| {
        let series = &variant.series;
        part.limits = slo.clone();
        let percentiles = [&series.p99_ms, &series.p95_ms, &series.p50_ms];
        for (kind, values) in percentiles.into_iter().enumerate() {
            let points = bucket_middles_s(series).zip(values.iter().copied());
            part.push(kind, segments(points));
        }
    });
    let y = |lines: &[_], limits: &[f64]| {
        value_axis(
            "latency (ms)",
            y_values(lines).chain(limits.iter().copied()),
        )
    };
    let spec = OverTime {
        name: "latency",
        title: "latency over time",
        y: &y,
        heading: "Percentiles",
        kinds,
    };
    over_time(report, spec, &parts)
}

/// The objective as a reference line: `SLO p99 ≤ 200 ms`.
pub(crate) fn slo_limit(slo: &Slo) -> Limit {
    Limit {
        what: "SLO".to_owned(),
        value: slo.latency_ms,
        label: slo_label(slo),
    }
}

pub(crate) fn slo_label(slo: &Slo) -> String {
    let latency = format_number(slo.latency_ms);
    match slo.percentile {
        Some(percentile) => format!("SLO p{} ≤ {latency} ms", format_number(percentile)),
        None => format!("SLO ≤ {latency} ms"),
    }
}

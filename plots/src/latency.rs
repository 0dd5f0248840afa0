//! Latency over time: the p99 (solid), p95 (dotted) and p50 (dashed) latency of the requests
//! that ended in
//! each bucket, one colour per variant, with the fault windows shaded. Buckets where no request
//! ended have no percentile and leave a gap in the line. The y-axis turns logarithmic when
//! latencies spread over more than a factor of 50 (for example 2 ms normally, 5 s in timeouts).

use outagelab_report::RunReport;

use crate::chart::{
    Chart, Dash, LegendEntry, Line, Stroke, palette, segments, value_axis, y_values,
};
use crate::timeline::{bucket_middles_s, one_panel_over_time, style_entry};

const P99: (Dash, u32) = (Dash::Solid, 2);
const P95: (Dash, u32) = (Dash::Dotted, 1);
const P50: (Dash, u32) = (Dash::Dashed, 2);

pub(crate) fn chart(report: &RunReport) -> Chart {
    let mut lines = Vec::new();
    for (index, variant) in report.variants.iter().enumerate() {
        let series = &variant.series;
        for (values, (dash, width)) in [
            (&series.p99_ms, P99),
            (&series.p95_ms, P95),
            (&series.p50_ms, P50),
        ] {
            lines.push(Line {
                segments: segments(bucket_middles_s(series).zip(values.iter().copied())),
                stroke: Stroke {
                    color: palette(index),
                    dash,
                    width,
                },
            });
        }
    }
    let y = value_axis("latency (ms)", y_values(&lines));
    let mut styles = vec![LegendEntry::heading("Percentiles")];
    for (label, (dash, width)) in [
        ("p99 (solid)", P99),
        ("p95 (dotted)", P95),
        ("p50 (dashed)", P50),
    ] {
        styles.push(style_entry(dash, width, label.to_owned()));
    }
    one_panel_over_time(report, "latency", "latency over time", y, lines, styles)
}

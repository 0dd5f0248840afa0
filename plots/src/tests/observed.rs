//! The `observed` chart, and every chart over time on the incident's clock.

use outagelab_observed::{ObservedSeries, Sample};
use outagelab_report::observed::{MappedSeries, ObservedMetric, ObservedSpec, compare};

use super::*;
use crate::chart::{Dash, MarkerShape};
use crate::render::tick_label;

/// The demo report beside an observed `in_flight` series every 5 s from 2024-12-03T10:00:00Z,
/// far above what either variant had at 15 s.
fn observed_report() -> RunReport {
    let mut report = demo_report();
    let start = 1_733_220_000_000;
    let samples = (1..=6)
        .map(|i| Sample {
            unix_ms: start + i * 5000,
            value: if i == 3 { 500.0 } else { 10.0 },
        })
        .collect();
    let spec = ObservedSpec {
        file: "incident.json".to_owned(),
        start_unix_ms: start,
        series: vec![MappedSeries {
            name: "waiting".to_owned(),
            metric: ObservedMetric::parse("in_flight").unwrap(),
            series: ObservedSeries {
                name: "inflight".to_owned(),
                labels: BTreeMap::new(),
                samples,
                step_ms: 5000,
            },
        }],
    };
    report.observed = Some(compare(&spec, &report.variants));
    report
}

#[test]
fn observed_series_are_drawn_over_each_variants_simulated_values() {
    let report = observed_report();
    let charts = charts(&report, &[]);
    assert!(demo_report().observed.is_none());
    assert!(
        !super::charts(&demo_report(), &[])
            .iter()
            .any(|c| c.name == "observed")
    );
    let chart = charts.iter().find(|c| c.name == "observed").expect("drawn");
    assert_eq!(chart.panels.len(), 1);
    let panel = &chart.panels[0];
    // Two variants, then the observed line, dashed and thick, at the middle of each step.
    assert_eq!(panel.lines.len(), 3);
    let observed = &panel.lines[2];
    assert_eq!(
        (observed.stroke.dash, observed.stroke.width),
        (Dash::Dashed, 3)
    );
    assert_eq!(observed.segments[0][0], (2.5, 10.0));
    assert_eq!(observed.segments[0][2], (12.5, 500.0));
    // Each variant differs most where the observed value jumps to 500.
    assert_eq!(panel.markers.len(), 2);
    for marker in &panel.markers {
        assert_eq!((marker.shape, marker.at.0), (MarkerShape::Ring, 12.5));
    }
    // The fault window is shaded, and the time axis tells the time of day.
    assert_eq!(panel.bands.len(), 1);
    assert_eq!(tick_label(&panel.x, 15.0), "10:00:15");
    assert_eq!(tick_label(&panel.x, 0.5), "10:00:00.5");
    assert!(panel.x.description.contains("2024-12-03T10:00:00Z"));
    // The legend gives the fault's window on the same clock.
    let window = chart
        .legend
        .iter()
        .find(|e| e.label.starts_with("redis-down"));
    assert_eq!(
        window.map(|e| e.label.as_str()),
        Some("redis-down: crash on redis, 10:00:10-10:00:20 UTC")
    );
}

#[test]
fn every_chart_over_time_is_on_the_incidents_clock() {
    let report = observed_report();
    for chart in charts(&report, &[])
        .iter()
        .filter(|c| c.name != "latency_cdf")
    {
        for panel in &chart.panels {
            assert_eq!(
                panel.x.clock_start_unix_ms,
                Some(1_733_220_000_000),
                "{}",
                chart.name
            );
        }
    }
    for chart in charts(&demo_report(), &[]) {
        assert!(
            chart
                .panels
                .iter()
                .all(|p| p.x.clock_start_unix_ms.is_none())
        );
        assert_eq!(tick_label(&chart.panels[0].x, 15.0), "15");
    }
}

#[test]
fn clock_ticks_fall_on_round_times_of_day() {
    use crate::render::clock_ticks;
    // A run that starts at 04:27:19.002 and lasts 5 s: ticks every second on the second.
    let start = 1_796_358_439_002;
    let ticks = clock_ticks(&(0.0..5.0), start, 8);
    assert_eq!(ticks, [0.998, 1.998, 2.998, 3.998, 4.998]);
    let labels: Vec<String> = (ticks.iter())
        .map(|&t| crate::render::time_of_day(start + (t * 1000.0).round() as i64))
        .collect();
    assert_eq!(
        labels,
        ["04:27:20", "04:27:21", "04:27:22", "04:27:23", "04:27:24"]
    );
    // An hour with room for 5 labels: every 15 minutes, on the quarter hours.
    let hour = clock_ticks(&(0.0..3600.0), 1_733_220_000_000 + 60_000, 5);
    assert_eq!(hour, [840.0, 1740.0, 2640.0, 3540.0]);
}

#[test]
fn the_observed_chart_is_written_as_png_and_svg() {
    let dir = std::env::temp_dir().join(format!("outagelab-observed-chart-{}", std::process::id()));
    let written = write_charts(&observed_report(), &[], &dir).unwrap();
    let names: Vec<String> = (written.iter())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"observed.png".to_owned()), "{names:?}");
    let svg = std::fs::read_to_string(dir.join("observed.svg")).unwrap();
    assert!(svg.contains("10:00:15"), "UTC ticks in the SVG");
    std::fs::remove_dir_all(&dir).unwrap();
}

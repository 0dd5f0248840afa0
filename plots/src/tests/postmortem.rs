//! The charts a postmortem pastes (issue 9, item 4): small multiples when variants would hide
//! each other, identical series named, strokes for many variants, limits and objectives as
//! reference lines, breaker state as lanes, labelled faults, 429s and stuck requests in the
//! outage curve, log axes where a limit would vanish, the last partial bucket, the latency CDF,
//! and every backlog gauge on the concurrency chart.

use std::collections::BTreeSet;

use outagelab_report::{BulkheadSummary, LatencyHistogram, Slo};

use super::*;
use crate::chart::{Dash, INK, Key, Panel, variant_stroke};

fn labels(chart: &chart::Chart) -> Vec<&str> {
    chart
        .legend
        .iter()
        .map(|entry| entry.label.as_str())
        .collect()
}

/// `count` variants, each a different mix of the demo's two services.
fn many(count: usize) -> RunReport {
    let faults = vec![fault("redis-down", 10_000.0, Some(20_000.0))];
    let variants = (0..count)
        .map(|index| {
            let mut series = demo_series(index % 2 == 1);
            let scale = index as u64 + 1;
            series
                .outcomes
                .values_mut()
                .for_each(|counts| counts.iter_mut().for_each(|count| *count *= scale));
            variant(&format!("variant {index}"), faults.clone(), series)
        })
        .collect();
    RunReport {
        variants,
        ..demo_report()
    }
}

#[test]
fn many_variants_get_a_panel_each_on_shared_axes() {
    let shared = latency::chart(&demo_report());
    assert_eq!(
        (shared.panels.len(), shared.columns),
        (1, 1),
        "two variants apart"
    );

    let chart = outage::chart(&many(8));
    assert_eq!(chart.columns, 2);
    let grid: Vec<&Panel> = chart.panels.iter().filter(|panel| !panel.wide).collect();
    assert_eq!(grid.len(), 8, "one panel per variant");
    let titles: Vec<&str> = grid.iter().filter_map(|p| p.title.as_deref()).collect();
    assert_eq!(titles[..2], ["variant 0", "variant 1"]);
    assert!(
        grid.iter()
            .all(|panel| panel.y == grid[0].y && panel.x == grid[0].x)
    );
    // Failed, succeeded: colour says what each line counts on a variant's own panel.
    let colors: Vec<_> = grid[0].lines.iter().map(|line| line.stroke.color).collect();
    assert_eq!(colors.len(), 2);
    assert_ne!(colors[0], colors[1]);
    // The requests in flight stay one panel for all, full width, under the grid.
    let wide: Vec<&Panel> = chart.panels.iter().filter(|panel| panel.wide).collect();
    assert_eq!(wide.len(), 1);
    assert_eq!(wide[0].lines.len(), 8);
}

#[test]
fn a_variant_the_same_as_an_earlier_one_is_marked_and_named() {
    let mut report = demo_report();
    let faults = report.variants[0].faults.clone();
    report
        .variants
        .push(variant("today, again", faults, demo_series(false)));
    let chart = outage::chart(&report);
    // It would hide the first: small multiples, and its panel says which it equals.
    assert_eq!(
        chart.panels[2].title.as_deref(),
        Some("today, again (same as no protection)")
    );
    assert!(chart.panels[2].lines.iter().all(|line| line.marks));
    assert!(chart.panels[0].lines.iter().all(|line| !line.marks));
    let entry = chart
        .legend
        .iter()
        .find(|entry| entry.label == "today, again (same as no protection)")
        .expect("named in the legend");
    assert!(matches!(entry.key, Key::Marked(_)));
    // In the one panel of requests in flight, its line is marked too; so are the others,
    // each of which lies under a later one outside the fault (two thirds of its buckets).
    let in_flight = chart.panels.iter().find(|panel| panel.wide).unwrap();
    let marks: Vec<bool> = in_flight.lines.iter().map(|line| line.marks).collect();
    assert_eq!(marks, [true, true, true]);
}

#[test]
fn strokes_stay_distinct_for_many_variants_and_the_legend_stays_in_the_image() {
    let distinct = |count: usize| {
        let strokes = (0..count).map(|index| format!("{:?}", variant_stroke(index)));
        strokes.collect::<BTreeSet<_>>().len() == count
    };
    assert!(distinct(30) && distinct(60), "colour x dash x width");
    assert_eq!(variant_stroke(16).dash, Dash::Dashed);

    let mut report = many(21);
    for (index, variant) in report.variants.iter_mut().enumerate() {
        variant.name = format!("variant {index} with a rather long name: retries x{index}");
    }
    for chart in charts(&report, &[]) {
        let layout = crate::layout::lay_out(&chart);
        assert_eq!(layout.legend.len(), chart.legend.len(), "{}", chart.name);
        let bottom = |entry: &crate::layout::PlacedEntry| {
            entry.at.1 + entry.lines.len() as i32 * crate::layout::LEGEND_LINE_HEIGHT as i32
        };
        assert!(
            layout
                .legend
                .iter()
                .all(|entry| bottom(entry) <= layout.size.1 as i32),
            "{}: the legend runs off the bottom",
            chart.name
        );
    }
}

/// `demo_report` with the limits the protected variant's file configured: a database of
/// capacity 10 in both, a bulkhead of 8 permits and 5 queued in the second.
fn limited_report() -> RunReport {
    let mut report = demo_report();
    for variant in &mut report.variants {
        variant.summary.databases.insert(
            "main".to_owned(),
            DatabaseSummary {
                capacity: Some(10),
                ..DatabaseSummary::default()
            },
        );
    }
    report.variants[1].summary.bulkheads.insert(
        "db".to_owned(),
        BulkheadSummary {
            enabled: true,
            max_concurrent: 8,
            queue_max: 5,
            ..BulkheadSummary::default()
        },
    );
    report
}

#[test]
fn configured_limits_are_labelled_reference_lines() {
    let chart = concurrency::chart(&limited_report());
    assert_eq!(chart.panels.len(), 1);
    let rules: Vec<(f64, &str, bool)> = chart.panels[0]
        .rules
        .iter()
        .map(|rule| (rule.at, rule.label.as_str(), rule.stroke.color == INK))
        .collect();
    assert_eq!(
        rules,
        [
            (10.0, "database main: capacity 10", true),
            (8.0, "bulkhead db: max_concurrent 8", true),
            (5.0, "bulkhead db: queue 5", true),
        ]
    );
    // A switched-off bulkhead has no limit to draw.
    let mut off = limited_report();
    off.variants[1]
        .summary
        .bulkheads
        .get_mut("db")
        .unwrap()
        .enabled = false;
    let rules = &concurrency::chart(&off).panels[0].rules;
    assert!(rules.iter().all(|rule| !rule.label.contains("bulkhead")));
    let svg = svg_charts(&limited_report(), &[]).unwrap();
    let (_, concurrency) = svg.iter().find(|(name, _)| *name == "concurrency").unwrap();
    assert!(concurrency.contains("bulkhead db: max_concurrent 8"));
}

#[test]
fn the_slo_is_drawn_on_the_latency_chart_and_the_cdf() {
    let mut report = demo_report();
    for variant in &mut report.variants {
        variant.summary.latency_histogram = LatencyHistogram {
            le_ms: vec![2.0, 5000.0],
            counts: vec![90, 10],
        };
    }
    assert!(
        latency::chart(&report).panels[0].rules.is_empty(),
        "none stated"
    );
    report.slo = Some(Slo {
        latency_ms: 200.0,
        percentile: Some(99.0),
    });
    let latency = latency::chart(&report);
    let rule = &latency.panels[0].rules[0];
    assert_eq!((rule.at, rule.vertical), (200.0, false));
    assert_eq!(rule.label, "SLO p99 ≤ 200 ms");
    let cdf = cdf::chart(&report);
    let rule = &cdf.panels[0].rules[0];
    assert_eq!((rule.at, rule.vertical), (200.0, true));
    let markers: Vec<(f64, f64)> = cdf.panels[0].markers.iter().map(|m| m.at).collect();
    assert_eq!(markers, [(200.0, 99.0)]);
    assert!(labels(&cdf).contains(&"SLO p99 ≤ 200 ms"));
    // 200 ms is in the right half of the 1.3..7500 ms axis: its label goes left of the line.
    assert!(embedded_font_registered());
    let svg = crate::render::svg(&cdf).unwrap();
    let label = svg.find("SLO p99 ≤ 200 ms").unwrap();
    let element = &svg[svg[..label].rfind("<text").unwrap()..label];
    let number = |text: &str, key: &str| -> i32 {
        let at = text.find(key).unwrap() + key.len();
        let end = text[at..].find(['"', ',']).unwrap();
        text[at..at + end].parse().unwrap()
    };
    let text_x = number(element, "<text x=\"");
    // The dashed line's pieces, just before its label: both points at its x.
    let line = &svg[svg[..label].rfind("points=\"").unwrap()..label];
    let line_x = number(line, "points=\"");
    let width = crate::layout::text_width("SLO p99 ≤ 200 ms", crate::labels::LABEL_SIZE) as i32;
    assert!(
        text_x + width < line_x,
        "{text_x} + {width} left of {line_x}"
    );
}

#[test]
fn breaker_state_is_lanes_of_spans_that_step_at_bucket_edges() {
    let mut report = demo_report();
    // The protected variant's breaker opens at 10 s and half-opens at 20 s; a second breaker
    // never leaves closed and gets no lane.
    let opening: Vec<u64> = (0..300)
        .map(|i| match i {
            100..200 => 2,
            200 => 1,
            _ => 0,
        })
        .collect();
    let gauges = &mut report.variants[1].series.gauges_max;
    gauges.insert("breakers.redis.state".into(), opening);
    gauges.insert("breakers.idle.state".into(), vec![0; 300]);
    let chart = outage::chart(&report);
    let lanes = chart.panels.last().unwrap();
    assert!(lanes.wide && !lanes.y_ticks);
    assert_eq!(lanes.y.description, "breaker redis");
    let notes: Vec<&str> = lanes.notes.iter().map(|note| note.text.as_str()).collect();
    assert_eq!(notes, ["timeout + breaker + DB bulkhead"], "one lane");
    // The lane, then the open span over buckets 100..200 and the half-open bucket 200, each
    // from edge to edge: steps, not slopes.
    let spans: Vec<(std::ops::Range<f64>, bool)> = lanes
        .bands
        .iter()
        .map(|band| (band.x.clone(), band.y.is_some()))
        .collect();
    assert_eq!(
        spans,
        [(0.0..30.0, true), (10.0..20.0, true), (20.0..20.1, true)]
    );
    assert_ne!(lanes.bands[1].color, lanes.bands[2].color);
    for state in ["open", "half-open"] {
        assert!(labels(&chart).contains(&state), "{state}");
    }
    // Without an opening, no lanes: failed, succeeded, in flight.
    assert_eq!(outage::chart(&demo_report()).panels.len(), 3);
}

#[test]
fn fault_windows_are_labelled_with_their_names() {
    let chart = outage::chart(&demo_report());
    let label = |panel: &Panel| panel.bands[0].label.clone();
    assert_eq!(label(&chart.panels[0]), Some("redis-down".to_owned()));
    assert_eq!(
        label(&chart.panels[1]),
        None,
        "named once, on the top panel"
    );
    let multiples = outage::chart(&many(8));
    let grid = multiples.panels.iter().filter(|panel| !panel.wide);
    assert!(
        grid.map(label)
            .all(|label| label.as_deref() == Some("redis-down"))
    );
}

#[test]
fn the_outage_curve_counts_429_attempts_and_requests_in_flight() {
    let mut report = demo_report();
    // 7 attempts answered 429 in every 100 ms bucket from 10 s, retried inside the requests.
    let rejected: Vec<u64> = (0..300).map(|i| if i >= 100 { 7 } else { 0 }).collect();
    report.variants[1]
        .series
        .counts
        .insert("rejected_attempts".into(), rejected);
    let chart = outage::chart(&report);
    let failed = &chart.panels[0];
    let dotted: Vec<&chart::Line> = failed
        .lines
        .iter()
        .filter(|line| line.stroke.dash == Dash::Dotted)
        .collect();
    assert_eq!(dotted.len(), 1, "the one variant with 429s");
    assert_eq!(dotted[0].segments[0][150], (15.05, 70.0), "per second");
    assert!(labels(&chart).contains(&"rejected attempts, 429 (dotted)"));
    assert!(!labels(&outage::chart(&demo_report())).contains(&"Lines"));
    // Requests in flight (demo: twice the queries), stuck ones included.
    let in_flight = &chart.panels[2];
    assert_eq!(in_flight.y.description, "in flight (max)");
    assert_eq!(in_flight.lines[0].segments[0][100].1, 120.0);
}

#[test]
fn a_limit_next_to_a_large_count_turns_the_axis_logarithmic() {
    assert!(!concurrency::chart(&limited_report()).panels[0].y.log);
    let mut report = limited_report();
    let queries = report.variants[0]
        .series
        .gauges_max
        .get_mut("databases.main.concurrency")
        .unwrap();
    queries.iter_mut().for_each(|value| *value *= 1000);
    let chart = concurrency::chart(&report);
    assert!(chart.panels.iter().all(|panel| panel.y.log));
    assert!(chart.panels[0].y.range.start < 5.0, "the limits are on it");
}

/// The README's first chart drew 832 requests/s at the end of a variant whose bulkhead caps
/// it at 400/s: 10 requests ended in the last 12 ms of its last 50 ms bucket, and the rate was
/// that count over 12 ms.
#[test]
fn a_partial_last_bucket_is_not_scaled_up_to_a_full_bucket() {
    let mut report = demo_report();
    // Every request ended 12 ms into the last bucket, 29 900..30 000 ms, ten of them then.
    report.variants[0].end_ms = 29_912.0;
    report.variants[0].series.outcomes.get_mut("ok").unwrap()[299] = 10;
    let chart = outage::chart(&report);
    let succeeded = &chart.panels[1].lines[0].segments[0];
    assert_eq!(
        *succeeded.last().unwrap(),
        (29.906, 100.0),
        "10 requests in a 100 ms bucket, the rest of which the run saw empty"
    );
    let most = succeeded.iter().map(|&(_, rate)| rate).fold(0.0, f64::max);
    assert!(most <= 52.0 / 0.1, "no bucket above its count: {most}");
    // Cut off by the horizon 12 ms into the bucket, the run did not see the rest of it: no
    // rate, rather than a guess.
    report.variants[0].verdict = Verdict::Horizon;
    let chart = outage::chart(&report);
    let succeeded = &chart.panels[1].lines[0].segments;
    assert_eq!(succeeded.last().unwrap().last().unwrap().0, 29.85);
    // A bucket that starts where the run ended covers nothing: it has no rate.
    report.variants[0].verdict = Verdict::Completed;
    report.variants[0].end_ms = 29_900.0;
    let chart = outage::chart(&report);
    let succeeded = &chart.panels[1].lines[0].segments;
    assert_eq!(succeeded.last().unwrap().last().unwrap().0, 29.85);
}

#[test]
fn the_latency_cdf_has_a_line_per_variant_from_the_histogram() {
    let mut report = demo_report();
    let histogram = LatencyHistogram {
        le_ms: vec![1.0, 2.0, 5000.0],
        counts: vec![10, 80, 10],
    };
    for variant in &mut report.variants {
        variant.summary.latency_histogram = histogram.clone();
    }
    report
        .variants
        .push(variant("empty", Vec::new(), Series::default()));
    let chart = cdf::chart(&report);
    assert_eq!(chart.name, "latency_cdf");
    let panel = &chart.panels[0];
    assert!(panel.x.log, "latency on a log axis");
    assert_eq!(
        panel.lines.len(),
        2,
        "a variant with no request has no line"
    );
    let last = panel.lines[0].segments[0].last().unwrap();
    assert_eq!(*last, (5000.0, 100.0));
    assert!(panel.lines[1].marks, "the same distribution as the first");
    assert!(labels(&chart).contains(&"timeout + breaker + DB bulkhead (same as no protection)"));
    let names: Vec<&str> = svg_charts(&report, &[])
        .unwrap()
        .iter()
        .map(|(name, _)| *name)
        .collect();
    assert!(names.contains(&"latency_cdf"));
}

#[test]
fn concurrency_shows_every_backlog_without_a_database() {
    // blob-cache-blast-radius: no database; the backlog is in a connection's pending
    // commands, the requests in flight and a semaphore. It used to say "no data".
    let mut series = demo_series(true);
    series.gauges_max.clear();
    for (name, peak) in [
        ("connections.shared.pending", 1374),
        ("in_flight", 1285),
        ("semaphores.blob_writes.in_flight", 15),
        ("bulkheads.db.queued", 4),
        ("servers.redis.used_memory", 1 << 20),
    ] {
        series
            .gauges_max
            .insert(name.to_owned(), (0..300).map(|i| i * peak / 299).collect());
    }
    let report = RunReport {
        variants: vec![variant("one connection (today)", Vec::new(), series)],
        ..demo_report()
    };
    let chart = concurrency::chart(&report);
    let labels = labels(&chart);
    for gauge in [
        "connection shared: commands pending",
        "requests in flight",
        "semaphore blob_writes: in flight",
        "bulkhead db: queued",
    ] {
        assert!(labels.contains(&gauge), "{gauge}: {labels:?}");
    }
    assert!(
        !labels.iter().any(|label| label.contains("memory")),
        "not a concurrency"
    );
    assert_eq!(chart.panels[0].lines.len(), 4);
}

#[test]
fn a_gauge_that_stays_at_zero_everywhere_is_left_out() {
    let mut report = demo_report();
    for variant in &mut report.variants {
        let buckets = variant.series.start_ms.len();
        variant
            .series
            .gauges_max
            .insert("databases.main.lock_waiting".to_string(), vec![0; buckets]);
    }
    let has_lock_line = |report: &RunReport| {
        labels(&concurrency::chart(report)).contains(&"database main: waiting for a lock")
    };
    assert!(
        !has_lock_line(&report),
        "no query waited: no flat zero line"
    );
    let waiting = report.variants[1]
        .series
        .gauges_max
        .get_mut("databases.main.lock_waiting")
        .unwrap();
    waiting[120] = 4;
    assert!(has_lock_line(&report));
    // Both variants draw it once some variant waited, next to the six lines of before.
    assert_eq!(concurrency::chart(&report).panels[0].lines.len(), 8);
}

/// Everything the postmortem charts add, drawn twice from the same report: the same bytes.
#[test]
fn the_same_report_gives_the_same_postmortem_charts() {
    let mut report = many(8);
    report.slo = Some(Slo {
        latency_ms: 200.0,
        percentile: None,
    });
    for (index, variant) in report.variants.iter_mut().enumerate() {
        let state: Vec<u64> = (0..300)
            .map(|i| u64::from((100..150).contains(&i)) * 2)
            .collect();
        variant
            .series
            .gauges_max
            .insert("breakers.redis.state".into(), state);
        let rejected = (0..300).map(|i| (i % 7) * index as u64).collect();
        variant
            .series
            .counts
            .insert("rejected_attempts".into(), rejected);
        variant.summary.latency_histogram = LatencyHistogram {
            le_ms: vec![1.0, 10.0 * (index + 1) as f64],
            counts: vec![5, 5],
        };
    }
    assert_written_twice_the_same(&report, "postmortem");
}

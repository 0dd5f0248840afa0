//! The chart defects a new user met (issue 18, item 5), each held where it can be checked in
//! the chart's data: titles that keep the swept value, no line hidden under another without a
//! mark, labels that do not collide.

use super::*;
use crate::chart::Chart;
use crate::layout::lay_out;
use crate::render::drawn_title;

/// A sweep over `permits` (7 values) for each of three long-named variants: 21 panels. Every
/// other variant's series is the same as the first's.
fn permits_sweep() -> RunReport {
    let bases = [
        "timeout only (fail-open)",
        "timeout + breaker",
        "timeout + breaker + DB bulkhead",
    ];
    let mut variants = Vec::new();
    for (b, base) in bases.iter().enumerate() {
        for (p, permits) in [10, 20, 40, 60, 80, 100, 120].into_iter().enumerate() {
            let name = format!("{base} / permits={permits}");
            let faults = vec![fault("redis-dead", 0.0, None)];
            let mut variant = variant(&name, faults, demo_series((b + p) % 2 == 1));
            variant.sweep_x = Some(f64::from(permits));
            variants.push(variant);
        }
    }
    RunReport {
        scenario: "redis-dead-permits".to_string(),
        seed: 1,
        slo: None,
        sweep: Some(SweepInfo {
            label: "permits".to_string(),
            parameter: "bulkheads.db.max_concurrent".to_string(),
            unit: String::new(),
            values: Vec::new(),
        }),
        variants,
        observed: None,
    }
}

/// Each titled panel's title as written and as drawn.
fn titles(chart: &Chart) -> Vec<(String, String)> {
    let layout = lay_out(chart);
    let panels = chart.panels.iter().zip(&layout.panels);
    let drawn = panels
        .filter_map(|(panel, place)| Some((panel.title.clone()?, drawn_title(panel, place)?.0)));
    drawn.collect()
}

/// A sweep's panel titles were cut at the end, which is where the swept value is: 18 of the
/// 21 panels of a 3-variant sweep read "timeout + breaker + DB b…", and a "(same as ...)"
/// note too long for the panel was lost with it.
#[test]
fn small_multiple_titles_keep_the_swept_value_and_the_same_as_note() {
    let report = permits_sweep();
    for chart in [latency::chart(&report), outage::chart(&report)] {
        let titles = titles(&chart);
        assert_eq!(titles.len(), 21, "{}: a panel per variant", chart.name);
        let mut cut = 0;
        for (title, drawn) in &titles {
            let point = title
                .split(" / ")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap();
            assert!(
                drawn.contains(&format!(" / {point}")),
                "{}: {drawn:?} lost {point:?}",
                chart.name
            );
            if let Some((_, other)) = title.split_once(" (same as ") {
                let other_point = other.split(" / ").nth(1).unwrap();
                assert!(
                    drawn.contains(" (same as ") && drawn.ends_with(other_point),
                    "{}: {drawn:?} lost the note of {title:?}",
                    chart.name
                );
            }
            cut += usize::from(drawn != title);
        }
        assert!(cut > 0, "{}: the test cuts nothing", chart.name);
    }
}

/// The first variant's latency lay under the second's at 85% of its buckets: below the 90%
/// at which each variant gets its own panel, so one panel drew it hidden, with nothing to say
/// it was there.
#[test]
fn a_line_mostly_under_a_later_one_is_circled_and_named() {
    let mut report = demo_report();
    let first = report.variants[0].series.clone();
    let second = &mut report.variants[1].series;
    for bucket in 0..300 {
        let (p50, p99) = (first.p50_ms[bucket], first.p99_ms[bucket]);
        let apart = |value: Option<f64>| value.map(|v| v + 400.0);
        let hidden = bucket < 255;
        second.p50_ms[bucket] = if hidden { p50 } else { apart(p50) };
        second.p99_ms[bucket] = if hidden { p99 } else { apart(p99) };
    }
    let chart = latency::chart(&report);
    assert_eq!(
        chart.panels.len(),
        1,
        "85% is below the rule for own panels"
    );
    let first_lines = chart.panels[0]
        .lines
        .iter()
        .filter(|line| line.stroke.color == palette(0));
    assert!(
        first_lines.clone().count() >= 2 && first_lines.clone().all(|line| line.marks),
        "the hidden variant's lines are circled"
    );
    let entry = chart
        .legend
        .iter()
        .find(|entry| entry.label.starts_with("no protection"))
        .unwrap();
    assert!(matches!(entry.key, crate::chart::Key::Marked(_)));
    assert!(
        entry
            .label
            .ends_with("(circled: mostly under timeout + breaker + DB bulkhead)"),
        "{}",
        entry.label
    );
    // A line under another at a third of its points is not hidden.
    for bucket in 100..300 {
        let p50 = first.p50_ms[bucket];
        report.variants[1].series.p50_ms[bucket] = p50.map(|v| v + 400.0);
        let p99 = first.p99_ms[bucket];
        report.variants[1].series.p99_ms[bucket] = p99.map(|v| v + 400.0);
    }
    let chart = latency::chart(&report);
    assert!(chart.panels[0].lines.iter().all(|line| !line.marks));
}

//! Tests on hand-built reports: what each chart contains, and the files written.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use outagelab_report::{
    DatabaseSummary, FaultWindow, FlowSummary, LatencyStats, PercentileRule, RunReport, Series,
    ServerSummary, Summary, SweepInfo, ThrottleSummary, VariantReport, Verdict,
};

use super::*;
use crate::chart::{FAULT_GRAY, palette};

const BUCKET_MS: f64 = 100.0;
const RUN_MS: f64 = 30_000.0;

fn fault(name: &str, start_ms: f64, end_ms: Option<f64>) -> FaultWindow {
    FaultWindow {
        name: name.to_string(),
        target: "redis".to_string(),
        kind: "crash".to_string(),
        start_ms,
        end_ms,
    }
}

fn variant(name: &str, faults: Vec<FaultWindow>, series: Series) -> VariantReport {
    VariantReport {
        name: name.to_string(),
        sweep_x: None,
        verdict: Verdict::Completed,
        percentile_rule: PercentileRule::NearestRank,
        end_ms: RUN_MS,
        events: 0,
        faults,
        summary: Summary::default(),
        series,
        log: Vec::new(),
        log_dropped: 0,
        runner: None,
    }
}

/// 30 s in 100 ms buckets, 50 requests per bucket. Between 10 s and 20 s, `protected` fails
/// fast (breaker open, low latency) while the unprotected service times out at 5 s and piles up
/// database queries. Bucket 150 is empty, so its percentiles are missing.
fn demo_series(protected: bool) -> Series {
    let mut series = Series {
        bucket_ms: BUCKET_MS,
        ..Series::default()
    };
    let mut columns: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for index in 0..300_u64 {
        let start_ms = index as f64 * BUCKET_MS;
        let in_fault = (10_000.0..20_000.0).contains(&start_ms);
        let jitter = index * 7 % 5;
        let (ok, timeout, breaker_open) = match (index == 150, in_fault, protected) {
            (true, _, _) => (0, 0, 0),
            (false, false, _) => (48 + jitter, 0, 0),
            (false, true, false) => (3 + jitter, 45, 0),
            (false, true, true) => (12 + jitter, 0, 36),
        };
        let empty = ok + timeout + breaker_open == 0;
        let (p50, p99) = match (in_fault, protected) {
            (false, _) => (2.0 + jitter as f64 * 0.1, 6.0 + jitter as f64),
            (true, false) => (5000.0, 5000.0),
            (true, true) => (1.0, 40.0 + jitter as f64 * 10.0),
        };
        series.start_ms.push(start_ms);
        series.p50_ms.push((!empty).then_some(p50));
        series.p99_ms.push((!empty).then_some(p99));
        for (name, value) in [
            ("ok", ok),
            ("timeout", timeout),
            ("breaker_open", breaker_open),
        ] {
            columns.entry(name).or_default().push(value);
        }
        let queries = match (in_fault, protected) {
            (false, _) => 3 + jitter,
            (true, false) => 60 + jitter,
            (true, true) => 10,
        };
        columns
            .entry("databases.main.concurrency")
            .or_default()
            .push(queries);
        columns.entry("in_flight").or_default().push(queries * 2);
        if protected {
            columns
                .entry("bulkheads.db.in_use")
                .or_default()
                .push(queries.min(8));
            columns
                .entry("bulkheads.db.queued")
                .or_default()
                .push(jitter);
        }
    }
    for (name, values) in columns {
        let target = if name.contains('.') || name == "in_flight" {
            &mut series.gauges_max
        } else {
            &mut series.outcomes
        };
        target.insert(name.to_string(), values);
    }
    series
}

fn demo_report() -> RunReport {
    let faults = vec![fault("redis-down", 10_000.0, Some(20_000.0))];
    RunReport {
        scenario: "cache-stampede".to_string(),
        seed: 7,
        slo: None,
        sweep: None,
        variants: vec![
            variant("no protection", faults.clone(), demo_series(false)),
            variant("timeout + breaker + DB bulkhead", faults, demo_series(true)),
        ],
        observed: None,
    }
}

/// A sweep over `K`: `checkout` slows down with K and times out from K = 8; each variant's
/// fault starts at a different time.
fn sweep_report() -> RunReport {
    let variants = [1.0, 2.0, 4.0, 8.0, 16.0]
        .into_iter()
        .map(|k: f64| {
            let flow = |p50: f64, timeouts: u64| FlowSummary {
                outcomes: BTreeMap::from([
                    ("ok".to_string(), 100),
                    ("timeout".to_string(), timeouts),
                ]),
                latency_ms: BTreeMap::from([(
                    "all".to_string(),
                    LatencyStats {
                        p50: Some(p50),
                        ..LatencyStats::default()
                    },
                )]),
                ..FlowSummary::default()
            };
            let mut variant = variant(
                &format!("K={k}"),
                vec![fault("redis-down", k * 1000.0, None)],
                demo_series(k > 4.0),
            );
            variant.sweep_x = Some(k);
            variant.summary.flows = BTreeMap::from([
                (
                    "checkout".to_string(),
                    flow(2.0 * k * k * k, if k >= 8.0 { 3 } else { 0 }),
                ),
                ("browse".to_string(), flow(1.0 + k, 0)),
            ]);
            variant
        })
        .collect();
    RunReport {
        scenario: "blob-fanout".to_string(),
        seed: 7,
        slo: None,
        sweep: Some(SweepInfo {
            label: "K".to_string(),
            parameter: "load.blobs.count".to_string(),
            unit: String::new(),
            values: Vec::new(),
        }),
        variants,
        observed: None,
    }
}

/// A fresh directory under the system temp dir, for one test.
fn scratch(name: &str) -> PathBuf {
    let process = std::process::id();
    let dir = std::env::temp_dir().join(format!("outagelab-plots-test-{process}-{name}"));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn file_names(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|path| path.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

fn assert_png(path: &Path) {
    let bytes = fs::read(path).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
}

fn svg_text(dir: &Path, name: &str) -> String {
    fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap()
}

#[test]
fn writes_the_time_charts_as_png_and_svg() {
    let dir = scratch("time-charts");
    let written = write_charts(&demo_report(), &[], &dir).unwrap();
    assert_eq!(
        file_names(&written),
        [
            "outage.png",
            "outage.svg",
            "latency.png",
            "latency.svg",
            "concurrency.png",
            "concurrency.svg",
            "latency_cdf.png",
            "latency_cdf.svg"
        ]
    );
    assert!(written.iter().all(|path| path.starts_with(&dir)));
    for name in ["outage", "latency", "concurrency", "latency_cdf"] {
        assert_png(&dir.join(format!("{name}.png")));
        let svg = svg_text(&dir, name);
        assert!(svg.starts_with("<svg"), "{name}.svg");
        assert!(
            svg.contains("timeout + breaker + DB bulkhead"),
            "{name}.svg lacks a variant name"
        );
    }
    for name in ["outage", "latency", "concurrency"] {
        let svg = svg_text(&dir, name);
        assert!(
            svg.contains("redis-down: crash on redis, 10-20 s"),
            "{name}.svg lacks the fault"
        );
        assert!(
            svg.contains("time (s)"),
            "{name}.svg lacks the x-axis label"
        );
    }
    assert!(svg_text(&dir, "latency_cdf").contains("requests at or under (%)"));
    assert!(svg_text(&dir, "outage").contains("cache-stampede: outage curve"));
    assert!(svg_text(&dir, "outage").contains("failed requests/s"));
    assert!(svg_text(&dir, "latency").contains("latency (ms)"));
    assert!(svg_text(&dir, "concurrency").contains("database main: queries running"));
    assert!(!dir.join("sweep.png").exists());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_sweep_adds_the_sweep_chart() {
    let dir = scratch("sweep");
    let written = write_charts(&sweep_report(), &[], &dir).unwrap();
    assert_eq!(file_names(&written)[8..], ["sweep.png", "sweep.svg"]);
    assert_png(&dir.join("sweep.png"));
    let svg = svg_text(&dir, "sweep");
    for text in [
        "blob-fanout: latency against K",
        "checkout",
        "browse",
        "p50 latency (ms)",
        "had timeouts",
    ] {
        assert!(svg.contains(text), "sweep.svg lacks {text:?}");
    }
    fs::remove_dir_all(&dir).unwrap();
}

/// Writes every chart of `report` twice and checks that the files are the same bytes.
fn assert_written_twice_the_same(report: &RunReport, name: &str) {
    let (first, second) = (scratch(&format!("{name}-1")), scratch(&format!("{name}-2")));
    let written = write_charts(report, &[], &first).unwrap();
    let again = write_charts(report, &[], &second).unwrap();
    assert_eq!(file_names(&written), file_names(&again));
    for (a, b) in written.iter().zip(&again) {
        assert!(
            fs::read(a).unwrap() == fs::read(b).unwrap(),
            "{} differs between writes",
            a.display()
        );
    }
    fs::remove_dir_all(&first).unwrap();
    fs::remove_dir_all(&second).unwrap();
}

#[test]
fn the_same_report_gives_identical_files() {
    assert_written_twice_the_same(&sweep_report(), "same");
}

/// Reports at the edges: each must give charts, not a panic or an error.
#[test]
fn odd_reports_still_give_charts() {
    let mut cases: Vec<(&str, RunReport)> = Vec::new();
    let one = |variant| RunReport {
        scenario: "odd".to_string(),
        seed: 1,
        slo: None,
        sweep: None,
        variants: vec![variant],
        observed: None,
    };

    let mut empty = variant("empty", Vec::new(), Series::default());
    empty.end_ms = 0.0;
    cases.push(("empty series, ended at 0 ms", one(empty)));
    cases.push((
        "no variants",
        RunReport {
            variants: Vec::new(),
            ..demo_report()
        },
    ));
    cases.push((
        "a single variant",
        one(variant("only", Vec::new(), demo_series(true))),
    ));

    let mut zeros = demo_series(false);
    zeros
        .outcomes
        .values_mut()
        .for_each(|counts| counts.fill(0));
    zeros
        .gauges_max
        .values_mut()
        .for_each(|values| values.fill(0));
    zeros.p50_ms.fill(None);
    zeros.p99_ms.fill(None);
    cases.push((
        "all zero",
        one(variant("zeros", vec![fault("f", 0.0, Some(0.0))], zeros)),
    ));

    let mut ragged = demo_series(false);
    ragged.outcomes.get_mut("timeout").unwrap().truncate(10);
    ragged.p99_ms.truncate(3);
    ragged.p50_ms[5] = Some(f64::NAN);
    ragged.bucket_ms = 0.0;
    cases.push((
        "ragged columns, zero bucket width",
        one(variant("ragged", vec![fault("f", 5.0, None)], ragged)),
    ));

    let names = (0..12)
        .map(|index| format!("variant number {index} with a rather long name: retries x{index}"));
    let many = names
        .enumerate()
        .map(|(index, name)| {
            variant(
                &name,
                vec![fault("slow-db", index as f64 * 1000.0, None)],
                demo_series(index % 2 == 0),
            )
        })
        .collect();
    cases.push((
        "twelve variants, different faults",
        RunReport {
            variants: many,
            ..demo_report()
        },
    ));

    let mut no_flows = sweep_report();
    no_flows.variants.truncate(1);
    no_flows.variants[0].summary.flows.clear();
    cases.push(("sweep of one variant without flows", no_flows));
    let mut no_x = sweep_report();
    no_x.variants
        .iter_mut()
        .for_each(|variant| variant.sweep_x = None);
    cases.push(("sweep without sweep values", no_x));

    for (index, (case, report)) in cases.iter().enumerate() {
        let dir = scratch(&format!("odd-{index}"));
        let written =
            write_charts(report, &[], &dir).unwrap_or_else(|error| panic!("{case}: {error}"));
        let expected = if report.sweep.is_some() { 10 } else { 8 };
        assert_eq!(written.len(), expected, "{case}");
        written
            .iter()
            .for_each(|path| assert!(path.exists(), "{case}: {}", path.display()));
        fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_directory_that_cannot_be_created_is_named_in_the_error() {
    let dir = scratch("not-a-directory");
    fs::create_dir_all(&dir).unwrap();
    let file = dir.join("plain-file");
    fs::write(&file, "not a directory").unwrap();
    let target = file.join("charts");
    let error = write_charts(&demo_report(), &[], &target).unwrap_err();
    assert_eq!(error.path(), target);
    assert!(
        error.to_string().contains(&target.display().to_string()),
        "{error}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_file_that_cannot_be_written_is_named_in_the_error() {
    let dir = scratch("blocked-file");
    for blocked in ["outage.png", "latency.svg"] {
        fs::create_dir_all(dir.join(blocked)).unwrap();
        let error = write_charts(&demo_report(), &[], &dir).unwrap_err();
        assert_eq!(error.path(), dir.join(blocked));
        assert!(error.to_string().contains(blocked), "{error}");
        fs::remove_dir_all(dir.join(blocked)).unwrap();
    }
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn outage_curve_plots_rates_per_second() {
    let chart = outage::chart(&demo_report());
    let [failed, succeeded, _in_flight] = &chart.panels[..] else {
        panic!("three panels")
    };
    // Bucket 100 (10.0 s) of the unprotected variant: 45 timeouts and 3 ok in 100 ms.
    let at_10_s = |panel: &chart::Panel| panel.lines[0].segments[0][100];
    assert_eq!(at_10_s(failed), (10.05, 450.0));
    assert_eq!(at_10_s(succeeded), (10.05, 30.0));
    assert_eq!(failed.y.description, "failed requests/s");
    assert_eq!(succeeded.x.range, 0.0..30.0);
}

#[test]
fn identical_faults_are_shaded_once_in_gray_and_others_per_variant() {
    let shared = outage::chart(&demo_report());
    let bands = &shared.panels[0].bands;
    assert_eq!(bands.len(), 1);
    assert_eq!(
        (bands[0].x.clone(), bands[0].color),
        (10.0..20.0, FAULT_GRAY)
    );

    let mut report = demo_report();
    report.variants[1].faults[0].start_ms = 12_000.0;
    let own = outage::chart(&report);
    let colors: Vec<_> = own.panels[0].bands.iter().map(|band| band.color).collect();
    assert_eq!(colors, [palette(0), palette(1)]);
    // A fault without an end lasts to the end of its run.
    report.variants[1].faults[0].end_ms = None;
    assert_eq!(outage::chart(&report).panels[0].bands[1].x, 12.0..30.0);
}

#[test]
fn latency_breaks_lines_at_empty_buckets_and_goes_log_for_timeouts() {
    let chart = latency::chart(&demo_report());
    let panel = &chart.panels[0];
    assert!(
        panel.y.log,
        "2 ms against 5000 ms spreads over more than 50x"
    );
    // p99 of the first variant: buckets 0..150, then 151..300 (bucket 150 is empty).
    let lengths: Vec<usize> = panel.lines[0].segments.iter().map(Vec::len).collect();
    assert_eq!(lengths, [150, 149]);
}

/// `demo_report` with a throttle `cascade`, switched on in the second variant only: it holds 3
/// slots while its counter climbs one per 10 s (leaked slots).
fn throttle_report() -> RunReport {
    let mut report = demo_report();
    for (index, variant) in report.variants.iter_mut().enumerate() {
        let buckets = variant.series.start_ms.len() as u64;
        variant.summary.throttles.insert(
            "cascade".to_string(),
            ThrottleSummary {
                enabled: index == 1,
                inflight_max: 10,
                ..ThrottleSummary::default()
            },
        );
        let gauges = &mut variant.series.gauges_max;
        gauges.insert(
            "throttles.cascade.holders".to_string(),
            vec![3; buckets as usize],
        );
        gauges.insert(
            "throttles.cascade.counter".to_string(),
            (0..buckets).map(|bucket| 3 + bucket / 100).collect(),
        );
    }
    report
}

#[test]
fn the_throttle_chart_shows_held_against_counted_for_enabled_throttles() {
    assert!(
        throttles::chart(&demo_report()).is_none(),
        "no throttle, no chart"
    );
    let mut off = throttle_report();
    off.variants[1]
        .summary
        .throttles
        .get_mut("cascade")
        .unwrap()
        .enabled = false;
    assert!(
        throttles::chart(&off).is_none(),
        "throttles all off, no chart"
    );

    let chart = throttles::chart(&throttle_report()).unwrap();
    let labels: Vec<&str> = chart
        .legend
        .iter()
        .map(|entry| entry.label.as_str())
        .collect();
    assert!(labels.contains(&"throttle cascade: slots held"));
    assert!(labels.contains(&"throttle cascade: counter says held"));
    // Only the variant that switched it on: its holders line, then its counter line.
    let lines = &chart.panels[0].lines;
    assert_eq!(lines.len(), 2);
    assert!(lines.iter().all(|line| line.stroke.color == palette(1)));
    let last = |line: &chart::Line| line.segments[0].last().unwrap().1;
    assert_eq!((last(&lines[0]), last(&lines[1])), (3.0, 5.0));
    // Its cap, a labelled reference line.
    let rules = &chart.panels[0].rules;
    assert_eq!(rules.len(), 1);
    assert_eq!(
        (rules[0].at, rules[0].label.as_str()),
        (10.0, "throttle cascade: inflight_max 10")
    );

    let dir = scratch("throttles");
    let written = write_charts(&throttle_report(), &[], &dir).unwrap();
    assert_eq!(
        file_names(&written)[8..],
        ["throttles.png", "throttles.svg"]
    );
    assert!(svg_text(&dir, "throttles").contains("throttle slots over time"));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_fail_open_chart_shows_only_controls_that_failed_open() {
    assert!(
        fail_open::chart(&demo_report()).is_none(),
        "no counts, no chart"
    );
    let mut report = demo_report();
    for (index, variant) in report.variants.iter_mut().enumerate() {
        let buckets = variant.series.start_ms.len();
        let counts = &mut variant.series.counts;
        // 5 per 100 ms bucket (50/s) for the first variant from 10 s; none for the second.
        let failed: Vec<u64> = (0..buckets)
            .map(|bucket| if index == 0 && bucket >= 100 { 5 } else { 0 })
            .collect();
        counts.insert("connections.cache.fail_open".to_string(), failed);
        counts.insert(
            "rate_limits.tenant.fail_open_admitted".to_string(),
            vec![0; buckets],
        );
    }
    let chart = fail_open::chart(&report).unwrap();
    let labels: Vec<&str> = chart
        .legend
        .iter()
        .map(|entry| entry.label.as_str())
        .collect();
    assert!(labels.contains(&"connection cache: steps failed open"));
    assert!(
        !labels.iter().any(|label| label.contains("rate limit")),
        "a control that never failed open is left out: {labels:?}"
    );
    let lines = &chart.panels[0].lines;
    assert_eq!(lines.len(), 2, "one line per variant for the one control");
    let last = lines[0].segments[0].last().unwrap().1;
    assert_eq!(last, 50.0, "per second, not per bucket");

    let dir = scratch("fail-open");
    let written = write_charts(&report, &[], &dir).unwrap();
    assert_eq!(
        file_names(&written)[8..],
        ["fail_open.png", "fail_open.svg"]
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_calls_chart_shows_each_callers_ok_and_failed_calls_even_when_none_failed() {
    assert!(
        calls::chart(&demo_report()).is_none(),
        "no caller, no chart"
    );
    let mut report = demo_report();
    for variant in &mut report.variants {
        let buckets = variant.series.start_ms.len();
        let counts = &mut variant.series.counts;
        // 30 ok calls per 100 ms bucket (300/s) and no failed one: a flat zero line of
        // failed calls is the news here, so it is drawn.
        counts.insert("callers.upstream.ok".to_string(), vec![30; buckets]);
        counts.insert("callers.upstream.failed".to_string(), vec![0; buckets]);
    }
    let chart = calls::chart(&report).unwrap();
    let labels: Vec<&str> = chart
        .legend
        .iter()
        .map(|entry| entry.label.as_str())
        .collect();
    assert!(labels.contains(&"upstream: ok calls"), "{labels:?}");
    assert!(labels.contains(&"upstream: failed calls"), "{labels:?}");
    // The two variants' lines are the same, so each has a panel of its own.
    assert_eq!(chart.panels.len(), 2);
    for panel in &chart.panels {
        let rates: Vec<f64> = panel
            .lines
            .iter()
            .map(|line| line.segments[0].last().unwrap().1)
            .collect();
        assert_eq!(rates, [0.0, 300.0], "per second, failed first (name order)");
    }
}

#[test]
fn an_instant_fault_is_labelled_with_its_instant() {
    let kill = FaultWindow {
        kind: "kill".to_string(),
        ..fault("client-kill", 10_000.0, Some(10_000.0))
    };
    let report = RunReport {
        variants: vec![variant("slot", vec![kill], demo_series(true))],
        ..demo_report()
    };
    let chart = outage::chart(&report);
    assert!(
        chart
            .legend
            .iter()
            .any(|entry| entry.label == "client-kill: kill on redis, at 10 s"),
        "{:?}",
        chart.legend.iter().map(|e| &e.label).collect::<Vec<_>>()
    );
}

#[test]
fn sweep_marks_points_with_timeouts() {
    let chart = sweep::chart(&sweep_report(), &[]).unwrap();
    let panel = &chart.panels[0];
    let at: Vec<(f64, f64)> = panel.markers.iter().map(|marker| marker.at).collect();
    assert_eq!(at, [(8.0, 1024.0), (16.0, 8192.0)]);
    assert_eq!(panel.x.description, "K");
    assert!(panel.y.log);
    assert!(sweep::chart(&demo_report(), &[]).is_none());

    let mut with_unit = sweep_report();
    with_unit.sweep.as_mut().unwrap().unit = "ms".to_string();
    with_unit
        .variants
        .iter_mut()
        .for_each(|variant| variant.summary.flows.remove("checkout").map(drop).unwrap());
    let chart = sweep::chart(&with_unit, &[]).unwrap();
    assert_eq!(chart.panels[0].x.description, "K (ms)");
    assert!(!chart.panels[0].y.log, "2 to 17 ms is within 50x");
}

/// A sweep over words (`sweep_x` is each word's index) was drawn on a numeric axis ticked 0,
/// 0.5, 1...: its axis is categorical, one tick per word, labelled with the word.
#[test]
fn a_sweep_over_words_labels_its_axis_with_the_words() {
    let mut report = sweep_report();
    report.variants.truncate(3);
    let words = ["resilience4j", "polly-v8", "opossum"];
    for (index, variant) in report.variants.iter_mut().enumerate() {
        variant.sweep_x = Some(index as f64);
    }
    report.sweep.as_mut().unwrap().values = words.map(String::from).to_vec();
    for metrics in [Vec::new(), vec!["flows.browse.outcomes.ok".to_string()]] {
        let chart = sweep::chart(&report, &metrics).unwrap();
        for panel in &chart.panels {
            assert!(panel.x.categories, "{metrics:?}");
            assert_eq!(panel.x.category_names, words);
            assert_eq!(panel.x.range, -0.5..2.5);
        }
        let svg = crate::render::svg(&chart).unwrap();
        let written: Vec<&str> = svg
            .split("</text>")
            .filter_map(|part| part.rsplit_once('>'))
            .map(|(_, text)| text.trim())
            .collect();
        for word in words {
            assert!(written.contains(&word), "{word} in {written:?}");
        }
        assert!(!written.contains(&"0.5"), "{written:?}");
    }
}

/// The single-run sweep chart drew each flow's p50 whatever the file chose: it draws the
/// run's chosen metrics (`--metric`, else `[report] metrics`), a panel each, against the
/// swept value, and a variant the sweep skips as a dashed level.
#[test]
fn the_sweep_chart_draws_the_chosen_metrics() {
    let mut report = sweep_report();
    let mut skipped = report.variants[0].clone();
    skipped.name = "no sweep".to_string();
    skipped.sweep_x = None;
    let checkout = skipped.summary.flows.get_mut("checkout").unwrap();
    checkout.latency_ms.get_mut("all").unwrap().p50 = Some(5.0);
    report.variants.push(skipped);
    let metrics = [
        "flows.checkout.latency_ms.all.p50".to_string(),
        "flows.browse.outcomes.ok".to_string(),
    ];
    let chart = sweep::chart(&report, &metrics).unwrap();
    let axes: Vec<&str> = chart
        .panels
        .iter()
        .map(|panel| panel.y.description.as_str())
        .collect();
    assert_eq!(
        axes,
        [
            "flows.checkout.latency_ms.all.p50 (ms)",
            "flows.browse.outcomes.ok (count)"
        ]
    );
    let [checkout, browse] = &chart.panels[..] else {
        panic!("a panel per metric");
    };
    assert_eq!(
        checkout.lines[0].segments,
        [vec![
            (1.0, 2.0),
            (2.0, 16.0),
            (4.0, 128.0),
            (8.0, 1024.0),
            (16.0, 8192.0)
        ]]
    );
    assert_eq!(checkout.lines[1].segments, [vec![(1.0, 5.0), (16.0, 5.0)]]);
    assert_eq!(checkout.lines[1].stroke.dash, crate::chart::Dash::Dashed);
    assert_eq!(browse.lines[0].segments[0].len(), 5);
    assert!(
        browse.lines[0].segments[0]
            .iter()
            .all(|&(_, ok)| ok == 100.0)
    );
    let labels: Vec<&str> = chart.legend.iter().map(|e| e.label.as_str()).collect();
    assert!(labels.contains(&"no sweep (not swept)"), "{labels:?}");
    // With no metric chosen, each flow's median latency, as before.
    let plain = sweep::chart(&report, &[]).unwrap();
    assert_eq!(plain.panels.len(), 1);
    assert_eq!(plain.panels[0].y.description, "p50 latency (ms)");
}

#[test]
fn the_memory_chart_is_drawn_only_for_a_server_with_a_limit_in_mib() {
    assert!(
        memory::chart(&demo_report()).is_none(),
        "no limit, no chart"
    );
    let mut report = demo_report();
    for variant in &mut report.variants {
        let buckets = variant.series.start_ms.len();
        // 30 MiB from the start; the limit only in the first variant's file.
        variant.series.gauges_max.insert(
            "servers.redis.used_memory".to_string(),
            vec![30 << 20; buckets],
        );
        variant
            .summary
            .servers
            .insert("redis".to_string(), ServerSummary::default());
    }
    report.variants[0]
        .summary
        .servers
        .get_mut("redis")
        .unwrap()
        .maxmemory = Some(30 << 20);
    let chart = memory::chart(&report).unwrap();
    // The same memory in both variants: a panel each, the second named as the same.
    assert_eq!(chart.panels.len(), 2);
    assert_eq!(
        chart.panels[1].title.as_deref(),
        Some("timeout + breaker + DB bulkhead (same as no protection)")
    );
    let lines = &chart.panels[0].lines;
    assert_eq!(lines.len(), 1, "one line for the one server");
    assert_eq!(lines[0].segments[0][0].1, 30.0);
    assert!(chart.panels[1].lines[0].marks);
    // The limit in the first variant's file is a reference line on its panel only.
    let rules: Vec<&str> = chart.panels[0]
        .rules
        .iter()
        .map(|r| r.label.as_str())
        .collect();
    assert_eq!(rules, ["server redis: maxmemory at the end 30"]);
    assert!(chart.panels[1].rules.is_empty());
    let labels: Vec<&str> = chart
        .legend
        .iter()
        .map(|entry| entry.label.as_str())
        .collect();
    assert!(labels.contains(&"server redis"), "{labels:?}");
    let dir = scratch("memory");
    let written = write_charts(&report, &[], &dir).unwrap();
    assert_eq!(file_names(&written)[8..], ["memory.png", "memory.svg"]);
    assert!(svg_text(&dir, "memory").contains("Redis used memory over time"));
    fs::remove_dir_all(&dir).unwrap();
}

mod defects;
mod observed;
mod postmortem;

#[test]
fn a_thick_line_is_cut_at_a_spike_so_its_join_cannot_leave_the_panel() {
    // A p99 that jumps from 10 to 1000 for one bucket and back: the turn at the top is
    // sharp, so the line is drawn as two pieces meeting there (no mitred join to overshoot);
    // the gentle turns at the foot of the spike keep their joins.
    let points = [
        (0.0, 10.0),
        (1.0, 10.0),
        (1.1, 1000.0),
        (1.2, 10.0),
        (2.0, 10.0),
    ];
    // 100 px a unit across, 1 px per value down.
    let pixel = |&(x, y): &(f64, f64)| ((x * 100.0) as i32, (1000.0 - y) as i32);
    let pieces = crate::render::pieces(&points, pixel);
    assert_eq!(pieces, [&points[..3], &points[2..]]);
    // A straight or gently bending line stays one piece.
    let gentle = [(0.0, 10.0), (1.0, 20.0), (2.0, 25.0)];
    assert_eq!(crate::render::pieces(&gentle, pixel), [&gentle[..]]);
}

#[test]
fn a_gauge_ends_at_its_level_not_at_the_instant_after_the_run() {
    // The run ends where the last bucket starts: that bucket holds only the end's value (in
    // flight at the horizon, lower than the bucket maximum before it) and is not drawn.
    let mut report = demo_report();
    let variant = &mut report.variants[0];
    let buckets = variant.series.start_ms.len();
    variant.end_ms = variant.series.start_ms[buckets - 1];
    let mut values = vec![200; buckets];
    values[buckets - 1] = 142;
    let points: Vec<(f64, Option<f64>)> = crate::timeline::gauge_points(variant, &values).collect();
    assert_eq!(points.len(), buckets);
    assert_eq!(points[buckets - 2].1, Some(200.0));
    assert_eq!(
        points[buckets - 1].1,
        None,
        "the empty bucket at the horizon"
    );
}

/// Issue 31: "fail-op… / rps=400 (same as … / rps=400)": the other variant's base was cut
/// away before this one's was touched, so the panel said not which variant it matched. Both
/// bases are cut together now, and each keeps its first words.
#[test]
fn a_cut_title_keeps_the_first_words_of_both_bases() {
    let title = "fail-open, 100 ms timeout / rps=400 (same as fail-closed, breaker / rps=400)";
    let width = crate::layout::text_width(
        "fail-open, 1… / rps=400 (same as fail-clos… / rps=400)",
        11.0,
    );
    let cut = crate::render::shortened(title, 11.0, width);
    assert!(crate::layout::text_width(&cut, 11.0) <= width, "{cut}");
    let (own, other) = cut.split_once(" (same as ").expect("the note is kept");
    assert!(
        own.starts_with("fail-open") && own.ends_with("… / rps=400"),
        "{cut}"
    );
    assert!(
        other.starts_with("fail-cl") && other.ends_with("… / rps=400)"),
        "{cut}"
    );
}

#[test]
fn a_cut_title_keeps_its_same_as_note() {
    let title = "atomic, release on handler return (same as no throttle)";
    let width = crate::layout::text_width("atomic, release (same as no throttle)", 11.0);
    let cut = crate::render::shortened(title, 11.0, width);
    assert!(cut.ends_with("… (same as no throttle)"), "{cut}");
    assert!(crate::layout::text_width(&cut, 11.0) <= width);
    // A title without the note is cut from its end, as before.
    let plain = crate::render::shortened("atomic, release on handler return", 11.0, width / 2);
    assert!(
        plain.ends_with('…') && plain.starts_with("atomic"),
        "{plain}"
    );
}

#[test]
fn forty_variants_have_forty_full_width_styles() {
    use crate::chart::variant_stroke;
    let strokes: Vec<_> = (0..40).map(variant_stroke).collect();
    for (i, a) in strokes.iter().enumerate() {
        assert_eq!(a.width, 2, "variant {i}");
        for b in &strokes[i + 1..] {
            assert!(a.color != b.color || a.dash != b.dash, "{a:?} twice");
        }
    }
    // The 31st variant (a sweep of 36 had it look like the first) is not in the first's
    // style; the 49th is in long dashes, and past 64 the styles come again, thinner.
    assert_ne!(variant_stroke(30), variant_stroke(0));
    assert_eq!(variant_stroke(48).dash, crate::chart::Dash::Long);
    assert_eq!(variant_stroke(64).width, 1, "then the same again, thinner");
}

/// Issue 31: past 10 variants the colours repeated (variant 11 in variant 1's colour, dashed).
/// Up to 16, each has a colour of its own, solid, and no two are close (76 apart in RGB at
/// least, as close as the nearest two of Tableau's own ten).
#[test]
fn sixteen_variants_have_sixteen_colours() {
    use crate::chart::{Dash, variant_stroke};
    let strokes: Vec<_> = (0..16).map(variant_stroke).collect();
    for (i, a) in strokes.iter().enumerate() {
        assert_eq!(a.dash, Dash::Solid, "variant {i}");
        for (j, b) in strokes.iter().enumerate().skip(i + 1) {
            let (p, q) = (a.color, b.color);
            let distance = [(p.0, q.0), (p.1, q.1), (p.2, q.2)]
                .iter()
                .map(|&(x, y)| (f64::from(x) - f64::from(y)).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(distance >= 76.0, "variants {i} and {j}: {p:?} and {q:?}");
        }
    }
    assert_eq!(
        variant_stroke(16).dash,
        Dash::Dashed,
        "the 17th repeats a colour, dashed"
    );
}

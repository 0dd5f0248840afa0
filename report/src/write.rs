//! Reports as text: JSON (everything) and CSV (the time series, and one summary row per
//! variant). Output depends only on the report, so the same run gives the same bytes.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::{CountKey, LatencyStats, Outcome, RunReport};

/// Where [`replace_file`] writes before it renames: beside `path`, hidden, with the same
/// extension (an image encoder picks its format by it), so a reader of the directory never
/// sees a half-written file under the real name: `charts/.outage.partial.png`.
pub fn partial_path(path: &Path) -> PathBuf {
    let stem = path.file_stem().map_or_else(
        || "output".into(),
        |stem| stem.to_string_lossy().into_owned(),
    );
    let name = match path.extension() {
        Some(extension) => format!(".{stem}.partial.{}", extension.to_string_lossy()),
        None => format!(".{stem}.partial"),
    };
    path.with_file_name(name)
}

/// Replaces the file at `path` with `bytes` all at once: writes them beside it, flushes them to
/// the disk, then renames over it. A full disk or a killed process leaves the old file (or
/// none), never a truncated one.
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    replace_file_with(path, |out| out.write_all(bytes))
}

/// [`replace_file`] with what `write` writes, through a buffer: the bytes go to the disk as
/// they come, never held whole in memory.
pub fn replace_file_with(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let partial = partial_path(path);
    let written = std::fs::File::create(&partial).and_then(|file| {
        let mut out = std::io::BufWriter::new(file);
        write(&mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&partial, path)) {
        Ok(()) => Ok(()),
        Err(error) => {
            let _ = std::fs::remove_file(&partial);
            Err(error)
        }
    }
}

/// The whole report as pretty-printed JSON, ending in a newline.
pub fn to_json(report: &RunReport) -> String {
    let mut text = serde_json::to_string_pretty(report).expect("a report always serialises");
    text.push('\n');
    text
}

/// What [`to_json`] gives (or the same for any other report, a study's), written to `out` as
/// it is made: a run's series are never copied into one string (a 20-variant report of long
/// series was a 6 GB string before its file was written).
pub fn write_json(report: &impl Serialize, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    serde_json::to_writer_pretty(&mut *out, report)?;
    out.write_all(b"\n")
}

/// Every variant's log of state changes as JSON lines (`--events`): one object per change,
/// `{"variant": ..., "at_ms": ..., "event": ..., "target_kind": ..., "target": ...}` (with
/// `from` for a breaker, `link` for a reconnect slot), in time order within each variant and
/// variants in report order; a variant whose sources dropped entries ends with a
/// `log_truncated` line saying how many.
pub fn events_jsonl(report: &RunReport) -> String {
    #[derive(Serialize)]
    struct Line<'a> {
        variant: &'a str,
        #[serde(flatten)]
        entry: &'a crate::LogEntry,
    }
    let mut text = String::new();
    for variant in &report.variants {
        for entry in &variant.log {
            let line = Line {
                variant: &variant.name,
                entry,
            };
            text.push_str(&serde_json::to_string(&line).expect("a log entry serialises"));
            text.push('\n');
        }
        if variant.log_dropped > 0 {
            let line = serde_json::json!({
                "variant": variant.name,
                "event": "log_truncated",
                "dropped": variant.log_dropped,
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
    }
    text
}

/// The time series of every variant in long form: one row per variant and bucket.
///
/// Columns: `variant`, `start_ms`, one count per outcome, `p50_ms`, `p95_ms`, `p99_ms`, every gauge
/// (`<name>_max`), then every event count of a resource (`<name>`), then the counts about the
/// whole run (`rejected_attempts`), which came later and so keep the columns before them in
/// place; an empty cell means "no value" (an empty bucket's percentiles, or a gauge or count
/// that variant does not have).
pub fn series_csv(report: &RunReport) -> String {
    let gauges: BTreeSet<&str> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.gauges_max.keys().map(String::as_str))
        .collect();
    let counts: BTreeSet<&str> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.counts.keys().map(String::as_str))
        .collect();
    // A stable partition: counts about a resource first, each part in name order.
    let whole_run = |name: &&str| CountKey::parse(name).is_some_and(|key| key.resource().is_none());
    let counts: Vec<&str> = counts
        .iter()
        .filter(|name| !whole_run(name))
        .chain(counts.iter().filter(|name| whole_run(name)))
        .copied()
        .collect();
    let mut out = String::from("variant,start_ms");
    for outcome in Outcome::ALL {
        write!(out, ",{outcome}").unwrap();
    }
    out.push_str(",p50_ms,p95_ms,p99_ms");
    for gauge in &gauges {
        write!(out, ",{gauge}_max").unwrap();
    }
    for count in &counts {
        write!(out, ",{count}").unwrap();
    }
    out.push('\n');
    for variant in &report.variants {
        let series = &variant.series;
        let name = quote(&variant.name);
        for index in 0..series.len() {
            write!(out, "{name},{}", series.start_ms[index]).unwrap();
            for outcome in Outcome::ALL {
                let count = series.outcomes.get(outcome.name()).map_or(0, |c| c[index]);
                write!(out, ",{count}").unwrap();
            }
            for column in [&series.p50_ms, &series.p95_ms, &series.p99_ms] {
                write!(out, ",{}", cell(column[index])).unwrap();
            }
            for gauge in &gauges {
                match series.gauges_max.get(*gauge) {
                    Some(values) => write!(out, ",{}", values[index]).unwrap(),
                    None => out.push(','),
                }
            }
            for count in &counts {
                match series.counts.get(*count) {
                    Some(values) => write!(out, ",{}", values[index]).unwrap(),
                    None => out.push(','),
                }
            }
            out.push('\n');
        }
    }
    out
}

/// One row per variant: outcomes, latency of all requests and of successful ones, and the
/// peaks of every database and bulkhead.
pub fn summary_csv(report: &RunReport) -> String {
    let databases: BTreeSet<&str> = report
        .variants
        .iter()
        .flat_map(|v| v.summary.databases.keys().map(String::as_str))
        .collect();
    let bulkheads: BTreeSet<&str> = report
        .variants
        .iter()
        .flat_map(|v| v.summary.bulkheads.keys().map(String::as_str))
        .collect();
    let mut out = String::from("variant");
    // A sweep's value gets its own column, after the variant, named by its label and unit.
    if let Some(sweep) = &report.sweep {
        let unit = match sweep.unit.as_str() {
            "" | "(index)" => String::new(),
            unit => format!("_{}", unit.replace('/', "_per_")),
        };
        write!(out, ",{}", quote(&format!("{}{unit}", sweep.label))).unwrap();
    }
    out.push_str(",verdict,requests,unfinished");
    for outcome in Outcome::ALL {
        write!(out, ",{outcome}").unwrap();
    }
    for group in ["all", "ok"] {
        for stat in ["p50", "p95", "p99", "max"] {
            write!(out, ",{group}_{stat}_ms").unwrap();
        }
    }
    for database in &databases {
        write!(out, ",{database}_peak_concurrency").unwrap();
    }
    for bulkhead in &bulkheads {
        write!(out, ",{bulkhead}_peak_in_use,{bulkhead}_shed").unwrap();
    }
    out.push('\n');
    for variant in &report.variants {
        let summary = &variant.summary;
        out.push_str(&quote(&variant.name));
        if report.sweep.is_some() {
            write!(out, ",{}", cell(variant.sweep_x)).unwrap();
        }
        write!(
            out,
            ",{},{},{}",
            variant.verdict.name(),
            summary.requests,
            summary.unfinished
        )
        .unwrap();
        for outcome in Outcome::ALL {
            let count = summary.outcomes.get(outcome.name()).copied().unwrap_or(0);
            write!(out, ",{count}").unwrap();
        }
        let empty = LatencyStats::default();
        for group in ["all", "ok"] {
            let stats = summary.latency_ms.get(group).unwrap_or(&empty);
            for value in [stats.p50, stats.p95, stats.p99, stats.max] {
                write!(out, ",{}", cell(value)).unwrap();
            }
        }
        for database in &databases {
            match summary.databases.get(*database) {
                Some(db) => write!(out, ",{}", db.peak_concurrency).unwrap(),
                None => out.push(','),
            }
        }
        for bulkhead in &bulkheads {
            match summary.bulkheads.get(*bulkhead) {
                Some(b) => write!(out, ",{},{}", b.peak_in_use, b.shed).unwrap(),
                None => out.push_str(",,"),
            }
        }
        out.push('\n');
    }
    out
}

fn cell(value: Option<f64>) -> String {
    value.map(|v| v.to_string()).unwrap_or_default()
}

/// Quotes a CSV field when it holds a comma, a quote or a line break.
fn quote(field: &str) -> String {
    if field.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Series, Summary, VariantReport, Verdict};
    use std::collections::BTreeMap;

    fn report() -> RunReport {
        let mut series = Series {
            bucket_ms: 100.0,
            start_ms: vec![0.0, 100.0],
            p50_ms: vec![Some(1.5), None],
            p95_ms: vec![Some(1.9), None],
            p99_ms: vec![Some(2.0), None],
            ..Series::default()
        };
        series.outcomes.insert("ok".into(), vec![3, 0]);
        series.outcomes.insert("timeout".into(), vec![1, 0]);
        series
            .gauges_max
            .insert("databases.main.concurrency".into(), vec![4, 0]);
        series
            .counts
            .insert("connections.cache.fail_open".into(), vec![0, 7]);
        series.counts.insert("rejected_attempts".into(), vec![2, 0]);
        series
            .counts
            .insert("servers.redis.evicted_keys".into(), vec![0, 1]);
        RunReport {
            scenario: "s".into(),
            seed: 7,
            sweep: None,
            slo: None,
            variants: vec![VariantReport {
                name: "timeout, then \"breaker\"".into(),
                sweep_x: None,
                verdict: Verdict::Completed,
                percentile_rule: crate::PercentileRule::NearestRank,
                end_ms: 150.0,
                events: 10,
                faults: Vec::new(),
                summary: Summary {
                    requests: 4,
                    outcomes: BTreeMap::from([("ok".into(), 3), ("timeout".into(), 1)]),
                    ..Summary::default()
                },
                series,
                log: Vec::new(),
                log_dropped: 0,
                runner: None,
            }],
            observed: None,
        }
    }

    #[test]
    fn series_csv_has_a_header_and_a_row_per_bucket() {
        let csv = series_csv(&report());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "variant,start_ms,ok,timeout,refused,connection_lost,breaker_open,shed,\
             server_error,lock_busy,rate_limited,lock_timeout,oom,readonly,loading,wrongtype,cancelled,p50_ms,p95_ms,p99_ms,databases.main.concurrency_max,\
             connections.cache.fail_open,servers.redis.evicted_keys,rejected_attempts",
            "the count about the whole run comes after those of resources"
        );
        assert_eq!(
            lines[1],
            "\"timeout, then \"\"breaker\"\"\",0,3,1,0,0,0,0,0,0,0,0,0,0,0,0,0,1.5,1.9,2,4,0,0,2"
        );
        assert_eq!(
            lines[2],
            "\"timeout, then \"\"breaker\"\"\",100,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,,,,0,7,1,0"
        );
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn summary_csv_has_a_row_per_variant() {
        let csv = summary_csv(&report());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("variant,verdict,"), "{}", lines[0]);
        assert!(lines[1].contains(",completed,4,0,3,1,0,"), "{}", lines[1]);
    }

    #[test]
    fn summary_csv_has_a_column_for_the_swept_value() {
        let mut swept = report();
        swept.sweep = Some(crate::SweepInfo {
            label: "open".into(),
            parameter: "breakers.b.open_for".into(),
            unit: "ms".into(),
            values: Vec::new(),
        });
        swept.variants[0].sweep_x = Some(500.0);
        let csv = summary_csv(&swept);
        let lines: Vec<&str> = csv.lines().collect();
        assert!(
            lines[0].starts_with("variant,open_ms,verdict,"),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains(",500,completed,4,0,"), "{}", lines[1]);
    }

    #[test]
    fn json_has_the_slo_only_when_the_file_states_one() {
        assert!(!to_json(&report()).contains("\"slo\""));
        let mut with_slo = report();
        with_slo.slo = Some(crate::Slo {
            latency_ms: 200.0,
            percentile: Some(99.0),
        });
        let json: serde_json::Value = serde_json::from_str(&to_json(&with_slo)).unwrap();
        assert_eq!(
            json["slo"],
            serde_json::json!({"latency_ms": 200.0, "percentile": 99.0})
        );
    }

    #[test]
    fn json_is_stable() {
        assert_eq!(to_json(&report()), to_json(&report()));
        let mut streamed = Vec::new();
        write_json(&report(), &mut streamed).unwrap();
        assert_eq!(String::from_utf8(streamed).unwrap(), to_json(&report()));
        assert!(to_json(&report()).ends_with("}\n"));
    }
}

//! The side-by-side tables `outagelab run` prints: one row per variant.

use std::fmt::Write as _;

use outagelab_report::{Outcome, RunReport, VariantReport};
use outagelab_scenario_file::ScenarioFile;

/// A table of cells: printed as plain text (the first column left-aligned, the others
/// right-aligned) or written into the HTML report.
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn render(&self) -> String {
        let columns = self.header.len();
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|row| row[c].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (c, cell) in row.iter().enumerate() {
                let pad = widths[c] - cell.chars().count();
                if c == 0 {
                    write!(out, "{cell}{}", " ".repeat(pad)).unwrap();
                } else {
                    write!(out, "  {}{cell}", " ".repeat(pad)).unwrap();
                }
            }
            out.push('\n');
        }
        out
    }
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

/// The summary table in `columns`, then (when the scenario has several flows) latency by flow.
pub fn render(report: &RunReport, scenario: &ScenarioFile, columns: &[Column]) -> String {
    let variants = &report.variants;
    let mut out = format!(
        "{} (seed {}): {} variant{}\n\n",
        report.scenario,
        report.seed,
        variants.len(),
        if variants.len() == 1 { "" } else { "s" }
    );
    out.push_str(&summary_table(report, columns).render());
    for note in notes(report, scenario) {
        writeln!(out, "{note}").unwrap();
    }
    if let Some(flows) = flows_table(report) {
        out.push_str("\nlatency by flow: p50 ms, then errors and unfinished requests if any\n\n");
        out.push_str(&flows.render());
    }
    if let Some(callers) = callers_table(report) {
        out.push_str("\ncalls as their callers saw them (each attempt is a request above)\n\n");
        out.push_str(&callers.render());
    }
    if let Some(instances) = instances_table(report) {
        out.push_str("\nrequests by instance of each service\n\n");
        out.push_str(&instances.render());
    }
    if let Some(observed) = observed_table(report) {
        let start = &report
            .observed
            .as_ref()
            .expect("a table means a file")
            .start_utc;
        writeln!(
            out,
            "\nsimulated against observed (time 0 is {start}): simulated minus observed\n"
        )
        .unwrap();
        out.push_str(&observed.render());
    }
    out
}

/// One row per observed series and variant: the run's metric it is compared with, the samples
/// compared, the root mean square difference, and the largest difference with its time (UTC);
/// `None` without `[observed]`.
pub fn observed_table(report: &RunReport) -> Option<Table> {
    let observed = report.observed.as_ref()?;
    let header = [
        "variant",
        "series",
        "metric",
        "samples",
        "rmse",
        "largest difference",
        "at (UTC)",
    ]
    .map(str::to_owned)
    .to_vec();
    let number = |value: Option<f64>| value.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
    let mut rows = Vec::new();
    for series in &observed.series {
        for fit in &series.variants {
            let at = fit.largest_difference_at_ms.map_or_else(
                || "-".to_owned(),
                |at| {
                    let unix_ms = observed.start_unix_ms + at as i64;
                    outagelab_report::observed::format_utc(unix_ms)
                },
            );
            rows.push(vec![
                fit.variant.clone(),
                series.name.clone(),
                format!("{} ({})", series.metric, series.unit).replace(" ()", ""),
                format!("{} of {}", fit.compared, series.observed.len()),
                number(fit.rmse),
                number(fit.largest_difference),
                at,
            ]);
        }
    }
    Some(Table { header, rows })
}

/// One row per variant, service and instance: its requests, how many ended ok, with an error
/// (each error outcome that occurred, with its count) or not at all; `None` without services.
pub fn instances_table(report: &RunReport) -> Option<Table> {
    if report
        .variants
        .iter()
        .all(|v| v.summary.services.is_empty())
    {
        return None;
    }
    let header = [
        "variant",
        "service",
        "instance",
        "requests",
        "ok",
        "errors",
        "unfinished",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut rows = Vec::new();
    for variant in &report.variants {
        for (service, summary) in &variant.summary.services {
            let mut instances: Vec<(&String, _)> = summary.instances.iter().collect();
            instances.sort_by_key(|(number, _)| number.parse::<u32>().unwrap_or(u32::MAX));
            for (number, instance) in instances {
                let errors: Vec<String> = instance
                    .outcomes
                    .iter()
                    .filter(|(name, n)| name.as_str() != "ok" && **n > 0)
                    .map(|(name, n)| format!("{n} {name}"))
                    .collect();
                rows.push(vec![
                    variant.name.clone(),
                    service.clone(),
                    number.clone(),
                    instance.requests.to_string(),
                    instance
                        .outcomes
                        .get("ok")
                        .copied()
                        .unwrap_or(0)
                        .to_string(),
                    if errors.is_empty() {
                        "0".to_owned()
                    } else {
                        errors.join(", ")
                    },
                    instance.unfinished.to_string(),
                ]);
            }
        }
    }
    Some(Table { header, rows })
}

/// One row per variant and caller: its calls, how they ended, the attempts they took, the
/// attempts it gave up on while the service ran them, and the calls' latency.
pub fn callers_table(report: &RunReport) -> Option<Table> {
    if report.variants.iter().all(|v| v.summary.callers.is_empty()) {
        return None;
    }
    let header = [
        "variant",
        "caller",
        "calls",
        "ok",
        "failed",
        "attempts",
        "abandoned",
        "p50 ms",
        "p95 ms",
        "p99 ms",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut rows = Vec::new();
    for variant in &report.variants {
        for (name, caller) in &variant.summary.callers {
            let ok = caller.outcomes.get("ok").copied().unwrap_or(0);
            let ended: u64 = caller.outcomes.values().sum();
            rows.push(vec![
                variant.name.clone(),
                name.clone(),
                caller.requests.to_string(),
                ok.to_string(),
                (ended - ok).to_string(),
                caller.attempts.to_string(),
                caller.abandoned.to_string(),
                ms(caller.latency_ms.p50),
                ms(caller.latency_ms.p95),
                ms(caller.latency_ms.p99),
            ]);
        }
    }
    Some(Table { header, rows })
}

/// A column of the side-by-side table (`run --columns`, by its name). The table's columns are
/// decided from the file (or chosen), never from which counts happen to be non-zero, so two
/// runs of one file print tables that line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    Requests,
    Ok,
    /// The requests that ended in an error, by kind (`1832 timeout`, or `0`).
    Errors,
    /// The requests that ended in this error (never `Outcome::Ok`).
    Outcome(Outcome),
    Unfinished,
    /// Reads served from a copy older than the last write.
    Stale,
    Share5xx,
    Window5xx,
    P50,
    P95,
    P99,
    /// The peak of queries running at once, one column per database.
    Peak,
}

impl Column {
    /// Every column, in the order a table shows them.
    pub fn all() -> Vec<Column> {
        let mut all = vec![Column::Requests, Column::Ok, Column::Errors];
        all.extend(
            (Outcome::ALL.into_iter())
                .filter(|o| o.is_error())
                .map(Column::Outcome),
        );
        all.extend([
            Column::Unfinished,
            Column::Stale,
            Column::Share5xx,
            Column::Window5xx,
            Column::P50,
            Column::P95,
            Column::P99,
            Column::Peak,
        ]);
        all
    }

    /// Its name for `--columns`.
    pub fn name(self) -> &'static str {
        match self {
            Column::Requests => "requests",
            Column::Ok => "ok",
            Column::Errors => "errors",
            Column::Outcome(outcome) => outcome.name(),
            Column::Unfinished => "unfinished",
            Column::Stale => "stale",
            Column::Share5xx => "5xx",
            Column::Window5xx => "5xx_window",
            Column::P50 => "p50",
            Column::P95 => "p95",
            Column::P99 => "p99",
            Column::Peak => "peak",
        }
    }

    /// `--columns a,b,c`: the columns in the order given. Refuses an unknown name (naming
    /// every unknown one and listing the valid names), a name given twice, and an empty list.
    pub fn parse_list(text: &str) -> Result<Vec<Column>, String> {
        let all = Column::all();
        let names: Vec<&str> = text.split(',').map(str::trim).collect();
        let valid = || {
            let names: Vec<&str> = all.iter().map(|c| c.name()).collect();
            names.join(", ")
        };
        if names.iter().all(|name| name.is_empty()) {
            return Err(format!(
                "--columns is empty: name one or more columns, separated by commas (the \
                 columns: {})",
                valid()
            ));
        }
        let unknown: Vec<String> = (names.iter())
            .filter(|name| !all.iter().any(|c| c.name() == **name))
            .map(|name| format!("`{name}`"))
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "--columns: no column named {} (the columns: {})",
                unknown.join(", "),
                valid()
            ));
        }
        let mut chosen = Vec::new();
        for name in names {
            let column = *all
                .iter()
                .find(|c| c.name() == name)
                .expect("checked above");
            if chosen.contains(&column) {
                return Err(format!("--columns names `{name}` twice"));
            }
            chosen.push(column);
        }
        Ok(chosen)
    }

    /// The columns a file's table has unless `--columns` chooses: requests, ok, errors (the
    /// count of each kind that occurred, in one column) and unfinished; stale reads when a database step follows its data's
    /// freshness; the 5xx share and window with an `[http]` table; the latency percentiles; the
    /// peak of each database. Decided from the file alone.
    pub fn defaults(scenario: &ScenarioFile) -> Vec<Column> {
        let mut columns = vec![
            Column::Requests,
            Column::Ok,
            Column::Errors,
            Column::Unfinished,
        ];
        if scenario
            .variants
            .iter()
            .any(|v| follows_freshness(&v.scenario))
        {
            columns.push(Column::Stale);
        }
        if scenario.variants.iter().any(|v| v.scenario.http.is_some()) {
            columns.extend([Column::Share5xx, Column::Window5xx]);
        }
        columns.extend([Column::P50, Column::P95, Column::P99, Column::Peak]);
        columns
    }
}

/// Whether some database step reads or writes a key whose freshness is followed (the only
/// way a read is counted stale).
fn follows_freshness(scenario: &outagelab_sim::Scenario) -> bool {
    use outagelab_sim::scenario::StepAction;
    (scenario.flows.iter().flat_map(|flow| &flow.steps))
        .any(|step| matches!(step.action, StepAction::Database { data: Some(_), .. }))
}

/// One row per variant, in `columns` (see [`Column::defaults`]).
pub fn summary_table(report: &RunReport, columns: &[Column]) -> Table {
    let variants = &report.variants;
    // Every database a variant has (a patch may add one), by name.
    let databases: std::collections::BTreeSet<&String> = variants
        .iter()
        .flat_map(|v| v.summary.databases.keys())
        .collect();
    let stale = |v: &VariantReport| v.summary.flows.values().map(|f| f.stale_reads).sum::<u64>();
    // Each kind that occurred with its count, as the instances table writes them: `1832
    // timeout`, `12 timeout, 3 refused`; `0` when none did. The column stays; its text says
    // which kinds.
    let errors = |v: &VariantReport| -> String {
        let kinds: Vec<String> = (Outcome::ALL.into_iter())
            .filter(|o| o.is_error() && count(v, *o) > 0)
            .map(|o| format!("{} {}", count(v, o), o.name()))
            .collect();
        if kinds.is_empty() {
            "0".to_owned()
        } else {
            kinds.join(", ")
        }
    };
    let mut header = vec!["variant".to_owned()];
    for column in columns {
        match column {
            Column::Peak => header.extend(databases.iter().map(|db| format!("peak {db}"))),
            Column::Share5xx => header.push("5xx %".to_owned()),
            Column::Window5xx => header.push("5xx window s".to_owned()),
            Column::P50 | Column::P95 | Column::P99 => header.push(format!("{} ms", column.name())),
            other => header.push(other.name().to_owned()),
        }
    }
    let rows = variants
        .iter()
        .map(|v| {
            let summary = &v.summary;
            let http = summary.http.as_ref();
            let all = summary.latency_ms.get("all");
            let mut row = vec![v.name.clone()];
            for column in columns {
                match column {
                    Column::Requests => row.push(summary.requests.to_string()),
                    Column::Ok => row.push(count(v, Outcome::Ok).to_string()),
                    Column::Errors => row.push(errors(v)),
                    Column::Outcome(outcome) => row.push(count(v, *outcome).to_string()),
                    Column::Unfinished => row.push(summary.unfinished.to_string()),
                    Column::Stale => row.push(stale(v).to_string()),
                    Column::Share5xx => {
                        let share = http.and_then(|h| h.share_5xx_percent);
                        row.push(share.map_or_else(|| "-".to_owned(), |p| format!("{p:.1}")));
                    }
                    Column::Window5xx => row.push(match http {
                        Some(h) if h.class_5xx > 0 && h.ok_after_last_5xx == 0 => {
                            "not recovered".to_owned()
                        }
                        Some(h) => h
                            .window_5xx_ms
                            .map_or_else(|| "-".to_owned(), |w| format!("{:.1}", w / 1000.0)),
                        None => "-".to_owned(),
                    }),
                    Column::P50 => row.push(ms(all.and_then(|l| l.p50))),
                    Column::P95 => row.push(ms(all.and_then(|l| l.p95))),
                    Column::P99 => row.push(ms(all.and_then(|l| l.p99))),
                    Column::Peak => row.extend(databases.iter().map(|db| {
                        summary
                            .databases
                            .get(*db)
                            .map_or_else(|| "-".to_owned(), |d| d.peak_concurrency.to_string())
                    })),
                }
            }
            row
        })
        .collect();
    Table { header, rows }
}

/// What the summary table needs said under it: the percentile rule, what an error does in
/// each flow, series widened, runs that ended before completing.
pub fn notes(report: &RunReport, scenario: &ScenarioFile) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(first) = report.variants.first() {
        let rule = match first.percentile_rule {
            outagelab_report::PercentileRule::NearestRank => "nearest rank",
            outagelab_report::PercentileRule::FloorIndex => "floor index",
        };
        // The rule is defined in one place, the file format's `percentile_rule`: the note
        // says where, since the two rules differ by a rank and a file may pick either.
        notes.push(format!(
            "(latency percentiles over all ended requests, {rule} rule: \
             percentile_rule in docs/scenario-format.md#metrics)"
        ));
    }
    notes.extend(error_routing(scenario));
    // One line per widening, however many variants share it.
    let mut widened: Vec<(String, Vec<&str>)> = Vec::new();
    for variant in &report.variants {
        let series = &variant.series;
        let Some(asked) = series.bucket_ms_asked else {
            continue;
        };
        let merged = match series.percentiles_merged_before_ms {
            Some(at) => format!(
                "; before {at} ms its buckets were merged in pairs, and their percentiles are \
                 the largest of each pair's (an upper bound)"
            ),
            None => String::new(),
        };
        let how = format!(
            "{} ms buckets, not the {asked} ms asked for: a series keeps at most {} \
             buckets{merged}",
            series.bucket_ms,
            outagelab_sim::BUCKETS_MAX
        );
        match widened.iter_mut().find(|(other, _)| *other == how) {
            Some((_, names)) => names.push(&variant.name),
            None => widened.push((how, vec![variant.name.as_str()])),
        }
    }
    for (how, names) in widened {
        let have = if names.len() == 1 { "has" } else { "have" };
        notes.push(format!("note: {} {have} {how}", variants_named(&names)));
    }
    // One line per way of ending, however many variants share it (a sweep's 21 variants
    // that all ended by horizon are one line, not 21).
    let mut ended: Vec<((&str, String), Vec<&str>)> = Vec::new();
    for variant in report
        .variants
        .iter()
        .filter(|v| v.verdict.name() != "completed")
    {
        let how = (variant.verdict.name(), variant.end_ms.to_string());
        match ended.iter_mut().find(|(other, _)| *other == how) {
            Some((_, names)) => names.push(&variant.name),
            None => ended.push((how, vec![variant.name.as_str()])),
        }
    }
    for ((verdict, end_ms), names) in ended {
        notes.push(format!(
            "note: {} ended by {verdict} at {end_ms} ms",
            variants_named(&names)
        ));
    }
    notes
}

/// Who a note is about: one variant by name, a few by their names, many by their count.
fn variants_named(names: &[&str]) -> String {
    match names.len() {
        1 => quoted(names),
        2..=4 => format!("{} variants ({})", names.len(), quoted(names)),
        count => format!("{count} variants ({}, ...)", quoted(&names[..3])),
    }
}

/// What an error does at each step that can fail, one line per flow (`on error: read: GET
/// cache -> next (fail-open); db main -> fail`) when every variant agrees, else one per group
/// of variants that agree, in the order the variants come: each group named, and the largest
/// last, as "the other N variants".
pub fn error_routing(scenario: &ScenarioFile) -> Vec<String> {
    type Groups<'a> = Vec<(String, Vec<&'a str>)>;
    let mut flows: Vec<(String, Groups)> = Vec::new();
    for variant in &scenario.variants {
        for (flow, routing) in outagelab_scenario_file::error_routing(&variant.scenario) {
            let at = match flows.iter().position(|(name, _)| *name == flow) {
                Some(at) => at,
                None => {
                    flows.push((flow, Vec::new()));
                    flows.len() - 1
                }
            };
            let groups = &mut flows[at].1;
            match groups.iter_mut().find(|(other, _)| *other == routing) {
                Some((_, names)) => names.push(&variant.name),
                None => groups.push((routing, vec![variant.name.as_str()])),
            }
        }
    }
    let mut lines = Vec::new();
    for (flow, groups) in flows {
        if let [(routing, names)] = groups.as_slice()
            && names.len() == scenario.variants.len()
        {
            lines.push(format!("on error: {flow}: {routing}"));
            continue;
        }
        // The most common routing is said once for the variants the other lines do not name.
        let most = (0..groups.len())
            .max_by_key(|&at| (groups[at].1.len(), std::cmp::Reverse(at)))
            .expect("a flow listed has a group");
        for (at, (routing, names)) in groups.iter().enumerate() {
            if at != most {
                lines.push(format!("on error in {}: {flow}: {routing}", quoted(names)));
            }
        }
        let (routing, names) = &groups[most];
        // "Other" only when every variant has the flow; else each that has it is named.
        let covered: usize = groups.iter().map(|(_, names)| names.len()).sum();
        let who = if names.len() > 1 && covered == scenario.variants.len() {
            format!("the other {} variants", names.len())
        } else {
            quoted(names)
        };
        lines.push(format!("on error in {who}: {flow}: {routing}"));
    }
    lines
}

/// `"a", "b"`.
fn quoted(names: &[&str]) -> String {
    let names: Vec<String> = names.iter().map(|name| format!("\"{name}\"")).collect();
    names.join(", ")
}

/// p50 latency by flow, with the errors and unfinished requests of each; `None` with one flow.
pub fn flows_table(report: &RunReport) -> Option<Table> {
    let variants = &report.variants;
    let flows: Vec<&String> = variants
        .first()
        .map(|v| v.summary.flows.keys().collect())
        .unwrap_or_default();
    if flows.len() <= 1 {
        return None;
    }
    let mut header = vec!["variant".to_owned()];
    header.extend(flows.iter().map(|f| (*f).clone()));
    let rows = variants
        .iter()
        .map(|v| {
            let mut row = vec![v.name.clone()];
            row.extend(flows.iter().map(|flow| {
                let Some(summary) = v.summary.flows.get(*flow) else {
                    return "-".to_owned();
                };
                let p50 = ms(summary.latency_ms.get("all").and_then(|l| l.p50));
                let mut errors: Vec<String> = summary
                    .outcomes
                    .iter()
                    .filter(|(name, n)| name.as_str() != "ok" && **n > 0)
                    .map(|(name, n)| format!("{n} {name}"))
                    .collect();
                if summary.unfinished > 0 {
                    errors.push(format!("{} unfinished", summary.unfinished));
                }
                if errors.is_empty() {
                    p50
                } else {
                    format!("{p50} ({})", errors.join(", "))
                }
            }));
            row
        })
        .collect();
    Some(Table { header, rows })
}

fn count(variant: &VariantReport, outcome: Outcome) -> u64 {
    variant
        .summary
        .outcomes
        .get(outcome.name())
        .copied()
        .unwrap_or(0)
}

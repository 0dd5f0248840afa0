//! `run --html PATH`: one self-contained HTML page for a design review or a postmortem: the
//! side-by-side table, every expectation with its value, the fault windows, the charts (inline
//! SVG, no external file), HTTP answers when the scenario maps them, and the log of state
//! changes. The same report gives the same bytes: nothing in it reads a clock.

use std::fmt::Write as _;

use outagelab_report::RunReport;
use outagelab_scenario_file::ScenarioFile;

use crate::Checked;
use crate::table::{self, Table};

/// Entries of the state-change log shown per variant; the rest are counted (`--events` writes
/// them all).
const LOG_ROWS_MAX: usize = 200;

const STYLE: &str = "body{font-family:'DejaVu Sans',sans-serif;margin:2em;color:#1e1e1e;max-width:1280px}\
table{border-collapse:collapse;margin:1em 0;font-size:14px}\
th,td{border:1px solid #ccc;padding:4px 8px}th{background:#f2f2f2}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.fail td{background:#fde2e2}tr.held td.result{color:#2c7a2c}tr.fail td.result{color:#b00020;font-weight:bold}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}\
code{background:#f6f6f6;padding:1px 4px}";

/// Escapes text for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn table_html(out: &mut String, id: &str, table: &Table) {
    write!(out, "<table id=\"{id}\"><thead><tr>").unwrap();
    for cell in &table.header {
        write!(out, "<th>{}</th>", escape(cell)).unwrap();
    }
    out.push_str("</tr></thead><tbody>\n");
    for row in &table.rows {
        out.push_str("<tr>");
        for (index, cell) in row.iter().enumerate() {
            let class = if index == 0 { "" } else { " class=\"num\"" };
            write!(out, "<td{class}>{}</td>", escape(cell)).unwrap();
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table>\n");
}

/// The page. `command` is how to reproduce the run; `charts` are `(name, svg document)`.
pub fn document(
    report: &RunReport,
    scenario: &ScenarioFile,
    checked: &[Checked],
    charts: &[(&str, String)],
    command: &str,
) -> String {
    let mut out = String::new();
    let title = format!("{}: outagelab report", report.scenario);
    write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&report.scenario)
    )
    .unwrap();
    let variants = report.variants.len();
    writeln!(
        out,
        "<p>Seed {}, {variants} variant{}, simulated in virtual time. Reproduce with \
         <code>{}</code>.</p>",
        report.seed,
        if variants == 1 { "" } else { "s" },
        escape(command)
    )
    .unwrap();

    out.push_str("<h2>Variants side by side</h2>\n");
    table_html(&mut out, "summary", &table::summary_table(report));
    for note in table::notes(report, scenario) {
        writeln!(out, "<p class=\"note\">{}</p>", escape(&note)).unwrap();
    }
    if let Some(flows) = table::flows_table(report) {
        out.push_str("<h3>Latency by flow (p50 ms, then errors and unfinished requests)</h3>\n");
        table_html(&mut out, "flows", &flows);
    }

    if let Some(callers) = table::callers_table(report) {
        out.push_str("<h3>Calls as their callers saw them</h3>\n");
        table_html(&mut out, "callers", &callers);
    }

    let held = checked.iter().filter(|c| c.passed).count();
    writeln!(
        out,
        "<h2>Expectations: {held} held, {} failed</h2>",
        checked.len() - held
    )
    .unwrap();
    if !checked.is_empty() {
        out.push_str(
            "<table id=\"expectations\"><thead><tr><th>variant</th><th>expectation</th>\
             <th>result</th><th>value</th><th>where</th></tr></thead><tbody>\n",
        );
        for check in checked {
            let (class, result) = if check.passed {
                ("held", "held")
            } else {
                ("fail", "FAILED")
            };
            let value = match &check.actual {
                Ok(value) | Err(value) => value,
            };
            writeln!(
                out,
                "<tr class=\"{class}\"><td>{}</td><td><code>{}</code></td>\
                 <td class=\"result\">{result}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                escape(&check.variant),
                escape(&check.expectation),
                escape(value),
                escape(&check.location)
            )
            .unwrap();
        }
        out.push_str("</tbody></table>\n");
    }

    let faults: Vec<String> = report
        .variants
        .iter()
        .flat_map(|v| &v.faults)
        .map(|f| {
            let end = f
                .end_ms
                .map_or_else(|| "the end".to_owned(), |end| format!("{end} ms"));
            format!(
                "{}: {} on {}, from {} ms to {end}",
                f.name, f.kind, f.target, f.start_ms
            )
        })
        .collect::<std::collections::BTreeSet<String>>()
        .into_iter()
        .collect();
    if !faults.is_empty() {
        out.push_str("<h2>Faults</h2>\n<ul id=\"faults\">\n");
        for fault in faults {
            writeln!(out, "<li>{}</li>", escape(&fault)).unwrap();
        }
        out.push_str("</ul>\n");
    }

    out.push_str("<h2>Charts</h2>\n");
    for (name, svg) in charts {
        // The SVG document's own XML declaration is not allowed inside HTML.
        let svg = svg
            .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
            .unwrap_or(svg)
            .trim_start();
        write!(
            out,
            "<figure id=\"chart-{name}\">\n{svg}\n<figcaption>{name}</figcaption>\n</figure>\n"
        )
        .unwrap();
    }

    out.push_str("<h2>State changes</h2>\n");
    let any = report.variants.iter().any(|v| !v.log.is_empty());
    if !any {
        out.push_str("<p>No breaker, reconnect slot, fault or memory limit changed state.</p>\n");
    }
    for variant in report.variants.iter().filter(|v| !v.log.is_empty()) {
        writeln!(out, "<h3>{}</h3>", escape(&variant.name)).unwrap();
        let rows = variant
            .log
            .iter()
            .take(LOG_ROWS_MAX)
            .map(|entry| {
                let detail = match (entry.from, entry.link) {
                    (Some(from), _) => format!("from {from}"),
                    (_, Some(link)) => format!("link {link}"),
                    _ => String::new(),
                };
                vec![
                    format!("{:.3}", entry.at_ms),
                    entry.event.clone(),
                    format!("{} {}", entry.target_kind, entry.target),
                    detail,
                ]
            })
            .collect();
        let header = ["at ms", "event", "what", "detail"]
            .map(str::to_owned)
            .to_vec();
        table_html(&mut out, "log", &Table { header, rows });
        let hidden = variant.log.len().saturating_sub(LOG_ROWS_MAX) as u64 + variant.log_dropped;
        if hidden > 0 {
            writeln!(
                out,
                "<p class=\"note\">{hidden} more (run with <code>--events PATH</code> for all \
                 that were kept)</p>"
            )
            .unwrap();
        }
    }
    out.push_str("</body>\n</html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_the_scenario_is_escaped() {
        assert_eq!(
            escape("a <b> & \"c\" 'd'"),
            "a &lt;b&gt; &amp; &quot;c&quot; &#39;d&#39;"
        );
    }
}

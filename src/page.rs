//! A report page written once and rendered as either of two formats: a self-contained HTML
//! page (inline style and SVG, no script, nothing fetched) or Markdown for pasting into a
//! review document. The content (`review.rs`) calls the same methods for both; only this file
//! knows either syntax. Text may hold `code` spans between backticks.

use std::fmt::Write as _;
use std::path::Path;

use crate::table::Table;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Html,
    Markdown,
}

impl Format {
    /// Markdown for a `.md` or `.markdown` file, HTML for any other name.
    pub fn for_path(path: &Path) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("md" | "markdown") => Format::Markdown,
            _ => Format::Html,
        }
    }
}

const STYLE: &str = "body{font-family:'DejaVu Sans',sans-serif;margin:2em;color:#1e1e1e;max-width:1280px}\
table{border-collapse:collapse;margin:1em 0;font-size:14px}\
th,td{border:1px solid #ccc;padding:4px 8px}th{background:#f2f2f2}\
td.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.fail td{background:#fde2e2}tr.held td.result{color:#2c7a2c}tr.fail td.result{color:#b00020;font-weight:bold}\
tr.best td{background:#e3f1e3;font-weight:bold}\
figure{margin:1em 0}figure svg{max-width:100%;height:auto}\
pre.assumptions{background:#f6f6f6;padding:1em;white-space:pre-wrap}\
code{background:#f6f6f6;padding:1px 4px}";

/// A page being written.
pub struct Page {
    format: Format,
    out: String,
    /// Charts embedded in a Markdown page, which its end says how to get as files.
    charts_embedded: Vec<String>,
}

impl Page {
    pub fn new(format: Format, title: &str) -> Page {
        let mut out = String::new();
        match format {
            Format::Html => write!(
                out,
                "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
                 <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
                escape(title)
            )
            .unwrap(),
            Format::Markdown => {}
        }
        Page {
            format,
            out,
            charts_embedded: Vec::new(),
        }
    }

    /// A heading, 1 for the page's title.
    pub fn heading(&mut self, level: u8, text: &str) {
        match self.format {
            Format::Html => writeln!(self.out, "<h{level}>{}</h{level}>", inline(text)).unwrap(),
            Format::Markdown => writeln!(
                self.out,
                "{} {}\n",
                "#".repeat(usize::from(level)),
                text.trim()
            )
            .unwrap(),
        }
    }

    /// A section the reader opens when they want it (a long log): closed in HTML, `summary`
    /// its one visible line; what is written until [`Page::end_collapsed`] is inside it.
    /// Markdown has no such thing, so there `summary` is a paragraph and the content follows.
    pub fn start_collapsed(&mut self, id: &str, summary: &str) {
        match self.format {
            Format::Html => writeln!(
                self.out,
                "<details class=\"{id}\"><summary>{}</summary>",
                inline(summary)
            )
            .unwrap(),
            Format::Markdown => writeln!(self.out, "{}\n", summary.trim()).unwrap(),
        }
    }

    pub fn end_collapsed(&mut self) {
        if self.format == Format::Html {
            self.out.push_str("</details>\n");
        }
    }

    pub fn paragraph(&mut self, text: &str) {
        match self.format {
            Format::Html => writeln!(self.out, "<p>{}</p>", inline(text)).unwrap(),
            Format::Markdown => writeln!(self.out, "{}\n", text.trim()).unwrap(),
        }
    }

    /// Lines kept as they are (a file's own comments): preformatted, wrapped by the browser.
    pub fn preformatted(&mut self, id: &str, lines: &[String]) {
        match self.format {
            Format::Html => {
                write!(self.out, "<pre class=\"{id}\" id=\"{id}\">").unwrap();
                for line in lines {
                    writeln!(self.out, "{}", escape(line)).unwrap();
                }
                self.out.push_str("</pre>\n");
            }
            Format::Markdown => {
                self.out.push_str("```text\n");
                for line in lines {
                    // A line of backticks would end the block early.
                    writeln!(self.out, "{}", line.replace("```", "'''")).unwrap();
                }
                self.out.push_str("```\n\n");
            }
        }
    }

    pub fn list(&mut self, id: &str, items: &[String]) {
        match self.format {
            Format::Html => {
                writeln!(self.out, "<ul id=\"{id}\">").unwrap();
                for item in items {
                    writeln!(self.out, "<li>{}</li>", inline(item)).unwrap();
                }
                self.out.push_str("</ul>\n");
            }
            Format::Markdown => {
                for item in items {
                    writeln!(self.out, "- {}", item.trim()).unwrap();
                }
                self.out.push('\n');
            }
        }
    }

    /// A table; `classes`, when given, is one HTML class per row (`held`, `fail`, `best`, or
    /// empty). A column of numbers (and intervals) is right-aligned, any other left-aligned.
    pub fn table(&mut self, id: &str, table: &Table, classes: Option<&[&str]>) {
        let numeric: Vec<bool> = (0..table.header.len())
            .map(|c| numeric_column(table.rows.iter().filter_map(|row| row.get(c))))
            .collect();
        match self.format {
            Format::Html => {
                write!(self.out, "<table id=\"{id}\"><thead><tr>").unwrap();
                for cell in &table.header {
                    write!(self.out, "<th>{}</th>", escape(cell)).unwrap();
                }
                self.out.push_str("</tr></thead><tbody>\n");
                for (r, row) in table.rows.iter().enumerate() {
                    match classes.and_then(|c| c.get(r)).filter(|c| !c.is_empty()) {
                        Some(class) => write!(self.out, "<tr class=\"{class}\">").unwrap(),
                        None => self.out.push_str("<tr>"),
                    }
                    for (index, cell) in row.iter().enumerate() {
                        let class = if numeric.get(index) == Some(&true) {
                            " class=\"num\""
                        } else {
                            ""
                        };
                        write!(self.out, "<td{class}>{}</td>", inline(cell)).unwrap();
                    }
                    self.out.push_str("</tr>\n");
                }
                self.out.push_str("</tbody></table>\n");
            }
            Format::Markdown => {
                let cell = |text: &str| text.replace('|', "\\|").replace('\n', " ");
                let header: Vec<String> = table.header.iter().map(|c| cell(c)).collect();
                writeln!(self.out, "| {} |", header.join(" | ")).unwrap();
                let rule: Vec<&str> = numeric
                    .iter()
                    .map(|&n| if n { "---:" } else { "---" })
                    .collect();
                writeln!(self.out, "|{}|", rule.join("|")).unwrap();
                for row in &table.rows {
                    let row: Vec<String> = row.iter().map(|c| cell(c)).collect();
                    writeln!(self.out, "| {} |", row.join(" | ")).unwrap();
                }
                self.out.push('\n');
            }
        }
    }

    /// A chart, given as an SVG document: inline in HTML; in Markdown an image whose source is
    /// the document itself (a `data:` URI), so the page stays one file that shows its charts.
    pub fn figure(&mut self, name: &str, svg: &str) {
        match self.format {
            Format::Html => {
                // The SVG document's own XML declaration is not allowed inside HTML.
                let svg = svg
                    .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
                    .unwrap_or(svg)
                    .trim_start();
                // No caption: the chart's own title says what it is; its file name under it
                // was a stray word (issue 31).
                writeln!(self.out, "<figure id=\"chart-{name}\">\n{svg}\n</figure>").unwrap();
            }
            Format::Markdown => {
                let data = base64(svg.as_bytes());
                writeln!(self.out, "![{name}](data:image/svg+xml;base64,{data})\n").unwrap();
                self.charts_embedded.push(name.to_owned());
            }
        }
    }

    pub fn finish(mut self) -> String {
        match self.format {
            Format::Html => self.out.push_str("</body>\n</html>\n"),
            Format::Markdown => {
                if !self.charts_embedded.is_empty() {
                    writeln!(
                        self.out,
                        "The charts are embedded as `data:` images, which some sites do not show \
                         (GitHub among them): `--plot DIR` writes them as PNG and SVG files."
                    )
                    .unwrap();
                }
            }
        }
        self.out
    }
}

/// `bytes` in standard base64 (RFC 4648, with padding), for a `data:` URI.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let word = chunk.iter().enumerate().fold(0u32, |word, (i, &byte)| {
            word | u32::from(byte) << (16 - 8 * i)
        });
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(char::from(ALPHABET[(word >> (18 - 6 * i) & 63) as usize]));
            } else {
                text.push('=');
            }
        }
    }
    text
}

/// Whether a column holds numbers: every cell that says something (not empty, not `-`) is a
/// number, a signed one, a percentage or an interval `[a, b]`, and at least one does.
fn numeric_column<'a>(cells: impl Iterator<Item = &'a String>) -> bool {
    let number = |text: &str| {
        let text = text.trim().trim_start_matches('+').trim_end_matches('%');
        text.parse::<f64>().is_ok_and(f64::is_finite)
    };
    let mut any = false;
    for cell in cells {
        let cell = cell.trim();
        if cell.is_empty() || cell == "-" {
            continue;
        }
        let interval = cell
            .strip_prefix('[')
            .and_then(|c| c.strip_suffix(']'))
            .and_then(|c| c.split_once(", "))
            .is_some_and(|(low, high)| number(low) && number(high));
        // A mean with the half-width of its interval: `4842 ±30.2`.
        let plus_minus =
            (cell.split_once(" ±")).is_some_and(|(mean, half)| number(mean) && number(half));
        if !(interval || plus_minus || number(cell)) {
            return false;
        }
        any = true;
    }
    any
}

/// Escapes text for HTML content and attribute values.
pub fn escape(text: &str) -> String {
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

/// Text for HTML: escaped, with each pair of backticks made a `<code>` span (an odd one out
/// stays a backtick).
fn inline(text: &str) -> String {
    let parts: Vec<&str> = text.split('`').collect();
    let mut out = String::new();
    for (index, part) in parts.iter().enumerate() {
        let code = index % 2 == 1 && index + 1 < parts.len();
        if code {
            write!(out, "<code>{}</code>", escape(part)).unwrap();
        } else if index % 2 == 1 {
            write!(out, "`{}", escape(part)).unwrap();
        } else {
            out.push_str(&escape(part));
        }
    }
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

    #[test]
    fn backticks_make_code_spans_and_an_odd_one_stays() {
        assert_eq!(
            inline("run `a <b>` now"),
            "run <code>a &lt;b&gt;</code> now"
        );
        assert_eq!(inline("one ` only"), "one ` only");
        assert_eq!(inline("`x` and `y"), "<code>x</code> and `y");
    }

    fn table() -> Table {
        Table {
            header: vec!["variant".into(), "p99 | ms".into()],
            rows: vec![vec!["a".into(), "1.5".into()], vec!["b".into(), "2".into()]],
        }
    }

    #[test]
    fn a_column_is_numeric_when_every_cell_that_says_something_is_a_number() {
        let column = |cells: &[&str]| {
            let cells: Vec<String> = cells.iter().map(|c| c.to_string()).collect();
            numeric_column(cells.iter())
        };
        assert!(column(&[
            "1",
            "-2.5",
            "+3",
            "",
            "-",
            "[1.5, 2]",
            "4.1e-5",
            "66.8%",
            "4842 ±30.2",
            "-1.5 ±0"
        ]));
        assert!(!column(&["4842 ±", "1"]), "a half-width is a number");
        assert!(!column(&["1", "held"]));
        assert!(!column(&["[a, b]"]));
        assert!(!column(&["", "-"]), "nothing to align");
    }

    #[test]
    fn a_markdown_table_escapes_pipes_and_right_aligns_numbers() {
        let mut page = Page::new(Format::Markdown, "t");
        page.table("x", &table(), None);
        assert_eq!(
            page.finish(),
            "| variant | p99 \\| ms |\n|---|---:|\n| a | 1.5 |\n| b | 2 |\n\n"
        );
    }

    #[test]
    fn an_html_table_carries_its_row_classes() {
        let mut page = Page::new(Format::Html, "t");
        page.table("x", &table(), Some(&["held", ""]));
        let html = page.finish();
        assert!(html.contains("<tr class=\"held\"><td>a</td><td class=\"num\">1.5</td></tr>"));
        assert!(html.contains("<tr><td>b</td>"));
    }

    /// A Markdown report named its charts ("*(chart `outage`)*") and left them out.
    #[test]
    fn markdown_embeds_each_chart_as_an_image() {
        let mut page = Page::new(Format::Markdown, "t");
        page.figure("outage", "<svg/>");
        let text = page.finish();
        assert!(
            text.contains("![outage](data:image/svg+xml;base64,PHN2Zy8+)"),
            "{text}"
        );
        assert!(text.contains("`--plot DIR` writes them"));
        assert_eq!(Format::for_path(Path::new("r.md")), Format::Markdown);
        assert_eq!(Format::for_path(Path::new("r.html")), Format::Html);
    }

    #[test]
    fn base64_pads_to_whole_groups() {
        for (bytes, text) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"fooba", "Zm9vYmE="),
            (b"foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(bytes), text);
        }
    }
}

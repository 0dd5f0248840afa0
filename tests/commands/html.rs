//! The review report as its readers meet it: the HTML page rendered by a real headless
//! Chromium (Debian's `chromium`; `.ci/run` installs it and sets `OUTAGELAB_REQUIRE_CHROMIUM`,
//! so CI never skips), with no console message and the numbers of the JSON; and the Markdown
//! page. Without the browser, elsewhere, the rendering tests say so loudly and check only the
//! file.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{outagelab, scratch};

fn chromium() -> Option<PathBuf> {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| candidates.map(|name| dir.join(name)))
        .find(|candidate| candidate.is_file())
}

/// What the browser gave back for a page.
struct Browsed {
    /// Standard output: the DOM with `--dump-dom`.
    stdout: String,
    /// Every message the page wrote to the console (script errors among them), as the
    /// browser logs them (`...:CONSOLE:...] "message", source: ...`).
    console: Vec<String>,
}

/// Runs the browser headless on `page` with `args`, killing it after a minute.
fn browse(browser: &Path, page: &Path, args: &[&str]) -> Browsed {
    let dir = page.parent().unwrap().join("profile");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            // Nothing but the page: this machine's network is closed anyway.
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", dir.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the browser starts");
    // Read as it comes: a page's DOM is larger than a pipe holds.
    let read = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).map(|_| text)
        })
    };
    let reader = read(Box::new(child.stdout.take().unwrap()));
    let errors = read(Box::new(child.stderr.take().unwrap()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the browser did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = errors.join().unwrap().unwrap_or_default();
    let stdout = reader.join().unwrap().unwrap_or_default();
    // A browser that could not start (a missing library, no user data directory) gives no
    // page: say so, with what it said, rather than let a caller look for an element in
    // nothing.
    let dumping = args.contains(&"--dump-dom");
    if !status.success() || (dumping && stdout.trim().is_empty()) {
        let said: Vec<&str> = stderr.lines().rev().take(20).collect();
        let said: Vec<&str> = said.into_iter().rev().collect();
        panic!(
            "the browser ({}) failed: it exited with {status}{}; the last lines it wrote to \
             standard error:\n{}",
            browser.display(),
            if dumping && stdout.trim().is_empty() {
                " and gave no page"
            } else {
                ""
            },
            said.join("\n")
        );
    }
    Browsed {
        stdout,
        console: stderr
            .lines()
            .filter(|line| line.contains(":CONSOLE"))
            .map(str::to_owned)
            .collect(),
    }
}

/// The browser, or `None` after saying loudly that the test will not render (and failing
/// when `.ci/run` said a browser is required).
fn browser_or_skip() -> Option<PathBuf> {
    let browser = chromium();
    if browser.is_none() {
        assert!(
            std::env::var_os("OUTAGELAB_REQUIRE_CHROMIUM").is_none(),
            "OUTAGELAB_REQUIRE_CHROMIUM is set (as .ci/run sets it) and no chromium is on PATH"
        );
        eprintln!(
            "SKIPPED: no chromium on PATH, so the HTML report was not rendered \
             (.ci/run installs Debian's chromium; apt-get install chromium)"
        );
    }
    browser
}

/// The text of every cell of the table with `id` in `html`, row by row (header cells too),
/// with tags removed and entities decoded.
fn table_cells(html: &str, id: &str) -> Vec<Vec<String>> {
    let table = html
        .split(&format!("<table id=\"{id}\">"))
        .nth(1)
        .unwrap_or_else(|| panic!("no table {id}"));
    let table = table.split("</table>").next().unwrap();
    table
        .split("<tr")
        .skip(1)
        .map(|row| {
            row.split("<t")
                .skip(1)
                .filter(|cell| cell.starts_with('d') || cell.starts_with('h'))
                .map(|cell| {
                    let inner = &cell[cell.find('>').unwrap() + 1..];
                    let inner = inner.split("</t").next().unwrap();
                    let mut text = String::new();
                    let mut in_tag = false;
                    for c in inner.chars() {
                        match c {
                            '<' => in_tag = true,
                            '>' => in_tag = false,
                            c if !in_tag => text.push(c),
                            _ => {}
                        }
                    }
                    text.replace("&quot;", "\"")
                        .replace("&#39;", "'")
                        .replace("&lt;", "<")
                        .replace("&gt;", ">")
                        .replace("&amp;", "&")
                })
                .collect()
        })
        .collect()
}

/// Whether `shown` is `value` as the page writes it: equal to within half a unit of the last
/// decimal shown.
fn shows(shown: &str, value: f64) -> bool {
    let shown = shown.trim().trim_start_matches('+');
    let Ok(parsed) = shown.parse::<f64>() else {
        return false;
    };
    let decimals = shown
        .split(['e', 'E'])
        .next()
        .unwrap()
        .split('.')
        .nth(1)
        .map_or(0, str::len) as i32;
    let exponent = shown
        .split(['e', 'E'])
        .nth(1)
        .and_then(|e| e.parse::<i32>().ok())
        .unwrap_or(0);
    let unit = 10f64.powi(exponent - decimals);
    (parsed - value).abs() <= unit / 2.0 + 1e-9 * value.abs()
}

fn report(dir: &Path, name: &str) -> PathBuf {
    let page = dir.join(name);
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--report",
        page.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    page
}

#[test]
fn the_same_run_writes_the_same_page() {
    let dir = scratch("html-bytes");
    let (first, second) = (report(&dir, "a.html"), report(&dir, "b.html"));
    let page = std::fs::read_to_string(&first).unwrap();
    assert_eq!(page, std::fs::read_to_string(second).unwrap());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(
        !page.contains("<?xml"),
        "the inline SVGs lose their XML declaration"
    );
    assert!(page.contains("outagelab run scenarios/redis-dead-protection.toml --seed 1"));
    assert!(
        page.contains("on error: read: GET cache -&gt; next (fail-open); db main -&gt; fail"),
        "the page says what an error does in each flow"
    );
}

#[test]
fn a_headless_browser_renders_the_tables_the_expectations_and_the_charts() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = scratch("html-browser");
    let page = report(&dir, "report.html");
    // The DOM as the browser parsed it: the tables are tables, the charts are SVG elements.
    let browsed = browse(&browser, &page, &["--dump-dom"]);
    assert_eq!(browsed.console, Vec::<String>::new(), "console messages");
    let dom = browsed.stdout;
    let summary = dom
        .split("<table id=\"summary\">")
        .nth(1)
        .expect("the summary table is in the DOM");
    let summary = summary.split("</table>").next().unwrap();
    assert_eq!(
        summary.matches("<tr>").count(),
        1 + 3,
        "a header and three variants"
    );
    assert!(summary.contains("timeout + breaker + DB bulkhead"));
    let expectations = dom.split("<table id=\"expectations\">").nth(1).unwrap();
    let expectations = expectations.split("</table>").next().unwrap();
    assert_eq!(expectations.matches("<tr class=\"held\">").count(), 19);
    for chart in ["outage", "latency", "concurrency"] {
        let figure = format!("<figure id=\"chart-{chart}\">");
        let figure = dom
            .split(&figure)
            .nth(1)
            .unwrap_or_else(|| panic!("{chart}"));
        assert!(
            figure.trim_start().starts_with("<svg"),
            "{chart} is inline SVG"
        );
    }
    // Issue 31: no stray caption (the chart's file name) under a chart, and each variant's
    // state changes closed, their count on the line that opens them.
    assert!(!dom.contains("<figcaption"), "a caption under a chart");
    let logs: Vec<&str> = dom.split("<details class=\"log\">").skip(1).collect();
    assert!(!logs.is_empty(), "the state changes are collapsible");
    for log in &logs {
        let log = log.split("</details>").next().unwrap();
        assert!(log.starts_with("<summary>"), "{log}");
        assert!(log.contains(" state change"), "{log}");
        assert!(
            log.contains("<table id=\"log\">"),
            "the log is inside: {log}"
        );
    }
    assert_eq!(
        dom.matches("<table id=\"log\">").count(),
        logs.len(),
        "every log table is in a closed section"
    );
    assert!(!dom.contains("<details class=\"log\" open"));
    // And it draws: a screenshot of the requested size.
    let shot = dir.join("report.png");
    browse(
        &browser,
        &page,
        &[
            "--hide-scrollbars",
            "--window-size=1280,2000",
            &format!("--screenshot={}", shot.display()),
        ],
    );
    let png = std::fs::read(&shot).expect("the browser wrote a screenshot");
    assert_eq!(&png[1..4], b"PNG");
    let dimension = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((dimension(16), dimension(20)), (1280, 2000));
    assert!(png.len() > 50_000, "a page with charts, not a blank one");
}

/// A browser that cannot start is named as the failure, with its exit status and what it
/// wrote, not met later as a page without the element looked for (a stand-in that exits 1
/// after writing a line, as chromium does without its libraries).
/// Measures, in the browser, every chart's text on a page: a script added to a copy of it
/// writes into the DOM each text drawn outside its chart's box (`OUT`), each axis
/// description (turned text) that overlaps another text (`OVER`), and what it looked at.
const TEXT_PROBE: &str = "<script>window.addEventListener('load', () => {
  const found = [];
  let texts = 0;
  const figures = document.querySelectorAll('figure');
  const box = (b, r) => [b.left - r.left, b.top - r.top, b.right - r.left, b.bottom - r.top]
    .map(v => v.toFixed(1)).join(',');
  figures.forEach(figure => {
    const svg = figure.querySelector('svg');
    const r = svg.getBoundingClientRect();
    const all = [...svg.querySelectorAll('text')];
    texts += all.length;
    all.forEach(t => {
      const b = t.getBoundingClientRect();
      if (b.left < r.left - 0.5 || b.right > r.right + 0.5 || b.top < r.top - 0.5
        || b.bottom > r.bottom + 0.5) {
        found.push('OUT ' + figure.id + ': ' + t.textContent.trim() + ' at ' + box(b, r));
      }
      if ((t.getAttribute('transform') || '').includes('rotate')) {
        all.filter(o => o !== t).forEach(o => {
          const c = o.getBoundingClientRect();
          if (c.left < b.right && b.left < c.right && c.top < b.bottom && b.top < c.bottom) {
            found.push('OVER ' + figure.id + ': ' + t.textContent.trim() + ' over '
              + o.textContent.trim());
          }
        });
      }
    });
  });
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = ['PROBED ' + figures.length + ' figures, ' + texts + ' texts', ...found]
    .join(' | ');
  document.body.appendChild(pre);
});</script>";

/// Issue 31: the concurrency chart's y-axis title was reported cut in the HTML page of an
/// 11-variant study. On the page of that study (docs/charts/issue-31/checkout-11.toml), as
/// Chromium lays it out at two widths, no text of any chart lies outside its chart, and no
/// axis description runs into other text.
#[test]
fn no_chart_text_is_cut_or_covered_on_the_page_of_an_eleven_variant_study() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = scratch("html-text-probe");
    let page = dir.join("page.html");
    let output = outagelab(&[
        "run",
        "docs/charts/issue-31/checkout-11.toml",
        "--report",
        page.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("</head>"));
    let probed = dir.join("probed.html");
    let with_probe = html.replacen("</head>", &format!("{TEXT_PROBE}</head>"), 1);
    std::fs::write(&probed, with_probe).unwrap();
    for width in ["1280", "700"] {
        let window = format!("--window-size={width},900");
        let browsed = browse(&browser, &probed, &["--dump-dom", &window]);
        assert_eq!(browsed.console, Vec::<String>::new(), "console messages");
        let probe = (browsed.stdout.split("<pre id=\"probe\">").nth(1))
            .and_then(|rest| rest.split("</pre>").next())
            .expect("the probe ran");
        let mut found = probe.split(" | ");
        let probed = found.next().unwrap();
        assert!(probed.starts_with("PROBED 6 figures, "), "{probed}");
        let found: Vec<&str> = found.collect();
        assert_eq!(found, Vec::<&str>::new(), "at {width} px wide ({probed})");
        assert!(browsed.stdout.contains("<figure id=\"chart-concurrency\">"));
    }
}

#[test]
#[should_panic(expected = "failed: it exited with exit status: 1 and gave no page")]
fn a_browser_that_cannot_start_is_named_as_the_failure() {
    let dir = scratch("html-no-browser");
    let fake = dir.join("chromium");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'error while loading shared libraries: libnss3.so' >&2\nexit 1\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let page = dir.join("page.html");
    std::fs::write(&page, "<p>hi</p>").unwrap();
    browse(&fake, &page, &["--dump-dom"]);
}

#[test]
fn the_console_check_catches_a_page_that_logs_an_error() {
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let dir = scratch("html-console");
    let page = dir.join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>x</title></head><body>\
         <script>console.error(\"planted\"); notDefined();</script></body></html>",
    )
    .unwrap();
    let console = browse(&browser, &page, &["--dump-dom"]).console;
    assert_eq!(console.len(), 2, "{console:?}");
    assert!(console[0].contains("\"planted\""), "{console:?}");
    assert!(
        console[1].contains("notDefined is not defined"),
        "{console:?}"
    );
}

/// `run --seeds 1..30 --report PATH --json PATH` on the seed-003 scenario: the study page and
/// the study's JSON.
fn run_study(dir: &Path, page: &str) -> (PathBuf, serde_json::Value) {
    let page = dir.join(page);
    let json = dir.join(format!(
        "{}.json",
        page.file_stem().unwrap().to_str().unwrap()
    ));
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--seeds",
        "1..30",
        "--report",
        page.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let study = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    (page, study)
}

#[test]
fn a_study_page_renders_with_the_json_s_numbers_and_no_console_message() {
    let dir = scratch("html-study");
    let (page, study) = run_study(&dir, "study.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains(" src=") && !html.contains(" href="),
        "the page loads nothing: no src or href"
    );
    assert!(
        html.contains("outagelab run scenarios/redis-dead-protection.toml --seeds 1..30"),
        "the command that reproduces it"
    );
    let Some(browser) = browser_or_skip() else {
        return;
    };
    let browsed = browse(&browser, &page, &["--dump-dom"]);
    assert_eq!(browsed.console, Vec::<String>::new(), "console messages");
    let dom = browsed.stdout;

    // One row per variant, each chosen metric's mean and paired difference as columns, each
    // with its 95% interval's half-width: every one is the JSON's.
    let rows = table_cells(&dom, "study");
    let header = &rows[0];
    let metrics = ["outcomes.ok", "latency_ms.all.p50"];
    assert_eq!(
        header[..5],
        [
            "variant",
            metrics[0],
            "vs baseline",
            metrics[1],
            "vs baseline"
        ]
        .map(String::from)
    );
    let variants = study["variants"].as_array().unwrap();
    assert_eq!(rows.len(), 1 + variants.len(), "one row per variant");
    let mut checked = 0;
    for (row, entry) in rows[1..].iter().zip(variants) {
        assert_eq!(row[0], entry["name"].as_str().unwrap());
        let value = |v: &serde_json::Value| v.as_f64().unwrap();
        // `4842 ±30.2`: the figure, and half its interval's width.
        let with_interval = |cell: &str, json: &serde_json::Value| {
            let (shown, half) = cell
                .split_once(" ±")
                .unwrap_or_else(|| panic!("{cell} has an interval"));
            assert!(shows(shown, value(&json["mean"])), "{cell} {json}");
            let [low, high] = [0, 1].map(|end| value(&json["ci95"][end]));
            assert!(shows(half, (high - low) / 2.0), "{cell} {json}");
        };
        let metrics: Vec<&String> = header[1..].iter().step_by(2).take(4).collect();
        for (m, metric) in metrics.iter().enumerate() {
            let across = &entry["metrics"][metric.as_str()];
            with_interval(&row[1 + 2 * m], across);
            match across.get("vs_baseline") {
                Some(paired) => with_interval(&row[2 + 2 * m], paired),
                None => assert_eq!(row[2 + 2 * m], "-", "the baseline has no difference"),
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 3 * 4, "three variants by the default four metrics");

    // The expectations over the seeds, each with its verdict and range.
    let expectations = table_cells(&dom, "expectations");
    assert_eq!(expectations.len(), 1 + 19);
    assert!(expectations[1..].iter().all(|row| row[2] == "30/30"));
    assert_eq!(dom.matches("<tr class=\"held\">").count(), 19);
    // What each variant changes, read from the file.
    let changes = table_cells(&dom, "changes");
    assert_eq!(
        changes[1..],
        [
            [
                "timeout + breaker",
                "breakers.redis.enabled",
                "false",
                "true"
            ],
            [
                "timeout + breaker + DB bulkhead",
                "breakers.redis.enabled",
                "false",
                "true"
            ],
            ["", "bulkheads.db.enabled", "false", "true"],
        ]
        .map(|row| row.map(String::from).to_vec())
    );
    // The file's assumptions, the study chart and one draw's charts, as SVG.
    assert!(dom.contains("the breaker counts timeouts, stays open 5 s"));
    for chart in ["study", "outage", "latency", "concurrency"] {
        let figure = dom
            .split(&format!("<figure id=\"chart-{chart}\">"))
            .nth(1)
            .unwrap_or_else(|| panic!("{chart}"));
        assert!(
            figure.trim_start().starts_with("<svg"),
            "{chart} is inline SVG"
        );
    }
    assert!(dom.contains("One draw: seed 1"));
}

#[test]
fn a_study_in_markdown_has_the_same_tables_and_embeds_its_charts() {
    let dir = scratch("markdown-study");
    let (page, study) = run_study(&dir, "study.md");
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(text.starts_with("# redis-dead-protection\n"));
    assert!(!text.contains('<'), "no HTML in the Markdown");
    let ok_mean = study["variants"][2]["metrics"]["outcomes.ok"]["mean"]
        .as_f64()
        .unwrap();
    let row = text
        .lines()
        .find(|line| line.starts_with("| timeout + breaker + DB bulkhead | "))
        .unwrap_or_else(|| panic!("{text}"));
    let cells: Vec<&str> = row.split(" | ").collect();
    let (mean, _) = cells[1].split_once(" ±").unwrap();
    assert!(shows(mean, ok_mean), "{row} {ok_mean}");
    assert!(
        text.contains("| variant | outcomes.ok | vs baseline | latency_ms.all.p50 | vs baseline |"),
        "{text}"
    );
    assert!(
        text.contains("|---|---:|---:|---:|---:|"),
        "numbers right-aligned: {text}"
    );
    assert!(text.contains("![outage](data:image/svg+xml;base64,"));
    // The same study, the same bytes.
    let (again, _) = run_study(&dir, "again.md");
    assert_eq!(text, std::fs::read_to_string(again).unwrap());
}

#[test]
fn shows_reads_a_number_to_its_last_decimal() {
    assert!(shows("151.0", 150.96));
    assert!(!shows("151.0", 150.9));
    assert!(shows("+9.04", 9.0449));
    assert!(shows("4.1e-5", 4.14e-5));
    assert!(!shows("4.1e-5", 4.2e-5));
    assert!(shows("500", 500.4));
    assert!(!shows("held", 1.0));
}

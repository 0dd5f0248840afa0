//! The HTML report as its readers meet it: rendered by a real headless Chromium (Debian's
//! `chromium`; `.ci/run` installs it and sets `OUTAGELAB_REQUIRE_CHROMIUM`, so CI never skips).
//! Without the browser, elsewhere, the rendering test says so loudly and checks only the file.

mod common;

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

/// Runs the browser headless on `page` with `args`, killing it after a minute; returns what
/// it printed on standard output.
fn browse(browser: &Path, page: &Path, args: &[&str]) -> String {
    let dir = page.parent().unwrap().join("profile");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
        ])
        .arg(format!("--user-data-dir={}", dir.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the browser starts");
    // Read as it comes: a page's DOM is larger than a pipe holds.
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).map(|_| text)
    });
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the browser did not finish within a minute");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap().unwrap_or_default()
}

fn report(dir: &Path, name: &str) -> PathBuf {
    let page = dir.join(name);
    let output = outagelab(&[
        "run",
        "scenarios/redis-dead-protection.toml",
        "--html",
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
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("OUTAGELAB_REQUIRE_CHROMIUM").is_none(),
            "OUTAGELAB_REQUIRE_CHROMIUM is set (as .ci/run sets it) and no chromium is on PATH"
        );
        eprintln!(
            "SKIPPED: no chromium on PATH, so the HTML report was not rendered \
             (.ci/run installs Debian's chromium; apt-get install chromium)"
        );
        return;
    };
    let dir = scratch("html-browser");
    let page = report(&dir, "report.html");
    // The DOM as the browser parsed it: the tables are tables, the charts are SVG elements.
    let dom = browse(&browser, &page, &["--dump-dom"]);
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

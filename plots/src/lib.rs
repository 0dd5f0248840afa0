//! Charts of a run report, as PNG and SVG files.
//!
//! [`write_charts`] draws, for every report:
//! - `outage`: failed and successful requests per second over time, the 429 attempts retried
//!   inside requests (when there were any), the requests in flight (stuck or waiting), and
//!   lanes of breaker state when a breaker left the closed state;
//! - `latency`: p99, p95 and p50 latency over time, with the file's objective (`[report] slo`);
//! - `concurrency`: everything that runs or waits at once (requests in flight, database
//!   queries, lock and connection waiters, pending commands, bulkhead permits and queues,
//!   semaphores), with the configured limits;
//! - `latency_cdf`: the share of requests at or under each latency, one line per variant, from
//!   the summary's latency histogram, with the objective;
//!
//! and, when the file has a caller, `calls`: each caller's calls that ended ok and failed per
//! second (the users' view, which the service's outcomes miss when an attempt given up on
//! ends `ok` later); when some control failed open, `fail_open`: requests let through
//! unchecked per second by control; when some variant switched a throttle on, `throttles`: slots held against what the
//! throttle's counter says, and its cap; when some Redis server had a memory limit, `memory`: its
//! used memory; when the variants come from a parameter sweep, `sweep`: the chosen metrics
//! (or, with none chosen, each flow's median latency) against the swept value.
//!
//! Every chart over time shades the fault windows, each labelled with its fault's name, and
//! draws the configured limits as labelled reference lines. While the variants stay apart they
//! share a panel; when there are many, or their lines would hide each other, each variant gets
//! a panel of its own on shared axes (small multiples, `multiples`), and a variant whose lines
//! equal an earlier one's is marked and named "(same as X)"; on one panel, a line that lies
//! mostly under a later one is circled too. An axis turns logarithmic when a
//! limit or a line would be lost next to a much larger one (`axes`). A chart grows taller
//! rather than squeeze its rows, and a legend too long for its column moves under the panels
//! (`layout`).
//!
//! Architecture invariant: this crate reads finished reports and never runs the model. Text is
//! drawn with an embedded copy of DejaVu Sans (`assets/`), so charts render the same on a
//! machine without system fonts, and the same report always gives byte-identical files. PNG
//! text is laid out glyph by glyph in `bitmap_text` (plotters' own bitmap text drops each
//! glyph's side bearing); SVG text is plotters' `<text>` elements.

mod axes;
mod bitmap_text;
mod breakers;
mod calls;
mod cdf;
mod chart;
pub mod compare;
mod concurrency;
mod fail_open;
mod labels;
mod latency;
mod layout;
mod legend;
mod map;
mod memory;
mod multiples;
mod observed;
mod outage;
mod render;
mod study;
mod sweep;
mod throttles;
mod timeline;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use outagelab_report::RunReport;
use outagelab_report::study::Study;

use crate::chart::Chart;

/// Why a chart could not be written, and which file (or directory) it was.
#[derive(Debug)]
pub struct PlotError {
    path: PathBuf,
    reason: String,
}

impl PlotError {
    fn new(path: &Path, reason: impl Into<String>) -> Self {
        PlotError {
            path: path.to_path_buf(),
            reason: reason.into(),
        }
    }

    /// The file or directory that could not be written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot write chart {}: {}",
            self.path.display(),
            self.reason
        )
    }
}

impl std::error::Error for PlotError {}

/// Writes every chart for `report` into `dir` (created if missing), as PNG and SVG; returns the
/// paths written, in a stable order: `outage`, `latency`, `concurrency`, `latency_cdf`, then
/// `calls` when the file has a caller, `fail_open` when some control failed open, `throttles` when some variant switched a
/// throttle on, `memory` when some Redis server had a memory limit, `sweep` for a sweep, and
/// `observed` when the file has `[observed]`, each as `.png` then `.svg`. `metrics` are the run's chosen metrics (`--metric`, else
/// `[report] metrics`): the sweep chart draws them against the swept value, or each flow's
/// median latency when there are none.
pub fn write_charts(
    report: &RunReport,
    metrics: &[String],
    dir: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    write_each(&charts(report, metrics), dir)
}

/// Writes a study's chart (`run --seeds ... --plot DIR`): `study.png` and `study.svg`, one
/// panel per chosen metric (the first four), the mean over the seeds with its 95% interval,
/// one line per variant along a sweep's first axis; nothing when no metric has a value.
pub fn write_study_charts(study: &Study, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let charts: Vec<Chart> = study::chart(study).into_iter().collect();
    write_each(&charts, dir)
}

/// Writes a metastability map (`outagelab map --plot DIR`): `map.png` and `map.svg`, a phase
/// diagram per variant.
pub fn write_map_charts(
    map: &outagelab_report::map::MapReport,
    dir: &Path,
) -> Result<Vec<PathBuf>, PlotError> {
    write_each(&[map::chart(map)], dir)
}

/// A study's chart as an SVG document, for a page that embeds it.
pub fn study_svg(study: &Study) -> Result<Option<String>, String> {
    if !embedded_font_registered() {
        return Err("the embedded DejaVu Sans font could not be loaded".to_owned());
    }
    study::chart(study)
        .map(|chart| render::svg(&chart))
        .transpose()
}

/// Writes each chart as PNG and SVG into `dir` (created if missing); returns the paths, each
/// chart's `.png` then `.svg`.
fn write_each(charts: &[Chart], dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    std::fs::create_dir_all(dir)
        .map_err(|error| PlotError::new(dir, format!("cannot create the directory: {error}")))?;
    if !embedded_font_registered() {
        return Err(PlotError::new(
            dir,
            "the embedded DejaVu Sans font could not be loaded",
        ));
    }
    let mut written = Vec::new();
    for chart in charts {
        // Each chart is drawn beside its name and renamed into place, so an interrupted run
        // leaves no truncated image under the real name.
        let png = dir.join(format!("{}.png", chart.name));
        let partial = outagelab_report::write::partial_path(&png);
        render::write_png(chart, &partial)
            .and_then(|()| std::fs::rename(&partial, &png).map_err(|error| error.to_string()))
            .map_err(|reason| {
                let _ = std::fs::remove_file(&partial);
                PlotError::new(&png, reason)
            })?;
        written.push(png);

        let svg = dir.join(format!("{}.svg", chart.name));
        let document = render::svg(chart).map_err(|reason| PlotError::new(&svg, reason))?;
        outagelab_report::write::replace_file(&svg, document.as_bytes())
            .map_err(|error| PlotError::new(&svg, error.to_string()))?;
        written.push(svg);
    }
    Ok(written)
}

/// Every chart for `report` as an SVG document, named as [`write_charts`] names its files, in
/// the same order: for a report that embeds them (the HTML report).
pub fn svg_charts(
    report: &RunReport,
    metrics: &[String],
) -> Result<Vec<(&'static str, String)>, String> {
    if !embedded_font_registered() {
        return Err("the embedded DejaVu Sans font could not be loaded".to_owned());
    }
    charts(report, metrics)
        .iter()
        .map(|chart| Ok((chart.name, render::svg(chart)?)))
        .collect()
}

fn charts(report: &RunReport, metrics: &[String]) -> Vec<Chart> {
    let mut charts = vec![
        outage::chart(report),
        latency::chart(report),
        concurrency::chart(report),
        cdf::chart(report),
    ];
    charts.extend(calls::chart(report));
    charts.extend(fail_open::chart(report));
    charts.extend(throttles::chart(report));
    charts.extend(memory::chart(report));
    charts.extend(sweep::chart(report, metrics));
    charts.extend(observed::chart(report));
    charts
}

/// DejaVu Sans, Bitstream Vera licence: see `assets/DejaVuSans-LICENSE.txt`.
const FONT_BYTES: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");

/// Registers the embedded font as plotters' `sans-serif` (once per process); false if the
/// font data could not be parsed.
fn embedded_font_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, FONT_BYTES)
            .is_ok()
    })
}

#[cfg(test)]
mod tests;

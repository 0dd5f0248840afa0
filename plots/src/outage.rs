//! The outage curve: how many requests per second failed and succeeded over time, with the
//! fault windows shaded. A request counts in the bucket where it ended, so the curves show
//! when failures were reported to callers; every outcome but `ok` is a failure (a 429 that
//! ended the request, a shed, a timeout). Two things the outcomes miss get lines of their own:
//! 429s retried inside a request (`rejected attempts`, dotted, when there were any), and
//! requests that have not ended, stuck or waiting (a panel of requests in flight). Under them,
//! lanes of breaker state when a breaker left the closed state (`breakers`).
//!
//! While the variants stay apart, failed and successful requests have a panel each with one
//! line per variant; when they would hide each other (see `multiples`), each variant gets a
//! panel of its own with all three rates, and the in-flight panel stays one for all.

use outagelab_report::{CountKey, GaugeKey, Outcome, RunReport, Series};
use plotters::style::RGBColor;

use crate::axes::count_axis;
use crate::chart::{Chart, Dash, Panel, segments};
use crate::multiples::{
    Arrangement, Kind, Part, all_lines, arrange_lines, grid_columns, legend, limit_values,
    multiple_panels, parts, shared_panel,
};
use crate::timeline::{fault_shading, gauge_points, rates, time_axis};

/// The rates of each variant, in this order.
const FAILED: usize = 0;
const SUCCEEDED: usize = 1;
const REJECTED: usize = 2;

pub(crate) fn chart(report: &RunReport) -> Chart {
    let time = time_axis(report);
    let rejected = |series: &Series| {
        series
            .count(&CountKey::RejectedAttempts)
            .map(<[u64]>::to_vec)
    };
    let any_rejected = report.variants.iter().any(|variant| {
        rejected(&variant.series).is_some_and(|counts| counts.iter().any(|&count| count > 0))
    });
    let mut kinds = vec![
        kind("failed requests", Dash::Solid, RGBColor(214, 39, 40)),
        kind("successful requests", Dash::Solid, RGBColor(44, 160, 44)),
    ];
    if any_rejected {
        let label = "rejected attempts (429), retried or not";
        kinds.push(kind(label, Dash::Dotted, RGBColor(255, 127, 14)));
    }
    let parts = parts(report, |variant, part| {
        let series = &variant.series;
        part.push(FAILED, segments(rates(variant, |i| errors_at(series, i))));
        part.push(SUCCEEDED, segments(rates(variant, |i| ok_at(series, i))));
        if let (true, Some(counts)) = (any_rejected, rejected(series)) {
            let at = |i: usize| counts.get(i).copied().unwrap_or(0);
            part.push(REJECTED, segments(rates(variant, at)));
        }
    });
    let y = count_axis("requests/s", &all_lines(&parts, &kinds), &[]);
    // On one panel for all variants, each rate has its own panel: the lines do not add up.
    let arrangement = arrange_lines(&parts, &y, usize::MAX);
    let (mut panels, columns, legend_kinds) = if arrangement.multiples {
        let panels = multiple_panels(report, &parts, &kinds, &arrangement, (&time, &y));
        (panels, grid_columns(parts.len()), kinds)
    } else {
        let (failed, succeeded) = split_failed(&parts);
        let mut failed_kinds = vec![Kind::new("failed requests (solid)", Dash::Solid, 2)];
        if any_rejected {
            let label = "rejected attempts, 429 (dotted)";
            failed_kinds.push(Kind::new(label, Dash::Dotted, 2));
        }
        let succeeded_kinds = [Kind::new("successful requests", Dash::Solid, 2)];
        let panel = |parts: &[Part], kinds: &[Kind], description: &str| {
            let y = count_axis(description, &all_lines(parts, kinds), &limit_values(parts));
            let arrangement = Arrangement::shared(parts, &y);
            shared_panel(report, parts, kinds, &arrangement, (&time, &y))
        };
        let mut succeeded = panel(&succeeded, &succeeded_kinds, "successful requests/s");
        // The faults are named once, on the top panel.
        succeeded
            .bands
            .iter_mut()
            .for_each(|band| band.label = None);
        let panels = vec![
            panel(&failed, &failed_kinds, "failed requests/s"),
            succeeded,
        ];
        let kinds = if any_rejected {
            failed_kinds
        } else {
            Vec::new()
        };
        (panels, 1, kinds)
    };
    let mut in_flight = in_flight(report, &time, arrangement.multiples);
    if !arrangement.multiples {
        let bands = in_flight.iter_mut().flat_map(|panel| &mut panel.bands);
        bands.for_each(|band| band.label = None);
    }
    panels.extend(in_flight);
    let lanes = crate::breakers::lanes(report, &time);
    panels.extend(lanes.panel);
    let faults = fault_shading(report, &time, arrangement.multiples);
    // The in-flight panel has every variant in its colour, on small multiples too.
    let heading = if legend_kinds.is_empty() { "" } else { "Lines" };
    let mut legend = legend(report, &arrangement, true, (heading, &legend_kinds), faults);
    legend.extend(lanes.legend);
    Chart {
        name: "outage",
        title: format!("{}: outage curve", report.scenario),
        panels,
        columns,
        legend,
    }
}

fn kind(label: &str, dash: Dash, color: RGBColor) -> Kind {
    Kind {
        color: Some(color),
        ..Kind::new(label, dash, 2)
    }
}

/// The parts of the failed panel (failed requests, then rejected attempts) and of the
/// successful one, each with its kinds renumbered from 0.
fn split_failed(parts: &[Part]) -> (Vec<Part>, Vec<Part>) {
    let pick = |part: &Part, wanted: &[usize]| Part {
        lines: part
            .lines
            .iter()
            .filter_map(|(kind, line)| {
                let position = wanted.iter().position(|w| w == kind)?;
                Some((position, line.clone()))
            })
            .collect(),
        limits: Vec::new(),
    };
    let failed = parts.iter().map(|p| pick(p, &[FAILED, REJECTED])).collect();
    let succeeded = parts.iter().map(|p| pick(p, &[SUCCEEDED])).collect();
    (failed, succeeded)
}

/// Requests in flight (the most of each bucket): the ones stuck or still waiting, which no
/// outcome counts yet. One panel for all variants, wide under small multiples; variants with
/// the same line are marked.
fn in_flight(report: &RunReport, time: &crate::chart::Axis, wide: bool) -> Option<Panel> {
    let parts = parts(report, |variant, part| {
        if let Some(values) = variant.series.gauge(&GaugeKey::InFlight) {
            part.push(0, segments(gauge_points(variant, values)));
        }
    });
    if parts.iter().all(|part| part.lines.is_empty()) {
        return None;
    }
    let kinds = [Kind::new("requests in flight", Dash::Solid, 2)];
    let description = "in flight (max)";
    let y = count_axis(description, &all_lines(&parts, &kinds), &[]);
    let arrangement = Arrangement::shared(&parts, &y);
    let mut panel = shared_panel(report, &parts, &kinds, &arrangement, (time, &y));
    panel.wide = wide;
    Some(panel)
}

/// Requests that ended with an error in bucket `index`; a column shorter than `start_ms`
/// counts as zero instead of panicking.
fn errors_at(series: &Series, index: usize) -> u64 {
    let errors = series
        .outcomes
        .iter()
        .filter(|(name, _)| name.as_str() != Outcome::Ok.name());
    errors
        .map(|(_, counts)| counts.get(index).copied().unwrap_or(0))
        .sum()
}

fn ok_at(series: &Series, index: usize) -> u64 {
    let counts = series.outcomes.get(Outcome::Ok.name());
    counts
        .and_then(|counts| counts.get(index))
        .copied()
        .unwrap_or(0)
}

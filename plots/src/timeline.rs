//! What the charts over time share: the time axis, rates per second, and the shading of fault
//! windows (each labelled with its fault's name).

use outagelab_report::{FaultWindow, RunReport, Series, VariantReport, Verdict};
use plotters::style::RGBColor;

use crate::axes::format_number;
use crate::chart::{Axis, Band, FAULT_GRAY, Key, LegendEntry, palette};

/// Seconds from 0 to the latest moment any variant reports (its end, its last bucket, a fault
/// edge); `0..1` when there is nothing, e.g. a run that ended at 0 ms.
pub(crate) fn time_axis(report: &RunReport) -> Axis {
    let end_ms = report
        .variants
        .iter()
        .flat_map(|variant| {
            let series = &variant.series;
            let series_end = series
                .start_ms
                .last()
                .map(|start| start + bucket_ms(series));
            let fault_edges = variant
                .faults
                .iter()
                .flat_map(|fault| [Some(fault.start_ms), fault.end_ms]);
            [Some(variant.end_ms), series_end]
                .into_iter()
                .chain(fault_edges)
                .flatten()
        })
        .filter(|ms| ms.is_finite())
        .fold(0.0_f64, f64::max);
    let end_s = if end_ms > 0.0 { end_ms / 1000.0 } else { 1.0 };
    // Anchored to an incident's clock, ticks say the time of day.
    let (description, clock_start_unix_ms) = match &report.observed {
        Some(observed) => (
            format!("time (UTC; the run starts at {})", observed.start_utc),
            Some(observed.start_unix_ms),
        ),
        None => ("time (s)".to_string(), None),
    };
    Axis {
        description,
        range: 0.0..end_s,
        log: false,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms,
        zero_band: None,
    }
}

/// The bucket width, or 0 when the report holds a nonsensical one.
pub(crate) fn bucket_ms(series: &Series) -> f64 {
    if series.bucket_ms.is_finite() && series.bucket_ms > 0.0 {
        series.bucket_ms
    } else {
        0.0
    }
}

/// The middle of each bucket, in seconds: where a bucket's value is plotted.
pub(crate) fn bucket_middles_s(series: &Series) -> impl Iterator<Item = f64> + '_ {
    let half_ms = bucket_ms(series) / 2.0;
    series
        .start_ms
        .iter()
        .map(move |start_ms| (start_ms + half_ms) / 1000.0)
}

/// A gauge's values (each bucket's maximum) at the middle of the part of their bucket the run
/// covered. A bucket that starts where the run ended holds only the last instant's value,
/// which is no bucket's maximum: it is left out, as the rates leave it out, so the line does
/// not drop at its end.
pub(crate) fn gauge_points<'s>(
    variant: &'s VariantReport,
    values: &'s [u64],
) -> impl Iterator<Item = (f64, Option<f64>)> + 's {
    let series = &variant.series;
    covered_ms(series, variant.end_ms)
        .zip(values)
        .map(|((start, end), &value)| {
            (
                (start + end) / 2000.0,
                (end > start).then_some(value as f64),
            )
        })
}

/// The part of each bucket the run covered, in milliseconds: the whole bucket, except the
/// last, which ends with the run (`end_ms`; one that starts there covers nothing).
pub(crate) fn covered_ms(series: &Series, end_ms: f64) -> impl Iterator<Item = (f64, f64)> + '_ {
    let width = bucket_ms(series);
    series.start_ms.iter().map(move |&start| {
        let end = if end_ms.is_finite() {
            (start + width).min(end_ms).max(start)
        } else {
            start + width
        };
        (start, end)
    })
}

/// `count(bucket)` per second of each bucket: its count over the bucket's full width, at the
/// middle of the part of it the run covered. A bucket the run covered only in part is not
/// scaled up to a full bucket: a few requests ending together in its last milliseconds would
/// read as a rate nothing sustained (10 completions in the last 12 ms of a bulkhead capped at
/// 400/s drew 832/s). A run that ended by itself (every request ended, or none could) saw the
/// rest of its last bucket empty, so that bucket's count over the full width is its rate; a
/// run cut off inside a bucket (a horizon, a budget) did not see the rest, so that bucket has
/// no rate, as a bucket that covers no time (one that starts where the run ended) has none.
/// No points at all when the series has no usable bucket width.
pub(crate) fn rates(
    variant: &VariantReport,
    count: impl Fn(usize) -> u64,
) -> Vec<(f64, Option<f64>)> {
    let series = &variant.series;
    let width_ms = bucket_ms(series);
    if width_ms <= 0.0 {
        return Vec::new();
    }
    let ended_by_itself = matches!(variant.verdict, Verdict::Completed | Verdict::Stalled);
    covered_ms(series, variant.end_ms)
        .enumerate()
        .map(|(index, (start, end))| {
            let seen = end >= start + width_ms || (end > start && ended_by_itself);
            let rate = seen.then(|| count(index) as f64 * 1000.0 / width_ms);
            ((start + end) / 2000.0, rate)
        })
        .collect()
}

/// Shaded fault windows and their legend.
pub(crate) struct FaultShading {
    pub bands: Vec<Band>,
    pub legend: Vec<LegendEntry>,
}

const SHARED_OPACITY: f64 = 0.18;

/// The fault windows of all variants on one panel. When every variant had the same windows
/// they are shaded once, in gray, each labelled with its fault's name and named in the legend
/// with its times. Otherwise each variant's windows are shaded lightly in that variant's
/// colour and outlined in it (each fault labelled once), and the legend names the distinct
/// faults. On small multiples (`own_panels`), each panel shades its own variant's windows, and
/// the legend says so.
pub(crate) fn fault_shading(report: &RunReport, time: &Axis, own_panels: bool) -> FaultShading {
    let Some(first) = report.variants.first() else {
        return FaultShading {
            bands: Vec::new(),
            legend: Vec::new(),
        };
    };
    if report
        .variants
        .iter()
        .all(|variant| variant.faults.is_empty())
    {
        return FaultShading {
            bands: Vec::new(),
            legend: Vec::new(),
        };
    }
    let shared = report
        .variants
        .iter()
        .all(|variant| same_windows(&variant.faults, &first.faults));
    if shared {
        let mut legend = vec![LegendEntry::heading("Faults (shaded)")];
        legend.extend(first.faults.iter().map(|fault| LegendEntry {
            key: Key::Band {
                color: FAULT_GRAY,
                opacity: SHARED_OPACITY,
            },
            label: format!(
                "{}, {}",
                describe(fault),
                times(fault, time.clock_start_unix_ms)
            ),
        }));
        let bands = variant_fault_bands(first, time);
        return FaultShading { bands, legend };
    }
    // Overlapping windows of many variants add up: the more variants, the lighter each.
    let with_faults = report
        .variants
        .iter()
        .filter(|variant| !variant.faults.is_empty())
        .count();
    let opacity = (0.3 / with_faults as f64).clamp(0.04, 0.12);
    let mut bands = Vec::new();
    let mut names: Vec<String> = Vec::new();
    let mut labelled: Vec<(String, u64)> = Vec::new();
    for (index, variant) in report.variants.iter().enumerate() {
        for fault in &variant.faults {
            let mut band = band(fault, variant.end_ms, time, palette(index), opacity);
            band.edges = true;
            let label = (fault.name.clone(), fault.start_ms.to_bits());
            if !labelled.contains(&label) {
                labelled.push(label);
                band.label = Some(fault.name.clone());
            }
            bands.push(band);
            let name = describe(fault);
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    let mut legend = vec![LegendEntry::heading(if own_panels {
        "Faults (shaded in each variant's panel)"
    } else {
        "Faults (shaded in each variant's colour)"
    })];
    legend.extend(names.into_iter().map(|label| LegendEntry {
        key: Key::Band {
            color: FAULT_GRAY,
            opacity: SHARED_OPACITY,
        },
        label,
    }));
    FaultShading { bands, legend }
}

/// One variant's fault windows, in gray, each labelled with its fault's name: for a panel of
/// its own. A fault with no end lasts to the end of the axis.
pub(crate) fn variant_fault_bands(variant: &VariantReport, time: &Axis) -> Vec<Band> {
    let axis_end_ms = time.range.end * 1000.0;
    let bands = variant.faults.iter().map(|fault| {
        let mut band = band(fault, axis_end_ms, time, FAULT_GRAY, SHARED_OPACITY);
        band.label = Some(fault.name.clone());
        band
    });
    bands.collect()
}

/// A fault's window in seconds, at least a sliver wide (an instant fault, a client kill).
fn band(fault: &FaultWindow, run_end_ms: f64, time: &Axis, color: RGBColor, opacity: f64) -> Band {
    let min_width_s = (time.range.end - time.range.start) * 0.003;
    let start_s = fault.start_ms / 1000.0;
    let end_s = fault.end_ms.unwrap_or(run_end_ms) / 1000.0;
    let end_s = if end_s.is_finite() {
        end_s.max(start_s + min_width_s)
    } else {
        time.range.end
    };
    Band::full_height(start_s..end_s, color, opacity)
}

fn same_windows(a: &[FaultWindow], b: &[FaultWindow]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            (&a.name, &a.target, &a.kind, a.start_ms, a.end_ms)
                == (&b.name, &b.target, &b.kind, b.start_ms, b.end_ms)
        })
}

fn describe(fault: &FaultWindow) -> String {
    format!("{}: {} on {}", fault.name, fault.kind, fault.target)
}

/// When a fault lasted: seconds from the run's start, or times of day in UTC when the run is
/// on an incident's clock (`clock_start_unix_ms`).
fn times(fault: &FaultWindow, clock_start_unix_ms: Option<i64>) -> String {
    let at = |ms: f64| match clock_start_unix_ms {
        Some(start) => crate::render::time_of_day(start + ms.round() as i64),
        None => format_number(ms / 1000.0),
    };
    let unit = if clock_start_unix_ms.is_some() {
        " UTC"
    } else {
        " s"
    };
    let start = at(fault.start_ms);
    match fault.end_ms {
        // An instant (a client kill): a window of no width.
        Some(end_ms) if end_ms <= fault.start_ms => format!("at {start}{unit}"),
        Some(end_ms) => format!("{start}-{}{unit}", at(end_ms)),
        None => format!("from {start}{unit} to the end"),
    }
}

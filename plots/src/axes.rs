//! The y-axes of charts: linear from zero, or logarithmic where a linear axis would flatten
//! what matters; and the numbers on their ticks.

use crate::chart::{Axis, Line, ZeroBand};

/// A linear axis from zero to a little above the largest value, at least `0..1` so that
/// all-zero data still gets a usable axis.
pub(crate) fn zero_based_axis(
    description: impl Into<String>,
    values: impl IntoIterator<Item = f64>,
) -> Axis {
    let max = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0_f64, f64::max);
    let end = if max > 0.0 { max * 1.08 } else { 1.0 };
    Axis {
        description: description.into(),
        range: 0.0..end,
        log: false,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band: None,
    }
}

/// A latency-style axis: logarithmic when the positive values spread over more than a factor
/// of 50, otherwise linear from zero. On a log axis, values at or below zero (requests
/// refused in 0 ms) are drawn in a zero band of their own below the lowest decade.
pub(crate) fn value_axis(
    description: impl Into<String>,
    values: impl IntoIterator<Item = f64>,
) -> Axis {
    let finite: Vec<f64> = values.into_iter().filter(|v| v.is_finite()).collect();
    let zeros = finite.iter().any(|v| *v <= 0.0);
    let positive: Vec<f64> = finite.into_iter().filter(|v| *v > 0.0).collect();
    let min = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let max = positive.iter().copied().fold(0.0_f64, f64::max);
    if positive.is_empty() || max / min <= 50.0 {
        return zero_based_axis(description, positive);
    }
    // A margin each side keeps the extremes off the frame; the range still spans two decades.
    log_axis(description.into(), min / 1.5..max * 1.5, zeros)
}

/// A log axis over `range`; with `zeros`, a zero band below it, [`ZERO_BAND_SHARE`] of the
/// axis' height, named by its tick (`0 ms`), so that zeros are not drawn on the lowest decade
/// as though they were its values (a comb along the bottom with no 0 mark, issue 31).
fn log_axis(description: String, range: std::ops::Range<f64>, zeros: bool) -> Axis {
    let zero_band = zeros.then(|| ZeroBand {
        top: range.start,
        label: zero_label(&description),
    });
    let start = if zeros {
        let decades = (range.end / range.start).log10();
        let band = decades * ZERO_BAND_SHARE / (1.0 - ZERO_BAND_SHARE);
        range.start / 10f64.powf(band)
    } else {
        range.start
    };
    Axis {
        description,
        range: start..range.end,
        log: true,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band,
    }
}

/// The share of a log axis' height its zero band takes: at 12% its tick `0` touched the lowest
/// decade's on a small multiple about 110 pixels high.
pub(crate) const ZERO_BAND_SHARE: f64 = 0.18;

/// The zero band's tick: `0` and the axis' unit when its description ends with one word in
/// parentheses (`latency (ms)`: `0 ms`), else `0`.
fn zero_label(description: &str) -> String {
    let unit = description
        .strip_suffix(')')
        .and_then(|rest| rest.rsplit_once('('))
        .map(|(_, unit)| unit)
        .filter(|unit| !unit.is_empty() && !unit.contains(' '));
    match unit {
        Some(unit) => format!("0 {unit}"),
        None => "0".to_owned(),
    }
}

/// A tick label: no trailing zeros, three significant digits below 100.
pub(crate) fn format_number(value: f64) -> String {
    let magnitude = value.abs();
    let decimals = if magnitude >= 100.0 || magnitude == 0.0 {
        0
    } else if magnitude >= 10.0 {
        1
    } else if magnitude >= 1.0 {
        2
    } else {
        3
    };
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A count's or a rate's axis, with the reference values (configured limits) drawn on it:
/// linear from zero, unless the peaks of the lines and the reference values span more than
/// two decades (the smallest positive one is under a hundredth of the largest), where a
/// linear axis would leave the small ones within a few pixels of zero (a bulkhead limit of 10
/// next to 98 000 queries); then logarithmic, from a little under the smallest positive value
/// to a little over the largest, zeros drawn in a zero band below it.
pub(crate) fn count_axis(
    description: impl Into<String>,
    lines: &[Line],
    references: &[f64],
) -> Axis {
    let peak = |line: &Line| {
        let values = line.segments.iter().flatten().map(|&(_, y)| y);
        values.filter(|y| y.is_finite()).fold(0.0_f64, f64::max)
    };
    let peaks = lines.iter().map(peak).chain(references.iter().copied());
    let positive_peaks: Vec<f64> = peaks.filter(|v| v.is_finite() && *v > 0.0).collect();
    let smallest_peak = positive_peaks.iter().copied().fold(f64::INFINITY, f64::min);
    let largest = positive_peaks.iter().copied().fold(0.0_f64, f64::max);
    let values = crate::chart::y_values(lines).chain(references.iter().copied());
    if positive_peaks.is_empty() || largest <= smallest_peak * SPAN_LINEAR_MAX {
        return zero_based_axis(description, values);
    }
    let finite: Vec<f64> = values.filter(|v| v.is_finite()).collect();
    let zeros = finite.iter().any(|v| *v <= 0.0);
    let smallest = (finite.into_iter())
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    log_axis(description.into(), smallest / 1.5..largest * 1.5, zeros)
}

/// The most a linear count axis spans from its smallest peak to its largest: two decades.
const SPAN_LINEAR_MAX: f64 = 100.0;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Dash, INK, Stroke};

    #[test]
    fn axes_have_a_range_even_without_data() {
        assert_eq!(zero_based_axis("y", []).range, 0.0..1.0);
        assert_eq!(zero_based_axis("y", [0.0, 0.0]).range, 0.0..1.0);
        assert_eq!(value_axis("y", []).range, 0.0..1.0);
        assert!(!value_axis("y", [2.0, 100.0]).log);
        let log = value_axis("y", [2.0, 5000.0]);
        assert!(log.log);
        assert_eq!(log.range, 2.0 / 1.5..5000.0 * 1.5);
        assert_eq!(log.zero_band, None, "no zero, no zero band");
    }

    /// Requests refused in 0 ms were drawn on a log axis' lowest decade, a comb along the
    /// bottom with no 0 mark (issue 31): a zero gives the axis a band of its own below the
    /// decades, named `0 ms`, where zeros are drawn, and no positive value is.
    #[test]
    fn a_log_axis_with_zeros_has_a_zero_band_below_its_decades() {
        let axis = value_axis("latency (ms)", [0.0, 2.0, 5000.0]);
        assert!(axis.log);
        let band = axis.zero_band.clone().expect("a zero band");
        assert_eq!(band.label, "0 ms");
        assert_eq!(band.top, 2.0 / 1.5, "the decades start where they did");
        assert_eq!(axis.range.end, 5000.0 * 1.5);
        let share = (band.top / axis.range.start).ln() / (axis.range.end / axis.range.start).ln();
        assert!((share - ZERO_BAND_SHARE).abs() < 1e-9, "{share}");
        let zero = axis.zero_at().unwrap();
        assert!(axis.range.start < zero && zero < band.top);
        assert_eq!(crate::labels::clamp(&axis, 0.0), zero);
        assert_eq!(crate::labels::clamp(&axis, 2.0), 2.0);
        assert_eq!(crate::render::tick_label(&axis, zero), "0 ms");
        // A count's axis: the same band, named `0`.
        let queries = line(&[0.0, 40_000.0, 98_000.0]);
        let counts = count_axis("at once (max per bucket)", &[queries], &[10.0]);
        assert_eq!(counts.zero_band.map(|band| band.label), Some("0".into()));
        // A linear axis has its own 0.
        assert_eq!(value_axis("latency (ms)", [0.0, 2.0, 50.0]).zero_band, None);
    }

    #[test]
    fn numbers_are_short() {
        for (value, text) in [
            (0.0, "0"),
            (5.0, "5"),
            (2.5, "2.5"),
            (12.34, "12.3"),
            (0.125, "0.125"),
            (1500.0, "1500"),
            (-0.0001, "0"),
        ] {
            assert_eq!(format_number(value), text, "{value}");
        }
    }

    fn line(values: &[f64]) -> Line {
        let points = values.iter().enumerate().map(|(x, &y)| (x as f64, y));
        let stroke = Stroke {
            color: INK,
            dash: Dash::Solid,
            width: 2,
        };
        Line::new(vec![points.collect()], stroke)
    }

    #[test]
    fn a_count_axis_turns_logarithmic_where_a_line_or_a_limit_would_vanish() {
        let queries = line(&[0.0, 40_000.0, 98_000.0]);
        let in_use = line(&[0.0, 5.0, 9.0]);
        // Alone, each is linear; a bulkhead limit of 10 next to 98k queries is not.
        assert!(!count_axis("y", std::slice::from_ref(&queries), &[]).log);
        assert!(!count_axis("y", std::slice::from_ref(&in_use), &[10.0]).log);
        let both = count_axis("y", std::slice::from_ref(&queries), &[10.0]);
        assert!(both.log);
        assert_eq!(both.range.end, 98_000.0 * 1.5);
        assert_eq!(both.zero_band.map(|band| band.top), Some(10.0 / 1.5));
        let lines = count_axis("y", &[queries, in_use], &[]);
        assert!(lines.log, "a line that peaks at 9 next to one at 98k");
        assert_eq!(
            lines.zero_band.map(|band| band.top),
            Some(5.0 / 1.5),
            "the decades from the smallest value drawn, the zeros below"
        );
        // Single small values inside a tall line do not count: only peaks do.
        let spiky = line(&[1.0, 2000.0, 1.0, 1500.0]);
        assert!(!count_axis("y", &[spiky], &[]).log);
        // A limit above every line is on the axis.
        let linear = count_axis("y", &[line(&[3.0, 7.0])], &[20.0]);
        assert_eq!(linear.range, 0.0..20.0 * 1.08);
        assert_eq!(count_axis("y", &[], &[]).range, 0.0..1.0);
    }
}

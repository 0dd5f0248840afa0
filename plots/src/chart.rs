//! A chart as plain data: stacked panels of lines, shaded bands and markers, plus a legend.
//!
//! The chart modules (`outage`, `latency`, `concurrency`, `sweep`) build these values from a
//! report; `render` draws them. Keeping the two apart keeps the chart modules free of backend
//! types and lets tests check what a chart contains without decoding images.

use std::ops::Range;

use plotters::style::RGBColor;

/// One chart, written as `<name>.png` and `<name>.svg`.
pub(crate) struct Chart {
    pub name: &'static str,
    pub title: String,
    /// Stacked top to bottom, sharing the x-axis; only the last shows the x description.
    pub panels: Vec<Panel>,
    /// Drawn in a column to the right of the panels, so it never covers data.
    pub legend: Vec<LegendEntry>,
}

pub(crate) struct Panel {
    pub x: Axis,
    pub y: Axis,
    /// Drawn first, behind everything else, over the full height of the panel.
    pub bands: Vec<Band>,
    pub lines: Vec<Line>,
    pub markers: Vec<Marker>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Axis {
    /// The axis label, with its unit.
    pub description: String,
    /// Never empty: `start < end`, both finite (and positive on a log axis).
    pub range: Range<f64>,
    pub log: bool,
}

/// A translucent vertical band, for a fault window.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Band {
    pub x: Range<f64>,
    pub color: RGBColor,
    pub opacity: f64,
    /// Outline the start and end with thin lines, to tell overlapping bands apart.
    pub edges: bool,
}

/// A polyline, broken where data is missing: each segment is drawn on its own.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Line {
    pub segments: Vec<Vec<(f64, f64)>>,
    pub stroke: Stroke,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stroke {
    pub color: RGBColor,
    pub dash: Dash,
    pub width: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dash {
    Solid,
    Dashed,
    Dotted,
}

/// A cross at one data point, for example a sweep point where requests timed out.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Marker {
    pub at: (f64, f64),
    pub color: RGBColor,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LegendEntry {
    pub key: Key,
    pub label: String,
}

/// The sample drawn left of a legend label.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Key {
    /// No sample: a section heading or a note.
    Heading,
    Line(Stroke),
    Band {
        color: RGBColor,
        opacity: f64,
    },
    Cross(RGBColor),
}

impl LegendEntry {
    pub fn heading(label: impl Into<String>) -> Self {
        LegendEntry {
            key: Key::Heading,
            label: label.into(),
        }
    }
}

/// Colours by variant (or flow) order: Tableau 10, with its gray replaced by near-black so it
/// stays distinct from the gray fault bands. Index 10 and up wrap around.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(40, 40, 40),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

pub(crate) const INK: RGBColor = RGBColor(30, 30, 30);
pub(crate) const FAULT_GRAY: RGBColor = RGBColor(110, 110, 110);

pub(crate) fn palette(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

/// The stroke of line `line` (a gauge, a control, a server) of variant `variant` on a chart
/// whose colour says the variant and whose line style says the line: past the three dash
/// styles, lines repeat a style with a thinner line.
pub(crate) fn variant_line_stroke(variant: usize, line: usize) -> Stroke {
    const DASHES: [Dash; 3] = [Dash::Solid, Dash::Dashed, Dash::Dotted];
    Stroke {
        color: palette(variant),
        dash: DASHES[line % DASHES.len()],
        width: if line < DASHES.len() { 2 } else { 1 },
    }
}

/// Splits `(x, y)` points into runs of consecutive finite values: a `None` (or NaN) y ends the
/// current segment, so gaps in the data show as gaps in the line rather than as zeros.
pub(crate) fn segments(
    points: impl IntoIterator<Item = (f64, Option<f64>)>,
) -> Vec<Vec<(f64, f64)>> {
    let mut all = Vec::new();
    let mut current = Vec::new();
    for (x, y) in points {
        match y {
            Some(y) if x.is_finite() && y.is_finite() => current.push((x, y)),
            _ => {
                if !current.is_empty() {
                    all.push(std::mem::take(&mut current));
                }
            }
        }
    }
    if !current.is_empty() {
        all.push(current);
    }
    all
}

/// Every y value of `lines`, for sizing an axis.
pub(crate) fn y_values(lines: &[Line]) -> impl Iterator<Item = f64> + '_ {
    lines
        .iter()
        .flat_map(|line| line.segments.iter().flatten().map(|&(_, y)| y))
}

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
    }
}

/// A latency-style axis: logarithmic when the positive values spread over more than a factor
/// of 50, otherwise linear from zero. On a log axis, values at or below zero are drawn at the
/// bottom edge.
pub(crate) fn value_axis(
    description: impl Into<String>,
    values: impl IntoIterator<Item = f64>,
) -> Axis {
    let positive: Vec<f64> = values
        .into_iter()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let min = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let max = positive.iter().copied().fold(0.0_f64, f64::max);
    if positive.is_empty() || max / min <= 50.0 {
        return zero_based_axis(description, positive);
    }
    // A margin each side keeps the extremes off the frame; the range still spans two decades.
    Axis {
        description: description.into(),
        range: min / 1.5..max * 1.5,
        log: true,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_break_at_missing_values() {
        let points = [
            (0.0, Some(1.0)),
            (1.0, None),
            (2.0, Some(3.0)),
            (3.0, Some(f64::NAN)),
            (4.0, Some(5.0)),
        ];
        assert_eq!(
            segments(points),
            vec![vec![(0.0, 1.0)], vec![(2.0, 3.0)], vec![(4.0, 5.0)]]
        );
        assert!(segments([(0.0, None)]).is_empty());
    }

    #[test]
    fn axes_have_a_range_even_without_data() {
        assert_eq!(zero_based_axis("y", []).range, 0.0..1.0);
        assert_eq!(zero_based_axis("y", [0.0, 0.0]).range, 0.0..1.0);
        assert_eq!(value_axis("y", []).range, 0.0..1.0);
        assert!(!value_axis("y", [2.0, 100.0]).log);
        let log = value_axis("y", [0.0, 2.0, 5000.0]);
        assert!(log.log);
        assert_eq!(log.range, 2.0 / 1.5..5000.0 * 1.5);
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
}

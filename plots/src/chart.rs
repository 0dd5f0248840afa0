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
    /// Laid out left to right in rows of `columns` (sharing the x-axis and the y-axis: small
    /// multiples), top to bottom; a `wide` panel takes a row of its own. Only the bottom row
    /// shows the x description, only the first column the y description.
    pub panels: Vec<Panel>,
    /// At least 1: 1 stacks the panels.
    pub columns: usize,
    /// Drawn in a column to the right of the panels, so it never covers data, or below them
    /// in columns when it does not fit there.
    pub legend: Vec<LegendEntry>,
}

impl Chart {
    /// A chart of panels stacked top to bottom.
    pub fn stacked(
        name: &'static str,
        title: String,
        panels: Vec<Panel>,
        legend: Vec<LegendEntry>,
    ) -> Chart {
        Chart {
            name,
            title,
            panels,
            columns: 1,
            legend,
        }
    }
}

pub(crate) struct Panel {
    /// Written above the panel: the variant a small multiple shows.
    pub title: Option<String>,
    pub x: Axis,
    pub y: Axis,
    /// Whether the y-axis has numbered ticks (lanes of states have none).
    pub y_ticks: bool,
    /// Drawn first, behind everything else.
    pub bands: Vec<Band>,
    pub lines: Vec<Line>,
    pub markers: Vec<Marker>,
    /// Reference lines across the panel, each labelled: a configured limit, an objective.
    pub rules: Vec<Rule>,
    /// Text at a point of the panel: the name of a lane.
    pub notes: Vec<Note>,
    /// A row of its own, full width, under the panels before it.
    pub wide: bool,
    /// A fixed height in pixels; `None` shares the height left with the other rows.
    pub height_px: Option<u32>,
}

impl Panel {
    /// An empty panel on these axes, in a row with others.
    pub fn new(x: Axis, y: Axis) -> Panel {
        Panel {
            title: None,
            x,
            y,
            y_ticks: true,
            bands: Vec::new(),
            lines: Vec::new(),
            markers: Vec::new(),
            rules: Vec::new(),
            notes: Vec::new(),
            wide: false,
            height_px: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Axis {
    /// The axis label, with its unit.
    pub description: String,
    /// Never empty: `start < end`, both finite (and positive on a log axis).
    pub range: Range<f64>,
    pub log: bool,
    /// The values are whole numbers that name things (variants numbered as in the legend):
    /// ticks only at whole numbers, and no lines between them. Linear only.
    pub categories: bool,
    /// With `categories`: the name of each whole number from 0, its tick's label (a sweep over
    /// words: value `k` of the list sits at `k`). Empty: the numbers themselves are the labels.
    pub category_names: Vec<String>,
    /// The instant (ms since the Unix epoch) a time axis's 0 stands for, when the run is
    /// anchored to an incident's clock (`[observed]`): ticks are then labelled with the time of
    /// day in UTC. `None`: seconds from the run's start.
    pub clock_start_unix_ms: Option<i64>,
    /// On a log axis whose values include zeros (requests refused in 0 ms): the strip at its
    /// bottom, below the lowest decade, where they are drawn and which its tick names ("0 ms").
    /// `None`: no zeros, or a linear axis (which has its own 0).
    pub zero_band: Option<ZeroBand>,
}

impl Axis {
    /// Where values at or below zero are drawn: the middle of the zero band.
    pub fn zero_at(&self) -> Option<f64> {
        let band = self.zero_band.as_ref()?;
        Some((self.range.start * band.top).sqrt())
    }
}

/// The strip of a log axis where its zeros are drawn: from the axis' start up to `top`, where
/// the decades begin; no value above zero is drawn in it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ZeroBand {
    pub top: f64,
    /// The tick label at its middle: `0 ms`, or `0` for a count.
    pub label: String,
}

/// A translucent band: over the full height of the panel (a fault window), or over part of
/// it (a lane of states).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Band {
    pub x: Range<f64>,
    /// `None`: the full height.
    pub y: Option<Range<f64>>,
    pub color: RGBColor,
    pub opacity: f64,
    /// Outline the start and end with thin lines, to tell overlapping bands apart.
    pub edges: bool,
    /// Written inside the band at its top left (turned along its edge when the band is
    /// narrower than the text).
    pub label: Option<String>,
}

impl Band {
    /// A band over the full height, without edges or label.
    pub fn full_height(x: Range<f64>, color: RGBColor, opacity: f64) -> Band {
        Band {
            x,
            y: None,
            color,
            opacity,
            edges: false,
            label: None,
        }
    }
}

/// A polyline, broken where data is missing: each segment is drawn on its own.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Line {
    pub segments: Vec<Vec<(f64, f64)>>,
    pub stroke: Stroke,
    /// Circles along the line: it is the same as a line drawn before it, which it would
    /// otherwise hide exactly.
    pub marks: bool,
}

impl Line {
    pub fn new(segments: Vec<Vec<(f64, f64)>>, stroke: Stroke) -> Line {
        Line {
            segments,
            stroke,
            marks: false,
        }
    }
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
    /// Long dashes with short gaps: the fourth style, so that 40 variants stay apart at the
    /// full width before any repeats thinner.
    Long,
}

impl Dash {
    /// Pixels drawn and skipped in turn; `None` for a solid line. The one place a style's
    /// pattern is written: lines, reference lines and legend samples all draw it from here.
    pub(crate) fn pattern(self) -> Option<(u32, u32)> {
        match self {
            Dash::Solid => None,
            Dash::Dashed => Some((9, 6)),
            Dash::Dotted => Some((2, 5)),
            Dash::Long => Some((18, 4)),
        }
    }
}

/// A mark at one data point: a cross (a sweep point where requests timed out), or a ring
/// (a study's point that breaks a constraint).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Marker {
    pub at: (f64, f64),
    pub color: RGBColor,
    pub shape: MarkerShape,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MarkerShape {
    Cross,
    /// A hollow circle.
    Ring,
}

impl Marker {
    pub fn cross(at: (f64, f64), color: RGBColor) -> Marker {
        Marker {
            at,
            color,
            shape: MarkerShape::Cross,
        }
    }

    pub fn ring(at: (f64, f64), color: RGBColor) -> Marker {
        Marker {
            at,
            color,
            shape: MarkerShape::Ring,
        }
    }
}

/// A straight reference line across a panel, with its label at the end.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Rule {
    /// Where it crosses its axis: y for a horizontal rule, x for a vertical one.
    pub at: f64,
    pub vertical: bool,
    pub stroke: Stroke,
    /// Written beside the line: above its right end, or right of its top.
    pub label: String,
    /// The legend names it too (an objective): where no place beside the line is clear of
    /// the data, its label is left out of the panel rather than written over the data.
    pub in_legend: bool,
}

/// Text anchored at its left middle to a point of a panel.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Note {
    pub at: (f64, f64),
    pub text: String,
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
    /// A line with circles on it: a series the same as one before it.
    Marked(Stroke),
    Band {
        color: RGBColor,
        opacity: f64,
    },
    Cross(RGBColor),
    /// A hollow circle, as [`MarkerShape::Ring`] draws it.
    Ring(RGBColor),
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
/// stays distinct from the gray fault bands, then six more, so that up to 16 variants each have
/// their own (issue 31: they repeated past 10). The six were picked each as far as can be from
/// those before it among colours dark enough to show on white (luma under 170): every pair is
/// at least 76 apart in RGB, as close as the nearest two of Tableau's own. Index 16 and up wrap
/// around: where more than 16 things share a panel, [`variant_stroke`] tells them apart by
/// dash too.
const PALETTE: [RGBColor; 16] = [
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
    RGBColor(0, 0, 255),
    RGBColor(255, 0, 255),
    RGBColor(90, 0, 150),
    RGBColor(0, 255, 105),
    RGBColor(135, 0, 255),
    RGBColor(210, 0, 150),
];

pub(crate) const INK: RGBColor = RGBColor(30, 30, 30);
pub(crate) const FAULT_GRAY: RGBColor = RGBColor(110, 110, 110);

pub(crate) fn palette(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

const DASHES: [Dash; 4] = [Dash::Solid, Dash::Dashed, Dash::Dotted, Dash::Long];

/// The stroke of the one line of thing `index` (a variant, a flow) where each has one line:
/// the sixteen colours solid, then dashed, then dotted, then in long dashes, so 64 stay
/// distinct; past them, the same again in thinner lines (128 in all).
pub(crate) fn variant_stroke(index: usize) -> Stroke {
    let style = index / PALETTE.len();
    Stroke {
        color: palette(index),
        dash: DASHES[style % DASHES.len()],
        width: if style < DASHES.len() { 2 } else { 1 },
    }
}

/// The stroke of line `line` (a gauge, a control, a server) of variant `variant` on a chart
/// whose colour says the variant and whose line style says the line: past the four dash
/// styles, lines repeat a style with a thinner line.
pub(crate) fn variant_line_stroke(variant: usize, line: usize) -> Stroke {
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
}

//! Where a panel's labels go, in pixels: the reference lines' labels, the fault bands' names
//! and the lane names, placed so that no label is written over another (the SLO's label lay
//! on the fault's name). Each label has a preferred place and a few others; the first place
//! that is inside the plotting area and clear of the labels placed before it is taken.
//! Reference lines are placed first (their labels belong at their line), then bands, then
//! notes. Notes (lane names) sit on coloured spans, so they are written on a light box.

use plotters::style::RGBColor;

use crate::chart::{Axis, Panel};
use crate::layout::text_width;

pub(crate) const LABEL_SIZE: f64 = 13.0;
/// The height of a line of label text, in pixels.
const LINE_HEIGHT: i32 = 16;
const BAND_LABEL_COLOR: RGBColor = RGBColor(70, 70, 70);

/// A rectangle in pixels: `x`, `y` its top left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Box {
    pub x: i32,
    pub y: i32,
    pub width: i32,
    pub height: i32,
}

impl Box {
    pub fn overlaps(&self, other: &Box) -> bool {
        self.x < other.x + other.width
            && other.x < self.x + self.width
            && self.y < other.y + other.height
            && other.y < self.y + self.height
    }

    fn inside(&self, area: &Box) -> bool {
        self.x >= area.x
            && self.y >= area.y
            && self.x + self.width <= area.x + area.width
            && self.y + self.height <= area.y + area.height
    }
}

/// A label where it is written: its text's top left corner is the box's.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Placed {
    pub text: String,
    pub at: Box,
    pub color: RGBColor,
    /// Written on a light box (a lane name over a coloured span).
    pub backed: bool,
}

/// Every label of `panel`, placed: `pixel` maps a point of the panel to pixels, `area` is the
/// plotting area in the same pixels.
pub(crate) fn place(
    panel: &Panel,
    pixel: impl Fn(f64, f64) -> (i32, i32),
    area: Box,
) -> Vec<Placed> {
    let (x, y) = (&panel.x.range, &panel.y.range);
    let data = Data::of(panel, &pixel);
    let mut placed: Vec<Placed> = Vec::new();
    let mut put = |text: &str, color: RGBColor, backed: bool, candidates: Vec<Box>, optional| {
        let free = |candidate: &&Box| placed.iter().all(|other| !other.at.overlaps(candidate));
        let Some(first) = candidates.first().copied() else {
            return;
        };
        // Clear of labels and data, and inside; else clear of labels and inside; else clear
        // (a label too long for the panel); else where it belongs. An optional label (the
        // legend names it) is written only clear of labels and data, and inside.
        let inside = || candidates.iter().filter(|c| c.inside(&area));
        let clear = inside()
            .filter(|candidate| !data.crosses(candidate))
            .find(free);
        if optional && clear.is_none() {
            return;
        }
        let at = *clear
            .or_else(|| inside().find(free))
            .or_else(|| candidates.iter().find(free))
            .unwrap_or(&first);
        placed.push(Placed {
            text: text.to_owned(),
            at,
            color,
            backed,
        });
    };
    for rule in &panel.rules {
        // Cut to the panel's width (less the 4 px it keeps from each side): a label longer
        // than a small multiple ran into the next panel and the legend (issue 31).
        let room = u32::try_from(area.width - 8).unwrap_or(0);
        let label = crate::render::cut_to(&rule.label, LABEL_SIZE, room);
        let width = text_width(&label, LABEL_SIZE) as i32;
        let sized = |x: i32, y: i32| Box {
            x,
            y,
            width,
            height: LINE_HEIGHT,
        };
        let candidates = if rule.vertical {
            if !x.contains(&rule.at) {
                continue;
            }
            // Right of the line in the left half of the panel, left of it in the right half;
            // then lower down.
            let (at, top) = pixel(rule.at, y.end);
            let left_half = at * 2 <= area.x * 2 + area.width;
            let x = if left_half { at + 4 } else { at - 4 - width };
            (0..6)
                .map(|step| sized(x, top + 4 + step * LINE_HEIGHT))
                .collect()
        } else {
            if !y.contains(&rule.at) {
                continue;
            }
            // Above the line at its right end, below it, then the same further left, to its
            // left end: the SLO's label lay on the data where a line crossed its right end
            // (issue 31).
            let (right, at) = pixel(x.end, rule.at);
            let (left, _) = pixel(x.start, rule.at);
            let (last, first) = (right - 4 - width, left + 4);
            let lefts = (0..=RULE_LABEL_STEPS).map(|step| {
                let travel = (last - first).max(0);
                last - travel * step / RULE_LABEL_STEPS
            });
            lefts
                .flat_map(|x| [sized(x, at - 3 - LINE_HEIGHT), sized(x, at + 3)])
                .collect()
        };
        put(&label, rule.stroke.color, false, candidates, rule.in_legend);
    }
    for band in &panel.bands {
        let Some(label) = &band.label else {
            continue;
        };
        let start = band.x.start.max(x.start);
        if start >= x.end {
            continue;
        }
        let end = band.x.end.clamp(start, x.end);
        let top = band.y.as_ref().map_or(y.end, |rows| rows.end);
        let (left, top) = pixel(start, top);
        let (right, _) = pixel(end, y.end);
        let width = text_width(label, LABEL_SIZE) as i32;
        // Inside the band at its top left; beside it when it is narrower than the text
        // (an instant fault): right of it, or left where there is no room.
        let x = if width + 6 <= right - left {
            left + 3
        } else if right + width + 6 <= area.x + area.width {
            right + 3
        } else {
            left - 3 - width
        };
        // Lower down, one line at a time, where another label is in the way.
        let candidates = (0..6).map(|step| Box {
            x,
            y: top + 3 + step * LINE_HEIGHT,
            width,
            height: LINE_HEIGHT,
        });
        put(label, BAND_LABEL_COLOR, false, candidates.collect(), false);
    }
    for note in &panel.notes {
        let (at_x, at_y) = pixel(note.at.0, clamp(&panel.y, note.at.1));
        let width = text_width(&note.text, LABEL_SIZE) as i32 + 4;
        let at = Box {
            x: at_x,
            y: at_y - LINE_HEIGHT / 2,
            width,
            height: LINE_HEIGHT,
        };
        put(&note.text, crate::chart::INK, true, vec![at], false);
    }
    placed
}

/// Where a horizontal rule's label is tried: at its right end, then this many steps to its
/// left end.
const RULE_LABEL_STEPS: i32 = 8;

/// A panel's data in pixels, for labels to keep clear of: its lines' segments and its
/// markers' squares.
struct Data {
    /// Each from one point to the next, in pixels.
    segments: Vec<((f64, f64), (f64, f64))>,
    markers: Vec<Box>,
}

/// Half the side of the square a marker covers, in pixels (crosses are 7 from their centre).
const MARKER_REACH: i32 = 8;
/// How far a label keeps from a line's centre, in pixels (a line is up to 3 wide).
const LINE_REACH: i32 = 2;

impl Data {
    fn of(panel: &Panel, pixel: &impl Fn(f64, f64) -> (i32, i32)) -> Data {
        let at = |(x, y): (f64, f64)| {
            let (x, y) = pixel(x, clamp(&panel.y, y));
            (f64::from(x), f64::from(y))
        };
        let segments = (panel.lines.iter())
            .flat_map(|line| line.segments.iter())
            .flat_map(|points| points.windows(2).map(|pair| (at(pair[0]), at(pair[1]))))
            .collect();
        let markers = (panel.markers.iter())
            .map(|marker| {
                let (x, y) = at(marker.at);
                Box {
                    x: x as i32 - MARKER_REACH,
                    y: y as i32 - MARKER_REACH,
                    width: 2 * MARKER_REACH,
                    height: 2 * MARKER_REACH,
                }
            })
            .collect();
        Data { segments, markers }
    }

    /// Whether a label at `label` would be written over a line or a marker.
    fn crosses(&self, label: &Box) -> bool {
        let reach = Box {
            x: label.x - LINE_REACH,
            y: label.y - LINE_REACH,
            width: label.width + 2 * LINE_REACH,
            height: label.height + 2 * LINE_REACH,
        };
        self.markers.iter().any(|marker| marker.overlaps(label))
            || (self.segments.iter()).any(|&(from, to)| segment_meets(from, to, &reach))
    }
}

/// Whether the segment from `from` to `to` meets the rectangle `area` (Liang-Barsky clipping:
/// the part of the segment within each pair of edges, intersected, is not empty).
fn segment_meets(from: (f64, f64), to: (f64, f64), area: &Box) -> bool {
    let (left, top) = (f64::from(area.x), f64::from(area.y));
    let (right, bottom) = (left + f64::from(area.width), top + f64::from(area.height));
    let (dx, dy) = (to.0 - from.0, to.1 - from.1);
    let (mut enter, mut leave) = (0.0_f64, 1.0_f64);
    for (p, q) in [
        (-dx, from.0 - left),
        (dx, right - from.0),
        (-dy, from.1 - top),
        (dy, bottom - from.1),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                enter = enter.max(t);
            } else {
                leave = leave.min(t);
            }
        }
    }
    enter <= leave
}

/// On a log axis, values at or below zero are drawn in its zero band, when it has one, and
/// values under its start on its start.
pub(crate) fn clamp(axis: &Axis, value: f64) -> f64 {
    if !axis.log {
        return value;
    }
    match axis.zero_at() {
        Some(zero) if value <= 0.0 => zero,
        _ => value.max(axis.range.start),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Band, Dash, FAULT_GRAY, INK, Note, Rule, Stroke};

    fn axis(range: std::ops::Range<f64>) -> Axis {
        Axis {
            description: String::new(),
            range,
            log: false,
            categories: false,
            category_names: Vec::new(),
            clock_start_unix_ms: None,
            zero_band: None,
        }
    }

    fn rule(at: f64, label: &str) -> Rule {
        Rule {
            at,
            vertical: false,
            stroke: Stroke {
                color: INK,
                dash: Dash::Dashed,
                width: 1,
            },
            label: label.to_owned(),
            in_legend: false,
        }
    }

    /// A small multiple of a 21-variant sweep: 170 by 60 pixels, its SLO near the top, a
    /// fault from the start with a long name, a second limit just under the SLO, and a lane.
    fn crowded() -> (Panel, Box) {
        let mut panel = Panel::new(axis(0.0..1.2), axis(0.0..420.0));
        panel.bands.push(Band {
            label: Some("redis-dead-at-peak".to_owned()),
            ..Band::full_height(0.0..1.2, FAULT_GRAY, 0.18)
        });
        panel.rules.push(rule(350.0, "SLO p99 ≤ 350 ms"));
        panel.rules.push(rule(330.0, "db: max 330"));
        panel.notes.push(Note {
            at: (0.0, 100.0),
            text: "timeout + breaker".to_owned(),
        });
        let area = Box {
            x: 100,
            y: 40,
            width: 170,
            height: 90,
        };
        (panel, area)
    }

    fn pixel(panel: &Panel, area: Box) -> impl Fn(f64, f64) -> (i32, i32) + '_ {
        move |x, y| {
            let (xs, ys) = (&panel.x.range, &panel.y.range);
            let across = (x - xs.start) / (xs.end - xs.start) * f64::from(area.width);
            let up = (y - ys.start) / (ys.end - ys.start) * f64::from(area.height);
            (
                area.x + across.round() as i32,
                area.y + area.height - up.round() as i32,
            )
        }
    }

    /// The SLO's label was written over the fault's name in every small multiple of a sweep
    /// whose objective lay near the top of the panels.
    #[test]
    fn labels_do_not_overlap_each_other() {
        let (panel, area) = crowded();
        let placed = place(&panel, pixel(&panel, area), area);
        assert_eq!(placed.len(), 4, "{placed:?}");
        for (index, label) in placed.iter().enumerate() {
            for other in &placed[index + 1..] {
                assert!(
                    !label.at.overlaps(&other.at),
                    "{:?} over {:?}",
                    label.text,
                    other.text
                );
            }
        }
        // The SLO's label stays at its line's right end, above or below it, in the panel.
        let slo = &placed[0];
        let (right, at) = pixel(&panel, area)(1.2, 350.0);
        assert_eq!(slo.at.x + slo.at.width, right - 4);
        assert!(
            slo.at.y + slo.at.height == at - 3 || slo.at.y == at + 3,
            "{slo:?}"
        );
        assert!(
            placed.iter().all(|label| label.at.inside(&area)),
            "{placed:?}"
        );
        // A lane's name is written on a light box, over its coloured span.
        assert!(placed[3].backed);
    }

    /// Issue 31: in the small multiples of an 11-variant study, "database pg: capacity 20 ·
    /// database pg: max_connections 20" ran out of its panel into the next one and the
    /// legend. A label longer than its panel is cut to fit, with an ellipsis, inside it.
    #[test]
    fn a_reference_label_longer_than_its_panel_is_cut_inside_it() {
        let mut panel = Panel::new(axis(0.0..60.0), axis(0.0..100.0));
        let long = "database pg: capacity 20 · database pg: max_connections 20";
        panel.rules.push(rule(20.0, long));
        let area = Box {
            x: 100,
            y: 40,
            width: 170,
            height: 90,
        };
        let placed = place(&panel, pixel(&panel, area), area);
        assert_eq!(placed.len(), 1);
        let label = &placed[0];
        assert!(label.at.inside(&area), "{label:?}");
        assert!(
            label.text.starts_with("database pg: capacity 20"),
            "{label:?}"
        );
        assert!(label.text.ends_with('…'), "{label:?}");
        // One that fits is left whole.
        panel.rules[0].label = "db: max 20".to_owned();
        assert_eq!(
            place(&panel, pixel(&panel, area), area)[0].text,
            "db: max 20"
        );
    }

    /// A constraint's label lay on a data line in the study chart (tutorial-study.png): the
    /// line rose through the label's first place, above its threshold at the right end. It
    /// moves to a candidate clear of the line and of the markers.
    #[test]
    fn a_label_moves_off_a_data_line_to_a_free_candidate() {
        let mut panel = Panel::new(axis(0.0..10.0), axis(0.0..600.0));
        panel.rules.push(rule(300.0, "constraint: timeouts <= 300"));
        let area = Box {
            x: 100,
            y: 40,
            width: 700,
            height: 200,
        };
        let first = |panel: &Panel| place(panel, pixel(panel, area), area)[0].at;
        let (right, at) = pixel(&panel, area)(10.0, 300.0);
        let above_right = first(&panel);
        assert_eq!(
            (
                above_right.x + above_right.width,
                above_right.y + above_right.height
            ),
            (right - 4, at - 3),
            "with no data, the label keeps its first place"
        );
        // A line rising steeply through that place, then crossing below it as well.
        panel.lines.push(crate::chart::Line::new(
            vec![vec![(6.0, 100.0), (9.0, 550.0), (9.5, 50.0)]],
            rule(0.0, "").stroke,
        ));
        let clear = |panel: &Panel, at: &Box| !Data::of(panel, &pixel(panel, area)).crosses(at);
        let moved = first(&panel);
        assert_eq!(
            moved.y + moved.height,
            at - 3,
            "still above the line: {moved:?}"
        );
        assert!(
            moved.x < above_right.x && clear(&panel, &moved),
            "{moved:?}"
        );
        // A marker on that place too: the next free one.
        let (marker_x, _) = pixel(&panel, area)(0.0, 0.0);
        let marker_at = (moved.x + moved.width / 2 - marker_x) as f64 / 70.0;
        panel.markers.push(crate::chart::Marker {
            at: (marker_at, 320.0),
            color: INK,
            shape: crate::chart::MarkerShape::Cross,
        });
        let before = moved;
        let moved = first(&panel);
        assert!(moved != before && clear(&panel, &moved), "{moved:?}");
        // Same input, same place.
        assert_eq!(first(&panel), moved);
        // Nowhere free of data: the first place clear of other labels, as before.
        panel.lines.push(crate::chart::Line::new(
            vec![
                vec![(0.0, 312.0), (10.0, 312.0)],
                vec![(0.0, 288.0), (10.0, 288.0)],
            ],
            rule(0.0, "").stroke,
        ));
        assert_eq!(first(&panel), above_right);
    }

    /// Issue 31: the SLO's label sat on the data of a log-scale latency chart, a p99 crossing
    /// its line at the right end. An objective (named in the legend too) takes a place along
    /// its line clear of the data, and is left out of the panel where there is none, rather
    /// than written over the data.
    #[test]
    fn an_objective_label_never_sits_on_data() {
        let mut panel = Panel::new(axis(0.0..60.0), axis(0.0..1000.0));
        let mut slo = rule(300.0, "SLO p99 ≤ 300 ms");
        slo.in_legend = true;
        panel.rules.push(slo);
        let area = Box {
            x: 100,
            y: 40,
            width: 400,
            height: 90,
        };
        // A p99 that spikes through the line every 4 s from 20 s to the end (through its
        // first places, at the right end), and stays low before.
        let mut points = vec![(0.0, 15.0), (19.5, 15.0)];
        for spike in 0..10 {
            let at = 20.0 + 4.0 * f64::from(spike);
            points.extend([(at, 15.0), (at + 0.5, 900.0), (at + 1.0, 15.0)]);
        }
        panel
            .lines
            .push(crate::chart::Line::new(vec![points], rule(0.0, "").stroke));
        let data = |panel: &Panel| Data::of(panel, &pixel(panel, area));
        let placed = place(&panel, pixel(&panel, area), area);
        assert_eq!(placed.len(), 1, "a place clear of the spikes: {placed:?}");
        let label = &placed[0];
        assert!(label.at.inside(&area), "{label:?}");
        assert!(!data(&panel).crosses(&label.at), "on the data: {label:?}");
        // Spikes across the whole panel: nowhere clear, so no label in the panel.
        let (xs, mut all) = (0..60, Vec::new());
        for second in xs {
            let at = f64::from(second);
            all.extend([(at, 15.0), (at + 0.5, 900.0)]);
        }
        panel.lines[0].segments = vec![all];
        let placed = place(&panel, pixel(&panel, area), area);
        assert!(placed.is_empty(), "written over the data: {placed:?}");
        // A limit the legend does not name keeps its label, as close to its place as it can.
        panel.rules[0].in_legend = false;
        assert_eq!(place(&panel, pixel(&panel, area), area).len(), 1);
    }
}

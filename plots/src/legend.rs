//! Draws the legend where [`layout`](crate::layout) placed its entries: headings, then one
//! key sample and a wrapped label per entry.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::chart::{Key, LegendEntry, Stroke};
use crate::layout::{
    KEY_LEFT, KEY_WIDTH, LABEL_LEFT, LEGEND_LINE_HEIGHT, LEGEND_TEXT_SIZE, PlacedEntry,
};
use crate::render::{shape, text};

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

pub(crate) fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
    placed: &[PlacedEntry],
) -> DrawResult<DB> {
    let label_style = text(LEGEND_TEXT_SIZE).pos(Pos::new(HPos::Left, VPos::Center));
    let heading_style = text(LEGEND_TEXT_SIZE)
        .color(&RGBColor(90, 90, 90))
        .pos(Pos::new(HPos::Left, VPos::Center));
    let half_line = LEGEND_LINE_HEIGHT as i32 / 2;
    for entry in placed {
        let key = &entries[entry.index].key;
        let (left, top) = entry.at;
        let (label_left, style) = match key {
            Key::Heading => (KEY_LEFT, &heading_style),
            _ => (LABEL_LEFT, &label_style),
        };
        draw_key(root, key, left, top + half_line)?;
        for (index, line) in entry.lines.iter().enumerate() {
            let y = top + index as i32 * LEGEND_LINE_HEIGHT as i32 + half_line;
            root.draw_text(line, style, (left + label_left, y))?;
        }
    }
    Ok(())
}

fn draw_key<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    key: &Key,
    column_left: i32,
    middle: i32,
) -> DrawResult<DB> {
    let (left, right) = (column_left + KEY_LEFT, column_left + KEY_LEFT + KEY_WIDTH);
    match *key {
        Key::Heading => Ok(()),
        Key::Line(stroke) => draw_sample(area, stroke, (left, right), middle),
        Key::Marked(stroke) => {
            draw_sample(area, stroke, (left, right), middle)?;
            let center = (left + KEY_WIDTH / 2, middle);
            area.draw(&Circle::new(center, 4, stroke.color.stroke_width(2)))
        }
        Key::Band { color, opacity } => area.draw(&Rectangle::new(
            [(left, middle - 8), (right, middle + 8)],
            color.mix(opacity).filled(),
        )),
        Key::Cross(color) => area.draw(&Cross::new(
            (left + KEY_WIDTH / 2, middle),
            7,
            color.stroke_width(3),
        )),
        Key::Ring(color) => area.draw(&Circle::new(
            (left + KEY_WIDTH / 2, middle),
            6,
            color.stroke_width(2),
        )),
    }
}

fn draw_sample<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    stroke: Stroke,
    (left, right): (i32, i32),
    middle: i32,
) -> DrawResult<DB> {
    let ends = [(left, middle), (right, middle)];
    match stroke.dash.pattern() {
        None => area.draw(&PathElement::new(ends, shape(stroke))),
        Some((on, off)) => area.draw(&DashedPathElement::new(ends, on, off, shape(stroke))),
    }
}

//! Draws a [`Chart`] with plotters, as PNG or SVG.
//!
//! Layout, 1200x800: the title across the top; the panels stacked on the left; the legend in
//! its own column on the right, so long variant names wrap there instead of covering data.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::bitmap_text::GlyphBackend;
use crate::chart::{Axis, Chart, Dash, INK, Key, LegendEntry, Panel, Stroke, format_number};

const SIZE: (u32, u32) = (1200, 800);
const TITLE_HEIGHT: u32 = 56;
const LEGEND_WIDTH: u32 = 320;
/// The family registered with the embedded font (see `lib.rs`).
const FONT: &str = "sans-serif";

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// Draws `chart` into a PNG file at `path`, its text placed by [`GlyphBackend`].
pub(crate) fn write_png(chart: &Chart, path: &Path) -> Result<(), String> {
    let root = GlyphBackend::new(BitMapBackend::new(path, SIZE)).into_drawing_area();
    draw(&root, chart).map_err(|error| error.to_string())?;
    root.present().map_err(|error| error.to_string())
}

/// Draws `chart` as an SVG document.
pub(crate) fn svg(chart: &Chart) -> Result<String, String> {
    let mut document = String::new();
    {
        let root = SVGBackend::with_string(&mut document, SIZE).into_drawing_area();
        draw(&root, chart).map_err(|error| error.to_string())?;
        root.present().map_err(|error| error.to_string())?;
    }
    Ok(document)
}

fn text(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().color(&INK)
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, chart: &Chart) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(TITLE_HEIGHT);
    let centered = text(26.0).pos(Pos::new(HPos::Center, VPos::Center));
    title.draw_text(
        &chart.title,
        &centered,
        (SIZE.0 as i32 / 2, TITLE_HEIGHT as i32 / 2),
    )?;
    let (plots, legend) = body.split_horizontally(SIZE.0 - LEGEND_WIDTH);
    let areas = plots.split_evenly((chart.panels.len().max(1), 1));
    for (index, (panel, area)) in chart.panels.iter().zip(&areas).enumerate() {
        draw_panel(area, panel, index + 1 == chart.panels.len())?;
    }
    draw_legend(&legend, &chart.legend)
}

const PANEL_MARGIN_TOP: u32 = 10;
const PANEL_MARGIN_RIGHT: u32 = 20;
const Y_LABEL_AREA: u32 = 90;

/// One panel: axes and grid, then the shaded bands, the lines and the markers. Only the `last`
/// panel carries the x-axis description (panels above share it).
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    last: bool,
) -> DrawResult<DB> {
    let x_label_area = if last { 60 } else { 36 };
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(PANEL_MARGIN_TOP)
        .margin_right(PANEL_MARGIN_RIGHT)
        .x_label_area_size(x_label_area)
        .y_label_area_size(Y_LABEL_AREA);
    let x = panel.x.range.clone();
    if panel.y.log {
        let mut chart = builder.build_cartesian_2d(x, panel.y.range.clone().log_scale())?;
        draw_contents(&mut chart, panel, last)?;
    } else {
        let mut chart = builder.build_cartesian_2d(x, panel.y.range.clone())?;
        draw_contents(&mut chart, panel, last)?;
    }
    // plotters' own y description is drawn so close to the edge that the embedded font's
    // glyphs get clipped in PNG output: draw it here, a little further in.
    let (_, height) = area.dim_in_pixel();
    let middle = (PANEL_MARGIN_TOP + height - x_label_area) as i32 / 2;
    let vertical = text(17.0)
        .transform(FontTransform::Rotate270)
        .pos(Pos::new(HPos::Center, VPos::Top));
    area.draw_text(&panel.y.description, &vertical, (10, middle))?;
    let empty = panel.markers.is_empty() && panel.lines.iter().all(|line| line.segments.is_empty());
    if empty {
        let (width, _) = area.dim_in_pixel();
        let center = (Y_LABEL_AREA + width - PANEL_MARGIN_RIGHT) as i32 / 2;
        let note = text(20.0)
            .color(&RGBColor(120, 120, 120))
            .pos(Pos::new(HPos::Center, VPos::Center));
        area.draw_text("no data", &note, (center, middle))?;
    }
    Ok(())
}

fn draw_contents<DB, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, Y>>,
    panel: &Panel,
    last: bool,
) -> DrawResult<DB>
where
    DB: DrawingBackend,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    let format = |value: &f64| format_number(*value);
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&format)
        .y_label_formatter(&format)
        .x_labels(12)
        .y_labels(8)
        .label_style(text(15.0))
        .axis_desc_style(text(17.0))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(244, 244, 244))
        .max_light_lines(4);
    if last {
        mesh.x_desc(panel.x.description.as_str());
    }
    mesh.draw()?;

    let (x, y) = (&panel.x.range, &panel.y.range);
    for band in &panel.bands {
        let (start, end) = (band.x.start.max(x.start), band.x.end.min(x.end));
        if start < end {
            let style = band.color.mix(band.opacity).filled();
            chart.draw_series([Rectangle::new([(start, y.start), (end, y.end)], style)])?;
        }
        if band.edges {
            let edge = band.color.mix(0.7).stroke_width(1);
            let inside = [band.x.start, band.x.end]
                .into_iter()
                .filter(|x_edge| x.contains(x_edge));
            let lines =
                inside.map(|x_edge| PathElement::new([(x_edge, y.start), (x_edge, y.end)], edge));
            chart.draw_series(lines)?;
        }
    }
    for line in &panel.lines {
        let style = shape(line.stroke);
        for segment in &line.segments {
            let points = segment.iter().map(|&(x, y)| (x, clamp(&panel.y, y)));
            if segment.len() == 1 {
                chart.draw_series(points.map(|point| Circle::new(point, 3, style.filled())))?;
                continue;
            }
            match line.stroke.dash {
                Dash::Solid => chart.draw_series(LineSeries::new(points, style))?,
                Dash::Dashed => chart.draw_series(DashedLineSeries::new(points, 9, 6, style))?,
                Dash::Dotted => chart.draw_series(DashedLineSeries::new(points, 2, 5, style))?,
            };
        }
    }
    let crosses = panel.markers.iter().map(|marker| {
        let at = (marker.at.0, clamp(&panel.y, marker.at.1));
        Cross::new(at, 7, marker.color.stroke_width(3))
    });
    chart.draw_series(crosses)?;
    Ok(())
}

/// On a log axis, values at or below the bottom edge (zeros) are drawn on it.
fn clamp(axis: &Axis, value: f64) -> f64 {
    if axis.log {
        value.max(axis.range.start)
    } else {
        value
    }
}

fn shape(stroke: Stroke) -> ShapeStyle {
    stroke.color.stroke_width(stroke.width)
}

const LEGEND_LINE_HEIGHT: i32 = 21;
const KEY_LEFT: i32 = 14;
const KEY_WIDTH: i32 = 34;
const LABEL_LEFT: i32 = KEY_LEFT + KEY_WIDTH + 10;

/// The legend column: headings, then one key sample and a wrapped label per entry.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[LegendEntry],
) -> DrawResult<DB> {
    let (width, _) = area.dim_in_pixel();
    let label_style = text(15.0).pos(Pos::new(HPos::Left, VPos::Center));
    let heading_style = text(15.0)
        .color(&RGBColor(90, 90, 90))
        .pos(Pos::new(HPos::Left, VPos::Center));
    let mut y = 16;
    for (index, entry) in entries.iter().enumerate() {
        let (left, style) = match entry.key {
            Key::Heading => (KEY_LEFT, &heading_style),
            _ => (LABEL_LEFT, &label_style),
        };
        if entry.key == Key::Heading && index > 0 {
            y += LEGEND_LINE_HEIGHT / 2;
        }
        let middle = y + LEGEND_LINE_HEIGHT / 2;
        draw_key(area, &entry.key, middle)?;
        for line in wrap(area, &entry.label, style, width as i32 - left - 8)? {
            area.draw_text(&line, style, (left, y + LEGEND_LINE_HEIGHT / 2))?;
            y += LEGEND_LINE_HEIGHT;
        }
        y += 3;
    }
    Ok(())
}

fn draw_key<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    key: &Key,
    middle: i32,
) -> DrawResult<DB> {
    let (left, right) = (KEY_LEFT, KEY_LEFT + KEY_WIDTH);
    match *key {
        Key::Heading => Ok(()),
        Key::Line(stroke) => {
            let ends = [(left, middle), (right, middle)];
            match stroke.dash {
                Dash::Solid => area.draw(&PathElement::new(ends, shape(stroke))),
                Dash::Dashed => area.draw(&DashedPathElement::new(ends, 9, 6, shape(stroke))),
                Dash::Dotted => area.draw(&DashedPathElement::new(ends, 2, 5, shape(stroke))),
            }
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
    }
}

/// Splits `label` at spaces into lines no wider than `width` pixels (a longer single word
/// gets a line of its own).
fn wrap<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    label: &str,
    style: &TextStyle,
    width: i32,
) -> Result<Vec<String>, DrawingAreaErrorKind<DB::ErrorType>> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in label.split_whitespace() {
        let candidate = if current.is_empty() {
            word.to_string()
        } else {
            format!("{current} {word}")
        };
        let (candidate_width, _) = area.estimate_text_size(&candidate, style)?;
        if candidate_width as i32 > width && !current.is_empty() {
            lines.push(std::mem::replace(&mut current, word.to_string()));
        } else {
            current = candidate;
        }
    }
    if !current.is_empty() || lines.is_empty() {
        lines.push(current);
    }
    Ok(lines)
}

//! Draws a [`Chart`] with plotters, as PNG or SVG, where [`layout`](crate::layout) puts each
//! part: the title across the top, the panels in their rows, the legend beside or below them.

use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::FontTransform;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::axes::format_number;
use crate::bitmap_text::GlyphBackend;
use crate::chart::{Axis, Band, Chart, INK, Line, Marker, MarkerShape, Panel, Rule, Stroke};
use crate::labels::{self, clamp};
use crate::layout::{FONT, Layout, PanelPlace, TITLE_HEIGHT, lay_out, text_width};

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

/// An axis of numbers, linear or logarithmic.
trait Scale: Ranged<ValueType = f64> + ValueFormatter<f64> {}
impl<T: Ranged<ValueType = f64> + ValueFormatter<f64>> Scale for T {}

/// A panel's plotting area, with its axes.
type Context<'a, DB, X, Y> = ChartContext<'a, DB, Cartesian2d<X, Y>>;

/// Draws `chart` into a PNG file at `path`, its text placed by [`GlyphBackend`].
pub(crate) fn write_png(chart: &Chart, path: &Path) -> Result<(), String> {
    let layout = lay_out(chart);
    let root = GlyphBackend::new(BitMapBackend::new(path, layout.size)).into_drawing_area();
    draw(&root, chart, &layout).map_err(|error| error.to_string())?;
    root.present().map_err(|error| error.to_string())
}

/// Draws `chart` as an SVG document.
pub(crate) fn svg(chart: &Chart) -> Result<String, String> {
    let layout = lay_out(chart);
    let mut document = String::new();
    {
        let root = SVGBackend::with_string(&mut document, layout.size).into_drawing_area();
        draw(&root, chart, &layout).map_err(|error| error.to_string())?;
        root.present().map_err(|error| error.to_string())?;
    }
    Ok(document)
}

pub(crate) fn text(size: f64) -> TextStyle<'static> {
    (FONT, size).into_font().color(&INK)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    chart: &Chart,
    layout: &Layout,
) -> DrawResult<DB> {
    root.fill(&WHITE)?;
    let centered = text(26.0).pos(Pos::new(HPos::Center, VPos::Center));
    let title_at = (layout.size.0 as i32 / 2, TITLE_HEIGHT as i32 / 2);
    root.draw_text(&chart.title, &centered, title_at)?;
    let size = description_size(chart, layout);
    for (panel, place) in chart.panels.iter().zip(&layout.panels) {
        let rect = place.rect;
        let area = root
            .clone()
            .shrink((rect.x, rect.y), (rect.width, rect.height));
        draw_panel(&area, panel, place, size)?;
    }
    if let (Some(middle), Some(first)) = (layout.shared_y_description, chart.panels.first()) {
        let style = y_description_style(size);
        root.draw_text(&first.y.description, &style, (10, middle))?;
    }
    crate::legend::draw(root, &chart.legend, &layout.legend)
}

const PANEL_MARGIN_TOP: u32 = 10;
/// Above a panel with a title: room for one line of it.
const PANEL_TITLE_HEIGHT: u32 = 24;
const PANEL_MARGIN_RIGHT: u32 = 20;
/// The y tick labels and the y description, in the first column; ticks alone in the others.
const Y_LABEL_AREA: u32 = 90;
const Y_TICKS_AREA: u32 = 60;
/// Room per x tick label, and per y tick label.
const X_TICK_SPACING: u32 = 75;
const Y_TICK_SPACING: u32 = 40;

/// One panel: its title, axes and grid, then the shaded bands, the lines, the markers, the
/// reference lines and the notes. Only a panel of the bottom row carries the x description,
/// only one of the first column the y description.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    place: &PanelPlace,
    description_size: f64,
) -> DrawResult<DB> {
    let x_label_area = x_label_area(place);
    let y_label_area = y_label_area(panel, place);
    let margin_top = margin_top(panel);
    let (width, height) = area.dim_in_pixel();
    if let Some((title, size)) = drawn_title(panel, place) {
        let style = text(size).pos(Pos::new(HPos::Left, VPos::Top));
        area.draw_text(&title, &style, (title_left(place) as i32, 8))?;
    }
    let x_labels = (width.saturating_sub(y_label_area) / X_TICK_SPACING).clamp(3, 12) as usize;
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(margin_top)
        .margin_right(PANEL_MARGIN_RIGHT)
        .x_label_area_size(x_label_area)
        .y_label_area_size(y_label_area);
    let x = panel.x.range.clone();
    let mesh = Mesh {
        x_labels,
        y_labels: (height / Y_TICK_SPACING).clamp(3, 8) as usize,
        x_description: place.bottom_row,
        description_size,
    };
    if panel.x.categories {
        let x = Categories::new(x, category_ticks(&panel.x.range, x_labels));
        build_and_draw(&mut builder, x, panel, &mesh)?;
    } else if let Some(start) = panel.x.clock_start_unix_ms {
        let x = Categories::new(x, clock_ticks(&panel.x.range, start, x_labels));
        build_and_draw(&mut builder, x, panel, &mesh)?;
    } else if panel.x.log {
        let x: LogCoord<f64> = x.log_scale().into();
        build_and_draw(&mut builder, x, panel, &mesh)?;
    } else {
        let x: RangedCoordf64 = x.into();
        build_and_draw(&mut builder, x, panel, &mesh)?;
    }
    // plotters' own y description is drawn so close to the edge that the embedded font's
    // glyphs get clipped in PNG output: draw it here, a little further in.
    let middle = (margin_top + height - x_label_area) as i32 / 2;
    if place.describes_y || !panel.y_ticks {
        let style = y_description_style(description_size);
        area.draw_text(&panel.y.description, &style, (10, middle))?;
    }
    let empty = panel.markers.is_empty()
        && panel.bands.iter().all(|band| band.y.is_none())
        && panel.lines.iter().all(|line| line.segments.is_empty());
    if empty {
        let center = (y_label_area + width - PANEL_MARGIN_RIGHT) as i32 / 2;
        let note = text(20.0)
            .color(&RGBColor(120, 120, 120))
            .pos(Pos::new(HPos::Center, VPos::Center));
        area.draw_text("no data", &note, (center, middle))?;
    }
    Ok(())
}

/// Builds the panel's axes on `x` (linear or logarithmic y) and draws its contents.
fn build_and_draw<DB: DrawingBackend, X: Scale>(
    builder: &mut ChartBuilder<'_, '_, DB>,
    x: X,
    panel: &Panel,
    mesh: &Mesh,
) -> DrawResult<DB> {
    let y = panel.y.range.clone();
    if panel.y.categories {
        // Every category named: a map's loads are few, and each row is one.
        let every = (y.end - y.start).max(1.0) as usize + 1;
        let y = Categories::new(y.clone(), category_ticks(&y, every));
        draw_contents(&mut builder.build_cartesian_2d(x, y)?, panel, mesh)
    } else if let (true, Some(band), Some(zero)) =
        (panel.y.log, &panel.y.zero_band, panel.y.zero_at())
    {
        let y = ZeroBanded {
            log: y.log_scale().into(),
            top: band.top,
            zero,
        };
        draw_contents(&mut builder.build_cartesian_2d(x, y)?, panel, mesh)
    } else if panel.y.log {
        let y: LogCoord<f64> = y.log_scale().into();
        draw_contents(&mut builder.build_cartesian_2d(x, y)?, panel, mesh)
    } else {
        let y: RangedCoordf64 = y.into();
        draw_contents(&mut builder.build_cartesian_2d(x, y)?, panel, mesh)
    }
}

/// A log axis with a zero band at its bottom: the decades' ticks and grid lines above the
/// band, and one tick in it, at `zero`, where zeros are drawn (labelled by [`tick_label`]).
struct ZeroBanded {
    log: LogCoord<f64>,
    top: f64,
    zero: f64,
}

impl Ranged for ZeroBanded {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.log.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        let light = hint.weight().allow_light_points();
        let decades = self.log.key_points(hint).into_iter();
        let mut points: Vec<f64> = decades.filter(|&point| point >= self.top).collect();
        if !light {
            points.insert(0, self.zero);
        }
        points
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.log.range()
    }
}

impl ValueFormatter<f64> for ZeroBanded {
    fn format(value: &f64) -> String {
        format_number(*value)
    }
}

/// A linear axis whose ticks are given: things numbered 1, 2, 3 (variants), whose ticks are
/// whole numbers only, or a time axis on a clock, whose ticks are round times of day.
struct Categories {
    linear: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Categories {
    fn new(range: std::ops::Range<f64>, ticks: Vec<f64>) -> Categories {
        Categories {
            linear: range.into(),
            ticks,
        }
    }
}

impl Ranged for Categories {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.linear.map(value, limit)
    }

    /// The whole numbers, and no light lines between them: a 1.5 names nothing.
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.linear.range()
    }
}

impl ValueFormatter<f64> for Categories {
    fn format(value: &f64) -> String {
        format_number(*value)
    }
}

/// A tick's label: on a categorical axis with names, the name of the whole number `value`
/// (a sweep's word); otherwise the number.
pub(crate) fn tick_label(axis: &Axis, value: f64) -> String {
    if let Some(start) = axis.clock_start_unix_ms {
        return time_of_day(start + (value * 1000.0).round() as i64);
    }
    if let (Some(zero), Some(band)) = (axis.zero_at(), &axis.zero_band)
        && value == zero
    {
        return band.label.clone();
    }
    let name = (axis.categories && value.fract() == 0.0 && value >= 0.0)
        .then(|| axis.category_names.get(value as usize))
        .flatten();
    match name {
        Some(name) => name.clone(),
        None => format_number(value),
    }
}

/// The time of day in UTC of an instant (ms since the Unix epoch): `10:00:15`, or
/// `10:00:15.5` off a whole second.
pub(crate) fn time_of_day(unix_ms: i64) -> String {
    let of_day = unix_ms.rem_euclid(86_400_000);
    let (seconds, ms) = (of_day / 1000, of_day % 1000);
    let clock = format!(
        "{:02}:{:02}:{:02}",
        seconds / 3600,
        seconds / 60 % 60,
        seconds % 60
    );
    if ms == 0 {
        clock
    } else {
        let fraction = format!("{ms:03}");
        format!("{clock}.{}", fraction.trim_end_matches('0'))
    }
}

/// Ticks of a time axis (seconds from `start_unix_ms`) at round times of day in UTC: every
/// 0.1, 0.2, 0.5, 1, 2, 5, 10, 15 or 30 s, 1, 2, 5, 10, 15 or 30 min, or 1, 2, 6, 12 or 24 h,
/// the finest that gives at most `labels_max` within `range`.
pub(crate) fn clock_ticks(
    range: &std::ops::Range<f64>,
    start_unix_ms: i64,
    labels_max: usize,
) -> Vec<f64> {
    const STEPS_MS: [i64; 19] = [
        100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
        600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000,
    ];
    const DAY_MS: i64 = 86_400_000;
    if !(range.start.is_finite() && range.end.is_finite()) || range.start > range.end {
        return Vec::new();
    }
    let from = start_unix_ms.saturating_add((range.start * 1000.0).ceil() as i64);
    let to = start_unix_ms.saturating_add((range.end * 1000.0).floor() as i64);
    let labels_max = labels_max.max(1) as i64;
    let span = to - from;
    let step = STEPS_MS
        .into_iter()
        .find(|step| span / step < labels_max)
        .unwrap_or(DAY_MS * (span / DAY_MS / labels_max + 1));
    let first = from.div_euclid(step) * step + if from.rem_euclid(step) == 0 { 0 } else { step };
    (0..)
        .map(|i| first + i * step)
        .take_while(|&tick| tick <= to)
        .map(|tick| (tick - start_unix_ms) as f64 / 1000.0)
        .collect()
}

/// The whole numbers within `range`, every one when `labels_max` labels fit, otherwise every
/// second, fifth, tenth... from the first (so 1 is always labelled).
pub(crate) fn category_ticks(range: &std::ops::Range<f64>, labels_max: usize) -> Vec<f64> {
    let (first, last) = (range.start.ceil(), range.end.floor());
    if !(first.is_finite() && last.is_finite()) || first > last {
        return Vec::new();
    }
    let count = (last - first) as usize + 1;
    let labels_max = labels_max.max(1);
    let step = [1, 2, 5, 10, 20, 50, 100]
        .into_iter()
        .find(|step| count.div_ceil(*step) <= labels_max)
        .unwrap_or(count.div_ceil(labels_max));
    (0..count)
        .step_by(step)
        .map(|index| first + index as f64)
        .collect()
}

/// The width left of a panel's plotting area: tick labels and the y description in the first
/// column, tick labels alone in the others.
fn y_label_area(panel: &Panel, place: &PanelPlace) -> u32 {
    match (panel.y_ticks, place.first_column) {
        (true, true) => Y_LABEL_AREA,
        (true, false) => Y_TICKS_AREA,
        // Lanes line up with the panels above them.
        (false, _) => Y_LABEL_AREA,
    }
}

/// The height under a panel's plotting area: its tick labels, and the x description in the
/// bottom row.
fn x_label_area(place: &PanelPlace) -> u32 {
    if place.bottom_row { 60 } else { 36 }
}

/// The height above a panel's plotting area: a margin, and its title's line.
fn margin_top(panel: &Panel) -> u32 {
    match panel.title {
        Some(_) => PANEL_MARGIN_TOP + PANEL_TITLE_HEIGHT,
        None => PANEL_MARGIN_TOP,
    }
}

/// The size of every axis description of `chart`, x and y alike: the usual size, or the
/// smaller one when some y description would not fit beside its panel at the usual size (a
/// study's four stacked panels). Each description chose its own size before, and a study's y
/// descriptions were smaller than its x description (issue 31).
pub(crate) fn description_size(chart: &Chart, layout: &Layout) -> f64 {
    let fits = |(panel, place): (&Panel, &PanelPlace)| {
        let described = place.describes_y || !panel.y_ticks;
        let height = place.rect.height;
        let room = height.saturating_sub(margin_top(panel) + x_label_area(place));
        !described || text_width(&panel.y.description, DESCRIPTION_SIZE) <= room
    };
    if chart.panels.iter().zip(&layout.panels).all(fits) {
        DESCRIPTION_SIZE
    } else {
        DESCRIPTION_SIZE_SMALL
    }
}

pub(crate) const DESCRIPTION_SIZE: f64 = 17.0;
const DESCRIPTION_SIZE_SMALL: f64 = 13.0;

/// The y description: turned to run upwards, centred where it is written.
fn y_description_style(size: f64) -> TextStyle<'static> {
    text(size)
        .transform(FontTransform::Rotate270)
        .pos(Pos::new(HPos::Center, VPos::Top))
}

/// The title of `panel` as drawn in `place`, and its size: cut to the room above the panel,
/// in smaller letters when it would be cut at the usual size.
pub(crate) fn drawn_title(panel: &Panel, place: &PanelPlace) -> Option<(String, f64)> {
    let title = panel.title.as_ref()?;
    let room = place
        .rect
        .width
        .saturating_sub(title_left(place) + PANEL_MARGIN_RIGHT);
    if text_width(title, PANEL_TITLE_SIZE) <= room {
        return Some((title.clone(), PANEL_TITLE_SIZE));
    }
    for size in PANEL_TITLE_SIZES_SMALL {
        if let Ok(kept) = shortened_keeping(title, size, room) {
            return Some((kept, size));
        }
    }
    let size = PANEL_TITLE_SIZES_SMALL[PANEL_TITLE_SIZES_SMALL.len() - 1];
    Some((shortened(title, size, room), size))
}

const PANEL_TITLE_SIZE: f64 = 15.0;
/// Smaller sizes for a title that would be cut, tried in turn until what it keeps fits.
const PANEL_TITLE_SIZES_SMALL: [f64; 2] = [13.0, 12.0];
/// A panel's title starts over its tick labels, not over its plotting area: small multiples
/// are narrow, and the title is what tells them apart. In the first column, right of the y
/// description, which runs up the left edge (the small multiples' shared one crosses the
/// titles of the rows at the middle).
fn title_left(place: &PanelPlace) -> u32 {
    if place.first_column { 34 } else { 10 }
}

/// `title` cut to fit `width` pixels, with an ellipsis where it was cut. What tells a panel
/// from its neighbours is kept longest: a sweep variant's name is `base / label=value`, and its
/// base is cut before its swept values (which are all that differ between the panels of one
/// base); a variant's "(same as X)" is what the panel says that its lines do not, so it is
/// kept too, X's base cut first of all. Only when what is kept does not fit alone is the title
/// cut from its end.
pub(crate) fn shortened(title: &str, size: f64, width: u32) -> String {
    shortened_keeping(title, size, width).unwrap_or_else(|cut| cut)
}

/// [`shortened`], as `Ok` when what it keeps (the swept values, the note) fits `width`, as
/// `Err` when it had to be cut from its end.
fn shortened_keeping(title: &str, size: f64, width: u32) -> Result<String, String> {
    if text_width(title, size) <= width {
        return Ok(title.to_owned());
    }
    let mut pieces = title_pieces(title);
    let joined = |pieces: &[(String, Option<u8>)]| -> String {
        pieces.iter().map(|(text, _)| text.as_str()).collect()
    };
    // The bases are cut together, a character at a time from the one with most left (the
    // lower rank first on a tie), so each keeps its first words: cutting the other's base
    // away first left "(same as … / rps=400)", which says not which variant (issue 31).
    let mut kept: Vec<Option<Vec<char>>> = (pieces.iter())
        .map(|(text, rank)| rank.map(|_| text.chars().collect()))
        .collect();
    while text_width(&joined(&pieces), size) > width {
        let longest = (0..pieces.len())
            .filter_map(|index| Some((index, kept[index].as_ref()?.len())))
            .filter(|&(_, left)| left > 0)
            .max_by(|a, b| (a.1.cmp(&b.1)).then_with(|| pieces[b.0].1.cmp(&pieces[a.0].1)));
        let Some((index, _)) = longest else {
            break;
        };
        let chars = kept[index].as_mut().expect("a ranked piece");
        chars.pop();
        pieces[index].0 = chars.iter().collect::<String>().trim_end().to_owned() + "…";
    }
    if text_width(&joined(&pieces), size) <= width {
        return Ok(joined(&pieces));
    }
    // What is kept does not fit: cut from its end, the note before the swept values.
    Err(cut_to(&joined(&pieces), size, width))
}

/// `title` in pieces, each with the order in which it is cut (lowest first; `None`: kept):
/// `base / label=value (same as other-base / label=value)`, the other's base cut first, then
/// this variant's base; a name without swept values is cut as a whole, this one's before the
/// other's.
fn title_pieces(title: &str) -> Vec<(String, Option<u8>)> {
    let (name, other) = match title.rfind(" (same as ") {
        Some(at) if title.ends_with(')') => {
            let other = &title[at + " (same as ".len()..title.len() - 1];
            (&title[..at], Some(other))
        }
        _ => (title, None),
    };
    // A name's swept values: after its last " / ", each `label=value`.
    let split = |name: &str, base_rank: u8, whole_rank: Option<u8>| match name.rsplit_once(" / ") {
        Some((base, point)) if point.contains('=') => vec![
            (base.to_owned(), Some(base_rank)),
            (format!(" / {point}"), None),
        ],
        _ => vec![(name.to_owned(), whole_rank)],
    };
    let mut pieces = split(name, 1, Some(1));
    if let Some(other) = other {
        pieces.push((" (same as ".to_owned(), None));
        let mut others = split(other, 0, None);
        // The same as a variant of the same base: its swept values say which.
        if others.len() == 2 && others[0].0 == pieces[0].0 && pieces.len() > 2 {
            others.remove(0);
            others[0].0 = others[0].0.trim_start_matches(" / ").to_owned();
        }
        pieces.extend(others);
        pieces.push((")".to_owned(), None));
    }
    pieces
}

/// `title` cut from its end, with an ellipsis, until it fits `width` pixels; empty when not
/// even one character and the ellipsis do.
pub(crate) fn cut_to(title: &str, size: f64, width: u32) -> String {
    if text_width(title, size) <= width {
        return title.to_owned();
    }
    let mut kept: Vec<char> = title.chars().collect();
    while !kept.is_empty() {
        kept.pop();
        let candidate: String = kept.iter().collect::<String>() + "…";
        if text_width(&candidate, size) <= width {
            return candidate;
        }
    }
    String::new()
}

struct Mesh {
    x_labels: usize,
    y_labels: usize,
    x_description: bool,
    /// Of the x description, as of the y one: [`description_size`].
    description_size: f64,
}

fn draw_contents<DB: DrawingBackend, X: Scale, Y: Scale>(
    chart: &mut Context<'_, DB, X, Y>,
    panel: &Panel,
    layout: &Mesh,
) -> DrawResult<DB> {
    let format = |value: &f64| tick_label(&panel.y, *value);
    let format_x = |value: &f64| tick_label(&panel.x, *value);
    let no_label = |_: &f64| String::new();
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&format_x)
        .x_labels(layout.x_labels)
        .y_labels(if panel.y_ticks { layout.y_labels } else { 0 })
        .label_style(text(15.0))
        .axis_desc_style(text(layout.description_size))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(244, 244, 244))
        .max_light_lines(4);
    if panel.y_ticks {
        mesh.y_label_formatter(&format);
    } else {
        mesh.y_label_formatter(&no_label).disable_y_mesh();
    }
    if layout.x_description {
        mesh.x_desc(panel.x.description.as_str());
    }
    mesh.draw()?;
    draw_zero_band(chart, panel)?;

    for band in &panel.bands {
        draw_band(chart, panel, band)?;
    }
    for line in &panel.lines {
        draw_line(chart, panel, line)?;
    }
    let at = |marker: &Marker| (clamp(&panel.x, marker.at.0), clamp(&panel.y, marker.at.1));
    let shaped = |shape| panel.markers.iter().filter(move |m| m.shape == shape);
    let crosses = shaped(MarkerShape::Cross)
        .map(|marker| Cross::new(at(marker), 7, marker.color.stroke_width(3)));
    chart.draw_series(crosses)?;
    let rings = shaped(MarkerShape::Ring)
        .map(|marker| Circle::new(at(marker), 6, marker.color.stroke_width(2)));
    chart.draw_series(rings)?;
    for rule in &panel.rules {
        draw_rule(chart, panel, rule)?;
    }
    draw_labels(chart, panel)
}

/// The labels of the reference lines, bands and lanes, where [`labels::place`] puts them.
fn draw_labels<DB: DrawingBackend, X: Scale, Y: Scale>(
    chart: &mut Context<'_, DB, X, Y>,
    panel: &Panel,
) -> DrawResult<DB> {
    let (columns, rows) = chart.plotting_area().get_pixel_range();
    let area = labels::Box {
        x: columns.start,
        y: rows.start,
        width: columns.end - columns.start,
        height: rows.end - rows.start,
    };
    let placed = labels::place(panel, |x, y| chart.backend_coord(&(x, y)), area);
    let plot = chart.plotting_area().strip_coord_spec();
    let (base_x, base_y) = chart.plotting_area().get_base_pixel();
    for label in placed {
        let (x, y) = (label.at.x - base_x, label.at.y - base_y);
        let mut text_x = x;
        if label.backed {
            let corners = [(x, y), (x + label.at.width, y + label.at.height)];
            plot.draw(&Rectangle::new(corners, WHITE.mix(0.8).filled()))?;
            text_x += 2;
        }
        let style = text(labels::LABEL_SIZE)
            .color(&label.color)
            .pos(Pos::new(HPos::Left, VPos::Top));
        plot.draw(&Text::new(label.text, (text_x, y + 1), style))?;
    }
    Ok(())
}

/// A log axis' zero band: a light strip across the panel, parted from the decades above it
/// by a solid line.
fn draw_zero_band<DB: DrawingBackend, X: Scale, Y: Scale>(
    chart: &mut Context<'_, DB, X, Y>,
    panel: &Panel,
) -> DrawResult<DB> {
    let Some(band) = panel.y.zero_band.as_ref().filter(|_| panel.y.log) else {
        return Ok(());
    };
    let (x, y) = (&panel.x.range, &panel.y.range);
    let corners = [(x.start, y.start), (x.end, band.top)];
    chart.draw_series([Rectangle::new(corners, ZERO_BAND_FILL.filled())])?;
    let edge = [(x.start, band.top), (x.end, band.top)];
    chart.draw_series([PathElement::new(edge, ZERO_BAND_EDGE.stroke_width(1))])?;
    Ok(())
}

const ZERO_BAND_FILL: RGBColor = RGBColor(246, 246, 246);
const ZERO_BAND_EDGE: RGBColor = RGBColor(150, 150, 150);

fn draw_band<DB: DrawingBackend, X: Scale, Y: Scale>(
    chart: &mut Context<'_, DB, X, Y>,
    panel: &Panel,
    band: &Band,
) -> DrawResult<DB> {
    let (x, y) = (&panel.x.range, &panel.y.range);
    let rows = band.y.clone().unwrap_or(y.clone());
    let (start, end) = (band.x.start.max(x.start), band.x.end.min(x.end));
    if start < end {
        let style = band.color.mix(band.opacity).filled();
        let corners = [(start, rows.start), (end, rows.end)];
        chart.draw_series([Rectangle::new(corners, style)])?;
    }
    if band.edges {
        let edge = band.color.mix(0.7).stroke_width(1);
        let inside = [band.x.start, band.x.end]
            .into_iter()
            .filter(|x_edge| x.contains(x_edge));
        let lines =
            inside.map(|x_edge| PathElement::new([(x_edge, rows.start), (x_edge, rows.end)], edge));
        chart.draw_series(lines)?;
    }
    Ok(())
}

/// A line, its segments drawn apart; a segment of one point is a dot. A marked line gets a
/// circle every few points, so it shows where it lies on the line it is the same as.
fn draw_line<DB: DrawingBackend, X: Scale, Y: Scale>(
    chart: &mut Context<'_, DB, X, Y>,
    panel: &Panel,
    line: &Line,
) -> DrawResult<DB> {
    let style = shape(line.stroke);
    for segment in &line.segments {
        let points: Vec<(f64, f64)> = segment
            .iter()
            .map(|&(x, y)| (clamp(&panel.x, x), clamp(&panel.y, y)))
            .collect();
        if segment.len() == 1 {
            chart.draw_series(
                points
                    .into_iter()
                    .map(|point| Circle::new(point, 3, style.filled())),
            )?;
            continue;
        }
        for piece in pieces(&points, |point| chart.backend_coord(point)) {
            let piece = piece.iter().copied();
            match line.stroke.dash.pattern() {
                None => chart.draw_series(LineSeries::new(piece, style))?,
                Some((on, off)) => {
                    chart.draw_series(DashedLineSeries::new(piece, on, off, style))?
                }
            };
        }
    }
    if line.marks {
        let points: Vec<(f64, f64)> = line.segments.iter().flatten().copied().collect();
        let every = (points.len() / MARKS_PER_LINE).max(1);
        let marked = points.iter().skip(every / 2).step_by(every);
        let circles = marked.map(|&(x, y)| {
            Circle::new(
                (clamp(&panel.x, x), clamp(&panel.y, y)),
                4,
                line.stroke.color.stroke_width(2),
            )
        });
        chart.draw_series(circles)?;
    }
    Ok(())
}

/// A polyline cut into pieces at its sharp turns (more than 120 degrees, in pixels): a thick
/// line's mitred join at a spike (a p99 that jumps up for one bucket) reaches far past the
/// point, out of the panel, where two pieces meeting at the point do not.
pub(crate) fn pieces(
    points: &[(f64, f64)],
    pixel: impl Fn(&(f64, f64)) -> (i32, i32),
) -> Vec<&[(f64, f64)]> {
    let at: Vec<(f64, f64)> = points
        .iter()
        .map(|point| {
            let (x, y) = pixel(point);
            (f64::from(x), f64::from(y))
        })
        .collect();
    let mut pieces = Vec::new();
    let mut start = 0;
    for i in 1..points.len().saturating_sub(1) {
        let incoming = (at[i].0 - at[i - 1].0, at[i].1 - at[i - 1].1);
        let outgoing = (at[i + 1].0 - at[i].0, at[i + 1].1 - at[i].1);
        let lengths = incoming.0.hypot(incoming.1) * outgoing.0.hypot(outgoing.1);
        let dot = incoming.0 * outgoing.0 + incoming.1 * outgoing.1;
        if lengths > 0.0 && dot < -0.5 * lengths {
            pieces.push(&points[start..=i]);
            start = i;
        }
    }
    pieces.push(&points[start..]);
    pieces
}

/// About how many circles mark a line that is the same as another.
const MARKS_PER_LINE: usize = 24;

/// A reference line across the panel (its label is placed with the others). One outside the
/// axis (a limit of zero on a log axis) is left out.
fn draw_rule<DB: DrawingBackend, X: Scale, Y: Scale>(
    chart: &mut Context<'_, DB, X, Y>,
    panel: &Panel,
    rule: &Rule,
) -> DrawResult<DB> {
    let (x, y) = (&panel.x.range, &panel.y.range);
    let style = shape(rule.stroke);
    let ends = if rule.vertical {
        if !x.contains(&rule.at) {
            return Ok(());
        }
        [(rule.at, y.start), (rule.at, y.end)]
    } else {
        if !y.contains(&rule.at) {
            return Ok(());
        }
        [(x.start, rule.at), (x.end, rule.at)]
    };
    match rule.stroke.dash.pattern() {
        None => chart.draw_series([PathElement::new(ends, style)])?,
        Some((on, off)) => chart.draw_series([DashedPathElement::new(ends, on, off, style)])?,
    };
    Ok(())
}

pub(crate) fn shape(stroke: Stroke) -> ShapeStyle {
    stroke.color.stroke_width(stroke.width)
}

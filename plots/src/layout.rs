//! Where each part of a chart goes, in pixels, worked out from the chart alone before anything
//! is drawn (text is measured in the embedded font), so PNG and SVG get the same layout.
//!
//! The chart is 1200 pixels wide: the title across the top, the panels in rows below it (a
//! row of small multiples, or a wide panel alone), and the legend in a column on the right.
//! A legend taller than the panels moves below them, flowed into up to four columns across the
//! whole width, and the image grows to hold it instead of cutting it off. Rows share the
//! height left by fixed-height panels, each at least [`ROW_HEIGHT_MIN`]; the image grows when
//! they need more than 800 pixels in all.

use plotters::style::{FontDesc, FontFamily, FontStyle};

use crate::chart::{Chart, Key, LegendEntry};

pub(crate) const WIDTH: u32 = 1200;
pub(crate) const TITLE_HEIGHT: u32 = 56;
/// The panels' height when they need no more: an 800-pixel image.
const BODY_HEIGHT_MIN: u32 = 800 - TITLE_HEIGHT;
const ROW_HEIGHT_MIN: u32 = 150;
const LEGEND_WIDTH: u32 = 320;
/// Below the panels, the legend's columns, at most.
const LEGEND_COLUMNS_MAX: u32 = 4;

/// The family registered with the embedded font (see `lib.rs`).
pub(crate) const FONT: &str = "sans-serif";
pub(crate) const LEGEND_TEXT_SIZE: f64 = 15.0;
pub(crate) const LEGEND_LINE_HEIGHT: u32 = 21;
/// Space after each entry, and before a heading that follows an entry.
const LEGEND_ENTRY_GAP: u32 = 3;
const LEGEND_HEADING_GAP: u32 = LEGEND_LINE_HEIGHT / 2;
/// Where a legend entry's sample and label start, from the left of its column.
pub(crate) const KEY_LEFT: i32 = 14;
pub(crate) const KEY_WIDTH: i32 = 34;
pub(crate) const LABEL_LEFT: i32 = KEY_LEFT + KEY_WIDTH + 10;
const LEGEND_PADDING_TOP: u32 = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rect {
    pub x: i32,
    pub y: i32,
    pub width: u32,
    pub height: u32,
}

/// Where a panel goes and which edges of the grid it is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PanelPlace {
    pub rect: Rect,
    /// In the first column: it has the y tick labels and, unless the small multiples share
    /// one, the y description.
    pub first_column: bool,
    /// Writes its own y description.
    pub describes_y: bool,
    /// In the last row: it carries the x description.
    pub bottom_row: bool,
}

/// One legend entry, wrapped to its column, and where its first line goes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PlacedEntry {
    pub index: usize,
    /// Left of the column, and the top of the entry's first line.
    pub at: (i32, i32),
    pub lines: Vec<String>,
}

pub(crate) struct Layout {
    pub size: (u32, u32),
    pub panels: Vec<PanelPlace>,
    pub legend: Vec<PlacedEntry>,
    /// Small multiples in more than one column share one y description, written once at
    /// the middle of their rows' height: the pixel row of that middle.
    pub shared_y_description: Option<i32>,
}

/// The width `text` takes at `size` pixels in the embedded font (0 if it cannot be measured).
pub(crate) fn text_width(text: &str, size: f64) -> u32 {
    if !crate::embedded_font_registered() {
        return 0;
    }
    let font = FontDesc::new(FontFamily::Name(FONT), size, FontStyle::Normal);
    font.box_size(text).map_or(0, |(width, _)| width)
}

/// Splits `label` at spaces into lines no wider than `width` pixels (a longer single word
/// gets a line of its own).
pub(crate) fn wrap(label: &str, size: f64, width: u32) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for word in label.split_whitespace() {
        let candidate = if current.is_empty() {
            word.to_string()
        } else {
            format!("{current} {word}")
        };
        if text_width(&candidate, size) > width && !current.is_empty() {
            lines.push(std::mem::replace(&mut current, word.to_string()));
        } else {
            current = candidate;
        }
    }
    if !current.is_empty() || lines.is_empty() {
        lines.push(current);
    }
    lines
}

pub(crate) fn lay_out(chart: &Chart) -> Layout {
    let rows = rows(chart);
    let fixed: u32 = rows.iter().filter_map(|row| row.height_px).sum();
    let flexible = rows.iter().filter(|row| row.height_px.is_none()).count() as u32;
    let body_height = BODY_HEIGHT_MIN.max(fixed + flexible * ROW_HEIGHT_MIN);

    let beside = legend_in_columns(&chart.legend, LEGEND_WIDTH, 1, 0);
    let legend_height = |columns: &[Vec<(usize, Vec<String>)>]| {
        columns
            .iter()
            .map(|column| column_height(&chart.legend, column))
            .max()
            .unwrap_or(0)
    };
    let fits_beside = LEGEND_PADDING_TOP + legend_height(&beside) <= body_height;
    let (panels_width, legend_columns, legend_top, legend_left, column_width) = if fits_beside {
        let left = WIDTH - LEGEND_WIDTH;
        (left, beside, TITLE_HEIGHT, left, LEGEND_WIDTH)
    } else {
        let width = WIDTH / LEGEND_COLUMNS_MAX;
        let total: u32 = legend_height(&legend_in_columns(&chart.legend, width, 1, 0));
        let target = total.div_ceil(LEGEND_COLUMNS_MAX);
        let columns = legend_in_columns(&chart.legend, width, LEGEND_COLUMNS_MAX, target);
        (WIDTH, columns, TITLE_HEIGHT + body_height, 0, width)
    };
    let legend_extra = if fits_beside {
        0
    } else {
        2 * LEGEND_PADDING_TOP + legend_height(&legend_columns)
    };

    let flexible_height = match flexible {
        0 => 0,
        rows => (body_height - fixed) / rows,
    };
    let columns = chart.columns.max(1) as u32;
    let mut panels = vec![None; chart.panels.len()];
    let mut top = TITLE_HEIGHT as i32;
    let grid = columns > 1;
    let mut grid_rows: Option<(i32, i32)> = None;
    for (row_index, row) in rows.iter().enumerate() {
        let height = row.height_px.unwrap_or(flexible_height);
        let slots = if row.wide { 1 } else { columns };
        let width = panels_width / slots;
        for (column, &panel) in row.panels.iter().enumerate() {
            panels[panel] = Some(PanelPlace {
                rect: Rect {
                    x: (column as u32 * width) as i32,
                    y: top,
                    width,
                    height,
                },
                first_column: column == 0,
                describes_y: column == 0 && (row.wide || !grid),
                bottom_row: row_index + 1 == rows.len(),
            });
        }
        if grid && !row.wide {
            let (first, _) = grid_rows.unwrap_or((top, top));
            grid_rows = Some((first, top + height as i32));
        }
        top += height as i32;
    }

    let mut legend = Vec::new();
    for (column_index, column) in legend_columns.into_iter().enumerate() {
        let left = legend_left as i32 + column_index as i32 * column_width as i32;
        let mut y = (legend_top + LEGEND_PADDING_TOP) as i32;
        for (position, (index, lines)) in column.into_iter().enumerate() {
            if chart.legend[index].key == Key::Heading && position > 0 {
                y += LEGEND_HEADING_GAP as i32;
            }
            let height = lines.len() as u32 * LEGEND_LINE_HEIGHT + LEGEND_ENTRY_GAP;
            legend.push(PlacedEntry {
                index,
                at: (left, y),
                lines,
            });
            y += height as i32;
        }
    }
    Layout {
        size: (WIDTH, TITLE_HEIGHT + body_height + legend_extra),
        panels: panels
            .into_iter()
            .map(|place| place.expect("every panel is in a row"))
            .collect(),
        legend,
        shared_y_description: grid_rows.map(|(top, bottom)| (top + bottom) / 2),
    }
}

struct Row {
    panels: Vec<usize>,
    wide: bool,
    height_px: Option<u32>,
}

/// The panels in rows: up to `columns` side by side, a wide panel alone.
fn rows(chart: &Chart) -> Vec<Row> {
    let mut rows: Vec<Row> = Vec::new();
    let columns = chart.columns.max(1);
    let mut open = false;
    for (index, panel) in chart.panels.iter().enumerate() {
        if panel.wide {
            rows.push(Row {
                panels: vec![index],
                wide: true,
                height_px: panel.height_px,
            });
            open = false;
            continue;
        }
        match rows.last_mut() {
            Some(row) if open && row.panels.len() < columns => {
                row.panels.push(index);
                row.height_px = row.height_px.max(panel.height_px);
            }
            _ => {
                rows.push(Row {
                    panels: vec![index],
                    wide: false,
                    height_px: panel.height_px,
                });
                open = true;
            }
        }
    }
    rows
}

/// The entries flowed into at most `columns` columns of `width` pixels, in order: a column
/// takes entries until it reaches `target` pixels (0: never), the last takes the rest.
fn legend_in_columns(
    entries: &[LegendEntry],
    width: u32,
    columns: u32,
    target: u32,
) -> Vec<Vec<(usize, Vec<String>)>> {
    let mut placed: Vec<Vec<(usize, Vec<String>)>> = vec![Vec::new()];
    for (index, entry) in entries.iter().enumerate() {
        let left = match entry.key {
            Key::Heading => KEY_LEFT,
            _ => LABEL_LEFT,
        };
        let lines = wrap(
            &entry.label,
            LEGEND_TEXT_SIZE,
            width.saturating_sub(left as u32 + 8),
        );
        let current = placed.last().expect("one column at least");
        let full = target > 0 && column_height(entries, current) >= target;
        if full && (placed.len() as u32) < columns {
            placed.push(Vec::new());
        }
        placed
            .last_mut()
            .expect("one column at least")
            .push((index, lines));
    }
    placed
}

fn column_height(entries: &[LegendEntry], column: &[(usize, Vec<String>)]) -> u32 {
    column
        .iter()
        .enumerate()
        .map(|(position, (index, lines))| {
            let gap = if entries[*index].key == Key::Heading && position > 0 {
                LEGEND_HEADING_GAP
            } else {
                0
            };
            gap + lines.len() as u32 * LEGEND_LINE_HEIGHT + LEGEND_ENTRY_GAP
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Axis, Panel, variant_stroke};

    fn axis() -> Axis {
        Axis {
            description: String::new(),
            range: 0.0..1.0,
            log: false,
            categories: false,
            category_names: Vec::new(),
            clock_start_unix_ms: None,
            zero_band: None,
        }
    }

    fn chart(panels: Vec<Panel>, columns: usize, legend: usize) -> Chart {
        let legend = (0..legend)
            .map(|index| LegendEntry {
                key: Key::Line(variant_stroke(index)),
                label: format!("variant {index}"),
            })
            .collect();
        Chart {
            name: "t",
            title: String::new(),
            panels,
            columns,
            legend,
        }
    }

    fn panels(count: usize) -> Vec<Panel> {
        (0..count).map(|_| Panel::new(axis(), axis())).collect()
    }

    #[test]
    fn small_multiples_fill_rows_and_a_wide_panel_takes_its_own() {
        let mut all = panels(5);
        let mut lanes = Panel::new(axis(), axis());
        lanes.wide = true;
        lanes.height_px = Some(200);
        all.push(lanes);
        let layout = lay_out(&chart(all, 2, 3));
        let rects: Vec<(i32, i32, u32)> = layout
            .panels
            .iter()
            .map(|place| (place.rect.x, place.rect.y, place.rect.width))
            .collect();
        // Three rows of two columns (the last half full) share 544 pixels; the lanes take 200.
        let row = (BODY_HEIGHT_MIN - 200) / 3;
        let top = TITLE_HEIGHT as i32;
        let half = (WIDTH - LEGEND_WIDTH) / 2;
        assert_eq!(
            rects,
            [
                (0, top, half),
                (half as i32, top, half),
                (0, top + row as i32, half),
                (half as i32, top + row as i32, half),
                (0, top + 2 * row as i32, half),
                (0, top + 3 * row as i32, WIDTH - LEGEND_WIDTH),
            ]
        );
        let bottom: Vec<bool> = layout.panels.iter().map(|p| p.bottom_row).collect();
        assert_eq!(bottom, [false, false, false, false, false, true]);
        assert_eq!(layout.size, (WIDTH, 800));
    }

    #[test]
    fn many_rows_make_the_image_taller_instead_of_squeezing_them() {
        let layout = lay_out(&chart(panels(21), 3, 3));
        let heights: Vec<u32> = layout.panels.iter().map(|p| p.rect.height).collect();
        assert!(heights.iter().all(|&height| height == ROW_HEIGHT_MIN));
        assert_eq!(layout.size.1, TITLE_HEIGHT + 7 * ROW_HEIGHT_MIN);
    }

    #[test]
    fn a_legend_too_long_for_the_side_flows_into_columns_below_the_panels() {
        let short = lay_out(&chart(panels(1), 1, 10));
        assert!(
            short
                .legend
                .iter()
                .all(|entry| entry.at.0 == (WIDTH - LEGEND_WIDTH) as i32)
        );
        assert_eq!(short.size.1, 800);

        let layout = lay_out(&chart(panels(1), 1, 60));
        assert_eq!(layout.legend.len(), 60, "every entry is drawn");
        let lefts: std::collections::BTreeSet<i32> =
            layout.legend.iter().map(|entry| entry.at.0).collect();
        let width = (WIDTH / LEGEND_COLUMNS_MAX) as i32;
        assert_eq!(
            lefts.into_iter().collect::<Vec<_>>(),
            [0, width, 2 * width, 3 * width]
        );
        let lowest = layout.legend.iter().map(|entry| entry.at.1).max().unwrap();
        assert!(lowest < layout.size.1 as i32, "inside the image");
        assert!(
            layout.legend.iter().all(|entry| entry.at.1 > 800 - 50),
            "below the panels"
        );
        assert_eq!(
            layout.panels[0].rect.width, WIDTH,
            "the panels take the width"
        );
    }

    #[test]
    fn labels_wrap_at_spaces_within_their_width() {
        let lines = wrap("atomic, steady writes, 2% lost, fixed 20 s TTL", 15.0, 200);
        assert!(lines.len() > 1, "{lines:?}");
        assert!(lines.iter().all(|line| text_width(line, 15.0) <= 200));
        assert_eq!(
            lines.join(" "),
            "atomic, steady writes, 2% lost, fixed 20 s TTL"
        );
        assert_eq!(wrap("", 15.0, 200), [""]);
    }
}

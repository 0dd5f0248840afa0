//! Many variants over time: one panel for all of them while their lines stay apart, or small
//! multiples (one panel per variant, on shared axes) when they would not. Either way, a
//! variant whose lines are exactly an earlier variant's has circles along its lines and
//! "(same as X)" after its name, so it is not lost under the other.
//!
//! The rule: small multiples when more than [`SHARED_VARIANTS_MAX`] variants are drawn, or more
//! than [`SHARED_LINES_MAX`] lines (variants times what each shows), or when some variant's
//! lines would hide an earlier variant's: each of its lines lies within 1% of the axis' span
//! (on a log axis, within 5% of the value) of the same line of the other at
//! [`OVERLAP_SHARE_MIN`] of their points or more.
//!
//! On one panel, colour says the variant and line style what the line shows (its kind). On
//! small multiples each panel is one variant, named above it, and colour says the kind when
//! there are several.

use std::collections::BTreeMap;

use outagelab_report::{CountKey, RunReport, VariantReport};
use plotters::style::RGBColor;

use crate::axes::{count_axis, format_number};
use crate::chart::{
    Axis, Chart, Dash, INK, Key, LegendEntry, Line, Panel, Rule, Stroke, palette, segments,
    variant_line_stroke, variant_stroke,
};
use crate::timeline::{FaultShading, fault_shading, rates, time_axis, variant_fault_bands};

/// Up to this many variants share one panel, with up to this many lines in all.
pub(crate) const SHARED_VARIANTS_MAX: usize = 6;
pub(crate) const SHARED_LINES_MAX: usize = 12;
/// Two lines overlap where at least this share of their points are within a pixel or so.
const OVERLAP_SHARE_MIN: f64 = 0.9;
/// A line that lies under a later line (drawn over it) at this share of its points or more is
/// mostly hidden: it gets circles, and its variant says under which.
pub(crate) const HIDDEN_SHARE_MIN: f64 = 0.5;

/// What a line shows (a percentile, a gauge), and how it is drawn.
pub(crate) struct Kind {
    pub label: String,
    pub dash: Dash,
    pub width: u32,
    /// Its colour on a variant's own panel; `None`: the palette's, by kind.
    pub color: Option<RGBColor>,
}

impl Kind {
    pub fn new(label: impl Into<String>, dash: Dash, width: u32) -> Kind {
        Kind {
            label: label.into(),
            dash,
            width,
            color: None,
        }
    }

    /// Kinds told apart by line style alone (their colour says the variant on one panel):
    /// solid, dashed, dotted, long dashes, then the same again thinner.
    pub fn styled(labels: impl IntoIterator<Item = String>) -> Vec<Kind> {
        let kinds = labels.into_iter().enumerate().map(|(index, label)| {
            let stroke = variant_line_stroke(0, index);
            Kind::new(label, stroke.dash, stroke.width)
        });
        kinds.collect()
    }

    /// Its colour where colour says the kind.
    fn own_color(&self, index: usize) -> RGBColor {
        self.color.unwrap_or_else(|| palette(index))
    }
}

/// A line's runs of points, `(x, y)`, broken where it has no value.
pub(crate) type Segments = Vec<Vec<(f64, f64)>>;

/// One variant's part of a chart: its lines (each with the index of its kind) and its
/// configured limits. A chart has one part per variant, in the report's order.
#[derive(Default)]
pub(crate) struct Part {
    pub lines: Vec<(usize, Segments)>,
    pub limits: Vec<Limit>,
}

/// One part per variant of `report`, in its order, each filled by `fill`.
pub(crate) fn parts(
    report: &RunReport,
    mut fill: impl FnMut(&VariantReport, &mut Part),
) -> Vec<Part> {
    let parts = report.variants.iter().map(|variant| {
        let mut part = Part::default();
        fill(variant, &mut part);
        part
    });
    parts.collect()
}

impl Part {
    /// Adds a line of `kind`, unless it has no point to draw.
    pub fn push(&mut self, kind: usize, segments: Vec<Vec<(f64, f64)>>) {
        if !segments.is_empty() {
            self.lines.push((kind, segments));
        }
    }
}

/// A configured limit (or an objective), drawn as a labelled reference line: `what` names the
/// resource and its key (`bulkhead pool: max_concurrent`), the label defaults to it and the
/// value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Limit {
    pub what: String,
    pub value: f64,
    pub label: String,
    /// The chart's legend names it (an objective): see [`Rule::in_legend`].
    pub in_legend: bool,
}

impl Limit {
    pub fn new(what: impl Into<String>, value: f64) -> Limit {
        let what = what.into();
        Limit {
            label: format!("{what} {}", format_number(value)),
            what,
            value,
            in_legend: false,
        }
    }
}

/// How a chart's variants are drawn.
pub(crate) struct Arrangement {
    pub multiples: bool,
    /// For each variant, the first earlier variant with exactly the same lines.
    pub same_as: Vec<Option<usize>>,
    /// For each variant, on one panel, the first later variant (drawn over it) under whose
    /// line one of its lines lies at [`HIDDEN_SHARE_MIN`] of its points or more.
    pub under: Vec<Option<usize>>,
}

impl Arrangement {
    /// One panel for `parts` drawn against `y`, with the variants that are the same as an
    /// earlier one and those mostly hidden under a later one.
    pub fn shared(parts: &[Part], y: &Axis) -> Arrangement {
        Arrangement {
            multiples: false,
            same_as: same_as(parts),
            under: under(parts, y),
        }
    }
}

/// Decides between one panel and small multiples for `parts` drawn against `y`, where one
/// panel would hold every line of every part.
pub(crate) fn arrange(parts: &[Part], y: &Axis) -> Arrangement {
    arrange_lines(parts, y, SHARED_LINES_MAX)
}

/// [`arrange`] for a chart that spreads the lines over panels of at most `lines_max`.
pub(crate) fn arrange_lines(parts: &[Part], y: &Axis, lines_max: usize) -> Arrangement {
    let same_as = same_as(parts);
    let drawn = parts.iter().filter(|part| !part.lines.is_empty()).count();
    let lines: usize = parts.iter().map(|part| part.lines.len()).sum();
    let hidden = (1..parts.len())
        .any(|later| (0..later).any(|earlier| overlaps(&parts[later], &parts[earlier], y)));
    let multiples = drawn > SHARED_VARIANTS_MAX || lines > lines_max || hidden;
    Arrangement {
        multiples,
        same_as,
        under: if multiples {
            vec![None; parts.len()]
        } else {
            under(parts, y)
        },
    }
}

/// For each part, the first later part under whose line of the same kind one of its lines
/// lies at [`HIDDEN_SHARE_MIN`] of its points or more (on one panel, later lines are drawn
/// over earlier ones). A part the same as an earlier one is marked already, and the part it
/// is the same as is not hidden by it alone: both have circles.
fn under(parts: &[Part], y: &Axis) -> Vec<Option<usize>> {
    let same = same_as(parts);
    (0..parts.len())
        .map(|earlier| {
            let hidden_by = |later: &usize| {
                parts[earlier].lines.iter().any(|(kind, line)| {
                    let over = parts[*later].lines.iter().filter(|(k, _)| k == kind);
                    over.into_iter()
                        .any(|(_, top)| hidden_share(line, top, y) >= HIDDEN_SHARE_MIN)
                })
            };
            (earlier + 1..parts.len())
                .filter(|&later| same[later] != Some(earlier))
                .find(hidden_by)
        })
        .collect()
}

/// The share of `line`'s points that `top` covers: a point of `top` at the same x, near in y.
pub(crate) fn hidden_share(line: &[Vec<(f64, f64)>], top: &[Vec<(f64, f64)>], y: &Axis) -> f64 {
    let top: BTreeMap<u64, f64> = top
        .iter()
        .flatten()
        .map(|&(x, value)| (x.to_bits(), value))
        .collect();
    let points: Vec<&(f64, f64)> = line.iter().flatten().collect();
    if points.is_empty() {
        return 0.0;
    }
    let covered = points.iter().filter(|(x, value)| {
        top.get(&x.to_bits())
            .is_some_and(|&over| near(y, *value, over))
    });
    covered.count() as f64 / points.len() as f64
}

/// Whether two values on axis `y` are drawn within a pixel or so of each other: within 1% of
/// a linear axis' span, within 5% on a log axis (values under its start are on its edge).
fn near(y: &Axis, a: f64, b: f64) -> bool {
    if y.log {
        let (low, high) = (a.min(b), a.max(b));
        high <= y.range.start || high <= low * 1.05
    } else {
        (a - b).abs() <= (y.range.end - y.range.start) * 0.01
    }
}

fn same_as(parts: &[Part]) -> Vec<Option<usize>> {
    (0..parts.len())
        .map(|later| {
            let lines = &parts[later].lines;
            (0..later).find(|&earlier| !lines.is_empty() && parts[earlier].lines == *lines)
        })
        .collect()
}

/// Whether every line of `later` lies on the same kind's line of `earlier`.
fn overlaps(later: &Part, earlier: &Part, y: &Axis) -> bool {
    let kinds = |part: &Part| part.lines.iter().map(|(kind, _)| *kind).collect::<Vec<_>>();
    if later.lines.is_empty() || kinds(later) != kinds(earlier) {
        return false;
    }
    let close = |a: f64, b: f64| near(y, a, b);
    later
        .lines
        .iter()
        .zip(&earlier.lines)
        .all(|((_, a), (_, b))| {
            let (a, b): (Vec<_>, Vec<_>) =
                (a.iter().flatten().collect(), b.iter().flatten().collect());
            if a.len() != b.len() {
                return false;
            }
            let near = a
                .iter()
                .zip(&b)
                .filter(|(p, q)| p.0 == q.0 && close(p.1, q.1));
            near.count() as f64 >= a.len() as f64 * OVERLAP_SHARE_MIN
        })
}

/// Every limit's value, for sizing the y-axis.
pub(crate) fn limit_values(parts: &[Part]) -> Vec<f64> {
    let limits = parts.iter().flat_map(|part| &part.limits);
    limits.map(|limit| limit.value).collect()
}

/// Every line of `parts`, for sizing the y-axis.
pub(crate) fn all_lines(parts: &[Part], kinds: &[Kind]) -> Vec<Line> {
    let lines = parts
        .iter()
        .enumerate()
        .flat_map(|(variant, part)| styled(part, variant, kinds, false, false));
    lines.collect()
}

/// What a chart of one quantity over time is called and how its y-axis is made.
pub(crate) struct OverTime<'a> {
    pub name: &'static str,
    pub title: &'a str,
    /// The y-axis for every line and limit value.
    pub y: &'a dyn Fn(&[Line], &[f64]) -> Axis,
    /// The legend's heading over the kinds.
    pub heading: &'a str,
    pub kinds: Vec<Kind>,
}

/// A chart of event counters over time, as rates per second, one line style per counter:
/// the counters `label` names (its text is the legend's), in name order (the order lines get
/// their dash, as the series are stored); with `only_active`, only those some variant counted
/// anything on. `None` when no counter is left.
pub(crate) fn counts_over_time(
    report: &RunReport,
    label: fn(&CountKey) -> Option<String>,
    only_active: bool,
    spec: (&'static str, &str, &str, &str),
) -> Option<Chart> {
    let (name, title, y_label, heading) = spec;
    let counters: Vec<CountKey> = report
        .variants
        .iter()
        .flat_map(|variant| variant.series.counters())
        .filter(|(key, values)| {
            label(key).is_some() && (!only_active || values.iter().any(|&v| v > 0))
        })
        .map(|(key, _)| (key.to_string(), key))
        .collect::<BTreeMap<String, CountKey>>()
        .into_values()
        .collect();
    if counters.is_empty() {
        return None;
    }
    let kinds = Kind::styled(counters.iter().map(|key| label(key).unwrap_or_default()));
    let parts = parts(report, |variant, part| {
        for (kind, key) in counters.iter().enumerate() {
            if let Some(values) = variant.series.count(key) {
                let per_second = rates(variant, |bucket| values.get(bucket).copied().unwrap_or(0));
                part.push(kind, segments(per_second));
            }
        }
    });
    let y = |lines: &[Line], limits: &[f64]| count_axis(y_label, lines, limits);
    let spec = OverTime {
        name,
        title,
        y: &y,
        heading,
        kinds,
    };
    Some(over_time(report, spec, &parts))
}

/// A chart of one quantity over time: every variant on one panel, or small multiples.
pub(crate) fn over_time(report: &RunReport, spec: OverTime<'_>, parts: &[Part]) -> Chart {
    let time = time_axis(report);
    let y = (spec.y)(&all_lines(parts, &spec.kinds), &limit_values(parts));
    let arrangement = arrange(parts, &y);
    let axes = (&time, &y);
    let (panels, columns) = if arrangement.multiples {
        let panels = multiple_panels(report, parts, &spec.kinds, &arrangement, axes);
        (panels, grid_columns(parts.len()))
    } else {
        let panel = shared_panel(report, parts, &spec.kinds, &arrangement, axes);
        (vec![panel], 1)
    };
    let faults = fault_shading(report, &time, arrangement.multiples);
    // On small multiples each panel names its variant, and colour says the kind: a list of
    // the variants' colours would match nothing drawn.
    let variants = !arrangement.multiples;
    let legend = legend(
        report,
        &arrangement,
        variants,
        (spec.heading, &spec.kinds),
        faults,
    );
    Chart {
        name: spec.name,
        title: format!("{}: {}", report.scenario, spec.title),
        panels,
        columns,
        legend,
    }
}

/// A variant's lines, coloured by variant (or, on its own panel with several kinds, by kind),
/// dashed by kind, marked when the variant is the same as an earlier one.
fn styled(part: &Part, variant: usize, kinds: &[Kind], own_panel: bool, marked: bool) -> Vec<Line> {
    let stroke = |kind: usize| {
        let Kind { dash, width, .. } = kinds[kind];
        match (kinds.len(), own_panel) {
            (1, _) => variant_stroke(variant),
            (_, true) => Stroke {
                color: kinds[kind].own_color(kind),
                dash,
                width,
            },
            (_, false) => Stroke {
                color: palette(variant),
                dash,
                width,
            },
        }
    };
    let lines = part.lines.iter().map(|(kind, segments)| Line {
        segments: segments.clone(),
        stroke: stroke(*kind),
        marks: marked,
    });
    lines.collect()
}

/// All variants on one panel, over the fault windows of all of them (labelled), with their
/// limits.
pub(crate) fn shared_panel(
    report: &RunReport,
    parts: &[Part],
    kinds: &[Kind],
    arrangement: &Arrangement,
    (time, y): (&Axis, &Axis),
) -> Panel {
    let mut panel = Panel::new(time.clone(), y.clone());
    panel.bands = fault_shading(report, time, false).bands;
    for (variant, part) in parts.iter().enumerate() {
        let marked = arrangement.same_as[variant].is_some()
            || arrangement.under.get(variant).is_some_and(Option::is_some);
        panel
            .lines
            .extend(styled(part, variant, kinds, false, marked));
    }
    panel.rules = rules(parts, true);
    panel
}

/// One panel per variant, named above it, over its own fault windows, with its own limits.
pub(crate) fn multiple_panels(
    report: &RunReport,
    parts: &[Part],
    kinds: &[Kind],
    arrangement: &Arrangement,
    (time, y): (&Axis, &Axis),
) -> Vec<Panel> {
    let panels = report.variants.iter().zip(parts).enumerate();
    panels
        .map(|(index, (variant, part))| {
            let same = arrangement.same_as[index];
            let mut panel = Panel::new(time.clone(), y.clone());
            panel.title = Some(variant_name(report, index, same));
            panel.bands = variant_fault_bands(variant, time);
            panel.lines = styled(part, index, kinds, true, same.is_some());
            panel.rules = rules(std::slice::from_ref(part), false);
            panel
        })
        .collect()
}

/// Columns of small multiples for `count` variants: one up to 3, two up to 8, then three.
pub(crate) fn grid_columns(count: usize) -> usize {
    match count {
        0..=3 => 1,
        4..=8 => 2,
        _ => 3,
    }
}

/// A variant's name, and which variant it is the same as.
pub(crate) fn variant_name(report: &RunReport, variant: usize, same_as: Option<usize>) -> String {
    let name = &report.variants[variant].name;
    match same_as {
        Some(other) => format!("{name} (same as {})", report.variants[other].name),
        None => name.clone(),
    }
}

/// The limits as reference lines: one per value, its labels joined. On one panel, a limit
/// whose value differs between variants is drawn in each variant's colour.
fn rules(parts: &[Part], shared: bool) -> Vec<Rule> {
    let agreed = |what: &str| {
        let mut values = parts
            .iter()
            .flat_map(|part| &part.limits)
            .filter(|limit| limit.what == what)
            .map(|limit| limit.value);
        let first = values.next();
        values.all(|value| Some(value) == first)
    };
    let mut rules: Vec<Rule> = Vec::new();
    for (variant, part) in parts.iter().enumerate() {
        for limit in &part.limits {
            let label = limit.label.clone();
            let color = if !shared || agreed(&limit.what) {
                INK
            } else {
                palette(variant)
            };
            let same_line = rules
                .iter_mut()
                .find(|rule| rule.at == limit.value && rule.stroke.color == color);
            match same_line {
                Some(rule) => {
                    rule.label = joined(&rule.label, &label);
                    rule.in_legend &= limit.in_legend;
                }
                None => rules.push(Rule {
                    at: limit.value,
                    vertical: false,
                    stroke: Stroke {
                        color,
                        dash: Dash::Dashed,
                        width: 1,
                    },
                    label,
                    in_legend: limit.in_legend,
                }),
            }
        }
    }
    rules
}

/// `label` added to the labels of a rule already labelled `labels` (joined by ` · `), once;
/// a label of the owner the last one names says its owner once: "database pg: capacity 20 ·
/// max_connections 20", not the owner twice (which ran into the next panel, issue 31).
fn joined(labels: &str, label: &str) -> String {
    let mut owner = "";
    for piece in labels.split(" · ") {
        if let Some((named, _)) = piece.split_once(": ") {
            owner = named;
        }
        let full = if piece.contains(": ") || owner.is_empty() {
            piece.to_owned()
        } else {
            format!("{owner}: {piece}")
        };
        if full == label {
            return labels.to_owned();
        }
    }
    match label.split_once(": ") {
        Some((named, rest)) if named == owner => format!("{labels} · {rest}"),
        _ => format!("{labels} · {label}"),
    }
}

/// The legend of a chart over time: the `variants` in their colours (with the one each is
/// the same as), what each kind of line shows under `heading`, and the faults.
pub(crate) fn legend(
    report: &RunReport,
    arrangement: &Arrangement,
    variants: bool,
    (heading, kinds): (&str, &[Kind]),
    faults: FaultShading,
) -> Vec<LegendEntry> {
    let mut legend = Vec::new();
    if variants {
        legend.push(LegendEntry::heading("Variants"));
    }
    for index in (0..report.variants.len()).filter(|_| variants) {
        let same = arrangement.same_as.get(index).copied().flatten();
        let under = arrangement.under.get(index).copied().flatten();
        let stroke = Stroke {
            width: 3,
            ..variant_stroke(index)
        };
        let mut label = variant_name(report, index, same);
        if let (None, Some(over)) = (same, under) {
            let over = &report.variants[over].name;
            label = format!("{label} (circled: mostly under {over})");
        }
        legend.push(LegendEntry {
            key: match (same, under) {
                (None, None) => Key::Line(stroke),
                _ => Key::Marked(stroke),
            },
            label,
        });
    }
    if !heading.is_empty() {
        legend.push(LegendEntry::heading(heading));
    }
    for (index, kind) in kinds.iter().enumerate() {
        let color = if arrangement.multiples && kinds.len() > 1 {
            kind.own_color(index)
        } else {
            INK
        };
        let stroke = Stroke {
            color,
            dash: kind.dash,
            width: kind.width,
        };
        legend.push(LegendEntry {
            key: Key::Line(stroke),
            label: kind.label.clone(),
        });
    }
    legend.extend(faults.legend);
    legend
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(log: bool) -> Axis {
        Axis {
            description: String::new(),
            range: if log { 1.0..1000.0 } else { 0.0..100.0 },
            log,
            categories: false,
            category_names: Vec::new(),
            clock_start_unix_ms: None,
            zero_band: None,
        }
    }

    fn part(values: &[f64]) -> Part {
        let points = values.iter().enumerate().map(|(x, &y)| (x as f64, y));
        Part {
            lines: vec![(0, vec![points.collect()])],
            limits: Vec::new(),
        }
    }

    #[test]
    fn identical_variants_are_named_after_the_first_they_equal() {
        let parts = [
            part(&[1.0, 2.0]),
            part(&[5.0, 6.0]),
            part(&[1.0, 2.0]),
            part(&[5.0, 6.0]),
            Part::default(),
            Part::default(),
        ];
        let arrangement = arrange(&parts, &axis(false));
        assert_eq!(
            arrangement.same_as,
            [None, None, Some(0), Some(1), None, None],
            "variants without lines are the same as nothing"
        );
        assert!(arrangement.multiples, "identical lines hide each other");
    }

    #[test]
    fn small_multiples_when_many_variants_or_when_lines_would_hide_others() {
        let apart = |count: usize| -> Vec<Part> {
            (0..count)
                .map(|index| part(&[index as f64 * 10.0, index as f64 * 10.0 + 5.0]))
                .collect()
        };
        assert!(!arrange(&apart(SHARED_VARIANTS_MAX), &axis(false)).multiples);
        assert!(arrange(&apart(SHARED_VARIANTS_MAX + 1), &axis(false)).multiples);
        let mut crowded = apart(3);
        for part in &mut crowded {
            let line = part.lines[0].1.clone();
            part.lines.extend((1..5).map(|kind| (kind, line.clone())));
        }
        assert!(
            arrange(&crowded, &axis(false)).multiples,
            "3 variants of 5 lines each"
        );
        // Within 1% of a 0..100 axis at 9 of 10 points: hidden.
        let base: Vec<f64> = (0..10).map(|x| x as f64 * 10.0).collect();
        let mut near = base.clone();
        near.iter_mut().for_each(|y| *y += 0.9);
        near[3] += 20.0;
        assert!(arrange(&[part(&base), part(&near)], &axis(false)).multiples);
        near[4] += 20.0;
        assert!(!arrange(&[part(&base), part(&near)], &axis(false)).multiples);
        // On a log axis, within 5%; zeros on the bottom edge overlap.
        let log = axis(true);
        assert!(arrange(&[part(&[0.0, 100.0]), part(&[0.5, 104.0])], &log).multiples);
        assert!(!arrange(&[part(&[0.0, 100.0]), part(&[0.5, 110.0])], &log).multiples);
    }

    #[test]
    fn limits_become_one_labelled_rule_per_value() {
        let limit = Limit::new;
        let mut first = part(&[1.0]);
        first.limits = vec![limit("pool: permits", 200.0), limit("db: capacity", 16.0)];
        let mut second = part(&[2.0]);
        second.limits = vec![
            limit("pool: permits", 200.0),
            limit("db: capacity", 32.0),
            limit("semaphore: cap", 200.0),
        ];
        let parts = [first, second];
        let shared = rules(&parts, true);
        let drawn: Vec<(f64, &str)> = shared.iter().map(|r| (r.at, r.label.as_str())).collect();
        assert_eq!(
            drawn,
            [
                (200.0, "pool: permits 200 · semaphore: cap 200"),
                (16.0, "db: capacity 16"),
                (32.0, "db: capacity 32"),
            ]
        );
        assert_eq!(shared[0].stroke.color, INK, "the same in every variant");
        assert_eq!(
            (shared[1].stroke.color, shared[2].stroke.color),
            (palette(0), palette(1)),
            "a limit that differs is drawn in each variant's colour"
        );
        // Two limits of one owner at one value name the owner once, and once only.
        let mut pool = part(&[1.0]);
        pool.limits = vec![
            limit("database pg: capacity", 20.0),
            limit("database pg: max_connections", 20.0),
            limit("database pg: capacity", 20.0),
        ];
        let mut again = part(&[1.0]);
        again.limits = vec![limit("database pg: max_connections", 20.0)];
        let labels: Vec<String> = rules(&[pool, again], true)
            .into_iter()
            .map(|rule| rule.label)
            .collect();
        assert_eq!(labels, ["database pg: capacity 20 · max_connections 20"]);
        let own = rules(&parts[1..], false);
        assert!(own.iter().all(|rule| rule.stroke.color == INK));
    }
}

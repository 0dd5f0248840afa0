//! A study's chart (`run --seeds ... --plot DIR`): one panel per chosen metric, the mean over
//! the seeds with its 95% interval as an error bar. For a sweep, x is the swept value (the
//! first axis of a grid) and each line is one variant (with the grid's other values), so
//! variants never zig-zag into one line; a cross marks a point whose means satisfy the
//! constraints, a ring the best one. Without a sweep, each variant is one point at its index.

use outagelab_report::study::{Constraint, Study};

use crate::axes::{format_number, value_axis};
use crate::chart::{
    Axis, Chart, Dash, INK, Key, LegendEntry, Line, Marker, Panel, Rule, Stroke, segments,
    variant_stroke, y_values,
};

/// At most this many metrics get a panel (the table has them all).
pub(crate) const PANELS_MAX: usize = 4;

/// A constraint's threshold: a dashed line in ink across its metric's panel.
const CONSTRAINT_STROKE: Stroke = Stroke {
    color: INK,
    dash: Dash::Dashed,
    width: 1,
};

/// A line of the chart: the variants that differ only by the first swept value.
struct Series {
    label: String,
    /// Indices into `study.variants`, in x order.
    members: Vec<usize>,
}

/// `None` when the study has no metric with a value to draw.
pub(crate) fn chart(study: &Study) -> Option<Chart> {
    let swept = study.sweep.is_some();
    let series = series(study);
    let x_of = |index: usize| -> f64 {
        if swept {
            study.variants[index].sweep_x.unwrap_or(f64::NAN)
        } else {
            index as f64 + 1.0
        }
    };
    // A variant the sweep does not apply to (`[sweep] variants`) ran once, at the file's
    // value: it is drawn as a dashed level across the swept range, not as a point at some x.
    let swept_range = {
        let xs = (study.variants.iter()).filter_map(|v| v.sweep_x.filter(|x| x.is_finite()));
        xs.fold(None, |range: Option<(f64, f64)>, x| {
            Some(range.map_or((x, x), |(low, high)| (low.min(x), high.max(x))))
        })
    };
    let unswept = |index: usize| swept && study.variants[index].sweep_x.is_none();
    let constraints: Vec<Constraint> = (study.selection.constraints.iter())
        .filter_map(|text| Constraint::parse(text).ok())
        .collect();
    let metrics: Vec<&String> = study.selection.metrics.iter().take(PANELS_MAX).collect();
    let offsets = dodge(study, &series, &metrics);
    let mut panels = Vec::new();
    for metric in metrics {
        let mut lines = Vec::new();
        let mut markers = Vec::new();
        // The constraints on this panel's metric: a point whose mean breaks one is a ring.
        let here: Vec<&Constraint> = (constraints.iter())
            .filter(|c| c.metric() == *metric)
            .collect();
        let mark = |at: (f64, f64), color, best: bool, satisfies: Option<bool>| {
            if here.iter().any(|c| !c.holds_for(at.1)) {
                Some(Marker::ring(at, color))
            } else if satisfies == Some(true) {
                Some(Marker::cross(at, if best { INK } else { color }))
            } else {
                None
            }
        };
        for (s, one) in series.iter().enumerate() {
            let stroke = variant_stroke(s);
            let color = stroke.color;
            let offset = offsets.get(s).copied().unwrap_or(0.0);
            if let ([index], Some((low, high))) = (one.members.as_slice(), swept_range)
                && unswept(*index)
            {
                let variant = &study.variants[*index];
                if let Some(across) = variant.metrics.get(metric) {
                    let level = Stroke {
                        dash: Dash::Dashed,
                        ..stroke
                    };
                    let points = vec![(low, Some(across.mean)), (high, Some(across.mean))];
                    lines.push(Line::new(segments(points), level));
                    let at = (low, across.mean);
                    markers.extend(mark(at, color, variant.best, variant.satisfies));
                }
                continue;
            }
            let mut points = Vec::new();
            for &index in &one.members {
                let variant = &study.variants[index];
                let across = variant.metrics.get(metric);
                let x = x_of(index) + offset;
                points.push((x, across.map(|a| a.mean)));
                if let Some([low, high]) = across.and_then(|a| a.ci95) {
                    let bar = Stroke {
                        width: 1,
                        dash: Dash::Solid,
                        ..stroke
                    };
                    lines.push(Line::new(vec![vec![(x, low), (x, high)]], bar));
                }
                if let Some(across) = across {
                    let at = (x, across.mean);
                    markers.extend(mark(at, color, variant.best, variant.satisfies));
                }
            }
            // Where series are side by side, each point is a dot too, so that two equal
            // points show as two dots in their colours, one beside the other.
            if !offsets.is_empty() {
                let dots = points.iter().filter_map(|&(x, y)| Some(vec![(x, y?)]));
                let dots = dots.filter(|dot| dot[0].1.is_finite());
                lines.push(Line::new(dots.collect(), stroke));
            }
            // Without a sweep a variant is one point: a short tick marks it.
            if !swept {
                points = points
                    .iter()
                    .flat_map(|&(x, y)| [(x - 0.15, y), (x + 0.15, y), (x + 0.16, None)])
                    .collect();
            }
            // Side by side, the earlier series' lines are wider, so that where two lie on each
            // other the earlier shows along both edges of the later.
            let stroke = match offsets.len() {
                0 => stroke,
                count => Stroke {
                    width: stroke.width + 2 * (count - 1 - s).min(3) as u32,
                    ..stroke
                },
            };
            lines.push(Line::new(segments(points), stroke));
        }
        if lines.iter().all(|line| line.segments.is_empty()) {
            continue;
        }
        // Each threshold a constraint holds this metric to, labelled with the constraint; the
        // axis reaches it, so the line is drawn even when every point is far from it.
        let rules: Vec<Rule> = (here.iter())
            .flat_map(|c| c.thresholds().into_iter().map(move |at| (c, at)))
            .map(|(c, at)| Rule {
                at,
                vertical: false,
                stroke: CONSTRAINT_STROKE,
                label: format!("constraint: {}", c.text()),
                in_legend: false,
            })
            .collect();
        let thresholds = rules.iter().map(|rule| rule.at);
        let y = value_axis(
            metric_description(metric),
            y_values(&lines).chain(thresholds),
        );
        let x = x_axis(
            study,
            series.iter().flat_map(|s| &s.members).map(|&i| x_of(i)),
        );
        let mut panel = Panel::new(x, y);
        panel.lines = lines;
        panel.markers = markers;
        panel.rules = rules;
        panels.push(panel);
    }
    if panels.is_empty() {
        return None;
    }
    let [low, high] = study.seeds;
    let mut legend = vec![LegendEntry::heading(format!(
        "mean over seeds {low}..{high}, 95% CI bars"
    ))];
    for (s, one) in series.iter().enumerate() {
        let level = matches!(one.members.as_slice(), [index] if unswept(*index));
        legend.push(crate::sweep::series_entry(s, &one.label, level));
    }
    if let (Some(step), Some(sweep)) = (offsets.get(1).map(|x| x - offsets[0]), &study.sweep) {
        let unit = match sweep.unit.as_str() {
            "" | "(index)" => &sweep.label,
            unit => unit,
        };
        legend.push(LegendEntry::heading(format!(
            "some points are equal: the lines side by side, {} {unit} apart, the earlier wider",
            format_number(step)
        )));
    }
    if study.variants.iter().any(|v| v.satisfies.is_some()) {
        legend.push(LegendEntry {
            key: Key::Cross(variant_stroke(0).color),
            label: "satisfies the constraints".to_owned(),
        });
        for constraint in &study.selection.constraints {
            legend.push(LegendEntry::heading(format!("  {constraint}")));
        }
        if !constraints.is_empty() {
            legend.push(LegendEntry {
                key: Key::Line(CONSTRAINT_STROKE),
                label: "a constraint's threshold, on its metric".to_owned(),
            });
            legend.push(LegendEntry {
                key: Key::Ring(variant_stroke(0).color),
                label: "breaks the constraint on this metric".to_owned(),
            });
        }
        match study.variants.iter().find(|v| v.best) {
            Some(best) => {
                legend.push(LegendEntry {
                    key: Key::Cross(INK),
                    label: format!("best: {}", best.name),
                });
                if let Some(objective) = &study.selection.objective {
                    legend.push(LegendEntry::heading(format!("  by {objective}")));
                }
            }
            None => legend.push(LegendEntry::heading("no point satisfies them")),
        }
    }
    let against = match &study.sweep {
        Some(sweep) => format!("against {}", sweep.label),
        None => "by variant".to_owned(),
    };
    Some(Chart::stacked(
        "study",
        format!("{}: {against}, {} seeds", study.scenario, high - low + 1),
        panels,
        legend,
    ))
}

/// The x offset of each series (empty: none), where two series have equal points on some
/// panel, which one would otherwise draw exactly over the other (issue 31): the series side
/// by side, [`DODGE_SHARE`] of the swept range apart (at most a third of the closest two
/// swept values' gap shared by all), centred on the true x, in the legend's order.
fn dodge(study: &Study, series: &[Series], metrics: &[&String]) -> Vec<f64> {
    let swept: Vec<&Series> = (series.iter())
        .filter(|one| {
            one.members
                .iter()
                .all(|&i| study.variants[i].sweep_x.is_some())
        })
        .collect();
    if study.sweep.is_none() || swept.len() < 2 {
        return Vec::new();
    }
    let xs: Vec<f64> = (study.variants.iter())
        .filter_map(|variant| variant.sweep_x.filter(|x| x.is_finite()))
        .collect();
    let mut sorted = xs.clone();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    let span = sorted
        .last()
        .zip(sorted.first())
        .map_or(0.0, |(high, low)| high - low);
    let gap = (sorted.windows(2).map(|pair| pair[1] - pair[0])).fold(f64::INFINITY, f64::min);
    let count = series.len() as f64;
    let step = (span * DODGE_SHARE).min(gap / 3.0 / (count - 1.0));
    let equal = metrics.iter().any(|metric| {
        let points = |one: &Series| -> Vec<(f64, f64)> {
            let of = |&index: &usize| {
                let variant = &study.variants[index];
                Some((variant.sweep_x?, variant.metrics.get(metric.as_str())?.mean))
            };
            one.members.iter().filter_map(of).collect()
        };
        let all: Vec<Vec<(f64, f64)>> = swept.iter().map(|one| points(one)).collect();
        let means = all.iter().flatten().map(|&(_, mean)| mean);
        let (low, high) = means.fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), mean| {
            (low.min(mean), high.max(mean))
        });
        let near = (high - low).max(high.abs()) * 0.01;
        (0..all.len()).any(|a| {
            (a + 1..all.len()).any(|b| {
                (all[a].iter()).any(|p| {
                    all[b]
                        .iter()
                        .any(|q| p.0 == q.0 && (p.1 - q.1).abs() <= near)
                })
            })
        })
    });
    if !(equal && step.is_finite() && step > 0.0) {
        return Vec::new();
    }
    let middle = (count - 1.0) / 2.0;
    (0..series.len())
        .map(|s| (s as f64 - middle) * step)
        .collect()
}

/// How far apart side-by-side series are drawn, as a share of the swept range: about 6 pixels
/// on a chart's panel.
const DODGE_SHARE: f64 = 0.008;

/// A metric's path with its unit, for its axis: the summary's names carry their unit
/// (`latency_ms.all.p99`, `peak_bytes`); a peak counts things at once; the rest are counts.
pub(crate) fn metric_description(path: &str) -> String {
    let segments: Vec<&str> = path.split('.').collect();
    let last = segments.last().copied().unwrap_or_default();
    let unit = if segments.iter().any(|s| s.ends_with("_ms")) {
        "ms"
    } else if segments.iter().any(|s| s.ends_with("_bytes")) {
        "bytes"
    } else if last.starts_with("peak") {
        "at once"
    } else {
        "count"
    };
    format!("{path} ({unit})")
}

/// Groups the variants into lines: for a sweep, those with the same name once the first
/// axis's `label=value` is taken out; otherwise one line per variant.
fn series(study: &Study) -> Vec<Series> {
    let mut all: Vec<Series> = Vec::new();
    for (index, variant) in study.variants.iter().enumerate() {
        let label = match (&study.sweep, variant.point.first()) {
            (Some(_), Some((axis, _))) => crate::sweep::series_label(&variant.name, axis),
            _ => format!("{}. {}", index + 1, variant.name),
        };
        match all.iter_mut().find(|s| s.label == label) {
            Some(series) => series.members.push(index),
            None => all.push(Series {
                label,
                members: vec![index],
            }),
        }
    }
    for series in &mut all {
        series.members.sort_by(|&a, &b| {
            let x = |i: usize| study.variants[i].sweep_x.unwrap_or(i as f64);
            x(a).total_cmp(&x(b))
        });
    }
    all
}

/// The x values with a margin (linear: the renderer draws log scales on y only); without a
/// sweep, the variants' numbers as categories.
fn x_axis(study: &Study, values: impl Iterator<Item = f64>) -> Axis {
    let values: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let description = match &study.sweep {
        Some(sweep) if sweep.unit.is_empty() || sweep.unit == "(index)" => sweep.label.clone(),
        Some(sweep) => format!("{} ({})", sweep.label, sweep.unit),
        None => "variant (numbered as in the legend)".to_owned(),
    };
    if min > max {
        return Axis {
            description,
            range: 0.0..1.0,
            log: false,
            categories: false,
            category_names: Vec::new(),
            clock_start_unix_ms: None,
            zero_band: None,
        };
    }
    if let Some(sweep) = study
        .sweep
        .as_ref()
        .filter(|sweep| !sweep.values.is_empty())
    {
        return crate::sweep::words_axis(description, sweep);
    }
    if study.sweep.is_none() {
        // Variants numbered 1, 2, 3: whole-number ticks, and half a step each side, so the
        // first and last variants' marks (0.15 each side of their number) are whole.
        return Axis {
            description,
            range: min - 0.5..max + 0.5,
            log: false,
            categories: true,
            category_names: Vec::new(),
            clock_start_unix_ms: None,
            zero_band: None,
        };
    }
    let pad = if max > min {
        (max - min) * 0.06
    } else {
        min.abs().max(1.0) * 0.5
    };
    Axis {
        description,
        range: min - pad..max + pad,
        log: false,
        categories: false,
        category_names: Vec::new(),
        clock_start_unix_ms: None,
        zero_band: None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use outagelab_report::SweepInfo;
    use outagelab_report::study::{Across, Selection, StudyVariant};

    use super::*;
    use crate::chart::MarkerShape;

    /// Two rules swept over three open durations; `timeouts` falls with the duration.
    fn study() -> Study {
        let mut variants = Vec::new();
        for (rule, base) in [("r4j", 100.0), ("polly", 40.0)] {
            for (x, text) in [(500.0, "500ms"), (1000.0, "1s"), (2000.0, "2s")] {
                let mean = base * 1000.0 / x;
                let metrics = BTreeMap::from([(
                    "timeouts".to_owned(),
                    Across {
                        n: 5,
                        mean,
                        ci95: Some([mean - 3.0, mean + 3.0]),
                        min: mean - 5.0,
                        max: mean + 5.0,
                        vs_baseline: None,
                    },
                )]);
                variants.push(StudyVariant {
                    name: format!("{rule} / open={text}"),
                    sweep_x: Some(x),
                    point: vec![("open".to_owned(), text.to_owned())],
                    expectations: Vec::new(),
                    verdicts: Vec::new(),
                    metrics,
                    satisfies: Some(mean <= 100.0),
                    best: rule == "polly" && x == 500.0,
                    tied: false,
                });
            }
        }
        let mut study = Study::header(
            "t",
            [1, 5],
            "r4j / open=500ms",
            Some(SweepInfo {
                label: "open".into(),
                parameter: "breakers.b.open_for".into(),
                unit: "ms".into(),
                values: Vec::new(),
            }),
            Selection {
                metrics: vec!["timeouts".into(), "absent".into()],
                constraints: vec!["timeouts <= 100".into()],
                objective: Some("min timeouts".into()),
                tie_break: None,
            },
            variants,
        );
        study.runs.clear();
        study
    }

    #[test]
    fn a_sweep_draws_one_line_per_variant_with_interval_bars_and_the_best_point() {
        let chart = chart(&study()).unwrap();
        // `absent` has no value anywhere: no panel for it.
        assert_eq!(chart.panels.len(), 1);
        let panel = &chart.panels[0];
        let long: Vec<&Line> = panel
            .lines
            .iter()
            .filter(|line| line.segments.iter().any(|s| s.len() == 3))
            .collect();
        assert_eq!(
            long.len(),
            2,
            "one line per rule, not one zig-zag through all six"
        );
        assert_eq!(
            long[0].segments[0],
            [(500.0, 200.0), (1000.0, 100.0), (2000.0, 50.0)]
        );
        let bars = panel.lines.iter().filter(|line| {
            line.segments.len() == 1 && line.segments[0].len() == 2 && line.stroke.width == 1
        });
        assert_eq!(bars.count(), 6, "an interval bar per point");
        // Five points satisfy `timeouts <= 100`, a cross each, the best in ink; the sixth
        // breaks it, a ring.
        let crosses = (panel.markers.iter()).filter(|m| m.shape == MarkerShape::Cross);
        assert_eq!(crosses.clone().count(), 5);
        assert_eq!(crosses.filter(|m| m.color == INK).count(), 1);
        assert_eq!(panel.markers.len(), 6);
        let labels: Vec<&str> = chart.legend.iter().map(|e| e.label.as_str()).collect();
        assert!(
            labels.contains(&"r4j") && labels.contains(&"polly"),
            "{labels:?}"
        );
        assert!(labels.contains(&"best: polly / open=500ms"), "{labels:?}");
    }

    /// A variant the sweep does not apply to ran once: it is a dashed level across the
    /// swept range (from the lowest to the highest swept x), not a point at some x.
    #[test]
    fn a_variant_the_sweep_skips_is_a_level_across_the_swept_range() {
        let mut study = study();
        let mut baseline = study.variants[0].clone();
        baseline.name = "no breaker".to_owned();
        baseline.sweep_x = None;
        baseline.point = vec![("open".to_owned(), "-".to_owned())];
        baseline.best = false;
        study.variants.insert(0, baseline);
        let chart = chart(&study).unwrap();
        let panel = &chart.panels[0];
        let levels: Vec<&Line> = (panel.lines.iter())
            .filter(|line| line.stroke.dash == Dash::Dashed)
            .collect();
        assert_eq!(levels.len(), 1, "{:?}", panel.lines);
        assert_eq!(levels[0].segments, [vec![(500.0, 200.0), (2000.0, 200.0)]]);
        let labels: Vec<&str> = chart.legend.iter().map(|e| e.label.as_str()).collect();
        assert!(labels.contains(&"no breaker (not swept)"), "{labels:?}");
        assert!(
            panel.markers.iter().all(|m| m.at.0.is_finite()),
            "no point drawn at an x it does not have"
        );
    }

    /// Issue 31: where two series had equal points (the same mean at the same swept value),
    /// the later was drawn exactly over the earlier, which vanished. They are drawn side by
    /// side, each point a dot of its series' colour, the earlier line wider, and the legend
    /// says so; series with no equal point stay at their true x.
    #[test]
    fn equal_points_of_two_series_are_drawn_side_by_side() {
        let mut study = study();
        for index in 3..6 {
            study.variants[index].metrics = study.variants[index - 3].metrics.clone();
        }
        let chart = chart(&study).unwrap();
        let panel = &chart.panels[0];
        let points_of = |color| -> Vec<(f64, f64)> {
            let dots = (panel.lines.iter())
                .filter(|line| line.stroke.color == color)
                .flat_map(|line| line.segments.iter().filter(|s| s.len() == 1));
            dots.flatten().copied().collect()
        };
        let (first, second) = (
            points_of(variant_stroke(0).color),
            points_of(variant_stroke(1).color),
        );
        assert_eq!((first.len(), second.len()), (3, 3), "a dot per point");
        let span = panel.x.range.end - panel.x.range.start;
        for (a, b) in first.iter().zip(&second) {
            assert_eq!(a.1, b.1, "the same mean");
            let apart = b.0 - a.0;
            assert!(
                apart >= span * 0.007,
                "{a:?} and {b:?} are drawn on each other"
            );
            assert_eq!(
                (a.0 + b.0) / 2.0,
                [500.0, 1000.0, 2000.0][first.iter().position(|p| p == a).unwrap()]
            );
        }
        let widths = |color| {
            let lines = panel.lines.iter().filter(|line| line.stroke.color == color);
            lines.map(|line| line.stroke.width).max()
        };
        assert!(widths(variant_stroke(0).color) > widths(variant_stroke(1).color));
        let labels: Vec<&str> = chart.legend.iter().map(|e| e.label.as_str()).collect();
        assert!(
            labels.iter().any(|l| l.contains("side by side")),
            "{labels:?}"
        );
        // No equal points: no offsets, no note.
        let chart = super::chart(&self::study()).unwrap();
        let long = chart.panels[0]
            .lines
            .iter()
            .find(|line| line.segments.iter().any(|s| s.len() == 3));
        assert_eq!(long.unwrap().segments[0][0], (500.0, 200.0));
        assert!(
            chart
                .legend
                .iter()
                .all(|e| !e.label.contains("side by side"))
        );
    }

    /// Issue 31: a study's y descriptions were drawn smaller than its x description (each
    /// chose its size alone, and four stacked panels leave a y description little room).
    /// Every axis description of a chart has one size.
    #[test]
    fn both_axis_descriptions_have_the_same_size() {
        let mut study = with_a_p99(study());
        study.selection.metrics.extend(["a".into(), "b".into()]);
        for variant in &mut study.variants {
            let timeouts = variant.metrics["timeouts"].clone();
            variant.metrics.insert("a".into(), timeouts.clone());
            variant.metrics.insert("b".into(), timeouts);
        }
        let chart = chart(&study).unwrap();
        assert_eq!(chart.panels.len(), 4);
        assert!(crate::embedded_font_registered());
        let svg = crate::render::svg(&chart).unwrap();
        let size_of = |text: &str| -> Vec<String> {
            let parts = svg
                .split("</text>")
                .filter(|part| part.trim_end().ends_with(text));
            let sizes = parts.filter_map(|part| {
                let element = part.rsplit_once("<text")?.1;
                let size = element.split("font-size=\"").nth(1)?.split('"').next()?;
                Some(size.to_owned())
            });
            sizes.collect()
        };
        let x = size_of("open (ms)");
        let y = size_of("latency_ms.all.p99 (ms)");
        assert_eq!((x.len(), y.len()), (1, 1), "{x:?} {y:?}");
        assert_eq!(x, y, "the x and the y description in one size");
        assert_eq!(size_of("timeouts (count)"), y);
    }

    #[test]
    fn without_a_sweep_each_variant_is_a_point_of_its_own() {
        let mut study = study();
        study.sweep = None;
        for variant in &mut study.variants {
            variant.point.clear();
            variant.sweep_x = None;
        }
        let chart = chart(&study).unwrap();
        let labels: Vec<&str> = chart.legend.iter().map(|e| e.label.as_str()).collect();
        assert!(labels.contains(&"1. r4j / open=500ms"), "{labels:?}");
        assert!(labels.contains(&"6. polly / open=2s"), "{labels:?}");
    }

    /// `study` choosing a second metric, `latency_ms.all.p99`, equal to its timeouts.
    fn with_a_p99(mut study: Study) -> Study {
        study.selection.metrics = vec!["timeouts".into(), "latency_ms.all.p99".into()];
        for variant in &mut study.variants {
            let timeouts = variant.metrics["timeouts"].clone();
            variant
                .metrics
                .insert("latency_ms.all.p99".into(), timeouts);
        }
        study
    }

    /// The numbers written in `svg`'s text elements.
    fn numbers_written(svg: &str) -> Vec<f64> {
        let texts = svg
            .split("</text>")
            .filter_map(|part| part.rsplit_once('>'));
        texts
            .filter_map(|(_, text)| text.trim().parse().ok())
            .collect()
    }

    /// A study over a sweep of words had a numeric x axis ticked 0, 0.5, 1...: it is
    /// categorical, labelled with the words, with room for the end marks.
    #[test]
    fn a_sweep_over_words_has_the_words_as_its_ticks() {
        let mut study = study();
        let words = ["resilience4j", "polly-v8", "opossum"];
        for variant in &mut study.variants {
            let index = [500.0, 1000.0, 2000.0]
                .iter()
                .position(|x| Some(*x) == variant.sweep_x)
                .unwrap();
            variant.sweep_x = Some(index as f64);
        }
        let sweep = study.sweep.as_mut().unwrap();
        sweep.unit = String::new();
        sweep.values = words.map(String::from).to_vec();
        let chart = chart(&study).unwrap();
        let panel = &chart.panels[0];
        assert!(panel.x.categories);
        assert_eq!(panel.x.category_names, words);
        assert_eq!(panel.x.range, -0.5..2.5);
        assert_eq!(panel.x.description, "open");
        let svg = crate::render::svg(&chart).unwrap();
        let written: Vec<&str> = svg
            .split("</text>")
            .filter_map(|part| part.rsplit_once('>'))
            .map(|(_, text)| text.trim())
            .collect();
        for word in words {
            assert!(written.contains(&word), "{word} in {written:?}");
        }
        assert!(!written.contains(&"0.5"), "{written:?}");
    }

    /// The study chart of redis-dead-protection's three variants had ticks at 1, 1.5, 2, 2.5
    /// and 3 (a variant 1.5 names nothing), and cut the first and last variants' marks.
    #[test]
    fn without_a_sweep_the_variant_axis_has_whole_number_ticks_and_room_for_the_end_marks() {
        let mut study = study();
        study.sweep = None;
        study.variants.truncate(3);
        for variant in &mut study.variants {
            variant.point.clear();
            variant.sweep_x = None;
        }
        let chart = chart(&study).unwrap();
        let panel = &chart.panels[0];
        let xs = panel
            .lines
            .iter()
            .flat_map(|line| line.segments.iter().flatten());
        let (low, high) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), p| {
            (low.min(p.0), high.max(p.0))
        });
        assert!(
            panel.x.range.start <= low - 0.2 && panel.x.range.end >= high + 0.2,
            "marks from {low} to {high} on an axis from {:?}",
            panel.x.range
        );
        assert!(crate::embedded_font_registered());
        let numbers = numbers_written(&crate::render::svg(&chart).unwrap());
        assert!(
            numbers.iter().all(|number| number.fract() == 0.0),
            "ticks: {numbers:?}"
        );
        for variant in [1.0, 2.0, 3.0] {
            assert!(numbers.contains(&variant), "{variant} in {numbers:?}");
        }
    }

    #[test]
    fn many_categories_are_labelled_every_few_from_the_first() {
        use crate::render::category_ticks;
        assert_eq!(category_ticks(&(0.5..3.5), 10), [1.0, 2.0, 3.0]);
        assert_eq!(
            category_ticks(&(0.5..21.5), 10),
            [1.0, 6.0, 11.0, 16.0, 21.0]
        );
        assert_eq!(
            category_ticks(&(0.5..12.5), 6),
            [1.0, 3.0, 5.0, 7.0, 9.0, 11.0]
        );
        assert!(category_ticks(&(0.2..0.8), 10).is_empty());
    }

    /// The study chart did not draw the constraints: now each threshold is a labelled line
    /// on its metric's panel (the axis reaching it), and a point whose mean breaks a
    /// constraint on that panel's metric is a ring where it had no mark at all.
    #[test]
    fn constraints_are_drawn_on_their_metrics_panel_and_breaking_points_are_rings() {
        let mut study = with_a_p99(study());
        study.selection.constraints = vec![
            "timeouts <= 100".into(),
            "latency_ms.all.p99 in 30..150".into(),
            "timeouts <= 500".into(),
        ];
        let chart = chart(&study).unwrap();
        let [timeouts, p99] = &chart.panels[..] else {
            panic!("two panels");
        };
        let rules = |panel: &Panel| -> Vec<(f64, String)> {
            (panel.rules.iter())
                .map(|rule| (rule.at, rule.label.clone()))
                .collect()
        };
        assert_eq!(
            rules(timeouts),
            [
                (100.0, "constraint: timeouts <= 100".to_owned()),
                (500.0, "constraint: timeouts <= 500".to_owned())
            ]
        );
        assert_eq!(
            rules(p99),
            [
                (30.0, "constraint: latency_ms.all.p99 in 30..150".to_owned()),
                (
                    150.0,
                    "constraint: latency_ms.all.p99 in 30..150".to_owned()
                )
            ]
        );
        assert!(
            timeouts.y.range.end >= 500.0,
            "the axis reaches the threshold: {:?}",
            timeouts.y.range
        );
        let marked = |panel: &Panel, shape: MarkerShape| -> Vec<(f64, f64)> {
            (panel.markers.iter())
                .filter(|marker| marker.shape == shape)
                .map(|marker| marker.at)
                .collect()
        };
        // r4j at 500 ms has 200 timeouts (above 100, and above 150); polly at 2 s has 20
        // (below 30). Every other point satisfies the fixture's constraints: a cross.
        assert_eq!(marked(timeouts, MarkerShape::Ring), [(500.0, 200.0)]);
        assert_eq!(
            marked(p99, MarkerShape::Ring),
            [(500.0, 200.0), (2000.0, 20.0)]
        );
        assert_eq!(marked(timeouts, MarkerShape::Cross).len(), 5);
        assert_eq!(marked(p99, MarkerShape::Cross).len(), 4);
        assert!(
            (chart.legend.iter()).any(|entry| matches!(entry.key, Key::Ring(_))),
            "the legend says what a ring is"
        );
        assert!(crate::embedded_font_registered());
        let svg = crate::render::svg(&chart).unwrap();
        assert!(svg.contains("constraint: timeouts"), "the label is drawn");
        // Without constraints, no line and no ring.
        study.selection.constraints.clear();
        let chart = super::chart(&study).unwrap();
        assert!(chart.panels.iter().all(|panel| panel.rules.is_empty()));
        assert!((chart.panels.iter()).all(|panel| marked(panel, MarkerShape::Ring).is_empty()));
    }

    /// The study chart's y axes were the metric paths alone: `outcomes.ok`, with no unit.
    #[test]
    fn each_panel_says_its_metrics_unit() {
        let study = with_a_p99(study());
        let chart = chart(&study).unwrap();
        let axes: Vec<&str> = chart
            .panels
            .iter()
            .map(|p| p.y.description.as_str())
            .collect();
        assert_eq!(axes, ["timeouts (count)", "latency_ms.all.p99 (ms)"]);
        assert_eq!(
            metric_description("redis.main.peak_bytes"),
            "redis.main.peak_bytes (bytes)"
        );
        assert_eq!(
            metric_description("databases.main.peak_concurrency"),
            "databases.main.peak_concurrency (at once)"
        );
    }
}

//! A metastability map as a phase diagram: one panel per variant, the trigger's size across,
//! the load up, each cell coloured by its phase (recovered on every seed, on some, on none)
//! and labelled with the median time to recover after the trigger ended, or how many seeds
//! recovered.

use outagelab_report::map::{MapReport, Phase};
use plotters::style::RGBColor;

use crate::chart::{Axis, Band, Chart, Key, LegendEntry, Note, Panel};

const RECOVERED: RGBColor = RGBColor(62, 150, 81);
const MIXED: RGBColor = RGBColor(230, 159, 0);
const NOT_RECOVERED: RGBColor = RGBColor(204, 60, 50);

/// The name a value is written with: a string without its quotes.
fn shown(value: &str) -> String {
    value.trim_matches('"').to_owned()
}

fn axis(description: String, values: &[String]) -> Axis {
    Axis {
        description,
        range: -0.5..values.len() as f64 - 0.5,
        log: false,
        categories: true,
        category_names: values.iter().map(|v| shown(v)).collect(),
        clock_start_unix_ms: None,
        zero_band: None,
    }
}

fn color(phase: Phase) -> RGBColor {
    match phase {
        Phase::Recovered => RECOVERED,
        Phase::Mixed => MIXED,
        Phase::NotRecovered => NOT_RECOVERED,
    }
}

pub(crate) fn chart(map: &MapReport) -> Chart {
    let [first, last] = map.seeds;
    let panels = map
        .variants
        .iter()
        .map(|variant| {
            let mut panel = Panel::new(
                axis(format!("trigger: {}", map.trigger.key), &map.trigger.values),
                axis(format!("load: {}", map.load.key), &map.load.values),
            );
            panel.title = Some(variant.name.clone());
            for point in &variant.points {
                let (x, y) = (point.trigger as f64, point.load as f64);
                panel.bands.push(Band {
                    x: x - 0.5..x + 0.5,
                    y: Some(y - 0.5..y + 0.5),
                    color: color(point.phase()),
                    opacity: 0.55,
                    edges: false,
                    label: None,
                });
                panel.notes.push(Note {
                    at: (x, y),
                    text: point.label(),
                });
            }
            panel
        })
        .collect::<Vec<Panel>>();
    let band = |color: RGBColor, label: &str| LegendEntry {
        key: Key::Band {
            color,
            opacity: 0.55,
        },
        label: label.to_owned(),
    };
    let legend = vec![
        LegendEntry::heading(format!("recovered: {}", map.recovered)),
        LegendEntry::heading(format!("after {} ends", map.fault)),
        band(RECOVERED, "on every seed (median time)"),
        band(MIXED, "on some seeds (k/n)"),
        band(NOT_RECOVERED, "never, within the horizon"),
    ];
    // Stacked: each map as wide as the chart, so every value and cell is readable.
    let columns = 1;
    Chart {
        name: "map",
        title: format!(
            "{}: recovery after the trigger, seeds {first}..{last}",
            map.scenario
        ),
        panels,
        columns,
        legend,
    }
}

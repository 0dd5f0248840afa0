//! `[map]`: the grid `outagelab map` runs: trigger sizes by loads, on several seeds, and what
//! counts as recovered after the trigger ends.
//!
//! ```toml
//! [map]
//! variants = ["3 attempts", "3 attempts, 10% budget"]   # default: every variant
//! seeds = "1..3"                                         # default: the file's seed
//! fault = "slowdown"          # the trigger: recovery is timed from this fault's end
//! trigger = { key = "faults.slowdown.duration", values = ["250ms", "1s", "4s"] }
//! load = { key = "loads.base.rate", values = [800, 1200, 1600] }
//! recovered = { metric = "failed_per_s", at_most = 5, for = "2s" }
//! ```

use std::ops::RangeInclusive;

use outagelab_report::map::Recovery;
use outagelab_report::observed::ObservedMetric;
use toml::de::DeValue;

use crate::document::Value;
use crate::{Reader, ScenarioFile, units};

/// `[map]`, checked against the file.
#[derive(Clone, Debug)]
pub struct MapSpec {
    /// In the file's order; at least one.
    pub variants: Vec<String>,
    pub seeds: RangeInclusive<u64>,
    pub fault: String,
    pub trigger: MapAxisSpec,
    pub load: MapAxisSpec,
    pub recovered: Recovery,
}

/// One axis: a key the file writes and the values it takes, each as TOML text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapAxisSpec {
    pub key: String,
    /// 1 to [`MAP_VALUES_MAX`], distinct.
    pub values: Vec<String>,
}

/// The most values on one axis.
pub const MAP_VALUES_MAX: usize = 40;

impl<'t> Reader<'_> {
    /// Reads `[map]` against the built variants.
    pub(crate) fn map(&mut self, value: Value<'t>, file: &ScenarioFile) -> Option<MapSpec> {
        let span = value.span();
        let DeValue::Table(table) = value.into_inner() else {
            self.refuse(span, "map", "`map` is a table: write it as [map]");
            return None;
        };
        let before = self.errors.len();
        let mut variants: Vec<String> = file.variants.iter().map(|v| v.name.clone()).collect();
        let mut seeds = file.seed..=file.seed;
        let (mut fault, mut trigger, mut load, mut recovered) = (None, None, None, None);
        for (key, entry) in table.iter() {
            let name = key.get_ref().as_ref();
            let at = format!("map.{name}");
            match (name, entry.get_ref()) {
                ("variants", DeValue::Array(items)) => {
                    let mut chosen = Vec::new();
                    for item in items {
                        match item.get_ref() {
                            DeValue::String(text)
                                if file.variants.iter().any(|v| v.name == text.as_ref()) =>
                            {
                                chosen.push(text.to_string());
                            }
                            DeValue::String(text) => {
                                let names = file.variants.iter().map(|v| v.name.as_str());
                                let message = crate::not_a_variant(text, names);
                                self.refuse(item.span(), &at, message);
                            }
                            _ => self.refuse(item.span(), &at, "a variant's name, as a string"),
                        }
                    }
                    if items.is_empty() {
                        self.refuse(entry.span(), &at, "names no variant: leave it out for all");
                    }
                    variants = (file.variants.iter())
                        .filter(|v| chosen.contains(&v.name))
                        .map(|v| v.name.clone())
                        .collect();
                }
                ("seeds", DeValue::String(text)) => match crate::parse_seed_range(text) {
                    Ok(range) => seeds = range,
                    Err(message) => self.refuse(entry.span(), &at, message),
                },
                ("fault", DeValue::String(text)) => {
                    let written = (file.variants.iter())
                        .any(|v| v.settings.contains_key(&format!("faults.{text}.kind")));
                    if written {
                        fault = Some(text.to_string());
                    } else {
                        let message = format!(
                            "`{text}` is not a fault of the file: name the [faults.<name>] \
                             whose end the recovery is timed from"
                        );
                        self.refuse(entry.span(), &at, message);
                    }
                }
                ("trigger" | "load", DeValue::Table(_)) => {
                    let axis = self.map_axis(entry, &at, file);
                    if name == "trigger" {
                        trigger = axis;
                    } else {
                        load = axis;
                    }
                }
                ("recovered", DeValue::Table(_)) => recovered = self.recovery(entry, &at),
                _ => {
                    let message = "is not a key of [map] (variants, seeds, fault, trigger, load, \
                                   recovered), or not of its shape (docs/scenario-format.md)";
                    self.refuse(key.span(), &at, message);
                }
            }
        }
        for (missing, what) in [
            (fault.is_none(), "fault"),
            (trigger.is_none(), "trigger"),
            (load.is_none(), "load"),
            (recovered.is_none(), "recovered"),
        ] {
            if missing && self.errors.len() == before {
                let message = format!("needs `{what}` (docs/scenario-format.md, `[map]`)");
                self.refuse(span.clone(), "map", message);
            }
        }
        if self.errors.len() > before {
            return None;
        }
        Some(MapSpec {
            variants,
            seeds,
            fault: fault?,
            trigger: trigger?,
            load: load?,
            recovered: recovered?,
        })
    }

    /// `{ key = "faults.x.duration", values = ["1s", "2s"] }`.
    fn map_axis(
        &mut self,
        value: &Value<'t>,
        at: &str,
        file: &ScenarioFile,
    ) -> Option<MapAxisSpec> {
        let DeValue::Table(table) = value.get_ref() else {
            return None;
        };
        let key = match table.get("key").map(|k| (k.get_ref(), k.span())) {
            Some((DeValue::String(key), key_span)) => {
                let written = file
                    .variants
                    .iter()
                    .any(|v| v.settings.contains_key(key.as_ref()));
                if !written {
                    let message = format!(
                        "`{key}` is not a key the file writes: write its value in the file"
                    );
                    self.refuse(key_span, format!("{at}.key"), message);
                    return None;
                }
                if let Some(message) = crate::swept_by_the_file(file, key, "the axis") {
                    self.refuse(key_span, format!("{at}.key"), message);
                    return None;
                }
                key.to_string()
            }
            _ => {
                self.refuse(
                    value.span(),
                    at,
                    "needs `key`, the dotted key the axis sets",
                );
                return None;
            }
        };
        let Some(values) = table.get("values") else {
            self.refuse(
                value.span(),
                at,
                "needs `values`, a list of what the key takes",
            );
            return None;
        };
        let DeValue::Array(items) = values.get_ref() else {
            self.refuse(values.span(), format!("{at}.values"), "a list of values");
            return None;
        };
        if items.is_empty() || items.len() > MAP_VALUES_MAX {
            let message = format!("has {} values: give 1 to {MAP_VALUES_MAX}", items.len());
            self.refuse(values.span(), format!("{at}.values"), message);
            return None;
        }
        let mut texts: Vec<String> = Vec::new();
        for item in items {
            let text = self.source.text[item.span()].to_owned();
            if texts.contains(&text) {
                self.refuse(
                    item.span(),
                    format!("{at}.values"),
                    format!("{text} is given twice"),
                );
                return None;
            }
            texts.push(text);
        }
        if let Some((extra, _)) = table
            .iter()
            .find(|(k, _)| !["key", "values"].contains(&k.get_ref().as_ref()))
        {
            self.refuse(extra.span(), at, "an axis has `key` and `values` only");
            return None;
        }
        Some(MapAxisSpec { key, values: texts })
    }

    /// `{ metric = "failed_per_s", at_most = 5, for = "2s" }`.
    fn recovery(&mut self, value: &Value<'t>, at: &str) -> Option<Recovery> {
        let DeValue::Table(table) = value.get_ref() else {
            return None;
        };
        let before = self.errors.len();
        let metric = match table.get("metric").map(|m| (m.get_ref(), m.span())) {
            Some((DeValue::String(name), span)) => match ObservedMetric::parse(name) {
                Ok(metric) => Some(metric),
                Err(message) => {
                    self.refuse(span, format!("{at}.metric"), message);
                    None
                }
            },
            _ => None,
        };
        let at_most = match table.get("at_most").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::Integer(n), span)) => self.bound(n.as_str(), span, at),
            Some((DeValue::Float(n), span)) => self.bound(n.as_str(), span, at),
            _ => None,
        };
        let hold = match table.get("for").map(|v| (v.get_ref(), v.span())) {
            Some((DeValue::String(text), span)) => match units::parse_duration(text) {
                Ok(0) => {
                    self.refuse(
                        span,
                        format!("{at}.for"),
                        "longer than zero: how long quiet lasts",
                    );
                    None
                }
                Ok(ns) => Some(ns as f64 / 1e6),
                Err(message) => {
                    self.refuse(span, format!("{at}.for"), message);
                    None
                }
            },
            _ => None,
        };
        if let Some((extra, _)) = table
            .iter()
            .find(|(k, _)| !["metric", "at_most", "for"].contains(&k.get_ref().as_ref()))
        {
            self.refuse(
                extra.span(),
                at,
                "`recovered` has `metric`, `at_most` and `for` only",
            );
        }
        match (metric, at_most, hold) {
            (Some(metric), Some(at_most), Some(hold_ms)) if self.errors.len() == before => {
                Some(Recovery {
                    metric,
                    at_most,
                    hold_ms,
                })
            }
            _ => {
                if self.errors.len() == before {
                    let message = "needs `metric` (a series' metric, e.g. \"failed_per_s\"), \
                                   `at_most` (a number) and `for` (a duration): recovered is \
                                   the metric at most that for that long";
                    self.refuse(value.span(), at, message);
                }
                None
            }
        }
    }

    /// A finite bound at least 0.
    fn bound(&mut self, text: &str, span: std::ops::Range<usize>, at: &str) -> Option<f64> {
        match text.replace('_', "").parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 0.0 => Some(n),
            _ => {
                self.refuse(
                    span,
                    format!("{at}.at_most"),
                    format!("{text} is not a finite number of at least 0"),
                );
                None
            }
        }
    }
}

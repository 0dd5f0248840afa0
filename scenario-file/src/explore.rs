//! `[explore]`: what `outagelab explore` may vary to look for a fault schedule that breaks the
//! design, and where it draws from.
//!
//! ```toml
//! [explore]
//! variants = ["reconnect slot"]   # the variants each schedule runs (default: every one)
//! seeds = "1..1000"               # the run seeds a schedule may draw (default: the file's seed)
//! ties = "shuffled"               # same-instant ties in an order drawn from the seed (default: "scheduled")
//! runs_max = 300                  # schedules tried (default 200)
//! faults_max = 2                  # faults in one schedule: 1 to this many (default 2)
//! shrink_runs_max = 200           # runs the shrinking of one finding may take (default 200)
//! search = "coverage"             # "random" (default), or mutate schedules that reached new states
//!
//! [explore.faults.redis]          # a fault template: each fault drawn picks one
//! target = ["redis"]              # one target, or a list to draw from
//! kind = ["kill", "stop", "pause"] # one kind, or a list to draw from
//! at = { min = "1s", max = "50s" }
//! duration = { min = "100ms", max = "10s" }   # optional; never for kill, maxmemory, flushall
//! # any other key is copied, as written, into each fault made from the template
//!
//! [explore.params]                # optional: keys the file writes, each drawn in its range
//! "loads.steady.rate" = { min = 500, max = 2000 }
//! ```
//!
//! A schedule breaks the design when a run of one of its variants breaks an invariant (a
//! monitor fires), misses one of the variant's own expectations, or stops on its run budget:
//! the failures `outagelab run` exits 1 on. Every problem is said at its key.

use std::ops::{Range, RangeInclusive};
use std::sync::LazyLock;

use toml::de::{DeTable, DeValue};

use crate::document::Value;
use crate::fit::{Unknown, unknown_in};
use crate::raw::Bound;
use crate::{Reader, ScenarioFile, units};

/// `[explore]`, checked against the file.
#[derive(Clone, Debug)]
pub struct ExploreSpec {
    /// The variants each schedule runs, in the file's order; at least one.
    pub variants: Vec<String>,
    pub seeds: RangeInclusive<u64>,
    /// Schedules tried; 1 to [`EXPLORE_RUNS_MAX`].
    pub runs_max: u64,
    /// 1 to [`FAULTS_MAX`] (0 when there are no templates: only parameters vary).
    pub faults_max: u32,
    pub shrink_runs_max: u64,
    /// In name order.
    pub faults: Vec<FaultTemplate>,
    /// In key order.
    pub params: Vec<Unknown>,
    /// Every schedule runs with `[run] ties = "shuffled"`: same-instant events of one class
    /// in an order drawn from the run seed.
    pub shuffle_ties: bool,
    /// `max <metric>` or `min <metric>` of a variant's summary: the worst schedule found is
    /// reported, and searched around.
    pub objective: Option<ExploreObjective>,
    /// Schedules drawn around the worst found, after the random ones (0 to 100,000).
    pub refine: u64,
    /// How the schedules are chosen.
    pub search: Search,
}

/// How `explore` chooses its schedules (`[explore] search`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Search {
    /// Schedule `i` is drawn from a stream of the seed and `i`: any slice of them is judged
    /// alone, so a search shards.
    #[default]
    Random,
    /// Coverage-guided, AFL style: a schedule whose runs reach a model state none before it
    /// reached (a breaker's transitions, a queue's peak in a band of powers of two, a shed,
    /// timeout or fail-open first seen) joins a corpus, and about half of the schedules are
    /// mutations of one from the corpus, the rest drawn as `Random` draws them.
    Coverage,
}

impl Search {
    /// The name the file writes.
    pub fn name(self) -> &'static str {
        match self {
            Search::Random => "random",
            Search::Coverage => "coverage",
        }
    }
}

/// What makes a schedule worse for the design: a summary metric to maximise (or minimise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExploreObjective {
    pub maximise: bool,
    pub metric: String,
}

/// One `[explore.faults.<name>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultTemplate {
    pub name: String,
    /// At least one each.
    pub targets: Vec<String>,
    pub kinds: Vec<String>,
    /// Nanoseconds, `min <= max`.
    pub at: (u64, u64),
    /// Nanoseconds, `0 < min <= max`; `None`: the faults last to the end.
    pub duration: Option<(u64, u64)>,
    /// Every other key, with its value as the file writes it (TOML text).
    pub extra: Vec<(String, String)>,
}

impl ExploreSpec {
    /// What `[explore]` is before its keys: every variant, the file's seed, 200 schedules of
    /// up to 2 faults, 200 shrinking runs.
    fn defaults(file: &ScenarioFile) -> ExploreSpec {
        ExploreSpec {
            variants: file.variants.iter().map(|v| v.name.clone()).collect(),
            seeds: file.seed..=file.seed,
            runs_max: 200,
            faults_max: 2,
            shrink_runs_max: 200,
            faults: Vec::new(),
            params: Vec::new(),
            shuffle_ties: false,
            objective: None,
            refine: 0,
            search: Search::default(),
        }
    }
}

/// The kinds that happen at one instant and take no `duration` (as `fault_kinds` declares).
pub static INSTANT_KINDS: LazyLock<Vec<&'static str>> = LazyLock::new(|| {
    crate::fault_kinds::FAULT_KINDS
        .iter()
        .filter(|kind| kind.instant.is_some())
        .map(|kind| kind.name)
        .collect()
});
/// What the key `name` of `[explore]` takes, for a value of another type.
fn explore_shape(name: &str) -> &'static str {
    match name {
        "variants" => "a list of variant names",
        "seeds" => "a seed range, \"A..B\"",
        "ties" => "\"scheduled\" or \"shuffled\"",
        "search" => "\"random\" or \"coverage\"",
        "objective" => "`max <metric>` or `min <metric>`",
        _ => "a whole number",
    }
}

/// The most faults one schedule holds.
pub const FAULTS_MAX: u32 = 8;
/// The most schedules one exploration tries.
pub const EXPLORE_RUNS_MAX: u64 = 1_000_000;

impl<'t> Reader<'_> {
    /// Reads `[explore]` against the built variants.
    pub(crate) fn explore(&mut self, value: Value<'t>, file: &ScenarioFile) -> Option<ExploreSpec> {
        let span = value.span();
        let DeValue::Table(table) = value.into_inner() else {
            self.refuse(
                span,
                "explore",
                "`explore` is a table: write it as [explore]",
            );
            return None;
        };
        let before = self.errors.len();
        let mut spec = ExploreSpec::defaults(file);
        let mut faults_max_span = None;
        for (key, entry) in table.iter() {
            let name = key.get_ref().as_ref();
            let at = format!("explore.{name}");
            let entry_span = entry.span();
            match (name, entry.get_ref()) {
                ("variants", DeValue::Array(items)) => {
                    spec.variants = self.explore_variants(items, entry_span, &at, file);
                }
                ("ties", DeValue::String(text)) => {
                    if let Some(shuffled) = self.explore_ties(text, entry_span, &at) {
                        spec.shuffle_ties = shuffled;
                    }
                }
                ("search", DeValue::String(text)) => {
                    if let Some(search) = self.explore_search(text, entry_span, &at) {
                        spec.search = search;
                    }
                }
                ("objective", DeValue::String(text)) => {
                    if let Some(objective) = self.explore_objective(text, entry_span, &at, file) {
                        spec.objective = Some(objective);
                    }
                }
                ("refine", DeValue::Integer(_)) => {
                    if let Some(n) = self.whole_in(entry, &at, 0, 100_000) {
                        spec.refine = n;
                    }
                }
                ("seeds", DeValue::String(text)) => match crate::parse_seed_range(text) {
                    Ok(range) => spec.seeds = range,
                    Err(message) => self.refuse(entry_span, &at, message),
                },
                ("runs_max", DeValue::Integer(_)) => {
                    if let Some(n) = self.whole_in(entry, &at, 1, EXPLORE_RUNS_MAX) {
                        spec.runs_max = n;
                    }
                }
                ("shrink_runs_max", DeValue::Integer(_)) => {
                    if let Some(n) = self.whole_in(entry, &at, 0, 100_000) {
                        spec.shrink_runs_max = n;
                    }
                }
                ("faults_max", DeValue::Integer(_)) => {
                    faults_max_span = Some(entry_span.clone());
                    if let Some(n) = self.whole_in(entry, &at, 1, u64::from(FAULTS_MAX)) {
                        spec.faults_max = n as u32;
                    }
                }
                ("faults", DeValue::Table(templates)) => {
                    for (template_name, template) in templates.iter() {
                        let name = template_name.get_ref().as_ref();
                        spec.faults.extend(self.template(name, template));
                    }
                }
                ("params", DeValue::Table(params)) => self.explore_params(params, file, &mut spec),
                (
                    "variants" | "seeds" | "ties" | "search" | "objective" | "refine" | "runs_max"
                    | "shrink_runs_max" | "faults_max",
                    _,
                ) => self.refuse(entry_span, &at, format!("is {}", explore_shape(name))),
                ("faults" | "params", _) => {
                    self.refuse(
                        entry_span,
                        &at,
                        format!("is a table: write it as [{at}.<name>]"),
                    );
                }
                _ => {
                    let message = "is not a key of [explore] (variants, seeds, ties, search, \
                                   objective, refine, runs_max, faults_max, shrink_runs_max, \
                                   faults, params)";
                    self.refuse(key.span(), &at, message);
                }
            }
        }
        self.explore_checks(&table, &mut spec, span, before, faults_max_span);
        (self.errors.len() == before).then_some(spec)
    }

    /// `variants`: the variants each schedule runs, in the file's order.
    fn explore_variants(
        &mut self,
        items: &[Value<'t>],
        entry_span: Range<usize>,
        at: &str,
        file: &ScenarioFile,
    ) -> Vec<String> {
        let mut chosen = Vec::new();
        for item in items {
            let DeValue::String(text) = item.get_ref() else {
                self.refuse(item.span(), at, "a variant's name, as a string");
                continue;
            };
            match file.variants.iter().find(|v| v.name == text.as_ref()) {
                Some(_) if chosen.contains(&text.to_string()) => {
                    self.refuse(item.span(), at, format!("\"{text}\" is named twice"));
                }
                Some(_) => chosen.push(text.to_string()),
                None => {
                    let names = file.variants.iter().map(|v| v.name.as_str());
                    let message = crate::not_a_variant(text, names);
                    self.refuse(item.span(), at, message);
                }
            }
        }
        if chosen.is_empty() && items.is_empty() {
            self.refuse(
                entry_span,
                at,
                "names no variant: leave it out to run every one",
            );
        }
        // In the file's order, whatever order the list has.
        (file.variants.iter())
            .filter(|v| chosen.contains(&v.name))
            .map(|v| v.name.clone())
            .collect()
    }

    /// `ties`: whether same-instant ties are drawn from each run's seed.
    fn explore_ties(&mut self, text: &str, entry_span: Range<usize>, at: &str) -> Option<bool> {
        match text {
            "shuffled" => Some(true),
            "scheduled" => Some(false),
            other => {
                let message = format!(
                    "`{other}` is not a tie order: \"scheduled\" (the fixed rule) or \
                     \"shuffled\" (drawn from each run's seed)"
                );
                self.refuse(entry_span, at, message);
                None
            }
        }
    }

    /// `search`: how schedules are chosen.
    fn explore_search(&mut self, text: &str, entry_span: Range<usize>, at: &str) -> Option<Search> {
        let search = [Search::Random, Search::Coverage]
            .into_iter()
            .find(|search| search.name() == text);
        if search.is_none() {
            let message = format!(
                "`{text}` is not a search: \"random\" (each schedule drawn on its own) or \
                 \"coverage\" (mutate the schedules that reached new model states)"
            );
            self.refuse(entry_span, at, message);
        }
        search
    }

    /// `objective`: the summary metric a schedule is judged worst by.
    fn explore_objective(
        &mut self,
        text: &str,
        entry_span: Range<usize>,
        at: &str,
        file: &ScenarioFile,
    ) -> Option<ExploreObjective> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let [direction @ ("max" | "min"), metric] = words.as_slice() else {
            let message = format!(
                "`{text}`: write `max <metric>` or `min <metric>`, the worst a schedule can make \
                 a summary metric (`max http.window_5xx_ms`)"
            );
            self.refuse(entry_span, at, message);
            return None;
        };
        match file.check_metric(metric) {
            Ok(()) => Some(ExploreObjective {
                maximise: *direction == "max",
                metric: (*metric).to_owned(),
            }),
            Err(message) => {
                self.refuse(entry_span, at, message);
                None
            }
        }
    }

    /// `params`: keys the file writes, each drawn in its range (checked against the first
    /// variant explored).
    fn explore_params(
        &mut self,
        params: &DeTable<'t>,
        file: &ScenarioFile,
        spec: &mut ExploreSpec,
    ) {
        let variant = (file.variants.iter()).find(|v| spec.variants.first() == Some(&v.name));
        for (param_key, range) in params.iter() {
            let param_key = param_key.get_ref().as_ref();
            let at = format!("explore.params.\"{param_key}\"");
            let Some(param) = self.param(param_key, range, variant, &at) else {
                continue;
            };
            match crate::swept_by_the_file(file, param_key, "drawing it") {
                Some(message) => self.refuse(range.span(), at, message),
                None => spec.params.push(param),
            }
        }
    }

    /// What holds across `[explore]`'s keys: a refinement needs an objective, the templates
    /// and parameters in name order, something varies, and `faults_max` with templates.
    fn explore_checks(
        &mut self,
        table: &DeTable<'t>,
        spec: &mut ExploreSpec,
        span: Range<usize>,
        before: usize,
        faults_max_span: Option<Range<usize>>,
    ) {
        if spec.refine > 0
            && spec.objective.is_none()
            && let Some(entry) = table.get("refine")
        {
            let message = "refines around the worst schedule by the objective: add `objective = \
                           \"max <metric>\"`";
            self.refuse(entry.span(), "explore.refine", message);
        }
        spec.faults.sort_by(|a, b| a.name.cmp(&b.name));
        spec.params.sort_by(|a, b| a.key.cmp(&b.key));
        if spec.faults.is_empty() {
            if spec.params.is_empty() && !spec.shuffle_ties && self.errors.len() == before {
                let message = "varies nothing: add a fault template ([explore.faults.<name>]), \
                               a parameter ([explore.params]) or ties = \"shuffled\"";
                self.refuse(span, "explore", message);
            }
            spec.faults_max = 0;
        } else if let Some(span) = faults_max_span.filter(|_| spec.faults_max == 0) {
            self.refuse(
                span,
                "explore.faults_max",
                "at least 1 with fault templates",
            );
        }
    }

    /// One fault template.
    fn template(&mut self, name: &str, value: &Value<'t>) -> Option<FaultTemplate> {
        let key = |k: &str| format!("explore.faults.{name}.{k}");
        let DeValue::Table(table) = value.get_ref() else {
            let message = "a fault template is a table: target, kind, at, and optionally duration";
            self.refuse(value.span(), format!("explore.faults.{name}"), message);
            return None;
        };
        let before = self.errors.len();
        let mut targets = Vec::new();
        let mut kinds = Vec::new();
        let mut at = None;
        let mut duration = None;
        let mut extra = Vec::new();
        for (entry_key, entry) in table.iter() {
            let entry_name = entry_key.get_ref().as_ref();
            match entry_name {
                "target" | "kind" => {
                    let list = self.names(entry, &key(entry_name));
                    if entry_name == "target" {
                        targets = list;
                    } else {
                        kinds = list;
                    }
                }
                "at" | "duration" => {
                    let range = self.duration_range(entry, &key(entry_name));
                    if entry_name == "at" {
                        at = range;
                    } else {
                        duration = range;
                    }
                }
                "enabled" | "name" => {
                    let message = "is set by explore on each fault it makes";
                    self.refuse(entry_key.span(), key(entry_name), message);
                }
                _ => {
                    let text = &self.source.text[entry.span()];
                    extra.push((entry_name.to_owned(), text.to_owned()));
                }
            }
        }
        for (list, what) in [(&targets, "target"), (&kinds, "kind")] {
            if list.is_empty() && self.errors.len() == before {
                let message = format!("needs a `{what}`: one, or a list to draw from");
                self.refuse(value.span(), format!("explore.faults.{name}"), message);
            }
        }
        if at.is_none() && self.errors.len() == before {
            let message = "needs `at = { min = \"…\", max = \"…\" }`: when the faults may start";
            self.refuse(value.span(), format!("explore.faults.{name}"), message);
        }
        if let Some((low, _)) = duration
            && low == 0
        {
            let span = table.get("duration").map_or(value.span(), |v| v.span());
            self.refuse(
                span,
                key("duration"),
                "a fault lasts longer than zero: raise `min`",
            );
        }
        if duration.is_some()
            && let Some(instant) = kinds.iter().find(|k| INSTANT_KINDS.contains(&k.as_str()))
        {
            // Kinds that take no duration draw none; a template of only those cannot use one.
            if kinds.iter().all(|k| INSTANT_KINDS.contains(&k.as_str())) {
                let span = table.get("duration").map_or(value.span(), |v| v.span());
                let message = format!("`{instant}` happens at one instant: leave duration out");
                self.refuse(span, key("duration"), message);
            }
        }
        extra.sort();
        (self.errors.len() == before).then(|| FaultTemplate {
            name: name.to_owned(),
            targets,
            kinds,
            at: at.expect("checked"),
            duration,
            extra,
        })
    }

    /// A string, or a non-empty list of distinct strings.
    fn names(&mut self, value: &Value<'t>, key: &str) -> Vec<String> {
        match value.get_ref() {
            DeValue::String(text) => vec![text.to_string()],
            DeValue::Array(items) if !items.is_empty() => {
                let mut names: Vec<String> = Vec::new();
                for item in items {
                    match item.get_ref() {
                        DeValue::String(text) if !names.contains(&text.to_string()) => {
                            names.push(text.to_string());
                        }
                        DeValue::String(text) => {
                            self.refuse(item.span(), key, format!("\"{text}\" is named twice"));
                        }
                        _ => self.refuse(item.span(), key, "a name, as a string"),
                    }
                }
                names
            }
            _ => {
                self.refuse(
                    value.span(),
                    key,
                    "a name, or a non-empty list of names to draw from",
                );
                Vec::new()
            }
        }
    }

    /// `{ min = "1s", max = "5s" }`, in nanoseconds, `min <= max`.
    fn duration_range(&mut self, value: &Value<'t>, key: &str) -> Option<(u64, u64)> {
        let DeValue::Table(table) = value.get_ref() else {
            self.refuse(value.span(), key, "a range: { min = \"1s\", max = \"5s\" }");
            return None;
        };
        let mut end = |which: &str| -> Option<u64> {
            let Some(bound) = table.get(which) else {
                self.refuse(value.span(), key, format!("needs `{which}`, a duration"));
                return None;
            };
            let DeValue::String(text) = bound.get_ref() else {
                self.refuse(
                    bound.span(),
                    key,
                    "a duration with its unit, e.g. \"500ms\"",
                );
                return None;
            };
            units::parse_duration(text)
                .map_err(|message| self.refuse(bound.span(), key, message))
                .ok()
        };
        let (low, high) = (end("min"), end("max"));
        if let Some((entry, _)) = table
            .iter()
            .find(|(k, _)| !["min", "max"].contains(&k.get_ref().as_ref()))
        {
            self.refuse(entry.span(), key, "a range has `min` and `max` only");
            return None;
        }
        let (low, high) = (low?, high?);
        if low > high {
            self.refuse(
                value.span(),
                key,
                "the range is empty: `min` must not be above `max`",
            );
            return None;
        }
        Some((low, high))
    }

    /// A parameter: a key the file writes, drawn in a range, as `[fit.unknowns]` are.
    fn param(
        &mut self,
        key: &str,
        range: &Value<'t>,
        variant: Option<&crate::Variant>,
        at: &str,
    ) -> Option<Unknown> {
        let DeValue::Table(table) = range.get_ref() else {
            self.refuse(range.span(), at, "a range: { min = …, max = … }");
            return None;
        };
        let Some(written) = variant.and_then(|v| v.settings.get(key)) else {
            let message = format!(
                "`{key}` is not a key the file writes: write its value in the file (the \
                 shrunk reproducer goes back to it)"
            );
            self.refuse(range.span(), at, message);
            return None;
        };
        let bound = |which: &str| -> Result<(Bound, Range<usize>), String> {
            let value = table.get(which).ok_or(format!("needs `{which}`"))?;
            let bound = match value.get_ref() {
                DeValue::String(text) => Bound::Text(text.to_string()),
                DeValue::Integer(n) => Bound::Number(
                    i64::from_str_radix(&n.as_str().replace('_', ""), n.radix())
                        .map_or(f64::NAN, |n| n as f64),
                ),
                DeValue::Float(n) => {
                    Bound::Number(n.as_str().replace('_', "").parse().unwrap_or(f64::NAN))
                }
                _ => {
                    return Err(format!(
                        "`{which}` is a number, or a duration with its unit"
                    ));
                }
            };
            Ok((bound, value.span()))
        };
        let (min, max) = match (bound("min"), bound("max")) {
            (Ok(min), Ok(max)) => (min, max),
            (Err(message), _) | (_, Err(message)) => {
                self.refuse(range.span(), at, message);
                return None;
            }
        };
        // The file's value need not be inside the range: exploring is not a search from it.
        match unknown_in(key, written, &min.0, &max.0, false) {
            Ok(param) => Some(param),
            Err((_, message)) => {
                self.refuse(range.span(), at, message);
                None
            }
        }
    }

    /// A whole number in `low..=high`.
    fn whole_in(&mut self, value: &Value<'t>, key: &str, low: u64, high: u64) -> Option<u64> {
        let DeValue::Integer(n) = value.get_ref() else {
            return None;
        };
        match u64::from_str_radix(&n.as_str().replace('_', ""), n.radix()) {
            Ok(n) if (low..=high).contains(&n) => Some(n),
            _ => {
                let message = format!("{} is outside {low}..={high}", n.as_str());
                self.refuse(value.span(), key, message);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    const BASE: &str = "[scenario]\nname = \"t\"\n[servers.redis]\n[connections.c]\nserver = \
                        \"redis\"\n[keys.k]\ncount = 1\n[flows.read]\nsteps = [{ redis = { \
                        command = \"GET\", connection = \"c\", key = \"k\" } }]\n[loads.l]\nflow \
                        = \"read\"\narrivals = \"even\"\nrate = 10\nduration = \"1s\"\n\
                        [explore.faults.stall]\ntarget = \"redis\"\nkind = \"pause\"\nat = { min \
                        = \"1s\", max = \"2s\" }\n[explore]\n";

    /// `[explore]` with `lines` added: its spec, or the diagnostics' text.
    fn read(lines: &str) -> Result<ExploreSpec, String> {
        let text = format!("{BASE}{lines}");
        match crate::parse(&text, Path::new("t.toml")) {
            Ok(file) => Ok(file.explore.expect("an [explore] table")),
            Err(diagnostics) => Err(diagnostics.to_string()),
        }
    }

    #[test]
    fn search_is_random_unless_the_file_says_coverage() {
        assert_eq!(read("").unwrap().search, Search::Random);
        assert_eq!(read("search = \"random\"").unwrap().search, Search::Random);
        assert_eq!(
            read("search = \"coverage\"").unwrap().search,
            Search::Coverage
        );
    }

    /// Refused at the file, line and column of the value, with the key.
    #[test]
    fn a_bad_search_is_refused_at_its_key() {
        let line = BASE.lines().count() + 1;
        let cases = [
            (
                "search = \"guided\"",
                "`guided` is not a search: \"random\" (each schedule drawn on its own) or \
                 \"coverage\"",
            ),
            ("search = 3", "is \"random\" or \"coverage\""),
            ("search = [\"coverage\"]", "is \"random\" or \"coverage\""),
        ];
        for (written, expected) in cases {
            let message = read(written).unwrap_err();
            let at = format!("t.toml:{line}:10: explore.search: ");
            assert!(message.contains(&at), "{written}: not at {at}:\n{message}");
            assert!(
                message.contains(expected),
                "{written}: not {expected}:\n{message}"
            );
        }
    }
}

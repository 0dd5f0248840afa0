//! The scenario file format: TOML in, validated simulator scenarios out.
//!
//! Architecture invariant: this is the only crate that knows the file format. It reads a file
//! in three stages, each with located errors:
//!
//! 1. parse the TOML into a tree that keeps the byte span of every key and value;
//! 2. build one document per variant: take out `[[variant]]` and `[sweep]`, set the command
//!    line's `--set` overrides in the base (each value parsed apart and placed past the end of
//!    the file, so that its problems are located at its flag), merge each variant's `patch`
//!    into the base, set each swept value;
//! 3. deserialise each document into raw types (`raw.rs`, unknown keys rejected; the root
//!    table and the name index come from the one list of resource kinds in `kinds.rs`, and
//!    tables with a choice of exactly one key, such as a step's action, are read through
//!    `one_of.rs`), then
//!    validate into [`outagelab_sim::Scenario`] (`validate.rs`), and parse and check the
//!    expectations against the shape of that scenario's report.
//!
//! What is probably a mistake but runs (a resource nothing names, a patch that creates one, a
//! step that can fail with no `on_error` before its flow's last step) is a warning, located
//! like an error, on [`ScenarioFile::warnings`].
//!
//! The format is described for users in `docs/scenario-format.md`.

mod breaker_keys;
mod connection_keys;
mod diagnostic;
mod document;
mod explain;
mod explore;
mod fault_kinds;
mod fit;
mod keys;
mod kinds;
mod limit_keys;
mod load_keys;
mod map;
mod observed;
mod one_of;
mod policy_keys;
mod rate_file;
mod raw;
mod resource_keys;
mod retry_keys;
mod service_keys;
mod step_keys;
mod suggest;
mod tune;
pub mod units;
mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Range, RangeInclusive};
use std::path::{Path, PathBuf};

use outagelab_report::expect::Expectation;
use outagelab_report::{Slo, SweepInfo};
use outagelab_sim::Scenario;
use toml::Spanned;
use toml::de::{DeTable, DeValue};

pub use breaker_keys::{
    failure_rate_table as breaker_failure_rate_table, reference_table as breaker_reference_table,
};
pub use connection_keys::{
    client_loop_table, reference_table as connection_reference_table,
    subscribe_table as connection_subscribe_table, tracking_table as connection_tracking_table,
};
pub use diagnostic::{Diagnostic, Diagnostics};
pub use explain::{
    breaker_presets_table, client_presets_table, error_routing, explain, retry_presets_table,
};
pub use explore::{ExploreObjective, ExploreSpec, FaultTemplate, INSTANT_KINDS, Search};
pub use fault_kinds::{
    FaultKindSpec, On as FaultOn, kind as fault_kind, kind_names as fault_kind_names,
    kinds_table as fault_kinds_table, reference_table as fault_reference_table,
};
pub use fit::{FitSpec, Unknown, UnknownKind, set_values};
pub use keys::{Bound, KeyDefault, KeySpec, Range as KeyRange, Value as KeyValue, declared_words};
pub use limit_keys::{
    adaptive_limit_table, aimd_table, bulkhead_table, gradient2_table, semaphore_table,
};
pub use load_keys::{
    caller_table, reference_table as load_reference_table, stage_table as load_stage_table,
};
pub use map::{MapAxisSpec, MapSpec};
pub use policy_keys::{cache_table, kv_store_table, lock_table, rate_limit_table, throttle_table};
pub use resource_keys::{
    collapse_table, database_table, key_family_table, preload_table, server_table,
};
pub use retry_keys::reference_table as retry_reference_table;
pub use service_keys::service_table;
pub use step_keys::{
    cache_step_table, call_step_table, db_step_table, lock_step_table, rate_limit_step_table,
    redis_step_table, step_table, throttle_step_table, work_step_table,
};
pub use tune::TuneSpec;
pub use validate::PresetUse;

use diagnostic::{Source, key_path_at};
use document::{Table, Value, deserialize_table, merge, set_path, take};
use kinds::RawScenario;
use raw::{RawReport, RawSlo, RawSweep, RawVariant};
use validate::Validator;

/// The most runs (variants times swept values) one file may expand to. Every run is a document
/// that is built and validated before anything runs, so this bounds the time and memory of
/// `validate` too: 200 variants of a 1 500-value sweep would be 300 000 documents.
pub const RUNS_MAX: usize = 10_000;

/// A scenario file, read and validated: one runnable scenario per variant.
#[derive(Clone, Debug)]
pub struct ScenarioFile {
    pub name: String,
    pub seed: u64,
    /// `[scenario] seeds`: the seeds on which the file says its expectations hold (`run
    /// --seeds stated` checks every one).
    pub seeds: Option<RangeInclusive<u64>>,
    /// The sweep's first axis (charts put it on their x axis), when the file sweeps.
    pub sweep: Option<SweepInfo>,
    /// Every axis of the sweep, in the file's order (one for `[sweep]`, several for a grid of
    /// `[[sweep]]`).
    pub sweep_axes: Vec<SweepInfo>,
    pub variants: Vec<Variant>,
    /// `[report]`: what `run --seeds` shows and chooses by, unless the command line says.
    pub report: ReportSettings,
    /// `[scenario] description`.
    pub description: Option<String>,
    /// The comment lines at the top of the file, without their `#`: where a bundled file
    /// states what it models and every parameter it assumes.
    pub preamble: Vec<String>,
    /// What is probably a mistake but runs (a resource nothing uses, a patch that creates
    /// one), located like errors, in file order; `--strict` refuses a file that has any.
    pub warnings: Vec<Diagnostic>,
    /// `[observed]`: what was measured during the incident, read and mapped onto the run's
    /// metrics, for `run` to place beside the variants (`outagelab_report::observed`).
    pub observed: Option<outagelab_report::observed::ObservedSpec>,
    /// `[fit]`: the keys `outagelab fit` searches to match `[observed]`.
    pub fit: Option<FitSpec>,
    /// `[explore]`: what `outagelab explore` varies.
    pub explore: Option<ExploreSpec>,
    /// `[map]`: the grid `outagelab map` runs.
    pub map: Option<MapSpec>,
    /// `[tune]`: the knobs `outagelab tune` searches.
    pub tune: Option<TuneSpec>,
}

impl ScenarioFile {
    /// Whether `metric` names a number in some variant's summary (a patch may add a database
    /// that the base has not); the error says what the nearest part has.
    pub fn check_metric(&self, metric: &str) -> Result<(), String> {
        let probe = Expectation::parse(&format!("{metric} >= 0"))?;
        let mut first_error = None;
        for variant in &self.variants {
            let Ok(shape) = outagelab_sim::summary_shape(&variant.scenario) else {
                continue;
            };
            match probe.check_path(&shape) {
                Ok(()) => return Ok(()),
                Err(error) => {
                    first_error.get_or_insert(error);
                }
            }
        }
        Err(first_error.unwrap_or_else(|| "no variant has it".to_owned()))
    }
}

/// `[report]`, checked: every metric names a number of the summaries, the baseline a variant.
#[derive(Clone, Debug, Default)]
pub struct ReportSettings {
    pub metrics: Vec<String>,
    pub baseline: Option<String>,
    /// Expectations on a metric's mean over the seeds.
    pub constraints: Vec<String>,
    /// `min <metric>` or `max <metric>`.
    pub objective: Option<String>,
    /// A second objective that chooses among the points tied on the first.
    pub tie_break: Option<String>,
    /// A latency objective, which the charts draw (it reaches them in the report).
    pub slo: Option<Slo>,
}

#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    /// The swept value as a number (durations in ms), for variants made by a sweep: the first
    /// axis's value in a grid.
    pub sweep_x: Option<f64>,
    /// Each axis's label and value as the file writes it (`("K", "60")`), for variants made
    /// by a sweep.
    pub sweep_values: Vec<(String, String)>,
    pub scenario: Scenario,
    pub expectations: Vec<LocatedExpectation>,
    /// The breakers and retry policies that start from a library's preset.
    pub presets: Vec<PresetUse>,
    /// Every key of the variant's document (the base with its patch and swept values) by its
    /// dotted path, as TOML writes the value: what [`differences`] compares.
    pub settings: BTreeMap<String, String>,
}

/// One key on which a variant's settings differ from another's: its value in each (`None`
/// where it is not set).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub key: String,
    pub baseline: Option<String>,
    pub variant: Option<String>,
}

/// The keys on which `variant` differs from `baseline`, in key order: what a reviewer reads as
/// "what this variant changes".
pub fn differences(baseline: &Variant, variant: &Variant) -> Vec<Difference> {
    let mut keys: Vec<&String> = baseline
        .settings
        .keys()
        .chain(variant.settings.keys())
        .collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter_map(|key| {
            let (a, b) = (baseline.settings.get(key), variant.settings.get(key));
            (a != b).then(|| Difference {
                key: key.clone(),
                baseline: a.cloned(),
                variant: b.cloned(),
            })
        })
        .collect()
}

/// An expectation and where the file wrote it.
#[derive(Clone, Debug)]
pub struct LocatedExpectation {
    pub expectation: Expectation,
    /// `file:line:column`.
    pub location: String,
}

/// A key of the base file and the value to give it, from the command line's `--set
/// KEY=VALUE`: a dotted path (`loads.peak.rate`) and a TOML value (`400`, `"10s"`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Override {
    pub key: String,
    pub value: String,
}

impl Override {
    /// Splits `KEY=VALUE` at its first `=`. The key and value are checked when the file is
    /// read, where an error can say what the file has.
    pub fn parse(text: &str) -> Result<Override, String> {
        match text.split_once('=') {
            Some((key, value)) if !key.trim().is_empty() => Ok(Override {
                key: key.trim().to_owned(),
                value: value.trim().to_owned(),
            }),
            _ => Err(format!(
                "`{text}` is not KEY=VALUE: write a dotted key and a TOML value, e.g. \
                 loads.peak.rate=400 or 'faults.redis-dead.duration=\"10s\"'"
            )),
        }
    }
}

impl std::fmt::Display for Override {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// How diagnostics name a scenario read from standard input (`run -`).
pub const STDIN_NAME: &str = "<stdin>";

/// Reads and validates the scenario file at `path`.
pub fn load(path: &Path) -> Result<ScenarioFile, Diagnostics> {
    load_with(path, &[])
}

/// Reads and validates the scenario file at `path`, with `overrides` set in its base before
/// the variants are merged. `-` reads standard input, whose diagnostics name `<stdin>`.
pub fn load_with(path: &Path, overrides: &[Override]) -> Result<ScenarioFile, Diagnostics> {
    load_checking(path, overrides, Starts::default())
}

/// [`load_with`], holding the searches `starts` names to their start (see [`Starts`]).
pub fn load_checking(
    path: &Path,
    overrides: &[Override],
    starts: Starts,
) -> Result<ScenarioFile, Diagnostics> {
    let read = if path == Path::new("-") {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text).map(|_| text)
    } else {
        std::fs::read_to_string(path)
    };
    let path = if path == Path::new("-") {
        Path::new(STDIN_NAME)
    } else {
        path
    };
    match read {
        Ok(text) => parse_checking(&text, path, overrides, starts),
        Err(error) => Err(Diagnostics(vec![Diagnostic {
            file: path.to_owned(),
            line: 0,
            column: 0,
            key: String::new(),
            message: format!("cannot read the file: {error}"),
            variants: Vec::new(),
            set: None,
        }])),
    }
}

/// Validates scenario text; `path` is used in messages only.
pub fn parse(text: &str, path: &Path) -> Result<ScenarioFile, Diagnostics> {
    parse_with(text, path, &[])
}

/// Which searches a read holds to their start. `[fit]` unknowns and `[tune]` knobs start
/// from the file's value, so their range must hold it when `fit` or `tune` reads the file (and
/// `validate`, which checks everything). Other reads take the value as it is: a copy of the
/// file whose values a command has set (an explored schedule, a map point, a fit or tune
/// candidate, a reproducer `run` reads) may hold a value outside another table's range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Starts {
    /// Each `[fit.unknowns]` range holds the file's value.
    pub fit: bool,
    /// Each `[tune.knobs]` range holds the file's value.
    pub tune: bool,
}

impl Starts {
    /// Both: what `validate` checks.
    pub const ALL: Starts = Starts {
        fit: true,
        tune: true,
    };
}

/// Validates scenario text with `overrides` set in its base (see [`load_with`]); no search is
/// held to its start (see [`Starts`]).
pub fn parse_with(
    text: &str,
    path: &Path,
    overrides: &[Override],
) -> Result<ScenarioFile, Diagnostics> {
    parse_checking(text, path, overrides, Starts::default())
}

/// [`parse_with`], holding the searches `starts` names to their start.
pub fn parse_checking(
    text: &str,
    path: &Path,
    overrides: &[Override],
    starts: Starts,
) -> Result<ScenarioFile, Diagnostics> {
    let (override_texts, regions) = override_regions(text, overrides);
    let source = Source {
        file: path,
        text,
        sets: regions,
    };
    let parsed = DeTable::parse(text).map_err(|error| {
        let message = format!("not valid TOML: {}", error.message());
        Diagnostics(vec![source.diagnostic(error.span(), "", message)])
    })?;
    let document_span = parsed.span();
    let mut base = parsed.into_inner();
    let mut reader = Reader {
        source: &source,
        errors: Vec::new(),
        warnings: Vec::new(),
        starts,
    };
    let variant_value = take(&mut base, "variant");
    let sweep_value = take(&mut base, "sweep");
    let report_value = take(&mut base, "report");
    let observed_value = take(&mut base, "observed");
    let fit_value = take(&mut base, "fit");
    let explore_value = take(&mut base, "explore");
    let map_value = take(&mut base, "map");
    let tune_value = take(&mut base, "tune");
    for (index, set) in overrides.iter().enumerate() {
        reader.set(&mut base, set, &override_texts[index], index);
    }
    let variants = reader.variants(variant_value);
    let sweeps = reader.sweeps(sweep_value, variants.len().max(1));
    reader.check_expect_at(&variants, &sweeps);
    reader.check_sets_not_swept(overrides, &sweeps);
    if !reader.errors.is_empty() {
        return Err(Diagnostics(reader.errors));
    }
    let variant_count = variants.len().max(1) * points(&sweeps);
    let mut file = reader.build(base, document_span, variants, sweeps);
    if let (Some(file), Some((_, value))) = (&mut file, report_value) {
        file.report = reader.report(value, file);
    }
    let observed_given = observed_value.is_some();
    if let (Some(file), Some((_, value))) = (&mut file, observed_value) {
        file.observed = reader.observed(value, file);
    }
    if let (Some(file), Some((_, value))) = (&mut file, fit_value) {
        // An [observed] the file has but that failed was reported already.
        let observed_failed = observed_given && file.observed.is_none();
        file.fit = reader.fit(value, file, observed_failed);
    }
    let explore_given = explore_value.is_some();
    if let (Some(file), Some((_, value))) = (&mut file, explore_value) {
        file.explore = reader.explore(value, file);
    }
    if let (Some(file), Some((_, value))) = (&mut file, tune_value) {
        let explore_failed = explore_given && file.explore.is_none();
        let explore = file.explore.clone();
        file.tune = reader.tune(value, file, explore.as_ref(), explore_failed);
    }
    if let (Some(file), Some((_, value))) = (&mut file, map_value) {
        file.map = reader.map(value, file);
    }
    if let Some(file) = &mut file {
        file.preamble = preamble(text);
    }
    if reader.errors.is_empty() {
        let mut file = file.expect("no errors means a file");
        file.warnings = dedupe(std::mem::take(&mut reader.warnings), variant_count);
        Ok(file)
    } else {
        Err(Diagnostics(dedupe(reader.errors, variant_count)))
    }
}

/// Each override's value is read from a text of its own, `value = VALUE`, whose spans are then
/// moved past the end of the file, one region per override: a problem in the value is then
/// located at its `--set`, however deep in the merged document it ends up. The texts, and the
/// regions with the `--set` each stands for.
fn override_regions(
    text: &str,
    overrides: &[Override],
) -> (Vec<String>, Vec<(Range<usize>, String)>) {
    let override_texts: Vec<String> = overrides
        .iter()
        .map(|o| format!("value = {}", o.value))
        .collect();
    let mut regions = Vec::new();
    let mut start = text.len() + 1;
    for (set, override_text) in overrides.iter().zip(&override_texts) {
        let end = start + override_text.len() + 1;
        regions.push((start..end, set.to_string()));
        start = end;
    }
    (override_texts, regions)
}

/// Why a command table cannot vary `key` when a `[sweep]` does: each point of the sweep
/// sets it after the command has, so the command would change nothing.
pub(crate) fn swept_by_the_file(file: &ScenarioFile, key: &str, table: &str) -> Option<String> {
    (file.sweep_axes.iter())
        .any(|axis| axis.parameter == key)
        .then(|| {
            format!(
                "`{key}` is swept by [sweep]: each point sets it, so {table} would change nothing; \
             vary another key, or leave the sweep out"
            )
        })
}

/// "`name` is not a variant (the variants: "a", "b")".
pub(crate) fn not_a_variant<'n>(name: &str, names: impl Iterator<Item = &'n str>) -> String {
    let listed: Vec<String> = names.map(|n| format!("\"{n}\"")).collect();
    format!(
        "\"{name}\" is not a variant (the variants: {})",
        listed.join(", ")
    )
}

/// The file `named` by the scenario at `scenario`: as it is when absolute, else in the
/// scenario's directory (the current one for a scenario read from stdin).
fn beside(scenario: &Path, named: &str) -> PathBuf {
    let named = Path::new(named);
    if named.is_absolute() {
        return named.to_owned();
    }
    let directory = scenario
        .parent()
        .filter(|dir| !dir.as_os_str().is_empty() && scenario != Path::new(STDIN_NAME));
    directory.map_or_else(|| named.to_owned(), |dir| dir.join(named))
}

/// The comment block the file starts with (blank lines inside it kept as empty lines), each
/// line without its `#` and the one space after it.
fn preamble(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        .map(str::trim)
        .take_while(|line| line.is_empty() || line.starts_with('#'))
        .map(|line| {
            let line = line.trim_start_matches('#');
            line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned()
        })
        .collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let leading = lines.iter().take_while(|line| line.is_empty()).count();
    lines.drain(..leading);
    lines
}

struct Reader<'a> {
    source: &'a Source<'a>,
    errors: Vec<Diagnostic>,
    warnings: Vec<Diagnostic>,
    /// Which searches must start inside their range.
    starts: Starts,
}

/// The most seeds a range may hold: each is a whole run of every variant.
pub const SEEDS_MAX: u64 = 1000;

/// Reads a seed range `A..B` (both included), as `[scenario] seeds` and `run --seeds` write
/// it: `A <= B`, at most [`SEEDS_MAX`] seeds, each at most `i64::MAX` (the largest seed a
/// file can write).
pub fn parse_seed_range(text: &str) -> Result<RangeInclusive<u64>, String> {
    let shape = || format!("`{text}` is not a seed range: write it as A..B, e.g. 1..20");
    let (low, high) = text.split_once("..").ok_or_else(shape)?;
    let number = |part: &str| part.trim().parse::<u64>().map_err(|_| shape());
    let (low, high) = (number(low)?, number(high)?);
    let largest = i64::MAX.unsigned_abs();
    if high > largest {
        return Err(format!("seeds go up to {largest}, not {high}"));
    }
    if low > high {
        return Err(format!("the range {text} is empty: {low} is above {high}"));
    }
    if high - low >= SEEDS_MAX {
        return Err(format!(
            "{} seeds is more than {SEEDS_MAX}: each is a run of every variant",
            high - low + 1
        ));
    }
    Ok(low..=high)
}

/// Why neither a variant nor a sweep may set the seed.
const SEED_IS_A_RUN_PARAMETER: &str = "the seed is a parameter of the run, not of a variant: \
     every variant runs on the same seed so that they compare on the same random draws, and \
     the header's seed and `--seed` reproduce the run only if no variant changes it; use \
     --seed N for another draw";

/// A `[[variant]]` entry: its header and its patch.
struct VariantEntry<'t> {
    header: RawVariant,
    patch: Option<Table<'t>>,
}

/// The axes as the report shows them: each one's label, parameter, unit, and its words when
/// its values are words.
fn sweep_axes(sweeps: Vec<SweepEntry<'_>>) -> Vec<SweepInfo> {
    sweeps
        .into_iter()
        .map(|sweep| SweepInfo {
            label: sweep.header.label.unwrap_or_else(|| "value".to_owned()),
            parameter: sweep.header.parameter.into_inner(),
            unit: sweep.unit.to_owned(),
            values: if sweep.words {
                sweep
                    .values
                    .iter()
                    .map(|(text, _, _)| text.clone())
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect()
}

/// Moves `point` to the grid's next point: the last axis moves fastest.
fn next_point(point: &mut [usize], lengths: &[usize]) {
    for axis in (0..point.len()).rev() {
        point[axis] += 1;
        if point[axis] < lengths[axis] {
            break;
        }
        point[axis] = 0;
    }
}

/// A swept value as written, as a number for the plots' x axis (`None` for a value that is
/// not one), and its unit: a duration in ms, a size in bytes, a rate in bytes/s, a word by
/// its `index` in the list.
fn swept_value(value: &DeValue<'_>, index: usize) -> (String, Option<f64>, &'static str) {
    match value {
        DeValue::Integer(i) => (i.as_str().to_owned(), i.as_str().parse::<f64>().ok(), ""),
        DeValue::Float(f) => (f.as_str().to_owned(), f.as_str().parse::<f64>().ok(), ""),
        DeValue::String(s) => {
            let text = s.to_string();
            if let Ok(nanos) = units::parse_duration(s) {
                (text, Some(nanos as f64 / 1e6), "ms")
            } else if let Ok(bytes) = units::parse_size(s) {
                (text, Some(bytes as f64), "bytes")
            } else if let Ok(rate) = units::parse_bandwidth(s) {
                (text, Some(rate as f64), "bytes/s")
            } else {
                (text, Some(index as f64), "(index)")
            }
        }
        DeValue::Boolean(b) => (b.to_string(), Some(f64::from(u8::from(*b))), ""),
        _ => (String::new(), None, ""),
    }
}

/// The file's name, seed, stated seed range and description, from its first variant.
type FileHeader = (String, u64, Option<RangeInclusive<u64>>, Option<String>);

/// One point of a variant's grid: its document with the point's values set.
struct GridPoint<'e, 't> {
    name: String,
    /// The first axis's value, for the plots' x axis (`None` when it does not sweep this
    /// variant).
    sweep_x: Option<f64>,
    document: Table<'t>,
    entry: &'e VariantEntry<'t>,
    /// The index of each axis's value (`None` for an axis that does not sweep the variant).
    point: Vec<Option<usize>>,
    /// Each axis's label and value as written (`-` where it does not sweep the variant).
    sweep_values: Vec<(String, String)>,
}

/// Points of a grid: the product of its axes' value counts (1 without a sweep).
fn points(sweeps: &[SweepEntry<'_>]) -> usize {
    sweeps.iter().fold(1usize, |product, sweep| {
        product.saturating_mul(sweep.values.len())
    })
}

/// One axis of a sweep (`[sweep]`, or one `[[sweep]]` of a grid): its header and its values,
/// with their spans and text.
struct SweepEntry<'t> {
    header: RawSweep,
    values: Vec<(String, f64, Value<'t>)>,
    unit: &'static str,
    /// True when the values are words plotted in list order (`sweep_x` is the index).
    words: bool,
}

impl<'t> Reader<'_> {
    /// Sets `--set` number `index`, `set`, in the base: its value read from `text` (`value =
    /// VALUE`) and placed in its region past the end of the file.
    fn set(&mut self, base: &mut Table<'t>, set: &Override, text: &'t str, index: usize) {
        let key = set.key.as_str();
        let refusal = if key == "scenario.seed" || key == "scenario.seeds" {
            Some(format!(
                "the seed is a parameter of the run: use --seed N (or --seeds A..B), not --set \
                 {key}"
            ))
        } else if key.split('.').any(str::is_empty) {
            Some("must name a key as a dotted path, e.g. loads.peak.rate".to_owned())
        } else {
            ["variant", "sweep", "report"]
                .into_iter()
                .find(|first| key.split('.').next() == Some(*first))
                .map(|first| {
                    format!(
                        "--set changes the base scenario, before variants are merged; `{first}` \
                         is read apart from it: change it in the file"
                    )
                })
        };
        if let Some(message) = refusal {
            self.errors.push(self.set_diagnostic(index, key, message));
            return;
        }
        let region = &self.source.sets[index].0;
        let shift_by = region.start;
        let parsed = DeTable::parse(text).map(Spanned::into_inner);
        let mut value = match parsed {
            // One value and nothing after it (a newline could smuggle in other keys).
            Ok(mut table) if table.len() == 1 => take(&mut table, "value").expect("one key").1,
            Ok(_) => {
                let message = "holds more than one TOML value".to_owned();
                self.errors.push(self.set_diagnostic(index, key, message));
                return;
            }
            Err(error) => {
                let message = format!(
                    "`{}` is not a TOML value ({}): a string is written in quotes, e.g. \
                     --set '{key}=\"10s\"'",
                    set.value,
                    error.message().trim()
                );
                self.errors.push(self.set_diagnostic(index, key, message));
                return;
            }
        };
        document::shift(&mut value, shift_by);
        if let Err(message) = set_path(base, key, shift_by..shift_by + 1, value) {
            self.errors.push(self.set_diagnostic(index, key, message));
        }
    }

    /// A problem with `--set` number `index` as a whole.
    fn set_diagnostic(&self, index: usize, key: &str, message: String) -> Diagnostic {
        let start = self.source.sets[index].0.start;
        self.source.diagnostic(Some(start..start + 1), key, message)
    }

    /// A patch that names a resource the base file does not have creates it, which is what a
    /// typo does too (`servers = { rediss = ... }` makes an unused server and the variant runs
    /// as the base). A new name one or two edits from an existing one is refused as a typo;
    /// any other is a warning unless the variant lists it in `creates`, and every name there
    /// must be one the patch creates.
    fn check_patch_names(&mut self, base: &Table<'_>, entry: &VariantEntry<'_>) {
        let variant = entry.header.name.get_ref();
        let declared = &entry.header.creates;
        let mut created: Vec<String> = Vec::new();
        let sections = entry.patch.iter().flat_map(|patch| patch.iter());
        for (section, names) in sections {
            let section = section.get_ref().as_ref();
            let DeValue::Table(names) = names.get_ref() else {
                continue;
            };
            if !kinds::is_resource_section(section) {
                continue;
            }
            let existing = match base.get(section).map(Spanned::get_ref) {
                Some(DeValue::Table(existing)) => Some(existing),
                _ => None,
            };
            for (name, _) in names.iter() {
                let name_text = name.get_ref().as_ref();
                if existing.is_some_and(|existing| existing.contains_key(name_text)) {
                    continue;
                }
                let path = format!("{section}.{name_text}");
                let key = format!("variant \"{variant}\" patch.{path}");
                if declared.iter().any(|d| *d.get_ref() == path) {
                    created.push(path);
                    continue;
                }
                let known = existing
                    .into_iter()
                    .flat_map(|existing| existing.iter().map(|(key, _)| key.get_ref().as_ref()));
                if let Some(near) = suggest::closest(name_text, known) {
                    self.errors.push(self.source.diagnostic(
                        Some(name.span()),
                        key,
                        format!(
                            "the base file has no {path}: did you mean `{near}`? (a patch that \
                             names a new resource creates it)"
                        ),
                    ));
                } else {
                    self.warnings.push(self.source.diagnostic(
                        Some(name.span()),
                        key,
                        format!(
                            "the base file has no {path}, so this patch creates it: if it \
                             should, say so with creates = [\"{path}\"] in the variant"
                        ),
                    ));
                }
            }
        }
        for entry in declared {
            let path = entry.get_ref();
            if created.contains(path) {
                continue;
            }
            let in_base = path
                .split_once('.')
                .and_then(|(section, name)| document::key_span(base, &[section, name]))
                .is_some();
            let reason = if in_base {
                "the base file has it already, so the patch changes it rather than creating it"
            } else {
                "the patch does not name it: write it as `table.name` of a resource the patch \
                 adds, e.g. \"faults.down\""
            };
            self.errors.push(self.source.diagnostic(
                Some(entry.span()),
                format!("variant \"{variant}\" creates"),
                format!("`{path}` is not created by this variant: {reason}"),
            ));
        }
    }

    fn toml_error(&mut self, root: Option<&Table<'_>>, error: toml::de::Error) {
        let span = error.span();
        let key = match (root, &span) {
            (Some(root), Some(span)) => key_path_at(root, span.start),
            _ => String::new(),
        };
        let message = serde_message_at(&error, &key);
        let diagnostic = self.source.diagnostic(span, key, message);
        self.errors.push(diagnostic);
    }

    fn variants(&mut self, value: Option<(Range<usize>, Value<'t>)>) -> Vec<VariantEntry<'t>> {
        let Some((key_span, value)) = value else {
            return Vec::new();
        };
        let DeValue::Array(items) = value.into_inner() else {
            self.errors.push(self.source.diagnostic(
                Some(key_span),
                "variant",
                "variants are an array of tables: write each as [[variant]]",
            ));
            return Vec::new();
        };
        if let Some(first_too_many) = items.get(RUNS_MAX) {
            let message = format!(
                "{} variants are more than the {RUNS_MAX} runs a file may expand to: split them \
                 over several files",
                items.len()
            );
            self.errors.push(self.source.diagnostic(
                Some(first_too_many.span()),
                format!("variant[{RUNS_MAX}]"),
                message,
            ));
            return Vec::new();
        }
        let mut entries: Vec<VariantEntry<'t>> = Vec::new();
        for (index, item) in items.into_iter().enumerate() {
            let span = item.span();
            let DeValue::Table(mut table) = item.into_inner() else {
                let message = "a variant is a table: write it as [[variant]]";
                self.errors.push(self.source.diagnostic(
                    Some(span),
                    format!("variant[{index}]"),
                    message,
                ));
                continue;
            };
            let Ok(patch) = self.variant_patch(&mut table, index) else {
                continue;
            };
            let wrapped = table.clone();
            match deserialize_table::<RawVariant>(table, span.clone()) {
                Ok(header) => {
                    let name = header.name.get_ref();
                    if name.trim().is_empty() {
                        let diagnostic = self.source.diagnostic(
                            Some(header.name.span()),
                            format!("variant[{index}].name"),
                            "a variant needs a name",
                        );
                        self.errors.push(diagnostic);
                    } else if entries.iter().any(|e| e.header.name.get_ref() == name) {
                        let diagnostic = self.source.diagnostic(
                            Some(header.name.span()),
                            format!("variant[{index}].name"),
                            format!("two variants are named \"{name}\""),
                        );
                        self.errors.push(diagnostic);
                    }
                    entries.push(VariantEntry { header, patch });
                }
                Err(error) => {
                    let mut root = Table::new();
                    root.insert(
                        Spanned::new(key_span.clone(), "variant".into()),
                        Spanned::new(span, DeValue::Table(wrapped)),
                    );
                    self.toml_error(Some(&root), error);
                }
            }
        }
        entries
    }

    /// A variant's `patch`: a table of the keys it changes, which may not be the seed.
    fn variant_patch(
        &mut self,
        table: &mut Table<'t>,
        index: usize,
    ) -> Result<Option<Table<'t>>, validate::Reported> {
        let Some((_, patch)) = take(table, "patch") else {
            return Ok(None);
        };
        let patch_span = patch.span();
        match patch.into_inner() {
            DeValue::Table(patch) => {
                let seed = patch
                    .get("scenario")
                    .and_then(|scenario| match scenario.get_ref() {
                        DeValue::Table(scenario) => scenario
                            .get_key_value("seed")
                            .or_else(|| scenario.get_key_value("seeds")),
                        _ => None,
                    });
                if let Some((key, _)) = seed {
                    self.errors.push(self.source.diagnostic(
                        Some(key.span()),
                        format!("variant[{index}].patch.scenario.{}", key.get_ref()),
                        SEED_IS_A_RUN_PARAMETER,
                    ));
                    return Err(validate::Reported);
                }
                Ok(Some(patch))
            }
            _ => {
                let message = "a patch is a table of the keys to change, e.g. \
                                   [variant.patch.breakers.redis]";
                self.errors.push(self.source.diagnostic(
                    Some(patch_span),
                    format!("variant[{index}].patch"),
                    message,
                ));
                Err(validate::Reported)
            }
        }
    }

    /// Reads `[sweep]` (one axis) or `[[sweep]]` (several: a grid of every combination);
    /// every one of `variant_count` variants runs once per point.
    fn sweeps(
        &mut self,
        value: Option<(Range<usize>, Value<'t>)>,
        variant_count: usize,
    ) -> Vec<SweepEntry<'t>> {
        let Some((key_span, value)) = value else {
            return Vec::new();
        };
        let span = value.span();
        let axes: Vec<(String, Range<usize>, Table<'t>)> = match value.into_inner() {
            DeValue::Table(table) => vec![("sweep".to_owned(), span, table)],
            DeValue::Array(items) if !items.is_empty() => {
                let mut axes = Vec::new();
                for (index, item) in items.into_iter().enumerate() {
                    let item_span = item.span();
                    match item.into_inner() {
                        DeValue::Table(table) => {
                            axes.push((format!("sweep[{index}]"), item_span, table));
                        }
                        _ => {
                            let message = "each axis of a grid is a table: write it as [[sweep]]";
                            self.errors.push(self.source.diagnostic(
                                Some(item_span),
                                format!("sweep[{index}]"),
                                message,
                            ));
                        }
                    }
                }
                axes
            }
            _ => {
                let message = "a sweep is a table: write it as [sweep], or [[sweep]] once per \
                               axis of a grid";
                self.errors
                    .push(self.source.diagnostic(Some(key_span), "sweep", message));
                return Vec::new();
            }
        };
        let several = axes.len() > 1;
        let mut entries: Vec<SweepEntry<'t>> = Vec::new();
        for (key, span, table) in axes {
            let runs_before = variant_count.saturating_mul(points(&entries));
            let Some(mut entry) = self.sweep(&key, span, table, runs_before) else {
                continue;
            };
            if let Some(other) = entries
                .iter()
                .find(|e| e.header.parameter.get_ref() == entry.header.parameter.get_ref())
            {
                let message = format!(
                    "`{}` is swept twice: a grid sweeps each key once",
                    other.header.parameter.get_ref()
                );
                self.errors.push(self.source.diagnostic(
                    Some(entry.header.parameter.span()),
                    format!("{key}.parameter"),
                    message,
                ));
                continue;
            }
            if several && entry.header.label.is_none() {
                let parameter = entry.header.parameter.get_ref();
                let last = parameter.rsplit('.').next().unwrap_or(parameter);
                entry.header.label = Some(last.to_owned());
            }
            entries.push(entry);
        }
        entries
    }

    /// Reads one axis of a sweep, `key` (`sweep` or `sweep[i]`); `runs_before` is the number
    /// of runs the axes before it already make.
    fn sweep(
        &mut self,
        key: &str,
        span: Range<usize>,
        mut table: Table<'t>,
        runs_before: usize,
    ) -> Option<SweepEntry<'t>> {
        let Some((values_key_span, values)) = take(&mut table, "values") else {
            let message = "a sweep needs `values`, e.g. values = [0, 10, 60]";
            self.errors.push(
                self.source
                    .diagnostic(Some(span), format!("{key}.values"), message),
            );
            return None;
        };
        let header = self.sweep_header(key, span, table)?;
        let values_span = values.span();
        let items = match values.into_inner() {
            DeValue::Array(items) if !items.is_empty() => items,
            _ => {
                let message = "must be a non-empty array of values";
                self.errors.push(self.source.diagnostic(
                    Some(values_span.start..values_span.end.max(values_key_span.end)),
                    format!("{key}.values"),
                    message,
                ));
                return None;
            }
        };
        // Checked before the values are read: their count alone may be what is too large.
        self.check_sweep_runs(key, runs_before, items.len(), values_span)?;
        let mut parsed = Vec::new();
        let mut units = Vec::new();
        for (index, item) in items.into_iter().enumerate() {
            let (text, x, unit) = swept_value(item.get_ref(), index);
            let Some(x) = x.filter(|x| x.is_finite()) else {
                let message = "a swept value is a number, a string or a boolean";
                self.errors.push(self.source.diagnostic(
                    Some(item.span()),
                    format!("{key}.values[{index}]"),
                    message,
                ));
                continue;
            };
            if parsed.iter().any(|(seen, _, _)| *seen == text) {
                let diagnostic = self.source.diagnostic(
                    Some(item.span()),
                    format!("{key}.values[{index}]"),
                    format!("`{text}` is swept twice"),
                );
                self.errors.push(diagnostic);
            }
            units.push((unit, item.span()));
            parsed.push((text, x, item));
        }
        let unit = units.first().map_or("", |(unit, _)| *unit);
        if let Some((other, span)) = units.iter().find(|(u, _)| *u != unit) {
            let message = format!(
                "every swept value must be of one kind (the first is {}, this one {})",
                kind_name(unit),
                kind_name(other)
            );
            self.errors.push(self.source.diagnostic(
                Some(span.clone()),
                format!("{key}.values"),
                message,
            ));
        }
        self.check_sweep_expect(key, &header, &parsed);
        Some(SweepEntry {
            header,
            values: parsed,
            unit: if unit == "(index)" { "" } else { unit },
            words: unit == "(index)",
        })
    }

    /// An axis's keys but its values: its parameter a dotted path, and not the seed.
    fn sweep_header(
        &mut self,
        key: &str,
        span: Range<usize>,
        table: Table<'t>,
    ) -> Option<RawSweep> {
        let header = match deserialize_table::<RawSweep>(table, span.clone()) {
            Ok(header) => header,
            Err(error) => {
                let message = serde_message(&error);
                let at = error.span().unwrap_or(span);
                self.errors
                    .push(self.source.diagnostic(Some(at), key.to_owned(), message));
                return None;
            }
        };
        if header.parameter.get_ref().split('.').any(str::is_empty) {
            let message = "must name a key as a dotted path, e.g. \"loads.blobs.count\"";
            self.errors.push(self.source.diagnostic(
                Some(header.parameter.span()),
                format!("{key}.parameter"),
                message,
            ));
            return None;
        }
        if header.parameter.get_ref() == "scenario.seed" {
            self.errors.push(self.source.diagnostic(
                Some(header.parameter.span()),
                format!("{key}.parameter"),
                SEED_IS_A_RUN_PARAMETER,
            ));
            return None;
        }
        Some(header)
    }

    /// The runs the file expands to with this axis's `count` values, at most [`RUNS_MAX`].
    fn check_sweep_runs(
        &mut self,
        key: &str,
        runs_before: usize,
        count: usize,
        values_span: Range<usize>,
    ) -> Option<()> {
        let runs = runs_before.saturating_mul(count);
        if runs > RUNS_MAX {
            let message = format!(
                "{runs_before} {} × {} swept values = {runs} runs, more than the {RUNS_MAX} a \
                 file may expand to: sweep fewer values, or split the variants over several files",
                if key == "sweep" || key == "sweep[0]" {
                    if runs_before == 1 {
                        "variant"
                    } else {
                        "variants"
                    }
                } else {
                    "runs"
                },
                count,
            );
            self.errors.push(self.source.diagnostic(
                Some(values_span),
                format!("{key}.values"),
                message,
            ));
            return None;
        }
        Some(())
    }

    /// An axis's `expect` names its values.
    fn check_sweep_expect(
        &mut self,
        key: &str,
        header: &RawSweep,
        parsed: &[(String, f64, Value<'t>)],
    ) {
        for (value_text, lines) in &header.expect {
            if !parsed.iter().any(|(text, _, _)| text == value_text) {
                let span = lines.first().map(Spanned::span);
                let message = format!("`{value_text}` is not one of the swept values");
                self.errors.push(self.source.diagnostic(
                    span,
                    format!("{key}.expect.{value_text}"),
                    message,
                ));
            }
        }
    }

    /// A `--set` of a key a sweep sets would change nothing: refused at the `--set`.
    fn check_sets_not_swept(&mut self, overrides: &[Override], sweeps: &[SweepEntry<'t>]) {
        for (index, set) in overrides.iter().enumerate() {
            if let Some(sweep) = sweeps
                .iter()
                .find(|sweep| *sweep.header.parameter.get_ref() == set.key)
            {
                let message = format!(
                    "`{}` is swept (values {}): each point sets it, so this would change nothing",
                    set.key,
                    sweep.values.len()
                );
                let diagnostic = self.set_diagnostic(index, &set.key, message);
                self.errors.push(diagnostic);
            }
        }
    }

    /// A variant's `expect_at` names swept values: each must be one, of some axis.
    fn check_expect_at(&mut self, variants: &[VariantEntry<'t>], sweeps: &[SweepEntry<'t>]) {
        for entry in variants {
            for (value_text, lines) in &entry.header.expect_at {
                let swept = sweeps
                    .iter()
                    .any(|sweep| sweep.values.iter().any(|(text, _, _)| text == value_text));
                if !swept {
                    let span = lines.first().map(Spanned::span);
                    let message = if sweeps.is_empty() {
                        "`expect_at` gives expectations at swept values, and the file sweeps \
                         nothing"
                            .to_owned()
                    } else {
                        format!("`{value_text}` is not one of the swept values")
                    };
                    let key = format!(
                        "variant \"{}\" expect_at.{value_text}",
                        entry.header.name.get_ref()
                    );
                    self.errors.push(self.source.diagnostic(span, key, message));
                }
            }
        }
    }

    fn build(
        &mut self,
        base: Table<'t>,
        document_span: Range<usize>,
        variants: Vec<VariantEntry<'t>>,
        sweeps: Vec<SweepEntry<'t>>,
    ) -> Option<ScenarioFile> {
        let implicit = [VariantEntry {
            header: RawVariant {
                name: Spanned::new(0..0, "base".to_owned()),
                description: None,
                expect: Vec::new(),
                expect_at: BTreeMap::new(),
                creates: Vec::new(),
            },
            patch: None,
        }];
        let entries: &[VariantEntry<'t>] = if variants.is_empty() {
            &implicit
        } else {
            &variants
        };
        let explicit = !variants.is_empty();
        self.check_swept_variants(&sweeps, entries, explicit)?;
        let mut documents = Vec::new();
        for entry in entries {
            documents.extend(self.grid_points(&base, entry, explicit, &sweeps)?);
        }
        let (built, file) = self.read_variants(documents, &document_span, &sweeps);
        let (name, seed, seeds, description) = file?;
        let axes = sweep_axes(sweeps);
        Some(ScenarioFile {
            name,
            seed,
            seeds,
            sweep: axes.first().cloned(),
            sweep_axes: axes,
            variants: built,
            report: ReportSettings::default(),
            description,
            preamble: Vec::new(),
            warnings: Vec::new(),
            observed: None,
            fit: None,
            explore: None,
            map: None,
            tune: None,
        })
    }

    /// An axis's `variants` name variants of the file.
    fn check_swept_variants(
        &mut self,
        sweeps: &[SweepEntry<'t>],
        entries: &[VariantEntry<'t>],
        explicit: bool,
    ) -> Option<()> {
        for (axis, sweep) in sweeps.iter().enumerate() {
            let Some(names) = &sweep.header.variants else {
                continue;
            };
            let key = if sweeps.len() > 1 {
                format!("sweep[{axis}].variants")
            } else {
                "sweep.variants".to_owned()
            };
            if !explicit || names.get_ref().is_empty() {
                let message = if explicit {
                    "names no variant: leave it out to sweep every variant"
                } else {
                    "the file has no [[variant]]: leave it out"
                };
                self.errors
                    .push(self.source.diagnostic(Some(names.span()), key, message));
                return None;
            }
            for name in names.get_ref() {
                if !entries
                    .iter()
                    .any(|e| e.header.name.get_ref() == name.get_ref())
                {
                    let message = not_a_variant(
                        name.get_ref(),
                        entries.iter().map(|e| e.header.name.get_ref().as_str()),
                    );
                    self.errors.push(self.source.diagnostic(
                        Some(name.span()),
                        key.clone(),
                        message,
                    ));
                    return None;
                }
            }
        }
        Some(())
    }

    /// The documents of one variant: its patch merged into the base, then one per point of
    /// the grid of the axes that sweep it (the first axis outermost), each named by its
    /// values; `None` after a sweep's parameter could not be set.
    fn grid_points<'e>(
        &mut self,
        base: &Table<'t>,
        entry: &'e VariantEntry<'t>,
        explicit: bool,
        sweeps: &[SweepEntry<'t>],
    ) -> Option<Vec<GridPoint<'e, 't>>> {
        let mut documents = Vec::new();
        let mut document = base.clone();
        if explicit {
            self.check_patch_names(base, entry);
        }
        if let Some(patch) = &entry.patch
            && let Err((span, reason)) = merge(&mut document, patch)
        {
            let diagnostic = self.source.diagnostic(
                Some(span),
                format!("variant \"{}\" patch", entry.header.name.get_ref()),
                reason,
            );
            self.errors.push(diagnostic);
            return Some(documents);
        }
        let variant_name = entry.header.name.get_ref().clone();
        // The axes that sweep this variant: those without `variants`, and those that
        // name it. Over the others it runs once, at the file's value (shown as `-`).
        let applies: Vec<bool> = (sweeps.iter())
            .map(|sweep| {
                (sweep.header.variants.as_ref()).is_none_or(|names| {
                    (names.get_ref().iter()).any(|name| name.get_ref() == &variant_name)
                })
            })
            .collect();
        let lengths: Vec<usize> = (sweeps.iter().zip(&applies))
            .map(|(sweep, &applies)| if applies { sweep.values.len() } else { 1 })
            .collect();
        // Every point of the grid, the first axis outermost: the indices of its values.
        let mut point = vec![0usize; sweeps.len()];
        let count = lengths.iter().product::<usize>();
        for _ in 0..count {
            let (swept, texts) = self.set_point(&document, sweeps, &point, &applies)?;
            let shown: Vec<String> = (texts.iter().zip(&applies))
                .filter(|(_, applies)| **applies)
                .map(|((l, t), _)| format!("{l}={t}"))
                .collect();
            let name = match (explicit, shown.is_empty()) {
                (_, true) => variant_name.clone(),
                (true, false) => format!("{variant_name} / {}", shown.join(", ")),
                (false, false) => shown.join(", "),
            };
            let x = (sweeps.first())
                .filter(|_| applies[0])
                .map(|sweep| sweep.values[point[0]].1);
            let at: Vec<Option<usize>> = (point.iter().zip(&applies))
                .map(|(&index, &applies)| applies.then_some(index))
                .collect();
            documents.push(GridPoint {
                name,
                sweep_x: x,
                document: swept,
                entry,
                point: at,
                sweep_values: texts,
            });
            next_point(&mut point, &lengths);
        }
        Some(documents)
    }

    /// The document with each axis that sweeps the variant set to its value at `point`, and
    /// each axis's label and value as written (`-` where it does not sweep it); `None` after
    /// a parameter could not be set.
    fn set_point(
        &mut self,
        document: &Table<'t>,
        sweeps: &[SweepEntry<'t>],
        point: &[usize],
        applies: &[bool],
    ) -> Option<(Table<'t>, Vec<(String, String)>)> {
        let mut swept = document.clone();
        let mut texts = Vec::new();
        for ((sweep, &index), &applies) in sweeps.iter().zip(point).zip(applies) {
            let label = sweep.header.label.as_deref().unwrap_or("value");
            if !applies {
                texts.push((label.to_owned(), "-".to_owned()));
                continue;
            }
            let (text, _, value) = &sweep.values[index];
            let parameter = &sweep.header.parameter;
            if let Err(message) = set_path(
                &mut swept,
                parameter.get_ref(),
                parameter.span(),
                value.clone(),
            ) {
                let diagnostic =
                    self.source
                        .diagnostic(Some(parameter.span()), "sweep.parameter", message);
                self.errors.push(diagnostic);
                return None;
            }
            texts.push((label.to_owned(), text.clone()));
        }
        Some((swept, texts))
    }

    /// Each grid point read and validated into a variant (its problems tagged with its
    /// name), with the file's header from the first; then the resources no variant uses,
    /// warned of once.
    fn read_variants(
        &mut self,
        documents: Vec<GridPoint<'_, 't>>,
        document_span: &Range<usize>,
        sweeps: &[SweepEntry<'t>],
    ) -> (Vec<Variant>, Option<FileHeader>) {
        // The file's name, seed, stated seed range and description, from the first variant.
        let mut file: Option<FileHeader> = None;
        let mut built = Vec::new();
        // Every resource of every variant, where its name is written, and those named.
        let mut defined: BTreeMap<(&'static str, String), Option<Range<usize>>> = BTreeMap::new();
        let mut used: BTreeSet<(&'static str, String)> = BTreeSet::new();
        for GridPoint {
            name,
            sweep_x,
            document,
            entry,
            point,
            sweep_values,
        } in documents
        {
            let errors_before = self.errors.len();
            let raw =
                match deserialize_table::<RawScenario>(document.clone(), document_span.clone()) {
                    Ok(raw) => raw,
                    Err(error) => {
                        self.toml_error(Some(&document), error);
                        tag(&mut self.errors[errors_before..], &name);
                        continue;
                    }
                };
            for (section, names) in raw.sections() {
                for resource in names {
                    defined
                        .entry((section, resource.to_owned()))
                        .or_insert_with(|| document::key_span(&document, &[section, resource]));
                }
            }
            let mut validator = Validator::new(self.source, &document);
            let scenario = validator.scenario(&raw, &name);
            self.errors.append(&mut validator.errors);
            let warnings_before = self.warnings.len();
            self.warnings.append(&mut validator.warnings);
            tag(&mut self.warnings[warnings_before..], &name);
            used.append(&mut validator.used);
            let presets = std::mem::take(&mut validator.presets);
            if let Some(scenario) = scenario {
                let mut lines: Vec<&Spanned<String>> = raw.scenario.expect.iter().collect();
                lines.extend(&entry.header.expect);
                for (sweep, index) in sweeps.iter().zip(&point) {
                    let Some(index) = *index else { continue };
                    let text = &sweep.values[index].0;
                    lines.extend(sweep.header.expect.get(text).into_iter().flatten());
                    lines.extend(entry.header.expect_at.get(text).into_iter().flatten());
                }
                let expectations = self.expectations(&scenario, &lines);
                if file.is_none() {
                    let seeds = raw
                        .scenario
                        .seeds
                        .as_ref()
                        .and_then(|seeds| self.seeds(seeds));
                    file = Some((
                        raw.scenario.name.get_ref().clone(),
                        scenario.seed,
                        seeds,
                        raw.scenario.description.clone(),
                    ));
                }
                built.push(Variant {
                    name: name.clone(),
                    sweep_x,
                    sweep_values,
                    scenario,
                    expectations,
                    presets,
                    settings: document::flatten(&document),
                });
            }
            tag(&mut self.errors[errors_before..], &name);
        }
        self.warn_unused(defined, &used, built.len() > 1);
        (built, file)
    }

    /// A warning at each resource no variant uses (what a run starts from is used by
    /// being there).
    fn warn_unused(
        &mut self,
        defined: BTreeMap<(&'static str, String), Option<Range<usize>>>,
        used: &BTreeSet<(&'static str, String)>,
        several: bool,
    ) {
        for ((section, resource), span) in defined {
            if kinds::ROOTS.contains(&section) || used.contains(&(section, resource.clone())) {
                continue;
            }
            let noun = kinds::noun(section);
            let message = if several {
                format!("no variant uses this {noun}: nothing names it")
            } else {
                format!("nothing uses this {noun}: nothing names it")
            };
            self.warnings.push(self.source.diagnostic(
                span,
                format!("{section}.{resource}"),
                format!("{message} (remove it, or name it where it should be used)"),
            ));
        }
    }

    /// A top-level table the file has apart from its resources (`[report]`, `[observed]`),
    /// read into `T`; `None` after an error located at the key inside it.
    fn table<T: serde::Deserialize<'t>>(&mut self, value: Value<'t>, name: &str) -> Option<T> {
        let span = value.span();
        let DeValue::Table(table) = value.into_inner() else {
            let message = format!("`{name}` is a table: write it as [{name}]");
            self.errors
                .push(self.source.diagnostic(Some(span), name, message));
            return None;
        };
        let whole = table.clone();
        match deserialize_table::<T>(table, span.clone()) {
            Ok(raw) => Some(raw),
            Err(error) => {
                let at = error.span().unwrap_or(span);
                // The key inside the table the error is at (`report.slo`), not the table.
                let inner = key_path_at(&whole, at.start);
                let key = if inner.is_empty() {
                    name.to_owned()
                } else {
                    format!("{name}.{inner}")
                };
                let message = serde_message_at(&error, &key);
                self.errors
                    .push(self.source.diagnostic(Some(at), key, message));
                None
            }
        }
    }

    /// Reads `[report]` against the built variants: a metric must name a number in some
    /// variant's summary, the baseline must be a variant.
    fn report(&mut self, value: Value<'t>, file: &ScenarioFile) -> ReportSettings {
        let Some(raw) = self.table::<RawReport>(value, "report") else {
            return ReportSettings::default();
        };
        let known = |metric: &str| file.check_metric(metric);
        let mut settings = ReportSettings::default();
        for (index, metric) in raw.metrics.iter().enumerate() {
            match known(metric.get_ref()) {
                Ok(()) => settings.metrics.push(metric.get_ref().clone()),
                Err(message) => self.errors.push(self.source.diagnostic(
                    Some(metric.span()),
                    format!("report.metrics[{index}]"),
                    message,
                )),
            }
        }
        for (index, constraint) in raw.constraints.iter().enumerate() {
            let checked = Expectation::parse(constraint.get_ref()).and_then(|e| {
                if e.scope() != outagelab_report::expect::Scope::EachSeed {
                    return Err(
                        "a constraint is judged on the mean over the seeds already: \
                                write it without a prefix"
                            .to_owned(),
                    );
                }
                known(&e.metric())
            });
            match checked {
                Ok(()) => settings.constraints.push(constraint.get_ref().clone()),
                Err(message) => self.errors.push(self.source.diagnostic(
                    Some(constraint.span()),
                    format!("report.constraints[{index}]"),
                    message,
                )),
            }
        }
        if let Some(objective) = &raw.objective {
            let checked = outagelab_report::study::Objective::parse(objective.get_ref())
                .and_then(|o| known(&o.metric));
            match checked {
                Ok(()) => settings.objective = Some(objective.get_ref().clone()),
                Err(message) => self.errors.push(self.source.diagnostic(
                    Some(objective.span()),
                    "report.objective",
                    message,
                )),
            }
        }
        if let Some(tie_break) = &raw.tie_break {
            let checked = outagelab_report::study::Objective::parse(tie_break.get_ref())
                .and_then(|o| known(&o.metric))
                .and_then(|()| match raw.objective {
                    Some(_) => Ok(()),
                    None => Err("a tie-break chooses among points tied on the `objective`: \
                                 state one"
                        .to_owned()),
                });
            match checked {
                Ok(()) => settings.tie_break = Some(tie_break.get_ref().clone()),
                Err(message) => self.errors.push(self.source.diagnostic(
                    Some(tie_break.span()),
                    "report.tie_break",
                    message,
                )),
            }
        }
        if let Some(slo) = &raw.slo {
            settings.slo = self.slo(slo.get_ref());
        }
        if let Some(baseline) = &raw.baseline {
            let names = file.variants.iter().map(|v| v.name.as_str());
            if file.variants.iter().any(|v| &v.name == baseline.get_ref()) {
                settings.baseline = Some(baseline.get_ref().clone());
            } else {
                let hint = suggest::closest(baseline.get_ref(), names.clone())
                    .map(|near| format!(": did you mean \"{near}\"?"))
                    .unwrap_or_default();
                // A sweep renames its points ("base / K=10"): list what the names are now.
                let listed: Vec<String> = names.map(|name| format!("\"{name}\"")).collect();
                self.errors.push(self.source.diagnostic(
                    Some(baseline.span()),
                    "report.baseline",
                    format!(
                        "\"{}\" is not a variant{hint} (the variants: {})",
                        baseline.get_ref(),
                        listed.join(", ")
                    ),
                ));
            }
        }
        settings
    }

    /// `[report] slo`: a latency longer than zero, a percentile strictly between 0 and 100.
    fn slo(&mut self, raw: &RawSlo) -> Option<Slo> {
        let latency = &raw.latency;
        let latency_ms = match units::parse_duration(&latency.get_ref().0) {
            Ok(nanos) if nanos > 0 => Ok(nanos as f64 / 1e6),
            Ok(_) => Err((
                "report.slo.latency",
                latency.span(),
                "must be longer than zero".into(),
            )),
            Err(message) => Err(("report.slo.latency", latency.span(), message)),
        };
        let percentile = match &raw.percentile {
            Some(p) if !(*p.get_ref() > 0.0 && *p.get_ref() < 100.0) => {
                let message = "must be above 0 and below 100".to_owned();
                Err(("report.slo.percentile", p.span(), message))
            }
            p => Ok(p.as_ref().map(|p| *p.get_ref())),
        };
        let mut refuse = |(key, span, message): (&str, Range<usize>, String)| {
            let diagnostic = self.source.diagnostic(Some(span), key, message);
            self.errors.push(diagnostic);
        };
        match (latency_ms, percentile) {
            (Ok(latency_ms), Ok(percentile)) => Some(Slo {
                latency_ms,
                percentile,
            }),
            (latency_ms, percentile) => {
                [latency_ms.err(), percentile.err()]
                    .into_iter()
                    .flatten()
                    .for_each(&mut refuse);
                None
            }
        }
    }

    /// `[scenario] seeds = "A..B"`: at least one seed, at most [`SEEDS_MAX`].
    fn seeds(&mut self, text: &Spanned<String>) -> Option<RangeInclusive<u64>> {
        match parse_seed_range(text.get_ref()) {
            Ok(range) => Some(range),
            Err(reason) => {
                let diagnostic =
                    self.source
                        .diagnostic(Some(text.span()), "scenario.seeds", reason);
                self.errors.push(diagnostic);
                None
            }
        }
    }

    fn expectations(
        &mut self,
        scenario: &Scenario,
        lines: &[&Spanned<String>],
    ) -> Vec<LocatedExpectation> {
        let shape = outagelab_sim::summary_shape(scenario).expect("validated scenarios resolve");
        let mut expectations = Vec::new();
        for line in lines {
            let checked =
                Expectation::parse(line.get_ref()).and_then(|e| e.check_path(&shape).map(|()| e));
            let diagnostic = self
                .source
                .diagnostic(Some(line.span()), "expect", String::new());
            match checked {
                Ok(expectation) => expectations.push(LocatedExpectation {
                    expectation,
                    location: diagnostic.location(),
                }),
                Err(message) => self.errors.push(Diagnostic {
                    message,
                    ..diagnostic
                }),
            }
        }
        expectations
    }
}

fn kind_name(unit: &str) -> &'static str {
    match unit {
        "ms" => "a duration",
        "bytes" => "a size",
        "bytes/s" => "a bandwidth",
        "(index)" => "a word",
        _ => "a number",
    }
}

/// A deserialisation error's message, with a "did you mean" for a misspelt field or value.
fn serde_message(error: &toml::de::Error) -> String {
    suggest::serde_message(error.message().trim())
}

/// [`serde_message`] for the value at `key`, with what to write instead where serde's words
/// do not say it (see [`suggest::serde_message_at`]).
fn serde_message_at(error: &toml::de::Error, key: &str) -> String {
    suggest::serde_message_at(error.message().trim(), key)
}

/// Marks diagnostics with the variant they came from (cleared later for those in every one).
fn tag(diagnostics: &mut [Diagnostic], variant: &str) {
    for diagnostic in diagnostics {
        diagnostic.variants = vec![variant.to_owned()];
    }
}

/// Merges diagnostics reported once per variant: the same problem at the same place is shown
/// once, naming its variants unless it is in all `variant_count` of them; the result is in
/// file order.
fn dedupe(diagnostics: Vec<Diagnostic>, variant_count: usize) -> Vec<Diagnostic> {
    type Place = (usize, usize, Option<String>, String, String);
    let mut merged: BTreeMap<Place, Vec<String>> = BTreeMap::new();
    for diagnostic in &diagnostics {
        let key = (
            diagnostic.line,
            diagnostic.column,
            diagnostic.set.clone(),
            diagnostic.key.clone(),
            diagnostic.message.clone(),
        );
        let variants = merged.entry(key).or_default();
        for variant in &diagnostic.variants {
            if !variants.contains(variant) {
                variants.push(variant.clone());
            }
        }
    }
    let file = diagnostics
        .first()
        .map(|d| d.file.clone())
        .unwrap_or_default();
    merged
        .into_iter()
        .map(|((line, column, set, key, message), variants)| Diagnostic {
            file: file.clone(),
            line,
            column,
            key,
            message,
            variants: if variants.len() == variant_count || variant_count <= 1 {
                Vec::new()
            } else {
                variants
            },
            set,
        })
        .collect()
}

//! `outagelab fit FILE`: search the file's `[fit] unknowns` for the values under which its
//! incident variant's run matches `[observed]` best, on each seed of `[fit] seeds`; report the
//! fitted values with their spread over the seeds and the fit error; write the fitted scenario
//! and run every variant of it (the fixes) against the fitted model.
//!
//! The distance between a run and the observed series is the mean, over the series, of the
//! root mean square of (simulated - observed) / scale, where a series' scale is its largest
//! observed magnitude (1 when all are 0), so series of different units weigh alike; a sample
//! the run did not cover counts as a difference of one scale. The search on a seed is
//! deterministic: the file's own values and a Halton sample of the unknowns' box (on all
//! cores), then argmin's Nelder-Mead from the best point found, on the box scaled to
//! `[0, 1]` each way, within `[fit] runs_max` runs. The fitted value of each unknown is its
//! median over the seeds.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;

use argmin::core::{CostFunction, Executor, State};
use argmin::solver::neldermead::NelderMead;
use outagelab_report::observed::{Observed, compare};
use outagelab_scenario_file::{FitSpec, Override, ScenarioFile, set_values};
use rayon::prelude::*;

use crate::table::Table;

/// What the command line asks of a fit.
pub struct Request {
    pub sets: Vec<Override>,
    /// Where to write the fitted scenario.
    pub write: Option<PathBuf>,
    pub jobs: Option<usize>,
}

pub fn run(file: &Path, request: &Request) -> ExitCode {
    let (text, _, spec) = match crate::read_for(
        file,
        &request.sets,
        "fit",
        "name the unknowns to search and their ranges",
        |s| s.fit.clone(),
    ) {
        Ok(read) => read,
        Err(code) => return code,
    };
    let problem = Problem {
        text: &text,
        file,
        sets: &request.sets,
        spec: &spec,
    };
    if let Err(message) = problem.check_ranges() {
        eprintln!("{}: {message}", file.display());
        return ExitCode::from(2);
    }
    let fitted = match request.jobs {
        Some(jobs) => match rayon::ThreadPoolBuilder::new().num_threads(jobs).build() {
            Ok(pool) => pool.install(|| problem.fit()),
            Err(error) => Err(format!("cannot start {jobs} threads: {error}")),
        },
        None => problem.fit(),
    };
    let fitted = match fitted {
        Ok(fitted) => fitted,
        Err(message) => {
            eprintln!("{}: {message}", file.display());
            return ExitCode::from(1);
        }
    };
    crate::say(&fitted.render(&spec));
    let values: Vec<f64> = fitted.values.clone();
    let output = request.write.as_deref();
    let fitted_text = match problem.fitted_text(&values, output) {
        Ok(text) => text,
        Err(message) => {
            eprintln!("{}: {message}", file.display());
            return ExitCode::from(2);
        }
    };
    if let Some(path) = output {
        if let Err(error) = std::fs::write(path, &fitted_text) {
            eprintln!("cannot write {}: {error}", path.display());
            return ExitCode::from(2);
        }
        eprintln!("wrote {}", path.display());
    }
    // The fixes against the fitted model: every variant of the fitted file, on the first seed.
    let at = output.unwrap_or(file);
    let mut fitted_file =
        match outagelab_scenario_file::parse_with(&fitted_text, at, &problem.other_sets()) {
            Ok(scenario) => scenario,
            Err(diagnostics) => {
                eprintln!("{diagnostics}");
                return ExitCode::from(2);
            }
        };
    fitted_file.seed = *spec.seeds.start();
    let (report, _) =
        match crate::simulate(&fitted_file, outagelab_sim::Bugs::default(), true, None) {
            Ok(ran) => ran,
            Err((variant, error)) => {
                eprintln!("variant \"{variant}\": {error}");
                return ExitCode::from(1);
            }
        };
    let columns = crate::table::Column::defaults(&fitted_file);
    crate::say(&format!(
        "\nthe file's variants against the fitted model (seed {}):\n\n{}",
        fitted_file.seed,
        crate::table::render(&report, &fitted_file, &columns)
    ));
    match output {
        Some(path) => eprintln!(
            "charts and the review page: outagelab run {}{} --plot DIR --report PAGE.html",
            crate::shell_word(&path.display().to_string()),
            problem
                .other_sets()
                .iter()
                .fold(String::new(), |words, set| {
                    format!("{words} --set {}", crate::shell_word(&set.to_string()))
                })
        ),
        None => eprintln!(
            "write the fitted file with --write FILE; or run it as: {}",
            problem.command(&values)
        ),
    }
    ExitCode::SUCCESS
}

/// The file, the command line's overrides and `[fit]`: what every run of the search reads.
struct Problem<'a> {
    text: &'a str,
    file: &'a Path,
    sets: &'a [Override],
    spec: &'a FitSpec,
}

/// A point of the search, scored.
enum Scored {
    /// Its run, and the distance of its series from the observed ones.
    Ran(f64, Observed),
    /// No run to compare: the file refuses these values (a combination of the unknowns no
    /// range end showed), or the run stopped on a budget. Why, for the message when no point
    /// of the search could be used.
    Unusable(String),
}

/// The distance the search gives a point it cannot use (see [`Scored::Unusable`]), or one past
/// its budget: far above any distance (a run's is at most a few).
const UNUSABLE: f64 = 1e9;

/// One seed's search: the best values it found, their distance, and the runs it took.
struct SeedFit {
    values: Vec<f64>,
    distance: f64,
    runs: u64,
}

/// The outcome of a fit.
struct Fitted {
    /// Each unknown's median over the seeds, rounded as the file writes it.
    values: Vec<f64>,
    /// Each seed's own fit.
    per_seed: Vec<SeedFit>,
    /// The mean distance over the seeds of the file's own values and of the fitted ones.
    start_distance: f64,
    fitted_distance: f64,
    /// The fitted run on the first seed, scored series by series.
    observed: Observed,
    runs: u64,
}

impl Problem<'_> {
    /// The file under `values` (one per unknown) and the command line's overrides.
    fn load(&self, values: &[f64]) -> Result<ScenarioFile, String> {
        let mut sets = self.sets.to_vec();
        for (unknown, &value) in self.spec.unknowns.iter().zip(values) {
            sets.push(Override {
                key: unknown.key.clone(),
                value: unknown.toml_value(value),
            });
        }
        outagelab_scenario_file::parse_with(self.text, self.file, &sets)
            .map_err(|diagnostics| diagnostics.to_string())
    }

    /// Refuses a range whose ends the file cannot take, or a key the fitted variant's patch
    /// sets (an override of the base would change nothing of its run).
    fn check_ranges(&self) -> Result<(), String> {
        // The fitted file is the text with each unknown's value replaced: each must be there.
        let starts: Vec<(String, String)> = (self.spec.unknowns.iter())
            .map(|u| (u.key.clone(), u.toml_value(u.start)))
            .collect();
        set_values(self.text, &starts).map_err(|why| {
            format!(
                "[fit] unknowns: {why}, where the fitted value will be written (a value given \
                 only by --set, or a default, is not): write it in the file"
            )
        })?;
        for (index, unknown) in self.spec.unknowns.iter().enumerate() {
            for end in [unknown.min, unknown.max] {
                let mut values: Vec<f64> = self.spec.unknowns.iter().map(|u| u.start).collect();
                values[index] = end;
                let loaded = self.load(&values).map_err(|message| {
                    format!(
                        "[fit] unknown `{}` at {}: the file refuses it:\n{message}",
                        unknown.key,
                        unknown.show(end)
                    )
                })?;
                let variant = loaded.variants.iter().find(|v| v.name == self.spec.variant);
                let written = variant.and_then(|v| v.settings.get(&unknown.key));
                if written != Some(&unknown.toml_value(end)) {
                    return Err(format!(
                        "[fit] unknown `{}`: variant \"{}\" sets it in its patch, so the search \
                         could not change it; search a key of the base",
                        unknown.key, self.spec.variant
                    ));
                }
            }
        }
        Ok(())
    }

    /// The incident variant's run under `values` on `seed`, scored against `[observed]`;
    /// `Err` when the run broke an invariant (a monitor fired): a finding, which stops the fit.
    fn score(&self, values: &[f64], seed: u64) -> Result<Scored, String> {
        let loaded = match self.load(values) {
            Ok(loaded) => loaded,
            Err(refusal) => {
                let why = format!(
                    "at {} the file is refused:\n{refusal}",
                    self.describe(values)
                );
                return Ok(Scored::Unusable(why));
            }
        };
        let spec = loaded
            .observed
            .as_ref()
            .ok_or("the file has no [observed]")?;
        let variant = (loaded.variants.iter())
            .find(|v| v.name == self.spec.variant)
            .ok_or_else(|| format!("no variant \"{}\"", self.spec.variant))?;
        let mut scenario = variant.scenario.clone();
        scenario.seed = seed;
        let report = outagelab_sim::run(&scenario).map_err(|error| {
            format!(
                "the run at {} on seed {seed} failed: {error}",
                self.describe(values)
            )
        })?;
        if report.verdict.is_budget() {
            return Ok(Scored::Unusable(format!(
                "the run at {} on seed {seed} stopped on its {} (its figures are cut short)",
                self.describe(values),
                report.verdict.name()
            )));
        }
        let observed = compare(spec, std::slice::from_ref(&report));
        Ok(Scored::Ran(distance(&observed), observed))
    }

    /// `key = value` for each unknown, for messages.
    fn describe(&self, values: &[f64]) -> String {
        let parts: Vec<String> = (self.spec.unknowns.iter().zip(values))
            .map(|(u, &v)| format!("{} = {}", u.key, u.show(v)))
            .collect();
        parts.join(", ")
    }

    /// Fits each seed on its own (seeds and first samples on all cores), then scores the
    /// median values on every seed.
    fn fit(&self) -> Result<Fitted, String> {
        let seeds: Vec<u64> = self.spec.seeds.clone().collect();
        let searched: Vec<Result<SeedFit, String>> =
            seeds.par_iter().map(|&seed| self.search(seed)).collect();
        let per_seed = searched
            .into_iter()
            .collect::<Result<Vec<SeedFit>, String>>()?;
        let mut runs: u64 = per_seed.iter().map(|fit| fit.runs).sum();
        let values: Vec<f64> = (self.spec.unknowns.iter().enumerate())
            .map(|(index, unknown)| {
                let mut each: Vec<f64> = per_seed.iter().map(|fit| fit.values[index]).collect();
                each.sort_by(f64::total_cmp);
                let middle = each.len() / 2;
                let median = if each.len() % 2 == 1 {
                    each[middle]
                } else {
                    (each[middle - 1] + each[middle]) / 2.0
                };
                unknown.round(median)
            })
            .collect();
        let starts: Vec<f64> = self.spec.unknowns.iter().map(|u| u.start).collect();
        let over_seeds = |values: &[f64]| -> Result<(f64, Option<Observed>), String> {
            let scored: Vec<Result<Scored, String>> = seeds
                .par_iter()
                .map(|&seed| self.score(values, seed))
                .collect();
            let mut total = 0.0;
            let mut first = None;
            for result in scored {
                let (distance, observed) = match result? {
                    Scored::Ran(distance, observed) => (distance, observed),
                    Scored::Unusable(why) => return Err(why),
                };
                total += distance;
                first.get_or_insert(observed);
            }
            Ok((total / seeds.len() as f64, first))
        };
        let (start_distance, _) = over_seeds(&starts)?;
        let (fitted_distance, observed) = over_seeds(&values)?;
        runs += 2 * seeds.len() as u64;
        Ok(Fitted {
            values,
            per_seed,
            start_distance,
            fitted_distance,
            observed: observed.expect("a seed range is never empty"),
            runs,
        })
    }

    /// One seed's search.
    fn search(&self, seed: u64) -> Result<SeedFit, String> {
        let unknowns = &self.spec.unknowns;
        let dimensions = unknowns.len();
        let budget = self.spec.runs_max;
        let cache = Cache::default();
        let unusable: Mutex<Option<String>> = Mutex::new(None);
        // A point's distance: from the cache, or a run while the budget lasts (past it, every
        // new point is unusable: the search takes no more runs than `runs_max`).
        let evaluate = |unit: &[f64]| -> Result<f64, String> {
            let values: Vec<f64> = (unknowns.iter().zip(unit))
                .map(|(u, &x)| u.round(u.min + x.clamp(0.0, 1.0) * (u.max - u.min)))
                .collect();
            if let Some(distance) = cache.get(&values) {
                return Ok(distance);
            }
            if !cache.reserve(budget) {
                return Ok(UNUSABLE);
            }
            let distance = match self.score(&values, seed)? {
                Scored::Ran(distance, _) => distance,
                Scored::Unusable(why) => {
                    unusable.lock().expect("not poisoned").get_or_insert(why);
                    UNUSABLE
                }
            };
            cache.put(values, distance);
            Ok(distance)
        };
        // The file's values, then a Halton sample of the box: a third of the budget.
        let start: Vec<f64> = unknowns
            .iter()
            .map(|u| (u.start - u.min) / (u.max - u.min))
            .collect();
        let samples = (budget / 3).max(dimensions as u64 + 1).min(budget);
        let mut points = vec![start];
        points.extend((1..samples).map(|i| halton(i, dimensions)));
        let distances: Vec<Result<f64, String>> =
            points.par_iter().map(|point| evaluate(point)).collect();
        let mut best = (points[0].clone(), f64::INFINITY);
        for (point, distance) in points.iter().zip(distances) {
            let distance = distance?;
            if distance < best.1 {
                best = (point.clone(), distance);
            }
        }
        // Nelder-Mead from the best point, in steps of a tenth of each range, with the rest.
        let used = cache.runs();
        if used < budget && best.1 > 0.0 {
            let mut simplex = vec![best.0.clone()];
            for axis in 0..dimensions {
                let mut vertex = best.0.clone();
                vertex[axis] += if vertex[axis] + 0.1 <= 1.0 { 0.1 } else { -0.1 };
                simplex.push(vertex);
            }
            let error: Mutex<Option<String>> = Mutex::new(None);
            let cost = UnitCost {
                evaluate: &evaluate,
                error: &error,
            };
            let solver = NelderMead::new(simplex)
                .with_sd_tolerance(1e-9)
                .map_err(|e| e.to_string())?;
            // Each iteration runs one to two points (a shrink runs `dimensions`); the budget
            // itself is held by `evaluate`.
            let iterations = budget - used;
            let result = Executor::new(cost, solver)
                .configure(|state| state.max_iters(iterations))
                .run();
            if let Some(message) = error.lock().expect("not poisoned").take() {
                return Err(message);
            }
            let result = result.map_err(|e| e.to_string())?;
            let state = result.state();
            if let Some(param) = state.get_best_param()
                && state.get_best_cost() < best.1
            {
                best = (
                    param.iter().map(|x| x.clamp(0.0, 1.0)).collect(),
                    state.get_best_cost(),
                );
            }
        }
        if best.1 >= UNUSABLE {
            let why = unusable.lock().expect("not poisoned").take();
            return Err(format!(
                "on seed {seed}, no point of the search gave a run to compare{}",
                why.map_or(String::new(), |why| format!("; for example, {why}"))
            ));
        }
        let values = (unknowns.iter().zip(&best.0))
            .map(|(u, &x)| u.round(u.min + x * (u.max - u.min)))
            .collect();
        Ok(SeedFit {
            values,
            distance: best.1,
            runs: cache.runs(),
        })
    }

    /// The fitted scenario: the file with each unknown's value replaced; the paths it reads
    /// beside it (the observed file, loads' `rate_file`) made absolute when the fitted file is
    /// written elsewhere than the file's directory.
    fn fitted_text(&self, values: &[f64], output: Option<&Path>) -> Result<String, String> {
        let mut edits: Vec<(String, String)> = (self.spec.unknowns.iter().zip(values))
            .map(|(u, &v)| (u.key.clone(), u.toml_value(v)))
            .collect();
        if let Some(output) = output {
            edits.extend(relocated_paths(self.text, self.file, output)?);
        }
        set_values(self.text, &edits)
    }

    /// The command line's overrides of keys the fit does not search: they stay in force on
    /// the fitted model (the fitted values replace the others).
    fn other_sets(&self) -> Vec<Override> {
        let searched = |set: &&Override| self.spec.unknowns.iter().any(|u| u.key == set.key);
        self.sets
            .iter()
            .filter(|set| !searched(set))
            .cloned()
            .collect()
    }

    /// `outagelab run FILE --set ...` with the fitted values.
    fn command(&self, values: &[f64]) -> String {
        let mut words = vec![
            "outagelab".to_owned(),
            "run".to_owned(),
            crate::shell_word(&self.file.display().to_string()),
        ];
        let sets = self.other_sets().into_iter().map(|set| set.to_string());
        let fitted = (self.spec.unknowns.iter().zip(values))
            .map(|(u, &v)| format!("{}={}", u.key, u.toml_value(v)));
        for set in sets.chain(fitted) {
            words.push("--set".to_owned());
            words.push(crate::shell_word(&set));
        }
        words.join(" ")
    }
}

impl Fitted {
    fn render(&self, spec: &FitSpec) -> String {
        let seeds = format!("{}..{}", spec.seeds.start(), spec.seeds.end());
        let mut header = vec!["unknown", "start", "fitted"];
        if self.per_seed.len() > 1 {
            header.push("over the seeds");
        }
        let rows = (spec.unknowns.iter().enumerate())
            .map(|(index, unknown)| {
                let mut row = vec![
                    unknown.key.clone(),
                    unknown.show(unknown.start),
                    unknown.show(self.values[index]),
                ];
                if self.per_seed.len() > 1 {
                    let each = self.per_seed.iter().map(|fit| fit.values[index]);
                    let low = each.clone().fold(f64::INFINITY, f64::min);
                    let high = each.fold(f64::NEG_INFINITY, f64::max);
                    row.push(format!("{} to {}", unknown.show(low), unknown.show(high)));
                }
                row
            })
            .collect();
        let table = Table {
            header: header.into_iter().map(str::to_owned).collect(),
            rows,
        };
        let mut out = format!(
            "fit of variant \"{}\" to what was observed, seeds {seeds}, {} runs\n\n{}",
            spec.variant,
            self.runs,
            table.render()
        );
        out.push_str(&format!(
            "\ndistance to the observed series (mean over the seeds of each series' RMSE over \
             its largest value): {:.4} with the file's values, {:.4} fitted",
            self.start_distance, self.fitted_distance
        ));
        if self.per_seed.len() > 1 {
            let each = self.per_seed.iter().map(|fit| fit.distance);
            let low = each.clone().fold(f64::INFINITY, f64::min);
            let high = each.fold(f64::NEG_INFINITY, f64::max);
            out.push_str(&format!(" (each seed's own best: {low:.4} to {high:.4})"));
        }
        out.push('\n');
        let report_rows = (self.observed.series.iter())
            .map(|series| {
                let fit = &series.variants[0];
                let number =
                    |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.2}"));
                vec![
                    series.name.clone(),
                    series.metric.clone(),
                    format!("{} of {}", fit.compared, series.observed.len()),
                    number(fit.rmse),
                    number(fit.largest_difference),
                ]
            })
            .collect();
        let by_series = Table {
            header: ["series", "metric", "samples", "rmse", "largest difference"]
                .map(str::to_owned)
                .to_vec(),
            rows: report_rows,
        };
        out.push_str(&format!(
            "\nthe fitted run on seed {}, series by series:\n\n{}",
            spec.seeds.start(),
            by_series.render()
        ));
        out
    }
}

/// The distance of a scored run from the observed series (see the module's doc).
fn distance(observed: &Observed) -> f64 {
    let series = &observed.series;
    if series.is_empty() {
        return 0.0;
    }
    let total: f64 = series
        .iter()
        .map(|series| {
            let scale = (series.observed.iter())
                .map(|v| v.abs())
                .fold(0.0, f64::max)
                .max(f64::MIN_POSITIVE);
            let scale = if scale == f64::MIN_POSITIVE {
                1.0
            } else {
                scale
            };
            let fit = &series.variants[0];
            let squares: f64 = (fit.simulated.iter().zip(&series.observed))
                .map(|(simulated, observed)| match simulated {
                    Some(s) => ((s - observed) / scale).powi(2),
                    None => 1.0,
                })
                .sum();
            (squares / series.observed.len().max(1) as f64).sqrt()
        })
        .sum();
    total / series.len() as f64
}

/// The `index`th point (from 1) of the Halton sequence in `dimensions` dimensions: bases the
/// first primes.
pub(crate) fn halton(index: u64, dimensions: usize) -> Vec<f64> {
    const PRIMES: [u64; 8] = [2, 3, 5, 7, 11, 13, 17, 19];
    PRIMES[..dimensions]
        .iter()
        .map(|&base| {
            let (mut i, mut f, mut r) = (index, 1.0, 0.0);
            while i > 0 {
                f /= base as f64;
                r += f * (i % base) as f64;
                i /= base;
            }
            r
        })
        .collect()
}

/// Distances of values already run on a seed: a point the search visits again (values round
/// to what the file writes) costs no run.
#[derive(Default)]
struct Cache(Mutex<(BTreeMap<Vec<u64>, f64>, u64)>);

impl Cache {
    fn key(values: &[f64]) -> Vec<u64> {
        values.iter().map(|v| v.to_bits()).collect()
    }
    fn get(&self, values: &[f64]) -> Option<f64> {
        let held = self.0.lock().expect("not poisoned");
        held.0.get(&Self::key(values)).copied()
    }
    /// A reserved run's result.
    fn put(&self, values: Vec<f64>, distance: f64) {
        let mut held = self.0.lock().expect("not poisoned");
        held.0.insert(Self::key(&values), distance);
        held.1 -= 1;
    }
    /// Runs done.
    fn runs(&self) -> u64 {
        self.0.lock().expect("not poisoned").0.len() as u64
    }
    /// Takes one run of `budget`, if one is left (runs in progress count).
    fn reserve(&self, budget: u64) -> bool {
        let mut held = self.0.lock().expect("not poisoned");
        let (done, reserved) = &mut *held;
        if done.len() as u64 + *reserved >= budget {
            return false;
        }
        *reserved += 1;
        true
    }
}

/// The distance as argmin's cost, on the unit box; outside it, the nearest point's distance
/// plus the squared way out, so the simplex comes back in. A run that breaks an invariant
/// stops the search: argmin would unwrap an error, so it is kept aside and read after.
struct UnitCost<'a> {
    evaluate: &'a (dyn Fn(&[f64]) -> Result<f64, String> + Sync),
    error: &'a Mutex<Option<String>>,
}

impl CostFunction for UnitCost<'_> {
    type Param = Vec<f64>;
    type Output = f64;

    fn cost(&self, point: &Vec<f64>) -> Result<f64, argmin::core::Error> {
        let outside: f64 = point.iter().map(|x| (x - x.clamp(0.0, 1.0)).powi(2)).sum();
        match (self.evaluate)(point) {
            Ok(distance) => Ok(distance + outside),
            // argmin unwraps the costs of its first simplex: an error is kept aside, and the
            // point given the distance of one the search cannot use.
            Err(message) => {
                let mut kept = self.error.lock().expect("not poisoned");
                kept.get_or_insert(message);
                Ok(UNUSABLE)
            }
        }
    }
}

/// `text` as a TOML basic string.
/// The edits that keep the files `text` (the scenario at `file`) reads beside it (the observed
/// file, loads' traffic files) found when it is written to `output` in another directory:
/// their paths made absolute. None when `output` is in the same directory.
pub fn relocated_paths(
    text: &str,
    file: &Path,
    output: &Path,
) -> Result<Vec<(String, String)>, String> {
    let directory = |path: &Path| {
        std::path::absolute(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
    };
    let mut edits = Vec::new();
    if directory(output) == directory(file) {
        return Ok(edits);
    }
    let scenario =
        outagelab_scenario_file::parse_with(text, file, &[]).map_err(|d| d.to_string())?;
    let absolute = |named: &str| -> Result<String, String> {
        let beside = file.parent().unwrap_or(Path::new("")).join(named);
        let absolute = std::path::absolute(&beside).map_err(|e| e.to_string())?;
        Ok(toml_string(&absolute.display().to_string()))
    };
    if let Some(observed) = &scenario.observed {
        edits.push(("observed.file".to_owned(), absolute(&observed.file)?));
    }
    // A load's traffic file, read beside the file too.
    let rate_files: BTreeMap<&String, &String> = (scenario.variants.iter())
        .flat_map(|variant| &variant.settings)
        .filter(|(key, _)| key.starts_with("loads.") && key.ends_with(".rate_file"))
        .collect();
    for (key, written) in rate_files {
        edits.push((key.clone(), absolute(written.trim_matches('"'))?));
    }
    Ok(edits)
}

fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_halton_sample_fills_the_box_evenly() {
        assert_eq!(halton(1, 2), [0.5, 1.0 / 3.0]);
        assert_eq!(halton(2, 2), [0.25, 2.0 / 3.0]);
        assert_eq!(halton(3, 1), [0.75]);
        // Every quarter of each axis holds 4 of the first 16 points.
        for axis in 0..2 {
            let mut quarters = [0; 4];
            for i in 1..=16 {
                quarters[(halton(i, 2)[axis] * 4.0) as usize] += 1;
            }
            assert!(
                quarters.iter().all(|&n| (3..=5).contains(&n)),
                "{quarters:?}"
            );
        }
    }

    #[test]
    fn paths_are_written_as_toml_strings() {
        assert_eq!(toml_string("/a/b \"c\"\\d"), "\"/a/b \\\"c\\\"\\\\d\"");
    }
}

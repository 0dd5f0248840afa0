//! `outagelab map FILE`: the file's `[map]` grid of trigger sizes by loads, every point run on
//! every seed for every chosen variant (on all cores), each run judged recovered (with the
//! time from the trigger's end) or not within the horizon; printed as a table per variant,
//! written as JSON and drawn as phase diagrams. The same with any `--jobs`: runs come back in
//! their order. `--shard K/N --json PART` runs every N-th run from the K-th and writes their
//! results; `--merge PART...` joins the parts into the same map as one machine.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use outagelab_report::Verdict;
use outagelab_report::map::{MapAxis, MapPoint, MapReport, MapVariant};
use outagelab_report::study::Shard;
use outagelab_scenario_file::{MapSpec, Override, ScenarioFile};
use outagelab_sim::{Bugs, SimError};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::study::RunsProgress;
use crate::table::Table;

pub struct Request {
    pub sets: Vec<Override>,
    /// The map as JSON; with `shard`, the slice's part.
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub jobs: Option<usize>,
    pub quiet: bool,
    /// Run only this slice of the runs and write it to `json`.
    pub shard: Option<Shard>,
    /// Join these parts instead of running.
    pub merge: Vec<PathBuf>,
}

/// What `map --shard K/N --json` writes: the results of the runs the slice holds (run `i`,
/// in variant, point, seed order, belongs to shard `i % N + 1`), in run order.
#[derive(Debug, Serialize, Deserialize)]
struct MapPart {
    scenario: String,
    /// [`crate::shard::fingerprint`] of the file and `--set`s: the parts of one map agree.
    file_hash: String,
    shard: Shard,
    /// Runs in the whole grid.
    runs: u64,
    /// Each run's time to recover in ms, or `null`: not recovered.
    recovered_ms: Vec<Option<f64>>,
}

/// One point of the grid, read: the file with the point's two values set.
struct Point {
    trigger: usize,
    load: usize,
    file: ScenarioFile,
}

pub fn run(file: &Path, request: &Request) -> ExitCode {
    let (text, scenario, spec) = match crate::read_for(
        file,
        &request.sets,
        "map",
        "name the trigger, the load, their values and what recovered means",
        |s| s.map.clone(),
    ) {
        Ok(read) => read,
        Err(code) => return code,
    };
    let points = match read_points(file, &spec, &request.sets) {
        Ok(points) => points,
        Err(message) => {
            eprintln!("{}: {message}", file.display());
            return ExitCode::from(2);
        }
    };
    let runs = runs_of(&spec, points.len());
    let fingerprint = crate::shard::fingerprint(&text, &request.sets, Bugs::default());
    let results = if request.merge.is_empty() {
        let budget = crate::process_budget(&scenario);
        let results = crate::on_threads(request.jobs, || {
            run_slice(&spec, &points, &runs, request.shard, &budget, request.quiet)
        });
        match results {
            Ok(results) => results,
            Err(message) => {
                eprintln!("{message}");
                return ExitCode::from(1);
            }
        }
    } else {
        match merge(&request.merge, &fingerprint, runs.len() as u64) {
            Ok(results) => results,
            Err(message) => {
                eprintln!("--merge: {message}");
                return ExitCode::from(2);
            }
        }
    };
    if let Some(shard) = request.shard {
        let part = MapPart {
            scenario: scenario.name.clone(),
            file_hash: fingerprint,
            shard,
            runs: runs.len() as u64,
            recovered_ms: results,
        };
        let json = (request.json.as_deref()).expect("clap requires --json with --shard");
        let text = serde_json::to_string_pretty(&part).expect("a part serialises") + "\n";
        if let Err(error) = std::fs::write(json, text) {
            eprintln!("cannot write {}: {error}", json.display());
            return ExitCode::from(2);
        }
        crate::say_line(&format!(
            "shard {}/{}: {} of {} runs; wrote {}; join every shard with `{}`",
            shard.index,
            shard.count,
            part.recovered_ms.len(),
            part.runs,
            json.display(),
            crate::shard::merge_command("map", file, &request.sets, &[])
        ));
        return ExitCode::SUCCESS;
    }
    let report = assemble(&scenario.name, &spec, &points, &results);
    crate::say_line(&render(&report));
    if let Some(path) = &request.json {
        let text = serde_json::to_string_pretty(&report).expect("a map serialises") + "\n";
        if let Err(error) = std::fs::write(path, text) {
            eprintln!("cannot write {}: {error}", path.display());
            return ExitCode::from(2);
        }
        crate::say_line(&format!("wrote {}", path.display()));
    }
    if let Some(dir) = &request.plot {
        match outagelab_plots::write_map_charts(&report, dir) {
            Ok(paths) => {
                for path in paths {
                    crate::say_line(&format!("wrote {}", path.display()));
                }
            }
            Err(error) => {
                eprintln!("{error}");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}

/// Every point of the grid, load by load, trigger by trigger, each checked: the file takes
/// the values, each chosen variant has a horizon (not recovered means not within it), and
/// the trigger fault ends.
fn read_points(file: &Path, spec: &MapSpec, sets: &[Override]) -> Result<Vec<Point>, String> {
    let mut points = Vec::new();
    for (load, load_value) in spec.load.values.iter().enumerate() {
        for (trigger, trigger_value) in spec.trigger.values.iter().enumerate() {
            let mut point_sets = sets.to_vec();
            point_sets.push(Override {
                key: spec.trigger.key.clone(),
                value: trigger_value.clone(),
            });
            point_sets.push(Override {
                key: spec.load.key.clone(),
                value: load_value.clone(),
            });
            let at = format!(
                "[map] point {} = {trigger_value}, {} = {load_value}",
                spec.trigger.key, spec.load.key
            );
            let point_file = std::fs::read_to_string(file)
                .map_err(|e| e.to_string())
                .and_then(|text| {
                    outagelab_scenario_file::parse_with(&text, file, &point_sets)
                        .map_err(|d| d.to_string())
                })
                .map_err(|why| format!("{at}: the file refuses it:\n{why}"))?;
            for name in &spec.variants {
                let variant = point_file
                    .variants
                    .iter()
                    .find(|v| &v.name == name)
                    .ok_or_else(|| format!("{at}: no variant \"{name}\""))?;
                if variant.scenario.limits.horizon.is_none() {
                    return Err(format!(
                        "variant \"{name}\" has no [run] horizon: a map judges recovery within \
                         it, so set one"
                    ));
                }
                let fault = variant
                    .scenario
                    .faults
                    .iter()
                    .find(|f| f.name == spec.fault);
                let horizon = variant.scenario.limits.horizon.map(|h| h.as_nanos());
                match fault {
                    Some(fault) if fault.end().is_some() => {
                        let end = fault.end().map_or(0, |end| end.as_nanos());
                        let hold = (spec.recovered.hold_ms * 1e6) as u64;
                        if horizon.is_some_and(|h| end.saturating_add(hold) > h) {
                            return Err(format!(
                                "{at}: fault `{}` ends at {} ms and recovery needs {} ms quiet \
                                 after it, past variant \"{name}\"'s horizon ({} ms): \
                                 recovery could not be seen, so it would read as never; \
                                 lengthen the horizon or shorten the trigger",
                                spec.fault,
                                end / 1_000_000,
                                hold / 1_000_000,
                                horizon.unwrap_or(0) / 1_000_000
                            ));
                        }
                    }
                    Some(_) => {
                        return Err(format!(
                            "{at}: fault `{}` of variant \"{name}\" lasts to the end: give it a \
                             duration, whose end starts the recovery clock",
                            spec.fault
                        ));
                    }
                    None => {
                        return Err(format!(
                            "{at}: variant \"{name}\" has no fault `{}` (disabled?)",
                            spec.fault
                        ));
                    }
                }
            }
            points.push(Point {
                trigger,
                load,
                file: point_file,
            });
        }
    }
    Ok(points)
}

/// Every run of the grid, `(variant, point, seed)`, in variant, point, seed order.
fn runs_of(spec: &MapSpec, points: usize) -> Vec<(usize, usize, u64)> {
    let seeds: Vec<u64> = spec.seeds.clone().collect();
    (0..spec.variants.len())
        .flat_map(|v| (0..points).map(move |p| (v, p)))
        .flat_map(|(v, p)| seeds.iter().map(move |&seed| (v, p, seed)))
        .collect()
}

/// Runs the runs `shard` holds (every run without one) and judges each: its time to recover
/// in ms, or `None`. In run order.
fn run_slice(
    spec: &MapSpec,
    points: &[Point],
    runs: &[(usize, usize, u64)],
    shard: Option<Shard>,
    budget: &outagelab_sim::MemoryBudget,
    quiet: bool,
) -> Result<Vec<Option<f64>>, String> {
    let runs: Vec<(usize, usize, u64)> = (runs.iter().enumerate())
        .filter(|(i, _)| shard.is_none_or(|shard| shard.holds(*i as u64)))
        .map(|(_, run)| *run)
        .collect();
    let progress = RunsProgress::new(runs.len() as u64, quiet);
    let one = |&(v, p, seed): &(usize, usize, u64),
               alone: bool|
     -> Result<Option<Option<f64>>, String> {
        let variant_name = &spec.variants[v];
        let point = &points[p];
        let variant = (point.file.variants.iter())
            .find(|variant| &variant.name == variant_name)
            .expect("checked when read");
        let mut scenario = variant.scenario.clone();
        scenario.seed = seed;
        let fault = (scenario.faults.iter())
            .find(|f| f.name == spec.fault)
            .and_then(|f| f.end())
            .expect("checked when read");
        let ran =
            outagelab_sim::run_in_budget(&scenario, Bugs::default(), &mut |_| {}, None, budget)
                .map_err(|error: SimError| {
                    format!(
                        "variant \"{variant_name}\" at {} = {}, {} = {} on seed {seed}: {error}",
                        spec.trigger.key,
                        spec.trigger.values[point.trigger],
                        spec.load.key,
                        spec.load.values[point.load]
                    )
                })?;
        if ran.crowded_out && !alone {
            return Ok(None);
        }
        progress.one_done();
        let report = ran.report;
        if report.verdict.is_budget() {
            // Stopped before its horizon: it did not recover within what it ran.
            return Ok(Some(None));
        }
        let ended_by_itself = matches!(report.verdict, Verdict::Completed | Verdict::Stalled);
        let from_ms = fault.as_nanos() as f64 / 1e6;
        Ok(Some(spec.recovered.recovered_after(
            &report.series,
            report.end_ms,
            ended_by_itself,
            from_ms,
        )))
    };
    let judged: Vec<Result<Option<Option<f64>>, String>> =
        runs.par_iter().map(|run| one(run, false)).collect();
    let mut results = Vec::with_capacity(runs.len());
    for (run, judged) in runs.iter().zip(judged) {
        match judged? {
            Some(result) => results.push(result),
            None => results.push(one(run, true)?.expect("a run alone is never crowded out")),
        }
    }
    progress.done();
    Ok(results)
}

/// The parts of every shard joined, in run order: exactly what one unsharded map runs.
fn merge(paths: &[PathBuf], fingerprint: &str, runs: u64) -> Result<Vec<Option<f64>>, String> {
    let mut parts = Vec::new();
    for path in paths {
        let part: MapPart = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
            .map_err(|error| format!("{}: not a map's shard: {error}", path.display()))?;
        if part.file_hash != fingerprint || part.runs != runs {
            return Err(format!(
                "{} is a shard of another map (another file or --set)",
                path.display()
            ));
        }
        // A time to recover is a finite, non-negative number of ms (or null: never).
        let bad = (part.recovered_ms.iter().flatten()).find(|ms| !(ms.is_finite() && **ms >= 0.0));
        if let Some(bad) = bad {
            return Err(format!(
                "{} holds {bad} as a time to recover: not a run's result",
                path.display()
            ));
        }
        parts.push((path.as_path(), part));
    }
    let slices = parts.iter().map(|(path, part)| (*path, Some(part.shard)));
    let n = crate::shard::check_slices("map", slices)?;
    // Each slice's runs, by its number: run `i` is the `i / n`-th of slice `i % n + 1`.
    let mut slices: Vec<&[Option<f64>]> = vec![&[]; n as usize];
    for (path, part) in &parts {
        let k = part.shard.index;
        let held = (runs + n - k) / n;
        if part.recovered_ms.len() as u64 != held {
            return Err(format!(
                "{} holds {} runs where shard {k}/{n} has {held}",
                path.display(),
                part.recovered_ms.len()
            ));
        }
        slices[(k - 1) as usize] = &part.recovered_ms;
    }
    Ok((0..runs)
        .map(|i| slices[(i % n) as usize][(i / n) as usize])
        .collect())
}

/// The map from every run's result (in run order).
fn assemble(name: &str, spec: &MapSpec, points: &[Point], results: &[Option<f64>]) -> MapReport {
    let seeds = spec.seeds.clone().count();
    let per_variant = points.len() * seeds;
    let variants = (spec.variants.iter().enumerate())
        .map(|(v, name)| MapVariant {
            name: name.clone(),
            points: (points.iter().enumerate())
                .map(|(p, point)| {
                    let at = v * per_variant + p * seeds;
                    MapPoint {
                        trigger: point.trigger,
                        load: point.load,
                        recovered_ms: results[at..at + seeds].to_vec(),
                    }
                })
                .collect(),
        })
        .collect();
    MapReport {
        scenario: name.to_owned(),
        seeds: [*spec.seeds.start(), *spec.seeds.end()],
        trigger: MapAxis {
            key: spec.trigger.key.clone(),
            values: spec.trigger.values.clone(),
        },
        load: MapAxis {
            key: spec.load.key.clone(),
            values: spec.load.values.clone(),
        },
        fault: spec.fault.clone(),
        recovered: spec.recovered.describe(),
        variants,
    }
}

/// The map as text: a grid per variant, loads down (highest first, as the chart draws them),
/// triggers across.
fn render(map: &MapReport) -> String {
    let [first, last] = map.seeds;
    let mut text = format!(
        "map \"{}\": recovered = {} after `{}` ends, on seeds {first}..{last}\n\
         (a cell: the median time to recover on every seed; k/n: recovered on k of n seeds; \
         never: on none, within the horizon)",
        map.scenario, map.recovered, map.fault
    );
    let shown = |value: &String| value.trim_matches('"').to_owned();
    for variant in &map.variants {
        let mut header = vec![format!("{} \\ {}", map.load.key, map.trigger.key)];
        header.extend(map.trigger.values.iter().map(shown));
        let triggers = map.trigger.values.len();
        let rows = (0..map.load.values.len())
            .rev()
            .map(|load| {
                let mut row = vec![shown(&map.load.values[load])];
                row.extend((0..triggers).map(|t| variant.points[load * triggers + t].label()));
                row
            })
            .collect();
        text.push_str(&format!(
            "\n\n{}\n{}",
            variant.name,
            crate::study::align(&Table { header, rows }).trim_end()
        ));
    }
    text
}

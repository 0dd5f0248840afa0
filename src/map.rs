//! `outagelab map FILE`: the file's `[map]` grid of trigger sizes by loads, every point run on
//! every seed for every chosen variant (on all cores), each run judged recovered (with the
//! time from the trigger's end) or not within the horizon; printed as a table per variant,
//! written as JSON and drawn as phase diagrams. The same with any `--jobs`: runs come back in
//! their order.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use outagelab_report::Verdict;
use outagelab_report::map::{MapAxis, MapPoint, MapReport, MapVariant};
use outagelab_scenario_file::{MapSpec, Override, ScenarioFile};
use outagelab_sim::{Bugs, SimError};
use rayon::prelude::*;

use crate::study::RunsProgress;
use crate::table::Table;

pub struct Request {
    pub sets: Vec<Override>,
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub jobs: Option<usize>,
    pub quiet: bool,
}

/// One point of the grid, read: the file with the point's two values set.
struct Point {
    trigger: usize,
    load: usize,
    file: ScenarioFile,
}

pub fn run(file: &Path, request: &Request) -> ExitCode {
    let (_, scenario, spec) = match crate::read_for(
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
    let budget = crate::process_budget(&scenario);
    let report = crate::on_threads(request.jobs, || {
        run_grid(&scenario.name, &spec, &points, &budget, request.quiet)
    });
    let report = match report {
        Ok(report) => report,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::from(1);
        }
    };
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

/// Runs every (variant, point, seed) and judges each.
fn run_grid(
    name: &str,
    spec: &MapSpec,
    points: &[Point],
    budget: &outagelab_sim::MemoryBudget,
    quiet: bool,
) -> Result<MapReport, String> {
    let seeds: Vec<u64> = spec.seeds.clone().collect();
    let runs: Vec<(usize, usize, u64)> = (0..spec.variants.len())
        .flat_map(|v| (0..points.len()).map(move |p| (v, p)))
        .flat_map(|(v, p)| seeds.iter().map(move |&seed| (v, p, seed)))
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
    let per_variant = points.len() * seeds.len();
    let variants = (spec.variants.iter().enumerate())
        .map(|(v, name)| MapVariant {
            name: name.clone(),
            points: (points.iter().enumerate())
                .map(|(p, point)| {
                    let at = v * per_variant + p * seeds.len();
                    MapPoint {
                        trigger: point.trigger,
                        load: point.load,
                        recovered_ms: results[at..at + seeds.len()].to_vec(),
                    }
                })
                .collect(),
        })
        .collect();
    Ok(MapReport {
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
    })
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

//! `outagelab live`: a scenario file's variants run in wall-clock time against a real Redis
//! (`outagelab_live::run`), one after another, written as the report `run --json` writes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use outagelab_live::run::{LENGTH_WITHOUT_HORIZON, LiveError, Options};
use outagelab_model::time::SimDuration;
use outagelab_report::RunReport;
use outagelab_scenario_file::Override;

use crate::{Outputs, say, table, write_json, write_plots};

/// What `live` was asked for.
pub struct Request {
    pub address: String,
    pub variants: Vec<String>,
    pub horizon: Option<String>,
    pub json: Option<PathBuf>,
    pub plot: Option<PathBuf>,
    pub prometheus: Option<PathBuf>,
    pub sets: Vec<Override>,
}

/// Exit 2 when the file, a flag or a feature of the file is wrong (nothing ran); 1 when the
/// server could not be reached or refused the run's own commands.
pub fn run(file: &Path, request: &Request) -> ExitCode {
    let outputs = Outputs {
        json: request.json.as_deref(),
        events: None,
        report: None,
        csv: None,
        plot: request.plot.as_deref(),
        trace: None,
        prometheus: request.prometheus.as_deref(),
    };
    let horizon_cap = match request.horizon.as_deref().map(parse_cap).transpose() {
        Ok(cap) => cap,
        Err(message) => {
            eprintln!("--horizon: {message}");
            return ExitCode::from(2);
        }
    };
    let mut scenario = match crate::open(file, outputs, &request.sets) {
        Ok(scenario) => scenario,
        Err(code) => return code,
    };
    for warning in &scenario.warnings {
        eprintln!("warning: {warning}");
    }
    if !request.variants.is_empty() {
        let names: Vec<&str> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
        if let Some(unknown) = request
            .variants
            .iter()
            .find(|v| !names.contains(&v.as_str()))
        {
            eprintln!(
                "--variant {unknown:?}: {} has no such variant (it has: {})",
                file.display(),
                names
                    .iter()
                    .map(|name| format!("{name:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return ExitCode::from(2);
        }
        scenario
            .variants
            .retain(|variant| request.variants.contains(&variant.name));
    }
    // Every variant is checked before any runs: a refusal costs no time against the server.
    for variant in &scenario.variants {
        if let Err(unsupported) = outagelab_live::run::check(&variant.scenario) {
            eprintln!(
                "{}: variant {:?}: {unsupported}; a live run refuses what it cannot run as \
                 written",
                file.display(),
                variant.name
            );
            return ExitCode::from(2);
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("live: could not start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let options = Options {
        address: request.address.clone(),
        horizon_cap,
    };
    let mut variants = Vec::with_capacity(scenario.variants.len());
    // When each variant began, by the wall clock: what a scrape of it would have stamped.
    let mut starts = Vec::with_capacity(scenario.variants.len());
    for (index, variant) in scenario.variants.iter().enumerate() {
        let limit = length_limit(&variant.scenario, horizon_cap);
        eprintln!(
            "live {}/{}: {} (at most {:.1} s against {})",
            index + 1,
            scenario.variants.len(),
            variant.name,
            limit.as_millis_f64() / 1e3,
            request.address
        );
        let mut notes = Vec::new();
        starts.push(unix_ms_now());
        let ran = runtime.block_on(outagelab_live::run::run(
            &variant.scenario,
            &variant.name,
            variant.sweep_x,
            &options,
            &mut notes,
        ));
        for note in notes {
            eprintln!("note: {note}");
        }
        match ran {
            Ok(report) => variants.push(report),
            Err(error @ LiveError::Unsupported(_)) => {
                eprintln!("{}: variant {:?}: {error}", file.display(), variant.name);
                return ExitCode::from(2);
            }
            Err(error) => {
                eprintln!("live: variant {:?}: {error}", variant.name);
                return ExitCode::from(1);
            }
        }
    }
    let report = RunReport {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        sweep: scenario.sweep.clone(),
        slo: scenario.report.slo.clone(),
        variants,
        observed: None,
    };
    say(&table::render(
        &report,
        &scenario,
        &table::Column::defaults(&scenario),
    ));
    say(
        "(measured live: the file's expectations are the simulation's and are not checked; \
         `outagelab compare` overlays this report on a simulated one)\n",
    );
    let outputs: [(Option<&Path>, crate::Writer); 1] = [(request.json.as_deref(), write_json)];
    if let Err(code) = crate::write_outputs(&report, &outputs) {
        return code;
    }
    if let Some(path) = request.prometheus.as_deref() {
        let written = outagelab_report::observed::to_prometheus(&report, &starts)
            .and_then(|text| crate::put(path, text.as_bytes()).map_err(|e| e.to_string()))
            .map(|()| vec![path.to_path_buf()])
            .map_err(|why| format!("cannot write {}: {why}", path.display()));
        if let Err(code) = crate::say_written(written) {
            return code;
        }
    }
    if let Some(dir) = request.plot.as_deref() {
        let metrics = &scenario.report.metrics;
        if let Err(code) = crate::say_written(write_plots(&report, metrics, dir)) {
            return code;
        }
    }
    ExitCode::SUCCESS
}

/// The wall clock, in ms since the Unix epoch (0 on a clock set before it).
fn unix_ms_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

/// `--horizon`'s duration (`3s`, `500ms`), more than zero.
fn parse_cap(text: &str) -> Result<SimDuration, String> {
    let nanos = outagelab_scenario_file::units::parse_duration(text)?;
    if nanos == 0 {
        return Err("must be longer than zero".to_owned());
    }
    Ok(SimDuration::from_nanos(nanos))
}

/// The longest a variant's live run can take.
fn length_limit(scenario: &outagelab_sim::Scenario, cap: Option<SimDuration>) -> SimDuration {
    let horizon = scenario
        .limits
        .horizon
        .map(|h| SimDuration::from_nanos(h.as_nanos()));
    match (horizon, cap) {
        (Some(horizon), Some(cap)) => horizon.min(cap),
        (Some(horizon), None) => horizon,
        (None, Some(cap)) => cap,
        (None, None) => LENGTH_WITHOUT_HORIZON,
    }
}

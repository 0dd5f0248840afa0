//! `outagelab live`: a scenario file's variants run in wall-clock time against a real Redis
//! (`outagelab_live::run`), one after another, written as the report `run --json` writes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use outagelab_live::run::{Events, Interrupt, LiveSection, Options, Planned};
use outagelab_model::time::SimDuration;
use outagelab_report::RunReport;
use outagelab_scenario_file::Override;
use serde::Serialize;

use crate::{Outputs, say, table, write_plots};

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

/// Exit 2 when the file, a flag (`--redis` without a port, say) or a feature of the file is
/// wrong (nothing ran); 1 when the server could not be reached, stopped answering, or a fault
/// of the file could not be injected (the report, of the time measured, is written all the
/// same); 130 when interrupted (SIGINT; the report of the time measured is written too).
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
    let address = match outagelab_live::run::parse_address(&request.address) {
        Ok(address) => address,
        Err(message) => {
            eprintln!("--redis: {message}");
            return ExitCode::from(2);
        }
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
        address,
        horizon_cap,
    };
    let planned: Vec<Planned> = (scenario.variants.iter())
        .map(|variant| Planned {
            name: &variant.name,
            scenario: &variant.scenario,
            sweep_x: variant.sweep_x,
        })
        .collect();
    let events = Events::announcing(Arc::new(|event| eprintln!("{event}")));
    let interrupt = Interrupt::new();
    let ran = runtime.block_on(async {
        interrupt.on_ctrl_c(|| {
            eprintln!(
                "live: interrupted (SIGINT): ending the run within {} s, keeping what was \
                 measured (a second SIGINT ends at once)",
                outagelab_live::run::GRACE.as_secs()
            );
        });
        let say = |line: &str| eprintln!("{line}");
        outagelab_live::run::session(&planned, &options, &events, &interrupt, &say).await
    });
    let session = match ran {
        Ok(session) => session,
        Err((name, unsupported)) => {
            eprintln!("{}: variant {name:?}: {unsupported}", file.display());
            return ExitCode::from(2);
        }
    };
    for not_run in &session.live.not_run {
        eprintln!("live: variant {:?} not run: {}", not_run.name, not_run.why);
    }
    let exit_code = session.exit_code();
    let outagelab_live::run::Session {
        variants,
        starts,
        live,
    } = session;
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
    if let Some(path) = request.json.as_deref()
        && let Err(code) = crate::say_written(write_live_json(&report, &live, path))
    {
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
    if let Some(dir) = request
        .plot
        .as_deref()
        .filter(|_| !report.variants.is_empty())
    {
        let metrics = &scenario.report.metrics;
        if let Err(code) = crate::say_written(write_plots(&report, metrics, dir)) {
            return code;
        }
    }
    ExitCode::from(exit_code)
}

/// The report `run --json` writes, and what the live session adds under `live` (its events,
/// the variants not run): valid after any ending, since it is written after the session.
fn write_live_json(
    report: &RunReport,
    live: &LiveSection,
    path: &Path,
) -> Result<Vec<PathBuf>, String> {
    #[derive(Serialize)]
    struct LiveReport<'a> {
        #[serde(flatten)]
        report: &'a RunReport,
        live: &'a LiveSection,
    }
    if let Some(parent) = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && path != Path::new("-"))
    {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let both = LiveReport { report, live };
    crate::stream_json(path, |out| outagelab_report::write::write_json(&both, out))?;
    Ok(crate::written(path))
}

/// `--horizon`'s duration (`3s`, `500ms`), more than zero.
fn parse_cap(text: &str) -> Result<SimDuration, String> {
    let nanos = outagelab_scenario_file::units::parse_duration(text)?;
    if nanos == 0 {
        return Err("must be longer than zero".to_owned());
    }
    Ok(SimDuration::from_nanos(nanos))
}

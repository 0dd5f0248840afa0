//! `outagelab`: run a scenario file's variants side by side, check its expectations, and write
//! the report as JSON, CSV and charts.
//!
//! Exit codes: 0 when every run completed and every expectation held; 1 when an expectation
//! failed, a run was cut short by its budget, or a run broke an invariant (a monitor fired);
//! 2 when the file or the command line is wrong.

mod compare;
mod explore;
mod fit;
mod init;
mod live;
mod map;
mod page;
mod review;
mod shard;
mod study;
mod table;
mod tune;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};

use clap::{Parser, Subcommand};
use outagelab_live::calibrate::Plan;
use outagelab_report::trace::Trace;
use outagelab_report::{RunReport, Verdict, write};
use outagelab_scenario_file::{Override, ScenarioFile};
use outagelab_sim::{Bugs, SimError};

#[derive(Parser)]
#[command(
    name = "outagelab",
    version,
    about = "Simulate how services behave when Redis or a database is slow, full, or gone"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// `Run` carries every flag of a run; the command is parsed once, so its size does not matter.
#[allow(clippy::large_enum_variant)]
/// What every command that runs many runs of one file takes: `explore`, `tune` and `map`.
#[derive(clap::Args)]
struct ManyRuns {
    /// Set a key of the file's base scenario first, as `run --set` does (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Override::parse)]
    set: Vec<Override>,
    /// Threads; all cores when not given. The result is the same with any number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    jobs: Option<u16>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

#[derive(Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "the command line is parsed once, at start-up: its size costs nothing"
)]
enum Command {
    /// Run every variant of a scenario file and compare them.
    Run {
        /// The scenario file (TOML); `-` reads it from standard input (named `<stdin>`).
        file: PathBuf,
        /// Use this seed instead of the file's.
        #[arg(long, conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Run on every seed of a range, `A..B`, or `stated` for the range the file states
        /// (`[scenario] seeds`): each metric's mean with a 95% interval, each variant's paired
        /// difference from the baseline, each expectation over the seeds. `--json` writes
        /// the study.
        #[arg(long, value_name = "RANGE", conflicts_with_all = ["events", "csv"])]
        seeds: Option<String>,
        /// A metric for the table (repeatable; a summary path such as `latency_ms.all.p99`).
        /// Default: the file's `[report] metrics`; with --seeds, else ok, p50, p95 and p99.
        #[arg(long, value_name = "METRIC")]
        metric: Vec<String>,
        /// The side-by-side table's columns, in this order, e.g. `requests,ok,timeout,shed,p99`
        /// (names: requests, ok, errors, each error outcome such as timeout or shed,
        /// unfinished, stale, 5xx, 5xx_window, p50, p95, p99, peak). Default: decided from the
        /// file, the same whatever the run's counts.
        #[arg(long, value_name = "A,B,C", conflicts_with = "seeds")]
        columns: Option<String>,
        /// With --seeds: the variant the others are compared with (default: the first).
        #[arg(long, value_name = "VARIANT", requires = "seeds")]
        baseline: Option<String>,
        /// With --seeds: a constraint on a metric's mean, e.g. `latency_ms.all.p99 < 200`
        /// (repeatable); the table marks the variants that satisfy every one.
        #[arg(long, value_name = "EXPECTATION", requires = "seeds")]
        constraint: Vec<String>,
        /// With --seeds: `min <metric>` or `max <metric>`; names the best variant among those
        /// that satisfy the constraints.
        #[arg(long, value_name = "min|max METRIC", requires = "seeds")]
        objective: Option<String>,
        /// With --seeds and an objective: `min <metric>` or `max <metric>`, which chooses the
        /// best among the points tied with it on the objective (95% intervals that overlap).
        #[arg(long, value_name = "min|max METRIC", requires = "seeds")]
        tie_break: Option<String>,
        /// With --seeds: threads to run on (default: every core). The results do not depend
        /// on it.
        #[arg(long, value_name = "N", requires = "seeds", value_parser = clap::value_parser!(u16).range(1..=1024))]
        jobs: Option<u16>,
        /// With --seeds and --json: run only slice K of N of the runs (every N-th run from
        /// the K-th, in seed-then-variant order); `outagelab merge` joins the slices. `auto`
        /// reads K and N from a Kubernetes Indexed Job or a Slurm array.
        #[arg(long, value_name = "K/N", requires_all = ["seeds", "json"])]
        shard: Option<String>,
        /// Write the full report (summaries and time series) as JSON to this file (`-` for
        /// standard output; the table and notes then go to standard error).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Write the log of state changes (breaker transitions, reconnect-slot links, faults)
        /// as JSON lines to this file (`-` for standard output).
        #[arg(long, value_name = "PATH")]
        events: Option<PathBuf>,
        /// Write the report a review reads: one self-contained HTML page (inline charts, no
        /// network), or Markdown when PATH ends in `.md`; `-` writes the HTML page to standard
        /// output. With --seeds, the study: means with
        /// intervals, differences from the baseline, the best point, and one draw's charts.
        #[arg(long, visible_alias = "html", value_name = "PATH")]
        report: Option<PathBuf>,
        /// Write series.csv and summary.csv into this directory (not `-`: two files).
        #[arg(long, value_name = "DIR")]
        csv: Option<PathBuf>,
        /// Write the charts (PNG and SVG) into this directory.
        #[arg(long, value_name = "DIR")]
        plot: Option<PathBuf>,
        /// Write the series (requests, ok and failed requests per second, in flight) as
        /// Prometheus's `query_range` answer, timed from the file's `[observed] start` or
        /// else the Unix epoch: a file `[observed]` reads.
        #[arg(long, value_name = "PATH", conflicts_with = "seeds")]
        prometheus: Option<PathBuf>,
        /// Write a trace of sampled requests (each step, wait and policy decision as a slice or
        /// instant; faults as instants) in Chrome's trace event format, for ui.perfetto.dev
        /// (`-` for standard output).
        #[arg(long, value_name = "PATH", conflicts_with = "seeds")]
        trace: Option<PathBuf>,
        /// With --trace: trace every N-th request of each variant, from the first (at most
        /// 1000 requests per variant).
        #[arg(long, value_name = "N", requires = "trace", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
        trace_sample: u64,
        /// Show no progress bar (it shows on a terminal for variants that run over a second).
        #[arg(long)]
        quiet: bool,
        /// Refuse the file (exit 2, nothing runs) if it has any warning.
        #[arg(long)]
        strict: bool,
        /// Set a key of the file's base scenario before its variants are merged, e.g.
        /// `loads.peak.rate=400` or `'faults.redis-dead.duration="10s"'` (a dotted key and a
        /// TOML value; repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Override::parse)]
        set: Vec<Override>,
        /// Plant a bug on purpose, to see an invariant monitor catch it (for tests).
        #[arg(long, hide = true, value_name = "BUG", conflicts_with = "seeds", value_parser = clap::builder::PossibleValuesParser::new(Bugs::NAMES))]
        plant_bug: Option<String>,
    },
    /// Join the JSON files of `run --seeds ... --shard K/N` (every K from 1 to N) into exactly
    /// the JSON one unsharded run writes, and print its table.
    Merge {
        /// The shards' JSON files, in any order.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Where to write the merged study (`-` for standard output).
        #[arg(long, value_name = "PATH")]
        json: PathBuf,
    },
    /// Write a starter scenario for your own service from a template (each validates and
    /// runs as written; change the numbers its comments point at).
    Init {
        /// Where to write it (`-` for standard output); it is never overwritten.
        #[arg(default_value = "scenario.toml")]
        path: PathBuf,
        /// The template: cache-aside, lock-guarded-writes or gateway-rate-limit.
        #[arg(long, default_value = "cache-aside")]
        template: String,
        /// List the templates and what each models.
        #[arg(long, conflicts_with = "template")]
        list: bool,
    },
    /// Check a scenario file without running it.
    Validate {
        /// The scenario file (TOML); `-` reads it from standard input (named `<stdin>`).
        file: PathBuf,
        /// Print the values each breaker and retry policy runs with, per variant: what its
        /// preset expanded to after the file's overrides, with the preset's source.
        #[arg(long)]
        explain: bool,
        /// Refuse the file (exit 2) if it has any warning.
        #[arg(long)]
        strict: bool,
        /// Set a key of the file's base scenario before its variants are merged (a dotted key
        /// and a TOML value; repeatable), as `run --set` does.
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Override::parse)]
        set: Vec<Override>,
    },
    /// Run a scenario file's loads, Redis steps and faults in wall-clock time against a real
    /// Redis, and write the report `run --json` writes. It deletes keys under
    /// `outagelab:live:`, and the file's faults pause, kill, flush and reconfigure the server
    /// for real: point it at a server of its own.
    Live {
        /// The scenario file (TOML).
        file: PathBuf,
        /// The server, `host:port` (for example `127.0.0.1:6379`).
        #[arg(long, value_name = "HOST:PORT")]
        redis: String,
        /// Run only this variant (repeatable; default: every variant, one after another).
        #[arg(long, value_name = "NAME")]
        variant: Vec<String>,
        /// Stop each variant at this time at the latest (e.g. `3s`); a run never goes past the
        /// file's own horizon.
        #[arg(long, value_name = "DURATION")]
        horizon: Option<String>,
        /// Write the report (summaries and time series) as JSON to this file (`-` for
        /// standard output).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Write the charts (PNG and SVG) into this directory.
        #[arg(long, value_name = "DIR")]
        plot: Option<PathBuf>,
        /// Write the measured series as Prometheus's `query_range` answer, as `run
        /// --prometheus` does: ground truth for `[observed]` and `outagelab fit`.
        #[arg(long, value_name = "PATH")]
        prometheus: Option<PathBuf>,
        /// Set a key of the file's base scenario before its variants are merged, as `run
        /// --set` does (a dotted key and a TOML value; repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Override::parse)]
        set: Vec<Override>,
    },
    /// Fit the file's incident variant to what was observed: search its `[fit] unknowns` for
    /// the values under which its run matches `[observed]` best, on each seed of `[fit]
    /// seeds`; print the fitted values, their spread over the seeds and the fit error; then
    /// run every variant (the fixes) against the fitted model.
    Fit {
        /// The scenario file, with `[observed]` and `[fit]`.
        file: PathBuf,
        /// Write the fitted scenario (the file with each unknown's fitted value) here.
        #[arg(long, value_name = "PATH")]
        write: Option<PathBuf>,
        /// Set a key of the file's base scenario first, as `run --set` does (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Override::parse)]
        set: Vec<Override>,
        /// Threads; all cores when not given. The fit is the same with any number.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
        jobs: Option<u16>,
    },
    /// Search for the fault schedules that break the design: draw schedules from the file's
    /// `[explore]` table, run its variants under each, and shrink each way of breaking found to
    /// a small schedule, written as a scenario file that `run` reproduces. Exit 1 when a
    /// schedule broke the design.
    Explore {
        /// The scenario file, with `[explore]`.
        file: PathBuf,
        /// The exploration's seed: which schedules are drawn (the same seed, the same findings).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Where the reproducers are written (`finding-N.toml`).
        #[arg(long, value_name = "DIR", default_value = "explored")]
        out: PathBuf,
        #[command(flatten)]
        many: ManyRuns,
        /// Judge this many schedules instead of the file's `[explore] runs_max`.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        runs: Option<u64>,
        /// A wall-clock budget (`90s`, `10m`): no new chunk of 256 schedules starts once it
        /// has passed. The output says how many were judged; `--runs` with that count judges
        /// exactly those again, on any machine.
        #[arg(long, value_name = "DURATION", value_parser = parse_wall_duration, conflicts_with_all = ["shard", "merge"])]
        time_max: Option<std::time::Duration>,
        /// Draw and judge only slice K of N of the schedules (every N-th from the K-th), and
        /// write their tally to --json; `auto` reads K and N from a Kubernetes Indexed Job or
        /// a Slurm array. `--merge` joins the slices.
        #[arg(long, value_name = "K/N", requires = "json", conflicts_with = "merge")]
        shard: Option<String>,
        /// Where --shard writes its slice's tally.
        #[arg(long, value_name = "PATH", requires = "shard")]
        json: Option<PathBuf>,
        /// Join the tallies of every shard (`--shard K/N --json`, in any order), then shrink
        /// and write the findings: the same output and files as one unsharded exploration.
        #[arg(long, value_name = "SHARD.json", num_args = 1..)]
        merge: Vec<PathBuf>,
        /// Plant a bug on purpose, to see exploration find it (for tests).
        #[arg(long, hide = true, value_name = "BUG", value_parser = clap::builder::PossibleValuesParser::new(Bugs::NAMES))]
        plant_bug: Option<String>,
    },
    /// Tune the design's own knobs (`[tune]`) against the worst schedules `[explore]` finds:
    /// explore, keep what breaks it, move to the nearest setting that survives everything
    /// kept, explore again. Exit 0 when a setting survives a fresh exploration.
    Tune {
        /// The scenario file, with `[explore]` and `[tune]`.
        file: PathBuf,
        /// The first round's exploration seed (round r uses seed + r).
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Write the tuned scenario (the file with the knobs set) here.
        #[arg(long, value_name = "PATH")]
        write: Option<PathBuf>,
        /// Where each kept schedule is written against the tuned setting (`check-N.toml`).
        #[arg(long, value_name = "DIR", default_value = "tuned")]
        out: PathBuf,
        #[command(flatten)]
        many: ManyRuns,
    },
    /// Map where the design stops recovering: run the file's `[map]` grid of trigger sizes by
    /// loads on its seeds, judge each run recovered (and how long after the trigger ended)
    /// or not within the horizon, and print a phase table per variant.
    Map {
        /// The scenario file, with `[map]`.
        file: PathBuf,
        /// Write the map (every point's time to recover on every seed) as JSON; with
        /// --shard, the slice's runs.
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Draw the phase diagrams (`map.png`, `map.svg`) into this directory.
        #[arg(long, value_name = "DIR", conflicts_with = "shard")]
        plot: Option<PathBuf>,
        #[command(flatten)]
        many: ManyRuns,
        /// Run only slice K of N of the runs (every N-th from the K-th) and write their
        /// results to --json; `auto` reads K and N from a Kubernetes Indexed Job or a Slurm
        /// array. `--merge` joins the slices.
        #[arg(long, value_name = "K/N", requires = "json", conflicts_with = "merge")]
        shard: Option<String>,
        /// Join the slices of every shard (`--shard K/N --json`, in any order): the same
        /// table, JSON and charts as one unsharded map.
        #[arg(long, value_name = "SHARD.json", num_args = 1..)]
        merge: Vec<PathBuf>,
    },
    /// Overlay two run reports (`run --json`, `live --json`) variant by variant: per bucket,
    /// the difference of their error counts and of their p50 and p99 latency, and each one's
    /// failure window (the first and the last bucket with an error).
    Compare {
        /// The first report (A), typically the simulated run.
        first: PathBuf,
        /// The second report (B), typically the live run.
        second: PathBuf,
        /// Compare over buckets of this many milliseconds, a whole multiple of both reports'
        /// (needed when their buckets differ): counts are summed, a regrouped bucket's p50
        /// and p99 are the largest of its buckets'.
        #[arg(long, value_name = "N")]
        bucket_ms: Option<f64>,
        /// Write the comparison, every bucket of every variant, as JSON to this file (`-` for
        /// standard output; the tables then go to standard error).
        #[arg(long, value_name = "PATH")]
        json: Option<PathBuf>,
        /// Write the overlay charts (PNG and SVG) into this directory.
        #[arg(long, value_name = "DIR")]
        plot: Option<PathBuf>,
    },
    /// Measure a real Redis from one client loop (round trip, the loop's and the connection's
    /// rates for queued big SETs, the server's own costs) and print `[servers]`,
    /// `[client_loops]` and `[connections]` tables for a scenario file. It writes (then
    /// deletes) keys under
    /// `outagelab:calibrate:`, so point it at a server you may write to.
    Calibrate {
        /// The server, `host:port` (for example `127.0.0.1:6379`).
        #[arg(long, value_name = "HOST:PORT")]
        redis: String,
        /// PINGs whose median round trip gives the latency.
        #[arg(long, default_value_t = Plan::SEED_000.pings, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        pings: u32,
        /// SETs queued at once on the connection (seed 000 measured 60).
        #[arg(long, default_value_t = Plan::SEED_000.sets, value_parser = clap::value_parser!(u32).range(1..=1_000))]
        sets: u32,
        /// Size of each SET's value, in KiB (seed 000's blobs: 2048).
        #[arg(long, default_value_t = (Plan::SEED_000.set_bytes / 1024) as u32, value_parser = clap::value_parser!(u32).range(1..=65_536))]
        set_kib: u32,
    },
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() { 2 } else { 0 };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Calibrate {
            redis,
            pings,
            sets,
            set_kib,
        } => calibrate(
            &redis,
            Plan {
                pings,
                sets,
                set_bytes: set_kib as usize * 1024,
                incrs: Plan::SEED_000.incrs,
                small_sets: Plan::SEED_000.small_sets,
            },
        ),
        Command::Init {
            path,
            template,
            list,
        } => {
            if list {
                say(&init::listing());
                return ExitCode::SUCCESS;
            }
            match init::write(&template, &path) {
                Ok(said) => {
                    eprint!("{said}");
                    ExitCode::SUCCESS
                }
                Err(message) => {
                    eprintln!("{message}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Validate {
            file,
            explain,
            strict,
            set,
        } => match outagelab_scenario_file::load_checking(
            &file,
            &set,
            outagelab_scenario_file::Starts::ALL,
        ) {
            Ok(scenario) => {
                if !warnings_pass(&scenario, strict) {
                    return ExitCode::from(2);
                }
                let count = scenario.variants.len();
                let plural = if count == 1 { "" } else { "s" };
                let shown = if file == Path::new("-") {
                    outagelab_scenario_file::STDIN_NAME.to_owned()
                } else {
                    file.display().to_string()
                };
                say(&format!("{shown}: ok ({count} variant{plural})\n"));
                if explain {
                    for variant in &scenario.variants {
                        say(&format!(
                            "\n# variant {}\n{}",
                            variant.name,
                            outagelab_scenario_file::explain(variant)
                        ));
                    }
                }
                ExitCode::SUCCESS
            }
            Err(diagnostics) => {
                eprintln!("{diagnostics}");
                ExitCode::from(2)
            }
        },
        Command::Merge { shards, json } => merge(&shards, &json),
        Command::Fit {
            file,
            write,
            set,
            jobs,
        } => fit::run(
            &file,
            &fit::Request {
                sets: set,
                write,
                jobs: jobs.map(usize::from),
            },
        ),
        Command::Explore {
            file,
            seed,
            out,
            many,
            plant_bug,
            shard,
            json,
            merge,
            runs,
            time_max,
        } => {
            let shard = match shard::from_flag(shard.as_deref()) {
                Ok(shard) => shard,
                Err(code) => return code,
            };
            explore::run(
                &file,
                &explore::Request {
                    shard,
                    json,
                    merge,
                    runs,
                    time_max,
                    sets: many.set,
                    seed,
                    jobs: many.jobs.map(usize::from),
                    out,
                    bugs: plant_bug
                        .as_deref()
                        .and_then(Bugs::named)
                        .unwrap_or_default(),
                    bug_name: plant_bug,
                    quiet: many.quiet,
                },
            )
        }
        Command::Tune {
            file,
            seed,
            write,
            out,
            many,
        } => tune::run(
            &file,
            &tune::Request {
                sets: many.set,
                seed,
                jobs: many.jobs.map(usize::from),
                write,
                out,
            },
        ),
        Command::Map {
            file,
            json,
            plot,
            many,
            shard,
            merge,
        } => {
            let shard = match shard::from_flag(shard.as_deref()) {
                Ok(shard) => shard,
                Err(code) => return code,
            };
            map::run(
                &file,
                &map::Request {
                    sets: many.set,
                    json,
                    plot,
                    jobs: many.jobs.map(usize::from),
                    quiet: many.quiet,
                    shard,
                    merge,
                },
            )
        }
        Command::Compare {
            first,
            second,
            bucket_ms,
            json,
            plot,
        } => compare::run(
            [&first, &second],
            bucket_ms,
            json.as_deref(),
            plot.as_deref(),
        ),
        Command::Live {
            file,
            redis,
            variant,
            horizon,
            json,
            plot,
            prometheus,
            set,
        } => live::run(
            &file,
            &live::Request {
                address: redis,
                variants: variant,
                horizon,
                json,
                plot,
                prometheus,
                sets: set,
            },
        ),
        Command::Run {
            file,
            seed,
            seeds: Some(range),
            json,
            report,
            plot,
            metric,
            baseline,
            constraint,
            objective,
            tie_break,
            jobs,
            shard,
            quiet,
            strict,
            set,
            ..
        } => {
            debug_assert!(seed.is_none(), "clap refuses --seed with --seeds");
            let options = StudyOptions {
                range,
                json,
                report,
                plot,
                metrics: metric,
                baseline,
                constraints: constraint,
                objective,
                tie_break,
                jobs: jobs.map(usize::from),
                shard,
                quiet,
                strict,
                sets: set,
            };
            run_seeds(&file, options)
        }
        Command::Run {
            file,
            seed,
            seeds: None,
            json,
            events,
            report,
            csv,
            plot,
            prometheus,
            trace,
            trace_sample,
            quiet,
            plant_bug,
            metric,
            columns,
            strict,
            set,
            ..
        } => {
            let bugs = plant_bug
                .as_deref()
                .and_then(Bugs::named)
                .unwrap_or_default();
            let columns = match columns.as_deref().map(table::Column::parse_list) {
                None => None,
                Some(Ok(columns)) => Some(columns),
                Some(Err(message)) => {
                    eprintln!("{message}");
                    return ExitCode::from(2);
                }
            };
            run(
                &file,
                seed,
                bugs,
                quiet,
                strict,
                &set,
                Chosen {
                    metrics: &metric,
                    columns,
                },
                Outputs {
                    json: json.as_deref(),
                    events: events.as_deref(),
                    report: report.as_deref(),
                    csv: csv.as_deref(),
                    plot: plot.as_deref(),
                    trace: trace.as_deref().map(|path| (path, trace_sample)),
                    prometheus: prometheus.as_deref(),
                },
            )
        }
    }
}

/// `calibrate`: measures the server and prints the snippet; exit 1 if it cannot be reached.
fn calibrate(address: &str, plan: Plan) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("calibrate: could not start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(outagelab_live::calibrate::calibrate(address, plan)) {
        Ok(measured) => {
            say(&measured.snippet("calibrated", "redis"));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("calibrate: {address}: {error}");
            ExitCode::from(1)
        }
    }
}

/// What `run --seeds` was asked for.
struct StudyOptions {
    range: String,
    json: Option<PathBuf>,
    report: Option<PathBuf>,
    plot: Option<PathBuf>,
    metrics: Vec<String>,
    baseline: Option<String>,
    constraints: Vec<String>,
    objective: Option<String>,
    tie_break: Option<String>,
    jobs: Option<usize>,
    shard: Option<String>,
    quiet: bool,
    strict: bool,
    sets: Vec<Override>,
}

/// `run --seeds`: every variant on every seed of a range; exit 1 if an expectation failed.
fn run_seeds(file: &Path, options: StudyOptions) -> ExitCode {
    let outputs = Outputs {
        json: options.json.as_deref(),
        events: None,
        report: options.report.as_deref(),
        csv: None,
        plot: options.plot.as_deref(),
        trace: None,
        prometheus: None,
    };
    let scenario = match open(file, outputs, &options.sets) {
        Ok(scenario) => scenario,
        Err(code) => return code,
    };
    if !warnings_pass(&scenario, options.strict) {
        return ExitCode::from(2);
    }
    let range = options.range.as_str();
    let seeds = if range == "stated" {
        match &scenario.seeds {
            Some(seeds) => seeds.clone(),
            None => {
                eprintln!(
                    "--seeds stated: {} states no seed range (add `seeds = \"1..20\"` to its \
                     [scenario] table once its expectations hold on those seeds)",
                    file.display()
                );
                return ExitCode::from(2);
            }
        }
    } else {
        match outagelab_scenario_file::parse_seed_range(range) {
            Ok(seeds) => seeds,
            Err(reason) => {
                eprintln!("--seeds: {reason} (or `stated` for the file's own range)");
                return ExitCode::from(2);
            }
        }
    };
    let shard = match shard::from_flag(options.shard.as_deref()) {
        Ok(shard) => shard,
        Err(code) => return code,
    };
    // What the command line chose, for the command that reproduces the study.
    let mut chosen: Vec<(&str, String)> = Vec::new();
    chosen.extend(options.sets.iter().map(|s| ("--set", s.to_string())));
    chosen.extend(options.metrics.iter().map(|m| ("--metric", m.clone())));
    chosen.extend(options.baseline.iter().map(|b| ("--baseline", b.clone())));
    chosen.extend(
        options
            .constraints
            .iter()
            .map(|c| ("--constraint", c.clone())),
    );
    chosen.extend(options.objective.iter().map(|o| ("--objective", o.clone())));
    chosen.extend(options.tie_break.iter().map(|o| ("--tie-break", o.clone())));
    // The command line first, then the file's [report], then the defaults.
    let stated = &scenario.report;
    let metrics = [options.metrics, stated.metrics.clone()]
        .into_iter()
        .find(|m| !m.is_empty())
        .unwrap_or_else(|| study::default_metrics(&scenario));
    let constraints = if options.constraints.is_empty() {
        stated.constraints.clone()
    } else {
        options.constraints
    };
    let plan = study::Plan {
        seeds,
        selection: outagelab_report::study::Selection {
            metrics,
            constraints,
            objective: options.objective.or_else(|| stated.objective.clone()),
            tie_break: options.tie_break.or_else(|| stated.tie_break.clone()),
        },
        baseline: options.baseline.or_else(|| stated.baseline.clone()),
        shard,
        jobs: options.jobs,
        quiet: options.quiet,
    };
    if let Err(message) = study::check_plan(&scenario, &plan) {
        eprintln!("{message}");
        return ExitCode::from(2);
    }
    let study = match study::run(&scenario, &plan) {
        Ok(study) => study,
        Err((variant, seed, error)) => {
            eprintln!("variant \"{variant}\" on seed {seed}: {error}");
            eprintln!("reproduce with: {}", reproduce(file, seed, &options.sets));
            return ExitCode::from(1);
        }
    };
    if let Some(json) = options.json.as_deref()
        && let Err(message) = write_study(&study, json)
    {
        eprintln!("{message}");
        return ExitCode::from(2);
    }
    if let Some(shard) = study.shard {
        eprintln!(
            "shard {}/{}: {} of {} runs; join every shard with `outagelab merge`",
            shard.index,
            shard.count,
            study.runs.len(),
            study.run_count()
        );
        return ExitCode::SUCCESS;
    }
    say(&study::render(&study));
    if let Some(path) = options.report.as_deref() {
        let command = study_command(file, &study, &chosen);
        if let Err(message) = write_study_page(&scenario, &study, &command, path, options.quiet) {
            eprintln!("{message}");
            return ExitCode::from(2);
        }
        if path != Path::new("-") {
            eprintln!("wrote {}", path.display());
        }
    }
    if let Some(dir) = options.plot.as_deref()
        && let Err(code) = say_written(outagelab_plots::write_study_charts(&study, dir))
    {
        return code;
    }
    let failed = study::failed_seeds(&study);
    if study::all_held(&study) {
        return ExitCode::SUCCESS;
    }
    match failed.first() {
        Some(seed) => eprintln!("reproduce with: {}", reproduce(file, *seed, &options.sets)),
        None => eprintln!(
            "an expectation over the seeds failed: its seeds' values are in the table (and \
             in --json)"
        ),
    }
    ExitCode::from(1)
}

/// The command that runs `study` again: the file, its seeds, and the choices the command line
/// made (the file's own `[report]` needs no flag).
fn study_command(
    file: &Path,
    study: &outagelab_report::study::Study,
    flags: &[(&str, String)],
) -> String {
    let [low, high] = study.seeds;
    let mut command = format!(
        "outagelab run {} --seeds {low}..{high}",
        shell_word(&file.display().to_string())
    );
    for (flag, value) in flags {
        command.push_str(&format!(" {flag} {}", shell_word(value)));
    }
    command
}

/// The study's page: its statistics, and every variant on the range's first seed for the
/// charts and the state changes.
fn write_study_page(
    scenario: &ScenarioFile,
    study: &outagelab_report::study::Study,
    command: &str,
    path: &Path,
    quiet: bool,
) -> Result<(), String> {
    let mut first = scenario.clone();
    first.seed = study.seeds[0];
    for variant in &mut first.variants {
        variant.scenario.seed = study.seeds[0];
    }
    let (sample, _) = simulate(&first, Bugs::default(), quiet, None)
        .map_err(|(variant, error)| format!("variant \"{variant}\": {error}"))?;
    let checked = evaluate(&first, &sample);
    let study_chart = outagelab_plots::study_svg(study)?;
    write_page(
        path,
        |format, charts| {
            let run = review::RunView {
                report: &sample,
                checked: &checked,
                charts,
                columns: &table::Column::defaults(&first),
            };
            review::study_page(
                format,
                scenario,
                study,
                study_chart.as_deref(),
                &run,
                command,
            )
        },
        (&sample, &scenario.report.metrics),
    )
}

/// `merge`: reads every shard, checks they are the slices of one study, and writes the study
/// one unsharded run would have written.
fn merge(shards: &[PathBuf], json: &Path) -> ExitCode {
    use outagelab_report::study::Study;
    if json == Path::new("-") {
        STDOUT_IS_JSON.store(true, Ordering::Relaxed);
    }
    let mut parts: Vec<(PathBuf, Study)> = Vec::new();
    for path in shards {
        let read = std::fs::read_to_string(path)
            .map_err(|e| e.to_string())
            .and_then(|text| serde_json::from_str::<Study>(&text).map_err(|e| e.to_string()));
        match read {
            Ok(study) => parts.push((path.clone(), study)),
            Err(error) => {
                eprintln!("merge: {}: not a shard of a study: {error}", path.display());
                return ExitCode::from(2);
            }
        }
    }
    if shards.iter().any(|p| {
        std::path::absolute(p).ok() == std::path::absolute(json).ok() && json != Path::new("-")
    }) {
        eprintln!("merge: --json {} is one of the shards", json.display());
        return ExitCode::from(2);
    }
    let (first_path, first) = &parts[0];
    let Some(count) = first.shard.map(|s| s.count) else {
        eprintln!(
            "merge: {} is a whole study, not a shard (run with --shard K/N)",
            first_path.display()
        );
        return ExitCode::from(2);
    };
    let mut merged = first.clone();
    merged.runs.clear();
    let mut seen = vec![None; count as usize];
    for (path, part) in &parts {
        let same = Study {
            runs: Vec::new(),
            shard: None,
            ..part.clone()
        } == Study {
            runs: Vec::new(),
            shard: None,
            ..merged.clone()
        };
        let Some(shard) = part.shard.filter(|s| s.count == count && same) else {
            eprintln!(
                "merge: {} is not a shard of the same study as {} (scenario, seeds, variants \
                 and selection must match, and N of K/N)",
                path.display(),
                first_path.display()
            );
            return ExitCode::from(2);
        };
        if let Some(other) = seen[shard.index as usize - 1].replace(path.clone()) {
            eprintln!(
                "merge: {} and {} are both shard {}/{count}",
                other.display(),
                path.display(),
                shard.index
            );
            return ExitCode::from(2);
        }
        merged.runs.extend(part.runs.iter().cloned());
    }
    let missing: Vec<String> = (1..=count)
        .filter(|k| seen[*k as usize - 1].is_none())
        .map(|k| format!("{k}/{count}"))
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "merge: missing shard{} {}",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", ")
        );
        return ExitCode::from(2);
    }
    if let Err(message) = merged.finish() {
        eprintln!("merge: {message}");
        return ExitCode::from(2);
    }
    if let Err(message) = write_study(&merged, json) {
        eprintln!("{message}");
        return ExitCode::from(2);
    }
    say(&study::render(&merged));
    if study::all_held(&merged) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn write_study(study: &outagelab_report::study::Study, path: &Path) -> Result<(), String> {
    if path != Path::new("-")
        && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
    {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    stream_json(path, |out| write::write_json(study, out))?;
    if path != Path::new("-") {
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Writes what `json` writes (a report's JSON, [`write::write_json`]) to `path` (standard
/// output for `-`) as it is made, never as one string: to a file beside it renamed into place
/// at the end ([`write::replace_file_with`]), so a reader never sees half a report.
fn stream_json(
    path: &Path,
    json: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), String> {
    if path == Path::new("-") {
        let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
        // A reader that went away (`| head`) is not an error worth reporting.
        let _ = json(&mut stdout).and_then(|()| stdout.flush());
        return Ok(());
    }
    write::replace_file_with(path, json)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Where `run` writes what it writes besides the table.
#[derive(Clone, Copy)]
struct Outputs<'a> {
    json: Option<&'a Path>,
    events: Option<&'a Path>,
    report: Option<&'a Path>,
    csv: Option<&'a Path>,
    plot: Option<&'a Path>,
    /// Where the trace goes, and every how many requests it samples.
    trace: Option<(&'a Path, u64)>,
    /// The series as Prometheus's `query_range` answer (`--prometheus`).
    prometheus: Option<&'a Path>,
}

/// What a run's table and charts show: `--metric` (else the file's `[report] metrics`) and
/// `--columns` (else the file's default columns).
struct Chosen<'a> {
    metrics: &'a [String],
    columns: Option<Vec<table::Column>>,
}

// The run's flags, one argument each: a struct would only rename them.
#[allow(clippy::too_many_arguments)]
fn run(
    file: &Path,
    seed: Option<u64>,
    bugs: Bugs,
    quiet: bool,
    strict: bool,
    sets: &[Override],
    chosen: Chosen,
    outputs: Outputs,
) -> ExitCode {
    let metrics = chosen.metrics;
    let Outputs {
        json,
        events,
        report: report_path,
        csv,
        plot,
        trace,
        prometheus,
    } = outputs;
    let mut scenario = match open(file, outputs, sets) {
        Ok(scenario) => scenario,
        Err(code) => return code,
    };
    if !warnings_pass(&scenario, strict) {
        return ExitCode::from(2);
    }
    for metric in metrics {
        if let Err(message) = scenario.check_metric(metric) {
            eprintln!("--metric `{metric}`: {message}");
            return ExitCode::from(2);
        }
    }
    if let Some(seed) = seed {
        scenario.seed = seed;
        for variant in &mut scenario.variants {
            variant.scenario.seed = seed;
        }
    }
    let sample_every = trace.and_then(|(_, every)| std::num::NonZeroU64::new(every));
    let (report, traces) = match simulate(&scenario, bugs, quiet, sample_every) {
        Ok(ran) => ran,
        Err((variant, error)) => {
            eprintln!("variant \"{variant}\": {error}");
            let planted = (bugs != Bugs::default())
                .then(|| {
                    Bugs::NAMES
                        .into_iter()
                        .find(|name| Bugs::named(name) == Some(bugs))
                        .map(|name| format!(" --plant-bug {name}"))
                })
                .flatten()
                .unwrap_or_default();
            eprintln!(
                "reproduce with: {}{planted}",
                reproduce(file, scenario.seed, sets)
            );
            return ExitCode::from(1);
        }
    };
    let columns = (chosen.columns).unwrap_or_else(|| table::Column::defaults(&scenario));
    say(&table::render(&report, &scenario, &columns));
    let metrics = if metrics.is_empty() {
        &scenario.report.metrics
    } else {
        metrics
    };
    if !metrics.is_empty() {
        say(&format!(
            "\n{}",
            study::align(&study::run_metrics_table(&scenario, &report, metrics))
        ));
    }
    let mut failed = false;
    for variant in &report.variants {
        if variant.verdict.is_budget() {
            failed = true;
            let zero_time = format!(
                "a closed-loop load's caller sent {} requests without time passing: they end \
                 at once (an open breaker, a full bulkhead, a limit) and the load has no think \
                 time; give it a `think`, or the failing step a latency",
                outagelab_sim::SENDS_AT_ONE_INSTANT_MAX
            );
            let advice = match variant.verdict {
                Verdict::MemoryBudget => {
                    "what it holds (requests in flight, queued commands, its series) passed \
                     [run] memory_max: raise it, shorten the run or widen [metrics] bucket, or \
                     look for work that piles up without end"
                }
                Verdict::ZeroTimeLoop => zero_time.as_str(),
                _ => "raise [run] events_max or time_max, or look for a feedback loop",
            };
            eprintln!(
                "variant \"{}\" was stopped by its run budget ({}) at {} ms: its figures are \
                 incomplete; {advice}",
                variant.name,
                variant.verdict.name(),
                variant.end_ms
            );
        }
    }
    let checked = evaluate(&scenario, &report);
    failed |= !check_expectations(&checked);
    let outputs: [(Option<&Path>, Writer); 4] = [
        (json, write_json),
        (events, write_events),
        (csv, write_csv),
        (prometheus, write_prometheus),
    ];
    if let Err(code) = write_outputs(&report, &outputs) {
        return code;
    }
    if let Some(dir) = plot
        && let Err(code) = say_written(write_plots(&report, metrics, dir))
    {
        return code;
    }
    if let Some(path) = report_path {
        let command = reproduce(file, scenario.seed, sets);
        let run = review::RunView {
            report: &report,
            checked: &checked,
            charts: &[],
            columns: &columns,
        };
        match write_page(
            path,
            |format, charts| {
                let run = review::RunView { charts, ..run };
                review::run_page(format, &scenario, &run, &command)
            },
            (&report, metrics),
        ) {
            Ok(()) if path == Path::new("-") => {}
            Ok(()) => eprintln!("wrote {}", path.display()),
            Err(message) => {
                eprintln!("{message}");
                return ExitCode::from(2);
            }
        }
    }
    if let Some((path, _)) = trace {
        let named: Vec<(&str, &Trace)> = report
            .variants
            .iter()
            .map(|v| v.name.as_str())
            .zip(&traces)
            .collect();
        let text = outagelab_report::trace::chrome_trace_json(&named);
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && let Err(e) = std::fs::create_dir_all(parent)
        {
            eprintln!("cannot create {}: {e}", parent.display());
            return ExitCode::from(2);
        }
        if let Err(e) = put(path, text.as_bytes()) {
            eprintln!("cannot write {}: {e}", path.display());
            return ExitCode::from(2);
        }
        let traced: u64 = traces.iter().map(|t| t.requests).sum();
        let dropped: u64 = traces.iter().map(|t| t.dropped).sum();
        let dropped = if dropped > 0 {
            format!(
                "; {dropped} events past the cap of {} per variant left out",
                outagelab_sim::TRACE_EVENTS_MAX
            )
        } else {
            String::new()
        };
        eprintln!(
            "wrote {} ({traced} requests traced, 1 in {} of each variant{dropped}; open it in ui.perfetto.dev)",
            if path == Path::new("-") {
                "the trace to standard output".to_owned()
            } else {
                path.display().to_string()
            },
            traces.first().map_or(0, |t| t.sample_every)
        );
    }
    if failed {
        eprintln!("reproduce with: {}", reproduce(file, scenario.seed, sets));
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// The command that runs `file` again on `seed` with the same `--set` flags, quoted for a
/// POSIX shell where a word needs it. A scenario read from standard input (`-`) is not there
/// to read again: the command names a file to save it as, and says so.
fn reproduce(file: &Path, seed: u64, sets: &[Override]) -> String {
    let from_stdin = file == Path::new("-");
    let shown = if from_stdin {
        "scenario.toml".to_owned()
    } else {
        shell_word(&file.display().to_string())
    };
    let mut command = format!("outagelab run {shown} --seed {seed}");
    for set in sets {
        command.push_str(&format!(" --set {}", shell_word(&set.to_string())));
    }
    if from_stdin {
        command.push_str(" (the scenario came from standard input: save it as scenario.toml)");
    }
    command
}

/// The text of the scenario file at `file` and the file read with `sets` (holding the
/// searches `starts` names to their start); on a problem, says it and gives exit code 2.
pub(crate) fn read_scenario(
    file: &Path,
    sets: &[Override],
    starts: outagelab_scenario_file::Starts,
) -> Result<(String, ScenarioFile), ExitCode> {
    let text = std::fs::read_to_string(file).map_err(|error| {
        eprintln!("cannot read {}: {error}", file.display());
        ExitCode::from(2)
    })?;
    match outagelab_scenario_file::parse_checking(&text, file, sets, starts) {
        Ok(scenario) => Ok((text, scenario)),
        Err(diagnostics) => {
            eprintln!("{diagnostics}");
            Err(ExitCode::from(2))
        }
    }
}

/// `work` on `jobs` threads (all cores when `None`, or when a pool of that many cannot be
/// started: the result does not depend on the count).
pub(crate) fn on_threads<T: Send>(jobs: Option<usize>, work: impl FnOnce() -> T + Send) -> T {
    match jobs.and_then(|jobs| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(jobs)
            .build()
            .ok()
    }) {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// A wall-clock duration for a command-line budget: `90s`, `10m`, `1h`.
fn parse_wall_duration(text: &str) -> Result<std::time::Duration, String> {
    match outagelab_scenario_file::units::parse_duration(text) {
        Ok(0) => Err("a budget longer than zero".to_owned()),
        Ok(nanos) => Ok(std::time::Duration::from_nanos(nanos)),
        Err(message) => Err(message),
    }
}

/// The scenario file at `file` (its text, and the file read with `sets`) and the table a
/// command runs on, taken by `table`; on a problem, or when the file has no `[name]`
/// (`advice` says what to write in it), says it and gives exit code 2.
pub(crate) fn read_for<T>(
    file: &Path,
    sets: &[Override],
    name: &str,
    advice: &str,
    table: impl FnOnce(&ScenarioFile) -> Option<T>,
) -> Result<(String, ScenarioFile, T), ExitCode> {
    // `fit` and `tune` start from the file's values: their own table must hold them.
    let starts = outagelab_scenario_file::Starts {
        fit: name == "fit",
        tune: name == "tune",
    };
    let (text, scenario) = read_scenario(file, sets, starts)?;
    match table(&scenario) {
        Some(table) => Ok((text, scenario, table)),
        None => {
            eprintln!(
                "{}: has no [{name}] table: {advice} (docs/scenario-format.md, `[{name}]`)",
                file.display()
            );
            Err(ExitCode::from(2))
        }
    }
}

/// `word` as a shell reads it back: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a quote inside becomes `'\''`).
pub(crate) fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// Prints the file's warnings on standard error, each prefixed `warning:`. Under `--strict`
/// they refuse the file: returns whether it may go on.
fn warnings_pass(scenario: &ScenarioFile, strict: bool) -> bool {
    for warning in &scenario.warnings {
        eprintln!("warning: {warning}");
    }
    let count = scenario.warnings.len();
    if strict && count > 0 {
        let plural = if count == 1 { "" } else { "s" };
        eprintln!("--strict: {count} warning{plural}, so the file is refused");
        return false;
    }
    true
}

/// Set when an output is `-` (`--json -`, `--report -`, `--events -`, `--trace -`) and goes to
/// standard output: everything else goes to standard error then, so the output stays one
/// document.
static STDOUT_IS_JSON: AtomicBool = AtomicBool::new(false);

/// Sends everything [`say`] writes to standard error, for a command whose standard output
/// carries a document (`compare --json -`).
fn stdout_is_a_document() {
    STDOUT_IS_JSON.store(true, Ordering::Relaxed);
}

/// Reads `file` with its `--set` overrides for a command that writes `outputs`: refuses
/// outputs that would overwrite the file or each other, and sends everything but the JSON to
/// standard error when the JSON goes to standard output. `Err` is the exit code (2), the
/// reason printed.
fn open(file: &Path, outputs: Outputs, sets: &[Override]) -> Result<ScenarioFile, ExitCode> {
    if let Err(message) = check_outputs(file, outputs) {
        eprintln!("{message}");
        return Err(ExitCode::from(2));
    }
    let dash = Some(Path::new("-"));
    if [
        outputs.json,
        outputs.events,
        outputs.report,
        outputs.trace.map(|(path, _)| path),
    ]
    .contains(&dash)
    {
        STDOUT_IS_JSON.store(true, Ordering::Relaxed);
    }
    outagelab_scenario_file::load_with(file, sets).map_err(|diagnostics| {
        eprintln!("{diagnostics}");
        ExitCode::from(2)
    })
}

/// Refuses outputs that would overwrite the scenario file or each other, before anything runs.
fn check_outputs(file: &Path, outputs: Outputs) -> Result<(), String> {
    // Compared as absolute paths, with `.` and `..` resolved where the path exists.
    let absolute = |path: &Path| {
        std::fs::canonicalize(path)
            .or_else(|_| std::path::absolute(path))
            .unwrap_or_else(|_| path.to_owned())
    };
    let input = absolute(file);
    for (flag, dir) in [("--csv", outputs.csv), ("--plot", outputs.plot)] {
        if dir == Some(Path::new("-")) {
            return Err(format!(
                "{flag} - is refused: {flag} writes several files into a directory, and \
                 standard output holds one; give a directory name"
            ));
        }
    }
    let files = [
        ("--json", outputs.json),
        ("--events", outputs.events),
        ("--report", outputs.report),
        ("--trace", outputs.trace.map(|(path, _)| path)),
        ("--prometheus", outputs.prometheus),
    ];
    let dashes: Vec<&str> = files
        .iter()
        .filter(|(_, path)| *path == Some(Path::new("-")))
        .map(|(flag, _)| *flag)
        .collect();
    if let [first, second, ..] = dashes[..] {
        return Err(format!(
            "{first} - and {second} - both ask for standard output, which holds one output: \
             give one of them a file name"
        ));
    }
    let files: Vec<(&str, &Path, PathBuf)> = files
        .into_iter()
        .filter_map(|(flag, path)| Some((flag, path.filter(|p| *p != Path::new("-"))?)))
        .map(|(flag, path)| (flag, path, absolute(path)))
        .collect();
    for (index, (flag, path, absolute_path)) in files.iter().enumerate() {
        let shown = path.display();
        if *absolute_path == input {
            return Err(format!(
                "{flag} {shown} is the scenario file itself: writing there would destroy it"
            ));
        }
        if absolute_path.is_dir() {
            let dash = if *flag == "--json" {
                " (or - for standard output)"
            } else {
                ""
            };
            return Err(format!(
                "{flag} {shown} is a directory: give a file name{dash}"
            ));
        }
        if let Some((other, _, _)) = files[..index].iter().find(|(_, _, p)| p == absolute_path) {
            return Err(format!(
                "{flag} {shown} is where {other} writes: choose another name"
            ));
        }
        if let Some(dir) = outputs.csv {
            let dir = absolute(dir);
            for name in ["series.csv", "summary.csv"] {
                if *absolute_path == dir.join(name) {
                    return Err(format!(
                        "{flag} {shown} is where --csv writes {name}: choose another name"
                    ));
                }
            }
        }
        if let Some(dir) = outputs.plot
            && absolute_path.parent() == Some(absolute(dir).as_path())
            && absolute_path
                .extension()
                .is_some_and(|extension| extension == "png" || extension == "svg")
        {
            return Err(format!(
                "{flag} {shown} is in the --plot directory with a chart's extension: a chart \
                 may overwrite it"
            ));
        }
    }
    Ok(())
}

/// Writes to standard output (to standard error when it carries the JSON). A reader that went away (`outagelab run ... | head`) is not an
/// error worth a panic: the rest of the output is dropped and the exit code stays meaningful.
pub(crate) fn say(text: &str) {
    if STDOUT_IS_JSON.load(Ordering::Relaxed) {
        eprint!("{text}");
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
}

/// `text` and a new line on standard output, as [`say`] writes (a closed pipe, `| head`,
/// ends nothing with a panic).
pub(crate) fn say_line(text: &str) {
    say(&format!("{text}\n"));
}

/// Writes one kind of output for a report to a path; returns the files written.
type Writer = fn(&RunReport, &Path) -> Result<Vec<PathBuf>, String>;

/// Writes each output that has a path, saying what it wrote; `Err` is the exit code (2) after
/// the first that fails, its reason printed.
fn write_outputs(report: &RunReport, outputs: &[(Option<&Path>, Writer)]) -> Result<(), ExitCode> {
    for &(target, writer) in outputs {
        let Some(target) = target else { continue };
        say_written(writer(report, target))?;
    }
    Ok(())
}

/// Says on standard error what a writer wrote, or why it could not; `Err` is then the exit
/// code (2).
fn say_written<E: std::fmt::Display>(written: Result<Vec<PathBuf>, E>) -> Result<(), ExitCode> {
    match written {
        Ok(paths) => {
            for path in paths {
                eprintln!("wrote {}", path.display());
            }
            Ok(())
        }
        Err(error) => {
            eprintln!("{error}");
            Err(ExitCode::from(2))
        }
    }
}

/// Runs every variant on the file's seed, one after the other, in one memory budget: each
/// variant's report (series included) stays charged to it while the next runs, since `run`
/// keeps them all for its outputs. Fails with the first variant whose run broke an invariant.
pub(crate) fn simulate(
    scenario: &ScenarioFile,
    bugs: Bugs,
    quiet: bool,
    trace_every: Option<std::num::NonZeroU64>,
) -> Result<(RunReport, Vec<Trace>), (String, SimError)> {
    let count = scenario.variants.len();
    let budget = process_budget(scenario);
    let mut traces = Vec::new();
    let mut variants = Vec::new();
    for (index, variant) in scenario.variants.iter().enumerate() {
        let label = format!("variant {}/{count}: {}", index + 1, variant.name);
        let horizon = variant.scenario.limits.horizon.map(|h| h.as_nanos());
        let mut progress = Progress::new(label, horizon, quiet);
        let run = outagelab_sim::run_in_budget(
            &variant.scenario,
            bugs,
            &mut |now| progress.at(now.as_nanos()),
            trace_every,
            &budget,
        )
        .map_err(|error| (variant.name.clone(), error))?;
        progress.done();
        let mut report = run.report;
        report.sweep_x = variant.sweep_x;
        let log_bytes = report.log.capacity() * std::mem::size_of::<outagelab_report::LogEntry>();
        budget.hold(report.series.held_bytes() + log_bytes as u64);
        variants.push(report);
        traces.extend(run.trace);
    }
    let report = RunReport {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        sweep: scenario.sweep.clone(),
        slo: scenario.report.slo.clone(),
        observed: (scenario.observed.as_ref())
            .map(|spec| outagelab_report::observed::compare(spec, &variants)),
        variants,
    };
    Ok((report, traces))
}

/// The memory budget of a command that runs `scenario`: `[run] memory_max` bounds the whole
/// process (every variant, seed and thread), the largest a variant states when they differ
/// (each run is also held to its own).
pub fn process_budget(scenario: &ScenarioFile) -> outagelab_sim::MemoryBudget {
    let memory_max = (scenario.variants.iter())
        .map(|variant| variant.scenario.limits.memory_max)
        .max()
        .unwrap_or(outagelab_sim::scenario::RunLimits::MEMORY_MAX_DEFAULT);
    outagelab_sim::MemoryBudget::for_process(memory_max)
}

/// A progress bar on standard error for one variant's run: shown only on a terminal, only
/// once the run has taken a second (a quick run prints nothing), and never with `--quiet`. It
/// reads the wall clock, which the simulation never does: it cannot change a result.
struct Progress {
    bar: Option<indicatif::ProgressBar>,
    label: String,
    /// Nanoseconds of virtual time the run goes to, when it has a horizon.
    end_nanos: Option<u64>,
    started: std::time::Instant,
}

impl Progress {
    fn new(label: String, end_nanos: Option<u64>, quiet: bool) -> Progress {
        use std::io::IsTerminal;
        let shown = !quiet && std::io::stderr().is_terminal();
        Progress {
            bar: shown.then(indicatif::ProgressBar::hidden),
            label,
            end_nanos,
            started: std::time::Instant::now(),
        }
    }

    /// The run has reached `now_nanos` of virtual time.
    fn at(&mut self, now_nanos: u64) {
        let Some(bar) = &self.bar else {
            return;
        };
        if bar.is_hidden() {
            if self.started.elapsed() < std::time::Duration::from_secs(1) {
                return;
            }
            let style = match self.end_nanos {
                Some(end) => {
                    bar.set_length(end / 1_000_000);
                    "{msg} [{bar:30}] {pos}/{len} ms simulated, {elapsed}"
                }
                None => "{spinner} {msg}: {pos} ms simulated, {elapsed}",
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(style) {
                bar.set_style(style);
            }
            bar.set_message(self.label.clone());
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
        }
        bar.set_position(now_nanos / 1_000_000);
    }

    fn done(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// One expectation of one variant, checked.
pub struct Checked {
    pub variant: String,
    pub expectation: String,
    pub passed: bool,
    /// The metric's value (`no value` when it has none), or why it could not be read.
    pub actual: Result<String, String>,
    /// `file:line:column`.
    pub location: String,
}

/// Every expectation of every variant, in the file's order.
fn evaluate(scenario: &ScenarioFile, report: &RunReport) -> Vec<Checked> {
    let mut checked = Vec::new();
    for (variant, result) in scenario.variants.iter().zip(&report.variants) {
        for located in &variant.expectations {
            let expectation = &located.expectation;
            let (passed, actual) = match expectation.evaluate(&result.summary) {
                Ok(evaluation) => (
                    evaluation.passed,
                    Ok(evaluation
                        .actual
                        .map_or_else(|| "no value".to_owned(), |value| value.to_string())),
                ),
                Err(message) => (false, Err(message)),
            };
            checked.push(Checked {
                variant: variant.name.clone(),
                expectation: expectation.to_string(),
                passed,
                actual,
                location: located.location.to_string(),
            });
        }
    }
    checked
}

/// Prints a count of the expectations that held and every one that did not; returns whether
/// all held.
fn check_expectations(checked: &[Checked]) -> bool {
    let failures: Vec<&Checked> = checked.iter().filter(|c| !c.passed).collect();
    if !checked.is_empty() {
        let held = checked.len() - failures.len();
        let mut text = format!("\nexpectations: {held} held, {} failed\n", failures.len());
        for failure in &failures {
            let (variant, expectation) = (&failure.variant, &failure.expectation);
            let line = match &failure.actual {
                Ok(actual) => format!("  FAIL  {variant}: {expectation} (actual {actual})"),
                Err(message) => format!("  FAIL  {variant}: {expectation}: {message}"),
            };
            text.push_str(&format!("{line}  [{}]\n", failure.location));
        }
        say(&text);
    }
    failures.is_empty()
}

pub(crate) fn write_json(report: &RunReport, path: &Path) -> Result<Vec<PathBuf>, String> {
    if let Some(parent) = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && path != Path::new("-"))
    {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    stream_json(path, |out| write::write_json(report, out))?;
    Ok(written(path))
}

/// Writes a review page: `page` is given the format the path asks for and the charts of
/// `report` with the run's chosen metrics (HTML inlines them, Markdown names them).
fn write_page(
    path: &Path,
    page: impl FnOnce(page::Format, &[(&'static str, String)]) -> String,
    (report, metrics): (&RunReport, &[String]),
) -> Result<(), String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let format = page::Format::for_path(path);
    let charts = outagelab_plots::svg_charts(report, metrics)
        .map_err(|e| format!("cannot draw the charts for {}: {e}", path.display()))?;
    put(path, page(format, &charts).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes `bytes` to `path`, or to standard output when it is `-` (`open` has then sent
/// everything else to standard error).
fn put(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if path == Path::new("-") {
        let mut stdout = std::io::stdout().lock();
        // A reader that went away (`| head`) is not an error worth reporting.
        let _ = stdout.write_all(bytes).and_then(|()| stdout.flush());
        return Ok(());
    }
    write::replace_file(path, bytes)
}

/// What a writer says it wrote: nothing for standard output.
fn written(path: &Path) -> Vec<PathBuf> {
    if path == Path::new("-") {
        Vec::new()
    } else {
        vec![path.to_owned()]
    }
}

/// `--prometheus`: the series as Prometheus's `query_range` answer, timed from the file's
/// `[observed] start`, else from the Unix epoch: an observed file for `[observed]`.
fn write_prometheus(report: &RunReport, path: &Path) -> Result<Vec<PathBuf>, String> {
    let start = report.observed.as_ref().map_or(0, |o| o.start_unix_ms);
    let text = outagelab_report::observed::to_prometheus(report, &[start])
        .map_err(|why| format!("cannot write {}: {why}", path.display()))?;
    put(path, text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(written(path))
}

fn write_events(report: &RunReport, path: &Path) -> Result<Vec<PathBuf>, String> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    put(path, write::events_jsonl(report).as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(written(path))
}

fn write_csv(report: &RunReport, dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let files = [
        (dir.join("series.csv"), write::series_csv(report)),
        (dir.join("summary.csv"), write::summary_csv(report)),
    ];
    let mut written = Vec::new();
    for (path, text) in files {
        write::replace_file(&path, text.as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// Writes the charts of `report`; the sweep chart draws `metrics` (the run's `--metric`, else
/// the file's `[report] metrics`).
fn write_plots(report: &RunReport, metrics: &[String], dir: &Path) -> Result<Vec<PathBuf>, String> {
    outagelab_plots::write_charts(report, metrics, dir).map_err(|e| e.to_string())
}

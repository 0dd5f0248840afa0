//! The instruction-count gate's workload (`.ci/instructions`): the seed-003 bench's scenario
//! (`benches/seed003/`) run once by the engine, metrics and monitors on, at the number of
//! requests and the database latency shape given:
//!
//! ```text
//! cargo run --example instructions -- uniform 100000
//! ```
//!
//! Under `valgrind --tool=callgrind` its instruction count is the engine's cost, which the
//! machine's load does not move; `.ci/instructions` runs it at two sizes and divides the
//! difference by the difference in requests, so that what does not grow with the run (reading
//! the file, building the report's shape) falls out.

#[path = "../benches/seed003/mod.rs"]
mod seed003;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (shape, requests) = match args.as_slice() {
        [shape, requests] => match requests.parse::<u64>() {
            Ok(requests) if requests > 0 => (shape.as_str(), requests),
            _ => return usage(&format!("not a number of requests: {requests}")),
        },
        _ => return usage("expected two arguments"),
    };
    let Some((_, scenario)) = seed003::cases(requests)
        .into_iter()
        .find(|(name, _)| *name == shape)
    else {
        return usage(&format!("no latency shape {shape}"));
    };
    let report = match outagelab_sim::run(&scenario) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("instructions: the run failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let summary = &report.summary;
    if summary.requests != requests || summary.unfinished != 0 {
        eprintln!(
            "instructions: {} requests ran and {} did not end, for {requests} asked",
            summary.requests, summary.unfinished
        );
        return ExitCode::FAILURE;
    }
    println!("{shape} {requests}: {:?}", summary.outcomes);
    ExitCode::SUCCESS
}

fn usage(why: &str) -> ExitCode {
    eprintln!("instructions: {why}; usage: instructions <uniform|exponential> <requests>");
    ExitCode::from(2)
}

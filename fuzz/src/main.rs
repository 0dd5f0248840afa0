//! `outagelab-fuzz`: runs a campaign of generated and mutated scenario files.
//!
//! ```text
//! outagelab-fuzz --inputs N --seed S --jobs J --out DIR [--events-max E]
//!                [--input-events-max T] [--time-max-s S] [--memory-cap-mib M] [--timeout-s T] [--minimise-max K] [--minimise-tries C]
//! outagelab-fuzz --show I --seed S        # prints input I of seed S
//! ```
//!
//! Exit status: 0 when the campaign found nothing, 1 when it has findings, 2 on a usage or
//! I/O error. `--worker` is the campaign's own worker mode (see `campaign.rs`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use outagelab_fuzz::campaign::{self, Config};
use outagelab_fuzz::run::{Class, Harness};

const USAGE: &str = "usage: outagelab-fuzz --inputs N --seed S [--jobs J] [--out DIR] \
[--events-max E] [--input-events-max T] [--time-max-s S] [--memory-cap-mib M] [--timeout-s T] [--minimise-max K] [--minimise-tries C] [--quiet]
       outagelab-fuzz --show I --seed S";

fn main() -> ExitCode {
    match main_with(std::env::args().skip(1).collect()) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("{message}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}

fn main_with(args: Vec<String>) -> Result<ExitCode, String> {
    let mut flags = std::collections::BTreeMap::new();
    let mut switches = Vec::new();
    let mut words = args.into_iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--worker" | "--quiet" => switches.push(word),
            flag if flag.starts_with("--") => {
                let value = words
                    .next()
                    .ok_or_else(|| format!("{flag} needs a value"))?;
                flags.insert(flag.to_owned(), value);
            }
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    let number = |flag: &str, default: u64| -> Result<u64, String> {
        flags.get(flag).map_or(Ok(default), |value| {
            value
                .parse()
                .map_err(|_| format!("{flag}: not a whole number: {value}"))
        })
    };
    let seed = number("--seed", 1)?;
    let defaults = Harness::default();
    let harness = Harness {
        events_max: number("--events-max", defaults.events_max)?,
        input_events_max: number("--input-events-max", defaults.input_events_max)?,
        time_max_s: number("--time-max-s", defaults.time_max_s)?,
    };
    if switches.iter().any(|s| s == "--worker") {
        let replay = flags.get("--replay").map(PathBuf::from);
        let code = campaign::worker(
            seed,
            number("--from", 0)?,
            number("--to", 0)?,
            replay.as_deref(),
            harness,
        );
        return Ok(ExitCode::from(code as u8));
    }
    if let Some(index) = flags.get("--show") {
        let index = index
            .parse()
            .map_err(|_| format!("--show: not a whole number: {index}"))?;
        let (source, text) = campaign::input(seed, index);
        eprintln!("input {index} of seed {seed}: {source}");
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let known = [
        "--inputs",
        "--seed",
        "--jobs",
        "--out",
        "--events-max",
        "--input-events-max",
        "--time-max-s",
        "--memory-cap-mib",
        "--timeout-s",
        "--minimise-max",
        "--minimise-tries",
    ];
    if let Some(unknown) = flags.keys().find(|flag| !known.contains(&flag.as_str())) {
        return Err(format!("unknown flag {unknown}"));
    }
    let config = Config {
        seed,
        inputs: number("--inputs", 1000)?,
        jobs: number("--jobs", 2)?.max(1) as usize,
        out: PathBuf::from(
            flags
                .get("--out")
                .cloned()
                .unwrap_or_else(|| "target/fuzz".to_owned()),
        ),
        harness,
        memory_cap_mib: number("--memory-cap-mib", 4096)?,
        timeout: Duration::from_secs(number("--timeout-s", 30)?),
        minimise_max: number("--minimise-max", 3)? as usize,
        minimise_tries: number("--minimise-tries", 500)? as usize,
        exe: std::env::current_exe().map_err(|e| format!("cannot find this binary: {e}"))?,
        progress: !switches.iter().any(|s| s == "--quiet"),
    };
    let report = campaign::run_campaign(&config).map_err(|e| format!("campaign failed: {e}"))?;
    print!("{}", report.to_text(&config));
    eprintln!(
        "wrote {} and {}",
        config.out.join("report.txt").display(),
        config.out.join("report.json").display()
    );
    let found: u64 = Class::ALL
        .iter()
        .filter(|class| class.is_finding())
        .map(|class| report.count(*class))
        .sum();
    Ok(if found == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

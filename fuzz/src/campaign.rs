//! A campaign: inputs `0..n` of a seed, each run in a worker process so that an abort (a
//! failed allocation, a stack overflow) or a hang costs one input, not the campaign.
//!
//! The driver hands out batches of input indices to at most `jobs` workers at once. A worker
//! (this binary again, `--worker`, under `ulimit -v` when there is a memory cap) makes each
//! input from the seed and its index, runs it in its own process ([`crate::run`]), and prints
//! `start I` before and `done I CLASS DETAIL` after. When a worker dies, the input it had
//! started is an `abort`; when one prints nothing for `timeout`, it is killed and the input is
//! a `timeout`; either way a new worker takes the rest of the batch. Input `i` is a function
//! of `(seed, i)` only, so the counts and findings are the same whatever `jobs` is (short of a
//! timeout, which depends on the machine).
//!
//! Each finding (see [`Class::is_finding`]) is minimised with [`crate::minimise()`], every
//! candidate run in a worker too, keeping candidates whose failure has the same signature; the
//! minimised input goes to `OUT/findings/` with a header saying how to replay it.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::generate::generate;
use crate::minimise::minimise;
use crate::mutate::{BUNDLED, mutate};
use crate::rng::{Rng, mix};
use crate::run::{Class, Harness, Outcome};

/// Where input `index` of `seed` comes from: `generated`, or `mutated/<bundled file>`; and
/// its text.
pub fn input(seed: u64, index: u64) -> (String, String) {
    let mut rng = Rng::new(seed, index, 0);
    let input_seed = mix(seed ^ mix(index));
    if rng.chance(50) {
        ("generated".to_owned(), generate(input_seed))
    } else {
        let (name, text) = *rng.pick(&BUNDLED);
        (
            format!("mutated/{}", name.trim_end_matches(".toml")),
            mutate(input_seed, text),
        )
    }
}

/// What a campaign runs and where it writes.
#[derive(Clone, Debug)]
pub struct Config {
    pub seed: u64,
    pub inputs: u64,
    pub jobs: usize,
    pub out: PathBuf,
    pub harness: Harness,
    /// The workers' address-space cap (`ulimit -v`), in MiB; 0 for none.
    pub memory_cap_mib: u64,
    /// An input that runs longer is killed and counted a `timeout`.
    pub timeout: Duration,
    /// Findings minimised per signature (the rest are written as found).
    pub minimise_max: usize,
    /// Candidates the minimiser may run per finding.
    pub minimise_tries: usize,
    /// This binary, which the workers run.
    pub exe: PathBuf,
    /// Progress lines on standard error.
    pub progress: bool,
}

/// One input's result.
#[derive(Clone, Debug)]
pub struct Record {
    pub index: u64,
    pub outcome: Outcome,
}

/// A finding as written.
#[derive(Clone, Debug)]
pub struct Finding {
    pub index: u64,
    pub source: String,
    pub outcome: Outcome,
    pub file: PathBuf,
    pub minimised: bool,
    pub bytes_found: usize,
    pub bytes_minimised: usize,
}

/// What a campaign found; also written to `OUT/report.json` and `OUT/report.txt`.
#[derive(Clone, Debug)]
pub struct Report {
    pub seed: u64,
    pub inputs: u64,
    pub classes: BTreeMap<Class, u64>,
    /// By source (`generated`, `mutated/<file>`), by class.
    pub sources: BTreeMap<String, BTreeMap<Class, u64>>,
    pub findings: Vec<Finding>,
    /// Running the inputs, and minimising the findings afterwards (aborts are slow to
    /// minimise: each candidate that still aborts first allocates up to the cap).
    pub seconds: f64,
    pub minimise_seconds: f64,
}

impl Report {
    pub fn count(&self, class: Class) -> u64 {
        self.classes.get(&class).copied().unwrap_or(0)
    }

    /// The report as JSON: everything but the time it took, so the same seed gives the same
    /// document.
    pub fn to_json(&self, config: &Config) -> String {
        let names = |counts: &BTreeMap<Class, u64>| {
            Class::ALL
                .iter()
                .map(|class| (class.name(), counts.get(class).copied().unwrap_or(0)))
                .collect::<BTreeMap<_, _>>()
        };
        let sources: BTreeMap<&str, BTreeMap<&str, u64>> = self
            .sources
            .iter()
            .map(|(source, counts)| (source.as_str(), names(counts)))
            .collect();
        let findings: Vec<_> = self
            .findings
            .iter()
            .map(|f| {
                json!({
                    "index": f.index,
                    "source": f.source,
                    "class": f.outcome.class.name(),
                    "detail": f.outcome.detail,
                    "file": f.file.display().to_string(),
                    "minimised": f.minimised,
                    "bytes_found": f.bytes_found,
                    "bytes_minimised": f.bytes_minimised,
                })
            })
            .collect();
        let document = json!({
            "seed": self.seed,
            "inputs": self.inputs,
            "harness": {
                "events_max": config.harness.events_max,
                "input_events_max": config.harness.input_events_max,
                "time_max_s": config.harness.time_max_s,
                "memory_cap_mib": config.memory_cap_mib,
                "timeout_s": config.timeout.as_secs_f64(),
            },
            "classes": names(&self.classes),
            "sources": sources,
            "findings": findings,
        });
        serde_json::to_string_pretty(&document).expect("a JSON value serialises")
    }

    pub fn to_text(&self, config: &Config) -> String {
        let mut text = format!(
            "outagelab-fuzz: seed {}, {} inputs in {:.1} s ({:.0} inputs/s, {} jobs), findings \
             minimised in {:.1} s\n\
             harness: events_max {} per variant and {} per input, time_max {} s, address space {} \
             MiB per worker, timeout {} s\n\n",
            self.seed,
            self.inputs,
            self.seconds,
            self.inputs as f64 / self.seconds.max(1e-9),
            config.jobs,
            self.minimise_seconds,
            config.harness.events_max,
            config.harness.input_events_max,
            config.harness.time_max_s,
            config.memory_cap_mib,
            config.timeout.as_secs_f64(),
        );
        text.push_str(&format!("{:<32}", "source"));
        for class in Class::ALL {
            text.push_str(&format!(" {:>9}", short(class)));
        }
        text.push('\n');
        let mut rows: Vec<(String, &BTreeMap<Class, u64>)> = self
            .sources
            .iter()
            .map(|(source, counts)| (source.clone(), counts))
            .collect();
        rows.push(("all".to_owned(), &self.classes));
        for (source, counts) in rows {
            text.push_str(&format!("{source:<32}"));
            for class in Class::ALL {
                text.push_str(&format!(" {:>9}", counts.get(&class).copied().unwrap_or(0)));
            }
            text.push('\n');
        }
        text.push_str(&format!("\nfindings: {}\n", self.findings.len()));
        for finding in &self.findings {
            text.push_str(&format!(
                "  input {} ({}): {} {}\n    {} ({} bytes{})\n",
                finding.index,
                finding.source,
                finding.outcome.class.name(),
                finding.outcome.detail,
                finding.file.display(),
                finding.bytes_minimised,
                if finding.minimised {
                    format!(", minimised from {}", finding.bytes_found)
                } else {
                    ", not minimised".to_owned()
                },
            ));
        }
        text
    }
}

/// A class's column heading.
fn short(class: Class) -> &'static str {
    match class {
        Class::ExpectationFailed => "expect",
        other => other.name(),
    }
}

/// Runs the campaign and writes its report and findings under `config.out`.
pub fn run_campaign(config: &Config) -> std::io::Result<Report> {
    std::fs::create_dir_all(config.out.join("findings"))?;
    let started = Instant::now();
    let batch = (config.inputs / (config.jobs as u64 * 8)).clamp(1, 2_000);
    let batches: VecDeque<(u64, u64)> = (0..config.inputs)
        .step_by(batch as usize)
        .map(|from| (from, (from + batch).min(config.inputs)))
        .collect();
    let batches = Mutex::new(batches);
    let records = Mutex::new(Vec::new());
    let done = AtomicU64::new(0);
    let failed: Mutex<Option<std::io::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..config.jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let next = batches.lock().expect("no panic holds it").pop_front();
                    let Some((from, to)) = next else { return };
                    let args = worker_args(config, from, to);
                    match run_workers(config, &args, from, to, &done) {
                        Ok(found) => records.lock().expect("no panic holds it").extend(found),
                        Err(error) => {
                            *failed.lock().expect("no panic holds it") = Some(error);
                            return;
                        }
                    }
                }
            });
        }
        if config.progress {
            let mut last = Instant::now();
            while done.load(Ordering::Relaxed) < config.inputs
                && failed.lock().expect("no panic holds it").is_none()
            {
                std::thread::sleep(Duration::from_millis(200));
                if last.elapsed() >= Duration::from_secs(5) {
                    last = Instant::now();
                    let count = done.load(Ordering::Relaxed);
                    let rate = count as f64 / started.elapsed().as_secs_f64();
                    let findings = records
                        .lock()
                        .expect("no panic holds it")
                        .iter()
                        .filter(|r: &&Record| r.outcome.class.is_finding())
                        .count();
                    eprintln!(
                        "fuzz: {count}/{} inputs, {rate:.0}/s, {findings} findings",
                        config.inputs
                    );
                }
            }
        }
    });
    if let Some(error) = failed.into_inner().expect("no panic holds it") {
        return Err(error);
    }
    let mut records = records.into_inner().expect("no panic holds it");
    records.sort_by_key(|record| record.index);
    let mut classes = BTreeMap::new();
    let mut sources: BTreeMap<String, BTreeMap<Class, u64>> = BTreeMap::new();
    for record in &records {
        let (source, _) = input(config.seed, record.index);
        *classes.entry(record.outcome.class).or_insert(0) += 1;
        *sources
            .entry(source)
            .or_default()
            .entry(record.outcome.class)
            .or_insert(0) += 1;
    }
    let seconds = started.elapsed().as_secs_f64();
    let findings = write_findings(config, &records)?;
    let report = Report {
        seed: config.seed,
        inputs: config.inputs,
        classes,
        sources,
        findings,
        seconds,
        minimise_seconds: started.elapsed().as_secs_f64() - seconds,
    };
    std::fs::write(config.out.join("report.json"), report.to_json(config))?;
    std::fs::write(config.out.join("report.txt"), report.to_text(config))?;
    Ok(report)
}

fn worker_args(config: &Config, from: u64, to: u64) -> Vec<String> {
    vec![
        "--worker".into(),
        "--seed".into(),
        config.seed.to_string(),
        "--from".into(),
        from.to_string(),
        "--to".into(),
        to.to_string(),
    ]
    .into_iter()
    .chain(harness_args(&config.harness))
    .collect()
}

/// The harness's flags, as a worker takes them.
fn harness_args(harness: &Harness) -> Vec<String> {
    vec![
        "--events-max".into(),
        harness.events_max.to_string(),
        "--input-events-max".into(),
        harness.input_events_max.to_string(),
        "--time-max-s".into(),
        harness.time_max_s.to_string(),
    ]
}

/// Starts this binary with `args`, under the address-space cap.
fn spawn(config: &Config, args: &[String]) -> std::io::Result<Child> {
    let mut command = if config.memory_cap_mib > 0 {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(format!(
                "ulimit -v {} && exec \"$0\" \"$@\"",
                config.memory_cap_mib * 1024
            ))
            .arg(&config.exe);
        command
    } else {
        Command::new(&config.exe)
    };
    // A worker's last words (an abort's message) without a backtrace after them.
    command
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
}

/// Runs inputs `from..to` in workers (`args` for the first; each replacement starts after the
/// input its predecessor died on or hung in) and returns every input's record.
fn run_workers(
    config: &Config,
    args: &[String],
    from: u64,
    to: u64,
    done: &AtomicU64,
) -> std::io::Result<Vec<Record>> {
    let mut records = Vec::new();
    let mut next = from;
    let mut args = args.to_vec();
    let mut silent_deaths = 0;
    while next < to {
        let mut child = spawn(config, &args)?;
        let (sender, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if sender.send(line).is_err() {
                    return;
                }
            }
        });
        let stderr = child.stderr.take().expect("piped");
        let errors = std::thread::spawn(move || {
            // The last lines only: an abort's message is the last thing a worker says.
            let mut last = VecDeque::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("note: run with `RUST_BACKTRACE") {
                    continue;
                }
                if last.len() == 4 {
                    last.pop_front();
                }
                last.push_back(line);
            }
            last.into_iter().collect::<Vec<String>>().join(" | ")
        });
        let mut current = None;
        let lost = loop {
            match lines.recv_timeout(config.timeout) {
                Ok(line) => {
                    let mut words = line.splitn(4, ' ');
                    match (
                        words.next(),
                        words.next().and_then(|i| i.parse::<u64>().ok()),
                    ) {
                        (Some("start"), Some(index)) => current = Some(index),
                        (Some("done"), Some(index)) => {
                            let class = words.next().and_then(Class::parse);
                            let detail = words.next().unwrap_or("").to_owned();
                            let Some(class) = class else {
                                return Err(std::io::Error::other(format!(
                                    "a worker said `{line}`"
                                )));
                            };
                            records.push(Record {
                                index,
                                outcome: Outcome { class, detail },
                            });
                            done.fetch_add(1, Ordering::Relaxed);
                            next = index + 1;
                            current = None;
                        }
                        _ => {
                            return Err(std::io::Error::other(format!("a worker said `{line}`")));
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let index = current.unwrap_or(next);
                    break Some((
                        index,
                        Outcome {
                            class: Class::Timeout,
                            detail: format!("no answer in {} s", config.timeout.as_secs_f64()),
                        },
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = child.wait()?;
                    let said = errors.join().unwrap_or_default();
                    if next >= to && current.is_none() && status.success() {
                        break None;
                    }
                    let Some(index) = current else {
                        silent_deaths += 1;
                        if silent_deaths > 3 {
                            return Err(std::io::Error::other(format!(
                                "workers die before their first input ({status}): {said}"
                            )));
                        }
                        break None;
                    };
                    break Some((
                        index,
                        Outcome {
                            class: Class::Abort,
                            detail: format!("{}: {said}", describe(status)),
                        },
                    ));
                }
            }
        };
        let _ = reader.join();
        if let Some((index, outcome)) = lost {
            records.push(Record { index, outcome });
            done.fetch_add(1, Ordering::Relaxed);
            next = index + 1;
        }
        if let Some(position) = args.iter().position(|a| a == "--from") {
            args[position + 1] = next.to_string();
        }
    }
    Ok(records)
}

/// How a worker ended: its signal, or its exit code.
fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(6) => "SIGABRT".to_owned(),
        Some(9) => "SIGKILL".to_owned(),
        Some(11) => "SIGSEGV".to_owned(),
        Some(signal) => format!("signal {signal}"),
        None => format!("exit {}", status.code().unwrap_or(-1)),
    }
}

/// Runs `text` once in a worker, as the minimiser's candidates run.
pub fn run_isolated(config: &Config, text: &str, scratch: &Path) -> std::io::Result<Outcome> {
    std::fs::write(scratch, text)?;
    let mut args = vec![
        "--worker".into(),
        "--replay".into(),
        scratch.display().to_string(),
    ];
    args.extend(harness_args(&config.harness));
    let done = AtomicU64::new(0);
    let records = run_workers(config, &args, 0, 1, &done)?;
    Ok(records
        .into_iter()
        .next()
        .map(|record| record.outcome)
        .expect("one record for one input"))
}

/// Minimises the first `minimise_max` findings of each signature and writes every finding.
fn write_findings(config: &Config, records: &[Record]) -> std::io::Result<Vec<Finding>> {
    let directory = config.out.join("findings");
    let scratch = config.out.join("candidate.toml");
    let mut per_signature: BTreeMap<String, usize> = BTreeMap::new();
    let mut findings = Vec::new();
    for record in records.iter().filter(|r| r.outcome.class.is_finding()) {
        let (source, text) = input(config.seed, record.index);
        let signature = record.outcome.signature();
        let seen = per_signature.entry(signature.clone()).or_insert(0);
        *seen += 1;
        let minimisable = record.outcome.class != Class::Timeout;
        let minimised = if minimisable && *seen <= config.minimise_max {
            if config.progress {
                eprintln!("fuzz: minimising input {} ({signature})", record.index);
            }
            let mut error = None;
            let mut still_fails = |candidate: &str| match run_isolated(config, candidate, &scratch)
            {
                Ok(outcome) => outcome.signature() == signature,
                Err(e) => {
                    error.get_or_insert(e);
                    false
                }
            };
            let small = minimise(&text, &mut still_fails, config.minimise_tries);
            if let Some(error) = error {
                return Err(error);
            }
            Some(small)
        } else {
            None
        };
        let _ = std::fs::remove_file(&scratch);
        let file = directory.join(format!(
            "{:08}-{}.toml",
            record.index,
            record.outcome.class.name()
        ));
        let body = minimised.as_deref().unwrap_or(&text);
        let mut out = std::fs::File::create(&file)?;
        writeln!(
            out,
            "# outagelab-fuzz finding: {} {}\n# seed {}, input {} ({}){}\n\
             # replay: outagelab run {} {}",
            record.outcome.class.name(),
            record.outcome.detail.replace('\n', " "),
            config.seed,
            record.index,
            source,
            if minimised.is_some() {
                format!(", minimised from {} bytes", text.len())
            } else {
                String::new()
            },
            file.display(),
            config.harness.replay_flags(),
        )?;
        out.write_all(body.as_bytes())?;
        findings.push(Finding {
            index: record.index,
            source,
            outcome: record.outcome.clone(),
            file,
            minimised: minimised.is_some(),
            bytes_found: text.len(),
            bytes_minimised: body.len(),
        });
    }
    Ok(findings)
}

/// The worker: runs inputs `from..to` of `seed` (or the file `replay`, as input 0), one line
/// before and one after each.
pub fn worker(seed: u64, from: u64, to: u64, replay: Option<&Path>, harness: Harness) -> i32 {
    let stdout = std::io::stdout();
    let say = |line: String| {
        let mut out = stdout.lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    if let Some(path) = replay {
        let text = match std::fs::read(path) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(error) => {
                eprintln!("cannot read {}: {error}", path.display());
                return 2;
            }
        };
        say("start 0".into());
        let outcome = crate::run::run_caught(&text, harness);
        say(format!(
            "done 0 {} {}",
            outcome.class.name(),
            one_line(&outcome.detail)
        ));
        return 0;
    }
    for index in from..to {
        say(format!("start {index}"));
        let (_, text) = input(seed, index);
        let outcome = crate::run::run_caught(&text, harness);
        say(format!(
            "done {index} {} {}",
            outcome.class.name(),
            one_line(&outcome.detail)
        ));
    }
    0
}

fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

//! One input run in this process, as `outagelab run FILE --json` runs it: read and validate
//! the file, simulate every variant, score them against `[observed]`, write the JSON report
//! (and the CSVs and event lines, so their writers run too), judge the expectations, and
//! check the report's invariants. A
//! panic is caught and becomes the input's class; an abort or a hang cannot be caught here,
//! which is why the campaign runs inputs in worker processes (`campaign.rs`).

use std::path::Path;
use std::sync::Mutex;

use outagelab_model::time::SimTime;
use outagelab_report::{RunReport, write};
use outagelab_sim::SimError;

use crate::check::check;

/// How an input ended. The order is the campaign report's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Refused by the reader with a located message (`outagelab run` exits 2).
    Rejected,
    /// Ran; every expectation held (exit 0).
    Ok,
    /// Ran; an expectation failed (exit 1).
    ExpectationFailed,
    /// A variant was stopped by a run budget: time, events or memory (exit 1).
    Budget,
    /// The simulator's own monitors stopped a run (`SimError`; exit 1): a finding.
    Monitor,
    /// The report broke an invariant of [`crate::check()`]: a finding.
    Violation,
    /// The run panicked: a finding.
    Panic,
    /// The worker process died (a signal, such as SIGABRT on a failed allocation): a finding.
    Abort,
    /// The input ran longer than the campaign's timeout: a finding.
    Timeout,
}

impl Class {
    pub const ALL: [Class; 9] = [
        Class::Rejected,
        Class::Ok,
        Class::ExpectationFailed,
        Class::Budget,
        Class::Monitor,
        Class::Violation,
        Class::Panic,
        Class::Abort,
        Class::Timeout,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::Rejected => "rejected",
            Class::Ok => "ok",
            Class::ExpectationFailed => "expectation_failed",
            Class::Budget => "budget",
            Class::Monitor => "monitor",
            Class::Violation => "violation",
            Class::Panic => "panic",
            Class::Abort => "abort",
            Class::Timeout => "timeout",
        }
    }

    pub fn parse(name: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|class| class.name() == name)
    }

    /// Whether an input of this class is a finding: something that must never happen.
    pub fn is_finding(self) -> bool {
        matches!(
            self,
            Class::Monitor | Class::Violation | Class::Panic | Class::Abort | Class::Timeout
        )
    }
}

/// An input's class, and what says why (the first error, violation or panic message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub class: Class,
    pub detail: String,
}

impl Outcome {
    fn new(class: Class, detail: impl Into<String>) -> Outcome {
        Outcome {
            class,
            detail: detail.into(),
        }
    }

    /// What two failures must share to be the same failure, for the minimiser: the class and
    /// the detail's first word (an invariant's name, a panic's location, a monitor's name).
    pub fn signature(&self) -> String {
        let first = self.detail.split_whitespace().next().unwrap_or("");
        match self.class {
            Class::Abort | Class::Timeout => self.class.name().to_owned(),
            _ => format!("{} {first}", self.class.name()),
        }
    }
}

/// What the campaign imposes on every input, beyond what the file says, so that a mutant of
/// a long bundled run ends in a budget in milliseconds instead of running for seconds. None
/// changes a run it lets finish: a run either ends as the file says or ends `budget`.
#[derive(Clone, Copy, Debug)]
pub struct Harness {
    /// Each variant's `events_max` is at most this (the file's own when lower).
    pub events_max: u64,
    /// Once the variants run so far processed this many events in all, the rest are not run
    /// and the input is `budget` (a file of 10 variants would otherwise cost ten times one).
    pub input_events_max: u64,
    /// Each variant's `time_max` is at most this many seconds of virtual time (the file's own
    /// when lower); 0 leaves it. A horizon of days at 100 ms buckets costs tens of seconds of
    /// series today (issue 21, item 1).
    pub time_max_s: u64,
}

impl Harness {
    /// The `--set` flags that give `outagelab run` the same per-variant caps.
    pub fn replay_flags(&self) -> String {
        let mut flags = format!("--set run.events_max={}", self.events_max);
        if self.time_max_s > 0 {
            flags.push_str(&format!(" --set 'run.time_max=\"{}s\"'", self.time_max_s));
        }
        flags
    }
}

impl Default for Harness {
    fn default() -> Self {
        Harness {
            events_max: 100_000,
            input_events_max: 500_000,
            time_max_s: 3_600,
        }
    }
}

/// Runs `text` and classifies it; panics propagate (see [`run_caught`]).
pub fn run_input(text: &str, harness: Harness) -> Outcome {
    let path = Path::new(crate::mutate::SCENARIOS).join("input.toml");
    let file = match outagelab_scenario_file::parse(text, &path) {
        Ok(file) => file,
        Err(diagnostics) => {
            let message = diagnostics.to_string();
            let first = message.lines().next().unwrap_or("").to_owned();
            return Outcome::new(Class::Rejected, first);
        }
    };
    let mut variants = Vec::new();
    let mut events = 0;
    let mut skipped = None;
    for variant in &file.variants {
        if events >= harness.input_events_max {
            skipped = Some(variant.name.clone());
            break;
        }
        let mut scenario = variant.scenario.clone();
        scenario.limits.events_max = scenario.limits.events_max.min(harness.events_max);
        if harness.time_max_s > 0 {
            let time_max = SimTime::from_nanos(harness.time_max_s.saturating_mul(1_000_000_000));
            scenario.limits.time_max = scenario.limits.time_max.min(time_max);
        }
        match outagelab_sim::run(&scenario) {
            Ok(mut report) => {
                report.sweep_x = variant.sweep_x;
                events += report.events;
                variants.push(report);
            }
            Err(error @ SimError::InvariantViolated(_))
            | Err(error @ SimError::BrokenReference(_)) => {
                return Outcome::new(
                    Class::Monitor,
                    format!("{error} (variant \"{}\")", variant.name),
                );
            }
        }
    }
    let report = RunReport {
        scenario: file.name.clone(),
        seed: file.seed,
        sweep: file.sweep.clone(),
        slo: file.report.slo.clone(),
        observed: (file.observed.as_ref())
            .map(|spec| outagelab_report::observed::compare(spec, &variants)),
        variants,
    };
    let json = write::to_json(&report);
    // The other writers `run` has, for their panics; their text is not checked.
    let _ = (
        write::series_csv(&report),
        write::summary_csv(&report),
        write::events_jsonl(&report),
    );
    if let Some(violation) = check(&json).into_iter().next() {
        return Outcome::new(Class::Violation, violation.to_string());
    }
    if let Some(name) = skipped {
        return Outcome::new(
            Class::Budget,
            format!("input_events_max (variant \"{name}\" and those after it not run)"),
        );
    }
    if let Some(stopped) = report.variants.iter().find(|v| v.verdict.is_budget()) {
        return Outcome::new(
            Class::Budget,
            format!("{} (variant \"{}\")", stopped.verdict.name(), stopped.name),
        );
    }
    for (variant, result) in file.variants.iter().zip(&report.variants) {
        for located in &variant.expectations {
            let held = located
                .expectation
                .evaluate(&result.summary)
                .is_ok_and(|evaluation| evaluation.passed);
            if !held {
                return Outcome::new(
                    Class::ExpectationFailed,
                    format!("{} (variant \"{}\")", located.expectation, variant.name),
                );
            }
        }
    }
    Outcome::new(Class::Ok, "")
}

/// The last panic's message and location, which the hook [`run_caught`] installs keeps.
static PANIC: Mutex<Option<String>> = Mutex::new(None);

/// [`run_input`] with a panic caught and classified: its location first, then its message.
/// Installs a panic hook that keeps the message instead of printing it.
pub fn run_caught(text: &str, harness: Harness) -> Outcome {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_default();
            let location = info
                .location()
                .map_or_else(String::new, |l| format!("{}:{}", l.file(), l.line()));
            let line = format!("{location} {}", message.replace('\n', " "));
            *PANIC.lock().unwrap_or_else(|e| e.into_inner()) = Some(line);
        }));
    });
    match std::panic::catch_unwind(|| run_input(text, harness)) {
        Ok(outcome) => outcome,
        Err(_) => {
            let message = PANIC
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
                .unwrap_or_else(|| "a panic without a message".to_owned());
            Outcome::new(Class::Panic, message)
        }
    }
}

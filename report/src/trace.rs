//! Traces of sampled requests (`run --trace PATH --trace-sample N`): what one request did, step
//! by step, as the simulator saw it, and its export as Chrome's trace event format, which
//! ui.perfetto.dev and chrome://tracing open.
//!
//! The simulator records events (a request started, a step started, its stage changed, a
//! policy decided, it ended; a fault started or ended) with their virtual time; the export
//! turns each request's events into nested slices on a track of its own: the request, its
//! steps inside it, its waits inside the steps (queued, waiting for a reply, backing off), and
//! each decision as an instant. Faults are instants on every track of the variant and a slice
//! on a track of their own. Each variant is a process of the trace.
//!
//! Deterministic like the rest of a report: times are integer nanoseconds until they are
//! written as microseconds, and the same run gives the same bytes.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The sampled requests of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Trace {
    /// Every `sample_every`-th request (in the order they arrived, from the first) is traced.
    pub sample_every: u64,
    /// Requests traced (at most the simulator's cap).
    pub requests: u64,
    /// In the order they happened.
    pub events: Vec<TraceEvent>,
    /// Events left out once the cap on events was reached.
    pub dropped: u64,
    /// Virtual time the run ended, in nanoseconds: where an unfinished request's slices stop.
    pub end_ns: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    pub at_ns: u64,
    /// The request's number in arrival order, from 0; `None` for the run's own events
    /// (faults).
    pub request: Option<u64>,
    pub what: TraceWhat,
}

#[derive(Clone, Debug, PartialEq)]
pub enum TraceWhat {
    /// The request arrived; `flow` is what it runs.
    Started { flow: String },
    /// It starts step `step` (from 0), which does `action` (`redis GET on cache`).
    Step { step: u16, action: String },
    /// It now does or waits for `stage` (`waiting for a reply`, `queued in bulkhead db`,
    /// `running` when it waits for nothing).
    Stage { stage: String },
    /// A policy or a step decided something (`refused by breaker redis: breaker_open`).
    Decision { text: String },
    /// It ended with `outcome`.
    Ended { outcome: String },
    /// A fault started (`started`) or ended.
    Fault {
        name: String,
        kind: String,
        started: bool,
    },
}

/// Microseconds, as the trace format counts them, from integer nanoseconds: exact to the
/// nanosecond, written the same on every machine.
fn micros(ns: u64) -> String {
    let (whole, rest) = (ns / 1000, ns % 1000);
    if rest == 0 {
        whole.to_string()
    } else {
        format!("{whole}.{rest:03}")
    }
}

/// A JSON string.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// One slice (`ph: X`) or instant (`ph: i`) of the output.
struct Entry {
    name: String,
    category: &'static str,
    start_ns: u64,
    /// `None` for an instant.
    end_ns: Option<u64>,
    process: usize,
    track: u64,
    /// `t` (the track) or `p` (every track of the process), for an instant.
    scope: &'static str,
}

impl Entry {
    fn write(&self, out: &mut String) {
        write!(
            out,
            "{{\"name\":{},\"cat\":\"{}\",\"ts\":{},\"pid\":{},\"tid\":{}",
            quoted(&self.name),
            self.category,
            micros(self.start_ns),
            self.process,
            self.track
        )
        .unwrap();
        match self.end_ns {
            Some(end) => write!(
                out,
                ",\"ph\":\"X\",\"dur\":{}}}",
                micros(end.saturating_sub(self.start_ns))
            )
            .unwrap(),
            None => write!(out, ",\"ph\":\"i\",\"s\":\"{}\"}}", self.scope).unwrap(),
        }
    }
}

/// The track that carries a variant's fault windows; request tracks are their number plus 1.
const FAULT_TRACK: u64 = 0;

/// The traces of every variant (`(variant name, trace)`, in the report's order) as one Chrome
/// trace event file: `{"traceEvents": [...], "displayTimeUnit": "ms"}`.
pub fn chrome_trace_json(variants: &[(&str, &Trace)]) -> String {
    let mut entries: Vec<String> = Vec::new();
    for (index, (name, trace)) in variants.iter().enumerate() {
        let process = index + 1;
        let metadata = |kind: &str, track: u64, name: &str| {
            format!(
                "{{\"name\":\"{kind}\",\"ph\":\"M\",\"pid\":{process},\"tid\":{track},\
                 \"args\":{{\"name\":{}}}}}",
                quoted(name)
            )
        };
        entries.push(metadata("process_name", FAULT_TRACK, name));
        entries.push(metadata("thread_name", FAULT_TRACK, "faults"));
        let mut by_request: BTreeMap<u64, Vec<&TraceEvent>> = BTreeMap::new();
        let mut slices = Vec::new();
        let mut fault_started: BTreeMap<&str, u64> = BTreeMap::new();
        for event in &trace.events {
            match (&event.what, event.request) {
                (
                    TraceWhat::Fault {
                        name,
                        kind,
                        started,
                    },
                    _,
                ) => {
                    let verb = if *started { "started" } else { "ended" };
                    slices.push(Entry {
                        name: format!("fault {name} {verb} ({kind})"),
                        category: "fault",
                        start_ns: event.at_ns,
                        end_ns: None,
                        process,
                        track: FAULT_TRACK,
                        scope: "p",
                    });
                    if *started {
                        fault_started.insert(name, event.at_ns);
                    } else if let Some(start) = fault_started.remove(name.as_str()) {
                        slices.push(Entry {
                            name: format!("{name} ({kind})"),
                            category: "fault",
                            start_ns: start,
                            end_ns: Some(event.at_ns),
                            process,
                            track: FAULT_TRACK,
                            scope: "t",
                        });
                    }
                }
                (_, Some(request)) => by_request.entry(request).or_default().push(event),
                (_, None) => {}
            }
        }
        for (name, start) in fault_started {
            slices.push(Entry {
                name: format!("{name} (to the end of the run)"),
                category: "fault",
                start_ns: start,
                end_ns: Some(trace.end_ns.max(start)),
                process,
                track: FAULT_TRACK,
                scope: "t",
            });
        }
        for (request, events) in &by_request {
            let track = request + 1;
            let flow = events.iter().find_map(|e| match &e.what {
                TraceWhat::Started { flow } => Some(flow.as_str()),
                _ => None,
            });
            entries.push(metadata(
                "thread_name",
                track,
                &format!("request #{request} ({})", flow.unwrap_or("?")),
            ));
            request_slices(events, trace.end_ns, process, track, &mut slices);
        }
        entries.extend(slices.iter().map(|entry| {
            let mut text = String::new();
            entry.write(&mut text);
            text
        }));
    }
    let mut out = String::from("{\"traceEvents\":[\n");
    out.push_str(&entries.join(",\n"));
    out.push_str("\n],\"displayTimeUnit\":\"ms\"}\n");
    out
}

/// The slices of one request: the whole request, each step inside it, each stage with a
/// duration inside its step, each decision as an instant.
fn request_slices(
    events: &[&TraceEvent],
    end_ns: u64,
    process: usize,
    track: u64,
    out: &mut Vec<Entry>,
) {
    let entry = |name: String, category, start_ns, end_ns| Entry {
        name,
        category,
        start_ns,
        end_ns,
        process,
        track,
        scope: "t",
    };
    let ended = events.iter().find_map(|e| match &e.what {
        TraceWhat::Ended { outcome } => Some((e.at_ns, outcome.as_str())),
        _ => None,
    });
    let start = events.first().map_or(0, |e| e.at_ns);
    let (last, outcome) = ended.unwrap_or((end_ns.max(start), "unfinished"));
    let flow = events.iter().find_map(|e| match &e.what {
        TraceWhat::Started { flow } => Some(flow.clone()),
        _ => None,
    });
    out.push(entry(
        format!("{}: {outcome}", flow.unwrap_or_default()),
        "request",
        start,
        Some(last),
    ));
    let mut step: Option<(u64, String)> = None;
    let mut stage: Option<(u64, String)> = None;
    let close_stage = |stage: &mut Option<(u64, String)>, at: u64, out: &mut Vec<Entry>| {
        if let Some((from, name)) = stage.take()
            && at > from
            && name != "running"
        {
            out.push(entry(name, "wait", from, Some(at)));
        }
    };
    for event in events {
        let at = event.at_ns;
        match &event.what {
            TraceWhat::Step {
                step: index,
                action,
            } => {
                close_stage(&mut stage, at, out);
                if let Some((from, name)) = step.take() {
                    out.push(entry(name, "step", from, Some(at)));
                }
                step = Some((at, format!("step {index}: {action}")));
            }
            TraceWhat::Stage { stage: name } => {
                close_stage(&mut stage, at, out);
                stage = Some((at, name.clone()));
            }
            TraceWhat::Decision { text } => out.push(entry(text.clone(), "decision", at, None)),
            TraceWhat::Started { .. } | TraceWhat::Ended { .. } | TraceWhat::Fault { .. } => {}
        }
    }
    close_stage(&mut stage, last, out);
    if let Some((from, name)) = step {
        out.push(entry(name, "step", from, Some(last)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(at_ns: u64, request: Option<u64>, what: TraceWhat) -> TraceEvent {
        TraceEvent {
            at_ns,
            request,
            what,
        }
    }

    fn trace() -> Trace {
        let stage = |s: &str| TraceWhat::Stage {
            stage: s.to_owned(),
        };
        Trace {
            sample_every: 1,
            requests: 2,
            events: vec![
                event(
                    0,
                    None,
                    TraceWhat::Fault {
                        name: "dead".into(),
                        kind: "hang".into(),
                        started: true,
                    },
                ),
                event(
                    1_000,
                    Some(0),
                    TraceWhat::Started {
                        flow: "read".into(),
                    },
                ),
                event(
                    1_000,
                    Some(0),
                    TraceWhat::Step {
                        step: 0,
                        action: "redis GET on cache".into(),
                    },
                ),
                event(1_000, Some(0), stage("running")),
                event(1_000, Some(0), stage("waiting for a reply")),
                event(
                    101_000,
                    Some(0),
                    TraceWhat::Decision {
                        text: "step ended: timeout; on_error next".into(),
                    },
                ),
                event(101_000, Some(0), stage("running")),
                event(
                    101_000,
                    Some(0),
                    TraceWhat::Step {
                        step: 1,
                        action: "db main".into(),
                    },
                ),
                event(101_000, Some(0), stage("waiting for a query")),
                event(
                    151_500,
                    Some(0),
                    TraceWhat::Ended {
                        outcome: "ok".into(),
                    },
                ),
                event(
                    2_000,
                    Some(1),
                    TraceWhat::Started {
                        flow: "read".into(),
                    },
                ),
            ],
            dropped: 0,
            end_ns: 200_000,
        }
    }

    #[test]
    fn a_request_becomes_nested_slices_on_its_own_track() {
        let json = chrome_trace_json(&[("timeout only", &trace())]);
        let parsed: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
        let events = parsed["traceEvents"].as_array().unwrap();
        let named = |name: &str| {
            events
                .iter()
                .find(|e| e["name"] == name)
                .unwrap_or_else(|| panic!("{name}: {json}"))
        };
        let request = named("read: ok");
        assert_eq!(
            (request["ph"].as_str(), request["tid"].as_u64()),
            (Some("X"), Some(1))
        );
        assert_eq!(
            (request["ts"].as_f64(), request["dur"].as_f64()),
            (Some(1.0), Some(150.5))
        );
        let step = named("step 0: redis GET on cache");
        assert_eq!(
            (step["ts"].as_f64(), step["dur"].as_f64()),
            (Some(1.0), Some(100.0))
        );
        let wait = named("waiting for a reply");
        assert_eq!(
            (wait["cat"].as_str(), wait["dur"].as_f64()),
            (Some("wait"), Some(100.0))
        );
        assert_eq!(named("waiting for a query")["dur"].as_f64(), Some(50.5));
        let decision = named("step ended: timeout; on_error next");
        assert_eq!(
            (decision["ph"].as_str(), decision["s"].as_str()),
            (Some("i"), Some("t"))
        );
        assert!(
            !events.iter().any(|e| e["name"] == "running"),
            "a stage that waits for nothing is no slice"
        );
        // A request that never ended lasts to the end of the run.
        let unfinished = named("read: unfinished");
        assert_eq!(
            (unfinished["tid"].as_u64(), unfinished["dur"].as_f64()),
            (Some(2), Some(198.0))
        );
        // The fault: an instant on every track, and a slice to the end of the run.
        assert_eq!(named("fault dead started (hang)")["s"].as_str(), Some("p"));
        assert_eq!(
            named("dead (to the end of the run)")["dur"].as_f64(),
            Some(200.0)
        );
        assert_eq!(named("thread_name")["args"]["name"], "faults");
        assert!(json.contains("\"request #1 (read)\""));
        assert_eq!(named("process_name")["args"]["name"], "timeout only");
    }

    #[test]
    fn micros_are_exact_to_the_nanosecond() {
        assert_eq!(micros(0), "0");
        assert_eq!(micros(1_500), "1.500");
        assert_eq!(micros(1_000_000_007), "1000000.007");
    }
}

//! A live session: the file's variants run one after another against one server
//! (`outagelab live`), kept whatever the server does.
//!
//! Each variant is run by [`run_watched`]; its report is kept for the time measured, whatever
//! its verdict. A variant whose server did not answer at its end ends the session: the
//! variants after it are listed as not run (a server that never comes back), as are those an
//! interruption stops. A server that stopped answering and came back before the variant's
//! end is used again by the next variant.

use serde::Serialize;

use super::survive::{EventKind, is_live_failure};
use super::*;

/// `--redis`'s `HOST:PORT` (a name, an IPv4 address, or an IPv6 one in brackets), checked
/// before anything is sent: a port is needed (1 to 65535), and nothing that would make the
/// `redis://` URL mean something else (`/`, `@`, `?`, `#`, spaces).
pub fn parse_address(text: &str) -> Result<String, String> {
    let example = "HOST:PORT, e.g. 127.0.0.1:6379";
    let bad = |c: char| c.is_whitespace() || "/@?#".contains(c);
    if text.chars().any(bad) {
        return Err(format!("{text:?} is not {example}"));
    }
    let Some((host, port)) = text.rsplit_once(':') else {
        return Err(format!("{text:?} has no port: give {example}"));
    };
    if host.is_empty() {
        return Err(format!("{text:?} has no host: give {example}"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(format!(
            "{text:?}: an IPv6 address goes in brackets, e.g. [::1]:6379"
        ));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(text.to_owned()),
        _ => Err(format!(
            "{text:?}: the port {port:?} is not a number from 1 to 65535"
        )),
    }
}

/// The longest a variant's live run can measure: the file's horizon, at most `cap`; a file
/// without one, [`LENGTH_WITHOUT_HORIZON`] (or the cap). Its run ends at most [`GRACE`]
/// later.
pub fn length_limit(scenario: &Scenario, cap: Option<SimDuration>) -> SimDuration {
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

/// A variant to run.
#[derive(Clone, Copy, Debug)]
pub struct Planned<'a> {
    pub name: &'a str,
    pub scenario: &'a Scenario,
    pub sweep_x: Option<f64>,
}

/// A variant that was not run, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotRun {
    pub name: String,
    pub why: String,
}

/// What a live session adds to the report's JSON (its `live` key): what happened to the
/// server and the faults, and what was not run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LiveSection {
    /// How long past its horizon a variant's run may take at most ([`GRACE`]).
    pub grace_ms: f64,
    pub interrupted: bool,
    /// The file's variants that were not run, in the file's order.
    pub not_run: Vec<NotRun>,
    /// In the order they happened ([`LiveEvent`]).
    pub events: Vec<LiveEvent>,
    /// Events past the bound that were not kept ([`Events::MAX`]).
    #[serde(skip_serializing_if = "is_zero")]
    pub events_dropped: u64,
}

fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// What a session measured.
#[derive(Clone, Debug)]
pub struct Session {
    /// Each variant run, for the time measured, in the file's order.
    pub variants: Vec<VariantReport>,
    /// When each of them began, in ms since the Unix epoch (what a scrape would stamp).
    pub starts: Vec<i64>,
    pub live: LiveSection,
}

impl Session {
    /// `outagelab live`'s exit status: 130 if interrupted; 1 if a variant could not measure
    /// the file as written (a live failure verdict) or was not run; 0 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.live.interrupted {
            130
        } else if !self.live.not_run.is_empty()
            || self.variants.iter().any(|v| is_live_failure(v.verdict))
        {
            1
        } else {
            0
        }
    }
}

/// Runs `planned` one after another against `options.address`. `say` gets the lines to print
/// as the session goes (which variant runs, the notes of each); `events` are said as they
/// happen. `Err` (nothing more runs) only for a variant the live check refuses, with its name.
pub async fn session(
    planned: &[Planned<'_>],
    options: &Options,
    events: &Events,
    interrupt: &Interrupt,
    say: &dyn Fn(&str),
) -> Result<Session, (String, Unsupported)> {
    let mut session = Session {
        variants: Vec::with_capacity(planned.len()),
        starts: Vec::with_capacity(planned.len()),
        live: LiveSection {
            grace_ms: GRACE.as_secs_f64() * 1e3,
            ..LiveSection::default()
        },
    };
    // Why the variants from here on are not run, once that is so.
    let mut stopped: Option<String> = None;
    for (index, variant) in planned.iter().enumerate() {
        if stopped.is_none() && interrupt.is_triggered() {
            stopped = Some("interrupted (SIGINT) before it started".to_owned());
        }
        if let Some(why) = &stopped {
            session.live.not_run.push(NotRun {
                name: variant.name.to_owned(),
                why: why.clone(),
            });
            continue;
        }
        let limit = length_limit(variant.scenario, options.horizon_cap);
        say(&format!(
            "live {}/{}: {} (at most {:.1} s against {})",
            index + 1,
            planned.len(),
            variant.name,
            limit.as_millis_f64() / 1e3,
            options.address
        ));
        let mut notes = Vec::new();
        let started = unix_ms_now();
        let ran = run_watched(
            variant.scenario,
            variant.name,
            variant.sweep_x,
            options,
            &mut notes,
            events,
            interrupt,
        )
        .await;
        for note in notes {
            say(&format!("note: {note}"));
        }
        match ran {
            Ok(ran) => {
                if ran.report.verdict == Verdict::Interrupted {
                    stopped = Some("interrupted (SIGINT) before it started".to_owned());
                } else if !ran.server_answers {
                    stopped = Some(format!(
                        "the server did not answer at the end of variant {:?} (verdict {})",
                        variant.name,
                        ran.report.verdict.name()
                    ));
                }
                session.variants.push(ran.report);
                session.starts.push(started);
            }
            Err(LiveError::Unsupported(unsupported)) => {
                return Err((variant.name.to_owned(), unsupported));
            }
            Err(LiveError::Interrupted) => {
                let why = "interrupted (SIGINT) while it was set up".to_owned();
                session.live.not_run.push(NotRun {
                    name: variant.name.to_owned(),
                    why,
                });
                stopped = Some("interrupted (SIGINT) before it started".to_owned());
            }
            Err(error @ LiveError::Redis { .. }) => {
                let why = format!("the server could not be set up for it: {error}");
                events.push(LiveEvent {
                    variant: variant.name.to_owned(),
                    at_ms: 0.0,
                    event: EventKind::ServerUnreachable,
                    detail: why.clone(),
                });
                session.live.not_run.push(NotRun {
                    name: variant.name.to_owned(),
                    why,
                });
                stopped = Some(format!(
                    "the server could not be set up for variant {:?}",
                    variant.name
                ));
            }
        }
    }
    session.live.interrupted = interrupt.is_triggered();
    let (kept, dropped) = events.snapshot();
    session.live.events = kept;
    session.live.events_dropped = dropped;
    Ok(session)
}

/// The wall clock, in ms since the Unix epoch (0 on a clock set before it).
fn unix_ms_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_needs_a_host_and_a_port() {
        let cases: &[(&str, Result<(), &str>)] = &[
            ("127.0.0.1:6379", Ok(())),
            ("localhost:1", Ok(())),
            ("[::1]:6379", Ok(())),
            ("notahost", Err("has no port")),
            (":6379", Err("has no host")),
            ("::1:6379", Err("in brackets")),
            ("host:0", Err("not a number from 1 to 65535")),
            ("host:65536", Err("not a number from 1 to 65535")),
            ("host:", Err("not a number from 1 to 65535")),
            ("host:63x", Err("not a number from 1 to 65535")),
            ("user@host:6379", Err("is not HOST:PORT")),
            ("host/0:6379", Err("is not HOST:PORT")),
            ("redis://host:6379", Err("is not HOST:PORT")),
        ];
        for (text, expected) in cases {
            match (parse_address(text), expected) {
                (Ok(address), Ok(())) => assert_eq!(&address, text),
                (Err(message), Err(part)) => {
                    assert!(message.contains(part), "{text}: {message}")
                }
                (got, _) => panic!("{text}: {got:?}, expected {expected:?}"),
            }
        }
    }
}

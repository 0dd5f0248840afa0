//! What a live run does when the server it tests misbehaves beyond what the file asks: it
//! ends on time, keeps what it measured, and says what happened, once.
//!
//! - **The horizon is wall-clock law.** Every admin command (the server's settings, a fault's
//!   command, `INFO`, the teardown) has a deadline: its own length (a `DEBUG SLEEP`'s) plus
//!   [`GRACE`], and never later than the measured time's end plus [`GRACE`]. A variant's run
//!   therefore ends at most [`GRACE`] after its horizon, whatever the server does.
//! - **What was measured is kept**: a server that stops answering, or a fault that cannot be
//!   injected, is a [`Verdict`] of the variant's report ([`verdict`]), not an error that throws
//!   the report away.
//! - **Say what happened**: [`ServerWatch`] turns the runner's probes into one event when the
//!   server stops answering and one when it answers again; failed faults are events too. Each
//!   event is a line on standard error (the caller's [`Events`] announces it) and an entry of
//!   the JSON's `live.events`.
//!
//! The state machines here are pure: they take `now` and report, and hold no clock.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use outagelab_model::time::SimTime;
use outagelab_report::Verdict;
use outagelab_sim::scenario::{FaultKind, FaultSpec, PauseMode};
use serde::Serialize;
use tokio::sync::watch;

use super::locked;

/// How long past its horizon a variant's run may take at most: the time its teardown (the
/// server's `INFO`, its settings put back) has, and the time any admin command may wait
/// beyond its own length.
pub const GRACE: Duration = Duration::from_secs(2);

/// How often the runner asks the server whether it answers (`PING` on the admin connection).
pub const PROBE_EVERY: Duration = Duration::from_millis(250);

/// A probe unanswered for this long finds the server not answering.
pub const STALL_AFTER: Duration = Duration::from_secs(1);

/// How a server is not answering.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Silence {
    /// Connections refused or dropped: the process is gone (killed, crashed, not started).
    Unreachable,
    /// Connections open, no reply within [`STALL_AFTER`]: the process is stopped or wedged.
    Stalled,
}

impl Silence {
    /// What it means, for a reader.
    pub fn describe(self) -> &'static str {
        match self {
            Silence::Unreachable => "unreachable (connection refused or dropped)",
            Silence::Stalled => "stalled (connected, but no reply)",
        }
    }
}

/// The server as the runner last found it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Answering,
    /// Not answering since `since` (when the first probe it left unanswered was sent).
    Silent {
        since: SimTime,
        how: Silence,
    },
}

/// What the runner's probes say about the server, as a state machine.
///
/// `Answering -> Silent` on a failed probe, `Silent -> Answering` on an answered one; a
/// failure of another kind while silent (stalled, then refused) changes how without an event.
/// Invariant: a change of answering is reported exactly once, and only a change is: a server
/// that stops and comes back gives one [`EventKind::ServerStoppedAnswering`] and one
/// [`EventKind::ServerAnsweringAgain`], however many probes it left unanswered.
/// Call order: any; `now` never goes backwards between calls.
#[derive(Clone, Debug)]
pub struct ServerWatch {
    health: Health,
}

impl Default for ServerWatch {
    fn default() -> Self {
        Self::new()
    }
}

impl ServerWatch {
    pub fn new() -> ServerWatch {
        ServerWatch {
            health: Health::Answering,
        }
    }

    pub fn health(&self) -> Health {
        self.health
    }

    /// A probe sent at `sent` was not answered, as `how`. Returns the event to say, if this
    /// is a change.
    pub fn failed(&mut self, sent: SimTime, how: Silence) -> Option<(EventKind, String)> {
        match self.health {
            Health::Answering => {
                self.health = Health::Silent { since: sent, how };
                Some((
                    EventKind::ServerStoppedAnswering,
                    format!(
                        "the server stopped answering at {:.3} s: {}",
                        sent.as_nanos() as f64 / 1e9,
                        how.describe()
                    ),
                ))
            }
            Health::Silent { since, .. } => {
                self.health = Health::Silent { since, how };
                None
            }
        }
    }

    /// A probe was answered at `now`. Returns the event to say, if this is a change.
    pub fn answered(&mut self, now: SimTime) -> Option<(EventKind, String)> {
        match self.health {
            Health::Answering => None,
            Health::Silent { since, .. } => {
                self.health = Health::Answering;
                let silent_ms = now.saturating_since(since).as_nanos() as f64 / 1e6;
                Some((
                    EventKind::ServerAnsweringAgain,
                    format!(
                        "the server answers again, after {:.1} s without",
                        silent_ms / 1e3
                    ),
                ))
            }
        }
    }
}

/// Whether the file's own fault holds the server at `now` (a `pause` of every command, a
/// `hang`), so that its silence is the file's and not news: from the fault's start to its end
/// plus [`STALL_AFTER`] (a pause ends on the server's cron tick, after its nominal end), or
/// to the run's end for a fault without a duration. Returns the fault's name.
pub fn held_by_file(faults: &[FaultSpec], now: SimTime) -> Option<&str> {
    let slack = outagelab_model::time::SimDuration::from_nanos(STALL_AFTER.as_nanos() as u64);
    faults
        .iter()
        .filter(|fault| {
            matches!(
                fault.kind,
                FaultKind::Pause(PauseMode::All) | FaultKind::Hang
            )
        })
        .find(|fault| {
            fault.at <= now
                && fault
                    .duration
                    .is_none_or(|d| now < fault.at.saturating_add(d).saturating_add(slack))
        })
        .map(|fault| fault.name.as_str())
}

/// What befell a variant's run besides the file, for its verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Befell {
    /// Interrupted (SIGINT) before its measured time's end.
    pub interrupted: bool,
    /// How the server was when the run ended (its last `INFO`); `None`: it answered.
    pub silent_at_end: Option<Silence>,
    /// Another process answered during the run: the server restarted.
    pub restarted: bool,
    /// A fault of the file could not be injected or undone.
    pub fault_failed: bool,
}

/// A variant's verdict, from how its measured time ended (`measured`: completed or horizon)
/// and what befell it, in this order of precedence: what cut the measurement short, the
/// server's state at the end, a restart in the middle, the file's faults. A server that
/// stopped answering and came back as the same process changes nothing here (its keys and
/// settings are intact, as after a file's own pause): the events say when.
pub fn verdict(measured: Verdict, befell: Befell) -> Verdict {
    match befell {
        Befell {
            interrupted: true, ..
        } => Verdict::Interrupted,
        Befell {
            silent_at_end: Some(Silence::Unreachable),
            ..
        } => Verdict::ServerUnreachable,
        Befell {
            silent_at_end: Some(Silence::Stalled),
            ..
        } => Verdict::ServerStalled,
        Befell {
            restarted: true, ..
        } => Verdict::ServerRestarted,
        Befell {
            fault_failed: true, ..
        } => Verdict::FaultInjectionFailed,
        Befell { .. } => measured,
    }
}

/// Whether a variant's verdict says the live run could not measure the file as written (what
/// `outagelab live` exits 1 on; 130 for [`Verdict::Interrupted`]).
pub fn is_live_failure(verdict: Verdict) -> bool {
    matches!(
        verdict,
        Verdict::ServerUnreachable
            | Verdict::ServerStalled
            | Verdict::ServerRestarted
            | Verdict::FaultInjectionFailed
            | Verdict::Interrupted
    )
}

/// What happened to a live run beyond the file's plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// The server could not be reached while the run was set up: the variant did not run.
    ServerUnreachable,
    ServerStoppedAnswering,
    ServerAnsweringAgain,
    /// The admin connection was made again to a server with another `run_id`: it restarted,
    /// and lost the run's keys and settings (the file's settings are set again).
    ServerRestarted,
    /// A fault of the file could not be injected (its command failed or was not answered).
    FaultNotInjected,
    /// A fault of the file could not be undone (a stopped server's restart).
    FaultNotUndone,
    /// The server's own settings could not be put back after the run.
    SettingsNotRestored,
    /// The run was interrupted (SIGINT).
    Interrupted,
}

/// One thing that happened, at `at_ms` on the variant's clock (0 for what happened while it
/// was set up, before its clock started).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LiveEvent {
    pub variant: String,
    pub at_ms: f64,
    pub event: EventKind,
    pub detail: String,
}

impl std::fmt::Display for LiveEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "live: variant {:?} at {:.3} s: {}",
            self.variant,
            self.at_ms / 1e3,
            self.detail
        )
    }
}

/// Called with each event as it happens (the command line prints it on standard error).
pub type Announce = Arc<dyn Fn(&LiveEvent) + Send + Sync>;

/// The events of a live session, shared by its tasks. Bounded: at most [`Events::MAX`] kept
/// (a server that flaps for an hour is not an unbounded list); later ones are counted.
#[derive(Clone, Default)]
pub struct Events {
    kept: Arc<Mutex<(Vec<LiveEvent>, u64)>>,
    announce: Option<Announce>,
}

impl Events {
    pub const MAX: usize = 10_000;

    pub fn new() -> Events {
        Events::default()
    }

    /// Events that are also handed to `announce` as they happen.
    pub fn announcing(announce: Announce) -> Events {
        Events {
            kept: Arc::default(),
            announce: Some(announce),
        }
    }

    pub fn push(&self, event: LiveEvent) {
        if let Some(announce) = &self.announce {
            announce(&event);
        }
        let mut kept = locked(&self.kept);
        if kept.0.len() < Events::MAX {
            kept.0.push(event);
        } else {
            kept.1 += 1;
        }
    }

    /// The events so far, in the order they happened, and how many were not kept.
    pub fn snapshot(&self) -> (Vec<LiveEvent>, u64) {
        locked(&self.kept).clone()
    }
}

/// A request to stop the run now (SIGINT): the variant running ends at once and is reported
/// for the time measured, the ones after it are not run. Clones share one flag.
#[derive(Clone, Debug)]
pub struct Interrupt {
    flag: Arc<watch::Sender<bool>>,
}

impl Default for Interrupt {
    fn default() -> Self {
        Self::new()
    }
}

impl Interrupt {
    pub fn new() -> Interrupt {
        Interrupt {
            flag: Arc::new(watch::channel(false).0),
        }
    }

    pub fn trigger(&self) {
        self.flag.send_replace(true);
    }

    pub fn is_triggered(&self) -> bool {
        *self.flag.borrow()
    }

    /// Resolves once [`Interrupt::trigger`] was called (at once if it was).
    pub async fn triggered(&self) {
        let mut receiver = self.flag.subscribe();
        // Bounded: returns on the first value that is `true`; the sender lives in `self`.
        let _ = receiver.wait_for(|set| *set).await;
    }

    /// Triggers this on SIGINT (Ctrl-C), from a task on the current runtime; a second SIGINT
    /// ends the process at once with status 130. `on_first` is called on the first.
    pub fn on_ctrl_c(&self, on_first: impl Fn() + Send + 'static) {
        let interrupt = self.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_err() {
                return; // No signal handling here: SIGINT ends the process as it would.
            }
            on_first();
            interrupt.trigger();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outagelab_model::time::SimDuration;

    fn ms(ms: u64) -> SimTime {
        SimTime::ZERO.saturating_add(SimDuration::from_millis(ms))
    }

    /// A server that leaves many probes unanswered and comes back is said to stop once and to
    /// come back once, the stop dated when its first unanswered probe was sent.
    #[test]
    fn a_stop_and_a_return_are_said_once_each() {
        let mut watch = ServerWatch::new();
        assert_eq!(watch.answered(ms(100)), None);
        let (kind, detail) = watch.failed(ms(250), Silence::Stalled).unwrap();
        assert_eq!(kind, EventKind::ServerStoppedAnswering);
        assert!(detail.contains("stalled"), "{detail}");
        assert_eq!(watch.failed(ms(500), Silence::Stalled), None);
        assert_eq!(watch.failed(ms(750), Silence::Unreachable), None);
        assert_eq!(
            watch.health(),
            Health::Silent {
                since: ms(250),
                how: Silence::Unreachable
            },
            "how changes, since does not"
        );
        let (kind, detail) = watch.answered(ms(2750)).unwrap();
        assert_eq!(kind, EventKind::ServerAnsweringAgain);
        assert!(detail.contains("after 2.5 s"), "{detail}");
        assert_eq!(watch.answered(ms(3000)), None);
        assert_eq!(watch.health(), Health::Answering);
    }

    #[test]
    fn the_verdict_names_what_cut_the_run_then_the_server_then_the_faults() {
        let befell = |interrupted, silent_at_end, restarted, fault_failed| Befell {
            interrupted,
            silent_at_end,
            restarted,
            fault_failed,
        };
        let (stalled, gone) = (Some(Silence::Stalled), Some(Silence::Unreachable));
        let cases = [
            (befell(false, None, false, false), Verdict::Horizon),
            (
                befell(false, None, false, true),
                Verdict::FaultInjectionFailed,
            ),
            (befell(false, None, true, true), Verdict::ServerRestarted),
            (befell(false, stalled, true, true), Verdict::ServerStalled),
            (
                befell(false, gone, false, false),
                Verdict::ServerUnreachable,
            ),
            (befell(true, stalled, true, true), Verdict::Interrupted),
            (befell(true, None, false, false), Verdict::Interrupted),
        ];
        for (what, expected) in cases {
            let got = verdict(Verdict::Horizon, what);
            assert_eq!(got, expected, "{what:?}");
            assert_eq!(is_live_failure(got), expected != Verdict::Horizon);
        }
        assert_eq!(
            verdict(Verdict::Completed, Befell::default()),
            Verdict::Completed
        );
    }

    #[test]
    fn the_files_own_pause_and_hang_hold_the_server_and_nothing_else_does() {
        let text = r#"
[scenario]
name = "held"
[run]
horizon = "10s"
[servers.redis]
[connections.c]
server = "redis"
reconnect = "slot"
[keys.k]
count = 1
[flows.read]
steps = [{ redis = { command = "GET", connection = "c", key = "k" } }]
[loads.l]
flow = "read"
arrivals = "even"
rate = 1
duration = "1s"
[faults.p]
target = "redis"
kind = "pause"
at = "1s"
duration = "1s"
[faults.w]
target = "redis"
kind = "pause"
mode = "write"
at = "4s"
duration = "1s"
[faults.h]
target = "redis"
kind = "hang"
at = "6s"
[faults.k]
target = "redis"
kind = "kill"
at = "3500ms"
"#;
        let file = outagelab_scenario_file::parse(text, std::path::Path::new("held.toml"))
            .unwrap_or_else(|diagnostics| panic!("{diagnostics}"));
        let faults = &file.variants[0].scenario.faults;
        let cases = [
            (999, None),
            (1000, Some("p")),
            (2999, Some("p")),
            (3000, None),
            (3500, None),
            (4500, None),
            (5999, None),
            (6000, Some("h")),
            (60_000, Some("h")),
        ];
        for (at, expected) in cases {
            assert_eq!(held_by_file(faults, ms(at)), expected, "at {at} ms");
        }
    }

    #[tokio::test]
    async fn an_interrupt_is_seen_by_every_clone_at_once_and_later() {
        let interrupt = Interrupt::new();
        let clone = interrupt.clone();
        assert!(!clone.is_triggered());
        interrupt.trigger();
        assert!(clone.is_triggered());
        tokio::time::timeout(Duration::from_secs(1), clone.triggered())
            .await
            .expect("a triggered interrupt resolves at once");
    }

    #[test]
    fn events_are_kept_in_order_within_their_bound_and_announced() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        let events = Events::announcing(Arc::new(move |event: &LiveEvent| {
            locked(&into).push(event.to_string());
        }));
        for index in 0..Events::MAX + 3 {
            events.push(LiveEvent {
                variant: "v".to_owned(),
                at_ms: index as f64,
                event: EventKind::ServerAnsweringAgain,
                detail: "back".to_owned(),
            });
        }
        let (kept, dropped) = events.snapshot();
        assert_eq!((kept.len(), dropped), (Events::MAX, 3));
        assert_eq!(kept[1].at_ms, 1.0);
        assert_eq!(locked(&seen).len(), Events::MAX + 3);
        assert_eq!(locked(&seen)[1500], "live: variant \"v\" at 1.500 s: back");
    }
}

//! The replay harness of the conformance tests: a peer library's test case, rewritten as a
//! script of calls, outcomes and instants against `outagelab_model::breaker::Breaker`, with
//! the result the peer's test asserts. One `check` runs every case of a file and reports all
//! the cases that fail, by name.
//!
//! A case whose peer behaves differently on purpose says so in `differs` (why), and its
//! script asserts outagelab's behaviour; a case with `differs: None` asserts exactly what the
//! peer's test asserts.

#![allow(dead_code)] // each test file uses part of the harness

use outagelab_model::SimDuration;
use outagelab_model::breaker::{
    Admit, Breaker, BreakerConfig, BreakerState, CallOutcome, Rejection, Ticket,
};
use outagelab_model::time::SimTime;

pub const S: CallOutcome = CallOutcome::Success;
pub const F: CallOutcome = CallOutcome::Failure;
/// An outcome that counts neither way (resilience4j's ignored exception, gobreaker's
/// excluded error).
pub const I: CallOutcome = CallOutcome::Ignored;
/// An outcome the classifier does not record (an exception outside resilience4j's
/// `recordExceptions`, an error opossum's `errorFilter` accepts): the preset's
/// `uncounted_as` says what it counts as.
pub const U: CallOutcome = CallOutcome::Uncounted;

pub use BreakerState::{Closed, HalfOpen, Open};

/// One step of a script.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// Time moves to this instant, in milliseconds since the start.
    At(u64),
    /// A call is admitted and ends at once with this outcome.
    Call(CallOutcome),
    /// A call is admitted and stays in flight (its ticket is kept, numbered from 0).
    Admit,
    /// A call is refused.
    Reject(Rejection),
    /// The call admitted as number `n` by `Admit` ends now with this outcome.
    Report(usize, CallOutcome),
    /// The state now is this one.
    Expect(BreakerState),
    /// The breaker has opened this many times.
    Opened(u64),
    /// The closed breaker's window holds this many calls, of which this many failed.
    Window(u64, u64),
}

pub use Step::*;

/// A peer's test case.
pub struct Case {
    /// The peer's test, as its suite names it, with the version or commit it was read at.
    pub peer_test: &'static str,
    /// Why outagelab deliberately behaves otherwise, when it does; the script then asserts
    /// outagelab's behaviour.
    pub differs: Option<&'static str>,
    pub config: fn() -> BreakerConfig,
    pub script: &'static [Step],
}

fn millis(ms: u64) -> SimTime {
    SimTime::from_nanos(ms * 1_000_000)
}

pub fn secs(secs: u64) -> SimDuration {
    SimDuration::from_secs(secs)
}

/// Runs one case; `Err` says which step failed and how.
pub fn run(case: &Case) -> Result<(), String> {
    let mut breaker = Breaker::new((case.config)());
    let mut now = SimTime::ZERO;
    let mut tickets: Vec<Option<Ticket>> = Vec::new();
    for (index, step) in case.script.iter().enumerate() {
        let fail = |what: String| Err(format!("step {index} ({step:?}) at {now}: {what}"));
        match *step {
            At(ms) => now = millis(ms),
            Call(outcome) => match breaker.try_admit(now) {
                Admit::Yes(ticket) => breaker.on_result(now, ticket, outcome),
                Admit::No(why) => return fail(format!("refused ({why:?})")),
            },
            Admit => match breaker.try_admit(now) {
                Admit::Yes(ticket) => tickets.push(Some(ticket)),
                Admit::No(why) => return fail(format!("refused ({why:?})")),
            },
            Reject(expected) => match breaker.try_admit(now) {
                Admit::No(why) if why == expected => {}
                Admit::No(why) => return fail(format!("refused for {why:?}")),
                Admit::Yes(ticket) => {
                    tickets.push(Some(ticket));
                    return fail("admitted".to_owned());
                }
            },
            Report(n, outcome) => match tickets.get_mut(n).and_then(Option::take) {
                Some(ticket) => breaker.on_result(now, ticket, outcome),
                None => return fail(format!("no call {n} in flight")),
            },
            Expect(state) => {
                let got = breaker.state_at(now);
                if got != state {
                    return fail(format!("state {got:?}"));
                }
            }
            Window(calls, failures) => {
                let got = breaker.window_counts(now).map(|w| (w.calls, w.failures));
                if got != Some((calls, failures)) {
                    return fail(format!("window {got:?}"));
                }
            }
            Opened(count) => {
                if breaker.opened_total() != count {
                    return fail(format!("opened {} times", breaker.opened_total()));
                }
            }
        }
    }
    Ok(())
}

/// Runs every case, and fails with the names of all that fail. Checks that the file holds at
/// least `at_least` cases, and that a case that differs says why.
pub fn check(cases: &[Case], at_least: usize) {
    assert!(cases.len() >= at_least, "{} cases", cases.len());
    let mut failed = Vec::new();
    for case in cases {
        assert!(
            case.differs.is_none_or(|why| !why.is_empty()),
            "{}",
            case.peer_test
        );
        if let Err(why) = run(case) {
            failed.push(format!("{}: {why}", case.peer_test));
        }
    }
    assert!(failed.is_empty(), "failed:\n{}", failed.join("\n"));
}

/// A script made of several arrays of steps, concatenated at compile time:
/// `script!(OPEN_AT_0, [At(5000), Admit])`.
#[allow(unused_macros)] // not every file concatenates scripts
macro_rules! script {
    ($($part:expr),* $(,)?) => {{
        const STEPS: &[Step] = &concat_steps!($($part),*);
        STEPS
    }};
}

/// Concatenates arrays of steps at compile time.
#[allow(unused_macros)]
macro_rules! concat_steps {
    ($($part:expr),*) => {{
        const PARTS: &[&[Step]] = &[$(&$part),*];
        const LEN: usize = {
            let mut len = 0;
            let mut i = 0;
            while i < PARTS.len() {
                len += PARTS[i].len();
                i += 1;
            }
            len
        };
        const ALL: [Step; LEN] = {
            let mut all = [At(0); LEN];
            let (mut at, mut i) = (0, 0);
            while i < PARTS.len() {
                let mut j = 0;
                while j < PARTS[i].len() {
                    all[at] = PARTS[i][j];
                    at += 1;
                    j += 1;
                }
                i += 1;
            }
            all
        };
        ALL
    }};
}

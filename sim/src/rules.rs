//! The rules both harnesses apply: the simulator's layers and actions (`policies.rs`,
//! `actions/`, the engine's step routing) and the live runner's (`outagelab-live`,
//! `run/layers.rs`) call these, so that a rule is written once and a live run decides as a
//! simulated one does. The state machines themselves are `outagelab-model`'s; what is here is
//! how a step's result reaches them (what a layer counts, what it retries, what a refused
//! store means), and what each harness counts beside them for its summary (`summaries`).
//!
//! What a dropped attempt is, per layer: an attempt whose future is dropped before its step
//! ends (the live runner aborting its tasks at the run's end, a caller's timeout around a live
//! guard) reports nothing it did not see: a breaker's ticket goes back through
//! `Breaker::on_cancelled` (counted neither way, a half-open probe's slot freed, under every
//! preset), an adaptive limit's permit as [`CallEnd::Ignored`], a bulkhead's or a
//! semaphore's permit is released, and a retry tries no more. The simulator drops no attempt:
//! a caller's timeout (`[callers]`) cancels the request, which stops before its next step, but
//! the step in progress runs to its end and its layers see its own result, as a service's
//! handler runs on after its client hung up; a request still in flight at the run's end
//! reports nothing, as an aborted live task does.

use outagelab_model::adaptive_limit::CallEnd;
use outagelab_model::breaker::{BreakerState, CallOutcome, Transition};
use outagelab_model::rate_limit::Decision;
use outagelab_model::time::SimDuration;
use outagelab_report::Outcome;

use crate::kernel::StepResult;
use crate::rng::Stream;
use crate::scenario::{
    BreakerClassifier, ByteRate, ConnectionId, Distribution, FaultKind, KeyFamilyId, OutcomeSet,
    PolicyRef, Scenario, StepAction,
};

/// How many bytes a step's request carries, which a semaphore's byte cap weighs: a Redis
/// step's command, its value included.
pub fn request_bytes(action: &StepAction) -> u64 {
    match *action {
        StepAction::Redis { command, .. } => command.request_bytes(),
        _ => 0,
    }
}

/// The connection a step that failed and went on counts a fail-open of (with [`fails_open`]):
/// a Redis step's (a lock found taken or a rate limit is an answer, which the caller checks).
pub fn fail_open_connection(action: &StepAction) -> Option<ConnectionId> {
    match *action {
        StepAction::Redis { connection, .. } => Some(connection),
        _ => None,
    }
}

/// How a breaker counts a step whose I/O returned `io`: ok, hit and miss are successes; an
/// error in `ignores` is ignored (checked first, as resilience4j checks `ignoreExceptions`
/// before `recordExceptions`); one in `counts` is a failure; any other error is uncounted.
pub fn breaker_outcome(classifier: BreakerClassifier, io: StepResult) -> CallOutcome {
    match io {
        StepResult::Ok | StepResult::Hit | StepResult::Miss => CallOutcome::Success,
        StepResult::Error(kind) if classifier.ignores.contains(kind) => CallOutcome::Ignored,
        StepResult::Error(kind) if classifier.counts.contains(kind) => CallOutcome::Failure,
        StepResult::Error(_) => CallOutcome::Uncounted,
    }
}

/// A call step's latency and answer, drawn from its flow's stream for calls (`call_stream`):
/// the latency first, then whether it fails (`error_permille` of 1000) with `error`.
pub fn call_answer(
    call_stream: &mut Stream,
    latency: &Distribution,
    error_permille: u32,
    error: Outcome,
) -> (SimDuration, StepResult) {
    let latency = call_stream.duration(latency);
    let answer = if call_stream.below(1000) < u64::from(error_permille) {
        StepResult::Error(error)
    } else {
        StepResult::Ok
    };
    (latency, answer)
}

/// How an adaptive limit samples a step whose I/O returned `io`: a success, a drop (a sign of
/// load) when `drops` holds its error, otherwise nothing about load.
pub fn adaptive_limit_end(drops: OutcomeSet, io: StepResult) -> CallEnd {
    match io {
        StepResult::Ok | StepResult::Hit | StepResult::Miss => CallEnd::Success,
        StepResult::Error(kind) if drops.contains(kind) => CallEnd::Dropped,
        StepResult::Error(_) => CallEnd::Ignored,
    }
}

/// Whether a retry policy asks its model about a step that returned `result` (what the step
/// returns, not its I/O: a rate-limit step's `rate_limited` is retried when listed). Whether
/// it then tries again (attempts, budget, Retry-After, elapsed time) is the model's.
pub fn retries(retry_on: OutcomeSet, result: StepResult) -> bool {
    matches!(result, StepResult::Error(kind) if retry_on.contains(kind))
}

/// Whether one of `outer` (the policies outside a layer, outermost first) stands for a
/// connection pool: an enabled bulkhead, whose permit the step's work holds until it ends,
/// even when the step's caller gave up (a database query that outlived its timeout). A retry
/// inside such a pool goes again only once that work is over.
pub fn in_a_pool(scenario: &Scenario, outer: &[PolicyRef]) -> bool {
    outer.iter().any(|policy| match policy {
        PolicyRef::Bulkhead(id) => scenario.bulkheads[id.index()].enabled,
        _ => false,
    })
}

/// Where a rate-limit step checks and charges: on its limiter's store (a connection), under the
/// request's key of `key`, when the limiter is on and has a store (the simulator stands the
/// store's check-and-charge in with an `INCR`, and the live runner sends one); otherwise
/// (`None`) the limiter answers at once.
pub fn rate_limit_store(
    enabled: bool,
    store: Option<ConnectionId>,
    key: Option<KeyFamilyId>,
) -> Option<(ConnectionId, KeyFamilyId)> {
    match (enabled, store, key) {
        (true, Some(store), Some(family)) => Some((store, family)),
        _ => None,
    }
}

/// The bucket a rate-limit check is charged to: one per key of the store, `(family, index)`
/// the request's key (as it picks it, `key_index`), or `None` for a local limiter, whose one
/// bucket (per instance) is 0. The simulator and the live runner both key their
/// `KeyedRateLimiter` so.
pub fn rate_limit_bucket(key: Option<(KeyFamilyId, u32)>) -> u64 {
    match key {
        Some((family, index)) => (u64::from(family.0) << 32) | u64::from(index),
        None => 0,
    }
}

/// Whether a rate-limit step's limiter decides the step's result, given the layer that refused
/// the step (`None` when none did): an open breaker around the store means the store was not
/// asked, which the limiter's `when_unreachable` answers as it would a timeout; a layer that
/// sheds the step refuses the request itself, and the limiter is not consulted.
pub fn limiter_decides(refused: Option<Outcome>) -> bool {
    refused.is_none_or(|outcome| outcome == Outcome::BreakerOpen)
}

/// What a rate limiter's store did for a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreAnswer {
    /// It answered (or the limiter is local): the limiter checks and charges.
    Answered,
    /// It could not be reached or was not asked: the limiter's `when_unreachable` decides.
    Unreachable,
}

/// A rate-limit step's result, as its limiter decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimitAnswer {
    pub result: StepResult,
    /// Admitted although the store was not reached (the fail-open count).
    pub failed_open: bool,
}

/// A rate-limit step's result from what its store's round trip returned (`io`: `Ok` for a
/// local limiter): a disabled limiter admits; otherwise `decide` asks the limiter (the
/// simulator's `RateLimiter` or the live form) about what the store did, and a refusal
/// (or a cost too large for the bucket) is `rate_limited`.
pub fn rate_limit_answer(
    enabled: bool,
    io: StepResult,
    decide: impl FnOnce(StoreAnswer) -> Decision,
) -> RateLimitAnswer {
    if !enabled {
        return RateLimitAnswer {
            result: StepResult::Ok,
            failed_open: false,
        };
    }
    let store = match io {
        StepResult::Ok | StepResult::Hit | StepResult::Miss => StoreAnswer::Answered,
        StepResult::Error(_) => StoreAnswer::Unreachable,
    };
    match decide(store) {
        Decision::Admit => RateLimitAnswer {
            result: StepResult::Ok,
            failed_open: store == StoreAnswer::Unreachable,
        },
        Decision::Reject { .. } | Decision::TooLarge => RateLimitAnswer {
            result: StepResult::Error(Outcome::RateLimited),
            failed_open: false,
        },
    }
}

/// Whether a step of a flow that went on past an error (`on_error = "next"`) with `kind`
/// let its request through unchecked (a fail-open of its Redis connection): Redis could not
/// be reached or was not asked. A lock found taken, or a rate limiter's refusal, is an
/// answer, not a fail-open.
pub fn fails_open(kind: Outcome) -> bool {
    !matches!(kind, Outcome::LockBusy | Outcome::RateLimited)
}

/// How a fire-and-forget step's end is counted: its error, or `ok`.
pub fn step_outcome(result: StepResult) -> Outcome {
    match result {
        StepResult::Error(kind) => kind,
        StepResult::Ok | StepResult::Hit | StepResult::Miss => Outcome::Ok,
    }
}

/// A breaker's state as its gauge reads it: 0 closed, 1 half-open, 2 open (a series shows the
/// worst state of each bucket).
pub fn breaker_level(state: BreakerState) -> u64 {
    match state {
        BreakerState::Closed => 0,
        BreakerState::HalfOpen => 1,
        BreakerState::Open => 2,
    }
}

/// What a breaker's harness counts beside its model (which counts its openings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BreakerTally {
    /// Calls it refused.
    pub rejected: u64,
    /// Transitions into half-open and into closed.
    pub half_opened: u64,
    pub closed: u64,
}

impl BreakerTally {
    /// A transition taken from the model (`Breaker::poll_transition`).
    pub fn transition(&mut self, transition: &Transition) {
        match transition.to {
            BreakerState::HalfOpen => self.half_opened += 1,
            BreakerState::Closed => self.closed += 1,
            BreakerState::Open => {}
        }
    }
}

/// What a bulkhead's harness counts beside its model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BulkheadTally {
    pub peak_in_use: u64,
    pub peak_queued: u64,
    pub shed: u64,
}

impl BulkheadTally {
    /// The permits out and the waiters queued now.
    pub fn occupancy(&mut self, in_use: u32, queued: u32) {
        self.peak_in_use = self.peak_in_use.max(u64::from(in_use));
        self.peak_queued = self.peak_queued.max(u64::from(queued));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of step result, as each classification takes it.
    #[test]
    fn a_layer_counts_what_its_set_lists() {
        let set = OutcomeSet::new([Outcome::Timeout]);
        let cases = [
            (
                StepResult::Ok,
                CallOutcome::Success,
                CallEnd::Success,
                false,
            ),
            (
                StepResult::Hit,
                CallOutcome::Success,
                CallEnd::Success,
                false,
            ),
            (
                StepResult::Miss,
                CallOutcome::Success,
                CallEnd::Success,
                false,
            ),
            (
                StepResult::Error(Outcome::Timeout),
                CallOutcome::Failure,
                CallEnd::Dropped,
                true,
            ),
            (
                StepResult::Error(Outcome::Shed),
                CallOutcome::Uncounted,
                CallEnd::Ignored,
                false,
            ),
        ];
        let classifier = BreakerClassifier {
            counts: set,
            ignores: OutcomeSet::new([]),
        };
        for (result, breaker, limit, retried) in cases {
            assert_eq!(breaker_outcome(classifier, result), breaker, "{result:?}");
            assert_eq!(adaptive_limit_end(set, result), limit, "{result:?}");
            assert_eq!(retries(set, result), retried, "{result:?}");
        }
    }

    /// An ignored error is neither success nor failure, even when `counts` lists it too.
    #[test]
    fn a_breaker_checks_what_it_ignores_before_what_it_counts() {
        let classifier = BreakerClassifier {
            counts: OutcomeSet::new([Outcome::Timeout, Outcome::Shed]),
            ignores: OutcomeSet::new([Outcome::Shed]),
        };
        let outcome = |kind| breaker_outcome(classifier, StepResult::Error(kind));
        assert_eq!(outcome(Outcome::Timeout), CallOutcome::Failure);
        assert_eq!(outcome(Outcome::Shed), CallOutcome::Ignored);
        assert_eq!(outcome(Outcome::BreakerOpen), CallOutcome::Uncounted);
    }

    #[test]
    fn a_rate_limiter_answers_a_store_it_did_not_reach_by_its_own_rule() {
        let reject = Decision::Reject {
            retry_after: outagelab_model::time::SimDuration::from_millis(1),
        };
        let cases = [
            // (enabled, store's result, the limiter's decision, step result, failed open)
            (
                false,
                StepResult::Error(Outcome::Timeout),
                reject,
                StepResult::Ok,
                false,
            ),
            (true, StepResult::Ok, Decision::Admit, StepResult::Ok, false),
            (
                true,
                StepResult::Ok,
                reject,
                StepResult::Error(Outcome::RateLimited),
                false,
            ),
            (
                true,
                StepResult::Error(Outcome::BreakerOpen),
                Decision::Admit,
                StepResult::Ok,
                true,
            ),
            (
                true,
                StepResult::Error(Outcome::Timeout),
                Decision::TooLarge,
                StepResult::Error(Outcome::RateLimited),
                false,
            ),
        ];
        for (enabled, io, decision, result, failed_open) in cases {
            let mut asked = None;
            let answer = rate_limit_answer(enabled, io, |store| {
                asked = Some(store);
                decision
            });
            assert_eq!(
                answer,
                RateLimitAnswer {
                    result,
                    failed_open
                },
                "{io:?}"
            );
            let expected = enabled.then_some(if matches!(io, StepResult::Error(_)) {
                StoreAnswer::Unreachable
            } else {
                StoreAnswer::Answered
            });
            assert_eq!(asked, expected, "{io:?}");
        }
        assert!(limiter_decides(None));
        assert!(limiter_decides(Some(Outcome::BreakerOpen)));
        assert!(!limiter_decides(Some(Outcome::Shed)));
    }
}

/// The toxic faults (`latency`, `bandwidth`, `packet_loss`, `slow_close`) in force on one
/// connection, in the order they started: what the live runner keeps per forwarder, as the
/// faults start and end. (The simulator knows every fault's start and end beforehand and
/// keeps each connection's toxics as a timeline instead: `redis::pipe::ToxicTimeline`.)
#[derive(Clone, Debug, Default)]
pub struct ToxicFaults(Vec<FaultKind>);

impl ToxicFaults {
    /// A toxic fault starts (`on`) or ends; returns what those in force add up to now.
    pub fn apply(&mut self, kind: FaultKind, on: bool) -> Toxics {
        if on {
            self.0.push(kind);
        } else if let Some(position) = self.0.iter().position(|&f| f == kind) {
            self.0.remove(position);
        }
        self.in_force()
    }

    /// What the faults in force add up to.
    pub fn in_force(&self) -> Toxics {
        Toxics::of(&self.0)
    }
}

/// What the toxics in force on one connection do to what it sends (either way): the
/// simulator's pipes and the live runner's forwarder both take it from [`Toxics::of`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Toxics {
    /// Added to every item's one-way latency.
    pub added: SimDuration,
    /// Each item's added delay is drawn uniformly from `added ± jitter` (at least zero).
    pub jitter: SimDuration,
    /// A bandwidth limit in force instead of the connection's own.
    pub bandwidth: Option<ByteRate>,
    /// The chance, per million, that one transmission of an item is lost (0: none), and the
    /// retransmission timeout it then waits before it is sent again (doubled at each loss).
    pub loss_ppm: u32,
    pub retransmit: SimDuration,
    /// How much later than its data a close reaches the other side.
    pub close_delay: SimDuration,
}

impl Toxics {
    /// The toxics of the `latency`, `bandwidth`, `packet_loss` and `slow_close` faults in
    /// `kinds`, in force together: delays, jitters and close delays add up (toxiproxy chains
    /// its toxics), the slowest bandwidth holds, losses combine and the longest retransmission
    /// timeout holds.
    /// Other kinds are not toxics and count for nothing.
    pub fn of<'a>(kinds: impl IntoIterator<Item = &'a FaultKind>) -> Toxics {
        let mut total = Toxics::default();
        for kind in kinds {
            match *kind {
                FaultKind::Latency { added, jitter } => {
                    total.added = total.added.saturating_add(added);
                    total.jitter = total.jitter.saturating_add(jitter);
                }
                FaultKind::Bandwidth(rate) => {
                    let slowest = total.bandwidth.map_or(rate, |held| {
                        if rate.bytes_per_second() < held.bytes_per_second() {
                            rate
                        } else {
                            held
                        }
                    });
                    total.bandwidth = Some(slowest);
                }
                FaultKind::PacketLoss { ppm, retransmit } => {
                    // Lost by one or the other: survives both with (1 - p1)(1 - p2).
                    // Rounded so that something always gets through (at most all but 1 ppm).
                    let survives = (u64::from(MILLION - total.loss_ppm)
                        * u64::from(MILLION - ppm.min(MILLION - 1)))
                    .div_ceil(u64::from(MILLION));
                    total.loss_ppm = MILLION - (survives as u32).max(1);
                    total.retransmit = total.retransmit.max(retransmit);
                }
                FaultKind::SlowClose { delay } => {
                    total.close_delay = total.close_delay.saturating_add(delay);
                }
                _ => {}
            }
        }
        total
    }

    /// The delay one item takes on top of its latency: `added`, or a draw from `draws`
    /// uniformly within `added ± jitter`, at least zero (no draw without a jitter).
    /// With a packet loss in force, the retransmissions are drawn after it (one draw per
    /// transmission): `retransmit × (2^k - 1)` more for `k` losses in a row.
    pub fn draw_delay(&self, draws: &mut Stream) -> SimDuration {
        let delay = self.draw_added(draws);
        if self.loss_ppm == 0 {
            return delay;
        }
        // Each loss waits the timeout, doubled from the last, up to Linux's TCP_RTO_MAX.
        let mut waited = SimDuration::ZERO;
        let mut timeout = self.retransmit;
        for _ in 0..Self::LOSSES_MAX {
            if draws.below(u64::from(MILLION)) >= u64::from(self.loss_ppm) {
                break;
            }
            waited = waited.saturating_add(timeout);
            timeout = timeout.saturating_add(timeout).min(Self::RETRANSMIT_MAX);
        }
        delay.saturating_add(waited)
    }

    /// The added delay of one item: `added`, or a draw from `draws` uniformly within
    /// `added ± jitter`, at least zero (no draw without a jitter).
    pub fn draw_added(&self, draws: &mut Stream) -> SimDuration {
        if self.jitter.is_zero() {
            return self.added;
        }
        let span = self.jitter.as_nanos().saturating_mul(2).saturating_add(1);
        let drawn = draws.below(span);
        let nanos =
            (self.added.as_nanos().saturating_add(drawn)).saturating_sub(self.jitter.as_nanos());
        SimDuration::from_nanos(nanos)
    }

    /// The longest a retransmission timeout grows to: Linux's `TCP_RTO_MAX`, 120 s.
    pub const RETRANSMIT_MAX: SimDuration = SimDuration::from_secs(120);

    /// The most losses in a row of one item: Linux gives a connection up after 15
    /// retransmissions (`tcp_retries2`); a run stops counting there.
    pub const LOSSES_MAX: u32 = 15;
}

const MILLION: u32 = 1_000_000;

//! resilience4j's own circuit-breaker tests, replayed against outagelab's breaker with the
//! `resilience4j` preset (each case's breaker is the preset with the test's options written
//! over it, as a scenario's keys override a preset).
//!
//! Sources: `resilience4j-circuitbreaker/src/test/java/io/github/resilience4j/circuitbreaker/
//! internal/CircuitBreakerStateMachineTest.java` at commit d4e3cb1 (resilience4j 2.x), and
//! `CircuitBreakerExceptionHandlingTest.java` at ebd49df. The state-machine test's `setUp`
//! breaker: failureRateThreshold 50, permittedNumberOfCallsInHalfOpenState 4,
//! maxWaitDurationInHalfOpenState 1s, slidingWindow(20, 5, TIME_BASED) (20 s in 20 one-second
//! buckets, at least 5 calls), waitDurationInOpenState 5s, ignoreExceptions
//! NumberFormatException (written `I` here: an ignored result, which stays ignored though the
//! preset counts unrecorded errors as successes), slowCallDurationThreshold 4s and
//! slowCallRateThreshold 50 (a slow call is admitted, then reported 5 s later; the Java tests
//! pass the duration to `onSuccess` / `onError` instead). An exception outside
//! `recordExceptions` is `U`: a success, by the preset's `uncounted_as`.
//!
//! The Java tests move the breaker by hand (`transitionToOpenState()`); the scripts here reach
//! the same state by calls: five failures at t = 0 open it, the wait of 5 s makes it
//! half-open.

use crate::common;

use common::*;
use outagelab_model::breaker::{BreakerConfig, Rejection, SlowCalls, Trip, Window};
use outagelab_model::presets::{BreakerPreset, RESILIENCE4J};

/// The test class's `setUp` breaker: the preset with its options.
fn set_up() -> BreakerConfig {
    let preset = BreakerPreset {
        trip: Trip::FailureRate {
            rate_permille: 500,
            window: Window::Time {
                length: secs(20),
                slots: 20,
            },
            min_calls: 5,
        },
        open_for: secs(5),
        open_for_max: secs(5),
        half_open_probes: 4,
        half_open_max_wait: Some(secs(1)),
        slow_calls: Some(SlowCalls {
            duration: secs(4),
            rate_permille: 500,
        }),
        ..RESILIENCE4J
    };
    preset.config().expect("valid")
}

/// The `setUp` breaker without its half-open limit, so that slow probes can report.
fn set_up_without_max_wait() -> BreakerConfig {
    set_up().with_half_open_max_wait(None).expect("valid")
}

/// `shouldTransitionToHalfOpenAfterWaitInterval`'s breaker: slidingWindowSize 5 (count based;
/// minimumNumberOfCalls is capped to it), 4 calls in half-open, and
/// `IntervalFunction.ofExponentialBackoff(5000)`: 5 s, then × 1.5 (its default multiplier).
fn wait_interval() -> BreakerConfig {
    let preset = BreakerPreset {
        trip: Trip::FailureRate {
            rate_permille: 500,
            window: Window::Calls(5),
            min_calls: 5,
        },
        open_for: secs(5),
        half_open_probes: 4,
        open_for_factor_permille: 1500,
        open_for_max: secs(3600),
        ..RESILIENCE4J
    };
    preset.config().expect("valid")
}

/// `CircuitBreakerExceptionHandlingTest`'s breaker: slidingWindowSize 5, the other options
/// the defaults (minimumNumberOfCalls 100, capped to the window's 5).
fn window_5() -> BreakerConfig {
    let preset = BreakerPreset {
        trip: Trip::FailureRate {
            rate_permille: 500,
            window: Window::Calls(5),
            min_calls: 5,
        },
        ..RESILIENCE4J
    };
    preset.config().expect("valid")
}

/// Five failures at t = 0: open (the Java tests' `transitionToOpenState()`).
const OPEN_AT_0: [Step; 7] = [
    At(0),
    Call(F),
    Call(F),
    Call(F),
    Call(F),
    Call(F),
    Expect(Open),
];

const BUSY: Rejection = Rejection::ProbesBusy;
const OPEN: Rejection = Rejection::Open;

#[test]
fn resilience4j_circuit_breaker_state_machine_test() {
    let cases = [
        Case {
            peer_test: "shouldOnlyPermitFourCallsInHalfOpenState (d4e3cb1)",
            differs: None,
            config: set_up,
            // The second half-open period is reached by letting maxWaitDurationInHalfOpenState
            // (1 s) expire, where the Java test calls transitionToOpenState().
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Expect(HalfOpen),
                    Admit,
                    Admit,
                    Admit,
                    Admit,
                    Reject(BUSY),
                    Reject(BUSY)
                ],
                [
                    At(6000),
                    Expect(Open),
                    At(11_000),
                    Admit,
                    Admit,
                    Admit,
                    Admit,
                    Reject(BUSY),
                    Reject(BUSY)
                ],
            ),
        },
        Case {
            peer_test: "shouldThrowCallNotPermittedExceptionWhenNotFurtherTestCallsArePermitted (d4e3cb1)",
            differs: None,
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [At(5000), Admit, Admit, Admit, Admit, Reject(BUSY)]
            ),
        },
        Case {
            peer_test: "shouldIncreaseCounterOnReleasePermission (d4e3cb1)",
            differs: None,
            // releasePermission() is an ignored result: the slot is free for another probe.
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Admit,
                    Admit,
                    Admit,
                    Admit,
                    Reject(BUSY),
                    Reject(BUSY),
                    Report(0, I),
                    Admit
                ],
            ),
        },
        Case {
            peer_test: "shouldOpenAfterFailureRateThresholdExceeded (d4e3cb1)",
            differs: None,
            // Three failures and two successes: the fifth call, a success, brings the window
            // to its minimum of 5 calls at 60% and opens it.
            config: set_up,
            script: &[
                At(0),
                Call(F),
                Expect(Closed),
                Call(F),
                Call(F),
                Expect(Closed),
                Call(S),
                Expect(Closed),
                Call(S),
                Expect(Open),
                Reject(OPEN),
            ],
        },
        Case {
            peer_test: "shouldOpenAfterFailureRateThresholdExceeded2 (d4e3cb1)",
            differs: None,
            config: set_up,
            script: &[
                At(0),
                Call(S),
                At(1000),
                Call(S),
                At(2000),
                Call(S),
                At(3000),
                Call(F),
                At(4000),
                Call(F),
                Expect(Closed),
                At(5000),
                Expect(Closed),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "shouldTransitionToHalfOpenAfterWaitDuration (d4e3cb1)",
            differs: None,
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    Reject(OPEN),
                    At(3000),
                    Expect(Open),
                    Reject(OPEN),
                    At(6000),
                    Admit,
                    Expect(HalfOpen)
                ],
            ),
        },
        Case {
            peer_test: "shouldTransitionToHalfOpenAfterWaitInterval (d4e3cb1)",
            differs: None,
            // The reopening waits 7.5 s: still open 6 s later, half-open 11 s later. Four
            // failed probes stand for the Java test's transitionToOpenState().
            config: wait_interval,
            script: script!(
                OPEN_AT_0,
                [
                    Reject(OPEN),
                    At(3000),
                    Reject(OPEN),
                    At(6000),
                    Admit,
                    Expect(HalfOpen)
                ],
                [
                    Admit,
                    Admit,
                    Admit,
                    Report(0, F),
                    Report(1, F),
                    Report(2, F),
                    Report(3, F)
                ],
                [
                    Expect(Open),
                    At(12_000),
                    Reject(OPEN),
                    At(17_000),
                    Admit,
                    Expect(HalfOpen)
                ],
            ),
        },
        Case {
            peer_test: "shouldTransitionBackToOpenStateWhenFailureRateIsAboveThreshold (d4e3cb1)",
            differs: None,
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Call(F),
                    Call(F),
                    Call(S),
                    Expect(HalfOpen),
                    Call(F),
                    Expect(Open)
                ],
            ),
        },
        Case {
            peer_test: "shouldTransitionBackToClosedStateWhenFailureIsBelowThreshold (d4e3cb1)",
            differs: None,
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Call(F),
                    Call(S),
                    Call(S),
                    Expect(HalfOpen),
                    Call(S),
                    Expect(Closed)
                ],
                [Call(S), Expect(Closed)],
            ),
        },
        Case {
            peer_test: "shouldReleasePermissionWhenExceptionIgnored (d4e3cb1)",
            differs: None,
            // Three successes, an ignored exception (its permission released), then a
            // failure: 1 failure in 4 probes is below 50%, so it closes.
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Call(S),
                    Call(S),
                    Call(S),
                    Call(I),
                    Expect(HalfOpen),
                    Call(F),
                    Expect(Closed)
                ],
            ),
        },
        Case {
            peer_test: "shouldIgnoreExceptionsAndThenTransitionToClosed (d4e3cb1)",
            differs: None,
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Call(I),
                    Call(I),
                    Call(I),
                    Call(I),
                    Expect(HalfOpen)
                ],
                [
                    Call(S),
                    Call(S),
                    Call(S),
                    Expect(HalfOpen),
                    Call(S),
                    Expect(Closed)
                ],
            ),
        },
        Case {
            peer_test: "circuitBreakerTransitionsToOpenAfterWaitDurationInHalfOpenState (d4e3cb1)",
            differs: Some(
                "resilience4j starts maxWaitDurationInHalfOpenState when it enters half-open; \
                 the test enters it by hand, with no call. outagelab counts the wait from the \
                 first probe, which is the same instant when half-open is entered by a call \
                 (automaticTransitionFromOpenToHalfOpenEnabled false, the default): with no \
                 probe it stays half-open, one second after a probe it opens",
            ),
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Expect(HalfOpen),
                    At(7000),
                    Expect(HalfOpen),
                    Admit,
                    At(8000),
                    Expect(Open)
                ],
            ),
        },
        Case {
            peer_test: "shouldOpenAfterSlowCallRateThresholdExceeded (d4e3cb1)",
            differs: None,
            // Slow failure, slow success, fast failure, fast success, slow success: 3 slow
            // calls in 5 (60%) open it, though 2 failures in 5 (40%) would not.
            config: set_up,
            script: &[
                At(0),
                Admit,
                At(5000),
                Report(0, F),
                Admit,
                At(10_000),
                Report(1, S),
                Expect(Closed),
                Call(F),
                Call(S),
                Expect(Closed),
                Admit,
                At(15_000),
                Report(2, S),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "shouldOpenAfterSlowCallRateThresholdExceededUsingMockClock (d4e3cb1)",
            differs: None,
            // Calls of 5, 5, 1, 1 and 5 seconds, all successful.
            config: set_up,
            script: &[
                At(0),
                Admit,
                At(5000),
                Report(0, S),
                Admit,
                At(10_000),
                Report(1, S),
                Admit,
                At(11_000),
                Report(2, S),
                Admit,
                At(12_000),
                Report(3, S),
                Expect(Closed),
                Admit,
                At(17_000),
                Report(4, S),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "shouldTransitionBackToOpenStateWhenSlowCallRateIsAboveThreshold (d4e3cb1)",
            differs: None,
            // Four successful probes, three of them slow (75%): it reopens. Without the 1 s
            // half-open limit, which slow probes outlast in time (see the next case).
            config: set_up_without_max_wait,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Admit,
                    Admit,
                    Admit,
                    Admit,
                    At(6000),
                    Report(3, S),
                    Expect(HalfOpen)
                ],
                [
                    At(10_000),
                    Report(0, S),
                    Report(1, S),
                    Expect(HalfOpen),
                    Report(2, S),
                    Expect(Open)
                ],
            ),
        },
        Case {
            peer_test: "shouldTransitionBackToOpenStateWhenSlowCallRateIsAboveThreshold, with maxWaitDurationInHalfOpenState 1s (d4e3cb1)",
            differs: Some(
                "in the Java test the durations are arguments and no time passes, so the 1 s \
                 half-open limit never fires; replayed in time, slow probes outlast it: the \
                 breaker reopens at 1 s, before any slow probe reports",
            ),
            config: set_up,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Admit,
                    Admit,
                    Admit,
                    Admit,
                    At(6000),
                    Expect(Open),
                    Reject(OPEN),
                    Opened(2)
                ],
            ),
        },
        Case {
            peer_test: "CircuitBreakerExceptionHandlingTest.shouldRecordIOExceptionAsFailureAndBusinessExceptionAsSuccess (ebd49df)",
            differs: None,
            // recordExceptions(IOException): a BusinessException is not recorded, so a success.
            config: window_5,
            script: &[At(0), Call(F), Call(U), Window(2, 1), Expect(Closed)],
        },
        Case {
            peer_test: "CircuitBreakerExceptionHandlingTest.shouldIgnoreNumberFormatException (ebd49df)",
            differs: None,
            // ignoreExceptions(NumberFormatException): neither a success nor a failure.
            config: window_5,
            script: &[At(0), Call(F), Call(I), Window(1, 1), Expect(Closed)],
        },
    ];
    check(&cases, 18);
}

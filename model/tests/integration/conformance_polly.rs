//! Polly v8's own circuit-breaker tests, replayed against outagelab's breaker with the
//! `polly-v8` preset.
//!
//! Sources (App-vNext/Polly, `test/Polly.Core.Tests/CircuitBreaker/Controller/`):
//! `AdvancedCircuitBehaviorTests.cs` at commit 07124ac and `CircuitStateControllerTests.cs`
//! at commit 053deaa (Polly 8.x); `Health/SingleHealthMetricsTests.cs` and the rule of
//! `src/Polly.Core/CircuitBreaker/Health/HealthMetrics.cs` (`Create`: a sampling duration under
//! 200 ms is one window) at 173d6d1 (8.7). The controller tests mock the breaking decision ("the next
//! failure breaks"); here that is the preset with `min_calls = 1`, whose first failure opens
//! it. Polly v7's AdvancedCircuitBreaker specs are not replayed (the `polly-v7-advanced`
//! preset has no case of its own).

use crate::common;

use common::*;
use outagelab_model::SimDuration;
use outagelab_model::breaker::{BreakerConfig, Rejection, Trip, Window};
use outagelab_model::presets::{BreakerPreset, POLLY_V8};

/// The preset with the test's SamplingDuration and MinimumThroughput (FailureRatio 0.1, the
/// default); the window has the slots Polly gives that duration (`HealthMetrics.Create`: one
/// window under 200 ms, ten from 200 ms).
fn sampling(length: SimDuration, min_calls: u32) -> BreakerConfig {
    let preset = BreakerPreset {
        trip: Trip::FailureRate {
            rate_permille: 100,
            window: Window::Time {
                length,
                slots: POLLY_V8.window_slots(length),
            },
            min_calls,
        },
        ..POLLY_V8
    };
    preset.config().expect("valid")
}

/// The preset with the sampling of `AdvancedCircuitBehaviorTests`: MinimumThroughput 10 (the
/// test's `minimumThruput`), over the preset's 30 s window.
fn behavior() -> BreakerConfig {
    sampling(secs(30), 10)
}

/// The preset whose next failure breaks, as `CircuitStateControllerTests`' mocked behaviour:
/// BreakDuration 5 s (the default), one probe.
fn controller() -> BreakerConfig {
    sampling(secs(30), 1)
}

/// A short sampling duration and a MinimumThroughput of 2: Polly keeps 150 ms as a single
/// window, so the preset's slots for it are one, not ten.
fn short_window() -> BreakerConfig {
    sampling(SimDuration::from_millis(150), 2)
}

/// `SingleHealthMetricsTests`' 100 ms sampling duration, with the preset's other values.
fn window_100ms() -> BreakerConfig {
    sampling(SimDuration::from_millis(100), 100)
}

const OPEN_AT_0: [Step; 3] = [At(0), Call(F), Expect(Open)];
/// `TransitionToState(HalfOpen)`: open, wait BreakDuration, one pre-execution (the probe,
/// call 0).
const HALF_OPEN: [Step; 6] = [
    At(0),
    Call(F),
    Expect(Open),
    At(5000),
    Admit,
    Expect(HalfOpen),
];

#[test]
fn polly_v8_circuit_breaker_tests() {
    let cases = [
        // OnActionFailure_WhenClosed_EnsureCorrectBehavior(throughput, minimumThruput,
        // failureRate, failureThreshold, expectedShouldBreak): the mocked health info becomes
        // that many calls in the window, the last one the failure being reported.
        Case {
            peer_test: "AdvancedCircuitBehaviorTests.OnActionFailure_WhenClosed_EnsureCorrectBehavior(10, 10, 0.1, 0.1, true) (07124ac)",
            differs: None,
            config: behavior,
            script: &[
                At(0),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "AdvancedCircuitBehaviorTests.OnActionFailure_WhenClosed_EnsureCorrectBehavior(10, 10, 0.2, 0.1, true) (07124ac)",
            differs: None,
            config: behavior,
            script: &[
                At(0),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(F),
                Expect(Closed),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "AdvancedCircuitBehaviorTests.OnActionFailure_WhenClosed_EnsureCorrectBehavior(11, 10, 0.2, 0.1, true) (07124ac)",
            differs: None,
            // 2 failures in 11 calls (0.18, the nearest to 0.2 at 11 calls); the first
            // failure came before the minimum throughput.
            config: behavior,
            script: &[
                At(0),
                Call(F),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Expect(Closed),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "AdvancedCircuitBehaviorTests.OnActionFailure_WhenClosed_EnsureCorrectBehavior(9, 10, 0.1, 0.1, false) (07124ac)",
            differs: None,
            // Below the minimum throughput: 9 calls, one failure.
            config: behavior,
            script: &[
                At(0),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(F),
                Expect(Closed),
            ],
        },
        Case {
            peer_test: "AdvancedCircuitBehaviorTests.OnActionFailure_WhenClosed_EnsureCorrectBehavior(10, 10, 0.0, 0.1, false) (07124ac)",
            differs: None,
            // A reported failure is in the window, so a rate of 0 cannot follow one; the
            // nearest rate below the threshold: 1 failure in 11 calls (0.09).
            config: behavior,
            script: &[
                At(0),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(F),
                Expect(Closed),
            ],
        },
        Case {
            peer_test: "CircuitStateControllerTests.OnActionSuccess_EnsureCorrectBehavior(Closed, Closed) (053deaa)",
            differs: None,
            // A success never breaks a closed circuit, even the one that brings the window to
            // the minimum throughput at 10% (evaluate_on = "failure"); the next failure does.
            config: behavior,
            script: &[
                At(0),
                Call(F),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Expect(Closed),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "CircuitStateControllerTests.OnActionPreExecute_HalfOpen (053deaa)",
            differs: None,
            config: controller,
            script: script!(
                OPEN_AT_0,
                [
                    At(5000),
                    Admit,
                    Reject(Rejection::ProbesBusy),
                    Expect(HalfOpen)
                ],
            ),
        },
        Case {
            peer_test: "CircuitStateControllerTests.HalfOpen_EnsureCorrectStateTransitionAfterExecution(true) (053deaa)",
            differs: None,
            config: controller,
            script: script!(HALF_OPEN, [Report(0, S), Expect(Closed)]),
        },
        Case {
            peer_test: "CircuitStateControllerTests.HalfOpen_EnsureCorrectStateTransitionAfterExecution(false) (053deaa)",
            differs: None,
            config: controller,
            script: script!(HALF_OPEN, [Report(0, F), Expect(Open), Opened(2)]),
        },
        Case {
            peer_test: "CircuitStateControllerTests.Flow_Closed_HalfOpen_Open_HalfOpen_Closed (053deaa)",
            differs: None,
            config: controller,
            script: script!(
                HALF_OPEN,
                [
                    Report(0, F),
                    Expect(Open),
                    At(5001),
                    Reject(Rejection::Open)
                ],
                [
                    At(15_001),
                    Admit,
                    Expect(HalfOpen),
                    Report(1, S),
                    Expect(Closed)
                ],
            ),
        },
        Case {
            peer_test: "CircuitStateControllerTests.HalfOpen_EnsureBreakDuration (053deaa)",
            differs: Some(
                "Polly blocks the half-open circuit for one BreakDuration after admitting the \
                 probe, then admits another if the first has not answered; outagelab keeps \
                 the slot for the probe until it answers (or, with half_open_max_wait, opens \
                 again)",
            ),
            config: controller,
            script: script!(HALF_OPEN, [At(10_000), Reject(Rejection::ProbesBusy)]),
        },
        Case {
            peer_test: "SingleHealthMetricsTests.Increment_Ok (173d6d1)",
            differs: None,
            config: window_100ms,
            script: &[
                At(0),
                Call(F),
                Call(S),
                Call(S),
                Call(S),
                Call(S),
                Window(5, 1),
            ],
        },
        Case {
            peer_test: "SingleHealthMetricsTests.SamplingDurationRespected_Ok (173d6d1)",
            differs: None,
            config: window_100ms,
            script: &[At(0), Call(S), Call(S), Window(2, 0), At(100), Window(0, 0)],
        },
        Case {
            peer_test: "HealthMetrics.Create: a 150 ms sampling duration is one window (173d6d1)",
            differs: None,
            // Two failures 20 ms apart on either side of the single window's end at 150 ms:
            // Polly's window holds one of them, below MinimumThroughput 2, so it stays closed.
            // Ten slots of 15 ms would still hold both (100% of 2) and open.
            config: short_window,
            script: &[
                At(140),
                Call(F),
                At(160),
                Call(F),
                Window(1, 1),
                Expect(Closed),
            ],
        },
    ];
    check(&cases, 14);
}

//! sony/gobreaker's own tests, replayed against outagelab's breaker.
//!
//! Source: `v2/gobreaker_test.go` at commit 0a18939 (gobreaker v2), replayed with the
//! `gobreaker` preset. The tests move the breaker's expiry back (`pseudoSleep`); here time
//! moves forward instead.

use crate::common;

use common::*;
use outagelab_model::breaker::{BreakerConfig, Rejection, Trip, Window};
use outagelab_model::presets::{BreakerPreset, GOBREAKER};

fn defaults() -> BreakerConfig {
    GOBREAKER.config().expect("valid")
}

/// `newCustom()`, the preset with its settings: MaxRequests 3, Interval 30s (the counts are
/// cleared every 30 s from the start: a tumbling window of one 30 s slot), Timeout 90s,
/// ReadyToTrip `requests >= 3 && failureRatio >= 0.6`, asked only after a failure (the
/// preset's `evaluate_on`).
fn custom() -> BreakerConfig {
    let preset = BreakerPreset {
        trip: Trip::FailureRate {
            rate_permille: 600,
            window: Window::Time {
                length: secs(30),
                slots: 1,
            },
            min_calls: 3,
        },
        open_for: secs(90),
        open_for_max: secs(90),
        half_open_probes: 3,
        ..GOBREAKER
    };
    preset.config().expect("valid")
}

const BUSY: Rejection = Rejection::ProbesBusy;

#[test]
fn gobreaker_tests() {
    let cases = [
        Case {
            peer_test: "TestDefaultCircuitBreaker (v2, 0a18939)",
            differs: None,
            config: defaults,
            script: &[
                At(0),
                Call(F),
                Call(F),
                Call(F),
                Call(F),
                Call(F),
                Expect(Closed),
                Call(S),
                Expect(Closed),
                Call(F),
                Expect(Closed),
                // 6 consecutive failures.
                Call(F),
                Call(F),
                Call(F),
                Call(F),
                Call(F),
                Expect(Open),
                Reject(Rejection::Open),
                Reject(Rejection::Open),
                At(59_000),
                Expect(Open),
                At(60_000),
                Expect(HalfOpen),
                Call(F),
                Expect(Open),
                At(120_000),
                Expect(HalfOpen),
                Call(S),
                Expect(Closed),
            ],
        },
        Case {
            peer_test: "TestCustomCircuitBreaker (v2, 0a18939)",
            differs: None,
            config: custom,
            script: &[
                At(0),
                Call(S),
                Call(F),
                Call(S),
                Call(F),
                Call(S),
                Call(F),
                Call(S),
                Call(F),
                Call(S),
                Call(F),
                Expect(Closed),
                At(29_000),
                Call(S),
                Expect(Closed),
                // Over the interval: the counts start again.
                At(30_000),
                Call(F),
                Expect(Closed),
                Call(S),
                Call(F),
                Expect(Open),
                At(120_000),
                Expect(HalfOpen),
                Call(S),
                Call(S),
                Expect(HalfOpen),
                Admit,
                Reject(BUSY),
                At(120_100),
                Report(0, S),
                Expect(Closed),
            ],
        },
    ];
    check(&cases, 2);
}

//! opossum's own tests, replayed against outagelab's breaker with the `opossum` preset.
//!
//! Sources (nodeshift/opossum, `test/`): `error-filter-test.js` at 036ef2e,
//! `half-open-test.js` at 03d0b66, `volume-threshold-test.js` at 0039ee1, `warmup-test.js` at
//! 57aad75, and the rule in `lib/circuit.js`'s `fail()`: nothing while `warmUp`, then open when
//! `errorRate > errorThresholdPercentage`, strictly.
//! The tests set `errorThresholdPercentage: 1`: 1% with the preset's `threshold = "exceeded"`,
//! strictly above, as opossum compares. An error the test's
//! `errorFilter` accepts is `U` here (not recorded), counted as a success by the preset's
//! `uncounted_as = "success"`, as opossum emits `success` for it.

use crate::common;

use common::*;
use outagelab_model::SimDuration;
use outagelab_model::breaker::{BreakerConfig, Rejection, Trip, Window};
use outagelab_model::presets::{BreakerPreset, OPOSSUM};

/// The preset with the tests' options: 1% (exceeded, the preset's), `resetTimeout`, `volumeThreshold`
/// (0 is a minimum of 1 call).
fn options(reset_timeout_ms: u64, volume_threshold: u32) -> BreakerConfig {
    let preset = BreakerPreset {
        trip: Trip::FailureRate {
            rate_permille: 10,
            window: Window::Time {
                length: secs(10),
                slots: 10,
            },
            min_calls: volume_threshold.max(1),
        },
        open_for: SimDuration::from_millis(reset_timeout_ms),
        open_for_max: SimDuration::from_millis(reset_timeout_ms),
        ..OPOSSUM
    };
    preset.config().expect("valid")
}

fn reset_10s() -> BreakerConfig {
    options(10_000, 0)
}

fn reset_100ms() -> BreakerConfig {
    options(100, 0)
}

fn volume_3() -> BreakerConfig {
    options(100, 3)
}

fn volume_2() -> BreakerConfig {
    options(300, 2)
}

/// `warmup-test.js`' options: 1%, `resetTimeout` 100 ms, `allowWarmUp: true` over a
/// `rollingCountTimeout` of `rolling_ms` (the warm-up lasts one rolling window).
fn warm_up(rolling_ms: u64) -> BreakerConfig {
    let rolling = SimDuration::from_millis(rolling_ms);
    let preset = BreakerPreset {
        trip: Trip::FailureRate {
            rate_permille: 10,
            window: Window::Time {
                length: rolling,
                slots: 10,
            },
            min_calls: 1,
        },
        open_for: SimDuration::from_millis(100),
        open_for_max: SimDuration::from_millis(100),
        warm_up: Some(rolling),
        ..OPOSSUM
    };
    preset.config().expect("valid")
}

fn warm_up_default() -> BreakerConfig {
    warm_up(10_000)
}

fn warm_up_500ms() -> BreakerConfig {
    warm_up(500)
}

fn defaults() -> BreakerConfig {
    OPOSSUM.config().expect("valid")
}

#[test]
fn opossum_tests() {
    let cases = [
        Case {
            peer_test: "error-filter-test.js: Bypasses failure stats if errorFilter returns true (036ef2e)",
            differs: None,
            config: reset_10s,
            script: &[At(0), Call(U), Window(1, 0), Expect(Closed)],
        },
        Case {
            peer_test: "error-filter-test.js: Increments failure stats if errorFilter returns false (036ef2e)",
            differs: None,
            config: reset_10s,
            script: &[At(0), Call(F), Expect(Open)],
        },
        Case {
            peer_test: "error-filter-test.js: Increments failure stats if no filter is provided (036ef2e)",
            differs: None,
            config: reset_10s,
            script: &[At(0), Call(F), Expect(Open)],
        },
        Case {
            peer_test: "half-open-test.js: When half-open, the circuit only allows one request through (03d0b66)",
            differs: None,
            // The probe fails after 500 ms; meanwhile and afterwards other calls are refused.
            config: reset_100ms,
            script: &[
                At(0),
                Call(F),
                Expect(Open),
                At(150),
                Expect(HalfOpen),
                Admit,
                Reject(Rejection::ProbesBusy),
                At(650),
                Report(0, F),
                Expect(Open),
                Reject(Rejection::Open),
            ],
        },
        Case {
            peer_test: "half-open-test.js: When half-open, a filtered error should close the circuit (03d0b66)",
            differs: None,
            config: reset_100ms,
            script: &[
                At(0),
                Call(F),
                Expect(Open),
                At(150),
                Expect(HalfOpen),
                Call(U),
                Expect(Closed),
            ],
        },
        Case {
            peer_test: "volume-threshold-test.js: By default does not have a volume threshold (0039ee1)",
            differs: None,
            config: reset_100ms,
            script: &[At(0), Call(F), Expect(Open)],
        },
        Case {
            peer_test: "volume-threshold-test.js: Has a volume threshold before tripping when option is provided (0039ee1)",
            differs: None,
            config: volume_3,
            script: &[
                At(0),
                Call(F),
                Expect(Closed),
                Call(F),
                Expect(Closed),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "volume-threshold-test.js: volume threshold does not affect halfOpen state (0039ee1)",
            differs: None,
            config: volume_2,
            script: &[
                At(0),
                Call(F),
                Expect(Closed),
                Call(F),
                Expect(Open),
                At(450),
                Expect(HalfOpen),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "lib/circuit.js fail(): errorRate > errorThresholdPercentage, default 50 (opossum 8.1)",
            differs: None,
            // 1 failure in 2 calls is 50%, not above 50%: closed; 2 in 3 opens.
            config: defaults,
            script: &[
                At(0),
                Call(S),
                Call(F),
                Expect(Closed),
                Call(F),
                Expect(Open),
            ],
        },
        Case {
            peer_test: "warmup-test.js: By default does not allow for warmup (57aad75)",
            differs: None,
            config: reset_100ms,
            script: &[At(0), Call(F), Expect(Open)],
        },
        Case {
            peer_test: "warmup-test.js: Allows for warmup when option is provided (57aad75)",
            differs: None,
            config: warm_up_default,
            script: &[At(0), Call(F), Expect(Closed)],
        },
        Case {
            peer_test: "warmup-test.js: Only warms up for rollingCountTimeout (57aad75)",
            differs: None,
            // The test checks that `warmUp` is false at 500 ms; here a failure at 500 ms opens
            // the breaker, which `fail()` does once `warmUp` is false.
            config: warm_up_500ms,
            script: &[
                At(0),
                Call(F),
                Expect(Closed),
                At(499),
                Call(F),
                Expect(Closed),
                At(500),
                Call(F),
                Expect(Open),
            ],
        },
    ];
    check(&cases, 12);
}

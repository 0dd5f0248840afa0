//! When an open loop's requests arrive: [`OpenLoopClock`] gives the instant of each arrival of
//! an even, Poisson or staged load, one after another. The simulator and the live runner
//! (`outagelab-live`) both take their instants from it, so a live run sends when the
//! simulation did.
//!
//! A staged load ([`RateStages`]) follows a piecewise-linear rate `r(t)`. Its arrivals are
//! placed on the curve's integral `Λ(t) = ∫ r`, the expected number of requests sent by `t`:
//! an even load's arrival `i` is at the instant `Λ` reaches `i` (so a single flat stage gives
//! the instants of the constant-rate even load), a Poisson load's arrivals are at the instants
//! `Λ` reaches the running sum of exponential draws of mean 1 (time rescaling: exactly a
//! Poisson process of rate `r(t)`). Where the rate is zero nothing arrives; an arrival due
//! where the rate comes back is at the instant it does.
//!
//! Positions on `Λ` are kept in integers (half of a 10^-12 request, so a stage's area is an
//! integer); the instant inside a stage is the root of a quadratic, computed in `f64` and
//! then corrected in integers to the exact floor wherever the products fit in 128 bits (a
//! stage of up to ~2 hours at 10^9 requests/s, far longer at lower rates), so instants are the
//! same on every machine and exact in every test.

use outagelab_model::time::{SimDuration, SimTime};

use crate::rng::Stream;
use crate::scenario::{Arrivals, LoadEnd, Rate, RateStages};

/// Half-units (see the module's doc) in one request: a rate in thousandths of a request per
/// second times nanoseconds is 10^-12 requests, and positions count halves of that.
const HALF_UNITS_PER_REQUEST: u128 = 2_000_000_000_000;

/// The arrival instants of one open-loop load. Invariant: instants never decrease, and none
/// is at or after the load's end (`LoadEnd::Until`, or a staged load's last stage end).
#[derive(Clone, Debug)]
pub struct OpenLoopClock {
    start: SimTime,
    /// Arrivals sent so far (the load's own, never a caller's retries).
    sent: u64,
    shape: Shape,
}

#[derive(Clone, Debug)]
enum Shape {
    Even {
        rate: Rate,
        end: LoadEnd,
    },
    Poisson {
        rate: Rate,
        end: LoadEnd,
        /// The next arrival, in nanoseconds with 32 fractional bits, so gaps shorter than a
        /// nanosecond still add up to the right rate.
        next_q32: u128,
    },
    Staged {
        poisson: bool,
        stages: StageCursor,
        /// The next arrival's position on `Λ`, in half-units.
        position: u128,
    },
}

impl OpenLoopClock {
    /// The clock of an even, Poisson or staged load starting at `start`, with the instant of
    /// its first arrival; `None` for a burst, a closed loop, or a load that sends nothing.
    pub fn first(start: SimTime, arrivals: &Arrivals) -> Option<(OpenLoopClock, SimTime)> {
        let (shape, first) = match arrivals {
            Arrivals::Burst { .. } | Arrivals::Closed(_) => return None,
            &Arrivals::Even { rate, end } | &Arrivals::Poisson { rate, end } => {
                let sends = match end {
                    LoadEnd::Count(count) => count > 0,
                    LoadEnd::Until(until) => start < until,
                };
                if !sends {
                    return None;
                }
                let shape = if matches!(arrivals, Arrivals::Even { .. }) {
                    Shape::Even { rate, end }
                } else {
                    Shape::Poisson {
                        rate,
                        end,
                        next_q32: u128::from(start.as_nanos()) << 32,
                    }
                };
                (shape, start)
            }
            Arrivals::Staged { stages, poisson } => {
                let mut cursor = StageCursor::new(start, stages.clone());
                let first = cursor.instant_of(0)?;
                let shape = Shape::Staged {
                    poisson: *poisson,
                    stages: cursor,
                    position: 0,
                };
                (shape, first)
            }
        };
        let clock = OpenLoopClock {
            start,
            sent: 0,
            shape,
        };
        Some((clock, first))
    }

    /// The instant of the next arrival, now that one was sent; `None` once the load has
    /// ended. A Poisson load draws its gap from `stream` (the load's stream, after the
    /// arrival's own draws); an even one draws nothing.
    pub fn next(&mut self, stream: &mut Stream) -> Option<SimTime> {
        self.sent += 1;
        let sent = self.sent;
        match &mut self.shape {
            Shape::Even { rate, end } => {
                let next = rate
                    .even_offset(sent)
                    .and_then(|offset| self.start.checked_add(offset))?;
                within(*end, sent, next)
            }
            Shape::Poisson {
                rate,
                end,
                next_q32,
            } => {
                let gap = rate.exponential_gap_q32(stream.neg_ln_uniform_q32());
                *next_q32 = next_q32.saturating_add(gap);
                let next = SimTime::from_nanos(u64::try_from(*next_q32 >> 32).ok()?);
                within(*end, sent, next)
            }
            Shape::Staged {
                poisson,
                stages,
                position,
            } => {
                *position = if *poisson {
                    let gap =
                        (u128::from(stream.neg_ln_uniform_q32()) * HALF_UNITS_PER_REQUEST) >> 32;
                    position.saturating_add(gap)
                } else {
                    u128::from(sent) * HALF_UNITS_PER_REQUEST
                };
                stages.instant_of(*position)
            }
        }
    }
}

/// `next`, if a load ending at `end` sends it after `sent` requests.
fn within(end: LoadEnd, sent: u64, next: SimTime) -> Option<SimTime> {
    let more = match end {
        LoadEnd::Count(count) => sent < count,
        LoadEnd::Until(until) => next < until,
    };
    more.then_some(next)
}

/// Where a staged load is on its curve: the stage that holds the next arrival, and `Λ` at
/// that stage's start. Positions asked of it never decrease, so it only moves forward.
#[derive(Clone, Debug)]
struct StageCursor {
    stages: RateStages,
    /// The current stage's index (`stages.len()` once past the last).
    index: usize,
    /// The current stage's start.
    stage_start: SimTime,
    /// The rate at the current stage's start, in thousandths of a request per second.
    from_milli: u64,
    /// `Λ` at the current stage's start, in half-units.
    base: u128,
}

impl StageCursor {
    fn new(start: SimTime, stages: RateStages) -> StageCursor {
        StageCursor {
            from_milli: stages.start_milli,
            stages,
            index: 0,
            stage_start: start,
            base: 0,
        }
    }

    /// The instant `Λ` passes `position` (the first instant after which it is above it), or
    /// `None` if it does not before the last stage ends.
    fn instant_of(&mut self, position: u128) -> Option<SimTime> {
        loop {
            let stage = *self.stages.stages.get(self.index)?;
            let duration = stage.duration.as_nanos();
            let area = u128::from(self.from_milli + stage.target_milli) * u128::from(duration);
            let local = position - self.base;
            if local < area {
                let offset = offset_in_stage(self.from_milli, stage.target_milli, duration, local);
                return self
                    .stage_start
                    .checked_add(SimDuration::from_nanos(offset));
            }
            self.base += area;
            self.stage_start = self.stage_start.checked_add(stage.duration)?;
            self.from_milli = stage.target_milli;
            self.index += 1;
        }
    }
}

/// The offset in a stage of `duration` ns, whose rate goes linearly from `from` to `to`
/// (thousandths per second), at which twice its integral reaches `local` half-units: the floor
/// of the root `τ` of `H(τ) = 2·from·τ + (to − from)·τ²/duration = local`, for
/// `local < H(duration)`. Below `duration`.
fn offset_in_stage(from: u64, to: u64, duration: u64, local: u128) -> u64 {
    if from == to {
        // A held rate (not zero: the stage's area is above `local`).
        let offset = local / (2 * u128::from(from));
        return u64::try_from(offset).expect("below the stage's duration");
    }
    let slope = i128::from(to) - i128::from(from);
    let (d, r0, h) = (duration as f64, from as f64, local as f64);
    let discriminant = (d * d * r0 * r0 + slope as f64 * d * h).max(0.0);
    let root = d * h / (d * r0 + discriminant.sqrt());
    let last = duration - 1;
    let mut offset = if root.is_finite() {
        (root.floor() as u64).min(last)
    } else {
        0
    };
    // The exact floor, where the products fit: the largest `τ` with `duration·H(τ) <= duration·local`.
    let scaled = |tau: u64| -> Option<i128> {
        let tau = i128::from(tau);
        let linear = 2i128
            .checked_mul(i128::from(duration))?
            .checked_mul(i128::from(from))?
            .checked_mul(tau)?;
        let square = slope.checked_mul(tau)?.checked_mul(tau)?;
        linear.checked_add(square)
    };
    let Some(target) = i128::try_from(local)
        .ok()
        .and_then(|local| local.checked_mul(i128::from(duration)))
    else {
        return offset;
    };
    for _ in 0..8 {
        match scaled(offset) {
            Some(value) if value > target && offset > 0 => offset -= 1,
            _ => break,
        }
    }
    for _ in 0..8 {
        match scaled(offset + 1) {
            Some(value) if value <= target && offset < last => offset += 1,
            _ => break,
        }
    }
    offset
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::RateStage;

    fn stages(start_per_s: u64, stages: &[(u64, u64)]) -> Arrivals {
        Arrivals::Staged {
            stages: RateStages {
                start_milli: start_per_s * 1000,
                stages: stages
                    .iter()
                    .map(|&(millis, target_per_s)| RateStage {
                        duration: SimDuration::from_millis(millis),
                        target_milli: target_per_s * 1000,
                    })
                    .collect(),
            },
            poisson: false,
        }
    }

    fn instants(start: SimTime, arrivals: &Arrivals) -> Vec<u64> {
        let mut stream = Stream::derive(1, "test", "clock");
        let Some((mut clock, first)) = OpenLoopClock::first(start, arrivals) else {
            return Vec::new();
        };
        let mut all = vec![first.as_nanos()];
        while let Some(next) = clock.next(&mut stream) {
            assert!(
                next.as_nanos() >= *all.last().unwrap(),
                "instants never go back"
            );
            all.push(next.as_nanos());
            assert!(all.len() < 1_000_000, "bounded");
        }
        all
    }

    #[test]
    fn a_ramp_from_zero_sends_where_its_integral_reaches_each_request() {
        // 0 -> 1000/s over 1 s: Λ(t) = 500·t², so arrival i is at sqrt(i / 500) s.
        let all = instants(SimTime::ZERO, &stages(0, &[(1000, 1000)]));
        assert_eq!(all.len(), 500, "the area under the ramp");
        assert_eq!(all[0], 0);
        assert_eq!(all[1], 44_721_359); // sqrt(1/500) s = 44.7213595 ms
        assert_eq!(all[2], 63_245_553); // sqrt(2/500) s = 63.2455532 ms
        assert_eq!(all[499], 998_999_499); // sqrt(499/500) s = 998.9994995 ms
    }

    #[test]
    fn a_ramp_down_sends_densely_first() {
        // 1000/s -> 0 over 1 s: Λ(t) = 1000·t − 500·t²; arrival 1 at (1 − sqrt(1 − 1/500)) s.
        let all = instants(SimTime::ZERO, &stages(1000, &[(1000, 0)]));
        assert_eq!(all.len(), 500);
        assert_eq!(all[1], 1_000_500); // 1.0005005 ms
        assert_eq!(all[499], 955_278_640); // 1 − sqrt(1/500) s
    }

    #[test]
    fn one_flat_stage_gives_the_constant_loads_instants() {
        let start = SimTime::from_nanos(7_000_000);
        let rate = Rate::per_second(333.333).unwrap();
        let constant = Arrivals::Even {
            rate,
            end: LoadEnd::Until(start.saturating_add(SimDuration::from_secs(3))),
        };
        let staged = Arrivals::Staged {
            stages: RateStages {
                start_milli: 333_333,
                stages: vec![RateStage {
                    duration: SimDuration::from_secs(3),
                    target_milli: 333_333,
                }],
            },
            poisson: false,
        };
        let expected = instants(start, &constant);
        assert_eq!(expected.len(), 1000);
        assert_eq!(instants(start, &staged), expected);
    }

    #[test]
    fn nothing_arrives_while_the_rate_is_zero() {
        // Hold 0 for 2 s, step to 10/s for 1 s, back to 0: the first arrival is where the rate
        // comes back, and 10 arrive, 100 ms apart.
        let all = instants(SimTime::ZERO, &stages(0, &[(2000, 0), (1, 10), (999, 10)]));
        assert_eq!(all.len(), 10);
        assert_eq!(all[0], 2_000_000_000);
        assert!(
            all[1] > 2_100_000_000 && all[1] < 2_101_000_000,
            "{}",
            all[1]
        );
        assert!(all.iter().all(|&t| t < 3_000_000_000));
        assert!(instants(SimTime::ZERO, &stages(0, &[(1000, 0)])).is_empty());
    }

    #[test]
    fn a_poisson_ramp_sends_the_curves_area_on_average() {
        // 0 -> 2000/s over 2 s, then 2000/s for 1 s: 2000 + 2000 requests expected. Over 20
        // streams the mean count is within 1%.
        let Arrivals::Staged { stages: curve, .. } = stages(0, &[(2000, 2000), (1000, 2000)])
        else {
            unreachable!()
        };
        assert_eq!(curve.expected_requests(), 4000.0);
        let arrivals = Arrivals::Staged {
            stages: curve,
            poisson: true,
        };
        let (mut total, mut in_first_second) = (0usize, 0usize);
        for seed in 1..=20 {
            let mut stream = Stream::derive(seed, "test", "poisson");
            let (mut clock, first) = OpenLoopClock::first(SimTime::ZERO, &arrivals).unwrap();
            let mut all = vec![first];
            while let Some(next) = clock.next(&mut stream) {
                all.push(next);
            }
            assert!(all.iter().all(|t| t.as_nanos() < 3_000_000_000));
            total += all.len();
            in_first_second += all.iter().filter(|t| t.as_nanos() < 1_000_000_000).count();
        }
        let mean = total as f64 / 20.0;
        assert!((mean - 4000.0).abs() < 40.0, "mean {mean}");
        // The ramp's first second holds a quarter of its area: 500 on average.
        let first = in_first_second as f64 / 20.0;
        assert!((first - 500.0).abs() < 25.0, "first second {first}");
    }

    #[test]
    fn a_load_with_a_count_counts_its_own_arrivals() {
        let rate = Rate::per_second(10.0).unwrap();
        let arrivals = Arrivals::Even {
            rate,
            end: LoadEnd::Count(3),
        };
        assert_eq!(
            instants(SimTime::ZERO, &arrivals),
            vec![0, 100_000_000, 200_000_000]
        );
    }
}

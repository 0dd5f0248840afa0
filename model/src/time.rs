//! Virtual time: an integer count of nanoseconds since the start of a run.
//!
//! Time is never a float. `SimTime` is an instant, `SimDuration` a span; both are `u64`
//! nanoseconds, which covers about 584 years. Arithmetic that could overflow is checked or
//! saturating, by name.

use std::fmt;

/// An instant of virtual time, in nanoseconds since the start of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

/// A span of virtual time, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(u64);

impl SimTime {
    pub const ZERO: SimTime = SimTime(0);
    /// The end of representable time; used as "never".
    pub const MAX: SimTime = SimTime(u64::MAX);

    pub const fn from_nanos(nanos: u64) -> Self {
        SimTime(nanos)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self + duration`, or `None` past the end of representable time.
    pub fn checked_add(self, duration: SimDuration) -> Option<SimTime> {
        self.0.checked_add(duration.0).map(SimTime)
    }

    /// `self + duration`, clamped to [`SimTime::MAX`].
    pub fn saturating_add(self, duration: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(duration.0))
    }

    /// The span from `earlier` to `self`; zero if `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    pub const ZERO: SimDuration = SimDuration(0);
    pub const MAX: SimDuration = SimDuration(u64::MAX);

    pub const fn from_nanos(nanos: u64) -> Self {
        SimDuration(nanos)
    }

    pub const fn from_micros(micros: u64) -> Self {
        SimDuration(micros * 1_000)
    }

    pub const fn from_millis(millis: u64) -> Self {
        SimDuration(millis * 1_000_000)
    }

    pub const fn from_secs(secs: u64) -> Self {
        SimDuration(secs * 1_000_000_000)
    }

    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    pub fn checked_add(self, other: SimDuration) -> Option<SimDuration> {
        self.0.checked_add(other.0).map(SimDuration)
    }

    pub fn saturating_add(self, other: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(other.0))
    }

    pub fn checked_mul(self, factor: u64) -> Option<SimDuration> {
        self.0.checked_mul(factor).map(SimDuration)
    }

    /// Milliseconds as a float, for reports only (never for arithmetic on time).
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
}

/// Formats a nanosecond count in the largest unit that keeps it exact-looking:
/// `1.5s`, `100ms`, `250us`, `7ns`. The decimal part is exact (no rounding).
fn format_nanos(nanos: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    let (scale, unit) = UNITS
        .iter()
        .copied()
        .find(|&(scale, _)| nanos >= scale)
        .unwrap_or((1, "ns"));
    let whole = nanos / scale;
    let mut fraction = nanos % scale;
    if fraction == 0 {
        return write!(f, "{whole}{unit}");
    }
    let mut digits = String::new();
    let mut place = scale / 10;
    while fraction > 0 && place > 0 {
        digits.push(char::from(b'0' + (fraction / place) as u8));
        fraction %= place;
        place /= 10;
    }
    write!(f, "{whole}.{digits}{unit}")
}

impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format_nanos(self.0, f)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("t=")?;
        format_nanos(self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(nanos: u64, expected: &str) {
        assert_eq!(SimDuration::from_nanos(nanos).to_string(), expected);
    }

    #[test]
    fn durations_print_exactly_in_the_largest_unit() {
        check(0, "0ns");
        check(7, "7ns");
        check(250_000, "250us");
        check(100_000_000, "100ms");
        check(1_500_000_000, "1.5s");
        check(2_000_000_001, "2.000000001s");
        check(1_250_000, "1.25ms");
    }

    #[test]
    fn instant_arithmetic_checks_overflow() {
        let end = SimTime::from_nanos(u64::MAX - 1);
        assert_eq!(end.checked_add(SimDuration::from_nanos(2)), None);
        assert_eq!(end.saturating_add(SimDuration::from_nanos(2)), SimTime::MAX);
        assert_eq!(
            SimTime::from_nanos(5).saturating_since(SimTime::from_nanos(9)),
            SimDuration::ZERO
        );
    }
}

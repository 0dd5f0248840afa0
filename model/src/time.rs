//! Virtual time: an integer count of nanoseconds since the start of a run.
//!
//! Time is never a float. `SimTime` is an instant, `SimDuration` a span; both are `u64`
//! nanoseconds, which covers about 584 years. Arithmetic that could overflow is checked or
//! saturating, by name; the unit constructors ([`SimDuration::from_secs`] and its siblings)
//! saturate at [`SimDuration::MAX`], as their documentation says.
//!
//! [`LatestTime`] is the one rule every component applies when a caller's `now` is earlier
//! than one it has already seen: it takes the latest instant seen instead.

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

    /// `micros` microseconds, saturating at [`SimDuration::MAX`] (about 584 years) instead of
    /// wrapping.
    pub const fn from_micros(micros: u64) -> Self {
        SimDuration(micros.saturating_mul(1_000))
    }

    /// `millis` milliseconds, saturating at [`SimDuration::MAX`] instead of wrapping.
    pub const fn from_millis(millis: u64) -> Self {
        SimDuration(millis.saturating_mul(1_000_000))
    }

    /// `secs` seconds, saturating at [`SimDuration::MAX`] instead of wrapping.
    pub const fn from_secs(secs: u64) -> Self {
        SimDuration(secs.saturating_mul(1_000_000_000))
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

/// The latest instant a component has been told about.
///
/// Every policy in this crate states that `now` never goes backwards between calls. A caller
/// can still break that without a bug of its own: threads that read a clock and then race for
/// the lock of a shared policy arrive out of order. Each component therefore passes every
/// `now` it is given through [`LatestTime::observe`] and uses what it returns, the latest
/// instant seen so far, so that its windows and deadlines never run backwards and a late
/// caller is treated as arriving at the latest instant instead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LatestTime(SimTime);

impl LatestTime {
    /// Nothing seen yet: the latest instant is [`SimTime::ZERO`].
    pub const fn new() -> Self {
        LatestTime(SimTime::ZERO)
    }

    /// Records `now` and returns the instant to use: `max(latest seen, now)`.
    pub fn observe(&mut self, now: SimTime) -> SimTime {
        self.0 = self.0.max(now);
        self.0
    }

    /// The instant `observe(now)` would return, without recording anything (for queries that
    /// take `&self`).
    pub fn at(self, now: SimTime) -> SimTime {
        self.0.max(now)
    }

    /// The latest instant seen.
    pub fn get(self) -> SimTime {
        self.0
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
    fn unit_constructors_saturate_instead_of_wrapping() {
        const NEVER: SimDuration = SimDuration::from_secs(u64::MAX);
        assert_eq!(NEVER, SimDuration::MAX);
        let secs_max = u64::MAX / 1_000_000_000;
        assert_eq!(
            SimDuration::from_secs(secs_max).as_nanos(),
            secs_max * 1_000_000_000
        );
        assert_eq!(SimDuration::from_secs(secs_max + 1), SimDuration::MAX);
        let millis_max = u64::MAX / 1_000_000;
        assert_eq!(
            SimDuration::from_millis(millis_max).as_nanos(),
            millis_max * 1_000_000
        );
        assert_eq!(SimDuration::from_millis(millis_max + 1), SimDuration::MAX);
        let micros_max = u64::MAX / 1_000;
        assert_eq!(
            SimDuration::from_micros(micros_max).as_nanos(),
            micros_max * 1_000
        );
        assert_eq!(SimDuration::from_micros(micros_max + 1), SimDuration::MAX);
        assert_eq!(SimDuration::from_micros(u64::MAX), SimDuration::MAX);
    }

    #[test]
    fn latest_time_never_goes_backwards() {
        let mut latest = LatestTime::new();
        let at = SimTime::from_nanos;
        assert_eq!(latest.get(), SimTime::ZERO);
        assert_eq!(latest.observe(at(10)), at(10));
        assert_eq!(
            latest.observe(at(4)),
            at(10),
            "an earlier now reads as the latest"
        );
        assert_eq!(latest.at(at(3)), at(10));
        assert_eq!(latest.at(at(12)), at(12), "at() records nothing");
        assert_eq!(latest.get(), at(10));
        assert_eq!(latest.observe(at(11)), at(11));
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

//! A sliding window of event counts kept in a fixed number of time slots: the one
//! implementation behind the circuit breaker's time window ([`crate::breaker::Window::Time`])
//! and the retry budget's window ([`crate::retry::RetryBudget`]).
//!
//! The window is `slots` slots of `slot_length` each, aligned to multiples of `slot_length`
//! from [`SimTime::ZERO`], so `length = slots × slot_length`. An event at `t` falls into slot
//! number `k = t / slot_length` (integer division) and is counted at `now` while
//! `now / slot_length - k < slots`, that is until the instant `(k + slots) × slot_length`,
//! when its slot is reused. Measured from the event, it is counted for more than
//! `length - slot_length` and for at most `length` (exactly `length` when `t` is at the start
//! of its slot). With one slot the window is a tumbling window of `length`.
//!
//! Each slot holds [`COUNTERS`] counters: the breaker counts calls, failures and slow calls, the budget
//! requests and retries. Memory is `slots` slots whatever the event rate, and moving the window
//! forward empties at most `slots` slots however long the gap.
//!
//! Time: the window remembers the newest slot it has moved to (its head). Callers pass every
//! `now` through [`crate::time::LatestTime`] first, so a time earlier than the head's slot is a
//! caller bug (asserted in debug builds); in release builds it is read as the head's slot, so
//! the window still never runs backwards.

use crate::time::{SimDuration, SimTime};

/// Counters per slot.
pub(crate) const COUNTERS: usize = 3;

/// One value per counter.
pub(crate) type Counts = [u64; COUNTERS];

/// See the module documentation.
///
/// Invariants: `slots.len()` is the slot count; slot number `n` lives at index
/// `n % slots.len()`; every slot with a non-zero count holds a number in
/// `(head - slots.len(), head]`; `sums` is the sum over all slots.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SlottedCounts {
    slot_nanos: u64,
    slots: Vec<Slot>,
    /// The newest slot number the window has moved to.
    head: u64,
    sums: Counts,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// Which slot number the counts belong to (meaningful only when a count is non-zero).
    number: u64,
    counts: Counts,
}

impl SlottedCounts {
    /// A window of `slots` slots of `slot_length` each. Both must be non-zero (the configs of
    /// the breaker and the budget guarantee it).
    pub(crate) fn new(slot_length: SimDuration, slots: u32) -> Self {
        assert!(!slot_length.is_zero(), "a slot of zero length");
        assert!(slots >= 1, "a window of no slot");
        SlottedCounts {
            slot_nanos: slot_length.as_nanos(),
            slots: vec![Slot::default(); slots as usize],
            head: 0,
            sums: [0; COUNTERS],
        }
    }

    /// The slot number of `now`, never before the head.
    fn slot_number(&self, now: SimTime) -> u64 {
        let number = now.as_nanos() / self.slot_nanos;
        debug_assert!(
            number >= self.head,
            "{now} is before the window's newest slot: callers pass now through LatestTime"
        );
        number.max(self.head)
    }

    fn slot_count(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Moves the head to `now`'s slot, emptying every slot that falls out of the window.
    /// Bounded by the number of slots, however long the gap.
    pub(crate) fn advance(&mut self, now: SimTime) {
        let number = self.slot_number(now);
        let reused = (number - self.head).min(self.slot_count());
        for step in 1..=reused {
            let index = ((self.head + step) % self.slot_count()) as usize;
            let slot = std::mem::take(&mut self.slots[index]);
            for (sum, count) in self.sums.iter_mut().zip(slot.counts) {
                *sum -= count;
            }
        }
        self.head = number;
    }

    /// Moves the window to `now` and adds `counts` to `now`'s slot.
    pub(crate) fn add(&mut self, now: SimTime, counts: Counts) {
        self.advance(now);
        let number = self.head;
        let index = (number % self.slot_count()) as usize;
        let slot = &mut self.slots[index];
        debug_assert!(
            slot.counts == [0; COUNTERS] || slot.number == number,
            "a slot still holding another number's counts"
        );
        slot.number = number;
        for (held, count) in slot.counts.iter_mut().zip(counts) {
            *held = held.saturating_add(count);
        }
        for (sum, count) in self.sums.iter_mut().zip(counts) {
            *sum = sum.saturating_add(count);
        }
    }

    /// The counts in the window as of the head (right after [`SlottedCounts::advance`] or
    /// [`SlottedCounts::add`]).
    pub(crate) fn sums(&self) -> Counts {
        self.sums
    }

    /// The counts in the window at `now`, without moving anything: the slots whose number is
    /// fewer than `slots` behind `now`'s.
    pub(crate) fn sums_at(&self, now: SimTime) -> Counts {
        let number = self.slot_number(now);
        let mut sums: Counts = [0; COUNTERS];
        for slot in &self.slots {
            if number - slot.number < self.slot_count() {
                for (sum, count) in sums.iter_mut().zip(slot.counts) {
                    *sum = sum.saturating_add(count);
                }
            }
        }
        sums
    }

    /// Forgets every count (the head stays where it is).
    pub(crate) fn clear(&mut self) {
        self.slots.fill(Slot::default());
        self.sums = [0; COUNTERS];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn at(nanos: u64) -> SimTime {
        SimTime::from_nanos(nanos)
    }

    fn window(slot_nanos: u64, slots: u32) -> SlottedCounts {
        SlottedCounts::new(SimDuration::from_nanos(slot_nanos), slots)
    }

    #[test]
    fn an_event_is_counted_until_its_slot_is_reused() {
        // 4 slots of 10 ns: an event at 13 ns (slot 1) is counted until 50 ns.
        let mut w = window(10, 4);
        w.add(at(13), [1, 1, 0]);
        assert_eq!(w.sums_at(at(49)), [1, 1, 0]);
        assert_eq!(w.sums_at(at(50)), [0, 0, 0]);
        // At the start of its slot, exactly `length`.
        w.add(at(20), [1, 0, 0]);
        assert_eq!(w.sums_at(at(59)), [1, 0, 0]);
        assert_eq!(w.sums_at(at(60)), [0, 0, 0]);
        w.advance(at(50));
        assert_eq!(w.sums(), [1, 0, 0], "the event at 13 ns left at 50 ns");
        // A long gap empties everything, in at most `slots` steps.
        w.advance(at(1_000_000));
        assert_eq!(w.sums(), [0, 0, 0]);
        w.add(at(1_000_001), [2, 3, 0]);
        assert_eq!(w.sums(), [2, 3, 0]);
        w.clear();
        assert_eq!((w.sums(), w.sums_at(at(1_000_002))), ([0, 0, 0], [0, 0, 0]));
    }

    #[test]
    fn one_slot_is_a_tumbling_window() {
        let mut w = window(100, 1);
        w.add(at(99), [1, 0, 0]);
        w.add(at(100), [1, 0, 0]);
        assert_eq!(w.sums(), [1, 0, 0]);
    }

    proptest! {
        /// Against the rule as documented, measured from each event rather than by slot
        /// arithmetic: an event `age = now - t` old is certainly counted while
        /// `age <= length - slot_length`, certainly not once `age >= length`, and in between
        /// counted exactly when `age < length - (t mod slot_length)`.
        #[test]
        fn the_window_keeps_events_for_the_documented_age(
            slot_nanos in 1u64..=50,
            slots in 1u32..=6,
            steps in prop::collection::vec((0u64..=40, 0u64..=3, any::<bool>()), 1..80),
        ) {
            let length = slot_nanos * u64::from(slots);
            let mut w = window(slot_nanos, slots);
            let mut events: Vec<(u64, Counts)> = Vec::new();
            let mut now = 0u64;
            for (step, count, record) in steps {
                now += step;
                if record {
                    let counts = [count, count / 2, count / 3];
                    w.add(at(now), counts);
                    events.push((now, counts));
                }
                let (mut certain, mut possible, mut exact) = ([0u64; COUNTERS], [0u64; COUNTERS], [0u64; COUNTERS]);
                for &(t, counts) in &events {
                    let age = now - t;
                    for counter in 0..COUNTERS {
                        if age <= length - slot_nanos {
                            certain[counter] += counts[counter];
                        }
                        if age < length {
                            possible[counter] += counts[counter];
                        }
                        if age < length - t % slot_nanos {
                            exact[counter] += counts[counter];
                        }
                    }
                }
                let held = w.sums_at(at(now));
                for counter in 0..COUNTERS {
                    prop_assert!(certain[counter] <= held[counter], "at {}: {:?}", now, held);
                    prop_assert!(held[counter] <= possible[counter], "at {}: {:?}", now, held);
                }
                prop_assert_eq!(held, exact, "at {}", now);
                if record {
                    prop_assert_eq!(w.sums(), exact, "running sums at {}", now);
                }
            }
        }
    }
}

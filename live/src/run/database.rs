//! A database with a `capacity`, stood in live as the simulator models it: up to `capacity`
//! queries run at full speed; above it the running queries share it equally (processor
//! sharing), each running `capacity / running` as fast. Each query needs the work its drawn
//! latency says (at full speed); it ends when it has had that much.
//!
//! As in the simulator (`sim/src/database.rs`), a work clock counts the work every running
//! query has had so far (nanoseconds, 32 fractional bits); a query ends when the clock reaches
//! its start reading plus its work, so each arrival and each end costs a heap operation, not a
//! pass over the running queries. One driver task per database wakes at the next end; an
//! arrival wakes it early, since it changes the speed.
//!
//! Bounds: the driver ends when the run aborts its tasks; a query whose driver is gone counts
//! as ended (the run is over). Integer arithmetic only.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::{Mutex, MutexGuard, PoisonError};

use outagelab_model::time::{SimDuration, SimTime};
use tokio::sync::{Notify, oneshot};

use crate::clock::{Clock, TokioClock};

const ONE_Q32: u128 = 1 << 32;

/// A database's running queries, shared between the requests and its driver.
pub(crate) struct SharedDatabase {
    capacity: u32,
    clock: TokioClock,
    state: Mutex<State>,
    /// Wakes the driver: a query arrived, so the next end moved.
    arrived: Notify,
}

#[derive(Default)]
struct State {
    /// Work each running query has had since the database started (ns, 32 fractional bits).
    work_clock: u128,
    /// When `work_clock` was last brought up to date.
    last: SimTime,
    /// Running queries by the work-clock reading at which each ends, then by arrival.
    ends: BinaryHeap<Reverse<(u128, u64)>>,
    /// Who waits for each running query, by arrival number.
    waiting: BTreeMap<u64, oneshot::Sender<()>>,
    arrivals: u64,
}

impl State {
    /// Each running query's speed now, as a fraction of full speed (32 fractional bits).
    fn speed(&self, capacity: u32) -> u128 {
        let running = self.ends.len() as u128;
        if running <= u128::from(capacity) {
            ONE_Q32
        } else {
            (u128::from(capacity) * ONE_Q32 / running).max(1)
        }
    }

    /// Brings the work clock up to `now`, ending every query that has had its work by then:
    /// interval by interval, each at the speed of the running set in it (an end speeds up the
    /// rest from its instant on, however late the driver wakes).
    fn advance(&mut self, now: SimTime, capacity: u32) {
        // Bounded: each turn but the last ends at least one query (an interval is run to the
        // next end, rounded up, so the work clock reaches it).
        loop {
            self.end_reached();
            let next = self.next_end(capacity).filter(|&next| next <= now);
            let until = next.unwrap_or(now.max(self.last));
            let elapsed = u128::from(until.saturating_since(self.last).as_nanos());
            self.work_clock += elapsed * self.speed(capacity);
            self.last = until;
            if next.is_none() {
                self.end_reached();
                return;
            }
        }
    }

    /// Ends the queries the work clock has reached.
    fn end_reached(&mut self) {
        while let Some(&Reverse((end, arrival))) = self.ends.peek() {
            if end > self.work_clock {
                break;
            }
            self.ends.pop();
            if let Some(waiter) = self.waiting.remove(&arrival) {
                let _ = waiter.send(()); // a caller that went away does not stop the query
            }
        }
    }

    /// When the next query ends at the current speed, if any runs.
    fn next_end(&self, capacity: u32) -> Option<SimTime> {
        let &Reverse((end, _)) = self.ends.peek()?;
        let left = end.saturating_sub(self.work_clock);
        let nanos = left.div_ceil(self.speed(capacity));
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        Some(self.last.saturating_add(SimDuration::from_nanos(nanos)))
    }
}

impl SharedDatabase {
    pub fn new(capacity: u32, clock: TokioClock) -> SharedDatabase {
        SharedDatabase {
            capacity,
            clock,
            state: Mutex::new(State::default()),
            arrived: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a query of `work` (its latency at full speed) now; the receiver hears when it
    /// ends (or errs when the run ends first).
    pub fn start(&self, work: SimDuration) -> oneshot::Receiver<()> {
        let (ended, heard) = oneshot::channel();
        let now = self.clock.now();
        let mut state = self.state();
        state.advance(now, self.capacity);
        let arrival = state.arrivals;
        state.arrivals += 1;
        let end = state.work_clock + u128::from(work.as_nanos()) * ONE_Q32;
        state.ends.push(Reverse((end, arrival)));
        state.waiting.insert(arrival, ended);
        drop(state);
        self.arrived.notify_one();
        heard
    }

    /// Ends queries as they finish, until the run aborts it.
    pub async fn drive(&self) {
        // Bounded by the run: its end aborts this task.
        loop {
            let next = {
                let mut state = self.state();
                state.advance(self.clock.now(), self.capacity);
                state.next_end(self.capacity)
            };
            match next {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(self.clock.instant_at(at)) => {}
                        () = self.arrived.notified() => {}
                    }
                }
                None => self.arrived.notified().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    /// The sharing, hand-computed on the state alone (no clock, no driver): capacity 2, four
    /// 30 ms queries at 0 ms. Four share two: each runs at half speed, so all four end at
    /// 60 ms. A fifth of 10 ms arriving then, alone, ends at 70 ms.
    #[test]
    fn queries_above_capacity_share_it() {
        let mut state = State::default();
        let (capacity, mut heard) = (2, Vec::new());
        for _ in 0..4 {
            let (ended, receiver) = oneshot::channel();
            let arrival = state.arrivals;
            state.arrivals += 1;
            state.ends.push(Reverse((30_000_000 * ONE_Q32, arrival)));
            state.waiting.insert(arrival, ended);
            heard.push(receiver);
        }
        assert_eq!(state.next_end(capacity), Some(ms(60)));
        state.advance(ms(59), capacity);
        assert!(heard.iter_mut().all(|r| r.try_recv().is_err()), "not yet");
        state.advance(ms(60), capacity);
        assert!(
            heard.iter_mut().all(|r| r.try_recv().is_ok()),
            "all four ended"
        );
        assert_eq!(state.next_end(capacity), None);
        let end = state.work_clock + 10_000_000 * ONE_Q32;
        state.ends.push(Reverse((end, 4)));
        assert_eq!(state.next_end(capacity), Some(ms(70)));
    }

    /// An end speeds up the rest from its own instant, however late the state is brought up
    /// to date: capacity 1, a 10 ms and a 30 ms query at 0 ms share it (half speed each) until
    /// the first ends at 20 ms; the second, 10 ms of work done, runs alone and ends at 40 ms.
    #[test]
    fn an_end_speeds_the_others_up_from_its_instant() {
        let start = |state: &mut State, work_ms: u64| {
            let (ended, receiver) = oneshot::channel();
            let arrival = state.arrivals;
            state.arrivals += 1;
            let end = state.work_clock + u128::from(work_ms * 1_000_000) * ONE_Q32;
            state.ends.push(Reverse((end, arrival)));
            state.waiting.insert(arrival, ended);
            receiver
        };
        let mut state = State::default();
        let (mut short, mut long) = (start(&mut state, 10), start(&mut state, 30));
        state.advance(ms(39), 1);
        assert!(short.try_recv().is_ok(), "the short one ended at 20 ms");
        assert!(long.try_recv().is_err(), "the long one has 1 ms to go");
        state.advance(ms(40), 1);
        assert!(long.try_recv().is_ok());
        // Brought up to date only after both ended: the same ends.
        let mut late = State::default();
        let (mut short, mut long) = (start(&mut late, 10), start(&mut late, 30));
        late.advance(ms(40), 1);
        assert!(short.try_recv().is_ok() && long.try_recv().is_ok());
        assert_eq!(late.work_clock, state.work_clock);
    }

    /// Up to capacity every query runs at full speed: two 20 ms queries on a capacity of 2
    /// end at 20 ms.
    #[test]
    fn queries_within_capacity_run_at_full_speed() {
        let mut state = State::default();
        for arrival in 0..2 {
            state.ends.push(Reverse((20_000_000 * ONE_Q32, arrival)));
        }
        assert_eq!(state.next_end(2), Some(ms(20)));
    }
}

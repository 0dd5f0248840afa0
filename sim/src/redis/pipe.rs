//! One direction of a connection: a FIFO wire with a bandwidth and a one-way latency.

use std::collections::VecDeque;

use outagelab_model::time::{SimDuration, SimTime};

use crate::scenario::ByteRate;

/// Items leave one after another at the pipe's bandwidth and arrive one latency later, so
/// arrival times never decrease and items arrive in order.
///
/// Bound: holds what was sent and has not yet arrived; the caller schedules one arrival event
/// per item sent and calls [`Pipe::receive`] once for each.
pub(super) struct Pipe<T> {
    /// `None` sends any number of bytes in no time.
    bandwidth: Option<ByteRate>,
    latency: SimDuration,
    /// When the pipe finishes sending what it holds.
    free_at: SimTime,
    /// Items on the wire, oldest first.
    in_flight: VecDeque<T>,
}

impl<T> Pipe<T> {
    pub(super) fn new(bandwidth: Option<ByteRate>, latency: SimDuration) -> Self {
        Pipe {
            bandwidth,
            latency,
            free_at: SimTime::ZERO,
            in_flight: VecDeque::new(),
        }
    }

    /// Bytes its queue of items on the wire holds, as allocated.
    pub(super) fn memory_bytes(&self) -> usize {
        self.in_flight.capacity() * std::mem::size_of::<T>()
    }

    /// Puts `item` of `bytes` on the wire now, behind what is already being sent; returns
    /// when it arrives.
    pub(super) fn send(&mut self, now: SimTime, item: T, bytes: u64) -> SimTime {
        let wire_time = self
            .bandwidth
            .map_or(SimDuration::ZERO, |rate| rate.time_for(bytes));
        self.free_at = self.free_at.max(now).saturating_add(wire_time);
        self.in_flight.push_back(item);
        self.free_at.saturating_add(self.latency)
    }

    /// The oldest item, which has just arrived.
    pub(super) fn receive(&mut self) -> T {
        self.in_flight
            .pop_front()
            .expect("one arrival event per item on the wire")
    }

    /// When something sent now (after everything already on the wire) would arrive, if it
    /// takes no time to send, such as a FIN.
    pub(super) fn arrival_after_queue(&self, now: SimTime) -> SimTime {
        self.free_at.max(now).saturating_add(self.latency)
    }

    /// Drops everything on the wire: the link it was on is gone, and a new link starts idle.
    pub(super) fn reset(&mut self) {
        self.in_flight.clear();
        self.free_at = SimTime::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    /// 100 MiB/s and 1 ms one way.
    fn pipe() -> Pipe<&'static str> {
        Pipe::new(ByteRate::new(100 * MIB), SimDuration::from_millis(1))
    }

    #[test]
    fn a_large_value_takes_its_bytes_over_the_bandwidth_plus_the_latency() {
        // 2 MiB at 100 MiB/s is 20 ms on the wire, then 1 ms of latency.
        let mut pipe = pipe();
        assert_eq!(pipe.send(ms(0), "value", 2 * MIB), ms(21));
    }

    #[test]
    fn a_small_item_behind_a_large_one_waits_for_its_bytes() {
        let mut pipe = pipe();
        assert_eq!(pipe.send(ms(0), "big", 2 * MIB), ms(21));
        // Sent at 5 ms, but the wire is busy until 20 ms; 100 bytes take 954 ns more.
        let small = pipe.send(ms(5), "small", 100);
        assert_eq!(small, SimTime::from_nanos(21_000_954));
        assert_eq!(pipe.receive(), "big");
        assert_eq!(pipe.receive(), "small");
    }

    #[test]
    fn an_idle_pipe_starts_sending_at_once() {
        let mut pipe = pipe();
        assert_eq!(pipe.send(ms(0), "a", MIB), ms(11));
        // Idle again from 10 ms: an item sent at 50 ms does not wait.
        assert_eq!(pipe.send(ms(50), "b", MIB), ms(61));
    }

    #[test]
    fn a_close_arrives_after_the_bytes_already_queued() {
        let mut pipe = pipe();
        pipe.send(ms(0), "value", 2 * MIB);
        assert_eq!(pipe.arrival_after_queue(ms(3)), ms(21));
        assert_eq!(pipe.arrival_after_queue(ms(30)), ms(31));
    }

    #[test]
    fn without_a_bandwidth_only_the_latency_counts() {
        let mut pipe = Pipe::new(None, SimDuration::from_millis(1));
        assert_eq!(pipe.send(ms(4), "value", 2 * MIB), ms(5));
    }

    #[test]
    fn a_reset_pipe_is_empty_and_idle() {
        let mut pipe = pipe();
        pipe.send(ms(0), "lost", 2 * MIB);
        pipe.reset();
        assert_eq!(pipe.send(ms(2), "next", 0), ms(3));
        assert_eq!(pipe.receive(), "next");
    }
}

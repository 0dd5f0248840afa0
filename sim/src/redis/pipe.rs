//! One direction of a connection: a FIFO wire with a bandwidth and a one-way latency, and
//! the toxics a fault adds to it for a while (toxiproxy's `latency` and `bandwidth`).

use std::collections::VecDeque;

use outagelab_model::time::{SimDuration, SimTime};

use crate::rng::Stream;
use crate::rules::Toxics;
use crate::scenario::ByteRate;

/// Items leave one after another at the pipe's bandwidth and arrive one latency later, so
/// arrival times never decrease and items arrive in order. A `latency` toxic adds its delay,
/// drawn per item within its jitter, and an item never arrives before the one sent before it
/// (a TCP stream keeps its order); a `bandwidth` toxic sends at its rate instead.
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
    /// The latest arrival on the wire: nothing sent later arrives before it.
    last_arrival: SimTime,
    /// What toxics do while they last.
    toxics: Toxics,
    /// The draws of a jittered delay, one per item sent while a jitter lasts.
    draws: Stream,
}

impl<T> Pipe<T> {
    pub(super) fn new(bandwidth: Option<ByteRate>, latency: SimDuration, draws: Stream) -> Self {
        Pipe {
            bandwidth,
            latency,
            free_at: SimTime::ZERO,
            in_flight: VecDeque::new(),
            last_arrival: SimTime::ZERO,
            toxics: Toxics::default(),
            draws,
        }
    }

    /// From now, items sent take `toxics` (what is on the wire keeps its arrival).
    pub(super) fn set_toxics(&mut self, toxics: Toxics) {
        self.toxics = toxics;
    }

    /// The one-way delay of an item sent now, past its wire time: the latency, plus a
    /// toxic's delay drawn within its jitter.
    fn delay(&mut self) -> SimDuration {
        let added = self.toxics.draw_delay(&mut self.draws);
        self.latency.saturating_add(added)
    }

    /// Bytes its queue of items on the wire holds, as allocated.
    pub(super) fn memory_bytes(&self) -> usize {
        self.in_flight.capacity() * std::mem::size_of::<T>()
    }

    /// Puts `item` of `bytes` on the wire now, behind what is already being sent; returns
    /// when it arrives.
    pub(super) fn send(&mut self, now: SimTime, item: T, bytes: u64) -> SimTime {
        let wire_time = (self.toxics.bandwidth.or(self.bandwidth))
            .map_or(SimDuration::ZERO, |rate| rate.time_for(bytes));
        self.free_at = self.free_at.max(now).saturating_add(wire_time);
        self.in_flight.push_back(item);
        let delay = self.delay();
        self.last_arrival = self.last_arrival.max(self.free_at.saturating_add(delay));
        self.last_arrival
    }

    /// The oldest item, which has just arrived.
    pub(super) fn receive(&mut self) -> T {
        self.in_flight
            .pop_front()
            .expect("one arrival event per item on the wire")
    }

    /// When a close (a FIN) sent now, after everything already on the wire, arrives: a
    /// `slow_close` toxic holds it back by its delay.
    pub(super) fn arrival_after_queue(&self, now: SimTime) -> SimTime {
        let delay = self.latency.saturating_add(self.toxics.added);
        let arrival = (self.free_at.max(now).saturating_add(delay)).max(self.last_arrival);
        arrival.saturating_add(self.toxics.close_delay)
    }

    /// Drops everything on the wire: the link it was on is gone, and a new link starts idle.
    pub(super) fn reset(&mut self) {
        self.in_flight.clear();
        self.free_at = SimTime::ZERO;
        self.last_arrival = SimTime::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::FaultKind;

    const MIB: u64 = 1 << 20;

    fn ms(millis: u64) -> SimTime {
        SimTime::from_nanos(millis * 1_000_000)
    }

    fn draws() -> Stream {
        Stream::derive(1, "test", "pipe")
    }

    /// 100 MiB/s and 1 ms one way.
    fn pipe() -> Pipe<&'static str> {
        Pipe::new(
            ByteRate::new(100 * MIB),
            SimDuration::from_millis(1),
            draws(),
        )
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
        let mut pipe = Pipe::new(None, SimDuration::from_millis(1), draws());
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

    #[test]
    fn a_latency_toxic_delays_what_is_sent_while_it_lasts_and_keeps_the_order() {
        let mut pipe = pipe();
        pipe.set_toxics(Toxics {
            added: SimDuration::from_millis(50),
            ..Toxics::default()
        });
        // 1 MiB: 10 ms on the wire, 1 ms of latency, 50 ms of toxic.
        assert_eq!(pipe.send(ms(0), "slow", MIB), ms(61));
        pipe.set_toxics(Toxics::default());
        // Sent after the toxic ended, it would arrive at 16 ms, but not before the one ahead.
        assert_eq!(pipe.send(ms(15), "behind", 0), ms(61));
        assert_eq!(pipe.send(ms(70), "later", 0), ms(71));
        assert_eq!(pipe.arrival_after_queue(ms(70)), ms(71));
    }

    #[test]
    fn a_jittered_delay_stays_within_its_bounds_and_never_reorders() {
        let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
        pipe.set_toxics(Toxics {
            added: SimDuration::from_millis(10),
            jitter: SimDuration::from_millis(4),
            ..Toxics::default()
        });
        let (mut last, mut spread) = (SimTime::ZERO, Vec::new());
        for i in 0..1000u64 {
            let sent = ms(i);
            let arrives = pipe.send(sent, "x", 0);
            assert!(arrives >= last, "in order");
            last = arrives;
            spread.push(arrives.saturating_since(sent).as_nanos());
        }
        // Each at least 6 ms after it was sent (the draw's floor) and at most 14 ms, or held
        // behind the one before; the draws cover the range.
        assert!(
            spread
                .iter()
                .all(|&d| (6_000_000..=14_000_000).contains(&d))
        );
        assert!(spread.iter().any(|&d| d < 7_000_000) && spread.iter().any(|&d| d > 13_000_000));
    }

    /// 10% loss with a 200 ms retransmission timeout, on a pipe of no latency: an item sent
    /// every 10 s (so none waits behind another) arrives 0, 200, 600, 1400 ms... late, for 0,
    /// 1, 2, 3... losses in a row; over 20,000 items about 10% are late, about 1% twice, and
    /// the delays are exactly those.
    #[test]
    fn a_packet_loss_toxic_retransmits_with_backoff() {
        let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
        pipe.set_toxics(Toxics {
            loss_ppm: 100_000,
            retransmit: SimDuration::from_millis(200),
            ..Toxics::default()
        });
        let mut by_losses = [0u32; 5];
        for i in 0..20_000u64 {
            let sent = ms(i * 10_000);
            let late = pipe.send(sent, "x", 0).saturating_since(sent).as_nanos() / 1_000_000;
            let losses = [0, 200, 600, 1400, 3000]
                .iter()
                .position(|&d| d == late)
                .unwrap_or_else(|| panic!("{late} ms is no whole number of retransmissions"));
            by_losses[losses] += 1;
            pipe.receive();
        }
        let [none, once, twice, ..] = by_losses;
        assert!((17_700..=18_300).contains(&none), "{by_losses:?}");
        assert!((1_600..=2_000).contains(&(once)), "{by_losses:?}");
        assert!((140..=260).contains(&twice), "{by_losses:?}");
        // What is sent behind a lost item waits for it: the stream keeps its order.
        let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
        pipe.set_toxics(Toxics {
            loss_ppm: 999_999,
            retransmit: SimDuration::from_millis(1),
            ..Toxics::default()
        });
        let first = pipe.send(ms(0), "lost", 0);
        pipe.set_toxics(Toxics::default());
        assert!(first >= ms(1));
        assert_eq!(pipe.send(ms(0), "behind", 0), first);
    }

    /// Lost 15 times in a row with a 10 s timeout: 10 + 20 + 40 + 80 s, then 120 s (Linux's
    /// TCP_RTO_MAX) eleven times: 1,470 s, not 10 s x (2^15 - 1).
    #[test]
    fn the_retransmission_timeout_stops_doubling_at_two_minutes() {
        let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
        pipe.set_toxics(Toxics {
            loss_ppm: 999_999,
            retransmit: SimDuration::from_secs(10),
            ..Toxics::default()
        });
        assert_eq!(pipe.send(ms(0), "x", 0), ms(1_470_000));
        // At most all but one in a million is lost, however the losses combine.
        let all_but = |ppm| FaultKind::PacketLoss {
            ppm,
            retransmit: SimDuration::from_millis(200),
        };
        let toxics = Toxics::of(&[all_but(999_500), all_but(999_500)]);
        assert_eq!(toxics.loss_ppm, 999_999);
    }

    #[test]
    fn losses_combine_and_the_longest_timeout_holds() {
        let loss = |percent: u32, rto: u64| FaultKind::PacketLoss {
            ppm: percent * 10_000,
            retransmit: SimDuration::from_millis(rto),
        };
        let toxics = Toxics::of(&[loss(10, 200), loss(20, 300)]);
        // Survives both with 0.9 x 0.8 = 0.72: lost with 28%.
        assert_eq!(toxics.loss_ppm, 280_000);
        assert_eq!(toxics.retransmit, SimDuration::from_millis(300));
        assert_eq!(Toxics::of(&[]).loss_ppm, 0);
    }

    #[test]
    fn a_bandwidth_toxic_sends_at_its_rate_while_it_lasts() {
        let mut pipe = pipe();
        pipe.set_toxics(Toxics {
            bandwidth: ByteRate::new(MIB),
            ..Toxics::default()
        });
        // 1 MiB at 1 MiB/s: a second on the wire, then 1 ms.
        assert_eq!(pipe.send(ms(0), "throttled", MIB), ms(1001));
        pipe.set_toxics(Toxics::default());
        // Behind it on the wire: sent from 1000 ms at 100 MiB/s, 10 ms.
        assert_eq!(pipe.send(ms(500), "next", MIB), ms(1011));
    }
}

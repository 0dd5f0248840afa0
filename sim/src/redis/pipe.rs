//! One direction of a connection: a FIFO wire with a bandwidth and a one-way latency, and
//! the toxics faults add to it for a while (toxiproxy's `latency`, `bandwidth`, and a lossy
//! network's retransmissions, and `slow_close`).
//!
//! Every fault has its start and end in the file, so the toxics a connection has over the
//! whole run are known when it is built: a [`ToxicTimeline`]. A pipe reads it wherever a
//! toxic acts, so a toxic ends exactly when its fault ends, whatever is on the wire then:
//! bytes still to send after a `bandwidth` fault go at the connection's own rate, an item a
//! `latency` toxic holds is let go at the end (toxiproxy forwards what a removed toxic held),
//! a retransmission after a `packet_loss` fault ended gets through, and a close a
//! `slow_close` holds is let go at its end.

use std::collections::VecDeque;
use std::sync::Arc;

use outagelab_model::time::{SimDuration, SimTime};

use crate::rng::Stream;
use crate::rules::Toxics;
use crate::scenario::{ByteRate, FaultKind};

/// The toxics in force on one connection over the run, from the `latency`, `bandwidth`,
/// `packet_loss` and `slow_close` faults on it: each change with the toxics in force from
/// then until the next ([`Toxics::of`] of the faults in force, in the order they started;
/// none before the first change). Bound: two changes per fault at most. Shared by every
/// link of the connection and both directions.
#[derive(Clone, Debug, Default)]
pub(super) struct ToxicTimeline {
    /// (from, toxics in force from then), strictly increasing in time, no two in a row
    /// alike.
    changes: Arc<[(SimTime, Toxics)]>,
}

/// A stretch of time in which the same toxics are in force: `[start, end)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stretch {
    start: SimTime,
    /// `SimTime::MAX` for the last one: it lasts to the end of the run.
    end: SimTime,
    toxics: Toxics,
}

impl ToxicTimeline {
    /// From the toxic faults on a connection, as (start, end: `None` to the end of the run,
    /// kind), in the order the file lists them; other kinds count for nothing. A fault is in
    /// force from its start (included) to its end (excluded).
    pub(super) fn new(faults: &[(SimTime, Option<SimTime>, FaultKind)]) -> ToxicTimeline {
        let mut starts: Vec<&(SimTime, Option<SimTime>, FaultKind)> = faults.iter().collect();
        // Same start: the file's order, as the engine starts them.
        starts.sort_by_key(|fault| fault.0);
        let mut instants: Vec<SimTime> = faults
            .iter()
            .flat_map(|&(start, end, _)| std::iter::once(start).chain(end))
            .collect();
        instants.sort_unstable();
        instants.dedup();
        let mut changes: Vec<(SimTime, Toxics)> = Vec::with_capacity(instants.len());
        for instant in instants {
            let in_force = starts
                .iter()
                .filter(|(start, end, _)| *start <= instant && end.is_none_or(|end| instant < end))
                .map(|(_, _, kind)| kind);
            let toxics = Toxics::of(in_force);
            let before = changes.last().map_or(Toxics::default(), |change| change.1);
            if toxics != before {
                changes.push((instant, toxics));
            }
        }
        ToxicTimeline {
            changes: changes.into(),
        }
    }

    /// The stretch that holds `at`, then every later one, in time order; the last lasts to
    /// the end of the run.
    fn stretches_from(&self, at: SimTime) -> impl Iterator<Item = Stretch> + '_ {
        let first = self.changes.partition_point(|change| change.0 <= at);
        (first..=self.changes.len()).map(move |next| {
            let (start, toxics) = match next.checked_sub(1) {
                Some(index) => self.changes[index],
                None => (SimTime::ZERO, Toxics::default()),
            };
            let end = self
                .changes
                .get(next)
                .map_or(SimTime::MAX, |change| change.0);
            Stretch { start, end, toxics }
        })
    }

    /// No toxic in the whole run: nothing is ever in force.
    fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The toxics in force at `at`.
    fn at(&self, at: SimTime) -> Toxics {
        let first = self.changes.partition_point(|change| change.0 <= at);
        first
            .checked_sub(1)
            .map_or(Toxics::default(), |index| self.changes[index].1)
    }

    /// When something a toxic holds from `from` is let go: in each stretch it is held until
    /// it has been held `held_for` of that stretch's toxics (0: not at all), so it goes at
    /// once when the toxic holding it ends. Bound: one step per stretch.
    fn let_go(&self, from: SimTime, held_for: impl Fn(&Toxics) -> SimDuration) -> SimTime {
        for stretch in self.stretches_from(from) {
            let due = from
                .saturating_add(held_for(&stretch.toxics))
                .max(stretch.start);
            if due < stretch.end || stretch.end == SimTime::MAX {
                return due;
            }
        }
        unreachable!("the last stretch lasts to the end of the run")
    }
}

/// Items leave one after another at the pipe's bandwidth (a `bandwidth` toxic's rate while
/// one lasts) and arrive one latency later, so arrival times never decrease and items arrive
/// in order. A `latency` toxic holds each item that leaves while it lasts for its delay,
/// drawn per item within its jitter; a `packet_loss` toxic loses transmissions and sends them
/// again; an item never arrives before the one sent before it (a TCP stream keeps its order).
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
    /// The toxics of the connection over the run.
    toxics: ToxicTimeline,
    /// The draws of jittered delays and of losses, in the order items leave.
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
            toxics: ToxicTimeline::default(),
            draws,
        }
    }

    /// The toxics this pipe's connection has over the run.
    pub(super) fn set_toxics(&mut self, toxics: ToxicTimeline) {
        self.toxics = toxics;
    }

    /// Bytes its queue of items on the wire holds, as allocated.
    pub(super) fn memory_bytes(&self) -> usize {
        self.in_flight.capacity() * std::mem::size_of::<T>()
    }

    /// When `bytes` that start leaving at `start` are all sent: at the rate in force in each
    /// stretch of the timeline (a `bandwidth` toxic's, else the pipe's own; none is no time
    /// at all). Bound: one step per stretch.
    fn sent_by(&self, start: SimTime, bytes: u64) -> SimTime {
        if self.toxics.is_empty() {
            // The pipe's own rate throughout (the timeline's one stretch of no toxic).
            return self
                .bandwidth
                .map_or(start, |rate| start.saturating_add(rate.time_for(bytes)));
        }
        let (mut at, mut left) = (start, bytes);
        for stretch in self.toxics.stretches_from(start) {
            let Some(rate) = stretch.toxics.bandwidth.or(self.bandwidth) else {
                return at;
            };
            let done = at.saturating_add(rate.time_for(left));
            if done <= stretch.end || stretch.end == SimTime::MAX {
                return done;
            }
            // What this stretch moves, whole bytes; the rest goes in the next one.
            let nanos = u128::from(stretch.end.saturating_since(at).as_nanos());
            let moved = nanos * u128::from(rate.bytes_per_second()) / 1_000_000_000;
            left = left.saturating_sub(u64::try_from(moved).unwrap_or(u64::MAX));
            at = stretch.end;
        }
        unreachable!("the last stretch lasts to the end of the run")
    }

    /// When an item first transmitted at `first` gets through: a transmission while a
    /// `packet_loss` lasts is lost with its chance (one draw each) and sent again one
    /// retransmission timeout later, the timeout doubled at each loss up to Linux's
    /// `TCP_RTO_MAX`, at most [`Toxics::LOSSES_MAX`] times; a transmission once it has ended
    /// gets through.
    fn transmitted(&mut self, first: SimTime) -> SimTime {
        let mut at = first;
        let mut timeout: Option<SimDuration> = None;
        for _ in 0..Toxics::LOSSES_MAX {
            let toxics = self.toxics.at(at);
            if toxics.loss_ppm == 0 || self.draws.below(MILLION) >= u64::from(toxics.loss_ppm) {
                break;
            }
            let wait = timeout.map_or(toxics.retransmit, |last| {
                last.saturating_add(last).min(Toxics::RETRANSMIT_MAX)
            });
            timeout = Some(wait);
            at = at.saturating_add(wait);
        }
        at
    }

    /// Puts `item` of `bytes` on the wire now, behind what is already being sent; returns
    /// when it arrives.
    pub(super) fn send(&mut self, now: SimTime, item: T, bytes: u64) -> SimTime {
        self.free_at = self.sent_by(self.free_at.max(now), bytes);
        self.in_flight.push_back(item);
        let arrival = self
            .through_toxics(self.free_at)
            .saturating_add(self.latency);
        self.last_arrival = self.last_arrival.max(arrival);
        self.last_arrival
    }

    /// When an item that leaves at `leaves` is through the toxics: its losses sent again, and
    /// held by a latency toxic. A connection without any toxic in the run (most) lets it
    /// through as it leaves, and draws nothing, as the timeline would with none in force.
    fn through_toxics(&mut self, leaves: SimTime) -> SimTime {
        if self.toxics.is_empty() {
            return leaves;
        }
        // A latency toxic's delay for this item, drawn as it leaves (before its losses).
        let toxics = self.toxics.at(leaves);
        let drawn = toxics.draw_added(&mut self.draws);
        let through = self.transmitted(leaves);
        // Held for the drawn delay while that toxic lasts, for the delay of the toxics in
        // force when others are, and let go when none is.
        let held = |later: &Toxics| {
            if (later.added, later.jitter) == (toxics.added, toxics.jitter) {
                drawn
            } else {
                later.added
            }
        };
        self.toxics.let_go(through, held)
    }

    /// The oldest item, which has just arrived.
    pub(super) fn receive(&mut self) -> T {
        self.in_flight
            .pop_front()
            .expect("one arrival event per item on the wire")
    }

    /// When a close (a FIN) sent now, after everything already on the wire, arrives: a
    /// `latency` toxic holds it as it would an item (without a jitter draw), and a
    /// `slow_close` toxic holds it back by its delay, until it ends.
    pub(super) fn arrival_after_queue(&self, now: SimTime) -> SimTime {
        let leaves = self.free_at.max(now);
        let delayed = self.toxics.let_go(leaves, |toxics| toxics.added);
        let arrival = delayed.saturating_add(self.latency).max(self.last_arrival);
        self.toxics.let_go(arrival, |toxics| toxics.close_delay)
    }

    /// Drops everything on the wire: the link it was on is gone, and a new link starts idle.
    pub(super) fn reset(&mut self) {
        self.in_flight.clear();
        self.free_at = SimTime::ZERO;
        self.last_arrival = SimTime::ZERO;
    }
}

/// Chances are per million.
const MILLION: u64 = 1_000_000;

#[cfg(test)]
mod tests {
    use super::*;

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

    /// A pipe without toxics takes a short way through `sent_by` and `through_toxics`; it
    /// must arrive where the timeline's way does with nothing in force (a timeline of one change to no toxic,
    /// which `ToxicTimeline::new` never builds, takes the long way).
    #[test]
    fn a_pipe_without_toxics_sends_as_the_timeline_does_with_none_in_force() {
        for bandwidth in [ByteRate::new(100 * MIB), None] {
            let latency = SimDuration::from_micros(250);
            let mut short = Pipe::new(bandwidth, latency, draws());
            let mut long = Pipe::new(bandwidth, latency, draws());
            long.set_toxics(ToxicTimeline {
                changes: Arc::from([(SimTime::ZERO, Toxics::default())]),
            });
            assert!(short.toxics.is_empty() && !long.toxics.is_empty());
            let mut now = SimTime::ZERO;
            for turn in 0u64..200 {
                // Sends bunched and spread, of a few bytes to a few MiB.
                now = now.saturating_add(SimDuration::from_micros((turn * 7919) % 3000));
                let bytes = (turn * 104_729) % (4 * MIB) + 1;
                assert_eq!(
                    short.send(now, turn, bytes),
                    long.send(now, turn, bytes),
                    "{turn}"
                );
            }
        }
    }

    /// `pipe` with one toxic fault of `kind` from `from_ms` to `until_ms` (`None`: to the
    /// end of the run).
    fn with_toxic<T>(
        mut pipe: Pipe<T>,
        kind: FaultKind,
        from_ms: u64,
        until_ms: Option<u64>,
    ) -> Pipe<T> {
        pipe.set_toxics(ToxicTimeline::new(&[(ms(from_ms), until_ms.map(ms), kind)]));
        pipe
    }

    /// A fault that ends before what it acts on is done, one that outlasts it, and none.
    const SHORT: Option<u64> = Some(100);
    const LONG: Option<u64> = Some(30_000);

    fn latency(added_ms: u64, jitter_ms: u64) -> FaultKind {
        FaultKind::Latency {
            added: SimDuration::from_millis(added_ms),
            jitter: SimDuration::from_millis(jitter_ms),
        }
    }

    fn loss(ppm: u32, retransmit_ms: u64) -> FaultKind {
        FaultKind::PacketLoss {
            ppm,
            retransmit: SimDuration::from_millis(retransmit_ms),
        }
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
    fn the_timeline_holds_what_is_in_force_between_starts_and_ends() {
        // 10 ms added over [100, 300) ms, 20 ms more over [200, 400) ms, 1 MiB/s over
        // [200, 250) ms, and a fault of no length at 500 ms.
        let bandwidth = FaultKind::Bandwidth(ByteRate::new(MIB).unwrap());
        let timeline = ToxicTimeline::new(&[
            (ms(100), Some(ms(300)), latency(10, 0)),
            (ms(200), Some(ms(400)), latency(20, 0)),
            (ms(200), Some(ms(250)), bandwidth),
            (ms(500), Some(ms(500)), latency(5, 0)),
        ]);
        let added = |at: u64| timeline.at(ms(at)).added.as_nanos() / 1_000_000;
        let cases = [(0, 0), (99, 0), (100, 10), (199, 10), (200, 30), (299, 30)];
        for (at, want) in cases
            .into_iter()
            .chain([(300, 20), (399, 20), (400, 0), (500, 0)])
        {
            assert_eq!(added(at), want, "at {at} ms");
        }
        assert_eq!(timeline.at(ms(249)).bandwidth, ByteRate::new(MIB));
        assert_eq!(timeline.at(ms(250)).bandwidth, None);
        // A change at 100, 200, 250, 300 and 400 ms; the empty fault changes nothing.
        assert_eq!(timeline.changes.len(), 5);
        // A fault to the end of the run is in force from its start on.
        let open = ToxicTimeline::new(&[(ms(7), None, latency(1, 0))]);
        assert_eq!(open.at(SimTime::MAX).added, SimDuration::from_millis(1));
    }

    /// toxiproxy's `bandwidth` toxic, and the docs' "while it lasts": ten 1 MiB items sent
    /// at once on a 100 MiB/s pipe behind a 1 MiB/s fault. Without it they leave every
    /// 10 ms, the last at 100 ms. Behind a fault of 100 ms, 104,857 bytes go in those 100 ms
    /// (0.1 MiB); the first item's other 943,719 bytes take 9.000006 ms at 100 MiB/s (rounded
    /// up to the nanosecond), the other nine 10 ms each: the last leaves at 199.000006 ms. Behind a fault of 30 s, a
    /// second each: 10 s.
    #[test]
    fn a_bandwidth_toxic_sends_at_its_rate_only_while_it_lasts() {
        let throttle = FaultKind::Bandwidth(ByteRate::new(MIB).unwrap());
        let last_arrival = |until_ms: Option<u64>| {
            let mut pipe = match until_ms {
                Some(until) => with_toxic(pipe(), throttle, 0, Some(until)),
                None => pipe(),
            };
            (0..10).map(|_| pipe.send(ms(0), "set", MIB)).last()
        };
        assert_eq!(last_arrival(None), Some(ms(101)));
        assert_eq!(last_arrival(SHORT), Some(SimTime::from_nanos(200_000_006)));
        assert_eq!(last_arrival(LONG), Some(ms(10_001)));
    }

    #[test]
    fn a_bandwidth_toxic_slows_the_bytes_still_to_send_when_it_starts() {
        // 1 MiB from 0 at 100 MiB/s: half of it is sent by 5 ms, when 1 MiB/s starts; the
        // other half takes 500 ms.
        let throttle = FaultKind::Bandwidth(ByteRate::new(MIB).unwrap());
        let mut pipe = with_toxic(pipe(), throttle, 5, LONG);
        assert_eq!(pipe.send(ms(0), "caught", MIB), ms(506));
        // Behind it on the wire, at the toxic's rate while it lasts: a second more.
        assert_eq!(pipe.send(ms(100), "next", MIB), ms(1_506));
    }

    /// 1 MiB (10 ms on the wire, then 1 ms) with 50 ms added from 0: the item leaves at
    /// 10 ms and is held to 60 ms behind a long fault; behind a fault that ends at 20 ms it
    /// is let go then (toxiproxy forwards what a removed toxic held).
    #[test]
    fn a_latency_toxic_holds_what_leaves_while_it_lasts_and_lets_it_go_at_its_end() {
        let slow = latency(50, 0);
        let arrival = |until_ms: Option<u64>| {
            let mut pipe = match until_ms {
                Some(until) => with_toxic(pipe(), slow, 0, Some(until)),
                None => pipe(),
            };
            pipe.send(ms(0), "held", MIB)
        };
        assert_eq!(arrival(None), ms(11));
        assert_eq!(arrival(Some(20)), ms(21));
        assert_eq!(arrival(LONG), ms(61));
        // What leaves after the end is not held; it never overtakes what is ahead.
        let mut pipe = with_toxic(pipe(), slow, 0, SHORT);
        assert_eq!(pipe.send(ms(60), "held", 0), ms(101));
        assert_eq!(pipe.send(ms(99), "also", 0), ms(101));
        assert_eq!(pipe.send(ms(100), "after", 0), ms(101));
        assert_eq!(pipe.send(ms(150), "later", 0), ms(151));
        assert_eq!(pipe.arrival_after_queue(ms(150)), ms(151));
    }

    #[test]
    fn a_jittered_delay_stays_within_its_bounds_and_never_reorders() {
        let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
        pipe.set_toxics(ToxicTimeline::new(&[(ms(0), None, latency(10, 4))]));
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

    /// 10 ms ± 4 ms from 0: items sent at 0, 1, ..., 4 ms are each held at least 6 ms behind
    /// a long fault; behind one that ends at 5 ms, every one is let go at 5 ms.
    #[test]
    fn a_jittered_delay_ends_with_its_toxic() {
        let arrivals = |until_ms: Option<u64>| {
            let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
            if let Some(until) = until_ms {
                pipe = with_toxic(pipe, latency(10, 4), 0, Some(until));
            }
            (0..5).map(|i| pipe.send(ms(i), "x", 0)).collect::<Vec<_>>()
        };
        assert_eq!(arrivals(None), (0..5).map(ms).collect::<Vec<_>>());
        assert_eq!(arrivals(Some(5)), vec![ms(5); 5]);
        let long = arrivals(LONG);
        assert!(long.iter().all(|&at| at >= ms(6)), "{long:?}");
    }

    /// 10% loss with a 200 ms retransmission timeout, on a pipe of no latency: an item sent
    /// every 10 s (so none waits behind another) arrives 0, 200, 600, 1400 ms... late, for 0,
    /// 1, 2, 3... losses in a row; over 20,000 items about 10% are late, about 1% twice, and
    /// the delays are exactly those.
    #[test]
    fn a_packet_loss_toxic_retransmits_with_backoff() {
        let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
        pipe.set_toxics(ToxicTimeline::new(&[(ms(0), None, loss(100_000, 200))]));
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
        let mut pipe = with_toxic(
            Pipe::new(None, SimDuration::ZERO, draws()),
            loss(999_999, 1),
            0,
            Some(1),
        );
        let first = pipe.send(ms(0), "lost", 0);
        assert_eq!(first, ms(1), "lost once, sent again after the fault");
        assert_eq!(pipe.send(ms(1), "behind", 0), first);
    }

    /// All but one in a million lost, a 200 ms timeout: transmissions at 0, 0.2, 0.6, 1.4,
    /// 3.0, 6.2, 12.6 and 25.4 s are lost behind a 30 s fault, and the one at 51 s (after
    /// 25.6 s more) gets through; behind a 100 ms fault, the first retransmission, at 200 ms,
    /// gets through.
    #[test]
    fn a_packet_loss_ends_with_its_fault_and_the_next_retransmission_gets_through() {
        let arrival = |until_ms: Option<u64>| {
            let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
            if let Some(until) = until_ms {
                pipe = with_toxic(pipe, loss(999_999, 200), 0, Some(until));
            }
            pipe.send(ms(0), "x", 0)
        };
        assert_eq!(arrival(None), ms(0));
        assert_eq!(arrival(SHORT), ms(200));
        assert_eq!(arrival(LONG), ms(51_000));
    }

    /// Lost 15 times in a row with a 10 s timeout: 10 + 20 + 40 + 80 s, then 120 s (Linux's
    /// TCP_RTO_MAX) eleven times: 1,470 s, not 10 s x (2^15 - 1).
    #[test]
    fn the_retransmission_timeout_stops_doubling_at_two_minutes() {
        let mut pipe = Pipe::new(None, SimDuration::ZERO, draws());
        pipe.set_toxics(ToxicTimeline::new(&[(ms(0), None, loss(999_999, 10_000))]));
        assert_eq!(pipe.send(ms(0), "x", 0), ms(1_470_000));
        // At most all but one in a million is lost, however the losses combine.
        let toxics = Toxics::of(&[loss(999_500, 200), loss(999_500, 200)]);
        assert_eq!(toxics.loss_ppm, 999_999);
    }

    #[test]
    fn losses_combine_and_the_longest_timeout_holds() {
        let toxics = Toxics::of(&[loss(100_000, 200), loss(200_000, 300)]);
        // Survives both with 0.9 x 0.8 = 0.72: lost with 28%.
        assert_eq!(toxics.loss_ppm, 280_000);
        assert_eq!(toxics.retransmit, SimDuration::from_millis(300));
        assert_eq!(Toxics::of(&[]).loss_ppm, 0);
    }

    /// A close at 20 ms on an idle pipe of 1 ms: it arrives at 21 ms; 300 ms later behind a
    /// long `slow_close`; at 100 ms, when a short one ends and lets it go.
    #[test]
    fn a_slow_close_holds_a_close_back_only_while_it_lasts() {
        let close = FaultKind::SlowClose {
            delay: SimDuration::from_millis(300),
        };
        let arrival = |until_ms: Option<u64>| {
            let pipe = match until_ms {
                Some(until) => with_toxic(pipe(), close, 0, Some(until)),
                None => pipe(),
            };
            pipe.arrival_after_queue(ms(20))
        };
        assert_eq!(arrival(None), ms(21));
        assert_eq!(arrival(SHORT), ms(100));
        assert_eq!(arrival(LONG), ms(321));
    }
}

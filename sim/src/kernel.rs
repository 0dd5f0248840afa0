//! The event queue: what happens next, in virtual time.
//!
//! Events are ordered by `(time, class, insertion sequence)`: of the events due at the same
//! nanosecond, those of a lower [`Class`] run first, and events of one class run in the order
//! they were scheduled. Events are small `Copy` values naming entities by index; the queue's
//! storage is reused, so a run in steady state allocates nothing per event.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use outagelab_model::time::SimTime;

use outagelab_report::Outcome;

use crate::callers::CallRef;
use crate::database::DatabaseEvent;
use crate::redis::RedisEvent;
use crate::rng::Stream;
use crate::scenario::{FaultId, LoadId, TieOrder};

/// How one step of a request ended (a live run's steps end the same ways).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepResult {
    Ok,
    /// A `GET` found its key.
    Hit,
    /// A `GET` did not find its key.
    Miss,
    Error(Outcome),
}

/// A reference to a request that is waiting for something. It is stale (and the event that
/// carries it is dropped) once the request stopped waiting: every request bumps its token
/// whenever a wait ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RequestRef {
    pub slot: u32,
    pub token: u32,
}

impl RequestRef {
    /// As a bulkhead waiter id.
    pub fn to_waiter(self) -> u64 {
        u64::from(self.slot) << 32 | u64::from(self.token)
    }

    pub fn from_waiter(waiter: u64) -> RequestRef {
        RequestRef {
            slot: (waiter >> 32) as u32,
            token: waiter as u32,
        }
    }
}

/// What a request's timer is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerKind {
    /// A retry's backoff is over: enter the step's inner layers again.
    Backoff,
    /// A timer of the step's action (its work done, a KV round trip over, a lock's retry).
    Action(crate::actions::Timer),
}

/// Which of the events due at the same nanosecond runs first: the lower class, then the one
/// scheduled first. The rule reads time as half-open intervals, `[start, end)`:
///
/// 1. [`Class::Finish`]: something in progress ends at this instant: a transfer arrives, work
///    completes, a delay is over. What it held (a database's capacity, a bulkhead permit, a
///    server's thread) is free *at* its end, so everything else due at the same instant sees
///    it free: with a 10 ms query and a new request every 10 ms, each request finds the
///    previous one done, as in a queue whose utilisation is exactly one.
/// 2. [`Class::Deadline`]: a timeout. An answer that arrives exactly at its deadline is in
///    time; the timeout fires only for what is still waiting after every finish of the instant.
/// 3. [`Class::Fault`]: a fault starts or ends. A fault acts on the system as it stands once
///    the instant's work and timeouts have run; its window is `[at, end)`, so a request arriving
///    at `at` meets the fault and one arriving at `end` does not.
/// 4. [`Class::Arrival`]: a new request from a load, last: it sees everything that happened at
///    its instant.
///
/// An event scheduled for the current instant by an event of that instant runs after its cause
/// (whatever its class), then by this rule among the events still due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Class {
    Finish,
    Deadline,
    Fault,
    Arrival,
}

/// Everything the queue holds: the engine's own events, and each mechanism's, which the engine
/// hands back to that mechanism's `handle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// The next arrival (or burst) of a load generator.
    Arrival(LoadId),
    /// Caller `worker` of a closed-loop load sends its next request.
    WorkerSends {
        load: LoadId,
        worker: u32,
    },
    /// A caller gives up on attempt `attempt` of a call.
    CallerTimeout {
        call: CallRef,
        attempt: u32,
    },
    /// A caller makes the next attempt of a call, its backoff over.
    CallerRetry {
        call: CallRef,
    },
    /// A timer a request set: what it means is its kind, and the request's stage says the
    /// same (the two are checked against each other).
    RequestTimer {
        request: RequestRef,
        kind: TimerKind,
    },
    FaultStarts(FaultId),
    FaultEnds(FaultId),
    Redis(RedisEvent),
    Database(DatabaseEvent),
}

impl Event {
    /// Its place among the events due at the same nanosecond.
    #[inline(always)]
    pub fn class(&self) -> Class {
        match self {
            Event::RequestTimer { .. } | Event::CallerRetry { .. } => Class::Finish,
            Event::CallerTimeout { .. } => Class::Deadline,
            Event::Redis(event) => event.class(),
            Event::Database(event) => event.class(),
            Event::FaultStarts(_) | Event::FaultEnds(_) => Class::Fault,
            Event::Arrival(_) | Event::WorkerSends { .. } => Class::Arrival,
        }
    }
}

impl From<RedisEvent> for Event {
    fn from(event: RedisEvent) -> Event {
        Event::Redis(event)
    }
}

impl From<DatabaseEvent> for Event {
    fn from(event: DatabaseEvent) -> Event {
        Event::Database(event)
    }
}

/// A waiting event with its place in the order, `(time, class, sequence)`, packed into one
/// integer so that ordering two entries is a single comparison: the time in the high 64 bits,
/// then the class in the next two, then the sequence number in the low 62. An entry is 32
/// bytes.
#[derive(Clone, Copy)]
struct Scheduled {
    key: u128,
    event: Event,
}

/// Bits of the sequence number in a key: 2^62 events is more than any run schedules (at a
/// billion events a second, a run would take a century and a half to get there).
const SEQ_BITS: u32 = 62;

impl Scheduled {
    fn new(at: SimTime, class: Class, seq: u64, event: Event) -> Scheduled {
        assert!(seq < 1 << SEQ_BITS, "fewer than 2^62 events scheduled");
        let low = (class as u64) << SEQ_BITS | seq;
        Scheduled {
            key: u128::from(at.as_nanos()) << 64 | u128::from(low),
            event,
        }
    }

    fn at(&self) -> SimTime {
        SimTime::from_nanos(self.nanos())
    }

    /// When it is due, in nanoseconds (the key's high 64 bits).
    fn nanos(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl Eq for Scheduled {}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scheduled {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key.cmp(&self.key)
    }
}

/// Most runs hold a handful of waiting events at a time (the next arrival, a database's next
/// wake-up, a few timeouts): up to this many are kept unsorted, beside the index of the
/// earliest, so that scheduling one is a push and a compare and taking the earliest a scan of
/// a few keys. Past it they move into a [`Radix`] queue, and back once it holds
/// [`FEW_AGAIN`] or fewer.
const FEW_MAX: usize = 16;

/// The size at which many events move back to the unsorted few (well below [`FEW_MAX`],
/// so that a queue near the limit does not move its events back and forth). Measured on
/// explore's seed000, whose queue hovers at 8 to 15 events once it has passed 16: 2 costs
/// the fewest instructions (4: 0.5% more, 8: 2.5% more, 12: 3.9% more; the radix queue of a
/// dozen events is cheaper than the few's scan and the moves between them).
const FEW_AGAIN: usize = 2;

/// Many waiting events: a radix heap over their times. Time never goes back (the engine
/// schedules nothing before the instant it is at), so the events due after `last` (the time
/// of the last event a bucket gave, or the earliest waiting when the few moved in) sit in 64
/// unsorted buckets by the highest bit in which their time differs from `last`; events due at
/// `last` or before it sit in `due`, a heap by their whole key, which breaks an instant's ties
/// by class and sequence. Scheduling is a push into a bucket; taking the earliest, when none is
/// in `due`, takes the least key of the lowest bucket, moves `last` to its time, and spreads
/// the bucket's other events over `due` and the buckets below (each event moves down a few
/// times in its life, however many wait; most often the lowest bucket holds one). A binary
/// heap of the same events sifted through `log2(n)` levels of 32-byte entries per event
/// taken: at a hundred waiting, the most of `explore`'s queue cost.
///
/// Invariant: every event in `buckets[b]` is due after `last`, at a time whose highest bit
/// differing from `last` is `b` (so every event in a lower bucket is due before every event in
/// a higher one); bit `b` of `occupied` is set exactly when `buckets[b]` holds any; `due`
/// holds every event due at `last` or before it, and is taken from first (before `last` only
/// for an event scheduled after the few moved in and before the earliest of them, or in the
/// past, which the engine never does and a test may).
struct Radix {
    last: u64,
    due: BinaryHeap<Scheduled>,
    buckets: [Vec<Scheduled>; 64],
    occupied: u64,
    len: usize,
}

impl Default for Radix {
    fn default() -> Radix {
        Radix {
            last: 0,
            due: BinaryHeap::new(),
            buckets: std::array::from_fn(|_| Vec::new()),
            occupied: 0,
            len: 0,
        }
    }
}

impl Radix {
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn push(&mut self, scheduled: Scheduled) {
        self.len += 1;
        self.place(scheduled);
    }

    /// Into `due` or the bucket its time's highest bit differing from `last` names.
    #[inline(always)]
    fn place(&mut self, scheduled: Scheduled) {
        let at = scheduled.nanos();
        if at <= self.last {
            self.due.push(scheduled);
        } else {
            let bucket = (63 - (at ^ self.last).leading_zeros()) as usize;
            self.buckets[bucket & 63].push(scheduled);
            self.occupied |= 1 << bucket;
        }
    }

    fn pop(&mut self) -> Option<Scheduled> {
        if let Some(scheduled) = self.due.pop() {
            self.len -= 1;
            return Some(scheduled);
        }
        if self.occupied == 0 {
            return None;
        }
        // The lowest bucket holds the earliest times: its least key is the earliest event,
        // `last` moves to its time, and the bucket's other events all fall into `due` or
        // lower buckets (they share `last`'s bits above the bucket's, and so does the new
        // `last`). Most often the bucket holds that one event alone.
        let bucket = self.occupied.trailing_zeros() as usize;
        self.occupied &= !(1 << bucket);
        let mut spread = std::mem::take(&mut self.buckets[bucket]);
        let earliest = spread.swap_remove(least_key(&spread));
        self.last = earliest.nanos();
        for &scheduled in &spread {
            self.place(scheduled);
        }
        spread.clear();
        // Its storage is kept for the bucket's next events.
        self.buckets[bucket] = spread;
        self.len -= 1;
        Some(earliest)
    }

    /// Every event, in no order, leaving the queue empty. Its storage is given back: each
    /// bucket keeps the most it held while the queue was many (an event passes through a few
    /// buckets, so together they may keep a few times what waits at once), and once the queue
    /// is few again that would be held for nothing.
    fn drain_into(&mut self, out: &mut Vec<Scheduled>) {
        out.extend(std::mem::take(&mut self.due).into_vec());
        for bucket in &mut self.buckets {
            out.append(bucket);
            *bucket = Vec::new();
        }
        self.occupied = 0;
        self.len = 0;
    }

    /// What the buckets and `due` have room for: what the radix queue holds in memory.
    fn capacity(&self) -> usize {
        self.due.capacity() + self.buckets.iter().map(Vec::capacity).sum::<usize>()
    }

    #[cfg(test)]
    fn peek_time(&self) -> Option<SimTime> {
        if let Some(scheduled) = self.due.peek() {
            return Some(scheduled.at());
        }
        let bucket = self.buckets.get(self.occupied.trailing_zeros() as usize)?;
        bucket.iter().map(Scheduled::at).min()
    }
}

/// The waiting events, earliest key first. Invariant: while `many` is empty, every event is
/// in `few`, with `earliest` the index of the least key (0 when `few` is empty); once `many`
/// holds any, every event is in `many` and `few` is empty. Keys are unique (a sequence number
/// each; a shuffled order's tie of two 62-bit draws is taken in either order), so both forms
/// take events in the same order.
#[derive(Default)]
pub(crate) struct EventQueue {
    few: Vec<Scheduled>,
    earliest: usize,
    many: Radix,
    next_seq: u64,
    /// `Some(stream)`: ties within a class at one instant are broken in an order drawn from
    /// the stream instead of the order they were scheduled in (see [`TieOrder`]).
    shuffle: Option<Stream>,
}

impl EventQueue {
    /// A queue that breaks same-instant ties within a class as `order` says.
    pub fn new(order: TieOrder, seed: u64) -> EventQueue {
        EventQueue {
            shuffle: match order {
                TieOrder::Scheduled => None,
                TieOrder::Shuffled => Some(Stream::derive(seed, "ties", "")),
            },
            ..EventQueue::default()
        }
    }

    /// Schedules `event` for `at`. Inlined where it is called, so that the event's class (its
    /// place among an instant's events) is worked out there, where its kind is known and the
    /// match folds to a constant; the queue's work is [`EventQueue::schedule_in`]'s.
    #[inline(always)]
    pub fn schedule(&mut self, at: SimTime, event: impl Into<Event>) {
        let event = event.into();
        self.schedule_in(at, event.class(), event);
    }

    /// Schedules `event`, of `class`, for `at`.
    fn schedule_in(&mut self, at: SimTime, class: Class, event: Event) {
        let seq = match &mut self.shuffle {
            // A random position among the same-instant events of its class: 62 random bits
            // (a tie of two draws is taken in the order the queue's scans find it: deterministic,
            // either way).
            Some(stream) => stream.next_u64() >> (64 - SEQ_BITS),
            None => self.next_seq,
        };
        let scheduled = Scheduled::new(at, class, seq, event);
        self.next_seq += 1;
        if !self.many.is_empty() {
            self.many.push(scheduled);
        } else if self.few.len() < FEW_MAX {
            if self.few.is_empty() || scheduled.key < self.few[self.earliest].key {
                self.earliest = self.few.len();
            }
            self.few.push(scheduled);
        } else {
            self.move_to_many(scheduled);
        }
    }

    /// The few are full: they and `scheduled` move into `many`, which counts from the
    /// earliest of them (any instant at or before every event's would do: events before it,
    /// scheduled meanwhile, wait in `due`). Rare, and kept apart from the few's hot path.
    #[cold]
    #[inline(never)]
    fn move_to_many(&mut self, scheduled: Scheduled) {
        let earliest = self.few[self.earliest].nanos().min(scheduled.nanos());
        self.many.last = earliest;
        for few in self.few.drain(..) {
            self.many.push(few);
        }
        self.many.push(scheduled);
        self.earliest = 0;
    }

    /// Events the queue's storage has room for: what it holds in memory (the radix queue's
    /// buckets keep what they held while it is many, so this can be a few times what waits).
    pub fn capacity(&self) -> usize {
        self.few.capacity() + self.many.capacity()
    }

    /// Bytes one waiting event takes in the queue.
    pub const ENTRY_BYTES: u64 = std::mem::size_of::<Scheduled>() as u64;

    /// When the earliest event is due (the engine pops it and checks then; tests step up to an
    /// instant with it).
    #[cfg(test)]
    pub fn peek_time(&self) -> Option<SimTime> {
        if self.many.is_empty() {
            self.few.get(self.earliest).map(Scheduled::at)
        } else {
            self.many.peek_time()
        }
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(SimTime, Event)> {
        let scheduled = if self.many.is_empty() {
            if self.few.is_empty() {
                return None;
            }
            let scheduled = self.few.swap_remove(self.earliest);
            self.earliest = least_key(&self.few);
            scheduled
        } else {
            let scheduled = self.many.pop().expect("not empty");
            if self.many.len <= FEW_AGAIN {
                self.many.drain_into(&mut self.few);
                self.earliest = least_key(&self.few);
            }
            scheduled
        };
        Some((scheduled.at(), scheduled.event))
    }
}

/// The index of the least key among `events` (0 when there are none).
fn least_key(events: &[Scheduled]) -> usize {
    let mut least = 0;
    for (index, scheduled) in events.iter().enumerate().skip(1) {
        if scheduled.key < events[least].key {
            least = index;
        }
    }
    least
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{ConnectionId, DatabaseId, ServerId};

    fn t(nanos: u64) -> SimTime {
        SimTime::from_nanos(nanos)
    }

    fn drain(queue: &mut EventQueue) -> Vec<(SimTime, Event)> {
        std::iter::from_fn(|| queue.pop()).collect()
    }

    #[test]
    fn same_instant_events_of_one_class_keep_their_insertion_order() {
        let mut queue = EventQueue::default();
        queue.schedule(t(5), Event::Arrival(LoadId(2)));
        queue.schedule(t(3), Event::Arrival(LoadId(0)));
        queue.schedule(t(5), Event::Arrival(LoadId(3)));
        queue.schedule(t(3), Event::Arrival(LoadId(1)));
        assert_eq!(
            drain(&mut queue),
            vec![
                (t(3), Event::Arrival(LoadId(0))),
                (t(3), Event::Arrival(LoadId(1))),
                (t(5), Event::Arrival(LoadId(2))),
                (t(5), Event::Arrival(LoadId(3))),
            ]
        );
    }

    /// One event of each class (two finishes), in the order the rule runs them at one instant.
    fn one_instant() -> Vec<Event> {
        let request = RequestRef { slot: 0, token: 0 };
        let database = DatabaseId(0);
        vec![
            Event::RequestTimer {
                request,
                kind: TimerKind::Action(crate::actions::Timer::Work),
            },
            Event::Database(DatabaseEvent::Wake {
                database,
                generation: 1,
            }),
            Event::Database(DatabaseEvent::Timeout {
                database,
                generation: 1,
            }),
            Event::FaultStarts(FaultId(0)),
            Event::Arrival(LoadId(0)),
        ]
    }

    #[test]
    fn at_one_instant_finishes_run_before_deadlines_before_faults_before_arrivals() {
        let expected = one_instant();
        let mut queue = EventQueue::default();
        // Scheduled in the reverse order, and an earlier and a later event around them.
        queue.schedule(t(9), Event::FaultEnds(FaultId(0)));
        for &event in expected.iter().rev() {
            queue.schedule(t(7), event);
        }
        queue.schedule(t(6), Event::Arrival(LoadId(1)));
        let order: Vec<Event> = drain(&mut queue).into_iter().map(|(_, e)| e).collect();
        let mut want = vec![Event::Arrival(LoadId(1))];
        // The two finishes keep their scheduling order (the database's was scheduled first).
        want.extend([expected[1], expected[0]]);
        want.extend_from_slice(&expected[2..]);
        want.push(Event::FaultEnds(FaultId(0)));
        assert_eq!(order, want);
    }

    #[test]
    fn the_order_at_one_instant_does_not_depend_on_the_order_of_scheduling() {
        // One event per class: every one of the 24 scheduling orders pops in class order.
        let events: Vec<Event> = one_instant().into_iter().skip(1).collect();
        let classes: Vec<Class> = events.iter().map(Event::class).collect();
        assert!(classes.is_sorted() && classes.windows(2).all(|w| w[0] != w[1]));
        let mut order: Vec<usize> = (0..events.len()).collect();
        let mut seen = 0;
        permutations(&mut order, 0, &mut |permutation| {
            let mut queue = EventQueue::default();
            for &index in permutation {
                queue.schedule(t(1), events[index]);
            }
            let popped: Vec<Event> = drain(&mut queue).into_iter().map(|(_, e)| e).collect();
            assert_eq!(popped, events, "scheduled in the order {permutation:?}");
            seen += 1;
        });
        assert_eq!(seen, 24);
    }

    #[test]
    fn shuffled_ties_permute_within_a_class_by_the_seed_and_keep_time_and_class_order() {
        let pop_order = |seed: u64| -> Vec<Event> {
            let mut queue = EventQueue::new(TieOrder::Shuffled, seed);
            queue.schedule(t(9), Event::FaultStarts(FaultId(0)));
            for load in 0..8 {
                queue.schedule(t(5), Event::Arrival(LoadId(load)));
            }
            queue.schedule(t(5), Event::FaultStarts(FaultId(1)));
            queue.schedule(t(1), Event::Arrival(LoadId(99)));
            drain(&mut queue).into_iter().map(|(_, e)| e).collect()
        };
        let arrivals = |order: &[Event]| -> Vec<u32> {
            (order.iter())
                .filter_map(|e| match e {
                    Event::Arrival(LoadId(load)) if *load < 8 => Some(*load),
                    _ => None,
                })
                .collect()
        };
        let first = pop_order(1);
        // Time first, then the class rule (a fault before arrivals at t = 5), then the draw.
        assert_eq!(first[0], Event::Arrival(LoadId(99)));
        assert_eq!(first[1], Event::FaultStarts(FaultId(1)));
        assert_eq!(first[10], Event::FaultStarts(FaultId(0)));
        let mut sorted = arrivals(&first);
        sorted.sort_unstable();
        assert_eq!(sorted, (0..8).collect::<Vec<u32>>());
        // The same seed, the same order; another seed, another; the fixed rule keeps 0..8.
        assert_eq!(pop_order(1), first);
        let orders: Vec<Vec<u32>> = (1..6).map(|seed| arrivals(&pop_order(seed))).collect();
        assert!(orders.iter().any(|order| order != &orders[0]), "{orders:?}");
        assert!(orders.iter().any(|order| !order.is_sorted()), "{orders:?}");
    }

    /// Calls `visit` with every permutation of `items[at..]` (Heap-free, by swapping).
    fn permutations(items: &mut [usize], at: usize, visit: &mut impl FnMut(&[usize])) {
        if at == items.len() {
            visit(items);
            return;
        }
        for index in at..items.len() {
            items.swap(at, index);
            permutations(items, at + 1, visit);
            items.swap(at, index);
        }
    }

    #[test]
    fn redis_events_are_finishes_but_for_the_two_timeouts() {
        let connection = ConnectionId(0);
        let deadlines = [
            RedisEvent::CommandTimeout { connection },
            RedisEvent::ConnectTimeout {
                connection,
                epoch: 0,
            },
        ];
        for event in deadlines {
            assert_eq!(Event::Redis(event).class(), Class::Deadline);
        }
        let finishes = [
            RedisEvent::CommandArrives {
                connection,
                epoch: 0,
            },
            RedisEvent::ServerDone {
                server: ServerId(0),
                epoch: 0,
            },
            RedisEvent::ReplyArrives {
                connection,
                epoch: 0,
            },
            RedisEvent::ConnectArrives {
                connection,
                epoch: 0,
            },
            RedisEvent::ConnectAnswered {
                connection,
                epoch: 0,
                accepted: true,
            },
            RedisEvent::ReconnectDue {
                connection,
                epoch: 0,
            },
            RedisEvent::ConnectionClosed {
                connection,
                epoch: 0,
            },
        ];
        for event in finishes {
            assert_eq!(Event::Redis(event).class(), Class::Finish);
        }
    }

    #[test]
    fn events_stay_small() {
        assert!(std::mem::size_of::<Event>() <= 16);
    }

    #[test]
    fn entries_stay_small() {
        assert_eq!(EventQueue::ENTRY_BYTES, 32);
    }

    #[test]
    fn the_packed_key_orders_by_time_then_class_then_sequence() {
        let key = |at, class, seq| Scheduled::new(t(at), class, seq, Event::Arrival(LoadId(0))).key;
        // The largest sequence of a class sorts before the smallest of the next class, and the
        // largest class and sequence of an instant before the next nanosecond.
        let seq_max = (1 << SEQ_BITS) - 1;
        assert!(key(7, Class::Finish, seq_max) < key(7, Class::Deadline, 0));
        assert!(key(7, Class::Arrival, seq_max) < key(8, Class::Finish, 0));
        assert!(key(u64::MAX - 1, Class::Arrival, seq_max) < key(u64::MAX, Class::Finish, 0));
        let entry = Scheduled::new(
            t(u64::MAX),
            Class::Arrival,
            seq_max,
            Event::Arrival(LoadId(0)),
        );
        assert_eq!(entry.at(), t(u64::MAX));
    }

    #[test]
    fn waiter_ids_round_trip() {
        let r = RequestRef {
            slot: 7,
            token: u32::MAX,
        };
        assert_eq!(RequestRef::from_waiter(r.to_waiter()), r);
    }

    proptest::proptest! {
        /// Whether its events are few (unsorted, with the earliest found by a scan) or many
        /// (the radix queue), and across the moves between the two, the queue gives the
        /// events in the order a plain heap of the same keys gives: by time, class and
        /// scheduling order.
        #[test]
        fn the_queue_takes_events_in_key_order_few_or_many(
            ops in proptest::collection::vec((0u64..40, 0u8..4, proptest::bool::weighted(0.55)), 1..400),
        ) {
            let mut queue = EventQueue::default();
            let mut reference = BinaryHeap::new();
            let mut seq = 0u64;
            for (at, kind, push) in ops {
                if push {
                    let event = match kind {
                        0 => Event::Arrival(LoadId(seq as u32)),
                        1 => Event::FaultStarts(FaultId(seq as u32)),
                        2 => Event::CallerRetry { call: crate::callers::CallRef { slot: seq as u32, token: 0 } },
                        _ => Event::Database(DatabaseEvent::Wake { database: DatabaseId(0), generation: seq as u32 }),
                    };
                    reference.push(Scheduled::new(t(at), event.class(), seq, event));
                    queue.schedule(t(at), event);
                    seq += 1;
                } else {
                    let expected = reference.pop().map(|s| (s.at(), s.event));
                    proptest::prop_assert_eq!(queue.peek_time(), expected.map(|(at, _)| at));
                    proptest::prop_assert_eq!(queue.pop(), expected);
                }
            }
            let rest: Vec<_> = std::iter::from_fn(|| reference.pop().map(|s| (s.at(), s.event))).collect();
            proptest::prop_assert_eq!(drain(&mut queue), rest);
        }

        /// As the engine schedules: each event at the instant of the last one taken or after
        /// it, by a delay of any size from none to hours (so the radix queue's events spread
        /// over many buckets and move down through them), with bursts at one instant; the
        /// queue gives them in a plain heap's order.
        #[test]
        fn the_queue_takes_events_scheduled_ahead_in_key_order(
            ops in proptest::collection::vec((0u32..44, 0u8..4, 0u8..8), 1..600),
        ) {
            let mut queue = EventQueue::default();
            let mut reference = BinaryHeap::new();
            let mut seq = 0u64;
            let mut now = 0u64;
            for (delay_bits, kind, what) in ops {
                if what < 5 {
                    // A delay of up to 2^delay_bits nanoseconds; one send in five has none.
                    let delay = if what == 0 { 0 } else { (seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20) & ((1u64 << delay_bits) - 1) };
                    let copies = if what == 1 { 1 + (seq % 7) } else { 1 };
                    for _ in 0..copies {
                        let event = match kind {
                            0 => Event::Arrival(LoadId(seq as u32)),
                            1 => Event::FaultStarts(FaultId(seq as u32)),
                            2 => Event::CallerRetry { call: crate::callers::CallRef { slot: seq as u32, token: 0 } },
                            _ => Event::Database(DatabaseEvent::Wake { database: DatabaseId(0), generation: seq as u32 }),
                        };
                        reference.push(Scheduled::new(t(now + delay), event.class(), seq, event));
                        queue.schedule(t(now + delay), event);
                        seq += 1;
                    }
                } else {
                    let expected = reference.pop().map(|s| (s.at(), s.event));
                    proptest::prop_assert_eq!(queue.peek_time(), expected.map(|(at, _)| at));
                    proptest::prop_assert_eq!(queue.pop(), expected);
                    if let Some((at, _)) = expected {
                        now = at.as_nanos();
                    }
                }
            }
            let rest: Vec<_> = std::iter::from_fn(|| reference.pop().map(|s| (s.at(), s.event))).collect();
            proptest::prop_assert_eq!(drain(&mut queue), rest);
        }
    }
}

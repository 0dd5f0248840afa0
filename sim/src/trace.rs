//! The run's side of `run --trace`: which requests are sampled, and their events, kept in a
//! bounded buffer (`outagelab_report::trace` writes them out). Sampling is by arrival order,
//! every `sample_every`-th request from the first, so the same run traces the same requests.

use std::num::NonZeroU64;

use outagelab_model::time::SimTime;
use outagelab_report::trace::{Trace, TraceEvent, TraceWhat};

/// The most requests one run traces: a trace is for reading a few requests' paths, and a
/// viewer slows down past a few thousand tracks.
pub const TRACED_REQUESTS_MAX: u64 = 1_000;

/// The most events one run's trace keeps; later ones are counted as dropped.
pub const TRACE_EVENTS_MAX: usize = 200_000;

pub struct Tracer {
    sample_every: NonZeroU64,
    /// Requests that arrived so far (sampled or not).
    arrived: u64,
    traced: u64,
    events: Vec<TraceEvent>,
    dropped: u64,
}

impl Tracer {
    pub fn new(sample_every: NonZeroU64) -> Tracer {
        Tracer {
            sample_every,
            arrived: 0,
            traced: 0,
            events: Vec::new(),
            dropped: 0,
        }
    }

    /// A request arrived: its number in the trace when it is sampled.
    pub fn arrived(&mut self) -> Option<u64> {
        let number = self.arrived;
        self.arrived += 1;
        let sampled =
            number.is_multiple_of(self.sample_every.get()) && self.traced < TRACED_REQUESTS_MAX;
        sampled.then(|| {
            self.traced += 1;
            number
        })
    }

    pub fn record(&mut self, at: SimTime, request: Option<u64>, what: TraceWhat) {
        if self.events.len() < TRACE_EVENTS_MAX {
            self.events.push(TraceEvent {
                at_ns: at.as_nanos(),
                request,
                what,
            });
        } else {
            self.dropped += 1;
        }
    }

    pub fn finish(self, end: SimTime) -> Trace {
        Trace {
            sample_every: self.sample_every.get(),
            requests: self.traced,
            events: self.events,
            dropped: self.dropped,
            end_ns: end.as_nanos(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_nth_request_from_the_first_is_sampled_up_to_the_cap() {
        let mut tracer = Tracer::new(NonZeroU64::new(3).unwrap());
        let sampled: Vec<Option<u64>> = (0..7).map(|_| tracer.arrived()).collect();
        assert_eq!(sampled, [Some(0), None, None, Some(3), None, None, Some(6)]);
        let mut every = Tracer::new(NonZeroU64::MIN);
        let traced = (0..TRACED_REQUESTS_MAX + 5)
            .filter(|_| every.arrived().is_some())
            .count();
        assert_eq!(traced as u64, TRACED_REQUESTS_MAX);
    }

    #[test]
    fn events_past_the_cap_are_counted_not_kept() {
        let mut tracer = Tracer::new(NonZeroU64::MIN);
        for _ in 0..TRACE_EVENTS_MAX + 2 {
            let what = TraceWhat::Decision {
                text: String::new(),
            };
            tracer.record(SimTime::ZERO, Some(0), what);
        }
        let trace = tracer.finish(SimTime::ZERO);
        assert_eq!((trace.events.len(), trace.dropped), (TRACE_EVENTS_MAX, 2));
    }
}

//! The file's loads, live: open-loop arrivals and closed-loop callers from the simulator's
//! seeded streams.

#[allow(unused_imports)]
use super::*;

/// Starts `load`: one task for an open loop, one per caller for a closed loop.
pub(super) fn start_load(run: &Arc<Run>, load: &LoadSpec) {
    let seed = run.scenario.seed;
    let stream = Stream::derive(seed, "load", &load.name);
    let (flow, start) = (load.flow, load.start);
    match load.arrivals {
        Arrivals::Closed(closed) => {
            let stream = Arc::new(Mutex::new(stream));
            let workers: Vec<SimTime> = (0..closed.workers)
                .map(|worker| {
                    let offset = u128::from(closed.stagger.as_nanos()) * u128::from(worker)
                        / u128::from(closed.workers);
                    start.saturating_add(SimDuration::from_nanos(
                        u64::try_from(offset).expect("below the stagger"),
                    ))
                })
                .filter(|&at| closed.iterations != Some(0) && closed.until.is_none_or(|u| at < u))
                .collect();
            if workers.is_empty() {
                return;
            }
            let active = Arc::new(Mutex::new(workers.len()));
            run.recorder().loads_active += 1;
            for first in workers {
                let (run_for_task, stream, active) =
                    (Arc::clone(run), Arc::clone(&stream), Arc::clone(&active));
                run.spawn(async move {
                    closed_caller(&run_for_task, flow, closed, first, &stream).await;
                    let mut active = locked(&active);
                    *active -= 1;
                    if *active == 0 {
                        run_for_task.recorder().loads_active -= 1;
                        run_for_task.check_done();
                    }
                });
            }
        }
        arrivals => {
            let sends = match arrivals {
                Arrivals::Burst { count } => count > 0,
                Arrivals::Even { end, .. } | Arrivals::Poisson { end, .. } => match end {
                    LoadEnd::Count(count) => count > 0,
                    LoadEnd::Until(until) => start < until,
                },
                Arrivals::Closed(_) => unreachable!("matched above"),
            };
            if !sends {
                return;
            }
            run.recorder().loads_active += 1;
            let task_run = Arc::clone(run);
            run.spawn(async move {
                open_loop(&task_run, flow, start, arrivals, stream).await;
                task_run.recorder().loads_active -= 1;
                task_run.check_done();
            });
        }
    }
}

/// An open loop's arrivals, at the instants and with the keys the simulator draws: per
/// arrival, its key seed, then (Poisson) the gap to the next.
pub(super) async fn open_loop(
    run: &Arc<Run>,
    flow: FlowId,
    start: SimTime,
    arrivals: Arrivals,
    mut stream: Stream,
) {
    if let Arrivals::Burst { count } = arrivals {
        run.wake_at(start).await;
        for _ in 0..count {
            let key_seed = stream.next_u64();
            run.spawn(Arc::clone(run).request(flow, key_seed, start));
        }
        return;
    }
    let (rate, end, poisson) = match arrivals {
        Arrivals::Even { rate, end } => (rate, end, false),
        Arrivals::Poisson { rate, end } => (rate, end, true),
        Arrivals::Burst { .. } | Arrivals::Closed(_) => unreachable!("matched by the caller"),
    };
    let mut at = start;
    let mut next_q32 = u128::from(start.as_nanos()) << 32;
    let mut issued: u64 = 0;
    // Bounded by the load's count or end (and by the run's end, which aborts it).
    loop {
        run.wake_at(at).await;
        let key_seed = stream.next_u64();
        issued += 1;
        run.spawn(Arc::clone(run).request(flow, key_seed, at));
        let next = if poisson {
            next_q32 =
                next_q32.saturating_add(rate.exponential_gap_q32(stream.neg_ln_uniform_q32()));
            u64::try_from(next_q32 >> 32).ok().map(SimTime::from_nanos)
        } else {
            rate.even_offset(issued)
                .and_then(|offset| start.checked_add(offset))
        };
        let more = match (end, next) {
            (_, None) => false,
            (LoadEnd::Count(count), Some(_)) => issued < count,
            (LoadEnd::Until(until), Some(next)) => next < until,
        };
        match next {
            Some(next) if more => at = next,
            _ => return,
        }
    }
}

/// One caller of a closed loop: send, wait for the end, think, send again, until its
/// iterations are sent or its load's time is up.
pub(super) async fn closed_caller(
    run: &Arc<Run>,
    flow: FlowId,
    closed: ClosedLoop,
    first: SimTime,
    stream: &Mutex<Stream>,
) {
    let mut at = first;
    let mut sent: u64 = 0;
    // Bounded by `iterations` or `until` (one of them is set), and by the run's end.
    loop {
        run.wake_at(at).await;
        let key_seed = locked(stream).next_u64();
        sent += 1;
        // From the instant it is sent: a caller that wakes late has thought longer, and its
        // request has not been waiting (unlike an open loop's arrival, which is due at its
        // instant whether the runner is on time or not).
        Arc::clone(run).request(flow, key_seed, run.now()).await;
        let think = locked(stream).duration(&closed.think);
        let next = run.now().saturating_add(think);
        let more = closed.iterations.is_none_or(|n| sent < n)
            && closed.until.is_none_or(|until| next < until);
        if !more {
            return;
        }
        at = next;
    }
}

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
        Arrivals::Burst { count } => {
            if count == 0 {
                return;
            }
            run.recorder().loads_active += 1;
            let task_run = Arc::clone(run);
            run.spawn(async move {
                task_run.wake_at(start).await;
                let mut stream = stream;
                for _ in 0..count {
                    let key_seed = stream.next_u64();
                    task_run.spawn(Arc::clone(&task_run).request(flow, key_seed, start));
                }
                task_run.recorder().loads_active -= 1;
                task_run.check_done();
            });
        }
        Arrivals::Even { .. } | Arrivals::Poisson { .. } | Arrivals::Staged { .. } => {
            let Some((clock, first)) = OpenLoopClock::first(start, &load.arrivals) else {
                return;
            };
            run.recorder().loads_active += 1;
            let task_run = Arc::clone(run);
            run.spawn(async move {
                open_loop(&task_run, flow, first, clock, stream).await;
                task_run.recorder().loads_active -= 1;
                task_run.check_done();
            });
        }
    }
}

/// An open loop's arrivals, at the instants of the simulator's clock and with the keys it
/// draws: per arrival, its key seed, then (Poisson) the gap to the next.
pub(super) async fn open_loop(
    run: &Arc<Run>,
    flow: FlowId,
    first: SimTime,
    mut clock: OpenLoopClock,
    mut stream: Stream,
) {
    let mut at = first;
    // Bounded by the load's count or end (and by the run's end, which aborts it).
    loop {
        run.wake_at(at).await;
        let key_seed = stream.next_u64();
        run.spawn(Arc::clone(run).request(flow, key_seed, at));
        match clock.next(&mut stream) {
            Some(next) => at = next,
            None => return,
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

//! Loads and callers: arrivals, closed-loop sends, caller attempts, and requests spawned for
//! them.

#[allow(unused_imports)]
use super::*;

/// The most requests one closed-loop caller sends at one instant before the run stops as a
/// zero-time loop: far more than any design sends without time passing on purpose.
pub const SENDS_AT_ONE_INSTANT_MAX: u32 = 100_000;

/// A load's state: its stream, what it has sent, and its callers or spreading.
pub(super) struct LoadState {
    rng: Stream,
    /// Even, Poisson and staged loads: when the next request arrives.
    clock: Option<OpenLoopClock>,
    /// Closed loops: the requests each caller has sent.
    pub(super) workers: Vec<u64>,
    /// Closed loops: each caller's last send, and how many it has made at that instant (16
    /// bytes a caller, which the memory estimate counts with `workers`).
    sends_at_one_instant: Vec<(SimTime, u32)>,
    /// Closed loops: callers that will send again (the load is active while one is).
    workers_active: u32,
    /// A load of a service's flow: the copies of the flow it spreads over, one per instance.
    spread: Option<Spreading>,
}

/// How a load picks the instance of each request it sends.
struct Spreading {
    /// One per instance, in instance order.
    flows: Vec<FlowId>,
    how: Spread,
    /// Round robin: the instance of the next request.
    next: usize,
    /// Random: its own stream, so the load's other draws stay as they are.
    rng: Stream,
}

impl Spreading {
    fn pick(&mut self) -> FlowId {
        let index = match self.how {
            Spread::RoundRobin => {
                let index = self.next;
                self.next = (self.next + 1) % self.flows.len();
                index
            }
            Spread::Random => self.rng.below(self.flows.len() as u64) as usize,
        };
        self.flows[index]
    }
}

/// Each load's state at the start of a run, and how many are active; schedules each load's
/// first arrival, or each closed-loop caller's first send.
pub(super) fn start_loads(scenario: &Scenario, events: &mut EventQueue) -> (Vec<LoadState>, usize) {
    let mut loads = Vec::with_capacity(scenario.loads.len());
    let mut loads_active = 0;
    for (index, load) in scenario.loads.iter().enumerate() {
        let id = LoadId(index as u32);
        let instances = scenario.instance_flows(load.flow);
        let spread = (instances.len() > 1).then(|| {
            let service = scenario.flows[load.flow.index()]
                .instance
                .expect("a flow with copies belongs to a service")
                .service;
            Spreading {
                flows: instances,
                how: scenario.services[service.index()].spread,
                next: 0,
                rng: Stream::derive(scenario.seed, "load spread", &load.name),
            }
        });
        let (clock, open_first) = OpenLoopClock::first(load.start, &load.arrivals).unzip();
        let mut state = LoadState {
            rng: Stream::derive(scenario.seed, "load", &load.name),
            clock,
            workers: Vec::new(),
            sends_at_one_instant: Vec::new(),
            workers_active: 0,
            spread,
        };
        let first = match load.arrivals {
            Arrivals::Burst { count } => (count > 0).then_some(load.start),
            Arrivals::Even { .. } | Arrivals::Poisson { .. } | Arrivals::Staged { .. } => {
                open_first
            }
            Arrivals::Closed(closed) => {
                let starts = (0..closed.workers).map(|worker| {
                    let offset = u128::from(closed.stagger.as_nanos()) * u128::from(worker)
                        / u128::from(closed.workers);
                    let offset = u64::try_from(offset).expect("below the stagger");
                    (
                        worker,
                        load.start.saturating_add(SimDuration::from_nanos(offset)),
                    )
                });
                for (worker, at) in starts {
                    if closed.iterations != Some(0) && closed.until.is_none_or(|u| at < u) {
                        state.workers_active += 1;
                        events.schedule(at, Event::WorkerSends { load: id, worker });
                    }
                }
                state.workers = vec![0; closed.workers as usize];
                state.sends_at_one_instant = vec![(SimTime::ZERO, 0); closed.workers as usize];
                if state.workers_active > 0 {
                    loads_active += 1;
                }
                None
            }
        };
        loads.push(state);
        if let Some(first) = first {
            loads_active += 1;
            events.schedule(first, Event::Arrival(id));
        }
    }
    (loads, loads_active)
}

impl<'s> Simulator<'s> {
    pub(super) fn on_arrival(&mut self, id: LoadId) {
        if let Arrivals::Burst { count } = self.scenario.loads[id.index()].arrivals {
            for _ in 0..count {
                if self.over_memory_budget() {
                    break; // the run stops at its next turn
                }
                self.send(id, None);
            }
            self.loads_active -= 1;
            return;
        }
        // A request of a load without a caller runs as soon as its next arrival is scheduled,
        // without a trip through the runnable queue: nothing else is runnable at this instant
        // (the last event's drain took everything), so it is what the drain would run next, and
        // the next arrival is scheduled first, as it would be.
        let direct = self.scenario.loads[id.index()].caller.is_none() && self.runnable.is_empty();
        let request = if direct {
            Some(self.spawn_unqueued(id, None))
        } else {
            self.send(id, None);
            None
        };
        let state = &mut self.loads[id.index()];
        let clock = state
            .clock
            .as_mut()
            .expect("an open loop that is not a burst has a clock");
        match clock.next(&mut state.rng) {
            Some(next) => self.events.schedule(next, Event::Arrival(id)),
            None => self.loads_active -= 1,
        }
        // As the drain takes a runnable request: one piece of work for the memory check, and
        // not run once the budget is exceeded (the run stops at its next turn).
        if let Some(request) = request
            && !self.over_memory_budget()
        {
            self.advance(request.slot);
        }
    }

    /// A new request of load `id` arrives now.
    pub(super) fn spawn(&mut self, id: LoadId) -> RequestRef {
        self.spawn_with_keys(id, None)
    }

    /// [`Self::spawn`], with the keys of `same_keys` (a caller's retry asks for the same
    /// product page again) instead of fresh ones; the load still makes its draw, so its
    /// other draws stay as they are.
    pub(super) fn spawn_with_keys(&mut self, id: LoadId, same_keys: Option<u64>) -> RequestRef {
        let request = self.spawn_unqueued(id, same_keys);
        self.runnable.push_back(request);
        request
    }

    /// [`Self::spawn_with_keys`], without making the request runnable: the caller runs it.
    fn spawn_unqueued(&mut self, id: LoadId, same_keys: Option<u64>) -> RequestRef {
        let state = &mut self.loads[id.index()];
        let flow = match &mut state.spread {
            Some(spreading) => spreading.pick(),
            None => self.scenario.loads[id.index()].flow,
        };
        let drawn = state.rng.next_u64();
        let key_seed = same_keys.unwrap_or(drawn);
        let request = self.allocate(flow, 0, Role::Main, key_seed);
        if let Some(tracer) = &mut self.tracer
            && let Some(number) = tracer.arrived()
        {
            self.request_mut(request.slot).trace = Some(number);
            let flow = self.scenario.flows[flow.index()].name.clone();
            self.trace(request.slot, TraceWhat::Started { flow });
        }
        self.in_flight += 1;
        self.observation.arrived(flow, self.reports_as(flow));
        self.monitors.arrived();
        request
    }

    /// Caller `worker` of the closed loop `id` sends its next request. A caller that has
    /// sent [`SENDS_AT_ONE_INSTANT_MAX`] requests without time passing (no think time, and
    /// requests that end at once: an open breaker, a full bulkhead) would send forever at
    /// that instant: the run stops ([`Verdict::ZeroTimeLoop`]).
    pub(super) fn on_worker_sends(&mut self, id: LoadId, worker: u32) {
        let state = &mut self.loads[id.index()];
        state.workers[worker as usize] += 1;
        let (at, count) = &mut state.sends_at_one_instant[worker as usize];
        if *at == self.now {
            *count += 1;
            if *count > SENDS_AT_ONE_INSTANT_MAX {
                self.zero_time_loop = Some(id);
            }
        } else {
            (*at, *count) = (self.now, 1);
        }
        self.send(id, Some(worker));
    }

    /// Load `id` sends a request now (from closed-loop caller `worker`, if any): straight to
    /// the service, or as a call of the load's caller, whose first attempt starts now.
    pub(super) fn send(&mut self, id: LoadId, worker: Option<u32>) {
        let worker = worker.map(|worker| (id, worker));
        match self.scenario.loads[id.index()].caller {
            None => {
                let request = self.spawn(id);
                self.request_mut(request.slot).worker = worker;
            }
            Some(caller) => {
                let call = self.callers.start(self.now, caller, id, worker);
                self.attempt(call);
            }
        }
    }

    /// The next attempt of `call`: a request of its load's flow, and the caller's timeout.
    pub(super) fn attempt(&mut self, call: CallRef) {
        let load = self.callers.load_of(call);
        let request = self.spawn_with_keys(load, self.callers.key_seed(call));
        let key_seed = self.request(request.slot).key_seed;
        let (attempt, deadline) = self.callers.attempting(self.now, call, request, key_seed);
        self.request_mut(request.slot).call = Some((call, attempt));
        if let Some(deadline) = deadline {
            self.events
                .schedule(deadline, Event::CallerTimeout { call, attempt });
        }
    }

    /// What the caller does after an attempt ended or timed out.
    pub(super) fn after_attempt(&mut self, call: CallRef, end: CallNext) {
        match end {
            CallNext::Retry { at } => self.events.schedule(at, Event::CallerRetry { call }),
            CallNext::Ended { caller, ok, worker } => {
                self.observation.call_ended(caller, ok);
                if let Some((load, worker)) = worker {
                    self.worker_done_with(load, worker);
                }
            }
        }
    }

    /// The request of caller `worker` of the closed loop `id` has ended: it thinks, then
    /// sends again, unless it has sent its iterations or its load's time is up.
    pub(super) fn worker_done_with(&mut self, id: LoadId, worker: u32) {
        let Arrivals::Closed(closed) = self.scenario.loads[id.index()].arrivals else {
            unreachable!("only closed-loop requests have a caller");
        };
        let state = &mut self.loads[id.index()];
        let sent = state.workers[worker as usize];
        let think = state.rng.duration(&closed.think);
        let next = self.now.saturating_add(think);
        let more = closed.iterations.is_none_or(|n| sent < n)
            && closed.until.is_none_or(|until| next < until);
        if more {
            self.events
                .schedule(next, Event::WorkerSends { load: id, worker });
        } else {
            state.workers_active -= 1;
            if state.workers_active == 0 {
                self.loads_active -= 1;
            }
        }
    }
}

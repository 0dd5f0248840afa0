//! A request's way through its flow: steps, layers, actions, timers, replies, routing of
//! outcomes, and its end.

#[allow(unused_imports)]
use super::*;

impl<'s> Simulator<'s> {
    /// Runs the request in `slot` until it waits or ends.
    pub(super) fn advance(&mut self, slot: u32) {
        loop {
            let scenario = self.scenario;
            let request = self.request(slot);
            let role = request.role;
            let flow = &scenario.flows[request.flow.index()];
            let step_index = usize::from(request.step);
            if step_index == flow.steps.len() {
                self.end_request(slot, Outcome::Ok);
                return;
            }
            let step = &flow.steps[step_index];
            let next = match request.stage {
                Stage::Start if request.cancelled && role == Role::Main => {
                    // It stops here: this step has not run, so a `finally` one still runs,
                    // as the later ones do (`end_request` runs those).
                    let flow_id = request.flow;
                    self.run_skipped_finally(slot, flow_id, step_index..step_index + 1);
                    self.end_request(slot, Outcome::Cancelled);
                    return;
                }
                Stage::Start => {
                    if self.tracer.is_some() {
                        let (step_number, action) = (request.step, scenario.step_name(step));
                        let what = TraceWhat::Step {
                            step: step_number,
                            action,
                        };
                        self.trace(slot, what);
                    }
                    if step.on_error == OnError::Ignore && role == Role::Main {
                        self.spawn_background(slot, step_index as u16);
                        self.next_step(slot);
                        Next::Continue
                    } else {
                        self.set_stage(slot, Stage::Entering { next: 0 });
                        self.enter_layers(slot, step, 0)
                    }
                }
                Stage::Entering { next } => self.enter_layers(slot, step, next),
                Stage::Acting => self.act(slot, step),
                ref stage @ (Stage::Queued { .. } | Stage::Waiting(_) | Stage::Backoff { .. }) => {
                    unreachable!("only runnable requests are advanced, not {}", stage.name())
                }
            };
            if let Next::Stop = next {
                return;
            }
        }
    }

    /// Moves the request in `slot` to the start of its next step.
    pub(super) fn next_step(&mut self, slot: u32) {
        let request = self.request_mut(slot);
        request.step += 1;
        request.stage = Stage::Start;
    }

    /// Enters the layers of `step` from position `next` on, in order, and runs the action once
    /// past the last: until a layer queues the request or refuses it, or the action waits or
    /// ends. (Each layer passed leaves the request `Entering` the next, as the stage it would
    /// be advanced from.)
    pub(super) fn enter_layers(&mut self, slot: u32, step: &StepSpec, mut next: u8) -> Next {
        loop {
            if usize::from(next) == step.policies.len() {
                self.set_stage(slot, Stage::Acting);
                return self.act(slot, step);
            }
            match self.enter_layer(slot, step, next) {
                Some(ended) => return ended,
                None => next += 1,
            }
        }
    }

    /// Enters the layer at position `next` of `step`: `None` when it let the request in (its
    /// stage is then `Entering` the next layer), else what the step's turn comes to.
    fn enter_layer(&mut self, slot: u32, step: &StepSpec, next: u8) -> Option<Next> {
        let policy = step.policies[usize::from(next)];
        let entrant = Entrant {
            waiter: self.current_ref(slot),
            bytes: crate::rules::request_bytes(&step.action),
        };
        let entered = self.policies.enter(policy, self.now, &entrant);
        if self.tracer.is_some() {
            let name = self.scenario.policy_name(policy);
            let text = match entered {
                Enter::Pass(_) => format!("admitted by {name}"),
                Enter::Queued => format!("queued by {name}"),
                Enter::Refused(outcome) => format!("refused by {name}: {}", outcome.name()),
            };
            self.trace(slot, TraceWhat::Decision { text });
        }
        match entered {
            Enter::Pass(hold) => {
                let ceiling = self.policies.ceiling(policy);
                self.monitors
                    .entered(self.scenario, self.now, policy, ceiling);
                self.slots[slot as usize].holds.push(hold);
                self.set_stage(slot, Stage::Entering { next: next + 1 });
                None
            }
            Enter::Queued => {
                self.set_stage(slot, Stage::Queued { layer: next });
                Some(Next::Stop)
            }
            Enter::Refused(outcome) => Some(self.finish_step(slot, Ended::Refused(outcome))),
        }
    }

    /// Runs the action of `step` for the request in `slot`.
    pub(super) fn act(&mut self, slot: u32, step: &StepSpec) -> Next {
        let started = actions::start(self, slot, step);
        self.conclude(slot, started)
    }

    /// The step of the request in `slot` ends with its action's result, if it has one.
    pub(super) fn conclude(&mut self, slot: u32, started: Started) -> Next {
        match started {
            Started::Waits => Next::Stop,
            Started::Ended(result) => self.finish_step(slot, Ended::Action(result)),
        }
    }

    /// Moves the request in `slot` to `stage`, and traces the change when it is sampled.
    #[inline]
    pub(crate) fn set_stage(&mut self, slot: u32, stage: Stage) {
        if self.tracer.is_some() {
            self.trace_stage(slot, &stage);
        }
        self.request_mut(slot).stage = stage;
    }

    /// Traces the request in `slot` moving to `stage`, when it is sampled. Out of line: the
    /// stage changes of every request go through [`Simulator::set_stage`], and only traced
    /// runs come here.
    #[cold]
    #[inline(never)]
    fn trace_stage(&mut self, slot: u32, stage: &Stage) {
        if self.request(slot).trace.is_some() {
            let label = self.stage_label(slot, stage);
            self.trace(slot, TraceWhat::Stage { stage: label });
        }
    }

    /// A stage as a trace names it: what the request waits for, and on what.
    pub(super) fn stage_label(&self, slot: u32, stage: &Stage) -> String {
        let step = self.step_of(slot);
        let scenario = self.scenario;
        match (stage, &step.action) {
            (Stage::Start | Stage::Entering { .. } | Stage::Acting, _) => "running".to_owned(),
            (Stage::Queued { layer }, _) => {
                let policy = step.policies[usize::from(*layer)];
                format!("queued in {}", scenario.policy_name(policy))
            }
            (Stage::Backoff { next }, _) => {
                let policy = step.policies[usize::from(*next) - 1];
                format!("backing off ({})", scenario.policy_name(policy))
            }
            (Stage::Waiting(wait @ (Wait::Reply | Wait::Query)), action) => {
                let (reply, query) = (matches!(wait, Wait::Reply), matches!(wait, Wait::Query));
                actions::wait_label(scenario, action, reply, query)
                    .unwrap_or_else(|| stage.name().to_owned())
            }
            (stage, _) => stage.name().to_owned(),
        }
    }

    /// Records `what` of the request in `slot`, when the run is traced and it is sampled.
    pub(super) fn trace(&mut self, slot: u32, what: TraceWhat) {
        if self.tracer.is_none() {
            return; // without a tracer, nothing is looked up
        }
        let number = self.request(slot).trace;
        if let (Some(tracer), Some(number)) = (&mut self.tracer, number) {
            tracer.record(self.now, Some(number), what);
        }
    }

    pub(crate) fn set_timer(&mut self, slot: u32, at: SimTime, kind: TimerKind) {
        let request = self.current_ref(slot);
        self.events
            .schedule(at, Event::RequestTimer { request, kind });
    }

    /// The request in `slot` read `version` of the key its step names from a copy (`from`).
    pub(crate) fn hold_value(&mut self, slot: u32, version: u64, from: ValueFrom) {
        let Some(family) = actions::value_family(&self.step_of(slot).action) else {
            return;
        };
        let key = (family.0, self.key_of(slot, family));
        self.request_mut(slot).value = Some(HeldValue { key, version, from });
    }

    /// The version of the value of `key` the request in `slot` holds, for a copy it writes
    /// (a `SET`, an L1 put); 0 when it holds none of that key.
    pub(crate) fn value_version(&self, slot: u32, key: DataKey) -> u64 {
        match self.request(slot).value {
            Some(value) if value.key == key => value.version,
            _ => 0,
        }
    }

    /// The key of `family` the request in `slot` uses (drawn from its key seed, so every step
    /// of the request that names the family uses the same key).
    pub(crate) fn key_of(&self, slot: u32, family: KeyFamilyId) -> u32 {
        let request = self.request(slot);
        let spec = &self.scenario.keys[family.index()];
        key_index(request.key_seed, family.0, spec.count, spec.distribution)
    }

    /// Starts step `step` of the request in `slot` as a background request of its own.
    pub(super) fn spawn_background(&mut self, slot: u32, step: u16) {
        let scenario = self.scenario;
        let request = self.request(slot);
        let (flow, key_seed) = (request.flow, request.key_seed);
        // A release hands the background request what it releases (a throttle slot, a lock).
        let action = &scenario.flows[flow.index()].steps[usize::from(step)].action;
        let held = actions::hand_to_background(&mut self.slots[slot as usize].held, action);
        let background = self.allocate(flow, step, Role::Background, key_seed);
        self.slots[background.slot as usize].held = held;
        // Run it now, so that its command is written before the request's next one.
        self.advance(background.slot);
    }

    pub(super) fn on_request_timer(&mut self, request: RequestRef, kind: TimerKind) {
        if !self.is_live(request) {
            return;
        }
        let stage = std::mem::replace(&mut self.request_mut(request.slot).stage, Stage::Acting);
        match (kind, stage) {
            (TimerKind::Backoff, Stage::Backoff { next }) => {
                self.set_stage(request.slot, Stage::Entering { next });
                self.runnable.push_back(request); // run the inner layers again
            }
            (TimerKind::Action(timer), Stage::Waiting(Wait::Action(waiting))) => {
                match actions::on_timer(self, request.slot, timer, waiting) {
                    Woken::Reply(result) => self.settle(request, result),
                    Woken::Step(started) => {
                        if let Next::Continue = self.conclude(request.slot, started) {
                            let next = self.current_ref(request.slot);
                            self.runnable.push_back(next);
                        }
                    }
                }
            }
            (kind, stage) => unreachable!("a {kind:?} timer for a request {}", stage.name()),
        }
    }

    /// Sends `op` for the request in `slot` on `connection`, through its reconnect slot if it
    /// is one. Returns the result at once when there is one; `None` when the request waits
    /// (for the reply, or for a slot's connection attempt).
    pub(crate) fn issue_command(
        &mut self,
        slot: u32,
        connection: ConnectionId,
        op: Op,
        replay_writes: bool,
    ) -> Option<StepResult> {
        let (now, waiter) = (self.now, self.current_ref(slot));
        if !self.reconnect_slots.is_slot(connection) {
            self.set_stage(slot, Stage::Waiting(Wait::Reply));
            return self
                .redis
                .issue(now, connection, op, waiter, None, &mut self.events);
        }
        let acquired = self.reconnect_slots.acquire(
            now,
            connection,
            waiter,
            &mut self.redis,
            &mut self.events,
        );
        let lease = match acquired {
            SlotAcquire::Lease(lease) => lease,
            SlotAcquire::Parked => {
                self.set_stage(slot, Stage::Waiting(Wait::SlotConnect));
                return None;
            }
            SlotAcquire::Unavailable => return Some(StepResult::Error(Outcome::Refused)),
        };
        // Every write is tied to an origin, so that its copies' executions add up whatever the
        // step opted into: a second one without `replay_writes` is a monitor's violation.
        let origin = match (op.command.is_read_only(), self.request(slot).origin) {
            (true, _) => None,
            (false, Some(origin)) => Some(origin),
            (false, None) => Some(self.redis.open_origin(connection, replay_writes)),
        };
        let lease = if replay_writes && origin.is_some() {
            lease.with_replay_writes()
        } else {
            lease
        };
        let request = self.request_mut(slot);
        request.lease = Some((connection, lease));
        request.origin = origin;
        self.set_stage(slot, Stage::Waiting(Wait::Reply));
        let result =
            self.redis
                .issue(now, link_of(&lease), op, waiter, origin, &mut self.events)?;
        // The leased link was lost since: report it, and maybe replay.
        if self.slot_command_ended(slot, result) {
            return None;
        }
        Some(result)
    }

    /// A slot link's connection attempt ended: the callers parked on it ask their slot again.
    pub(super) fn on_link_event(&mut self, event: LinkEvent) {
        let link = match event {
            LinkEvent::Connected(link) | LinkEvent::ConnectFailed(link) => link,
        };
        let owner = self.redis.owner_of(link);
        if let LinkEvent::Connected(link) = event {
            self.monitors.link_connected(owner, link);
        }
        let woken = self.reconnect_slots.on_link_event(self.now, owner, event);
        for request in woken {
            if self.is_live(request) {
                self.set_stage(request.slot, Stage::Acting);
                self.runnable.push_back(request);
            }
        }
    }

    /// The command of the request in `slot` ended with `result`. If it ran on a reconnect
    /// slot, a connection-level failure is reported through its lease (evicting the link if
    /// it is still the live one) and, when the replay rules allow and it was not replayed
    /// yet, the command is run once more on a fresh connection: returns true then.
    pub(super) fn slot_command_ended(&mut self, slot: u32, result: StepResult) -> bool {
        let Some((connection, lease)) = self.request_mut(slot).lease.take() else {
            return false;
        };
        let failure = match result {
            StepResult::Error(Outcome::Timeout) => {
                Failure::Connection(ConnectionError::ResponseTimeout)
            }
            StepResult::Error(Outcome::ConnectionLost) => Failure::Connection(ConnectionError::Io),
            // A demoted primary: the connection reached the wrong node (seed 001 evicts it).
            StepResult::Error(Outcome::ReadOnly) => Failure::Connection(ConnectionError::ReadOnly),
            // WRONGTYPE, OOM, LOADING: the server refused one command; the connection is fine.
            StepResult::Error(outcome) if outcome.is_server_error() => Failure::Server,
            _ => return false,
        };
        let now = self.now;
        let effect = self
            .reconnect_slots
            .on_failure(now, connection, &lease, failure);
        let lease_link = link_of(&lease);
        let victim = match effect {
            FailureEffect::Evicted => Some(lease_link),
            // A slot without its generation check would evict whatever link is live now.
            FailureEffect::NotCurrent if self.bugs.slot_ignores_generation => {
                self.reconnect_slots.live_link(connection)
            }
            _ => None,
        };
        if let Some(victim) = victim {
            let scenario = self.scenario;
            self.monitors
                .link_retired(scenario, now, connection, lease_link, victim);
            self.redis.retire_link(victim);
        }
        let command = actions::replayed_command(&self.step_of(slot).action);
        let lease = if self.bugs.slot_replays_every_write {
            lease.with_replay_writes()
        } else {
            lease
        };
        let request = self.request_mut(slot);
        if request.replayed || !should_replay(&[command.replay_kind()], failure, &lease) {
            return false;
        }
        request.replayed = true;
        self.set_stage(slot, Stage::Acting);
        self.reconnect_slots.record_replay(connection);
        let again = self.current_ref(slot);
        self.runnable.push_back(again);
        true
    }

    /// A waiting request's step ended with `result`.
    pub(super) fn settle(&mut self, request: RequestRef, result: StepResult) {
        if self.is_live(request) {
            self.settle_live(request, result);
        }
    }

    /// [`Self::settle`] for a request known to be live (the caller has just checked).
    pub(super) fn settle_live(&mut self, request: RequestRef, result: StepResult) {
        if self.slot_command_ended(request.slot, result) {
            return; // replayed on a fresh connection
        }
        let action = &self.step_of(request.slot).action;
        let Some(result) = actions::on_reply(self, request.slot, action, result) else {
            return; // waits on (to try a lock again)
        };
        if let Next::Continue = self.finish_step(request.slot, Ended::Action(result)) {
            if self.past_last_step(request.slot) {
                // Nothing is left for it to do: it ends now rather than after a trip through
                // the runnable queue (ending touches nothing another request waits on).
                self.end_request(request.slot, Outcome::Ok);
            } else {
                let next = self.current_ref(request.slot);
                self.runnable.push_back(next);
            }
        }
    }

    /// Whether the request in `slot` has run every step of its flow.
    pub(super) fn past_last_step(&self, slot: u32) -> bool {
        let request = self.request(slot);
        usize::from(request.step) == self.scenario.flows[request.flow.index()].steps.len()
    }

    /// Ends the current step of the request in `slot` with what its action (or a refusing
    /// layer) returned: the request leaves the layers it is inside, innermost first (a retry
    /// may send it back in), and the step's routing applies.
    pub(super) fn finish_step(&mut self, slot: u32, ended: Ended) -> Next {
        let (now, scenario) = (self.now, self.scenario);
        // One look-up of the slot for what this needs of it (this runs for every step).
        let entry = &mut self.slots[slot as usize];
        let waited_as = RequestRef {
            slot,
            token: entry.token,
        };
        entry.token = entry.token.wrapping_add(1);
        debug_assert!(entry.live, "a live request");
        let request = &mut entry.request;
        let step = &scenario.flows[request.flow.index()].steps[usize::from(request.step)];
        request.lease = None;
        request.replayed = false;
        let origin = request.origin.take();
        // A Retry-After belongs to the step that was refused, retried or not.
        let retry_after = request.retry_after.take();
        if let Some(origin) = origin {
            self.redis.close_origin(origin); // no further copy of this write will be sent
        }
        // What the step returns: what its I/O returned, as its action decides it
        // (`actions::decide`: a rate limiter's decision on what its store answered).
        let (io_result, refused) = match ended {
            Ended::Action(result) => (result, None),
            Ended::Refused(outcome) => (StepResult::Error(outcome), Some(outcome)),
        };
        let (state, metrics) = (&mut self.actions, &mut self.observation.metrics);
        let result = actions::decide(state, now, metrics, &step.action, io_result, refused);
        if result == StepResult::Error(Outcome::RateLimited) {
            self.observation.attempt_rate_limited();
        }
        let leaving = Leaving {
            result,
            io_result,
            retry_after,
            work_still_running: actions::outlives_timeout(&step.action)
                && io_result == StepResult::Error(Outcome::Timeout),
        };
        while let Some(hold) = self.slots[slot as usize].holds.pop() {
            let depth = self.slots[slot as usize].holds.len();
            let policy = step.policies[depth];
            match self.policies.exit(policy, now, hold, &leaving) {
                Exit::Left(handover) => {
                    self.monitors.left(policy);
                    if let Some(handover) = handover {
                        self.hand_over(policy, handover);
                    }
                }
                Exit::Again { at, hold } => {
                    self.slots[slot as usize].holds.push(hold);
                    let next = u8::try_from(depth + 1).expect("a step has few layers");
                    self.set_stage(slot, Stage::Backoff { next });
                    let in_a_pool = crate::rules::in_a_pool(self.scenario, &step.policies[..depth]);
                    if leaving.work_still_running && in_a_pool {
                        // The retry runs inside a pool whose connection the abandoned query
                        // still holds: it goes again on that connection once the database has
                        // finished the query, and not before its backoff ends.
                        let retry = AfterQuery::Retry(self.current_ref(slot), at);
                        self.after_query(waited_as, retry);
                    } else {
                        self.set_timer(slot, at, TimerKind::Backoff);
                    }
                    return Next::Stop;
                }
                Exit::Kept(hold) => self.after_query(waited_as, AfterQuery::Release(policy, hold)),
            }
        }
        self.route(slot, step, result, retry_after)
    }

    /// A subscriber's message invalidates its key in the subscriber's cache; a subscriber back
    /// after a loss empties its cache if it flushes on reconnect (it cannot know what it
    /// missed).
    pub(super) fn deliver_messages(&mut self) {
        let scenario = self.scenario;
        for (subscriber, family, index) in std::mem::take(&mut self.redis.messages) {
            let subscription = scenario.connections[subscriber.index()]
                .subscription
                .expect("messages go to subscribers");
            (self.actions).invalidate(subscription.invalidates, family, index);
        }
        for subscriber in std::mem::take(&mut self.redis.resubscribed) {
            let subscription = scenario.connections[subscriber.index()]
                .subscription
                .expect("only subscribers resubscribe");
            if subscription.flush_on_reconnect {
                self.actions.flush(subscription.invalidates);
            }
        }
    }

    /// Records what waits for the query `waited_as` was waiting on.
    pub(super) fn after_query(&mut self, waited_as: RequestRef, what: AfterQuery) {
        let previous = self
            .after_queries
            .insert((waited_as.slot, waited_as.token), what);
        // A bulkhead keeps its hold only when it is inside the retry, and the retry waits only
        // when it is inside the bulkhead: never both for one query.
        assert!(previous.is_none(), "one thing waits for a query");
    }

    /// After its layers: the request goes on, finishes, or fails by the step's rules;
    /// `retry_after` is what a refusal of the step asked its client to wait.
    pub(super) fn route(
        &mut self,
        slot: u32,
        step: &StepSpec,
        result: StepResult,
        retry_after: Option<SimDuration>,
    ) -> Next {
        let request = self.request(slot);
        if request.role == Role::Background {
            let outcome = crate::rules::step_outcome(result);
            let flow = self.reports_as(request.flow);
            self.observation.background_ended(flow, outcome);
            self.free(slot);
            return Next::Stop;
        }
        if self.tracer.is_some() {
            let text = match result {
                StepResult::Ok => "step ended: ok".to_owned(),
                StepResult::Hit => format!("step ended: hit (on_hit {})", step.on_hit.name()),
                StepResult::Miss => "step ended: miss".to_owned(),
                StepResult::Error(kind) => format!(
                    "step ended: {} (on_error {})",
                    kind.name(),
                    step.on_error.name()
                ),
            };
            self.trace(slot, TraceWhat::Decision { text });
        }
        if let (StepResult::Error(kind), OnError::Next, Some(connection)) = (
            result,
            step.on_error,
            crate::rules::fail_open_connection(&step.action),
        ) && crate::rules::fails_open(kind)
        {
            // Let through unchecked: Redis could not be reached, or was not asked (a breaker
            // open, a write dropped). A lock found taken is an answer, not a fail-open.
            self.observation.failed_open(connection);
            if self.reconnect_slots.is_slot(connection) {
                self.reconnect_slots.record_fail_open(connection);
            }
        }
        match (result, step.on_hit) {
            (StepResult::Hit, OnHit::Finish) => {
                self.end_request(slot, Outcome::Ok);
                return Next::Stop;
            }
            (StepResult::Hit, OnHit::Goto(target)) => {
                // A jump over a `finally` step does not skip it: it runs in the background.
                let request = self.request(slot);
                let (flow, from) = (request.flow, usize::from(request.step));
                self.run_skipped_finally(slot, flow, from + 1..usize::from(target));
                let request = self.request_mut(slot);
                request.step = target;
                request.stage = Stage::Start;
                return Next::Continue;
            }
            (StepResult::Error(Outcome::Shed), _)
                if step.on_error == OnError::Fail && self.bugs.shed_request_vanishes =>
            {
                self.free(slot); // the planted bug: gone without a trace
                return Next::Stop;
            }
            (StepResult::Error(kind), _) if step.on_error == OnError::Fail => {
                self.end_request_asking(slot, kind, retry_after);
                return Next::Stop;
            }
            _ => {}
        }
        self.next_step(slot);
        Next::Continue
    }

    /// Gives back a hold that outlived its step.
    pub(super) fn release_kept(&mut self, policy: PolicyRef, hold: Hold) {
        self.monitors.left(policy);
        if let Some(handover) = self.policies.layer(policy).release_kept(hold) {
            self.hand_over(policy, handover);
        }
    }

    /// A request queued in `policy` gets its place: it goes on entering its step's layers.
    pub(super) fn hand_over(&mut self, policy: PolicyRef, handover: Handover) {
        let Handover { waiter, hold } = handover;
        if !self.is_live(waiter) {
            // Waiters never leave a queue early today; if one did, pass the place on.
            let layer = self.policies.layer(policy);
            let ceiling = layer.ceiling();
            self.monitors
                .entered(self.scenario, self.now, policy, ceiling);
            self.release_kept(policy, hold);
            return;
        }
        let ceiling = self.policies.ceiling(policy);
        self.monitors
            .entered(self.scenario, self.now, policy, ceiling);
        let &Stage::Queued { layer } = &self.request(waiter.slot).stage else {
            unreachable!("a handover goes to a queued request");
        };
        self.slots[waiter.slot as usize].holds.push(hold);
        let next = layer + 1;
        self.set_stage(waiter.slot, Stage::Entering { next });
        self.runnable.push_back(waiter);
    }

    /// Starts, in the background, every `finally` step of `steps` that the request in `slot`
    /// will not reach.
    pub(super) fn run_skipped_finally(
        &mut self,
        slot: u32,
        flow: FlowId,
        steps: std::ops::Range<usize>,
    ) {
        let scenario = self.scenario;
        for index in steps {
            if scenario.flows[flow.index()].steps[index].finally {
                self.spawn_background(slot, index as u16);
            }
        }
    }

    pub(super) fn end_request(&mut self, slot: u32, outcome: Outcome) {
        self.end_request_asking(slot, outcome, None);
    }

    /// Ends the request in `slot` with `outcome`; a refusal's `retry_after` goes to the caller
    /// that made the attempt, whose retry waits at least that long.
    pub(super) fn end_request_asking(
        &mut self,
        slot: u32,
        outcome: Outcome,
        retry_after: Option<SimDuration>,
    ) {
        let (now, scenario) = (self.now, self.scenario);
        let request = self.request(slot);
        debug_assert_eq!(request.role, Role::Main);
        // The request ends at this step (failed, or finished early by a hit): the `finally`
        // steps after it still run, in the background.
        let (flow, ended_at) = (request.flow, usize::from(request.step));
        self.run_skipped_finally(
            slot,
            flow,
            ended_at + 1..scenario.flows[flow.index()].steps.len(),
        );
        if self.tracer.is_some() {
            let outcome = outcome.name().to_owned();
            self.trace(slot, TraceWhat::Ended { outcome });
        }
        let request = self.request(slot);
        let (flow, latency) = (request.flow, now.saturating_since(request.started));
        let (worker, call) = (request.worker, request.call);
        let stale_for = match (outcome, request.value) {
            (Outcome::Ok, Some(value)) if value.from != ValueFrom::Database => self
                .versions
                .out_of_date_for(now, value.key, value.version)
                .map(|age| age.as_nanos()),
            _ => None,
        };
        let base = self.reports_as(flow);
        let latency = latency.as_nanos();
        (self.observation).ended(now, flow, base, outcome, latency, stale_for);
        self.in_flight -= 1;
        self.monitors.ended();
        self.free(slot);
        if let Some((load, worker)) = worker {
            self.worker_done_with(load, worker);
        }
        if let Some((call, attempt)) = call
            && let Some(end) = self
                .callers
                .answered(now, call, attempt, outcome, retry_after)
        {
            self.after_attempt(call, end);
        }
    }

    pub(super) fn free(&mut self, slot: u32) {
        let entry = &mut self.slots[slot as usize];
        // Left in its slot, ended: a request is large, and only its role is needed.
        debug_assert!(entry.live, "freeing a live request");
        let role = entry.request.role;
        entry.live = false;
        debug_assert!(entry.holds.is_empty(), "a request ends outside its layers");
        entry.token = entry.token.wrapping_add(1);
        self.free_slots.push(slot);
        if role == Role::Main {
            self.monitors.went_away();
        }
        self.actions
            .request_freed(self.now, &mut self.slots[slot as usize].held);
    }
}

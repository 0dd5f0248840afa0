//! The policy layers of a live step (breaker, semaphore, bulkhead, retry, adaptive limit, rate
//! limit), each the model's live form, and what they report.

#[allow(unused_imports)]
use super::*;

impl Run {
    /// The step's policies from position `depth` inwards, then its action.
    pub(super) fn layers<'a>(
        self: &'a Arc<Self>,
        flow: FlowId,
        step: &'a StepSpec,
        depth: usize,
        key_seed: u64,
    ) -> StepFuture<'a> {
        Box::pin(async move {
            let Some(&policy) = step.policies.get(depth) else {
                let (io, work) = self.act(flow, step, key_seed).await;
                return StepEnd {
                    result: self.rate_limit_decision(step, io),
                    io,
                    work,
                };
            };
            let inner = || self.layers(flow, step, depth + 1, key_seed);
            match policy {
                PolicyRef::Breaker(id) => {
                    let slot = &self.breakers[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let admitted = slot.live.try_admit();
                    self.observe_breaker(id.index());
                    let Ok(guard) = admitted else {
                        locked(&self.breaker_counts)[id.index()][0] += 1;
                        // The store was not asked: a rate-limit step's limiter answers that as
                        // it answers a timeout.
                        let io = StepResult::Error(Outcome::BreakerOpen);
                        return StepEnd {
                            result: self.rate_limit_decision(step, io),
                            io,
                            work: None,
                        };
                    };
                    let end = inner().await;
                    guard.finish(slot.classifier.classify(end.io));
                    self.observe_breaker(id.index());
                    end
                }
                PolicyRef::Semaphore(id) => {
                    let slot = &self.semaphores[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let bytes = match step.action {
                        StepAction::Redis { command, .. } => command.request_bytes(),
                        _ => 0,
                    };
                    let Ok(permit) = slot.live.try_acquire(bytes) else {
                        return StepEnd::same(StepResult::Error(Outcome::Shed));
                    };
                    self.observe_semaphore(id.index());
                    let end = inner().await;
                    drop(permit);
                    self.observe_semaphore(id.index());
                    end
                }
                PolicyRef::Bulkhead(id) => {
                    let slot = &self.bulkheads[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let permit = match slot.live.try_acquire() {
                        Entry::Granted(permit) => permit,
                        Entry::Queued(queued) => {
                            self.observe_bulkhead(id.index());
                            queued.await
                        }
                        Entry::Shed => {
                            locked(&slot.tally)[2] += 1;
                            return StepEnd::same(StepResult::Error(Outcome::Shed));
                        }
                    };
                    self.observe_bulkhead(id.index());
                    let end = inner().await;
                    match &end.work {
                        // A bulkhead in front of a database stands for its connection pool:
                        // a query whose caller gave up holds its connection until it ends.
                        Some(work) => {
                            self.keep_until_done(id.index(), permit.detach(), work.clone())
                        }
                        None => {
                            drop(permit);
                            self.observe_bulkhead(id.index());
                        }
                    }
                    end
                }
                PolicyRef::Retry(id) => {
                    let slot = &self.retries[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    // The whole step again (its inner layers and action) after the backoff
                    // the model names, as the simulator runs it.
                    let mut state = slot.live.on_request();
                    loop {
                        let end = inner().await;
                        let StepResult::Error(outcome) = end.result else {
                            return end;
                        };
                        if !slot.retry_on.contains(outcome) {
                            return end;
                        }
                        match slot.live.on_failure(&mut state, None) {
                            RetryDecision::Retry { at } => {
                                let wait = at.saturating_since(self.now());
                                tokio::time::sleep(std_duration(wait)).await;
                                if let (Some(work), true) = (end.work, self.in_a_pool(step, depth))
                                {
                                    // The retry runs inside a pool whose connection the
                                    // abandoned query still holds: it goes again on that
                                    // connection once the query is over, as simulated.
                                    work_done(work).await;
                                }
                            }
                            RetryDecision::GiveUp(_) => return end,
                        }
                    }
                }
                PolicyRef::AdaptiveLimit(id) => {
                    let slot = &self.adaptive_limits[id.index()];
                    if !slot.enabled {
                        return inner().await;
                    }
                    let admitted = slot.live.try_acquire();
                    self.observe_adaptive_limit(id.index());
                    let Ok(guard) = admitted else {
                        return StepEnd::same(StepResult::Error(Outcome::Shed));
                    };
                    let end = inner().await;
                    // The sample is of what the step's I/O returned, as simulated.
                    guard.finish(match end.io {
                        StepResult::Ok | StepResult::Hit | StepResult::Miss => CallEnd::Success,
                        StepResult::Error(kind) if slot.drops.contains(kind) => CallEnd::Dropped,
                        StepResult::Error(_) => CallEnd::Ignored,
                    });
                    self.observe_adaptive_limit(id.index());
                    end
                }
            }
        })
    }

    /// Drains the breaker's transitions into the counts, and sets its state gauge.
    pub(super) fn observe_breaker(&self, index: usize) {
        let live = &self.breakers[index].live;
        {
            let mut counts = locked(&self.breaker_counts);
            while let Some(transition) = live.poll_transition() {
                match transition.to {
                    BreakerState::HalfOpen => counts[index][1] += 1,
                    BreakerState::Closed => counts[index][2] += 1,
                    BreakerState::Open => {}
                }
            }
        }
        let level = match live.state() {
            BreakerState::Closed => 0,
            BreakerState::HalfOpen => 1,
            BreakerState::Open => 2,
        };
        let mut recorder = self.recorder();
        let gauge = recorder.breakers[index];
        recorder.set_gauge(self.now(), gauge, level);
    }

    /// Whether a layer outside position `depth` of `step` stands for a connection pool (an
    /// enabled bulkhead, as the simulator's `pools_work`), so that work outliving an attempt
    /// keeps it busy.
    pub(super) fn in_a_pool(&self, step: &StepSpec, depth: usize) -> bool {
        step.policies[..depth].iter().any(|policy| match policy {
            PolicyRef::Bulkhead(id) => self.bulkheads[id.index()].enabled,
            _ => false,
        })
    }

    /// Sets the adaptive limit's gauges: its limit and its calls in flight.
    pub(super) fn observe_adaptive_limit(&self, index: usize) {
        let live = &self.adaptive_limits[index].live;
        let (limit, in_flight) = (live.limit(), live.in_flight());
        let mut recorder = self.recorder();
        let (limit_gauge, in_flight_gauge) = recorder.adaptive_limits[index];
        let now = self.now();
        recorder.set_gauge(now, limit_gauge, u64::from(limit));
        recorder.set_gauge(now, in_flight_gauge, u64::from(in_flight));
    }

    /// Follows the bulkhead's occupancy into its peaks and gauges.
    pub(super) fn observe_bulkhead(&self, index: usize) {
        let slot = &self.bulkheads[index];
        let (in_use, queued) = slot.live.occupancy();
        {
            let mut tally = locked(&slot.tally);
            tally[0] = tally[0].max(u64::from(in_use));
            tally[1] = tally[1].max(u64::from(queued));
        }
        let mut recorder = self.recorder();
        let (in_use_gauge, queued_gauge) = recorder.bulkheads[index];
        let now = self.now();
        recorder.set_gauge(now, in_use_gauge, u64::from(in_use));
        recorder.set_gauge(now, queued_gauge, u64::from(queued));
    }

    pub(super) fn observe_semaphore(&self, index: usize) {
        let counters = self.semaphores[index].live.counters();
        let mut recorder = self.recorder();
        let (in_flight, bytes) = recorder.semaphores[index];
        let now = self.now();
        recorder.set_gauge(now, in_flight, u64::from(counters.in_flight));
        recorder.set_gauge(now, bytes, counters.bytes_in_flight);
    }

    /// What a step returns given what its I/O returned: for a rate-limit step, its limiter's
    /// decision (as the simulator's `rate_limit_decision`: a store that answered is a check, one
    /// that did not is `when_unreachable`'s case); for any other step, the I/O's result.
    pub(super) fn rate_limit_decision(&self, step: &StepSpec, io: StepResult) -> StepResult {
        let StepAction::RateLimit { limiter, .. } = step.action else {
            return io;
        };
        let slot = &self.rate_limits[limiter.index()];
        if !slot.enabled {
            return StepResult::Ok;
        }
        let decision = match io {
            StepResult::Ok | StepResult::Hit | StepResult::Miss => slot.live.try_acquire(1),
            StepResult::Error(_) => slot.live.on_store_unreachable(1),
        };
        // The recorder is taken only for what it counts: most checks admit a store's answer.
        match (decision, io) {
            (RateDecision::Admit, StepResult::Error(_)) => {
                self.recorder()
                    .rate_limit_failed_open(self.now(), limiter.index());
                StepResult::Ok
            }
            (RateDecision::Admit, _) => StepResult::Ok,
            (RateDecision::Reject { .. } | RateDecision::TooLarge, _) => {
                self.recorder().rejected_attempt(self.now()); // a 429, retried or not
                StepResult::Error(Outcome::RateLimited)
            }
        }
    }
}

//! Taking what one event left, in the written order ([`DRAIN_ORDER`]), until nothing is
//! left to do at this instant.

#[allow(unused_imports)]
use super::*;

/// What one event can leave for [`Simulator::drain`] to take: the mechanisms' outputs and
/// the requests made runnable, by kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Output {
    /// Pub/Sub messages and resubscriptions, delivered to the clients' caches.
    Messages,
    /// Reconnect-slot links made or lost.
    LinkEvents,
    /// A server executed a write a second time (a monitor's violation).
    WritesAppliedTwice,
    /// Redis commands answered or failed on the client's side.
    RedisReplies,
    /// Database queries answered (or, for a caller that timed out, what it kept released).
    QueriesAnswered,
    /// Time spent waiting for an advisory lock, recorded.
    LockWaits,
    /// Database queries past their client-side timeout.
    QueryTimeouts,
    /// Database queries refused (no connection free).
    QueryRefusals,
    /// Requests whose next step can run now, oldest first.
    RunnableRequests,
}

/// The order in which [`Simulator::drain`] takes outputs left at one instant: results first,
/// in the order the mechanisms report them, and only then the requests they made runnable,
/// one at a time. Documented in `docs/scenario-format.md` ("Events at the same instant");
/// the test `the_drain_order_is_the_documented_one` holds the two together.
pub(crate) const DRAIN_ORDER: [Output; 9] = [
    Output::Messages,
    Output::LinkEvents,
    Output::WritesAppliedTwice,
    Output::RedisReplies,
    Output::QueriesAnswered,
    Output::LockWaits,
    Output::QueryTimeouts,
    Output::QueryRefusals,
    Output::RunnableRequests,
];

/// What [`Simulator::take_output`] did.
enum Taken {
    Nothing,
    Some,
    /// The run is over its memory budget: stop draining.
    Stop,
}

impl<'s> Simulator<'s> {
    /// Delivers every result produced by the last event, then advances every request that
    /// became runnable, until nothing is left to do at this instant. The mechanisms' outputs
    /// are taken in [`DRAIN_ORDER`]: each time, the first kind that has any is taken whole,
    /// then the order starts again from the top (what taking it produced may be of an earlier
    /// kind).
    pub(super) fn drain(&mut self) {
        'again: loop {
            for output in DRAIN_ORDER {
                match self.take_output(output) {
                    Taken::Nothing => {}
                    Taken::Some => continue 'again,
                    Taken::Stop => return,
                }
            }
            return;
        }
    }

    /// Takes every output of one kind, if there is any.
    fn take_output(&mut self, output: Output) -> Taken {
        match output {
            Output::Messages => {
                if self.redis.messages.is_empty() && self.redis.resubscribed.is_empty() {
                    return Taken::Nothing;
                }
                self.deliver_messages();
            }
            Output::LinkEvents => {
                if self.redis.link_events.is_empty() {
                    return Taken::Nothing;
                }
                let link_events = std::mem::take(&mut self.redis.link_events);
                for &event in &link_events {
                    self.on_link_event(event);
                }
                self.redis.link_events = link_events;
                self.redis.link_events.clear();
            }
            Output::WritesAppliedTwice => {
                let Some(link) = self.redis.applied_twice.pop() else {
                    return Taken::Nothing;
                };
                let owner = self.redis.owner_of(link);
                let name = &self.scenario.connections[owner.index()].name;
                let detail = format!(
                    "the server executed a write a second time on link {} (a replay of a write \
                     whose step did not set replay_writes)",
                    link.0
                );
                self.monitors.write_applied_twice(self.now, name, detail);
            }
            Output::RedisReplies => {
                if self.redis.completions.is_empty() {
                    return Taken::Nothing;
                }
                let completions = std::mem::take(&mut self.redis.completions);
                for &(request, result, version) in &completions {
                    if result == StepResult::Hit && self.is_live(request) {
                        // A Redis read found a copy: the request now holds its version.
                        self.hold_value(request.slot, version, ValueFrom::Redis);
                    }
                    self.settle(request, result);
                }
                self.redis.completions = completions;
                self.redis.completions.clear();
            }
            Output::QueriesAnswered => {
                if self.databases.completions.is_empty() {
                    return Taken::Nothing;
                }
                let completions = std::mem::take(&mut self.databases.completions);
                for &request in &completions {
                    match self.after_queries.remove(&(request.slot, request.token)) {
                        None => {
                            // A query's caller that moved on (its token bumped) settles nothing.
                            if self.is_live(request) {
                                let action = &self.step_of(request.slot).action;
                                actions::on_query_answered(self, request.slot, action);
                                self.settle_live(request, StepResult::Ok)
                            }
                        }
                        // The caller timed out; what it kept is free only now.
                        Some(AfterQuery::Release(policy, hold)) => self.release_kept(policy, hold),
                        Some(AfterQuery::Retry(retry, at)) => {
                            if self.is_live(retry) {
                                let (at, kind) = (at.max(self.now), TimerKind::Backoff);
                                let event = Event::RequestTimer {
                                    request: retry,
                                    kind,
                                };
                                self.events.schedule(at, event);
                            }
                        }
                    }
                }
                self.databases.completions = completions;
                self.databases.completions.clear();
            }
            Output::LockWaits => {
                if self.databases.lock_waits.is_empty() {
                    return Taken::Nothing;
                }
                self.record_lock_waits();
            }
            Output::QueryTimeouts => {
                if self.databases.timeouts.is_empty() {
                    return Taken::Nothing;
                }
                let timeouts = std::mem::take(&mut self.databases.timeouts);
                for &request in &timeouts {
                    self.settle(request, StepResult::Error(Outcome::Timeout));
                }
                self.databases.timeouts = timeouts;
                self.databases.timeouts.clear();
            }
            Output::QueryRefusals => {
                if self.databases.refusals.is_empty() {
                    return Taken::Nothing;
                }
                let refusals = std::mem::take(&mut self.databases.refusals);
                for &request in &refusals {
                    self.settle(request, StepResult::Error(Outcome::Refused));
                }
                self.databases.refusals = refusals;
                self.databases.refusals.clear();
            }
            Output::RunnableRequests => {
                let Some(request) = self.runnable.pop_front() else {
                    return Taken::Nothing;
                };
                if self.over_memory_budget() {
                    return Taken::Stop; // the run stops at its next turn
                }
                if self.is_live(request) {
                    self.advance(request.slot);
                }
            }
        }
        Taken::Some
    }

    pub(crate) fn record_lock_waits(&mut self) {
        if self.databases.lock_waits.is_empty() {
            return; // every query that starts asks; most wait for no lock
        }
        for (database, nanos) in self.databases.lock_waits.drain(..) {
            self.observation.lock_waited(database, nanos);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::DRAIN_ORDER;

    /// The order in which one event's outputs are taken decides same-instant outcomes, so it
    /// is written down for users; this holds the code to what is written (and fails when
    /// either changes alone).
    #[test]
    fn the_drain_order_is_the_documented_one() {
        let docs = include_str!("../../../docs/scenario-format.md");
        let section = docs
            .split("(`sim/src/engine/drain.rs`, `DRAIN_ORDER`):")
            .nth(1)
            .expect("the same-instant section lists the drain order");
        let documented: Vec<&str> = section
            .lines()
            .skip_while(|line| line.trim().is_empty())
            .take_while(|line| !line.trim().is_empty())
            .filter_map(|line| {
                let (number, rest) = line.split_once(". `")?;
                number.trim().parse::<u32>().ok()?;
                rest.split('`').next()
            })
            .collect();
        let code: Vec<String> = DRAIN_ORDER.iter().map(|o| format!("{o:?}")).collect();
        assert_eq!(documented, code);
    }
}

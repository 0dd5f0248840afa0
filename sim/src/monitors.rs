//! Invariant monitors: what must never happen, checked in every run.
//!
//! Expectations in a scenario file are for figures; these are for bugs. Each monitor counts
//! on its own, from what the engine does, rather than asking the component it watches (a
//! bulkhead that miscounts would vouch for itself). The first violation stops the run, and the
//! run reports it as a [`crate::SimError::InvariantViolated`] naming the invariant, the
//! simulated time and the entity.
//!
//! - **request conservation**: every request that arrived has ended once or is still live:
//!   `arrived == ended + live`, where `live` counts the request slots in use;
//! - **limit**: the requests inside a policy layer that bounds them (a bulkhead, a
//!   semaphore's count) never exceed its ceiling;
//! - **write applied twice**: the Redis server never executes the same write of a request a
//!   second time unless the step opted into replaying writes (`replay_writes`) or the client
//!   resends unanswered commands by design;
//! - **stale eviction**: a reconnect slot only ever retires the link its failing lease ran
//!   on, and only while that link is the slot's live one: a failure seen through an old
//!   generation never removes the replacement.

use std::fmt;

use outagelab_model::time::SimTime;

use crate::scenario::{ConnectionId, PolicyKind, PolicyRef, Scenario};

/// The invariants the monitors check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invariant {
    RequestConservation,
    LimitExceeded,
    WriteAppliedTwice,
    StaleEviction,
}

impl Invariant {
    pub fn name(self) -> &'static str {
        match self {
            Invariant::RequestConservation => "request conservation",
            Invariant::LimitExceeded => "limit never exceeded",
            Invariant::WriteAppliedTwice => "no write applied twice",
            Invariant::StaleEviction => "no stale-generation eviction",
        }
    }
}

/// A broken invariant: what, when, and which entity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub invariant: Invariant,
    pub at: SimTime,
    /// The entity it happened to, as the scenario names it (`bulkhead db_pool`).
    pub entity: String,
    pub detail: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.at.as_nanos();
        let fraction = format!("{:06}", nanos % 1_000_000);
        let fraction = fraction.trim_end_matches('0');
        let point = if fraction.is_empty() { "" } else { "." };
        write!(
            f,
            "invariant violated: {} at {}{point}{fraction} ms (simulated), {}: {}",
            self.invariant.name(),
            nanos / 1_000_000,
            self.entity,
            self.detail
        )
    }
}

/// The monitors' own counts.
pub(crate) struct Monitors {
    /// Per policy instance, by kind (indexed by `kind as usize`, see `PolicyKind::ALL`) then index: requests inside it.
    inside: Vec<Vec<u64>>,
    arrived: u64,
    ended: u64,
    live: u64,
    /// Per logical connection that is a reconnect slot: the link it holds now.
    live_links: Vec<Option<ConnectionId>>,
    violation: Option<Violation>,
}

impl Monitors {
    pub fn new(scenario: &Scenario) -> Monitors {
        Monitors {
            inside: PolicyKind::ALL
                .iter()
                .map(|&kind| vec![0; scenario.policy_count(kind)])
                .collect(),
            arrived: 0,
            ended: 0,
            live: 0,
            live_links: vec![None; scenario.connections.len()],
            violation: None,
        }
    }

    pub fn violation(&self) -> Option<&Violation> {
        self.violation.as_ref()
    }

    pub fn take_violation(&mut self) -> Option<Violation> {
        self.violation.take()
    }

    fn report(&mut self, violation: Violation) {
        // The first one is the cause; later ones are often its consequences.
        self.violation.get_or_insert(violation);
    }

    /// A request entered `policy` (or was handed its place after a queue).
    pub fn entered(
        &mut self,
        scenario: &Scenario,
        now: SimTime,
        policy: PolicyRef,
        ceiling: Option<u64>,
    ) {
        let inside = &mut self.inside[policy.kind() as usize][policy.index()];
        *inside += 1;
        if let Some(ceiling) = ceiling
            && *inside > ceiling
        {
            let inside = *inside;
            self.report(Violation {
                invariant: Invariant::LimitExceeded,
                at: now,
                entity: scenario.policy_name(policy),
                detail: format!("{inside} requests inside, limit {ceiling}"),
            });
        }
    }

    /// A request left `policy`.
    pub fn left(&mut self, policy: PolicyRef) {
        let inside = &mut self.inside[policy.kind() as usize][policy.index()];
        debug_assert!(*inside > 0, "left a layer nobody was inside");
        *inside = inside.saturating_sub(1);
    }

    pub fn arrived(&mut self) {
        self.arrived += 1;
    }

    /// A request slot was taken by a request that counts toward conservation.
    pub fn went_live(&mut self) {
        self.live += 1;
    }

    /// A request recorded its end.
    pub fn ended(&mut self) {
        self.ended += 1;
    }

    /// A counted request's slot was freed.
    pub fn went_away(&mut self) {
        self.live = self.live.saturating_sub(1);
    }

    /// Checks conservation; cheap enough to run after every event (one comparison, inlined
    /// into the event loop; the report is apart).
    #[inline]
    pub fn check_conservation(&mut self, now: SimTime) {
        if self.arrived != self.ended + self.live {
            self.conservation_broken(now);
        }
    }

    #[cold]
    #[inline(never)]
    fn conservation_broken(&mut self, now: SimTime) {
        let (arrived, ended, live) = (self.arrived, self.ended, self.live);
        self.report(Violation {
            invariant: Invariant::RequestConservation,
            at: now,
            entity: "requests".to_owned(),
            detail: format!(
                "{arrived} arrived, but {ended} ended and {live} are live: {} vanished",
                arrived as i128 - ended as i128 - live as i128
            ),
        });
    }

    /// A slot connection's link connected and became the live one.
    pub fn link_connected(&mut self, owner: ConnectionId, link: ConnectionId) {
        self.live_links[owner.index()] = Some(link);
    }

    /// The slot of `owner` retires `victim` because a command that ran on `lease_link`
    /// failed.
    pub fn link_retired(
        &mut self,
        scenario: &Scenario,
        now: SimTime,
        owner: ConnectionId,
        lease_link: ConnectionId,
        victim: ConnectionId,
    ) {
        let live = self.live_links[owner.index()];
        if victim == lease_link && live == Some(victim) {
            self.live_links[owner.index()] = None;
            return;
        }
        self.report(Violation {
            invariant: Invariant::StaleEviction,
            at: now,
            entity: format!("connection {}", scenario.connections[owner.index()].name),
            detail: format!(
                "retired link {} after a failure on link {} while the live link was {}",
                victim.0,
                lease_link.0,
                live.map_or_else(|| "none".to_owned(), |l| l.0.to_string())
            ),
        });
    }

    /// A write of one request was executed by the server more than once, without an opt-in.
    pub fn write_applied_twice(&mut self, now: SimTime, connection: &str, detail: String) {
        self.report(Violation {
            invariant: Invariant::WriteAppliedTwice,
            at: now,
            entity: format!("connection {connection}"),
            detail,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{BulkheadId, BulkheadSpec, ConnectionSpec};

    fn scenario() -> Scenario {
        let mut scenario = Scenario::empty("test");
        scenario.bulkheads.push(BulkheadSpec {
            name: "pool".into(),
            config: outagelab_model::bulkhead::BulkheadConfig::new(2, 0).unwrap(),
            enabled: true,
        });
        scenario
            .connections
            .push(ConnectionSpec::new("cache", crate::scenario::ServerId(0)));
        scenario
    }

    #[test]
    fn a_layer_over_its_ceiling_is_a_violation_named_after_it() {
        let scenario = scenario();
        let mut monitors = Monitors::new(&scenario);
        let pool = PolicyRef::Bulkhead(BulkheadId(0));
        let t = SimTime::from_nanos(1_500_000);
        monitors.entered(&scenario, t, pool, Some(2));
        monitors.entered(&scenario, t, pool, Some(2));
        monitors.left(pool);
        monitors.entered(&scenario, t, pool, Some(2));
        assert_eq!(
            monitors.violation(),
            None,
            "two inside a limit of two is fine"
        );
        monitors.entered(&scenario, t, pool, Some(2));
        let violation = monitors
            .take_violation()
            .expect("three inside a limit of two");
        assert_eq!(violation.invariant, Invariant::LimitExceeded);
        assert_eq!(violation.entity, "bulkhead pool");
        assert_eq!(
            violation.to_string(),
            "invariant violated: limit never exceeded at 1.5 ms (simulated), bulkhead pool: \
             3 requests inside, limit 2"
        );
    }

    #[test]
    fn conservation_holds_while_every_request_is_live_or_ended() {
        let scenario = scenario();
        let mut monitors = Monitors::new(&scenario);
        let t = SimTime::ZERO;
        for _ in 0..3 {
            monitors.arrived();
            monitors.went_live();
        }
        monitors.ended();
        monitors.went_away();
        monitors.check_conservation(t);
        assert_eq!(monitors.violation(), None);
        monitors.went_away(); // freed without ending
        monitors.check_conservation(t);
        let violation = monitors.take_violation().expect("one request vanished");
        assert_eq!(violation.invariant, Invariant::RequestConservation);
        assert!(
            violation.detail.ends_with("1 vanished"),
            "{}",
            violation.detail
        );
    }

    #[test]
    fn only_the_live_link_of_the_failing_lease_may_be_retired() {
        let scenario = scenario();
        let cache = ConnectionId(0);
        let (old, new) = (ConnectionId(1), ConnectionId(2));
        let t = SimTime::ZERO;
        let mut monitors = Monitors::new(&scenario);
        monitors.link_connected(cache, new);
        monitors.link_retired(&scenario, t, cache, new, new);
        assert_eq!(
            monitors.violation(),
            None,
            "the live link, by its own lease"
        );
        monitors.link_connected(cache, new);
        monitors.link_retired(&scenario, t, cache, old, new);
        let violation = monitors
            .take_violation()
            .expect("an old lease removed the new link");
        assert_eq!(violation.invariant, Invariant::StaleEviction);
        assert_eq!(violation.entity, "connection cache");
    }

    #[test]
    fn the_first_violation_is_the_one_reported() {
        let scenario = scenario();
        let mut monitors = Monitors::new(&scenario);
        monitors.arrived();
        monitors.check_conservation(SimTime::from_nanos(1));
        monitors.write_applied_twice(SimTime::from_nanos(2), "cache", "later".into());
        let violation = monitors.take_violation().unwrap();
        assert_eq!(violation.invariant, Invariant::RequestConservation);
    }
}

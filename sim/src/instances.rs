//! Services of several instances (pods). A service's instances share the servers, databases,
//! KV stores, throttles and callers, and each has its own copy of every per-instance resource
//! its flows use: connections (and so their queues, reconnects and slots), caches (an L1 per
//! pod), breakers, bulkheads, semaphores, adaptive limits, retry policies (their budgets),
//! rate limiters and lock clients. That per-instance state is what makes one pod's open
//! breaker or stale L1 its own, and a process-wide breaker's blast radius the whole pod.
//!
//! One exception: a rate limiter with a store keeps its buckets in Redis, which every
//! instance reaches. Each instance has its copy (its own store connection, and its own counts
//! in the summary, `api@k`), but every copy checks instance 0's buckets
//! ([`RateLimitSpec::buckets_of`]): "20/s" over four instances is 20/s in all. A local
//! limiter is in-process, one bucket per instance.
//!
//! [`expand`] turns a scenario whose service names some flows into one the engine runs as it
//! is: instance 0 keeps the resources (renamed `name@0`), every other instance gets copies
//! (`name@1`, ...), and each flow gets one copy per instance whose steps name that
//! instance's resources. A copy of a flow reports as its base flow, so the flow's figures
//! count every instance; the engine spreads each load of a base flow over its copies.
//!
//! Invariant: a per-instance resource is used by the service's flows only. One also named by
//! another flow, or by a caller, would be shared by instances that should each have their own,
//! so [`expand`] refuses it.

use std::collections::BTreeSet;

use crate::references::{Kind, References, each_spec};
use crate::scenario::*;

/// The per-instance resources one set of flows uses: per [`Kind`], indices into its vector.
struct Used([BTreeSet<u32>; Kind::ALL.len()]);

impl Used {
    fn of(&self, kind: Kind) -> &BTreeSet<u32> {
        &self.0[kind as usize]
    }

    fn len(&self) -> usize {
        self.0.iter().map(BTreeSet::len).sum()
    }

    /// What `flows` reach: the per-instance resources their steps name, what those refer to
    /// in turn (a connection's client loop and tracking subscriber, a rate limiter's store),
    /// and the subscribers that invalidate a cache they use (they serve that cache).
    fn of_flows<'f>(scenario: &Scenario, flows: impl IntoIterator<Item = &'f FlowSpec>) -> Used {
        let mut used = Used(std::array::from_fn(|_| BTreeSet::new()));
        let add = |used: &mut Used, kind: Kind, index: u32| {
            if kind.per_instance() {
                used.0[kind as usize].insert(index);
            }
        };
        for step in flows.into_iter().flat_map(|flow| &flow.steps) {
            step.clone()
                .references(&mut |kind, index| add(&mut used, kind, *index));
        }
        let mut specs = scenario.clone();
        loop {
            let before = used.len();
            let mut reached = Vec::new();
            each_spec(&mut specs, &mut |kind, index, spec| {
                if kind.is_some_and(|kind| used.of(kind).contains(&index)) {
                    spec.references(&mut |kind, index| reached.push((kind, *index)));
                }
            });
            for (kind, index) in reached {
                add(&mut used, kind, index);
            }
            for (index, connection) in (0u32..).zip(&scenario.connections) {
                if let Some(subscription) = connection.subscription
                    && used.of(Kind::Cache).contains(&subscription.invalidates.0)
                {
                    add(&mut used, Kind::Connection, index);
                }
            }
            if used.len() == before {
                return used;
            }
        }
    }

    /// The first resource both sets use, as messages name it (`breaker redis`).
    fn shared_with(&self, other: &Used, scenario: &Scenario) -> Option<String> {
        // A client loop is reached only through a connection, which is found first.
        Kind::ALL.into_iter().find_map(|kind| {
            let index = *self.of(kind).intersection(other.of(kind)).next()?;
            Some(format!(
                "{} {}",
                kind.name(),
                scenario.resource_name(kind, index)
            ))
        })
    }
}

/// Where each resource of one instance is: per [`Kind`], old index to new (itself when not
/// copied).
struct Remap(Vec<Vec<u32>>);

impl Remap {
    fn moved(&self, kind: Kind, index: &mut u32) {
        *index = self.0[kind as usize][*index as usize];
    }
}

/// A per-instance spec, whose copies are named `name@index`.
trait Named: Clone {
    fn name_mut(&mut self) -> &mut String;
}

macro_rules! named {
    ($($spec:ty),*) => {
        $(impl Named for $spec {
            fn name_mut(&mut self) -> &mut String {
                &mut self.name
            }
        })*
    };
}
named!(
    ConnectionSpec,
    ClientLoopSpec,
    BreakerSpec,
    BulkheadSpec,
    SemaphoreSpec,
    AdaptiveLimitSpec,
    RetrySpec,
    CacheSpec,
    RateLimitSpec,
    LockSpec
);

/// Copies every resource of `used` in `specs` for one more instance, `name@index`, and
/// returns where each resource of the kind is for that instance (itself when not copied).
fn copy<T: Named>(specs: &mut Vec<T>, used: &BTreeSet<u32>, index: u32) -> Vec<u32> {
    let mut remap: Vec<u32> = (0..specs.len() as u32).collect();
    for &old in used {
        let mut spec = specs[old as usize].clone();
        let base = spec.name_mut().clone();
        let base = base.strip_suffix("@0").unwrap_or(&base).to_owned();
        *spec.name_mut() = format!("{base}@{index}");
        remap[old as usize] = u32::try_from(specs.len()).expect("fewer than 2^32 resources");
        specs.push(spec);
    }
    remap
}

/// Renames every resource of `used` in `specs` to `name@0`: instance 0's own.
fn rename<T: Named>(specs: &mut [T], used: &BTreeSet<u32>) {
    for &index in used {
        let name = specs[index as usize].name_mut();
        *name = format!("{name}@0");
    }
}

/// For each per-instance kind, `rename` (instance 0: `copy_for` is `None`) or `copy` for
/// instance `copy_for`; returns the remap of every kind (the identity where nothing moved).
fn per_instance(scenario: &mut Scenario, used: &Used, copy_for: Option<u32>) -> Remap {
    let mut remap: Vec<Vec<u32>> = (Kind::ALL.iter())
        .map(|&kind| (0..scenario.count_of(kind) as u32).collect())
        .collect();
    for kind in Kind::ALL.into_iter().filter(|kind| kind.per_instance()) {
        fn apply<T: Named>(
            specs: &mut Vec<T>,
            used: &BTreeSet<u32>,
            copy_for: Option<u32>,
        ) -> Option<Vec<u32>> {
            match copy_for {
                None => {
                    rename(specs, used);
                    None
                }
                Some(index) => Some(copy(specs, used, index)),
            }
        }
        let used = used.of(kind);
        let moved = match kind {
            Kind::Connection => apply(&mut scenario.connections, used, copy_for),
            Kind::ClientLoop => apply(&mut scenario.client_loops, used, copy_for),
            Kind::Breaker => apply(&mut scenario.breakers, used, copy_for),
            Kind::Bulkhead => apply(&mut scenario.bulkheads, used, copy_for),
            Kind::Semaphore => apply(&mut scenario.semaphores, used, copy_for),
            Kind::AdaptiveLimit => apply(&mut scenario.adaptive_limits, used, copy_for),
            Kind::Retry => apply(&mut scenario.retries, used, copy_for),
            Kind::Cache => apply(&mut scenario.caches, used, copy_for),
            Kind::RateLimit => apply(&mut scenario.rate_limits, used, copy_for),
            Kind::Lock => apply(&mut scenario.locks, used, copy_for),
            Kind::Server
            | Kind::Database
            | Kind::KeyFamily
            | Kind::Channel
            | Kind::KvStore
            | Kind::Throttle
            | Kind::Caller
            | Kind::Flow
            | Kind::Service => unreachable!("{} is shared by instances", kind.name()),
        };
        if let Some(moved) = moved {
            remap[kind as usize] = moved;
        }
    }
    Remap(remap)
}

/// Points each copy (in `remap`) of a limiter of `used` that keeps its buckets in Redis at
/// instance 0's, whose buckets it checks: the counters live in the one server every instance's
/// store connection reaches (a server is shared), so the service admits the limiter's rate in
/// all, not once per instance. A local limiter's copy keeps its own bucket: it is in-process.
/// Runs after the copies' references are moved, which would move the owner too.
fn share_stored_buckets(scenario: &mut Scenario, used: &BTreeSet<u32>, remap: &Remap) {
    for &owner in used {
        if scenario.rate_limits[owner as usize].store.is_none() {
            continue;
        }
        let copy = remap.0[Kind::RateLimit as usize][owner as usize];
        debug_assert_ne!(copy, owner, "instance 0's limiter is not its own copy");
        scenario.rate_limits[copy as usize].buckets_of = Some(RateLimitId(owner));
    }
}

/// Runs `flows` of `scenario` as the service `service`: see the module's comment. Fails,
/// naming it, when a per-instance resource is also used outside those flows.
pub fn expand(
    scenario: &mut Scenario,
    service: ServiceSpec,
    flows: &[FlowId],
) -> Result<ServiceId, String> {
    let service_id = ServiceId(u32::try_from(scenario.services.len()).expect("few services"));
    let inside: Vec<&FlowSpec> = flows.iter().map(|f| &scenario.flows[f.index()]).collect();
    let used = Used::of_flows(scenario, inside);
    let outside = Used::of_flows(
        scenario,
        scenario
            .flows
            .iter()
            .enumerate()
            .filter(|(index, _)| !flows.contains(&FlowId(*index as u32)))
            .map(|(_, flow)| flow),
    );
    if let Some(shared) = used.shared_with(&outside, scenario) {
        return Err(format!(
            "{shared} is used by flows of service {} and by other flows: each instance has its \
             own, so it cannot be shared (give the other flows one of their own)",
            service.name
        ));
    }
    let callers_retries: BTreeSet<u32> = scenario
        .callers
        .iter()
        .filter_map(|caller| caller.retry.map(|r| r.0))
        .collect();
    if let Some(&retry) = used.of(Kind::Retry).intersection(&callers_retries).next() {
        return Err(format!(
            "retry policy {} is used by flows of service {} and by a caller: each instance has \
             its own, so it cannot be shared (give the caller one of its own)",
            scenario.retries[retry as usize].name, service.name
        ));
    }
    if let Some(flow) = flows
        .iter()
        .find(|f| scenario.flows[f.index()].instance.is_some())
    {
        return Err(format!(
            "flow {} belongs to another service already",
            scenario.flows[flow.index()].name
        ));
    }
    let instances = service.instances;
    for &flow in flows {
        scenario.flows[flow.index()].instance = Some(FlowInstance {
            service: service_id,
            index: 0,
            base: flow,
        });
    }
    scenario.services.push(service);
    if instances <= 1 {
        return Ok(service_id);
    }
    per_instance(scenario, &used, None);
    for index in 1..instances {
        let remap = per_instance(scenario, &used, Some(index));
        // Each copy refers to its own instance's resources: a subscriber invalidates its own
        // cache, a tracking connection redirects to its own subscriber, a rate limiter keeps
        // its buckets in its own store connection.
        let copies: Vec<(Kind, u32)> = (Kind::ALL.into_iter())
            .filter(|kind| kind.per_instance())
            .flat_map(|kind| used.of(kind).iter().map(move |&old| (kind, old)))
            .map(|(kind, old)| (kind, remap.0[kind as usize][old as usize]))
            .collect();
        each_spec(scenario, &mut |kind, index, spec| {
            if kind.is_some_and(|kind| copies.contains(&(kind, index))) {
                spec.references(&mut |kind, index| remap.moved(kind, index));
            }
        });
        share_stored_buckets(scenario, used.of(Kind::RateLimit), &remap);
        for &base in flows {
            let mut flow = scenario.flows[base.index()].clone();
            flow.name = format!("{}@{index}", flow.name);
            flow.instance = Some(FlowInstance {
                service: service_id,
                index,
                base,
            });
            for step in &mut flow.steps {
                step.references(&mut |kind, index| remap.moved(kind, index));
            }
            scenario.flows.push(flow);
        }
    }
    Ok(service_id)
}

impl Scenario {
    /// The flows a load of `flow` spreads its requests over: every instance's copy, in
    /// instance order, for a flow of a service; the flow alone otherwise.
    pub fn instance_flows(&self, flow: FlowId) -> Vec<FlowId> {
        match self.flows[flow.index()].instance {
            Some(instance) => self
                .flows
                .iter()
                .enumerate()
                .filter(|(_, f)| f.instance.is_some_and(|i| i.base == instance.base))
                .map(|(index, _)| FlowId(index as u32))
                .collect(),
            None => vec![flow],
        }
    }
}

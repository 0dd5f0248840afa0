//! Services of several instances (pods). A service's instances share the servers, databases,
//! KV stores, throttles and callers, and each has its own copy of every per-instance resource
//! its flows use: connections (and so their queues, reconnects and slots), caches (an L1 per
//! pod), breakers, bulkheads, semaphores, adaptive limits, retry policies (their budgets),
//! rate limiters and lock clients. That per-instance state is what makes one pod's open
//! breaker or stale L1 its own, and a process-wide breaker's blast radius the whole pod.
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

use crate::scenario::*;

/// The per-instance resources one set of flows uses, by index in their scenario vector.
#[derive(Default)]
struct Used {
    connections: BTreeSet<u32>,
    breakers: BTreeSet<u32>,
    bulkheads: BTreeSet<u32>,
    semaphores: BTreeSet<u32>,
    adaptive_limits: BTreeSet<u32>,
    retries: BTreeSet<u32>,
    caches: BTreeSet<u32>,
    rate_limits: BTreeSet<u32>,
    locks: BTreeSet<u32>,
    /// The event loops of the connections: each pod is a process of its own.
    client_loops: BTreeSet<u32>,
}

impl Used {
    fn of_flows<'f>(scenario: &Scenario, flows: impl IntoIterator<Item = &'f FlowSpec>) -> Used {
        let mut used = Used::default();
        for step in flows.into_iter().flat_map(|flow| &flow.steps) {
            for policy in &step.policies {
                match *policy {
                    PolicyRef::Retry(id) => used.retries.insert(id.0),
                    PolicyRef::Bulkhead(id) => used.bulkheads.insert(id.0),
                    PolicyRef::Semaphore(id) => used.semaphores.insert(id.0),
                    PolicyRef::Breaker(id) => used.breakers.insert(id.0),
                    PolicyRef::AdaptiveLimit(id) => used.adaptive_limits.insert(id.0),
                };
            }
            match step.action {
                StepAction::Redis { connection, .. } => {
                    used.connections.insert(connection.0);
                }
                StepAction::RateLimit { limiter, .. } => {
                    used.rate_limits.insert(limiter.0);
                    if let Some(store) = scenario.rate_limits[limiter.index()].store {
                        used.connections.insert(store.0);
                    }
                }
                StepAction::Cache { cache, .. } => {
                    used.caches.insert(cache.0);
                }
                StepAction::Lock {
                    lock, connection, ..
                } => {
                    used.locks.insert(lock.0);
                    used.connections.insert(connection.0);
                }
                StepAction::Database { .. }
                | StepAction::Work { .. }
                | StepAction::Throttle { .. } => {}
            }
        }
        // A connection's tracking redirects to a subscriber, and a subscriber invalidates a
        // cache: both belong to the instance whose connection or cache they serve.
        for (index, connection) in scenario.connections.iter().enumerate() {
            let redirect = connection.tracking.as_ref().map(|t| t.redirect.0);
            if let Some(redirect) = redirect
                && used.connections.contains(&(index as u32))
            {
                used.connections.insert(redirect);
            }
        }
        for (index, connection) in scenario.connections.iter().enumerate() {
            if let Some(subscription) = connection.subscription
                && used.caches.contains(&subscription.invalidates.0)
            {
                used.connections.insert(index as u32);
            }
        }
        for &index in &used.connections {
            if let Some(client_loop) = scenario.connections[index as usize].client_loop {
                used.client_loops.insert(client_loop.0);
            }
        }
        used
    }

    /// The first resource both sets use, as messages name it (`breaker redis`).
    fn shared_with(&self, other: &Used, scenario: &Scenario) -> Option<String> {
        let first = |a: &BTreeSet<u32>, b: &BTreeSet<u32>| a.intersection(b).next().copied();
        if let Some(i) = first(&self.connections, &other.connections) {
            return Some(format!(
                "connection {}",
                scenario.connections[i as usize].name
            ));
        }
        if let Some(i) = first(&self.caches, &other.caches) {
            return Some(format!("cache {}", scenario.caches[i as usize].name));
        }
        if let Some(i) = first(&self.rate_limits, &other.rate_limits) {
            return Some(format!(
                "rate limit {}",
                scenario.rate_limits[i as usize].name
            ));
        }
        if let Some(i) = first(&self.locks, &other.locks) {
            return Some(format!("lock {}", scenario.locks[i as usize].name));
        }
        let policies = [
            (&self.retries, &other.retries, PolicyKind::Retry),
            (&self.bulkheads, &other.bulkheads, PolicyKind::Bulkhead),
            (&self.semaphores, &other.semaphores, PolicyKind::Semaphore),
            (&self.breakers, &other.breakers, PolicyKind::Breaker),
            (
                &self.adaptive_limits,
                &other.adaptive_limits,
                PolicyKind::AdaptiveLimit,
            ),
        ];
        for (a, b, kind) in policies {
            if let Some(i) = first(a, b) {
                let policy = match kind {
                    PolicyKind::Retry => PolicyRef::Retry(RetryId(i)),
                    PolicyKind::Bulkhead => PolicyRef::Bulkhead(BulkheadId(i)),
                    PolicyKind::Semaphore => PolicyRef::Semaphore(SemaphoreId(i)),
                    PolicyKind::Breaker => PolicyRef::Breaker(BreakerId(i)),
                    PolicyKind::AdaptiveLimit => PolicyRef::AdaptiveLimit(AdaptiveLimitId(i)),
                };
                return Some(scenario.policy_name(policy));
            }
        }
        None
    }
}

/// Where each per-instance resource of one instance is: old index to new, for every kind.
struct Remap {
    connections: Vec<u32>,
    breakers: Vec<u32>,
    bulkheads: Vec<u32>,
    semaphores: Vec<u32>,
    adaptive_limits: Vec<u32>,
    retries: Vec<u32>,
    caches: Vec<u32>,
    rate_limits: Vec<u32>,
    locks: Vec<u32>,
    client_loops: Vec<u32>,
}

/// Copies every resource of `used` in `specs` for one more instance, `name@index`, and
/// returns where each resource of the kind is for that instance (itself when not copied).
fn copy<T: Clone>(
    specs: &mut Vec<T>,
    used: &BTreeSet<u32>,
    index: u32,
    name: impl Fn(&mut T) -> &mut String,
) -> Vec<u32> {
    let mut remap: Vec<u32> = (0..specs.len() as u32).collect();
    for &old in used {
        let mut spec = specs[old as usize].clone();
        let base = name(&mut spec).clone();
        let base = base.strip_suffix("@0").unwrap_or(&base).to_owned();
        *name(&mut spec) = format!("{base}@{index}");
        remap[old as usize] = u32::try_from(specs.len()).expect("fewer than 2^32 resources");
        specs.push(spec);
    }
    remap
}

/// Renames every resource of `used` in `specs` to `name@0`: instance 0's own.
fn rename<T>(specs: &mut [T], used: &BTreeSet<u32>, name: impl Fn(&mut T) -> &mut String) {
    for &index in used {
        let name = name(&mut specs[index as usize]);
        *name = format!("{name}@0");
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
    if let Some(&retry) = used.retries.intersection(&callers_retries).next() {
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
    rename(&mut scenario.connections, &used.connections, |s| {
        &mut s.name
    });
    rename(&mut scenario.breakers, &used.breakers, |s| &mut s.name);
    rename(&mut scenario.bulkheads, &used.bulkheads, |s| &mut s.name);
    rename(&mut scenario.semaphores, &used.semaphores, |s| &mut s.name);
    rename(&mut scenario.adaptive_limits, &used.adaptive_limits, |s| {
        &mut s.name
    });
    rename(&mut scenario.retries, &used.retries, |s| &mut s.name);
    rename(&mut scenario.caches, &used.caches, |s| &mut s.name);
    rename(&mut scenario.rate_limits, &used.rate_limits, |s| {
        &mut s.name
    });
    rename(&mut scenario.locks, &used.locks, |s| &mut s.name);
    rename(&mut scenario.client_loops, &used.client_loops, |s| {
        &mut s.name
    });
    for index in 1..instances {
        let remap = Remap {
            connections: copy(&mut scenario.connections, &used.connections, index, |s| {
                &mut s.name
            }),
            breakers: copy(&mut scenario.breakers, &used.breakers, index, |s| {
                &mut s.name
            }),
            bulkheads: copy(&mut scenario.bulkheads, &used.bulkheads, index, |s| {
                &mut s.name
            }),
            semaphores: copy(&mut scenario.semaphores, &used.semaphores, index, |s| {
                &mut s.name
            }),
            adaptive_limits: copy(
                &mut scenario.adaptive_limits,
                &used.adaptive_limits,
                index,
                |s| &mut s.name,
            ),
            retries: copy(&mut scenario.retries, &used.retries, index, |s| &mut s.name),
            caches: copy(&mut scenario.caches, &used.caches, index, |s| &mut s.name),
            rate_limits: copy(&mut scenario.rate_limits, &used.rate_limits, index, |s| {
                &mut s.name
            }),
            locks: copy(&mut scenario.locks, &used.locks, index, |s| &mut s.name),
            client_loops: copy(&mut scenario.client_loops, &used.client_loops, index, |s| {
                &mut s.name
            }),
        };
        // A copied subscriber invalidates its own instance's cache, and a copied tracking
        // connection redirects to its own instance's subscriber.
        for &old in &used.connections {
            let copy = &mut scenario.connections[remap.connections[old as usize] as usize];
            if let Some(subscription) = &mut copy.subscription {
                subscription.invalidates = CacheId(remap.caches[subscription.invalidates.index()]);
            }
            if let Some(tracking) = &mut copy.tracking {
                tracking.redirect = ConnectionId(remap.connections[tracking.redirect.index()]);
            }
            if let Some(client_loop) = &mut copy.client_loop {
                *client_loop = ClientLoopId(remap.client_loops[client_loop.index()]);
            }
        }
        // A copied rate limiter keeps its buckets in its own instance's store connection.
        for &old in &used.rate_limits {
            let copy = remap.rate_limits[old as usize] as usize;
            let limiter = &mut scenario.rate_limits[copy];
            if let Some(store) = limiter.store {
                limiter.store = Some(ConnectionId(remap.connections[store.index()]));
            }
        }
        for &base in flows {
            let mut flow = scenario.flows[base.index()].clone();
            flow.name = format!("{}@{index}", flow.name);
            flow.instance = Some(FlowInstance {
                service: service_id,
                index,
                base,
            });
            for step in &mut flow.steps {
                remap_step(step, &remap);
            }
            scenario.flows.push(flow);
        }
    }
    Ok(service_id)
}

fn remap_step(step: &mut StepSpec, remap: &Remap) {
    for policy in &mut step.policies {
        *policy = match *policy {
            PolicyRef::Retry(id) => PolicyRef::Retry(RetryId(remap.retries[id.index()])),
            PolicyRef::Bulkhead(id) => PolicyRef::Bulkhead(BulkheadId(remap.bulkheads[id.index()])),
            PolicyRef::Semaphore(id) => {
                PolicyRef::Semaphore(SemaphoreId(remap.semaphores[id.index()]))
            }
            PolicyRef::Breaker(id) => PolicyRef::Breaker(BreakerId(remap.breakers[id.index()])),
            PolicyRef::AdaptiveLimit(id) => {
                PolicyRef::AdaptiveLimit(AdaptiveLimitId(remap.adaptive_limits[id.index()]))
            }
        };
    }
    match &mut step.action {
        StepAction::Redis { connection, .. } => {
            *connection = ConnectionId(remap.connections[connection.index()]);
        }
        StepAction::RateLimit { limiter, .. } => {
            *limiter = RateLimitId(remap.rate_limits[limiter.index()]);
        }
        StepAction::Cache { cache, .. } => *cache = CacheId(remap.caches[cache.index()]),
        StepAction::Lock {
            lock, connection, ..
        } => {
            *lock = LockId(remap.locks[lock.index()]);
            *connection = ConnectionId(remap.connections[connection.index()]);
        }
        StepAction::Database { .. } | StepAction::Work { .. } | StepAction::Throttle { .. } => {}
    }
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

//! The subset of a scenario a live run can do honestly, checked before anything runs: every
//! feature outside it is refused with the file key that names it, never replaced by something
//! else.
//!
//! What a live run does not model at all, because the real thing stands in for it, is not
//! refused: a connection's `latency` and `bandwidth` (the real network), a client loop's
//! `write_rate` (the live client's own event loop), a server's `command_cost`, `byte_rate`
//! and memory accounting (the real server). See
//! `docs/scenario-format.md`, "Live runs".

use std::fmt;

use outagelab_sim::Scenario;
use outagelab_sim::scenario::{
    EvictionSamples, FaultKind, FaultTarget, Reconnect, RedisCommand, StepAction,
};

/// The most `hz` a Redis server accepts (`CONFIG SET hz`).
pub const HZ_MAX: u32 = 500;

/// A feature of the scenario that a live run cannot reproduce.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// The file key that names it, as the scenario file's own errors do
    /// (`flows.read.steps[1].cache`, `faults.outage`).
    pub key: String,
    pub reason: String,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

impl std::error::Error for Unsupported {}

fn refuse(key: impl Into<String>, reason: impl Into<String>) -> Result<(), Unsupported> {
    Err(Unsupported {
        key: key.into(),
        reason: reason.into(),
    })
}

/// Whether a live run can run `scenario` as written; the first feature it cannot is the
/// error.
pub fn check(scenario: &Scenario) -> Result<(), Unsupported> {
    if scenario.servers.len() > 1 {
        let names: Vec<&str> = scenario.servers.iter().map(|s| s.name.as_str()).collect();
        return refuse(
            "servers",
            format!(
                "a live run drives one Redis server (--redis), and the file has {}: {}",
                names.len(),
                names.join(", ")
            ),
        );
    }
    if let Some(service) = scenario.services.first() {
        return refuse(
            format!("services.{}", service.name),
            "services of several instances are not run live",
        );
    }
    for server in &scenario.servers {
        let key = |field: &str| format!("servers.{}.{field}", server.name);
        if server.memory.samples == EvictionSamples::Exact {
            return refuse(
                key("maxmemory_samples"),
                "exact eviction is the simulator's; a real server samples",
            );
        }
        if let Some(hz) = server.hz
            && hz.get() > HZ_MAX
        {
            return refuse(
                key("hz"),
                format!("a real server runs at most {HZ_MAX} cron ticks a second"),
            );
        }
    }
    if let Some(second) = scenario.client_loops.get(1) {
        return refuse(
            format!("client_loops.{}", second.name),
            "a live run is one client, one event loop (a current-thread runtime) for all its \
             connections: a second loop would be a second process",
        );
    }
    let drops_connections = scenario.faults.iter().find(|fault| {
        matches!(
            fault.kind,
            FaultKind::Kill | FaultKind::Stop | FaultKind::Disconnect
        )
    });
    for connection in &scenario.connections {
        let key = |field: &str| format!("connections.{}.{field}", connection.name);
        if connection.subscription.is_some() {
            return refuse(key("subscribe"), "subscribers are not run live");
        }
        if connection.tracking.is_some() {
            return refuse(key("tracking"), "client tracking is not run live");
        }
        if let Reconnect::Manager { .. } = connection.reconnect {
            return refuse(
                key("reconnect"),
                "the modelled ConnectionManager is not run live (use reconnect = \"slot\" or \
                 \"never\")",
            );
        }
        if connection.pending_max.is_some() {
            return refuse(
                key("pending_max"),
                "a client's request-queue limit is not enforced by the live client",
            );
        }
        let slot = matches!(connection.reconnect, Reconnect::Slot(_));
        if !slot && !connection.connected_at_start {
            return refuse(
                key("connected_at_start"),
                "a live connection other than a reconnect slot is made before the run starts",
            );
        }
        if let (Reconnect::Always, Some(fault)) = (connection.reconnect, drops_connections) {
            return refuse(
                key("reconnect"),
                format!(
                    "faults.{} drops this connection, and a live run does not reproduce \
                     reconnect = \"always\" (the simulated client's delays, offline queue and \
                     retries): use reconnect = \"slot\" (the live reconnect slot) or \"never\"",
                    fault.name
                ),
            );
        }
    }
    for database in &scenario.databases {
        let key = |field: &str| format!("databases.{}.{field}", database.name);
        let why = "a live run stands a database in by the work of its latency, shared above \
                   its capacity as simulated, which neither queues for a connection nor \
                   collapses";
        if database.connections.is_some() {
            return refuse(key("max_connections"), why);
        }
        if database.collapse.is_some() {
            return refuse(key("collapse"), why);
        }
    }
    for load in &scenario.loads {
        if load.caller.is_some() {
            return refuse(
                format!("loads.{}.caller", load.name),
                "callers in front of a load are not run live",
            );
        }
    }
    for flow in &scenario.flows {
        for (index, step) in flow.steps.iter().enumerate() {
            let key = |field: &str| format!("flows.{}.steps[{index}].{field}", flow.name);
            match step.action {
                StepAction::Redis { command, .. } => match command {
                    RedisCommand::Get
                    | RedisCommand::Set { .. }
                    | RedisCommand::SetNxPx { .. }
                    | RedisCommand::Incr
                    | RedisCommand::Del => {}
                    RedisCommand::Publish { .. } => {
                        return refuse(key("redis.command"), "PUBLISH is not run live");
                    }
                    RedisCommand::Lock(_) => {
                        return refuse(key("redis.command"), "lock commands are not run live");
                    }
                },
                StepAction::Database { data: Some(_), .. } => {
                    return refuse(
                        key("db.key"),
                        "followed data (versions, stale reads) needs the simulator's database",
                    );
                }
                StepAction::Database { lock: Some(_), .. } => {
                    return refuse(
                        key("db.lock"),
                        "an advisory lock needs a database; a live run has only a sleep",
                    );
                }
                StepAction::Database { .. }
                | StepAction::Work { .. }
                | StepAction::Call { .. }
                | StepAction::RateLimit { .. }
                | StepAction::Cache { .. } => {}
                StepAction::Throttle { .. } => {
                    return refuse(key("throttle"), "throttle steps are not run live");
                }
                StepAction::Lock { .. } => {
                    return refuse(key("lock"), "distributed lock steps are not run live");
                }
            }
        }
    }
    for fault in &scenario.faults {
        let key = format!("faults.{}", fault.name);
        if let FaultTarget::Connection(_) = fault.target
            && !matches!(
                fault.kind,
                FaultKind::Disconnect
                    | FaultKind::Latency { .. }
                    | FaultKind::Bandwidth(_)
                    | FaultKind::PacketLoss { .. }
                    | FaultKind::SlowClose { .. }
            )
        {
            return refuse(
                format!("{key}.target"),
                "of the faults on one connection, a live run injects `disconnect`, `latency`, \
                 `bandwidth`, `packet_loss` and `slow_close` only",
            );
        }
        match fault.kind {
            FaultKind::Pause(_)
            | FaultKind::Hang
            | FaultKind::Kill
            | FaultKind::MaxMemory(_)
            | FaultKind::FlushAll
            | FaultKind::Stop
            | FaultKind::Disconnect => {}
            FaultKind::Latency { .. }
            | FaultKind::Bandwidth(_)
            | FaultKind::PacketLoss { .. }
            | FaultKind::SlowClose { .. } => {}
            FaultKind::Crash => {
                return refuse(
                    key,
                    "a crash leaves an address that answers nothing, and a live run's \
                     forwarder either refuses a connection or takes it (kind = \"crash\"; \
                     `stop` is run live)",
                );
            }
            FaultKind::CpuThrottle { .. } => {
                return refuse(
                    key,
                    "a live run cannot take CPU from a real server: no command throttles its \
                     thread (kind = \"cpu_throttle\"; `hang` and `pause` are run live)",
                );
            }
            FaultKind::ErrorReply { .. } => {
                return refuse(
                    key,
                    "a real server gives its error replies only in the state that causes them \
                     (kind = \"error_reply\")",
                );
            }
            FaultKind::Failover { .. } => {
                return refuse(
                    key,
                    "a live run drives one server and no replica (kind = \"failover\")",
                );
            }
            FaultKind::Slow { .. }
            | FaultKind::Refuse
            | FaultKind::PoolExhausted { .. }
            | FaultKind::LockHeld { .. } => {
                return refuse(
                    format!("{key}.target"),
                    "a live run's database is a stand-in sleep, and its faults are the \
                     simulator's (kinds \"slow\", \"refuse\", \"pool_exhausted\" and \
                     \"lock_held\")",
                );
            }
        }
    }
    if let Some((later, earlier)) = overlapping_cuts(scenario) {
        return refuse(
            format!("faults.{later}"),
            format!(
                "it cuts the network while faults.{earlier} still does, and a live run's \
                 forwarder is down or up, not down twice: make them one fault, or apart"
            ),
        );
    }
    Ok(())
}

/// Two faults that cut the network at the same forwarder at once (a `stop` cuts every
/// connection's, a `disconnect` its connection's): the later one's name and the earlier's.
fn overlapping_cuts(scenario: &Scenario) -> Option<(&str, &str)> {
    let cuts: Vec<_> = (scenario.faults.iter())
        .filter(|fault| matches!(fault.kind, FaultKind::Stop | FaultKind::Disconnect))
        .collect();
    for (index, later) in cuts.iter().enumerate() {
        for earlier in &cuts[..index] {
            let (first, second) = if earlier.at <= later.at {
                (earlier, later)
            } else {
                (later, earlier)
            };
            let apart = first
                .duration
                .is_some_and(|duration| first.at.saturating_add(duration) <= second.at);
            let same_forwarder = match (first.target, second.target) {
                (FaultTarget::Connection(a), FaultTarget::Connection(b)) => a == b,
                _ => true,
            };
            if !apart && same_forwarder {
                return Some((&second.name, &first.name));
            }
        }
    }
    None
}

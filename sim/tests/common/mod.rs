//! Helpers to build scenarios in tests without a scenario file.
#![allow(dead_code)]

use outagelab_model::breaker::BreakerConfig;
use outagelab_model::bulkhead::BulkheadConfig;
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_sim::scenario::*;

pub fn ms(millis: u64) -> SimDuration {
    SimDuration::from_millis(millis)
}

pub fn at_ms(millis: u64) -> SimTime {
    SimTime::from_nanos(millis * 1_000_000)
}

pub fn empty(name: &str) -> Scenario {
    Scenario::empty(name)
}

pub fn server(name: &str) -> ServerSpec {
    ServerSpec::new(name)
}

pub fn connection(name: &str, server: u32) -> ConnectionSpec {
    ConnectionSpec::new(name, ServerId(server))
}

pub fn key(name: &str, count: u32) -> KeyFamilySpec {
    KeyFamilySpec {
        name: name.into(),
        count,
        distribution: KeyDistribution::Uniform,
    }
}

pub fn redis_step(connection: u32, command: RedisCommand, key: u32) -> StepSpec {
    StepSpec {
        action: StepAction::Redis {
            connection: ConnectionId(connection),
            command,
            key: KeyFamilyId(key),
        },
        policies: Vec::new(),
        on_error: OnError::Fail,
        on_hit: OnHit::Next,
        finally: false,
        replay_writes: false,
    }
}

pub fn db_step(database: u32) -> StepSpec {
    StepSpec {
        action: StepAction::Database {
            database: DatabaseId(database),
            timeout: None,
            latency: None,
            lock: None,
            data: None,
        },
        policies: Vec::new(),
        on_error: OnError::Fail,
        on_hit: OnHit::Next,
        finally: false,
        replay_writes: false,
    }
}

pub fn flow(name: &str, steps: Vec<StepSpec>) -> FlowSpec {
    FlowSpec {
        name: name.into(),
        steps,
        instance: None,
    }
}

pub fn even(name: &str, flow: u32, per_second: f64, count: u64) -> LoadSpec {
    LoadSpec {
        name: name.into(),
        flow: FlowId(flow),
        start: SimTime::ZERO,
        arrivals: Arrivals::Even {
            rate: Rate::per_second(per_second).unwrap(),
            end: LoadEnd::Count(count),
        },
        caller: None,
    }
}

pub fn burst(name: &str, flow: u32, at: SimTime, count: u64) -> LoadSpec {
    LoadSpec {
        name: name.into(),
        flow: FlowId(flow),
        start: at,
        arrivals: Arrivals::Burst { count },
        caller: None,
    }
}

pub fn breaker(name: &str, failures: u32, open_for: SimDuration) -> BreakerSpec {
    BreakerSpec {
        name: name.into(),
        enabled: true,
        config: BreakerConfig::new(failures, open_for, 1).unwrap(),
        counts: OutcomeSet::network_errors(),
        ignores: OutcomeSet::default(),
    }
}

pub fn bulkhead(name: &str, max_concurrent: u32, queue: u32) -> BulkheadSpec {
    BulkheadSpec {
        name: name.into(),
        enabled: true,
        config: BulkheadConfig::new(max_concurrent, queue).unwrap(),
    }
}

pub fn fault(
    name: &str,
    server: u32,
    kind: FaultKind,
    at: SimTime,
    duration: Option<SimDuration>,
) -> FaultSpec {
    FaultSpec {
        name: name.into(),
        target: FaultTarget::Server(ServerId(server)),
        kind,
        at,
        duration,
    }
}

/// `CLIENT KILL` of every client of server 0 at `at`.
pub fn kill(at: SimTime) -> FaultSpec {
    fault("kill", 0, FaultKind::Kill, at, Some(SimDuration::ZERO))
}

/// The seed-003 model: Redis hung from the start, a 100 ms command timeout, a GET that falls
/// through to a 50-52 ms database, 500 requests at 500/s; optional breaker and bulkhead.
pub fn seed003(with_breaker: bool, with_bulkhead: bool, requests: u64) -> Scenario {
    let mut s = empty("seed003");
    s.servers.push(server("redis"));
    let mut c = connection("cache", 0);
    c.command_timeout = Some(ms(100));
    c.offline_queue = false;
    s.connections.push(c);
    s.keys.push(key("product", 10_000));
    s.databases.push(DatabaseSpec {
        name: "main".into(),
        latency: Distribution::uniform(ms(50), ms(52)).unwrap(),
        capacity: None,
        connections: None,
        collapse: None,
    });
    let mut get = redis_step(0, RedisCommand::Get, 0);
    get.on_error = OnError::Next;
    get.on_hit = OnHit::Finish;
    let mut query = db_step(0);
    if with_breaker {
        s.breakers
            .push(breaker("redis", 5, SimDuration::from_secs(5)));
        get.policies.push(PolicyRef::Breaker(BreakerId(0)));
    }
    if with_bulkhead {
        s.bulkheads.push(bulkhead("db", 20, 50));
        query.policies.push(PolicyRef::Bulkhead(BulkheadId(0)));
    }
    s.flows.push(flow("read", vec![get, query]));
    s.loads.push(even("reads", 0, 500.0, requests));
    s.faults
        .push(fault("redis-dead", 0, FaultKind::Hang, SimTime::ZERO, None));
    s
}

//! Properties over random scenarios: a cache read that falls through to a database behind a
//! bulkhead, and a spend recorded with INCR, under random load, timeouts, breakers, client
//! options (reconnect always, never, or through a reconnect slot) and Redis faults.
//!
//! - the database never runs more queries at once than the bulkhead allows, even when callers
//!   time out and leave their queries running;
//! - every request that arrived ended exactly once, or is counted unfinished;
//! - the time series accounts for every ended request;
//! - a reconnect slot never applies a write twice (it replays read-only commands only), and
//!   makes at most one connection attempt at a time (asserted inside the simulator);
//! - a closed loop sends no more than its workers' iterations, and a caller in front of the
//!   load ends every call exactly once (or counts it unfinished), however its attempts time
//!   out and retry while the service still runs them;
//! - the same scenario gives the same report;
//! - and, on every run, the simulator's own invariant monitors (`run` fails on a violation),
//!   here with random policy orders (a breaker inside or outside the bulkhead) and an adaptive
//!   limit.

use crate::common;

use common::*;
use outagelab_model::time::{SimDuration, SimTime};
use outagelab_report::Outcome;
use outagelab_sim::run;
use outagelab_sim::scenario::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Knobs {
    arrivals: u8,
    rate: f64,
    requests: u64,
    bulkhead_max: u32,
    bulkhead_queue: u32,
    db_latency_ms: u64,
    db_capacity: Option<u32>,
    db_timeout_ms: Option<u64>,
    timeout_ms: Option<u64>,
    offline_queue: bool,
    max_retries: Option<u32>,
    breaker_failures: Option<u32>,
    fall_through: bool,
    fault: Option<(u8, u64, Option<u64>)>,
    /// 0: reconnect always, 1: never, 2: a reconnect slot.
    reconnect: u8,
    horizon_ms: u64,
    seed: u64,
    /// A breaker on the query step too (counting sheds), and whether it is listed outside the
    /// bulkhead.
    db_breaker: Option<bool>,
    /// An AIMD adaptive limit on the query step, innermost, starting here.
    adaptive_initial: Option<u32>,
    /// Closed-loop callers instead of open-loop arrivals: workers, iterations each, think ms.
    closed: Option<(u32, u64, u64)>,
    /// A caller in front of the load: its timeout (ms) and its attempts (1: no retry).
    caller: Option<(Option<u64>, u32)>,
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        (
            0u8..3,
            (10_000u64..5_000_000).prop_map(|milli| milli as f64 / 1000.0),
            1u64..300,
        ),
        (
            1u32..30,
            0u32..60,
            1u64..100,
            proptest::option::of(1u32..40),
            proptest::option::of(1u64..120),
        ),
        (
            proptest::option::of(1u64..200),
            any::<bool>(),
            proptest::option::of(0u32..4),
            proptest::option::of(1u32..10),
            any::<bool>(),
        ),
        (
            proptest::option::of((0u8..4, 0u64..500, proptest::option::of(1u64..800))),
            0u8..3,
            100u64..3000,
            any::<u64>(),
        ),
        (
            proptest::option::of(any::<bool>()),
            proptest::option::of(1u32..30),
            proptest::option::of((1u32..40, 1u64..8, 0u64..50)),
            proptest::option::of((proptest::option::of(1u64..300), 1u32..4)),
        ),
    )
        .prop_map(
            |(
                (arrivals, rate, requests),
                (bulkhead_max, bulkhead_queue, db_latency_ms, db_capacity, db_timeout_ms),
                (timeout_ms, offline_queue, max_retries, breaker_failures, fall_through),
                (fault, reconnect, horizon_ms, seed),
                (db_breaker, adaptive_initial, closed, caller),
            )| Knobs {
                arrivals,
                rate,
                requests,
                bulkhead_max,
                bulkhead_queue,
                db_latency_ms,
                db_capacity,
                db_timeout_ms,
                timeout_ms,
                offline_queue,
                max_retries,
                breaker_failures,
                fall_through,
                fault,
                reconnect,
                horizon_ms,
                seed,
                db_breaker,
                adaptive_initial,
                closed,
                caller,
            },
        )
}

fn scenario(k: &Knobs) -> Scenario {
    let mut s = empty("property");
    s.seed = k.seed;
    // Always a horizon: a stopped Redis with unlimited retries and no timeout would otherwise
    // (rightly) run to the time budget.
    s.limits.horizon = Some(at_ms(k.horizon_ms));
    s.servers.push(server("redis"));
    let mut c = connection("cache", 0);
    c.command_timeout = k.timeout_ms.map(ms);
    c.offline_queue = k.offline_queue;
    c.max_retries = k.max_retries;
    match k.reconnect {
        0 => c.reconnect = Reconnect::Always,
        1 => c.reconnect = Reconnect::Never,
        _ => {
            c.reconnect = Reconnect::Slot(
                outagelab_model::reconnect::ReconnectConfig::new(ms(100), ms(5000)).unwrap(),
            );
            c.offline_queue = false; // a slot has none
        }
    }
    s.connections.push(c);
    s.keys.push(key("product", 50));
    s.databases.push(DatabaseSpec {
        name: "main".into(),
        latency: Distribution::uniform(ms(k.db_latency_ms), ms(k.db_latency_ms + 5)).unwrap(),
        capacity: k.db_capacity,
        connections: None,
        collapse: None,
    });
    s.bulkheads
        .push(bulkhead("db", k.bulkhead_max, k.bulkhead_queue));
    let mut get = redis_step(0, RedisCommand::Get, 0);
    get.on_error = if k.fall_through {
        OnError::Next
    } else {
        OnError::Fail
    };
    get.on_hit = OnHit::Finish;
    if let Some(failures) = k.breaker_failures {
        s.breakers.push(breaker("redis", failures, ms(300)));
        get.policies.push(PolicyRef::Breaker(BreakerId(0)));
    }
    let mut query = db_step(0);
    query.policies.push(PolicyRef::Bulkhead(BulkheadId(0)));
    if let Some(outside) = k.db_breaker {
        let mut db_breaker = breaker("db", 3, ms(200));
        db_breaker.counts = OutcomeSet::new([Outcome::Timeout, Outcome::Shed]);
        let id = BreakerId(s.breakers.len() as u32);
        s.breakers.push(db_breaker);
        if outside {
            query.policies.insert(0, PolicyRef::Breaker(id));
        } else {
            query.policies.push(PolicyRef::Breaker(id));
        }
    }
    if let Some(initial) = k.adaptive_initial {
        let config = outagelab_model::adaptive_limit::AdaptiveLimitConfig::new(
            initial,
            1,
            100.max(initial),
            outagelab_model::adaptive_limit::Algorithm::Aimd {
                backoff_ratio: 0.9,
                timeout: ms(k.db_latency_ms * 2),
            },
        )
        .unwrap();
        s.adaptive_limits.push(AdaptiveLimitSpec {
            name: "db".into(),
            enabled: true,
            config,
            drops: OutcomeSet::new([Outcome::Timeout, Outcome::Shed]),
        });
        query
            .policies
            .push(PolicyRef::AdaptiveLimit(AdaptiveLimitId(0)));
    }
    query.action = StepAction::Database {
        database: DatabaseId(0),
        timeout: k.db_timeout_ms.map(ms),
        latency: None,
        lock: None,
        data: None,
    };
    let fill = redis_step(
        0,
        RedisCommand::Set {
            value_bytes: 1000,
            ttl: Some(SimDuration::from_secs(1)),
        },
        0,
    );
    let fill = StepSpec {
        on_error: OnError::Ignore,
        ..fill
    };
    let spend = StepSpec {
        on_error: OnError::Next,
        ..redis_step(0, RedisCommand::Incr, 0)
    };
    s.flows.push(flow("read", vec![spend, get, query, fill]));
    let rate = Rate::per_second(k.rate).unwrap();
    let arrivals = match (k.closed, k.arrivals) {
        (Some((workers, iterations, think_ms)), _) => Arrivals::Closed(ClosedLoop {
            workers,
            think: Distribution::Constant(ms(think_ms)),
            stagger: ms(10),
            iterations: Some(iterations),
            until: None,
        }),
        (None, 0) => Arrivals::Even {
            rate,
            end: LoadEnd::Count(k.requests),
        },
        (None, 1) => Arrivals::Poisson {
            rate,
            end: LoadEnd::Count(k.requests),
        },
        (None, _) => Arrivals::Burst { count: k.requests },
    };
    let caller = k.caller.map(|(timeout_ms, attempts)| {
        let backoff = outagelab_model::backoff::BackoffConfig::new(
            ms(20),
            2000,
            ms(200),
            outagelab_model::backoff::Jitter::Full,
        )
        .unwrap();
        let config =
            outagelab_model::retry::RetryConfig::new(attempts, backoff, None, None).unwrap();
        s.retries.push(RetrySpec {
            name: "upstream".into(),
            enabled: true,
            config,
            retry_on: OutcomeSet::new([Outcome::Timeout, Outcome::Shed, Outcome::Refused]),
        });
        s.callers.push(CallerSpec {
            name: "upstream".into(),
            timeout: timeout_ms.map(ms),
            retry: Some(RetryId(0)),
            cancel_on_timeout: false,
        });
        CallerId(0)
    });
    s.loads.push(LoadSpec {
        name: "load".into(),
        flow: FlowId(0),
        start: SimTime::ZERO,
        arrivals,
        caller,
    });
    if let Some((kind, at, duration)) = k.fault {
        let kind = [
            FaultKind::Pause(PauseMode::All),
            FaultKind::Hang,
            FaultKind::Stop,
            FaultKind::Kill,
        ][usize::from(kind)];
        let duration = match kind {
            FaultKind::Kill => Some(SimDuration::ZERO),
            _ => duration.map(ms),
        };
        s.faults.push(fault("fault", 0, kind, at_ms(at), duration));
    }
    s
}

proptest! {
    #[test]
    fn requests_end_once_and_the_bulkhead_bounds_the_database(k in knobs()) {
        let scenario = scenario(&k);
        let report = run(&scenario).unwrap();
        let summary = &report.summary;
        prop_assert!(!report.verdict.is_budget(), "{:?}", report.verdict);
        prop_assert!(
            summary.databases["main"].peak_concurrency <= u64::from(k.bulkhead_max),
            "peak {} above the bulkhead's {}",
            summary.databases["main"].peak_concurrency,
            k.bulkhead_max
        );
        prop_assert!(summary.bulkheads["db"].peak_queued <= u64::from(k.bulkhead_queue));
        let ended: u64 = summary.outcomes.values().sum();
        // Arrivals after the horizon never happen; each call is at most `attempts` requests.
        let attempts = k.caller.map_or(1, |(_, attempts)| u64::from(attempts));
        if k.closed.is_none() {
            prop_assert!(summary.requests <= k.requests * attempts);
        }
        prop_assert_eq!(ended + summary.unfinished, summary.requests);
        let flow = &summary.flows["read"];
        prop_assert_eq!(flow.outcomes.values().sum::<u64>() + flow.unfinished, flow.requests);
        let in_series: u64 = report.series.outcomes.values().flatten().sum();
        prop_assert_eq!(in_series, ended);
        if k.reconnect == 2 {
            prop_assert_eq!(summary.connections["cache"].writes_applied_twice, 0);
        }
        if let Some((workers, iterations, _)) = k.closed {
            // Each iteration is one call (or one request without a caller).
            prop_assert!(
                summary.requests <= u64::from(workers) * iterations * attempts,
                "{} requests from {workers} workers x {iterations}",
                summary.requests
            );
        }
        if k.caller.is_some() {
            let upstream = &summary.callers["upstream"];
            let calls_ended: u64 = upstream.outcomes.values().sum();
            prop_assert_eq!(calls_ended + upstream.unfinished, upstream.requests);
            prop_assert_eq!(upstream.attempts, summary.requests, "every attempt is a request");
            prop_assert!(upstream.attempts <= upstream.requests * attempts);
            prop_assert!(upstream.abandoned <= upstream.attempts);
            // A run that ended before its horizon sent every iteration of every worker.
            let completed = report.verdict == outagelab_report::Verdict::Completed;
            if let (Some((workers, iterations, _)), true) = (k.closed, completed) {
                prop_assert_eq!(upstream.requests, u64::from(workers) * iterations);
            }
        }
        let again = run(&scenario).unwrap();
        prop_assert_eq!(format!("{:?}", again.summary), format!("{:?}", report.summary));
        prop_assert_eq!(format!("{:?}", again.series), format!("{:?}", report.series));
    }
}

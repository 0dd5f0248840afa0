//! Seed 001's tests against a real Redis: a `redis-server` started on a free loopback port by
//! the test (skipped with a loud message only when the binary is missing), and a TCP forwarder
//! in front of it that is taken down and brought back.
//!
//! Every test is bounded: each wait has a deadline, each loop a count, and the whole test runs
//! under [`TEST_TIME_MAX`].

use std::time::{Duration, Instant};

use outagelab_live::slot::{LiveSlot, QueryError, RedisConnector, Unavailable};
use outagelab_live::testing::{Forwarder, RedisServer, free_port};
use outagelab_model::reconnect::{Command, ReconnectConfig, ReconnectStats};
use redis::aio::MultiplexedConnection;

/// Every test stops by itself within this.
const TEST_TIME_MAX: Duration = Duration::from_secs(20);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
const RESPONSE_TIMEOUT: Duration = Duration::from_millis(500);
/// A caller that fails open does so well within this (a refused loopback connect, or an open
/// window, takes microseconds; the bound leaves room for a loaded CI machine).
const FAIL_OPEN_MAX: Duration = Duration::from_millis(100);

type Slot = LiveSlot<RedisConnector>;

fn slot_to(address: &str) -> Slot {
    let connector = RedisConnector::new(address, CONNECT_TIMEOUT, RESPONSE_TIMEOUT)
        .expect("a valid loopback address");
    LiveSlot::new(ReconnectConfig::seed_001(), connector)
}

/// Runs `test` under [`TEST_TIME_MAX`].
async fn bounded<F: std::future::Future<Output = ()>>(test: F) {
    tokio::time::timeout(TEST_TIME_MAX, test)
        .await
        .expect("the test finished within its time bound");
}

async fn admin(server: &RedisServer) -> MultiplexedConnection {
    RedisConnector::new(&server.address(), CONNECT_TIMEOUT, RESPONSE_TIMEOUT)
        .unwrap()
        .connect_for_test()
        .await
}

/// A small extension so tests can open a plain connection through the same client settings.
trait ConnectForTest {
    async fn connect_for_test(&self) -> MultiplexedConnection;
}

impl ConnectForTest for RedisConnector {
    async fn connect_for_test(&self) -> MultiplexedConnection {
        use outagelab_live::slot::Connector;
        self.connect().await.expect("the admin connection")
    }
}

async fn client_id(slot: &Slot) -> i64 {
    let lease = slot.lease().await.expect("connected");
    let mut connection = lease.connection().clone();
    redis::cmd("CLIENT")
        .arg("ID")
        .query_async(&mut connection)
        .await
        .expect("CLIENT ID")
}

async fn kill(admin: &mut MultiplexedConnection, id: i64) {
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(id)
        .query_async(admin)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1, "client {id} was killed");
}

fn stats(
    connected: bool,
    attempts: u64,
    reconnects: u64,
    failures: u64,
    evictions: u64,
    fail_open: u64,
) -> ReconnectStats {
    ReconnectStats {
        connected,
        attempts_total: attempts,
        connects_total: attempts - failures,
        reconnects_total: reconnects,
        connect_failures_total: failures,
        evictions_total: evictions,
        fail_open_total: fail_open,
    }
}

/// Seed 001, per component: CLIENT KILL of the component's own connection, then the same slot
/// instance reconnects, enforces against the counters that survived the kill, and records
/// through the new connection. Budgets read (MGET, replayed), rate limits run their admission
/// script (a write opted into replay), the cache writes (SET, not replayed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_kill_then_each_component_reconnects_and_enforces_again() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    bounded(async {
        let mut admin = admin(&server).await;
        let budgets = slot_to(&server.address());
        let rate_limits = slot_to(&server.address());
        let cache = slot_to(&server.address());

        // Budgets: spend recorded, killed, the read is replayed and sees the old spend.
        let spend = redis::cmd("INCRBY").arg("budget:spend").arg(40).clone();
        let _: i64 = budgets.query(Command::IncrBy, &spend, false).await.unwrap();
        kill(&mut admin, client_id(&budgets).await).await;
        let read = redis::cmd("MGET").arg("budget:spend").arg("budget:limit").clone();
        let values: Vec<Option<i64>> = budgets.query(Command::MGet, &read, false).await.unwrap();
        assert_eq!(values, vec![Some(40), None], "enforced against the surviving counter");
        let after: i64 = budgets.query(Command::IncrBy, &spend, false).await.unwrap();
        assert_eq!(after, 80, "recorded through the new connection");
        assert_eq!(budgets.stats(), stats(true, 2, 1, 0, 1, 0));
        assert_eq!(budgets.counters().replays_total, 1);

        // Rate limits: the admission script (check and charge) opts into replaying writes.
        let admit = redis::cmd("EVAL")
            .arg("local n = redis.call('INCR', KEYS[1]) if n > tonumber(ARGV[1]) then return 0 end return 1")
            .arg(1)
            .arg("rate:tenant")
            .arg(3)
            .clone();
        let first: i64 = rate_limits.query(Command::EvalSha, &admit, true).await.unwrap();
        assert_eq!(first, 1);
        kill(&mut admin, client_id(&rate_limits).await).await;
        let second: i64 = rate_limits.query(Command::EvalSha, &admit, true).await.unwrap();
        let third: i64 = rate_limits.query(Command::EvalSha, &admit, true).await.unwrap();
        let fourth: i64 = rate_limits.query(Command::EvalSha, &admit, true).await.unwrap();
        assert_eq!((second, third, fourth), (1, 1, 0), "the limit of 3 is enforced again");
        assert_eq!(rate_limits.stats(), stats(true, 2, 1, 0, 1, 0));
        assert_eq!(rate_limits.counters().replays_total, 1);

        // Cache: a write that meets the dead connection is lost, not replayed; the next works.
        let fill = redis::cmd("SET").arg("cache:page").arg("v1").clone();
        let _: () = cache.query(Command::Set, &fill, false).await.unwrap();
        kill(&mut admin, client_id(&cache).await).await;
        let lost = cache
            .query::<()>(Command::Set, &redis::cmd("SET").arg("cache:page").arg("v2").clone(), false)
            .await;
        assert!(
            matches!(lost, Err(QueryError::Failed { replayed: false, .. })),
            "the write is not replayed: {lost:?}"
        );
        let get = redis::cmd("GET").arg("cache:page").clone();
        let cached: Option<String> = cache.query(Command::Get, &get, false).await.unwrap();
        assert_eq!(cached.as_deref(), Some("v1"), "the lost write never ran twice");
        let fill3 = redis::cmd("SET").arg("cache:page").arg("v3").clone();
        let _: () = cache.query(Command::Set, &fill3, false).await.unwrap();
        let cached: Option<String> = cache.query(Command::Get, &get, false).await.unwrap();
        assert_eq!(cached.as_deref(), Some("v3"));
        assert_eq!(cache.stats(), stats(true, 2, 1, 0, 1, 0));
        assert_eq!(cache.counters().not_replayed_total, 1);

        // Each kill touched only its own component's connection.
        for slot in [&budgets, &rate_limits, &cache] {
            assert_eq!(slot.stats().reconnects_total, 1);
        }
    })
    .await;
}

/// A server's rejection of one command (WRONGTYPE) is an answer: the connection stays, nothing
/// is replayed, and the next command runs on the same generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_command_keeps_the_connection() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    bounded(async {
        let slot = slot_to(&server.address());
        let set = redis::cmd("SET").arg("a-string").arg("v").clone();
        let _: () = slot.query(Command::Set, &set, false).await.unwrap();
        let wrong = redis::cmd("LRANGE").arg("a-string").arg(0).arg(-1).clone();
        let rejected = slot
            .query::<Vec<String>>(Command::LRange, &wrong, false)
            .await;
        assert!(
            matches!(
                rejected,
                Err(QueryError::Failed {
                    failure: outagelab_model::reconnect::Failure::Server,
                    replayed: false,
                    ..
                })
            ),
            "{rejected:?}"
        );
        let get = redis::cmd("GET").arg("a-string").clone();
        let value: Option<String> = slot.query(Command::Get, &get, false).await.unwrap();
        assert_eq!(value.as_deref(), Some("v"));
        assert_eq!(slot.stats(), stats(true, 1, 0, 0, 0, 0));
        assert_eq!(slot.counters(), Default::default());
    })
    .await;
}

/// What one caller of the outage loop saw.
#[derive(Default)]
struct Tally {
    ok: u64,
    fail_open: u64,
    /// Instants at which this test saw a connect attempt fail (the caller that made it).
    attempt_failures: Vec<Instant>,
}

impl Tally {
    fn record<T>(&mut self, slot: &Slot, result: Result<T, QueryError>) {
        match result {
            Ok(_) => self.ok += 1,
            Err(error) => {
                assert!(error.is_unreachable(), "only Redis being away: {error:?}");
                if let QueryError::Unavailable(Unavailable::ConnectFailed { .. }) = error {
                    self.attempt_failures.push(Instant::now());
                }
                slot.record_fail_open();
                self.fail_open += 1;
            }
        }
    }
}

/// Calls `call` every 10 ms until it succeeds (true) or `limit` has passed (false); the
/// longest backoff window left after the outage tests is 1.6 s.
async fn retry_until_ok<T, F, Fut>(slot: &Slot, tally: &mut Tally, limit: Duration, call: F) -> bool
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, QueryError>>,
{
    let started = Instant::now();
    // Bounded by `limit`.
    while started.elapsed() < limit {
        let result = call().await;
        let done = result.is_ok();
        tally.record(slot, result);
        if done {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Consecutive failed attempts are at least one backoff window apart (100 ms, doubling, as
/// seed 001), and not much more when callers keep arriving.
fn assert_paced(failures: &[Instant], callers_every: Duration) {
    let config = ReconnectConfig::seed_001();
    for (index, pair) in failures.windows(2).enumerate() {
        let gap = pair[1] - pair[0];
        let window = Duration::from_nanos(
            config
                .backoff_after(u32::try_from(index + 1).unwrap())
                .as_nanos(),
        );
        let slack = Duration::from_millis(5);
        assert!(
            gap + slack >= window,
            "attempt {} came {gap:?} after the previous failure, inside its {window:?} window",
            index + 2
        );
        assert!(
            gap <= window + callers_every + Duration::from_millis(200),
            "attempt {} came {gap:?} after the previous failure, long after its {window:?} window",
            index + 2
        );
    }
}

/// Seed 001, the forwarder taken down for 2 s and brought back: callers fail open during it
/// at once, the read that met the dropped connection is replayed and the write is not, at most
/// one connect attempt per backoff window, and recovery without a restart of the slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarder_outage_fails_open_paces_attempts_and_recovers() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    bounded(async {
        let forwarder = Forwarder::start(server.address())
            .await
            .expect("a forwarder");
        let reader = slot_to(&forwarder.address());
        let writer = slot_to(&forwarder.address());
        let read = redis::cmd("GET").arg("counter").clone();
        let write = redis::cmd("INCR").arg("counter").clone();
        let _: i64 = writer.query(Command::IncrBy, &write, false).await.unwrap();
        let value: Option<i64> = reader.query(Command::Get, &read, false).await.unwrap();
        assert_eq!(value, Some(1));
        assert_eq!(
            reader.stats(),
            stats(true, 1, 0, 0, 0, 0),
            "connected before"
        );

        forwarder.down().await;
        let mut reads = Tally::default();
        let mut writes = Tally::default();
        let outage = Duration::from_secs(2);
        let callers_every = Duration::from_millis(10);
        let started = Instant::now();
        // Bounded: 2 s / 10 ms = 200 turns.
        while started.elapsed() < outage {
            let turn = Instant::now();
            reads.record(
                &reader,
                reader
                    .query::<Option<i64>>(Command::Get, &read, false)
                    .await,
            );
            writes.record(
                &writer,
                writer.query::<i64>(Command::IncrBy, &write, false).await,
            );
            let took = turn.elapsed();
            assert!(took < FAIL_OPEN_MAX, "fail open at once, took {took:?}");
            tokio::time::sleep(callers_every).await;
        }
        assert_eq!(
            reads.ok + writes.ok,
            0,
            "nothing gets through during the outage"
        );
        assert_eq!(reader.counters().replays_total, 1, "the read was replayed");
        assert_eq!(writer.counters().replays_total, 0, "the write was not");
        assert_eq!(writer.counters().not_replayed_total, 1);
        for (slot, tally) in [(&reader, &reads), (&writer, &writes)] {
            let during = slot.stats();
            assert!(!during.connected, "disconnected during the outage");
            assert_eq!(
                during.connect_failures_total,
                tally.attempt_failures.len() as u64
            );
            // 2 s of windows of 100, 200, 400, 800 ms (and 1.6 s): 4 or 5 attempts.
            assert!(
                (4..=5).contains(&during.connect_failures_total),
                "one attempt per backoff window: {during:?}"
            );
            assert_paced(&tally.attempt_failures, callers_every);
        }

        forwarder.up().await.expect("the forwarder's port again");
        let until_ok = Duration::from_secs(6);
        assert!(
            retry_until_ok(&reader, &mut reads, until_ok, || async {
                reader
                    .query::<Option<i64>>(Command::Get, &read, false)
                    .await
            })
            .await,
            "the same reader slot recovered without a restart"
        );
        assert!(
            retry_until_ok(&writer, &mut writes, until_ok, || async {
                writer.query::<i64>(Command::IncrBy, &write, false).await
            })
            .await,
            "the same writer slot recovered without a restart"
        );
        let value: Option<i64> = reader.query(Command::Get, &read, false).await.unwrap();
        assert_eq!(value, Some(2), "the write lost in the outage never ran");
        let after = reader.stats();
        assert!(after.connected, "reconnected after");
        assert_eq!(after.reconnects_total, 1, "reconnected once");
        assert_eq!(after.fail_open_total, reads.fail_open);
        assert_eq!(writer.stats().reconnects_total, 1);
        assert_eq!(writer.stats().fail_open_total, writes.fail_open);
    })
    .await;
}

/// Seed 001: a slot pointed at a closed port makes one attempt per backoff window, and every
/// caller fails open at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_port_paces_attempts_by_the_backoff() {
    bounded(async {
        let slot = slot_to(&format!("127.0.0.1:{}", free_port()));
        let get = redis::cmd("GET").arg("key").clone();
        let mut tally = Tally::default();
        let callers_every = Duration::from_millis(10);
        let started = Instant::now();
        let mut slowest = Duration::ZERO;
        // Bounded: 1.6 s / 10 ms = 160 turns.
        while started.elapsed() < Duration::from_millis(1600) {
            let turn = Instant::now();
            tally.record(
                &slot,
                slot.query::<Option<String>>(Command::Get, &get, false)
                    .await,
            );
            slowest = slowest.max(turn.elapsed());
            tokio::time::sleep(callers_every).await;
        }
        // Far below the 500 ms connect timeout: nobody waits on a connect that cannot succeed.
        assert!(slowest < FAIL_OPEN_MAX, "fail-open latency {slowest:?}");
        assert_eq!(tally.ok, 0);
        let seen = slot.stats();
        // Windows 100, 200, 400, 800 ms from failures at about 0, 0.1, 0.3, 0.7, 1.5 s: five
        // (four if a loaded machine stretched the callers' sleeps past the last 100 ms).
        assert!(
            (4..=5).contains(&seen.connect_failures_total),
            "one attempt per window: {seen:?}"
        );
        assert_eq!(
            seen.connect_failures_total,
            tally.attempt_failures.len() as u64
        );
        assert_paced(&tally.attempt_failures, callers_every);
        assert_eq!(seen.fail_open_total, tally.fail_open);
        assert!(!seen.connected);
    })
    .await;
}

/// Seed 001: a burst of 500 concurrent callers when Redis goes away gives exactly one counted
/// connect failure: one caller connects, the others wait on its attempt or find the backoff
/// window open, and all 500 fail open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_500_callers_gives_one_connect_failure() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    bounded(async {
        let forwarder = Forwarder::start(server.address())
            .await
            .expect("a forwarder");
        let slot = std::sync::Arc::new(slot_to(&forwarder.address()));
        let get = redis::cmd("GET").arg("key").clone();
        let _: Option<String> = slot.query(Command::Get, &get, false).await.unwrap();
        forwarder.down().await;

        const CALLERS: usize = 500;
        let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(CALLERS));
        let mut callers = tokio::task::JoinSet::new();
        for _ in 0..CALLERS {
            let (slot, barrier, get) = (slot.clone(), barrier.clone(), get.clone());
            callers.spawn(async move {
                barrier.wait().await;
                let result = slot
                    .query::<Option<String>>(Command::Get, &get, false)
                    .await;
                let unreachable = result.as_ref().is_err_and(QueryError::is_unreachable);
                if unreachable {
                    slot.record_fail_open();
                }
                unreachable
            });
        }
        let mut fail_open = 0;
        while let Some(joined) = callers.join_next().await {
            fail_open += u64::from(joined.expect("a caller finished"));
        }
        let seen = slot.stats();
        assert_eq!(fail_open, CALLERS as u64, "every caller failed open");
        assert_eq!(
            seen.connect_failures_total, 1,
            "one counted failure: {seen:?}"
        );
        assert_eq!(
            seen.attempts_total, 2,
            "the first connect, then one attempt"
        );
        assert_eq!(seen.fail_open_total, CALLERS as u64);
        assert_eq!(seen.evictions_total, 1);
    })
    .await;
}

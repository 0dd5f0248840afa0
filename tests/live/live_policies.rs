//! A bulkhead and a retry policy in a live run (`outagelab live`) against a `redis-server` the
//! test starts, held against the simulation of the same file: the same decisions, counted the
//! same way. A bulkhead of 2 permits and 1 place in its queue takes a burst of 5 calls of
//! 200 ms: 2 run, 1 waits and runs after them (ending at 400 ms), 2 are shed. A retry policy
//! of 3 attempts, 20 ms apart, around a query that always outlasts its 10 ms timeout: each of
//! 2 requests is retried twice and given up on (70 ms: 3 timeouts and 2 backoffs). And a
//! bulkhead of one connection in front of a 100 ms query with a 20 ms timeout, a retry inside
//! it: a query whose caller gave up keeps its connection until the query ends, so the retry
//! goes again on it at 100 ms (not after its 20 ms backoff) and gives up at 120 ms, and the
//! request queued behind gets the connection only when the second query ends, at 200 ms: it
//! ends at 320 ms (20 ms, a wait for its own first query, 20 ms). With the retry outside the
//! bulkhead (the default order), the second attempt queues for the connection its first
//! query still holds and gets it when that query ends: 120 ms. Inside a bulkhead that is off
//! the retry does not wait for the query: 60 ms. A `finally` step after a
//! query that fails its request still runs, in the background. An in-process cache in front
//! of a query serves every request after the first. And a database of capacity 2 shares it
//! between four 40 ms queries, which all end at 80 ms.
//!
//! Its own test binary (under a second of wall time), so that no other test competes for the
//! cores while it measures.

use crate::common;

use common::{scratch, simulated_and_live};
use outagelab_live::testing::{RedisServer, timing_tests};

const FILE: &str = r#"[scenario]
name = "live-policies"

[databases.main]
latency = "50ms"

[bulkheads.pool]
max_concurrent = 2
queue = 1

[retries.again]
max_attempts = 3
backoff = "20ms"
retry_on = ["timeout"]

[flows.guarded]
steps = [{ work = "200ms", bulkhead = "pool" }]

[flows.retried]
steps = [{ db = { name = "main", timeout = "10ms" }, retry = "again", on_error = "fail" }]

[databases.slow]
latency = "100ms"

[bulkheads.connections]
max_concurrent = 1
queue = 1

[retries.once]
max_attempts = 2
backoff = "20ms"
retry_on = ["timeout"]

[flows.pooled]
steps = [{ db = { name = "slow", timeout = "20ms" }, bulkhead = "connections", retry = "once", policies = ["bulkhead", "retry"], on_error = "fail" }]

# The retry outside the pool (the default order): the second attempt queues for the
# connection its own first query still holds, and gets it when that query ends.
[databases.slow_outside]
latency = "100ms"

[bulkheads.outside]
max_concurrent = 1
queue = 1

[flows.pooled_outside]
steps = [{ db = { name = "slow_outside", timeout = "20ms" }, bulkhead = "outside", retry = "once", on_error = "fail" }]

[loads.pooled_outside]
flow = "pooled_outside"
arrivals = "burst"
count = 1

# The same retry inside a bulkhead that is switched off: no pool, so the retry goes after its
# backoff (at 40 ms) without waiting for the first query, and gives up at 60 ms.
[databases.slow_unpooled]
latency = "100ms"

[bulkheads.off]
enabled = false
max_concurrent = 1
queue = 0

[flows.unpooled]
steps = [{ db = { name = "slow_unpooled", timeout = "20ms" }, bulkhead = "off", retry = "once", policies = ["bulkhead", "retry"], on_error = "fail" }]

[loads.unpooled]
flow = "unpooled"
arrivals = "burst"
count = 1

# A query that fails its request, then a cleanup that runs however the request ended.
[flows.cleaned]
steps = [
  { db = { name = "main", timeout = "10ms" }, on_error = "fail" },
  { work = "5ms", finally = true },
]

[loads.cleaned]
flow = "cleaned"
arrivals = "burst"
count = 3

# Cache-aside in front of a 20 ms query, one key, a request every 50 ms: the first misses and
# fills the cache, the other nine hit and finish.
[caches.l1]
max_entries = 10
max_bytes = "1MiB"
ttl = "1s"

[keys.product]
count = 1

[flows.cached]
steps = [
  { cache = { name = "l1", op = "get", key = "product" }, on_hit = "finish" },
  { db = { name = "fast" } },
  { cache = { name = "l1", op = "put", key = "product", value = "1KiB" } },
]

[databases.fast]
latency = "20ms"

# Four 40 ms queries at once on a database that runs two at full speed: they share it, each
# at half speed, and all end at 80 ms.
[databases.shared]
latency = "40ms"
capacity = 2

[flows.shared]
steps = [{ db = { name = "shared" } }]

[loads.shared]
flow = "shared"
arrivals = "burst"
count = 4

[loads.cached]
flow = "cached"
arrivals = "even"
rate = 20
count = 10

[loads.burst]
flow = "guarded"
arrivals = "burst"
count = 5

[loads.retries]
flow = "retried"
arrivals = "burst"
count = 2

[loads.pooled]
flow = "pooled"
arrivals = "burst"
count = 2
"#;

#[test]
fn a_live_bulkhead_and_retry_decide_as_the_simulated_ones() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    let dir = scratch("live-policies");
    let file = dir.join("policies.toml");
    std::fs::write(&file, FILE).unwrap();
    let (simulated, live) =
        simulated_and_live(file.to_str().unwrap(), &server.address(), &dir, &[]);
    let (simulated, live) = (
        simulated["variants"][0]["summary"].clone(),
        live["variants"][0]["summary"].clone(),
    );
    for report in [&simulated, &live] {
        let pool = &report["bulkheads"]["pool"];
        assert_eq!(
            (&pool["peak_in_use"], &pool["peak_queued"], &pool["shed"]),
            (&2.into(), &1.into(), &2.into()),
            "{pool}"
        );
        let guarded = &report["flows"]["guarded"]["outcomes"];
        assert_eq!((&guarded["ok"], &guarded["shed"]), (&3.into(), &2.into()));
        let again = &report["retries"]["again"];
        assert_eq!(
            (
                &again["requests"],
                &again["retries"],
                &again["gave_up_attempts"]
            ),
            (&2.into(), &4.into(), &2.into()),
            "{again}"
        );
        assert_eq!(report["flows"]["retried"]["outcomes"]["timeout"], 2);
        let connections = &report["bulkheads"]["connections"];
        assert_eq!(
            (&connections["peak_in_use"], &connections["peak_queued"]),
            (&1.into(), &1.into()),
            "{connections}"
        );
        // Two retries in the pool, one outside it, one in the bulkhead that is off.
        assert_eq!(report["retries"]["once"]["retries"], 4);
        assert_eq!(report["flows"]["pooled"]["outcomes"]["timeout"], 2);
        // One query at a time: the pool's connection is held by every query until it ends.
        assert_eq!(report["databases"]["slow"]["peak_concurrency"], 1);
        // Each failed request's cleanup ran, in the background.
        let cleaned = &report["flows"]["cleaned"];
        assert_eq!(cleaned["outcomes"]["timeout"], 3);
        assert_eq!(cleaned["background"]["ok"], 3, "{cleaned}");
        let l1 = &report["caches"]["l1"];
        assert_eq!((&l1["hits"], &l1["misses"]), (&9.into(), &1.into()), "{l1}");
        assert_eq!(report["databases"]["fast"]["queries"], 1);
        assert_eq!(report["databases"]["shared"]["peak_concurrency"], 4);
    }
    // And the times: the queued call ends after the two before it, the retried requests
    // after their three timeouts and two backoffs. A live request is never faster than its
    // simulation (timers do not fire early), on any machine; how much slower it may be (tokio's
    // timers are a millisecond or so late each; 40 ms covers a machine that is otherwise idle)
    // is held only where timing is (`TIMING_TESTS_VAR`).
    let max = |report: &serde_json::Value, flow: &str| {
        report["flows"][flow]["latency_ms"]["all"]["max"]
            .as_f64()
            .unwrap()
    };
    let shared = |report: &serde_json::Value, stat: &str| {
        report["flows"]["shared"]["latency_ms"]["all"][stat]
            .as_f64()
            .unwrap()
    };
    // (flow, simulated, live): the queued call, the retries, a pooled query's retry inside
    // the pool; retried outside the pool, the second attempt waits for the first query's end
    // (100 ms) for the connection and times out 20 ms later; a bulkhead that is off pools
    // nothing, so the retry does not wait for the first query; shared above capacity, all
    // four at 80 ms, none at its 40 ms alone.
    let times = [
        ("guarded", 400.0, max(&live, "guarded")),
        ("retried", 70.0, max(&live, "retried")),
        ("pooled", 320.0, max(&live, "pooled")),
        ("pooled_outside", 120.0, max(&live, "pooled_outside")),
        ("unpooled", 60.0, max(&live, "unpooled")),
        ("shared (fastest)", 80.0, shared(&live, "min")),
        ("shared (slowest)", 80.0, shared(&live, "max")),
    ];
    assert_eq!(
        [
            max(&simulated, "guarded"),
            max(&simulated, "retried"),
            max(&simulated, "pooled"),
            max(&simulated, "pooled_outside"),
            max(&simulated, "unpooled"),
            shared(&simulated, "min"),
            shared(&simulated, "max"),
        ],
        times.map(|(_, simulated, _)| simulated),
        "the simulated times"
    );
    for (flow, simulated, live) in times {
        assert!(
            live >= simulated,
            "{flow}: live {live} ms, simulated {simulated} ms"
        );
    }
    if timing_tests("how much later than simulated the live bulkhead's and retries' requests end") {
        for (flow, simulated, live) in times {
            assert!(
                live < simulated + 40.0,
                "{flow}: live {live} ms, simulated {simulated} ms"
            );
        }
    }
}

//! Services of several instances (`[services.<name>]`): each instance has its own caches,
//! connections and policies, the databases and servers are shared, and a load spreads its
//! requests over the instances. Checked against hand-counted runs.

use std::path::Path;

use outagelab_report::VariantReport;

const READS: &str = r#"
[scenario]
name = "pods"

[keys.product]
count = 1

[databases.main]
latency = "5ms"

[caches.l1]
max_entries = 100
max_bytes = "1MiB"
ttl = "60s"

[flows.read]
steps = [
  { cache = { name = "l1", op = "get", key = "product" }, on_hit = "finish" },
  { db = { name = "main" }, on_error = "fail" },
  { cache = { name = "l1", op = "put", key = "product", value = "1KiB" } },
]

[loads.users]
flow = "read"
arrivals = "even"
rate = 10
count = 6
"#;

fn run(text: &str) -> VariantReport {
    let file = outagelab_scenario_file::parse(text, Path::new("pods.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    outagelab_sim::run(&file.variants[0].scenario).unwrap()
}

fn error(text: &str) -> String {
    match outagelab_scenario_file::parse(text, Path::new("pods.toml")) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(diagnostics) => diagnostics.to_string(),
    }
}

#[test]
fn each_pod_has_its_own_l1_so_three_pods_read_the_database_three_times() {
    // One process: the first read misses and fills the L1, the other five hit.
    let one = run(READS);
    assert_eq!(one.summary.databases["main"].queries, 1);
    assert_eq!(one.summary.caches["l1"].hits, 5);
    // Three pods, round robin: reads 0, 1, 2 each miss their pod's empty L1; 3, 4, 5 hit.
    let pods = run(&format!(
        "{READS}\n[services.api]\ninstances = 3\nflows = [\"read\"]\n"
    ));
    let summary = &pods.summary;
    assert_eq!(summary.databases["main"].queries, 3);
    for pod in 0..3 {
        let l1 = &summary.caches[&format!("l1@{pod}")];
        assert_eq!((l1.hits, l1.misses), (1, 1), "l1@{pod}");
        let instance = &summary.services["api"].instances[&pod.to_string()];
        assert_eq!((instance.requests, instance.outcomes["ok"]), (2, 2));
    }
    assert!(
        !summary.caches.contains_key("l1"),
        "every pod's L1 is named"
    );
    // The flow's figures count every pod; the copies are not flows of their own.
    assert_eq!(summary.flows.len(), 1);
    assert_eq!(summary.flows["read"].requests, 6);
    assert_eq!(summary.flows["read"].outcomes["ok"], 6);
    assert_eq!(summary.requests, 6);
}

#[test]
fn a_random_spread_is_fair_and_the_same_on_the_same_seed() {
    let text = READS
        .replace("count = 6", "count = 600")
        .replace("rate = 10", "rate = 1000")
        + "\n[services.api]\ninstances = 3\nflows = [\"read\"]\nspread = \"random\"\n";
    let report = run(&text);
    let counts: Vec<u64> = (0..3)
        .map(|pod| report.summary.services["api"].instances[&pod.to_string()].requests)
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 600);
    assert!(
        counts.iter().all(|&n| (150..=250).contains(&n)),
        "{counts:?}"
    );
    assert_ne!(counts, [200, 200, 200], "random, not round robin");
    let again = run(&text);
    assert_eq!(
        format!("{:?}", again.summary),
        format!("{:?}", report.summary)
    );
}

#[test]
fn a_per_instance_resource_cannot_be_shared_with_flows_outside_the_service() {
    let text = format!(
        "{READS}\n[flows.admin]\nsteps = [{{ cache = {{ name = \"l1\", op = \"get\", key = \"product\" }} }}]\n\n\
         [loads.admin]\nflow = \"admin\"\narrivals = \"burst\"\ncount = 1\n\n\
         [services.api]\ninstances = 2\nflows = [\"read\"]\n"
    );
    let message = error(&text);
    assert!(
        message.contains(
            "services.api: cache l1 is used by flows of service api and by other flows: each \
             instance has its own"
        ),
        "{message}"
    );
}

#[test]
fn bad_services_are_refused_with_the_key_at_fault() {
    for (service, expected) in [
        (
            "instances = 0\nflows = [\"read\"]",
            "services.api.instances: must be at least 1",
        ),
        (
            "instances = 2\nflows = [\"raed\"]",
            "services.api.flows: unknown flow `raed`: did you mean `read`?",
        ),
        (
            "instances = 2\nflows = [\"read\", \"read\"]",
            "services.api.flows: flow `read` is listed twice",
        ),
        (
            "instances = 2\nflows = []",
            "a service runs at least one flow",
        ),
        (
            "instances = 2\nflows = [\"read\"]\nspread = \"sticky\"",
            "services.api.spread: unknown variant `sticky`",
        ),
    ] {
        let message = error(&format!("{READS}\n[services.api]\n{service}\n"));
        assert!(message.contains(expected), "{expected}: {message}");
    }
}

#[test]
fn in_flight_requests_are_a_series_per_instance_and_per_flow() {
    // Reads that each take 5 ms of the database, one every 100 ms: at most one in flight,
    // on one instance at a time; a second flow makes per-flow series too.
    let text = format!(
        "{READS}\n[flows.ping]\nsteps = [{{ work = \"1ms\" }}]\n\n[loads.pings]\nflow = \"ping\"\narrivals = \"burst\"\ncount = 2\n\n[services.api]\ninstances = 3\nflows = [\"read\"]\n"
    );
    let report = run(&text);
    let gauges = &report.series.gauges_max;
    let max = |name: &str| {
        gauges
            .get(name)
            .unwrap_or_else(|| panic!("no series {name}: {:?}", gauges.keys()))
            .iter()
            .copied()
            .max()
            .unwrap()
    };
    for pod in 0..3 {
        assert_eq!(
            max(&format!("services.api@{pod}.in_flight")),
            1,
            "pod {pod}"
        );
    }
    assert_eq!(max("flows.read.in_flight"), 1);
    assert_eq!(max("flows.ping.in_flight"), 2);
    assert!(
        !gauges.contains_key("flows.read@1.in_flight"),
        "copies count as their flow"
    );
}

#[test]
fn a_breaker_opened_on_one_pod_never_affects_another() {
    // Two pods, each with its own connection to one Redis and its own breaker around the GET.
    // Pod 0's link is cut from 1 s to 3 s: its GETs are refused, its breaker opens and its
    // requests fail fast. Pod 1, on the same Redis, never sees an error: its breaker stays
    // closed and every one of its requests is ok. One breaker for both (the process-wide
    // design of seed 000) would have refused pod 1's reads too.
    let text = r#"
[scenario]
name = "blast-radius"

[servers.redis]

[connections.cache]
server = "redis"
offline_queue = false

[keys.k]
count = 10

[breakers.redis]
failures = 3
open_for = "500ms"

[flows.read]
steps = [{ redis = { command = "GET", connection = "cache", key = "k" }, breaker = "redis" }]

[services.api]
instances = 2
flows = ["read"]

[loads.users]
flow = "read"
arrivals = "even"
rate = 40
count = 200

[faults.cut]
target = "cache@0"
kind = "disconnect"
at = "1s"
duration = "2s"
"#;
    let report = run(text);
    let summary = &report.summary;
    let pod0 = &summary.breakers["redis@0"];
    assert!(pod0.opened >= 1, "pod 0's breaker opened: {pod0:?}");
    let pod1 = &summary.breakers["redis@1"];
    assert_eq!(
        (pod1.opened, pod1.rejected),
        (0, 0),
        "pod 1's breaker never moved"
    );
    let instances = &summary.services["api"].instances;
    assert!(instances["0"].outcomes["breaker_open"] > 0);
    assert_eq!(instances["1"].outcomes["ok"], instances["1"].requests);
    assert_eq!(instances["1"].requests, 100);
}

/// A gateway of four pods checking "20/s" (a burst of 20) for 4,000 requests sent evenly at
/// 400/s, round robin; `limiter` is the rest of `[rate_limits.api]` and `key` the step's key.
fn gateway(limiter: &str, key: &str) -> VariantReport {
    run(&format!(
        r#"
[scenario]
name = "gateway"

[servers.redis]

[connections.limits]
server = "redis"

[keys.everyone]
count = 1

[rate_limits.api]
capacity = 20
rate = 20
{limiter}

[flows.request]
steps = [{{ rate_limit = {{ name = "api"{key} }} }}]

[services.gateway]
instances = 4
flows = ["request"]

[loads.clients]
flow = "request"
arrivals = "even"
rate = 400
count = 4000
"#
    ))
}

/// The pods' `(admitted, rejected)` of `api`, summed over `api@0` to `api@3`.
fn admitted_rejected(report: &VariantReport) -> (u64, u64) {
    (0..4)
        .map(|k| &report.summary.rate_limits[&format!("api@{k}")])
        .fold((0, 0), |(a, r), l| (a + l.admitted, r + l.rejected))
}

#[test]
fn a_rate_limit_in_redis_is_one_limit_for_all_pods_and_a_local_one_is_one_per_pod() {
    // In Redis: one bucket for the service. A check every 2.5 ms: the burst of 20, then a token
    // every 50 ms over the 9,997.5 ms from the first check to the last, 20 + 199 = 219.
    let stored = gateway(r#"store = "limits""#, r#", key = "everyone""#);
    assert_eq!(admitted_rejected(&stored), (219, 3_781));
    assert_eq!(stored.summary.outcomes["rate_limited"], 3_781);
    // In-process: one bucket per pod, each checked every 10 ms over 9,990 ms: 219 each.
    let local = gateway("", "");
    assert_eq!(admitted_rejected(&local), (4 * 219, 4_000 - 4 * 219));
}

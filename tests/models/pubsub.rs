//! Seed 003's L1/L2 invalidation: three pods, each with its own L1 and its own subscriber to
//! the `inv` channel; a writer commits, deletes the L2 copy and publishes the key. Pub/Sub is
//! at-most-once, so a pod whose subscriber is disconnected at publish time keeps its stale L1
//! copy until its TTL, unless it flushes its L1 on reconnect. Client tracking sends the
//! invalidation without a PUBLISH. Checked against hand-counted runs.

use std::path::Path;

use outagelab_report::VariantReport;

const PODS: &str = r#"
[scenario]
name = "pubsub"

[servers.redis]

[connections.cache]
server = "redis"
command_timeout = "100ms"

[connections.inv]
server = "redis"
subscribe = { channel = "inv", invalidates = "l1" }

[connections.writer]
server = "redis"

[keys.product]
count = 1

[databases.main]
latency = "5ms"

[caches.l1]
max_entries = 100
max_bytes = "1MiB"
ttl = "5s"

[flows.read]
steps = [
  { cache = { name = "l1", op = "get", key = "product" }, on_hit = "finish" },
  { redis = { command = "GET", connection = "cache", key = "product" }, on_hit = "fill_l1", on_error = "next" },
  { db = { name = "main", key = "product" }, on_error = "fail" },
  { redis = { command = "SET", connection = "cache", key = "product", ttl = "300s" }, on_error = "next" },
  { label = "fill_l1", cache = { name = "l1", op = "put", key = "product", value = "1KiB" } },
]

[flows.update]
steps = [
  { db = { name = "main", key = "product", write = true }, on_error = "fail" },
  { redis = { command = "DEL", connection = "writer", key = "product" }, on_error = "fail" },
  { redis = { command = "PUBLISH", connection = "writer", channel = "inv", key = "product" } },
]

[services.api]
instances = 3
flows = ["read"]

# Six reads, round robin over the pods (a, b, c, a, b, c), 100 ms apart.
[loads.before]
flow = "read"
arrivals = "even"
rate = 10
count = 6

[loads.write]
flow = "update"
arrivals = "burst"
count = 1
start = "1s"

# Three reads after the update (a, b, c), then three more (a, b, c).
[loads.after]
flow = "read"
arrivals = "even"
rate = 10
count = 6
start = "2s"
"#;

fn run(text: &str) -> VariantReport {
    let file = outagelab_scenario_file::parse(text, Path::new("pubsub.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    outagelab_sim::run(&file.variants[0].scenario).unwrap()
}

/// Database queries that were reads: every query but the writer's one.
fn db_reads(report: &VariantReport) -> u64 {
    report.summary.databases["main"].queries - report.summary.flows["update"].requests
}

#[test]
fn six_reads_cost_one_database_read_and_after_the_update_two_in_total() {
    // Pod a misses L1 and L2 and reads the database (filling both); b and c miss their L1
    // and hit L2; the next three hit their L1. The update commits, deletes L2 and publishes:
    // every pod drops its L1 copy. After it, a reads the database again, b and c read L2.
    let report = run(PODS);
    assert_eq!(db_reads(&report), 2);
    assert_eq!(report.summary.flows["read"].stale_reads, 0);
    for pod in 0..3 {
        let inv = &report.summary.connections[&format!("inv@{pod}")];
        assert_eq!((inv.messages, inv.messages_missed), (1, 0), "inv@{pod}");
        let l1 = &report.summary.caches[&format!("l1@{pod}")];
        assert_eq!(l1.invalidations, 1, "l1@{pod}");
    }
}

#[test]
fn a_pod_disconnected_at_publish_time_serves_its_stale_copy_until_the_ttl() {
    // Pod b's subscriber is cut from 0.9 s to 1.5 s, across the publish at about 1 s: it
    // misses the message, and comes back with nothing to tell it. Its L1 copy (from 0.1 s)
    // lives until 5.1 s: its two reads after the update are stale.
    let cut = "\n[faults.cut]\ntarget = \"inv@1\"\nkind = \"disconnect\"\nat = \"900ms\"\nduration = \"600ms\"\n";
    let report = run(&format!("{PODS}{cut}"));
    let inv = &report.summary.connections["inv@1"];
    assert_eq!((inv.messages, inv.messages_missed), (0, 1));
    let read = &report.summary.flows["read"];
    assert_eq!(read.stale_reads, 2);
    assert!(
        read.stale_age_ms.min.unwrap() >= 1000.0,
        "{:?}",
        read.stale_age_ms
    );
    assert_eq!(db_reads(&report), 2, "b never asks L2 or the database");
    // Flushing L1 on reconnect closes the gap: b's reads after the update miss and read L2.
    let flushing = PODS.replace(
        "subscribe = { channel = \"inv\", invalidates = \"l1\" }",
        "subscribe = { channel = \"inv\", invalidates = \"l1\", flush_on_reconnect = true }",
    );
    let report = run(&format!("{flushing}{cut}"));
    assert_eq!(report.summary.flows["read"].stale_reads, 0);
    assert_eq!(report.summary.caches["l1@1"].flushes, 1);
}

/// The pods with client tracking in `mode` (a `tracking` table's extra keys) redirected to
/// each pod's subscriber, and a writer that only deletes the key (no PUBLISH).
fn tracking(mode: &str) -> String {
    PODS.replace(
        "[connections.cache]\nserver = \"redis\"\n",
        &format!(
            "[connections.cache]\nserver = \"redis\"\ntracking = {{ redirect = \"inv\"{mode} }}\n"
        ),
    )
    .replace(
        "subscribe = { channel = \"inv\", invalidates = \"l1\" }",
        "subscribe = { invalidates = \"l1\" }",
    )
    .replace(
        "  { redis = { command = \"PUBLISH\", connection = \"writer\", channel = \"inv\", key = \"product\" } },\n",
        "",
    )
    .replace(
        "{ redis = { command = \"DEL\", connection = \"writer\", key = \"product\" }, on_error = \"fail\" },",
        "{ redis = { command = \"DEL\", connection = \"writer\", key = \"product\" } },",
    )
}

#[test]
fn default_tracking_forgets_a_key_its_own_set_wrote_and_bcast_does_not() {
    // Default mode remembers the keys a connection read, and a write of one sends one
    // invalidation and forgets the key. Pod a's first read misses L2 and SETs it: that write
    // is a's own, so a is told at once (before it fills its L1) and the key is forgotten. Its
    // L1 copy is then tracked by nothing: the update's DEL tells b and c (which read L2) but
    // not a, whose two reads after the update serve its stale copy.
    let report = run(&tracking(""));
    assert_eq!(report.summary.flows["read"].stale_reads, 2);
    assert_eq!(
        report.summary.connections["inv@0"].messages, 1,
        "its own SET only"
    );
    assert_eq!(report.summary.caches["l1@0"].invalidations, 0);
    for pod in [1, 2] {
        assert_eq!(report.summary.caches[&format!("l1@{pod}")].invalidations, 1);
    }
    // BCAST on the key's family sends every write to every pod, remembering nothing.
    let report = run(&tracking(", bcast = [\"product\"]"));
    assert_eq!(report.summary.flows["read"].stale_reads, 0);
    assert_eq!(db_reads(&report), 2);
    for pod in 0..3 {
        assert_eq!(report.summary.caches[&format!("l1@{pod}")].invalidations, 1);
    }
}

#[test]
fn a_publish_nobody_hears_and_a_subscriber_sending_commands_are_refused() {
    let misspelt = PODS.replace("channel = \"inv\", key", "channel = \"invv\", key");
    let message = outagelab_scenario_file::parse(&misspelt, Path::new("p.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("no connection subscribes to channel `invv`: did you mean `inv`?"),
        "{message}"
    );
    let sending = PODS.replace(
        "connection = \"writer\", channel",
        "connection = \"inv\", channel",
    );
    let message = outagelab_scenario_file::parse(&sending, Path::new("p.toml"))
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("`inv` is a subscriber: it sends no commands"),
        "{message}"
    );
}

/// The pods with the L1 `ttl_ms`, each subscriber flushing its L1 on reconnect or not (and
/// reconnecting within 20 ms of a cut's end), pod b's subscriber cut from `cut_at_ms` for
/// `cut_ms`, the update at `write_at_ms`, and reads round robin five a second per pod for 8 s.
fn cut_pods(ttl_ms: u64, flush: bool, cut_at_ms: u64, cut_ms: u64, write_at_ms: u64) -> String {
    let pods = PODS
        .replace("ttl = \"5s\"", &format!("ttl = \"{ttl_ms}ms\""))
        .replace(
            "subscribe = { channel = \"inv\", invalidates = \"l1\" }",
            &format!(
                "subscribe = {{ channel = \"inv\", invalidates = \"l1\", flush_on_reconnect = {flush} }}"
            ),
        )
        .replace(
            "[connections.inv]\nserver = \"redis\"\n",
            "[connections.inv]\nserver = \"redis\"\nreconnect_delay = \"10ms\"\nreconnect_delay_max = \"20ms\"\n",
        )
        .replace(
            "count = 1\nstart = \"1s\"",
            &format!("count = 1\nstart = \"{write_at_ms}ms\""),
        )
        .replace("rate = 10\ncount = 6\nstart = \"2s\"", "rate = 15\ncount = 120\nstart = \"0s\"");
    format!(
        "{pods}\n[run]\nhorizon = \"20s\"\n\n[faults.cut]\ntarget = \"inv@1\"\nkind = \"disconnect\"\n\
         at = \"{cut_at_ms}ms\"\nduration = \"{cut_ms}ms\"\n"
    )
}

proptest::proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(48))]

    /// Whenever the cut falls around the publish, with flush-on-reconnect no read is served
    /// from a copy out of date for longer than the L1 TTL (the article's ceiling), nor after
    /// pod b's subscriber is back: it reconnects within 20 ms of the cut's end and empties its
    /// L1, so no copy is older than that instant less the commit (the update's query answers
    /// 5 ms after it is sent; 10 ms of slack covers the other pods, whose message arrives a
    /// fraction of a millisecond after the commit). Without the flush, b keeps serving its
    /// copy until the TTL. Flushing never adds a stale read to what the same run without it
    /// serves.
    #[test]
    fn with_flush_on_reconnect_stale_reads_are_never_older_than_the_l1_ttl(
        ttl_ms in proptest::sample::select(vec![500u64, 1_000, 2_000, 5_000]),
        cut_at_ms in 0u64..3_000,
        cut_ms in 100u64..3_000,
        publish_into_cut in 0.0f64..1.0,
    ) {
        let write_at_ms = cut_at_ms + (publish_into_cut * cut_ms as f64) as u64;
        let flushing = run(&cut_pods(ttl_ms, true, cut_at_ms, cut_ms, write_at_ms));
        let read = &flushing.summary.flows["read"];
        if let Some(oldest) = read.stale_age_ms.max {
            proptest::prop_assert!(oldest <= ttl_ms as f64, "{oldest} ms > TTL {ttl_ms} ms");
            let back = (cut_at_ms + cut_ms + 20) as f64;
            let bound = (back - write_at_ms as f64).max(0.0) + 10.0;
            proptest::prop_assert!(oldest <= bound, "{oldest} ms, after the flush ({bound} ms)");
        }
        let keeping = run(&cut_pods(ttl_ms, false, cut_at_ms, cut_ms, write_at_ms));
        proptest::prop_assert!(read.stale_reads <= keeping.summary.flows["read"].stale_reads);
    }
}

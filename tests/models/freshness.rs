//! Data freshness: a database step with a `key` reads the key's committed version, one with
//! `write = true` commits the next; copies in Redis and in L1 caches carry the version they
//! were made from, and a read served from a copy older than the last commit is stale.
//! Checked against hand-computed runs.

use std::path::Path;

use outagelab_report::VariantReport;

const BASE: &str = r#"
[scenario]
name = "freshness"

[keys.product]
count = 1

[databases.main]
latency = "5ms"

[caches.l1]
max_entries = 100
max_bytes = "1MiB"
ttl = "10s"

[flows.read]
steps = [
  { cache = { name = "l1", op = "get", key = "product" }, on_hit = "finish" },
  { db = { name = "main", key = "product" }, on_error = "fail" },
  { cache = { name = "l1", op = "put", key = "product", value = "1KiB" } },
]

[flows.write]
steps = [{ db = { name = "main", key = "product", write = true } }]

[loads.readers]
flow = "read"
arrivals = "even"
rate = 10
count = 20

[loads.writer]
flow = "write"
arrivals = "burst"
count = 1
start = "500ms"
"#;

fn run(text: &str) -> VariantReport {
    let file = outagelab_scenario_file::parse(text, Path::new("freshness.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    outagelab_sim::run(&file.variants[0].scenario).unwrap()
}

#[test]
fn reads_from_an_l1_filled_before_a_commit_are_stale_until_it_is_refilled() {
    // The read at 0 ms misses, reads version 0 from the database and fills the L1; every
    // later read hits it. The write commits version 1 at 505 ms: the reads at 600 ... 1900 ms
    // (14 of them) serve version 0, out of date for 95 ... 1395 ms.
    let report = run(BASE);
    let read = &report.summary.flows["read"];
    assert_eq!(read.outcomes["ok"], 20);
    assert_eq!(read.stale_reads, 14);
    assert_eq!(read.stale_age_ms.count, 14);
    assert_eq!(read.stale_age_ms.min, Some(95.0));
    assert!(
        (1394.0..=1396.0).contains(&read.stale_age_ms.max.unwrap()),
        "{:?}",
        read.stale_age_ms
    );
    assert_eq!(report.summary.flows["write"].stale_reads, 0);
}

#[test]
fn a_short_ttl_bounds_staleness_and_no_write_means_nothing_is_stale() {
    // An L1 TTL of 300 ms: the copy made at 5 ms expires at 305 ms, so the read at 400 ms
    // misses and refills with version 0 at 405 ms (the write is still to come); the reads at
    // 600 and 700 ms hit that copy (out of date for 95 and 195 ms); it expires at 705 ms, and
    // the read at 800 ms reads version 1 from the database: fresh.
    let short = BASE.replace("ttl = \"10s\"", "ttl = \"300ms\"");
    let read = run(&short).summary.flows["read"].clone();
    assert_eq!(read.stale_reads, 2);
    assert_eq!(read.stale_age_ms.max, Some(195.0));
    let no_write = BASE.replace("count = 1\nstart", "count = 0\nstart");
    assert_eq!(run(&no_write).summary.flows["read"].stale_reads, 0);
}

//! Simulation speed on the seed-003 model: Redis dead (hung; every command times out after
//! 100 ms), a breaker around the cache read and a bulkhead of 20 (queue 50) in front of a 49-51 ms
//! database, 1,000,000 requests evenly spaced at 500/s (2,000 s of virtual time).
//!
//! Criterion reports the throughput in simulated requests per second of wall-clock time; the
//! README records the figure measured on the project's machine. Run with
//! `cargo bench --bench seed003_breaker_bulkhead`.

use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use outagelab_sim::scenario::{Arrivals, LoadEnd};

const REQUESTS: u64 = 1_000_000;

fn scenario() -> outagelab_sim::Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/redis-dead-protection.toml");
    let file = outagelab_scenario_file::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let variant = file
        .variants
        .into_iter()
        .find(|v| v.name == "timeout + breaker + DB bulkhead")
        .expect("the bundled scenario has the bulkhead variant");
    let mut scenario = variant.scenario;
    let load = &mut scenario.loads[0];
    let Arrivals::Even { rate, .. } = load.arrivals else {
        panic!("the bundled load is evenly spaced");
    };
    load.arrivals = Arrivals::Even {
        rate,
        end: LoadEnd::Count(REQUESTS),
    };
    scenario
}

fn seed003(c: &mut Criterion) {
    let scenario = scenario();
    let mut group = c.benchmark_group("seed003");
    group.throughput(Throughput::Elements(REQUESTS));
    group.sample_size(10);
    group.bench_function("breaker_bulkhead_1M_requests", |b| {
        b.iter(|| {
            let report = outagelab_sim::run(&scenario).expect("valid scenario");
            assert_eq!(report.summary.requests, REQUESTS);
            report
        })
    });
    group.finish();
}

criterion_group!(benches, seed003);
criterion_main!(benches);

//! The seed-003 model the benchmarks run, shared by the criterion bench
//! (`benches/seed003_breaker_bulkhead.rs`) and the instruction-count gate
//! (`examples/instructions.rs`): the bundled bulkhead variant of
//! `scenarios/redis-dead-protection.toml` at a given number of requests, with the database
//! latency as bundled (uniform) or exponential with the same mean.

use std::path::Path;

use outagelab_model::time::SimDuration;
use outagelab_sim::Scenario;
use outagelab_sim::scenario::{Arrivals, Distribution, LoadEnd};

/// The bundled bulkhead variant at `requests` requests.
pub fn bundled(requests: u64) -> Scenario {
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
        end: LoadEnd::Count(requests),
    };
    scenario
}

/// The latency models the benchmarks run: as bundled, and exponential with the same mean.
pub fn cases(requests: u64) -> Vec<(&'static str, Scenario)> {
    let uniform = bundled(requests);
    let mut exponential = uniform.clone();
    exponential.databases[0].latency = Distribution::Exponential {
        min: SimDuration::ZERO,
        mean: SimDuration::from_millis(50),
    };
    vec![("uniform", uniform), ("exponential", exponential)]
}

//! Simulation speed on the seed-003 model: Redis dead (hung; every command times out after
//! 100 ms), a breaker around the cache read and a bulkhead of 20 (queue 50) in front of the
//! database, 1,000,000 requests evenly spaced at 500/s (2,000 s of virtual time). Two database
//! latencies: uniform 49-51 ms as bundled, and exponential with a mean of 50 ms (the path that
//! takes a logarithm per query).
//!
//! Each is run by the engine (with its metrics) and by a hand-written loop of the same model
//! (`bespoke/`, no metrics): the loop is the speed of light, and the engine's throughput as a
//! fraction of it is the figure to watch. Before timing, the bench checks that both give the
//! same outcome counts. It prints one line per latency model from its own alternating runs,
//! then criterion measures each of the four, and the engine once more with same-instant ties
//! shuffled (`[run] ties = "shuffled"`). docs/performance.md records the figures measured
//! on the project's machine. Run with `cargo bench --bench seed003_breaker_bulkhead`.

mod bespoke;
mod seed003;

use std::time::{Duration, Instant};

use bespoke::{Model, Outcomes};
use criterion::{Criterion, SamplingMode, Throughput, criterion_group, criterion_main};
use outagelab_sim::Scenario;
use outagelab_sim::scenario::TieOrder;

const REQUESTS: u64 = 1_000_000;

/// Alternating runs of engine and loop behind each printed line.
const ROUNDS: usize = 5;

/// Runs the engine and returns its outcome counts, checking that nothing else happened.
fn engine(scenario: &Scenario) -> Outcomes {
    let report = outagelab_sim::run(scenario).expect("valid scenario");
    let summary = &report.summary;
    assert_eq!(summary.requests, REQUESTS);
    assert_eq!(summary.unfinished, 0);
    let count = |name: &str| summary.outcomes.get(name).copied().unwrap_or(0);
    let outcomes = Outcomes {
        ok: count("ok"),
        shed: count("shed"),
    };
    assert_eq!(
        outcomes.ok + outcomes.shed,
        REQUESTS,
        "{:?}",
        summary.outcomes
    );
    outcomes
}

fn seconds<T>(work: impl FnOnce() -> T) -> f64 {
    let start = Instant::now();
    std::hint::black_box(work());
    start.elapsed().as_secs_f64()
}

/// Million requests per second, given run times in seconds: (median, lowest, highest).
fn rates(times: &mut [f64]) -> (f64, f64, f64) {
    times.sort_by(f64::total_cmp);
    let rate = |t: f64| REQUESTS as f64 / t / 1e6;
    (
        rate(times[times.len() / 2]),
        rate(times[times.len() - 1]),
        rate(times[0]),
    )
}

/// Checks that engine and loop agree, then prints their throughput and its ratio from
/// `ROUNDS` alternating runs.
fn compare(name: &str, scenario: &Scenario, model: &Model, timed: bool) {
    let engine_outcomes = engine(scenario);
    let bespoke_outcomes = model.run();
    assert_eq!(
        engine_outcomes, bespoke_outcomes,
        "{name}: the engine and the hand-written loop disagree"
    );
    if !timed {
        return;
    }
    let (mut engine_times, mut bespoke_times) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        engine_times.push(seconds(|| engine(scenario)));
        bespoke_times.push(seconds(|| model.run()));
    }
    let ratios: Vec<f64> = engine_times
        .iter()
        .zip(&bespoke_times)
        .map(|(engine, bespoke)| bespoke / engine)
        .collect();
    let mut ratios_sorted = ratios.clone();
    ratios_sorted.sort_by(f64::total_cmp);
    let (engine_rate, engine_low, engine_high) = rates(&mut engine_times);
    let (bespoke_rate, bespoke_low, bespoke_high) = rates(&mut bespoke_times);
    println!(
        "seed003 {name}: engine {engine_rate:.2} M req/s ({engine_low:.2}-{engine_high:.2}), \
         bespoke loop {bespoke_rate:.2} M req/s ({bespoke_low:.2}-{bespoke_high:.2}), \
         engine/bespoke {:.3} ({:.3}-{:.3}); median of {ROUNDS} alternating runs; \
         {} ok, {} shed",
        ratios_sorted[ROUNDS / 2],
        ratios_sorted[0],
        ratios_sorted[ROUNDS - 1],
        engine_outcomes.ok,
        engine_outcomes.shed,
    );
}

fn seed003(c: &mut Criterion) {
    // Under `cargo test --benches` (no `--bench`), check agreement only.
    let timed = std::env::args().any(|arg| arg == "--bench");
    let cases: Vec<_> = seed003::cases(REQUESTS)
        .into_iter()
        .map(|(name, scenario)| {
            let model = Model::of(&scenario);
            assert_eq!(model.requests(), REQUESTS);
            (name, scenario, model)
        })
        .collect();
    for (name, scenario, model) in &cases {
        compare(name, scenario, model, timed);
    }
    let mut group = c.benchmark_group("seed003");
    group.throughput(Throughput::Elements(REQUESTS));
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (name, scenario, model) in &cases {
        group.bench_function(format!("engine_{name}_1M"), |b| b.iter(|| engine(scenario)));
        group.bench_function(format!("bespoke_{name}_1M"), |b| b.iter(|| model.run()));
    }
    // The cost of `[run] ties = "shuffled"` (a random draw per event scheduled), engine only:
    // the loop has no ties to shuffle.
    let (_, uniform, _) = (cases.iter())
        .find(|(name, _, _)| *name == "uniform")
        .expect("the bundled latency is a case");
    let mut shuffled = uniform.clone();
    shuffled.ties = TieOrder::Shuffled;
    group.bench_function("engine_uniform_ties_shuffled_1M", |b| {
        b.iter(|| engine(&shuffled))
    });
    group.finish();
}

criterion_group!(benches, seed003);
criterion_main!(benches);

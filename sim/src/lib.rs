//! A deterministic discrete-event simulator of services that lean on Redis and databases.
//!
//! Virtual time is an integer count of nanoseconds; randomness comes from per-entity streams
//! derived from one seed; nothing reads a clock. The same [`Scenario`] therefore always gives
//! the same [`VariantReport`](outagelab_report::VariantReport), byte for byte once serialised.
//!
//! - [`scenario`]: the validated description of a run;
//! - `kernel`: the event queue; `rng`: seeded streams and integer-only sampling;
//! - `redis`: servers (one thread, round-robin, faults) and multiplexed connections;
//! - `reconnect_slots`: seed 001's reconnect slots, driving `outagelab-model`'s slot over the
//!   links of `redis`;
//! - `throttles`: seed 004's cascade throttles and the KV stores they count in;
//! - [`open_loop`]: when an open loop's requests arrive (constant or staged rates), for both
//!   harnesses;
//! - `database`: queries with drawn latency, counted concurrency, optional degradation;
//! - `engine`: the event loop and request flows, each request an explicit stage;
//! - `actions`: the step actions (redis, db, lock, rate limit, cache, throttle, work), one
//!   module each, driven by the engine through one interface;
//! - `policies`: the policy layers a step passes, in its declared order, driven through one
//!   interface over the state machines of `outagelab-model`;
//! - [`rules`]: how a step's result reaches the policies (what a layer counts, what a retry
//!   tries again, what a refused store means) and what the harnesses count beside them: the
//!   one copy the simulator and the live runner (`outagelab-live`) both call;
//! - `monitors`: the invariants checked in every run;
//! - `metrics`: streaming counts, histograms and time series;
//! - [`budget`]: the process's memory budget, which every run charges.

mod actions;
pub mod budget;
mod callers;
mod database;
mod engine;
mod error;
mod http;
pub mod instances;
mod journal;
mod kernel;
mod metrics;
mod monitors;
mod observe;
pub mod open_loop;
mod policies;
mod reconnect_slots;
mod redis;
pub mod references;
mod rng;
pub mod rules;
pub mod scenario;
mod slowdowns;
mod step_layers;
pub mod summaries;
mod throttles;
mod trace;
mod versions;

pub use budget::{Account, MemoryBudget};
pub use engine::{
    BudgetedRun, Bugs, PROGRESS_EVERY_EVENTS, SENDS_AT_ONE_INSTANT_MAX, empty_metrics, run,
    run_in_budget, run_observed, run_traced, run_with_bugs, summary_shape,
};
pub use error::SimError;
pub use http::{HttpSpec, HttpTally};
pub use kernel::StepResult;
pub use metrics::{BUCKETS_MAX, CounterId, GaugeId, Metrics};
pub use monitors::{Invariant, Violation};
/// The seeded streams, for code that must draw what the simulator draws (the bench's
/// hand-written reference model).
pub use rng::{Stream, key_index};
pub use scenario::Scenario;
/// A step's layers driven by hand, for a test that holds the live runner's to the same
/// decisions.
pub use step_layers::StepLayers;
pub use trace::{TRACE_EVENTS_MAX, TRACED_REQUESTS_MAX};

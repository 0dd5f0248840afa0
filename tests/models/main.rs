//! Whole runs of scenario files, mechanism by mechanism: callers, closed loops, failover, freshness, instances, layers, locks, pub/sub, the bundled scenarios, seed 000, stages.
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

#[path = "../common/mod.rs"]
mod common;

mod callers;
mod closed_loops;
mod failover;
mod freshness;
mod instances;
mod layers;
mod locks;
mod pubsub;
mod scenarios;
mod seed000;
mod stages;

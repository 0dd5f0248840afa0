//! The fuzzer: campaigns, checks, findings, minimising.
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

mod campaign;
mod checks;
mod findings;
mod minimise;

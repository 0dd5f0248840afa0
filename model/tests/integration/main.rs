//! The policies against peer libraries' own test cases (conformance).
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod conformance_backoff;
mod conformance_gobreaker;
mod conformance_opossum;
mod conformance_polly;
mod conformance_resilience4j;

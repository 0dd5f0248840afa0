//! The live runner against a real `redis-server` on loopback.
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

mod calibrate;
mod run;
mod same_decisions;
mod seed001;
mod slot_waiting;

//! The simulator from outside: connections, databases, its layers, properties, reconnect slots, same-instant order, seed 003, throttles.
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

#[path = "../common/mod.rs"]
mod common;

mod connections;
mod databases;
mod layers;
mod properties;
mod reconnect_slots;
mod same_instant;
mod seed003;
mod throttles;

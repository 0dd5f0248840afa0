//! Live runs against a real `redis-server` on loopback (`outagelab live`, `calibrate`), compared with the simulation.
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

#[path = "../common/mod.rs"]
mod common;

mod calibrate;
mod live;
mod live_fit;
mod live_hol;
mod live_outage;
mod live_pause;
mod live_policies;
mod live_retry_storm;

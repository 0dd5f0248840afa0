//! Resilience policies, written once, as sans-IO state machines.
//!
//! Every policy here takes the current virtual time as an argument (`now`) and returns a
//! decision; none reads a clock, sleeps, spawns a thread or does I/O. The simulator (`sim/`)
//! drives them in virtual time; the concurrent forms in [`concurrent`] wrap the very same state
//! machines behind the primitives of one [`sync`] module, which switches to loom's
//! types under `cfg(loom)` so that every interleaving of the concurrent forms can be checked.
//!
//! Architecture invariant: this crate depends on no other crate of the workspace, and nothing in
//! it reads a clock or owns a thread.

pub mod adaptive_limit;
pub mod backoff;
pub mod breaker;
pub mod bulkhead;
pub mod cache;
pub mod concurrent;
pub mod config;
pub mod lock;
pub mod presets;
pub mod random;
pub mod rate_limit;
pub mod reconnect;
pub mod retry;
pub mod semaphore;
pub mod throttle;
pub mod time;

mod instance;
mod sync;
mod window;

pub use config::ConfigError;
pub use time::{SimDuration, SimTime};

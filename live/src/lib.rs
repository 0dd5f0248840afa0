//! The model's policies on tokio against a real Redis: thin async wrappers, no second
//! implementation.
//!
//! Each wrapper holds the very state machine the simulator drives (`outagelab_model`) and adds
//! only what a runtime needs: a clock, waiting, the connection handles, and guards that report
//! to the model when a future is dropped.
//!
//! - [`slot::LiveSlot`]: seed 001's reconnect slot ([`outagelab_model::reconnect::ReconnectSlot`])
//!   owning a `redis` multiplexed connection per generation;
//! - [`breaker::LiveBreaker`]: the circuit breaker ([`outagelab_model::breaker::Breaker`]) as a
//!   guard around a call;
//! - [`semaphore::LiveSemaphore`]: the semaphore by count and bytes
//!   ([`outagelab_model::semaphore::SharedSemaphore`]) with an RAII permit;
//! - [`bulkhead::LiveBulkhead`]: the bulkhead ([`outagelab_model::bulkhead::Bulkhead`]), a
//!   queued caller parked until the model hands it a released permit;
//! - [`retry::LiveRetry`]: the retry policy with its budget
//!   ([`outagelab_model::retry::RetryPolicy`]), sleeping until each retry's instant;
//! - [`rate_limit::LiveRateLimiter`]: the rate limiter
//!   ([`outagelab_model::rate_limit::RateLimiter`]);
//! - [`throttle::LiveThrottle`]: seed 004's cascade throttle, atomic form
//!   ([`outagelab_model::throttle::AtomicThrottle`]), with a slot guard;
//! - [`run`]: a scenario's variant run in wall-clock time against a real server (`outagelab
//!   live`), ending within its horizon plus [`run::GRACE`] and keeping its report whatever
//!   the server does ([`run::survive`]);
//! - [`calibrate`]: what a simulated connection's `latency` and `bandwidth`, and its client
//!   loop's `write_rate`, mean on this machine, measured on real connections (`outagelab
//!   calibrate`).
//!
//! # Plain async functions, not tower
//!
//! The wrappers are plain methods (`lease`, `query`, `call`, `run`) rather than tower
//! `Layer`/`Service`s. tower's contract is `poll_ready` then `call` on a request type, which
//! fits middleware in front of a service that takes requests; these policies sit in front of
//! Redis commands inside a handler, decide at once (fail open, refuse, lease), and must report
//! back with an outcome the caller classifies. A `Service` form would add the `tower`
//! dependency and a request/response type per command for no decision of its own; a caller
//! who wants one can wrap a method in `tower::service_fn` in a few lines.
//!
//! # Time
//!
//! Architecture invariant: this crate is the only one in the workspace that reads a clock for
//! a policy decision, and only in [`clock`]: [`clock::TokioClock`] maps tokio's monotonic
//! `Instant` since its start to the model's `SimTime`. Every wrapper takes its `now` from a
//! [`clock::Clock`], so tests can substitute a [`clock::ManualClock`] and feed the wrapper the
//! instants they feed the model.

pub mod adaptive_limit;
pub mod breaker;
pub mod bulkhead;
pub mod cache;
pub mod calibrate;
pub mod clock;
pub mod forwarder;
pub mod rate_limit;
pub mod retry;
pub mod run;
pub mod semaphore;
pub mod slot;
pub mod testing;
pub mod throttle;

pub use adaptive_limit::LiveAdaptiveLimit;
pub use breaker::LiveBreaker;
pub use bulkhead::LiveBulkhead;
pub use cache::LiveCache;
pub use clock::{Clock, ManualClock, TokioClock};
pub use rate_limit::LiveRateLimiter;
pub use retry::LiveRetry;
pub use semaphore::LiveSemaphore;
pub use slot::{LiveSlot, QueryError, RedisConnector, Unavailable};
pub use throttle::LiveThrottle;

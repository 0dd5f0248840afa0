//! Scenario fuzzing: generated and mutated scenario files, each run as `outagelab run`
//! runs it, its JSON report checked against the invariants every report must hold, and what
//! fails minimised.
//!
//! - [`generate`](mod@generate): a structure-aware generator covering every resource kind,
//!   fault kind, step action and policy kind, now and then with absurd values;
//! - [`mutate`](mod@mutate): byte- and token-level mutation of the bundled `scenarios/*.toml`;
//! - [`check`](mod@check): the report's invariants (conservation, limits, percentiles
//!   ordered, summary = series);
//! - [`minimise`](mod@minimise): a greedy minimiser (tables, lines, parts of lines, numbers);
//! - [`run`]: one input in this process, classified;
//! - [`campaign`]: many inputs in worker processes that an abort or a hang cannot take down,
//!   the report, the findings.
//!
//! Architecture invariant: nothing here is used by the other crates; it drives the reader and
//! the simulator only through their public API, as the command line does.

pub mod campaign;
pub mod check;
pub mod generate;
pub mod minimise;
pub mod mutate;
pub mod rng;
pub mod run;

pub use check::{Violation, check};
pub use generate::generate;
pub use minimise::minimise;
pub use mutate::mutate;

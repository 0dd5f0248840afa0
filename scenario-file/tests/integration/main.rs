//! The scenario file reader: command tables, differences, invalid files, limits, references, status classes, sweeps.
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

mod command_tables;
mod differences;
mod docs_tables;
mod fault_keys;
mod invalid;
mod limits;
mod references;
mod status_classes;
mod sweeps;

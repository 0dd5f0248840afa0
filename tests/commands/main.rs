//! The command line as a user meets it: every command, its output files, its reports and its messages.
//!
//! One test binary for these files (cargo's `tests/<name>/main.rs`): each file is a
//! module, so they are compiled and linked once, not once each.

#[path = "../common/mod.rs"]
mod common;

mod architecture;
mod cli;
mod explore;
mod fit;
mod function_lengths;
mod generated_commands;
mod html;
mod map;
mod memory;
mod monitors;
mod observed;
mod study;
mod trace;
mod tune;

//! Why a run could not produce a report.

use std::fmt;

use crate::monitors::Violation;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// A cross-reference of the scenario does not resolve (a reference past the end of its
    /// list, two policies of one kind on a step). The scenario file reader never builds one.
    BrokenReference(String),
    /// A monitor saw something that must never happen; the run stopped there.
    InvariantViolated(Violation),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimError::BrokenReference(message) => write!(f, "broken scenario: {message}"),
            SimError::InvariantViolated(violation) => violation.fmt(f),
        }
    }
}

impl std::error::Error for SimError {}

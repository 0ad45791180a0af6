//! Scenarios with exactly known chains (owned by the engine work).
use super::Scenario;
pub(super) fn scenarios() -> Vec<Scenario> { Vec::new() }

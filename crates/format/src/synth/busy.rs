//! Busy-server mix (owned by the format work).
use super::Scenario;
pub(super) fn scenarios() -> Vec<Scenario> { Vec::new() }

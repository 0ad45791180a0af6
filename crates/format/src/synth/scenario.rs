//! What a scenario is and what it is given (shared by the exact and the busy scenarios).

use crate::{Result, TraceSink};

/// Parameters common to all scenarios.
#[derive(Clone, Debug)]
pub struct SynthParams {
    /// Approximate number of events wanted (scenarios with a fixed script may repeat it
    /// to get there; each documents what it does with it).
    pub events: u64,
    /// Seed for anything random.
    pub seed: u64,
}

impl Default for SynthParams {
    fn default() -> Self {
        SynthParams {
            events: 10_000,
            seed: 1,
        }
    }
}

/// A named scenario.
pub struct Scenario {
    /// Name used by `chainrec synth --scenario`.
    pub name: &'static str,
    /// One-line description (what chain it contains).
    pub about: &'static str,
    /// Writes the scenario's metadata is the caller's; this writes tables and events.
    pub generate: fn(&SynthParams, &mut dyn TraceSink) -> Result<()>,
}

//! Synthetic traces: scenarios with exactly known chains and timings, and a busy-server
//! mix that scales to 100 M+ events for benchmarks. Deterministic for a seed.

use crate::{RecordingMeta, Result, StackMode, TraceSink};

mod busy;
mod exact;

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

/// All scenarios, exact ones first.
pub fn scenarios() -> Vec<Scenario> {
    let mut all = exact::scenarios();
    all.extend(busy::scenarios());
    all
}

/// Find a scenario by name.
pub fn find(name: &str) -> Option<Scenario> {
    scenarios().into_iter().find(|s| s.name == name)
}

/// Adjust `meta` to what scenario `name` simulates (CPU count, stack policy, start time),
/// for callers that build their own metadata. Scenarios without such facts leave it as is.
pub fn adjust_meta(name: &str, meta: &mut RecordingMeta) {
    if name == "busy-server" {
        meta.cpu_count = busy::CPUS;
        meta.stack_mode = StackMode::Lazy;
        meta.stack_threshold_ns = busy::STACK_THRESHOLD_NS;
        meta.start_ns = busy::T0;
    }
}

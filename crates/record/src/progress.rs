//! Where the recording thread is in its loop, so that a stop that takes long explains
//! itself (`record` says which step the recording thread has been in, and for how long,
//! when it has not finished a few seconds after the stop).

use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// A step of the recording thread's loop (`consumer.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ConsumerStep {
    /// Loading and attaching the BPF programs.
    Starting = 0,
    /// Waiting for the ring buffer (and consuming what it holds).
    Polling,
    /// Consuming the ring buffer.
    Consuming,
    /// Reading new mappings of processes (perf records, `/proc`).
    Mappings,
    /// Converting raw records into events (unwinding user stacks).
    Converting,
    /// Writing new table entries.
    Tables,
    /// Reading the BPF counters.
    Counters,
    /// Reordering events into the output.
    Draining,
    /// Flushing the output file.
    Flushing,
    /// Resolving new symbols.
    Symbolizing,
    /// Detaching the BPF programs.
    Detaching,
    /// Writing the end of the file.
    Finishing,
}

impl ConsumerStep {
    const ALL: [ConsumerStep; 12] = [
        ConsumerStep::Starting,
        ConsumerStep::Polling,
        ConsumerStep::Consuming,
        ConsumerStep::Mappings,
        ConsumerStep::Converting,
        ConsumerStep::Tables,
        ConsumerStep::Counters,
        ConsumerStep::Draining,
        ConsumerStep::Flushing,
        ConsumerStep::Symbolizing,
        ConsumerStep::Detaching,
        ConsumerStep::Finishing,
    ];

    fn name(self) -> &'static str {
        match self {
            ConsumerStep::Starting => "starting",
            ConsumerStep::Polling => "polling the ring buffer",
            ConsumerStep::Consuming => "consuming the ring buffer",
            ConsumerStep::Mappings => "reading process mappings",
            ConsumerStep::Converting => "converting records (unwinding user stacks)",
            ConsumerStep::Tables => "writing tables",
            ConsumerStep::Counters => "reading BPF counters",
            ConsumerStep::Draining => "reordering events into the file",
            ConsumerStep::Flushing => "flushing the file",
            ConsumerStep::Symbolizing => "resolving symbols",
            ConsumerStep::Detaching => "detaching the BPF programs",
            ConsumerStep::Finishing => "finishing the file",
        }
    }
}

/// The recording thread's step, when it entered it and how many loops it has made;
/// written by that thread, read by any (relaxed atomics: a snapshot may mix two
/// neighbouring steps' values, which is fine for a message).
#[derive(Debug)]
pub struct ConsumerProgress {
    base: Instant,
    step: AtomicU8,
    since_ns: AtomicU64,
    loops: AtomicU64,
}

impl Default for ConsumerProgress {
    fn default() -> Self {
        ConsumerProgress {
            base: Instant::now(),
            step: AtomicU8::new(ConsumerStep::Starting as u8),
            since_ns: AtomicU64::new(0),
            loops: AtomicU64::new(0),
        }
    }
}

impl ConsumerProgress {
    /// The recording thread enters `step`.
    pub(crate) fn enter(&self, step: ConsumerStep) {
        self.since_ns
            .store(self.base.elapsed().as_nanos() as u64, Ordering::Relaxed);
        self.step.store(step as u8, Ordering::Relaxed);
    }

    /// The recording thread starts another loop.
    pub(crate) fn next_loop(&self) {
        self.loops.fetch_add(1, Ordering::Relaxed);
    }

    /// Where the recording thread is now.
    pub fn snapshot(&self) -> ProgressSnapshot {
        let step = ConsumerStep::ALL
            .get(self.step.load(Ordering::Relaxed) as usize)
            .copied()
            .unwrap_or(ConsumerStep::Starting);
        let since = Duration::from_nanos(self.since_ns.load(Ordering::Relaxed));
        ProgressSnapshot {
            step,
            in_step: self.base.elapsed().saturating_sub(since),
            loops: self.loops.load(Ordering::Relaxed),
        }
    }
}

/// Where the recording thread was at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgressSnapshot {
    /// Its step.
    pub step: ConsumerStep,
    /// How long it has been in that step.
    pub in_step: Duration,
    /// Loops made since the recording started.
    pub loops: u64,
}

impl fmt::Display for ProgressSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} for {:.1} s (loop {})",
            self.step.name(),
            self.in_step.as_secs_f64(),
            self.loops
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_names_the_step_entered_last() {
        let p = ConsumerProgress::default();
        assert_eq!(p.snapshot().step, ConsumerStep::Starting);
        p.next_loop();
        p.enter(ConsumerStep::Symbolizing);
        let s = p.snapshot();
        assert_eq!((s.step, s.loops), (ConsumerStep::Symbolizing, 1));
        assert!(s
            .to_string()
            .starts_with("resolving symbols for 0.0 s (loop 1)"));
        for (i, step) in ConsumerStep::ALL.iter().enumerate() {
            assert_eq!(*step as usize, i, "ALL is in discriminant order");
        }
    }
}

//! Checkpoints: the engine's whole state at chunk boundaries, so that a run whose window
//! starts late in a trace resumes near the window instead of decoding from the first
//! chunk, with a result identical to the whole decode (docs/ENGINE.md "Checkpoints").
//!
//! Why a copy of the whole state, not a few events replayed: a window selects the waits
//! that *end* in it, and such a wait's chain follows its wakers' own waits back to any
//! time (a wait that began long before the window, its waker's cause before that): the
//! hop graph, dedup decisions, run-queue histories and sample histories before the window
//! all shape the result. What makes a copy exact: before the window nothing passes a
//! window-only filter (a wait matches by its end time, and every wait that ended before
//! the checkpoint ended before the window), so the engine's state at the checkpoint is
//! the same whatever window the run has, provided the rest of its setup is the same.

use crate::{Engine, Filter, Mode, OnCpuMode};
use std::sync::atomic::{AtomicU64, Ordering};

/// What of a run's setup shapes the engine's state (all of it but the window, which
/// selects nothing before a checkpoint it is used after).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SetupKey {
    pub(crate) mode: Mode,
    pub(crate) max_depth: usize,
    pub(crate) dedup: bool,
    pub(crate) runqueue: bool,
    pub(crate) oncpu: OnCpuMode,
    pub(crate) cgroup_frames: bool,
}

/// The filter of the run that takes checkpoints: a window no event reaches, so nothing
/// matches, exactly as nothing before a real window matches.
pub(crate) fn checkpoint_filter() -> Filter {
    Filter {
        window: Some((u64::MAX, u64::MAX)),
        ..Filter::default()
    }
}

/// Whether a run with `filter` may resume from a checkpoint: a window and nothing else
/// that selects (the duration rule only picks a wait's end; with no window nothing is
/// skipped anyway). Thread, state and duration-bound filters decide on waits before the
/// window too, and would need their own checkpoints.
pub(crate) fn window_start(filter: &Filter) -> Option<u64> {
    let rest = Filter {
        window: None,
        ..filter.clone()
    };
    match filter.window {
        Some((a, _)) if rest.is_empty() => Some(a),
        _ => None,
    }
}

/// One checkpoint: the engine after the chunks before `chunk`.
pub(crate) struct Point {
    /// The first chunk not yet processed.
    pub(crate) chunk: usize,
    /// The latest event time processed (a window starting after it may resume here).
    pub(crate) last_ns: u64,
    pub(crate) engine: Engine<'static>,
}

/// Checkpoints of one trace for one setup ([`crate::Analysis::checkpoints`]), used by
/// [`crate::Analysis::fold_from`].
pub struct Checkpoints {
    pub(crate) key: SetupKey,
    pub(crate) points: Vec<Point>,
    resumed: AtomicU64,
    from_start: AtomicU64,
}

impl Checkpoints {
    pub(crate) fn new(key: SetupKey, points: Vec<Point>) -> Checkpoints {
        Checkpoints {
            key,
            points,
            resumed: AtomicU64::new(0),
            from_start: AtomicU64::new(0),
        }
    }

    /// Number of checkpoints.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when there is none (a trace shorter than the spacing).
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// The first chunk of each checkpoint and the latest event time before it.
    pub fn chunks(&self) -> Vec<(usize, u64)> {
        self.points.iter().map(|p| (p.chunk, p.last_ns)).collect()
    }

    /// Bytes of each part of checkpoint `index`'s engine state, measured with `heap()`
    /// (allocated bytes; see the `checkpoint_memory` example); None past the last.
    #[doc(hidden)]
    pub fn part_bytes(
        &self,
        index: usize,
        heap: &dyn Fn() -> usize,
    ) -> Option<Vec<(&'static str, usize)>> {
        self.points.get(index).map(|p| p.engine.part_bytes(heap))
    }

    /// Runs resumed from a checkpoint, and runs that decoded from the first chunk (no
    /// checkpoint before their window, another setup, or a filter other than a window).
    pub fn uses(&self) -> (u64, u64) {
        (
            self.resumed.load(Ordering::Relaxed),
            self.from_start.load(Ordering::Relaxed),
        )
    }

    /// The latest checkpoint a run with the setup `key` and `filter` decoding chunks up
    /// to `end` may resume from, counted either way.
    pub(crate) fn pick(&self, key: SetupKey, filter: &Filter, end: usize) -> Option<&Point> {
        let found = window_start(filter).and_then(|a| {
            if key != self.key {
                return None;
            }
            self.points
                .iter()
                .rev()
                .find(|p| p.last_ns < a && p.chunk <= end)
        });
        let counter = if found.is_some() {
            &self.resumed
        } else {
            &self.from_start
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }
}

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

use crate::analyses::timeline::Timeline;
use crate::{Engine, Filter, Mode, OnCpuMode};
use chainrec_format::Tid;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

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
    pub(crate) process_frames: bool,
}

/// The filter of the run that takes checkpoints: a window no event reaches, so nothing
/// matches, exactly as nothing before a real window matches.
pub(crate) fn checkpoint_filter() -> Filter {
    Filter {
        window: Some((u64::MAX, u64::MAX)),
        ..Filter::default()
    }
}

/// Whether a run with `filter` may resume from a checkpoint, and from which time on: a
/// filter with a window (thread, state and duration rules beside it included). Every rule
/// is consulted only through `Filter::matches`, which the window fails for every wait that
/// ended before it, so before the window the run selects nothing, as the checkpoint pass
/// did. Without a window a run decodes from the start.
pub(crate) fn window_start(filter: &Filter) -> Option<u64> {
    filter.window.map(|(a, _)| a)
}

impl SetupKey {
    /// Whether checkpoints taken with `self` serve a run set up as `run`: all equal but
    /// dedup and the frames above the thread, which act only on selected waits (none
    /// before the window): dedup's marks, and the group node given at emission.
    pub(crate) fn serves(&self, run: &SetupKey) -> bool {
        SetupKey {
            dedup: run.dedup,
            cgroup_frames: run.cgroup_frames,
            process_frames: run.process_frames,
            ..*self
        } == *run
    }
}

/// One checkpoint: the engine after the chunks before `chunk`.
pub(crate) struct Point {
    /// The first chunk not yet processed.
    pub(crate) chunk: usize,
    /// The latest event time processed (a window starting after it may resume here).
    pub(crate) last_ns: u64,
    /// Behind a lock only because the engine is not `Sync` (caches in `Cell`s): runs
    /// clone it under the lock, checkpoints being taken on another thread meanwhile.
    engine: Mutex<Engine<'static>>,
    /// The critical-path timelines that changed since the checkpoint before, by tid
    /// (`critpath::Timelines`).
    timelines: Vec<(Tid, Timeline)>,
}

impl Point {
    pub(crate) fn new(
        chunk: usize,
        last_ns: u64,
        engine: Engine<'static>,
        timelines: Vec<(Tid, Timeline)>,
    ) -> Point {
        Point {
            chunk,
            last_ns,
            engine: Mutex::new(engine),
            timelines,
        }
    }

    /// The checkpoint's engine, locked.
    pub(crate) fn engine(&self) -> std::sync::MutexGuard<'_, Engine<'static>> {
        // A panic while cloning left the engine as it was: it is only read.
        self.engine.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether thread `tid` had an event between the checkpoint before and this one (its
    /// critical-path timeline changed): if not, a scan of it reads nothing there.
    pub(crate) fn touched(&self, tid: Tid) -> bool {
        self.timelines
            .binary_search_by_key(&tid, |&(t, _)| t)
            .is_ok()
    }
}

/// Checkpoints of one trace for one setup ([`crate::Analysis::checkpoints`]), used by
/// [`crate::Analysis::fold_from`]. They may be taken on one thread while runs on others
/// resume from those taken so far ([`crate::Analysis::take_checkpoints`]): each point is
/// exact on its own, so a run that finds fewer only decodes more.
pub struct Checkpoints {
    pub(crate) key: SetupKey,
    points: RwLock<Vec<Arc<Point>>>,
    /// The pass that takes them has ended (all taken, or it failed).
    complete: AtomicBool,
    resumed: AtomicU64,
    from_start: AtomicU64,
    /// Spans between checkpoints that critical paths did not read (`critpath`).
    skipped: AtomicU64,
}

impl Checkpoints {
    pub(crate) fn new(key: SetupKey) -> Checkpoints {
        Checkpoints {
            key,
            points: RwLock::default(),
            complete: AtomicBool::new(false),
            resumed: AtomicU64::new(0),
            from_start: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
        }
    }

    /// The points so far (a panic elsewhere while holding the lock left the list whole:
    /// points are only pushed).
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<Point>>> {
        self.points.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn push(&self, point: Point) {
        let mut points = self.points.write().unwrap_or_else(|e| e.into_inner());
        points.push(Arc::new(point));
    }

    pub(crate) fn set_complete(&self) {
        self.complete.store(true, Ordering::Release);
    }

    /// True once the pass taking them has ended (always for [`crate::Analysis::checkpoints`]).
    pub fn is_complete(&self) -> bool {
        self.complete.load(Ordering::Acquire)
    }

    /// Number of checkpoints (so far).
    pub fn len(&self) -> usize {
        self.read().len()
    }

    /// True when there is none (a trace shorter than the spacing).
    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// The first chunk of each checkpoint and the latest event time before it.
    pub fn chunks(&self) -> Vec<(usize, u64)> {
        self.read().iter().map(|p| (p.chunk, p.last_ns)).collect()
    }

    /// Bytes of each part of checkpoint `index`'s engine state, measured with `heap()`
    /// (allocated bytes; see the `checkpoint_memory` example); None past the last.
    #[doc(hidden)]
    pub fn part_bytes(
        &self,
        index: usize,
        heap: &dyn Fn() -> usize,
    ) -> Option<Vec<(&'static str, usize)>> {
        self.read().get(index).map(|p| p.engine().part_bytes(heap))
    }

    /// Runs resumed from a checkpoint, and runs that decoded from the first chunk (no
    /// checkpoint before their window, another setup, or no window).
    pub fn uses(&self) -> (u64, u64) {
        (
            self.resumed.load(Ordering::Relaxed),
            self.from_start.load(Ordering::Relaxed),
        )
    }

    /// Spans between two checkpoints that critical paths skipped, none of their threads
    /// having an event there (tests show that the skipping is exercised).
    #[doc(hidden)]
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }

    pub(crate) fn count_skipped(&self, n: u64) {
        self.skipped.fetch_add(n, Ordering::Relaxed);
    }

    /// The points taken so far, for a run with the setup `key` (none when they do not
    /// serve it).
    pub(crate) fn points_for(&self, key: SetupKey) -> Vec<Arc<Point>> {
        if self.key.serves(&key) {
            self.read().clone()
        } else {
            Vec::new()
        }
    }

    /// The latest checkpoint a run with the setup `key` and `filter` decoding chunks up
    /// to `end` may resume from, counted either way.
    pub(crate) fn pick(&self, key: SetupKey, filter: &Filter, end: usize) -> Option<Arc<Point>> {
        match window_start(filter) {
            Some(a) => self.latest_before(key, a, end).map(|(_, p)| p),
            None => {
                self.from_start.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The latest checkpoint before `a` among those a run decoding chunks up to `end`
    /// may resume from, with its index, for a run of the setup `key` (critical paths:
    /// their own filter, see `critpath`); counted either way.
    pub(crate) fn latest_before(
        &self,
        key: SetupKey,
        a: u64,
        end: usize,
    ) -> Option<(usize, Arc<Point>)> {
        let found = self
            .key
            .serves(&key)
            .then(|| {
                let points = self.read();
                points
                    .iter()
                    .enumerate()
                    .rev()
                    .find(|(_, p)| p.last_ns < a && p.chunk <= end)
                    .map(|(i, p)| (i, Arc::clone(p)))
            })
            .flatten();
        let counter = if found.is_some() {
            &self.resumed
        } else {
            &self.from_start
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Thread `tid`'s critical-path timeline at checkpoint `index` (`None`: no event of it
    /// before): the newest of the changes kept at that checkpoint and those before it.
    pub(crate) fn timeline(&self, index: usize, tid: Tid) -> Option<Timeline> {
        let points = self.read();
        points[..=index.min(points.len().saturating_sub(1))]
            .iter()
            .rev()
            .find_map(|p| {
                p.timelines
                    .binary_search_by_key(&tid, |&(t, _)| t)
                    .ok()
                    .map(|i| p.timelines[i].1)
            })
    }
}

/// A run's cancellation: set from another thread (a newer request of the same page, in
/// `chainrec serve`), the run stops after the chunk it is in with
/// [`crate::ChainError::Cancelled`]. Clones share the flag.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A flag not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Ask the runs holding this flag to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`Cancel::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once cancelled: checked after each chunk.
    pub(crate) fn check(cancel: Option<&Cancel>) -> Result<(), crate::ChainError> {
        match cancel {
            Some(c) if c.is_cancelled() => Err(crate::ChainError::Cancelled),
            _ => Ok(()),
        }
    }

    /// Whether two flags are the same one.
    pub fn same(&self, other: &Cancel) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

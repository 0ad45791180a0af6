//! Each thread's finished blocked waits, kept as far back as an open wait can ask: a
//! chain level whose waker blocked inside the root's wait before the wait the chain
//! follows shows those earlier waits as branches of the wakeup DAG (CHAINS.md,
//! "Attribution"; docs/ENGINE.md, "Earlier waits").

use crate::engine::ids::HopId;
use chainrec_format::StackId;
use std::collections::VecDeque;

/// A blocked wait of a thread that has ended (the thread was switched in again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PastWait {
    /// Switch-out (the trace start for a wait that began before the trace).
    pub(crate) start: u64,
    /// End of the blocked part: the waking, or the switch-in when no waking was seen.
    pub(crate) end: u64,
    /// The waking that ended it (`None`: no waking in the trace, so its cause is unknown).
    pub(crate) hop: Option<HopId>,
    /// The thread's off-CPU stacks of it.
    pub(crate) kstack: StackId,
    pub(crate) ustack: StackId,
}

/// Past waits per task slot (parallel to the engine's tasks), oldest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct PastWaits {
    per_task: Vec<VecDeque<PastWait>>,
    /// Entries kept over all tasks.
    kept: usize,
    /// Trim when `kept` reaches this (a quarter more than after the last trim).
    trim_at: usize,
    /// Most entries kept at once.
    pub(crate) peak: usize,
}

/// First trim point: below this many entries the lists are not trimmed.
const FIRST_TRIM: usize = 1 << 16;

impl PastWaits {
    /// Task slot `t`'s wait `w` has ended (waits end in time order per thread).
    #[inline]
    pub(crate) fn push(&mut self, t: usize, w: PastWait) {
        if self.per_task.len() <= t {
            self.per_task.resize_with(t + 1, VecDeque::new);
        }
        self.per_task[t].push_back(w);
        self.kept += 1;
        self.peak = self.peak.max(self.kept);
    }

    /// The lazily captured stacks of task slot `t`'s wait that began at `start` arrived.
    #[inline]
    pub(crate) fn set_stacks(&mut self, t: usize, start: u64, k: StackId, u: StackId) {
        if let Some(w) = self
            .per_task
            .get_mut(t)
            .and_then(|l| l.back_mut())
            .filter(|w| w.start == start)
        {
            if k != StackId::NONE {
                w.kstack = k;
            }
            if u != StackId::NONE {
                w.ustack = u;
            }
        }
    }

    /// Task slot `t` is freed (its thread ended).
    pub(crate) fn clear_task(&mut self, t: usize) {
        if let Some(l) = self.per_task.get_mut(t) {
            self.kept -= l.len();
            *l = VecDeque::new();
        }
    }

    /// Time to trim ([`Self::trim`])?
    #[inline]
    pub(crate) fn needs_trim(&self) -> bool {
        self.kept >= self.trim_at.max(FIRST_TRIM)
    }

    /// Drop every wait whose blocked part ended at or before `waits_from` (the oldest
    /// switch-out of a blocked wait not yet woken, or now): no chain walked from now on
    /// asks about time before it (docs/ENGINE.md, "How far back the histories reach").
    pub(crate) fn trim(&mut self, waits_from: u64) {
        for l in &mut self.per_task {
            let n = l.partition_point(|w| w.end <= waits_from);
            if n > 0 {
                l.drain(..n);
                self.kept -= n;
                if l.capacity() > 4 * l.len().max(4) {
                    l.shrink_to(2 * l.len());
                }
            }
        }
        self.trim_at = self.kept + self.kept / 4;
    }

    /// Every hop a past wait refers to (for the hop arena's GC).
    pub(crate) fn hops(&self) -> impl Iterator<Item = HopId> + '_ {
        self.per_task.iter().flatten().filter_map(|w| w.hop)
    }

    /// Task slot `t`'s waits whose blocked part overlaps `[x, y)`, oldest first.
    #[inline]
    pub(crate) fn overlapping(
        &self,
        t: usize,
        x: u64,
        y: u64,
    ) -> impl Iterator<Item = &PastWait> + '_ {
        let l = self.per_task.get(t);
        let from = l.map_or(0, |l| l.partition_point(|w| w.end <= x));
        l.into_iter()
            .flat_map(move |l| l.range(from..))
            .take_while(move |w| w.start < y)
    }
}

//! Each thread's finished blocked waits, kept as far back as an open wait can ask: a
//! chain level whose waker blocked inside the root's wait before the wait the chain
//! follows shows those earlier waits as branches of the wakeup DAG (CHAINS.md,
//! "Attribution"; docs/ENGINE.md, "Earlier waits").

use crate::engine::ids::HopId;
use crate::engine::nodes::NodeId;
use crate::engine::search::gallop_back;
use chainrec_format::{StackId, Tid, WakeContext};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// A blocked wait of a thread that has ended (the thread was switched in again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PastWait {
    /// Switch-out (the trace start for a wait that began before the trace).
    pub(crate) start: u64,
    /// End of the blocked part: the waking, or the switch-in when no waking was seen.
    pub(crate) end: u64,
    /// The waking that ended it, when a thread woke it and it is among the thread's last
    /// [`HOP_LINKS`] waits (`None` with `metal` `None`: not followed).
    pub(crate) hop: Option<HopId>,
    /// The interrupt (or idle task) that ended it: kept by value, so that such waits,
    /// the most numerous, pin no hop.
    pub(crate) metal: Option<MetalEnd>,
    /// The thread's off-CPU stacks of it.
    pub(crate) kstack: StackId,
    pub(crate) ustack: StackId,
}

/// Past waits kept over all threads: a thread keeps at most this divided by the threads
/// that have any (within [`MIN_PER_THREAD`], [`MAX_PER_THREAD`]), its oldest dropped
/// first; time before its oldest kept wait is counted as not checked
/// (`Stats::past_unchecked_ns`) rather than split into running time. Bounds what one long
/// sleeper pins: 24 MiB of entries, whatever the number of threads.
pub(crate) const PAST_BUDGET: usize = 1 << 20;
/// A thread's kept waits when many threads have some.
pub(crate) const MIN_PER_THREAD: usize = 256;
/// A thread's kept waits when few do (a 1 ms timer thread over 4 s).
pub(crate) const MAX_PER_THREAD: usize = 4096;

/// What a metal hop's record needs (`Hop::record` of a metal hop).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct MetalEnd {
    pub(crate) node: NodeId,
    pub(crate) kstack: StackId,
    /// The interrupted task (0 = idle).
    pub(crate) waker_tid: Tid,
    pub(crate) context: WakeContext,
}

/// Of a thread's kept waits, the newest this many keep the hop of a thread waking (a
/// branch to follow); older ones are not followed. Bounds the hops past waits pin.
pub(crate) const HOP_LINKS: usize = 16;

/// What past waits share: the off-CPU stacks and the interrupt that ended them, interned
/// once for all threads (a timer thread's thousand sleeps are one key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Key {
    kstack: StackId,
    ustack: StackId,
    metal: Option<MetalEnd>,
}

/// A kept wait: 24 bytes (the [`PastWait`] it stands for is 48).
#[derive(Clone, Copy, Debug)]
struct Entry {
    start: u64,
    end: u64,
    hop: Option<HopId>,
    key: u32,
}

/// Past waits per task slot (parallel to the engine's tasks), oldest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct PastWaits {
    per_task: Vec<VecDeque<Entry>>,
    keys: Vec<Key>,
    key_ix: FxHashMap<Key, u32>,
    /// Per task slot: the end of the newest wait dropped by the cap (0: none), before
    /// which its list is incomplete.
    floors: Vec<u64>,
    /// Entries kept over all tasks.
    kept: usize,
    /// Task slots whose list is not empty.
    lists: usize,
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
            self.floors.resize(t + 1, 0);
        }
        let key = Key {
            kstack: w.kstack,
            ustack: w.ustack,
            // The interrupted task is not kept: one key per interrupt and stacks.
            metal: w.metal.map(|m| MetalEnd { waker_tid: 0, ..m }),
        };
        // Most waits repeat their thread's previous one (a timer thread's sleeps): that
        // key without a hash lookup.
        let key = match self.per_task[t].back() {
            Some(last) if self.keys[last.key as usize] == key => last.key,
            _ => {
                let next = self.keys.len() as u32;
                let id = *self.key_ix.entry(key).or_insert(next);
                if id == next {
                    self.keys.push(key);
                }
                id
            }
        };
        let w = Entry {
            start: w.start,
            end: w.end,
            hop: w.hop,
            key,
        };
        let l = &mut self.per_task[t];
        if l.is_empty() {
            self.lists += 1;
        }
        let cap = (PAST_BUDGET / self.lists.max(1)).clamp(MIN_PER_THREAD, MAX_PER_THREAD);
        while l.len() >= cap {
            if let Some(old) = l.pop_front() {
                self.floors[t] = self.floors[t].max(old.end);
                self.kept -= 1;
            }
        }
        if l.len() == l.capacity() {
            // Doubling, but never past the cap: with ~1800 threads a list's cap is ~580
            // waits, which doubling would hold in room for 1024 (busy20m: 18.6 MB of
            // past waits at the peak, session 27).
            l.reserve_exact(l.len().max(4).min(cap - l.len()));
        }
        l.push_back(w);
        if l.len() > HOP_LINKS {
            let i = l.len() - 1 - HOP_LINKS;
            l[i].hop = None;
        }
        self.kept += 1;
        self.peak = self.peak.max(self.kept);
    }

    /// The lazily captured stacks of task slot `t`'s wait that began at `start` arrived.
    #[inline]
    pub(crate) fn set_stacks(&mut self, t: usize, start: u64, k: StackId, u: StackId) {
        let Some(w) = self
            .per_task
            .get(t)
            .and_then(|l| l.back())
            .filter(|w| w.start == start)
            .copied()
        else {
            return;
        };
        let mut key = self.keys[w.key as usize];
        if k != StackId::NONE {
            key.kstack = k;
        }
        if u != StackId::NONE {
            key.ustack = u;
        }
        let next = self.keys.len() as u32;
        let id = *self.key_ix.entry(key).or_insert(next);
        if id == next {
            self.keys.push(key);
        }
        if let Some(e) = self.per_task[t].back_mut() {
            e.key = id;
        }
    }

    /// Task slot `t` is freed (its thread ended).
    pub(crate) fn clear_task(&mut self, t: usize) {
        if let Some(l) = self.per_task.get_mut(t) {
            self.kept -= l.len();
            self.lists -= usize::from(!l.is_empty());
            *l = VecDeque::new();
            self.floors[t] = 0;
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
                self.lists -= usize::from(l.is_empty());
                if l.capacity() > 4 * l.len().max(4) {
                    l.shrink_to(2 * l.len());
                }
            }
        }
        self.trim_at = self.kept + self.kept / 4;
    }

    /// Every list is complete only from `to` on (a trim is about to drop waits an open
    /// wait's chain could still ask for).
    pub(crate) fn raise_floors(&mut self, to: u64) {
        for f in &mut self.floors {
            *f = (*f).max(to);
        }
    }

    /// Task slot `t`'s list is complete from this time on (its cap dropped older waits).
    #[inline]
    pub(crate) fn floor(&self, t: usize) -> u64 {
        self.floors.get(t).copied().unwrap_or(0)
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
    ) -> impl Iterator<Item = PastWait> + '_ {
        let l = self.per_task.get(t);
        // From the back: a level's windows lie inside a wait that is ending now, so the
        // waits they overlap are among the newest of up to thousands kept (a binary search
        // from the front missed the cache at every step: 8 % of busy-server's `chains`).
        let from = l.map_or(0, |l| gallop_back(0, l.len(), |i| l[i].end <= x));
        l.into_iter()
            .flat_map(move |l| l.range(from..))
            .take_while(move |w| w.start < y)
            .map(|e| {
                let k = self.keys[e.key as usize];
                PastWait {
                    start: e.start,
                    end: e.end,
                    hop: e.hop,
                    metal: k.metal,
                    kstack: k.kstack,
                    ustack: k.ustack,
                }
            })
    }
}

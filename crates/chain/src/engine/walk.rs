//! The chain walk: from the hop that ended a wait, down its causes, each level's time
//! (CHAINS.md), the run-queue split of each level, and the inner hops dedup marks.

use crate::engine::config::Config;
use crate::engine::hops::{Cause, Hop};
use crate::engine::ids::HopId;
use crate::engine::mode::Mode;
use crate::engine::nodes::NodeId;
use crate::engine::nodes::NodeTable;
use crate::engine::past::{PastWait, PastWaits};
use crate::engine::record::{HopRecord, LevelKind, WaitRecord};
use crate::engine::runqueue::RqView;
use crate::engine::sampleidx::{minus, SampleIndex};
use crate::engine::tasks::TaskIndex;
use chainrec_format::{StackId, Tid, WakeContext};

/// Windows kept per record in [`WaitRecord::extra_windows`]; past it a level's newest
/// window is widened instead (its envelope: `level_inside` then counts the gaps in it
/// too, and `critical-path --window` apportions that wait's levels).
const EXTRA_WINDOWS: usize = 256;

/// One more window `span` of level `level` (merged earlier waits, not-followed spans).
#[inline]
fn add_window(rec: &mut WaitRecord, level: u32, span: (u64, u64)) {
    if rec.extra_windows.len() < EXTRA_WINDOWS {
        rec.extra_windows.push((level, span.0, span.1));
    } else if let Some(w) = rec.extra_windows.iter_mut().rev().find(|w| w.0 == level) {
        w.2 = w.2.max(span.1);
    } else {
        rec.extra_windows.push((level, span.0, span.1));
    }
}

/// Push the `[earlier wait]` level of past wait `w` of level `id`'s waker, over `span`
/// (its time is its children's); its level id.
fn push_earlier(rec: &mut WaitRecord, id: u32, w: &PastWait, span: (u64, u64)) -> u32 {
    let h = &rec.hops[id as usize - 1];
    let r = HopRecord {
        ts: w.end,
        waker_tid: h.waker_tid,
        waker_tgid: h.waker_tgid,
        waker_comm: h.waker_comm,
        context: WakeContext::Task,
        metal: false,
        kstack: w.kstack,
        ustack: w.ustack,
        node: NodeId::MAX,
        ns: 0,
        windows: [span, (0, 0)],
        parent: id,
        kind: LevelKind::EarlierWait,
        waits: 1,
    };
    rec.hops.push(r);
    rec.hops.len() as u32
}

/// Earlier waits not ended by an interrupt that one wait's DAG follows, the longest
/// first (docs/ENGINE.md, "Earlier waits": each one followed is a subtree of distinct
/// lines; on busy-server 2 doubles the lines, 8 makes them 2.5 times).
pub(crate) const BRANCH_BUDGET: usize = 2;

/// Buffers [`Walker::own_time`] reuses from one level to the next (a level whose waker
/// blocked inside it needed five allocations).
#[derive(Clone, Debug, Default)]
pub(crate) struct OwnScratch {
    /// The waker's waits overlapping the level's windows, clipped to them.
    waits: Vec<(u64, u64, PastWait)>,
    /// (length, index into `waits`) of those that could be followed.
    longest: Vec<(u64, usize)>,
    follow: Vec<bool>,
    /// Interrupt-ended branches of the level: (kstack, ustack, interrupt, level id).
    merged: Vec<(StackId, StackId, NodeId, u32)>,
    /// The windows less the blocked spans.
    own: Vec<(u64, u64)>,
}

/// The chain walk, borrowing only what it reads from the engine (so that the record it
/// fills can be a task's own record, borrowed mutably at the same time).
pub(crate) struct Walker<'a> {
    pub(crate) hops: &'a [Hop],
    pub(crate) nodes: &'a NodeTable,
    pub(crate) cfg: &'a Config,
    pub(crate) inner: &'a mut Vec<HopId>,
    pub(crate) seen: &'a mut Vec<Tid>,
    /// Run-queue histories, when run-queue attribution is on.
    pub(crate) rq: Option<RqView<'a>>,
    /// [`Stats::runq_unsplit_ns`].
    pub(crate) unsplit: &'a mut u64,
    /// On-CPU samples, for the `[on cpu]` split of a level's running time.
    pub(crate) samples: &'a SampleIndex,
    /// Task slots by tid (the wakers' CPU clocks, for the estimate).
    pub(crate) index: &'a TaskIndex,
    /// Scratch: a level's running pieces (its windows less the waker's runnable periods).
    pub(crate) pieces: &'a mut Vec<(u64, u64)>,
    /// Each thread's past blocked waits (the wakers' earlier waits).
    pub(crate) past: &'a PastWaits,
    /// Branches walked for the record being built (against [`BRANCH_BUDGET`]).
    pub(crate) branches: &'a mut usize,
    /// [`crate::Stats::past_unchecked_ns`].
    pub(crate) unchecked: &'a mut u64,
    /// Reused buffers of [`Self::own_time`].
    pub(crate) scratch: &'a mut OwnScratch,
}

impl Walker<'_> {
    /// Split level `level`'s own time windows by the waker's runnable periods: the parts
    /// where it was runnable go to [`WaitRecord::runq`] behind its CPU's holders; with
    /// samples, the rest (the waker's on-CPU time) is split by its samples (docs/ENGINE.md,
    /// "What a running waker did"). One pass over the periods does both (a second search
    /// and pass for the on-CPU pieces cost as much again on a pgbench recording).
    #[inline]
    fn split_level(
        &mut self,
        level: u32,
        waker: Tid,
        windows: &[(u64, u64)],
        rec: &mut WaitRecord,
    ) {
        // Now: the waking that ends the root's wait, when the chain is built.
        let now = rec.wake_ns.unwrap_or(rec.switch_out_ns);
        let on_cpu = self.samples.enabled;
        let pieces = &mut *self.pieces;
        pieces.clear();
        let h = self.rq.as_ref().and_then(|rq| rq.of(waker));
        match (h, self.rq.as_mut()) {
            (Some(h), Some(rq)) => {
                let parts = &mut *rq.parts;
                parts.begin(&rec.runq, level);
                for &(x, y) in windows {
                    if y <= x {
                        continue;
                    }
                    if x < h.floor {
                        *self.unsplit += h.floor.min(y) - x;
                    }
                    // Periods are in time order and disjoint: the first that ends after x,
                    // then on until one starts at or after y. Between them the waker ran
                    // (`sampleidx::minus` of the windows and these periods).
                    let mut ran_from = x;
                    let first = h.first_ending_after(x);
                    for seg in h.iter_from(first) {
                        if seg.start >= y {
                            break;
                        }
                        let (s, e) = (seg.start.max(x), seg.end().min(y));
                        parts.add(&mut rec.runq, seg.holder, e - s);
                        if on_cpu {
                            if s > ran_from {
                                pieces.push((ran_from, s));
                            }
                            ran_from = ran_from.max(e);
                        }
                    }
                    if on_cpu && ran_from < y {
                        pieces.push((ran_from, y));
                    }
                }
            }
            _ if on_cpu => minus(windows, |_, _, _| {}, pieces),
            _ => {}
        }
        if !on_cpu {
            return;
        }
        let clock_now = if self.samples.estimating() {
            self.samples.clock(self.index.find(waker), now)
        } else {
            None
        };
        self.samples
            .split(waker, level, pieces, clock_now, &mut rec.oncpu_raw);
    }

    /// The time-bounded chain of hop `first` over `[l, t]` (CHAINS.md, "Attribution"):
    /// its first level at `depth` under level `parent` (0 = the root), each level's own
    /// time split and its waker's earlier waits inside it followed as branches. `main`:
    /// the root's own chain, which at the depth limit gives the last level the rest and
    /// marks the record `[truncated]`; a branch's chain there says `[blocked: not
    /// followed]` for the wait it does not follow.
    #[allow(clippy::too_many_arguments)]
    fn chain(
        &mut self,
        first: HopId,
        mut l: u64,
        mut t: u64,
        mut depth: usize,
        mut parent: u32,
        rec: &mut WaitRecord,
        mark: bool,
        main: bool,
        nested: bool,
    ) {
        let max = self.cfg.max_depth;
        let mut cur = first;
        loop {
            let h = &self.hops[cur.index()];
            let mut r = h.record(self.nodes);
            r.parent = parent;
            let id = rec.hops.len() as u32 + 1;
            let waker = h.waker_tid;
            let metal = h.metal();
            let (cause_s, cause_ts) = (h.cause_s, h.cause_ts);
            let next = match h.cause.get() {
                Cause::Hop(cause) if !metal && cause_ts > l && depth < max => Some(Some(cause)),
                // Depth limit, or the cause was collected (beyond it).
                Cause::Hop(_) | Cause::Cut if !metal && cause_ts > l => Some(None),
                // Metal, no known cause, or a cause before the window: the chain ends here.
                _ => None,
            };
            match next {
                Some(None) if main => {
                    r.ns = t.saturating_sub(l);
                    r.windows[0] = (l, t.max(l));
                    rec.hops.push(r);
                    rec.truncated = true;
                    return;
                }
                None => {
                    r.ns = t.saturating_sub(l);
                    r.windows[0] = (l, t.max(l));
                    rec.hops.push(r);
                    if !metal {
                        self.own_time(id, depth, waker, [(l, t), (0, 0)], rec, mark, nested);
                    }
                    return;
                }
                Some(cause) => {
                    let l2 = l.max(cause_s);
                    let ct = cause_ts.min(t);
                    r.ns = t.saturating_sub(l) - ct.saturating_sub(l2);
                    r.windows = [(l, l2), (ct, t)];
                    rec.hops.push(r);
                    // Own time: before the waker blocked, and after its waking.
                    self.own_time(id, depth, waker, [(l, l2), (ct, t)], rec, mark, nested);
                    let Some(cause) = cause else {
                        // A branch at the depth limit: the wait it would follow.
                        self.not_followed(id, (l2, ct), rec);
                        return;
                    };
                    if mark {
                        self.inner.push(cause);
                    }
                    l = l2;
                    t = ct;
                    cur = cause;
                    depth += 1;
                    parent = id;
                }
            }
        }
    }

    /// Level `id` (at `depth`, waker `waker`) keeps `windows` as its own time: follow the
    /// waker's earlier waits inside them as branches (or count them not followed), then
    /// split what is left by the waker's runnable periods and samples.
    #[allow(clippy::too_many_arguments)]
    fn own_time(
        &mut self,
        id: u32,
        depth: usize,
        waker: Tid,
        windows: [(u64, u64); 2],
        rec: &mut WaitRecord,
        mark: bool,
        nested: bool,
    ) {
        let t = self.index.find(waker);
        // Before the waker's oldest kept wait the engine cannot tell its running from its
        // blocked time: that part stays the level's own, not split, and counted.
        let floor = t.map_or(0, |t| self.past.floor(t));
        let mut windows = windows;
        if floor > 0 {
            for w in &mut windows {
                if w.0 < floor && w.1 > w.0 {
                    let cut = floor.min(w.1);
                    *self.unchecked += cut - w.0;
                    w.0 = cut;
                }
            }
        }
        // The waker blocked inside its own time: each such wait is a branch (one search
        // per window; most levels find none and keep their windows whole).
        // The buffers are taken (a branch's walk nests another `own_time`) and put back.
        let mut sc = std::mem::take(self.scratch);
        let OwnScratch {
            waits,
            longest,
            follow,
            merged,
            own,
        } = &mut sc;
        waits.clear();
        if let Some(t) = t {
            for &(x, y) in &windows {
                if y > x {
                    waits.extend(
                        self.past
                            .overlapping(t, x, y)
                            .map(|w| (w.start.max(x), w.end.min(y), w)),
                    );
                }
            }
        }
        if waits.is_empty() {
            *self.scratch = sc;
            self.split_level(id, waker, &windows, rec);
            return;
        }
        let mut carved = 0u64;
        // Which waits become branches of their own: those ended by an interrupt, merged by
        // (sleeping stacks, interrupt node) into one branch each (cheap: no walk); of the
        // others, the longest `budget` (a branch's own earlier waits are not followed:
        // `nested`), each walked like a chain. The rest is one `[blocked: not followed]`
        // level (docs/ENGINE.md, "Earlier waits": why these limits).
        let can_follow = depth + 2 <= self.cfg.max_depth;
        let metal_of = |w: &PastWait| -> Option<NodeId> { w.metal.map(|m| m.node) };
        let budget = if nested || !can_follow {
            0
        } else {
            BRANCH_BUDGET.saturating_sub(*self.branches)
        };
        longest.clear();
        longest.extend(
            waits
                .iter()
                .enumerate()
                .filter(|(_, (_, _, w))| w.hop.is_some() && metal_of(w).is_none())
                .map(|(i, &(x, y, _))| (y - x, i)),
        );
        if longest.len() > budget {
            if budget > 0 {
                // Longest first, then earliest: deterministic.
                longest
                    .select_nth_unstable_by(budget - 1, |a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            }
            longest.truncate(budget);
        }
        follow.clear();
        follow.resize(waits.len(), false);
        for &(_, i) in longest.iter() {
            follow[i] = true;
        }
        *self.branches += longest.len();
        merged.clear();
        let mut not_followed: Option<usize> = None;
        for (i, &(x, y, w)) in waits.iter().enumerate() {
            carved += y - x;
            let metal = w.metal.filter(|_| can_follow);
            if let Some(m) = metal {
                if let Some(&(.., pseudo)) = merged
                    .iter()
                    .find(|e| (e.0, e.1, e.2) == (w.kstack, w.ustack, m.node))
                {
                    // One more such wait: its time and windows on that branch.
                    rec.hops[pseudo as usize].ns += y - x;
                    rec.hops[pseudo as usize - 1].waits += 1;
                    add_window(rec, pseudo, (x, y));
                    add_window(rec, pseudo + 1, (x, y));
                    continue;
                }
                // The first: an `[earlier wait]` level and its interrupt under it.
                let branch = push_earlier(rec, id, &w, (x, y));
                rec.hops.push(HopRecord {
                    ts: w.end,
                    waker_tid: m.waker_tid,
                    waker_tgid: 0,
                    waker_comm: Default::default(),
                    context: m.context,
                    metal: true,
                    kstack: m.kstack,
                    ustack: StackId::NONE,
                    node: m.node,
                    ns: y - x,
                    windows: [(x, y), (0, 0)],
                    parent: branch,
                    kind: LevelKind::Waker,
                    waits: 0,
                });
                merged.push((w.kstack, w.ustack, m.node, branch));
                continue;
            }
            match w.hop.filter(|_| follow[i]) {
                Some(hop) => {
                    let branch = push_earlier(rec, id, &w, (x, y));
                    if mark {
                        self.inner.push(hop);
                    }
                    self.chain(hop, x, y, depth + 2, branch, rec, mark, false, true);
                }
                None => match not_followed {
                    Some(k) => {
                        rec.hops[k].ns += y - x;
                        add_window(rec, k as u32 + 1, (x, y));
                    }
                    None => {
                        self.not_followed(id, (x, y), rec);
                        not_followed = Some(rec.hops.len() - 1);
                    }
                },
            }
        }
        rec.hops[id as usize - 1].ns -= carved;
        // What is left: the windows less the blocked spans.
        own.clear();
        let mut i = 0;
        for &(x, y) in &windows {
            if y <= x {
                continue;
            }
            let mut from = x;
            while i < waits.len() && waits[i].0 < y {
                if waits[i].0 > from {
                    own.push((from, waits[i].0));
                }
                from = from.max(waits[i].1);
                i += 1;
            }
            if from < y {
                own.push((from, y));
            }
        }
        self.split_level(id, waker, own, rec);
        *self.scratch = sc;
    }

    /// Level `id`'s waker was blocked over `span` in a wait this DAG does not follow.
    fn not_followed(&mut self, id: u32, span: (u64, u64), rec: &mut WaitRecord) {
        if span.1 <= span.0 {
            return;
        }
        let h = &rec.hops[id as usize - 1];
        let r = HopRecord {
            ts: span.1,
            waker_tid: h.waker_tid,
            waker_tgid: h.waker_tgid,
            waker_comm: h.waker_comm,
            context: WakeContext::Task,
            metal: false,
            kstack: StackId::NONE,
            ustack: StackId::NONE,
            node: NodeId::MAX,
            ns: span.1 - span.0,
            windows: [span, (0, 0)],
            parent: id,
            kind: LevelKind::NotFollowed,
            waits: 0,
        };
        rec.hops.push(r);
    }

    /// Build the chain of `rec` (woken by hop `first`), marking inner hops as used when
    /// `mark` (the root passes the filter).
    #[inline]
    pub(crate) fn walk(&mut self, first: HopId, rec: &mut WaitRecord, mark: bool) {
        rec.hops.clear();
        rec.runq.clear();
        rec.oncpu_raw.clear();
        rec.extra_windows.clear();
        rec.truncated = false;
        rec.cycle = false;
        let a = rec.switch_out_ns;
        let t1 = rec.wake_ns.unwrap_or(a);
        let max = self.cfg.max_depth;
        let mut cur = first;
        let mut depth = 1;
        match self.cfg.mode {
            Mode::Bounded => {
                *self.branches = 0;
                self.chain(first, a, t1, 1, 0, rec, mark, true, false)
            }
            Mode::Last => {
                let weight = t1.saturating_sub(a);
                self.seen.clear();
                self.seen.push(rec.tid);
                loop {
                    let h = &self.hops[cur.index()];
                    let mut r = h.record(self.nodes);
                    r.parent = rec.hops.len() as u32;
                    r.ns = weight;
                    r.windows[0] = (a, t1.max(a));
                    rec.hops.push(r);
                    let cause = match h.cause.get() {
                        _ if h.metal() => break,
                        Cause::None => break,
                        Cause::Hop(cause) if depth < max => cause,
                        Cause::Hop(_) | Cause::Cut => {
                            rec.truncated = true;
                            break;
                        }
                    };
                    self.seen.push(h.waker_tid);
                    let next = &self.hops[cause.index()];
                    if !next.metal() && self.seen.contains(&next.waker_tid) {
                        rec.cycle = true;
                        break;
                    }
                    if mark {
                        self.inner.push(cause);
                    }
                    cur = cause;
                    depth += 1;
                }
            }
        }
    }
}

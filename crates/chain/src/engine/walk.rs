//! The chain walk: from the hop that ended a wait, down its causes, each level's time
//! (CHAINS.md), the run-queue split of each level, and the inner hops dedup marks.

use crate::engine::config::Config;
use crate::engine::hops::{Cause, Hop};
use crate::engine::ids::HopId;
use crate::engine::mode::Mode;
use crate::engine::nodes::NodeTable;
use crate::engine::record::WaitRecord;
use crate::engine::runqueue::RqView;
use crate::engine::sampleidx::{minus, SampleIndex};
use crate::engine::tasks::TaskIndex;
use chainrec_format::Tid;

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
        windows: [(u64, u64); 2],
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
                for (x, y) in windows {
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
            _ if on_cpu => minus(&windows, |_, _, _| {}, pieces),
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

    /// Build the chain of `rec` (woken by hop `first`), marking inner hops as used when
    /// `mark` (the root passes the filter).
    #[inline]
    pub(crate) fn walk(&mut self, first: HopId, rec: &mut WaitRecord, mark: bool) {
        rec.hops.clear();
        rec.runq.clear();
        rec.oncpu_raw.clear();
        rec.truncated = false;
        rec.cycle = false;
        let a = rec.switch_out_ns;
        let t1 = rec.wake_ns.unwrap_or(a);
        let max = self.cfg.max_depth;
        let mut cur = first;
        let mut depth = 1;
        match self.cfg.mode {
            Mode::Bounded => {
                let mut l = a;
                let mut t = t1;
                loop {
                    let h = &self.hops[cur.index()];
                    let mut r = h.record(self.nodes);
                    let cause = match h.cause.get() {
                        Cause::Hop(cause) if !h.metal() && h.cause_ts > l && depth < max => cause,
                        Cause::Hop(_) | Cause::Cut if !h.metal() && h.cause_ts > l => {
                            // Depth limit, or the cause was collected (beyond it).
                            r.ns = t.saturating_sub(l);
                            r.windows[0] = (l, t.max(l));
                            rec.hops.push(r);
                            rec.truncated = true;
                            break;
                        }
                        _ => {
                            // Metal, no known cause, or a cause before the window: the
                            // chain ends here.
                            r.ns = t.saturating_sub(l);
                            r.windows[0] = (l, t.max(l));
                            rec.hops.push(r);
                            if !h.metal() {
                                self.split_level(depth as u32, h.waker_tid, [(l, t), (0, 0)], rec);
                            }
                            break;
                        }
                    };
                    let l2 = l.max(h.cause_s);
                    r.ns = t.saturating_sub(l) - h.cause_ts.min(t).saturating_sub(l2);
                    r.windows = [(l, l2), (h.cause_ts.min(t), t)];
                    rec.hops.push(r);
                    // Own time: before the waker blocked, and after its waking.
                    self.split_level(
                        depth as u32,
                        h.waker_tid,
                        [(l, l2), (h.cause_ts.min(t), t)],
                        rec,
                    );
                    if mark {
                        self.inner.push(cause);
                    }
                    l = l2;
                    t = h.cause_ts.min(t);
                    cur = cause;
                    depth += 1;
                }
            }
            Mode::Last => {
                let weight = t1.saturating_sub(a);
                self.seen.clear();
                self.seen.push(rec.tid);
                loop {
                    let h = &self.hops[cur.index()];
                    let mut r = h.record(self.nodes);
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

//! Run-queue attribution (CHAINS.md "Run-queue time"): per-CPU histories of who held each
//! CPU, per-thread runnable periods, and the split of runnable time by CPU holder.

use crate::engine::nodes::HOLDER_UNKNOWN;
use crate::engine::record::{RunqPart, WaitRecord};
use crate::engine::tasks::TaskIndex;
use chainrec_format::Tid;
use std::collections::VecDeque;

/// Safety cap on the switch-ins kept per CPU (16 B each). Histories are trimmed to what
/// an open wait can still ask for (docs/ENGINE.md, "How far back the histories reach"); the
/// cap only bounds memory when a wait stays open for very long, and every entry it drops
/// while still askable is counted ([`crate::Stats::runq_capped`]).
pub(crate) const CPU_HISTORY_CAP: usize = 1 << 22;
/// Safety cap on the runnable periods kept per thread (16 B each), as above.
pub(crate) const TASK_RQ_CAP: usize = 1 << 20;
/// Entries kept in all histories before the first trim (then a quarter more than the last kept).
const FIRST_TRIM: usize = 1 << 16;
/// CPUs beyond this number get no run-queue history (a trace is untrusted input).
const MAX_CPUS: u32 = 1 << 13;

/// One runnable period of a thread behind one CPU holder.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RqSeg {
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// [`IdentId`], [`HOLDER_IDLE`] or [`HOLDER_UNKNOWN`].
    pub(crate) holder: u32,
}

/// A kept runnable period: 16 B, not 24 (a thread's periods since the oldest open wait can
/// be millions): its start, its length (a longer period is kept as several), its holder.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeptSeg {
    pub(crate) start: u64,
    len: u32,
    /// As [`RqSeg::holder`].
    pub(crate) holder: u32,
}

impl KeptSeg {
    #[inline]
    pub(crate) fn end(&self) -> u64 {
        self.start + u64::from(self.len)
    }
}

/// A thread's runnable periods, as far back as an open wait can ask for them.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskRq {
    pub(crate) segs: VecDeque<KeptSeg>,
    /// Periods ending before this were dropped by [`TASK_RQ_CAP`] (never by a trim, which
    /// drops only what no open wait can ask for): earlier time cannot be split.
    pub(crate) floor: u64,
}

impl TaskRq {
    /// Append `seg`; returns how many new entries it took (0 when merged into the last).
    #[inline]
    fn push(&mut self, seg: RqSeg, capped: &mut u64) -> usize {
        let mut start = seg.start;
        if let Some(last) = self.segs.back_mut() {
            if last.holder == seg.holder && last.end() == start {
                let room = u64::from(u32::MAX - last.len);
                let add = room.min(seg.end - start);
                last.len += add as u32;
                start += add;
            }
        }
        let mut added = 0;
        while start < seg.end {
            let len = (seg.end - start).min(u64::from(u32::MAX)) as u32;
            if self.segs.len() == TASK_RQ_CAP {
                if let Some(old) = self.segs.pop_front() {
                    self.floor = old.end();
                    *capped += 1;
                }
            } else {
                added += 1;
            }
            self.segs.push_back(KeptSeg {
                start,
                len,
                holder: seg.holder,
            });
            start += u64::from(len);
        }
        added
    }
}

impl TaskRq {
    /// Index of the first kept period ending after `x` (periods are disjoint and in time
    /// order). Searched from the newest back, doubling the step: a walk asks mostly about
    /// recent time, and the histories reach back to the oldest open wait (millions of
    /// periods on a busy host), where a plain binary search missed the cache at every step
    /// (14 % of busy-server's `chains`).
    #[inline]
    pub(crate) fn first_ending_after(&self, x: u64) -> usize {
        let segs = &self.segs;
        // Every period at or after `hi` ends after x.
        let mut hi = segs.len();
        let mut step = 1;
        while hi > 0 {
            let j = hi.saturating_sub(step);
            if segs[j].end() <= x {
                // The answer is in (j, hi]: binary search there.
                let mut lo = j + 1;
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if segs[mid].end() <= x {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                return lo;
            }
            hi = j;
            step *= 2;
        }
        0
    }
}

/// A CPU's switch-ins (time, holder code), oldest first.
#[derive(Clone, Debug, Default)]
struct CpuHist {
    q: VecDeque<(u64, u32)>,
}

/// Give back most of a deque's spare room once it holds far less than it did.
#[inline]
fn shrink<T>(q: &mut VecDeque<T>) {
    if q.capacity() > 64 && q.len() < q.capacity() / 4 {
        q.shrink_to(q.len() * 2);
    }
}

/// The run-queue histories of an engine.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunQueues {
    /// Per CPU: its switch-ins back to the oldest runnable start still open.
    cpus: Vec<CpuHist>,
    /// Per task slot (parallel to the engine's tasks): runnable periods back to the
    /// oldest blocked wait still open.
    task_rq: Vec<TaskRq>,
    /// Scratch: pieces of one runnable period, newest first.
    rq_pieces: Vec<RqSeg>,
    /// Entries in all histories now.
    kept: usize,
    /// Trim when `kept` reaches this.
    trim_at: usize,
    /// Most entries kept at once, as of the last trim.
    peak_kept: usize,
    /// [`crate::Stats::runq_capped`].
    pub(crate) capped: u64,
}

impl RunQueues {
    /// A new task slot was appended to the engine's tasks.
    #[inline]
    pub(crate) fn add_task(&mut self) {
        self.task_rq.push(TaskRq::default());
    }

    /// Task slot `t` was freed: its history goes with it.
    #[inline]
    pub(crate) fn clear_task(&mut self, t: usize) {
        let rq = &mut self.task_rq[t];
        self.kept -= rq.segs.len();
        rq.segs.clear();
        shrink(&mut rq.segs);
        rq.floor = 0;
    }

    /// Most entries the histories held at once ([`crate::Stats::peak_runq_history`]).
    pub(crate) fn peak_kept(&self) -> usize {
        self.peak_kept.max(self.kept)
    }

    /// The histories have grown enough since the last trim to be worth trimming.
    #[inline]
    pub(crate) fn needs_trim(&self) -> bool {
        self.kept >= self.trim_at.max(FIRST_TRIM)
    }

    /// Drop what no open wait can still ask for: runnable periods of every thread ending
    /// at or before `waits_from` (the oldest switch-out of a blocked wait not yet woken:
    /// any chain walked from now on lies after it), and switch-ins of every CPU before the
    /// last one at or before `runnable_from` (the oldest start of a runnable period not yet
    /// switched in: that one says who held the CPU then). docs/ENGINE.md, "How far back the
    /// histories reach".
    pub(crate) fn trim(&mut self, waits_from: u64, runnable_from: u64) {
        self.peak_kept = self.peak_kept.max(self.kept);
        let mut kept = 0;
        for rq in &mut self.task_rq {
            let n = rq.segs.partition_point(|seg| seg.end() <= waits_from);
            rq.segs.drain(..n);
            shrink(&mut rq.segs);
            kept += rq.segs.len();
        }
        for c in &mut self.cpus {
            // Keep the last switch-in at or before `runnable_from`.
            let n = c.q.partition_point(|&(ts, _)| ts <= runnable_from);
            c.q.drain(..n.saturating_sub(1));
            shrink(&mut c.q);
            kept += c.q.len();
        }
        self.kept = kept;
        // A quarter more before the next trim: memory stays near what is askable, and a
        // trim (one pass over threads and CPUs) still comes only every kept/4 entries.
        self.trim_at = kept + kept / 4;
    }

    /// Record that `holder` went on `cpu` at `ts` (run-queue attribution).
    #[inline]
    pub(crate) fn push_cpu(&mut self, cpu: u32, ts: u64, holder: u32) {
        if cpu >= MAX_CPUS {
            return;
        }
        if self.cpus.len() <= cpu as usize {
            self.cpus.resize_with(cpu as usize + 1, CpuHist::default);
        }
        let c = &mut self.cpus[cpu as usize];
        if c.q.len() == CPU_HISTORY_CAP {
            c.q.pop_front();
            self.capped += 1;
        } else {
            self.kept += 1;
        }
        c.q.push_back((ts, holder));
    }

    /// Task `t` was runnable over `[r0, end)` and is switched in on `cpu` at `end`: split
    /// that time by who held `cpu` (before this switch-in is pushed to its history), add
    /// the pieces to the task's run-queue history and to `rec`, its open record (level 0).
    #[inline]
    pub(crate) fn split_runnable(
        &mut self,
        t: usize,
        cpu: u32,
        r0: u64,
        end: u64,
        rec: &mut WaitRecord,
    ) {
        let pieces = &mut self.rq_pieces;
        pieces.clear();
        let mut hi = end;
        if let Some(c) = self.cpus.get(cpu as usize) {
            for &(ts, holder) in c.q.iter().rev() {
                if ts >= hi {
                    continue;
                }
                let lo = ts.max(r0);
                if hi > lo {
                    pieces.push(RqSeg {
                        start: lo,
                        end: hi,
                        holder,
                    });
                }
                hi = lo;
                if ts <= r0 {
                    break;
                }
            }
        }
        if hi > r0 {
            pieces.push(RqSeg {
                start: r0,
                end: hi,
                holder: HOLDER_UNKNOWN,
            });
        }
        let rq = &mut self.task_rq[t];
        for &p in pieces.iter().rev() {
            self.kept += rq.push(p, &mut self.capped);
            add_runq(&mut rec.runq, 0, p.holder, p.end - p.start);
        }
    }

    /// Task `t` was held off by throttling over `[r0, end)` (its holder code `code`, from
    /// [`crate::engine::nodes::NodeTable::throttle_holder`]): a piece of its run-queue history
    /// and of `rec` (level 0), like a CPU holder's, so that inner levels see it too.
    #[inline]
    pub(crate) fn throttled(
        &mut self,
        t: usize,
        r0: u64,
        end: u64,
        code: u32,
        rec: &mut WaitRecord,
    ) {
        if end <= r0 {
            return;
        }
        let seg = RqSeg {
            start: r0,
            end,
            holder: code,
        };
        self.kept += self.task_rq[t].push(seg, &mut self.capped);
        add_runq(&mut rec.runq, 0, code, end - r0);
    }

    /// The histories, found by tid through `index`.
    #[inline]
    pub(crate) fn view<'a>(&'a self, index: &'a TaskIndex) -> RqView<'a> {
        RqView {
            task_rq: &self.task_rq,
            index,
        }
    }
}

/// The engine's run-queue histories, and how to find a thread's.
pub(crate) struct RqView<'a> {
    task_rq: &'a [TaskRq],
    index: &'a TaskIndex,
}

impl RqView<'_> {
    #[inline]
    pub(crate) fn of(&self, tid: Tid) -> Option<&TaskRq> {
        self.task_rq.get(self.index.find(tid)?)
    }
}

/// Add `ns` behind `holder` at `level` to `parts` (holders of one level merged; a record
/// has a handful of parts, sorted by level when it is emitted).
#[inline]
pub(crate) fn add_runq(parts: &mut Vec<RunqPart>, level: u32, holder: u32, ns: u64) {
    if ns == 0 {
        return;
    }
    for p in parts.iter_mut() {
        if p.level == level && p.holder == holder {
            p.ns += ns;
            return;
        }
    }
    parts.push(RunqPart { level, holder, ns });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The galloping search finds what a plain binary search finds, wherever `x` falls.
    #[test]
    fn first_ending_after_agrees_with_binary_search() {
        for n in [0usize, 1, 2, 3, 7, 64, 1000] {
            let mut rq = TaskRq::default();
            let mut capped = 0;
            for i in 0..n as u64 {
                // Disjoint periods [10 i, 10 i + 5), holders alternating (no merging).
                rq.push(
                    RqSeg {
                        start: 10 * i,
                        end: 10 * i + 5,
                        holder: (i % 2) as u32,
                    },
                    &mut capped,
                );
            }
            assert_eq!(rq.segs.len(), n);
            for x in 0..10 * n as u64 + 20 {
                let want = rq.segs.partition_point(|seg| seg.end() <= x);
                assert_eq!(rq.first_ending_after(x), want, "n {n} x {x}");
            }
        }
    }
}

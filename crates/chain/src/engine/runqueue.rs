//! Run-queue attribution (CHAINS.md "Run-queue time"): per-CPU histories of who held each
//! CPU, per-thread runnable periods, and the split of runnable time by CPU holder.

use crate::engine::nodes::HOLDER_UNKNOWN;
use crate::engine::record::{RunqPart, WaitRecord};
use crate::engine::tasks::TaskIndex;
use chainrec_format::Tid;
use std::collections::VecDeque;

/// Switches kept per CPU for run-queue attribution (16 B each).
const CPU_HISTORY: usize = 1 << 16;
/// Runnable periods kept per thread for splitting inner levels (24 B each; a thread that
/// switches rarely keeps few).
const TASK_RQ_HISTORY: usize = 1024;
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

/// A thread's recent runnable periods (run-queue attribution of inner levels).
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskRq {
    pub(crate) segs: VecDeque<RqSeg>,
    /// Periods ending before this were dropped: earlier time cannot be split.
    pub(crate) floor: u64,
}

impl TaskRq {
    #[inline]
    fn push(&mut self, seg: RqSeg) {
        if let Some(last) = self.segs.back_mut() {
            if last.holder == seg.holder && last.end == seg.start {
                last.end = seg.end;
                return;
            }
        }
        if self.segs.len() == TASK_RQ_HISTORY {
            if let Some(old) = self.segs.pop_front() {
                self.floor = old.end;
            }
        }
        self.segs.push_back(seg);
    }
}

/// The run-queue histories of an engine.
#[derive(Clone, Debug, Default)]
pub(crate) struct RunQueues {
    /// Per CPU: recent switch-ins (time, holder code), oldest first.
    cpus: Vec<VecDeque<(u64, u32)>>,
    /// Per task slot (parallel to the engine's tasks): recent runnable periods.
    task_rq: Vec<TaskRq>,
    /// Scratch: pieces of one runnable period, newest first.
    rq_pieces: Vec<RqSeg>,
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
        rq.segs.clear();
        rq.floor = 0;
    }

    /// Record that `holder` went on `cpu` at `ts` (run-queue attribution).
    #[inline]
    pub(crate) fn push_cpu(&mut self, cpu: u32, ts: u64, holder: u32) {
        if cpu >= MAX_CPUS {
            return;
        }
        if self.cpus.len() <= cpu as usize {
            self.cpus.resize_with(cpu as usize + 1, VecDeque::new);
        }
        let q = &mut self.cpus[cpu as usize];
        if q.len() == CPU_HISTORY {
            q.pop_front();
        }
        q.push_back((ts, holder));
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
        if let Some(q) = self.cpus.get(cpu as usize) {
            for &(ts, holder) in q.iter().rev() {
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
            rq.push(p);
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
        self.task_rq[t].push(RqSeg {
            start: r0,
            end,
            holder: code,
        });
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

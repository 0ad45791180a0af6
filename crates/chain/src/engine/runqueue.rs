//! Run-queue attribution (CHAINS.md "Run-queue time"): per-CPU histories of who held each
//! CPU, per-thread runnable periods, and the split of runnable time by CPU holder.

use crate::engine::nodes::{HOLDER_IDLE, HOLDER_UNKNOWN};
use crate::engine::record::{RunqPart, WaitRecord};
use crate::engine::tasks::TaskIndex;
use chainrec_format::Tid;
use std::collections::VecDeque;
use std::sync::Arc;

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

/// Runnable periods per block of a thread's history. Histories grow in blocks drawn from a
/// pool shared by all threads ([`BlockPool`]), not in per-thread deques that double: on
/// busy-server a few thousand threads each keep thousands of periods, and doubling deques
/// left up to half of their room unused (and the heap fragmented as they grew one after
/// another); blocks leave at most two partly used per thread and are reused as soon as a
/// trim frees them.
const BLOCK: usize = 128;

/// A block of kept periods, shared between an engine and its checkpoints (copied on write:
/// a thread writes only into its newest block, so the older blocks of a long history are one
/// copy however many checkpoints hold it).
type Block = Arc<[KeptSeg; BLOCK]>;

/// Blocks freed by trims and ended threads, handed out again before any new allocation.
#[derive(Debug, Default)]
pub(crate) struct BlockPool {
    free: Vec<Block>,
}

/// A copy of an engine (a checkpoint) starts with no free blocks: the pool is only a cache,
/// and blocks shared with it would be copied at their first write anyway.
impl Clone for BlockPool {
    fn clone(&self) -> Self {
        BlockPool::default()
    }
}

impl BlockPool {
    #[inline]
    fn take(&mut self) -> Block {
        self.free.pop().unwrap_or_else(|| {
            Arc::new(
                [KeptSeg {
                    start: 0,
                    len: 0,
                    holder: 0,
                }; BLOCK],
            )
        })
    }

    #[inline]
    fn give(&mut self, b: Block) {
        // A block a checkpoint still holds is not ours to reuse.
        if Arc::strong_count(&b) == 1 {
            self.free.push(b);
        }
    }

    /// Give most free blocks back to the allocator once far more are free than in use.
    fn shrink(&mut self, in_use: usize) {
        let keep = in_use / 4 + 64;
        if self.free.len() > 2 * keep {
            self.free.truncate(keep);
            self.free.shrink_to_fit();
        }
    }
}

/// A thread's runnable periods, as far back as an open wait can ask for them: period `i`
/// (0 = the oldest kept) is entry `head + i` of the concatenated blocks.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskRq {
    blocks: VecDeque<Block>,
    /// Offset of the oldest kept period in `blocks[0]`.
    head: usize,
    len: usize,
    /// Periods ending before this were dropped by [`TASK_RQ_CAP`] (never by a trim, which
    /// drops only what no open wait can ask for): earlier time cannot be split.
    pub(crate) floor: u64,
}

impl TaskRq {
    /// Number of kept periods.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Kept period `i` (0 = the oldest).
    #[inline]
    pub(crate) fn get(&self, i: usize) -> &KeptSeg {
        let j = self.head + i;
        &self.blocks[j / BLOCK][j % BLOCK]
    }

    /// The newest kept period.
    #[inline]
    fn last_mut(&mut self) -> Option<&mut KeptSeg> {
        if self.len == 0 {
            return None;
        }
        let j = self.head + self.len - 1;
        Some(&mut Arc::make_mut(&mut self.blocks[j / BLOCK])[j % BLOCK])
    }

    /// Kept periods from `i` on, oldest first.
    #[inline]
    pub(crate) fn iter_from(&self, i: usize) -> impl Iterator<Item = &KeptSeg> + '_ {
        let j = self.head + i.min(self.len);
        let end = self.head + self.len;
        let (first_block, first_off) = (j / BLOCK, j % BLOCK);
        self.blocks
            .range(first_block.min(self.blocks.len())..)
            .enumerate()
            .flat_map(move |(k, b)| {
                let base = (first_block + k) * BLOCK;
                let lo = if k == 0 { first_off } else { 0 };
                let hi = (end - base).min(BLOCK);
                b[lo..hi.max(lo)].iter()
            })
    }

    /// Drop the `n` oldest kept periods, their emptied blocks back to `pool`.
    fn drop_front(&mut self, n: usize, pool: &mut BlockPool) {
        let n = n.min(self.len);
        self.head += n;
        self.len -= n;
        while self.head >= BLOCK || (self.len == 0 && !self.blocks.is_empty()) {
            let Some(b) = self.blocks.pop_front() else {
                break;
            };
            pool.give(b);
            self.head = self.head.saturating_sub(BLOCK);
        }
        if self.len == 0 {
            self.head = 0;
        }
    }

    /// Drop every kept period, blocks back to `pool`.
    fn clear(&mut self, pool: &mut BlockPool) {
        for b in self.blocks.drain(..) {
            pool.give(b);
        }
        self.blocks.shrink_to(4);
        self.head = 0;
        self.len = 0;
        self.floor = 0;
    }

    /// Append one period.
    #[inline]
    fn push_back(&mut self, seg: KeptSeg, pool: &mut BlockPool) {
        let j = self.head + self.len;
        if j == self.blocks.len() * BLOCK {
            self.blocks.push_back(pool.take());
        }
        Arc::make_mut(&mut self.blocks[j / BLOCK])[j % BLOCK] = seg;
        self.len += 1;
    }

    /// Append `seg`; returns how many new entries it took (0 when merged into the last).
    #[inline]
    fn push(&mut self, seg: RqSeg, capped: &mut u64, pool: &mut BlockPool) -> usize {
        let mut start = seg.start;
        // Read before writing: a write may copy a block a checkpoint shares.
        let merges = self.len > 0 && {
            let last = self.get(self.len - 1);
            last.holder == seg.holder && last.end() == start
        };
        if merges {
            if let Some(last) = self.last_mut() {
                let room = u64::from(u32::MAX - last.len);
                let add = room.min(seg.end - start);
                last.len += add as u32;
                start += add;
            }
        }
        let mut added = 0;
        while start < seg.end {
            let len = (seg.end - start).min(u64::from(u32::MAX)) as u32;
            if self.len == TASK_RQ_CAP {
                self.floor = self.get(0).end();
                self.drop_front(1, pool);
                *capped += 1;
            } else {
                added += 1;
            }
            self.push_back(
                KeptSeg {
                    start,
                    len,
                    holder: seg.holder,
                },
                pool,
            );
            start += u64::from(len);
        }
        added
    }

    /// Index of the first kept period ending after `x` (periods are disjoint and in time
    /// order). Searched from the newest back, doubling the step: a walk asks mostly about
    /// recent time, and the histories reach back to the oldest open wait (millions of
    /// periods on a busy host), where a plain binary search missed the cache at every step
    /// (14 % of busy-server's `chains`).
    #[inline]
    pub(crate) fn first_ending_after(&self, x: u64) -> usize {
        // Every period at or after `hi` ends after x.
        let mut hi = self.len;
        let mut step = 1;
        while hi > 0 {
            let j = hi.saturating_sub(step);
            if self.get(j).end() <= x {
                // The answer is in (j, hi]: binary search there.
                return self.first_ending_after_between(x, j + 1, hi);
            }
            hi = j;
            step *= 2;
        }
        0
    }

    /// Index of the first kept period ending after `x`, by binary search from the front
    /// (for trims, which cut far back).
    fn first_ending_after_from_front(&self, x: u64) -> usize {
        self.first_ending_after_between(x, 0, self.len)
    }

    /// Index of the first kept period ending after `x`, by binary search in `lo..hi` (the
    /// answer is known to be in `lo..=hi`).
    #[inline]
    fn first_ending_after_between(&self, x: u64, mut lo: usize, mut hi: usize) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.get(mid).end() <= x {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
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
    /// Free blocks of the task histories.
    pool: BlockPool,
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
    /// Parts by holder for [`Self::split_runnable`].
    parts: PartIndex,
    /// Parts by holder for the chain walk ([`RqView::parts`]).
    walk_parts: PartIndex,
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
        self.kept -= rq.len();
        rq.clear(&mut self.pool);
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
        let mut task_kept = 0;
        for rq in &mut self.task_rq {
            let n = rq.first_ending_after_from_front(waits_from);
            rq.drop_front(n, &mut self.pool);
            task_kept += rq.len();
        }
        self.pool.shrink(task_kept / BLOCK);
        kept += task_kept;
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
        self.parts.begin(&rec.runq, 0);
        for &p in pieces.iter().rev() {
            self.kept += rq.push(p, &mut self.capped, &mut self.pool);
            self.parts.add(&mut rec.runq, p.holder, p.end - p.start);
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
        self.kept += self.task_rq[t].push(seg, &mut self.capped, &mut self.pool);
        add_runq(&mut rec.runq, 0, code, end - r0);
    }

    /// The histories, found by tid through `index`.
    #[inline]
    pub(crate) fn view<'a>(&'a mut self, index: &'a TaskIndex) -> RqView<'a> {
        RqView {
            task_rq: &self.task_rq,
            index,
            parts: &mut self.walk_parts,
        }
    }
}

/// The engine's run-queue histories, and how to find a thread's.
pub(crate) struct RqView<'a> {
    task_rq: &'a [TaskRq],
    index: &'a TaskIndex,
    /// Scratch of the walk: a record's parts of one level by holder.
    pub(crate) parts: &'a mut PartIndex,
}

impl<'a> RqView<'a> {
    /// The history of thread `tid` (borrowing only the histories, not the scratch).
    #[inline]
    pub(crate) fn of(&self, tid: Tid) -> Option<&'a TaskRq> {
        let task_rq: &'a [TaskRq] = self.task_rq;
        task_rq.get(self.index.find(tid)?)
    }
}

/// Holder codes below this are identities, indexed directly by [`PartIndex`] (others, the
/// throttled codes, are searched).
const DENSE_HOLDERS: u32 = 1 << 22;

/// Finds a record's run-queue part of one level by holder without a search of all its
/// parts: a waker runnable for long on a busy CPU has hundreds of holders in its level, and
/// the linear search of [`add_runq`] took about half of the level splits (a real
/// recording's `chains`, session 15). Valid from [`Self::begin`] until the parts change
/// other than through [`Self::add`].
#[derive(Clone, Debug, Default)]
pub(crate) struct PartIndex {
    /// Per holder key: (stamp, index into the parts); stale unless the stamp is current.
    slots: Vec<(u32, u32)>,
    stamp: u32,
    level: u32,
}

impl PartIndex {
    /// Slot of `holder`: idle, unknown, then identities; none for throttled codes.
    #[inline]
    fn key(holder: u32) -> Option<usize> {
        match holder {
            HOLDER_IDLE => Some(0),
            HOLDER_UNKNOWN => Some(1),
            h if h < DENSE_HOLDERS => Some(h as usize + 2),
            _ => None,
        }
    }

    /// Start adding parts of `level` to `parts`, indexing those of that level already there.
    #[inline]
    pub(crate) fn begin(&mut self, parts: &[RunqPart], level: u32) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.slots.fill((0, 0));
            self.stamp = 1;
        }
        self.level = level;
        for (i, p) in parts.iter().enumerate() {
            if p.level == level {
                self.remember(p.holder, i);
            }
        }
    }

    #[inline]
    fn remember(&mut self, holder: u32, i: usize) {
        if let Some(k) = Self::key(holder) {
            if self.slots.len() <= k {
                self.slots.resize(k + 1, (0, 0));
            }
            self.slots[k] = (self.stamp, i as u32);
        }
    }

    /// [`add_runq`] at the level of [`Self::begin`]: the same parts in the same order.
    #[inline]
    pub(crate) fn add(&mut self, parts: &mut Vec<RunqPart>, holder: u32, ns: u64) {
        if ns == 0 {
            return;
        }
        let Some(k) = Self::key(holder) else {
            add_runq(parts, self.level, holder, ns);
            return;
        };
        match self.slots.get(k) {
            Some(&(stamp, i)) if stamp == self.stamp => parts[i as usize].ns += ns,
            _ => {
                self.remember(holder, parts.len());
                parts.push(RunqPart {
                    level: self.level,
                    holder,
                    ns,
                });
            }
        }
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
            let mut pool = BlockPool::default();
            for i in 0..n as u64 {
                // Disjoint periods [10 i, 10 i + 5), holders alternating (no merging).
                rq.push(
                    RqSeg {
                        start: 10 * i,
                        end: 10 * i + 5,
                        holder: (i % 2) as u32,
                    },
                    &mut capped,
                    &mut pool,
                );
            }
            assert_eq!(rq.len(), n);
            let all: Vec<KeptSeg> = rq.iter_from(0).copied().collect();
            assert_eq!(all.len(), n);
            for x in 0..10 * n as u64 + 20 {
                let want = all.partition_point(|seg| seg.end() <= x);
                assert_eq!(rq.first_ending_after(x), want, "n {n} x {x}");
                assert_eq!(rq.first_ending_after_from_front(x), want, "n {n} x {x}");
            }
        }
    }

    /// A copy (a checkpoint) shares the full blocks and is not changed by what the original
    /// writes after it, nor the original by the copy: merges into the last period and new
    /// periods copy only the block they write.
    #[test]
    fn copies_share_blocks_and_stay_apart() {
        let mut rq = TaskRq::default();
        let mut pool = BlockPool::default();
        let mut capped = 0;
        let seg = |i: u64, holder: u32| RqSeg {
            start: 10 * i,
            end: 10 * i + 5,
            holder,
        };
        for i in 0..300 {
            rq.push(seg(i, 1), &mut capped, &mut pool);
        }
        let copy = rq.clone();
        let periods = |q: &TaskRq| -> Vec<(u64, u64, u32)> {
            q.iter_from(0)
                .map(|s| (s.start, s.end(), s.holder))
                .collect()
        };
        let before = periods(&copy);
        // Merges into the last period (same holder, contiguous), then new blocks.
        rq.push(
            RqSeg {
                start: 2995,
                end: 2999,
                holder: 1,
            },
            &mut capped,
            &mut pool,
        );
        for i in 300..600 {
            rq.push(seg(i, 2), &mut capped, &mut pool);
        }
        assert_eq!(periods(&copy), before);
        assert_eq!(rq.get(299).end(), 2999);
        assert_eq!(copy.get(299).end(), 2995);
        // The two full blocks are still one copy; the third (written) is not.
        assert!(Arc::ptr_eq(&rq.blocks[0], &copy.blocks[0]));
        assert!(Arc::ptr_eq(&rq.blocks[1], &copy.blocks[1]));
        assert!(!Arc::ptr_eq(&rq.blocks[2], &copy.blocks[2]));
        // A trim of the original hands its shared blocks to no pool.
        let mut rq2 = rq.clone();
        drop(rq);
        rq2.clear(&mut pool);
        let free = pool.free.len();
        let mut copy = copy;
        copy.clear(&mut pool);
        assert!(
            pool.free.len() > free,
            "the last holder's blocks are reused"
        );
    }

    /// The block storage keeps exactly what a plain deque would, through appends (merged
    /// and not), front drops across block boundaries, and clears; emptied blocks go back
    /// to the pool and come out of it again.
    #[test]
    fn blocks_keep_what_a_deque_keeps() {
        let mut rq = TaskRq::default();
        let mut pool = BlockPool::default();
        let mut capped = 0;
        let mut want: VecDeque<(u64, u64, u32)> = VecDeque::new();
        let mut t = 0u64;
        for round in 0..2000u64 {
            // Every third period continues the last one behind the same holder (merged).
            let holder = (round / 3 % 5) as u32;
            let gap = if round % 3 == 0 { 7 } else { 0 };
            let start = t + gap;
            let end = start + 1 + round % 11;
            t = end;
            rq.push(RqSeg { start, end, holder }, &mut capped, &mut pool);
            match want.back_mut() {
                Some(last) if last.2 == holder && last.1 == start => last.1 = end,
                _ => want.push_back((start, end, holder)),
            }
            if round % 97 == 96 {
                let n = (round as usize * 7) % (want.len() + 1);
                rq.drop_front(n, &mut pool);
                want.drain(..n);
            }
            if round == 1500 {
                rq.clear(&mut pool);
                want.clear();
                assert!(!pool.free.is_empty());
            }
            let got: Vec<(u64, u64, u32)> = rq
                .iter_from(0)
                .map(|s| (s.start, s.end(), s.holder))
                .collect();
            assert_eq!(got, Vec::from(want.clone()), "round {round}");
            assert_eq!(rq.len(), want.len());
            if want.len() > 3 {
                let i = want.len() / 3;
                let tail: Vec<u64> = rq.iter_from(i).map(|s| s.start).collect();
                let want_tail: Vec<u64> = want.range(i..).map(|w| w.0).collect();
                assert_eq!(tail, want_tail);
                assert_eq!(rq.first_ending_after(want[i].0), i);
            }
        }
        assert_eq!(capped, 0);
        assert!(rq.blocks.len() <= rq.len() / BLOCK + 2);
    }

    /// The holder index adds exactly what the linear search adds, in the same order:
    /// parts of other levels and of the same level already there, idle, unknown and
    /// throttled holders, zero lengths, and many calls (stamps reused).
    #[test]
    fn part_index_adds_what_add_runq_adds() {
        let holders = [
            3,
            9,
            HOLDER_IDLE,
            3,
            HOLDER_UNKNOWN,
            0xC000_0005,
            70,
            9,
            0xC000_0005,
        ];
        let mut index = PartIndex::default();
        for round in 0..300u32 {
            let level = round % 4;
            let mut want = vec![
                RunqPart {
                    level: 0,
                    holder: 9,
                    ns: 1,
                },
                RunqPart {
                    level: level + 1,
                    holder: 3,
                    ns: 2,
                },
            ];
            if round % 3 == 0 {
                want.push(RunqPart {
                    level,
                    holder: 70,
                    ns: 5,
                });
            }
            let mut got = want.clone();
            index.begin(&got, level);
            for i in 0..(round % 23) as usize {
                let holder = holders[(i * 7 + round as usize) % holders.len()];
                let ns = (i as u64 * 13 + u64::from(round)) % 5;
                add_runq(&mut want, level, holder, ns);
                index.add(&mut got, holder, ns);
            }
            let key = |p: &RunqPart| (p.level, p.holder, p.ns);
            assert_eq!(
                got.iter().map(key).collect::<Vec<_>>(),
                want.iter().map(key).collect::<Vec<_>>(),
                "round {round}"
            );
        }
    }
}

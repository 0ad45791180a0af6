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
/// Safety cap on the runnable periods kept per thread (12 B each), as above.
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
    /// The holder's comm ([`crate::engine::nodes::NodeTable::holder_of`]), [`HOLDER_IDLE`],
    /// [`HOLDER_UNKNOWN`] or a throttled code.
    pub(crate) holder: u32,
}

/// A kept runnable period, as read back from a history: its start, its length (a longer
/// period is kept as several), its holder.
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

/// Up to [`BLOCK`] periods of one thread, 12 B each: starts relative to the block's base (a
/// period starting 2^32 ns or more after it goes to a new block), lengths and holders, in
/// separate arrays. A thread's periods since the oldest open wait can be millions (4.4 M
/// at once on busy-server), and 12 B instead of 16 is a quarter less of the largest part
/// of the run-queue mode's memory.
#[derive(Clone, Debug)]
struct PeriodBlock {
    base: u64,
    /// Periods used (the oldest kept one of a history's first block is at its `head`).
    n: u32,
    starts: [u32; BLOCK],
    lens: [u32; BLOCK],
    holders: [u32; BLOCK],
}

impl PeriodBlock {
    #[inline]
    fn seg(&self, o: usize) -> KeptSeg {
        KeptSeg {
            start: self.base + u64::from(self.starts[o]),
            len: self.lens[o],
            holder: self.holders[o],
        }
    }

    #[inline]
    fn end(&self, o: usize) -> u64 {
        self.base + u64::from(self.starts[o]) + u64::from(self.lens[o])
    }

    /// End of its newest period (a block in a history holds at least one).
    #[inline]
    fn last_end(&self) -> u64 {
        self.end(self.n as usize - 1)
    }

    /// `start` relative to the base, when this block has room for it.
    #[inline]
    fn room_for(&self, start: u64) -> Option<u32> {
        if self.n as usize == BLOCK {
            return None;
        }
        u32::try_from(start.checked_sub(self.base)?).ok()
    }
}

/// A sealed block of kept periods (no more are written into it), shared between an engine
/// and its checkpoints: the older blocks of a long history are one copy however many
/// checkpoints hold it.
type Block = Arc<PeriodBlock>;

/// Blocks freed by trims and ended threads, handed out again before any new allocation.
#[derive(Debug, Default)]
pub(crate) struct BlockPool {
    /// Sealed blocks no one else holds.
    free: Vec<Block>,
    /// Newest-block storage (boxed: handed to and taken back from [`TaskRq::tail`]
    /// without copying).
    #[allow(clippy::vec_box)]
    free_tails: Vec<Box<PeriodBlock>>,
}

/// A copy of an engine (a checkpoint) starts with no free blocks: the pool is only a cache.
impl Clone for BlockPool {
    fn clone(&self) -> Self {
        BlockPool::default()
    }
}

impl BlockPool {
    /// An empty newest block based at `base`.
    #[inline]
    fn take_tail(&mut self, base: u64) -> Box<PeriodBlock> {
        match self.free_tails.pop() {
            Some(mut b) => {
                b.base = base;
                b.n = 0;
                b
            }
            None => Box::new(PeriodBlock {
                base,
                n: 0,
                starts: [0; BLOCK],
                lens: [0; BLOCK],
                holders: [0; BLOCK],
            }),
        }
    }

    /// `tail` as a sealed block (its storage kept for the next newest block).
    #[inline]
    fn seal(&mut self, tail: Box<PeriodBlock>) -> Block {
        let sealed = match self.free.pop() {
            Some(mut b) => {
                // Only blocks no one else holds are given to the pool ([`Self::give`]), so
                // this writes in place.
                Arc::make_mut(&mut b).clone_from(&tail);
                b
            }
            None => Arc::new((*tail).clone()),
        };
        self.free_tails.push(tail);
        sealed
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
        if self.free_tails.len() > 2 * keep {
            self.free_tails.truncate(keep);
            self.free_tails.shrink_to_fit();
        }
    }
}

/// A place in a [`TaskRq`]: period `off` of block `block` (`block` = the number of blocks:
/// after the newest period).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RqPos {
    block: usize,
    off: usize,
}

/// A thread's runnable periods, as far back as an open wait can ask for them, oldest first:
/// from period `head` of block 0 on. Blocks are the sealed ones, then the newest (`tail`,
/// owned: written without the atomic check of a shared block at every period, and copied
/// whole by a checkpoint). Every block holds at least one period; a history with periods
/// has a `tail` (the newest period is in it); an empty one has no blocks.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskRq {
    sealed: VecDeque<Block>,
    tail: Option<Box<PeriodBlock>>,
    /// Offset of the oldest kept period in block 0.
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

    /// Number of blocks.
    #[inline]
    fn blocks(&self) -> usize {
        self.sealed.len() + usize::from(self.tail.is_some())
    }

    /// Block `b` (0 = the oldest).
    #[inline]
    fn block(&self, b: usize) -> Option<&PeriodBlock> {
        match self.sealed.get(b) {
            Some(blk) => Some(blk),
            None if b == self.sealed.len() => self.tail.as_deref(),
            None => None,
        }
    }

    /// First offset of block `b` still kept.
    #[inline]
    fn first_off(&self, b: usize) -> usize {
        if b == 0 {
            self.head
        } else {
            0
        }
    }

    /// The oldest kept period.
    #[inline]
    fn first(&self) -> Option<KeptSeg> {
        Some(self.block(0)?.seg(self.head))
    }

    /// Kept periods from `pos` on, oldest first.
    #[inline]
    pub(crate) fn iter_from(&self, pos: RqPos) -> impl Iterator<Item = KeptSeg> + '_ {
        let sealed = self
            .sealed
            .range(pos.block.min(self.sealed.len())..)
            .map(|b| &**b);
        sealed
            .chain(self.tail.as_deref())
            .skip(pos.block.saturating_sub(self.sealed.len()))
            .enumerate()
            .flat_map(move |(k, b)| {
                let lo = if k == 0 { pos.off } else { 0 };
                (lo..b.n as usize).map(move |o| b.seg(o))
            })
    }

    /// Drop block 0, back to `pool`.
    fn pop_first_block(&mut self, pool: &mut BlockPool) {
        match self.sealed.pop_front() {
            Some(b) => pool.give(b),
            None => {
                if let Some(t) = self.tail.take() {
                    pool.free_tails.push(t);
                }
            }
        }
        self.head = 0;
    }

    /// Drop the oldest kept period (the safety cap), its block back to `pool` once emptied.
    fn drop_first(&mut self, pool: &mut BlockPool) {
        if self.len == 0 {
            return;
        }
        self.head += 1;
        self.len -= 1;
        if self.block(0).is_some_and(|b| self.head == b.n as usize) {
            self.pop_first_block(pool);
        }
    }

    /// Drop the periods before `pos`, emptied blocks back to `pool`; returns how many.
    fn drop_before(&mut self, pos: RqPos, pool: &mut BlockPool) -> usize {
        if pos.block >= self.blocks() {
            let n = self.len;
            self.clear_blocks(pool);
            return n;
        }
        let mut dropped = 0;
        for _ in 0..pos.block {
            if let Some(b) = self.block(0) {
                dropped += b.n as usize - self.head;
            }
            self.pop_first_block(pool);
        }
        dropped += pos.off - self.head;
        self.head = pos.off;
        self.len -= dropped;
        dropped
    }

    fn clear_blocks(&mut self, pool: &mut BlockPool) {
        for b in self.sealed.drain(..) {
            pool.give(b);
        }
        if let Some(t) = self.tail.take() {
            pool.free_tails.push(t);
        }
        self.head = 0;
        self.len = 0;
    }

    /// Drop every kept period, blocks back to `pool`.
    fn clear(&mut self, pool: &mut BlockPool) {
        self.clear_blocks(pool);
        self.sealed.shrink_to(4);
        self.floor = 0;
    }

    /// Append one period.
    #[inline]
    fn push_back(&mut self, seg: KeptSeg, pool: &mut BlockPool) {
        let (tail, rel) = match self.tail.take() {
            Some(t) => match t.room_for(seg.start) {
                Some(rel) => (t, rel),
                None => {
                    self.sealed.push_back(pool.seal(t));
                    (pool.take_tail(seg.start), 0)
                }
            },
            None => (pool.take_tail(seg.start), 0),
        };
        let b = self.tail.insert(tail);
        let o = b.n as usize;
        b.starts[o] = rel;
        b.lens[o] = seg.len;
        b.holders[o] = seg.holder;
        b.n += 1;
        self.len += 1;
    }

    /// Append `seg`; returns how many new entries it took (0 when merged into the last).
    #[inline]
    fn push(&mut self, seg: RqSeg, capped: &mut u64, pool: &mut BlockPool) -> usize {
        let mut start = seg.start;
        if let Some(b) = self.tail.as_deref_mut() {
            let o = b.n as usize - 1;
            if b.holders[o] == seg.holder && b.end(o) == start {
                let room = u64::from(u32::MAX - b.lens[o]);
                let add = room.min(seg.end - start);
                b.lens[o] += add as u32;
                start += add;
            }
        }
        let mut added = 0;
        while start < seg.end {
            let len = (seg.end - start).min(u64::from(u32::MAX)) as u32;
            if self.len == TASK_RQ_CAP {
                if let Some(first) = self.first() {
                    self.floor = first.end();
                }
                self.drop_first(pool);
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

    /// Place of the first kept period ending after `x` (periods are disjoint and in time
    /// order). Searched from the newest back, doubling the step, over blocks and then in
    /// the block: a walk asks mostly about recent time, and the histories reach back to the
    /// oldest open wait (millions of periods on a busy host), where a plain binary search
    /// missed the cache at every step (14 % of busy-server's `chains`).
    #[inline]
    pub(crate) fn first_ending_after(&self, x: u64) -> RqPos {
        let b = gallop_back(0, self.blocks(), |j| self.block_ends_by(j, x));
        self.pos_in(b, x, true)
    }

    /// As [`Self::first_ending_after`], by binary search from the front (for trims, which
    /// cut far back).
    fn first_ending_after_from_front(&self, x: u64) -> RqPos {
        let b = partition(0, self.blocks(), |j| self.block_ends_by(j, x));
        self.pos_in(b, x, false)
    }

    /// Block `j`'s periods all end at or before `x`.
    #[inline]
    fn block_ends_by(&self, j: usize, x: u64) -> bool {
        self.block(j).is_some_and(|b| b.last_end() <= x)
    }

    /// The first period ending after `x` in block `b`, known to end after `x` (or the end).
    #[inline]
    fn pos_in(&self, b: usize, x: u64, from_back: bool) -> RqPos {
        let Some(blk) = self.block(b) else {
            return RqPos {
                block: self.blocks(),
                off: 0,
            };
        };
        let (lo, hi) = (self.first_off(b), blk.n as usize);
        let ends_by = |o: usize| blk.end(o) <= x;
        let off = if from_back {
            gallop_back(lo, hi, ends_by)
        } else {
            partition(lo, hi, ends_by)
        };
        RqPos { block: b, off }
    }
}

/// The first `i` in `lo..hi` for which `before(i)` is false (`before` is true then false
/// over the range), or `hi`; by binary search.
#[inline]
fn partition(mut lo: usize, mut hi: usize, before: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// As [`partition`], searched from `hi` back with a doubling step first.
#[inline]
fn gallop_back(lo: usize, hi: usize, before: impl Fn(usize) -> bool) -> usize {
    // Every index at or after `top` is not before.
    let mut top = hi;
    let mut step = 1;
    while top > lo {
        let j = top.saturating_sub(step).max(lo);
        if before(j) {
            // The answer is in (j, top].
            return partition(j + 1, top, before);
        }
        top = j;
        step *= 2;
    }
    lo
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
            let pos = rq.first_ending_after_from_front(waits_from);
            rq.drop_before(pos, &mut self.pool);
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

    /// Record that `holder` went on `cpu` at `ts` (run-queue attribution). A switch to a
    /// thread of the same holder (its comm) as the last one is not kept: the CPU was held
    /// alike since that one, and the splits of a runnable period add the same time behind
    /// the same holder either way (one piece instead of several).
    #[inline]
    pub(crate) fn push_cpu(&mut self, cpu: u32, ts: u64, holder: u32) {
        if cpu >= MAX_CPUS {
            return;
        }
        if self.cpus.len() <= cpu as usize {
            self.cpus.resize_with(cpu as usize + 1, CpuHist::default);
        }
        let c = &mut self.cpus[cpu as usize];
        if c.q.back().is_some_and(|&(_, last)| last == holder) {
            return;
        }
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

/// Holder codes below this are comms, indexed directly by [`PartIndex`] (others, the
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
    /// Slot of `holder`: idle, unknown, then comms; none for throttled codes.
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
impl TaskRq {
    /// Place of kept period `i` (0 = the oldest).
    fn pos_of(&self, i: usize) -> RqPos {
        let mut i = i + self.head;
        for b in 0..self.blocks() {
            let n = self.block(b).map_or(0, |blk| blk.n as usize);
            if i < n {
                return RqPos { block: b, off: i };
            }
            i -= n;
        }
        RqPos {
            block: self.blocks(),
            off: 0,
        }
    }

    /// Index (0 = the oldest kept) of the period at `pos`.
    fn index_of(&self, pos: RqPos) -> usize {
        let before: usize = (0..pos.block)
            .map(|b| self.block(b).map_or(0, |blk| blk.n as usize))
            .sum();
        before + pos.off - self.head
    }

    /// Kept period `i` (0 = the oldest).
    fn get(&self, i: usize) -> KeptSeg {
        let pos = self.pos_of(i);
        self.block(pos.block).map(|b| b.seg(pos.off)).unwrap()
    }

    /// Drop the `n` oldest kept periods.
    fn drop_front(&mut self, n: usize, pool: &mut BlockPool) {
        let pos = self.pos_of(n.min(self.len));
        self.drop_before(pos, pool);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The galloping search finds what a plain binary search finds, wherever `x` falls.
    #[test]
    fn first_ending_after_agrees_with_binary_search() {
        // 3 s apart: two periods per block (their starts within 2^32 ns of its base).
        for (n, spacing) in [0usize, 1, 2, 3, 7, 64, 1000, 7, 300].into_iter().zip([
            10u64,
            10,
            10,
            10,
            10,
            10,
            10,
            3_000_000_000,
            3_000_000_000,
        ]) {
            let mut rq = TaskRq::default();
            let mut capped = 0;
            let mut pool = BlockPool::default();
            for i in 0..n as u64 {
                // Disjoint periods [s i, s i + 5), holders alternating (no merging).
                rq.push(
                    RqSeg {
                        start: spacing * i,
                        end: spacing * i + 5,
                        holder: (i % 2) as u32,
                    },
                    &mut capped,
                    &mut pool,
                );
            }
            assert_eq!(rq.len(), n);
            let all: Vec<KeptSeg> = rq.iter_from(rq.pos_of(0)).collect();
            assert_eq!(all.len(), n);
            let probes = (0..10 * n as u64 + 20).chain(
                all.iter()
                    .flat_map(|s| [s.start, s.end() - 1, s.end(), s.end() + 9]),
            );
            for x in probes {
                let want = all.partition_point(|seg| seg.end() <= x);
                let got = rq.first_ending_after(x);
                assert_eq!(rq.index_of(got), want, "n {n} x {x}");
                assert_eq!(got, rq.pos_of(want), "n {n} x {x}");
                let got = rq.first_ending_after_from_front(x);
                assert_eq!(rq.index_of(got), want, "n {n} x {x}");
            }
            if spacing > u64::from(u32::MAX) / 2 {
                assert_eq!(rq.blocks(), n.div_ceil(2));
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
            q.iter_from(q.pos_of(0))
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
        // The two full blocks are still one copy; the third (the copy's newest, written by
        // the original after the copy) is not.
        assert_eq!(copy.sealed.len(), 2);
        assert!(Arc::ptr_eq(&rq.sealed[0], &copy.sealed[0]));
        assert!(Arc::ptr_eq(&rq.sealed[1], &copy.sealed[1]));
        assert_eq!(
            copy.tail.as_ref().map(|t| t.n),
            Some(300 - 2 * BLOCK as u32)
        );
        assert_eq!(rq.sealed[2].n as usize, BLOCK);
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
            // Now and then a gap of 5 s: the next period starts a new block.
            let gap = match round % 3 {
                _ if round % 401 == 400 => 5_000_000_000,
                0 => 7,
                _ => 0,
            };
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
                assert!(!pool.free.is_empty() && !pool.free_tails.is_empty());
            }
            let got: Vec<(u64, u64, u32)> = rq
                .iter_from(rq.pos_of(0))
                .map(|s| (s.start, s.end(), s.holder))
                .collect();
            assert_eq!(got, Vec::from(want.clone()), "round {round}");
            assert_eq!(rq.len(), want.len());
            if want.len() > 3 {
                let i = want.len() / 3;
                let tail: Vec<u64> = rq.iter_from(rq.pos_of(i)).map(|s| s.start).collect();
                let want_tail: Vec<u64> = want.range(i..).map(|w| w.0).collect();
                assert_eq!(tail, want_tail);
                assert_eq!(rq.index_of(rq.first_ending_after(want[i].0)), i);
                assert_eq!(rq.index_of(rq.first_ending_after(want[i].1)), i + 1);
            }
        }
        assert_eq!(capped, 0);
        // At most two partly used blocks, plus one per 5 s gap kept (periods 1601..2000).
        assert!(rq.blocks() <= rq.len() / BLOCK + 2 + 1);
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

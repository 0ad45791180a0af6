//! Run-queue attribution (CHAINS.md "Run-queue time"): per-CPU histories of who held each
//! CPU, per-thread runnable periods, and the split of runnable time by CPU holder.

use crate::engine::nodes::{HOLDER_IDLE, HOLDER_UNKNOWN};
use crate::engine::record::{RunqPart, WaitRecord};
use crate::engine::search::{gallop_back, partition};
use crate::engine::tasks::TaskIndex;
use chainrec_format::Tid;
use std::collections::VecDeque;
use std::sync::Arc;

/// Safety cap on the switch-ins kept per CPU (12 B each). Histories are trimmed to what
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

/// Periods per group of a sealed block: each group stores its first start whole and the
/// widths of its fields, so a search decodes at most one group (plus a step into the next)
/// and the widths follow the values near each other (busy-server: 43 bits a period with
/// widths per group of 16, 54 with one width per block of 128).
const GROUP: usize = 16;
/// Bytes of a sealed block before its group words: base (u64), end of its newest period
/// (u64), number of periods (u8).
const SEALED_HEADER: usize = 17;
/// Zero bytes after a sealed block's bits: every field is read as one unaligned u64 from
/// the byte it starts in (a field of width 0 may start just after the last byte).
const SEALED_PAD: usize = 8;

/// A sealed block of kept periods (no more are written into it), compressed, shared
/// between an engine and its checkpoints: the older blocks of a long history are one copy
/// however many checkpoints hold it. Sealed blocks are most of the run-queue mode's memory
/// (a thread's periods since the oldest open wait: millions on a busy host) and are only
/// read in time order, so they are bit-packed: per group of [`GROUP`] periods a word
/// (first start relative to the base: 32 bits; widths of the gaps, lengths and holders: 6
/// bits each; the group's first bit: 14 bits), then per period the gap since the previous
/// period's end (none for a group's first), the length and the holder + 2 (idle and
/// unknown, the two largest codes, become 1 and 0), each in its group's width. The
/// header keeps the base and the newest period's end, so the search over blocks decodes
/// nothing. One allocation (`Arc<[u8]>`).
#[derive(Clone, Debug)]
struct SealedBlock(Arc<[u8]>);

/// Width in bits of `v`.
#[inline]
fn bit_width(v: u64) -> u32 {
    64 - v.leading_zeros()
}

impl SealedBlock {
    /// `blk` (at least one period) encoded, `scratch` its buffer. Widths first, then the
    /// fields ORed into a zeroed buffer of the final size (the encoding runs once per 128
    /// periods: on a real recording's `chains` a byte-at-a-time writer took 7 %).
    fn encode(blk: &PeriodBlock, scratch: &mut Vec<u8>) -> SealedBlock {
        let n = blk.n as usize;
        let groups = n.div_ceil(GROUP);
        // Gap of period o since the end of period o - 1, relative to the base (periods are
        // disjoint and in time order, so below its start: < 2^32); 0 for the first.
        let mut gaps = [0u32; BLOCK];
        for (o, gap) in gaps[..n].iter_mut().enumerate().skip(1) {
            let prev_end = u64::from(blk.starts[o - 1]) + u64::from(blk.lens[o - 1]);
            *gap = (u64::from(blk.starts[o]) - prev_end) as u32;
        }
        let mut holders = [0u32; BLOCK];
        for (h, &holder) in holders[..n].iter_mut().zip(&blk.holders[..n]) {
            *h = holder.wrapping_add(2);
        }
        let width = |vals: &[u32]| bit_width(u64::from(vals.iter().fold(0, |acc, &v| acc | v)));
        let mut words = [0u64; BLOCK / GROUP];
        let mut bits = 0u64;
        for (g, word) in words[..groups].iter_mut().enumerate() {
            let (lo, hi) = (g * GROUP, n.min(g * GROUP + GROUP));
            let wg = width(&gaps[lo + 1..hi]);
            let wl = width(&blk.lens[lo..hi]);
            let wh = width(&holders[lo..hi]);
            *word = u64::from(blk.starts[lo])
                | u64::from(wg) << 32
                | u64::from(wl) << 38
                | u64::from(wh) << 44
                | bits << 50;
            bits += (hi - lo - 1) as u64 * u64::from(wg) + (hi - lo) as u64 * u64::from(wl + wh);
        }
        let data = SEALED_HEADER + 8 * groups;
        scratch.clear();
        scratch.resize(data + (bits as usize).div_ceil(8) + SEALED_PAD, 0);
        scratch[..8].copy_from_slice(&blk.base.to_le_bytes());
        scratch[8..16].copy_from_slice(&blk.last_end().to_le_bytes());
        scratch[16] = n as u8;
        for (g, w) in words[..groups].iter().enumerate() {
            let at = SEALED_HEADER + 8 * g;
            scratch[at..at + 8].copy_from_slice(&w.to_le_bytes());
        }
        // Fields least significant bit first, through a 64-bit accumulator written out 4
        // bytes at a time (no read-back of bytes just written: an OR into the buffer per
        // field stalled on store forwarding).
        let mut acc = 0u64;
        let mut fill = 0u64;
        let mut at = data;
        let mut put = |v: u32, w: u64| {
            // `fill` < 32 between calls and `w` <= 32.
            acc |= u64::from(v) << fill;
            fill += w;
            if fill >= 32 {
                scratch[at..at + 4].copy_from_slice(&(acc as u32).to_le_bytes());
                at += 4;
                acc >>= 32;
                fill -= 32;
            }
        };
        for (g, w) in words[..groups].iter().enumerate() {
            let (wg, wl, wh) = ((w >> 32) & 63, (w >> 38) & 63, (w >> 44) & 63);
            let (lo, hi) = (g * GROUP, n.min(g * GROUP + GROUP));
            for o in lo..hi {
                if o > lo {
                    put(gaps[o], wg);
                }
                put(blk.lens[o], wl);
                put(holders[o], wh);
            }
        }
        // The last < 32 bits (the padding has room for 8 bytes).
        scratch[at..at + 8].copy_from_slice(&acc.to_le_bytes());
        SealedBlock(Arc::from(&scratch[..]))
    }

    #[inline]
    fn u64_at(&self, at: usize) -> u64 {
        let mut b = [0; 8];
        b.copy_from_slice(&self.0[at..at + 8]);
        u64::from_le_bytes(b)
    }

    #[inline]
    fn base(&self) -> u64 {
        self.u64_at(0)
    }

    #[inline]
    fn last_end(&self) -> u64 {
        self.u64_at(8)
    }

    #[inline]
    fn n(&self) -> usize {
        usize::from(self.0[16])
    }

    /// Group `g`'s word.
    #[inline]
    fn group(&self, g: usize) -> u64 {
        self.u64_at(SEALED_HEADER + 8 * g)
    }

    /// First start of group `g`, relative to the base.
    #[inline]
    fn anchor(&self, g: usize) -> u64 {
        self.group(g) & u64::from(u32::MAX)
    }

    /// Periods from `from` on, oldest first.
    #[inline]
    fn iter_from(&self, from: usize) -> SealedIter<'_> {
        let g = from / GROUP;
        let data = SEALED_HEADER + 8 * self.n().div_ceil(GROUP);
        let mut it = SealedIter {
            blk: self,
            bits: &self.0[data..],
            base: self.base(),
            n: self.n(),
            o: g * GROUP,
            bit: 0,
            prev_end: 0,
            gap_width: 0,
            len_width: 0,
            holder_width: 0,
            gap_mask: 0,
            len_mask: 0,
            holder_mask: 0,
            one_load: true,
        };
        for _ in g * GROUP..from {
            it.next();
        }
        it
    }

    /// Offset of the first period ending after `x` (or `n`).
    #[inline]
    fn first_ending_after(&self, x: u64) -> usize {
        let Some(rel) = x.checked_sub(self.base()) else {
            // Every period starts at or after the base and is at least 1 ns long.
            return 0;
        };
        // Periods before the last group starting at or before x end by its start.
        let groups = self.n().div_ceil(GROUP);
        let g = (1..groups)
            .rev()
            .find(|&g| self.anchor(g) <= rel)
            .unwrap_or(0);
        for (k, seg) in self.iter_from(g * GROUP).enumerate() {
            if seg.end() > x {
                return g * GROUP + k;
            }
        }
        self.n()
    }
}

/// Decodes a [`SealedBlock`]'s periods in order.
struct SealedIter<'a> {
    blk: &'a SealedBlock,
    /// The block's bits (and padding).
    bits: &'a [u8],
    base: u64,
    n: usize,
    /// Next period.
    o: usize,
    /// Its first bit.
    bit: usize,
    /// End of the period before it, relative to the base.
    prev_end: u64,
    /// The current group's widths and masks.
    gap_width: u32,
    len_width: u32,
    holder_width: u32,
    gap_mask: u64,
    len_mask: u64,
    holder_mask: u64,
    /// A period's fields (and up to 7 bits before them) fit in one u64.
    one_load: bool,
}

impl SealedIter<'_> {
    /// The u64 at the byte holding bit `bit`, shifted to start at it (at least 57 bits).
    #[inline]
    fn load(&self, bit: usize) -> u64 {
        let mut b = [0; 8];
        b.copy_from_slice(&self.bits[bit / 8..bit / 8 + 8]);
        u64::from_le_bytes(b) >> (bit % 8)
    }
}

impl Iterator for SealedIter<'_> {
    type Item = KeptSeg;

    #[inline]
    fn next(&mut self) -> Option<KeptSeg> {
        if self.o >= self.n {
            return None;
        }
        let first = self.o % GROUP == 0;
        if first {
            let w = self.blk.group(self.o / GROUP);
            let mask = |width: u64| (1u64 << width) - 1;
            let (wg, wl, wh) = ((w >> 32) & 63, (w >> 38) & 63, (w >> 44) & 63);
            self.gap_width = wg as u32;
            self.len_width = wl as u32;
            self.holder_width = wh as u32;
            self.gap_mask = mask(wg);
            self.len_mask = mask(wl);
            self.holder_mask = mask(wh);
            self.one_load = wg + wl + wh <= 57;
            self.bit = (w >> 50) as usize;
            self.prev_end = w & u64::from(u32::MAX);
        }
        let gap_width = if first { 0 } else { self.gap_width };
        let (gap, len, holder) = if self.one_load {
            let v = self.load(self.bit);
            let gap = v & self.gap_mask;
            let v = v >> gap_width;
            (
                gap,
                v & self.len_mask,
                (v >> self.len_width) & self.holder_mask,
            )
        } else {
            let gap = self.load(self.bit) & self.gap_mask;
            let at = self.bit + gap_width as usize;
            let len = self.load(at) & self.len_mask;
            let holder = self.load(at + self.len_width as usize) & self.holder_mask;
            (gap, len, holder)
        };
        // A group's first period has no gap (its start is the group's word).
        let gap = if first { 0 } else { gap };
        self.bit += (gap_width + self.len_width + self.holder_width) as usize;
        let start = self.prev_end + gap;
        self.prev_end = start + len;
        self.o += 1;
        Some(KeptSeg {
            start: self.base + start,
            len: len as u32,
            holder: (holder as u32).wrapping_sub(2),
        })
    }
}

/// A block of a history, sealed or the newest.
#[derive(Clone, Copy)]
enum BlockRef<'a> {
    Sealed(&'a SealedBlock),
    Tail(&'a PeriodBlock),
}

impl<'a> BlockRef<'a> {
    #[inline]
    fn n(self) -> usize {
        match self {
            BlockRef::Sealed(b) => b.n(),
            BlockRef::Tail(b) => b.n as usize,
        }
    }

    #[inline]
    fn last_end(self) -> u64 {
        match self {
            BlockRef::Sealed(b) => b.last_end(),
            BlockRef::Tail(b) => b.last_end(),
        }
    }

    #[inline]
    fn iter_from(self, from: usize) -> BlockIter<'a> {
        match self {
            BlockRef::Sealed(b) => BlockIter::Sealed(b.iter_from(from)),
            BlockRef::Tail(b) => BlockIter::Tail(b, from),
        }
    }

    /// Period `o`.
    #[inline]
    fn seg(self, o: usize) -> Option<KeptSeg> {
        match self {
            BlockRef::Sealed(b) => b.iter_from(o).next(),
            BlockRef::Tail(b) => (o < b.n as usize).then(|| b.seg(o)),
        }
    }
}

/// A block's periods from some offset on.
enum BlockIter<'a> {
    Sealed(SealedIter<'a>),
    Tail(&'a PeriodBlock, usize),
}

impl Iterator for BlockIter<'_> {
    type Item = KeptSeg;

    #[inline(always)]
    fn next(&mut self) -> Option<KeptSeg> {
        match self {
            BlockIter::Sealed(it) => it.next(),
            BlockIter::Tail(b, o) => {
                if *o >= b.n as usize {
                    return None;
                }
                *o += 1;
                Some(b.seg(*o - 1))
            }
        }
    }
}

/// A thread's kept periods from a place on ([`TaskRq::iter_from`]).
pub(crate) struct RqIter<'a> {
    rq: &'a TaskRq,
    block: usize,
    inner: Option<BlockIter<'a>>,
}

impl Iterator for RqIter<'_> {
    type Item = KeptSeg;

    #[inline(always)]
    fn next(&mut self) -> Option<KeptSeg> {
        loop {
            if let Some(seg) = self.inner.as_mut()?.next() {
                return Some(seg);
            }
            self.block += 1;
            self.inner = self.rq.block(self.block).map(|b| b.iter_from(0));
        }
    }
}

/// Newest-block storage freed by trims and ended threads, handed out again before any new
/// allocation (sealed blocks, of varying sizes, go back to the allocator).
#[derive(Debug, Default)]
pub(crate) struct BlockPool {
    /// Boxed: handed to and taken back from [`TaskRq::tail`] without copying.
    #[allow(clippy::vec_box)]
    free_tails: Vec<Box<PeriodBlock>>,
    /// Scratch of [`SealedBlock::encode`].
    scratch: Vec<u8>,
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
    fn seal(&mut self, tail: Box<PeriodBlock>) -> SealedBlock {
        let sealed = SealedBlock::encode(&tail, &mut self.scratch);
        self.free_tails.push(tail);
        sealed
    }

    /// Give most free blocks back to the allocator once far more are free than in use.
    fn shrink(&mut self, in_use: usize) {
        let keep = in_use / 4 + 64;
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
/// from period `head` of block 0 on. Blocks are the sealed ones (compressed, shared with
/// checkpoints), then the newest (`tail`, owned: written without the atomic check of a
/// shared block at every period, and copied whole by a checkpoint). Every block holds at
/// least one period; a history with periods has a `tail` (the newest period is in it); an
/// empty one has no blocks.
#[derive(Clone, Debug, Default)]
pub(crate) struct TaskRq {
    sealed: VecDeque<SealedBlock>,
    tail: Option<Box<PeriodBlock>>,
    /// Offset of the oldest kept period in block 0.
    head: usize,
    len: usize,
    /// Periods ending before this were dropped by [`TASK_RQ_CAP`] or by a trim cut at the
    /// histories' reach (`machine::HISTORY_REACH_NS`; other trims drop only what no open
    /// wait can ask for): earlier time cannot be split.
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
    fn block(&self, b: usize) -> Option<BlockRef<'_>> {
        match self.sealed.get(b) {
            Some(blk) => Some(BlockRef::Sealed(blk)),
            None if b == self.sealed.len() => self.tail.as_deref().map(BlockRef::Tail),
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
        self.block(0)?.seg(self.head)
    }

    /// Kept periods from `pos` on, oldest first.
    #[inline]
    pub(crate) fn iter_from(&self, pos: RqPos) -> RqIter<'_> {
        RqIter {
            rq: self,
            block: pos.block,
            inner: self.block(pos.block).map(|b| b.iter_from(pos.off)),
        }
    }

    /// Drop block 0, back to `pool`.
    fn pop_first_block(&mut self, pool: &mut BlockPool) {
        if self.sealed.pop_front().is_none() {
            if let Some(t) = self.tail.take() {
                pool.free_tails.push(t);
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
        if self.block(0).is_some_and(|b| self.head == b.n()) {
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
                dropped += b.n() - self.head;
            }
            self.pop_first_block(pool);
        }
        dropped += pos.off - self.head;
        self.head = pos.off;
        self.len -= dropped;
        dropped
    }

    fn clear_blocks(&mut self, pool: &mut BlockPool) {
        self.sealed.clear();
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
                    self.floor = self.floor.max(first.end());
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
        let lo = self.first_off(b);
        let off = match self.block(b) {
            None => {
                return RqPos {
                    block: self.blocks(),
                    off: 0,
                }
            }
            // Ends are in order: the block's first ending after x, or the first kept.
            Some(BlockRef::Sealed(blk)) => blk.first_ending_after(x).max(lo),
            Some(BlockRef::Tail(blk)) => {
                let ends_by = |o: usize| blk.end(o) <= x;
                if from_back {
                    gallop_back(lo, blk.n as usize, ends_by)
                } else {
                    partition(lo, blk.n as usize, ends_by)
                }
            }
        };
        RqPos { block: b, off }
    }
}

/// Switch-ins per block of a CPU's history.
const CPU_BLOCK: usize = 512;

/// Up to [`CPU_BLOCK`] switch-ins of one CPU, 8 B each: times relative to the block's base
/// (one 2^32 ns or more after it goes to a new block) and holder codes. Blocks, not a
/// deque that doubles: busy100m keeps ~4 M switch-ins at once, and a doubling deque of
/// 12 B entries held up to twice their room (9 MB of busy20m's peak; 3 MB in blocks).
#[derive(Clone, Debug)]
struct SwitchBlock {
    base: u64,
    /// Switch-ins used (the oldest kept one of a history's first block is at its `head`).
    n: u32,
    offs: [u32; CPU_BLOCK],
    holders: [u32; CPU_BLOCK],
}

impl SwitchBlock {
    #[inline]
    fn ts(&self, o: usize) -> u64 {
        self.base + u64::from(self.offs[o])
    }
}

/// A CPU's switch-ins, oldest first: from switch-in `head` of block 0 on. Every block
/// holds at least one.
#[derive(Clone, Debug, Default)]
struct CpuHist {
    blocks: VecDeque<Box<SwitchBlock>>,
    head: usize,
    len: usize,
}

impl CpuHist {
    /// Holder of the newest switch-in.
    #[inline]
    fn last_holder(&self) -> Option<u32> {
        let b = self.blocks.back()?;
        Some(b.holders[b.n as usize - 1])
    }

    #[inline]
    fn push(&mut self, ts: u64, holder: u32) {
        let room = self.blocks.back_mut().and_then(|b| {
            let off = u32::try_from(ts.checked_sub(b.base)?).ok()?;
            ((b.n as usize) < CPU_BLOCK).then_some((b, off))
        });
        let (b, off) = match room {
            Some(r) => r,
            None => {
                self.blocks.push_back(Box::new(SwitchBlock {
                    base: ts,
                    n: 0,
                    offs: [0; CPU_BLOCK],
                    holders: [0; CPU_BLOCK],
                }));
                (self.blocks.back_mut().expect("just pushed"), 0)
            }
        };
        b.offs[b.n as usize] = off;
        b.holders[b.n as usize] = holder;
        b.n += 1;
        self.len += 1;
    }

    /// Drop the `n` oldest switch-ins.
    fn drop_front(&mut self, mut n: usize) {
        n = n.min(self.len);
        self.len -= n;
        while n > 0 {
            let in_first = self.blocks[0].n as usize - self.head;
            if n < in_first {
                self.head += n;
                return;
            }
            n -= in_first;
            self.blocks.pop_front();
            self.head = 0;
        }
    }

    /// Number of switch-ins at or before `ts` (they are in time order).
    fn count_at_or_before(&self, ts: u64) -> usize {
        let mut count = 0;
        for (i, b) in self.blocks.iter().enumerate() {
            let from = if i == 0 { self.head } else { 0 };
            let n = b.n as usize;
            if b.ts(n - 1) <= ts {
                count += n - from;
                continue;
            }
            return count + b.offs[from..n].partition_point(|&o| b.base + u64::from(o) <= ts);
        }
        count
    }

    /// Each switch-in, newest first, as (time, holder), until `f` says stop (false).
    #[inline]
    fn rev_until(&self, mut f: impl FnMut(u64, u32) -> bool) {
        for (i, b) in self.blocks.iter().enumerate().rev() {
            let from = if i == 0 { self.head } else { 0 };
            for o in (from..b.n as usize).rev() {
                if !f(b.ts(o), b.holders[o]) {
                    return;
                }
            }
        }
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
    /// Every thread's runnable periods are complete only from `to` on (a trim is about to
    /// drop periods an open wait could still ask for).
    pub(crate) fn raise_floors(&mut self, to: u64) {
        for rq in &mut self.task_rq {
            rq.floor = rq.floor.max(to);
        }
    }

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
            let n = c.count_at_or_before(runnable_from);
            c.drop_front(n.saturating_sub(1));
            kept += c.len;
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
        if c.last_holder() == Some(holder) {
            return;
        }
        if c.len == CPU_HISTORY_CAP {
            c.drop_front(1);
            self.capped += 1;
        } else {
            self.kept += 1;
        }
        c.push(ts, holder);
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
            c.rev_until(|ts, holder| {
                if ts >= hi {
                    return true;
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
                ts > r0
            });
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
            let n = self.block(b).map_or(0, |blk| blk.n());
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
            .map(|b| self.block(b).map_or(0, |blk| blk.n()))
            .sum();
        before + pos.off - self.head
    }

    /// Kept period `i` (0 = the oldest).
    fn get(&self, i: usize) -> KeptSeg {
        let pos = self.pos_of(i);
        self.block(pos.block).and_then(|b| b.seg(pos.off)).unwrap()
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
        assert!(Arc::ptr_eq(&rq.sealed[0].0, &copy.sealed[0].0));
        assert!(Arc::ptr_eq(&rq.sealed[1].0, &copy.sealed[1].0));
        assert_eq!(
            copy.tail.as_ref().map(|t| t.n),
            Some(300 - 2 * BLOCK as u32)
        );
        assert_eq!(rq.sealed[2].n(), BLOCK);
        // Clearing or dropping the original leaves the copy's shared blocks whole.
        let mut rq2 = rq.clone();
        drop(rq);
        rq2.clear(&mut pool);
        assert_eq!(periods(&copy), before);
        assert_eq!(Arc::strong_count(&copy.sealed[0].0), 1);
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
                assert!(!pool.free_tails.is_empty());
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

    /// Sealed blocks give back exactly the periods written, whatever the widths: lengths
    /// from 1 ns to u32::MAX, gaps from 0 to seconds, holders from 0 to the throttled, idle
    /// and unknown codes, blocks cut short by a start 2^32 ns after their base; and the
    /// search in a sealed block finds what a binary search over them finds.
    #[test]
    fn sealed_blocks_decode_what_was_written() {
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut rq = TaskRq::default();
        let mut pool = BlockPool::default();
        let mut capped = 0;
        let mut want: Vec<(u64, u64, u32)> = Vec::new();
        let mut t = 1_000u64;
        for i in 0..5000u64 {
            let r = next();
            let gap = match r % 7 {
                0 => 0,
                1 => r >> 60,
                2 => (r >> 40) % 100_000,
                3 => (r >> 30) % 5_000_000_000,
                _ => 1 + (r >> 50) % 3000,
            };
            let len = match (r >> 8) % 9 {
                0 => u64::from(u32::MAX),
                1 => 1,
                2 => (r >> 20) % 10_000_000_000 + 1,
                _ => (r >> 33) % 70_000 + 1,
            };
            let holder = match (r >> 16) % 11 {
                0 => HOLDER_IDLE,
                1 => HOLDER_UNKNOWN,
                2 => 0xC000_0000 + (i as u32 % 5),
                3 => 0,
                _ => (r >> 24) as u32 % 9000,
            };
            let (start, end) = (t + gap, t + gap + len);
            t = end;
            rq.push(RqSeg { start, end, holder }, &mut capped, &mut pool);
            // As `push` keeps them: merged into the last when contiguous behind the same
            // holder (up to u32::MAX long), longer ones cut.
            let mut s = start;
            if let Some(last) = want.last_mut() {
                if last.2 == holder && last.1 == s {
                    let add = (u64::from(u32::MAX) - (last.1 - last.0)).min(end - s);
                    last.1 += add;
                    s += add;
                }
            }
            while s < end {
                let e = end.min(s + u64::from(u32::MAX));
                want.push((s, e, holder));
                s = e;
            }
        }
        assert!(rq.sealed.len() > 20);
        let got: Vec<(u64, u64, u32)> = rq
            .iter_from(rq.pos_of(0))
            .map(|s| (s.start, s.end(), s.holder))
            .collect();
        assert_eq!(got, want);
        for i in (0..want.len()).step_by(7) {
            let (s, e, _) = want[i];
            for x in [s.saturating_sub(1), s, e - 1, e, e + 1] {
                let expect = want.partition_point(|w| w.1 <= x);
                assert_eq!(rq.index_of(rq.first_ending_after(x)), expect, "x {x}");
                let from_front = rq.first_ending_after_from_front(x);
                assert_eq!(rq.index_of(from_front), expect, "x {x}");
                let rest: Vec<u64> = rq.iter_from(from_front).take(20).map(|s| s.start).collect();
                let want_rest: Vec<u64> = want[expect..].iter().take(20).map(|w| w.0).collect();
                assert_eq!(rest, want_rest, "x {x}");
            }
        }
        assert_eq!(capped, 0);
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

    /// A CPU history answers as a plain list of its switch-ins would: across blocks, across
    /// a base more than 2^32 ns back, after drops from the front.
    #[test]
    fn cpu_history_blocks_answer_as_a_list() {
        // Spacings below and above 2^32 ns / CPU_BLOCK, and one gap of 5 s.
        let mut times = Vec::new();
        let mut t = 1_000u64;
        for i in 0..3 * CPU_BLOCK as u64 + 17 {
            t += if i == 700 {
                5_000_000_000
            } else {
                3 + (i % 5) * 9_000_000
            };
            times.push(t);
        }
        let mut hist = CpuHist::default();
        let mut list: Vec<(u64, u32)> = Vec::new();
        for (i, &ts) in times.iter().enumerate() {
            hist.push(ts, i as u32);
            list.push((ts, i as u32));
        }
        assert!(hist.blocks.len() > 3, "{} blocks", hist.blocks.len());
        for drop in [0usize, 1, 5, CPU_BLOCK - 6, 1, 300, 400, 10_000] {
            hist.drop_front(drop);
            list.drain(..drop.min(list.len()));
            assert_eq!(hist.len, list.len());
            assert_eq!(hist.last_holder(), list.last().map(|e| e.1));
            let mut seen = Vec::new();
            hist.rev_until(|ts, h| {
                seen.push((ts, h));
                true
            });
            seen.reverse();
            assert_eq!(seen, list);
            for probe in [
                0,
                1_000,
                times[0],
                times[600],
                times[600] + 1,
                times[701] - 1,
                u64::MAX,
            ] {
                let want = list.partition_point(|e| e.0 <= probe);
                assert_eq!(
                    hist.count_at_or_before(probe),
                    want,
                    "probe {probe}, drop {drop}"
                );
            }
            // Stopping early stops.
            let mut n = 0;
            hist.rev_until(|_, _| {
                n += 1;
                n < 3
            });
            assert_eq!(n, list.len().min(3));
        }
        assert!(hist.blocks.is_empty());
    }
}

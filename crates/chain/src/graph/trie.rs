//! The path trie of the folded views: every distinct path prefix is an entry
//! `{parent, node, weight}` (12 bytes; weights of 4.3 s or more aside) stored in
//! fixed-size chunks that never move, found through an open-addressing index of `u32`
//! slots (entry id + hash fingerprint, linear probing, load 8/15 to 4/5 once it grows
//! by half). About 18 bytes per entry in total; growing the index rebuilds it from the
//! entries (no old copy is kept), and the entries never double.
//!
//! Batches are inserted level by level across many independent paths, with the index
//! slot and then the entry of each lookup prefetched a few lookups ahead, so that the
//! cache misses of different paths overlap instead of following one another.

use crate::graph::paths::PathBatch;
use rustc_hash::FxHashMap;

/// `parent` of a root entry.
pub(crate) const NO_PARENT: u32 = u32::MAX;

const CHUNK_BITS: u32 = 15;
const CHUNK: usize = 1 << CHUNK_BITS;
const MIN_SLOTS: usize = 1 << 10;
/// Index size (8 MB) from which it grows by half, not by doubling.
const HALF_STEPS_FROM: usize = 1 << 21;
/// Lookups between the prefetch of an index slot and its probe, and between the probe
/// (which prefetches the candidate entry) and the use of that entry.
const DIST: usize = 8;
const NONE: u32 = u32::MAX;

/// One trie entry: the path to `parent`, then `node`; `weight` nanoseconds end here.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) parent: u32,
    pub(crate) node: u32,
    pub(crate) weight: u64,
}

/// An entry as stored: 12 bytes, not 16. A weight of [`BIG`] ns or more (4.3 s: a few
/// heavy paths) is kept in [`PathTrie::big`] instead; the output's distinct lines are
/// the trie's entries (13 M on a 100 M-event busy-server trace), so each byte is 13 MB.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct Stored {
    parent: u32,
    node: u32,
    /// The weight, or [`BIG`]: look it up in [`PathTrie::big`].
    weight: u32,
}

/// [`Stored::weight`] of an entry whose weight is in [`PathTrie::big`].
const BIG: u32 = u32::MAX;

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub(crate) struct PathTrie {
    chunks: Vec<Box<[Stored]>>,
    /// Weights of [`BIG`] ns or more, by entry id.
    big: FxHashMap<u32, u64>,
    len: u32,
    /// Slots: 0 = empty, else `fingerprint << bits | (id + 1)`. Any length (not a power of
    /// two): from 2 M slots on it grows by half, not by doubling, so that a large index is
    /// on average a sixth smaller (busy20m's 3.5 M entries: 4.7 M slots, 19 MB, not 8.4 M).
    index: Vec<u32>,
    /// Bits of the id part of a slot: `2^bits` > the number of slots.
    bits: u32,
    // Scratch buffers of `apply`, kept to avoid reallocation.
    active: Vec<u32>,
    cursor: Vec<u32>,
    hashes: Vec<u64>,
    cands: Vec<u32>,
    parents: Vec<u32>,
    ids: Vec<u32>,
    waiting: Vec<Waiting>,
    next: Vec<(u32, u32, u32)>,
}

#[inline]
fn hash(parent: u32, node: u32) -> u64 {
    let k = ((parent as u64) << 32) | node as u64;
    let m = (k ^ 0x2545_F491_4F6C_DD1D) as u128 * 0x9E37_79B9_7F4A_7C15u128;
    (m >> 64) as u64 ^ m as u64
}

#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching is only a hint; it never faults, whatever the address.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

impl PathTrie {
    /// Number of entries.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Entry `id`.
    #[inline]
    pub(crate) fn get(&self, id: u32) -> Entry {
        self.entry(id, self.stored(id))
    }

    /// Where entry `id` is stored (for a prefetch).
    #[inline]
    pub(crate) fn addr(&self, id: u32) -> *const u8 {
        (self.stored(id) as *const Stored).cast()
    }

    #[inline]
    fn stored(&self, id: u32) -> &Stored {
        &self.chunks[(id >> CHUNK_BITS) as usize][id as usize & (CHUNK - 1)]
    }

    #[inline]
    fn stored_mut(&mut self, id: u32) -> &mut Stored {
        &mut self.chunks[(id >> CHUNK_BITS) as usize][id as usize & (CHUNK - 1)]
    }

    #[inline]
    fn entry(&self, id: u32, s: &Stored) -> Entry {
        let weight = if s.weight == BIG {
            self.big.get(&id).copied().unwrap_or(0)
        } else {
            u64::from(s.weight)
        };
        Entry {
            parent: s.parent,
            node: s.node,
            weight,
        }
    }

    /// Add `w` ns to entry `id`'s weight.
    #[inline]
    pub(crate) fn add_weight(&mut self, id: u32, w: u64) {
        let s = self.stored_mut(id);
        let sum = u64::from(s.weight) + w;
        if s.weight != BIG && sum < u64::from(BIG) {
            s.weight = sum as u32;
            return;
        }
        let small = if s.weight == BIG {
            0
        } else {
            u64::from(s.weight)
        };
        s.weight = BIG;
        *self.big.entry(id).or_insert(0) += small + w;
    }

    /// All entries in id order (a parent always comes before its children).
    pub(crate) fn iter(&self) -> impl Iterator<Item = Entry> + '_ {
        let n = self.len();
        self.chunks
            .iter()
            .flat_map(|c| c.iter())
            .take(n)
            .enumerate()
            .map(|(id, s)| self.entry(id as u32, s))
    }

    /// Bytes held by entries and index (capacity, not just use).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.chunks.len() * CHUNK * size_of::<Stored>()
            + self.index.capacity() * 4
            + self.big.capacity() * 16
    }

    /// An upper bound of [`Self::heap_bytes`] after inserting up to `new` more entries
    /// (a batch of `new` steps): the chunks they need and the index grown as insertion
    /// would grow it. A spilling fold writes the trie out before a batch that could take
    /// it past its budget, rather than after an index growth already did (busy20m with a
    /// 64 MiB budget: a 74 MB trie at the peak, index grown by half just before the check).
    /// Room kept from before [`Self::empty_keeping_room`] is not counted: only what `len()
    /// + new` entries need.
    pub(crate) fn heap_bytes_after(&self, new: usize) -> usize {
        let n = self.len() + new;
        let chunks = n.div_ceil(CHUNK);
        let mut slots = if self.index.is_empty() {
            Self::slots_for(self.len() + 1)
        } else {
            self.index.len()
        };
        while n * 5 > slots * 4 && slots < u32::MAX as usize {
            slots = Self::grown(slots);
        }
        chunks * CHUNK * size_of::<Stored>() + slots * 4 + self.big.capacity() * 16
    }

    /// Empty the trie but keep its entry chunks and its index at their size: a spilling
    /// fold fills it to the same size again, and this spares it the index's regrowth
    /// (a rebuild at each size step) and fresh pages for every run.
    pub(crate) fn empty_keeping_room(&mut self) {
        self.len = 0;
        self.big.clear();
        self.index.fill(0);
    }

    /// Visit every entry in id order with the label `f` gave its parent (`None` for a
    /// root), labelling it with what `f` returns; the labels are written over the entries
    /// themselves (no array beside the trie at the moment it is largest), so the trie is
    /// left empty ([`Self::empty_keeping_room`]). Stops at `f`'s first error.
    pub(crate) fn drain_labelled<E>(
        &mut self,
        mut f: impl FnMut(Entry, Option<(u32, u32)>) -> Result<(u32, u32), E>,
    ) -> Result<(), E> {
        let mut result = Ok(());
        for id in 0..self.len {
            let s = *self.stored(id);
            let e = self.entry(id, &s);
            let up = (s.parent != NO_PARENT).then(|| {
                // The parent (a smaller id) holds its label by now.
                let p = self.stored(s.parent);
                (p.parent, p.weight)
            });
            match f(e, up) {
                Ok((a, b)) => {
                    let m = self.stored_mut(id);
                    m.parent = a;
                    m.weight = b;
                }
                Err(err) => {
                    result = Err(err);
                    break;
                }
            }
        }
        self.empty_keeping_room();
        result
    }

    #[inline]
    fn slot_of(&self, h: u64) -> usize {
        // The high half of the hash scaled to the index (the fingerprint takes the low half).
        (((h >> 32) * self.index.len() as u64) >> 32) as usize
    }

    #[inline]
    fn fp_of(&self, h: u64) -> u32 {
        // The low bits of the hash, above the id bits (none when ids need all 32 bits).
        (h as u32).checked_shl(self.bits).unwrap_or(0)
    }

    #[inline]
    fn id_mask(&self) -> u32 {
        (1u32.checked_shl(self.bits).unwrap_or(0)).wrapping_sub(1)
    }

    /// The id of `(parent, node)`, inserting a new entry when absent.
    #[inline]
    pub(crate) fn step(&mut self, parent: u32, node: u32) -> u32 {
        let h = hash(parent, node);
        self.find_or_insert(parent, node, h)
    }

    /// Linear probe for `h`: the first entry id whose fingerprint matches and that
    /// `accept` takes, or the empty slot where the probe ended.
    #[inline(always)]
    fn probe(&self, h: u64, mut accept: impl FnMut(u32) -> bool) -> Result<u32, usize> {
        let (fp, idm) = (self.fp_of(h), self.id_mask());
        let len = self.index.len();
        let mut i = self.slot_of(h);
        loop {
            let s = self.index[i];
            if s == 0 {
                return Err(i);
            }
            if s & !idm == fp && accept((s & idm) - 1) {
                return Ok((s & idm) - 1);
            }
            i += 1;
            if i == len {
                i = 0;
            }
        }
    }

    /// First entry in the probe sequence of `h` whose fingerprint matches, without
    /// checking its key (`NONE` if the probe reaches an empty slot first).
    #[inline]
    fn candidate(&self, h: u64) -> u32 {
        if self.index.is_empty() {
            return NONE;
        }
        self.probe(h, |_| true).unwrap_or(NONE)
    }

    fn find_or_insert(&mut self, parent: u32, node: u32, h: u64) -> u32 {
        if self.index.is_empty() {
            self.rebuild(Self::slots_for(self.len as usize + 1));
        }
        let i = match self.probe(h, |id| {
            let e = self.stored(id);
            e.parent == parent && e.node == node
        }) {
            Ok(id) => return id,
            Err(empty) => empty,
        };
        let fp = self.fp_of(h);
        let id = self.len;
        assert!(id < u32::MAX - 1, "path trie full");
        // A new chunk when the id is past those held (a cleared trie keeps its first).
        if (id >> CHUNK_BITS) as usize == self.chunks.len() {
            self.chunks
                .push(vec![Stored::default(); CHUNK].into_boxed_slice());
        }
        self.len += 1;
        *self.stored_mut(id) = Stored {
            parent,
            node,
            weight: 0,
        };
        self.index[i] = fp | (id + 1);
        // Load factor at most 4/5.
        if self.len as usize * 5 > self.index.len() * 4 {
            self.rebuild(Self::grown(self.index.len()));
        }
        id
    }

    /// The next index size after `slots`: twice as large while small (a rebuild reinserts
    /// every entry, and growing by half rebuilds more often: 4 % more CPU on busy20m's
    /// `chains --no-runqueue`), half as large again from [`HALF_STEPS_FROM`] slots, where
    /// the memory is (at most 2^32 - 1 slots, which `slot_of` can scale to; ids stop at
    /// 2^32 - 2 before that).
    fn grown(slots: usize) -> usize {
        let more = if slots < HALF_STEPS_FROM {
            slots
        } else {
            slots / 2
        };
        (slots + more).min(u32::MAX as usize)
    }

    /// Index size that holds `n` entries at a load of at most 4/5.
    fn slots_for(n: usize) -> usize {
        let mut slots = MIN_SLOTS;
        while n * 5 > slots * 4 && slots < u32::MAX as usize {
            slots = Self::grown(slots);
        }
        slots
    }

    /// Empty the trie, keeping its first chunk of entries and a small index: a trie
    /// filled with a few paths and emptied many times (one wait at a time,
    /// `FoldedSink::clear`) would otherwise allocate and zero a new chunk (~0.4 MB) each
    /// time. Entries are written whole when inserted, so the chunk's old ones need no
    /// clearing.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.chunks.truncate(1);
        self.big.clear();
        if self.index.len() == MIN_SLOTS {
            self.index.fill(0);
        } else {
            self.index = Vec::new();
            self.bits = 0;
        }
    }

    /// Free the index and the insertion scratch (rendering needs neither); the next
    /// insertion rebuilds the index from the entries.
    pub(crate) fn release_index(&mut self) {
        self.index = Vec::new();
        self.bits = 0;
        self.active = Vec::new();
        self.cursor = Vec::new();
        self.hashes = Vec::new();
        self.cands = Vec::new();
        self.parents = Vec::new();
    }

    /// Replace the index by one of `slots` slots built from the entries.
    fn rebuild(&mut self, slots: usize) {
        self.index = Vec::new(); // free the old index first: no two copies at once
        self.index = vec![0u32; slots];
        self.bits = 64 - (slots as u64).leading_zeros();
        let idm = self.id_mask();
        let n = self.len;
        let mut hs = [0u64; 16];
        let mut id = 0u32;
        while id < n {
            let m = (n - id).min(16) as usize;
            for (k, h) in hs[..m].iter_mut().enumerate() {
                let e = self.stored(id + k as u32);
                *h = hash(e.parent, e.node);
                prefetch(&self.index[self.slot_of(*h)]);
            }
            for (k, &h) in hs[..m].iter().enumerate() {
                let mut i = self.slot_of(h);
                while self.index[i] != 0 {
                    i += 1;
                    if i == slots {
                        i = 0;
                    }
                }
                self.index[i] = self.fp_of(h) | ((id + k as u32 + 1) & idm);
            }
            id += m as u32;
        }
    }

    /// Insert every path of `b`, adding its weights. Paths are processed level by level;
    /// within a level the lookups are independent, so each one's index slot is
    /// prefetched `DIST` lookups ahead and its candidate entry `DIST` lookups ahead of
    /// the key check (a three-stage software pipeline).
    ///
    /// A path's leading levels equal to the previous path's (a wait's run-queue and on-CPU
    /// paths repeat its root and the levels above them) are not looked up again: the ids
    /// of a node sequence are a function of the sequence, so they are copied from the
    /// previous path once it has them. The entries inserted, their ids (the first path
    /// in batch order that reaches a new prefix inserts it, in the same round) and the
    /// weights are those of looking every level up.
    pub(crate) fn apply(&mut self, b: &PathBatch) {
        let np = b.len();
        if np < 2 * DIST {
            for i in 0..np {
                let (nodes, weights) = b.path(i);
                let mut p = NO_PARENT;
                for (&n, &w) in nodes.iter().zip(weights) {
                    p = self.step(p, n);
                    if w != 0 {
                        self.add_weight(p, w);
                    }
                }
            }
            return;
        }
        if self.index.is_empty() {
            self.rebuild(Self::slots_for(self.len as usize + 1));
        }
        // Per active path: its cursor into `b.nodes` (next level) and its parent id.
        let mut active = std::mem::take(&mut self.active);
        let mut cursor = std::mem::take(&mut self.cursor);
        let mut hashes = std::mem::take(&mut self.hashes);
        let mut cands = std::mem::take(&mut self.cands);
        let mut parents = std::mem::take(&mut self.parents);
        let mut ids = std::mem::take(&mut self.ids);
        let mut waiting = std::mem::take(&mut self.waiting);
        let mut next = std::mem::take(&mut self.next);
        // Per active path k: `active[k]` its end offset in `b.nodes`, `cursor[k]` the
        // offset of its next level, `parents[k]` the id of the level before. `ids[o]` is
        // the entry id of the level at offset `o` of `b.nodes`, once known.
        active.clear();
        cursor.clear();
        parents.clear();
        waiting.clear();
        ids.clear();
        ids.resize(b.nodes.len(), NONE);
        let mut start = 0u32;
        let mut prev: Option<(u32, u32)> = None;
        for &end in &b.ends {
            if end > start {
                let shared = prev.map_or(0, |(ps, pe)| {
                    let (this, before) = (
                        &b.nodes[start as usize..end as usize],
                        &b.nodes[ps as usize..pe as usize],
                    );
                    this.iter().zip(before).take_while(|(x, y)| x == y).count() as u32
                });
                if shared == 0 {
                    active.push(end);
                    cursor.push(start);
                    parents.push(NO_PARENT);
                } else {
                    waiting.push(Waiting {
                        start,
                        end,
                        shared,
                        prev_start: prev.map_or(0, |p| p.0),
                    });
                }
                prev = Some((start, end));
            }
            start = end;
        }
        let mut round = 0u32;
        while !active.is_empty() || !waiting.is_empty() {
            let n = active.len();
            hashes.clear();
            hashes.resize(n, 0);
            cands.clear();
            cands.resize(n, NONE);
            for i in 0..n + 2 * DIST {
                if i < n {
                    let h = hash(parents[i], b.nodes[cursor[i] as usize]);
                    hashes[i] = h;
                    prefetch(&self.index[self.slot_of(h)]);
                }
                if i >= DIST && i - DIST < n {
                    let j = i - DIST;
                    let c = self.candidate(hashes[j]);
                    cands[j] = c;
                    if c != NONE {
                        prefetch(self.stored(c));
                    }
                }
                if i >= 2 * DIST {
                    let k = i - 2 * DIST;
                    let (parent, node) = (parents[k], b.nodes[cursor[k] as usize]);
                    let c = cands[k];
                    let id = if c != NONE && {
                        let e = self.stored(c);
                        e.parent == parent && e.node == node
                    } {
                        c
                    } else {
                        self.find_or_insert(parent, node, hashes[k])
                    };
                    let w = b.weights[cursor[k] as usize];
                    if w != 0 {
                        self.add_weight(id, w);
                    }
                    parents[k] = id;
                    ids[cursor[k] as usize] = id;
                }
            }
            // Shared levels of this round, in batch order (the previous path's id at
            // this level is known: looked up above, or copied just before).
            next.clear();
            let mut m = 0;
            let mut k = 0;
            for wi in 0..waiting.len() {
                let wt = waiting[wi];
                let at = (wt.start + round) as usize;
                let id = ids[(wt.prev_start + round) as usize];
                ids[at] = id;
                let w = b.weights[at];
                if w != 0 {
                    self.add_weight(id, w);
                }
                if wt.shared > round + 1 {
                    waiting[m] = wt;
                    m += 1;
                } else if wt.start + wt.shared < wt.end {
                    // Looked up from the next round on, in batch order among the
                    // active paths: the survivors of this round before it go first.
                    while k < n && active[k] <= wt.start {
                        if cursor[k] + 1 < active[k] {
                            next.push((active[k], cursor[k] + 1, parents[k]));
                        }
                        k += 1;
                    }
                    next.push((wt.end, wt.start + wt.shared, id));
                }
            }
            waiting.truncate(m);
            // Next level: paths that go on.
            while k < n {
                if cursor[k] + 1 < active[k] {
                    next.push((active[k], cursor[k] + 1, parents[k]));
                }
                k += 1;
            }
            active.clear();
            cursor.clear();
            parents.clear();
            for &(e, c, p) in &next {
                active.push(e);
                cursor.push(c);
                parents.push(p);
            }
            round += 1;
        }
        self.active = active;
        self.cursor = cursor;
        self.hashes = hashes;
        self.cands = cands;
        self.parents = parents;
        self.ids = ids;
        self.waiting = waiting;
        self.next = next;
    }
}

/// A path of a batch whose first `shared` levels are the previous path's (see
/// [`PathTrie::apply`]): offsets into the batch's nodes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Waiting {
    start: u32,
    end: u32,
    shared: u32,
    prev_start: u32,
}

/// Entry ids in depth-first preorder: roots in id order, each followed by its
/// subtree, children in id order (ids grow from parent to child).
pub(crate) fn preorder(trie: &PathTrie) -> Vec<u32> {
    let n = trie.len();
    // Subtree sizes (children have larger ids than their parent).
    let mut next = vec![1u32; n];
    for i in (0..n).rev() {
        let p = trie.get(i as u32).parent;
        if p != NO_PARENT {
            next[p as usize] += next[i];
        }
    }
    // Positions: `next[i]` turns from the size of i's subtree into the position of
    // i's next child once i is placed.
    let mut order = vec![0u32; n];
    let mut roots = 0u32;
    for i in 0..n {
        let size = next[i];
        let p = trie.get(i as u32).parent;
        let pos = if p == NO_PARENT {
            let q = roots;
            roots += size;
            q
        } else {
            let q = next[p as usize];
            next[p as usize] += size;
            q
        };
        order[pos as usize] = i as u32;
        next[i] = pos + 1;
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Paths of `n` waits over a few thousand nodes, three levels each.
    fn batch(n: u32, salt: u32) -> PathBatch {
        let mut b = PathBatch::new();
        for i in 0..n {
            let x = i.wrapping_mul(2_654_435_761) ^ salt;
            b.push_path(&[x % 97, x % 3001, (x >> 7) % 5003], &[1, 2, 3]);
        }
        b
    }

    #[test]
    fn a_cleared_trie_is_a_new_one() {
        // Past a chunk of entries, then cleared: the same ids and entries as a new trie,
        // for single steps and batches, large weights included.
        let mut a = PathTrie::default();
        a.apply(&batch(40_000, 3));
        a.add_weight(7, u64::from(BIG) + 5);
        assert!(a.len() > CHUNK && a.chunks.len() > 1);
        for round in 0..2 {
            a.clear();
            let mut b = PathTrie::default();
            assert_eq!(a.step(NO_PARENT, 9), b.step(NO_PARENT, 9));
            assert_eq!(a.step(0, 4), b.step(0, 4));
            a.add_weight(1, 3);
            b.add_weight(1, 3);
            let n = if round == 0 { 10 } else { 40_000 };
            a.apply(&batch(n, 5));
            b.apply(&batch(n, 5));
            assert_eq!(a.len(), b.len());
            assert!(a.iter().eq(b.iter()), "round {round}");
        }
    }

    #[test]
    fn a_drained_trie_keeps_its_room_and_fills_as_a_new_one() {
        let mut a = PathTrie::default();
        a.apply(&batch(40_000, 3));
        a.add_weight(7, u64::from(BIG) + 5);
        let (len, room) = (a.len(), a.heap_bytes());
        let entries: Vec<Entry> = a.iter().collect();
        // Each entry is seen in id order with its parent's label (here: its parent's id
        // and node), the large weight included.
        let mut seen = Vec::new();
        a.drain_labelled(|e, up| -> Result<(u32, u32), ()> {
            let id = seen.len() as u32;
            assert_eq!(
                up,
                (e.parent != NO_PARENT).then(|| (e.parent, entries[e.parent as usize].node))
            );
            seen.push(e);
            Ok((id, e.node))
        })
        .unwrap();
        assert_eq!(seen, entries);
        assert_eq!(a.len(), 0);
        // Its room is kept; its entry chunks are not counted as needed, its index (kept
        // at its size, the next run's) is.
        assert_eq!(a.heap_bytes(), room);
        assert!(!a.index.is_empty() && a.index.iter().all(|&s| s == 0));
        assert_eq!(
            a.heap_bytes_after(0),
            a.index.len() * 4 + a.big.capacity() * 16
        );
        assert!(a.heap_bytes_after(0) < room / 2);
        let mut b = PathTrie::default();
        a.apply(&batch(30_000, 5));
        b.apply(&batch(30_000, 5));
        assert!(a.iter().eq(b.iter()));
        // Fewer entries than before: nothing allocated.
        assert!(b.len() < len);
        assert_eq!(a.heap_bytes(), room);
        // An error stops the walk and still empties it.
        let mut n = 0;
        assert_eq!(
            a.drain_labelled(|_, _| {
                n += 1;
                if n == 3 {
                    Err(7)
                } else {
                    Ok((0, 0))
                }
            }),
            Err(7)
        );
        assert_eq!((a.len(), n), (0, 3));
        assert!(len > CHUNK);
    }

    #[test]
    fn bytes_after_a_batch_bound_what_it_takes() {
        // Before each batch, the bound for its steps is at least what inserting it takes.
        let mut t = PathTrie::default();
        for salt in 0..40 {
            let b = batch(5_000, salt);
            let bound = t.heap_bytes_after(b.steps());
            t.apply(&b);
            assert!(t.heap_bytes() <= bound, "batch {salt}");
            assert!(t.heap_bytes_after(0) <= t.heap_bytes());
        }
    }

    #[test]
    fn released_index_is_rebuilt_on_the_next_insertion() {
        let mut a = PathTrie::default();
        let mut b = PathTrie::default();
        a.apply(&batch(20_000, 1));
        b.apply(&batch(20_000, 1));
        b.release_index();
        assert!(b.index.is_empty());
        // Same ids for known paths, same new entries for new ones, one step and batched.
        a.apply(&batch(20_000, 7));
        b.apply(&batch(20_000, 7));
        assert_eq!(a.step(5, 6), b.step(5, 6));
        b.release_index();
        let s = b.step(3, 4);
        assert_eq!(a.step(3, 4), s);
        assert_eq!(a.len(), b.len());
        assert!(a.iter().eq(b.iter()));
    }

    /// Weights of 2^32 - 1 ns and more (kept aside from the 12-byte entries) add up
    /// exactly, however they are reached: one large weight, small ones crossing the
    /// bound, and more added after it; small weights beside them stay as they are.
    #[test]
    fn weights_past_32_bits_add_up() {
        let big = u64::from(u32::MAX);
        let steps: [(u32, u64); 7] = [
            (1, big - 2),
            (1, 1),
            (1, 1), // reaches 2^32 - 1 exactly
            (1, 5),
            (2, 3 * big + 17),
            (3, 40),
            (2, 1),
        ];
        // Three rounds: 21 paths, enough for the batched insertion (2 * DIST or more).
        let rounds = || (0..3).flat_map(|_| steps);
        let mut batch = PathBatch::new();
        let mut want = [0u64; 4];
        for (node, w) in rounds() {
            batch.push_path(&[node], &[w]);
            want[node as usize] += w;
        }
        assert!(batch.len() >= 2 * DIST);
        let mut t = PathTrie::default();
        t.apply(&batch);
        // One path at a time too.
        let mut one = PathTrie::default();
        for (node, w) in rounds() {
            let mut b = PathBatch::new();
            b.push_path(&[node], &[w]);
            one.apply(&b);
        }
        for trie in [&t, &one] {
            assert_eq!(trie.len(), 3);
            for e in trie.iter() {
                assert_eq!(e.weight, want[e.node as usize], "node {}", e.node);
            }
            let total: u64 = trie.iter().map(|e| e.weight).sum();
            assert_eq!(total, want.iter().sum::<u64>());
        }
        assert_eq!(t.big.len(), 2);
    }

    /// Every entry as its node path from the root, with its weight.
    fn contents(t: &PathTrie) -> std::collections::BTreeMap<Vec<u32>, u64> {
        let mut out = std::collections::BTreeMap::new();
        for (id, e) in t.iter().enumerate() {
            let mut path = vec![e.node];
            let mut p = e.parent;
            while p != NO_PARENT {
                path.push(t.get(p).node);
                p = t.get(p).parent;
            }
            path.reverse();
            assert!(out.insert(path, e.weight).is_none(), "entry {id} twice");
        }
        out
    }

    /// Paths sharing leading levels with the one before them (as a wait's main path and
    /// its run-queue paths do), identical paths, paths that are prefixes of the one before,
    /// and weights on shared levels: the batched insertion (which copies the shared
    /// levels' ids) builds the same entries with the same weights as inserting each path
    /// level by level, and the same ids whether the index was released or not.
    #[test]
    fn shared_prefixes_are_inserted_as_looked_up() {
        let mut b = PathBatch::new();
        for i in 0..3000u32 {
            let x = i.wrapping_mul(2_654_435_761);
            let root = x % 13;
            let hops = [x % 7 + 100, (x >> 5) % 5 + 200, (x >> 9) % 3 + 300];
            let depth = (x >> 3) as usize % 4;
            let mut main = vec![root];
            main.extend_from_slice(&hops[..depth]);
            let mut w = vec![0; main.len()];
            *w.last_mut().unwrap() = u64::from(i);
            b.push_path(&main, &w);
            for level in 0..=depth {
                let mut p = vec![root];
                p.extend_from_slice(&hops[..level]);
                p.push(1000 + (x >> level) % 4);
                let mut w = vec![0; p.len()];
                // Now and then a weight on a shared level too.
                w[0] = u64::from(i % 5 == 0);
                *w.last_mut().unwrap() = 7;
                b.push_path(&p, &w);
            }
            if i % 11 == 0 {
                b.push_path(&main, &w);
                b.push_path(&main[..1], &[3]);
            }
        }
        let mut batched = PathTrie::default();
        batched.apply(&b);
        batched.apply(&b);
        let mut stepped = PathTrie::default();
        for _ in 0..2 {
            for i in 0..b.len() {
                let (nodes, weights) = b.path(i);
                let mut one = PathBatch::new();
                one.push_path(nodes, weights);
                stepped.apply(&one);
            }
        }
        assert_eq!(contents(&batched), contents(&stepped));
        let mut again = PathTrie::default();
        again.apply(&b);
        again.release_index();
        again.apply(&b);
        assert!(again.iter().eq(batched.iter()));
    }
}

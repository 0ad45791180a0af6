//! Rendering the path trie to folded text: every distinct (node, first-in-path) piece is
//! rendered once into an arena; the trie is laid out in depth-first preorder (children
//! in id order, as inserted), and any contiguous range of that order can be rendered on
//! its own (the prefix of its first line is rebuilt from the parent links), so ranges
//! are rendered in parallel into per-task buffers and written in order.

use crate::engine::nodes::{NodeId, NodeTable};
use crate::graph::pathframes::FrameNamer;
use crate::graph::paths::COMM_BIT;
use crate::graph::trie::{PathTrie, NO_PARENT};
use crate::graph::views::Unit;
use chainrec_format::{Comm, RecordingMeta, Tables};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};

/// What [`crate::FoldedSink::write_folded`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteSummary {
    /// Lines written (weight at least one unit after rounding).
    pub lines: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Paths with a non-zero weight that rounds to 0 units: left out.
    pub small_lines: u64,
    /// Their nanoseconds in total.
    pub small_ns: u64,
}

impl WriteSummary {
    /// Write `line` with `weight` ns as `{line} {weight in unit}\n` into `out`, or count it
    /// as left out when it rounds to 0 units. (`bytes` is the caller's to set.)
    #[inline]
    pub(crate) fn push_line(&mut self, out: &mut Vec<u8>, line: &str, weight: u64, unit: Unit) {
        let v = unit.round(weight);
        if v == 0 {
            self.small_lines += 1;
            self.small_ns += weight;
        } else {
            self.lines += 1;
            out.extend_from_slice(line.as_bytes());
            out.push(b' ');
            push_u64(out, v);
            out.push(b'\n');
        }
    }

    pub(crate) fn add(&mut self, o: &WriteSummary) {
        self.lines += o.lines;
        self.bytes += o.bytes;
        self.small_lines += o.small_lines;
        self.small_ns += o.small_ns;
    }
}

/// Rendered pieces: `(node, first)` → text, for every node used by the trie.
pub(crate) struct Pieces {
    text: String,
    /// `(start, end)` into `text`; index `2 * node + first` for nodes, then
    /// `2 * nodes.len() + comm` for comm nodes.
    spans: Vec<(u32, u32)>,
    nodes: usize,
    /// Group nodes (`--cgroup-frames`) among the nodes; empty when there are none.
    groups: Vec<bool>,
}

/// A span not rendered yet.
const UNSET: (u32, u32) = (u32::MAX, 0);

/// The `(node, first)` pieces a spilled output uses, marked from any thread while its
/// partitions are merged ([`Pieces::from_keys`]).
pub(crate) struct PieceKeys {
    bits: Vec<AtomicU64>,
    nodes: usize,
}

impl PieceKeys {
    /// None marked, for `nodes` nodes and `comms` comm nodes.
    pub(crate) fn new(nodes: usize, comms: usize) -> PieceKeys {
        PieceKeys {
            bits: (0..(2 * nodes + comms).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
            nodes,
        }
    }

    /// Mark `(node, first)`.
    #[inline]
    pub(crate) fn mark(&self, node: NodeId, first: bool) {
        let k = piece_key(self.nodes, node, first);
        self.bits[k / 64].fetch_or(1 << (k % 64), Ordering::Relaxed);
    }
}

/// Where the piece `(node, first)` is among `nodes` nodes: `2 * node + first` for nodes,
/// then `2 * nodes + comm` for comm nodes (their text does not depend on `first`).
#[inline]
fn piece_key(nodes: usize, node: NodeId, first: bool) -> usize {
    if node & COMM_BIT != 0 {
        2 * nodes + (node & !COMM_BIT) as usize
    } else {
        2 * node as usize + first as usize
    }
}

impl Pieces {
    /// No pieces yet, for `nodes` and `comms` (spans unset; `groups` as the table says).
    fn empty(comms: &[Comm], nodes: &NodeTable) -> Pieces {
        let mut p = Pieces {
            text: String::new(),
            spans: vec![UNSET; 2 * nodes.len() + comms.len()],
            nodes: nodes.len(),
            groups: Vec::new(),
        };
        if (0..nodes.len()).any(|i| nodes.get(i as NodeId).is_group()) {
            p.groups = (0..nodes.len())
                .map(|i| nodes.get(i as NodeId).is_group())
                .collect();
        }
        p
    }

    /// The pieces of every entry of `trie`.
    pub(crate) fn build(
        trie: &PathTrie,
        comms: &[Comm],
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
    ) -> Pieces {
        let mut words = vec![0u64; (2 * nodes.len() + comms.len()).div_ceil(64)];
        for e in trie.iter() {
            let first = crate::graph::pathframes::first_of_path(trie, nodes, &e);
            let k = piece_key(nodes.len(), e.node, first);
            words[k / 64] |= 1 << (k % 64);
        }
        Pieces::from_words(&words, comms, nodes, tables, meta)
    }

    /// The pieces `keys` marked (the spilled output's merge: no one trie holds them all).
    pub(crate) fn from_keys(
        keys: &PieceKeys,
        comms: &[Comm],
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
    ) -> Pieces {
        let words: Vec<u64> = keys
            .bits
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        Pieces::from_words(&words, comms, nodes, tables, meta)
    }

    /// The pieces whose keys are set in `words` (key `k`: bit `k % 64` of word `k / 64`),
    /// named on the rayon threads: naming stacks is most of the time after a large trace's
    /// walk (real60: ~0.3 s of symbol lookups on one thread while the other had finished
    /// the preorder), so the keys are cut into ranges of about equal counts, each named
    /// into its own text by its own namer, and the texts joined.
    fn from_words(
        words: &[u64],
        comms: &[Comm],
        nodes: &NodeTable,
        tables: &Tables,
        meta: &RecordingMeta,
    ) -> Pieces {
        use rayon::prelude::*;
        let mut p = Pieces::empty(comms, nodes);
        let keys = p.spans.len();
        let total: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        // A few ranges per thread, for balance (stacks differ in depth).
        let parts = (4 * rayon::current_num_threads()).max(1);
        let mut cuts = vec![0];
        let mut seen = 0;
        for (i, w) in words.iter().enumerate() {
            seen += w.count_ones() as usize;
            if cuts.len() < parts && seen * parts >= total * cuts.len() {
                cuts.push(i + 1);
            }
        }
        cuts.push(words.len());
        cuts.dedup();
        // Word ranges with the spans of their keys (disjoint slices).
        let mut ranges = Vec::with_capacity(cuts.len());
        let mut rest: &mut [(u32, u32)] = &mut p.spans;
        for c in cuts.windows(2) {
            let len = (c[1] * 64).min(keys) - (c[0] * 64).min(keys);
            let (mine, tail) = std::mem::take(&mut rest).split_at_mut(len);
            rest = tail;
            ranges.push((c[0]..c[1], mine));
        }
        let nodes_len = p.nodes;
        let texts: Vec<String> = ranges
            .into_par_iter()
            .map(|(range, spans)| {
                let mut namer = FrameNamer::new(tables, meta.stack_threshold_ns);
                let mut text = String::new();
                let k0 = range.start * 64;
                for w in range {
                    let mut b = words[w];
                    while b != 0 {
                        let k = w * 64 + b.trailing_zeros() as usize;
                        b &= b - 1;
                        let a = text.len();
                        if k >= 2 * nodes_len {
                            text.push_str(&comms[k - 2 * nodes_len].as_str());
                        } else {
                            push_piece(&mut text, &mut namer, nodes, (k / 2) as NodeId, k % 2 == 1);
                        }
                        // Relative to this range's text until the texts are joined.
                        spans[k - k0] = (a as u32, text.len() as u32);
                    }
                }
                text
            })
            .collect();
        let len: usize = texts.iter().map(String::len).sum();
        assert!(len < u32::MAX as usize, "rendered pieces too large");
        p.text.reserve_exact(len);
        for (c, t) in cuts.windows(2).zip(&texts) {
            let base = p.text.len() as u32;
            for s in &mut p.spans[(c[0] * 64).min(keys)..(c[1] * 64).min(keys)] {
                if *s != UNSET {
                    *s = (s.0 + base, s.1 + base);
                }
            }
            p.text.push_str(t);
        }
        p
    }

    /// Is a piece at `depth` under the root node `root` the first of its path (as
    /// [`crate::graph::pathframes::first_of_path`]: the root, or the child of a group)?
    #[inline]
    pub(crate) fn first_at(&self, depth: usize, root: NodeId) -> bool {
        depth == 0
            || (depth == 1
                && root & COMM_BIT == 0
                && self.groups.get(root as usize).copied().unwrap_or(false))
    }

    #[inline]
    fn key(&self, node: NodeId, first: bool) -> usize {
        piece_key(self.nodes, node, first)
    }

    /// [`crate::graph::pathframes::first_of_path`] without the node table.
    #[inline]
    fn first(&self, trie: &PathTrie, e: &crate::graph::trie::Entry) -> bool {
        if e.parent == NO_PARENT {
            return true;
        }
        if self.groups.is_empty() {
            return false;
        }
        let p = trie.get(e.parent);
        p.parent == NO_PARENT
            && p.node & COMM_BIT == 0
            && self.groups.get(p.node as usize).copied().unwrap_or(false)
    }

    /// The text of the piece `(node, first)`.
    #[inline]
    pub(crate) fn get(&self, node: NodeId, first: bool) -> &str {
        let (a, b) = self.spans[self.key(node, first)];
        &self.text[a as usize..b as usize]
    }

    /// [`Self::get`], or `None` for a piece not rendered (a node that none of the lines
    /// uses, or that does not exist): for pieces named by records read back from disk.
    pub(crate) fn try_get(&self, node: NodeId, first: bool) -> Option<&str> {
        if node & COMM_BIT == 0 && node as usize >= self.nodes {
            return None;
        }
        match *self.spans.get(self.key(node, first))? {
            UNSET => None,
            (a, b) => self.text.get(a as usize..b as usize),
        }
    }
}

/// Append the piece of `node` (`first`: the first of its path): its frames joined by `;`.
fn push_piece(
    out: &mut String,
    namer: &mut FrameNamer<'_>,
    nodes: &NodeTable,
    node: NodeId,
    first: bool,
) {
    for (i, (f, _)) in namer.node(nodes, node, first).frames.iter().enumerate() {
        if i > 0 {
            out.push(';');
        }
        out.push_str(f);
    }
}

/// The text of path pieces (a node's frames joined by `;`), named once and kept across
/// many small sinks: [`crate::FoldedSink::ns_through`] of each of a range's waits.
pub struct PieceNames<'a> {
    namer: FrameNamer<'a>,
    text: FxHashMap<(NodeId, bool), Box<str>>,
}

impl<'a> PieceNames<'a> {
    /// Names for the trace of `tables` (`threshold_ns`: `meta.stack_threshold_ns`).
    pub fn new(tables: &'a chainrec_format::Tables, threshold_ns: u64) -> Self {
        PieceNames {
            namer: FrameNamer::new(tables, threshold_ns),
            text: FxHashMap::default(),
        }
    }

    /// The piece of `node` (`first`: the first of its path).
    pub(crate) fn piece(&mut self, nodes: &NodeTable, node: NodeId, first: bool) -> &str {
        let namer = &mut self.namer;
        self.text.entry((node, first)).or_insert_with(|| {
            let mut t = String::new();
            push_piece(&mut t, namer, nodes, node, first);
            t.into_boxed_str()
        })
    }
}

/// Where a path stands against a frame's path `prefix` ([`crate::FoldedSink::ns_through`]).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Through {
    /// It matches `prefix[..n]`, which ends at a frame boundary.
    Partial(usize),
    /// It passes through the frame.
    Matched,
    /// It does not.
    Diverged,
}

impl Through {
    /// The state after one more piece.
    pub(crate) fn then(self, prefix: &str, piece: &str) -> Through {
        let Through::Partial(at) = self else {
            return self;
        };
        let rest = &prefix[at..];
        if let Some(after) = rest.strip_prefix(piece) {
            return match after.as_bytes().first() {
                None => Through::Matched,
                Some(b';') => Through::Partial(at + piece.len() + 1),
                Some(_) => Through::Diverged,
            };
        }
        // The frame is inside this piece (a piece is several frames).
        match piece.strip_prefix(rest) {
            Some(after) if after.starts_with(';') => Through::Matched,
            _ => Through::Diverged,
        }
    }
}

/// Decimal digits of `v` into `out`.
#[inline]
fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut b = [0u8; 20];
    let mut i = b.len();
    loop {
        i -= 1;
        b[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&b[i..]);
}

/// Walk `order[range]`, calling `f(line, ns)` for every entry with a non-zero weight.
pub(crate) fn walk(
    trie: &PathTrie,
    pieces: &Pieces,
    order: &[u32],
    range: std::ops::Range<usize>,
    mut f: impl FnMut(&str, u64),
) {
    let mut buf = String::new();
    // (entry, length of `buf` once the entry's piece is in).
    let mut stack: Vec<(u32, usize)> = Vec::new();
    if let Some(&first) = order.get(range.start) {
        // Rebuild the prefix of the first entry's parent.
        let mut anc = Vec::new();
        let mut p = trie.get(first).parent;
        while p != NO_PARENT {
            anc.push(p);
            p = trie.get(p).parent;
        }
        for &a in anc.iter().rev() {
            let e = trie.get(a);
            if e.parent != NO_PARENT {
                buf.push(';');
            }
            buf.push_str(pieces.get(e.node, pieces.first(trie, &e)));
            stack.push((a, buf.len()));
        }
    }
    const AHEAD: usize = 8;
    for k in range.clone() {
        if k + AHEAD < range.end {
            crate::graph::trie::prefetch(trie.addr(order[k + AHEAD]));
        }
        let id = order[k];
        let e = trie.get(id);
        if e.parent == NO_PARENT {
            stack.clear();
            buf.clear();
        } else {
            while let Some(&(top, len)) = stack.last() {
                if top == e.parent {
                    buf.truncate(len);
                    break;
                }
                stack.pop();
            }
            buf.push(';');
        }
        buf.push_str(pieces.get(e.node, pieces.first(trie, &e)));
        stack.push((id, buf.len()));
        if e.weight > 0 {
            f(&buf, e.weight);
        }
    }
}

/// Render `order[range]` as folded lines with weights in `unit`.
pub(crate) fn render_range(
    trie: &PathTrie,
    pieces: &Pieces,
    order: &[u32],
    range: std::ops::Range<usize>,
    unit: Unit,
    out: &mut Vec<u8>,
) -> WriteSummary {
    let mut s = WriteSummary::default();
    let before = out.len();
    walk(trie, pieces, order, range, |line, w| {
        s.push_line(out, line, w, unit)
    });
    s.bytes = (out.len() - before) as u64;
    s
}

/// Entries per rendering task.
const TASK: usize = 1024;

/// Render the whole trie in `order` (its preorder) into `out` (see
/// [`crate::FoldedSink::write_folded`]).
pub(crate) fn write_folded(
    trie: &PathTrie,
    pieces: &Pieces,
    order: &[u32],
    unit: Unit,
    out: &mut dyn Write,
) -> io::Result<WriteSummary> {
    let n = order.len();
    write_in_order(
        n.div_ceil(TASK),
        |t, buf| {
            let r = t * TASK..((t + 1) * TASK).min(n);
            Ok(render_range(trie, pieces, order, r, unit, buf))
        },
        out,
    )
}

/// Render tasks `0..tasks` (`render(t, buf)` appends task `t`'s text to `buf`) and write
/// their text to `out` in task order. With more than one rayon thread, at most a few
/// tasks are rendered ahead of the writer (bounded memory); the calling thread writes the
/// buffers in order (`out` need not be `Send`) and hands them back for reuse. On an error
/// (rendering or writing), rendering stops and the first error is returned.
pub(crate) fn write_in_order(
    tasks: usize,
    render: impl Fn(usize, &mut Vec<u8>) -> io::Result<WriteSummary> + Sync,
    out: &mut dyn Write,
) -> io::Result<WriteSummary> {
    let threads = rayon::current_num_threads();
    let mut total = WriteSummary::default();
    if tasks <= 1 || threads <= 1 {
        let mut buf = Vec::with_capacity(1 << 20);
        for t in 0..tasks {
            buf.clear();
            let s = render(t, &mut buf)?;
            out.write_all(&buf)?;
            total.add(&s);
        }
        return Ok(total);
    }
    let inflight = 2 * threads + 2;
    let pool: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
    let (tx, rx) = mpsc::channel::<(usize, Vec<u8>, io::Result<WriteSummary>)>();
    let (pool, render) = (&pool, &render);
    rayon::in_place_scope(|scope| -> io::Result<()> {
        let spawn = |t: usize| {
            let tx = tx.clone();
            scope.spawn(move |_| {
                let mut buf = pool
                    .lock()
                    .map(|mut p| p.pop())
                    .ok()
                    .flatten()
                    .unwrap_or_default();
                buf.clear();
                let s = render(t, &mut buf);
                let _ = tx.send((t, buf, s));
            });
        };
        let mut next_spawn = 0;
        while next_spawn < tasks.min(inflight) {
            spawn(next_spawn);
            next_spawn += 1;
        }
        let mut pending: BTreeMap<usize, (Vec<u8>, io::Result<WriteSummary>)> = BTreeMap::new();
        let mut next_write = 0;
        let mut err = None;
        while next_write < tasks {
            let (t, buf, s) = rx.recv().expect("render task lost");
            pending.insert(t, (buf, s));
            while let Some((buf, s)) = pending.remove(&next_write) {
                match s {
                    Ok(s) => {
                        if err.is_none() {
                            if let Err(e) = out.write_all(&buf) {
                                err = Some(e);
                            }
                        }
                        total.add(&s);
                    }
                    Err(e) => {
                        err.get_or_insert(e);
                    }
                }
                if let Ok(mut p) = pool.lock() {
                    p.push(buf);
                }
                next_write += 1;
                // After an error, stop rendering: drain what is in flight.
                if next_spawn < tasks && err.is_none() {
                    spawn(next_spawn);
                    next_spawn += 1;
                }
            }
            if err.is_some() && next_write + pending.len() >= next_spawn {
                break;
            }
        }
        // Remaining in-flight tasks (only after an error) finish before the scope ends.
        match err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    })?;
    Ok(total)
}

//! Bounded memory for the folded output of a long, diverse trace (docs/ENGINE.md, "The
//! output aggregate spills to disk"). The path trie holds one entry per distinct path
//! prefix, and on a busy trace those keep coming (busy-server: 28.5 M lines at 100 M
//! events, 1 GB): when the trie outgrows its budget, it is written out as a *run* and
//! emptied, and the final output merges the runs, in exactly the order and with exactly
//! the weights of one trie that had held everything.
//!
//! Why the merge is exact. The output is the trie's depth-first preorder with children in
//! id order, and ids are given in first-seen order. A run is written in its id order, one
//! record per entry (its parent as the step back among the run's records of the
//! partition, node, weight), into the file of its root's partition (a hash of the root's
//! node), so a root's whole subtree is in one partition. Replaying the runs of a
//! partition, in order, into a fresh trie creates each prefix the first time a record
//! reaches it: within a run, ids meet siblings in their first-seen order, and a prefix
//! first seen in a later run was first seen after every prefix of an earlier one. So
//! siblings get ids in global first-seen order, as in the one big trie, and each entry's
//! weight is the sum over runs. Roots of different partitions are put back in order by
//! their key (run of first appearance, id in that run), kept in memory: one entry per
//! distinct root node.
//!
//! The merged partition is written back as its preorder of records, cut into chunks of a
//! few thousand entries that each carry the path above their first entry, and the final
//! pass renders the chunks, in global order, straight into the output (in parallel, as
//! one trie's output is rendered). Nothing but the records goes through the disk: the
//! folded text of a big trace is far larger than its records (busy100m: 25 GB of text).

use crate::engine::nodes::NodeTable;
use crate::graph::pathframes::first_at_depth;
use crate::graph::render::{write_in_order, PieceKeys, Pieces, WriteSummary};
use crate::graph::trie::{preorder, PathTrie, NO_PARENT};
use crate::graph::views::Unit;
use chainrec_format::{RecordingMeta, Tables};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Where, and above what size, the path trie of a fold is written out in runs
/// ([`crate::Analysis::fold_spilling`]).
#[derive(Clone, Debug)]
pub struct SpillTo {
    /// A directory for the run files (unnamed temporary files: nothing is left behind,
    /// even when the process is killed).
    pub dir: PathBuf,
    /// Heap bytes of the trie above which it is written out.
    pub budget_bytes: usize,
}

/// Partitions of the runs: the final merge holds one partition's trie at a time (two
/// with two rayon threads). At most 256 (a partition is a byte per entry in a run).
const PARTS: usize = 128;

/// The first byte of each run in every partition's file: a record's first varint is
/// never 0 ([`ROOT`] or more), so a 0 where a record would start begins the next run.
const RUN_START: u8 = 0;

/// A record's first varint for a root entry; `ROOT + k` for the child of the entry `k`
/// records back in the same run of the same partition.
const ROOT: u64 = 1;

/// Write buffer of each partition's run file: 128 of them stay allocated from the first
/// run to the end (32 KiB each were 4 MiB).
const RUN_BUF: usize = 1 << 13;

/// Entries per chunk of a root's subtree (bounds a render task's buffer).
const RENDER_STEP: usize = 4096;

/// The spilled runs of a fold.
#[derive(Debug)]
pub(crate) struct Spill {
    dir: PathBuf,
    budget: usize,
    parts: Vec<BufWriter<File>>,
    /// Each root node's order key: run of first appearance << 32 | its id in that run.
    roots: FxHashMap<u32, u64>,
    /// Runs written.
    pub(crate) runs: u32,
    /// Bytes written to run files.
    pub(crate) bytes: u64,
    /// The first write error, reported by [`Spill::write_folded`].
    err: Option<io::Error>,
    /// The trie left at the end is in the runs (a second write must not add it again).
    last_written: bool,
}

/// What names the nodes of the lines (for [`Pieces::build`]).
#[derive(Clone, Copy)]
pub(crate) struct Naming<'a> {
    pub(crate) comms: &'a [chainrec_format::Comm],
    pub(crate) nodes: &'a NodeTable,
    pub(crate) tables: &'a Tables,
    pub(crate) meta: &'a RecordingMeta,
}

/// A piece of a partition's merged records that renders on its own: part of one root's
/// subtree, at most [`RENDER_STEP`] entries.
#[derive(Clone, Debug)]
struct Chunk {
    /// The root's order key ([`Spill::roots`]).
    key: u64,
    /// Offset and length in the partition's records.
    at: u64,
    len: u64,
    /// The nodes of the path above its first entry, root first.
    ancestors: Box<[u32]>,
}

/// A partition merged: its preorder as records, and the chunks they are cut into.
struct Merged {
    records: File,
    chunks: Vec<Chunk>,
}

/// Varint (LEB128) of `v` into `out`.
#[inline]
fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The next varint of `b` from `*at` on (moving `at` past it), `None` at the end of `b`.
/// Decoded from the slice: reading a byte at a time through `io::Read` (a copy per byte)
/// was 2 % of a spilling `chains` (session 27).
#[inline]
fn get(b: &[u8], at: &mut usize) -> io::Result<Option<u64>> {
    let (mut v, mut shift) = (0u64, 0u32);
    loop {
        let Some(&x) = b.get(*at) else {
            return if shift == 0 {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "spill run file ends inside a record",
                ))
            };
        };
        if shift >= 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "spill run file: varint too long",
            ));
        }
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return Ok(Some(v));
        }
        shift += 7;
    }
}

/// The next varint, which must be there.
#[inline]
fn need(b: &[u8], at: &mut usize) -> io::Result<u64> {
    get(b, at)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "spill run file ends inside a record",
        )
    })
}

/// The varints of a file, read in blocks with positioned reads (the file's own offset is
/// its writer's).
struct Varints<'f> {
    file: &'f File,
    /// File offset of `buf[end]`.
    at: u64,
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    eof: bool,
}

/// Bytes of the longest varint (a u64).
const MAX_VARINT: usize = 10;

impl<'f> Varints<'f> {
    fn new(file: &'f File) -> Self {
        Varints {
            file,
            at: 0,
            buf: vec![0u8; 1 << 16].into_boxed_slice(),
            pos: 0,
            end: 0,
            eof: false,
        }
    }

    /// The next varint, `None` at the end of the file.
    #[inline]
    fn get(&mut self) -> io::Result<Option<u64>> {
        if self.end - self.pos < MAX_VARINT && !self.eof {
            self.refill()?;
        }
        get(&self.buf[..self.end], &mut self.pos)
    }

    /// The next varint, which must be there.
    #[inline]
    fn need(&mut self) -> io::Result<u64> {
        if self.end - self.pos < MAX_VARINT && !self.eof {
            self.refill()?;
        }
        need(&self.buf[..self.end], &mut self.pos)
    }

    fn refill(&mut self) -> io::Result<()> {
        self.buf.copy_within(self.pos..self.end, 0);
        self.end -= self.pos;
        self.pos = 0;
        while self.end < self.buf.len() {
            match self.file.read_at(&mut self.buf[self.end..], self.at) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => {
                    self.at += n as u64;
                    self.end += n;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[inline]
fn part_of(root_node: u32) -> usize {
    (root_node.wrapping_mul(0x9E37_79B9) >> 16) as usize % PARTS
}

impl Spill {
    /// Runs under `to.dir` (its files are made with the first run).
    pub(crate) fn new(to: &SpillTo) -> io::Result<Self> {
        if !to.dir.is_dir() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "not a directory"));
        }
        Ok(Spill {
            dir: to.dir.clone(),
            budget: to.budget_bytes,
            parts: Vec::new(),
            roots: FxHashMap::default(),
            runs: 0,
            bytes: 0,
            err: None,
            last_written: false,
        })
    }

    /// Has `trie` outgrown the budget?
    #[inline]
    pub(crate) fn due(&self, trie: &PathTrie) -> bool {
        trie.len() > 0 && trie.heap_bytes_after(0) > self.budget
    }

    /// Could inserting a batch of `steps` steps take `trie` past the budget? (Then it is
    /// written out first, so that it never holds much more than the budget.)
    #[inline]
    pub(crate) fn due_before(&self, trie: &PathTrie, steps: usize) -> bool {
        trie.len() > 0 && trie.heap_bytes_after(steps) > self.budget
    }

    /// Write `trie` out as the next run and empty it. A write error is kept for
    /// [`Spill::write_folded`] (the fold goes on; its output cannot be written).
    pub(crate) fn spill(&mut self, trie: &mut PathTrie) {
        if self.err.is_none() {
            if let Err(e) = self.write_run(trie) {
                self.err = Some(e);
            }
        }
        // Its room is kept: it fills to the budget again (FoldedSink::finish_spill frees it).
        trie.empty_keeping_room();
    }

    /// Write `trie` as the next run, leaving it empty.
    fn write_run(&mut self, trie: &mut PathTrie) -> io::Result<()> {
        if trie.len() == 0 {
            return Ok(());
        }
        if self.parts.is_empty() {
            self.parts = (0..PARTS)
                .map(|_| {
                    tempfile::tempfile_in(&self.dir).map(|f| BufWriter::with_capacity(RUN_BUF, f))
                })
                .collect::<io::Result<Vec<_>>>()?;
        }
        let run = u64::from(self.runs);
        self.runs += 1;
        // In id order (a parent before its children), each entry labelled with its
        // partition and its ordinal among the run's records of that partition, written
        // over the entry itself (an array beside the trie would add to it at the moment
        // memory is at its highest). A record names its parent by the step back in
        // ordinals, so that the merge maps a run's records to the merged trie's ids with
        // an array, not a hash map.
        let mut count = [0u32; PARTS];
        let mut rec = Vec::with_capacity(32);
        for p in &mut self.parts {
            p.write_all(&[RUN_START])?;
        }
        self.bytes += PARTS as u64;
        let (parts, roots, bytes) = (&mut self.parts, &mut self.roots, &mut self.bytes);
        let mut id = 0u64;
        trie.drain_labelled(|e, up| -> io::Result<(u32, u32)> {
            let (part, up) = match up {
                None => {
                    roots.entry(e.node).or_insert(run << 32 | id);
                    (part_of(e.node), None)
                }
                Some((ord, part)) => (part as usize, Some(ord)),
            };
            id += 1;
            let ord = count[part];
            count[part] += 1;
            rec.clear();
            // 0 begins a run, 1 is a root, 1 + k a child of the record k back.
            put(&mut rec, up.map_or(ROOT, |u| ROOT + u64::from(ord - u)));
            put(&mut rec, u64::from(e.node));
            put(&mut rec, e.weight);
            parts[part].write_all(&rec)?;
            *bytes += rec.len() as u64;
            Ok((ord, part as u32))
        })?;
        for p in &mut self.parts {
            p.flush()?;
        }
        Ok(())
    }

    /// Write `last` (the trie not yet spilled) as the final run, then every line of all
    /// runs merged, in the order and with the weights of one trie that held them all
    /// (see the module documentation), as [`crate::FoldedSink::write_folded`] writes them.
    pub(crate) fn write_folded(
        &mut self,
        last: &PathTrie,
        naming: Naming<'_>,
        unit: Unit,
        out: &mut dyn Write,
    ) -> io::Result<WriteSummary> {
        if !self.last_written {
            self.last_written = true;
            if self.err.is_none() && last.len() > 0 {
                // Not handed over by FoldedSink::finish_spill: a copy is written out.
                if let Err(e) = self.write_run(&mut last.clone()) {
                    self.err = Some(e);
                }
            }
        }
        if let Some(e) = &self.err {
            return Err(io::Error::new(e.kind(), format!("writing spill runs: {e}")));
        }
        for p in &mut self.parts {
            p.flush()?;
        }
        // Each partition's runs replayed into one trie (two at a time with two threads)
        // and written back as its merged preorder, cut into chunks that can be rendered
        // on their own; the pieces the lines use are marked on the way.
        let keys = PieceKeys::new(naming.nodes.len(), naming.comms.len());
        let merged: Vec<io::Result<Merged>> = {
            use rayon::prelude::*;
            let (dir, roots, keys) = (&self.dir, &self.roots, &keys);
            self.parts
                .par_iter()
                .map(|part| {
                    let trie = replay(part.get_ref())?;
                    merge_partition(&trie, roots, naming, keys, tempfile::tempfile_in(dir)?)
                })
                .collect()
        };
        let mut chunks: Vec<(Chunk, usize)> = Vec::new();
        let mut files = Vec::with_capacity(PARTS);
        for (p, m) in merged.into_iter().enumerate() {
            let m = m?;
            chunks.extend(m.chunks.into_iter().map(|c| (c, p)));
            files.push(m.records);
        }
        // Roots in global first-seen order, each root's chunks in the order written.
        chunks.sort_unstable_by_key(|(c, _)| (c.key, c.at));
        let pieces = Pieces::from_keys(
            &keys,
            naming.comms,
            naming.nodes,
            naming.tables,
            naming.meta,
        );
        drop(keys);
        write_in_order(
            chunks.len(),
            |t, buf| {
                let (c, p) = &chunks[t];
                render_chunk(&files[*p], c, &pieces, unit, buf)
            },
            out,
        )
    }
}

/// One partition's runs replayed, in order, into one trie: each run's entries in id
/// order, so that a prefix is created the first time a record reaches it.
fn replay(file: &File) -> io::Result<PathTrie> {
    let mut r = Varints::new(file);
    let mut trie = PathTrie::default();
    // The merged trie's id of each of this run's records so far (in this partition).
    let mut merged: Vec<u32> = Vec::new();
    while let Some(up) = r.get()? {
        if up == u64::from(RUN_START) {
            merged.clear();
            continue;
        }
        let node = r.need()?;
        let weight = r.need()?;
        let Ok(node) = u32::try_from(node) else {
            return Err(bad_record());
        };
        let parent = if up == ROOT {
            NO_PARENT
        } else {
            let back = usize::try_from(up - ROOT).map_err(|_| bad_record())?;
            let at = merged
                .len()
                .checked_sub(back)
                .filter(|_| back > 0)
                .ok_or_else(bad_record)?;
            merged[at]
        };
        let m = trie.step(parent, node);
        merged.push(m);
        if weight > 0 {
            trie.add_weight(m, weight);
        }
    }
    Ok(trie)
}

fn bad_record() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "spill run file: a record whose parent is not before it",
    )
}

/// Write `trie` (a partition's merged runs) into `file` as its preorder of records
/// (depth, node, weight), cut into [`Chunk`]s, marking the pieces its lines use in `keys`.
fn merge_partition(
    trie: &PathTrie,
    roots: &FxHashMap<u32, u64>,
    naming: Naming<'_>,
    keys: &PieceKeys,
    file: File,
) -> io::Result<Merged> {
    let order = preorder(trie);
    let mut out = BufWriter::with_capacity(1 << 20, &file);
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut buf = Vec::with_capacity(1 << 16);
    // Bytes before `buf`.
    let mut flushed = 0u64;
    // The path to the current entry: ids and nodes.
    let (mut ids, mut path): (Vec<u32>, Vec<u32>) = (Vec::new(), Vec::new());
    let mut in_chunk = 0usize;
    let mut key = 0u64;
    for &id in &order {
        let e = trie.get(id);
        let at = flushed + buf.len() as u64;
        if e.parent == NO_PARENT {
            key = roots.get(&e.node).copied().ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "spill: a root without a key")
            })?;
            ids.clear();
            path.clear();
        } else {
            while ids.last().is_some_and(|&top| top != e.parent) {
                ids.pop();
                path.pop();
            }
        }
        if e.parent == NO_PARENT || in_chunk == RENDER_STEP {
            if let Some(last) = chunks.last_mut() {
                last.len = at - last.at;
            }
            chunks.push(Chunk {
                key,
                at,
                len: 0,
                ancestors: path.clone().into_boxed_slice(),
            });
            in_chunk = 0;
        }
        let depth = ids.len();
        let root = path.first().copied().unwrap_or(e.node);
        keys.mark(e.node, first_at_depth(naming.nodes, depth, root));
        ids.push(id);
        path.push(e.node);
        put(&mut buf, depth as u64);
        put(&mut buf, u64::from(e.node));
        put(&mut buf, e.weight);
        in_chunk += 1;
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            flushed += buf.len() as u64;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    flushed += buf.len() as u64;
    if let Some(last) = chunks.last_mut() {
        last.len = flushed - last.at;
    }
    out.flush()?;
    drop(out);
    Ok(Merged {
        records: file,
        chunks,
    })
}

/// Render chunk `c` of a partition's merged records (in `file`) as folded lines into
/// `out`, as [`render_range`] renders the same entries of one trie.
fn render_chunk(
    file: &File,
    c: &Chunk,
    pieces: &Pieces,
    unit: Unit,
    out: &mut Vec<u8>,
) -> io::Result<WriteSummary> {
    let len = usize::try_from(c.len).map_err(|_| bad_record())?;
    let mut bytes = vec![0u8; len];
    file.read_exact_at(&mut bytes, c.at)?;
    let mut s = WriteSummary::default();
    let before = out.len();
    let mut line = String::new();
    // Length of `line` once each piece of the path is in.
    let mut ends: Vec<usize> = Vec::with_capacity(c.ancestors.len() + 16);
    let mut root = c.ancestors.first().copied();
    for (depth, &node) in c.ancestors.iter().enumerate() {
        if depth > 0 {
            line.push(';');
        }
        line.push_str(pieces.get(node, pieces.first_at(depth, root.unwrap_or(node))));
        ends.push(line.len());
    }
    let mut at = 0;
    while let Some(depth) = get(&bytes, &mut at)? {
        let node = u32::try_from(need(&bytes, &mut at)?).map_err(|_| bad_record())?;
        let weight = need(&bytes, &mut at)?;
        let depth = usize::try_from(depth).map_err(|_| bad_record())?;
        if depth > ends.len() {
            return Err(bad_record());
        }
        ends.truncate(depth);
        if depth == 0 {
            line.clear();
            root = Some(node);
        } else {
            line.truncate(ends[depth - 1]);
            line.push(';');
        }
        line.push_str(pieces.get(node, pieces.first_at(depth, root.unwrap_or(node))));
        ends.push(line.len());
        if weight > 0 {
            s.push_line(out, &line, weight, unit);
        }
    }
    s.bytes = (out.len() - before) as u64;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_are_read_back_across_blocks() {
        // More than a block of varints of every length, read back from the file.
        let mut b = Vec::new();
        let values: Vec<u64> = (0..60_000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (i % 64))
            .collect();
        for &v in &values {
            put(&mut b, v);
        }
        assert!(b.len() > 3 << 16);
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&b).unwrap();
        let mut r = Varints::new(&f);
        for &v in &values {
            assert_eq!(r.get().unwrap(), Some(v));
        }
        assert_eq!(r.get().unwrap(), None);
        // A file that ends inside a varint: an error after the whole ones.
        f.write_all(&[0x80]).unwrap();
        let mut r = Varints::new(&f);
        for &v in &values {
            assert_eq!(r.get().unwrap(), Some(v));
        }
        assert!(r.get().is_err());
    }

    #[test]
    fn varints_round_trip() {
        let mut b = Vec::new();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            put(&mut b, v);
        }
        let mut at = 0;
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(get(&b, &mut at).unwrap(), Some(v));
        }
        assert_eq!(get(&b, &mut at).unwrap(), None);
        // Cut inside a varint: an error, not a panic.
        assert!(get(&[0x80u8], &mut 0).is_err());
        // Too long for a u64: an error.
        assert!(get(&[0xffu8; 11], &mut 0).is_err());
    }
}

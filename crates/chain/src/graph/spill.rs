//! Bounded memory for the folded output of a long, diverse trace (docs/ENGINE.md, "The
//! output aggregate spills to disk"). The path trie holds one entry per distinct path
//! prefix, and on a busy trace those keep coming (busy-server: 28.5 M lines at 100 M
//! events, 1 GB): when the trie outgrows its budget, it is written out as a *run* and
//! emptied, and the final output merges the runs, in exactly the order and with exactly
//! the weights of one trie that had held everything.
//!
//! Why the merge is exact. The output is the trie's depth-first preorder with children in
//! id order, and ids are given in first-seen order. A run is written in its own preorder,
//! one record per entry (depth, node, weight), into the file of its root's partition (a
//! hash of the root's node), so a root's whole subtree is in one partition. Replaying the
//! runs of a partition, in order, into a fresh trie creates each prefix the first time a
//! record reaches it: within a run the preorder meets siblings in their first-seen order,
//! and a prefix first seen in a later run was first seen after every prefix of an earlier
//! one. So siblings get ids in global first-seen order, as in the one big trie, and each
//! entry's weight is the sum over runs. Roots of different partitions are put back in
//! order by their key (run of first appearance, id in that run), kept in memory: one
//! entry per distinct root node.

use crate::engine::nodes::NodeTable;
use crate::graph::render::{render_range, Pieces, WriteSummary};
use crate::graph::trie::{preorder, PathTrie, NO_PARENT};
use crate::graph::views::Unit;
use chainrec_format::{RecordingMeta, Tables};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
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
/// with two rayon threads).
const PARTS: usize = 32;

/// Entries rendered per piece of a root's subtree (bounds the render buffer).
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

/// A root's lines in a partition's rendered text.
#[derive(Clone, Copy, Debug)]
struct Segment {
    /// The root's order key ([`Spill::roots`]).
    key: u64,
    /// Offset and length in the text.
    at: u64,
    len: u64,
}

/// A partition merged and rendered.
struct Rendered {
    text: File,
    segments: Vec<Segment>,
    sum: WriteSummary,
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

/// The next varint of `r`, `None` at a clean end of file.
fn get(r: &mut impl Read) -> io::Result<Option<u64>> {
    let (mut v, mut shift) = (0u64, 0u32);
    loop {
        let mut b = [0u8; 1];
        if r.read(&mut b)? == 0 {
            return if shift == 0 {
                Ok(None)
            } else {
                Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "spill run file ends inside a record",
                ))
            };
        }
        if shift >= 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "spill run file: varint too long",
            ));
        }
        v |= u64::from(b[0] & 0x7f) << shift;
        if b[0] & 0x80 == 0 {
            return Ok(Some(v));
        }
        shift += 7;
    }
}

/// The next varint, which must be there.
fn need(r: &mut impl Read) -> io::Result<u64> {
    get(r)?.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "spill run file ends inside a record",
        )
    })
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
        trie.heap_bytes() > self.budget
    }

    /// Write `trie` out as the next run and empty it. A write error is kept for
    /// [`Spill::write_folded`] (the fold goes on; its output cannot be written).
    pub(crate) fn spill(&mut self, trie: &mut PathTrie) {
        // Room for the preorder: the index is not needed to read the entries.
        trie.release_index();
        if self.err.is_none() {
            if let Err(e) = self.write_run(trie) {
                self.err = Some(e);
            }
        }
        *trie = PathTrie::default();
    }

    fn write_run(&mut self, trie: &PathTrie) -> io::Result<()> {
        if trie.len() == 0 {
            return Ok(());
        }
        if self.parts.is_empty() {
            self.parts = (0..PARTS)
                .map(|_| {
                    tempfile::tempfile_in(&self.dir).map(|f| BufWriter::with_capacity(1 << 16, f))
                })
                .collect::<io::Result<Vec<_>>>()?;
        }
        let order = preorder(trie);
        let run = u64::from(self.runs);
        self.runs += 1;
        // The path to the entry: its depth, without a per-entry array.
        let mut path: Vec<u32> = Vec::new();
        let mut buf = Vec::with_capacity(1 << 16);
        let mut part = 0;
        for &id in &order {
            let e = trie.get(id);
            if e.parent == NO_PARENT {
                if !buf.is_empty() {
                    self.flush(part, &mut buf)?;
                }
                part = part_of(e.node);
                self.roots
                    .entry(e.node)
                    .or_insert(run << 32 | u64::from(id));
                path.clear();
            } else {
                while path.last().is_some_and(|&top| top != e.parent) {
                    path.pop();
                }
            }
            let depth = path.len();
            path.push(id);
            put(&mut buf, depth as u64);
            put(&mut buf, u64::from(e.node));
            put(&mut buf, e.weight);
            if buf.len() >= 1 << 16 {
                self.flush(part, &mut buf)?;
            }
        }
        self.flush(part, &mut buf)?;
        for p in &mut self.parts {
            p.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self, part: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        self.parts[part].write_all(buf)?;
        self.bytes += buf.len() as u64;
        buf.clear();
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
            if self.err.is_none() {
                if let Err(e) = self.write_run(last) {
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
        // Each partition merged and rendered into a file of its own (two at a time with
        // two threads), with each root's subtree located in it.
        let merged: Vec<io::Result<Rendered>> = {
            use rayon::prelude::*;
            let dir = &self.dir;
            let roots = &self.roots;
            self.parts
                .par_iter()
                .map(|part| {
                    let trie = replay(part.get_ref())?;
                    let text = tempfile::tempfile_in(dir)?;
                    render_roots(&trie, roots, naming, unit, text)
                })
                .collect()
        };
        let mut total = WriteSummary::default();
        let mut segments: Vec<(Segment, usize)> = Vec::new();
        let mut files = Vec::with_capacity(PARTS);
        for (p, m) in merged.into_iter().enumerate() {
            let r = m?;
            total.add(&r.sum);
            segments.extend(r.segments.into_iter().map(|s| (s, p)));
            files.push(r.text);
        }
        // Roots in global first-seen order.
        segments.sort_unstable_by_key(|s| s.0.key);
        let mut buf = vec![0u8; 1 << 20];
        for (s, p) in segments {
            let mut done = 0u64;
            while done < s.len {
                let n = (s.len - done).min(buf.len() as u64) as usize;
                files[p].read_exact_at(&mut buf[..n], s.at + done)?;
                out.write_all(&buf[..n])?;
                done += n as u64;
            }
        }
        Ok(total)
    }
}

/// One partition's runs replayed, in order, into one trie.
fn replay(file: &File) -> io::Result<PathTrie> {
    let mut r = BufReader::with_capacity(1 << 16, Positioned { file, at: 0 });
    let mut trie = PathTrie::default();
    let mut stack: Vec<u32> = Vec::new();
    while let Some(depth) = get(&mut r)? {
        let node = need(&mut r)?;
        let weight = need(&mut r)?;
        let (Ok(depth), Ok(node)) = (usize::try_from(depth), u32::try_from(node)) else {
            return Err(bad_record());
        };
        let parent = match depth {
            0 => NO_PARENT,
            d => *stack.get(d - 1).ok_or_else(bad_record)?,
        };
        let id = trie.step(parent, node);
        stack.truncate(depth);
        stack.push(id);
        if weight > 0 {
            trie.add_weight(id, weight);
        }
    }
    Ok(trie)
}

/// Reads `file` from `at` on with positioned reads (its own offset is the writer's).
struct Positioned<'f> {
    file: &'f File,
    at: u64,
}

impl Read for Positioned<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

fn bad_record() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        "spill run file: a record deeper than its parent",
    )
}

/// Render `trie` into `text`, root by root, locating each root's lines.
fn render_roots(
    trie: &PathTrie,
    roots: &FxHashMap<u32, u64>,
    n: Naming<'_>,
    unit: Unit,
    text: File,
) -> io::Result<Rendered> {
    let pieces = Pieces::build(trie, n.comms, n.nodes, n.tables, n.meta);
    let order = preorder(trie);
    let mut out = BufWriter::with_capacity(1 << 20, &text);
    let mut segments = Vec::new();
    let mut sum = WriteSummary::default();
    let mut buf = Vec::new();
    let mut at = 0u64;
    let mut k = 0;
    while k < order.len() {
        let root = trie.get(order[k]);
        let key = roots.get(&root.node).copied().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "spill: a root without a key")
        })?;
        // The root's subtree: up to the next entry without a parent.
        let end = (k + 1..order.len())
            .find(|&j| trie.get(order[j]).parent == NO_PARENT)
            .unwrap_or(order.len());
        let start = at;
        let mut j = k;
        while j < end {
            let to = (j + RENDER_STEP).min(end);
            buf.clear();
            let s = render_range(trie, &pieces, &order, j..to, unit, &mut buf);
            sum.add(&s);
            out.write_all(&buf)?;
            at += buf.len() as u64;
            j = to;
        }
        segments.push(Segment {
            key,
            at: start,
            len: at - start,
        });
        k = end;
    }
    out.flush()?;
    drop(out);
    Ok(Rendered {
        text,
        segments,
        sum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        let mut b = Vec::new();
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            put(&mut b, v);
        }
        let mut r = &b[..];
        for v in [0, 1, 127, 128, 300, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(get(&mut r).unwrap(), Some(v));
        }
        assert_eq!(get(&mut r).unwrap(), None);
        // Cut inside a varint: an error, not a panic.
        let mut cut = &[0x80u8][..];
        assert!(get(&mut cut).is_err());
    }
}

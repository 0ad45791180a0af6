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
//!
//! Files on disk can be cut short or changed under us (a full disk, another process, a bad
//! sector): each run file's length and CRC-32 are kept as it is written, and each merged
//! chunk's, and nothing read back is used before it is checked against them. Damage is a
//! [`SpillError`] naming the file and what was wrong, never a panic or a wrong line.

use crate::engine::nodes::NodeTable;
use crate::error::{SpillError, SpillFile, SpillProblem};
use crate::graph::pathframes::first_at_depth;
use crate::graph::paths::COMM_BIT;
use crate::graph::render::{write_in_order, PieceKeys, Pieces, WriteSummary};
use crate::graph::trie::{preorder, PathTrie, NO_PARENT};
use crate::graph::views::Unit;
use chainrec_format::{RecordingMeta, Tables};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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
    parts: Vec<BufWriter<Summed>>,
    /// Each root node's order key: run of first appearance << 32 | its id in that run.
    roots: FxHashMap<u32, u64>,
    /// Runs written.
    pub(crate) runs: u32,
    /// Bytes written to run files.
    pub(crate) bytes: u64,
    /// The first write error, reported by [`Spill::write_folded`].
    err: Option<SpillError>,
    /// The trie left at the end is in the runs (a second write must not add it again).
    last_written: bool,
    /// Tests: damage the merged files (partition, file) before they are rendered.
    #[cfg(test)]
    damage_merged: Option<fn(usize, &File)>,
}

/// A run file, with the length and CRC-32 of what was written to it (through its
/// `BufWriter`, a block at a time) to check it against when it is read back.
#[derive(Debug)]
struct Summed {
    file: File,
    len: u64,
    crc: crc32fast::Hasher,
}

impl Write for Summed {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.file.write(b)?;
        self.crc.update(&b[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The error of `file` under `dir`.
fn spill_error(dir: &Path, file: SpillFile, problem: SpillProblem) -> SpillError {
    SpillError {
        dir: dir.to_path_buf(),
        file,
        problem,
    }
}

/// Partition `part`'s run file.
fn runs_file(part: usize) -> SpillFile {
    SpillFile::Runs { part, parts: PARTS }
}

/// Partition `part`'s merged file.
fn merged_file(part: usize) -> SpillFile {
    SpillFile::Merged { part, parts: PARTS }
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
    /// Offset and length in the partition's records, and the CRC-32 of those bytes.
    at: u64,
    len: u64,
    crc: u32,
    /// The nodes of the path above its first entry, root first.
    ancestors: Box<[u32]>,
}

/// A partition merged: its preorder as records, and the chunks they are cut into.
struct Merged {
    records: File,
    /// Bytes written to `records`.
    len: u64,
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
fn get(b: &[u8], at: &mut usize) -> Result<Option<u64>, SpillProblem> {
    let (mut v, mut shift) = (0u64, 0u32);
    loop {
        let Some(&x) = b.get(*at) else {
            return if shift == 0 {
                Ok(None)
            } else {
                Err(SpillProblem::Record("the file ends inside a record"))
            };
        };
        if shift >= 64 {
            return Err(SpillProblem::Record("a number longer than 64 bits"));
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
fn need(b: &[u8], at: &mut usize) -> Result<u64, SpillProblem> {
    get(b, at)?.ok_or(SpillProblem::Record("the file ends inside a record"))
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
    fn get(&mut self) -> Result<Option<u64>, SpillProblem> {
        if self.end - self.pos < MAX_VARINT && !self.eof {
            self.refill()?;
        }
        get(&self.buf[..self.end], &mut self.pos)
    }

    /// The next varint, which must be there.
    #[inline]
    fn need(&mut self) -> Result<u64, SpillProblem> {
        if self.end - self.pos < MAX_VARINT && !self.eof {
            self.refill()?;
        }
        need(&self.buf[..self.end], &mut self.pos)
    }

    fn refill(&mut self) -> Result<(), SpillProblem> {
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
                Err(e) => return Err(SpillProblem::Read(e)),
            }
        }
        Ok(())
    }
}

/// Read `file` through and compare it with what was written to it: `len` bytes of CRC-32
/// `crc`. A second read of the file (from the page cache, ~1 ms per 10 MB), so that no
/// record of a damaged file is used: a weight or parent that cannot be is caught by the
/// parser, but a changed node or weight that could be is caught only here.
fn check(file: &File, len: u64, crc: u32) -> Result<(), SpillProblem> {
    let mut h = crc32fast::Hasher::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut at = 0u64;
    loop {
        match file.read_at(&mut buf, at) {
            Ok(0) => break,
            Ok(n) => {
                h.update(&buf[..n]);
                at += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(SpillProblem::Read(e)),
        }
    }
    if at != len {
        return Err(SpillProblem::Length {
            written: len,
            found: at,
        });
    }
    match h.finalize() {
        found if found != crc => Err(SpillProblem::Checksum {
            written: crc,
            found,
        }),
        _ => Ok(()),
    }
}

/// `node` read back, if it names one of `naming`'s nodes or comms.
fn known(naming: Naming<'_>, node: u64) -> Result<u32, SpillProblem> {
    u32::try_from(node)
        .ok()
        .filter(|&n| {
            if n & COMM_BIT != 0 {
                ((n & !COMM_BIT) as usize) < naming.comms.len()
            } else {
                (n as usize) < naming.nodes.len()
            }
        })
        .ok_or(SpillProblem::Record("a node that does not exist"))
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
            #[cfg(test)]
            damage_merged: None,
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
    fn write_run(&mut self, trie: &mut PathTrie) -> Result<(), SpillError> {
        if trie.len() == 0 {
            return Ok(());
        }
        let dir = &self.dir;
        let failed = |part: usize| {
            move |e: io::Error| spill_error(dir, runs_file(part), SpillProblem::Write(e))
        };
        if self.parts.is_empty() {
            self.parts = (0..PARTS)
                .map(|part| match tempfile::tempfile_in(dir) {
                    Ok(file) => Ok(BufWriter::with_capacity(
                        RUN_BUF,
                        Summed {
                            file,
                            len: 0,
                            crc: crc32fast::Hasher::new(),
                        },
                    )),
                    Err(e) => Err(spill_error(dir, runs_file(part), SpillProblem::Create(e))),
                })
                .collect::<Result<Vec<_>, _>>()?;
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
        for (part, p) in self.parts.iter_mut().enumerate() {
            p.write_all(&[RUN_START]).map_err(failed(part))?;
        }
        self.bytes += PARTS as u64;
        let (parts, roots, bytes) = (&mut self.parts, &mut self.roots, &mut self.bytes);
        let mut id = 0u64;
        trie.drain_labelled(|e, up| -> Result<(u32, u32), SpillError> {
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
            parts[part].write_all(&rec).map_err(failed(part))?;
            *bytes += rec.len() as u64;
            Ok((ord, part as u32))
        })?;
        for (part, p) in self.parts.iter_mut().enumerate() {
            p.flush().map_err(failed(part))?;
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
            return Err(again(e).into_io());
        }
        let dir = &self.dir;
        for (part, p) in self.parts.iter_mut().enumerate() {
            p.flush()
                .map_err(|e| spill_error(dir, runs_file(part), SpillProblem::Write(e)).into_io())?;
        }
        // Each partition's runs replayed into one trie (two at a time with two threads)
        // and written back as its merged preorder, cut into chunks that can be rendered
        // on their own; the pieces the lines use are marked on the way.
        let keys = PieceKeys::new(naming.nodes.len(), naming.comms.len());
        let merged: Vec<Result<Merged, SpillError>> = {
            use rayon::prelude::*;
            let (roots, keys) = (&self.roots, &keys);
            self.parts
                .par_iter()
                .enumerate()
                .map(|(part, w)| {
                    let trie = replay(w.get_ref(), naming)
                        .map_err(|e| spill_error(dir, runs_file(part), e))?;
                    let fail = |e| spill_error(dir, merged_file(part), e);
                    let file =
                        tempfile::tempfile_in(dir).map_err(|e| fail(SpillProblem::Create(e)))?;
                    merge_partition(&trie, roots, naming, keys, file).map_err(fail)
                })
                .collect()
        };
        let mut chunks: Vec<(Chunk, usize)> = Vec::new();
        let mut files = Vec::with_capacity(PARTS);
        for (p, m) in merged.into_iter().enumerate() {
            let m = m.map_err(SpillError::into_io)?;
            chunks.extend(m.chunks.into_iter().map(|c| (c, p)));
            files.push((m.records, m.len));
        }
        #[cfg(test)]
        if let Some(damage) = self.damage_merged {
            for (p, (f, _)) in files.iter().enumerate() {
                damage(p, f);
            }
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
                let (file, len) = &files[*p];
                render_chunk(file, *len, c, &pieces, unit, buf)
                    .map_err(|e| spill_error(dir, merged_file(*p), e).into_io())
            },
            out,
        )
    }
}

/// One partition's runs replayed, in order, into one trie: each run's entries in id
/// order, so that a prefix is created the first time a record reaches it.
fn replay(w: &Summed, naming: Naming<'_>) -> Result<PathTrie, SpillProblem> {
    check(&w.file, w.len, w.crc.clone().finalize())?;
    let mut r = Varints::new(&w.file);
    let mut trie = PathTrie::default();
    // The merged trie's id of each of this run's records so far (in this partition).
    let mut merged: Vec<u32> = Vec::new();
    while let Some(up) = r.get()? {
        if up == u64::from(RUN_START) {
            merged.clear();
            continue;
        }
        let node = known(naming, r.need()?)?;
        let weight = r.need()?;
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

fn bad_record() -> SpillProblem {
    SpillProblem::Record("a record whose parent is not before it")
}

/// `e` once more, for a second [`Spill::write_folded`] (an I/O error is not `Clone`: its
/// kind and text are kept).
fn again(e: &SpillError) -> SpillError {
    let copy = |e: &io::Error| io::Error::new(e.kind(), e.to_string());
    let problem = match &e.problem {
        SpillProblem::Create(e) => SpillProblem::Create(copy(e)),
        SpillProblem::Write(e) => SpillProblem::Write(copy(e)),
        SpillProblem::Read(e) => SpillProblem::Read(copy(e)),
        SpillProblem::Length { written, found } => SpillProblem::Length {
            written: *written,
            found: *found,
        },
        SpillProblem::Checksum { written, found } => SpillProblem::Checksum {
            written: *written,
            found: *found,
        },
        SpillProblem::Record(what) => SpillProblem::Record(what),
    };
    spill_error(&e.dir, e.file, problem)
}

/// Write `trie` (a partition's merged runs) into `file` as its preorder of records
/// (depth, node, weight), cut into [`Chunk`]s, marking the pieces its lines use in `keys`.
fn merge_partition(
    trie: &PathTrie,
    roots: &FxHashMap<u32, u64>,
    naming: Naming<'_>,
    keys: &PieceKeys,
    file: File,
) -> Result<Merged, SpillProblem> {
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
    // CRC-32 of the current chunk's bytes up to `buf[hashed]`: a block at a time.
    let mut crc = crc32fast::Hasher::new();
    let mut hashed = 0usize;
    for &id in &order {
        let e = trie.get(id);
        let at = flushed + buf.len() as u64;
        if e.parent == NO_PARENT {
            key = roots
                .get(&e.node)
                .copied()
                .ok_or(SpillProblem::Record("a root without a key"))?;
            ids.clear();
            path.clear();
        } else {
            while ids.last().is_some_and(|&top| top != e.parent) {
                ids.pop();
                path.pop();
            }
        }
        if e.parent == NO_PARENT || in_chunk == RENDER_STEP {
            crc.update(&buf[hashed..]);
            hashed = buf.len();
            if let Some(last) = chunks.last_mut() {
                last.len = at - last.at;
                last.crc = std::mem::replace(&mut crc, crc32fast::Hasher::new()).finalize();
            }
            chunks.push(Chunk {
                key,
                at,
                len: 0,
                crc: 0,
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
            crc.update(&buf[hashed..]);
            hashed = 0;
            out.write_all(&buf).map_err(SpillProblem::Write)?;
            flushed += buf.len() as u64;
            buf.clear();
        }
    }
    crc.update(&buf[hashed..]);
    out.write_all(&buf).map_err(SpillProblem::Write)?;
    flushed += buf.len() as u64;
    if let Some(last) = chunks.last_mut() {
        last.len = flushed - last.at;
        last.crc = crc.finalize();
    }
    out.flush().map_err(SpillProblem::Write)?;
    drop(out);
    Ok(Merged {
        records: file,
        len: flushed,
        chunks,
    })
}

/// Render chunk `c` of a partition's merged records (in `file`, of `written` bytes) as
/// folded lines into `out`, as [`render_range`] renders the same entries of one trie.
fn render_chunk(
    file: &File,
    written: u64,
    c: &Chunk,
    pieces: &Pieces,
    unit: Unit,
    out: &mut Vec<u8>,
) -> Result<WriteSummary, SpillProblem> {
    let len = usize::try_from(c.len).map_err(|_| SpillProblem::Record("a chunk too long"))?;
    let mut bytes = vec![0u8; len];
    if let Err(e) = file.read_exact_at(&mut bytes, c.at) {
        return Err(match (e.kind(), file.metadata()) {
            (io::ErrorKind::UnexpectedEof, Ok(m)) => SpillProblem::Length {
                written,
                found: m.len(),
            },
            _ => SpillProblem::Read(e),
        });
    }
    match crc32fast::hash(&bytes) {
        found if found != c.crc => {
            return Err(SpillProblem::Checksum {
                written: c.crc,
                found,
            })
        }
        _ => {}
    }
    let unnamed = || SpillProblem::Record("a node without a name");
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
        line.push_str(
            pieces
                .try_get(node, pieces.first_at(depth, root.unwrap_or(node)))
                .ok_or_else(unnamed)?,
        );
        ends.push(line.len());
    }
    let mut at = 0;
    while let Some(depth) = get(&bytes, &mut at)? {
        let node = u32::try_from(need(&bytes, &mut at)?).map_err(|_| unnamed())?;
        let weight = need(&bytes, &mut at)?;
        let depth = usize::try_from(depth)
            .ok()
            .filter(|&d| d <= ends.len())
            .ok_or(SpillProblem::Record("a record below a path it is not on"))?;
        ends.truncate(depth);
        if depth == 0 {
            line.clear();
            root = Some(node);
        } else {
            line.truncate(ends[depth - 1]);
            line.push(';');
        }
        line.push_str(
            pieces
                .try_get(node, pieces.first_at(depth, root.unwrap_or(node)))
                .ok_or_else(unnamed)?,
        );
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
    use chainrec_format::{Comm, StackId};
    use chainrec_testkit::scratch::ScratchDir;

    /// Nodes for the test tries: 64 threads' nodes (roots in many partitions).
    fn test_nodes(tables: &Tables) -> (NodeTable, Vec<u32>) {
        let mut nodes = NodeTable::for_tables(tables);
        let ids = (0..64)
            .map(|i| {
                let ident = nodes.ident(Comm::new(&format!("t{i}")), 100 + i);
                nodes.task(ident, StackId::NONE, StackId::NONE)
            })
            .collect();
        (nodes, ids)
    }

    /// A spill of three runs under `dir`, each a trie of paths over `ids`.
    fn spilled(dir: &Path, ids: &[u32]) -> Spill {
        let mut spill = Spill::new(&SpillTo {
            dir: dir.to_path_buf(),
            budget_bytes: 0,
        })
        .unwrap();
        for run in 0..3u32 {
            let mut trie = PathTrie::default();
            for (i, &root) in ids.iter().enumerate() {
                let mut at = trie.step(NO_PARENT, root);
                for d in 0..(i + run as usize) % 5 {
                    at = trie.step(at, ids[(i * 7 + d) % ids.len()]);
                }
                trie.add_weight(at, 1000 * u64::from(run + 1) + i as u64);
            }
            spill.spill(&mut trie);
        }
        assert_eq!(spill.runs, 3);
        spill
    }

    /// `spill` merged into folded text: its lines, or the spill error.
    fn merge(spill: &mut Spill, tables: &Tables, nodes: &NodeTable) -> Result<String, String> {
        let meta = RecordingMeta::default();
        let naming = Naming {
            comms: &[],
            nodes,
            tables,
            meta: &meta,
        };
        let mut out = Vec::new();
        match spill.write_folded(&PathTrie::default(), naming, Unit::Ns, &mut out) {
            Ok(_) => Ok(String::from_utf8(out).unwrap()),
            Err(e) => {
                let Some(s) = SpillError::of(&e) else {
                    panic!("not a spill error: {e}");
                };
                Err(format!("{:?} {s}", s.problem))
            }
        }
    }

    /// The byte at `at` of `f`, flipped.
    fn flip(f: &File, at: u64) {
        let mut b = [0u8];
        f.read_exact_at(&mut b, at).unwrap();
        f.write_all_at(&[b[0] ^ 0x10], at).unwrap();
    }

    /// A run file truncated, changed, grown, emptied or unreadable between its writing and
    /// the merge: a spill error naming the file and what was wrong, never a panic or
    /// wrong lines; the other files' errors are the same.
    #[test]
    fn damaged_runs_are_errors() {
        let tables = Tables::default();
        let (nodes, ids) = test_nodes(&tables);
        let dir = ScratchDir::new("spill-damage");
        let whole = merge(&mut spilled(dir.path(), &ids), &tables, &nodes).unwrap();
        assert!(whole.lines().count() >= 64, "{whole}");
        type Damage = fn(&mut Summed);
        let cases: [(&str, Damage, &str); 6] = [
            (
                "truncated",
                |s| s.file.set_len(s.len - 1).unwrap(),
                "Length",
            ),
            ("emptied", |s| s.file.set_len(0).unwrap(), "found: 0"),
            (
                "grown",
                |s| s.file.write_all_at(&[1, 2, 3], s.len).unwrap(),
                "Length",
            ),
            ("a byte flipped", |s| flip(&s.file, s.len / 2), "Checksum"),
            (
                "the last byte flipped",
                |s| flip(&s.file, s.len - 1),
                "Checksum",
            ),
            (
                "replaced by a file that cannot be read",
                |s| s.file = File::options().write(true).open("/dev/null").unwrap(),
                "Read",
            ),
        ];
        for (what, damage, want) in cases {
            for part in [0, 77, PARTS - 1] {
                let mut spill = spilled(dir.path(), &ids);
                assert!(spill.parts[part].get_ref().len > 1, "{part}");
                damage(spill.parts[part].get_mut());
                let err = merge(&mut spill, &tables, &nodes).expect_err(what);
                assert!(err.contains(want), "{what}: {err}");
                let file = format!(
                    "spill run file {part} (of {PARTS}) under {}",
                    dir.path().display()
                );
                assert!(err.contains(&file), "{what}: {err}");
            }
        }
    }

    /// Records that pass the checks of length and CRC (written through the run file's own
    /// writer) but cannot have been written by a spill: errors too, not a panic when the
    /// merge names their nodes or finds their parents.
    #[test]
    fn impossible_records_are_errors() {
        let tables = Tables::default();
        let (nodes, ids) = test_nodes(&tables);
        let dir = ScratchDir::new("spill-forged");
        let cases: [(&[u64], &str); 4] = [
            (&[ROOT, nodes.len() as u64, 5], "a node that does not exist"),
            (
                &[ROOT, u64::from(COMM_BIT), 5],
                "a node that does not exist",
            ),
            (
                &[ROOT + 1_000_000, u64::from(ids[0]), 5],
                "parent is not before it",
            ),
            (&[ROOT, u64::from(ids[0])], "ends inside a record"),
        ];
        for (record, want) in cases {
            let mut spill = spilled(dir.path(), &ids);
            let mut b = Vec::new();
            for &v in record {
                put(&mut b, v);
            }
            spill.parts[9].write_all(&b).unwrap();
            let err = merge(&mut spill, &tables, &nodes).unwrap_err();
            assert!(
                err.contains(want) && err.contains("spill run file 9 "),
                "{err}"
            );
        }
    }

    /// Merged files truncated or changed between the merge and their rendering: errors
    /// naming the file.
    #[test]
    fn damaged_merged_files_are_errors() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let tables = Tables::default();
        let (nodes, ids) = test_nodes(&tables);
        let dir = ScratchDir::new("spill-damage-merged");
        // The partition of the first root: the first rendered.
        static FIRST: AtomicUsize = AtomicUsize::new(0);
        FIRST.store(part_of(ids[0]), Ordering::Relaxed);
        fn first(p: usize) -> bool {
            p == FIRST.load(Ordering::Relaxed)
        }
        type Damage = fn(usize, &File);
        let cases: [(Damage, &str); 3] = [
            (|_, f| f.set_len(0).unwrap(), "Length"),
            (
                |p, f| {
                    if first(p) {
                        flip(f, f.metadata().unwrap().len() / 2);
                    }
                },
                "Checksum",
            ),
            (
                |p, f| {
                    if first(p) {
                        f.set_len(1).unwrap();
                    }
                },
                "found: 1",
            ),
        ];
        for (damage, want) in cases {
            let mut spill = spilled(dir.path(), &ids);
            spill.damage_merged = Some(damage);
            let err = merge(&mut spill, &tables, &nodes).unwrap_err();
            let file = format!("merged spill file {} (of {PARTS})", part_of(ids[0]));
            assert!(err.contains(want) && err.contains(&file), "{err}");
        }
    }

    /// A run that cannot be written (here: a file opened read-only; a full disk is the
    /// same error) or a spill directory gone before the first run: the error at the merge.
    #[test]
    fn unwritable_runs_are_errors() {
        let tables = Tables::default();
        let (nodes, ids) = test_nodes(&tables);
        let dir = ScratchDir::new("spill-unwritable");
        let mut spill = spilled(dir.path(), &ids);
        let ro = dir.path().join("ro");
        File::create(&ro).unwrap();
        spill.parts[3].get_mut().file = File::open(&ro).unwrap();
        let mut trie = PathTrie::default();
        for &id in &ids {
            trie.step(NO_PARENT, id);
        }
        spill.spill(&mut trie);
        let err = merge(&mut spill, &tables, &nodes).unwrap_err();
        assert!(
            err.contains("Write") && err.contains("spill run file 3 "),
            "{err}"
        );
        // Asked again: the same error, not a merge of the runs written before it.
        let again = merge(&mut spill, &tables, &nodes).unwrap_err();
        assert!(
            again.contains("Write") && again.contains("spill run file 3 "),
            "{again}"
        );

        let gone = dir.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let mut spill = Spill::new(&SpillTo {
            dir: gone.clone(),
            budget_bytes: 0,
        })
        .unwrap();
        std::fs::remove_dir(&gone).unwrap();
        let mut trie = PathTrie::default();
        trie.step(NO_PARENT, ids[0]);
        spill.spill(&mut trie);
        let err = merge(&mut spill, &tables, &nodes).unwrap_err();
        assert!(
            err.contains("Create") && err.contains("could not be created"),
            "{err}"
        );
    }

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

//! Trace reader: mmaps a file, validates trailer → index (or recovers by scanning),
//! merges the tables, and decodes chunks, in parallel if asked.

use crate::chunk;
use crate::section::*;
use crate::writer::{CgroupDelta, IndexPayload, IndexPayloadV1, TableDelta};
use crate::*;
use std::cell::RefCell;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// How a file without a valid index was read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes at the end of the file that did not form a complete section.
    pub trailing_bytes: u64,
    /// Why the index was not used (missing, damaged).
    pub reason: String,
    /// True when scanning stopped at damage (checksum mismatch, corrupt section, data after
    /// the trailer) rather than at the incomplete last section a killed writer leaves:
    /// events after the damage are not readable, so analyses must not pass silently.
    pub damaged: bool,
}

/// True for the stop a killed writer causes: a section that runs past the end of the file.
/// A "truncation" whose section would fit in the file is a damaged length field instead.
fn is_tail_truncation(e: &FormatError) -> bool {
    matches!(e, FormatError::Truncated { needed, available, .. } if needed > available)
}

/// Result of [`TraceReader::verify`].
#[derive(Clone, Debug, Default)]
pub struct VerifyReport {
    /// Events decoded.
    pub events: u64,
    /// Events by kind (indexed by `EventKind as usize`).
    pub events_by_kind: [u64; EventKind::COUNT],
    /// Event stack references that are reserved "no stack" values, by reserved id (0..16).
    pub reserved_stack_refs: [u64; 16],
}

/// Bytes of the file by section kind (for `info`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SectionBytes {
    /// File header + trailer.
    pub framing: u64,
    /// Metadata sections.
    pub meta: u64,
    /// Table sections.
    pub tables: u64,
    /// Event chunks.
    pub chunks: u64,
    /// Index section.
    pub index: u64,
    /// Mapping sections (executable mappings of user processes, format 2.1).
    pub mappings: u64,
    /// Throttle sections (optional kind, format 2.1).
    pub throttles: u64,
    /// Cgroup sections (optional kind, format 2.1).
    pub cgroups: u64,
    /// Goroutine sections (optional kind, format 2.2), goroutine execute sections
    /// (format 2.3) and Go stop-the-world sections (format 2.4).
    pub goroutines: u64,
    /// Sections of kinds this version does not know (skipped) and trailing garbage.
    pub other: u64,
    /// Number of table sections.
    pub table_sections: u64,
    /// Number of metadata sections.
    pub meta_sections: u64,
}

enum Data {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

/// Called with the error of the first damaged event chunk when salvaging
/// ([`TraceReader::salvage_chunks`]).
type DamageHook = Box<dyn Fn(&FormatError) + Send + Sync>;

/// A memory-mapped trace file.
pub struct TraceReader {
    path: PathBuf,
    data: Data,
    version: (u16, u16),
    meta: RecordingMeta,
    tables: Tables,
    chunks: Vec<ChunkInfo>,
    recovery: Option<Recovery>,
    events: u64,
    bytes: SectionBytes,
    stats: Option<VerifyReport>,
    on_damage: Option<DamageHook>,
    /// The files after the first of a set read as one recording
    /// ([`TraceReader::open_files`]); their chunks follow the first file's in `chunks`.
    parts: Vec<Part>,
}

/// One more file of a set read as one recording: where its chunks start in
/// [`TraceReader::chunks`], and its bytes.
pub(crate) struct Part {
    pub(crate) path: PathBuf,
    data: Data,
    version: (u16, u16),
    pub(crate) first_chunk: usize,
    pub(crate) file_len: u64,
}

/// Everything `open` learns about the sections.
#[derive(Default)]
struct Loaded {
    meta: Option<RecordingMeta>,
    tables: Tables,
    chunks: Vec<ChunkInfo>,
    bytes: SectionBytes,
    stats: Option<VerifyReport>,
}

thread_local! {
    static DCTX: RefCell<Option<(zstd::bulk::Decompressor<'static>, Vec<u8>, chunk::DecodeScratch)>> = const { RefCell::new(None) };
}

impl TraceReader {
    /// Open and check `path`: header, sections, index (or recover by scanning), tables.
    pub fn open(path: &Path) -> Result<TraceReader> {
        let io = |source| FormatError::Io {
            path: path.to_owned(),
            source,
        };
        let mut file = std::fs::File::open(path).map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if meta.is_dir() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory, not a trace file",
            )));
        }
        if !meta.is_file() {
            // A pipe or character device (`cat trace.zst | chainrec chains /dev/stdin`)
            // cannot be mapped: read it into memory, once its first bytes show a trace
            // (`/dev/zero` must not fill the memory).
            use std::io::Read;
            let mut bytes = Vec::new();
            (&mut file)
                .take(FILE_HEADER_LEN as u64)
                .read_to_end(&mut bytes)
                .map_err(io)?;
            if bytes.is_empty() {
                return Err(FormatError::Empty);
            }
            parse_file_header(&bytes)?;
            file.read_to_end(&mut bytes).map_err(io)?;
            return Self::from_data(path.to_owned(), Data::Owned(bytes));
        }
        if meta.len() == 0 {
            return Err(FormatError::Empty);
        }
        // SAFETY: the map is read-only and private to this reader. A concurrent
        // writer may only append (sections are never rewritten); truncation by another
        // process while mapped would fault, which is the usual mmap caveat for trace
        // tools and is documented in FORMAT.md.
        let map = unsafe { memmap2::MmapOptions::new().map(&file) }.map_err(io)?;
        Self::from_data(path.to_owned(), Data::Map(map))
    }

    /// Open a trace held in memory (fuzzing, tests, traces received over a pipe). Same
    /// checks and recovery as [`TraceReader::open`].
    pub fn from_bytes(bytes: Vec<u8>) -> Result<TraceReader> {
        Self::from_data(PathBuf::from("<memory>"), Data::Owned(bytes))
    }

    fn from_data(path: PathBuf, data: Data) -> Result<TraceReader> {
        let mut r = TraceReader {
            path,
            data,
            version: (0, 0),
            meta: RecordingMeta::default(),
            tables: Tables::default(),
            chunks: Vec::new(),
            recovery: None,
            events: 0,
            bytes: SectionBytes::default(),
            stats: None,
            on_damage: None,
            parts: Vec::new(),
        };
        r.version = parse_file_header(r.bytes())?;
        let loaded = match r.load_indexed() {
            Ok(l) => l,
            Err(reason) => {
                let (l, recovery) = r.load_scan(reason)?;
                r.recovery = Some(recovery);
                l
            }
        };
        r.meta = loaded.meta.unwrap_or_default();
        r.tables = loaded.tables;
        r.events = loaded.chunks.iter().map(|c| c.events as u64).sum();
        r.chunks = loaded.chunks;
        r.bytes = loaded.bytes;
        r.stats = loaded.stats;
        // What opening read (sections, or a recovery's scan of them) is not needed now:
        // decoding maps what it reads.
        Self::release(&r.data, r.bytes());
        Ok(r)
    }

    /// Tell the kernel that the mapped pages `range` (a subslice of the mapping) touches
    /// will not be needed soon. Only a hint: errors are ignored.
    fn release(data: &Data, range: &[u8]) {
        let Data::Map(m) = data else { return };
        // Outward to aligned 2 MiB windows: a read fault maps more than its page (the
        // kernel's fault-around, and all of a large page-cache folio, up to 2 MiB), so
        // releasing only the section's own pages left ~1 GB of a 3.6 GB trace mapped
        // after opening it. A page of a neighbouring section is mapped again if that
        // section is read (the page cache still holds it).
        const WINDOW: usize = 2 << 20;
        let base = m.as_ptr() as usize;
        // Windows are aligned in the address space; the mapping starts on a page.
        let first = range.as_ptr() as usize;
        let start = (first / WINDOW * WINDOW).max(base) - base;
        let end = ((first + range.len()).div_ceil(WINDOW) * WINDOW - base).min(m.len());
        if end > start {
            // SAFETY: the mapping is read-only, so no page of it was ever modified:
            // MADV_DONTNEED only unmaps pages, and any later access (by this or another
            // thread still holding a slice, e.g. decoding the neighbouring chunk) faults
            // the same file bytes back in.
            let _ = unsafe {
                m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }

    fn bytes(&self) -> &[u8] {
        match &self.data {
            Data::Map(m) => m,
            Data::Owned(v) => v,
        }
    }

    /// Read via trailer and index. Err(reason) means "fall back to scanning".
    fn load_indexed(&self) -> std::result::Result<Loaded, String> {
        let data = self.bytes();
        let (index, index_at, index_len) = read_index(data, self.version.0)?;
        let mut l = Loaded::default();
        l.bytes.framing = (FILE_HEADER_LEN + TRAILER_LEN) as u64;
        l.bytes.index = index_len;
        // Reading a section maps the pages around it too (the kernel's fault-around, 64
        // KiB): on a trace of 15 k chunks, each with its table section, keeping them
        // would put 1 GB of the file in the resident set before one event is decoded.
        let release = |section: &[u8]| Self::release(&self.data, section);
        load_tables_and_meta(&mut l, data, &index, &release)?;
        load_optional_sections(&mut l, data, &index, (index_at, index_len), &release)?;
        load_chunk_list(&mut l, data, &index, &release)?;
        let known = l.bytes.framing
            + l.bytes.meta
            + l.bytes.tables
            + l.bytes.chunks
            + l.bytes.index
            + l.bytes.mappings
            + l.bytes.throttles
            + l.bytes.goroutines
            + l.bytes.cgroups;
        l.bytes.other = (data.len() as u64).saturating_sub(known);
        Ok(l)
    }

    /// Scan sections from the start, stopping at the first incomplete or damaged one.
    fn load_scan(&self, index_problem: String) -> Result<(Loaded, Recovery)> {
        let data = self.bytes();
        let flen = data.len() as u64;
        let mut l = Loaded::default();
        l.bytes.framing = FILE_HEADER_LEN as u64;
        let mut off = FILE_HEADER_LEN as u64;
        let mut last_ts = 0u64;
        let mut stop: Option<String> = None;
        // A killed writer leaves at most one incomplete section at the end: only a
        // `Truncated` stop is that; anything else is damage.
        let mut damaged = false;
        while off < flen {
            let frame = match read_frame(data, off) {
                Ok(f) => f,
                Err(e) => {
                    damaged = !is_tail_truncation(&e);
                    stop = Some(e.to_string());
                    break;
                }
            };
            let (h, payload) = match frame {
                Frame::Trailer => {
                    l.bytes.framing += TRAILER_LEN as u64;
                    off += TRAILER_LEN as u64;
                    if off != flen {
                        damaged = true;
                        stop = Some(format!(
                            "trailer at offset {} is not at the end of the file",
                            off - TRAILER_LEN as u64
                        ));
                    }
                    break;
                }
                Frame::Foreign(n) => {
                    l.bytes.other += n;
                    off += n;
                    continue;
                }
                Frame::Section(h, p) => (h, p),
            };
            if let Err(e) = check_payload(&h, payload, off) {
                damaged = !is_tail_truncation(&e);
                stop = Some(e.to_string());
                break;
            }
            let step: std::result::Result<(), FormatError> = (|| {
                match h.kind {
                    KIND_META => {
                        let raw = decompress_section(&h, payload, off)?;
                        l.meta = Some(decode_bincode(&raw, "metadata section", off)?);
                        l.bytes.meta += h.section_len();
                        l.bytes.meta_sections += 1;
                    }
                    KIND_TABLES => {
                        let raw = decompress_section(&h, payload, off)?;
                        let delta: TableDelta<Symbol> = decode_bincode(&raw, "table section", off)?;
                        // Merge into a copy so a bad section leaves the tables as they were.
                        let mut t = std::mem::take(&mut l.tables);
                        let r = merge_tables(&mut t, delta, off);
                        l.tables = t;
                        r?;
                        l.bytes.tables += h.section_len();
                        l.bytes.table_sections += 1;
                    }
                    KIND_CHUNK => {
                        if h.events == 0 || h.last_ts < h.first_ts || h.first_ts < last_ts {
                            return Err(FormatError::Corrupt {
                                what: crate::error::EVENT_CHUNK,
                                offset: off,
                                detail: "header timestamps or event count inconsistent".into(),
                            });
                        }
                        last_ts = h.last_ts;
                        l.bytes.chunks += h.section_len();
                        l.chunks.push(ChunkInfo {
                            offset: off,
                            len: h.section_len(),
                            events: h.events,
                            first_ts: h.first_ts,
                            last_ts: h.last_ts,
                        });
                    }
                    KIND_INDEX => l.bytes.index += h.section_len(),
                    KIND_MAPPINGS => read_mappings(&mut l, &h, payload, off)?,
                    KIND_THROTTLES => {
                        load_throttles(&mut l.tables, &h, payload, off)?;
                        l.bytes.throttles += h.section_len();
                    }
                    KIND_GOROUTINES | KIND_GO_EXECUTES | KIND_GO_STWS => {
                        load_goroutines(&mut l.tables, &h, payload, off)?;
                        l.bytes.goroutines += h.section_len();
                    }
                    KIND_CGROUPS => {
                        load_cgroups(&mut l.tables, &h, payload, off)?;
                        l.bytes.cgroups += h.section_len();
                    }
                    k if k >= KIND_OPTIONAL_MIN => l.bytes.other += h.section_len(),
                    k => {
                        return Err(FormatError::Corrupt {
                            what: "section",
                            offset: off,
                            detail: format!("unknown required section kind {k}"),
                        })
                    }
                }
                Ok(())
            })();
            if let Err(e) = step {
                damaged = !is_tail_truncation(&e);
                stop = Some(e.to_string());
                break;
            }
            off += h.section_len();
        }
        if l.meta.is_none() {
            // Without even the initial metadata section there is nothing to recover. A
            // file that ends with a valid trailer was finished: a first section running
            // past its end is a damaged length field, not a killed writer's cut.
            if damaged || matches!(parse_trailer(data), Ok(Some(_))) {
                // The first section of a file is its metadata section (FORMAT.md).
                return Err(FormatError::Corrupt {
                    what: "metadata section",
                    offset: FILE_HEADER_LEN as u64,
                    detail: stop.unwrap_or_default(),
                });
            }
            let avail = flen.saturating_sub(FILE_HEADER_LEN as u64);
            return Err(FormatError::Truncated {
                offset: FILE_HEADER_LEN as u64,
                needed: SECTION_HEADER_LEN as u64,
                available: avail,
            });
        }
        let trailing = flen - off.min(flen);
        l.bytes.other += trailing;
        let reason = match stop {
            Some(s) => format!("{index_problem}; read up to offset {off}, then stopped: {s}"),
            None => index_problem,
        };
        Ok((
            l,
            Recovery {
                trailing_bytes: trailing,
                reason,
                damaged,
            },
        ))
    }

    /// Recording metadata (the last metadata section in the file).
    pub fn meta(&self) -> &RecordingMeta {
        &self.meta
    }
    /// All tables, merged.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }
    /// All tables, to change before reading events (symbols resolved again on this
    /// machine).
    pub fn tables_mut(&mut self) -> &mut Tables {
        &mut self.tables
    }
    /// Event chunks in file (= time) order.
    pub fn chunks(&self) -> &[ChunkInfo] {
        &self.chunks
    }
    /// Some when the file had no usable index and was recovered by scanning.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.recovery.as_ref()
    }
    /// Total events in all chunks.
    pub fn event_count(&self) -> u64 {
        self.events
    }
    /// File size in bytes (of all files, for a set).
    pub fn file_len(&self) -> u64 {
        self.bytes().len() as u64 + self.parts.iter().map(|p| p.file_len).sum::<u64>()
    }
    /// Path the trace was opened from (the first file of a set).
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Every file read, in time order (one for a plain trace).
    pub fn paths(&self) -> Vec<&Path> {
        std::iter::once(self.path.as_path())
            .chain(self.parts.iter().map(|p| p.path.as_path()))
            .collect()
    }

    /// The bytes and format version of the file holding chunk `index`.
    fn file_of_chunk(&self, index: usize) -> (&Data, (u16, u16)) {
        match self.parts.iter().rev().find(|p| p.first_chunk <= index) {
            Some(p) => (&p.data, p.version),
            None => (&self.data, self.version),
        }
    }

    /// Append `next` (a later file of the same recording, checked by the caller) to this
    /// reader: its chunks after ours, its bytes kept alive here.
    pub(crate) fn append_file(&mut self, next: TraceReader) {
        let first_chunk = self.chunks.len();
        let file_len = next.bytes().len() as u64;
        if self.parts.is_empty() {
            if let Some(r) = self.recovery.as_mut() {
                r.reason = format!("{}: {}", self.path.display(), r.reason);
            }
        }
        self.chunks.extend_from_slice(&next.chunks);
        self.events += next.events;
        let b = &mut self.bytes;
        let n = &next.bytes;
        b.framing += n.framing;
        b.meta += n.meta;
        b.tables += n.tables;
        b.chunks += n.chunks;
        b.index += n.index;
        b.mappings += n.mappings;
        b.throttles += n.throttles;
        b.goroutines += n.goroutines;
        b.cgroups += n.cgroups;
        b.other += n.other;
        b.table_sections += n.table_sections;
        b.meta_sections += n.meta_sections;
        self.stats = match (self.stats.take(), &next.stats) {
            (Some(mut a), Some(b)) => {
                a.events += b.events;
                for (x, y) in a.events_by_kind.iter_mut().zip(b.events_by_kind) {
                    *x += y;
                }
                for (x, y) in a.reserved_stack_refs.iter_mut().zip(b.reserved_stack_refs) {
                    *x += y;
                }
                Some(a)
            }
            _ => None,
        };
        if self.recovery.is_none() {
            self.recovery = next.recovery.map(|mut r| {
                r.reason = format!("{}: {}", next.path.display(), r.reason);
                r
            });
        } else if let (Some(r), Some(n)) = (self.recovery.as_mut(), next.recovery) {
            r.damaged |= n.damaged;
            r.trailing_bytes += n.trailing_bytes;
            r.reason = format!("{}; {}: {}", r.reason, next.path.display(), n.reason);
        }
        self.parts.push(Part {
            path: next.path,
            data: next.data,
            version: next.version,
            first_chunk,
            file_len,
        });
    }

    /// Replace the metadata and tables (those of a whole set, merged by the caller).
    pub(crate) fn set_meta_tables(&mut self, meta: RecordingMeta, tables: Tables) {
        self.meta = meta;
        self.tables = tables;
    }
    /// Format version of the file (major, minor).
    pub fn version(&self) -> (u16, u16) {
        self.version
    }
    /// Bytes of the file by section kind.
    pub fn section_bytes(&self) -> &SectionBytes {
        &self.bytes
    }
    /// Event counts by kind and reserved stack references as recorded in the index by
    /// the writer (None for recovered files: use [`TraceReader::verify`]).
    pub fn indexed_stats(&self) -> Option<&VerifyReport> {
        self.stats.as_ref()
    }
    /// Time span covered by the events (first ts, last ts), if any.
    pub fn time_span(&self) -> Option<(u64, u64)> {
        Some((self.chunks.first()?.first_ts, self.chunks.last()?.last_ts))
    }

    /// Chunks that may hold events with `start_ns <= ts <= end_ns`.
    pub fn chunks_in_window(&self, start_ns: u64, end_ns: u64) -> Range<usize> {
        let lo = self.chunks.partition_point(|c| c.last_ts < start_ns);
        let hi = self.chunks.partition_point(|c| c.first_ts <= end_ns);
        lo..hi.max(lo)
    }

    /// Decode chunk `index`, appending its events to `out`.
    pub fn decode_chunk(&self, index: usize, out: &mut Vec<Event>) -> Result<()> {
        let res = self.decode_chunk_in_file(index, out);
        // In a set, an error of a later file names that file (offsets are per file).
        match self.parts.iter().rev().find(|p| p.first_chunk <= index) {
            Some(p) => res.map_err(|e| FormatError::InFile {
                path: p.path.clone(),
                source: Box::new(e),
            }),
            None => res,
        }
    }

    fn decode_chunk_in_file(&self, index: usize, out: &mut Vec<Event>) -> Result<()> {
        let Some(info) = self.chunks.get(index).copied() else {
            return Err(FormatError::Corrupt {
                what: crate::error::EVENT_CHUNK,
                offset: 0,
                detail: format!(
                    "chunk {index} does not exist (file has {})",
                    self.chunks.len()
                ),
            });
        };
        let off = info.offset;
        let corrupt = |detail: String| FormatError::Corrupt {
            what: crate::error::EVENT_CHUNK,
            offset: off,
            detail,
        };
        let (data, version) = self.file_of_chunk(index);
        let bytes: &[u8] = match data {
            Data::Map(m) => m,
            Data::Owned(v) => v,
        };
        let (h, payload) = section_of(bytes, off, KIND_CHUNK)?;
        check_payload(&h, payload, off)?;
        if h.raw_len > MAX_CHUNK_RAW {
            return Err(corrupt(format!("payload size {} exceeds limit", h.raw_len)));
        }
        let start = out.len();
        let res = DCTX.with(|cell| -> Result<chunk::ChunkSummary> {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                let d =
                    zstd::bulk::Decompressor::new().map_err(|e| corrupt(format!("zstd: {e}")))?;
                *slot = Some((d, Vec::new(), chunk::DecodeScratch::default()));
            }
            let Some((dctx, buf, scratch)) = slot.as_mut() else {
                unreachable!()
            };
            buf.clear();
            buf.reserve(h.raw_len as usize);
            let n = dctx
                .decompress_to_buffer(payload, buf)
                .map_err(|e| corrupt(format!("zstd: {e}")))?;
            if n as u64 != h.raw_len || buf.len() as u64 != h.raw_len {
                return Err(corrupt(format!(
                    "payload decompressed to {n} bytes, header says {}",
                    h.raw_len
                )));
            }
            // The chunk (header and compressed bytes) is no longer needed: drop it from
            // this process's resident set, so that streaming a trace larger than RAM
            // stays bounded.
            let end = payload.as_ptr() as usize - bytes.as_ptr() as usize + payload.len();
            Self::release(data, &bytes[off as usize..end]);
            let r = chunk::decode(buf, out, scratch, version.0 >= 2).map_err(corrupt);
            if buf.capacity() > (8 << 20) {
                *buf = Vec::new();
            }
            scratch.trim();
            r
        });
        let summary = match res {
            Ok(s) => s,
            Err(e) => {
                out.truncate(start);
                return Err(e);
            }
        };
        if summary.events != info.events as u64
            || summary.first_ts != info.first_ts
            || summary.last_ts != info.last_ts
        {
            out.truncate(start);
            return Err(corrupt(format!(
                "decoded {} events over [{}, {}], header says {} over [{}, {}]",
                summary.events,
                summary.first_ts,
                summary.last_ts,
                info.events,
                info.first_ts,
                info.last_ts
            )));
        }
        Ok(())
    }

    /// Decode the chunks in `range` in order, `parallel` ones at a time with rayon
    /// (bounded read-ahead), calling `f` with each chunk's events in time order.
    pub fn for_each_chunk<E: From<FormatError>>(
        &self,
        range: Range<usize>,
        parallel: bool,
        mut f: impl FnMut(&[Event]) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let range = range.start.min(self.chunks.len())..range.end.min(self.chunks.len());
        // Inside a rayon worker, blocking on the channel below would take that worker away
        // from the pool the producer needs (two such callers could deadlock a 2-thread
        // pool): decode in line instead.
        if !parallel || range.len() <= 1 || rayon::current_thread_index().is_some() {
            let mut buf = Vec::new();
            for i in range {
                buf.clear();
                if let Err(e) = self.decode_chunk(i, &mut buf) {
                    return self.salvaged(e).map_err(E::from);
                }
                f(&buf)?;
            }
            return Ok(());
        }
        // A producer thread decodes batches of chunks with rayon (a chunk per thread) while
        // this thread hands the previous batch to `f`; the hand-over waits for this thread
        // to take it, so at most two batches are in memory (decoded chunks were up to 28 MB
        // of a 20 M-event `chains` peak with batches of two chunks per thread and one more
        // batch queued).
        use rayon::prelude::*;
        let batch = rayon::current_num_threads().max(2);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Result<Vec<Event>>>>(0);
        let (recycle_tx, recycle_rx) = std::sync::mpsc::channel::<Vec<Event>>();
        let recycle_rx = std::sync::Mutex::new(recycle_rx);
        std::thread::scope(|s| {
            let producer = s.spawn(move || {
                let mut start = range.start;
                while start < range.end {
                    let end = (start + batch).min(range.end);
                    let decoded: Vec<Result<Vec<Event>>> = (start..end)
                        .into_par_iter()
                        .map(|i| {
                            let mut v = recycle_rx
                                .lock()
                                .ok()
                                .and_then(|r| r.try_recv().ok())
                                .unwrap_or_default();
                            v.clear();
                            self.decode_chunk(i, &mut v).map(|_| v)
                        })
                        .collect();
                    let failed = decoded.iter().any(|r| r.is_err());
                    if tx.send(decoded).is_err() || failed {
                        return;
                    }
                    start = end;
                }
            });
            let mut result = Ok(());
            'outer: for batch in rx.iter() {
                for r in batch {
                    match r {
                        Ok(v) => {
                            if let Err(e) = f(&v) {
                                result = Err(e);
                                break 'outer;
                            }
                            let _ = recycle_tx.send(v);
                        }
                        Err(e) => {
                            result = self.salvaged(e).map_err(E::from);
                            break 'outer;
                        }
                    }
                }
            }
            drop(rx);
            let _ = producer.join();
            result
        })
    }

    /// Salvage mode: from now on [`Self::for_each_chunk`] ends without an error at the
    /// first event chunk that fails to decode (checksum, corruption), after handing over
    /// every chunk before it, and calls `warn` with that chunk's error. The events seen are
    /// then a prefix of the trace, in time order. Off by default, because the caller must
    /// tell its user that the output misses the events after the damage.
    pub fn salvage_chunks(&mut self, warn: impl Fn(&FormatError) + Send + Sync + 'static) {
        self.on_damage = Some(Box::new(warn));
    }

    /// A chunk failed to decode: Ok (stop here) in salvage mode, else the error.
    fn salvaged(&self, e: FormatError) -> Result<()> {
        match &self.on_damage {
            Some(warn) => {
                warn(&e);
                Ok(())
            }
            None => Err(e),
        }
    }

    /// Check every section the index of each file lists, decode every chunk and check
    /// every reference against the tables. Opening checks the table sections, the last
    /// metadata section, the index and the chunk headers; this adds the payloads of the
    /// metadata sections a later one superseded (which reading never needs) and the chunk
    /// payloads, and names the kind the index expects at a damaged header.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.verify_sections()?;
        let mut rep = VerifyReport::default();
        let mut last_ts = 0u64;
        let mut chunk_idx = 0usize;
        let tables = &self.tables;
        // Id sets with a cheap hasher: verify looks up every real stack reference.
        let stack_ids: chunk::IdMap<u32, ()> = tables.stacks.keys().map(|k| (k.0, ())).collect();
        let irq_ids: chunk::IdMap<u32, ()> = tables.irq_sources.keys().map(|&k| (k, ())).collect();
        self.for_each_chunk(0..self.chunks.len(), true, |events| -> Result<()> {
            let off = self.chunks[chunk_idx].offset;
            chunk_idx += 1;
            let dangling_stack = |id: StackId| FormatError::Dangling {
                what: "stack",
                id: id.0 as u64,
                offset: off,
            };
            let stack = |id: StackId, rep: &mut VerifyReport| -> Result<()> {
                if id.is_real() {
                    if !stack_ids.contains_key(&id.0) {
                        return Err(dangling_stack(id));
                    }
                } else {
                    rep.reserved_stack_refs[id.0 as usize] += 1;
                }
                Ok(())
            };
            for e in events {
                if e.ts() < last_ts {
                    return Err(FormatError::Corrupt {
                        what: crate::error::EVENT_CHUNK,
                        offset: off,
                        detail: format!(
                            "event at ts {} precedes the previous event at {last_ts}",
                            e.ts()
                        ),
                    });
                }
                last_ts = e.ts();
                rep.events += 1;
                rep.events_by_kind[e.kind() as usize] += 1;
                match e {
                    Event::Switch(s) => {
                        stack(s.prev_kstack, &mut rep)?;
                        stack(s.prev_ustack, &mut rep)?;
                    }
                    Event::Waking(w) => {
                        stack(w.waker_kstack, &mut rep)?;
                        stack(w.waker_ustack, &mut rep)?;
                        if w.source != 0 && !irq_ids.contains_key(&w.source) {
                            return Err(FormatError::Dangling {
                                what: "irq source",
                                id: w.source as u64,
                                offset: off,
                            });
                        }
                    }
                    Event::OffCpuStacks(o) => {
                        stack(o.kstack, &mut rep)?;
                        stack(o.ustack, &mut rep)?;
                    }
                    _ => {}
                }
            }
            Ok(())
        })?;
        Ok(rep)
    }

    /// [`check_listed_sections`] for each file, in file order; errors of a later file of a
    /// set name that file.
    fn verify_sections(&self) -> Result<()> {
        check_listed_sections(self.bytes(), self.version.0)?;
        for p in &self.parts {
            let bytes: &[u8] = match &p.data {
                Data::Map(m) => m,
                Data::Owned(v) => v,
            };
            check_listed_sections(bytes, p.version.0).map_err(|e| FormatError::InFile {
                path: p.path.clone(),
                source: Box::new(e),
            })?;
        }
        Ok(())
    }

    /// Read everything into memory (small traces, tests).
    pub fn to_mem(&self) -> Result<MemTrace> {
        let mut events = Vec::with_capacity(self.events.min(1 << 24) as usize);
        for i in 0..self.chunks.len() {
            self.decode_chunk(i, &mut events)?;
        }
        Ok(MemTrace {
            meta: self.meta.clone(),
            tables: self.tables.clone(),
            events,
        })
    }
}

/// The section at `off`, which must be of `kind`.
/// Decode a mapping section into the tables (checksum checked here).
fn read_mappings(l: &mut Loaded, h: &SectionHeader, payload: &[u8], off: u64) -> Result<()> {
    check_payload(h, payload, off)?;
    let raw = decompress_section(h, payload, off)?;
    let entries: Vec<MappingEntry> = decode_bincode(&raw, "mapping section", off)?;
    for m in entries {
        l.tables.mappings.insert_stored(m);
    }
    l.bytes.mappings += h.section_len();
    Ok(())
}

/// Errors name the kind expected there (the index's word for it): a damaged header can no
/// longer tell its own.
fn section_of(data: &[u8], off: u64, kind: u8) -> Result<(SectionHeader, &[u8])> {
    let what = kind_name(kind);
    let corrupt = |detail: String| FormatError::Corrupt {
        what,
        offset: off,
        detail,
    };
    match read_frame(data, off) {
        Ok(Frame::Section(h, p)) if h.kind == kind => Ok((h, p)),
        Ok(Frame::Section(h, _)) => Err(corrupt(format!(
            "expected section kind {kind}, found {}",
            h.kind
        ))),
        Ok(_) => Err(corrupt("no section header here".into())),
        Err(FormatError::Checksum { .. }) => Err(FormatError::Checksum {
            what: header_name(kind),
            offset: off,
        }),
        Err(e) => Err(corrupt(e.to_string())),
    }
}

/// The bytes of the section at `off` (header and payload), as `section_of` found it.
fn section_bytes<'d>(data: &'d [u8], off: u64, h: &SectionHeader) -> &'d [u8] {
    let start = off as usize;
    &data[start..(start + h.section_len() as usize).min(data.len())]
}

/// Decode a bincode payload. bincode preallocates strings and byte vectors from their
/// length prefix, so decoding runs under a byte limit (a power-of-two tier at least 16x
/// the payload): a forged length fails with a limit error instead of allocating. Strings and
/// byte slices of `T` may borrow from `raw`.
fn decode_bincode<'a, T: serde::Deserialize<'a>>(
    raw: &'a [u8],
    what: &'static str,
    offset: u64,
) -> Result<T> {
    let need = (raw.len() as u64)
        .saturating_mul(16)
        .saturating_add(1 << 16);
    macro_rules! tiers {
        ($($bits:literal),*) => {{
            let mut res = None;
            $(
                if res.is_none() && need <= (1u64 << $bits) {
                    res = Some(bincode::serde::borrow_decode_from_slice::<T, _>(raw, bincode::config::standard().with_limit::<{ 1usize << $bits }>()));
                }
            )*
            res.unwrap_or_else(|| bincode::serde::borrow_decode_from_slice::<T, _>(raw, bincode::config::standard().with_limit::<{ 1usize << 36 }>()))
        }};
    }
    let res = tiers!(17, 20, 23, 26, 29, 32);
    match res {
        Ok((v, used)) if used == raw.len() => Ok(v),
        Ok((_, used)) => Err(FormatError::Corrupt {
            what,
            offset,
            detail: format!("{} trailing bytes", raw.len() - used),
        }),
        Err(e) => Err(FormatError::Corrupt {
            what,
            offset,
            detail: e.to_string(),
        }),
    }
}

/// Merge one table section into `t` (same rules as [`MemTrace`]'s sink).
fn merge_tables(t: &mut Tables, d: TableDelta<Symbol<'_>>, offset: u64) -> Result<()> {
    for s in &d.stacks {
        if !s.id.is_real() {
            return Err(FormatError::Corrupt {
                what: "table section",
                offset,
                detail: format!("reserved stack id {} in stack table", s.id.0),
            });
        }
    }
    if d.irq_sources.iter().any(|s| s.id == 0) {
        return Err(FormatError::Corrupt {
            what: "table section",
            offset,
            detail: "irq source id 0 in table".into(),
        });
    }
    t.stacks.reserve(d.stacks.len());
    for s in d.stacks {
        t.stacks.insert(s.id, s);
    }
    t.symbols.reserve(d.symbols.len());
    for s in &d.symbols {
        t.symbols.insert_symbol(s);
    }
    for task in d.tasks {
        t.tasks.entry(task.tid).or_insert(task);
    }
    for s in d.irq_sources {
        t.irq_sources.insert(s.id, s);
    }
    Ok(())
}

/// The header of the section at `off` (any kind).
fn read_section_header(data: &[u8], off: u64) -> Result<(SectionHeader, &[u8])> {
    match read_frame(data, off)? {
        Frame::Section(h, p) => Ok((h, p)),
        _ => Err(FormatError::Corrupt {
            what: "section",
            offset: off,
            detail: "no section header here".into(),
        }),
    }
}

/// Check and decode one optional section (`what` names it in errors).
fn load_optional<T: serde::de::DeserializeOwned>(
    h: &SectionHeader,
    payload: &[u8],
    off: u64,
    what: &'static str,
) -> Result<T> {
    check_payload(h, payload, off)?;
    let raw = decompress_section(h, payload, off)?;
    decode_bincode(&raw, what, off)
}

/// Check, decode and merge one throttle section.
fn load_throttles(t: &mut Tables, h: &SectionHeader, payload: &[u8], off: u64) -> Result<()> {
    let d: ThrottleDelta = load_optional(h, payload, off, "throttle section")?;
    t.throttling.merge(&d);
    Ok(())
}

/// Check, decode and merge one goroutine section or goroutine execute section.
fn load_goroutines(t: &mut Tables, h: &SectionHeader, payload: &[u8], off: u64) -> Result<()> {
    let d = if h.kind == KIND_GO_EXECUTES {
        GoDelta {
            executes: load_optional(h, payload, off, "goroutine execute section")?,
            ..GoDelta::default()
        }
    } else if h.kind == KIND_GO_STWS {
        GoDelta {
            stws: load_optional(h, payload, off, "Go stop-the-world section")?,
            ..GoDelta::default()
        }
    } else {
        load_optional(h, payload, off, "goroutine section")?
    };
    t.goroutines.merge(&d);
    Ok(())
}

/// Check, decode and merge one cgroup section.
fn load_cgroups(t: &mut Tables, h: &SectionHeader, payload: &[u8], off: u64) -> Result<()> {
    let d: CgroupDelta = load_optional(h, payload, off, "cgroup section")?;
    t.merge_cgroups(&d.cgroups, &d.members);
    Ok(())
}

/// Decode and merge one raw table payload (fuzzing entry point).
pub(crate) fn decode_tables_for_fuzz(raw: &[u8]) -> Result<Tables> {
    let delta: TableDelta<Symbol> = decode_bincode(raw, "table section", 0)?;
    let mut t = Tables::default();
    merge_tables(&mut t, delta, 0)?;
    Ok(t)
}

/// A format error as the text of an index problem (the caller falls back to a scan).
fn msg(e: FormatError) -> String {
    e.to_string()
}

/// The index section the trailer of `data` (a file of format `major`) points to: the
/// index, its offset and its length. Err(reason) when there is no usable one.
fn read_index(data: &[u8], major: u16) -> std::result::Result<(IndexPayload, u64, u64), String> {
    let flen = data.len() as u64;
    let (index_offset, index_len) = match parse_trailer(data)? {
        Some(t) => t,
        None => return Err("no trailer (the writer did not finish)".into()),
    };
    if index_offset.checked_add(index_len) != Some(flen - TRAILER_LEN as u64)
        || index_offset < FILE_HEADER_LEN as u64
    {
        return Err(format!(
            "trailer points outside the file (index at {index_offset}, {index_len} bytes)"
        ));
    }
    let (h, payload) = section_of(data, index_offset, KIND_INDEX).map_err(msg)?;
    check_payload(&h, payload, index_offset).map_err(msg)?;
    let raw = decompress_section(&h, payload, index_offset).map_err(msg)?;
    let index: IndexPayload = if major == 1 {
        decode_bincode::<IndexPayloadV1>(&raw, "index section", index_offset)
            .map_err(msg)?
            .into()
    } else {
        decode_bincode(&raw, "index section", index_offset).map_err(msg)?
    };
    Ok((index, index_offset, h.section_len()))
}

/// `verify`'s pass over the sections the index of `data` lists, in file order: every header
/// (checksum, kind), every payload checksum but the chunks' (decoding checks those), and
/// every metadata section decoded, superseded ones included. A file without a usable index
/// was read by scanning, which checked each section it read and stopped at the first
/// damage (`recovery()` says where): nothing to add here.
fn check_listed_sections(data: &[u8], major: u16) -> Result<()> {
    let Ok((index, _, _)) = read_index(data, major) else {
        return Ok(());
    };
    let mut listed: Vec<(u64, u8)> =
        Vec::with_capacity(index.metas.len() + index.tables.len() + index.chunks.len());
    listed.extend(index.metas.iter().map(|&off| (off, KIND_META)));
    listed.extend(index.tables.iter().map(|&off| (off, KIND_TABLES)));
    listed.extend(index.chunks.iter().map(|c| (c.offset, KIND_CHUNK)));
    listed.sort_unstable();
    let mut dec = SectionDecompressor::new();
    let mut raw = Vec::new();
    for (off, kind) in listed {
        let (h, payload) = section_of(data, off, kind)?;
        if kind == KIND_CHUNK {
            continue;
        }
        check_payload(&h, payload, off)?;
        if kind == KIND_META {
            dec.decompress(&h, payload, off, &mut raw)?;
            decode_bincode::<RecordingMeta>(&raw, "metadata section", off)?;
        }
    }
    Ok(())
}

/// The table sections the index lists, merged in order, and the last metadata section.
/// The tables and metadata of `index`; each section read is then handed to `release`.
fn load_tables_and_meta(
    l: &mut Loaded,
    data: &[u8],
    index: &IndexPayload,
    release: &dyn Fn(&[u8]),
) -> std::result::Result<(), String> {
    let mut dec = SectionDecompressor::new();
    let mut raw = Vec::new();
    for &off in &index.tables {
        let (h, p) = section_of(data, off, KIND_TABLES).map_err(msg)?;
        check_payload(&h, p, off).map_err(msg)?;
        dec.decompress(&h, p, off, &mut raw).map_err(msg)?;
        let delta: TableDelta<Symbol> = decode_bincode(&raw, "table section", off).map_err(msg)?;
        merge_tables(&mut l.tables, delta, off).map_err(msg)?;
        release(section_bytes(data, off, &h));
        l.bytes.tables += h.section_len();
        l.bytes.table_sections += 1;
    }
    for (i, &off) in index.metas.iter().enumerate() {
        let (h, p) = section_of(data, off, KIND_META).map_err(msg)?;
        l.bytes.meta += h.section_len();
        l.bytes.meta_sections += 1;
        if i + 1 == index.metas.len() {
            check_payload(&h, p, off).map_err(msg)?;
            dec.decompress(&h, p, off, &mut raw).map_err(msg)?;
            l.meta = Some(decode_bincode(&raw, "metadata section", off).map_err(msg)?);
        }
    }
    if l.meta.is_none() {
        return Err("index lists no metadata section".into());
    }
    Ok(())
}

/// Optional sections (cgroups, throttling records, mappings) are not in the index: they sit
/// in the gaps between the indexed sections (`index` is the index section's own place),
/// which a file without them does not have.
fn load_optional_sections(
    l: &mut Loaded,
    data: &[u8],
    index: &IndexPayload,
    (index_offset, index_len): (u64, u64),
    release: &dyn Fn(&[u8]),
) -> std::result::Result<(), String> {
    let mut known: Vec<(u64, u64)> =
        Vec::with_capacity(index.tables.len() + index.metas.len() + index.chunks.len() + 1);
    for &off in index.tables.iter().chain(&index.metas) {
        let (h, _) = read_section_header(data, off).map_err(msg)?;
        release(section_bytes(data, off, &h));
        known.push((off, h.section_len()));
    }
    known.extend(index.chunks.iter().map(|c| (c.offset, c.len)));
    known.push((index_offset, index_len));
    known.sort_unstable();
    let mut cursor = FILE_HEADER_LEN as u64;
    for &(off, len) in &known {
        while cursor < off {
            let (h, p) = match read_frame(data, cursor).map_err(msg)? {
                Frame::Section(h, p) => (h, p),
                Frame::Foreign(n) => {
                    cursor += n;
                    continue;
                }
                Frame::Trailer => return Err(format!("trailer inside the file at {cursor}")),
            };
            if h.kind < KIND_OPTIONAL_MIN {
                return Err(format!(
                    "section of kind {} at offset {cursor} is not in the index",
                    h.kind
                ));
            }
            if h.kind == KIND_THROTTLES {
                load_throttles(&mut l.tables, &h, p, cursor).map_err(msg)?;
                l.bytes.throttles += h.section_len();
            }
            if h.kind == KIND_GOROUTINES || h.kind == KIND_GO_EXECUTES || h.kind == KIND_GO_STWS {
                load_goroutines(&mut l.tables, &h, p, cursor).map_err(msg)?;
                l.bytes.goroutines += h.section_len();
            }
            if h.kind == KIND_CGROUPS {
                load_cgroups(&mut l.tables, &h, p, cursor).map_err(msg)?;
                l.bytes.cgroups += h.section_len();
            }
            if h.kind == KIND_MAPPINGS {
                read_mappings(l, &h, p, cursor).map_err(msg)?;
            }
            release(section_bytes(data, cursor, &h));
            cursor += h.section_len();
        }
        cursor = cursor.max(off + len);
    }
    Ok(())
}

/// The chunk list, each entry checked against its chunk's header and the order of the
/// file; the event counts when the index has them. Each header read is then handed to
/// `release`.
fn load_chunk_list(
    l: &mut Loaded,
    data: &[u8],
    index: &IndexPayload,
    release: &dyn Fn(&[u8]),
) -> std::result::Result<(), String> {
    let mut last_ts = 0u64;
    let mut last_off = 0u64;
    let mut total = 0u64;
    l.chunks
        .reserve(index.chunks.len().min(data.len() / SECTION_HEADER_LEN));
    for c in &index.chunks {
        let (h, _) = section_of(data, c.offset, KIND_CHUNK).map_err(msg)?;
        release(&data[c.offset as usize..][..SECTION_HEADER_LEN]);
        if h.section_len() != c.len
            || h.events != c.events
            || h.first_ts != c.first_ts
            || h.last_ts != c.last_ts
        {
            return Err(format!(
                "index entry for chunk at offset {} disagrees with its header",
                c.offset
            ));
        }
        if c.offset < last_off || c.first_ts < last_ts || c.last_ts < c.first_ts || c.events == 0 {
            return Err(format!(
                "index entries out of order at chunk offset {}",
                c.offset
            ));
        }
        last_off = c.offset + c.len;
        last_ts = c.last_ts;
        total += c.events as u64;
        l.bytes.chunks += c.len;
        l.chunks.push(ChunkInfo {
            offset: c.offset,
            len: c.len,
            events: c.events,
            first_ts: c.first_ts,
            last_ts: c.last_ts,
        });
    }
    if total != index.events {
        return Err(format!(
            "index says {} events, its chunks hold {total}",
            index.events
        ));
    }
    if index.events_by_kind.iter().sum::<u64>() == total {
        l.stats = Some(VerifyReport {
            events: total,
            events_by_kind: index.events_by_kind,
            reserved_stack_refs: index.reserved_stack_refs,
        });
    }
    Ok(())
}

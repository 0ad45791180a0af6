//! Streaming trace writer: bounded memory, one `write` per section, so a killed writer
//! leaves a file that reads up to its last complete section.

use crate::chunk::ChunkEncoder;
use crate::section::*;
use crate::*;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writer tuning.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Events per chunk (a chunk is also cut by [`TraceWriter::flush`]).
    pub chunk_events: usize,
    /// zstd level.
    pub zstd_level: i32,
    /// Unix mode of the created file (the recorder uses 0o600).
    pub mode: u32,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            chunk_events: 1 << 16,
            zstd_level: 3,
            mode: 0o644,
        }
    }
}

/// What a finished file contains.
#[derive(Clone, Debug, Default)]
pub struct WriteSummary {
    /// Events written.
    pub events: u64,
    /// File size in bytes.
    pub bytes: u64,
    /// Event chunks written.
    pub chunks: u64,
}

/// Table additions not yet written (one table section's payload). A reader decodes the
/// symbols as [`Symbol`]s (`TableDelta<Symbol>`, the same encoding), whose strings borrow
/// from the decompressed payload: three allocations fewer per symbol, and its build id
/// read as one slice instead of byte by byte.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct TableDelta<S = SymbolEntry> {
    pub stacks: Vec<StackEntry>,
    pub symbols: Vec<S>,
    pub tasks: Vec<TaskEntry>,
    pub irq_sources: Vec<IrqSource>,
}

// Not derived: that would ask `S: Default`.
impl<S> Default for TableDelta<S> {
    fn default() -> Self {
        TableDelta {
            stacks: Vec::new(),
            symbols: Vec::new(),
            tasks: Vec::new(),
            irq_sources: Vec::new(),
        }
    }
}

impl TableDelta {
    fn is_empty(&self) -> bool {
        self.stacks.is_empty()
            && self.symbols.is_empty()
            && self.tasks.is_empty()
            && self.irq_sources.is_empty()
    }
    pub(crate) fn items(&self) -> usize {
        self.stacks.len() + self.symbols.len() + self.tasks.len() + self.irq_sources.len()
    }

    /// Feed every entry into `sink`, interrupt sources first (the order of
    /// [`MemTrace::replay_into`]).
    pub(crate) fn replay_into(&self, sink: &mut dyn TraceSink) -> Result<()> {
        sink.add_irq_sources(&self.irq_sources)?;
        sink.add_tasks(&self.tasks)?;
        sink.add_stacks(&self.stacks)?;
        sink.add_symbols(&self.symbols)
    }
}

/// Cgroup additions not yet written (one cgroup section's payload, kind
/// [`KIND_CGROUPS`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct CgroupDelta {
    pub cgroups: Vec<CgroupEntry>,
    pub members: Vec<TaskCgroup>,
}

impl CgroupDelta {
    pub(crate) fn is_empty(&self) -> bool {
        self.cgroups.is_empty() && self.members.is_empty()
    }
    pub(crate) fn items(&self) -> usize {
        self.cgroups.len() + self.members.len()
    }
    pub(crate) fn extend(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) {
        self.cgroups.extend_from_slice(cgroups);
        self.members.extend_from_slice(members);
    }
    /// Approximate memory held (flight ring accounting).
    pub(crate) fn bytes(cgroups: &[CgroupEntry], members: &[TaskCgroup]) -> u64 {
        cgroups
            .iter()
            .map(|c| 32 + c.path.len() as u64)
            .sum::<u64>()
            + 24 * members.len() as u64
    }
}

/// Stack table entries must not use reserved ids (`offset`: where, for the error).
pub(crate) fn check_stack_ids(stacks: &[StackEntry], offset: u64) -> Result<()> {
    match stacks.iter().find(|s| !s.id.is_real()) {
        Some(s) => Err(FormatError::Corrupt {
            what: "stack table",
            offset,
            detail: format!(
                "stack id {} is reserved (ids below {} are not table entries)",
                s.id.0,
                StackId::FIRST_REAL
            ),
        }),
        None => Ok(()),
    }
}

/// Interrupt source id 0 is reserved for "unknown" (`offset`: where, for the error).
pub(crate) fn check_irq_sources(sources: &[IrqSource], offset: u64) -> Result<()> {
    match sources.iter().find(|s| s.id == 0) {
        Some(s) => Err(FormatError::Corrupt {
            what: "irq source table",
            offset,
            detail: format!("irq source id 0 ({}) is reserved for 'unknown'", s.name),
        }),
        None => Ok(()),
    }
}

/// One chunk in the index payload.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct IndexChunk {
    pub offset: u64,
    pub len: u64,
    pub events: u32,
    pub first_ts: u64,
    pub last_ts: u64,
}

/// Index payload: where everything is.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct IndexPayload {
    pub chunks: Vec<IndexChunk>,
    /// Offsets of every table section, in file order.
    pub tables: Vec<u64>,
    /// Offsets of every metadata section, in file order (the last one wins).
    pub metas: Vec<u64>,
    /// Total events.
    pub events: u64,
    /// Events by kind (`EventKind as usize`).
    pub events_by_kind: [u64; EventKind::COUNT],
    /// References to reserved stack ids, by id (0..16).
    pub reserved_stack_refs: [u64; 16],
}

/// The index payload of format 1 (7 event kinds); read, never written.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct IndexPayloadV1 {
    pub chunks: Vec<IndexChunk>,
    pub tables: Vec<u64>,
    pub metas: Vec<u64>,
    pub events: u64,
    pub events_by_kind: [u64; 7],
    pub reserved_stack_refs: [u64; 16],
}

/// An event chunk compressed into a complete section, kept in memory with what the
/// index needs to know about it.
#[derive(Clone, Debug)]
pub(crate) struct SealedChunk {
    /// Section header and zstd frame, ready to write.
    pub section: Vec<u8>,
    pub events: u32,
    pub first_ts: u64,
    pub last_ts: u64,
    pub events_by_kind: [u64; EventKind::COUNT],
    pub reserved_stack_refs: [u64; 16],
}

impl From<IndexPayloadV1> for IndexPayload {
    fn from(v: IndexPayloadV1) -> Self {
        let mut events_by_kind = [0; EventKind::COUNT];
        events_by_kind[..7].copy_from_slice(&v.events_by_kind);
        IndexPayload {
            chunks: v.chunks,
            tables: v.tables,
            metas: v.metas,
            events: v.events,
            events_by_kind,
            reserved_stack_refs: v.reserved_stack_refs,
        }
    }
}

/// Check that `event` can be stored and comes no earlier than `last_ts`; advance
/// `last_ts` to it.
pub(crate) fn accept_next(event: &Event, last_ts: &mut u64) -> Result<()> {
    crate::error::check_encodable(event)?;
    let ts = event.ts();
    if ts < *last_ts {
        return Err(FormatError::OutOfOrder { ts, prev: *last_ts });
    }
    *last_ts = ts;
    Ok(())
}

/// Count `event` into the index's per-kind totals and reserved stack-id references.
pub(crate) fn count_event(
    by_kind: &mut [u64; EventKind::COUNT],
    reserved: &mut [u64; 16],
    event: &Event,
) {
    by_kind[event.kind() as usize] += 1;
    let mut count = |s: StackId| {
        if !s.is_real() {
            reserved[s.0 as usize] += 1;
        }
    };
    match event {
        Event::Switch(s) => {
            count(s.prev_kstack);
            count(s.prev_ustack);
        }
        Event::Waking(w) => {
            count(w.waker_kstack);
            count(w.waker_ustack);
        }
        Event::OffCpuStacks(o) => {
            count(o.kstack);
            count(o.ustack);
        }
        _ => {}
    }
}

/// Encode non-empty `events` (in order) into a chunk section; returns it with the first
/// and last timestamps. `raw` is scratch kept between calls.
pub(crate) fn seal_chunk(
    cctx: &mut zstd::bulk::Compressor<'static>,
    encoder: &mut ChunkEncoder,
    raw: &mut Vec<u8>,
    events: &[Event],
) -> std::io::Result<(Vec<u8>, u64, u64)> {
    encoder.encode(events, raw);
    let first_ts = events[0].ts();
    let last_ts = events[events.len() - 1].ts();
    let sec = build_section(
        cctx,
        KIND_CHUNK,
        events.len() as u32,
        first_ts,
        last_ts,
        raw,
    )?;
    Ok((sec, first_ts, last_ts))
}

/// Bincode configuration of every bincode payload.
pub(crate) fn bincode_config() -> impl bincode::config::Config {
    bincode::config::standard()
}

/// Pending table items beyond which a table section is written without waiting for the
/// next chunk (bounds memory when a producer adds many stacks between chunks).
const MAX_PENDING_TABLE_ITEMS: usize = 1 << 16;

/// Streams a trace to a file with bounded memory: events are buffered up to one chunk,
/// table additions until the next chunk or flush. A killed writer leaves a file that
/// reads up to its last complete section.
pub struct TraceWriter {
    path: PathBuf,
    file: File,
    options: WriterOptions,
    cctx: zstd::bulk::Compressor<'static>,
    encoder: ChunkEncoder,
    raw: Vec<u8>,
    events: Vec<Event>,
    pending: TableDelta,
    pending_frames: usize,
    /// Mapping entries not yet written (an optional section before the next chunk).
    pending_mappings: Vec<MappingEntry>,
    pending_throttles: ThrottleDelta,
    pending_goroutines: GoDelta,
    pending_cgroups: CgroupDelta,
    meta: RecordingMeta,
    meta_dirty: bool,
    last_ts: u64,
    pos: u64,
    total_events: u64,
    index: IndexPayload,
    /// The output is a regular file (not a pipe or device).
    regular: bool,
}

impl TraceWriter {
    /// Create (truncate) `path` and write the header and initial metadata.
    pub fn create(
        path: &Path,
        meta: &RecordingMeta,
        mut options: WriterOptions,
    ) -> Result<TraceWriter> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let io = |source| FormatError::Io {
            path: path.to_owned(),
            source,
        };
        options.chunk_events = options.chunk_events.clamp(1, MAX_CHUNK_EVENTS as usize);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(options.mode)
            .open(path)
            .map_err(io)?;
        // An existing file keeps its mode on truncation: narrow it to the requested one.
        // Only for a regular file: `-o /dev/stdout` or a named pipe must keep its mode
        // (narrowing /dev/null would lock every other user out of it).
        let stat = file.metadata().map_err(io)?;
        let regular = stat.is_file();
        let cur = stat.permissions().mode() & 0o7777;
        if regular && cur & !options.mode != 0 {
            file.set_permissions(std::fs::Permissions::from_mode(cur & options.mode))
                .map_err(io)?;
        }
        let cctx = new_compressor(options.zstd_level).map_err(io)?;
        let mut w = TraceWriter {
            path: path.to_owned(),
            file,
            regular,
            cctx,
            encoder: ChunkEncoder::default(),
            raw: Vec::new(),
            events: Vec::with_capacity(options.chunk_events.min(1 << 16)),
            options,
            pending: TableDelta::default(),
            pending_frames: 0,
            pending_mappings: Vec::new(),
            pending_throttles: ThrottleDelta::default(),
            pending_goroutines: GoDelta::default(),
            pending_cgroups: CgroupDelta::default(),
            meta: meta.clone(),
            meta_dirty: false,
            last_ts: 0,
            pos: 0,
            total_events: 0,
            index: IndexPayload::default(),
        };
        w.write_bytes(&file_header_bytes())?;
        w.write_meta()?;
        Ok(w)
    }

    fn io(&self, source: std::io::Error) -> FormatError {
        FormatError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn write_bytes(&mut self, b: &[u8]) -> Result<()> {
        self.file.write_all(b).map_err(|e| self.io(e))?;
        self.pos += b.len() as u64;
        Ok(())
    }

    fn write_meta(&mut self) -> Result<()> {
        let raw = bincode::serde::encode_to_vec(&self.meta, bincode_config())
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        let sec = build_section(
            &mut self.cctx,
            KIND_META,
            0,
            self.meta.start_ns,
            self.meta.end_ns,
            &raw,
        )
        .map_err(|e| self.io(e))?;
        self.index.metas.push(self.pos);
        self.write_bytes(&sec)?;
        self.meta_dirty = false;
        Ok(())
    }

    fn write_tables(&mut self) -> Result<()> {
        if !self.pending_mappings.is_empty() {
            let raw = bincode::serde::encode_to_vec(&self.pending_mappings, bincode_config())
                .map_err(|e| self.io(std::io::Error::other(e)))?;
            let items = self.pending_mappings.len().min(u32::MAX as usize) as u32;
            // Not in the index (its layout is fixed within major 2): readers find mapping
            // sections in the gaps between the indexed sections.
            let sec = build_section(&mut self.cctx, KIND_MAPPINGS, items, 0, 0, &raw)
                .map_err(|e| self.io(e))?;
            self.write_bytes(&sec)?;
            self.pending_mappings.clear();
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let raw = bincode::serde::encode_to_vec(&self.pending, bincode_config())
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        let items = self.pending.items().min(u32::MAX as usize) as u32;
        let sec = build_section(&mut self.cctx, KIND_TABLES, items, 0, 0, &raw)
            .map_err(|e| self.io(e))?;
        self.index.tables.push(self.pos);
        self.write_bytes(&sec)?;
        self.pending = TableDelta::default();
        self.pending_frames = 0;
        Ok(())
    }

    /// One optional section of `kind` holding `value` (not in the index: readers find it
    /// in the gaps between the indexed sections, see `TraceReader`).
    fn write_optional<T: Serialize>(&mut self, kind: u8, value: &T, items: usize) -> Result<()> {
        let raw = bincode::serde::encode_to_vec(value, bincode_config())
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        let items = items.min(u32::MAX as usize) as u32;
        let sec = build_section(&mut self.cctx, kind, items, 0, 0, &raw).map_err(|e| self.io(e))?;
        self.write_bytes(&sec)
    }

    /// The pending throttling records as one optional section.
    fn write_throttles(&mut self) -> Result<()> {
        if self.pending_throttles.is_empty() {
            return Ok(());
        }
        let d = std::mem::take(&mut self.pending_throttles);
        self.write_optional(KIND_THROTTLES, &d, d.events.len() + d.names.len())
    }

    /// The pending goroutine records as one optional section, written after the table
    /// section that holds their stacks.
    fn write_goroutines(&mut self) -> Result<()> {
        if self.pending_goroutines.is_empty() {
            return Ok(());
        }
        let mut d = std::mem::take(&mut self.pending_goroutines);
        let executes = std::mem::take(&mut d.executes);
        let stws = std::mem::take(&mut d.stws);
        if !d.is_empty() {
            self.write_optional(KIND_GOROUTINES, &d, d.items())?;
        }
        if !executes.is_empty() {
            self.write_optional(KIND_GO_EXECUTES, &executes, executes.len())?;
        }
        if stws.is_empty() {
            return Ok(());
        }
        self.write_optional(KIND_GO_STWS, &stws, stws.len())
    }

    /// The pending cgroup additions as one optional section.
    fn write_cgroups(&mut self) -> Result<()> {
        if self.pending_cgroups.is_empty() {
            return Ok(());
        }
        let d = std::mem::take(&mut self.pending_cgroups);
        self.write_optional(KIND_CGROUPS, &d, d.items())
    }

    fn write_chunk(&mut self) -> Result<()> {
        // Tables first: everything an event references precedes its chunk.
        self.write_tables()?;
        self.write_throttles()?;
        self.write_goroutines()?;
        self.write_cgroups()?;
        if self.events.is_empty() {
            return Ok(());
        }
        let (sec, first_ts, last_ts) = seal_chunk(
            &mut self.cctx,
            &mut self.encoder,
            &mut self.raw,
            &self.events,
        )
        .map_err(|e| self.io(e))?;
        let n = self.events.len() as u32;
        self.index.chunks.push(IndexChunk {
            offset: self.pos,
            len: sec.len() as u64,
            events: n,
            first_ts,
            last_ts,
        });
        self.write_bytes(&sec)?;
        self.index.events += n as u64;
        self.events.clear();
        Ok(())
    }

    /// Write buffered events and table additions now (the recorder calls this at least
    /// once a second).
    pub fn flush(&mut self) -> Result<()> {
        self.write_chunk()?;
        if self.meta_dirty {
            self.write_meta()?;
        }
        Ok(())
    }

    /// Replace the metadata (written as a new metadata section at the next flush).
    pub fn update_meta(&mut self, meta: &RecordingMeta) -> Result<()> {
        self.meta = meta.clone();
        self.meta_dirty = true;
        Ok(())
    }

    /// Events accepted so far.
    pub fn events_written(&self) -> u64 {
        self.total_events
    }

    /// Bytes in the file so far.
    pub fn bytes_written(&self) -> u64 {
        self.pos
    }

    /// The file being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Write an optional section of `kind` (>= 0x80) now, as a newer minor version might:
    /// readers that do not know the kind skip it. For compatibility tests; not indexed.
    #[doc(hidden)]
    pub fn write_optional_section(&mut self, kind: u8, raw: &[u8]) -> Result<()> {
        if kind < KIND_OPTIONAL_MIN {
            return Err(FormatError::Corrupt {
                what: "section",
                offset: self.pos,
                detail: format!("kind {kind} is not optional"),
            });
        }
        let sec = build_section(&mut self.cctx, kind, 0, 0, 0, raw).map_err(|e| self.io(e))?;
        self.write_bytes(&sec)
    }

    /// Events buffered and not yet in the file.
    pub fn buffered_events(&self) -> usize {
        self.events.len()
    }

    /// Flush, write final metadata, the index and the trailer; sync the file.
    pub fn finish(mut self, meta: &RecordingMeta) -> Result<WriteSummary> {
        self.write_chunk()?;
        self.meta = meta.clone();
        self.write_meta()?;
        let raw = bincode::serde::encode_to_vec(&self.index, bincode_config())
            .map_err(|e| self.io(std::io::Error::other(e)))?;
        let n = self.index.chunks.len().min(u32::MAX as usize) as u32;
        let (first, last) = match (self.index.chunks.first(), self.index.chunks.last()) {
            (Some(a), Some(b)) => (a.first_ts, b.last_ts),
            _ => (0, 0),
        };
        let sec = build_section(&mut self.cctx, KIND_INDEX, n, first, last, &raw)
            .map_err(|e| self.io(e))?;
        let index_offset = self.pos;
        self.write_bytes(&sec)?;
        self.write_bytes(&trailer_bytes(index_offset, sec.len() as u64))?;
        // A pipe or device has nothing to sync (fsync fails there with EINVAL).
        if self.regular {
            self.file.sync_all().map_err(|e| self.io(e))?;
        }
        Ok(WriteSummary {
            events: self.total_events,
            bytes: self.pos,
            chunks: self.index.chunks.len() as u64,
        })
    }
}

impl TraceSink for TraceWriter {
    fn push(&mut self, event: &Event) -> Result<()> {
        accept_next(event, &mut self.last_ts)?;
        count_event(
            &mut self.index.events_by_kind,
            &mut self.index.reserved_stack_refs,
            event,
        );
        self.events.push(*event);
        self.total_events += 1;
        if self.events.len() >= self.options.chunk_events {
            self.write_chunk()?;
        }
        Ok(())
    }

    fn add_stacks(&mut self, stacks: &[StackEntry]) -> Result<()> {
        check_stack_ids(stacks, self.pos)?;
        self.pending_frames += stacks.iter().map(|s| s.frames.len()).sum::<usize>();
        self.pending.stacks.extend_from_slice(stacks);
        self.maybe_spill()
    }

    fn add_symbols(&mut self, symbols: &[SymbolEntry]) -> Result<()> {
        self.pending.symbols.extend_from_slice(symbols);
        self.maybe_spill()
    }

    fn add_tasks(&mut self, tasks: &[TaskEntry]) -> Result<()> {
        self.pending.tasks.extend_from_slice(tasks);
        self.maybe_spill()
    }

    fn add_irq_sources(&mut self, sources: &[IrqSource]) -> Result<()> {
        check_irq_sources(sources, self.pos)?;
        self.pending.irq_sources.extend_from_slice(sources);
        self.maybe_spill()
    }

    fn add_mappings(&mut self, mappings: &[MappingEntry]) -> Result<()> {
        self.pending_mappings.extend_from_slice(mappings);
        if self.pending_mappings.len() >= MAX_PENDING_TABLE_ITEMS {
            self.write_tables()?;
        }
        Ok(())
    }

    fn add_throttles(&mut self, throttles: &ThrottleDelta) -> Result<()> {
        self.pending_throttles
            .events
            .extend_from_slice(&throttles.events);
        self.pending_throttles
            .names
            .extend_from_slice(&throttles.names);
        if self.pending_throttles.events.len() >= MAX_PENDING_TABLE_ITEMS {
            self.write_throttles()?;
        }
        Ok(())
    }

    fn add_goroutines(&mut self, goroutines: &GoDelta) -> Result<()> {
        self.pending_goroutines.extend(goroutines);
        if self.pending_goroutines.items() >= MAX_PENDING_TABLE_ITEMS {
            // Their stacks first: a reader may look them up as soon as it merges them.
            self.write_tables()?;
            self.write_goroutines()?;
        }
        Ok(())
    }

    fn add_cgroups(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) -> Result<()> {
        self.pending_cgroups.extend(cgroups, members);
        if self.pending_cgroups.items() >= MAX_PENDING_TABLE_ITEMS {
            self.write_cgroups()?;
        }
        Ok(())
    }
}

impl TraceWriter {
    /// Append a chunk sealed elsewhere (the flight ring's memory) after everything
    /// buffered so far; table additions pending here are written before it.
    pub(crate) fn append_sealed(&mut self, chunk: &SealedChunk) -> Result<()> {
        self.write_chunk()?;
        if chunk.first_ts < self.last_ts {
            return Err(FormatError::OutOfOrder {
                ts: chunk.first_ts,
                prev: self.last_ts,
            });
        }
        self.index.chunks.push(IndexChunk {
            offset: self.pos,
            len: chunk.section.len() as u64,
            events: chunk.events,
            first_ts: chunk.first_ts,
            last_ts: chunk.last_ts,
        });
        self.write_bytes(&chunk.section)?;
        for (sum, n) in self
            .index
            .events_by_kind
            .iter_mut()
            .zip(chunk.events_by_kind)
        {
            *sum += n;
        }
        for (sum, n) in (self.index.reserved_stack_refs.iter_mut()).zip(chunk.reserved_stack_refs) {
            *sum += n;
        }
        self.index.events += chunk.events as u64;
        self.total_events += chunk.events as u64;
        self.last_ts = chunk.last_ts;
        Ok(())
    }

    fn maybe_spill(&mut self) -> Result<()> {
        // Writing tables early is always safe: they only need to precede the events
        // that reference them.
        if self.pending.items() + self.pending_frames / 8 >= MAX_PENDING_TABLE_ITEMS {
            self.write_tables()?;
        }
        Ok(())
    }
}

impl MemTrace {
    /// Write this trace to `path` (tables first, then events).
    pub fn write_to(&self, path: &Path, options: WriterOptions) -> Result<WriteSummary> {
        let mut w = TraceWriter::create(path, &self.meta, options)?;
        self.replay_into(&mut w)?;
        w.finish(&self.meta)
    }

    /// Feed this trace's tables and events into `sink` (tables first).
    pub fn replay_into(&self, sink: &mut dyn TraceSink) -> Result<()> {
        let mut irqs: Vec<_> = self.tables.irq_sources.values().cloned().collect();
        irqs.sort_by_key(|s| s.id);
        sink.add_irq_sources(&irqs)?;
        let mut tasks: Vec<_> = self.tables.tasks.values().cloned().collect();
        tasks.sort_by_key(|t| t.tid);
        sink.add_tasks(&tasks)?;
        let mut stacks: Vec<_> = self.tables.stacks.values().cloned().collect();
        stacks.sort_by_key(|s| s.id);
        sink.add_stacks(&stacks)?;
        let mut syms: Vec<_> = self.tables.symbols.iter().map(|s| s.to_entry()).collect();
        syms.sort_by_key(|s| (s.tgid, s.addr));
        sink.add_symbols(&syms)?;
        let maps: Vec<MappingEntry> = self
            .tables
            .mappings
            .entries()
            .into_iter()
            .cloned()
            .collect();
        sink.add_mappings(&maps)?;
        if !self.tables.throttling.is_empty() {
            sink.add_throttles(&self.tables.throttling.to_delta())?;
        }
        if !self.tables.goroutines.is_empty() {
            sink.add_goroutines(&self.tables.goroutines.to_delta())?;
        }
        if self.tables.has_cgroups() || !self.tables.cgroups.is_empty() {
            let mut cgroups: Vec<_> = self.tables.cgroups.values().cloned().collect();
            cgroups.sort_by_key(|c| c.id);
            sink.add_cgroups(&cgroups, &self.tables.task_cgroup_list())?;
        }
        for e in &self.events {
            sink.push(e)?;
        }
        Ok(())
    }
}

/// Whether two stats are of one file (same device and inode).
pub fn same_inode(x: &std::fs::Metadata, y: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    x.dev() == y.dev() && x.ino() == y.ino()
}

/// Whether two paths name the same file (the same inode if both exist, else the same
/// name in the same directory): an output must not overwrite another one, or the input.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if let (Ok(x), Ok(y)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return same_inode(&x, &y);
    }
    let split = |p: &Path| {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        (dir.canonicalize().ok(), p.file_name().map(|n| n.to_owned()))
    };
    let (da, na) = split(a);
    let (db, nb) = split(b);
    da.is_some() && da == db && na == nb
}

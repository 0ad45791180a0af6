//! Bounded in-memory recording (the flight recorder) and rotating output.
//!
//! [`FlightRing`] keeps the most recent events as compressed chunk sections in memory,
//! bounded by time and by bytes, and writes a window of them as a complete trace file
//! on demand ([`FlightRing::dump`]). [`RotatingWriter`] streams to numbered files, each a
//! complete trace with its own tables. Both keep every table addition for the life of
//! the recording: a dump or a new file must carry the tasks, stacks and symbols its
//! events reference, however long ago they were first seen.

use crate::chunk::ChunkEncoder;
use crate::section::*;
use crate::writer::{accept_next, count_event, seal_chunk, CgroupDelta, SealedChunk, TableDelta};
use crate::*;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

/// Bounds and encoding of a [`FlightRing`].
#[derive(Clone, Debug)]
pub struct FlightOptions {
    /// Keep chunks whose last event is at most this far behind the newest (0: no time
    /// bound).
    pub window_ns: u64,
    /// Keep the ring's memory (compressed chunks, tables, the chunk being filled) at most
    /// this many bytes, dropping the oldest chunks (0: no size bound).
    pub max_bytes: u64,
    /// Events per chunk (a chunk is also cut by [`FlightRing::seal`]).
    pub chunk_events: usize,
    /// zstd level.
    pub zstd_level: i32,
}

impl Default for FlightOptions {
    fn default() -> Self {
        FlightOptions {
            window_ns: 30_000_000_000,
            max_bytes: 256 << 20,
            chunk_events: 1 << 16,
            zstd_level: 3,
        }
    }
}

/// What a [`FlightRing`] holds and what it has let go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlightStats {
    /// Chunks held.
    pub chunks: u64,
    /// Events held in chunks (plus those not yet sealed).
    pub events: u64,
    /// Compressed bytes of the chunks held.
    pub chunk_bytes: u64,
    /// Table items kept (stacks, symbols, tasks, interrupt sources).
    pub table_items: u64,
    /// Approximate bytes of memory in use (chunks, tables, unsealed events).
    pub memory_bytes: u64,
    /// Timestamp of the oldest event held (0 when empty).
    pub oldest_ts: u64,
    /// Timestamp of the newest event seen.
    pub newest_ts: u64,
    /// Chunks dropped because they left the time window or the size bound.
    pub evicted_chunks: u64,
    /// Events in those chunks.
    pub evicted_events: u64,
    /// Chunks dropped by the size bound although a pending dump still wanted them
    /// (that dump then starts later than asked; never silent).
    pub evicted_pinned_chunks: u64,
}

/// The most recent events of a recording as compressed chunks in bounded memory.
///
/// It is a [`TraceSink`]: the recorder feeds it exactly as it would feed a
/// [`TraceWriter`]. Nothing reaches the disk until [`FlightRing::dump`].
pub struct FlightRing {
    options: FlightOptions,
    cctx: zstd::bulk::Compressor<'static>,
    encoder: ChunkEncoder,
    raw: Vec<u8>,
    events: Vec<Event>,
    by_kind: [u64; EventKind::COUNT],
    reserved_refs: [u64; 16],
    tables: TableDelta,
    /// Mapping entries (later ones update earlier ones by id), replayed into each dump.
    mappings: Vec<MappingEntry>,
    /// Throttling records so far (rare: kept whole, written into every file).
    throttles: ThrottleDelta,
    /// Goroutine records no older than the oldest chunk held, and the Go processes.
    goroutines: GoDelta,
    cgroups: CgroupDelta,
    table_bytes: u64,
    chunks: VecDeque<SealedChunk>,
    chunk_bytes: u64,
    chunk_events: u64,
    last_ts: u64,
    pin: Option<u64>,
    stats: FlightStats,
}

/// Rough in-memory size of one table item beyond its frames (strings, map overhead).
const TABLE_ITEM_BYTES: u64 = 64;

impl FlightRing {
    /// An empty ring.
    pub fn new(mut options: FlightOptions) -> Result<FlightRing> {
        options.chunk_events = options.chunk_events.clamp(1, MAX_CHUNK_EVENTS as usize);
        let cctx = new_compressor(options.zstd_level).map_err(|source| FormatError::Io {
            path: PathBuf::from("<flight ring>"),
            source,
        })?;
        Ok(FlightRing {
            cctx,
            encoder: ChunkEncoder::default(),
            raw: Vec::new(),
            events: Vec::with_capacity(options.chunk_events.min(1 << 16)),
            options,
            by_kind: [0; EventKind::COUNT],
            reserved_refs: [0; 16],
            tables: TableDelta::default(),
            mappings: Vec::new(),
            throttles: ThrottleDelta::default(),
            goroutines: GoDelta::default(),
            cgroups: CgroupDelta::default(),
            table_bytes: 0,
            chunks: VecDeque::new(),
            chunk_bytes: 0,
            chunk_events: 0,
            last_ts: 0,
            pin: None,
            stats: FlightStats::default(),
        })
    }

    /// Compress the events buffered so far into a chunk (the recorder calls this at
    /// every flush, so the ring's time resolution is the flush interval), then drop
    /// what left the bounds.
    pub fn seal(&mut self) -> Result<()> {
        if !self.events.is_empty() {
            let (section, first_ts, last_ts) = seal_chunk(
                &mut self.cctx,
                &mut self.encoder,
                &mut self.raw,
                &self.events,
            )
            .map_err(|source| FormatError::Io {
                path: PathBuf::from("<flight ring>"),
                source,
            })?;
            let chunk = SealedChunk {
                section,
                events: self.events.len() as u32,
                first_ts,
                last_ts,
                events_by_kind: std::mem::take(&mut self.by_kind),
                reserved_stack_refs: std::mem::take(&mut self.reserved_refs),
            };
            self.events.clear();
            self.chunk_bytes += chunk.section.len() as u64;
            self.chunk_events += chunk.events as u64;
            self.chunks.push_back(chunk);
        }
        self.evict();
        Ok(())
    }

    /// Keep every chunk that ends at or after `from_ts` in the time window (a dump
    /// of [from_ts, …] is pending); `None` releases it. The size bound still holds:
    /// what it drops of a pinned window is counted in
    /// [`FlightStats::evicted_pinned_chunks`].
    pub fn pin(&mut self, from_ts: Option<u64>) {
        self.pin = from_ts;
    }

    /// Memory besides the sealed chunks: tables, the chunk being filled, scratch.
    fn fixed_bytes(&self) -> u64 {
        self.table_bytes
            + (self.events.capacity() * std::mem::size_of::<Event>()) as u64
            + self.raw.capacity() as u64
    }

    fn evict(&mut self) {
        let newest = self.last_ts;
        let fixed = self.fixed_bytes();
        while let Some(front) = self.chunks.front() {
            let pinned = self.pin.is_some_and(|p| front.last_ts >= p);
            let too_old = self.options.window_ns != 0
                && front.last_ts.saturating_add(self.options.window_ns) < newest
                && !pinned;
            let too_big =
                self.options.max_bytes != 0 && self.chunk_bytes + fixed > self.options.max_bytes;
            if !(too_old || too_big) {
                break;
            }
            if pinned {
                self.stats.evicted_pinned_chunks += 1;
            }
            let chunk = self.chunks.pop_front().expect("front exists");
            self.chunk_bytes -= chunk.section.len() as u64;
            self.chunk_events -= chunk.events as u64;
            self.stats.evicted_chunks += 1;
            self.stats.evicted_events += chunk.events as u64;
        }
    }

    /// What the ring holds now.
    pub fn stats(&self) -> FlightStats {
        FlightStats {
            chunks: self.chunks.len() as u64,
            events: self.chunk_events + self.events.len() as u64,
            chunk_bytes: self.chunk_bytes,
            table_items: self.tables.items() as u64,
            memory_bytes: self.chunk_bytes + self.fixed_bytes(),
            oldest_ts: self
                .chunks
                .front()
                .map(|c| c.first_ts)
                .or_else(|| self.events.first().map(Event::ts))
                .unwrap_or(0),
            newest_ts: self.last_ts,
            ..self.stats
        }
    }

    /// Write the chunks that overlap [`from_ts`, `to_ts`] as a complete trace at `path`,
    /// with every table entry seen so far. Buffered events are sealed first. The file
    /// is written under a temporary name and renamed into place, so a recorder killed
    /// during a dump leaves either the whole file or none at `path`.
    ///
    /// `meta` is the recording's metadata; the dump's `start_ns`/`end_ns` become those
    /// of the first and last chunk written.
    pub fn dump(
        &mut self,
        path: &Path,
        meta: &RecordingMeta,
        from_ts: u64,
        to_ts: u64,
        options: WriterOptions,
    ) -> Result<WriteSummary> {
        self.seal()?;
        let chosen: Vec<&SealedChunk> = self
            .chunks
            .iter()
            .filter(|c| c.last_ts >= from_ts && c.first_ts <= to_ts)
            .collect();
        let mut meta = meta.clone();
        if let (Some(first), Some(last)) = (chosen.first(), chosen.last()) {
            meta.start_ns = first.first_ts;
            meta.end_ns = last.last_ts;
        }
        let partial = partial_path(path);
        let result = (|| {
            let mut w = TraceWriter::create(&partial, &meta, options)?;
            self.tables.replay_into(&mut w)?;
            w.add_mappings(&self.mappings)?;
            if !self.throttles.is_empty() {
                w.add_throttles(&self.throttles)?;
            }
            if let (Some(first), Some(last)) = (chosen.first(), chosen.last()) {
                let window = first.first_ts..=last.last_ts;
                w.add_goroutines(&GoDelta {
                    events: (self.goroutines.events.iter())
                        .filter(|e| window.contains(&e.ts))
                        .copied()
                        .collect(),
                    processes: self.goroutines.processes.clone(),
                    executes: (self.goroutines.executes.iter())
                        .filter(|e| window.contains(&e.ts))
                        .copied()
                        .collect(),
                    stws: (self.goroutines.stws.iter())
                        .filter(|e| window.contains(&e.ts))
                        .copied()
                        .collect(),
                })?;
            }
            if !self.cgroups.is_empty() {
                w.add_cgroups(&self.cgroups.cgroups, &self.cgroups.members)?;
            }
            for chunk in &chosen {
                w.append_sealed(chunk)?;
            }
            w.finish(&meta)
        })();
        let summary = match result {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_file(&partial);
                return Err(e);
            }
        };
        std::fs::rename(&partial, path).map_err(|source| FormatError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(summary)
    }
}

/// `dir/name` → `dir/.name.partial`: hidden, and never mistaken for a finished dump.
fn partial_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.partial"))
}

impl TraceSink for FlightRing {
    fn push(&mut self, event: &Event) -> Result<()> {
        accept_next(event, &mut self.last_ts)?;
        count_event(&mut self.by_kind, &mut self.reserved_refs, event);
        self.events.push(*event);
        if self.events.len() >= self.options.chunk_events {
            self.seal()?;
        }
        Ok(())
    }

    fn add_stacks(&mut self, stacks: &[StackEntry]) -> Result<()> {
        crate::writer::check_stack_ids(stacks, 0)?;
        for s in stacks {
            self.table_bytes += TABLE_ITEM_BYTES + 8 * s.frames.len() as u64;
        }
        self.tables.stacks.extend_from_slice(stacks);
        Ok(())
    }

    fn add_symbols(&mut self, symbols: &[SymbolEntry]) -> Result<()> {
        for s in symbols {
            self.table_bytes += TABLE_ITEM_BYTES
                + (s.name.as_ref().map_or(0, String::len)
                    + s.module.as_ref().map_or(0, String::len)) as u64;
        }
        self.tables.symbols.extend_from_slice(symbols);
        Ok(())
    }

    fn add_tasks(&mut self, tasks: &[TaskEntry]) -> Result<()> {
        self.table_bytes += TABLE_ITEM_BYTES * tasks.len() as u64;
        self.tables.tasks.extend_from_slice(tasks);
        Ok(())
    }

    fn add_irq_sources(&mut self, sources: &[IrqSource]) -> Result<()> {
        crate::writer::check_irq_sources(sources, 0)?;
        self.table_bytes += TABLE_ITEM_BYTES * sources.len() as u64;
        self.tables.irq_sources.extend_from_slice(sources);
        Ok(())
    }

    fn add_mappings(&mut self, mappings: &[MappingEntry]) -> Result<()> {
        for m in mappings {
            self.table_bytes += TABLE_ITEM_BYTES + m.path.len() as u64;
        }
        self.mappings.extend_from_slice(mappings);
        Ok(())
    }
    fn add_throttles(&mut self, throttles: &ThrottleDelta) -> Result<()> {
        self.table_bytes += TABLE_ITEM_BYTES * throttles.events.len() as u64;
        extend_throttles(&mut self.throttles, throttles);
        Ok(())
    }

    fn add_goroutines(&mut self, goroutines: &GoDelta) -> Result<()> {
        self.goroutines.extend(goroutines);
        // Only the ring's window can go into a dump: older records are dropped with the
        // chunks they were beside (no growth over a long recording).
        if let Some(oldest) = self.chunks.front().map(|c| c.first_ts) {
            self.goroutines.events.retain(|e| e.ts >= oldest);
            self.goroutines.executes.retain(|e| e.ts >= oldest);
            self.goroutines.stws.retain(|e| e.ts >= oldest);
        }
        Ok(())
    }

    fn add_cgroups(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) -> Result<()> {
        self.table_bytes += CgroupDelta::bytes(cgroups, members);
        self.cgroups.extend(cgroups, members);
        Ok(())
    }
}

fn extend_throttles(to: &mut ThrottleDelta, from: &ThrottleDelta) {
    to.events.extend_from_slice(&from.events);
    to.names.extend_from_slice(&from.names);
}

/// When a [`RotatingWriter`] starts the next file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RotateLimit {
    /// After a file reaches this many bytes (0: no size limit).
    pub bytes: u64,
    /// After a file spans this much trace time (0: no time limit).
    pub ns: u64,
}

/// Streams a recording into numbered files (`stem.0000.zst`, `stem.0001.zst`, …), each
/// a complete trace with its own tables, like `perf record --switch-output`. The limit
/// is checked at [`RotatingWriter::flush`], so a file may exceed it by up to one flush
/// interval of events.
pub struct RotatingWriter {
    base: PathBuf,
    limit: RotateLimit,
    options: WriterOptions,
    meta: RecordingMeta,
    writer: Option<TraceWriter>,
    tables: TableDelta,
    /// Mapping entries so far, replayed into each new file.
    mappings: Vec<MappingEntry>,
    /// Throttling records so far (rare: kept whole, written into every file).
    throttles: ThrottleDelta,
    /// The Go processes so far, written into every file (their records go to the file
    /// being written only).
    go_processes: Vec<GoProcess>,
    cgroups: CgroupDelta,
    file_start_ts: u64,
    last_ts: u64,
    seq: u32,
    /// The recording's lost counts when the current file started: each file counts its
    /// own losses, so that a set's counts are the sum of its files'.
    lost_at_file_start: LostCounts,
    finished: Vec<(PathBuf, WriteSummary)>,
}

impl RotatingWriter {
    /// Open the first file for `base` (`dir/stem.zst` → `dir/stem.0000.zst`).
    pub fn create(
        base: &Path,
        meta: &RecordingMeta,
        limit: RotateLimit,
        options: WriterOptions,
    ) -> Result<RotatingWriter> {
        let mut r = RotatingWriter {
            base: base.to_owned(),
            limit,
            options,
            meta: meta.clone(),
            writer: None,
            tables: TableDelta::default(),
            mappings: Vec::new(),
            throttles: ThrottleDelta::default(),
            go_processes: Vec::new(),
            cgroups: CgroupDelta::default(),
            file_start_ts: meta.start_ns,
            last_ts: meta.start_ns,
            seq: 0,
            lost_at_file_start: meta.lost.clone(),
            finished: Vec::new(),
        };
        r.open_next()?;
        Ok(r)
    }

    /// The path of file number `seq`.
    pub fn file_path(&self, seq: u32) -> PathBuf {
        numbered_path(&self.base, seq)
    }

    /// The file being written now.
    pub fn current_path(&self) -> PathBuf {
        self.file_path(self.seq)
    }

    /// Events accepted so far, all files.
    pub fn events_written(&self) -> u64 {
        self.finished.iter().map(|f| f.1.events).sum::<u64>()
            + self.writer.as_ref().map_or(0, TraceWriter::events_written)
    }

    /// Bytes written so far, all files.
    pub fn bytes_written(&self) -> u64 {
        self.finished.iter().map(|f| f.1.bytes).sum::<u64>()
            + self.writer.as_ref().map_or(0, TraceWriter::bytes_written)
    }

    /// Files finished so far, in order, with what each holds.
    pub fn finished(&self) -> &[(PathBuf, WriteSummary)] {
        &self.finished
    }

    /// The metadata of the current file: the recording's, with the file's start and end,
    /// its own lost counts, and what makes the files one set ([`ROTATE_SEQ_KEY`] and the
    /// other `rotate.*` keys, read by [`TraceReader::open_files`]).
    fn file_meta(&self, recording: &RecordingMeta, end_ns: u64) -> RecordingMeta {
        let mut meta = recording.clone();
        meta.start_ns = self.file_start_ts;
        meta.end_ns = end_ns;
        meta.lost = recording.lost.since(&self.lost_at_file_start);
        meta.extra.retain(|(k, _)| !k.starts_with("rotate."));
        meta.extra.extend([
            (ROTATE_SEQ_KEY.to_string(), self.seq.to_string()),
            (
                ROTATE_RECORDING_KEY.to_string(),
                recording.start_ns.to_string(),
            ),
            (ROTATE_LOST_SCOPE_KEY.to_string(), "file".to_string()),
        ]);
        meta
    }

    fn open_next(&mut self) -> Result<()> {
        let meta = self.file_meta(&self.meta, 0);
        let mut w = TraceWriter::create(&self.current_path(), &meta, self.options.clone())?;
        self.tables.replay_into(&mut w)?;
        w.add_mappings(&self.mappings)?;
        if !self.throttles.is_empty() {
            w.add_throttles(&self.throttles)?;
        }
        if !self.go_processes.is_empty() {
            w.add_goroutines(&GoDelta {
                processes: self.go_processes.clone(),
                ..GoDelta::default()
            })?;
        }
        if !self.cgroups.is_empty() {
            w.add_cgroups(&self.cgroups.cgroups, &self.cgroups.members)?;
        }
        self.writer = Some(w);
        Ok(())
    }

    fn writer(&mut self) -> &mut TraceWriter {
        self.writer.as_mut().expect("a file is open between calls")
    }

    /// Replace the metadata (as [`TraceWriter::update_meta`]).
    pub fn update_meta(&mut self, meta: &RecordingMeta) -> Result<()> {
        self.meta = meta.clone();
        // The recorder opens the output before it attaches, when the start is not known
        // yet (0), and sets it here: the first file starts then, not at time 0 (which made
        // it rotate at its first flush and say it spanned the machine's uptime).
        if self.seq == 0 && self.file_start_ts == 0 && meta.start_ns != 0 {
            self.file_start_ts = meta.start_ns;
            self.last_ts = self.last_ts.max(meta.start_ns);
        }
        let file_meta = self.file_meta(meta, 0);
        self.writer().update_meta(&file_meta)
    }

    /// Flush (as [`TraceWriter::flush`]), then start the next file if this one reached
    /// the limit. Returns the path of a file finished by this call.
    pub fn flush(&mut self) -> Result<Option<PathBuf>> {
        self.writer().flush()?;
        let w = self.writer.as_ref().expect("a file is open between calls");
        let full = (self.limit.bytes != 0 && w.bytes_written() >= self.limit.bytes)
            || (self.limit.ns != 0
                && self.last_ts.saturating_sub(self.file_start_ts) >= self.limit.ns);
        if !full || w.events_written() == 0 {
            return Ok(None);
        }
        let done = self.finish_current()?;
        self.seq += 1;
        self.file_start_ts = self.last_ts;
        self.lost_at_file_start = self.meta.lost.clone();
        self.open_next()?;
        Ok(Some(done))
    }

    fn finish_current(&mut self) -> Result<PathBuf> {
        let w = self.writer.take().expect("a file is open between calls");
        let meta = self.file_meta(&self.meta, self.last_ts);
        let summary = w.finish(&meta)?;
        let path = self.current_path();
        self.finished.push((path.clone(), summary));
        Ok(path)
    }

    /// Finish the last file with `meta` (its `end_ns` is kept as given). Returns every
    /// file written, in order.
    pub fn finish(mut self, meta: &RecordingMeta) -> Result<Vec<(PathBuf, WriteSummary)>> {
        let w = self.writer.take().expect("a file is open between calls");
        let last = self.file_meta(meta, meta.end_ns);
        let summary = w.finish(&last)?;
        let path = self.current_path();
        self.finished.push((path, summary));
        Ok(self.finished)
    }
}

/// `dir/stem.zst` → `dir/stem.0007.zst` (any other name: `name.0007`).
fn numbered_path(base: &Path, seq: u32) -> PathBuf {
    let name = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let numbered = match name.strip_suffix(".zst") {
        Some(stem) => format!("{stem}.{seq:04}.zst"),
        None => format!("{name}.{seq:04}"),
    };
    base.with_file_name(numbered)
}

impl TraceSink for RotatingWriter {
    fn push(&mut self, event: &Event) -> Result<()> {
        self.writer().push(event)?;
        if self.file_start_ts == 0 {
            // no start given at all: the first event's time
            self.file_start_ts = event.ts();
        }
        self.last_ts = event.ts();
        Ok(())
    }

    fn add_stacks(&mut self, stacks: &[StackEntry]) -> Result<()> {
        self.writer().add_stacks(stacks)?;
        self.tables.stacks.extend_from_slice(stacks);
        Ok(())
    }

    fn add_symbols(&mut self, symbols: &[SymbolEntry]) -> Result<()> {
        self.writer().add_symbols(symbols)?;
        self.tables.symbols.extend_from_slice(symbols);
        Ok(())
    }

    fn add_tasks(&mut self, tasks: &[TaskEntry]) -> Result<()> {
        self.writer().add_tasks(tasks)?;
        self.tables.tasks.extend_from_slice(tasks);
        Ok(())
    }

    fn add_irq_sources(&mut self, sources: &[IrqSource]) -> Result<()> {
        self.writer().add_irq_sources(sources)?;
        self.tables.irq_sources.extend_from_slice(sources);
        Ok(())
    }

    fn add_mappings(&mut self, mappings: &[MappingEntry]) -> Result<()> {
        self.writer().add_mappings(mappings)?;
        self.mappings.extend_from_slice(mappings);
        Ok(())
    }

    fn add_throttles(&mut self, throttles: &ThrottleDelta) -> Result<()> {
        self.writer().add_throttles(throttles)?;
        extend_throttles(&mut self.throttles, throttles);
        Ok(())
    }

    fn add_goroutines(&mut self, goroutines: &GoDelta) -> Result<()> {
        self.writer().add_goroutines(goroutines)?;
        self.go_processes.extend_from_slice(&goroutines.processes);
        Ok(())
    }

    fn add_cgroups(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) -> Result<()> {
        self.writer().add_cgroups(cgroups, members)?;
        self.cgroups.extend(cgroups, members);
        Ok(())
    }
}

/// What made the flight recorder write a dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TriggerKind {
    /// A thread was off CPU, blocked, longer than the rule's threshold (`wait>D`).
    Wait,
    /// A runnable thread waited for a CPU longer than the threshold (`runqueue>D`).
    RunQueue,
    /// The recorder got SIGUSR1.
    Signal,
    /// The recorder was stopped (Ctrl-C, SIGTERM, end of the command or duration).
    Stop,
}

impl TriggerKind {
    /// Name used in metadata and output (`wait`, `runqueue`, `signal`, `stop`).
    pub fn name(self) -> &'static str {
        match self {
            TriggerKind::Wait => "wait",
            TriggerKind::RunQueue => "runqueue",
            TriggerKind::Signal => "signal",
            TriggerKind::Stop => "stop",
        }
    }

    fn from_name(s: &str) -> Option<TriggerKind> {
        [
            TriggerKind::Wait,
            TriggerKind::RunQueue,
            TriggerKind::Signal,
            TriggerKind::Stop,
        ]
        .into_iter()
        .find(|k| k.name() == s)
    }
}

/// The event that made a flight dump, stored in the dump's metadata
/// ([`RecordingMeta::extra`] keys `flight.trigger.*`, readable by any 1.x reader).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlightTrigger {
    /// Kind of trigger.
    pub kind: TriggerKind,
    /// The rule as written (`wait>50ms`), or the signal's name.
    pub rule: String,
    /// The waiting thread (0 for a signal or stop).
    pub tid: Tid,
    /// Its thread group.
    pub tgid: Tid,
    /// Its name.
    pub comm: String,
    /// Start of the wait: switch-out (`wait`) or the time it became runnable
    /// (`runqueue`); for a signal or stop, the time it arrived.
    pub start_ns: u64,
    /// End of the wait: switch-in; for a signal or stop, the time it arrived.
    pub end_ns: u64,
}

/// Prefix of the metadata keys of a [`FlightTrigger`].
const TRIGGER_KEY: &str = "flight.trigger";

impl FlightTrigger {
    /// Duration of the wait (0 for a signal or stop).
    pub fn duration_ns(&self) -> u64 {
        self.end_ns.saturating_sub(self.start_ns)
    }

    /// Metadata entries holding this trigger.
    pub fn to_extra(&self) -> Vec<(String, String)> {
        let k = |s: &str| format!("{TRIGGER_KEY}.{s}");
        vec![
            (k("kind"), self.kind.name().to_string()),
            (k("rule"), self.rule.clone()),
            (k("tid"), self.tid.to_string()),
            (k("tgid"), self.tgid.to_string()),
            (k("comm"), self.comm.clone()),
            (k("start_ns"), self.start_ns.to_string()),
            (k("end_ns"), self.end_ns.to_string()),
        ]
    }

    /// The trigger recorded in `meta`, if the trace is a flight dump; an error names
    /// the damaged key.
    pub fn from_meta(meta: &RecordingMeta) -> Result<Option<FlightTrigger>> {
        let Some(kind) = meta.extra(&format!("{TRIGGER_KEY}.kind")) else {
            return Ok(None);
        };
        let bad = |key: &str, value: &str| FormatError::Corrupt {
            what: "metadata section",
            offset: 0,
            detail: format!("flight trigger key {TRIGGER_KEY}.{key} has a bad value `{value}`"),
        };
        let text = |key: &str| {
            meta.extra(&format!("{TRIGGER_KEY}.{key}"))
                .unwrap_or_default()
                .to_string()
        };
        let num = |key: &str| -> Result<u64> {
            let v = text(key);
            v.parse().map_err(|_| bad(key, &v))
        };
        let tid = |key: &str| -> Result<Tid> {
            let v = text(key);
            v.parse().map_err(|_| bad(key, &v))
        };
        Ok(Some(FlightTrigger {
            kind: TriggerKind::from_name(kind).ok_or_else(|| bad("kind", kind))?,
            rule: text("rule"),
            tid: tid("tid")?,
            tgid: tid("tgid")?,
            comm: text("comm"),
            start_ns: num("start_ns")?,
            end_ns: num("end_ns")?,
        }))
    }
}

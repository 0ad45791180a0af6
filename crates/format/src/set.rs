//! Several trace files read as one recording: the numbered files of one `record --rotate`
//! ([`TraceReader::open_files`]). The files are checked to be one recording (same host,
//! same recording start), consecutive (no file missing, no gap or overlap in time), with
//! tables that agree; then their chunks are read in order as one stream, with the tables
//! of the last file (each file repeats every table entry seen before it), the metadata
//! spanning the set and the lost counts of all files summed.

use crate::{FormatError, LostCounts, RecordingMeta, Result, TraceReader};
use std::path::{Path, PathBuf};

/// Metadata `extra` key: the number of a rotated file (0, 1, …), written by
/// [`RotatingWriter`](crate::RotatingWriter).
pub const ROTATE_SEQ_KEY: &str = "rotate.seq";
/// Metadata `extra` key: the start (trace clock, ns) of the recording a rotated file
/// belongs to; equal in every file of one recording.
pub const ROTATE_RECORDING_KEY: &str = "rotate.recording_start_ns";
/// Metadata `extra` key: `file` when the file's lost counts are those of that file alone
/// (so that a set's counts are their sum); absent in files of older recorders, whose
/// counts are those of the recording up to the file's end.
pub const ROTATE_LOST_SCOPE_KEY: &str = "rotate.lost_scope";
/// Metadata `extra` key of a set read as one: how many files it has.
pub const ROTATE_FILES_KEY: &str = "rotate.files";

/// Why several trace files cannot be read as one recording.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// No trace file was given (or a directory held none).
    #[error("{0}: no trace files (*.zst) in this directory")]
    EmptyDirectory(PathBuf),
    /// The files come from different hosts.
    #[error("{first} is from host `{first_host}` but {other} is from host `{other_host}`: traces of several hosts are not one recording; `chains`, `offcpu`, `wakeup` and `offwake` show each host as the root frame of its lines; `export --parquet-dir DIR` writes every host's tables (a Hive layout for Spark and DuckDB); other commands analyse one host's files at a time")]
    SeveralHosts {
        /// A file of the first host.
        first: PathBuf,
        /// Its host.
        first_host: String,
        /// A file of another host.
        other: PathBuf,
        /// That host.
        other_host: String,
    },
    /// The files are from one host but not from one recording.
    #[error("{first} and {other} are not files of one recording ({detail}); give the numbered files of one `record --rotate`")]
    NotOneRecording {
        /// One file.
        first: PathBuf,
        /// Another.
        other: PathBuf,
        /// What differs.
        detail: String,
    },
    /// A file of the recording is missing between two given ones, or time is missing.
    #[error("gap between {before} and {after}: {detail}")]
    Gap {
        /// The earlier file.
        before: PathBuf,
        /// The later file.
        after: PathBuf,
        /// What is missing.
        detail: String,
    },
    /// Two files cover the same time (or one file was given twice).
    #[error("{before} and {after} overlap: {detail}")]
    Overlap {
        /// The earlier file.
        before: PathBuf,
        /// The later file.
        after: PathBuf,
        /// How.
        detail: String,
    },
    /// A later file lacks (or changes) a table entry an earlier one has: not one
    /// recording's files.
    #[error("{earlier} and {later} disagree on {detail}: not files of one recording")]
    TablesDisagree {
        /// The earlier file.
        earlier: PathBuf,
        /// The last file of the set.
        later: PathBuf,
        /// Which entry.
        detail: String,
    },
}

/// The trace files named by `args`: a file as it is, a directory as its `*.zst` files
/// (not hidden ones, so an unfinished flight dump `.name.partial` is never read), in name
/// order. A shell glob (`r.*.zst`) arrives as files.
pub fn trace_files(args: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for a in args {
        if !a.is_dir() {
            out.push(a.clone());
            continue;
        }
        let io = |source| FormatError::Io {
            path: a.clone(),
            source,
        };
        let mut found: Vec<PathBuf> = Vec::new();
        for entry in std::fs::read_dir(a).map_err(io)? {
            let p = entry.map_err(io)?.path();
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            let visible = name.is_some_and(|n| n.ends_with(".zst") && !n.starts_with('.'));
            if visible && p.is_file() {
                found.push(p);
            }
        }
        if found.is_empty() {
            return Err(SetError::EmptyDirectory(a.clone()).into());
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

fn seq_of(meta: &RecordingMeta) -> Option<u64> {
    meta.extra(ROTATE_SEQ_KEY)?.parse().ok()
}

/// Where a file starts: its metadata's start, or its first event when it has none.
fn start_of(r: &TraceReader) -> u64 {
    match r.meta().start_ns {
        0 => r.time_span().map_or(0, |s| s.0),
        s => s,
    }
}

/// Where a file ends: its metadata's end, or its last event when it has none (a file
/// whose recorder was killed).
fn end_of(r: &TraceReader) -> u64 {
    match r.meta().end_ns {
        0 => r.time_span().map_or(start_of(r), |s| s.1),
        e => e,
    }
}

/// Are `a` and `b` from one recording? Err(what differs).
fn same_recording(a: &RecordingMeta, b: &RecordingMeta) -> std::result::Result<(), String> {
    let differs = |what: &str, x: &dyn std::fmt::Debug, y: &dyn std::fmt::Debug| {
        Err(format!("{what} {x:?} vs {y:?}"))
    };
    if a.kernel_release != b.kernel_release {
        return differs("kernel", &a.kernel_release, &b.kernel_release);
    }
    if a.clock != b.clock {
        return differs("clock", &a.clock, &b.clock);
    }
    if a.cpu_count != b.cpu_count {
        return differs("CPU count", &a.cpu_count, &b.cpu_count);
    }
    if a.synthetic_scenario != b.synthetic_scenario {
        return differs(
            "synthetic scenario",
            &a.synthetic_scenario,
            &b.synthetic_scenario,
        );
    }
    match (a.extra(ROTATE_RECORDING_KEY), b.extra(ROTATE_RECORDING_KEY)) {
        (Some(x), Some(y)) if x != y => differs("recording start", &x, &y),
        (Some(_), None) | (None, Some(_)) => {
            Err("one is a rotated file and the other is not".into())
        }
        // Files of older recorders carry no recording start: the command line tells.
        _ if a.command_line != b.command_line => {
            differs("command line", &a.command_line, &b.command_line)
        }
        _ => Ok(()),
    }
}

/// `earlier`'s tables must be contained in `last`'s (a rotated file repeats every entry
/// seen before it): the ids mean the same thing in both. Err(the first entry that differs).
fn tables_contained(earlier: &TraceReader, last: &TraceReader) -> std::result::Result<(), String> {
    let (e, l) = (earlier.tables(), last.tables());
    for (id, s) in &e.stacks {
        if l.stacks.get(id) != Some(s) {
            return Err(format!("stack id {}", id.0));
        }
    }
    for (tid, t) in &e.tasks {
        if l.tasks.get(tid) != Some(t) {
            return Err(format!("task {tid}"));
        }
    }
    for (id, s) in &e.irq_sources {
        if l.irq_sources.get(id) != Some(s) {
            return Err(format!("interrupt source id {id}"));
        }
    }
    for s in e.symbols.iter() {
        if !l.symbols.contains(s.kind, s.tgid, s.addr) {
            return Err(format!("the symbol at {:#x}", s.addr));
        }
    }
    for id in e.cgroups.keys() {
        if !l.cgroups.contains_key(id) {
            return Err(format!("cgroup id {id}"));
        }
    }
    Ok(())
}

/// Check that the opened files (in time order) are one recording, consecutive.
fn check_consecutive(files: &[TraceReader]) -> Result<()> {
    let first = &files[0];
    for pair in files.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        if a.meta().host != b.meta().host {
            return Err(SetError::SeveralHosts {
                first: pa,
                first_host: a.meta().host.clone(),
                other: pb,
                other_host: b.meta().host.clone(),
            }
            .into());
        }
        same_recording(first.meta(), b.meta()).map_err(|detail| SetError::NotOneRecording {
            first: first.path().to_path_buf(),
            other: pb.clone(),
            detail,
        })?;
        if let (Some(x), Some(y)) = (seq_of(a.meta()), seq_of(b.meta())) {
            if y == x {
                return Err(SetError::Overlap {
                    before: pa,
                    after: pb,
                    detail: format!("both are file number {x} of the recording"),
                }
                .into());
            }
            if y != x + 1 {
                let missing = if y == x + 2 {
                    format!("file number {} is missing", x + 1)
                } else {
                    format!("files number {}..={} are missing", x + 1, y - 1)
                };
                return Err(SetError::Gap {
                    before: pa,
                    after: pb,
                    detail: missing,
                }
                .into());
            }
        }
        // A rotated file starts where the one before it ended.
        let (end, start) = (end_of(a), start_of(b));
        let span = |r: &TraceReader| r.time_span();
        let events_overlap = match (span(a), span(b)) {
            (Some((_, last_a)), Some((first_b, _))) => {
                (first_b < last_a).then(|| format!("events at {first_b} ns in the later file precede the last one of the earlier at {last_a} ns"))
            }
            _ => None,
        };
        if let Some(detail) = events_overlap {
            return Err(SetError::Overlap {
                before: pa,
                after: pb,
                detail,
            }
            .into());
        }
        if start < end {
            return Err(SetError::Overlap {
                before: pa,
                after: pb,
                detail: format!(
                    "the later starts at {start} ns, {:.3} s before the earlier ends ({end} ns)",
                    (end - start) as f64 / 1e9
                ),
            }
            .into());
        }
        if start > end {
            return Err(SetError::Gap {
                before: pa,
                after: pb,
                detail: format!(
                    "{:.3} s of the recording are in neither file (the earlier ends at {end} ns, the later starts at {start} ns)",
                    (start - end) as f64 / 1e9
                ),
            }
            .into());
        }
    }
    Ok(())
}

/// The metadata of the whole set: that of the last file (its counters cover the
/// recording up to its end), starting where the first file starts, the lost counts of all
/// files (summed when each file counts its own; else the last file's, which count the
/// whole recording).
fn merged_meta(files: &[TraceReader]) -> RecordingMeta {
    let first = files[0].meta();
    let last = files[files.len() - 1].meta();
    let mut meta = last.clone();
    meta.start_ns = first.start_ns;
    meta.end_ns = last.end_ns;
    let per_file = files
        .iter()
        .all(|f| f.meta().extra(ROTATE_LOST_SCOPE_KEY) == Some("file"));
    if per_file {
        meta.lost = files
            .iter()
            .fold(LostCounts::default(), |sum, f| sum.plus(&f.meta().lost));
    }
    meta.extra
        .retain(|(k, _)| k != ROTATE_SEQ_KEY && k != ROTATE_LOST_SCOPE_KEY);
    meta.extra
        .push((ROTATE_FILES_KEY.into(), files.len().to_string()));
    meta
}

impl TraceReader {
    /// Open several trace files as one recording: the numbered files of one
    /// `record --rotate` (in any order; directories stand for their `*.zst` files, see
    /// [`trace_files`]). One file is opened as by [`TraceReader::open`]. The files must be
    /// one recording (same host and recording), consecutive (none missing, no gap or
    /// overlap in time) and agree on their tables; else a [`SetError`] names the files.
    /// Events are then read in time order across the file boundaries, with the tables of
    /// the last file (a superset of the earlier ones'), and metadata spanning the set
    /// (lost counts summed).
    pub fn open_files(paths: &[PathBuf]) -> Result<TraceReader> {
        let given = paths;
        let paths = trace_files(paths)?;
        if paths.len() == 1 {
            let r = TraceReader::open(&paths[0]);
            // A file found in a directory: its errors name it.
            return match given == paths.as_slice() {
                true => r,
                false => r.map_err(|e| name_error(&paths[0], e)),
            };
        }
        if paths.is_empty() {
            return Err(SetError::EmptyDirectory(PathBuf::from(".")).into());
        }
        let mut files = Vec::with_capacity(paths.len());
        for p in &paths {
            files.push(TraceReader::open(p).map_err(|e| name_error(p, e))?);
        }
        // Rotated files carry their number; order by it, else by time.
        if files.iter().all(|f| seq_of(f.meta()).is_some()) {
            files.sort_by_key(|f| seq_of(f.meta()));
        } else {
            files.sort_by_key(|f| (start_of(f), f.time_span().map_or(0, |s| s.0)));
        }
        check_consecutive(&files)?;
        let last = &files[files.len() - 1];
        for f in &files[..files.len() - 1] {
            tables_contained(f, last).map_err(|detail| SetError::TablesDisagree {
                earlier: f.path().to_path_buf(),
                later: last.path().to_path_buf(),
                detail,
            })?;
        }
        let meta = merged_meta(&files);
        let mut rest = files.into_iter();
        let mut set = rest.next().expect("at least two files");
        let mut tables = Default::default();
        for f in rest {
            let mut f = f;
            tables = std::mem::take(f.tables_mut());
            set.append_file(f);
        }
        set.set_meta_tables(meta, tables);
        Ok(set)
    }
}

/// An error of one file of a set, naming the file (I/O errors name it already).
fn name_error(path: &Path, e: FormatError) -> FormatError {
    match e {
        FormatError::Io { .. } | FormatError::Set(_) => e,
        e => FormatError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        },
    }
}

impl crate::MemTrace {
    /// Write this trace as the numbered files of one rotated recording (`base` →
    /// `stem.0000.zst`, …), exactly as `record --rotate` does: through a
    /// [`RotatingWriter`](crate::RotatingWriter), flushed (and so possibly rotated) every
    /// `flush_events` events as the recorder flushes periodically, each stack added just
    /// before the first event that references it (so the tables grow from file to file,
    /// as in a recording). The recording's lost counts are given at the end, as the
    /// recorder does. Returns every file written, in order.
    pub fn write_rotated(
        &self,
        base: &Path,
        limit: crate::RotateLimit,
        flush_events: usize,
        options: crate::WriterOptions,
    ) -> Result<Vec<(PathBuf, crate::WriteSummary)>> {
        use crate::{Event, StackId, TraceSink};
        let mut start = self.meta.clone();
        start.lost = LostCounts::default();
        start.end_ns = 0;
        let mut w = crate::RotatingWriter::create(base, &start, limit, options)?;
        let mut up_front = self.clone_tables_only();
        up_front.tables.stacks.clear();
        up_front.replay_into(&mut w)?;
        let mut added: std::collections::HashSet<StackId> = Default::default();
        for (i, e) in self.events.iter().enumerate() {
            let refs = match e {
                Event::Switch(s) => [s.prev_kstack, s.prev_ustack],
                Event::Waking(k) => [k.waker_kstack, k.waker_ustack],
                Event::OffCpuStacks(o) => [o.kstack, o.ustack],
                Event::Sample(x) => [x.kstack, x.ustack],
                _ => [StackId::NONE, StackId::NONE],
            };
            let new: Vec<_> = refs
                .iter()
                .filter(|id| id.is_real() && added.insert(**id))
                .filter_map(|id| self.tables.stacks.get(id).cloned())
                .collect();
            if !new.is_empty() {
                w.add_stacks(&new)?;
            }
            w.push(e)?;
            if (i + 1) % flush_events.max(1) == 0 {
                w.flush()?;
            }
        }
        // Stacks no event referenced (a table may hold them): in the last file.
        let mut rest: Vec<_> = (self.tables.stacks.values())
            .filter(|s| !added.contains(&s.id))
            .cloned()
            .collect();
        if !rest.is_empty() {
            rest.sort_by_key(|s| s.id);
            w.add_stacks(&rest)?;
        }
        w.finish(&self.meta)
    }

    fn clone_tables_only(&self) -> crate::MemTrace {
        crate::MemTrace {
            meta: self.meta.clone(),
            tables: self.tables.clone(),
            events: Vec::new(),
        }
    }
}

/// The trace files named by `args` (as [`trace_files`]) grouped by the host that recorded
/// them, in host-name order (each group in the order given): traces of several hosts are
/// analysed host by host. Reads each file's index and tables once.
pub fn files_by_host(args: &[PathBuf]) -> Result<Vec<(String, Vec<PathBuf>)>> {
    let paths = trace_files(args)?;
    let mut groups: std::collections::BTreeMap<String, Vec<PathBuf>> = Default::default();
    if paths.len() == 1 && args == paths.as_slice() {
        let host = TraceReader::open(&paths[0])?.meta().host.clone();
        return Ok(vec![(host, paths)]);
    }
    for p in paths {
        let host = TraceReader::open(&p)
            .map_err(|e| name_error(&p, e))?
            .meta()
            .host
            .clone();
        groups.entry(host).or_default().push(p);
    }
    Ok(groups.into_iter().collect())
}

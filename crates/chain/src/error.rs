//! The chain library's error type.

/// Errors of the chain library (bad user input; the engine itself never fails on a trace).
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A `--window` specification could not be parsed.
    #[error("bad window {spec:?}: {problem}")]
    BadWindow {
        /// The text given.
        spec: String,
        /// What was wrong.
        problem: WindowProblem,
    },
    /// [`Analysis::window`](crate::Analysis::window): the window could not be placed on
    /// this trace (the source says why).
    #[error("--window {spec:?}")]
    WindowUnresolved {
        /// The text given.
        spec: String,
        /// Why.
        #[source]
        source: Box<ChainError>,
    },
    /// [`Analysis::window`](crate::Analysis::window): the window ends before it starts.
    #[error("--window {spec:?}: start is after end")]
    WindowReversed {
        /// The text given.
        spec: String,
    },
    /// [`Analysis::window`](crate::Analysis::window): the window selects none of the
    /// trace's events.
    #[error("--window {spec:?} is outside the trace, which spans {span}")]
    WindowMissesTrace {
        /// The text given.
        spec: String,
        /// The trace's events' time span, from its start (and as wall clock when known).
        span: String,
    },
    /// [`Filter::restrict_to_trigger`](crate::Filter::restrict_to_trigger): the flight
    /// trigger in the metadata is damaged.
    #[error("reading the flight trigger from the metadata")]
    TriggerMeta(#[source] chainrec_format::FormatError),
    /// [`Filter::restrict_to_trigger`](crate::Filter::restrict_to_trigger): the trace is
    /// not a flight-recorder dump.
    #[error("--trigger: this trace is not a flight-recorder dump (no trigger in its metadata); it applies to files written by `chainrec record --flight ... --trigger RULE`")]
    NotAFlightDump,
    /// [`Filter::restrict_to_trigger`](crate::Filter::restrict_to_trigger): the dump was
    /// written on a signal, a stop or a run-queue rule, not because of a wait.
    #[error("--trigger: this dump was written on {rule} ({kind}), not because of a wait: there is no triggering wait to show")]
    TriggerNotAWait {
        /// The trigger rule.
        rule: String,
        /// Its kind (`signal`, `stop`, ...).
        kind: &'static str,
    },
    /// A wall-clock or time-of-day window on a trace that has no wall-clock time.
    #[error("this trace has no wall-clock time (synthetic, or recorded without it); give seconds from its start, e.g. 0.5..1")]
    NoWallClock,
    /// `--cgroup` or `--cgroup-frames` on a trace that records no cgroups.
    #[error("{flag}: this trace records no cgroups (written before chainrec recorded them, by `record --no-cgroups`, or synthetic without them)")]
    NoCgroups {
        /// The flag given.
        flag: &'static str,
    },
    /// An unknown `--unit`.
    #[error("unknown unit {0:?} (expected ns, us or ms)")]
    BadUnit(String),
    /// The trace could not be opened (not a trace, unsupported version, ...).
    #[error("{}", path.display())]
    Open {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: chainrec_format::FormatError,
    },
    /// [`DamagePolicy::Refuse`](crate::DamagePolicy::Refuse): the trace's index was unusable and a scan found damage in
    /// the middle of the file, so the events after it are unreadable.
    #[error("{}: trace is damaged ({reason}); {readable_events} events before the damage are readable", path.display())]
    Damaged {
        /// The file.
        path: std::path::PathBuf,
        /// What the scan found.
        reason: String,
        /// Events before the damage.
        readable_events: u64,
    },
    /// [`DamagePolicy::Refuse`](crate::DamagePolicy::Refuse): an event chunk failed its checksum or did not decode, so
    /// the events after it are unreadable (the source is the [`FormatError`]).
    ///
    /// [`FormatError`]: chainrec_format::FormatError
    #[error("the trace is damaged in the middle")]
    DamagedChunk(#[source] chainrec_format::FormatError),
    /// The trace could not be read.
    #[error(transparent)]
    Trace(chainrec_format::FormatError),
    /// The directory for spilled runs of the output ([`crate::SpillTo`]) could not be
    /// used.
    #[error("cannot write spill runs under {} (give another directory with --spill-dir, or a larger budget with --spill-above)", dir.display())]
    Spill {
        /// The directory given.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// -m/-M/--state given to an analysis of on-CPU samples, which have no duration or
    /// switch-out state.
    #[error("-m/-M/--state select waits; on-CPU samples have no duration or state")]
    SampleFilter,
    /// [`Analysis::sampling`](crate::Analysis::sampling): the trace has no on-CPU samples
    /// (its format predates them, or the recording took none).
    #[error("no on-CPU samples in this trace ({}); record with `chainrec record` (samples are on by default)", no_samples_why(*.format))]
    NoSamples {
        /// The trace's format version (major, minor).
        format: (u16, u16),
    },
    /// [`crate::critical_path`]: the thread has no event in the trace and is not in its
    /// task table.
    #[error("thread {0} does not appear in this trace (no event of it, not in its task table)")]
    NoSuchThread(chainrec_format::Tid),
    /// [`crate::critical_path`]: a window whose end is not after its start.
    #[error("the window is empty: its end must be after its start")]
    EmptyWindow,
    /// [`crate::critical_path`]: a window that misses the trace.
    #[error("the window is outside the trace, which spans 0..{span_s:.6} s from its start")]
    WindowOutside {
        /// The trace's length in seconds.
        span_s: f64,
    },
    /// [`crate::critical_path`]: the thread's life in the trace has no length (created
    /// and gone at the same instant).
    #[error("thread {0} has no time in the trace (created and gone at once)")]
    NoTime(chainrec_format::Tid),
    /// The path-trie thread of a fold ([`crate::Analysis::fold`]) failed (a bug).
    #[error("the path-trie thread {0}")]
    FoldThread(&'static str),
    /// The run was cancelled through its [`crate::Cancel`] (it stopped after a chunk).
    #[error("cancelled")]
    Cancelled,
    /// [`crate::goroutine_chains_of`]: the trace has no goroutine records.
    #[error("no goroutine records in this trace: record the Go program with `chainrec record` (Go 1.19 and 1.24 binaries are probed once found; --go PATH probes one from its start; not with --no-go)")]
    NoGoroutines,
    /// [`crate::goroutine_chains_of`]: the run over the Go processes' thread-level
    /// wakeups failed.
    #[error("thread-level wakeups of the Go processes")]
    GoThreadWakes(#[source] Box<ChainError>),
}

/// A file of the runs a fold spills to disk ([`crate::SpillTo`]) could not be written, or
/// did not read back as it was written (truncated, overwritten, a bad sector): the output
/// cannot be merged. [`crate::FoldedSink::write_folded`] returns it inside its
/// [`std::io::Error`] ([`SpillError::of`] finds it there).
#[derive(Debug, thiserror::Error)]
#[error("{file} under {}: {problem}", dir.display())]
pub struct SpillError {
    /// The spill directory (the files themselves are unnamed temporary files in it).
    pub dir: std::path::PathBuf,
    /// Which file.
    pub file: SpillFile,
    /// What was wrong.
    pub problem: SpillProblem,
}

impl SpillError {
    /// The spill error an I/O error of [`crate::FoldedSink::write_folded`] carries, if it
    /// is one (and not an error of the output itself).
    pub fn of(e: &std::io::Error) -> Option<&SpillError> {
        e.get_ref()?.downcast_ref()
    }

    /// As the [`std::io::Error`] that [`crate::FoldedSink::write_folded`] returns: of the
    /// failed I/O's kind, or `InvalidData` for contents not as written.
    pub(crate) fn into_io(self) -> std::io::Error {
        let kind = match &self.problem {
            SpillProblem::Create(e) | SpillProblem::Write(e) | SpillProblem::Read(e) => e.kind(),
            _ => std::io::ErrorKind::InvalidData,
        };
        std::io::Error::new(kind, self)
    }
}

/// One of the files of a spilled fold ([`SpillError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpillFile {
    /// The runs of a partition (the paths under some of the roots), as written out while
    /// the trace was walked.
    #[error("spill run file {part} (of {parts})")]
    Runs {
        /// The partition.
        part: usize,
        /// Partitions in all.
        parts: usize,
    },
    /// A partition's runs merged, as written for rendering.
    #[error("merged spill file {part} (of {parts})")]
    Merged {
        /// The partition.
        part: usize,
        /// Partitions in all.
        parts: usize,
    },
}

/// What was wrong with a [`SpillFile`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpillProblem {
    /// The temporary file could not be made.
    #[error("could not be created: {0} (give another directory with --spill-dir, or a larger budget with --spill-above)")]
    Create(std::io::Error),
    /// Writing failed (a full disk: `ENOSPC`; a file size limit: `EFBIG`).
    #[error("could not be written: {0} (give another directory with --spill-dir, or a larger budget with --spill-above)")]
    Write(std::io::Error),
    /// Reading failed.
    #[error("could not be read: {0}")]
    Read(std::io::Error),
    /// The file (or the part of it read) is not as long as what was written.
    #[error(
        "{found} bytes where {written} were written: truncated or overwritten by another process"
    )]
    Length {
        /// Bytes written.
        written: u64,
        /// Bytes found.
        found: u64,
    },
    /// The bytes read differ from those written (their CRC-32).
    #[error("its contents differ from what was written (CRC-32 {found:08x}, written {written:08x}): damaged on disk or by another process")]
    Checksum {
        /// CRC-32 of the bytes written.
        written: u32,
        /// CRC-32 of the bytes read.
        found: u32,
    },
    /// A record that cannot have been written (the checksum passed: a bug, or damage the
    /// checksum missed).
    #[error("a damaged record: {0}")]
    Record(&'static str),
}

/// Why a trace of format `(maj, min)` has no samples, for [`ChainError::NoSamples`].
fn no_samples_why((maj, min): (u16, u16)) -> String {
    if maj < 2 {
        format!("format {maj}.{min} predates them")
    } else {
        "sampling was off: --no-samples, or a synthetic scenario without samples".into()
    }
}

/// What is wrong with a `--window START..END`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowProblem {
    /// No `..`.
    #[error("expected START..END")]
    NoRange,
    /// `@` not followed by a number.
    #[error("wall-clock end must be @SECONDS since the epoch")]
    WallNotANumber,
    /// `@SECONDS` negative, not finite, or past the year 2100.
    #[error("wall-clock time @{text} is out of range (0..={max} seconds since the epoch)")]
    WallOutOfRange {
        /// The text after `@`.
        text: String,
        /// The largest accepted value.
        max: f64,
    },
    /// A time of day with other than three `:`-separated parts.
    #[error("time of day must be HH:MM:SS[.frac]")]
    TimeOfDayShape,
    /// The hour of a time of day is not a number.
    #[error("bad hour")]
    Hour,
    /// The minute of a time of day is not a number.
    #[error("bad minute")]
    Minute,
    /// The second of a time of day is not a number.
    #[error("bad second")]
    Second,
    /// A time of day past 23:59:60.999.
    #[error("time of day out of range")]
    TimeOfDayRange,
    /// Neither seconds, `@EPOCH` nor `HH:MM:SS`.
    #[error("expected seconds from trace start, @EPOCH or HH:MM:SS")]
    NotATime,
    /// Relative seconds negative or not finite.
    #[error("relative time {text} must be a finite number of seconds >= 0")]
    RelativeRange {
        /// The text given.
        text: String,
    },
}

impl ChainError {
    /// Whether the analysis failed on damage in the middle of the trace (which
    /// [`DamagePolicy::Salvage`](crate::DamagePolicy::Salvage) would have analysed up to).
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            ChainError::Damaged { .. } | ChainError::DamagedChunk(_)
        )
    }
}

impl From<chainrec_format::FormatError> for ChainError {
    fn from(e: chainrec_format::FormatError) -> Self {
        if e.is_chunk_damage() {
            ChainError::DamagedChunk(e)
        } else {
            ChainError::Trace(e)
        }
    }
}

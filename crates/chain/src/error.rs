//! The chain library's error type.

/// Errors of the chain library (bad user input; the engine itself never fails on a trace).
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A `--window` specification could not be parsed.
    #[error("bad window {spec:?}: {reason}")]
    BadWindow {
        /// The text given.
        spec: String,
        /// What was wrong.
        reason: String,
    },
    /// A wall-clock or time-of-day window on a trace that has no wall-clock time.
    #[error("this trace has no wall-clock time (synthetic, or recorded without it); give seconds from its start, e.g. 0.5..1")]
    NoWallClock,
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
    /// An option that does not apply to the analysis asked for.
    #[error("{0}")]
    Unsupported(String),
    /// The thread asked for has no event in the trace and is not in its task table.
    #[error("thread {0} does not appear in this trace (no event of it, not in its task table)")]
    NoSuchThread(chainrec_format::Tid),
    /// The path-trie thread of [`fold_trace`](crate::fold_trace) failed (a bug).
    #[error("the path-trie thread {0}")]
    FoldThread(&'static str),
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

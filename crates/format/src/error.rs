//! What can be wrong with a trace file, or with writing one.

use crate::Event;
use std::path::PathBuf;

/// Everything that can be wrong with a trace file, or with writing one.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// I/O failure on `path`.
    #[error("{path}")]
    Io {
        /// File involved.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file is empty (0 bytes).
    #[error("empty file (0 bytes), not a chainrec trace")]
    Empty,
    /// The file does not start with the chainrec magic.
    #[error("not a chainrec trace (bad magic at offset 0)")]
    NotChainrec,
    /// The file's format version is not one this build reads.
    #[error("unsupported trace format version {found} (this chainrec reads versions {min}..={max}); upgrade chainrec")]
    UnsupportedVersion {
        /// Version in the file.
        found: u16,
        /// Oldest readable.
        min: u16,
        /// Newest readable.
        max: u16,
    },
    /// The file ends inside a section.
    #[error(
        "truncated trace: section at offset {offset} needs {needed} bytes, file has {available}"
    )]
    Truncated {
        /// Offset of the damaged section.
        offset: u64,
        /// Bytes the section declares.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A checksum did not match.
    #[error("checksum mismatch in {what} at offset {offset}")]
    Checksum {
        /// Which structure.
        what: &'static str,
        /// Offset of it.
        offset: u64,
    },
    /// A chunk or table decoded to something impossible.
    #[error("corrupt {what} at offset {offset}: {detail}")]
    Corrupt {
        /// Which structure.
        what: &'static str,
        /// Offset of it.
        offset: u64,
        /// What was wrong.
        detail: String,
    },
    /// An event references a stack / irq source / task missing from the tables.
    #[error("dangling {what} id {id} (referenced in chunk at offset {offset})")]
    Dangling {
        /// Kind of id.
        what: &'static str,
        /// The id.
        id: u64,
        /// Offset of the referencing chunk.
        offset: u64,
    },
    /// An event the file format cannot hold (see [`crate::Waking::unencodable`]).
    #[error("event at ts {ts} cannot be written: {detail}")]
    InvalidEvent {
        /// Its timestamp.
        ts: u64,
        /// What is wrong with it.
        detail: &'static str,
    },
    /// Events given to the writer out of timestamp order.
    #[error("event at ts {ts} is older than the previous event at {prev}; events must be written in time order")]
    OutOfOrder {
        /// Offending timestamp.
        ts: u64,
        /// Previous timestamp.
        prev: u64,
    },
    /// Several files cannot be read as one recording.
    #[error(transparent)]
    Set(Box<crate::SetError>),
    /// An error in one file of a set read as one recording
    /// ([`TraceReader::open_files`](crate::TraceReader::open_files)), naming that file.
    #[error("{path}: {source}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// What is wrong in it.
        source: Box<FormatError>,
    },
}

impl From<crate::SetError> for FormatError {
    fn from(e: crate::SetError) -> Self {
        FormatError::Set(Box::new(e))
    }
}

/// The `what` of errors about an event chunk (one constant, so that
/// [`FormatError::is_chunk_damage`] cannot drift from the places that report them).
pub(crate) const EVENT_CHUNK: &str = "event chunk";

impl FormatError {
    /// Whether this is damage inside an event chunk (checksum or decoding), found while
    /// reading: the events after it are unreadable, those before it are fine.
    pub fn is_chunk_damage(&self) -> bool {
        if let FormatError::InFile { source, .. } = self {
            return source.is_chunk_damage();
        }
        matches!(
            self,
            FormatError::Checksum { what, .. } | FormatError::Corrupt { what, .. }
                if *what == EVENT_CHUNK
        )
    }
}

/// [`FormatError::InvalidEvent`] for an event no trace file can hold; [`MemTrace`] checks
/// too, so that an in-memory trace is always one a file could store.
pub(crate) fn check_encodable(event: &Event) -> Result<()> {
    match event {
        Event::Waking(w) => match w.unencodable() {
            Some(detail) => Err(FormatError::InvalidEvent { ts: w.ts, detail }),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Result alias for this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

//! What the timing tools share: a trace opened and decoded into memory before anything is
//! timed, or a clear error (with its causes) and exit status 1.
use chainrec_format::{Event, FormatError, TraceReader};

/// Print `tool: e: cause: ...` and exit 1.
pub fn fail(tool: &str, e: &dyn std::error::Error) -> ! {
    let mut msg = format!("{tool}: {e}");
    let mut cause = e.source();
    while let Some(c) = cause {
        msg.push_str(&format!(": {c}"));
        cause = c.source();
    }
    eprintln!("{msg}");
    std::process::exit(1);
}

/// Open the trace at `path` and hand each decoded chunk's events to `f`, in order
/// (decoded in parallel); returns the reader for its tables.
pub fn decode(tool: &str, path: &str, mut f: impl FnMut(&[Event])) -> TraceReader {
    let reader = TraceReader::open(path.as_ref()).unwrap_or_else(|e| fail(tool, &e));
    let decoded = reader.for_each_chunk(0..reader.chunks().len(), true, |ev| {
        f(ev);
        Ok::<(), FormatError>(())
    });
    if let Err(e) = decoded {
        fail(tool, &e);
    }
    reader
}

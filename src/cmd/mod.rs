//! One module per command family; each is owned by the crate it fronts.
pub mod chains;
pub mod info;
pub mod record;
pub mod report;
pub mod synth;

use anyhow::{bail, Result};
use chainrec_format::TraceReader;
use std::path::Path;

/// Environment variable that lets analyses run on the readable part of a damaged trace.
pub const SALVAGE_ENV: &str = "CHAINREC_SALVAGE";

/// Open a trace for analysis. A file cut short by a killed recorder is read up to its last
/// complete section with a warning; a damaged file (corruption in the middle, so events
/// after it are unreadable) is an error unless CHAINREC_SALVAGE=1, because its output
/// would silently miss data.
pub fn open_trace(path: &Path, what: &str) -> Result<TraceReader> {
    let reader = TraceReader::open(path)?;
    if let Some(r) = reader.recovery() {
        if r.damaged && std::env::var(SALVAGE_ENV).map_or(true, |v| v != "1") {
            bail!(
                "{}: trace is damaged ({}); {} events before the damage are readable: run with {SALVAGE_ENV}=1 to analyse them anyway",
                path.display(),
                r.reason,
                reader.event_count()
            );
        }
        eprintln!(
            "chainrec: {what}: warning: trace index unusable ({}); recovered by scanning, {} trailing bytes ignored{}",
            r.reason,
            r.trailing_bytes,
            if r.damaged { " (damaged file: output covers only the events before the damage)" } else { "" }
        );
    }
    Ok(reader)
}

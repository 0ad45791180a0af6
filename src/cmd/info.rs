//! `chainrec info` (fronts chainrec-format): summarize a trace, optionally check it.
use anyhow::{bail, Context, Result};
use chainrec_format::{TraceReader, VerifyReport};
use chainrec_report::info::TraceInfo;
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  # human summary (events, tasks, stacks, lost data, size)
  chainrec info trace.zst
  # also check every section (superseded metadata too), decode every chunk
  # and check every table reference; exits non-zero with a one-line error
  # naming the damaged section (kind and offset) if the file is damaged
  chainrec info trace.zst --verify
  chainrec info trace.zst --json | jq .bytes_per_event
  # machine-readable summary of a checked file
  chainrec info trace.zst --json --verify
  # the files of one `record --rotate`: whole duration, events of all files
  chainrec info r.*.zst";

#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
    /// Print one JSON object instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// Check every section the index lists (headers, checksums, every metadata section,
    /// superseded ones too), decode every chunk and check every stack / irq-source
    /// reference; fail on damage, naming the section (including a file that had to be
    /// recovered by scanning).
    #[arg(long)]
    pub verify: bool,
}

pub fn run(a: Args) -> Result<()> {
    let mut r = TraceReader::open_files(&a.file).map_err(|e| super::with_paths(&a.file, e))?;
    super::resymbolize(r.tables_mut(), "info");
    let stats: VerifyReport = if a.verify {
        let rep = r
            .verify()
            .with_context(|| format!("{}: verify failed", super::label(&a.file)))?;
        if let Some(rec) = r.recovery() {
            bail!(
                "{}: damaged: {} ({} bytes after the last good section); {} events readable",
                super::label(&a.file),
                rec.reason,
                rec.trailing_bytes,
                rep.events
            );
        }
        rep
    } else if let Some(s) = r.indexed_stats() {
        s.clone()
    } else {
        // Recovered file: count by decoding (references are not checked here).
        r.count_events()
            .map_err(|e| super::with_paths(&a.file, e))?
    };
    let s = TraceInfo::new(&r, &stats, a.verify);
    // A flight-recorder dump made by a wait: that wait and its chain.
    let trigger = super::filter::flight_trigger(r.meta())?;
    let wait = match &trigger {
        Some(t) if t.tid != 0 => {
            let an = super::open_trace(&a.file, "info")?;
            let depth = chainrec_chain::DEFAULT_MAX_DEPTH;
            super::report::trigger_top(&an, &a.file, depth, &Default::default())?
        }
        _ => None,
    };
    super::write_stdout(&s.output(a.json, trigger.as_ref(), wait.as_ref())?)
}

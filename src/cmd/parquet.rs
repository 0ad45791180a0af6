//! `chainrec export --parquet`: every wait with its chain as two Parquet tables, the waits
//! and their stacks (fronts chainrec-parquet; schema in docs/REPORTS.md).
use anyhow::{bail, Context, Result};
use chainrec_chain::{Analysis, Filter, Setup};
use chainrec_parquet::{write_stacks, Layout, WaitsWriter};
use chainrec_report::output::TempOutput;
use chainrec_report::progress::Progress;
use std::io::BufWriter;
use std::path::Path;

/// The two files of a Parquet export: created before the long work, moved into place only
/// when both are complete (removed on failure, as the other exports).
pub struct ParquetOutputs {
    waits: TempOutput,
    stacks: TempOutput,
}

impl ParquetOutputs {
    /// The outputs for `waits` and, beside it, its stacks table
    /// ([`chainrec_parquet::stacks_path`]); an error when either is one of `others` (the
    /// command's other outputs).
    pub fn create(waits: &Path, others: &[&Path]) -> Result<Self> {
        let stacks = chainrec_parquet::stacks_path(waits);
        for p in [waits, stacks.as_path()] {
            if let Some(o) = others.iter().find(|o| super::same_file(o, p)) {
                bail!(
                    "export: --parquet writes {} and {}, and another output names {}",
                    waits.display(),
                    stacks.display(),
                    o.display()
                );
            }
        }
        Ok(ParquetOutputs {
            waits: TempOutput::create(waits)?,
            stacks: TempOutput::create(&stacks)?,
        })
    }

    /// The destinations: the waits table, then the stacks table.
    pub fn dests(&self) -> [&Path; 2] {
        [self.waits.dest(), self.stacks.dest()]
    }

    /// Run the engine over the trace (time-bounded attribution, default depth, dedup as
    /// `chains`: every wait is a row, `root` says which ones `chains` draws) and write both
    /// tables. Returns the line to print once the files are in place.
    pub fn write(
        &mut self,
        an: &Analysis,
        file: &Path,
        filter: Filter,
        quiet: bool,
    ) -> Result<String> {
        let [waits_path, stacks_path] = self.dests().map(Path::to_path_buf);
        let out = BufWriter::with_capacity(1 << 20, self.waits.file()?);
        let mut w = WaitsWriter::new(
            out,
            an.tables(),
            an.meta(),
            an.start_ns(),
            Layout::default(),
        )
        .with_context(|| format!("writing {}", waits_path.display()))?;
        let setup = Setup {
            filter,
            ..Setup::default()
        };
        let mut progress = Progress::new(an.reader().event_count(), "parquet", quiet);
        // Stop reading once the output failed (a full disk); finish() returns the error.
        let done = an
            .run_while(setup, &mut w, |w, n| {
                progress.inc(n as u64);
                !w.failed()
            })
            .with_context(|| format!("{}: reading events", file.display()))?;
        progress.finish();
        // What the engine noticed about the trace (as `waits` says it): rows near such
        // places may be incomplete.
        for note in done.summary.stats.anomaly_notes(an.start_ns()) {
            say!("chainrec: export: note: {note}");
        }
        let waits = w
            .finish()
            .with_context(|| format!("writing {}", waits_path.display()))?;
        let out = BufWriter::with_capacity(1 << 20, self.stacks.file()?);
        let stacks = write_stacks(
            out,
            an.tables(),
            an.meta(),
            &waits.stacks,
            Layout::default(),
        )
        .with_context(|| format!("writing {}", stacks_path.display()))?;
        Ok(format!(
            "chainrec: export: wrote {} ({} waits in {} row group(s), {} of them shown inside other chains: root = false) and {} ({} stacks, {} frames)",
            waits_path.display(),
            waits.rows,
            waits.row_groups,
            waits.not_root,
            stacks_path.display(),
            stacks.rows,
            stacks.frames
        ))
    }

    /// Move both files into place.
    pub fn commit(&mut self) -> Result<()> {
        self.waits.commit()?;
        self.stacks.commit()?;
        Ok(())
    }
}

//! `chainrec export`: a Perfetto trace, a pprof profile and tables of every wait
//! ([`WaitsOutput`], written by chainrec-parquet) from one trace. What was asked is checked
//! and every output is created before the long work; the outputs are moved into place only
//! when all of them are complete, and removed on any failure.

use crate::output::{same_file, OutputError, TempOutput};
use crate::progress::{Progress, Progressed};
use crate::{critpath, perfetto, pprof, ReportError};
use chainrec_chain::critpath::CritPathOptions;
use chainrec_chain::{
    Analysis, ChainError, Collected, Filter, NodeTable, Setup, Summary, WaitRecord, WaitSink,
};
use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Any error, boxed: the source of an output that failed (its own type stays in the chain).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why an export failed. The messages are the command's (`export: ...`).
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// No output was asked for.
    #[error("export: say what to write: --perfetto OUT.pftrace, --pprof OUT.pb.gz and/or --parquet OUT.parquet")]
    NothingAsked,
    /// Filters without an output they apply to.
    #[error("export: the filters select waits and apply to --pprof and --parquet only; the Perfetto export is always the whole trace")]
    FilterWithoutWaits,
    /// `--critical-path` without the Perfetto export it adds a track to.
    #[error(
        "export: --critical-path adds a track to the Perfetto export: add --perfetto OUT.pftrace"
    )]
    CriticalPathWithoutPerfetto,
    /// The Perfetto and pprof outputs are one file.
    #[error("export: --perfetto and --pprof name the same file {}", .0.display())]
    SameFile(PathBuf),
    /// An output could not be created or moved into place.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// A thread's critical path could not be computed (an unknown thread, ...).
    #[error("export: --critical-path {tid}")]
    CriticalPath {
        /// The thread.
        tid: u32,
        /// Why.
        #[source]
        source: ChainError,
    },
    /// Writing the Perfetto trace failed.
    #[error("exporting {trace} to {}", .path.display())]
    Perfetto {
        /// The trace read, as named in messages (a set: its first and last file).
        trace: String,
        /// The output.
        path: PathBuf,
        /// Why ([`ReportError`] or an I/O error).
        #[source]
        source: BoxError,
    },
    /// Reading the trace's events failed.
    #[error("{trace}: reading events")]
    Reading {
        /// The trace, as named in messages.
        trace: String,
        /// Why.
        #[source]
        source: ChainError,
    },
    /// The profile could not be built (no wait had a weight, ...).
    #[error(transparent)]
    Profile(ReportError),
    /// Writing an output failed.
    #[error("writing {}", .path.display())]
    Write {
        /// The output.
        path: PathBuf,
        /// Why ([`ReportError`] or an I/O error).
        #[source]
        source: BoxError,
    },
    /// The [`WaitsOutput`] failed.
    #[error(transparent)]
    Waits(BoxError),
}

/// What a [`WaitsOutput`] is written from.
pub struct WaitsInput<'a> {
    /// The trace, opened.
    pub an: &'a Analysis,
    /// Its name in messages: the file, or a set's first and last file.
    pub trace: &'a str,
    /// The waits to write.
    pub filter: Filter,
    /// No progress bar.
    pub quiet: bool,
    /// Runs the engine, feeding the other outputs' sinks from the same run.
    pub shared: &'a mut SharedRun,
}

/// The sinks of the other outputs (the pprof profile) that a [`WaitsOutput`]'s engine run
/// feeds too, so that the trace is decoded and walked once for all of them.
#[derive(Default)]
pub struct SharedRun {
    profile: Option<pprof::ProfileSink>,
    /// The run's nodes, which the riders' records refer to (after the run).
    nodes: Option<NodeTable>,
}

impl SharedRun {
    /// Run the engine over `an` into `sink` and every other output's sink, as
    /// [`Analysis::run_while`] (`go_on` sees `sink` alone).
    pub fn run_while<S: WaitSink>(
        &mut self,
        an: &Analysis,
        setup: Setup,
        sink: &mut S,
        mut go_on: impl FnMut(&S, usize) -> bool,
    ) -> Result<Summary, ChainError> {
        let Some(profile) = &mut self.profile else {
            return Ok(an.run_while(setup, sink, go_on)?.summary);
        };
        let mut tee = Tee {
            first: sink,
            profile,
        };
        let done = an.run_while(setup, &mut tee, |t, n| go_on(t.first, n))?;
        let (summary, nodes) = done.into_parts();
        self.nodes = Some(nodes);
        Ok(summary)
    }
}

/// A [`WaitsOutput`]'s sink and the profile's, fed the same records.
struct Tee<'x, S> {
    first: &'x mut S,
    profile: &'x mut pprof::ProfileSink,
}

impl<S: WaitSink> WaitSink for Tee<'_, S> {
    fn on_wait(&mut self, wait: &WaitRecord, nodes: &NodeTable) {
        self.first.on_wait(wait, nodes);
        self.profile.on_wait(wait, nodes);
    }
}

/// An output of every wait that another crate writes (chainrec-parquet's tables, which are
/// built on this crate's [`crate::waits`] rows, so this crate cannot call them).
pub trait WaitsOutput {
    /// Run the engine over the input's trace and write the output, not yet in place. Notes
    /// about the trace go to `note` as they come; returns the line to print once the
    /// output is in place.
    fn write(
        &mut self,
        input: WaitsInput<'_>,
        note: &mut dyn FnMut(&str),
    ) -> Result<String, BoxError>;

    /// Move the output into place.
    fn commit(&mut self) -> Result<(), OutputError>;
}

/// What `chainrec export` was asked to write.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The trace's name in messages: the file, or a set's first and last file and how
    /// many (`r.0000.zst … r.0003.zst (4 files)`).
    pub trace: &'a str,
    /// The Perfetto trace to write.
    pub perfetto: Option<&'a Path>,
    /// Threads whose critical path becomes a track of the Perfetto trace.
    pub critical_path: &'a [u32],
    /// The pprof profile to write.
    pub pprof: Option<&'a Path>,
    /// The Parquet tables to write (by a [`WaitsOutput`]).
    pub parquet: Option<&'a Path>,
    /// Whether filters select waits (they apply to pprof and Parquet only).
    pub filtered: bool,
    /// No progress bars.
    pub quiet: bool,
}

impl<'a> Request<'a> {
    /// An error when no output is asked for (checked before the trace is opened).
    pub fn check_asked(&self) -> Result<(), ExportError> {
        if self.perfetto.is_none() && self.pprof.is_none() && self.parquet.is_none() {
            return Err(ExportError::NothingAsked);
        }
        Ok(())
    }

    /// An error when the options do not go together: filters without an output they apply
    /// to, `--critical-path` without Perfetto, Perfetto and pprof into one file.
    pub fn check(&self) -> Result<(), ExportError> {
        self.check_asked()?;
        if self.filtered && self.pprof.is_none() && self.parquet.is_none() {
            return Err(ExportError::FilterWithoutWaits);
        }
        if !self.critical_path.is_empty() && self.perfetto.is_none() {
            return Err(ExportError::CriticalPathWithoutPerfetto);
        }
        if let (Some(p), Some(q)) = (self.perfetto, self.pprof) {
            if same_file(p, q) {
                return Err(ExportError::SameFile(p.to_path_buf()));
            }
        }
        Ok(())
    }

    /// Create the Perfetto and pprof outputs (as temporary files next to their
    /// destinations), before the long work.
    pub fn create(&self) -> Result<Export<'a>, ExportError> {
        let create = |p: Option<&Path>| p.map(TempOutput::create).transpose();
        Ok(Export {
            req: *self,
            perfetto: create(self.perfetto)?,
            pprof: create(self.pprof)?,
        })
    }
}

/// The Perfetto and pprof outputs of a [`Request`], created and not yet written.
pub struct Export<'a> {
    req: Request<'a>,
    perfetto: Option<TempOutput>,
    pprof: Option<TempOutput>,
}

impl Export<'_> {
    /// The files asked for, as named (a [`WaitsOutput`] must not write one of them).
    pub fn dests(&self) -> Vec<&Path> {
        [self.req.perfetto, self.req.pprof]
            .into_iter()
            .flatten()
            .collect()
    }

    /// Write every output (the critical paths first: an unknown thread fails before
    /// anything is written), then move them into place one by one, each followed by its
    /// line to `note` (`wrote OUT (...)`). `filter` selects the waits of the profile and of
    /// `waits`.
    pub fn write(
        mut self,
        an: &Analysis,
        filter: Filter,
        mut waits: Option<&mut dyn WaitsOutput>,
        note: &mut dyn FnMut(&str),
    ) -> Result<(), ExportError> {
        let (trace, quiet) = (self.req.trace, self.req.quiet);
        let tracks = critical_path_tracks(an, self.req.critical_path)?;
        let mut perfetto_note = String::new();
        if let Some(out) = &mut self.perfetto {
            let path = out.dest().to_path_buf();
            let reader = an.reader();
            let src = Progressed::new(
                reader,
                Progress::new(2 * reader.event_count(), "perfetto", quiet),
            );
            let mut w = BufWriter::new(out.file()?);
            let st = perfetto::export_with_tracks(&src, &mut w, &tracks)
                .map_err(BoxError::from)
                .and_then(|st| Ok(w.flush().map(|_| st)?))
                .map_err(|source| ExportError::Perfetto {
                    trace: trace.to_string(),
                    path: path.clone(),
                    source,
                })?;
            drop(w);
            src.finish();
            perfetto_note = st.summary(&path);
        }
        // The profile rides on the waits output's engine run when there is one: the trace
        // is walked once for both.
        let mut shared = SharedRun {
            profile: (self.pprof.is_some() && waits.is_some()).then(pprof::ProfileSink::new),
            nodes: None,
        };
        let mut waits_note = String::new();
        if let Some(w) = &mut waits {
            let input = WaitsInput {
                an,
                trace,
                filter: filter.clone(),
                quiet,
                shared: &mut shared,
            };
            waits_note = w.write(input, note).map_err(ExportError::Waits)?;
        }
        let mut pprof_note = String::new();
        if let Some(out) = &mut self.pprof {
            let path = out.dest().to_path_buf();
            let samples = match (shared.profile, shared.nodes) {
                (Some(sink), Some(nodes)) => Collected::new(sink, nodes, an.trace()),
                _ => {
                    let setup = Setup {
                        filter,
                        ..Setup::default()
                    };
                    let mut progress = Progress::new(an.reader().event_count(), "pprof", quiet);
                    let (_, samples) = an
                        .collect(setup, pprof::ProfileSink::new(), |n| progress.inc(n as u64))
                        .map_err(|source| ExportError::Reading {
                            trace: trace.to_string(),
                            source,
                        })?;
                    progress.finish();
                    samples
                }
            };
            let info = pprof::ProfileInfo::of_trace(an, trace);
            let profile =
                pprof::EncodedProfile::of(&samples, &info).map_err(ExportError::Profile)?;
            drop(samples);
            let mut w = BufWriter::new(out.file()?);
            profile
                .write_gz(&mut w)
                .map_err(BoxError::from)
                .and_then(|_| Ok(w.flush()?))
                .map_err(|source| ExportError::Write {
                    path: path.clone(),
                    source,
                })?;
            drop(w);
            pprof_note = profile.summary(&path);
        }
        // All outputs complete: only now move them into place.
        for (out, line) in [(self.perfetto, perfetto_note), (self.pprof, pprof_note)] {
            if let Some(mut out) = out {
                out.commit()?;
                note(&line);
            }
        }
        if let Some(w) = waits {
            w.commit()?;
            note(&waits_note);
        }
        Ok(())
    }
}

/// One `critical path` track with a thread's critical path per thread of `tids` (none
/// without threads).
pub fn critical_path_tracks(
    an: &Analysis,
    tids: &[u32],
) -> Result<Vec<perfetto::SliceTrack>, ExportError> {
    if tids.is_empty() {
        return Ok(Vec::new());
    }
    let paths = chainrec_chain::critical_paths(an, tids, &CritPathOptions::new(tids[0])).map_err(
        |source| ExportError::CriticalPath {
            tid: failed_tid(&source, tids),
            source,
        },
    )?;
    let slices: BTreeMap<u32, _> = paths
        .iter()
        .map(|cp| (cp.tid, critpath::perfetto_slices(cp)))
        .collect();
    Ok(vec![perfetto::SliceTrack {
        name: "critical path".into(),
        slices,
    }])
}

/// The thread a critical-path error is about (the first asked when it is about none: a
/// failure to read the trace, which a run for that thread alone would have met first).
fn failed_tid(e: &ChainError, tids: &[u32]) -> u32 {
    match e {
        ChainError::NoSuchThread(t) | ChainError::NoTime(t) => *t,
        _ => tids[0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req<'a>(
        perfetto: Option<&'a str>,
        pprof: Option<&'a str>,
        parquet: Option<&'a str>,
    ) -> Request<'a> {
        Request {
            trace: "t.zst",
            perfetto: perfetto.map(Path::new),
            critical_path: &[],
            pprof: pprof.map(Path::new),
            parquet: parquet.map(Path::new),
            filtered: false,
            quiet: true,
        }
    }

    #[test]
    fn options_that_do_not_go_together_are_refused() {
        let msg = |r: Request<'_>| r.check().map_err(|e| e.to_string()).err();
        assert_eq!(msg(req(None, None, None)), Some("export: say what to write: --perfetto OUT.pftrace, --pprof OUT.pb.gz and/or --parquet OUT.parquet".into()));
        assert!(req(None, None, None).check_asked().is_err());
        assert_eq!(
            msg(req(Some("a.pf"), Some("b.pb"), Some("c.parquet"))),
            None
        );
        fn filtered(r: Request<'_>) -> Request<'_> {
            Request {
                filtered: true,
                ..r
            }
        }
        assert_eq!(msg(filtered(req(Some("a.pf"), None, None))), Some("export: the filters select waits and apply to --pprof and --parquet only; the Perfetto export is always the whole trace".into()));
        assert_eq!(msg(filtered(req(Some("a.pf"), None, Some("c")))), None);
        assert_eq!(msg(filtered(req(None, Some("b"), None))), None);
        let critical = Request {
            critical_path: &[7],
            ..req(None, Some("b"), None)
        };
        assert_eq!(msg(critical), Some("export: --critical-path adds a track to the Perfetto export: add --perfetto OUT.pftrace".into()));
        assert_eq!(
            msg(req(Some("same"), Some("./same"), None)),
            Some("export: --perfetto and --pprof name the same file same".into())
        );
    }
}

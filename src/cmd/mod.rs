//! One module per command family; each is owned by the crate it fronts.
pub mod chains;
pub mod critpath;
#[cfg(feature = "record")]
pub mod demo;
pub mod filter;
#[cfg(feature = "record")]
pub mod flight;
pub mod info;
pub mod oncpu;
#[cfg(feature = "record")]
pub mod record;
pub mod report;
pub mod script;
pub mod serve;
pub mod synth;

use anyhow::Result;
use chainrec_chain::{Analysis, ChainError, DamagePolicy, TraceWarning};
use chainrec_format::FormatError;
use chainrec_report::ReportError;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A trace error naming the trace once (I/O errors name their path already).
pub(crate) fn with_path(path: &Path, e: FormatError) -> anyhow::Error {
    match e {
        FormatError::Io { .. } => e.into(),
        e => anyhow::Error::new(e).context(path.display().to_string()),
    }
}

/// An "error" that only carries the exit status: the command printed what happened
/// itself (`record -- COMMAND` exits with COMMAND's status). `main` exits with it and prints
/// nothing.
#[derive(Debug)]
pub struct Exit(pub i32);

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "exit status {}", self.0)
    }
}

impl std::error::Error for Exit {}

/// [`with_path`] for the files of one analysis (errors of a set name their files).
pub(crate) fn with_paths(paths: &[PathBuf], e: FormatError) -> anyhow::Error {
    match e {
        FormatError::Io { .. } | FormatError::Set(_) | FormatError::InFile { .. } => e.into(),
        e => anyhow::Error::new(e).context(label(paths)),
    }
}

/// Help of the TRACE arguments of the analysis commands.
pub const TRACES_HELP: &str =
    "Trace file(s) written by `chainrec record` or `chainrec synth`. Several files \
(`r.*.zst`) or a directory are the numbered files of one `record --rotate`, read as one recording";

/// How an analysis names its traces in messages and titles: the file, or a set as its
/// first and last file and how many (`r.0000.zst … r.0003.zst (4 files)`; the last by its
/// name alone when it sits beside the first).
pub fn label(paths: &[PathBuf]) -> String {
    match paths {
        [one] => one.display().to_string(),
        [first, .., last] => {
            let last = match last.file_name() {
                Some(name) if last.parent() == first.parent() => Path::new(name),
                _ => last.as_path(),
            };
            format!(
                "{} … {} ({} files)",
                first.display(),
                last.display(),
                paths.len()
            )
        }
        [] => String::from("(no trace)"),
    }
}

/// Environment variable that lets analyses run on the readable part of a damaged trace.
pub const SALVAGE_ENV: &str = "CHAINREC_SALVAGE";

/// True when the user asked to analyse what a damaged trace still holds.
fn salvage_requested() -> bool {
    std::env::var(SALVAGE_ENV).is_ok_and(|v| v == "1")
}

/// Fix glibc's mmap threshold, so that a large buffer freed mid-run (a decoded chunk, a
/// path trie's old index, a history grown and trimmed) goes back to the kernel at once.
/// glibc otherwise raises the threshold to the size of every mapped block freed (up to
/// 32 MiB), and the buffers after it come from the heap, where freed room stays resident:
/// on `chains` of a 20 M-event trace that slack was 12 MiB of the 154 MiB peak, on a real
/// recording 20 MiB of 195. The price is fresh pages for buffers freed and allocated
/// again: about 2.5 % CPU on small real recordings (docs/BENCHMARKS.md, session 18).
pub fn fix_mmap_threshold() {
    #[cfg(target_env = "gnu")]
    {
        /// Allocations of at least this size are mapped on their own, unmapped when freed.
        const MMAP_THRESHOLD: libc::c_int = 256 << 10;
        // SAFETY: mallopt only sets an allocator parameter; it is called before any other
        // thread exists, and a refusal (return 0) leaves glibc's default in place.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

/// Gives up `v` without running its destructor, for what a command holds at its very
/// end (the trace's tables, the path trie): their drop frees millions of small
/// allocations one by one (15 % of `chains --no-runqueue` CPU on a recording with 112 k
/// stacks), just before the process exits and the kernel takes all its pages back at
/// once. Only for values the process keeps until it exits: nothing else is leaked.
pub(crate) fn leave_to_exit<T>(v: T) {
    std::mem::forget(v);
}

/// Open a trace for analysis. A file cut short by a killed recorder is read up to its last
/// complete section with a warning; a damaged file (corruption in the middle, so events
/// after it are unreadable) is an error unless CHAINREC_SALVAGE=1, because its output
/// would silently miss data. That holds for damage found while reading the events too (a
/// bad chunk in a file whose index is intact): with CHAINREC_SALVAGE=1 the analysis stops
/// there with a warning, else it fails and [`damage_hint`] says what to do.
pub fn open_trace(paths: &[PathBuf], what: &str) -> Result<Analysis> {
    let policy = if salvage_requested() {
        DamagePolicy::Salvage
    } else {
        DamagePolicy::Refuse
    };
    let label = what.to_string();
    let what = what.to_string();
    let warn = Arc::new(move |w: TraceWarning<'_>| {
        match w {
        TraceWarning::SalvageStop(e) => say!(
            "chainrec: {what}: warning: {e}; {SALVAGE_ENV}=1: stopping there, the output covers only the events before it"
        ),
        TraceWarning::Recovered(r) => say!(
            "chainrec: {what}: warning: trace index unusable ({}); recovered by scanning, {} trailing bytes ignored{}",
            r.reason,
            r.trailing_bytes,
            if r.damaged { " (damaged file: output covers only the events before the damage)" } else { "" }
        ),
    }
    });
    let mut an = Analysis::open_files(paths, policy, warn)?;
    resymbolize(an.tables_mut(), &label);
    Ok(an)
}

/// The `--debug-dir` directories (set once by `main`).
static DEBUG_DIRS: std::sync::OnceLock<Vec<std::path::PathBuf>> = std::sync::OnceLock::new();

/// Remember the `--debug-dir` directories; each must be a directory.
pub fn set_debug_dirs(dirs: &[std::path::PathBuf]) -> Result<()> {
    for d in dirs {
        if !d.is_dir() {
            anyhow::bail!("--debug-dir {}: not a directory", d.display());
        }
    }
    let _ = DEBUG_DIRS.set(dirs.to_vec());
    Ok(())
}

/// With `--debug-dir`: resolve the trace's user frames again with this machine's debug
/// files, and say what changed on stderr.
pub(crate) fn resymbolize(
    tables: &mut chainrec_format::Tables,
    what: &str,
) -> Option<chainrec_symbols::Resymbolized> {
    let dirs = DEBUG_DIRS.get().filter(|d| !d.is_empty())?;
    let r = chainrec_symbols::resymbolize(tables, dirs);
    say!(
        "chainrec: {what}: --debug-dir: {} user frames looked up again: {} newly named, {} renamed; still unnamed: {}",
        r.examined,
        r.newly_named,
        r.renamed,
        r.unresolved.by_reason_text()
    );
    Some(r)
}

/// For an analysis that failed on damage in the middle of the trace: how to analyse the
/// events before the damage anyway (None when salvage is already on or the error is
/// another one).
pub fn damage_hint(err: &anyhow::Error) -> Option<String> {
    let damage = err.chain().any(|c| {
        c.downcast_ref::<ChainError>()
            .is_some_and(ChainError::is_damage)
            || c.downcast_ref::<ReportError>()
                .is_some_and(ReportError::is_damage)
    });
    (damage && !salvage_requested()).then(|| {
        format!(
            "run with {SALVAGE_ENV}=1 to analyse the events before the damage anyway (`chainrec info --verify` shows the damage)"
        )
    })
}

/// Write `s` to stdout. A closed pipe (`| head`) is a quiet success; any other write
/// error (a full disk, `> /dev/full`) is an error.
pub(crate) fn write_stdout(s: &str) -> Result<()> {
    use anyhow::Context;
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing to stdout"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_is_named_by_its_first_and_last_file() {
        let p = |v: &[&str]| v.iter().map(PathBuf::from).collect::<Vec<_>>();
        assert_eq!(label(&p(&["t.zst"])), "t.zst");
        assert_eq!(
            label(&p(&["d/r.0000.zst", "d/r.0001.zst", "d/r.0002.zst"])),
            "d/r.0000.zst … r.0002.zst (3 files)"
        );
        assert_eq!(
            label(&p(&["a/r.0000.zst", "b/r.0001.zst"])),
            "a/r.0000.zst … b/r.0001.zst (2 files)"
        );
        assert_eq!(label(&[]), "(no trace)");
    }
}

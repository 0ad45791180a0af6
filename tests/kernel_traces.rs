//! Traces recorded on every kernel of the matrix (`./x.sh kernels --update-golden` copies
//! the `chainrec demo` trace of each run into testdata/kernels/NAME.zst): the analysis side
//! reads each one, and `chainrec info` of each is a golden file (NAME.info). A trace from
//! an older kernel (another BTF, the recorder's fallbacks) must stay readable, with the
//! same metadata, tables and counts, as the analysis code changes.

mod common;
use common::bin;
use std::path::{Path, PathBuf};

/// The repository root: the commands run there, so that `info` names each trace by its
/// relative path (the golden files must not depend on where the checkout is).
fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The committed traces, by kernel name, relative to [`root`].
fn traces() -> Vec<PathBuf> {
    let dir = Path::new("testdata/kernels");
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| dir.join(e.unwrap().file_name()))
        .filter(|p| p.extension().is_some_and(|x| x == "zst"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_kernel_of_the_matrix_has_a_trace() {
    let names: Vec<String> = traces()
        .iter()
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in ["6.1", "6.1-cloud", "6.1-rt", "6.12", "host"] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
}

#[test]
fn info_of_each_kernels_trace_is_golden() {
    for trace in traces() {
        let out = bin()
            .arg("info")
            .arg("--verify")
            .arg(&trace)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}",
            trace.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let actual = String::from_utf8(out.stdout).unwrap();
        let golden = root().join(trace.with_extension("info"));
        assert_eq!(
            actual,
            chainrec_testkit::golden::expected(&golden, &actual),
            "{}",
            trace.display()
        );
    }
}

#[test]
fn each_kernels_trace_has_the_workload_chain() {
    // The demo trace of each kernel: the sink's waits end at the timer interrupt (on
    // PREEMPT_RT through the ktimers thread), read by this build's engine.
    for trace in traces() {
        let out = bin()
            .current_dir(root())
            .arg("chains")
            .arg(&trace)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", trace.display());
        let text = String::from_utf8(out.stdout).unwrap();
        let timer_ends = text
            .lines()
            .filter(|l| l.starts_with("cr-sink;"))
            .filter(|l| {
                let stack = l.rsplit_once(' ').map_or(*l, |(s, _)| s);
                let levels: Vec<&str> = stack.split(";--;").collect();
                levels.len() >= 4
                    && levels[1].ends_with(";cr-relay")
                    && levels[2].ends_with(";cr-timer")
                    && levels.last().unwrap().ends_with(";[hardirq: timer]")
            })
            .count();
        assert!(
            timer_ends > 0,
            "{}: no cr-sink chain to the timer:\n{text}",
            trace.display()
        );
    }
}

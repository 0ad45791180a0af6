//! Helpers shared by the binary's integration tests (each test file uses a part).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The built `chainrec` binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chainrec"))
}

/// A fresh directory for one test (the test kit's scratch directory).
pub fn tmpdir(name: &str) -> PathBuf {
    chainrec_testkit::scratch::dir(name)
}

/// `chainrec ARGS TRACES...`: its stdout, asserting success (the traces last: one file,
/// or the files of a rotated set).
#[track_caller]
pub fn run_on(args: &[&str], traces: &[PathBuf]) -> Vec<u8> {
    let out = bin()
        .args(args)
        .args(traces)
        .output()
        .expect("run chainrec");
    assert!(
        out.status.success(),
        "chainrec {args:?} {traces:?}: {}",
        stderr(&out)
    );
    out.stdout
}

/// Run `cmd` (`what` names it in the message), asserting it succeeded: its output.
#[track_caller]
pub fn ok(cmd: &mut Command, what: &str) -> Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed: {}", stderr(&out));
    out
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert a clean failure: non-zero exit, `phrase` in stderr, no panic.
#[track_caller]
pub fn fails_with(o: &Output, phrase: &str) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert_ne!(o.status.code(), Some(101), "panic exit code; stderr: {err}");
    assert!(err.contains(phrase), "stderr lacks {phrase:?}: {err}");
    assert!(!err.contains("panicked"), "panicked: {err}");
}

/// Record the whole system with `opts` (its output set to `dir/trace.zst`) while `work`
/// runs; returns the trace path and what `work` returned. Asserts no event was lost.
pub fn record_while<T>(
    dir: &std::path::Path,
    opts: chainrec_record::RecordOptions,
    work: impl FnOnce() -> T,
) -> (PathBuf, T) {
    let (trace, out, summary) = record_with_summary(dir, opts, work);
    assert_eq!(
        summary.lost.events(),
        0,
        "chainrec lost events: {:?}",
        summary.lost
    );
    (trace, out)
}

/// [`record_while`] without the lost-events assertion: also returns the recording's
/// summary, for tests that judge losses (or the softirq method, ...) themselves.
pub fn record_with_summary<T>(
    dir: &std::path::Path,
    opts: chainrec_record::RecordOptions,
    work: impl FnOnce() -> T,
) -> (PathBuf, T, chainrec_record::RecordSummary) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let trace = dir.join("trace.zst");
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let opts = chainrec_record::RecordOptions {
        output: trace.clone(),
        status_line: false,
        ..opts
    };
    let cond = chainrec_record::StopCondition {
        progress: None,
        duration: Some(Duration::from_secs(120)),
        flag: Some(stop.clone()),
        started: Some(started.clone()),
    };
    let rec = std::thread::spawn(move || chainrec_record::record(&opts, cond));
    while !started.load(Ordering::SeqCst) {
        assert!(!rec.is_finished(), "recorder ended early: {:?}", rec.join());
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = work();
    stop.store(true, Ordering::SeqCst);
    let summary = rec.join().expect("recorder thread").expect("recording");
    (trace, out, summary)
}

/// `chainrec waits --json --no-dedup TRACE [extra]`: every wait of the trace with its chain.
pub fn waits_json(trace: &std::path::Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let out = bin()
        .args(["waits", "--json", "--no-dedup"])
        .args(extra)
        .arg(trace)
        .output()
        .expect("run chainrec waits");
    assert!(out.status.success(), "waits: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("NDJSON line"))
        .collect()
}

/// `trace` written again as the numbered files of one rotated recording (`base` →
/// `stem.0000.zst`, …) by the recorder's own RotatingWriter, each file about 1/`parts` of
/// the trace's time, flushed every `flush_events` events as the recorder does. Returns the
/// files in order.
pub fn split_rotated(
    trace: &std::path::Path,
    base: &std::path::Path,
    parts: u64,
    flush_events: usize,
) -> Vec<PathBuf> {
    use chainrec_format::{RotateLimit, TraceReader, WriterOptions};
    let mem = TraceReader::open(trace).unwrap().to_mem().unwrap();
    let (first, last) = (mem.events[0].ts(), mem.events.last().unwrap().ts());
    let limit = RotateLimit {
        bytes: 0,
        ns: (last - first) / parts,
    };
    mem.write_rotated(base, limit, flush_events, WriterOptions::default())
        .unwrap()
        .into_iter()
        .map(|f| f.0)
        .collect()
}

/// The pid a workload wrote to `pidfile` once it runs (waits up to a minute for it).
#[track_caller]
pub fn wait_for_pidfile(pidfile: &std::path::Path) -> u32 {
    let t0 = std::time::Instant::now();
    loop {
        if let Some(p) = std::fs::read_to_string(pidfile)
            .ok()
            .and_then(|p| p.trim().parse().ok())
        {
            return p;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the workload never wrote its pid to {}",
            pidfile.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Build `testdata/go/NAME.go` with the machine's Go into `dir/NAME` (GOPATH mode, a
/// cache of its own), or None after a loud skip when `go` is missing (a failure under
/// `CHAINREC_REQUIRE_TOOLS=1`).
pub fn go_build(test: &str, name: &str, dir: &std::path::Path) -> Option<PathBuf> {
    if !chainrec_testkit::tools::available("go", "version") {
        chainrec_testkit::tools::skip(test, "go missing (apt-get install golang-go)");
        return None;
    }
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/go")
        .join(format!("{name}.go"));
    let exe = dir.join(name);
    ok(
        Command::new("go")
            .args(["build", "-o"])
            .arg(&exe)
            .arg(&src)
            .env("GOCACHE", dir.join("gocache"))
            .env("GO111MODULE", "off"),
        "go build",
    );
    Some(exe)
}

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

/// A Go version the goroutine probes support, and where its toolchain comes from: each Go
/// test runs once per version (`..._go1_19`, `..._go1_24`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GoVersion {
    /// Debian 12's `golang-go` (1.19.8): `go` on the PATH.
    Go119,
    /// Debian 13's `golang-1.24-go` (1.24.4): the `go` named by `CHAINREC_GO124`, which
    /// `./x.sh test` fetches from trixie's pool into /var/cache/chainrec/go1.24.
    Go124,
}

impl GoVersion {
    /// `1.19`, `1.24`: the minor version of the binaries its toolchain builds.
    pub fn minor(self) -> &'static str {
        match self {
            GoVersion::Go119 => "1.19",
            GoVersion::Go124 => "1.24",
        }
    }

    /// Whether its execution tracer writes the format of Go 1.22+ (read with `go tool
    /// trace -d=parsed`), not the old one (`go tool trace -d`).
    pub fn new_tracer(self) -> bool {
        self == GoVersion::Go124
    }

    /// Its `go` command, or None after a loud skip of `test` when it is missing (a failure
    /// under `CHAINREC_REQUIRE_TOOLS=1`).
    pub fn toolchain(self, test: &str) -> Option<GoToolchain> {
        let (go, why) = match self {
            GoVersion::Go119 => (
                Some(PathBuf::from("go")),
                "go missing (apt-get install golang-go)".to_string(),
            ),
            GoVersion::Go124 => (
                std::env::var_os("CHAINREC_GO124").map(PathBuf::from),
                "Go 1.24 missing: CHAINREC_GO124 names no go command (./x.sh test fetches \
                 Debian 13's golang-1.24-go and sets it)"
                    .to_string(),
            ),
        };
        let Some(go) = go else {
            chainrec_testkit::tools::skip(test, &why);
            return None;
        };
        let version = Command::new(&go).arg("version").output();
        let said = version
            .as_ref()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
        let Some(said) = said else {
            chainrec_testkit::tools::skip(test, &format!("{} does not run: {why}", go.display()));
            return None;
        };
        // `go version go1.19.8 linux/amd64`: the toolchain must be the version the test is
        // for (a PATH whose `go` is another version would test the wrong one).
        assert!(
            said.contains(&format!("go{}.", self.minor())),
            "{} is not Go {}: {said}",
            go.display(),
            self.minor()
        );
        Some(GoToolchain { version: self, go })
    }
}

/// A Go toolchain to build the test programs with.
#[derive(Clone, Debug)]
pub struct GoToolchain {
    /// Its version.
    pub version: GoVersion,
    /// Its `go` command (which finds its GOROOT from its own path).
    pub go: PathBuf,
}

impl GoToolchain {
    /// `go ARGS...` with a build cache in `dir`, GOPATH mode, this toolchain only (no
    /// download of another: `GOTOOLCHAIN=local`).
    pub fn command(&self, dir: &std::path::Path) -> Command {
        let mut c = Command::new(&self.go);
        c.env(
            "GOCACHE",
            dir.join(format!("gocache-{}", self.version.minor())),
        )
        .env("GO111MODULE", "off")
        .env("GOTOOLCHAIN", "local")
        .env_remove("GOROOT");
        c
    }

    /// Build `testdata/go/NAME.go` into `dir/NAME` (with `extra` build flags).
    pub fn build(&self, name: &str, dir: &std::path::Path, extra: &[&str]) -> PathBuf {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("testdata/go")
            .join(format!("{name}.go"));
        let exe = dir.join(name);
        ok(
            self.command(dir)
                .arg("build")
                .args(extra)
                .arg("-o")
                .arg(&exe)
                .arg(&src),
            "go build",
        );
        exe
    }
}

/// One run of a Go test with one Go version: its name for messages and skips
/// (`real_go (Go 1.24)`), a fresh directory, the toolchain, and the test's program built
/// with it. The Go tests of one test binary run one at a time (while this lives): a
/// recording probes every Go binary it sees (the other version's program too), and two
/// loads at once on two cores would measure each other.
pub struct GoTest {
    /// `BASE (Go 1.24)`.
    pub name: String,
    /// The test's directory.
    pub dir: PathBuf,
    /// The Go it builds with.
    pub go: GoToolchain,
    /// `dir/PROGRAM`, built from testdata/go/PROGRAM.go.
    pub exe: PathBuf,
    _serial: std::sync::MutexGuard<'static, ()>,
}

/// Set up test `base` for Go `version` with testdata/go/`program`.go built, or None after
/// a loud skip when that Go is missing (a failure under `CHAINREC_REQUIRE_TOOLS=1`).
pub fn go_test(base: &str, version: GoVersion, program: &str) -> Option<GoTest> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    // A test that failed holding it poisons it; the next one runs all the same.
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("{base} (Go {})", version.minor());
    let go = version.toolchain(&name)?;
    let dir = tmpdir(&format!("{base}-{program}-{}", version.minor()));
    let exe = go.build(program, &dir, &[]);
    Some(GoTest {
        name,
        dir,
        go,
        exe,
        _serial: serial,
    })
}

//! Command-line behaviour of the built binary on bad input: every mistake gives a clear
//! error and a non-zero exit, never a panic, and leaves no output file behind. Runs
//! without root: the traces come from `chainrec synth`.

mod common;
use common::{bin, fails_with, stderr, tmpdir};
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The pipe-relay scenario (cr-sink <- cr-relay <- cr-timer <- [hardirq: timer], 10 ms
/// period), about 1000 events: 112 periods over 1.115 s.
fn trace() -> &'static Path {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| {
        let p = tmpdir("shared").join("relay.zst");
        let out = bin()
            .args([
                "synth",
                "--scenario",
                "pipe-relay",
                "--events",
                "1000",
                "-o",
            ])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        p
    })
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

#[track_caller]
fn fails(args: &[&str], phrase: &str) {
    fails_with(&run(args), phrase);
}

fn t() -> &'static str {
    trace().to_str().unwrap()
}

#[test]
fn bad_window_values_are_rejected() {
    for w in ["@nan..", "@inf..", "@-inf..", "@-1e30..", "..@1e30"] {
        fails(&["chains", t(), "--window", w], "out of range");
    }
    fails(&["chains", t(), "--window", "@nan.."], "@nan");
    fails(&["chains", t(), "--window", "nan..1"], "relative time nan");
    fails(&["chains", t(), "--window=-1..1"], "relative time -1");
    fails(&["chains", t(), "--window", "2"], "expected START..END");
}

#[test]
fn reversed_window_is_rejected() {
    fails(&["chains", t(), "--window", "3..1"], "start is after end");
    fails(
        &["top", t(), "-q", "--window", "3..1"],
        "start is after end",
    );
}

#[test]
fn window_outside_the_trace_is_an_error_naming_the_span() {
    for cmd in ["chains", "offcpu", "wakeup", "offwake"] {
        for w in ["100..200", "1e300.."] {
            fails(&[cmd, t(), "--window", w], "outside the trace");
        }
    }
    fails(
        &["chains", t(), "--window", "100..200"],
        "spans 0.000..1.115 s from the trace start",
    );
    fails(
        &["top", t(), "-q", "--window", "100.."],
        "outside the trace",
    );
    let d = tmpdir("export-outside");
    let pb = d.join("p.pb.gz");
    let o = bin()
        .args(["export", t(), "-q", "--window", "5..", "--pprof"])
        .arg(&pb)
        .output()
        .unwrap();
    fails_with(&o, "outside the trace");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "files left");
    // A synthetic trace has no wall clock: `@` and time-of-day windows cannot apply.
    fails(&["chains", t(), "--window", "@0..@1"], "no wall-clock time");
    fails(
        &["chains", t(), "--window", "10:00:00.."],
        "no wall-clock time",
    );
}

#[test]
fn filter_mistakes_are_rejected() {
    fails(
        &["chains", t(), "-m", "5", "-M", "1"],
        "-m 5 is larger than -M 1",
    );
    let o = run(&["chains", t(), "--unit", "xyz"]);
    fails_with(&o, "invalid value 'xyz'");
    assert_eq!(o.status.code(), Some(2));
    fails(&["chains", t(), "--comm", "("], "bad --comm regex");
    fails(
        &["chains", t(), "--max-depth", "0"],
        "--max-depth must be at least 1",
    );
    fails(
        &["top", t(), "--max-depth", "0"],
        "--max-depth must be at least 1",
    );
}

#[test]
fn bad_trace_files_are_rejected() {
    let d = tmpdir("files");
    let missing = d.join("missing.zst");
    let empty = d.join("empty.zst");
    std::fs::write(&empty, b"").unwrap();
    let nothing = d.join("nothing");
    std::fs::create_dir(&nothing).unwrap();
    for cmd in ["chains", "top", "info"] {
        fails(&[cmd, missing.to_str().unwrap()], "No such file");
        // A directory is the trace files in it (the files of one `record --rotate`).
        fails(
            &[cmd, d.to_str().unwrap()],
            "empty.zst: empty file (0 bytes)",
        );
        fails(
            &[cmd, nothing.to_str().unwrap()],
            "no trace files (*.zst) in this directory",
        );
        fails(&[cmd, empty.to_str().unwrap()], "empty file (0 bytes)");
    }
    // Analysis commands name the trace in format errors, once.
    let o = run(&["chains", empty.to_str().unwrap()]);
    assert_eq!(stderr(&o).matches("empty.zst").count(), 1, "{}", stderr(&o));
    // info names the path once, not twice.
    let o = run(&["info", missing.to_str().unwrap()]);
    assert_eq!(
        stderr(&o).matches("missing.zst").count(),
        1,
        "{}",
        stderr(&o)
    );
    let o = bin()
        .args(["synth", "--scenario", "pipe-relay", "-o"])
        .arg(d.join("nodir/x.zst"))
        .output()
        .unwrap();
    fails_with(&o, "No such file");
    assert_eq!(stderr(&o).matches("x.zst").count(), 1, "{}", stderr(&o));
}

#[test]
fn heatmap_rows_are_checked_before_anything_else() {
    let d = tmpdir("heatmap");
    let svg = d.join("h.svg");
    for rows in ["0", "5000"] {
        // The trace does not exist: the range check comes first.
        let o = bin()
            .args(["heatmap", "missing.zst", "--rows", rows, "-o"])
            .arg(&svg)
            .output()
            .unwrap();
        fails_with(&o, "is not in 1..=1000");
    }
    fails(
        &[
            "heatmap",
            t(),
            "-o",
            svg.to_str().unwrap(),
            "--metric",
            "cpu",
        ],
        "possible values",
    );
    assert!(!svg.exists());
}

#[test]
fn export_fails_before_writing_anything() {
    let d = tmpdir("export");
    let pf = d.join("p.pftrace");
    let pb = d.join("p.pb.gz");
    let o = bin()
        .args(["export", t(), "-q", "--window", "3..1", "--perfetto"])
        .arg(&pf)
        .arg("--pprof")
        .arg(&pb)
        .output()
        .unwrap();
    fails_with(&o, "start is after end");
    let o = bin()
        .args(["export", t(), "-q", "--perfetto"])
        .arg(&pf)
        .arg("--pprof")
        .arg(d.join("nodir/p.pb.gz"))
        .output()
        .unwrap();
    fails_with(&o, "cannot create");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0, "files left");
    // And the same command with good arguments writes both.
    let o = bin()
        .args(["export", t(), "-q", "--perfetto"])
        .arg(&pf)
        .arg("--pprof")
        .arg(&pb)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(pf.metadata().unwrap().len() > 0 && pb.metadata().unwrap().len() > 0);
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), 2, "temp files left");
}

#[test]
fn unwritable_stdout_is_an_error_not_a_panic() {
    for args in [
        vec!["info", t()],
        vec!["info", "--json", t()],
        vec!["synth", "--list"],
        vec!["top", "-q", t()],
    ] {
        let full = std::fs::File::create("/dev/full").unwrap();
        let o = bin()
            .args(&args)
            .stdout(Stdio::from(full))
            .output()
            .unwrap();
        fails_with(&o, "No space left on device");
    }
}

#[test]
fn closed_pipe_is_a_quiet_success() {
    for args in [vec!["synth", "--list"], vec!["info", t()]] {
        let mut child = bin()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
    }
}

#[test]
fn record_checks_summary_json_directory_first() {
    let d = tmpdir("record");
    let out = d.join("r.zst");
    let o = bin()
        .args(["record", "--duration", "1", "-q", "-o"])
        .arg(&out)
        .arg("--summary-json")
        .arg(d.join("nodir/s.json"))
        .output()
        .unwrap();
    fails_with(&o, "does not exist");
    assert!(!out.exists());
}

#[test]
fn chains_of_the_relay_scenario() {
    let o = run(&["chains", t()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<(&str, u64)> = text
        .lines()
        .map(|l| {
            let (stack, w) = l.rsplit_once(' ').unwrap();
            (stack, w.parse().unwrap())
        })
        .collect();
    // Dedup: relay's and timer's waits appear inside the sink's chains, so every root is
    // cr-sink; the full chain goes sink <- relay <- timer <- timer hardirq.
    assert!(!lines.is_empty());
    assert!(
        lines.iter().all(|(s, _)| s.starts_with("cr-sink;")),
        "{text}"
    );
    let full: Vec<_> = lines
        .iter()
        .filter(|(s, _)| s.ends_with(";[hardirq: timer]"))
        .collect();
    assert_eq!(full.len(), 1, "{text}");
    let levels: Vec<&str> = full[0].0.split(";--;").collect();
    assert_eq!(levels.len(), 4, "{text}");
    assert!(levels[1].ends_with(";cr-relay"), "{text}");
    assert!(levels[2].ends_with(";cr-timer"), "{text}");
    // Bounded attribution: the widths add up to the sink's blocked time, 112 waits of
    // about one 10 ms period each (us).
    let total: u64 = lines.iter().map(|l| l.1).sum();
    assert!((1_090_000..=1_120_000).contains(&total), "{total}: {text}");
}

#[test]
fn a_damaged_trace_fails_unless_salvaged() {
    let d = tmpdir("damaged");
    let p = d.join("busy.zst");
    let o = bin()
        .args([
            "synth",
            "--scenario",
            "busy-server",
            "--events",
            "300000",
            "-o",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // Damage a byte a third into the file: inside an event chunk, so events after it are
    // unreadable (whether the index still vouches for the chunk or not).
    let mut bytes = std::fs::read(&p).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0xff;
    std::fs::write(&p, &bytes).unwrap();
    let file = p.to_str().unwrap();
    for cmd in ["chains", "top"] {
        fails(&[cmd, file], "CHAINREC_SALVAGE=1");
        let o = bin()
            .args([cmd, file])
            .env("CHAINREC_SALVAGE", "1")
            .output()
            .unwrap();
        let err = stderr(&o);
        assert!(o.status.success(), "{cmd} salvaged: {err}");
        assert!(
            err.contains("warning"),
            "{cmd} salvaged without a warning: {err}"
        );
        assert!(!o.stdout.is_empty(), "{cmd} salvaged printed nothing");
    }
}

#[test]
fn a_trace_can_be_read_from_a_pipe() {
    // A real pipe (a file as stdin would be a regular file behind /dev/stdin).
    let mut child = bin()
        .args(["chains", "/dev/stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let bytes = std::fs::read(trace()).unwrap();
    let writer = std::thread::spawn(move || std::io::Write::write_all(&mut stdin, &bytes));
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let direct = run(&["chains", t()]);
    assert_eq!(o.stdout, direct.stdout);
    assert!(!o.stdout.is_empty());
}

#[test]
fn a_full_stderr_does_not_fail_a_command() {
    // Notes and warnings are lost, the result is not.
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let o = bin()
        .args(["chains", t()])
        .stderr(Stdio::from(full()))
        .output()
        .unwrap();
    assert!(o.status.success(), "exit {:?}", o.status.code());
    assert_eq!(o.stdout, run(&["chains", t()]).stdout);
    let d = tmpdir("stderr-full");
    let out = d.join("s.zst");
    let o = bin()
        .args(["synth", "--scenario", "pipe-relay", "-o"])
        .arg(&out)
        .stderr(Stdio::from(full()))
        .output()
        .unwrap();
    assert!(o.status.success(), "exit {:?}", o.status.code());
    assert!(out.exists());
}

#[test]
fn errors_survive_a_full_stderr() {
    // The error cannot be printed, but the exit status still says what happened.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let o = bin()
        .args(["info", "/nonexistent/trace.zst"])
        .stderr(Stdio::from(full))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn demo_refuses_a_file_as_its_directory() {
    let d = tmpdir("demo-file");
    let f = d.join("afile");
    std::fs::write(&f, b"keep").unwrap();
    fails(&["demo", "-o", f.to_str().unwrap()], "is not a directory");
    assert_eq!(std::fs::read(&f).unwrap(), b"keep");
}

#[test]
fn export_keeps_symlinks_and_pipes() {
    let d = tmpdir("export-nodes");
    // A symlink stays a symlink; its target gets the export.
    let target = d.join("target.pb.gz");
    let link = d.join("link.pb.gz");
    std::fs::write(&target, b"old").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = bin()
        .args(["export", t(), "-q", "--pprof"])
        .arg(&link)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    let written = std::fs::read(&target).unwrap();
    assert_eq!(
        &written[..2],
        &[0x1f, 0x8b],
        "gzip expected in the link's target"
    );
    // A named pipe is written through, not replaced by a regular file.
    let fifo = d.join("out.pftrace");
    let made = Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo {}", fifo.display());
    // Hold a write end (O_RDWR does not block on Linux) so that the reader never waits
    // forever, even if the export did not open the pipe at all.
    let held = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    // The read end is opened here, while `held` is a writer (so the open does not block),
    // not in the thread: a thread that started only after `held` was dropped would wait
    // for a writer forever (seen once under load, in `wait_for_partner`).
    let mut read_end = std::fs::File::open(&fifo).unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut read_end, &mut bytes).unwrap();
        bytes
    });
    let o = bin()
        .args(["export", t(), "-q", "--perfetto"])
        .arg(&fifo)
        .output()
        .unwrap();
    drop(held);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = reader.join().unwrap();
    assert!(!bytes.is_empty());
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
}

#[test]
fn trigger_on_a_trace_that_is_not_a_dump_is_refused() {
    fails(&["chains", "--trigger", t()], "not a flight-recorder dump");
    fails(&["top", "--trigger", t()], "not a flight-recorder dump");
}

/// `chains --svg A --folded B`: one fold gives both, each byte for byte what `--svg A` and
/// the folded lines on stdout give alone.
#[test]
fn svg_and_folded_from_one_fold() {
    let d = tmpdir("svg-and-folded");
    let (svg, folded) = (d.join("both.svg"), d.join("both.folded"));
    let out = bin()
        .args(["chains", t(), "--svg"])
        .arg(&svg)
        .arg("--folded")
        .arg(&folded)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "the folded lines went to the file");
    let alone = d.join("alone.svg");
    let o = bin()
        .args(["chains", t(), "--svg"])
        .arg(&alone)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&svg).unwrap() == std::fs::read(&alone).unwrap());
    let stdout = run(&["chains", t()]).stdout;
    assert!(!stdout.is_empty());
    assert_eq!(std::fs::read(&folded).unwrap(), stdout);
    fails(
        &["chains", t(), "--folded", "/nonexistent-dir/x.folded"],
        "creating /nonexistent-dir/x.folded",
    );
}

/// `--spill-above`: the folded output written out in runs and merged is the output of one
/// aggregate, byte for byte (a busy-server trace with thousands of distinct lines, a run
/// every MiB); a spill directory that cannot be used, or runs that cannot be written, are
/// clear errors.
#[test]
fn spilled_chains_output_is_the_same_and_a_bad_spill_dir_is_an_error() {
    let p = tmpdir("spill").join("busy.zst");
    let out = bin()
        .args([
            "synth",
            "--scenario",
            "busy-server",
            "--events",
            "2000000",
            "-o",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let p = p.to_str().unwrap();
    let whole = run(&["chains", "--unit", "ns", "--spill-above", "0", p]);
    assert!(whole.status.success(), "{}", stderr(&whole));
    let spilled = run(&["chains", "--unit", "ns", "--spill-above", "1", p]);
    assert!(spilled.status.success(), "{}", stderr(&spilled));
    let note = stderr(&spilled);
    assert!(note.contains("runs") && note.contains("merged"), "{note}");
    assert!(whole.stdout.len() > 1 << 20, "{} bytes", whole.stdout.len());
    assert!(spilled.stdout == whole.stdout, "spilled output differs");
    fails(
        &["chains", "--spill-dir", "/nonexistent/spill", t()],
        "cannot write spill runs under /nonexistent/spill",
    );
    // Runs the file system refuses (here a file size limit, EFBIG, as a full disk gives
    // ENOSPC): an error naming the spill file, not a panic and not the output's error.
    let dir = tmpdir("spill-limit");
    let limited = Command::new("sh")
        .args(["-c", "trap '' XFSZ; ulimit -f 8; exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_chainrec"))
        .args(["chains", "--spill-above", "1", "--spill-dir"])
        .args([&dir, Path::new(p)])
        .output()
        .unwrap();
    fails_with(
        &limited,
        "merging the runs spilled to disk (--spill-above): spill run file ",
    );
    let err = stderr(&limited);
    assert!(
        err.contains(&format!("under {}: could not be written", dir.display())),
        "{err}"
    );
}

/// The SVG's subtitle legend names the slate group frames (`GROUP_FILL`) when the graph
/// draws them (`--process-frames`), and only then; the slate fill is on those frames.
#[test]
fn svg_legend_names_group_frames_when_drawn() {
    let d = tmpdir("svg-groups");
    let legend = |extra: &[&str], name: &str| {
        let svg = d.join(name);
        let o = bin()
            .args(["chains", t(), "--svg"])
            .arg(&svg)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(&svg).unwrap()
    };
    let grouped = legend(&["--process-frames"], "grouped.svg");
    assert!(
        grouped.contains("slate = process/cgroup"),
        "no group legend"
    );
    assert!(
        grouped.contains(chainrec_report::svg::GROUP_FILL),
        "no slate frame"
    );
    let plain = legend(&[], "plain.svg");
    assert!(
        !plain.contains("slate = process/cgroup"),
        "a group legend without groups"
    );
}

/// `chains --goroutines` on a trace without goroutine records says how to get them.
#[test]
fn goroutine_chains_of_a_trace_without_go_records_is_an_error() {
    fails(
        &["chains", "--goroutines", t()],
        "no goroutine records in this trace",
    );
}

//! Real-kernel tests of mixed-mode user stacks (issue 35, items 1 and 2): a Java pipeline
//! of three threads on blocking queues (testdata/java/QueueDemo.java: `ticker` sleeps and
//! puts, `relay` takes and puts on, `sink` takes), run with `-XX:+PreserveFramePointer` and
//! a perf map written at exit. The unwind goes through libc and libjvm by CFI, then through
//! the JIT code and the interpreter (anonymous executable memory, no CFI) by frame pointer.
//! JIT frames are named from `/tmp/perf-PID.map`, read again at the process's exit;
//! interpreted frames (the perf map's `Interpreter`) from the JVM's own structures: the
//! frame's `Method*`, named through VMStructs (crates/record/src/java.rs).
//!
//! Checked, for each of three runs: at least 80 % of the sink's chain width names
//! `QueueDemo.sink` in its own level (level 0), and the relay's level (the waker of the
//! sink) names `QueueDemo.relay`. The runs:
//! * compiled: `-Xcomp` with `compileonly` for QueueDemo's methods (they are compiled
//!   before they run, named by the perf map; the JDK's own methods stay interpreted, so the
//!   JVM starts fast). Before item 1, every stack ended in `[unwind: bad return address
//!   above libjvm.so+0x...]` after `Unsafe_Park`, and no Java method appeared at all;
//! * interpreted (`-Xint`): every Java frame named from its `Method*`, and against jstack
//!   (an independent reader of the same JVM): the Java frames jstack prints for the
//!   blocked sink, class and method of each in order, equal those of a recorded stack of
//!   the sink. Before item 2, every one of them was `Interpreter`;
//! * default flags (mixed: interpreted, then compiled as methods get hot).
//!
//! Needs root (or CAP_BPF + CAP_PERFMON): without BPF it skips loudly unless
//! `CHAINREC_REQUIRE_BPF=1`. Needs `javac`, `java` and `jstack`
//! (openjdk-17-jdk-headless): without them it skips loudly unless
//! `CHAINREC_REQUIRE_TOOLS=1`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
mod common;
use chainrec_testkit::bpf::can_record;
use common::{bin, tmpdir, wait_for_pidfile};

/// The recordings of this file run one at a time: two JVMs starting at once on a small
/// machine would each slow the other's pipeline.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// JVM options of every run: frame pointers kept by JIT code, and the perf map at exit.
const BASE_FLAGS: &[&str] = &[
    "-XX:+PreserveFramePointer",
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+DumpPerfMapAtExit",
];

/// The compiled run's further options: QueueDemo's methods compiled before they run.
const COMPILED_FLAGS: &[&str] = &[
    "-Xcomp",
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=compileonly,QueueDemo::*",
];

/// Weights of the folded chains of `thread`: (total, level 0 naming `method`), and of the
/// waker levels of `waker` in them: (total, naming `waker_method`).
fn shares(folded: &str, thread: &str, method: &str, waker: &str, waker_method: &str) -> [u64; 4] {
    let mut s = [0u64; 4];
    for line in folded.lines() {
        let Some((stack, w)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(w) = w.parse::<u64>() else { continue };
        if !stack.starts_with(&format!("{thread};")) {
            continue;
        }
        let levels: Vec<&str> = stack.split(";--;").collect();
        s[0] += w;
        if levels[0].contains(method) {
            s[1] += w;
        }
        // Waker levels run from the waking to the waker's thread name, last.
        if let Some(l) = levels[1..]
            .iter()
            .find(|l| l.rsplit(';').next() == Some(waker))
        {
            s[2] += w;
            if l.contains(waker_method) {
                s[3] += w;
            }
        }
    }
    s
}

/// What a recorded run of the pipeline gave.
struct Run {
    /// `chainrec chains` output (folded chains).
    folded: String,
    /// The recorder's summary (stderr).
    summary: String,
    /// `jstack PID` output while the pipeline ran (empty when not asked for).
    jstack: String,
    /// The recorder's `--summary-json` object.
    summary_json: serde_json::Value,
}

/// A scratch directory `name` with QueueDemo compiled into it, if `tools` (command,
/// argument that succeeds) are all there; otherwise a loud skip.
fn compiled_queue_demo(name: &str, tools: &[(&str, &str)]) -> Option<std::path::PathBuf> {
    use chainrec_testkit::tools::available;
    if !tools.iter().all(|(t, arg)| available(t, arg)) {
        let names: Vec<&str> = tools.iter().map(|t| t.0).collect();
        chainrec_testkit::tools::skip(
            "real_java",
            &format!("one of {names:?} missing (apt-get install openjdk-17-jdk-headless gdb)"),
        );
        return None;
    }
    let dir = tmpdir(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/java/QueueDemo.java");
    let javac = Command::new("javac")
        .arg("-d")
        .arg(&dir)
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        javac.status.success(),
        "javac: {}",
        String::from_utf8_lossy(&javac.stderr)
    );
    Some(dir)
}

/// The JDK's tools every test needs (command, an argument it succeeds with).
const JDK: [(&str, &str); 3] = [
    ("javac", "-version"),
    ("java", "-version"),
    ("jstack", "-h"),
];

/// Record QueueDemo run with `flags` (after [`BASE_FLAGS`]) for `ticks` ticks of 5 ms;
/// with `jstack`, jstack prints the JVM's threads while it runs. None: skipped (no BPF,
/// `jstack PID` of the running pipeline, 300 ms after it wrote its pid file (the threads
/// blocked in their queues by then).
fn jstack_of(pid: u32) -> String {
    std::thread::sleep(Duration::from_millis(300));
    let out = Command::new("jstack")
        .arg(pid.to_string())
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// no JDK).
fn record_pipeline(name: &str, flags: &[&str], ticks: u32, jstack: bool) -> Option<Run> {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_record("real_java") {
        return None;
    }
    let dir = compiled_queue_demo(name, &JDK)?;
    let trace = dir.join("j.zst");
    let pidfile = dir.join("pid");
    let summary_json = dir.join("summary.json");
    let record = bin()
        .args(["record", "--no-samples", "-o"])
        .arg(&trace)
        .arg("--summary-json")
        .arg(&summary_json)
        .arg("--")
        .arg("java")
        .args(BASE_FLAGS)
        .args(flags)
        .arg("-cp")
        .arg(&dir)
        .args(["QueueDemo", &ticks.to_string(), "5"])
        .env("QUEUE_DEMO_PIDFILE", &pidfile)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stacks = String::new();
    if jstack {
        // jstack's view of the JVM while the pipeline runs (the sink blocked in take).
        stacks = jstack_of(wait_for_pidfile(&pidfile));
    }
    let out = record.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "record failed: {summary}");
    eprintln!("{summary}");
    let chains = bin().arg("chains").arg(&trace).output().unwrap();
    assert!(chains.status.success());
    Some(Run {
        folded: String::from_utf8_lossy(&chains.stdout).into_owned(),
        summary,
        jstack: stacks,
        summary_json: serde_json::from_slice(&std::fs::read(&summary_json).unwrap()).unwrap(),
    })
}

/// The sink's level 0 names `QueueDemo.sink` for at least 80 % of its chains' width, and
/// the relay's levels name `QueueDemo.relay` for at least half.
fn assert_pipeline_named(run: &Run, what: &str) {
    let [sink, sink_named, relay, relay_named] = shares(
        &run.folded,
        "sink",
        "QueueDemo.sink",
        "relay",
        "QueueDemo.relay",
    );
    eprintln!(
        "{what}: sink: {sink_named} of {sink} us name QueueDemo.sink at level 0; relay \
         levels: {relay_named} of {relay} us name QueueDemo.relay"
    );
    assert!(
        sink > 0,
        "{what}: no chain of the sink thread:\n{}",
        run.folded
    );
    assert!(
        sink_named * 100 >= sink * 80,
        "{what}: {sink_named} of {sink} us of the sink's chains name QueueDemo.sink at \
         level 0:\n{}",
        run.folded
    );
    assert!(relay > 0, "{what}: the relay never woke the sink");
    assert!(
        relay_named > 0 && relay_named * 2 >= relay,
        "{what}: {relay_named} of {relay} us of the relay's levels name QueueDemo.relay"
    );
    assert!(
        run.summary
            .contains("frames by frame pointer in code without CFI"),
        "{}",
        run.summary
    );
}

/// A Java frame's `class.method`: from a recorded frame as the perf map writes it
/// (`void QueueDemo.sink()`), None for a native frame.
fn java_method(frame: &str) -> Option<&str> {
    let (ret_and_name, _) = frame.split_once('(')?;
    let (ret, name) = ret_and_name.split_once(' ')?;
    (!ret.is_empty() && !name.contains(' ') && name.contains('.') && !name.contains(':'))
        .then_some(name)
}

/// The Java frames jstack prints for `thread`, innermost first, as `class.method`.
fn jstack_frames(dump: &str, thread: &str) -> Vec<String> {
    dump.lines()
        .skip_while(|l| !l.starts_with(&format!("\"{thread}\" ")))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.trim().strip_prefix("at "))
        .filter_map(|f| f.split_once('(').map(|(m, _)| m.to_string()))
        .collect()
}

/// The Java frames (`class.method`, innermost first) of each recorded level 0 of `thread`.
fn recorded_java_stacks(folded: &str, thread: &str) -> Vec<Vec<String>> {
    let mut stacks: Vec<Vec<String>> = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s))
        .filter(|s| s.starts_with(&format!("{thread};")))
        .map(|s| {
            let level0 = s.split(";--;").next().unwrap_or("");
            let user = level0.split(";-;").next().unwrap_or("");
            let mut java: Vec<String> = user
                .split(';')
                .filter_map(java_method)
                .map(str::to_string)
                .collect();
            java.reverse();
            java
        })
        .collect();
    stacks.dedup();
    stacks
}

#[test]
fn java_pipeline_names_its_jit_methods() {
    let Some(run) = record_pipeline("java-compiled", COMPILED_FLAGS, 300, false) else {
        return;
    };
    assert_pipeline_named(&run, "-Xcomp");
}

#[test]
fn java_interpreted_frames_are_named_as_jstack_names_them() {
    let Some(run) = record_pipeline("java-interpreted", &["-Xint"], 600, true) else {
        return;
    };
    assert_pipeline_named(&run, "-Xint");
    assert!(
        run.summary.contains(", 0 not supported, ")
            && run.summary.contains("interpreted frames named"),
        "{}",
        run.summary
    );
    // The same counts in `--summary-json`, for scripts (processes: the pipeline's JVM and
    // jstack's own).
    let java = &run.summary_json["user_unwind"]["java"];
    assert!(java["processes"].as_u64().unwrap() >= 1, "{java}");
    assert_eq!(java["unsupported"], 0, "{java}");
    assert!(
        java["interpreted_frames_named"].as_u64().unwrap() > 0,
        "{java}"
    );
    let spied = jstack_frames(&run.jstack, "sink");
    assert!(
        spied.iter().any(|m| m == "QueueDemo.sink"),
        "jstack did not show the sink blocked:\n{}",
        run.jstack
    );
    let recorded = recorded_java_stacks(&run.folded, "sink");
    eprintln!("jstack's sink: {spied:?}");
    assert!(
        recorded.contains(&spied),
        "no recorded stack of the sink has jstack's Java frames {spied:?}; recorded: {recorded:?}"
    );
}

#[test]
fn java_default_flags_name_interpreted_and_compiled_frames() {
    let Some(run) = record_pipeline("java-default", &[], 300, false) else {
        return;
    };
    assert_pipeline_named(&run, "default flags");
}

/// gdb's Python: the registers and 16 KiB of stack (what the BPF side copies) of the
/// thread named `sink`, written to `$DUMP_DIR`: `regs` (ip sp bp, hex) and `stack`.
const GDB_DUMP_SINK: &str = r#"
import gdb, os
out = os.environ["DUMP_DIR"]
for t in gdb.selected_inferior().threads():
    if t.name == "sink":
        t.switch()
        ip, sp, bp = (int(gdb.parse_and_eval(r)) & (2**64 - 1) for r in ("$pc", "$sp", "$rbp"))
        open(out + "/regs", "w").write("%x %x %x" % (ip, sp, bp))
        open(out + "/stack", "wb").write(bytes(gdb.selected_inferior().read_memory(sp, 16384)))
"#;

/// The consumer's naming of interpreted frames without the BPF side: the sink of an
/// `-Xint` pipeline, blocked in `take`, has its registers and 16 KiB of stack taken by gdb
/// (as the BPF side copies them); the recorder's unwinder walks that copy, and each frame
/// in the interpreter is named from the `Method*` at its fp. The Java frames, class and
/// method of each in order, equal jstack's for the same blocked thread.
///
/// With and without `-XX:+PreserveFramePointer`: the interpreter keeps the rbp chain
/// either way (only compiled code needs the flag).
#[test]
fn interpreted_frames_of_a_stack_taken_by_gdb_are_named_as_jstack_names_them() {
    for flags in [&["-Xint", "-XX:+PreserveFramePointer"][..], &["-Xint"]] {
        if !gdb_taken_sink_stack_is_named(flags) {
            return;
        }
    }
}

/// See [`interpreted_frames_of_a_stack_taken_by_gdb_are_named_as_jstack_names_them`], for
/// the JVM options `flags`. False: skipped (no JDK or gdb).
fn gdb_taken_sink_stack_is_named(flags: &[&str]) -> bool {
    use chainrec_record::java::MethodFrames;
    use chainrec_record::unwind::{ProcMaps, StackCopy, UnwindEnd, UserUnwinder};
    let tools = [JDK[0], JDK[1], JDK[2], ("gdb", "--version")];
    let Some(dir) = compiled_queue_demo("java-gdb", &tools) else {
        return false;
    };
    let pidfile = dir.join("pid");
    let mut java = Command::new("java")
        .args(flags)
        .arg("-cp")
        .arg(&dir)
        // Ticks of 20 ms: the sink waits in take nearly all the time.
        .args(["QueueDemo", "1000", "20"])
        .env("QUEUE_DEMO_PIDFILE", &pidfile)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = wait_for_pidfile(&pidfile);
    let jstack = jstack_of(pid);
    let gdb = Command::new("gdb")
        .args(["-batch", "-nx", "-p", &pid.to_string(), "-ex"])
        .arg(format!("python {GDB_DUMP_SINK}"))
        .env("DUMP_DIR", &dir)
        .output()
        .unwrap();
    let regs = std::fs::read_to_string(dir.join("regs"));
    let stack = std::fs::read(dir.join("stack"));
    let (Ok(regs), Ok(stack)) = (regs, stack) else {
        let _ = java.kill();
        panic!("gdb took no stack of the sink: {gdb:?}");
    };
    let r: Vec<u64> = regs
        .split_whitespace()
        .map(|w| u64::from_str_radix(w, 16).unwrap())
        .collect();
    let copy = StackCopy::new(r[0], r[1], r[2], &stack);
    let mut unwinder = UserUnwinder::new(ProcMaps::default());
    let mut frames = Vec::new();
    let end = unwinder.unwind(pid, 0, copy, &mut frames, None);
    let exports = *unwinder
        .java(pid)
        .expect("libjvm.so's VMStructs exports found");
    let mut methods = MethodFrames::default();
    // Label frames numbered from 1: each new method's name is the next.
    let mut names: Vec<String> = Vec::new();
    let unnamed_frames = frames.clone();
    let t0 = std::time::Instant::now();
    let (named, unnamed) = methods.name_interpreted(
        pid,
        &exports,
        &mut frames,
        unwinder.frame_bps(),
        |addr| copy.read_u64(addr),
        |name| {
            names.push(name);
            names.len() as u64
        },
    );
    let first = t0.elapsed();
    // The consumer's cost per stack once the methods are known (names cached).
    const AGAIN: u32 = 10_000;
    let t0 = std::time::Instant::now();
    for _ in 0..AGAIN {
        let mut again = unnamed_frames.clone();
        methods.name_interpreted(
            pid,
            &exports,
            &mut again,
            unwinder.frame_bps(),
            |addr| copy.read_u64(addr),
            |_| unreachable!("named before"),
        );
    }
    let per_stack = t0.elapsed() / AGAIN;
    let interpreted: Vec<&str> = frames
        .iter()
        .filter_map(|&f| names.get((f as usize).wrapping_sub(1)))
        .map(String::as_str)
        .collect();
    let _ = java.kill();
    let _ = java.wait();
    eprintln!(
        "{flags:?}: unwind {end:?}; interpreted frames: {interpreted:#?}, {unnamed} unnamed; \
         naming took {first:?} the first time (layout and names read), {per_stack:?} per \
         stack after"
    );
    assert_eq!(end, UnwindEnd::Complete, "{frames:x?}");
    assert_eq!(unnamed, 0, "{:?}", methods.first_unsupported);
    assert_eq!(named as usize, interpreted.len());
    let recorded: Vec<&str> = interpreted.iter().filter_map(|n| java_method(n)).collect();
    let spied = jstack_frames(&jstack, "sink");
    assert!(
        spied.iter().any(|m| m == "QueueDemo.sink"),
        "jstack did not show the sink blocked:\n{jstack}"
    );
    assert_eq!(
        recorded, spied,
        "recorded (left) and jstack's (right) Java frames of the sink"
    );
    assert!(
        interpreted.contains(&"void QueueDemo.sink()"),
        "{interpreted:?}"
    );
    true
}

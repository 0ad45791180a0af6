//! Real-kernel test of mixed-mode user stacks (issue 35, item 1): a Java pipeline of three
//! threads on blocking queues (testdata/java/QueueDemo.java: `ticker` sleeps and puts,
//! `relay` takes and puts on, `sink` takes), run with `-XX:+PreserveFramePointer` and a
//! perf map written at exit. The unwind goes through libc and libjvm by CFI, then through
//! the JIT code (anonymous executable memory, no CFI) by frame pointer; the JIT frames are
//! named from `/tmp/perf-PID.map`, read again at the process's exit.
//!
//! Checked: at least 80 % of the sink's chain width names `QueueDemo.sink` in its own level
//! (level 0), and the relay's level (the waker of the sink) names `QueueDemo.relay`. Before,
//! every stack ended in `[unwind: bad return address above libjvm.so+0x...]` after
//! `Unsafe_Park`, and no Java method appeared at all.
//!
//! `-Xcomp` with `compileonly` for QueueDemo's methods: they are compiled before they run
//! (a Java method is named only when it is JIT-compiled; interpreted frames say
//! `Interpreter`), and the JDK's own methods stay interpreted, so the JVM starts fast.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON): without BPF it skips loudly unless
//! `CHAINREC_REQUIRE_BPF=1`. Needs `javac` and `java` (openjdk-17-jdk-headless): without
//! them it skips loudly unless `CHAINREC_REQUIRE_TOOLS=1`.

use std::path::Path;
use std::process::Command;
mod common;
use chainrec_testkit::bpf::can_record;
use common::{bin, tmpdir};

/// The JVM options of the recorded run.
const JAVA_FLAGS: &[&str] = &[
    "-XX:+PreserveFramePointer",
    "-Xcomp",
    "-XX:CompileCommand=quiet",
    "-XX:CompileCommand=compileonly,QueueDemo::*",
    "-XX:+UnlockDiagnosticVMOptions",
    "-XX:+DumpPerfMapAtExit",
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

#[test]
fn java_pipeline_names_its_jit_methods() {
    if !can_record("real_java") {
        return;
    }
    use chainrec_testkit::tools::available;
    if !available("javac", "-version") || !available("java", "-version") {
        chainrec_testkit::tools::skip(
            "real_java",
            "javac/java missing (apt-get install openjdk-17-jdk-headless)",
        );
        return;
    }
    let dir = tmpdir("java-pipeline");
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
    let trace = dir.join("j.zst");
    let out = bin()
        .args(["record", "--no-samples", "-o"])
        .arg(&trace)
        .arg("--")
        .arg("java")
        .args(JAVA_FLAGS)
        .arg("-cp")
        .arg(&dir)
        .args(["QueueDemo", "300", "5"])
        .output()
        .unwrap();
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record failed: {summary}");
    eprintln!("{summary}");
    let chains = bin().arg("chains").arg(&trace).output().unwrap();
    assert!(chains.status.success());
    let folded = String::from_utf8_lossy(&chains.stdout);
    let [sink, sink_named, relay, relay_named] = shares(
        &folded,
        "sink",
        "QueueDemo.sink",
        "relay",
        "QueueDemo.relay",
    );
    eprintln!(
        "sink: {sink_named} of {sink} us name QueueDemo.sink at level 0; relay levels: \
         {relay_named} of {relay} us name QueueDemo.relay"
    );
    assert!(sink > 0, "no chain of the sink thread:\n{folded}");
    assert!(
        sink_named * 100 >= sink * 80,
        "{sink_named} of {sink} us of the sink's chains name QueueDemo.sink at level 0"
    );
    assert!(relay > 0, "the relay never woke the sink");
    assert!(
        relay_named > 0 && relay_named * 2 >= relay,
        "{relay_named} of {relay} us of the relay's levels name QueueDemo.relay"
    );
    assert!(
        summary.contains("frames by frame pointer in code without CFI"),
        "{summary}"
    );
}

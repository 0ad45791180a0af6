//! Real-kernel test of JIT frames named from a jitdump file (issue 35, item 1): Node runs
//! testdata/node/consumer.js with `--perf-prof --interpreted-frames-native-stack` (as
//! Node's guides for perf say), so V8 writes `jit-PID.dump` in its working directory and
//! maps it; no perf map is written. (Without `--interpreted-frames-native-stack`, functions
//! still interpreted all run in `Builtins_InterpreterEntryTrampoline` and cannot be told
//! apart; compiled ones are named either way.) The consumer waits in a synchronous pipe
//! read fed by a shell that sleeps 20 ms between lines. The unwind goes through node's
//! C++ and libuv by CFI and through V8's JIT code by frame pointer; the JIT frames are
//! named from the jitdump's code-load records.
//!
//! Checked: at least 80 % of node's off-CPU time in pipe reads names `waitForLine` (the JS
//! function that reads) with `consumer.js` in the same line. Before, those frames were
//! `[unknown]` (0 %).
//!
//! Needs root (or CAP_BPF + CAP_PERFMON): without BPF it skips loudly unless
//! `CHAINREC_REQUIRE_BPF=1`. Needs `node` (apt-get install nodejs): without it it skips
//! loudly unless `CHAINREC_REQUIRE_TOOLS=1`.

use std::path::Path;
mod common;
use chainrec_testkit::bpf::can_record;
use common::{bin, ok, tmpdir};

#[test]
fn node_jit_frames_are_named_from_its_jitdump() {
    if !can_record("real_node") {
        return;
    }
    if !chainrec_testkit::tools::available("node", "--version") {
        chainrec_testkit::tools::skip("real_node", "node missing (apt-get install nodejs)");
        return;
    }
    let dir = tmpdir("node-jitdump");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/node/consumer.js");
    let trace = dir.join("n.zst");
    let feed = format!(
        "cd {} && (for i in $(seq 60); do sleep 0.02; echo x; done) | \
         node --perf-prof --interpreted-frames-native-stack {}",
        dir.display(),
        script.display()
    );
    ok(
        bin()
            .args(["record", "--no-samples", "-o"])
            .arg(&trace)
            .args(["--", "sh", "-c", &feed]),
        "chainrec record",
    );
    let dumps: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("jit-"))
        .collect();
    assert_eq!(
        dumps.len(),
        1,
        "node --perf-prof wrote no jitdump file in {dir:?}"
    );
    let chains = ok(
        bin()
            .args(["chains", "--unit", "ns", "--comm", "^node$"])
            .arg(&trace),
        "chainrec chains",
    );
    let folded = String::from_utf8_lossy(&chains.stdout);
    let (mut reads, mut named) = (0u64, 0u64);
    for (path, w) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let root = path.split(";--;").next().unwrap();
        if !root.contains("pipe_read") {
            continue;
        }
        let w: u64 = w.parse().unwrap();
        reads += w;
        if root.contains("waitForLine") && root.contains("consumer.js") {
            named += w;
        }
    }
    eprintln!("node: {named} of {reads} ns of pipe-read waits name waitForLine");
    assert!(
        reads > 500_000_000,
        "node waited only {reads} ns in pipe reads:\n{folded}"
    );
    assert!(
        named * 100 >= reads * 80,
        "{named} of {reads} ns of node's pipe-read waits name waitForLine:\n{folded}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

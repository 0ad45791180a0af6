//! Real-kernel test of Go stacks (issue 35, item 3): a channel pipeline
//! (testdata/go/chanpipe.go: receiver <- relay <- producer, the producer sleeping 5 ms),
//! built with the machine's Go (Debian 12: 1.19, frame pointers on, `.symtab` kept).
//!
//! Checked:
//! - a parked goroutine's stack, taken on its M's g0 stack, goes through `runtime.mcall`
//!   into the goroutine's own frames (the frame-pointer walk kept where CFI stops): at
//!   least 90 % of the level-0 waits through `runtime.chanrecv` name `main.receiver` or
//!   `main.relay` and reach `runtime.goexit`;
//! - an M's stack ends at `runtime.mstart`, the thread's entry, with no `[unwind: ...]`
//!   label (it read `[unwind: stack copy too short above …]` before): at least 90 % of the
//!   waits through `runtime.sysmon`.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON): without BPF it skips loudly unless
//! `CHAINREC_REQUIRE_BPF=1`. Needs `go` (apt-get install golang-go): without it it skips
//! loudly unless `CHAINREC_REQUIRE_TOOLS=1`.

use std::path::Path;
use std::process::Command;
mod common;
use chainrec_testkit::bpf::can_record;
use common::{bin, tmpdir};

#[test]
fn go_stacks_reach_goroutine_frames_and_thread_entries() {
    if !can_record("real_go") {
        return;
    }
    if !Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        chainrec_testkit::tools::skip("real_go", "go missing (apt-get install golang-go)");
        return;
    }
    let dir = tmpdir("go-chanpipe");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/go/chanpipe.go");
    let exe = dir.join("chanpipe");
    let build = Command::new("go")
        .args(["build", "-o"])
        .arg(&exe)
        .arg(&src)
        .env("GOCACHE", dir.join("gocache"))
        .env("GO111MODULE", "off")
        .output()
        .unwrap();
    assert!(
        build.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    let trace = dir.join("g.zst");
    let out = bin()
        .args(["record", "--no-samples", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let chains = bin()
        .args(["chains", "--unit", "ns", "--comm", "^chanpipe$"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(chains.status.success());
    let folded = String::from_utf8_lossy(&chains.stdout);
    let [mut recv, mut recv_named, mut sysmon, mut sysmon_clean] = [0u64; 4];
    for (path, w) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let root = path.split(";--;").next().unwrap();
        let w: u64 = w.parse().unwrap();
        if root.contains("runtime.chanrecv") {
            recv += w;
            if (root.contains(";main.receiver;") || root.contains(";main.relay;"))
                && root.contains("runtime.goexit")
            {
                recv_named += w;
            }
        }
        if root.contains("runtime.sysmon") {
            sysmon += w;
            if !root.contains("[unwind:") && root.contains("runtime.mstart") {
                sysmon_clean += w;
            }
        }
    }
    eprintln!(
        "chanpipe: {recv_named} of {recv} ns through chanrecv name main.*; \
         {sysmon_clean} of {sysmon} ns through sysmon end at runtime.mstart"
    );
    assert!(
        recv > 100_000_000,
        "few channel waits ({recv} ns):\n{folded}"
    );
    assert!(
        recv_named * 10 >= recv * 9,
        "{recv_named} of {recv} ns of channel waits reach the goroutine's frames:\n{folded}"
    );
    assert!(sysmon > 0, "no sysmon wait:\n{folded}");
    assert!(
        sysmon_clean * 10 >= sysmon * 9,
        "{sysmon_clean} of {sysmon} ns of sysmon's waits end at runtime.mstart:\n{folded}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

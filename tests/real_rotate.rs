//! Real-kernel rotated recording read as one: `record --rotate 500ms` of the built-in chain
//! workload (cr-timer -> pipe -> cr-relay -> pipe -> cr-sink, 3.5 s) writes ≥ 3 files;
//! `chains` of the set (a shell glob's list of files, or the directory) has the
//! workload's chain with the sink's off-CPU time as the workload measured it, waits that
//! span a file boundary keep their chain, and `info` of the set reports the whole
//! duration and the events and losses of all files summed.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON). Without it the test prints a loud SKIP and
//! passes, unless `CHAINREC_REQUIRE_BPF=1`, in which case it fails.

mod common;
use chainrec_format::TraceReader;
use chainrec_testkit::bpf::{can_record, skip as skip_bpf};
use common::{bin, stderr, tmpdir};
use std::path::PathBuf;

fn run(args: &[&str], traces: &[PathBuf]) -> String {
    String::from_utf8(common::run_on(args, traces)).expect("utf-8 output")
}

#[test]
fn a_rotated_recording_reads_as_one() {
    if !can_record("real_rotate") {
        return;
    }
    let dir = tmpdir("real-rotate");
    let json = dir.join("workload.json");
    let out = bin()
        .args(["record", "-o"])
        .arg(dir.join("r.zst"))
        .args(["--rotate", "500ms", "--stacks", "lazy", "--"])
        .arg(env!("CARGO_BIN_EXE_chainrec"))
        .args(["workload", "--duration", "3.5", "--json"])
        .arg(&json)
        .output()
        .expect("run chainrec record");
    if !out.status.success() {
        let err = stderr(&out);
        if err.contains("ermission") || err.contains("EPERM") || err.contains("not permitted") {
            skip_bpf("real_rotate", &format!("BPF not permitted: {}", err.trim()));
            return;
        }
        panic!("chainrec record failed: {err}");
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "zst"))
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let sink_tid = report["sink"]["tid"].as_u64().unwrap();
    let sink_blocked = report["sink"]["blocked_ns"].as_u64().unwrap();
    assert!(
        sink_blocked > 2_500_000_000,
        "workload ran too short: {report}"
    );

    // The chain, over the whole recording: the sink's off-CPU time in the set is what the
    // workload measured in its read() calls (a few ms of its own scheduling aside), and
    // almost all of it is explained by relay <- timer (<- [hardirq: timer]).
    let tid = sink_tid.to_string();
    let folded = run(&["chains", "-t", &tid, "--unit", "ns"], &files);
    assert_eq!(
        folded,
        run(
            &["chains", "-t", &tid, "--unit", "ns"],
            std::slice::from_ref(&dir)
        )
    );
    let mut total = 0u64;
    let mut chain = 0u64;
    let mut to_irq = 0u64;
    // The sink's and the relay's run-queue time behind an idle CPU (their wakeup latency:
    // true, not the timer's; 11 % of the sink's weight on this project's VMs in one CI run
    // of tests/real_chain.rs): checked apart, and the 90 % is of the rest.
    let mut behind_idle = 0u64;
    for line in folded.lines() {
        let (stack, w) = line.rsplit_once(' ').unwrap();
        let w: u64 = w.parse().unwrap();
        total += w;
        if stack.ends_with(";--;[run queue];[idle]") && !stack.contains(";cr-timer;") {
            behind_idle += w;
        }
        // relay <- timer, then the timer's interrupt, or its own run-queue or on-CPU time.
        let pos = |name: &str| stack.find(name);
        if let (Some(r), Some(t)) = (pos(";cr-relay;"), pos(";cr-timer;")) {
            if r < t {
                chain += w;
                to_irq += if stack.ends_with("[hardirq: timer]") {
                    w
                } else {
                    0
                };
            }
        }
    }
    let rel = (total as f64 - sink_blocked as f64).abs() / sink_blocked as f64;
    assert!(
        rel < 0.03,
        "sink off-CPU in the set {total} ns vs measured {sink_blocked} ns"
    );
    assert!(
        behind_idle * 4 <= total,
        "the sink's and relay's wakeup latency holds {behind_idle} of {total} ns:\n{folded}"
    );
    assert!(
        chain as f64 >= 0.9 * (total - behind_idle) as f64,
        "timer chain holds {chain} of {total} ns ({behind_idle} ns wakeup latency aside):\n{folded}"
    );
    assert!(
        to_irq as f64 >= 0.5 * total as f64,
        "down to the timer interrupt: {to_irq} of {total} ns:\n{folded}"
    );

    // Waits of the sink across a file boundary: whole, with the relay as waker. A file
    // ends at its last event, and the next starts there; that last event is often the
    // sink's own switch-out (the end of a burst), so a wait spanning the boundary may
    // start exactly at it: `out <= b`.
    let boundaries: Vec<u64> = files[..files.len() - 1]
        .iter()
        .map(|f| TraceReader::open(f).unwrap().meta().end_ns)
        .collect();
    let waits = run(&["waits", "--json", "--no-dedup", "-t", &tid], &files);
    let spanning = waits
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|w| {
            let (Some(out), Some(back)) = (w["switch_out_ns"].as_u64(), w["switch_in_ns"].as_u64())
            else {
                return false;
            };
            boundaries.iter().any(|&b| out <= b && b < back)
        })
        .filter(|w| w["hops"][0]["waker_comm"] == "cr-relay")
        .count();
    eprintln!("sink waits spanning the boundaries {boundaries:?}: {spanning}");
    assert!(
        spanning >= 1,
        "no sink wait across the boundaries {boundaries:?}"
    );

    // info: the whole duration, and every file's events and losses, summed.
    let info = |t: &[PathBuf]| -> serde_json::Value {
        serde_json::from_str(&run(&["info", "--json", "--verify"], t)).unwrap()
    };
    let set = info(&files);
    let per_file: Vec<serde_json::Value> = files
        .iter()
        .map(|f| info(std::slice::from_ref(f)))
        .collect();
    let sum = |key: &str| -> u64 { per_file.iter().map(|j| j[key].as_u64().unwrap()).sum() };
    assert_eq!(set["events"].as_u64(), Some(sum("events")));
    assert_eq!(set["duration_ns"].as_u64(), Some(sum("duration_ns")));
    assert!(
        set["duration_ns"].as_u64().unwrap() >= 3_400_000_000,
        "{set}"
    );
    assert_eq!(set["first_ts"], per_file[0]["first_ts"]);
    assert_eq!(set["last_ts"], per_file[per_file.len() - 1]["last_ts"]);
    for (kind, n) in set["events_by_kind"].as_object().unwrap() {
        let want: u64 = per_file
            .iter()
            .map(|j| j["events_by_kind"][kind].as_u64().unwrap_or(0))
            .sum();
        assert_eq!(n.as_u64(), Some(want), "events of kind {kind}");
    }
    for (cause, n) in set["lost"].as_object().unwrap() {
        let want: u64 = per_file
            .iter()
            .map(|j| j["lost"][cause].as_u64().unwrap())
            .sum();
        assert_eq!(n.as_u64(), Some(want), "lost {cause}");
    }
}

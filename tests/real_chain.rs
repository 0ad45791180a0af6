//! Real-kernel chain test: record the built-in chain workload (cr-timer -> pipe ->
//! cr-relay -> pipe -> cr-sink) with BPF, rebuild the chains, and check that the sink's
//! waits are explained by cr-sink <- cr-relay <- cr-timer <- [hardirq: timer], with the
//! sink's off-CPU time inside its read() calls within 0.5 % of what the workload measured
//! itself (wall time in the calls minus the thread's own CPU time in them).
//!
//! Needs root (or CAP_BPF + CAP_PERFMON). Without it the test prints a loud SKIP and
//! passes, unless `CHAINREC_REQUIRE_BPF=1`, in which case it fails.

use chainrec_chain::{Config, Engine, Filter, NodeTable, WaitRecord};
use chainrec_format::TraceReader;
mod common;
use chainrec_testkit::bpf::{can_record, skip as skip_bpf};
use common::tmpdir;
use std::process::Command;

/// The real-kernel tests of this file run one at a time: the mixed workload's spinners
/// would otherwise load the machine under the pipe chain's recording.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn sink_chain_down_to_timer_irq() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_record("real_chain") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_chainrec");
    let dir = tmpdir("workload");
    let trace = dir.join("workload.zst");
    let json = dir.join("workload.json");
    let out = Command::new(bin)
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--stacks", "lazy", "--"])
        .arg(bin)
        .args(["workload", "--duration", "2", "--json"])
        .arg(&json)
        .output()
        .expect("run chainrec record");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("ermission") || err.contains("EPERM") || err.contains("not permitted") {
            skip_bpf("real_chain", &format!("BPF not permitted: {}", err.trim()));
            return;
        }
        panic!("chainrec record failed: {err}");
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("workload json"))
            .expect("parse json");
    let sink_rep: chainrec_record::workload::ThreadReport =
        serde_json::from_value(report["sink"].clone()).expect("sink report");
    let sink_tid = sink_rep.tid;
    let sink_blocked = sink_rep.blocked_ns;
    assert!(
        sink_blocked > 1_000_000_000,
        "workload ran too short: {report}"
    );

    let reader = TraceReader::open(&trace).expect("open trace");
    let cfg = Config {
        dedup: false,
        filter: Filter {
            threads: chainrec_format::ThreadSelector {
                tids: vec![sink_tid],
                ..Default::default()
            },
            ..Filter::default()
        },
        ..Config::default()
    };
    let mut engine = Engine::new(reader.tables(), reader.meta(), cfg);
    // Per chain shape (names of the hops), the sink's blocked time.
    let mut by_shape: std::collections::BTreeMap<Vec<String>, u64> = Default::default();
    let mut blocked = 0u64;
    // Every off-CPU interval of the sink (blocked or preempted), in emission order.
    let mut off: Vec<(u64, u64)> = Vec::new();
    let mut sink = |w: &WaitRecord, nodes: &NodeTable| {
        if let Some(i) = w.switch_in_ns {
            off.push((w.switch_out_ns, i));
        }
        let Some(b) = w.blocked_ns() else { return };
        blocked += b;
        let shape = w
            .main_chain()
            .into_iter()
            .map(|k| nodes.get(w.hops[k].node).name().into_owned())
            .collect();
        *by_shape.entry(shape).or_insert(0) += b;
    };
    reader
        .for_each_chunk::<chainrec_format::FormatError>(0..reader.chunks().len(), true, |evs| {
            engine.process(evs, &mut sink);
            Ok(())
        })
        .expect("decode");
    engine.finish(&mut sink);
    // The folded `chains` view, as a user runs it, must show the same chain: its heaviest
    // line for the sink is cr-sink's off-CPU stack, then cr-relay, cr-timer and the timer
    // interrupt, levels separated by `--`.
    let folded = Command::new(env!("CARGO_BIN_EXE_chainrec"))
        .args(["chains", "-t", &sink_tid.to_string()])
        .arg(&trace)
        .output()
        .expect("run chainrec chains");
    assert!(
        folded.status.success(),
        "chainrec chains failed: {folded:?}"
    );
    let text = String::from_utf8(folded.stdout).expect("folded output is UTF-8");
    // Lines fragment (user frames differ between waits), so sum the weight per chain shape:
    // the blocked thread, then the last frame (comm or metal label) of each waker level.
    let mut folded_shapes: std::collections::BTreeMap<Vec<String>, u64> = Default::default();
    let mut folded_total = 0u64;
    // The heaviest line of the whole chain: on a loaded machine some of the sink's or the
    // relay's waits are shorter than the lazy-stack threshold and draw as `[no stack: wait
    // < 100us]`, so an arbitrary line of that shape need not carry the frames checked below.
    let mut full_chain_line: Option<(u64, &str)> = None;
    for (path, w) in text.lines().filter_map(|l| l.rsplit_once(' ')) {
        let w: u64 = w.parse().expect("folded weight");
        let levels: Vec<&str> = path.split(";--;").collect();
        let mut shape = vec![levels[0].split(';').next().unwrap_or("").to_string()];
        shape.extend(
            levels[1..]
                .iter()
                .map(|l| l.rsplit(';').next().unwrap_or("").to_string()),
        );
        if shape == ["cr-sink", "cr-relay", "cr-timer", "[hardirq: timer]"]
            && full_chain_line.is_none_or(|(heaviest, _)| w > heaviest)
        {
            full_chain_line = Some((w, path));
        }
        *folded_shapes.entry(shape).or_insert(0) += w;
        folded_total += w;
    }
    let full_folded = folded_shapes
        .get(&["cr-sink", "cr-relay", "cr-timer", "[hardirq: timer]"].map(String::from)[..])
        .copied()
        .unwrap_or(0);
    // On a loaded machine the timer thread, once its interrupt woke it, also waits in the
    // run queue behind other threads and runs before it writes: that share of its level
    // is `[run queue];HOLDER` and `[on cpu...]` (CHAINS.md), true and below cr-timer. So:
    // ≥ 90 % reaches cr-timer at level 3, and the interrupt holds ≥ 50 % (≈ 84 % on a
    // CI machine with a release build beside it, ~100 % on a quiet one).
    let through_timer: u64 = (folded_shapes.iter())
        .filter(|(s, _)| s.len() >= 3 && s[..3] == ["cr-sink", "cr-relay", "cr-timer"])
        .map(|(_, w)| w)
        .sum();
    // The sink's and the relay's own run-queue time behind an idle CPU (`[run queue];
    // [idle]` at level 1 or 2: from the waking to the switch-in with nothing else
    // runnable, the wakeup latency) is true and is not the timer's: on this project's VMs
    // it was 11 % of the sink's weight in a CI run (4.6 % at the sink's level, 6.5 % at
    // the relay's), ~0 on a machine with fast idle exits. It is checked apart (at most a
    // quarter), and the 90 % is of the rest.
    let behind_idle: u64 = (folded_shapes.iter())
        .filter(|(s, _)| {
            (s.len() == 2 && s[..] == ["cr-sink", "[idle]"])
                || (s.len() == 3 && s[..] == ["cr-sink", "cr-relay", "[idle]"])
        })
        .map(|(_, w)| w)
        .sum();
    assert!(
        behind_idle * 4 <= folded_total,
        "chains output: the sink's and relay's wakeup latency holds over a quarter of the weight: {folded_shapes:?}"
    );
    assert!(
        through_timer * 10 >= (folded_total - behind_idle) * 9,
        "chains output: at least 90% of the sink's weight (wakeup latency aside) must reach cr-sink <- cr-relay <- cr-timer: {folded_shapes:?}"
    );
    assert!(
        full_folded * 2 >= folded_total,
        "chains output: at least 50% of the sink's weight must end at the timer interrupt: {folded_shapes:?}"
    );
    // And its frames are the real ones: pipe_read off-CPU, pipe_write in both wakers,
    // hrtimer_wakeup under the timer interrupt.
    let (_, line) = full_chain_line.expect("full chain line");
    let levels: Vec<&str> = line.split(";--;").collect();
    assert!(levels[0].contains("pipe_read"), "{line}");
    assert!(levels[1].contains("pipe_write"), "{line}");
    assert!(levels[2].contains("pipe_write"), "{line}");
    assert!(levels[3].contains("hrtimer_wakeup"), "{line}");

    let want: Vec<String> = vec![
        "cr-relay".into(),
        "cr-timer".into(),
        "[hardirq: timer]".into(),
    ];
    let full = by_shape.get(&want).copied().unwrap_or(0);
    off.sort_unstable();
    let offcpu = sink_rep.time_inside_calls(off.iter().copied());
    let measured = sink_blocked - sink_rep.oncpu_ns;
    eprintln!(
        "sink {sink_tid}: blocked {blocked} ns to the waking, {offcpu} ns off-CPU inside read() \
         (workload measured {sink_blocked} ns inside, {} ns of it on a CPU); chains: {by_shape:?}",
        sink_rep.oncpu_ns
    );
    let through_timer: u64 = (by_shape.iter())
        .filter(|(s, _)| s.len() >= 2 && s[..2] == ["cr-relay", "cr-timer"])
        .map(|(_, w)| w)
        .sum();
    assert!(
        through_timer * 10 >= blocked * 9,
        "at least 90% of the sink's blocked time must follow cr-sink <- cr-relay <- cr-timer: {by_shape:?}"
    );
    assert!(
        full * 2 >= blocked,
        "at least 50% of the sink's blocked time must end at cr-timer <- [hardirq: timer]: {by_shape:?}"
    );
    // Time inside read() holds on-CPU time too (entry, return path, the lazy user-stack
    // callback: 2.4 % of it on a loaded CI machine), which no off-CPU interval can show:
    // compare with what the sink measured as not running.
    let diff = (offcpu as f64 - measured as f64).abs() / sink_blocked as f64;
    assert!(
        diff <= 0.005,
        "sink off-CPU inside read() {offcpu} ns vs workload {measured} ns ({sink_blocked} ns \
         wall, {} ns on a CPU): {:.3} % of the wall time apart",
        sink_rep.oncpu_ns,
        diff * 100.0
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mixed shell workload: pipes, sleeps, short-lived processes, wait4 woken by several
/// children in one syscall, a process killed mid-wait, and spinners causing preemptions.
/// The pause in gzip's input makes it wait in a pipe read whatever the load: without it,
/// on a busy machine gzip is the slower side all through and never waits for `head` (CI,
/// with a `chains` run beside it: no pipe-read wait at all).
const MIXED: &str = "\
((head -c 3000000 /dev/urandom; sleep 0.2; head -c 100000 /dev/urandom) | gzip -1 > /dev/null) & \
(for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.02; /bin/true; done) & \
(sleep 0.1 & sleep 0.2 & sleep 0.3 & wait) & \
(for i in 1 2 3; do timeout 0.05 sleep 1; done) & \
(timeout 0.6 sh -c 'while :; do :; done') & \
(timeout 0.6 sh -c 'while :; do :; done') & \
wait";

/// Record MIXED in `mode`; None when BPF is not permitted (skipped loudly).
fn record_mixed(dir: &std::path::Path, mode: &str) -> Option<std::path::PathBuf> {
    let trace = dir.join(format!("mixed-{mode}.zst"));
    let out = Command::new(env!("CARGO_BIN_EXE_chainrec"))
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--stacks", mode, "--", "sh", "-c", MIXED])
        .output()
        .expect("run chainrec record");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("ermission") || err.contains("EPERM") || err.contains("not permitted") {
            skip_bpf("real_chain", &format!("BPF not permitted: {}", err.trim()));
            return None;
        }
        panic!("chainrec record failed: {err}");
    }
    Some(trace)
}

/// Leaf-first kernel frame names of stack `id`.
fn kframes(t: &chainrec_format::Tables, id: chainrec_format::StackId) -> Vec<String> {
    let Some(s) = t.stacks.get(&id) else {
        return vec![];
    };
    s.frames
        .iter()
        .map(|&a| {
            t.symbol(s, a)
                .and_then(|y| y.name.map(str::to_string))
                .unwrap_or_default()
        })
        .collect()
}

/// Labels are true on a real mixed recording: no wait of 1 ms or more says "wait <
/// threshold" (own stacks or its waker's), and lazy and eager off-CPU kernel stacks of
/// pipe reads end in the same frames (no scheduler frames in either).
#[test]
fn mixed_workload_labels_true_and_modes_agree() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_record("real_chain") {
        return;
    }
    let dir = tmpdir("mixed");
    let mut leaves: Vec<std::collections::BTreeSet<String>> = Vec::new();
    for mode in ["lazy", "eager"] {
        let Some(trace) = record_mixed(&dir, mode) else {
            return;
        };
        let reader = TraceReader::open(&trace).expect("open trace");
        let t = reader.tables();
        let cfg = Config {
            dedup: false,
            ..Config::default()
        };
        let mut engine = Engine::new(t, reader.meta(), cfg);
        let mut long = 0u64;
        let mut false_labels = Vec::new();
        let mut pipe_leaves = std::collections::BTreeSet::new();
        let mut sink = |w: &WaitRecord, _: &NodeTable| {
            let skip = chainrec_format::StackId::SKIPPED;
            if w.offcpu_ns().unwrap_or(0) >= 1_000_000 {
                long += 1;
                let hop = w.hops.first();
                let blocked_long = w.blocked_ns().unwrap_or(0) > 100_000;
                if w.kstack == skip
                    || w.ustack == skip
                    || (blocked_long && hop.is_some_and(|h| h.kstack == skip || h.ustack == skip))
                {
                    false_labels.push(format!("{w:?}"));
                }
            }
            let k = kframes(t, w.kstack);
            if k.iter().any(|n| n.ends_with("pipe_read")) {
                pipe_leaves.insert(k[0].clone());
            }
        };
        reader
            .for_each_chunk::<chainrec_format::FormatError>(0..reader.chunks().len(), true, |evs| {
                engine.process(evs, &mut sink);
                Ok(())
            })
            .expect("decode");
        let st = engine.finish(&mut sink);
        eprintln!(
            "{mode}: {long} waits >= 1 ms, {} labelled shorter; stacks: {} missing, {} exiting, \
             {} not captured; pipe-read leaves {pipe_leaves:?}",
            false_labels.len(),
            st.stacks_missing,
            st.stacks_exiting,
            st.stacks_not_captured
        );
        assert!(long >= 20, "{mode}: only {long} waits >= 1 ms recorded");
        assert!(
            false_labels.is_empty(),
            "{mode}: waits >= 1 ms labelled as shorter than the threshold: {false_labels:#?}"
        );
        assert!(!pipe_leaves.is_empty(), "{mode}: no pipe-read wait");
        for l in &pipe_leaves {
            assert!(
                !l.contains("schedule"),
                "{mode}: scheduler frame at the leaf of a pipe read: {pipe_leaves:?}"
            );
        }
        leaves.push(pipe_leaves);
    }
    assert_eq!(
        leaves[0], leaves[1],
        "lazy and eager pipe-read stacks end in different frames"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

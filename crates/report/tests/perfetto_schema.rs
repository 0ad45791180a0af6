//! Every Perfetto export decoded with Perfetto's own generated schema (the PyPI `perfetto`
//! package's `perfetto_trace_pb2`, through tests/perfetto_check.py): no field or enum value
//! it does not know, and the clock, process tree, lost-event and gap tracks as intended.
//! Needs a Python with `perfetto` (`x.sh test` installs it into target/pyvenv); skips
//! loudly without one unless CHAINREC_REQUIRE_TOOLS=1.

use chainrec_format::synth::scenarios;
use chainrec_format::*;
use chainrec_report::perfetto::{self, Slice, SliceTrack};
use chainrec_testkit::events::{switch as sw, waking as wk};
use serde_json::Value;
use std::collections::BTreeMap;

#[path = "support/perfetto_check.rs"]
mod perfetto_check;
use perfetto_check::{check, perfetto_python};

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

fn task(tid: Tid, tgid: Tid, comm: &str, kernel_thread: bool) -> TaskEntry {
    TaskEntry {
        tid,
        tgid,
        comm: Comm::new(comm),
        kernel_thread,
    }
}

/// A trace with every case of the export: a fork and a thread in the trace, a kernel
/// thread, a thread whose leader is not in the table, a lost marker and both gap kinds.
fn gappy() -> MemTrace {
    let mut t = MemTrace::default();
    t.meta.start_ns = S;
    t.meta.end_ns = 2 * S;
    t.meta.clock = chainrec_format::Clock::Monotonic;
    t.meta.clock_offset_ns = 1_795_000_000_000_000_000;
    t.meta.lost.ringbuf_full = 7;
    t.add_tasks(&[
        task(2, 2, "kthreadd", true),
        task(10, 10, "app", false),
        task(11, 10, "app-io", false),
        task(31, 30, "orphan", false), // leader 30 never seen
        task(40, 40, "kworker/0:1", true),
    ])
    .unwrap();
    let evs = [
        sw(S, 0, 0, STATE_RUNNABLE, 10),
        sw(S + MS, 1, 0, STATE_RUNNABLE, 11),
        Event::WakeupNew(WakeupNew {
            ts: S + 2 * MS,
            cpu: 0,
            parent_tid: 10,
            child_tid: 50,
            child_tgid: 50, // a new process, forked by app
        }),
        Event::WakeupNew(WakeupNew {
            ts: S + 3 * MS,
            cpu: 0,
            parent_tid: 10,
            child_tid: 12,
            child_tgid: 10, // a new thread of app
        }),
        Event::Lost(Lost {
            ts: S + 4 * MS,
            cpu: 1,
            count: 7,
            cause: LostCause::RingBufferFull,
        }),
        // app-io's switch-out on CPU 1 was lost; it switches in on CPU 0: running elsewhere.
        sw(S + 10 * MS, 0, 10, STATE_INTERRUPTIBLE, 11),
        // CPU 1 then switches from kworker, which was never switched in there (and the
        // synthetic close left idle): a CPU-sequence gap.
        sw(S + 20 * MS, 1, 40, STATE_INTERRUPTIBLE, 31),
        wk(S + 30 * MS, 0, 11, 10, WakeContext::Task),
        sw(S + 40 * MS, 0, 11, STATE_INTERRUPTIBLE, 10),
    ];
    for e in evs {
        t.push(&e).unwrap();
    }
    t
}

#[test]
fn gaps_parents_and_lost_events_in_the_export() {
    let t = gappy();
    let mut bytes = Vec::new();
    let extra = [SliceTrack {
        name: "critical path".into(),
        slices: BTreeMap::from([(
            10,
            vec![Slice {
                start_ns: S + 10 * MS,
                end_ns: S + 30 * MS,
                name: "blocked".into(),
            }],
        )]),
    }];
    let st = perfetto::export_with_tracks(&t, &mut bytes, &extra).unwrap();
    assert_eq!(
        (
            st.switches,
            st.gaps_running_elsewhere,
            st.gaps_cpu_sequence,
            st.lost_markers,
            st.lost_events,
            st.extra_slices
        ),
        (5, 1, 1, 1, 7, 1)
    );
    // Processes: kthreadd, app, orphan's group 30 (leader unknown: no name), kworker, and
    // 50 forked by app; threads: the table's five and the two created in the trace.
    assert_eq!(
        (st.processes, st.processes_with_parent, st.threads),
        (5, 2, 7)
    );
    assert_eq!(st.threads_without_process, 0);

    let Some(py) = perfetto_python("gaps_parents_and_lost_events_in_the_export") else {
        return;
    };
    let dir = chainrec_testkit::scratch::ScratchDir::new("perfetto-schema");
    let file = dir.path().join("gappy.pftrace");
    std::fs::write(&file, &bytes).unwrap();
    let all = check(&py, std::slice::from_ref(&file));
    let s = &all[file.to_str().unwrap()];
    assert_eq!(s["primary_trace_clock"], "BUILTIN_CLOCK_MONOTONIC");
    assert_eq!(
        s["clocks"],
        serde_json::json!([
            [64, S],
            ["BUILTIN_CLOCK_MONOTONIC", S],
            ["BUILTIN_CLOCK_REALTIME", 1_795_000_001_000_000_000u64]
        ])
    );
    // Every timestamped packet is on the sequence clock the snapshot defines.
    assert_eq!(s["packet_clock_ids"], serde_json::json!([64]));
    assert_eq!(
        s["ftrace_clocks"],
        serde_json::json!(["FTRACE_CLOCK_GLOBAL"])
    );
    let procs: Vec<(i64, Option<i64>, bool)> = s["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pid"].as_i64().unwrap(),
                p["ppid"].as_i64(),
                p["kthread"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        procs,
        vec![
            (2, None, true),
            (10, None, false),
            (30, None, false),
            (40, Some(2), true),
            (50, Some(10), false)
        ]
    );
    // Five recorded switches plus two synthetic ones.
    assert_eq!(s["events"]["sched_switch"], 7);
    assert_eq!(s["lost_bundles"], 1);
    let names: Vec<&str> = s["tracks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        vec![
            perfetto::TRACK_LOST,
            perfetto::TRACK_LOST_TOTAL,
            "chainrec: switch gaps CPU 1",
            perfetto::TRACK_RECORDING,
            "critical path"
        ]
    );
    assert_eq!(s["tracks"][4]["thread"], serde_json::json!([10, 10]));
    // Two gap slices, one critical-path slice; the lost instant and the recording instant.
    assert_eq!(s["track_events"]["TYPE_SLICE_BEGIN"], 3);
    assert_eq!(s["track_events"]["TYPE_SLICE_END"], 3);
    assert_eq!(s["track_events"]["TYPE_INSTANT"], 2);
    assert_eq!(s["track_events"]["TYPE_COUNTER"], 1);
    let ev_names = s["track_event_names"].to_string();
    for needle in [
        "lost 7 events (ring buffer full)",
        "gap: switch-out lost (ran on) app-io 11",
        "gap: switch events lost (was running) swapper 0",
        "chainrec recording: 7 events lost, 2 switch gaps",
    ] {
        assert!(ev_names.contains(needle), "{needle} not in {ev_names}");
    }
}

#[test]
fn every_synthetic_scenario_decodes_with_perfettos_schema() {
    let Some(py) = perfetto_python("every_synthetic_scenario_decodes_with_perfettos_schema") else {
        return;
    };
    let dir = chainrec_testkit::scratch::ScratchDir::new("perfetto-scenarios");
    let mut files = Vec::new();
    let mut stats = BTreeMap::new();
    for sc in scenarios() {
        let t = chainrec_testkit::scenario::generate(sc.name, 3000);
        let mut bytes = Vec::new();
        let st = perfetto::export(&t, &mut bytes).unwrap();
        let file = dir.path().join(format!("{}.pftrace", sc.name));
        std::fs::write(&file, &bytes).unwrap();
        stats.insert(file.to_str().unwrap().to_string(), st);
        files.push(file);
    }
    let all = check(&py, &files);
    assert_eq!(all.len(), files.len());
    for (file, s) in &all {
        let st = &stats[file];
        assert_eq!(s["unknown_field_count"], 0, "{file}");
        assert_eq!(s["packets"], st.packets, "{file}");
        assert_eq!(
            s["events"]["sched_switch"],
            st.switches + st.gaps(),
            "{file}"
        );
        assert_eq!(s["threads"].as_array().unwrap().len() as u64, st.threads);
        // Every thread's process is in the tree.
        let pids: Vec<&Value> = s["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| &p["pid"])
            .collect();
        for th in s["threads"].as_array().unwrap() {
            assert!(pids.contains(&&th[1]), "{file}: no process for thread {th}");
        }
    }
}

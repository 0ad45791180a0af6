//! Reports on a real BPF recording of the built-in chain workload (needs root; skips
//! loudly otherwise unless CHAINREC_REQUIRE_BPF=1): heat map, Perfetto and pprof exports
//! and top, each checked against the recorded events.

use chainrec_chain::{Collected, Config, Engine, Filter, FoldedSink, Graph, Mode, TraceRef, View};
use chainrec_demo as demo;
use chainrec_format::{Event, TraceReader};
use chainrec_report::heatmap::{self, HeatmapOptions, Metric, Select};
use chainrec_report::top::{TopReport, TopSink};
use chainrec_report::{perfetto, pprof};
use prost::Message;
use std::time::Duration;

#[path = "support/perfetto_check.rs"]
mod perfetto_check;

#[test]
fn reports_on_a_real_recording() {
    if !chainrec_testkit::bpf::can_record("reports_on_a_real_recording") {
        return;
    }
    let dir = chainrec_testkit::scratch::dir("real-reports");
    let o = demo::run(&demo::DemoOptions {
        dir: dir.clone(),
        duration: Duration::from_millis(1500),
        period: Duration::from_millis(2),
        command_line: vec!["real-reports-test".into()],
    })
    .expect("recording the workload");
    let reader = TraceReader::open(&o.trace).unwrap();
    let mem = reader.to_mem().unwrap();
    let [timer, relay, sink] = o.tids;
    let wakings_of = |tid| {
        mem.events
            .iter()
            .filter(|e| matches!(e, Event::Waking(w) if w.target_tid == tid))
            .count() as u64
    };
    let switches = mem
        .events
        .iter()
        .filter(|e| matches!(e, Event::Switch(_)))
        .count();
    let wakings = mem
        .events
        .iter()
        .filter(|e| matches!(e, Event::Waking(_)))
        .count();
    assert!(
        wakings_of(sink) > 100,
        "only {} wakings of cr-sink",
        wakings_of(sink)
    );

    // Heat map: every waking of the sink lands in exactly one cell; the relay is highlighted.
    let opts = HeatmapOptions {
        metric: Metric::Wakeups,
        rows: 100,
        select: Select::tid(sink),
        highlight: None,
        ..Default::default()
    };
    let h = heatmap::compute(&reader, &opts).unwrap();
    assert_eq!(h.total(), wakings_of(sink));
    let opts = HeatmapOptions {
        highlight: Some(Select::comm("^cr-relay$").unwrap()),
        ..Default::default()
    };
    let h = heatmap::compute(&reader, &opts).unwrap();
    assert!(
        h.highlight.iter().sum::<u64>() > 0,
        "cr-relay's off-CPU time is highlighted"
    );
    assert!(h.highlight.iter().zip(&h.cells).all(|(hl, c)| hl <= c));

    // Perfetto: every switch and waking exported, the workload's names present.
    let mut bytes = Vec::new();
    let st = perfetto::export(&reader, &mut bytes).unwrap();
    let trace = perfetto::Trace::decode(bytes.as_slice()).unwrap();
    let ev: Vec<&perfetto::FtraceEvent> = trace
        .packet
        .iter()
        .filter_map(|p| p.ftrace_events.as_ref())
        .flat_map(|b| &b.event)
        .collect();
    // Plus one synthetic switch per gap in the switch sequences (lost events).
    assert_eq!(
        ev.iter().filter(|e| e.sched_switch.is_some()).count() as u64,
        switches as u64 + st.gaps()
    );
    // Every thread has a process; the file decodes with Perfetto's own schema.
    assert_eq!(st.threads_without_process, 0);
    if let Some(py) = perfetto_check::perfetto_python("reports_on_a_real_recording") {
        let file = dir.join("real.pftrace");
        std::fs::write(&file, &bytes).unwrap();
        let s = &perfetto_check::check(&py, std::slice::from_ref(&file))[file.to_str().unwrap()];
        assert_eq!(s["primary_trace_clock"], "BUILTIN_CLOCK_MONOTONIC");
        assert_eq!(s["events"]["sched_switch"], switches as u64 + st.gaps());
    }
    assert_eq!(
        ev.iter().filter(|e| e.sched_waking.is_some()).count(),
        wakings
    );
    assert_eq!(st.switches as usize, switches);
    let sink_wakings: Vec<&perfetto::SchedWaking> = ev
        .iter()
        .filter_map(|e| e.sched_waking.as_ref())
        .filter(|w| w.pid == Some(sink as i32))
        .collect();
    assert_eq!(sink_wakings.len() as u64, wakings_of(sink));
    assert!(sink_wakings
        .iter()
        .all(|w| w.comm.as_deref() == Some("cr-sink")));

    // pprof and top from the engine's record stream over the workload threads.
    let cfg = Config {
        mode: Mode::Bounded,
        max_depth: 16,
        dedup: false,
        filter: Filter {
            threads: chainrec_format::ThreadSelector {
                tids: vec![timer, relay, sink],
                ..Default::default()
            },
            ..Default::default()
        },
        runqueue: true,
        oncpu: Default::default(),
        cgroup_frames: false,
        process_frames: false,
    };
    let mut engine = Engine::new(reader.tables(), reader.meta(), cfg);
    let mut sinks = (
        FoldedSink::new(View::Chains),
        (TopSink::default(), pprof::ProfileSink::new()),
    );
    reader
        .for_each_chunk::<chainrec_format::FormatError>(0..reader.chunks().len(), false, |evs| {
            engine.process(evs, &mut sinks);
            Ok(())
        })
        .unwrap();
    engine.finish(&mut sinks);
    let trace = TraceRef {
        tables: reader.tables(),
        meta: reader.meta(),
        start_ns: reader.meta().start_ns,
    };
    let (graph, waits) = Collected::new(sinks, engine.into_nodes(), trace).unzip();
    let (top_waits, samples) = waits.unzip();
    let folded: Vec<(String, u64)> = Graph::from(graph).folded_ns().into_iter().collect();
    let total: u64 = folded.iter().map(|l| l.1).sum();
    let p = pprof::Profile::of(&samples, &pprof::ProfileInfo::default()).unwrap();
    assert_eq!(
        p.sample.iter().map(|s| s.value[0] as u64).sum::<u64>(),
        total
    );
    let report = TopReport::new(&top_waits, 5);
    assert!(!report.entries.is_empty());
    let sink_entry = report.entries.iter().find(|e| e.tid == sink);
    if let Some(e) = sink_entry {
        assert!(e.count <= wakings_of(sink));
        assert!(e.chain[1..].iter().map(|l| l.ns).sum::<u64>() == e.max_ns);
    }
    let main = report
        .entries
        .iter()
        .chain(o.top.iter())
        .find(|e| e.chain.iter().any(|l| l.who.starts_with("cr-relay")));
    assert!(
        main.is_some(),
        "no chain through cr-relay among the top waits"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

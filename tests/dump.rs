//! `chainrec script` and `chainrec waits`: their NDJSON round-trips every field of the
//! events (read back through `chainrec_format`) and of the engine's wait records; their
//! text output on one small scenario is exact (testdata/golden); bad input fails cleanly.
//! Runs without root: the traces come from `chainrec synth`.

mod common;
use chainrec_chain::{stack_frames, Config, Engine, Mode, WaitRecord};
use chainrec_format::{Event, StackId, TraceReader};
use common::{bin, fails_with, stderr, tmpdir};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// Scenarios that between them have every event kind, every wake context the synthesizer
/// writes, reserved and real stacks, comm changes, forks, exits and a lost marker.
const SCENARIOS: &[&str] = &[
    "pipe-relay",
    "disk-irq",
    "net-softirq",
    "cycle",
    "fork",
    "preemption",
    "comm-change",
    "pretrace",
    "lazy-stacks",
    "oncpu-worker",
];

fn synth(dir: &Path, name: &str, events: u32) -> PathBuf {
    let p = dir.join(format!("{name}.zst"));
    let o = bin()
        .args([
            "synth",
            "--scenario",
            name,
            "--events",
            &events.to_string(),
            "-o",
        ])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    p
}

fn ndjson(args: &[&str], trace: &Path) -> Vec<Value> {
    let o = bin().args(args).arg(trace).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object().unwrap().keys().map(String::as_str).collect()
}

fn set<'a>(k: &[&'a str]) -> BTreeSet<&'a str> {
    k.iter().copied().collect()
}

fn frames(r: &TraceReader, id: u32) -> Value {
    serde_json::to_value(stack_frames(
        r.tables(),
        StackId(id),
        r.meta().stack_threshold_ns,
    ))
    .unwrap()
}

#[test]
fn script_json_round_trips_every_event_field() {
    let d = tmpdir("script-rt");
    let mut kinds = BTreeSet::new();
    for name in SCENARIOS {
        let trace = synth(&d, name, 2000);
        let rows = ndjson(&["script", "--json", "-F"], &trace);
        let r = TraceReader::open(&trace).unwrap();
        let mem = r.to_mem().unwrap();
        assert_eq!(rows.len(), mem.events.len(), "{name}: one row per event");
        let start = if r.meta().start_ns != 0 {
            r.meta().start_ns
        } else {
            mem.events[0].ts()
        };
        // Names as of each event: the task table, then comm events (and a fork's tgid).
        let mut names: HashMap<u32, (String, u32)> = r
            .tables()
            .tasks
            .values()
            .map(|t| (t.tid, (t.comm.to_string(), t.tgid)))
            .collect();
        for (row, ev) in rows.iter().zip(&mem.events) {
            match ev {
                Event::Comm(c) => {
                    names.insert(c.tid, (c.comm.to_string(), c.tgid));
                }
                Event::WakeupNew(n) => {
                    let e = names.entry(n.child_tid).or_insert((String::new(), 0));
                    e.1 = n.child_tgid;
                }
                _ => {}
            }
            let task = |role: &str, tid: u32| {
                let p = |f: &str| {
                    if role.is_empty() {
                        f.to_string()
                    } else {
                        format!("{role}_{f}")
                    }
                };
                let (comm, tgid) = names.get(&tid).cloned().unwrap_or_else(|| {
                    (
                        if tid == 0 {
                            "swapper".into()
                        } else {
                            format!("tid-{tid}")
                        },
                        0,
                    )
                });
                assert_eq!(row[p("tid")], tid, "{name}: {row}");
                assert_eq!(row[p("tgid")], tgid, "{name}: {row}");
                assert_eq!(row[p("comm")], comm.as_str(), "{name}: {row}");
                [p("tid"), p("tgid"), p("comm")]
            };
            let kind = ev.kind().name();
            kinds.insert(kind);
            assert_eq!(row["kind"], kind);
            assert_eq!(row["ts_ns"], ev.ts());
            let rel = (ev.ts() as f64 - start as f64) / 1e9;
            assert!(
                (row["time_s"].as_f64().unwrap() - rel).abs() < 1e-9,
                "{row}"
            );
            let mut want: Vec<String> = ["kind", "ts_ns", "time_s"].map(String::from).into();
            let stacks = |k: u32, u: u32| {
                assert_eq!(row["kstack"], k);
                assert_eq!(row["ustack"], u);
                assert_eq!(row["kframes"], frames(&r, k));
                assert_eq!(row["uframes"], frames(&r, u));
                ["kstack", "ustack", "kframes", "uframes"].map(String::from)
            };
            match ev {
                Event::Switch(s) => {
                    assert_eq!(row["cpu"], s.cpu);
                    assert_eq!(row["prev_state"], s.prev_state);
                    let st = row["prev_state_str"].as_str().unwrap();
                    assert_eq!(st == "R", s.prev_state == 0, "{row}");
                    want.extend(task("prev", s.prev_tid));
                    want.extend(task("next", s.next_tid));
                    want.extend(stacks(s.prev_kstack.0, s.prev_ustack.0));
                    want.extend(["cpu", "prev_state", "prev_state_str"].map(String::from));
                }
                Event::Waking(w) => {
                    assert_eq!(row["cpu"], w.cpu);
                    assert_eq!(row["context"], w.context.label());
                    assert_eq!(row["source"], w.source);
                    match r.tables().irq_sources.get(&w.source) {
                        Some(s) => {
                            assert_eq!(row["source_name"], s.name.as_str());
                            want.push("source_name".into());
                        }
                        None => assert!(row.get("source_name").is_none()),
                    }
                    want.extend(task("waker", w.waker_tid));
                    want.extend(task("target", w.target_tid));
                    want.extend(stacks(w.waker_kstack.0, w.waker_ustack.0));
                    want.extend(["cpu", "context", "source"].map(String::from));
                }
                Event::WakeupNew(n) => {
                    assert_eq!(row["cpu"], n.cpu);
                    assert_eq!(row["child_tgid"], n.child_tgid);
                    want.extend(task("parent", n.parent_tid));
                    want.extend(task("child", n.child_tid));
                    want.push("cpu".into());
                }
                Event::Comm(c) => {
                    let reason = format!("{:?}", c.reason).to_lowercase();
                    assert_eq!(row["reason"], reason.as_str());
                    want.extend(task("", c.tid));
                    want.push("reason".into());
                }
                Event::Exit(x) => want.extend(task("", x.tid)),
                Event::OffCpuStacks(o) => {
                    want.extend(task("", o.tid));
                    want.extend(stacks(o.kstack.0, o.ustack.0));
                }
                Event::Sample(x) => {
                    assert_eq!(row["cpu"], x.cpu);
                    want.extend(task("", x.tid));
                    want.extend(stacks(x.kstack.0, x.ustack.0));
                    want.push("cpu".into());
                }
                Event::Lost(l) => {
                    assert_eq!(row["cpu"], l.cpu);
                    assert_eq!(row["count"], l.count);
                    let cause = match l.cause {
                        chainrec_format::LostCause::RingBufferFull => "ringbuf_full",
                        chainrec_format::LostCause::Malformed => "malformed",
                        chainrec_format::LostCause::OutOfOrder => "out_of_order",
                    };
                    assert_eq!(row["cause"], cause);
                    want.extend(["cpu", "count", "cause"].map(String::from));
                }
            }
            // No field left unchecked, none missing.
            let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
            assert_eq!(keys(row), want, "{name}: {row}");
        }
    }
    assert_eq!(
        kinds,
        set(&[
            "switch",
            "waking",
            "wakeup_new",
            "comm",
            "exit",
            "offcpu_stacks",
            "lost",
            "sample"
        ]),
        "the scenarios cover every kind"
    );
}

/// The engine's records for `trace` with the configuration `waits` uses by default.
fn records(r: &TraceReader, dedup: bool) -> (Vec<WaitRecord>, chainrec_chain::NodeTable) {
    let mem = r.to_mem().unwrap();
    let cfg = Config {
        dedup,
        mode: Mode::Bounded,
        ..Config::default()
    };
    let mut engine = Engine::new(&mem.tables, &mem.meta, cfg);
    let mut recs = Vec::new();
    let mut sink = |w: &WaitRecord, _: &chainrec_chain::NodeTable| recs.push(w.clone());
    engine.process(&mem.events, &mut sink);
    engine.finish(&mut sink);
    (recs, engine.nodes().clone())
}

const NODE_KEYS: &[&str] = &["node", "node_id", "kstack", "ustack", "kframes", "uframes"];

fn check_node(
    v: &Value,
    id: u32,
    k: StackId,
    u: StackId,
    nodes: &chainrec_chain::NodeTable,
    r: &TraceReader,
) {
    assert_eq!(v["node_id"], id);
    assert_eq!(v["node"], nodes.get(id).name().as_ref());
    assert_eq!(v["kstack"], k.0);
    assert_eq!(v["ustack"], u.0);
    assert_eq!(v["kframes"], frames(r, k.0));
    assert_eq!(v["uframes"], frames(r, u.0));
}

#[test]
fn waits_json_round_trips_every_record_field_and_checks_against_script() {
    let d = tmpdir("waits-rt");
    for name in SCENARIOS {
        let trace = synth(&d, name, 2000);
        let r = TraceReader::open(&trace).unwrap();
        // --hidden with dedup on: every record, `root` as the engine decided it.
        let rows = ndjson(&["waits", "--json", "-F", "--hidden"], &trace);
        let (recs, nodes) = records(&r, true);
        assert_eq!(rows.len(), recs.len(), "{name}: one row per record");
        let events = ndjson(&["script", "--json"], &trace);
        let has = |kind: &str, ts: u64, role: &str, tid: u32| {
            events
                .iter()
                .any(|e| e["kind"] == kind && e["ts_ns"] == ts && e[format!("{role}_tid")] == tid)
        };
        let start = r.meta().start_ns;
        for (row, w) in rows.iter().zip(&recs) {
            let opt = |v: Option<u64>| v.map_or(Value::Null, Value::from);
            assert_eq!(row["tid"], w.tid);
            assert_eq!(row["tgid"], w.tgid);
            assert_eq!(row["comm"], w.comm.to_string().as_str());
            assert_eq!(row["kernel_thread"], w.kernel_thread);
            assert_eq!(row["state"], w.state);
            assert!(row["state_str"].is_string());
            assert_eq!(row["switch_out_ns"], w.switch_out_ns);
            let rel = (w.switch_out_ns as f64 - start as f64) / 1e9;
            assert!((row["time_s"].as_f64().unwrap() - rel).abs() < 1e-9);
            assert_eq!(row["wake_ns"], opt(w.wake_ns));
            assert_eq!(row["switch_in_ns"], opt(w.switch_in_ns));
            assert_eq!(row["blocked_ns"], opt(w.blocked_ns()));
            assert_eq!(row["runq_ns"], opt(w.runq_ns()));
            assert_eq!(row["offcpu_ns"], opt(w.offcpu_ns()));
            assert_eq!(row["attributed_ns"], w.attributed_ns());
            check_node(row, w.node, w.kstack, w.ustack, &nodes, &r);
            assert_eq!(row["truncated"], w.truncated);
            assert_eq!(row["cycle"], w.cycle);
            assert_eq!(row["lost"], w.lost);
            assert_eq!(row["root"], w.root);
            assert_eq!(row["mode"], "bounded");
            let mut want = set(&[
                "tid",
                "tgid",
                "comm",
                "kernel_thread",
                "state",
                "state_str",
                "switch_out_ns",
                "time_s",
                "wake_ns",
                "switch_in_ns",
                "blocked_ns",
                "runq_ns",
                "offcpu_ns",
                "attributed_ns",
                "hops",
                "runq",
                "truncated",
                "cycle",
                "lost",
                "root",
                "mode",
            ]);
            want.extend(NODE_KEYS);
            if !w.oncpu.is_empty() {
                want.insert("oncpu");
            }
            assert_eq!(keys(row), want, "{name}: {row}");
            // On-CPU parts, when there are any: level, ns and the on-CPU node with its
            // sampled stacks.
            let oncpu = row["oncpu"].as_array().map_or(&[][..], |a| &a[..]);
            assert_eq!(oncpu.len(), w.oncpu.len(), "{name}: {row}");
            for (pv, p) in oncpu.iter().zip(&w.oncpu) {
                assert_eq!(pv["level"], p.level);
                assert_eq!(pv["ns"], p.ns);
                let n = nodes.get(p.node);
                check_node(pv, p.node, n.kstack, n.ustack, &nodes, &r);
                let mut want = set(&["level", "ns"]);
                want.extend(NODE_KEYS);
                assert_eq!(keys(pv), want);
            }
            let runq = row["runq"].as_array().unwrap();
            assert_eq!(runq.len(), w.runq.len(), "{name}: {row}");
            for (pv, p) in runq.iter().zip(&w.runq) {
                assert_eq!(pv["level"], p.level);
                assert_eq!(pv["holder_id"], p.holder);
                assert_eq!(pv["holder"], nodes.get(p.holder).name().as_ref());
                assert_eq!(pv["ns"], p.ns);
                assert_eq!(keys(pv), set(&["level", "holder", "holder_id", "ns"]));
            }
            // Level 0's run-queue parts are the whole runnable part after the waking.
            if !w.runq.is_empty() && !w.preempted() {
                assert_eq!(Some(w.runq_ns_of(0)), w.runq_ns(), "{name}: {row}");
            }
            let hops = row["hops"].as_array().unwrap();
            assert_eq!(hops.len(), w.hops.len());
            for (i, (hv, h)) in hops.iter().zip(&w.hops).enumerate() {
                assert_eq!(hv["level"], i + 1);
                assert_eq!(hv["ts_ns"], h.ts);
                assert_eq!(hv["waker_tid"], h.waker_tid);
                assert_eq!(hv["waker_tgid"], h.waker_tgid);
                assert_eq!(hv["waker_comm"], h.waker_comm.to_string().as_str());
                assert_eq!(hv["context"], h.context.label());
                assert_eq!(hv["metal"], h.metal);
                assert_eq!(hv["ns"], h.ns);
                check_node(hv, h.node, h.kstack, h.ustack, &nodes, &r);
                let mut want = set(&[
                    "level",
                    "ts_ns",
                    "waker_tid",
                    "waker_tgid",
                    "waker_comm",
                    "context",
                    "metal",
                    "ns",
                ]);
                want.extend(NODE_KEYS);
                assert_eq!(keys(hv), want, "{name}: {hv}");
                // By hand: every level is a waking in `script` at that time by that waker.
                assert!(has("waking", h.ts, "waker", h.waker_tid), "{name}: {hv}");
            }
            // By hand: the wait's switch-out, waking and switch-in are events of its thread
            // (a wait begun by a fork's wakeup_new has no switch-out).
            if w.state != 0 || has("switch", w.switch_out_ns, "prev", w.tid) {
                assert!(
                    has("switch", w.switch_out_ns, "prev", w.tid),
                    "{name}: {row}"
                );
            }
            if let Some(t) = w.wake_ns {
                assert!(has("waking", t, "target", w.tid), "{name}: {row}");
            }
            if let Some(t) = w.switch_in_ns {
                assert!(has("switch", t, "next", w.tid), "{name}: {row}");
            }
            if w.mode == Mode::Bounded && !w.preempted() {
                if let Some(b) = w.blocked_ns() {
                    assert_eq!(
                        w.attributed_ns(),
                        b,
                        "{name}: levels sum to the blocked time"
                    );
                }
            }
        }
        // Default output: the roots only, in the same order.
        let roots = ndjson(&["waits", "--json", "-F"], &trace);
        let want: Vec<&Value> = rows.iter().filter(|v| v["root"] == true).collect();
        assert!(
            roots.iter().eq(want),
            "{name}: default output is not the roots"
        );
    }
}

fn golden(name: &str, got: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/golden")
        .join(name);
    let want = chainrec_testkit::golden::expected(&path, got);
    assert!(got == want, "{} differs:\n{got}", path.display());
}

fn text(args: &[&str], trace: &Path) -> String {
    let o = bin().args(args).arg(trace).output().unwrap();
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn text_output_of_one_relay_period_is_exact() {
    let d = tmpdir("golden");
    let trace = synth(&d, "pipe-relay", 40);
    golden("script.txt", &text(&["script", "-F", "--ns"], &trace));
    golden("waits.txt", &text(&["waits", "-F", "--hidden"], &trace));
    // Filters: either task of an event matches; the window bounds event times.
    let sink = text(
        &["script", "--comm", "^cr-sink$", "--window", "0.005..0.006"],
        &trace,
    );
    assert_eq!(
        sink,
        "     0.005050000 [001] waking        cr-relay 102/100 -> cr-sink 103/100 task k=21 u=23\n     \
         0.005070000 [002] switch        swapper 0/0 R ==> cr-sink 103/100 k=- u=-\n     \
         0.005080000 [002] switch        cr-sink 103/100 S ==> swapper 0/0 k=18 u=19\n"
    );
}

#[test]
fn bad_input_fails_cleanly() {
    let d = tmpdir("bad");
    let trace = synth(&d, "pipe-relay", 200);
    let t = trace.to_str().unwrap();
    let missing = d.join("missing.zst");
    for cmd in ["script", "waits"] {
        let o = bin().arg(cmd).arg(&missing).output().unwrap();
        fails_with(&o, "No such file");
        let o = bin().args([cmd, t, "--comm", "("]).output().unwrap();
        fails_with(&o, "bad --comm regex");
        let o = bin().args([cmd, t, "--window", "3..1"]).output().unwrap();
        fails_with(&o, "start is after end");
        let o = bin().args([cmd, t, "--window", "100.."]).output().unwrap();
        fails_with(&o, "outside the trace");
        let o = bin().args([cmd, t, "--window", "@1..@2"]).output().unwrap();
        fails_with(&o, "no wall-clock time");
        // Not a trace.
        let o = bin().arg(cmd).arg(file!()).output().unwrap();
        fails_with(&o, "not a chainrec trace");
    }
    let o = bin()
        .args(["waits", t, "-m", "5", "-M", "1"])
        .output()
        .unwrap();
    fails_with(&o, "-m 5 is larger than -M 1");
    let o = bin()
        .args(["waits", t, "--max-depth", "0"])
        .output()
        .unwrap();
    fails_with(&o, "--max-depth must be at least 1");
    // -m is a wait filter: script has none.
    let o = bin().args(["script", t, "-m", "5"]).output().unwrap();
    fails_with(&o, "unexpected argument");
    // A closed stdout ends the dump quietly (a large trace: many writes).
    let big = synth(&d, "pipe-relay", 100_000);
    for args in [
        vec!["script"],
        vec!["script", "--json", "-F"],
        vec!["waits"],
        vec!["waits", "--json"],
    ] {
        let mut child = bin()
            .args(&args)
            .arg(&big)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"));
        assert!(!stderr(&o).contains("error"), "{args:?}: {}", stderr(&o));
    }
    // A full disk is an error.
    let o = bin()
        .args(["script", t])
        .stdout(std::fs::File::create("/dev/full").unwrap())
        .output()
        .unwrap();
    fails_with(&o, "writing to stdout");
}

/// `script --goroutines`: a trace's goroutine records (format 2.2), one line each with the
/// wait reason or the waker goroutine, their stacks with -F, every field in --json, the
/// thread filters applied, executes (format 2.3) in time order between them; a trace
/// without any prints nothing.
#[test]
fn script_prints_goroutine_records() {
    use chainrec_format::{
        GoDelta, GoEvent, GoEventKind, GoExecute, GoProcess, TraceSink, TraceWriter,
    };
    let dir = tmpdir("script-goroutines");
    let plain = synth(&dir, "pipe-relay", 2000);
    let mut mem = TraceReader::open(&plain).unwrap().to_mem().unwrap();
    let ustack = *mem
        .tables
        .stacks
        .iter()
        .find(|(_, s)| s.kind == chainrec_format::StackKind::User)
        .map(|(id, _)| id)
        .expect("a user stack in pipe-relay");
    let (tid, tgid) = mem
        .tables
        .tasks
        .values()
        .map(|t| (t.tid, t.tgid))
        .max()
        .unwrap();
    let times: Vec<u64> = mem.events.iter().map(|e| e.ts()).collect();
    let ts = |i: usize| times[i];
    let rec = |i: usize, kind: GoEventKind, goid: u64, waker: u64, reason: u8| GoEvent {
        ts: ts(i),
        cpu: 0,
        tid,
        tgid,
        kind,
        goid,
        waker,
        reason,
        stack: ustack,
    };
    let delta = GoDelta {
        events: vec![
            rec(10, GoEventKind::Park, 7, 0, 1),
            rec(20, GoEventKind::Ready, 7, 9, 0),
        ],
        processes: vec![GoProcess {
            tgid,
            version: "1.19.8".into(),
            reasons: vec!["".into(), "chan receive".into()],
            capped_ns: 0,
        }],
        executes: vec![GoExecute {
            ts: ts(25),
            cpu: 1,
            tid,
            tgid,
            goid: 7,
        }],
        stws: vec![],
    };
    mem.add_goroutines(&delta).unwrap();
    let p = dir.join("go.zst");
    let mut w = TraceWriter::create(&p, &mem.meta, Default::default()).unwrap();
    mem.replay_into(&mut w).unwrap();
    w.finish(&mem.meta).unwrap();

    let o = bin()
        .args(["script", "--goroutines", "-F"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("    ")).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].contains("go_park") && lines[0].contains("goroutine 7 chan receive"));
    assert!(lines[1].contains("go_ready") && lines[1].contains("goroutine 7 by goroutine 9"));
    assert!(
        lines[2].contains("[001] go_execute    goroutine 7 ("),
        "{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("    ")),
        "no frames: {text}"
    );
    let v = ndjson(&["script", "--goroutines", "--json"], &p);
    assert_eq!(v.len(), 3);
    assert_eq!(v[0]["kind"], "go_park");
    assert_eq!(v[0]["reason"], "chan receive");
    assert_eq!(v[0]["goid"], 7);
    assert_eq!(v[1]["waker_goid"], 9);
    assert_eq!(v[1]["ts_ns"], ts(20));
    assert_eq!(v[1]["stack"], ustack.0.to_string());
    assert_eq!(
        (&v[2]["kind"], &v[2]["goid"], &v[2]["ts_ns"], &v[2]["tid"]),
        (&"go_execute".into(), &7.into(), &ts(25).into(), &tid.into())
    );
    // A filter that selects no thread of theirs, and a trace without records: nothing.
    assert!(ndjson(&["script", "--goroutines", "--json", "-t", "999999"], &p).is_empty());
    assert!(ndjson(&["script", "--goroutines", "--json"], &plain).is_empty());
}

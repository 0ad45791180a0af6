//! `top` on synthetic traces: counts, totals and maxima recomputed independently from
//! the events, and the exact chain of the pipe-relay scenario.

use chainrec_chain::{Collected, Config, Engine, Filter, Mode, TraceRef};
use chainrec_format::*;
use chainrec_report::top::{render_text, TopReport, TopSink};
use std::collections::HashMap;

use chainrec_testkit::scenario::generate as scenario;

/// Per tid: (number of blocked waits ended by a waking, total blocked ns, max blocked ns).
fn blocked_by_tid(t: &MemTrace) -> HashMap<Tid, (u64, u64, u64)> {
    let mut out_at: HashMap<Tid, u64> = HashMap::new();
    let mut res: HashMap<Tid, (u64, u64, u64)> = HashMap::new();
    for e in &t.events {
        match e {
            Event::Switch(s) if s.prev_state != STATE_RUNNABLE && s.prev_tid != 0 => {
                out_at.insert(s.prev_tid, s.ts);
            }
            Event::Waking(w) => {
                if let Some(a) = out_at.remove(&w.target_tid) {
                    let r = res.entry(w.target_tid).or_default();
                    r.0 += 1;
                    r.1 += w.ts - a;
                    r.2 = r.2.max(w.ts - a);
                }
            }
            _ => {}
        }
    }
    res
}

fn run(t: &MemTrace, n: usize, filter: Filter) -> chainrec_report::top::TopReport {
    let cfg = Config {
        mode: Mode::Bounded,
        max_depth: chainrec_chain::DEFAULT_MAX_DEPTH,
        dedup: false,
        filter,
        runqueue: true,
        oncpu: Default::default(),
        cgroup_frames: false,
        process_frames: false,
    };
    let mut engine = Engine::new(&t.tables, &t.meta, cfg);
    let mut sink = TopSink::default();
    engine.process(&t.events, &mut sink);
    engine.finish(&mut sink);
    let trace = TraceRef {
        tables: &t.tables,
        meta: &t.meta,
        start_ns: t.events.first().map(|e| e.ts()).unwrap_or(0),
    };
    TopReport::new(&Collected::new(sink, engine.into_nodes(), trace), n)
}

#[test]
fn pipe_relay_top_matches_events() {
    let t = scenario("pipe-relay", 3000);
    let want = blocked_by_tid(&t);
    let r = run(&t, 10, Filter::default());
    // Each thread has exactly one chain in this scenario.
    assert_eq!(r.entries.len(), 3);
    assert_eq!(r.chains, 3);
    for e in &r.entries {
        let (count, total, max) = want[&e.tid];
        assert_eq!(
            (e.count, e.total_ns, e.max_ns),
            (count, total, max),
            "{}",
            e.comm
        );
        // Time-bounded attribution: the levels above the root add up to the blocked time.
        let sum: u64 = e.chain[1..].iter().map(|l| l.ns).sum();
        assert_eq!(sum, e.max_ns, "{}", e.comm);
        assert_eq!(e.chain[0].ns, e.max_ns);
    }
    // Sorted by the longest wait.
    assert!(r.entries.windows(2).all(|w| w[0].max_ns >= w[1].max_ns));
    let sink = r.entries.iter().find(|e| e.comm == "cr-sink").unwrap();
    let who: Vec<&str> = sink.chain.iter().map(|l| l.who.as_str()).collect();
    let tid = |c: &str| {
        t.tables
            .tasks
            .values()
            .find(|x| x.comm.as_str() == c)
            .unwrap()
            .tid
    };
    assert_eq!(
        who,
        vec![
            format!("cr-sink ({})", tid("cr-sink")).as_str(),
            format!("cr-relay ({})", tid("cr-relay")).as_str(),
            format!("cr-timer ({})", tid("cr-timer")).as_str(),
            "[hardirq: timer]"
        ]
    );
    assert_eq!(sink.chain[0].frames[0], "cr-sink");
    assert_eq!(sink.chain[3].frames.last().unwrap(), "[hardirq: timer]");
    assert_eq!(sink.folded.matches(";--;").count(), 3);
    assert_eq!(r.ranked_waits, want.values().map(|v| v.0).sum::<u64>());

    let text = render_text(&r);
    assert!(text.contains("cr-sink tid"), "{text}");
    assert!(text.contains("<-"));
    // JSON round trip keeps the numbers.
    let j: serde_json::Value = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(
        j["entries"][0]["max_ns"].as_u64(),
        Some(r.entries[0].max_ns)
    );
    assert_eq!(j["entries"].as_array().unwrap().len(), 3);
}

#[test]
fn top_n_and_filter() {
    let t = scenario("pipe-relay", 3000);
    let r = run(&t, 1, Filter::default());
    assert_eq!(r.entries.len(), 1);
    assert_eq!(r.chains, 3);
    let sink_tid = t
        .tables
        .tasks
        .values()
        .find(|x| x.comm.as_str() == "cr-sink")
        .unwrap()
        .tid;
    let r = run(
        &t,
        10,
        Filter {
            threads: chainrec_format::ThreadSelector {
                tids: vec![sink_tid],
                ..Default::default()
            },
            ..Default::default()
        },
    );
    assert_eq!(r.entries.len(), 1);
    assert_eq!(r.entries[0].tid, sink_tid);
    assert_eq!(r.entries[0].count, blocked_by_tid(&t)[&sink_tid].0);
}

/// The text fits 80 columns by default on every scenario (frames abbreviated as `…N…`
/// between kept ends, long lines wrapped); without a width every level is its whole
/// folded part on one line.
#[test]
fn text_fits_80_columns_and_wide_is_whole() {
    use chainrec_report::top::{fit_frames, render_text_width};
    for sc in chainrec_format::synth::scenarios() {
        let t = scenario(sc.name, 20_000);
        let r = run(&t, 10, Filter::default());
        let text = render_text(&r);
        for l in text.lines() {
            assert!(
                l.chars().count() <= 80,
                "{}: {} columns: {l}",
                sc.name,
                l.chars().count()
            );
        }
        let wide = render_text_width(&r, None);
        for e in &r.entries {
            for lv in &e.chain {
                let whole = lv.frames.join(";");
                assert!(wide.contains(&whole), "{}: {whole}", sc.name);
            }
        }
    }
    let f: Vec<String> = ["comm", "u1", "u2", "-", "k1", "k2", "schedule"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(fit_frames(&f, 100), "comm;u1;u2;-;k1;k2;schedule");
    assert_eq!(fit_frames(&f, 24), "comm;u1;…3…;k2;schedule");
    assert_eq!(fit_frames(&f, 20), "comm;u1;…4…;schedule");
    assert_eq!(fit_frames(&f, 5), "comm…");
}

/// With on-CPU samples (`oncpu-worker` and its sampling metadata), the chain is the hops'
/// path, one level per hop: the wakers' `[on cpu]` parts are listed apart per level
/// (`oncpu`), as run-queue parts are, and add up to the on-CPU parts of the record.
#[test]
fn oncpu_parts_are_listed_apart_from_the_chain() {
    use chainrec_format::synth::{self, SynthParams};
    let params = SynthParams {
        events: 3_000,
        seed: 1,
    };
    let mut t = MemTrace {
        meta: synth::meta("oncpu-worker", &params, vec![]),
        ..MemTrace::default()
    };
    (synth::find("oncpu-worker").unwrap().generate)(&params, &mut t).unwrap();
    let r = run(&t, 10, Filter::default());
    assert!(r.entries.iter().any(|e| !e.oncpu.is_empty()));
    for e in &r.entries {
        assert!(!e.folded.contains("[on cpu"), "{}", e.folded);
        for l in &e.chain[1..] {
            assert!(!l.frames.iter().any(|f| f.starts_with("[on cpu")), "{l:?}");
        }
        for p in &e.oncpu {
            assert!(p.level >= 1 && (p.level as usize) < e.chain.len(), "{p:?}");
            assert!(p.frames[0].starts_with("[on cpu"), "{p:?}");
        }
    }
    let text = render_text(&r);
    assert!(text.contains("of it on cpu"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");
    // No samples, no field: the JSON of traces without samples is unchanged.
    let plain = run(&scenario("pipe-relay", 3000), 1, Filter::default());
    let j = serde_json::to_value(&plain).unwrap();
    assert!(j["entries"][0].get("oncpu").is_none());
}

/// Prose (the notes after `top`) wraps at spaces within the width, continuation lines
/// indented; a word longer than the width stays whole.
#[test]
fn notes_wrap_at_words() {
    use chainrec_report::top::wrap_words;
    let text = "chainrec: top: note: waits open at the end: 20 (switched out, not yet in)";
    assert_eq!(wrap_words(text, None, 2), text);
    assert_eq!(
        wrap_words(text, Some(30), 2),
        "chainrec: top: note: waits\n  open at the end: 20\n  (switched out, not yet in)"
    );
    assert_eq!(wrap_words("aaaaaaaa bb", Some(4), 1), "aaaaaaaa\n bb");
}

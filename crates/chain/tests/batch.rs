//! The batched pipeline (PathReducer -> PathBatch -> FoldedSink::apply / absorb) builds
//! the same trie as the record-by-record FoldedSink, and write_folded writes exactly what
//! for_each_line plus `{line} {rounded weight}` formatting gives.

mod common;

use chainrec_chain::fold::{PathReducer, WriteSummary};
use chainrec_chain::{Config, Engine, FoldedSink, Mode, SpillTo, Unit, View};
use chainrec_format::synth;
use chainrec_format::MemTrace;
use common::*;

const VIEWS: [View; 4] = [View::Chains, View::OffCpu, View::Wakeup, View::OffWake];

fn configs() -> Vec<Config> {
    vec![
        cfg(),
        last(),
        nodedup(),
        Config {
            max_depth: 2,
            ..Config::default()
        },
        Config {
            mode: Mode::Last,
            max_depth: 3,
            ..Config::default()
        },
    ]
}

fn direct(m: &MemTrace, c: Config, view: View) -> (Engine<'_>, FoldedSink) {
    let mut engine = Engine::new(&m.tables, &m.meta, c);
    let mut sink = FoldedSink::new(view);
    for chunk in m.events.chunks(1 << 12) {
        engine.process(chunk, &mut sink);
    }
    engine.finish(&mut sink);
    (engine, sink)
}

fn batched(m: &MemTrace, c: Config, view: View, waits: usize) -> (Engine<'_>, FoldedSink) {
    batched_into(m, c, view, waits, FoldedSink::new(view))
}

fn batched_into(
    m: &MemTrace,
    c: Config,
    view: View,
    waits: usize,
    mut sink: FoldedSink,
) -> (Engine<'_>, FoldedSink) {
    let mut engine = Engine::new(&m.tables, &m.meta, c);
    let mut red = PathReducer::new(view, waits);
    for chunk in m.events.chunks(1 << 12) {
        engine.process(chunk, &mut red);
        while let Some(b) = red.take_full() {
            sink.apply(&b);
            red.recycle(b);
        }
    }
    engine.finish(&mut red);
    sink.absorb(red);
    (engine, sink)
}

fn edges(s: &FoldedSink) -> Vec<(u32, u32, u64)> {
    let g = s.chain_graph();
    let mut v: Vec<_> = g
        .edge_indices()
        .map(|e| {
            let (a, b) = g.edge_endpoints(e).unwrap();
            (g[a], g[b], g[e])
        })
        .collect();
    v.sort();
    v
}

fn traces() -> Vec<(&'static str, MemTrace)> {
    let mut v: Vec<_> = synth::scenarios()
        .into_iter()
        .filter(|s| s.name != "busy-server")
        .map(|s| (s.name, gen(s.name, 3_000)))
        .collect();
    v.push(("busy-server", gen("busy-server", 150_000)));
    v
}

#[test]
fn batched_insertion_matches_record_by_record() {
    for (name, m) in traces() {
        for c in configs() {
            for view in VIEWS {
                let (e0, want) = direct(&m, c.clone(), view);
                let want_lines = want.folded_ns(e0.nodes(), &m.tables, &m.meta);
                for waits in [1, 7, 4096] {
                    let (e1, got) = batched(&m, c.clone(), view, waits);
                    let ctx = format!(
                        "{name} {view:?} {:?} depth {} batch {waits}",
                        c.mode, c.max_depth
                    );
                    assert_eq!(got.paths(), want.paths(), "{ctx}");
                    assert_eq!(got.waits_in_view, want.waits_in_view, "{ctx}");
                    assert_eq!(got.waits_not_in_view, want.waits_not_in_view, "{ctx}");
                    assert_eq!(
                        got.folded_ns(e1.nodes(), &m.tables, &m.meta),
                        want_lines,
                        "{ctx}"
                    );
                    assert_eq!(edges(&got), edges(&want), "{ctx}");
                }
            }
        }
    }
}

/// The reducer is a plain WaitSink (usable in a sink pair) and the pieces are Send.
#[test]
fn reducer_is_a_wait_sink_and_send() {
    fn is_send<T: Send>() {}
    is_send::<PathReducer>();
    is_send::<chainrec_chain::fold::PathBatch>();
    is_send::<FoldedSink>();
    let m = gen("pipe-relay", 2_000);
    let mut engine = Engine::new(&m.tables, &m.meta, cfg());
    let mut n = 0u64;
    let mut pair = (
        PathReducer::new(View::Chains, 3),
        |_: &chainrec_chain::WaitRecord, _: &chainrec_chain::NodeTable| n += 1,
    );
    engine.process(&m.events, &mut pair);
    engine.finish(&mut pair);
    let red = pair.0;
    assert!(n > 0);
    let mut f = FoldedSink::new(View::Chains);
    f.absorb(red);
    assert_eq!(
        f.folded_ns(engine.nodes(), &m.tables, &m.meta),
        run(&m, cfg(), View::Chains).folded
    );
}

fn expected(s: &FoldedSink, e: &Engine<'_>, m: &MemTrace, unit: Unit) -> (Vec<u8>, WriteSummary) {
    let d = unit.ns();
    let mut out = Vec::new();
    let mut sum = WriteSummary::default();
    s.for_each_line(e.nodes(), &m.tables, &m.meta, |l, w| {
        let v = (w + d / 2) / d;
        if v == 0 {
            sum.small_lines += 1;
            sum.small_ns += w;
        } else {
            sum.lines += 1;
            use std::io::Write;
            writeln!(out, "{l} {v}").unwrap();
        }
    });
    sum.bytes = out.len() as u64;
    (out, sum)
}

#[test]
fn write_folded_matches_for_each_line() {
    // Big enough for many parallel rendering tasks.
    let m = gen("busy-server", 400_000);
    for view in VIEWS {
        for c in [cfg(), last()] {
            let (e, s) = direct(&m, c, view);
            for unit in [Unit::Ns, Unit::Us, Unit::Ms] {
                let (want, want_sum) = expected(&s, &e, &m, unit);
                let mut got = Vec::new();
                let sum = s
                    .write_folded(e.nodes(), &m.tables, &m.meta, unit, &mut got)
                    .unwrap();
                assert_eq!(sum, want_sum, "{view:?} {unit:?}");
                assert!(got == want, "{view:?} {unit:?}: output differs");
            }
        }
    }
    // Small traces (one task, markers, comm nodes) too.
    for (name, m) in traces() {
        for view in VIEWS {
            let (e, s) = direct(&m, cfg(), view);
            let (want, want_sum) = expected(&s, &e, &m, Unit::Us);
            let mut got = Vec::new();
            let sum = s
                .write_folded(e.nodes(), &m.tables, &m.meta, Unit::Us, &mut got)
                .unwrap();
            assert_eq!(sum, want_sum, "{name} {view:?}");
            assert!(got == want, "{name} {view:?}: output differs");
        }
    }
}

/// A failing writer stops rendering and returns its error.
#[test]
fn write_folded_returns_write_errors() {
    struct Fail(usize);
    impl std::io::Write for Fail {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "closed",
                ));
            }
            self.0 -= 1;
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let m = gen("busy-server", 400_000);
    let (e, s) = direct(&m, cfg(), View::Chains);
    for ok_writes in [0, 3] {
        let r = s.write_folded(
            e.nodes(),
            &m.tables,
            &m.meta,
            Unit::Us,
            &mut Fail(ok_writes),
        );
        assert_eq!(r.unwrap_err().kind(), std::io::ErrorKind::BrokenPipe);
    }
}

/// The structured walk gives the same paths as the text one: frames joined by `;` are the
/// folded lines (same order), each frame's level is the number of `--` before it (the
/// separator itself belongs to the level it opens), and a subtree left out by the callback
/// is skipped whole, with its weight in `subtree_ns`.
#[test]
fn for_each_path_is_for_each_line_structured() {
    use chainrec_chain::FrameKind;
    // With its sampling metadata, `oncpu-worker` has `[on cpu]` levels.
    let mut all = traces();
    all.push(("oncpu-worker sampled", oncpu_sampled()));
    let mut oncpu_frames = 0;
    for (name, m) in &all {
        for view in VIEWS {
            let (e, s) = direct(m, cfg(), view);
            let mut want = Vec::new();
            s.for_each_line(e.nodes(), &m.tables, &m.meta, |l, w| {
                want.push((l.to_string(), w))
            });
            let mut got = Vec::new();
            let mut total = 0u64;
            s.for_each_path(e.nodes(), &m.tables, &m.meta, |v| {
                let names: Vec<&str> = v.frames.iter().map(|f| f.name).collect();
                let mut level = 0;
                for f in v.frames {
                    if f.kind == FrameKind::LevelSeparator {
                        level += 1;
                        assert_eq!(f.name, "--");
                    }
                    if f.kind == FrameKind::UserKernelSeparator {
                        assert_eq!(f.name, "-");
                    }
                    if f.kind == FrameKind::OnCpu {
                        assert!(f.name.starts_with("[on cpu"), "{}", f.name);
                        oncpu_frames += 1;
                    }
                    assert_eq!(f.level, level, "{name} {view:?}: {names:?}");
                }
                assert_eq!(v.level, level);
                assert!(v.shared < v.frames.len());
                if v.ns > 0 {
                    got.push((names.join(";"), v.ns));
                }
                if v.shared == 0 {
                    total += v.subtree_ns;
                }
                true
            });
            assert_eq!(got, want, "{name} {view:?}");
            assert_eq!(
                total,
                want.iter().map(|l| l.1).sum::<u64>(),
                "{name} {view:?}"
            );
            // Not descending below the roots: one visit per root, totals kept.
            let (mut roots, mut again) = (0, 0u64);
            s.for_each_path(e.nodes(), &m.tables, &m.meta, |v| {
                assert_eq!(v.shared, 0);
                roots += 1;
                again += v.subtree_ns;
                false
            });
            assert_eq!(again, total);
            assert!(roots <= got.len().max(1));
        }
    }
    assert!(oncpu_frames > 0, "no [on cpu] level in any trace");
}

/// `oncpu-worker` with the metadata `chainrec synth` gives it (its sampling period), so the
/// engine splits waker levels into `[on cpu]` parts.
fn oncpu_sampled() -> MemTrace {
    let params = synth::SynthParams {
        events: 3_000,
        seed: 1,
    };
    let m = MemTrace {
        meta: synth::meta("oncpu-worker", &params, vec![]),
        ..MemTrace::default()
    };
    chainrec_testkit::scenario::generate_into("oncpu-worker", params.events, m)
}

/// A trie written out in runs whenever it outgrows its budget (down to one run per batch)
/// and merged at the end writes exactly the bytes of one trie that held everything: same
/// lines, same order, same weights, same summary (graph/spill.rs says why).
#[test]
fn spilled_runs_merge_to_the_same_output() {
    let dir = std::env::temp_dir();
    for (name, m) in traces() {
        for view in VIEWS {
            let (e, whole) = batched(&m, cfg(), view, 64);
            let mut want = Vec::new();
            let want_sum = whole
                .write_folded(e.nodes(), &m.tables, &m.meta, Unit::Ns, &mut want)
                .unwrap();
            // 1 byte: a run after every batch; 64 KiB: a few runs on busy-server; and
            // without `finish_spill`, the trie left written out by `write_folded` itself.
            for (budget, finish) in [(1, true), (64 << 10, true), (64 << 10, false)] {
                let mut sink = FoldedSink::new(view);
                sink.spill_to(&SpillTo {
                    dir: dir.clone(),
                    budget_bytes: budget,
                })
                .unwrap();
                let (e, mut got) = batched_into(&m, cfg(), view, 64, sink);
                if finish {
                    got.finish_spill();
                }
                let runs = got.spilled().0;
                let ctx = format!("{name} {view:?} budget {budget} ({finish}): {runs} runs");
                if budget == 1 && whole.paths() > 0 {
                    assert!(runs > 1, "{ctx}");
                }
                let mut out = Vec::new();
                let sum = got
                    .write_folded(e.nodes(), &m.tables, &m.meta, Unit::Ns, &mut out)
                    .unwrap();
                assert_eq!(sum, want_sum, "{ctx}");
                assert!(out == want, "{ctx}: output differs");
                // Written twice: the same again (the last run is not added twice).
                let mut again = Vec::new();
                got.write_folded(e.nodes(), &m.tables, &m.meta, Unit::Ns, &mut again)
                    .unwrap();
                assert!(again == want, "{ctx}: second write differs");
            }
        }
    }
}

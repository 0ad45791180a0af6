//! Chain engine benchmarks on in-memory events (no decoding): the ordered walk plus the
//! folded aggregation, for each view and mode, on the busy-server mix and on the exact
//! pipe-relay scenario. Rendering of folded lines is measured separately.
//!
//! The `trie` group inserts the reduced paths of a whole chains run
//! (`FoldedSink::apply`, batched vs one path at a time) and the `render` group writes the
//! resulting trie as folded text (`write_folded` vs the former `for_each_line` +
//! `writeln!` loop; `RAYON_NUM_THREADS=1` shows `write_folded` on one thread).
//!
//! `cargo bench --bench chain` (set `CHAINREC_BENCH_EVENTS` to change the busy-server
//! size, default 2 M events; set `CHAINREC_BENCH_TRACE=/tmp/busy50.zst` to take the
//! trie/render inputs from a trace file instead, e.g. a 50 M-event busy-server trace).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use chainrec_chain::fold::{PathBatch, PathReducer};
use chainrec_chain::{Config, Engine, FoldedSink, Mode, NodeTable, Unit, View};
use chainrec_format::synth::{self, SynthParams};
use chainrec_format::{Event, MemTrace, RecordingMeta, Tables, TraceReader};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::io::Write;
use std::time::Duration;

fn events() -> u64 {
    // `cargo test --all-targets` runs this once without `--bench` (criterion's test mode):
    // keep that quick.
    let default = if std::env::args().any(|a| a == "--bench") {
        2_000_000
    } else {
        100_000
    };
    std::env::var("CHAINREC_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn generate(name: &str, n: u64) -> MemTrace {
    let mut m = MemTrace::default();
    m.meta.stack_threshold_ns = 100_000;
    let sc = synth::find(name).unwrap_or_else(|| panic!("scenario {name}"));
    (sc.generate)(&SynthParams { events: n, seed: 1 }, &mut m).unwrap();
    m
}

fn run(m: &MemTrace, cfg: Config, view: View) -> usize {
    let mut engine = Engine::new(&m.tables, &m.meta, cfg);
    let mut sink = FoldedSink::new(view);
    // Batches the size of a file chunk, as the CLI feeds them.
    for batch in m.events.chunks(1 << 16) {
        engine.process(batch, &mut sink);
    }
    engine.finish(&mut sink);
    sink.paths()
}

fn chain_benches(c: &mut Criterion) {
    let n = events();
    let busy = generate("busy-server", n);
    let relay = generate("pipe-relay", 1_000_000);
    let mut g = c.benchmark_group("engine");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(8))
        .warm_up_time(Duration::from_secs(1));
    for (name, m) in [("busy-server", &busy), ("pipe-relay", &relay)] {
        g.throughput(Throughput::Elements(m.events.len() as u64));
        g.bench_function(format!("{name}/chains-bounded-dedup"), |b| {
            b.iter(|| run(m, Config::default(), View::Chains))
        });
        // The walk alone (records dropped), to tell engine from aggregation time.
        g.bench_function(format!("{name}/chains-bounded-dedup-nosink"), |b| {
            b.iter(|| {
                let mut engine = Engine::new(&m.tables, &m.meta, Config::default());
                let mut n = 0u64;
                let mut sink = |_: &chainrec_chain::WaitRecord, _: &NodeTable| n += 1;
                for batch in m.events.chunks(1 << 16) {
                    engine.process(batch, &mut sink);
                }
                engine.finish(&mut sink);
                n
            })
        });
        g.bench_function(format!("{name}/chains-bounded-nodedup"), |b| {
            b.iter(|| {
                run(
                    m,
                    Config {
                        dedup: false,
                        ..Config::default()
                    },
                    View::Chains,
                )
            })
        });
        g.bench_function(format!("{name}/chains-last"), |b| {
            b.iter(|| {
                run(
                    m,
                    Config {
                        mode: Mode::Last,
                        ..Config::default()
                    },
                    View::Chains,
                )
            })
        });
        g.bench_function(format!("{name}/offcpu"), |b| {
            b.iter(|| {
                run(
                    m,
                    Config {
                        dedup: false,
                        max_depth: 1,
                        ..Config::default()
                    },
                    View::OffCpu,
                )
            })
        });
    }
    g.finish();
}

/// Receives event batches in time order.
type EventSink<'a> = dyn FnMut(&[Event]) + 'a;

/// The reduced paths of a whole run, in batches of 4096 waits, with what rendering needs.
struct Reduced {
    batches: Vec<PathBatch>,
    steps: u64,
    sink: FoldedSink,
    nodes: NodeTable,
    tables: Tables,
    meta: RecordingMeta,
}

fn reduce_all(
    tables: &Tables,
    meta: &RecordingMeta,
    feed: &mut dyn FnMut(&mut EventSink<'_>),
) -> Reduced {
    let mut engine = Engine::new(tables, meta, Config::default());
    let mut red = PathReducer::new(View::Chains, 4096);
    let mut batches = Vec::new();
    feed(&mut |evs| {
        engine.process(evs, &mut red);
        while let Some(b) = red.take_full() {
            batches.push(b);
        }
    });
    engine.finish(&mut red);
    batches.push(red.take_partial());
    let mut sink = FoldedSink::new(View::Chains);
    for b in &batches {
        sink.apply(b);
    }
    sink.absorb(red);
    Reduced {
        steps: batches.iter().map(|b| b.steps() as u64).sum(),
        batches,
        sink,
        nodes: engine.nodes().clone(),
        tables: tables.clone(),
        meta: meta.clone(),
    }
}

/// Paths to insert: from the trace file `CHAINREC_BENCH_TRACE` (e.g. a 50 M-event
/// busy-server trace, for a trie of realistic size) or from the in-memory busy-server run.
fn reduced(busy: &MemTrace) -> Reduced {
    match std::env::var_os("CHAINREC_BENCH_TRACE") {
        Some(path) => {
            let r = TraceReader::open(std::path::Path::new(&path)).expect("bench trace");
            reduce_all(r.tables(), r.meta(), &mut |f| {
                r.for_each_chunk::<chainrec_format::FormatError>(0..r.chunks().len(), true, |e| {
                    f(e);
                    Ok(())
                })
                .expect("decode");
            })
        }
        None => reduce_all(&busy.tables, &busy.meta, &mut |f| {
            for c in busy.events.chunks(1 << 16) {
                f(c)
            }
        }),
    }
}

/// Trie insertion (`FoldedSink::apply`) and rendering of the chains view.
fn trie_benches(c: &mut Criterion) {
    let busy = generate("busy-server", events());
    let r = reduced(&busy);
    drop(busy);
    eprintln!(
        "trie: {} batches, {} steps, {} entries, {} trie bytes ({:.1} B/entry)",
        r.batches.len(),
        r.steps,
        r.sink.paths(),
        r.sink.trie_bytes(),
        r.sink.trie_bytes() as f64 / r.sink.paths().max(1) as f64
    );
    let mut g = c.benchmark_group("trie");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Elements(r.steps));
    // Whole batches: level by level with prefetching.
    g.bench_function("apply-batches-4096", |b| {
        b.iter(|| {
            let mut sink = FoldedSink::new(View::Chains);
            for batch in &r.batches {
                sink.apply(batch);
            }
            sink.paths()
        })
    });
    // One path at a time, as the record-by-record `WaitSink` path inserts.
    g.bench_function("apply-one-path-at-a-time", |b| {
        b.iter(|| {
            let mut sink = FoldedSink::new(View::Chains);
            let mut one = PathBatch::new();
            for batch in &r.batches {
                for i in 0..batch.len() {
                    let (n, w) = batch.path(i);
                    one.push_path(n, w);
                    sink.apply(&one);
                    one.clear();
                }
            }
            sink.paths()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("render");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .warm_up_time(Duration::from_secs(1));
    let (sink, nodes, tables, meta) = (&r.sink, &r.nodes, &r.tables, &r.meta);
    let mut sum = sink
        .write_folded(nodes, tables, meta, Unit::Us, &mut std::io::sink())
        .unwrap();
    eprintln!("render: {} lines, {} bytes", sum.lines, sum.bytes);
    g.throughput(Throughput::Bytes(sum.bytes));
    // The CLI's loop before write_folded: for_each_line + writeln!.
    g.bench_function("chains/for_each_line-writeln", |b| {
        b.iter(|| {
            let mut out = std::io::BufWriter::with_capacity(1 << 16, std::io::sink());
            sink.for_each_line(nodes, tables, meta, |l, w| {
                let v = Unit::Us.round(w);
                if v > 0 {
                    writeln!(out, "{l} {v}").unwrap();
                }
            });
            out.flush().unwrap();
        })
    });
    g.bench_function("chains/write_folded", |b| {
        b.iter(|| {
            sum = sink
                .write_folded(nodes, tables, meta, Unit::Us, &mut std::io::sink())
                .unwrap();
            sum.lines
        })
    });
    g.finish();
}

criterion_group!(benches, chain_benches, trie_benches);
criterion_main!(benches);

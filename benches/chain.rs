//! Chain engine benchmarks on in-memory events (no decoding): the ordered walk plus the
//! folded aggregation, for each view and mode, on the busy-server mix and on the exact
//! pipe-relay scenario. Rendering of folded lines is measured separately.
//!
//! `cargo bench --bench chain` (set `CHAINREC_BENCH_EVENTS` to change the busy-server
//! size, default 2 M events).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use chainrec_chain::{Config, Engine, FoldedSink, Mode, View};
use chainrec_format::synth::{self, SynthParams};
use chainrec_format::MemTrace;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::time::Duration;

fn events() -> u64 {
    std::env::var("CHAINREC_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000)
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

    // Rendering the aggregated paths to folded text (streamed).
    let mut g = c.benchmark_group("render");
    g.sample_size(10).measurement_time(Duration::from_secs(5));
    let mut engine = Engine::new(&busy.tables, &busy.meta, Config::default());
    let mut sink = FoldedSink::new(View::Chains);
    engine.process(&busy.events, &mut sink);
    engine.finish(&mut sink);
    g.throughput(Throughput::Elements(sink.paths() as u64));
    g.bench_function("busy-server/chains-lines", |b| {
        b.iter_batched(
            || (),
            |_| {
                let mut bytes = 0usize;
                sink.for_each_line(engine.nodes(), &busy.tables, &busy.meta, |l, _| {
                    bytes += l.len()
                });
                bytes
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, chain_benches);
criterion_main!(benches);

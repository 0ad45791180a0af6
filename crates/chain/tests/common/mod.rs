//! Shared helpers for the exact-output tests.
#![allow(dead_code)]

use chainrec_chain::{Config, Engine, FoldedSink, Mode, Stats, View, WaitRecord};
use chainrec_format::MemTrace;
use std::collections::BTreeMap;

/// Generate scenario `name` with `events` events into memory (lazy threshold 100 us).
pub fn gen(name: &str, events: u64) -> MemTrace {
    let mut m = MemTrace::default();
    m.meta.stack_threshold_ns = 100_000;
    chainrec_testkit::scenario::generate_into(name, events, m)
}

/// Result of one engine run.
pub struct Run {
    /// Folded lines with exact ns weights.
    pub folded: BTreeMap<String, u64>,
    /// Engine counters.
    pub stats: Stats,
    /// Every record the engine emitted.
    pub records: Vec<WaitRecord>,
}

/// Run the engine over `m` with `cfg`, building `view`, in batches of `batch` events.
pub fn run_batched(m: &MemTrace, cfg: Config, view: View, batch: usize) -> Run {
    let mut engine = Engine::new(&m.tables, &m.meta, cfg);
    let mut records = Vec::new();
    let folded = {
        let mut sink = (
            FoldedSink::new(view),
            |w: &WaitRecord, _: &chainrec_chain::NodeTable| records.push(w.clone()),
        );
        for chunk in m.events.chunks(batch.max(1)) {
            engine.process(chunk, &mut sink);
        }
        engine.finish(&mut sink);
        sink.0
    };
    let stats = engine.stats().clone();
    let f = folded.folded_ns(engine.nodes(), &m.tables, &m.meta);
    Run {
        folded: f,
        stats,
        records,
    }
}

/// Run with one batch.
pub fn run(m: &MemTrace, cfg: Config, view: View) -> Run {
    run_batched(m, cfg, view, usize::MAX)
}

/// Default config (bounded, dedup on) without run-queue attribution: the blocked-only graph
/// (`--no-runqueue`), whose exact attribution of blocked time most tests fix. Run-queue
/// levels have their own tests (`runqueue.rs`).
pub fn cfg() -> Config {
    Config {
        runqueue: false,
        ..Config::default()
    }
}

/// Config for --mode last.
pub fn last() -> Config {
    Config {
        mode: Mode::Last,
        ..cfg()
    }
}

/// Config with dedup off.
pub fn nodedup() -> Config {
    Config {
        dedup: false,
        ..cfg()
    }
}

/// Config with root filter `filter` and dedup off: the filter tests check each filter
/// apart from dedup.
pub fn filtered(filter: chainrec_chain::Filter) -> Config {
    Config {
        filter,
        ..nodedup()
    }
}

/// Print folded output (debugging aid on failure).
pub fn show(r: &Run) -> String {
    r.folded.iter().map(|(l, w)| format!("{l} {w}\n")).collect()
}

/// Build a map from literal pairs.
pub fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (l, w) in pairs {
        *m.entry(l.to_string()).or_insert(0) += w;
    }
    m
}

/// Scenario `name` with `events` events, written to a file with `opts` and opened for
/// analysis, with the metadata a `chainrec synth` file has (`oncpu-worker`: sampling
/// period 1 ms); also in memory.
pub fn synth_file(
    name: &str,
    events: u64,
    opts: chainrec_format::WriterOptions,
) -> (chainrec_chain::Analysis, MemTrace) {
    use chainrec_format::synth::{self, SynthParams, Tracker};
    let params = SynthParams { events, seed: 1 };
    let mut m = MemTrace::default();
    let mut meta = synth::meta(name, &params, vec![]);
    {
        let mut t = Tracker::new(&mut m);
        (synth::find(name).unwrap().generate)(&params, &mut t).unwrap();
        t.complete(&mut meta);
    }
    m.meta = meta;
    let dir = std::env::temp_dir().join(format!("chainrec-synth-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = dir.join(format!("{name}-{events}-{n}.zst"));
    m.write_to(&p, opts).unwrap();
    let r = chainrec_format::TraceReader::from_bytes(std::fs::read(&p).unwrap()).unwrap();
    let _ = std::fs::remove_file(&p);
    (chainrec_chain::Analysis::from_reader(r), m)
}

//! Trace format benchmarks on the busy-server scenario: write throughput, open, decode
//! throughput (sequential and parallel), and bytes/event on disk (printed).
//!
//! `cargo bench --bench format` (set `CHAINREC_BENCH_EVENTS` to change the size, default
//! 4 M events).

// criterion_group! generates an undocumented pub fn.
#![allow(missing_docs)]

use chainrec_format::synth::{self, SynthParams};
use chainrec_format::*;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::PathBuf;
use std::time::Duration;

fn events() -> u64 {
    // `cargo test --all-targets` runs this once without `--bench` (criterion's test mode):
    // keep that quick.
    let default = if std::env::args().any(|a| a == "--bench") {
        4_000_000
    } else {
        200_000
    };
    std::env::var("CHAINREC_BENCH_EVENTS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn bench_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("chainrec-bench-format-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn generate(n: u64) -> MemTrace {
    let mut m = MemTrace::default();
    let sc = synth::find("busy-server").expect("busy-server scenario");
    (sc.generate)(&SynthParams { events: n, seed: 1 }, &mut m).unwrap();
    m.meta.synthetic_scenario = Some("busy-server".into());
    m.meta.cpu_count = 8;
    m.meta.clock = Clock::Synthetic;
    m
}

fn format_benches(c: &mut Criterion) {
    let n = events();
    let dir = bench_dir();
    let path = dir.join("busy.zst");
    let t0 = std::time::Instant::now();
    let trace = generate(n);
    eprintln!("generated busy-server: {n} events in {:.2?}", t0.elapsed());

    // Size report (tables included: the whole file).
    let s = trace.write_to(&path, WriterOptions::default()).unwrap();
    let r = TraceReader::open(&path).unwrap();
    let sb = r.section_bytes().clone();
    println!(
        "busy-server {n} events: file {} bytes = {:.3} bytes/event (chunks {:.3} B/ev, tables {} B in {} sections, {} chunks of {} events)",
        s.bytes,
        s.bytes as f64 / n as f64,
        sb.chunks as f64 / n as f64,
        sb.tables,
        sb.table_sections,
        s.chunks,
        WriterOptions::default().chunk_events
    );
    drop(r);

    let mut g = c.benchmark_group("format");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    g.warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Elements(n));

    g.bench_function("write", |b| {
        let p = dir.join("w.zst");
        b.iter(|| trace.write_to(&p, WriterOptions::default()).unwrap())
    });

    let r = TraceReader::open(&path).unwrap();
    g.bench_function("decode_sequential", |b| {
        b.iter(|| {
            let mut k = 0u64;
            r.for_each_chunk(0..r.chunks().len(), false, |ev| -> Result<()> {
                k += ev.len() as u64;
                Ok(())
            })
            .unwrap();
            assert_eq!(k, n);
        })
    });
    g.bench_function("decode_parallel", |b| {
        b.iter(|| {
            let mut k = 0u64;
            r.for_each_chunk(0..r.chunks().len(), true, |ev| -> Result<()> {
                k += ev.len() as u64;
                Ok(())
            })
            .unwrap();
            assert_eq!(k, n);
        })
    });
    g.bench_function("verify", |b| b.iter(|| r.verify().unwrap()));
    g.finish();

    let mut g = c.benchmark_group("format_open");
    g.sample_size(20);
    g.bench_function("open_indexed", |b| {
        b.iter(|| TraceReader::open(&path).unwrap())
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, format_benches);
criterion_main!(benches);

//! Exact outputs on synthetic traces with on-CPU samples (`oncpu-worker`): the CPU flame
//! graph and its filters.
mod common;

use chainrec_chain::{fold_oncpu, Analysis, Filter};
use chainrec_format::synth::{self, SynthParams, Tracker};
use chainrec_format::{MemTrace, TraceReader, WriterOptions};
use std::collections::BTreeMap;

/// `oncpu-worker` with `iters` iterations (17 events each), written to a file and opened
/// for analysis, with the metadata a `chainrec synth` file has (sampling period 1 ms).
fn analysis(iters: u64) -> (Analysis, MemTrace) {
    let params = SynthParams {
        events: 17 * iters,
        seed: 1,
    };
    let mut m = MemTrace::default();
    let mut meta = synth::meta("oncpu-worker", &params, vec![]);
    {
        let mut t = Tracker::new(&mut m);
        (synth::find("oncpu-worker").unwrap().generate)(&params, &mut t).unwrap();
        t.complete(&mut meta);
    }
    m.meta = meta;
    let dir = std::env::temp_dir().join(format!("chainrec-samples-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = dir.join(format!("ow{iters}-{n}.zst"));
    m.write_to(&p, WriterOptions::default()).unwrap();
    let r = TraceReader::from_bytes(std::fs::read(&p).unwrap()).unwrap();
    let _ = std::fs::remove_file(&p);
    (Analysis::from_reader(r), m)
}

fn lines(f: &chainrec_chain::OnCpuFold) -> BTreeMap<String, u64> {
    f.lines_ns().map(|(l, n)| (l.to_string(), n)).collect()
}

fn expect(v: &[(&str, u64)]) -> BTreeMap<String, u64> {
    v.iter().map(|(l, n)| (l.to_string(), *n)).collect()
}

/// Three iterations: per iteration the worker is sampled twice in `spin_compute`, once in
/// `spin_compute` during a page fault, twice in `parse`; the client four times in `render`;
/// idle once on each CPU. Each sample is 1 ms (the scenario samples at 1 kHz).
#[test]
fn oncpu_folds_every_sample_as_its_period() {
    let (an, _) = analysis(3);
    let f = fold_oncpu(&an, &Filter::default(), false).unwrap();
    assert_eq!(
        lines(&f),
        expect(&[
            ("cr-client;client_loop;render", 12_000_000),
            ("cr-worker;worker_loop;handle;parse", 6_000_000),
            ("cr-worker;worker_loop;handle;spin_compute", 6_000_000),
            (
                "cr-worker;worker_loop;handle;spin_compute;-;exc_page_fault;handle_mm_fault;clear_page",
                3_000_000
            ),
            ("swapper;-;cpu_startup_entry;do_idle;default_idle", 6_000_000),
        ])
    );
    let s = &f.stats;
    assert_eq!((s.samples, s.shown, s.idle, s.no_stack), (33, 33, 6, 0));
    assert_eq!(s.period_ns, 1_000_000);
}

/// The thread filters and the window apply to samples; wait filters are refused.
#[test]
fn oncpu_filters() {
    let (an, _) = analysis(3);
    let f = Filter {
        tids: vec![1302],
        ..Filter::default()
    };
    let got = lines(&fold_oncpu(&an, &f, true).unwrap());
    assert_eq!(got.values().sum::<u64>(), 15_000_000);
    assert!(got.keys().all(|l| l.starts_with("cr-worker;")));
    let f = Filter {
        kernel_only: true,
        ..Filter::default()
    };
    let got = lines(&fold_oncpu(&an, &f, true).unwrap());
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        ["swapper;-;cpu_startup_entry;do_idle;default_idle"]
    );
    // Iteration 1 only (t0 + 10 ms .. t0 + 20 ms): 11 samples.
    let t0 = 1_000_000_000;
    let f = Filter {
        window: Some((t0 + 10_000_000, t0 + 19_999_999)),
        ..Filter::default()
    };
    assert_eq!(fold_oncpu(&an, &f, true).unwrap().stats.shown, 11);
    let f = Filter {
        min_ns: Some(1),
        ..Filter::default()
    };
    assert!(fold_oncpu(&an, &f, true).is_err());
}

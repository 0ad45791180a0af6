//! Exact outputs on synthetic traces with on-CPU samples (`oncpu-worker`): the CPU flame
//! graph and its filters.
mod common;

use chainrec_chain::{fold_oncpu, Analysis, Filter};
use chainrec_format::{MemTrace, WriterOptions};
use std::collections::BTreeMap;

/// `oncpu-worker` with `iters` iterations (17 events each), as a file would give it.
fn analysis(iters: u64) -> (Analysis, MemTrace) {
    common::synth_file("oncpu-worker", 17 * iters, WriterOptions::default())
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

/// `oncpu-worker` in memory with the metadata `chainrec synth` writes (samples on).
fn mem(iters: u64) -> MemTrace {
    analysis(iters).1
}

const C: &str = "cr-client;client_loop;read;-;ksys_read;pipe_read;schedule";
const W: &str = "cr-worker;worker_loop;read;-;ksys_read;pipe_read;schedule";
const TO_W: &str = ";--;try_to_wake_up;pipe_write;ksys_write;-;write;worker_loop;cr-worker";
const TO_C: &str = ";--;try_to_wake_up;pipe_write;ksys_write;-;write;client_loop;cr-client";

/// Three iterations, run-queue attribution on (the default). The client's 5.01 ms waits:
/// the worker was runnable 10 us behind idle, then on CPU 5 ms with 5 samples (spin ×2,
/// parse ×2, spin in a page fault ×1), 1 ms each. The worker's waits: the client on CPU
/// with 4 `render` samples in 4.96 ms (1.24 ms each), except the first, where the client
/// had no sample (`[on cpu: no sample]`, 99.97 us). Every root's lines add up to its
/// off-CPU time.
#[test]
fn chains_break_the_wakers_running_time_down_by_its_samples() {
    let m = mem(3);
    let cfg = chainrec_chain::Config::default();
    let r = common::run(&m, cfg, chainrec_chain::View::Chains);
    let cw = format!("{C}{TO_W}");
    let wc = format!("{W}{TO_C}");
    let want: BTreeMap<String, u64> = [
        (format!("{cw};--;[on cpu];worker_loop;handle;spin_compute"), 6_000_000),
        (format!("{cw};--;[on cpu];worker_loop;handle;parse"), 6_000_000),
        (
            format!("{cw};--;[on cpu];worker_loop;handle;spin_compute;-;exc_page_fault;handle_mm_fault;clear_page"),
            3_000_000,
        ),
        (format!("{cw};--;[run queue];[idle]"), 30_000),
        (format!("{C};--;[run queue];[idle]"), 60_000),
        (format!("{wc};--;[on cpu: no sample]"), 99_970),
        (format!("{wc};--;[on cpu];client_loop;render"), 9_920_000),
        (format!("{wc};--;[run queue];[idle]"), 20_000),
        (format!("{W};--;[run queue];[idle]"), 60_000),
    ]
    .into_iter()
    .collect();
    assert_eq!(r.folded, want);
    for w in &r.records {
        let lines: u64 = w.hops.iter().map(|h| h.ns).sum::<u64>() + w.runq_ns_of(0);
        assert_eq!(Some(lines), w.offcpu_ns(), "{w:?}");
        for (k, h) in w.hops.iter().enumerate() {
            let l = k as u32 + 1;
            assert_eq!(
                h.ns,
                w.runq_ns_of(l) + w.oncpu_ns_of(l),
                "level {l} split whole"
            );
        }
    }
    assert_eq!(r.stats.oncpu_short_history_ns, 0);
}

/// `--no-runqueue`: the whole own time of a level is split by the samples in it.
#[test]
fn without_runqueue_the_whole_level_is_split() {
    let m = mem(3);
    let r = common::run(&m, common::cfg(), chainrec_chain::View::Chains);
    let cw = format!("{C}{TO_W}");
    let wc = format!("{W}{TO_C}");
    let want: BTreeMap<String, u64> = [
        (format!("{cw};--;[on cpu];worker_loop;handle;spin_compute"), 6_012_000),
        (format!("{cw};--;[on cpu];worker_loop;handle;parse"), 6_012_000),
        (
            format!("{cw};--;[on cpu];worker_loop;handle;spin_compute;-;exc_page_fault;handle_mm_fault;clear_page"),
            3_006_000,
        ),
        (format!("{wc};--;[on cpu: no sample]"), 99_970),
        (format!("{wc};--;[on cpu];client_loop;render"), 9_940_000),
    ]
    .into_iter()
    .collect();
    assert_eq!(r.folded, want);
}

/// The same events without the sampling metadata (a trace recorded with `--no-samples`
/// would have no samples at all): no `[on cpu]` level, the waker keeps its time, as
/// before samples existed.
#[test]
fn no_split_without_sampling() {
    let mut m = mem(3);
    m.meta.extra.retain(|(k, _)| !k.starts_with("sample"));
    m.events
        .retain(|e| !matches!(e, chainrec_format::Event::Sample(_)));
    let r = common::run(&m, common::cfg(), chainrec_chain::View::Chains);
    let cw = format!("{C}{TO_W}");
    let wc = format!("{W}{TO_C}");
    let want: BTreeMap<String, u64> = [(cw, 15_030_000), (wc, 10_039_970)].into_iter().collect();
    assert_eq!(r.folded, want);
    assert!(r.records.iter().all(|w| w.oncpu.is_empty()));
}

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

fn lines(f: &chainrec_chain::oncpu::OnCpuFold) -> BTreeMap<String, u64> {
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
        threads: chainrec_format::ThreadSelector {
            tids: vec![1302],
            ..Default::default()
        },
        ..Filter::default()
    };
    let got = lines(&fold_oncpu(&an, &f, true).unwrap());
    assert_eq!(got.values().sum::<u64>(), 15_000_000);
    assert!(got.keys().all(|l| l.starts_with("cr-worker;")));
    let f = Filter {
        threads: chainrec_format::ThreadSelector {
            kernel_only: true,
            ..Default::default()
        },
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

/// `oncpu-sparse` (100 iterations) in memory with its sampling metadata (period 30 ms).
fn sparse() -> MemTrace {
    common::synth_file("oncpu-sparse", 800, WriterOptions::default()).1
}

const SC: &str = "cr-client;client_loop;read;-;ksys_read;pipe_read;schedule";
const SW: &str = "cr-worker;worker_loop;read;-;ksys_read;pipe_read;schedule";

/// 100 waits of the client, 5.01 ms each, on a worker that computes for 5 ms; a sample of
/// the worker in one wait of three (34 of 100: 17 in `spin_compute`, 17 in `parse`).
/// Sampled waits keep the exact split (5 ms each to their stack). The other 66 hold no
/// sample: each is estimated from the worker's nearest sample, the one 7.12 or 17.12 ms
/// before it (the chain is built at the waking that ends the client's wait, so no later
/// sample is known): 34 from `spin_compute` samples, 32 from `parse`. So `spin_compute`
/// holds 85 + 170 ms and `parse` 85 + 160 ms: the worker's whole 500 ms on CPU, 5 ms per
/// wait. The worker's 100 waits on the client: the client on CPU 4.96 ms in each,
/// sampled in `render` in 33 of the 99 ending in an iteration (exact), estimated from the
/// `render` sample 7.14 or 17.14 ms before in the other 66; the first (99.97 us, before any
/// sample of the client) has no sample near.
#[test]
fn sparse_samples_estimate_the_waits_without_one() {
    let m = sparse();
    let r = common::run(
        &m,
        chainrec_chain::Config::default(),
        chainrec_chain::View::Chains,
    );
    let cw = format!("{SC}{TO_W}");
    let wc = format!("{SW}{TO_C}");
    let want: BTreeMap<String, u64> = [
        (
            format!("{cw};--;[on cpu];worker_loop;handle;spin_compute"),
            85_000_000,
        ),
        (
            format!("{cw};--;[on cpu];worker_loop;handle;parse"),
            85_000_000,
        ),
        (
            format!("{cw};--;[on cpu: estimated];worker_loop;handle;spin_compute"),
            170_000_000,
        ),
        (
            format!("{cw};--;[on cpu: estimated];worker_loop;handle;parse"),
            160_000_000,
        ),
        (format!("{cw};--;[run queue];[idle]"), 1_000_000),
        (format!("{SC};--;[run queue];[idle]"), 2_000_000),
        (format!("{wc};--;[on cpu];client_loop;render"), 163_680_000),
        (
            format!("{wc};--;[on cpu: estimated];client_loop;render"),
            327_360_000,
        ),
        (format!("{wc};--;[on cpu: no sample]"), 99_970),
        (format!("{wc};--;[run queue];[idle]"), 990_000),
        (format!("{SW};--;[run queue];[idle]"), 2_000_000),
    ]
    .into_iter()
    .collect();
    assert_eq!(r.folded, want, "{}", common::show(&r));
    // The worker's function per client wait: 5 ms exactly, sampled or estimated.
    let client_waits = r.records.iter().filter(|w| w.tid == 1401).count() as u64;
    assert_eq!(client_waits, 100);
    let worker_fn: u64 = r
        .folded
        .iter()
        .filter(|(l, _)| l.starts_with(SC) && l.contains(";handle;"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(worker_fn / client_waits, 5_000_000);
    let s = &r.stats;
    assert_eq!(
        (
            s.oncpu_sampled_ns,
            s.oncpu_estimated_ns,
            s.oncpu_no_sample_ns
        ),
        (333_680_000, 657_360_000, 99_970)
    );
    for w in &r.records {
        for (k, h) in w.hops.iter().enumerate() {
            let l = k as u32 + 1;
            assert_eq!(
                h.ns,
                w.runq_ns_of(l) + w.oncpu_ns_of(l),
                "level {l} split whole"
            );
        }
    }
}

/// `--oncpu exact`: the same trace with only the samples inside each level; the estimated
/// lines above are `[on cpu: no sample]`.
#[test]
fn sparse_samples_exact_mode_leaves_no_sample() {
    let m = sparse();
    let cfg = chainrec_chain::Config {
        oncpu: chainrec_chain::OnCpuMode::Exact,
        ..chainrec_chain::Config::default()
    };
    let r = common::run(&m, cfg, chainrec_chain::View::Chains);
    let cw = format!("{SC}{TO_W}");
    let wc = format!("{SW}{TO_C}");
    let want: BTreeMap<String, u64> = [
        (
            format!("{cw};--;[on cpu];worker_loop;handle;spin_compute"),
            85_000_000,
        ),
        (
            format!("{cw};--;[on cpu];worker_loop;handle;parse"),
            85_000_000,
        ),
        (format!("{cw};--;[on cpu: no sample]"), 330_000_000),
        (format!("{cw};--;[run queue];[idle]"), 1_000_000),
        (format!("{SC};--;[run queue];[idle]"), 2_000_000),
        (format!("{wc};--;[on cpu];client_loop;render"), 163_680_000),
        (format!("{wc};--;[on cpu: no sample]"), 327_459_970),
        (format!("{wc};--;[run queue];[idle]"), 990_000),
        (format!("{SW};--;[run queue];[idle]"), 2_000_000),
    ]
    .into_iter()
    .collect();
    assert_eq!(r.folded, want, "{}", common::show(&r));
    assert_eq!(r.stats.oncpu_estimated_ns, 0);
}

/// `oncpu-worker` samples every level but the first wait's, whose client level has no
/// sample near (the client's first sample comes 5.9 ms after it): the estimate changes
/// nothing there, so its exact expectations above hold in both modes.
#[test]
fn dense_samples_are_the_same_in_both_modes() {
    let m = mem(3);
    let exact = chainrec_chain::Config {
        oncpu: chainrec_chain::OnCpuMode::Exact,
        ..chainrec_chain::Config::default()
    };
    let a = common::run(
        &m,
        chainrec_chain::Config::default(),
        chainrec_chain::View::Chains,
    );
    let b = common::run(&m, exact, chainrec_chain::View::Chains);
    assert_eq!(a.folded, b.folded);
    assert_eq!(a.stats.oncpu_estimated_ns, 0);
}

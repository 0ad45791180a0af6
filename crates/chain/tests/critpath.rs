//! Exact critical paths on synthetic traces (`chainrec critical-path`): the segments, their
//! chains and samples, the folded lines (adding up to the window's wall time), the cut at
//! a window, and the errors.
mod common;

use chainrec_chain::critpath::{CritPathOptions, CriticalPath, SegmentKind, Share, Unknown};
use chainrec_chain::{critical_path, Analysis, ChainError};
use chainrec_format::WriterOptions;

const T0: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const US: u64 = 1_000;

/// `oncpu-worker`, three iterations, in chunks of 8 events (the early stop at the window
/// end is exercised across chunks).
fn worker3() -> Analysis {
    let opts = WriterOptions {
        chunk_events: 8,
        ..WriterOptions::default()
    };
    common::synth_file("oncpu-worker", 51, opts).0
}

fn cp(an: &Analysis, tid: u32, window: Option<(u64, u64)>) -> CriticalPath {
    let o = CritPathOptions {
        window,
        parallel: false,
        ..CritPathOptions::new(tid)
    };
    critical_path(an, &o).unwrap()
}

fn check_adds_up(c: &CriticalPath) {
    assert_eq!(c.totals().iter().sum::<u64>(), c.wall_ns());
    let folded: u64 = c.folded_ns().iter().map(|l| l.1).sum();
    assert_eq!(folded, c.wall_ns(), "{:#?}", c.folded_ns());
    let mut t = c.start_ns;
    for s in &c.segments {
        assert_eq!(s.start_ns, t, "segments tile the window");
        t = s.end_ns;
    }
    assert_eq!(t, c.end_ns);
}

const BLOCKED: &str = "cr-client;[blocked];client_loop;read;-;ksys_read;pipe_read;schedule;--;\
try_to_wake_up;pipe_write;ksys_write;-;write;worker_loop;cr-worker";

/// The client of `oncpu-worker` over its whole life (the trace): per iteration, it runs
/// 110 us (no sample), blocks 5.01 ms on the worker (runnable 10 us behind idle, then on
/// CPU 5 ms: 5 samples), waits 20 us for CPU 0 (idle), then runs 4.97 ms (`render`
/// samples). The trace starts 10 ns before the client's first switch-in, and ends at
/// +29 ms, cutting the last running segment (3 samples inside). Each running segment keeps
/// its own samples (the first has none); the folded lines split the running time by all 11.
#[test]
fn client_of_the_worker() {
    let an = worker3();
    let c = cp(&an, 1301, None);
    check_adds_up(&c);
    assert_eq!((c.start_ns, c.end_ns), (T0, T0 + 29 * MS));
    assert_eq!((c.comm.as_str(), c.tgid), ("cr-client", 1300));
    assert_eq!(c.period_ns, Some(MS));
    let kinds: Vec<(&str, u64)> = c
        .segments
        .iter()
        .map(|s| (s.kind.name(), s.start_ns - T0))
        .collect();
    let mut want = vec![("unknown", 0), ("running", 10)];
    for i in 0..3 {
        let t = i * 10 * MS;
        want.extend([
            ("blocked", t + 110 * US),
            ("runnable", t + 5120 * US),
            ("running", t + 5140 * US),
        ]);
    }
    assert_eq!(kinds, want);
    assert_eq!(
        c.segments[0].kind,
        SegmentKind::Unknown(Unknown::BeforeTrace)
    );
    assert_eq!(
        c.totals(),
        [
            110 * US - 10 + 2 * 4970 * US + 3860 * US,
            60 * US,
            15030 * US,
            10
        ]
    );
    let SegmentKind::Blocked(b) = &c.segments[2].kind else {
        panic!("{:?}", c.segments[2])
    };
    assert_eq!(b.levels.len(), 1);
    let l = &b.levels[0];
    assert_eq!(
        (l.name.as_str(), l.tid, l.ns, l.own_ns),
        ("cr-worker", 1302, 5010 * US, 0)
    );
    let share = |f: &[&str], samples: u64, ns: u64| Share {
        frames: f.iter().map(|s| s.to_string()).collect(),
        samples,
        ns,
    };
    assert_eq!(l.runq, [share(&["[run queue]", "[idle]"], 0, 10 * US)]);
    assert_eq!(
        l.oncpu,
        [
            share(
                &["[on cpu]", "worker_loop", "handle", "spin_compute"],
                0,
                2 * MS
            ),
            share(&["[on cpu]", "worker_loop", "handle", "parse"], 0, 2 * MS),
            share(
                &[
                    "[on cpu]",
                    "worker_loop",
                    "handle",
                    "spin_compute",
                    "-",
                    "exc_page_fault",
                    "handle_mm_fault",
                    "clear_page"
                ],
                0,
                MS
            ),
        ]
    );
    assert_eq!(
        c.segments[3].kind,
        SegmentKind::Runnable {
            preempted: false,
            behind: vec![share(&["[idle]"], 0, 20 * US)]
        }
    );
    assert_eq!(
        c.segments[4].kind,
        SegmentKind::Running {
            stacks: vec![share(&["client_loop", "render"], 4, 4970 * US)]
        }
    );
    assert_eq!(c.stats.samples, 11);
    let folded = c.folded_ns();
    // Running time (13.91 ms) split by the window's 11 samples, all `render`.
    let want: Vec<(String, u64)> = [
        ("cr-client;[running];client_loop;render".to_string(), 13_909_990),
        ("cr-client;[off cpu since before the trace]".into(), 10),
        (format!("{BLOCKED};--;[run queue];[idle]"), 30 * US),
        (
            format!("{BLOCKED};--;[on cpu];worker_loop;handle;spin_compute"),
            6 * MS,
        ),
        (format!("{BLOCKED};--;[on cpu];worker_loop;handle;parse"), 6 * MS),
        (
            format!("{BLOCKED};--;[on cpu];worker_loop;handle;spin_compute;-;exc_page_fault;handle_mm_fault;clear_page"),
            3 * MS,
        ),
        ("cr-client;[runnable];behind [idle]".into(), 60 * US),
    ]
    .into_iter()
    .collect();
    assert_eq!(folded, want);
}

/// The blocked lines are the `chains` lines of the same waits with `[blocked]` after the
/// comm (the waits' own run-queue level, `comm;stack;--;[run queue];[idle]`, is the
/// runnable segment instead).
#[test]
fn blocked_lines_are_the_chains_lines() {
    let an = worker3();
    let c = cp(&an, 1301, None);
    let setup = chainrec_chain::Setup {
        dedup: chainrec_chain::Dedup::Off,
        filter: chainrec_chain::Filter {
            threads: chainrec_format::ThreadSelector {
                tids: vec![1301],
                ..Default::default()
            },
            ..Default::default()
        },
        ..Default::default()
    };
    let (_, graph) = an
        .fold(setup, chainrec_chain::View::Chains, |_| {})
        .unwrap();
    let chains: std::collections::BTreeMap<String, u64> = graph
        .folded_ns()
        .into_iter()
        .filter(|(l, _)| l.contains(";cr-worker"))
        .map(|(l, w)| (l.replacen("cr-client;", "cr-client;[blocked];", 1), w))
        .collect();
    let ours: std::collections::BTreeMap<String, u64> = c
        .folded_ns()
        .into_iter()
        .filter(|(l, _)| l.starts_with("cr-client;[blocked]"))
        .collect();
    assert_eq!(ours, chains);
}

/// A window cutting a running and a blocked segment: the running part keeps the samples
/// inside the window; the blocked part keeps 1.89 ms of the worker level, its run-queue and
/// on-CPU parts scaled to it (largest remainder: they add up exactly).
#[test]
fn a_window_cuts_segments() {
    let an = worker3();
    let c = cp(&an, 1301, Some((T0 + 7 * MS, T0 + 12 * MS)));
    check_adds_up(&c);
    assert_eq!(c.segments.len(), 2);
    assert_eq!(c.stats.cut_segments, 2);
    assert_eq!(
        c.segments[1].cut_from,
        Some((T0 + 10_110 * US, Some(T0 + 15_120 * US)))
    );
    let want: Vec<(String, u64)> = [
        ("cr-client;[running];client_loop;render".to_string(), 3110 * US),
        (format!("{BLOCKED};--;[run queue];[idle]"), 3772),
        (format!("{BLOCKED};--;[on cpu];worker_loop;handle;spin_compute"), 754_491),
        (format!("{BLOCKED};--;[on cpu];worker_loop;handle;parse"), 754_491),
        (
            format!("{BLOCKED};--;[on cpu];worker_loop;handle;spin_compute;-;exc_page_fault;handle_mm_fault;clear_page"),
            377_246,
        ),
    ]
    .into_iter()
    .collect();
    assert_eq!(c.folded_ns(), want);
    assert_eq!(c.stats.samples, 3);
}

/// pipe-relay: cr-sink blocked from +5.08 ms to +15.05 ms behind cr-relay (its share
/// [15.02, 15.05) ms), cr-timer ([15.00, 15.02)) and the timer hardirq (the rest). A
/// window [15.01, 15.03) ms gives each level exactly the time its share has inside: 10 us
/// for the relay and the timer, none for the hardirq.
#[test]
fn a_window_cuts_each_level_where_its_time_lies() {
    let (an, _) = common::synth_file("pipe-relay", 27, WriterOptions::default());
    let c = cp(&an, 103, Some((T0 + 15_010 * US, T0 + 15_030 * US)));
    check_adds_up(&c);
    let [s] = &c.segments[..] else {
        panic!("{:?}", c.segments)
    };
    let SegmentKind::Blocked(b) = &s.kind else {
        panic!("{s:?}")
    };
    let ns: Vec<(&str, u64)> = b.levels.iter().map(|l| (l.name.as_str(), l.ns)).collect();
    assert_eq!(
        ns,
        [
            ("cr-relay", 10 * US),
            ("cr-timer", 10 * US),
            ("[hardirq: timer]", 0)
        ]
    );
    // Whole wait: the levels' full shares.
    let c = cp(&an, 103, Some((T0 + 5 * MS, T0 + 16 * MS)));
    check_adds_up(&c);
    let b = c
        .segments
        .iter()
        .find_map(|s| match &s.kind {
            SegmentKind::Blocked(b) if s.start_ns == T0 + 5080 * US => Some(b),
            _ => None,
        })
        .unwrap();
    let ns: Vec<u64> = b.levels.iter().map(|l| l.ns).collect();
    assert_eq!(ns, [30 * US, 20 * US, 9920 * US]);
}

/// A preempted CPU-bound thread (no samples in this scenario): running segments without
/// stacks, runnable segments marked preempted, behind the thread that took the CPU.
#[test]
fn preempted_worker() {
    let (an, _) = common::synth_file("preemption", 8, WriterOptions::default());
    let c = cp(&an, 701, None);
    check_adds_up(&c);
    assert_eq!(c.period_ns, None);
    let preempted: Vec<&SegmentKind> = c
        .segments
        .iter()
        .map(|s| &s.kind)
        .filter(|k| matches!(k, SegmentKind::Runnable { .. }))
        .collect();
    assert_eq!(preempted.len(), 2);
    for k in preempted {
        let SegmentKind::Runnable { preempted, behind } = k else {
            unreachable!()
        };
        assert!(preempted);
        assert_eq!(behind[0].frames, ["cr-tick"]);
        assert_eq!(behind[0].ns, 95 * US);
    }
    let folded = c.folded_ns();
    assert_eq!(
        folded[1],
        ("cr-worker;[runnable];behind cr-tick".into(), 190 * US)
    );
    assert_eq!(folded[0].0, "cr-worker;[running]");
}

#[test]
fn bad_input_is_a_typed_error() {
    let an = worker3();
    let o = |tid: u32, window: Option<(u64, u64)>| {
        critical_path(
            &an,
            &CritPathOptions {
                window,
                ..CritPathOptions::new(tid)
            },
        )
    };
    assert!(matches!(o(4242, None), Err(ChainError::NoSuchThread(4242))));
    assert!(matches!(
        o(1301, Some((T0 + 100 * MS, T0 + 200 * MS))),
        Err(ChainError::WindowOutside { .. })
    ));
    assert!(matches!(
        o(1301, Some((T0 + MS, T0 + MS))),
        Err(ChainError::EmptyWindow)
    ));
    let e = o(4242, None).unwrap_err().to_string();
    assert!(e.contains("thread 4242 does not appear"), "{e}");
}

/// `pid-reuse`: every child of cr-parent has tid 901 (kinds 0, 1, 2 per 10 ms iteration:
/// crates/format/src/synth/exact.rs). A thread's timeline ends at its final switch-out and
/// never runs into the next thread with the same tid.
#[test]
fn pid_reuse_keeps_threads_apart() {
    let (an, _) = common::synth_file("pid-reuse", 13 * 6, WriterOptions::default());
    let kinds = |c: &CriticalPath| -> Vec<(String, u64, u64)> {
        c.segments
            .iter()
            .map(|s| {
                let k = match &s.kind {
                    SegmentKind::Unknown(u) => u.label().to_string(),
                    SegmentKind::Blocked(b) => format!("blocked{}", b.note.unwrap_or("")),
                    k => k.name().to_string(),
                };
                (k, (s.start_ns - T0) / US, (s.end_ns - T0) / US)
            })
            .collect()
    };
    let seg = |k: &str, a: u64, b: u64| (k.to_string(), a, b);
    // The first child, in a window that runs into the second one's life: it runs, sleeps
    // on the timer, exits, is preempted, wakes the parent, and switches out dead at
    // +1340 us; from there it is gone, whatever runs later as tid 901.
    let c = cp(&an, 901, Some((T0, T0 + 15 * MS)));
    check_adds_up(&c);
    assert_eq!(
        kinds(&c),
        vec![
            seg("runnable", 0, 20),
            seg("running", 20, 100),
            seg("blocked", 100, 1100),
            seg("runnable", 1100, 1110),
            seg("running", 1110, 1310),
            seg("runnable", 1310, 1330),
            seg("running", 1330, 1340),
            seg("[exited]", 1340, 15_000),
        ]
    );
    // A window after the third child (kind 2) vanished blocked at +21.21 ms: the fourth
    // child, first seen switched in at +30.02 ms (its fork lost), is a thread of its own;
    // the third one's open wait is not a blocked segment reaching into it.
    let c = cp(&an, 901, Some((T0 + 25 * MS, T0 + 35 * MS)));
    check_adds_up(&c);
    assert_eq!(
        kinds(&c),
        vec![
            seg("[not yet created]", 25_000, 30_020),
            seg("running", 30_020, 30_100),
            seg("blocked", 30_100, 31_100),
            seg("runnable", 31_100, 31_110),
            seg("running", 31_110, 31_310),
            seg("runnable", 31_310, 31_330),
            seg("running", 31_330, 31_340),
            seg("[exited]", 31_340, 35_000),
        ]
    );
    // A window that starts after the first child's end (+1.34 ms) and holds the second
    // child's fork (+10 ms): the window's thread is the second child, not the first one's
    // `[exited]` (before the checkpoint-resumed critical paths, the scan stopped reading
    // at the first child's end).
    let c = cp(&an, 901, Some((T0 + 5 * MS, T0 + 12 * MS)));
    check_adds_up(&c);
    assert_eq!(
        kinds(&c),
        vec![
            seg("[not yet created]", 5_000, 10_000),
            seg("runnable", 10_000, 10_020),
            seg("running", 10_020, 10_100),
            seg("blocked", 10_100, 11_100),
            seg("runnable", 11_100, 11_110),
            seg("running", 11_110, 11_210),
            seg("[exited]", 11_210, 12_000),
        ]
    );
    // No window: the last thread with the tid (the sixth child, forked at +50 ms), still
    // blocked when the trace ends at +59.91 ms.
    let c = cp(&an, 901, None);
    check_adds_up(&c);
    assert_eq!(c.start_ns, T0 + 50 * MS);
    assert_eq!(
        kinds(&c),
        vec![
            seg("runnable", 50_000, 50_020),
            seg("running", 50_020, 50_100),
            seg("blocked", 50_100, 51_100),
            seg("runnable", 51_100, 51_110),
            seg("running", 51_110, 51_210),
            seg("blocked[still blocked at trace end]", 51_210, 59_910),
        ]
    );
}

/// Several threads in one run (`critical-path -t A,B`, `export --critical-path A,B`): one
/// engine run, and each path equal to its thread's own run, with and without a window (the
/// early stop at the window end comes once every thread is past it), a thread asked twice,
/// and the first failing thread as the error.
#[test]
fn several_threads_in_one_run_equal_separate_runs() {
    use chainrec_chain::critical_paths;
    let an = worker3();
    for window in [None, Some((T0 + 3 * MS, T0 + 12 * MS))] {
        let o = CritPathOptions {
            window,
            parallel: false,
            ..CritPathOptions::new(0)
        };
        let tids = [1302, 1301, 1302];
        let before = an.engine_runs();
        let together = critical_paths(&an, &tids, &o).unwrap();
        assert_eq!(
            an.engine_runs(),
            before + 1,
            "one engine run for all threads"
        );
        let alone: Vec<CriticalPath> = tids.iter().map(|&t| cp(&an, t, window)).collect();
        assert_eq!(an.engine_runs(), before + 1 + tids.len());
        assert_eq!(together, alone, "window {window:?}");
        assert_ne!(together[0], together[1]);
    }
    let o = CritPathOptions {
        parallel: false,
        ..CritPathOptions::new(0)
    };
    // pid-reuse, chunks of 8 events: tid 901 ends (its window stops reading) long before
    // its parent does, and each keeps exactly what its own run reads.
    let opts = WriterOptions {
        chunk_events: 8,
        ..WriterOptions::default()
    };
    let (reuse, _) = common::synth_file("pid-reuse", 13 * 6, opts);
    for window in [
        Some((T0, T0 + 15 * MS)),
        Some((T0 + 25 * MS, T0 + 35 * MS)),
        None,
    ] {
        let o = CritPathOptions {
            window,
            parallel: false,
            ..CritPathOptions::new(0)
        };
        let together = critical_paths(&reuse, &[901, 900], &o).unwrap();
        let alone = [cp(&reuse, 901, window), cp(&reuse, 900, window)];
        assert_eq!(together, alone, "pid-reuse, window {window:?}");
    }
    let err = critical_paths(&an, &[1301, 4242, 4343], &o).unwrap_err();
    assert!(matches!(err, ChainError::NoSuchThread(4242)), "{err}");
}

//! Checkpoints (`Analysis::checkpoints`, `Analysis::fold_from`): a run resumed from the
//! engine's state at a chunk boundary gives, byte for byte, the folded output and the
//! counters of the whole decode of the same window, for random windows and windows at
//! chunk and checkpoint edges, on every synthetic scenario (busy-server with run-queue
//! levels, fork churn and PID reuse, samples, cgroups, lost events...).

use chainrec_chain::{Analysis, Duration, Filter, Grid, Setup, Unit, View};
use chainrec_format::synth::{self, SynthParams, Tracker};
use chainrec_format::{TraceReader, TraceWriter, WriterOptions};
use chainrec_testkit::scratch::dir as scratch;
use std::path::Path;

/// Scenario `name` with its own metadata, in chunks of 97 events (many boundaries).
fn write(path: &Path, name: &str, events: u64) {
    let params = SynthParams { events, seed: 7 };
    let mut meta = synth::meta(name, &params, vec![]);
    let opts = WriterOptions {
        chunk_events: 97,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::create(path, &meta, opts).unwrap();
    let mut track = Tracker::new(&mut w);
    (synth::find(name).unwrap().generate)(&params, &mut track).unwrap();
    track.complete(&mut meta);
    w.finish(&meta).unwrap();
}

/// Scenario `name` written to `dir` and opened, its time span, and about 12 checkpoints of
/// the plain setup over it.
fn with_checkpoints(
    dir: &Path,
    name: &str,
    events: u64,
) -> (Analysis, u64, u64, chainrec_chain::Checkpoints) {
    let path = dir.join(format!("{name}.zst"));
    write(&path, name, events);
    let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
    let (first, last) = an.reader().time_span().unwrap();
    let cps = an
        .checkpoints(&setup((0, 0)), ((last - first) / 12).max(1), |_| {})
        .unwrap();
    (an, first, last, cps)
}

fn setup(window: (u64, u64)) -> Setup {
    Setup {
        filter: Filter {
            window: Some(window),
            duration: Duration::Blocked,
            ..Filter::default()
        },
        ..Setup::default()
    }
}

/// Folded text (ns) and counters of a run.
fn fold(
    an: &Analysis,
    w: (u64, u64),
    cps: Option<&chainrec_chain::Checkpoints>,
) -> (Vec<u8>, String, usize) {
    let (summary, graph) = an.fold_from(setup(w), View::Chains, cps, |_| {}).unwrap();
    let mut out = Vec::new();
    graph.write_folded(Unit::Ns, &mut out).unwrap();
    (out, format!("{:?}", summary.stats), summary.chunks.start)
}

/// A small deterministic generator (xorshift): windows to try.
struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[test]
fn resumed_runs_equal_whole_decodes() {
    let dir = scratch("checkpoint");
    let mut resumed_total = 0;
    for sc in synth::scenarios() {
        let events = if sc.name == "busy-server" {
            60_000
        } else {
            6_000
        };
        let (an, first, last, cps) = with_checkpoints(&dir, sc.name, events);
        let span = last - first;
        assert!(cps.len() >= 4, "{}: {} checkpoints", sc.name, cps.len());
        let mut windows = Vec::new();
        // At checkpoint edges: the first time a checkpoint may serve, the time it may not.
        for (_, t) in cps.chunks() {
            windows.push((t + 1, (t + span / 10).min(last)));
            windows.push((t, (t + span / 20).min(last)));
        }
        // At chunk edges: a window starting at a chunk's first event, or just before it.
        let starts: Vec<u64> = an.reader().chunks().iter().map(|c| c.first_ts).collect();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ events);
        for _ in 0..6 {
            let s = starts[rng.below(starts.len() as u64) as usize];
            windows.push((s, s + rng.below(span / 5)));
            windows.push((s.saturating_sub(1), s + rng.below(span / 5)));
        }
        // Random.
        for _ in 0..10 {
            let a = first + rng.below(span);
            windows.push((a, a + rng.below(span / 4)));
        }
        let mut resumed = 0;
        for &w in &windows {
            let (want, want_stats, start) = fold(&an, w, None);
            assert_eq!(start, 0);
            let (got, got_stats, from) = fold(&an, w, Some(&cps));
            assert!(
                want == got,
                "{} window {w:?} resumed at chunk {from}: folded output differs",
                sc.name
            );
            assert_eq!(want_stats, got_stats, "{} window {w:?}", sc.name);
            resumed += usize::from(from > 0);
        }
        let (used, not) = cps.uses();
        assert_eq!((used + not) as usize, windows.len());
        assert_eq!(used as usize, resumed);
        resumed_total += resumed;
        // Most windows start after the first checkpoint.
        assert!(
            resumed * 2 >= windows.len(),
            "{}: {resumed} resumed",
            sc.name
        );
    }
    assert!(resumed_total > 100, "{resumed_total}");
}

/// Checkpoints taken on one thread while runs on another resume from those taken so far
/// (`chainrec serve` answers while it indexes): every run equals the whole decode, and
/// once the pass is complete the set is the one `Analysis::checkpoints` takes.
#[test]
fn runs_during_the_checkpoint_pass_equal_whole_decodes() {
    let dir = scratch("checkpoint-concurrent");
    let path = dir.join("busy-server.zst");
    write(&path, "busy-server", 60_000);
    let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
    let (first, last) = an.reader().time_span().unwrap();
    let span = last - first;
    let every = (span / 12).max(1);
    let whole_set = an.checkpoints(&setup((0, 0)), every, |_| {}).unwrap();
    let windows: Vec<(u64, u64)> = (1..=8)
        .map(|i| {
            let a = first + span * i / 9;
            (a, a + span / 15)
        })
        .collect();
    let wants: Vec<_> = windows.iter().map(|&w| fold(&an, w, None)).collect();
    let growing = an.no_checkpoints(&setup((0, 0)));
    assert!(growing.is_empty() && !growing.is_complete());
    let check = |taken: usize| {
        for (w, want) in windows.iter().zip(&wants) {
            let got = fold(&an, *w, Some(&growing));
            assert!(got.0 == want.0, "window {w:?} with {taken} checkpoints");
            assert_eq!(got.1, want.1, "window {w:?} with {taken} checkpoints");
        }
    };
    // The pass holds after its first checkpoint until the runs have used it alone.
    let released = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            an.take_checkpoints(&growing, every, false, |_| {
                while growing.len() == 1 && !released.load(std::sync::atomic::Ordering::Acquire) {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            })
            .unwrap()
        });
        // A pass that died would leave these loops waiting: bounded.
        let t0 = std::time::Instant::now();
        let alive = || assert!(t0.elapsed().as_secs() < 120, "checkpoint pass stalled");
        while growing.is_empty() {
            alive();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        check(1);
        let (resumed, _) = growing.uses();
        assert!(resumed > 0, "no run resumed from the first checkpoint");
        released.store(true, std::sync::atomic::Ordering::Release);
        while !growing.is_complete() {
            alive();
            check(growing.len());
        }
        check(growing.len());
    });
    assert_eq!(growing.chunks(), whole_set.chunks());
}

/// Checkpoints on a grid of times (`take_checkpoints_on_grid`, the explorer's: right before
/// the chunk that reaches each time, as the heat map's columns start): a window starting
/// at a grid time resumes from the checkpoint before it, with no chunk before the one that
/// holds that time decoded; at most `max` of them, the earliest; every run, at grid times,
/// just before them and at random, equals the whole decode.
#[test]
fn grid_checkpoints_serve_windows_from_their_times() {
    let dir = scratch("checkpoint-grid");
    for sc in synth::scenarios() {
        let path = dir.join(format!("{}.zst", sc.name));
        write(&path, sc.name, 6_000);
        let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
        let (first, last) = an.reader().time_span().unwrap();
        let span = last - first;
        let grid = Grid {
            origin_ns: first.saturating_sub(span / 30),
            step_ns: (span / 10).max(1),
            max: 7,
        };
        let cps = an.no_checkpoints(&setup((0, 0)));
        an.take_checkpoints_on_grid(&cps, grid, false, |_| {})
            .unwrap();
        assert!(cps.is_complete());
        let points = cps.chunks();
        assert_eq!(points.len(), 7, "{}: {points:?}", sc.name);
        let mut windows = Vec::new();
        let mut prev = 0;
        for (k, &(chunk, last_ns)) in points.iter().enumerate() {
            // The grid time it stands before: the first after its last event, the k-th
            // of the grid after the trace start (a chunk reaching two times takes one).
            let t =
                grid.origin_ns + (((last_ns - grid.origin_ns) / grid.step_ns) + 1) * grid.step_ns;
            assert!(last_ns < t && chunk > 0, "{}: {k}", sc.name);
            // Right before the chunk that reaches t: the next one could not serve it.
            let c = &an.reader().chunks()[chunk];
            assert!(
                c.first_ts.max(c.last_ts) >= t,
                "{}: checkpoint {k}",
                sc.name
            );
            assert!(t > prev, "{}: two checkpoints for one time", sc.name);
            prev = t;
            let w = (t, (t + span / 10).min(last));
            let (want, want_stats, _) = fold(&an, w, None);
            let (got, got_stats, from) = fold(&an, w, Some(&cps));
            assert_eq!(from, chunk, "{}: window at grid time {t}", sc.name);
            assert!(
                want == got,
                "{} window {w:?}: folded output differs",
                sc.name
            );
            assert_eq!(want_stats, got_stats, "{} window {w:?}", sc.name);
            windows.push((t - 1, (t + span / 20).min(last)));
        }
        let mut rng = Rng(0x51ed_270b ^ span);
        for _ in 0..6 {
            let a = first + rng.below(span);
            windows.push((a, a + rng.below(span / 4)));
        }
        for w in windows {
            let (want, want_stats, _) = fold(&an, w, None);
            let (got, got_stats, _) = fold(&an, w, Some(&cps));
            assert!(
                want == got,
                "{} window {w:?}: folded output differs",
                sc.name
            );
            assert_eq!(want_stats, got_stats, "{} window {w:?}", sc.name);
        }
    }
}

/// Critical paths (`/api/critpath` of `chainrec serve`) resumed from the checkpoints of an
/// ordinary chains setup (with dedup; the critical path's run has none) equal the whole
/// decode, error or path, for threads that come and go (fork churn, PID reuse), every
/// scenario, windows at checkpoint edges and random ones; runs that skip ahead to later
/// checkpoints (their thread idle in between) included.
#[test]
fn resumed_critical_paths_equal_whole_decodes() {
    use chainrec_chain::critpath::CritPathOptions;
    use chainrec_chain::{critical_path, critical_path_from};
    use chainrec_format::{Event, Tid};
    let dir = scratch("checkpoint-critpath");
    let (mut resumed_total, mut skipped_total) = (0, 0);
    for sc in synth::scenarios() {
        let (an, first, last, cps) = with_checkpoints(&dir, sc.name, 6_000);
        let span = last - first;
        // The threads of the trace: switched in or out, forked, or in the task table.
        let mut tids: Vec<Tid> = an.tables().tasks.keys().copied().collect();
        let mut evs = Vec::new();
        for c in 0..an.reader().chunks().len() {
            an.reader().decode_chunk(c, &mut evs).unwrap();
            for e in &evs {
                match e {
                    Event::Switch(s) => tids.extend([s.prev_tid, s.next_tid]),
                    Event::WakeupNew(n) => tids.push(n.child_tid),
                    _ => {}
                }
            }
        }
        tids.sort_unstable();
        tids.dedup();
        let mut rng = Rng(0x51ed_270b_27c6_a3f1 ^ tids.len() as u64);
        let mut windows: Vec<(u64, u64)> = cps
            .chunks()
            .iter()
            .flat_map(|&(_, t)| [(t + 1, (t + span / 8).min(last)), (t, t + span / 20)])
            .collect();
        for _ in 0..6 {
            let a = first + rng.below(span);
            windows.push((a, a + 1 + rng.below(span / 3)));
        }
        let mut resumed = 0;
        for &w in &windows {
            // A few threads per window, the busiest first (the table's order is by tid).
            for _ in 0..4 {
                let tid = tids[rng.below(tids.len() as u64) as usize];
                let opts = CritPathOptions {
                    window: Some(w),
                    parallel: false,
                    ..CritPathOptions::new(tid)
                };
                let want = format!("{:?}", critical_path(&an, &opts));
                let (used_before, _) = cps.uses();
                let got = format!("{:?}", critical_path_from(&an, &opts, Some(&cps), None));
                assert!(
                    want == got,
                    "{} tid {tid} window {w:?}:\nwhole:   {want}\nresumed: {got}",
                    sc.name
                );
                resumed += (cps.uses().0 - used_before) as usize;
            }
        }
        assert!(resumed > 0, "{}: no critical path resumed", sc.name);
        resumed_total += resumed;
        skipped_total += cps.skipped();
    }
    assert!(resumed_total > 100, "{resumed_total}");
    assert!(skipped_total > 50, "{skipped_total} skips");
}

/// A run whose [`chainrec_chain::Cancel`] is set stops with `ChainError::Cancelled` (graph,
/// waits and critical path, as `serve` runs them); one whose flag is never set gives what
/// the run without a flag gives; setting it from another thread mid-run stops the run.
#[test]
fn cancelled_runs_stop() {
    use chainrec_chain::critpath::CritPathOptions;
    use chainrec_chain::{critical_path_from, Cancel, ChainError, FoldedSink, View};
    let dir = scratch("checkpoint-cancel");
    let path = dir.join("busy-server.zst");
    write(&path, "busy-server", 60_000);
    let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
    let (first, last) = an.reader().time_span().unwrap();
    let w = (first + (last - first) / 3, last);
    let cancelled = Cancel::new();
    cancelled.cancel();
    let fresh = Cancel::new();
    let fold = |c: Option<&Cancel>| {
        an.fold_from_until(setup(w), View::Chains, None, c, |_| {})
            .map(|(_, g)| {
                let mut out = Vec::new();
                g.write_folded(Unit::Ns, &mut out).unwrap();
                out
            })
    };
    assert!(matches!(fold(Some(&cancelled)), Err(ChainError::Cancelled)));
    assert!(fold(Some(&fresh)).unwrap() == fold(None).unwrap());
    let mut sink = FoldedSink::new(View::Chains);
    assert!(matches!(
        an.run_from_until(setup(w), &mut sink, None, &cancelled),
        Err(ChainError::Cancelled)
    ));
    let tid = *an.tables().tasks.keys().next().unwrap();
    let opts = CritPathOptions {
        window: Some(w),
        ..CritPathOptions::new(tid)
    };
    assert!(matches!(
        critical_path_from(&an, &opts, None, Some(&cancelled)),
        Err(ChainError::Cancelled)
    ));
    // From another thread, after the run has begun: it stops within a chunk of 97 events.
    let late = Cancel::new();
    let mut chunks = 0;
    let r = std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let setter = late.clone();
        s.spawn(move || {
            rx.recv().unwrap();
            setter.cancel();
        });
        an.fold_from_until(
            setup((first, last)),
            View::Chains,
            None,
            Some(&late),
            |_| {
                chunks += 1;
                if chunks == 3 {
                    tx.send(()).unwrap();
                    while !late.is_cancelled() {
                        std::thread::yield_now();
                    }
                }
            },
        )
        .map(|_| ())
    });
    assert!(matches!(r, Err(ChainError::Cancelled)), "{r:?}");
    assert_eq!(
        chunks, 3,
        "stopped after the chunk in which it was cancelled"
    );
}

/// Runs with a thread, state or duration filter beside the window (the explorer's header
/// filters; dedup off by default with a thread filter) resume from the checkpoints of the
/// plain setup and equal the whole decode, byte for byte, on every scenario.
#[test]
fn filtered_runs_resume_and_equal_whole_decodes() {
    use chainrec_chain::regex::Regex;
    use chainrec_format::ThreadSelector;
    let dir = scratch("checkpoint-filtered");
    let (mut resumed_total, mut nonempty) = (0, 0);
    for sc in synth::scenarios() {
        let (an, first, last, cps) = with_checkpoints(&dir, sc.name, 6_000);
        let span = last - first;
        let mut tasks: Vec<_> = an.tables().tasks.values().collect();
        tasks.sort_by_key(|t| t.tid);
        let Some(task) = tasks.get(tasks.len() / 2) else {
            continue;
        };
        let comm = regex::escape(&task.comm.as_str());
        // A comm regex, a process, a minimum duration, each beside the window.
        let make = |kind: usize, w: (u64, u64)| {
            let mut s = setup(w);
            match kind {
                0 => {
                    s.filter.threads = ThreadSelector {
                        comm: Some(Regex::new(&comm).unwrap()),
                        ..ThreadSelector::default()
                    }
                }
                1 => {
                    s.filter.threads = ThreadSelector {
                        pids: vec![task.tgid],
                        ..ThreadSelector::default()
                    }
                }
                2 => s.filter.min_ns = Some(100_000),
                // Frames above the thread: given at emission, after the window's start.
                _ => s.process_frames = true,
            }
            s
        };
        let mut rng = Rng(0x2545_f491_4f6c_dd1d ^ span);
        for kind in 0..4 {
            for _ in 0..6 {
                let a = first + rng.below(span);
                let w = (a, a + 1 + rng.below(span / 3));
                let fold_with = |cps: Option<&chainrec_chain::Checkpoints>| {
                    let (summary, graph) = an
                        .fold_from(make(kind, w), View::Chains, cps, |_| {})
                        .unwrap();
                    let mut out = Vec::new();
                    graph.write_folded(Unit::Ns, &mut out).unwrap();
                    (out, format!("{:?}", summary.stats), summary.chunks.start)
                };
                let (want, want_stats, _) = fold_with(None);
                let (got, got_stats, from) = fold_with(Some(&cps));
                assert!(
                    want == got,
                    "{} window {w:?} resumed at chunk {from}: folded output differs",
                    sc.name
                );
                assert_eq!(want_stats, got_stats, "{} window {w:?}", sc.name);
                resumed_total += usize::from(from > 0);
                nonempty += usize::from(!want.is_empty());
            }
        }
    }
    assert!(resumed_total > 50, "{resumed_total}");
    assert!(nonempty > 50, "{nonempty} of the runs have a chain");
}

/// `--process-frames` puts one `[process: …]` frame above each waiting thread and changes
/// nothing else: without that first frame, the lines (summed per text) are the plain
/// run's, on every scenario.
#[test]
fn process_frames_only_add_the_process_above_the_thread() {
    use std::collections::BTreeMap;
    let dir = scratch("process-frames");
    for sc in synth::scenarios() {
        let path = dir.join(format!("{}.zst", sc.name));
        write(&path, sc.name, 3_000);
        let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
        let lines = |process_frames: bool| {
            let s = Setup {
                process_frames,
                ..Setup::default()
            };
            let (_, graph) = an.fold(s, View::Chains, |_| {}).unwrap();
            let mut out = Vec::new();
            graph.write_folded(Unit::Ns, &mut out).unwrap();
            String::from_utf8(out).unwrap()
        };
        let (plain, grouped) = (lines(false), lines(true));
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        for l in plain.lines() {
            let (path, w) = l.rsplit_once(' ').unwrap();
            *want.entry(path.to_string()).or_default() += w.parse::<u64>().unwrap();
        }
        let mut got: BTreeMap<String, u64> = BTreeMap::new();
        for l in grouped.lines() {
            let (path, w) = l.rsplit_once(' ').unwrap();
            let (process, rest) = path.split_once(';').unwrap();
            assert!(
                process.starts_with("[process: ") && process.ends_with(']'),
                "{}: {l}",
                sc.name
            );
            *got.entry(rest.to_string()).or_default() += w.parse::<u64>().unwrap();
        }
        assert_eq!(got, want, "{}", sc.name);
    }
}

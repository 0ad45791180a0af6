//! Tests on the real kernel: record the built-in chain workload with BPF and check the
//! trace. Needs root (or CAP_BPF + CAP_PERFMON); without it they print
//! "SKIPPED: needs root/BPF" and pass, unless CHAINREC_REQUIRE_BPF=1.
//!
//! The tests share one mutex: two recorders at once would see each other's events.

use chainrec_format::*;
use chainrec_record::workload::{self, WorkloadOptions, WorkloadReport};
use chainrec_record::{record, RecordError, RecordOptions, RecordSummary, StopCondition};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// Some(reason) when BPF recording is not possible here (the test kit's gate).
fn skip_reason() -> Option<String> {
    chainrec_testkit::bpf::unavailable().map(String::from)
}

/// The test kit's loud skip (a failure under CHAINREC_REQUIRE_BPF=1).
fn skipped(reason: &str) {
    chainrec_testkit::bpf::skip("real_kernel", reason);
}

/// `name` in this process's scratch directory.
fn tmp(name: &str) -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| chainrec_testkit::scratch::dir("real"))
        .join(name)
}

/// Record while the workload runs. Err(reason) = not permitted (skip).
fn record_workload(
    out: &Path,
    mode: StackMode,
    wl: WorkloadOptions,
) -> Result<(RecordSummary, WorkloadReport), String> {
    record_workload_with(
        RecordOptions {
            output: out.to_path_buf(),
            stack_mode: mode,
            status_line: false,
            command_line: vec!["real_kernel test".into()],
            ..RecordOptions::default()
        },
        wl,
    )
}

/// A recorder running on its own thread, started and attached.
struct Recording {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Result<RecordSummary, RecordError>>,
}

impl Recording {
    /// Ask the recorder to finish its file and return its summary.
    fn stop(self) -> RecordSummary {
        self.stop.store(true, Ordering::SeqCst);
        self.handle.join().unwrap().expect("recording")
    }
}

/// Start recording with `opts` and wait until the BPF programs are attached.
/// Err(detail) when BPF is not permitted here (the caller skips).
fn start_recording(opts: RecordOptions) -> Result<Recording, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicBool::new(false));
    let cond = StopCondition {
        progress: None,
        duration: Some(Duration::from_secs(60)),
        flag: Some(stop.clone()),
        started: Some(started.clone()),
    };
    let handle = std::thread::spawn(move || record(&opts, cond));
    while !started.load(Ordering::SeqCst) {
        if handle.is_finished() {
            return match handle.join().unwrap() {
                Err(RecordError::Permission { source }) => Err(format!("{source:#}")),
                Err(e) => panic!("recording failed: {e}"),
                Ok(_) => panic!("recorder stopped before starting"),
            };
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(Recording { stop, handle })
}

fn record_workload_with(
    opts: RecordOptions,
    wl: WorkloadOptions,
) -> Result<(RecordSummary, WorkloadReport), String> {
    let rec = start_recording(opts)?;
    let rep = workload::run(&wl).expect("workload");
    std::thread::sleep(Duration::from_millis(50));
    Ok((rec.stop(), rep))
}

fn frame_names(t: &Tables, id: StackId) -> Vec<String> {
    let Some(s) = t.stacks.get(&id) else {
        return vec![];
    };
    s.frames
        .iter()
        .map(|&a| {
            t.symbol(s, a)
                .and_then(|y| y.name.map(str::to_string))
                .unwrap_or_default()
        })
        .collect()
}

/// True when a frame's function is `name`, or a variant of it (`anon_pipe_read` for
/// `pipe_read` on kernels that split pipe operations).
fn has_frame(t: &Tables, id: StackId, name: &str) -> bool {
    frame_names(t, id)
        .iter()
        .any(|n| n == name || n.ends_with(&format!("_{name}")))
}

#[test]
fn real_chain_workload_lazy() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let out = tmp("lazy.zst");
    let wl = WorkloadOptions {
        duration: Duration::from_secs(2),
        period: Duration::from_millis(2),
        stall: None,
    };
    let (summary, rep) = match record_workload(&out, StackMode::Lazy, wl) {
        Ok(x) => x,
        Err(reason) => return skipped(&reason),
    };
    let reader = TraceReader::open(&out).expect("open trace");
    let report = reader.verify().expect("verify");
    assert_eq!(report.events, summary.events);
    let mem = reader.to_mem().expect("decode");
    let t = &mem.tables;
    let m = &mem.meta;

    // Nothing lost.
    assert_eq!(m.lost.ringbuf_full, 0, "ring buffer losses: {:?}", m.lost);
    assert_eq!(m.lost.out_of_order, 0, "{:?}", m.lost);
    assert_eq!(m.lost.malformed, 0, "{:?}", m.lost);
    assert!(!mem.events.iter().any(|e| matches!(e, Event::Lost(_))));
    assert_eq!(m.stack_mode, StackMode::Lazy);
    assert_eq!(m.stack_threshold_ns, 100_000);

    // File mode 0600.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&out).unwrap().permissions().mode() & 0o777,
        0o600
    );

    let (timer, relay, sink) = (rep.timer.tid, rep.relay.tid, rep.sink.tid);
    // Task identities.
    for (tid, name) in [(timer, "cr-timer"), (relay, "cr-relay"), (sink, "cr-sink")] {
        let named = mem
            .events
            .iter()
            .any(|e| matches!(e, Event::Comm(c) if c.tid == tid && c.comm.as_str() == name));
        assert!(named, "no comm event naming {tid} {name}");
        assert_eq!(t.tasks.get(&tid).map(|x| x.tgid), Some(rep.pid));
    }

    // Waker/target pairs.
    let mut pairs: HashMap<(u32, u32), u64> = HashMap::new();
    let mut timer_wakes = Vec::new();
    for e in &mem.events {
        if let Event::Waking(w) = e {
            if [timer, relay, sink].contains(&w.target_tid) {
                *pairs.entry((w.waker_tid, w.target_tid)).or_default() += 1;
            }
            if w.target_tid == timer && w.ts > rep.start_ns {
                timer_wakes.push(*w);
            }
        }
    }
    let names: HashMap<u32, String> = mem
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Comm(c) => Some((c.tid, format!("{}/{}", c.comm, c.tgid))),
            _ => None,
        })
        .collect();
    let pairs_named: Vec<String> = pairs
        .iter()
        .map(|((w, t), n)| {
            format!(
                "{}({w}) -> {}({t}): {n}",
                names.get(w).map(String::as_str).unwrap_or("?"),
                names.get(t).map(String::as_str).unwrap_or("?")
            )
        })
        .collect();
    let msgs = rep.messages;
    assert!(msgs >= 500, "workload too slow: {msgs} messages");
    let rs = pairs.get(&(relay, sink)).copied().unwrap_or(0);
    let tr = pairs.get(&(timer, relay)).copied().unwrap_or(0);
    // One waking per message, except when the reader had not run since its previous
    // wakeup (busy machine): then the write needs no waking. A few extra wakings come from
    // start-up and shutdown (the EOF close, a write racing the reader's first read): seen
    // up to +2 in CI, so allow 1 % or 3, whichever is larger.
    let slack = (msgs / 100).max(3);
    assert!(
        rs <= msgs + slack && rs * 10 >= msgs * 9,
        "relay->sink wakings {rs} vs {msgs} messages: {pairs_named:#?}"
    );
    assert!(
        tr <= msgs + slack && tr * 10 >= msgs * 9,
        "timer->relay wakings {tr} vs {msgs} messages: {pairs_named:#?}"
    );
    // Nobody else wakes the sink or the relay, except a rare futex wake between the
    // workload's own threads (allocator locks, thread start/exit).
    let mut others = 0;
    for ((waker, target), n) in &pairs {
        let expected =
            (*target == sink && *waker == relay) || (*target == relay && *waker == timer);
        if (*target == sink || *target == relay) && !expected {
            let ours = [timer, relay, sink].contains(waker)
                || t.tasks.get(waker).map(|x| x.tgid) == Some(rep.pid);
            assert!(
                ours,
                "{target} woken {n} times by outsider {waker}: {pairs_named:#?}"
            );
            others += n;
        }
    }
    // As many as the start-up and shutdown slack above: on a loaded machine (CI beside
    // this session's builds and browser tests) the workload's own threads woke the sink
    // or the relay 4 times in 955 messages (the sink the relay 3 times, main the sink
    // once), past a fixed bound of 3.
    assert!(
        others <= slack,
        "{others} unexpected wakings of sink/relay (at most {slack}): {pairs_named:#?}"
    );

    // The timer thread is woken by the hrtimer, in hardirq context, source "timer".
    let hard: Vec<_> = timer_wakes
        .iter()
        .filter(|w| w.context == WakeContext::HardIrq)
        .collect();
    assert!(
        // (a sleep whose timer expired before the thread blocked needs no waking)
        hard.len() as u64 * 20 >= rep.timer.calls * 19,
        "{} hardirq wakings of cr-timer for {} sleeps",
        hard.len(),
        rep.timer.calls
    );
    for w in &hard {
        let src = t.irq_sources.get(&w.source).map(|s| s.name.as_str());
        assert_eq!(
            src,
            Some("timer"),
            "hardirq waking of cr-timer from {src:?}"
        );
    }
    // Their waker stacks (the timer waits ~2 ms > T) show hrtimer_wakeup.
    let with_stack: Vec<_> = hard.iter().filter(|w| w.waker_kstack.is_real()).collect();
    assert!(
        with_stack.len() * 10 >= hard.len() * 9,
        "{} of {} timer wakings have stacks",
        with_stack.len(),
        hard.len()
    );
    for w in &with_stack {
        assert!(
            has_frame(t, w.waker_kstack, "hrtimer_wakeup"),
            "timer waking stack: {:?}",
            frame_names(t, w.waker_kstack)
        );
    }
    // relay -> sink wakings carry pipe_write in the waker stack.
    let rs_stacks: Vec<StackId> = mem
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Waking(w)
                if w.waker_tid == relay && w.target_tid == sink && w.waker_kstack.is_real() =>
            {
                Some(w.waker_kstack)
            }
            _ => None,
        })
        .collect();
    assert!(
        rs_stacks.len() as u64 * 10 >= rs * 9,
        "{} of {rs} relay->sink wakings have stacks",
        rs_stacks.len()
    );
    // (the last one may be the EOF wakeup of the relay's close(): pipe_release)
    let mut releases = 0;
    // The workload's threads share this test process's address space with the other
    // tests running beside it: a page fault of the sink can wait for the mmap_lock that
    // another test's munmap holds, and the relay's fault then wakes it from up_read
    // (seen on a loaded CI machine: rwsem_wake <- up_read <- exc_page_fault). True, rare.
    let mut mmap_lock = 0;
    for &s in &rs_stacks {
        if has_frame(t, s, "pipe_release") {
            releases += 1;
            continue;
        }
        if has_frame(t, s, "rwsem_wake") {
            mmap_lock += 1;
            continue;
        }
        assert!(
            has_frame(t, s, "pipe_write"),
            "relay waker stack without pipe_write: {:?}",
            frame_names(t, s)
        );
    }
    assert!(releases <= 1, "{releases} close() wakeups");
    assert!(
        mmap_lock * 20 <= rs_stacks.len(),
        "{mmap_lock} of {} relay->sink wakings from an rwsem (mmap_lock), not the pipe",
        rs_stacks.len()
    );
    // Off-CPU kernel stacks of the sink show pipe_read; user stacks resolve in this binary.
    let mut sink_k = 0;
    let mut sink_other: Vec<Vec<String>> = Vec::new();
    let mut sink_preempted = 0u64;
    let mut sink_u_resolved = 0;
    for e in &mem.events {
        if let Event::OffCpuStacks(o) = e {
            if o.tid == sink && o.kstack.is_real() {
                // Blocked waits are in pipe_read. On a busy machine the sink is also
                // preempted on its way back to user space for longer than the lazy
                // threshold, and that off-CPU time gets its own (correct) stack.
                // (Seen: exit_to_user_mode_loop, irqentry_exit, and
                // irqentry_exit_to_user_mode after a page fault.)
                if frame_names(t, o.kstack)
                    .iter()
                    .any(|n| n.starts_with("irqentry_exit") || n.contains("exit_to_user_mode"))
                {
                    sink_preempted += 1;
                    continue;
                }
                // The process is shared with the tests beside it (see above): a munmap, a
                // fault on the mmap_lock or the allocator's futex can block the sink too.
                // Those are true waits; at least 90 % must be in pipe_read (below).
                if !has_frame(t, o.kstack, "pipe_read") {
                    if sink_other.len() < 4 {
                        sink_other.push(frame_names(t, o.kstack));
                    }
                    continue;
                }
                sink_k += 1;
            }
            if o.tid == sink && o.ustack.is_real() {
                let st = &t.stacks[&o.ustack];
                assert_eq!((st.kind, st.tgid), (StackKind::User, rep.pid));
                let resolved = st
                    .frames
                    .iter()
                    .filter_map(|&a| t.symbol(st, a))
                    .filter(|s| s.name.is_some())
                    .count();
                if resolved > 0 {
                    sink_u_resolved += 1;
                }
                let sym = t
                    .symbol(st, st.frames[0])
                    .expect("leaf user frame has a symbol entry");
                assert!(
                    sym.module.is_some() && sym.file_offset.is_some(),
                    "user symbol without module/file offset: {sym:?}"
                );
            }
        }
    }
    assert!(
        sink_k as u64 * 10 >= msgs * 9,
        "{sink_k} sink off-CPU kernel stacks in pipe_read for {msgs} waits; others: {sink_other:?}"
    );
    assert!(
        sink_preempted * 10 <= sink_k as u64,
        "{sink_preempted} preemption stacks vs {sink_k} pipe_read stacks"
    );
    assert!(
        sink_u_resolved as u64 * 2 >= msgs,
        "{sink_u_resolved} resolved sink user stacks for {msgs} waits"
    );

    // Waking context agrees with the waker stacks, for every waking with a stack.
    let is_irq_entry = |n: &str| {
        n.starts_with("asm_sysvec_")
            || n.starts_with("asm_common_interrupt")
            || n.starts_with("sysvec_")
    };
    let mut checked = 0;
    for e in &mem.events {
        if let Event::Waking(w) = e {
            if !w.waker_kstack.is_real() {
                continue;
            }
            let names = frame_names(t, w.waker_kstack);
            let irq = names.iter().any(|n| is_irq_entry(n));
            let softirq = names
                .iter()
                .any(|n| n == "handle_softirqs" || n == "__do_softirq");
            match w.context {
                WakeContext::HardIrq => assert!(irq, "hardirq waking without irq entry: {names:?}"),
                WakeContext::SoftIrq => {
                    assert!(softirq, "softirq waking without softirq frames: {names:?}")
                }
                WakeContext::SoftIrqTask => assert!(
                    softirq && names.iter().any(|n| n.starts_with("do_softirq")),
                    "task-context softirq waking without do_softirq: {names:?}"
                ),
                WakeContext::Task => {
                    assert!(!irq && !softirq, "task waking with irq frames: {names:?}")
                }
                WakeContext::Nmi => {}
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 1000,
        "only {checked} wakings with stacks to check the context against"
    );

    // The sink's off-CPU time inside its read() calls, from the trace, matches what the sink
    // measured itself: wall time in the calls minus its own CPU time in them. Comparing
    // with the wall time alone fails on a loaded machine: the sink is on a CPU inside read()
    // after its switch-in (return path, the lazy user-stack callback, waiting out a
    // hypervisor's steal), 2.4 % of it in one CI run beside a release build.
    let mut off_since: Option<u64> = None;
    let mut off = Vec::new();
    for e in &mem.events {
        if let Event::Switch(s) = e {
            if s.prev_tid == sink {
                off_since = Some(s.ts);
            }
            if s.next_tid == sink {
                if let Some(t0) = off_since.take() {
                    off.push((t0, s.ts));
                }
            }
        }
    }
    let traced = rep.sink.time_inside_calls(off.iter().copied()) as f64;
    let wall = rep.sink.blocked_ns as f64;
    let measured = wall - rep.sink.oncpu_ns as f64;
    // What may differ: CPU time the sink's clock does not count as its own (steal, the
    // clock reads around each call), a small share of the small on-CPU part.
    let diff = (traced - measured).abs() / wall;
    eprintln!(
        "sink: {} calls, {wall} ns inside them, {} ns of it on a CPU ({:.2} %); off-CPU inside \
         them: traced {traced} ns, measured {measured} ns",
        rep.sink.calls,
        rep.sink.oncpu_ns,
        100.0 * rep.sink.oncpu_ns as f64 / wall
    );
    assert!(
        diff <= 0.005,
        "sink off-CPU inside read(): traced {traced} ns vs measured {measured} ns \
         (wall {wall} ns, on-CPU {} ns): {:.3} % of the wall time apart",
        rep.sink.oncpu_ns,
        diff * 100.0
    );

    // Summary agrees with the file.
    assert_eq!(summary.events, reader.event_count());
    assert!(summary.stacks > 0 && summary.symbols > 0);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn real_eager_and_none_modes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let wl = WorkloadOptions {
        duration: Duration::from_millis(500),
        period: Duration::from_millis(2),
        stall: None,
    };
    for mode in [StackMode::Eager, StackMode::None] {
        let out = tmp(&format!("{mode:?}.zst"));
        let (summary, rep) = match record_workload(&out, mode, wl.clone()) {
            Ok(x) => x,
            Err(reason) => return skipped(&reason),
        };
        let reader = TraceReader::open(&out).unwrap();
        reader.verify().unwrap();
        let mem = reader.to_mem().unwrap();
        assert_eq!(mem.meta.stack_mode, mode);
        assert_eq!(mem.meta.lost.ringbuf_full, 0);
        let sink_switches: Vec<&Switch> = mem
            .events
            .iter()
            .filter_map(|e| match e {
                Event::Switch(s) if s.prev_tid == rep.sink.tid => Some(s),
                _ => None,
            })
            .collect();
        assert!(
            sink_switches.len() as u64 >= rep.messages / 2,
            "{mode:?}: {} sink switch-outs",
            sink_switches.len()
        );
        let offcpu = mem
            .events
            .iter()
            .filter(|e| matches!(e, Event::OffCpuStacks(_)))
            .count();
        assert_eq!(offcpu, 0, "{mode:?} mode emits no lazy off-CPU stacks");
        match mode {
            StackMode::Eager => {
                // every sink switch-out carries its stack, taken at switch-out; the
                // blocking ones show the pipe read (a few are thread start-up futex waits,
                // and the final exit)
                let mut piped = 0;
                let mut blocked = 0;
                for s in &sink_switches {
                    // The final switch-out, past exit_mm, has no user stack: USER_EXITING.
                    assert!(
                        s.prev_ustack.is_real()
                            || s.prev_ustack == StackId::FAILED
                            || s.prev_ustack == StackId::USER_EXITING,
                        "{:?}",
                        s.prev_ustack
                    );
                    if s.prev_state != STATE_INTERRUPTIBLE {
                        continue;
                    }
                    assert!(s.prev_kstack.is_real(), "eager switch without kernel stack");
                    let names = frame_names(&mem.tables, s.prev_kstack);
                    blocked += 1;
                    if has_frame(&mem.tables, s.prev_kstack, "pipe_read") {
                        piped += 1;
                    } else {
                        assert!(
                            has_frame(&mem.tables, s.prev_kstack, "futex_wait"),
                            "eager sink stack: {names:?}"
                        );
                    }
                    assert!(
                        !names.iter().any(|n| n.starts_with("bpf_")),
                        "BPF frames not removed: {names:?}"
                    );
                }
                assert!(
                    piped + 3 >= blocked && piped as u64 * 10 >= rep.messages * 9,
                    "{piped} of {blocked} blocked switch-outs in pipe_read"
                );
            }
            _ => {
                assert!(sink_switches
                    .iter()
                    .all(|s| s.prev_kstack == StackId::NONE && s.prev_ustack == StackId::NONE));
                // `--stacks none`: no scheduler event carries a stack; the only stacks are
                // those of the on-CPU samples (sampling is on by default).
                let sample_stacks: std::collections::HashSet<StackId> = mem
                    .events
                    .iter()
                    .filter_map(|e| match e {
                        Event::Sample(s) => Some([s.kstack, s.ustack]),
                        _ => None,
                    })
                    .flatten()
                    .filter(|s| s.is_real())
                    .collect();
                assert!(
                    mem.tables
                        .stacks
                        .keys()
                        .all(|id| sample_stacks.contains(id)),
                    "a stack not referenced by a sample in --stacks none"
                );
                assert_eq!(summary.stacks, mem.tables.stacks.len() as u64);
            }
        }
        let _ = std::fs::remove_file(&out);
    }
}

/// Child half of `real_sigkill_leaves_readable_file`: records into the file named by
/// CHAINREC_SIGKILL_CHILD until killed. Does nothing when run normally.
#[test]
#[ignore = "helper process for real_sigkill_leaves_readable_file"]
fn sigkill_child() {
    let Ok(path) = std::env::var("CHAINREC_SIGKILL_CHILD") else {
        return;
    };
    let opts = RecordOptions {
        output: PathBuf::from(path),
        status_line: false,
        ..RecordOptions::default()
    };
    let started = Arc::new(AtomicBool::new(false));
    let s2 = started.clone();
    std::thread::spawn(move || {
        while !s2.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        println!("RECORDING");
        // keep some events flowing
        let _ = workload::run(&WorkloadOptions {
            duration: Duration::from_secs(30),
            period: Duration::from_millis(1),
            stall: None,
        });
    });
    let _ = record(
        &opts,
        StopCondition {
            progress: None,
            duration: Some(Duration::from_secs(60)),
            flag: None,
            started: Some(started),
        },
    );
}

#[test]
fn real_sigkill_leaves_readable_file() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let out = tmp("killed.zst");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "sigkill_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CHAINREC_SIGKILL_CHILD", &out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    // Wait for "RECORDING", then for at least two flushes.
    use std::io::BufRead;
    let stdout = child.stdout.take().unwrap();
    let mut started = false;
    for line in std::io::BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if line.contains("RECORDING") {
            started = true;
            break;
        }
    }
    if !started {
        let _ = child.kill();
        let _ = child.wait();
        return skipped("child recorder did not start");
    }
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let reader = TraceReader::open(&out).expect("a killed recorder's file opens");
    assert!(
        reader.recovery().is_some(),
        "no trailer expected after SIGKILL"
    );
    let rep = reader.verify().expect("recovered part verifies");
    assert!(rep.events > 100, "only {} events recovered", rep.events);
    let mem = reader.to_mem().unwrap();
    assert!(mem
        .events
        .iter()
        .any(|e| matches!(e, Event::Comm(c) if c.comm.as_str() == "cr-sink")));
    let _ = std::fs::remove_file(&out);
}

#[test]
fn real_pid_filter_follows_wakers() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let out = tmp("filter.zst");
    let me = std::process::id();
    let opts = RecordOptions {
        output: out.clone(),
        pids: vec![me],
        status_line: false,
        ..RecordOptions::default()
    };
    let rec = match start_recording(opts) {
        Ok(rec) => rec,
        Err(detail) => return skipped(&detail),
    };
    let rep = workload::run(&WorkloadOptions {
        duration: Duration::from_millis(500),
        period: Duration::from_millis(2),
        stall: None,
    })
    .unwrap();
    rec.stop();
    let reader = TraceReader::open(&out).unwrap();
    reader.verify().unwrap();
    let mem = reader.to_mem().unwrap();
    let tgid_of = |tid: u32| mem.tables.tasks.get(&tid).map(|t| t.tgid);
    // Every waking targets this process or a task that had woken an interesting task
    // before (the filter follows chains backwards).
    let mut interesting: std::collections::HashSet<u32> = std::collections::HashSet::new();
    let mut n = 0;
    let mut pairs = 0;
    for e in &mem.events {
        if let Event::Waking(w) = e {
            let ours = tgid_of(w.target_tid) == Some(me) || interesting.contains(&w.target_tid);
            assert!(
                ours,
                "waking of unrelated task {} (tgid {:?})",
                w.target_tid,
                tgid_of(w.target_tid)
            );
            if w.context == WakeContext::Task && w.waker_tid != 0 {
                interesting.insert(w.waker_tid);
            }
            if w.waker_tid == rep.relay.tid && w.target_tid == rep.sink.tid {
                pairs += 1;
            }
            n += 1;
        }
    }
    assert!(
        pairs as u64 * 10 >= rep.messages * 9,
        "{pairs} relay->sink wakings for {} messages",
        rep.messages
    );
    assert!(n > 0);
    assert_eq!(mem.meta.extra("filter_pids"), Some(me.to_string().as_str()));
    let _ = std::fs::remove_file(&out);
}

/// How the ping-pong threads make their read/write calls.
#[derive(Clone, Copy)]
enum Calls {
    /// Through libc's wrappers.
    Libc,
    /// Raw syscalls with a small junk frame pointer, as code built without frame
    /// pointers leaves RBP: the stacks the recorder's user-walk shortcut finishes in BPF.
    JunkFramePointer,
}

/// read(2) (`write == false`) or write(2) of one byte.
fn rw1(calls: Calls, write: bool, fd: i32, c: &mut [u8; 1]) -> isize {
    match (calls, write) {
        // SAFETY: valid fd and 1-byte buffer.
        (Calls::Libc, false) => unsafe { libc::read(fd, c.as_mut_ptr().cast(), 1) },
        // SAFETY: as above.
        (Calls::Libc, true) => unsafe { libc::write(fd, c.as_ptr().cast(), 1) },
        (Calls::JunkFramePointer, _) => {
            let nr = if write {
                libc::SYS_write
            } else {
                libc::SYS_read
            };
            let ret: isize;
            // SAFETY: a read/write syscall on a valid fd and 1-byte buffer; RBP is saved
            // on the stack and restored before the block ends, and the kernel clobbers
            // only rcx and r11 besides rax.
            unsafe {
                std::arch::asm!(
                    "push rbp",
                    "mov ebp, 0x10",
                    "syscall",
                    "pop rbp",
                    inlateout("rax") nr as isize => ret,
                    in("rdi") fd,
                    in("rsi") c.as_mut_ptr(),
                    in("rdx") 1usize,
                    lateout("rcx") _,
                    lateout("r11") _,
                );
            }
            ret
        }
    }
}

/// Two threads ping-ponging a byte over pipes as fast as they can for `d`.
fn pingpong(d: Duration, calls: Calls) {
    let mut a = [0i32; 2];
    let mut b = [0i32; 2];
    // SAFETY: valid 2-int arrays.
    unsafe {
        assert_eq!(libc::pipe(a.as_mut_ptr()), 0);
        assert_eq!(libc::pipe(b.as_mut_ptr()), 0);
    }
    let end = std::time::Instant::now() + d;
    let (ar, aw, br, bw) = (a[0], a[1], b[0], b[1]);
    let echo = std::thread::spawn(move || {
        let mut c = [0u8; 1];
        while rw1(calls, false, ar, &mut c) == 1 {
            rw1(calls, true, bw, &mut c);
        }
    });
    let mut c = [0u8; 1];
    while std::time::Instant::now() < end {
        rw1(calls, true, aw, &mut c);
        rw1(calls, false, br, &mut c);
    }
    // SAFETY: closing our own fds ends the echo thread's loop.
    unsafe {
        libc::close(aw);
    }
    echo.join().unwrap();
    // SAFETY: closing our own fds.
    unsafe {
        libc::close(ar);
        libc::close(br);
        libc::close(bw);
    }
}

#[test]
fn real_losses_are_counted_and_marked() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let out = tmp("lossy.zst");
    let opts = RecordOptions {
        output: out.clone(),
        ringbuf_bytes: 4096,
        poll_period: Duration::from_millis(200),
        stack_mode: StackMode::None,
        status_line: false,
        ..RecordOptions::default()
    };
    let rec = match start_recording(opts) {
        Ok(rec) => rec,
        Err(detail) => return skipped(&detail),
    };
    pingpong(Duration::from_millis(400), Calls::Libc);
    let summary = rec.stop();
    let reader = TraceReader::open(&out).unwrap();
    reader.verify().unwrap();
    let mem = reader.to_mem().unwrap();
    let marked: u64 = mem
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Lost(l) if l.cause == LostCause::RingBufferFull => Some(l.count),
            _ => None,
        })
        .sum();
    assert!(
        mem.meta.lost.ringbuf_full > 0,
        "a 4 KiB ring drained every 200 ms must overflow"
    );
    assert_eq!(
        marked, mem.meta.lost.ringbuf_full,
        "every loss has a marker"
    );
    assert_eq!(summary.lost.ringbuf_full, mem.meta.lost.ringbuf_full);
    assert!(mem
        .events
        .iter()
        .all(|e| !matches!(e, Event::Lost(l) if l.cause == LostCause::RingBufferFull && l.cpu >= mem.meta.cpu_count)), "ring-buffer losses name their CPU");
    let _ = std::fs::remove_file(&out);
}

#[test]
fn real_context_fallback_agrees_with_stacks() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let out = tmp("fallback.zst");
    let opts = RecordOptions {
        output: out.clone(),
        status_line: false,
        force_context_fallback: true,
        ..RecordOptions::default()
    };
    let wl = WorkloadOptions {
        duration: Duration::from_millis(1000),
        period: Duration::from_millis(2),
        stall: None,
    };
    let (summary, rep) = match record_workload_with(opts, wl) {
        Ok(x) => x,
        Err(reason) => return skipped(&reason),
    };
    assert!(
        summary
            .context_method
            .starts_with("irq tracepoints fallback"),
        "{}",
        summary.context_method
    );
    assert!(summary.context_fallbacks > 0);
    let mem = TraceReader::open(&out).unwrap().to_mem().unwrap();
    let t = &mem.tables;
    // The timer thread's wakings: hardirq, source timer (hrtimer_expire_entry state).
    let timer_wakes: Vec<&Waking> = mem
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Waking(w) if w.target_tid == rep.timer.tid && w.ts > rep.start_ns => Some(w),
            _ => None,
        })
        .collect();
    let hard_timer = timer_wakes
        .iter()
        .filter(|w| {
            w.context == WakeContext::HardIrq
                && t.irq_sources.get(&w.source).map(|s| s.name.as_str()) == Some("timer")
        })
        .count() as u64;
    assert!(
        hard_timer * 20 >= rep.timer.calls * 19,
        "{hard_timer} hardirq/timer wakings for {} sleeps",
        rep.timer.calls
    );
    // Agreement with the waker stacks: the fallback misses interrupts without
    // tracepoints (IPIs), so allow a small disagreement, reported.
    let (mut agree, mut total) = (0u64, 0u64);
    for e in &mem.events {
        if let Event::Waking(w) = e {
            if !w.waker_kstack.is_real() {
                continue;
            }
            let names = frame_names(t, w.waker_kstack);
            let irq = names.iter().any(|n| {
                n.starts_with("asm_sysvec_")
                    || n.starts_with("asm_common_interrupt")
                    || n.starts_with("sysvec_")
            });
            let softirq = names
                .iter()
                .any(|n| n == "handle_softirqs" || n == "__do_softirq");
            let ok = match w.context {
                WakeContext::HardIrq => irq,
                WakeContext::SoftIrq | WakeContext::SoftIrqTask => softirq,
                WakeContext::Task => !irq && !softirq,
                WakeContext::Nmi => true,
            };
            agree += ok as u64;
            total += 1;
        }
    }
    eprintln!("fallback context agrees with stacks on {agree} of {total} wakings");
    assert!(
        total >= 500 && agree * 100 >= total * 95,
        "fallback context agrees on {agree} of {total}"
    );
    let _ = std::fs::remove_file(&out);
}

/// The sink's lazy user stacks, by path: (user stacks after a pipe_read kernel stack, how
/// many of those have the libc `read` wrapper as leaf, the set of leaf addresses, the
/// `lazy_user_stacks` metadata, messages).
fn sink_user_stacks(
    name: &str,
    force_sys_exit: bool,
) -> Option<(u64, u64, std::collections::BTreeSet<u64>, String, u64)> {
    let out = tmp(name);
    let (summary, rep) = match record_workload_with(
        RecordOptions {
            output: out.clone(),
            status_line: false,
            force_sys_exit_user_stacks: force_sys_exit,
            // The user halves of these paths, not those taken at the switch-out on a
            // prediction (real_switch_out_user_stacks_keep_coverage checks those).
            no_user_stash: true,
            ..RecordOptions::default()
        },
        WorkloadOptions {
            duration: Duration::from_secs(2),
            period: Duration::from_millis(2),
            stall: None,
        },
    ) {
        Ok(x) => x,
        Err(reason) => {
            skipped(&reason);
            return None;
        }
    };
    let reader = TraceReader::open(&out).expect("open trace");
    reader.verify().expect("verify");
    let mem = reader.to_mem().expect("decode");
    let t = &mem.tables;
    let method = mem
        .meta
        .extra("lazy_user_stacks")
        .expect("lazy_user_stacks in the metadata")
        .to_string();
    assert_eq!(method, summary.user_stack_method);
    assert_eq!(mem.meta.lost.ringbuf_full, 0, "{:?}", mem.meta.lost);
    let sink = rep.sink.tid;
    // Walk the sink's events: a kernel half (pipe_read) opens a wait; the user half must
    // come after the switch-in and before the sink's next switch-out (it is taken on the
    // way back to user space from that very read).
    let mut open_k: Option<u64> = None; // ts of the pipe_read kernel half
    let mut paired = 0u64;
    let mut libc_read_leaf = 0u64;
    let mut leaves = std::collections::BTreeSet::new();
    for e in &mem.events {
        match e {
            Event::Switch(s) if s.prev_tid == sink => {
                open_k = None; // the sink blocks again: no user half for the last wait
            }
            Event::OffCpuStacks(o) if o.tid == sink => {
                if o.kstack.is_real() && has_frame(t, o.kstack, "pipe_read") {
                    open_k = Some(o.ts);
                    continue;
                }
                if o.ustack.is_real() && o.kstack == StackId::NONE && open_k.take().is_some() {
                    paired += 1;
                    let st = &t.stacks[&o.ustack];
                    assert_eq!((st.kind, st.tgid), (StackKind::User, rep.pid));
                    let leaf = st.frames[0];
                    leaves.insert(leaf);
                    let sym = t
                        .symbol(st, leaf)
                        .expect("leaf user frame has a symbol entry");
                    let name = sym.name.unwrap_or_default().to_string();
                    let module = sym.module.unwrap_or_default().to_string();
                    if is_read(&name) && module.contains("libc") {
                        libc_read_leaf += 1;
                    } else {
                        eprintln!("{name}: sink user leaf {name:?} in {module:?}");
                    }
                }
            }
            _ => {}
        }
    }
    let _ = std::fs::remove_file(&out);
    Some((paired, libc_read_leaf, leaves, method, rep.messages))
}

/// Lazy user stacks through BPF task_work (no sys_exit hook): the sink, blocked in
/// pipe_read, gets its user stack on the way back from that read, with the libc read
/// wrapper as leaf, the same leaves as the sys_exit path gives, and the metadata says
/// which path was used.
#[test]
fn real_lazy_user_stacks_task_work() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let Some((paired, libc_leaf, leaves, method, msgs)) = sink_user_stacks("tw.zst", false) else {
        return;
    };
    if !chainrec_record::task_work_available() {
        assert!(method.starts_with("sys_exit"), "{method}");
        eprintln!("kernel without BPF task_work: checked the sys_exit fallback only");
    } else if method.contains("task_work program refused") {
        // The kernel has the kfunc but refuses its callback (6.18.44: EPERM, "sleepable
        // callback in a program that is not sleepable"); the recorder says why.
        assert!(method.starts_with("sys_exit"), "{method}");
        eprintln!(
            "=== real_lazy_user_stacks_task_work: THIS KERNEL REFUSES BPF task_work: checked \
             the sys_exit fallback only ({method}) ==="
        );
    } else {
        assert!(method.starts_with("task_work"), "{method}");
    }
    assert!(
        paired * 10 >= msgs * 9,
        "{paired} sink user stacks after pipe_read waits, {msgs} messages ({method})"
    );
    assert!(
        libc_leaf * 100 >= paired * 99,
        "{libc_leaf} of {paired} sink user stacks have libc read as leaf"
    );
    // The fallback path, forced, sees the same user leaves (same process, same libc).
    let (paired2, libc_leaf2, leaves2, method2, msgs2) =
        sink_user_stacks("sysexit.zst", true).expect("recorded once already");
    assert!(method2.starts_with("sys_exit"), "{method2}");
    assert!(
        paired2 * 10 >= msgs2 * 9,
        "{paired2} of {msgs2} ({method2})"
    );
    assert!(libc_leaf2 * 100 >= paired2 * 99);
    assert_eq!(leaves, leaves2, "sink user leaves: task_work vs sys_exit");
    eprintln!(
        "{method}: {paired} sink user stacks ({libc_leaf} libc read leaves) for {msgs} messages; \
         {method2}: {paired2} ({libc_leaf2}) for {msgs2}; leaves {leaves:x?}"
    );
}

/// The user-walk shortcut (frame-pointer chains that end below vm.mmap_min_addr are
/// finished without the kernel walker and its page fault) gives exactly the kernel
/// walker's stacks: in verify mode the kernel walks each of them too and every
/// disagreement is counted.
#[test]
fn real_user_walk_shortcut_agrees_with_kernel_walker() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let out = tmp("uwalk.zst");
    let rec = match start_recording(RecordOptions {
        output: out.clone(),
        stack_mode: StackMode::Eager,
        status_line: false,
        verify_user_walk_shortcut: true,
        ..RecordOptions::default()
    }) {
        Ok(r) => r,
        Err(reason) => return skipped(&reason),
    };
    let rep = workload::run(&WorkloadOptions {
        duration: Duration::from_millis(500),
        period: Duration::from_millis(2),
        stall: None,
    })
    .expect("workload");
    pingpong(Duration::from_millis(300), Calls::JunkFramePointer);
    let summary = rec.stop();
    let reader = TraceReader::open(&out).unwrap();
    reader.verify().unwrap();
    let mem = reader.to_mem().unwrap();
    let note = mem
        .meta
        .extra("user_walk_shortcut")
        .expect("user_walk_shortcut in the metadata")
        .to_string();
    let num = |s: &str| -> u64 {
        s.trim()
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no count in {note:?}"))
    };
    let (short, verified) = note.split_once(';').expect("verified part");
    let short = num(short);
    let mismatched = num(verified.trim_start().trim_start_matches("verified:"));
    assert_eq!(mismatched, 0, "{note}");
    // Thousands of walks (ping-pong with junk frame pointers, two per round trip) took the
    // shortcut.
    assert!(short >= 1000, "{note}");
    // The sink's stacks still start in libc read.
    let sink = rep.sink.tid;
    let mut reads = 0;
    for e in &mem.events {
        if let Event::Switch(s) = e {
            if s.prev_tid == sink && s.prev_state == STATE_INTERRUPTIBLE && s.prev_ustack.is_real()
            {
                let st = &mem.tables.stacks[&s.prev_ustack];
                let sym = mem.tables.symbol(st, st.frames[0]).and_then(|y| y.name);
                if sym.is_some_and(is_read) {
                    reads += 1;
                }
            }
        }
    }
    assert!(
        reads as u64 * 10 >= rep.messages * 9,
        "{reads} sink user stacks in read for {} messages",
        rep.messages
    );
    eprintln!("{note}; {} events", summary.events);
    let _ = std::fs::remove_file(&out);
}

/// Waits of `tids` longer than the threshold, and how many of them carry a kernel stack, a
/// user stack, and both: a wait's stacks are those of the OffCpuStacks records from its
/// switch-in up to the task's next switch-out (kernel and user halves, in one record or
/// two). Also the user leaf addresses of those stacks, with how often each was seen.
fn stack_coverage(
    mem: &chainrec_format::MemTrace,
    tids: &[u32],
    threshold_ns: u64,
) -> (u64, u64, u64, u64, std::collections::BTreeMap<u64, u64>) {
    let t = &mem.tables;
    // per tid: switch-out ts, and (kernel, user) of the long wait that ended last
    let mut out: HashMap<u32, u64> = HashMap::new();
    let mut open: HashMap<u32, (bool, bool)> = HashMap::new();
    let (mut waits, mut with_k, mut with_u, mut with_both) = (0u64, 0u64, 0u64, 0u64);
    let mut leaves = std::collections::BTreeMap::new();
    let mut close = |o: Option<(bool, bool)>| {
        if let Some((k, u)) = o {
            waits += 1;
            with_k += k as u64;
            with_u += u as u64;
            with_both += (k && u) as u64;
        }
    };
    for e in &mem.events {
        match e {
            Event::Switch(s) => {
                if tids.contains(&s.prev_tid) {
                    close(open.remove(&s.prev_tid));
                    if s.prev_state != 0 {
                        out.insert(s.prev_tid, s.ts);
                    } else {
                        out.remove(&s.prev_tid);
                    }
                }
                if tids.contains(&s.next_tid) {
                    if let Some(o) = out.remove(&s.next_tid) {
                        if s.ts - o > threshold_ns {
                            open.insert(s.next_tid, (false, false));
                        }
                    }
                }
            }
            Event::OffCpuStacks(o) => {
                if let Some(w) = open.get_mut(&o.tid) {
                    w.0 |= o.kstack.is_real();
                    if o.ustack.is_real() {
                        w.1 = true;
                        *leaves.entry(t.stacks[&o.ustack].frames[0]).or_default() += 1;
                    }
                }
            }
            _ => {}
        }
    }
    for (_, o) in open.drain() {
        close(Some(o));
    }
    (waits, with_k, with_u, with_both, leaves)
}

/// User stacks taken at the switch-out on a prediction (lazy default) keep the stack
/// coverage of the task_work path: the workload's blocked waits above the threshold carry
/// kernel and user stacks as often as without the prediction, with the same user leaves,
/// and the prediction was used. Measured: 2586 of 2586 waits with both stacks (2841
/// stacks taken at the switch-out used, 57 wasted, 25 long waits predicted short), and
/// 2455 of 2455 without the prediction.
#[test]
fn real_switch_out_user_stacks_keep_coverage() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let mut results = Vec::new();
    for (name, no_stash) in [("stash.zst", false), ("nostash.zst", true)] {
        let out = tmp(name);
        let (summary, rep) = match record_workload_with(
            RecordOptions {
                output: out.clone(),
                status_line: false,
                no_user_stash: no_stash,
                ..RecordOptions::default()
            },
            WorkloadOptions {
                duration: Duration::from_secs(2),
                period: Duration::from_millis(2),
                stall: None,
            },
        ) {
            Ok(x) => x,
            Err(reason) => return skipped(&reason),
        };
        let mem = TraceReader::open(&out)
            .expect("open trace")
            .to_mem()
            .expect("decode");
        assert_eq!(mem.meta.lost.ringbuf_full, 0, "{:?}", mem.meta.lost);
        let tids = [rep.timer.tid, rep.relay.tid, rep.sink.tid];
        let cov = stack_coverage(&mem, &tids, mem.meta.stack_threshold_ns);
        eprintln!(
            "{name}: {} waits > threshold, {} with kernel, {} with user, {} with both stacks; \
             {}",
            cov.0, cov.1, cov.2, cov.3, summary.user_stash
        );
        if no_stash {
            assert_eq!(summary.user_stash.taken, 0, "{}", summary.user_stash);
        } else {
            assert!(
                summary.user_stash.used > 0,
                "no user stack taken at a switch-out: {}",
                summary.user_stash
            );
        }
        let _ = std::fs::remove_file(&out);
        results.push((cov, rep.messages));
    }
    let ((a, msgs_a), (b, msgs_b)) = (&results[0], &results[1]);
    // every message makes each of the three threads wait about one period (2 ms)
    assert!(a.0 >= *msgs_a && b.0 >= *msgs_b, "{a:?} {b:?}");
    for (cov, what) in [(a, "with"), (b, "without")] {
        assert!(
            cov.1 * 100 >= cov.0 * 99,
            "{what} the prediction: kernel stacks {cov:?}"
        );
        assert!(
            cov.3 * 100 >= cov.0 * 95,
            "{what} the prediction: both stacks {cov:?}"
        );
    }
    // not fewer waits with both stacks than without the prediction (1 % slack: runs differ)
    assert!(
        a.3 as f64 / a.0 as f64 >= b.3 as f64 / b.0 as f64 - 0.01,
        "with {a:?} vs without {b:?}"
    );
    // The same user leaves, among those of at least 5 % of the waits (a rare one, e.g. of a
    // preemption, may appear in one run only).
    let common = |c: &(u64, u64, u64, u64, std::collections::BTreeMap<u64, u64>)| {
        c.4.iter()
            .filter(|(_, &n)| n * 20 >= c.0)
            .map(|(&a, _)| a)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        common(a),
        common(b),
        "user leaves with vs without the prediction: {:?} vs {:?}",
        a.4,
        b.4
    );
}

/// The mapping tracker sees a shell fork a child that execs `ls`: the child starts with a
/// copy of the shell's mappings (a stack taken before the exec is in dash), the exec ends
/// them, and ls's own mappings follow; all of it readable after the processes are gone.
#[test]
fn mapping_history_follows_fork_exec_and_exit() {
    if let Some(r) = skip_reason() {
        return skipped(&r);
    }
    let cpus: Vec<u32> = (0..libbpf_rs::num_possible_cpus().unwrap() as u32).collect();
    let mut t = chainrec_record::mappings::MappingTracker::start(&cpus).unwrap();
    let out = std::process::Command::new("sh")
        .args(["-c", "ls / > /dev/null; echo $$"])
        .output()
        .unwrap();
    let sh: Tid = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    t.poll(workload::monotonic_ns());
    let h = &t.history;
    let sh_text = h
        .entries()
        .into_iter()
        .find(|m| m.tgid == sh && m.path.ends_with("sh") && m.from_ns > 0)
        .cloned()
        .expect("the shell's own mapping, from its exec record");
    assert!(
        sh_text.build_id.is_some() && sh_text.vaddr_delta.is_some(),
        "{sh_text:?}"
    );
    // The child: a copy of the shell's text mapping, ended by its exec, then ls.
    let ls = h
        .entries()
        .into_iter()
        .find(|m| m.path.ends_with("/ls"))
        .cloned()
        .expect("ls mapped");
    let copy = h
        .entries()
        .into_iter()
        .find(|m| m.tgid == ls.tgid && m.start == sh_text.start)
        .cloned()
        .expect("the child's copy of the shell's mapping");
    assert!(copy.until_ns <= ls.from_ns, "{copy:?} {ls:?}");
    let mid = sh_text.start + 16;
    assert_eq!(
        h.lookup(ls.tgid, mid, copy.from_ns).unwrap().path,
        sh_text.path
    );
    assert_eq!(
        h.lookup(ls.tgid, ls.start, ls.from_ns).unwrap().path,
        ls.path
    );
    assert!(ls.until_ns < MappingEntry::OPEN, "ls exited: {ls:?}");
    assert_eq!(t.counts.lost_records, 0);
}

/// libc's read wrapper, by any of its names: `read`, or with libc6-dbg installed its
/// internal names, possibly with the inlined frames the symbolizer joins with `;`
/// (`__GI___libc_read;__GI___libc_read [inlined]`).
fn is_read(name: &str) -> bool {
    let leaf = name.rsplit(';').next().unwrap_or(name);
    let leaf = leaf.trim_end_matches(" [inlined]");
    leaf == "read" || leaf.ends_with("_read")
}

//! Real-kernel PID reuse (issue 23, item 0): exited threads must not become phantom waits
//! when their PID is taken by a new task.
//!
//! The test lowers `kernel.pid_max` (machine-global: never below the live tasks + 4096, and
//! restored by a guard, on panic too), records fork churn that wraps the PIDs several
//! times, and checks that no wait starts at a dead task's final switch-out, none is longer
//! than the trace, under 1 % of the waits have no waker, and `[waker unknown]` on the
//! test's own threads holds under 1 % of the chain graph (other tasks of the machine may
//! have a few long genuine ones: the sandbox agent's 4 waits held 1.7 % in one CI run).
//!
//! Needs root (or CAP_BPF + CAP_PERFMON + write access to /proc/sys). Without them the test
//! prints a loud SKIP and passes, unless `CHAINREC_REQUIRE_BPF=1`, in which case it fails.

mod common;
use chainrec_chain::{Config, Engine, NodeTable, WaitRecord};
use chainrec_format::{state_is_dead, Event, TraceReader};
use chainrec_record::RecordOptions;
use chainrec_testkit::bpf::{can_record, skip as skip_bpf};
use common::{bin, record_with_summary, tmpdir};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const PID_MAX: &str = "/proc/sys/kernel/pid_max";

/// `kernel.pid_max` lowered for the test; the old value is written back on drop (also
/// while a panic unwinds).
struct PidMaxGuard {
    old: String,
    new: u64,
}

impl PidMaxGuard {
    /// Lower pid_max to max(8192, live tasks + 4096), if that is lower than it is.
    fn lower() -> std::io::Result<Option<Self>> {
        let old = std::fs::read_to_string(PID_MAX)?.trim().to_string();
        let cur: u64 = old.parse().unwrap_or(u64::MAX);
        let new = (live_tasks() + 4096).max(8192);
        if new >= cur {
            return Ok(None);
        }
        std::fs::write(PID_MAX, new.to_string())?;
        Ok(Some(PidMaxGuard { old, new }))
    }
}

impl Drop for PidMaxGuard {
    fn drop(&mut self) {
        if let Err(e) = std::fs::write(PID_MAX, &self.old) {
            eprintln!(
                "real_pid_reuse: could not restore {PID_MAX} to {}: {e}",
                self.old
            );
        }
    }
}

/// Threads alive now, in every process.
fn live_tasks() -> u64 {
    let mut n = 0;
    for p in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if p.file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            n += std::fs::read_dir(p.path().join("task"))
                .map(|d| d.count() as u64)
                .unwrap_or(1);
        }
    }
    n
}

/// Allocate `n` PIDs: threads that exit at once (cheap clones) and, every 16th, a forked
/// child that exits at once (its address space, a copy of this test process, is torn
/// down after its exit event: it may be preempted there, before its final switch-out).
fn fork_churn(n: u64) -> u64 {
    let mut done = 0;
    let t0 = Instant::now();
    while done < n && t0.elapsed() < Duration::from_secs(20) {
        if done % 16 == 0 {
            // SAFETY: the child calls only _exit (async-signal-safe) before it ends, so
            // the other threads' state copied into it is never used.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                // SAFETY: _exit ends the child at once, without running any destructor.
                unsafe { libc::_exit(0) };
            }
            assert!(pid > 0, "fork: {}", std::io::Error::last_os_error());
            let mut status = 0;
            // SAFETY: waits for the child just forked; status is a valid out pointer.
            let r = unsafe { libc::waitpid(pid, &mut status, 0) };
            assert_eq!(r, pid, "waitpid: {}", std::io::Error::last_os_error());
        } else {
            std::thread::Builder::new()
                .name("cr-pidchurn".into())
                .spawn(|| std::hint::black_box(0u64))
                .expect("spawn")
                .join()
                .expect("join");
        }
        done += 1;
    }
    done
}

/// Record the whole system while `work` runs.
fn record(work: impl FnOnce()) -> PathBuf {
    let (trace, (), summary) =
        record_with_summary(&tmpdir("pid-reuse"), RecordOptions::default(), work);
    eprintln!("real_pid_reuse: lost {:?}", summary.lost);
    trace
}

/// Tids whose thread switched out dead and that a later task ran under.
fn reused_tids(trace: &Path) -> (usize, u64, u64) {
    let reader = TraceReader::open(trace).expect("open trace");
    let mut dead: HashSet<u32> = HashSet::new();
    let mut reused: HashSet<u32> = HashSet::new();
    let (mut first, mut last) = (u64::MAX, 0);
    reader
        .for_each_chunk::<chainrec_format::FormatError>(0..reader.chunks().len(), true, |evs| {
            for e in evs {
                first = first.min(e.ts());
                last = last.max(e.ts());
                match e {
                    Event::Switch(s) => {
                        if dead.remove(&s.next_tid) {
                            reused.insert(s.next_tid);
                        }
                        if state_is_dead(s.prev_state) {
                            dead.insert(s.prev_tid);
                        }
                    }
                    Event::WakeupNew(n) if dead.remove(&n.child_tid) => {
                        reused.insert(n.child_tid);
                    }
                    _ => {}
                }
            }
            Ok(())
        })
        .expect("decode");
    (reused.len(), first, last)
}

#[test]
fn pid_reuse_makes_no_phantom_waits() {
    if !can_record("pid_reuse_makes_no_phantom_waits") {
        return;
    }
    let guard = match PidMaxGuard::lower() {
        Ok(g) => g,
        Err(e) => {
            skip_bpf(
                "pid_reuse_makes_no_phantom_waits",
                &format!("cannot lower {PID_MAX}: {e}"),
            );
            return;
        }
    };
    let pid_max: u64 = guard.as_ref().map_or_else(
        || {
            std::fs::read_to_string(PID_MAX)
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        },
        |g| g.new,
    );
    // Two wraps of the PID space: every PID below pid_max is taken again at least once.
    let forks = 2 * pid_max;
    let mut done = 0;
    let trace = record(|| done = fork_churn(forks));
    drop(guard);
    let (reused, first, last) = reused_tids(&trace);
    let trace_ns = last - first;
    eprintln!(
        "real_pid_reuse: pid_max {pid_max}, {done} forks, {reused} tids reused after a dead switch-out, trace {trace_ns} ns"
    );
    assert!(
        reused >= 1000,
        "the churn did not wrap the PIDs: {reused} tids reused ({done} forks, pid_max {pid_max})"
    );

    // Every wait, no dedup, run-queue attribution on (the default).
    let reader = TraceReader::open(&trace).expect("open trace");
    let cfg = Config {
        dedup: false,
        ..Config::default()
    };
    let mut engine = Engine::new(reader.tables(), reader.meta(), cfg);
    let (mut waits, mut dead_starts, mut too_long, mut longest) = (0u64, 0u64, 0u64, 0u64);
    let mut sink = |w: &WaitRecord, _: &NodeTable| {
        waits += 1;
        if state_is_dead(w.state) {
            dead_starts += 1;
        }
        let end = w.switch_in_ns.or(w.wake_ns).unwrap_or(w.switch_out_ns);
        let len = end.saturating_sub(w.switch_out_ns);
        longest = longest.max(len);
        if len > trace_ns {
            too_long += 1;
        }
    };
    reader
        .for_each_chunk::<chainrec_format::FormatError>(0..reader.chunks().len(), true, |evs| {
            engine.process(evs, &mut sink);
            Ok(())
        })
        .expect("decode");
    let st = engine.finish(&mut sink);
    eprintln!("real_pid_reuse: {waits} waits, longest {longest} ns; {st}");
    assert_eq!(dead_starts, 0, "waits starting at a dead switch-out");
    assert_eq!(too_long, 0, "waits longer than the trace");
    assert!(
        st.threads_exited >= done,
        "{} threads exited < {done} forks",
        st.threads_exited
    );

    // A phantom wait is a wait of a churned thread (or of a task reusing its tid) that no
    // waking ends: the churn made thousands of them before tids were tracked by life.
    // Other tasks of the machine may have a few genuine ones (a waking that raced a block
    // beyond the engine's window), some of them long: count those, do not weigh them.
    assert!(
        st.waits_without_waker * 100 < st.waits,
        "{} of {} waits have no waker (>= 1 %)",
        st.waits_without_waker,
        st.waits
    );

    // The chain graph: `[waker unknown]` under 1 % of it on the test's own threads (the
    // churned ones and the forking test thread, whose comm the forked children keep).
    let churn_comms = [
        "cr-pidchurn".to_string(),
        std::fs::read_to_string("/proc/thread-self/comm")
            .expect("read own comm")
            .trim()
            .to_string(),
    ];
    let out = bin()
        .args(["chains", "--unit", "ns"])
        .arg(&trace)
        .output()
        .expect("run chainrec chains");
    assert!(
        out.status.success(),
        "chains: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut total, mut unknown, mut unknown_elsewhere) = (0u128, 0u128, 0u128);
    let mut unknown_paths: Vec<(u128, String)> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((path, w)) = line.rsplit_once(' ') else {
            continue;
        };
        let w: u128 = w.parse().expect("weight");
        total += w;
        if !path.contains("[waker unknown]") {
            continue;
        }
        unknown_paths.push((w, path.to_string()));
        let thread = path.split(';').next().unwrap_or_default();
        if churn_comms.iter().any(|c| c == thread) {
            unknown += w;
        } else {
            unknown_elsewhere += w;
        }
    }
    // The heaviest `[waker unknown]` paths, so a failure says which waits they are.
    unknown_paths.sort_unstable_by_key(|p| std::cmp::Reverse(p.0));
    for (w, path) in unknown_paths.iter().take(8) {
        eprintln!("real_pid_reuse: unknown {w} ns: {path}");
    }
    eprintln!(
        "real_pid_reuse: [waker unknown] on {churn_comms:?}: {unknown} of {total} ns ({:.3} %); on other tasks {unknown_elsewhere} ns",
        unknown as f64 * 100.0 / total.max(1) as f64
    );
    assert!(total > 0, "empty chain graph");
    assert!(
        unknown * 100 < total,
        "[waker unknown] on the churned threads holds {unknown} of {total} ns (>= 1 %)"
    );
}

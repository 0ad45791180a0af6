//! The built-in chain workload: three named threads passing a byte along two pipes.
//!
//! * `cr-timer` sleeps one period (`clock_nanosleep`) and writes a byte to pipe 1;
//! * `cr-relay` reads pipe 1 and writes the byte to pipe 2;
//! * `cr-sink` reads pipe 2.
//!
//! Expected chain: `cr-sink ← cr-relay ← cr-timer ← [hardirq: timer]`. Each thread measures
//! its own blocked time around the blocking call (CLOCK_MONOTONIC), so tests can compare an
//! analysis of a recording with the workload's own measurement.

use serde::{Deserialize, Serialize};
use std::io;
use std::sync::mpsc;
use std::time::Duration;

/// Workload parameters.
#[derive(Clone, Debug)]
pub struct WorkloadOptions {
    /// How long the timer thread keeps ticking.
    pub duration: Duration,
    /// Timer period.
    pub period: Duration,
    /// Also run a stall: at 40 % of the duration `cr-holder` takes a mutex and holds it
    /// across a sleep this long while `cr-victim` blocks on it. Expected chain of the
    /// victim's one long wait: `cr-victim ← cr-holder ← [hardirq: timer]`.
    pub stall: Option<Duration>,
}

impl Default for WorkloadOptions {
    fn default() -> Self {
        WorkloadOptions {
            duration: Duration::from_secs(2),
            period: Duration::from_millis(2),
            stall: None,
        }
    }
}

/// One thread's identity and measurement.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadReport {
    /// Thread name (`cr-timer`, `cr-relay`, `cr-sink`).
    pub name: String,
    /// Thread id.
    pub tid: u32,
    /// Blocking calls made (sleeps for the timer, reads for the others, incl. the final EOF read).
    pub calls: u64,
    /// Total time inside the blocking calls, ns (CLOCK_MONOTONIC around each call).
    pub blocked_ns: u64,
    /// The part of `blocked_ns` the thread spent on a CPU (CLOCK_THREAD_CPUTIME_ID around
    /// each call): entering and leaving the call, and on a loaded machine whatever runs in
    /// it after the wakeup (e.g. the recorder's lazy user-stack callback). The thread was
    /// off-CPU for `blocked_ns - oncpu_ns` of it, which is what a recording can see.
    #[serde(default)]
    pub oncpu_ns: u64,
    /// Each blocking call as `[start, end]` (CLOCK_MONOTONIC ns, the trace clock), so that
    /// a recording's off-CPU time can be compared inside the calls only.
    #[serde(default)]
    pub calls_ns: Vec<[u64; 2]>,
}

impl ThreadReport {
    /// Run one blocking call, adding its wall and CPU time and its interval.
    fn timed<T>(&mut self, call: impl FnOnce() -> T) -> T {
        let c0 = thread_cpu_ns();
        let t0 = monotonic_ns();
        let r = call();
        let t1 = monotonic_ns();
        self.oncpu_ns += thread_cpu_ns().saturating_sub(c0);
        self.blocked_ns += t1 - t0;
        self.calls += 1;
        self.calls_ns.push([t0, t1]);
        r
    }

    /// How much of `intervals` (`(start, end)` ns, sorted by start, not overlapping; e.g. a
    /// recording's off-CPU intervals of this thread) lies inside the blocking calls.
    pub fn time_inside_calls(&self, intervals: impl IntoIterator<Item = (u64, u64)>) -> u64 {
        let mut total = 0;
        let mut i = 0;
        for (a, b) in intervals {
            while i < self.calls_ns.len() && self.calls_ns[i][1] <= a {
                i += 1;
            }
            // Calls are disjoint and sorted: sum the overlap with each one [a, b] touches.
            let mut j = i;
            while j < self.calls_ns.len() && self.calls_ns[j][0] < b {
                let [s, e] = self.calls_ns[j];
                total += e.min(b).saturating_sub(s.max(a));
                j += 1;
            }
        }
        total
    }
}

/// What the workload did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadReport {
    /// Process id.
    pub pid: u32,
    /// The timer thread.
    pub timer: ThreadReport,
    /// The relay thread.
    pub relay: ThreadReport,
    /// The sink thread.
    pub sink: ThreadReport,
    /// Bytes that went all the way through.
    pub messages: u64,
    /// The stall's threads (`--stall-ms`): holder and victim.
    #[serde(default)]
    pub stall: Option<StallReport>,
    /// CLOCK_MONOTONIC ns when the threads started.
    pub start_ns: u64,
    /// CLOCK_MONOTONIC ns when the last thread finished.
    pub end_ns: u64,
}

/// The stall of [`WorkloadOptions::stall`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallReport {
    /// `cr-holder`: one sleep while holding the mutex.
    pub holder: ThreadReport,
    /// `cr-victim`: one blocking lock of the mutex.
    pub victim: ThreadReport,
}

/// Holder and victim of a stall: the holder locks at `at_ns`, then starts the victim
/// (so that the victim's only wait is the lock) and sleeps `hold` with the lock held.
fn spawn_stall(
    at_ns: u64,
    hold: Duration,
) -> io::Result<std::thread::JoinHandle<io::Result<StallReport>>> {
    std::thread::Builder::new().name("cr-holder".into()).spawn(
        move || -> io::Result<StallReport> {
            set_name("cr-holder");
            let lock = std::sync::Arc::new(std::sync::Mutex::new(()));
            let mut holder = ThreadReport {
                name: "cr-holder".into(),
                tid: gettid(),
                ..Default::default()
            };
            sleep_for(Duration::from_nanos(at_ns.saturating_sub(monotonic_ns())));
            let victim = {
                let _held = lock.lock();
                let l = lock.clone();
                let victim = std::thread::Builder::new().name("cr-victim".into()).spawn(
                    move || -> ThreadReport {
                        set_name("cr-victim");
                        let mut rep = ThreadReport {
                            name: "cr-victim".into(),
                            tid: gettid(),
                            ..Default::default()
                        };
                        rep.timed(|| drop(l.lock()));
                        rep
                    },
                )?;
                // The victim blocks on the lock while this sleep runs.
                holder.timed(|| sleep_for(hold));
                victim
            };
            let victim = victim
                .join()
                .map_err(|_| io::Error::other("cr-victim panicked"))?;
            Ok(StallReport { holder, victim })
        },
    )
}

/// Current CLOCK_MONOTONIC time in ns (the clock `bpf_ktime_get_ns` uses).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the calling thread in ns (CLOCK_THREAD_CPUTIME_ID).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn set_name(name: &str) {
    let c = std::ffi::CString::new(name).expect("thread names have no NUL");
    // SAFETY: PR_SET_NAME reads a NUL-terminated string of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c.as_ptr() as libc::c_ulong, 0, 0, 0) };
}

struct Fd(i32);
impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own this descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn pipe() -> io::Result<(Fd, Fd)> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((Fd(fds[0]), Fd(fds[1])))
}

fn read1(fd: &Fd) -> io::Result<usize> {
    let mut b = [0u8; 1];
    loop {
        // SAFETY: b is a valid 1-byte buffer.
        let r = unsafe { libc::read(fd.0, b.as_mut_ptr().cast(), 1) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn write1(fd: &Fd) -> io::Result<()> {
    let b = [b'x'];
    loop {
        // SAFETY: b is a valid 1-byte buffer.
        let r = unsafe { libc::write(fd.0, b.as_ptr().cast(), 1) };
        if r == 1 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn sleep_for(d: Duration) {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as _,
    };
    let mut rem = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: both timespecs are valid. Interrupted sleeps just end early.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, 0, &ts, &mut rem) };
}

/// Run the workload to completion (blocking the caller for about `duration`).
///
/// `on_started` is called with the three tids (timer, relay, sink) once all threads
/// exist, before the first tick.
pub fn run_with(
    opts: &WorkloadOptions,
    on_started: impl FnOnce(u32, u32, u32),
) -> io::Result<WorkloadReport> {
    if opts.period.is_zero() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "workload period must be > 0",
        ));
    }
    let (r1, w1) = pipe()?;
    let (r2, w2) = pipe()?;
    let (tid_tx, tid_rx) = mpsc::channel::<(u8, u32)>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let start_ns = monotonic_ns();

    let tx = tid_tx.clone();
    let sink = std::thread::Builder::new().name("cr-sink".into()).spawn(
        move || -> io::Result<ThreadReport> {
            set_name("cr-sink");
            let tid = gettid();
            let _ = tx.send((2, tid));
            let mut rep = ThreadReport {
                name: "cr-sink".into(),
                tid,
                ..Default::default()
            };
            loop {
                let n = rep.timed(|| read1(&r2))?;
                if n == 0 {
                    return Ok(rep);
                }
            }
        },
    )?;
    let tx = tid_tx.clone();
    let relay = std::thread::Builder::new().name("cr-relay".into()).spawn(
        move || -> io::Result<(ThreadReport, u64)> {
            set_name("cr-relay");
            let tid = gettid();
            let _ = tx.send((1, tid));
            let mut rep = ThreadReport {
                name: "cr-relay".into(),
                tid,
                ..Default::default()
            };
            let mut msgs = 0;
            loop {
                let n = rep.timed(|| read1(&r1))?;
                if n == 0 {
                    drop(w2);
                    return Ok((rep, msgs));
                }
                write1(&w2)?;
                msgs += 1;
            }
        },
    )?;
    let tx = tid_tx;
    let period = opts.period;
    let duration = opts.duration;
    let timer = std::thread::Builder::new().name("cr-timer".into()).spawn(
        move || -> io::Result<ThreadReport> {
            set_name("cr-timer");
            let tid = gettid();
            let _ = tx.send((0, tid));
            let mut rep = ThreadReport {
                name: "cr-timer".into(),
                tid,
                ..Default::default()
            };
            let _ = go_rx.recv();
            let end = monotonic_ns() + duration.as_nanos() as u64;
            while monotonic_ns() < end {
                rep.timed(|| sleep_for(period));
                write1(&w1)?;
            }
            drop(w1);
            Ok(rep)
        },
    )?;
    let mut tids = [0u32; 3];
    for _ in 0..3 {
        let (i, t) = tid_rx
            .recv()
            .map_err(|_| io::Error::other("workload thread died at start"))?;
        tids[i as usize] = t;
    }
    on_started(tids[0], tids[1], tids[2]);
    let stall = match opts.stall {
        Some(hold) => Some(spawn_stall(
            monotonic_ns() + opts.duration.as_nanos() as u64 * 2 / 5,
            hold,
        )?),
        None => None,
    };
    let _ = go_tx.send(());
    let join_err = |_| io::Error::other("workload thread panicked");
    let timer = timer.join().map_err(join_err)??;
    let (relay, messages) = relay.join().map_err(join_err)??;
    let sink = sink.join().map_err(join_err)??;
    let stall = match stall {
        Some(h) => Some(h.join().map_err(join_err)??),
        None => None,
    };
    Ok(WorkloadReport {
        stall,
        pid: std::process::id(),
        timer,
        relay,
        sink,
        messages,
        start_ns,
        end_ns: monotonic_ns(),
    })
}

/// Run the workload to completion. See [`run_with`].
pub fn run(opts: &WorkloadOptions) -> io::Result<WorkloadReport> {
    run_with(opts, |_, _, _| {})
}

//! bpftrace as the independent reference for waits and wakers (issue 23): a script on the
//! same tracepoints the recorder uses (`sched_switch`, `sched_waking`), its output parsed
//! into per-thread blocked intervals with the waking that ended each, and the check of
//! every level of every chain of `chainrec waits --json --no-dedup` against it: the waker
//! chainrec names must be the task bpftrace saw wake that thread last, at the same time
//! (±[`SLACK_NS`]), and the waker's own wait must have the same boundaries.
//!
//! Both tools stamp events with `bpf_ktime_get_ns()` (bpftrace's `nsecs`, the recorder's
//! `ts`), so times compare directly.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How far apart the two tools' times of one event may be.
pub const SLACK_NS: u64 = 50_000;

/// A waking this long before a thread's blocking switch-out, while it ran, is not taken to
/// have ended that block (the engine's window, crates/chain/src/engine.rs).
const RACE_WINDOW_NS: u64 = 1_000_000;

const SCRIPT: &str = r#"
BEGIN { printf("READY\n"); }
tracepoint:sched:sched_switch {
    printf("S %llu %d %d %d\n", nsecs, args->prev_pid, args->prev_state, args->next_pid);
}
tracepoint:sched:sched_waking {
    printf("W %llu %d %d\n", nsecs, tid, args->pid);
}
"#;

/// Whether bpftrace is installed; when not, `test` [`crate::bpf::skip`]s (loudly, or
/// fails when BPF is required).
pub fn available(test: &str) -> bool {
    if Command::new("bpftrace").arg("--version").output().is_ok() {
        return true;
    }
    crate::bpf::skip(test, "bpftrace is not installed (Debian package bpftrace)");
    false
}

/// bpftrace running the script into a file; killed (SIGINT, then SIGKILL) on drop.
pub struct Bpftrace {
    child: Child,
    out: std::path::PathBuf,
}

impl Bpftrace {
    /// Start it, writing the script into `dir` and its output to `dir/bpftrace.txt`; returns
    /// once its probes are attached.
    pub fn start(dir: &Path) -> std::io::Result<Self> {
        let script = dir.join("sched.bt");
        let out = dir.join("bpftrace.txt");
        std::fs::write(&script, SCRIPT)?;
        let child = Command::new("bpftrace")
            .arg("-o")
            .arg(&out)
            .arg(&script)
            // 16 MiB per CPU: a whole system's switches for a few seconds, none lost.
            .env("BPFTRACE_PERF_RB_PAGES", "4096")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        let b = Bpftrace { child, out };
        let t0 = Instant::now();
        loop {
            if std::fs::read_to_string(&b.out).is_ok_and(|s| s.contains("READY")) {
                return Ok(b);
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(std::io::Error::other("bpftrace did not start in 60 s"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop it (SIGINT: it flushes its output) and parse what it saw. Panics when it lost
    /// events (the reference would be incomplete).
    pub fn stop(mut self, test: &str) -> Reference {
        // SAFETY: kill with a valid pid of our own child and a valid signal.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        eprintln!("{test}: bpftrace stderr: {}", err.trim());
        let text = std::fs::read_to_string(&self.out).expect("bpftrace output");
        assert!(
            !text.contains("Lost") && !err.contains("Lost"),
            "bpftrace lost events: {err}"
        );
        Reference::parse(&text)
    }
}

impl Drop for Bpftrace {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One thread's events as bpftrace saw them, in time order.
#[derive(Default)]
pub struct Thread {
    /// (time, state) of its switch-outs.
    pub outs: Vec<(u64, i64)>,
    /// Times of its switch-ins.
    pub ins: Vec<u64>,
    /// The wakings that ended a blocked interval, each with the switch-out that began it:
    /// (switch-out, waking, waker).
    pub ends: Vec<(u64, u64, u32)>,
}

/// bpftrace's view: per thread, its blocked intervals and who ended them.
pub struct Reference {
    /// Per tid, its events.
    pub threads: HashMap<u32, Thread>,
}

impl Reference {
    /// Parse the script's output.
    pub fn parse(text: &str) -> Self {
        // Per tid: Some(switch-out) while blocked and not yet woken.
        let mut blocked: HashMap<u32, Option<u64>> = HashMap::new();
        // Per tid, blocked after a racing waking: that waking (ts, waker).
        let mut raced: HashMap<u32, (u64, u32)> = HashMap::new();
        let mut threads: HashMap<u32, Thread> = HashMap::new();
        let mut events: Vec<(u64, u8, u32, i64, u32)> = Vec::new();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                ["S", ts, prev, state, next] => events.push((
                    ts.parse().unwrap(),
                    b'S',
                    prev.parse().unwrap(),
                    state.parse().unwrap(),
                    next.parse().unwrap(),
                )),
                ["W", ts, waker, target] => events.push((
                    ts.parse().unwrap(),
                    b'W',
                    waker.parse().unwrap(),
                    0,
                    target.parse().unwrap(),
                )),
                _ => {}
            }
        }
        // Per tid, while it runs: the last waking that targeted it (ts, waker). The kernel
        // emits one only when the thread's state has left TASK_RUNNING, so it raced the
        // block that follows: when that block's switch-in has no waking of its own, this
        // waking ended it, at the switch-out (ENGINE.md, "Woken before it blocked").
        let mut running: HashMap<u32, Option<(u64, u32)>> = HashMap::new();
        // Per-CPU buffers: merge by time.
        events.sort_by_key(|e| e.0);
        for (ts, kind, a, state, b) in events {
            if kind == b'S' {
                if a != 0 {
                    let t = threads.entry(a).or_default();
                    t.outs.push((ts, state));
                    // The tracepoint's prev_state: 0 runnable, 0x100 (TASK_REPORT_MAX)
                    // preempted, anything else blocked (0x80 is TASK_IDLE here; 0x10/0x20
                    // dead).
                    let sleeps = state != 0 && state & 0x100 == 0 && state & 0x30 == 0;
                    blocked.insert(a, sleeps.then_some(ts));
                    let racing = running
                        .remove(&a)
                        .flatten()
                        .filter(|&(at, _)| sleeps && ts - at <= RACE_WINDOW_NS);
                    if let Some(r) = racing {
                        raced.insert(a, r);
                    } else {
                        raced.remove(&a);
                    }
                }
                if b != 0 {
                    if let (Some(Some(out)), Some(&(_, waker))) = (blocked.get(&b), raced.get(&b)) {
                        threads.entry(b).or_default().ends.push((*out, *out, waker));
                    }
                    raced.remove(&b);
                    threads.entry(b).or_default().ins.push(ts);
                    blocked.insert(b, None);
                    running.insert(b, None);
                }
            } else if let Some(Some(out)) = blocked.get(&b).copied() {
                threads.entry(b).or_default().ends.push((out, ts, a));
                blocked.insert(b, None);
                raced.remove(&b);
            } else if let Some(r) = running.get_mut(&b) {
                *r = Some((ts, a));
            }
        }
        Reference { threads }
    }

    /// The blocked interval of `tid` that bpftrace saw end last before `before` (a waking
    /// it did, or its switch-in): (switch-out, waking, waker).
    pub fn last_end(&self, tid: u32, before: u64) -> Option<(u64, u64, u32)> {
        let t = self.threads.get(&tid)?;
        let i = t.ends.partition_point(|e| e.1 < before);
        i.checked_sub(1).map(|i| t.ends[i])
    }

    /// Whether bpftrace saw a waking end `tid`'s blocked interval that began at
    /// `switch_out` (±[`SLACK_NS`]).
    pub fn woken(&self, tid: u32, switch_out: u64) -> bool {
        self.threads.get(&tid).is_some_and(|t| {
            let i = t.ends.partition_point(|e| e.0 + SLACK_NS < switch_out);
            t.ends.get(i).is_some_and(|e| e.0 <= switch_out + SLACK_NS)
        })
    }

    /// Check every level of every chain of `waits` (the whole trace's `chainrec waits
    /// --json --no-dedup` records) whose waiting thread `select` picks.
    pub fn check(&self, waits: &[Value], select: impl Fn(&Value) -> bool) -> Agreement {
        let near = |a: u64, b: u64| a.abs_diff(b) <= SLACK_NS;
        // chainrec's waits by (tid, waking time): (switch-out, waking).
        let by_end: HashMap<(u32, u64), (u64, u64)> = waits
            .iter()
            .filter_map(|v| {
                let wake = v["wake_ns"].as_u64()?;
                Some((
                    (v["tid"].as_u64()? as u32, wake),
                    (v["switch_out_ns"].as_u64()?, wake),
                ))
            })
            .collect();
        let mut a = Agreement::default();
        for w in waits.iter().filter(|w| select(w)) {
            let (Some(wake), Some(sw_in)) = (w["wake_ns"].as_u64(), w["switch_in_ns"].as_u64())
            else {
                continue;
            };
            a.roots += 1;
            let all = w["hops"].as_array().expect("hops");
            // Earlier waits (branches of the DAG): the waking under each `[earlier wait]`
            // level ended that thread's wait, as bpftrace saw it.
            for (i, h) in all.iter().enumerate() {
                if h["kind"].as_str() != Some("earlier wait") {
                    continue;
                }
                let Some(child) = all[i + 1..].iter().find(|c| parent_of(c) == i as u64 + 1) else {
                    continue;
                };
                let thread = h["waker_tid"].as_u64().unwrap() as u32;
                let (ts, waker) = (
                    child["ts_ns"].as_u64().unwrap(),
                    child["waker_tid"].as_u64().unwrap() as u32,
                );
                let metal = child["metal"].as_bool() == Some(true);
                let seen = self.last_end(thread, ts + 1);
                // An interrupt's hop names the task it interrupted, which a merged
                // branch does not keep: only the time is checked there.
                let ok = seen.is_some_and(|(_, at, by)| near(at, ts) && (metal || by == waker));
                a.earlier.0 += 1;
                if ok {
                    a.earlier.1 += 1;
                } else if a.bad.len() < 40 {
                    a.bad.push(format!(
                        "earlier wait of thread {thread} in tid {} wait at {}: woken by {waker} at {ts}; bpftrace: {seen:?}",
                        w["tid"], w["switch_out_ns"]
                    ));
                }
            }
            let hops = main_chain(all);
            // The thread whose waking level k explains, and the time before which
            // bpftrace's last end of its blocked interval is the one chainrec follows.
            let mut thread = w["tid"].as_u64().unwrap() as u32;
            let mut before = sw_in + 1;
            let mut own = (w["switch_out_ns"].as_u64().unwrap(), wake);
            for (p, h) in hops.iter().enumerate() {
                // The main chain's levels by position (branch levels are numbered too).
                let level = p + 1;
                let waker = h["waker_tid"].as_u64().unwrap() as u32;
                let ts = h["ts_ns"].as_u64().unwrap();
                let e = a.levels.entry(level).or_default();
                e.0 += 1;
                let seen = self.last_end(thread, before);
                let ok = seen.is_some_and(|(out, at, by)| {
                    by == waker && near(at, ts) && near(at, own.1) && near(out, own.0)
                });
                if ok {
                    e.1 += 1;
                } else if a.bad.len() < 40 {
                    a.bad.push(format!(
                        "level {level} of tid {} wait at {}: thread {thread} woken by {waker} ({}) at {ts}, its wait {own:?}; bpftrace: {seen:?}",
                        w["tid"], w["switch_out_ns"], h["waker_comm"]
                    ));
                }
                if h["metal"].as_bool() == Some(true) {
                    break;
                }
                // The next level explains the waker: its blocked interval ended by the
                // next hop's waking, before it woke `thread`.
                before = ts;
                thread = waker;
                own = match hops.get(level) {
                    Some(n) => {
                        let t = n["ts_ns"].as_u64().unwrap();
                        // Its own wait as chainrec recorded it (a wait begun before the
                        // trace has no record: then bpftrace's switch-out is not checked).
                        match by_end.get(&(thread, t)) {
                            Some(&b) => b,
                            None => (self.last_end(thread, before).map_or(0, |e| e.0), t),
                        }
                    }
                    None => break,
                };
            }
        }
        a
    }
}

/// The main chain of a wait as `waits --json` prints it: from the first level, each
/// level's waker child (`hops[]` is the wakeup DAG in preorder; a branch level has a
/// `parent` other than `level - 1`, or a `kind`).
pub fn main_chain(hops: &[Value]) -> Vec<&Value> {
    let mut out = Vec::new();
    let mut cur = 0u64;
    for h in hops {
        let level = h["level"].as_u64().unwrap_or(0);
        if parent_of(h) == cur && h.get("kind").is_none_or(Value::is_null) {
            out.push(h);
            cur = level;
        }
    }
    out
}

/// The level a `waits --json` hop hangs under (`parent`, absent when it is `level - 1`).
pub fn parent_of(h: &Value) -> u64 {
    let level = h["level"].as_u64().unwrap_or(0);
    h["parent"].as_u64().unwrap_or(level.saturating_sub(1))
}

/// The result of [`Reference::check`].
#[derive(Default, Debug)]
pub struct Agreement {
    /// Waits checked (those with a waking and a switch-in).
    pub roots: u64,
    /// Per level of the main chain: (hops checked, hops that agree).
    pub levels: BTreeMap<usize, (u64, u64)>,
    /// Earlier waits shown as branches whose waking was checked: (checked, agree).
    pub earlier: (u64, u64),
    /// The first disagreements, described.
    pub bad: Vec<String>,
}

impl Agreement {
    /// Print the disagreements and the per-level numbers under `label`.
    pub fn print(&self, label: &str) {
        for l in &self.bad {
            eprintln!("{label}: disagreement: {l}");
        }
        let pct: Vec<String> = self
            .levels
            .iter()
            .map(|(l, (n, ok))| format!("L{l} {ok}/{n} ({:.1} %)", *ok as f64 * 100.0 / *n as f64))
            .collect();
        eprintln!(
            "{label}: {} waits; bpftrace agreement per level: {}; earlier-wait branches: {}/{}",
            self.roots,
            pct.join(", "),
            self.earlier.1,
            self.earlier.0
        );
    }

    /// At least `percent` % of the hops of every level agree; a level too small for one
    /// disagreement to stay within that (under 34 hops for 97 %) may have one.
    #[track_caller]
    pub fn assert_at_least(&self, label: &str, percent: u64) {
        let (n, ok) = self.earlier;
        assert!(
            n - ok <= (n * (100 - percent) / 100).max(1),
            "{label}: earlier-wait branches: {ok} of {n} wakings agree with bpftrace (< {percent} %)"
        );
        for (level, (n, ok)) in &self.levels {
            let allowed = (n * (100 - percent) / 100).max(1);
            assert!(
                n - ok <= allowed,
                "{label}: level {level}: {ok} of {n} hops agree with bpftrace (< {percent} %)"
            );
        }
    }
}

//! Goroutine-level chains (issue 38, item 2; first version, docs/ENGINE.md "Goroutine
//! chains"): why a goroutine waited, through the goroutines that readied it, down to the
//! Go runtime (its timers, the network poller). Built from the trace's goroutine records
//! (`runtime.gopark` / `runtime.ready` probes), by CHAINS.md's time-bounded attribution
//! with goroutines in place of threads: goroutine G parked over `[a, b]` and was readied
//! at `b` by goroutine W1; W1's own time inside `[a, b]` is W1's level, and where W1 had
//! itself parked inside it, the goroutine that readied W1 explains that part, and so on,
//! down to a ready by the runtime (`[go runtime: timer]`, `[go runtime: netpoll]`,
//! `[go runtime]`), which takes the rest. Each nanosecond of a wait is on one line.
//!
//! Subchain dedup as CHAINS.md defines it: a wait whose ready is an inner level of another
//! goroutine's chain is not a root of its own (`dedup` off shows every wait).
//!
//! A netpoll ready is joined to the thread level (session 25): when the thread that ran
//! netpoll had just been woken out of `epoll_wait` (the scheduler's blocking netpoll), that
//! wakeup's waker, as thread chains print it, is what made the fd ready: on loopback the
//! peer's thread in its write with `[softirq: NET_RX]` on top. It is the next level, and,
//! when the goroutine running on the waker's thread then is known, that goroutine's own
//! chain goes on below it. A readiness found by a non-blocking poll (the thread had run
//! goroutines or slept elsewhere since its last wakeup) ends at
//! `[go runtime: netpoll, polled]`.
//!
//! The runnable part (session 25): with the trace's `runtime.execute` records (format
//! 2.3), a wait ends when its goroutine runs again, not at its ready: the interval
//! ready → execute is the root's `[run queue]` level (no holder: which goroutine held the
//! P meanwhile is not recorded), and a waker goroutine's own time inside a level splits
//! the same way into runnable (its ready → its execute, `…;goroutine;--;[run queue]`) and
//! running. Without execute records the lines are the parked part alone, as before.
//!
//! Stop-the-world (session 26): with the trace's stop-the-world records (format 2.4), the
//! part of any of those runnable intervals that lies inside a stop-the-world of the
//! goroutine's process (stop → start of the world: no goroutine of it can run) is
//! `[go runtime: GC stop-the-world (GC mark termination)]` (the reason as recorded; a
//! stop-the-world not for a GC is `[go runtime: stop-the-world (reason)]`) in place of
//! `[run queue]`; the rest stays `[run queue]`, so every nanosecond is still on one line.
//!
//! Not yet (the thread engine has them): earlier-wait branches (a waker's earlier parks
//! inside its level stay with its level).

use crate::analyses::gothreads::{goroutine_entry, GoThreadWakes, Sleep};
use crate::engine::frames::stack_frames;
use chainrec_format::{GoEvent, GoEventKind, GoExecute, StackId, Tables, Tid};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// What [`goroutine_chains`] counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoChainStats {
    /// Goroutine waits (a park ended by a ready of the same goroutine), each a root.
    pub waits: u64,
    /// Their total time (ns): parked, plus runnable when the execute is known; the sum
    /// of the lines' weights.
    pub waits_ns: u64,
    /// Of `waits_ns`, the roots' runnable time (ready → execute), in `[run queue]` lines.
    pub runnable_ns: u64,
    /// Of `runnable_ns`, the part inside a stop-the-world of the goroutine's process, in
    /// `[go runtime: ... stop-the-world ...]` lines.
    pub stw_ns: u64,
    /// Stop-the-world periods in the trace (stop → start, all Go processes).
    pub stw_periods: u64,
    /// Waits whose execute after the ready is not in the trace (always all of them in a
    /// trace without execute records: then their runnable part is unknown, not shown).
    pub runnable_unknown: u64,
    /// Waits not shown as roots: their ready is an inner level of another chain (dedup).
    pub hidden_by_dedup: u64,
    /// Waits readied by the runtime itself (no goroutine on the thread: timers, netpoll).
    pub by_runtime: u64,
    /// Readies of a goroutine with no park seen: parked before the probes attached.
    pub readies_without_park: u64,
    /// Parks never readied in the trace (still parked at its end, or made runnable
    /// without `runtime.ready`, as GC mark workers are).
    pub open_at_end: u64,
    /// Chains cut at the depth limit (the last level takes the rest, `[truncated]`).
    pub truncated: u64,
    /// Go processes whose probes were detached by the rate cap: no goroutine records after
    /// that, so later waits are missing.
    pub capped_processes: u64,
    /// Netpoll levels of the shown chains, by how they end: joined to the thread wakeup
    /// that ended the poller thread's `epoll_wait`, found by a non-blocking poll
    /// (`polled`), or neither (no thread-level wait of the poller thread known, or no
    /// thread index given).
    pub netpoll: NetpollShares,
}

/// Netpoll levels (a ready by the network poller inside a shown chain) and the time
/// (ns) at and below them, by how they end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetpollShares {
    /// Joined to the poller thread's wakeup out of `epoll_wait`: (levels, ns).
    pub joined: (u64, u64),
    /// Of the joined levels' ns, the poller thread's own time after its wakeup (waiting
    /// for a CPU, then running up to the ready).
    pub poller_ns: u64,
    /// Of the joined levels, those continued into the goroutine that ran on the waker's
    /// thread.
    pub into_goroutine: (u64, u64),
    /// Found by a non-blocking poll: (levels, ns).
    pub polled: (u64, u64),
    /// Neither: (levels, ns).
    pub unjoined: (u64, u64),
}

impl NetpollShares {
    fn add(&mut self, o: &NetpollShares) {
        self.poller_ns += o.poller_ns;
        for (a, b) in [
            (&mut self.joined, o.joined),
            (&mut self.into_goroutine, o.into_goroutine),
            (&mut self.polled, o.polled),
            (&mut self.unjoined, o.unjoined),
        ] {
            a.0 += b.0;
            a.1 += b.1;
        }
    }
}

/// Goroutine chains of a trace: folded lines in first-seen order, weights in ns.
#[derive(Clone, Debug, Default)]
pub struct GoChains {
    /// `line` → weight (ns), in the order lines were first produced.
    pub lines: Vec<(String, u64)>,
    /// What was counted.
    pub stats: GoChainStats,
}

/// A ready: the hop of a goroutine chain.
#[derive(Clone, Copy, Debug)]
struct Hop {
    ts: u64,
    /// The readied goroutine's process.
    tgid: Tid,
    /// The readying goroutine (0: the runtime).
    waker: u64,
    stack: StackId,
    /// The ready that ended the waker's most recent park before this one, and that
    /// park's start.
    cause: Option<usize>,
    cause_s: u64,
    /// A ready by netpoll: its join to the thread level (index into the joins).
    join: Option<usize>,
    /// When the readied goroutine then started running (`runtime.execute`), 0: unknown.
    exec: u64,
}

impl Hop {
    /// The readied goroutine's runnable interval inside `[from, to]` (its ready → its
    /// execute, clipped; empty when the execute is unknown).
    fn runnable_in(&self, from: u64, to: u64) -> (u64, u64) {
        if self.exec == 0 || from >= to {
            return (from, from);
        }
        let (r, x) = (self.ts.clamp(from, to), self.exec.clamp(from, to));
        (r, x.max(r))
    }
}

/// The stop-the-world periods of each Go process: (stop, start, reason), in time order.
#[derive(Default)]
struct Stws(FxHashMap<Tid, Vec<(u64, u64, u8)>>);

impl Stws {
    fn new(go: &chainrec_format::Goroutines) -> Stws {
        let mut tgids: Vec<Tid> = go.stws().iter().map(|s| s.tgid).collect();
        tgids.sort_unstable();
        tgids.dedup();
        Stws(tgids.into_iter().map(|t| (t, go.stw_periods(t))).collect())
    }

    /// Runnable time `[from, to]` of a goroutine of process `tgid` split by its process's
    /// stop-the-world periods: (label, ns) in time order, `[run queue]` outside them; the
    /// weights add up to `to - from`.
    fn split(&self, tgid: Tid, from: u64, to: u64) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        let Some(periods) = self.0.get(&tgid).filter(|_| from < to) else {
            if to > from {
                out.push((RUNQ, to - from));
            }
            return out;
        };
        let first = periods.partition_point(|p| p.1 <= from);
        let mut at = from;
        for &(a, b, reason) in &periods[first..] {
            if a >= to {
                break;
            }
            let (a, b) = (a.max(at), b.min(to));
            if a > at {
                out.push((RUNQ, a - at));
            }
            if b > a {
                out.push((stw_label(reason), b - a));
            }
            at = at.max(b);
        }
        if to > at {
            out.push((RUNQ, to - at));
        }
        out
    }
}

/// The level of runnable time inside a stop-the-world with this reason.
fn stw_label(reason: u8) -> &'static str {
    match reason {
        1 => "[go runtime: GC stop-the-world (GC mark termination)]",
        2 => "[go runtime: GC stop-the-world (GC sweep termination)]",
        3 => "[go runtime: stop-the-world (write heap dump)]",
        4 | 5 => "[go runtime: stop-the-world (goroutine profile)]",
        6 => "[go runtime: stop-the-world (all goroutines stack trace)]",
        7 => "[go runtime: stop-the-world (read mem stats)]",
        8 => "[go runtime: stop-the-world (AllThreadsSyscall)]",
        9 => "[go runtime: stop-the-world (GOMAXPROCS)]",
        10 | 11 => "[go runtime: stop-the-world (tracer start/stop)]",
        _ => "[go runtime: stop-the-world]",
    }
}

/// How a netpoll ready joins the thread level.
#[derive(Clone, Debug)]
enum Join {
    /// The poller thread was woken out of `epoll_wait` at `wake` by `level` (a thread
    /// chain's first level, leaf first) and ran again at `switch_in`; `cause` is the ready that ended the last park
    /// of the goroutine then running on the waker's thread (and that park's start).
    Joined {
        wake: u64,
        switch_in: u64,
        level: Arc<str>,
        cause: Option<(usize, u64)>,
    },
    /// The readiness was found by a non-blocking poll.
    Polled,
    /// No thread-level wait of the poller thread is known.
    Unjoined,
}

#[derive(Clone, Copy, Debug, Default)]
struct GState {
    /// Open park: its start, stack and reason.
    park: Option<(u64, StackId, u8)>,
    /// The ready that ended its last park, and that park's start.
    last_cause: Option<(usize, u64)>,
}

/// A wait's lines, kept until every chain has marked the readies it uses.
struct Pending {
    /// The ready that ended the wait.
    hop: usize,
    /// Interned lines ([`Interned`]) and their weights.
    lines: Vec<(u32, u64)>,
    netpoll: NetpollShares,
}

/// Each distinct line once (a wait's lines wait for the dedup marks of later chains, and
/// many waits share lines).
#[derive(Default)]
struct Interned {
    index: FxHashMap<String, u32>,
    texts: Vec<String>,
}

impl Interned {
    fn id(&mut self, line: &str) -> u32 {
        if let Some(&i) = self.index.get(line) {
            return i;
        }
        let i = self.texts.len() as u32;
        self.index.insert(line.to_string(), i);
        self.texts.push(line.to_string());
        i
    }
}

/// Folded goroutine chains of every goroutine wait in `tables`' goroutine records, at
/// most `max_depth` levels per chain; `threshold_ns` names skipped stacks; `dedup` hides
/// the waits whose ready another chain shows as an inner level; `threads` (the Go
/// processes' thread-level wakeups, [`crate::GoThreadSink`]) joins netpoll readies to
/// the kernel chain behind them (without it they end at `[go runtime: netpoll]`).
pub fn goroutine_chains(
    tables: &Tables,
    threads: Option<&GoThreadWakes>,
    max_depth: usize,
    threshold_ns: u64,
    dedup: bool,
) -> GoChains {
    let go = &tables.goroutines;
    let events = go.events();
    let mut out = GoChains::default();
    out.stats.capped_processes = go.processes().filter(|p| p.capped_ns > 0).count() as u64;
    let start = events.first().map_or(0, |e| e.ts);
    let running = Running::new(events);
    let execs = exec_times(events, go.executes());
    let stws = Stws::new(go);
    out.stats.stw_periods = stws.0.values().map(|v| v.len() as u64).sum();
    let mut states: FxHashMap<(Tid, u64), GState> = FxHashMap::default();
    let mut history = History::default();
    let mut hops: Vec<Hop> = Vec::new();
    let mut joins: Vec<Join> = Vec::new();
    // Readies used as inner levels of some chain (dedup), by hop.
    let mut inner: Vec<bool> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut interned = Interned::default();
    let mut names = Names {
        tables,
        threshold_ns,
        cache: FxHashMap::default(),
    };
    for (i, e) in events.iter().enumerate() {
        match e.kind {
            GoEventKind::Park => {
                states.entry((e.tgid, e.goid)).or_default().park = Some((e.ts, e.stack, e.reason));
            }
            GoEventKind::Ready => {
                let (cause, cause_s) = match e.waker {
                    0 => (None, 0),
                    w => match states.get(&(e.tgid, w)).and_then(|s| s.last_cause) {
                        Some((c, s)) => (Some(c), s),
                        None => (None, 0),
                    },
                };
                let join = match threads {
                    Some(th) if e.waker == 0 && names.runtime_label(e.stack) == NETPOLL => {
                        joins.push(join_of(e, th, &running, &history, &mut names));
                        Some(joins.len() - 1)
                    }
                    _ => None,
                };
                let h = hops.len();
                hops.push(Hop {
                    ts: e.ts,
                    tgid: e.tgid,
                    waker: e.waker,
                    stack: e.stack,
                    cause,
                    cause_s,
                    join,
                    exec: execs[i],
                });
                inner.push(false);
                let st = states.entry((e.tgid, e.goid)).or_default();
                let park = st.park.take();
                let a = park.map_or(start, |p| p.0);
                st.last_cause = Some((h, a));
                history
                    .entry((e.tgid, e.goid))
                    .or_default()
                    .push((e.ts, h, a));
                let Some((a, pstack, reason)) = park else {
                    out.stats.readies_without_park += 1;
                    continue;
                };
                out.stats.waits += 1;
                out.stats.waits_ns += e.ts.saturating_sub(a);
                if e.waker == 0 {
                    out.stats.by_runtime += 1;
                }
                let mut lines = Vec::new();
                let mut line = |path: &str, w: u64| {
                    if w > 0 {
                        lines.push((interned.id(path), w));
                    }
                };
                let mut netpoll = NetpollShares::default();
                let mut path = names.root(e.tgid, pstack, reason);
                // The root's runnable part: ready → execute, a level of its own.
                match execs[i] {
                    0 => out.stats.runnable_unknown += 1,
                    x => {
                        let rq = x.saturating_sub(e.ts);
                        out.stats.waits_ns += rq;
                        out.stats.runnable_ns += rq;
                        for (label, w) in stws.split(e.tgid, e.ts, x) {
                            if label != RUNQ {
                                out.stats.stw_ns += w;
                            }
                            line(&format!("{path};--;{label}"), w);
                        }
                    }
                }
                let (mut l, mut t) = (a, e.ts);
                let mut cur = h;
                let mut depth = 1;
                loop {
                    let hop = hops[cur];
                    let join = hop.join.map(|j| &joins[j]);
                    path.push_str(";--;");
                    path.push_str(&names.level(hop.waker, hop.stack, join));
                    // The cause below this level: the ready that ended the waker's last
                    // park; below a joined netpoll, the thread that woke the poller and
                    // then the ready that ended its goroutine's last park.
                    let mut below = match hop.cause {
                        Some(c) if hop.waker != 0 => Some((c, hop.cause_s)),
                        _ => None,
                    };
                    let share = (1, t.saturating_sub(l));
                    match join {
                        Some(Join::Joined {
                            wake,
                            switch_in,
                            level,
                            cause,
                        }) => {
                            bump(&mut netpoll.joined, share);
                            let tw = (*wake).clamp(l, t);
                            if tw > l && depth >= max_depth {
                                out.stats.truncated += 1;
                                path.push_str(";[truncated]");
                                line(&path, t.saturating_sub(l));
                                break;
                            }
                            // The poller thread's own time after its wakeup (all of the
                            // wait when it was woken before the park): running up to the
                            // ready, and before that runnable, waiting for a CPU.
                            let si = (*switch_in).clamp(tw, t);
                            netpoll.poller_ns += t - tw;
                            line(&path, t - si);
                            line(&format!("{path};--;{RUNQ}"), si - tw);
                            if tw == l {
                                break;
                            }
                            path.push_str(";--;");
                            path.push_str(level);
                            t = tw;
                            depth += 1;
                            below = *cause;
                            if below.is_some_and(|(c, _)| hops[c].ts > l) {
                                bump(&mut netpoll.into_goroutine, share);
                            }
                        }
                        Some(Join::Polled) => bump(&mut netpoll.polled, share),
                        Some(Join::Unjoined) => bump(&mut netpoll.unjoined, share),
                        None => {}
                    }
                    let next = below.filter(|&(c, _)| hops[c].ts > l);
                    // The waker goroutine's own time includes its runnable part after
                    // the ready that ended its park (then it ran up to its ready here).
                    // Its runnable interval [r, x]: `[run queue]`, and the parts inside a
                    // stop-the-world of its process.
                    let runq = |line: &mut dyn FnMut(&str, u64), path: &str, c: usize, (r, x)| {
                        for (label, w) in stws.split(hops[c].tgid, r, x) {
                            line(&format!("{path};--;{label}"), w);
                        }
                    };
                    match next {
                        Some((c, cs)) if depth < max_depth => {
                            let l2 = l.max(cs);
                            let ct = hops[c].ts.min(t);
                            let own = t.saturating_sub(l) - ct.saturating_sub(l2);
                            let rq = hops[c].runnable_in(ct, t);
                            line(&path, own - (rq.1 - rq.0));
                            runq(&mut line, &path, c, rq);
                            inner[c] = true;
                            l = l2;
                            t = ct;
                            cur = c;
                            depth += 1;
                        }
                        Some(_) => {
                            out.stats.truncated += 1;
                            path.push_str(";[truncated]");
                            line(&path, t.saturating_sub(l));
                            break;
                        }
                        None => {
                            let rq = below.map_or((l, l), |(c, _)| hops[c].runnable_in(l, t));
                            line(&path, t.saturating_sub(l) - (rq.1 - rq.0));
                            if let Some((c, _)) = below {
                                runq(&mut line, &path, c, rq);
                            }
                            break;
                        }
                    }
                }
                pending.push(Pending {
                    hop: h,
                    lines,
                    netpoll,
                });
            }
        }
    }
    out.stats.open_at_end = states.values().filter(|s| s.park.is_some()).count() as u64;
    // Lines in the order the shown waits first produce them; zero weights are not lines.
    let mut at: Vec<Option<usize>> = vec![None; interned.texts.len()];
    for p in pending {
        if dedup && inner[p.hop] {
            out.stats.hidden_by_dedup += 1;
            continue;
        }
        out.stats.netpoll.add(&p.netpoll);
        for (id, w) in p.lines {
            if w == 0 {
                continue;
            }
            match at[id as usize] {
                Some(i) => out.lines[i].1 += w,
                None => {
                    at[id as usize] = Some(out.lines.len());
                    out.lines
                        .push((std::mem::take(&mut interned.texts[id as usize]), w));
                }
            }
        }
    }
    out
}

/// For each record of `events`, when it is a ready: the time of the first execute of the
/// same goroutine after it and before the goroutine's next park or ready, else 0.
fn exec_times(events: &[GoEvent], executes: &[GoExecute]) -> Vec<u64> {
    let mut out = vec![0; events.len()];
    if executes.is_empty() {
        return out;
    }
    // The ready of each goroutine still waiting for its execute.
    let mut open: FxHashMap<(Tid, u64), usize> = FxHashMap::default();
    let mut xs = executes.iter().peekable();
    let mut apply = |open: &mut FxHashMap<(Tid, u64), usize>, x: &GoExecute| {
        if let Some(i) = open.remove(&(x.tgid, x.goid)) {
            out[i] = x.ts;
        }
    };
    for (i, e) in events.iter().enumerate() {
        // An execute at the ready's own time comes after it (it cannot run before).
        while let Some(x) = xs.next_if(|x| x.ts < e.ts) {
            apply(&mut open, x);
        }
        match e.kind {
            GoEventKind::Ready => open.insert((e.tgid, e.goid), i),
            GoEventKind::Park => open.remove(&(e.tgid, e.goid)),
        };
    }
    for x in xs {
        apply(&mut open, x);
    }
    out
}

/// Per goroutine (process, goid): the readies that ended its parks, as (time, hop, park
/// start), in time order.
type History = FxHashMap<(Tid, u64), Vec<(u64, usize, u64)>>;

fn bump(a: &mut (u64, u64), b: (u64, u64)) {
    a.0 += b.0;
    a.1 += b.1;
}

/// Which goroutine ran on a thread when: the goroutine records of each thread (a park
/// is its goroutine's, a ready by a goroutine its waker's), in time order.
struct Running {
    by_tid: FxHashMap<Tid, Vec<(u64, u64, StackId)>>,
}

impl Running {
    fn new(events: &[GoEvent]) -> Running {
        let mut by_tid: FxHashMap<Tid, Vec<(u64, u64, StackId)>> = FxHashMap::default();
        for e in events {
            let g = match e.kind {
                GoEventKind::Park => e.goid,
                GoEventKind::Ready => e.waker,
            };
            if g != 0 {
                by_tid.entry(e.tid).or_default().push((e.ts, g, e.stack));
            }
        }
        Running { by_tid }
    }

    /// Whether a goroutine ran on `tid` inside `(from, to)`.
    fn any_between(&self, tid: Tid, from: u64, to: u64) -> bool {
        self.by_tid.get(&tid).is_some_and(|v| {
            let i = v.partition_point(|r| r.0 <= from);
            v.get(i).is_some_and(|r| r.0 < to)
        })
    }

    /// The first goroutine record of `tid` after `ts`: (time, goroutine, stack).
    fn next_after(&self, tid: Tid, ts: u64) -> Option<(u64, u64, StackId)> {
        let v = self.by_tid.get(&tid)?;
        v.get(v.partition_point(|r| r.0 <= ts)).copied()
    }
}

/// The join of netpoll ready `e` (by the runtime on thread `e.tid`) to the thread level.
fn join_of(
    e: &GoEvent,
    threads: &GoThreadWakes,
    running: &Running,
    history: &History,
    names: &mut Names<'_>,
) -> Join {
    let Some(w) = threads.last_before(e.tid, e.ts) else {
        return Join::Unjoined;
    };
    // A non-blocking poll: the thread slept elsewhere (a futex), or ran goroutines since
    // it left epoll_wait (so this is a later poll of its scheduler loop).
    if w.sleep != Sleep::Epoll || running.any_between(e.tid, w.switch_in, e.ts) {
        return Join::Polled;
    }
    // The goroutine on the waker's thread at the wakeup: that of the thread's next
    // goroutine record, if the thread did not block in between (a goroutine leaves its M
    // without a record only when preempted, yielding, or when its system call's return
    // finds no P, which blocks the M), and, when the waker's user stack was taken, if
    // that stack is of the same goroutine function (same entry function).
    let goroutine = match running.next_after(w.waker_tid, w.wake) {
        _ if w.waker_tid == 0 || w.waker_tgid == 0 => None,
        Some((ts, g, s)) if !threads.blocked_between(w.waker_tid, w.wake, ts) => {
            let same = match &w.entry {
                Some(entry) => goroutine_entry(names.frames(s)).as_deref() == Some(&**entry),
                None => true,
            };
            same.then_some(g)
        }
        _ => None,
    };
    let cause = goroutine.and_then(|g| {
        let v = history.get(&(w.waker_tgid, g))?;
        let i = v.partition_point(|r| r.0 <= w.wake);
        i.checked_sub(1).map(|j| (v[j].1, v[j].2))
    });
    Join::Joined {
        wake: w.wake,
        switch_in: w.switch_in,
        level: w.level.clone(),
        cause,
    }
}

/// Frame text of stacks, named once.
struct Names<'a> {
    tables: &'a Tables,
    threshold_ns: u64,
    cache: FxHashMap<StackId, Vec<String>>,
}

impl Names<'_> {
    fn frames(&mut self, s: StackId) -> &[String] {
        let (t, th) = (self.tables, self.threshold_ns);
        self.cache
            .entry(s)
            .or_insert_with(|| stack_frames(t, s, th))
    }

    /// The waiting goroutine: `goroutine`, its stack root to leaf, then `wait: REASON`.
    fn root(&mut self, tgid: Tid, s: StackId, reason: u8) -> String {
        let reason = self.tables.goroutines.reason_name(tgid, reason);
        let mut out = String::from("goroutine");
        for f in self.frames(s).iter().rev() {
            out.push(';');
            out.push_str(f);
        }
        // Not bracketed: a wait reason is no marker (`[...]` frames are drawn as such).
        out.push_str(";wait: ");
        out.push_str(&reason);
        out
    }

    /// What a ready by the runtime on stack `s` was: `[go runtime: timer]`,
    /// `[go runtime: netpoll]` or `[go runtime]`, from its frames up to `runtime.mcall`
    /// (below it are the frames of whatever goroutine last ran on the thread, not a cause).
    fn runtime_label(&mut self, s: StackId) -> &'static str {
        let mut label = RUNTIME;
        for f in self.frames(s) {
            if f == "runtime.mcall" {
                break;
            }
            if f.starts_with("runtime.netpoll") {
                label = NETPOLL;
            } else if label == RUNTIME && TIMER_FRAMES.contains(&f.as_str()) {
                label = TIMER;
            }
        }
        label
    }

    /// A level: the readying goroutine's stack leaf to root, then `goroutine`; or, for a
    /// ready by the runtime, its scheduler frames up to `runtime.mcall`, then what it was
    /// ([`Self::runtime_label`]; a netpoll ready found by a non-blocking poll:
    /// `[go runtime: netpoll, polled]`).
    fn level(&mut self, waker: u64, s: StackId, join: Option<&Join>) -> String {
        let mut label = if waker == 0 {
            self.runtime_label(s)
        } else {
            RUNTIME
        };
        if label == NETPOLL && matches!(join, Some(Join::Polled)) {
            label = POLLED;
        }
        let frames = self.frames(s);
        let mut out = String::new();
        if waker != 0 {
            for f in frames {
                out.push_str(f);
                out.push(';');
            }
            out.push_str("goroutine");
            return out;
        }
        for f in frames {
            if f == "runtime.mcall" {
                break;
            }
            out.push_str(f);
            out.push(';');
        }
        out.push_str(label);
        out
    }
}

/// A ready by the runtime, by what it was.
const RUNTIME: &str = "[go runtime]";
const TIMER: &str = "[go runtime: timer]";
/// The runtime's functions that run expired timers (a sleep's `goroutineReady` among
/// them): Go 1.19's `checkTimers` → `runtimer` → `runOneTimer`; Go 1.23's new timers (1.24
/// is Debian 13's) `(*timers).check` → `(*timers).run` → `(*timer).unlockAndRun`.
const TIMER_FRAMES: [&str; 6] = [
    "runtime.runOneTimer",
    "runtime.runtimer",
    "runtime.checkTimers",
    "runtime.(*timer).unlockAndRun",
    "runtime.(*timers).run",
    "runtime.(*timers).check",
];
const NETPOLL: &str = "[go runtime: netpoll]";
/// A netpoll ready found by a non-blocking poll: no thread wakeup to join.
const POLLED: &str = "[go runtime: netpoll, polled]";
/// Below a joined netpoll level: the poller thread was runnable (woken, not yet on a CPU).
const RUNQ: &str = crate::engine::nodes::RUNQ_FRAME;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analyses::gothreads::ThreadWake;
    use chainrec_format::{GoDelta, GoProcess, GoStw};

    fn ev(ts: u64, kind: GoEventKind, goid: u64, waker: u64, reason: u8) -> GoEvent {
        GoEvent {
            ts,
            cpu: 0,
            tid: 100,
            tgid: 100,
            kind,
            goid,
            waker,
            reason,
            stack: StackId::NONE,
        }
    }

    /// The channel pipeline, twice: receiver 8 <- relay 7 <- producer 6 <- the runtime.
    /// The receiver's second wait [1000, 2100] splits as CHAINS.md says: the relay's own
    /// time after its ready [2000, 2100], the producer's after its ready [1900, 2000],
    /// the runtime's ready the producer slept until [1000, 1900]. The relay's and the
    /// producer's waits are roots of their own (no dedup yet).
    #[test]
    fn chains_split_the_wait_by_readying_goroutine_down_to_the_runtime() {
        use GoEventKind::{Park, Ready};
        let (recv, sleep) = (1, 2);
        let mut t = Tables::default();
        t.goroutines.merge(&GoDelta {
            events: vec![
                ev(0, Park, 6, 0, sleep),
                ev(0, Park, 7, 0, recv),
                ev(0, Park, 8, 0, recv),
                // Round 1: the timer readies the producer, which sends to the relay...
                ev(900, Ready, 6, 0, 0),
                ev(950, Ready, 7, 6, 0),
                ev(960, Park, 6, 0, sleep),
                ev(990, Ready, 8, 7, 0),
                ev(995, Park, 7, 0, recv),
                ev(1000, Park, 8, 0, recv),
                // Round 2.
                ev(1900, Ready, 6, 0, 0),
                ev(2000, Ready, 7, 6, 0),
                ev(2010, Park, 6, 0, sleep),
                ev(2100, Ready, 8, 7, 0),
                // Still parked at the end.
                ev(2110, Park, 7, 0, recv),
            ],
            processes: vec![GoProcess {
                tgid: 100,
                version: "go1.19.8".into(),
                reasons: vec![String::new(), "chan receive".into(), "sleep".into()],
                capped_ns: 0,
            }],
            executes: vec![],
            stws: vec![],
        });
        let g = goroutine_chains(&t, None, 8, 0, false);
        let root = |r: &str| format!("goroutine;wait: {r}");
        let gor = "goroutine";
        let timer = "[go runtime]";
        let (r, s) = (root("chan receive"), root("sleep"));
        // Worked out by hand from CHAINS.md's rule (levels: own time of each readying
        // goroutine inside the wait, the rest to the ready that ended its park).
        let want = vec![
            // The producer's sleeps, [0, 900] and [960, 1900]: the runtime's.
            (format!("{s};--;{timer}"), 900 + 940),
            // The relay's waits [0, 950], [995, 2000] and the receiver's [0, 990],
            // [1000, 2100]: the waker's own time after the ready that ended its park...
            (format!("{r};--;{gor}"), 50 + 100 + 40 + 100),
            (format!("{r};--;{gor};--;{timer}"), 900 + 905),
            // ... and, for the receiver, the producer's own time below the relay.
            (format!("{r};--;{gor};--;{gor}"), 50 + 100),
            (format!("{r};--;{gor};--;{gor};--;{timer}"), 900 + 900),
        ];
        let got: Vec<(String, u64)> = g.lines.clone();
        let total: u64 = got.iter().map(|l| l.1).sum();
        assert_eq!(total, g.stats.waits_ns, "{got:#?}");
        assert_eq!(g.stats.waits, 6);
        assert_eq!(g.stats.by_runtime, 2);
        assert_eq!(g.stats.open_at_end, 2);
        // Weights by line, whatever the order.
        let mut by: std::collections::BTreeMap<String, u64> = Default::default();
        for (l, w) in &got {
            *by.entry(l.clone()).or_default() += w;
        }
        let mut want_by: std::collections::BTreeMap<String, u64> = Default::default();
        for (l, w) in want {
            *want_by.entry(l).or_default() += w;
        }
        assert_eq!(by, want_by);
        // Dedup: the producer's and the relay's waits are inner levels of the receiver's
        // chains, so only the receiver's waits are roots.
        let d = goroutine_chains(&t, None, 8, 0, true);
        assert_eq!(d.stats.hidden_by_dedup, 4);
        let want_d = vec![
            (format!("{r};--;{gor}"), 40 + 100),
            (format!("{r};--;{gor};--;{gor}"), 50 + 100),
            (format!("{r};--;{gor};--;{gor};--;{timer}"), 900 + 900),
        ];
        assert_eq!(d.lines, want_d);
    }

    /// Runnable parts (hand-worked): receiver 1 parks at 0; sleeper 2 parks at 0, is
    /// readied by the runtime at 100 and runs at 150; it readies 1 at 300, which runs at
    /// 340. The receiver's wait [0, 340]: its own runnable part [300, 340]; the sleeper's
    /// own time [100, 300], runnable [100, 150] and running [150, 300]; the runtime's
    /// ready the sleeper slept until [0, 100]. The sleeper's wait [0, 150]: the runtime
    /// [0, 100], runnable [100, 150]. Without the executes: today's lines exactly.
    #[test]
    fn executes_split_off_the_runnable_parts() {
        use GoEventKind::{Park, Ready};
        let (recv, sleep) = (1, 2);
        let x = |ts, goid| GoExecute {
            ts,
            cpu: 0,
            tid: 100,
            tgid: 100,
            goid,
        };
        let delta = GoDelta {
            events: vec![
                ev(0, Park, 1, 0, recv),
                ev(0, Park, 2, 0, sleep),
                ev(100, Ready, 2, 0, 0),
                ev(300, Ready, 1, 2, 0),
                ev(310, Park, 2, 0, sleep),
            ],
            processes: vec![GoProcess {
                tgid: 100,
                version: "go1.19.8".into(),
                reasons: vec![String::new(), "chan receive".into(), "sleep".into()],
                capped_ns: 0,
            }],
            executes: vec![x(150, 2), x(340, 1)],
            stws: vec![],
        };
        let (r, s) = ("goroutine;wait: chan receive", "goroutine;wait: sleep");
        let (gor, rt, rq) = ("goroutine", "[go runtime]", "[run queue]");
        let mut t = Tables::default();
        t.goroutines.merge(&delta);
        let g = goroutine_chains(&t, None, 8, 0, false);
        let want: Vec<(String, u64)> = vec![
            (format!("{s};--;{rq}"), 50),
            (format!("{s};--;{rt}"), 100),
            (format!("{r};--;{rq}"), 40),
            (format!("{r};--;{gor}"), 150),
            (format!("{r};--;{gor};--;{rq}"), 50),
            (format!("{r};--;{gor};--;{rt}"), 100),
        ];
        assert_eq!(g.lines, want);
        assert_eq!(g.stats.waits_ns, 340 + 150);
        assert_eq!((g.stats.runnable_ns, g.stats.runnable_unknown), (90, 0));
        let d = goroutine_chains(&t, None, 8, 0, true);
        assert_eq!(d.lines, want[2..]);
        // The same records without executes (a 2.2 trace): the parked parts alone.
        let mut old = Tables::default();
        old.goroutines.merge(&GoDelta {
            executes: vec![],
            stws: vec![],
            ..delta.clone()
        });
        let g = goroutine_chains(&old, None, 8, 0, false);
        let want: Vec<(String, u64)> = vec![
            (format!("{s};--;{rt}"), 100),
            (format!("{r};--;{gor}"), 200),
            (format!("{r};--;{gor};--;{rt}"), 100),
        ];
        assert_eq!(g.lines, want);
        assert_eq!(g.stats.waits_ns, 300 + 100);
        assert_eq!((g.stats.runnable_ns, g.stats.runnable_unknown), (0, 2));

        // With stop-the-world periods [120, 140] (GC mark termination) and [320, 330]
        // (GC sweep termination): the runnable parts inside them change level, the rest
        // stays [run queue]; every line's total as before.
        let w = |ts, stop, reason| GoStw {
            ts,
            cpu: 0,
            tid: 100,
            tgid: 100,
            goid: 0,
            stop,
            reason,
        };
        let mut t = Tables::default();
        t.goroutines.merge(&GoDelta {
            stws: vec![
                w(120, true, 1),
                w(140, false, 0),
                w(320, true, 2),
                w(330, false, 0),
            ],
            ..delta
        });
        let g = goroutine_chains(&t, None, 8, 0, false);
        let (mark, sweep) = (stw_label(1), stw_label(2));
        assert_eq!(
            mark,
            "[go runtime: GC stop-the-world (GC mark termination)]"
        );
        let want: Vec<(String, u64)> = vec![
            (format!("{s};--;{rq}"), 30),
            (format!("{s};--;{mark}"), 20),
            (format!("{s};--;{rt}"), 100),
            (format!("{r};--;{rq}"), 30),
            (format!("{r};--;{sweep}"), 10),
            (format!("{r};--;{gor}"), 150),
            (format!("{r};--;{gor};--;{rq}"), 30),
            (format!("{r};--;{gor};--;{mark}"), 20),
            (format!("{r};--;{gor};--;{rt}"), 100),
        ];
        assert_eq!(g.lines, want);
        assert_eq!(g.stats.waits_ns, 340 + 150);
        assert_eq!(g.stats.runnable_ns, 90);
        assert_eq!((g.stats.stw_ns, g.stats.stw_periods), (20 + 10, 2));
    }

    /// A user stack of `frames` (leaf first) in process `tgid`, as id `id`.
    fn user_stack(t: &mut Tables, id: u32, tgid: Tid, frames: &[&str]) -> StackId {
        use chainrec_format::{StackEntry, StackKind, SymbolEntry};
        let sid = StackId(id);
        let addrs: Vec<u64> = (0..frames.len() as u64)
            .map(|i| u64::from(id) * 100 + i)
            .collect();
        for (a, f) in addrs.iter().zip(frames) {
            t.symbols.insert(&SymbolEntry {
                kind: StackKind::User,
                tgid,
                addr: *a,
                name: Some(f.to_string()),
                offset: 0,
                module: None,
                build_id: None,
                file_offset: None,
            });
        }
        t.stacks.insert(
            sid,
            StackEntry {
                id: sid,
                kind: StackKind::User,
                tgid,
                frames: addrs,
            },
        );
        sid
    }

    /// A netpoll ready's stack in the scheduler, leaf first, up to `runtime.mcall`.
    const NETPOLL_READY: [&str; 6] = [
        "runtime.netpollready",
        "runtime.netpoll",
        "runtime.findRunnable",
        "runtime.schedule",
        "runtime.park_m",
        "runtime.mcall",
    ];

    /// A ready by the runtime is named by its scheduler frames, as Go 1.19 and Go 1.24
    /// (the new timers of 1.23) lay them out; below `runtime.mcall` is not looked at.
    #[test]
    fn runtime_readies_are_named_by_their_frames_in_both_go_versions() {
        let mut t = Tables::default();
        let timer_119 = user_stack(
            &mut t,
            20,
            100,
            &[
                "runtime.ready",
                "runtime.goready.func1",
                "runtime.systemstack",
                "runtime.goroutineReady",
                "runtime.runOneTimer",
                "runtime.runtimer",
                "runtime.checkTimers",
                "runtime.schedule",
                "runtime.park_m",
                "runtime.mcall",
            ],
        );
        let timer_124 = user_stack(
            &mut t,
            21,
            100,
            &[
                "runtime.ready",
                "runtime.goroutineReady.goready.func1",
                "runtime.goready [inlined]",
                "runtime.goroutineReady",
                "runtime.(*timer).unlockAndRun",
                "runtime.(*timers).run",
                "runtime.(*timers).check",
                "runtime.stealWork",
                "runtime.findRunnable",
                "runtime.schedule",
                "runtime.park_m",
                "runtime.mcall",
            ],
        );
        let netpoll = user_stack(&mut t, 22, 100, &NETPOLL_READY);
        let below_mcall = user_stack(
            &mut t,
            23,
            100,
            &[
                "runtime.ready",
                "runtime.schedule",
                "runtime.mcall",
                "runtime.runOneTimer",
            ],
        );
        let mut names = Names {
            tables: &t,
            threshold_ns: 0,
            cache: FxHashMap::default(),
        };
        assert_eq!(names.runtime_label(timer_119), TIMER);
        assert_eq!(names.runtime_label(timer_124), TIMER);
        assert_eq!(names.runtime_label(netpoll), NETPOLL);
        assert_eq!(names.runtime_label(below_mcall), RUNTIME);
    }

    /// A handler goroutine readied by netpoll, joined to the thread level (hand-worked).
    /// Server process 100: the poller thread 101 slept in epoll_wait [900, 1600], woken at
    /// 1600 by the client's thread 202 (its write, `[softirq: NET_RX]` on top), back on a
    /// CPU at 1800. Client process 200: goroutine 20 (the caller) is readied by a timer at
    /// 1200 and readies 21 (the write loop) at 1400; 21 writes on thread 202 at 1600 and
    /// parks there at 1700 (its next record on that thread: the goroutine of the wakeup).
    ///
    /// - Handler 10 parked [1000, 2000], readied by the poller's netpoll at 2000: the
    ///   poller's own time after its wakeup, running [1800, 2000] and runnable
    ///   [1600, 1800]; the client's thread level [1400, 1600] (21's own time after its
    ///   ready); below it 21's chain: 20's own time [1200, 1400], the timer [1000, 1200].
    /// - Handler 13 parked [1700, 2001], readied by the same poll: the poller was woken
    ///   before it parked, so all is the poller's own time: running [1800, 2001], runnable
    ///   [1700, 1800].
    /// - Handler 11 parked [1900, 2100], readied by netpoll on 101 after goroutine 12 ran
    ///   there (its park at 2050): a later, non-blocking poll.
    #[test]
    fn netpoll_readies_join_the_thread_that_woke_the_poller() {
        use GoEventKind::{Park, Ready};
        let (recv, sleep, io, select, io2) = (1, 2, 3, 4, 5);
        let mut t = Tables::default();
        // Below mcall: the goroutine that last ran on the poller's thread.
        let np = user_stack(
            &mut t,
            16,
            100,
            &[&NETPOLL_READY[..], &["main.other", "runtime.goexit"]].concat(),
        );
        let wl = user_stack(
            &mut t,
            17,
            200,
            &["runtime.gopark", "main.writeLoop", "runtime.goexit"],
        );
        let e = |ts, tgid, tid, kind, goid, waker, reason, stack| GoEvent {
            tid,
            tgid,
            stack,
            ..ev(ts, kind, goid, waker, reason)
        };
        let n = StackId::NONE;
        let reasons: Vec<String> = [
            "",
            "chan receive",
            "sleep",
            "IO wait",
            "select",
            "IO wait again",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        t.goroutines.merge(&GoDelta {
            events: vec![
                e(0, 200, 202, Park, 21, 0, recv, n),
                e(0, 200, 201, Park, 20, 0, sleep, n),
                e(1000, 100, 103, Park, 10, 0, io, n),
                e(1200, 200, 201, Ready, 20, 0, 0, n),
                e(1400, 200, 201, Ready, 21, 20, 0, n),
                e(1450, 200, 201, Park, 20, 0, select, n),
                e(1700, 200, 202, Park, 21, 0, recv, wl),
                e(1700, 100, 105, Park, 13, 0, io2, n),
                e(1900, 100, 104, Park, 11, 0, select, n),
                e(2000, 100, 101, Ready, 10, 0, 0, np),
                e(2001, 100, 101, Ready, 13, 0, 0, np),
                e(2050, 100, 101, Park, 12, 0, recv, n),
                e(2100, 100, 101, Ready, 11, 0, 0, np),
            ],
            processes: [100, 200]
                .iter()
                .map(|&tgid| GoProcess {
                    tgid,
                    version: "go1.19.8".into(),
                    reasons: reasons.clone(),
                    capped_ns: 0,
                })
                .collect(),
            executes: vec![],
            stws: vec![],
        });
        let level = "[softirq: NET_RX];tcp_sendmsg;-;main.writeLoop;runtime.goexit;client";
        let wake = |entry: &str| ThreadWake {
            switch_out: 900,
            switch_in: 1800,
            wake: 1600,
            sleep: Sleep::Epoll,
            level: level.into(),
            waker_tid: 202,
            waker_tgid: 200,
            entry: Some(entry.into()),
        };
        let mut th = GoThreadWakes::default();
        th.push(101, wake("main.writeLoop"));
        th.finish();
        let g = goroutine_chains(&t, Some(&th), 8, 0, true);
        let npf = "runtime.netpollready;runtime.netpoll;runtime.findRunnable;runtime.schedule;runtime.park_m";
        let h = format!("goroutine;wait: IO wait;--;{npf};[go runtime: netpoll]");
        let h2 = format!("goroutine;wait: IO wait again;--;{npf};[go runtime: netpoll]");
        let want: Vec<(String, u64)> = vec![
            (h.clone(), 200),
            (format!("{h};--;[run queue]"), 200),
            (format!("{h};--;{level}"), 200),
            (format!("{h};--;{level};--;goroutine"), 200),
            (format!("{h};--;{level};--;goroutine;--;[go runtime]"), 200),
            (h2.clone(), 201),
            (format!("{h2};--;[run queue]"), 100),
            (
                format!("goroutine;wait: select;--;{npf};[go runtime: netpoll, polled]"),
                200,
            ),
        ];
        assert_eq!(g.lines, want);
        // The caller's and the write loop's waits are inner levels of handler 10's chain.
        assert_eq!(g.stats.hidden_by_dedup, 2);
        assert_eq!(
            (g.stats.waits, g.stats.by_runtime, g.stats.open_at_end),
            (5, 4, 3)
        );
        assert_eq!(
            g.stats.netpoll,
            NetpollShares {
                joined: (2, 1000 + 301),
                poller_ns: 400 + 301,
                into_goroutine: (1, 1000),
                polled: (1, 200),
                unjoined: (0, 0),
            }
        );
        // The waker's user stack is of another goroutine function than the next record
        // on its thread: the goroutine is not known, and the thread level takes the rest.
        let mut other = GoThreadWakes::default();
        other.push(101, wake("main.other"));
        other.finish();
        let g = goroutine_chains(&t, Some(&other), 8, 0, true);
        let weight = |g: &GoChains, l: &str| g.lines.iter().find(|x| x.0 == l).map(|x| x.1);
        assert_eq!(weight(&g, &format!("{h};--;{level}")), Some(600));
        assert_eq!(g.stats.netpoll.into_goroutine, (0, 0));
        // The depth limit: the thread level is one.
        let g = goroutine_chains(&t, Some(&th), 2, 0, true);
        assert_eq!(
            weight(&g, &format!("{h};--;{level};[truncated]")),
            Some(600)
        );
        // Without the thread index, netpoll ends the chain, as before.
        let g = goroutine_chains(&t, None, 8, 0, true);
        assert_eq!(weight(&g, &h), Some(1000));
        assert_eq!(g.stats.netpoll, NetpollShares::default());
    }
}

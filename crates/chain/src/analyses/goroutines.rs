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
//! Not yet (the thread engine has them): the run-queue part (a readied goroutine waiting
//! for a P; only the parked part is shown, as with `--no-runqueue`), earlier-wait branches
//! (a waker's earlier parks inside its level stay with its level), and the kernel chain
//! behind a netpoll readiness.

use crate::engine::frames::stack_frames;
use chainrec_format::{GoEventKind, StackId, Tables, Tid};
use rustc_hash::FxHashMap;

/// What [`goroutine_chains`] counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoChainStats {
    /// Goroutine waits (a park ended by a ready of the same goroutine), each a root.
    pub waits: u64,
    /// Their total parked time (ns): the sum of the lines' weights.
    pub waits_ns: u64,
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
    /// The readying goroutine (0: the runtime).
    waker: u64,
    stack: StackId,
    /// The ready that ended the waker's most recent park before this one, and that
    /// park's start.
    cause: Option<usize>,
    cause_s: u64,
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
    lines: Vec<(String, u64)>,
}

/// Folded goroutine chains of every goroutine wait in `tables`' goroutine records, at
/// most `max_depth` readies per chain; `threshold_ns` names skipped stacks; `dedup`
/// hides the waits whose ready another chain shows as an inner level.
pub fn goroutine_chains(
    tables: &Tables,
    max_depth: usize,
    threshold_ns: u64,
    dedup: bool,
) -> GoChains {
    let go = &tables.goroutines;
    let events = go.events();
    let mut out = GoChains::default();
    out.stats.capped_processes = go.processes().filter(|p| p.capped_ns > 0).count() as u64;
    let start = events.first().map_or(0, |e| e.ts);
    let mut states: FxHashMap<(Tid, u64), GState> = FxHashMap::default();
    let mut hops: Vec<Hop> = Vec::new();
    // Readies used as inner levels of some chain (dedup), by hop.
    let mut inner: Vec<bool> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let mut names = Names {
        tables,
        threshold_ns,
        cache: FxHashMap::default(),
    };
    for e in events {
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
                let h = hops.len();
                hops.push(Hop {
                    ts: e.ts,
                    waker: e.waker,
                    stack: e.stack,
                    cause,
                    cause_s,
                });
                inner.push(false);
                let st = states.entry((e.tgid, e.goid)).or_default();
                let Some((a, pstack, reason)) = st.park.take() else {
                    out.stats.readies_without_park += 1;
                    st.last_cause = Some((h, start));
                    continue;
                };
                st.last_cause = Some((h, a));
                out.stats.waits += 1;
                out.stats.waits_ns += e.ts.saturating_sub(a);
                if e.waker == 0 {
                    out.stats.by_runtime += 1;
                }
                let mut lines = Vec::new();
                let mut path = names.root(e.tgid, pstack, reason);
                let (mut l, mut t) = (a, e.ts);
                let mut cur = h;
                let mut depth = 1;
                loop {
                    let hop = hops[cur];
                    path.push_str(";--;");
                    path.push_str(&names.level(hop.waker, hop.stack));
                    let next = match hop.cause {
                        Some(c) if hop.waker != 0 && hops[c].ts > l => Some(c),
                        _ => None,
                    };
                    match next {
                        Some(c) if depth < max_depth => {
                            let l2 = l.max(hop.cause_s);
                            let ct = hops[c].ts.min(t);
                            let own = t.saturating_sub(l) - ct.saturating_sub(l2);
                            lines.push((path.clone(), own));
                            inner[c] = true;
                            l = l2;
                            t = ct;
                            cur = c;
                            depth += 1;
                        }
                        Some(_) => {
                            out.stats.truncated += 1;
                            path.push_str(";[truncated]");
                            lines.push((path, t.saturating_sub(l)));
                            break;
                        }
                        None => {
                            lines.push((path, t.saturating_sub(l)));
                            break;
                        }
                    }
                }
                pending.push(Pending { hop: h, lines });
            }
        }
    }
    out.stats.open_at_end = states.values().filter(|s| s.park.is_some()).count() as u64;
    let mut index: FxHashMap<String, usize> = FxHashMap::default();
    for p in pending {
        if dedup && inner[p.hop] {
            out.stats.hidden_by_dedup += 1;
            continue;
        }
        for (line, w) in p.lines {
            add(&mut out.lines, &mut index, line, w);
        }
    }
    out
}

/// Add `w` ns to `line` (a new line keeps its first-seen place); zero weights are not lines.
fn add(lines: &mut Vec<(String, u64)>, index: &mut FxHashMap<String, usize>, line: String, w: u64) {
    if w == 0 {
        return;
    }
    match index.get(&line) {
        Some(&i) => lines[i].1 += w,
        None => {
            index.insert(line.clone(), lines.len());
            lines.push((line, w));
        }
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

    /// A level: the readying goroutine's stack leaf to root, then `goroutine`; or, for a
    /// ready by the runtime, its scheduler frames up to `runtime.mcall` (below it are the
    /// frames of whatever goroutine last ran on the thread, not a cause), then what it
    /// was: `[go runtime: timer]`, `[go runtime: netpoll]` or `[go runtime]`.
    fn level(&mut self, waker: u64, s: StackId) -> String {
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
        let mut label = "[go runtime]";
        for f in frames {
            if f == "runtime.mcall" {
                break;
            }
            if f.starts_with("runtime.netpoll") {
                label = "[go runtime: netpoll]";
            } else if label == "[go runtime]"
                && (f == "runtime.runOneTimer"
                    || f == "runtime.runtimer"
                    || f == "runtime.checkTimers")
            {
                label = "[go runtime: timer]";
            }
            out.push_str(f);
            out.push(';');
        }
        out.push_str(label);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainrec_format::{GoDelta, GoEvent, GoProcess};

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
        });
        let g = goroutine_chains(&t, 8, 0, false);
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
        let d = goroutine_chains(&t, 8, 0, true);
        assert_eq!(d.stats.hidden_by_dedup, 4);
        let want_d = vec![
            (format!("{r};--;{gor}"), 40 + 100),
            (format!("{r};--;{gor};--;{gor}"), 50 + 100),
            (format!("{r};--;{gor};--;{gor};--;{timer}"), 900 + 900),
        ];
        assert_eq!(d.lines, want_d);
    }
}

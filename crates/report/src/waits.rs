//! `chainrec waits`: one record per wait, as the engine built it ([`WaitRecord`]), as
//! NDJSON (schema in `docs/REPORTS.md`) or a few readable lines per wait. Every time and
//! tid in it can be found in `chainrec script` output, so a chain can be checked by hand.
//!
//! [`WaitJson::new`] is the one place that maps a record to its JSON form: a new field of
//! [`WaitRecord`] or [`HopRecord`] is one field here (and one line in the docs). The fields
//! that are more than a copy of the record's (names, cgroups, `time_s`, `state_str`,
//! `mode`) are computed by [`WaitContext`]'s methods and the functions beside it, which
//! the Parquet tables (chainrec-parquet) call too, without building a [`WaitJson`].

use crate::script::{rel_secs, rel_time, stack_label, state_str};
use crate::top::fmt_ns;
use chainrec_chain::{
    stack_frames, HopRecord, LevelKind, Mode, NodeId, NodeTable, RunqPart, TraceRef, WaitRecord,
};
use chainrec_format::{StackId, Tables};
use serde::Serialize;
use std::borrow::Cow;
use std::fmt::Write as _;

/// What the mapping needs besides the record.
#[derive(Clone, Copy)]
pub struct WaitContext<'a> {
    /// The engine's interned nodes.
    pub nodes: &'a NodeTable,
    /// The trace's tables (frames).
    pub tables: &'a Tables,
    /// Trace start (trace clock), for `time_s`.
    pub start_ns: u64,
    /// Lazy-stack threshold of the recording (frame labels).
    pub threshold_ns: u64,
    /// Include symbolized frames.
    pub frames: bool,
}

impl<'a> WaitContext<'a> {
    /// Context for the records of a run over `trace` (`nodes`: the engine's).
    pub fn new(nodes: &'a NodeTable, trace: TraceRef<'a>, frames: bool) -> Self {
        WaitContext {
            nodes,
            tables: trace.tables,
            start_ns: trace.start_ns,
            threshold_ns: trace.meta.stack_threshold_ns,
            frames,
        }
    }

    fn frames(&self, s: StackId) -> Option<Vec<String>> {
        self.frames
            .then(|| stack_frames(self.tables, s, self.threshold_ns))
    }

    /// A node's name as it prints in the chain graph (`node`, `holder`): comm or label.
    pub fn node_name(&self, node: NodeId) -> Cow<'a, str> {
        self.nodes.get(node).name()
    }

    /// `time_s`: seconds from the trace start to the switch-out.
    pub fn time_s(&self, w: &WaitRecord) -> f64 {
        rel_secs(w.switch_out_ns, self.start_ns)
    }

    /// The waiting thread's cgroup id at switch-out (traces that record cgroups).
    pub fn wait_cgroup(&self, w: &WaitRecord) -> Option<u64> {
        self.tables.cgroup_at(w.tid, w.switch_out_ns)
    }

    /// A level's waker's cgroup id at the waking (task wakers of traces that record
    /// cgroups; a metal level has none).
    pub fn waker_cgroup(&self, h: &HopRecord) -> Option<u64> {
        (!h.metal)
            .then(|| self.tables.cgroup_at(h.waker_tid, h.ts))
            .flatten()
    }

    /// `waker_cgroup`: the path of cgroup `id`.
    pub fn cgroup_path(&self, id: u64) -> Cow<'a, str> {
        self.tables.cgroup_path(id)
    }
}

/// `mode`: how the levels' `ns` were computed.
pub fn mode_label(mode: Mode) -> &'static str {
    match mode {
        Mode::Bounded => "bounded",
        Mode::Last => "last",
    }
}

/// A node of a chain (the waiting thread, or a level's waker) with its stacks.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct NodeJson {
    /// The node as it prints in the chain graph: comm, or the metal label.
    pub node: String,
    /// Interned node id (equal ids print alike).
    pub node_id: u32,
    /// Kernel stack id (root: off-CPU stack; level: waker stack).
    pub kstack: u32,
    /// User stack id.
    pub ustack: u32,
    /// With `--frames`: kernel frames, leaf first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kframes: Option<Vec<String>>,
    /// With `--frames`: user frames, leaf first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uframes: Option<Vec<String>>,
}

impl NodeJson {
    fn new(node: u32, k: StackId, u: StackId, cx: &WaitContext) -> Self {
        NodeJson {
            node: cx.node_name(node).into_owned(),
            node_id: node,
            kstack: k.0,
            ustack: u.0,
            kframes: cx.frames(k),
            uframes: cx.frames(u),
        }
    }
}

/// One level of a wait's chain (a [`HopRecord`]).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct HopJson {
    /// 1 = the waiting thread's waker, 2 = its waker's waker, ...
    pub level: usize,
    /// Time of the waking.
    pub ts_ns: u64,
    /// Waker tid (metal: the interrupted task, 0 = idle).
    pub waker_tid: u32,
    /// Waker tgid (0 when unknown or metal).
    pub waker_tgid: u32,
    /// Waker name (empty for metal).
    pub waker_comm: String,
    /// The waker's cgroup path at the waking (task wakers, traces that record cgroups).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waker_cgroup: Option<String>,
    /// `task`, `softirq`, `hardirq`, `nmi`, or `fork`: the waker created the thread of the
    /// level above (`sched_wakeup_new`), the time before it existed.
    pub context: &'static str,
    /// The chain ends here (interrupt context or the idle task).
    pub metal: bool,
    /// The waker node and its stacks.
    #[serde(flatten)]
    pub node: NodeJson,
    /// Nanoseconds of the wait attributed to this level.
    pub ns: u64,
    /// The level this one hangs under, when it is not `level - 1` (a branch of the wakeup
    /// DAG: a waker's earlier wait, and that wait's chain; 0 = the waiting thread).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<u32>,
    /// `earlier wait` (the waker's blocked interval inside the root's wait, stacks are
    /// its off-CPU stacks; its children explain it) or `blocked: not followed`; absent
    /// for a waking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// `earlier wait` levels: how many identical earlier waits (same stacks, ended by the
    /// same interrupt) the level stands for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waits: Option<u32>,
}

/// Run-queue time of one level behind one CPU holder (a [`RunqPart`]).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct RunqJson {
    /// 0 = the waiting thread's own runnable part; k = level k's waker runnable inside
    /// that level's `ns`.
    pub level: u32,
    /// Who held the CPU meanwhile: a comm, `[idle]` or `[unknown]`.
    pub holder: String,
    /// Interned run-queue node id of the holder.
    pub holder_id: u32,
    /// Nanoseconds.
    pub ns: u64,
}

impl RunqJson {
    fn new(p: &RunqPart, cx: &WaitContext) -> Self {
        RunqJson {
            level: p.level,
            holder: cx.node_name(p.holder).into_owned(),
            holder_id: p.holder,
            ns: p.ns,
        }
    }
}

/// On-CPU time of one level (a [`chainrec_chain::OnCpuPart`]): the waker ran, with the stack its samples
/// show (`[on cpu]`, `[on cpu: estimated]`) or none (`[on cpu: no sample]`).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct OnCpuJson {
    /// Level k ≥ 1 (`hops[k - 1]`).
    pub level: u32,
    /// Nanoseconds: the level's on-CPU time × this stack's share of its samples.
    pub ns: u64,
    /// The on-CPU node (`node`: its label) with the sampled stacks.
    #[serde(flatten)]
    pub node: NodeJson,
}

/// One wait (a [`WaitRecord`]).
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct WaitJson {
    /// The waiting thread.
    pub tid: u32,
    /// Its process (0 when unknown).
    pub tgid: u32,
    /// Its name at switch-out.
    pub comm: String,
    /// Its cgroup at switch-out, with the container and pod the path names (traces that
    /// record cgroups; absent otherwise).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::cgroup::CgroupLabel>,
    /// From the trace's task table.
    pub kernel_thread: bool,
    /// Switch-out state bits (0 = preempted).
    pub state: u32,
    /// The state as letters.
    pub state_str: String,
    /// Switch-out time (trace clock).
    pub switch_out_ns: u64,
    /// Seconds from the trace start to the switch-out.
    pub time_s: f64,
    /// The waking that ended the blocked part, when seen.
    pub wake_ns: Option<u64>,
    /// Switch-in, when seen before the trace ended.
    pub switch_in_ns: Option<u64>,
    /// Switch-out to waking.
    pub blocked_ns: Option<u64>,
    /// Waking to switch-in.
    pub runq_ns: Option<u64>,
    /// Switch-out to switch-in.
    pub offcpu_ns: Option<u64>,
    /// Sum of the levels' `ns`.
    pub attributed_ns: u64,
    /// The root node and the off-CPU stacks.
    #[serde(flatten)]
    pub node: NodeJson,
    /// The chain, first waker first.
    pub hops: Vec<HopJson>,
    /// Run-queue time by level and CPU holder, ordered by level (empty with
    /// `--no-runqueue` and in `--mode last`).
    pub runq: Vec<RunqJson>,
    /// On-CPU time by level and sampled stack, ordered by level (absent when there is
    /// none: a wait whose wakers' own time was not split, `--mode last`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub oncpu: Vec<OnCpuJson>,
    /// Cut by the depth limit while a further cause existed.
    pub truncated: bool,
    /// `--mode last`: stopped at a repeated thread.
    pub cycle: bool,
    /// A lost-events marker fell inside the wait.
    pub lost: bool,
    /// False when dedup shows this wait inside another chain (printed with `--hidden`).
    pub root: bool,
    /// `bounded` or `last`: how the levels' `ns` were computed.
    pub mode: &'static str,
}

impl WaitJson {
    /// Map a record (the one place that does).
    pub fn new(w: &WaitRecord, cx: &WaitContext) -> Self {
        WaitJson {
            tid: w.tid,
            tgid: w.tgid,
            comm: w.comm.to_string(),
            cgroup: cx
                .wait_cgroup(w)
                .map(|id| crate::cgroup::CgroupLabel::of(cx.tables, id)),
            kernel_thread: w.kernel_thread,
            state: w.state,
            state_str: state_str(w.state),
            switch_out_ns: w.switch_out_ns,
            time_s: cx.time_s(w),
            wake_ns: w.wake_ns,
            switch_in_ns: w.switch_in_ns,
            blocked_ns: w.blocked_ns(),
            runq_ns: w.runq_ns(),
            offcpu_ns: w.offcpu_ns(),
            attributed_ns: w.attributed_ns(),
            node: NodeJson::new(w.node, w.kstack, w.ustack, cx),
            hops: w
                .hops
                .iter()
                .enumerate()
                .map(|(i, h)| HopJson::new(i + 1, h, cx))
                .collect(),
            runq: w.runq.iter().map(|p| RunqJson::new(p, cx)).collect(),
            oncpu: w
                .oncpu
                .iter()
                .map(|p| {
                    let n = cx.nodes.get(p.node);
                    OnCpuJson {
                        level: p.level,
                        ns: p.ns,
                        node: NodeJson::new(p.node, n.kstack, n.ustack, cx),
                    }
                })
                .collect(),
            truncated: w.truncated,
            cycle: w.cycle,
            lost: w.lost,
            root: w.root,
            mode: mode_label(w.mode),
        }
    }
}

impl HopJson {
    fn new(level: usize, h: &HopRecord, cx: &WaitContext) -> Self {
        HopJson {
            level,
            ts_ns: h.ts,
            waker_tid: h.waker_tid,
            waker_tgid: h.waker_tgid,
            waker_comm: h.waker_comm.to_string(),
            waker_cgroup: cx.waker_cgroup(h).map(|id| cx.cgroup_path(id).into_owned()),
            context: h.context_label(cx.nodes),
            metal: h.metal,
            node: NodeJson::new(h.node, h.kstack, h.ustack, cx),
            ns: h.ns,
            parent: (h.parent as usize + 1 != level).then_some(h.parent),
            kind: match h.kind {
                LevelKind::Waker => None,
                LevelKind::EarlierWait => Some("earlier wait"),
                LevelKind::NotFollowed => Some("blocked: not followed"),
            },
            waits: (h.kind == LevelKind::EarlierWait).then_some(h.waits),
        }
    }
}

fn opt_time(t: Option<u64>, start: u64) -> String {
    t.map_or("-".to_string(), |t| rel_time(t, start))
}

fn push_frames(s: &mut String, indent: &str, n: &NodeJson) {
    for (side, f) in [("kernel", &n.kframes), ("user", &n.uframes)] {
        if let Some(f) = f.as_ref().filter(|f| !f.is_empty()) {
            let _ = writeln!(s, "{indent}{side}: {}", f.join(" <- "));
        }
    }
}

/// The readable form of one wait: a header line, the times, then one line per level.
/// Times are seconds from the trace start, as `chainrec script` prints them.
pub fn render_text(w: &WaitJson, start_ns: u64) -> String {
    let mut s = String::new();
    let mut flags = String::new();
    for (on, f) in [
        (w.truncated, " [truncated]"),
        (w.cycle, " [cycle]"),
        (w.lost, " [lost events]"),
        (!w.root, " [shown inside another chain]"),
    ] {
        if on {
            flags += f;
        }
    }
    let dur = |l: &str, v: Option<u64>| v.map(|v| format!(" {l} {}", fmt_ns(v)));
    let _ = writeln!(
        s,
        "{} {}/{} {}{}{}{}{}",
        w.comm,
        w.tid,
        w.tgid,
        w.state_str,
        dur("off-CPU", w.offcpu_ns).unwrap_or_default(),
        dur("blocked", w.blocked_ns).unwrap_or_default(),
        dur("run queue", w.runq_ns).unwrap_or_default(),
        flags
    );
    let _ = writeln!(
        s,
        "    out {}  woken {}  in {}  k={} u={}",
        rel_time(w.switch_out_ns, start_ns),
        opt_time(w.wake_ns, start_ns),
        opt_time(w.switch_in_ns, start_ns),
        stack_label(StackId(w.node.kstack)),
        stack_label(StackId(w.node.ustack)),
    );
    if let Some(c) = &w.cgroup {
        let _ = writeln!(s, "    cgroup {}", c.text());
    }
    push_frames(&mut s, "        ", &w.node);
    push_runq(&mut s, w, 0);
    for h in &w.hops {
        let mut who = match h.kind {
            Some(kind) => format!(
                "[{kind}] of {} {}/{}",
                h.waker_comm, h.waker_tid, h.waker_tgid
            ),
            None if h.metal => format!("{} (on tid {})", h.node.node, h.waker_tid),
            None => format!("{} {}/{}", h.waker_comm, h.waker_tid, h.waker_tgid),
        };
        if let Some(p) = h.parent {
            who.push_str(&format!(" (under level {p})"));
        }
        let _ = writeln!(
            s,
            "  {:>2} <- {:>10}  {} {} at {}  k={} u={}",
            h.level,
            fmt_ns(h.ns),
            who,
            h.context,
            rel_time(h.ts_ns, start_ns),
            stack_label(StackId(h.node.kstack)),
            stack_label(StackId(h.node.ustack)),
        );
        push_frames(&mut s, "        ", &h.node);
        push_runq(&mut s, w, h.level as u32);
    }
    s
}

/// `[run queue] HOLDER NS, ...` of one level, when it has any.
fn push_runq(s: &mut String, w: &WaitJson, level: u32) {
    let parts: Vec<String> = w
        .runq
        .iter()
        .filter(|p| p.level == level)
        .map(|p| format!("{} {}", p.holder, fmt_ns(p.ns)))
        .collect();
    if !parts.is_empty() {
        let _ = writeln!(s, "        [run queue] {}", parts.join(", "));
    }
}

/// What [`WaitsWriter`] prints.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitsWriterOptions {
    /// NDJSON, one [`WaitJson`] per line (else [`render_text`]).
    pub json: bool,
    /// Include symbolized frames.
    pub frames: bool,
    /// Also print the waits dedup hides (shown inside another chain), `"root": false`.
    pub hidden: bool,
}

/// The `chainrec waits` sink: writes every wait the engine hands it to `out` as it comes
/// (nothing is kept). The first write error is kept in [`WaitsWriter::failed`] and ends the
/// printing; a caller that streams stops the walk when it sees it.
pub struct WaitsWriter<'a, W: std::io::Write> {
    /// Where the waits go.
    pub out: W,
    opts: WaitsWriterOptions,
    trace: TraceRef<'a>,
    /// Waits printed.
    pub printed: u64,
    /// Waits dedup hid and that were not printed (without `hidden`).
    pub left_out: u64,
    /// The first write error.
    pub failed: Option<std::io::Error>,
}

impl<'a, W: std::io::Write> WaitsWriter<'a, W> {
    /// A sink writing the waits of a run over `trace` to `out`; times are printed
    /// relative to the trace's start.
    pub fn new(out: W, opts: WaitsWriterOptions, trace: TraceRef<'a>) -> Self {
        WaitsWriter {
            out,
            opts,
            trace,
            printed: 0,
            left_out: 0,
            failed: None,
        }
    }

    /// The summary line's text after `chainrec: waits: ` (`events` read by the engine).
    pub fn summary(&self, events: u64) -> String {
        let mut s = format!("{events} events; {} waits printed", self.printed);
        if self.left_out > 0 {
            let _ = write!(
                s,
                ", {} shown inside other chains left out (dedup; --hidden prints them, --no-dedup makes them roots)",
                self.left_out
            );
        }
        s
    }
}

impl<W: std::io::Write> chainrec_chain::WaitSink for WaitsWriter<'_, W> {
    fn on_wait(&mut self, w: &WaitRecord, nodes: &NodeTable) {
        if self.failed.is_some() {
            return;
        }
        if !w.root && !self.opts.hidden {
            self.left_out += 1;
            return;
        }
        let cx = WaitContext::new(nodes, self.trace, self.opts.frames);
        let j = WaitJson::new(w, &cx);
        let r = if self.opts.json {
            serde_json::to_writer(&mut self.out, &j)
                .map_err(std::io::Error::from)
                .and_then(|()| self.out.write_all(b"\n"))
        } else {
            self.out
                .write_all(render_text(&j, self.trace.start_ns).as_bytes())
        };
        self.printed += 1;
        if let Err(e) = r {
            self.failed = Some(e);
        }
    }
}

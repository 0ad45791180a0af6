//! `top`: the longest individual waits, as topwaits shows them — per distinct chain (the
//! waiting thread's off-CPU stack plus its whole chain of wakers): how many waits, their
//! total, the longest one and when it happened (wall clock) — each with its full chain
//! and the time every level explains.

use crate::source::format_wall;
use chainrec_chain::{
    Analysis, ChainError, Collected, Dedup, Filter, FoldedSink, FrameKind, FrameNamer, HopRecord,
    NodeId, NodeTable, Setup, Summary, View, WaitRecord, WaitSink,
};
use chainrec_format::FlightTrigger;
use serde::Serialize;
use std::collections::HashMap;

#[derive(Clone, Debug)]
struct Group {
    count: u64,
    total_ns: u64,
    max_ns: u64,
    longest: WaitRecord,
}

/// Collects waits by chain. Feed it the engine's record stream (dedup off); the finished
/// run is ranked by [`TopReport::new`].
#[derive(Clone, Debug, Default)]
pub struct TopSink {
    groups: HashMap<(NodeId, Vec<NodeId>), Group>,
    /// Preemptions (no blocked time, no chain): not ranked.
    pub preempted: u64,
    /// Blocked waits with no waking in the trace (no chain, blocked time unknown): not ranked.
    pub without_waker: u64,
    /// Waits ranked.
    pub ranked: u64,
}

impl WaitSink for TopSink {
    fn on_wait(&mut self, w: &WaitRecord, _nodes: &NodeTable) {
        if w.preempted() {
            self.preempted += 1;
            return;
        }
        let Some(blocked) = w.blocked_ns() else {
            self.without_waker += 1;
            return;
        };
        self.ranked += 1;
        let key = (w.node, w.hops.iter().map(|h| h.node).collect::<Vec<_>>());
        match self.groups.get_mut(&key) {
            Some(g) => {
                g.count += 1;
                g.total_ns += blocked;
                // Ties: the earliest wait stays (deterministic).
                if blocked > g.max_ns {
                    g.max_ns = blocked;
                    g.longest = w.clone();
                }
            }
            None => {
                self.groups.insert(
                    key,
                    Group {
                        count: 1,
                        total_ns: blocked,
                        max_ns: blocked,
                        longest: w.clone(),
                    },
                );
            }
        }
    }
}

/// A frame kept past the walk: (text, kind, level).
type OwnedFrame = (String, FrameKind, u32);

/// One level of a ranked chain.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Level {
    /// 0 = the waiting thread's off-CPU stack; 1 = its waker; ...
    pub level: usize,
    /// Who: comm and tid, or the metal label.
    pub who: String,
    /// Nanoseconds of the longest wait this level explains (level 0: the blocked time).
    pub ns: u64,
    /// Frames in folded order (as in the chain graph), separators included.
    pub frames: Vec<String>,
    /// Of `ns`: the time this level's waker was blocked in earlier waits inside the wait
    /// (branches of the wakeup DAG, CHAINS.md), how many were followed to their waker, and
    /// how much was `[blocked: not followed]`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub earlier: Option<EarlierShare>,
}

/// A level's blocked time in earlier waits (see [`Level::earlier`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EarlierShare {
    /// Nanoseconds, all its branches together.
    pub ns: u64,
    /// Earlier waits followed to their wakers.
    pub waits: u64,
    /// Of `ns`: not followed (no waking in the trace, depth limit, level budget).
    pub not_followed_ns: u64,
}

/// One ranked entry.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TopEntry {
    /// 1-based rank (by longest wait).
    pub rank: usize,
    /// Waits with this chain.
    pub count: u64,
    /// Their total blocked time.
    pub total_ns: u64,
    /// The longest one.
    pub max_ns: u64,
    /// Thread of the longest wait.
    pub tid: u32,
    /// Its process.
    pub tgid: u32,
    /// Its name.
    pub comm: String,
    /// Its cgroup at the switch-out, with the container and pod the path names (traces
    /// that record cgroups; absent from the JSON otherwise).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<crate::cgroup::CgroupLabel>,
    /// Switch-out time of the longest wait (trace clock).
    pub switch_out_ns: u64,
    /// Seconds from the trace start.
    pub offset_s: f64,
    /// Wall-clock time of the switch-out, `YYYY-MM-DD HH:MM:SS.mmm UTC` (empty for
    /// synthetic traces without a clock offset).
    pub wall: String,
    /// The chain was cut by the depth limit.
    pub truncated: bool,
    /// A lost-events marker fell inside the wait.
    pub lost: bool,
    /// The chain, level by level.
    pub chain: Vec<Level>,
    /// The full chain as one folded line (blocked levels; run-queue parts are in
    /// [`Self::runq`]).
    pub folded: String,
    /// Run-queue time of the longest wait (empty with `--no-runqueue`): per level (0 = the
    /// thread itself after its waking, k = level k's waker inside its share), who held the
    /// CPU and for how long.
    pub runq: Vec<RunqShare>,
    /// On-CPU time of the longest wait's wakers, split by their samples (traces with
    /// on-CPU samples only; absent from the JSON when empty): per level, each sampled stack
    /// (`[on cpu];user;-;kernel`, or `[on cpu: no sample]`) and its share.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub oncpu: Vec<OnCpuShare>,
}

/// Part of a waker's on-CPU time inside its level, by sampled stack.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OnCpuShare {
    /// Level k ≥ 1 (the waker of level k).
    pub level: u32,
    /// `[on cpu]` and the sampled frames root first, or `[on cpu: no sample]`.
    pub frames: Vec<String>,
    /// Nanoseconds.
    pub ns: u64,
}

/// Part of a wait spent runnable behind one CPU holder.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunqShare {
    /// Level (0 = the waiting thread, k = level k's waker).
    pub level: u32,
    /// The task that held the CPU (`[idle]`, `[unknown]` when not a task).
    pub holder: String,
    /// Nanoseconds.
    pub ns: u64,
}

/// The result of `top`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TopReport {
    /// Entries, longest first.
    pub entries: Vec<TopEntry>,
    /// Distinct chains seen.
    pub chains: usize,
    /// Waits ranked.
    pub ranked_waits: u64,
    /// Preemptions not ranked.
    pub preempted: u64,
    /// Waits without a waking in the trace, not ranked.
    pub without_waker: u64,
}

/// Run the engine over `an` for `top`: every wait `filter` passes is a candidate (dedup
/// off), chains of at most `max_depth` hops; the `count` longest, and what the run did.
/// `on_chunk` is called with each chunk's events (a progress bar).
pub fn run(
    an: &Analysis,
    max_depth: usize,
    filter: Filter,
    count: usize,
    on_chunk: impl FnMut(usize),
) -> Result<(TopReport, Summary), ChainError> {
    let setup = Setup {
        max_depth,
        dedup: Dedup::Off,
        filter,
        ..Setup::default()
    };
    let (summary, waits) = an.collect(setup, TopSink::default(), on_chunk)?;
    Ok((TopReport::new(&waits, count), summary))
}

impl TopReport {
    /// What `chainrec top` prints: the report (after a dump's `trigger`, when a wait made
    /// the dump), as JSON or as text `width` columns wide (`None`: whole lines).
    pub fn output(
        &self,
        trigger: Option<&TriggerReport>,
        json: bool,
        width: Option<usize>,
    ) -> serde_json::Result<String> {
        Ok(match trigger {
            Some(t) if json => {
                let mut j = serde_json::to_value(self)?;
                j["trigger"] = t.json();
                serde_json::to_string_pretty(&j)? + "\n"
            }
            Some(t) => format!(
                "{}\nLongest waits in the dump:\n{}",
                t.text(width),
                render_text_width(self, width)
            ),
            None if json => serde_json::to_string_pretty(self)? + "\n",
            None => render_text_width(self, width),
        })
    }
}

/// In a flight-recorder dump made by a wait: that wait and its chain, as a one-entry
/// report (what `top` and `info` of a dump show first).
#[derive(Clone, Debug)]
pub struct TriggerReport {
    /// The trigger, from the trace's metadata.
    pub trigger: FlightTrigger,
    /// Its wait with its chain.
    pub report: TopReport,
}

impl TriggerReport {
    /// Run the engine over `an` for `trigger`'s wait: `filter` selects it (the trigger's
    /// thread and span, and any other filter of the command), every wait a candidate.
    pub fn run(
        an: &Analysis,
        trigger: FlightTrigger,
        max_depth: usize,
        filter: Filter,
    ) -> Result<Self, ChainError> {
        let (report, _) = run(an, max_depth, filter, 1, |_| {})?;
        Ok(TriggerReport { trigger, report })
    }

    /// The trigger and its chain as text, `width` columns wide (`None`: whole lines, see
    /// [`render_text_width`]).
    pub fn text(&self, width: Option<usize>) -> String {
        let t = &self.trigger;
        format!(
            "Flight trigger: {} — {} (tid {}) waited {}\n{}",
            t.rule,
            t.comm,
            t.tid,
            fmt_ns(t.duration_ns()),
            render_text_width(&self.report, width)
        )
    }

    /// The trigger and its chain as JSON.
    pub fn json(&self) -> serde_json::Value {
        let t = &self.trigger;
        serde_json::json!({
            "kind": t.kind.name(), "rule": t.rule, "tid": t.tid, "tgid": t.tgid,
            "comm": t.comm, "start_ns": t.start_ns, "end_ns": t.end_ns,
            "entries": self.report.entries,
        })
    }
}

fn who(h: &HopRecord, nodes: &NodeTable) -> String {
    if h.metal {
        nodes.get(h.node).name().to_string()
    } else {
        format!("{} ({})", h.waker_comm, h.waker_tid)
    }
}

impl TopReport {
    /// The `n` longest waits of a finished run into a [`TopSink`]
    /// ([`Analysis::collect`]), ranked and rendered.
    pub fn new(run: &Collected<'_, TopSink>, n: usize) -> TopReport {
        let (sink, nodes) = (run.sink(), run.nodes());
        let (tables, meta, trace_start_ns) = (run.tables(), run.meta(), run.trace().start_ns);
        let chains = sink.groups.len();
        let mut groups: Vec<&Group> = sink.groups.values().collect();
        groups.sort_by(|a, b| {
            b.max_ns
                .cmp(&a.max_ns)
                .then(a.longest.switch_out_ns.cmp(&b.longest.switch_out_ns))
                .then(a.longest.tid.cmp(&b.longest.tid))
        });
        groups.truncate(n);
        let mut namer = FrameNamer::new(tables, meta.stack_threshold_ns);
        let entries = groups
            .into_iter()
            .enumerate()
            .map(|(i, g)| {
                let w = &g.longest;
                // Render this one wait through the engine's own folded renderer, without
                // its run-queue and on-CPU parts (listed apart, per level): the chain is
                // the hops' path, one level per hop.
                let mut one = FoldedSink::new(View::Chains);
                let mut rec = w.clone();
                rec.root = true;
                // A wakeup DAG shows its main chain, each level with its branches' time
                // (`Level::earlier`); parts inside branches are in that time.
                let main = w.main_chain();
                let level_of = |l: u32| -> Option<u32> {
                    if l == 0 || w.is_linear() {
                        return Some(l);
                    }
                    main.iter()
                        .position(|&k| k + 1 == l as usize)
                        .map(|i| i as u32 + 1)
                };
                let mut earlier: Vec<Option<EarlierShare>> = vec![None; main.len()];
                if !w.is_linear() {
                    for (j, h) in w.hops.iter().enumerate() {
                        if main.contains(&j) {
                            continue;
                        }
                        // Its nearest ancestor on the main chain.
                        let mut p = h.parent as usize;
                        while p > 0 && !main.contains(&(p - 1)) {
                            p = w.hops[p - 1].parent as usize;
                        }
                        let Some(i) = main.iter().position(|&k| k + 1 == p) else {
                            continue;
                        };
                        let e = earlier[i].get_or_insert(EarlierShare {
                            ns: 0,
                            waits: 0,
                            not_followed_ns: 0,
                        });
                        e.ns += h.ns;
                        match h.kind {
                            chainrec_chain::LevelKind::EarlierWait => {
                                // Identical ones merged into this level count too.
                                e.waits += u64::from(h.waits);
                            }
                            chainrec_chain::LevelKind::NotFollowed => e.not_followed_ns += h.ns,
                            chainrec_chain::LevelKind::Waker => {}
                        }
                    }
                    rec.hops = main
                        .iter()
                        .enumerate()
                        .map(|(i, &k)| {
                            let mut h = w.hops[k].clone();
                            h.parent = i as u32;
                            h
                        })
                        .collect();
                }
                let runq = std::mem::take(&mut rec.runq)
                    .into_iter()
                    .filter_map(|p| Some((level_of(p.level)?, p)))
                    .map(|(level, p)| RunqShare {
                        level,
                        holder: nodes.get(p.holder).name().into_owned(),
                        ns: p.ns,
                    })
                    .collect();
                let mut oncpu: Vec<OnCpuShare> = std::mem::take(&mut rec.oncpu)
                    .into_iter()
                    .filter_map(|p| Some((level_of(p.level)?, p)))
                    .map(|(level, p)| OnCpuShare {
                        level,
                        frames: namer
                            .node(nodes, p.node, true)
                            .frames
                            .into_iter()
                            .map(|f| f.0)
                            .collect(),
                        ns: p.ns,
                    })
                    .collect();
                oncpu.sort_by(|a, b| a.level.cmp(&b.level).then(b.ns.cmp(&a.ns)));
                one.on_wait(&rec, nodes);
                // The path with the most levels (then the most frames): the whole chain,
                // read structured (levels known, separators by kind, not re-parsed).
                let mut best: Option<(u32, usize, Vec<OwnedFrame>)> = None;
                one.for_each_path(nodes, tables, meta, |v| {
                    let better = best
                        .as_ref()
                        .is_none_or(|b| (v.level, v.frames.len()) >= (b.0, b.1));
                    if v.ns > 0 && better {
                        let frames = v
                            .frames
                            .iter()
                            .map(|f| (f.name.to_string(), f.kind, f.level))
                            .collect();
                        best = Some((v.level, v.frames.len(), frames));
                    }
                    true
                });
                let frames = best.map(|b| b.2).unwrap_or_default();
                let folded = frames
                    .iter()
                    .map(|f| f.0.as_str())
                    .collect::<Vec<_>>()
                    .join(";");
                let levels = frames.last().map_or(0, |f| f.2 as usize + 1);
                let mut chain = Vec::new();
                for lvl in 0..levels {
                    // The level's frames without the `--` that opens it.
                    let part: Vec<String> = frames
                        .iter()
                        .filter(|f| f.2 as usize == lvl && f.1 != FrameKind::LevelSeparator)
                        .map(|f| f.0.clone())
                        .collect();
                    let earlier = lvl
                        .checked_sub(1)
                        .and_then(|i| earlier.get(i).cloned().flatten());
                    let (who, ns) = if lvl == 0 {
                        (
                            format!("{} ({})", w.comm, w.tid),
                            w.blocked_ns().unwrap_or(0),
                        )
                    } else if let Some(h) = rec.hops.get(lvl - 1) {
                        (who(h, nodes), h.ns + earlier.as_ref().map_or(0, |e| e.ns))
                    } else {
                        (part.last().cloned().unwrap_or_default(), 0)
                    };
                    chain.push(Level {
                        level: lvl,
                        who,
                        ns,
                        frames: part,
                        earlier,
                    });
                }
                let wall = if meta.clock_offset_ns != 0 {
                    format_wall(w.switch_out_ns as i128 + meta.clock_offset_ns)
                } else {
                    String::new()
                };
                TopEntry {
                    rank: i + 1,
                    count: g.count,
                    total_ns: g.total_ns,
                    max_ns: g.max_ns,
                    tid: w.tid,
                    tgid: w.tgid,
                    comm: w.comm.to_string(),
                    cgroup: crate::cgroup::CgroupLabel::at(tables, w.tid, w.switch_out_ns),
                    switch_out_ns: w.switch_out_ns,
                    offset_s: w.switch_out_ns.saturating_sub(trace_start_ns) as f64 / 1e9,
                    wall,
                    truncated: w.truncated,
                    lost: w.lost,
                    chain,
                    folded,
                    runq,
                    oncpu,
                }
            })
            .collect();
        TopReport {
            entries,
            chains,
            ranked_waits: sink.ranked,
            preempted: sink.preempted,
            without_waker: sink.without_waker,
        }
    }
}

/// Human duration: `12.34 ms`, `456.0 us`, `1.234 s` (in `chainrec_format`, where the
/// chain library's summary lines use it too).
pub use chainrec_format::fmt_ns;

/// CPU holders named per run-queue line of the text output (the rest are summed).
const TOP_HOLDERS: usize = 3;

/// Default width of the text output (columns).
pub const TEXT_WIDTH: usize = 80;

/// Terminal rendering, [`TEXT_WIDTH`] columns wide (frames abbreviated, long lines
/// wrapped); see [`render_text_width`].
pub fn render_text(r: &TopReport) -> String {
    render_text_width(r, Some(TEXT_WIDTH))
}

/// Chars of `s` as columns (frames are ASCII but comms and symbols need not be).
fn cols(s: &str) -> usize {
    s.chars().count()
}

/// `frames` joined by `;` in at most `avail` columns: the frames at both ends kept (the
/// thread and its innermost user frame, the waker function and the waker), the middle
/// replaced by `…N…` (N frames left out); a lone frame too long is cut with `…`.
pub fn fit_frames(frames: &[String], avail: usize) -> String {
    let full = frames.join(";");
    if cols(&full) <= avail {
        return full;
    }
    let (mut h, mut t) = (0usize, 0usize); // frames kept at the head and at the tail
    let len = |h: usize, t: usize| {
        let n = frames.len() - h - t;
        let kept: usize = frames[..h]
            .iter()
            .chain(&frames[frames.len() - t..])
            .map(|f| cols(f) + 1)
            .sum();
        kept + cols(&format!("…{n}…"))
    };
    // Grow the shorter end first (the head on a tie) while the result fits.
    loop {
        let order = if h <= t {
            [(h + 1, t), (h, t + 1)]
        } else {
            [(h, t + 1), (h + 1, t)]
        };
        match order
            .into_iter()
            .find(|&(a, b)| a + b < frames.len() && len(a, b) <= avail)
        {
            Some((a, b)) => (h, t) = (a, b),
            None => break,
        }
    }
    if h + t == 0 {
        let cut: String = full.chars().take(avail.saturating_sub(1)).collect();
        return cut + "…";
    }
    let mut parts: Vec<String> = frames[..h].to_vec();
    parts.push(format!("…{}…", frames.len() - h - t));
    parts.extend_from_slice(&frames[frames.len() - t..]);
    parts.join(";")
}

/// `line` wrapped at its `, ` and `; ` boundaries to `width` columns, continuation lines
/// indented by `indent` spaces (a single piece longer than the width stays whole).
fn wrap(line: &str, width: Option<usize>, indent: usize) -> String {
    let Some(width) = width else {
        return line.to_string();
    };
    if cols(line) <= width {
        return line.to_string();
    }
    let mut pieces: Vec<&str> = Vec::new();
    let mut start = 0;
    for (i, _) in line.match_indices([',', ';']) {
        if line[i + 1..].starts_with(' ') {
            pieces.push(&line[start..i + 2]);
            start = i + 2;
        }
    }
    pieces.push(&line[start..]);
    let mut out = String::new();
    let mut cur = String::new();
    for p in pieces {
        if !cur.is_empty() && cols(&cur) + cols(p.trim_end()) > width {
            out.push_str(cur.trim_end());
            out.push('\n');
            cur = " ".repeat(indent);
        }
        cur.push_str(p);
    }
    out.push_str(cur.trim_end());
    out
}

/// `text` wrapped at spaces to `width` columns (`None`: unchanged), continuation lines
/// indented by `indent` spaces; a word longer than the width stays whole. For prose such
/// as the notes that follow `top`.
pub fn wrap_words(text: &str, width: Option<usize>, indent: usize) -> String {
    let Some(width) = width else {
        return text.to_string();
    };
    let mut out = String::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        if !cur.trim_start().is_empty() && cols(&cur) + 1 + cols(word) > width {
            out.push_str(&cur);
            out.push('\n');
            cur = " ".repeat(indent);
        } else if !cur.is_empty() && !cur.ends_with(' ') {
            cur.push(' ');
        }
        cur.push_str(word);
    }
    out.push_str(&cur);
    out
}

/// `s` in at most `avail` columns: its head and tail with `…` between.
fn fit_middle(s: &str, avail: usize) -> String {
    let n = cols(s);
    if n <= avail {
        return s.to_string();
    }
    let keep = avail.saturating_sub(1);
    let head = keep / 2;
    let tail = keep - head;
    let chars: Vec<char> = s.chars().collect();
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[n - tail..]);
    out
}

/// Terminal rendering; `width` `None` = no limit (`top --wide`: every frame, one line
/// per level).
pub fn render_text_width(r: &TopReport, width: Option<usize>) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if r.entries.is_empty() {
        let _ = writeln!(
            s,
            "no blocked waits with a waker in this trace (or none matched the filters)"
        );
    }
    let frames_in = |prefix: &str, frames: &[String]| match width {
        Some(w) => fit_frames(frames, w.saturating_sub(cols(prefix)).max(12)),
        None => frames.join(";"),
    };
    for e in &r.entries {
        let when = if e.wall.is_empty() {
            format!("+{:.6} s", e.offset_s)
        } else {
            format!("{} (+{:.3} s)", e.wall, e.offset_s)
        };
        let first = format!(
            "#{:<3} {} tid {} longest {}",
            e.rank,
            e.comm,
            e.tid,
            fmt_ns(e.max_ns)
        );
        let rest = format!(
            "at {}; {} waits, total {}{}{}",
            when,
            e.count,
            fmt_ns(e.total_ns),
            if e.truncated {
                "; [chain truncated]"
            } else {
                ""
            },
            if e.lost { "; [lost events inside]" } else { "" },
        );
        let head = format!("{first} {rest}");
        // `at WHEN;` with a wall clock does not fit after a long name: it starts the next
        // line.
        let at_len = rest.find("; ").map_or(rest.len(), |i| i + 1);
        let head = match width {
            Some(w) if cols(&head) > w && cols(&first) + 1 + cols(&rest[..at_len]) > w => {
                format!("{first}\n{}", wrap(&format!("     {rest}"), width, 5))
            }
            _ => wrap(&head, width, 5),
        };
        let _ = writeln!(s, "{head}");
        if let Some(c) = &e.cgroup {
            match width {
                None => {
                    let _ = writeln!(s, "     cgroup {}", c.text());
                }
                Some(w) => {
                    // The path (often one long token) shortened in the middle; what it
                    // names on a line of its own.
                    let prefix = "     cgroup ";
                    let avail = w.saturating_sub(cols(prefix)).max(12);
                    let _ = writeln!(s, "{prefix}{}", fit_middle(&c.cgroup, avail));
                    let named = c.named();
                    if !named.is_empty() {
                        let _ = writeln!(s, "{}", wrap(&format!("     {named}"), width, 5));
                    }
                }
            }
        }
        for l in &e.chain {
            let prefix = if l.level == 0 {
                format!("      blocked {:>10}  ", fmt_ns(l.ns))
            } else {
                format!("  {:>2} <- {:>10}  ", l.level, fmt_ns(l.ns))
            };
            let _ = writeln!(s, "{prefix}{}", frames_in(&prefix, &l.frames));
            // The part of this level spent waiting for a CPU, behind whom.
            let mut rq: Vec<&RunqShare> = e
                .runq
                .iter()
                .filter(|p| p.level as usize == l.level)
                .collect();
            if !rq.is_empty() {
                let total: u64 = rq.iter().map(|p| p.ns).sum();
                rq.sort_by(|a, b| b.ns.cmp(&a.ns).then_with(|| a.holder.cmp(&b.holder)));
                let mut behind: Vec<String> = rq
                    .iter()
                    .take(TOP_HOLDERS)
                    .map(|p| format!("{} {}", p.holder, fmt_ns(p.ns)))
                    .collect();
                if rq.len() > TOP_HOLDERS {
                    let rest: u64 = rq[TOP_HOLDERS..].iter().map(|p| p.ns).sum();
                    behind.push(format!(
                        "{} others {}",
                        rq.len() - TOP_HOLDERS,
                        fmt_ns(rest)
                    ));
                }
                let what = if l.level == 0 {
                    "runnable"
                } else {
                    "of it runnable"
                };
                let line = format!(
                    "      {what} {:>10}  [run queue] behind {}",
                    fmt_ns(total),
                    behind.join(", ")
                );
                let _ = writeln!(s, "{}", wrap(&line, width, 29));
            }
            // Its earlier waits inside the wait (branches of the wakeup DAG).
            if let Some(e) = &l.earlier {
                let mut line = format!(
                    "      of it blocked  {:>10}  in {} [earlier wait]{}",
                    fmt_ns(e.ns),
                    e.waits,
                    if e.waits == 1 { "" } else { "s" },
                );
                if e.not_followed_ns > 0 {
                    line.push_str(&format!(", {} not followed", fmt_ns(e.not_followed_ns)));
                }
                let _ = writeln!(s, "{}", wrap(&line, width, 29));
            }
            // What the waker did while it ran inside this level, by its samples: the
            // largest stack, and how many others.
            let oc: Vec<&OnCpuShare> = e
                .oncpu
                .iter()
                .filter(|p| p.level as usize == l.level)
                .collect();
            if let Some(big) = oc.first() {
                let total: u64 = oc.iter().map(|p| p.ns).sum();
                let prefix = format!("      of it on cpu   {:>10}  ", fmt_ns(total));
                let more = match oc.len() {
                    1 => String::new(),
                    n => format!(" (+{} stacks)", n - 1),
                };
                let room = cols(&prefix) + cols(&more);
                let frames = match width {
                    Some(w) => fit_frames(&big.frames, w.saturating_sub(room).max(12)),
                    None => big.frames.join(";"),
                };
                let _ = writeln!(s, "{prefix}{frames}{more}");
            }
        }
        s.push('\n');
    }
    let foot = format!(
        "{} waits ranked in {} distinct chains; not ranked: {} preemptions, {} waits without a waking in the trace",
        r.ranked_waits, r.chains, r.preempted, r.without_waker
    );
    let _ = writeln!(s, "{}", wrap(&foot, width, 2));
    s
}

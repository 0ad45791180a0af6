//! `chainrec critical-path`: a thread's timeline ([`CriticalPath`]) as text for people
//! and as JSON. The folded form is [`CriticalPath::folded_ns`].

use crate::script::state_str;
use crate::top::fmt_ns;
use chainrec_chain::critpath::{CriticalPath, Level, Segment, SegmentKind, Share};
use serde_json::{json, Value};
use std::fmt::Write;

/// How to print the text.
#[derive(Clone, Copy, Debug)]
pub struct TextOptions {
    /// Line width (longer lines end in `…`); 0 = no limit.
    pub width: usize,
    /// Rows of the "who and what" table.
    pub top: usize,
    /// Biggest segments shown in detail.
    pub biggest: usize,
    /// Also every segment in time order, in detail.
    pub timeline: bool,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions {
            width: 80,
            top: 10,
            biggest: 5,
            timeline: false,
        }
    }
}

/// The name of a stack for one line: its leaf function (the last frame, or the last user
/// frame when the kernel part only says the thread was scheduled out).
fn leaf(frames: &[String]) -> &str {
    let sched = |f: &str| {
        f.starts_with("schedule") || f.starts_with("__schedule") || f.starts_with("preempt_")
    };
    frames
        .iter()
        .rev()
        .find(|f| *f != "-" && !sched(f))
        .or_else(|| frames.last())
        .map_or("[no stack]", |s| s.as_str())
}

/// Percent of `whole`, one decimal.
fn pct(ns: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    format!("{:.1}%", ns as f64 * 100.0 / whole as f64)
}

/// Seconds from the trace start.
fn rel(cp: &CriticalPath, t: u64) -> String {
    format!("+{:.6}", (t as f64 - cp.trace_start_ns as f64) / 1e9)
}

/// Who and what each nanosecond of the window was spent on: the thread's own running
/// time by leaf function (split by all its samples in the window,
/// [`CriticalPath::running_profile`]), the CPU holders it or its wakers waited behind, the wakers' sampled
/// stacks (by leaf, a waker's levels without a sample spread over its sampled leaves in
/// proportion), metal, and unknown parts. Sorted by time, largest first.
pub fn who_and_what(cp: &CriticalPath) -> Vec<(String, String, u64)> {
    let mut rows: Vec<(String, String, u64)> = Vec::new();
    let mut add = |who: String, what: String, ns: u64| {
        if ns == 0 {
            return;
        }
        match rows.iter_mut().find(|r| r.0 == who && r.1 == what) {
            Some(r) => r.2 += ns,
            None => rows.push((who, what, ns)),
        }
    };
    // Per waker name: on-CPU time without a sample in its level, and by sampled leaf.
    let mut waker_cpu: std::collections::BTreeMap<String, (u64, Vec<(String, u64)>)> =
        Default::default();
    let profile = cp.running_profile();
    if profile.is_empty() {
        add(cp.comm.clone(), "on cpu".into(), cp.totals()[0]);
    }
    for sh in &profile {
        let what = match sh.samples {
            0 => "on cpu, no sample".to_string(),
            _ => format!("on cpu: {}", leaf(&sh.frames)),
        };
        add(cp.comm.clone(), what, sh.ns);
    }
    for s in &cp.segments {
        match &s.kind {
            SegmentKind::Running { .. } => {}
            SegmentKind::Runnable { behind, .. } => {
                for sh in behind {
                    add(
                        "[run queue]".into(),
                        format!("behind {}", leaf(&sh.frames)),
                        sh.ns,
                    );
                }
            }
            SegmentKind::Blocked(b) => {
                if let Some(n) = b.note {
                    add(cp.comm.clone(), format!("blocked, {n}"), s.ns());
                }
                for l in &b.levels {
                    let what = if l.metal {
                        "interrupt".to_string()
                    } else {
                        "(no breakdown)".to_string()
                    };
                    add(l.name.clone(), what, l.own_ns);
                    for sh in &l.runq {
                        add(
                            "[run queue]".into(),
                            format!("behind {}", leaf(&sh.frames)),
                            sh.ns,
                        );
                    }
                    for sh in &l.oncpu {
                        let f = &sh.frames[1..];
                        let e = waker_cpu.entry(l.name.clone()).or_default();
                        if f.is_empty() {
                            e.0 += sh.ns;
                        } else {
                            let what = format!("on cpu: {}", leaf(f));
                            match e.1.iter_mut().find(|x| x.0 == what) {
                                Some(x) => x.1 += sh.ns,
                                None => e.1.push((what, sh.ns)),
                            }
                        }
                    }
                }
            }
            SegmentKind::Unknown(u) => add("[unknown]".into(), u.label().into(), s.ns()),
        }
    }
    // A waker's levels are short, so many hold no sample of it: that time is spread over
    // the leaves its sampled levels show, in proportion (as its own running time is).
    for (name, (none, sampled)) in waker_cpu {
        let total = none + sampled.iter().map(|x| x.1).sum::<u64>();
        if sampled.is_empty() {
            add(name, "on cpu, no sample".into(), none);
            continue;
        }
        let w: Vec<u64> = sampled.iter().map(|x| x.1).collect();
        for ((what, _), ns) in sampled
            .into_iter()
            .zip(chainrec_chain::oncpu::apportion(total, &w))
        {
            add(name.clone(), what, ns);
        }
    }
    rows.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    rows
}

/// Largest shares first, as `name 60%, name 40%` (at most `n`, the rest summed).
fn shares_line(shares: &[Share], n: usize, name: impl Fn(&Share) -> String) -> String {
    let total: u64 = shares.iter().map(|s| s.ns).sum();
    let mut v: Vec<(String, u64)> = Vec::new();
    for s in shares {
        let k = name(s);
        match v.iter_mut().find(|x| x.0 == k) {
            Some(x) => x.1 += s.ns,
            None => v.push((k, s.ns)),
        }
    }
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut parts: Vec<String> = v
        .iter()
        .take(n)
        .map(|(k, ns)| format!("{k} {}", pct(*ns, total)))
        .collect();
    if v.len() > n {
        let rest: u64 = v[n..].iter().map(|x| x.1).sum();
        parts.push(format!("{} more {}", v.len() - n, pct(rest, total)));
    }
    parts.join(", ")
}

/// The detail lines of one segment (first line: time, length, kind, summary).
fn segment_lines(cp: &CriticalPath, s: &Segment, out: &mut Vec<String>) {
    let head = format!("{} {:>9}  ", rel(cp, s.start_ns), fmt_ns(s.ns()));
    let cut = if s.cut_from.is_some() {
        " (cut by the window)"
    } else {
        ""
    };
    match &s.kind {
        SegmentKind::Running { stacks } => {
            let n: u64 = stacks.iter().map(|x| x.samples).sum();
            let what = if stacks.is_empty() {
                "no samples in this trace".to_string()
            } else if n == 0 {
                "[on cpu: no sample]".to_string()
            } else {
                shares_line(stacks, 3, |x| leaf(&x.frames).to_string())
            };
            out.push(format!("{head}running{cut}: {what}"));
        }
        SegmentKind::Runnable { preempted, behind } => {
            let why = if *preempted { "preempted" } else { "woken" };
            let who = shares_line(behind, 3, |x| leaf(&x.frames).to_string());
            out.push(format!("{head}runnable{cut} ({why}), behind {who}"));
        }
        SegmentKind::Blocked(b) => {
            let mut first = format!("{head}blocked{cut}");
            if b.state != 0 {
                let _ = write!(first, " ({})", state_str(b.state));
            }
            if !b.stack.is_empty() {
                let _ = write!(first, " in {}", leaf(&b.stack));
            }
            if let Some(n) = b.note {
                let _ = write!(first, ": {n}");
            }
            if b.lost {
                first.push_str(" [lost events]");
            }
            out.push(first);
            for (k, l) in b.levels.iter().enumerate() {
                level_lines(k, l, out);
            }
            if b.truncated {
                out.push("      [truncated at --max-depth]".into());
            }
        }
        SegmentKind::Unknown(u) => out.push(format!("{head}unknown{cut}: {}", u.label())),
    }
}

/// A chain level: who, how long, and what it did (on CPU by leaf, run queue by holder).
fn level_lines(k: usize, l: &Level, out: &mut Vec<String>) {
    let who = if l.metal || l.tid == 0 {
        l.name.clone()
    } else {
        format!("{} ({})", l.name, l.tid)
    };
    out.push(format!(
        "{:>w$}<- {who}  {}",
        "",
        fmt_ns(l.ns),
        w = 6 + 2 * k.min(8)
    ));
    let pad = 9 + 2 * k.min(8);
    let oncpu: u64 = l.oncpu.iter().map(|s| s.ns).sum();
    if oncpu > 0 {
        let what = shares_line(&l.oncpu, 3, |x| match x.frames.len() {
            0 | 1 => "no sample".into(),
            _ => leaf(&x.frames[1..]).to_string(),
        });
        out.push(format!("{:pad$}on cpu {}: {what}", "", fmt_ns(oncpu)));
    }
    let runq: u64 = l.runq.iter().map(|s| s.ns).sum();
    if runq > 0 {
        let who = shares_line(&l.runq, 3, |x| leaf(&x.frames).to_string());
        out.push(format!(
            "{:pad$}run queue {}: behind {who}",
            "",
            fmt_ns(runq)
        ));
    }
}

/// Cut a line to `width` characters (`…` marks the cut); 0 = no limit.
fn fit(line: &str, width: usize) -> String {
    if width == 0 || line.chars().count() <= width {
        return line.to_string();
    }
    let mut s: String = line.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// The text report: a summary (wall time split into running / runnable / blocked), who
/// and what the time went to, the biggest segments, and optionally the whole timeline.
pub fn render_text(cp: &CriticalPath, o: &TextOptions) -> String {
    let mut lines: Vec<String> = Vec::new();
    let wall = cp.wall_ns();
    lines.push(format!(
        "critical path of {} (tid {}, pid {})",
        cp.comm, cp.tid, cp.tgid
    ));
    lines.push(format!(
        "window {}..{} s from the trace start: {}",
        rel(cp, cp.start_ns),
        rel(cp, cp.end_ns),
        fmt_ns(wall)
    ));
    let t = cp.totals();
    let mut counts = [0usize; 4];
    for s in &cp.segments {
        counts[match s.kind {
            SegmentKind::Running { .. } => 0,
            SegmentKind::Runnable { .. } => 1,
            SegmentKind::Blocked(_) => 2,
            SegmentKind::Unknown(_) => 3,
        }] += 1;
    }
    for (i, name) in ["running", "runnable", "blocked", "unknown"]
        .iter()
        .enumerate()
    {
        if i == 3 && t[3] == 0 {
            continue;
        }
        let mut l = format!(
            "  {name:<9}{:>10} {:>6}  {} segment{}",
            fmt_ns(t[i]),
            pct(t[i], wall),
            counts[i],
            if counts[i] == 1 { "" } else { "s" }
        );
        if i == 0 {
            match cp.period_ns {
                Some(p) => {
                    let _ = write!(l, ", {} samples ({} each)", cp.stats.samples, fmt_ns(p));
                }
                None => l.push_str(", no samples in this trace"),
            }
        }
        lines.push(l);
    }
    let rows = who_and_what(cp);
    if !rows.is_empty() {
        lines.push(String::new());
        lines.push("Who and what the time went to:".into());
        for (who, what, ns) in rows.iter().take(o.top) {
            lines.push(format!(
                "  {:>9} {:>6}  {who}  {what}",
                fmt_ns(*ns),
                pct(*ns, wall)
            ));
        }
        if rows.len() > o.top {
            let rest: u64 = rows[o.top..].iter().map(|r| r.2).sum();
            lines.push(format!(
                "  {:>9} {:>6}  ({} more rows)",
                fmt_ns(rest),
                pct(rest, wall),
                rows.len() - o.top
            ));
        }
    }
    if o.biggest > 0 && !cp.segments.is_empty() {
        let mut big: Vec<&Segment> = cp.segments.iter().collect();
        big.sort_by(|a, b| b.ns().cmp(&a.ns()).then(a.start_ns.cmp(&b.start_ns)));
        big.truncate(o.biggest);
        big.sort_by_key(|s| s.start_ns);
        lines.push(String::new());
        lines.push(format!(
            "Biggest segments (of {}; time from the trace start, s):",
            cp.segments.len()
        ));
        for s in big {
            segment_lines(cp, s, &mut lines);
        }
    }
    if o.timeline {
        lines.push(String::new());
        lines.push("Timeline:".into());
        for s in &cp.segments {
            segment_lines(cp, s, &mut lines);
        }
    }
    let st = &cp.stats;
    let mut notes = Vec::new();
    if st.cut_segments > 0 {
        notes.push(format!(
            "{} segments cut by the window (their chains split in proportion)",
            st.cut_segments
        ));
    }
    if st.samples_off_cpu > 0 {
        notes.push(format!(
            "{} samples taken while the switches say off CPU (not shown)",
            st.samples_off_cpu
        ));
    }
    if st.inconsistent_switches > 0 || st.unmatched_waits > 0 {
        notes.push(format!(
            "{} contradicting switches, {} waits without a record ([switch missing from the trace] / [waker unknown])",
            st.inconsistent_switches, st.unmatched_waits
        ));
    }
    if st.lost_events > 0 {
        notes.push(format!(
            "{} events lost in the trace: chains may be incomplete",
            st.lost_events
        ));
    }
    if !notes.is_empty() {
        lines.push(String::new());
        for n in notes {
            lines.push(format!("note: {n}"));
        }
    }
    let mut s = String::new();
    for l in lines {
        s.push_str(&fit(&l, o.width));
        s.push('\n');
    }
    s
}

fn shares_json(v: &[Share], key: &str) -> Value {
    Value::Array(
        v.iter()
            .map(|s| {
                let mut m = serde_json::Map::new();
                if key == "holder" {
                    // `[run queue];holder` in a level, `holder` alone in a runnable segment.
                    m.insert("holder".into(), json!(s.frames.last()));
                } else {
                    m.insert("frames".into(), json!(s.frames));
                }
                if key == "samples" {
                    m.insert("samples".into(), json!(s.samples));
                }
                m.insert("ns".into(), json!(s.ns));
                Value::Object(m)
            })
            .collect(),
    )
}

/// The JSON form: every segment with its start and end (trace clock ns), kind and
/// explanation; see docs/REPORTS.md for the fields.
pub fn render_json(cp: &CriticalPath) -> Value {
    let t = cp.totals();
    let segs: Vec<Value> = cp
        .segments
        .iter()
        .map(|s| {
            let mut m = serde_json::Map::new();
            m.insert("start_ns".into(), json!(s.start_ns));
            m.insert("end_ns".into(), json!(s.end_ns));
            m.insert("ns".into(), json!(s.ns()));
            m.insert("kind".into(), json!(s.kind.name()));
            if let Some((a, e)) = s.cut_from {
                m.insert("cut_from".into(), json!({"start_ns": a, "end_ns": e}));
            }
            match &s.kind {
                SegmentKind::Running { stacks } => {
                    m.insert("stacks".into(), shares_json(stacks, "samples"));
                }
                SegmentKind::Runnable { preempted, behind } => {
                    m.insert("preempted".into(), json!(preempted));
                    m.insert("behind".into(), shares_json(behind, "holder"));
                }
                SegmentKind::Blocked(b) => {
                    m.insert("state".into(), json!(state_str(b.state)));
                    m.insert("stack".into(), json!(b.stack));
                    if let Some(n) = b.note {
                        m.insert("note".into(), json!(n));
                    }
                    m.insert("truncated".into(), json!(b.truncated));
                    m.insert("lost".into(), json!(b.lost));
                    let lv: Vec<Value> = b
                        .levels
                        .iter()
                        .map(|l| {
                            json!({
                                "name": l.name,
                                "tid": l.tid,
                                "metal": l.metal,
                                "frames": l.frames,
                                "ns": l.ns,
                                "own_ns": l.own_ns,
                                "run_queue": shares_json(&l.runq, "holder"),
                                "on_cpu": shares_json(&l.oncpu, "frames"),
                            })
                        })
                        .collect();
                    m.insert("levels".into(), Value::Array(lv));
                }
                SegmentKind::Unknown(u) => {
                    m.insert("reason".into(), json!(u.label()));
                }
            }
            Value::Object(m)
        })
        .collect();
    let st = &cp.stats;
    json!({
        "tid": cp.tid,
        "tgid": cp.tgid,
        "comm": cp.comm,
        "start_ns": cp.start_ns,
        "end_ns": cp.end_ns,
        "trace_start_ns": cp.trace_start_ns,
        "wall_ns": cp.wall_ns(),
        "period_ns": cp.period_ns,
        "running_ns": t[0],
        "runnable_ns": t[1],
        "blocked_ns": t[2],
        "unknown_ns": t[3],
        "stats": {
            "samples": st.samples,
            "samples_off_cpu": st.samples_off_cpu,
            "inconsistent_switches": st.inconsistent_switches,
            "unmatched_waits": st.unmatched_waits,
            "cut_segments": st.cut_segments,
            "lost_events": st.lost_events,
        },
        "segments": segs,
    })
}

/// The critical path as Perfetto slices (`export --perfetto --critical-path TID`): one
/// slice per segment, named by what the thread did and the main reason, e.g.
/// `running: cr_spin_compute`, `runnable behind rustc`, `blocked (S) in pipe_read <-
/// cr-relay <- cr-timer <- [hardirq: timer]`, `unknown: …`.
pub fn perfetto_slices(cp: &CriticalPath) -> Vec<crate::perfetto::Slice> {
    let top = |v: &[Share]| {
        v.iter()
            .max_by_key(|x| x.ns)
            .map(|x| leaf(&x.frames).to_string())
    };
    (cp.segments.iter())
        .map(|s| {
            let name = match &s.kind {
                SegmentKind::Running { stacks } => match top(stacks) {
                    Some(l) => format!("running: {l}"),
                    None => "running".to_string(),
                },
                SegmentKind::Runnable { preempted, behind } => format!(
                    "runnable ({}) behind {}",
                    if *preempted { "preempted" } else { "woken" },
                    top(behind).unwrap_or_else(|| "[unknown]".into())
                ),
                SegmentKind::Blocked(b) => {
                    let mut n = "blocked".to_string();
                    if b.state != 0 {
                        let _ = write!(n, " ({})", state_str(b.state));
                    }
                    if !b.stack.is_empty() {
                        let _ = write!(n, " in {}", leaf(&b.stack));
                    }
                    for l in &b.levels {
                        let _ = write!(n, " <- {}", l.name);
                    }
                    if let Some(note) = b.note {
                        let _ = write!(n, ": {note}");
                    }
                    n
                }
                SegmentKind::Unknown(u) => format!("unknown: {}", u.label()),
            };
            crate::perfetto::Slice {
                start_ns: s.start_ns,
                end_ns: s.end_ns,
                name,
            }
        })
        .collect()
}

//! `chainrec info`: what a trace holds (events by kind, tables, samples, losses, sizes,
//! recovery), as text and as JSON. The binary only opens the file and prints.

use crate::top::{TriggerReport, TEXT_WIDTH};
use chainrec_format::{
    human_bytes, EventKind, FlightTrigger, StackId, TraceFacts, TraceReader, VerifyReport,
};
use std::fmt::Write as _;

/// Events by kind as a JSON object keyed by kind name (`info --json`).
pub fn events_by_kind_json(counts: &[u64; EventKind::COUNT]) -> serde_json::Value {
    (EventKind::named_counts(counts))
        .map(|(name, n)| (name.to_string(), n.into()))
        .collect::<serde_json::Map<String, serde_json::Value>>()
        .into()
}

/// `writeln!` into a `String` (which cannot fail).
macro_rules! w {
    ($o:ident, $($t:tt)*) => {{
        let _ = writeln!($o, $($t)*);
    }};
}

/// What `chainrec info` says about a trace: the human summary and its JSON form.
pub struct TraceInfo<'a> {
    r: &'a TraceReader,
    stats: &'a VerifyReport,
    verified: bool,
    facts: TraceFacts,
}

impl<'a> TraceInfo<'a> {
    /// The summary of `r`, with event counts from `stats` (`verified`: they come from
    /// [`TraceReader::verify`]).
    pub fn new(r: &'a TraceReader, stats: &'a VerifyReport, verified: bool) -> Self {
        TraceInfo {
            r,
            stats,
            verified,
            facts: TraceFacts::of(r),
        }
    }

    /// One JSON object (`info --json`).
    pub fn json(&self) -> serde_json::Value {
        let r = self.r;
        let m = r.meta();
        let t = r.tables();
        let by_kind = events_by_kind_json(&self.stats.events_by_kind);
        let sb = r.section_bytes();
        let mut j = serde_json::json!({
            "file": r.path().display().to_string(),
            "files": r.paths().iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "format_version": format!("{}.{}", r.version().0, r.version().1),
            "bytes": r.file_len(),
            "events": r.event_count(),
            "bytes_per_event": (self.facts.bytes_per_event * 1000.0).round() / 1000.0,
            "duration_ns": self.facts.duration_ns,
            "first_ts": r.time_span().map(|s| s.0),
            "last_ts": r.time_span().map(|s| s.1),
            "events_by_kind": by_kind,
            "sampling": m.sampling().map(|s| serde_json::json!({
                "event": s.event, "freq_hz": s.freq_hz, "period_ns": s.period_ns,
                "samples": s.samples, "no_kstack": s.no_kstack, "no_ustack": s.no_ustack,
                "lost": s.lost,
            })),
            "chunks": r.chunks().len(),
            "tasks": t.tasks.len(),
            "stacks": t.stacks.len(),
            "symbols": t.symbols.len(),
            "unresolved_symbols": self.facts.unresolved_symbols,
            "irq_sources": t.irq_sources.len(),
            "lost_events": self.r.meta().lost.events(),
            "lost": {
                "ringbuf_full": m.lost.ringbuf_full,
                "malformed": m.lost.malformed,
                "out_of_order": m.lost.out_of_order,
                "kernel_stack_failed": m.lost.kernel_stack_failed,
                "user_stack_failed": m.lost.user_stack_failed,
                "stacks_skipped": m.lost.stacks_skipped,
                "user_stacks_preempted": m.lost.user_stacks_preempted,
                "unresolved_symbols": m.lost.unresolved_symbols,
            },
            "missing_stacks": self.stats.missing_stacks(),
            "skipped_stacks": self.stats.reserved_stack_refs[StackId::SKIPPED.0 as usize],
            "user_exiting_stack_refs": self.stats.reserved_stack_refs[StackId::USER_EXITING.0 as usize],
            "lazy_user": chainrec_format::LAZY_USER_EXTRA_KEYS
                .iter()
                .filter_map(|k| Some((k.to_string(), m.extra(k)?.parse::<u64>().ok()?.into())))
                .collect::<serde_json::Map<String, serde_json::Value>>(),
            "user_unwind": m.extra("user_unwind"),
            "no_stack_refs": self.stats.reserved_stack_refs[StackId::NONE.0 as usize],
            "recovered": r.recovery().is_some(),
            "recovery": r.recovery().map(|x| serde_json::json!({"reason": x.reason, "trailing_bytes": x.trailing_bytes})),
            "verified": self.verified,
            "section_bytes": {
                "chunks": sb.chunks, "tables": sb.tables, "meta": sb.meta, "index": sb.index,
                "framing": sb.framing, "other": sb.other, "mappings": sb.mappings,
            },
            "meta": {
                "host": m.host,
                "kernel_release": m.kernel_release,
                "cpu_count": m.cpu_count,
                "clock": format!("{:?}", m.clock),
                "start_ns": m.start_ns,
                "end_ns": m.end_ns,
                "stack_mode": format!("{:?}", m.stack_mode),
                "stack_threshold_ns": m.stack_threshold_ns,
                "synthetic_scenario": m.synthetic_scenario,
                "command_line": m.command_line,
            },
        });
        // Apart: one json! of everything exceeds the macro's recursion limit.
        j["user_symbols"] = serde_json::json!({
            "total": self.facts.user_symbols,
            "unresolved": self.facts.unresolved_user_symbols,
            "unresolved_at_record_by_reason": m.extra("unresolved_user_frames"),
            "mappings": t.mappings.len(),
        });
        if t.has_cgroups() {
            let c = cgroup_counts(t);
            j["cgroups"] = serde_json::json!({
                "groups": c.groups, "threads": c.threads, "moved": c.moved,
                "unresolved": c.unresolved, "bytes": sb.cgroups,
            });
        }
        j
    }

    /// What `chainrec info` prints, text or JSON: the summary, and for a flight-recorder
    /// dump its `trigger`, with the triggering wait and its chain (`wait`) when a wait made
    /// the dump.
    pub fn output(
        &self,
        json: bool,
        trigger: Option<&FlightTrigger>,
        wait: Option<&TriggerReport>,
    ) -> serde_json::Result<String> {
        let trigger_json = match (wait, trigger) {
            (Some(w), _) => Some(w.json()),
            (None, Some(t)) => Some(serde_json::json!({"kind": t.kind.name(), "rule": t.rule})),
            (None, None) => None,
        };
        if json {
            let mut j = self.json();
            if let Some(t) = trigger_json {
                j["flight_trigger"] = t;
            }
            return Ok(serde_json::to_string_pretty(&j)? + "\n");
        }
        Ok(match (wait, trigger) {
            (Some(w), _) => self.render() + "\n" + &w.text(Some(TEXT_WIDTH)),
            (None, Some(t)) => {
                self.render() + &format!("  written on  {} (no triggering wait)\n", t.rule)
            }
            (None, None) => self.render(),
        })
    }

    /// The human summary, as text.
    pub fn render(&self) -> String {
        let mut o = String::new();
        let r = self.r;
        let m = r.meta();
        let t = r.tables();
        let (maj, min) = r.version();
        w!(
            o,
            "{}: chainrec trace v{maj}.{min}, {}",
            r.path().display(),
            human_bytes(r.file_len())
        );
        let paths = r.paths();
        if let [_, .., last] = paths.as_slice() {
            w!(
                o,
                "  files       {} files of one rotated recording, read as one: {} .. {}",
                paths.len(),
                paths[0].display(),
                last.display()
            );
        }
        let host = if m.host.is_empty() {
            "?".to_string()
        } else {
            m.host.clone()
        };
        w!(
            o,
            "  recorded    on {host} (kernel {}), {} cpus, clock {:?}, stacks {:?} (threshold {})",
            if m.kernel_release.is_empty() {
                "?"
            } else {
                &m.kernel_release
            },
            m.cpu_count,
            m.clock,
            m.stack_mode,
            human_ns(m.stack_threshold_ns)
        );
        if let Some(s) = &m.synthetic_scenario {
            w!(o, "  synthetic   scenario {s}");
        }
        if !m.command_line.is_empty() {
            w!(o, "  command     {}", m.command_line.join(" "));
        }
        let span = r.time_span();
        w!(
            o,
            "  duration    {}{}",
            human_ns(self.facts.duration_ns),
            if m.end_ns == 0 {
                " (recording did not finish: from the events)"
            } else {
                ""
            }
        );
        if let Some((a, b)) = span {
            w!(o, "  events at   {a} .. {b} ns (trace clock)");
        }
        w!(
            o,
            "  events      {} ({:.2} bytes/event on disk)",
            group(r.event_count()),
            self.facts.bytes_per_event
        );
        for k in EventKind::ALL {
            let n = self.stats.events_by_kind[k as usize];
            if n > 0 {
                w!(o, "    {:<14}{:>15}", k.name(), group(n));
            }
        }
        match m.sampling() {
            Some(s) => w!(
                o,
                "  samples     {} on-CPU samples ({} at {} Hz per CPU, {} each); without kernel stack {}, without user stack {}; lost {}",
                group(s.samples),
                s.event,
                s.freq_hz,
                human_ns(s.period_ns),
                group(s.no_kstack),
                group(s.no_ustack),
                group(s.lost)
            ),
            None if maj >= 2 => w!(o, "  samples     none (sampling was off)"),
            None => w!(o, "  samples     none (format {maj}.{min} predates on-CPU samples)"),
        }
        w!(o, "  chunks      {}", r.chunks().len());
        w!(
            o,
            "  tables      {} tasks, {} stacks, {} symbols ({} unresolved), {} irq sources",
            group(t.tasks.len() as u64),
            group(t.stacks.len() as u64),
            group(t.symbols.len() as u64),
            group(self.facts.unresolved_symbols as u64),
            t.irq_sources.len()
        );
        if t.has_cgroups() {
            let c = cgroup_counts(t);
            w!(
                o,
                "  cgroups     {} groups, {} threads ({} moved between groups), {} ids unresolved",
                c.groups,
                group(c.threads),
                c.moved,
                c.unresolved
            );
        }
        let rs = &self.stats.reserved_stack_refs;
        w!(
            o,
            // References in the events, not waits: lazy mode puts a `skipped` placeholder
            // on every switch-out and attaches stacks later to waits above the threshold.
            "  stack refs  in events: {} skipped placeholders, {} failed, {} user-preempted, {} user-exiting, {} none",
            group(rs[StackId::SKIPPED.0 as usize]),
            group(rs[StackId::FAILED.0 as usize]),
            group(rs[StackId::USER_PREEMPTED.0 as usize]),
            group(rs[StackId::USER_EXITING.0 as usize]),
            group(rs[StackId::NONE.0 as usize])
        );
        // Recorder counters kept in the metadata's extra pairs (absent in older traces).
        // user_halves_in_place: halves reserved at full size in the ring buffer (their
        // per-CPU scratch was held by a preempted program); user_copies_skipped_busy: stack
        // copies not taken while the ring buffer was over half full (frame-pointer walk
        // kept). Both absent before session 11.
        let lazy: Vec<String> = chainrec_format::LAZY_USER_EXTRA_KEYS
            .iter()
            .chain(&["user_halves_in_place", "user_copies_skipped_busy"])
            .filter_map(|k| m.extra(k).map(|v| format!("{k} {v}")))
            .collect();
        if !lazy.is_empty() {
            w!(o, "  user stacks {}", lazy.join(", "));
        }
        // User symbols at record time, by reason (absent before format 2.1).
        if let Some(u) = m.extra("unresolved_user_frames") {
            w!(
                o,
                "  user frames unresolved at record time: {u}; {} mappings stored ({})",
                group(t.mappings.len() as u64),
                m.extra("mappings").unwrap_or("no mapping counts")
            );
        }
        if let Some(u) = m.extra("user_unwind") {
            w!(o, "  user unwind {u}");
        }
        let l = &m.lost;
        w!(o,
            "  lost        {} events (ring buffer full {}, malformed {}, out of order {}); stacks failed: kernel {}, user {}; stacks skipped (wait < threshold) {}; user stacks preempted {}; unresolved addresses {}",
            group(self.r.meta().lost.events()),
            group(l.ringbuf_full),
            group(l.malformed),
            group(l.out_of_order),
            group(l.kernel_stack_failed),
            group(l.user_stack_failed),
            group(l.stacks_skipped),
            group(l.user_stacks_preempted),
            group(l.unresolved_symbols)
        );
        let sb = r.section_bytes();
        w!(o,
            "  size        {} total: event chunks {}, tables {} ({} sections), metadata {}, index {}",
            human_bytes(r.file_len()),
            human_bytes(sb.chunks),
            human_bytes(sb.tables),
            sb.table_sections,
            human_bytes(sb.meta),
            human_bytes(sb.index)
        );
        match r.recovery() {
            None => w!(o, "  recovered   no (index and trailer intact)"),
            Some(rec) => w!(
                o,
                "  recovered   YES: {} ({} bytes after the last good section ignored)",
                rec.reason,
                rec.trailing_bytes
            ),
        }
        if self.verified {
            w!(o, "  verified    ok: every chunk decoded, every stack and irq-source reference resolved");
        }
        o
    }
}

/// `1234567` as `1,234,567`.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A duration in the unit that suits it (`12.3 us`, `1.234 s`).
pub fn human_ns(ns: u64) -> String {
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} us", ns as f64 / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.3} ms", ns as f64 / 1e6)
    } else {
        format!("{:.3} s", ns as f64 / 1e9)
    }
}

/// What the cgroup tables of a trace hold (`info`).
struct CgroupCounts {
    /// Distinct cgroups the threads were in.
    groups: usize,
    /// Threads with a known cgroup.
    threads: u64,
    /// Threads seen in more than one cgroup.
    moved: usize,
    /// Cgroup ids without a path.
    unresolved: usize,
}

fn cgroup_counts(t: &chainrec_format::Tables) -> CgroupCounts {
    let ids: std::collections::BTreeSet<u64> =
        t.task_cgroups.values().flatten().map(|&(_, c)| c).collect();
    CgroupCounts {
        groups: ids.len(),
        threads: t.task_cgroups.len() as u64,
        moved: t.task_cgroups.values().filter(|l| l.len() > 1).count(),
        unresolved: ids.iter().filter(|id| !t.cgroups.contains_key(id)).count(),
    }
}

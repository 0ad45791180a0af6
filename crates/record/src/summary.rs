//! What a recording reports when it ends: the summary lines `chainrec record` prints and
//! the `--summary-json` object. Kept beside [`RecordSummary`] so every field that is
//! counted is also shown (the binary only prints these lines).

use crate::options::{Fallback, RecordSummary};
use crate::output::FlightReport;
use chainrec_format::{human_bytes, EventKind};

impl RecordSummary {
    /// The summary lines `chainrec record` prints on stderr (each to be prefixed with
    /// `chainrec: `).
    pub fn report_lines(&self) -> Vec<String> {
        let summary = self;
        let mut out = Vec::new();
        let l = &summary.lost;
        let secs = summary.duration.as_secs_f64().max(1e-9);
        if let Some(flight) = &summary.flight {
            out.push(format!(
                "recorded {} events in {:.1} s ({:.0} events/s) into the flight recorder",
                summary.events,
                secs,
                summary.events as f64 / secs
            ));
            out.extend(flight.report_lines());
        } else if summary.files.len() > 1 {
            out.push(format!(
                "wrote {} files {} .. {} ({} events in {:.1} s, {}, {:.2} bytes/event)",
                summary.files.len(),
                summary.files[0].display(),
                summary.files[summary.files.len() - 1].display(),
                summary.events,
                secs,
                human_bytes(summary.bytes),
                summary.bytes as f64 / summary.events.max(1) as f64
            ));
        } else if summary.events > 0 {
            out.push(format!(
                "wrote {} ({} events in {:.1} s, {:.0} events/s, {}, {:.2} bytes/event)",
                summary.output.display(),
                summary.events,
                secs,
                summary.events as f64 / secs,
                human_bytes(summary.bytes),
                summary.bytes as f64 / summary.events as f64
            ));
        } else {
            out.push(format!(
                "wrote {} (no events in {:.1} s, {} bytes)",
                summary.output.display(),
                secs,
                summary.bytes
            ));
        }
        out.push(format!(
        "lost: {} ring buffer full, {} out of order, {} malformed; stacks: {} unique, {} kernel / {} user failed, \
         {} skipped (wait < threshold), {} user stacks dropped (user-mode preemption); {} symbols ({} unresolved)",
        l.ringbuf_full,
        l.out_of_order,
        l.malformed,
        summary.stacks,
        l.kernel_stack_failed,
        l.user_stack_failed,
        l.stacks_skipped,
        l.user_stacks_preempted,
        summary.symbols,
        l.unresolved_symbols
    ));
        let bpf_ns = if summary.bpf_run_cnt > 0 {
            format!(
                "{:.0} ns/program run",
                summary.bpf_run_time_ns as f64 / summary.bpf_run_cnt as f64
            )
        } else {
            "BPF run time n/a (sysctl kernel.bpf_stats_enabled=1)".to_string()
        };
        out.push(format!(
            "consumer CPU {:.2} s ({:.1} % of a core); {bpf_ns}; waking context: {}; \
         lazy user stacks: {}",
            summary.consumer_cpu.as_secs_f64(),
            100.0 * summary.consumer_cpu.as_secs_f64() / secs,
            summary.context_method,
            summary.user_stack_method
        ));
        let z = &summary.lazy_user;
        out.push(format!(
            "user stacks: {} of exiting tasks ([no user stack: exiting]); lazy user halves: \
         {} taken at a switch-out before the return to user space, {} due at exit, {} at exec, \
         {} served by a callback already queued",
            z.exiting, z.at_switch_out, z.at_exit, z.at_exec, z.served_by_pending
        ));
        out.push(format!(
            "softirq wakings: {}; method: {}",
            summary.softirq, summary.softirq_method
        ));
        if summary.user_stack_method.starts_with("task_work")
            || summary.user_stack_method.starts_with("sys_exit")
        {
            out.push(format!("lazy user stacks: {}", summary.user_stash));
        }
        if let Some(u) = &summary.user_unwind {
            out.push(format!("user stacks (CFI): {u}"));
        }
        for (name, ns, n) in &summary.bpf_profile {
            out.push(format!(
                "bpf profile: {name:<34} {n:>10} runs {:>8.0} ns/run {:>8.3} s",
                *ns as f64 / (*n).max(1) as f64,
                *ns as f64 * 1e-9
            ));
        }
        if let Some(m) = summary.user_walk_mismatches {
            out.push(format!(
                "user-walk shortcut: {} stacks, {m} disagreed with the kernel walker",
                summary.user_walks_shortcut
            ));
        }
        match &summary.sampling {
            Some(s) => out.push(format!(
                "on-CPU samples: {} ({} at {} Hz per CPU); without kernel stack {}, \
             without user stack {}; lost (ring buffer full) {}",
                s.samples, s.event, s.freq_hz, s.no_kstack, s.no_ustack, s.lost
            )),
            None => out.push("on-CPU samples: off (--no-samples)".to_string()),
        }
        if let Some(g) = &summary.goroutines {
            out.push(format!("goroutines: {g}"));
        }
        out.extend(summary.fallbacks.iter().map(Fallback::line));
        if summary.tasks_without_state > 0 {
            out.push(format!(
                "WARNING: {} tasks were recorded without per-task state (the preallocated map \
             was full): their names and lazy stacks may be missing",
                summary.tasks_without_state
            ));
        }
        if l.ringbuf_full > 0 {
            out.push(format!(
                "WARNING: {} events lost because the ring buffer was full; the chains \
             around them may be incomplete (raise --ringbuf-size, e.g. 128M, or lower --poll-ms)",
                l.ringbuf_full
            ));
        }
        out
    }

    /// The summary as one JSON object (`record --summary-json`).
    pub fn to_json(&self) -> serde_json::Value {
        let summary = self;
        let l = &summary.lost;
        serde_json::json!({
            "output": summary.output,
            "events": summary.events,
            "events_by_kind": (EventKind::named_counts(&summary.events_by_kind))
                .map(|(name, n)| (name.to_string(), n.into()))
                .collect::<serde_json::Map<String, serde_json::Value>>(),
            "bytes": summary.bytes,
            "duration_s": summary.duration.as_secs_f64(),
            "lost": {
                "ringbuf_full": l.ringbuf_full, "out_of_order": l.out_of_order, "malformed": l.malformed,
                "kernel_stack_failed": l.kernel_stack_failed, "user_stack_failed": l.user_stack_failed,
                "stacks_skipped": l.stacks_skipped, "user_stacks_preempted": l.user_stacks_preempted,
                "unresolved_symbols": l.unresolved_symbols,
            },
            "stacks": summary.stacks,
            "symbols": summary.symbols,
            "consumer_cpu_s": summary.consumer_cpu.as_secs_f64(),
            "bpf_run_time_ns": summary.bpf_run_time_ns,
            "bpf_run_cnt": summary.bpf_run_cnt,
            "context_method": summary.context_method,
            "context_fallbacks": summary.context_fallbacks,
            "tasks_without_state": summary.tasks_without_state,
            "softirq_method": summary.softirq_method,
            "softirq_wakings": {
                "task": summary.softirq.task, "irq_exit": summary.softirq.irq_exit,
                "ksoftirqd": summary.softirq.ksoftirqd, "untracked": summary.softirq.untracked,
                "stack_checked": summary.softirq.stack_checked,
                "stack_to_task": summary.softirq.stack_to_task,
                "stack_to_irq": summary.softirq.stack_to_irq,
            },
            "samples": summary.sampling.as_ref().map(|s| serde_json::json!({
                "event": s.event, "freq_hz": s.freq_hz, "period_ns": s.period_ns,
                "samples": s.samples, "no_kstack": s.no_kstack, "no_ustack": s.no_ustack,
                "lost": s.lost,
            })),
            "user_stack_method": summary.user_stack_method,
            "goroutines": summary.goroutines.as_ref().map(crate::golang::GoCounts::to_json),
            "fallbacks": summary.fallbacks.iter().map(|f| serde_json::json!({
                "feature": f.feature, "reason": f.reason, "instead": f.instead, "cost": f.cost,
            })).collect::<Vec<_>>(),
            "user_stash": {
                "taken": summary.user_stash.taken, "used": summary.user_stash.used,
                "missed": summary.user_stash.missed,
            },
            "bpf_profile": summary.bpf_profile.iter()
                .map(|(name, ns, n)| serde_json::json!({"section": name, "ns": ns, "runs": n}))
                .collect::<Vec<_>>(),
            "user_walks_shortcut": summary.user_walks_shortcut,
            "user_unwind": summary.user_unwind.as_ref().map(|u| serde_json::json!({
                "unwound": u.unwound, "complete": u.complete,
                "incomplete": crate::unwind::IncompleteReason::ALL.iter().zip(u.incomplete)
                    .map(|(r, n)| (r.key().to_string(), serde_json::Value::from(n)))
                    .collect::<serde_json::Map<String, serde_json::Value>>(),
                "objects": u.objects, "objects_failed": u.objects_failed,
                "cfi_bytes": u.cfi_bytes,
                "windows": { "read": u.window_read, "complete": u.window_complete },
                "live_stack": { "tried": u.live_tried, "used": u.live_used },
                "python": {
                    "processes": u.python_procs, "unsupported": u.python_unsupported,
                    "frames": u.python_frames, "stacks_without_frames": u.python_missing,
                },
                "java": {
                    "processes": u.java_procs, "unsupported": u.java_unsupported,
                    "unsupported_why": u.java_unsupported_why,
                    "interpreted_frames_named": u.java_frames,
                    "interpreted_frames_not_named": u.java_missing,
                },
            })),
            "lazy_user": {
                "user_stacks_exiting": summary.lazy_user.exiting,
                "user_halves_at_switch_out": summary.lazy_user.at_switch_out,
                "user_halves_at_exit": summary.lazy_user.at_exit,
                "user_halves_at_exec": summary.lazy_user.at_exec,
                "user_halves_served_by_pending": summary.lazy_user.served_by_pending,
            },
            "files": summary.files,
            "flight": summary.flight.as_ref().map(|f| serde_json::json!({
                "dumps": f.dumps.iter().map(|d| serde_json::json!({
                    "path": d.path, "events": d.events, "bytes": d.bytes,
                    "trigger": {
                        "kind": d.trigger.kind.name(), "rule": d.trigger.rule, "tid": d.trigger.tid,
                        "tgid": d.trigger.tgid, "comm": d.trigger.comm,
                        "start_ns": d.trigger.start_ns, "end_ns": d.trigger.end_ns,
                    },
                })).collect::<Vec<_>>(),
                "triggers": f.triggers, "in_pending_dump": f.in_pending_dump,
                "skipped_interval": f.skipped_interval, "skipped_max_dumps": f.skipped_max_dumps,
                "skipped_quota": f.skipped_quota, "failed": f.failed, "errors": f.errors,
                "filtered_out": f.filtered_out, "peak_memory_bytes": f.peak_memory_bytes,
                "evicted_chunks": f.ring.evicted_chunks, "evicted_events": f.ring.evicted_events,
                "evicted_pinned_chunks": f.ring.evicted_pinned_chunks,
            })),
        })
    }
}

impl FlightReport {
    /// The flight recorder's summary lines (each to be prefixed with `chainrec: `).
    pub fn report_lines(&self) -> Vec<String> {
        let r = self;
        let mut out = Vec::new();
        for d in &r.dumps {
            let t = &d.trigger;
            let what = match t.tid {
                0 => t.rule.clone(),
                tid => format!(
                    "{} {} ({tid}) waited {:.1} ms",
                    t.rule,
                    t.comm,
                    t.duration_ns() as f64 / 1e6
                ),
            };
            out.push(format!(
                "flight dump {} ({} events, {}): {what}",
                d.path.display(),
                d.events,
                human_bytes(d.bytes)
            ));
        }
        let skipped = r.skipped_interval + r.skipped_max_dumps + r.skipped_quota;
        out.push(format!(
            "flight recorder: {} triggers, {} dumps; {} inside a pending dump, {} skipped \
         ({} under --min-interval, {} over --max-dumps, {} over --dump-quota); {} failed; \
         {} long waits filtered out; peak memory {}; {} chunks ({} events) aged out",
            r.triggers,
            r.dumps.len(),
            r.in_pending_dump,
            skipped,
            r.skipped_interval,
            r.skipped_max_dumps,
            r.skipped_quota,
            r.failed,
            r.filtered_out,
            human_bytes(r.peak_memory_bytes),
            r.ring.evicted_chunks,
            r.ring.evicted_events,
        ));
        if r.ring.evicted_pinned_chunks > 0 {
            out.push(format!(
                "warning: --flight-size dropped {} chunks a pending dump wanted: those \
             dumps start later than the window (raise --flight-size)",
                r.ring.evicted_pinned_chunks
            ));
        }
        for e in &r.errors {
            out.push(format!("error: flight dump failed: {e}"));
        }
        out
    }
}

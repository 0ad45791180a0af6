//! `chainrec record` and `chainrec workload` (fronts chainrec-record).
use anyhow::{bail, Context, Result};
use chainrec_format::StackMode;
use chainrec_record::workload::{self, WorkloadOptions};
use chainrec_record::{RecordOptions, StopCondition};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const RECORD_EXAMPLES: &str = "\
Examples:
  chainrec record -o trace.zst --duration 10        whole system for 10 s
  chainrec record -o trace.zst                      whole system until Ctrl-C
  chainrec record -o trace.zst -- make -j2          until the command exits
  chainrec record -o trace.zst -p 1234 -p 5678      those processes and the tasks that wake them
  chainrec record -o trace.zst --stacks eager       stacks on every switch and waking (costly)
  chainrec record -o trace.zst --stack-threshold 1ms  stacks only for waits longer than 1 ms

Needs root, or CAP_BPF + CAP_PERFMON. The trace is written with mode 0600; Ctrl-C,
SIGTERM or the end of --duration finish the file; a killed recorder leaves a file
readable up to its last flush (at most ~0.5 s lost). Lost events are never silent:
they are counted in the file and in the summary.";

/// Stack capture policy.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum StacksArg {
    /// Stacks only for waits longer than --stack-threshold (default; cheap).
    Lazy,
    /// Kernel and user stacks on every switch-out and waking (expensive).
    Eager,
    /// No stacks at all.
    None,
}

/// Arguments of `chainrec record`.
#[derive(clap::Args)]
#[command(after_help = RECORD_EXAMPLES)]
pub struct Args {
    /// Output trace file.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Stop after this many seconds (default: until Ctrl-C, or until COMMAND exits).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Record only these processes and, transitively, the tasks that wake them (repeatable).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Stack policy.
    #[arg(long, value_enum, default_value = "lazy")]
    pub stacks: StacksArg,
    /// Lazy mode: waits shorter than this get no stacks (e.g. 100us, 1ms).
    #[arg(long, value_name = "DURATION", default_value = "100us")]
    pub stack_threshold: String,
    /// Kernel stacks only (no user frame-pointer walks).
    #[arg(long)]
    pub no_user_stacks: bool,
    /// Lazy mode: take user stacks with the sys_exit tracepoint even when the kernel has the
    /// BPF task_work kfuncs (the fallback path; slower on syscall-heavy loads).
    #[arg(long)]
    pub user_stacks_at_sys_exit: bool,
    /// Diagnosis: let the kernel also walk every user stack that the frame-pointer shortcut
    /// finished, and count disagreements in the trace metadata (`user_walk_shortcut`).
    #[arg(long, hide = true)]
    pub verify_user_walk: bool,
    /// BPF ring buffer size, 4K..=2G (e.g. 16M, 64M); a size that is not a power of two
    /// is rounded up to the next one (33M -> 64M), with a note.
    #[arg(long, value_name = "SIZE", default_value = "32M")]
    pub ringbuf_size: String,
    /// How often the consumer drains the ring buffer, in ms.
    #[arg(long, value_name = "MS", default_value_t = 20)]
    pub poll_ms: u64,
    /// No live status line.
    #[arg(short, long)]
    pub quiet: bool,
    /// Write the summary as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
    /// Command to run while recording; recording stops when it exits.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Arguments of `chainrec workload`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  chainrec workload --duration 5 --json workload.json\n\n\
Threads cr-timer (sleeps one period, writes pipe 1), cr-relay (pipe 1 -> pipe 2) and\n\
cr-sink (reads pipe 2). Expected chain: cr-sink <- cr-relay <- cr-timer <- [hardirq: timer]."
)]
pub struct WorkloadArgs {
    /// Run time in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub duration: f64,
    /// Timer period in microseconds.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub period_us: u64,
    /// Write the workload's own report (tids, blocked times) as JSON here ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn secs(s: f64, what: &str) -> Result<Duration> {
    if !s.is_finite() || s <= 0.0 || s > 1e7 {
        bail!("{what} must be a positive number of seconds, got {s}");
    }
    Ok(Duration::from_secs_f64(s))
}

/// `chainrec record`.
pub fn run(a: Args) -> Result<()> {
    let threshold = chainrec_record::parse_duration_ns(&a.stack_threshold)?;
    let ringbuf = chainrec_record::parse_size(&a.ringbuf_size)?;
    // (Sizes out of range are refused by the recorder.)
    if !ringbuf.is_power_of_two() && (4096..=1 << 31).contains(&ringbuf) {
        eprintln!(
            "chainrec: note: --ringbuf-size {} is not a power of two; using {} bytes ({} MiB)",
            a.ringbuf_size,
            ringbuf.next_power_of_two(),
            ringbuf.next_power_of_two() >> 20
        );
    }
    // Fail now, not after the whole recording, if the summary cannot be written there.
    if let Some(p) = &a.summary_json {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => std::path::Path::new("."),
        };
        if p.is_dir() {
            bail!("--summary-json {}: is a directory", p.display());
        }
        if !dir.is_dir() {
            bail!(
                "--summary-json {}: directory {} does not exist",
                p.display(),
                dir.display()
            );
        }
    }
    let duration = a.duration.map(|d| secs(d, "--duration")).transpose()?;
    if a.poll_ms == 0 || a.poll_ms > 1000 {
        bail!("--poll-ms must be in 1..=1000");
    }
    let opts = RecordOptions {
        output: a.output.clone(),
        stack_mode: match a.stacks {
            StacksArg::Lazy => StackMode::Lazy,
            StacksArg::Eager => StackMode::Eager,
            StacksArg::None => StackMode::None,
        },
        stack_threshold_ns: threshold,
        ringbuf_bytes: ringbuf,
        pids: a.pids.clone(),
        poll_period: Duration::from_millis(a.poll_ms),
        status_line: !a.quiet,
        command_line: std::env::args().collect(),
        user_stacks: !a.no_user_stacks,
        force_context_fallback: false,
        force_sys_exit_user_stacks: a.user_stacks_at_sys_exit,
        no_user_walk_shortcut: false,
        verify_user_walk_shortcut: a.verify_user_walk,
    };
    let flag = chainrec_record::install_stop_signals();
    let started = Arc::new(AtomicBool::new(false));
    let stop = StopCondition {
        duration,
        flag: Some(flag.clone()),
        started: Some(started.clone()),
    };
    let handle = std::thread::Builder::new()
        .name("chainrec-consumer".into())
        .spawn(move || chainrec_record::record(&opts, stop))
        .context("cannot start the recorder thread")?;

    let mut child_status = None;
    if !a.command.is_empty() {
        while !started.load(Ordering::SeqCst) {
            if handle.is_finished() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if started.load(Ordering::SeqCst) {
            let spawned = std::process::Command::new(&a.command[0])
                .args(&a.command[1..])
                .spawn();
            match spawned {
                Ok(mut child) => {
                    let st = child.wait().context("waiting for the command")?;
                    child_status = Some(st);
                }
                Err(e) => {
                    flag.store(true, Ordering::SeqCst);
                    let _ = handle.join();
                    bail!("cannot run `{}`: {e}", a.command[0]);
                }
            }
            flag.store(true, Ordering::SeqCst);
        }
    }
    let summary = match handle.join() {
        Ok(r) => r?,
        Err(_) => bail!("recorder thread panicked"),
    };

    let l = &summary.lost;
    let secs = summary.duration.as_secs_f64().max(1e-9);
    eprintln!(
        "chainrec: wrote {} ({} events in {:.1} s, {:.0} events/s, {:.1} MiB, {:.2} bytes/event)",
        summary.output.display(),
        summary.events,
        secs,
        summary.events as f64 / secs,
        summary.bytes as f64 / (1 << 20) as f64,
        summary.bytes as f64 / summary.events.max(1) as f64
    );
    eprintln!(
        "chainrec: lost: {} ring buffer full, {} out of order, {} malformed; stacks: {} unique, {} kernel / {} user failed, \
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
    );
    let bpf_ns = if summary.bpf_run_cnt > 0 {
        format!(
            "{:.0} ns/program run",
            summary.bpf_run_time_ns as f64 / summary.bpf_run_cnt as f64
        )
    } else {
        "BPF run time n/a (sysctl kernel.bpf_stats_enabled=1)".to_string()
    };
    eprintln!(
        "chainrec: consumer CPU {:.2} s ({:.1} % of a core); {bpf_ns}; waking context: {}; \
         lazy user stacks: {}",
        summary.consumer_cpu.as_secs_f64(),
        100.0 * summary.consumer_cpu.as_secs_f64() / secs,
        summary.context_method,
        summary.user_stack_method
    );
    if let Some(m) = summary.user_walk_mismatches {
        eprintln!(
            "chainrec: user-walk shortcut: {} stacks, {m} disagreed with the kernel walker",
            summary.user_walks_shortcut
        );
    }
    if let Some(path) = &a.summary_json {
        let j = serde_json::json!({
            "output": summary.output,
            "events": summary.events,
            "events_by_kind": summary.events_by_kind,
            "bytes": summary.bytes,
            "duration_s": secs,
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
            "user_stack_method": summary.user_stack_method,
            "user_walks_shortcut": summary.user_walks_shortcut,
        });
        std::fs::write(path, serde_json::to_string_pretty(&j)? + "\n")
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(st) = child_status {
        if !st.success() {
            bail!("command `{}` exited with {st}", a.command.join(" "));
        }
    }
    Ok(())
}

/// `chainrec workload`.
pub fn run_workload(a: WorkloadArgs) -> Result<()> {
    if a.period_us == 0 || a.period_us > 10_000_000 {
        bail!("--period-us must be in 1..=10000000");
    }
    let opts = WorkloadOptions {
        duration: secs(a.duration, "--duration")?,
        period: Duration::from_micros(a.period_us),
    };
    let rep = workload::run_with(&opts, |t, r, s| {
        eprintln!(
            "chainrec workload: pid {} cr-timer {t} cr-relay {r} cr-sink {s}",
            std::process::id()
        );
    })
    .context("workload failed")?;
    let j = serde_json::to_string_pretty(&rep)? + "\n";
    match &a.json {
        Some(p) if p.as_os_str() == "-" => super::report::write_stdout(&j)?,
        Some(p) => std::fs::write(p, j).with_context(|| format!("writing {}", p.display()))?,
        None => eprintln!(
            "chainrec workload: {} messages; blocked: timer {:.3} s, relay {:.3} s, sink {:.3} s",
            rep.messages,
            rep.timer.blocked_ns as f64 / 1e9,
            rep.relay.blocked_ns as f64 / 1e9,
            rep.sink.blocked_ns as f64 / 1e9
        ),
    }
    Ok(())
}

//! `chainrec record` and `chainrec workload` (fronts chainrec-record).
use crate::signals;
use anyhow::{bail, Context, Result};
use chainrec_format::StackMode;
use chainrec_record::command::{
    describe, exit_code, prepare, supervise, wait_to_start, StdoutMoved, Supervision,
};
use chainrec_record::output::OutputMode;
use chainrec_record::request::RecordRequest;
use chainrec_record::workload::{self, WorkloadOptions};
use chainrec_record::{RecordError, RecordOptions, RecordSummary, Recording};
use std::path::{Path, PathBuf};

const RECORD_EXAMPLES: &str = "\
Examples:
  # whole system for 10 s
  chainrec record -o trace.zst --duration 10
  # whole system until Ctrl-C
  chainrec record -o trace.zst
  # until the command exits
  chainrec record -o trace.zst -- make -j2
  # those processes and the tasks that wake them
  chainrec record -o trace.zst -p 1234 -p 5678
  # stacks on every switch and waking (costly)
  chainrec record -o trace.zst --stacks eager
  # stacks only for waits longer than 1 ms
  chainrec record -o trace.zst --stack-threshold 1ms
  # on-CPU samples at 997 Hz per CPU (default 99)
  chainrec record -o trace.zst --sample-freq 997
  # scheduler events only
  chainrec record -o trace.zst --no-samples
  # keep the last 30 s in memory; dump them (and 2 s more) when a postgres
  # thread waits over 50 ms; `kill -USR1` dumps now; Ctrl-C dumps the window
  chainrec record -o /var/tmp/stall --flight 30s --trigger 'wait>50ms' \\
      --comm '^postgres'
  # numbered files (trace.0000.zst, ...) of ~1 GiB
  chainrec record -o trace.zst --rotate 1G

Needs root, or CAP_BPF + CAP_PERFMON. The trace is written with mode 0600;
Ctrl-C, SIGTERM or the end of --duration finish the file; a killed recorder
leaves a file readable up to its last flush (at most ~0.5 s lost). Lost events
are never silent: they are counted in the file and in the summary.

With COMMAND: it starts once the programs are attached (never after a stop
request); SIGTERM sent to chainrec from outside its process group is passed on
to the command; SIGINT is not (the command gets Ctrl-C from the terminal
itself); when --duration ends first, the recording stops but chainrec waits for
COMMAND to exit; if the recorder fails, the error is printed at once and COMMAND
gets SIGTERM. Exit status: COMMAND's (128+N when it died of signal N; 0 when it
died of the SIGINT/SIGTERM that stopped the recording), 1 when recording failed.";

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

/// How user stacks are unwound (`--user-unwind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UserUnwindArg {
    /// Stack copies unwound with the objects' CFI (frame pointers where there is none).
    Cfi,
    /// Frame pointers only.
    Fp,
}

/// Perf event that drives the on-CPU samples.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SampleEventArg {
    /// Software CPU clock: every sample is 1/freq s of CPU time (default; works in VMs).
    CpuClock,
    /// Hardware cycles (needs a PMU; not in most VMs).
    Cycles,
}

/// Arguments of `chainrec record`.
#[derive(clap::Args)]
#[command(after_help = RECORD_EXAMPLES)]
pub struct Args {
    /// Output trace file.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Stop after this many seconds (default: until Ctrl-C, or until COMMAND exits; with
    /// COMMAND, chainrec still waits for it to exit).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<f64>,
    /// Record only these processes and, transitively, the tasks that wake them (repeatable).
    #[arg(short = 'p', long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Stack policy.
    #[arg(long, value_enum, default_value = "lazy")]
    pub stacks: StacksArg,
    /// Lazy mode: waits shorter than this get no stacks (e.g. 100us, 1ms) [default: 100us].
    #[arg(long, value_name = "DURATION")]
    pub stack_threshold: Option<String>,
    /// Kernel stacks only (no user frame-pointer walks).
    #[arg(long, conflicts_with = "user_stacks_at_sys_exit")]
    pub no_user_stacks: bool,
    /// How user stacks are unwound: `cfi` copies up to 16 KiB of the user stack wherever a
    /// user stack is taken and unwinds it in the recorder with the objects' .eh_frame /
    /// .debug_frame (whole stacks without frame pointers); `fp` walks frame pointers only
    /// (cheaper; stops at the first frame of code built without them).
    #[arg(long, value_enum, default_value = "cfi")]
    pub user_unwind: UserUnwindArg,
    /// Lazy mode: take user stacks with the sys_exit tracepoint even when the kernel has the
    /// BPF task_work kfuncs (the fallback path; slower on syscall-heavy loads).
    #[arg(long)]
    pub user_stacks_at_sys_exit: bool,
    /// Diagnosis: let the kernel also walk every user stack that the frame-pointer shortcut
    /// finished, and count disagreements in the trace metadata (`user_walk_shortcut`).
    #[arg(long, hide = true)]
    pub verify_user_walk: bool,
    /// Diagnosis and A/B: do not tell softirqs run by a task (local_bh_enable) from those at
    /// an interrupt's exit; every softirq waking is then metal.
    #[arg(long, hide = true)]
    pub no_softirq_tracking: bool,
    /// Diagnosis: time the sections of the BPF programs (two clock reads each) and print
    /// ns per run of each (also in --summary-json, `bpf_profile`).
    #[arg(long, hide = true)]
    pub profile_bpf: bool,
    /// A/B: never take a lazy user stack at the switch-out on a prediction (every long
    /// wait's user stack then comes through the task_work path).
    #[arg(long, hide = true)]
    pub no_switch_out_user_stacks: bool,
    /// A/B: do not record threads' cgroups (what tracking them costs).
    #[arg(long, hide = true)]
    pub no_cgroups: bool,
    /// On-CPU samples per second per CPU, with kernel and user stacks (`chainrec oncpu`,
    /// `hotcold`, and the `[on cpu]` frames of `chains`).
    #[arg(
        long,
        value_name = "HZ",
        default_value_t = 99,
        conflicts_with = "no_samples"
    )]
    pub sample_freq: u64,
    /// Event that drives the samples.
    #[arg(
        long,
        value_enum,
        default_value = "cpu-clock",
        conflicts_with = "no_samples"
    )]
    pub sample_event: SampleEventArg,
    /// No on-CPU samples (scheduler events only).
    #[arg(long)]
    pub no_samples: bool,
    /// Record goroutine parks, readies and executes of this Go binary from the start
    /// (repeatable; Go 1.19 and 1.24, amd64): uprobes on runtime.gopark, runtime.ready and
    /// runtime.netpollready, each with the goroutine's stack, on runtime.execute (no
    /// stack: when a readied goroutine got a P) and on the world's stop and start
    /// (runtime.stopTheWorldWithSema, runtime.startTheWorldWithSema; no stack: a GC
    /// stop-the-world), in the trace's goroutine sections
    /// (`chainrec script --goroutines`).
    /// Without it, the Go binaries of the processes the recording sees are probed once
    /// found (a few ms after they start), unless --no-go.
    #[arg(long, value_name = "PATH")]
    pub go: Vec<PathBuf>,
    /// Do not probe Go binaries found in the recording (only those named with --go).
    #[arg(long)]
    pub no_go: bool,
    /// Goroutine probe hits per second (parks, readies, executes, per binary) above which that
    /// binary's probes are detached: its processes then get thread-level chains only
    /// (counted in the summary, marked in the trace). 0: no cap.
    #[arg(long, value_name = "HITS", default_value_t = chainrec_record::golang::DEFAULT_MAX_RATE)]
    pub go_max_rate: u64,
    /// BPF ring buffer size, 4K..=2G (e.g. 32M, 256M); a size that is not a power of two
    /// is rounded up to the next one (33M -> 64M), with a note. While more than half of it
    /// waits for the consumer, user stacks are taken without their copy (frame-pointer walk
    /// only, counted) so that events are not lost.
    #[arg(long, value_name = "SIZE", default_value = "64M")]
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
    /// Flight recorder and rotation.
    #[command(flatten)]
    pub flight: super::flight::FlightArgs,
    /// Command to run while recording; recording stops when it exits.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Arguments of `chainrec workload`.
#[derive(clap::Args)]
#[command(
    after_help = "Example:\n  chainrec workload --duration 5 --json workload.json\n\n\
Threads cr-timer (sleeps one period, writes pipe 1), cr-relay (pipe 1 -> pipe 2)\n\
and cr-sink (reads pipe 2).\n\
Expected chain: cr-sink <- cr-relay <- cr-timer <- [hardirq: timer]."
)]
pub struct WorkloadArgs {
    /// Run time in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    pub duration: f64,
    /// Timer period in microseconds.
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub period_us: u64,
    /// Also stall: at 40 % of the run, `cr-holder` holds a mutex across a sleep of MS while
    /// `cr-victim` blocks on it (a flight-recorder trigger target).
    #[arg(long, value_name = "MS")]
    pub stall_ms: Option<u64>,
    /// Write the workload's own report (tids, blocked times) as JSON here ("-" = stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
}

fn print_summary(summary: &RecordSummary) {
    for line in summary.report_lines() {
        say!("chainrec: {line}");
    }
}

fn write_summary_json(summary: &RecordSummary, path: &Path) -> Result<()> {
    std::fs::write(
        path,
        serde_json::to_string_pretty(&summary.to_json())? + "\n",
    )
    .with_context(|| format!("writing {}", path.display()))
}

/// The recording ended: the summary file first (a closed stderr must not cost it), then
/// the summary on stderr.
fn finish_recording(summary: &RecordSummary, json: Option<&Path>) -> Result<()> {
    let r = json.map(|p| write_summary_json(summary, p)).transpose();
    print_summary(summary);
    r.map(|_| ())
}

/// A recorder error, with a hint when a partial trace was left behind: only when
/// recording had `started` (else the file there, if any, is an older one or empty).
fn recorder_error(e: RecordError, output: &Path, started: bool) -> anyhow::Error {
    if matches!(e, RecordError::Stopped { .. }) {
        return e.into();
    }
    let note = (started && matches!(e, RecordError::Format(_)))
        .then(|| chainrec_record::partial_trace_note(output))
        .flatten();
    let err = anyhow::Error::new(e).context("recording failed");
    match note {
        Some(n) => anyhow::anyhow!("{err:#}; {n}"),
        None => err,
    }
}

/// `chainrec record`.
pub fn run(a: Args) -> Result<()> {
    // Everything that can be checked is checked before the output is touched.
    let stack_mode = match a.stacks {
        StacksArg::Lazy => StackMode::Lazy,
        StacksArg::Eager => StackMode::Eager,
        StacksArg::None => StackMode::None,
    };
    let mut checked = RecordRequest {
        output: &a.output,
        stack_mode,
        stack_threshold: a.stack_threshold.as_deref(),
        user_stacks_at_sys_exit: a.user_stacks_at_sys_exit,
        ringbuf_size: &a.ringbuf_size,
        duration_secs: a.duration,
        poll_ms: a.poll_ms,
        summary_json: a.summary_json.as_deref(),
        pids: &a.pids,
        command: a.command.first().map(String::as_str),
        flight: &a.flight.request(),
    }
    .check(|note| say!("chainrec: note: {note}"))?;
    // Before anything is created: a --go binary that cannot be probed is refused.
    for path in &a.go {
        chainrec_record::golang::GoBinary::inspect(path)
            .map_err(|e| anyhow::anyhow!("--go {}: {e}", path.display()))?;
    }
    if let OutputMode::Flight(plan) = &mut checked.options.output_mode {
        plan.dump_request = Some(signals::dump_on_usr1());
    }
    let opts = RecordOptions {
        status_line: !a.quiet,
        command_line: std::env::args().collect(),
        user_stacks: !a.no_user_stacks,
        verify_user_walk_shortcut: a.verify_user_walk,
        no_softirq_tracking: a.no_softirq_tracking,
        profile_bpf: a.profile_bpf,
        no_user_stash: a.no_switch_out_user_stacks,
        user_stack_copy_bytes: match a.user_unwind {
            UserUnwindArg::Cfi => chainrec_record::DEFAULT_USER_STACK_COPY,
            UserUnwindArg::Fp => 0,
        },
        no_cgroups: a.no_cgroups,
        go: chainrec_record::golang::GoOptions {
            auto: !a.no_go,
            binaries: a.go.clone(),
            max_rate: a.go_max_rate,
        },
        samples: (!a.no_samples).then_some(chainrec_record::SampleConfig {
            freq_hz: a.sample_freq,
            event: match a.sample_event {
                SampleEventArg::CpuClock => chainrec_record::SampleEvent::CpuClock,
                SampleEventArg::Cycles => chainrec_record::SampleEvent::Cycles,
            },
        }),
        ..checked.options
    };
    let flag = signals::stop_on_int_and_term();
    let handle = Recording::start(opts, checked.duration, flag.clone())
        .map_err(|e| recorder_error(e, &a.output, false))?;
    let join = |r: Recording| {
        let started = r.started();
        r.join().map_err(|e| recorder_error(e, &a.output, started))
    };

    if a.command.is_empty() {
        let summary = join(handle)?;
        return finish_recording(&summary, a.summary_json.as_deref());
    }
    let cmd = a.command.join(" ");
    let Some(seen) = wait_to_start(&handle, &flag, signals::stop_signals) else {
        let summary = join(handle)?;
        finish_recording(&summary, a.summary_json.as_deref())?;
        bail!("stopped before `{cmd}` was started (the command did not run)");
    };
    let (mut command, moved) = prepare(&a.command, &a.output);
    let o = a.output.display();
    match moved {
        None => {}
        Some(StdoutMoved::ToStderr) => say!("chainrec: note: the trace goes to stdout (-o {o}); `{cmd}` writes its output to stderr"),
        Some(StdoutMoved::Discarded(e)) => say!("chainrec: note: the trace goes to stdout (-o {o}) and stderr is unusable ({e}); `{cmd}`'s output is discarded"),
    }
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            handle.stop();
            let r = join(handle);
            if let Ok(s) = &r {
                let _ = finish_recording(s, a.summary_json.as_deref());
            }
            bail!("cannot run `{}`: {e}", a.command[0]);
        }
    };
    let pid = child.id();

    // Poll the command, the recorder and the stop signals together.
    let mut failed: Option<(anyhow::Error, bool)> = None;
    let status = supervise(
        child,
        handle,
        &flag,
        seen,
        signals::stop_signals,
        |event| match event {
            Supervision::RecordingEnded {
                result,
                command_running,
            } => match result.map_err(|e| recorder_error(e, &a.output, true)) {
                Ok(summary) => {
                    if let Err(e) = finish_recording(&summary, a.summary_json.as_deref()) {
                        failed.get_or_insert((e, false));
                    }
                }
                Err(e) => {
                    // At once, not when the command exits; and the command is not recorded
                    // any more, so it is stopped.
                    say!("chainrec: error: {e:#}");
                    if command_running {
                        say!("chainrec: stopping `{cmd}` (pid {pid}) with SIGTERM");
                    }
                    failed = Some((e, true));
                }
            },
            Supervision::WaitFailed(e) => {
                failed.get_or_insert((anyhow::anyhow!("waiting for `{cmd}`: {e}"), false));
            }
            Supervision::StillStopping { waited, progress } => {
                say!(
                    "chainrec: still finishing the recording {:.0} s after the stop: the recording thread is {progress}",
                    waited.as_secs_f64()
                );
            }
            Supervision::StillRunning { pid, signals_seen } => {
                say!(
                    "chainrec: recording finished; waiting for `{cmd}` (pid {pid}) to exit{}",
                    if signals_seen {
                        ""
                    } else {
                        " (Ctrl-C, or SIGTERM to chainrec from outside its process group, \
                     stops it)"
                    }
                );
            }
        },
    );
    if let Some((e, printed)) = failed {
        if !printed {
            say!("chainrec: error: {e:#}");
        }
        if let Some(st) = status {
            say!("chainrec: `{cmd}` {}", describe(st));
        }
        return Err(super::Exit(1).into());
    }
    let st = status.expect("without a wait failure, the command's status");
    let code = exit_code(st, signals::stop_signals());
    if code != 0 {
        say!("chainrec: `{cmd}` {}; exiting with {code}", describe(st));
        return Err(super::Exit(code).into());
    }
    Ok(())
}

/// `chainrec workload`.
pub fn run_workload(a: WorkloadArgs) -> Result<()> {
    let opts = WorkloadOptions::new(a.duration, a.period_us, a.stall_ms)?;
    // Fail now, not after the whole run, if the report cannot be written there.
    if let Some(p) = a.json.as_deref().filter(|p| p.as_os_str() != "-") {
        chainrec_record::check_output(p).context("--json")?;
    }
    let rep = workload::run_with(&opts, |t, r, s| {
        say!(
            "chainrec workload: pid {} cr-timer {t} cr-relay {r} cr-sink {s}",
            std::process::id()
        );
    })
    .context("workload failed")?;
    let j = serde_json::to_string_pretty(&rep)? + "\n";
    match &a.json {
        Some(p) if p.as_os_str() == "-" => super::write_stdout(&j)?,
        Some(p) => std::fs::write(p, j).with_context(|| format!("writing {}", p.display()))?,
        None => say!(
            "chainrec workload: {} messages; blocked: timer {:.3} s, relay {:.3} s, sink {:.3} s",
            rep.messages,
            rep.timer.blocked_ns as f64 / 1e9,
            rep.relay.blocked_ns as f64 / 1e9,
            rep.sink.blocked_ns as f64 / 1e9
        ),
    }
    Ok(())
}

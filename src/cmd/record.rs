//! `chainrec record` and `chainrec workload` (fronts chainrec-record).
use anyhow::{bail, Context, Result};
use chainrec_format::StackMode;
use chainrec_record::command::{exit_code, supervise, Supervision};
use chainrec_record::workload::{self, WorkloadOptions};
use chainrec_record::{RecordError, RecordOptions, RecordSummary, Recording, StopSignals};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

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
  # on-CPU samples at 99 Hz per CPU (default 49)
  chainrec record -o trace.zst --sample-freq 99
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
    /// On-CPU samples per second per CPU, with kernel and user stacks (`chainrec oncpu`,
    /// `hotcold`, and the `[on cpu]` frames of `chains`).
    #[arg(
        long,
        value_name = "HZ",
        default_value_t = 49,
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

// Signal handling belongs to the binary: the library only takes a stop flag and reads
// the counts through `supervise`'s callback.
static SIGNAL_STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL_COUNT: AtomicU32 = AtomicU32::new(0);
static SIGNAL_LAST: AtomicI32 = AtomicI32::new(0);
static SIGNAL_FROM_TTY: AtomicBool = AtomicBool::new(false);
static SIGNAL_TERMS: AtomicU32 = AtomicU32::new(0);
static SIGNAL_TERM_SENDER: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    // SI_KERNEL: generated by the kernel, e.g. by the terminal for Ctrl-C (sent to the whole
    // foreground process group); kill(2) gives SI_USER, sigqueue SI_QUEUE, tgkill SI_TKILL
    // (all <= 0: sent by a process, whose pid is in si_pid).
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler (checked for
    // null anyway); si_pid is read only for the codes that set it (sent by a process).
    let (code, sender) = unsafe {
        match info.as_ref() {
            Some(i) if i.si_code <= 0 => (i.si_code, i.si_pid()),
            Some(i) => (i.si_code, 0),
            None => (libc::SI_USER, 0),
        }
    };
    let from_tty = code == libc::SI_KERNEL;
    SIGNAL_LAST.store(sig, Ordering::SeqCst);
    SIGNAL_FROM_TTY.store(from_tty, Ordering::SeqCst);
    if sig == libc::SIGTERM && !from_tty {
        SIGNAL_TERM_SENDER.store(sender, Ordering::SeqCst);
        SIGNAL_TERMS.fetch_add(1, Ordering::SeqCst);
    }
    SIGNAL_COUNT.fetch_add(1, Ordering::SeqCst);
    SIGNAL_STOP.store(true, Ordering::SeqCst);
}

/// The stop signals received so far (read directly, without the stop flag's delay).
fn stop_signals() -> StopSignals {
    let count = SIGNAL_COUNT.load(Ordering::SeqCst);
    StopSignals {
        count,
        last: SIGNAL_LAST.load(Ordering::SeqCst),
        last_from_terminal: SIGNAL_FROM_TTY.load(Ordering::SeqCst),
        terms: SIGNAL_TERMS.load(Ordering::SeqCst),
        term_sender: SIGNAL_TERM_SENDER.load(Ordering::SeqCst),
    }
}

/// Install SIGINT/SIGTERM handlers that request a clean stop; returns the flag to pass
/// in `StopCondition::flag`. (A second signal still stops cleanly; SIGKILL leaves a
/// file readable up to its last flush.) [`stop_signals`] tells which signals arrived.
fn install_stop_signals() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    // SAFETY: on_signal only stores to atomics, which is async-signal-safe; the
    // sigaction struct is fully initialized.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        sa.sa_flags = libc::SA_RESTART | libc::SA_SIGINFO;
        libc::sigaction(libc::SIGINT, &sa, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &sa, std::ptr::null_mut());
    }
    let f = flag.clone();
    std::thread::Builder::new()
        .name("chainrec-signal".into())
        .spawn(move || loop {
            if SIGNAL_STOP.load(Ordering::SeqCst) {
                f.store(true, Ordering::SeqCst);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        })
        .ok();
    flag
}

fn secs(s: f64, what: &str) -> Result<Duration> {
    if !s.is_finite() || s <= 0.0 || s > 1e7 {
        bail!("{what} must be a positive number of seconds, got {s}");
    }
    Ok(Duration::from_secs_f64(s))
}

/// -p values as process ids: threads map to their process (with a note), duplicates go.
fn check_pids(pids: &[u32]) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for &p in pids {
        let tgid = chainrec_record::command::process_of(p).with_context(|| format!("-p {p}"))?;
        if tgid != p {
            say!("chainrec: note: -p {p} is a thread of process {tgid}; recording process {tgid}");
        }
        if !out.contains(&tgid) {
            out.push(tgid);
        }
    }
    Ok(out)
}

/// Whether `output` is the same file as chainrec's stdout (fd 1), e.g. `-o /dev/stdout`.
fn output_is_stdout(output: &Path) -> bool {
    use std::os::fd::AsFd;
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return false;
    };
    match (
        std::fs::File::from(fd).metadata(),
        std::fs::metadata(output),
    ) {
        (Ok(x), Ok(y)) => super::same_inode(&x, &y),
        _ => false,
    }
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

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    format!("signal {sig} ({name})")
}

/// `chainrec record`.
pub fn run(a: Args) -> Result<()> {
    // Everything that can be checked is checked before the output is touched.
    let lazy = matches!(a.stacks, StacksArg::Lazy);
    let stacks_name = format!("{:?}", a.stacks).to_lowercase();
    if a.stack_threshold.is_some() && !lazy {
        bail!("--stack-threshold applies to --stacks lazy only (--stacks {stacks_name} has no threshold)");
    }
    if a.user_stacks_at_sys_exit && !lazy {
        bail!(
            "--user-stacks-at-sys-exit applies to --stacks lazy only (--stacks {stacks_name} {})",
            if matches!(a.stacks, StacksArg::Eager) {
                "takes user stacks in the scheduler tracepoints"
            } else {
                "takes no stacks"
            }
        );
    }
    let threshold =
        chainrec_record::parse_duration_ns(a.stack_threshold.as_deref().unwrap_or("100us"))?;
    let ringbuf = chainrec_record::parse_size(&a.ringbuf_size)?;
    if !(4096..=1 << 31).contains(&ringbuf) {
        bail!(
            "--ringbuf-size {}: out of range ({}; allowed 4K ..= 2G)",
            a.ringbuf_size,
            super::human_bytes(ringbuf)
        );
    }
    let duration = a.duration.map(|d| secs(d, "--duration")).transpose()?;
    if a.poll_ms == 0 || a.poll_ms > 1000 {
        bail!("--poll-ms must be in 1..=1000");
    }
    chainrec_record::check_output(&a.output)?;
    // Fail now, not after the whole recording, if the summary cannot be written there.
    if let Some(p) = &a.summary_json {
        chainrec_record::check_output(p).context("--summary-json")?;
        if super::same_file(p, &a.output) {
            bail!(
                "--summary-json {} is the trace file (-o {}): give it another name",
                p.display(),
                a.output.display()
            );
        }
    }
    let pids = check_pids(&a.pids)?;
    if let Some(name) = a.command.first() {
        chainrec_record::command::resolve(name)?;
    }
    if !ringbuf.is_power_of_two() {
        say!(
            "chainrec: note: --ringbuf-size {} is not a power of two; using {}",
            a.ringbuf_size,
            super::human_bytes(ringbuf.next_power_of_two())
        );
    }
    let output_mode = a.flight.mode(&pids)?;
    let opts = RecordOptions {
        output: a.output.clone(),
        stack_mode: match a.stacks {
            StacksArg::Lazy => StackMode::Lazy,
            StacksArg::Eager => StackMode::Eager,
            StacksArg::None => StackMode::None,
        },
        stack_threshold_ns: threshold,
        ringbuf_bytes: ringbuf,
        pids,
        poll_period: Duration::from_millis(a.poll_ms),
        status_line: !a.quiet,
        command_line: std::env::args().collect(),
        user_stacks: !a.no_user_stacks,
        force_context_fallback: false,
        force_sys_exit_user_stacks: a.user_stacks_at_sys_exit,
        no_user_walk_shortcut: false,
        verify_user_walk_shortcut: a.verify_user_walk,
        no_softirq_tracking: a.no_softirq_tracking,
        output_mode,
        profile_bpf: a.profile_bpf,
        no_user_stash: a.no_switch_out_user_stacks,
        samples: (!a.no_samples).then_some(chainrec_record::SampleConfig {
            freq_hz: a.sample_freq,
            event: match a.sample_event {
                SampleEventArg::CpuClock => chainrec_record::SampleEvent::CpuClock,
                SampleEventArg::Cycles => chainrec_record::SampleEvent::Cycles,
            },
        }),
    };
    let flag = install_stop_signals();
    let handle = Recording::start(opts, duration, flag.clone())
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
    // The stop signals checked before the spawn; any later one (even one that comes
    // between this check and the spawn) is a stop for the loop after the spawn.
    let mut seen = stop_signals();
    let started = handle.wait_started(|| {
        seen = stop_signals();
        flag.load(Ordering::SeqCst) || seen.count > 0
    });
    if !started || flag.load(Ordering::SeqCst) || seen.count > 0 {
        // Never start the command after a stop request (or without a recorder).
        flag.store(true, Ordering::SeqCst);
        let summary = join(handle)?;
        finish_recording(&summary, a.summary_json.as_deref())?;
        bail!("stopped before `{cmd}` was started (the command did not run)");
    }
    let mut command = std::process::Command::new(&a.command[0]);
    command.args(&a.command[1..]);
    if output_is_stdout(&a.output) {
        // The command would inherit the trace's file as its stdout and write into it.
        use std::os::fd::AsFd;
        let o = a.output.display();
        match std::io::stderr().as_fd().try_clone_to_owned() {
            Ok(fd) => {
                say!("chainrec: note: the trace goes to stdout (-o {o}); `{cmd}` writes its output to stderr");
                command.stdout(std::process::Stdio::from(fd));
            }
            Err(e) => {
                say!("chainrec: note: the trace goes to stdout (-o {o}) and stderr is unusable ({e}); `{cmd}`'s output is discarded");
                command.stdout(std::process::Stdio::null());
            }
        }
    }
    let child = match command.spawn() {
        Ok(c) => c,
        Err(e) => {
            flag.store(true, Ordering::SeqCst);
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
        stop_signals,
        |event| match event {
            Supervision::RecordingEnded {
                result,
                command_running,
            } => match result.map_err(|e| recorder_error(e, &a.output, true)) {
                Ok(summary) => {
                    if let Err(e) = finish_recording(&summary, a.summary_json.as_deref()) {
                        failed.get_or_insert((e, false));
                    }
                    false
                }
                Err(e) => {
                    // At once, not when the command exits; and the command is not recorded
                    // any more, so it is stopped.
                    say!("chainrec: error: {e:#}");
                    if command_running {
                        say!("chainrec: stopping `{cmd}` (pid {pid}) with SIGTERM");
                    }
                    failed = Some((e, true));
                    true
                }
            },
            Supervision::WaitFailed(e) => {
                failed.get_or_insert((anyhow::anyhow!("waiting for `{cmd}`: {e}"), false));
                false
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
                false
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
    let code = exit_code(st, stop_signals());
    if code != 0 {
        say!("chainrec: `{cmd}` {}; exiting with {code}", describe(st));
        return Err(super::Exit(code).into());
    }
    Ok(())
}

fn describe(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("was killed by {}", signal_name(s)),
        _ => format!("ended with {st}"),
    }
}

/// `chainrec workload`.
pub fn run_workload(a: WorkloadArgs) -> Result<()> {
    if a.period_us == 0 || a.period_us > 10_000_000 {
        bail!("--period-us must be in 1..=10000000");
    }
    let opts = WorkloadOptions {
        duration: secs(a.duration, "--duration")?,
        period: Duration::from_micros(a.period_us),
        stall: a.stall_ms.map(Duration::from_millis),
    };
    if opts.period > opts.duration {
        bail!(
            "--period-us {} is longer than --duration {} s (the workload would run one whole \
             period anyway)",
            a.period_us,
            a.duration
        );
    }
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

//! The recorder's errors: one enum, with a typed reason for every refusal.
//!
//! Messages carry their whole story in `Display` (an option error names the text it
//! refused), so `{e}` and anyhow's `{e:#}` print the same facts; underlying OS and libbpf
//! errors are `#[source]`s.

use std::path::PathBuf;

/// Everything that can go wrong while recording.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// Not allowed to load BPF programs.
    #[error(
        "permission denied loading BPF programs: run as root, or grant CAP_BPF and CAP_PERFMON \
         (e.g. `sudo setcap cap_bpf,cap_perfmon+ep $(which chainrec)`)"
    )]
    Permission {
        /// What libbpf reported.
        #[source]
        source: libbpf_rs::Error,
    },
    /// Opening, loading or attaching the BPF object failed for another reason.
    #[error("BPF {stage} failed{}", if libbpf_log.is_empty() { String::new() } else { format!(" (libbpf: {libbpf_log})") })]
    Bpf {
        /// What was being done.
        stage: &'static str,
        /// The last lines libbpf logged before the failure (the verifier's complaint),
        /// joined with ` | `; empty when it logged nothing.
        libbpf_log: String,
        /// The libbpf error.
        #[source]
        source: libbpf_rs::Error,
    },
    /// The on-CPU sampling events could not be opened or attached.
    #[error("on-CPU samples: {0}")]
    Samples(SampleError),
    /// A binary named with `--go` cannot be probed.
    #[error("--go {}: {error}", path.display())]
    Go {
        /// The binary.
        path: PathBuf,
        /// Why.
        error: crate::golang::GoError,
    },
    /// The recorder thread could not be started.
    #[error("cannot start the recorder thread")]
    Thread(#[source] std::io::Error),
    /// The recorder thread panicked (a bug).
    #[error("recorder thread panicked")]
    Panicked,
    /// The generated BPF skeleton lacks a part the recorder sets up (a build problem).
    #[error("BPF open failed: the skeleton has no {0}")]
    Skeleton(&'static str),
    /// Writing the trace failed.
    #[error(transparent)]
    Format(#[from] chainrec_format::FormatError),
    /// Bad option value.
    #[error("invalid option: {0}")]
    Invalid(InvalidOption),
    /// A stop was requested before recording started; the output was not touched.
    #[error("stopped before recording started; {path} was not written")]
    Stopped {
        /// The output that was left alone.
        path: PathBuf,
    },
    /// The output path is unusable.
    #[error("cannot write {}: {problem}", path.display())]
    Output {
        /// The path.
        path: PathBuf,
        /// Why.
        problem: OutputProblem,
    },
}

/// Why an option value was refused; each names the text it could not use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidOption {
    /// Not a number with a time unit.
    #[error("`{text}` is not a duration (examples: 100us, 2ms, 1s)")]
    NotADuration {
        /// The text given.
        text: String,
    },
    /// A number with an unknown time unit.
    #[error("unknown duration unit `{unit}` in `{text}` (ns, us, ms, s, m, h)")]
    DurationUnit {
        /// The unit given.
        unit: String,
        /// The whole text given.
        text: String,
    },
    /// Negative, not finite, or over 10^18 ns.
    #[error("duration `{text}` out of range")]
    DurationRange {
        /// The text given.
        text: String,
    },
    /// Not a number with a size unit.
    #[error("`{text}` is not a size (examples: 16M, 1G)")]
    NotASize {
        /// The text given.
        text: String,
    },
    /// A number with an unknown size unit.
    #[error("unknown size unit `{unit}` in `{text}` (K, M, G)")]
    SizeUnit {
        /// The unit given.
        unit: String,
        /// The whole text given.
        text: String,
    },
    /// Over 2^64 bytes.
    #[error("size `{text}` too large")]
    SizeTooLarge {
        /// The text given.
        text: String,
    },
    /// Not `wait>DURATION` or `runqueue>DURATION`.
    #[error("`{text}` is not a trigger (examples: wait>50ms, runqueue>10ms)")]
    NotATrigger {
        /// The text given.
        text: String,
    },
    /// A BPF ring buffer outside what the kernel accepts.
    #[error("ring buffer size {bytes} bytes out of range (4 KiB ..= 2 GiB)")]
    RingbufSize {
        /// The size asked for.
        bytes: u64,
    },
    /// A sampling frequency the perf_event interface cannot take.
    #[error("--sample-freq {hz} out of range (1 ..= 100000 Hz)")]
    SampleFreq {
        /// The frequency asked for.
        hz: u64,
    },
    /// More `-p` processes than the BPF filter map holds.
    #[error("at most 1024 -p pids, got {count}")]
    TooManyPids {
        /// How many were given.
        count: usize,
    },
}

/// Why the trace file cannot be written where asked.
#[derive(Debug, thiserror::Error)]
pub enum OutputProblem {
    /// The path is a directory.
    #[error("is a directory")]
    IsDirectory,
    /// The parent exists and is not a directory.
    #[error("{} is not a directory", .0.display())]
    ParentNotDirectory(PathBuf),
    /// The parent directory does not exist.
    #[error("directory {} does not exist", .0.display())]
    NoParent(PathBuf),
    /// The parent could not be examined.
    #[error("{}: {error}", dir.display())]
    Parent {
        /// The parent directory.
        dir: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
}

/// Why on-CPU sampling could not start.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// The online CPU list could not be read.
    #[error("/sys/devices/system/cpu/online: {0}")]
    OnlineCpusRead(std::io::Error),
    /// The online CPU list is not a CPU list.
    #[error("cannot parse the online CPU list {text:?}")]
    OnlineCpusParse {
        /// What the file held.
        text: String,
    },
    /// perf_event_open failed on a CPU.
    #[error("perf_event_open({event} at {hz} Hz) on CPU {cpu}: {error}{hint}")]
    Open {
        /// The event name (`cpu-clock`, `cycles`).
        event: &'static str,
        /// The frequency.
        hz: u64,
        /// The CPU.
        cpu: u32,
        /// What the kernel said.
        error: std::io::Error,
        /// What to do about it, when known (starts with a space), else empty.
        hint: &'static str,
    },
    /// Attaching the sample program to a CPU's event failed.
    #[error("attach the sample program on CPU {cpu}: {error}")]
    Attach {
        /// The CPU.
        cpu: u32,
        /// What libbpf said.
        error: libbpf_rs::Error,
    },
}

/// A `chainrec record` or `chainrec workload` option (or a mix of them) refused before
/// anything is loaded or written; each names the option and the text it was given, in the
/// words the command line prints (no `invalid option:` prefix of its own: a value that did
/// not parse keeps its [`RecordError`] as the source).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OptionError {
    /// A value that did not parse, and the flag it was given to.
    #[error("{flag} {text}")]
    Value {
        /// The flag (`--post`).
        flag: &'static str,
        /// The text given.
        text: String,
        /// Why it did not parse.
        #[source]
        source: RecordError,
    },
    /// A value refused without naming its flag (the stack threshold and ring buffer size
    /// parse errors), or an unusable `-o`.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// `--stack-threshold` with `--stacks eager` or `none`.
    #[error("--stack-threshold applies to --stacks lazy only (--stacks {} has no threshold)", stacks_name(.stacks))]
    ThresholdNotLazy {
        /// The stack mode given.
        stacks: chainrec_format::StackMode,
    },
    /// `--user-stacks-at-sys-exit` with `--stacks eager` or `none`.
    #[error("--user-stacks-at-sys-exit applies to --stacks lazy only (--stacks {} {})", stacks_name(.stacks), stacks_taken(.stacks))]
    SysExitNotLazy {
        /// The stack mode given.
        stacks: chainrec_format::StackMode,
    },
    /// `--ringbuf-size` outside 4 KiB ..= 2 GiB.
    #[error("--ringbuf-size {text}: out of range ({}; allowed 4K ..= 2G)", human_bytes(.bytes))]
    RingbufRange {
        /// The text given.
        text: String,
        /// Its value.
        bytes: u64,
    },
    /// `--poll-ms` outside 1 ..= 1000.
    #[error("--poll-ms must be in 1..=1000")]
    PollMs {
        /// The value given.
        ms: u64,
    },
    /// A number of seconds that is not positive, not finite or over 10^7.
    #[error("{flag} must be a positive number of seconds, got {secs}")]
    Seconds {
        /// The flag (`--duration`).
        flag: &'static str,
        /// The value given.
        secs: f64,
    },
    /// The `--summary-json` file cannot be written.
    #[error("--summary-json")]
    SummaryJson(#[source] RecordError),
    /// `--summary-json` names the trace file.
    #[error("--summary-json {} is the trace file (-o {}): give it another name", .summary.display(), .output.display())]
    SummaryIsTrace {
        /// The summary path given.
        summary: PathBuf,
        /// The trace path given.
        output: PathBuf,
    },
    /// A `-p` that names no process.
    #[error("-p {pid}")]
    Pid {
        /// The pid given.
        pid: u32,
        /// Why it names no process.
        #[source]
        source: PidError,
    },
    /// The command after `--` cannot be run.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// A flight-recorder option without `--flight`.
    #[error(
        "{flag} applies to the flight recorder only: add --flight DURATION (e.g. --flight 30s)"
    )]
    NeedsFlight {
        /// The flag given.
        flag: &'static str,
    },
    /// `--comm`, `-t` or `--state` without a `--trigger` to filter.
    #[error("--comm, -t and --state choose which waits trigger: add --trigger (e.g. --trigger 'wait>50ms')")]
    FilterWithoutTrigger,
    /// `--flight 0` with `--flight-size 0`: no bound at all.
    #[error("--flight 0 with --flight-size 0 would keep everything: give a bound")]
    Unbounded,
    /// `--comm` is not a regular expression.
    #[error("--comm {text:?}")]
    Comm {
        /// The text given.
        text: String,
        /// What the regex parser said.
        #[source]
        source: regex::Error,
    },
    /// `--rotate 0` or `0s`.
    #[error("--rotate {text}: the limit must be above zero")]
    RotateZero {
        /// The text given.
        text: String,
    },
    /// `workload --period-us` outside 1 ..= 10^7.
    #[error("--period-us must be in 1..=10000000")]
    PeriodUs {
        /// The value given.
        us: u64,
    },
    /// `workload --period-us` longer than `--duration`.
    #[error("--period-us {us} is longer than --duration {secs} s (the workload would run one whole period anyway)")]
    PeriodOverDuration {
        /// The period given.
        us: u64,
        /// The duration given.
        secs: f64,
    },
}

/// `--stacks`' name for a mode.
fn stacks_name(mode: &chainrec_format::StackMode) -> String {
    format!("{mode:?}").to_lowercase()
}

/// Which stacks a mode other than lazy takes, and when.
fn stacks_taken(mode: &chainrec_format::StackMode) -> &'static str {
    match mode {
        chainrec_format::StackMode::Eager => "takes user stacks in the scheduler tracepoints",
        _ => "takes no stacks",
    }
}

fn human_bytes(bytes: &u64) -> String {
    chainrec_format::human_bytes(*bytes)
}

/// Why a command cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The command name is empty.
    #[error("the command is an empty string")]
    Empty,
    /// No such command in any PATH directory.
    #[error("cannot run `{0}`: command not found in PATH")]
    NotFound(String),
    /// The file exists but cannot be executed.
    #[error("cannot run `{name}`: {}{why}", path.as_ref().map(|p| format!("{}: ", p.display())).unwrap_or_default())]
    NotRunnable {
        /// The command as given.
        name: String,
        /// The candidate found in PATH (None for a name with a `/`, which is the path).
        path: Option<std::path::PathBuf>,
        /// Why it cannot run.
        why: Unrunnable,
    },
}

/// Why a file cannot be executed.
#[derive(Debug, thiserror::Error)]
pub enum Unrunnable {
    /// Its metadata cannot be read (missing, no permission on a directory).
    #[error("{0}")]
    Stat(std::io::Error),
    /// It is a directory.
    #[error("is a directory")]
    Directory,
    /// The path contains a NUL byte.
    #[error("contains a NUL byte")]
    NulByte,
    /// No execute permission for this process.
    #[error("not executable")]
    NotExecutable,
}

/// Why a pid does not name a process.
#[derive(Debug, thiserror::Error)]
pub enum PidError {
    /// Pid 0.
    #[error("pid 0 is the idle task, not a process (give a process id)")]
    Idle,
    /// No such process.
    #[error("no such process")]
    NoSuchProcess,
    /// `/proc/PID/status` could not be read.
    #[error("cannot read /proc/{pid}/status")]
    Read {
        /// The pid.
        pid: u32,
        /// Why.
        source: std::io::Error,
    },
    /// `/proc/PID/status` has no Tgid line.
    #[error("no Tgid in /proc/{0}/status")]
    NoTgid(u32),
}

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

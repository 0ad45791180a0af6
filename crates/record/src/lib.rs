//! chainrec-record: the BPF recorder.
//!
//! [`record`] loads `bpf/chainrec.bpf.c` (tp_btf programs on the scheduler tracepoints),
//! streams its ring buffer into a [`chainrec_format::TraceWriter`] and returns a
//! [`RecordSummary`]. [`workload`] is the built-in chain workload (timer → relay → sink).
//! See `docs/RECORDER.md` for the design (lazy stacks, waking context, ring buffer).

mod btfinfo;
mod cgroups;
pub mod command;
mod consumer;
mod convert;
mod error;
pub mod golang;
pub mod java;
pub mod ksyms;
mod load;
pub mod mappings;
mod options;
pub mod output;
mod perf_event;
pub mod progress;
mod python;
mod raw;
mod recorder;
mod recording;
pub mod request;
mod samples;
mod summary;
mod throttle;
pub mod trigger;
pub mod unwind;
pub mod usyms;
pub mod workload;

#[allow(
    missing_docs,
    clippy::all,
    clippy::undocumented_unsafe_blocks,
    unsafe_op_in_unsafe_fn
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/chainrec.skel.rs"));
}

pub use command::StopSignals;
pub use error::{InvalidOption, OptionError, OutputProblem, RecordError, SampleError};
pub use options::{
    Fallback, LazyUserCounts, RecordOptions, RecordSummary, SoftirqCounts, StopCondition,
    UserStashCounts, DEFAULT_USER_STACK_COPY,
};
pub use recorder::{check_output, partial_trace_note, record};
pub use recording::Recording;
pub use samples::{SampleConfig, SampleEvent};

/// Whether lazy user stacks can use the BPF task_work path on this kernel (its BTF has
/// `bpf_task_work_schedule_resume_impl`, Linux 6.18+). Otherwise the recorder takes them
/// at `sys_exit`, which slows down every syscall exit while recording.
pub fn task_work_available() -> bool {
    btfinfo::kernel_has_func(btfinfo::TASK_WORK_KFUNC).unwrap_or(false)
}

fn invalid(why: InvalidOption) -> RecordError {
    RecordError::Invalid(why)
}

/// Result alias for this crate.
pub type Result<T, E = RecordError> = std::result::Result<T, E>;

/// Parse a duration such as `100us`, `1.5ms`, `2s`, `10m`, `1h`, `500ns` (a bare number is µs).
pub fn parse_duration_ns(s: &str) -> Result<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let text = || s.to_string();
    let v: f64 = num
        .parse()
        .map_err(|_| invalid(InvalidOption::NotADuration { text: text() }))?;
    let mult = match unit.trim() {
        "ns" => 1.0,
        "" | "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        u => {
            return Err(invalid(InvalidOption::DurationUnit {
                unit: u.to_string(),
                text: text(),
            }))
        }
    };
    let ns = v * mult;
    if !ns.is_finite() || !(0.0..=1e18).contains(&ns) {
        return Err(invalid(InvalidOption::DurationRange { text: text() }));
    }
    Ok(ns.round() as u64)
}

/// Parse a size such as `64M`, `16MiB`, `1G`, `4096` (bytes).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let text = || s.to_string();
    let v: u64 = num
        .parse()
        .map_err(|_| invalid(InvalidOption::NotASize { text: text() }))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        u => {
            return Err(invalid(InvalidOption::SizeUnit {
                unit: u.to_string(),
                text: text(),
            }))
        }
    };
    v.checked_mul(mult)
        .ok_or_else(|| invalid(InvalidOption::SizeTooLarge { text: text() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("100us").unwrap(), 100_000);
        assert_eq!(parse_duration_ns("1.5ms").unwrap(), 1_500_000);
        assert_eq!(parse_duration_ns("2s").unwrap(), 2_000_000_000);
        assert_eq!(parse_duration_ns("250").unwrap(), 250_000);
        assert_eq!(parse_duration_ns("0ns").unwrap(), 0);
        assert!(parse_duration_ns("abc").is_err());
        assert!(parse_duration_ns("10 parsecs").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("16MiB").unwrap(), 16 << 20);
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert!(parse_size("12X").is_err());
        assert!(parse_size("").is_err());
    }
}

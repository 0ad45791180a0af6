//! What `chainrec record` was asked for, as the user wrote it, checked before anything is
//! loaded or written: [`RecordRequest::check`] gives the [`RecordOptions`] it decides (or
//! the first mistake, an [`OptionError`] naming the flag and its text), and
//! [`FlightRequest::output_mode`] the flight recorder's or rotation's plan. The binary
//! keeps the argument parser and prints; the rules live here.

use crate::command::{process_of, resolve};
use crate::output::{FlightPlan, OutputMode};
use crate::trigger::{TriggerFilter, TriggerRule};
use crate::workload::WorkloadOptions;
use crate::{check_output, parse_duration_ns, parse_size, OptionError, RecordOptions};
use chainrec_format::ThreadSelector;
use chainrec_format::{RotateLimit, StackMode};
use std::path::Path;
use std::time::Duration;

/// Result of the checks here.
pub type Result<T, E = OptionError> = std::result::Result<T, E>;

/// `record`'s options that need a check, as given.
#[derive(Clone, Copy, Debug)]
pub struct RecordRequest<'a> {
    /// `-o`.
    pub output: &'a Path,
    /// `--stacks`.
    pub stack_mode: StackMode,
    /// `--stack-threshold` (lazy only; default 100us).
    pub stack_threshold: Option<&'a str>,
    /// `--user-stacks-at-sys-exit` (lazy only).
    pub user_stacks_at_sys_exit: bool,
    /// `--ringbuf-size`.
    pub ringbuf_size: &'a str,
    /// `--duration`, in seconds.
    pub duration_secs: Option<f64>,
    /// `--poll-ms`.
    pub poll_ms: u64,
    /// `--summary-json`.
    pub summary_json: Option<&'a Path>,
    /// `-p`.
    pub pids: &'a [u32],
    /// The command's name (after `--`).
    pub command: Option<&'a str>,
    /// The flight recorder and rotation options.
    pub flight: &'a FlightRequest,
}

/// A fact the checks tell the user about (the binary prints it as a note).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordNote {
    /// A `-p` that is a thread: its process is recorded.
    PidIsThread {
        /// The pid given.
        pid: u32,
        /// Its process.
        process: u32,
    },
    /// A ring buffer size that is not a power of two, rounded up.
    RingbufRounded {
        /// The text given.
        text: String,
        /// The size used.
        bytes: u64,
    },
}

impl std::fmt::Display for RecordNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordNote::PidIsThread { pid, process } => write!(
                f,
                "-p {pid} is a thread of process {process}; recording process {process}"
            ),
            RecordNote::RingbufRounded { text, bytes } => write!(
                f,
                "--ringbuf-size {text} is not a power of two; using {}",
                chainrec_format::human_bytes(*bytes)
            ),
        }
    }
}

/// What [`RecordRequest::check`] decided.
#[derive(Clone, Debug)]
pub struct CheckedRecord {
    /// The options the request decides (output, stacks, ring buffer, pids, poll period,
    /// output mode); the rest are defaults for the caller to set.
    pub options: RecordOptions,
    /// `--duration`.
    pub duration: Option<Duration>,
}

impl RecordRequest<'_> {
    /// Check everything that can be checked before the output is touched, in the order the
    /// command line reports mistakes; `note` hears the facts worth telling as they come
    /// (so a note printed before a later mistake stays in its place).
    pub fn check(&self, mut note: impl FnMut(RecordNote)) -> Result<CheckedRecord> {
        let lazy = self.stack_mode == StackMode::Lazy;
        if self.stack_threshold.is_some() && !lazy {
            return Err(OptionError::ThresholdNotLazy {
                stacks: self.stack_mode,
            });
        }
        if self.user_stacks_at_sys_exit && !lazy {
            return Err(OptionError::SysExitNotLazy {
                stacks: self.stack_mode,
            });
        }
        let threshold = parse_duration_ns(self.stack_threshold.unwrap_or("100us"))?;
        let ringbuf = parse_size(self.ringbuf_size)?;
        if !(4096..=1 << 31).contains(&ringbuf) {
            return Err(OptionError::RingbufRange {
                text: self.ringbuf_size.to_string(),
                bytes: ringbuf,
            });
        }
        let duration = (self.duration_secs)
            .map(|d| seconds("--duration", d))
            .transpose()?;
        if self.poll_ms == 0 || self.poll_ms > 1000 {
            return Err(OptionError::PollMs { ms: self.poll_ms });
        }
        check_output(self.output)?;
        // Fail now, not after the whole recording, if the summary cannot be written there.
        if let Some(p) = self.summary_json {
            check_output(p).map_err(OptionError::SummaryJson)?;
            if chainrec_format::same_file(p, self.output) {
                return Err(OptionError::SummaryIsTrace {
                    summary: p.to_path_buf(),
                    output: self.output.to_path_buf(),
                });
            }
        }
        let pids = processes(self.pids, &mut note)?;
        if let Some(name) = self.command {
            resolve(name)?;
        }
        if !ringbuf.is_power_of_two() {
            note(RecordNote::RingbufRounded {
                text: self.ringbuf_size.to_string(),
                bytes: ringbuf.next_power_of_two(),
            });
        }
        let output_mode = self.flight.output_mode(&pids)?;
        Ok(CheckedRecord {
            options: RecordOptions {
                output: self.output.to_path_buf(),
                stack_mode: self.stack_mode,
                stack_threshold_ns: threshold,
                ringbuf_bytes: ringbuf,
                pids,
                poll_period: Duration::from_millis(self.poll_ms),
                force_sys_exit_user_stacks: self.user_stacks_at_sys_exit,
                output_mode,
                ..RecordOptions::default()
            },
            duration,
        })
    }
}

/// `-p` values as process ids: threads map to their process (with a note), duplicates go.
fn processes(pids: &[u32], note: &mut impl FnMut(RecordNote)) -> Result<Vec<u32>> {
    let mut out = Vec::new();
    for &pid in pids {
        let process = process_of(pid).map_err(|source| OptionError::Pid { pid, source })?;
        if process != pid {
            note(RecordNote::PidIsThread { pid, process });
        }
        if !out.contains(&process) {
            out.push(process);
        }
    }
    Ok(out)
}

/// A number of seconds given to `flag`: positive, finite, at most 10^7.
pub fn seconds(flag: &'static str, secs: f64) -> Result<Duration> {
    if !secs.is_finite() || secs <= 0.0 || secs > 1e7 {
        return Err(OptionError::Seconds { flag, secs });
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `record --flight` / `--rotate` and the trigger options, as given.
#[derive(Clone, Debug, Default)]
pub struct FlightRequest {
    /// `--flight DURATION`.
    pub flight: Option<String>,
    /// `--flight-size SIZE`.
    pub flight_size: Option<String>,
    /// `--trigger RULE`s.
    pub trigger: Vec<String>,
    /// `--post DURATION`.
    pub post: Option<String>,
    /// `--max-dumps N`.
    pub max_dumps: Option<u32>,
    /// `--min-interval DURATION`.
    pub min_interval: Option<String>,
    /// `--dump-quota SIZE`.
    pub dump_quota: Option<String>,
    /// `--comm REGEX`.
    pub comm: Option<String>,
    /// `-t TID`s.
    pub tids: Vec<u32>,
    /// `--state MASK`.
    pub state: Option<u32>,
    /// `--rotate SIZE|DURATION`.
    pub rotate: Option<String>,
}

impl FlightRequest {
    /// The output mode these options ask for; `pids` (`record -p`, as processes) also limit
    /// triggers. A flight plan's `dump_request` is left `None` for the caller's SIGUSR1.
    pub fn output_mode(&self, pids: &[u32]) -> Result<OutputMode> {
        let flight = self.flight.is_some() || self.flight_size.is_some();
        let needs_flight = [
            (!self.trigger.is_empty(), "--trigger"),
            (self.post.is_some(), "--post"),
            (self.max_dumps.is_some(), "--max-dumps"),
            (self.min_interval.is_some(), "--min-interval"),
            (self.dump_quota.is_some(), "--dump-quota"),
            (self.comm.is_some(), "--comm"),
            (!self.tids.is_empty(), "-t/--tid"),
            (self.state.is_some(), "--state"),
        ];
        if !flight {
            if let Some(&(_, flag)) = needs_flight.iter().find(|(set, _)| *set) {
                return Err(OptionError::NeedsFlight { flag });
            }
            return match &self.rotate {
                None => Ok(OutputMode::File),
                Some(spec) => Ok(OutputMode::Rotate(rotate_limit(spec)?)),
            };
        }
        let filter_set = self.comm.is_some() || !self.tids.is_empty() || self.state.is_some();
        if filter_set && self.trigger.is_empty() {
            return Err(OptionError::FilterWithoutTrigger);
        }
        let d = FlightPlan::default();
        let window_ns = value("--flight", &self.flight, parse_duration_ns, 0)?;
        let max_bytes = value("--flight-size", &self.flight_size, parse_size, d.max_bytes)?;
        if window_ns == 0 && max_bytes == 0 {
            return Err(OptionError::Unbounded);
        }
        let comm = match &self.comm {
            Some(text) => Some(regex::Regex::new(text).map_err(|source| OptionError::Comm {
                text: text.clone(),
                source,
            })?),
            None => None,
        };
        let rules = (self.trigger.iter())
            .map(|t| t.parse::<TriggerRule>().map_err(flag_error("--trigger", t)))
            .collect::<Result<Vec<_>>>()?;
        Ok(OutputMode::Flight(FlightPlan {
            window_ns,
            max_bytes,
            rules,
            filter: TriggerFilter {
                threads: ThreadSelector {
                    pids: pids.to_vec(),
                    tids: self.tids.clone(),
                    comm,
                    ..ThreadSelector::default()
                },
                state_mask: self.state,
            },
            post_ns: value("--post", &self.post, parse_duration_ns, d.post_ns)?,
            max_dumps: self.max_dumps.unwrap_or(d.max_dumps),
            min_interval_ns: value(
                "--min-interval",
                &self.min_interval,
                parse_duration_ns,
                d.min_interval_ns,
            )?,
            quota_bytes: value("--dump-quota", &self.dump_quota, parse_size, d.quota_bytes)?,
            dump_request: None,
        }))
    }
}

/// An error of `flag`'s value `text` ("--post 2x: invalid option: ...").
fn flag_error(flag: &'static str, text: &str) -> impl FnOnce(crate::RecordError) -> OptionError {
    let text = text.to_string();
    move |source| OptionError::Value { flag, text, source }
}

/// `flag`'s value parsed with `parse`, or `default` when it was not given.
fn value(
    flag: &'static str,
    text: &Option<String>,
    parse: fn(&str) -> crate::Result<u64>,
    default: u64,
) -> Result<u64> {
    match text.as_deref() {
        Some(t) => parse(t).map_err(flag_error(flag, t)),
        None => Ok(default),
    }
}

/// `--rotate`: `1G` (upper-case unit: size) or `10m` (lower-case: time), as perf's
/// `--switch-output`.
pub fn rotate_limit(spec: &str) -> Result<RotateLimit> {
    let unit = spec
        .trim()
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let is_time = matches!(unit, "ns" | "us" | "ms" | "s" | "m" | "min" | "h");
    let parse = if is_time {
        parse_duration_ns
    } else {
        parse_size
    };
    let v = parse(spec).map_err(flag_error("--rotate", spec))?;
    if v == 0 {
        return Err(OptionError::RotateZero {
            text: spec.to_string(),
        });
    }
    Ok(match is_time {
        true => RotateLimit { bytes: 0, ns: v },
        false => RotateLimit { bytes: v, ns: 0 },
    })
}

impl WorkloadOptions {
    /// `workload`'s options checked: `--duration` seconds, `--period-us` in 1 ..= 10^7 and
    /// not longer than the duration, `--stall-ms`.
    pub fn new(duration_secs: f64, period_us: u64, stall_ms: Option<u64>) -> Result<Self> {
        if period_us == 0 || period_us > 10_000_000 {
            return Err(OptionError::PeriodUs { us: period_us });
        }
        let opts = WorkloadOptions {
            duration: seconds("--duration", duration_secs)?,
            period: Duration::from_micros(period_us),
            stall: stall_ms.map(Duration::from_millis),
        };
        if opts.period > opts.duration {
            return Err(OptionError::PeriodOverDuration {
                us: period_us,
                secs: duration_secs,
            });
        }
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flight(f: impl FnOnce(&mut FlightRequest)) -> String {
        let mut r = FlightRequest::default();
        f(&mut r);
        match r.output_mode(&[]) {
            Ok(m) => format!("{m:?}"),
            Err(e) => {
                let mut s = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(c) = src {
                    s += &format!(": {c}");
                    src = c.source();
                }
                s
            }
        }
    }

    #[test]
    fn flight_mistakes_name_the_flag_and_text() {
        assert_eq!(
            flight(|r| r.post = Some("1s".into())),
            "--post applies to the flight recorder only: add --flight DURATION (e.g. --flight 30s)"
        );
        assert_eq!(
            flight(|r| {
                r.flight = Some("30s".into());
                r.trigger = vec!["wait>soon".into()];
            }),
            "--trigger wait>soon: invalid option: `soon` is not a duration (examples: 100us, 2ms, 1s)"
        );
        assert_eq!(
            flight(|r| r.flight_size = Some("0".into())),
            "--flight 0 with --flight-size 0 would keep everything: give a bound"
        );
        assert_eq!(
            flight(|r| r.rotate = Some("0s".into())),
            "--rotate 0s: the limit must be above zero"
        );
        assert_eq!(
            flight(|r| r.rotate = Some("1x".into())),
            "--rotate 1x: invalid option: unknown size unit `x` in `1x` (K, M, G)"
        );
    }

    #[test]
    fn rotate_limits_by_unit_case() {
        assert_eq!(
            rotate_limit("1G").unwrap(),
            RotateLimit {
                bytes: 1 << 30,
                ns: 0
            }
        );
        assert_eq!(
            rotate_limit("10m").unwrap(),
            RotateLimit {
                bytes: 0,
                ns: 600_000_000_000
            }
        );
    }

    #[test]
    fn workload_options_are_checked() {
        let e = WorkloadOptions::new(0.2, 10_000_000, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--period-us 10000000 is longer than --duration 0.2 s (the workload would run one \
             whole period anyway)"
        );
        let e = WorkloadOptions::new(f64::INFINITY, 2000, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--duration must be a positive number of seconds, got inf"
        );
        assert!(WorkloadOptions::new(1.0, 0, None).is_err());
        let o = WorkloadOptions::new(1.0, 2000, Some(30)).unwrap();
        assert_eq!(o.stall, Some(Duration::from_millis(30)));
    }
}

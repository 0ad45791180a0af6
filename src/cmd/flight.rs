//! `record --flight` / `--rotate`: the options, SIGUSR1, and the summary lines.
use anyhow::{bail, Context, Result};
use chainrec_record::output::{FlightPlan, OutputMode};
use chainrec_record::trigger::{TriggerFilter, TriggerRule};
use chainrec_record::{parse_duration_ns, parse_size};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const FLIGHT: &str = "Flight recorder and rotation";

/// Where `record` keeps what it records, besides one file.
#[derive(clap::Args, Debug, Default)]
pub struct FlightArgs {
    /// Flight recorder: keep the last DURATION (e.g. 30s) in memory and write nothing
    /// until a --trigger fires, SIGUSR1 arrives or recording stops (each writes a dump
    /// named `OUTPUT-<UTC time>-<tid>.zst`, -o being the prefix).
    #[arg(help_heading = FLIGHT, long, value_name = "DURATION")]
    pub flight: Option<String>,
    /// Flight recorder: at most this much memory for the kept events and their tables,
    /// dropping the oldest first [default: 256M].
    #[arg(help_heading = FLIGHT, long, value_name = "SIZE")]
    pub flight_size: Option<String>,
    /// Dump when a wait is too long: `wait>50ms` (a thread that blocked is off CPU that
    /// long, switch-out to switch-in, its run-queue time after the waking included) or
    /// `runqueue>10ms` (runnable, waiting for a CPU); repeatable.
    #[arg(help_heading = FLIGHT, long, value_name = "RULE")]
    pub trigger: Vec<String>,
    /// After a trigger, keep recording this long before writing the dump [default: 2s].
    #[arg(help_heading = FLIGHT, long, value_name = "DURATION")]
    pub post: Option<String>,
    /// At most this many trigger dumps [default: 10].
    #[arg(help_heading = FLIGHT, long, value_name = "N")]
    pub max_dumps: Option<u32>,
    /// At least this long between triggers that dump [default: 10s].
    #[arg(help_heading = FLIGHT, long, value_name = "DURATION")]
    pub min_interval: Option<String>,
    /// Stop dumping on triggers once the dumps hold this much [default: 1G].
    #[arg(help_heading = FLIGHT, long, value_name = "SIZE")]
    pub dump_quota: Option<String>,
    /// Triggers: only threads whose name matches this regex.
    #[arg(help_heading = FLIGHT, long, value_name = "REGEX")]
    pub comm: Option<String>,
    /// Triggers: only these threads; repeat or comma-separate.
    #[arg(help_heading = FLIGHT, short = 't', long = "tid", value_delimiter = ',', value_name = "TID")]
    pub tids: Vec<u32>,
    /// Triggers (`wait` rules): only waits whose switch-out state has a bit of MASK
    /// (2 = D, 1 = S), decimal or 0x hex.
    #[arg(help_heading = FLIGHT, long, value_name = "MASK", value_parser = super::filter::parse_mask)]
    pub state: Option<u32>,
    /// Write numbered complete files (`OUTPUT.0000.zst`, ...), starting the next one after
    /// SIZE (`1G`, upper-case unit) or DURATION (`10m`, `30s`, lower-case unit).
    #[arg(help_heading = FLIGHT, long, value_name = "SIZE|DURATION", conflicts_with = "flight")]
    pub rotate: Option<String>,
}

static DUMP_REQUEST: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigusr1(_sig: libc::c_int) {
    DUMP_REQUEST.store(true, Ordering::SeqCst);
}

impl FlightArgs {
    /// The output mode these options ask for; `pids` (`record -p`) also limit triggers.
    pub fn mode(&self, pids: &[u32]) -> Result<OutputMode> {
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
            if let Some((_, name)) = needs_flight.iter().find(|(set, _)| *set) {
                bail!("{name} applies to the flight recorder only: add --flight DURATION (e.g. --flight 30s)");
            }
            return match &self.rotate {
                None => Ok(OutputMode::File),
                Some(spec) => Ok(OutputMode::Rotate(rotate_limit(spec)?)),
            };
        }
        let filter_set = self.comm.is_some() || !self.tids.is_empty() || self.state.is_some();
        if filter_set && self.trigger.is_empty() {
            bail!("--comm, -t and --state choose which waits trigger: add --trigger (e.g. --trigger 'wait>50ms')");
        }
        let d = FlightPlan::default();
        // Errors name the flag: "--post 2x: `2x` is not a duration ...".
        let dur = |flag: &str, v: &Option<String>, default: u64| -> Result<u64> {
            match v.as_deref() {
                Some(t) => parse_duration_ns(t).with_context(|| format!("{flag} {t}")),
                None => Ok(default),
            }
        };
        let size = |flag: &str, v: &Option<String>, default: u64| -> Result<u64> {
            match v.as_deref() {
                Some(t) => parse_size(t).with_context(|| format!("{flag} {t}")),
                None => Ok(default),
            }
        };
        let window_ns = match &self.flight {
            Some(_) => dur("--flight", &self.flight, 0)?,
            None => 0,
        };
        let max_bytes = size("--flight-size", &self.flight_size, d.max_bytes)?;
        if window_ns == 0 && max_bytes == 0 {
            bail!("--flight 0 with --flight-size 0 would keep everything: give a bound");
        }
        let comm = match &self.comm {
            Some(re) => Some(
                chainrec_chain::regex::Regex::new(re)
                    .map_err(|e| anyhow::anyhow!("--comm {re:?}: {e}"))?,
            ),
            None => None,
        };
        let rules = (self.trigger.iter())
            .map(|t| (t.parse::<TriggerRule>()).with_context(|| format!("--trigger {t}")))
            .collect::<Result<Vec<_>>>()?;
        // SIGUSR1 asks for a dump now (default action would kill the recorder).
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // sigaction struct is fully initialized.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigusr1 as *const () as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut());
        }
        let request = Arc::new(AtomicBool::new(false));
        let r = request.clone();
        std::thread::Builder::new()
            .name("chainrec-usr1".into())
            .spawn(move || loop {
                if DUMP_REQUEST.swap(false, Ordering::SeqCst) {
                    r.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(20));
            })
            .ok();
        Ok(OutputMode::Flight(FlightPlan {
            window_ns,
            max_bytes,
            rules,
            filter: TriggerFilter {
                pids: pids.to_vec(),
                tids: self.tids.clone(),
                comm,
                state_mask: self.state,
            },
            post_ns: dur("--post", &self.post, d.post_ns)?,
            max_dumps: self.max_dumps.unwrap_or(d.max_dumps),
            min_interval_ns: dur("--min-interval", &self.min_interval, d.min_interval_ns)?,
            quota_bytes: size("--dump-quota", &self.dump_quota, d.quota_bytes)?,
            dump_request: Some(request),
        }))
    }
}

/// `1G` (upper-case unit: size) or `10m` (lower-case: time), as perf's --switch-output.
fn rotate_limit(spec: &str) -> Result<chainrec_format::RotateLimit> {
    let unit = spec
        .trim()
        .trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
    let is_time = matches!(unit, "ns" | "us" | "ms" | "s" | "m" | "min" | "h");
    let limit = if is_time {
        chainrec_format::RotateLimit {
            bytes: 0,
            ns: parse_duration_ns(spec).with_context(|| format!("--rotate {spec}"))?,
        }
    } else {
        chainrec_format::RotateLimit {
            bytes: parse_size(spec).with_context(|| format!("--rotate {spec}"))?,
            ns: 0,
        }
    };
    if limit.bytes == 0 && limit.ns == 0 {
        bail!("--rotate {spec}: the limit must be above zero");
    }
    Ok(limit)
}

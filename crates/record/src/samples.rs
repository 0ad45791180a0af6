//! On-CPU samples: the perf events that drive the `on_sample` BPF program
//! (`bpf/samples.bpf.h`), and the conversion of its records into [`Event::Sample`].
//!
//! One software `cpu-clock` event per online CPU by default, in frequency mode: the kernel
//! turns `sample_freq` into a fixed hrtimer period of 1 s / freq, so every sample stands for
//! the same CPU time, which is what `oncpu`, `hotcold` and the chains' `[on cpu]` split
//! weigh. `cycles` (a hardware event, NMI-driven) is used when asked for; its period varies
//! with the clock rate, so a sample is then an approximate time unit.

use crate::SampleError;
use chainrec_format::{Event, Sample, Sampling, StackId, StackKind};
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};

// Sample counter indexes: `SC_*` of bpf/chainrec_abi.h (`SC_FILTERED`, samples of tasks
// outside the `-p` filter, is not read).
use crate::raw::{SC_LOST, SC_NR};

/// Which perf event drives the samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SampleEvent {
    /// Software CPU clock (hrtimer): a fixed period of CPU time. Works everywhere (VMs
    /// without a PMU included).
    #[default]
    CpuClock,
    /// Hardware CPU cycles (PMU, NMI): fails on machines without a PMU (most VMs).
    Cycles,
}

impl SampleEvent {
    /// Name as `perf` spells it (`cpu-clock`, `cycles`), stored in the metadata.
    pub fn name(self) -> &'static str {
        match self {
            SampleEvent::CpuClock => "cpu-clock",
            SampleEvent::Cycles => "cycles",
        }
    }
}

/// How to sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampleConfig {
    /// Samples per second per CPU (default 99, like `perf record -F 99`: not a divisor of
    /// common timer rates, so sampling does not beat with periodic work; docs/RECORDER.md
    /// "On-CPU samples" has the cost of each rate and why 99).
    pub freq_hz: u64,
    /// Event.
    pub event: SampleEvent,
}

impl Default for SampleConfig {
    fn default() -> Self {
        SampleConfig {
            freq_hz: 99,
            event: SampleEvent::CpuClock,
        }
    }
}

/// Online CPUs (`/sys/devices/system/cpu/online`, e.g. `0-3,6`).
pub(crate) fn online_cpus() -> Result<Vec<u32>, SampleError> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online")
        .map_err(SampleError::OnlineCpusRead)?;
    parse_cpu_list(s.trim()).ok_or(SampleError::OnlineCpusParse { text: s })
}

fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().ok()?..=b.parse::<u32>().ok()?),
            None => out.push(part.parse().ok()?),
        }
    }
    Some(out)
}

/// Open one sampling perf event on `cpu` (all tasks), not yet attached to a program.
fn open_event(cfg: &SampleConfig, cpu: u32) -> std::io::Result<OwnedFd> {
    use libbpf_rs::libbpf_sys as sys;
    let mut attr = sys::perf_event_attr {
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        ..Default::default()
    };
    (attr.type_, attr.config) = match cfg.event {
        SampleEvent::CpuClock => (sys::PERF_TYPE_SOFTWARE, sys::PERF_COUNT_SW_CPU_CLOCK as u64),
        SampleEvent::Cycles => (
            sys::PERF_TYPE_HARDWARE,
            sys::PERF_COUNT_HW_CPU_CYCLES as u64,
        ),
    };
    attr.__bindgen_anon_1.sample_freq = cfg.freq_hz;
    attr.set_freq(1);
    crate::perf_event::open_on_cpu(&attr, cpu)
}

/// The attached sampling events (detached and closed on drop).
#[derive(Default)]
pub(crate) struct SampleLinks {
    links: Vec<libbpf_rs::Link>,
}

/// Open the sampling event on every online CPU and attach `prog` to each. An error names
/// the CPU and the cause (e.g. `cycles` on a machine without a PMU: "No such file or
/// directory").
pub(crate) fn attach(
    prog: &libbpf_rs::ProgramMut<'_>,
    cfg: &SampleConfig,
) -> Result<SampleLinks, SampleError> {
    // check_options refused frequencies outside 1..=100000 Hz.
    let mut out = SampleLinks::default();
    for cpu in online_cpus()? {
        let fd = open_event(cfg, cpu).map_err(|error| SampleError::Open {
            event: cfg.event.name(),
            hz: cfg.freq_hz,
            cpu,
            hint: match (cfg.event, error.raw_os_error()) {
                (SampleEvent::Cycles, Some(libc::ENOENT | libc::EOPNOTSUPP)) => {
                    " (no hardware cycle counter here: use --sample-event cpu-clock)"
                }
                (_, Some(libc::EINVAL)) => {
                    " (above kernel.perf_event_max_sample_rate? try a lower --sample-freq)"
                }
                _ => "",
            },
            error,
        })?;
        let raw = fd.as_raw_fd();
        let link = prog
            .attach_perf_event(raw)
            .map_err(|error| SampleError::Attach { cpu, error })?;
        // The link owns the perf event from here on (libbpf closes it at detach).
        let _ = fd.into_raw_fd();
        out.links.push(link);
    }
    Ok(out)
}

/// Samples converted, and those without stacks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SampleCounts {
    pub samples: u64,
    pub no_kstack: u64,
    pub no_ustack: u64,
}

impl SampleCounts {
    /// The metadata record of a recording with these samples.
    pub(crate) fn sampling(&self, cfg: &SampleConfig, bpf: &[u64; SC_NR]) -> Sampling {
        Sampling {
            event: cfg.event.name().into(),
            freq_hz: cfg.freq_hz,
            period_ns: 1_000_000_000 / cfg.freq_hz.max(1),
            samples: self.samples,
            no_kstack: self.no_kstack,
            no_ustack: self.no_ustack,
            lost: bpf[SC_LOST],
        }
    }

    /// Build the event of one sample record; `stack` interns a (status, kind, tgid,
    /// frames) stack. A failed walk becomes [`StackId::FAILED`] and is counted here, not
    /// in the recording's failed off-CPU/waker stacks.
    pub(crate) fn convert(
        &mut self,
        e: &crate::raw::RawEv,
        kf: &[u64],
        uf: &[u64],
        mut stack: impl FnMut(u8, StackKind, u32, &[u64]) -> StackId,
    ) -> Event {
        let mut side = |st: u8, kind, tgid, frames: &[u64], failed: &mut u64| {
            if st == crate::raw::ST_FAILED {
                *failed += 1;
                return StackId::FAILED;
            }
            let id = stack(st, kind, tgid, frames);
            *failed += u64::from(id == StackId::FAILED);
            id
        };
        self.samples += 1;
        let kstack = side(e.kst, StackKind::Kernel, 0, kf, &mut self.no_kstack);
        let ustack = side(
            e.ust,
            StackKind::User,
            e.task().tgid,
            uf,
            &mut self.no_ustack,
        );
        Event::Sample(Sample {
            ts: e.ts,
            cpu: e.cpu as u32,
            tid: e.task().tid,
            kstack,
            ustack,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-3,6"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("0-1,4-5"), Some(vec![0, 1, 4, 5]));
        assert_eq!(parse_cpu_list("x"), None);
    }
}

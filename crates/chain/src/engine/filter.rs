//! Root filters (applied to the waiting thread; chains follow into any process).

use crate::engine::record::WaitRecord;
use crate::error::{ChainError, WindowProblem};
use chainrec_format::{FlightTrigger, RecordingMeta, ThreadIdentity, ThreadSelector};

/// Which duration `min_ns`/`max_ns` and the window apply to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Duration {
    /// Blocked time (switch-out to waking); the window tests the waking time. Used by
    /// `chains`, `wakeup`, `offwake`. Waits without a waking use off-CPU time.
    #[default]
    Blocked,
    /// Off-CPU time (switch-out to switch-in); the window tests the switch-in time.
    /// Used by `offcpu`.
    OffCpu,
}

/// One end of a `--window`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum WindowBound {
    /// Seconds from the start of the trace.
    Relative(f64),
    /// Wall-clock nanoseconds since the Unix epoch.
    Wall(i128),
    /// Wall-clock time of day (UTC), nanoseconds after midnight, on the trace's first day.
    TimeOfDay(u64),
}

/// Largest accepted wall-clock `@SECONDS` (about the year 2554: nanoseconds since the
/// epoch must fit the trace clock's u64).
pub const MAX_WALL_SECS: f64 = 18_000_000_000.0;

/// A `--window START..END`: either end may be omitted.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Window {
    /// Start (inclusive).
    pub start: Option<WindowBound>,
    /// End (inclusive).
    pub end: Option<WindowBound>,
}

impl Window {
    /// Parse `START..END`. Each end is seconds from the trace start (`2.5`), wall-clock
    /// seconds since the epoch prefixed by `@` (`@1763754600.25`), or a UTC time of day
    /// `HH:MM:SS[.frac]` on the day the trace started. Either end may be empty.
    pub fn parse(spec: &str) -> Result<Window, ChainError> {
        let bad = |problem: WindowProblem| ChainError::BadWindow {
            spec: spec.to_string(),
            problem,
        };
        let (a, b) = spec
            .split_once("..")
            .ok_or_else(|| bad(WindowProblem::NoRange))?;
        let one = |s: &str| -> Result<Option<WindowBound>, ChainError> {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            if let Some(w) = s.strip_prefix('@') {
                let v: f64 = w.parse().map_err(|_| bad(WindowProblem::WallNotANumber))?;
                if !v.is_finite() || !(0.0..=MAX_WALL_SECS).contains(&v) {
                    return Err(bad(WindowProblem::WallOutOfRange {
                        text: w.to_string(),
                        max: MAX_WALL_SECS,
                    }));
                }
                return Ok(Some(WindowBound::Wall((v * 1e9).round() as i128)));
            }
            if s.contains(':') {
                let parts: Vec<&str> = s.split(':').collect();
                if parts.len() != 3 {
                    return Err(bad(WindowProblem::TimeOfDayShape));
                }
                let h: u64 = parts[0].parse().map_err(|_| bad(WindowProblem::Hour))?;
                let m: u64 = parts[1].parse().map_err(|_| bad(WindowProblem::Minute))?;
                let sec: f64 = parts[2].parse().map_err(|_| bad(WindowProblem::Second))?;
                if h > 23 || m > 59 || !(0.0..61.0).contains(&sec) {
                    return Err(bad(WindowProblem::TimeOfDayRange));
                }
                return Ok(Some(WindowBound::TimeOfDay(
                    (h * 3600 + m * 60) * 1_000_000_000 + (sec * 1e9).round() as u64,
                )));
            }
            let v: f64 = s.parse().map_err(|_| bad(WindowProblem::NotATime))?;
            if !v.is_finite() || v < 0.0 {
                return Err(bad(WindowProblem::RelativeRange {
                    text: s.to_string(),
                }));
            }
            Ok(Some(WindowBound::Relative(v)))
        };
        let w = Window {
            start: one(a)?,
            end: one(b)?,
        };
        Ok(w)
    }

    /// Resolve to trace-clock nanoseconds `[start, end]` using the recording metadata.
    /// A wall-clock or time-of-day bound needs the trace's wall-clock offset
    /// ([`ChainError::NoWallClock`] without it: it would be read as trace-clock time).
    pub fn resolve(
        &self,
        meta: &RecordingMeta,
        trace_start_ns: u64,
    ) -> Result<(u64, u64), ChainError> {
        let wall = [self.start, self.end]
            .into_iter()
            .flatten()
            .any(|b| matches!(b, WindowBound::Wall(_) | WindowBound::TimeOfDay(_)));
        if wall && meta.clock_offset_ns == 0 {
            return Err(ChainError::NoWallClock);
        }
        let conv = |b: WindowBound| -> u64 {
            match b {
                // `as u64` saturates (NaN gives 0); parse rejects those values anyway.
                WindowBound::Relative(s) => trace_start_ns.saturating_add((s * 1e9).round() as u64),
                WindowBound::Wall(w) => w
                    .saturating_sub(meta.clock_offset_ns)
                    .clamp(0, u64::MAX as i128) as u64,
                WindowBound::TimeOfDay(tod) => {
                    const DAY: i128 = 86_400_000_000_000;
                    let wall_start = (trace_start_ns as i128).saturating_add(meta.clock_offset_ns);
                    let midnight = wall_start.saturating_sub(wall_start.rem_euclid(DAY));
                    midnight
                        .saturating_add(tod as i128)
                        .saturating_sub(meta.clock_offset_ns)
                        .clamp(0, u64::MAX as i128) as u64
                }
            }
        };
        Ok((
            self.start.map(conv).unwrap_or(0),
            self.end.map(conv).unwrap_or(u64::MAX),
        ))
    }
}

/// Which waits are roots. An empty filter (the default) keeps everything.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Keep only the waits of these threads (`-p -t --comm --cgroup -u -k`; name and
    /// cgroup at switch-out).
    pub threads: ThreadSelector,
    /// `--state MASK`: keep waits with `prev_state & MASK != 0`; MASK 0 keeps only
    /// preemptions (state 0), as in bcc offcputime.
    pub state_mask: Option<u32>,
    /// Minimum duration in ns (inclusive).
    pub min_ns: Option<u64>,
    /// Maximum duration in ns (inclusive).
    pub max_ns: Option<u64>,
    /// Trace-clock window `[start, end]` (resolve a [`Window`] first).
    pub window: Option<(u64, u64)>,
    /// What duration/window refer to.
    pub duration: Duration,
}

impl Filter {
    /// Keep only the wait that made the flight-recorder dump of `meta` (`--trigger`):
    /// its thread, and waits ending inside it (only that one can: the thread was off
    /// CPU throughout). An error when `meta` records no trigger, or one that was not a
    /// wait.
    pub fn restrict_to_trigger(&mut self, meta: &RecordingMeta) -> Result<(), ChainError> {
        let t = FlightTrigger::from_meta(meta)
            .map_err(ChainError::TriggerMeta)?
            .ok_or(ChainError::NotAFlightDump)?;
        if t.tid == 0 {
            return Err(ChainError::TriggerNotAWait {
                rule: t.rule,
                kind: t.kind.name(),
            });
        }
        self.threads.tids = vec![t.tid];
        self.window = Some((t.start_ns, t.end_ns));
        Ok(())
    }

    /// True when the filter keeps every wait.
    pub fn is_empty(&self) -> bool {
        !self.has_thread_filter()
            && self.state_mask.is_none()
            && self.min_ns.is_none()
            && self.max_ns.is_none()
            && self.window.is_none()
    }

    /// True when a thread filter (`-p`, `-t`, `--comm`, `-u`, `-k`) is set; dedup is
    /// off by default then.
    pub fn has_thread_filter(&self) -> bool {
        !self.threads.is_empty()
    }

    /// Does `w` pass? Missing end times fall back to what is known (blocked → off-CPU
    /// time and vice versa).
    pub fn matches(&self, w: &WaitRecord) -> bool {
        let who = ThreadIdentity {
            comm: w.comm,
            tgid: w.tgid,
            kernel_thread: w.kernel_thread,
        };
        if !self.threads.matches_at(w.tid, &who, w.switch_out_ns) {
            return false;
        }
        if let Some(mask) = self.state_mask {
            if !chainrec_format::state_matches(mask, w.state) {
                return false;
            }
        }
        let (end, dur) = match self.duration {
            Duration::Blocked => match w.wake_ns {
                Some(t) => (Some(t), w.blocked_ns()),
                None => (w.switch_in_ns, w.offcpu_ns()),
            },
            Duration::OffCpu => match w.switch_in_ns {
                Some(t) => (Some(t), w.offcpu_ns()),
                None => (w.wake_ns, w.blocked_ns()),
            },
        };
        if let Some(d) = dur {
            if self.min_ns.is_some_and(|m| d < m) || self.max_ns.is_some_and(|m| d > m) {
                return false;
            }
        }
        if let (Some((s, e)), Some(t)) = (self.window, end) {
            if t < s || t > e {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--trigger` keeps the triggering wait's thread and span; a dump made on a signal
    /// has no such wait, and a plain trace no trigger: both are errors that say so.
    #[test]
    fn restrict_to_trigger_keeps_the_wait_or_says_why_not() {
        let t = FlightTrigger {
            kind: chainrec_format::TriggerKind::Wait,
            rule: "wait>10ms".into(),
            tid: 7,
            tgid: 7,
            comm: "w".into(),
            start_ns: 100,
            end_ns: 200,
        };
        let meta = |t: &FlightTrigger| RecordingMeta {
            extra: t.to_extra(),
            ..RecordingMeta::default()
        };
        let mut f = Filter::default();
        f.restrict_to_trigger(&meta(&t)).unwrap();
        assert_eq!(
            (f.threads.tids.as_slice(), f.window),
            (&[7][..], Some((100, 200)))
        );
        let signal = FlightTrigger {
            kind: chainrec_format::TriggerKind::Signal,
            rule: "SIGUSR1".into(),
            tid: 0,
            ..t
        };
        let e = Filter::default().restrict_to_trigger(&meta(&signal));
        assert_eq!(
            e.unwrap_err().to_string(),
            "--trigger: this dump was written on SIGUSR1 (signal), not because of a wait: there is no triggering wait to show"
        );
        let e = Filter::default().restrict_to_trigger(&RecordingMeta::default());
        assert!(matches!(e, Err(ChainError::NotAFlightDump)), "{e:?}");
    }

    fn err(spec: &str) -> String {
        Window::parse(spec)
            .expect_err(&format!("{spec:?} must be rejected"))
            .to_string()
    }

    #[test]
    fn rejects_non_finite_and_out_of_range_wall_clock() {
        for v in ["nan", "inf", "-inf", "-1e30", "1e30", "-1", "NaN"] {
            let e = err(&format!("@{v}.."));
            assert!(e.contains(&format!("@{v}")), "{e}");
            assert!(e.contains("out of range"), "{e}");
            let e = err(&format!("..@{v}"));
            assert!(e.contains("out of range"), "{e}");
        }
        assert!(err("@abc..").contains("@SECONDS"));
    }

    #[test]
    fn rejects_bad_relative_times() {
        for v in ["nan", "inf", "-inf", "-1"] {
            let e = err(&format!("{v}..3"));
            assert!(e.contains(&format!("relative time {v} ")), "{e}");
        }
        assert!(err("2").contains("START..END"));
        assert!(err("25:00:00..").contains("out of range"));
        assert!(err("10:00:nan..").contains("out of range"));
    }

    #[test]
    fn accepts_and_resolves_valid_windows() {
        let meta = RecordingMeta {
            clock_offset_ns: 1_700_000_000_000_000_000,
            ..RecordingMeta::default()
        };
        let w = Window::parse("2..3.5").unwrap();
        assert_eq!(
            w.resolve(&meta, 1_000).unwrap(),
            (2_000_001_000, 3_500_001_000)
        );
        let w = Window::parse("..").unwrap();
        assert_eq!(w.resolve(&meta, 1_000).unwrap(), (0, u64::MAX));
        // Wall clock before the trace clock's zero clamps to 0, far beyond to the end.
        let w = Window::parse("@0..@18000000000").unwrap();
        let (s, e) = w.resolve(&meta, 1_000).unwrap();
        assert_eq!(s, 0);
        assert_eq!(e, 18_000_000_000_000_000_000 - 1_700_000_000_000_000_000);
        // Huge relative times saturate instead of overflowing.
        let w = Window::parse("1e300..").unwrap();
        assert_eq!(w.resolve(&meta, 1_000).unwrap().0, u64::MAX);
    }

    #[test]
    fn wall_clock_windows_need_a_wall_clock() {
        let meta = RecordingMeta::default();
        for spec in ["@1..@2", "..10:00:00", "1..@5"] {
            let w = Window::parse(spec).unwrap();
            assert!(
                matches!(w.resolve(&meta, 0), Err(ChainError::NoWallClock)),
                "{spec}"
            );
        }
        // Relative windows do not.
        assert_eq!(
            Window::parse("1..2").unwrap().resolve(&meta, 0).unwrap(),
            (1_000_000_000, 2_000_000_000)
        );
    }

    #[test]
    fn resolve_saturates_extreme_offsets() {
        let meta = RecordingMeta {
            clock_offset_ns: i128::MIN,
            ..RecordingMeta::default()
        };
        let w = Window {
            start: Some(WindowBound::Wall(i128::MAX)),
            end: Some(WindowBound::TimeOfDay(0)),
        };
        let (start, end) = w.resolve(&meta, u64::MAX).unwrap();
        assert_eq!(start, u64::MAX);
        // Midnight of the trace's wall-clock day: within a day before the trace start,
        // and a whole number of days in wall-clock time.
        const DAY: u64 = 86_400_000_000_000;
        assert!(end > u64::MAX - DAY, "{end}");
        assert_eq!((end as i128 + i128::MIN).rem_euclid(DAY as i128), 0);
        let meta = RecordingMeta {
            clock_offset_ns: i128::MAX,
            ..RecordingMeta::default()
        };
        let w = Window {
            start: Some(WindowBound::Wall(i128::MIN)),
            end: Some(WindowBound::TimeOfDay(86_399_999_999_999)),
        };
        assert_eq!(w.resolve(&meta, u64::MAX).unwrap().0, 0);
    }
}

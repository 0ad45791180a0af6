//! `chainrec script`: every event of a trace, one per line (text, like `perf script`) or
//! one JSON object per line (NDJSON, schema in `docs/REPORTS.md`). Streamed: state is the
//! name of each thread seen, nothing else.

use chainrec_chain::stack_frames;
use chainrec_format::{
    CommReason, Event, LostCause, RecordingMeta, StackId, Tables, ThreadIdentity, ThreadSelector,
    Threads, Tid, WakeContext,
};
use serde::Serialize;
use std::io::{self, Write};

/// Which events to print. An event matches when any of its tasks is selected by `threads`
/// (switch: prev or next; waking: waker or target; wakeup_new: parent or child; the others:
/// their one task), each task as it is at the time of the event (name, process, cgroup);
/// `lost` events have no task and match always. Empty criteria match everything.
#[derive(Clone, Debug, Default)]
pub struct EventFilter {
    /// Which threads (`-p`, `-t`, `--comm`, `--cgroup`).
    pub threads: ThreadSelector,
    /// Inclusive time range (trace clock).
    pub window: Option<(u64, u64)>,
}

/// Output options.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScriptOptions {
    /// NDJSON instead of text.
    pub json: bool,
    /// Symbolized frames of every stack (text: indented lines; JSON: `kframes`/`uframes`).
    pub frames: bool,
    /// Text: print the raw trace-clock timestamp (ns) after the relative time.
    pub raw_ns: bool,
}

/// One event as printed: the NDJSON object (field names are stable, see
/// `docs/REPORTS.md`). Fields a kind does not have are left out.
#[derive(Serialize, Default)]
pub struct EventRow<'a> {
    /// `switch`, `waking`, `wakeup_new`, `comm`, `exit`, `offcpu_stacks`, `lost`.
    pub kind: &'static str,
    /// Trace-clock timestamp.
    pub ts_ns: u64,
    /// Seconds from the trace start (negative before it).
    pub time_s: f64,
    /// CPU (switch, waking, wakeup_new, lost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u32>,
    #[serde(flatten)]
    tasks: Tasks,
    /// Switch: kernel task state bits of prev (0 = preempted, runnable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prev_state: Option<u32>,
    /// Switch: the state as letters (`R`, `S`, `D`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prev_state_str: Option<String>,
    /// Waking: `task`, `softirq`, `hardirq`, `nmi`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<&'static str>,
    /// Waking: interrupt source id (0 = unknown / none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<u32>,
    /// Waking: the source's name, when the trace has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_name: Option<&'a str>,
    /// Comm: `seen`, `exec`, `rename`, `fork`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// Kernel stack id (switch: prev's off-CPU stack; waking: the waker's; offcpu_stacks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kstack: Option<u32>,
    /// User stack id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ustack: Option<u32>,
    /// With `--frames`: the kernel stack's frames, leaf first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kframes: Option<Vec<String>>,
    /// With `--frames`: the user stack's frames, leaf first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uframes: Option<Vec<String>>,
    /// Lost: number of events lost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Lost: `ringbuf_full`, `malformed`, `out_of_order`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<&'static str>,
}

/// The tasks of an event, as `{role}_tid`, `{role}_tgid`, `{role}_comm` (the role is empty
/// for one-task events: `tid`, `tgid`, `comm`).
#[derive(Default)]
struct Tasks(Vec<(&'static str, Tid, ThreadIdentity)>);

impl Serialize for Tasks {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len() * 3))?;
        for (role, tid, t) in &self.0 {
            let key = |f: &str| {
                if role.is_empty() {
                    f.to_string()
                } else {
                    format!("{role}_{f}")
                }
            };
            m.serialize_entry(&key("tid"), tid)?;
            m.serialize_entry(&key("tgid"), &t.tgid)?;
            m.serialize_entry(&key("comm"), &t.comm.as_str())?;
        }
        m.end()
    }
}

/// Kernel task state bits as letters, as `ps` and `perf sched` print them: `R` for 0
/// (preempted), else one letter per bit (`S` 0x1, `D` 0x2, `T` 0x4, `t` 0x8, `X` 0x10,
/// `Z` 0x20, `P` 0x40, `x` 0x80, `K` 0x100, `W` 0x200, `N` 0x400, `n` 0x800); bits
/// beyond those as `+0x...`.
pub fn state_str(state: u32) -> String {
    if state == 0 {
        return "R".to_string();
    }
    const LETTERS: &[u8] = b"SDTtXZPxKWNn";
    let mut s = String::new();
    for (i, &c) in LETTERS.iter().enumerate() {
        if state & (1 << i) != 0 {
            s.push(c as char);
        }
    }
    let rest = state & !((1u32 << LETTERS.len()) - 1);
    if rest != 0 {
        s += &format!("+{rest:#x}");
    }
    s
}

/// A stack id for people: `-` (none), `skipped`, `failed`, `user-preempted`,
/// `reserved-N`, or the number of a real stack.
pub fn stack_label(id: StackId) -> String {
    match id {
        StackId::NONE => "-".into(),
        StackId::SKIPPED => "skipped".into(),
        StackId::FAILED => "failed".into(),
        StackId::USER_PREEMPTED => "user-preempted".into(),
        s if !s.is_real() => format!("reserved-{}", s.0),
        s => s.0.to_string(),
    }
}

fn reason_name(r: CommReason) -> &'static str {
    match r {
        CommReason::Seen => "seen",
        CommReason::Exec => "exec",
        CommReason::Rename => "rename",
        CommReason::Fork => "fork",
    }
}

fn cause_name(c: LostCause) -> &'static str {
    match c {
        LostCause::RingBufferFull => "ringbuf_full",
        LostCause::Malformed => "malformed",
        LostCause::OutOfOrder => "out_of_order",
    }
}

/// Seconds from `start` to `ts` (negative before it), computed from the integer difference.
pub fn rel_secs(ts: u64, start: u64) -> f64 {
    if ts >= start {
        (ts - start) as f64 / 1e9
    } else {
        -((start - ts) as f64 / 1e9)
    }
}

/// Signed seconds from `start` to `ts`, with nanosecond precision.
pub fn rel_time(ts: u64, start: u64) -> String {
    let (sign, d) = if ts >= start {
        ("", ts - start)
    } else {
        ("-", start - ts)
    };
    format!("{sign}{}.{:09}", d / 1_000_000_000, d % 1_000_000_000)
}

/// The event printer. Feed it every event of the trace in order (also those outside the
/// window: names change on `comm` events).
pub struct Script<'t> {
    tables: &'t Tables,
    start_ns: u64,
    threshold_ns: u64,
    opts: ScriptOptions,
    filter: EventFilter,
    threads: Threads,
    /// Events printed.
    pub printed: u64,
    /// Events read.
    pub read: u64,
    buf: String,
}

impl<'t> Script<'t> {
    /// A printer for a trace with these tables and metadata; times are printed relative to
    /// `start_ns`.
    pub fn new(
        tables: &'t Tables,
        meta: &RecordingMeta,
        start_ns: u64,
        opts: ScriptOptions,
        filter: EventFilter,
    ) -> Self {
        Script {
            tables,
            start_ns,
            threshold_ns: meta.stack_threshold_ns,
            opts,
            filter,
            threads: Threads::new(tables),
            printed: 0,
            read: 0,
            buf: String::new(),
        }
    }

    /// Print `ev` to `out` if it passes the filter.
    pub fn event(&mut self, ev: &Event, out: &mut dyn Write) -> io::Result<()> {
        self.read += 1;
        // Identity changes apply from the event on, whether printed or not.
        self.threads.apply(ev);
        let ts = ev.ts();
        if let Some((s, e)) = self.filter.window {
            if ts < s || ts > e {
                return Ok(());
            }
        }
        let tids: [Option<(&'static str, Tid)>; 2] = match ev {
            Event::Switch(s) => [Some(("prev", s.prev_tid)), Some(("next", s.next_tid))],
            Event::Waking(w) => [Some(("waker", w.waker_tid)), Some(("target", w.target_tid))],
            Event::WakeupNew(n) => [Some(("parent", n.parent_tid)), Some(("child", n.child_tid))],
            Event::Comm(c) => [Some(("", c.tid)), None],
            Event::Exit(x) => [Some(("", x.tid)), None],
            Event::OffCpuStacks(o) => [Some(("", o.tid)), None],
            Event::Sample(x) => [Some(("", x.tid)), None],
            Event::Lost(_) => [None, None],
        };
        let tasks: Vec<(&'static str, Tid, ThreadIdentity)> = tids
            .iter()
            .flatten()
            .map(|&(role, tid)| (role, tid, self.threads.identity(tid)))
            .collect();
        let select = &self.filter.threads;
        if !select.is_empty()
            && !tasks.is_empty()
            && !tasks
                .iter()
                .any(|(_, tid, t)| select.matches_at(*tid, t, ts))
        {
            return Ok(());
        }
        let mut row = EventRow {
            kind: ev.kind().name(),
            ts_ns: ts,
            time_s: rel_secs(ts, self.start_ns),
            tasks: Tasks(tasks),
            ..EventRow::default()
        };
        let (mut k, mut u) = (None, None);
        match ev {
            Event::Switch(s) => {
                row.cpu = Some(s.cpu);
                row.prev_state = Some(s.prev_state);
                row.prev_state_str = Some(state_str(s.prev_state));
                (k, u) = (Some(s.prev_kstack), Some(s.prev_ustack));
            }
            Event::Waking(w) => {
                row.cpu = Some(w.cpu);
                row.context = Some(w.context.label());
                row.source = Some(w.source);
                row.source_name = self
                    .tables
                    .irq_sources
                    .get(&w.source)
                    .map(|s| s.name.as_str());
                (k, u) = (Some(w.waker_kstack), Some(w.waker_ustack));
            }
            Event::WakeupNew(n) => row.cpu = Some(n.cpu),
            Event::Comm(c) => row.reason = Some(reason_name(c.reason)),
            Event::Exit(_) => {}
            Event::OffCpuStacks(o) => (k, u) = (Some(o.kstack), Some(o.ustack)),
            Event::Sample(x) => {
                row.cpu = Some(x.cpu);
                (k, u) = (Some(x.kstack), Some(x.ustack));
            }
            Event::Lost(l) => {
                row.cpu = Some(l.cpu);
                row.count = Some(l.count);
                row.cause = Some(cause_name(l.cause));
            }
        }
        row.kstack = k.map(|s| s.0);
        row.ustack = u.map(|s| s.0);
        if self.opts.frames {
            row.kframes = k.map(|s| stack_frames(self.tables, s, self.threshold_ns));
            row.uframes = u.map(|s| stack_frames(self.tables, s, self.threshold_ns));
        }
        self.printed += 1;
        if self.opts.json {
            serde_json::to_writer(&mut *out, &row)?;
            return out.write_all(b"\n");
        }
        let mut b = std::mem::take(&mut self.buf);
        b.clear();
        text_line(&mut b, ev, &row, self.start_ns, self.opts.raw_ns);
        let r = out.write_all(b.as_bytes());
        self.buf = b;
        r
    }
}

/// `comm tid/tgid`.
fn who(t: &(&'static str, Tid, ThreadIdentity)) -> String {
    format!("{} {}/{}", t.2.comm, t.1, t.2.tgid)
}

/// The text form of one event (see `docs/REPORTS.md`, "script").
fn text_line(b: &mut String, ev: &Event, row: &EventRow, start: u64, raw_ns: bool) {
    use std::fmt::Write as _;
    let _ = write!(b, "{:>16}", rel_time(row.ts_ns, start));
    if raw_ns {
        let _ = write!(b, " {:>20}", row.ts_ns);
    }
    match row.cpu {
        Some(u32::MAX) => b.push_str(" [ ? ]"),
        Some(c) => {
            let _ = write!(b, " [{c:03}]");
        }
        None => b.push_str(" [---]"),
    }
    let _ = write!(b, " {:<13} ", row.kind);
    let t = &row.tasks.0;
    let stacks = |b: &mut String| {
        let _ = write!(
            b,
            " k={} u={}",
            stack_label(StackId(row.kstack.unwrap_or(0))),
            stack_label(StackId(row.ustack.unwrap_or(0)))
        );
    };
    match ev {
        Event::Switch(s) => {
            let _ = write!(
                b,
                "{} {} ==> {}",
                who(&t[0]),
                state_str(s.prev_state),
                who(&t[1])
            );
            stacks(b);
        }
        Event::Waking(w) => {
            let _ = write!(b, "{} -> {} {}", who(&t[0]), who(&t[1]), w.context.label());
            if w.context != WakeContext::Task || w.source != 0 {
                match row.source_name {
                    Some(n) => {
                        let _ = write!(b, " src={n}");
                    }
                    None => {
                        let _ = write!(b, " src={}", w.source);
                    }
                }
            }
            stacks(b);
        }
        Event::WakeupNew(_) => {
            let _ = write!(b, "{} -> {}", who(&t[0]), who(&t[1]));
        }
        Event::Comm(c) => {
            let _ = write!(b, "{} ({})", who(&t[0]), reason_name(c.reason));
        }
        Event::Exit(_) => b.push_str(&who(&t[0])),
        Event::OffCpuStacks(_) | Event::Sample(_) => {
            b.push_str(&who(&t[0]));
            stacks(b);
        }
        Event::Lost(l) => {
            let _ = write!(b, "{} events lost ({})", l.count, cause_name(l.cause));
        }
    }
    b.push('\n');
    for (side, frames) in [("kernel", &row.kframes), ("user", &row.uframes)] {
        if let Some(f) = frames.as_ref().filter(|f| !f.is_empty()) {
            let _ = writeln!(b, "\t{side}:");
            for fr in f {
                let _ = writeln!(b, "\t    {fr}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_times_print_as_documented() {
        assert_eq!(state_str(0), "R");
        assert_eq!(state_str(1), "S");
        assert_eq!(state_str(2), "D");
        assert_eq!(state_str(0x402), "DN");
        assert_eq!(state_str(0x1_0001), "S+0x10000");
        assert_eq!(rel_time(1_500_000_001, 500_000_000), "1.000000001");
        assert_eq!(rel_time(5, 10), "-0.000000005");
        assert_eq!(stack_label(StackId(17)), "17");
        assert_eq!(stack_label(StackId(7)), "reserved-7");
    }
}

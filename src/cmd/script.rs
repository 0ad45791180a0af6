//! `chainrec script` (every event) and `chainrec waits` (every wait with its chain): the
//! dumps users and tests check chains with by hand (fronts chainrec-report's `script` and
//! `waits`).
use super::filter::{AnyTask, FilterArgs, Heading, ThreadArgs};
use anyhow::{bail, Context, Result};
use chainrec_chain::{Dedup, Duration, Mode, Setup, DEFAULT_MAX_DEPTH};
use chainrec_report::script::{EventFilter, Script, ScriptOptions};
use chainrec_report::waits::{WaitsWriter, WaitsWriterOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

const SCRIPT_EXAMPLES: &str = "\
Examples:
  chainrec synth --scenario pipe-relay --events 1000 -o relay.zst
  # every event, like perf script
  chainrec script relay.zst | head
  # cr-sink's events, with frames
  chainrec script relay.zst --comm '^cr-sink$' -F
  chainrec script relay.zst -t 102 --window 0.5..0.6 --ns
  chainrec script relay.zst --json | jq -c 'select(.kind == \"waking\")'

Text layout (seconds from the trace start; --ns adds the raw trace clock):
  TIME [CPU] switch        PREV tid/tgid STATE ==> NEXT tid/tgid
                           k=KSTACK u=USTACK
  TIME [CPU] waking        WAKER tid/tgid -> TARGET tid/tgid CONTEXT [src=IRQ]
                           k=.. u=..
  TIME [CPU] wakeup_new    PARENT tid/tgid -> CHILD tid/tgid
  TIME [---] comm|exit     TASK tid/tgid [(exec|rename|fork|seen)]
  TIME [---] offcpu_stacks TASK tid/tgid k=.. u=..
                           (lazy: the stacks of its last switch-out)
  TIME [CPU] lost          N events lost (CAUSE)
Stack ids: a number (frames with -F), - none, skipped (lazy policy), failed,
user-preempted. The NDJSON fields are listed in docs/REPORTS.md.";

/// Event filters of `script`: the task criteria of the analysis filters, applied to every
/// task of an event.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct EventFilterArgs {
    /// `-p`, `-t`, `--comm`.
    #[command(flatten)]
    pub threads: ThreadArgs<AnyTask>,
    /// Only events inside START..END: seconds from trace start (`2..3.5`), wall clock
    /// `@EPOCH_SECONDS`, or UTC time of day `HH:MM:SS[.f]`; either end may be empty.
    #[arg(help_heading = AnyTask::TEXT, long, value_name = "START..END")]
    pub window: Option<String>,
}

/// Arguments of `chainrec script`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = SCRIPT_EXAMPLES)]
pub struct ScriptArgs {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
    #[command(flatten)]
    pub filter: EventFilterArgs,
    /// Print the symbolized frames of every stack (leaf first).
    #[arg(short = 'F', long)]
    pub frames: bool,
    /// One JSON object per event (NDJSON) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also print the raw trace-clock timestamp (ns) of each event (text form; the JSON
    /// form always has `ts_ns`).
    #[arg(long)]
    pub ns: bool,
    /// Print the goroutine records of Go programs instead of the scheduler events (one line
    /// each: park with the goroutine's wait reason and stack, ready with the waker
    /// goroutine, 0 for the runtime, and its stack; execute when a goroutine starts
    /// running, format 2.3); `-p`, `-t`, `--comm` and `--window`
    /// select them by the thread they were recorded in.
    #[arg(long)]
    pub goroutines: bool,
}

const WAITS_EXAMPLES: &str = "\
Examples:
  chainrec synth --scenario pipe-relay --events 1000 -o relay.zst
  # each wait: times, stacks, one line per level
  chainrec waits relay.zst | head
  chainrec waits relay.zst --json | jq -c '{tid, hops: [.hops[].node]}'
  chainrec waits relay.zst --comm '^cr-sink$' -m 5000 -F
  # also the waits dedup shows inside other chains
  chainrec waits relay.zst --hidden --json

Text layout (seconds from the trace start, as `chainrec script` prints them):
  COMM tid/tgid STATE off-CPU T blocked T run queue T [flags]
      out SWITCH-OUT  woken WAKING  in SWITCH-IN  k=KSTACK u=USTACK
        [run queue] HOLDER T, ...                      its own runnable part
   1 <- NS  WAKER tid/tgid CONTEXT at WAKING  k=.. u=..  the waker (level 1)
   2 <- NS  [hardirq: timer] (on tid TID) hardirq at ..  ... down to metal
Records come in the engine's decision order (a wait is final at its thread's
next switch-out), not sorted by time. The NDJSON fields are listed in
docs/REPORTS.md.";

/// Arguments of `chainrec waits`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = WAITS_EXAMPLES)]
pub struct WaitsArgs {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// One JSON object per wait (NDJSON) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Print the symbolized frames of every stack (leaf first).
    #[arg(short = 'F', long)]
    pub frames: bool,
    /// Maximum waker levels per chain (metal included), as for `chains`.
    #[arg(long, default_value_t = DEFAULT_MAX_DEPTH, value_name = "N")]
    pub max_depth: usize,
    /// Attribution of the levels' ns: `bounded` or `last`, as for `chains`.
    #[arg(long, default_value = "bounded", value_parser = super::chains::mode_parser())]
    pub mode: Mode,
    /// Dedup off: every wait is a root (dedup is on by default, off with a thread filter,
    /// as for `chains`).
    #[arg(long)]
    pub no_dedup: bool,
    /// Leave run-queue time out of the records (`runq` empty), as `chains --no-runqueue`.
    #[arg(long)]
    pub no_runqueue: bool,
    /// Also print the waits dedup hides (shown inside another chain), with `"root": false`.
    #[arg(long)]
    pub hidden: bool,
}

/// A buffered stdout; write errors end the command, except a closed pipe, which ends it
/// quietly (as `write_stdout` does).
fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
    BufWriter::with_capacity(1 << 16, std::io::stdout().lock())
}

/// Turn the outcome of a streamed dump into the command's result: a closed pipe is success.
fn finish_output(r: Result<()>, out: &mut dyn Write) -> Result<()> {
    let r = r.and_then(|()| out.flush().map_err(Into::into));
    match r {
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        r => r.context("writing to stdout"),
    }
}

/// `chainrec script`.
pub fn run_script(a: ScriptArgs) -> Result<()> {
    let an = super::open_trace(&a.file, "script")?;
    let (reader, meta, start) = (an.reader(), an.meta(), an.start_ns());
    // The analysis filters' parsing (regex, window resolution and checks).
    let mut f = chainrec_chain::Filter::default();
    a.filter.threads.apply(&mut f, an.tables())?;
    f.window = a
        .filter
        .window
        .as_deref()
        .map(|w| an.window(w))
        .transpose()?;
    // Names change on comm events: chunks before the window are decoded too.
    let range = an.chunk_range(&f);
    let filter = EventFilter {
        threads: f.threads,
        window: f.window,
    };
    let opts = ScriptOptions {
        json: a.json,
        frames: a.frames,
        raw_ns: a.ns,
    };
    let mut out = stdout();
    if a.goroutines {
        // The events are walked beside the records only to follow the threads' names.
        let mut p = GoPrinter {
            a: &a,
            tables: reader.tables(),
            meta,
            start,
            filter: &filter,
            threads: chainrec_format::Threads::new(reader.tables()),
            next: 0,
            next_execute: 0,
        };
        let r = reader.for_each_chunk::<anyhow::Error>(range, true, |evs| {
            for e in evs {
                p.print_until(e.ts(), &mut out)?;
                p.threads.apply(e);
            }
            Ok(())
        });
        let r = r.and_then(|()| Ok(p.print_until(u64::MAX, &mut out)?));
        let r = r.with_context(|| format!("{}: reading events", super::label(&a.file)));
        finish_output(r, &mut out)?;
        super::leave_to_exit(an);
        return Ok(());
    }
    let mut script = Script::new(reader.tables(), meta, start, opts, filter);
    let r = reader.for_each_chunk::<anyhow::Error>(range, true, |evs| {
        for e in evs {
            script.event(e, &mut out)?;
        }
        Ok(())
    });
    let r = r.with_context(|| format!("{}: reading events", super::label(&a.file)));
    finish_output(r, &mut out)?;
    super::report::warn_lost("script", meta);
    super::leave_to_exit(an);
    Ok(())
}

/// `script --goroutines`: the trace's goroutine records (issue 38) and executes (format
/// 2.3), in time order, text or NDJSON, each with its thread's name at the time.
struct GoPrinter<'a> {
    a: &'a ScriptArgs,
    tables: &'a chainrec_format::Tables,
    meta: &'a chainrec_format::RecordingMeta,
    start: u64,
    filter: &'a EventFilter,
    threads: chainrec_format::Threads,
    /// The first record not printed yet.
    next: usize,
    /// The first execute (format 2.3) not printed yet.
    next_execute: usize,
}

impl GoPrinter<'_> {
    /// Print the records before `ts`.
    fn print_until(&mut self, ts: u64, out: &mut dyn Write) -> std::io::Result<()> {
        use chainrec_format::GoEventKind;
        use chainrec_report::script::{rel_time, stack_label};
        let (a, tables) = (self.a, self.tables);
        let g = &tables.goroutines;
        while let Some(e) = g.events().get(self.next).filter(|e| e.ts < ts) {
            self.next += 1;
            self.print_executes_until(e.ts, out)?;
            let Some(comm) = self.shown(e.ts, e.tid) else {
                continue;
            };
            let (kind, what) = match e.kind {
                GoEventKind::Park => ("go_park", g.reason_name(e.tgid, e.reason)),
                GoEventKind::Ready => ("go_ready", format!("by goroutine {}", e.waker)),
            };
            let threshold = self.meta.stack_threshold_ns;
            let frames = || chainrec_chain::stack_frames(tables, e.stack, threshold);
            if a.json {
                let mut v = serde_json::json!({
                    "kind": kind, "ts_ns": e.ts, "cpu": e.cpu, "tid": e.tid, "tgid": e.tgid,
                    "comm": comm, "goid": e.goid, "stack": stack_label(e.stack),
                });
                match e.kind {
                    GoEventKind::Park => {
                        v["reason"] = what.into();
                        v["reason_code"] = e.reason.into();
                    }
                    GoEventKind::Ready => v["waker_goid"] = e.waker.into(),
                }
                if a.frames {
                    v["frames"] = frames().into();
                }
                writeln!(out, "{v}")?;
                continue;
            }
            let ns = if a.ns {
                format!(" {}", e.ts)
            } else {
                String::new()
            };
            writeln!(
                out,
                "{}{ns} [{:03}] {kind:<13} goroutine {} {what} ({comm} {}/{}) u={}",
                rel_time(e.ts, self.start),
                e.cpu,
                e.goid,
                e.tid,
                e.tgid,
                stack_label(e.stack)
            )?;
            if a.frames {
                for f in frames() {
                    writeln!(out, "    {f}")?;
                }
            }
        }
        self.print_executes_until(ts, out)
    }

    /// The comm of thread `tid` when a record of it at `ts` passes the filters.
    fn shown(&self, ts: u64, tid: chainrec_format::Tid) -> Option<String> {
        if self.filter.window.is_some_and(|w| ts < w.0 || ts > w.1) {
            return None;
        }
        let who = self.threads.identity(tid);
        if !self.filter.threads.is_empty() && !self.filter.threads.matches_identity(tid, &who) {
            return None;
        }
        Some(who.comm.to_string())
    }

    /// Print the executes before `ts` (`go_execute`: a goroutine starts running; no stack).
    fn print_executes_until(&mut self, ts: u64, out: &mut dyn Write) -> std::io::Result<()> {
        use chainrec_report::script::rel_time;
        let tables = self.tables;
        let g = &tables.goroutines;
        while let Some(x) = g.executes().get(self.next_execute).filter(|x| x.ts < ts) {
            self.next_execute += 1;
            let Some(comm) = self.shown(x.ts, x.tid) else {
                continue;
            };
            if self.a.json {
                let v = serde_json::json!({
                    "kind": "go_execute", "ts_ns": x.ts, "cpu": x.cpu, "tid": x.tid,
                    "tgid": x.tgid, "comm": comm, "goid": x.goid,
                });
                writeln!(out, "{v}")?;
                continue;
            }
            let ns = if self.a.ns {
                format!(" {}", x.ts)
            } else {
                String::new()
            };
            writeln!(
                out,
                "{}{ns} [{:03}] go_execute    goroutine {} ({comm} {}/{})",
                rel_time(x.ts, self.start),
                x.cpu,
                x.goid,
                x.tid,
                x.tgid
            )?;
        }
        Ok(())
    }
}

/// `chainrec waits`.
pub fn run_waits(a: WaitsArgs) -> Result<()> {
    if a.max_depth == 0 {
        bail!("--max-depth must be at least 1");
    }
    let an = super::open_trace(&a.file, "waits")?;
    let (meta, start) = (an.meta(), an.start_ns());
    let filter = a.filter.to_filter(&an, Duration::Blocked)?;
    let setup = Setup {
        mode: a.mode,
        max_depth: a.max_depth,
        dedup: if a.no_dedup { Dedup::Off } else { Dedup::Auto },
        filter,
        runqueue: !a.no_runqueue,
        ..Setup::default()
    };
    let opts = WaitsWriterOptions {
        json: a.json,
        frames: a.frames,
        hidden: a.hidden,
    };
    let mut sink = WaitsWriter::new(stdout(), opts, an.trace());
    // Stop reading once stdout is gone.
    let done = an
        .run_while(setup, &mut sink, |s, _| s.failed.is_none())
        .with_context(|| format!("{}: reading events", super::label(&a.file)))?;
    let r = sink.failed.take().map_or(Ok(()), |e| Err(e.into()));
    finish_output(r, &mut sink.out)?;
    let st = &done.summary.stats;
    say!("chainrec: waits: {}", sink.summary(st.events));
    super::report::warn_lost("waits", meta);
    for note in st.anomaly_notes(start) {
        say!("chainrec: waits: note: {note}");
    }
    super::leave_to_exit(an);
    Ok(())
}

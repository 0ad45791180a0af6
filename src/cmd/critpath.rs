//! `chainrec critical-path`: one thread's timeline as running, runnable (behind whom) and
//! blocked (behind which chain) segments, with stacks (chainrec_chain::critical_path).
use super::filter::FilterArgs;
use anyhow::{bail, Context, Result};
use chainrec_chain::critpath::CritPathOptions;
use chainrec_chain::{critical_paths, Duration, Unit, DEFAULT_MAX_DEPTH};
use chainrec_report::critpath::{render_json, render_text, TextOptions};
use std::path::PathBuf;

const EXAMPLES: &str = "\
Examples:
  # summary, who and what, biggest segments
  chainrec critical-path trace.zst -t 1234
  # one second of it; every segment in order
  chainrec critical-path trace.zst -t 1234 --window 2..3 --timeline
  chainrec critical-path trace.zst -t 1234 --json | jq '.segments[0]'
  # the thread's wall time as a flame graph
  chainrec critical-path trace.zst -t 1234 --folded | flamegraph.pl > wall.svg
  chainrec critical-path trace.zst -t 1234 --svg wall.svg

Every nanosecond of the window is in exactly one segment:
  running    on a CPU; its time split by the thread's own samples in it
  runnable   woken (or preempted) and waiting for a CPU, behind whoever held it
  blocked    asleep; the chain of wakeups behind it, each level with its stacks,
             its time on CPU (by samples) and in the run queue (as in `chains`)
  unknown    not yet created, exited, off CPU since before the trace, or a
             switch missing from the trace (lost events, untraced switches)
Folded lines (weights in ns by default; they add up to the window's wall time):
  comm;[running];user frames;-;kernel frames
  comm;[runnable];behind HOLDER
  comm;[blocked];off-CPU stack;--;waker level;--;...   (the `chains` layout)
A segment cut by the window keeps the part inside it; its chain levels keep the
time they explain inside it, each level's run-queue/on-CPU split scaled to that
part.
Without --window: the thread's life in the trace (creation or trace start to
exit or trace end).";

/// Arguments of `chainrec critical-path`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
    /// The threads (-t TID, or -t A,B,...: one report each, in that order, from one pass
    /// over the trace) and the window (--window); the other filters do not apply.
    #[command(flatten)]
    pub filter: FilterArgs,
    /// JSON: every segment with start/end (trace clock ns), kind and explanation (with
    /// several threads: an array, one object per thread).
    #[arg(long, conflicts_with_all = ["folded", "svg"])]
    pub json: bool,
    /// Folded lines for flamegraph.pl: the thread's wall time by segment kind and stack.
    #[arg(long, conflicts_with = "svg")]
    pub folded: bool,
    /// Write the folded lines as an interactive flame-graph SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Weight unit of the folded lines and the SVG.
    #[arg(long, default_value = "ns", value_parser = super::chains::unit_parser())]
    pub unit: Unit,
    /// Also list every segment in time order (text).
    #[arg(long)]
    pub timeline: bool,
    /// Biggest segments shown in detail (text).
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub biggest: usize,
    /// Rows of the "who and what" table (text).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// Text line width (longer lines are cut, ending in `…`); 0 = no limit.
    #[arg(long, default_value_t = 80, value_name = "COLS")]
    pub width: usize,
    /// Maximum waker levels per chain.
    #[arg(long, default_value_t = DEFAULT_MAX_DEPTH, value_name = "N")]
    pub max_depth: usize,
    /// Decode chunks one at a time on this thread.
    #[arg(long)]
    pub serial: bool,
}

/// `chainrec critical-path`.
pub fn run(a: Args) -> Result<()> {
    let f = &a.filter;
    let mut others = f.clone();
    others.threads.tid.clear();
    others.window = None;
    if others.selects_waits() {
        bail!("critical-path takes threads (-t TID,...) and --window; -p, --comm, --state, -m, -M, -u and -k do not apply");
    }
    if f.threads.tid.is_empty() && !f.trigger {
        bail!("critical-path needs a thread: -t TID (or several: -t A,B)");
    }
    if a.max_depth == 0 {
        bail!("--max-depth must be at least 1");
    }
    let unit = a.unit;
    let an = super::open_trace(&a.file, "critical-path")?;
    let filter = f.to_filter(&an, Duration::OffCpu)?;
    let tids = &filter.threads.tids;
    let opts = CritPathOptions {
        tid: tids[0],
        window: filter.window,
        max_depth: a.max_depth,
        parallel: !a.serial,
    };
    let paths = critical_paths(&an, tids, &opts).with_context(|| super::label(&a.file))?;
    if a.json {
        let s = match paths.as_slice() {
            [cp] => serde_json::to_string_pretty(&render_json(cp))?,
            _ => serde_json::to_string_pretty(&paths.iter().map(render_json).collect::<Vec<_>>())?,
        };
        return super::write_stdout(&(s + "\n"));
    }
    if a.folded || a.svg.is_some() {
        let mut kept = Vec::new();
        for cp in &paths {
            let r = unit.round_lines(cp.folded_ns());
            if let Some(l) = r.left_out_note() {
                say!("chainrec: critical-path: {l}");
            }
            kept.extend(r.kept);
        }
        if let Some(path) = &a.svg {
            let names: Vec<String> = paths
                .iter()
                .map(|cp| format!("{} ({})", cp.comm, cp.tid))
                .collect();
            let title = match names.len() {
                1 => format!("Critical path of {}", names[0]),
                _ => format!("Critical paths of {}", names.join(", ")),
            };
            let opts = chainrec_report::svg::SvgOptions::new(&title, unit.name(), true);
            return super::chains::render_svg(&kept, &opts, path);
        }
        return super::write_stdout(&super::oncpu::folded_text(&kept));
    }
    let o = TextOptions {
        width: a.width,
        top: a.top,
        biggest: a.biggest,
        timeline: a.timeline,
    };
    let texts: Vec<String> = paths.iter().map(|cp| render_text(cp, &o)).collect();
    super::write_stdout(&texts.join("\n"))
}

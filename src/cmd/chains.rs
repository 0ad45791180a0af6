//! `chainrec chains|offcpu|wakeup|offwake` (fronts chainrec-chain).
use anyhow::{bail, Context, Result};
use chainrec_chain::{
    Config, Duration, Engine, Filter, Mode, Stats, Unit, View as ChainView, Window,
    DEFAULT_MAX_DEPTH,
};
use chainrec_format::RecordingMeta;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Which single-level view.
pub enum View {
    /// `offcpu`: off-CPU time by stack (switch-out to switch-in, all states).
    OffCpu,
    /// `wakeup`: blocked time by waker stack.
    Wakeup,
    /// `offwake`: off-CPU stack with its first waker.
    OffWake,
}

const FILTER_HELP: &str = "\
Filters select the waiting thread (the root of each line); chains follow into any process.";

/// Help heading of the filters. Set on each argument: a struct-level `next_help_heading`
/// would also apply to every argument declared after the flattened filters.
const FILTERS: &str = "Filters (on the waiting thread)";

/// Root filters, shared by `chains`, `offcpu`, `wakeup`, `offwake` (and `top`): flatten
/// with `#[command(flatten)]` and convert with [`FilterArgs::to_filter`].
#[derive(clap::Args, Clone, Debug, Default)]
pub struct FilterArgs {
    /// Only threads of these processes (tgid); repeat or comma-separate.
    #[arg(help_heading = FILTERS, short = 'p', long = "pid", value_delimiter = ',', value_name = "PID")]
    pub pid: Vec<u32>,
    /// Only these threads; repeat or comma-separate.
    #[arg(help_heading = FILTERS, short = 't', long = "tid", value_delimiter = ',', value_name = "TID")]
    pub tid: Vec<u32>,
    /// Only threads whose name (at switch-out) matches this regex.
    #[arg(help_heading = FILTERS, long, value_name = "REGEX")]
    pub comm: Option<String>,
    /// Only waits whose switch-out state has a bit of MASK (2 = D, 1 = S; 0 = preempted
    /// only), decimal or 0x hex.
    #[arg(help_heading = FILTERS, long, value_name = "MASK", value_parser = parse_mask)]
    pub state: Option<u32>,
    /// Minimum block time in microseconds (off-CPU time for `offcpu`).
    #[arg(help_heading = FILTERS, short = 'm', long = "min-block-time", value_name = "US")]
    pub min_block_us: Option<u64>,
    /// Maximum block time in microseconds (off-CPU time for `offcpu`).
    #[arg(help_heading = FILTERS, short = 'M', long = "max-block-time", value_name = "US")]
    pub max_block_us: Option<u64>,
    /// User threads only.
    #[arg(
        help_heading = FILTERS,
        short = 'u',
        long = "user-threads-only",
        conflicts_with = "kernel_threads_only"
    )]
    pub user_threads_only: bool,
    /// Kernel threads only.
    #[arg(help_heading = FILTERS, short = 'k', long = "kernel-threads-only")]
    pub kernel_threads_only: bool,
    /// Only waits ending inside START..END: seconds from trace start (`2..3.5`), wall
    /// clock `@EPOCH_SECONDS`, or UTC time of day `HH:MM:SS[.f]`; either end may be empty.
    #[arg(help_heading = FILTERS, long, value_name = "START..END")]
    pub window: Option<String>,
}

/// `0.000..2.345 s from the trace start (wall clock @A..@B)`, for error messages.
fn describe_span(meta: &RecordingMeta, trace_start_ns: u64, first: u64, last: u64) -> String {
    let rel = |t: u64| (t as f64 - trace_start_ns as f64) / 1e9;
    let mut s = format!("{:.3}..{:.3} s from the trace start", rel(first), rel(last));
    if meta.clock_offset_ns != 0 {
        let wall = |t: u64| (t as i128).saturating_add(meta.clock_offset_ns) as f64 / 1e9;
        s += &format!(" (wall clock @{:.3}..@{:.3})", wall(first), wall(last));
    }
    s
}

fn parse_mask(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|_| format!("{s:?} is not a state mask (decimal or 0x hex)"))
}

impl FilterArgs {
    /// Build the library filter. `trace_start_ns` anchors relative window times;
    /// `duration` says what -m/-M and the window measure; `span` (first and last event
    /// time, [`chainrec_format::TraceReader::time_span`]) makes a window that selects
    /// nothing an error.
    pub fn to_filter(
        &self,
        meta: &RecordingMeta,
        trace_start_ns: u64,
        duration: Duration,
        span: Option<(u64, u64)>,
    ) -> Result<Filter> {
        let comm = match &self.comm {
            Some(c) => Some(chainrec_chain::regex::Regex::new(c).map_err(|e| {
                let msg = e.to_string();
                let last = msg
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("invalid")
                    .trim()
                    .to_string();
                anyhow::anyhow!("bad --comm regex {c:?}: {last}")
            })?),
            None => None,
        };
        let window = match &self.window {
            Some(w) => {
                let (s, e) = Window::parse(w)?
                    .resolve(meta, trace_start_ns)
                    .with_context(|| format!("--window {w:?}"))?;
                if s > e {
                    bail!("--window {w:?}: start is after end");
                }
                if let Some((first, last)) = span {
                    if e < first || s > last {
                        bail!(
                            "--window {w:?} is outside the trace, which spans {}",
                            describe_span(meta, trace_start_ns, first, last)
                        );
                    }
                }
                Some((s, e))
            }
            None => None,
        };
        if let (Some(a), Some(b)) = (self.min_block_us, self.max_block_us) {
            if a > b {
                bail!("-m {a} is larger than -M {b}");
            }
        }
        Ok(Filter {
            pids: self.pid.clone(),
            tids: self.tid.clone(),
            comm,
            state_mask: self.state,
            min_ns: self.min_block_us.map(|u| u.saturating_mul(1000)),
            max_ns: self.max_block_us.map(|u| u.saturating_mul(1000)),
            user_only: self.user_threads_only,
            kernel_only: self.kernel_threads_only,
            window,
            duration,
        })
    }
}

const VIEW_EXAMPLES: &str = "\
Examples:
  chainrec offcpu trace.zst > offcpu.folded        off-CPU time by stack (flamegraph.pl)
  chainrec offcpu trace.zst -p 1234 --state 2      ... of process 1234, uninterruptible (D) waits
  chainrec wakeup trace.zst --svg wakeup.svg       blocked time by waker stack, as an SVG
  chainrec offwake trace.zst -m 1000 --unit ms     off-CPU stack with its waker, waits >= 1 ms
  chainrec offwake trace.zst --comm '^cr-' --window 0.5..1";

/// Arguments common to every folded view.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = VIEW_EXAMPLES)]
pub struct ViewArgs {
    /// Trace file (from `chainrec record` or `chainrec synth`).
    pub file: PathBuf,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Weight unit of the folded lines.
    #[arg(long, default_value = "us", value_parser = ["ns", "us", "ms"])]
    pub unit: String,
    /// Write an interactive flame-graph SVG to FILE instead of folded lines on stdout.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Title of the SVG.
    #[arg(long)]
    pub title: Option<String>,
    /// Decode chunks one at a time on this thread (default: in parallel with rayon).
    #[arg(long)]
    pub serial: bool,
}

const CHAINS_EXAMPLES: &str = "\
Examples:
  chainrec chains trace.zst > chain.folded     every wait with its wakeup chain
  chainrec chains trace.zst --svg chain.svg    ... as a chain flame graph
  chainrec chains trace.zst -p 1234 -m 1000    waits >= 1 ms of process 1234
  chainrec chains trace.zst --comm '^nginx' --window 2..3
  chainrec chains trace.zst --mode last        every level weighs the whole wait
  chainrec chains trace.zst --max-depth 4 --unit ms

Line layout (flamegraph.pl --color=chain / bcc compatible):
  comm;user frames;-;kernel frames            the waiting thread (root->leaf)
  --;kernel frames;-;user frames;waker comm   each waker level (leaf->root)
  --;kernel frames;[hardirq: timer]           down to metal
Markers: [truncated] [cycle] [lost events] [waker unknown] [missing stack]
         [no stack: wait < 100us] [no user stack: preempted]";

/// Arguments of `chainrec chains`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = CHAINS_EXAMPLES, before_help = FILTER_HELP)]
pub struct ChainsArgs {
    #[command(flatten)]
    pub view: ViewArgs,
    /// Maximum waker levels per chain (metal included); the last level keeps the rest of
    /// the wait and is marked [truncated].
    #[arg(long, default_value_t = DEFAULT_MAX_DEPTH, value_name = "N")]
    pub max_depth: usize,
    /// Show every wait as a root, even when another chain already shows it as an inner
    /// level (dedup is on by default, off when a thread filter -p/-t/--comm/-u/-k is given).
    #[arg(long)]
    pub no_dedup: bool,
    /// Attribution: `bounded` (each level gets only the time it explains; widths add up)
    /// or `last` (every level gets the whole wait, like Gregg's prototype).
    #[arg(long, default_value = "bounded", value_parser = ["bounded", "last"])]
    pub mode: String,
}

/// `chainrec chains`.
pub fn run_chains(a: ChainsArgs) -> Result<()> {
    if a.max_depth == 0 {
        bail!("--max-depth must be at least 1");
    }
    let mode = if a.mode == "last" {
        Mode::Last
    } else {
        Mode::Bounded
    };
    analyse(
        &a.view,
        ChainView::Chains,
        "chains",
        mode,
        a.max_depth,
        !a.no_dedup,
    )
}

/// `chainrec offcpu|wakeup|offwake`.
pub fn run_view(v: View, a: ViewArgs) -> Result<()> {
    let (view, name) = match v {
        View::OffCpu => (ChainView::OffCpu, "offcpu"),
        View::Wakeup => (ChainView::Wakeup, "wakeup"),
        View::OffWake => (ChainView::OffWake, "offwake"),
    };
    // Single-level views need only the first hop.
    analyse(&a, view, name, Mode::Bounded, 1, false)
}

fn analyse(
    a: &ViewArgs,
    view: ChainView,
    name: &str,
    mode: Mode,
    max_depth: usize,
    dedup: bool,
) -> Result<()> {
    let unit = Unit::parse(&a.unit)?;
    let t0 = std::time::Instant::now();
    let reader = super::open_trace(&a.file, name)?;
    let meta = reader.meta();
    let tables = reader.tables();
    let trace_start = if meta.start_ns != 0 {
        meta.start_ns
    } else {
        reader.time_span().map(|s| s.0).unwrap_or(0)
    };
    let duration = if view == ChainView::OffCpu {
        Duration::OffCpu
    } else {
        Duration::Blocked
    };
    let filter = a
        .filter
        .to_filter(meta, trace_start, duration, reader.time_span())?;
    let dedup = dedup && !filter.has_thread_filter();
    let range = match filter.window {
        // Causes come from before the window: decode from the start, stop after it.
        Some((_, end)) => 0..reader.chunks_in_window(0, end).end,
        None => 0..reader.chunks().len(),
    };
    let cfg = Config {
        mode,
        max_depth,
        dedup,
        filter,
    };
    let mut engine = Engine::new(tables, meta, cfg);
    let (stats, folded) =
        chainrec_chain::fold_trace(&reader, range, !a.serial, &mut engine, view, |_| {})
            .with_context(|| format!("{}: reading events", a.file.display()))?;
    let (mut nlines, mut small_lines, mut small_ns) = (0usize, 0u64, 0u64);
    match &a.svg {
        Some(path) => {
            // One aggregation: the lines to draw, and those that round to 0 counted.
            let mut lines = Vec::new();
            for (l, w) in folded.folded_ns(engine.nodes(), tables, meta) {
                match unit.round(w) {
                    0 => {
                        small_lines += 1;
                        small_ns += w;
                    }
                    v => lines.push((l, v)),
                }
            }
            nlines = lines.len();
            let title = a
                .title
                .clone()
                .unwrap_or_else(|| default_title(name, &a.file));
            crate::cmd::report::render_svg(
                &lines,
                &title,
                unit.name(),
                view != ChainView::OffCpu,
                path,
            )?;
            say!(
                "chainrec: {name}: wrote {} ({} lines)",
                path.display(),
                lines.len()
            );
        }
        None => {
            // Streamed straight from the path trie: no list of lines in memory.
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
            let r = folded
                .write_folded(engine.nodes(), tables, meta, unit, &mut out)
                .and_then(|sum| {
                    nlines = sum.lines as usize;
                    small_lines = sum.small_lines;
                    small_ns = sum.small_ns;
                    out.flush()
                });
            match r {
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                r => r.context("writing folded output")?,
            }
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    if std::env::var_os("CHAINREC_MEMSTAT").is_some() {
        // Peak and current memory split into anonymous (engine state) and file-backed
        // (the mmapped trace) pages, for docs/BENCHMARKS.md.
        if let Ok(st) = std::fs::read_to_string("/proc/self/status") {
            let pick: Vec<&str> = st
                .lines()
                .filter(|l| {
                    l.starts_with("VmHWM") || l.starts_with("RssAnon") || l.starts_with("RssFile")
                })
                .collect();
            say!(
                "chainrec: {name}: memory: {}",
                pick.join(", ")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        }
    }
    summary(
        name,
        &stats,
        meta,
        secs,
        nlines,
        small_lines,
        small_ns,
        unit,
        dedup,
    );
    Ok(())
}

fn default_title(name: &str, file: &Path) -> String {
    let what = match name {
        "chains" => "Chain graph",
        "offcpu" => "Off-CPU time",
        "wakeup" => "Wakeup time",
        _ => "Off-wake time",
    };
    format!("{what}: {}", file.display())
}

#[allow(clippy::too_many_arguments)]
fn summary(
    name: &str,
    st: &Stats,
    meta: &RecordingMeta,
    secs: f64,
    lines: usize,
    small_lines: u64,
    small_ns: u64,
    unit: Unit,
    dedup: bool,
) {
    say!(
        "chainrec: {name}: {} events in {:.3} s ({:.1} M events/s); {} waits ({} woken, {} runnable), {} lines{}",
        st.events,
        secs,
        st.events as f64 / secs.max(1e-9) / 1e6,
        st.waits,
        st.woken_waits,
        st.preemptions,
        lines,
        if dedup { format!(", {} waits shown inside other chains (dedup; --no-dedup shows them)", st.dedup_hidden) } else { String::new() }
    );
    let l = &meta.lost;
    if st.lost_events > 0 || l.ringbuf_full + l.malformed + l.out_of_order > 0 {
        say!(
            "chainrec: {name}: warning: LOST EVENTS: {} lost (markers: {}; recording: ring buffer full {}, malformed {}, out of order {}); {} waits overlap a loss and are marked [lost events]",
            st.lost_events, st.lost_markers, l.ringbuf_full, l.malformed, l.out_of_order, st.waits_with_lost
        );
    }
    if st.stacks_missing > 0 || l.kernel_stack_failed + l.user_stack_failed > 0 {
        say!(
            "chainrec: {name}: warning: missing stacks: {} shown waits have a failed stack ([missing stack]); recording: kernel {} / user {} failed",
            st.stacks_missing, l.kernel_stack_failed, l.user_stack_failed
        );
    }
    if st.stacks_skipped > 0 || l.stacks_skipped > 0 {
        say!(
            "chainrec: {name}: note: {} shown waits have stacks skipped by the lazy policy (waits < {} us, [no stack: ...]); recording skipped {}",
            st.stacks_skipped,
            meta.stack_threshold_ns / 1000,
            l.stacks_skipped
        );
    }
    if st.stacks_exiting + st.stacks_not_captured > 0 {
        say!(
            "chainrec: {name}: note: {} shown waits have a user stack of an exiting task ([no user stack: exiting]; not a failure); {} waits or wakings longer than the lazy threshold got no stack ([no stack: not captured])",
            st.stacks_exiting, st.stacks_not_captured
        );
    }
    if st.waits_before_trace + st.waits_without_waker + st.inconsistent + st.wakings_ignored > 0 {
        say!(
            "chainrec: {name}: note: {} waits began before the trace (not shown), {} blocked waits had no waking ([waker unknown]), {} still open at the end, {} wakings of non-blocked threads ignored, {} inconsistent switch sequences",
            st.waits_before_trace, st.waits_without_waker, st.waits_open_at_end, st.wakings_ignored, st.inconsistent
        );
    }
    if small_lines > 0 {
        say!(
            "chainrec: {name}: note: {small_lines} lines below 1 {} ({small_ns} ns in total) left out; use --unit ns",
            unit.name()
        );
    }
}

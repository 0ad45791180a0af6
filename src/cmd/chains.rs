//! `chainrec chains|offcpu|wakeup|offwake` (fronts chainrec-chain).
pub use super::filter::FilterArgs;
use anyhow::{bail, Context, Result};
/// Which view (`offcpu`, `wakeup`, `offwake` for [`run_view`]).
pub use chainrec_chain::View;
use chainrec_chain::{Dedup, Duration, Mode, OnCpuMode, Setup, Unit, DEFAULT_MAX_DEPTH};
use chainrec_report::svg::SvgOptions;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use std::io::Write;
use std::path::PathBuf;

const VIEW_EXAMPLES: &str = "\
Examples:
  # off-CPU time by stack (flamegraph.pl)
  chainrec offcpu trace.zst > offcpu.folded
  # of process 1234, uninterruptible (D) waits
  chainrec offcpu trace.zst -p 1234 --state 2
  # blocked time by waker stack, as an SVG
  chainrec wakeup trace.zst --svg wakeup.svg
  # off-CPU stack with its waker, waits >= 1 ms
  chainrec offwake trace.zst -m 1000 --unit ms
  chainrec offwake trace.zst --comm '^cr-' --window 0.5..1";

/// Arguments common to every folded view.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = VIEW_EXAMPLES)]
pub struct ViewArgs {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Weight unit of the folded lines.
    #[arg(long, default_value = "us", value_parser = unit_parser())]
    pub unit: Unit,
    /// Write an interactive flame-graph SVG to FILE instead of folded lines on stdout.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Write the folded lines to FILE instead of stdout (with --svg: both, from one run).
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Title of the SVG.
    #[arg(long, requires = "svg")]
    pub title: Option<String>,
    /// Width of the SVG in pixels.
    #[arg(long, default_value_t = 1200, value_name = "PX", requires = "svg",
          value_parser = clap::value_parser!(u32).range(200..=20000))]
    pub width: u32,
    /// Icicle graph: the root at the top, chains growing downwards.
    #[arg(long, requires = "svg")]
    pub inverted: bool,
    /// Frames narrower than PCT percent of the total are not drawn (their time stays in
    /// the frame below); flamegraph.pl's and inferno's default.
    #[arg(long, default_value_t = 0.1, value_name = "PCT", requires = "svg")]
    pub min_width: f64,
    /// What the weights count, as tooltips say it (default: the unit, e.g. `us`).
    #[arg(long, value_name = "NAME", requires = "svg")]
    pub countname: Option<String>,
    /// Decode chunks one at a time on this thread (default: in parallel with rayon).
    #[arg(long)]
    pub serial: bool,
    /// Bound the memory of the folded output: whenever its aggregate of distinct paths
    /// holds more than MIB MiB, write it to disk as a run and merge the runs at the end
    /// (the same lines, in the same order; a long, busy trace can have tens of millions of
    /// distinct lines). 0: never. Folded text only (not --svg).
    #[arg(long, value_name = "MIB", default_value_t = 32)]
    pub spill_above: usize,
    /// Directory for spilled runs (a private subdirectory, removed at the end).
    #[arg(long, value_name = "DIR", default_value_os_t = std::env::temp_dir())]
    pub spill_dir: PathBuf,
    /// Put each waiting thread's cgroup above it, as the root of its lines:
    /// `[cgroup: /system.slice/foo.service];comm;...`, or the pod and container its cgroup
    /// names: `[pod: <uid>];[container: <12 hex>];comm;...` (not in `wakeup`, whose root is
    /// the waker).
    #[arg(long)]
    pub cgroup_frames: bool,
    /// Put each waiting thread's process above it, as the root of its lines (below its
    /// cgroup frames with --cgroup-frames): `[process: nginx (1234)];nginx;...`, so that a
    /// process's threads (named alike or not) are one tower (not in `wakeup`).
    #[arg(long)]
    pub process_frames: bool,
}

const CHAINS_EXAMPLES: &str = "\
Filters select the waiting thread (the root of each line); chains follow into
any process.

Examples:
  chainrec chains trace.zst > chain.folded     every wait with its wakeup chain
  chainrec chains trace.zst --svg chain.svg    ... as a chain flame graph
  chainrec chains trace.zst -p 1234 -m 1000    waits >= 1 ms of process 1234
  chainrec chains trace.zst --comm '^nginx' --window 2..3
  chainrec chains trace.zst --mode last        every level weighs the whole wait
  chainrec chains trace.zst --max-depth 4 --unit ms
  chainrec chains r.*.zst                      a `record --rotate` set, as one
  chainrec chains rotated/                     ... or the directory holding them

Line layout (flamegraph.pl --color=chain / bcc compatible):
  comm;user frames;-;kernel frames            the waiting thread (root->leaf)
  # each waker level (leaf->root)
  --;kernel frames;-;user frames;waker comm
  # down to metal
  --;kernel frames;[hardirq: timer]
  # runnable, behind the task holding the CPU
  --;[run queue];holder comm
  # what a running waker did, by its samples (traces with samples)
  --;[on cpu];user frames;-;kernel frames
  # ... estimated from its nearest samples (not with --oncpu exact)
  --;[on cpu: estimated];user frames;-;kernel frames
Markers: [truncated] [cycle] [lost events] [waker unknown] [missing stack]
         [no stack: wait < 100us] [no user stack: preempted]";

/// Arguments of `chainrec chains`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = CHAINS_EXAMPLES)]
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
    #[arg(long, default_value = "bounded", value_parser = mode_parser())]
    pub mode: Mode,
    /// Leave run-queue time out: show only blocked time (no `[run queue]` levels, no
    /// preemptions), the graph before run-queue attribution. By default a wait's runnable
    /// part and each waker's runnable part are levels naming the tasks that held the CPU.
    #[arg(long)]
    pub no_runqueue: bool,
    /// A waker level's on-CPU time that holds no sample of the waker (traces with
    /// samples): `estimate` it from the waker's samples nearest in time, shown as
    /// `[on cpu: estimated]`, or leave it `[on cpu: no sample]` (`exact`).
    #[arg(long, default_value = "estimate", value_parser = oncpu_parser(), value_name = "HOW")]
    pub oncpu: OnCpuMode,
    /// Goroutine chains of the Go programs in the trace (their goroutine records, from
    /// `record`'s Go probes): each goroutine wait (park to execute) as a root, `goroutine`
    /// and its stack, then the goroutines that readied it, level by level, down to the Go
    /// runtime (`[go runtime: timer]`, `[go runtime: netpoll]`; a netpoll ready goes on
    /// into the thread that woke the poller out of epoll_wait, e.g. a peer's write with
    /// `[softirq: NET_RX]`, and that thread's goroutine): parked time, and runnable time
    /// (ready to execute, waiting for a P: `[run queue]`, the root's and each waker
    /// goroutine's; the part inside a stop-the-world of the process: `[go runtime: GC
    /// stop-the-world (GC mark termination)]` and the like, format 2.4; traces before
    /// format 2.3 have parked time only), deduplicated as
    /// thread chains are, as folded text or --svg; no thread filters yet.
    #[arg(long)]
    pub goroutines: bool,
}

/// `chainrec chains`.
pub fn run_chains(a: ChainsArgs) -> Result<()> {
    if a.max_depth == 0 {
        bail!("--max-depth must be at least 1");
    }
    if a.goroutines {
        return goroutine_chains(&a);
    }
    let mode = a.mode;
    let dedup = if a.no_dedup { Dedup::Off } else { Dedup::Auto };
    analyse(
        &a.view,
        View::Chains,
        mode,
        a.max_depth,
        dedup,
        !a.no_runqueue,
        a.oncpu,
    )
}

/// `chainrec chains --goroutines`.
fn goroutine_chains(a: &ChainsArgs) -> Result<()> {
    let v = &a.view;
    if v.file.len() != 1 || v.file[0].is_dir() {
        bail!("--goroutines reads one trace file");
    }
    let name = "chains --goroutines";
    let an = super::open_trace(&v.file, name)?;
    let g = match chainrec_chain::goroutine_chains_of(&an, a.max_depth, !a.no_dedup) {
        Err(e @ chainrec_chain::ChainError::NoGoroutines) => {
            bail!("{}: {e}", super::label(&v.file))
        }
        g => g?,
    };
    // In the unit, the lines that round to 0 left out and counted (as every view does).
    let rounded = v
        .unit
        .round_lines(g.lines.iter().map(|(l, ns)| (l.as_str(), *ns)));
    if let Some(path) = &v.svg {
        let title = v
            .title
            .clone()
            .unwrap_or_else(|| format!("Goroutine chains: {}", super::label(&v.file)));
        let mut opts = svg_options(v, &title, v.unit.name(), true)?;
        opts.root_label = format!(
            "all: {} goroutine waits{}",
            g.stats.waits - g.stats.hidden_by_dedup,
            if a.no_dedup { "" } else { " (dedup)" }
        );
        let lines: Vec<(String, u64)> = rounded
            .kept
            .iter()
            .map(|&(l, w)| (l.to_string(), w))
            .collect();
        render_svg(&lines, &opts, path)?;
        say!("chainrec: {name}: wrote {}", path.display());
        if v.folded.is_none() {
            return goroutine_notes(name, a, &g);
        }
    }
    let mut out: Box<dyn Write> = match &v.folded {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let written = rounded
        .kept
        .iter()
        .try_for_each(|(line, w)| writeln!(out, "{line} {w}"))
        .and_then(|()| out.flush());
    match written {
        // The reader stopped (`| head`): not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        r => r.context("writing folded output")?,
    }
    if let Some(l) = rounded.left_out_note() {
        say!("chainrec: {name}: {l}");
    }
    goroutine_notes(name, a, &g)
}

/// What `chains --goroutines` counted, on stderr.
fn goroutine_notes(name: &str, a: &ChainsArgs, g: &chainrec_chain::GoChains) -> Result<()> {
    for note in g.notes(a.max_depth) {
        say!("chainrec: {name}: {note}");
    }
    Ok(())
}

/// `chainrec offcpu|wakeup|offwake`.
pub fn run_view(view: View, a: ViewArgs) -> Result<()> {
    // Single-level views need only the first hop.
    analyse(
        &a,
        view,
        Mode::Bounded,
        1,
        Dedup::Off,
        false,
        OnCpuMode::default(),
    )
}

fn analyse(
    a: &ViewArgs,
    view: View,
    mode: Mode,
    max_depth: usize,
    dedup: Dedup,
    runqueue: bool,
    oncpu: OnCpuMode,
) -> Result<()> {
    let several = a.file.len() > 1 || a.file[0].is_dir();
    let hosts = match several {
        true => {
            chainrec_format::files_by_host(&a.file).map_err(|e| super::with_paths(&a.file, e))?
        }
        false => Vec::new(),
    };
    if hosts.len() < 2 {
        return analyse_files(
            a, &a.file, None, view, mode, max_depth, dedup, runqueue, oncpu, None,
        );
    }
    // Traces of several hosts: one engine run per host (each host's files are one
    // recording), the host as the root frame of its lines; with --svg, the lines of every
    // host drawn as one graph.
    if a.folded.is_some() {
        bail!(
            "--folded FILE with traces of {} hosts is not supported yet: write the folded lines (each starting with its host) to stdout",
            hosts.len()
        );
    }
    let mut hosts_svg = a.svg.as_ref().map(|_| HostsSvg::default());
    for (host, files) in &hosts {
        analyse_files(
            a,
            files,
            Some(host),
            view,
            mode,
            max_depth,
            dedup,
            runqueue,
            oncpu,
            hosts_svg.as_mut(),
        )?;
    }
    if let (Some(path), Some(h)) = (&a.svg, hosts_svg) {
        let names: Vec<String> = hosts.iter().map(|(h, _)| host_frame(h)).collect();
        let title = a.title.clone().unwrap_or_else(|| {
            format!(
                "{}: {} hosts: {}",
                view.title(),
                names.len(),
                names.join(", ")
            )
        });
        let mut opts = svg_options(a, &title, a.unit.name(), view != View::OffCpu)?;
        opts.root_label = format!(
            "all: {} waits on {} hosts{}",
            h.waits,
            names.len(),
            if h.dedup { " (dedup)" } else { "" }
        );
        render_svg(&h.lines, &opts, path)?;
        say!(
            "chainrec: {}: wrote {} ({} hosts, {} lines)",
            view.name(),
            path.display(),
            names.len(),
            h.lines.len()
        );
    }
    Ok(())
}

/// The folded lines of several hosts collected for one SVG (each line led by its host).
#[derive(Default)]
struct HostsSvg {
    /// `host;...` lines with their weights in the output unit.
    lines: Vec<(String, u64)>,
    /// Waits drawn, over all hosts.
    waits: u64,
    /// Whether dedup hid waits inside other chains.
    dedup: bool,
}

/// A writer that starts every line with `prefix` (the host frame of a line).
struct LinePrefix<W: Write> {
    inner: W,
    prefix: Vec<u8>,
    at_line_start: bool,
}

impl<W: Write> Write for LinePrefix<W> {
    /// Writes all of `buf` in one write to `inner` (the BufWriter in front hands over 64 KiB
    /// at a time): one write per line made stdout's line buffering flush, i.e. make a
    /// syscall, at every line, and the byte-by-byte newline search cost 11 % of busy-server's
    /// `chains` (docs/BENCHMARKS.md, session 15).
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.prefix.is_empty() {
            self.inner.write_all(buf)?;
            return Ok(buf.len());
        }
        let mut out = Vec::with_capacity(buf.len() + buf.len() / 16);
        for line in buf.split_inclusive(|&b| b == b'\n') {
            if self.at_line_start {
                out.extend_from_slice(&self.prefix);
            }
            out.extend_from_slice(line);
            self.at_line_start = line.ends_with(b"\n");
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The root frame naming `host` (`;` would split it into two frames).
fn host_frame(host: &str) -> String {
    match host {
        "" => "[unknown host]".to_string(),
        h => h.replace(';', "_"),
    }
}

#[allow(clippy::too_many_arguments)]
fn analyse_files(
    a: &ViewArgs,
    files: &[PathBuf],
    host: Option<&str>,
    view: View,
    mode: Mode,
    max_depth: usize,
    dedup: Dedup,
    runqueue: bool,
    oncpu: OnCpuMode,
    hosts_svg: Option<&mut HostsSvg>,
) -> Result<()> {
    let name = match host {
        Some(h) => format!("{}: host {}", view.name(), host_frame(h)),
        None => view.name().to_string(),
    };
    let name = name.as_str();
    let unit = a.unit;
    let t0 = std::time::Instant::now();
    let an = super::open_trace(files, name)?;
    let (meta, tables) = (an.meta(), an.tables());
    let duration = if view == View::OffCpu {
        Duration::OffCpu
    } else {
        Duration::Blocked
    };
    if a.cgroup_frames {
        if view == View::Wakeup {
            bail!("--cgroup-frames: the wakeup view's lines start at the waker, not at a waiting thread; use offwake or chains");
        }
        if !tables.has_cgroups() {
            return Err(chainrec_chain::ChainError::NoCgroups {
                flag: "--cgroup-frames",
            })
            .with_context(|| super::label(files));
        }
    }
    if a.process_frames && view == View::Wakeup {
        bail!("--process-frames: the wakeup view's lines start at the waker, not at a waiting thread; use offwake or chains");
    }
    let setup = Setup {
        mode,
        max_depth,
        dedup,
        filter: a.filter.to_filter(&an, duration)?,
        parallel: !a.serial,
        runqueue,
        oncpu,
        cgroup_frames: a.cgroup_frames,
        process_frames: a.process_frames,
    };
    // Folded text alone can be merged from runs on disk (--spill-above).
    let spill = (hosts_svg.is_none() && a.svg.is_none() && a.spill_above > 0).then(|| {
        chainrec_chain::SpillTo {
            dir: a.spill_dir.clone(),
            budget_bytes: a.spill_above.saturating_mul(1 << 20),
        }
    });
    let (summary, graph) = match &spill {
        Some(to) => an.fold_spilling(setup, view, to, |_| {}),
        None => an.fold(setup, view, |_| {}),
    }
    .with_context(|| format!("{}: reading events", super::label(files)))?;
    let (mut nlines, mut small_lines, mut small_ns) = (0usize, 0u64, 0u64);
    // Several hosts' lines for one SVG: collected here, drawn by the caller.
    let collecting = hosts_svg.is_some();
    if let Some(collect) = hosts_svg {
        let mut buf = LinePrefix {
            inner: Vec::new(),
            prefix: format!("{};", host_frame(host.unwrap_or_default())).into_bytes(),
            at_line_start: true,
        };
        let sum = graph
            .write_folded(unit, &mut buf)
            .context("collecting folded lines")?;
        (small_lines, small_ns) = (sum.small_lines, sum.small_ns);
        for line in String::from_utf8_lossy(&buf.inner).lines() {
            let parsed = line
                .rsplit_once(' ')
                .and_then(|(stack, w)| Some((stack.to_string(), w.parse().ok()?)));
            let Some(l) = parsed else {
                bail!("a folded line without a weight: {line:?}");
            };
            collect.lines.push(l);
            nlines += 1;
        }
        collect.waits += graph.waits_in_view();
        collect.dedup |= view == View::Chains && summary.dedup;
    }
    // One fold for every output asked: the SVG and the folded lines.
    if let (false, Some(path)) = (collecting, &a.svg) {
        let title = a
            .title
            .clone()
            .unwrap_or_else(|| format!("{}: {}", view.title(), super::label(files)));
        let mut opts = svg_options(a, &title, unit.name(), view != View::OffCpu)?;
        opts.root_label = format!(
            "all: {} waits{}",
            graph.waits_in_view(),
            if view == View::Chains && summary.dedup {
                " (dedup)"
            } else {
                ""
            }
        );
        // Drawn straight from the path trie (no list of lines in memory).
        let mut buf = Vec::new();
        let stats = chainrec_report::svg::render_paths(&graph, unit, &opts, &mut buf)
            .with_context(|| format!("drawing {}", path.display()))?;
        std::fs::write(path, &buf).with_context(|| format!("writing {}", path.display()))?;
        nlines = stats.stacks;
        say!(
            "chainrec: {name}: wrote {} ({} paths, {} frames drawn, {} too narrow)",
            path.display(),
            stats.stacks,
            stats.frames - stats.frames_too_narrow,
            stats.frames_too_narrow
        );
    }
    if !collecting && (a.svg.is_none() || a.folded.is_some()) {
        // Streamed straight from the path trie: no list of lines in memory.
        let (inner, dest): (Box<dyn Write>, _) = match &a.folded {
            Some(p) => (
                Box::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("creating {}", p.display()))?,
                ),
                format!("writing {}", p.display()),
            ),
            None => (
                Box::new(std::io::stdout().lock()),
                "writing folded output".to_string(),
            ),
        };
        let mut out = std::io::BufWriter::with_capacity(
            1 << 16,
            LinePrefix {
                inner,
                prefix: host.map_or_else(Vec::new, |h| format!("{};", host_frame(h)).into_bytes()),
                at_line_start: true,
            },
        );
        let r = graph.write_folded(unit, &mut out).and_then(|sum| {
            nlines = sum.lines as usize;
            small_lines = sum.small_lines;
            small_ns = sum.small_ns;
            out.flush()
        });
        match r {
            // A spill file, not the output: its error names the file and what was wrong.
            Err(e) if chainrec_chain::SpillError::of(&e).is_some() => {
                return Err(e).context("merging the runs spilled to disk (--spill-above)");
            }
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            r => r.context(dest)?,
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    memstat(name);
    if let (runs @ 1.., bytes) = graph.spilled() {
        say!(
            "chainrec: {name}: note: the distinct paths outgrew --spill-above {} MiB: written to {} in {runs} runs ({:.1} MB) and merged (same output)",
            a.spill_above,
            a.spill_dir.display(),
            bytes as f64 / 1e6
        );
    }
    let s = &summary;
    say!("chainrec: {name}: {}", s.headline(secs, nlines));
    for l in s.stats.output_notes(meta, meta.start_ns) {
        say!("chainrec: {name}: {l}");
    }
    if let Some(l) = unit.left_out_note(small_lines, small_ns) {
        say!("chainrec: {name}: {l}");
    }
    if host.is_none() {
        // The one analysis of this run: the process exits next.
        super::leave_to_exit(graph);
        super::leave_to_exit(an);
    }
    Ok(())
}

/// With CHAINREC_MEMSTAT set: peak and current memory, split into anonymous (engine
/// state) and file-backed (the mmapped trace) pages, for docs/BENCHMARKS.md.
fn memstat(name: &str) {
    if std::env::var_os("CHAINREC_MEMSTAT").is_none() {
        return;
    }
    if let Ok(st) = std::fs::read_to_string("/proc/self/status") {
        let pick: Vec<String> = st
            .lines()
            .filter(|l| {
                ["VmHWM", "RssAnon", "RssFile"]
                    .iter()
                    .any(|k| l.starts_with(k))
            })
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        say!("chainrec: {name}: memory: {}", pick.join(", "));
    }
}

/// `--unit ns|us|ms` (the possible values listed in `--help`).
pub(crate) fn unit_parser() -> impl TypedValueParser<Value = Unit> {
    PossibleValuesParser::new(["ns", "us", "ms"]).try_map(|s| Unit::parse(&s))
}

/// `--mode bounded|last`.
pub(crate) fn oncpu_parser() -> impl TypedValueParser<Value = OnCpuMode> {
    PossibleValuesParser::new(["estimate", "exact"]).map(|s| match s.as_str() {
        "exact" => OnCpuMode::Exact,
        _ => OnCpuMode::Estimate,
    })
}

pub(crate) fn mode_parser() -> impl TypedValueParser<Value = Mode> {
    PossibleValuesParser::new(["bounded", "last"]).map(|s| match s.as_str() {
        "last" => Mode::Last,
        _ => Mode::Bounded,
    })
}

/// SVG options from a view's arguments (`--title` resolved by the caller, `--width`,
/// `--inverted`, `--min-width`, `--countname`).
pub(crate) fn svg_options(
    a: &ViewArgs,
    title: &str,
    unit: &str,
    chain_layout: bool,
) -> Result<SvgOptions> {
    if !(0.0..100.0).contains(&a.min_width) {
        bail!("--min-width is a percentage of the total: 0 <= PCT < 100");
    }
    let mut opts = SvgOptions::new(title, unit, chain_layout);
    opts.width = a.width as usize;
    opts.inverted = a.inverted;
    opts.min_width_pct = a.min_width;
    opts.count_name = a.countname.clone().unwrap_or_default();
    Ok(opts)
}

/// Draw folded `(line, weight)` pairs (weights in the unit of `opts`) to `path`.
pub(crate) fn render_svg(
    folded: &[(String, u64)],
    opts: &SvgOptions,
    path: &std::path::Path,
) -> Result<()> {
    let mut buf = Vec::new();
    let stats = chainrec_report::svg::render(folded, opts, &mut buf)
        .with_context(|| format!("drawing {}", path.display()))?;
    std::fs::write(path, &buf).with_context(|| format!("writing {}", path.display()))?;
    if stats.zero_weight_lines > 0 {
        say!(
            "chainrec: {} stacks with zero weight not drawn",
            stats.zero_weight_lines
        );
    }
    Ok(())
}

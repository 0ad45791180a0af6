//! `chainrec oncpu` (and `hotcold`): flame graphs from the on-CPU samples of a trace.
use super::chains::ViewArgs;
use anyhow::{Context, Result};
use chainrec_chain::oncpu::{hot_cold, OnCpuFold};
use chainrec_chain::{fold_oncpu, Analysis, Duration};
use chainrec_format::fmt_ns;
use std::io::Write;

const ONCPU_EXAMPLES: &str = "\
Examples:
  # CPU flame graph (flamegraph.pl, inferno)
  chainrec oncpu trace.zst > oncpu.folded
  # ... as an interactive SVG
  chainrec oncpu trace.zst --svg oncpu.svg
  # one process, one second
  chainrec oncpu trace.zst -p 1234 --window 2..3

Line layout: comm;user frames root->leaf;-;kernel frames root->leaf (the idle
task is `swapper`). Weight: the CPU time the samples stand for (samples x the
sampling period, e.g. 10.1 ms at the default 99 Hz), in --unit. Needs a trace
recorded with samples (the default of `chainrec record`; not --no-samples).";

/// Arguments of `chainrec oncpu`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = ONCPU_EXAMPLES)]
pub struct OnCpuArgs {
    #[command(flatten)]
    pub view: ViewArgs,
}

/// The samples of the trace `a.file` folded under `a.filter`; an error when the trace took
/// none.
pub(crate) fn fold(an: &Analysis, a: &ViewArgs, name: &str) -> Result<OnCpuFold> {
    if a.cgroup_frames {
        anyhow::bail!("--cgroup-frames: not available in {name} (its lines are samples, not waits); use --cgroup to select a cgroup");
    }
    if a.process_frames {
        anyhow::bail!("--process-frames: not available in {name} (its lines are samples, not waits); use -p to select a process");
    }
    an.sampling().with_context(|| super::label(&a.file))?;
    let filter = a.filter.to_filter(an, Duration::OffCpu)?;
    let f = fold_oncpu(an, &filter, !a.serial)
        .with_context(|| format!("{}: reading events", super::label(&a.file)))?;
    for l in f.stats.summary_lines(an.meta()) {
        say!("chainrec: {name}: {l}");
    }
    Ok(f)
}

/// Write weighted lines: folded on stdout, or an SVG; lines rounding to 0 are counted.
pub(crate) fn output(
    a: &ViewArgs,
    name: &str,
    title: &str,
    lines: impl Iterator<Item = (String, u64)>,
    chain_layout: bool,
) -> Result<()> {
    let unit = a.unit;
    let r = unit.round_lines(lines);
    match &a.svg {
        Some(path) => {
            let title = a.title.clone().unwrap_or_else(|| title.to_string());
            let opts = super::chains::svg_options(a, &title, unit.name(), chain_layout)?;
            super::chains::render_svg(&r.kept, &opts, path)?;
            say!(
                "chainrec: {name}: wrote {} ({} lines)",
                path.display(),
                r.kept.len()
            );
        }
        None => super::write_stdout(&folded_text(&r.kept))?,
    }
    if let Some(l) = r.left_out_note() {
        say!("chainrec: {name}: {l}");
    }
    Ok(())
}

/// Weighted lines as folded text (`line weight`, one a line).
pub(crate) fn folded_text(lines: &[(String, u64)]) -> String {
    let mut s = String::new();
    for (l, w) in lines {
        s.push_str(l);
        s.push(' ');
        s.push_str(&w.to_string());
        s.push('\n');
    }
    s
}

const HOTCOLD_EXAMPLES: &str = "\
Examples:
  # one thread's wall time, hot and cold
  chainrec hotcold trace.zst -t 1234 --svg hot.svg
  chainrec hotcold trace.zst -p 1234 > hotcold.folded

Per thread, on-CPU samples (weighted as the CPU time they stand for) and
off-CPU waits with their chains (as `chains --no-dedup`, run-queue levels
included), in one graph whose width is the threads' wall time:
  # hot (warm colours in the SVG)
  comm;[on cpu];user frames;-;kernel frames
  # cold (the wait and its chain)
  comm;[off cpu];user;-;kernel;--;waker...
Hot time is estimated from samples (samples x period): the wider the window,
the closer hot + cold is to the wall time. Needs a trace with samples.";

/// Arguments of `chainrec hotcold`.
#[derive(clap::Args, Clone, Debug)]
#[command(after_help = HOTCOLD_EXAMPLES)]
pub struct HotColdArgs {
    #[command(flatten)]
    pub view: ViewArgs,
}

/// `chainrec hotcold`.
pub fn run_hotcold(a: HotColdArgs) -> Result<()> {
    let a = a.view;
    let an = super::open_trace(&a.file, "hotcold")?;
    let hot = fold(&an, &a, "hotcold")?;
    let setup = chainrec_chain::Setup {
        dedup: chainrec_chain::Dedup::Off,
        filter: a.filter.to_filter(&an, Duration::OffCpu)?,
        parallel: !a.serial,
        ..chainrec_chain::Setup::default()
    };
    let (summary, graph) = an
        .fold(setup, chainrec_chain::View::Chains, |_| {})
        .with_context(|| format!("{}: reading events", super::label(&a.file)))?;
    let cold = graph.folded_ns();
    let hc = hot_cold(&hot, cold);
    say!(
        "chainrec: hotcold: on CPU {} (from samples), off CPU {} ({} waits with their chains)",
        fmt_ns(hc.hot_ns),
        fmt_ns(hc.cold_ns),
        summary.stats.waits
    );
    let title = format!("Hot/cold time: {}", super::label(&a.file));
    output(&a, "hotcold", &title, hc.lines.into_iter(), true)
}

/// `chainrec oncpu`.
pub fn run(a: OnCpuArgs) -> Result<()> {
    let a = a.view;
    let an = super::open_trace(&a.file, "oncpu")?;
    let f = fold(&an, &a, "oncpu")?;
    let title = format!("On-CPU time: {}", super::label(&a.file));
    output(
        &a,
        "oncpu",
        &title,
        f.lines_ns().map(|(l, ns)| (l.to_string(), ns)),
        false,
    )?;
    std::io::stderr().flush().ok();
    super::leave_to_exit(an);
    Ok(())
}

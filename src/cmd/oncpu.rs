//! `chainrec oncpu` (and `hotcold`): flame graphs from the on-CPU samples of a trace.
use super::chains::ViewArgs;
use anyhow::{bail, Context, Result};
use chainrec_chain::fold_oncpu;
use chainrec_chain::{Analysis, Duration, OnCpuFold, Unit};
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
sampling period, e.g. 20.4 ms at the default 49 Hz), in --unit. Needs a trace
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
    if an.meta().sampling().is_none() {
        let (maj, min) = an.reader().version();
        bail!(
            "{}: no on-CPU samples in this trace ({}); record with `chainrec record` (samples are on by default)",
            a.file.display(),
            if maj < 2 {
                format!("format {maj}.{min} predates them")
            } else {
                "sampling was off: --no-samples, or a synthetic scenario without samples".into()
            }
        );
    }
    let filter = a.filter.to_filter(an, Duration::OffCpu)?;
    let f = fold_oncpu(an, &filter, !a.serial)
        .with_context(|| format!("{}: reading events", a.file.display()))?;
    let s = &f.stats;
    say!(
        "chainrec: {name}: {} samples in the trace, {} shown ({} of the idle task, {} without any stack), {} ns of CPU time each",
        s.samples, s.shown, s.idle, s.no_stack, s.period_ns
    );
    if let Some(sm) = an.meta().sampling() {
        if sm.lost + sm.no_kstack + sm.no_ustack > 0 {
            say!(
                "chainrec: {name}: note: recording lost {} samples (ring buffer full); {} without kernel stack, {} without user stack ([missing stack])",
                sm.lost, sm.no_kstack, sm.no_ustack
            );
        }
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
    let unit = Unit::parse(&a.unit)?;
    let (mut kept, mut small, mut small_ns) = (Vec::new(), 0u64, 0u64);
    for (l, ns) in lines {
        match unit.round(ns) {
            0 => {
                small += 1;
                small_ns += ns;
            }
            w => kept.push((l, w)),
        }
    }
    match &a.svg {
        Some(path) => {
            let title = a.title.clone().unwrap_or_else(|| title.to_string());
            let opts = super::chains::svg_options(a, &title, unit.name(), chain_layout)?;
            super::chains::render_svg(&kept, &opts, path)?;
            say!(
                "chainrec: {name}: wrote {} ({} lines)",
                path.display(),
                kept.len()
            );
        }
        None => {
            let mut s = String::new();
            for (l, w) in &kept {
                s.push_str(l);
                s.push(' ');
                s.push_str(&w.to_string());
                s.push('\n');
            }
            super::write_stdout(&s)?;
        }
    }
    if small > 0 {
        say!(
            "chainrec: {name}: note: {small} lines below 1 {} ({small_ns} ns in total) left out; use --unit ns",
            unit.name()
        );
    }
    Ok(())
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
    let (done, folded) = an
        .fold(setup, chainrec_chain::View::Chains, |_| {})
        .with_context(|| format!("{}: reading events", a.file.display()))?;
    let cold = folded.folded_ns(done.nodes(), an.tables(), an.meta());
    let (mut hot_ns, mut cold_ns) = (0u64, 0u64);
    let mut lines: Vec<(String, u64)> = Vec::new();
    for (l, ns) in hot.lines_ns() {
        hot_ns += ns;
        let (comm, rest) = l.split_once(';').unwrap_or((l, ""));
        let mut s = format!("{comm};{}", chainrec_chain::ONCPU_FRAME);
        if !rest.is_empty() {
            s.push(';');
            s.push_str(rest);
        }
        lines.push((s, ns));
    }
    for (l, ns) in cold {
        cold_ns += ns;
        let (comm, rest) = l.split_once(';').unwrap_or((&l, ""));
        let mut s = format!("{comm};[off cpu]");
        if !rest.is_empty() {
            s.push(';');
            s.push_str(rest);
        }
        lines.push((s, ns));
    }
    let st = &done.summary.stats;
    say!(
        "chainrec: hotcold: on CPU {} (from samples), off CPU {} ({} waits with their chains)",
        chainrec_report::top::fmt_ns(hot_ns),
        chainrec_report::top::fmt_ns(cold_ns),
        st.waits
    );
    let title = format!("Hot/cold time: {}", a.file.display());
    output(&a, "hotcold", &title, lines.into_iter(), true)
}

/// `chainrec oncpu`.
pub fn run(a: OnCpuArgs) -> Result<()> {
    let a = a.view;
    let an = super::open_trace(&a.file, "oncpu")?;
    let f = fold(&an, &a, "oncpu")?;
    let title = format!("On-CPU time: {}", a.file.display());
    output(
        &a,
        "oncpu",
        &title,
        f.lines_ns().map(|(l, ns)| (l.to_string(), ns)),
        false,
    )?;
    std::io::stderr().flush().ok();
    Ok(())
}

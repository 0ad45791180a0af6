//! `chainrec serve` and `chainrec report` (front chainrec-explore).
use anyhow::{Context, Result};
use chainrec_explore::server::Listener;
use chainrec_explore::Explorer;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

const EXAMPLES: &str = "\
The page: the subsecond-offset heat map of waits; drag across it (or click a
column) for the chain graph of that time range, as `chains --window` computes
it; shift-drag a second range for the differential view against it (red: more
time per second than in that baseline, blue: less); click a frame to zoom and
list the longest waits through it, each with its thread's critical path around
the wait. Read-only; works offline (the page is built into the binary).

Examples:
  chainrec serve trace.zst                 open http://127.0.0.1:7460/
  chainrec serve trace.zst --port 0        any free port (printed)
  # from another machine: ssh -L 7460:127.0.0.1:7460 HOST, then the URL above
  chainrec serve trace.zst --bind 0.0.0.0  every interface (warns: no auth)";

/// Arguments of `chainrec serve`.
#[derive(clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct Args {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
    /// TCP port (0: any free one).
    #[arg(long, default_value_t = 7460)]
    pub port: u16,
    /// Address to listen on. Default loopback only; another address is served only when
    /// named here, with a warning (the page has no authentication).
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<IpAddr>,
    /// No progress bar while the trace is indexed.
    #[arg(long, short)]
    pub quiet: bool,
    /// Seconds of trace between the engine checkpoints a range resumes from (at most 16
    /// are kept: the trace's duration / 16 when larger), rounded so that they fall right
    /// before the heat map's column starts (a whole number of seconds, or a fraction of
    /// one whose multiples hold each second). Smaller: faster ranges, more memory (each
    /// checkpoint is a copy of the engine's state).
    #[arg(long, value_name = "SECONDS", default_value = "0.5", value_parser = parse_every)]
    pub checkpoint_every: u64,
}

/// `--checkpoint-every`: positive seconds, as nanoseconds.
fn parse_every(s: &str) -> Result<u64, String> {
    match s.parse::<f64>() {
        Ok(v) if (1e-6..=1e6).contains(&v) => Ok((v * 1e9).round() as u64),
        _ => Err(format!("{s:?}: want seconds between 0.000001 and 1000000")),
    }
}

/// `chainrec serve`.
pub fn run(a: Args) -> Result<()> {
    let ip = a.bind.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    if !ip.is_loopback() {
        say!("chainrec: serve: warning: listening on {ip}, beyond this machine: anyone who can reach it can read this trace (no authentication)");
    }
    let an = super::open_trace(&a.file, "serve")?;
    let t0 = std::time::Instant::now();
    let explorer = Explorer::start(an, super::label(&a.file), a.quiet, a.checkpoint_every)
        .with_context(|| format!("{}: indexing", super::label(&a.file)))?;
    say!(
        "chainrec: serve: heat map of {} events in {:.2} s; checkpoints go on in the background (ranges answer meanwhile, slower)",
        explorer.analysis().reader().event_count(),
        t0.elapsed().as_secs_f64()
    );
    let listener = Listener::bind(SocketAddr::new(ip, a.port))?;
    say!("chainrec: serve: {} (Ctrl-C stops)", listener.url());
    std::thread::scope(|scope| {
        scope.spawn(|| match explorer.wait_indexed() {
            Ok(()) => say!(
                "chainrec: serve: checkpoints taken in {:.2} s",
                t0.elapsed().as_secs_f64()
            ),
            Err(e) => say!("chainrec: serve: warning: checkpoints: {e}; ranges after it decode from an earlier point (slower, same result)"),
        });
        listener.run(&explorer);
    });
    Ok(())
}

const REPORT_EXAMPLES: &str = "\
The `serve` page as one self-contained HTML file (style, script and data
inlined; a Content-Security-Policy forbids every fetch): the heat map, the
whole trace's chain graph and those of the heaviest seconds, to attach to a
ticket and open from disk with no server and no network. It cannot compute
other ranges, list the waits through a frame or draw critical paths:
`chainrec serve` does.

Examples:
  chainrec report trace.zst -o report.html   whole trace + 8 heaviest seconds
  chainrec report trace.zst -o report.html --ranges 20";

/// Arguments of `chainrec report`.
#[derive(clap::Args)]
#[command(after_help = REPORT_EXAMPLES)]
pub struct ReportArgs {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
    /// Output HTML file.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Precomputed ranges besides the whole trace: the heat map's heaviest seconds.
    #[arg(long, default_value_t = chainrec_explore::DEFAULT_REPORT_RANGES)]
    pub ranges: usize,
    /// The graph width (pixels) the precomputed graphs are merged for: each frame's
    /// children narrower than one pixel of it become one grey "[N frames below a pixel]"
    /// frame (widths exact). 0: every frame (pruned above 50,000 per graph: a far larger
    /// file).
    #[arg(long, value_name = "PX", default_value_t = chainrec_explore::DEFAULT_REPORT_PX,
          value_parser = clap::value_parser!(u64).range(0..=chainrec_explore::MAX_PX))]
    pub width: u64,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `chainrec report`.
pub fn run_report(a: ReportArgs) -> Result<()> {
    let an = super::open_trace(&a.file, "report")?;
    let label = super::label(&a.file);
    let name = match a.file.as_slice() {
        [one] => one.file_name().map_or_else(
            || one.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
        _ => label.clone(),
    };
    let explorer =
        Explorer::new(an, name, a.quiet).with_context(|| format!("{label}: indexing"))?;
    let page = explorer
        .static_page(a.ranges, a.width)
        .with_context(|| format!("{label}: precomputing ranges"))?;
    std::fs::write(&a.output, &page)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    say!(
        "chainrec: report: {} ({:.1} MB): the whole trace and up to {} heaviest seconds precomputed",
        a.output.display(),
        page.len() as f64 / 1e6,
        a.ranges
    );
    Ok(())
}

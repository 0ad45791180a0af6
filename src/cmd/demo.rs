//! `chainrec demo` (fronts chainrec-demo; needs the `record` feature).
use anyhow::{bail, Result};
use chainrec_report::top;
use std::path::PathBuf;
use std::time::Duration;

const DEMO_EXAMPLES: &str = "\
Examples (root, or CAP_BPF + CAP_PERFMON):
  # 3 s; writes chainrec-demo/{trace.zst,chain.folded,chain.svg}
  chainrec demo
  chainrec demo -o /tmp/demo --duration 10 --period-us 500";

/// Arguments of `chainrec demo`.
#[derive(clap::Args)]
#[command(after_help = DEMO_EXAMPLES)]
pub struct DemoArgs {
    /// Output directory (created).
    #[arg(short, long, default_value = "chainrec-demo")]
    pub output: PathBuf,
    /// Seconds to run the workload.
    #[arg(long, default_value_t = 3.0)]
    pub duration: f64,
    /// Workload timer period in microseconds.
    #[arg(long, default_value_t = 2000)]
    pub period_us: u64,
}

/// `chainrec demo`: record the built-in workload, write trace, folded chain graph and SVG.
pub fn run(a: DemoArgs) -> Result<()> {
    if !(0.5..=600.0).contains(&a.duration) {
        bail!("--duration must be between 0.5 and 600 seconds");
    }
    if a.period_us == 0 || a.period_us > 1_000_000 {
        bail!("--period-us must be in 1..=1000000");
    }
    chainrec_demo::prepare_dir(&a.output)?;
    let opts = chainrec_demo::DemoOptions {
        dir: a.output.clone(),
        duration: Duration::from_secs_f64(a.duration),
        period: Duration::from_micros(a.period_us),
        command_line: std::env::args().collect(),
    };
    say!(
        "chainrec demo: recording cr-timer -> cr-relay -> cr-sink (pipes) for {:.1} s",
        a.duration
    );
    let o = chainrec_demo::run(&opts)?;
    say!(
        "chainrec demo: recorded {} events ({} bytes); {} messages passed",
        o.events,
        o.bytes,
        o.messages
    );
    for line in &o.fallbacks {
        say!("chainrec demo: {line}");
    }
    if o.lost_events > 0 {
        say!(
            "chainrec demo: warning: LOST EVENTS: {} (the chains may be incomplete)",
            o.lost_events
        );
    }
    let mut text = String::new();
    match &o.top {
        Some(best) => {
            let one = top::TopReport {
                entries: vec![top::TopEntry {
                    rank: 1,
                    ..best.clone()
                }],
                chains: 0,
                ranked_waits: best.count,
                preempted: 0,
                without_waker: 0,
            };
            text.push_str("Top chain of cr-sink (the most total blocked time):\n");
            let t = top::render_text(&one);
            // Drop the summary line (it would describe only this entry).
            text.push_str(t.rsplit_once("\n\n").map(|(a, _)| a).unwrap_or(&t));
            text.push('\n');
        }
        None => {
            text.push_str("No blocked wait of the workload threads had a waker in the trace.\n")
        }
    }
    text.push_str(&format!(
        "\nFiles:\n  {}  (the recording)\n  {}  (folded chain graph, {} lines)\n  {}  (open in a browser: click to zoom, Search or Ctrl-F)\n",
        o.trace.display(),
        o.folded.display(),
        o.lines,
        o.svg.display()
    ));
    text.push_str(&format!(
        "chain.folded and chain.svg keep the waits of the three workload threads only\n\
         (-t {},{},{}: cr-timer, cr-relay, cr-sink), with dedup on, so\n\
         the relay's and the timer's waits appear once, inside cr-sink's chain.\n\
         `chainrec chains` of the trace shows every recorded thread (chainrec's own\n\
         too, and whatever woke them), so it has more lines.\n",
        o.tids[0], o.tids[1], o.tids[2]
    ));
    text.push_str(&format!(
        "Next:\n  {c} top {t}\n  {c} chains {t} --svg all.svg\n  {c} heatmap {t} -o heat.svg\n",
        c = self_command(),
        t = shell_word(&o.trace.display().to_string())
    ));
    super::write_stdout(&text)?;
    Ok(())
}

/// How to run this very binary again from the current directory, for the "Next:" lines:
/// `chainrec` when that is what the PATH finds, else its path relative to the current
/// directory (`./target/release/chainrec` after `./x.sh demo`), else its absolute path.
fn self_command() -> String {
    let Ok(exe) = std::env::current_exe() else {
        return "chainrec".into();
    };
    let exe = exe.canonicalize().unwrap_or(exe);
    let on_path = std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path)
            .map(|d| d.join("chainrec"))
            .find(|c| c.is_file())
            .and_then(|c| c.canonicalize().ok())
            .is_some_and(|c| c == exe)
    });
    if on_path {
        return "chainrec".into();
    }
    let cwd = std::env::current_dir().and_then(|d| d.canonicalize());
    let shown = match cwd.as_deref().map(|d| exe.strip_prefix(d)) {
        Ok(Ok(rel)) => format!("./{}", rel.display()),
        _ => exe.display().to_string(),
    };
    shell_word(&shown)
}

/// `s` quoted for a POSIX shell when it needs quoting.
fn shell_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

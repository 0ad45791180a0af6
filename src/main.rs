//! `chainrec`: record scheduler events with BPF and explain every wait by the whole
//! chain of wakeups behind it. This binary is thin: each subcommand parses its
//! arguments and calls into the library crates.

// Doc comments of the argument structs are the `--help` text (clap), where `[truncated]`
// is a marker users see, not a rustdoc link.
#![allow(rustdoc::broken_intra_doc_links)]

/// `eprintln!` without its panic: a closed or full stderr (`2>&-`, `2>/dev/full`) must not
/// turn a finished command into exit 101. Messages that cannot be written are dropped.
macro_rules! say {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

mod cmd;
#[cfg(feature = "record")]
mod signals;

use clap::{Parser, Subcommand};

/// Chain graphs: why threads blocked, and the whole chain of wakeups that led to their
/// resumption, down to the interrupt that started it.
#[derive(Parser)]
#[command(name = "chainrec", version, about, long_about = None, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Also look for debug files of the traced programs in DIR (`DIR/.build-id/xx/rest.debug`,
    /// or the `.gnu_debuglink` name under DIR), before /usr/lib/debug: user frames left
    /// unnamed, or named only from `.dynsym`, at record time are resolved again (install
    /// the `-dbgsym` packages of the recording machine on this one). Repeatable.
    #[arg(long, global = true, value_name = "DIR")]
    debug_dir: Vec<std::path::PathBuf>,
}

const EXAMPLES: &str = "\
Examples:
  # record the built-in chain workload and draw its chain graph (root)
  chainrec demo
  # record the whole system for 10 s (root, or CAP_BPF + CAP_PERFMON)
  chainrec record -o trace.zst --duration 10
  # record until a command exits
  chainrec record -o trace.zst -- make -j2
  # chain graph, folded (flamegraph.pl --color=chain) or as an interactive SVG
  chainrec chains trace.zst > chain.folded
  chainrec chains trace.zst --svg chain.svg
  # off-CPU stacks of one process; the longest waits with their chains
  chainrec offcpu trace.zst -p 1234
  # what the CPUs ran (from the samples the recorder takes at 99 Hz per CPU)
  chainrec oncpu trace.zst --svg oncpu.svg
  chainrec top trace.zst -n 10
  # every event, every wait with its chain (to check a chain by hand)
  chainrec script trace.zst -t 1234 --window 2..2.1
  chainrec waits trace.zst -t 1234 --json
  # summarize and check a trace
  chainrec info trace.zst --verify
  # the numbered files of `record -o r.zst --rotate 1G` read as one
  # recording (by any analysis command)
  chainrec chains r.*.zst
  chainrec info r.*.zst";

#[derive(Subcommand)]
enum Command {
    /// Record scheduler events (BPF) into a trace file.
    #[cfg(feature = "record")]
    Record(cmd::record::Args),
    /// Run the built-in chain workload (timer -> relay -> sink threads over pipes).
    #[cfg(feature = "record")]
    Workload(cmd::record::WorkloadArgs),
    /// Multi-level chain graph: each wait with the whole chain of wakeups behind it.
    Chains(cmd::chains::ChainsArgs),
    /// Off-CPU time by stack (like bcc offcputime).
    #[command(
        mut_arg("min_block_us", |a| a.help("Minimum off-CPU time in microseconds (switch-out to switch-in)")),
        mut_arg("max_block_us", |a| a.help("Maximum off-CPU time in microseconds (switch-out to switch-in)"))
    )]
    Offcpu(cmd::chains::ViewArgs),
    /// Wakeup time by waker stack (like bcc wakeuptime).
    Wakeup(cmd::chains::ViewArgs),
    /// Off-CPU stack with its waker stack (like bcc offwaketime).
    Offwake(cmd::chains::ViewArgs),
    /// On-CPU time by stack, from the trace's CPU samples (a CPU flame graph).
    Oncpu(cmd::oncpu::OnCpuArgs),
    /// Per thread, on-CPU samples and off-CPU waits with their chains in one graph (wall time).
    Hotcold(cmd::oncpu::HotColdArgs),
    /// One thread's timeline: running, runnable (behind whom), blocked (behind which chain).
    CriticalPath(cmd::critpath::Args),
    /// The longest individual waits, each with its chain.
    Top(cmd::report::TopArgs),
    /// Subsecond-offset heat map of off-CPU time.
    Heatmap(cmd::report::HeatmapArgs),
    /// Export to Perfetto (timeline), pprof (chain graph) or Parquet (every wait, for SQL).
    Export(cmd::report::ExportArgs),
    /// Record the built-in chain workload and write trace, folded chain graph and SVG.
    #[cfg(feature = "record")]
    Demo(cmd::demo::DemoArgs),
    /// Every event, one per line (like perf script), or NDJSON.
    Script(cmd::script::ScriptArgs),
    /// Every wait with its chain: times, stacks, each level's waker and share (text or NDJSON).
    Waits(cmd::script::WaitsArgs),
    /// Summarize (and with --verify, check) a trace file.
    Info(cmd::info::Args),
    /// Write a synthetic trace with exactly known chains.
    Synth(cmd::synth::Args),
    /// A local web page on a trace: heat map -> time range -> chain graph -> the waits.
    Serve(cmd::serve::Args),
    /// The `serve` page as one self-contained HTML file (no server, no network).
    Report(cmd::serve::ReportArgs),
}

fn main() {
    cmd::fix_mmap_threshold();
    let cli = Cli::parse();
    if let Err(e) = cmd::set_debug_dirs(&cli.debug_dir) {
        eprintln!("chainrec: {e:#}");
        std::process::exit(2);
    }
    // Commands that open traces through `cmd::open_trace` (salvage applies to them).
    let analysis = matches!(
        cli.command,
        Command::Chains(_)
            | Command::Offcpu(_)
            | Command::Oncpu(_)
            | Command::Hotcold(_)
            | Command::CriticalPath(_)
            | Command::Wakeup(_)
            | Command::Offwake(_)
            | Command::Top(_)
            | Command::Heatmap(_)
            | Command::Export(_)
            | Command::Script(_)
            | Command::Waits(_)
            | Command::Serve(_)
            | Command::Report(_)
    );
    let result = match cli.command {
        #[cfg(feature = "record")]
        Command::Record(a) => cmd::record::run(a),
        #[cfg(feature = "record")]
        Command::Workload(a) => cmd::record::run_workload(a),
        Command::Chains(a) => cmd::chains::run_chains(a),
        Command::Offcpu(a) => cmd::chains::run_view(cmd::chains::View::OffCpu, a),
        Command::Wakeup(a) => cmd::chains::run_view(cmd::chains::View::Wakeup, a),
        Command::Offwake(a) => cmd::chains::run_view(cmd::chains::View::OffWake, a),
        Command::Oncpu(a) => cmd::oncpu::run(a),
        Command::Hotcold(a) => cmd::oncpu::run_hotcold(a),
        Command::CriticalPath(a) => cmd::critpath::run(a),
        Command::Top(a) => cmd::report::run_top(a),
        Command::Heatmap(a) => cmd::report::run_heatmap(a),
        Command::Export(a) => cmd::report::run_export(a),
        #[cfg(feature = "record")]
        Command::Demo(a) => cmd::demo::run(a),
        Command::Script(a) => cmd::script::run_script(a),
        Command::Waits(a) => cmd::script::run_waits(a),
        Command::Info(a) => cmd::info::run(a),
        Command::Synth(a) => cmd::synth::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::Report(a) => cmd::serve::run_report(a),
    };
    if let Err(err) = result {
        // A command that printed its own messages and only chose the exit status.
        if let Some(cmd::Exit(code)) = err.downcast_ref::<cmd::Exit>() {
            std::process::exit(*code);
        }
        // One line per cause, like `error: ... : caused by ...`, and a non-zero exit.
        say!("chainrec: error: {err:#}");
        if let Some(hint) = analysis.then(|| cmd::damage_hint(&err)).flatten() {
            say!("chainrec: hint: {hint}");
        }
        std::process::exit(1);
    }
}

#[cfg(test)]
mod help_tests {
    use super::Cli;
    use clap::{CommandFactory, Parser};

    /// Every example and note after the options fits 80 columns as written, so clap never
    /// wraps it (it would break lines mid-command), and nothing is printed before a
    /// command's description.
    #[test]
    fn after_help_fits_80_columns_and_nothing_comes_first() {
        let cli = Cli::command();
        let mut all = vec![&cli];
        all.extend(cli.get_subcommands());
        for c in all {
            if let Some(h) = c.get_after_help() {
                for l in h.to_string().lines() {
                    assert!(
                        l.chars().count() <= 80,
                        "{}: {} columns: {l}",
                        c.get_name(),
                        l.chars().count()
                    );
                }
            }
            assert!(c.get_before_help().is_none(), "{}", c.get_name());
        }
    }

    /// The `chainrec ...` lines of an `Example(s)` paragraph, continuations after `\`
    /// joined, each cut before its description (two spaces or more outside quotes), split
    /// into shell words (quotes group), and cut before a `|` or `>`.
    fn example_commands(after_help: &str) -> Vec<Vec<String>> {
        let mut lines = after_help
            .lines()
            .skip_while(|l| !l.starts_with("Example"))
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim);
        let mut out = Vec::new();
        while let Some(l) = lines.next() {
            let mut line = l.to_string();
            while line.ends_with('\\') {
                line.pop();
                line.push_str(lines.next().unwrap_or(""));
            }
            if !line.starts_with("chainrec ") {
                continue;
            }
            let (mut words, mut cur, mut quote, mut started) = (vec![], String::new(), None, false);
            let mut spaces = 0;
            for c in line.chars() {
                spaces = if quote.is_none() && c == ' ' {
                    spaces + 1
                } else {
                    0
                };
                if spaces == 2 {
                    break; // the description
                }
                match (quote, c) {
                    (None, '\'' | '"') => (quote, started) = (Some(c), true),
                    (Some(q), c) if c == q => quote = None,
                    (None, ' ') if started => {
                        words.push(std::mem::take(&mut cur));
                        started = false;
                    }
                    (None, ' ') => {}
                    (_, c) => (cur, started) = (cur + &c.to_string(), true),
                }
            }
            if started {
                words.push(cur);
            }
            if let Some(i) = words.iter().position(|w| w == "|" || w == ">") {
                words.truncate(i);
            }
            out.push(words);
        }
        out
    }

    /// Every example of every help text parses as the command line it shows (the
    /// integration test tests/help_examples.rs runs those that need no root).
    #[test]
    fn every_help_example_parses() {
        let cli = Cli::command();
        let mut all = vec![&cli];
        all.extend(cli.get_subcommands());
        let mut n = 0;
        for c in all {
            let Some(h) = c.get_after_help() else {
                continue;
            };
            let found = example_commands(&h.to_string());
            assert!(!found.is_empty(), "{}: no example", c.get_name());
            for words in found {
                let recorder = ["record", "demo", "workload"].contains(&words[1].as_str());
                if recorder && !cfg!(feature = "record") {
                    continue; // not in the analysis-only build
                }
                if let Err(e) = Cli::try_parse_from(&words) {
                    panic!("{}: example {words:?} does not parse: {e}", c.get_name());
                }
                n += 1;
            }
        }
        assert!(n >= 50, "only {n} examples");
    }

    /// `export` names every format it writes, in the command list and in its own help.
    #[test]
    fn export_help_names_every_format() {
        let mut cli = Cli::command();
        let about = cli
            .find_subcommand("export")
            .and_then(|c| c.get_about())
            .map(|a| a.to_string())
            .unwrap_or_default();
        let long = cli
            .find_subcommand_mut("export")
            .unwrap()
            .render_help()
            .to_string();
        for format in ["Perfetto", "pprof", "Parquet"] {
            assert!(
                about.contains(format),
                "export about lacks {format}: {about}"
            );
            assert!(
                long.contains(&format!("--{}", format.to_lowercase())),
                "{long}"
            );
        }
    }

    /// `-m`/`-M` say what they bound: blocked time, and off-CPU time only for `offcpu`.
    #[test]
    fn min_block_time_help_names_the_duration_of_each_command() {
        let mut cli = Cli::command();
        let help = |cli: &mut clap::Command, name: &str| {
            cli.find_subcommand_mut(name)
                .unwrap()
                .render_help()
                .to_string()
        };
        let off = help(&mut cli, "offcpu");
        assert!(off.contains("Minimum off-CPU time"), "{off}");
        for name in ["chains", "wakeup", "offwake", "top", "waits"] {
            let h = help(&mut cli, name);
            assert!(h.contains("Minimum blocked time"), "{name}: {h}");
            assert!(!h.contains("for `offcpu`"), "{name}: {h}");
        }
    }
}

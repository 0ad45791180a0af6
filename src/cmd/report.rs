//! `chainrec top|heatmap|export|demo` (fronts chainrec-report).
use super::parquet::ParquetOutputs;
use anyhow::{bail, Context, Result};
use chainrec_chain::{Dedup, Duration as ChainDuration, Setup};
use chainrec_format::{FlightTrigger, RecordingMeta};
use chainrec_report::heatmap::{self, ColorMap, HeatmapOptions, Metric, Select};
use chainrec_report::output::TempOutput;
use chainrec_report::progress::{Progress, Progressed};
use chainrec_report::top::{self, TopSink};
use chainrec_report::{perfetto, pprof};
use std::io::Write;
use std::path::{Path, PathBuf};

const TOP_EXAMPLES: &str = "\
Examples:
  chainrec top trace.zst          the 10 longest waits, each with its chain
  chainrec top trace.zst -n 3 --comm '^cr-sink$' -m 1000
  chainrec top trace.zst --json -q | jq '.entries[0]'";

/// Arguments of `chainrec top`.
#[derive(clap::Args)]
#[command(after_help = TOP_EXAMPLES)]
pub struct TopArgs {
    /// Trace file.
    pub file: PathBuf,
    /// How many chains to show.
    #[arg(short = 'n', long = "count", default_value_t = 10)]
    pub count: usize,
    /// JSON output (for scripts).
    #[arg(long)]
    pub json: bool,
    /// Every frame of every level on one line (by default the text fits 80 columns:
    /// frames in the middle of a level are abbreviated as `…N…`, long lines wrapped).
    #[arg(long, conflicts_with = "json")]
    pub wide: bool,
    /// Maximum hops per chain.
    #[arg(long, default_value_t = chainrec_chain::DEFAULT_MAX_DEPTH)]
    pub max_depth: usize,
    #[command(flatten)]
    pub filter: crate::cmd::filter::FilterArgs,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

const HEATMAP_EXAMPLES: &str = "\
Examples:
  # off-CPU time of every thread
  chainrec heatmap trace.zst -o heat.svg
  chainrec heatmap trace.zst -o heat.svg --metric wakeups --comm '^cr-sink$'
  # one process's threads
  chainrec heatmap trace.zst -o heat.svg -p 1234
  chainrec heatmap trace.zst -o heat.svg --rows 100 --colormap linear \\
      --highlight-comm cr-relay";

/// What the heat map's colour shows.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum MetricArg {
    /// Off-CPU time.
    #[value(alias = "off-cpu")]
    Offcpu,
    /// On-CPU time.
    #[value(alias = "on-cpu")]
    Oncpu,
    /// Number of wakings.
    #[value(alias = "events")]
    Wakeups,
}

/// Heat map colour map.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum ColorMapArg {
    /// Darkness by rank among the distinct values (shows faint patterns).
    Rank,
    /// Darkness proportional to the value.
    Linear,
}

/// Arguments of `chainrec heatmap`.
#[derive(clap::Args)]
#[command(after_help = HEATMAP_EXAMPLES)]
pub struct HeatmapArgs {
    /// Trace file.
    pub file: PathBuf,
    /// Output SVG.
    #[arg(short, long, value_name = "SVG")]
    pub output: PathBuf,
    /// What the colour shows.
    #[arg(long, value_enum, default_value = "offcpu")]
    pub metric: MetricArg,
    /// Colour map.
    #[arg(long, value_enum, default_value = "rank")]
    pub colormap: ColorMapArg,
    /// Rows per second (y resolution; 50 = 20 ms buckets), 1..=1000.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rows: u32,
    /// The threads counted (default: all).
    #[command(flatten)]
    pub threads: super::filter::ThreadFilterArgs,
    /// Also draw the share of threads whose name matches this regex in a second colour.
    #[arg(long, value_name = "REGEX")]
    pub highlight_comm: Option<String>,
    /// Also draw the share of these threads in a second colour (with --highlight-comm:
    /// threads matching both).
    #[arg(long, value_name = "TID", value_delimiter = ',')]
    pub highlight_tid: Vec<u32>,
    /// Title.
    #[arg(long)]
    pub title: Option<String>,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

const EXPORT_EXAMPLES: &str = "\
Examples:
  # the whole trace, for ui.perfetto.dev
  chainrec export trace.zst --perfetto trace.pftrace
  # ... with thread 1234's critical path as a track of its own
  chainrec export trace.zst --perfetto trace.pftrace --critical-path 1234
  # chain graph for `go tool pprof -http=:8080`
  chainrec export trace.zst --pprof chains.pb.gz
  chainrec export trace.zst --pprof sink.pb.gz --comm '^cr-sink$' --window 0.5..
  chainrec export trace.zst --perfetto t.pftrace --pprof c.pb.gz -q
  # every wait with its chain, for SQL (also writes waits.stacks.parquet)
  chainrec export trace.zst --parquet waits.parquet
  duckdb -c \"SELECT comm, count(*) FROM 'waits.parquet' GROUP BY comm\"";

/// Arguments of `chainrec export`.
#[derive(clap::Args)]
#[command(after_help = EXPORT_EXAMPLES)]
pub struct ExportArgs {
    /// Trace file.
    pub file: PathBuf,
    /// Write a native Perfetto trace of the whole recording (open in ui.perfetto.dev).
    #[arg(long, value_name = "OUT.pftrace")]
    pub perfetto: Option<PathBuf>,
    /// With --perfetto: add a `critical path` track for each of these threads (one slice
    /// per running / runnable / blocked segment, as `chainrec critical-path` shows them);
    /// repeat or comma-separate.
    #[arg(long = "critical-path", value_name = "TID", value_delimiter = ',')]
    pub critical_path: Vec<u32>,
    /// Write the chain graph as a gzipped pprof profile (the filters below apply to it).
    #[arg(long, value_name = "OUT.pb.gz")]
    pub pprof: Option<PathBuf>,
    /// Write every wait with its chain as a Parquet table, and the stacks it uses beside
    /// it (OUT.stacks.parquet), for SQL: DuckDB, Spark, Trino, BigQuery (the filters below
    /// apply to it).
    #[arg(long, value_name = "OUT.parquet")]
    pub parquet: Option<PathBuf>,
    #[command(flatten)]
    pub filter: crate::cmd::filter::FilterArgs,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Context of a failure while decoding `file`'s events (the same as `chains` gives).
fn reading(file: &Path) -> String {
    format!("{}: reading events", file.display())
}

pub(crate) fn warn_lost(what: &str, meta: &RecordingMeta) {
    let l = &meta.lost;
    if l.events() > 0 {
        say!(
            "chainrec: {what}: warning: LOST EVENTS in the recording: ring buffer full {}, malformed {}, out of order {}",
            l.ringbuf_full, l.malformed, l.out_of_order
        );
    }
}

/// `chainrec top`.
pub fn run_top(a: TopArgs) -> Result<()> {
    if a.count == 0 {
        bail!("-n must be at least 1");
    }
    if a.max_depth == 0 {
        bail!("--max-depth must be at least 1");
    }
    let an = super::open_trace(&a.file, "top")?;
    let meta = an.meta();
    let setup = Setup {
        max_depth: a.max_depth,
        // Every wait is a candidate: dedup off.
        dedup: Dedup::Off,
        filter: a.filter.to_filter(&an, ChainDuration::Blocked)?,
        ..Setup::default()
    };
    let mut sink = TopSink::default();
    let mut progress = Progress::new(an.reader().event_count(), "top", a.quiet);
    let done = an
        .run(setup, &mut sink, |n| progress.inc(n as u64))
        .with_context(|| reading(&a.file))?;
    progress.finish();
    let stats = &done.summary.stats;
    let report = sink.finish(a.count, done.nodes(), an.tables(), meta, an.start_ns());
    // A flight-recorder dump: the wait that made it comes first, with its chain.
    let (trigger, trigger_report) = match a.filter.trigger {
        true => (None, None),
        false => match trigger_top(&an, &a.file, a.max_depth, &a.filter)? {
            Some((t, r)) => (Some(t), Some(r)),
            None => (None, None),
        },
    };
    let width = (!a.wide).then_some(top::TEXT_WIDTH);
    let out = match (&trigger, &trigger_report) {
        (Some(t), Some(tr)) if a.json => {
            let mut j = serde_json::to_value(&report)?;
            j["trigger"] = trigger_json(t, tr);
            serde_json::to_string_pretty(&j)? + "\n"
        }
        (Some(t), Some(tr)) => format!(
            "{}\nLongest waits in the dump:\n{}",
            trigger_text(t, tr, width),
            top::render_text_width(&report, width)
        ),
        _ if a.json => serde_json::to_string_pretty(&report)? + "\n",
        _ => top::render_text_width(&report, width),
    };
    super::write_stdout(&out)?;
    warn_lost("top", meta);
    for note in stats.anomaly_notes(an.start_ns()) {
        // Within the text's width too (notes are long prose).
        let line = format!("chainrec: top: note: {note}");
        say!("{}", top::wrap_words(&line, width, 2));
    }
    if stats.lost_events > 0 {
        say!(
            "chainrec: top: warning: {} events lost in the trace; {} waits overlap a loss",
            stats.lost_events,
            stats.waits_with_lost
        );
    }
    Ok(())
}

/// In a flight-recorder dump made by a wait: that wait and its chain, as a one-entry
/// `top` report (`filter`'s other filters apply too).
pub(crate) fn trigger_top(
    an: &chainrec_chain::Analysis,
    file: &std::path::Path,
    max_depth: usize,
    filter: &crate::cmd::filter::FilterArgs,
) -> Result<Option<(FlightTrigger, top::TopReport)>> {
    let Some(t) = super::filter::flight_trigger(an.meta())?.filter(|t| t.tid != 0) else {
        return Ok(None);
    };
    let only = crate::cmd::filter::FilterArgs {
        trigger: true,
        ..filter.clone()
    };
    let setup = Setup {
        max_depth,
        dedup: Dedup::Off,
        filter: only.to_filter(an, ChainDuration::Blocked)?,
        ..Setup::default()
    };
    let mut sink = TopSink::default();
    let done = an
        .run(setup, &mut sink, |_| {})
        .with_context(|| reading(file))?;
    let report = sink.finish(1, done.nodes(), an.tables(), an.meta(), an.start_ns());
    Ok(Some((t, report)))
}

/// The trigger and its chain as text (`top` and `info` of a dump), `width` columns wide
/// (`None`: whole lines, see [`top::render_text_width`]).
pub(crate) fn trigger_text(t: &FlightTrigger, r: &top::TopReport, width: Option<usize>) -> String {
    format!(
        "Flight trigger: {} — {} (tid {}) waited {}\n{}",
        t.rule,
        t.comm,
        t.tid,
        top::fmt_ns(t.duration_ns()),
        top::render_text_width(r, width)
    )
}

/// The trigger and its chain as JSON.
pub(crate) fn trigger_json(t: &FlightTrigger, r: &top::TopReport) -> serde_json::Value {
    serde_json::json!({
        "kind": t.kind.name(), "rule": t.rule, "tid": t.tid, "tgid": t.tgid,
        "comm": t.comm, "start_ns": t.start_ns, "end_ns": t.end_ns,
        "entries": r.entries,
    })
}

/// `chainrec heatmap`.
pub fn run_heatmap(a: HeatmapArgs) -> Result<()> {
    let opts = HeatmapOptions {
        metric: match a.metric {
            MetricArg::Offcpu => Metric::OffCpu,
            MetricArg::Oncpu => Metric::OnCpu,
            MetricArg::Wakeups => Metric::Wakeups,
        },
        rows: a.rows,
        select: Select::new(a.threads.to_filter()?),
        highlight: if a.highlight_comm.is_some() || !a.highlight_tid.is_empty() {
            Some(Select::new(chainrec_chain::Filter {
                tids: a.highlight_tid.clone(),
                comm: a
                    .highlight_comm
                    .as_deref()
                    .map(|c| super::filter::comm_regex("--highlight-comm", c))
                    .transpose()?,
                ..Default::default()
            }))
        } else {
            None
        },
        colormap: match a.colormap {
            ColorMapArg::Rank => ColorMap::Rank,
            ColorMapArg::Linear => ColorMap::Linear,
        },
    };
    let an = super::open_trace(&a.file, "heatmap")?;
    let reader = an.reader();
    let src = Progressed::new(
        reader,
        Progress::new(reader.event_count(), "heatmap", a.quiet),
    );
    let h = heatmap::compute(&src, &opts).with_context(|| reading(&a.file))?;
    src.finish();
    let title = a
        .title
        .clone()
        .unwrap_or_else(|| format!("Subsecond-offset heat map: {}", a.file.display()));
    let svg = heatmap::render_svg(
        &h,
        opts.colormap,
        &title,
        reader.meta().clock_offset_ns != 0,
    );
    std::fs::write(&a.output, svg).with_context(|| format!("writing {}", a.output.display()))?;
    say!(
        "chainrec: heatmap: wrote {} ({} seconds x {} rows, {} non-empty cells){}",
        a.output.display(),
        h.columns,
        h.rows,
        h.cells.iter().filter(|&&c| c > 0).count(),
        heatmap_note(&h)
    );
    warn_lost("heatmap", reader.meta());
    Ok(())
}

/// What the heat map clipped or left out, for the summary line.
fn heatmap_note(h: &heatmap::Heatmap) -> String {
    let mut n = String::new();
    if h.metric != Metric::Wakeups {
        n += &format!(
            "; clipped to the trace: {} intervals begun before it (counted from its start), {} still open at its end (counted to its end)",
            h.clipped_at_start, h.open_at_end
        );
    }
    if h.unmatched > 0 {
        n += &format!(
            "; {} intervals whose start was lost not counted",
            h.unmatched
        );
    }
    n
}

/// `chainrec export`.
pub fn run_export(a: ExportArgs) -> Result<()> {
    if a.perfetto.is_none() && a.pprof.is_none() && a.parquet.is_none() {
        bail!("export: say what to write: --perfetto OUT.pftrace, --pprof OUT.pb.gz and/or --parquet OUT.parquet");
    }
    let an = super::open_trace(&a.file, "export")?;
    let (reader, meta) = (an.reader(), an.meta());
    let filtered = a.filter.selects_waits();
    if filtered && a.pprof.is_none() && a.parquet.is_none() {
        bail!("export: the filters select waits and apply to --pprof and --parquet only; the Perfetto export is always the whole trace");
    }
    if !a.critical_path.is_empty() && a.perfetto.is_none() {
        bail!("export: --critical-path adds a track to the Perfetto export: add --perfetto OUT.pftrace");
    }
    if let (Some(p), Some(q)) = (&a.perfetto, &a.pprof) {
        if super::same_file(p, q) {
            bail!(
                "export: --perfetto and --pprof name the same file {}",
                p.display()
            );
        }
    }
    // Everything that can be checked before the (long) work is: the filter and window,
    // and both outputs (created as temporary files next to their destinations, renamed
    // into place only when complete; removed on any failure).
    let filter = a.filter.to_filter(&an, ChainDuration::Blocked)?;
    let filter_for_parquet = filter.clone();
    let mut perfetto_out = a.perfetto.as_deref().map(TempOutput::create).transpose()?;
    let mut pprof_out = a.pprof.as_deref().map(TempOutput::create).transpose()?;
    let others: Vec<&Path> = [&a.perfetto, &a.pprof]
        .into_iter()
        .flatten()
        .map(|p| p.as_path())
        .collect();
    let mut parquet_out = a
        .parquet
        .as_deref()
        .map(|p| ParquetOutputs::create(p, &others))
        .transpose()?;
    // The critical paths first: an unknown thread fails before anything is written.
    let mut tracks = Vec::new();
    if !a.critical_path.is_empty() {
        let mut slices = std::collections::BTreeMap::new();
        for &tid in &a.critical_path {
            let cp = chainrec_chain::critical_path(&an, &chainrec_chain::CritPathOptions::new(tid))
                .with_context(|| format!("export: --critical-path {tid}"))?;
            slices.insert(tid, chainrec_report::critpath::perfetto_slices(&cp));
        }
        tracks.push(perfetto::SliceTrack {
            name: "critical path".into(),
            slices,
        });
    }
    let mut perfetto_note = String::new();
    if let Some(out) = &mut perfetto_out {
        let path = out.dest().to_path_buf();
        let src = Progressed::new(
            reader,
            Progress::new(2 * reader.event_count(), "perfetto", a.quiet),
        );
        let mut w = std::io::BufWriter::new(out.file()?);
        let st = perfetto::export_with_tracks(&src, &mut w, &tracks)
            .map_err(anyhow::Error::from)
            .and_then(|st| Ok(w.flush().map(|_| st)?))
            .with_context(|| format!("exporting {} to {}", a.file.display(), path.display()))?;
        drop(w);
        src.finish();
        perfetto_note = format!(
            "chainrec: export: wrote {} ({} packets: {} sched_switch, {} sched_waking, {} task_newtask, {} task_rename; {} exits; {} processes ({} with a known parent), {} threads, {} threads of unknown process; {} wakings' target CPU guessed; {} lost-event markers ({} events); {} switch-sequence gaps closed by a synthetic switch and marked on the '{}' tracks ({} thread already running elsewhere, {} CPU sequence broken); {} lazily attached stacks and samples have no Perfetto counterpart; {} critical-path slices)",
            path.display(), st.packets, st.switches, st.wakings, st.new_tasks, st.renames, st.exits,
            st.processes, st.processes_with_parent, st.threads, st.threads_without_process,
            st.wakings_target_cpu_guessed, st.lost_markers, st.lost_events, st.gaps(),
            perfetto::TRACK_GAPS, st.gaps_running_elsewhere, st.gaps_cpu_sequence, st.not_exported,
            st.extra_slices
        );
    }
    let mut pprof_note = String::new();
    if let Some(out) = &mut pprof_out {
        let path = out.dest().to_path_buf();
        let setup = Setup {
            filter,
            ..Setup::default()
        };
        let mut progress = Progress::new(reader.event_count(), "pprof", a.quiet);
        let mut sink = pprof::ProfileSink::new();
        let done = an
            .run(setup, &mut sink, |n| progress.inc(n as u64))
            .with_context(|| reading(&a.file))?;
        progress.finish();
        let (start, end) = (an.start_ns(), an.end_ns());
        let info = pprof::ProfileInfo {
            time_nanos: if meta.clock_offset_ns != 0 {
                (start as i128 + meta.clock_offset_ns) as i64
            } else {
                0
            },
            duration_nanos: end.saturating_sub(start) as i64,
            comments: vec![format!("chainrec chain graph of {}", a.file.display())],
        };
        let profile = sink.finish(done.nodes(), an.tables(), meta, &info)?;
        let mut w = std::io::BufWriter::new(out.file()?);
        pprof::write_gz(&profile, &mut w)
            .map_err(anyhow::Error::from)
            .and_then(|_| Ok(w.flush()?))
            .with_context(|| format!("writing {}", path.display()))?;
        drop(w);
        pprof_note = format!(
            "chainrec: export: wrote {} ({} samples, {} locations; value = attributed off-CPU time in ns: blocked, and runnable in [run queue] levels; labels pid, tid, comm, level, attributed_to)",
            path.display(),
            profile.sample.len(),
            profile.location.len()
        );
    }
    let mut parquet_note = String::new();
    if let Some(out) = &mut parquet_out {
        parquet_note = out.write(&an, &a.file, filter_for_parquet, a.quiet)?;
    }
    // All outputs complete: only now move them into place.
    for (out, note) in [(perfetto_out, perfetto_note), (pprof_out, pprof_note)] {
        if let Some(mut out) = out {
            out.commit()?;
            say!("{note}");
        }
    }
    if let Some(mut out) = parquet_out {
        out.commit()?;
        say!("{parquet_note}");
    }
    warn_lost("export", meta);
    Ok(())
}

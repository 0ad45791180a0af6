//! `chainrec top|heatmap|export|demo` (fronts chainrec-report).
use anyhow::{bail, Context, Result};
use chainrec_chain::Duration as ChainDuration;
use chainrec_format::RecordingMeta;
use chainrec_parquet::ParquetOutputs;
use chainrec_report::export::{self, WaitsOutput};
use chainrec_report::heatmap::{self, ColorMap, HeatmapOptions, Metric, Select};
use chainrec_report::progress::{Progress, Progressed};
use chainrec_report::top::{self, TriggerReport};
use std::path::PathBuf;

const TOP_EXAMPLES: &str = "\
Examples:
  chainrec top trace.zst          the 10 longest waits, each with its chain
  chainrec top trace.zst -n 3 --comm '^cr-sink$' -m 1000
  chainrec top trace.zst --json -q | jq '.entries[0]'";

/// Arguments of `chainrec top`.
#[derive(clap::Args)]
#[command(after_help = TOP_EXAMPLES)]
pub struct TopArgs {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
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
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
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
  duckdb -c \"SELECT comm, count(*) FROM 'waits.parquet' GROUP BY comm\"
  # a fleet: the traces of any hosts, one part per recording in a Hive layout
  # (fleet/waits/host=H/date=D/..., fleet/stacks/...) for Spark and DuckDB
  chainrec export trace.zst --parquet-dir fleet
  duckdb -c \"SELECT host, date, count(*) FROM read_parquet(
      'fleet/waits/**/*.parquet', hive_partitioning=true) GROUP BY ALL\"";

/// Arguments of `chainrec export`.
#[derive(clap::Args)]
#[command(after_help = EXPORT_EXAMPLES)]
pub struct ExportArgs {
    #[arg(required = true, num_args = 1.., value_name = "TRACE", help = super::TRACES_HELP)]
    pub file: Vec<PathBuf>,
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
    /// Write the Parquet tables of traces of any number of hosts and recordings into a
    /// Hive-partitioned directory that Spark, DuckDB, Trino read as two tables:
    /// DIR/waits/host=H/date=YYYY-MM-DD/START.parquet and DIR/stacks/... (date: the UTC
    /// day the recording started). A part already there is skipped, never overwritten.
    #[arg(long, value_name = "DIR",
          conflicts_with_all = ["perfetto", "pprof", "parquet", "critical_path"])]
    pub parquet_dir: Option<PathBuf>,
    #[command(flatten)]
    pub filter: crate::cmd::filter::FilterArgs,
    /// No progress bar.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Context of a failure while decoding the events of `files` (the same as `chains` gives).
fn reading(files: &[PathBuf]) -> String {
    format!("{}: reading events", super::label(files))
}

/// The warning of events the recording lost, if it lost any.
pub(crate) fn warn_lost(what: &str, meta: &RecordingMeta) {
    if let Some(w) = meta.lost.warning(what) {
        say!("{w}");
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
    let filter = a.filter.to_filter(&an, ChainDuration::Blocked)?;
    let mut progress = Progress::new(an.reader().event_count(), "top", a.quiet);
    let (report, summary) = top::run(&an, a.max_depth, filter, a.count, |n| {
        progress.inc(n as u64)
    })
    .with_context(|| reading(&a.file))?;
    progress.finish();
    let stats = &summary.stats;
    // A flight-recorder dump: the wait that made it comes first, with its chain.
    let trigger = match a.filter.trigger {
        true => None,
        false => trigger_top(&an, &a.file, a.max_depth, &a.filter)?,
    };
    let width = (!a.wide).then_some(top::TEXT_WIDTH);
    super::write_stdout(&report.output(trigger.as_ref(), a.json, width)?)?;
    warn_lost("top", an.meta());
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
    super::leave_to_exit(an);
    Ok(())
}

/// In a flight-recorder dump made by a wait: that wait and its chain (`filter`'s other
/// filters apply too).
pub(crate) fn trigger_top(
    an: &chainrec_chain::Analysis,
    files: &[PathBuf],
    max_depth: usize,
    filter: &crate::cmd::filter::FilterArgs,
) -> Result<Option<TriggerReport>> {
    let Some(t) = super::filter::flight_trigger(an.meta())?.filter(|t| t.tid != 0) else {
        return Ok(None);
    };
    let only = crate::cmd::filter::FilterArgs {
        trigger: true,
        ..filter.clone()
    };
    let filter = only.to_filter(an, ChainDuration::Blocked)?;
    let r = TriggerReport::run(an, t, max_depth, filter).with_context(|| reading(files))?;
    Ok(Some(r))
}

/// `chainrec heatmap`.
pub fn run_heatmap(a: HeatmapArgs) -> Result<()> {
    let an = super::open_trace(&a.file, "heatmap")?;
    let opts = HeatmapOptions {
        metric: match a.metric {
            MetricArg::Offcpu => Metric::OffCpu,
            MetricArg::Oncpu => Metric::OnCpu,
            MetricArg::Wakeups => Metric::Wakeups,
        },
        rows: a.rows,
        select: Select::new(a.threads.to_selector(an.tables())?),
        highlight: if a.highlight_comm.is_some() || !a.highlight_tid.is_empty() {
            Some(Select::new(chainrec_format::ThreadSelector {
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
        .unwrap_or_else(|| format!("Subsecond-offset heat map: {}", super::label(&a.file)));
    let svg = heatmap::render_svg(
        &h,
        opts.colormap,
        &title,
        reader.meta().clock_offset_ns != 0,
    );
    std::fs::write(&a.output, svg).with_context(|| format!("writing {}", a.output.display()))?;
    say!("chainrec: heatmap: {}", h.summary(&a.output));
    warn_lost("heatmap", reader.meta());
    super::leave_to_exit(an);
    Ok(())
}

/// `chainrec export`.
pub fn run_export(a: ExportArgs) -> Result<()> {
    if let Some(dir) = &a.parquet_dir {
        return export_parquet_dir(&a, dir);
    }
    // Traces of several hosts: say what can take them (rather than the set's error).
    if a.file.len() > 1 || a.file[0].is_dir() {
        let hosts =
            chainrec_format::files_by_host(&a.file).map_err(|e| super::with_paths(&a.file, e))?;
        if hosts.len() > 1 {
            let names: Vec<&str> = hosts.iter().map(|(h, _)| h.as_str()).collect();
            bail!(
                "export: the traces are of {} hosts ({}): --parquet-dir DIR writes the tables of every host (a Hive layout for Spark and DuckDB); --pprof, --parquet and --perfetto take one host's trace at a time",
                hosts.len(),
                names.join(", ")
            );
        }
    }
    let name = super::label(&a.file);
    let req = export::Request {
        trace: &name,
        perfetto: a.perfetto.as_deref(),
        critical_path: &a.critical_path,
        pprof: a.pprof.as_deref(),
        parquet: a.parquet.as_deref(),
        filtered: a.filter.selects_waits(),
        quiet: a.quiet,
    };
    req.check_asked()?;
    let an = super::open_trace(&a.file, "export")?;
    req.check()?;
    // Everything that can be checked before the (long) work is: the filter and window,
    // and every output (created as temporary files next to their destinations, renamed
    // into place only when all are complete; removed on any failure).
    let filter = a.filter.to_filter(&an, ChainDuration::Blocked)?;
    let ex = req.create()?;
    let mut parquet = (a.parquet.as_deref())
        .map(|p| ParquetOutputs::create(p, &ex.dests()))
        .transpose()?;
    let waits = parquet.as_mut().map(|p| p as &mut dyn WaitsOutput);
    ex.write(&an, filter, waits, &mut |n| say!("chainrec: export: {n}"))?;
    warn_lost("export", an.meta());
    super::leave_to_exit(an);
    Ok(())
}

/// The traces of `files` as recordings: each a host and its files (the numbered files of
/// one `record --rotate`, or one file), in host order, then in the order given.
fn recordings(files: &[PathBuf]) -> Result<Vec<(String, Vec<PathBuf>)>> {
    let mut out: std::collections::BTreeMap<(String, String), Vec<PathBuf>> = Default::default();
    for p in chainrec_format::trace_files(files).map_err(|e| super::with_paths(files, e))? {
        let r = chainrec_format::TraceReader::open(&p).map_err(|e| super::with_path(&p, e))?;
        let meta = r.meta();
        // Files of one rotated recording share its start; any other file is a recording.
        let recording = match meta.extra(chainrec_format::ROTATE_RECORDING_KEY) {
            Some(start) => format!("rotated {start}"),
            None => format!("file {}", p.display()),
        };
        out.entry((meta.host.clone(), recording))
            .or_default()
            .push(p);
    }
    Ok(out.into_iter().map(|((host, _), f)| (host, f)).collect())
}

/// `chainrec export --parquet-dir DIR`: one part of both tables per recording, in the Hive
/// layout of chainrec_parquet::hive. Every recording is checked (opened, filters, its part
/// free) before any is written; each part appears whole (written under a temporary name
/// and renamed), and one already there is skipped, so re-running over a growing set of
/// traces adds only the new ones.
fn export_parquet_dir(a: &ExportArgs, dir: &std::path::Path) -> Result<()> {
    use chainrec_parquet::hive::Part;
    use chainrec_parquet::TraceKey;
    let recs = recordings(&a.file)?;
    let mut parts: Vec<(Vec<PathBuf>, Part)> = Vec::new();
    for (_, files) in recs {
        let r = chainrec_format::TraceReader::open(&files[0])
            .map_err(|e| super::with_path(&files[0], e))?;
        // The key of the set: the first file's start is the recording's.
        let key = TraceKey::new(r.meta());
        let part = Part::new(dir, &key).with_context(|| super::label(&files))?;
        if let Some((other, _)) = parts.iter().find(|(_, p)| p == &part) {
            bail!(
                "export: {} and {} are recordings of host {:?} that started at the same time ({}): their parts would be one file {}",
                super::label(other),
                super::label(&files),
                key.host,
                key.start,
                part.waits.display()
            );
        }
        parts.push((files, part));
    }
    let (mut written, mut skipped) = (0usize, 0usize);
    for (files, part) in &parts {
        let there = part.files().map(|f| f.exists());
        match there {
            [true, true] => {
                say!(
                    "chainrec: export: {}: skipped, its part is already there ({}; delete both tables' files to write it again)",
                    super::label(files),
                    part.waits.display()
                );
                skipped += 1;
                continue;
            }
            [false, false] => {}
            _ => bail!(
                "export: {}: {} exists but {} does not (an interrupted export?): delete the one there to write this recording again",
                super::label(files),
                part.files()[usize::from(!there[0])].display(),
                part.files()[usize::from(there[0])].display()
            ),
        }
        let an = super::open_trace(files, "export")?;
        let filter = a.filter.to_filter(&an, ChainDuration::Blocked)?;
        for f in part.files() {
            let d = f.parent().expect("a part is DIR/table/host/date/file");
            std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
        }
        let mut out = ParquetOutputs::create_at(&part.waits, &part.stacks)?;
        let name = super::label(files);
        let input = export::WaitsInput {
            an: &an,
            trace: &name,
            filter,
            quiet: a.quiet,
            // Nothing rides on this run: the tables are the only output.
            shared: &mut export::SharedRun::default(),
        };
        let line = out
            .write(input, &mut |n| say!("chainrec: export: {n}"))
            .map_err(|e| anyhow::anyhow!(e))?;
        out.commit()?;
        say!("chainrec: export: {line}");
        warn_lost("export", an.meta());
        written += 1;
    }
    say!(
        "chainrec: export: {}: {written} recording(s) written, {skipped} skipped (already there)",
        dir.display()
    );
    Ok(())
}

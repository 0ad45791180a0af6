//! Subsecond-offset heat maps (Gregg, "Subsecond Offset Heat Maps"): x = each second of
//! the trace, y = offset within that second, colour = off-CPU time, on-CPU time or wakeups
//! in the bucket. Seconds are wall-clock seconds (`ts + meta.clock_offset_ns`), so a
//! once-a-second timer shows as a horizontal line and a drifting one as a diagonal.
//!
//! A highlight (a comm or a tid) is accumulated separately and drawn in a second colour,
//! as in the seed's Riak / zoneadmd case.

use crate::source::format_wall;
use crate::{ReportError, Result};
use chainrec_chain::regex::Regex;
use chainrec_format::{state_is_dead, Event, EventSource, Switch, ThreadSelector, Threads, Tid};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// What a cell measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Nanoseconds the selected threads spent off-CPU (switch-out to switch-in).
    OffCpu,
    /// Nanoseconds the selected threads spent on-CPU (switch-in to switch-out).
    OnCpu,
    /// Number of wakings targeting the selected threads.
    Wakeups,
}

impl Metric {
    /// Parse `offcpu`, `oncpu`, `wakeups`.
    pub fn parse(s: &str) -> Result<Metric> {
        Ok(match s {
            "offcpu" | "off-cpu" => Metric::OffCpu,
            "oncpu" | "on-cpu" => Metric::OnCpu,
            "wakeups" | "events" => Metric::Wakeups,
            _ => return Err(ReportError::UnknownMetric(s.to_string())),
        })
    }
    fn describe(self) -> &'static str {
        match self {
            Metric::OffCpu => "off-CPU time",
            Metric::OnCpu => "on-CPU time",
            Metric::Wakeups => "wakeups",
        }
    }
}

/// Colour map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColorMap {
    /// Darkness proportional to the value (max = darkest).
    Linear,
    /// Darkness by rank among the distinct non-zero values (shows faint patterns).
    Rank,
}

impl ColorMap {
    /// Parse `linear` or `rank`.
    pub fn parse(s: &str) -> Result<ColorMap> {
        match s {
            "linear" => Ok(ColorMap::Linear),
            "rank" => Ok(ColorMap::Rank),
            _ => Err(ReportError::UnknownColorMap(s.to_string())),
        }
    }
}

/// Which threads: a [`ThreadSelector`] (`-p`, `-t`, `--comm` regex, `--cgroup` at any
/// time, `-u`, `-k`, all of which must match; the default keeps every thread), each thread
/// judged by its identity as of the event being counted.
#[derive(Clone, Debug, Default)]
pub struct Select {
    /// The selector that decides.
    pub threads: ThreadSelector,
}

impl Select {
    /// Threads of `threads`.
    pub fn new(threads: ThreadSelector) -> Self {
        Select { threads }
    }
    /// Only thread `tid`.
    pub fn tid(tid: Tid) -> Self {
        Select::new(ThreadSelector {
            tids: vec![tid],
            ..Default::default()
        })
    }
    /// Only threads whose name matches `re` (a regex; an error for a bad one).
    pub fn comm(re: &str) -> Result<Self> {
        let re = Regex::new(re).map_err(|e| ReportError::BadRegex(e.to_string()))?;
        Ok(Select::new(ThreadSelector {
            comm: Some(re),
            ..Default::default()
        }))
    }
    fn matches(&self, tid: Tid, threads: &Threads) -> bool {
        self.threads.is_empty() || self.threads.matches_ever(tid, &threads.identity(tid))
    }
    /// `all threads`, or the conditions, e.g. `pid 10, comm ~ ^cr-`.
    pub fn describe(&self) -> String {
        self.threads.describe()
    }
}

/// Heat-map parameters.
#[derive(Clone, Debug)]
pub struct HeatmapOptions {
    /// What to measure.
    pub metric: Metric,
    /// Rows per second (the y resolution; 50 = 20 ms buckets).
    pub rows: u32,
    /// Threads counted.
    pub select: Select,
    /// Threads also counted separately and drawn in the highlight colour (None = no highlight).
    pub highlight: Option<Select>,
    /// Colour map.
    pub colormap: ColorMap,
}

impl Default for HeatmapOptions {
    fn default() -> Self {
        HeatmapOptions {
            metric: Metric::OffCpu,
            rows: 50,
            select: Select::default(),
            highlight: None,
            colormap: ColorMap::Rank,
        }
    }
}

/// A computed heat map.
#[derive(Clone, Debug, PartialEq)]
pub struct Heatmap {
    /// Metric of the cells.
    pub metric: Metric,
    /// Wall-clock second (since the epoch; trace-clock seconds for synthetic traces) of column 0.
    pub first_second: i64,
    /// Number of columns (seconds).
    pub columns: u32,
    /// Rows per column.
    pub rows: u32,
    /// Cell values, `cells[col * rows + row]`, row 0 = offset 0 (ns, or a count for wakeups).
    pub cells: Vec<u64>,
    /// The highlighted threads' share of each cell (empty without a highlight).
    pub highlight: Vec<u64>,
    /// Intervals begun before the trace (a thread's first event ends one): counted from
    /// the trace start, as intervals still open at the end are counted up to its end, so
    /// both ends of the map hold the time inside the trace alike.
    pub clipped_at_start: u64,
    /// Intervals still open at the end of the trace (counted up to its end).
    pub open_at_end: u64,
    /// Intervals whose start is missing although the thread was seen before (events
    /// lost): not counted.
    pub unmatched: u64,
    /// Lost-event markers seen (the map may under-count around them).
    pub lost_markers: u64,
    /// Start of the trace, on the map's clock (wall-clock ns; trace clock when synthetic).
    pub start_ns: i128,
    /// End of the trace, likewise: cells outside `start_ns..end_ns` are outside the trace.
    pub end_ns: i128,
    /// Description of the selection, e.g. `all threads`.
    pub selection: String,
    /// Description of the highlight, if any.
    pub highlight_selection: Option<String>,
}

impl Heatmap {
    /// What was written to `path`, for the line `chainrec heatmap` prints: size, non-empty
    /// cells and [`Heatmap::note`].
    pub fn summary(&self, path: &std::path::Path) -> String {
        format!(
            "wrote {} ({} seconds x {} rows, {} non-empty cells){}",
            path.display(),
            self.columns,
            self.rows,
            self.cells.iter().filter(|&&c| c > 0).count(),
            self.note()
        )
    }

    /// What the map clipped or left out, to append to a summary line (`; clipped to the
    /// trace: ...`; empty when nothing).
    pub fn note(&self) -> String {
        let mut n = String::new();
        if self.metric != Metric::Wakeups {
            n += &format!(
                "; clipped to the trace: {} intervals begun before it (counted from its start), {} still open at its end (counted to its end)",
                self.clipped_at_start, self.open_at_end
            );
        }
        if self.unmatched > 0 {
            n += &format!(
                "; {} intervals whose start was lost not counted",
                self.unmatched
            );
        }
        n
    }

    /// Value of a cell.
    pub fn cell(&self, col: u32, row: u32) -> u64 {
        self.cells[(col * self.rows + row) as usize]
    }
    /// Highlighted part of a cell (0 without a highlight).
    pub fn highlighted(&self, col: u32, row: u32) -> u64 {
        self.highlight
            .get((col * self.rows + row) as usize)
            .copied()
            .unwrap_or(0)
    }
    /// Sum of all cells.
    pub fn total(&self) -> u64 {
        self.cells.iter().sum()
    }
}

struct Acc {
    first_second: i64,
    rows: u32,
    bucket_ns: u64,
    cells: HashMap<(i64, u32), (u64, u64)>,
}

impl Acc {
    /// Add [a, b) (wall-clock ns) to the buckets it covers.
    fn add_interval(&mut self, a: i128, b: i128, hl: bool) {
        let mut t = a;
        while t < b {
            let sec = t.div_euclid(1_000_000_000) as i64;
            let off = t.rem_euclid(1_000_000_000) as u64;
            let row = ((off / self.bucket_ns) as u32).min(self.rows - 1);
            let row_end = if row == self.rows - 1 {
                sec as i128 * 1_000_000_000 + 1_000_000_000
            } else {
                sec as i128 * 1_000_000_000 + ((row as u64 + 1) * self.bucket_ns) as i128
            };
            let end = row_end.min(b);
            let c = self.cells.entry((sec, row)).or_default();
            c.0 += (end - t) as u64;
            if hl {
                c.1 += (end - t) as u64;
            }
            t = end;
        }
    }
    fn add_point(&mut self, t: i128, hl: bool) {
        let sec = t.div_euclid(1_000_000_000) as i64;
        let off = t.rem_euclid(1_000_000_000) as u64;
        let row = ((off / self.bucket_ns) as u32).min(self.rows - 1);
        let c = self.cells.entry((sec, row)).or_default();
        c.0 += 1;
        if hl {
            c.1 += 1;
        }
    }
}

/// The intervals of one pass over the events: each thread's current interval (off- or
/// on-CPU, by the metric) from its start, added to the cells when it ends if its thread
/// is selected; wakeups added as points.
struct Intervals<'o> {
    opts: &'o HeatmapOptions,
    /// Trace clock to wall clock.
    offset: i128,
    /// tid -> start of its current (off- or on-CPU) interval, trace clock.
    since: HashMap<Tid, u64>,
    /// tids seen at all, to tell "begun before the trace" from "start lost".
    seen: HashSet<Tid>,
    acc: Acc,
    clipped_at_start: u64,
    unmatched: u64,
    lost_markers: u64,
}

impl Intervals<'_> {
    fn selected(&self, tid: Tid, names: &Threads) -> bool {
        self.opts.select.matches(tid, names)
    }

    fn highlighted(&self, tid: Tid, names: &Threads) -> bool {
        self.opts
            .highlight
            .as_ref()
            .is_some_and(|h| h.matches(tid, names))
    }

    fn off_metric(&self) -> bool {
        self.opts.metric == Metric::OffCpu
    }

    /// Add `tid`'s interval [a, b) (trace clock) if the thread is selected.
    fn add(&mut self, tid: Tid, a: u64, b: u64, names: &Threads) {
        if self.selected(tid, names) {
            let hl = self.highlighted(tid, names);
            self.acc
                .add_interval(a as i128 + self.offset, b as i128 + self.offset, hl);
        }
    }

    /// Event `e`, in a trace that starts at `start`.
    fn event(&mut self, e: &Event, start: u64, names: &Threads) {
        match e {
            Event::Switch(s) if self.opts.metric != Metric::Wakeups => self.switch(s, start, names),
            // Off-CPU since before the trace and woken: its interval runs from the
            // start (it may end after the trace, with no switch-in).
            Event::Waking(w) if self.off_metric() && self.seen.insert(w.target_tid) => {
                self.clipped_at_start += self.selected(w.target_tid, names) as u64;
                self.since.insert(w.target_tid, start);
            }
            Event::Waking(w)
                if self.opts.metric == Metric::Wakeups && self.selected(w.target_tid, names) =>
            {
                let hl = self.highlighted(w.target_tid, names);
                self.acc.add_point(w.ts as i128 + self.offset, hl);
            }
            // A new task did not exist before: runnable (off-CPU) from its creation.
            Event::WakeupNew(n) => {
                self.seen.insert(n.child_tid);
                if self.off_metric() {
                    self.since.insert(n.child_tid, n.ts);
                }
            }
            Event::Lost(_) => self.lost_markers += 1,
            _ => {}
        }
    }

    /// A switch ends one thread's interval and starts the other's.
    fn switch(&mut self, s: &Switch, start: u64, names: &Threads) {
        // The interval ending here: off-CPU for next, on-CPU for prev.
        let (ending, starting) = if self.off_metric() {
            (s.next_tid, s.prev_tid)
        } else {
            (s.prev_tid, s.next_tid)
        };
        if ending != 0 {
            let a = match self.since.remove(&ending) {
                Some(a) => Some(a),
                // First sighting: in this state since before the trace.
                None if self.seen.insert(ending) => {
                    self.clipped_at_start += self.selected(ending, names) as u64;
                    Some(start)
                }
                None => {
                    self.unmatched += self.selected(ending, names) as u64;
                    None
                }
            };
            if let Some(a) = a {
                self.add(ending, a, s.ts, names);
            }
        }
        // A final switch-out (state dead) starts no off-CPU interval: the thread is gone,
        // and a task run later under its tid is another one.
        let gone = self.off_metric() && state_is_dead(s.prev_state);
        if starting != 0 && !gone {
            self.seen.insert(starting);
            self.since.insert(starting, s.ts);
        }
    }

    /// Close the intervals still open at the trace end `end`; how many of them count.
    fn close_open(&mut self, end: u64, names: &Threads) -> u64 {
        let mut open: Vec<(Tid, u64)> = std::mem::take(&mut self.since).into_iter().collect();
        open.sort_unstable();
        let mut counted = 0;
        for (tid, a) in open {
            if self.selected(tid, names) {
                counted += 1;
                self.add(tid, a, end, names);
            }
        }
        counted
    }
}

/// The accumulated cells laid out column by column (`rows` cells each) from
/// `acc.first_second`, and the highlighted parts alike when `highlight` (else empty).
fn layout(acc: &Acc, columns: u32, rows: u32, highlight: bool) -> (Vec<u64>, Vec<u64>) {
    let n = (columns * rows) as usize;
    let mut cells = vec![0u64; n];
    let mut highlighted = if highlight { vec![0u64; n] } else { Vec::new() };
    for (&(sec, row), &(v, h)) in &acc.cells {
        let col = sec - acc.first_second;
        if col < 0 || col >= columns as i64 {
            continue; // cannot happen: every interval lies inside [start, end]
        }
        let i = col as usize * rows as usize + row as usize;
        cells[i] += v;
        if highlight {
            highlighted[i] += h;
        }
    }
    (cells, highlighted)
}

/// Compute a heat map over the whole trace. Both ends are clipped alike: an interval
/// begun before the trace counts from the trace start, one still open at the end counts
/// up to the trace end.
pub fn compute(src: &dyn EventSource<ReportError>, opts: &HeatmapOptions) -> Result<Heatmap> {
    if opts.rows == 0 || opts.rows > 1000 {
        return Err(ReportError::BadRows(opts.rows));
    }
    let offset = src.meta().clock_offset_ns;
    let mut names = Threads::new(src.tables());
    let mut iv = Intervals {
        opts,
        offset,
        since: HashMap::new(),
        seen: HashSet::new(),
        acc: Acc {
            first_second: 0,
            rows: opts.rows,
            bucket_ns: 1_000_000_000 / opts.rows as u64,
            cells: HashMap::new(),
        },
        clipped_at_start: 0,
        unmatched: 0,
        lost_markers: 0,
    };
    let mut first_ts: Option<u64> = None;
    let mut last_ts = 0u64;
    let meta_start = src.meta().start_ns;
    // The trace start: the recording's start, or its first event if earlier (or unknown).
    let window_start = |first: u64| {
        if meta_start != 0 {
            meta_start.min(first)
        } else {
            first
        }
    };
    src.for_each_batch(&mut |events| {
        for e in events {
            let start = window_start(*first_ts.get_or_insert(e.ts()));
            last_ts = e.ts();
            names.apply(e);
            iv.event(e, start, &names);
        }
        Ok(())
    })?;
    let Some(first_ts) = first_ts else {
        return Err(ReportError::NoEvents);
    };
    let end = src.meta().end_ns.max(last_ts);
    let open_at_end = if opts.metric != Metric::Wakeups {
        iv.close_open(end, &names)
    } else {
        0
    };
    let start_wall = window_start(first_ts);
    let first_second = (start_wall as i128 + offset).div_euclid(1_000_000_000) as i64;
    let last_second = (end as i128 + offset).div_euclid(1_000_000_000) as i64;
    iv.acc.first_second = first_second;
    let span = last_second - first_second + 1;
    if span > 1_000_000 || span as u64 * opts.rows as u64 > 50_000_000 {
        return Err(ReportError::TooManyColumns {
            span,
            rows: opts.rows,
        });
    }
    let columns = span as u32;
    let (cells, highlight) = layout(&iv.acc, columns, opts.rows, opts.highlight.is_some());
    Ok(Heatmap {
        metric: opts.metric,
        first_second,
        columns,
        rows: opts.rows,
        cells,
        highlight,
        clipped_at_start: iv.clipped_at_start,
        open_at_end,
        unmatched: iv.unmatched,
        lost_markers: iv.lost_markers,
        start_ns: start_wall as i128 + offset,
        end_ns: end as i128 + offset,
        selection: opts.select.describe(),
        highlight_selection: opts.highlight.as_ref().map(|h| h.describe()),
    })
}

fn fmt_value(metric: Metric, v: u64) -> String {
    match metric {
        Metric::Wakeups => format!("{v} wakeups"),
        _ if v >= 1_000_000 => format!("{:.1} ms", v as f64 / 1e6),
        _ => format!("{:.1} us", v as f64 / 1e3),
    }
}

/// Intensity in 0..=1 of each cell for `values`.
fn intensities(values: &[u64], map: ColorMap) -> Vec<f64> {
    match map {
        ColorMap::Linear => {
            let max = values.iter().copied().max().unwrap_or(0).max(1) as f64;
            values.iter().map(|&v| v as f64 / max).collect()
        }
        ColorMap::Rank => {
            let mut distinct: Vec<u64> = values.iter().copied().filter(|&v| v > 0).collect();
            distinct.sort_unstable();
            distinct.dedup();
            let n = distinct.len().max(1) as f64;
            values
                .iter()
                .map(|&v| {
                    if v == 0 {
                        0.0
                    } else {
                        (distinct.binary_search(&v).unwrap() + 1) as f64 / n
                    }
                })
                .collect()
        }
    }
}

/// Fill of a cell: darkness from `intensity`; orange for the selected threads, blue for
/// the highlighted ones' share.
pub fn cell_fill(intensity: f64, highlighted: bool) -> String {
    let k = 0.15 + 0.85 * intensity.clamp(0.0, 1.0);
    let (r, g, b) = if highlighted {
        (255.0 - k * 235.0, 255.0 - k * 175.0, 255.0 - k * 35.0)
    } else {
        (255.0 - k * 55.0, 255.0 - k * 175.0, 255.0 - k * 245.0)
    };
    format!(
        "rgb({},{},{})",
        r.round() as u8,
        g.round() as u8,
        b.round() as u8
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Plot size the cells are scaled to fill (a short trace gets wide columns).
const PLOT_WIDTH: u32 = 900;
const PLOT_HEIGHT: u32 = 500;
/// Colour steps of the legend.
const LEGEND_STEPS: usize = 8;

/// The value a cell of `intensity` has at least (for the legend), with the intensity
/// such a cell is really drawn with.
fn value_at(values: &[u64], map: ColorMap, intensity: f64) -> (u64, f64) {
    match map {
        ColorMap::Linear => {
            let max = values.iter().copied().max().unwrap_or(0);
            ((max as f64 * intensity).round() as u64, intensity)
        }
        ColorMap::Rank => {
            let mut distinct: Vec<u64> = values.iter().copied().filter(|&v| v > 0).collect();
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.is_empty() {
                return (0, intensity);
            }
            let n = distinct.len();
            let i = ((intensity * n as f64).ceil() as usize).clamp(1, n);
            (distinct[i - 1], i as f64 / n as f64)
        }
    }
}

/// Render as a standalone SVG (tooltips per cell; deterministic): the plot scaled to
/// about `PLOT_WIDTH` x `PLOT_HEIGHT` px whatever the number of seconds, a colour
/// legend on its right, and the parts of the first and last second outside the trace
/// greyed.
pub fn render_svg(h: &Heatmap, map: ColorMap, title: &str, wall_clock: bool) -> String {
    let l = Layout::of(h);
    let (width, height) = (l.width, l.height);
    let mut s = String::new();
    let _ = write!(
        s,
        "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"Verdana, sans-serif\" font-size=\"12\">\n"
    );
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"16\">{}</text>",
        width / 2,
        esc(title)
    );
    let _ = writeln!(
        s,
        "<text x=\"{}\" y=\"40\" text-anchor=\"middle\" fill=\"rgb(90,90,90)\">{}</text>",
        width / 2,
        esc(&subtitle(h))
    );
    outside_marks(&mut s, h, &l);
    cells(&mut s, h, &l, &intensities(&h.cells, map), wall_clock);
    axes(&mut s, h, &l, wall_clock);
    legend(&mut s, h, map, l.legend_x, l.top);
    let _ = writeln!(s, "</svg>");
    s
}

/// Where the parts of the heat map's SVG go (pixels).
struct Layout {
    /// Cell width and height.
    cw: u32,
    ch: u32,
    /// Top left corner of the plot.
    left: u32,
    top: u32,
    plot_w: u32,
    plot_h: u32,
    legend_x: u32,
    width: u32,
    height: u32,
}

impl Layout {
    fn of(h: &Heatmap) -> Layout {
        let cw = (PLOT_WIDTH / h.columns.max(1)).max(4);
        let ch = (PLOT_HEIGHT / h.rows).max(1);
        let (left, top) = (70u32, 60u32);
        let (plot_w, plot_h) = (cw * h.columns, ch * h.rows);
        let legend_x = left + plot_w + 30;
        Layout {
            cw,
            ch,
            left,
            top,
            plot_w,
            plot_h,
            legend_x,
            width: legend_x + 190,
            height: top + plot_h + 60,
        }
    }
}

/// The line under the title: what a cell measures, of which threads, and what was left out.
fn subtitle(h: &Heatmap) -> String {
    let mut sub = format!(
        "{} of {} per {} ms bucket",
        h.metric.describe(),
        h.selection,
        1000 / h.rows,
    );
    if let Some(hs) = &h.highlight_selection {
        let _ = write!(sub, "; blue bar = share of {hs}");
    }
    if h.metric != Metric::Wakeups {
        sub.push_str("; waits clipped to the trace at both ends");
    }
    if h.unmatched > 0 {
        let _ = write!(
            sub,
            "; {} intervals with a lost start not counted",
            h.unmatched
        );
    }
    if h.lost_markers > 0 {
        let _ = write!(sub, "; {} lost-event markers", h.lost_markers);
    }
    sub
}

/// Outside the trace (before its start in the first second, after its end in the last):
/// grey, so that a part-second is not read as a quiet one.
fn outside_marks(s: &mut String, h: &Heatmap, l: &Layout) {
    let Layout {
        cw,
        left,
        top,
        plot_h,
        ..
    } = *l;
    let _ = writeln!(s, "<g id=\"outside\" fill=\"rgb(225,225,225)\">");
    let px_of = |t: i128| -> (u32, u32) {
        let col = (t.div_euclid(1_000_000_000) - h.first_second as i128)
            .clamp(0, h.columns as i128 - 1) as u32;
        let off = t.rem_euclid(1_000_000_000) as u64;
        (col, (off * plot_h as u64 / 1_000_000_000) as u32)
    };
    let (c0, y0) = px_of(h.start_ns);
    if y0 > 0 {
        let _ = writeln!(
            s,
            "<rect x=\"{}\" y=\"{}\" width=\"{cw}\" height=\"{y0}\"><title>before the trace</title></rect>",
            left + c0 * cw,
            top + plot_h - y0
        );
    }
    let (c1, y1) = px_of(h.end_ns);
    if y1 < plot_h && h.end_ns < (h.first_second as i128 + h.columns as i128) * 1_000_000_000 {
        let _ = writeln!(
            s,
            "<rect x=\"{}\" y=\"{top}\" width=\"{cw}\" height=\"{}\"><title>after the trace</title></rect>",
            left + c1 * cw,
            plot_h - y1
        );
    }
    let _ = writeln!(s, "</g>");
}

/// One group per non-empty cell, with its value as a tooltip.
fn cells(s: &mut String, h: &Heatmap, l: &Layout, inten: &[f64], wall_clock: bool) {
    let Layout {
        cw, ch, left, top, ..
    } = *l;
    let _ = writeln!(s, "<g id=\"cells\">");
    for col in 0..h.columns {
        for row in 0..h.rows {
            let i = (col * h.rows + row) as usize;
            let v = h.cells[i];
            if v == 0 {
                continue;
            }
            let hv = h.highlight.get(i).copied().unwrap_or(0);
            let x = left + col * cw;
            let y = top + (h.rows - 1 - row) * ch;
            let sec = h.first_second + col as i64;
            let when = if wall_clock {
                format_wall(sec as i128 * 1_000_000_000)
            } else {
                format!("second {sec}")
            };
            let from_ms = row as u64 * 1000 / h.rows as u64;
            let to_ms = (row as u64 + 1) * 1000 / h.rows as u64;
            let mut tip = format!("{when} +{from_ms}..{to_ms} ms: {}", fmt_value(h.metric, v));
            if let Some(hs) = &h.highlight_selection {
                let _ = write!(tip, " ({hs}: {})", fmt_value(h.metric, hv));
            }
            // One group per cell: the highlighted share as a blue bar on the left, the rest
            // orange, both as dark as the cell's total.
            let hw = ((cw as u64 * hv + v / 2) / v) as u32;
            let _ = write!(
                s,
                "<g data-col=\"{col}\" data-row=\"{row}\" data-value=\"{v}\" data-highlight=\"{hv}\"><title>{}</title>",
                esc(&tip)
            );
            if hw > 0 {
                let _ = write!(
                    s,
                    "<rect x=\"{x}\" y=\"{y}\" width=\"{hw}\" height=\"{ch}\" fill=\"{}\"/>",
                    cell_fill(inten[i], true)
                );
            }
            if hw < cw {
                let _ = write!(
                    s,
                    "<rect x=\"{}\" y=\"{y}\" width=\"{}\" height=\"{ch}\" fill=\"{}\"/>",
                    x + hw,
                    cw - hw,
                    cell_fill(inten[i], false)
                );
            }
            let _ = writeln!(s, "</g>");
        }
    }
    let _ = writeln!(s, "</g>");
}

/// Axes: y = offset within the second (0 at the bottom), x = seconds.
fn axes(s: &mut String, h: &Heatmap, l: &Layout, wall_clock: bool) {
    let Layout {
        cw,
        left,
        top,
        plot_w,
        plot_h,
        ..
    } = *l;
    let bottom = top + plot_h;
    let _ = writeln!(s, "<g id=\"axes\" fill=\"rgb(60,60,60)\">");
    let _ = writeln!(s, "<rect x=\"{left}\" y=\"{top}\" width=\"{plot_w}\" height=\"{plot_h}\" fill=\"none\" stroke=\"rgb(160,160,160)\"/>");
    for ms in [0u32, 250, 500, 750, 1000] {
        let y = bottom - ms * plot_h / 1000;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}.{:03} s</text>",
            left - 6,
            y + 4,
            ms / 1000,
            ms % 1000
        );
    }
    let step = (h.columns / 10).max(1);
    for col in (0..h.columns).step_by(step as usize) {
        let x = left + col * cw + cw / 2;
        let _ = writeln!(
            s,
            "<text x=\"{x}\" y=\"{}\" text-anchor=\"middle\">+{col}s</text>",
            bottom + 16
        );
    }
    let start = if wall_clock {
        format_wall(h.first_second as i128 * 1_000_000_000)
    } else {
        format!("second {}", h.first_second)
    };
    let _ = writeln!(
        s,
        "<text x=\"{left}\" y=\"{}\">x: seconds from {} ; y: offset within the second; grey: outside the trace; hover a cell for its value</text>",
        bottom + 38,
        esc(&start)
    );
    let _ = writeln!(s, "</g>");
}

/// The colour scale: up to [`LEGEND_STEPS`] swatches from the darkest (top) to the lightest,
/// each labelled with the value a cell of that colour has at least; then empty cells
/// and, with a highlight, its colour.
fn legend(s: &mut String, h: &Heatmap, map: ColorMap, x: u32, top: u32) {
    let (sw, sh) = (24u32, 22u32);
    let _ = writeln!(s, "<g id=\"legend\" fill=\"rgb(60,60,60)\">");
    let unit = match h.metric {
        Metric::Wakeups => "wakeups per cell",
        Metric::OffCpu => "off-CPU time per cell",
        Metric::OnCpu => "on-CPU time per cell",
    };
    let scale = if map == ColorMap::Rank {
        "rank scale"
    } else {
        "linear scale"
    };
    let _ = writeln!(s, "<text x=\"{x}\" y=\"{}\">{unit}</text>", top + 4);
    let _ = writeln!(
        s,
        "<text x=\"{x}\" y=\"{}\" fill=\"rgb(110,110,110)\">({scale})</text>",
        top + 20
    );
    let y0 = top + 32;
    // Steps whose value reads like the one above (few distinct values on the rank scale)
    // are left out: each swatch shown is a colour cells really have.
    let mut shown = 0u32;
    let mut last = None;
    for step in 0..LEGEND_STEPS {
        let intensity = (LEGEND_STEPS - step) as f64 / LEGEND_STEPS as f64;
        let (v, intensity) = value_at(&h.cells, map, intensity);
        let shown_value = fmt_value(h.metric, v);
        if last.as_ref() == Some(&shown_value) {
            continue;
        }
        last = Some(shown_value);
        let y = y0 + shown * sh;
        shown += 1;
        let label = if step == 0 {
            format!("{} (max)", fmt_value(h.metric, v))
        } else {
            format!("≥ {}", fmt_value(h.metric, v))
        };
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{sw}\" height=\"{sh}\" fill=\"{}\" data-legend=\"{intensity}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            cell_fill(intensity, false),
            x + sw + 8,
            y + sh / 2 + 4,
            esc(&label)
        );
    }
    let y = y0 + shown * sh + 8;
    let _ = writeln!(
        s,
        "<rect x=\"{x}\" y=\"{y}\" width=\"{sw}\" height=\"{sh}\" fill=\"white\" stroke=\"rgb(160,160,160)\"/><text x=\"{}\" y=\"{}\">0</text>",
        x + sw + 8,
        y + sh / 2 + 4
    );
    if let Some(hs) = &h.highlight_selection {
        let y = y + sh + 8;
        let _ = writeln!(
            s,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{sw}\" height=\"{sh}\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>",
            cell_fill(1.0, true),
            x + sw + 8,
            y + sh / 2 + 4,
            esc(&format!("share of {hs}"))
        );
    }
    let _ = writeln!(s, "</g>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn note_says_what_was_clipped_and_left_out() {
        let mut h = Heatmap {
            metric: Metric::OffCpu,
            first_second: 0,
            columns: 1,
            rows: 1,
            cells: vec![0],
            highlight: Vec::new(),
            clipped_at_start: 2,
            open_at_end: 3,
            unmatched: 0,
            lost_markers: 0,
            start_ns: 0,
            end_ns: 1,
            selection: "all threads".into(),
            highlight_selection: None,
        };
        assert_eq!(h.note(), "; clipped to the trace: 2 intervals begun before it (counted from its start), 3 still open at its end (counted to its end)");
        h.metric = Metric::Wakeups;
        assert_eq!(h.note(), "");
        h.unmatched = 4;
        assert_eq!(h.note(), "; 4 intervals whose start was lost not counted");
    }

    #[test]
    fn interval_split_across_buckets_and_seconds() {
        let mut acc = Acc {
            first_second: 0,
            rows: 10,
            bucket_ns: 100_000_000,
            cells: HashMap::new(),
        };
        // 0.95 s .. 1.25 s: 50 ms in (0, 9), 100 ms in (1, 0), 100 ms in (1, 1), 50 ms in (1, 2).
        acc.add_interval(950_000_000, 1_250_000_000, false);
        let mut got: Vec<_> = acc.cells.iter().map(|(&k, &v)| (k, v.0)).collect();
        got.sort();
        assert_eq!(
            got,
            vec![
                ((0, 9), 50_000_000),
                ((1, 0), 100_000_000),
                ((1, 1), 100_000_000),
                ((1, 2), 50_000_000)
            ]
        );
    }

    #[test]
    fn rank_and_linear_maps() {
        let v = [0, 10, 1000, 10, 20];
        assert_eq!(
            intensities(&v, ColorMap::Linear),
            vec![0.0, 0.01, 1.0, 0.01, 0.02]
        );
        let r = intensities(&v, ColorMap::Rank);
        assert_eq!(r, vec![0.0, 1.0 / 3.0, 1.0, 1.0 / 3.0, 2.0 / 3.0]);
    }
}

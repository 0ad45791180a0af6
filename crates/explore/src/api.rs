//! The requests the page makes, as functions of the URL: static assets built into the
//! binary, and the JSON endpoints (`docs/REPORTS.md` "chainrec serve" has their schema).
//! No path reaches the file system: a URL either names one of the fixed routes or is a
//! 404.

use crate::merged::PathRecord;
use crate::query::{BadQuery, Query};
use crate::tree::{Pixels, Tree, TreeBuilder};
use crate::ExploreError;
use chainrec_chain::critpath::CritPathOptions;
use chainrec_chain::{
    critical_path_from, Analysis, Cancel, ChainError, Checkpoints, Duration, Filter, FoldedSink,
    Grid, NodeTable, PathVisit, PieceNames, Setup, View, WaitRecord, WaitSink,
};
use chainrec_format::{CgroupSelector, RecordingMeta, Tables, ThreadSelector};
use chainrec_report::heatmap::{self, Heatmap, HeatmapOptions, Metric, Select};
use chainrec_report::progress::{Progress, Progressed};
use chainrec_report::waits::{WaitContext, WaitJson};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// Heat-map rows per second by default (20 ms buckets, as `chainrec heatmap`).
pub const DEFAULT_ROWS: u32 = 50;
/// Longest waits listed by default, and at most.
pub const DEFAULT_WAITS: u64 = 10;
const MAX_WAITS: u64 = 1000;
/// Precomputed ranges of a static report by default: the heaviest seconds of the heat map.
pub const DEFAULT_REPORT_RANGES: usize = 8;
/// The graph width a static report merges below a pixel of by default: a full-HD screen's
/// page and more (the file cannot ask for finer frames when zoomed; its grey
/// `[N frames below a pixel]` frames say what was merged).
pub const DEFAULT_REPORT_PX: u64 = 2000;

/// An answer: status, content type and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// HTTP status.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    fn json(v: &Value) -> Response {
        Response {
            status: 200,
            content_type: "application/json",
            body: serde_json::to_vec(v).unwrap_or_default(),
        }
    }
    fn asset(content_type: &'static str, s: &'static str) -> Response {
        Response {
            status: 200,
            content_type,
            body: s.as_bytes().to_vec(),
        }
    }
    /// The body as text (JSON and assets are UTF-8).
    pub fn text(&self) -> &str {
        std::str::from_utf8(&self.body).unwrap_or("")
    }
}

/// A request that cannot be answered: a 4xx (bad parameters, unknown route) or a 500 (the
/// trace failed to read), with a message for the page to show.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: u16,
    message: String,
}

impl From<BadQuery> for ApiError {
    fn from(e: BadQuery) -> ApiError {
        ApiError::bad(e.0)
    }
}

impl ApiError {
    pub(crate) fn bad(message: String) -> ApiError {
        ApiError {
            status: 400,
            message,
        }
    }
    fn failed(e: impl std::fmt::Display) -> ApiError {
        ApiError {
            status: 500,
            message: e.to_string(),
        }
    }
    /// A run's error: cancelled (409: a newer request of the same page replaced it) or a
    /// failure.
    fn of_run(e: ChainError) -> ApiError {
        match e {
            ChainError::Cancelled => ApiError {
                status: 409,
                message: "cancelled: a newer request of this page replaced it".into(),
            },
            e => ApiError::failed(e),
        }
    }
    fn response(&self) -> Response {
        Response {
            status: self.status,
            ..Response::json(&json!({ "error": self.message }))
        }
    }
}

/// One trace, opened and indexed (its default heat map computed) once, answering
/// requests.
pub struct Explorer {
    an: Arc<Analysis>,
    name: String,
    heat: Heatmap,
    duration_ns: u64,
    /// The engine's state about every [`CHECKPOINT_EVERY_NS`] of trace, right before the
    /// heat map's column starts (`checkpoint_grid`): a range's chain graph
    /// resumes from the latest one before it instead of decoding from the trace start
    /// (same result: `chainrec_chain::Checkpoints`). Taken on a thread of their own
    /// ([`Explorer::start`]); a range asked for meanwhile uses those taken so far.
    checkpoints: Arc<Checkpoints>,
    /// Events the checkpoint pass has decoded so far (the page shows it as progress).
    indexed_events: Arc<AtomicU64>,
    /// Why the checkpoint pass failed, if it did (shown by `/api/info`).
    index_error: Arc<Mutex<Option<String>>>,
    /// The checkpoint pass, until [`Explorer::wait_indexed`] joins it.
    indexing: Mutex<Option<JoinHandle<Result<(), ChainError>>>>,
    /// The running request of each (page session, endpoint) that named its page
    /// (`session=`): a newer one cancels it ([`Explorer::claim`]).
    running: Mutex<HashMap<(String, &'static str), Cancel>>,
    /// Requests cancelled that way.
    cancelled: AtomicU64,
}

/// A request's claim on its (page session, endpoint) slot: its cancellation flag, given up
/// when it ends (unless a newer request took the slot).
struct Claim<'a> {
    explorer: &'a Explorer,
    key: Option<(String, &'static str)>,
    cancel: Cancel,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            let mut running = self
                .explorer
                .running
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if running.get(&key).is_some_and(|c| c.same(&self.cancel)) {
                running.remove(&key);
            }
        }
    }
}

/// Longest `session=` id taken (the page makes 16 hex digits).
const MAX_SESSION: usize = 64;

/// Spacing of the explorer's checkpoints: a range decodes at most about this much trace
/// before its start (on a 20 M-event busy-server trace, ~0.6 M events)...
pub const CHECKPOINT_EVERY_NS: u64 = 500_000_000;
/// ... or the trace's duration over this, when larger: a checkpoint is a copy of the
/// engine's state (~20 MB on a 20 M-event busy-server trace, growing with the threads,
/// stacks and live chains it holds), so a long trace gets fewer, farther apart. 16 keeps
/// `serve` of that trace under 400 MB (32: ~670 MB; docs/BENCHMARKS.md, sessions 23 and
/// 26). The spacing is then rounded to the heat map's grid (`checkpoint_grid`).
pub const MAX_CHECKPOINTS: u64 = 16;

/// Where the explorer's checkpoints go, about `every_ns` apart: right before the heat
/// map's column starts (whole seconds from `origin_ns`, column 0's), so that a column's
/// range (a click) resumes with nothing before it to decode. `every_ns` of a second or
/// more becomes the nearest whole number of seconds (busy20m's 17.4 s / 16 = 1.09 s: every
/// second), less a fraction of a second whose multiples hold each whole second; at most
/// [`MAX_CHECKPOINTS`] (the earliest).
fn checkpoint_grid(origin_ns: u64, every_ns: u64) -> Grid {
    const SECOND: u64 = 1_000_000_000;
    let step_ns = if every_ns >= SECOND {
        (every_ns + SECOND / 2) / SECOND * SECOND
    } else {
        SECOND / SECOND.div_ceil(every_ns.max(1))
    };
    Grid {
        origin_ns,
        step_ns,
        max: MAX_CHECKPOINTS as usize,
    }
}

/// `ns` as seconds with nine decimals, exactly (`1.500000000`): how a range becomes a
/// `--window` spec that parses back to the same nanoseconds.
pub fn window_secs(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

impl Explorer {
    /// Open the explorer on `an` (named `name` on the page): computes the default heat
    /// map and the checkpoints about every [`CHECKPOINT_EVERY_NS`] (on the heat map's
    /// grid, as [`Explorer::start`]), with progress on stderr
    /// unless `quiet`, and returns when both are done.
    pub fn new(an: Analysis, name: String, quiet: bool) -> Result<Explorer, ExploreError> {
        let ex = Explorer::start(an, name, quiet, CHECKPOINT_EVERY_NS)?;
        ex.wait_indexed()?;
        Ok(ex)
    }

    /// Open the explorer on `an` (named `name` on the page): computes the default heat
    /// map (the page's first view), then returns, taking checkpoints about every
    /// `checkpoint_every_ns` of trace (or the trace's duration over [`MAX_CHECKPOINTS`],
    /// when larger), right before the heat map's column starts (`checkpoint_grid`), on a
    /// thread of its own, with progress on stderr unless `quiet` and in
    /// `/api/info`. Requests are answered meanwhile: a range resumes from the checkpoints
    /// taken so far.
    pub fn start(
        an: Analysis,
        name: String,
        quiet: bool,
        checkpoint_every_ns: u64,
    ) -> Result<Explorer, ExploreError> {
        let reader = an.reader();
        let src = Progressed::new(
            reader,
            Progress::new(reader.event_count(), "serve: indexing", quiet),
        );
        let heat = heatmap::compute(&src, &default_heat())?;
        src.finish();
        let duration_ns = an.end_ns().saturating_sub(an.start_ns());
        let every = (duration_ns / MAX_CHECKPOINTS).max(checkpoint_every_ns.max(1));
        // On the heat map's grid: column 0's second starts here (the trace's clock).
        let origin_ns = (heat.first_second as i128 * 1_000_000_000 - an.meta().clock_offset_ns)
            .clamp(0, an.start_ns() as i128) as u64;
        let grid = checkpoint_grid(origin_ns, every);
        let an = Arc::new(an);
        let checkpoints = Arc::new(an.no_checkpoints(&range_setup(Filter::default())));
        let indexed_events = Arc::new(AtomicU64::new(0));
        let index_error = Arc::new(Mutex::new(None));
        let indexing = {
            let (an, checkpoints, done) = (an.clone(), checkpoints.clone(), indexed_events.clone());
            let failed = index_error.clone();
            std::thread::Builder::new()
                .name("checkpoints".into())
                .spawn(move || {
                    let mut progress =
                        Progress::new(an.reader().event_count(), "serve: checkpoints", quiet);
                    let r = an.take_checkpoints_on_grid(&checkpoints, grid, true, |n| {
                        progress.inc(n as u64);
                        done.fetch_add(n as u64, Ordering::Relaxed);
                    });
                    progress.finish();
                    if let Err(e) = &r {
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                    }
                    r
                })
                .map_err(|e| {
                    ExploreError::Range(format!("cannot start the checkpoint thread: {e}"))
                })?
        };
        Ok(Explorer {
            an,
            name,
            heat,
            duration_ns,
            checkpoints,
            indexed_events,
            index_error,
            indexing: Mutex::new(Some(indexing)),
            running: Mutex::new(HashMap::new()),
            cancelled: AtomicU64::new(0),
        })
    }

    /// Wait until the checkpoints are all taken ([`Explorer::start`]); their pass's error
    /// if it failed (reported once; ranges then decode from the trace start, or from the
    /// checkpoints taken before the failure).
    pub fn wait_indexed(&self) -> Result<(), ExploreError> {
        let handle = self
            .indexing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        match handle.map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e.into()),
            Some(Err(_)) => Err(ExploreError::Range(
                "the checkpoint thread panicked".to_string(),
            )),
        }
    }

    /// The trace.
    pub fn analysis(&self) -> &Analysis {
        &self.an
    }

    /// Answer a GET of `url` (path and query, as the request line has it).
    pub fn handle(&self, url: &str) -> Response {
        let (path, qs) = url.split_once('?').unwrap_or((url, ""));
        let r = match path {
            "/" | "/index.html" => return Response::asset("text/html; charset=utf-8", INDEX_HTML),
            "/app.js" => return Response::asset("text/javascript; charset=utf-8", APP_JS),
            "/app.css" => return Response::asset("text/css; charset=utf-8", APP_CSS),
            "/api/info" => Query::parse(qs)
                .map_err(ApiError::from)
                .and_then(|q| self.info(q)),
            "/api/heatmap" => Query::parse(qs)
                .map_err(ApiError::from)
                .and_then(|q| self.heatmap(q)),
            "/api/chains" => Query::parse(qs)
                .map_err(ApiError::from)
                .and_then(|q| self.chains(q)),
            "/api/waits" => Query::parse(qs)
                .map_err(ApiError::from)
                .and_then(|q| self.waits(q)),
            "/api/critpath" => Query::parse(qs)
                .map_err(ApiError::from)
                .and_then(|q| self.critpath(q)),
            _ => Err(ApiError {
                status: 404,
                message: format!("no such page: {path}"),
            }),
        };
        match r {
            Ok(v) => Response::json(&v),
            Err(e) => e.response(),
        }
    }

    /// The cancellation flag of a request of `endpoint`: with `session=ID` (the page's
    /// id), a newer request of the same session and endpoint cancels this one, whose run
    /// then stops after its current chunk (409), so a new selection does not wait behind
    /// the old one's work.
    fn claim(&self, q: &mut Query, endpoint: &'static str) -> Result<Claim<'_>, ApiError> {
        let cancel = Cancel::new();
        let Some(session) = q.take("session") else {
            return Ok(Claim {
                explorer: self,
                key: None,
                cancel,
            });
        };
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if session.len() > MAX_SESSION || !session.chars().all(ok) {
            return Err(ApiError::bad(format!(
                "session={session:?}: want at most {MAX_SESSION} letters, digits, - or _"
            )));
        }
        let key = (session, endpoint);
        let old = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.clone(), cancel.clone());
        if let Some(old) = old {
            old.cancel();
            self.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Claim {
            explorer: self,
            key: Some(key),
            cancel,
        })
    }

    fn info(&self, q: Query) -> Result<Value, ApiError> {
        q.finish()?;
        let meta = self.an.meta();
        Ok(json!({
            "trace": self.name,
            "events": self.an.reader().event_count(),
            "start_ns": self.an.start_ns(),
            "duration_ns": self.duration_ns,
            "clock_offset_ns": meta.clock_offset_ns as i64,
            "lost_in_recording": meta.lost.events(),
            "cgroups": self.an.tables().has_cgroups(),
            "checkpoints": self.checkpoints.len(),
            "indexing": {
                "done": self.checkpoints.is_complete(),
                "events": self.indexed_events.load(Ordering::Relaxed),
                "error": self.index_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            },
            "ranges": {
                "resumed": self.checkpoints.uses().0,
                "from_start": self.checkpoints.uses().1,
                "cancelled": self.cancelled.load(Ordering::Relaxed),
            },
        }))
    }

    /// The header's thread filters, `comm=RE&tid=N&pid=N&cgroup=RE` (each optional): the
    /// heat map's rows, and the graph's and the waits' roots.
    fn selection(&self, q: &mut Query) -> Result<ThreadSelector, ApiError> {
        let mut threads = ThreadSelector::default();
        if let Some(c) = q.take("comm") {
            threads.comm = Some(
                chainrec_chain::regex::Regex::new(&c)
                    .map_err(|e| ApiError::bad(format!("comm={c:?}: bad regex: {e}")))?,
            );
        }
        let int = |v: Option<u64>, key: &str| -> Result<Vec<u32>, ApiError> {
            v.map(|t| u32::try_from(t).map_err(|_| ApiError::bad(format!("{key}={t}: too large"))))
                .into_iter()
                .collect()
        };
        threads.tids = int(q.u64("tid")?, "tid")?;
        threads.pids = int(q.u64("pid")?, "pid")?;
        if let Some(c) = q.take("cgroup") {
            let re = chainrec_chain::regex::Regex::new(&c)
                .map_err(|e| ApiError::bad(format!("cgroup={c:?}: bad regex: {e}")))?;
            let sel = CgroupSelector::new(re, self.an.tables()).ok_or_else(|| {
                ApiError::bad(ChainError::NoCgroups { flag: "cgroup=" }.to_string())
            })?;
            threads.cgroup = Some(std::sync::Arc::new(sel));
        }
        Ok(threads)
    }

    /// `/api/heatmap?metric=offcpu|wakeups&rows=N&comm=RE&tid=N&pid=N&cgroup=RE`.
    fn heatmap(&self, mut q: Query) -> Result<Value, ApiError> {
        let metric = match q.take("metric").as_deref() {
            None | Some("offcpu") => Metric::OffCpu,
            Some("wakeups") => Metric::Wakeups,
            Some(m) => {
                return Err(ApiError::bad(format!(
                    "metric={m:?}: want offcpu (wait time) or wakeups (count)"
                )))
            }
        };
        let rows = match q.u64("rows")? {
            None => DEFAULT_ROWS,
            Some(r @ 1..=1000) => r as u32,
            Some(r) => return Err(ApiError::bad(format!("rows={r}: want 1..=1000"))),
        };
        let threads = self.selection(&mut q)?;
        q.finish()?;
        let opts = HeatmapOptions {
            metric,
            rows,
            select: Select::new(threads),
            ..default_heat()
        };
        let computed;
        let h = if opts.metric == Metric::OffCpu
            && rows == DEFAULT_ROWS
            && opts.select.threads.is_empty()
        {
            &self.heat
        } else {
            computed = heatmap::compute(self.an.reader(), &opts).map_err(ApiError::failed)?;
            &computed
        };
        Ok(self.heat_json(h))
    }

    fn heat_json(&self, h: &Heatmap) -> Value {
        let offset = self.an.meta().clock_offset_ns;
        // Column 0's second starts here, in ns from the trace start (<= 0).
        let col0_ns = h.first_second as i128 * 1_000_000_000 - offset - self.an.start_ns() as i128;
        let cells: Vec<&[u64]> = h.cells.chunks(h.rows.max(1) as usize).collect();
        json!({
            "metric": match h.metric { Metric::Wakeups => "wakeups", _ => "offcpu" },
            "unit": if h.metric == Metric::Wakeups { "wakeups" } else { "ns" },
            "selection": h.selection,
            "rows": h.rows,
            "columns": h.columns,
            "bucket_ns": 1_000_000_000 / h.rows as u64,
            "first_second": h.first_second,
            "wall_clock": offset != 0,
            "col0_ns": col0_ns as i64,
            "duration_ns": self.duration_ns,
            "max": h.cells.iter().max().copied().unwrap_or(0),
            "total": h.total(),
            "note": h.note().trim_start_matches("; ").to_string(),
            "cells": cells,
        })
    }

    /// `from`/`to` (ns from the trace start; default: the whole trace) as the window
    /// filter `chainrec chains --window FROM..TO` builds (through the same parser).
    /// The range `from=NS&to=NS` (default: the whole trace) and the header's thread
    /// filters ([`Explorer::selection`]): the run's filter. A filtered range resumes from
    /// the checkpoints too (their state does not depend on the filter: docs/ENGINE.md).
    fn range(&self, q: &mut Query) -> Result<(u64, u64, String, Filter), ApiError> {
        let from = q.u64("from")?.unwrap_or(0);
        let to = q.u64("to")?.unwrap_or(self.duration_ns);
        let threads = self.selection(q)?;
        let (from, to, spec, mut filter) = self.range_of(from, to)?;
        filter.threads = threads;
        Ok((from, to, spec, filter))
    }

    fn range_of(&self, from: u64, to: u64) -> Result<(u64, u64, String, Filter), ApiError> {
        if from > to {
            return Err(ApiError::bad(format!("from={from} is after to={to}")));
        }
        let spec = format!("{}..{}", window_secs(from), window_secs(to));
        let window = self
            .an
            .window(&spec)
            .map_err(|e| ApiError::bad(format!("range {spec}: {e}")))?;
        let filter = Filter {
            window: Some(window),
            duration: Duration::Blocked,
            ..Filter::default()
        };
        Ok((from, to, spec, filter))
    }

    /// The chain graph of a range as a tree: the engine run of `chainrec chains --window`
    /// (default setup), read through its structured paths (no folded text).
    fn chains_tree<B: Default>(
        &self,
        filter: Filter,
        by_process: bool,
        cancel: &Cancel,
        add: impl Fn(&mut B, &PathVisit<'_>) -> bool,
    ) -> Result<(B, Value), ApiError> {
        let setup = Setup {
            process_frames: by_process,
            ..range_setup(filter)
        };
        let (summary, graph) = self
            .an
            .fold_from_until(
                setup,
                View::Chains,
                Some(&*self.checkpoints),
                Some(cancel),
                |_| {},
            )
            .map_err(ApiError::of_run)?;
        let mut b = B::default();
        graph.for_each_path(|v| add(&mut b, v));
        let s = &summary.stats;
        let counts = json!({
            "waits": s.waits,
            "roots": graph.waits_in_view(),
            "dedup": summary.dedup,
            "dedup_hidden": s.dedup_hidden,
            "lost_events": s.lost_events,
        });
        // The graph (the fold's trie and nodes) is freed here, before the next fold.
        Ok((b, counts))
    }

    /// `/api/chains?from=NS&to=NS[&base_from=NS&base_to=NS]`: with a base range, each
    /// frame's weight in it too (the differential view: same path, other range).
    fn chains(&self, mut q: Query) -> Result<Value, ApiError> {
        let (from, to, spec, filter) = self.range(&mut q)?;
        let base = match (q.u64("base_from")?, q.u64("base_to")?) {
            (None, None) => None,
            (Some(f), Some(t)) => {
                let (bf, bt, bspec, mut bfilter) = self.range_of(f, t).map_err(|e| ApiError {
                    message: format!("base: {}", e.message),
                    ..e
                })?;
                // The same threads in both ranges.
                bfilter.threads = filter.threads.clone();
                Some((bf, bt, bspec, bfilter))
            }
            _ => {
                return Err(ApiError::bad(
                    "base_from and base_to go together (the base range)".into(),
                ))
            }
        };
        let by_process = grouping(&mut q)?;
        let px = match q.u64("px")? {
            None | Some(0) => 0,
            Some(n @ 1..=MAX_PX) => n,
            Some(n) => {
                return Err(ApiError::bad(format!(
                "px={n}: want the graph's width in pixels, 1..={MAX_PX} (0 or none: every frame)"
            )))
            }
        };
        let zoom: Vec<String> = match q.take("zoom") {
            None => Vec::new(),
            Some(_) if px == 0 => {
                return Err(ApiError::bad(
                    "zoom= needs px= (the frame shown full width, for merging below a pixel)"
                        .into(),
                ))
            }
            Some(z) => z.split(';').map(str::to_string).collect(),
        };
        let claim = self.claim(&mut q, "chains")?;
        q.finish()?;
        let head = |tree: &Tree, counts: &Value| {
            json!({
                "from_ns": from,
                "to_ns": to,
                "window": spec,
                "counts": counts,
                "frames": tree.nodes.len(),
                "pruned_frames": tree.pruned_frames,
                "pruned_ns": tree.pruned_ns,
            })
        };
        let base_json =
            |bfrom: u64, bto: u64, bspec: String, bcounts: Value, total: u64, values: Vec<u64>| {
                json!({
                    "from_ns": bfrom,
                    "to_ns": bto,
                    "window": bspec,
                    "counts": bcounts,
                    "total_ns": total,
                    "values": values,
                })
            };
        let add = TreeBuilder::add_path;
        if px == 0 {
            // Every frame (pruned above MAX_FRAMES), as before `px=` existed.
            let (built, counts) = self.chains_tree(filter, by_process, &claim.cancel, add)?;
            let tree = built.finish();
            let mut v = head(&tree, &counts);
            if let Some((bfrom, bto, bspec, bfilter)) = base {
                let (b, bcounts) = self.chains_tree(bfilter, by_process, &claim.cancel, add)?;
                let btree = b.finish();
                let values = tree.values_in(&btree);
                v["base"] = base_json(bfrom, bto, bspec, bcounts, btree.nodes[0].value, values);
            }
            v["nodes"] = json!(tree.nodes);
            return Ok(v);
        }
        // Merged below a pixel: each range's walk recorded (a few bytes per frame), and
        // only the frames drawn built from it.
        let record = PathRecord::add_path;
        let (built, counts) = self.chains_tree(filter, by_process, &claim.cancel, record)?;
        let base = match base {
            Some((bfrom, bto, bspec, bfilter)) => {
                let (b, bcounts) = self.chains_tree(bfilter, by_process, &claim.cancel, record)?;
                Some((bfrom, bto, bspec, b, bcounts))
            }
            None => None,
        };
        let (base, base_head) = match base {
            Some((bfrom, bto, bspec, b, bcounts)) => (Some(b), Some((bfrom, bto, bspec, bcounts))),
            None => (None, None),
        };
        let base_total = base.as_ref().map_or(0, PathRecord::total);
        let pixels = Pixels { px, zoom: &zoom };
        let (tree, values) = built.merged(&pixels, base);
        let mut v = head(&tree, &counts);
        v["px"] = json!(px);
        v["zoom"] = json!(zoom.join(";"));
        v["merged_frames"] = json!(tree.merged_frames);
        v["remainders"] = json!(tree.remainders);
        if let (Some((bfrom, bto, bspec, bcounts)), Some(values)) = (base_head, values) {
            v["base"] = base_json(bfrom, bto, bspec, bcounts, base_total, values);
        }
        compact_nodes(&mut v, &tree);
        Ok(v)
    }

    /// `/api/waits?frame=PATH&from=NS&to=NS&limit=N`: PATH is the frame's path from the
    /// root, its frames joined by `;` (a folded line's prefix); empty, the root: every wait
    /// of the range (the page opens on the longest).
    fn waits(&self, mut q: Query) -> Result<Value, ApiError> {
        let frame = q.take_even_empty("frame").ok_or_else(|| {
            ApiError::bad(
                "frame= is required: the frame's path, its frames joined by ';' (empty: every wait)"
                    .into(),
            )
        })?;
        let limit = match q.u64("limit")? {
            None => DEFAULT_WAITS,
            Some(n @ 1..=MAX_WAITS) => n,
            Some(n) => return Err(ApiError::bad(format!("limit={n}: want 1..={MAX_WAITS}"))),
        };
        let (from, to, spec, filter) = self.range(&mut q)?;
        let by_process = grouping(&mut q)?;
        let claim = self.claim(&mut q, "waits")?;
        q.finish()?;
        let setup = Setup {
            process_frames: by_process,
            ..range_setup(filter)
        };
        let mut sink = Through {
            prefix: &frame,
            tables: self.an.tables(),
            meta: self.an.meta(),
            start_ns: self.an.start_ns(),
            limit: limit as usize,
            names: PieceNames::new(self.an.tables(), self.an.meta().stack_threshold_ns),
            one: FoldedSink::new(View::Chains),
            best: Vec::new(),
            matched: 0,
            matched_ns: 0,
        };
        // Resumed from a checkpoint, like the range's graph: the same engine run, so the
        // same waits, decoded from just before the range instead of the trace start.
        self.an
            .run_from_until(setup, &mut sink, Some(&*self.checkpoints), &claim.cancel)
            .map_err(ApiError::of_run)?;
        let waits: Vec<Value> = sink
            .best
            .into_iter()
            .map(|(ns, w)| json!({ "through_ns": ns, "wait": w }))
            .collect();
        Ok(json!({
            "frame": frame,
            "from_ns": from,
            "to_ns": to,
            "window": spec,
            "matched_waits": sink.matched,
            "matched_ns": sink.matched_ns,
            "waits": waits,
        }))
    }

    /// `/api/critpath?tid=N&from=NS&to=NS`: the thread's critical path over the range
    /// (`chainrec critical-path -t N --window`, its JSON form). The page asks for a wait's
    /// switch-out minus a margin to its switch-in plus the margin.
    fn critpath(&self, mut q: Query) -> Result<Value, ApiError> {
        let tid = q
            .u64("tid")?
            .ok_or_else(|| ApiError::bad("tid= is required: the thread".into()))?;
        let tid = u32::try_from(tid).map_err(|_| ApiError::bad(format!("tid={tid}: too large")))?;
        let from = q.u64("from")?.unwrap_or(0);
        let to = q.u64("to")?.unwrap_or(self.duration_ns);
        let claim = self.claim(&mut q, "critpath")?;
        q.finish()?;
        if from >= to {
            return Err(ApiError::bad(format!(
                "from={from} is not before to={to}: the range is empty"
            )));
        }
        let start = self.an.start_ns();
        let opts = CritPathOptions {
            window: Some((start.saturating_add(from), start.saturating_add(to))),
            ..CritPathOptions::new(tid)
        };
        let cp = critical_path_from(
            &self.an,
            &opts,
            Some(&self.checkpoints),
            Some(&claim.cancel),
        )
        .map_err(|e| match e {
            ChainError::NoSuchThread(_) | ChainError::WindowOutside { .. } => {
                ApiError::bad(e.to_string())
            }
            e => ApiError::of_run(e),
        })?;
        let mut v = chainrec_report::critpath::render_json(&cp);
        v["from_ns"] = json!(from);
        v["to_ns"] = json!(to);
        Ok(v)
    }

    /// The data of a static report ([`Explorer::static_page`]): `info`, the default
    /// `heatmap`, and `ranges`: the whole trace's chain graph, then those of the
    /// `ranges` heaviest seconds of the heat map (in time order), each with `label`,
    /// `from_ns`, `to_ns` and `chains` (the `/api/chains` answer of that range, with
    /// `px=px`: frames narrower than a pixel of a graph that wide merged; 0: every frame,
    /// pruned above 50,000). Each range's fold is freed before the next is folded.
    pub fn static_data(&self, ranges: usize, px: u64) -> Result<Value, ExploreError> {
        let to_err = |e: ApiError| ExploreError::Range(e.message);
        let mut info = self
            .info(Query::parse("").map_err(|e| ExploreError::Range(e.0))?)
            .map_err(to_err)?;
        // This server's request counters: nothing a file on disk can show.
        if let Some(fields) = info.as_object_mut() {
            fields.remove("ranges");
        }
        let heat = self.heat_json(&self.heat);
        let mut list = vec![json!({
            "label": "whole trace",
            "from_ns": 0,
            "to_ns": self.duration_ns,
        })];
        for (from, to, ns) in self.heaviest_seconds(ranges) {
            list.push(json!({
                "label": format!(
                    "{:.3} .. {:.3} s ({} off CPU)",
                    from as f64 / 1e9,
                    to as f64 / 1e9,
                    fmt_ms(ns)
                ),
                "from_ns": from,
                "to_ns": to,
            }));
        }
        for r in &mut list {
            let (from, to) = (
                r["from_ns"].as_u64().unwrap_or(0),
                r["to_ns"].as_u64().unwrap_or(0),
            );
            let q = Query::parse(&format!("from={from}&to={to}&px={px}"))
                .map_err(|e| ExploreError::Range(e.0))?;
            r["chains"] = self.chains(q).map_err(to_err)?;
        }
        Ok(json!({ "info": info, "heatmap": heat, "ranges": list }))
    }

    /// The `n` heat-map columns (seconds) with the most off-CPU time, clipped to the
    /// trace, in time order: (from, to, off-CPU ns) from the trace start.
    fn heaviest_seconds(&self, n: usize) -> Vec<(u64, u64, u64)> {
        let h = &self.heat;
        let offset = self.an.meta().clock_offset_ns;
        let col0 = h.first_second as i128 * 1_000_000_000 - offset - self.an.start_ns() as i128;
        let mut cols: Vec<(u64, usize)> = h
            .cells
            .chunks(h.rows.max(1) as usize)
            .map(|c| c.iter().sum::<u64>())
            .enumerate()
            .filter(|&(_, ns)| ns > 0)
            .map(|(i, ns)| (ns, i))
            .collect();
        cols.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        cols.truncate(n);
        cols.sort_by_key(|&(_, i)| i);
        let dur = self.duration_ns as i128;
        cols.into_iter()
            .filter_map(|(ns, i)| {
                let a = (col0 + i as i128 * 1_000_000_000).clamp(0, dur);
                let b = (col0 + (i as i128 + 1) * 1_000_000_000).clamp(0, dur);
                // A second that is the whole trace is already the first range.
                (a < b && (a, b) != (0, dur)).then_some((a as u64, b as u64, ns))
            })
            .collect()
    }

    /// The page as one self-contained HTML file: style, script and the data of
    /// [`Explorer::static_data`] inlined, a Content-Security-Policy that forbids every
    /// fetch (so it provably works with no network and no server).
    pub fn static_page(&self, ranges: usize, px: u64) -> Result<String, ExploreError> {
        let data = serde_json::to_string(&self.static_data(ranges, px)?)
            .map_err(|e| ExploreError::Range(e.to_string()))?;
        // Inside <script>, only `</` can end the element early; `<\/` is the same JSON.
        let data = data.replace("</", "<\\/");
        let csp = "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
                   script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">";
        let page = INDEX_HTML
            .replacen("<meta charset=\"utf-8\">", &format!("<meta charset=\"utf-8\">\n{csp}"), 1)
            .replacen(
                "<link rel=\"stylesheet\" href=\"app.css\">",
                &format!("<style>\n{APP_CSS}</style>"),
                1,
            )
            .replacen(
                "<script src=\"app.js\"></script>",
                &format!(
                    "<script type=\"application/json\" id=\"chainrec-data\">{data}</script>\n<script>\n{}</script>",
                    APP_JS.replace("</script", "<\\/script")
                ),
                1,
            );
        Ok(page)
    }
}

/// The widest graph `px=` takes: merging below a pixel bounds an answer to about two
/// frames per pixel and row, so `px=` also bounds its size.
pub const MAX_PX: u64 = 16_384;

/// The tree in the compact form of a `px=` answer: the strings once each (`names`, `kinds`,
/// `fills`), and one row per frame in preorder, `[name, parent, value, self, level, kind,
/// fill]` (indices into those lists; `parent` null for the root). A third of the bytes of
/// the `nodes` objects, whose keys and fills repeat in every frame.
fn compact_nodes(v: &mut Value, tree: &Tree) {
    fn index<'a>(map: &mut HashMap<&'a str, usize>, list: &mut Vec<&'a str>, s: &'a str) -> usize {
        *map.entry(s).or_insert_with(|| {
            list.push(s);
            list.len() - 1
        })
    }
    let (mut names, mut kinds, mut fills) = (Vec::new(), Vec::new(), Vec::new());
    let (mut name_at, mut kind_at, mut fill_at) = (HashMap::new(), HashMap::new(), HashMap::new());
    let rows: Vec<Value> = tree
        .nodes
        .iter()
        .map(|f| {
            json!([
                index(&mut name_at, &mut names, &f.name),
                f.parent,
                f.value,
                f.self_ns,
                f.level,
                index(&mut kind_at, &mut kinds, f.kind),
                index(&mut fill_at, &mut fills, &f.fill),
            ])
        })
        .collect();
    v["names"] = json!(names);
    v["kinds"] = json!(kinds);
    v["fills"] = json!(fills);
    v["rows"] = Value::Array(rows);
}

/// `ns` as milliseconds for a label (`123.4 ms`).
/// The engine setup of a range's chain graph (`chainrec chains --window`'s default).
/// `group=process` (a frame of each waiting thread's process above it, as `chains
/// --process-frames`) or `group=thread` (the default: threads at the root).
fn grouping(q: &mut Query) -> Result<bool, ApiError> {
    match q.take("group").as_deref() {
        None | Some("thread") => Ok(false),
        Some("process") => Ok(true),
        Some(g) => Err(ApiError::bad(format!(
            "group={g:?}: want thread (the default) or process"
        ))),
    }
}

fn range_setup(filter: Filter) -> Setup {
    Setup {
        filter,
        ..Setup::default()
    }
}

fn fmt_ms(ns: u64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

fn default_heat() -> HeatmapOptions {
    HeatmapOptions {
        metric: Metric::OffCpu,
        rows: DEFAULT_ROWS,
        ..HeatmapOptions::default()
    }
}

/// The waits whose chain passes through one frame: each wait is folded on its own (as
/// the range's graph folds it), and the nanoseconds of its lines through the frame are
/// its weight there. Keeps the `limit` heaviest.
struct Through<'a> {
    prefix: &'a str,
    tables: &'a Tables,
    meta: &'a RecordingMeta,
    start_ns: u64,
    limit: usize,
    /// Path pieces' names, kept across the waits (each named once per request).
    names: PieceNames<'a>,
    /// The fold of the wait at hand, emptied for the next (a new one per wait allocated and
    /// zeroed its first block of entries: most of the request's time).
    one: FoldedSink,
    /// Heaviest first; ties by switch-out time.
    best: Vec<(u64, WaitJson)>,
    matched: u64,
    matched_ns: u64,
}

impl WaitSink for Through<'_> {
    fn on_wait(&mut self, w: &WaitRecord, nodes: &NodeTable) {
        self.one.clear();
        self.one.on_wait(w, nodes);
        let ns = self.one.ns_through(nodes, &mut self.names, self.prefix);
        if ns == 0 {
            return;
        }
        self.matched += 1;
        self.matched_ns += ns;
        let heavier =
            |a: &(u64, WaitJson)| a.0 > ns || (a.0 == ns && a.1.switch_out_ns <= w.switch_out_ns);
        let at = self.best.partition_point(heavier);
        if at < self.limit {
            let trace = chainrec_chain::TraceRef {
                tables: self.tables,
                meta: self.meta,
                start_ns: self.start_ns,
            };
            let cx = WaitContext::new(nodes, trace, true);
            self.best.insert(at, (ns, WaitJson::new(w, &cx)));
            self.best.truncate(self.limit);
        }
    }
}

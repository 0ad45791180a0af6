//! chainrec-parquet: every wait with its chain as Apache Parquet, for SQL on a
//! workstation (DuckDB) and on engines that read Parquet (Spark, Trino, BigQuery) when
//! traces of many hosts are analysed together.
//!
//! Two tables (schemas in `docs/REPORTS.md`):
//! * waits ([`WaitsWriter`]): one row per wait, with its chain levels (`hops`) and run-queue
//!   parts (`runq`) as lists of structs and its stacks as ids;
//! * stacks ([`write_stacks`]): one row per stack id the waits use, with symbolized frames.
//!
//! A row holds the fields of `chainrec waits --json` (`WaitJson`): the engine's
//! [`WaitRecord`] appended straight to Arrow columns, its derived fields computed by the
//! functions that mapping uses (`WaitContext`'s), so both give the same values; no row
//! value is built, and names are computed once per node, state and cgroup. Rows are
//! written in row groups as the engine emits waits: memory holds one batch of rows and
//! the row group being encoded, never the whole trace.
//!
//! Every integer column is a signed 64-bit `INT64` (32-bit `INT32` for `level`): Spark,
//! Trino and BigQuery have no unsigned 64-bit type, and every value here (ids, ns since
//! boot) fits.

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, ListArray, RecordBatch,
    StructArray, TimestampMicrosecondArray,
};
use arrow_buffer::OffsetBuffer;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
use chainrec_chain::{
    stack_frames, ChainError, LevelKind, NodeTable, Setup, TraceRef, WaitRecord, WaitSink,
};
use chainrec_format::{RecordingMeta, StackId, StackKind, Tables, UtcTime};
use chainrec_report::cgroup::CgroupLabel;
use chainrec_report::export::{BoxError, WaitsInput, WaitsOutput};
use chainrec_report::output::{same_file, OutputError, TempOutput};
use chainrec_report::progress::Progress;
use chainrec_report::script::state_str;
use chainrec_report::waits::{mode_label, WaitContext};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Upper bound of a row group's encoded size held in memory.
const ROW_GROUP_BYTES: usize = 64 << 20;

/// How rows are grouped: what memory holds at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Rows collected before they are handed to the Parquet writer as one Arrow batch.
    pub batch_rows: usize,
    /// Rows per row group (readers parallelize and skip by row group); a row group is also
    /// closed at 64 MiB encoded.
    pub row_group_rows: usize,
}

impl Default for Layout {
    fn default() -> Self {
        Layout {
            batch_rows: 4096,
            row_group_rows: 128 * 1024,
        }
    }
}

/// Errors of the Parquet export.
#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    /// The Parquet writer failed (I/O included).
    #[error("writing Parquet")]
    Parquet(#[from] parquet::errors::ParquetError),
    /// Flushing the output failed.
    #[error("writing the file")]
    Io(#[from] std::io::Error),
    /// Assembling an Arrow batch failed (a bug: columns disagree with the schema).
    #[error("building an Arrow batch")]
    Arrow(#[from] arrow_schema::ArrowError),
    /// A value larger than the signed 64-bit integer columns hold.
    #[error("{field} = {value} does not fit a signed 64-bit Parquet column")]
    Overflow {
        /// Column.
        field: &'static str,
        /// The value.
        value: u64,
    },
    /// One of the two files of [`ParquetOutputs`] is another output of the command.
    #[error("export: --parquet writes {} and {}, and another output names {}", .waits.display(), .stacks.display(), .other.display())]
    Collision {
        /// The waits table.
        waits: PathBuf,
        /// The stacks table.
        stacks: PathBuf,
        /// The other output.
        other: PathBuf,
    },
    /// A host name too long for a directory name of the Hive layout, once escaped.
    #[error("host name {host:?} is {bytes} bytes as a Hive directory name (host=…, escaped); file systems take 255")]
    HostTooLong {
        /// The host name.
        host: String,
        /// The directory name's length.
        bytes: usize,
    },
    /// An output could not be created or moved into place.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Reading the trace's events failed.
    #[error("{trace}: reading events")]
    Reading {
        /// The trace, as named in messages (a set: its first and last file).
        trace: String,
        /// Why.
        #[source]
        source: ChainError,
    },
    /// Writing one of the tables failed.
    #[error("writing {}", .path.display())]
    Writing {
        /// The table's file.
        path: PathBuf,
        /// Why.
        #[source]
        source: Box<ParquetError>,
    },
}

/// Result alias for this crate.
pub type Result<T, E = ParquetError> = std::result::Result<T, E>;

/// Which trace the rows come from: written in every row of both tables, so that exports
/// of many traces can be queried together (stack ids are per trace: join on `trace` and
/// the id).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceKey {
    /// The recording host.
    pub host: String,
    /// `HOST@START`: START the UTC start of the recording (`20261124T021502.123456789Z`),
    /// or `boot+NSns` (trace clock) when the trace has no wall clock (synthetic traces).
    pub trace: String,
    /// Trace clock to Unix-epoch ns, when known.
    pub clock_offset_ns: Option<i128>,
    /// START of [`Self::trace`] (the part after `@`).
    pub start: String,
    /// The recording's start in Unix-epoch ns, when the trace has a wall clock.
    pub start_unix_ns: Option<i128>,
}

impl TraceKey {
    /// The key of a trace, from its metadata.
    pub fn new(meta: &RecordingMeta) -> Self {
        let offset = (meta.clock_offset_ns != 0).then_some(meta.clock_offset_ns);
        let start_unix_ns = offset.map(|o| meta.start_ns as i128 + o);
        let start = match start_unix_ns {
            Some(wall) => {
                let t = UtcTime::from_unix_ns(wall);
                // compact() has whole seconds; the nanoseconds keep two recordings of one
                // host apart.
                let c = t.compact();
                format!(
                    "{}.{:09}Z",
                    &c[..c.len() - 1],
                    wall.rem_euclid(1_000_000_000)
                )
            }
            None => format!("boot+{}ns", meta.start_ns),
        };
        TraceKey {
            host: meta.host.clone(),
            trace: format!("{}@{start}", meta.host),
            clock_offset_ns: offset,
            start,
            start_unix_ns,
        }
    }

    /// The UTC date the recording started (`2026-11-24`), None without a wall clock.
    pub fn utc_date(&self) -> Option<String> {
        let t = UtcTime::from_unix_ns(self.start_unix_ns?);
        Some(format!("{:04}-{:02}-{:02}", t.year, t.month, t.day))
    }
}

pub mod hive;

/// What [`WaitsWriter::finish`] reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WaitsSummary {
    /// Rows written (every wait the filter passed).
    pub rows: u64,
    /// Of them, waits dedup shows inside another chain (`root = false`).
    pub not_root: u64,
    /// Row groups written.
    pub row_groups: usize,
    /// The stack ids the rows use (for [`write_stacks`]).
    pub stacks: BTreeSet<StackId>,
}

/// The waits table, written as the engine emits waits (a [`WaitSink`]). A failure while
/// writing is kept and returned by [`WaitsWriter::finish`]; [`WaitsWriter::failed`] lets
/// the caller stop reading the trace early.
pub struct WaitsWriter<'a, W: Write + Send> {
    writer: ArrowWriter<W>,
    schema: SchemaRef,
    trace: TraceRef<'a>,
    key: TraceKey,
    /// The rows not yet handed to the Parquet writer, as columns.
    columns: WaitColumns,
    /// Strings that repeat, computed once (by the `waits --json` mapping's functions).
    names: Names,
    layout: Layout,
    summary: WaitsSummary,
    /// The stack ids the rows use, collected in a hash set (sorted once, at the end).
    stacks: FxHashSet<u32>,
    failed: Option<ParquetError>,
}

/// Columns of the waits table whose values are nearly all distinct (timestamps and
/// durations in ns), by their Parquet path (`hops.list.item.ns`: a field of a list's
/// structs): written without a dictionary.
const DISTINCT_VALUED: &[&str] = &[
    "switch_out_ns",
    "switch_out_time",
    "time_s",
    "wake_ns",
    "switch_in_ns",
    "blocked_ns",
    "runq_ns",
    "offcpu_ns",
    "attributed_ns",
    "hops.list.item.ts_ns",
    "hops.list.item.ns",
    "runq.list.item.ns",
    "oncpu.list.item.ns",
];

/// The writer properties both tables use: zstd pages, bounded row groups, and the trace's
/// key as file metadata.
fn properties(key: &TraceKey, table: &str, layout: Layout) -> WriterProperties {
    let kv = |k: &str, v: &str| parquet::file::metadata::KeyValue::new(k.into(), v.to_string());
    let mut b = WriterProperties::builder();
    // Times and durations are nearly all distinct: a dictionary saves nothing there (the
    // writer falls back to plain pages once it is full, about a row group of int64s),
    // and interning every value was the Parquet export's largest cost. zstd still
    // compresses the plain pages.
    for path in DISTINCT_VALUED {
        let path =
            parquet::schema::types::ColumnPath::new(path.split('.').map(String::from).collect());
        b = b.set_column_dictionary_enabled(path, false);
    }
    b.set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_row_count(Some(layout.row_group_rows.max(1)))
        .set_max_row_group_bytes(Some(ROW_GROUP_BYTES))
        .set_created_by(format!("chainrec {}", env!("CARGO_PKG_VERSION")))
        .set_key_value_metadata(Some(vec![
            kv("chainrec.table", table),
            kv("chainrec.host", &key.host),
            kv("chainrec.trace", &key.trace),
        ]))
        .build()
}

impl<'a, W: Write + Send> WaitsWriter<'a, W> {
    /// A writer of the waits table of a run over `trace` (its start: for `time_s`).
    pub fn new(out: W, trace: TraceRef<'a>, layout: Layout) -> Result<Self> {
        let key = TraceKey::new(trace.meta);
        let schema = WaitColumns::default().batch(&key)?.schema();
        let props = properties(&key, "waits", layout);
        let writer = ArrowWriter::try_new(out, schema.clone(), Some(props))?;
        Ok(WaitsWriter {
            writer,
            schema,
            trace,
            key,
            columns: WaitColumns::default(),
            names: Names::default(),
            layout,
            summary: WaitsSummary::default(),
            stacks: FxHashSet::default(),
            failed: None,
        })
    }

    /// Whether writing failed (the rest of the trace need not be read; [`Self::finish`]
    /// returns the error).
    pub fn failed(&self) -> bool {
        self.failed.is_some()
    }

    /// The schema of the waits table.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn write_rows(&mut self) -> Result<()> {
        if self.columns.rows == 0 {
            return Ok(());
        }
        let batch = self.columns.batch(&self.key)?;
        self.writer.write(&batch)?;
        Ok(())
    }

    /// Write the last rows and the file footer; the output is complete after this.
    pub fn finish(mut self) -> Result<WaitsSummary> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.write_rows()?;
        let meta = self.writer.finish()?;
        self.writer.sync()?;
        self.summary.row_groups = meta.num_row_groups();
        self.summary.stacks = self.stacks.iter().map(|&id| StackId(id)).collect();
        Ok(self.summary)
    }
}

impl<W: Write + Send> WaitSink for WaitsWriter<'_, W> {
    fn on_wait(&mut self, w: &WaitRecord, nodes: &NodeTable) {
        if self.failed.is_some() {
            return;
        }
        let cx = WaitContext::new(nodes, self.trace, false);
        let s = &mut self.stacks;
        s.extend([w.kstack.0, w.ustack.0]);
        for h in &w.hops {
            s.extend([h.kstack.0, h.ustack.0]);
        }
        self.summary.rows += 1;
        self.summary.not_root += u64::from(!w.root);
        let wall = match self.key.clock_offset_ns {
            None => None,
            Some(o) => match i64::try_from((w.switch_out_ns as i128 + o).div_euclid(1000)) {
                Ok(t) => Some(t),
                Err(_) => {
                    self.failed = Some(ParquetError::Overflow {
                        field: "switch_out_time",
                        value: w.switch_out_ns,
                    });
                    return;
                }
            },
        };
        // A failed row leaves the columns uneven; nothing more is written then.
        if let Err(e) = self.columns.push(w, wall, &cx, &mut self.names) {
            self.failed = Some(e);
            return;
        }
        if self.columns.rows >= self.layout.batch_rows {
            if let Err(e) = self.write_rows() {
                self.failed = Some(e);
            }
        }
    }
}

/// The kind of a chain level: `thread` (a thread woke the level below) or, where the chain
/// ends (metal), `hardirq`, `softirq`, `nmi` or `idle`, as its metal label says
/// (`[softirq: NET_RX]`, `[idle]`, ...; a softirq the idle task ran itself is `softirq`).
pub fn level_kind(metal: bool, context: &'static str) -> &'static str {
    match (metal, context) {
        (false, _) => "thread",
        (true, "task") => "idle",
        (true, "softirq-task") => "softirq",
        (true, c) => c,
    }
}

/// A column: its field and its array, so that the schema and the data come from one list.
type Column = (Field, ArrayRef);

fn i64_of(field: &'static str, v: u64) -> Result<i64> {
    i64::try_from(v).map_err(|_| ParquetError::Overflow { field, value: v })
}

fn opt_i64_of(field: &'static str, v: Option<u64>) -> Result<Option<i64>> {
    v.map(|v| i64_of(field, v)).transpose()
}

fn i32_of(field: &'static str, v: u64) -> Result<i32> {
    i32::try_from(v).map_err(|_| ParquetError::Overflow { field, value: v })
}

fn take<T>(v: &mut Vec<T>) -> Vec<T> {
    std::mem::take(v)
}

fn int(name: &'static str, v: Vec<i64>) -> Column {
    let a = Int64Array::from(v);
    (Field::new(name, DataType::Int64, false), Arc::new(a))
}

fn opt_int(name: &'static str, v: Vec<Option<i64>>) -> Column {
    let a = Int64Array::from(v);
    (Field::new(name, DataType::Int64, true), Arc::new(a))
}

fn level(name: &'static str, v: Vec<i32>) -> Column {
    let a = Int32Array::from(v);
    (Field::new(name, DataType::Int32, false), Arc::new(a))
}

fn flag(name: &'static str, v: Vec<bool>) -> Column {
    let a = BooleanArray::from(v);
    (Field::new(name, DataType::Boolean, false), Arc::new(a))
}

/// A string column from its builder (emptied for the next batch).
fn text(name: &'static str, b: &mut StringBuilder, nullable: bool) -> Column {
    (
        Field::new(name, DataType::Utf8, nullable),
        Arc::new(b.finish()),
    )
}

/// A string column of `rows` copies of one value.
fn same_text(name: &'static str, value: &str, rows: usize) -> Column {
    let mut b = StringBuilder::with_capacity(rows, rows * value.len());
    for _ in 0..rows {
        b.append_value(value);
    }
    text(name, &mut b, false)
}

/// A list-of-structs column: `items` are the structs' columns over all rows' items
/// concatenated, `lengths` the number of items of each row.
fn list_of(name: &'static str, items: Vec<Column>, lengths: Vec<usize>) -> Result<Column> {
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = items.into_iter().unzip();
    let fields = Fields::from(fields);
    let structs = StructArray::try_new(fields.clone(), arrays, None)?;
    let item = Arc::new(Field::new("item", DataType::Struct(fields), false));
    let list = ListArray::try_new(
        item.clone(),
        OffsetBuffer::from_lengths(lengths),
        Arc::new(structs),
        None,
    )?;
    Ok((
        Field::new(name, DataType::List(item), false),
        Arc::new(list),
    ))
}

/// The strings of the waits table that repeat, each computed once by the functions of the
/// `waits --json` mapping: node names per node id, state letters per state, cgroup labels
/// per cgroup id.
#[derive(Default)]
struct Names {
    nodes: Vec<Option<Box<str>>>,
    states: FxHashMap<u32, Box<str>>,
    cgroups: FxHashMap<u64, CgroupLabel>,
}

impl Names {
    fn node(&mut self, id: u32, cx: &WaitContext<'_>) -> &str {
        let i = id as usize;
        if self.nodes.len() <= i {
            self.nodes.resize(i + 1, None);
        }
        self.nodes[i].get_or_insert_with(|| cx.node_name(id).into())
    }

    fn state(&mut self, state: u32) -> &str {
        self.states
            .entry(state)
            .or_insert_with(|| state_str(state).into())
    }

    fn cgroup(&mut self, id: u64, cx: &WaitContext<'_>) -> &CgroupLabel {
        self.cgroups
            .entry(id)
            .or_insert_with(|| CgroupLabel::of(cx.tables, id))
    }
}

/// The columns of a chain level (`hops[]`), over the batch's rows' levels.
#[derive(Default)]
struct HopColumns {
    level: Vec<i32>,
    parent: Vec<i32>,
    waits: Vec<i32>,
    kind: StringBuilder,
    context: StringBuilder,
    metal: Vec<bool>,
    ts_ns: Vec<i64>,
    waker_tid: Vec<i64>,
    waker_tgid: Vec<i64>,
    waker_comm: StringBuilder,
    waker_cgroup: StringBuilder,
    node: StringBuilder,
    node_id: Vec<i64>,
    kstack: Vec<i64>,
    ustack: Vec<i64>,
    ns: Vec<i64>,
}

/// The columns of a run-queue part (`runq[]`), over the batch's rows' parts.
#[derive(Default)]
struct RunqColumns {
    level: Vec<i32>,
    holder: StringBuilder,
    holder_id: Vec<i64>,
    ns: Vec<i64>,
}

/// The columns of an on-CPU part (`oncpu[]`), over the batch's rows' parts.
#[derive(Default)]
struct OnCpuColumns {
    level: Vec<i32>,
    ns: Vec<i64>,
    node: StringBuilder,
    node_id: Vec<i64>,
    kstack: Vec<i64>,
    ustack: Vec<i64>,
}

/// The waits table's rows not yet written, as columns: a record is appended straight to
/// them (no row value, no string per row).
#[derive(Default)]
struct WaitColumns {
    rows: usize,
    tid: Vec<i64>,
    tgid: Vec<i64>,
    comm: StringBuilder,
    cgroup: StringBuilder,
    container_id: StringBuilder,
    pod_uid: StringBuilder,
    kernel_thread: Vec<bool>,
    state: Vec<i64>,
    state_str: StringBuilder,
    switch_out_ns: Vec<i64>,
    /// Switch-out in Unix-epoch µs (None without a wall clock): microseconds, the
    /// timestamp every Parquet reader takes (Spark and BigQuery do not read ns ones).
    switch_out_time: Vec<Option<i64>>,
    time_s: Vec<f64>,
    wake_ns: Vec<Option<i64>>,
    switch_in_ns: Vec<Option<i64>>,
    blocked_ns: Vec<Option<i64>>,
    runq_ns: Vec<Option<i64>>,
    offcpu_ns: Vec<Option<i64>>,
    attributed_ns: Vec<i64>,
    node: StringBuilder,
    node_id: Vec<i64>,
    kstack: Vec<i64>,
    ustack: Vec<i64>,
    hops: HopColumns,
    hop_lengths: Vec<usize>,
    runq: RunqColumns,
    runq_lengths: Vec<usize>,
    oncpu: OnCpuColumns,
    oncpu_lengths: Vec<usize>,
    truncated: Vec<bool>,
    cycle: Vec<bool>,
    lost: Vec<bool>,
    root: Vec<bool>,
    mode: StringBuilder,
}

impl WaitColumns {
    /// Append one wait (`wall`: its `switch_out_time`). On an error the columns are left
    /// uneven: the caller writes no more.
    fn push(
        &mut self,
        w: &WaitRecord,
        wall: Option<i64>,
        cx: &WaitContext<'_>,
        names: &mut Names,
    ) -> Result<()> {
        self.tid.push(w.tid.into());
        self.tgid.push(w.tgid.into());
        self.comm.append_value(w.comm.as_str());
        match cx.wait_cgroup(w).map(|id| names.cgroup(id, cx)) {
            Some(c) => {
                self.cgroup.append_value(&c.cgroup);
                self.container_id.append_option(c.container_id.as_deref());
                self.pod_uid.append_option(c.pod_uid.as_deref());
            }
            None => {
                self.cgroup.append_null();
                self.container_id.append_null();
                self.pod_uid.append_null();
            }
        }
        self.kernel_thread.push(w.kernel_thread);
        self.state.push(w.state.into());
        self.state_str.append_value(names.state(w.state));
        self.switch_out_ns
            .push(i64_of("switch_out_ns", w.switch_out_ns)?);
        self.switch_out_time.push(wall);
        self.time_s.push(cx.time_s(w));
        self.wake_ns.push(opt_i64_of("wake_ns", w.wake_ns)?);
        self.switch_in_ns
            .push(opt_i64_of("switch_in_ns", w.switch_in_ns)?);
        self.blocked_ns
            .push(opt_i64_of("blocked_ns", w.blocked_ns())?);
        self.runq_ns.push(opt_i64_of("runq_ns", w.runq_ns())?);
        self.offcpu_ns.push(opt_i64_of("offcpu_ns", w.offcpu_ns())?);
        self.attributed_ns
            .push(i64_of("attributed_ns", w.attributed_ns())?);
        self.node.append_value(names.node(w.node, cx));
        self.node_id.push(w.node.into());
        self.kstack.push(w.kstack.0.into());
        self.ustack.push(w.ustack.0.into());
        let h = &mut self.hops;
        for (i, hop) in w.hops.iter().enumerate() {
            let context = hop.context_label(cx.nodes);
            h.level.push(i32_of("level", i as u64 + 1)?);
            h.parent.push(i32_of("parent", hop.parent.into())?);
            h.waits.push(i32_of("waits", hop.waits.into())?);
            h.kind.append_value(match hop.kind {
                LevelKind::Waker => level_kind(hop.metal, context),
                LevelKind::EarlierWait => "earlier wait",
                LevelKind::NotFollowed => "blocked: not followed",
            });
            h.context.append_value(context);
            h.metal.push(hop.metal);
            h.ts_ns.push(i64_of("ts_ns", hop.ts)?);
            h.waker_tid.push(hop.waker_tid.into());
            h.waker_tgid.push(hop.waker_tgid.into());
            h.waker_comm.append_value(hop.waker_comm.as_str());
            match cx.waker_cgroup(hop) {
                Some(id) => h.waker_cgroup.append_value(&names.cgroup(id, cx).cgroup),
                None => h.waker_cgroup.append_null(),
            }
            h.node.append_value(names.node(hop.node, cx));
            h.node_id.push(hop.node.into());
            h.kstack.push(hop.kstack.0.into());
            h.ustack.push(hop.ustack.0.into());
            h.ns.push(i64_of("ns", hop.ns)?);
        }
        self.hop_lengths.push(w.hops.len());
        let r = &mut self.runq;
        for p in &w.runq {
            r.level.push(i32_of("level", p.level.into())?);
            r.holder.append_value(names.node(p.holder, cx));
            r.holder_id.push(p.holder.into());
            r.ns.push(i64_of("ns", p.ns)?);
        }
        self.runq_lengths.push(w.runq.len());
        let o = &mut self.oncpu;
        for p in &w.oncpu {
            let n = cx.nodes.get(p.node);
            o.level.push(i32_of("level", p.level.into())?);
            o.ns.push(i64_of("ns", p.ns)?);
            o.node.append_value(names.node(p.node, cx));
            o.node_id.push(p.node.into());
            o.kstack.push(n.kstack.0.into());
            o.ustack.push(n.ustack.0.into());
        }
        self.oncpu_lengths.push(w.oncpu.len());
        self.truncated.push(w.truncated);
        self.cycle.push(w.cycle);
        self.lost.push(w.lost);
        self.root.push(w.root);
        self.mode.append_value(mode_label(w.mode));
        self.rows += 1;
        Ok(())
    }

    /// The rows appended so far as one batch (the columns are emptied); with no rows, the
    /// table's schema. The one place that lists the table's columns (docs/REPORTS.md
    /// follows it).
    fn batch(&mut self, key: &TraceKey) -> Result<RecordBatch> {
        let rows = std::mem::take(&mut self.rows);
        let h = &mut self.hops;
        let hops = vec![
            level("level", take(&mut h.level)),
            level("parent", take(&mut h.parent)),
            level("waits", take(&mut h.waits)),
            text("kind", &mut h.kind, false),
            text("context", &mut h.context, false),
            flag("metal", take(&mut h.metal)),
            int("ts_ns", take(&mut h.ts_ns)),
            int("waker_tid", take(&mut h.waker_tid)),
            int("waker_tgid", take(&mut h.waker_tgid)),
            text("waker_comm", &mut h.waker_comm, false),
            text("waker_cgroup", &mut h.waker_cgroup, true),
            text("node", &mut h.node, false),
            int("node_id", take(&mut h.node_id)),
            int("kstack", take(&mut h.kstack)),
            int("ustack", take(&mut h.ustack)),
            int("ns", take(&mut h.ns)),
        ];
        let r = &mut self.runq;
        let runq = vec![
            level("level", take(&mut r.level)),
            text("holder", &mut r.holder, false),
            int("holder_id", take(&mut r.holder_id)),
            int("ns", take(&mut r.ns)),
        ];
        let o = &mut self.oncpu;
        let oncpu = vec![
            level("level", take(&mut o.level)),
            int("ns", take(&mut o.ns)),
            text("node", &mut o.node, false),
            int("node_id", take(&mut o.node_id)),
            int("kstack", take(&mut o.kstack)),
            int("ustack", take(&mut o.ustack)),
        ];
        let wall = TimestampMicrosecondArray::from(take(&mut self.switch_out_time));
        let columns = vec![
            same_text("host", &key.host, rows),
            same_text("trace", &key.trace, rows),
            int("tid", take(&mut self.tid)),
            int("tgid", take(&mut self.tgid)),
            text("comm", &mut self.comm, false),
            text("cgroup", &mut self.cgroup, true),
            text("container_id", &mut self.container_id, true),
            text("pod_uid", &mut self.pod_uid, true),
            flag("kernel_thread", take(&mut self.kernel_thread)),
            int("state", take(&mut self.state)),
            text("state_str", &mut self.state_str, false),
            int("switch_out_ns", take(&mut self.switch_out_ns)),
            (
                Field::new(
                    "switch_out_time",
                    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                    true,
                ),
                Arc::new(wall.with_timezone("UTC")) as ArrayRef,
            ),
            (
                Field::new("time_s", DataType::Float64, false),
                Arc::new(Float64Array::from(take(&mut self.time_s))) as ArrayRef,
            ),
            opt_int("wake_ns", take(&mut self.wake_ns)),
            opt_int("switch_in_ns", take(&mut self.switch_in_ns)),
            opt_int("blocked_ns", take(&mut self.blocked_ns)),
            opt_int("runq_ns", take(&mut self.runq_ns)),
            opt_int("offcpu_ns", take(&mut self.offcpu_ns)),
            int("attributed_ns", take(&mut self.attributed_ns)),
            text("node", &mut self.node, false),
            int("node_id", take(&mut self.node_id)),
            int("kstack", take(&mut self.kstack)),
            int("ustack", take(&mut self.ustack)),
            list_of("hops", hops, take(&mut self.hop_lengths))?,
            list_of("runq", runq, take(&mut self.runq_lengths))?,
            list_of("oncpu", oncpu, take(&mut self.oncpu_lengths))?,
            flag("truncated", take(&mut self.truncated)),
            flag("cycle", take(&mut self.cycle)),
            flag("lost", take(&mut self.lost)),
            flag("root", take(&mut self.root)),
            text("mode", &mut self.mode, false),
        ];
        batch(columns)
    }
}

fn batch(columns: Vec<Column>) -> Result<RecordBatch> {
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns.into_iter().unzip();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// What [`write_stacks`] reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StacksSummary {
    /// Rows (stack ids).
    pub rows: u64,
    /// Frames over all rows.
    pub frames: u64,
}

/// The `kind` of a stack id: `kernel`, `user`, or `none` for the reserved ids that say why
/// a wait has no stack (their one frame says why, e.g. `[no stack: wait < 100us]`).
fn stack_kind(tables: &Tables, id: StackId) -> (&'static str, u32) {
    match tables.stacks.get(&id).filter(|_| id.is_real()) {
        Some(s) => match s.kind {
            StackKind::Kernel => ("kernel", 0),
            StackKind::User => ("user", s.tgid),
        },
        None => ("none", 0),
    }
}

/// Write the stacks table of `trace`: one row per id of `ids`, with its frames (leaf first)
/// as `chainrec waits --frames` prints them, in batches and row groups of `layout`.
pub fn write_stacks<W: Write + Send>(
    out: W,
    trace: TraceRef<'_>,
    ids: &BTreeSet<StackId>,
    layout: Layout,
) -> Result<StacksSummary> {
    let TraceRef { tables, meta, .. } = trace;
    let key = TraceKey::new(meta);
    let chunk = |ids: &[StackId]| -> Result<(RecordBatch, u64)> {
        let mut frames = ListBuilder::new(StringBuilder::new()).with_field(Field::new(
            "item",
            DataType::Utf8,
            false,
        ));
        let mut n = 0;
        for &id in ids {
            let f = stack_frames(tables, id, meta.stack_threshold_ns);
            n += f.len() as u64;
            frames.values().extend(f.into_iter().map(Some));
            frames.append(true);
        }
        let frames = frames.finish();
        let mut kind = StringBuilder::new();
        let mut tgid = Vec::with_capacity(ids.len());
        for &id in ids {
            let (k, t) = stack_kind(tables, id);
            kind.append_value(k);
            tgid.push(t.into());
        }
        let columns = vec![
            same_text("host", &key.host, ids.len()),
            same_text("trace", &key.trace, ids.len()),
            int("stack_id", ids.iter().map(|id| id.0.into()).collect()),
            text("kind", &mut kind, false),
            int("tgid", tgid),
            (
                Field::new("frames", frames.data_type().clone(), false),
                Arc::new(frames) as ArrayRef,
            ),
        ];
        Ok((batch(columns)?, n))
    };
    let (empty, _) = chunk(&[])?;
    let props = properties(&key, "stacks", layout);
    let mut writer = ArrowWriter::try_new(out, empty.schema(), Some(props))?;
    let ids: Vec<StackId> = ids.iter().copied().collect();
    let mut summary = StacksSummary::default();
    for part in ids.chunks(layout.batch_rows.max(1)) {
        let (b, n) = chunk(part)?;
        writer.write(&b)?;
        summary.rows += part.len() as u64;
        summary.frames += n;
    }
    writer.finish()?;
    writer.sync()?;
    Ok(summary)
}

/// The stacks table's file beside a waits table's: `waits.parquet` → `waits.stacks.parquet`
/// (other names get `.stacks.parquet` appended).
pub fn stacks_path(waits: &Path) -> PathBuf {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    let b = waits.as_os_str().as_bytes();
    let stem = match b.strip_suffix(b".parquet") {
        Some(stem) if !stem.is_empty() && !stem.ends_with(b"/") => stem,
        _ => b,
    };
    let mut out = stem.to_vec();
    out.extend_from_slice(b".stacks.parquet");
    std::ffi::OsString::from_vec(out).into()
}

/// The two files of a Parquet export: created before the long work, moved into place only
/// when both are complete (removed on failure, as the other exports).
pub struct ParquetOutputs {
    waits: TempOutput,
    stacks: TempOutput,
}

impl ParquetOutputs {
    /// The outputs for `waits` and, beside it, its stacks table ([`stacks_path`]); an error
    /// when either is one of `others` (the command's other outputs).
    pub fn create(waits: &Path, others: &[&Path]) -> Result<Self> {
        let stacks = stacks_path(waits);
        for p in [waits, stacks.as_path()] {
            if let Some(o) = others.iter().find(|o| same_file(o, p)) {
                return Err(ParquetError::Collision {
                    waits: waits.to_path_buf(),
                    stacks: stacks.clone(),
                    other: o.to_path_buf(),
                });
            }
        }
        Ok(ParquetOutputs {
            waits: TempOutput::create(waits)?,
            stacks: TempOutput::create(&stacks)?,
        })
    }

    /// The outputs for the two tables at the given paths (a part of a Hive layout:
    /// [`hive::Part`]).
    pub fn create_at(waits: &Path, stacks: &Path) -> Result<Self> {
        Ok(ParquetOutputs {
            waits: TempOutput::create(waits)?,
            stacks: TempOutput::create(stacks)?,
        })
    }

    /// The destinations: the waits table, then the stacks table.
    pub fn dests(&self) -> [&Path; 2] {
        [self.waits.dest(), self.stacks.dest()]
    }
}

/// Runs the engine over the trace (time-bounded attribution, default depth, dedup as
/// `chains`: every wait is a row, `root` says which ones `chains` draws) and writes both
/// tables. What the engine noticed about the trace goes to `note` (`note: ...`; rows near
/// such places may be incomplete).
impl WaitsOutput for ParquetOutputs {
    fn write(
        &mut self,
        input: WaitsInput<'_>,
        note: &mut dyn FnMut(&str),
    ) -> Result<String, BoxError> {
        let WaitsInput {
            an,
            trace,
            filter,
            quiet,
            shared,
        } = input;
        let [waits_path, stacks_path] = self.dests().map(Path::to_path_buf);
        let writing = |path: &PathBuf| {
            let path = path.clone();
            move |e| ParquetError::Writing {
                path,
                source: Box::new(e),
            }
        };
        let out = BufWriter::with_capacity(1 << 20, self.waits.file()?);
        let mut w =
            WaitsWriter::new(out, an.trace(), Layout::default()).map_err(writing(&waits_path))?;
        let setup = Setup {
            filter,
            ..Setup::default()
        };
        let mut progress = Progress::new(an.reader().event_count(), "parquet", quiet);
        // Stop reading once the output failed (a full disk); finish() returns the error.
        // The other outputs' sinks (the pprof profile) are fed by the same run.
        let summary = shared
            .run_while(an, setup, &mut w, |w, n| {
                progress.inc(n as u64);
                !w.failed()
            })
            .map_err(|source| ParquetError::Reading {
                trace: trace.to_string(),
                source,
            })?;
        progress.finish();
        for n in summary.stats.anomaly_notes(an.start_ns()) {
            note(&format!("note: {n}"));
        }
        let waits = w.finish().map_err(writing(&waits_path))?;
        let out = BufWriter::with_capacity(1 << 20, self.stacks.file()?);
        let stacks = write_stacks(out, an.trace(), &waits.stacks, Layout::default())
            .map_err(writing(&stacks_path))?;
        Ok(format!(
            "wrote {} ({} waits in {} row group(s), {} of them shown inside other chains: root = false) and {} ({} stacks, {} frames)",
            waits_path.display(),
            waits.rows,
            waits.row_groups,
            waits.not_root,
            stacks_path.display(),
            stacks.rows,
            stacks.frames
        ))
    }

    /// Move both files into place.
    fn commit(&mut self) -> Result<(), OutputError> {
        self.waits.commit()?;
        self.stacks.commit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_file_sits_beside_the_waits_file() {
        for (waits, stacks) in [
            ("waits.parquet", "waits.stacks.parquet"),
            ("/d/w.parquet", "/d/w.stacks.parquet"),
            ("out", "out.stacks.parquet"),
            ("/d/.parquet", "/d/.parquet.stacks.parquet"),
        ] {
            assert_eq!(stacks_path(Path::new(waits)), PathBuf::from(stacks));
        }
    }

    #[test]
    fn trace_key_names_host_and_start() {
        let mut meta = RecordingMeta {
            host: "db7".into(),
            start_ns: 1_000,
            ..RecordingMeta::default()
        };
        let k = TraceKey::new(&meta);
        assert_eq!(k.trace, "db7@boot+1000ns");
        assert_eq!(k.clock_offset_ns, None);
        // Wall start = 1_795_000_000.000_001_789 s = 2026-11-18 11:06:40 UTC.
        meta.clock_offset_ns = 1_795_000_000_000_000_789;
        let k = TraceKey::new(&meta);
        assert_eq!(k.trace, "db7@20261118T110640.000001789Z");
        assert_eq!(k.host, "db7");
    }
}

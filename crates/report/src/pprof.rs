//! The chain graph as a pprof profile (`perftools.profiles.Profile`, gzipped), for
//! `go tool pprof` and fleet profilers that ingest pprof. Built from the engine's record
//! stream ([`ProfileSink`], a [`WaitSink`]; the finished run, one
//! [`Collected`] value, is rendered by [`Profile::of`]): each wait is reduced to the paths of the
//! `chains` view (same reduction, same dedup, so the values add up to `chains` to the
//! nanosecond), and every (path, waiting thread) is one sample. Locations are the path's
//! real frames, leaf first (the top of the chain is the leaf); the `--` and `-`
//! separators of folded text are left out, so `-top`, `-peek` and the call graph show
//! functions, threads and interrupts only. The chain level is kept as a sample label
//! (`level`, the level the time is attributed to) and in each function's file name
//! (`thread`, `kernel`, `user`, `interrupt`, ... — the frame's kind); the waiting thread
//! is in the `pid`, `tid` and `comm` labels (`-tagfocus=comm=sink`).
//!
//! pprof details: one Mapping that says functions are known (so pprof neither warns
//! "Main binary filename not available" nor tries to symbolize), and `system_name` left
//! empty, which tells pprof the names are already demangled (with `system_name == name`
//! its C++ simplifier would cut Rust names such as `<std::thread::Thread>::park_timeout`
//! down to `::park_timeout`).
//!
//! Field numbers from the published proto/profile.proto of google/pprof.

use crate::{ReportError, Result};
use chainrec_chain::fold::PathReducer;
use chainrec_chain::{
    Collected, FrameKind, FrameNamer, NodeId, NodeTable, View, WaitRecord, WaitSink,
};
use chainrec_format::{Comm, Tid};
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

/// `perftools.profiles.Profile` (the fields we use).
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// sample_type = 1.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// sample = 2.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// mapping = 3.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// location = 4.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// function = 5.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// string_table = 6.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// time_nanos = 9.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// duration_nanos = 10.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// period_type = 11.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// period = 12.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// comment = 13.
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// default_sample_type = 14.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `perftools.profiles.ValueType`.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// type = 1 (string index).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// unit = 2 (string index).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `perftools.profiles.Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// location_id = 1 (leaf first).
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// value = 2.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// label = 3.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `perftools.profiles.Label`: a string (`str`) or a number (`num`, with `num_unit`).
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// key = 1 (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// str = 2 (string index).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// num = 3.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// num_unit = 4 (string index).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `perftools.profiles.Mapping`.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// id = 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// memory_start = 2.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// memory_limit = 3.
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// file_offset = 4.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// filename = 5 (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// build_id = 6 (string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// has_functions = 7.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
}

/// `perftools.profiles.Location`.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// id = 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// mapping_id = 2.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// address = 3 (a made-up, unique address inside the mapping).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// line = 4.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `perftools.profiles.Line`.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// function_id = 1.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
}

/// `perftools.profiles.Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// id = 1.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// name = 2 (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// system_name = 3 (string index; 0 = empty: the name is not mangled).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// filename = 4 (string index): the frame's kind.
    #[prost(int64, tag = "4")]
    pub filename: i64,
}

/// Profile-wide facts.
#[derive(Clone, Debug, Default)]
pub struct ProfileInfo {
    /// Wall-clock start of the recording, ns since the epoch (0 = unknown).
    pub time_nanos: i64,
    /// Length of the recording in ns.
    pub duration_nanos: i64,
    /// Free-form comments (e.g. the command line, lost-event counts).
    pub comments: Vec<String>,
}

impl ProfileInfo {
    /// The facts of `an`'s trace (`trace` is its file, named in the comment): wall-clock
    /// start when the trace has a wall clock, its length.
    pub fn of_trace(an: &chainrec_chain::Analysis, trace: &std::path::Path) -> Self {
        let (start, end) = (an.start_ns(), an.end_ns());
        let offset = an.meta().clock_offset_ns;
        ProfileInfo {
            time_nanos: if offset != 0 {
                (start as i128 + offset) as i64
            } else {
                0
            },
            duration_nanos: end.saturating_sub(start) as i64,
            comments: vec![format!("chainrec chain graph of {}", trace.display())],
        }
    }
}

/// The "file" a frame's function is in: its kind, so that a thread and a function of the
/// same name stay apart, and `-list`/`-traces` readers can tell kernel from user frames.
pub fn kind_file(kind: FrameKind) -> &'static str {
    match kind {
        FrameKind::Thread => "thread",
        FrameKind::User => "user",
        FrameKind::Kernel => "kernel",
        FrameKind::Metal => "interrupt",
        FrameKind::RunQueue => "run queue",
        FrameKind::RunQueueHolder => "run queue holder",
        FrameKind::Throttled => "throttled",
        FrameKind::Marker => "marker",
        FrameKind::Lost => "lost events",
        FrameKind::OnCpu => "on cpu",
        FrameKind::Group => "cgroup",
        FrameKind::LevelSeparator | FrameKind::UserKernelSeparator => "separator",
    }
}

/// Path interner: (parent path, node) -> path id; paths are the `chains` view's trie
/// paths, built from the records.
#[derive(Debug, Default)]
struct Paths {
    ix: HashMap<(u32, NodeId), u32>,
    /// (parent, node) by path id.
    list: Vec<(u32, NodeId)>,
}

const ROOT: u32 = u32::MAX;

impl Paths {
    fn step(&mut self, parent: u32, node: NodeId) -> u32 {
        let next = self.list.len() as u32;
        let id = *self.ix.entry((parent, node)).or_insert(next);
        if id == next {
            self.list.push((parent, node));
        }
        id
    }
    /// Node ids of path `id`, root first.
    fn nodes(&self, mut id: u32, out: &mut Vec<NodeId>) {
        out.clear();
        while id != ROOT {
            let (p, n) = self.list[id as usize];
            out.push(n);
            id = p;
        }
        out.reverse();
    }
}

/// A [`WaitSink`] that aggregates the `chains` view per (path, waiting thread); the finished
/// run is turned into a [`Profile`] by [`Profile::of`]. Run it with the same setup as
/// `chains` (dedup as there) and its values add up to the `chains` folded weights.
#[derive(Debug)]
pub struct ProfileSink {
    reducer: PathReducer,
    paths: Paths,
    /// (path, tid, tgid, comm at switch-out) -> ns.
    samples: HashMap<(u32, Tid, Tid, Comm), u64>,
}

impl Default for ProfileSink {
    fn default() -> Self {
        ProfileSink {
            // One wait per batch: each batch taken after a wait holds that wait's paths.
            reducer: PathReducer::new(View::Chains, 1),
            paths: Paths::default(),
            samples: HashMap::new(),
        }
    }
}

impl WaitSink for ProfileSink {
    fn on_wait(&mut self, w: &WaitRecord, nodes: &NodeTable) {
        self.reducer.on_wait(w, nodes);
        while let Some(b) = self.reducer.take_full() {
            for i in 0..b.len() {
                let (ns, ws) = b.path(i);
                let mut p = ROOT;
                for (&n, &weight) in ns.iter().zip(ws) {
                    p = self.paths.step(p, n);
                    if weight > 0 {
                        *self.samples.entry((p, w.tid, w.tgid, w.comm)).or_default() += weight;
                    }
                }
            }
            self.reducer.recycle(b);
        }
    }
}

/// Builds the profile's tables.
struct Builder {
    p: Profile,
    strings: HashMap<String, i64>,
    /// (name, kind file) -> location id (= function id).
    locs: HashMap<(i64, i64), u64>,
}

impl Builder {
    fn intern(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        self.p.string_table.push(s.to_string());
        let i = self.p.string_table.len() as i64 - 1;
        self.strings.insert(s.to_string(), i);
        i
    }

    fn location(&mut self, name: &str, kind: FrameKind) -> u64 {
        let key = (self.intern(name), self.intern(kind_file(kind)));
        if let Some(&id) = self.locs.get(&key) {
            return id;
        }
        let id = self.p.location.len() as u64 + 1;
        self.p.function.push(Function {
            id,
            name: key.0,
            system_name: 0,
            filename: key.1,
        });
        self.p.location.push(Location {
            id,
            mapping_id: 1,
            address: id,
            line: vec![Line { function_id: id }],
        });
        self.locs.insert(key, id);
        id
    }

    fn label_num(&mut self, key: &str, num: i64) -> Label {
        Label {
            key: self.intern(key),
            str: 0,
            num,
            num_unit: 0,
        }
    }

    fn label_str(&mut self, key: &str, s: &str) -> Label {
        Label {
            key: self.intern(key),
            str: self.intern(s),
            num: 0,
            num_unit: 0,
        }
    }
}

impl ProfileSink {
    /// A sink for the `chains` view.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Profile {
    /// The profile of a finished run into a [`ProfileSink`] ([`chainrec_chain::Analysis::collect`]).
    /// Samples are sorted (by path, then thread) so that the output is deterministic. An
    /// error when no wait had a weight.
    pub fn of(run: &Collected<'_, ProfileSink>, info: &ProfileInfo) -> Result<Profile> {
        let (sink, nodes) = (run.sink(), run.nodes());
        let mut b = Builder {
            p: Profile::default(),
            strings: HashMap::new(),
            locs: HashMap::new(),
        };
        b.intern("");
        let chain = b.intern("chain");
        let ns = b.intern("nanoseconds");
        b.p.sample_type = vec![ValueType {
            r#type: chain,
            unit: ns,
        }];
        b.p.period_type = Some(ValueType {
            r#type: chain,
            unit: ns,
        });
        b.p.period = 1;
        b.p.default_sample_type = chain;
        b.p.time_nanos = info.time_nanos;
        b.p.duration_nanos = info.duration_nanos;
        for c in &info.comments {
            let i = b.intern(c);
            b.p.comment.push(i);
        }
        let file = b.intern("[chainrec chain graph]");
        b.p.mapping.push(Mapping {
            id: 1,
            memory_start: 0,
            memory_limit: u64::MAX,
            file_offset: 0,
            filename: file,
            build_id: 0,
            has_functions: true,
        });
        let mut samples: Vec<_> = sink.samples.iter().collect();
        // The order of (path, tid, tgid, comm as text), compared without an allocation per
        // comparison (a comm is valid UTF-8 but for a rare lossy one).
        samples.sort_unstable_by(|(a, _), (b, _)| {
            (a.0, a.1, a.2)
                .cmp(&(b.0, b.1, b.2))
                .then_with(|| a.3.as_str().cmp(&b.3.as_str()))
        });
        let mut namer = FrameNamer::new(run.tables(), run.meta().stack_threshold_ns);
        // Per path: location ids leaf first, the level the time goes to, and what that
        // level is (its thread, interrupt or marker).
        let mut done: HashMap<u32, (Vec<u64>, u32, String)> = HashMap::new();
        let mut path_nodes = Vec::new();
        for (&(path, tid, tgid, comm), &v) in samples {
            if let std::collections::hash_map::Entry::Vacant(slot) = done.entry(path) {
                sink.paths.nodes(path, &mut path_nodes);
                let (mut locs, mut level, mut what) = (Vec::new(), 0u32, String::new());
                for (i, &n) in path_nodes.iter().enumerate() {
                    let first = i == 0 || (i == 1 && nodes.get(path_nodes[0]).is_group());
                    let f = namer.node(nodes, n, first);
                    if i > 0 && f.new_level {
                        level += 1;
                    }
                    for (name, kind) in &f.frames {
                        if kind.is_separator() {
                            continue;
                        }
                        locs.push(b.location(name, *kind));
                    }
                    what = nodes.get(n).name().into_owned();
                }
                locs.reverse();
                slot.insert((locs, level, what));
            }
            let (locs, level, what) = &done[&path];
            let value = i64::try_from(v).map_err(|_| ReportError::WeightOverflow(v))?;
            let label = vec![
                b.label_num("pid", tgid as i64),
                b.label_num("tid", tid as i64),
                b.label_str("comm", &comm.as_str()),
                b.label_num("level", *level as i64),
                b.label_str("attributed_to", what),
            ];
            b.p.sample.push(Sample {
                location_id: locs.clone(),
                value: vec![value],
                label,
            });
        }
        if b.p.sample.is_empty() {
            return Err(ReportError::NothingToExport);
        }
        Ok(b.p)
    }
}

/// What was written to `path`, for the line `chainrec export` prints.
pub fn summary(profile: &Profile, path: &std::path::Path) -> String {
    format!(
        "wrote {} ({} samples, {} locations; value = attributed off-CPU time in ns: blocked, and runnable in [run queue] levels; labels pid, tid, comm, level, attributed_to)",
        path.display(),
        profile.sample.len(),
        profile.location.len()
    )
}

/// Write `profile` gzipped (the on-disk pprof format).
pub fn write_gz(profile: &Profile, w: &mut dyn Write) -> Result<()> {
    let io = |e| ReportError::Io {
        path: "<pprof output>".into(),
        source: e,
    };
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec()).map_err(io)?;
    gz.finish().map_err(io)?.flush().map_err(io)?;
    Ok(())
}

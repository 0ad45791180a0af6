//! The chain graph as a pprof profile (`perftools.profiles.Profile`, gzipped), for
//! `go tool pprof` and fleet profilers that ingest pprof. Built from the engine's record
//! stream ([`ProfileSink`], a [`WaitSink`]; the finished run, one
//! [`Collected`] value, is rendered by [`Profile::of`]): each wait is reduced to the paths of the
//! `chains` view (same reduction, same dedup, so the values add up to `chains` to the
//! nanosecond), and every (path, waiting thread) is one sample. Locations are the path's
//! real frames, leaf first (the top of the chain is the leaf); the `--` and `-`
//! separators of folded text are left out, so `-top`, `-peek` and the call graph show
//! functions, threads and interrupts only. Functions inlined at an address are lines of
//! its location where the sample's order is the order of the calls (see
//! `Builder::node_locations`). The chain level is kept as a sample label
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
use chainrec_chain::fold::{NodeFrames, PathReducer};
use chainrec_chain::{
    is_inlined, Collected, FrameKind, FrameNamer, NodeId, NodeTable, View, WaitRecord, WaitSink,
};
use chainrec_format::{Comm, Tid};
use prost::Message;
use rustc_hash::FxHashMap;
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
    pub fn of_trace(an: &chainrec_chain::Analysis, trace: &str) -> Self {
        let (start, end) = (an.start_ns(), an.end_ns());
        let offset = an.meta().clock_offset_ns;
        ProfileInfo {
            time_nanos: if offset != 0 {
                (start as i128 + offset) as i64
            } else {
                0
            },
            duration_nanos: end.saturating_sub(start) as i64,
            comments: vec![format!("chainrec chain graph of {trace}")],
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
        FrameKind::Blocked => "blocked",
        FrameKind::LevelSeparator | FrameKind::UserKernelSeparator => "separator",
    }
}

/// Path interner: (parent path, node) -> path id; paths are the `chains` view's trie
/// paths, built from the records.
#[derive(Debug, Default)]
struct Paths {
    ix: FxHashMap<(u32, NodeId), u32>,
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

/// A waiting thread as the profile's labels name it: (tid, tgid, comm at switch-out).
type ThreadKey = (Tid, Tid, Comm);

/// A [`WaitSink`] that aggregates the `chains` view per (path, waiting thread); the finished
/// run is turned into a [`Profile`] by [`Profile::of`] (or encoded directly by
/// [`EncodedProfile::of`]). Run it with the same setup as `chains` (dedup as there) and its
/// values add up to the `chains` folded weights.
#[derive(Debug)]
pub struct ProfileSink {
    reducer: PathReducer,
    paths: Paths,
    /// Waiting threads, interned: a sample's key is two small integers.
    threads: FxHashMap<ThreadKey, u32>,
    thread_list: Vec<ThreadKey>,
    /// (path, thread index) -> ns.
    samples: FxHashMap<(u32, u32), u64>,
    /// Path ids of the current wait's paths, reused (no allocation per wait).
    prefix: Vec<u32>,
}

impl Default for ProfileSink {
    fn default() -> Self {
        ProfileSink {
            // One wait per batch: each batch taken after a wait holds that wait's paths.
            reducer: PathReducer::new(View::Chains, 1),
            paths: Paths::default(),
            threads: FxHashMap::default(),
            thread_list: Vec::new(),
            samples: FxHashMap::default(),
            prefix: Vec::new(),
        }
    }
}

impl ProfileSink {
    fn thread(&mut self, key: ThreadKey) -> u32 {
        let next = self.thread_list.len() as u32;
        let id = *self.threads.entry(key).or_insert(next);
        if id == next {
            self.thread_list.push(key);
        }
        id
    }
}

impl WaitSink for ProfileSink {
    fn on_wait(&mut self, w: &WaitRecord, nodes: &NodeTable) {
        self.reducer.on_wait(w, nodes);
        let mut thread = None;
        while let Some(b) = self.reducer.take_full() {
            let thread = *thread.get_or_insert_with(|| self.thread((w.tid, w.tgid, w.comm)));
            for i in 0..b.len() {
                let (ns, ws) = b.path(i);
                // A wait's paths share their first nodes (its thread, its level-0 stack):
                // steps already taken by the previous path of this wait are not hashed again.
                let mut p = ROOT;
                for (depth, (&n, &weight)) in ns.iter().zip(ws).enumerate() {
                    p = match self.prefix.get(depth) {
                        Some(&known) if self.paths.list[known as usize] == (p, n) => known,
                        _ => {
                            let id = self.paths.step(p, n);
                            self.prefix.truncate(depth);
                            self.prefix.push(id);
                            id
                        }
                    };
                    if weight > 0 {
                        *self.samples.entry((p, thread)).or_default() += weight;
                    }
                }
            }
            self.reducer.recycle(b);
        }
        self.prefix.clear();
    }
}

/// Builds the profile's tables.
struct Builder {
    p: Profile,
    strings: FxHashMap<String, i64>,
    /// (name, kind file) -> function id.
    funcs: FxHashMap<(i64, i64), u64>,
    /// The function ids of a location's lines (leaf first) -> location id.
    locs: FxHashMap<Vec<u64>, u64>,
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

    fn function(&mut self, name: &str, kind: FrameKind) -> u64 {
        let key = (self.intern(name), self.intern(kind_file(kind)));
        if let Some(&id) = self.funcs.get(&key) {
            return id;
        }
        let id = self.p.function.len() as u64 + 1;
        self.p.function.push(Function {
            id,
            name: key.0,
            system_name: 0,
            filename: key.1,
        });
        self.funcs.insert(key, id);
        id
    }

    /// The location of one frame: `lines` are its function ids, leaf first (the functions
    /// inlined at it, innermost first, then the function it is in).
    fn location(&mut self, lines: &[u64]) -> u64 {
        if let Some(&id) = self.locs.get(lines) {
            return id;
        }
        let id = self.p.location.len() as u64 + 1;
        self.p.location.push(Location {
            id,
            mapping_id: 1,
            address: id,
            line: lines.iter().map(|&f| Line { function_id: f }).collect(),
        });
        self.locs.insert(lines.to_vec(), id);
        id
    }

    /// The locations of one node's frames, root side first as the node prints them
    /// (separators left out), appended to `out`. Where its stack frames are written root
    /// first (the blocked thread, `[on cpu]` samples), the order of the sample is the
    /// order of the calls, and a function with the functions inlined into it (the frames
    /// marked `[inlined]` after it) is one location with a line each, leaf first, as
    /// pprof represents inlining (`-traces` marks them `(inline)`). In a waker's level
    /// the sample runs the other way, from callers to callees, as the chain graph draws
    /// it: pprof would mark every line but the last of a location as inlined into it, the
    /// wrong way round there, so each frame is a location of its own (its name keeps the
    /// `[inlined]` mark, as everywhere).
    fn node_locations(&mut self, f: &NodeFrames, out: &mut Vec<u64>) {
        let inlined = |name: &str, kind: FrameKind| {
            matches!(kind, FrameKind::User | FrameKind::Kernel) && is_inlined(name)
        };
        let mut lines: Vec<u64> = Vec::new();
        let mut group_kind = None;
        for (name, kind) in f.frames.iter().filter(|(_, k)| !k.is_separator()) {
            let func = self.function(name, *kind);
            if !f.leaf_first && group_kind == Some(*kind) && inlined(name, *kind) {
                // Inlined into the frame before it: leaf first, it goes in front.
                lines.insert(0, func);
                continue;
            }
            if !lines.is_empty() {
                out.push(self.location(&lines));
                lines.clear();
            }
            lines.push(func);
            group_kind = Some(*kind);
        }
        if !lines.is_empty() {
            out.push(self.location(&lines));
        }
    }
}

fn label_num(key: i64, num: i64) -> Label {
    Label {
        key,
        str: 0,
        num,
        num_unit: 0,
    }
}

fn label_str(key: i64, str: i64) -> Label {
    Label {
        key,
        str,
        num: 0,
        num_unit: 0,
    }
}

impl ProfileSink {
    /// A sink for the `chains` view.
    pub fn new() -> Self {
        Self::default()
    }
}

/// A profile encoded (the protobuf bytes, not yet gzipped), built without holding every
/// sample as a [`Sample`] value: samples are encoded one by one as they are made.
#[derive(Clone, Debug)]
pub struct EncodedProfile {
    /// The `perftools.profiles.Profile` message.
    pub bytes: Vec<u8>,
    /// Samples in it.
    pub samples: usize,
    /// Locations in it (one per frame, a frame with its inlined functions as one).
    pub locations: usize,
}

impl EncodedProfile {
    /// The profile of a finished run into a [`ProfileSink`] ([`chainrec_chain::Analysis::collect`]).
    /// Samples are sorted (by path, then thread: tid, tgid, comm) so that the output is
    /// deterministic. An error when no wait had a weight. The bytes are those of
    /// [`Profile::of`]'s value encoded by prost (tests decode them).
    pub fn of(run: &Collected<'_, ProfileSink>, info: &ProfileInfo) -> Result<EncodedProfile> {
        let (sink, nodes) = (run.sink(), run.nodes());
        let mut b = Builder {
            p: Profile::default(),
            strings: FxHashMap::default(),
            funcs: FxHashMap::default(),
            locs: FxHashMap::default(),
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
        // Threads in the order (tid, tgid, comm as text): a rank per interned thread, so
        // that samples sort by two integers.
        let mut order: Vec<u32> = (0..sink.thread_list.len() as u32).collect();
        order.sort_unstable_by(|&x, &y| {
            let (a, b) = (&sink.thread_list[x as usize], &sink.thread_list[y as usize]);
            (a.0, a.1)
                .cmp(&(b.0, b.1))
                .then_with(|| a.2.as_str().cmp(&b.2.as_str()))
        });
        let mut rank = vec![0u32; order.len()];
        for (r, &t) in order.iter().enumerate() {
            rank[t as usize] = r as u32;
        }
        let mut samples: Vec<(u64, u64)> = sink
            .samples
            .iter()
            .map(|(&(path, thread), &v)| ((path as u64) << 32 | rank[thread as usize] as u64, v))
            .collect();
        samples.sort_unstable_by_key(|&(k, _)| k);
        // Label keys are interned in the order the first sample's labels name them (as the
        // profile has always numbered its strings), each thread's comm when first used.
        let mut keys = [0i64; 5];
        let mut comm_ix: Vec<Option<i64>> = vec![None; order.len()];
        let mut namer = FrameNamer::new(run.tables(), run.meta().stack_threshold_ns);
        let mut path_nodes = Vec::new();
        let mut node_locs: FxHashMap<(NodeId, bool), (u32, u32, bool)> = FxHashMap::default();
        let mut loc_store: Vec<u64> = Vec::new();
        let mut node_names: FxHashMap<NodeId, i64> = FxHashMap::default();
        let mut body = Vec::new();
        let mut sample = Sample::default();
        let mut cur_path = None;
        let (mut locs, mut level, mut what) = (Vec::new(), 0u32, 0i64);
        for (i, &(k, v)) in samples.iter().enumerate() {
            let (path, thread) = ((k >> 32) as u32, order[(k & 0xffff_ffff) as usize]);
            if cur_path != Some(path) {
                cur_path = Some(path);
                sink.paths.nodes(path, &mut path_nodes);
                locs.clear();
                level = 0;
                for (j, &n) in path_nodes.iter().enumerate() {
                    let first = j == 0 || (j == 1 && nodes.get(path_nodes[0]).is_group());
                    // A node's frames are named and located once (paths share nodes).
                    let (start, len, new_level) = match node_locs.get(&(n, first)) {
                        Some(&known) => known,
                        None => {
                            let f = namer.node(nodes, n, first);
                            let start = loc_store.len() as u32;
                            b.node_locations(&f, &mut loc_store);
                            let known = (start, loc_store.len() as u32 - start, f.new_level);
                            node_locs.insert((n, first), known);
                            known
                        }
                    };
                    if j > 0 && new_level {
                        level += 1;
                    }
                    locs.extend_from_slice(&loc_store[start as usize..(start + len) as usize]);
                }
                locs.reverse();
                if i == 0 {
                    for (slot, key) in keys.iter_mut().zip(["pid", "tid", "comm"]) {
                        *slot = b.intern(key);
                    }
                }
                let comm = sink.thread_list[thread as usize].2;
                if comm_ix[thread as usize].is_none() {
                    comm_ix[thread as usize] = Some(b.intern(&comm.as_str()));
                }
                if i == 0 {
                    keys[3] = b.intern("level");
                    keys[4] = b.intern("attributed_to");
                }
                // What the time is attributed to: the path's last node, named once.
                what = match path_nodes.last() {
                    Some(&n) => match node_names.get(&n) {
                        Some(&known) => known,
                        None => {
                            let name = b.intern(&nodes.get(n).name());
                            node_names.insert(n, name);
                            name
                        }
                    },
                    None => b.intern(""),
                };
            }
            let (tid, tgid, comm) = sink.thread_list[thread as usize];
            let comm = match comm_ix[thread as usize] {
                Some(c) => c,
                None => {
                    let c = b.intern(&comm.as_str());
                    comm_ix[thread as usize] = Some(c);
                    c
                }
            };
            sample.location_id.clear();
            sample.location_id.extend_from_slice(&locs);
            sample.value.clear();
            sample
                .value
                .push(i64::try_from(v).map_err(|_| ReportError::WeightOverflow(v))?);
            sample.label.clear();
            sample.label.extend([
                label_num(keys[0], tgid as i64),
                label_num(keys[1], tid as i64),
                label_str(keys[2], comm),
                label_num(keys[3], level as i64),
                label_str(keys[4], what),
            ]);
            // Field 2 (sample), length-delimited: what prost writes for each element of
            // the repeated field.
            prost::encoding::encode_key(2, prost::encoding::WireType::LengthDelimited, &mut body);
            sample
                .encode_length_delimited(&mut body)
                .map_err(ReportError::Encode)?;
        }
        if samples.is_empty() {
            return Err(ReportError::NothingToExport);
        }
        // prost writes the fields in tag order: sample_type (1), then the samples (2),
        // then the rest; splice the samples between.
        let head = Profile {
            sample_type: b.p.sample_type.clone(),
            ..Profile::default()
        }
        .encode_to_vec();
        let rest = b.p.encode_to_vec();
        debug_assert!(rest.starts_with(&head));
        let mut bytes = Vec::with_capacity(rest.len() + body.len());
        bytes.extend_from_slice(&head);
        bytes.extend_from_slice(&body);
        bytes.extend_from_slice(&rest[head.len()..]);
        Ok(EncodedProfile {
            bytes,
            samples: samples.len(),
            locations: b.p.location.len(),
        })
    }
}

impl Profile {
    /// The profile of a finished run into a [`ProfileSink`] ([`chainrec_chain::Analysis::collect`]),
    /// as a value ([`EncodedProfile::of`] decoded). Samples are sorted (by path, then
    /// thread) so that the output is deterministic. An error when no wait had a weight.
    pub fn of(run: &Collected<'_, ProfileSink>, info: &ProfileInfo) -> Result<Profile> {
        let e = EncodedProfile::of(run, info)?;
        Profile::decode(e.bytes.as_slice()).map_err(ReportError::Decode)
    }
}

/// What was written to `path`, for the line `chainrec export` prints.
pub fn summary(profile: &Profile, path: &std::path::Path) -> String {
    summary_of(profile.sample.len(), profile.location.len(), path)
}

fn summary_of(samples: usize, locations: usize, path: &std::path::Path) -> String {
    format!(
        "wrote {} ({} samples, {} locations; value = attributed off-CPU time in ns: blocked, and runnable in [run queue] levels; labels pid, tid, comm, level, attributed_to)",
        path.display(),
        samples,
        locations
    )
}

impl EncodedProfile {
    /// What was written to `path`, for the line `chainrec export` prints.
    pub fn summary(&self, path: &std::path::Path) -> String {
        summary_of(self.samples, self.locations, path)
    }

    /// Write the profile gzipped (the on-disk pprof format).
    pub fn write_gz(&self, w: &mut dyn Write) -> Result<()> {
        write_bytes_gz(&self.bytes, w)
    }
}

/// Write `profile` gzipped (the on-disk pprof format).
pub fn write_gz(profile: &Profile, w: &mut dyn Write) -> Result<()> {
    write_bytes_gz(&profile.encode_to_vec(), w)
}

fn write_bytes_gz(bytes: &[u8], w: &mut dyn Write) -> Result<()> {
    let io = |e| ReportError::Io {
        path: "<pprof output>".into(),
        source: e,
    };
    // Fastest level, as Go's runtime/pprof writes its profiles: a third of the profile's
    // CPU at the default level, for a file about 1.5x the size.
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::fast());
    gz.write_all(bytes).map_err(io)?;
    gz.finish().map_err(io)?.flush().map_err(io)?;
    Ok(())
}

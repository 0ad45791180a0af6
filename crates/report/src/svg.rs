//! Interactive chain-graph SVG: inferno draws the flame graph (layout, search, zoom,
//! reset, tooltips); this module adds what it lacks for chain graphs — colours that
//! depend on a frame's *position* in the chain (one hue per level, a lighter shade for
//! kernel frames, metal nodes and "no stack" markers in their own colours), which
//! inferno's name-keyed palettes cannot express.
//!
//! How: the paths go into a frame tree (frames merged by parent and name, each classified:
//! from the engine's frame kinds and levels with [`render_paths`], from the `--`/`-`
//! separators of folded text with [`render`]); paths are cut at their first frame too
//! narrow to draw; the remaining lines go to inferno with a fixed palette, merged again
//! exactly as inferno merges them (sorted lines, frames identified by depth and start
//! offset), and each frame's `fill` is rewritten by its (depth, start). Output is
//! byte-for-byte deterministic for a given input.

use crate::ReportError;
use chainrec_chain::{FrameKind, Graph, PathFrame, Unit};
use inferno::flamegraph::{self, color::BasicPalette, Direction, Options, Palette};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// How to draw a flame graph.
#[derive(Clone, Debug)]
pub struct SvgOptions {
    /// Title at the top.
    pub title: String,
    /// Unit of the weights (`us`, `ns`, `ms`), shown in tooltips and the legend.
    pub unit: String,
    /// Chain layout: a new hue after every `--` frame (CHAINS.md "Folded layout").
    /// Off: the whole stack is one level (separators, metal and markers still distinct).
    pub chain_layout: bool,
    /// Image width in pixels.
    pub width: usize,
    /// Icicle graph: the root at the top, chains growing downwards.
    pub inverted: bool,
    /// Frames narrower than this percentage of the total are not drawn (their time stays
    /// in their parents). inferno's and flamegraph.pl's default is 0.1.
    pub min_width_pct: f64,
    /// What the weights count, in tooltips (`N us`); empty = the unit.
    pub count_name: String,
    /// Label of the root bar (inferno's `all`).
    pub root_label: String,
}

impl SvgOptions {
    /// Options with the defaults: 1200 px wide, root at the bottom, frames below 0.1 % of
    /// the total not drawn, the unit as count name, root bar `all`.
    pub fn new(title: &str, unit: &str, chain_layout: bool) -> Self {
        SvgOptions {
            title: title.to_string(),
            unit: unit.to_string(),
            chain_layout,
            width: 1200,
            inverted: false,
            min_width_pct: 0.1,
            count_name: String::new(),
            root_label: "all".to_string(),
        }
    }
}

/// What a frame is, from its own name and its position in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameClass {
    /// An ordinary frame of chain level `level` (0 = the blocked thread's off-CPU stack).
    Frame {
        /// Chain level: number of `--` frames below it.
        level: u32,
        /// Kernel part of the level (after the `-` for level 0, before it for wakers).
        kernel: bool,
    },
    /// `-` (user/kernel) separator.
    UserKernelSeparator,
    /// `--` (level) separator.
    LevelSeparator,
    /// Metal node: `[hardirq: ...]`, `[softirq: ...]`, `[nmi]`, `[idle]`, ...
    Metal,
    /// A marker for missing data: `[no stack: ...]`, `[missing stack]`, `[unknown]`, ...
    Marker,
    /// `[lost events]` and other loss markers.
    Lost,
    /// A frame above the waiting thread: `[cgroup: …]`, `[pod: …]`, `[container: …]`,
    /// `[process: …]`.
    Group,
    /// `[run queue]`: the level above waited for a CPU (the frame above it names who held
    /// the CPU).
    RunQueue,
    /// `[on cpu]`: the frames above it (up to the next `--`) are sampled on-CPU stacks.
    OnCpu,
    /// `[off cpu]` (`hotcold`): the frames above it are an off-CPU wait and its chain.
    OffCpu,
    /// A frame of a sampled on-CPU stack (after `[on cpu]`): warm hues.
    Hot {
        /// Kernel part (after the `-`).
        kernel: bool,
    },
}

/// Hue (degrees) of each chain level; cycles after the last.
pub const LEVEL_HUES: [f64; 6] = [215.0, 30.0, 120.0, 275.0, 55.0, 180.0];
/// Fill of metal nodes.
pub const METAL_FILL: &str = "rgb(204,36,36)";
/// Fill of "no stack" markers (a hatched pattern defined in the SVG).
pub const MARKER_FILL: &str = "url(#chainrec-marker)";
/// Frames above the waiting thread (`--cgroup-frames`, `--process-frames`): a neutral
/// slate, data rather than a missing-data marker.
pub const GROUP_FILL: &str = "rgb(176,190,197)";
/// Fill of loss markers (a red hatched pattern defined in the SVG).
pub const LOST_FILL: &str = "url(#chainrec-lost)";
/// Fill of `[run queue]` frames: waiting for a CPU, not for an event.
pub const RUNQ_FILL: &str = "rgb(150,110,200)";
/// Fill of `--` separators.
pub const LEVEL_SEP_FILL: &str = "rgb(110,110,110)";
/// Fill of `-` separators.
pub const USER_KERNEL_SEP_FILL: &str = "rgb(175,175,175)";
/// Fill of `[on cpu]` frames.
pub const ONCPU_FILL: &str = "rgb(222,82,30)";
/// Fill of `[off cpu]` frames.
pub const OFFCPU_FILL: &str = "rgb(60,110,200)";
/// Hue (degrees) of sampled on-CPU frames: red to yellow, apart from every level hue.
pub const HOT_HUE: f64 = 18.0;

const DEFS: &str = concat!(
    "<defs>",
    "<pattern id=\"chainrec-marker\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
    "<rect width=\"8\" height=\"8\" fill=\"rgb(250,250,250)\"/><rect width=\"4\" height=\"8\" fill=\"rgb(190,190,190)\"/></pattern>",
    "<pattern id=\"chainrec-lost\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">",
    "<rect width=\"8\" height=\"8\" fill=\"rgb(255,235,235)\"/><rect width=\"4\" height=\"8\" fill=\"rgb(230,40,40)\"/></pattern>",
    "</defs>"
);

/// The class of a plain stack frame (its name explains nothing by itself): hot above an
/// `[on cpu]` marker, else the level's colour, kernel or user by which side of the `-`
/// separator (`segment`) it is on. Level 0 is "comm;user;-;kernel"; wakers are
/// "kernel;-;user;comm"; the stacks after an `[earlier wait]` or `[blocked: not
/// followed]` marker (`root_first`) are "user;-;kernel", as level 0's.
fn stack_frame_class(hot: bool, level: u32, segment: u32, root_first: bool) -> FrameClass {
    if hot {
        FrameClass::Hot {
            kernel: segment > 0,
        }
    } else {
        FrameClass::Frame {
            level,
            kernel: if level == 0 || root_first {
                segment > 0
            } else {
                segment == 0
            },
        }
    }
}

/// A waker's blocked time inside the root's wait (CHAINS.md, "Attribution"): drawn as
/// off-CPU time, and its stacks follow root first.
fn is_blocked_marker(name: &str) -> bool {
    name == chainrec_chain::EARLIER_WAIT_FRAME || name == chainrec_chain::NOT_FOLLOWED_FRAME
}

/// Classify a frame name alone (separators, metal, markers); `None` for ordinary frames.
pub fn classify_name(name: &str) -> Option<FrameClass> {
    match name {
        "--" => return Some(FrameClass::LevelSeparator),
        "-" => return Some(FrameClass::UserKernelSeparator),
        _ => {}
    }
    let inner = name.strip_prefix('[')?.strip_suffix(']')?;
    match inner {
        // `critical-path` segments are the same three states as `hotcold` and `[run
        // queue]` levels: drawn in the same colours, not as "no stack" markers.
        "run queue" | "runnable" => return Some(FrameClass::RunQueue),
        _ if inner.starts_with("throttled: ") => return Some(FrameClass::RunQueue),
        // `[on cpu: estimated]` opens sampled frames too (from samples near the level).
        "on cpu" | "on cpu: estimated" | "running" => return Some(FrameClass::OnCpu),
        "off cpu" | "blocked" => return Some(FrameClass::OffCpu),
        _ => {}
    }
    let head = inner.split([':', ' ']).next().unwrap_or("");
    Some(match head {
        // `[go runtime: timer]`: where a goroutine chain reaches the Go runtime.
        "hardirq" | "softirq" | "nmi" | "idle" | "irq" | "interrupt" | "metal" | "go" => {
            FrameClass::Metal
        }
        "cgroup" | "pod" | "container" | "process" if inner.contains(": ") => FrameClass::Group,
        _ if inner.starts_with("lost") => FrameClass::Lost,
        _ => FrameClass::Marker,
    })
}

/// Classify every frame of one stack (root first), given the layout.
pub fn classify_stack(frames: &[&str], chain_layout: bool) -> Vec<FrameClass> {
    let mut c = StackClassifier::new(chain_layout);
    frames.iter().map(|f| c.next(f)).collect()
}

/// [`classify_stack`] one frame at a time: the state after a prefix of a stack, so a
/// walk of a tree of paths (the explorer's) classifies each frame once, from its parent's
/// state, instead of whole stacks.
#[derive(Clone, Copy, Debug)]
pub struct StackClassifier {
    chain_layout: bool,
    level: u32,
    segment: u32,
    /// After `[on cpu]`: sampled frames, "user;-;kernel" root first, until the next `--`.
    hot: bool,
    /// After `[earlier wait]`: the waker's off-CPU stacks, root first, until the next `--`.
    root_first: bool,
}

impl StackClassifier {
    /// The state before a stack's first frame.
    pub fn new(chain_layout: bool) -> Self {
        StackClassifier {
            chain_layout,
            level: 0,
            segment: 0,
            hot: false,
            root_first: false,
        }
    }

    /// The number of `--` frames so far (in the chain layout).
    pub fn level(&self) -> u32 {
        self.level
    }

    /// The class of the next frame, `f`.
    pub fn next(&mut self, f: &str) -> FrameClass {
        if is_blocked_marker(f) {
            self.root_first = true;
            self.segment = 0;
            return FrameClass::OffCpu;
        }
        let class = classify_name(f).unwrap_or_else(|| {
            stack_frame_class(self.hot, self.level, self.segment, self.root_first)
        });
        match class {
            FrameClass::LevelSeparator => {
                self.hot = false;
                self.root_first = false;
                if self.chain_layout {
                    self.level += 1;
                    self.segment = 0;
                }
            }
            FrameClass::OnCpu => {
                self.hot = true;
                self.segment = 0;
            }
            FrameClass::UserKernelSeparator => self.segment += 1,
            _ => {}
        }
        class
    }
}

/// FNV-1a: a stable hash (std's hasher is not guaranteed stable across releases).
fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn hsl(h: f64, s: f64, l: f64) -> (u8, u8, u8) {
    let c = (1.0 - (2.0 * l - 1.0).abs()) * s;
    let hp = (h % 360.0) / 60.0;
    let x = c * (1.0 - (hp % 2.0 - 1.0).abs());
    let (r, g, b) = match hp as u32 {
        0 => (c, x, 0.0),
        1 => (x, c, 0.0),
        2 => (0.0, c, x),
        3 => (0.0, x, c),
        4 => (x, 0.0, c),
        _ => (c, 0.0, x),
    };
    let m = l - c / 2.0;
    let f = |v: f64| ((v + m) * 255.0).round().clamp(0.0, 255.0) as u8;
    (f(r), f(g), f(b))
}

/// The fill of a frame (deterministic: a function of the class and the name).
pub fn fill_for(class: FrameClass, name: &str) -> String {
    match class {
        FrameClass::Frame { level, kernel } => {
            let h = fnv(name);
            let v1 = (h & 0xffff) as f64 / 65535.0;
            let v2 = ((h >> 16) & 0xffff) as f64 / 65535.0;
            let hue = LEVEL_HUES[level as usize % LEVEL_HUES.len()] + (v2 - 0.5) * 16.0;
            let (sat, light) = if kernel {
                (0.55 + 0.25 * v1, 0.70 + 0.08 * v2)
            } else {
                (0.65 + 0.25 * v1, 0.52 + 0.08 * v2)
            };
            let (r, g, b) = hsl(hue + 360.0, sat, light);
            format!("rgb({r},{g},{b})")
        }
        FrameClass::UserKernelSeparator => USER_KERNEL_SEP_FILL.to_string(),
        FrameClass::LevelSeparator => LEVEL_SEP_FILL.to_string(),
        FrameClass::Metal => METAL_FILL.to_string(),
        FrameClass::Marker => MARKER_FILL.to_string(),
        FrameClass::Lost => LOST_FILL.to_string(),
        FrameClass::Group => GROUP_FILL.to_string(),
        FrameClass::RunQueue => RUNQ_FILL.to_string(),
        FrameClass::OnCpu => ONCPU_FILL.to_string(),
        FrameClass::OffCpu => OFFCPU_FILL.to_string(),
        FrameClass::Hot { kernel } => {
            let h = fnv(name);
            let v1 = (h & 0xffff) as f64 / 65535.0;
            let v2 = ((h >> 16) & 0xffff) as f64 / 65535.0;
            let hue = HOT_HUE + v2 * 32.0;
            let light = if kernel { 0.66 } else { 0.52 } + 0.08 * v1;
            let (r, g, b) = hsl(hue, 0.85, light);
            format!("rgb({r},{g},{b})")
        }
    }
}

/// Counts about a rendered graph (for the caller to report).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SvgStats {
    /// Distinct stacks drawn (after merging identical lines).
    pub stacks: usize,
    /// Total weight (sum of all lines).
    pub total: u64,
    /// Frames in the merged tree.
    pub frames: usize,
    /// Frames too narrow to draw (< 0.1 % of the width; their time stays in their parents).
    pub frames_too_narrow: usize,
    /// Input lines with weight 0 (nothing to draw).
    pub zero_weight_lines: usize,
}

/// The merged frame tree a flame graph draws: frames merged by (parent, name), each with
/// its class and the weight that ends at it. Built from folded text ([`render`]) or from
/// the engine's structured paths ([`render_paths`]).
#[derive(Default)]
struct FrameTree {
    /// (parent, name id, class, weight ending here); parents come before children.
    nodes: Vec<(u32, u32, FrameClass, u64)>,
    ix: HashMap<(u32, u32), u32>,
    names: Vec<String>,
    name_ix: HashMap<String, u32>,
    /// Frames of subtrees left out before insertion (too narrow to draw).
    pruned_frames: u64,
}

const NO_FRAME: u32 = u32::MAX;

impl FrameTree {
    fn child(&mut self, parent: u32, name: &str, class: FrameClass) -> u32 {
        let name_id = match self.name_ix.get(name) {
            Some(&i) => i,
            None => {
                let i = self.names.len() as u32;
                self.names.push(name.to_string());
                self.name_ix.insert(name.to_string(), i);
                i
            }
        };
        let next = self.nodes.len() as u32;
        let id = *self.ix.entry((parent, name_id)).or_insert(next);
        if id == next {
            self.nodes.push((parent, name_id, class, 0));
        }
        id
    }

    fn add(&mut self, id: u32, w: u64) -> Result<(), ReportError> {
        let x = &mut self.nodes[id as usize].3;
        *x = x.checked_add(w).ok_or(ReportError::TotalOverflow)?;
        Ok(())
    }

    /// Frame ids from the root to `id`.
    fn path(&self, mut id: u32, out: &mut Vec<u32>) {
        out.clear();
        while id != NO_FRAME {
            out.push(id);
            id = self.nodes[id as usize].0;
        }
        out.reverse();
    }
}

/// Render folded `(stack, weight)` lines as an interactive chain-graph SVG. Frames are
/// classified from their names (`--` and `-` separate levels and the user/kernel parts):
/// the way to draw a folded file. [`render_paths`] draws the engine's paths directly.
pub fn render(
    folded: &[(String, u64)],
    opts: &SvgOptions,
    out: &mut dyn Write,
) -> Result<SvgStats, ReportError> {
    let mut stats = SvgStats::default();
    let mut tree = FrameTree::default();
    for (stack, w) in folded {
        if *w == 0 {
            stats.zero_weight_lines += 1;
            continue;
        }
        let stack = stack.trim();
        if stack.is_empty() {
            return Err(ReportError::EmptyStack);
        }
        let names: Vec<&str> = stack.split(';').collect();
        let cls = classify_stack(&names, opts.chain_layout);
        let mut id = NO_FRAME;
        for (name, class) in names.iter().zip(cls) {
            id = tree.child(id, name, class);
        }
        tree.add(id, *w)?;
    }
    draw(tree, opts, stats, 1.0, out)
}

/// Where [`class_of`] is along a path: the level, the `-` separators seen in it so far,
/// and whether its frames are sampled on-CPU frames (after `[on cpu]`).
#[derive(Clone, Copy, Debug, Default)]
struct ClassState {
    level: u32,
    seg: u32,
    hot: bool,
    /// After `[earlier wait]` / `[blocked: not followed]`: stacks root first.
    root_first: bool,
}

/// The class of a structured frame given the state after the frames before it (the same
/// rule as [`classify_stack`], driven by the frames' kinds and levels).
fn class_of(f: &PathFrame<'_>, chain_layout: bool, st: &mut ClassState) -> FrameClass {
    let new_level = if chain_layout { f.level } else { 0 };
    if new_level != st.level {
        *st = ClassState {
            level: new_level,
            ..ClassState::default()
        };
    }
    match f.kind {
        FrameKind::LevelSeparator => {
            st.hot = false;
            st.root_first = false;
            FrameClass::LevelSeparator
        }
        FrameKind::UserKernelSeparator => {
            st.seg += 1;
            FrameClass::UserKernelSeparator
        }
        FrameKind::Metal => FrameClass::Metal,
        // Throttled time is drawn like run-queue time: off-CPU while runnable.
        FrameKind::RunQueue | FrameKind::Throttled => FrameClass::RunQueue,
        // `[earlier wait]` / `[blocked: not followed]`: blocked time, drawn as off-CPU
        // time (not hatched: it has stacks); the stack frames after it are the waker's
        // off-CPU stacks root first, coloured by level like any stack.
        FrameKind::Blocked => {
            st.root_first = true;
            st.seg = 0;
            FrameClass::OffCpu
        }
        FrameKind::Marker => FrameClass::Marker,
        FrameKind::Group => FrameClass::Group,
        FrameKind::Lost => FrameClass::Lost,
        // `[on cpu]` or `[on cpu: estimated]` (sampled frames follow) or `[on cpu: no
        // sample]` (a marker).
        FrameKind::OnCpu => {
            let class = classify_name(f.name).unwrap_or(FrameClass::Marker);
            if class == FrameClass::OnCpu {
                st.hot = true;
                st.seg = 0;
            }
            class
        }
        // Stack frames that are themselves explanations (`[no stack: …]`, `[unknown]`,
        // `[softirq: …]`) keep the colours their names give them.
        FrameKind::Thread | FrameKind::User | FrameKind::Kernel | FrameKind::RunQueueHolder => {
            classify_name(f.name)
                .unwrap_or_else(|| stack_frame_class(st.hot, st.level, st.seg, st.root_first))
        }
    }
}

/// Draw a folded view straight from the finished graph's path trie ([`Graph::for_each_path`]):
/// frames classified by their kinds and levels. Weights stay in exact nanoseconds (inferno
/// scales the tooltips to `unit`, so nothing rounds to 0 and totals are exact). Subtrees
/// whose whole weight is below the drawing threshold are not expanded (their time stays on
/// the path above them, as for any frame too narrow to draw), so memory stays near that of
/// the trie however many tiny paths it holds.
pub fn render_paths(
    graph: &Graph<'_>,
    unit: Unit,
    opts: &SvgOptions,
    out: &mut dyn Write,
) -> Result<SvgStats, ReportError> {
    let total_ns = graph.total_ns();
    // Below this a subtree cannot give a drawn frame.
    let prune_ns = (opts.min_width_pct / 100.0 * total_ns as f64) as u64;
    let mut tree = FrameTree::default();
    // Per frame of the current path: its id, and the class state after it.
    let mut ids: Vec<(u32, ClassState)> = Vec::new();
    let mut err = None;
    graph.for_each_path(|v| {
        ids.truncate(v.shared);
        let (mut parent, mut st) = ids
            .last()
            .copied()
            .unwrap_or((NO_FRAME, ClassState::default()));
        for f in &v.frames[v.shared..] {
            let class = class_of(f, opts.chain_layout, &mut st);
            parent = tree.child(parent, f.name, class);
            ids.push((parent, st));
        }
        let descend = v.subtree_ns >= prune_ns;
        let ns = if descend {
            v.ns
        } else {
            tree.pruned_frames += v.below_frames;
            v.subtree_ns
        };
        if let Err(e) = tree.add(parent, ns) {
            err.get_or_insert(e);
        }
        descend
    });
    if let Some(e) = err {
        return Err(e);
    }
    draw(tree, opts, SvgStats::default(), 1.0 / unit.ns() as f64, out)
}

/// Widths, the cut at frames too narrow to draw, inferno, and the colours.
/// `factor` scales the weights for the tooltips (1 when they are in the unit already).
fn draw(
    tree: FrameTree,
    opts: &SvgOptions,
    mut stats: SvgStats,
    factor: f64,
    out: &mut dyn Write,
) -> Result<SvgStats, ReportError> {
    let n = tree.nodes.len();
    stats.stacks = tree.nodes.iter().filter(|f| f.3 > 0).count();
    if stats.stacks == 0 {
        return Err(ReportError::NothingToDraw);
    }
    // Widths (children have larger ids than their parents).
    let mut width: Vec<u64> = tree.nodes.iter().map(|f| f.3).collect();
    for i in (0..n).rev() {
        let p = tree.nodes[i].0;
        if p != NO_FRAME {
            width[p as usize] = width[p as usize]
                .checked_add(width[i])
                .ok_or(ReportError::TotalOverflow)?;
        }
    }
    stats.total = tree
        .nodes
        .iter()
        .zip(&width)
        .filter(|(f, _)| f.0 == NO_FRAME)
        .try_fold(0u64, |a, (_, &w)| a.checked_add(w))
        .ok_or(ReportError::TotalOverflow)?;
    let min_w = opts.min_width_pct * stats.total as f64 / 100.0;
    let narrow = |i: usize| (width[i] as f64) < min_w;
    stats.frames = n + tree.pruned_frames as usize;
    stats.frames_too_narrow = (0..n).filter(|&i| narrow(i)).count() + tree.pruned_frames as usize;

    // Cut every path at its first frame too narrow to draw (inferno would drop it and
    // everything above it anyway; the root frame always stays): the drawn frames keep
    // their widths, and inferno gets only the lines it draws.
    let mut cut_w = vec![0u64; n];
    let mut path = Vec::new();
    for i in 0..n {
        let w = tree.nodes[i].3;
        if w == 0 {
            continue;
        }
        tree.path(i as u32, &mut path);
        let keep = path
            .iter()
            .position(|&id| narrow(id as usize))
            .unwrap_or(path.len())
            .max(1);
        cut_w[path[keep - 1] as usize] += w;
    }
    // The cut lines as inferno sorts them, with their frames' classes.
    let mut merged: BTreeMap<String, (u64, Vec<FrameClass>)> = BTreeMap::new();
    for (i, &w) in cut_w.iter().enumerate() {
        if w == 0 {
            continue;
        }
        tree.path(i as u32, &mut path);
        let line = path
            .iter()
            .map(|&id| tree.names[tree.nodes[id as usize].1 as usize].as_str())
            .collect::<Vec<_>>()
            .join(";");
        // A name holding ';' (a comm may) reads as several frames in the joined line, as
        // in the folded text: one class per piece keeps the two in step.
        let classes = path
            .iter()
            .flat_map(|&id| {
                let (_, name, class, _) = tree.nodes[id as usize];
                let pieces = tree.names[name as usize].split(';').count();
                std::iter::repeat_n(class, pieces)
            })
            .collect();
        merged.entry(line).or_insert((0, classes)).0 += w;
    }
    drop(tree);

    // Our own merge of what inferno draws: (inferno depth, start offset) -> (class, name).
    // Depth 0 is inferno's "all".
    let mut classes: HashMap<(usize, u64), (FrameClass, &str)> = HashMap::new();
    let mut open: Vec<(&str, u64)> = Vec::new(); // (name, start) of the current path
    let mut time = 0u64;
    for (stack, (w, cls)) in &merged {
        let names: Vec<&str> = stack.split(';').collect();
        let shared = open
            .iter()
            .zip(&names)
            .take_while(|((a, _), b)| a == *b)
            .count();
        open.truncate(shared);
        for (i, name) in names.iter().enumerate().skip(shared) {
            classes.insert((i + 1, time), (cls[i], name));
            open.push((name, time));
        }
        time += w;
    }

    // The slate group frames (`--process-frames`, `--cgroup-frames`) are named in the
    // legend only when drawn: most graphs have none.
    let groups = merged
        .values()
        .any(|(_, cls)| cls.contains(&FrameClass::Group));
    let subtitle = subtitle(
        opts.chain_layout,
        &opts.unit,
        stats.frames_too_narrow,
        opts.width,
        groups,
    );
    let mut options = Options::default();
    options.colors = Palette::Basic(BasicPalette::Blue);
    options.hash = true;
    options.deterministic = true;
    options.title = opts.title.clone();
    options.subtitle = Some(subtitle);
    options.count_name = if opts.count_name.is_empty() {
        opts.unit.clone()
    } else {
        opts.count_name.clone()
    };
    options.image_width = Some(opts.width);
    options.min_width = opts.min_width_pct;
    options.name_type = "Frame:".to_string();
    options.factor = factor;
    if opts.inverted {
        options.direction = Direction::Inverted;
    }

    let lines: Vec<String> = merged
        .iter()
        .map(|(s, (w, _))| format!("{s} {w}"))
        .collect();
    let mut raw = Vec::new();
    flamegraph::from_lines(&mut options, lines.iter().map(|s| s.as_str()), &mut raw)
        .map_err(ReportError::Inferno)?;
    let raw = String::from_utf8(raw)
        .map_err(|e| ReportError::UnexpectedSvg(format!("not UTF-8 ({e})")))?;
    let svg = recolor(&raw, &classes, opts.inverted)?;
    let svg = finish_touches(svg, opts);
    out.write_all(svg.as_bytes()).map_err(|e| ReportError::Io {
        path: "<svg output>".into(),
        source: e,
    })?;
    Ok(stats)
}

/// XML text escaping.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The root bar's label (inferno names it `all` in its tooltip and draws no text) and a
/// search button that can be seen (inferno's is 10 % opaque until hovered).
fn finish_touches(svg: String, opts: &SvgOptions) -> String {
    let mut svg = svg.replacen(
        "#search { text-anchor:end; opacity:0.1; cursor:pointer; }",
        "#search { text-anchor:end; opacity:1; cursor:pointer; fill:rgb(20,90,200); \
         font-weight:bold; text-decoration:underline; }",
        1,
    );
    // inferno leaves the root bar's text empty: write the label (its script keeps it).
    let label = escape(&opts.root_label);
    if let Some(at) = svg.find("<g><title>all (") {
        let text_at = svg[at..]
            .find("<text ")
            .and_then(|t| svg[at + t..].find("></text>").map(|e| at + t + e + 1));
        if let Some(end) = text_at {
            svg.insert_str(end, &label);
        }
        svg.replace_range(
            at..at + "<g><title>all (".len(),
            &format!("<g><title>{label} ("),
        );
    }
    svg
}

fn attr<'a>(tag: &'a str, name: &str) -> Option<(usize, &'a str)> {
    let key = format!(" {name}=\"");
    let at = tag.find(&key)? + key.len();
    let end = tag[at..].find('"')? + at;
    Some((at, &tag[at..end]))
}

/// Rewrite the `fill` of every frame rectangle by its (depth, start) classification.
fn recolor(
    raw: &str,
    classes: &HashMap<(usize, u64), (FrameClass, &str)>,
    inverted: bool,
) -> Result<String, ReportError> {
    let bad = |what: &str| ReportError::UnexpectedSvg(what.to_string());
    let frames_at = raw
        .find("<svg id=\"frames\"")
        .ok_or_else(|| bad("no frames container"))?;
    let body = &raw[frames_at..];
    // Pass 1: distinct y values; sorted descending (ascending for an icicle graph) they
    // are depths 0, 1, 2, ...
    // Each frame rectangle: its tag's span in `body` and its y.
    let rect_at = |pos: usize| -> Result<Option<(usize, usize, u64)>, ReportError> {
        let Some(i) = body[pos..].find("<rect ") else {
            return Ok(None);
        };
        let s = pos + i;
        let e = body[s..]
            .find("/>")
            .ok_or_else(|| bad("unterminated rect"))?
            + s;
        let y = attr(&body[s..e], "y")
            .and_then(|(_, v)| v.parse().ok())
            .ok_or_else(|| bad("rect without y"))?;
        Ok(Some((s, e, y)))
    };
    let mut ys: Vec<u64> = Vec::new();
    let mut pos = 0;
    while let Some((_, e, y)) = rect_at(pos)? {
        ys.push(y);
        pos = e;
    }
    ys.sort_unstable_by(|a, b| if inverted { a.cmp(b) } else { b.cmp(a) });
    ys.dedup();
    let depth_of: HashMap<u64, usize> = ys.iter().enumerate().map(|(d, &y)| (y, d)).collect();

    let mut out = String::with_capacity(raw.len() + 1024);
    out.push_str(&raw[..frames_at]);
    out.push_str(DEFS);
    let mut pos = 0;
    while let Some((s, e, y)) = rect_at(pos)? {
        let tag = &body[s..e];
        let x: u64 = attr(tag, "fg:x")
            .and_then(|(_, v)| v.parse().ok())
            .ok_or_else(|| bad("rect without fg:x"))?;
        let depth = depth_of[&y];
        out.push_str(&body[pos..s]);
        match (depth, classes.get(&(depth, x))) {
            (0, _) => out.push_str(&tag.replacen(
                &format!("fill=\"{}\"", attr(tag, "fill").map(|a| a.1).unwrap_or("")),
                "fill=\"rgb(200,200,200)\"",
                1,
            )),
            (_, Some((class, name))) => {
                let (at, old) = attr(tag, "fill").ok_or_else(|| bad("rect without fill"))?;
                out.push_str(&tag[..at]);
                out.push_str(&fill_for(*class, name));
                out.push_str(&tag[at + old.len()..]);
            }
            (_, None) => {
                return Err(bad(&format!(
                    "frame at depth {depth}, offset {x} not in our merge"
                )))
            }
        }
        pos = e;
    }
    out.push_str(&body[pos..]);
    Ok(out)
}

/// The slate group frames' part of the legend (`GROUP_FILL`: `[process: …]`, `[cgroup: …]`).
const GROUP_LEGEND: &str = "slate = process/cgroup";

/// The subtitle: one centred line, so pick the most complete legend that fits the image
/// (inferno draws it in 12 px Verdana: at most ~7.5 px per character). With `groups` (the
/// graph draws slate group frames) each legend names them first.
fn subtitle(
    chain_layout: bool,
    unit: &str,
    tiny_frames: usize,
    width: usize,
    groups: bool,
) -> String {
    let legends: &[&str] = if chain_layout {
        &[
            "blocked thread at the bottom, one hue per waker level; lighter = kernel; \
             red = interrupt; violet = run queue; hatched = no stack/lost",
            "one hue per waker level; lighter = kernel; red = interrupt; violet = run queue; \
             hatched = no stack",
            "one hue per waker level; red = interrupt; violet = run queue",
            "one hue per waker level",
        ]
    } else {
        &[
            "lighter = kernel frames; red = interrupt; hatched = no stack / lost",
            "lighter = kernel; red = interrupt",
        ]
    };
    let tiny = if tiny_frames > 0 {
        format!("; {tiny_frames} tiny frames not drawn")
    } else {
        String::new()
    };
    let fits = |s: &str| s.chars().count() * 15 / 2 + 20 <= width;
    let group = if groups {
        format!("{GROUP_LEGEND}; ")
    } else {
        String::new()
    };
    legends
        .iter()
        .map(|l| format!("width = time ({unit}); {group}{l}{tiny}"))
        .chain(groups.then(|| format!("width = time ({unit}); {GROUP_LEGEND}")))
        .find(|s| fits(s))
        .unwrap_or_else(|| format!("width = time ({unit})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtitle_fits_the_width() {
        let full = subtitle(true, "us", 0, 1200, false);
        assert!(full.contains("blocked thread at the bottom"), "{full}");
        let tiny = subtitle(true, "us", 12345, 1200, false);
        assert_eq!(
            tiny,
            "width = time (us); one hue per waker level; lighter = kernel; red = interrupt; \
             violet = run queue; hatched = no stack; 12345 tiny frames not drawn"
        );
        assert_eq!(
            subtitle(true, "us", 0, 400, false),
            "width = time (us); one hue per waker level"
        );
        assert_eq!(subtitle(false, "ms", 0, 100, false), "width = time (ms)");
        // The slate group frames, named when drawn, before the rest of the legend.
        let grouped = subtitle(true, "us", 0, 1200, true);
        assert!(
            grouped.starts_with("width = time (us); slate = process/cgroup; "),
            "{grouped}"
        );
        assert_eq!(
            subtitle(true, "us", 0, 330, true),
            "width = time (us); slate = process/cgroup"
        );
        for w in [100, 300, 600, 900, 1200, 2000] {
            for t in [0, 7, 123456] {
                for chain in [true, false] {
                    for groups in [true, false] {
                        let s = subtitle(chain, "us", t, w, groups);
                        assert!(
                            s.chars().count() * 15 / 2 + 20 <= w || s == "width = time (us)",
                            "{w}: {s}"
                        );
                        assert!(
                            !groups || w < 330 || s.contains("slate = process/cgroup"),
                            "{w}: {s}"
                        );
                    }
                }
            }
        }
    }

    /// An earlier wait's stacks are root first ("user;-;kernel", as level 0's), so its
    /// kernel frames get the kernel colour; the marker is drawn as off-CPU time.
    #[test]
    fn classify_earlier_wait_stacks_root_first() {
        let s = "app;read;-;schedule;--;try_to_wake_up;-;writer;W;--;[earlier wait];W;sleep;-;do_nanosleep;--;hrtimer_wakeup;[hardirq: timer]";
        let f: Vec<&str> = s.split(';').collect();
        let c = classify_stack(&f, true);
        use FrameClass::*;
        let frame = |level, kernel| Frame { level, kernel };
        assert_eq!(
            c[9..],
            [
                LevelSeparator,
                OffCpu,
                frame(2, false),
                frame(2, false),
                UserKernelSeparator,
                frame(2, true),
                LevelSeparator,
                frame(3, true),
                Metal,
            ]
        );
        // `[blocked: not followed]` likewise; the level after it is a waker's again.
        let s = "app;--;k;-;u;W;--;[blocked: not followed];u2;-;k2;--;k3;-;u3;V";
        let f: Vec<&str> = s.split(';').collect();
        let c = classify_stack(&f, true);
        assert_eq!(c[7], OffCpu);
        assert_eq!((c[8], c[10]), (frame(2, false), frame(2, true)));
        assert_eq!((c[12], c[14]), (frame(3, true), frame(3, false)));
    }

    #[test]
    fn classify_chain_levels() {
        let s = "app;main;read;-;sys_read;schedule;--;try_to_wake_up;pipe_write;-;write;writer;--;[hardirq: timer]";
        let f: Vec<&str> = s.split(';').collect();
        let c = classify_stack(&f, true);
        use FrameClass::*;
        assert_eq!(
            c,
            vec![
                Frame {
                    level: 0,
                    kernel: false
                },
                Frame {
                    level: 0,
                    kernel: false
                },
                Frame {
                    level: 0,
                    kernel: false
                },
                UserKernelSeparator,
                Frame {
                    level: 0,
                    kernel: true
                },
                Frame {
                    level: 0,
                    kernel: true
                },
                LevelSeparator,
                Frame {
                    level: 1,
                    kernel: true
                },
                Frame {
                    level: 1,
                    kernel: true
                },
                UserKernelSeparator,
                Frame {
                    level: 1,
                    kernel: false
                },
                Frame {
                    level: 1,
                    kernel: false
                },
                LevelSeparator,
                Metal,
            ]
        );
        let flat = classify_stack(&f, false);
        assert!(matches!(flat[7], Frame { level: 0, .. }), "{:?}", flat[7]);
        assert!(flat.iter().all(|c| !matches!(c, Frame { level: 1.., .. })));
        assert_eq!(classify_name("[no stack: wait < 100us]"), Some(Marker));
        assert_eq!(classify_name("[missing stack]"), Some(Marker));
        assert_eq!(classify_name("[lost events]"), Some(Lost));
        assert_eq!(classify_name("[softirq: NET_RX]"), Some(Metal));
        assert_eq!(classify_name("[go runtime: timer]"), Some(Metal));
        assert_eq!(classify_name("[nmi]"), Some(Metal));
        assert_eq!(classify_name("[run queue]"), Some(RunQueue));
        assert_eq!(classify_name("[idle]"), Some(Metal));
        assert_eq!(classify_name("main"), None);
    }

    #[test]
    fn hues_differ_per_level_and_are_stable() {
        let a = fill_for(
            FrameClass::Frame {
                level: 0,
                kernel: false,
            },
            "main",
        );
        let b = fill_for(
            FrameClass::Frame {
                level: 1,
                kernel: false,
            },
            "main",
        );
        assert_ne!(a, b);
        assert_eq!(
            a,
            fill_for(
                FrameClass::Frame {
                    level: 0,
                    kernel: false
                },
                "main"
            )
        );
        assert_eq!(hsl(0.0, 1.0, 0.5), (255, 0, 0));
        assert_eq!(hsl(240.0, 1.0, 0.5), (0, 0, 255));
    }

    #[test]
    fn empty_input_is_an_error() {
        let mut out = Vec::new();
        let e = render(
            &[("a;b".into(), 0)],
            &SvgOptions::new("t", "us", true),
            &mut out,
        )
        .unwrap_err();
        assert!(e.to_string().contains("nothing to draw"), "{e}");
    }

    #[test]
    fn narrow_frames_are_cut_before_inferno() {
        let mut folded: Vec<(String, u64)> =
            (0..2000).map(|i| (format!("a;b;c{i};x"), 1)).collect();
        folded.push(("a;d".into(), 100_000));
        folded.push(("a;b;wide".into(), 1_000));
        let mut out = Vec::new();
        let st = render(&folded, &SvgOptions::new("t", "us", true), &mut out).unwrap();
        let svg = String::from_utf8(out).unwrap();
        assert_eq!(st.frames_too_narrow, 4000); // c0..c1999 and their x frames
        assert_eq!(st.frames, 4000 + 4);
        assert!(svg.contains("<title>b (3,000 us, 2.91%)</title>"), "{svg}");
        assert!(svg.contains("<title>wide (1,000 us, 0.97%)</title>"));
        assert!(svg.contains("<title>all (103,000 us, 100%)</title>"));
        assert!(!svg.contains("<title>c0 ("));
        assert_eq!(svg.matches("<g><title>").count(), 5);
    }
}

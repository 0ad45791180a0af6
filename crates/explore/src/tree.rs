//! Folded lines (`frame;frame;... weight`) to the tree the page draws: one node per
//! distinct path prefix, its total and own weight, and its chain level and fill as the
//! SVG classifies them ([`chainrec_report::svg::classify_stack`], [`fill_for`]), so the
//! page's hues are the SVG's.

use chainrec_chain::PathVisit;
#[cfg(test)]
use chainrec_report::svg::classify_stack;
use chainrec_report::svg::{fill_for, FrameClass, StackClassifier};
use serde::Serialize;
use std::collections::HashMap;

/// Above this many frames, subtrees under [`PRUNE_FRACTION`] of the total are cut (and
/// counted): a browser draws tens of thousands of frames, not millions.
pub const MAX_FRAMES: usize = 50_000;
/// The share of the total below which a subtree is cut when the tree is too large.
pub const PRUNE_FRACTION: f64 = 1e-4;

/// One frame of the tree, in a flat list: preorder (a parent before its children,
/// children in name order), each frame naming its parent's index. Flat rather than nested
/// because chain graphs are deep (stack frames times chain levels: hundreds of levels),
/// beyond the nesting many JSON readers accept.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Frame {
    /// The frame as folded text prints it (`all` for the root).
    pub name: String,
    /// Index of its parent in [`Tree::nodes`] (None for the root, index 0).
    pub parent: Option<u32>,
    /// Nanoseconds of every path through this frame.
    pub value: u64,
    /// Nanoseconds of the paths that end here (a folded line of exactly this path).
    #[serde(rename = "self")]
    pub self_ns: u64,
    /// Chain level: the number of `--` frames up to and including this one.
    pub level: u32,
    /// What the frame is: `user`, `kernel`, `level-sep`, `uk-sep`, `metal`, `marker`,
    /// `lost`, `runq`, `oncpu`, `offcpu`, `hot`, `root`.
    pub kind: &'static str,
    /// Its fill, as in the SVG (`rgb(...)`, or `url(#chainrec-marker)`/`url(#chainrec-lost)`
    /// for the hatched markers).
    pub fill: String,
}

/// A built tree and what building it cut.
#[derive(Serialize, Debug, Clone, PartialEq, Default)]
pub struct Tree {
    /// The frames, root first, in preorder.
    pub nodes: Vec<Frame>,
    /// Frames cut because the tree was larger than `MAX_FRAMES` (50,000) (0 when none).
    pub pruned_frames: usize,
    /// Nanoseconds of the cut subtrees (still in their parents' values).
    pub pruned_ns: u64,
    /// Frames merged into `[N frames below a pixel]` remainders: the `N`s summed (the
    /// frames below them are neither counted nor built), 0 when none.
    pub merged_frames: usize,
    /// The remainder frames standing for them.
    pub remainders: usize,
}

/// The `kind` of a remainder frame: the frames of one parent narrower than a pixel.
pub const MERGED_KIND: &str = "merged";
/// Its fill: a light grey, lighter than any frame's (its width is real time, its name says
/// what it holds).
pub const MERGED_FILL: &str = "rgb(228,228,228)";

/// The name of the remainder frame standing for `n` sibling frames narrower than a pixel.
pub fn remainder_name(n: usize) -> String {
    if n == 1 {
        "[1 frame below a pixel]".to_string()
    } else {
        format!("[{n} frames below a pixel]")
    }
}

/// How a tree is merged below a pixel (`PathRecord::merged`): the graph's width in pixels, and the frame
/// the page shows full width (its path from the root, empty: the root).
pub struct Pixels<'a> {
    /// The width in pixels (> 0).
    pub px: u64,
    /// The zoomed frame's path: it and its ancestors are always kept, and below it a frame
    /// is narrower than a pixel of *its* width (the page draws that subtree to its scale).
    pub zoom: &'a [String],
}

/// A frame to write in `TreeBuilder::finish_merged`'s preorder walk.
#[cfg(test)]
enum Pending {
    /// A node of the builder: its index, its parent in the output, the value one pixel
    /// stands for below it (times px), and its node in the base builder.
    Node {
        i: usize,
        parent: Option<u32>,
        scale: u64,
        base: Option<u32>,
    },
    /// The remainder of a parent's children narrower than a pixel.
    Rest(Remainder),
}

/// The remainder of a parent's children narrower than a pixel, before it is written.
pub(crate) struct Remainder {
    /// The parent's index in the output, and its chain level.
    pub(crate) parent: u32,
    pub(crate) level: u32,
    /// How many children it stands for, their nanoseconds, and those in the baseline.
    pub(crate) count: usize,
    pub(crate) value: u64,
    pub(crate) base_value: u64,
}

pub(crate) fn kind_of(class: FrameClass) -> &'static str {
    match class {
        FrameClass::Frame { kernel: true, .. } => "kernel",
        FrameClass::Frame { kernel: false, .. } => "user",
        FrameClass::UserKernelSeparator => "uk-sep",
        FrameClass::LevelSeparator => "level-sep",
        FrameClass::Metal => "metal",
        FrameClass::Marker => "marker",
        FrameClass::Lost => "lost",
        FrameClass::Group => "group",
        FrameClass::RunQueue => "runq",
        FrameClass::OnCpu => "oncpu",
        FrameClass::OffCpu => "offcpu",
        FrameClass::Hot { .. } => "hot",
    }
}

/// How many frames the subtree of node `c` has (it included).
fn subtree_size<'k>(c: usize, children_of: impl Fn(usize) -> &'k [u32]) -> usize {
    let mut n = 0;
    let mut below = vec![c];
    while let Some(j) = below.pop() {
        n += 1;
        below.extend(children_of(j).iter().map(|&k| k as usize));
    }
    n
}

struct Building {
    /// Index in [`TreeBuilder::names`].
    name: u32,
    /// Its first child and its next sibling ([`NONE`]: none), newest first; and how many
    /// children it has (past [`LIST_MAX`] they are also in [`TreeBuilder::wide`]).
    first_child: u32,
    next_sibling: u32,
    kids: u32,
    class: Option<FrameClass>,
    level: u32,
    value: u64,
    self_ns: u64,
}

/// FxHash (rustc's): the tree's keys are short names and small integers, hashed millions of
/// times per range; SipHash's flooding resistance buys nothing here and costs a third.
#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl std::hash::Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Fx {
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

pub(crate) type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fx>>;

/// No node (an empty child list's end).
const NONE: u32 = u32::MAX;
/// Children a node's list is searched through before they go in the map too: most frames
/// have one child (a stack goes on), and a list of nodes just created is in the cache
/// where one map of every frame (millions, ~100 MB on busy20m) was a cache miss per frame
/// (session 24: most of a range's tree build).
const LIST_MAX: u32 = 8;

/// Accumulates folded lines (in any order; equal lines add up). Frame names are interned;
/// each node's children are a list through the nodes, and those of a node with more than
/// [`LIST_MAX`] also in one map keyed by (parent, name): a range of a large trace has
/// millions of frames, and a map and a string per frame were most of the time of a
/// request.
pub struct TreeBuilder {
    nodes: Vec<Building>,
    names: Vec<Box<str>>,
    name_ids: FxMap<Box<str>, u32>,
    wide: FxMap<(u32, u32), u32>,
    /// [`TreeBuilder::add_path`]'s walk: the tree node of each frame of the path last
    /// added, and the classifier's state after it.
    path_nodes: Vec<(u32, StackClassifier)>,
    /// For each frame `k` of the walk's path last added, the text frames before it
    /// (`path_texts[k]`; a name holding `;` is several), so that a path's shared part is
    /// not scanned again at every visit.
    path_texts: Vec<usize>,
}

impl Default for TreeBuilder {
    fn default() -> Self {
        let mut b = TreeBuilder {
            nodes: Vec::new(),
            names: Vec::new(),
            name_ids: FxMap::default(),
            wide: FxMap::default(),
            path_nodes: Vec::new(),
            path_texts: vec![0],
        };
        let all = b.intern("all");
        b.nodes.push(Building {
            name: all,
            first_child: NONE,
            next_sibling: NONE,
            kids: 0,
            class: None,
            level: 0,
            value: 0,
            self_ns: 0,
        });
        b
    }
}

/// The id of `name` in `names` (`ids` its index), added if new.
pub(crate) fn intern(names: &mut Vec<Box<str>>, ids: &mut FxMap<Box<str>, u32>, name: &str) -> u32 {
    if let Some(&id) = ids.get(name) {
        return id;
    }
    let id = names.len() as u32;
    names.push(name.into());
    ids.insert(name.into(), id);
    id
}

impl TreeBuilder {
    fn intern(&mut self, name: &str) -> u32 {
        intern(&mut self.names, &mut self.name_ids, name)
    }

    /// The child of node `at` named `name`, if it has one.
    fn child(&self, at: u32, name: u32) -> Option<u32> {
        let b = &self.nodes[at as usize];
        if b.kids > LIST_MAX {
            return self.wide.get(&(at, name)).copied();
        }
        let mut c = b.first_child;
        while c != NONE {
            let k = &self.nodes[c as usize];
            if k.name == name {
                return Some(c);
            }
            c = k.next_sibling;
        }
        None
    }

    /// A new child of node `at` (which has none named `name`).
    fn new_child(&mut self, at: u32, name: u32, class: FrameClass, level: u32) -> u32 {
        let i = self.nodes.len() as u32;
        let parent = &mut self.nodes[at as usize];
        let next_sibling = parent.first_child;
        parent.first_child = i;
        parent.kids += 1;
        let kids = parent.kids;
        self.nodes.push(Building {
            name,
            first_child: NONE,
            next_sibling,
            kids: 0,
            class: Some(class),
            level,
            value: 0,
            self_ns: 0,
        });
        if kids == LIST_MAX + 1 {
            // From now on looked up in the map: all of them go in.
            let mut c = i;
            while c != NONE {
                let k = &self.nodes[c as usize];
                self.wide.insert((at, k.name), c);
                c = k.next_sibling;
            }
        } else if kids > LIST_MAX {
            self.wide.insert((at, name), i);
        }
        i
    }

    /// Add one folded line with its weight (the reference [`Self::add_path`] is tested
    /// against).
    #[cfg(test)]
    pub fn add(&mut self, line: &str, ns: u64) {
        if ns == 0 {
            return;
        }
        // The frames' classes (and so levels) are needed only for a frame seen first.
        let mut classes: Option<Vec<FrameClass>> = None;
        let mut at = 0u32;
        self.nodes[0].value += ns;
        for (depth, f) in line.split(';').enumerate() {
            let name = self.intern(f);
            let next = match self.child(at, name) {
                Some(i) => i,
                None => {
                    let cl = classes.get_or_insert_with(|| {
                        let frames: Vec<&str> = line.split(';').collect();
                        classify_stack(&frames, true)
                    });
                    let level = cl[..=depth]
                        .iter()
                        .filter(|c| **c == FrameClass::LevelSeparator)
                        .count() as u32;
                    self.new_child(at, name, cl[depth], level)
                }
            };
            at = next;
            self.nodes[at as usize].value += ns;
        }
        self.nodes[at as usize].self_ns += ns;
    }

    /// Add one path of a depth-first walk of a graph ([`chainrec_chain::Graph::for_each_path`]):
    /// the same tree as [`Self::add`] of the walk's folded lines (each path is those
    /// frames joined by `;`), without rendering or re-splitting text. Only the frames past
    /// the parent's path are looked up and classified (from the parent's state), and they
    /// get the whole subtree's weight at once. Returns whether to descend (not into a
    /// subtree of weight 0: it has no line).
    pub fn add_path(&mut self, v: &PathVisit<'_>) -> bool {
        if v.subtree_ns == 0 {
            return false;
        }
        // The walk visits a path right after its parent's (or a sibling's subtree), so
        // the first `shared` frames are on the stack; a frame name holding `;` is several
        // frames in the text, and so here (the stack is kept per text frame).
        let texts =
            |f: &chainrec_chain::PathFrame<'_>| 1 + f.name.bytes().filter(|&b| b == b';').count();
        if self.path_texts.len() <= v.shared {
            // Not a child of the path last added (a walk not depth-first): count anew.
            self.path_texts.truncate(1);
            for f in &v.frames[..v.shared] {
                let t = self.path_texts[self.path_texts.len() - 1] + texts(f);
                self.path_texts.push(t);
            }
        }
        self.path_texts.truncate(v.shared + 1);
        let shared_text = self.path_texts[v.shared];
        for f in &v.frames[v.shared..] {
            let t = self.path_texts[self.path_texts.len() - 1] + texts(f);
            self.path_texts.push(t);
        }
        self.path_nodes.truncate(shared_text);
        if v.shared == 0 {
            self.nodes[0].value += v.subtree_ns;
        }
        let (mut at, mut state) = self
            .path_nodes
            .last()
            .copied()
            .unwrap_or((0, StackClassifier::new(true)));
        for f in v.frames[v.shared..].iter().flat_map(|f| f.name.split(';')) {
            let name = self.intern(f);
            let class = state.next(f);
            at = match self.child(at, name) {
                Some(i) => i,
                None => self.new_child(at, name, class, state.level()),
            };
            self.nodes[at as usize].value += v.subtree_ns;
            self.path_nodes.push((at, state));
        }
        self.nodes[at as usize].self_ns += v.ns;
        true
    }

    /// Node `i` as an output frame under `parent`.
    fn frame(&self, i: usize, parent: Option<u32>) -> Frame {
        let b = &self.nodes[i];
        let name = &self.names[b.name as usize];
        Frame {
            name: name.to_string(),
            parent,
            value: b.value,
            self_ns: b.self_ns,
            level: b.level,
            kind: b.class.map_or("root", kind_of),
            fill: b.class.map_or_else(String::new, |c| fill_for(c, name)),
        }
    }

    /// Each node's children as one flat array (`kids[first[i]..first[i + 1]]`), each
    /// node's slice sorted by name, reversed (a stack pops the first name first).
    fn sorted_children(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.nodes.len();
        let mut first = vec![0u32; n + 1];
        for i in 0..n {
            first[i + 1] = first[i] + self.nodes[i].kids;
        }
        let mut kids = vec![0u32; first[n] as usize];
        for (i, b) in self.nodes.iter().enumerate() {
            let mut at = first[i] as usize;
            let mut c = b.first_child;
            while c != NONE {
                kids[at] = c;
                at += 1;
                c = self.nodes[c as usize].next_sibling;
            }
        }
        let names = &self.names;
        let nodes = &self.nodes;
        for i in 0..n {
            let slice = &mut kids[first[i] as usize..first[i + 1] as usize];
            // Reversed: the stack pops the first name first.
            slice.sort_unstable_by(|a, b| {
                names[nodes[*b as usize].name as usize]
                    .cmp(&names[nodes[*a as usize].name as usize])
            });
        }
        (first, kids)
    }

    /// The tree, children sorted by name (flame-graph order); subtrees cut as
    /// [`MAX_FRAMES`] says. Iterative: the tree may be deeper than a thread's stack allows
    /// recursion.
    pub fn finish(self) -> Tree {
        let total = self.nodes[0].value;
        let cut_below = if self.nodes.len() > MAX_FRAMES {
            (total as f64 * PRUNE_FRACTION) as u64
        } else {
            0
        };
        let (first, kids) = self.sorted_children();
        let nodes = &self.nodes;
        let children_of = |i: usize| &kids[first[i] as usize..first[i + 1] as usize];
        let mut tree = Tree::default();
        // (building index, parent index in the output)
        let mut stack: Vec<(usize, Option<u32>)> = vec![(0, None)];
        while let Some((i, parent)) = stack.pop() {
            let me = tree.nodes.len() as u32;
            tree.nodes.push(self.frame(i, parent));
            for &c in children_of(i) {
                let c = c as usize;
                if nodes[c].value < cut_below {
                    // The subtree's size.
                    tree.pruned_frames += subtree_size(c, children_of);
                    tree.pruned_ns += nodes[c].value;
                } else {
                    stack.push((c, Some(me)));
                }
            }
        }
        tree
    }
}

impl TreeBuilder {
    #[cfg(test)]
    /// The child of node `at` named like node `i` of `other`.
    fn child_named(&self, at: u32, other: &TreeBuilder, i: usize) -> Option<u32> {
        let name = &other.names[other.nodes[i].name as usize];
        let id = *self.name_ids.get(name)?;
        self.child(at, id)
    }

    /// The tree as a graph `pixels.px` wide draws it: every frame at least a pixel wide
    /// (`value * px >= total`, or below the zoomed frame `>= its value`) exactly as
    /// [`Self::finish`] gives it (name, value, own weight, level, kind, fill, children by
    /// name), and the children of each frame narrower than a pixel, with their subtrees,
    /// merged into one remainder frame after the kept ones ([`remainder_name`],
    /// [`MERGED_KIND`]), whose value is theirs summed: every frame's value is still its
    /// children's plus its own, and the answer counts what was merged. Nothing is
    /// pruned: at most two frames per pixel and row are left.
    ///
    /// With `base` (the baseline range's builder), also each output frame's value in it
    /// (by path, as [`Tree::values_in`]; a remainder's is its merged frames' summed).
    #[cfg(test)]
    pub fn finish_merged(
        self,
        pixels: &Pixels<'_>,
        base: Option<&TreeBuilder>,
    ) -> (Tree, Option<Vec<u64>>) {
        let px = u128::from(pixels.px.max(1));
        let total = self.nodes[0].value;
        // The zoomed frame and its ancestors (kept whatever their width).
        let mut on_zoom = Vec::new();
        let mut zoomed = None;
        if !pixels.zoom.is_empty() {
            let mut at = 0u32;
            for name in pixels.zoom {
                let next = self
                    .name_ids
                    .get(name.as_str())
                    .and_then(|id| self.child(at, *id));
                match next {
                    Some(c) => {
                        on_zoom.push(c as usize);
                        at = c;
                    }
                    None => {
                        // Not in this range: merged as if unzoomed.
                        on_zoom.clear();
                        break;
                    }
                }
            }
            zoomed = on_zoom.last().copied();
        }
        // Only the kept frames' children are sorted (by name, reversed: the stack pops the
        // first name first), from their lists: most of a large tree is merged.
        let nodes = &self.nodes;
        let names = &self.names;
        let mut tree = Tree::default();
        let mut base_values = base.map(|_| Vec::new());
        let mut stack = vec![Pending::Node {
            i: 0,
            parent: None,
            scale: total,
            base: base.map(|_| 0),
        }];
        let mut kept: Vec<usize> = Vec::new();
        while let Some(p) = stack.pop() {
            let me = tree.nodes.len() as u32;
            let (i, scale, bi) = match p {
                Pending::Rest(r) => {
                    tree.push_remainder(&r, base_values.as_mut());
                    continue;
                }
                Pending::Node {
                    i,
                    parent,
                    scale,
                    base: bi,
                } => {
                    tree.nodes.push(self.frame(i, parent));
                    if let (Some(v), Some(base)) = (&mut base_values, base) {
                        v.push(bi.map_or(0, |bi| base.nodes[bi as usize].value));
                    }
                    (i, scale, bi)
                }
            };
            let mut rest = (0usize, 0u64, 0u64);
            kept.clear();
            let mut next = nodes[i].first_child;
            while next != NONE {
                let c = next as usize;
                next = nodes[c].next_sibling;
                if u128::from(nodes[c].value) * px >= u128::from(scale) || on_zoom.contains(&c) {
                    kept.push(c);
                    continue;
                }
                rest.0 += 1;
                rest.1 += nodes[c].value;
                if let (Some(base), Some(bi)) = (base, bi) {
                    rest.2 += base
                        .child_named(bi, &self, c)
                        .map_or(0, |j| base.nodes[j as usize].value);
                }
            }
            kept.sort_unstable_by(|a, b| {
                names[nodes[*b].name as usize].cmp(&names[nodes[*a].name as usize])
            });
            if rest.0 > 0 {
                // After the kept children (pushed first: popped last).
                stack.push(Pending::Rest(Remainder {
                    parent: me,
                    level: nodes[i].level,
                    count: rest.0,
                    value: rest.1,
                    base_value: rest.2,
                }));
            }
            for &c in &kept {
                stack.push(Pending::Node {
                    i: c,
                    parent: Some(me),
                    scale: if Some(c) == zoomed {
                        nodes[c].value
                    } else {
                        scale
                    },
                    base: match (base, bi) {
                        (Some(base), Some(bi)) => base.child_named(bi, &self, c),
                        _ => None,
                    },
                });
            }
        }
        (tree, base_values)
    }
}

impl Tree {
    /// Add remainder `r` as a frame (and its baseline value to `base_values`), and count
    /// the frames it stands for.
    pub(crate) fn push_remainder(&mut self, r: &Remainder, base_values: Option<&mut Vec<u64>>) {
        if let Some(v) = base_values {
            v.push(r.base_value);
        }
        let (count, value) = (r.count, r.value);
        self.nodes.push(Frame {
            name: remainder_name(count),
            parent: Some(r.parent),
            value,
            self_ns: value,
            level: r.level,
            kind: MERGED_KIND,
            fill: MERGED_FILL.to_string(),
        });
        self.remainders += 1;
        self.merged_frames += count;
    }

    /// The paths of the frames (root: empty), by index.
    fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = Vec::with_capacity(self.nodes.len());
        for f in &self.nodes {
            paths.push(match f.parent {
                None => String::new(),
                Some(0) => f.name.clone(),
                Some(p) => format!("{};{}", paths[p as usize], f.name),
            });
        }
        paths
    }

    /// For each frame of this tree, the value of the frame of the same path in `other`
    /// (0 where it has none): the differential view's base.
    pub fn values_in(&self, other: &Tree) -> Vec<u64> {
        let theirs: HashMap<String, u64> = other
            .paths()
            .into_iter()
            .zip(other.nodes.iter().map(|f| f.value))
            .collect();
        self.paths()
            .iter()
            .map(|p| theirs.get(p).copied().unwrap_or(0))
            .collect()
    }

    /// Every path with its own weight (`self` > 0), joined by `;` (the root left out):
    /// the folded lines the tree was built from, summed per text, sorted.
    pub fn folded(&self) -> Vec<(String, u64)> {
        let mut paths: Vec<String> = Vec::with_capacity(self.nodes.len());
        let mut out = Vec::new();
        for f in &self.nodes {
            let p = match f.parent {
                None => String::new(),
                Some(0) => f.name.clone(),
                Some(p) => format!("{};{}", paths[p as usize], f.name),
            };
            if f.self_ns > 0 {
                out.push((p.clone(), f.self_ns));
            }
            paths.push(p);
        }
        out.sort();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_levels() {
        let mut b = TreeBuilder::default();
        b.add("a;x;-;k;--;kw;-;w;b;--;[hardirq: timer]", 5);
        b.add("a;x", 2);
        b.add("a;x", 1);
        b.add("c", 4);
        let t = b.finish();
        assert_eq!(t.nodes[0].value, 12);
        assert_eq!(t.nodes.len(), 13);
        assert_eq!(
            t.folded(),
            vec![
                ("a;x".to_string(), 3),
                ("a;x;-;k;--;kw;-;w;b;--;[hardirq: timer]".to_string(), 5),
                ("c".to_string(), 4)
            ]
        );
        let get = |name: &str| t.nodes.iter().position(|f| f.name == name).unwrap();
        let a = &t.nodes[get("a")];
        assert_eq!((a.kind, a.level, a.parent), ("user", 0, Some(0)));
        assert_eq!(t.nodes[get("x")].parent, Some(get("a") as u32));
        assert_eq!(t.nodes[get("k")].kind, "kernel");
        let sep = &t.nodes[get("--")];
        assert_eq!((sep.kind, sep.level), ("level-sep", 1));
        let kw = &t.nodes[get("kw")];
        assert_eq!((kw.kind, kw.level), ("kernel", 1));
        let irq = &t.nodes[get("[hardirq: timer]")];
        assert_eq!((irq.kind, irq.level), ("metal", 2));
        // Preorder, children by name: c after a's whole subtree.
        assert_eq!(get("c"), 12);
    }

    /// The tree from the graph's structured paths equals the tree from its folded lines
    /// (the text the explorer read before), on every synthetic scenario: same frames,
    /// weights, classes, levels and fills.
    #[test]
    fn paths_build_the_tree_of_the_folded_lines() {
        use chainrec_chain::{Analysis, Setup, View};
        use chainrec_format::{synth, TraceReader};
        use chainrec_testkit::scenario;
        use chainrec_testkit::scratch::ScratchDir;
        let dir = ScratchDir::new("explore-tree");
        let mut nonempty = 0;
        let scenarios = synth::scenarios();
        for sc in &scenarios {
            let path = dir.file(&format!("{}.zst", sc.name));
            let m = scenario::generate(sc.name, 20_000);
            scenario::write(&path, sc.name, 20_000, 500, &m);
            let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
            for view in [View::Chains, View::OffWake, View::Wakeup] {
                let (_, graph) = an.fold(Setup::default(), view, |_| {}).unwrap();
                let mut by_text = TreeBuilder::default();
                graph.for_each_line(|l, ns| by_text.add(l, ns));
                let mut by_path = TreeBuilder::default();
                graph.for_each_path(|v| by_path.add_path(v));
                let (t, p) = (by_text.finish(), by_path.finish());
                nonempty += usize::from(t.nodes.len() > 1);
                assert_eq!(t, p, "{} {view:?}", sc.name);
            }
        }
        assert!(nonempty >= scenarios.len(), "{nonempty} non-empty graphs");
    }
}

//! Folded lines (`frame;frame;... weight`) to the tree the page draws: one node per
//! distinct path prefix, its total and own weight, and its chain level and fill as the
//! SVG classifies them ([`chainrec_report::svg::classify_stack`], [`fill_for`]), so the
//! page's hues are the SVG's.

use chainrec_report::svg::{classify_stack, fill_for, FrameClass};
use serde::Serialize;
use std::collections::HashMap;

/// Above this many frames, subtrees under [`PRUNE_FRACTION`] of the total are cut (and
/// counted): a browser draws tens of thousands of frames, not millions.
pub const MAX_FRAMES: usize = 50_000;
/// The share of the total below which a subtree is cut when the tree is too large.
pub const PRUNE_FRACTION: f64 = 1e-4;

/// One frame of the tree.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Frame {
    /// The frame as folded text prints it (`all` for the root).
    pub name: String,
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
    /// The frames above it, by name.
    pub children: Vec<Frame>,
}

/// A built tree and what building it cut.
#[derive(Serialize, Debug, Clone, PartialEq)]
pub struct Tree {
    /// Frames in the tree (the root included).
    pub frames: usize,
    /// Frames cut because the tree was larger than [`MAX_FRAMES`] (0 when none).
    pub pruned_frames: usize,
    /// Nanoseconds of the cut subtrees (still in their parents' values).
    pub pruned_ns: u64,
    /// The root (`all`).
    pub root: Frame,
}

fn kind_of(class: FrameClass) -> &'static str {
    match class {
        FrameClass::Frame { kernel: true, .. } => "kernel",
        FrameClass::Frame { kernel: false, .. } => "user",
        FrameClass::UserKernelSeparator => "uk-sep",
        FrameClass::LevelSeparator => "level-sep",
        FrameClass::Metal => "metal",
        FrameClass::Marker => "marker",
        FrameClass::Lost => "lost",
        FrameClass::RunQueue => "runq",
        FrameClass::OnCpu => "oncpu",
        FrameClass::OffCpu => "offcpu",
        FrameClass::Hot { .. } => "hot",
    }
}

struct Building {
    name: String,
    class: Option<FrameClass>,
    level: u32,
    value: u64,
    self_ns: u64,
    children: HashMap<String, usize>,
}

/// Accumulates folded lines (in any order; equal lines add up).
pub struct TreeBuilder {
    nodes: Vec<Building>,
}

impl Default for TreeBuilder {
    fn default() -> Self {
        TreeBuilder {
            nodes: vec![Building {
                name: "all".into(),
                class: None,
                level: 0,
                value: 0,
                self_ns: 0,
                children: HashMap::new(),
            }],
        }
    }
}

impl TreeBuilder {
    /// Add one folded line with its weight.
    pub fn add(&mut self, line: &str, ns: u64) {
        if ns == 0 {
            return;
        }
        let frames: Vec<&str> = line.split(';').collect();
        let classes = classify_stack(&frames, true);
        let mut at = 0usize;
        let mut level = 0u32;
        self.nodes[0].value += ns;
        for (f, class) in frames.iter().zip(classes) {
            if class == FrameClass::LevelSeparator {
                level += 1;
            }
            let next = match self.nodes[at].children.get(*f) {
                Some(&i) => i,
                None => {
                    let i = self.nodes.len();
                    self.nodes.push(Building {
                        name: f.to_string(),
                        class: Some(class),
                        level,
                        value: 0,
                        self_ns: 0,
                        children: HashMap::new(),
                    });
                    self.nodes[at].children.insert(f.to_string(), i);
                    i
                }
            };
            at = next;
            self.nodes[at].value += ns;
        }
        self.nodes[at].self_ns += ns;
    }

    /// The tree, children sorted by name (flame-graph order); subtrees cut as
    /// [`MAX_FRAMES`] says.
    pub fn finish(self) -> Tree {
        let total = self.nodes[0].value;
        let cut_below = if self.nodes.len() > MAX_FRAMES {
            (total as f64 * PRUNE_FRACTION) as u64
        } else {
            0
        };
        let mut tree = Tree {
            frames: 0,
            pruned_frames: 0,
            pruned_ns: 0,
            root: Frame {
                name: String::new(),
                value: 0,
                self_ns: 0,
                level: 0,
                kind: "root",
                fill: String::new(),
                children: Vec::new(),
            },
        };
        tree.root = self.emit(0, cut_below, &mut tree);
        tree
    }

    fn subtree_size(&self, i: usize) -> usize {
        1 + self.nodes[i]
            .children
            .values()
            .map(|&c| self.subtree_size(c))
            .sum::<usize>()
    }

    fn emit(&self, i: usize, cut_below: u64, tree: &mut Tree) -> Frame {
        let n = &self.nodes[i];
        tree.frames += 1;
        let mut kids: Vec<(&String, usize)> = n.children.iter().map(|(k, &v)| (k, v)).collect();
        kids.sort_unstable();
        let mut children = Vec::with_capacity(kids.len());
        for (_, c) in kids {
            if self.nodes[c].value < cut_below {
                tree.pruned_frames += self.subtree_size(c);
                tree.pruned_ns += self.nodes[c].value;
                continue;
            }
            children.push(self.emit(c, cut_below, tree));
        }
        Frame {
            name: n.name.clone(),
            value: n.value,
            self_ns: n.self_ns,
            level: n.level,
            kind: n.class.map_or("root", kind_of),
            fill: n.class.map_or_else(String::new, |c| fill_for(c, &n.name)),
            children,
        }
    }
}

impl Frame {
    /// Every path with its own weight (`self` > 0), joined by `;` (the root left out):
    /// the folded lines the tree was built from, summed per text.
    pub fn folded(&self) -> Vec<(String, u64)> {
        fn walk(f: &Frame, prefix: &str, out: &mut Vec<(String, u64)>) {
            for c in &f.children {
                let p = if prefix.is_empty() {
                    c.name.clone()
                } else {
                    format!("{prefix};{}", c.name)
                };
                if c.self_ns > 0 {
                    out.push((p.clone(), c.self_ns));
                }
                walk(c, &p, out);
            }
        }
        let mut out = Vec::new();
        walk(self, "", &mut out);
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
        assert_eq!(t.root.value, 12);
        assert_eq!(t.frames, 13);
        assert_eq!(
            t.root.folded(),
            vec![
                ("a;x".to_string(), 3),
                ("a;x;-;k;--;kw;-;w;b;--;[hardirq: timer]".to_string(), 5),
                ("c".to_string(), 4)
            ]
        );
        let a = &t.root.children[0];
        assert_eq!((a.name.as_str(), a.kind, a.level), ("a", "user", 0));
        let k = &a.children[0].children[0].children[0];
        assert_eq!((k.name.as_str(), k.kind), ("k", "kernel"));
        let sep = &k.children[0];
        assert_eq!((sep.kind, sep.level), ("level-sep", 1));
        let kw = &sep.children[0];
        assert_eq!((kw.kind, kw.level), ("kernel", 1));
    }
}

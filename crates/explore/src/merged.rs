//! A graph's walk recorded compactly ([`PathRecord`]: each path's new frames as name ids,
//! its parent, its weights) and the tree merged below a pixel built from it top down,
//! only where the page draws: a frame's children are grouped by name from its paths'
//! next frames, the groups at least a pixel wide built further, the others summed into
//! one remainder. The same tree as `TreeBuilder::finish_merged` (the tests' reference),
//! without building every frame first: busy20m's whole-trace graph is tens of millions of
//! frames (a 3.3 GB tree for `chainrec report`), of which a few thousand are drawn.

use crate::tree::{intern, kind_of, Frame, FxMap, Pixels, Remainder, Tree};
use chainrec_chain::PathVisit;
use chainrec_report::svg::{fill_for, StackClassifier};

/// No path (a root path's parent).
const NONE: u32 = u32::MAX;

/// One path of the walk (a node of the graph's trie).
struct Path {
    /// The path it extends ([`NONE`]: a root path).
    parent: u32,
    /// Its own frames: `frames[first..first + len]` (text frames: a name holding `;` is
    /// several).
    first: u32,
    len: u32,
    /// Nanoseconds ending exactly here, and through here (this path and those below).
    ns: u64,
    subtree_ns: u64,
}

/// A place in the recorded walk: path `path`'s frame `off`.
#[derive(Clone, Copy)]
struct Pos {
    path: u32,
    off: u32,
}

/// A graph's depth-first walk ([`chainrec_chain::Graph::for_each_path`]) kept as name ids
/// per path: a few bytes per frame, where a tree of every frame costs ~40. One record per
/// walk (its pieces are named by the walk's `PathVisit::piece`).
#[derive(Default)]
pub struct PathRecord {
    paths: Vec<Path>,
    /// Each path's children (filled at [`PathRecord::seal`]).
    kids_first: Vec<u32>,
    kids: Vec<u32>,
    frames: Vec<u32>,
    names: Vec<Box<str>>,
    name_ids: FxMap<Box<str>, u32>,
    /// Each piece's name ids (`PathVisit::piece`: the frames a path adds), as the place in
    /// `frames` where they were first recorded: a piece recurs on many paths, and its names
    /// are looked up once (their text hashed and compared: most of the record's time).
    pieces: FxMap<usize, (u32, u32)>,
    /// The walk's path so far: (PathVisit frames up to and including this path's, path).
    stack: Vec<(usize, u32)>,
    /// Nanoseconds of every path.
    total: u64,
    /// Nanoseconds of root paths without frames (the root's own weight).
    root_ns: u64,
}

impl PathRecord {
    fn intern(&mut self, name: &str) -> u32 {
        intern(&mut self.names, &mut self.name_ids, name)
    }

    /// Record one path of the walk; whether to descend (not into a subtree of weight 0:
    /// it has no line, as [`crate::tree::TreeBuilder::add_path`]).
    pub fn add_path(&mut self, v: &PathVisit<'_>) -> bool {
        if v.subtree_ns == 0 {
            return false;
        }
        while self.stack.last().is_some_and(|&(len, _)| len > v.shared) {
            self.stack.pop();
        }
        let parent = match self.stack.last() {
            Some(&(len, p)) if len == v.shared => p,
            _ => NONE,
        };
        if parent == NONE {
            self.total += v.subtree_ns;
        }
        let first = self.frames.len() as u32;
        match self.pieces.get(&v.piece) {
            Some(&(at, len)) => {
                let at = at as usize;
                self.frames.extend_from_within(at..at + len as usize);
            }
            None => {
                for f in v.frames[v.shared..].iter().flat_map(|f| f.name.split(';')) {
                    let id = self.intern(f);
                    self.frames.push(id);
                }
                let len = self.frames.len() as u32 - first;
                self.pieces.insert(v.piece, (first, len));
            }
        }
        if self.frames.len() as u32 == first {
            // No frames of its own: its weight ends at its parent's last frame, and its
            // children go on from there.
            match self.paths.get_mut(parent as usize) {
                Some(p) => p.ns += v.ns,
                None => self.root_ns += v.ns,
            }
            self.stack.push((v.frames.len(), parent));
            return true;
        }
        let me = self.paths.len() as u32;
        self.paths.push(Path {
            parent,
            first,
            len: self.frames.len() as u32 - first,
            ns: v.ns,
            subtree_ns: v.subtree_ns,
        });
        self.stack.push((v.frames.len(), me));
        true
    }

    /// Nanoseconds of every path.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Each path's children as one array (after the walk).
    fn seal(&mut self) {
        let n = self.paths.len();
        let mut first = vec![0u32; n + 2];
        for p in &self.paths {
            let slot = if p.parent == NONE {
                n
            } else {
                p.parent as usize
            };
            first[slot + 1] += 1;
        }
        for i in 0..=n {
            first[i + 1] += first[i];
        }
        let mut at = first.clone();
        let mut kids = vec![0u32; n];
        for (i, p) in self.paths.iter().enumerate() {
            let slot = if p.parent == NONE {
                n
            } else {
                p.parent as usize
            };
            kids[at[slot] as usize] = i as u32;
            at[slot] += 1;
        }
        self.kids_first = first;
        self.kids = kids;
        self.stack = Vec::new();
        self.pieces = FxMap::default();
    }

    /// The places right after `p` (or the root paths' first frames, for `None`).
    fn next(&self, p: Option<Pos>, mut f: impl FnMut(Pos)) {
        let slot = match p {
            Some(p) if p.off + 1 < self.paths[p.path as usize].len => {
                return f(Pos {
                    path: p.path,
                    off: p.off + 1,
                })
            }
            Some(p) => p.path as usize,
            None => self.paths.len(),
        };
        for &c in &self.kids[self.kids_first[slot] as usize..self.kids_first[slot + 1] as usize] {
            f(Pos { path: c, off: 0 });
        }
    }

    fn name_at(&self, p: Pos) -> u32 {
        self.frames[(self.paths[p.path as usize].first + p.off) as usize]
    }

    /// Nanoseconds through place `p`, and those ending there.
    fn weights(&self, p: Pos) -> (u64, u64) {
        let path = &self.paths[p.path as usize];
        let own = if p.off + 1 == path.len { path.ns } else { 0 };
        (path.subtree_ns, own)
    }

    /// The children of the frame whose places are `members` (`None`: the root), grouped by
    /// name, in name order: (name, value, own, places).
    fn children(&self, members: &[Option<Pos>]) -> Vec<Group> {
        let mut at: FxMap<u32, usize> = FxMap::default();
        let mut groups: Vec<Group> = Vec::new();
        for &m in members {
            self.next(m, |p| {
                let name = self.name_at(p);
                let (w, own) = self.weights(p);
                let i = *at.entry(name).or_insert_with(|| {
                    groups.push(Group {
                        name,
                        value: 0,
                        own: 0,
                        places: Vec::new(),
                    });
                    groups.len() - 1
                });
                let g = &mut groups[i];
                g.value += w;
                g.own += own;
                g.places.push(Some(p));
            });
        }
        groups
            .sort_unstable_by(|a, b| self.names[a.name as usize].cmp(&self.names[b.name as usize]));
        groups
    }

    /// The tree a graph `pixels.px` wide draws, as `TreeBuilder::finish_merged`
    /// gives it for the same walk (with `base`, the baseline's values by path too), except
    /// that `merged_frames` counts the frames merged into the remainders (the `N`s of their
    /// names), not the frames below those: those are never built.
    pub fn merged(
        mut self,
        pixels: &Pixels<'_>,
        base: Option<PathRecord>,
    ) -> (Tree, Option<Vec<u64>>) {
        self.seal();
        let base = base.map(|mut b| {
            b.seal();
            b
        });
        let px = u128::from(pixels.px.max(1));
        let total = self.total;
        // The zoomed frame is kept (with its ancestors) only if the range has it.
        let zoom = {
            let mut members = vec![None];
            for name in pixels.zoom {
                let Some(&id) = self.name_ids.get(name.as_str()) else {
                    members.clear();
                    break;
                };
                let mut next = Vec::new();
                for &m in &members {
                    self.next(m, |p| {
                        if self.name_at(p) == id {
                            next.push(Some(p));
                        }
                    });
                }
                members = next;
            }
            if members.is_empty() {
                &[][..]
            } else {
                pixels.zoom
            }
        };
        let mut tree = Tree::default();
        let mut base_values = base.as_ref().map(|_| Vec::new());
        let mut stack = vec![Todo::Frame {
            name: None,
            parent: None,
            value: total,
            own: self.root_ns,
            places: vec![None],
            base_places: base.as_ref().map(|_| vec![None]),
            base_value: base.as_ref().map_or(0, |b| b.total),
            state: StackClassifier::new(true),
            class: None,
            zoom_depth: Some(0),
            scale: total,
        }];
        while let Some(t) = stack.pop() {
            let me = tree.nodes.len() as u32;
            let Todo::Frame {
                name,
                parent,
                value,
                own,
                places,
                base_places,
                base_value,
                state,
                class,
                zoom_depth,
                scale,
            } = t
            else {
                if let Todo::Rest(r) = t {
                    tree.push_remainder(&r, base_values.as_mut());
                }
                continue;
            };
            let text = name.map_or("all", |n| &*self.names[n as usize]);
            tree.nodes.push(Frame {
                name: text.to_string(),
                parent,
                value,
                self_ns: own,
                level: state.level(),
                kind: class.map_or("root", kind_of),
                fill: class.map_or_else(String::new, |c| fill_for(c, text)),
            });
            if let Some(v) = &mut base_values {
                v.push(base_value);
            }
            let groups = self.children(&places);
            drop(places);
            let base_groups: FxMap<&str, Group> = match (&base, &base_places) {
                (Some(b), Some(bp)) => b
                    .children(bp)
                    .into_iter()
                    .map(|g| (&*b.names[g.name as usize], g))
                    .collect(),
                _ => FxMap::default(),
            };
            let mut base_groups = base_groups;
            let mut rest = (0usize, 0u64, 0u64);
            let mut kept = Vec::new();
            for g in groups {
                let text = &*self.names[g.name as usize];
                let bg = base_groups.remove(text);
                let on_zoom = zoom_depth
                    .filter(|&d| d < zoom.len() && zoom[d] == text)
                    .map(|d| d + 1);
                if on_zoom.is_none() && u128::from(g.value) * px < u128::from(scale) {
                    rest.0 += 1;
                    rest.1 += g.value;
                    rest.2 += bg.map_or(0, |b| b.value);
                    continue;
                }
                let mut st = state;
                let cl = st.next(text);
                kept.push(Todo::Frame {
                    name: Some(g.name),
                    parent: Some(me),
                    value: g.value,
                    own: g.own,
                    places: g.places,
                    base_value: bg.as_ref().map_or(0, |b| b.value),
                    base_places: base
                        .as_ref()
                        .map(|_| bg.map_or_else(Vec::new, |b| b.places)),
                    state: st,
                    class: Some(cl),
                    zoom_depth: on_zoom,
                    scale: if on_zoom == Some(zoom.len()) {
                        g.value
                    } else {
                        scale
                    },
                });
            }
            if rest.0 > 0 {
                // After the kept children (pushed first: popped last).
                stack.push(Todo::Rest(Remainder {
                    parent: me,
                    level: state.level(),
                    count: rest.0,
                    value: rest.1,
                    base_value: rest.2,
                }));
            }
            stack.extend(kept.into_iter().rev());
        }
        (tree, base_values)
    }
}

/// The places of one child frame: its name, value, own weight.
struct Group {
    name: u32,
    value: u64,
    own: u64,
    places: Vec<Option<Pos>>,
}

/// A frame to write in [`PathRecord::merged`]'s preorder.
enum Todo {
    Frame {
        /// None: the root.
        name: Option<u32>,
        parent: Option<u32>,
        value: u64,
        own: u64,
        places: Vec<Option<Pos>>,
        base_places: Option<Vec<Option<Pos>>>,
        base_value: u64,
        /// The classifier after this frame, and its class (None: the root).
        state: StackClassifier,
        class: Option<chainrec_report::svg::FrameClass>,
        /// On the zoomed frame's path: how many of its names this frame's path matches.
        zoom_depth: Option<usize>,
        /// One pixel (times px) below this frame.
        scale: u64,
    },
    Rest(Remainder),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeBuilder;
    use chainrec_chain::{Analysis, Filter, Graph, Setup, View};
    use chainrec_format::{synth, TraceReader};
    use chainrec_testkit::scenario;
    use chainrec_testkit::scratch::ScratchDir;

    fn builder(g: &Graph<'_>) -> TreeBuilder {
        let mut b = TreeBuilder::default();
        g.for_each_path(|v| b.add_path(v));
        b
    }

    fn record(g: &Graph<'_>) -> PathRecord {
        let mut r = PathRecord::default();
        g.for_each_path(|v| r.add_path(v));
        r
    }

    /// The tree built top down from the recorded walk is the tree of every frame merged
    /// afterwards (`TreeBuilder::finish_merged`), frame for frame, with the same baseline
    /// values, on every synthetic scenario, in two views, at several widths, unzoomed and
    /// zoomed (on a frame the range has, and on one it has not).
    #[test]
    fn the_record_builds_the_merged_tree_of_every_frame() {
        let dir = ScratchDir::new("explore-merged");
        let (mut compared, mut merged) = (0, 0);
        for sc in &synth::scenarios() {
            let path = dir.file(&format!("{}.zst", sc.name));
            let m = scenario::generate(sc.name, 20_000);
            scenario::write(&path, sc.name, 20_000, 500, &m);
            let an = Analysis::from_reader(TraceReader::open(&path).unwrap());
            let half = Setup {
                filter: Filter {
                    window: Some(
                        an.window(&format!(
                            "0..{}",
                            crate::api::window_secs((an.end_ns() - an.start_ns()) / 2)
                        ))
                        .unwrap(),
                    ),
                    ..Filter::default()
                },
                ..Setup::default()
            };
            for view in [View::Chains, View::OffWake] {
                let (_, graph) = an.fold(Setup::default(), view, |_| {}).unwrap();
                let (_, base_graph) = an.fold(half.clone(), view, |_| {}).unwrap();
                // A frame two levels down, for the zoom.
                let full = builder(&graph).finish();
                let deep: Vec<String> = full
                    .nodes
                    .iter()
                    .position(|f| f.parent.is_some_and(|p| p != 0))
                    .map(|i| {
                        let p = full.nodes[i].parent.unwrap_or(0) as usize;
                        vec![full.nodes[p].name.clone(), full.nodes[i].name.clone()]
                    })
                    .unwrap_or_default();
                let missing = ["no such frame".to_string()];
                for px in [1, 7, 100, 1200] {
                    for zoom in [&[][..], &deep[..], &missing[..]] {
                        let pixels = Pixels { px, zoom };
                        let want =
                            builder(&graph).finish_merged(&pixels, Some(&builder(&base_graph)));
                        let got = record(&graph).merged(&pixels, Some(record(&base_graph)));
                        assert_eq!(got, want, "{} {view:?} px={px} zoom={zoom:?}", sc.name);
                        let alone = record(&graph).merged(&pixels, None);
                        assert_eq!(alone.0, want.0);
                        compared += 1;
                        merged += want.0.remainders;
                    }
                }
            }
        }
        assert!(
            merged > 100 && compared > 100,
            "{compared} trees, {merged} remainders"
        );
    }
}

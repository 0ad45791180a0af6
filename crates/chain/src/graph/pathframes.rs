//! Structured frames of the folded views: what each node of a path prints, frame by
//! frame, with its kind and chain level known from the node itself instead of being
//! re-parsed from the `--` and `-` separators of folded text. Folded text
//! ([`crate::FoldedSink::write_folded`]) is these frames joined by `;`; the SVG, pprof and
//! `top` read them directly ([`crate::FoldedSink::for_each_path`]).

use crate::engine::frames::{stack_frames, ONCPU_ESTIMATED, ONCPU_FRAME, ONCPU_NO_SAMPLE};
use crate::engine::nodes::{NodeId, NodeKind, NodeTable, MARK_LOST, RUNQ_FRAME};
use crate::graph::paths::COMM_BIT;
use crate::graph::trie::{PathTrie, NO_PARENT};
use chainrec_format::{Comm, StackId, Tables};
use std::collections::HashMap;

/// What a frame of a folded path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    /// A thread's name: the blocked thread at the root of a path, a waker at the top of
    /// its level, a target comm in the wakeup view.
    Thread,
    /// A user-space stack frame.
    User,
    /// A kernel stack frame (including a `[softirq: …]` frame a task ran itself, and the
    /// explanatory frames of stacks that were not taken, e.g. `[no stack: wait < 100us]`).
    Kernel,
    /// `--`: the start of a new chain level.
    LevelSeparator,
    /// `-`: between the user and the kernel part of a level.
    UserKernelSeparator,
    /// A metal label where a chain ends: `[hardirq: timer]`, `[softirq: NET_RX]`, `[idle]`.
    Metal,
    /// `[run queue]`: the level waited for a CPU.
    RunQueue,
    /// The thread that held the CPU during a `[run queue]` level (`[idle]`, `[unknown]`).
    RunQueueHolder,
    /// `[throttled: <cgroup>]`: the level was held off by CPU-quota throttling of that
    /// group (followed by what unthrottled it, a [`FrameKind::Metal`] frame).
    Throttled,
    /// A marker: `[truncated]`, `[cycle]`, `[waker unknown]`.
    Marker,
    /// `[lost events]`: events were lost inside the wait.
    Lost,
    /// `[on cpu]` or `[on cpu: estimated]` (followed by the sampled frames) or `[on cpu:
    /// no sample]`: the level's on-CPU time.
    OnCpu,
    /// Above the waiting thread (`--cgroup-frames`): `[cgroup: <path>]`, `[pod: <uid>]`,
    /// `[container: <id>]`.
    Group,
    /// `[earlier wait]` (followed by the waker's off-CPU stacks of that wait, root first)
    /// or `[blocked: not followed]`: a waker's blocked time inside the root's wait before
    /// the wait its chain follows (CHAINS.md, "Attribution").
    Blocked,
}

impl FrameKind {
    /// True for the two separators, which exist only to keep levels apart in folded text.
    pub fn is_separator(self) -> bool {
        matches!(
            self,
            FrameKind::LevelSeparator | FrameKind::UserKernelSeparator
        )
    }
}

/// One frame of a path: its text, kind and chain level (0 = the blocked thread; a
/// separator `--` belongs to the level it opens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathFrame<'a> {
    /// The frame as folded text prints it.
    pub name: &'a str,
    /// What it is.
    pub kind: FrameKind,
    /// Chain level.
    pub level: u32,
}

/// The frames of one node of a path, root side first, and whether the node opens a new
/// chain level.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFrames {
    /// `(text, kind)` root side first.
    pub frames: Vec<(String, FrameKind)>,
    /// The node starts a new level (a waker, a metal end, a run-queue level).
    pub new_level: bool,
    /// Its stack frames are written leaf first (a waker's level, a metal level's kernel
    /// frames), not root first (the blocked thread, `[on cpu]` samples). A function
    /// inlined at an address is a frame of its own, marked [`crate::INLINED_MARK`], on
    /// the leaf side of the function it is inlined into: after it when root first, before
    /// it when leaf first (pprof groups them into one location by this).
    pub leaf_first: bool,
}

/// Names the frames of nodes (caching each stack's frames). The one place that decides
/// how a node prints; folded text joins these frames with `;`.
pub struct FrameNamer<'a> {
    tables: &'a Tables,
    threshold: u64,
    cache: HashMap<StackId, Vec<String>>,
}

impl<'a> FrameNamer<'a> {
    /// A namer for a trace's tables; `threshold_ns` is the recording's lazy-stack threshold
    /// (`meta.stack_threshold_ns`), which names skipped stacks.
    pub fn new(tables: &'a Tables, threshold_ns: u64) -> Self {
        FrameNamer {
            tables,
            threshold: threshold_ns,
            cache: HashMap::new(),
        }
    }

    /// Frames of a stack, leaf first; reserved ids become one explanatory frame.
    fn stack(&mut self, id: StackId) -> &[String] {
        let (tables, threshold) = (self.tables, self.threshold);
        self.cache
            .entry(id)
            .or_insert_with(|| stack_frames(tables, id, threshold))
    }

    /// Stacks root first: user frames root to leaf, `-`, kernel frames root to leaf; the
    /// `-` only with kernel frames, or with any frame when `sep_with_user_only`.
    fn root_first(
        &mut self,
        k: StackId,
        u: StackId,
        sep_with_user_only: bool,
        f: &mut Vec<(String, FrameKind)>,
    ) {
        let user_only = !self.stack(u).is_empty();
        f.extend(
            self.stack(u)
                .iter()
                .rev()
                .map(|s| (s.clone(), FrameKind::User)),
        );
        let kernel = self.stack(k);
        if !kernel.is_empty() || (sep_with_user_only && user_only) {
            f.push(("-".into(), FrameKind::UserKernelSeparator));
            f.extend(kernel.iter().rev().map(|s| (s.clone(), FrameKind::Kernel)));
        }
    }

    /// The frames of node `id` of `nodes`; `first`: the node is the first of its path
    /// (the blocked thread, or the waker in the wakeup view), drawn root to leaf the
    /// other way round from a waker.
    pub fn node(&mut self, nodes: &NodeTable, id: NodeId, first: bool) -> NodeFrames {
        use FrameKind as K;
        let mut f: Vec<(String, FrameKind)> = Vec::new();
        let n = nodes.get(id);
        let new_level = !first && !matches!(n.kind, NodeKind::Marker(_) | NodeKind::Group { .. });
        match &n.kind {
            NodeKind::Marker(m) => {
                let kind = if id == MARK_LOST { K::Lost } else { K::Marker };
                f.push((m.to_string(), kind));
            }
            NodeKind::Group { frames } => {
                f.extend(frames.iter().map(|s| (s.clone(), K::Group)));
            }
            NodeKind::RunQueue { holder } => {
                if !first {
                    f.push(("--".into(), K::LevelSeparator));
                }
                if let crate::RunqHolder::Throttled { ended_by, .. } = holder {
                    f.push((holder.name().into_owned(), K::Throttled));
                    let kind = if *ended_by == crate::engine::nodes::UNTHROTTLED_BY_TIMER {
                        K::Metal
                    } else {
                        K::Marker
                    };
                    f.push(((*ended_by).to_string(), kind));
                } else {
                    f.push((RUNQ_FRAME.into(), K::RunQueue));
                    f.push((holder.name().into_owned(), K::RunQueueHolder));
                }
            }
            NodeKind::OnCpu { sampled, estimated } => {
                if !first {
                    f.push(("--".into(), K::LevelSeparator));
                }
                if *sampled {
                    // As a sample prints ([`crate::sample_frames`]): user frames root to
                    // leaf, then `-` and the kernel frames only when there are any.
                    let head = if *estimated {
                        ONCPU_ESTIMATED
                    } else {
                        ONCPU_FRAME
                    };
                    f.push((head.into(), K::OnCpu));
                    self.root_first(n.kstack, n.ustack, false, &mut f);
                } else {
                    f.push((ONCPU_NO_SAMPLE.into(), K::OnCpu));
                }
            }
            NodeKind::Blocked { followed } => {
                if !first {
                    f.push(("--".into(), K::LevelSeparator));
                }
                f.push((n.name().into_owned(), K::Blocked));
                if *followed {
                    // As the blocked thread at a root prints.
                    self.root_first(n.kstack, n.ustack, true, &mut f);
                }
            }
            NodeKind::Metal { label, .. } => {
                let kframes = n.kframes;
                let k = self.stack(n.kstack);
                let k = &k[..kframes.map_or(k.len(), |c| (c as usize).min(k.len()))];
                let kernel = |s: &String| (s.clone(), K::Kernel);
                if first {
                    f.push((label.clone(), K::Metal));
                    f.extend(k.iter().rev().map(kernel));
                } else {
                    f.push(("--".into(), K::LevelSeparator));
                    f.extend(k.iter().map(kernel));
                    f.push((label.clone(), K::Metal));
                }
            }
            NodeKind::Task { comm, .. } => {
                // Leaf first: the softirq frame, if any, then the stack.
                let mut k: Vec<(String, FrameKind)> = n
                    .leaf_frame
                    .iter()
                    .map(|s| (s.clone(), K::Kernel))
                    .collect();
                k.extend(self.stack(n.kstack).iter().map(|s| (s.clone(), K::Kernel)));
                let u: Vec<(String, FrameKind)> = self
                    .stack(n.ustack)
                    .iter()
                    .map(|s| (s.clone(), K::User))
                    .collect();
                let any = !k.is_empty() || !u.is_empty();
                let sep = || ("-".to_string(), K::UserKernelSeparator);
                let name = (comm.as_str().into_owned(), K::Thread);
                if first {
                    f.push(name);
                    f.extend(u.into_iter().rev());
                    if any {
                        f.push(sep());
                    }
                    f.extend(k.into_iter().rev());
                } else {
                    f.push(("--".into(), K::LevelSeparator));
                    f.extend(k);
                    if any {
                        f.push(sep());
                    }
                    f.extend(u);
                    f.push(name);
                }
            }
        }
        NodeFrames {
            frames: f,
            new_level,
            leaf_first: !first && matches!(n.kind, NodeKind::Task { .. } | NodeKind::Metal { .. }),
        }
    }
}

/// Whether trie entry `e` is the first node of its path's chain: the root of the trie, or
/// the thread below a group node (`--cgroup-frames`). A first node prints root to leaf.
pub(crate) fn first_of_path(
    trie: &PathTrie,
    nodes: &NodeTable,
    e: &crate::graph::trie::Entry,
) -> bool {
    if e.parent == NO_PARENT {
        return true;
    }
    let p = trie.get(e.parent);
    p.parent == NO_PARENT && first_at_depth(nodes, 1, p.node)
}

/// [`first_of_path`] of an entry at `depth` under the root node `root`, without a trie:
/// the root, or a child of a group root (`--cgroup-frames`, `--process-frames`).
#[inline]
pub(crate) fn first_at_depth(nodes: &NodeTable, depth: usize, root: NodeId) -> bool {
    depth == 0 || (depth == 1 && root & COMM_BIT == 0 && nodes.get(root).is_group())
}

/// One entry of the path trie as [`crate::FoldedSink::for_each_path`] visits it: a path
/// (root first), of which the first `shared` frames are its parent's path.
#[derive(Clone, Copy, Debug)]
pub struct PathVisit<'a> {
    /// The whole path, root first.
    pub frames: &'a [PathFrame<'a>],
    /// `frames[..shared]` is the parent's path (visited just before, or an ancestor's).
    pub shared: usize,
    /// Nanoseconds that end exactly at this path (0 for a path that only leads on).
    pub ns: u64,
    /// Nanoseconds of this path and every longer one below it.
    pub subtree_ns: u64,
    /// Frames of the paths below this one (each counted once per path: frames several
    /// paths share are counted for each), for callers that do not descend.
    pub below_frames: u64,
    /// Chain level of the path's last node.
    pub level: u32,
    /// Which frames this path adds (`frames[shared..]`, their names): two visits of one
    /// walk with the same `piece` add frames of the same names, so a caller may look their
    /// names up once per piece instead of once per visit. Meaningful within one walk only.
    pub piece: usize,
}

/// Walk the trie in depth-first order (children in insertion order); `f` returns whether
/// to descend into the children of the path it is given.
pub(crate) fn walk_paths(
    trie: &PathTrie,
    comms: &[Comm],
    nodes: &NodeTable,
    namer: &mut FrameNamer<'_>,
    mut f: impl FnMut(&PathVisit<'_>) -> bool,
) {
    let n = trie.len();
    // Pieces per (node, first), and comm nodes after them.
    let key = |node: NodeId, first: bool| -> usize {
        if node & COMM_BIT != 0 {
            2 * nodes.len() + (node & !COMM_BIT) as usize
        } else {
            2 * node as usize + first as usize
        }
    };
    let mut pieces: Vec<Option<NodeFrames>> = vec![None; 2 * nodes.len() + comms.len()];
    for e in trie.iter() {
        let first = first_of_path(trie, nodes, &e);
        let k = key(e.node, first);
        if pieces[k].is_none() {
            pieces[k] = Some(if e.node & COMM_BIT != 0 {
                NodeFrames {
                    frames: vec![(
                        comms[(e.node & !COMM_BIT) as usize].as_str().into_owned(),
                        FrameKind::Thread,
                    )],
                    new_level: false,
                    leaf_first: false,
                }
            } else {
                namer.node(nodes, e.node, first)
            });
        }
    }
    // Subtree totals, frames below and children lists (children have larger ids).
    let mut subtree: Vec<u64> = trie.iter().map(|e| e.weight).collect();
    let mut below = vec![0u64; n];
    let frames_of = |id: u32| {
        let e = trie.get(id);
        pieces[key(e.node, first_of_path(trie, nodes, &e))]
            .as_ref()
            .map_or(0, |p| p.frames.len() as u64)
    };
    for i in (0..n).rev() {
        let p = trie.get(i as u32).parent;
        if p != NO_PARENT {
            subtree[p as usize] += subtree[i];
            below[p as usize] += below[i] + frames_of(i as u32);
        }
    }
    let order = crate::graph::trie::preorder(trie);
    // Subtree sizes in entries, to skip a subtree in preorder.
    let mut size = vec![1u32; n];
    for i in (0..n).rev() {
        let p = trie.get(i as u32).parent;
        if p != NO_PARENT {
            size[p as usize] += size[i];
        }
    }
    let mut frames: Vec<PathFrame<'_>> = Vec::new();
    // The path being walked: (entry, frames length before its piece, level).
    let mut stack: Vec<(u32, usize, u32)> = Vec::new();
    let mut k = 0;
    while k < n {
        let id = order[k];
        let e = trie.get(id);
        while let Some(&(top, len, _)) = stack.last() {
            if top == e.parent {
                break;
            }
            frames.truncate(len);
            stack.pop();
        }
        let piece_key = key(e.node, first_of_path(trie, nodes, &e));
        let piece = pieces[piece_key].as_ref().expect("piece of every entry");
        let level = match stack.last() {
            None => 0,
            Some(&(_, _, l)) => l + piece.new_level as u32,
        };
        let shared = frames.len();
        frames.extend(piece.frames.iter().map(|(s, k)| PathFrame {
            name: s.as_str(),
            kind: *k,
            level,
        }));
        let descend = f(&PathVisit {
            frames: &frames,
            shared,
            ns: e.weight,
            subtree_ns: subtree[id as usize],
            below_frames: below[id as usize],
            level,
            piece: piece_key,
        });
        stack.push((id, shared, level));
        k += if descend {
            1
        } else {
            size[id as usize] as usize
        };
    }
}

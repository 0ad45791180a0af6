//! The thread-level wakeups of Go processes' threads (their Ms), for goroutine chains to
//! join a netpoll ready to the kernel chain behind it (docs/ENGINE.md "Goroutine chains",
//! session 25): a [`WaitSink`] that keeps, per thread of a Go process, each blocked wait
//! with its first level (the waker, rendered as the thread chains print it) and whether
//! the thread slept in `epoll_wait` (the runtime's blocking netpoll) there.

use crate::engine::nodes::{NodeId, NodeKind, NodeTable};
use crate::engine::record::{WaitRecord, WaitSink};
use crate::graph::pathframes::FrameNamer;
use chainrec_format::{StackId, Tables, Tid};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::Arc;

/// The frame a task hop or a metal level has when the network's receive softirq woke the
/// thread (loopback: the writer ran it itself; CHAINS.md "softirq").
pub const NET_RX: &str = "[softirq: NET_RX]";

/// Where a thread slept, as far as its wait says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sleep {
    /// In `epoll_wait` (its kernel stack, or, without one, a wakeup by the network's
    /// receive softirq: a Go M sleeps in a futex or in `epoll_wait`, and only the latter
    /// is woken by a socket).
    Epoll,
    /// Elsewhere (a futex: the M was idle or spinning, not polling).
    Other,
}

/// One blocked wait of a Go process's thread.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadWake {
    /// Switch-out (the thread blocked).
    pub switch_out: u64,
    /// Switch-in (the thread ran again).
    pub switch_in: u64,
    /// The waking that ended it.
    pub wake: u64,
    /// Where it slept.
    pub sleep: Sleep,
    /// The waker's level as a thread chain prints it, leaf first, without the `--` that
    /// opens it: `[softirq: NET_RX];try_to_wake_up;…;-;syscall.write;…;comm` (shared by
    /// the waits of one waker node).
    pub level: Arc<str>,
    /// The waker thread and its process (0: metal or unknown).
    pub waker_tid: Tid,
    /// The waker's process.
    pub waker_tgid: Tid,
    /// The waker goroutine's entry function (the frame above `runtime.goexit` of its user
    /// stack), when the waker is a Go thread whose user stack was taken.
    pub entry: Option<Arc<str>>,
}

/// The blocked waits of the threads of Go processes, by thread, in switch-in order.
#[derive(Clone, Debug, Default)]
pub struct GoThreadWakes {
    by_tid: FxHashMap<Tid, Vec<ThreadWake>>,
}

impl GoThreadWakes {
    /// Add a wait of `tid` (tests build the index by hand; the sink adds in emission
    /// order, which [`Self::finish`] sorts).
    pub fn push(&mut self, tid: Tid, w: ThreadWake) {
        self.by_tid.entry(tid).or_default().push(w);
    }

    /// Sort each thread's waits by switch-in.
    pub fn finish(&mut self) {
        for v in self.by_tid.values_mut() {
            v.sort_by_key(|w| w.switch_in);
        }
    }

    /// The last blocked wait of `tid` that it had left by `ts` (switch-in ≤ `ts`): what
    /// the thread last slept in before it ran code at `ts`.
    pub fn last_before(&self, tid: Tid, ts: u64) -> Option<&ThreadWake> {
        let v = self.by_tid.get(&tid)?;
        let i = v.partition_point(|w| w.switch_in <= ts);
        i.checked_sub(1).map(|i| &v[i])
    }

    /// Whether `tid` blocked (a kept wait began) inside `(from, to)`.
    pub fn blocked_between(&self, tid: Tid, from: u64, to: u64) -> bool {
        self.by_tid.get(&tid).is_some_and(|v| {
            // Sorted by switch-in, and a thread's waits do not overlap: also by switch-out.
            let i = v.partition_point(|w| w.switch_out <= from);
            v.get(i).is_some_and(|w| w.switch_out < to)
        })
    }

    /// Number of waits kept.
    pub fn len(&self) -> usize {
        self.by_tid.values().map(Vec::len).sum()
    }

    /// True when no wait is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Collects [`GoThreadWakes`] from an engine run (any depth: only the first level is kept).
pub struct GoThreadSink<'a> {
    tables: &'a Tables,
    namer: FrameNamer<'a>,
    threshold_ns: u64,
    go: FxHashSet<Tid>,
    /// Levels by waker node, entry functions by user stack: rendered once.
    levels: FxHashMap<NodeId, Arc<str>>,
    entries: FxHashMap<StackId, Option<Arc<str>>>,
    /// What it collected.
    pub wakes: GoThreadWakes,
}

impl<'a> GoThreadSink<'a> {
    /// A sink for the Go processes of `tables`' goroutine records; `threshold_ns` names
    /// skipped stacks (`meta.stack_threshold_ns`).
    pub fn new(tables: &'a Tables, threshold_ns: u64) -> Self {
        GoThreadSink {
            tables,
            namer: FrameNamer::new(tables, threshold_ns),
            threshold_ns,
            go: tables.goroutines.processes().map(|p| p.tgid).collect(),
            levels: FxHashMap::default(),
            entries: FxHashMap::default(),
            wakes: GoThreadWakes::default(),
        }
    }

    /// The index, sorted.
    pub fn into_wakes(mut self) -> GoThreadWakes {
        self.wakes.finish();
        self.wakes
    }

    fn frames(&self, s: StackId) -> Vec<String> {
        crate::engine::frames::stack_frames(self.tables, s, self.threshold_ns)
    }
}

impl WaitSink for GoThreadSink<'_> {
    fn on_wait(&mut self, w: &WaitRecord, nodes: &NodeTable) {
        if !self.go.contains(&w.tgid) || w.preempted() {
            return;
        }
        let (Some(switch_in), Some(wake), Some(hop)) = (w.switch_in_ns, w.wake_ns, w.hops.first())
        else {
            return;
        };
        let node = nodes.get(hop.node);
        let net_rx = match &node.kind {
            NodeKind::Metal { label, .. } => label == NET_RX,
            _ => node.leaf_frame.as_deref() == Some(NET_RX),
        };
        let k = self.frames(w.kstack);
        // Without a kernel stack (a wait shorter than the lazy-stack threshold), a wakeup by
        // the network says epoll: a Go M sleeps in a futex or in epoll_wait.
        let epoll = k.iter().any(|f| f == "do_epoll_wait" || f == "ep_poll")
            || (!w.kstack.is_real() && net_rx);
        let sleep = if epoll { Sleep::Epoll } else { Sleep::Other };
        let level = match self.levels.get(&hop.node) {
            Some(l) => l.clone(),
            None => {
                let nf = self.namer.node(nodes, hop.node, false);
                let l: Arc<str> = nf
                    .frames
                    .iter()
                    .map(|(s, _)| s.as_str())
                    .skip_while(|s| *s == "--")
                    .collect::<Vec<_>>()
                    .join(";")
                    .into();
                self.levels.insert(hop.node, l.clone());
                l
            }
        };
        let entry = match hop.metal {
            true => None,
            false => match self.entries.get(&hop.ustack) {
                Some(e) => e.clone(),
                None => {
                    let e = goroutine_entry(&self.frames(hop.ustack)).map(Arc::from);
                    self.entries.insert(hop.ustack, e.clone());
                    e
                }
            },
        };
        self.wakes.push(
            w.tid,
            ThreadWake {
                switch_out: w.switch_out_ns,
                switch_in,
                wake,
                sleep,
                level,
                waker_tid: if hop.metal { 0 } else { hop.waker_tid },
                waker_tgid: if hop.metal { 0 } else { hop.waker_tgid },
                entry,
            },
        );
    }
}

/// A goroutine's entry function in a stack leaf first: the frame just above
/// `runtime.goexit` (a goroutine's stack starts there).
pub fn goroutine_entry(leaf_first: &[String]) -> Option<String> {
    let i = leaf_first.iter().position(|f| f == "runtime.goexit")?;
    i.checked_sub(1).map(|j| leaf_first[j].clone())
}

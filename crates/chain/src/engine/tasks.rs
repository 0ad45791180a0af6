//! Threads: their state in the walk (open and held waits, last cause) and the index by tid.

use crate::engine::dedup::NO_SLOT;
use crate::engine::hops::NO_HOP;
use crate::engine::mode::Mode;
use crate::engine::nodes::IdentId;
use crate::engine::record::Rec;
use crate::fx::FxHashMap;
use chainrec_format::{Comm, StackId, Tid};

/// Tids below this are indexed directly (Linux's PID_MAX_LIMIT is 2^22).
const DIRECT_TIDS: usize = 1 << 22;

/// Thread index by tid: direct for tids below [`DIRECT_TIDS`] (index + 1, 0 = none),
/// hashed above (tids on Linux stay below 2^22, but a trace is untrusted input).
#[derive(Debug, Default)]
pub(crate) struct TaskIndex {
    direct: Vec<u32>,
    hashed: FxHashMap<Tid, u32>,
}

impl TaskIndex {
    /// The task slot of `tid`.
    #[inline]
    pub(crate) fn find(&self, tid: Tid) -> Option<usize> {
        if (tid as usize) < DIRECT_TIDS {
            match self.direct.get(tid as usize) {
                Some(&i) if i != 0 => Some(i as usize - 1),
                _ => None,
            }
        } else {
            self.hashed.get(&tid).map(|&i| i as usize)
        }
    }

    /// `tid` is in task slot `i`.
    #[inline]
    pub(crate) fn insert(&mut self, tid: Tid, i: usize) {
        if (tid as usize) < DIRECT_TIDS {
            if self.direct.len() <= tid as usize {
                // Grow through a zeroed allocation (calloc: large ones come as untouched
                // zero pages), not `resize`, which would write every new slot: a single
                // tid near 2^22 must not make 16 MB resident.
                let mut grown = vec![0u32; (tid as usize + 1).next_power_of_two()];
                grown[..self.direct.len()].copy_from_slice(&self.direct);
                self.direct = grown;
            }
            self.direct[tid as usize] = i as u32 + 1;
        } else {
            self.hashed.insert(tid, i as u32);
        }
    }

    /// `tid` is gone.
    #[inline]
    pub(crate) fn remove(&mut self, tid: Tid) {
        if (tid as usize) < DIRECT_TIDS {
            self.direct[tid as usize] = 0;
        } else {
            self.hashed.remove(&tid);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    Unknown,
    Running,
    Off,
}

#[derive(Debug)]
pub(crate) struct Task {
    pub(crate) tid: Tid,
    pub(crate) comm: Comm,
    pub(crate) tgid: Tid,
    pub(crate) ident: IdentId,
    pub(crate) kthread: bool,
    pub(crate) exited: bool,
    pub(crate) status: Status,
    /// Boxed (as `held`): the switch-in hand-over open -> held and the parking of a held
    /// record in a dedup slot are pointer swaps, and the task itself stays small.
    pub(crate) open: Box<Rec>,
    pub(crate) open_hop: u32,
    pub(crate) open_slot: u32,
    pub(crate) open_lost: u64,
    pub(crate) open_pretrace: bool,
    pub(crate) held: Box<Rec>,
    pub(crate) held_valid: bool,
    pub(crate) held_hop: u32,
    pub(crate) held_slot: u32,
    pub(crate) last_cause: u32,
    pub(crate) last_cause_s: u64,
    /// The hop of the last waking that targeted this thread while it ran (since its last
    /// switch-in): a waking racing its block. Used when the blocked wait that follows is
    /// switched in with no waking of its own (see `Engine::woken_before_block`).
    pub(crate) racing_hop: u32,
}

impl Task {
    /// A thread first seen now, with no wait open.
    #[inline]
    pub(crate) fn new(tid: Tid, comm: Comm, tgid: Tid, ident: IdentId, kthread: bool) -> Self {
        Task {
            tid,
            comm,
            tgid,
            ident,
            kthread,
            exited: false,
            status: Status::Unknown,
            open: Box::default(),
            open_hop: NO_HOP,
            open_slot: NO_SLOT,
            open_lost: 0,
            open_pretrace: false,
            held: Box::default(),
            held_valid: false,
            held_hop: NO_HOP,
            held_slot: NO_SLOT,
            last_cause: NO_HOP,
            last_cause_s: 0,
            racing_hop: NO_HOP,
        }
    }

    /// Open a wait: the thread is off-CPU from `ts`, in `state`, with these stacks.
    #[inline]
    pub(crate) fn open_wait(
        &mut self,
        ts: u64,
        state: u32,
        k: StackId,
        u: StackId,
        lost_seq: u64,
        mode: Mode,
    ) {
        self.status = Status::Off;
        let o = &mut self.open;
        o.tid = self.tid;
        o.comm = self.comm;
        o.tgid = self.tgid;
        o.ident = self.ident;
        o.kernel_thread = self.kthread;
        o.state = state;
        o.switch_out_ns = ts;
        o.wake_ns = None;
        o.switch_in_ns = None;
        o.kstack = k;
        o.ustack = u;
        o.hops.clear();
        o.runq.clear();
        o.oncpu_raw.clear();
        o.truncated = false;
        o.cycle = false;
        o.lost = false;
        o.root = true;
        o.mode = mode;
        self.open_hop = NO_HOP;
        self.open_lost = lost_seq;
        self.open_pretrace = false;
    }
}

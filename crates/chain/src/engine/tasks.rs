//! Threads: their state in the walk (open and held waits, last cause) and the index by tid.

use crate::engine::ids::{HopId, SlotId};
use crate::engine::mode::Mode;
use crate::engine::nodes::IdentId;
use crate::engine::record::Rec;
use chainrec_format::{Comm, StackId, Tid};
use rustc_hash::FxHashMap;

/// Tids below this are indexed directly (Linux's PID_MAX_LIMIT is 2^22).
const DIRECT_TIDS: usize = 1 << 22;

/// Thread index by tid: direct for tids below [`DIRECT_TIDS`] (index + 1, 0 = none),
/// hashed above (tids on Linux stay below 2^22, but a trace is untrusted input).
#[derive(Clone, Debug, Default)]
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

/// Where a thread is, as far as the trace has shown.
/// Capacity a reused record keeps: its thread's next wait rarely needs more, and every
/// thread keeps two records, so one wait with a wide wakeup DAG (hundreds of levels and
/// windows) must not pin its size for the thread's life (busy-server: ~40 MB of the
/// 20 M-event fold's peak was such capacity).
const KEEP_HOPS: usize = 32;
const KEEP_PARTS: usize = 64;

/// Empty `v`, giving back its room beyond `keep`.
#[inline]
fn clear_keeping<T>(v: &mut Vec<T>, keep: usize) {
    v.clear();
    if v.capacity() > keep {
        v.shrink_to(keep);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// Not seen switch in or out yet (or its state was reset).
    Unknown,
    Running,
    /// Off-CPU with a wait open. `pretrace`: first seen in a waking, assumed blocked since
    /// the trace start; such a wait is a cause for its wakees but never a record.
    Off {
        pretrace: bool,
    },
}

impl Status {
    /// Off-CPU with a wait open, whether traced or assumed from before the trace.
    #[inline]
    pub(crate) fn is_off(self) -> bool {
        matches!(self, Status::Off { .. })
    }

    /// Off-CPU with a wait assumed from before the trace.
    #[inline]
    pub(crate) fn is_pretrace(self) -> bool {
        self == Status::Off { pretrace: true }
    }

    /// Off-CPU with a wait whose switch-out was traced (a wait that becomes a record).
    #[inline]
    pub(crate) fn is_traced_wait(self) -> bool {
        self == Status::Off { pretrace: false }
    }
}

/// The dedup decision slot of a task's open or held wait.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum WaitSlot {
    /// No decision pending (dedup off, not a selected wait, or not woken).
    #[default]
    None,
    /// Dedup applies but its chain marked nothing: a slot only if the wait must wait.
    Lazy,
    /// Waiting in this slot of [`crate::engine::dedup::Slots`].
    At(SlotId),
}

/// What a task's open or held wait refers to besides its record: the hop that ended it
/// (none: not woken, or not yet) and its dedup slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitRefs {
    pub(crate) hop: Option<HopId>,
    pub(crate) slot: WaitSlot,
}

#[derive(Clone, Debug)]
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
    /// Meaningful while `status` is `Off`.
    pub(crate) open_refs: WaitRefs,
    pub(crate) open_lost: u64,
    /// The wait switched in and not yet final (`None`: `held` is only a spare record).
    pub(crate) held: Box<Rec>,
    pub(crate) held_refs: Option<WaitRefs>,
    /// The hop that ended this thread's last blocked wait (the cause of its wakings).
    pub(crate) last_cause: Option<HopId>,
    pub(crate) last_cause_s: u64,
    /// The hop of the last waking that targeted this thread while it ran (since its last
    /// switch-in): a waking racing its block. Used when the blocked wait that follows is
    /// switched in with no waking of its own (see `Engine::woken_before_block`).
    pub(crate) racing_hop: Option<HopId>,
}

// The typed state costs no memory: `Option<HopId>` is a u32 and `WaitSlot`'s tag leaves a
// niche for `Option<WaitRefs>`: 96 bytes, as with the raw u32s, sentinels and bools before.
const _: () = assert!(std::mem::size_of::<Task>() == 96);

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
            open_refs: WaitRefs::default(),
            open_lost: 0,
            held: Box::default(),
            held_refs: None,
            last_cause: None,
            last_cause_s: 0,
            racing_hop: None,
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
        self.status = Status::Off { pretrace: false };
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
        clear_keeping(&mut o.hops, KEEP_HOPS);
        clear_keeping(&mut o.runq, KEEP_PARTS);
        clear_keeping(&mut o.oncpu_raw, KEEP_PARTS);
        clear_keeping(&mut o.extra_windows, KEEP_PARTS);
        o.truncated = false;
        o.cycle = false;
        o.lost = false;
        o.root = true;
        o.mode = mode;
        self.open_refs.hop = None;
        self.open_lost = lost_seq;
    }

    /// The open (traced) wait becomes the held one, switched in at `switch_in_ns` (`None`:
    /// the trace ended with its blocked part complete): the records swap (a pointer swap),
    /// its hop and slot move along, and no wait is open (the caller sets the status).
    #[inline]
    pub(crate) fn hand_over(&mut self, switch_in_ns: Option<u64>, lost_seq: u64) {
        debug_assert!(self.status.is_traced_wait() && self.held_refs.is_none());
        std::mem::swap(&mut self.open, &mut self.held);
        self.held.switch_in_ns = switch_in_ns;
        self.held.lost |= self.open_lost != lost_seq;
        self.held_refs = Some(std::mem::take(&mut self.open_refs));
        self.status = Status::Unknown;
    }
}

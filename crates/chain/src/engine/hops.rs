//! Hops: one per waking that ended a wait, linked to their causes, in an arena.

use crate::engine::nodes::{IdentId, NodeTable};
use crate::engine::record::HopRecord;
use chainrec_format::{Comm, StackId, Tid, WakeContext};
use std::num::NonZeroU32;

pub(crate) const NO_HOP: u32 = u32::MAX;

/// Index of a hop in the engine's arena, as held by a task. Stored as its bitwise
/// complement in a `NonZeroU32`, so that `Option<HopId>` is one u32 whose `None` is
/// [`NO_HOP`]'s bit pattern (an arena of 2^32 - 1 hops of 64 bytes is out of reach).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HopId(NonZeroU32);

impl HopId {
    #[inline]
    pub(crate) fn new(index: u32) -> HopId {
        debug_assert!(index < CUT);
        HopId(NonZeroU32::new(!index).unwrap_or(NonZeroU32::MIN))
    }

    /// The arena index.
    #[inline]
    pub(crate) fn get(self) -> u32 {
        !self.0.get()
    }

    /// The arena index, or [`NO_HOP`], for the arena's own links.
    #[inline]
    pub(crate) fn raw(id: Option<HopId>) -> u32 {
        id.map_or(NO_HOP, HopId::get)
    }
}
/// The cause existed but was garbage-collected (only ever beyond the depth limit).
pub(crate) const CUT: u32 = u32::MAX - 1;

/// One cache line per hop (the arena is larger than L2; a hop straddling two lines
/// cost two misses on write and walk). GC marks live apart, in the engine's `marks`.
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
pub(crate) struct Hop {
    pub(crate) ts: u64,
    /// Time of the cause (the waking that ended the waker's last blocked interval).
    pub(crate) cause_ts: u64,
    /// Start of the waker's blocked interval that the cause ended.
    pub(crate) cause_s: u64,
    pub(crate) cause: u32,
    pub(crate) node: u32,
    pub(crate) waker_tid: Tid,
    /// Waker identity (comm, tgid); `IdentId::MAX` for metal hops.
    pub(crate) waker_ident: IdentId,
    pub(crate) kstack: StackId,
    pub(crate) ustack: StackId,
    pub(crate) context: WakeContext,
    pub(crate) metal: bool,
    /// Some emitted root chain used this hop as an inner hop (dedup: hide its wait).
    pub(crate) hidden: bool,
    /// Chains that used this hop as an inner hop and are not yet decided.
    pub(crate) pending_markers: u32,
    /// Pending-decision slot of the wait this hop ended (NO_SLOT if none).
    pub(crate) wait_slot: u32,
}

/// GC mark of a hop: the epoch it was last marked in, and the depth left at that mark.
/// Kept apart from the hops so that the sweep reads 8 bytes per hop, not a cache line.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Mark {
    pub(crate) epoch: u32,
    pub(crate) rem: u8,
}

impl Hop {
    /// The hop as a record (`ns` and `windows` left empty for the walk to fill in).
    #[inline]
    pub(crate) fn record(&self, nodes: &NodeTable) -> HopRecord {
        let (waker_comm, waker_tgid) = if self.waker_ident == IdentId::MAX {
            (Comm::default(), 0)
        } else {
            nodes.ident_of(self.waker_ident)
        };
        HopRecord {
            ts: self.ts,
            waker_tid: self.waker_tid,
            waker_tgid,
            waker_comm,
            context: self.context,
            metal: self.metal,
            kstack: self.kstack,
            ustack: self.ustack,
            node: self.node,
            ns: 0,
            windows: [(0, 0); 2],
        }
    }
}

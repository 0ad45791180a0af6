//! Hops: one per waking that ended a wait, linked to their causes, in an arena.

use crate::engine::ids::{HopId, SlotId};
use crate::engine::nodes::{IdentId, NodeTable};
use crate::engine::record::HopRecord;
use chainrec_format::{Comm, StackId, Tid, WakeContext};

/// Where the chain goes on below a hop: what ended its waker's last blocked interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cause {
    /// None known: a metal hop, or a waker not seen woken in the trace. The chain ends.
    None,
    /// The cause existed but was garbage-collected (only ever beyond the depth limit):
    /// the chain is truncated here.
    Cut,
    /// That hop.
    Hop(HopId),
}

/// A [`Cause`] packed in one u32 (the hop is one cache line; a tagged enum would take 8
/// bytes): a hop id's bits, or 0 (none) or 1 (cut), which no id uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CauseLink(u32);

impl CauseLink {
    pub(crate) const NONE: CauseLink = CauseLink(0);
    pub(crate) const CUT: CauseLink = CauseLink(1);

    #[inline]
    pub(crate) fn hop(id: HopId) -> CauseLink {
        CauseLink(id.bits())
    }

    #[inline]
    pub(crate) fn get(self) -> Cause {
        match self.0 {
            0 => Cause::None,
            1 => Cause::Cut,
            bits => HopId::from_bits(bits).map_or(Cause::None, Cause::Hop),
        }
    }

    /// The cause hop, if it is still in the arena.
    #[inline]
    pub(crate) fn hop_id(self) -> Option<HopId> {
        HopId::from_bits(self.0)
    }
}

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
    pub(crate) cause: CauseLink,
    pub(crate) node: u32,
    pub(crate) waker_tid: Tid,
    /// Waker identity (comm, tgid); [`Hop::METAL`] for a metal hop (an interrupt, or the
    /// idle task), which is what makes it one.
    pub(crate) waker_ident: IdentId,
    pub(crate) kstack: StackId,
    pub(crate) ustack: StackId,
    pub(crate) context: WakeContext,
    /// Some emitted root chain used this hop as an inner hop (dedup: hide its wait).
    pub(crate) hidden: bool,
    /// Chains that used this hop as an inner hop and are not yet decided.
    pub(crate) pending_markers: u32,
    /// Pending-decision slot of the wait this hop ended, if any.
    pub(crate) wait_slot: Option<SlotId>,
}

// Typed links cost nothing: one cache line, as with the raw u32 links and sentinels.
const _: () = assert!(std::mem::size_of::<Hop>() == 64 && std::mem::align_of::<Hop>() == 64);

/// GC mark of a hop: the epoch it was last marked in, and the depth left at that mark.
/// Kept apart from the hops so that the sweep reads 8 bytes per hop, not a cache line.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Mark {
    pub(crate) epoch: u32,
    pub(crate) rem: u8,
}

impl Hop {
    /// The waker identity of a metal hop: no interned identity (one per distinct comm and
    /// tgid) reaches it. It replaces a `metal` flag, which let a metal hop have an identity.
    pub(crate) const METAL: IdentId = IdentId::MAX;

    /// Woken by hardware (or the idle task), not by a thread: the chain ends here.
    #[inline]
    pub(crate) fn metal(&self) -> bool {
        self.waker_ident == Hop::METAL
    }

    /// The hop as a record (`ns` and `windows` left empty for the walk to fill in).
    #[inline]
    pub(crate) fn record(&self, nodes: &NodeTable) -> HopRecord {
        let (waker_comm, waker_tgid) = if self.metal() {
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
            metal: self.metal(),
            kstack: self.kstack,
            ustack: self.ustack,
            node: self.node,
            ns: 0,
            windows: [(0, 0); 2],
            parent: 0,
            kind: crate::engine::record::LevelKind::Waker,
            waits: 0,
        }
    }
}

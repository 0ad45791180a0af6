//! Subchain dedup (CHAINS.md): a wait whose ending waking is an inner hop of an emitted
//! root chain is not a root. Its record waits in a slot until every chain that used its
//! ending hop is decided.

use crate::engine::hops::Hop;
use crate::engine::ids::{HopId, SlotId};
use crate::engine::record::{Rec, WaitRecord};

/// Where a slot's wait is in its decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SlotState {
    /// Free (on the free list); the other fields are stale.
    #[default]
    Free,
    /// Its wait is not final yet (the record is still the task's).
    Waiting,
    /// Its record is parked here, final: emitted (or not, as a root) once decided.
    Ready,
    /// Its wait was dropped (never emitted): only its chain's markers are to release.
    Discarded,
}

/// A wait whose chain marked inner hops (dedup on): its record, once ready, is emitted
/// when every chain that used its own ending hop is decided.
#[derive(Clone, Debug)]
pub(crate) struct Slot {
    pub(crate) state: SlotState,
    pub(crate) hop: HopId,
    pub(crate) inner: Vec<HopId>,
    /// Boxed: parking a task's held record here is a pointer swap.
    pub(crate) rec: Box<Rec>,
}

// Same size as with the raw hop index and the three bools (occupied, ready, discard) before.
const _: () = assert!(std::mem::size_of::<Slot>() == 40);

/// The pending-decision slots.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slots {
    slots: Vec<Slot>,
    free_slots: Vec<SlotId>,
    work: Vec<SlotId>,
    /// Occupied slots.
    pub(crate) pending: usize,
}

impl Slots {
    #[inline]
    pub(crate) fn get(&self, s: SlotId) -> &Slot {
        &self.slots[s.index()]
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, s: SlotId) -> &mut Slot {
        &mut self.slots[s.index()]
    }

    /// Every slot ever allocated, free or not.
    #[inline]
    pub(crate) fn ids(&self) -> impl Iterator<Item = SlotId> {
        (0..self.slots.len()).map(SlotId::at)
    }

    /// The occupied slots (waiting or ready).
    pub(crate) fn occupied(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.slots.iter().filter(|sl| sl.state != SlotState::Free)
    }

    /// A slot for the wait ended by `hop`, whose chain marked the hops in `inner_buf`
    /// (taken, left empty).
    #[inline]
    pub(crate) fn alloc(&mut self, hop: HopId, inner_buf: &mut Vec<HopId>) -> SlotId {
        let s = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    state: SlotState::Free,
                    hop,
                    inner: Vec::new(),
                    rec: Box::default(),
                });
                SlotId::at(self.slots.len() - 1)
            }
        };
        self.pending += 1;
        let slot = &mut self.slots[s.index()];
        slot.state = SlotState::Waiting;
        slot.hop = hop;
        std::mem::swap(&mut slot.inner, inner_buf);
        inner_buf.clear();
        s
    }

    /// Decide ready slots whose ending hop is settled (hidden by an emitted root chain,
    /// or no undecided chain uses it), cascading to the waits their chains used. `emit` filters, counts
    /// and passes a record on; true when it was emitted.
    pub(crate) fn decide(
        &mut self,
        first: SlotId,
        hops: &mut [Hop],
        mut emit: impl FnMut(&mut WaitRecord) -> bool,
    ) {
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.push(first);
        while let Some(s) = work.pop() {
            let sl = &self.slots[s.index()];
            let discard = match sl.state {
                SlotState::Free | SlotState::Waiting => continue,
                SlotState::Ready => false,
                SlotState::Discarded => true,
            };
            let hop = &hops[sl.hop.index()];
            let root = if discard || hop.hidden {
                false
            } else if hop.pending_markers == 0 {
                true
            } else {
                continue;
            };
            let sl = &mut self.slots[s.index()];
            sl.rec.root = root;
            let emitted = !discard && emit(&mut sl.rec);
            let counts = root && emitted;
            sl.state = SlotState::Free;
            let own = sl.hop;
            let inner = std::mem::take(&mut sl.inner);
            hops[own.index()].wait_slot = None;
            for &ih in &inner {
                let h = &mut hops[ih.index()];
                h.hidden |= counts;
                h.pending_markers = h.pending_markers.saturating_sub(1);
                if let Some(ws) = h.wait_slot {
                    if h.hidden || h.pending_markers == 0 {
                        work.push(ws);
                    }
                }
            }
            let sl = &mut self.slots[s.index()];
            sl.inner = inner;
            sl.inner.clear();
            self.free_slots.push(s);
            self.pending -= 1;
        }
        self.work = work;
    }
}

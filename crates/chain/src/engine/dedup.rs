//! Subchain dedup (CHAINS.md): a wait whose ending waking is an inner hop of an emitted
//! root chain is not a root. Its record waits in a slot until every chain that used its
//! ending hop is decided.

use crate::engine::hops::Hop;
use crate::engine::record::{Rec, WaitRecord};

/// No pending-decision slot.
pub(crate) const NO_SLOT: u32 = u32::MAX;

/// A wait whose chain marked inner hops (dedup on): its record, once ready, is emitted
/// when every chain that used its own ending hop is decided.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    pub(crate) occupied: bool,
    pub(crate) ready: bool,
    pub(crate) discard: bool,
    pub(crate) hop: u32,
    pub(crate) inner: Vec<u32>,
    /// Boxed: parking a task's held record here is a pointer swap.
    pub(crate) rec: Box<Rec>,
}

/// The pending-decision slots.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    pub(crate) slots: Vec<Slot>,
    free_slots: Vec<u32>,
    work: Vec<u32>,
    /// Occupied slots.
    pub(crate) pending: usize,
}

impl Slots {
    /// A slot for the wait ended by `hop`, whose chain marked the hops in `inner_buf`
    /// (taken, left empty).
    #[inline]
    pub(crate) fn alloc(&mut self, hop: u32, inner_buf: &mut Vec<u32>) -> u32 {
        let s = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot::default());
                (self.slots.len() - 1) as u32
            }
        };
        self.pending += 1;
        let slot = &mut self.slots[s as usize];
        slot.occupied = true;
        slot.ready = false;
        slot.discard = false;
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
        first: u32,
        hops: &mut [Hop],
        mut emit: impl FnMut(&mut WaitRecord) -> bool,
    ) {
        let mut work = std::mem::take(&mut self.work);
        work.clear();
        work.push(first);
        while let Some(s) = work.pop() {
            let sl = &self.slots[s as usize];
            if !sl.occupied || !sl.ready {
                continue;
            }
            let hop = &hops[sl.hop as usize];
            let root = if sl.discard || hop.hidden {
                false
            } else if hop.pending_markers == 0 {
                true
            } else {
                continue;
            };
            let sl = &mut self.slots[s as usize];
            sl.rec.root = root;
            let emitted = !sl.discard && emit(&mut sl.rec);
            let counts = root && emitted;
            sl.occupied = false;
            let own = sl.hop;
            let inner = std::mem::take(&mut sl.inner);
            hops[own as usize].wait_slot = NO_SLOT;
            for &ih in &inner {
                let h = &mut hops[ih as usize];
                h.hidden |= counts;
                h.pending_markers = h.pending_markers.saturating_sub(1);
                if h.wait_slot != NO_SLOT && (h.hidden || h.pending_markers == 0) {
                    work.push(h.wait_slot);
                }
            }
            let sl = &mut self.slots[s as usize];
            sl.inner = inner;
            sl.inner.clear();
            self.free_slots.push(s);
            self.pending -= 1;
        }
        self.work = work;
    }
}

//! Event builders for hand-made traces: all stacks empty, so that nodes print as comms.

use chainrec_format::{
    Comm, CommReason, Event, StackId, Switch, TaskComm, Tid, WakeContext, Waking,
};

/// A `sched_switch` on `cpu` at `ts`: `prev` leaves in `state`, `next` comes in.
pub fn switch(ts: u64, cpu: u32, prev: Tid, state: u32, next: Tid) -> Event {
    Event::Switch(Switch {
        ts,
        cpu,
        prev_tid: prev,
        prev_state: state,
        next_tid: next,
        prev_kstack: StackId::NONE,
        prev_ustack: StackId::NONE,
    })
}

/// A `sched_waking` on `cpu` at `ts`: `waker` wakes `target` in `context` (source 0).
pub fn waking(ts: u64, cpu: u32, waker: Tid, target: Tid, context: WakeContext) -> Event {
    Event::Waking(Waking {
        ts,
        cpu,
        waker_tid: waker,
        target_tid: target,
        context,
        source: 0,
        waker_kstack: StackId::NONE,
        waker_ustack: StackId::NONE,
    })
}

/// A comm event at `ts` naming `tid` (its own process), as first seen.
pub fn comm(ts: u64, tid: Tid, name: &str) -> Event {
    Event::Comm(TaskComm {
        ts,
        tid,
        tgid: tid,
        comm: Comm::new(name),
        reason: CommReason::Seen,
    })
}

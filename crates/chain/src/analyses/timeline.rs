//! A thread's timeline state as the critical path's scan of its own events knows it
//! (`critpath::Scan`), kept apart so that checkpoints can hold it without depending on the
//! critical-path module.

use chainrec_format::{Tables, ThreadIdentity, Tid};

/// The thread's state in the scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum St {
    /// No event of the thread yet.
    Unseen,
    /// On a CPU since.
    On(u64),
    /// Off CPU since (switch-out or creation).
    Off(u64),
    /// Exited (its last switch-out).
    Gone(u64),
}

/// What the scan of a thread's own events knows at an event boundary, apart from the
/// pieces and samples it keeps inside its window: all a scan resumed there needs.
/// Before any window's start a scan keeps nothing, so this state is the same whatever the
/// window (see `critpath::Timelines`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeline {
    pub(crate) st: St,
    pub(crate) created: Option<u64>,
    pub(crate) seen: bool,
    /// Switches that contradict each other (counted from the thread's start).
    pub(crate) inconsistent: u64,
    /// The thread had its exit event (it may still run, block or be preempted until its
    /// final switch-out).
    pub(crate) exiting: bool,
    /// It was woken since its last switch-out.
    pub(crate) woken: bool,
    /// Its last switch-out was a sleep (not a preemption).
    pub(crate) slept: bool,
    /// Its identity as its own `comm` and fork events set it (`None`: the task table's).
    pub(crate) identity: Option<ThreadIdentity>,
}

impl Timeline {
    /// Before any event of `tid`.
    pub(crate) fn new(tid: Tid, tables: &Tables) -> Timeline {
        Timeline {
            st: St::Unseen,
            created: None,
            seen: tables.tasks.contains_key(&tid),
            inconsistent: 0,
            exiting: false,
            woken: false,
            slept: false,
            identity: None,
        }
    }
}

//! Engine configuration.

use crate::engine::filter::Filter;
use crate::engine::mode::{Mode, OnCpuMode};

/// Default `--max-depth` (hops per chain, metal included).
pub const DEFAULT_MAX_DEPTH: usize = 16;

/// Engine configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Attribution mode.
    pub mode: Mode,
    /// Maximum hops per chain (≥ 1).
    pub max_depth: usize,
    /// Subchain dedup: waits whose ending waking is an inner hop of another chain are
    /// emitted with `root == false`.
    pub dedup: bool,
    /// Root filter: only matching waits reach the sink, and only their chains count for dedup.
    pub filter: Filter,
    /// Run-queue attribution (time-bounded mode only; CHAINS.md "Run-queue time"): each
    /// record's runnable part, and the part of each level during which its waker was
    /// runnable, are split by the tasks that held the CPU ([`WaitRecord::runq`](crate::WaitRecord::runq)).
    pub runqueue: bool,
    /// A waker level's on-CPU time without a sample inside: estimated from the waker's
    /// nearest samples (default) or left `[on cpu: no sample]` (traces with samples only).
    pub oncpu: OnCpuMode,
    /// Show each waiting thread's cgroup (or pod and container) as frames above it
    /// ([`crate::WaitRecord::group`]).
    pub cgroup_frames: bool,
    /// Show each waiting thread's process (`[process: COMM (PID)]`) as a frame above it,
    /// below its cgroup frames ([`crate::WaitRecord::group`]).
    pub process_frames: bool,
}

/// Which frames go above the waiting thread ([`Config::cgroup_frames`],
/// [`Config::process_frames`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GroupKinds {
    pub(crate) cgroup: bool,
    pub(crate) process: bool,
}

/// What emission needs to give a record its frames above the thread: the trace's tables,
/// which frames, and the process leader's current name (process frames).
#[derive(Clone, Copy)]
pub(crate) struct Groups<'a> {
    pub(crate) tables: &'a chainrec_format::Tables,
    pub(crate) kinds: GroupKinds,
    pub(crate) leader: Option<chainrec_format::Comm>,
}

impl Config {
    /// The frames above the waiting thread this run shows, if any.
    pub(crate) fn group_kinds(&self) -> Option<GroupKinds> {
        (self.cgroup_frames || self.process_frames).then_some(GroupKinds {
            cgroup: self.cgroup_frames,
            process: self.process_frames,
        })
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::Bounded,
            max_depth: DEFAULT_MAX_DEPTH,
            dedup: true,
            filter: Filter::default(),
            runqueue: true,
            oncpu: OnCpuMode::default(),
            cgroup_frames: false,
            process_frames: false,
        }
    }
}

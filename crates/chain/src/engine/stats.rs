//! The engine's counters ([`Stats`]): everything skipped, ignored or uncertain.
//! What each anomaly counter means is in `explain.rs`.

use chainrec_format::Tid;
use std::fmt;

/// How many inconsistent sequences [`Stats::inconsistent_examples`] keeps (and untraced
/// switches [`Stats::untraced_examples`]).
pub const EXAMPLES: usize = 4;

/// One inconsistent switch sequence (the first few are kept, to look at with
/// `chainrec script TRACE -t TID --window ...`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inconsistency {
    /// Time of the offending switch.
    pub ts: u64,
    /// The thread.
    pub tid: Tid,
    /// True: switched in while believed running; false: switched out while believed
    /// off-CPU.
    pub switch_in: bool,
}

/// Counters: everything skipped, ignored or uncertain is counted here.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events processed.
    pub events: u64,
    /// Off-CPU intervals closed by a switch-in (all states).
    pub waits: u64,
    /// ... of which preemptions (state R).
    pub preemptions: u64,
    /// ... of which blocked waits ended by a waking seen in the trace.
    pub woken_waits: u64,
    /// Blocked waits switched in without any waking in the trace (shown as `[waker unknown]`).
    pub waits_without_waker: u64,
    /// Blocked waits ended by a waking that came while the thread still ran, just before its
    /// switch-out (counted in `woken_waits` too): the wakeup raced the block, and the kernel
    /// put the thread back on its run queue without another `sched_waking`.
    pub woken_before_block: u64,
    /// Waits whose switch-out precedes the trace (not roots; their wakings still serve as causes).
    pub waits_before_trace: u64,
    /// Waits still open when the trace ended (switched out, never switched in).
    pub waits_open_at_end: u64,
    /// Records passed to the sink (after the filter).
    pub records_emitted: u64,
    /// Records marked non-root by dedup.
    pub dedup_hidden: u64,
    /// Threads whose life ended in the trace: their final switch-out (state dead, `x`) closed
    /// them; a later task with the same tid is a new thread.
    pub threads_exited: u64,
    /// Tids that began a new thread (fork/clone: `sched_wakeup_new` or a fork's comm record)
    /// while the engine still held the state of an earlier thread with that tid, whose end
    /// was not in the trace (its final switch-out lost or not traced): the old thread was
    /// closed there.
    pub threads_reused: u64,
    /// Waits of those earlier threads still open when the new thread began (or of a thread
    /// that had exited, switched in again with no waking): dropped, never ended by the new
    /// thread's first switch-in.
    pub reused_waits_dropped: u64,
    /// Off-CPU time of those dropped waits, from their switch-out to the new thread's
    /// start: not shown.
    pub reused_dropped_ns: u64,
    /// Wakings of a task that was not blocked (running, runnable, or already woken): ignored.
    pub wakings_ignored: u64,
    /// Wakings whose target is the idle task (tid 0): ignored.
    pub wakings_of_idle: u64,
    /// Hops created.
    pub hops: u64,
    /// Forks (`sched_wakeup_new`) taken as the new thread's first cause: a chain through
    /// a thread created inside the wait goes on to its parent (`[fork]`), not counting
    /// the time before the thread existed as its own.
    pub fork_causes: u64,
    /// Chains cut at the depth limit while a further cause existed.
    pub truncated: u64,
    /// `--mode last` walks stopped at a repeated thread.
    pub cycles: u64,
    /// Lost-event markers seen.
    pub lost_markers: u64,
    /// Events lost according to those markers.
    pub lost_events: u64,
    /// Emitted waits overlapping a lost marker (marked `[lost events]`).
    pub waits_with_lost: u64,
    /// Inconsistent sequences (switch-out of a thread believed off-CPU, switch-in of a
    /// thread believed running): state was reset, usually due to lost events.
    pub inconsistent: u64,
    /// ... of which switch-outs of a thread believed off-CPU (its open wait was dropped).
    pub inconsistent_out: u64,
    /// ... of which switch-ins of a thread believed running (no wait to close).
    pub inconsistent_in: u64,
    /// Time covered by the waits dropped by inconsistent switch-outs (switch-out of the
    /// dropped wait to the second switch-out; on-CPU after an untraced switch-in in part),
    /// not shown anywhere.
    pub inconsistent_dropped_ns: u64,
    /// Switches whose prev is not the task the previous switch on that CPU switched in:
    /// a switch on that CPU was not traced (lost events, or the kernel's; docs/ENGINE.md).
    pub untraced_switches: u64,
    /// The first few untraced switches: (time, CPU, task expected, task found).
    pub untraced_examples: Vec<(u64, u32, Tid, Tid)>,
    /// The first few inconsistent sequences, to look at with `chainrec script`.
    pub inconsistent_examples: Vec<Inconsistency>,
    /// In-trace part (trace start to switch-in) of the waits that began before the
    /// trace: not shown as roots.
    pub waits_before_trace_ns: u64,
    /// Emitted waits whose off-CPU kernel or user stack was skipped by the lazy policy.
    pub stacks_skipped: u64,
    /// Emitted waits (or their hops) with a failed or dangling stack.
    pub stacks_missing: u64,
    /// Emitted waits (or their hops) with a user stack marked exiting (`[no user stack:
    /// exiting]`, e.g. a waker in `do_exit`): not failures.
    pub stacks_exiting: u64,
    /// Emitted waits (or their first hop) longer than the lazy threshold whose stack stayed
    /// the recorder's "skipped" placeholder (no stack arrived): shown as `[no stack: not
    /// captured]`, never as `[no stack: wait < T]`.
    pub stacks_not_captured: u64,
    /// Off-CPU stack events that matched no wait.
    pub stacks_unmatched: u64,
    /// Hop arena garbage collections.
    pub gc_runs: u64,
    /// Most hops alive at once.
    pub peak_live_hops: u64,
    /// Most threads tracked at once.
    pub peak_tasks: u64,
    /// Most waits parked at once waiting for the dedup decision.
    pub peak_pending_waits: u64,
    /// Run-queue nanoseconds of emitted waits' own runnable parts (level 0).
    pub runq_root_ns: u64,
    /// Run-queue nanoseconds inside emitted chains: time their wakers were runnable.
    pub runq_inner_ns: u64,
    /// Nanoseconds of emitted waits (any level) held off by CPU-quota throttling, shown as
    /// `[throttled: <cgroup>]` levels (not counted in `runq_root_ns` / `runq_inner_ns`).
    pub throttled_ns: u64,
    /// Throttled switch-outs whose group has no refill record before the switch-in: the
    /// throttled level runs to the switch-in, ended by `[unthrottle unknown]`.
    pub throttle_unknown_end: u64,
    /// Run-queue nanoseconds (of emitted waits' own runnable parts) whose CPU holder is
    /// unknown: the CPU's switch history did not reach back that far (shown as
    /// `[run queue];[unknown]`).
    pub runq_unknown_ns: u64,
    /// Nanoseconds of inner levels that could not be split into the waker running and
    /// runnable, because the waker's run-queue history no longer reached back that far
    /// (its safety cap dropped them: see `runq_capped`); they stay with the waker, as
    /// without run-queue attribution.
    pub runq_unsplit_ns: u64,
    /// Run-queue history entries (a CPU's switch-ins, a thread's runnable periods) dropped
    /// by the safety caps (2^22 per CPU, 2^20 per thread) rather than trimmed because no
    /// open wait could ask for them any more: only a wait open across that many switches
    /// makes the caps bite. Their time shows in `runq_unknown_ns` / `runq_unsplit_ns`.
    pub runq_capped: u64,
    /// History trims that kept less than an open wait could ask for, because it began more
    /// than 10 s before (`HISTORY_REACH_NS`): that wait's chain levels older than the
    /// reach show in `runq_unknown_ns`, `runq_unsplit_ns` or `past_unchecked_ns`.
    pub history_reach_cuts: u64,
    /// Most run-queue history entries kept at once (all CPUs and threads; 16 B per
    /// switch-in, 12 B per runnable period): what the waits open at the time could ask for.
    pub peak_runq_history: u64,
    /// On-CPU nanoseconds of inner levels split by samples while part of the level lay
    /// before the waker's kept samples (its last 4096): split by the samples kept.
    pub oncpu_short_history_ns: u64,
    /// Wakers' on-CPU nanoseconds in emitted chains split by their samples inside the level
    /// (`[on cpu]`).
    pub oncpu_sampled_ns: u64,
    /// Wakers' on-CPU nanoseconds in emitted chains estimated from their samples nearest in
    /// time, none inside the level (`[on cpu: estimated]`).
    pub oncpu_estimated_ns: u64,
    /// Wakers' on-CPU nanoseconds in emitted chains with no sample in or near them
    /// (`[on cpu: no sample]`).
    pub oncpu_no_sample_ns: u64,
    /// `[earlier wait]` branches in emitted chains: a waker's waits inside the root's wait
    /// before the one its chain follows, each followed to its own waker (CHAINS.md).
    pub earlier_waits: u64,
    /// Nanoseconds of wakers' blocked time in emitted chains shown as `[blocked: not
    /// followed]` (no waking of that wait in the trace, the depth limit, or the per-wait
    /// level budget): blocked, never shown as running.
    pub blocked_not_followed_ns: u64,
    /// Most past waits kept at once (all threads) for those branches.
    pub peak_past_waits: u64,
    /// Nanoseconds of wakers' own time in chains older than the waker's kept past waits
    /// (256 to 4096 per thread, docs/ENGINE.md "Earlier waits"): whether it ran or
    /// blocked then is not checked; it stays with the level unsplit (no `[on cpu]`, no
    /// `[run queue]`).
    pub past_unchecked_ns: u64,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} events, {} waits ({} woken, {} preempted, {} without waker, {} before trace, {} open at end), \
             {} emitted, {} hidden by dedup, {} truncated, {} cycles, {} wakings ignored, {} inconsistent, \
             {} threads exited, {} tids reused",
            self.events,
            self.waits,
            self.woken_waits,
            self.preemptions,
            self.waits_without_waker,
            self.waits_before_trace,
            self.waits_open_at_end,
            self.records_emitted,
            self.dedup_hidden,
            self.truncated,
            self.cycles,
            self.wakings_ignored,
            self.inconsistent,
            self.threads_exited,
            self.threads_reused
        )
    }
}

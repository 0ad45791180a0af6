//! Recent on-CPU samples per thread, for the `[on cpu]` split of a chain level's own
//! time (docs/ENGINE.md, "What a running waker did"). A level's chain is built at the
//! waking that ends its wait, and every time it splits lies before that waking, so the
//! samples it needs have been seen by then: a bounded history per thread suffices.

use chainrec_format::{Sample, StackId, Tid};
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::VecDeque;

/// Samples kept per thread (24 B each): 41 s of a thread always on CPU at 99 Hz.
const PER_THREAD: usize = 4096;

/// How far, in sample periods, a sample may lie from on-CPU time that holds none for that
/// time to be estimated from it (docs/ENGINE.md, "What a running waker did").
pub(crate) const ESTIMATE_PERIODS: u64 = 4;

#[derive(Clone, Copy, Debug)]
struct Smp {
    ts: u64,
    /// The thread's CPU clock at the sample ([`CpuClock`]); [`NO_CLOCK`] when unknown.
    clock: u64,
    k: StackId,
    u: StackId,
}

/// [`Smp::clock`] of a sample whose thread's CPU clock is not kept.
const NO_CLOCK: u64 = u64::MAX;

/// A thread's CPU clock: its on-CPU time since it was first seen, from its switches. The
/// estimate measures how far a sample lies from a level in the thread's own running time,
/// not in wall time: a thread that runs one tenth of the time is sampled one tenth as
/// often, but what it did a few samples ago is as near in what it computes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuClock {
    /// On-CPU nanoseconds up to its last switch-out.
    cum: u64,
    /// Its switch-in time while on a CPU, 0 while off (or not yet seen switched in).
    since: u64,
}

impl CpuClock {
    /// The clock at `ts` (not before the thread's last switch).
    #[inline]
    fn at(&self, ts: u64) -> u64 {
        match self.since {
            0 => self.cum,
            s => self.cum + ts.saturating_sub(s),
        }
    }
}

#[derive(Clone, Debug, Default)]
struct History {
    smp: VecDeque<Smp>,
    /// Samples before this were dropped (older than the kept history).
    floor: u64,
}

/// On-CPU time of one level split by one sampled stack pair (`None`: no sample).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RawOnCpu {
    pub level: u32,
    pub stacks: Option<(StackId, StackId)>,
    pub ns: u64,
    /// Estimated from samples near the level, none of which fell inside it.
    pub estimated: bool,
}

/// The sample histories.
#[derive(Clone, Debug, Default)]
pub(crate) struct SampleIndex {
    by_tid: FxHashMap<Tid, History>,
    /// False for traces without samples: nothing is kept and no level is split, so their
    /// outputs are exactly what they were before samples existed.
    pub(crate) enabled: bool,
    /// Estimate a level without a sample inside from samples at most this far from it
    /// ([`ESTIMATE_PERIODS`] sample periods); `None`: exact only (`--oncpu exact`, or a
    /// trace whose sample period is unknown).
    estimate_within: Option<u64>,
    /// The sample period: a level holding at least this much on-CPU time and no sample
    /// was not on a CPU throughout (the CPU's clock would have fired in it), so it is not
    /// estimated.
    period_ns: u64,
    /// CPU clocks per task slot (parallel to the engine's tasks), kept only to estimate.
    clocks: Vec<CpuClock>,
    /// On-CPU time split while part of it lay before the thread's kept samples (the split
    /// used the samples that were kept): see [`crate::Stats::oncpu_short_history_ns`].
    pub(crate) short_history_ns: Cell<u64>,
}

impl SampleIndex {
    /// An index for a trace that took samples (`enabled`) or not; `estimate_period`: the
    /// sample period when levels without a sample are to be estimated.
    pub(crate) fn new(enabled: bool, estimate_period: Option<u64>) -> Self {
        let period_ns = estimate_period.unwrap_or(0);
        SampleIndex {
            enabled,
            estimate_within: (period_ns > 0).then(|| period_ns.saturating_mul(ESTIMATE_PERIODS)),
            period_ns,
            ..SampleIndex::default()
        }
    }

    /// True when levels without a sample are estimated (the CPU clocks are kept).
    #[inline]
    pub(crate) fn estimating(&self) -> bool {
        self.enabled && self.estimate_within.is_some()
    }

    /// Task slot `t` was appended or reused: its clock starts at 0.
    pub(crate) fn reset_task(&mut self, t: usize) {
        if !self.estimating() {
            return;
        }
        if self.clocks.len() <= t {
            self.clocks.resize(t + 1, CpuClock::default());
        }
        self.clocks[t] = CpuClock::default();
    }

    /// The thread in task slot `t` went on a CPU at `ts`.
    #[inline]
    pub(crate) fn switch_in(&mut self, t: usize, ts: u64) {
        if let Some(c) = self.clocks.get_mut(t) {
            c.since = ts;
        }
    }

    /// The thread in task slot `t` left its CPU at `ts`.
    #[inline]
    pub(crate) fn switch_out(&mut self, t: usize, ts: u64) {
        if let Some(c) = self.clocks.get_mut(t) {
            if c.since != 0 {
                c.cum += ts.saturating_sub(c.since);
                c.since = 0;
            }
        }
    }

    /// The CPU clock of the thread in task slot `t` at `ts` (`None` when not kept).
    #[inline]
    pub(crate) fn clock(&self, t: Option<usize>, ts: u64) -> Option<u64> {
        Some(self.clocks.get(t?)?.at(ts))
    }

    /// Keep a sample (the idle task's are not kept: it is never a waker level), taken
    /// when its thread's CPU clock read `clock`.
    pub(crate) fn push(&mut self, s: &Sample, clock: Option<u64>) {
        if !self.enabled || s.tid == 0 {
            return;
        }
        let h = self.by_tid.entry(s.tid).or_default();
        if h.smp.len() == PER_THREAD {
            if let Some(old) = h.smp.pop_front() {
                h.floor = old.ts + 1;
            }
        }
        h.smp.push_back(Smp {
            ts: s.ts,
            clock: clock.unwrap_or(NO_CLOCK),
            k: s.kstack,
            u: s.ustack,
        });
    }

    /// Drop an exited thread's samples (a reused tid starts fresh).
    pub(crate) fn forget(&mut self, tid: Tid) {
        self.by_tid.remove(&tid);
    }

    /// Split the on-CPU time of `tid` in `pieces` (disjoint, in time order; pieces of
    /// zero length ignored) by its samples inside them: each sampled stack pair gets the
    /// pieces' total times its share of the samples, rounded so that the parts add up
    /// exactly (largest remainder, ties to the first stack seen); `[on cpu: no sample]`
    /// gets it all when there is none. Appends to `out` under `level`.
    ///
    /// With none inside, the level is estimated from the samples nearest to it
    /// ([`estimate`]); `clock_now` is the thread's CPU clock now (at the waking that ends
    /// the root's wait), which measures how far back its samples lie.
    pub(crate) fn split(
        &self,
        tid: Tid,
        level: u32,
        pieces: &[(u64, u64)],
        clock_now: Option<u64>,
        out: &mut Vec<RawOnCpu>,
    ) {
        let total: u64 = pieces.iter().map(|&(x, y)| y.saturating_sub(x)).sum();
        if total == 0 {
            return;
        }
        // (stacks, samples), in order of first sample.
        let mut counts: Vec<((StackId, StackId), u64)> = Vec::new();
        if let Some(h) = self.by_tid.get(&tid) {
            for &(x, y) in pieces {
                if y <= x {
                    continue;
                }
                if x < h.floor {
                    let c = &self.short_history_ns;
                    c.set(c.get() + h.floor.min(y) - x);
                }
                let first = h.smp.partition_point(|s| s.ts < x);
                for s in h.smp.range(first..) {
                    if s.ts >= y {
                        break;
                    }
                    match counts.iter_mut().find(|c| c.0 == (s.k, s.u)) {
                        Some(c) => c.1 += 1,
                        None => counts.push(((s.k, s.u), 1)),
                    }
                }
            }
        }
        let n: u64 = counts.iter().map(|c| c.1).sum();
        if n == 0 {
            let mut left = total;
            if let (Some(within), Some(h)) = (self.estimate_within, self.by_tid.get(&tid)) {
                if total < self.period_ns {
                    left = estimate(h, level, pieces, within, clock_now, out);
                }
            }
            if left > 0 {
                out.push(RawOnCpu {
                    level,
                    stacks: None,
                    ns: left,
                    estimated: false,
                });
            }
            return;
        }
        let weights: Vec<u64> = counts.iter().map(|c| c.1).collect();
        for ((stacks, _), ns) in counts.into_iter().zip(apportion(total, &weights)) {
            out.push(RawOnCpu {
                level,
                stacks: Some(stacks),
                ns,
                estimated: false,
            });
        }
    }
}

/// Estimate a level whose on-CPU `pieces` hold no sample of its thread (history `h`): each
/// nanosecond goes to the thread's sample nearest to it in time, before or after, when that
/// sample lies within `within` of the piece; a piece between two samples is cut at their
/// midpoint. The parts are appended to `out` (one per stack pair, in time order of the
/// samples, marked estimated); returns the nanoseconds no sample was near enough to.
///
/// "Within" is in the thread's running time, bounded from above (so a sample counts only
/// when it is surely near): before a piece, the thread's CPU time from the sample to now
/// (`clock_now`) less the level's on-CPU time from the piece on (exact for level 1, whose
/// time ends now; more for deeper levels, which ran again since), or the wall time when
/// that is less; after a piece, the wall time to the sample.
///
/// The samples after a piece are those the engine has read when the chain is built, at
/// the waking that ends the root's wait: none for level 1, whose time ends at that waking,
/// so level 1 is estimated from the samples before it.
fn estimate(
    h: &History,
    level: u32,
    pieces: &[(u64, u64)],
    within: u64,
    clock_now: Option<u64>,
    out: &mut Vec<RawOnCpu>,
) -> u64 {
    let first_part = out.len();
    let mut add = |s: &Smp, ns: u64| {
        if ns == 0 {
            return;
        }
        let stacks = Some((s.k, s.u));
        match out[first_part..].iter_mut().find(|p| p.stacks == stacks) {
            Some(p) => p.ns += ns,
            None => out.push(RawOnCpu {
                level,
                stacks,
                ns,
                estimated: true,
            }),
        }
    };
    let mut left = 0;
    // The level's on-CPU time from the current piece to its end.
    let mut rest: u64 = pieces.iter().map(|&(x, y)| y.saturating_sub(x)).sum();
    for &(x, y) in pieces {
        if y <= x {
            continue;
        }
        let ran_since = |s: &Smp| match clock_now {
            Some(now) if s.clock != NO_CLOCK => now.saturating_sub(s.clock).saturating_sub(rest),
            _ => u64::MAX,
        };
        // No sample lies in [x, y): the one before x and the one at or after y.
        let i = h.smp.partition_point(|s| s.ts < x);
        let before = i
            .checked_sub(1)
            .and_then(|j| h.smp.get(j))
            .filter(|s| (x - s.ts).min(ran_since(s)) <= within);
        rest -= y - x;
        let after = h.smp.get(i).filter(|s| s.ts >= y && s.ts - y <= within);
        match (before, after) {
            (Some(p), Some(q)) => {
                let mid = (p.ts + (q.ts - p.ts) / 2).clamp(x, y);
                add(p, mid - x);
                add(q, y - mid);
            }
            (Some(p), None) => add(p, y - x),
            (None, Some(q)) => add(q, y - x),
            (None, None) => left += y - x,
        }
    }
    left
}

/// Split `total` in proportion to `weights` (not all 0), rounded so that the parts add up
/// exactly: each part is rounded down, and the nanoseconds left go one each to the
/// largest remainders (ties to the first).
pub fn apportion(total: u64, weights: &[u64]) -> Vec<u64> {
    let n: u128 = weights.iter().map(|&w| w as u128).sum();
    if n == 0 {
        return vec![0; weights.len()];
    }
    let share = |c: u64| (total as u128 * c as u128 / n) as u64;
    let mut parts: Vec<u64> = weights.iter().map(|&c| share(c)).collect();
    let given: u64 = parts.iter().sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse((total as u128 * weights[i] as u128) % n));
    // Each share lost less than 1 ns to rounding down: fewer than `weights.len()` left.
    for &i in order.iter().take((total - given) as usize) {
        parts[i] += 1;
    }
    parts
}

/// The parts of `windows` (each `(x, y)`, disjoint) not covered by `busy` (disjoint
/// intervals in time order): where a level's waker was not runnable, i.e. ran.
pub(crate) fn minus(
    windows: &[(u64, u64)],
    busy: impl Fn(u64, u64, &mut dyn FnMut(u64, u64)),
    out: &mut Vec<(u64, u64)>,
) {
    for &(x, y) in windows {
        if y <= x {
            continue;
        }
        let mut cur = x;
        busy(x, y, &mut |s, e| {
            let (s, e) = (s.max(x), e.min(y));
            if s > cur {
                out.push((cur, s));
            }
            cur = cur.max(e);
        });
        if cur < y {
            out.push((cur, y));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(ts: &[(u64, u32)]) -> SampleIndex {
        index(ts, None)
    }

    /// Samples of tid 7 at `(ts, kernel stack)`; `period`: estimate levels without one.
    fn index(ts: &[(u64, u32)], period: Option<u64>) -> SampleIndex {
        let mut i = SampleIndex::new(true, period);
        for &(t, k) in ts {
            i.push(
                &Sample {
                    ts: t,
                    cpu: 0,
                    tid: 7,
                    kstack: StackId(k),
                    ustack: StackId::NONE,
                },
                None,
            );
        }
        i
    }

    #[test]
    fn splits_exactly_in_proportion() {
        let i = idx(&[(10, 16), (20, 16), (30, 17), (95, 18)]);
        let mut out = Vec::new();
        // 100 ns over [0, 50) and [90, 140): samples 16, 16, 17 and 18 -> 50, 25, 25.
        i.split(7, 1, &[(0, 50), (90, 140)], None, &mut out);
        let ns: Vec<u64> = out.iter().map(|p| p.ns).collect();
        assert_eq!(ns, [50, 25, 25]);
        // 10 ns over 3 samples: 4, 3, 3 (the remainder to the first).
        out.clear();
        i.split(7, 2, &[(5, 15), (15, 25), (25, 35)], None, &mut out);
        assert_eq!(out.iter().map(|p| p.ns).sum::<u64>(), 30);
        out.clear();
        i.split(7, 2, &[(12, 22), (25, 35)], None, &mut out);
        assert_eq!(out.iter().map(|p| p.ns).collect::<Vec<_>>(), [10, 10]);
        // No sample inside: all to [on cpu: no sample].
        out.clear();
        i.split(7, 3, &[(40, 60)], None, &mut out);
        assert_eq!(
            out,
            [RawOnCpu {
                level: 3,
                stacks: None,
                ns: 20,
                estimated: false,
            }]
        );
        // Unknown thread: the same.
        out.clear();
        i.split(8, 1, &[(0, 5)], None, &mut out);
        assert_eq!(out[0].stacks, None);
    }

    /// An index estimating levels without a sample, sample period `period` (so within
    /// 4 × `period` of a sample).
    fn est(ts: &[(u64, u32)], period: u64) -> SampleIndex {
        index(ts, Some(period))
    }

    fn part(level: u32, k: Option<u32>, ns: u64, estimated: bool) -> RawOnCpu {
        RawOnCpu {
            level,
            stacks: k.map(|k| (StackId(k), StackId::NONE)),
            ns,
            estimated,
        }
    }

    #[test]
    fn estimates_from_the_nearest_samples() {
        // Samples at 10 (16) and 100 (17), period 100 (within 400).
        let i = est(&[(10, 16), (100, 17)], 100);
        let mut out = Vec::new();
        // [40, 70) between them: cut at their midpoint 55.
        i.split(7, 2, &[(40, 70)], None, &mut out);
        assert_eq!(
            out,
            [part(2, Some(16), 15, true), part(2, Some(17), 15, true)]
        );
        // After the last sample: all to it; before the first: all to it.
        out.clear();
        i.split(7, 1, &[(150, 190)], None, &mut out);
        assert_eq!(out, [part(1, Some(17), 40, true)]);
        out.clear();
        i.split(7, 1, &[(0, 5)], None, &mut out);
        assert_eq!(out, [part(1, Some(16), 5, true)]);
        // Two pieces: one near the first sample, one more than 400 after the last, one
        // near the last: the far one has no sample near.
        out.clear();
        i.split(7, 3, &[(20, 30), (130, 140), (501, 560)], None, &mut out);
        assert_eq!(
            out,
            [
                part(3, Some(16), 10, true),
                part(3, Some(17), 10, true),
                part(3, None, 59, false)
            ]
        );
        // A sample inside: the exact split, as before.
        out.clear();
        i.split(7, 1, &[(0, 50)], None, &mut out);
        assert_eq!(out, [part(1, Some(16), 50, false)]);
    }

    #[test]
    fn near_in_running_time_counts() {
        // A thread sampled at 10 (its clock then 5), within 400 of running time: 990 ns
        // of wall time later it had run only 300 more before the piece [1000, 1050).
        let mut i = SampleIndex::new(true, Some(100));
        let s = Sample {
            ts: 10,
            cpu: 0,
            tid: 7,
            kstack: StackId(16),
            ustack: StackId::NONE,
        };
        i.push(&s, Some(5));
        let mut out = Vec::new();
        i.split(7, 1, &[(1000, 1050)], Some(5 + 300 + 50), &mut out);
        assert_eq!(out, [part(1, Some(16), 50, true)]);
        // Had it run 900 since (and 990 of wall time): too far.
        out.clear();
        i.split(7, 1, &[(1000, 1050)], Some(5 + 900 + 50), &mut out);
        assert_eq!(out, [part(1, None, 50, false)]);
    }

    #[test]
    fn no_estimate_for_a_period_without_a_sample_or_in_exact_mode() {
        // On CPU for a whole period (100) with no sample: the clock would have fired in
        // it, so the thread did not run throughout: not estimated.
        let i = est(&[(10, 16), (400, 17)], 100);
        let mut out = Vec::new();
        i.split(7, 1, &[(150, 200), (250, 300)], None, &mut out);
        assert_eq!(out, [part(1, None, 100, false)]);
        out.clear();
        i.split(7, 1, &[(150, 249)], None, &mut out);
        assert_eq!(
            out,
            [part(1, Some(16), 55, true), part(1, Some(17), 44, true)]
        );
        // Exact mode (no period given): no estimate.
        let i = idx(&[(10, 16), (400, 17)]);
        out.clear();
        i.split(7, 1, &[(150, 249)], None, &mut out);
        assert_eq!(out, [part(1, None, 99, false)]);
    }

    #[test]
    fn uneven_shares_add_up() {
        let i = idx(&[(1, 16), (2, 17), (3, 18)]);
        let mut out = Vec::new();
        i.split(7, 1, &[(0, 100)], None, &mut out);
        assert_eq!(out.iter().map(|p| p.ns).collect::<Vec<_>>(), [34, 33, 33]);
    }

    #[test]
    fn minus_leaves_the_gaps() {
        let mut out = Vec::new();
        let busy = |x: u64, y: u64, f: &mut dyn FnMut(u64, u64)| {
            for (s, e) in [(5u64, 10u64), (20, 30), (50, 60)] {
                if e > x && s < y {
                    f(s, e);
                }
            }
        };
        minus(&[(0, 25), (40, 55)], busy, &mut out);
        assert_eq!(out, [(0, 5), (10, 20), (40, 50)]);
    }
}

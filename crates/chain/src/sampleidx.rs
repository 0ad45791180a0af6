//! Recent on-CPU samples per thread, for the `[on cpu]` split of a chain level's own
//! time (docs/ENGINE.md, "What a running waker did"). A level's chain is built at the
//! waking that ends its wait, and every time it splits lies before that waking, so the
//! samples it needs have been seen by then: a bounded history per thread suffices.

use crate::fx::FxHashMap;
use chainrec_format::{Sample, StackId, Tid};
use std::cell::Cell;
use std::collections::VecDeque;

/// Samples kept per thread (24 B each): 83 s of a thread always on CPU at 49 Hz.
const PER_THREAD: usize = 4096;

#[derive(Clone, Copy, Debug)]
struct Smp {
    ts: u64,
    k: StackId,
    u: StackId,
}

#[derive(Debug, Default)]
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
}

/// The sample histories.
#[derive(Debug, Default)]
pub(crate) struct SampleIndex {
    by_tid: FxHashMap<Tid, History>,
    /// False for traces without samples: nothing is kept and no level is split, so their
    /// outputs are exactly what they were before samples existed.
    pub(crate) enabled: bool,
    /// On-CPU time split while part of it lay before the thread's kept samples (the split
    /// used the samples that were kept): see [`crate::Stats::oncpu_short_history_ns`].
    pub(crate) short_history_ns: Cell<u64>,
}

impl SampleIndex {
    /// An index for a trace that took samples (`enabled`) or not.
    pub(crate) fn new(enabled: bool) -> Self {
        SampleIndex {
            enabled,
            ..SampleIndex::default()
        }
    }

    /// Keep a sample (the idle task's are not kept: it is never a waker level).
    pub(crate) fn push(&mut self, s: &Sample) {
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
    pub(crate) fn split(
        &self,
        tid: Tid,
        level: u32,
        pieces: &[(u64, u64)],
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
            out.push(RawOnCpu {
                level,
                stacks: None,
                ns: total,
            });
            return;
        }
        let weights: Vec<u64> = counts.iter().map(|c| c.1).collect();
        for ((stacks, _), ns) in counts.into_iter().zip(apportion(total, &weights)) {
            out.push(RawOnCpu {
                level,
                stacks: Some(stacks),
                ns,
            });
        }
    }
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
        let mut i = SampleIndex::new(true);
        for &(t, k) in ts {
            i.push(&Sample {
                ts: t,
                cpu: 0,
                tid: 7,
                kstack: StackId(k),
                ustack: StackId::NONE,
            });
        }
        i
    }

    #[test]
    fn splits_exactly_in_proportion() {
        let i = idx(&[(10, 16), (20, 16), (30, 17), (95, 18)]);
        let mut out = Vec::new();
        // 100 ns over [0, 50) and [90, 140): samples 16, 16, 17 and 18 -> 50, 25, 25.
        i.split(7, 1, &[(0, 50), (90, 140)], &mut out);
        let ns: Vec<u64> = out.iter().map(|p| p.ns).collect();
        assert_eq!(ns, [50, 25, 25]);
        // 10 ns over 3 samples: 4, 3, 3 (the remainder to the first).
        out.clear();
        i.split(7, 2, &[(5, 15), (15, 25), (25, 35)], &mut out);
        assert_eq!(out.iter().map(|p| p.ns).sum::<u64>(), 30);
        out.clear();
        i.split(7, 2, &[(12, 22), (25, 35)], &mut out);
        assert_eq!(out.iter().map(|p| p.ns).collect::<Vec<_>>(), [10, 10]);
        // No sample inside: all to [on cpu: no sample].
        out.clear();
        i.split(7, 3, &[(40, 60)], &mut out);
        assert_eq!(
            out,
            [RawOnCpu {
                level: 3,
                stacks: None,
                ns: 20
            }]
        );
        // Unknown thread: the same.
        out.clear();
        i.split(8, 1, &[(0, 5)], &mut out);
        assert_eq!(out[0].stacks, None);
    }

    #[test]
    fn uneven_shares_add_up() {
        let i = idx(&[(1, 16), (2, 17), (3, 18)]);
        let mut out = Vec::new();
        i.split(7, 1, &[(0, 100)], &mut out);
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

//! Searches over time-ordered histories (run-queue periods, past waits): the first entry
//! ending after a time, from the front or from the back.

/// The first `i` in `lo..hi` for which `before(i)` is false (`before` is true then false
/// over the range), or `hi`; by binary search.
#[inline]
pub(crate) fn partition(mut lo: usize, mut hi: usize, before: impl Fn(usize) -> bool) -> usize {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// As [`partition`], searched from `hi` back with a doubling step first.
#[inline]
pub(crate) fn gallop_back(lo: usize, hi: usize, before: impl Fn(usize) -> bool) -> usize {
    // Every index at or after `top` is not before.
    let mut top = hi;
    let mut step = 1;
    while top > lo {
        let j = top.saturating_sub(step).max(lo);
        if before(j) {
            // The answer is in (j, top].
            return partition(j + 1, top, before);
        }
        top = j;
        step *= 2;
    }
    lo
}

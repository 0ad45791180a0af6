//! The attribution mode (CHAINS.md): how a wait's time is shared among its chain's levels.

/// Attribution mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Time-bounded attribution (CHAINS.md default): every ns of a wait attributed once.
    #[default]
    Bounded,
    /// Gregg's prototype: every level weighs the whole blocked time.
    Last,
}

/// How a waker level's on-CPU time that holds no sample of the waker is shown (docs/ENGINE.md,
/// "What a running waker did"). Levels with a sample inside are split by their samples in
/// both modes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnCpuMode {
    /// Estimated from the waker's samples nearest in time (within
    /// four sample periods, `ESTIMATE_PERIODS`), shown as `[on cpu: estimated]`; time
    /// with no sample near enough stays `[on cpu: no sample]`.
    #[default]
    Estimate,
    /// Only samples inside the level count: the rest is `[on cpu: no sample]`
    /// (`--oncpu exact`).
    Exact,
}

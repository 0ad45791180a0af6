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

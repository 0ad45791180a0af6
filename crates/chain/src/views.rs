//! What a folded output shows ([`View`]) and in which unit ([`Unit`]).

use crate::error::ChainError;

/// Which folded view to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Multi-level chains (`chainrec chains`); only root waits, blocked time.
    Chains,
    /// Off-CPU stacks, switch-out to switch-in, all states (`offcpu`).
    OffCpu,
    /// Waker stack then target comm, blocked time (`wakeup`).
    Wakeup,
    /// Off-CPU stack with its first waker, blocked time (`offwake`).
    OffWake,
}

/// Weight unit of folded output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds.
    Ns,
    /// Microseconds (default, like bcc).
    #[default]
    Us,
    /// Milliseconds.
    Ms,
}

impl Unit {
    /// Parse `ns`, `us` or `ms`.
    pub fn parse(s: &str) -> Result<Unit, ChainError> {
        match s {
            "ns" => Ok(Unit::Ns),
            "us" => Ok(Unit::Us),
            "ms" => Ok(Unit::Ms),
            _ => Err(ChainError::BadUnit(s.to_string())),
        }
    }
    /// Nanoseconds per unit.
    pub fn ns(self) -> u64 {
        match self {
            Unit::Ns => 1,
            Unit::Us => 1_000,
            Unit::Ms => 1_000_000,
        }
    }
    /// `ns` in this unit, rounded to nearest (how every folded view prints weights).
    #[inline]
    pub fn round(self, ns: u64) -> u64 {
        let d = self.ns();
        (ns + d / 2) / d
    }
    /// Short name.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ns => "ns",
            Unit::Us => "us",
            Unit::Ms => "ms",
        }
    }
}

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

impl View {
    /// The command that shows the view (`chains`, `offcpu`, `wakeup`, `offwake`).
    pub fn name(self) -> &'static str {
        match self {
            View::Chains => "chains",
            View::OffCpu => "offcpu",
            View::Wakeup => "wakeup",
            View::OffWake => "offwake",
        }
    }

    /// What its weights are, as the default title of its SVG says it (`Chain graph`).
    pub fn title(self) -> &'static str {
        match self {
            View::Chains => "Chain graph",
            View::OffCpu => "Off-CPU time",
            View::Wakeup => "Wakeup time",
            View::OffWake => "Off-wake time",
        }
    }
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
    /// Weighted lines (`ns`) in this unit: the lines whose weight rounds to at least
    /// one unit, and the count and nanoseconds of those left out.
    pub fn round_lines<L>(self, lines: impl IntoIterator<Item = (L, u64)>) -> Rounded<L> {
        let mut r = Rounded {
            kept: Vec::new(),
            small_lines: 0,
            small_ns: 0,
            unit: self,
        };
        for (l, ns) in lines {
            match self.round(ns) {
                0 => {
                    r.small_lines += 1;
                    r.small_ns += ns;
                }
                w => r.kept.push((l, w)),
            }
        }
        r
    }

    /// The note on `small_lines` lines (`small_ns` ns in all) that rounded to 0 units and
    /// were left out, if there were any.
    pub fn left_out_note(self, small_lines: u64, small_ns: u64) -> Option<String> {
        (small_lines > 0).then(|| {
            format!(
                "note: {small_lines} lines below 1 {} ({small_ns} ns in total) left out; use --unit ns",
                self.name()
            )
        })
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

/// Lines rounded to a unit by [`Unit::round_lines`].
#[derive(Clone, Debug)]
pub struct Rounded<L> {
    /// The lines kept, with their weights in the unit.
    pub kept: Vec<(L, u64)>,
    /// Lines left out: their weight rounded to 0.
    pub small_lines: u64,
    /// Their nanoseconds in total.
    pub small_ns: u64,
    /// The unit.
    pub unit: Unit,
}

impl<L> Rounded<L> {
    /// [`Unit::left_out_note`] for the lines left out.
    pub fn left_out_note(&self) -> Option<String> {
        self.unit.left_out_note(self.small_lines, self.small_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::Unit;

    /// Lines rounding to 0 units are left out, counted and said; the others keep their
    /// rounded weight in order.
    #[test]
    fn round_lines_keeps_counts_and_says_what_it_left_out() {
        let r = Unit::Ms.round_lines([("a", 2_600_000), ("b", 499_999), ("c", 500_000), ("d", 1)]);
        assert_eq!(r.kept, [("a", 3), ("c", 1)]);
        assert_eq!((r.small_lines, r.small_ns), (2, 500_000));
        assert_eq!(
            r.left_out_note().as_deref(),
            Some("note: 2 lines below 1 ms (500000 ns in total) left out; use --unit ns")
        );
        assert_eq!(Unit::Ns.round_lines([("a", 1)]).left_out_note(), None);
    }
}

//! Checks of the switch sequence that feed the anomaly counters of [`Stats`] (their words
//! for the user are in `crate::wording`).

use crate::engine::stats::{Inconsistency, Stats, EXAMPLES};
use chainrec_format::{Switch, Tid};

/// The task each CPU runs according to the last switch seen on it, to notice switches
/// that were not traced: a switch whose prev is another task.
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuCheck {
    /// next_tid of the last switch per CPU (`Tid::MAX`: none seen yet).
    next: Vec<Tid>,
}

impl CpuCheck {
    /// Count `s` in `st` if it shows that a switch on its CPU was not traced.
    #[inline]
    pub(crate) fn check(&mut self, s: &Switch, st: &mut Stats) {
        // A trace is untrusted input: CPUs beyond any real machine's are not tracked.
        if s.cpu >= 1 << 16 {
            return;
        }
        let c = s.cpu as usize;
        if self.next.len() <= c {
            self.next.resize(c + 1, Tid::MAX);
        }
        let expected = std::mem::replace(&mut self.next[c], s.next_tid);
        if expected != Tid::MAX && expected != s.prev_tid {
            st.untraced_switches += 1;
            if st.untraced_examples.len() < EXAMPLES {
                st.untraced_examples
                    .push((s.ts, s.cpu, expected, s.prev_tid));
            }
        }
    }
}

impl Stats {
    /// Count an inconsistent switch sequence of `tid` at `ts` (`dropped_ns`: off-CPU time
    /// of the open wait it dropped).
    pub(crate) fn note_inconsistent(
        &mut self,
        ts: u64,
        tid: Tid,
        switch_in: bool,
        dropped_ns: u64,
    ) {
        self.inconsistent += 1;
        if switch_in {
            self.inconsistent_in += 1;
        } else {
            self.inconsistent_out += 1;
            self.inconsistent_dropped_ns += dropped_ns;
        }
        if self.inconsistent_examples.len() < EXAMPLES {
            self.inconsistent_examples
                .push(Inconsistency { ts, tid, switch_in });
        }
    }
}

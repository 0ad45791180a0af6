//! On-CPU samples as a flame graph (`chainrec oncpu`): every [`Event::Sample`] of a thread
//! that passes the filter, folded as `comm;user frames root→leaf;-;kernel frames
//! root→leaf`, weighted by the CPU time a sample stands for (the recording's sampling
//! period). The samples are read straight from the trace: no engine run is needed.

use crate::analyses::TraceInput;
use crate::engine::frames::{sample_frames, ONCPU_FRAME};
use crate::{ChainError, Filter};
use chainrec_format::{Comm, Event, StackId, ThreadIdentity, Threads};
use rustc_hash::FxHashMap;
use std::collections::BTreeMap;

/// What [`fold_oncpu`](crate::fold_oncpu) saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OnCpuStats {
    /// Samples in the chunks read.
    pub samples: u64,
    /// Samples folded (passed the filter).
    pub shown: u64,
    /// Samples of the idle task folded.
    pub idle: u64,
    /// Folded samples without any stack (both stacks NONE or failed).
    pub no_stack: u64,
    /// CPU time one sample stands for (ns).
    pub period_ns: u64,
}

/// The on-CPU flame graph of a trace: folded line → samples.
#[derive(Clone, Debug, Default)]
pub struct OnCpuFold {
    /// Lines (`comm;frames…`) and their sample counts, sorted by line.
    pub lines: BTreeMap<String, u64>,
    /// Counters.
    pub stats: OnCpuStats,
}

impl OnCpuFold {
    /// Lines weighted in ns (samples × period).
    pub fn lines_ns(&self) -> impl Iterator<Item = (&str, u64)> {
        let p = self.stats.period_ns;
        self.lines.iter().map(move |(l, &n)| (l.as_str(), n * p))
    }
}

/// Fold the samples of `an` that pass `filter`: its thread part, and its window (on the
/// sample's time). Duration and state filters do not apply to samples and are refused.
pub(crate) fn fold_oncpu(
    an: &TraceInput<'_>,
    filter: &Filter,
    parallel: bool,
) -> Result<OnCpuFold, ChainError> {
    if filter.min_ns.is_some() || filter.max_ns.is_some() || filter.state_mask.is_some() {
        return Err(ChainError::SampleFilter);
    }
    let (tables, meta) = (an.tables(), an.meta());
    let mut threads = Threads::new(tables);
    let mut counts: FxHashMap<(Comm, StackId, StackId), u64> = FxHashMap::default();
    let mut st = OnCpuStats {
        period_ns: meta.sampling().map_or(0, |s| s.period_ns),
        ..OnCpuStats::default()
    };
    an.reader()
        .for_each_chunk::<ChainError>(an.chunk_range(filter), parallel, |evs| {
            for e in evs {
                threads.apply(e);
                let Event::Sample(x) = e else { continue };
                st.samples += 1;
                if filter.window.is_some_and(|(a, b)| x.ts < a || x.ts > b) {
                    continue;
                }
                // The idle task's samples are always the `swapper` stack, whatever the table says.
                let who = match x.tid {
                    0 => ThreadIdentity::unknown(0),
                    tid => threads.identity(tid),
                };
                if !filter.threads.matches_at(x.tid, &who, x.ts) {
                    continue;
                }
                st.shown += 1;
                st.idle += u64::from(x.tid == 0);
                let real = |s: StackId| s.is_real();
                st.no_stack += u64::from(!real(x.kstack) && !real(x.ustack));
                *counts.entry((who.comm, x.kstack, x.ustack)).or_default() += 1;
            }
            Ok(())
        })?;
    let mut lines = BTreeMap::new();
    for ((comm, k, u), n) in counts {
        let mut f = vec![comm.as_str().into_owned()];
        f.extend(sample_frames(tables, meta, k, u));
        *lines.entry(f.join(";")).or_default() += n;
    }
    Ok(OnCpuFold { lines, stats: st })
}

/// Frame after the comm of the off-CPU lines of [`hot_cold`].
pub(crate) const OFFCPU_FRAME: &str = "[off cpu]";

/// `hotcold`'s lines: per thread, its on-CPU samples (`comm;[on cpu];frames`, weighted
/// in ns) and its off-CPU waits with their chains (`comm;[off cpu];...`, from `cold`
/// folded lines in ns), with the hot and cold nanoseconds in total.
#[derive(Clone, Debug, Default)]
pub struct HotCold {
    /// The lines, hot first, and their weights in ns.
    pub lines: Vec<(String, u64)>,
    /// On-CPU time (samples × period).
    pub hot_ns: u64,
    /// Off-CPU time.
    pub cold_ns: u64,
}

/// Merge the samples of `hot` and the folded chain lines `cold` into [`HotCold`] lines.
pub fn hot_cold(hot: &OnCpuFold, cold: impl IntoIterator<Item = (String, u64)>) -> HotCold {
    let mut r = HotCold::default();
    // `comm;rest` becomes `comm;FRAME;rest`.
    let insert = |l: &str, frame: &str| {
        let (comm, rest) = l.split_once(';').unwrap_or((l, ""));
        let mut s = format!("{comm};{frame}");
        if !rest.is_empty() {
            s.push(';');
            s.push_str(rest);
        }
        s
    };
    for (l, ns) in hot.lines_ns() {
        r.hot_ns += ns;
        r.lines.push((insert(l, ONCPU_FRAME), ns));
    }
    for (l, ns) in cold {
        r.cold_ns += ns;
        r.lines.push((insert(&l, OFFCPU_FRAME), ns));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::{hot_cold, OnCpuFold, OnCpuStats};

    /// Hot lines get `[on cpu]` after the comm, cold ones `[off cpu]`; a bare comm gets
    /// the frame alone; the totals are the lines' ns.
    #[test]
    fn hot_cold_marks_each_line_after_its_comm() {
        let hot = OnCpuFold {
            lines: [("w;main;-;k".to_string(), 2), ("idle".to_string(), 1)].into(),
            stats: OnCpuStats {
                period_ns: 10,
                ..OnCpuStats::default()
            },
        };
        let hc = hot_cold(&hot, [("w;read;--;x".to_string(), 7)]);
        assert_eq!(
            hc.lines,
            [
                ("idle;[on cpu]".to_string(), 10),
                ("w;[on cpu];main;-;k".to_string(), 20),
                ("w;[off cpu];read;--;x".to_string(), 7),
            ]
        );
        assert_eq!((hc.hot_ns, hc.cold_ns), (30, 7));
    }
}

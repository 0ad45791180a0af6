//! Figures about a trace derived from its reader: what `chainrec info` prints beyond the
//! reader's own accessors.

use crate::{Event, Result, StackId, TraceReader, VerifyReport};

/// Derived figures of an open trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceFacts {
    /// Recorded end minus start; from the events when the recording did not finish.
    pub duration_ns: u64,
    /// File bytes holding readable data (a recovered file's ignored tail excluded) per event.
    pub bytes_per_event: f64,
    /// Symbols without a name.
    pub unresolved_symbols: usize,
    /// User-space symbols (one per process and address).
    pub user_symbols: usize,
    /// User-space symbols without a name.
    pub unresolved_user_symbols: usize,
}

impl TraceFacts {
    /// The figures of `r`.
    pub fn of(r: &TraceReader) -> Self {
        let m = r.meta();
        let duration_ns = if m.end_ns > m.start_ns {
            m.end_ns - m.start_ns
        } else {
            r.time_span().map_or(0, |(a, b)| b - a)
        };
        let events = r.event_count();
        let used = r.file_len() - r.recovery().map_or(0, |x| x.trailing_bytes);
        let bytes_per_event = if events > 0 {
            used as f64 / events as f64
        } else {
            0.0
        };
        let syms = &r.tables().symbols;
        let unresolved_symbols = syms.iter().filter(|s| s.name.is_none()).count();
        let user = || syms.iter().filter(|s| s.kind == crate::StackKind::User);
        TraceFacts {
            duration_ns,
            bytes_per_event,
            unresolved_symbols,
            user_symbols: user().count(),
            unresolved_user_symbols: user().filter(|s| s.name.is_none()).count(),
        }
    }
}

impl VerifyReport {
    /// References to stacks that were not captured for a failure (`FAILED`) or because the
    /// user stack was unreadable at a preemption (`USER_PREEMPTED`).
    pub fn missing_stacks(&self) -> u64 {
        self.reserved_stack_refs[StackId::FAILED.0 as usize]
            + self.reserved_stack_refs[StackId::USER_PREEMPTED.0 as usize]
    }
}

impl TraceReader {
    /// Event counts by kind and reserved stack references, by decoding every chunk: for a
    /// recovered file, whose counts are not in an index ([`TraceReader::indexed_stats`]).
    /// Unlike [`TraceReader::verify`], references are not checked.
    pub fn count_events(&self) -> Result<VerifyReport> {
        let mut rep = VerifyReport::default();
        self.for_each_chunk(0..self.chunks().len(), true, |ev| -> Result<()> {
            for e in ev {
                rep.events += 1;
                rep.events_by_kind[e.kind() as usize] += 1;
                for s in stack_refs(e) {
                    if !s.is_real() {
                        rep.reserved_stack_refs[s.0 as usize] += 1;
                    }
                }
            }
            Ok(())
        })?;
        Ok(rep)
    }
}

/// The stacks an event refers to.
fn stack_refs(e: &Event) -> Vec<StackId> {
    match e {
        Event::Switch(s) => vec![s.prev_kstack, s.prev_ustack],
        Event::Waking(w) => vec![w.waker_kstack, w.waker_ustack],
        Event::OffCpuStacks(o) => vec![o.kstack, o.ustack],
        _ => vec![],
    }
}

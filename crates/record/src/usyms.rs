//! User-space symbols: the addresses of each new user stack are looked up in the mapping
//! history ([`crate::mappings`]) at the time of the stack, and resolved by object and
//! file offset (`chainrec-symbols`: symbol tables, DWARF with inlined functions, debug
//! links, build-id debug files, perf maps). Processes need not be alive any more.

use crate::mappings::MappingTracker;
use chainrec_format::{MappingEntry, SymbolEntry, Tid};
use chainrec_symbols::{Symbolizer, Unresolved, UnresolvedCounts};
use std::time::{Duration, Instant};

/// Resolves user addresses through the recording's mapping history.
pub struct UserSymbolizer {
    /// The mapping history and its perf events.
    pub tracker: MappingTracker,
    symbolizer: Symbolizer,
    /// Unresolved user frames by reason.
    pub unresolved: UnresolvedCounts,
    /// Time spent reading mapping records and symbolizing (consumer thread).
    pub busy: Duration,
    /// Why the perf events could not be opened (mappings then come from `/proc` only).
    pub events_error: Option<String>,
}

impl UserSymbolizer {
    /// Open the mapping events on `cpus` and scan `/proc`; debug files are searched in
    /// `debug_dirs`, then `/usr/lib/debug` and `/lib/debug`.
    pub fn new(cpus: &[u32], debug_dirs: &[std::path::PathBuf]) -> Self {
        let t0 = Instant::now();
        let (tracker, events_error) = match MappingTracker::start(cpus) {
            Ok(t) => (t, None),
            Err(e) => {
                let mut t = MappingTracker::without_events();
                t.scan_all_now();
                (t, Some(e.to_string()))
            }
        };
        UserSymbolizer {
            tracker,
            symbolizer: Symbolizer::new(debug_dirs),
            unresolved: UnresolvedCounts::default(),
            busy: t0.elapsed(),
            events_error,
        }
    }

    /// Apply the mapping records that arrived (call before [`UserSymbolizer::resolve`]
    /// on each poll).
    pub fn poll(&mut self, now: u64) {
        let t0 = Instant::now();
        self.tracker.poll(now);
        self.busy += t0.elapsed();
    }

    /// Resolve `addrs` of process `tgid` seen in stacks at about `ts`. One entry per
    /// address (name None when unresolved, counted by reason in `unresolved`).
    /// `is_caller[i]`: `addrs[i]` is a return address (named by its call instruction).
    pub fn resolve(
        &mut self,
        tgid: Tid,
        addrs: &[u64],
        is_caller: &[bool],
        ts: u64,
        now: u64,
    ) -> Vec<SymbolEntry> {
        let t0 = Instant::now();
        let (mut syms, mut why) =
            self.symbolizer
                .resolve_user(&mut self.tracker.history, tgid, addrs, is_caller, ts);
        // Addresses in no known mapping of a live process: its records were lost or it
        // predates them; read its maps once and try again.
        let missing: Vec<usize> = (0..addrs.len())
            .filter(|&i| why[i] == Some(Unresolved::NoMapping))
            .collect();
        if !missing.is_empty() && self.tracker.rescan_once(tgid, now) {
            let again: Vec<u64> = missing.iter().map(|&i| addrs[i]).collect();
            let again_caller: Vec<bool> = missing.iter().map(|&i| is_caller[i]).collect();
            let (s2, w2) = self.symbolizer.resolve_user(
                &mut self.tracker.history,
                tgid,
                &again,
                &again_caller,
                now,
            );
            for ((&i, s), w) in missing.iter().zip(s2).zip(w2) {
                syms[i] = s;
                why[i] = w;
            }
        }
        for w in why.into_iter().flatten() {
            self.unresolved.add(w);
        }
        self.busy += t0.elapsed();
        syms
    }

    /// Mappings used by frames that the trace does not have yet (or whose end changed).
    pub fn take_mappings(&mut self) -> Vec<MappingEntry> {
        self.tracker.history.take_changed()
    }
}

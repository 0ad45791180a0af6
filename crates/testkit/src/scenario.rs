//! Synthetic scenarios (`chainrec_format::synth`) as traces, in memory or in a file.

use chainrec_format::synth::{self, SynthParams};
use chainrec_format::{MemTrace, StackKind, SymbolEntry, TraceWriter, WriterOptions};
use std::path::Path;

/// Generate scenario `name` (seed 1, `events` events) into `m`, whose metadata the caller
/// may have set (e.g. the lazy-stack threshold).
pub fn generate_into(name: &str, events: u64, mut m: MemTrace) -> MemTrace {
    let s = synth::find(name).unwrap_or_else(|| panic!("no scenario {name}"));
    (s.generate)(&SynthParams { events, seed: 1 }, &mut m).unwrap();
    m
}

/// Scenario `name` into a fresh [`MemTrace`].
pub fn generate(name: &str, events: u64) -> MemTrace {
    generate_into(name, events, MemTrace::default())
}

/// Scenario `name` written to `path` with chunks of `chunk_events` events and metadata
/// `meta_of` (a trace built by [`generate_into`] for the same scenario).
pub fn write(path: &Path, name: &str, events: u64, chunk_events: usize, meta_of: &MemTrace) {
    let opts = WriterOptions {
        chunk_events,
        ..WriterOptions::default()
    };
    let mut w = TraceWriter::create(path, &meta_of.meta, opts).unwrap();
    let s = synth::find(name).unwrap_or_else(|| panic!("no scenario {name}"));
    (s.generate)(&SynthParams { events, seed: 1 }, &mut w).unwrap();
    w.finish(&meta_of.meta).unwrap();
}

/// Rename user function `old` to `new` in every process of `m` (as the recorder names an
/// address with functions inlined at it: `fn;outer [inlined];inner [inlined]`). Panics
/// when no user symbol is named `old`.
pub fn rename_user_function(m: &mut MemTrace, old: &str, new: &str) {
    let renamed: Vec<SymbolEntry> = m
        .tables
        .symbols
        .iter()
        .filter(|s| s.kind == StackKind::User && s.name == Some(old))
        .map(|s| SymbolEntry {
            name: Some(new.to_string()),
            ..s.to_entry()
        })
        .collect();
    assert!(!renamed.is_empty(), "no user symbol {old}");
    m.tables.symbols.extend(&renamed);
}

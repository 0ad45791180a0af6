//! `Analysis`: the one engine set-up (trace start, window → chunks, automatic dedup, damage
//! policy) gives what a hand-built engine gives, and refuses or salvages damage as told.

mod common;

use chainrec_chain::{
    Analysis, ChainError, DamagePolicy, Dedup, Filter, FoldedSink, Setup, TraceWarning, View,
};
use common::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Scenario `name` written to a file in `dir` with small chunks (many for the decoder).
fn write(dir: &Path, name: &str, events: u64) -> PathBuf {
    let path = dir.join(format!("{name}.zst"));
    chainrec_testkit::scenario::write(&path, name, events, 97, &gen(name, events));
    path
}

use chainrec_testkit::scratch::dir as scratch;

fn quiet() -> chainrec_chain::WarnFn {
    Arc::new(|w: TraceWarning<'_>| panic!("unexpected warning {w:?}"))
}

#[test]
fn fold_and_run_equal_a_hand_built_engine() {
    let dir = scratch("equal");
    let path = write(&dir, "pipe-relay", 3_000);
    let m = gen("pipe-relay", 3_000);
    let an = Analysis::open(&path, DamagePolicy::Refuse, quiet()).unwrap();
    // No start time in the metadata: the first event is the start.
    assert_eq!(an.start_ns(), m.events[0].ts());
    for view in [View::Chains, View::OffCpu, View::Wakeup, View::OffWake] {
        // The same configuration on both sides (the shared cfg() is the blocked-only graph).
        let want = run(&m, cfg(), view);
        let setup = || Setup {
            runqueue: cfg().runqueue,
            ..Setup::default()
        };
        let (summary, graph) = an.fold(setup(), view, |_| {}).unwrap();
        assert_eq!(graph.folded_ns(), want.folded, "{view:?}");
        assert_eq!(summary.stats, want.stats, "{view:?}");
        assert!(summary.dedup, "no filter: dedup on");
        assert_eq!(summary.chunks, 0..an.reader().chunks().len());

        let mut sink = FoldedSink::new(view);
        let mut events = 0;
        let done = an.run(setup(), &mut sink, |n| events += n as u64).unwrap();
        assert_eq!(events, an.reader().event_count());
        assert_eq!(
            sink.folded_ns(done.nodes(), an.tables(), an.meta()),
            want.folded
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dedup_is_automatic_only_without_a_thread_filter() {
    let dir = scratch("dedup");
    let path = write(&dir, "pipe-relay", 3_000);
    let an = Analysis::open(&path, DamagePolicy::Refuse, quiet()).unwrap();
    let tid = *an.tables().tasks.keys().min().unwrap();
    let by_tid = Filter {
        threads: chainrec_format::ThreadSelector {
            tids: vec![tid],
            ..Default::default()
        },
        ..Filter::default()
    };
    let cases = [
        (Dedup::Auto, Filter::default(), true),
        (Dedup::Auto, by_tid.clone(), false),
        (Dedup::On, by_tid, true),
        (Dedup::Off, Filter::default(), false),
    ];
    for (dedup, filter, want) in cases {
        let setup = Setup {
            dedup,
            filter,
            ..Setup::default()
        };
        let (summary, _) = an.fold(setup, View::Chains, |_| {}).unwrap();
        assert_eq!(summary.dedup, want, "{dedup:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_window_stops_decoding_after_it() {
    let dir = scratch("window");
    let path = write(&dir, "pipe-relay", 3_000);
    let an = Analysis::open(&path, DamagePolicy::Refuse, quiet()).unwrap();
    let chunks = an.reader().chunks();
    assert!(chunks.len() > 4, "{} chunks", chunks.len());
    let end = chunks[1].last_ts;
    let filter = Filter {
        window: Some((an.start_ns(), end)),
        ..Filter::default()
    };
    let want = 0..an.reader().chunks_in_window(0, end).end;
    assert!(want.end < chunks.len());
    assert_eq!(an.chunk_range(&filter), want);
    let setup = Setup {
        filter,
        ..Setup::default()
    };
    let (summary, _) = an.fold(setup, View::Chains, |_| {}).unwrap();
    assert_eq!(summary.chunks, want);
    assert_eq!(summary.window, Some((an.start_ns(), end)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_chunk_is_refused_or_salvaged() {
    let dir = scratch("damage");
    let path = write(&dir, "pipe-relay", 3_000);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();

    let refused = match Analysis::open(&path, DamagePolicy::Refuse, quiet()) {
        Err(e) => e,
        Ok(an) => an
            .fold(Setup::default(), View::Chains, |_| {})
            .err()
            .unwrap(),
    };
    assert!(refused.is_damage(), "{refused}");
    assert!(
        matches!(
            refused,
            ChainError::DamagedChunk(_) | ChainError::Damaged { .. }
        ),
        "{refused:?}"
    );

    let warnings = Arc::new(Mutex::new(Vec::new()));
    let w = warnings.clone();
    let warn = Arc::new(move |t: TraceWarning<'_>| w.lock().unwrap().push(format!("{t:?}")));
    let an = Analysis::open(&path, DamagePolicy::Salvage, warn).unwrap();
    let (summary, _) = an.fold(Setup::default(), View::Chains, |_| {}).unwrap();
    assert!(summary.stats.events > 0);
    assert!(summary.stats.events < an.reader().event_count() || an.reader().recovery().is_some());
    assert!(
        !warnings.lock().unwrap().is_empty(),
        "salvaged without a warning"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

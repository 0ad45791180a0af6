//! Trace → folded paths on two threads: the engine walk (copying what each wait's paths
//! need) on the calling thread, path reduction and path-trie insertion on a second one.

use crate::graph::paths::PathReducer;
use crate::graph::spill::SpillTo;
use crate::graph::waits::{WaitCopier, WaitCopies};
use crate::{ChainError, Engine, FoldedSink, Stats, View};
use chainrec_format::TraceReader;
use std::ops::Range;
use std::sync::mpsc;

/// Waits per batch handed from the engine thread to the trie thread: large enough for
/// the trie's batched insertion to overlap its memory lookups, small enough to stay in
/// cache.
const BATCH_WAITS: usize = 4096;

/// Batches queued between the two threads. Each holds the paths of [`BATCH_WAITS`]
/// waits (about 1.5 MB on busy-server), and every batch buffer made stays allocated at
/// the size of the largest batch it held: 8 queued batches and up to 4 spares were
/// ~19 MB of busy20m's peak heap (session 27, heaptrack). The walking thread is the
/// slower one, so a short queue rarely makes it wait.
const QUEUED_BATCHES: usize = 2;

/// Events walked between two hand-overs of completed batches (a decoded chunk holds
/// 65,536: walked whole, its waits completed up to five batches before any was sent).
const WALK_STEP: usize = 1 << 14;

/// Run `engine` over the chunks `range` of `reader` (decoded with rayon when
/// `parallel`) and fold its records for `view`, calling `on_chunk(events)` after each
/// chunk (progress; an error stops the run with it). This thread walks and copies what
/// path reduction reads of each wait (`graph::waits`); a second thread reduces the copies
/// to trie paths and inserts them into the path trie: the walk is the critical path, and
/// copying a wait costs it less than reducing it. The result equals feeding a
/// [`FoldedSink`] directly (tests/batch.rs); the trie's lookup index is already freed
/// ([`FoldedSink::release_index`]), ready for rendering.
pub(crate) fn fold_trace(
    reader: &TraceReader,
    range: Range<usize>,
    parallel: bool,
    engine: &mut Engine<'_>,
    view: View,
    spill: Option<&SpillTo>,
    mut on_chunk: impl FnMut(usize) -> Result<(), ChainError>,
) -> Result<(Stats, FoldedSink), ChainError> {
    let mut folded = FoldedSink::new(view);
    if let Some(to) = spill {
        folded.spill_to(to).map_err(|source| ChainError::Spill {
            dir: to.dir.clone(),
            source,
        })?;
    }
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::sync_channel::<WaitCopies>(QUEUED_BATCHES);
        let (back_tx, back_rx) = mpsc::channel::<WaitCopies>();
        let folder = s.spawn(move || {
            let mut reducer = PathReducer::new(view, BATCH_WAITS);
            for copies in rx {
                copies.reduce_into(&mut reducer);
                while let Some(b) = reducer.take_full() {
                    folded.apply(&b);
                    reducer.recycle(b);
                }
                // The copier may be gone at the end: a lost spare buffer is harmless.
                let _ = back_tx.send(copies);
            }
            folded.absorb(reducer);
            folded
        });
        let mut copier = WaitCopier::new(view, BATCH_WAITS);
        let send = |copier: &mut WaitCopier| -> Result<(), ChainError> {
            while let Ok(b) = back_rx.try_recv() {
                copier.recycle(b);
            }
            while let Some(b) = copier.take_full() {
                tx.send(b)
                    .map_err(|_| ChainError::FoldThread("stopped early"))?;
            }
            Ok(())
        };
        let walked = reader.for_each_chunk::<ChainError>(range, parallel, |evs| {
            for step in evs.chunks(WALK_STEP) {
                engine.process(step, &mut copier);
                send(&mut copier)?;
            }
            on_chunk(evs.len())
        });
        let stats = walked.map(|()| engine.finish(&mut copier));
        let sent = send(&mut copier).and_then(|()| {
            tx.send(copier.take_partial())
                .map_err(|_| ChainError::FoldThread("stopped early"))
        });
        drop(tx);
        let mut folded = folder
            .join()
            .map_err(|_| ChainError::FoldThread("panicked"))?;
        let stats = stats?;
        sent?;
        folded.finish_spill();
        folded.release_index();
        Ok((stats, folded))
    })
}

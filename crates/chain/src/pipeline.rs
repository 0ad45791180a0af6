//! Trace → folded paths on two threads: the engine walk (with view reduction) on the
//! calling thread, path-trie insertion on a second one.

use crate::graph::paths::{PathBatch, PathReducer};
use crate::graph::spill::SpillTo;
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
/// chunk (progress; an error stops the run with it). This thread decodes, walks and reduces each wait to trie paths; a
/// second thread inserts the batches into the path trie. The result equals feeding a
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
        let (tx, rx) = mpsc::sync_channel::<PathBatch>(QUEUED_BATCHES);
        let (back_tx, back_rx) = mpsc::channel::<PathBatch>();
        let folder = s.spawn(move || {
            for b in rx {
                folded.apply(&b);
                // The reducer may be gone at the end: a lost spare buffer is harmless.
                let _ = back_tx.send(b);
            }
            folded
        });
        let mut reducer = PathReducer::new(view, BATCH_WAITS);
        let send = |reducer: &mut PathReducer| -> Result<(), ChainError> {
            while let Ok(b) = back_rx.try_recv() {
                reducer.recycle(b);
            }
            while let Some(b) = reducer.take_full() {
                tx.send(b)
                    .map_err(|_| ChainError::FoldThread("stopped early"))?;
            }
            Ok(())
        };
        let walked = reader.for_each_chunk::<ChainError>(range, parallel, |evs| {
            for step in evs.chunks(WALK_STEP) {
                engine.process(step, &mut reducer);
                send(&mut reducer)?;
            }
            on_chunk(evs.len())
        });
        let stats = walked.map(|()| engine.finish(&mut reducer));
        let sent = send(&mut reducer);
        drop(tx);
        let mut folded = folder
            .join()
            .map_err(|_| ChainError::FoldThread("panicked"))?;
        let stats = stats?;
        sent?;
        folded.absorb(reducer);
        folded.finish_spill();
        folded.release_index();
        Ok((stats, folded))
    })
}

//! Compact copies of wait records, reduced to trie paths on the trie thread
//! (`pipeline::fold_trace`): the walking thread, the pipeline's critical path, only copies
//! what [`PathReducer`] reads of each wait (its [`Head`], and per level the node, share,
//! parent and kind), which costs less than reducing it there.

use crate::engine::nodes::NodeTable;
use crate::engine::record::{Level, LevelCopy, OnCpuPart, RunqPart, WaitRecord, WaitSink};
use crate::graph::paths::{Batches, Head, PathReducer, Reuse, WaitView};
use crate::graph::views::View;

/// One copied wait: its head and how many levels and parts it has in the batch's arrays.
#[derive(Clone, Copy, Debug)]
struct Copied {
    head: Head,
    hops: u32,
    runq: u32,
    oncpu: u32,
}

/// Copies of waits in order, their levels and parts in flat arrays (reused buffers).
#[derive(Clone, Debug, Default)]
pub(crate) struct WaitCopies {
    waits: Vec<Copied>,
    levels: Vec<LevelCopy>,
    runq: Vec<RunqPart>,
    oncpu: Vec<OnCpuPart>,
    /// Waits the view leaves out whatever they hold ([`Head::surely_out`]): counted, not
    /// copied.
    out: u64,
}

impl Reuse for WaitCopies {
    fn reset(&mut self) {
        self.waits.clear();
        self.levels.clear();
        self.runq.clear();
        self.oncpu.clear();
        self.out = 0;
    }
}

impl WaitCopies {
    /// Copy `w` (or count it, when `view` leaves it out).
    fn push(&mut self, view: View, w: &WaitRecord) {
        let head = Head::of(w);
        if head.surely_out(view) {
            self.out += 1;
            return;
        }
        self.levels.extend(w.hops.iter().map(Level::level));
        self.runq.extend_from_slice(&w.runq);
        self.oncpu.extend_from_slice(&w.oncpu);
        self.waits.push(Copied {
            head,
            hops: w.hops.len() as u32,
            runq: w.runq.len() as u32,
            oncpu: w.oncpu.len() as u32,
        });
    }

    /// Reduce the copies, in order, into `reducer`: what it would have made of the
    /// records themselves.
    pub(crate) fn reduce_into(&self, reducer: &mut PathReducer) {
        reducer.add_out(self.out);
        let (mut h, mut q, mut c) = (0, 0, 0);
        for w in &self.waits {
            let (h2, q2, c2) = (
                h + w.hops as usize,
                q + w.runq as usize,
                c + w.oncpu as usize,
            );
            reducer.add(&WaitView {
                head: w.head,
                hops: &self.levels[h..h2],
                runq: &self.runq[q..q2],
                oncpu: &self.oncpu[c..c2],
            });
            (h, q, c) = (h2, q2, c2);
        }
    }
}

/// A [`WaitSink`] that copies each wait for reduction elsewhere, completing a batch of
/// copies every `batch_waits` waits.
#[derive(Debug)]
pub(crate) struct WaitCopier {
    view: View,
    batch_waits: usize,
    batches: Batches<WaitCopies>,
}

impl WaitCopier {
    /// A copier for `view` completing a batch every `batch_waits` waits (at least 1).
    pub(crate) fn new(view: View, batch_waits: usize) -> Self {
        WaitCopier {
            view,
            batch_waits: batch_waits.max(1),
            batches: Batches::default(),
        }
    }

    /// The oldest completed batch, if any.
    pub(crate) fn take_full(&mut self) -> Option<WaitCopies> {
        self.batches.take_full()
    }

    /// The batch being filled (possibly empty), after every full one.
    pub(crate) fn take_partial(&mut self) -> WaitCopies {
        self.batches.take_partial()
    }

    /// Give back a reduced batch for reuse of its buffers.
    pub(crate) fn recycle(&mut self, b: WaitCopies) {
        self.batches.recycle(b);
    }
}

impl WaitSink for WaitCopier {
    fn on_wait(&mut self, w: &WaitRecord, _nodes: &NodeTable) {
        let cur = &mut self.batches.cur;
        cur.push(self.view, w);
        if cur.waits.len() + cur.out as usize >= self.batch_waits {
            self.batches.complete();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::mode::Mode;
    use crate::engine::nodes::NodeId;
    use crate::graph::paths::PathBatch;
    use crate::{Config, Engine};
    use chainrec_format::{synth, MemTrace};

    /// Every path batch a reducer would make from the records, in order.
    fn drain(r: &mut PathReducer, out: &mut Vec<PathBatch>) {
        while let Some(b) = r.take_full() {
            out.push(b);
        }
    }

    fn paths(b: &PathBatch) -> (Vec<Vec<(NodeId, u64)>>, u64, u64) {
        let v = (0..b.len())
            .map(|i| {
                let (n, w) = b.path(i);
                n.iter().copied().zip(w.iter().copied()).collect()
            })
            .collect();
        (v, b.waits_in_view, b.waits_not_in_view)
    }

    /// Reducing the copies gives the batches that reducing the records gives, path for
    /// path, on every scenario (DAG levels, lost events, run-queue and on-CPU parts) in
    /// both modes, with and without dedup and run-queue attribution, in every view.
    #[test]
    fn copies_reduce_to_the_records_paths() {
        let mut traces: Vec<MemTrace> = synth::scenarios()
            .into_iter()
            .map(|s| {
                let params = synth::SynthParams {
                    events: 4_000,
                    seed: 1,
                };
                let m = MemTrace {
                    meta: synth::meta(s.name, &params, vec![]),
                    ..MemTrace::default()
                };
                chainrec_testkit::scenario::generate_into(s.name, params.events, m)
            })
            .collect();
        traces.push(chainrec_testkit::scenario::generate_into(
            "busy-server",
            100_000,
            MemTrace::default(),
        ));
        let configs = [
            Config::default(),
            Config {
                runqueue: false,
                ..Config::default()
            },
            Config {
                dedup: false,
                max_depth: 2,
                ..Config::default()
            },
            Config {
                mode: Mode::Last,
                ..Config::default()
            },
        ];
        for m in &traces {
            for c in &configs {
                for view in [View::Chains, View::OffCpu, View::Wakeup, View::OffWake] {
                    let mut engine = Engine::new(&m.tables, &m.meta, c.clone());
                    let mut pair = (PathReducer::new(view, 97), WaitCopier::new(view, 61));
                    let mut from_copies = PathReducer::new(view, 97);
                    let (mut want, mut got) = (Vec::new(), Vec::new());
                    let mut step = |pair: &mut (PathReducer, WaitCopier), last: bool| {
                        drain(&mut pair.0, &mut want);
                        while let Some(b) = pair.1.take_full() {
                            b.reduce_into(&mut from_copies);
                            pair.1.recycle(b);
                        }
                        if last {
                            pair.1.take_partial().reduce_into(&mut from_copies);
                            want.push(pair.0.take_partial());
                        }
                        drain(&mut from_copies, &mut got);
                        if last {
                            got.push(from_copies.take_partial());
                        }
                    };
                    for chunk in m.events.chunks(1 << 12) {
                        engine.process(chunk, &mut pair);
                        step(&mut pair, false);
                    }
                    engine.finish(&mut pair);
                    step(&mut pair, true);
                    let ctx = format!("{view:?} {:?}", c);
                    assert!(want.iter().any(|b| b.steps() > 0), "{ctx}");
                    assert_eq!(want.len(), got.len(), "{ctx}");
                    for (w, g) in want.iter().zip(&got) {
                        // Waits left out are counted at a copy batch's start, not in
                        // place: only their sum is the same.
                        let ((wp, wi, _), (gp, gi, _)) = (paths(w), paths(g));
                        assert_eq!((wp, wi), (gp, gi), "{ctx}");
                    }
                    let out = |v: &[PathBatch]| v.iter().map(|b| b.waits_not_in_view).sum::<u64>();
                    assert_eq!(out(&want), out(&got), "{ctx}");
                    assert_eq!(pair.0.comms.list, from_copies.comms.list, "{ctx}");
                }
            }
        }
    }
}

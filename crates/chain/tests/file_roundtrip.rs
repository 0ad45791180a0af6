//! The engine gives the same answer from a trace file (written by `TraceWriter`, decoded
//! in parallel by `TraceReader::for_each_chunk`) as from the in-memory scenario.

mod common;

use chainrec_chain::{Engine, FoldedSink, View};
use chainrec_format::synth;
use chainrec_format::TraceReader;
use common::*;

#[test]
fn file_and_memory_agree_for_every_exact_scenario() {
    let dir = chainrec_testkit::scratch::dir("chain-rt");
    for sc in synth::scenarios()
        .into_iter()
        .filter(|s| s.name != "busy-server")
    {
        let m = gen(sc.name, 2_000);
        let path = dir.join(format!("{}.zst", sc.name));
        // Small chunks so that the parallel decoder has many of them.
        chainrec_testkit::scenario::write(&path, sc.name, 2_000, 97, &m);
        let r = TraceReader::open(&path).unwrap();
        for view in [View::Chains, View::OffCpu, View::Wakeup, View::OffWake] {
            let want = run(&m, cfg(), view);
            let mut engine = Engine::new(r.tables(), r.meta(), cfg());
            let mut sink = FoldedSink::new(view);
            r.for_each_chunk::<chainrec_format::FormatError>(0..r.chunks().len(), true, |evs| {
                engine.process(evs, &mut sink);
                Ok(())
            })
            .unwrap();
            let stats = engine.finish(&mut sink);
            let got = sink.folded_ns(engine.nodes(), r.tables(), r.meta());
            assert_eq!(got, want.folded, "{} {view:?}", sc.name);
            assert_eq!(stats, want.stats, "{} {view:?}", sc.name);
            assert!(!got.is_empty(), "{} {view:?} produced nothing", sc.name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

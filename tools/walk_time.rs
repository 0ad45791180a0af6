//! Time the `chains` walking thread alone: the engine walk with path reduction (batches
//! discarded) over a trace file's events, decoded into memory first so that neither
//! decoding nor trie insertion is measured.
//!
//! ```text
//! cargo run --release -p chainrec-tools --bin walk_time -- /tmp/busy50.zst [ROUNDS]
//! ```
//!
//! Needs about 40 bytes of memory per event (2 GB for 50 M events).
use chainrec_chain::fold::PathReducer;
use chainrec_chain::{Config, Engine, View};
use chainrec_format::Event;
use std::time::Instant;

mod decoded;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: walk_time TRACE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = match args.next().map(|s| s.parse()) {
        None => 3,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!(
                "walk_time: ROUNDS must be a positive number\nusage: walk_time TRACE [ROUNDS]"
            );
            std::process::exit(2);
        }
    };
    let mut chunks: Vec<Vec<Event>> = Vec::new();
    let r = decoded::decode("walk_time", &path, |ev| chunks.push(ev.to_vec()));
    let n: usize = chunks.iter().map(Vec::len).sum();
    for round in 0..rounds {
        let mut engine = Engine::new(r.tables(), r.meta(), Config::default());
        let mut reducer = PathReducer::new(View::Chains, 4096);
        let mut steps = 0usize;
        let t0 = Instant::now();
        for c in &chunks {
            engine.process(c, &mut reducer);
            while let Some(b) = reducer.take_full() {
                steps += b.steps();
                reducer.recycle(b);
            }
        }
        let st = engine.finish(&mut reducer);
        let dt = t0.elapsed();
        eprintln!(
            "round {round}: {n} events in {:.3} s = {:.1} ns/event ({:.1} M events/s); \
             {} waits emitted, {} trie steps, {} nodes, {} GC runs, peak {} tasks / {} hops / \
             {} run-queue history entries",
            dt.as_secs_f64(),
            dt.as_nanos() as f64 / n.max(1) as f64,
            n as f64 / dt.as_secs_f64() / 1e6,
            st.records_emitted,
            steps,
            engine.nodes().len(),
            st.gc_runs,
            st.peak_tasks,
            st.peak_live_hops,
            st.peak_runq_history,
        );
    }
}

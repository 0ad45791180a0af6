//! Functions inlined at an address in `waits --json -F` (and so in the Parquet stacks
//! table and `script -F`, which name frames the same way): frames of their own, leaf first
//! like the rest of the stack, in the waiting thread's stack and in a waker's.

use chainrec_chain::{Config, Engine, NodeTable, TraceRef, WaitRecord};
use chainrec_format::MemTrace;
use chainrec_report::waits::{WaitContext, WaitJson};

/// pipe-relay with cr-relay's `relay_loop` an address in `relay_main` where `relay_loop`
/// and, inside it, `relay_io` are inlined (the recorder's name for such an address).
fn inlined_relay() -> MemTrace {
    let mut t = chainrec_testkit::scenario::generate("pipe-relay", 18);
    chainrec_testkit::scenario::rename_user_function(
        &mut t,
        "relay_loop",
        "relay_main;relay_loop [inlined];relay_io [inlined]",
    );
    t
}

#[test]
fn waits_json_lists_inlined_frames_leaf_first() {
    let t = inlined_relay();
    let trace = TraceRef {
        tables: &t.tables,
        meta: &t.meta,
        start_ns: t.meta.start_ns,
    };
    let cfg = Config {
        dedup: false,
        ..Config::default()
    };
    let mut engine = Engine::new(&t.tables, &t.meta, cfg);
    let mut waits = Vec::new();
    let mut sink = |w: &WaitRecord, nodes: &NodeTable| {
        waits.push(WaitJson::new(w, &WaitContext::new(nodes, trace, true)));
    };
    engine.process(&t.events, &mut sink);
    engine.finish(&mut sink);
    let relay_frames = |verb: &str| {
        vec![
            verb.to_string(),
            "relay_io [inlined]".into(),
            "relay_loop [inlined]".into(),
            "relay_main".into(),
        ]
    };
    // cr-relay waiting in read.
    let relay = waits.iter().find(|w| w.comm == "cr-relay").unwrap();
    assert_eq!(relay.node.uframes, Some(relay_frames("read")));
    // cr-relay waking cr-sink with write.
    let sink = waits
        .iter()
        .find(|w| w.comm == "cr-sink" && !w.hops.is_empty())
        .unwrap();
    let hop = &sink.hops[0];
    assert_eq!(hop.waker_comm, "cr-relay");
    assert_eq!(hop.node.uframes, Some(relay_frames("write")));
    let json = serde_json::to_string(sink).unwrap();
    assert!(
        json.contains(
            r#""uframes":["write","relay_io [inlined]","relay_loop [inlined]","relay_main"]"#
        ),
        "{json}"
    );
}

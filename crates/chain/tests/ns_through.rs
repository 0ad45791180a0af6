//! `FoldedSink::ns_through` (the explorer's `/api/waits`: a wait's nanoseconds through one
//! frame, found without rendering its lines) equals filtering the rendered lines, for every
//! frame of every line of each wait, on scenarios with branches, run-queue levels, inlined
//! frames and interrupts.

mod common;

use chainrec_chain::{Config, FoldedSink, NodeTable, PieceNames, View, WaitRecord, WaitSink};
use common::*;

/// Whether folded `line` passes through the frame whose path is `prefix`.
fn through(line: &str, prefix: &str) -> bool {
    line.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with(';'))
}

fn check(scenario: &str, events: u64, cfg: Config) {
    let m = gen(scenario, events);
    let mut engine = chainrec_chain::Engine::new(&m.tables, &m.meta, cfg);
    let mut names = PieceNames::new(&m.tables, m.meta.stack_threshold_ns);
    let (mut waits, mut prefixes) = (0u64, 0u64);
    {
        let mut sink = |w: &WaitRecord, nodes: &NodeTable| {
            let mut one = FoldedSink::new(View::Chains);
            one.on_wait(w, nodes);
            let lines = one.folded_ns(nodes, &m.tables, &m.meta);
            waits += 1;
            // Every frame boundary of every line, and two that match nothing.
            let mut asked: Vec<String> = vec!["no-such-frame".into()];
            for line in lines.keys() {
                let frames: Vec<&str> = line.split(';').collect();
                for n in 1..=frames.len() {
                    asked.push(frames[..n].join(";"));
                }
                // Part of a frame's name is no frame.
                asked.push(line[..line.len() / 2].to_string());
            }
            for prefix in asked {
                let want: u64 = lines
                    .iter()
                    .filter(|(l, _)| through(l, &prefix))
                    .map(|(_, ns)| ns)
                    .sum();
                let got = one.ns_through(nodes, &mut names, &prefix);
                assert_eq!(
                    got, want,
                    "{scenario}: wait of tid {} through {prefix:?}",
                    w.tid
                );
                prefixes += 1;
            }
        };
        engine.process(&m.events, &mut sink);
        engine.finish(&mut sink);
    }
    assert!(waits > 10, "{scenario}: only {waits} waits");
    assert!(prefixes > 100, "{scenario}: only {prefixes} prefixes");
}

#[test]
fn ns_through_equals_the_lines_through_the_frame() {
    let with_runqueue = Config::default();
    check("timer-waits", 36, cfg());
    check("timer-waits", 36, with_runqueue.clone());
    check("deep-chain", 400, with_runqueue.clone());
    check("disk-irq", 400, with_runqueue.clone());
    check("busy-server", 20_000, with_runqueue);
}

#[test]
fn a_frame_inside_a_piece_and_partial_names() {
    // "a;b" through "a" and "a;b", not "a;" nor "a;bc" (whole frames only).
    assert!(through("a;b", "a"));
    assert!(!through("a;bc", "a;b"));
}

//! Functions inlined at an address (DWARF) are frames of their own, in stack order at every
//! level: root to leaf in the waiting thread's stack and in `[on cpu]` samples, leaf to
//! root in a waker's level, like the frames around them. The recorder stores such an
//! address's name as `fn;outer [inlined];inner [inlined]` (outermost first,
//! `chainrec_symbols::FrameSymbol::display_name`); here synthetic scenarios get names of
//! that form and the exact folded lines are checked.
mod common;

use chainrec_chain::{stack_frames, View};
use chainrec_format::{MemTrace, WriterOptions};
use chainrec_testkit::scenario::rename_user_function as rename;
use std::collections::BTreeMap;

/// pipe-relay with cr-relay's `relay_loop` an address in `relay_main` where `relay_loop`
/// and, inside it, `relay_io` are inlined.
fn pipe_relay() -> MemTrace {
    let mut m = common::gen("pipe-relay", 18);
    rename(
        &mut m,
        "relay_loop",
        "relay_main;relay_loop [inlined];relay_io [inlined]",
    );
    m
}

const SINK: &str = "cr-sink;sink_loop;read;-;ksys_read;pipe_read;schedule";
const TIMER_ROOT: &str =
    "cr-timer;timer_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule";
const L_TIMER: &str = "--;try_to_wake_up;pipe_write;ksys_write;-;write;timer_loop;cr-timer";
const L_IRQ: &str =
    "--;try_to_wake_up;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;[hardirq: timer]";
/// cr-relay waiting: root to leaf, so `relay_main` calls `relay_loop`, which calls
/// `relay_io`, which calls `read`.
const RELAY_ROOT: &str = "cr-relay;relay_main;relay_loop [inlined];relay_io [inlined];read;-;ksys_read;pipe_read;schedule";
/// cr-relay waking cr-sink: leaf to root, so `write` is called by `relay_io`, called by
/// `relay_loop`, called by `relay_main`.
const L_RELAY: &str = "--;try_to_wake_up;pipe_write;ksys_write;-;write;relay_io [inlined];relay_loop [inlined];relay_main;cr-relay";

fn j(parts: &[&str]) -> String {
    parts.join(";")
}

fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(l, n)| (l.to_string(), *n)).collect()
}

/// The weights of `pipe_relay_no_dedup_shows_every_root` (exact.rs); only the names of
/// cr-relay's frames differ.
#[test]
fn inlined_frames_in_stack_order_in_waiter_and_waker_levels() {
    let m = pipe_relay();
    let r = common::run(&m, common::nodedup(), View::Chains);
    let want = map(&[
        (&j(&[SINK, L_RELAY]), 60_000),
        (&j(&[SINK, L_RELAY, L_TIMER]), 40_000),
        (&j(&[SINK, L_RELAY, L_TIMER, L_IRQ]), 4_999_700 + 9_920_000),
        (&j(&[RELAY_ROOT, L_TIMER]), 40_000),
        (&j(&[RELAY_ROOT, L_TIMER, L_IRQ]), 4_999_800 + 9_940_000),
        (&j(&[TIMER_ROOT, L_IRQ]), 4_999_900 + 9_970_000),
    ]);
    assert_eq!(r.folded, want, "{}", common::show(&r));
}

/// `stack_frames` (waits `-F`, script, the Parquet stacks table) lists them leaf first
/// with the rest: the innermost inlined function first, the function it is all in last.
#[test]
fn stack_frames_list_inlined_frames_leaf_first() {
    let m = pipe_relay();
    let relay_write = m
        .tables
        .stacks
        .keys()
        .copied()
        .filter(|&id| {
            let f = stack_frames(&m.tables, id, 0);
            f.first().map(String::as_str) == Some("write") && f.len() > 2
        })
        .collect::<Vec<_>>();
    assert_eq!(relay_write.len(), 1);
    assert_eq!(
        stack_frames(&m.tables, relay_write[0], 0),
        [
            "write",
            "relay_io [inlined]",
            "relay_loop [inlined]",
            "relay_main"
        ]
    );
}

const C: &str = "cr-client;client_loop;read;-;ksys_read;pipe_read;schedule";
/// cr-worker's wait, root to leaf.
const W: &str = "cr-worker;worker_main;worker_loop [inlined];read;-;ksys_read;pipe_read;schedule";
/// cr-worker waking cr-client, leaf to root.
const TO_W: &str =
    ";--;try_to_wake_up;pipe_write;ksys_write;-;write;worker_loop [inlined];worker_main;cr-worker";
const TO_C: &str = ";--;try_to_wake_up;pipe_write;ksys_write;-;write;client_loop;cr-client";

/// `oncpu-worker` (samples.rs, `chains_break_the_wakers_running_time_down_by_its_samples`)
/// with `worker_loop` inlined into `worker_main` and `decode` into `handle`: the waker's
/// `[on cpu]` samples read root to leaf like the waiting thread's stack.
#[test]
fn inlined_frames_in_stack_order_in_on_cpu_levels() {
    let (_, mut m) = common::synth_file("oncpu-worker", 17 * 3, WriterOptions::default());
    rename(&mut m, "worker_loop", "worker_main;worker_loop [inlined]");
    rename(&mut m, "handle", "handle;decode [inlined]");
    let r = common::run(&m, chainrec_chain::Config::default(), View::Chains);
    let cw = format!("{C}{TO_W}");
    let wc = format!("{W}{TO_C}");
    let oncpu = "[on cpu];worker_main;worker_loop [inlined];handle;decode [inlined]";
    let want: BTreeMap<String, u64> = [
        (format!("{cw};--;{oncpu};spin_compute"), 6_000_000),
        (format!("{cw};--;{oncpu};parse"), 6_000_000),
        (
            format!("{cw};--;{oncpu};spin_compute;-;exc_page_fault;handle_mm_fault;clear_page"),
            3_000_000,
        ),
        (format!("{cw};--;[run queue];[idle]"), 30_000),
        (format!("{C};--;[run queue];[idle]"), 60_000),
        (format!("{wc};--;[on cpu: no sample]"), 99_970),
        (format!("{wc};--;[on cpu];client_loop;render"), 9_920_000),
        (format!("{wc};--;[run queue];[idle]"), 20_000),
        (format!("{W};--;[run queue];[idle]"), 60_000),
    ]
    .into_iter()
    .collect();
    assert_eq!(r.folded, want, "{}", common::show(&r));
}

//! CPU-quota throttling (CHAINS.md "Throttling"): exact outputs on hand-built traces with
//! throttle records. Every scenario states its timeline; the expected lines follow from it.

mod common;

use chainrec_chain::{Config, View};
use chainrec_format::{
    MemTrace, ThrottleDelta, ThrottleEvent, ThrottleGroup, ThrottleKind, Tid, WakeContext,
    STATE_INTERRUPTIBLE, STATE_RUNNABLE,
};
use chainrec_testkit::events;
use common::{map, run, show};

const SPIN: Tid = 50;
const READER: Tid = 60;
const S: u32 = STATE_INTERRUPTIBLE;
const R: u32 = STATE_RUNNABLE;
/// A cgroup v1 group (hierarchy 1), named by the recorder.
const GROUP: ThrottleGroup = ThrottleGroup {
    hierarchy: 1,
    cgroup: 17,
};

fn throttled_out(ts: u64, tid: Tid, group: ThrottleGroup) -> ThrottleEvent {
    ThrottleEvent {
        ts,
        cpu: 0,
        tid,
        kind: ThrottleKind::SwitchOut,
        group,
    }
}

fn refill(ts: u64, group: ThrottleGroup) -> ThrottleEvent {
    ThrottleEvent {
        ts,
        cpu: 1,
        tid: 0,
        kind: ThrottleKind::Refill,
        group,
    }
}

/// The spinner S (in GROUP) is throttled on CPU 0 at 100; the group's quota timer refills
/// it at 500 (on CPU 1), S is switched in at 520 (the idle CPU 0 took 20 ns to switch).
/// The reader (CPU 1) blocked at 50 on a pipe S writes at 600; it runs at 650. S is
/// throttled again at 700 and switched in at 900 with no refill record (unknown end).
///
/// ```text
/// cpu0: 0 idle->S | 100 S(R, throttled)->idle | 520 idle->S | 600 S wakes reader
///       | 700 S(R, throttled)->idle | 900 idle->S
/// cpu1: 0 idle->reader | 50 reader(S)->idle | 500 refill(GROUP) | 650 idle->reader
/// ```
fn throttled_spinner() -> MemTrace {
    let mut m = MemTrace::default();
    m.meta.stack_threshold_ns = 100_000;
    m.events.extend([
        events::comm(0, SPIN, "spinner"),
        events::comm(0, READER, "reader"),
        events::switch(0, 0, 0, R, SPIN),
        events::switch(0, 1, 0, R, READER),
        events::switch(50, 1, READER, S, 0),
        events::switch(100, 0, SPIN, R, 0),
        events::switch(520, 0, 0, R, SPIN),
        events::waking(600, 0, SPIN, READER, WakeContext::Task),
        events::switch(650, 1, 0, R, READER),
        events::switch(700, 0, SPIN, R, 0),
        events::switch(900, 0, 0, R, SPIN),
    ]);
    m.tables.throttling.merge(&ThrottleDelta {
        events: vec![
            throttled_out(100, SPIN, GROUP),
            refill(500, GROUP),
            throttled_out(700, SPIN, GROUP),
        ],
        names: vec![(GROUP, "/chainrec/spin".into())],
    });
    m
}

#[test]
fn throttled_time_is_its_own_level_at_the_root_and_one_level_down() {
    let m = throttled_spinner();
    let r = run(&m, Config::default(), View::Chains);
    let want = map(&[
        // The reader blocked [50, 600], woken by S, which never blocked: S's own time.
        // S ran [50, 100) and [520, 600): 130.
        ("reader;--;spinner", 130),
        // S was throttled [100, 500), until its group's timer refilled the quota...
        (
            "reader;--;spinner;--;[throttled: /chainrec/spin];[hardirq: timer]",
            400,
        ),
        // ... then runnable [500, 520) while CPU 0 was idle (waking it up).
        ("reader;--;spinner;--;[run queue];[idle]", 20),
        // The reader's own runnable time [600, 650) on idle CPU 1.
        ("reader;--;[run queue];[idle]", 50),
        // S's own off-CPU intervals are roots: [100, 520) and [700, 900).
        (
            "spinner;--;[throttled: /chainrec/spin];[hardirq: timer]",
            400,
        ),
        ("spinner;--;[run queue];[idle]", 20),
        // No refill record before the switch-in: throttled up to it, end unknown.
        (
            "spinner;--;[throttled: /chainrec/spin];[unthrottle unknown]",
            200,
        ),
    ]);
    assert_eq!(r.folded, want, "\n{}", show(&r));
    assert_eq!(r.stats.throttled_ns, 400 + 400 + 200);
    assert_eq!(r.stats.throttle_unknown_end, 1);
    // Throttled time is not run-queue time.
    assert_eq!(r.stats.runq_root_ns, 20 + 50);
    assert_eq!(r.stats.runq_inner_ns, 20);
}

#[test]
fn no_runqueue_leaves_throttled_time_out() {
    let m = throttled_spinner();
    let r = run(&m, common::cfg(), View::Chains);
    // Blocked time only: the reader's wait, all S's own time; preemptions have no line.
    assert_eq!(
        r.folded,
        map(&[("reader;--;spinner", 550)]),
        "\n{}",
        show(&r)
    );
    assert_eq!(r.stats.throttled_ns, 0);
}

#[test]
fn a_preemption_without_a_throttle_record_stays_run_queue_time() {
    let mut m = throttled_spinner();
    m.tables.throttling = Default::default();
    let r = run(&m, Config::default(), View::Chains);
    assert_eq!(r.folded["spinner;--;[run queue];[idle]"], 420 + 200);
    assert!(
        r.folded.keys().all(|l| !l.contains("throttled")),
        "\n{}",
        show(&r)
    );
}

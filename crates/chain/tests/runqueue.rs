//! Run-queue attribution (CHAINS.md "Run-queue time"): exact outputs on hand-built traces.
//! Every scenario states its timeline; the expected lines follow from it by hand.

mod common;

use chainrec_chain::{Config, NodeKind, RunqHolder, View};
use chainrec_format::{Comm, MemTrace, Tid, WakeContext, STATE_INTERRUPTIBLE, STATE_RUNNABLE};
use chainrec_testkit::events;
use common::{map, run, show, Run};

const T: Tid = 10;
const H: Tid = 20;
const H2: Tid = 21;
const W: Tid = 30;
const X: Tid = 40;

/// A trace built event by event (times in ns; all stacks empty, so nodes print as comms).
struct Tb(MemTrace);

impl Tb {
    fn new(names: &[(Tid, &str)]) -> Self {
        let mut m = MemTrace::default();
        m.meta.stack_threshold_ns = 100_000;
        for &(tid, name) in names {
            m.events.push(events::comm(0, tid, name));
        }
        Tb(m)
    }
    fn sw(&mut self, ts: u64, cpu: u32, prev: Tid, state: u32, next: Tid) -> &mut Self {
        self.0
            .events
            .push(events::switch(ts, cpu, prev, state, next));
        self
    }
    fn wake(&mut self, ts: u64, cpu: u32, waker: Tid, target: Tid, ctx: WakeContext) -> &mut Self {
        self.0
            .events
            .push(events::waking(ts, cpu, waker, target, ctx));
        self
    }
}

const S: u32 = STATE_INTERRUPTIBLE;
const R: u32 = STATE_RUNNABLE;

fn rq() -> Config {
    Config::default()
}

fn no_rq() -> Config {
    common::cfg()
}

/// Off-CPU time per root comm, from the offcpu view.
fn offcpu(m: &MemTrace) -> std::collections::BTreeMap<String, u64> {
    run(m, common::nodedup(), View::OffCpu).folded
}

/// Sum of the chain graph's lines per root comm (first frame).
fn per_root(r: &Run) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for (l, w) in &r.folded {
        *m.entry(l.split(';').next().unwrap().to_string())
            .or_insert(0) += w;
    }
    m
}

/// The victim T blocks on CPU 0 while hog H holds it; W (CPU 1, never blocked) wakes T.
/// W itself was preempted by H2 for 100 ns inside T's wait; T then waits for CPU 0
/// behind H (100 ns) and H2 (200 ns, migrated from CPU 1).
///
/// ```text
/// cpu0: 0 idle->T | 100 T(S)->H | 400 H(R)->H2 | 600 H2(R)->T
/// cpu1: 0 idle->W | 150 W(R)->H2 | 250 H2(R)->W | 300 W wakes T
/// ```
fn victim_behind_hogs() -> MemTrace {
    let mut b = Tb::new(&[(T, "victim"), (H, "hog"), (H2, "hog2"), (W, "waker")]);
    b.sw(0, 0, 0, R, T)
        .sw(0, 1, 0, R, W)
        .sw(100, 0, T, S, H)
        .sw(150, 1, W, R, H2)
        .sw(250, 1, H2, R, W)
        .wake(300, 1, W, T, WakeContext::Task)
        .sw(400, 0, H, R, H2)
        .sw(600, 0, H2, R, T);
    b.0
}

#[test]
fn root_and_inner_runnable_time_behind_the_cpu_holders() {
    let m = victim_behind_hogs();
    let r = run(&m, rq(), View::Chains);
    let want = map(&[
        // T blocked [100, 300]: W's own time, of which W was runnable [150, 250) behind hog2.
        ("victim;--;waker", 100),
        ("victim;--;waker;--;[run queue];hog2", 100),
        // T runnable [300, 600) on CPU 0: hog until 400, then hog2.
        ("victim;--;[run queue];hog", 100),
        ("victim;--;[run queue];hog2", 200),
        // W's preemption [150, 250) on CPU 1 behind hog2; hog2's [250, 400) behind hog on
        // CPU 0, where it was switched in.
        ("waker;--;[run queue];hog2", 100),
        ("hog2;--;[run queue];hog", 150),
    ]);
    assert_eq!(r.folded, want, "\n{}", show(&r));
    // Widths add up to off-CPU time, per thread (nothing here is hidden by dedup).
    let off = offcpu(&m);
    assert_eq!(per_root(&r)["victim"], off["victim"]);
    assert_eq!(per_root(&r)["waker"], off["waker"]);
    assert_eq!(per_root(&r)["hog2"], 150);
    // The record: level 0 parts first, then level 1; hop shares include the runnable part.
    let v = r.records.iter().find(|w| w.tid == T).unwrap();
    assert_eq!(v.attributed_ns(), 200);
    assert_eq!(v.runq_ns_of(0), 300);
    assert_eq!(v.runq_ns_of(1), 100);
    assert_eq!(
        v.runq.iter().map(|p| (p.level, p.ns)).collect::<Vec<_>>(),
        vec![(0, 100), (0, 200), (1, 100)]
    );
    assert_eq!(r.stats.runq_root_ns, 300 + 100 + 150);
    assert_eq!(r.stats.runq_inner_ns, 100);
    assert_eq!(r.stats.runq_unknown_ns, 0);
}

/// Holders are comms: processes of one name (their own tgids, as hackbench's or
/// PostgreSQL's) that take turns on a CPU are one holder, in the lines, the record's parts
/// (one per name, in order of first appearance) and the histories (a switch from one to
/// the other is not kept; a thread's pieces behind them are one period).
///
/// ```text
/// cpu0: 0 idle->T | 100 T(S)->P1 | 300 P1(R)->P2 | 400 P2(R)->P1 | 500 P1(R)->O
///       | 600 O(R)->P2 | 700 P2(R)->T            (P1, P2: "pg", O: "other")
/// cpu1: 0 idle->W | 200 W wakes T
/// ```
#[test]
fn same_named_processes_are_one_holder() {
    const P1: Tid = 50;
    const P2: Tid = 51;
    const O: Tid = 52;
    let mut b = Tb::new(&[
        (T, "victim"),
        (W, "waker"),
        (P1, "pg"),
        (P2, "pg"),
        (O, "other"),
    ]);
    b.sw(0, 0, 0, R, T)
        .sw(0, 1, 0, R, W)
        .sw(100, 0, T, S, P1)
        .wake(200, 1, W, T, WakeContext::Task)
        .sw(300, 0, P1, R, P2)
        .sw(400, 0, P2, R, P1)
        .sw(500, 0, P1, R, O)
        .sw(600, 0, O, R, P2)
        .sw(700, 0, P2, R, T);
    let r = run(&b.0, rq(), View::Chains);
    let want = map(&[
        ("victim;--;waker", 100),
        // T runnable [200, 700): pg [200, 500) and [600, 700), other [500, 600).
        ("victim;--;[run queue];pg", 400),
        ("victim;--;[run queue];other", 100),
        // P1 preempted [300, 400) behind P2; P2 [400, 600) behind P1, then O.
        ("pg;--;[run queue];pg", 200),
        ("pg;--;[run queue];other", 100),
    ]);
    assert_eq!(r.folded, want, "\n{}", show(&r));
    let v = r.records.iter().find(|w| w.tid == T).unwrap();
    assert_eq!(
        v.runq.iter().map(|p| (p.level, p.ns)).collect::<Vec<_>>(),
        vec![(0, 400), (0, 100)]
    );
    // Kept: CPU 0 victim, pg (100; not P2 at 300 nor P1 at 400), other, pg (600), victim;
    // CPU 1 waker; periods: T's pg [200, 500), other, pg [600, 700); P1's pg; P2's pg,
    // other. One entry per process instead would keep 16.
    assert_eq!(r.stats.peak_runq_history, 12);
}

#[test]
fn no_runqueue_is_the_blocked_only_graph() {
    let m = victim_behind_hogs();
    let r = run(&m, no_rq(), View::Chains);
    assert_eq!(r.folded, map(&[("victim;--;waker", 200)]), "\n{}", show(&r));
    assert!(r.records.iter().all(|w| w.runq.is_empty()));
    // --mode last never splits.
    let r = run(
        &m,
        Config {
            mode: chainrec_chain::Mode::Last,
            ..rq()
        },
        View::Chains,
    );
    assert_eq!(r.folded, map(&[("victim;--;waker", 200)]), "\n{}", show(&r));
}

/// The waker blocked inside the root's wait: its own time is before it blocked and after
/// it was woken, and both windows split by its runnable periods.
///
/// ```text
/// cpu0: 0 idle->T | 100 T(S)->H | 700 H(R)->T
/// cpu1: 0 idle->W | 150 W(R)->H2 | 200 H2(R)->W | 250 W(S)->idle | 400 [hardirq] wakes W
///       | 450 idle->W | 500 W wakes T
/// ```
#[test]
fn inner_level_split_on_both_sides_of_the_wakers_own_wait() {
    let mut b = Tb::new(&[(T, "victim"), (H, "hog"), (H2, "hog2"), (W, "waker")]);
    b.sw(0, 0, 0, R, T)
        .sw(0, 1, 0, R, W)
        .sw(100, 0, T, S, H)
        .sw(150, 1, W, R, H2)
        .sw(200, 1, H2, R, W)
        .sw(250, 1, W, S, 0)
        .wake(400, 1, 0, W, WakeContext::HardIrq)
        .sw(450, 1, 0, R, W)
        .wake(500, 1, W, T, WakeContext::Task)
        .sw(700, 0, H, R, T);
    let m = b.0;
    let r = run(&m, rq(), View::Chains);
    let want = map(&[
        // Level 1 (waker) owns [100, 250) and [400, 500]: 250 ns, runnable 50 behind hog2
        // (150..200) and 50 behind the idle CPU it was woken on (400..450).
        ("victim;--;waker", 150),
        ("victim;--;waker;--;[run queue];hog2", 50),
        ("victim;--;waker;--;[run queue];[idle]", 50),
        // Level 2: the interrupt, [250, 400].
        ("victim;--;waker;--;[hardirq]", 150),
        ("victim;--;[run queue];hog", 200),
        // The waker's preemption; its own wait is an inner hop of the victim's chain (dedup).
        ("waker;--;[run queue];hog2", 50),
    ]);
    assert_eq!(r.folded, want, "\n{}", show(&r));
    assert_eq!(per_root(&r)["victim"], offcpu(&m)["victim"]);
    // Without dedup the waker's wait is a root too: blocked 150 behind the interrupt, then
    // runnable 50 behind the idle CPU.
    let r = run(&m, common::nodedup(), View::Chains);
    assert_eq!(r.folded["waker;--;[hardirq]"], 150);
    assert!(
        r.folded.keys().all(|l| !l.contains("[run queue]")),
        "\n{}",
        show(&r)
    );
    let r = run(
        &m,
        Config {
            dedup: false,
            ..rq()
        },
        View::Chains,
    );
    assert_eq!(r.folded["waker;--;[hardirq]"], 150);
    assert_eq!(r.folded["waker;--;[run queue];[idle]"], 50);
    assert_eq!(per_root(&r), offcpu(&m));
}

/// A CPU with no earlier switch in the trace: the holder is unknown, shown and counted.
#[test]
fn unknown_holder_when_the_cpu_history_does_not_reach_back() {
    let mut b = Tb::new(&[(T, "victim"), (W, "waker"), (X, "other")]);
    b.sw(0, 0, 0, R, T)
        .sw(0, 1, 0, R, W)
        .sw(100, 0, T, S, 0)
        .wake(300, 1, W, T, WakeContext::Task)
        // T is switched in on CPU 2, whose first switch this is.
        .sw(350, 2, X, R, T);
    let m = b.0;
    let r = run(&m, rq(), View::Chains);
    assert_eq!(
        r.folded["victim;--;[run queue];[unknown]"],
        50,
        "\n{}",
        show(&r)
    );
    assert_eq!(r.stats.runq_unknown_ns, 50);
    let v = r.records.iter().find(|w| w.tid == T).unwrap();
    let nodes_named: Vec<_> = v.runq.iter().map(|p| p.ns).collect();
    assert_eq!(nodes_named, vec![50]);
}

/// The holder node is a `NodeKind::RunQueue` naming the holder.
#[test]
fn runq_nodes_name_their_holder() {
    let m = victim_behind_hogs();
    let mut engine = chainrec_chain::Engine::new(&m.tables, &m.meta, rq());
    let mut holders = Vec::new();
    let mut sink = |w: &chainrec_chain::WaitRecord, n: &chainrec_chain::NodeTable| {
        for p in &w.runq {
            match &n.get(p.holder).kind {
                NodeKind::RunQueue { holder } => holders.push((w.tid, p.level, holder.clone())),
                k => panic!("run-queue part with a {k:?} node"),
            }
        }
    };
    engine.process(&m.events, &mut sink);
    engine.finish(&mut sink);
    holders.sort_by_key(|(t, l, h)| (*t, *l, h.name().into_owned()));
    assert_eq!(
        holders,
        vec![
            (T, 0, RunqHolder::Task(Comm::new("hog"))),
            (T, 0, RunqHolder::Task(Comm::new("hog2"))),
            (T, 1, RunqHolder::Task(Comm::new("hog2"))),
            (H2, 0, RunqHolder::Task(Comm::new("hog"))),
            (W, 0, RunqHolder::Task(Comm::new("hog2"))),
        ]
    );
}

/// A wakeup racing a block (ENGINE.md "Woken before it blocked"): W wakes T while T still
/// runs (its state already left TASK_RUNNING), T's blocking switch-out follows 1 ns later
/// and it is switched in again with no waking of its own (the kernel re-enqueued it).
/// W itself was woken by X at 50 while T ran.
///
/// ```text
/// cpu0: 0 idle->T | 101 T(S)->H | 400 H(R)->T
/// cpu1: 0 idle->W | 10 W(S)->idle | 50 X wakes W | 60 idle->W | 100 W wakes T
/// ```
fn rq_nodedup() -> Config {
    Config {
        dedup: false,
        ..rq()
    }
}

fn woken_before_block(gap: u64) -> MemTrace {
    let mut b = Tb::new(&[(T, "victim"), (H, "hog"), (W, "waker"), (X, "x")]);
    b.sw(0, 0, 0, R, T)
        .sw(0, 1, 0, R, W)
        .sw(10, 1, W, S, 0)
        .wake(50, 1, X, W, WakeContext::Task)
        .sw(60, 1, 0, R, W)
        .wake(100, 1, W, T, WakeContext::Task)
        .sw(100 + gap, 0, T, S, H)
        .sw(400 + gap, 0, H, R, T);
    b.0
}

#[test]
fn a_waking_just_before_the_block_ends_it() {
    let m = woken_before_block(1);
    let r = run(&m, rq_nodedup(), View::Chains);
    // No blocked time: the whole wait [101, 401) is run-queue time behind hog; the waker
    // level carries nothing (its share of a zero-length blocked part).
    let v = r.records.iter().find(|w| w.tid == T).unwrap();
    assert_eq!(
        (v.switch_out_ns, v.wake_ns, v.switch_in_ns),
        (101, Some(101), Some(401))
    );
    assert_eq!(v.attributed_ns(), 0);
    assert_eq!(v.runq_ns_of(0), 300);
    assert_eq!(
        v.hops
            .iter()
            .map(|h| (h.waker_tid, h.ts, h.ns))
            .collect::<Vec<_>>(),
        vec![(W, 101, 0)]
    );
    assert!(
        r.folded.contains_key("victim;--;[run queue];hog"),
        "\n{}",
        show(&r)
    );
    assert!(
        !r.folded.keys().any(|k| k.contains("[waker unknown]")),
        "\n{}",
        show(&r)
    );
    assert_eq!(r.stats.woken_before_block, 1);
    assert_eq!(r.stats.waits_without_waker, 0);
    assert_eq!(r.stats.wakings_ignored, 0);
    // Too long before the switch-out (over 1 ms): not taken for a race.
    let r = run(
        &woken_before_block(2_000_000),
        common::nodedup(),
        View::Chains,
    );
    let v = r.records.iter().find(|w| w.tid == T).unwrap();
    assert_eq!(v.wake_ns, None);
    assert_eq!(r.stats.woken_before_block, 0);
    assert_eq!(r.stats.waits_without_waker, 1);
    assert_eq!(r.stats.wakings_ignored, 1);
}

#[test]
fn a_waking_of_its_own_wins_over_the_race() {
    let mut m = woken_before_block(1);
    // X wakes T at 300, inside its wait: that waking ends it, the earlier one stays ignored.
    let at = m.events.len() - 1;
    m.events
        .insert(at, events::waking(300, 1, X, T, WakeContext::Task));
    let r = run(&m, rq_nodedup(), View::Chains);
    let v = r.records.iter().find(|w| w.tid == T).unwrap();
    assert_eq!(v.wake_ns, Some(300));
    assert_eq!(v.hops[0].waker_tid, X);
    assert_eq!(r.stats.woken_before_block, 0);
    assert_eq!(r.stats.wakings_ignored, 1);
}

/// Folded lines of one root comm.
fn lines_of(r: &Run, root: &str) -> std::collections::BTreeMap<String, u64> {
    r.folded
        .iter()
        .filter(|(l, _)| l.split(';').next() == Some(root))
        .map(|(l, &w)| (l.clone(), w))
        .collect()
}

/// A waker preempted 2000 times inside one long wait (the histories once kept a thread's
/// last 1024 runnable periods, so most of its level went unsplit): every preemption is
/// split, exactly, while unrelated churn on CPU 2 makes the engine trim its histories.
///
/// ```text
/// cpu0: 0 idle->T | 100 T(S)->idle | 300050 idle->T
/// cpu1: 0 idle->W | from 1000, every 100 ns: W(R)->H, 10 ns later H(R)->W (2000 times)
///       | 300000 W wakes T
/// cpu2: A and B preempt each other every 10 ns, 60000 times, from 1000
/// ```
#[test]
fn a_waker_preempted_thousands_of_times_in_one_wait_is_split_exactly() {
    const A: Tid = 50;
    const B: Tid = 51;
    let mut b = Tb::new(&[(T, "victim"), (H, "hog"), (W, "waker"), (A, "a"), (B, "b")]);
    b.sw(0, 0, 0, R, T).sw(0, 1, 0, R, W).sw(0, 2, 0, R, A);
    b.sw(100, 0, T, S, 0);
    let mut churn = (0..60_000u64)
        .map(|i| (1000 + 10 * i, i % 2 == 0))
        .peekable();
    for i in 0..2000u64 {
        let t = 1000 + 100 * i;
        for (ts, a_out) in churn.by_ref().take_while(|&(ts, _)| ts < t + 100) {
            if a_out {
                b.sw(ts, 2, A, R, B);
            } else {
                b.sw(ts, 2, B, R, A);
            }
        }
        b.sw(t, 1, W, R, H).sw(t + 10, 1, H, R, W);
    }
    b.0.events.sort_by_key(|e| e.ts());
    b.wake(300_000, 1, W, T, WakeContext::Task)
        .sw(300_050, 0, 0, R, T);
    let m = b.0;
    let r = run(&m, rq(), View::Chains);
    let want = map(&[
        // Level 1 owns [100, 300000): runnable 2000 × 10 ns behind hog, the rest it ran.
        ("victim;--;waker", 299_900 - 20_000),
        ("victim;--;waker;--;[run queue];hog", 20_000),
        ("victim;--;[run queue];[idle]", 50),
    ]);
    assert_eq!(lines_of(&r, "victim"), want, "\n{}", show(&r));
    assert_eq!(r.stats.runq_unsplit_ns, 0);
    assert_eq!(r.stats.runq_capped, 0);
    // The same in small batches (a trim may fall between any two events).
    let small = common::run_batched(&m, rq(), View::Chains, 997);
    assert_eq!(small.folded, r.folded);
    assert_eq!(small.stats, r.stats);
}

/// A CPU switched 70000 times while one thread waited for it (the histories once kept a
/// CPU's last 65536 switch-ins, so the oldest part went to `[unknown]`): every holder gets
/// exactly its time.
///
/// ```text
/// cpu0: 0 idle->T | 100 T(S)->H | from 200, every 10 ns: H(R)->H2, H2(R)->H (70000
///       switches) | 700200 H(R)->T
/// cpu1: 0 idle->W | 150 W wakes T
/// ```
#[test]
fn a_cpu_switched_70000_times_in_one_runnable_period_is_split_exactly() {
    let mut b = Tb::new(&[(T, "victim"), (H, "hog"), (H2, "hog2"), (W, "waker")]);
    b.sw(0, 0, 0, R, T)
        .sw(0, 1, 0, R, W)
        .sw(100, 0, T, S, H)
        .wake(150, 1, W, T, WakeContext::Task);
    for i in 0..70_000u64 {
        if i % 2 == 0 {
            b.sw(200 + 10 * i, 0, H, R, H2);
        } else {
            b.sw(200 + 10 * i, 0, H2, R, H);
        }
    }
    b.sw(700_200, 0, H, R, T);
    let m = b.0;
    let r = run(&m, rq(), View::Chains);
    // T runnable [150, 700200): hog [150, 200) and 35000 × 10 ns, hog2 35000 × 10 ns.
    let want = map(&[
        ("victim;--;waker", 50),
        ("victim;--;[run queue];hog", 350_050),
        ("victim;--;[run queue];hog2", 350_000),
    ]);
    assert_eq!(lines_of(&r, "victim"), want, "\n{}", show(&r));
    assert_eq!(r.stats.runq_unknown_ns, 0);
    assert_eq!(r.stats.runq_capped, 0);
}

/// With no wait open for long, the histories stay small however long the trace: they are
/// trimmed to what an open wait can still ask for.
#[test]
fn histories_are_trimmed_to_what_open_waits_can_ask_for() {
    let mut b = Tb::new(&[(H, "hog"), (H2, "hog2"), (T, "victim"), (W, "waker")]);
    b.sw(0, 0, 0, R, H).sw(0, 1, 0, R, W);
    // 400000 preemptions on CPU 0; every 1000 ns T blocks briefly and W wakes it.
    for i in 0..400_000u64 {
        let ts = 10 + 10 * i;
        if i % 2 == 0 {
            b.sw(ts, 0, H, R, H2);
        } else {
            b.sw(ts, 0, H2, R, H);
        }
    }
    for j in 0..4000u64 {
        let ts = 5 + 1000 * j;
        b.sw(ts, 1, W, S, T)
            .wake(ts + 500, 1, T, W, WakeContext::Task)
            .sw(ts + 600, 1, T, S, W)
            .wake(ts + 900, 1, W, T, WakeContext::Task);
    }
    b.0.events.sort_by_key(|e| e.ts());
    let r = run(&m_of(b), rq(), View::Chains);
    assert!(
        r.stats.peak_runq_history < 1 << 18,
        "{} entries kept at most for {} events",
        r.stats.peak_runq_history,
        r.stats.events
    );
    assert_eq!(r.stats.runq_unknown_ns, 0);
    assert_eq!(r.stats.runq_unsplit_ns, 0);
    assert_eq!(r.stats.runq_capped, 0);
}

fn m_of(b: Tb) -> MemTrace {
    b.0
}

/// A runnable period longer than 2^32 ns (kept as several entries) splits whole.
///
/// ```text
/// cpu0: 0 idle->T | 100 T(S)->idle | 6e9+50 idle->T
/// cpu1: 0 idle->W | 1000 W(R)->H | 5e9+1000 H(R)->W | 6e9 W wakes T
/// ```
#[test]
fn a_runnable_period_longer_than_four_seconds_splits_whole() {
    let mut b = Tb::new(&[(T, "victim"), (H, "hog"), (W, "waker")]);
    b.sw(0, 0, 0, R, T)
        .sw(0, 1, 0, R, W)
        .sw(100, 0, T, S, 0)
        .sw(1000, 1, W, R, H)
        .sw(5_000_001_000, 1, H, R, W)
        .wake(6_000_000_000, 1, W, T, WakeContext::Task)
        .sw(6_000_000_050, 0, 0, R, T);
    let r = run(&b.0, rq(), View::Chains);
    let want = map(&[
        ("victim;--;waker", 6_000_000_000 - 100 - 5_000_000_000),
        ("victim;--;waker;--;[run queue];hog", 5_000_000_000),
        ("victim;--;[run queue];[idle]", 50),
    ]);
    assert_eq!(lines_of(&r, "victim"), want, "\n{}", show(&r));
}

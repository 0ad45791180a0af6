//! A waker's earlier waits inside the root's wait (CHAINS.md, "Attribution"): blocked time
//! is never shown as on-CPU time; each earlier wait is a branch of the wakeup DAG,
//! followed to its own waker. Scenario `timer-waits` (crates/format/src/synth/exact.rs).

mod common;

use chainrec_chain::{Config, LevelKind, View};
use common::*;

const MAIN: &str = "cr-main;main;pthread_join;-;futex_wait;schedule";
const L_TIMER: &str = "--;try_to_wake_up;futex_wake;-;pthread_cond_signal;timer_loop;cr-timer";
const EARLIER: &str =
    "--;[earlier wait];timer_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule";
const L_IRQ: &str =
    "--;try_to_wake_up;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;[hardirq: timer]";
const TIMER_ROOT: &str =
    "cr-timer;timer_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule";

fn j(parts: &[&str]) -> String {
    parts.join(";")
}

/// Three iterations (B = T0 + i * 40 ms). cr-main's wait [B+100, B+30.05ms]:
/// - cr-timer's own time: [B+10ms, B+10.1ms), [B+20ms, B+20.1ms) and
///   [B+30ms, B+30.05ms]: 250 us;
/// - its earlier waits [.., B+10ms] (clipped at B+100: 9,999,900 ns) and [B+10.1ms,
///   B+20ms] (9.9 ms), both ended by the timer interrupt: one branch of 19,899,900 ns;
/// - its last wait [B+20.1ms, B+30ms] = 9.9 ms, the chain's next level.
///
/// Before the branches, the first two were one 20,149,900 ns level of cr-timer: its
/// sleeps read as its own (on-CPU) time.
#[test]
fn earlier_wait_is_a_branch_not_waker_time() {
    let n = 3;
    let m = gen("timer-waits", 12 * n);
    let r = run(&m, cfg(), View::Chains);
    // cr-timer's roots: its waits ending at B+10 and B+20 ms (decided at its next
    // switch-out, before cr-main's chain used them, so dedup keeps them): the first from
    // T0+50, the next ones from the previous iteration's B+30.06ms. Those ending at
    // B+30 ms are cr-main's chain's inner hops: hidden.
    let want = map(&[
        (&j(&[MAIN, L_TIMER]), 250_000 * n),
        (&j(&[MAIN, L_TIMER, EARLIER, L_IRQ]), 19_899_900 * n),
        (&j(&[MAIN, L_TIMER, L_IRQ]), 9_900_000 * n),
        (
            &j(&[TIMER_ROOT, L_IRQ]),
            9_999_950 + 19_940_000 * (n - 1) + 9_900_000 * n,
        ),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    assert_eq!(r.stats.earlier_waits, 2 * n);
    assert_eq!(r.stats.blocked_not_followed_ns, 0);
    for w in r
        .records
        .iter()
        .filter(|w| w.tid == 302 && w.wake_ns.is_some())
    {
        assert_eq!(w.attributed_ns(), w.blocked_ns().unwrap());
        let kinds: Vec<(u32, LevelKind)> = w.hops.iter().map(|h| (h.parent, h.kind)).collect();
        // Preorder: cr-timer (under the root), its earlier waits under it (one level for
        // both), their interrupt under it, then the chain's interrupt under cr-timer.
        assert_eq!(
            kinds,
            vec![
                (0, LevelKind::Waker),
                (1, LevelKind::EarlierWait),
                (2, LevelKind::Waker),
                (1, LevelKind::Waker),
            ]
        );
        assert_eq!(w.main_chain(), vec![0, 3]);
        // The merged waits' windows, and each level's share inside a cut.
        let b = w.switch_out_ns - 100;
        assert_eq!(w.hops[1].windows[0], (b + 100, b + 10_000_000));
        assert_eq!(
            w.extra_windows,
            vec![
                (2, b + 10_100_000, b + 20_000_000),
                (3, b + 10_100_000, b + 20_000_000)
            ]
        );
        let cut = (b, b + 10_050_000);
        assert_eq!(w.level_inside(0, cut.0, cut.1), 50_000);
        assert_eq!(w.level_inside(1, cut.0, cut.1), 0);
        assert_eq!(w.level_inside(2, cut.0, cut.1), 9_999_900);
        assert_eq!(w.level_inside(3, cut.0, cut.1), 0);
        let whole = (b, b + 40_000_000);
        assert_eq!(w.level_inside(0, whole.0, whole.1), 250_000);
        assert_eq!(w.level_inside(2, whole.0, whole.1), 19_899_900);
        assert_eq!(w.level_inside(3, whole.0, whole.1), 9_900_000);
    }
}

/// With the run queue on, cr-timer's own time splits into its runnable part (behind
/// `[idle]`: it waited 10 us for its CPU after each interrupt) and the rest; the branch is
/// unchanged, and the root's lines add up to its off-CPU time.
#[test]
fn earlier_wait_with_runqueue() {
    let n = 3;
    let m = gen("timer-waits", 12 * n);
    let r = run(&m, Config::default(), View::Chains);
    let runq = |level: &str| format!("{level};--;[run queue];[idle]");
    let got = |line: &str| r.folded.get(line).copied().unwrap_or(0);
    assert_eq!(got(&j(&[MAIN, L_TIMER, EARLIER, L_IRQ])), 19_899_900 * n);
    // After each of the three interrupts it was runnable 10 us, then ran.
    assert_eq!(got(&runq(&j(&[MAIN, L_TIMER]))), 30_000 * n);
    assert_eq!(got(&j(&[MAIN, L_TIMER])), 220_000 * n);
    for w in r
        .records
        .iter()
        .filter(|w| w.tid == 302 && w.switch_in_ns.is_some())
    {
        let lines: u64 = w.hops.iter().map(|h| h.ns).sum::<u64>() + w.runq_ns_of(0);
        assert_eq!(lines, w.offcpu_ns().unwrap());
    }
}

/// At the depth limit a branch cannot be followed: the waker's blocked time is
/// `[blocked: not followed]`, never its own time.
#[test]
fn earlier_wait_beyond_the_depth_limit_is_not_followed() {
    let n = 3;
    let m = gen("timer-waits", 12 * n);
    let c = Config {
        max_depth: 2,
        ..cfg()
    };
    let r = run(&m, c, View::Chains);
    let want_not_followed = format!("{MAIN};{L_TIMER};--;[blocked: not followed]");
    assert_eq!(
        r.folded.get(&want_not_followed).copied(),
        Some(19_899_900 * n),
        "{}",
        show(&r)
    );
    assert_eq!(
        r.folded.get(&j(&[MAIN, L_TIMER])).copied(),
        Some(250_000 * n)
    );
    assert_eq!(r.stats.blocked_not_followed_ns, 19_899_900 * n);
    assert_eq!(r.stats.earlier_waits, 0);
}

/// A waker created inside the root's wait (scenario `fork-in-wait`): the time before its
/// fork is not its own. It goes on to the parent that forked it (`[fork]`): as the
/// worker's cause when the worker had not blocked since (even iterations), as an earlier
/// wait of the worker when its chain follows a later wait (odd: its timer sleep).
///
/// Each root: cr-waiter blocked [t+100, wake]. Even: the worker's own time is
/// [t+10 ms, t+10.5 ms] (20 us runnable behind the idle CPU 0, then running); the
/// spawner's [t+100, t+10 ms] = 9,999,900 ns. Odd: the worker's own time is
/// [t+10, t+10.1 ms] and [t+11.1, t+11.5 ms] (20 + 10 us runnable), its sleep the timer's
/// 1 ms, and [t+100, t+10 ms] the fork branch. Before, the worker read 20,949,800 ns of
/// own (on-CPU) time, 19,999,800 of it before it existed.
#[test]
fn time_before_a_wakers_fork_is_its_parents() {
    const WAITER: &str = "cr-waiter;main;pthread_join;-;futex_wait;schedule";
    const WORKER: &str = "--;try_to_wake_up;futex_wake;-;cr-worker";
    const FORK: &str = "--;[fork];-;cr-spawner";
    let m = gen("fork-in-wait", 20);
    let r = run(&m, Config::default(), View::Chains);
    let want = map(&[
        (&j(&[WAITER, WORKER]), 480_000 + 470_000),
        (
            &j(&[WAITER, WORKER, "--;[run queue];[idle]"]),
            20_000 + 30_000,
        ),
        (&j(&[WAITER, WORKER, FORK]), 9_999_900),
        (&j(&[WAITER, WORKER, "--;[earlier wait]", FORK]), 9_999_900),
        (&j(&[WAITER, WORKER, L_IRQ]), 1_000_000),
        // Behind the worker, under the name it had when it was switched in.
        (&j(&[WAITER, "--;[run queue];cr-spawner"]), 100_000),
        (&j(&[WAITER, "--;[run queue];cr-worker"]), 100_000),
        // Each worker's first interval: runnable from its fork (under its parent's name).
        ("cr-spawner;--;[run queue];[idle]", 2 * 20_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    assert_eq!(r.stats.fork_causes, 2);
    assert_eq!(r.stats.earlier_waits, 1);
    assert_eq!(r.stats.blocked_not_followed_ns, 0);
    for w in r.records.iter().filter(|w| w.tid == 1100) {
        let lines: u64 = w.hops.iter().map(|h| h.ns).sum::<u64>() + w.runq_ns_of(0);
        assert_eq!(lines, w.offcpu_ns().unwrap());
    }
}

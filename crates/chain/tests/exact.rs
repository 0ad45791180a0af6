//! Exact expected folded output for every exact synthetic scenario. The expected
//! weights are derived by hand from the scripts in crates/format/src/synth/exact.rs
//! (times relative to the scenario's iteration base B; see docs/ENGINE.md).

mod common;

use chainrec_chain::{Config, Duration, Filter, Mode, View, Window};
use common::*;
use regex::Regex;

// Frames as rendered (root: comm;user root→leaf;-;kernel root→leaf; levels: --;kernel
// leaf→root;-;user leaf→root;comm).
const SINK: &str = "cr-sink;sink_loop;read;-;ksys_read;pipe_read;schedule";
const RELAY_ROOT: &str = "cr-relay;relay_loop;read;-;ksys_read;pipe_read;schedule";
const TIMER_ROOT: &str =
    "cr-timer;timer_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule";
const L_RELAY: &str = "--;try_to_wake_up;pipe_write;ksys_write;-;write;relay_loop;cr-relay";
const L_TIMER: &str = "--;try_to_wake_up;pipe_write;ksys_write;-;write;timer_loop;cr-timer";
const L_IRQ: &str =
    "--;try_to_wake_up;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;[hardirq: timer]";

fn j(parts: &[&str]) -> String {
    parts.join(";")
}

fn sum_check(r: &Run) {
    for w in &r.records {
        if w.mode == Mode::Bounded && w.wake_ns.is_some() {
            assert_eq!(
                w.attributed_ns(),
                w.blocked_ns().unwrap(),
                "attribution must sum to blocked time: {w:?}"
            );
        }
    }
}

#[test]
fn pipe_relay_bounded_dedup() {
    // 2 iterations. Sink wait 0: [T0+300, T0+5.05ms]: relay 30us, timer 20us, irq 4_999_700 ns;
    // wait 1: relay 30us, timer 20us, irq 10ms - 80us.
    let m = gen("pipe-relay", 18);
    let r = run(&m, cfg(), View::Chains);
    let want = map(&[
        (&j(&[SINK, L_RELAY]), 60_000),
        (&j(&[SINK, L_RELAY, L_TIMER]), 40_000),
        (&j(&[SINK, L_RELAY, L_TIMER, L_IRQ]), 4_999_700 + 9_920_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    assert_eq!(r.stats.dedup_hidden, 4);
    assert_eq!(r.stats.waits_open_at_end, 3);
    sum_check(&r);
}

#[test]
fn pipe_relay_no_dedup_shows_every_root() {
    let m = gen("pipe-relay", 18);
    let r = run(&m, nodedup(), View::Chains);
    let want = map(&[
        (&j(&[SINK, L_RELAY]), 60_000),
        (&j(&[SINK, L_RELAY, L_TIMER]), 40_000),
        (&j(&[SINK, L_RELAY, L_TIMER, L_IRQ]), 4_999_700 + 9_920_000),
        // relay waits [T0+200, T0+5.02ms] and [B0+5.06ms, B1+5.02ms]
        (&j(&[RELAY_ROOT, L_TIMER]), 40_000),
        (&j(&[RELAY_ROOT, L_TIMER, L_IRQ]), 4_999_800 + 9_940_000),
        // timer waits [T0+100, T0+5ms] and [B0+5.03ms, B1+5ms]
        (&j(&[TIMER_ROOT, L_IRQ]), 4_999_900 + 9_970_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    assert_eq!(r.stats.dedup_hidden, 0);
    sum_check(&r);
    // Without dedup the flame graph holds exactly the blocked time of every wait.
    let total: u64 = r.folded.values().sum();
    let blocked: u64 = r.records.iter().filter_map(|w| w.blocked_ns()).sum();
    assert_eq!(total, blocked);
}

#[test]
fn pipe_relay_last_mode() {
    let m = gen("pipe-relay", 18);
    let r = run(&m, last(), View::Chains);
    let want = map(&[(&j(&[SINK, L_RELAY, L_TIMER, L_IRQ]), 5_049_700 + 9_970_000)]);
    assert_eq!(r.folded, want, "{}", show(&r));
    // Every level weighs the whole blocked time in last mode.
    for w in r
        .records
        .iter()
        .filter(|w| w.tid == 103 && w.wake_ns.is_some())
    {
        assert!(w.hops.iter().all(|h| h.ns == w.blocked_ns().unwrap()));
        assert_eq!(w.hops.len(), 3);
    }
}

#[test]
fn batching_does_not_change_results() {
    let m = gen("pipe-relay", 90);
    let one = run(&m, cfg(), View::Chains);
    for b in [1, 7, 64] {
        let r = run_batched(&m, cfg(), View::Chains, b);
        assert_eq!(r.folded, one.folded);
        assert_eq!(r.stats, one.stats);
    }
}

const DB_ROOT: &str =
    "cr-db;db_query;pread64;-;filemap_read;folio_wait_bit_common;io_schedule;schedule";
const KW_ROOT: &str = "kworker/0:1;-;kthread;worker_thread;schedule";
const L_DB: &str = "--;try_to_wake_up;queue_work_on;submit_bio;-;pwrite64;db_query;cr-db";
const L_DISK: &str = "--;try_to_wake_up;wake_page_function;blk_mq_end_request;blk_mq_complete_request;nvme_irq;[hardirq: disk]";

#[test]
fn disk_irq_label_inferred_and_dedup() {
    // 3 iterations: kworker wait [B+200us, B+2.2ms]: cr-db ran [B+2.1ms, B+2.2ms] (100us),
    // disk irq explains [B+200us, B+2.1ms]. cr-db's own waits are inner hops: hidden.
    let m = gen("disk-irq", 18);
    let r = run(&m, cfg(), View::Chains);
    let want = map(&[
        (&j(&[KW_ROOT, L_DB]), 300_000),
        (&j(&[KW_ROOT, L_DB, L_DISK]), 5_700_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    sum_check(&r);
}

#[test]
fn user_and_kernel_thread_filters() {
    let m = gen("disk-irq", 18);
    let f = Filter {
        threads: chainrec_format::ThreadSelector {
            user_only: true,
            ..Default::default()
        },
        ..Filter::default()
    };
    let r = run(&m, filtered(f), View::Chains);
    assert_eq!(
        r.folded,
        map(&[(&j(&[DB_ROOT, L_DISK]), 6_000_000)]),
        "{}",
        show(&r)
    );
    let f = Filter {
        threads: chainrec_format::ThreadSelector {
            kernel_only: true,
            ..Default::default()
        },
        ..Filter::default()
    };
    let r = run(&m, filtered(f), View::Chains);
    let want = map(&[
        (&j(&[KW_ROOT, L_DB]), 300_000),
        (&j(&[KW_ROOT, L_DB, L_DISK]), 5_700_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
}

#[test]
fn disk_irq_single_level_views() {
    let m = gen("disk-irq", 18);
    let f = Filter {
        duration: Duration::OffCpu,
        ..Filter::default()
    };
    let r = run(
        &m,
        Config {
            filter: f.clone(),
            ..cfg()
        },
        View::OffCpu,
    );
    assert_eq!(
        r.folded,
        map(&[(DB_ROOT, 6_030_000), (KW_ROOT, 6_030_000)]),
        "{}",
        show(&r)
    );
    // --state 2 (D): only the disk waits.
    let r = run(
        &m,
        Config {
            filter: Filter {
                state_mask: Some(2),
                ..f.clone()
            },
            ..cfg()
        },
        View::OffCpu,
    );
    assert_eq!(r.folded, map(&[(DB_ROOT, 6_030_000)]), "{}", show(&r));
    let r = run(&m, cfg(), View::Wakeup);
    let want = map(&[
        ("[hardirq: disk];nvme_irq;blk_mq_complete_request;blk_mq_end_request;wake_page_function;try_to_wake_up;cr-db", 6_000_000),
        ("cr-db;db_query;pwrite64;-;submit_bio;queue_work_on;try_to_wake_up;kworker/0:1", 6_000_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    let r = run(&m, cfg(), View::OffWake);
    let want = map(&[
        (&j(&[DB_ROOT, L_DISK]), 6_000_000),
        (&j(&[KW_ROOT, L_DB]), 6_000_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
}

const SERVER: &str =
    "cr-server;serve;epoll_wait;-;do_epoll_wait;ep_poll;schedule_hrtimeout_range;schedule";
const L_NET: &str = "--;try_to_wake_up;ep_poll_callback;sock_def_readable;tcp_v4_rcv;net_rx_action;handle_softirqs;[softirq: NET_RX]";

#[test]
fn net_softirq_and_duration_filters() {
    let m = gen("net-softirq", 6);
    let r = run(&m, cfg(), View::Chains);
    assert_eq!(
        r.folded,
        map(&[(&j(&[SERVER, L_NET]), 1_200_000)]),
        "{}",
        show(&r)
    );
    let with = |min: Option<u64>, max: Option<u64>| {
        let f = Filter {
            min_ns: min,
            max_ns: max,
            ..Filter::default()
        };
        run(&m, Config { filter: f, ..cfg() }, View::Chains)
            .folded
            .values()
            .sum::<u64>()
    };
    assert_eq!(with(Some(600_000), None), 1_200_000);
    assert_eq!(with(Some(600_001), None), 0);
    assert_eq!(with(None, Some(600_000)), 1_200_000);
    assert_eq!(with(None, Some(599_999)), 0);
}

const CLIENT: &str =
    "cr-client;client_loop;recv;-;__sys_recvfrom;tcp_recvmsg;sk_wait_data;schedule";
const SERVER_RECV: &str =
    "cr-server;serve_loop;recv;-;__sys_recvfrom;tcp_recvmsg;sk_wait_data;schedule";
const SERVER_SLEEP: &str =
    "cr-server;serve_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule";
const SOFTIRQ_SEND: &str = "--;[softirq: NET_RX];try_to_wake_up;sock_def_readable;tcp_v4_rcv;\
net_rx_action;handle_softirqs;do_softirq;__local_bh_enable_ip;tcp_sendmsg;-;send";
/// The timer interrupt's stack, cut at the interrupt entry (the idle task or seq_path
/// below it are not shown, and both iterations share the node).
const L_TIMER_ENTRY: &str = "--;try_to_wake_up;hrtimer_wakeup;__hrtimer_run_queues;\
hrtimer_interrupt;sysvec_apic_timer_interrupt;asm_sysvec_apic_timer_interrupt;[hardirq: timer]";

#[test]
fn tcp_loopback_softirq_in_task_is_a_task_hop() {
    // 2 iterations. Client blocked [100us, 2.2ms]: the server's softirq (send at 2.2ms)
    // gets [2.15ms, 2.2ms] and the server's own running [100us, 150us) = 100us; the
    // server's cause (timer at 2.15ms, sleep from 150us) gets [150us, 2.15ms] = 2ms. The
    // server's recv waits [10us, 50us] are woken by the client's softirq (the client ran
    // since before: the chain ends there). Its sleeps are inner hops (dedup).
    let m = gen("tcp-loopback", 18);
    let l_server = format!("{SOFTIRQ_SEND};serve_loop;cr-server");
    let l_client = format!("{SOFTIRQ_SEND};client_loop;cr-client");
    let r = run(&m, cfg(), View::Chains);
    let want = map(&[
        (&j(&[CLIENT, &l_server]), 2 * 100_000),
        (&j(&[CLIENT, &l_server, L_TIMER_ENTRY]), 2 * 2_000_000),
        (&j(&[SERVER_RECV, &l_client]), 2 * 40_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    sum_check(&r);
    let r = run(&m, nodedup(), View::Chains);
    assert_eq!(
        r.folded.get(&j(&[SERVER_SLEEP, L_TIMER_ENTRY])),
        Some(&(2 * 2_000_000)),
        "{}",
        show(&r)
    );
    sum_check(&r);
}

const PING: &str = "cr-ping;ping_loop;read;-;ksys_read;pipe_read;schedule";
const PONG: &str = "cr-pong;pong_loop;read;-;ksys_read;pipe_read;schedule";
const L_PONG: &str = "--;try_to_wake_up;pipe_write;ksys_write;-;write;pong_loop;cr-pong";
const L_PING: &str = "--;try_to_wake_up;pipe_write;ksys_write;-;write;ping_loop;cr-ping";

#[test]
fn cycle_bounded_and_last() {
    // 3 iterations of 60us: ping blocked [B, B+10us] (pong wakes it), pong [B+20, B+40].
    let m = gen("cycle", 18);
    let r = run(&m, cfg(), View::Chains);
    let want = map(&[(&j(&[PING, L_PONG]), 30_000), (&j(&[PONG, L_PING]), 60_000)]);
    assert_eq!(r.folded, want, "{}", show(&r));
    sum_check(&r);
    // Last mode walks back to the repeated thread and marks the cycle; ping's first wait
    // has no cycle (pong had not blocked yet).
    let r = run(&m, last(), View::Chains);
    let want = map(&[
        (&j(&[PING, L_PONG]), 10_000),
        (&j(&[PING, L_PONG, "[cycle]"]), 20_000),
        (&j(&[PONG, L_PING, "[cycle]"]), 60_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    assert_eq!(r.stats.cycles, 5);
}

fn deep_level(j: usize) -> String {
    format!("--;pipe_write;-;cr-d{j:02}")
}
const D_IRQ: &str = L_IRQ;

#[test]
fn deep_chain_default_depth_limit() {
    // 2 iterations; default depth 16. Waits of cr-d01..cr-d15 are inner hops (hidden);
    // cr-d16's wait is a root of its own (its waking was beyond the limit).
    let m = gen("deep-chain", 82);
    let r = run(&m, cfg(), View::Chains);
    let mut want = Vec::new();
    let mut path = vec!["cr-d00;-;pipe_read;schedule".to_string()];
    for k in 1..=16 {
        path.push(deep_level(k));
        let line = path.join(";");
        if k < 16 {
            want.push((line, 30_010 + 30_000));
        } else {
            want.push((format!("{line};[truncated]"), 219_850 + 510_000));
        }
    }
    let mut path = vec!["cr-d16;-;pipe_read;schedule".to_string()];
    for k in 17..=19 {
        path.push(deep_level(k));
        want.push((path.join(";"), 30_010 + 30_000));
    }
    path.push(D_IRQ.to_string());
    want.push((path.join(";"), 99_810 + 870_000));
    let want: Vec<(&str, u64)> = want.iter().map(|(l, w)| (l.as_str(), *w)).collect();
    assert_eq!(r.folded, map(&want), "{}", show(&r));
    // Chains of cr-d00..cr-d03 reach the limit (later threads' chains end at the irq);
    // only cr-d00's is a root.
    assert_eq!(r.stats.truncated, 8);
    assert_eq!(
        r.records.iter().filter(|w| w.truncated && w.root).count(),
        2
    );
    sum_check(&r);
}

#[test]
fn deep_chain_max_depth_3() {
    let m = gen("deep-chain", 82);
    let r = run(
        &m,
        Config {
            max_depth: 3,
            ..cfg()
        },
        View::Chains,
    );
    let d00 = "cr-d00;-;pipe_read;schedule";
    let p1 = j(&[d00, &deep_level(1)]);
    let p2 = j(&[&p1, &deep_level(2)]);
    let p3 = format!("{};[truncated]", j(&[&p2, &deep_level(3)]));
    assert_eq!(r.folded[&p1], 60_010);
    assert_eq!(r.folded[&p2], 60_010);
    assert_eq!(r.folded[&p3], 609_980 + 900_000);
    // Roots: d00, d03, d06, ..., d18 (every third thread starts a new chain).
    let roots: std::collections::BTreeSet<String> = r
        .folded
        .keys()
        .map(|l| l.split(';').next().unwrap().to_string())
        .collect();
    let want: std::collections::BTreeSet<String> = [0, 3, 6, 9, 12, 15, 18]
        .iter()
        .map(|j| format!("cr-d{j:02}"))
        .collect();
    assert_eq!(roots, want);
    sum_check(&r);
}

#[test]
fn fork_chain_into_child_and_exit_cleanup() {
    let m = gen("fork", 22);
    let r = run(&m, cfg(), View::Chains);
    let shell = "cr-shell;run_child;wait4;-;kernel_wait4;do_wait;schedule";
    let child = "--;try_to_wake_up;__wake_up_parent;do_notify_parent;do_exit;-;cr-child";
    let want = map(&[
        (&j(&[shell, child]), 380_000),
        (&j(&[shell, child, L_DISK]), 2_000_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    sum_check(&r);
    // The child's first interval (wakeup_new -> switch-in, 20us) is run-queue time,
    // under the name it had then.
    let f = Filter {
        duration: Duration::OffCpu,
        ..Filter::default()
    };
    let r = run(&m, Config { filter: f, ..cfg() }, View::OffCpu);
    assert_eq!(r.folded["cr-shell"], 2 * 20_000);
    // Exited children are forgotten: tracked threads stay bounded.
    let m = gen("fork", 11 * 200);
    let r = run(&m, cfg(), View::Chains);
    assert!(r.stats.peak_tasks <= 3, "{:?}", r.stats);
}

#[test]
fn pid_reuse_ends_threads_at_their_dead_switch_out() {
    // 6 iterations of 10 ms (kinds 0, 1, 2, 0, 1, 2), every child tid 901. Per iteration B:
    // parent wait4 [B+10us, B+1300us] (1290 us), parent sleep [B+1400us, B+9900us] (8500 us).
    // Kind 0: the child wakes the parent; its own cause is the timer waking at B+1100us of
    // its sleep [B+100us, ..] (s = B+100us): child 1290 - 1000 = 290 us, timer 1000 us.
    // Kinds 1, 2: the timer wakes the parent (1290 us); the child's sleep [B+100us,
    // B+1100us] is a root of its own (1000 us).
    let m = gen("pid-reuse", 13 * 6);
    let r = run(&m, cfg(), View::Chains);
    let parent = "cr-parent;run_child;wait4;-;kernel_wait4;do_wait;schedule";
    let sleep =
        "cr-parent;next_round;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule";
    let child_root = "cr-child;-;hrtimer_nanosleep;do_nanosleep;schedule";
    let child = "--;try_to_wake_up;__wake_up_parent;do_notify_parent;do_exit;-;cr-child";
    let want = map(&[
        (&j(&[parent, child]), 2 * 290_000),
        (&j(&[parent, child, L_IRQ]), 2 * 1_000_000),
        (&j(&[parent, L_IRQ]), 4 * 1_290_000),
        (&j(&[sleep, L_IRQ]), 6 * 8_500_000),
        (&j(&[child_root, L_IRQ]), 4 * 1_000_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    sum_check(&r);
    let st = &r.stats;
    // Kind 0 ends at its dead switch-out (2); kind 1's child is still open (D, since
    // B+1210us) when kind 2's fork reuses the tid 8790 us later (2); kind 2's child (S) is
    // still open when the next child is first seen switched in, 8810 us later, with no
    // waking (1; the last one is open at the end).
    assert_eq!(st.threads_exited, 2, "{st:?}");
    assert_eq!(st.threads_reused, 2, "{st:?}");
    assert_eq!(st.reused_waits_dropped, 3, "{st:?}");
    assert_eq!(st.reused_dropped_ns, 2 * 8_790_000 + 8_810_000, "{st:?}");
    assert_eq!(st.waits_without_waker, 0, "{st:?}");
    assert_eq!(st.waits_before_trace, 0, "{st:?}");
    assert_eq!(st.inconsistent, 0, "{st:?}");
    assert_eq!(st.waits_open_at_end, 1, "{st:?}");
    // No wait starts at a dead switch-out or lasts longer than an iteration.
    let f = Filter {
        duration: Duration::OffCpu,
        ..Filter::default()
    };
    let nodedup = run(
        &m,
        Config {
            filter: f,
            ..nodedup()
        },
        View::OffCpu,
    );
    for w in &nodedup.records {
        assert!(!chainrec_format::state_is_dead(w.state), "{w:?}");
        let end = w.switch_in_ns.or(w.wake_ns).unwrap_or(w.switch_out_ns);
        assert!(end - w.switch_out_ns < 10_000_000, "{w:?}");
    }
    // Every child's first wait for a CPU (fork -> first run, 20 us) is a run-queue wait of
    // the new thread, except after the lost fork (kind 0 after kind 2).
    let runnable = |r: &Run| {
        r.records
            .iter()
            .filter(|w| w.tid == 901 && w.state == 0)
            .map(|w| w.switch_in_ns.unwrap() - w.switch_out_ns)
            .collect::<Vec<_>>()
    };
    // 5 forks seen (20 us each) and 2 preemptions after the exit event (20 us each).
    assert_eq!(runnable(&nodedup), vec![20_000; 7]);
}

const TICK: &str =
    "cr-tick;tick_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule";

#[test]
fn preemption_is_runqueue_only() {
    let m = gen("preemption", 12);
    let r = run(&m, cfg(), View::Chains);
    assert_eq!(
        r.folded,
        map(&[(&j(&[TICK, L_IRQ]), 1_000_000 + 2 * 3_900_000)]),
        "{}",
        show(&r)
    );
    assert_eq!(r.stats.wakings_ignored, 3);
    assert_eq!(r.stats.preemptions, 3);
    let f = Filter {
        duration: Duration::OffCpu,
        ..Filter::default()
    };
    let r = run(
        &m,
        Config {
            filter: f.clone(),
            ..cfg()
        },
        View::OffCpu,
    );
    let worker = "cr-worker;worker_main;spin;-;irqentry_exit;preempt_schedule_irq;__schedule";
    assert_eq!(
        r.folded,
        map(&[(worker, 3 * 95_000), (TICK, 1_005_000 + 2 * 3_905_000)]),
        "{}",
        show(&r)
    );
    // --state 0: preemptions only.
    let r = run(
        &m,
        Config {
            filter: Filter {
                state_mask: Some(0),
                ..f
            },
            ..cfg()
        },
        View::OffCpu,
    );
    assert_eq!(r.folded, map(&[(worker, 3 * 95_000)]));
}

#[test]
fn comm_change_and_comm_filter() {
    // 4 iterations; cr-old renames itself in iteration 2: waits 0..=2 are cr-old, wait 3 cr-new.
    let m = gen("comm-change", 24);
    let r = run(&m, cfg(), View::Chains);
    let old = "cr-old;main_loop;read;-;ksys_read;pipe_read;schedule";
    let new = "cr-new;main_loop;read;-;ksys_read;pipe_read;schedule";
    let waker = "--;try_to_wake_up;pipe_write;ksys_write;-;write;waker_loop;cr-waker";
    let want = map(&[
        (&j(&[old, waker]), 20_010 + 2 * 20_000),
        (&j(&[old, waker, L_IRQ]), 499_990 + 2 * 1_950_000),
        (&j(&[new, waker]), 20_000),
        (&j(&[new, waker, L_IRQ]), 1_950_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    let f = Filter {
        threads: chainrec_format::ThreadSelector {
            comm: Some(Regex::new("^cr-new$").unwrap()),
            ..Default::default()
        },
        ..Filter::default()
    };
    let r = run(&m, filtered(f), View::Chains);
    let want = map(&[
        (&j(&[new, waker]), 20_000),
        (&j(&[new, waker, L_IRQ]), 1_950_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
}

#[test]
fn chain_reaching_before_the_trace() {
    // cr-b and cr-c are first seen being woken: their waits started before the trace
    // (not roots), but the wakings still serve as causes.
    let m = gen("pretrace", 27);
    let r = run(&m, cfg(), View::Chains);
    let a = "cr-a;a_loop;read;-;ksys_read;pipe_read;schedule";
    let b = "--;try_to_wake_up;pipe_write;ksys_write;-;write;b_loop;cr-b";
    let c = "--;try_to_wake_up;pipe_write;ksys_write;-;write;c_loop;cr-c";
    let want = map(&[
        (&j(&[a, b]), 9_000),
        (&j(&[a, b, c]), 6_000),
        (&j(&[a, b, c, L_IRQ]), 1_000 + 2 * 92_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    assert_eq!(r.stats.waits_before_trace, 2);
    sum_check(&r);
}

const DISP_L: &str = "--;try_to_wake_up;futex_wake;do_futex;-;futex_wake;dispatch_loop;cr-dispatch";
const WORKER: &str =
    "cr-worker;worker_loop;futex_wait;-;do_futex;futex_wait;futex_wait_queue;schedule";

#[test]
fn many_threads_and_thread_filters() {
    // 2 iterations, 64 workers. Iteration 0: worker k blocked [T0+10+k, B+102us+k*1us]:
    // dispatcher 2us + k us, softirq 100us - 10 - k. Iteration 1: workers 0..62 dispatcher
    // 68.5us, softirq 930us; worker 63 dispatcher 65us, softirq 920us.
    let m = gen("many-threads", 264);
    let r = run(&m, cfg(), View::Chains);
    let want = map(&[
        (&j(&[WORKER, DISP_L]), 2_144_000 + 63 * 68_500 + 65_000),
        (
            &j(&[WORKER, DISP_L, L_NET]),
            6_397_344 + 63 * 930_000 + 920_000,
        ),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    sum_check(&r);
    // -t 1064 (worker 63).
    let f = Filter {
        threads: chainrec_format::ThreadSelector {
            tids: vec![1064],
            ..Default::default()
        },
        ..Filter::default()
    };
    let r = run(&m, filtered(f), View::Chains);
    let want = map(&[
        (&j(&[WORKER, DISP_L]), 65_000 * 2),
        (&j(&[WORKER, DISP_L, L_NET]), 99_927 + 920_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    // -p 1000 (whole process, dedup off): the dispatcher's own waits appear as roots too.
    let f = Filter {
        threads: chainrec_format::ThreadSelector {
            pids: vec![1000],
            ..Default::default()
        },
        ..Filter::default()
    };
    let r = run(&m, filtered(f), View::Chains);
    let disp = "cr-dispatch;dispatch_loop;epoll_wait;-;do_epoll_wait;ep_poll;schedule";
    assert_eq!(r.folded[&j(&[disp, L_NET])], 100_000 + 930_000);
    assert_eq!(r.folded.len(), 3);
    // -p of another process: nothing.
    let f = Filter {
        threads: chainrec_format::ThreadSelector {
            pids: vec![4242],
            ..Default::default()
        },
        ..Filter::default()
    };
    assert!(run(&m, Config { filter: f, ..cfg() }, View::Chains)
        .folded
        .is_empty());
}

#[test]
fn lazy_stacks_skipped_failed_and_lost_are_shown() {
    let mut m = gen("lazy-stacks", 32);
    m.meta.stack_threshold_ns = 100_000;
    let r = run(&m, cfg(), View::Chains);
    let root = "cr-lazy;lazy_loop;read;-;ksys_read;pipe_read;schedule";
    let skip = "[no stack: wait < 100us]";
    let want = map(&[
        (
            &format!("cr-lazy;{skip};-;{skip};--;{skip};[hardirq: timer]"),
            4 * 10_000,
        ),
        (
            &j(&[root, "--;[missing stack];[hardirq: timer]"]),
            2 * 800_000,
        ),
        (&j(&[root, L_IRQ]), 800_000),
        (&j(&[root, L_IRQ, "[lost events]"]), 800_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    assert_eq!(r.stats.lost_events, 5);
    assert_eq!(r.stats.waits_with_lost, 1);
    assert_eq!(r.stats.stacks_skipped, 4);
    assert_eq!(r.stats.stacks_missing, 2);
}

#[test]
fn stack_labels_say_why_a_stack_is_missing() {
    let mut m = gen("stack-labels", 32); // 2 iterations
    m.meta.stack_threshold_ns = 100_000;
    let r = run(&m, cfg(), View::Chains);
    let root = "cr-lab;lab_loop;read;-;ksys_read;pipe_read;schedule";
    let nc = "[no stack: not captured]";
    let skip = "[no stack: wait < 100us]";
    let want = map(&[
        (
            &j(&[
                root,
                "--;try_to_wake_up;do_notify_parent;do_exit;-;[no user stack: exiting];cr-waker",
            ]),
            2 * 500_000,
        ),
        (&format!("cr-lab;{nc};-;{nc};{L_IRQ}"), 2 * 300_000),
        (
            &format!(
                "cr-lab;[no user stack: exec];-;ksys_read;pipe_read;schedule;--;{nc};-;{nc};cr-waker"
            ),
            2 * 300_000,
        ),
        (&format!("cr-lab;{skip};-;{skip};--;{skip};[hardirq: timer]"), 2 * 20_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
    // Exiting wakers are not failures; the long waits without stacks are counted apart.
    assert_eq!(r.stats.stacks_missing, 0);
    assert_eq!(r.stats.stacks_exiting, 2);
    assert_eq!(r.stats.stacks_not_captured, 4);
    assert_eq!(r.stats.stacks_skipped, 2);
    // No wait longer than the threshold says "wait < 100us".
    for w in &r.records {
        if w.offcpu_ns().unwrap_or(0) > 100_000 {
            assert!(
                ![w.kstack, w.ustack]
                    .iter()
                    .chain(w.hops.iter().flat_map(|h| [&h.kstack, &h.ustack]))
                    .any(|s| *s == chainrec_format::StackId::SKIPPED),
                "{w:?}"
            );
        }
    }
}

#[test]
fn window_selects_waits_by_waking_time() {
    let m = gen("pipe-relay", 27);
    let w = Window::parse("0.01..0.02").unwrap();
    let win = w.resolve(&m.meta, 1_000_000_000).unwrap();
    assert_eq!(win, (1_010_000_000, 1_020_000_000));
    let f = Filter {
        window: Some(win),
        ..Filter::default()
    };
    let r = run(&m, Config { filter: f, ..cfg() }, View::Chains);
    let want = map(&[
        (&j(&[SINK, L_RELAY]), 30_000),
        (&j(&[SINK, L_RELAY, L_TIMER]), 20_000),
        (&j(&[SINK, L_RELAY, L_TIMER, L_IRQ]), 9_920_000),
    ]);
    assert_eq!(r.folded, want, "{}", show(&r));
}

#[test]
fn window_parsing() {
    let meta = chainrec_format::RecordingMeta {
        clock_offset_ns: 1_700_000_000_000_000_000,
        ..Default::default()
    };
    let start = 5_000_000_000u64;
    assert_eq!(
        Window::parse("1.5..")
            .unwrap()
            .resolve(&meta, start)
            .unwrap(),
        (6_500_000_000, u64::MAX)
    );
    assert_eq!(
        Window::parse("..2").unwrap().resolve(&meta, start).unwrap(),
        (0, 7_000_000_000)
    );
    // Wall clock: epoch seconds.
    let w = Window::parse("@1700000006..@1700000007.5").unwrap();
    assert_eq!(
        w.resolve(&meta, start).unwrap(),
        (6_000_000_000, 7_500_000_000)
    );
    // Time of day: trace starts at wall 1700000005 s = 2023-11-14 22:13:25 UTC.
    let w = Window::parse("22:13:26..22:13:27.25").unwrap();
    assert_eq!(
        w.resolve(&meta, start).unwrap(),
        (6_000_000_000, 7_250_000_000)
    );
    for bad in ["", "1", "a..b", "-1..2", "25:00:00..", "@x.."] {
        assert!(Window::parse(bad).is_err(), "{bad:?} must be rejected");
    }
}

#[test]
fn chain_graph_of_pipe_relay() {
    let m = gen("pipe-relay", 18);
    let mut engine = chainrec_chain::Engine::new(&m.tables, &m.meta, cfg());
    let mut f = chainrec_chain::FoldedSink::new(View::Chains);
    engine.process(&m.events, &mut f);
    engine.finish(&mut f);
    let g = f.chain_graph();
    assert_eq!(g.node_count(), 4);
    assert_eq!(g.edge_count(), 3);
    let mut edges: Vec<(String, String, u64)> = g
        .edge_indices()
        .map(|e| {
            let (a, b) = g.edge_endpoints(e).unwrap();
            let n = |i| engine.nodes().get(g[i]).name().into_owned();
            (n(a), n(b), g[e])
        })
        .collect();
    edges.sort();
    let total = 60_000 + 40_000 + 4_999_700 + 9_920_000;
    assert_eq!(
        edges,
        vec![
            ("cr-relay".into(), "cr-timer".into(), total - 60_000),
            ("cr-sink".into(), "cr-relay".into(), total),
            (
                "cr-timer".into(),
                "[hardirq: timer]".into(),
                total - 100_000
            ),
        ]
    );
}

#[test]
fn memory_bounded_by_live_state() {
    // 100k ping-pong iterations: the cause lists grow forever, the arena must not.
    let m = gen("cycle", 600_000);
    let r = run(&m, cfg(), View::Chains);
    assert!(r.stats.gc_runs > 0);
    assert!(r.stats.peak_live_hops <= 1 << 17, "{:?}", r.stats);
    let n = 100_000;
    assert_eq!(
        r.folded,
        map(&[
            (&j(&[PING, L_PONG]), 10_000 * n),
            (&j(&[PONG, L_PING]), 20_000 * n)
        ])
    );
    // Same in last mode (walks stop at the repeated thread).
    let r = run(&m, last(), View::Chains);
    assert!(r.stats.peak_live_hops <= 1 << 17, "{:?}", r.stats);
    // A deep chain through many GCs still resolves exactly (cut pointers only beyond the limit).
    let n = 4_000u64;
    let m = gen("deep-chain", 41 * n);
    let r = run(&m, cfg(), View::Chains);
    assert!(r.stats.gc_runs > 0);
    let mut path = vec!["cr-d00;-;pipe_read;schedule".to_string()];
    for k in 1..=16 {
        path.push(deep_level(k));
    }
    let line = format!("{};[truncated]", path.join(";"));
    assert_eq!(r.folded[&line], 219_850 + 510_000 * (n - 1));
    sum_check(&r);
}

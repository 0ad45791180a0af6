//! Scenarios with exactly known chains (owned by the engine work).
//!
//! Every scenario writes a fixed script of events, repeated as "iterations" of a fixed
//! period to reach `--events` (iterations = ceil(events / events per iteration), at
//! least 1). All times are exact; the expected chains and attributed times are derived
//! in `crates/chain/tests/exact.rs` and `docs/ENGINE.md`. Stacks are symbolized (kernel
//! addresses in a fake kernel text, user addresses per process) so folded output shows
//! real-looking frames. The trace starts at [`T0`].

use super::scenario::{Scenario, SynthParams};
use crate::*;
use std::collections::HashMap;

/// Time of the first event of every exact scenario (1 s on the synthetic clock).
const T0: u64 = 1_000_000_000;

/// Irq source ids registered by every exact scenario.
const SRC_TIMER: u32 = 1;
const SRC_NET_RX: u32 = 2;

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario { name: "pipe-relay", about: "cr-sink <- cr-relay <- cr-timer <- [hardirq: timer] over pipes, 10 ms period", generate: pipe_relay },
        Scenario { name: "disk-irq", about: "cr-db blocks in D, woken by a disk hardirq (source inferred from stack); a kernel worker woken by cr-db", generate: disk_irq },
        Scenario { name: "net-softirq", about: "cr-server in epoll_wait woken by [softirq: NET_RX] interrupting cr-busy", generate: net_softirq },
        Scenario { name: "cycle", about: "cr-ping and cr-pong wake each other (cycle; --mode last stops at the repeated thread)", generate: cycle },
        Scenario { name: "deep-chain", about: "20 threads cr-d00 <- cr-d01 <- ... <- cr-d19 <- [hardirq: timer] (depth limit)", generate: deep_chain },
        Scenario { name: "fork", about: "cr-shell forks a child (wakeup_new) that reads from disk, exits and wakes the shell", generate: fork },
        Scenario { name: "pid-reuse", about: "cr-parent forks children that all get tid 901 (PIDs wrapping); a child exits, is preempted, wakes the parent and dies; others vanish mid-exit (end lost) before the tid is reused", generate: pid_reuse },
        Scenario { name: "preemption", about: "cr-tick (woken by timer) preempts CPU-bound cr-worker; a spurious waking of the runnable worker", generate: preemption },
        Scenario { name: "comm-change", about: "cr-old <- cr-waker <- timer; cr-old renames itself cr-new half way", generate: comm_change },
        Scenario { name: "pretrace", about: "cr-a <- cr-b <- cr-c <- timer where cr-b and cr-c were blocked before the trace began", generate: pretrace },
        Scenario { name: "many-threads", about: "64 cr-worker threads woken by cr-dispatch, woken by [softirq: NET_RX]", generate: many_threads },
        Scenario { name: "tcp-loopback", about: "cr-client <- cr-server (NET_RX softirq run in its own send) <- [hardirq: timer], interrupting different code each time", generate: tcp_loopback },
        Scenario { name: "lazy-stacks", about: "lazily attached off-CPU stacks, skipped stacks on short waits, failed waker stacks, a lost-events marker", generate: lazy_stacks },
        Scenario { name: "stack-labels", about: "an exiting waker, a user stack lost to exec, long waits whose stacks never arrived, a short skipped wait", generate: stack_labels },
        Scenario { name: "oncpu-worker", about: "cr-client waits 5 ms on cr-worker, which computes (on-CPU samples every 1 ms: spin_compute, parse); idle samples", generate: oncpu_worker },
        Scenario { name: "containers", about: "cr-web (docker container) <- cr-db (Kubernetes pod) <- cr-cron (cron.service, moved to /user.slice half way) <- [hardirq: timer] over pipes, 10 ms period; threads' cgroups recorded", generate: containers },
        Scenario { name: "timer-waits", about: "cr-main waits 30 ms on cr-timer, which slept three times on its timer meanwhile (two earlier waits inside the root's wait: one merged branch of the wakeup DAG)", generate: timer_waits },
        Scenario { name: "fork-in-wait", about: "cr-waiter waits 10 ms on a cr-worker that cr-spawner forks 10 ms into the wait; every other worker sleeps 1 ms on its timer first (the time before the fork is the spawner's, never the worker's)", generate: fork_in_wait },
        Scenario { name: "oncpu-sparse", about: "cr-client waits 5 ms on cr-worker, which computes; sparse samples (every 30 ms per CPU): most waits hold no sample of the worker", generate: oncpu_sparse },
    ]
}

/// Builds symbolized stacks and collects events.
struct B {
    stacks: Vec<StackEntry>,
    syms: Vec<SymbolEntry>,
    addr: HashMap<(StackKind, Tid, &'static str), u64>,
    next_id: u32,
    next_k: u64,
    next_u: u64,
    ev: Vec<Event>,
}

impl B {
    fn new() -> Self {
        B {
            stacks: Vec::new(),
            syms: Vec::new(),
            addr: HashMap::new(),
            next_id: StackId::FIRST_REAL,
            next_k: 0xffff_ffff_8100_0000,
            next_u: 0x40_1000,
            ev: Vec::new(),
        }
    }
    /// A stack, frames leaf first.
    fn stack(&mut self, kind: StackKind, tgid: Tid, frames: &[&'static str]) -> StackId {
        let mut addrs = Vec::new();
        for &f in frames {
            let key = (kind, tgid, f);
            let a = match self.addr.get(&key) {
                Some(&a) => a,
                None => {
                    let a = if kind == StackKind::Kernel {
                        self.next_k += 0x140;
                        self.next_k
                    } else {
                        self.next_u += 0x60;
                        self.next_u
                    };
                    self.addr.insert(key, a);
                    self.syms.push(SymbolEntry {
                        kind,
                        tgid,
                        addr: a,
                        name: Some(f.to_string()),
                        offset: 0x10,
                        module: if kind == StackKind::User {
                            Some("/usr/bin/synthetic".into())
                        } else {
                            None
                        },
                        build_id: None,
                        file_offset: None,
                    });
                    a
                }
            };
            addrs.push(a);
        }
        let id = StackId(self.next_id);
        self.next_id += 1;
        self.stacks.push(StackEntry {
            id,
            kind,
            tgid,
            frames: addrs,
        });
        id
    }
    fn k(&mut self, frames: &[&'static str]) -> StackId {
        self.stack(StackKind::Kernel, 0, frames)
    }
    fn u(&mut self, tgid: Tid, frames: &[&'static str]) -> StackId {
        self.stack(StackKind::User, tgid, frames)
    }
    #[allow(clippy::too_many_arguments)]
    fn sw(&mut self, ts: u64, cpu: u32, prev: Tid, state: u32, next: Tid, k: StackId, u: StackId) {
        self.ev.push(Event::Switch(Switch {
            ts,
            cpu,
            prev_tid: prev,
            prev_state: state,
            next_tid: next,
            prev_kstack: k,
            prev_ustack: u,
        }));
    }
    /// Switch-in from idle.
    fn swin(&mut self, ts: u64, cpu: u32, next: Tid) {
        self.sw(
            ts,
            cpu,
            0,
            STATE_RUNNABLE,
            next,
            StackId::NONE,
            StackId::NONE,
        );
    }
    #[allow(clippy::too_many_arguments)]
    fn wk(
        &mut self,
        ts: u64,
        cpu: u32,
        waker: Tid,
        target: Tid,
        ctx: WakeContext,
        source: u32,
        k: StackId,
        u: StackId,
    ) {
        self.ev.push(Event::Waking(Waking {
            ts,
            cpu,
            waker_tid: waker,
            target_tid: target,
            context: ctx,
            source,
            waker_kstack: k,
            waker_ustack: u,
        }));
    }
    fn sample(&mut self, ts: u64, cpu: u32, tid: Tid, k: StackId, u: StackId) {
        self.ev.push(Event::Sample(Sample {
            ts,
            cpu,
            tid,
            kstack: k,
            ustack: u,
        }));
    }
    fn comm(&mut self, ts: u64, tid: Tid, tgid: Tid, name: &str, reason: CommReason) {
        self.ev.push(Event::Comm(TaskComm {
            ts,
            tid,
            tgid,
            comm: Comm::new(name),
            reason,
        }));
    }
    /// Write tables, then the events sorted by time (stable: script order breaks ties).
    fn finish(mut self, out: &mut dyn TraceSink, tasks: &[(Tid, Tid, &str, bool)]) -> Result<()> {
        out.add_irq_sources(&[
            IrqSource {
                id: SRC_TIMER,
                name: "timer".into(),
            },
            IrqSource {
                id: SRC_NET_RX,
                name: "NET_RX".into(),
            },
        ])?;
        out.add_stacks(&self.stacks)?;
        out.add_symbols(&self.syms)?;
        let t: Vec<TaskEntry> = tasks
            .iter()
            .map(|&(tid, tgid, name, kernel_thread)| TaskEntry {
                tid,
                tgid,
                comm: Comm::new(name),
                kernel_thread,
            })
            .collect();
        out.add_tasks(&t)?;
        self.ev.sort_by_key(|e| e.ts());
        for e in &self.ev {
            out.push(e)?;
        }
        Ok(())
    }
    /// Flush events generated so far (keeps memory bounded for large --events).
    fn drain(&mut self, out: &mut dyn TraceSink) -> Result<()> {
        self.ev.sort_by_key(|e| e.ts());
        for e in self.ev.drain(..) {
            out.push(&e)?;
        }
        Ok(())
    }
}

fn iterations(p: &SynthParams, per_iter: u64) -> u64 {
    p.events.div_ceil(per_iter).max(1)
}

/// Write tables first, then stream iterations (sorted per iteration, iterations do not overlap).
fn run(
    b: B,
    out: &mut dyn TraceSink,
    tasks: &[(Tid, Tid, &str, bool)],
    n: u64,
    mut iter: impl FnMut(&mut B, u64, u64),
    period: u64,
) -> Result<()> {
    let mut b = b;
    let prologue = std::mem::take(&mut b.ev);
    b.finish(out, tasks)?;
    let mut b2 = B::new();
    b2.ev = prologue;
    b2.drain(out)?;
    for i in 0..n {
        iter(&mut b2, i, T0 + i * period);
        b2.drain(out)?;
    }
    Ok(())
}

const S: u32 = STATE_INTERRUPTIBLE;
const D: u32 = STATE_UNINTERRUPTIBLE;
const HARD: WakeContext = WakeContext::HardIrq;
const SOFT: WakeContext = WakeContext::SoftIrq;
const TASK: WakeContext = WakeContext::Task;
const SOFT_TASK: WakeContext = WakeContext::SoftIrqTask;
const NO: StackId = StackId::NONE;

fn irq_timer_stack(b: &mut B) -> StackId {
    b.k(&[
        "try_to_wake_up",
        "hrtimer_wakeup",
        "__hrtimer_run_queues",
        "hrtimer_interrupt",
    ])
}

/// pipe-relay: 9 events per 10 ms iteration.
fn pipe_relay(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (timer, relay, sink) = (101, 102, 103);
    let mut b = B::new();
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_timer_sleep = b.u(100, &["clock_nanosleep", "timer_loop"]);
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let u_sink_read = b.u(100, &["read", "sink_loop"]);
    let u_relay_read = b.u(100, &["read", "relay_loop"]);
    let k_write = b.k(&["try_to_wake_up", "pipe_write", "ksys_write"]);
    let u_timer_write = b.u(100, &["write", "timer_loop"]);
    let u_relay_write = b.u(100, &["write", "relay_loop"]);
    let k_irq = irq_timer_stack(&mut b);
    for (t, n) in [(timer, "cr-timer"), (relay, "cr-relay"), (sink, "cr-sink")] {
        b.comm(T0, t, 100, n, CommReason::Seen);
    }
    b.sw(T0 + 100, 0, timer, S, 0, k_sleep, u_timer_sleep);
    b.sw(T0 + 200, 1, relay, S, 0, k_read, u_relay_read);
    b.sw(T0 + 300, 2, sink, S, 0, k_read, u_sink_read);
    let tasks = [
        (timer, 100, "cr-timer", false),
        (relay, 100, "cr-relay", false),
        (sink, 100, "cr-sink", false),
    ];
    let n = iterations(p, 9);
    run(
        b,
        out,
        &tasks,
        n,
        |b, _, t| {
            b.wk(t + 5_000_000, 0, 0, timer, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 5_010_000, 0, timer);
            b.wk(
                t + 5_020_000,
                0,
                timer,
                relay,
                TASK,
                0,
                k_write,
                u_timer_write,
            );
            b.sw(t + 5_030_000, 0, timer, S, 0, k_sleep, u_timer_sleep);
            b.swin(t + 5_040_000, 1, relay);
            b.wk(
                t + 5_050_000,
                1,
                relay,
                sink,
                TASK,
                0,
                k_write,
                u_relay_write,
            );
            b.sw(t + 5_060_000, 1, relay, S, 0, k_read, u_relay_read);
            b.swin(t + 5_070_000, 2, sink);
            b.sw(t + 5_080_000, 2, sink, S, 0, k_read, u_sink_read);
        },
        10_000_000,
    )
}

/// timer-waits: 12 events per 40 ms iteration. cr-main blocks at B+100 in a futex until
/// cr-timer wakes it at B+30.05 ms. cr-timer slept on its timer until B+10 ms (since the
/// previous iteration), ran 100 us, slept until B+20 ms, ran 100 us, slept until B+30 ms,
/// and woke cr-main 50 us after: its waits ending at B+10 and B+20 ms are earlier waits
/// inside cr-main's.
fn timer_waits(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (timer, main) = (301, 302);
    let mut b = B::new();
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_sleep = b.u(300, &["clock_nanosleep", "timer_loop"]);
    let k_futex = b.k(&["schedule", "futex_wait"]);
    let u_join = b.u(300, &["pthread_join", "main"]);
    let k_wake = b.k(&["try_to_wake_up", "futex_wake"]);
    let u_signal = b.u(300, &["pthread_cond_signal", "timer_loop"]);
    let k_irq = irq_timer_stack(&mut b);
    for (t, n) in [(timer, "cr-timer"), (main, "cr-main")] {
        b.comm(T0, t, 300, n, CommReason::Seen);
    }
    b.sw(T0 + 50, 0, timer, S, 0, k_sleep, u_sleep);
    let tasks = [
        (timer, 300, "cr-timer", false),
        (main, 300, "cr-main", false),
    ];
    let n = iterations(p, 12);
    run(
        b,
        out,
        &tasks,
        n,
        |b, _, t| {
            b.sw(t + 100, 1, main, S, 0, k_futex, u_join);
            for ms in [10, 20] {
                let at = t + ms * 1_000_000;
                b.wk(at, 0, 0, timer, HARD, SRC_TIMER, k_irq, NO);
                b.swin(at + 10_000, 0, timer);
                b.sw(at + 100_000, 0, timer, S, 0, k_sleep, u_sleep);
            }
            b.wk(t + 30_000_000, 0, 0, timer, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 30_010_000, 0, timer);
            b.wk(t + 30_050_000, 0, timer, main, TASK, 0, k_wake, u_signal);
            b.sw(t + 30_060_000, 0, timer, S, 0, k_sleep, u_sleep);
            b.swin(t + 30_070_000, 1, main);
        },
        40_000_000,
    )
}

/// fork-in-wait: 10 or 13 events per 20 ms iteration; worker tids 1102, 1103, ...
/// cr-waiter (1100) blocks at t+100 on CPU 0; cr-spawner (1101) runs on CPU 1 throughout
/// and forks a worker at t+10 ms, switched in on CPU 0 20 us later. An even iteration's
/// worker wakes the waiter at t+10.5 ms; an odd one's first sleeps on its timer
/// [t+10.1, t+11.1 ms] and wakes the waiter at t+11.5 ms. The worker exits and the
/// waiter runs 100 us after its waking.
fn fork_in_wait(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (waiter, spawner) = (1100, 1101);
    let mut b = B::new();
    let k_futex = b.k(&["schedule", "futex_wait"]);
    let u_join = b.u(1100, &["pthread_join", "main"]);
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let k_wake = b.k(&["try_to_wake_up", "futex_wake"]);
    let k_irq = irq_timer_stack(&mut b);
    b.comm(T0, waiter, 1100, "cr-waiter", CommReason::Seen);
    b.comm(T0, spawner, 1100, "cr-spawner", CommReason::Seen);
    b.swin(T0, 1, spawner);
    let tasks = [
        (waiter, 1100, "cr-waiter", false),
        (spawner, 1100, "cr-spawner", false),
    ];
    run(
        b,
        out,
        &tasks,
        iterations(p, 10),
        |b, i, t| {
            let c = 1102 + i as Tid;
            b.sw(t + 100, 0, waiter, S, 0, k_futex, u_join);
            b.comm(t + 10_000_000, c, c, "cr-spawner", CommReason::Fork);
            b.ev.push(Event::WakeupNew(WakeupNew {
                ts: t + 10_000_000,
                cpu: 1,
                parent_tid: spawner,
                child_tid: c,
                child_tgid: c,
            }));
            b.swin(t + 10_020_000, 0, c);
            b.comm(t + 10_030_000, c, c, "cr-worker", CommReason::Exec);
            let wake = if i % 2 == 0 {
                t + 10_500_000
            } else {
                b.sw(t + 10_100_000, 0, c, S, 0, k_sleep, NO);
                b.wk(t + 11_100_000, 0, 0, c, HARD, SRC_TIMER, k_irq, NO);
                b.swin(t + 11_110_000, 0, c);
                t + 11_500_000
            };
            b.wk(wake, 0, c, waiter, TASK, 0, k_wake, NO);
            b.ev.push(Event::Exit(Exit {
                ts: wake + 50_000,
                tid: c,
                tgid: c,
            }));
            b.sw(wake + 100_000, 0, c, 0x80, waiter, NO, NO);
        },
        20_000_000,
    )
}

/// disk-irq: 6 events per 3 ms iteration.
fn disk_irq(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (db, bg, kw) = (201, 202, 203);
    let mut b = B::new();
    let k_io = b.k(&[
        "schedule",
        "io_schedule",
        "folio_wait_bit_common",
        "filemap_read",
    ]);
    let u_io = b.u(200, &["pread64", "db_query"]);
    let k_blk = b.k(&[
        "try_to_wake_up",
        "wake_page_function",
        "blk_mq_end_request",
        "blk_mq_complete_request",
        "nvme_irq",
    ]);
    let k_kw = b.k(&["schedule", "worker_thread", "kthread"]);
    let k_queue = b.k(&["try_to_wake_up", "queue_work_on", "submit_bio"]);
    let u_queue = b.u(200, &["pwrite64", "db_query"]);
    b.comm(T0, db, 200, "cr-db", CommReason::Seen);
    b.comm(T0, bg, 202, "cr-bg", CommReason::Seen);
    b.comm(T0, kw, 0, "kworker/0:1", CommReason::Seen);
    let tasks = [
        (db, 200, "cr-db", false),
        (bg, 202, "cr-bg", false),
        (kw, 0, "kworker/0:1", true),
    ];
    let n = iterations(p, 6);
    run(
        b,
        out,
        &tasks,
        n,
        |b, _, t| {
            b.sw(t + 100_000, 0, db, D, 0, k_io, u_io);
            b.sw(t + 200_000, 2, kw, S, 0, k_kw, NO);
            b.wk(t + 2_100_000, 1, bg, db, HARD, 0, k_blk, NO);
            b.swin(t + 2_110_000, 0, db);
            b.wk(t + 2_200_000, 0, db, kw, TASK, 0, k_queue, u_queue);
            b.swin(t + 2_210_000, 2, kw);
        },
        3_000_000,
    )
}

/// net-softirq: 3 events per 1 ms iteration.
fn net_softirq(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (server, busy) = (301, 302);
    let mut b = B::new();
    let k_ep = b.k(&[
        "schedule",
        "schedule_hrtimeout_range",
        "ep_poll",
        "do_epoll_wait",
    ]);
    let u_ep = b.u(300, &["epoll_wait", "serve"]);
    let k_net = b.k(&[
        "try_to_wake_up",
        "ep_poll_callback",
        "sock_def_readable",
        "tcp_v4_rcv",
        "net_rx_action",
        "handle_softirqs",
    ]);
    b.comm(T0, server, 300, "cr-server", CommReason::Seen);
    b.comm(T0, busy, 300, "cr-busy", CommReason::Seen);
    let tasks = [
        (server, 300, "cr-server", false),
        (busy, 300, "cr-busy", false),
    ];
    run(
        b,
        out,
        &tasks,
        iterations(p, 3),
        |b, _, t| {
            b.sw(t + 100_000, 0, server, S, 0, k_ep, u_ep);
            b.wk(t + 700_000, 1, busy, server, SOFT, SRC_NET_RX, k_net, NO);
            b.swin(t + 720_000, 0, server);
        },
        1_000_000,
    )
}

/// tcp-loopback: 9 events per 10 ms iteration. The server, blocked in recv, is woken by
/// the NET_RX softirq the client runs in its own send; it sleeps 2 ms (timer), then its
/// send runs the softirq that wakes the client, blocked in recv since t+100us. The timer
/// interrupt hits the idle task, then a task in seq_path, alternately.
fn tcp_loopback(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (client, server, other) = (1201, 1202, 1203);
    let mut b = B::new();
    let k_recv = b.k(&["schedule", "sk_wait_data", "tcp_recvmsg", "__sys_recvfrom"]);
    let u_cli_recv = b.u(1200, &["recv", "client_loop"]);
    let u_srv_recv = b.u(1200, &["recv", "serve_loop"]);
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_srv_sleep = b.u(1200, &["clock_nanosleep", "serve_loop"]);
    let k_send = b.k(&[
        "try_to_wake_up",
        "sock_def_readable",
        "tcp_v4_rcv",
        "net_rx_action",
        "handle_softirqs",
        "do_softirq",
        "__local_bh_enable_ip",
        "tcp_sendmsg",
    ]);
    let u_cli_send = b.u(1200, &["send", "client_loop"]);
    let u_srv_send = b.u(1200, &["send", "serve_loop"]);
    let irq = [
        "try_to_wake_up",
        "hrtimer_wakeup",
        "__hrtimer_run_queues",
        "hrtimer_interrupt",
        "sysvec_apic_timer_interrupt",
        "asm_sysvec_apic_timer_interrupt",
    ];
    let k_irq_idle = b.k(&[&irq[..], &["default_idle", "do_idle"]].concat());
    let k_irq_seq = b.k(&[&irq[..], &["mangle_path", "seq_path"]].concat());
    for (tid, name) in [
        (client, "cr-client"),
        (server, "cr-server"),
        (other, "cr-other"),
    ] {
        b.comm(T0, tid, 1200, name, CommReason::Seen);
    }
    let tasks = [
        (client, 1200, "cr-client", false),
        (server, 1200, "cr-server", false),
        (other, 1200, "cr-other", false),
    ];
    run(
        b,
        out,
        &tasks,
        iterations(p, 9),
        |b, i, t| {
            b.sw(t + 10_000, 1, server, S, 0, k_recv, u_srv_recv);
            b.wk(
                t + 50_000,
                0,
                client,
                server,
                SOFT_TASK,
                SRC_NET_RX,
                k_send,
                u_cli_send,
            );
            b.swin(t + 60_000, 1, server);
            b.sw(t + 100_000, 0, client, S, 0, k_recv, u_cli_recv);
            b.sw(t + 150_000, 1, server, S, 0, k_sleep, u_srv_sleep);
            let (hit, k_irq) = if i % 2 == 0 {
                (0, k_irq_idle)
            } else {
                (other, k_irq_seq)
            };
            b.wk(t + 2_150_000, 1, hit, server, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 2_160_000, 1, server);
            b.wk(
                t + 2_200_000,
                1,
                server,
                client,
                SOFT_TASK,
                SRC_NET_RX,
                k_send,
                u_srv_send,
            );
            b.swin(t + 2_220_000, 0, client);
        },
        10_000_000,
    )
}

/// cycle: 6 events per 60 us iteration.
fn cycle(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (ping, pong) = (401, 402);
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let k_write = b.k(&["try_to_wake_up", "pipe_write", "ksys_write"]);
    let u_ping_read = b.u(400, &["read", "ping_loop"]);
    let u_pong_read = b.u(400, &["read", "pong_loop"]);
    let u_ping_write = b.u(400, &["write", "ping_loop"]);
    let u_pong_write = b.u(400, &["write", "pong_loop"]);
    b.comm(T0, ping, 400, "cr-ping", CommReason::Seen);
    b.comm(T0, pong, 400, "cr-pong", CommReason::Seen);
    let tasks = [(ping, 400, "cr-ping", false), (pong, 400, "cr-pong", false)];
    run(
        b,
        out,
        &tasks,
        iterations(p, 6),
        |b, _, t| {
            b.sw(t, 0, ping, S, 0, k_read, u_ping_read);
            b.wk(t + 10_000, 1, pong, ping, TASK, 0, k_write, u_pong_write);
            b.sw(t + 20_000, 1, pong, S, 0, k_read, u_pong_read);
            b.swin(t + 30_000, 0, ping);
            b.wk(t + 40_000, 0, ping, pong, TASK, 0, k_write, u_ping_write);
            b.swin(t + 50_000, 1, pong);
        },
        60_000,
    )
}

/// deep-chain: 41 events per 1 ms iteration.
fn deep_chain(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    const NAMES: [&str; 20] = [
        "cr-d00", "cr-d01", "cr-d02", "cr-d03", "cr-d04", "cr-d05", "cr-d06", "cr-d07", "cr-d08",
        "cr-d09", "cr-d10", "cr-d11", "cr-d12", "cr-d13", "cr-d14", "cr-d15", "cr-d16", "cr-d17",
        "cr-d18", "cr-d19",
    ];
    let tid = |j: u64| 500 + j as Tid;
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read"]);
    let k_write = b.k(&["pipe_write"]);
    let k_irq = irq_timer_stack(&mut b);
    let mut tasks = Vec::new();
    for (j, name) in NAMES.iter().enumerate() {
        b.comm(T0, tid(j as u64), 500, name, CommReason::Seen);
        tasks.push((tid(j as u64), 500, *name, false));
    }
    for j in 0..20u64 {
        b.sw(T0 + j * 10, 0, tid(j), S, 0, k_read, NO);
    }
    run(
        b,
        out,
        &tasks,
        iterations(p, 41),
        |b, _, t| {
            for m in 0..20u64 {
                let j = 19 - m;
                let w = t + 100_000 + m * 30_000;
                if m == 0 {
                    b.wk(w, 0, 0, tid(j), HARD, SRC_TIMER, k_irq, NO);
                    b.swin(w + 10_000, 0, tid(j));
                } else {
                    b.wk(w, 0, tid(j + 1), tid(j), TASK, 0, k_write, NO);
                    b.sw(w + 10_000, 0, tid(j + 1), S, tid(j), k_read, NO);
                }
            }
            b.sw(
                t + 100_000 + 19 * 30_000 + 40_000,
                0,
                tid(0),
                S,
                0,
                k_read,
                NO,
            );
        },
        1_000_000,
    )
}

/// fork: 11 events per 5 ms iteration; child tids 601, 602, ...
fn fork(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let shell = 600;
    let mut b = B::new();
    let k_wait = b.k(&["schedule", "do_wait", "kernel_wait4"]);
    let u_wait = b.u(600, &["wait4", "run_child"]);
    let k_io = b.k(&[
        "schedule",
        "io_schedule",
        "folio_wait_bit_common",
        "filemap_read",
    ]);
    let k_blk = b.k(&[
        "try_to_wake_up",
        "wake_page_function",
        "blk_mq_end_request",
        "blk_mq_complete_request",
        "nvme_irq",
    ]);
    let k_exit = b.k(&[
        "try_to_wake_up",
        "__wake_up_parent",
        "do_notify_parent",
        "do_exit",
    ]);
    b.comm(T0, shell, 600, "cr-shell", CommReason::Seen);
    let tasks = [(shell, 600, "cr-shell", false)];
    run(
        b,
        out,
        &tasks,
        iterations(p, 11),
        |b, i, t| {
            let c = 601 + i as Tid;
            b.comm(t, c, c, "cr-shell", CommReason::Fork);
            b.ev.push(Event::WakeupNew(WakeupNew {
                ts: t,
                cpu: 0,
                parent_tid: shell,
                child_tid: c,
                child_tgid: c,
            }));
            b.sw(t + 10_000, 0, shell, S, 0, k_wait, u_wait);
            b.swin(t + 20_000, 1, c);
            b.comm(t + 30_000, c, c, "cr-child", CommReason::Exec);
            b.sw(t + 100_000, 1, c, D, 0, k_io, NO);
            b.wk(t + 1_100_000, 1, 0, c, HARD, 0, k_blk, NO);
            b.swin(t + 1_110_000, 1, c);
            b.wk(t + 1_200_000, 1, c, shell, TASK, 0, k_exit, NO);
            b.ev.push(Event::Exit(Exit {
                ts: t + 1_210_000,
                tid: c,
                tgid: c,
            }));
            b.sw(t + 1_220_000, 1, c, 0x80, 0, NO, NO);
            b.swin(t + 1_230_000, 0, shell);
        },
        5_000_000,
    )
}

/// pid-reuse: 10 to 16 events per 10 ms iteration; every child of cr-parent (900) has tid
/// 901, as when PIDs wrap under fork churn. Iteration kinds, i % 3:
/// * 0: the child sleeps (timer), exits, is preempted after its exit event, runs again,
///   wakes the parent and switches out dead (`x`): a new thread must not continue it.
///   When the previous iteration was kind 2, this one's fork events are lost.
/// * 1: the child exits and blocks in D; the rest of its life is lost. The parent is woken
///   by the timer. The next fork (kind 2) reuses tid 901 while its wait is still open.
/// * 2: as 1, blocking in S; the next child (kind 0, fork events lost) is first seen
///   switched in, with no waking of the old wait.
fn pid_reuse(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (parent, child) = (900, 901);
    let mut b = B::new();
    let k_wait = b.k(&["schedule", "do_wait", "kernel_wait4"]);
    let u_wait = b.u(900, &["wait4", "run_child"]);
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_sleep = b.u(900, &["clock_nanosleep", "next_round"]);
    let k_csleep = b.k(&["schedule", "do_nanosleep", "hrtimer_nanosleep"]);
    let k_exiting = b.k(&["schedule", "exit_files", "do_exit"]);
    let k_irq = irq_timer_stack(&mut b);
    let k_exit = b.k(&[
        "try_to_wake_up",
        "__wake_up_parent",
        "do_notify_parent",
        "do_exit",
    ]);
    b.comm(T0, parent, parent, "cr-parent", CommReason::Seen);
    let tasks = [(parent, parent, "cr-parent", false)];
    run(
        b,
        out,
        &tasks,
        iterations(p, 13),
        |b, i, t| {
            let kind = i % 3;
            if kind != 0 || i == 0 {
                b.comm(t, child, child, "cr-parent", CommReason::Fork);
                b.ev.push(Event::WakeupNew(WakeupNew {
                    ts: t,
                    cpu: 0,
                    parent_tid: parent,
                    child_tid: child,
                    child_tgid: child,
                }));
            }
            b.sw(t + 10_000, 0, parent, S, 0, k_wait, u_wait);
            b.swin(t + 20_000, 1, child);
            b.comm(t + 30_000, child, child, "cr-child", CommReason::Exec);
            b.sw(t + 100_000, 1, child, S, 0, k_csleep, NO);
            b.wk(t + 1_100_000, 1, 0, child, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 1_110_000, 1, child);
            b.ev.push(Event::Exit(Exit {
                ts: t + 1_200_000,
                tid: child,
                tgid: child,
            }));
            if kind == 0 {
                // Preempted after its exit event: still the same thread.
                b.wk(t + 1_300_000, 1, child, parent, TASK, 0, k_exit, NO);
                b.sw(t + 1_310_000, 1, child, STATE_RUNNABLE, 0, NO, NO);
                b.swin(t + 1_330_000, 1, child);
                b.sw(t + 1_340_000, 1, child, STATE_TASK_DEAD, 0, NO, NO);
            } else {
                let state = if kind == 1 { D } else { S };
                b.sw(t + 1_210_000, 1, child, state, 0, k_exiting, NO);
                b.wk(t + 1_300_000, 0, 0, parent, HARD, SRC_TIMER, k_irq, NO);
            }
            b.swin(t + 1_320_000, 0, parent);
            b.sw(t + 1_400_000, 0, parent, S, 0, k_sleep, u_sleep);
            b.wk(t + 9_900_000, 0, 0, parent, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 9_910_000, 0, parent);
        },
        10_000_000,
    )
}

/// preemption: 4 events per 4 ms iteration.
fn preemption(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (worker, tick) = (701, 702);
    let mut b = B::new();
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_tick = b.u(700, &["clock_nanosleep", "tick_loop"]);
    let k_pre = b.k(&["__schedule", "preempt_schedule_irq", "irqentry_exit"]);
    let u_spin = b.u(700, &["spin", "worker_main"]);
    let k_irq = irq_timer_stack(&mut b);
    let k_spur = b.k(&["try_to_wake_up", "wake_up_q", "futex_wake"]);
    b.comm(T0, worker, 700, "cr-worker", CommReason::Seen);
    b.comm(T0, tick, 700, "cr-tick", CommReason::Seen);
    b.sw(T0, 0, tick, S, worker, k_sleep, u_tick);
    let tasks = [
        (worker, 700, "cr-worker", false),
        (tick, 700, "cr-tick", false),
    ];
    run(
        b,
        out,
        &tasks,
        iterations(p, 4),
        |b, _, t| {
            b.wk(t + 1_000_000, 0, worker, tick, HARD, SRC_TIMER, k_irq, NO);
            b.sw(
                t + 1_005_000,
                0,
                worker,
                STATE_RUNNABLE,
                tick,
                k_pre,
                u_spin,
            );
            b.wk(t + 1_050_000, 0, tick, worker, TASK, 0, k_spur, NO);
            b.sw(t + 1_100_000, 0, tick, S, worker, k_sleep, u_tick);
        },
        4_000_000,
    )
}

/// comm-change: 6 events per 2 ms iteration (+1 rename in iteration n/2).
fn comm_change(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (main, waker) = (801, 802);
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let u_read = b.u(800, &["read", "main_loop"]);
    let k_write = b.k(&["try_to_wake_up", "pipe_write", "ksys_write"]);
    let u_write = b.u(800, &["write", "waker_loop"]);
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_sleep = b.u(800, &["clock_nanosleep", "waker_loop"]);
    let k_irq = irq_timer_stack(&mut b);
    b.comm(T0, main, 800, "cr-old", CommReason::Seen);
    b.comm(T0, waker, 800, "cr-waker", CommReason::Seen);
    b.sw(T0, 0, main, S, 0, k_read, u_read);
    b.sw(T0 + 10, 1, waker, S, 0, k_sleep, u_sleep);
    let tasks = [
        (main, 800, "cr-old", false),
        (waker, 800, "cr-waker", false),
    ];
    let n = iterations(p, 6);
    run(
        b,
        out,
        &tasks,
        n,
        |b, i, t| {
            b.wk(t + 500_000, 1, 0, waker, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 510_000, 1, waker);
            b.wk(t + 520_000, 1, waker, main, TASK, 0, k_write, u_write);
            b.sw(t + 530_000, 1, waker, S, 0, k_sleep, u_sleep);
            b.swin(t + 540_000, 0, main);
            if i == n / 2 {
                b.comm(t + 545_000, main, 800, "cr-new", CommReason::Rename);
            }
            b.sw(t + 550_000, 0, main, S, 0, k_read, u_read);
        },
        2_000_000,
    )
}

/// pretrace: 9 events per 100 us iteration (+1 in the first); cr-b and cr-c are first
/// seen being woken (blocked since before the trace).
fn pretrace(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (a, bb, c) = (901, 902, 903);
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let k_write = b.k(&["try_to_wake_up", "pipe_write", "ksys_write"]);
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_a_read = b.u(900, &["read", "a_loop"]);
    let u_b_read = b.u(900, &["read", "b_loop"]);
    let u_b_write = b.u(900, &["write", "b_loop"]);
    let u_c_write = b.u(900, &["write", "c_loop"]);
    let u_c_sleep = b.u(900, &["clock_nanosleep", "c_loop"]);
    let k_irq = irq_timer_stack(&mut b);
    for (t, n) in [(a, "cr-a"), (bb, "cr-b"), (c, "cr-c")] {
        b.comm(T0, t, 900, n, CommReason::Seen);
    }
    let tasks = [
        (a, 900, "cr-a", false),
        (bb, 900, "cr-b", false),
        (c, 900, "cr-c", false),
    ];
    run(
        b,
        out,
        &tasks,
        iterations(p, 9),
        |b, i, t| {
            if i == 0 {
                b.sw(t + 1_000, 0, a, S, 0, k_read, u_a_read);
            }
            b.wk(t + 2_000, 2, 0, c, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 3_000, 2, c);
            b.wk(t + 4_000, 2, c, bb, TASK, 0, k_write, u_c_write);
            b.sw(t + 5_000, 2, c, S, 0, k_sleep, u_c_sleep);
            b.swin(t + 6_000, 1, bb);
            b.wk(t + 7_000, 1, bb, a, TASK, 0, k_write, u_b_write);
            b.sw(t + 8_000, 1, bb, S, 0, k_read, u_b_read);
            b.swin(t + 9_000, 0, a);
            b.sw(t + 10_000, 0, a, S, 0, k_read, u_a_read);
        },
        100_000,
    )
}

/// many-threads: 132 events per 1 ms iteration; workers 1001..=1064.
fn many_threads(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let disp = 1000;
    let w = |k: u64| 1001 + k as Tid;
    let mut b = B::new();
    let k_ep = b.k(&["schedule", "ep_poll", "do_epoll_wait"]);
    let u_ep = b.u(1000, &["epoll_wait", "dispatch_loop"]);
    let k_fw = b.k(&["schedule", "futex_wait_queue", "futex_wait", "do_futex"]);
    let u_fw = b.u(1000, &["futex_wait", "worker_loop"]);
    let k_wake = b.k(&["try_to_wake_up", "futex_wake", "do_futex"]);
    let u_wake = b.u(1000, &["futex_wake", "dispatch_loop"]);
    let k_net = b.k(&[
        "try_to_wake_up",
        "ep_poll_callback",
        "sock_def_readable",
        "tcp_v4_rcv",
        "net_rx_action",
        "handle_softirqs",
    ]);
    b.comm(T0, disp, 1000, "cr-dispatch", CommReason::Seen);
    let mut tasks = vec![(disp, 1000, "cr-dispatch", false)];
    for k in 0..64 {
        b.comm(T0, w(k), 1000, "cr-worker", CommReason::Seen);
        tasks.push((w(k), 1000, "cr-worker", false));
    }
    b.sw(T0, 0, disp, S, 0, k_ep, u_ep);
    for k in 0..64 {
        b.sw(T0 + 10 + k, 1, w(k), S, 0, k_fw, u_fw);
    }
    run(
        b,
        out,
        &tasks,
        iterations(p, 132),
        |b, _, t| {
            b.wk(t + 100_000, 0, 0, disp, SOFT, SRC_NET_RX, k_net, NO);
            b.swin(t + 101_000, 0, disp);
            for k in 0..64 {
                b.wk(
                    t + 102_000 + k * 1_000,
                    0,
                    disp,
                    w(k),
                    TASK,
                    0,
                    k_wake,
                    u_wake,
                );
                let prev = if k == 0 { 0 } else { w(k - 1) };
                let (pk, pu) = if k == 0 { (NO, NO) } else { (k_fw, u_fw) };
                b.sw(
                    t + 102_500 + k * 1_000,
                    1,
                    prev,
                    if k == 0 { STATE_RUNNABLE } else { S },
                    w(k),
                    pk,
                    pu,
                );
            }
            b.sw(t + 170_000, 0, disp, S, 0, k_ep, u_ep);
            b.sw(t + 180_000, 1, w(63), S, 0, k_fw, u_fw);
        },
        1_000_000,
    )
}

/// stack-labels: 16 events per 2 ms iteration. cr-lab (lazy threshold 100 us) waits four
/// times: 500 us, woken by cr-waker while it exits (user stack USER_EXITING); 300 us woken
/// by the timer, no stack ever attached (the SKIPPED placeholders stay); 300 us woken by
/// cr-waker with SKIPPED waker stacks, its user half USER_EXEC; 20 us, all skipped (true).
fn stack_labels(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let lab = 1201;
    let waker = 1203;
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let u_read = b.u(1200, &["read", "lab_loop"]);
    let k_exit = b.k(&["try_to_wake_up", "do_notify_parent", "do_exit"]);
    let k_irq = irq_timer_stack(&mut b);
    b.comm(T0, lab, 1200, "cr-lab", CommReason::Seen);
    b.comm(T0, waker, 1202, "cr-waker", CommReason::Seen);
    let tasks = [
        (lab, 1200, "cr-lab", false),
        (waker, 1202, "cr-waker", false),
    ];
    let sk = StackId::SKIPPED;
    let half = |b: &mut B, ts: u64, k: StackId, u: StackId| {
        b.ev.push(Event::OffCpuStacks(OffCpuStacks {
            ts,
            tid: lab,
            kstack: k,
            ustack: u,
        }))
    };
    run(
        b,
        out,
        &tasks,
        iterations(p, 16),
        |b, _i, t| {
            b.sw(t + 100_000, 0, lab, S, 0, sk, sk);
            b.wk(
                t + 600_000,
                1,
                waker,
                lab,
                TASK,
                0,
                k_exit,
                StackId::USER_EXITING,
            );
            b.swin(t + 610_000, 0, lab);
            half(b, t + 610_000, k_read, NO);
            half(b, t + 620_000, NO, u_read);

            b.sw(t + 700_000, 0, lab, S, 0, sk, sk);
            b.wk(t + 1_000_000, 0, 0, lab, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 1_010_000, 0, lab);

            b.sw(t + 1_100_000, 0, lab, S, 0, sk, sk);
            b.wk(t + 1_400_000, 1, waker, lab, TASK, 0, sk, sk);
            b.swin(t + 1_410_000, 0, lab);
            half(b, t + 1_410_000, k_read, NO);
            half(b, t + 1_420_000, NO, StackId::USER_EXEC);

            b.sw(t + 1_500_000, 0, lab, S, 0, sk, sk);
            b.wk(t + 1_520_000, 0, 0, lab, HARD, SRC_TIMER, sk, NO);
            b.swin(t + 1_530_000, 0, lab);
        },
        2_000_000,
    )
}

/// lazy-stacks: 8 events per 1 ms iteration (+1 lost marker in iteration 2).
fn lazy_stacks(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let lazy = 1101;
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let u_read = b.u(1100, &["read", "lazy_loop"]);
    let k_irq = irq_timer_stack(&mut b);
    b.comm(T0, lazy, 1100, "cr-lazy", CommReason::Seen);
    let tasks = [(lazy, 1100, "cr-lazy", false)];
    let sk = StackId::SKIPPED;
    run(
        b,
        out,
        &tasks,
        iterations(p, 8),
        |b, i, t| {
            // Long wait (800 us): stacks attached lazily at switch-in / syscall exit.
            b.sw(t + 100_000, 0, lazy, S, 0, NO, NO);
            if i == 2 {
                b.ev.push(Event::Lost(Lost {
                    ts: t + 500_000,
                    cpu: 0,
                    count: 5,
                    cause: LostCause::RingBufferFull,
                }));
            }
            let wk = if i % 2 == 1 { StackId::FAILED } else { k_irq };
            b.wk(t + 900_000, 0, 0, lazy, HARD, SRC_TIMER, wk, NO);
            b.swin(t + 910_000, 0, lazy);
            b.ev.push(Event::OffCpuStacks(OffCpuStacks {
                ts: t + 910_000,
                tid: lazy,
                kstack: k_read,
                ustack: NO,
            }));
            b.ev.push(Event::OffCpuStacks(OffCpuStacks {
                ts: t + 920_000,
                tid: lazy,
                kstack: NO,
                ustack: u_read,
            }));
            // Short wait (10 us, below the 100 us threshold): every stack skipped.
            b.sw(t + 950_000, 0, lazy, S, 0, sk, sk);
            b.wk(t + 960_000, 0, 0, lazy, HARD, SRC_TIMER, sk, NO);
            b.swin(t + 970_000, 0, lazy);
        },
        1_000_000,
    )
}

/// Sampling period of `oncpu-worker` (1 kHz, so that a 5 ms computation gets 5 samples).
pub(super) const ONCPU_WORKER_PERIOD_NS: u64 = 1_000_000;

/// oncpu-worker: 17 events per 10 ms iteration. cr-client (CPU 0) wakes cr-worker and
/// blocks at +110 us; cr-worker (CPU 1, runnable 20 us behind idle) runs +120 us..+5.12 ms
/// and is sampled at +1, +2, +3, +4, +5 ms (user stacks `spin_compute` ×2, `parse` ×2,
/// `spin_compute` with a kernel page fault ×1), wakes the client and blocks; the client
/// runs +5.14 ms..+10.1 ms (samples `render` at +6..+9 ms). Idle samples (tid 0) at +3 ms
/// on CPU 0 and +7 ms on CPU 1. Sampling at 1 kHz (`cpu-clock`).
fn oncpu_worker(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (client, worker) = (1301, 1302);
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let k_write = b.k(&["try_to_wake_up", "pipe_write", "ksys_write"]);
    let u_client_read = b.u(1300, &["read", "client_loop"]);
    let u_client_write = b.u(1300, &["write", "client_loop"]);
    let u_worker_read = b.u(1300, &["read", "worker_loop"]);
    let u_worker_write = b.u(1300, &["write", "worker_loop"]);
    let u_spin = b.u(1300, &["spin_compute", "handle", "worker_loop"]);
    let u_parse = b.u(1300, &["parse", "handle", "worker_loop"]);
    let k_fault = b.k(&["clear_page", "handle_mm_fault", "exc_page_fault"]);
    let u_render = b.u(1300, &["render", "client_loop"]);
    let k_idle = b.k(&["default_idle", "do_idle", "cpu_startup_entry"]);
    b.comm(T0, client, 1300, "cr-client", CommReason::Seen);
    b.comm(T0, worker, 1300, "cr-worker", CommReason::Seen);
    b.swin(T0 + 10, 0, client);
    b.swin(T0 + 20, 1, worker);
    b.sw(T0 + 30, 1, worker, S, 0, k_read, u_worker_read);
    let tasks = [
        (client, 1300, "cr-client", false),
        (worker, 1300, "cr-worker", false),
    ];
    run(
        b,
        out,
        &tasks,
        iterations(p, 17),
        |b, _, t| {
            b.wk(
                t + 100_000,
                0,
                client,
                worker,
                TASK,
                0,
                k_write,
                u_client_write,
            );
            b.sw(t + 110_000, 0, client, S, 0, k_read, u_client_read);
            b.swin(t + 120_000, 1, worker);
            b.sample(t + 1_000_000, 1, worker, NO, u_spin);
            b.sample(t + 2_000_000, 1, worker, NO, u_spin);
            b.sample(t + 3_000_000, 1, worker, NO, u_parse);
            b.sample(t + 3_000_000, 0, 0, k_idle, NO);
            b.sample(t + 4_000_000, 1, worker, k_fault, u_spin);
            b.sample(t + 5_000_000, 1, worker, NO, u_parse);
            b.wk(
                t + 5_120_000,
                1,
                worker,
                client,
                TASK,
                0,
                k_write,
                u_worker_write,
            );
            b.sw(t + 5_130_000, 1, worker, S, 0, k_read, u_worker_read);
            b.swin(t + 5_140_000, 0, client);
            for ms in 6..10 {
                b.sample(t + ms * 1_000_000, 0, client, NO, u_render);
            }
            b.sample(t + 7_000_000, 1, 0, k_idle, NO);
        },
        10_000_000,
    )
}

/// Sampling period of `oncpu-sparse` (33 Hz: a 5 ms computation holds a sample one time in
/// three).
pub(super) const ONCPU_SPARSE_PERIOD_NS: u64 = 30_000_000;

/// oncpu-sparse: 6 events per 10 ms iteration, plus 4 samples every third iteration (8 on
/// average, rounded up: `--events 800` gives 100 iterations). As `oncpu-worker`, without
/// the dense samples: cr-client (CPU 0) wakes cr-worker at +100 us and blocks at +110 us;
/// cr-worker (CPU 1, runnable 20 us behind idle) computes +120 us..+5.12 ms, wakes the
/// client and blocks at +5.13 ms; the client runs +5.14 ms..+10.1 ms. Each CPU is sampled
/// every 30 ms (`cpu-clock`, period 30 ms): in iterations i = 0, 3, 6, … CPU 1 samples the
/// worker at +3 ms (user stack `spin_compute` when i / 3 is even, `parse` when odd) and is
/// idle at +8 ms; CPU 0 is idle at +3 ms and samples the client in `render` at +8 ms. The
/// worker's other two iterations of three hold no sample of it.
fn oncpu_sparse(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (client, worker) = (1401, 1402);
    let mut b = B::new();
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let k_write = b.k(&["try_to_wake_up", "pipe_write", "ksys_write"]);
    let u_client_read = b.u(1400, &["read", "client_loop"]);
    let u_client_write = b.u(1400, &["write", "client_loop"]);
    let u_worker_read = b.u(1400, &["read", "worker_loop"]);
    let u_worker_write = b.u(1400, &["write", "worker_loop"]);
    let u_spin = b.u(1400, &["spin_compute", "handle", "worker_loop"]);
    let u_parse = b.u(1400, &["parse", "handle", "worker_loop"]);
    let u_render = b.u(1400, &["render", "client_loop"]);
    let k_idle = b.k(&["default_idle", "do_idle", "cpu_startup_entry"]);
    b.comm(T0, client, 1400, "cr-client", CommReason::Seen);
    b.comm(T0, worker, 1400, "cr-worker", CommReason::Seen);
    b.swin(T0 + 10, 0, client);
    b.swin(T0 + 20, 1, worker);
    b.sw(T0 + 30, 1, worker, S, 0, k_read, u_worker_read);
    let tasks = [
        (client, 1400, "cr-client", false),
        (worker, 1400, "cr-worker", false),
    ];
    run(
        b,
        out,
        &tasks,
        iterations(p, 8),
        |b, i, t| {
            let sampled = i % 3 == 0;
            b.wk(
                t + 100_000,
                0,
                client,
                worker,
                TASK,
                0,
                k_write,
                u_client_write,
            );
            b.sw(t + 110_000, 0, client, S, 0, k_read, u_client_read);
            b.swin(t + 120_000, 1, worker);
            if sampled {
                let u = if (i / 3) % 2 == 0 { u_spin } else { u_parse };
                b.sample(t + 3_000_000, 0, 0, k_idle, NO);
                b.sample(t + 3_000_000, 1, worker, NO, u);
            }
            b.wk(
                t + 5_120_000,
                1,
                worker,
                client,
                TASK,
                0,
                k_write,
                u_worker_write,
            );
            b.sw(t + 5_130_000, 1, worker, S, 0, k_read, u_worker_read);
            b.swin(t + 5_140_000, 0, client);
            if sampled {
                b.sample(t + 8_000_000, 0, client, NO, u_render);
                b.sample(t + 8_000_000, 1, 0, k_idle, NO);
            }
        },
        10_000_000,
    )
}

/// Container id of cr-web's docker group in the containers scenario.
pub const CONTAINERS_WEB_ID: &str =
    "4fa6e0f0c6786287e131c3852c58a2e01cc697a68231826813597e4994f1d6e2";
/// Container id of cr-db's containerd group in the containers scenario.
pub const CONTAINERS_DB_ID: &str =
    "9b1f3c0d2e4a5b6c7d8e9f00112233445566778899aabbccddeeff0011223344";
/// Pod UID of cr-db in the containers scenario.
pub const CONTAINERS_DB_POD: &str = "8dd3a1e9-2f9a-4d3b-9a36-2f4c4f1b7c11";

/// containers: pipe-relay's schedule (9 events per 10 ms iteration) with cgroups: cr-web
/// (tid 1101) in a docker container, cr-db (1201) in a Kubernetes pod's container, cr-cron
/// (1301) in `/system.slice/cron.service` until it moves to `/user.slice` at the start of
/// iteration n/2 (the switch-out that noticed it: t + 5 030 000 of the iteration before).
fn containers(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let (cron, db, web) = (1301, 1201, 1101);
    let mut b = B::new();
    let k_sleep = b.k(&["schedule", "do_nanosleep", "__x64_sys_clock_nanosleep"]);
    let u_cron_sleep = b.u(1300, &["clock_nanosleep", "cron_loop"]);
    let k_read = b.k(&["schedule", "pipe_read", "ksys_read"]);
    let u_web_read = b.u(1100, &["read", "web_loop"]);
    let u_db_read = b.u(1200, &["read", "db_loop"]);
    let k_write = b.k(&["try_to_wake_up", "pipe_write", "ksys_write"]);
    let u_cron_write = b.u(1300, &["write", "cron_loop"]);
    let u_db_write = b.u(1200, &["write", "db_loop"]);
    let k_irq = irq_timer_stack(&mut b);
    for (t, g, n) in [
        (cron, 1300, "cr-cron"),
        (db, 1200, "cr-db"),
        (web, 1100, "cr-web"),
    ] {
        b.comm(T0, t, g, n, CommReason::Seen);
    }
    b.sw(T0 + 100, 0, cron, S, 0, k_sleep, u_cron_sleep);
    b.sw(T0 + 200, 1, db, S, 0, k_read, u_db_read);
    b.sw(T0 + 300, 2, web, S, 0, k_read, u_web_read);
    let tasks = [
        (cron, 1300, "cr-cron", false),
        (db, 1200, "cr-db", false),
        (web, 1100, "cr-web", false),
    ];
    let n = iterations(p, 9);
    let (cg_web, cg_db, cg_cron, cg_user) = (4101, 4201, 4301, 4302);
    let pod = CONTAINERS_DB_POD.replace('-', "_");
    let cgroups = [
        CgroupEntry {
            id: cg_web,
            path: format!("/system.slice/docker-{CONTAINERS_WEB_ID}.scope"),
        },
        CgroupEntry {
            id: cg_db,
            path: format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod}.slice/cri-containerd-{CONTAINERS_DB_ID}.scope"
            ),
        },
        CgroupEntry {
            id: cg_cron,
            path: "/system.slice/cron.service".into(),
        },
        CgroupEntry {
            id: cg_user,
            path: "/user.slice".into(),
        },
    ];
    let moved = T0 + (n / 2).saturating_sub(1) * 10_000_000 + 5_030_000;
    let members = [
        TaskCgroup {
            ts: T0,
            tid: web,
            cgroup: cg_web,
        },
        TaskCgroup {
            ts: T0,
            tid: db,
            cgroup: cg_db,
        },
        TaskCgroup {
            ts: T0,
            tid: cron,
            cgroup: cg_cron,
        },
        TaskCgroup {
            ts: moved.max(T0 + 100),
            tid: cron,
            cgroup: cg_user,
        },
    ];
    out.add_cgroups(&cgroups, &members)?;
    run(
        b,
        out,
        &tasks,
        n,
        |b, _, t| {
            b.wk(t + 5_000_000, 0, 0, cron, HARD, SRC_TIMER, k_irq, NO);
            b.swin(t + 5_010_000, 0, cron);
            b.wk(t + 5_020_000, 0, cron, db, TASK, 0, k_write, u_cron_write);
            b.sw(t + 5_030_000, 0, cron, S, 0, k_sleep, u_cron_sleep);
            b.swin(t + 5_040_000, 1, db);
            b.wk(t + 5_050_000, 1, db, web, TASK, 0, k_write, u_db_write);
            b.sw(t + 5_060_000, 1, db, S, 0, k_read, u_db_read);
            b.swin(t + 5_070_000, 2, web);
            b.sw(t + 5_080_000, 2, web, S, 0, k_read, u_web_read);
        },
        10_000_000,
    )
}

//! `busy-server`: a streamed, deterministic simulation of a busy multi-tier server, for
//! benchmarks (trace size, decode speed, chain engine throughput). Owned by the format work.
//!
//! # Model
//!
//! A discrete-event simulation of 8 CPUs and ~1800 threads in ~45 processes plus 24
//! per-CPU kernel threads, producing ~1 M events per second of trace time. Memory is
//! bounded (threads, per-CPU run queues, one pending action per thread, capped request
//! queues, the stack/symbol maps), so it scales to any event count; it stops after
//! exactly `SynthParams::events` events (the tail may end mid-wait, like any trace).
//!
//! * **Request path.** Packets arrive (Poisson) on a random CPU; the `NET_RX` softirq
//!   wakes an idle worker of one of 6 web processes (blocked in `epoll_wait`). Most web
//!   requests call one of 8 app pools (futex-based worker pools, 96 threads each, most of
//!   them idle): the web worker blocks until the app thread replies. An app request calls
//!   a database pool (4 processes, 64 threads, blocked in `recvfrom`) zero to two times;
//!   a database request does disk I/O a quarter of the time: the thread blocks in `D`
//!   and a per-queue disk hardirq (`nvme0q<N>`) wakes it 50–400 µs later. Replies wake
//!   the caller from task context, so chains like web ← app ← db ← `[hardirq: nvme0q3]`
//!   and web ← `[softirq: NET_RX]` occur throughout. A request finding no idle worker is
//!   queued (capped) and taken by the next worker that finishes, without blocking.
//! * **Timers.** 24 daemons (25 threads each, periods 1 ms – 1 s) and per-CPU kernel
//!   workers sleep and are woken by the `timer` hardirq on the CPU they slept on; some
//!   daemon wakes a sibling thread (task-context futex wake) or writes to disk.
//! * **Preemption.** 6 CPU-bound threads (ms-long bursts) run with a 4 ms slice: a wakeup
//!   landing on their CPU after they ran 1 ms, or a slice expiring with a non-empty run
//!   queue, preempts them (`prev_state` 0); they resume later from the run queue.
//! * **Processes come and go.** A shell forks a child every ~5 ms (`Comm(Fork)`,
//!   `WakeupNew`), the child execs (`Comm(Exec)`), may read the disk, then exits (`Exit`,
//!   final switch-out with `prev_state` 0x10, EXIT_DEAD); daemons occasionally rename a
//!   thread (`Comm(Rename)`). Every task gets a `Comm(Seen)` at the start.
//! * **Scheduler.** A woken task goes to its last CPU if idle, else to an idle CPU, else
//!   to the CPU with the shortest run queue; an idle CPU switches to it 1–4 µs later.
//!   A CPU whose task blocks runs the head of its run queue, or steals from the longest
//!   other run queue, or goes idle (tid 0).
//! * **Lazy stacks (threshold 100 µs).** Switch-outs carry `SKIPPED` (a lazy recorder does
//!   not know yet how long the wait will be; kernel threads and idle carry `NONE` for the
//!   user side). When a task that blocked for more than 100 µs is switched in, an
//!   `OffCpuStacks` with its real kernel stack follows at the same timestamp, and one
//!   with its user stack ~0.5 µs later (its syscall exit) unless it was switched out
//!   before that. Wakings carry real waker stacks only when the target had been blocked
//!   longer than 100 µs (irq wakings have no user stack), else `SKIPPED`. Stacks are
//!   generated on first use (a few thousand distinct kernel + user stacks) and added to
//!   the tables, with symbols, before the first event that references them.
//!
//! # Consistency (the chain engine relies on it)
//!
//! Per CPU, each switch's `prev_tid` is the previous `next_tid` on that CPU (CPUs start
//! idle); a task is running on at most one CPU; a task switched out in `S`/`D` is
//! switched in again only after a `Waking` targeting it (new tasks after their
//! `WakeupNew`); a task-context waking's `waker_tid` is the task running on that CPU at
//! that time; irq wakings use `SoftIrq`/`HardIrq` with a registered source and the
//! interrupted task (possibly idle, 0) as `waker_tid`. Wakings only target blocked tasks.

use super::scenario::{Scenario, SynthParams};
use crate::*;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

pub(super) fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "busy-server",
        about: "8-CPU multi-tier server (~1800 threads, ~1 M events/s): NET_RX -> web -> app -> db -> disk irq chains, timers, preemption, fork/exit; lazy stacks; streamed, scales to 100 M+ events",
        generate,
    }]
}

/// Number of CPUs simulated.
pub const CPUS: u32 = 8;
/// First timestamp (1 s on the synthetic clock).
pub const T0: u64 = 1_000_000_000;
/// Lazy stack threshold used by the scenario (waits longer than this get stacks).
pub const STACK_THRESHOLD_NS: u64 = 100_000;

const SRC_TIMER: u32 = 1;
const SRC_NET_RX: u32 = 2;
const SRC_DISK0: u32 = 3; // nvme0q0 .. nvme0q7 = 3 .. 10

const STATE_EXIT_DEAD: u32 = 0x10;
const SLICE_NS: u64 = 4_000_000;
const PREEMPT_AFTER_NS: u64 = 1_000_000;
const MAX_PENDING: usize = 512;
/// Distinct request handlers (call sites) per process: user stacks per process.
const SITES: u16 = 40;
/// Mean packet inter-arrival time (ns).
const NET_MEAN_NS: f64 = 16_000.0;

fn generate(p: &SynthParams, out: &mut dyn TraceSink) -> Result<()> {
    let mut sim = Sim::new(p.seed, p.events);
    sim.run(out)
}

// ---------------------------------------------------------------------------------------
// Randomness (SplitMix64; deterministic for a seed).

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n.max(1) as u128) >> 64) as u64
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
    /// Exponential with the given mean, at least `min`.
    fn exp(&mut self, mean: f64, min: u64) -> u64 {
        let u = self.unit().max(1e-12);
        ((-u.ln() * mean) as u64).max(min)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

// ---------------------------------------------------------------------------------------
// Simulation state.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Web,
    App,
    Db,
    Daemon,
    Hog,
    Kworker,
    Shell,
    Child,
}

/// Why a task is blocked: selects its off-CPU kernel stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum WaitKind {
    Epoll,
    FutexWork,
    SockRecv,
    UpstreamRecv,
    Disk,
    Nanosleep,
    FutexTimed,
    KthreadIdle,
}

/// How a waker woke: selects its waker kernel stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum WakeHow {
    FutexWake,
    SockSend,
    PipeWrite,
    NetRx,
    DiskIrq,
    Timer,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Run(u64),
    Call(u16),
    Disk(u64),
    Reply,
    Finish,
    Sleep(u64),
    WakePeer,
    Spawn,
    Exec,
    Rename,
    Exit,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Running(u32),
    Queued,
    Blocked,
    Dead,
}

#[derive(Clone, Copy, Debug)]
struct Req {
    caller: u32,
    site: u16,
}

struct Th {
    tid: u32,
    tgid: u32,
    comm: Comm,
    kernel: bool,
    role: Role,
    pool: Option<u16>,
    st: St,
    /// Bumped on every switch-out: invalidates pending BurstEnd / UStack actions.
    gen: u32,
    /// Bumped on every block: invalidates pending Timer / Disk wakes.
    wait_id: u32,
    blocked_since: u64,
    wait: WaitKind,
    site: u16,
    /// Remaining burst when preempted (0: none).
    remaining: u64,
    burst_end: u64,
    run_start: u64,
    woken: bool,
    pending_wake: bool,
    steps: VecDeque<Step>,
    req: Option<Req>,
    last_cpu: u32,
    period: u64,
    /// Parent to wake on exit (children).
    parent: u32,
}

struct Pool {
    tgid: u32,
    role: Role,
    idle: VecDeque<u32>,
    pending: VecDeque<Req>,
    /// Pools this one calls (app for web, db for app).
    callees: Vec<u16>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Act {
    BurstEnd { tid: u32, gen: u32 },
    Resched { cpu: u32 },
    Slice { cpu: u32, tid: u32, gen: u32 },
    Timer { tid: u32, wait_id: u32 },
    Disk { tid: u32, wait_id: u32, cpu: u32 },
    Net,
    UStack { tid: u32, gen: u32 },
}

struct Cpu {
    cur: u32,
    rq: VecDeque<u32>,
    resched: bool,
}

struct Sim {
    rng: Rng,
    now: u64,
    target: u64,
    emitted: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, Act)>>,
    cpus: Vec<Cpu>,
    threads: Vec<Th>,
    free: Vec<usize>,
    ix: HashMap<u32, usize>,
    pools: Vec<Pool>,
    web_pools: Vec<u16>,
    next_tid: u32,
    stacks: Stacks,
    /// Processes with daemons (for WakePeer): tgid -> member tids.
    members: HashMap<u32, Vec<u32>>,
    child_names: Vec<&'static str>,
}

/// The interrupt sources: the timer, network receive, one disk queue per CPU.
fn add_irq_sources(out: &mut dyn TraceSink) -> Result<()> {
    let mut irqs = vec![
        IrqSource {
            id: SRC_TIMER,
            name: "timer".into(),
        },
        IrqSource {
            id: SRC_NET_RX,
            name: "NET_RX".into(),
        },
    ];
    for q in 0..CPUS {
        irqs.push(IrqSource {
            id: SRC_DISK0 + q,
            name: format!("nvme0q{q}"),
        });
    }
    out.add_irq_sources(&irqs)
}

impl Sim {
    fn new(seed: u64, events: u64) -> Sim {
        Sim {
            rng: Rng(seed ^ 0xB05E_5E11),
            now: T0,
            target: events,
            emitted: 0,
            seq: 0,
            heap: BinaryHeap::new(),
            cpus: (0..CPUS)
                .map(|_| Cpu {
                    cur: 0,
                    rq: VecDeque::new(),
                    resched: false,
                })
                .collect(),
            threads: Vec::new(),
            free: Vec::new(),
            ix: HashMap::new(),
            pools: Vec::new(),
            web_pools: Vec::new(),
            next_tid: 1000,
            stacks: Stacks::default(),
            members: HashMap::new(),
            child_names: vec![
                "sh",
                "date",
                "curl",
                "logrotate",
                "gzip",
                "find",
                "awk",
                "sed",
            ],
        }
    }

    fn at(&mut self, t: u64, a: Act) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, a)));
    }

    fn th(&mut self, tid: u32) -> &mut Th {
        let i = self.ix[&tid];
        &mut self.threads[i]
    }
    fn get(&self, tid: u32) -> Option<&Th> {
        self.ix.get(&tid).map(|&i| &self.threads[i])
    }

    fn emit(&mut self, out: &mut dyn TraceSink, e: Event) -> Result<()> {
        if self.emitted >= self.target {
            return Ok(());
        }
        self.emitted += 1;
        out.push(&e)
    }

    #[allow(clippy::too_many_arguments)]
    fn new_thread(
        &mut self,
        tgid: Option<u32>,
        comm: &str,
        kernel: bool,
        role: Role,
        pool: Option<u16>,
        period: u64,
    ) -> u32 {
        let tid = self.next_tid;
        self.next_tid += 1;
        let tgid = tgid.unwrap_or(tid);
        let th = Th {
            tid,
            tgid,
            comm: Comm::new(comm),
            kernel,
            role,
            pool,
            st: St::Blocked,
            gen: 0,
            wait_id: 0,
            blocked_since: 0,
            wait: WaitKind::Nanosleep,
            site: 0,
            remaining: 0,
            burst_end: 0,
            run_start: 0,
            woken: false,
            pending_wake: false,
            steps: VecDeque::new(),
            req: None,
            last_cpu: 0,
            period,
            parent: 0,
        };
        let i = match self.free.pop() {
            Some(i) => {
                self.threads[i] = th;
                i
            }
            None => {
                self.threads.push(th);
                self.threads.len() - 1
            }
        };
        self.ix.insert(tid, i);
        tid
    }

    fn task_entry(&self, tid: u32) -> TaskEntry {
        let t = self.get(tid).expect("task");
        TaskEntry {
            tid,
            tgid: t.tgid,
            comm: t.comm,
            kernel_thread: t.kernel,
        }
    }

    /// Build the process population, register tables, emit first sightings and arm the
    /// initial actions. (The order of the calls is the order of the random draws: the
    /// trace of a seed must not change.)
    fn setup(&mut self, out: &mut dyn TraceSink) -> Result<()> {
        add_irq_sources(out)?;
        self.spawn_kernel_threads();
        self.next_tid = 1000;
        self.spawn_service_pools();
        self.spawn_daemons();
        for name in ["ffmpeg", "cc1plus"] {
            let mut tgid = None;
            for _ in 0..3 {
                let tid = self.new_thread(tgid, name, false, Role::Hog, None, 10_000_000);
                tgid.get_or_insert(tid);
            }
        }
        self.new_thread(None, "bash", false, Role::Shell, None, 5_000_000);
        let tids = self.first_sightings(out)?;
        for &tid in &tids {
            self.start_blocked(tid);
        }
        let first = T0 + self.rng.exp(NET_MEAN_NS, 1);
        self.at(first, Act::Net);
        Ok(())
    }

    /// Kernel threads: small tids, their own tgid, three per CPU.
    fn spawn_kernel_threads(&mut self) {
        self.next_tid = 10;
        for cpu in 0..CPUS {
            for (name, period) in [
                (format!("kworker/{cpu}:0"), 4_000_000u64),
                (format!("kworker/{cpu}:1H"), 10_000_000),
                (format!("ksoftirqd/{cpu}"), 50_000_000),
            ] {
                let tid = self.new_thread(None, &name, true, Role::Kworker, None, period);
                self.th(tid).last_cpu = cpu;
            }
        }
    }

    /// The request path's worker pools: databases, the apps that call them, and the web
    /// front ends that call the apps.
    fn spawn_service_pools(&mut self) {
        let app_names = [
            "java", "java", "python3", "node", "gunicorn", "java", "dotnet", "ruby",
        ];
        let app_thread = [
            "http-nio-8080-e",
            "http-nio-8080-e",
            "uwsgi-worker",
            "node-worker",
            "gunicorn-wrk",
            "pool-1-thread",
            "ThreadPoolWork",
            "puma-srv",
        ];
        let db_names = [
            ("postgres", "postgres"),
            ("mysqld", "connection"),
            ("redis-server", "io_thd"),
            ("postgres", "postgres"),
        ];
        let web_names = ["nginx", "nginx", "envoy", "haproxy", "nginx", "caddy"];
        let mut db_pools = Vec::new();
        for (i, (p, t)) in db_names.iter().enumerate() {
            let pid = self.pools.len() as u16;
            let tgid = self.spawn_pool(p, t, 64, Role::Db, pid, i as u32);
            self.pools.push(Pool {
                tgid,
                role: Role::Db,
                idle: VecDeque::new(),
                pending: VecDeque::new(),
                callees: vec![],
            });
            db_pools.push(pid);
        }
        let mut app_pools = Vec::new();
        for i in 0..8 {
            let pid = self.pools.len() as u16;
            let tgid = self.spawn_pool(app_names[i], app_thread[i], 96, Role::App, pid, i as u32);
            let callees = vec![db_pools[i % 4], db_pools[(i + 1) % 4]];
            self.pools.push(Pool {
                tgid,
                role: Role::App,
                idle: VecDeque::new(),
                pending: VecDeque::new(),
                callees,
            });
            app_pools.push(pid);
        }
        for (i, name) in web_names.iter().enumerate() {
            let pid = self.pools.len() as u16;
            let tgid = self.spawn_pool(name, name, 24, Role::Web, pid, i as u32);
            let callees = vec![app_pools[i], app_pools[(i + 3) % 8], app_pools[(i + 6) % 8]];
            self.pools.push(Pool {
                tgid,
                role: Role::Web,
                idle: VecDeque::new(),
                pending: VecDeque::new(),
                callees,
            });
            self.web_pools.push(pid);
        }
    }

    /// Housekeeping daemons, 25 threads each: mostly idle, a few tick fast.
    fn spawn_daemons(&mut self) {
        let daemons = [
            "systemd-journal",
            "containerd",
            "kubelet",
            "prometheus",
            "node_exporter",
            "chronyd",
            "sshd",
            "rsyslogd",
            "dockerd",
            "fluent-bit",
            "consul",
            "vault",
            "etcd",
            "telegraf",
            "crond",
            "polkitd",
            "dbus-daemon",
            "NetworkManager",
            "snapd",
            "irqbalance",
            "udisksd",
            "multipathd",
            "auditd",
            "tuned",
        ];
        // Mostly idle housekeeping threads; a few tick fast.
        let periods = [
            2_000_000u64,
            10_000_000,
            50_000_000,
            100_000_000,
            250_000_000,
            500_000_000,
            1_000_000_000,
            2_000_000_000,
            5_000_000_000,
        ];
        for (d, name) in daemons.iter().enumerate() {
            let mut tgid = None;
            let mut tids = Vec::new();
            for k in 0..25 {
                let period = periods[self.rng.below(periods.len() as u64) as usize]
                    * (1 + (d as u64 % 3))
                    / 2
                    + 1_000_000;
                let tname = if k == 0 {
                    name.to_string()
                } else {
                    format!("{}-{k}", &name[..name.len().min(10)])
                };
                let tid = self.new_thread(tgid, &tname, false, Role::Daemon, None, period);
                tgid.get_or_insert(tid);
                tids.push(tid);
            }
            self.members.insert(tgid.unwrap_or(0), tids);
        }
    }

    /// Register the tasks and emit a first sighting of each; their tids, in order.
    fn first_sightings(&mut self, out: &mut dyn TraceSink) -> Result<Vec<u32>> {
        let mut tasks = Vec::with_capacity(self.threads.len());
        let tids: Vec<u32> = self.threads.iter().map(|t| t.tid).collect();
        for &tid in &tids {
            tasks.push(self.task_entry(tid));
        }
        out.add_tasks(&tasks)?;
        for &tid in &tids {
            let t = self.get(tid).expect("task");
            let e = Event::Comm(TaskComm {
                ts: T0,
                tid,
                tgid: t.tgid,
                comm: t.comm,
                reason: CommReason::Seen,
            });
            self.emit(out, e)?;
        }
        Ok(tids)
    }

    /// Thread `tid` starts blocked (since before the trace) in its natural wait: a pool
    /// worker idle in its pool, anything else on its first timer.
    fn start_blocked(&mut self, tid: u32) {
        let since = T0 - self.rng.range(1_000, 2_000_000_000).min(T0 - 1);
        let cpu = self.rng.below(CPUS as u64) as u32;
        let t = self.th(tid);
        t.blocked_since = since;
        if t.role != Role::Kworker {
            t.last_cpu = cpu;
        }
        match t.role {
            Role::Web | Role::App | Role::Db => {
                let pool = t.pool.unwrap_or(0) as usize;
                t.wait = match t.role {
                    Role::Web => WaitKind::Epoll,
                    Role::App => WaitKind::FutexWork,
                    _ => WaitKind::SockRecv,
                };
                self.pools[pool].idle.push_back(tid);
            }
            _ => {
                let period = t.period;
                t.wait = if t.role == Role::Kworker {
                    WaitKind::KthreadIdle
                } else {
                    WaitKind::Nanosleep
                };
                let wid = t.wait_id;
                let first = T0 + self.rng.below(period);
                self.at(first, Act::Timer { tid, wait_id: wid });
            }
        }
    }

    fn spawn_pool(
        &mut self,
        pname: &str,
        tname: &str,
        n: usize,
        role: Role,
        pool: u16,
        _i: u32,
    ) -> u32 {
        let first = self.new_thread(None, pname, false, role, Some(pool), 0);
        for k in 1..n {
            let name = if tname == pname {
                pname.to_string()
            } else {
                format!("{}-{k}", &tname[..tname.len().min(11)])
            };
            self.new_thread(Some(first), &name, false, role, Some(pool), 0);
        }
        first
    }

    fn run(&mut self, out: &mut dyn TraceSink) -> Result<()> {
        self.setup(out)?;
        while self.emitted < self.target {
            let Some(Reverse((t, _, act))) = self.heap.pop() else {
                break;
            };
            self.now = t;
            self.act(out, act)?;
        }
        Ok(())
    }

    fn act(&mut self, out: &mut dyn TraceSink, act: Act) -> Result<()> {
        match act {
            Act::BurstEnd { tid, gen } => {
                let ok = self
                    .get(tid)
                    .is_some_and(|t| t.gen == gen && matches!(t.st, St::Running(_)));
                if ok {
                    self.th(tid).remaining = 0;
                    self.advance(out, tid)?;
                }
            }
            Act::Resched { cpu } => {
                self.cpus[cpu as usize].resched = false;
                let cur = self.cpus[cpu as usize].cur;
                if cur == 0 {
                    if let Some(next) = self.cpus[cpu as usize].rq.pop_front() {
                        self.switch(out, cpu, STATE_RUNNABLE, next)?;
                    }
                } else if !self.cpus[cpu as usize].rq.is_empty()
                    && self.now - self.get(cur).map_or(0, |t| t.run_start) >= PREEMPT_AFTER_NS
                {
                    self.preempt(out, cpu)?;
                }
            }
            Act::Slice { cpu, tid, gen } => {
                let c = &self.cpus[cpu as usize];
                if c.cur == tid && !c.rq.is_empty() && self.get(tid).is_some_and(|t| t.gen == gen) {
                    self.preempt(out, cpu)?;
                }
            }
            Act::Timer { tid, wait_id } => {
                if self
                    .get(tid)
                    .is_some_and(|t| t.st == St::Blocked && t.wait_id == wait_id)
                {
                    let cpu = self.get(tid).map_or(0, |t| t.last_cpu);
                    self.wake(
                        out,
                        tid,
                        cpu,
                        WakeContext::HardIrq,
                        SRC_TIMER,
                        WakeHow::Timer,
                    )?;
                }
            }
            Act::Disk { tid, wait_id, cpu } => {
                if self
                    .get(tid)
                    .is_some_and(|t| t.st == St::Blocked && t.wait_id == wait_id)
                {
                    self.wake(
                        out,
                        tid,
                        cpu,
                        WakeContext::HardIrq,
                        SRC_DISK0 + cpu,
                        WakeHow::DiskIrq,
                    )?;
                }
            }
            Act::Net => {
                let next = self.now + self.rng.exp(NET_MEAN_NS, 200);
                self.at(next, Act::Net);
                let w = self.web_pools[self.rng.below(self.web_pools.len() as u64) as usize];
                let cpu = self.rng.below(CPUS as u64) as u32;
                let site = self.rng.below(SITES as u64) as u16;
                let req = Req { caller: 0, site };
                self.deliver(out, w, req, Some(cpu))?;
            }
            Act::UStack { tid, gen } => {
                let ok = self
                    .get(tid)
                    .is_some_and(|t| t.gen == gen && matches!(t.st, St::Running(_)));
                if ok {
                    let t = self.get(tid).expect("task");
                    let (tgid, wait, site) = (t.tgid, t.wait, t.site);
                    let u = self.stacks.user_wait(out, tgid, wait, site)?;
                    self.emit(
                        out,
                        Event::OffCpuStacks(OffCpuStacks {
                            ts: self.now,
                            tid,
                            kstack: StackId::NONE,
                            ustack: u,
                        }),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Send a request to a pool: hand it to an idle worker (waking it) or queue it.
    /// `irq_cpu` Some: delivered by the NET_RX softirq on that cpu; None: by the running
    /// caller (task context).
    fn deliver(
        &mut self,
        out: &mut dyn TraceSink,
        pool: u16,
        req: Req,
        irq_cpu: Option<u32>,
    ) -> Result<()> {
        let p = &mut self.pools[pool as usize];
        // Most recently idle worker first (epoll exclusive wakeups and most pools are
        // LIFO): hot workers wait briefly, cold ones for long.
        if let Some(w) = p.idle.pop_back() {
            {
                let t = self.th(w);
                t.req = Some(req);
                t.site = req.site;
            }
            self.plan_request(w);
            match irq_cpu {
                Some(cpu) => self.wake(
                    out,
                    w,
                    cpu,
                    WakeContext::SoftIrq,
                    SRC_NET_RX,
                    WakeHow::NetRx,
                )?,
                None => {
                    let cpu = self.get(req.caller).map_or(0, |t| t.last_cpu);
                    let how = match p_role(&self.pools[pool as usize]) {
                        Role::App => WakeHow::FutexWake,
                        _ => WakeHow::SockSend,
                    };
                    self.wake(out, w, cpu, WakeContext::Task, 0, how)?;
                }
            }
        } else if p.pending.len() < MAX_PENDING {
            p.pending.push_back(req);
        } else if req.caller != 0 {
            // Overloaded: answer the caller right away ("503").
            let cpu = self.get(req.caller).map_or(0, |t| t.last_cpu);
            self.pending_or_wake(out, req.caller, cpu, WakeHow::SockSend)?;
        }
        Ok(())
    }

    /// Steps of a request just handed to worker `tid`.
    fn plan_request(&mut self, tid: u32) {
        let role = self.get(tid).map_or(Role::Web, |t| t.role);
        let pool = self.get(tid).and_then(|t| t.pool).unwrap_or(0);
        let callees = self.pools[pool as usize].callees.clone();
        let r = &mut self.rng;
        let mut s = VecDeque::new();
        match role {
            Role::Web => {
                s.push_back(Step::Run(r.exp(7_000.0, 1_000)));
                if r.chance(0.7) && !callees.is_empty() {
                    s.push_back(Step::Call(callees[r.below(callees.len() as u64) as usize]));
                    s.push_back(Step::Run(r.exp(5_000.0, 1_000)));
                }
            }
            Role::App => {
                s.push_back(Step::Run(r.exp(9_000.0, 1_000)));
                // 0-3 short database round trips.
                let calls = if r.chance(0.3) { 0 } else { 1 + r.below(3) };
                for _ in 0..calls {
                    if !callees.is_empty() {
                        s.push_back(Step::Call(callees[r.below(callees.len() as u64) as usize]));
                        s.push_back(Step::Run(r.exp(6_000.0, 1_000)));
                    }
                }
                s.push_back(Step::Reply);
            }
            Role::Db => {
                s.push_back(Step::Run(r.exp(5_000.0, 1_000)));
                if r.chance(0.12) {
                    s.push_back(Step::Disk(r.range(50_000, 400_000)));
                    s.push_back(Step::Run(r.exp(4_000.0, 1_000)));
                }
                s.push_back(Step::Reply);
            }
            _ => {}
        }
        s.push_back(Step::Finish);
        self.th(tid).steps = s;
    }

    /// Steps of a periodic thread after a timer wake.
    fn plan_periodic(&mut self, tid: u32) {
        let (role, period) = self
            .get(tid)
            .map_or((Role::Daemon, 1), |t| (t.role, t.period));
        let r = &mut self.rng;
        let mut s = VecDeque::new();
        let jitter = |r: &mut Rng, p: u64| p - p / 10 + r.below(p / 5 + 1);
        match role {
            Role::Daemon => {
                s.push_back(Step::Run(r.exp(25_000.0, 2_000)));
                if r.chance(0.15) {
                    s.push_back(Step::WakePeer);
                    s.push_back(Step::Run(r.exp(5_000.0, 1_000)));
                }
                if r.chance(0.05) {
                    s.push_back(Step::Disk(r.range(60_000, 600_000)));
                    s.push_back(Step::Run(r.exp(5_000.0, 1_000)));
                }
                if r.chance(0.002) {
                    s.push_back(Step::Rename);
                    s.push_back(Step::Run(2_000));
                }
                s.push_back(Step::Sleep(jitter(r, period)));
            }
            Role::Kworker => {
                s.push_back(Step::Run(r.exp(4_000.0, 1_000)));
                s.push_back(Step::Sleep(jitter(r, period)));
            }
            Role::Hog => {
                s.push_back(Step::Run(r.exp(6_000_000.0, 100_000)));
                s.push_back(Step::Sleep(r.exp(period as f64, 50_000)));
            }
            Role::Shell => {
                s.push_back(Step::Run(r.exp(30_000.0, 5_000)));
                s.push_back(Step::Spawn);
                s.push_back(Step::Run(r.exp(10_000.0, 2_000)));
                s.push_back(Step::Sleep(r.exp(period as f64, 100_000)));
            }
            Role::Child => {
                s.push_back(Step::Run(r.exp(40_000.0, 5_000)));
                s.push_back(Step::Exec);
                s.push_back(Step::Run(r.exp(100_000.0, 5_000)));
                if r.chance(0.5) {
                    s.push_back(Step::Disk(r.range(80_000, 500_000)));
                    s.push_back(Step::Run(r.exp(20_000.0, 2_000)));
                }
                s.push_back(Step::Exit);
            }
            _ => s.push_back(Step::Finish),
        }
        self.th(tid).steps = s;
    }

    /// Execute the running task's steps until it runs a burst, blocks or exits.
    fn advance(&mut self, out: &mut dyn TraceSink, tid: u32) -> Result<()> {
        loop {
            let step = match self.th(tid).steps.pop_front() {
                Some(s) => s,
                None => {
                    self.plan_periodic(tid);
                    continue;
                }
            };
            let St::Running(cpu) = self.get(tid).map_or(St::Dead, |t| t.st) else {
                return Ok(());
            };
            // Whether the task stopped running its steps (a burst, a block or its exit).
            let stopped = match step {
                Step::Run(d) => {
                    self.start_burst(tid, d);
                    true
                }
                Step::Call(pool) => self.step_call(out, tid, cpu, pool)?,
                Step::Disk(d) => {
                    self.step_disk(out, tid, cpu, d)?;
                    true
                }
                Step::Reply => {
                    self.step_reply(out, tid, cpu)?;
                    false
                }
                Step::Finish => self.step_finish(out, tid, cpu)?,
                Step::Sleep(d) => self.step_sleep(out, tid, cpu, d)?,
                Step::WakePeer => {
                    self.step_wake_peer(out, tid, cpu)?;
                    false
                }
                Step::Rename => {
                    self.step_rename(out, tid)?;
                    false
                }
                Step::Spawn => {
                    self.step_spawn(out, tid, cpu)?;
                    false
                }
                Step::Exec => {
                    self.step_exec(out, tid)?;
                    false
                }
                Step::Exit => {
                    self.step_exit(out, tid, cpu)?;
                    true
                }
            };
            if stopped {
                return Ok(());
            }
        }
    }

    /// Send a request to `pool` and wait for the answer; true when it blocked (no
    /// pending answer).
    fn step_call(
        &mut self,
        out: &mut dyn TraceSink,
        tid: u32,
        cpu: u32,
        pool: u16,
    ) -> Result<bool> {
        let site = self.get(tid).map_or(0, |t| t.site);
        self.deliver(out, pool, Req { caller: tid, site }, None)?;
        let kind = if self.get(tid).map(|t| t.role) == Some(Role::Web) {
            WaitKind::UpstreamRecv
        } else {
            WaitKind::SockRecv
        };
        self.block(out, tid, cpu, kind, STATE_INTERRUPTIBLE, true)
    }

    /// Block on a disk read of `d` ns; its interrupt is armed.
    fn step_disk(&mut self, out: &mut dyn TraceSink, tid: u32, cpu: u32, d: u64) -> Result<()> {
        self.block(out, tid, cpu, WaitKind::Disk, STATE_UNINTERRUPTIBLE, false)?;
        let wid = self.get(tid).map_or(0, |t| t.wait_id);
        self.at(
            self.now + d,
            Act::Disk {
                tid,
                wait_id: wid,
                cpu,
            },
        );
        Ok(())
    }

    /// Answer the request being served: wake its caller (or leave it a pending wake).
    fn step_reply(&mut self, out: &mut dyn TraceSink, tid: u32, cpu: u32) -> Result<()> {
        if let Some(req) = self.th(tid).req.take() {
            if req.caller != 0 {
                let how = if self.get(req.caller).map(|t| t.role) == Some(Role::Web) {
                    WakeHow::SockSend
                } else {
                    WakeHow::PipeWrite
                };
                self.pending_or_wake(out, req.caller, cpu, how)?;
            }
        }
        Ok(())
    }

    /// A request is done: take queued work without blocking, else wait for work (true:
    /// blocked).
    fn step_finish(&mut self, out: &mut dyn TraceSink, tid: u32, cpu: u32) -> Result<bool> {
        let pool = self.get(tid).and_then(|t| t.pool);
        let Some(pool) = pool else {
            self.plan_periodic(tid);
            return Ok(false);
        };
        if let Some(req) = self.pools[pool as usize].pending.pop_front() {
            let t = self.th(tid);
            t.req = Some(req);
            t.site = req.site;
            self.plan_request(tid);
            return Ok(false);
        }
        let kind = match self.get(tid).map(|t| t.role) {
            Some(Role::Web) => WaitKind::Epoll,
            Some(Role::App) => WaitKind::FutexWork,
            _ => WaitKind::SockRecv,
        };
        self.th(tid).req = None;
        self.th(tid).pending_wake = false;
        self.pools[pool as usize].idle.push_back(tid);
        self.block(out, tid, cpu, kind, STATE_INTERRUPTIBLE, false)?;
        Ok(true)
    }

    /// Sleep `d` ns on a timer (true: blocked, the timer armed).
    fn step_sleep(&mut self, out: &mut dyn TraceSink, tid: u32, cpu: u32, d: u64) -> Result<bool> {
        let kind = match self.get(tid).map(|t| t.role) {
            Some(Role::Kworker) => WaitKind::KthreadIdle,
            Some(Role::Daemon) if tid % 3 == 0 => WaitKind::FutexTimed,
            _ => WaitKind::Nanosleep,
        };
        if self.block(out, tid, cpu, kind, STATE_INTERRUPTIBLE, false)? {
            let wid = self.get(tid).map_or(0, |t| t.wait_id);
            self.at(self.now + d, Act::Timer { tid, wait_id: wid });
            return Ok(true);
        }
        Ok(false)
    }

    /// Wake a sleeping thread of the same process.
    fn step_wake_peer(&mut self, out: &mut dyn TraceSink, tid: u32, cpu: u32) -> Result<()> {
        let tgid = self.get(tid).map_or(0, |t| t.tgid);
        if let Some(m) = self.members.get(&tgid) {
            let peer = m[self.rng.below(m.len() as u64) as usize];
            let sleeping = self.get(peer).is_some_and(|t| {
                t.st == St::Blocked && matches!(t.wait, WaitKind::Nanosleep | WaitKind::FutexTimed)
            });
            if peer != tid && sleeping {
                self.wake(out, peer, cpu, WakeContext::Task, 0, WakeHow::FutexWake)?;
            }
        }
        Ok(())
    }

    /// The thread renames itself (prctl).
    fn step_rename(&mut self, out: &mut dyn TraceSink, tid: u32) -> Result<()> {
        let t = self.th(tid);
        let mut name = t.comm.as_str().into_owned();
        name.truncate(11);
        let new = Comm::new(&format!("{name}-r{}", t.gen % 10));
        t.comm = new;
        let (tgid, comm) = (t.tgid, t.comm);
        self.emit(
            out,
            Event::Comm(TaskComm {
                ts: self.now,
                tid,
                tgid,
                comm,
                reason: CommReason::Rename,
            }),
        )
    }

    /// The shell forks a child process, queued to run on `cpu`.
    fn step_spawn(&mut self, out: &mut dyn TraceSink, tid: u32, cpu: u32) -> Result<()> {
        let child = self.new_thread(None, "bash", false, Role::Child, None, 0);
        {
            let c = self.th(child);
            c.parent = tid;
            c.last_cpu = cpu;
            c.st = St::Queued;
            c.woken = true;
        }
        out.add_tasks(&[self.task_entry(child)])?;
        let comm = Comm::new("bash");
        self.emit(
            out,
            Event::Comm(TaskComm {
                ts: self.now,
                tid: child,
                tgid: child,
                comm,
                reason: CommReason::Fork,
            }),
        )?;
        self.emit(
            out,
            Event::WakeupNew(WakeupNew {
                ts: self.now,
                cpu,
                parent_tid: tid,
                child_tid: child,
                child_tgid: child,
            }),
        )?;
        self.plan_periodic(child);
        self.enqueue(child);
        Ok(())
    }

    /// The child execs one of the usual programs.
    fn step_exec(&mut self, out: &mut dyn TraceSink, tid: u32) -> Result<()> {
        let name = self.child_names[self.rng.below(self.child_names.len() as u64) as usize];
        let t = self.th(tid);
        t.comm = Comm::new(name);
        let (tgid, comm) = (t.tgid, t.comm);
        self.emit(
            out,
            Event::Comm(TaskComm {
                ts: self.now,
                tid,
                tgid,
                comm,
                reason: CommReason::Exec,
            }),
        )
    }

    /// The thread exits: its last switch-out, and its slot freed.
    fn step_exit(&mut self, out: &mut dyn TraceSink, tid: u32, cpu: u32) -> Result<()> {
        let (tgid, parent) = self.get(tid).map_or((0, 0), |t| (t.tgid, t.parent));
        self.emit(
            out,
            Event::Exit(Exit {
                ts: self.now,
                tid,
                tgid,
            }),
        )?;
        // The parent shell is not waiting for children in this model (it sleeps on its
        // own timer); `parent` is kept for a future variant.
        let _ = parent;
        self.th(tid).st = St::Dead;
        self.switch_out(out, cpu, tid, STATE_EXIT_DEAD)?;
        let i = self.ix.remove(&tid).expect("task");
        self.free.push(i);
        Ok(())
    }

    fn start_burst(&mut self, tid: u32, d: u64) {
        let now = self.now;
        let (gen, cpu) = {
            let t = self.th(tid);
            t.burst_end = now + d;
            (t.gen, t.last_cpu)
        };
        self.at(now + d, Act::BurstEnd { tid, gen });
        if d > SLICE_NS {
            self.at(now + SLICE_NS, Act::Slice { cpu, tid, gen });
        }
    }

    /// Wake `target` if it is blocked, else leave a pending wake token (no event: the
    /// kernel emits sched_waking only for tasks that are not runnable).
    fn pending_or_wake(
        &mut self,
        out: &mut dyn TraceSink,
        target: u32,
        cpu: u32,
        how: WakeHow,
    ) -> Result<()> {
        match self.get(target).map(|t| t.st) {
            Some(St::Blocked) => self.wake(out, target, cpu, WakeContext::Task, 0, how),
            Some(_) => {
                self.th(target).pending_wake = true;
                Ok(())
            }
            None => Ok(()),
        }
    }

    /// Emit a waking of blocked `target` on `cpu` and make it runnable.
    fn wake(
        &mut self,
        out: &mut dyn TraceSink,
        target: u32,
        cpu: u32,
        ctx: WakeContext,
        source: u32,
        how: WakeHow,
    ) -> Result<()> {
        let waker = self.cpus[cpu as usize].cur;
        let since = {
            let t = self.th(target);
            debug_assert_eq!(t.st, St::Blocked);
            t.blocked_since
        };
        let long = self.now.saturating_sub(since) > STACK_THRESHOLD_NS;
        let (k, u) = if !long {
            let u = if ctx == WakeContext::Task && !self.get(waker).is_some_and(|t| t.kernel) {
                StackId::SKIPPED
            } else {
                StackId::NONE
            };
            (StackId::SKIPPED, u)
        } else {
            let variant = (self.rng.below(4)) as u16;
            let k = self.stacks.kernel_wake(out, how, variant)?;
            let u = match (ctx, self.get(waker)) {
                (WakeContext::Task, Some(w)) if !w.kernel => {
                    let (tgid, site) = (w.tgid, w.site);
                    self.stacks.user_wake(out, tgid, how, site)?
                }
                _ => StackId::NONE,
            };
            (k, u)
        };
        self.emit(
            out,
            Event::Waking(Waking {
                ts: self.now,
                cpu,
                waker_tid: waker,
                target_tid: target,
                context: ctx,
                source,
                waker_kstack: k,
                waker_ustack: u,
            }),
        )?;
        {
            let t = self.th(target);
            t.woken = true;
            t.st = St::Queued;
        }
        self.enqueue(target);
        Ok(())
    }

    /// Put a runnable task on a CPU's run queue and arrange for it to run.
    fn enqueue(&mut self, tid: u32) {
        let last = self.get(tid).map_or(0, |t| t.last_cpu);
        let idle = |c: &Cpu| c.cur == 0 && c.rq.is_empty();
        let cpu = if idle(&self.cpus[last as usize]) {
            last
        } else {
            let start = self.rng.below(CPUS as u64) as u32;
            let mut pick = None;
            for k in 0..CPUS {
                let c = (start + k) % CPUS;
                if idle(&self.cpus[c as usize]) {
                    pick = Some(c);
                    break;
                }
            }
            pick.unwrap_or_else(|| {
                let mut best = last;
                for c in 0..CPUS {
                    if self.cpus[c as usize].rq.len() < self.cpus[best as usize].rq.len() {
                        best = c;
                    }
                }
                best
            })
        };
        self.th(tid).last_cpu = cpu;
        let c = &mut self.cpus[cpu as usize];
        c.rq.push_back(tid);
        let cur = c.cur;
        if !c.resched {
            let delay = if cur == 0 {
                Some(self.rng.range(1_000, 4_000))
            } else if self.now - self.get(cur).map_or(u64::MAX, |t| t.run_start) >= PREEMPT_AFTER_NS
            {
                Some(self.rng.range(500, 2_000))
            } else {
                None
            };
            if let Some(d) = delay {
                self.cpus[cpu as usize].resched = true;
                self.at(self.now + d, Act::Resched { cpu });
            }
        }
    }

    /// The running task blocks. Returns false when a pending wake token let it continue.
    /// `reply`: the task waits for a reply, which may already have arrived (a pending
    /// wake token); waits for work or timers never consume the token.
    fn block(
        &mut self,
        out: &mut dyn TraceSink,
        tid: u32,
        cpu: u32,
        wait: WaitKind,
        state: u32,
        reply: bool,
    ) -> Result<bool> {
        let t = self.th(tid);
        if reply && t.pending_wake {
            t.pending_wake = false;
            return Ok(false);
        }
        t.wait = wait;
        t.wait_id = t.wait_id.wrapping_add(1);
        t.st = St::Blocked;
        let now = self.now;
        self.th(tid).blocked_since = now;
        self.switch_out(out, cpu, tid, state)?;
        Ok(true)
    }

    /// `tid` (running on `cpu`) leaves the CPU with `state`: run the next queued task,
    /// steal one, or go idle.
    fn switch_out(
        &mut self,
        out: &mut dyn TraceSink,
        cpu: u32,
        tid: u32,
        state: u32,
    ) -> Result<()> {
        debug_assert_eq!(self.cpus[cpu as usize].cur, tid);
        let next = match self.cpus[cpu as usize].rq.pop_front() {
            Some(n) => n,
            None => {
                // Steal from the longest other run queue.
                let mut best: Option<u32> = None;
                for c in 0..CPUS {
                    let l = self.cpus[c as usize].rq.len();
                    if c != cpu
                        && l > 0
                        && self.cpus[c as usize].cur != 0
                        && best.is_none_or(|b| l > self.cpus[b as usize].rq.len())
                    {
                        best = Some(c);
                    }
                }
                match best {
                    Some(c) => self.cpus[c as usize].rq.pop_front().unwrap_or(0),
                    None => 0,
                }
            }
        };
        self.switch(out, cpu, state, next)
    }

    /// Preempt the running task of `cpu` in favour of its run queue head.
    fn preempt(&mut self, out: &mut dyn TraceSink, cpu: u32) -> Result<()> {
        let cur = self.cpus[cpu as usize].cur;
        let Some(next) = self.cpus[cpu as usize].rq.pop_front() else {
            return Ok(());
        };
        let now = self.now;
        {
            let t = self.th(cur);
            t.remaining = t.burst_end.saturating_sub(now).max(1_000);
            t.st = St::Queued;
            t.woken = false;
        }
        self.switch(out, cpu, STATE_RUNNABLE, next)?;
        self.cpus[cpu as usize].rq.push_back(cur);
        Ok(())
    }

    /// Emit the switch on `cpu` from its current task to `next` (0 = idle) and start
    /// `next`. The current task's state must already be updated by the caller.
    fn switch(&mut self, out: &mut dyn TraceSink, cpu: u32, state: u32, next: u32) -> Result<()> {
        let prev = self.cpus[cpu as usize].cur;
        let (pk, pu) = match self.get(prev) {
            _ if prev == 0 => (StackId::NONE, StackId::NONE),
            Some(t) if state == STATE_EXIT_DEAD => {
                let _ = t;
                (StackId::NONE, StackId::NONE)
            }
            Some(t) => (
                StackId::SKIPPED,
                if t.kernel {
                    StackId::NONE
                } else {
                    StackId::SKIPPED
                },
            ),
            None => (StackId::NONE, StackId::NONE),
        };
        let prev_state = if prev == 0 { STATE_RUNNABLE } else { state };
        if prev != 0 {
            if let Some(&i) = self.ix.get(&prev) {
                self.threads[i].gen = self.threads[i].gen.wrapping_add(1);
            }
        }
        self.emit(
            out,
            Event::Switch(Switch {
                ts: self.now,
                cpu,
                prev_tid: prev,
                prev_state,
                next_tid: next,
                prev_kstack: pk,
                prev_ustack: pu,
            }),
        )?;
        self.cpus[cpu as usize].cur = next;
        if next == 0 {
            return Ok(());
        }
        let now = self.now;
        let (woken, remaining, since, kernel, gen) = {
            let t = self.th(next);
            t.st = St::Running(cpu);
            t.last_cpu = cpu;
            t.run_start = now;
            (
                std::mem::take(&mut t.woken),
                t.remaining,
                t.blocked_since,
                t.kernel,
                t.gen,
            )
        };
        if woken && since != 0 && now - since > STACK_THRESHOLD_NS {
            let (tgid, wait) = self
                .get(next)
                .map_or((0, WaitKind::Nanosleep), |t| (t.tgid, t.wait));
            let k = self.stacks.kernel_wait(out, wait, (tgid % 5) as u16)?;
            self.emit(
                out,
                Event::OffCpuStacks(OffCpuStacks {
                    ts: now,
                    tid: next,
                    kstack: k,
                    ustack: StackId::NONE,
                }),
            )?;
            if !kernel {
                let d = self.rng.range(300, 800);
                self.at(now + d, Act::UStack { tid: next, gen });
            }
        }
        if woken && remaining == 0 {
            // Woken after a block (or new): continue its program.
            self.advance(out, next)?;
        } else {
            let d = remaining.max(1_000);
            self.th(next).remaining = 0;
            self.start_burst(next, d);
        }
        Ok(())
    }
}

fn p_role(p: &Pool) -> Role {
    let _ = p.tgid;
    p.role
}

// ---------------------------------------------------------------------------------------
// Stacks and symbols, generated on first use.

#[derive(Default)]
struct Stacks {
    next_id: u32,
    kernel_wait: HashMap<(WaitKind, u16), StackId>,
    kernel_wake: HashMap<(WakeHow, u16), StackId>,
    user: HashMap<(u32, u8, u16), StackId>,
    /// Addresses already symbolized: (tgid, addr).
    symbolized: HashMap<(u32, u64), ()>,
}

const KBASE: u64 = 0xffff_ffff_8100_0000;

fn fnv(s: &str) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in s.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl Stacks {
    fn alloc(&mut self) -> StackId {
        let id = StackId(StackId::FIRST_REAL + self.next_id);
        self.next_id += 1;
        id
    }

    /// Register a stack (leaf first) of `kind` in address space `tgid`.
    fn add(
        &mut self,
        out: &mut dyn TraceSink,
        kind: StackKind,
        tgid: u32,
        frames: &[(String, Option<&str>)],
    ) -> Result<StackId> {
        let id = self.alloc();
        let mut addrs = Vec::with_capacity(frames.len());
        let mut syms = Vec::new();
        for (name, module) in frames {
            let h = fnv(name) ^ fnv(module.unwrap_or(""));
            let (base, addr) = match kind {
                StackKind::Kernel => {
                    let base = KBASE + (h % 0x00f0_0000) * 16;
                    (base, base + 0x10 + (h >> 40) % 0x200)
                }
                StackKind::User => {
                    let region = if module.is_some_and(|m| m.contains("libc")) {
                        0x7f3a_1c00_0000u64
                    } else {
                        0x5600_0000_0000u64 + (tgid as u64) * 0x1000_0000
                    };
                    let base = region + (h % 0x0080_0000) * 16;
                    (base, base + 0x8 + (h >> 40) % 0x400)
                }
            };
            addrs.push(addr);
            let space = if kind == StackKind::Kernel { 0 } else { tgid };
            if self.symbolized.insert((space, addr), ()).is_none() {
                // A few user frames stay unresolved (stripped / JIT code).
                let unresolved = kind == StackKind::User && h % 53 == 0;
                syms.push(SymbolEntry {
                    kind,
                    tgid: space,
                    addr,
                    name: if unresolved { None } else { Some(name.clone()) },
                    offset: addr - base,
                    module: module.map(str::to_string),
                    build_id: module.map(|m| {
                        fnv(m)
                            .to_le_bytes()
                            .iter()
                            .chain(fnv(&format!("{m}!")).to_le_bytes().iter())
                            .copied()
                            .collect()
                    }),
                    file_offset: module.map(|_| (addr - 0x5600_0000_0000u64.min(addr)) & 0xff_ffff),
                });
            }
        }
        out.add_stacks(&[StackEntry {
            id,
            kind,
            tgid: if kind == StackKind::Kernel { 0 } else { tgid },
            frames: addrs,
        }])?;
        if !syms.is_empty() {
            out.add_symbols(&syms)?;
        }
        Ok(id)
    }

    fn kernel_wait(
        &mut self,
        out: &mut dyn TraceSink,
        wait: WaitKind,
        variant: u16,
    ) -> Result<StackId> {
        if let Some(&id) = self.kernel_wait.get(&(wait, variant)) {
            return Ok(id);
        }
        let tail: &[&str] = match wait {
            WaitKind::Epoll => &[
                "schedule_hrtimeout_range",
                "ep_poll",
                "do_epoll_wait",
                "__x64_sys_epoll_wait",
            ],
            WaitKind::FutexWork | WaitKind::FutexTimed => &[
                "futex_wait_queue",
                "__futex_wait",
                "futex_wait",
                "do_futex",
                "__x64_sys_futex",
            ],
            WaitKind::SockRecv | WaitKind::UpstreamRecv => &[
                "schedule_timeout",
                "sk_wait_data",
                "tcp_recvmsg_locked",
                "tcp_recvmsg",
                "inet_recvmsg",
                "sock_recvmsg",
                "__sys_recvfrom",
                "__x64_sys_recvfrom",
            ],
            WaitKind::Disk => &[
                "io_schedule",
                "folio_wait_bit_common",
                "filemap_get_pages",
                "filemap_read",
                "ext4_file_read_iter",
                "vfs_read",
                "ksys_pread64",
                "__x64_sys_pread64",
            ],
            WaitKind::Nanosleep => &[
                "do_nanosleep",
                "hrtimer_nanosleep",
                "common_nsleep",
                "__x64_sys_clock_nanosleep",
            ],
            WaitKind::KthreadIdle => &[
                "worker_thread",
                "kthread",
                "ret_from_fork",
                "ret_from_fork_asm",
            ],
        };
        let mut frames: Vec<(String, Option<&str>)> =
            vec![("__schedule".into(), None), ("schedule".into(), None)];
        // Variants: different entry paths / inlined helpers.
        let mid = [
            "",
            "__traceiter_sched_switch",
            "schedule_preempt_disabled",
            "io_schedule_timeout",
            "schedule_timeout_interruptible",
        ];
        if variant as usize % mid.len() != 0 {
            frames.push((mid[variant as usize % mid.len()].to_string(), None));
        }
        frames.extend(tail.iter().map(|f| (f.to_string(), None)));
        if wait == WaitKind::Disk && variant % 2 == 1 {
            frames.insert(4, ("xfs_file_buffered_read".into(), Some("xfs")));
        }
        if wait != WaitKind::KthreadIdle {
            frames.push(("do_syscall_64".into(), None));
            frames.push(("entry_SYSCALL_64_after_hwframe".into(), None));
        }
        let id = self.add(out, StackKind::Kernel, 0, &frames)?;
        self.kernel_wait.insert((wait, variant), id);
        Ok(id)
    }

    fn kernel_wake(
        &mut self,
        out: &mut dyn TraceSink,
        how: WakeHow,
        variant: u16,
    ) -> Result<StackId> {
        if let Some(&id) = self.kernel_wake.get(&(how, variant)) {
            return Ok(id);
        }
        let tail: &[&str] = match how {
            WakeHow::FutexWake => &[
                "wake_up_q",
                "futex_wake",
                "do_futex",
                "__x64_sys_futex",
                "do_syscall_64",
                "entry_SYSCALL_64_after_hwframe",
            ],
            WakeHow::SockSend => &[
                "__wake_up_sync_key",
                "sock_def_readable",
                "tcp_data_queue",
                "tcp_rcv_established",
                "tcp_v4_do_rcv",
                "__release_sock",
                "release_sock",
                "tcp_sendmsg",
                "sock_sendmsg",
                "__sys_sendto",
                "__x64_sys_sendto",
                "do_syscall_64",
                "entry_SYSCALL_64_after_hwframe",
            ],
            WakeHow::PipeWrite => &[
                "__wake_up_common_lock",
                "__wake_up_sync_key",
                "pipe_write",
                "vfs_write",
                "ksys_write",
                "__x64_sys_write",
                "do_syscall_64",
                "entry_SYSCALL_64_after_hwframe",
            ],
            WakeHow::NetRx => &[
                "ep_autoremove_wake_function",
                "__wake_up_common",
                "__wake_up_sync_key",
                "ep_poll_callback",
                "sock_def_readable",
                "tcp_data_queue",
                "tcp_rcv_established",
                "tcp_v4_rcv",
                "ip_local_deliver_finish",
                "__netif_receive_skb_one_core",
                "process_backlog",
                "__napi_poll",
                "net_rx_action",
                "handle_softirqs",
                "irq_exit_rcu",
                "common_interrupt",
            ],
            WakeHow::DiskIrq => &[
                "wake_page_function",
                "__wake_up_common",
                "folio_wake_bit",
                "end_bio_bh_io_sync",
                "blk_update_request",
                "blk_mq_end_request",
                "nvme_irq",
                "__handle_irq_event_percpu",
                "handle_edge_irq",
                "__common_interrupt",
                "common_interrupt",
            ],
            WakeHow::Timer => &[
                "hrtimer_wakeup",
                "__hrtimer_run_queues",
                "hrtimer_interrupt",
                "__sysvec_apic_timer_interrupt",
                "sysvec_apic_timer_interrupt",
            ],
        };
        let mut frames: Vec<(String, Option<&str>)> = vec![("try_to_wake_up".into(), None)];
        if variant % 2 == 1 {
            frames.push(("ttwu_queue_wakelist".into(), None));
        }
        frames.extend(tail.iter().map(|f| (f.to_string(), None)));
        if variant >= 2 {
            frames.push(
                if how == WakeHow::NetRx || how == WakeHow::DiskIrq || how == WakeHow::Timer {
                    ("asm_common_interrupt".into(), None)
                } else {
                    ("syscall_exit_to_user_mode".into(), None)
                },
            );
        }
        let id = self.add(out, StackKind::Kernel, 0, &frames)?;
        self.kernel_wake.insert((how, variant), id);
        Ok(id)
    }

    fn user(
        &mut self,
        out: &mut dyn TraceSink,
        tgid: u32,
        tag: u8,
        site: u16,
        libc_fn: &str,
        role_fns: &[&str],
    ) -> Result<StackId> {
        let key = (tgid, tag, site);
        if let Some(&id) = self.user.get(&key) {
            return Ok(id);
        }
        let exe = format!("/usr/bin/app{}", tgid % 97);
        let libc = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let mut frames: Vec<(String, Option<&str>)> = vec![(libc_fn.to_string(), Some(libc))];
        let exe_ref: &str = &exe;
        frames.push((
            format!(
                "handler_{site}_{}",
                role_fns.first().copied().unwrap_or("op")
            ),
            Some(exe_ref),
        ));
        for f in role_fns.iter().skip(1) {
            frames.push((f.to_string(), Some(exe_ref)));
        }
        frames.push(("worker_main".into(), Some(exe_ref)));
        frames.push(("start_thread".into(), Some(libc)));
        frames.push(("__clone3".into(), Some(libc)));
        let id = self.add(out, StackKind::User, tgid, &frames)?;
        self.user.insert(key, id);
        Ok(id)
    }

    fn user_wait(
        &mut self,
        out: &mut dyn TraceSink,
        tgid: u32,
        wait: WaitKind,
        site: u16,
    ) -> Result<StackId> {
        let (tag, libc_fn, fns): (u8, &str, &[&str]) = match wait {
            WaitKind::Epoll => (0, "epoll_wait", &["event_loop", "process_events"]),
            WaitKind::FutexWork => (
                1,
                "__futex_abstimed_wait_common",
                &["queue_take", "pthread_cond_wait", "BlockingQueue_take"],
            ),
            WaitKind::FutexTimed => (
                2,
                "__futex_abstimed_wait_common",
                &["timed_wait", "pthread_cond_timedwait"],
            ),
            WaitKind::SockRecv => (3, "recv", &["read_request", "conn_read", "session_loop"]),
            WaitKind::UpstreamRecv => (4, "recv", &["upstream_read", "proxy_pass"]),
            WaitKind::Disk => (5, "pread64", &["read_block", "buffer_read", "storage_get"]),
            WaitKind::Nanosleep => (6, "clock_nanosleep", &["sleep_until", "tick_loop"]),
            WaitKind::KthreadIdle => (8, "none", &[]),
        };
        let site = if matches!(
            wait,
            WaitKind::Epoll | WaitKind::FutexWork | WaitKind::SockRecv
        ) {
            site % SITES
        } else {
            site % 4
        };
        self.user(out, tgid, tag, site, libc_fn, fns)
    }

    fn user_wake(
        &mut self,
        out: &mut dyn TraceSink,
        tgid: u32,
        how: WakeHow,
        site: u16,
    ) -> Result<StackId> {
        let (tag, libc_fn, fns): (u8, &str, &[&str]) = match how {
            WakeHow::FutexWake => (
                16,
                "__futex_wake",
                &["queue_put", "pthread_cond_signal", "dispatch"],
            ),
            WakeHow::SockSend => (
                17,
                "send",
                &["write_response", "conn_write", "finish_request"],
            ),
            WakeHow::PipeWrite => (18, "write", &["notify_peer", "complete"]),
            _ => (19, "none", &[]),
        };
        self.user(out, tgid, tag, site % SITES, libc_fn, fns)
    }
}

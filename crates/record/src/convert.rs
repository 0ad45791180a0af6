//! Raw records to trace events: stack dedup and status mapping, irq source naming,
//! softirq context checks against kernel stacks, and the reorder buffer that writes the
//! nearly ordered ring buffer in time order.

use crate::ksyms::KernelSymbols;
use crate::raw::{self, RawEv};
use crate::Result;
use chainrec_format::*;
// hashbrown (already in the build through other crates) rather than std's maps: its
// default hasher is several times cheaper than SipHash on these small keys (hashing was
// ~15 % of the consumer's CPU), and `Equivalent` looks stacks up by slice, without
// allocating a key per event.
use hashbrown::{Equivalent, HashMap, HashSet};

/// A deduplicated stack: kind, tgid (0 for kernel stacks) and frames.
#[derive(Hash, PartialEq, Eq)]
struct StackKey {
    kind: StackKind,
    tgid: Tid,
    frames: Vec<u64>,
}

/// [`StackKey`] borrowed from a record (same hash: a Vec hashes as its slice).
#[derive(Hash)]
struct StackKeyRef<'a> {
    kind: StackKind,
    tgid: Tid,
    frames: &'a [u64],
}

impl Equivalent<StackKey> for StackKeyRef<'_> {
    fn equivalent(&self, k: &StackKey) -> bool {
        self.kind == k.kind && self.tgid == k.tgid && self.frames == k.frames.as_slice()
    }
}

const SOFTIRQ_NAMES: [&str; 10] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

fn irq_name(code: u32) -> String {
    let n = code & 0xffff;
    match code & !0xffff {
        raw::SRC_TIMER => "timer".to_string(),
        raw::SRC_SOFTIRQ => {
            let vec = n & !raw::SRC_SOFTIRQ_KSOFTIRQD;
            let name = if vec == raw::SRC_SOFTIRQ_UNKNOWN {
                "vector unknown".to_string()
            } else {
                SOFTIRQ_NAMES
                    .get(vec as usize)
                    .map(|s| s.to_string())
                    .unwrap_or(format!("softirq {vec}"))
            };
            if n & raw::SRC_SOFTIRQ_KSOFTIRQD != 0 {
                format!("{name} via ksoftirqd")
            } else {
                name
            }
        }
        _ => std::fs::read_to_string(format!("/sys/kernel/irq/{n}/actions"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("irq {n}")),
    }
}

/// Converts raw records into trace events and tables.
pub(crate) struct Converter {
    stack_ids: HashMap<StackKey, StackId>,
    pub(crate) next_stack: u32,
    pub(crate) new_stacks: Vec<StackEntry>,
    irq_ids: HashMap<u32, u32>,
    pub(crate) new_irqs: Vec<IrqSource>,
    tasks: HashSet<Tid>,
    pub(crate) new_tasks: Vec<TaskEntry>,
    /// Each live thread's cgroup id as last reported (to write changes only).
    task_cgroup: HashMap<Tid, u64>,
    /// Cgroup memberships not yet written.
    pub(crate) new_members: Vec<TaskCgroup>,
    pub(crate) kaddrs: HashSet<u64>,
    pub(crate) new_kaddrs: Vec<u64>,
    pub(crate) uaddrs: HashSet<(Tid, u64)>,
    pub(crate) new_uaddrs: HashMap<Tid, Vec<u64>>,
    /// Time of the earliest event that brought each process's new user addresses (the
    /// mapping history is asked about that time).
    pub(crate) new_uaddr_ts: HashMap<Tid, u64>,
    /// New user addresses first seen as a return address (not the innermost frame): they
    /// are named by the call instruction before them (`addr - 1`), as perf does.
    pub(crate) new_ucallers: HashSet<(Tid, u64)>,
    /// Time of the event being converted.
    cur_ts: u64,
    pub(crate) lost: LostCounts,
    pub(crate) ksyms: KernelSymbols,
    /// Kernel stack references written as SKIPPED (lazy wakings; switches are counted
    /// in BPF at switch-in instead).
    pub(crate) skipped: u64,
    /// User stacks written as USER_EXITING (the task was exiting).
    pub(crate) user_exiting: u64,
    /// Leaf kernel addresses already classified: true = inside the BPF/tracing machinery.
    tracing_frames: HashMap<u64, bool>,
    /// Scheduler and spinlock text ranges ([`KernelSymbols::scheduler_text`]), removed from
    /// eager off-CPU kernel stacks; reused buffer for the result.
    sched_text: Vec<(u64, u64)>,
    nosched_buf: Vec<u64>,
    /// Kernel addresses already classified for softirq wakings (see `softirq_by_stack`).
    softirq_frames: HashMap<u64, SoftirqFrame>,
    /// Softirq wakings checked against their kernel stack, and how many the stack moved
    /// to task context / to interrupt exit (the BPF side had decided otherwise).
    pub(crate) softirq_stack_checked: u64,
    pub(crate) softirq_stack_to_task: u64,
    pub(crate) softirq_stack_to_irq: u64,
    /// On-CPU samples converted, and those without stacks.
    pub(crate) samples: crate::samples::SampleCounts,
    /// Check softirq wakings against their kernel stacks (off with --no-softirq-tracking,
    /// which keeps the behaviour from before they were told apart, for A/B).
    pub(crate) softirq_by_stack_on: bool,
    /// Unwinds the user-stack copies (`--user-unwind cfi`).
    pub(crate) unwinder: UserUnwinder<ProcMaps>,
    /// Reused buffer for unwound frames.
    unwound: Vec<u64>,
    /// Label frames that end unfinished unwound stacks, by (tgid, text): their address.
    labels: HashMap<(Tid, String), u64>,
    /// Symbols of new label frames (named here, never symbolized).
    pub(crate) new_label_syms: Vec<SymbolEntry>,
    /// What unwinding taught of each thread's user stack (its top, windows to copy too),
    /// and the threads whose entry the BPF side (`ustack_learned`) has not been told yet.
    learned: HashMap<Tid, LearnedStack>,
    pub(crate) new_learned: Vec<(Tid, LearnedStack)>,
    /// Scratch: the addresses the last unwind read from a live stack.
    live_read: Vec<u64>,
    /// Scratch: the frame pointers of the last unwind's frames.
    java_bps: Vec<u64>,
    /// Names of Python code objects, read from the live processes.
    code_names: crate::python::CodeNames,
    /// Frames of interpreted Java methods, named from the live JVMs.
    java_frames: crate::java::MethodFrames,
    /// User addresses in anonymous executable memory (JIT code) per process, and whether
    /// each is a return address: named again from the process's perf map at its exit
    /// (see [`Converter::name_jit_frames`]).
    jit_addrs: HashMap<Tid, Vec<(u64, bool)>>,
    /// Where perf map files are (`/tmp`).
    pub(crate) perf_map_dir: std::path::PathBuf,
    /// CPU-quota throttling records, for the throttle sections.
    pub(crate) throttles: crate::throttle::Throttles,
}

/// What unwinding taught of one thread's user stack, as the BPF side's `struct
/// ustack_learned` holds it: the stack's top (0: unknown; main threads use their
/// `mm->start_stack`), and up to [`MAX_LEARNED`] windows to copy beside the stack (0:
/// unused), where an unwind found the copy short of a return address. All zero: nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LearnedStack {
    pub top: u64,
    pub windows: [u64; MAX_LEARNED],
}

/// Windows learned per thread (`UCOPY_LEARNED`; a copy's last window slot may carry the
/// thread's Python frames).
pub(crate) const MAX_LEARNED: usize = raw::UCOPY_LEARNED as usize;

impl LearnedStack {
    /// Copy a window at `addr` too: it starts a little below (the frame's saved registers
    /// sit below its return address). When all are taken, the lowest goes: the walk got
    /// past it to need this one.
    fn add_window(&mut self, addr: u64) {
        let at = addr.saturating_sub(WINDOW_BELOW) & !7;
        if self.covers(addr) {
            return;
        }
        let w = &mut self.windows;
        match w.iter().position(|&x| x == 0) {
            Some(i) => w[i] = at,
            None => {
                w.sort_unstable();
                w[0] = at;
            }
        }
        w.sort_unstable_by_key(|&x| (x == 0, x));
    }

    fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// Whether a window holds the u64 at `addr`.
    fn covers(&self, addr: u64) -> bool {
        let len = u64::from(raw::UCOPY_WINDOW);
        self.windows
            .iter()
            .any(|&x| x != 0 && x <= addr && addr + 8 <= x + len)
    }
}

/// How far below the address an unwind lacked a learned window starts.
const WINDOW_BELOW: u64 = 64;

/// Addresses of the label frames ending unfinished unwound user stacks (`[unwind: ...]`):
/// above any user address, so they never collide with a real frame.
pub const UNWIND_LABEL_BASE: u64 = 0xffff_ff00_0000_0000;

use crate::unwind::{IncompleteReason, ProcMaps, UnwindEnd, UserUnwinder};

/// What a kernel frame says about the softirq a waking ran in (the innermost such frame
/// of the stack decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SoftirqFrame {
    /// Says nothing.
    Other,
    /// `do_softirq` (`.part.N` too) or `__local_bh_enable_ip`: run by the task itself.
    Task,
    /// An interrupt's entry or exit (`irq_exit_rcu`, `sysvec_*`, `common_interrupt`, ...).
    Irq,
}

fn softirq_frame(name: &str) -> SoftirqFrame {
    let base = name.split('.').next().unwrap_or(name);
    match base {
        "do_softirq" | "__local_bh_enable_ip" => SoftirqFrame::Task,
        "irq_exit_rcu"
        | "__irq_exit_rcu"
        | "irq_exit"
        | "common_interrupt"
        | "asm_common_interrupt"
        | "run_ksoftirqd" => SoftirqFrame::Irq,
        n if n.starts_with("sysvec_") || n.starts_with("asm_sysvec_") => SoftirqFrame::Irq,
        _ => SoftirqFrame::Other,
    }
}

impl Converter {
    pub(crate) fn new(ksyms: KernelSymbols) -> Self {
        Converter {
            sched_text: ksyms.scheduler_text(),
            nosched_buf: Vec::new(),
            ksyms,
            skipped: 0,
            user_exiting: 0,
            tracing_frames: HashMap::new(),
            softirq_frames: HashMap::new(),
            softirq_stack_checked: 0,
            softirq_stack_to_task: 0,
            softirq_stack_to_irq: 0,
            samples: Default::default(),
            softirq_by_stack_on: true,
            unwinder: UserUnwinder::new(ProcMaps::default()),
            unwound: Vec::new(),
            labels: HashMap::new(),
            new_label_syms: Vec::new(),
            learned: HashMap::new(),
            new_learned: Vec::new(),
            live_read: Vec::new(),
            java_bps: Vec::new(),
            code_names: Default::default(),
            java_frames: Default::default(),
            jit_addrs: HashMap::new(),
            perf_map_dir: std::path::PathBuf::from("/tmp"),
            throttles: Default::default(),
            stack_ids: HashMap::new(),
            next_stack: StackId::FIRST_REAL,
            new_stacks: Vec::new(),
            irq_ids: HashMap::new(),
            new_irqs: Vec::new(),
            tasks: HashSet::new(),
            new_tasks: Vec::new(),
            task_cgroup: HashMap::new(),
            new_members: Vec::new(),
            kaddrs: HashSet::new(),
            new_kaddrs: Vec::new(),
            uaddrs: HashSet::new(),
            new_uaddrs: HashMap::new(),
            new_uaddr_ts: HashMap::new(),
            new_ucallers: HashSet::new(),
            cur_ts: 0,
            lost: LostCounts::default(),
        }
    }

    fn stack(&mut self, status: u8, kind: StackKind, tgid: Tid, frames: &[u64]) -> StackId {
        let failed = |l: &mut LostCounts| match kind {
            StackKind::Kernel => l.kernel_stack_failed += 1,
            StackKind::User => l.user_stack_failed += 1,
        };
        match status {
            raw::ST_NONE => StackId::NONE,
            raw::ST_SKIPPED => StackId::SKIPPED,
            raw::ST_UPREEMPT => {
                self.lost.user_stacks_preempted += 1;
                StackId::USER_PREEMPTED
            }
            raw::ST_EXITING => {
                self.user_exiting += 1;
                StackId::USER_EXITING
            }
            raw::ST_EXEC => StackId::USER_EXEC,
            raw::ST_PRESENT if !frames.is_empty() => {
                let frames = if kind == StackKind::Kernel {
                    self.strip_tracing(frames)
                } else {
                    frames
                };
                if frames.is_empty() {
                    failed(&mut self.lost);
                    return StackId::FAILED;
                }
                let tgid = if kind == StackKind::Kernel { 0 } else { tgid };
                let key = StackKeyRef { kind, tgid, frames };
                if let Some(id) = self.stack_ids.get(&key) {
                    return *id;
                }
                let id = StackId(self.next_stack);
                self.next_stack += 1;
                for (i, &a) in frames.iter().enumerate() {
                    match kind {
                        StackKind::Kernel => {
                            if self.kaddrs.insert(a) {
                                self.new_kaddrs.push(a);
                            }
                        }
                        StackKind::User if a >= UNWIND_LABEL_BASE => {} // named already
                        StackKind::User => {
                            if self.uaddrs.insert((tgid, a)) {
                                if self.unwinder.is_anon(tgid, a) {
                                    self.jit_addrs.entry(tgid).or_default().push((a, i > 0));
                                }
                                self.new_uaddrs.entry(tgid).or_default().push(a);
                                self.new_uaddr_ts.entry(tgid).or_insert(self.cur_ts);
                                if i > 0 {
                                    self.new_ucallers.insert((tgid, a));
                                }
                            }
                        }
                    }
                }
                self.new_stacks.push(StackEntry {
                    id,
                    kind,
                    tgid,
                    frames: frames.to_vec(),
                });
                self.stack_ids.insert(
                    StackKey {
                        kind,
                        tgid,
                        frames: frames.to_vec(),
                    },
                    id,
                );
                id
            }
            _ => {
                failed(&mut self.lost);
                StackId::FAILED
            }
        }
    }

    /// An eager off-CPU kernel stack (taken at switch-out, in the task itself), without the
    /// scheduler's own frames (`schedule`, `__schedule`, `schedule_hrtimeout_range`,
    /// `do_nanosleep`, `preempt_schedule_irq`, spinlock functions, ...). The lazy stack of the
    /// same wait, walked at switch-in with `bpf_get_task_stack`, never has them (the kernel
    /// skips `in_sched_functions()` when it walks another task's stack), so both modes give
    /// the same frames, e.g. `...;anon_pipe_read` for a pipe read, and their folded files
    /// merge. Done here, not in the engine: the kernel's rule is an address range, which
    /// only the recorder's kallsyms snapshot knows.
    fn offcpu_kstack(&mut self, status: u8, frames: &[u64]) -> StackId {
        if status != raw::ST_PRESENT || self.sched_text.is_empty() {
            return self.stack(status, StackKind::Kernel, 0, frames);
        }
        let frames = self.strip_tracing(frames);
        let mut kept = std::mem::take(&mut self.nosched_buf);
        kept.clear();
        kept.extend(
            frames
                .iter()
                .copied()
                .filter(|a| !self.sched_text.iter().any(|r| (r.0..r.1).contains(a))),
        );
        let id = self.stack(status, StackKind::Kernel, 0, &kept);
        self.nosched_buf = kept;
        id
    }

    /// Drop the leading frames of the BPF program and the tracepoint glue
    /// (`bpf_prog_*`, `bpf_trace_run*`, `__bpf_trace_*`) from a kernel stack.
    fn strip_tracing<'f>(&mut self, frames: &'f [u64]) -> &'f [u64] {
        let mut cut = 0;
        for (i, &a) in frames.iter().enumerate().take(6) {
            let ksyms = &self.ksyms;
            let tracing = *self.tracing_frames.entry(a).or_insert_with(|| {
                let s = ksyms.resolve(a);
                match s.name.as_deref() {
                    Some(n) => {
                        n.starts_with("bpf_prog_")
                            || n.starts_with("bpf_trace_run")
                            || n.starts_with("__bpf_trace_")
                            || n.starts_with("__traceiter_")
                            || n == "bpf_get_stack"
                            || n.starts_with("bpf_get_stack")
                    }
                    None => false,
                }
            });
            if tracing {
                cut = i + 1;
            }
        }
        &frames[cut..]
    }

    /// Whether the kernel stack of a softirq waking shows the softirq run by the task
    /// itself (`Some(true)`), at an interrupt's exit or in ksoftirqd (`Some(false)`), or
    /// neither (`None`): the innermost `do_softirq` / interrupt frame decides.
    fn softirq_by_stack(&mut self, frames: &[u64]) -> Option<bool> {
        for &a in frames {
            let ksyms = &self.ksyms;
            let class = *self.softirq_frames.entry(a).or_insert_with(|| {
                ksyms
                    .resolve(a)
                    .name
                    .as_deref()
                    .map_or(SoftirqFrame::Other, softirq_frame)
            });
            match class {
                SoftirqFrame::Other => {}
                SoftirqFrame::Task => return Some(true),
                SoftirqFrame::Irq => return Some(false),
            }
        }
        None
    }

    /// Context and source code of a softirq waking, checked against its kernel stack when
    /// it has one: the stack is exact where the BPF side used the preempt-count rule.
    fn softirq_checked(
        &mut self,
        e: &RawEv,
        kf: &[u64],
        context: WakeContext,
    ) -> (WakeContext, u32) {
        let w = e.waking();
        let ksoftirqd =
            w.source & !0xffff == raw::SRC_SOFTIRQ && w.source & raw::SRC_SOFTIRQ_KSOFTIRQD != 0;
        if e.kst != raw::ST_PRESENT || ksoftirqd || !self.softirq_by_stack_on {
            return (context, w.source);
        }
        let Some(task) = self.softirq_by_stack(kf) else {
            return (context, w.source);
        };
        self.softirq_stack_checked += 1;
        match (task, context) {
            (true, WakeContext::SoftIrq) if w.waker_tid != 0 => {
                self.softirq_stack_to_task += 1;
                // An hrtimer expiring in the softirq was sent as the timer source.
                let code = if w.source == raw::SRC_TIMER {
                    raw::SRC_SOFTIRQ | 8
                } else {
                    w.source
                };
                (WakeContext::SoftIrqTask, code)
            }
            (false, WakeContext::SoftIrqTask) => {
                self.softirq_stack_to_irq += 1;
                (WakeContext::SoftIrq, w.source)
            }
            _ => (context, w.source),
        }
    }

    fn irq(&mut self, code: u32) -> u32 {
        if code == 0 {
            return 0;
        }
        let next = self.irq_ids.len() as u32 + 1;
        *self.irq_ids.entry(code).or_insert_with(|| {
            self.new_irqs.push(IrqSource {
                id: next,
                name: irq_name(code),
            });
            next
        })
    }

    /// Thread `tid` is in cgroup `cgroup` from `ts` on (comm records at first sighting,
    /// exec and rename; `EV_CGROUP` records when it moved).
    pub(crate) fn cgroup_member(&mut self, ts: u64, tid: Tid, cgroup: u64) {
        if cgroup == 0 || self.task_cgroup.insert(tid, cgroup) == Some(cgroup) {
            return;
        }
        self.new_members.push(TaskCgroup { ts, tid, cgroup });
    }

    /// The user frames of `e` unwound from its stack copy into `self.unwound` (leaf first;
    /// a label frame last when the walk could not be finished).
    /// When the unwind stops short and the BPF frame-pointer walk of the same record (`fp`)
    /// got further (more frames, in mapped code), that walk is kept instead (counted in
    /// `fp_walk_kept`).
    fn unwind_copy(
        &mut self,
        e: &RawEv,
        fp: &[u64],
        bytes: &[u8],
        history: Option<&MappingHistory>,
    ) -> bool {
        let Some(copy) = e.stack_copy(bytes) else {
            return false;
        };
        // The thread whose stack this is (prev of a switch, the waker of a waking).
        let (tid, tgid) = match e.kind {
            raw::EV_SWITCH => (e.switch().prev_tid, e.switch().prev_tgid),
            raw::EV_WAKING => (e.waking().waker_tid, e.waking().waker_tgid),
            _ => (e.task().tid, e.task().tgid), // OffCpuStacks, samples
        };
        let mut out = std::mem::take(&mut self.unwound);
        let mut live_read = std::mem::take(&mut self.live_read);
        let end =
            self.unwinder
                .unwind_or_peek(tgid, tid, e.ts, copy, &mut out, history, &mut live_read);
        let was = self.learned.get(&tid).copied().unwrap_or_default();
        let mut now = was;
        match end {
            // A margin for outermost frames a little higher in later stacks.
            UnwindEnd::Complete if tid != tgid => now.top = self.unwinder.last_top() + 256,
            UnwindEnd::Incomplete(IncompleteReason::CopyTooShort) => {
                // A learned top that was too low (a reused tid): forget it. Short only
                // below a window (a frame or a stack larger than the copy) says nothing of
                // the top.
                if self.unwinder.last_beyond_copy() {
                    now.top = 0;
                }
                // The next copy of this thread takes a window where this one fell short:
                // the same code path finds its frames at the same addresses.
                if let Some(addr) = self.unwinder.last_short_at() {
                    now.add_window(addr);
                }
            }
            _ => {}
        }
        // Finished from the live stack: the next copies take what was read live, if a few
        // windows hold it.
        if !live_read.is_empty() {
            let mut windows = LearnedStack::default();
            for &a in &live_read {
                windows.add_window(a);
            }
            let fits = live_read.iter().all(|&a| windows.covers(a));
            if fits {
                now.windows = windows.windows;
            }
        }
        self.live_read = live_read;
        if now != was {
            if now.is_empty() {
                self.learned.remove(&tid);
            } else {
                self.learned.insert(tid, now);
            }
            self.new_learned.push((tid, now));
        }
        if matches!(end, UnwindEnd::Incomplete(_)) && e.ust == raw::ST_PRESENT {
            if let Some(n) = self
                .unwinder
                .fp_walk_better(tgid, e.ts, out.len(), fp, history)
            {
                out.clear();
                out.extend_from_slice(&fp[..n]);
                // The walk's frame pointers, from the frame records in the copy.
                let mut bps = std::mem::take(&mut self.java_bps);
                copy.frame_pointers(&out, &mut bps);
                self.name_java_frames(tgid, &copy, &mut out, &bps);
                self.java_bps = bps;
                self.splice_python(tgid, copy.python, &mut out);
                self.unwound = out;
                return true;
            }
        }
        let mut bps = std::mem::take(&mut self.java_bps);
        bps.clear();
        bps.extend_from_slice(self.unwinder.frame_bps());
        self.name_java_frames(tgid, &copy, &mut out, &bps);
        self.java_bps = bps;
        self.splice_python(tgid, copy.python, &mut out);
        if let UnwindEnd::Incomplete(reason) = end {
            let last = out.last().copied().unwrap_or(copy.ip);
            let at = self.unwinder.describe(tgid, e.ts, last);
            let text = match reason {
                IncompleteReason::CopyTooShort => {
                    format!("[unwind: stack copy too short above {at}]")
                }
                IncompleteReason::BadReturnAddress => {
                    format!("[unwind: bad return address above {at}]")
                }
                IncompleteReason::NoCfi => format!("[unwind: no CFI for {at}]"),
                IncompleteReason::ProcessGone => "[unwind: process gone]".to_string(),
                IncompleteReason::NoProgress => format!("[unwind: no progress at {at}]"),
                IncompleteReason::TooDeep => "[unwind: too many frames]".to_string(),
            };
            out.push(self.label(tgid, text));
        }
        self.unwound = out;
        true
    }

    /// In a JVM, put a frame naming the method in place of each frame of `out` that runs
    /// in the interpreter (perf map name `Interpreter`): its `Method*` is at its fp
    /// (`bps`, parallel to `out`) + [`crate::java::FRAME_METHOD_OFFSET`], in the copy.
    fn name_java_frames(
        &mut self,
        tgid: Tid,
        copy: &crate::unwind::StackCopy<'_>,
        out: &mut [u64],
        bps: &[u64],
    ) {
        let Some(exports) = self.unwinder.java(tgid).copied() else {
            return;
        };
        let mut frames = std::mem::take(&mut self.java_frames);
        let (named, unnamed) = frames.name_interpreted(
            tgid,
            &exports,
            out,
            bps,
            |addr| copy.read_u64(addr),
            |name| self.label(tgid, name),
        );
        let counts = &mut self.unwinder.counts;
        counts.java_frames += named;
        counts.java_missing += unnamed;
        counts.java_procs = frames.read;
        counts.java_unsupported = frames.unsupported;
        if counts.java_unsupported_why.is_none() {
            counts.java_unsupported_why = frames.first_unsupported.clone();
        }
        self.java_frames = frames;
    }

    /// In a CPython process, put the thread's Python frames (`window`, from the BPF side)
    /// in place of the `_PyEval_EvalFrameDefault` frames of `out` that ran them, each a
    /// label frame named `qualname (file.py:line)` from the live process.
    fn splice_python(&mut self, tgid: Tid, window: &[u8], out: &mut Vec<u64>) {
        let Some((eval, layout)) = self.unwinder.python_eval(tgid).cloned() else {
            return;
        };
        let py = crate::python::frames(window);
        if py.is_empty() {
            let in_eval = out
                .iter()
                .skip(1)
                .any(|&a| eval.contains(&a.wrapping_sub(1)));
            if in_eval {
                self.unwinder.counts.python_missing += 1;
            }
            return;
        }
        let mut names = std::mem::take(&mut self.code_names);
        let n = crate::python::splice(out, &eval, &py, |code| {
            let text = names
                .name(tgid, code, &layout)
                .unwrap_or_else(|| format!("[python code {code:#x}]"));
            self.label(tgid, text)
        });
        self.code_names = names;
        self.unwinder.counts.python_frames += n as u64;
    }

    /// At the exit of process `tgid`: its JIT frames named again from its perf map
    /// (`/tmp/perf-TGID.map`), else from its jitdump file (`jit-TGID.dump`, found among
    /// its mappings in `history`), whose symbol entries replace the ones written when the
    /// frames were new (a later entry for an address wins). A JIT that writes its map at
    /// exit (`-XX:+DumpPerfMapAtExit`), later than the frames were symbolized (`jcmd PID
    /// Compiler.perfmap`), or through a buffer it flushes now and then (V8's jitdump) had
    /// left them unnamed: symbolization runs on every poll, while the frames are new.
    /// Frames not yet symbolized are left to the symbolizer.
    fn name_jit_frames(&mut self, tgid: Tid, history: Option<&MappingHistory>) {
        let Some(addrs) = self.jit_addrs.remove(&tgid) else {
            return;
        };
        let path = self.perf_map_dir.join(format!("perf-{tgid}.map"));
        let jitdump = || {
            let name = format!("/jit-{tgid}.dump");
            let entries = history?.entries();
            let m = entries
                .iter()
                .find(|m| m.tgid == tgid && m.path.ends_with(&name))?;
            chainrec_symbols::jitdump::read(std::path::Path::new(&m.path))
        };
        let Some(map) = chainrec_symbols::PerfMap::read(&path).or_else(jitdump) else {
            return;
        };
        let pending: HashSet<u64> = self
            .new_uaddrs
            .get(&tgid)
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default();
        for (addr, caller) in addrs {
            if pending.contains(&addr) {
                continue;
            }
            // A return address is named by its call instruction.
            let at = if caller { addr - 1 } else { addr };
            let Some((name, offset)) = map.lookup(at) else {
                continue;
            };
            self.new_label_syms.push(SymbolEntry {
                kind: StackKind::User,
                tgid,
                addr,
                name: Some(name.to_string()),
                offset: offset + (addr - at),
                module: None,
                build_id: None,
                file_offset: None,
            });
            self.unwinder.counts.jit_named_at_exit += 1;
        }
    }

    /// The address of label frame `text` in process `tgid` (a symbol entry is added once).
    fn label(&mut self, tgid: Tid, text: String) -> u64 {
        let next = UNWIND_LABEL_BASE + self.labels.len() as u64;
        let new_syms = &mut self.new_label_syms;
        *self
            .labels
            .entry((tgid, text))
            .or_insert_with_key(|(tgid, text)| {
                new_syms.push(SymbolEntry {
                    kind: StackKind::User,
                    tgid: *tgid,
                    addr: next,
                    name: Some(text.clone()),
                    offset: 0,
                    module: None,
                    build_id: None,
                    file_offset: None,
                });
                next
            })
    }

    /// A goroutine record (`EV_GO`): the binary's slot and the event, None when malformed
    /// (the argument word missing).
    pub(crate) fn go_event(&mut self, e: &RawEv, pool: &[u64]) -> Option<(usize, GoEvent)> {
        let at = e.frames_at as usize;
        if e.nk != 1 {
            return None;
        }
        let arg = *pool.get(at)?;
        let uf = pool.get(at + 1..at + 1 + e.nu as usize)?;
        let g = e.go();
        let ready = e.aux == raw::GO_READY;
        self.cur_ts = e.ts;
        let ev = GoEvent {
            ts: e.ts,
            cpu: e.cpu as u32,
            tid: g.tid,
            tgid: g.tgid,
            kind: if ready {
                GoEventKind::Ready
            } else {
                GoEventKind::Park
            },
            goid: goid(g.goid_lo, g.goid_hi),
            waker: if ready { arg } else { 0 },
            reason: if ready { 0 } else { arg as u8 },
            stack: self.stack(e.ust, StackKind::User, g.tgid, uf),
        };
        Some((e.kst as usize, ev))
    }

    /// A goroutine execute record (`EV_GO`, `GO_EXECUTE`): the binary's slot and the
    /// execute.
    pub(crate) fn go_execute(&mut self, e: &RawEv) -> (usize, GoExecute) {
        let g = e.go();
        self.cur_ts = e.ts;
        let x = GoExecute {
            ts: e.ts,
            cpu: e.cpu as u32,
            tid: g.tid,
            tgid: g.tgid,
            goid: goid(g.goid_lo, g.goid_hi),
        };
        (e.kst as usize, x)
    }

    /// A Go stop-the-world record (`EV_GO`, `GO_STW_STOP` / `GO_STW_START`): the binary's
    /// slot and the record.
    pub(crate) fn go_stw(&mut self, e: &RawEv, pool: &[u64]) -> (usize, GoStw) {
        // The same header fields as an execute record's.
        let (slot, x) = self.go_execute(e);
        let x = GoStw {
            ts: x.ts,
            cpu: x.cpu,
            tid: x.tid,
            tgid: x.tgid,
            goid: x.goid,
            stop: e.aux == raw::GO_STW_STOP,
            reason: match e.nk {
                1 => pool.get(e.frames_at as usize).map_or(0, |&a| a as u8),
                _ => 0,
            },
        };
        (slot, x)
    }

    /// `history`: the mapping history, for unwinding stacks of processes that have exited.
    pub(crate) fn convert(
        &mut self,
        e: &RawEv,
        pool: &[u64],
        bytes: &[u8],
        history: Option<&MappingHistory>,
    ) -> Event {
        self.cur_ts = e.ts;
        if e.kind == raw::EV_COMM && e.aux == CommReason::Exec as u8 {
            self.unwinder.forget(e.task().tgid);
            self.java_frames.forget(e.task().tgid);
        }
        let unwound = e.has_copy && {
            let at = e.frames_at as usize + e.nk as usize;
            let fp = pool.get(at..at + e.nu as usize).unwrap_or(&[]);
            self.unwind_copy(e, fp, bytes, history)
        };
        let unwound_frames = std::mem::take(&mut self.unwound);
        let ev = self.convert_frames(e, pool, unwound.then_some(&unwound_frames[..]), history);
        self.unwound = unwound_frames;
        ev
    }

    fn convert_frames(
        &mut self,
        e: &RawEv,
        pool: &[u64],
        unwound: Option<&[u64]>,
        history: Option<&MappingHistory>,
    ) -> Event {
        let at = e.frames_at as usize;
        let kf = &pool[at..at + e.nk as usize];
        let uf = &pool[at + e.nk as usize..at + e.nk as usize + e.nu as usize];
        let uf = unwound.unwrap_or(uf);
        if e.kind == raw::EV_WAKING && e.kst == raw::ST_SKIPPED {
            // lazy mode: skipped waker stacks are counted here, skipped off-CPU stacks in BPF
            self.skipped += 1;
        }
        match e.kind {
            raw::EV_SWITCH => {
                let sw = e.switch();
                Event::Switch(Switch {
                    ts: e.ts,
                    cpu: e.cpu as u32,
                    prev_tid: sw.prev_tid,
                    prev_state: sw.prev_state,
                    next_tid: sw.next_tid,
                    prev_kstack: self.offcpu_kstack(e.kst, kf),
                    prev_ustack: self.stack(e.ust, StackKind::User, sw.prev_tgid, uf),
                })
            }
            raw::EV_WAKING => {
                let wk = e.waking();
                let mut context = WakeContext::from_u8(e.aux).unwrap_or(WakeContext::Task);
                let mut code = wk.source;
                if matches!(context, WakeContext::SoftIrq | WakeContext::SoftIrqTask) {
                    (context, code) = self.softirq_checked(e, kf, context);
                }
                // The format ties the source to the context (Waking::unencodable): a task
                // waking has none, a task-context softirq always names its vector.
                let code = match context {
                    WakeContext::Task => 0,
                    WakeContext::SoftIrqTask if code == 0 => {
                        raw::SRC_SOFTIRQ | raw::SRC_SOFTIRQ_UNKNOWN
                    }
                    _ => code,
                };
                Event::Waking(Waking {
                    ts: e.ts,
                    cpu: e.cpu as u32,
                    waker_tid: wk.waker_tid,
                    target_tid: wk.target_tid,
                    context,
                    source: self.irq(code),
                    waker_kstack: self.stack(e.kst, StackKind::Kernel, 0, kf),
                    waker_ustack: self.stack(e.ust, StackKind::User, wk.waker_tgid, uf),
                })
            }
            raw::EV_WAKEUP_NEW => {
                let wn = e.wakeup_new();
                // A new process may have the pid of one that exited.
                self.java_frames.seen(wn.child_tgid);
                Event::WakeupNew(WakeupNew {
                    ts: e.ts,
                    cpu: e.cpu as u32,
                    parent_tid: wn.parent_tid,
                    child_tid: wn.child_tid,
                    child_tgid: wn.child_tgid,
                })
            }
            raw::EV_COMM => {
                let comm = Comm(e.comm);
                let t = e.task();
                self.java_frames.seen(t.tgid);
                self.cgroup_member(e.ts, t.tid, e.cgid);
                if self.tasks.insert(t.tid) {
                    self.new_tasks.push(TaskEntry {
                        tid: t.tid,
                        tgid: t.tgid,
                        comm,
                        kernel_thread: t.flags & raw::COMM_KTHREAD != 0,
                    });
                }
                Event::Comm(TaskComm {
                    ts: e.ts,
                    tid: t.tid,
                    tgid: t.tgid,
                    comm,
                    reason: CommReason::from_u8(e.aux).unwrap_or(CommReason::Seen),
                })
            }
            raw::EV_EXIT => {
                let t = e.task();
                if t.tid == t.tgid {
                    self.name_jit_frames(t.tgid, history);
                    self.unwinder.forget(t.tgid);
                    self.code_names.forget(t.tgid);
                    self.java_frames.exited(t.tgid);
                }
                self.task_cgroup.remove(&t.tid);
                // The BPF side forgot it at the exit too (a reused tid learns its own).
                self.learned.remove(&t.tid);
                Event::Exit(Exit {
                    ts: e.ts,
                    tid: t.tid,
                    tgid: t.tgid,
                })
            }
            raw::EV_SAMPLE => {
                let mut counts = std::mem::take(&mut self.samples);
                let ev =
                    counts.convert(e, kf, uf, |st, kind, tgid, f| self.stack(st, kind, tgid, f));
                self.samples = counts;
                ev
            }
            _ => Event::OffCpuStacks(OffCpuStacks {
                ts: e.ts,
                tid: e.task().tid,
                kstack: self.stack(e.kst, StackKind::Kernel, 0, kf),
                ustack: self.stack(e.ust, StackKind::User, e.task().tgid, uf),
            }),
        }
    }
}

/// Holds events until they are older than the drain bound, so that the slightly
/// out-of-order ring buffer (shared by all CPUs) is written in time order.
pub(crate) struct Reorder {
    pub(crate) buf: Vec<Event>,
    pub(crate) last_ts: u64,
    pub(crate) out_of_order: u64,
}

impl Reorder {
    /// Push every buffered event with `ts <= bound` (all when bound is u64::MAX).
    pub(crate) fn drain(
        &mut self,
        bound: u64,
        sink: &mut impl TraceSink,
        by_kind: &mut [u64; EventKind::COUNT],
    ) -> Result<()> {
        if !self.buf.is_sorted_by_key(|e| e.ts()) {
            self.buf.sort_by_key(|e| e.ts());
        }
        let n = self.buf.partition_point(|e| e.ts() <= bound);
        let mut late: Option<Lost> = None;
        for ev in self.buf.drain(..n) {
            if ev.ts() < self.last_ts {
                // Arrived after newer events were already written: count it, never
                // reorder the file.
                self.out_of_order += 1;
                let l = late.get_or_insert(Lost {
                    ts: self.last_ts,
                    cpu: u32::MAX,
                    count: 0,
                    cause: LostCause::OutOfOrder,
                });
                l.count += 1;
                continue;
            }
            self.last_ts = ev.ts();
            by_kind[ev.kind() as usize] += 1;
            sink.push(&ev)?;
        }
        if let Some(mut l) = late {
            l.ts = self.last_ts;
            by_kind[EventKind::Lost as usize] += 1;
            sink.push(&Event::Lost(l))?;
        }
        Ok(())
    }
}

pub(crate) fn lost_counts(
    conv: &Converter,
    counters: &[u64; raw::C_NR],
    out_of_order: u64,
) -> LostCounts {
    LostCounts {
        ringbuf_full: counters[raw::C_RB_FULL as usize],
        out_of_order,
        stacks_skipped: counters[raw::C_SKIP_OFFCPU as usize] + conv.skipped,
        ..conv.lost.clone()
    }
}

/// A goroutine id as the BPF side splits it into two 32-bit halves (bpf/chainrec_abi.h).
fn goid(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | u64::from(hi) << 32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learned_windows_start_below_the_address_and_the_lowest_goes_when_full() {
        let w = u64::from(raw::UCOPY_WINDOW);
        let mut l = LearnedStack::default();
        assert!(l.is_empty());
        l.add_window(0x7000_1003);
        assert_eq!(l.windows, [0x7000_1000 - WINDOW_BELOW, 0, 0]);
        // Inside that window: nothing new. Its last word: still inside; past it: new.
        let first = l.windows[0];
        l.add_window(first + w - 8);
        assert_eq!(l.windows[1], 0);
        assert!(l.covers(first + w - 8) && !l.covers(first + w - 7));
        for a in [0x7000_9000, 0x7000_5000] {
            l.add_window(a);
        }
        let at = |a: u64| a - WINDOW_BELOW;
        assert_eq!(l.windows, [first, at(0x7000_5000), at(0x7000_9000)]);
        // Full: the walk got past the lowest to need this one.
        l.add_window(0x7000_b000);
        assert_eq!(
            l.windows,
            [at(0x7000_5000), at(0x7000_9000), at(0x7000_b000)]
        );
        assert!(!l.is_empty());
    }

    fn sw(ts: u64) -> Event {
        Event::Switch(Switch {
            ts,
            cpu: 0,
            prev_tid: 1,
            prev_state: 1,
            next_tid: 2,
            prev_kstack: StackId::NONE,
            prev_ustack: StackId::NONE,
        })
    }

    #[test]
    fn reorder_sorts_and_counts_late_events() {
        let mut r = Reorder {
            buf: vec![sw(30), sw(10), sw(20), sw(50)],
            last_ts: 0,
            out_of_order: 0,
        };
        let mut mem = MemTrace::default();
        let mut k = [0u64; EventKind::COUNT];
        r.drain(30, &mut mem, &mut k).unwrap();
        let ts: Vec<u64> = mem.events.iter().map(|e| e.ts()).collect();
        assert_eq!(ts, vec![10, 20, 30]);
        // 25 arrives after 30 was written: counted, not written; 50 and 60 go out.
        r.buf.push(sw(25));
        r.buf.push(sw(60));
        r.drain(u64::MAX, &mut mem, &mut k).unwrap();
        let ts: Vec<u64> = mem.events.iter().map(|e| e.ts()).collect();
        assert_eq!(ts, vec![10, 20, 30, 50, 60, 60]);
        assert_eq!(r.out_of_order, 1);
        match mem.events[5] {
            Event::Lost(l) => {
                assert_eq!((l.count, l.cause, l.ts), (1, LostCause::OutOfOrder, 60));
            }
            e => panic!("expected a Lost marker, got {e:?}"),
        }
        assert_eq!(k[EventKind::Switch as usize], 5);
        assert_eq!(k[EventKind::Lost as usize], 1);
    }

    #[test]
    fn converter_dedups_stacks_and_maps_statuses() {
        let mut c = Converter::new(KernelSymbols::default());
        let pool = vec![0xffff_ffff_8100_0010u64, 0xffff_ffff_8100_0020, 0x4000_1000];
        let mut e = RawEv {
            kind: raw::EV_WAKING,
            kst: raw::ST_PRESENT,
            ust: raw::ST_PRESENT,
            nk: 2,
            nu: 1,
            args: raw::EvArgs {
                wk: raw::ev_waking {
                    waker_tid: 5,
                    target_tid: 6,
                    source: 0,
                    waker_tgid: 5,
                },
            },
            ..Default::default()
        };
        let Event::Waking(w1) = c.convert(&e, &pool, &[], None) else {
            panic!("not a waking")
        };
        assert_eq!(w1.waker_kstack, StackId(StackId::FIRST_REAL));
        assert_eq!(w1.waker_ustack, StackId(StackId::FIRST_REAL + 1));
        let Event::Waking(w2) = c.convert(&e, &pool, &[], None) else {
            panic!("not a waking")
        };
        assert_eq!(
            (w2.waker_kstack, w2.waker_ustack),
            (w1.waker_kstack, w1.waker_ustack)
        );
        assert_eq!(c.new_stacks.len(), 2);
        assert_eq!(c.new_kaddrs.len(), 2);
        assert_eq!(c.new_uaddrs[&5], vec![0x4000_1000]);
        // same user frames in another process: a different stack
        e.args.wk.waker_tgid = 7;
        let Event::Waking(w3) = c.convert(&e, &pool, &[], None) else {
            panic!("not a waking")
        };
        assert_eq!(w3.waker_ustack, StackId(StackId::FIRST_REAL + 2));
        e.kst = raw::ST_FAILED;
        e.ust = raw::ST_UPREEMPT;
        let Event::Waking(w4) = c.convert(&e, &pool, &[], None) else {
            panic!("not a waking")
        };
        assert_eq!(
            (w4.waker_kstack, w4.waker_ustack),
            (StackId::FAILED, StackId::USER_PREEMPTED)
        );
        assert_eq!(c.lost.kernel_stack_failed, 1);
        assert_eq!(c.lost.user_stacks_preempted, 1);
        // present but empty counts as failed
        e.kst = raw::ST_PRESENT;
        e.nk = 0;
        e.nu = 0;
        e.ust = raw::ST_SKIPPED;
        let Event::Waking(w5) = c.convert(&e, &pool, &[], None) else {
            panic!("not a waking")
        };
        assert_eq!(
            (w5.waker_kstack, w5.waker_ustack),
            (StackId::FAILED, StackId::SKIPPED)
        );
        assert_eq!(c.lost.kernel_stack_failed, 2);
    }

    #[test]
    fn jit_frames_are_named_from_the_perf_map_at_the_process_exit() {
        let dir = std::env::temp_dir().join(format!("chainrec-jit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Written at exit (-XX:+DumpPerfMapAtExit): after the frames were first symbolized.
        std::fs::write(
            dir.join("perf-77.map"),
            "10000 100 LQueueDemo;::sink\n10100 100 LQueueDemo;::relay\n",
        )
        .unwrap();
        let mut c = Converter::new(KernelSymbols::default());
        c.perf_map_dir = dir.clone();
        // A leaf, a return address (named by its call instruction: the end of `sink` is
        // `sink`), one outside the map, one not yet symbolized (left to the symbolizer).
        c.jit_addrs.insert(
            77,
            vec![
                (0x10010, false),
                (0x10100, true),
                (0x30000, false),
                (0x10120, false),
            ],
        );
        c.new_uaddrs.insert(77, vec![0x10120]);
        let e = RawEv {
            kind: raw::EV_EXIT,
            args: raw::EvArgs {
                task: raw::ev_task {
                    tid: 77,
                    tgid: 77,
                    flags: 0,
                    unused: 0,
                },
            },
            ..Default::default()
        };
        c.convert(&e, &[], &[], None);
        let named: Vec<(u64, &str, u64)> = c
            .new_label_syms
            .iter()
            .map(|s| (s.addr, s.name.as_deref().unwrap(), s.offset))
            .collect();
        assert_eq!(
            named,
            vec![
                (0x10010, "LQueueDemo;::sink", 0x10),
                (0x10100, "LQueueDemo;::sink", 0x100)
            ]
        );
        assert_eq!(c.unwinder.counts.jit_named_at_exit, 2);
        assert!(c.jit_addrs.is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn irq_sources_get_stable_ids() {
        let mut c = Converter::new(KernelSymbols::default());
        assert_eq!(c.irq(0), 0);
        assert_eq!(c.irq(raw::SRC_TIMER), 1);
        assert_eq!(c.irq(raw::SRC_SOFTIRQ | 3), 2);
        assert_eq!(c.irq(raw::SRC_TIMER), 1);
        let names: Vec<&str> = c.new_irqs.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["timer", "NET_RX"]);
    }
}

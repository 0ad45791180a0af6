//! Loading the BPF object: read-only configuration, the lazy user-stack path and its
//! fallback (task_work, else sys_exit), the optional `do_softirq` programs and their
//! ordered attachment, and libbpf error reporting.

use crate::ksyms::KernelSymbols;
use crate::options::{Fallback, RecordOptions};
use crate::skel::{ChainrecSkel, ChainrecSkelBuilder};
use crate::{RecordError, Result};
use chainrec_format::StackMode;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject};
use std::mem::MaybeUninit;

/// Recent libbpf messages (kept instead of printed; the tail is attached to load errors).
static LIBBPF_LOG: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn libbpf_print(_level: libbpf_rs::PrintLevel, msg: String) {
    if let Ok(mut log) = LIBBPF_LOG.lock() {
        if log.len() >= 64 {
            log.remove(0);
        }
        log.push(msg.trim_end().to_string());
    }
}

pub(crate) fn bpf_err(stage: &'static str, e: libbpf_rs::Error) -> RecordError {
    let detail = format!("{e:#}");
    // EACCES is also how the verifier rejects a program: as root it is never a missing
    // permission, and the verifier's last lines are what the user needs to see.
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let perm = (matches!(e.kind(), libbpf_rs::ErrorKind::PermissionDenied) && !root)
        || detail.contains("Operation not permitted")
        || detail.contains("EPERM");
    if perm {
        RecordError::Permission { source: e }
    } else {
        let log = LIBBPF_LOG.lock().map(|l| l.clone()).unwrap_or_default();
        let tail: Vec<&str> = log
            .iter()
            .rev()
            .take(12)
            .rev()
            .map(String::as_str)
            .collect();
        RecordError::Bpf {
            stage,
            libbpf_log: tail.join(" | "),
            source: e,
        }
    }
}

/// The verifier's reason in the last program load log libbpf printed: its last lines
/// before the statistics (`verification time`, `processed N insns`), at most two.
fn last_verifier_reason() -> Option<String> {
    let log = LIBBPF_LOG.lock().ok()?;
    let text = log
        .iter()
        .rev()
        .find(|m| m.contains("BEGIN PROG LOAD LOG"))?;
    let body = text.split_once("BEGIN PROG LOAD LOG")?.1;
    let body = body.split("END PROG LOAD LOG").next().unwrap_or(body);
    let lines: Vec<&str> = body
        .lines()
        .map(|l| l.trim().trim_matches('-').trim())
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("verification time")
                && !l.starts_with("processed ")
                && !l.starts_with("stack depth")
        })
        .collect();
    let tail = &lines[lines.len().saturating_sub(2)..];
    (!tail.is_empty()).then(|| tail.join("; "))
}

pub(crate) fn prog_stats(fd: i32) -> (u64, u64) {
    // SAFETY: bpf_prog_info is plain old data; all-zero is valid.
    let mut info: libbpf_rs::libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info/len point to a valid buffer of `len` bytes; fd is a live program fd.
    let r = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if r != 0 {
        return (0, 0);
    }
    (info.run_time_ns, info.run_cnt)
}

/// `vm.mmap_min_addr`: no user mapping lies below it. None when unreadable or 0.
fn mmap_min_addr() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()?
        .trim()
        .parse()
        .ok()
        .filter(|&v: &u64| v > 0)
}

/// How lazy-mode user stacks are collected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UserStackPath {
    /// Not collected here (eager/none mode, or `--no-user-stacks`).
    Off,
    /// A BPF task_work callback scheduled at switch-in, run on the return to user space.
    TaskWork,
    /// The `sys_exit` tracepoint program (fallback).
    SysExit,
}

/// Open, configure and load the BPF object with the given lazy user-stack path.
#[allow(clippy::too_many_arguments)]
fn open_and_load<'obj>(
    open_obj: &'obj mut MaybeUninit<OpenObject>,
    opts: &RecordOptions,
    delta: &std::result::Result<i64, String>,
    rb_size: u32,
    path: UserStackPath,
    softirq_tracking: bool,
    irq_stack: Option<&IrqStackInfo>,
    quota_timers: (u64, u64),
) -> Result<ChainrecSkel<'obj>> {
    let builder = ChainrecSkelBuilder::default();
    let mut open = builder.open(open_obj).map_err(|e| bpf_err("open", e))?;
    {
        let ro = open
            .maps
            .rodata_data
            .as_deref_mut()
            .ok_or(RecordError::Skeleton(".rodata"))?;
        ro.stack_mode = match opts.stack_mode {
            StackMode::Lazy => crate::raw::MODE_LAZY.into(),
            StackMode::Eager => crate::raw::MODE_EAGER.into(),
            StackMode::None => crate::raw::MODE_NONE.into(),
        };
        ro.threshold_ns = opts.stack_threshold_ns;
        ro.wake_mark = rb_size as u64 / 4;
        ro.ucopy_ring_budget = rb_size as u64 / 2;
        ro.filter_enabled = !opts.pids.is_empty();
        ro.user_stacks = opts.user_stacks;
        ro.use_task_work = path == UserStackPath::TaskWork;
        ro.softirq_heuristic = !opts.no_softirq_tracking;
        ro.profile = opts.profile_bpf;
        ro.track_cgroups = !opts.no_cgroups;
        ro.user_stash = path != UserStackPath::Off && !opts.no_user_stash;
        ro.ucopy_max = if opts.user_stacks {
            opts.user_stack_copy_bytes
                .min(crate::options::DEFAULT_USER_STACK_COPY)
        } else {
            0
        };
        if let Some(i) = irq_stack {
            ro.have_irqstack = true;
            ro.irqstack_ptr_delta = i.ptr_delta;
            ro.irqstack_inuse_delta = i.inuse_delta;
            match i.softirq_code {
                Some((bh, ds)) => {
                    (ro.bh_enable_start, ro.bh_enable_end) = bh;
                    (ro.do_softirq_start, ro.do_softirq_end) = ds;
                }
                // No do_softirq to find on the irq stack: softirq wakings stay metal.
                None => ro.softirq_heuristic = false,
            }
        }
        if let Some(min) = mmap_min_addr() {
            ro.user_walk_shortcut = !opts.no_user_walk_shortcut;
            ro.verify_user_walk = opts.verify_user_walk_shortcut;
            ro.min_user_addr = min;
        }
        if let Ok(d) = delta {
            ro.preempt_delta = *d;
            ro.have_preempt_delta = true;
        }
        // CPU-quota refills: the CFS bandwidth timers' functions (0: no refill records).
        (ro.cfs_period_timer_fn, ro.cfs_slack_timer_fn) = quota_timers;
        if let Ok(d) = crate::btfinfo::ksoftirqd_delta() {
            ro.ksoftirqd_delta = d;
            ro.have_ksoftirqd_delta = true;
        }
    }
    open.maps
        .rb
        .set_max_entries(rb_size)
        .map_err(|e| bpf_err("open", e))?;
    if path != UserStackPath::TaskWork {
        open.maps
            .twmap
            .set_max_entries(1)
            .map_err(|e| bpf_err("open", e))?;
    }
    // Per-task state is preallocated (bpf/maps.bpf.h): room for every thread there is now,
    // twice over, and never less than the default.
    open.maps
        .tslots
        .set_max_entries(task_slots())
        .map_err(|e| bpf_err("open", e))?;
    if path != UserStackPath::SysExit {
        // Attaching sys_exit at all puts every syscall exit on the slow path.
        open.progs.on_sys_exit.set_autoload(false);
    }
    // The do_softirq programs are attached by hand, in order (see attach_softirq).
    open.progs.on_do_softirq.set_autoattach(false);
    open.progs.on_do_softirq_exit.set_autoattach(false);
    // The goroutine probes are attached per Go binary (crate::golang), or not loaded.
    open.progs.go_park.set_autoattach(false);
    open.progs.go_ready.set_autoattach(false);
    open.progs.go_netpoll.set_autoattach(false);
    if !crate::golang::GoProbes::wanted(&opts.go) {
        open.progs.go_park.set_autoload(false);
        open.progs.go_ready.set_autoload(false);
        open.progs.go_netpoll.set_autoload(false);
    }
    if !softirq_tracking {
        open.progs.on_do_softirq.set_autoload(false);
        open.progs.on_do_softirq_exit.set_autoload(false);
    }
    if opts.samples.is_none() {
        open.progs.on_sample.set_autoload(false);
    }
    if verifier_stats() {
        for mut prog in open.open_object_mut().progs_mut() {
            prog.set_log_level(4); // BPF_LOG_STATS: the totals only, no per-instruction log
        }
    }
    open.load().map_err(|e| bpf_err("load", e))
}

/// `CHAINREC_BPF_VERIFIER_STATS=1`: print the verifier's totals for every program loaded
/// (instructions processed, states, time), to measure what a BPF change costs at load
/// (docs/RECORDER.md, "Load time").
fn verifier_stats() -> bool {
    std::env::var_os("CHAINREC_BPF_VERIFIER_STATS").is_some_and(|v| v == "1")
}

/// With [`verifier_stats`], libbpf's debug messages come here too: the load logs are
/// printed on one line each, everything else is kept as usual.
fn libbpf_print_stats(level: libbpf_rs::PrintLevel, msg: String) {
    if let Some(rest) = msg.split_once("-- BEGIN PROG LOAD LOG --") {
        let name = rest.0.trim_start_matches("libbpf: ").trim_end_matches(": ");
        let log = rest.1.replace("-- END PROG LOAD LOG --", "");
        let log: Vec<&str> = log
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        eprintln!("chainrec: verifier: {name}: {}", log.join("; "));
    } else if level != libbpf_rs::PrintLevel::Debug {
        libbpf_print(level, msg);
    }
}

/// Entries of the preallocated per-task state map (`tslots`): twice the threads alive now
/// plus room for churn, at least [`MIN_TASK_SLOTS`], at most the kernel's pid limit. A full
/// map is counted (`C_TSLOT_FULL`) and reported, never silent.
pub(crate) fn task_slots() -> u32 {
    let threads = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
                })
                .map(|e| std::fs::read_dir(e.path().join("task")).map_or(1, |t| t.count()))
                .sum::<usize>()
        })
        .unwrap_or(0);
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(4 << 20);
    (2 * threads + 16384)
        .max(MIN_TASK_SLOTS)
        .min(pid_max.max(MIN_TASK_SLOTS)) as u32
}

/// The smallest per-task state map: ~8 MiB of kernel memory.
pub(crate) const MIN_TASK_SLOTS: usize = 65536;

/// What the BPF side needs to tell softirqs run by a task from those at an interrupt's
/// exit by the irq stack (`softirq_by_irqstack` in bpf/wake_context.bpf.h).
pub(crate) struct IrqStackInfo {
    ptr_delta: i64,
    inuse_delta: i64,
    /// The code ranges of `__local_bh_enable_ip` and `do_softirq`; `None` on kernels
    /// without `do_softirq` (PREEMPT_RT runs softirqs in threads), where the irq stack
    /// still tells wakings at an interrupt's exit (`irq_exit_waking`).
    softirq_code: Option<((u64, u64), (u64, u64))>,
}

impl IrqStackInfo {
    fn find(ksyms: &KernelSymbols) -> std::result::Result<IrqStackInfo, String> {
        if !cfg!(target_arch = "x86_64") {
            return Err("irq stack layout known on x86_64 only".into());
        }
        let (ptr_delta, inuse_delta) = crate::btfinfo::irq_stack_deltas()?;
        let range = |n: &str| ksyms.range(n).ok_or(());
        Ok(IrqStackInfo {
            ptr_delta,
            inuse_delta,
            softirq_code: range("__local_bh_enable_ip")
                .and_then(|bh| Ok((bh, range("do_softirq")?)))
                .ok(),
        })
    }
}

/// Attach the `do_softirq` fexit program, then the fentry one (so that the per-CPU flag the
/// entry sets is always cleared), then tell the programs they may trust it. The links
/// must be dropped in the reverse order: entry first ([`SoftirqLinks`] does).
fn attach_softirq(skel: &mut ChainrecSkel<'_>) -> std::result::Result<SoftirqLinks, String> {
    let exit = skel
        .progs
        .on_do_softirq_exit
        .attach_trace()
        .map_err(|e| format!("fexit do_softirq: {e}"))?;
    let entry = skel
        .progs
        .on_do_softirq
        .attach_trace()
        .map_err(|e| format!("fentry do_softirq: {e}"))?;
    let bss = skel
        .maps
        .bss_data
        .as_deref_mut()
        .ok_or("skeleton has no .bss")?;
    bss.sirq_tracked = true;
    Ok(SoftirqLinks {
        entry: Some(entry),
        _exit: Some(exit),
    })
}

/// The `do_softirq` links; fields drop in declaration order: the entry program first.
#[derive(Default)]
pub(crate) struct SoftirqLinks {
    entry: Option<libbpf_rs::Link>,
    _exit: Option<libbpf_rs::Link>,
}

impl SoftirqLinks {
    fn attached(&self) -> bool {
        self.entry.is_some()
    }
}

/// A loaded (not yet attached) BPF object and what loading decided.
pub(crate) struct Loaded<'obj> {
    /// The skeleton, loaded, with the `-p` filter set up.
    pub skel: ChainrecSkel<'obj>,
    /// The lazy user-stack path that loaded.
    pub path: UserStackPath,
    /// How lazy user stacks are taken, for the summary and metadata.
    pub user_stack_method: String,
    /// Whether the `do_softirq` programs loaded (they are attached by [`attach_softirq`]).
    pub softirq_tracking: bool,
    /// Why softirq tracking is off or was refused (empty when it loaded).
    pub softirq_note: String,
    /// How the waking context is read, for the summary and metadata.
    pub context_method: String,
    /// The kallsyms snapshot taken before loading.
    pub ksyms: KernelSymbols,
    /// The irq-stack layout for the BPF softirq heuristic, or why it is unknown.
    pub irq_stack: std::result::Result<IrqStackInfo, String>,
    /// Kernel features this load could not use (the `do_softirq` one is added at attach).
    pub fallbacks: Vec<Fallback>,
}

/// Load the BPF object into one of `open_objs`: choose the lazy user-stack path
/// (task_work when the kernel has the kfunc, else sys_exit) and the optional `do_softirq`
/// programs; on a rejection retry without the optional part that was rejected (the
/// `do_softirq` programs, then the task_work path), saying why. Sets up the `-p` filter.
pub(crate) fn load<'obj>(
    open_objs: &'obj mut [MaybeUninit<OpenObject>; 3],
    opts: &RecordOptions,
    rb_size: u32,
) -> Result<Loaded<'obj>> {
    if verifier_stats() {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, libbpf_print_stats)));
    } else {
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Warn, libbpf_print)));
    }
    let delta = if opts.force_context_fallback {
        Err("forced by option".to_string())
    } else {
        crate::btfinfo::preempt_count_delta()
    };
    // Lazy user stacks: task_work when the kernel has the kfunc, else sys_exit. If the
    // task_work variant fails to load (verifier), fall back to sys_exit and say why.
    let lazy_user = opts.stack_mode == StackMode::Lazy && opts.user_stacks;
    let (mut path, mut path_note) = if !lazy_user {
        (UserStackPath::Off, String::new())
    } else if opts.force_sys_exit_user_stacks {
        (UserStackPath::SysExit, "forced by option".to_string())
    } else {
        match crate::btfinfo::kernel_has_func(crate::btfinfo::TASK_WORK_KFUNC) {
            Ok(true) => (UserStackPath::TaskWork, String::new()),
            Ok(false) => (
                UserStackPath::SysExit,
                format!("kernel has no {}", crate::btfinfo::TASK_WORK_KFUNC),
            ),
            Err(e) => (UserStackPath::SysExit, e),
        }
    };
    // Snapshot kernel symbols before starting (module loads during recording are rare).
    let ksyms = KernelSymbols::load().unwrap_or_default();
    let irq_stack = IrqStackInfo::find(&ksyms);
    let quota_timers = match (
        ksyms.range("sched_cfs_period_timer"),
        ksyms.range("sched_cfs_slack_timer"),
    ) {
        (Some(p), s) => (p.0, s.map_or(0, |s| s.0)),
        (None, _) => (0, 0),
    };
    // Softirq wakings told apart by fentry/fexit on do_softirq (docs/RECORDER.md). Without
    // them (no such function, no trampolines, rejected), softirq wakings stay metal.
    let (mut softirq_tracking, mut softirq_note) = if opts.no_softirq_tracking {
        (false, "off (--no-softirq-tracking)".to_string())
    } else {
        match crate::btfinfo::kernel_has_func("do_softirq") {
            Ok(true) => (true, String::new()),
            Ok(false) => (false, "kernel BTF has no do_softirq".to_string()),
            Err(e) => (false, e),
        }
    };
    let mut slots = open_objs.iter_mut();
    let skel = loop {
        let slot = slots.next().expect("at most three load attempts");
        match open_and_load(
            slot,
            opts,
            &delta,
            rb_size,
            path,
            softirq_tracking,
            irq_stack.as_ref().ok(),
            quota_timers,
        ) {
            Ok(s) => break s,
            // The optional do_softirq programs first: whatever failed (this kernel refuses
            // every fentry program with EPERM), retry without them.
            Err(e) if softirq_tracking => {
                softirq_tracking = false;
                softirq_note = match e {
                    RecordError::Permission { .. } => "refused by the kernel (EPERM)".into(),
                    e => format!("rejected: {e}"),
                };
            }
            Err(e @ RecordError::Bpf { .. }) if path == UserStackPath::TaskWork => {
                path = UserStackPath::SysExit;
                let source =
                    std::error::Error::source(&e).map_or(String::new(), |s| format!(": {s:#}"));
                path_note = format!("task_work program rejected: {e}{source}");
            }
            // Some kernels refuse the task_work kfunc's callback with EPERM, not a verifier
            // error (6.18.44: "sleepable callback in a program that is not sleepable"):
            // retry with the sys_exit path, which a real lack of permission fails too.
            Err(RecordError::Permission { .. }) if path == UserStackPath::TaskWork => {
                path = UserStackPath::SysExit;
                path_note = match last_verifier_reason() {
                    Some(why) => format!("task_work program refused (EPERM): {why}"),
                    None => "task_work program refused (EPERM)".to_string(),
                };
            }
            Err(e) => return Err(e),
        }
    };
    let user_stack_method = match path {
        UserStackPath::Off if opts.stack_mode != StackMode::Lazy => {
            "none (lazy mode only)".to_string()
        }
        UserStackPath::Off => "none (--no-user-stacks)".to_string(),
        UserStackPath::TaskWork => format!(
            "task_work ({} at switch-in, callback on return to user space)",
            crate::btfinfo::TASK_WORK_KFUNC
        ),
        UserStackPath::SysExit => format!("sys_exit tracepoint ({path_note})"),
    };
    for pid in &opts.pids {
        skel.maps
            .filter_tgids
            .update(&pid.to_ne_bytes(), &[1u8], MapFlags::ANY)
            .map_err(|e| bpf_err("filter setup", e))?;
    }
    let context_method = match &delta {
        Ok(d) => format!("preempt_count at runqueues{d:+}"),
        Err(e) => format!("irq tracepoints fallback ({e})"),
    };
    let fallbacks = load_fallbacks(&delta, lazy_user, path, &path_note, &irq_stack);
    Ok(Loaded {
        skel,
        path,
        user_stack_method,
        softirq_tracking,
        softirq_note,
        context_method,
        ksyms,
        irq_stack,
        fallbacks,
    })
}

/// The features a load went without, from what it decided (docs/RECORDER.md, "Kernel
/// support"): each with its replacement and what that costs.
fn load_fallbacks(
    delta: &std::result::Result<i64, String>,
    lazy_user: bool,
    path: UserStackPath,
    path_note: &str,
    irq_stack: &std::result::Result<IrqStackInfo, String>,
) -> Vec<Fallback> {
    let mut out = Vec::new();
    if lazy_user && path == UserStackPath::SysExit {
        out.push(Fallback {
            feature: "task_work user stacks",
            reason: path_note.to_string(),
            instead: "the sys_exit tracepoint takes lazy user stacks",
            cost: "every system call exit takes the kernel's slow path while recording \
                   (4-8 % on the pipe benchmark)",
        });
    }
    match delta {
        Err(e) => out.push(Fallback {
            feature: "preempt-count waking context",
            reason: e.clone(),
            instead: "the interrupt tracepoints' per-CPU state gives the waking context",
            cost: "wakings from interrupts without a tracepoint (IPIs, the APIC timer \
                   outside hrtimer callbacks) are taken for task wakings",
        }),
        Ok(_) => {
            if let Ok(false) = crate::btfinfo::kernel_has_func("bpf_rdonly_cast") {
                out.push(Fallback {
                    feature: "bpf_rdonly_cast",
                    reason: "kernel has no bpf_rdonly_cast kfunc (Linux 6.2+)".into(),
                    instead: "bpf_probe_read_kernel reads the preempt count",
                    cost: "about 60 ns more per waking",
                });
            }
        }
    }
    if let Err(e) = crate::btfinfo::ksoftirqd_delta() {
        out.push(Fallback {
            feature: "ksoftirqd pointer",
            reason: e,
            instead: "softirq wakings in ksoftirqd are not told apart",
            cost: "softirqs run by ksoftirqd are labelled like those at an interrupt's exit",
        });
    }
    if let Err(e) = irq_stack {
        out.push(Fallback {
            feature: "irq stack",
            reason: e.clone(),
            instead: "the kernel stack, where one was taken, decides",
            cost: "softirq wakings without a kernel stack stay metal, and wakings at an \
                   interrupt's exit (ksoftirqd, PREEMPT_RT's ktimers) from an idle CPU \
                   are taken for the idle task's",
        });
    }
    out
}

/// Attach the `do_softirq` programs when they loaded; the links, and how softirq wakings
/// are told apart (for the summary and metadata).
pub(crate) fn attach_softirq_tracking(
    loaded: &mut Loaded<'_>,
    opts: &RecordOptions,
) -> (SoftirqLinks, String) {
    let mut softirq_links = SoftirqLinks::default();
    let mut softirq_note = std::mem::take(&mut loaded.softirq_note);
    if loaded.softirq_tracking {
        match attach_softirq(&mut loaded.skel) {
            Ok(l) => softirq_links = l,
            Err(e) => softirq_note = format!("attach failed: {e}"),
        }
    }
    // A kernel without do_softirq (PREEMPT_RT) has nothing to track: no fallback.
    let has_do_softirq = !matches!(crate::btfinfo::kernel_has_func("do_softirq"), Ok(false));
    if !softirq_links.attached() && !opts.no_softirq_tracking && has_do_softirq {
        loaded.fallbacks.push(Fallback {
            feature: "fentry on do_softirq",
            reason: softirq_note.clone(),
            instead: if loaded
                .irq_stack
                .as_ref()
                .is_ok_and(|i| i.softirq_code.is_some())
            {
                "the saved stack pointer on the irq stack tells softirqs apart"
            } else {
                "softirqs a task runs itself are told apart by their kernel stack only"
            },
            cost: "none measured (0 disagreements with the kernel stack in the tests); \
                   an interrupt between local_bh_enable's check and do_softirq is \
                   credited to the interrupt",
        });
    }
    let softirq_method = if softirq_links.attached() {
        "fentry/fexit on do_softirq".to_string()
    } else if opts.no_softirq_tracking {
        format!("not told apart, softirq wakings stay metal ({softirq_note})")
    } else {
        match &loaded.irq_stack {
            Ok(i) if i.softirq_code.is_none() => format!(
                "not told apart: the kernel has no do_softirq (PREEMPT_RT runs softirqs in \
                 threads and in the tasks that enable bottom halves; fentry: {softirq_note})"
            ),
            Ok(_) => format!(
                "saved stack pointer on the irq stack, checked against the kernel stack where \
                 one was taken (fentry: {softirq_note})"
            ),
            Err(e) => format!(
                "not told apart ({e}; fentry: {softirq_note}): softirq wakings stay metal \
                 unless their kernel stack shows do_softirq"
            ),
        }
    };
    (softirq_links, softirq_method)
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::MapType;

    /// BPF helpers that allocate at their first use per object (with the create flag):
    /// task, cgroup, inode and socket local storage.
    const STORAGE_GET_HELPERS: [(i32, &str); 4] = [
        (156, "bpf_task_storage_get"),
        (210, "bpf_cgrp_storage_get"),
        (145, "bpf_inode_storage_get"),
        (107, "bpf_sk_storage_get"),
    ];

    /// docs/RECORDER.md, "No allocation in the scheduler path": every map of the object is
    /// allocated whole at creation, so no program allocates memory when it runs (inside
    /// `__schedule`, under the runqueue lock, where PREEMPT_RT's allocator locks sleep).
    /// Hash maps are preallocated and no program uses local storage. The object is only
    /// opened (parsed), not loaded: this needs no privileges.
    #[test]
    fn no_program_can_allocate() {
        let mut obj = MaybeUninit::uninit();
        let open = ChainrecSkelBuilder::default()
            .open(&mut obj)
            .expect("open the BPF object");
        let mut seen = 0;
        for map in open.open_object().maps() {
            let name = map.name().to_string_lossy().into_owned();
            let ty = map.map_type();
            assert!(
                !matches!(
                    ty,
                    MapType::TaskStorage
                        | MapType::CGrpStorage
                        | MapType::InodeStorage
                        | MapType::SkStorage
                ),
                "map {name} is local storage ({ty:?}), which allocates at a task's first use"
            );
            if matches!(
                ty,
                MapType::Hash | MapType::PercpuHash | MapType::HashOfMaps
            ) {
                assert_eq!(
                    map.map_flags() & libbpf_rs::libbpf_sys::BPF_F_NO_PREALLOC,
                    0,
                    "hash map {name} is not preallocated: an insert would allocate"
                );
            }
            assert_ne!(
                ty,
                MapType::LpmTrie,
                "map {name}: LPM tries allocate on insert"
            );
            seen += 1;
        }
        assert!(seen > 10, "only {seen} maps found in the object");
        for prog in open.open_object().progs() {
            let section = prog.section().to_string_lossy().into_owned();
            for insn in prog.insns() {
                // BPF_JMP | BPF_CALL with src_reg 0: a helper call, its id in imm.
                if insn.code == 0x85 && insn.src_reg() == 0 {
                    if let Some((_, helper)) =
                        STORAGE_GET_HELPERS.iter().find(|(id, _)| *id == insn.imm)
                    {
                        panic!("program {section} calls {helper}, which may allocate");
                    }
                }
            }
        }
    }
}

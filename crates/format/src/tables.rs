//! Tables carried by a trace: stacks, symbols, tasks, interrupt sources and recording
//! metadata. Everything needed to analyse a trace on another machine.

use crate::event::{Comm, StackId, Tid};
use crate::intern::Pool;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Whether a stack or frame is from kernel or user space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StackKind {
    /// Kernel stack (addresses in the kernel's address space).
    Kernel,
    /// User stack of a process (addresses in that process's address space).
    User,
}

/// One stack: content-deduplicated, so the same frames in the same address space have
/// one id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackEntry {
    /// Id (≥ [`StackId::FIRST_REAL`]).
    pub id: StackId,
    /// Kernel or user.
    pub kind: StackKind,
    /// Address space: the process (tgid) for user stacks, 0 for kernel stacks.
    pub tgid: Tid,
    /// Instruction addresses, leaf (innermost) first.
    pub frames: Vec<u64>,
}

/// Symbol information for one address, resolved at record time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SymbolEntry {
    /// Kernel or user address.
    pub kind: StackKind,
    /// Address space (tgid for user, 0 for kernel).
    pub tgid: Tid,
    /// The address as it appears in stacks.
    pub addr: u64,
    /// Function name (demangled), or None when unresolved.
    pub name: Option<String>,
    /// addr minus the symbol start.
    pub offset: u64,
    /// Path of the ELF module (user) or kernel module name (kernel; None = vmlinux).
    pub module: Option<String>,
    /// GNU build id of the module, when known, so a workstation can re-symbolize.
    pub build_id: Option<Vec<u8>>,
    /// Offset of the address inside the module file, when known.
    pub file_offset: Option<u64>,
}

/// One symbol of a trace's [`Symbols`] table: a [`SymbolEntry`] whose strings are
/// borrowed from the table (each distinct name, module path and build id is stored once
/// however many processes have it).
///
/// It decodes from a [`SymbolEntry`]'s bincode encoding (the trace format's), borrowing
/// its strings from the bytes decoded: what reading a table section does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
pub struct Symbol<'a> {
    /// Kernel or user address.
    pub kind: StackKind,
    /// Address space (tgid for user, 0 for kernel).
    pub tgid: Tid,
    /// The address as it appears in stacks.
    pub addr: u64,
    /// Function name (demangled), or None when unresolved.
    #[serde(borrow)]
    pub name: Option<&'a str>,
    /// addr minus the symbol start.
    pub offset: u64,
    /// Path of the ELF module (user) or kernel module name (kernel; None = vmlinux).
    #[serde(borrow)]
    pub module: Option<&'a str>,
    /// GNU build id of the module, when known. (bincode writes a `Vec<u8>` and a byte
    /// slice alike: length, then the bytes.)
    #[serde(borrow)]
    pub build_id: Option<&'a [u8]>,
    /// Offset of the address inside the module file, when known.
    pub file_offset: Option<u64>,
}

impl SymbolEntry {
    /// The entry as a [`Symbol`] borrowing its strings.
    pub fn as_symbol(&self) -> Symbol<'_> {
        Symbol {
            kind: self.kind,
            tgid: self.tgid,
            addr: self.addr,
            name: self.name.as_deref(),
            offset: self.offset,
            module: self.module.as_deref(),
            build_id: self.build_id.as_deref(),
            file_offset: self.file_offset,
        }
    }
}

impl Symbol<'_> {
    /// The owned entry (as a table section carries it).
    pub fn to_entry(&self) -> SymbolEntry {
        SymbolEntry {
            kind: self.kind,
            tgid: self.tgid,
            addr: self.addr,
            name: self.name.map(str::to_string),
            offset: self.offset,
            module: self.module.map(str::to_string),
            build_id: self.build_id.map(<[u8]>::to_vec),
            file_offset: self.file_offset,
        }
    }
}

/// A function name or module path of a [`Symbols`] table, by id: the table stores each
/// distinct string once, so two ids of one table are equal exactly when their strings are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SymbolStr(u32);

/// The strings of an address's symbol as [`SymbolStr`] ids ([`Symbols::names`]): to
/// compare symbols by name without reading the names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SymbolNames {
    /// Function name, or None when unresolved.
    pub name: Option<SymbolStr>,
    /// Module path (user) or kernel module name (kernel; None = vmlinux).
    pub module: Option<SymbolStr>,
    /// Offset of the address inside the module file, when known.
    pub file_offset: Option<u64>,
}

/// A symbol as the table stores it: its strings as pool ids (0 = none, else id + 1).
#[derive(Clone, Copy, Debug)]
struct StoredSymbol {
    offset: u64,
    file_offset: u64,
    name: u32,
    module: u32,
    build_id: u32,
    has_file_offset: bool,
}

/// The symbol table of a trace: symbols by (kind, address space, address), a later entry
/// for the same address replacing an earlier one. Function names and module paths are
/// interned in one pool and build ids in another, so the table's memory grows with its
/// addresses and its distinct strings, not with how many processes repeat them (a trace
/// of many short-lived processes of a few programs repeats the same names, paths and
/// build ids in each). A string no longer referenced after a replacement stays in its
/// pool.
#[derive(Clone, Debug, Default)]
pub struct Symbols {
    map: FxHashMap<(StackKind, Tid, u64), StoredSymbol>,
    strings: Pool<str>,
    build_ids: Pool<[u8]>,
}

impl Symbols {
    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the table has no symbol.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The symbol of `addr` in address space `tgid` (0 for kernel).
    pub fn get(&self, kind: StackKind, tgid: Tid, addr: u64) -> Option<Symbol<'_>> {
        self.map
            .get(&(kind, tgid, addr))
            .map(|s| self.view((kind, tgid, addr), s))
    }

    /// The strings of the symbol of `addr` in address space `tgid` (0 for kernel) as ids:
    /// [`Self::get`] without reaching the strings.
    pub fn names(&self, kind: StackKind, tgid: Tid, addr: u64) -> Option<SymbolNames> {
        let id = |v: u32| v.checked_sub(1).map(SymbolStr);
        self.map.get(&(kind, tgid, addr)).map(|s| SymbolNames {
            name: id(s.name),
            module: id(s.module),
            file_offset: s.has_file_offset.then_some(s.file_offset),
        })
    }

    /// The string `id` (an id this table gave: [`Self::names`]).
    pub fn str(&self, id: SymbolStr) -> &str {
        self.strings.get(id.0)
    }

    /// Whether the table has a symbol for `addr` in address space `tgid`.
    pub fn contains(&self, kind: StackKind, tgid: Tid, addr: u64) -> bool {
        self.map.contains_key(&(kind, tgid, addr))
    }

    /// Every symbol, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = Symbol<'_>> + '_ {
        self.map.iter().map(|(&k, s)| self.view(k, s))
    }

    /// Add `e`, replacing the symbol of the same (kind, tgid, addr).
    pub fn insert(&mut self, e: &SymbolEntry) {
        self.insert_symbol(&e.as_symbol());
    }

    /// Add `e` (its strings copied into the table), replacing the symbol of the same
    /// (kind, tgid, addr).
    pub fn insert_symbol(&mut self, e: &Symbol<'_>) {
        let s = StoredSymbol {
            offset: e.offset,
            file_offset: e.file_offset.unwrap_or(0),
            name: e.name.map_or(0, |v| self.strings.intern(v) + 1),
            module: e.module.map_or(0, |v| self.strings.intern(v) + 1),
            build_id: e.build_id.map_or(0, |v| self.build_ids.intern(v) + 1),
            has_file_offset: e.file_offset.is_some(),
        };
        self.map.insert((e.kind, e.tgid, e.addr), s);
    }

    /// Make room for `n` more symbols.
    pub fn reserve(&mut self, n: usize) {
        self.map.reserve(n);
    }

    fn view(&self, (kind, tgid, addr): (StackKind, Tid, u64), s: &StoredSymbol) -> Symbol<'_> {
        let string = |id: u32| (id > 0).then(|| self.strings.get(id - 1));
        Symbol {
            kind,
            tgid,
            addr,
            name: string(s.name),
            offset: s.offset,
            module: string(s.module),
            build_id: (s.build_id > 0).then(|| self.build_ids.get(s.build_id - 1)),
            file_offset: s.has_file_offset.then_some(s.file_offset),
        }
    }
}

/// Two tables are equal when they hold the same symbols (however their strings were
/// interned).
impl PartialEq for Symbols {
    fn eq(&self, other: &Symbols) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|s| other.get(s.kind, s.tgid, s.addr) == Some(s))
    }
}

impl Eq for Symbols {}

impl<'a> Extend<&'a SymbolEntry> for Symbols {
    fn extend<I: IntoIterator<Item = &'a SymbolEntry>>(&mut self, iter: I) {
        iter.into_iter().for_each(|e| self.insert(e));
    }
}

/// A task as known at the end of the recording (name changes are events).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskEntry {
    /// Thread id.
    pub tid: Tid,
    /// Thread group (process) id.
    pub tgid: Tid,
    /// Name at first sighting.
    pub comm: Comm,
    /// True for kernel threads (no user address space).
    pub kernel_thread: bool,
}

/// An interrupt source (the `source` of a [`crate::Waking`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IrqSource {
    /// Id (≥ 1; 0 means unknown).
    pub id: u32,
    /// Label as shown in metal nodes, e.g. `timer`, `virtio0-input.0`, `NET_RX`.
    pub name: String,
}

/// A cgroup (v2, the unified hierarchy): its id as the kernel gives it to BPF
/// (`bpf_get_current_cgroup_id()`, the kernfs node id, which is also the inode number of
/// its directory under the cgroup2 mount) and its path below the cgroup2 root.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupEntry {
    /// Cgroup id (kernfs node id; 1 is the root).
    pub id: u64,
    /// Path below the cgroup2 mount, `/` for the root, e.g.
    /// `/system.slice/docker-<64 hex>.scope`.
    pub path: String,
}

/// Thread `tid` is in cgroup `cgroup` from `ts` on (its first sighting, or a move between
/// cgroups noticed at its next switch-out).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskCgroup {
    /// Trace-clock time from which it holds.
    pub ts: u64,
    /// Thread id.
    pub tid: Tid,
    /// Cgroup id (a [`CgroupEntry::id`]; an id without an entry could not be resolved).
    pub cgroup: u64,
}

/// Clock the timestamps are on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Clock {
    /// CLOCK_MONOTONIC (`bpf_ktime_get_ns`).
    #[default]
    Monotonic,
    /// CLOCK_BOOTTIME (`bpf_ktime_get_boot_ns`).
    Boottime,
    /// Synthetic trace: arbitrary origin.
    Synthetic,
}

/// Stack capture policy of the recording.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StackMode {
    /// Stacks for waits longer than the threshold only (see CHAINS.md).
    #[default]
    Lazy,
    /// Stacks on every switch-out and waking.
    Eager,
    /// No stacks.
    None,
}

/// Counts of what was lost, by cause. Shown by `info` and by every analysis.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LostCounts {
    /// Events lost because the ring buffer was full.
    pub ringbuf_full: u64,
    /// Records the consumer could not parse.
    pub malformed: u64,
    /// Events dropped for arriving too far out of order.
    pub out_of_order: u64,
    /// Kernel stacks whose capture failed.
    pub kernel_stack_failed: u64,
    /// User stacks whose capture failed.
    pub user_stack_failed: u64,
    /// Stacks deliberately skipped by the lazy policy (not lost; counted for honesty).
    pub stacks_skipped: u64,
    /// Lazy user stacks discarded because of user-mode preemption.
    pub user_stacks_preempted: u64,
    /// Addresses that could not be symbolized.
    pub unresolved_symbols: u64,
}

impl LostCounts {
    /// Each count of `self` plus that of `other` (the lost counts of several files of one
    /// recording).
    pub fn plus(&self, other: &LostCounts) -> LostCounts {
        self.zip(other, u64::saturating_add)
    }

    /// Each count of `self` minus that of `other`, at least 0 (what was lost since the
    /// counts were `other`).
    pub fn since(&self, other: &LostCounts) -> LostCounts {
        self.zip(other, u64::saturating_sub)
    }

    fn zip(&self, o: &LostCounts, f: fn(u64, u64) -> u64) -> LostCounts {
        LostCounts {
            ringbuf_full: f(self.ringbuf_full, o.ringbuf_full),
            malformed: f(self.malformed, o.malformed),
            out_of_order: f(self.out_of_order, o.out_of_order),
            kernel_stack_failed: f(self.kernel_stack_failed, o.kernel_stack_failed),
            user_stack_failed: f(self.user_stack_failed, o.user_stack_failed),
            stacks_skipped: f(self.stacks_skipped, o.stacks_skipped),
            user_stacks_preempted: f(self.user_stacks_preempted, o.user_stacks_preempted),
            unresolved_symbols: f(self.unresolved_symbols, o.unresolved_symbols),
        }
    }

    /// Events lost while recording: ring buffer full, malformed and out of order (stacks
    /// and symbols are counted apart; the events carrying them were kept).
    pub fn events(&self) -> u64 {
        self.ringbuf_full + self.malformed + self.out_of_order
    }

    /// The lost events by cause: `ring buffer full N, malformed N, out of order N`.
    pub fn events_by_cause(&self) -> String {
        format!(
            "ring buffer full {}, malformed {}, out of order {}",
            self.ringbuf_full, self.malformed, self.out_of_order
        )
    }

    /// The warning an analysis prints when the recording lost events (None when it lost
    /// none): `chainrec: WHAT: warning: LOST EVENTS in the recording: ring buffer full N,
    /// malformed N, out of order N`.
    pub fn warning(&self, what: &str) -> Option<String> {
        (self.events() > 0).then(|| {
            format!(
                "chainrec: {what}: warning: LOST EVENTS in the recording: {}",
                self.events_by_cause()
            )
        })
    }
}

/// Recording metadata. Written at the start (what is known then) and again at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordingMeta {
    /// Host name of the recording machine.
    pub host: String,
    /// Kernel release (`uname -r`).
    pub kernel_release: String,
    /// Number of possible CPUs.
    pub cpu_count: u32,
    /// Clock of all timestamps.
    pub clock: Clock,
    /// Wall-clock time (ns since the Unix epoch) minus trace-clock time, so that
    /// `wall = ts + clock_offset_ns`.
    pub clock_offset_ns: i128,
    /// Command line of the recorder.
    pub command_line: Vec<String>,
    /// Trace-clock time recording started.
    pub start_ns: u64,
    /// Trace-clock time recording ended (0 while still recording).
    pub end_ns: u64,
    /// Stack policy.
    pub stack_mode: StackMode,
    /// Lazy threshold T in ns (waits shorter than this get no stacks).
    pub stack_threshold_ns: u64,
    /// Lost counts by cause.
    pub lost: LostCounts,
    /// Name of the synthetic scenario, when the trace is synthetic.
    pub synthetic_scenario: Option<String>,
    /// Free-form key/values (recorder version, filters, ...).
    pub extra: Vec<(String, String)>,
}

/// How a recording sampled on-CPU stacks, and what became of the samples: stored in
/// [`RecordingMeta::extra`] under the `SAMPLE_*` keys (so that the metadata layout is the
/// same in format 1 and 2), read back by [`RecordingMeta::sampling`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sampling {
    /// Perf event sampled: `cpu-clock` or `cycles`.
    pub event: String,
    /// Samples per second per CPU asked for.
    pub freq_hz: u64,
    /// CPU time one sample stands for (1 s / `freq_hz` for cpu-clock).
    pub period_ns: u64,
    /// Samples written.
    pub samples: u64,
    /// Samples written without a kernel stack (walk failed; a sample in user mode has an
    /// empty kernel stack and is not counted here).
    pub no_kstack: u64,
    /// Samples of user tasks written without a user stack (walk failed).
    pub no_ustack: u64,
    /// Samples lost (ring buffer full).
    pub lost: u64,
}

/// [`RecordingMeta::extra`] keys of [`Sampling`], in field order.
pub const SAMPLE_KEYS: [&str; 7] = [
    "sample_event",
    "sample_freq_hz",
    "sample_period_ns",
    "samples",
    "samples_no_kstack",
    "samples_no_ustack",
    "samples_lost",
];

impl Sampling {
    /// The key/value pairs to store in [`RecordingMeta::extra`].
    pub fn to_extra(&self) -> Vec<(String, String)> {
        let vals = [
            self.event.clone(),
            self.freq_hz.to_string(),
            self.period_ns.to_string(),
            self.samples.to_string(),
            self.no_kstack.to_string(),
            self.no_ustack.to_string(),
            self.lost.to_string(),
        ];
        SAMPLE_KEYS
            .iter()
            .zip(vals)
            .map(|(k, v)| (k.to_string(), v))
            .collect()
    }
}

impl RecordingMeta {
    /// How on-CPU samples were taken, if the recording took any (`None`: sampling off,
    /// or a trace older than format 2).
    pub fn sampling(&self) -> Option<Sampling> {
        let event = self.extra(SAMPLE_KEYS[0])?.to_string();
        let num = |i: usize| {
            self.extra(SAMPLE_KEYS[i])
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        Some(Sampling {
            event,
            freq_hz: num(1),
            period_ns: num(2),
            samples: num(3),
            no_kstack: num(4),
            no_ustack: num(5),
            lost: num(6),
        })
    }

    /// Replace (or add) the [`Sampling`] keys of [`Self::extra`].
    pub fn set_sampling(&mut self, s: &Sampling) {
        self.extra
            .retain(|(k, _)| !SAMPLE_KEYS.contains(&k.as_str()));
        self.extra.extend(s.to_extra());
    }

    /// The value of free-form key `key` in [`Self::extra`], if recorded.
    pub fn extra(&self, key: &str) -> Option<&str> {
        self.extra
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// All tables of a trace, merged from every table section of the file.
#[derive(Clone, Debug, Default)]
pub struct Tables {
    /// Stacks by id.
    pub stacks: FxHashMap<StackId, StackEntry>,
    /// Symbols by (kind, tgid, addr); tgid 0 for kernel.
    pub symbols: Symbols,
    /// Tasks by tid (first sighting).
    pub tasks: FxHashMap<Tid, TaskEntry>,
    /// Interrupt sources by id.
    pub irq_sources: HashMap<u32, IrqSource>,
    /// Executable mappings of user processes that frames used (empty in traces written
    /// before format 2.1).
    pub mappings: crate::MappingHistory,
    /// CPU-quota throttling records (optional throttle sections, format 2.1; empty in
    /// older traces and when nothing was throttled).
    pub throttling: crate::Throttling,
    /// Goroutine parks and readies of Go processes (optional goroutine sections, format
    /// 2.2; empty in older traces and when no Go program was probed).
    pub goroutines: crate::Goroutines,
    /// Cgroup paths by id (optional cgroup sections, format 2.1; empty in older traces).
    pub cgroups: HashMap<u64, CgroupEntry>,
    /// Each thread's cgroups over time: `(from ts, cgroup id)`, in time order, one entry
    /// per change.
    pub task_cgroups: HashMap<Tid, Vec<(u64, u64)>>,
}

impl Tables {
    /// Record that `m.tid` is in `m.cgroup` from `m.ts` on (keeps each thread's list in
    /// time order and without repeats of the same cgroup).
    pub fn add_task_cgroup(&mut self, m: TaskCgroup) {
        let list = self.task_cgroups.entry(m.tid).or_default();
        let at = list.partition_point(|&(ts, _)| ts <= m.ts);
        if at > 0 && list[at - 1].1 == m.cgroup {
            return;
        }
        list.insert(at, (m.ts, m.cgroup));
        // The entry after it may now repeat it.
        if list.get(at + 1).is_some_and(|&(_, c)| c == m.cgroup) {
            list.remove(at + 1);
        }
    }

    /// The cgroup id of `tid` at time `ts`: the latest change at or before `ts`, else its
    /// first known cgroup (a thread sighted late was in it before, as far as the trace
    /// knows). None when the trace has no cgroup for it.
    pub fn cgroup_at(&self, tid: Tid, ts: u64) -> Option<u64> {
        let list = self.task_cgroups.get(&tid)?;
        let at = list.partition_point(|&(t, _)| t <= ts);
        list.get(at.saturating_sub(1)).map(|&(_, c)| c)
    }

    /// Every cgroup id `tid` was seen in, in time order.
    pub fn cgroups_of(&self, tid: Tid) -> impl Iterator<Item = u64> + '_ {
        self.task_cgroups
            .get(&tid)
            .into_iter()
            .flat_map(|l| l.iter().map(|&(_, c)| c))
    }

    /// The path of cgroup `id`, or `[cgroup id N]` when the recorder could not resolve it
    /// (removed before it looked).
    pub fn cgroup_path(&self, id: u64) -> std::borrow::Cow<'_, str> {
        match self.cgroups.get(&id) {
            Some(c) => std::borrow::Cow::Borrowed(c.path.as_str()),
            None => std::borrow::Cow::Owned(format!("[cgroup id {id}]")),
        }
    }

    /// Merge cgroup entries (a later path for an id replaces an earlier one: a renamed
    /// group) and memberships.
    pub fn merge_cgroups(&mut self, cgroups: &[CgroupEntry], members: &[TaskCgroup]) {
        for c in cgroups {
            self.cgroups.insert(c.id, c.clone());
        }
        for &m in members {
            self.add_task_cgroup(m);
        }
    }

    /// Every membership, in (ts, tid) order (to write the tables out again).
    pub fn task_cgroup_list(&self) -> Vec<TaskCgroup> {
        let mut v: Vec<TaskCgroup> = self
            .task_cgroups
            .iter()
            .flat_map(|(&tid, l)| {
                l.iter()
                    .map(move |&(ts, cgroup)| TaskCgroup { ts, tid, cgroup })
            })
            .collect();
        v.sort_by_key(|m| (m.ts, m.tid));
        v
    }

    /// Whether the trace knows any thread's cgroup.
    pub fn has_cgroups(&self) -> bool {
        !self.task_cgroups.is_empty()
    }

    /// Look up the symbol of one frame of a stack.
    pub fn symbol(&self, stack: &StackEntry, addr: u64) -> Option<Symbol<'_>> {
        self.symbols.get(stack.kind, stack.tgid, addr)
    }
}

/// A wall-clock instant broken into UTC calendar fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UtcTime {
    /// Year.
    pub year: i64,
    /// Month, 1..=12.
    pub month: u32,
    /// Day of the month, 1..=31.
    pub day: u32,
    /// Hour, 0..=23.
    pub hour: u32,
    /// Minute.
    pub minute: u32,
    /// Second.
    pub second: u32,
    /// Millisecond.
    pub milli: u32,
}

impl UtcTime {
    /// From nanoseconds since the Unix epoch (as `ts + RecordingMeta::clock_offset_ns`).
    pub fn from_unix_ns(ns: i128) -> UtcTime {
        let secs = ns.div_euclid(1_000_000_000) as i64;
        let milli = (ns.rem_euclid(1_000_000_000) / 1_000_000) as u32;
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400) as u32;
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
        UtcTime {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: (sod / 60) % 60,
            second: sod % 60,
            milli,
        }
    }

    /// Compact form for file names: `20261123T231502Z`.
    pub fn compact(&self) -> String {
        format!(
            "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// A byte count in the unit that suits it (`512 B`, `1.5 KiB`, `3.2 MiB`, `1.25 GiB`), as
/// every summary line prints sizes.
pub fn human_bytes(b: u64) -> String {
    if b < 1024 {
        format!("{b} B")
    } else if b < 1 << 20 {
        format!("{:.1} KiB", b as f64 / 1024.0)
    } else if b < 1 << 30 {
        format!("{:.1} MiB", b as f64 / (1 << 20) as f64)
    } else {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    }
}

/// A duration in the unit that suits it (`456.0 us`, `12.34 ms`, `1.234 s`), as summary
/// lines and reports print times.
pub fn fmt_ns(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.3} s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.2} ms", ns as f64 / 1e6)
    } else {
        format!("{:.1} us", ns as f64 / 1e3)
    }
}

/// Format wall-clock nanoseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS.mmm UTC`.
pub fn format_wall(ns: i128) -> String {
    let t = UtcTime::from_unix_ns(ns);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} UTC",
        t.year, t.month, t.day, t.hour, t.minute, t.second, t.milli
    )
}

#[cfg(test)]
mod tests {
    use super::{LostCounts, StackKind, SymbolEntry, Symbols};

    /// The symbol of function `name` at `addr` in process `tgid`, in libc.
    fn libc_symbol(tgid: u32, addr: u64, name: &str) -> SymbolEntry {
        SymbolEntry {
            kind: StackKind::User,
            tgid,
            addr,
            name: Some(name.to_string()),
            offset: addr & 0xf,
            module: Some("/usr/lib/x86_64-linux-gnu/libc.so.6".to_string()),
            build_id: Some(vec![0xab; 20]),
            file_offset: Some(addr & 0xffff),
        }
    }

    #[test]
    fn symbols_store_each_distinct_string_once_however_many_processes_repeat_it() {
        let mut t = Symbols::default();
        let names = ["read", "__libc_recv", "epoll_wait"];
        let mut entries = Vec::new();
        for tgid in 100..1100 {
            for (i, n) in names.iter().enumerate() {
                let e = libc_symbol(tgid, 0x7f00_0000_1000 + i as u64 * 0x40 + 3, n);
                t.insert(&e);
                entries.push(e);
            }
        }
        // A kernel symbol without module, build id or file offset.
        let k = SymbolEntry {
            kind: StackKind::Kernel,
            tgid: 0,
            addr: 0xffff_ffff_8100_0010,
            name: Some("schedule".into()),
            offset: 0x10,
            module: None,
            build_id: None,
            file_offset: None,
        };
        t.insert(&k);
        entries.push(k);
        assert_eq!(t.len(), 3001);
        // Each entry reads back as inserted.
        for e in &entries {
            let s = t.get(e.kind, e.tgid, e.addr).expect("inserted");
            assert_eq!(&s.to_entry(), e);
        }
        // 3 names + 1 module path + "schedule", one build id: not 3000 copies of each.
        assert_eq!((t.strings.len(), t.build_ids.len()), (5, 1));
        let a = t.get(StackKind::User, 100, 0x7f00_0000_1003).unwrap();
        let b = t.get(StackKind::User, 1099, 0x7f00_0000_1003).unwrap();
        assert!(std::ptr::eq(a.name.unwrap(), b.name.unwrap()));
        assert!(std::ptr::eq(a.module.unwrap(), b.module.unwrap()));
        assert!(std::ptr::eq(a.build_id.unwrap(), b.build_id.unwrap()));
        // The same strings by id: equal ids for equal strings, and only for them.
        let ids = |tgid, addr| t.names(StackKind::User, tgid, addr).unwrap();
        let (a, b) = (ids(100, 0x7f00_0000_1003), ids(1099, 0x7f00_0000_1003));
        assert_eq!(a, b);
        assert_eq!(t.str(a.name.unwrap()), "read");
        assert_eq!(a.file_offset, Some(0x1003));
        let c = ids(100, 0x7f00_0000_1043);
        assert_ne!(a.name, c.name);
        assert_eq!(
            (a.module, t.str(c.name.unwrap())),
            (c.module, "__libc_recv")
        );
        let k = t
            .names(StackKind::Kernel, 0, 0xffff_ffff_8100_0010)
            .unwrap();
        assert_eq!((k.module, k.file_offset), (None, None));
        // A later entry for an address replaces the earlier one.
        t.insert(&libc_symbol(100, 0x7f00_0000_1003, "recv"));
        let a = t.get(StackKind::User, 100, 0x7f00_0000_1003).unwrap();
        assert_eq!((a.name, t.len()), (Some("recv"), 3001));
        assert_eq!(t.iter().filter(|s| s.name == Some("read")).count(), 999);
        // Equality is by content, not by how the strings were interned.
        let mut u = Symbols::default();
        u.insert(&libc_symbol(1, 1, "x"));
        u.extend(entries.iter().rev());
        assert_ne!(u, t);
        u.insert(&libc_symbol(100, 0x7f00_0000_1003, "recv"));
        assert_ne!(u, t);
        let mut v = Symbols::default();
        v.extend(entries.iter().rev());
        v.insert(&libc_symbol(100, 0x7f00_0000_1003, "recv"));
        assert_eq!(v, t);
    }

    /// Table sections are written as `SymbolEntry`s and read as `Symbol`s.
    #[test]
    fn a_symbol_decodes_from_the_encoding_of_its_entry() {
        let mut bare = libc_symbol(7, 0x1234, "x");
        bare.name = None;
        bare.build_id = None;
        bare.file_offset = None;
        let mut empty_id = libc_symbol(8, 0x10, "y");
        empty_id.build_id = Some(Vec::new());
        let entries = vec![libc_symbol(1, 0x7f00_0000_1003, "read"), bare, empty_id];
        let cfg = bincode::config::standard();
        let raw = bincode::serde::encode_to_vec(&entries, cfg).unwrap();
        let (syms, used): (Vec<super::Symbol>, usize) =
            bincode::serde::borrow_decode_from_slice(&raw, cfg).unwrap();
        assert_eq!(used, raw.len());
        let back: Vec<SymbolEntry> = syms.iter().map(|s| s.to_entry()).collect();
        assert_eq!(back, entries);
    }

    #[test]
    fn lost_events_warning_names_each_cause_and_only_appears_after_a_loss() {
        let mut l = LostCounts {
            kernel_stack_failed: 3,
            ..LostCounts::default()
        };
        // Lost stacks are not lost events.
        assert_eq!(l.warning("top"), None);
        l.ringbuf_full = 7;
        l.out_of_order = 2;
        assert_eq!(
            l.warning("top").as_deref(),
            Some("chainrec: top: warning: LOST EVENTS in the recording: ring buffer full 7, malformed 0, out of order 2")
        );
    }
}

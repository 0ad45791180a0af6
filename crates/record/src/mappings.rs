//! Every executable mapping of every process, as it is made: a perf software `dummy` event
//! per online CPU with `mmap2`, `comm` (exec) and `task` (fork, exit) records, read by the
//! consumer on each poll, plus a `/proc/*/maps` scan at the start. They build the
//! [`MappingHistory`] that symbolization uses after the processes are gone (like perf's
//! MMAP2 records; no kprobes needed), and that answers [`MappingLookup`] for anyone who
//! needs "which object holds this pc in process P at time t" (the user-stack unwinder).

use chainrec_format::{MappingEntry, MappingHistory, Tid};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

/// "Which object held `addr` in process `tgid` at trace time `ts`": the mapping (path,
/// build id, file offset of its start, `p_vaddr - p_offset`), if any.
pub trait MappingLookup {
    /// The mapping, see [`MappingHistory::lookup`].
    fn mapping_at(&self, tgid: Tid, addr: u64, ts: u64) -> Option<&MappingEntry>;
}

impl MappingLookup for MappingHistory {
    fn mapping_at(&self, tgid: Tid, addr: u64, ts: u64) -> Option<&MappingEntry> {
        self.lookup(tgid, addr, ts)
    }
}

const PERF_RECORD_LOST: u32 = 2;
const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_EXIT: u32 = 4;
const PERF_RECORD_FORK: u32 = 7;
const PERF_RECORD_MMAP2: u32 = 10;
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
/// Data pages of each per-CPU buffer (512 KiB: a second of heavy fork churn between polls).
const RING_PAGES: usize = 128;
/// Exited processes are forgotten this long (trace time) after their exit: their stacks
/// have been symbolized by then (the consumer symbolizes on every poll).
const KEEP_EXITED_NS: u64 = 5_000_000_000;

/// One per-CPU perf ring buffer.
struct Ring {
    _fd: OwnedFd,
    base: *mut u8,
    len: usize,
    page: usize,
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/len are the mapping made in `open_ring` and nothing uses it after.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Counts for the summary and `meta.extra`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MappingCounts {
    /// Mappings read from `/proc` (at the start, and for processes whose records were
    /// missing).
    pub from_proc: u64,
    /// MMAP2 records.
    pub mmap_records: u64,
    /// Exec (COMM with the exec flag), fork (new process) and exit (process) records.
    pub execs: u64,
    /// New processes.
    pub forks: u64,
    /// Process exits.
    pub exits: u64,
    /// Records the kernel dropped (buffer full): mappings then come from `/proc`.
    pub lost_records: u64,
    /// Per-CPU events that could not be opened (`perf_event_open` failed).
    pub open_failed: u32,
}

/// The live mapping tracker of a recording.
pub struct MappingTracker {
    /// The history (what lookups and the trace use).
    pub history: MappingHistory,
    rings: Vec<Ring>,
    /// Build id and segment translation by (device, inode, path, pgoff).
    file_facts: HashMap<FileKey, FileFacts>,
    /// Records of one poll, sorted by time before they are applied.
    pending: Vec<Rec>,
    /// Processes scanned from `/proc` on demand (once each).
    rescanned: std::collections::HashSet<Tid>,
    /// Counts.
    pub counts: MappingCounts,
    scratch: Vec<u8>,
}

/// A mapped file: device, inode, path, offset of the mapping.
type FileKey = (u64, u64, String, u64);
/// Its build id and `p_vaddr - p_offset`.
type FileFacts = (Option<Vec<u8>>, Option<u64>);

/// A decoded record.
enum Rec {
    Map(MappingEntry, Option<Vec<u8>>),
    Exec(Tid, u64),
    Fork { parent: Tid, child: Tid, ts: u64 },
    Exit(Tid, u64),
}

impl Rec {
    fn ts(&self) -> u64 {
        match self {
            Rec::Map(m, _) => m.from_ns,
            Rec::Exec(_, t) | Rec::Exit(_, t) => *t,
            Rec::Fork { ts, .. } => *ts,
        }
    }
}

// SAFETY: the ring mappings are owned by the tracker and only touched through &mut self.
unsafe impl Send for MappingTracker {}

fn open_event(cpu: u32) -> std::io::Result<OwnedFd> {
    use libbpf_rs::libbpf_sys as sys;
    let mut attr = sys::perf_event_attr {
        size: std::mem::size_of::<sys::perf_event_attr>() as u32,
        type_: sys::PERF_TYPE_SOFTWARE,
        config: sys::PERF_COUNT_SW_DUMMY as u64,
        sample_type: (sys::PERF_SAMPLE_TID | sys::PERF_SAMPLE_TIME) as u64,
        clockid: libc::CLOCK_MONOTONIC,
        ..Default::default()
    };
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    attr.set_use_clockid(1);
    // The kernel reads the build id at mmap time (the file may be replaced later).
    attr.set_build_id(1);
    crate::perf_event::open_on_cpu(&attr, cpu)
}

fn open_ring(cpu: u32) -> std::io::Result<Ring> {
    let fd = open_event(cpu)?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
    let len = page * (1 + RING_PAGES);
    // SAFETY: mapping a perf event's ring: 1 + 2^n pages, shared, read-write (the
    // consumer writes data_tail); the result is checked.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Ring {
        _fd: fd,
        base: base as *mut u8,
        len,
        page,
    })
}

/// `makedev` of a `/proc/PID/maps` device field (`fd:01`).
fn parse_dev(s: &str) -> u64 {
    let mut it = s.split(':');
    let (Some(ma), Some(mi)) = (it.next(), it.next()) else {
        return 0;
    };
    match (u64::from_str_radix(ma, 16), u64::from_str_radix(mi, 16)) {
        (Ok(ma), Ok(mi)) => libc::makedev(ma as u32, mi as u32),
        _ => 0,
    }
}

/// The executable mappings of `/proc/PID/maps` text (`tgid`'s, valid from `from_ns`).
pub fn parse_proc_maps(tgid: Tid, text: &str, from_ns: u64) -> Vec<MappingEntry> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_ascii_whitespace();
            let range = it.next()?;
            let perms = it.next()?;
            let off = it.next()?;
            let dev = it.next()?;
            let inode = it.next()?;
            let path = it.collect::<Vec<_>>().join(" ");
            if !perms.contains('x') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            let path = path
                .strip_suffix(" (deleted)")
                .map(str::to_string)
                .unwrap_or(path);
            Some(MappingEntry {
                id: 0,
                tgid,
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                pgoff: u64::from_str_radix(off, 16).ok()?,
                path: if path.is_empty() {
                    "//anon".into()
                } else {
                    path
                },
                build_id: None,
                dev: parse_dev(dev),
                inode: inode.parse().ok()?,
                vaddr_delta: None,
                from_ns,
                until_ns: MappingEntry::OPEN,
            })
        })
        .collect()
}

impl MappingTracker {
    /// Open the per-CPU events (a CPU whose event fails is counted; none at all is an
    /// error), then scan `/proc` for the mappings that exist already.
    pub fn start(cpus: &[u32]) -> std::io::Result<MappingTracker> {
        let mut t = MappingTracker::without_events();
        let mut first_err = None;
        for &cpu in cpus {
            match open_ring(cpu) {
                Ok(r) => t.rings.push(r),
                Err(e) => {
                    t.counts.open_failed += 1;
                    first_err.get_or_insert(e);
                }
            }
        }
        if t.rings.is_empty() {
            if let Some(e) = first_err {
                return Err(e);
            }
        }
        t.scan_all_now();
        Ok(t)
    }

    /// A tracker fed only by [`MappingTracker::scan_pid`] (tests; fallback).
    pub fn without_events() -> MappingTracker {
        MappingTracker {
            history: MappingHistory::new(),
            rings: Vec::new(),
            file_facts: HashMap::new(),
            pending: Vec::new(),
            rescanned: Default::default(),
            counts: MappingCounts::default(),
            scratch: Vec::new(),
        }
    }

    /// Whether the perf events are open.
    pub fn has_events(&self) -> bool {
        !self.rings.is_empty()
    }

    /// Read the maps of every process in `/proc` (valid from the start).
    pub fn scan_all_now(&mut self) {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for e in dir.flatten() {
            if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<Tid>().ok()) {
                self.scan_pid(pid, 0);
            }
        }
    }

    /// Read `/proc/TGID/maps` into the history (valid from `from_ns`); false when the
    /// process is gone.
    pub fn scan_pid(&mut self, tgid: Tid, from_ns: u64) -> bool {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{tgid}/maps")) else {
            return false;
        };
        for m in parse_proc_maps(tgid, &text, from_ns) {
            self.counts.from_proc += 1;
            self.add(m, None);
        }
        true
    }

    /// Scan a process on demand (a frame in no known mapping: records lost, or a process
    /// older than the events), once per process.
    pub fn rescan_once(&mut self, tgid: Tid, now: u64) -> bool {
        self.rescanned.insert(tgid) && self.scan_pid(tgid, now)
    }

    /// Add a mapping, with the build id and segment translation of its file.
    fn add(&mut self, mut m: MappingEntry, kernel_build_id: Option<Vec<u8>>) {
        if m.is_file() {
            let key = (m.dev, m.inode, m.path.clone(), m.pgoff);
            let facts = self.file_facts.entry(key).or_insert_with(|| {
                let p = Path::new(&m.path);
                let bid = kernel_build_id
                    .clone()
                    .or_else(|| chainrec_symbols::build_id_of(p));
                (bid, chainrec_symbols::vaddr_delta(p, m.pgoff))
            });
            m.build_id = kernel_build_id.or_else(|| facts.0.clone());
            m.vaddr_delta = facts.1;
        }
        self.history.map(m);
    }

    /// Read every record the kernel wrote since the last call and apply them in time
    /// order; forget processes that exited long before `now`.
    pub fn poll(&mut self, now: u64) {
        let mut recs = std::mem::take(&mut self.pending);
        for i in 0..self.rings.len() {
            self.drain_ring(i, &mut recs);
        }
        recs.sort_by_key(Rec::ts);
        for r in recs.drain(..) {
            match r {
                Rec::Map(m, bid) => {
                    self.counts.mmap_records += 1;
                    self.add(m, bid);
                }
                Rec::Exec(tgid, ts) => {
                    self.counts.execs += 1;
                    self.history.exec(tgid, ts);
                }
                Rec::Fork { parent, child, ts } => {
                    self.counts.forks += 1;
                    self.history.fork(parent, child, ts);
                }
                Rec::Exit(tgid, ts) => {
                    self.counts.exits += 1;
                    self.history.exit(tgid, ts);
                }
            }
        }
        self.pending = recs;
        self.history
            .prune_exited(now.saturating_sub(KEEP_EXITED_NS));
    }

    fn drain_ring(&mut self, i: usize, out: &mut Vec<Rec>) {
        let (base, page, len) = {
            let r = &self.rings[i];
            (r.base, r.page, r.len)
        };
        let data_size = len - page;
        // SAFETY: the first page is the kernel's perf_event_mmap_page; data_head is read
        // with acquire ordering after the kernel's writes (as the perf ABI requires).
        let (head, tail) = unsafe {
            let meta = base as *mut libbpf_rs::libbpf_sys::perf_event_mmap_page;
            let head_ptr =
                std::ptr::addr_of!((*meta).data_head) as *const std::sync::atomic::AtomicU64;
            let tail_ptr = std::ptr::addr_of!((*meta).data_tail);
            (
                (*head_ptr).load(std::sync::atomic::Ordering::Acquire),
                std::ptr::read_volatile(tail_ptr),
            )
        };
        let mut pos = tail;
        // SAFETY: the data area follows the first page and is data_size bytes long.
        let data = unsafe { std::slice::from_raw_parts(base.add(page), data_size) };
        let mut rec = std::mem::take(&mut self.scratch);
        while pos + 8 <= head {
            let at = (pos % data_size as u64) as usize;
            let mut hdr = [0u8; 8];
            copy_wrapped(data, at, &mut hdr);
            let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as usize;
            if size < 8 || pos + size as u64 > head {
                break;
            }
            rec.resize(size, 0);
            copy_wrapped(data, at, &mut rec);
            if let Some(x) = self.decode(&rec) {
                out.push(x);
            }
            pos += size as u64;
        }
        self.scratch = rec;
        // SAFETY: data_tail is ours to write once the records before it are read; the
        // release store orders our reads before the kernel reuses the space.
        unsafe {
            let meta = base as *mut libbpf_rs::libbpf_sys::perf_event_mmap_page;
            let tail_ptr =
                std::ptr::addr_of_mut!((*meta).data_tail) as *const std::sync::atomic::AtomicU64;
            (*tail_ptr).store(pos, std::sync::atomic::Ordering::Release);
        }
    }

    /// Decode one record (`rec` = header + body, sample_id {pid, tid, time} at the end).
    fn decode(&mut self, rec: &[u8]) -> Option<Rec> {
        let u32_at = |i: usize| {
            rec.get(i..i + 4)
                .map(|b| u32::from_ne_bytes(b.try_into().unwrap()))
        };
        let u64_at = |i: usize| {
            rec.get(i..i + 8)
                .map(|b| u64::from_ne_bytes(b.try_into().unwrap()))
        };
        let kind = u32_at(0)?;
        let misc = u16::from_ne_bytes([rec[4], rec[5]]);
        let ts = u64_at(rec.len().checked_sub(8)?)?;
        match kind {
            PERF_RECORD_MMAP2 => {
                let (pid, tid) = (u32_at(8)?, u32_at(12)?);
                let (addr, len, pgoff) = (u64_at(16)?, u64_at(24)?, u64_at(32)?);
                let (build_id, dev, inode) = if misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0 {
                    let n = (*rec.get(40)? as usize).min(20);
                    let b = rec.get(44..44 + n)?.to_vec();
                    ((n > 0).then_some(b), 0, 0)
                } else {
                    let (ma, mi) = (u32_at(40)?, u32_at(44)?);
                    (None, libc::makedev(ma, mi), u64_at(48)?)
                };
                // prot, flags at 64, 68; the file name from 72 up to the sample id.
                let name = rec.get(72..rec.len().checked_sub(16)?)?;
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                let path = String::from_utf8_lossy(name).into_owned();
                let _ = tid;
                let (dev, inode) = if dev == 0 && inode == 0 {
                    stat_ids(&path)
                } else {
                    (dev, inode)
                };
                Some(Rec::Map(
                    MappingEntry {
                        id: 0,
                        tgid: pid,
                        start: addr,
                        end: addr.checked_add(len)?,
                        pgoff,
                        path,
                        build_id: None,
                        dev,
                        inode,
                        vaddr_delta: None,
                        from_ns: ts,
                        until_ns: MappingEntry::OPEN,
                    },
                    build_id,
                ))
            }
            PERF_RECORD_COMM if misc & PERF_RECORD_MISC_COMM_EXEC != 0 => {
                Some(Rec::Exec(u32_at(8)?, ts))
            }
            PERF_RECORD_FORK => {
                let (pid, ppid, tid) = (u32_at(8)?, u32_at(12)?, u32_at(16)?);
                let ts = u64_at(24)?;
                // A new process (not a thread): pid == tid and its parent is another one.
                (pid == tid && pid != ppid).then_some(Rec::Fork {
                    parent: ppid,
                    child: pid,
                    ts,
                })
            }
            PERF_RECORD_EXIT => {
                let (pid, tid) = (u32_at(8)?, u32_at(16)?);
                let ts = u64_at(24)?;
                (pid == tid).then_some(Rec::Exit(pid, ts))
            }
            PERF_RECORD_LOST => {
                self.counts.lost_records += u64_at(16)?;
                None
            }
            _ => None,
        }
    }

    /// For `meta.extra`: `N mmap records, N from /proc, N exec, N fork, N exit, N lost
    /// records; history: N mappings of N processes, N KiB`.
    pub fn summary(&self) -> String {
        let c = &self.counts;
        format!(
            "{} mmap records, {} from /proc, {} exec, {} fork, {} exit, {} lost records{}; history: {} mappings of {} processes, {} KiB",
            c.mmap_records,
            c.from_proc,
            c.execs,
            c.forks,
            c.exits,
            c.lost_records,
            if c.open_failed > 0 {
                format!(", {} CPUs without the event", c.open_failed)
            } else {
                String::new()
            },
            self.history.len(),
            self.history.processes(),
            self.history.memory_bytes() / 1024
        )
    }
}

/// Device and inode of `path` (0, 0 when it cannot be stat'ed).
fn stat_ids(path: &str) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    if !path.starts_with('/') {
        return (0, 0);
    }
    std::fs::metadata(path).map_or((0, 0), |m| (m.dev(), m.ino()))
}

/// Copy `out.len()` bytes of the ring `data` from `at`, wrapping at its end.
fn copy_wrapped(data: &[u8], at: usize, out: &mut [u8]) {
    let first = (data.len() - at).min(out.len());
    out[..first].copy_from_slice(&data[at..at + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_maps_lines_give_executable_mappings_only() {
        let text = "\
5581d1a00000-5581d1a2c000 r--p 00000000 fd:01 1051 /usr/bin/bash
5581d1a2c000-5581d1b0b000 r-xp 0002c000 fd:01 1051 /usr/bin/bash
7f3a1c228000-7f3a1c3bd000 r-xp 00026000 fd:01 2222 /usr/lib/x86_64-linux-gnu/libc.so.6 (deleted)
7f3a1c400000-7f3a1c401000 rwxp 00000000 00:00 0 
7ffd5b1f0000-7ffd5b1f2000 r-xp 00000000 00:00 0                          [vdso]
";
        let v = parse_proc_maps(42, text, 7);
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].path, "/usr/bin/bash");
        assert_eq!(
            (v[0].start, v[0].pgoff, v[0].inode),
            (0x5581d1a2c000, 0x2c000, 1051)
        );
        assert_eq!(v[0].dev, libc::makedev(0xfd, 1));
        assert_eq!(v[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert!(v[2].is_anon());
        assert_eq!(v[3].path, "[vdso]");
        assert!(v.iter().all(|m| m.from_ns == 7 && m.tgid == 42));
    }

    #[test]
    fn wrapped_copies_join_the_end_and_the_start() {
        let data = [1u8, 2, 3, 4, 5];
        let mut out = [0u8; 3];
        copy_wrapped(&data, 3, &mut out);
        assert_eq!(out, [4, 5, 1]);
    }
}

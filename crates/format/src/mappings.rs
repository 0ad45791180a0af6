//! Executable mappings of user processes over the recording, and the lookup "which object
//! held address A in process P at time T" that symbolization (and unwinding) needs.
//!
//! The recorder learns mappings as they are made (perf `MMAP2` records, plus a `/proc`
//! scan at the start) and keeps their history here: an exec ends every mapping of the
//! process, a new mapping ends the ones it overlaps (perf reports no munmap: a later
//! mapping over the same range is what replaces one), a fork gives the child a copy of
//! its parent's, and a process id reused by a new process starts from that copy again.
//! Mappings of exited processes stay until [`MappingHistory::prune_exited`] drops them, so
//! frames of processes that exited before the consumer saw their stacks are still
//! resolved from their files. The trace stores the mappings its frames used (optional
//! section kind 0x82, docs/FORMAT.md), read back into [`crate::Tables::mappings`].

use crate::event::Tid;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// One mapping of a file (or anonymous executable memory) into a process, valid over a
/// time range.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MappingEntry {
    /// Id, unique in the trace; a later entry with the same id replaces an earlier one
    /// (its end time became known).
    pub id: u64,
    /// The process.
    pub tgid: Tid,
    /// First address of the mapping.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Offset in the file of `start`.
    pub pgoff: u64,
    /// Path of the file as the kernel named it; `//anon` for anonymous executable memory
    /// (JIT code), `[vdso]` and the like for special mappings.
    pub path: String,
    /// GNU build id of the file, when known (read by the kernel at mmap time or from the
    /// file when the record arrived).
    pub build_id: Option<Vec<u8>>,
    /// Device of the file (`makedev` form, 0 when unknown).
    pub dev: u64,
    /// Inode of the file (0 when unknown).
    pub inode: u64,
    /// ELF virtual address minus file offset of the mapped segment (`p_vaddr -
    /// p_offset`, wrapping; 0 for most objects), when the file could be read: what a
    /// debug file found by build id alone (whose segments hold no file bytes) needs to
    /// turn a file offset into its addresses.
    pub vaddr_delta: Option<u64>,
    /// Trace-clock time the mapping was made; 0 for one that existed when recording began.
    pub from_ns: u64,
    /// Trace-clock time it was replaced or its process exec'd or exited;
    /// [`MappingEntry::OPEN`] while it still stood when last written.
    pub until_ns: u64,
}

impl MappingEntry {
    /// `until_ns` of a mapping that still stands.
    pub const OPEN: u64 = u64::MAX;

    /// Whether `addr` is inside the mapping.
    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }

    /// Offset in the file of `addr` (an address inside the mapping).
    pub fn file_offset(&self, addr: u64) -> u64 {
        addr.wrapping_sub(self.start).wrapping_add(self.pgoff)
    }

    /// Whether the mapping stood at `ts`.
    pub fn live_at(&self, ts: u64) -> bool {
        self.from_ns <= ts && ts < self.until_ns
    }

    /// Whether it maps a file (an absolute path), not anonymous or special memory.
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/')
    }

    /// Whether it is anonymous executable memory (JIT code: a perf map file may name it).
    pub fn is_anon(&self) -> bool {
        self.path.is_empty() || self.path == "//anon" || self.path.starts_with("[anon")
    }
}

/// Bookkeeping of one entry: used by a frame, changed since last taken.
#[derive(Clone, Debug)]
struct Slot {
    m: MappingEntry,
    used: bool,
    dirty: bool,
}

/// Mappings of every process over time, with [`MappingHistory::lookup`].
#[derive(Clone, Debug, Default)]
pub struct MappingHistory {
    procs: HashMap<Tid, Vec<Slot>>,
    /// Processes that exited, with the time (for [`MappingHistory::prune_exited`]).
    exited: HashMap<Tid, u64>,
    next_id: u64,
    /// Entries (all processes) and their path bytes, for the memory estimate.
    entries: usize,
    path_bytes: usize,
}

impl MappingHistory {
    /// Empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// The mapping that held `addr` in process `tgid` at time `ts`: one that stood at
    /// `ts`, else the last one before `ts` that held it (a stack seen a little after its
    /// process exec'd or exited), else the first one made after `ts` (a mapping whose
    /// record arrived with a slightly later timestamp than the stack).
    pub fn lookup(&self, tgid: Tid, addr: u64, ts: u64) -> Option<&MappingEntry> {
        self.lookup_slot(tgid, addr, ts)
            .map(|i| &self.procs[&tgid][i].m)
    }

    fn lookup_slot(&self, tgid: Tid, addr: u64, ts: u64) -> Option<usize> {
        let slots = self.procs.get(&tgid)?;
        let mut before: Option<usize> = None;
        let mut after: Option<usize> = None;
        for (i, s) in slots.iter().enumerate() {
            let m = &s.m;
            if !m.contains(addr) {
                continue;
            }
            if m.live_at(ts) {
                return Some(i);
            }
            if m.from_ns <= ts {
                if before.is_none_or(|b| slots[b].m.until_ns <= m.until_ns) {
                    before = Some(i);
                }
            } else if after.is_none_or(|a| slots[a].m.from_ns > m.from_ns) {
                after = Some(i);
            }
        }
        before.or(after)
    }

    /// [`MappingHistory::lookup`], and remember that a frame used the mapping: it goes
    /// to the trace ([`MappingHistory::take_changed`]).
    pub fn lookup_used(&mut self, tgid: Tid, addr: u64, ts: u64) -> Option<&MappingEntry> {
        let i = self.lookup_slot(tgid, addr, ts)?;
        let s = &mut self.procs.get_mut(&tgid)?[i];
        if !s.used {
            s.used = true;
            s.dirty = true;
        }
        Some(&s.m)
    }

    /// A new mapping made at `m.from_ns` (its `id` and `until_ns` are assigned here): it
    /// ends the standing mappings of the process it overlaps. Returns its id.
    pub fn map(&mut self, mut m: MappingEntry) -> u64 {
        m.id = self.next_id;
        self.next_id += 1;
        m.until_ns = MappingEntry::OPEN;
        let slots = self.procs.entry(m.tgid).or_default();
        for s in slots.iter_mut() {
            let o = &mut s.m;
            if o.until_ns == MappingEntry::OPEN && o.start < m.end && m.start < o.end {
                // The same mapping seen twice (the /proc scan and a record racing it):
                // keep the first.
                if o.start == m.start
                    && o.end == m.end
                    && o.pgoff == m.pgoff
                    && o.path == m.path
                    && o.from_ns <= m.from_ns
                {
                    if o.build_id.is_none() {
                        o.build_id = m.build_id.take();
                    }
                    return o.id;
                }
                o.until_ns = m.from_ns.max(o.from_ns);
                s.dirty |= s.used;
            }
        }
        self.entries += 1;
        self.path_bytes += m.path.len();
        let id = m.id;
        slots.push(Slot {
            m,
            used: false,
            dirty: false,
        });
        id
    }

    /// Process `tgid` exec'd at `ts`: every mapping it had ends.
    pub fn exec(&mut self, tgid: Tid, ts: u64) {
        self.end_all(tgid, ts);
        self.exited.remove(&tgid);
    }

    /// Process `tgid` exited at `ts`: its mappings end (and stay for lookups until
    /// [`MappingHistory::prune_exited`]).
    pub fn exit(&mut self, tgid: Tid, ts: u64) {
        self.end_all(tgid, ts);
        if self.procs.contains_key(&tgid) {
            self.exited.insert(tgid, ts);
        }
    }

    /// New process `child` forked from `parent` at `ts`: whatever an earlier process of
    /// the same id had ends, and the child starts with a copy of the parent's mappings.
    pub fn fork(&mut self, parent: Tid, child: Tid, ts: u64) {
        self.end_all(child, ts);
        self.exited.remove(&child);
        let copies: Vec<MappingEntry> = self
            .procs
            .get(&parent)
            .map(|v| {
                v.iter()
                    .filter(|s| s.m.live_at(ts) || s.m.until_ns == MappingEntry::OPEN)
                    .map(|s| s.m.clone())
                    .collect()
            })
            .unwrap_or_default();
        for mut m in copies {
            m.tgid = child;
            m.from_ns = ts;
            self.map(m);
        }
    }

    fn end_all(&mut self, tgid: Tid, ts: u64) {
        if let Some(slots) = self.procs.get_mut(&tgid) {
            for s in slots.iter_mut() {
                if s.m.until_ns == MappingEntry::OPEN {
                    s.m.until_ns = ts.max(s.m.from_ns);
                    s.dirty |= s.used;
                }
            }
        }
    }

    /// Forget processes that exited before `ts` (their mappings were taken for the trace
    /// already if a frame used them); returns how many.
    pub fn prune_exited(&mut self, ts: u64) -> usize {
        let gone: Vec<Tid> = self
            .exited
            .iter()
            .filter(|(_, &t)| t < ts)
            .map(|(&p, _)| p)
            .collect();
        for p in &gone {
            self.exited.remove(p);
            if let Some(slots) = self.procs.remove(p) {
                self.entries -= slots.len();
                self.path_bytes -= slots.iter().map(|s| s.m.path.len()).sum::<usize>();
            }
        }
        gone.len()
    }

    /// The used entries that are new or changed since the last call (what the trace
    /// still lacks), in id order.
    pub fn take_changed(&mut self) -> Vec<MappingEntry> {
        let mut out = Vec::new();
        for slots in self.procs.values_mut() {
            for s in slots.iter_mut().filter(|s| s.dirty) {
                s.dirty = false;
                out.push(s.m.clone());
            }
        }
        out.sort_by_key(|m| m.id);
        out
    }

    /// Add an entry as stored in a trace: an entry with a known id replaces it.
    pub fn insert_stored(&mut self, m: MappingEntry) {
        self.next_id = self.next_id.max(m.id + 1);
        let slots = self.procs.entry(m.tgid).or_default();
        match slots.iter_mut().find(|s| s.m.id == m.id) {
            Some(s) => {
                self.path_bytes = self.path_bytes - s.m.path.len() + m.path.len();
                s.m = m;
            }
            None => {
                self.entries += 1;
                self.path_bytes += m.path.len();
                slots.push(Slot {
                    m,
                    used: true,
                    dirty: false,
                });
            }
        }
    }

    /// Every entry, in id order.
    pub fn entries(&self) -> Vec<&MappingEntry> {
        let mut v: Vec<&MappingEntry> = self
            .procs
            .values()
            .flat_map(|s| s.iter().map(|s| &s.m))
            .collect();
        v.sort_by_key(|m| m.id);
        v
    }

    /// Number of entries held.
    pub fn len(&self) -> usize {
        self.entries
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// Number of processes with entries.
    pub fn processes(&self) -> usize {
        self.procs.len()
    }

    /// Approximate heap bytes held (entries, paths, per-process vectors).
    pub fn memory_bytes(&self) -> usize {
        self.entries * (std::mem::size_of::<Slot>() + 20)
            + self.path_bytes
            + self.procs.len() * (std::mem::size_of::<Vec<Slot>>() + 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(tgid: Tid, start: u64, end: u64, path: &str, from: u64) -> MappingEntry {
        MappingEntry {
            id: 0,
            tgid,
            start,
            end,
            pgoff: 0x1000,
            path: path.into(),
            build_id: None,
            dev: 0,
            inode: 0,
            vaddr_delta: Some(0),
            from_ns: from,
            until_ns: 0,
        }
    }

    fn path_at(h: &MappingHistory, tgid: Tid, addr: u64, ts: u64) -> Option<&str> {
        h.lookup(tgid, addr, ts).map(|m| m.path.as_str())
    }

    #[test]
    fn exec_replaces_every_mapping_and_earlier_stacks_keep_the_old_image() {
        let mut h = MappingHistory::new();
        h.map(m(10, 0x1000, 0x5000, "/bin/bash", 0));
        h.map(m(10, 0x7000, 0x9000, "/lib/libc.so.6", 0));
        h.exec(10, 100);
        h.map(m(10, 0x2000, 0x3000, "/bin/true", 105));
        // Before the exec: bash; after: true, and nothing else at libc's old range.
        assert_eq!(path_at(&h, 10, 0x2800, 50), Some("/bin/bash"));
        assert_eq!(path_at(&h, 10, 0x2800, 200), Some("/bin/true"));
        // A stack a little after the exec at an address only the old image had: the
        // last mapping that held it.
        assert_eq!(path_at(&h, 10, 0x7100, 200), Some("/lib/libc.so.6"));
        assert_eq!(h.lookup(10, 0x7100, 200).unwrap().until_ns, 100);
        assert_eq!(path_at(&h, 10, 0x9000, 200), None);
        assert_eq!(
            h.lookup(10, 0x2800, 50).unwrap().file_offset(0x2800),
            0x2800
        );
    }

    #[test]
    fn a_new_mapping_over_an_old_range_replaces_it_from_its_time_on() {
        let mut h = MappingHistory::new();
        h.map(m(7, 0x10000, 0x20000, "/usr/lib/a.so", 10));
        // dlclose + dlopen of another library at an overlapping range.
        h.map(m(7, 0x18000, 0x28000, "/usr/lib/b.so", 50));
        assert_eq!(path_at(&h, 7, 0x11000, 20), Some("/usr/lib/a.so"));
        assert_eq!(path_at(&h, 7, 0x19000, 20), Some("/usr/lib/a.so"));
        assert_eq!(path_at(&h, 7, 0x19000, 60), Some("/usr/lib/b.so"));
        // a.so's lower half is gone too (perf has no munmap: the overlap ends all of it).
        assert_eq!(h.lookup(7, 0x11000, 60).unwrap().until_ns, 50);
        // A record racing the /proc scan: one entry.
        h.map(m(7, 0x18000, 0x28000, "/usr/lib/b.so", 70));
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn pid_reuse_starts_from_the_new_parent_and_fork_copies_mappings() {
        let mut h = MappingHistory::new();
        h.map(m(1, 0x1000, 0x2000, "/bin/sh", 0));
        h.map(m(2, 0x1000, 0x2000, "/usr/bin/old", 0));
        h.exit(2, 40);
        assert_eq!(path_at(&h, 2, 0x1800, 30), Some("/usr/bin/old"));
        // Pid 2 reused by a child of 1.
        h.fork(1, 2, 60);
        assert_eq!(path_at(&h, 2, 0x1800, 70), Some("/bin/sh"));
        assert_eq!(path_at(&h, 2, 0x1800, 30), Some("/usr/bin/old"));
        // The reuse took pid 2 off the exited list: pruning keeps it.
        assert_eq!(h.prune_exited(1000), 0);
        h.exit(2, 80);
        assert_eq!(h.prune_exited(1000), 1);
        assert_eq!(path_at(&h, 2, 0x1800, 70), None);
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn only_used_mappings_go_to_the_trace_and_again_when_they_end() {
        let mut h = MappingHistory::new();
        h.map(m(3, 0x1000, 0x2000, "/bin/x", 0));
        h.map(m(3, 0x5000, 0x6000, "/lib/y.so", 0));
        assert!(h.take_changed().is_empty());
        assert_eq!(h.lookup_used(3, 0x1100, 5).unwrap().path, "/bin/x");
        let t = h.take_changed();
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].until_ns, MappingEntry::OPEN);
        assert!(h.take_changed().is_empty());
        h.exit(3, 9);
        let t = h.take_changed();
        assert_eq!((t.len(), t[0].until_ns), (1, 9));
        // Read back: the later entry replaces the earlier one.
        let mut r = MappingHistory::new();
        let mut first = t[0].clone();
        first.until_ns = MappingEntry::OPEN;
        r.insert_stored(first);
        r.insert_stored(t[0].clone());
        assert_eq!(r.len(), 1);
        assert_eq!(r.lookup(3, 0x1100, 5).unwrap().until_ns, 9);
    }
}

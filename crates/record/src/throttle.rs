//! CPU-quota throttling records (`EV_THROTTLE`, docs/RECORDER.md "Throttling"): decoded
//! into [`ThrottleEvent`]s for the trace's throttle sections, with the paths of cgroup v1
//! groups (their ids are not in the trace's cgroup table, which is cgroup v2).

use crate::raw::{RawEv, THR_REFILL, THR_SWITCH_OUT};
use chainrec_format::{ThrottleDelta, ThrottleEvent, ThrottleGroup, ThrottleKind};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How deep below a v1 hierarchy's mount a group is looked for.
const MAX_DEPTH: usize = 16;

/// Throttle records converted so far and not yet written, and the v1 group names found.
#[derive(Debug, Default)]
pub(crate) struct Throttles {
    pub(crate) pending: ThrottleDelta,
    /// Groups already looked up (None: not found).
    names: HashMap<ThrottleGroup, Option<String>>,
    /// Throttled switch-outs and refills recorded (summary).
    pub(crate) switch_outs: u64,
    pub(crate) refills: u64,
}

impl Throttles {
    /// Take one `EV_THROTTLE` record (a malformed one returns false).
    pub(crate) fn take(&mut self, e: &RawEv) -> bool {
        let kind = match e.aux {
            THR_SWITCH_OUT => ThrottleKind::SwitchOut,
            THR_REFILL => ThrottleKind::Refill,
            _ => return false,
        };
        let thr = e.throttle();
        let group = ThrottleGroup {
            hierarchy: thr.hierarchy,
            cgroup: u64::from(thr.cgid_lo) | u64::from(thr.cgid_hi) << 32,
        };
        match kind {
            ThrottleKind::SwitchOut => self.switch_outs += 1,
            ThrottleKind::Refill => self.refills += 1,
        }
        self.pending.events.push(ThrottleEvent {
            ts: e.ts,
            cpu: u32::from(e.cpu),
            tid: if kind == ThrottleKind::SwitchOut {
                thr.tid
            } else {
                0
            },
            kind,
            group,
        });
        if group.hierarchy != 0 && !self.names.contains_key(&group) {
            let name = v1_group_path(group);
            if let Some(n) = &name {
                self.pending.names.push((group, n.clone()));
            }
            self.names.insert(group, name);
        }
        true
    }
}

/// The path of a cgroup v1 group below its hierarchy's mount, found by its id (= the
/// inode number of its directory) under the mount of the hierarchy's controllers.
fn v1_group_path(group: ThrottleGroup) -> Option<String> {
    let controllers = std::fs::read_to_string("/proc/cgroups").ok()?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = v1_mount(&controllers, &mountinfo, group.hierarchy)?;
    let found = find_inode(&mount, group.cgroup, MAX_DEPTH)?;
    let rel = found.strip_prefix(&mount).ok()?;
    Some(format!("/{}", rel.display()))
}

/// The mount point of v1 hierarchy `hierarchy`: a `cgroup` mount whose super options name
/// one of the controllers `/proc/cgroups` lists for it.
fn v1_mount(proc_cgroups: &str, mountinfo: &str, hierarchy: u32) -> Option<PathBuf> {
    let controllers: Vec<&str> = proc_cgroups
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let name = f.next()?;
            let h: u32 = f.next()?.parse().ok()?;
            (h == hierarchy).then_some(name)
        })
        .collect();
    mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let mut r = right.split_whitespace();
        if r.next()? != "cgroup" {
            return None;
        }
        let opts = r.nth(1)?;
        let root = left.split_whitespace().nth(3)?;
        let point = left.split_whitespace().nth(4)?;
        (root == "/" && opts.split(',').any(|o| controllers.contains(&o)))
            .then(|| PathBuf::from(point))
    })
}

/// The directory under `dir` (itself included) with inode `ino`.
fn find_inode(dir: &Path, ino: u64, depth: usize) -> Option<PathBuf> {
    if std::fs::metadata(dir).ok()?.ino() == ino {
        return Some(dir.to_path_buf());
    }
    if depth == 0 {
        return None;
    }
    for e in std::fs::read_dir(dir).ok()?.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            if let Some(p) = find_inode(&e.path(), ino, depth - 1) {
                return Some(p);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_mount_of_a_v1_hierarchy() {
        let cgroups = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpuset\t3\t1\t1\ncpu\t1\t2\t1\ncpuacct\t2\t1\t1\n";
        let mountinfo = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n";
        assert_eq!(
            v1_mount(cgroups, mountinfo, 1),
            Some(PathBuf::from("/sys/fs/cgroup/cpu"))
        );
        assert_eq!(
            v1_mount(cgroups, mountinfo, 2),
            Some(PathBuf::from("/sys/fs/cgroup/cpuacct"))
        );
        assert_eq!(v1_mount(cgroups, mountinfo, 7), None);
    }
}

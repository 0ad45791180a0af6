//! Cgroup ids → paths. BPF reports a task's cgroup as its cgroup v2 id (the kernfs node
//! id, `bpf_get_current_cgroup_id()`), which on 64-bit kernels is also the inode number of
//! the group's directory under the cgroup2 mount. Paths are found by walking that mount
//! and matching directory inode numbers (from `readdir`, no `stat`): once at the first
//! unknown id, again at each later unknown one (a group created during the recording). An
//! id still missing after a walk was removed before the walk saw it: it stays unresolved
//! (the analysis shows `[cgroup id N]`) and is counted, never walked for again.

use chainrec_format::CgroupEntry;
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Resolves cgroup ids to paths below the cgroup2 mount, with a cache.
pub(crate) struct CgroupResolver {
    /// Mount point of the cgroup2 hierarchy (None: not mounted; nothing resolves).
    root: Option<PathBuf>,
    paths: HashMap<u64, String>,
    /// Ids already handed out (resolved or not): each gets one entry at most.
    done: HashSet<u64>,
    /// Ids that a walk did not find.
    pub(crate) unresolved: u64,
    /// Walks of the hierarchy so far.
    pub(crate) walks: u64,
}

impl CgroupResolver {
    /// A resolver for this machine's cgroup2 mount (from /proc/self/mountinfo).
    pub(crate) fn new() -> Self {
        let root = std::fs::read_to_string("/proc/self/mountinfo")
            .ok()
            .and_then(|m| cgroup2_mount(&m));
        Self::with_root(root)
    }

    /// A resolver walking `root` (tests).
    pub(crate) fn with_root(root: Option<PathBuf>) -> Self {
        CgroupResolver {
            root,
            paths: HashMap::new(),
            done: HashSet::new(),
            unresolved: 0,
            walks: 0,
        }
    }

    /// Mount point of the cgroup2 hierarchy, if any.
    pub(crate) fn root(&self) -> Option<&Path> {
        self.root.as_deref()
    }

    /// Entries for those of `ids` not handed out before (the resolved ones; unresolved ids
    /// are counted in [`Self::unresolved`]). At most one walk per call.
    pub(crate) fn entries_for(&mut self, ids: impl IntoIterator<Item = u64>) -> Vec<CgroupEntry> {
        let fresh: Vec<u64> = ids
            .into_iter()
            .filter(|&id| id != 0 && self.done.insert(id))
            .collect();
        if fresh.iter().any(|id| !self.paths.contains_key(id)) {
            self.walk();
        }
        let mut out = Vec::new();
        for id in fresh {
            match self.paths.get(&id) {
                Some(p) => out.push(CgroupEntry {
                    id,
                    path: p.clone(),
                }),
                None => self.unresolved += 1,
            }
        }
        out
    }

    /// Re-read the whole hierarchy (ids of removed groups are kept: the trace may still
    /// need them).
    fn walk(&mut self) {
        let Some(root) = self.root.clone() else {
            return;
        };
        self.walks += 1;
        if let Ok(m) = std::fs::metadata(&root) {
            self.paths.insert(m.ino(), "/".to_string());
        }
        let mut stack = vec![(root, String::new())];
        while let Some((dir, rel)) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue; // removed meanwhile
            };
            for ent in rd.flatten() {
                if !ent.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let name = ent.file_name().to_string_lossy().into_owned();
                let path = format!("{rel}/{name}");
                self.paths.insert(ent.ino(), path.clone());
                stack.push((ent.path(), path));
            }
        }
    }
}

/// The mount point of the cgroup2 file system in a `/proc/self/mountinfo` text (the first
/// one; on a hybrid host `/sys/fs/cgroup/unified`).
pub(crate) fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|l| {
        // id parent major:minor root mount-point options [optional fields] - fstype source ...
        let (pre, post) = l.split_once(" - ")?;
        if post.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mnt = pre.split_whitespace().nth(4)?;
        Some(PathBuf::from(unescape_octal(mnt)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount_in_hybrid_and_unified_layouts() {
        let hybrid = "\
30 23 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,xattr,name=systemd
";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let unified =
            "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        let escaped = "35 24 0:30 / /mnt/cg\\040two rw - cgroup2 none rw\n";
        assert_eq!(cgroup2_mount(escaped), Some(PathBuf::from("/mnt/cg two")));
        assert_eq!(cgroup2_mount("1 0 0:1 / / rw - ext4 /dev/sda rw\n"), None);
    }

    /// A directory tree stands in for the hierarchy: ids are inode numbers.
    #[test]
    fn resolves_by_inode_once_and_counts_what_it_cannot() {
        let dir = chainrec_testkit::scratch::ScratchDir::new("cgroups");
        let root = dir.file("cg");
        std::fs::create_dir_all(root.join("system.slice/foo.service")).unwrap();
        std::fs::write(root.join("system.slice/cgroup.procs"), "").unwrap();
        let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
        let foo = ino(&root.join("system.slice/foo.service"));
        let mut r = CgroupResolver::with_root(Some(root.clone()));
        let got = r.entries_for([foo, ino(&root)]);
        assert_eq!(
            got,
            vec![
                CgroupEntry {
                    id: foo,
                    path: "/system.slice/foo.service".into()
                },
                CgroupEntry {
                    id: ino(&root),
                    path: "/".into()
                },
            ]
        );
        assert_eq!(r.walks, 1);
        // Known ids are not handed out again, and need no walk.
        assert!(r.entries_for([foo]).is_empty());
        assert_eq!(r.walks, 1);
        // A group created later resolves (one more walk); a vanished id does not.
        std::fs::create_dir_all(root.join("new")).unwrap();
        let new = ino(&root.join("new"));
        let got = r.entries_for([new, u64::MAX]);
        assert_eq!(
            got,
            vec![CgroupEntry {
                id: new,
                path: "/new".into()
            }]
        );
        assert_eq!((r.walks, r.unresolved), (2, 1));
        assert!(r.entries_for([u64::MAX]).is_empty());
        assert_eq!(r.walks, 2, "an unresolved id is not walked for twice");
    }
}

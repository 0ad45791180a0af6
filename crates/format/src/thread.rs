//! Who a thread is, over time, and whether it is selected: the one answer every reader
//! shares (the engine, the reports, the flight-recorder triggers).
//!
//! * [`Threads`]: each thread's name, process and kind as of the event being read — the
//!   task table first, then `comm` events (exec, rename) and forks.
//! * [`ThreadSelector`]: `-p`, `-t`, `--comm`, `--cgroup`, `-u`, `-k`.
//! * [`unknown_thread_comm`]: how a thread the trace never named is called (`tid-N`).

use crate::{Comm, Event, Tables, Tid};
use regex::Regex;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Name of the idle task (tid 0), as the kernel calls it.
pub const IDLE_COMM: &str = "swapper";

/// The name of a thread the trace never named (not in the task table, no `comm` event):
/// `tid-N`. Every output uses this one spelling.
pub fn unknown_thread_comm(tid: Tid) -> Comm {
    Comm::new(&format!("tid-{tid}"))
}

/// What a thread is at some point of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadIdentity {
    /// Its name (`comm`).
    pub comm: Comm,
    /// Its thread group (process); 0 when unknown.
    pub tgid: Tid,
    /// A kernel thread.
    pub kernel_thread: bool,
}

impl ThreadIdentity {
    /// The identity of a thread the trace knows nothing about: [`unknown_thread_comm`],
    /// process 0, not a kernel thread; tid 0 is the idle task ([`IDLE_COMM`], a kernel
    /// thread).
    pub fn unknown(tid: Tid) -> ThreadIdentity {
        if tid == 0 {
            return ThreadIdentity {
                comm: Comm::new(IDLE_COMM),
                tgid: 0,
                kernel_thread: true,
            };
        }
        ThreadIdentity {
            comm: unknown_thread_comm(tid),
            tgid: 0,
            kernel_thread: false,
        }
    }
}

/// A hasher for thread ids: one multiply (Fibonacci hashing), since a report looks a
/// thread up for every event and SipHash would dominate.
#[derive(Default)]
pub struct TidHasher(u64);

impl Hasher for TidHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (u64::from(v) ^ self.0).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Every thread's identity as of the last event applied: the task table (first sighting),
/// then `comm` events and forks (`wakeup_new`), fed in time order.
#[derive(Clone, Debug, Default)]
pub struct Threads {
    map: HashMap<Tid, ThreadIdentity, BuildHasherDefault<TidHasher>>,
}

impl Threads {
    /// Start from the task table.
    pub fn new(tables: &Tables) -> Threads {
        let mut map = HashMap::default();
        for t in tables.tasks.values() {
            map.insert(
                t.tid,
                ThreadIdentity {
                    comm: t.comm,
                    tgid: t.tgid,
                    kernel_thread: t.kernel_thread,
                },
            );
        }
        Threads { map }
    }

    /// Follow one event: a `comm` event renames (and sets the process), a fork sets the
    /// child's process and, for a child the trace has not named, the parent's name and kind
    /// (fork copies them). Returns the previous name on a `comm` event.
    pub fn apply(&mut self, e: &Event) -> Option<Comm> {
        match e {
            Event::Comm(c) => {
                let kernel_thread = self.map.get(&c.tid).is_some_and(|t| t.kernel_thread);
                let new = ThreadIdentity {
                    comm: c.comm,
                    tgid: c.tgid,
                    kernel_thread,
                };
                self.map.insert(c.tid, new).map(|old| old.comm)
            }
            Event::WakeupNew(w) => {
                let parent = self.map.get(&w.parent_tid).copied();
                let child = self.map.entry(w.child_tid).or_insert_with(|| match parent {
                    Some(p) => p,
                    None => ThreadIdentity::unknown(w.child_tid),
                });
                child.tgid = w.child_tgid;
                None
            }
            _ => None,
        }
    }

    /// What the trace has said about `tid`, if anything.
    pub fn get(&self, tid: Tid) -> Option<&ThreadIdentity> {
        self.map.get(&tid)
    }

    /// `tid`'s identity, [`ThreadIdentity::unknown`] when the trace never named it (the
    /// idle task: `swapper`, unless the task table names it).
    pub fn identity(&self, tid: Tid) -> ThreadIdentity {
        self.map
            .get(&tid)
            .copied()
            .unwrap_or_else(|| ThreadIdentity::unknown(tid))
    }

    /// `tid`'s current name as text (`tid-N` when unknown, `swapper` for 0).
    pub fn name(&self, tid: Tid) -> String {
        self.identity(tid).comm.to_string()
    }
}

/// `--cgroup REGEX`, bound to a trace: which of its cgroups match (by path), and each
/// thread's cgroups over time. A thread matches at a time when it was in a matching cgroup
/// then; where no time applies, when it was in one at any time.
#[derive(Clone, Debug)]
pub struct CgroupSelector {
    regex: Regex,
    /// Ids of the matching cgroups.
    ids: HashSet<u64>,
    /// The cgroups over time of the threads that were ever in a matching one.
    threads: HashMap<Tid, Vec<(u64, u64)>>,
}

impl CgroupSelector {
    /// Bind `regex` (matched against each cgroup's path, or `[cgroup id N]` for an
    /// unresolved one) to the cgroups of `tables`. None when the trace records none.
    pub fn new(regex: Regex, tables: &Tables) -> Option<CgroupSelector> {
        if !tables.has_cgroups() {
            return None;
        }
        let all: HashSet<u64> = tables
            .task_cgroups
            .values()
            .flatten()
            .map(|&(_, c)| c)
            .collect();
        let ids: HashSet<u64> = all
            .into_iter()
            .filter(|&id| regex.is_match(&tables.cgroup_path(id)))
            .collect();
        let threads = tables
            .task_cgroups
            .iter()
            .filter(|(_, l)| l.iter().any(|(_, c)| ids.contains(c)))
            .map(|(&t, l)| (t, l.clone()))
            .collect();
        Some(CgroupSelector {
            regex,
            ids,
            threads,
        })
    }

    /// The regex.
    pub fn regex(&self) -> &Regex {
        &self.regex
    }

    /// Was `tid` in a matching cgroup at `ts` (before its first known cgroup: that one)?
    pub fn matches_at(&self, tid: Tid, ts: u64) -> bool {
        let Some(l) = self.threads.get(&tid) else {
            return false;
        };
        let at = l.partition_point(|&(t, _)| t <= ts);
        self.ids.contains(&l[at.saturating_sub(1)].1)
    }

    /// Was `tid` ever in a matching cgroup?
    pub fn matches_ever(&self, tid: Tid) -> bool {
        self.threads.contains_key(&tid)
    }
}

/// Which threads: `-p` (processes), `-t` (threads), `--comm` (name regex), `--cgroup`,
/// `-u`/`-k` (user or kernel threads). Every given criterion must hold; the default keeps
/// every thread. Used by the analysis filter, the reports and the flight-recorder
/// triggers.
#[derive(Clone, Debug, Default)]
pub struct ThreadSelector {
    /// Thread groups (`-p`); empty = all.
    pub pids: Vec<Tid>,
    /// Threads (`-t`); empty = all.
    pub tids: Vec<Tid>,
    /// Name (at the time that matters: switch-out, sample, event).
    pub comm: Option<Regex>,
    /// Cgroup (at that time, or at any time where none applies).
    pub cgroup: Option<Arc<CgroupSelector>>,
    /// User threads only (`-u`).
    pub user_only: bool,
    /// Kernel threads only (`-k`).
    pub kernel_only: bool,
}

impl ThreadSelector {
    /// True when no criterion is set (every thread passes).
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
            && self.tids.is_empty()
            && self.comm.is_none()
            && self.cgroup.is_none()
            && !self.user_only
            && !self.kernel_only
    }

    /// Does thread `tid`, being `who`, pass every criterion but the cgroup?
    pub fn matches_identity(&self, tid: Tid, who: &ThreadIdentity) -> bool {
        (self.tids.is_empty() || self.tids.contains(&tid))
            && (self.pids.is_empty() || self.pids.contains(&who.tgid))
            && (!self.user_only || !who.kernel_thread)
            && (!self.kernel_only || who.kernel_thread)
            && self
                .comm
                .as_ref()
                .is_none_or(|re| re.is_match(&who.comm.as_str()))
    }

    /// Does thread `tid`, being `who` at `ts`, pass (its cgroup at `ts`)?
    pub fn matches_at(&self, tid: Tid, who: &ThreadIdentity, ts: u64) -> bool {
        self.matches_identity(tid, who)
            && self.cgroup.as_ref().is_none_or(|c| c.matches_at(tid, ts))
    }

    /// Does thread `tid`, being `who`, pass where no time applies (in a matching cgroup at
    /// any time)?
    pub fn matches_ever(&self, tid: Tid, who: &ThreadIdentity) -> bool {
        self.matches_identity(tid, who) && self.cgroup.as_ref().is_none_or(|c| c.matches_ever(tid))
    }

    /// `all threads`, or the criteria, e.g. `pid 10, comm ~ ^cr-`.
    pub fn describe(&self) -> String {
        let list = |v: &[Tid]| {
            v.iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut parts = Vec::new();
        if !self.pids.is_empty() {
            parts.push(format!("pid {}", list(&self.pids)));
        }
        if !self.tids.is_empty() {
            parts.push(format!("tid {}", list(&self.tids)));
        }
        if let Some(re) = &self.comm {
            parts.push(format!("comm ~ {}", re.as_str()));
        }
        if let Some(c) = &self.cgroup {
            parts.push(format!("cgroup ~ {}", c.regex().as_str()));
        }
        if self.user_only {
            parts.push("user threads".into());
        }
        if self.kernel_only {
            parts.push("kernel threads".into());
        }
        if parts.is_empty() {
            "all threads".into()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CommReason, TaskComm, TaskEntry, WakeupNew};

    fn comm_event(ts: u64, tid: Tid, tgid: Tid, comm: &str) -> Event {
        Event::Comm(TaskComm {
            ts,
            tid,
            tgid,
            comm: Comm::new(comm),
            reason: CommReason::Exec,
        })
    }

    /// The table first, then exec renames (keeping the kind), a fork copies the parent's
    /// name and kind to an unnamed child; the unknown and the idle task have one name each.
    #[test]
    fn identity_follows_the_table_then_comm_events_and_forks() {
        let mut tables = Tables::default();
        tables.tasks.insert(
            5,
            TaskEntry {
                tid: 5,
                tgid: 5,
                comm: Comm::new("kworker/0:1"),
                kernel_thread: true,
            },
        );
        let mut th = Threads::new(&tables);
        assert_eq!(th.name(5), "kworker/0:1");
        assert_eq!(th.name(9), "tid-9");
        assert_eq!(th.name(0), IDLE_COMM);
        assert_eq!(th.identity(9), ThreadIdentity::unknown(9));
        let old = th.apply(&comm_event(1, 5, 5, "renamed"));
        assert_eq!(old, Some(Comm::new("kworker/0:1")));
        assert_eq!(
            th.identity(5),
            ThreadIdentity {
                comm: Comm::new("renamed"),
                tgid: 5,
                kernel_thread: true
            }
        );
        th.apply(&Event::WakeupNew(WakeupNew {
            ts: 2,
            cpu: 0,
            parent_tid: 5,
            child_tid: 6,
            child_tgid: 6,
        }));
        assert_eq!(th.name(6), "renamed");
        assert_eq!(th.identity(6).tgid, 6);
        assert!(th.identity(6).kernel_thread);
        // A fork from an unknown parent: the child keeps the fallback name, gets its tgid.
        th.apply(&Event::WakeupNew(WakeupNew {
            ts: 3,
            cpu: 0,
            parent_tid: 77,
            child_tid: 78,
            child_tgid: 77,
        }));
        assert_eq!((th.name(78), th.identity(78).tgid), ("tid-78".into(), 77));
    }

    #[test]
    fn the_selector_needs_every_criterion_and_describes_them() {
        let who = ThreadIdentity {
            comm: Comm::new("cr-relay"),
            tgid: 10,
            kernel_thread: false,
        };
        assert!(ThreadSelector::default().matches_ever(11, &who));
        assert_eq!(ThreadSelector::default().describe(), "all threads");
        let s = ThreadSelector {
            pids: vec![10],
            comm: Some(Regex::new("^cr-").unwrap()),
            ..ThreadSelector::default()
        };
        assert!(s.matches_identity(11, &who));
        assert!(!s.matches_identity(11, &ThreadIdentity { tgid: 12, ..who }));
        assert!(!s.matches_identity(
            11,
            &ThreadIdentity {
                comm: Comm::new("bash"),
                ..who
            }
        ));
        let k = ThreadSelector {
            kernel_only: true,
            ..ThreadSelector::default()
        };
        assert!(!k.matches_identity(11, &who));
        assert_eq!(s.describe(), "pid 10, comm ~ ^cr-");
    }
}

//! CPU-quota throttling seen by the recorder (docs/CHAINS.md "Throttling", docs/FORMAT.md
//! "Throttle sections"): which switch-outs throttling forced, in which group, and when the
//! groups' quota timers refilled them. Kept beside the event stream, in optional sections
//! (format 2.1), not as events: the kind column of the chunks has no free tag (a new event
//! kind is a new major version), these records are rare (at most one switch-out per
//! throttled thread and period, one refill per throttled group and period), and the engine
//! only needs to look them up at a thread's switch-in.

use crate::Tid;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A CPU-controller group: its cgroup id (the kernfs node id, which is also the inode
/// number of its directory) in hierarchy `hierarchy` (0 = cgroup v2, the unified
/// hierarchy; else the id of the cgroup v1 hierarchy the `cpu` controller is mounted on,
/// as in `/proc/cgroups`). v1 and v2 ids come from different id spaces.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct ThrottleGroup {
    /// Cgroup hierarchy id (0 = cgroup v2).
    pub hierarchy: u32,
    /// Cgroup id within it.
    pub cgroup: u64,
}

/// What a [`ThrottleEvent`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ThrottleKind {
    /// `tid`'s runnable switch-out at `ts` (the [`crate::Switch`] with the same `ts` and
    /// `prev_tid`) was forced by throttling: `group` (the nearest throttled ancestor of
    /// its group, or its group) had used up its CPU quota.
    SwitchOut,
    /// `group`'s quota timer (CFS bandwidth period or slack timer, hardirq) ran at `ts`
    /// while some of its run queues were throttled: the refill that unthrottles them.
    Refill,
}

/// One throttling record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleEvent {
    /// Trace-clock time.
    pub ts: u64,
    /// CPU it happened on.
    pub cpu: u32,
    /// The thread switched out ([`ThrottleKind::SwitchOut`]); 0 for a refill.
    pub tid: Tid,
    /// What happened.
    pub kind: ThrottleKind,
    /// The group.
    pub group: ThrottleGroup,
}

/// The payload of one throttle section: records and names of groups that the trace's
/// cgroup table does not hold (cgroup v1 `cpu` hierarchies).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThrottleDelta {
    /// Records, in any order.
    pub events: Vec<ThrottleEvent>,
    /// Paths below the hierarchy's mount (`/chainrec/grp`), for groups of a v1 hierarchy.
    pub names: Vec<(ThrottleGroup, String)>,
}

impl ThrottleDelta {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty() && self.names.is_empty()
    }
}

/// All throttling records of a trace, indexed for the engine.
#[derive(Clone, Debug, Default)]
pub struct Throttling {
    /// Throttled switch-outs: (tid, switch time) → group.
    switch_outs: HashMap<(Tid, u64), ThrottleGroup>,
    /// Refill times per group, sorted.
    refills: HashMap<ThrottleGroup, Vec<u64>>,
    /// Paths of v1 groups.
    names: HashMap<ThrottleGroup, String>,
}

impl Throttling {
    /// Merge a section's records.
    pub fn merge(&mut self, d: &ThrottleDelta) {
        for e in &d.events {
            match e.kind {
                ThrottleKind::SwitchOut => {
                    self.switch_outs.insert((e.tid, e.ts), e.group);
                }
                ThrottleKind::Refill => {
                    let v = self.refills.entry(e.group).or_default();
                    let at = v.partition_point(|&t| t <= e.ts);
                    if at == 0 || v[at - 1] != e.ts {
                        v.insert(at, e.ts);
                    }
                }
            }
        }
        for (g, name) in &d.names {
            self.names.insert(*g, name.clone());
        }
    }

    /// True when the trace has no throttling records.
    pub fn is_empty(&self) -> bool {
        self.switch_outs.is_empty() && self.refills.is_empty()
    }

    /// Number of throttled switch-outs.
    pub fn switch_out_count(&self) -> usize {
        self.switch_outs.len()
    }

    /// The group whose throttling forced `tid`'s switch-out at `ts`, if it did.
    #[inline]
    pub fn switch_out(&self, tid: Tid, ts: u64) -> Option<ThrottleGroup> {
        if self.switch_outs.is_empty() {
            return None;
        }
        self.switch_outs.get(&(tid, ts)).copied()
    }

    /// The latest refill of `group` in `(after, until]`: when a thread throttled at `after`
    /// and switched in at `until` was unthrottled (a refill that left it throttled is
    /// followed by a later one before its switch-in).
    pub fn refill_in(&self, group: ThrottleGroup, after: u64, until: u64) -> Option<u64> {
        let v = self.refills.get(&group)?;
        let at = v.partition_point(|&t| t <= until);
        v[..at].last().copied().filter(|&t| t > after)
    }

    /// The path of a v1 group, if the recorder resolved it.
    pub fn v1_name(&self, group: ThrottleGroup) -> Option<&str> {
        self.names.get(&group).map(String::as_str)
    }

    /// Everything, as one delta (to write the records out again: flight dumps, rotation).
    pub fn to_delta(&self) -> ThrottleDelta {
        let mut events: Vec<ThrottleEvent> = self
            .switch_outs
            .iter()
            .map(|(&(tid, ts), &group)| ThrottleEvent {
                ts,
                cpu: 0,
                tid,
                kind: ThrottleKind::SwitchOut,
                group,
            })
            .chain(self.refills.iter().flat_map(|(&group, v)| {
                v.iter().map(move |&ts| ThrottleEvent {
                    ts,
                    cpu: 0,
                    tid: 0,
                    kind: ThrottleKind::Refill,
                    group,
                })
            }))
            .collect();
        events.sort_by_key(|e| (e.ts, e.tid));
        let mut names: Vec<(ThrottleGroup, String)> =
            self.names.iter().map(|(g, n)| (*g, n.clone())).collect();
        names.sort();
        ThrottleDelta { events, names }
    }
}

impl crate::Tables {
    /// What a throttled level names its group by: its cgroup path (a v2 group's from the
    /// cgroup table, a v1 group's below its hierarchy's mount as the recorder resolved it),
    /// else `cgroup <id>`.
    pub fn throttle_group_name(&self, group: ThrottleGroup) -> String {
        let path = if group.hierarchy == 0 {
            self.cgroups.get(&group.cgroup).map(|c| c.path.as_str())
        } else {
            self.throttling.v1_name(group)
        };
        match path {
            Some(p) => p.to_string(),
            None => format!("cgroup {}", group.cgroup),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refill_in_takes_the_latest_refill_before_the_switch_in() {
        let g = ThrottleGroup {
            hierarchy: 1,
            cgroup: 17,
        };
        let mut t = Throttling::default();
        t.merge(&ThrottleDelta {
            events: [300, 100, 200]
                .into_iter()
                .map(|ts| ThrottleEvent {
                    ts,
                    cpu: 0,
                    tid: 0,
                    kind: ThrottleKind::Refill,
                    group: g,
                })
                .collect(),
            names: vec![],
        });
        assert_eq!(t.refill_in(g, 50, 250), Some(200));
        assert_eq!(t.refill_in(g, 200, 250), None);
        assert_eq!(t.refill_in(g, 0, 99), None);
        assert_eq!(t.refill_in(g, 250, 1000), Some(300));
    }
}

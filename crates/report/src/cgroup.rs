//! A thread's cgroup as the reports print it: the path, and the container and pod the
//! path names (`top`, `waits`, Perfetto; Parquet has the same columns).

use chainrec_format::{container_info, Tables, Tid};
use serde::Serialize;

/// The cgroup of a thread at some time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CgroupLabel {
    /// Path below the cgroup2 mount (`[cgroup id N]` when the recorder could not resolve
    /// it).
    pub cgroup: String,
    /// The container id (64 hex) the path names, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub container_id: Option<String>,
    /// The Kubernetes pod UID the path names, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_uid: Option<String>,
}

impl CgroupLabel {
    /// The label of cgroup `id` of `tables`.
    pub fn of(tables: &Tables, id: u64) -> CgroupLabel {
        let cgroup = tables.cgroup_path(id).into_owned();
        let c = container_info(&cgroup);
        CgroupLabel {
            container_id: c.as_ref().and_then(|c| c.container_id.clone()),
            pod_uid: c.and_then(|c| c.pod_uid),
            cgroup,
        }
    }

    /// The cgroup of `tid` at `ts`, when the trace records it.
    pub fn at(tables: &Tables, tid: Tid, ts: u64) -> Option<CgroupLabel> {
        tables
            .cgroup_at(tid, ts)
            .map(|id| CgroupLabel::of(tables, id))
    }

    /// What the path names: `container <12 hex>, pod <uid>` (empty when nothing).
    pub fn named(&self) -> String {
        let mut extra = Vec::new();
        if let Some(c) = &self.container_id {
            extra.push(format!("container {}", &c[..12.min(c.len())]));
        }
        if let Some(p) = &self.pod_uid {
            extra.push(format!("pod {p}"));
        }
        extra.join(", ")
    }

    /// One line of text: `/path`, then `(container <12 hex>, pod <uid>)` when known.
    pub fn text(&self) -> String {
        match self.named() {
            n if n.is_empty() => self.cgroup.clone(),
            n => format!("{} ({n})", self.cgroup),
        }
    }
}

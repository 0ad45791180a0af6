//! Goroutine waits and wakings of Go programs (issue 38, docs/FORMAT.md "Goroutine
//! sections"): where a goroutine parked (`runtime.gopark`: its wait reason and its own
//! stack) and which goroutine, or which runtime context, readied it (`runtime.ready`:
//! the waker's goroutine and stack). Kept beside the event stream, in optional sections
//! (format 2.2), not as events: the kind column of the chunks has no free tag (a new
//! event kind is a new major version, which every older reader would refuse), and a
//! trace with goroutine sections stays a 2.x trace that 2.0 and 2.1 readers read (they
//! skip the sections and see thread-level chains).

use crate::{StackId, Tid};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a [`GoEvent`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GoEventKind {
    /// Goroutine `goid` parked (entry of `runtime.gopark`, on its own stack, in thread
    /// `tid`): `reason` is the runtime's `waitReason` (named by [`GoProcess::reasons`]),
    /// `stack` the goroutine's user stack there.
    Park,
    /// Goroutine `goid` was readied (entry of `runtime.ready`, in thread `tid`): by
    /// goroutine `waker` (`m.curg` of the thread), or by the runtime itself when `waker`
    /// is 0 (the scheduler's timers, with no goroutine on the thread); `stack` is the
    /// waker's user stack (the system stack `ready` runs on, then the waker goroutine's
    /// frames above its call of `systemstack`).
    Ready,
}

/// One goroutine record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoEvent {
    /// Trace-clock time.
    pub ts: u64,
    /// CPU it happened on.
    pub cpu: u32,
    /// The thread (an M of the Go runtime) the probe fired in.
    pub tid: Tid,
    /// Its process.
    pub tgid: Tid,
    /// Park or ready.
    pub kind: GoEventKind,
    /// The goroutine that parked, or the one readied.
    pub goid: u64,
    /// [`GoEventKind::Ready`]: the waker goroutine (0: the runtime); 0 for a park.
    pub waker: u64,
    /// [`GoEventKind::Park`]: the runtime's `waitReason` byte; 0 for a ready.
    pub reason: u8,
    /// User stack (the parking goroutine's, or the waker's), or a reserved reason.
    pub stack: StackId,
}

/// A goroutine started running (entry of `runtime.execute(gp, inheritTime)`, the
/// scheduler handing goroutine `goid` to thread `tid`): the end of the runnable time that
/// began at its ready. Format 2.3: kept in optional sections of their own (kind 0x84), not
/// in the goroutine sections, whose record kinds a 2.2 reader decodes as a closed enum
/// (a third kind there would make it fail on the whole section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoExecute {
    /// Trace-clock time.
    pub ts: u64,
    /// CPU it happened on.
    pub cpu: u32,
    /// The thread (M) about to run the goroutine.
    pub tid: Tid,
    /// Its process.
    pub tgid: Tid,
    /// The goroutine.
    pub goid: u64,
}

/// A Go process stopped or started the world (entry of `runtime.stopTheWorldWithSema`;
/// `runtime.startTheWorldWithSema` once it has handed the Ps to their Ms): between a stop and the next start of the same process
/// no goroutine of it runs (a GC's sweep or mark termination, or another stop-the-world).
/// Format 2.4: kept in optional sections of their own (kind 0x85), so older readers skip
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoStw {
    /// Trace-clock time.
    pub ts: u64,
    /// CPU it happened on.
    pub cpu: u32,
    /// The thread (M) stopping or starting the world.
    pub tid: Tid,
    /// Its process.
    pub tgid: Tid,
    /// The goroutine on whose behalf (`m.curg`; 0: none).
    pub goid: u64,
    /// True: the world stops; false: it starts again.
    pub stop: bool,
    /// Why, in Go 1.22+'s `runtime.stwReason` numbering ([`stw_reason_name`]); 0: unknown
    /// (Go 1.19 records only the GC's two reasons; only stops carry one).
    pub reason: u8,
}

/// The name of a stop-the-world reason (`runtime.stwReasonStrings` of Go 1.22 to 1.24),
/// `None` for 0 (unknown) and numbers past the table.
pub fn stw_reason_name(reason: u8) -> Option<&'static str> {
    const NAMES: [&str; 17] = [
        "unknown",
        "GC mark termination",
        "GC sweep termination",
        "write heap dump",
        "goroutine profile",
        "goroutine profile cleanup",
        "all goroutines stack trace",
        "read mem stats",
        "AllThreadsSyscall",
        "GOMAXPROCS",
        "start trace",
        "stop trace",
        "CountPagesInUse (test)",
        "ReadMetricsSlow (test)",
        "ReadMemStatsSlow (test)",
        "PageCachePagesLeaked (test)",
        "ResetDebugLog (test)",
    ];
    match reason {
        0 => None,
        r => NAMES.get(r as usize).copied(),
    }
}

/// A Go process whose goroutine events the trace holds: its Go version and the names of
/// its runtime's wait reasons (`runtime.waitReasonStrings`, indexed by the reason byte).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoProcess {
    /// Process id.
    pub tgid: Tid,
    /// `1.19.8`, from the binary's build information.
    pub version: String,
    /// Wait reason names, by `waitReason` value (`chan receive`, `sleep`, ...).
    pub reasons: Vec<String>,
    /// 0, or the trace time from which this process has no goroutine records: the
    /// recorder's rate cap detached its binary's probes then (thread-level chains only).
    pub capped_ns: u64,
}

/// The payload of one goroutine section.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoDelta {
    /// Records, in any order.
    pub events: Vec<GoEvent>,
    /// Processes (a later entry for a tgid replaces an earlier one).
    pub processes: Vec<GoProcess>,
    /// Executes, in any order. Not part of the goroutine section's payload (skipped by
    /// serde, so that payload is 2.2's): the writer puts them in a section of their own
    /// (kind 0x84, bincode of `Vec<GoExecute>`).
    #[serde(skip)]
    pub executes: Vec<GoExecute>,
    /// Stop-the-world records, in any order; like `executes`, not part of the goroutine
    /// section's payload: a section of their own (kind 0x85, bincode of `Vec<GoStw>`).
    #[serde(skip)]
    pub stws: Vec<GoStw>,
}

impl GoDelta {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.processes.is_empty()
            && self.executes.is_empty()
            && self.stws.is_empty()
    }
    /// Records plus processes plus executes plus stop-the-world records.
    pub fn items(&self) -> usize {
        self.events.len() + self.processes.len() + self.executes.len() + self.stws.len()
    }
    /// Append `other`'s records, processes, executes and stop-the-world records.
    pub fn extend(&mut self, other: &GoDelta) {
        self.events.extend_from_slice(&other.events);
        self.processes.extend_from_slice(&other.processes);
        self.executes.extend_from_slice(&other.executes);
        self.stws.extend_from_slice(&other.stws);
    }
}

/// All goroutine records of a trace, in time order, and the Go processes they are of.
#[derive(Clone, Debug, Default)]
pub struct Goroutines {
    events: Vec<GoEvent>,
    sorted: bool,
    processes: BTreeMap<Tid, GoProcess>,
    executes: Vec<GoExecute>,
    stws: Vec<GoStw>,
}

impl Goroutines {
    /// Merge a section's records.
    pub fn merge(&mut self, d: &GoDelta) {
        if !d.events.is_empty() {
            self.sorted = self.sorted_after(&d.events);
            self.events.extend_from_slice(&d.events);
        }
        for p in &d.processes {
            self.processes.insert(p.tgid, p.clone());
        }
        if !d.executes.is_empty() {
            let last = self.executes.last().map_or(0, |e| e.ts);
            let sorted = d.executes.first().is_none_or(|e| e.ts >= last)
                && d.executes.is_sorted_by_key(|e| e.ts);
            self.executes.extend_from_slice(&d.executes);
            if !sorted {
                self.executes.sort_by_key(|e| (e.ts, e.tid));
            }
        }
        if !d.stws.is_empty() {
            self.stws.extend_from_slice(&d.stws);
            self.stws.sort_by_key(|e| (e.ts, e.tid));
        }
        if !self.sorted {
            self.events.sort_by_key(|e| (e.ts, e.tid));
            self.sorted = true;
        }
    }

    /// Whether the events stay sorted with `more` appended.
    fn sorted_after(&self, more: &[GoEvent]) -> bool {
        let last = self.events.last().map_or(0, |e| e.ts);
        more.first().is_none_or(|e| e.ts >= last) && more.is_sorted_by_key(|e| e.ts)
    }

    /// True when the trace has no goroutine records.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.processes.is_empty()
            && self.executes.is_empty()
            && self.stws.is_empty()
    }

    /// Every record, in time order.
    pub fn events(&self) -> &[GoEvent] {
        &self.events
    }

    /// Every execute, in time order (empty in traces before format 2.3, or recorded
    /// without the `runtime.execute` probe: the runnable part of waits is then unknown).
    pub fn executes(&self) -> &[GoExecute] {
        &self.executes
    }

    /// Every stop-the-world record, in time order (empty in traces before format 2.4, or
    /// recorded without the stop-the-world probes).
    pub fn stws(&self) -> &[GoStw] {
        &self.stws
    }

    /// The stop-the-world periods of process `tgid`: (stop, start, reason), in time order;
    /// a stop without a start in the trace is left out, and a start without a stop before
    /// it too.
    pub fn stw_periods(&self, tgid: Tid) -> Vec<(u64, u64, u8)> {
        let mut out = Vec::new();
        let mut open: Option<(u64, u8)> = None;
        for s in self.stws.iter().filter(|s| s.tgid == tgid) {
            match (s.stop, open) {
                (true, _) => open = Some((s.ts, s.reason)),
                (false, Some((a, r))) => {
                    out.push((a, s.ts, if r != 0 { r } else { s.reason }));
                    open = None;
                }
                (false, None) => {}
            }
        }
        out
    }

    /// The Go processes, by process id.
    pub fn processes(&self) -> impl Iterator<Item = &GoProcess> {
        self.processes.values()
    }

    /// The name of wait reason `reason` in process `tgid` (`reason 7` when unknown).
    pub fn reason_name(&self, tgid: Tid, reason: u8) -> String {
        self.processes
            .get(&tgid)
            .and_then(|p| p.reasons.get(reason as usize))
            .filter(|s| !s.is_empty())
            .cloned()
            .unwrap_or_else(|| format!("reason {reason}"))
    }

    /// Everything, as one delta (to write the records out again).
    pub fn to_delta(&self) -> GoDelta {
        GoDelta {
            events: self.events.clone(),
            processes: self.processes.values().cloned().collect(),
            executes: self.executes.clone(),
            stws: self.stws.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(ts: u64, goid: u64) -> GoEvent {
        GoEvent {
            ts,
            cpu: 0,
            tid: 1,
            tgid: 1,
            kind: GoEventKind::Park,
            goid,
            waker: 0,
            reason: 3,
            stack: StackId::NONE,
        }
    }

    #[test]
    fn merged_sections_come_out_in_time_order_and_name_reasons() {
        let mut g = Goroutines::default();
        g.merge(&GoDelta {
            events: vec![ev(30, 1), ev(10, 2)],
            processes: vec![GoProcess {
                tgid: 1,
                version: "go1.19.8".into(),
                reasons: vec!["".into(), "a".into(), "b".into(), "chan receive".into()],
                capped_ns: 0,
            }],
            ..GoDelta::default()
        });
        g.merge(&GoDelta {
            events: vec![ev(20, 3)],
            processes: vec![],
            ..GoDelta::default()
        });
        let ts: Vec<u64> = g.events().iter().map(|e| e.ts).collect();
        assert_eq!(ts, [10, 20, 30]);
        assert_eq!(g.reason_name(1, 3), "chan receive");
        assert_eq!(g.reason_name(1, 0), "reason 0");
        assert_eq!(g.reason_name(2, 3), "reason 3");
        assert_eq!(g.to_delta().items(), 4);
    }
}

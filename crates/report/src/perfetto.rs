//! Native Perfetto export: a `Trace` of `TracePacket`s holding a clock snapshot, a process
//! tree, and per-CPU `FtraceEventBundle`s with sched_switch, sched_waking, task_newtask and
//! task_rename (and sched_process_free for exits), so the Perfetto UI shows CPU tracks, thread states and wakeup arrows.
//!
//! Message structs are hand-written with field numbers from the published perfetto protos
//! (protos/perfetto/trace/{trace,trace_packet,clock_snapshot}.proto, ps/process_tree.proto,
//! ftrace/{ftrace_event_bundle,ftrace_event,sched,task}.proto). Only the fields we write.
//!
//! Clocks: ftrace timestamps are read by Perfetto as CLOCK_BOOTTIME. The snapshot declares
//! the trace clock as BOOTTIME and gives REALTIME = ts + `clock_offset_ns`, so wall-clock
//! times in the UI are right. (A CLOCK_MONOTONIC trace differs from true boot time only by
//! time spent suspended.) Priorities are not recorded; every task is shown at prio 120.

use crate::source::{EventSource, Names};
use crate::{ReportError, Result};
use chainrec_format::{CommReason, Event, Tid, WakeContext};
use prost::Message;
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

/// `perfetto.protos.Trace`.
#[derive(Clone, PartialEq, Message)]
pub struct Trace {
    /// packet = 1.
    #[prost(message, repeated, tag = "1")]
    pub packet: Vec<TracePacket>,
}

/// `perfetto.protos.TracePacket` (the fields we use).
#[derive(Clone, PartialEq, Message)]
pub struct TracePacket {
    /// timestamp = 8.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// timestamp_clock_id = 58.
    #[prost(uint32, optional, tag = "58")]
    pub timestamp_clock_id: Option<u32>,
    /// trusted_packet_sequence_id = 10.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// ftrace_events = 1.
    #[prost(message, optional, tag = "1")]
    pub ftrace_events: Option<FtraceEventBundle>,
    /// process_tree = 2.
    #[prost(message, optional, tag = "2")]
    pub process_tree: Option<ProcessTree>,
    /// clock_snapshot = 6.
    #[prost(message, optional, tag = "6")]
    pub clock_snapshot: Option<ClockSnapshot>,
}

/// `perfetto.protos.ClockSnapshot`.
#[derive(Clone, PartialEq, Message)]
pub struct ClockSnapshot {
    /// clocks = 1.
    #[prost(message, repeated, tag = "1")]
    pub clocks: Vec<Clock>,
    /// primary_trace_clock = 2 (BuiltinClock).
    #[prost(int32, optional, tag = "2")]
    pub primary_trace_clock: Option<i32>,
}

/// `perfetto.protos.ClockSnapshot.Clock`.
#[derive(Clone, PartialEq, Message)]
pub struct Clock {
    /// clock_id = 1.
    #[prost(uint32, optional, tag = "1")]
    pub clock_id: Option<u32>,
    /// timestamp = 2.
    #[prost(uint64, optional, tag = "2")]
    pub timestamp: Option<u64>,
}

/// BuiltinClock REALTIME.
pub const CLOCK_REALTIME: u32 = 1;
/// BuiltinClock BOOTTIME.
pub const CLOCK_BOOTTIME: u32 = 6;

/// `perfetto.protos.ProcessTree`.
#[derive(Clone, PartialEq, Message)]
pub struct ProcessTree {
    /// processes = 1.
    #[prost(message, repeated, tag = "1")]
    pub processes: Vec<Process>,
    /// threads = 2.
    #[prost(message, repeated, tag = "2")]
    pub threads: Vec<Thread>,
}

/// `perfetto.protos.ProcessTree.Process`.
#[derive(Clone, PartialEq, Message)]
pub struct Process {
    /// pid = 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// ppid = 2.
    #[prost(int32, optional, tag = "2")]
    pub ppid: Option<i32>,
    /// cmdline = 3.
    #[prost(string, repeated, tag = "3")]
    pub cmdline: Vec<String>,
    /// cmdline_is_comm = 9.
    #[prost(bool, optional, tag = "9")]
    pub cmdline_is_comm: Option<bool>,
}

/// `perfetto.protos.ProcessTree.Thread`.
#[derive(Clone, PartialEq, Message)]
pub struct Thread {
    /// tid = 1.
    #[prost(int32, optional, tag = "1")]
    pub tid: Option<i32>,
    /// name = 2.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// tgid = 3.
    #[prost(int32, optional, tag = "3")]
    pub tgid: Option<i32>,
}

/// `perfetto.protos.FtraceEventBundle`.
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEventBundle {
    /// cpu = 1.
    #[prost(uint32, optional, tag = "1")]
    pub cpu: Option<u32>,
    /// event = 2.
    #[prost(message, repeated, tag = "2")]
    pub event: Vec<FtraceEvent>,
    /// lost_events = 3.
    #[prost(bool, optional, tag = "3")]
    pub lost_events: Option<bool>,
}

/// `perfetto.protos.FtraceEvent` (the events we use).
#[derive(Clone, PartialEq, Message)]
pub struct FtraceEvent {
    /// timestamp = 1.
    #[prost(uint64, optional, tag = "1")]
    pub timestamp: Option<u64>,
    /// pid = 2 (the task running when the event fired).
    #[prost(uint32, optional, tag = "2")]
    pub pid: Option<u32>,
    /// common_flags = 5 (kernel TRACE_FLAG_*: 0x08 hardirq, 0x10 softirq, 0x40 NMI).
    #[prost(uint32, optional, tag = "5")]
    pub common_flags: Option<u32>,
    /// sched_switch = 4.
    #[prost(message, optional, tag = "4")]
    pub sched_switch: Option<SchedSwitch>,
    /// sched_waking = 20.
    #[prost(message, optional, tag = "20")]
    pub sched_waking: Option<SchedWaking>,
    /// task_newtask = 235.
    #[prost(message, optional, tag = "235")]
    pub task_newtask: Option<TaskNewtask>,
    /// task_rename = 236.
    #[prost(message, optional, tag = "236")]
    pub task_rename: Option<TaskRename>,
    /// sched_process_free = 240.
    #[prost(message, optional, tag = "240")]
    pub sched_process_free: Option<SchedProcessFree>,
}

/// `perfetto.protos.SchedProcessFreeFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedProcessFree {
    /// comm = 1.
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    /// pid = 2.
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    /// prio = 3.
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
}

/// Kernel TRACE_FLAG_HARDIRQ (Perfetto marks such wakings as from interrupt context).
pub const TRACE_FLAG_HARDIRQ: u32 = 0x08;
/// Kernel TRACE_FLAG_SOFTIRQ.
pub const TRACE_FLAG_SOFTIRQ: u32 = 0x10;
/// Kernel TRACE_FLAG_NMI.
pub const TRACE_FLAG_NMI: u32 = 0x40;

/// `perfetto.protos.SchedSwitchFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedSwitch {
    /// prev_comm = 1.
    #[prost(string, optional, tag = "1")]
    pub prev_comm: Option<String>,
    /// prev_pid = 2.
    #[prost(int32, optional, tag = "2")]
    pub prev_pid: Option<i32>,
    /// prev_prio = 3.
    #[prost(int32, optional, tag = "3")]
    pub prev_prio: Option<i32>,
    /// prev_state = 4.
    #[prost(int64, optional, tag = "4")]
    pub prev_state: Option<i64>,
    /// next_comm = 5.
    #[prost(string, optional, tag = "5")]
    pub next_comm: Option<String>,
    /// next_pid = 6.
    #[prost(int32, optional, tag = "6")]
    pub next_pid: Option<i32>,
    /// next_prio = 7.
    #[prost(int32, optional, tag = "7")]
    pub next_prio: Option<i32>,
}

/// `perfetto.protos.SchedWakingFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct SchedWaking {
    /// comm = 1 (of the woken task).
    #[prost(string, optional, tag = "1")]
    pub comm: Option<String>,
    /// pid = 2 (the woken task).
    #[prost(int32, optional, tag = "2")]
    pub pid: Option<i32>,
    /// prio = 3.
    #[prost(int32, optional, tag = "3")]
    pub prio: Option<i32>,
    /// success = 4.
    #[prost(int32, optional, tag = "4")]
    pub success: Option<i32>,
    /// target_cpu = 5.
    #[prost(int32, optional, tag = "5")]
    pub target_cpu: Option<i32>,
}

/// `perfetto.protos.TaskNewtaskFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct TaskNewtask {
    /// pid = 1 (the new task).
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// comm = 2.
    #[prost(string, optional, tag = "2")]
    pub comm: Option<String>,
    /// clone_flags = 3.
    #[prost(uint64, optional, tag = "3")]
    pub clone_flags: Option<u64>,
}

/// `perfetto.protos.TaskRenameFtraceEvent`.
#[derive(Clone, PartialEq, Message)]
pub struct TaskRename {
    /// pid = 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// oldcomm = 2.
    #[prost(string, optional, tag = "2")]
    pub oldcomm: Option<String>,
    /// newcomm = 3.
    #[prost(string, optional, tag = "3")]
    pub newcomm: Option<String>,
}

/// Linux CLONE_THREAD: the new task shares its parent's thread group.
pub const CLONE_THREAD: u64 = 0x0001_0000;
/// Priority written for every task (not recorded by chainrec).
pub const DEFAULT_PRIO: i32 = 120;
/// Sequence id of every packet we write.
pub const SEQUENCE_ID: u32 = 1;

/// What was exported.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PerfettoStats {
    /// Packets written.
    pub packets: u64,
    /// sched_switch events.
    pub switches: u64,
    /// sched_waking events.
    pub wakings: u64,
    /// Wakings whose target never ran again in the trace: target_cpu = the waker's CPU.
    pub wakings_target_cpu_guessed: u64,
    /// task_newtask events.
    pub new_tasks: u64,
    /// task_rename events.
    pub renames: u64,
    /// Bundles flagged with lost_events (from lost-event markers).
    pub lost_markers: u64,
    /// sched_process_free events (task exits).
    pub exits: u64,
    /// Events with no Perfetto counterpart here (lazily attached stacks, on-CPU
    /// samples): not exported.
    pub not_exported: u64,
    /// Threads in the process tree.
    pub threads: u64,
}

struct Out<'a> {
    w: &'a mut dyn Write,
    stats: PerfettoStats,
    buf: Vec<u8>,
}

impl Out<'_> {
    fn packet(&mut self, p: &TracePacket) -> Result<()> {
        self.buf.clear();
        // Trace.packet = 1, length-delimited: tag byte 0x0A, varint length, bytes.
        self.buf.push(0x0A);
        prost::encoding::encode_varint(p.encoded_len() as u64, &mut self.buf);
        p.encode(&mut self.buf).map_err(ReportError::Encode)?;
        self.w.write_all(&self.buf).map_err(|e| ReportError::Io {
            path: "<perfetto output>".into(),
            source: e,
        })?;
        self.stats.packets += 1;
        Ok(())
    }
}

fn ftrace_packet(cpu: u32, events: Vec<FtraceEvent>, lost: bool) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        ftrace_events: Some(FtraceEventBundle {
            cpu: Some(cpu),
            event: events,
            lost_events: lost.then_some(true),
        }),
        ..Default::default()
    }
}

/// Export the whole trace as Perfetto protobuf to `w`. Streams: memory is bounded by a
/// few thousand buffered events plus one cpu number per waking.
pub fn export(src: &dyn EventSource, w: &mut dyn Write) -> Result<PerfettoStats> {
    // Pass 1: for each waking (in order), the CPU its target next runs on.
    let mut target_cpu: Vec<i32> = Vec::new();
    let mut pending: HashMap<Tid, Vec<usize>> = HashMap::new();
    let mut first_ts = None;
    src.for_each_batch(&mut |events| {
        for e in events {
            first_ts.get_or_insert(e.ts());
            match e {
                Event::Waking(wk) => {
                    pending
                        .entry(wk.target_tid)
                        .or_default()
                        .push(target_cpu.len());
                    target_cpu.push(-1 - wk.cpu as i32); // negative: not resolved yet
                }
                Event::Switch(s) => {
                    if let Some(list) = pending.remove(&s.next_tid) {
                        for i in list {
                            target_cpu[i] = s.cpu as i32;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    })?;
    let Some(first_ts) = first_ts else {
        return Err(ReportError::NoEvents);
    };

    let mut out = Out {
        w,
        stats: PerfettoStats::default(),
        buf: Vec::new(),
    };
    let meta = src.meta();
    let realtime = first_ts as i128 + meta.clock_offset_ns;
    let mut clocks = vec![Clock {
        clock_id: Some(CLOCK_BOOTTIME),
        timestamp: Some(first_ts),
    }];
    if meta.clock_offset_ns != 0 && realtime > 0 {
        clocks.push(Clock {
            clock_id: Some(CLOCK_REALTIME),
            timestamp: Some(realtime as u64),
        });
    }
    out.packet(&TracePacket {
        timestamp: Some(first_ts),
        timestamp_clock_id: Some(CLOCK_BOOTTIME),
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        clock_snapshot: Some(ClockSnapshot {
            clocks,
            primary_trace_clock: Some(CLOCK_BOOTTIME as i32),
        }),
        ..Default::default()
    })?;

    // Process tree from the task table (sorted: deterministic output).
    let tasks: BTreeMap<Tid, _> = src.tables().tasks.iter().map(|(k, v)| (*k, v)).collect();
    let mut tree = ProcessTree::default();
    for t in tasks.values() {
        if t.tid == t.tgid {
            tree.processes.push(Process {
                pid: Some(t.tgid as i32),
                ppid: None,
                cmdline: vec![t.comm.to_string()],
                cmdline_is_comm: Some(true),
            });
        }
        tree.threads.push(Thread {
            tid: Some(t.tid as i32),
            name: Some(t.comm.to_string()),
            tgid: Some(t.tgid as i32),
        });
    }
    out.stats.threads = tree.threads.len() as u64;
    out.packet(&TracePacket {
        timestamp: Some(first_ts),
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        process_tree: Some(tree),
        ..Default::default()
    })?;

    // Pass 2: events into per-CPU bundles.
    const FLUSH_AT: usize = 4096;
    let mut names = Names::new(src.tables());
    let mut per_cpu: BTreeMap<u32, (Vec<FtraceEvent>, bool)> = BTreeMap::new();
    let mut buffered = 0usize;
    let mut waking_index = 0usize;
    let flush =
        |per_cpu: &mut BTreeMap<u32, (Vec<FtraceEvent>, bool)>, out: &mut Out| -> Result<()> {
            for (cpu, (events, lost)) in std::mem::take(per_cpu) {
                out.packet(&ftrace_packet(cpu, events, lost))?;
            }
            Ok(())
        };
    let comm = |names: &Names, tid: Tid| -> String {
        if tid == 0 {
            "swapper".to_string()
        } else {
            names.get(tid).map(|c| c.to_string()).unwrap_or_default()
        }
    };
    src.for_each_batch(&mut |events| {
        for e in events {
            let ts = e.ts();
            let (cpu, ev) = match e {
                Event::Switch(s) => {
                    out.stats.switches += 1;
                    (
                        s.cpu,
                        FtraceEvent {
                            timestamp: Some(ts),
                            pid: Some(s.prev_tid),
                            sched_switch: Some(SchedSwitch {
                                prev_comm: Some(comm(&names, s.prev_tid)),
                                prev_pid: Some(s.prev_tid as i32),
                                prev_prio: Some(DEFAULT_PRIO),
                                prev_state: Some(s.prev_state as i64),
                                next_comm: Some(comm(&names, s.next_tid)),
                                next_pid: Some(s.next_tid as i32),
                                next_prio: Some(DEFAULT_PRIO),
                            }),
                            ..Default::default()
                        },
                    )
                }
                Event::Waking(wk) => {
                    out.stats.wakings += 1;
                    let mut tc = target_cpu[waking_index];
                    waking_index += 1;
                    if tc < 0 {
                        out.stats.wakings_target_cpu_guessed += 1;
                        tc = -1 - tc;
                    }
                    (
                        wk.cpu,
                        FtraceEvent {
                            timestamp: Some(ts),
                            pid: Some(wk.waker_tid),
                            common_flags: match wk.context {
                                WakeContext::Task => None,
                                WakeContext::HardIrq => Some(TRACE_FLAG_HARDIRQ),
                                // The kernel marks both alike: softirq in the preempt count.
                                WakeContext::SoftIrq | WakeContext::SoftIrqTask => {
                                    Some(TRACE_FLAG_SOFTIRQ)
                                }
                                WakeContext::Nmi => Some(TRACE_FLAG_NMI),
                            },
                            sched_waking: Some(SchedWaking {
                                comm: Some(comm(&names, wk.target_tid)),
                                pid: Some(wk.target_tid as i32),
                                prio: Some(DEFAULT_PRIO),
                                success: Some(1),
                                target_cpu: Some(tc),
                            }),
                            ..Default::default()
                        },
                    )
                }
                Event::WakeupNew(n) => {
                    out.stats.new_tasks += 1;
                    let parent_tgid = names.tgid(n.parent_tid);
                    let flags = if n.child_tgid == parent_tgid && n.child_tid != n.child_tgid {
                        CLONE_THREAD
                    } else {
                        0
                    };
                    let c = comm(&names, n.parent_tid);
                    names.apply(e);
                    (
                        n.cpu,
                        FtraceEvent {
                            timestamp: Some(ts),
                            pid: Some(n.parent_tid),
                            task_newtask: Some(TaskNewtask {
                                pid: Some(n.child_tid as i32),
                                comm: Some(c),
                                clone_flags: Some(flags),
                            }),
                            ..Default::default()
                        },
                    )
                }
                Event::Comm(c) => {
                    let old = names.apply(e);
                    let renamed = matches!(c.reason, CommReason::Rename | CommReason::Exec)
                        || old.is_some_and(|o| o != c.comm);
                    if !renamed {
                        continue;
                    }
                    out.stats.renames += 1;
                    // The CPU is not recorded for comm events: bundle them with CPU 0.
                    (
                        0,
                        FtraceEvent {
                            timestamp: Some(ts),
                            pid: Some(c.tid),
                            task_rename: Some(TaskRename {
                                pid: Some(c.tid as i32),
                                oldcomm: Some(old.map(|o| o.to_string()).unwrap_or_default()),
                                newcomm: Some(c.comm.to_string()),
                            }),
                            ..Default::default()
                        },
                    )
                }
                Event::Lost(l) => {
                    out.stats.lost_markers += 1;
                    let cpu = if l.cpu == u32::MAX { 0 } else { l.cpu };
                    per_cpu.entry(cpu).or_default().1 = true;
                    continue;
                }
                Event::Exit(x) => {
                    out.stats.exits += 1;
                    // The CPU is not recorded for exits: bundle them with CPU 0.
                    (
                        0,
                        FtraceEvent {
                            timestamp: Some(ts),
                            pid: Some(x.tid),
                            sched_process_free: Some(SchedProcessFree {
                                comm: Some(comm(&names, x.tid)),
                                pid: Some(x.tid as i32),
                                prio: Some(DEFAULT_PRIO),
                            }),
                            ..Default::default()
                        },
                    )
                }
                Event::OffCpuStacks(_) | Event::Sample(_) => {
                    out.stats.not_exported += 1;
                    continue;
                }
            };
            per_cpu.entry(cpu).or_default().0.push(ev);
            buffered += 1;
            if buffered >= FLUSH_AT {
                flush(&mut per_cpu, &mut out)?;
                buffered = 0;
            }
        }
        Ok(())
    })?;
    flush(&mut per_cpu, &mut out)?;
    out.w.flush().map_err(|e| ReportError::Io {
        path: "<perfetto output>".into(),
        source: e,
    })?;
    Ok(out.stats)
}

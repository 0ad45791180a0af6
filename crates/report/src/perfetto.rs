//! Native Perfetto export: a `Trace` of `TracePacket`s holding a clock snapshot, a process
//! tree, per-CPU `FtraceEventBundle`s with sched_switch, sched_waking, task_newtask,
//! task_rename and sched_process_free (so the Perfetto UI shows CPU tracks, thread states
//! and wakeup arrows), and tracks of what the recording lost: lost-event markers,
//! switch-sequence gaps (closed by a synthetic switch each) and the recording's counts.
//! [`export_with_tracks`] adds per-thread slice tracks of the caller's.
//!
//! Message structs are hand-written with field numbers from the published perfetto protos
//! (protos/perfetto/trace/{trace,trace_packet,clock_snapshot}.proto, ps/process_tree.proto,
//! ftrace/{ftrace_event_bundle,ftrace_event,sched,task}.proto, track_event/*.proto). Only
//! the fields we write.
//!
//! Clocks: the recording's timestamps are CLOCK_MONOTONIC (`bpf_ktime_get_ns`). Every
//! timestamp is written on the sequence-scoped clock [`CLOCK_TRACE`], which the snapshot
//! equates with the recording's clock (and REALTIME = ts + `clock_offset_ns`); bundles say
//! [`FTRACE_CLOCK_GLOBAL`] because that is how a bundle's events get onto that clock instead
//! of being read as BOOTTIME. Priorities are not recorded; every task is shown at prio 120.

use crate::{ReportError, Result};
use chainrec_format::{
    Clock as TraceClock, CommReason, Event, EventSource, LostCause, RecordingMeta, Switch, Tables,
    Threads, Tid, WakeContext, Waking, STATE_RUNNABLE,
};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
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
    /// track_event = 11.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// track_descriptor = 60.
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
    /// sequence_flags = 13 (SequenceFlags bits).
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
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
/// BuiltinClock MONOTONIC (`bpf_ktime_get_ns`, the recorder's clock).
pub const CLOCK_MONOTONIC: u32 = 3;
/// BuiltinClock BOOTTIME.
pub const CLOCK_BOOTTIME: u32 = 6;
/// The sequence-scoped clock every timestamp of the export is on: ids 64..128 are
/// sequence-scoped in `ClockSnapshot`, and 64 is the one the trace processor reads the
/// events of an `FtraceEventBundle` on when the bundle names a non-boottime ftrace clock.
/// The clock snapshot equates it with the recording's own clock.
pub const CLOCK_TRACE: u32 = 64;
/// FtraceClock GLOBAL: the only `ftrace_clock` values are UNSPECIFIED (read as
/// BOOTTIME), GLOBAL/LOCAL (read on the sequence clock [`CLOCK_TRACE`]) and MONO_RAW (a
/// different clock); GLOBAL routes our CLOCK_MONOTONIC timestamps through the snapshot.
pub const FTRACE_CLOCK_GLOBAL: i32 = 2;
/// TracePacket.SequenceFlags SEQ_INCREMENTAL_STATE_CLEARED (on the first packet).
pub const SEQ_INCREMENTAL_STATE_CLEARED: u32 = 1;

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
    /// is_kthread = 8.
    #[prost(bool, optional, tag = "8")]
    pub is_kthread: Option<bool>,
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
    /// ftrace_clock = 5 (FtraceClock).
    #[prost(int32, optional, tag = "5")]
    pub ftrace_clock: Option<i32>,
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

/// `perfetto.protos.TrackDescriptor` (the fields we use).
#[derive(Clone, PartialEq, Message)]
pub struct TrackDescriptor {
    /// uuid = 1.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// name = 2.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// process = 3 (a track of one process).
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// thread = 4 (a track of one thread).
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// counter = 8 (a counter track).
    #[prost(message, optional, tag = "8")]
    pub counter: Option<CounterDescriptor>,
    /// description = 14.
    #[prost(string, optional, tag = "14")]
    pub description: Option<String>,
}

/// `perfetto.protos.ProcessDescriptor` (the fields we use).
#[derive(Clone, PartialEq, Message)]
pub struct ProcessDescriptor {
    /// pid = 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// process_labels = 8 (shown with the process in the Perfetto UI).
    #[prost(string, repeated, tag = "8")]
    pub process_labels: Vec<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, Message)]
pub struct ThreadDescriptor {
    /// pid = 1.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// tid = 2.
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
}

/// `perfetto.protos.CounterDescriptor` (no field set: a plain counter).
#[derive(Clone, PartialEq, Message)]
pub struct CounterDescriptor {}

/// `perfetto.protos.TrackEvent` (the fields we use).
#[derive(Clone, PartialEq, Message)]
pub struct TrackEvent {
    /// type = 9 (Type: 1 slice begin, 2 slice end, 3 instant, 4 counter).
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// track_uuid = 11.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// name = 23.
    #[prost(string, optional, tag = "23")]
    pub name: Option<String>,
    /// counter_value = 30.
    #[prost(int64, optional, tag = "30")]
    pub counter_value: Option<i64>,
    /// debug_annotations = 4.
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
}

/// TrackEvent.Type SLICE_BEGIN.
pub const TYPE_SLICE_BEGIN: i32 = 1;
/// TrackEvent.Type SLICE_END.
pub const TYPE_SLICE_END: i32 = 2;
/// TrackEvent.Type INSTANT.
pub const TYPE_INSTANT: i32 = 3;
/// TrackEvent.Type COUNTER.
pub const TYPE_COUNTER: i32 = 4;

/// `perfetto.protos.DebugAnnotation` (named integer or string values).
#[derive(Clone, PartialEq, Message)]
pub struct DebugAnnotation {
    /// name = 10.
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
    /// int_value = 4.
    #[prost(int64, optional, tag = "4")]
    pub int_value: Option<i64>,
    /// string_value = 6.
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
}

impl DebugAnnotation {
    fn int(name: &str, v: u64) -> Self {
        DebugAnnotation {
            name: Some(name.into()),
            int_value: Some(v.min(i64::MAX as u64) as i64),
            string_value: None,
        }
    }
    fn text(name: &str, v: impl Into<String>) -> Self {
        DebugAnnotation {
            name: Some(name.into()),
            int_value: None,
            string_value: Some(v.into()),
        }
    }
}

/// Linux CLONE_THREAD: the new task shares its parent's thread group.
pub const CLONE_THREAD: u64 = 0x0001_0000;
/// Priority written for every task (not recorded by chainrec).
pub const DEFAULT_PRIO: i32 = 120;
/// Sequence id of every packet we write.
pub const SEQUENCE_ID: u32 = 1;
/// kthreadd: the parent of every kernel thread but itself (the kernel creates them all
/// through it), so kernel threads get it as `ppid`.
pub const KTHREADD: Tid = 2;

/// Track names of what the export adds beside the ftrace events.
pub const TRACK_LOST: &str = "chainrec: lost events";
/// Counter track: events lost so far (sum of the lost-event markers' counts).
pub const TRACK_LOST_TOTAL: &str = "chainrec: lost events (cumulative)";
/// Slice track: switch-sequence gaps (one per CPU that has any).
pub const TRACK_GAPS: &str = "chainrec: switch gaps";
/// Track of the instant holding the recording's counts.
pub const TRACK_RECORDING: &str = "chainrec: recording";

/// One slice of an extra per-thread track ([`SliceTrack`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slice {
    /// Start, on the trace clock.
    pub start_ns: u64,
    /// End (≥ start).
    pub end_ns: u64,
    /// Label shown in the UI.
    pub name: String,
}

/// An extra track per thread, added to the export next to the scheduler data (e.g. a
/// critical path): one Perfetto thread track named `name` for each thread in `slices`.
/// The slices of one thread must not overlap unless nested (Perfetto draws them as a
/// stack); they are written sorted by start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SliceTrack {
    /// Track name (the same for every thread).
    pub name: String,
    /// Slices by thread id.
    pub slices: BTreeMap<Tid, Vec<Slice>>,
}

/// What was exported.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PerfettoStats {
    /// Packets written.
    pub packets: u64,
    /// Processes labelled with their threads' cgroups (traces that record cgroups).
    pub processes_with_cgroup: u64,
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
    /// Lost-event markers: each flags its CPU's bundle with lost_events and is an
    /// instant on the [`TRACK_LOST`] track.
    pub lost_markers: u64,
    /// Events the markers say were lost (the [`TRACK_LOST_TOTAL`] counter's last value).
    pub lost_events: u64,
    /// sched_process_free events (task exits).
    pub exits: u64,
    /// Events with no Perfetto counterpart here (lazily attached stacks, on-CPU
    /// samples): not exported.
    pub not_exported: u64,
    /// Threads in the process tree.
    pub threads: u64,
    /// Processes in the process tree (one per thread group of any thread).
    pub processes: u64,
    /// Processes with a parent: forked in the trace (`ppid` = the forking thread's
    /// process) or kernel threads (`ppid` = kthreadd).
    pub processes_with_parent: u64,
    /// Threads seen in events that are neither in the task table nor created in the
    /// trace: their process is unknown, so they are not in the process tree.
    pub threads_without_process: u64,
    /// Switch-in of a thread still running on another CPU (its switch-out there was
    /// lost): closed by a synthetic switch to idle on that CPU at this time, and marked.
    pub gaps_running_elsewhere: u64,
    /// Switch whose previous task is not the one the CPU's last switch put there (events
    /// lost in between): a synthetic switch hands the CPU over first, and the interval
    /// since the CPU's last switch is marked.
    pub gaps_cpu_sequence: u64,
    /// Slices written on extra tracks ([`SliceTrack`]).
    pub extra_slices: u64,
}

impl PerfettoStats {
    /// Synthetic switches written to close gaps (each also a [`TRACK_GAPS`] slice).
    pub fn gaps(&self) -> u64 {
        self.gaps_running_elsewhere + self.gaps_cpu_sequence
    }

    /// What was written to `path`, for the line `chainrec export` prints.
    pub fn summary(&self, path: &std::path::Path) -> String {
        let st = self;
        format!(
            "wrote {} ({} packets: {} sched_switch, {} sched_waking, {} task_newtask, {} task_rename; {} exits; {} processes ({} with a known parent), {} threads, {} threads of unknown process; {} wakings' target CPU guessed; {} lost-event markers ({} events); {} switch-sequence gaps closed by a synthetic switch and marked on the '{}' tracks ({} thread already running elsewhere, {} CPU sequence broken); {} lazily attached stacks and samples have no Perfetto counterpart; {} critical-path slices)",
            path.display(), st.packets, st.switches, st.wakings, st.new_tasks, st.renames, st.exits,
            st.processes, st.processes_with_parent, st.threads, st.threads_without_process,
            st.wakings_target_cpu_guessed, st.lost_markers, st.lost_events, st.gaps(),
            TRACK_GAPS, st.gaps_running_elsewhere, st.gaps_cpu_sequence, st.not_exported,
            st.extra_slices
        ) + &if st.processes_with_cgroup > 0 {
            format!("; {} processes labelled with their threads' cgroups", st.processes_with_cgroup)
        } else {
            String::new()
        }
    }
}

struct Out<'a> {
    w: &'a mut dyn Write,
    stats: PerfettoStats,
    buf: Vec<u8>,
    next_uuid: u64,
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

    /// Declare a track; returns its uuid.
    fn track(&mut self, mut d: TrackDescriptor) -> Result<u64> {
        self.next_uuid += 1;
        let uuid = self.next_uuid;
        d.uuid = Some(uuid);
        self.packet(&TracePacket {
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            track_descriptor: Some(d),
            ..Default::default()
        })?;
        Ok(uuid)
    }

    /// One track event at `ts` on the trace clock.
    fn track_event(&mut self, ts: u64, ev: TrackEvent) -> Result<()> {
        self.packet(&TracePacket {
            timestamp: Some(ts),
            timestamp_clock_id: Some(CLOCK_TRACE),
            trusted_packet_sequence_id: Some(SEQUENCE_ID),
            track_event: Some(ev),
            ..Default::default()
        })
    }

    /// A slice `[start, end]` on `track` (begin and end events).
    fn slice(
        &mut self,
        track: u64,
        start: u64,
        end: u64,
        name: &str,
        args: Vec<DebugAnnotation>,
    ) -> Result<()> {
        self.track_event(
            start,
            TrackEvent {
                r#type: Some(TYPE_SLICE_BEGIN),
                track_uuid: Some(track),
                name: Some(name.to_string()),
                debug_annotations: args,
                ..Default::default()
            },
        )?;
        self.track_event(
            end.max(start),
            TrackEvent {
                r#type: Some(TYPE_SLICE_END),
                track_uuid: Some(track),
                ..Default::default()
            },
        )
    }
}

/// One CPU's events of an ftrace bundle, each already encoded as the bundle's `event`
/// field (what prost writes for `FtraceEventBundle::event`), and whether events were lost.
#[derive(Default)]
struct EncodedEvents {
    bytes: Vec<u8>,
    lost: bool,
}

impl EncodedEvents {
    fn push(&mut self, ev: &FtraceEvent) {
        prost::encoding::message::encode(BUNDLE_EVENT_TAG, ev, &mut self.bytes);
    }

    /// Push the `sched_switch` event [`switch_event`] makes, byte for byte, encoded
    /// straight from the names (no event value, no string copies): switches are most
    /// of a trace.
    fn push_switch(&mut self, ts: u64, prev: (Tid, &str), state: u32, next: (Tid, &str)) {
        use prost::encoding::{
            encode_key, encode_varint, encoded_len_varint, int32, int64, key_len, uint32, uint64,
            WireType,
        };
        let text_len = |tag, t: &str| key_len(tag) + encoded_len_varint(t.len() as u64) + t.len();
        let text = |tag, t: &str, b: &mut Vec<u8>| {
            encode_key(tag, WireType::LengthDelimited, b);
            encode_varint(t.len() as u64, b);
            b.extend_from_slice(t.as_bytes());
        };
        let (prev_pid, next_pid, state) = (prev.0 as i32, next.0 as i32, state as i64);
        // SchedSwitch fields in tag order: prev_comm = 1, prev_pid = 2, prev_prio = 3,
        // prev_state = 4, next_comm = 5, next_pid = 6, next_prio = 7.
        let switch_len = text_len(1, prev.1)
            + int32::encoded_len(2, &prev_pid)
            + int32::encoded_len(3, &DEFAULT_PRIO)
            + int64::encoded_len(4, &state)
            + text_len(5, next.1)
            + int32::encoded_len(6, &next_pid)
            + int32::encoded_len(7, &DEFAULT_PRIO);
        // FtraceEvent: timestamp = 1, pid = 2, sched_switch = 4.
        let event_len = uint64::encoded_len(1, &ts)
            + uint32::encoded_len(2, &prev.0)
            + key_len(4)
            + encoded_len_varint(switch_len as u64)
            + switch_len;
        let b = &mut self.bytes;
        encode_key(BUNDLE_EVENT_TAG, WireType::LengthDelimited, b);
        encode_varint(event_len as u64, b);
        uint64::encode(1, &ts, b);
        uint32::encode(2, &prev.0, b);
        encode_key(4, WireType::LengthDelimited, b);
        encode_varint(switch_len as u64, b);
        text(1, prev.1, b);
        int32::encode(2, &prev_pid, b);
        int32::encode(3, &DEFAULT_PRIO, b);
        int64::encode(4, &state, b);
        text(5, next.1, b);
        int32::encode(6, &next_pid, b);
        int32::encode(7, &DEFAULT_PRIO, b);
    }
}

/// The `sched_switch` event of `prev` (in `state`) for `next`, with their names.
#[cfg(test)]
fn switch_event(ts: u64, prev: (Tid, &str), state: u32, next: (Tid, &str)) -> FtraceEvent {
    FtraceEvent {
        timestamp: Some(ts),
        pid: Some(prev.0),
        sched_switch: Some(SchedSwitch {
            prev_comm: Some(prev.1.into()),
            prev_pid: Some(prev.0 as i32),
            prev_prio: Some(DEFAULT_PRIO),
            prev_state: Some(state as i64),
            next_comm: Some(next.1.into()),
            next_pid: Some(next.0 as i32),
            next_prio: Some(DEFAULT_PRIO),
        }),
        ..Default::default()
    }
}

/// `FtraceEventBundle.event`.
const BUNDLE_EVENT_TAG: u32 = 2;

impl Out<'_> {
    /// The packet [`ftrace_packet`] makes of `events`, byte for byte, written from the
    /// events encoded once as they came: prost would measure every event's length again
    /// for the packet, the bundle and the event (with its nested switch or waking), and
    /// keep the events as values (strings included) until then.
    fn ftrace_events(&mut self, cpu: u32, events: &EncodedEvents) -> Result<()> {
        use prost::encoding::{bool as flag, encode_varint, encoded_len_varint, int32, uint32};
        let lost = events.lost.then_some(true);
        // Fields in tag order, as prost writes them: bundle cpu = 1, event = 2,
        // lost_events = 3, ftrace_clock = 5; packet ftrace_events = 1,
        // trusted_packet_sequence_id = 10.
        let bundle_len = uint32::encoded_len(1, &cpu)
            + events.bytes.len()
            + lost.map_or(0, |l| flag::encoded_len(3, &l))
            + int32::encoded_len(5, &FTRACE_CLOCK_GLOBAL);
        let packet_len = 1
            + encoded_len_varint(bundle_len as u64)
            + bundle_len
            + uint32::encoded_len(10, &SEQUENCE_ID);
        let b = &mut self.buf;
        b.clear();
        // Trace.packet = 1 and TracePacket.ftrace_events = 1, both length-delimited.
        b.push(0x0A);
        encode_varint(packet_len as u64, b);
        b.push(0x0A);
        encode_varint(bundle_len as u64, b);
        uint32::encode(1, &cpu, b);
        let head = b.len();
        if let Some(l) = lost {
            flag::encode(3, &l, b);
        }
        int32::encode(5, &FTRACE_CLOCK_GLOBAL, b);
        uint32::encode(10, &SEQUENCE_ID, b);
        let io = |e| ReportError::Io {
            path: "<perfetto output>".into(),
            source: e,
        };
        self.w.write_all(&b[..head]).map_err(io)?;
        self.w.write_all(&events.bytes).map_err(io)?;
        self.w.write_all(&b[head..]).map_err(io)?;
        self.stats.packets += 1;
        Ok(())
    }
}

/// The packet of one CPU's bundle of ftrace events (as [`Out::ftrace_events`] writes it).
#[cfg(test)]
fn ftrace_packet(cpu: u32, events: Vec<FtraceEvent>, lost: bool) -> TracePacket {
    TracePacket {
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        ftrace_events: Some(FtraceEventBundle {
            cpu: Some(cpu),
            event: events,
            lost_events: lost.then_some(true),
            ftrace_clock: Some(FTRACE_CLOCK_GLOBAL),
        }),
        ..Default::default()
    }
}

/// The builtin clock the recording's timestamps are on.
pub fn builtin_clock(clock: TraceClock) -> u32 {
    match clock {
        TraceClock::Monotonic => CLOCK_MONOTONIC,
        TraceClock::Boottime => CLOCK_BOOTTIME,
        // Arbitrary origin: shown as a monotonic clock (it never jumps); no wall clock
        // unless the synthetic trace has an offset.
        TraceClock::Synthetic => CLOCK_MONOTONIC,
    }
}

/// A switch-sequence gap found while streaming: the CPU, when its state was last known,
/// when the gap showed, and the task that was believed to run there.
struct Gap {
    cpu: u32,
    since: u64,
    at: u64,
    lost_tid: Tid,
    running_elsewhere: bool,
}

/// What pass 1 learns: each waking's target CPU, fork parents, tasks outside the table.
struct Pass1 {
    target_cpu: Vec<i32>,
    first_ts: u64,
    /// Process forked in the trace -> the forking thread's process.
    parent_of: BTreeMap<Tid, Tid>,
    /// Threads created in the trace that the task table lacks -> their tgid.
    new_threads: BTreeMap<Tid, Tid>,
    /// Tids in events with no task entry and no creation in the trace.
    unknown: HashSet<Tid>,
}

fn pass1(src: &dyn EventSource<ReportError>) -> Result<Pass1> {
    let tasks = &src.tables().tasks;
    let tgid_of = |tid: Tid, new: &BTreeMap<Tid, Tid>| {
        tasks
            .get(&tid)
            .map(|t| t.tgid)
            .or_else(|| new.get(&tid).copied())
    };
    let mut p = Pass1 {
        target_cpu: Vec::new(),
        first_ts: 0,
        parent_of: BTreeMap::new(),
        new_threads: BTreeMap::new(),
        unknown: HashSet::new(),
    };
    let mut pending: HashMap<Tid, Vec<usize>> = HashMap::new();
    let mut first_ts = None;
    let seen = |tid: Tid, p: &mut Pass1| {
        if tid != 0 && !tasks.contains_key(&tid) && !p.new_threads.contains_key(&tid) {
            p.unknown.insert(tid);
        }
    };
    src.for_each_batch(&mut |events| {
        for e in events {
            first_ts.get_or_insert(e.ts());
            match e {
                Event::Waking(wk) => {
                    pending
                        .entry(wk.target_tid)
                        .or_default()
                        .push(p.target_cpu.len());
                    p.target_cpu.push(-1 - wk.cpu as i32); // negative: not resolved yet
                    seen(wk.target_tid, &mut p);
                }
                Event::Switch(s) => {
                    if let Some(list) = pending.remove(&s.next_tid) {
                        for i in list {
                            p.target_cpu[i] = s.cpu as i32;
                        }
                    }
                    seen(s.prev_tid, &mut p);
                    seen(s.next_tid, &mut p);
                }
                Event::WakeupNew(n) => {
                    if !tasks.contains_key(&n.child_tid) {
                        p.new_threads.entry(n.child_tid).or_insert(n.child_tgid);
                        p.unknown.remove(&n.child_tid);
                    }
                    let parent = tgid_of(n.parent_tid, &p.new_threads);
                    if let Some(parent) = parent {
                        if n.child_tgid != parent && n.child_tid == n.child_tgid {
                            p.parent_of.entry(n.child_tgid).or_insert(parent);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(())
    })?;
    p.first_ts = first_ts.ok_or(ReportError::NoEvents)?;
    Ok(p)
}

/// The process tree: every thread of the task table and every thread created in the
/// trace, and one process per thread group among them. `ppid` only where the trace shows
/// it: a fork seen in the trace, or a kernel thread (always kthreadd's child). The format
/// records no parent for anything else, so those processes have none.
fn process_tree(
    src: &dyn EventSource<ReportError>,
    p1: &Pass1,
    stats: &mut PerfettoStats,
) -> ProcessTree {
    let tasks: BTreeMap<Tid, _> = src.tables().tasks.iter().map(|(k, v)| (*k, v)).collect();
    let mut threads: BTreeMap<Tid, (Tid, Option<String>)> = BTreeMap::new();
    for t in tasks.values() {
        threads.insert(t.tid, (t.tgid, Some(t.comm.to_string())));
    }
    for (&tid, &tgid) in &p1.new_threads {
        // Named after the parent at fork; the task_newtask/task_rename events say so.
        threads.entry(tid).or_insert((tgid, None));
    }
    let mut tree = ProcessTree::default();
    let groups: BTreeSet<Tid> = threads.values().map(|(g, _)| *g).collect();
    for &tgid in &groups {
        let leader = tasks.get(&tgid);
        let kthread = leader.map(|t| t.kernel_thread).unwrap_or_else(|| {
            // A group whose leader is not in the table: a kernel thread iff its threads are.
            tasks.values().any(|t| t.tgid == tgid && t.kernel_thread)
        });
        let ppid = p1
            .parent_of
            .get(&tgid)
            .copied()
            .or((kthread && tgid != KTHREADD).then_some(KTHREADD));
        stats.processes += 1;
        stats.processes_with_parent += ppid.is_some() as u64;
        tree.processes.push(Process {
            pid: Some(tgid as i32),
            ppid: ppid.map(|p| p as i32),
            cmdline: leader.map(|t| t.comm.to_string()).into_iter().collect(),
            cmdline_is_comm: leader.map(|_| true),
            is_kthread: kthread.then_some(true),
        });
    }
    for (tid, (tgid, name)) in threads {
        tree.threads.push(Thread {
            tid: Some(tid as i32),
            name,
            tgid: Some(tgid as i32),
        });
    }
    stats.threads = tree.threads.len() as u64;
    stats.threads_without_process = p1.unknown.len() as u64;
    tree
}

/// The labels of a process whose threads were in cgroups `ids`: `cgroup: <path>` for each,
/// then `container: <64 hex>` and `pod: <uid>` for those the paths name.
pub fn cgroup_labels(tables: &Tables, ids: &BTreeSet<u64>) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    let mut extra: Vec<String> = Vec::new();
    for &id in ids {
        let path = tables.cgroup_path(id);
        labels.push(format!("cgroup: {path}"));
        if let Some(c) = chainrec_format::container_info(&path) {
            extra.extend(c.container_id.map(|c| format!("container: {c}")));
            extra.extend(c.pod_uid.map(|p| format!("pod: {p}")));
        }
    }
    for e in extra {
        if !labels.contains(&e) {
            labels.push(e);
        }
    }
    labels
}

/// One process track per process whose threads the trace knows the cgroups of, carrying
/// them as process labels ([`cgroup_labels`]) and as its description.
fn cgroup_tracks(tables: &Tables, out: &mut Out) -> Result<()> {
    if !tables.has_cgroups() {
        return Ok(());
    }
    let mut by_process: BTreeMap<Tid, BTreeSet<u64>> = BTreeMap::new();
    for (&tid, list) in &tables.task_cgroups {
        let Some(t) = tables.tasks.get(&tid) else {
            continue; // no process known: not in the process tree either
        };
        by_process
            .entry(t.tgid)
            .or_default()
            .extend(list.iter().map(|&(_, c)| c));
    }
    for (tgid, ids) in by_process {
        let labels = cgroup_labels(tables, &ids);
        out.track(TrackDescriptor {
            description: Some(labels.join("; ")),
            process: Some(ProcessDescriptor {
                pid: Some(tgid as i32),
                process_labels: labels,
            }),
            ..Default::default()
        })?;
        out.stats.processes_with_cgroup += 1;
    }
    Ok(())
}

/// Export the whole trace as Perfetto protobuf to `w`. Streams: memory is bounded by a
/// few thousand buffered events plus one cpu number per waking (and one record per
/// switch-sequence gap).
pub fn export(src: &dyn EventSource<ReportError>, w: &mut dyn Write) -> Result<PerfettoStats> {
    export_with_tracks(src, w, &[])
}

/// [`export`] plus extra per-thread slice tracks (e.g. `critical-path`'s), written after
/// the scheduler data.
pub fn export_with_tracks(
    src: &dyn EventSource<ReportError>,
    w: &mut dyn Write,
    extra: &[SliceTrack],
) -> Result<PerfettoStats> {
    // Pass 1: for each waking (in order), the CPU its target next runs on; parents.
    let p1 = pass1(src)?;
    let first_ts = p1.first_ts;
    let mut out = Out {
        w,
        stats: PerfettoStats::default(),
        buf: Vec::new(),
        next_uuid: 0,
    };
    let meta = src.meta();
    write_clock_snapshot(&mut out, meta, first_ts)?;
    let tree = process_tree(src, &p1, &mut out.stats);
    out.packet(&TracePacket {
        timestamp: Some(first_ts),
        timestamp_clock_id: Some(CLOCK_TRACE),
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        process_tree: Some(tree),
        ..Default::default()
    })?;
    cgroup_tracks(src.tables(), &mut out)?;

    // Pass 2: events into per-CPU bundles.
    let mut sched = SchedPass::new(src.tables(), &p1);
    src.for_each_batch(&mut |events| {
        for e in events {
            sched.event(e, &mut out)?;
        }
        Ok(())
    })?;
    sched.flush(&mut out)?;

    write_lost(&mut out, &sched.lost)?;
    write_gaps(&mut out, &sched.gaps, &sched.threads)?;
    write_recording(&mut out, meta, first_ts)?;
    for t in extra {
        write_slice_track(&mut out, t, &sched.threads)?;
    }
    out.w.flush().map_err(|e| ReportError::Io {
        path: "<perfetto output>".into(),
        source: e,
    })?;
    Ok(out.stats)
}

/// The clock snapshot that puts the trace clock (and the wall clock, when known) on
/// Perfetto's clocks.
fn write_clock_snapshot(out: &mut Out, meta: &RecordingMeta, first_ts: u64) -> Result<()> {
    let realtime = first_ts as i128 + meta.clock_offset_ns;
    let mut clocks = vec![
        Clock {
            clock_id: Some(CLOCK_TRACE),
            timestamp: Some(first_ts),
        },
        Clock {
            clock_id: Some(builtin_clock(meta.clock)),
            timestamp: Some(first_ts),
        },
    ];
    if meta.clock_offset_ns != 0 && realtime > 0 {
        clocks.push(Clock {
            clock_id: Some(CLOCK_REALTIME),
            timestamp: Some(realtime as u64),
        });
    }
    out.packet(&TracePacket {
        trusted_packet_sequence_id: Some(SEQUENCE_ID),
        sequence_flags: Some(SEQ_INCREMENTAL_STATE_CLEARED),
        clock_snapshot: Some(ClockSnapshot {
            clocks,
            primary_trace_clock: Some(builtin_clock(meta.clock) as i32),
        }),
        ..Default::default()
    })
}

/// Pass 2's state: the events of each CPU waiting to be written as one bundle, who each
/// thread is, and the switch sequence (what runs on each CPU since when, where each
/// thread runs) that finds lost switches.
struct SchedPass<'a> {
    threads: Threads,
    /// Pass 1's target CPU of each waking, in order.
    target_cpu: &'a [i32],
    first_ts: u64,
    per_cpu: BTreeMap<u32, EncodedEvents>,
    buffered: usize,
    waking_index: usize,
    on_cpu: HashMap<u32, (Tid, u64)>,
    running: HashMap<Tid, u32>,
    gaps: Vec<Gap>,
    lost: Vec<(u64, u32, u64, LostCause)>,
}

impl<'a> SchedPass<'a> {
    /// Events buffered before the bundles are written.
    const FLUSH_AT: usize = 4096;

    fn new(tables: &Tables, p1: &'a Pass1) -> Self {
        SchedPass {
            threads: Threads::new(tables),
            target_cpu: &p1.target_cpu,
            first_ts: p1.first_ts,
            per_cpu: BTreeMap::new(),
            buffered: 0,
            waking_index: 0,
            on_cpu: HashMap::new(),
            running: HashMap::new(),
            gaps: Vec::new(),
            lost: Vec::new(),
        }
    }

    fn push(&mut self, cpu: u32, ev: FtraceEvent) {
        self.per_cpu.entry(cpu).or_default().push(&ev);
        self.buffered += 1;
    }

    fn flush(&mut self, out: &mut Out) -> Result<()> {
        for (cpu, events) in std::mem::take(&mut self.per_cpu) {
            out.ftrace_events(cpu, &events)?;
        }
        self.buffered = 0;
        Ok(())
    }

    /// Take one event: buffer its ftrace event (if it has one), write the bundles when
    /// enough are buffered.
    fn event(&mut self, e: &Event, out: &mut Out) -> Result<()> {
        let ts = e.ts();
        let stats = &mut out.stats;
        let (cpu, ev) = match e {
            Event::Switch(s) => {
                stats.switches += 1;
                self.lost_switches(s, stats);
                self.push_switch(s.cpu, ts, s.prev_tid, s.prev_state, s.next_tid);
                return self.flush_if_full(out);
            }
            Event::Waking(wk) => {
                stats.wakings += 1;
                (wk.cpu, self.waking(wk, stats))
            }
            Event::WakeupNew(n) => {
                stats.new_tasks += 1;
                // A parent the trace never named: its own process (a main thread).
                let parent_tgid = self
                    .threads
                    .get(n.parent_tid)
                    .map_or(n.parent_tid, |t| t.tgid);
                let flags = if n.child_tgid == parent_tgid && n.child_tid != n.child_tgid {
                    CLONE_THREAD
                } else {
                    0
                };
                let comm = self.threads.name(n.parent_tid);
                self.threads.apply(e);
                let newtask = FtraceEvent {
                    timestamp: Some(ts),
                    pid: Some(n.parent_tid),
                    task_newtask: Some(TaskNewtask {
                        pid: Some(n.child_tid as i32),
                        comm: Some(comm),
                        clone_flags: Some(flags),
                    }),
                    ..Default::default()
                };
                (n.cpu, newtask)
            }
            Event::Comm(c) => {
                let old = self.threads.apply(e);
                let renamed = matches!(c.reason, CommReason::Rename | CommReason::Exec)
                    || old.is_some_and(|o| o != c.comm);
                if !renamed {
                    return Ok(());
                }
                stats.renames += 1;
                let rename = FtraceEvent {
                    timestamp: Some(ts),
                    pid: Some(c.tid),
                    task_rename: Some(TaskRename {
                        pid: Some(c.tid as i32),
                        oldcomm: Some(old.map(|o| o.to_string()).unwrap_or_default()),
                        newcomm: Some(c.comm.to_string()),
                    }),
                    ..Default::default()
                };
                // The CPU is not recorded for comm events: bundle them with CPU 0.
                (0, rename)
            }
            Event::Lost(l) => {
                stats.lost_markers += 1;
                stats.lost_events += l.count;
                let cpu = if l.cpu == u32::MAX { 0 } else { l.cpu };
                self.per_cpu.entry(cpu).or_default().lost = true;
                self.lost.push((ts, l.cpu, l.count, l.cause));
                return Ok(());
            }
            Event::Exit(x) => {
                stats.exits += 1;
                let free = FtraceEvent {
                    timestamp: Some(ts),
                    pid: Some(x.tid),
                    sched_process_free: Some(SchedProcessFree {
                        comm: Some(self.threads.name(x.tid)),
                        pid: Some(x.tid as i32),
                        prio: Some(DEFAULT_PRIO),
                    }),
                    ..Default::default()
                };
                // The CPU is not recorded for exits: bundle them with CPU 0.
                (0, free)
            }
            Event::OffCpuStacks(_) | Event::Sample(_) => {
                stats.not_exported += 1;
                return Ok(());
            }
        };
        self.push(cpu, ev);
        self.flush_if_full(out)
    }

    fn flush_if_full(&mut self, out: &mut Out) -> Result<()> {
        if self.buffered >= Self::FLUSH_AT {
            self.flush(out)?;
        }
        Ok(())
    }

    /// Buffer a `sched_switch` on `cpu` with the threads' current names.
    fn push_switch(&mut self, cpu: u32, ts: u64, prev: Tid, state: u32, next: Tid) {
        let (p, n) = (self.threads.identity(prev), self.threads.identity(next));
        let (p_name, n_name) = (p.comm.as_str(), n.comm.as_str());
        self.per_cpu.entry(cpu).or_default().push_switch(
            ts,
            (prev, &p_name),
            state,
            (next, &n_name),
        );
        self.buffered += 1;
    }

    /// Before switch `s`: the switches the recording lost, made explicit (a gap each),
    /// then the switch sequence moved on to `s`.
    fn lost_switches(&mut self, s: &Switch, stats: &mut PerfettoStats) {
        let ts = s.ts;
        // A thread switching in while it still runs elsewhere: its switch-out there was
        // lost. Hand that CPU to idle now (the latest it can have run there), so Perfetto
        // does not draw it on two CPUs.
        if s.next_tid != 0 {
            if let Some(&other) = self.running.get(&s.next_tid) {
                if other != s.cpu {
                    let since = self.on_cpu.get(&other).map_or(self.first_ts, |x| x.1);
                    stats.gaps_running_elsewhere += 1;
                    self.gaps.push(Gap {
                        cpu: other,
                        since,
                        at: ts,
                        lost_tid: s.next_tid,
                        running_elsewhere: true,
                    });
                    self.push_switch(other, ts, s.next_tid, STATE_RUNNABLE, 0);
                    self.on_cpu.insert(other, (0, ts));
                }
            }
        }
        // The CPU's last switch put another task there: the switch-out of that one and the
        // switch-in of prev were lost. Hand over explicitly, so the states Perfetto gives
        // both are their own.
        if let Some(&(cur, since)) = self.on_cpu.get(&s.cpu) {
            if cur != s.prev_tid {
                stats.gaps_cpu_sequence += 1;
                self.gaps.push(Gap {
                    cpu: s.cpu,
                    since,
                    at: ts,
                    lost_tid: cur,
                    running_elsewhere: false,
                });
                self.push_switch(s.cpu, ts, cur, STATE_RUNNABLE, s.prev_tid);
                if self.running.get(&cur) == Some(&s.cpu) {
                    self.running.remove(&cur);
                }
            }
        }
        if self.running.get(&s.prev_tid) == Some(&s.cpu) {
            self.running.remove(&s.prev_tid);
        }
        if s.next_tid != 0 {
            self.running.insert(s.next_tid, s.cpu);
        }
        self.on_cpu.insert(s.cpu, (s.next_tid, ts));
    }

    /// A `sched_waking` with the CPU its target next ran on (pass 1), or the waker's CPU
    /// when it never ran again (counted as guessed).
    fn waking(&mut self, wk: &Waking, stats: &mut PerfettoStats) -> FtraceEvent {
        let mut tc = self.target_cpu[self.waking_index];
        self.waking_index += 1;
        if tc < 0 {
            stats.wakings_target_cpu_guessed += 1;
            tc = -1 - tc;
        }
        FtraceEvent {
            timestamp: Some(wk.ts),
            pid: Some(wk.waker_tid),
            common_flags: match wk.context {
                WakeContext::Task => None,
                WakeContext::HardIrq => Some(TRACE_FLAG_HARDIRQ),
                // The kernel marks both alike: softirq in the preempt count.
                WakeContext::SoftIrq | WakeContext::SoftIrqTask => Some(TRACE_FLAG_SOFTIRQ),
                WakeContext::Nmi => Some(TRACE_FLAG_NMI),
            },
            sched_waking: Some(SchedWaking {
                comm: Some(self.threads.name(wk.target_tid)),
                pid: Some(wk.target_tid as i32),
                prio: Some(DEFAULT_PRIO),
                success: Some(1),
                target_cpu: Some(tc),
            }),
            ..Default::default()
        }
    }
}

fn cause_name(c: LostCause) -> &'static str {
    match c {
        LostCause::RingBufferFull => "ring buffer full",
        LostCause::Malformed => "malformed",
        LostCause::OutOfOrder => "out of order",
    }
}

/// Lost-event markers: an instant each on [`TRACK_LOST`], and the running total on the
/// [`TRACK_LOST_TOTAL`] counter (also 0 at the start, so the counter spans the trace).
fn write_lost(out: &mut Out, lost: &[(u64, u32, u64, LostCause)]) -> Result<()> {
    if lost.is_empty() {
        return Ok(());
    }
    let track = out.track(TrackDescriptor {
        name: Some(TRACK_LOST.into()),
        description: Some("chainrec lost-event markers: events the recorder could not keep".into()),
        ..Default::default()
    })?;
    let total = out.track(TrackDescriptor {
        name: Some(TRACK_LOST_TOTAL.into()),
        counter: Some(CounterDescriptor {}),
        ..Default::default()
    })?;
    let mut sum = 0u64;
    for &(ts, cpu, count, cause) in lost {
        sum += count;
        let mut args = vec![
            DebugAnnotation::int("count", count),
            DebugAnnotation::text("cause", cause_name(cause)),
        ];
        if cpu != u32::MAX {
            args.push(DebugAnnotation::int("cpu", cpu as u64));
        }
        out.track_event(
            ts,
            TrackEvent {
                r#type: Some(TYPE_INSTANT),
                track_uuid: Some(track),
                name: Some(format!("lost {count} events ({})", cause_name(cause))),
                debug_annotations: args,
                ..Default::default()
            },
        )?;
        out.track_event(
            ts,
            TrackEvent {
                r#type: Some(TYPE_COUNTER),
                track_uuid: Some(total),
                counter_value: Some(sum.min(i64::MAX as u64) as i64),
                ..Default::default()
            },
        )?;
    }
    Ok(())
}

/// Switch-sequence gaps: a slice per gap over the interval whose CPU occupancy is
/// unknown, on one [`TRACK_GAPS`] track per CPU.
fn write_gaps(out: &mut Out, gaps: &[Gap], threads: &Threads) -> Result<()> {
    let cpus: BTreeSet<u32> = gaps.iter().map(|g| g.cpu).collect();
    let mut track = HashMap::new();
    for cpu in cpus {
        let uuid = out.track(TrackDescriptor {
            name: Some(format!("{TRACK_GAPS} CPU {cpu}")),
            description: Some(
                "Intervals where switch events are missing (lost): the CPU slices Perfetto draws there are not known to be right".into(),
            ),
            ..Default::default()
        })?;
        track.insert(cpu, uuid);
    }
    // Per CPU the gaps are disjoint and in time order (each starts at or after the
    // CPU's previous switch), so begin/end pairs never interleave on one track.
    for g in gaps {
        let what = if g.running_elsewhere {
            "switch-out lost (ran on)"
        } else {
            "switch events lost (was running)"
        };
        out.slice(
            track[&g.cpu],
            g.since,
            g.at,
            &format!("gap: {what} {} {}", threads.name(g.lost_tid), g.lost_tid),
            vec![
                DebugAnnotation::int("tid", g.lost_tid as u64),
                DebugAnnotation::int("cpu", g.cpu as u64),
            ],
        )?;
    }
    Ok(())
}

/// The recording's own loss and stack counts, as arguments of one instant at the start.
fn write_recording(out: &mut Out, meta: &RecordingMeta, first_ts: u64) -> Result<()> {
    let track = out.track(TrackDescriptor {
        name: Some(TRACK_RECORDING.into()),
        ..Default::default()
    })?;
    let l = &meta.lost;
    let st = out.stats.clone();
    let args = vec![
        DebugAnnotation::text("host", meta.host.clone()),
        DebugAnnotation::int("lost_events", l.events()),
        DebugAnnotation::int("lost_ringbuf_full", l.ringbuf_full),
        DebugAnnotation::int("lost_malformed", l.malformed),
        DebugAnnotation::int("lost_out_of_order", l.out_of_order),
        DebugAnnotation::int("kernel_stack_failed", l.kernel_stack_failed),
        DebugAnnotation::int("user_stack_failed", l.user_stack_failed),
        DebugAnnotation::int("lost_markers", st.lost_markers),
        DebugAnnotation::int("gaps_running_elsewhere", st.gaps_running_elsewhere),
        DebugAnnotation::int("gaps_cpu_sequence", st.gaps_cpu_sequence),
        DebugAnnotation::int("threads_without_process", st.threads_without_process),
        DebugAnnotation::int("wakings_target_cpu_guessed", st.wakings_target_cpu_guessed),
    ];
    out.track_event(
        first_ts,
        TrackEvent {
            r#type: Some(TYPE_INSTANT),
            track_uuid: Some(track),
            name: Some(format!(
                "chainrec recording: {} events lost, {} switch gaps",
                l.events().max(st.lost_events),
                st.gaps()
            )),
            debug_annotations: args,
            ..Default::default()
        },
    )
}

/// One thread track per thread of `t`.
fn write_slice_track(out: &mut Out, t: &SliceTrack, threads: &Threads) -> Result<()> {
    for (&tid, slices) in &t.slices {
        let uuid = out.track(TrackDescriptor {
            name: Some(t.name.clone()),
            thread: Some(ThreadDescriptor {
                // A thread the trace never named: its own process.
                pid: Some(threads.get(tid).map_or(tid, |t| t.tgid) as i32),
                tid: Some(tid as i32),
            }),
            ..Default::default()
        })?;
        let mut sorted: Vec<&Slice> = slices.iter().collect();
        sorted.sort_by_key(|s| (s.start_ns, std::cmp::Reverse(s.end_ns)));
        for s in sorted {
            out.slice(uuid, s.start_ns, s.end_ns, &s.name, Vec::new())?;
            out.stats.extra_slices += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundles written from events encoded as they come are the packets prost makes
    /// of the same events, byte for byte.
    #[test]
    fn encoded_bundles_are_prosts_packets() {
        let switch = FtraceEvent {
            timestamp: Some(1_000_000_123),
            pid: Some(42),
            sched_switch: Some(SchedSwitch {
                prev_comm: Some("a-rather-long-c".into()),
                prev_pid: Some(42),
                prev_prio: Some(120),
                prev_state: Some(1),
                next_comm: Some("".into()),
                next_pid: Some(0),
                next_prio: Some(120),
            }),
            ..Default::default()
        };
        let waking = FtraceEvent {
            timestamp: Some(7),
            pid: Some(0),
            common_flags: Some(TRACE_FLAG_SOFTIRQ),
            sched_waking: Some(SchedWaking {
                comm: Some("w".into()),
                pid: Some(9),
                prio: Some(100),
                success: Some(1),
                target_cpu: Some(300),
            }),
            ..Default::default()
        };
        for (cpu, events, lost) in [
            (0, vec![switch.clone()], false),
            (3, vec![switch.clone(), waking.clone()], true),
            (
                1000,
                (0..200).map(|_| waking.clone()).collect::<Vec<_>>(),
                false,
            ),
            (5, vec![], true),
        ] {
            let write = |f: &dyn Fn(&mut Out) -> Result<()>| {
                let mut bytes = Vec::new();
                let mut out = Out {
                    w: &mut bytes,
                    stats: PerfettoStats::default(),
                    buf: Vec::new(),
                    next_uuid: 0,
                };
                f(&mut out).unwrap();
                assert_eq!(out.stats.packets, 1);
                bytes
            };
            let want = write(&|o| o.packet(&ftrace_packet(cpu, events.clone(), lost)));
            let mut encoded = EncodedEvents {
                lost,
                ..Default::default()
            };
            for e in &events {
                encoded.push(e);
            }
            let got = write(&|o| o.ftrace_events(cpu, &encoded));
            assert_eq!(got, want, "cpu {cpu}, {} events, lost {lost}", events.len());
        }
    }

    /// Switches encoded from the names are prost's encoding of the switch event, for
    /// pids and states of every varint length (and negative as i32).
    #[test]
    fn encoded_switches_are_prosts() {
        for (ts, prev, state, next) in [
            (0, (0, "swapper"), 0, (1, "")),
            (
                u64::MAX,
                (u32::MAX, "tid-4294967295"),
                u32::MAX,
                (70000, "ü-multibyte"),
            ),
            (1 << 40, (300, "a-rather-long-c"), 0x400, (2, "x")),
        ] {
            let mut want = EncodedEvents::default();
            want.push(&switch_event(ts, prev, state, next));
            let mut got = EncodedEvents::default();
            got.push_switch(ts, prev, state, next);
            assert_eq!(got.bytes, want.bytes, "{prev:?} -> {next:?}");
        }
    }
}

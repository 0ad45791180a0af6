//! Columnar encoding of one event chunk (the raw payload before zstd). See
//! `docs/FORMAT.md`, "Event chunk payload".
//!
//! Layout: `n, first_ts, dict_len, dict[dict_len]` (varints), then six columns, each
//! `len (varint), bytes`: kind/cpu bytes, ts deltas, flags, tid refs, stack ids, misc.
//! Decoding reads every column through a bounds-checked cursor that never panics: a read
//! past the end yields 0 and poisons the cursor, which is checked once per chunk.

use crate::event::*;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// CPUs below this are tracked for the "prev/waker = task running on this cpu"
/// prediction; events on higher CPUs are always encoded explicitly.
pub(crate) const PRED_CPUS: usize = 1024;
/// Sentinel "unknown running task" at chunk start.
const NO_TID: u32 = u32::MAX;
/// Kind/cpu byte: cpus below this are stored inline in the high 5 bits.
const CPU_ESCAPE: u32 = 31;

const F_PRED: u8 = 1;
const F_SOURCE: u8 = 0x80;

/// Stack id codes in the flags byte: 0..=2 are the reserved ids NONE, SKIPPED, FAILED;
/// 3 means "explicit, in the stack column".
#[inline]
fn stack_code(s: StackId) -> u8 {
    if s.0 < 3 {
        s.0 as u8
    } else {
        3
    }
}

/// Multiplicative hasher for u32 keys (tid maps in the encoder).
#[derive(Default)]
pub(crate) struct IdHasher(u64);
impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64 ^ 0x5bd1_e995).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
pub(crate) type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

#[inline]
pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reusable encoder state (columns kept between chunks to avoid reallocation).
#[derive(Default)]
pub(crate) struct ChunkEncoder {
    kind: Vec<u8>,
    ts: Vec<u8>,
    flags: Vec<u8>,
    tid_refs: Vec<u32>,
    tids: Vec<u8>,
    stacks: Vec<u8>,
    misc: Vec<u8>,
    freq: IdMap<u32, u32>,
    dict: Vec<(u32, u32)>,
    cur: Vec<u32>,
}

impl ChunkEncoder {
    /// Encode `events` (non-empty, time ordered) into `out` (cleared first).
    pub(crate) fn encode(&mut self, events: &[Event], out: &mut Vec<u8>) {
        self.kind.clear();
        self.ts.clear();
        self.flags.clear();
        self.tid_refs.clear();
        self.tids.clear();
        self.stacks.clear();
        self.misc.clear();
        self.freq.clear();
        self.cur.clear();
        self.cur.resize(PRED_CPUS, NO_TID);
        out.clear();

        let first_ts = events.first().map_or(0, |e| e.ts());
        let mut prev_ts = first_ts;
        for e in events {
            let ts = e.ts();
            put_varint(&mut self.ts, ts - prev_ts);
            prev_ts = ts;
            match e {
                Event::Switch(s) => {
                    self.kind_cpu(EventKind::Switch, s.cpu);
                    let pred = self.predicted(s.cpu);
                    let mut f = 0u8;
                    if pred == Some(s.prev_tid) {
                        f |= F_PRED;
                    } else {
                        self.tid_refs.push(s.prev_tid);
                    }
                    self.tid_refs.push(s.next_tid);
                    let st = match s.prev_state {
                        0..=2 => s.prev_state as u8,
                        other => {
                            put_varint(&mut self.misc, other as u64);
                            3
                        }
                    };
                    f |= st << 1;
                    f |= self.stack_pair(s.prev_kstack, s.prev_ustack);
                    self.flags.push(f);
                    if (s.cpu as usize) < PRED_CPUS {
                        self.cur[s.cpu as usize] = s.next_tid;
                    }
                }
                Event::Waking(w) => {
                    self.kind_cpu(EventKind::Waking, w.cpu);
                    let mut f = 0u8;
                    if self.predicted(w.cpu) == Some(w.waker_tid) {
                        f |= F_PRED;
                    } else {
                        self.tid_refs.push(w.waker_tid);
                    }
                    self.tid_refs.push(w.target_tid);
                    // SoftIrqTask is context 0 with a source (format 1.1): a task waking
                    // never has one (TraceWriter::push checks), and a 1.0 reader takes it
                    // for the task hop it is.
                    let bits = match w.context {
                        WakeContext::SoftIrqTask => 0,
                        c => c as u8,
                    };
                    f |= bits << 1;
                    f |= self.stack_pair(w.waker_kstack, w.waker_ustack);
                    if w.source != 0 {
                        f |= F_SOURCE;
                        put_varint(&mut self.misc, w.source as u64);
                    }
                    self.flags.push(f);
                }
                Event::WakeupNew(w) => {
                    self.kind_cpu(EventKind::WakeupNew, w.cpu);
                    let mut f = 0u8;
                    if self.predicted(w.cpu) == Some(w.parent_tid) {
                        f |= F_PRED;
                    } else {
                        self.tid_refs.push(w.parent_tid);
                    }
                    self.tid_refs.push(w.child_tid);
                    put_varint(&mut self.misc, w.child_tgid as u64);
                    self.flags.push(f);
                }
                Event::Comm(c) => {
                    self.kind.push(EventKind::Comm as u8);
                    self.tid_refs.push(c.tid);
                    put_varint(&mut self.misc, c.tgid as u64);
                    self.misc.push(c.reason as u8);
                    let len = 16 - c.comm.0.iter().rev().take_while(|&&b| b == 0).count();
                    self.misc.push(len as u8);
                    self.misc.extend_from_slice(&c.comm.0[..len]);
                }
                Event::Exit(x) => {
                    self.kind.push(EventKind::Exit as u8);
                    self.tid_refs.push(x.tid);
                    put_varint(&mut self.misc, x.tgid as u64);
                }
                Event::OffCpuStacks(o) => {
                    self.kind.push(EventKind::OffCpuStacks as u8);
                    self.tid_refs.push(o.tid);
                    let f = self.stack_pair(o.kstack, o.ustack);
                    self.flags.push(f);
                }
                Event::Lost(l) => {
                    self.kind_cpu(EventKind::Lost, l.cpu);
                    put_varint(&mut self.misc, l.count);
                    self.misc.push(l.cause as u8);
                }
                Event::Sample(x) => {
                    // The sampled task is nearly always the one the last switch on this
                    // CPU put there, so its tid is usually predicted and not stored.
                    self.kind_cpu(EventKind::Sample, x.cpu);
                    let mut f = 0u8;
                    if self.predicted(x.cpu) == Some(x.tid) {
                        f |= F_PRED;
                    } else {
                        self.tid_refs.push(x.tid);
                    }
                    f |= self.stack_pair(x.kstack, x.ustack);
                    self.flags.push(f);
                }
            }
        }

        // Tid dictionary, most referenced first, so hot tids get 1-byte indices.
        for &t in &self.tid_refs {
            *self.freq.entry(t).or_insert(0) += 1;
        }
        self.dict.clear();
        self.dict.extend(self.freq.iter().map(|(&t, &n)| (t, n)));
        self.dict
            .sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        for (i, (t, _)) in self.dict.iter().enumerate() {
            self.freq.insert(*t, i as u32);
        }
        for &t in &self.tid_refs {
            put_varint(&mut self.tids, self.freq[&t] as u64);
        }

        put_varint(out, events.len() as u64);
        put_varint(out, first_ts);
        put_varint(out, self.dict.len() as u64);
        for (t, _) in &self.dict {
            put_varint(out, *t as u64);
        }
        for col in [
            &self.kind,
            &self.ts,
            &self.flags,
            &self.tids,
            &self.stacks,
            &self.misc,
        ] {
            put_varint(out, col.len() as u64);
            out.extend_from_slice(col);
        }
    }

    #[inline]
    fn kind_cpu(&mut self, kind: EventKind, cpu: u32) {
        if cpu < CPU_ESCAPE {
            self.kind.push(kind as u8 | (cpu as u8) << 3);
        } else {
            self.kind.push(kind as u8 | (CPU_ESCAPE as u8) << 3);
            put_varint(&mut self.misc, cpu as u64);
        }
    }

    #[inline]
    fn predicted(&self, cpu: u32) -> Option<u32> {
        self.cur.get(cpu as usize).copied()
    }

    #[inline]
    fn stack_pair(&mut self, k: StackId, u: StackId) -> u8 {
        let (kc, uc) = (stack_code(k), stack_code(u));
        if kc == 3 {
            put_varint(&mut self.stacks, k.0 as u64);
        }
        if uc == 3 {
            put_varint(&mut self.stacks, u.0 as u64);
        }
        kc << 3 | uc << 5
    }
}

/// Bounds-checked reader: past the end it yields zeros and sets `bad`.
struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    bad: bool,
}

impl<'a> Cur<'a> {
    fn new(b: &'a [u8]) -> Self {
        Cur {
            b,
            pos: 0,
            bad: false,
        }
    }
    #[inline(always)]
    fn u8(&mut self) -> u8 {
        match self.b.get(self.pos) {
            Some(&v) => {
                self.pos += 1;
                v
            }
            None => {
                self.bad = true;
                0
            }
        }
    }
    #[inline(always)]
    fn varint(&mut self) -> u64 {
        if let Some(&v) = self.b.get(self.pos) {
            if v < 0x80 {
                self.pos += 1;
                return v as u64;
            }
        }
        self.varint_slow()
    }
    #[inline(never)]
    fn varint_slow(&mut self) -> u64 {
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.b.get(self.pos) else {
                self.bad = true;
                return 0;
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                self.bad = true;
                return 0;
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
            if shift > 63 {
                self.bad = true;
                return 0;
            }
        }
    }
    #[inline(always)]
    fn u32v(&mut self) -> u32 {
        let v = self.varint();
        if v > u32::MAX as u64 {
            self.bad = true;
        }
        v as u32
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        if self.b.len() - self.pos < n {
            self.bad = true;
            self.pos = self.b.len();
            return &[];
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        s
    }
    fn done(&self) -> bool {
        !self.bad && self.pos == self.b.len()
    }
}

/// What a decoded chunk said about itself.
pub(crate) struct ChunkSummary {
    pub events: u64,
    pub first_ts: u64,
    pub last_ts: u64,
}

/// Reusable per-thread decode buffers (no per-chunk allocation in steady state).
#[derive(Default)]
pub(crate) struct DecodeScratch {
    dict: Vec<u32>,
    ts: Vec<u64>,
    tids: Vec<u32>,
}

impl DecodeScratch {
    /// Drop oversized buffers after an unusually large chunk.
    pub(crate) fn trim(&mut self) {
        if self.ts.capacity() > (1 << 20) {
            *self = DecodeScratch::default();
        }
    }
}

/// Decode a whole column of varints into `out`; Err on malformed or overlong input.
#[inline(always)]
fn varint_column(col: &[u8], mut f: impl FnMut(u64) -> bool) -> Result<(), &'static str> {
    let mut i = 0usize;
    let n = col.len();
    while i < n {
        let b0 = col[i] as u64;
        if b0 < 0x80 {
            i += 1;
            if !f(b0) {
                return Err("value out of range");
            }
            continue;
        }
        if i + 1 < n && col[i + 1] < 0x80 {
            let v = (b0 & 0x7f) | (col[i + 1] as u64) << 7;
            i += 2;
            if !f(v) {
                return Err("value out of range");
            }
            continue;
        }
        let mut c = Cur {
            b: col,
            pos: i,
            bad: false,
        };
        let v = c.varint_slow();
        if c.bad {
            return Err("bad varint");
        }
        i = c.pos;
        if !f(v) {
            return Err("value out of range");
        }
    }
    Ok(())
}

/// A chunk's header: its event count, first timestamp and six columns.
struct ChunkColumns<'a> {
    n: u64,
    first_ts: u64,
    kinds: &'a [u8],
    ts: &'a [u8],
    flags: &'a [u8],
    tids: &'a [u8],
    stacks: &'a [u8],
    misc: &'a [u8],
}

/// Read a chunk's header, its tid dictionary into `dict`, and split its columns.
#[inline]
fn read_header<'a>(raw: &'a [u8], dict: &mut Vec<u32>) -> Result<ChunkColumns<'a>, String> {
    let mut hdr = Cur::new(raw);
    let n = hdr.varint();
    let first_ts = hdr.varint();
    let ndict = hdr.varint();
    if hdr.bad || n > raw.len() as u64 || ndict > raw.len() as u64 {
        return Err("bad chunk header".into());
    }
    dict.clear();
    for _ in 0..ndict {
        dict.push(hdr.u32v());
    }
    let mut cols: [&[u8]; 6] = [&[]; 6];
    for c in cols.iter_mut() {
        let len = hdr.varint();
        if hdr.bad || len > (raw.len() - hdr.pos) as u64 {
            return Err("column length exceeds chunk".into());
        }
        *c = hdr.bytes(len as usize);
    }
    if !hdr.done() {
        return Err("trailing bytes after columns".into());
    }
    let [kinds, ts, flags, tids, stacks, misc] = cols;
    if kinds.len() as u64 != n {
        return Err(format!(
            "kind column has {} entries for {n} events",
            kinds.len()
        ));
    }
    Ok(ChunkColumns {
        n,
        first_ts,
        kinds,
        ts,
        flags,
        tids,
        stacks,
        misc,
    })
}

/// Pass 1, timestamps: the prefix sums of the deltas in `col` from `first_ts`, one per
/// event, into `out`.
#[inline]
fn decode_timestamps(
    col: &[u8],
    first_ts: u64,
    events: usize,
    out: &mut Vec<u64>,
) -> Result<(), String> {
    out.clear();
    out.reserve(events);
    let mut ts = first_ts;
    let mut overflow = false;
    varint_column(col, |d| {
        match ts.checked_add(d) {
            Some(t) => ts = t,
            None => overflow = true,
        }
        out.push(ts);
        true
    })
    .map_err(|e| format!("ts column: {e}"))?;
    if overflow {
        return Err("timestamp overflow".into());
    }
    if out.len() != events {
        return Err(format!(
            "ts column has {} entries for {events} events",
            out.len()
        ));
    }
    Ok(())
}

/// Pass 1, tids: the dictionary entries the tid column refers to, into `out`.
#[inline]
fn decode_tids(col: &[u8], dict: &[u32], events: usize, out: &mut Vec<u32>) -> Result<(), String> {
    out.clear();
    out.reserve(events.saturating_mul(2).min(col.len()));
    varint_column(col, |i| match dict.get(i as usize) {
        Some(&t) => {
            out.push(t);
            true
        }
        None => false,
    })
    .map_err(|e| format!("tid column: {e}"))
}

/// Pass 2: the columns an event reads besides its kind and timestamp, each consumed in
/// step with the kind column. A read past a column's end yields 0 and sets `bad` (or
/// poisons the cursor), checked once per chunk in [`EventColumns::finish`].
struct EventColumns<'a> {
    tids: &'a [u32],
    /// Next entry of `tids`.
    ti: usize,
    flags: &'a [u8],
    /// Next byte of `flags`.
    fi: usize,
    stacks: Cur<'a>,
    misc: Cur<'a>,
    /// The task each CPU runs, as the switches so far say (the predicted prev/waker tid).
    running: [u32; PRED_CPUS],
    bad: bool,
}

impl<'a> EventColumns<'a> {
    #[inline(always)]
    fn new(tids: &'a [u32], flags: &'a [u8], stacks: &'a [u8], misc: &'a [u8]) -> Self {
        EventColumns {
            tids,
            ti: 0,
            flags,
            fi: 0,
            stacks: Cur::new(stacks),
            misc: Cur::new(misc),
            running: [NO_TID; PRED_CPUS],
            bad: false,
        }
    }

    /// The event's CPU: inline in the kind byte, or escaped to the misc column.
    #[inline(always)]
    fn cpu(&mut self, kind_byte: u8) -> u32 {
        let cpu = (kind_byte >> 3) as u32;
        if cpu == CPU_ESCAPE && matches!(kind_byte & 7, 0 | 1 | 2 | 6 | 7) {
            self.misc.u32v()
        } else {
            cpu
        }
    }

    #[inline(always)]
    fn tid(&mut self) -> u32 {
        match self.tids.get(self.ti) {
            Some(&t) => {
                self.ti += 1;
                t
            }
            None => {
                self.bad = true;
                0
            }
        }
    }

    #[inline(always)]
    fn flags(&mut self) -> u8 {
        match self.flags.get(self.fi) {
            Some(&f) => {
                self.fi += 1;
                f
            }
            None => {
                self.bad = true;
                0
            }
        }
    }

    /// The stack whose 2-bit code is the low bits of `code` (see [`stack_code`]).
    #[inline(always)]
    fn stack(&mut self, code: u8) -> StackId {
        let c = code & 3;
        if c == 3 {
            StackId(self.stacks.u32v())
        } else {
            StackId(c as u32)
        }
    }

    /// The task running on `cpu` when the flags say it was predicted, else the next tid.
    #[inline(always)]
    fn predicted_or_tid(&mut self, f: u8, cpu: u32) -> u32 {
        if f & F_PRED != 0 {
            match self.running.get(cpu as usize) {
                Some(&t) => t,
                None => {
                    self.bad = true;
                    0
                }
            }
        } else {
            self.tid()
        }
    }

    #[inline(always)]
    fn switch(&mut self, ts: u64, cpu: u32) -> Event {
        let f = self.flags();
        let prev_tid = self.predicted_or_tid(f, cpu);
        let next_tid = self.tid();
        let prev_state = match (f >> 1) & 3 {
            3 => self.misc.u32v(),
            s => s as u32,
        };
        let prev_kstack = self.stack(f >> 3);
        let prev_ustack = self.stack(f >> 5);
        if let Some(c) = self.running.get_mut(cpu as usize) {
            *c = next_tid;
        }
        Event::Switch(Switch {
            ts,
            cpu,
            prev_tid,
            prev_state,
            next_tid,
            prev_kstack,
            prev_ustack,
        })
    }

    #[inline(always)]
    fn waking(&mut self, ts: u64, cpu: u32) -> Event {
        let f = self.flags();
        let waker_tid = self.predicted_or_tid(f, cpu);
        let target_tid = self.tid();
        let waker_kstack = self.stack(f >> 3);
        let waker_ustack = self.stack(f >> 5);
        let source = if f & F_SOURCE != 0 {
            self.misc.u32v()
        } else {
            0
        };
        // Two bits cover four contexts; task context with a source is a softirq
        // the task ran itself (format 1.1).
        let context = match (f >> 1) & 3 {
            0 if f & F_SOURCE != 0 => WakeContext::SoftIrqTask,
            0 => WakeContext::Task,
            1 => WakeContext::SoftIrq,
            2 => WakeContext::HardIrq,
            _ => WakeContext::Nmi,
        };
        Event::Waking(Waking {
            ts,
            cpu,
            waker_tid,
            target_tid,
            context,
            source,
            waker_kstack,
            waker_ustack,
        })
    }

    #[inline(always)]
    fn wakeup_new(&mut self, ts: u64, cpu: u32) -> Event {
        let f = self.flags();
        let parent_tid = self.predicted_or_tid(f, cpu);
        let child_tid = self.tid();
        let child_tgid = self.misc.u32v();
        Event::WakeupNew(WakeupNew {
            ts,
            cpu,
            parent_tid,
            child_tid,
            child_tgid,
        })
    }

    #[inline(always)]
    fn comm(&mut self, ts: u64) -> Event {
        let tid = self.tid();
        let tgid = self.misc.u32v();
        let reason = CommReason::from_u8(self.misc.u8()).unwrap_or_else(|| {
            self.bad = true;
            CommReason::Seen
        });
        let len = self.misc.u8() as usize;
        let mut comm = [0u8; 16];
        if len <= 16 {
            // Short input yields fewer bytes (and poisons the cursor).
            let b = self.misc.bytes(len);
            comm[..b.len()].copy_from_slice(b);
        } else {
            self.bad = true;
        }
        Event::Comm(TaskComm {
            ts,
            tid,
            tgid,
            comm: Comm(comm),
            reason,
        })
    }

    #[inline(always)]
    fn exit(&mut self, ts: u64) -> Event {
        let tid = self.tid();
        let tgid = self.misc.u32v();
        Event::Exit(Exit { ts, tid, tgid })
    }

    #[inline(always)]
    fn off_cpu_stacks(&mut self, ts: u64) -> Event {
        let f = self.flags();
        let tid = self.tid();
        Event::OffCpuStacks(OffCpuStacks {
            ts,
            tid,
            kstack: self.stack(f >> 3),
            ustack: self.stack(f >> 5),
        })
    }

    #[inline(always)]
    fn lost(&mut self, ts: u64, cpu: u32) -> Event {
        let count = self.misc.varint();
        let cause = LostCause::from_u8(self.misc.u8()).unwrap_or_else(|| {
            self.bad = true;
            LostCause::RingBufferFull
        });
        Event::Lost(Lost {
            ts,
            cpu,
            count,
            cause,
        })
    }

    #[inline(always)]
    fn sample(&mut self, ts: u64, cpu: u32) -> Event {
        let f = self.flags();
        let tid = self.predicted_or_tid(f, cpu);
        Event::Sample(Sample {
            ts,
            cpu,
            tid,
            kstack: self.stack(f >> 3),
            ustack: self.stack(f >> 5),
        })
    }

    /// Every column was read exactly to its end, with no read past it.
    #[inline]
    fn finish(&self) -> Result<(), String> {
        if self.bad {
            return Err("flags, tid or enum value inconsistent with the kind column".into());
        }
        if self.fi != self.flags.len() || self.ti != self.tids.len() {
            return Err("flags or tid column inconsistent with kind column".into());
        }
        for (name, c) in [("stack", &self.stacks), ("misc", &self.misc)] {
            if !c.done() {
                return Err(format!("{name} column inconsistent with kind column"));
            }
        }
        Ok(())
    }
}

/// Decode one chunk payload, appending to `out`. On error `out` may hold a partial,
/// meaningless tail: the caller truncates it.
///
/// `samples`: whether kind 7 ([`Event::Sample`]) is valid (format 2 and later); in a
/// format 1 file it is an unknown kind, as a 1.x reader would find it.
pub(crate) fn decode(
    raw: &[u8],
    out: &mut Vec<Event>,
    sc: &mut DecodeScratch,
    samples: bool,
) -> Result<ChunkSummary, String> {
    let cols = read_header(raw, &mut sc.dict)?;
    // Pass 1: timestamps and tids in tight loops; the per-event loop then just indexes
    // these arrays.
    let events = cols.kinds.len();
    decode_timestamps(cols.ts, cols.first_ts, events, &mut sc.ts)?;
    decode_tids(cols.tids, &sc.dict, events, &mut sc.tids)?;

    // Pass 2: assemble events.
    let mut ev = EventColumns::new(&sc.tids, cols.flags, cols.stacks, cols.misc);
    out.reserve(events);
    for (&kb, &ts) in cols.kinds.iter().zip(&sc.ts) {
        let cpu = ev.cpu(kb);
        out.push(match kb & 7 {
            0 => ev.switch(ts, cpu),
            1 => ev.waking(ts, cpu),
            2 => ev.wakeup_new(ts, cpu),
            3 => ev.comm(ts),
            4 => ev.exit(ts),
            5 => ev.off_cpu_stacks(ts),
            6 => ev.lost(ts, cpu),
            7 if samples => ev.sample(ts, cpu),
            kind => return Err(format!("unknown event kind {kind}")),
        });
    }
    ev.finish()?;
    Ok(ChunkSummary {
        events: cols.n,
        first_ts: sc.ts.first().copied().unwrap_or(cols.first_ts),
        last_ts: sc.ts.last().copied().unwrap_or(cols.first_ts),
    })
}

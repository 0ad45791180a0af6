//! Issue 37's parallel walk, measured on the walk floor's semantics before the engine is
//! rebuilt on it (docs/ENGINE.md, "The second design, chosen"). The same time-bounded
//! chains as `walk_floor` (no dedup, lazy stacks as they stand at the switch-in, no
//! exits, no PID reuse, no run-queue levels, hops never forgotten), computed three ways
//! over the same decoded events:
//!
//! * **serial**: one state machine over the events in order (today's shape);
//! * **two passes by thread**: (A) the events scattered into per-thread lists, in
//!   parallel by range of events; (B) each thread's own state machine over its list, in
//!   parallel by thread: its wakings that end a wait (hops), its waits and their first
//!   hop, and for each waking it sends its last hop then (the cause of the hop that
//!   waking makes); (C+D) every wait's chain walked over those read-only arrays, in
//!   parallel by wait;
//! * **time split**: the events cut into segments, each run by the serial machine from
//!   unknown thread states, in parallel; a thread's events before its first switch-out in
//!   a segment, and a cause the segment cannot know (a waker that received no hop in it
//!   yet), are left to a serial stitch in segment order, which replays them with the true
//!   states and resolves them; the waits whose chains met such a cause are walked last,
//!   in parallel.
//!
//! All fold each wait's path (node keys and per-level weights) into an order-free
//! checksum; the tool fails unless they agree. Phases are measured in CPU seconds of the
//! process (so a loaded machine does not distort them); the largest segment's machine
//! is the time split's critical path on as many cores as segments.
//!
//! ```text
//! cargo run --release -p chainrec-tools --bin twopass -- /tmp/s23/busy20m.zst [THREADS]
//! ```
//!
//! Needs about 100 bytes of memory per event.
use chainrec_format::Event;

mod decoded;
use rayon::prelude::*;

/// CPU time of the calling thread (s): what a phase costs whatever else runs on the
/// machine.
fn thread_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU time of the whole process (s, user + system, all threads): what a phase costs
/// whatever else runs on the machine (wall time is only meaningful on a quiet one).
fn proc_cpu() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid rusage to write.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Depth limit (the engine's default).
const MAX_DEPTH: usize = 16;
const NONE: u32 = u32::MAX;

/// A node by what names it (a thread or an interrupt, and its stacks): not interned, so
/// both walks name nodes the same way without sharing a table.
type Key = (u32, u32, u32);

/// A hop: a waking that ended a thread's wait.
#[derive(Clone, Copy)]
struct Hop {
    /// Index of the waking in the trace's events.
    idx: u32,
    ts: u64,
    /// The waker's thread (`NONE` for an interrupt or the idle task: metal).
    waker: u32,
    key: Key,
    /// Switch-out of the woken wait (where a chain through this hop's wakee starts).
    wait_start: u64,
}

/// A wait ended by a hop, closed at its switch-in.
#[derive(Clone, Copy)]
struct Wait {
    tid: u32,
    switch_out: u64,
    first_hop: u32,
    kstack: u32,
    ustack: u32,
}

#[inline]
fn mix(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

#[inline]
fn key_hash(k: Key) -> u64 {
    mix(mix(u64::from(k.0), u64::from(k.1)), u64::from(k.2))
}

/// Walk one wait's chain: `hop(i)` gives hop i, `cause(i)` its cause (`NONE`: none).
/// Returns the path's checksum (root key, then each level's key and weight).
#[inline]
fn walk(w: &Wait, hop: impl Fn(u32) -> Hop, cause: impl Fn(u32) -> u32) -> u64 {
    let mut h = key_hash((w.tid, w.kstack, w.ustack));
    let first = hop(w.first_hop);
    let (mut lo, mut hi, mut cur, mut cur_id) = (w.switch_out, first.ts, first, w.first_hop);
    for _ in 0..MAX_DEPTH {
        h = mix(h, key_hash(cur.key));
        let c = if cur.waker == NONE {
            NONE
        } else {
            cause(cur_id)
        };
        let next = (c != NONE).then(|| hop(c)).filter(|n| n.ts > lo);
        let Some(next) = next else {
            h = mix(h, hi.saturating_sub(lo));
            break;
        };
        let lo2 = lo.max(next.wait_start);
        let hi2 = next.ts.min(hi);
        h = mix(h, hi.saturating_sub(lo) - hi2.saturating_sub(lo2));
        (lo, hi, cur, cur_id) = (lo2, hi2, next, c);
    }
    // Order-free over waits: the sum of a strong per-path hash.
    mix(h, 0x5bd1_e995)
}

/// The key of the hop a waking makes (its waker thread, or `NONE` when metal).
#[inline]
fn waking_hop(w: &chainrec_format::Waking, idx: u32, wait_start: u64) -> Hop {
    let metal = !w.context.is_task() || w.waker_tid == 0;
    Hop {
        idx,
        ts: w.ts,
        waker: if metal { NONE } else { w.waker_tid },
        key: if metal {
            (u32::MAX - w.context as u32, w.source, w.waker_kstack.0)
        } else {
            (w.waker_tid, w.waker_kstack.0, w.waker_ustack.0)
        },
        wait_start,
    }
}

#[derive(Clone, Copy, Default)]
struct Task {
    off: bool,
    switch_out: u64,
    state: u32,
    /// The hop that ended the current wait (`NONE`: not woken yet).
    wake_hop: u32,
    /// The last hop this thread received (`NONE`: none yet).
    last_hop: u32,
    kstack: u32,
    ustack: u32,
}

impl Task {
    /// The wait this switch-in of `tid` ends, when it was a blocked wait a hop woke.
    #[inline]
    fn ending_wait(&self, tid: u32) -> Option<Wait> {
        (self.off && self.state != 0 && self.wake_hop != NONE).then_some(Wait {
            tid,
            switch_out: self.switch_out,
            first_hop: self.wake_hop,
            kstack: self.kstack,
            ustack: self.ustack,
        })
    }

    /// Lazily captured stacks arrived (0: that side was not captured).
    #[inline]
    fn set_stacks(&mut self, kstack: u32, ustack: u32) {
        if kstack != 0 {
            self.kstack = kstack;
        }
        if ustack != 0 {
            self.ustack = ustack;
        }
    }

    fn new() -> Self {
        Task {
            wake_hop: NONE,
            last_hop: NONE,
            ..Task::default()
        }
    }
}

/// Today's shape: one pass in event order. Returns (checksum, waits, hops).
fn serial(events: &[Event], max_tid: usize) -> (u64, u64, usize) {
    let mut tasks = vec![Task::new(); max_tid + 1];
    let mut hops: Vec<Hop> = Vec::new();
    let mut causes: Vec<u32> = Vec::new();
    let (mut sum, mut waits) = (0u64, 0u64);
    for (i, ev) in events.iter().enumerate() {
        match ev {
            Event::Switch(s) => {
                if s.prev_tid != 0 {
                    let t = &mut tasks[s.prev_tid as usize];
                    (t.off, t.switch_out, t.state, t.wake_hop) = (true, s.ts, s.prev_state, NONE);
                    (t.kstack, t.ustack) = (s.prev_kstack.0, s.prev_ustack.0);
                }
                if s.next_tid != 0 {
                    let t = tasks[s.next_tid as usize];
                    if let Some(w) = t.ending_wait(s.next_tid) {
                        let hh = walk(&w, |i| hops[i as usize], |i| causes[i as usize]);
                        sum = sum.wrapping_add(hh);
                        waits += 1;
                    }
                    tasks[s.next_tid as usize].off = false;
                }
            }
            Event::Waking(w) => {
                if w.target_tid == 0 {
                    continue;
                }
                let t = tasks[w.target_tid as usize];
                if !t.off || t.wake_hop != NONE {
                    continue;
                }
                let hop = waking_hop(w, i as u32, t.switch_out);
                let cause = if hop.waker == NONE {
                    NONE
                } else {
                    tasks[hop.waker as usize].last_hop
                };
                let id = hops.len() as u32;
                hops.push(hop);
                causes.push(cause);
                let t = &mut tasks[w.target_tid as usize];
                (t.wake_hop, t.last_hop) = (id, id);
            }
            Event::OffCpuStacks(o) => {
                let t = &mut tasks[o.tid as usize];
                t.set_stacks(o.kstack.0, o.ustack.0);
            }
            _ => {}
        }
    }
    (sum, waits, hops.len())
}

/// What phase A gives each thread: its events in trace order, with the fields its own
/// state machine needs (so phase B reads its list alone, in order).
#[derive(Clone, Copy)]
struct Item {
    ts: u64,
    /// Index of the event in the trace.
    idx: u32,
    kind: u32,
    /// SWITCH_OUT: state; WOKEN: the waker (`NONE`: metal).
    a: u32,
    /// SWITCH_OUT, STACKS: kernel and user stack; WOKEN: the hop's key.
    key: Key,
}

const SWITCH_OUT: u32 = 0;
const SWITCH_IN: u32 = 1;
const WOKEN: u32 = 2;
/// The thread woke another from task context: its last hop then is that hop's cause.
const SENT: u32 = 3;
const STACKS: u32 = 4;

/// Per-thread output of phase B.
#[derive(Default)]
struct Own {
    hops: Vec<Hop>,
    waits: Vec<Wait>,
}

struct Phases {
    /// Of the phases' time, the parts run on one thread (prefix sums, joining the hops).
    serial: f64,
    scatter: f64,
    threads: f64,
    walks: f64,
    sum: u64,
    waits: u64,
    hops: usize,
    /// The busiest thread's share of phase B's items (bounds B's speed-up).
    biggest_share: f64,
}

/// A raw pointer the fill pass shares between workers that write disjoint slots.
struct SyncPtr(*mut Item);
// SAFETY: the workers write disjoint slots (see the fill pass).
unsafe impl Sync for SyncPtr {}

/// Each (thread, item) of `evs`, whose first event has index `base`.
#[inline]
fn for_each_item(evs: &[Event], base: u32, mut f: impl FnMut(u32, Item)) {
    for (j, ev) in evs.iter().enumerate() {
        let idx = base + j as u32;
        match ev {
            Event::Switch(s) => {
                if s.prev_tid != 0 {
                    f(
                        s.prev_tid,
                        Item {
                            ts: s.ts,
                            idx,
                            kind: SWITCH_OUT,
                            a: s.prev_state,
                            key: (0, s.prev_kstack.0, s.prev_ustack.0),
                        },
                    );
                }
                if s.next_tid != 0 {
                    f(
                        s.next_tid,
                        Item {
                            ts: s.ts,
                            idx,
                            kind: SWITCH_IN,
                            a: 0,
                            key: (0, 0, 0),
                        },
                    );
                }
            }
            Event::Waking(w) if w.target_tid != 0 => {
                let h = waking_hop(w, idx, 0);
                f(
                    w.target_tid,
                    Item {
                        ts: w.ts,
                        idx,
                        kind: WOKEN,
                        a: h.waker,
                        key: h.key,
                    },
                );
                if h.waker != NONE {
                    f(
                        h.waker,
                        Item {
                            ts: w.ts,
                            idx,
                            kind: SENT,
                            a: 0,
                            key: (0, 0, 0),
                        },
                    );
                }
            }
            Event::OffCpuStacks(o) => f(
                o.tid,
                Item {
                    ts: o.ts,
                    idx,
                    kind: STACKS,
                    a: 0,
                    key: (0, o.kstack.0, o.ustack.0),
                },
            ),
            _ => {}
        }
    }
}

fn two_pass(events: &[Event], max_tid: usize) -> Phases {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    // A: scatter each event into the lists of the threads it concerns, by ranges of
    // events: count per (range, thread), lay the lists out thread by thread in one
    // array (each thread's pieces in range order), then fill in parallel.
    let t0 = proc_cpu();
    let parts = rayon::current_num_threads().max(1) * 4;
    let step = events.len().div_ceil(parts).max(1);
    let mut counts: Vec<Vec<u32>> = events
        .par_chunks(step)
        .map(|evs| {
            let mut c = vec![0u32; max_tid + 1];
            for_each_item(evs, 0, |t, _| c[t as usize] += 1);
            c
        })
        .collect();
    let t_serial = proc_cpu();
    let mut starts = vec![0usize; max_tid + 2];
    let mut at = 0usize;
    for t in 0..=max_tid {
        starts[t] = at;
        for c in counts.iter_mut() {
            let n = c[t] as usize;
            c[t] = at as u32; // now the part's cursor for thread t
            at += n;
        }
    }
    starts[max_tid + 1] = at;
    let mut serial_s = proc_cpu() - t_serial;
    let mut all: Vec<Item> = Vec::with_capacity(at);
    let out = SyncPtr(all.as_mut_ptr());
    events
        .par_chunks(step)
        .zip(counts.par_iter_mut())
        .enumerate()
        .for_each(|(p, (evs, cursor))| {
            let out = &out;
            for_each_item(evs, (p * step) as u32, |t, it| {
                let slot = &mut cursor[t as usize];
                // SAFETY: the counting pass gave each (part, thread) its own range of
                // `all` (inside its capacity), and this part writes only its own ranges,
                // each slot once.
                unsafe { out.0.add(*slot as usize).write(it) };
                *slot += 1;
            });
        });
    // SAFETY: every slot below `at` was written exactly once above.
    unsafe { all.set_len(at) };
    let lists: Vec<&[Item]> = (0..=max_tid)
        .map(|t| &all[starts[t]..starts[t + 1]])
        .collect();
    let scatter = proc_cpu() - t0;

    // B: each thread's state machine over its own list. A waking it sent records its
    // last hop then (its local number) under the waking's event index: the cause of the
    // hop that waking makes, if it makes one (each index is written by one thread).
    let t0 = proc_cpu();
    let cause_at: Vec<AtomicU32> = (0..events.len()).map(|_| AtomicU32::new(NONE)).collect();
    let own: Vec<Own> = lists
        .par_iter()
        .enumerate()
        .map(|(tid, list)| {
            let mut o = Own::default();
            let mut t = Task::new();
            for it in list.iter() {
                match it.kind {
                    SWITCH_OUT => {
                        (t.off, t.switch_out, t.state, t.wake_hop) = (true, it.ts, it.a, NONE);
                        (t.kstack, t.ustack) = (it.key.1, it.key.2);
                    }
                    SWITCH_IN => {
                        o.waits.extend(t.ending_wait(tid as u32));
                        t.off = false;
                    }
                    WOKEN => {
                        if t.off && t.wake_hop == NONE {
                            t.wake_hop = o.hops.len() as u32;
                            t.last_hop = t.wake_hop;
                            o.hops.push(Hop {
                                idx: it.idx,
                                ts: it.ts,
                                waker: it.a,
                                key: it.key,
                                wait_start: t.switch_out,
                            });
                        }
                    }
                    SENT => cause_at[it.idx as usize].store(t.last_hop, Relaxed),
                    _ => {
                        t.set_stacks(it.key.1, it.key.2);
                    }
                }
            }
            o
        })
        .collect();
    drop(lists);
    drop(all);
    let items: Vec<usize> = own.iter().map(|o| o.hops.len() + o.waits.len()).collect();
    let biggest_share =
        *items.iter().max().unwrap_or(&0) as f64 / items.iter().sum::<usize>().max(1) as f64;
    // Global hop ids: each thread's hops after the threads before it (a prefix sum).
    let t_serial = proc_cpu();
    let mut first = Vec::with_capacity(own.len() + 1);
    let mut n = 0u32;
    for o in &own {
        first.push(n);
        n += o.hops.len() as u32;
    }
    first.push(n);
    let hops: Vec<Hop> = own.iter().flat_map(|o| o.hops.iter().copied()).collect();
    serial_s += proc_cpu() - t_serial;
    let threads = proc_cpu() - t0;

    // C+D: every wait's chain over read-only arrays; a hop's cause is its waker's hop
    // recorded under the waking's index.
    let t0 = proc_cpu();
    let cause = |i: u32| {
        let h = &hops[i as usize];
        if h.waker == NONE {
            return NONE;
        }
        match cause_at[h.idx as usize].load(Relaxed) {
            NONE => NONE,
            l => first[h.waker as usize] + l,
        }
    };
    let (sum, waits) = own
        .par_iter()
        .enumerate()
        .map(|(tid, o)| {
            let base = first[tid];
            o.waits.iter().fold((0u64, 0u64), |(s, n), w| {
                let w = Wait {
                    first_hop: base + w.first_hop,
                    ..*w
                };
                (s.wrapping_add(walk(&w, |i| hops[i as usize], cause)), n + 1)
            })
        })
        .reduce(|| (0, 0), |a, b| (a.0.wrapping_add(b.0), a.1 + b.1));
    let walks = proc_cpu() - t0;
    Phases {
        serial: serial_s,
        scatter,
        threads,
        walks,
        sum,
        waits,
        hops: hops.len(),
        biggest_share,
    }
}

/// A cause not known inside a segment: the waker's last hop before event `idx`, where
/// the waker had received no hop in the segment yet (resolved by the stitch).
const PLACEHOLDER: u32 = 1 << 31;
/// A thread's last hop not known inside a segment (none received there yet).
const UNKNOWN: u32 = u32::MAX - 1;

/// A segment's worker's results.
struct Seg {
    /// CPU time the segment's machine took.
    cpu: f64,
    hops: Vec<Hop>,
    /// Per hop: a local hop id, `NONE`, or `PLACEHOLDER | i` (the segment's placeholder i).
    causes: Vec<u32>,
    /// (waker, event index, local hop id) of each placeholder.
    placeholders: Vec<(u32, u32, u32)>,
    /// Per thread: `None` when the thread never switched out in the segment; else its
    /// state at the segment's end (hop ids local; `last_hop` may be `UNKNOWN`).
    end: Vec<Option<Task>>,
    /// Per thread: its events before its first switch-out in the segment, left to the
    /// stitch (they depend on the state the segment starts with); with a waking, its
    /// waker's last hop as the segment knew it (a local id, `UNKNOWN`, or `NONE` when
    /// metal).
    prefix: Vec<Vec<(u32, u32)>>,
    /// Threads that switched out in the segment (whose `end` is `Some`).
    touched: Vec<u32>,
    /// Waits whose chain met a placeholder: walked by the stitch.
    deferred: Vec<Wait>,
    sum: u64,
    waits: u64,
}

/// One segment's serial machine, starting from unknown states.
fn segment(events: &[Event], base: u32, max_tid: usize) -> Seg {
    let cpu0 = thread_cpu();
    let mut seg = Seg {
        cpu: 0.0,
        hops: Vec::new(),
        causes: Vec::new(),
        placeholders: Vec::new(),
        end: vec![None; max_tid + 1],
        prefix: vec![Vec::new(); max_tid + 1],
        touched: Vec::new(),
        deferred: Vec::new(),
        sum: 0,
        waits: 0,
    };
    for (j, ev) in events.iter().enumerate() {
        let idx = base + j as u32;
        match ev {
            Event::Switch(s) => {
                if s.prev_tid != 0 {
                    if seg.end[s.prev_tid as usize].is_none() {
                        seg.touched.push(s.prev_tid);
                    }
                    let t = seg.end[s.prev_tid as usize].get_or_insert(Task {
                        last_hop: UNKNOWN,
                        ..Task::new()
                    });
                    (t.off, t.switch_out, t.state, t.wake_hop) = (true, s.ts, s.prev_state, NONE);
                    (t.kstack, t.ustack) = (s.prev_kstack.0, s.prev_ustack.0);
                }
                if s.next_tid != 0 {
                    let n = s.next_tid as usize;
                    let Some(t) = seg.end[n] else {
                        seg.prefix[n].push((idx, NONE));
                        continue;
                    };
                    if let Some(w) = t.ending_wait(s.next_tid) {
                        let (hops, causes) = (&seg.hops, &seg.causes);
                        if reaches_placeholder(&w, hops, causes) {
                            seg.deferred.push(w);
                        } else {
                            let h = walk(&w, |i| hops[i as usize], |i| causes[i as usize]);
                            seg.sum = seg.sum.wrapping_add(h);
                            seg.waits += 1;
                        }
                    }
                    if let Some(t) = seg.end[n].as_mut() {
                        t.off = false;
                    }
                }
            }
            Event::Waking(w) if w.target_tid != 0 => {
                let target = w.target_tid as usize;
                let Some(t) = seg.end[target] else {
                    // Whether this waking ends a wait depends on the target's state
                    // before the segment; its cause, on the waker's last hop now.
                    let hint = if !w.context.is_task() || w.waker_tid == 0 {
                        NONE
                    } else {
                        seg.end[w.waker_tid as usize].map_or(UNKNOWN, |x| x.last_hop)
                    };
                    seg.prefix[target].push((idx, hint));
                    continue;
                };
                if !t.off || t.wake_hop != NONE {
                    continue;
                }
                let hop = waking_hop(w, idx, t.switch_out);
                let cause = if hop.waker == NONE {
                    NONE
                } else {
                    match seg.end[hop.waker as usize].map_or(UNKNOWN, |x| x.last_hop) {
                        UNKNOWN => {
                            seg.placeholders
                                .push((hop.waker, idx, seg.hops.len() as u32));
                            PLACEHOLDER | (seg.placeholders.len() as u32 - 1)
                        }
                        l => l,
                    }
                };
                let id = seg.hops.len() as u32;
                seg.hops.push(hop);
                seg.causes.push(cause);
                if let Some(t) = seg.end[target].as_mut() {
                    (t.wake_hop, t.last_hop) = (id, id);
                }
            }
            Event::OffCpuStacks(o) => match seg.end[o.tid as usize].as_mut() {
                None => seg.prefix[o.tid as usize].push((idx, NONE)),
                Some(t) => {
                    t.set_stacks(o.kstack.0, o.ustack.0);
                }
            },
            _ => {}
        }
    }
    seg.cpu = thread_cpu() - cpu0;
    seg
}

/// Whether `w`'s walk would follow a cause the segment does not know (the same bounds
/// as [`walk`]: the walk stops at a metal hop or a cause at or before its window).
fn reaches_placeholder(w: &Wait, hops: &[Hop], causes: &[u32]) -> bool {
    let mut lo = w.switch_out;
    let mut cur = w.first_hop;
    for _ in 0..MAX_DEPTH {
        let h = hops[cur as usize];
        if h.waker == NONE {
            return false;
        }
        let c = causes[cur as usize];
        if c == NONE {
            return false;
        }
        if c & PLACEHOLDER != 0 {
            return true;
        }
        let next = hops[c as usize];
        if next.ts <= lo {
            return false;
        }
        lo = lo.max(next.wait_start);
        cur = c;
    }
    false
}

struct Split {
    /// CPU time of the segments' machines, summed and the largest one.
    seg_cpu: f64,
    seg_cpu_max: f64,
    /// CPU time of the other parallel parts (joining hops, the deferred walks).
    rest_cpu: f64,
    workers: f64,
    stitch: f64,
    sum: u64,
    waits: u64,
    hops: usize,
    prefix_events: usize,
    placeholders: usize,
    deferred: usize,
}

/// The time split: segments of events walked in parallel from unknown states, then a
/// serial stitch in segment order that replays each thread's events before its first
/// switch-out with its true state, resolves the causes the segments could not know, and
/// walks the waits whose chains needed them.
fn time_split(events: &[Event], max_tid: usize, segments: usize) -> Split {
    let t0 = proc_cpu();
    let step = events.len().div_ceil(segments).max(1);
    let segs: Vec<Seg> = events
        .par_chunks(step)
        .enumerate()
        .map(|(k, evs)| segment(evs, (k * step) as u32, max_tid))
        .collect();
    // Global hop ids: the segments' hops in order, then the stitch's replayed ones; the
    // segments' own causes made global in parallel (placeholders stay marked).
    let mut seg_base = Vec::with_capacity(segs.len());
    let mut n = 0u32;
    for s in &segs {
        seg_base.push(n);
        n += s.hops.len() as u32;
    }
    // Joined in parallel: each segment copies into its own slice of the global arrays.
    let total = n as usize;
    let mut hops: Vec<Hop> = vec![
        Hop {
            idx: 0,
            ts: 0,
            waker: NONE,
            key: (0, 0, 0),
            wait_start: 0,
        };
        total
    ];
    let mut causes: Vec<u32> = vec![NONE; total];
    let mut hop_parts = Vec::with_capacity(segs.len());
    let mut cause_parts = Vec::with_capacity(segs.len());
    let (mut h_rest, mut c_rest) = (&mut hops[..], &mut causes[..]);
    for s in &segs {
        let (h, hr) = std::mem::take(&mut h_rest).split_at_mut(s.hops.len());
        let (c, cr) = std::mem::take(&mut c_rest).split_at_mut(s.hops.len());
        hop_parts.push(h);
        cause_parts.push(c);
        (h_rest, c_rest) = (hr, cr);
    }
    hop_parts
        .into_par_iter()
        .zip(cause_parts)
        .zip(segs.par_iter().zip(&seg_base))
        .for_each(|((h, c), (s, &base))| {
            h.copy_from_slice(&s.hops);
            for (to, &from) in c.iter_mut().zip(&s.causes) {
                *to = match from {
                    NONE => NONE,
                    x if x & PLACEHOLDER != 0 => x,
                    l => base + l,
                };
            }
        });
    let workers = proc_cpu() - t0;
    let join_cpu = workers - segs.iter().map(|s| s.cpu).sum::<f64>();
    // Room for the hops the stitch replays (at most one per prefix event), so that it
    // does not move the arrays.
    let replay_room: usize = segs
        .iter()
        .map(|s| s.prefix.iter().map(Vec::len).sum::<usize>())
        .sum();
    hops.reserve(replay_room);
    causes.reserve(replay_room);

    // The stitch, serial in segment order: replays, placeholders, end states.
    let t0 = thread_cpu(); // one thread: idle pool threads still spinning do not count
    let (mut prefix_events, mut placeholders) = (0, 0);
    let mut state = vec![Task::new(); max_tid + 1];
    let mut later: Vec<Wait> = Vec::new();
    for (k, seg) in segs.iter().enumerate() {
        let base = seg_base[k];
        // Replays: each thread's prefix events with its true state.
        let mut replayed: Vec<(u32, u32, u32)> = Vec::new(); // (tid, idx, hop id)
        let mut came_with: Vec<(u32, u32)> = Vec::new(); // (tid, last hop before replay)
        let mut pending: Vec<(usize, u32, u32)> = Vec::new(); // (hop, waker, idx)
        for (tid, prefix) in seg.prefix.iter().enumerate() {
            if prefix.is_empty() {
                continue;
            }
            prefix_events += prefix.len();
            let t = &mut state[tid];
            came_with.push((tid as u32, t.last_hop));
            for &(idx, hint) in prefix {
                match &events[idx as usize] {
                    Event::Switch(_) => {
                        later.extend(t.ending_wait(tid as u32));
                        t.off = false;
                    }
                    Event::Waking(w) => {
                        if t.off && t.wake_hop == NONE {
                            let hop = waking_hop(w, idx, t.switch_out);
                            let id = hops.len() as u32;
                            let cause = match hint {
                                NONE => NONE,
                                UNKNOWN => {
                                    pending.push((id as usize, hop.waker, idx));
                                    NONE
                                }
                                l => base + l,
                            };
                            hops.push(hop);
                            causes.push(cause);
                            replayed.push((tid as u32, idx, id));
                            (t.wake_hop, t.last_hop) = (id, id);
                        }
                    }
                    Event::OffCpuStacks(o) => {
                        t.set_stacks(o.kstack.0, o.ustack.0);
                    }
                    _ => unreachable!("prefixes hold only these kinds"),
                }
            }
        }
        // A waker's last hop before `idx`: its replayed hops (none of them after a hop
        // the segment saw it receive), else what it came into the segment with.
        replayed.sort_unstable();
        let resolve = |waker: u32, idx: u32| {
            let a = replayed.partition_point(|r| r.0 < waker);
            let b = replayed.partition_point(|r| (r.0, r.1) < (waker, idx));
            if b > a {
                return replayed[b - 1].2;
            }
            match came_with.binary_search_by_key(&waker, |c| c.0) {
                Ok(i) => came_with[i].1,
                Err(_) => state[waker as usize].last_hop,
            }
        };
        for &(waker, idx, l) in &seg.placeholders {
            causes[(base + l) as usize] = resolve(waker, idx);
        }
        for &(h, waker, idx) in &pending {
            causes[h] = resolve(waker, idx);
        }
        placeholders += seg.placeholders.len() + pending.len();
        // The state at the segment's end.
        for &tid in &seg.touched {
            let e = seg.end[tid as usize].expect("a touched thread has an end state");
            let t = &mut state[tid as usize];
            let last = match e.last_hop {
                UNKNOWN => t.last_hop,
                l => base + l,
            };
            *t = Task {
                wake_hop: if e.wake_hop == NONE {
                    NONE
                } else {
                    base + e.wake_hop
                },
                last_hop: last,
                ..e
            };
        }
    }
    let stitch = thread_cpu() - t0;
    // The waits only the stitch could walk, in parallel once every cause is known.
    let t0 = proc_cpu();
    let deferred: usize = segs.iter().map(|s| s.deferred.len()).sum();
    later.extend(segs.iter().zip(&seg_base).flat_map(|(s, &base)| {
        s.deferred.iter().map(move |w| Wait {
            first_hop: base + w.first_hop,
            ..*w
        })
    }));
    let sum = later
        .par_iter()
        .map(|w| walk(w, |i| hops[i as usize], |i| causes[i as usize]))
        .reduce(|| 0, u64::wrapping_add);
    let sum = segs.iter().fold(sum, |s, g| s.wrapping_add(g.sum));
    let waits = later.len() as u64 + segs.iter().map(|g| g.waits).sum::<u64>();
    let walk_wall = proc_cpu() - t0;
    let workers = workers + walk_wall;
    Split {
        seg_cpu: segs.iter().map(|s| s.cpu).sum(),
        seg_cpu_max: segs.iter().map(|s| s.cpu).fold(0.0, f64::max),
        rest_cpu: join_cpu.max(0.0) + walk_wall,
        workers,
        stitch,
        sum,
        waits,
        hops: hops.len(),
        prefix_events,
        placeholders,
        deferred,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: twopass TRACE [THREADS]");
        std::process::exit(2);
    };
    let threads = match args.next().map(|s| s.parse::<usize>()) {
        None => std::thread::available_parallelism().map_or(2, |n| n.get()),
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("twopass: THREADS must be a positive number");
            std::process::exit(2);
        }
    };
    let mut events: Vec<Event> = Vec::new();
    decoded::decode("twopass", &path, |ev| events.extend_from_slice(ev));
    if events.len() >= 1 << 30 {
        eprintln!(
            "twopass: more than 2^30 events: cut the trace (the lists pack an index in 30 bits)"
        );
        std::process::exit(2);
    }
    // Threads numbered densely (0 stays idle) so that per-thread arrays are as long as
    // the threads seen, not as the largest tid (fork churn reaches millions).
    let mut dense: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let mut id = |t: &mut u32| {
        if *t != 0 {
            let next = dense.len() as u32 + 1;
            *t = *dense.entry(*t).or_insert(next);
        }
    };
    for e in &mut events {
        match e {
            Event::Switch(s) => {
                id(&mut s.prev_tid);
                id(&mut s.next_tid);
            }
            Event::Waking(w) => {
                id(&mut w.target_tid);
                id(&mut w.waker_tid);
            }
            Event::OffCpuStacks(o) => id(&mut o.tid),
            _ => {}
        }
    }
    let max_tid = dense.len();
    let n = events.len() as f64;
    let wall = std::time::Instant::now();
    let t0 = proc_cpu();
    let (want, waits, hops) = serial(&events, max_tid);
    let wall = wall.elapsed().as_secs_f64();
    let ser = proc_cpu() - t0;
    eprintln!(
        "serial: {} events, {} threads, {waits} waits, {hops} hops: {wall:.3} s wall; {:.3} CPU-s = {:.1} ns/event",
        events.len(),
        max_tid,
        ser,
        ser * 1e9 / n
    );
    for pool in [1, threads] {
        let p = rayon::ThreadPoolBuilder::new()
            .num_threads(pool)
            .build()
            .expect("a thread pool");
        let r = p.install(|| two_pass(&events, max_tid));
        let total = r.scatter + r.threads + r.walks;
        eprintln!(
            "two passes on {pool} thread(s): {:.3} CPU-s = {:.1} ns/event (A scatter {:.3}, B threads {:.3}, C+D causes and walks {:.3}; of all that, run on one thread {:.3}); busiest thread {:.2} % of B",
            total,
            total * 1e9 / n,
            r.scatter,
            r.threads,
            r.walks,
            r.serial,
            r.biggest_share * 100.0
        );
        if (r.sum, r.waits, r.hops) != (want, waits, hops) {
            eprintln!(
                "twopass: MISMATCH: two passes give {} waits, {} hops, checksum {:x}; serial {waits}, {hops}, {want:x}",
                r.waits, r.hops, r.sum
            );
            std::process::exit(1);
        }
    }
    for (pool, segments) in [
        (1, 1),
        (1, 2),
        (threads, threads),
        (threads, 4 * threads),
        (1, 4),
        (1, 8),
        (1, 16),
    ] {
        let p = rayon::ThreadPoolBuilder::new()
            .num_threads(pool)
            .build()
            .expect("a thread pool");
        let wall = std::time::Instant::now();
        let r = p.install(|| time_split(&events, max_tid, segments));
        let wall = wall.elapsed().as_secs_f64();
        eprintln!(
            "time split, {segments} segments on {pool} thread(s): {wall:.3} s wall (on a quiet machine only); {:.3} CPU-s = {:.1} ns/event (parallel {:.3}, serial stitch {:.3}: {} prefix events, {} placeholders, {} deferred waits); the segments' machines {:.3} CPU-s in all, {:.3} the largest; joining their hops and the deferred walks, also in parallel, {:.3}",
            r.workers + r.stitch,
            (r.workers + r.stitch) * 1e9 / n,
            r.workers,
            r.stitch,
            r.prefix_events,
            r.placeholders,
            r.deferred,
            r.seg_cpu,
            r.seg_cpu_max,
            r.rest_cpu
        );
        if (r.sum, r.waits) != (want, waits) || r.hops != hops {
            eprintln!(
                "twopass: MISMATCH: time split gives {} waits, {} hops, checksum {:x}; serial {waits}, {hops}, {want:x}",
                r.waits, r.hops, r.sum
            );
            std::process::exit(1);
        }
    }
    eprintln!("checksums agree ({want:x})");
}

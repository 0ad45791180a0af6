//! A lower bound for the `chains` walk: a stripped-down state machine over the same
//! decoded events, timed like `walk_time`. It computes every time-bounded chain at the
//! waiter's switch-in and appends its path (node ids and weights) to a batch, with node
//! interning behind the same kind of direct-mapped cache as the engine, but it leaves out
//! everything else the engine must do: subchain dedup, lazy stacks arriving after the
//! switch-in, records for other sinks, the filter, lost-event marks, counters, exits,
//! comm changes, `--mode last`, and hop garbage collection (hops live in a ring that
//! simply forgets old causes). So no correct engine can walk faster than this on the
//! same machine; see docs/BENCHMARKS.md ("Session 5").
//!
//! ```text
//! cargo run --release -p chainrec-tools --bin walk_floor -- /tmp/busy50.zst [ROUNDS]
//! ```
//!
//! Needs about 40 bytes of memory per event (2 GB for 50 M events).
use chainrec_format::Event;
use std::collections::HashMap;
use std::time::Instant;

mod decoded;

/// Hops kept (a ring): causes older than this many wakings are forgotten.
const RING_BITS: u32 = 16;
const NO_HOP: u64 = u64::MAX;
/// Direct-mapped node cache size (as the engine's task-node cache).
const CACHE_BITS: u32 = 14;
/// Depth limit (the engine's default).
const MAX_DEPTH: usize = 16;

#[derive(Clone, Copy, Default)]
struct Task {
    off: bool,
    switch_out: u64,
    state: u32,
    wake_hop: u64,
    last_cause: u64,
    last_cause_start: u64,
    kstack: u32,
    ustack: u32,
}

#[derive(Clone, Copy)]
struct Hop {
    seq: u64,
    ts: u64,
    cause: u64,
    cause_ts: u64,
    cause_start: u64,
    node: u32,
    metal: bool,
}

struct Floor {
    tasks: Vec<Task>,
    by_tid: Vec<u32>,
    ring: Vec<Hop>,
    next_seq: u64,
    cache: Vec<(u32, u32, u32, u32)>,
    node_ix: HashMap<(u32, u32, u32), u32>,
    nodes: Vec<u32>,
    weights: Vec<u64>,
    ends: Vec<u32>,
    paths: u64,
    steps: u64,
}

impl Floor {
    fn new() -> Self {
        let forgotten = Hop {
            seq: NO_HOP,
            ts: 0,
            cause: NO_HOP,
            cause_ts: 0,
            cause_start: 0,
            node: 0,
            metal: true,
        };
        Floor {
            tasks: Vec::new(),
            by_tid: Vec::new(),
            ring: vec![forgotten; 1 << RING_BITS],
            next_seq: 0,
            cache: vec![(u32::MAX, 0, 0, u32::MAX); 1 << CACHE_BITS],
            node_ix: HashMap::new(),
            nodes: Vec::new(),
            weights: Vec::new(),
            ends: Vec::new(),
            paths: 0,
            steps: 0,
        }
    }

    #[inline]
    fn task(&mut self, tid: u32) -> usize {
        let i = tid as usize;
        if i >= self.by_tid.len() {
            self.by_tid.resize(i + 1, 0);
        }
        if self.by_tid[i] == 0 {
            self.tasks.push(Task {
                wake_hop: NO_HOP,
                last_cause: NO_HOP,
                ..Task::default()
            });
            self.by_tid[i] = self.tasks.len() as u32;
        }
        self.by_tid[i] as usize - 1
    }

    #[inline]
    fn node(&mut self, who: u32, kstack: u32, ustack: u32) -> u32 {
        let h = ((who as u64) << 40 ^ (kstack as u64) << 20 ^ ustack as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let slot = (h >> (64 - CACHE_BITS)) as usize;
        let e = self.cache[slot];
        if e.0 == who && e.1 == kstack && e.2 == ustack && e.3 != u32::MAX {
            return e.3;
        }
        let next = self.node_ix.len() as u32;
        let id = *self.node_ix.entry((who, kstack, ustack)).or_insert(next);
        self.cache[slot] = (who, kstack, ustack, id);
        id
    }

    #[inline]
    fn hop(&self, seq: u64) -> Option<Hop> {
        let h = self.ring[(seq & ((1 << RING_BITS) - 1)) as usize];
        (seq != NO_HOP && h.seq == seq).then_some(h)
    }

    /// Switch-in of a blocked task: its chain, time-bounded, as one path.
    fn close(&mut self, t: usize, tid: u32) {
        let task = self.tasks[t];
        let Some(first) = (task.state != 0).then(|| self.hop(task.wake_hop)).flatten() else {
            return;
        };
        let root = self.node(tid, task.kstack, task.ustack);
        self.nodes.push(root);
        self.weights.push(0);
        let (mut lo, mut hi) = (task.switch_out, first.ts);
        let mut cur = first;
        for _ in 0..MAX_DEPTH {
            self.nodes.push(cur.node);
            let cause = if cur.metal || cur.cause_ts <= lo {
                None
            } else {
                self.hop(cur.cause)
            };
            let Some(cause) = cause else {
                self.weights.push(hi.saturating_sub(lo));
                break;
            };
            let lo2 = lo.max(cur.cause_start);
            let hi2 = cur.cause_ts.min(hi);
            self.weights
                .push(hi.saturating_sub(lo) - hi2.saturating_sub(lo2));
            (lo, hi, cur) = (lo2, hi2, cause);
        }
        self.ends.push(self.nodes.len() as u32);
        self.paths += 1;
        if self.ends.len() >= 4096 {
            self.steps += self.nodes.len() as u64;
            self.nodes.clear();
            self.weights.clear();
            self.ends.clear();
        }
    }

    #[inline(never)] // a symbol of its own, for profilers
    fn run(&mut self, events: &[Event]) {
        for ev in events {
            match ev {
                Event::Switch(s) => {
                    if s.prev_tid != 0 {
                        let t = self.task(s.prev_tid);
                        let task = &mut self.tasks[t];
                        task.off = true;
                        task.switch_out = s.ts;
                        task.state = s.prev_state;
                        task.wake_hop = NO_HOP;
                        task.kstack = s.prev_kstack.0;
                        task.ustack = s.prev_ustack.0;
                    }
                    if s.next_tid != 0 {
                        let t = self.task(s.next_tid);
                        if self.tasks[t].off {
                            self.close(t, s.next_tid);
                        }
                        self.tasks[t].off = false;
                    }
                }
                Event::Waking(w) => {
                    if w.target_tid == 0 {
                        continue;
                    }
                    let t = self.task(w.target_tid);
                    if !self.tasks[t].off || self.tasks[t].wake_hop != NO_HOP {
                        continue;
                    }
                    let metal = !w.context.is_task() || w.waker_tid == 0;
                    let mut hop = Hop {
                        seq: self.next_seq,
                        ts: w.ts,
                        cause: NO_HOP,
                        cause_ts: 0,
                        cause_start: 0,
                        node: 0,
                        metal,
                    };
                    if metal {
                        hop.node =
                            self.node(u32::MAX - w.context as u32, w.source, w.waker_kstack.0);
                    } else {
                        let wt = self.task(w.waker_tid);
                        let waker = self.tasks[wt];
                        if let Some(c) = self.hop(waker.last_cause) {
                            hop.cause = waker.last_cause;
                            hop.cause_ts = c.ts;
                            hop.cause_start = waker.last_cause_start;
                        }
                        hop.node = self.node(w.waker_tid, w.waker_kstack.0, w.waker_ustack.0);
                    }
                    self.ring[(self.next_seq & ((1 << RING_BITS) - 1)) as usize] = hop;
                    let task = &mut self.tasks[t];
                    task.wake_hop = self.next_seq;
                    task.last_cause = self.next_seq;
                    task.last_cause_start = task.switch_out;
                    self.next_seq += 1;
                }
                Event::OffCpuStacks(o) => {
                    let t = self.task(o.tid);
                    let task = &mut self.tasks[t];
                    if o.kstack.0 != 0 {
                        task.kstack = o.kstack.0;
                    }
                    if o.ustack.0 != 0 {
                        task.ustack = o.ustack.0;
                    }
                }
                _ => {}
            }
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), rounds) = (args.next(), args.next()) else {
        eprintln!("usage: walk_floor TRACE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds = match rounds.map(|s| s.parse::<usize>()) {
        None => 3,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("walk_floor: ROUNDS must be a positive number");
            std::process::exit(2);
        }
    };
    let mut chunks: Vec<Vec<Event>> = Vec::new();
    decoded::decode("walk_floor", &path, |ev| chunks.push(ev.to_vec()));
    let n: usize = chunks.iter().map(Vec::len).sum();
    // Reading the events alone (what any walk pays to see them).
    let t0 = Instant::now();
    let mut seen = 0u64;
    for c in &chunks {
        for e in c {
            seen = seen.wrapping_add(match e {
                Event::Switch(s) => s.ts ^ u64::from(s.prev_tid),
                Event::Waking(w) => w.ts ^ u64::from(w.target_tid),
                _ => 1,
            });
        }
    }
    let dt = t0.elapsed();
    eprintln!(
        "read only: {:.1} ns/event (checksum {seen:x})",
        dt.as_nanos() as f64 / n.max(1) as f64
    );
    for round in 0..rounds {
        let mut floor = Floor::new();
        let t0 = Instant::now();
        for c in &chunks {
            floor.run(c);
        }
        let dt = t0.elapsed();
        eprintln!(
            "round {round}: {n} events in {:.3} s = {:.1} ns/event; {} paths, {} steps, {} nodes",
            dt.as_secs_f64(),
            dt.as_nanos() as f64 / n.max(1) as f64,
            floor.paths,
            floor.steps + floor.nodes.len() as u64,
            floor.node_ix.len()
        );
    }
}

//! The busy-server scenario: deterministic, exact event count, and a consistent schedule
//! (the invariants the chain engine relies on, listed in `synth/busy.rs`).

mod common;
use chainrec_format::*;
use common::*;
use std::collections::{HashMap, HashSet};

/// Records the order of table additions relative to events.
#[derive(Default)]
struct OrderSink {
    mem: MemTrace,
    stack_added_at: HashMap<StackId, usize>,
    irq_added_at: HashMap<u32, usize>,
    task_added_at: HashMap<u32, usize>,
}

impl TraceSink for OrderSink {
    fn push(&mut self, e: &Event) -> Result<()> {
        self.mem.push(e)
    }
    fn add_stacks(&mut self, s: &[StackEntry]) -> Result<()> {
        let n = self.mem.events.len();
        for x in s {
            assert!(
                self.stack_added_at.insert(x.id, n).is_none(),
                "stack {:?} added twice",
                x.id
            );
        }
        self.mem.add_stacks(s)
    }
    fn add_symbols(&mut self, s: &[SymbolEntry]) -> Result<()> {
        self.mem.add_symbols(s)
    }
    fn add_tasks(&mut self, t: &[TaskEntry]) -> Result<()> {
        let n = self.mem.events.len();
        for x in t {
            self.task_added_at.entry(x.tid).or_insert(n);
        }
        self.mem.add_tasks(t)
    }
    fn add_irq_sources(&mut self, s: &[IrqSource]) -> Result<()> {
        let n = self.mem.events.len();
        for x in s {
            self.irq_added_at.insert(x.id, n);
        }
        self.mem.add_irq_sources(s)
    }
    fn add_throttles(&mut self, t: &chainrec_format::ThrottleDelta) -> Result<()> {
        self.mem.add_throttles(t)
    }
    fn add_cgroups(&mut self, c: &[CgroupEntry], m: &[TaskCgroup]) -> Result<()> {
        self.mem.add_cgroups(c, m)
    }
}

fn gen(events: u64, seed: u64) -> OrderSink {
    let sc = synth::find("busy-server").expect("registered");
    let mut sink = OrderSink::default();
    (sc.generate)(&synth::SynthParams { events, seed }, &mut sink).unwrap();
    sink
}

#[test]
fn busy_server_is_a_consistent_schedule() {
    let n = 400_000;
    let s = gen(n, 3);
    let ev = &s.mem.events;
    assert_eq!(ev.len() as u64, n, "exactly the requested number of events");
    let tables = &s.mem.tables;

    let mut cur: HashMap<u32, u32> = HashMap::new(); // cpu -> running tid
    let mut running_on: HashMap<u32, u32> = HashMap::new(); // tid -> cpu
    let mut blocked: HashSet<u32> = HashSet::new(); // switched out in S/D, not yet woken
    let mut woken: HashSet<u32> = HashSet::new(); // woken, not yet switched in
    let mut seen_in: HashSet<u32> = HashSet::new();
    let mut new_tasks: HashSet<u32> = HashSet::new();
    let mut exited: HashSet<u32> = HashSet::new();
    let mut counts: HashMap<&str, u64> = HashMap::new();
    let mut preempt = 0u64;
    let mut last_ts = 0;
    let stack_check = |id: StackId, i: usize| {
        if id.is_real() {
            let at = s
                .stack_added_at
                .get(&id)
                .copied()
                .unwrap_or_else(|| panic!("event {i}: stack {id:?} not in tables"));
            assert!(
                at <= i,
                "event {i}: stack {id:?} added after its first use (at {at})"
            );
        }
    };
    for (i, e) in ev.iter().enumerate() {
        assert!(e.ts() >= last_ts);
        last_ts = e.ts();
        *counts.entry(e.kind().name()).or_default() += 1;
        match *e {
            Event::Switch(sw) => {
                let c = cur.get(&sw.cpu).copied().unwrap_or(0);
                assert_eq!(
                    sw.prev_tid, c,
                    "event {i}: prev_tid is not the task running on cpu {}",
                    sw.cpu
                );
                assert!(sw.cpu < 8);
                if sw.prev_tid != 0 {
                    running_on.remove(&sw.prev_tid);
                    match sw.prev_state {
                        STATE_RUNNABLE => preempt += 1,
                        STATE_INTERRUPTIBLE | STATE_UNINTERRUPTIBLE => {
                            blocked.insert(sw.prev_tid);
                        }
                        0x10 => {
                            exited.insert(sw.prev_tid);
                        }
                        other => panic!("unexpected prev_state {other:#x}"),
                    }
                } else {
                    assert_eq!(sw.prev_state, 0);
                }
                if sw.next_tid != 0 {
                    let t = sw.next_tid;
                    assert!(
                        !running_on.contains_key(&t),
                        "event {i}: tid {t} already running on cpu {:?}",
                        running_on.get(&t)
                    );
                    assert!(
                        !blocked.contains(&t),
                        "event {i}: tid {t} switched in while blocked (no waking)"
                    );
                    assert!(
                        !exited.contains(&t),
                        "event {i}: tid {t} switched in after exit"
                    );
                    if !seen_in.contains(&t) {
                        assert!(
                            woken.contains(&t) || new_tasks.contains(&t),
                            "event {i}: first switch-in of {t} without waking"
                        );
                        seen_in.insert(t);
                    }
                    woken.remove(&t);
                    running_on.insert(t, sw.cpu);
                }
                cur.insert(sw.cpu, sw.next_tid);
                stack_check(sw.prev_kstack, i);
                stack_check(sw.prev_ustack, i);
            }
            Event::Waking(w) => {
                let c = cur.get(&w.cpu).copied().unwrap_or(0);
                assert_eq!(
                    w.waker_tid, c,
                    "event {i}: waker is not the task running on cpu {}",
                    w.cpu
                );
                match w.context {
                    WakeContext::Task => {
                        assert_ne!(w.waker_tid, 0, "event {i}: task-context waking from idle");
                        assert_eq!(w.source, 0);
                    }
                    WakeContext::SoftIrq | WakeContext::HardIrq => {
                        assert!(
                            tables.irq_sources.contains_key(&w.source),
                            "event {i}: irq source {}",
                            w.source
                        );
                        assert!(s.irq_added_at[&w.source] <= i);
                        *counts
                            .entry(if w.context == WakeContext::SoftIrq {
                                "softirq"
                            } else {
                                "hardirq"
                            })
                            .or_default() += 1;
                    }
                    WakeContext::Nmi | WakeContext::SoftIrqTask => {
                        panic!("no {} wakings in this model", w.context.label())
                    }
                }
                assert!(
                    !running_on.contains_key(&w.target_tid),
                    "event {i}: waking of running task {}",
                    w.target_tid
                );
                assert!(
                    !woken.contains(&w.target_tid),
                    "event {i}: double waking of {}",
                    w.target_tid
                );
                assert!(!exited.contains(&w.target_tid));
                blocked.remove(&w.target_tid);
                woken.insert(w.target_tid);
                stack_check(w.waker_kstack, i);
                stack_check(w.waker_ustack, i);
            }
            Event::WakeupNew(w) => {
                assert_eq!(
                    cur.get(&w.cpu).copied().unwrap_or(0),
                    w.parent_tid,
                    "event {i}: parent not running"
                );
                assert!(s.task_added_at[&w.child_tid] <= i);
                new_tasks.insert(w.child_tid);
            }
            Event::OffCpuStacks(o) => {
                assert!(
                    running_on.contains_key(&o.tid),
                    "event {i}: lazy stacks of a task that is not running"
                );
                stack_check(o.kstack, i);
                stack_check(o.ustack, i);
                assert!(
                    o.kstack.is_real() != o.ustack.is_real(),
                    "one side per lazy record"
                );
            }
            Event::Comm(c) => {
                assert!(s.task_added_at.contains_key(&c.tid));
                *counts
                    .entry(match c.reason {
                        CommReason::Seen => "comm_seen",
                        CommReason::Exec => "comm_exec",
                        CommReason::Rename => "comm_rename",
                        CommReason::Fork => "comm_fork",
                    })
                    .or_default() += 1;
            }
            Event::Exit(x) => {
                assert!(
                    running_on.contains_key(&x.tid),
                    "event {i}: exit of a task that is not running"
                );
            }
            Event::Lost(_) => panic!("no lost markers in this model"),
            Event::Sample(_) => panic!("no samples in this model"),
        }
    }
    let span = (last_ts - ev[0].ts()) as f64 / 1e9;
    let rate = n as f64 / span;
    // Processes at the start (user space; forked children come and go).
    let tgids: HashSet<u32> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Comm(c)
                if c.reason == CommReason::Seen && !tables.tasks[&c.tid].kernel_thread =>
            {
                Some(c.tgid)
            }
            _ => None,
        })
        .collect();
    eprintln!(
        "busy-server: {n} events over {span:.3} s = {:.0} ev/s; {} tasks in {} tgids; {} stacks, {} symbols; preemptions {preempt}; {counts:?}",
        rate,
        tables.tasks.len(),
        tgids.len(),
        tables.stacks.len(),
        tables.symbols.len()
    );
    assert!(
        (5e5..2e6).contains(&rate),
        "~1 M events/s of trace time, got {rate:.0}"
    );
    assert!(tables.tasks.len() >= 1800);
    assert!(
        (40..=60).contains(&tgids.len()),
        "{} processes",
        tgids.len()
    );
    assert!(
        tables.stacks.len() >= 1000,
        "{} stacks",
        tables.stacks.len()
    );
    assert!(preempt > 0);
    for k in [
        "switch",
        "waking",
        "wakeup_new",
        "comm",
        "exit",
        "offcpu_stacks",
        "softirq",
        "hardirq",
        "comm_exec",
        "comm_fork",
    ] {
        assert!(counts.get(k).copied().unwrap_or(0) > 0, "no {k}");
    }
    // Most waits are short: SKIPPED dominates real stacks.
    let skipped = ev
        .iter()
        .filter(|e| matches!(e, Event::Waking(w) if w.waker_kstack == StackId::SKIPPED))
        .count();
    assert!(skipped > 0);
}

#[test]
fn busy_server_is_deterministic() {
    let a = gen(50_000, 9);
    let b = gen(50_000, 9);
    let c = gen(50_000, 10);
    assert_eq!(a.mem.events, b.mem.events);
    assert_eq!(a.mem.tables.stacks, b.mem.tables.stacks);
    assert_ne!(a.mem.events, c.mem.events);
    // Small counts work too (the setup alone emits ~1800 first sightings).
    assert_eq!(gen(10, 1).mem.events.len(), 10);
    assert_eq!(gen(0, 1).mem.events.len(), 0);
}

#[test]
fn busy_server_streams_to_a_file() {
    let dir = TempDir::new("busy");
    let p = dir.file("busy.zst");
    let sc = synth::find("busy-server").unwrap();
    let n = 1_000_000;
    let mut m = RecordingMeta {
        synthetic_scenario: Some("busy-server".into()),
        clock: Clock::Synthetic,
        cpu_count: 8,
        ..Default::default()
    };
    let mut w = TraceWriter::create(&p, &m, WriterOptions::default()).unwrap();
    (sc.generate)(&synth::SynthParams { events: n, seed: 1 }, &mut w).unwrap();
    m.end_ns = 1;
    let s = w.finish(&m).unwrap();
    assert_eq!(s.events, n);
    let bpe = s.bytes as f64 / n as f64;
    let r = TraceReader::open(&p).unwrap();
    let v = r.verify().unwrap();
    eprintln!(
        "busy-server {n} events: {} bytes = {bpe:.2} bytes/event; sections {:?}",
        s.bytes,
        r.section_bytes()
    );
    assert_eq!(v.events, n);
    assert!(bpe <= 6.0, "{bpe:.2} bytes/event");
}

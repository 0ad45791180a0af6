//! Shared helpers for the format tests.
#![allow(dead_code, missing_docs)]

use chainrec_format::*;

/// SplitMix64: small, seeded, good enough for test data.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// A scratch directory removed on drop (the test kit's).
pub use chainrec_testkit::scratch::ScratchDir as TempDir;

pub fn meta(tag: &str) -> RecordingMeta {
    RecordingMeta {
        host: format!("host-{tag}"),
        kernel_release: "6.18.0-test".into(),
        cpu_count: 8,
        clock: Clock::Boottime,
        clock_offset_ns: -1_234_567_890_123_456_789_012i128,
        command_line: vec![
            "chainrec".into(),
            "record".into(),
            "-o".into(),
            "x.zst".into(),
        ],
        start_ns: 1_000,
        end_ns: 0,
        stack_mode: StackMode::Eager,
        stack_threshold_ns: 100_000,
        lost: LostCounts {
            ringbuf_full: 1,
            malformed: 2,
            out_of_order: 3,
            kernel_stack_failed: 4,
            user_stack_failed: 5,
            stacks_skipped: 6,
            user_stacks_preempted: 7,
            unresolved_symbols: 8,
        },
        synthetic_scenario: Some("unit".into()),
        extra: vec![("k".into(), "v".into()), ("empty".into(), String::new())],
    }
}

/// Tables exercising every field, with stacks 16..16+n and irq sources 1..=4.
pub fn tables(n_stacks: u32) -> Tables {
    let mut t = Tables::default();
    for i in 0..n_stacks {
        let id = StackId(StackId::FIRST_REAL + i);
        let kind = if i % 2 == 0 {
            StackKind::Kernel
        } else {
            StackKind::User
        };
        let tgid = if kind == StackKind::Kernel {
            0
        } else {
            100 + i % 3
        };
        let frames: Vec<u64> = (0..(i % 7))
            .map(|f| 0xffff_ffff_8100_0000u64 + (i as u64) * 64 + f as u64 * 8)
            .collect();
        for (k, &a) in frames.iter().enumerate() {
            t.symbols.insert(&SymbolEntry {
                kind,
                tgid,
                addr: a,
                name: if k % 3 == 2 {
                    None
                } else {
                    Some(format!("fn_{i}_{k}"))
                },
                offset: k as u64 * 3,
                module: if k % 2 == 0 {
                    None
                } else {
                    Some("/usr/lib/libc.so.6".into())
                },
                build_id: if k % 2 == 0 {
                    None
                } else {
                    Some(vec![0xde, 0xad, k as u8])
                },
                file_offset: if k % 2 == 0 {
                    None
                } else {
                    Some(0x1000 + k as u64)
                },
            });
        }
        t.stacks.insert(
            id,
            StackEntry {
                id,
                kind,
                tgid,
                frames,
            },
        );
    }
    for tid in [0u32, 1, 7, 100, 101, 65_535, u32::MAX] {
        t.tasks.insert(
            tid,
            TaskEntry {
                tid,
                tgid: tid / 2,
                comm: Comm::new(&format!("task-{tid}")),
                kernel_thread: tid % 2 == 1,
            },
        );
    }
    for (id, name) in [
        (1u32, "timer"),
        (2, "NET_RX"),
        (3, "virtio0-input.0"),
        (4, "nvme0q1"),
    ] {
        t.irq_sources.insert(
            id,
            IrqSource {
                id,
                name: name.into(),
            },
        );
    }
    t
}

/// `n` events of every kind with edge values in every field; references stay within
/// `n_stacks` real stacks and irq sources 1..=4.
pub fn events(seed: u64, n: usize, n_stacks: u32) -> Vec<Event> {
    let mut r = Rng(seed);
    let cpus = [0u32, 1, 2, 7, 30, 31, 32, 1023, 1024, 5000, u32::MAX];
    let tids = [
        0u32,
        1,
        7,
        100,
        101,
        65_535,
        4_000_000,
        u32::MAX - 1,
        u32::MAX,
    ];
    let states = [0u32, 0, 1, 1, 2, 3, 0x40, 0x402, u32::MAX];
    let stack = |r: &mut Rng| -> StackId {
        match r.below(6) {
            0 => StackId(r.below(StackId::FIRST_REAL as u64) as u32),
            1 | 2 => StackId(StackId::FIRST_REAL + r.below(n_stacks.max(1) as u64) as u32),
            3 => StackId::SKIPPED,
            _ => StackId::NONE,
        }
    };
    let mut ts = 5u64;
    let mut out = Vec::with_capacity(n);
    let mut running = [0u32; 4];
    for i in 0..n {
        ts += match r.below(10) {
            0 => 0,
            1 => r.below(1 << 40),
            _ => r.below(5000),
        };
        let cpu = if r.below(3) == 0 {
            r.pick(&cpus)
        } else {
            r.below(4) as u32
        };
        let tid = if r.below(4) == 0 {
            r.pick(&tids)
        } else {
            100 + r.below(50) as u32
        };
        let e = match i % 9 {
            0..=2 => {
                // Mostly consistent prev (predicted), sometimes not.
                let prev = if cpu < 4 && r.below(4) != 0 {
                    running[cpu as usize]
                } else {
                    r.pick(&tids)
                };
                if cpu < 4 {
                    running[cpu as usize] = tid;
                }
                Event::Switch(Switch {
                    ts,
                    cpu,
                    prev_tid: prev,
                    prev_state: r.pick(&states),
                    next_tid: tid,
                    prev_kstack: stack(&mut r),
                    prev_ustack: stack(&mut r),
                })
            }
            3 | 4 => {
                let waker = if cpu < 4 && r.below(2) == 0 {
                    running[cpu as usize]
                } else {
                    r.pick(&tids)
                };
                let context = WakeContext::from_u8(r.below(5) as u8).unwrap();
                // A task waking has no source, a task-context softirq always has one.
                let sourced = match context {
                    WakeContext::Task => false,
                    WakeContext::SoftIrqTask => true,
                    _ => r.below(2) == 1,
                };
                Event::Waking(Waking {
                    ts,
                    cpu,
                    waker_tid: waker,
                    target_tid: tid,
                    context,
                    source: if sourced { 1 + r.below(4) as u32 } else { 0 },
                    waker_kstack: stack(&mut r),
                    waker_ustack: stack(&mut r),
                })
            }
            5 => Event::WakeupNew(WakeupNew {
                ts,
                cpu,
                parent_tid: if cpu < 4 && r.below(2) == 0 {
                    running[cpu as usize]
                } else {
                    r.pick(&tids)
                },
                child_tid: tid,
                child_tgid: r.pick(&tids),
            }),
            6 => {
                let mut comm = [0u8; 16];
                let len = r.below(17) as usize;
                for b in comm.iter_mut().take(len) {
                    *b = r.below(256) as u8;
                }
                Event::Comm(TaskComm {
                    ts,
                    tid,
                    tgid: r.pick(&tids),
                    comm: Comm(comm),
                    reason: CommReason::from_u8(r.below(4) as u8).unwrap(),
                })
            }
            7 => match r.below(3) {
                0 => Event::Exit(Exit {
                    ts,
                    tid,
                    tgid: r.pick(&tids),
                }),
                1 => Event::OffCpuStacks(OffCpuStacks {
                    ts,
                    tid,
                    kstack: stack(&mut r),
                    ustack: stack(&mut r),
                }),
                // Samples mostly of the task running there (predicted), sometimes not.
                _ => Event::Sample(Sample {
                    ts,
                    cpu,
                    tid: if cpu < 4 && r.below(4) != 0 {
                        running[cpu as usize]
                    } else {
                        tid
                    },
                    kstack: stack(&mut r),
                    ustack: stack(&mut r),
                }),
            },
            _ => Event::Lost(Lost {
                ts,
                cpu,
                count: r.pick(&[0u64, 1, 1000, u64::MAX]),
                cause: LostCause::from_u8(r.below(3) as u8).unwrap(),
            }),
        };
        out.push(e);
    }
    out
}

/// A full in-memory trace.
pub fn mem_trace(seed: u64, n: usize) -> MemTrace {
    MemTrace {
        meta: meta("mem"),
        tables: tables(40),
        events: events(seed, n, 40),
    }
}

pub fn opts(chunk_events: usize) -> WriterOptions {
    WriterOptions {
        chunk_events,
        ..WriterOptions::default()
    }
}

/// Sorted copies for comparing hash-map tables.
pub fn assert_tables_eq(a: &Tables, b: &Tables) {
    let sort = |t: &Tables| {
        let mut s: Vec<_> = t.stacks.values().map(|s| format!("{s:?}")).collect();
        s.sort();
        let mut y: Vec<_> = t.symbols.iter().map(|s| format!("{s:?}")).collect();
        y.sort();
        let mut k: Vec<_> = t.tasks.values().map(|s| format!("{s:?}")).collect();
        k.sort();
        let mut q: Vec<_> = t.irq_sources.values().map(|s| format!("{s:?}")).collect();
        q.sort();
        (s, y, k, q)
    };
    assert_eq!(sort(a), sort(b));
    assert_eq!(a.stacks, b.stacks);
    assert_eq!(a.symbols, b.symbols);
    assert_eq!(a.tasks, b.tasks);
    assert_eq!(a.irq_sources, b.irq_sources);
    assert_eq!(a.cgroups, b.cgroups);
    assert_eq!(a.task_cgroups, b.task_cgroups);
}

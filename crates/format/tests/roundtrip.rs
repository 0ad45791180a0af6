//! Round trips: every field of every event kind and table, chunk boundaries, flush cuts,
//! time windows, ordering errors, killed writers.

mod common;
use chainrec_format::*;
use chainrec_testkit::sections::{crc32, relabel_sections};
use common::*;

fn read_back(path: &std::path::Path) -> (TraceReader, MemTrace) {
    let r = TraceReader::open(path).unwrap();
    let m = r.to_mem().unwrap();
    (r, m)
}

#[test]
fn every_field_round_trips() {
    let dir = TempDir::new("rt");
    let p = dir.file("t.zst");
    let mut t = mem_trace(7, 20_000);
    t.meta.end_ns = 99;
    let s = t.write_to(&p, opts(1000)).unwrap();
    assert_eq!(s.events, 20_000);
    assert_eq!(s.chunks, 20);
    assert_eq!(s.bytes, std::fs::metadata(&p).unwrap().len());
    let (r, m) = read_back(&p);
    assert!(r.recovery().is_none(), "{:?}", r.recovery());
    assert_eq!(m.meta, t.meta);
    assert_tables_eq(&m.tables, &t.tables);
    assert_eq!(m.events.len(), t.events.len());
    for (i, (a, b)) in m.events.iter().zip(&t.events).enumerate() {
        assert_eq!(a, b, "event {i}");
    }
    let v = r.verify().unwrap();
    assert_eq!(v.events, 20_000);
    assert_eq!(v.events_by_kind.iter().sum::<u64>(), 20_000);
    for k in EventKind::ALL {
        assert!(v.events_by_kind[k as usize] > 0, "{k:?}");
    }
    assert_eq!(r.version(), (FORMAT_MAJOR, FORMAT_MINOR));
}

#[test]
fn parallel_and_sequential_decode_agree() {
    let dir = TempDir::new("par");
    let p = dir.file("t.zst");
    let t = mem_trace(11, 50_000);
    t.write_to(&p, opts(777)).unwrap();
    let r = TraceReader::open(&p).unwrap();
    for parallel in [false, true] {
        let mut all = Vec::new();
        let mut sizes = Vec::new();
        r.for_each_chunk(0..r.chunks().len(), parallel, |ev| -> Result<()> {
            sizes.push(ev.len());
            all.extend_from_slice(ev);
            Ok(())
        })
        .unwrap();
        assert_eq!(all, t.events);
        assert_eq!(
            sizes,
            r.chunks()
                .iter()
                .map(|c| c.events as usize)
                .collect::<Vec<_>>()
        );
    }
    // Sub-ranges, and a callback error stops early.
    let mut n = 0;
    let err = r
        .for_each_chunk(3..40, true, |_| -> Result<(), FormatError> {
            n += 1;
            if n == 5 {
                return Err(FormatError::NotChainrec);
            }
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(err, FormatError::NotChainrec));
    assert_eq!(n, 5);
}

#[test]
fn chunk_boundaries() {
    let dir = TempDir::new("bound");
    for n in [0usize, 1, 99, 100, 101, 200, 300, 301] {
        let p = dir.file(&format!("t{n}.zst"));
        let t = MemTrace {
            meta: meta("b"),
            tables: tables(40),
            events: events(n as u64, n, 40),
        };
        let s = t.write_to(&p, opts(100)).unwrap();
        assert_eq!(s.chunks as usize, n.div_ceil(100));
        let (r, m) = read_back(&p);
        assert_eq!(m.events, t.events);
        assert_eq!(r.event_count(), n as u64);
        let sizes: Vec<u32> = r.chunks().iter().map(|c| c.events).collect();
        for (i, &sz) in sizes.iter().enumerate() {
            let expect = if i + 1 < sizes.len() {
                100
            } else {
                n - 100 * i
            };
            assert_eq!(sz as usize, expect);
        }
    }
}

#[test]
fn flush_cuts_chunks() {
    let dir = TempDir::new("flush");
    let p = dir.file("t.zst");
    let ev = events(3, 500, 40);
    let mut w = TraceWriter::create(&p, &meta("f"), opts(100)).unwrap();
    w.add_stacks(&tables(40).stacks.values().cloned().collect::<Vec<_>>())
        .unwrap();
    w.add_irq_sources(&tables(40).irq_sources.values().cloned().collect::<Vec<_>>())
        .unwrap();
    let cuts = [50usize, 60, 250, 251, 500];
    let mut at = 0;
    for &c in &cuts {
        for e in &ev[at..c] {
            w.push(e).unwrap();
        }
        at = c;
        w.flush().unwrap();
        w.flush().unwrap(); // an empty flush writes no chunk
    }
    assert_eq!(w.events_written(), 500);
    assert_eq!(w.buffered_events(), 0);
    w.finish(&meta("f")).unwrap();
    let (r, m) = read_back(&p);
    assert_eq!(m.events, ev);
    let sizes: Vec<u32> = r.chunks().iter().map(|c| c.events).collect();
    assert_eq!(sizes, vec![50, 10, 100, 90, 1, 100, 100, 49]);
    r.verify().unwrap();
}

#[test]
fn time_windows() {
    let dir = TempDir::new("win");
    let p = dir.file("t.zst");
    // ts = 10 * i, chunks of 10 events: chunk k covers [100k, 100k + 90].
    let ev: Vec<Event> = (0..1000u64)
        .map(|i| {
            Event::Exit(Exit {
                ts: 10 * i,
                tid: i as u32,
                tgid: 1,
            })
        })
        .collect();
    MemTrace {
        meta: meta("w"),
        tables: Tables::default(),
        events: ev.clone(),
    }
    .write_to(&p, opts(10))
    .unwrap();
    let r = TraceReader::open(&p).unwrap();
    assert_eq!(r.chunks().len(), 100);
    assert_eq!(r.chunks_in_window(0, u64::MAX), 0..100);
    assert_eq!(r.chunks_in_window(0, 0), 0..1);
    assert_eq!(r.chunks_in_window(95, 99), 1..1); // between chunks 0 and 1: empty
    assert_eq!(r.chunks_in_window(90, 100), 0..2);
    assert_eq!(r.chunks_in_window(250, 420), 2..5);
    assert_eq!(r.chunks_in_window(9990, 20000), 99..100);
    assert_eq!(r.chunks_in_window(10_000, 20_000), 100..100);
    // Every event in the window is inside the returned chunks.
    for (a, b) in [(0u64, 5u64), (123, 456), (777, 778), (5000, 9999)] {
        let range = r.chunks_in_window(a, b);
        let mut got = Vec::new();
        r.for_each_chunk(range, true, |e| -> Result<()> {
            got.extend(e.iter().filter(|e| e.ts() >= a && e.ts() <= b).copied());
            Ok(())
        })
        .unwrap();
        let want: Vec<Event> = ev
            .iter()
            .filter(|e| e.ts() >= a && e.ts() <= b)
            .copied()
            .collect();
        assert_eq!(got, want);
    }
    // Many events at one timestamp spanning chunks.
    let p2 = dir.file("same.zst");
    let ev: Vec<Event> = (0..100u64)
        .map(|i| {
            Event::Exit(Exit {
                ts: 5,
                tid: i as u32,
                tgid: 1,
            })
        })
        .collect();
    MemTrace {
        meta: meta("w"),
        tables: Tables::default(),
        events: ev,
    }
    .write_to(&p2, opts(7))
    .unwrap();
    let r = TraceReader::open(&p2).unwrap();
    assert_eq!(r.chunks_in_window(5, 5), 0..r.chunks().len());
    assert_eq!(r.chunks_in_window(6, 9), r.chunks().len()..r.chunks().len());
}

#[test]
fn out_of_order_is_rejected() {
    let dir = TempDir::new("ooo");
    let p = dir.file("t.zst");
    let mut w = TraceWriter::create(&p, &meta("o"), opts(10)).unwrap();
    w.push(&Event::Exit(Exit {
        ts: 100,
        tid: 1,
        tgid: 1,
    }))
    .unwrap();
    w.push(&Event::Exit(Exit {
        ts: 100,
        tid: 2,
        tgid: 1,
    }))
    .unwrap();
    let e = w
        .push(&Event::Exit(Exit {
            ts: 99,
            tid: 3,
            tgid: 1,
        }))
        .unwrap_err();
    assert!(
        matches!(e, FormatError::OutOfOrder { ts: 99, prev: 100 }),
        "{e}"
    );
    w.push(&Event::Exit(Exit {
        ts: 101,
        tid: 3,
        tgid: 1,
    }))
    .unwrap();
    let s = w.finish(&meta("o")).unwrap();
    assert_eq!(s.events, 3);
    let m = TraceReader::open(&p).unwrap().to_mem().unwrap();
    assert_eq!(m.events.len(), 3);
}

#[test]
fn killed_writer_keeps_flushed_events() {
    let dir = TempDir::new("kill");
    let p = dir.file("t.zst");
    let t = mem_trace(5, 3000);
    let m0 = meta("k");
    let mut w = TraceWriter::create(&p, &m0, opts(1000)).unwrap();
    let mut m1 = m0.clone();
    m1.host = "updated".into();
    {
        // Tables and the first 2500 events, flushed; then 300 more buffered, then "kill".
        let mut tmp = MemTrace {
            events: Vec::new(),
            ..t.clone()
        };
        tmp.replay_into(&mut w).unwrap();
        tmp.events.clear();
    }
    for e in &t.events[..2500] {
        w.push(e).unwrap();
    }
    w.update_meta(&m1).unwrap();
    w.flush().unwrap();
    for e in &t.events[2500..2800] {
        w.push(e).unwrap();
    }
    drop(w); // no finish: like SIGKILL (every section is one write; nothing is buffered in user space but events)
    let r = TraceReader::open(&p).unwrap();
    let rec = r.recovery().expect("recovered");
    assert_eq!(rec.trailing_bytes, 0);
    assert!(rec.reason.contains("no trailer"), "{}", rec.reason);
    assert_eq!(r.meta(), &m1);
    let m = r.to_mem().unwrap();
    assert_eq!(m.events, t.events[..2500]);
    assert_tables_eq(&m.tables, &t.tables);
    r.verify().unwrap();
}

#[test]
fn file_mode_is_applied() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("mode");
    let p = dir.file("t.zst");
    std::fs::write(&p, b"old content").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
    let w = TraceWriter::create(
        &p,
        &meta("m"),
        WriterOptions {
            mode: 0o600,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    w.finish(&meta("m")).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let p2 = dir.file("new.zst");
    let w = TraceWriter::create(
        &p2,
        &meta("m"),
        WriterOptions {
            mode: 0o600,
            ..WriterOptions::default()
        },
    )
    .unwrap();
    w.finish(&meta("m")).unwrap();
    assert_eq!(
        std::fs::metadata(&p2).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn empty_trace_and_meta_updates() {
    let dir = TempDir::new("empty");
    let p = dir.file("t.zst");
    let mut w = TraceWriter::create(&p, &meta("e"), WriterOptions::default()).unwrap();
    let mut m2 = meta("e");
    m2.end_ns = 12345;
    w.update_meta(&m2).unwrap();
    w.flush().unwrap();
    let mut m3 = m2.clone();
    m3.lost.ringbuf_full = 99;
    let s = w.finish(&m3).unwrap();
    assert_eq!((s.events, s.chunks), (0, 0));
    let r = TraceReader::open(&p).unwrap();
    assert!(r.recovery().is_none());
    assert_eq!(r.meta(), &m3);
    assert_eq!(r.event_count(), 0);
    assert_eq!(r.time_span(), None);
    assert_eq!(r.section_bytes().meta_sections, 3);
    assert_eq!(r.chunks_in_window(0, u64::MAX), 0..0);
    r.verify().unwrap();
}

#[test]
fn dangling_references_fail_verify() {
    let dir = TempDir::new("dangle");
    let p = dir.file("t.zst");
    let mut t = mem_trace(1, 100);
    t.events.push(Event::OffCpuStacks(OffCpuStacks {
        ts: u64::MAX / 2,
        tid: 1,
        kstack: StackId(10_000),
        ustack: StackId::NONE,
    }));
    t.write_to(&p, opts(1000)).unwrap();
    let r = TraceReader::open(&p).unwrap();
    let e = r.verify().unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::Dangling {
                what: "stack",
                id: 10_000,
                ..
            }
        ),
        "{e}"
    );
    // Reserved ids are not references.
    let p = dir.file("t2.zst");
    let mut t = mem_trace(1, 100);
    t.events.push(Event::OffCpuStacks(OffCpuStacks {
        ts: u64::MAX / 2,
        tid: 1,
        kstack: StackId(15),
        ustack: StackId(3),
    }));
    t.write_to(&p, opts(1000)).unwrap();
    let r = TraceReader::open(&p).unwrap();
    let v = r.verify().unwrap();
    assert!(v.reserved_stack_refs[15] >= 1);
    // Irq sources.
    let p = dir.file("t3.zst");
    let mut t = mem_trace(1, 100);
    t.events.push(Event::Waking(Waking {
        ts: u64::MAX / 2,
        cpu: 0,
        waker_tid: 0,
        target_tid: 1,
        context: WakeContext::HardIrq,
        source: 77,
        waker_kstack: StackId::NONE,
        waker_ustack: StackId::NONE,
    }));
    t.write_to(&p, opts(1000)).unwrap();
    let e = TraceReader::open(&p).unwrap().verify().unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::Dangling {
                what: "irq source",
                id: 77,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn reserved_table_ids_are_rejected_by_the_writer() {
    let dir = TempDir::new("resv");
    let p = dir.file("t.zst");
    let mut w = TraceWriter::create(&p, &meta("r"), opts(10)).unwrap();
    assert!(w
        .add_stacks(&[StackEntry {
            id: StackId(3),
            kind: StackKind::Kernel,
            tgid: 0,
            frames: vec![1]
        }])
        .is_err());
    assert!(w
        .add_irq_sources(&[IrqSource {
            id: 0,
            name: "x".into()
        }])
        .is_err());
}

#[test]
fn not_chainrec_and_versions() {
    let dir = TempDir::new("ver");
    let p = dir.file("x");
    std::fs::write(&p, b"hello world, this is not a trace at all").unwrap();
    assert!(matches!(
        TraceReader::open(&p),
        Err(FormatError::NotChainrec)
    ));
    std::fs::write(&p, b"").unwrap();
    assert!(matches!(TraceReader::open(&p), Err(FormatError::Empty)));
    // The first bytes of a real trace are a cut header, not an empty file.
    let real = dir.file("real.zst");
    mem_trace(1, 10).write_to(&real, opts(10)).unwrap();
    std::fs::write(&p, &std::fs::read(&real).unwrap()[..16]).unwrap();
    assert!(matches!(
        TraceReader::open(&p),
        Err(FormatError::Truncated { .. })
    ));
    // A character device that is not a trace is refused from its first bytes (reading
    // /dev/zero to the end would never finish).
    assert!(matches!(
        TraceReader::open(std::path::Path::new("/dev/zero")),
        Err(FormatError::NotChainrec)
    ));
    // A directory is refused as such.
    let e = TraceReader::open(&dir.file("")).err().unwrap();
    match &e {
        FormatError::Io { source, .. } => {
            assert_eq!(source.kind(), std::io::ErrorKind::IsADirectory, "{e}")
        }
        _ => panic!("directory: {e}"),
    }
    // A plain zstd file is not a chainrec trace.
    std::fs::write(&p, zstd::encode_all(&b"abc"[..], 3).unwrap()).unwrap();
    assert!(matches!(
        TraceReader::open(&p),
        Err(FormatError::NotChainrec)
    ));
    // Newer major version.
    let good = dir.file("g.zst");
    mem_trace(1, 10).write_to(&good, opts(10)).unwrap();
    let mut b = std::fs::read(&good).unwrap();
    b[16] = 3; // major = 3 (LE u16 at 16)
    std::fs::write(&p, &b).unwrap();
    match TraceReader::open(&p) {
        Err(FormatError::UnsupportedVersion {
            found: 3,
            min: 1,
            max: 2,
        }) => {}
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened"),
    }
    // Newer minor version: readable (header crc must be redone).
    let mut b = std::fs::read(&good).unwrap();
    b[18] = 7;
    let crc = crc32(&b[8..24]);
    b[24..28].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&p, &b).unwrap();
    let r = TraceReader::open(&p).unwrap();
    assert_eq!(r.version(), (2, 7));
    assert_eq!(r.event_count(), 10);
}

/// A format 1.1 file (written by chainrec before on-CPU samples, the `lazy-stacks`
/// scenario with 500 events: `testdata/format-v1/lazy-stacks.zst`) reads as the same trace
/// this build generates, index statistics included; and the same file relabelled as
/// format 1 but holding a sample (kind 7) is refused as corrupt, as a 1.x reader would.
#[test]
fn format_1_files_stay_readable() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/format-v1/lazy-stacks.zst");
    let r = TraceReader::open(&path).unwrap();
    assert_eq!(r.version(), (1, 1));
    assert!(r.recovery().is_none(), "{:?}", r.recovery());
    let old = r.to_mem().unwrap();
    let mut fresh = MemTrace::default();
    let params = chainrec_format::synth::SynthParams {
        events: 500,
        seed: 1,
    };
    (chainrec_format::synth::find("lazy-stacks")
        .unwrap()
        .generate)(&params, &mut fresh)
    .unwrap();
    assert_eq!(old.events, fresh.events);
    assert_tables_eq(&old.tables, &fresh.tables);
    let stats = r.indexed_stats().expect("index statistics");
    assert_eq!(stats.events, 506);
    assert_eq!(stats.events_by_kind[EventKind::Switch as usize], 252);
    assert_eq!(stats.events_by_kind[EventKind::Sample as usize], 0);
    assert_eq!(r.verify().unwrap().events_by_kind, stats.events_by_kind);
    assert!(r.meta().sampling().is_none());
}

/// Samples survive a file round trip, their tids predicted from the switches; a format 2
/// reader counts them by kind; the metadata says how they were taken.
#[test]
fn samples_round_trip() {
    let dir = TempDir::new("samples");
    let p = dir.file("s.zst");
    let params = chainrec_format::synth::SynthParams {
        events: 170,
        seed: 1,
    };
    let mut t = MemTrace::default();
    let mut meta = chainrec_format::synth::meta("oncpu-worker", &params, vec![]);
    {
        let mut tr = chainrec_format::synth::Tracker::new(&mut t);
        (chainrec_format::synth::find("oncpu-worker")
            .unwrap()
            .generate)(&params, &mut tr)
        .unwrap();
        tr.complete(&mut meta);
    }
    t.meta = meta;
    let s = t.meta.sampling().expect("sampling metadata");
    assert_eq!(s.samples, 110, "11 samples per iteration, 10 iterations");
    assert_eq!(s.period_ns, 1_000_000);
    t.write_to(&p, opts(64)).unwrap();
    let (r, m) = read_back(&p);
    assert_eq!(r.version(), (FORMAT_MAJOR, FORMAT_MINOR));
    assert_eq!(m.events, t.events);
    assert_eq!(m.meta.sampling(), t.meta.sampling());
    let v = r.verify().unwrap();
    assert_eq!(v.events_by_kind[EventKind::Sample as usize], 110);
}

#[test]
fn parallel_decode_from_inside_rayon_workers() {
    use rayon::prelude::*;
    let dir = TempDir::new("nested");
    let p = dir.file("t.zst");
    let t = mem_trace(21, 20_000);
    t.write_to(&p, opts(500)).unwrap();
    let r = TraceReader::open(&p).unwrap();
    // Several concurrent callers on rayon workers, each asking for a parallel decode.
    let counts: Vec<usize> = (0..8)
        .into_par_iter()
        .map(|_| {
            let mut n = 0;
            r.for_each_chunk(0..r.chunks().len(), true, |e| -> Result<()> {
                n += e.len();
                Ok(())
            })
            .unwrap();
            n
        })
        .collect();
    assert!(counts.iter().all(|&n| n == 20_000));
}

#[test]
fn a_trace_read_from_a_pipe() {
    let dir = TempDir::new("fifo");
    let file = dir.file("t.zst");
    let t = mem_trace(5, 3_000);
    t.write_to(&file, opts(1000)).unwrap();
    let fifo = dir.file("pipe");
    // coreutils' mkfifo is on every machine this runs on: a failure is a failure, not a skip.
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    assert!(made.unwrap().success(), "mkfifo {}", fifo.display());
    let bytes = std::fs::read(&file).unwrap();
    let fifo_w = fifo.clone();
    // The writer blocks in open until the reader opens the other end.
    let writer = std::thread::spawn(move || std::fs::write(fifo_w, bytes).unwrap());
    let (r, m) = read_back(&fifo);
    writer.join().unwrap();
    assert!(r.recovery().is_none());
    assert_eq!(m.events, t.events);
}

#[test]
fn salvage_stops_at_a_damaged_chunk() {
    let dir = TempDir::new("salvage");
    let p = dir.file("t.zst");
    let t = mem_trace(3, 10_000);
    t.write_to(&p, opts(1000)).unwrap();
    // Damage the payload of the fourth chunk; trailer and index stay intact, so the file
    // opens through its index and only decoding that chunk fails.
    let mut bytes = std::fs::read(&p).unwrap();
    let r = TraceReader::open(&p).unwrap();
    assert_eq!(r.chunks().len(), 10);
    let at = r.chunks()[3].offset as usize + 100;
    bytes[at] ^= 0x5a;
    drop(r);
    std::fs::write(&p, &bytes).unwrap();
    for parallel in [false, true] {
        let r = TraceReader::open(&p).unwrap();
        assert!(r.recovery().is_none(), "the index is intact");
        let n = r.chunks().len();
        let err = r
            .for_each_chunk(0..n, parallel, |_| -> Result<()> { Ok(()) })
            .unwrap_err();
        assert!(
            matches!(err, FormatError::Checksum { what: "event chunk", offset } if offset == r.chunks()[3].offset),
            "{err}"
        );

        let mut r = TraceReader::open(&p).unwrap();
        let warned = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let w = warned.clone();
        r.salvage_chunks(move |e| w.lock().unwrap().push(e.to_string()));
        let mut got = Vec::new();
        r.for_each_chunk(0..n, parallel, |ev| -> Result<()> {
            got.extend_from_slice(ev);
            Ok(())
        })
        .unwrap();
        assert_eq!(got, t.events[..3000], "parallel {parallel}");
        let warned = warned.lock().unwrap();
        assert_eq!(warned.len(), 1, "{warned:?}");
        assert!(
            warned[0].contains("checksum mismatch in event chunk"),
            "{warned:?}"
        );
    }
}

#[test]
fn a_trace_written_into_a_pipe() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("fifo-out");
    let fifo = dir.file("pipe");
    let made = std::process::Command::new("mkfifo")
        .args(["-m", "0644"])
        .arg(&fifo)
        .status();
    assert!(made.unwrap().success(), "mkfifo {}", fifo.display());
    let fifo_r = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read(fifo_r).unwrap());
    let t = mem_trace(9, 2_500);
    // No chmod of the pipe and no fsync (which fails on a pipe with EINVAL).
    let mut o = opts(1000);
    o.mode = 0o600;
    let s = t.write_to(&fifo, o).unwrap();
    let bytes = reader.join().unwrap();
    assert_eq!(s.bytes, bytes.len() as u64);
    let mode = std::fs::metadata(&fifo).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o644, "the pipe's mode was changed");
    let r = TraceReader::from_bytes(bytes).unwrap();
    assert!(r.recovery().is_none());
    assert_eq!(r.to_mem().unwrap().events, t.events);
}

/// `synth::write_trace` writes what generating into memory gives (same events, the
/// metadata completed the same way), and names unknown scenarios with the known ones.
#[test]
fn synth_write_trace_matches_the_in_memory_scenario() {
    use chainrec_format::synth::{self, SynthError, SynthParams};
    let dir = TempDir::new("synth-write");
    let p = dir.file("w.zst");
    let params = SynthParams {
        events: 170,
        seed: 1,
    };
    let sum = synth::write_trace(&p, "oncpu-worker", &params, vec!["x".into()]).unwrap();
    let mut t = MemTrace::default();
    let mut meta = synth::meta("oncpu-worker", &params, vec!["x".into()]);
    {
        let mut tr = synth::Tracker::new(&mut t);
        (synth::find("oncpu-worker").unwrap().generate)(&params, &mut tr).unwrap();
        tr.complete(&mut meta);
    }
    let (_, m) = read_back(&p);
    assert_eq!(m.events, t.events);
    assert_eq!(sum.events, t.events.len() as u64);
    assert_eq!(m.meta.sampling(), meta.sampling());
    assert_eq!(
        (m.meta.start_ns, m.meta.end_ns),
        (meta.start_ns, meta.end_ns)
    );
    let e = synth::write_trace(&dir.file("n.zst"), "nope", &params, vec![]).unwrap_err();
    assert!(matches!(e, SynthError::UnknownScenario { .. }));
    assert!(
        e.to_string()
            .starts_with("unknown scenario \"nope\"; known: pipe-relay, "),
        "{e}"
    );
    assert!(!dir.file("n.zst").exists());
}

/// A trace with cgroups: paths and memberships (with a move) survive the indexed and the
/// scanned read, flight dumps and rotation; a reader that does not know the section kind
/// (as a 2.0 reader: the kind patched to an unknown optional one) reads the rest the same.
#[test]
fn cgroups_round_trip() {
    let dir = TempDir::new("cgroups");
    let p = dir.file("c.zst");
    let mut t = mem_trace(5, 3_000);
    let docker = format!("/system.slice/docker-{}.scope", "ab12".repeat(16));
    let cgroups = [
        CgroupEntry {
            id: 1,
            path: "/".into(),
        },
        CgroupEntry {
            id: 4242,
            path: docker.clone(),
        },
        CgroupEntry {
            id: 77,
            path: "/user.slice".into(),
        },
    ];
    let event_ts: Vec<u64> = t.events.iter().map(Event::ts).collect();
    let ts = |i: usize| event_ts[i];
    let members = [
        TaskCgroup {
            ts: ts(0),
            tid: 1,
            cgroup: 1,
        },
        TaskCgroup {
            ts: ts(0),
            tid: 2,
            cgroup: 4242,
        },
        TaskCgroup {
            ts: ts(1500),
            tid: 2,
            cgroup: 77,
        },
        // Unresolved: an id without a path.
        TaskCgroup {
            ts: ts(10),
            tid: 3,
            cgroup: 999,
        },
    ];
    // Written in the middle of the events, as the recorder does.
    let mut w = TraceWriter::create(&p, &t.meta, opts(500)).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    for (i, e) in t.events.iter().enumerate() {
        match i {
            700 => w.add_cgroups(&cgroups[..2], &members[..2]).unwrap(),
            1600 => w.add_cgroups(&cgroups[2..], &members[2..]).unwrap(),
            _ => {}
        }
        w.push(e).unwrap();
    }
    w.finish(&t.meta).unwrap();
    t.add_cgroups(&cgroups, &members).unwrap();

    let (r, m) = read_back(&p);
    assert!(r.recovery().is_none(), "{:?}", r.recovery());
    assert_tables_eq(&m.tables, &t.tables);
    assert!(r.section_bytes().cgroups > 0);
    assert_eq!(r.section_bytes().other, 0);
    let tb = r.tables();
    assert_eq!(tb.cgroup_at(2, ts(1499)), Some(4242));
    assert_eq!(tb.cgroup_at(2, ts(1500)), Some(77));
    assert_eq!(
        tb.cgroup_at(2, 0),
        Some(4242),
        "before its first sighting: the first one"
    );
    assert_eq!(tb.cgroups_of(2).collect::<Vec<_>>(), vec![4242, 77]);
    assert_eq!(tb.cgroup_path(4242), docker.as_str());
    assert_eq!(tb.cgroup_path(999), "[cgroup id 999]");
    assert_eq!(tb.cgroup_at(9, 0), None);

    // Scanned: no trailer.
    let mut b = std::fs::read(&p).unwrap();
    b.truncate(b.len() - 32);
    let q = dir.file("scan.zst");
    std::fs::write(&q, &b).unwrap();
    let (r, m) = read_back(&q);
    assert!(r.recovery().is_some());
    assert_tables_eq(&m.tables, &t.tables);

    // A reader that does not know kind 0x80 skips it and reads everything else.
    let (b, patched) = relabel_sections(&p, 0x80);
    assert_eq!(patched, 2, "one section per addition");
    let q = dir.file("old.zst");
    std::fs::write(&q, &b).unwrap();
    let (r, m) = read_back(&q);
    assert!(r.recovery().is_none());
    assert!(m.tables.cgroups.is_empty() && !m.tables.has_cgroups());
    assert_eq!(m.events, t.events);
    let cgroup_bytes = read_back(&p).0.section_bytes().cgroups;
    assert_eq!(r.section_bytes().other, cgroup_bytes);

    // A flight dump and rotated files carry every cgroup seen so far.
    let mut ring = FlightRing::new(FlightOptions {
        chunk_events: 500,
        ..FlightOptions::default()
    })
    .unwrap();
    t.replay_into(&mut ring).unwrap();
    let d = dir.file("dump.zst");
    ring.dump(&d, &t.meta, ts(2000), u64::MAX, opts(500))
        .unwrap();
    let (_, m) = read_back(&d);
    assert_eq!(m.tables.cgroups, t.tables.cgroups);
    assert_eq!(m.tables.task_cgroups, t.tables.task_cgroups);
    let base = dir.file("rot.zst");
    let mut rw =
        RotatingWriter::create(&base, &t.meta, RotateLimit { bytes: 1, ns: 0 }, opts(500)).unwrap();
    t.replay_into(&mut rw).unwrap();
    rw.flush().unwrap();
    let files = rw.finish(&t.meta).unwrap();
    assert!(files.len() >= 2);
    for (f, _) in &files {
        let (_, m) = read_back(f);
        assert_eq!(m.tables.cgroups, t.tables.cgroups, "{}", f.display());
        assert_eq!(
            m.tables.task_cgroups,
            t.tables.task_cgroups,
            "{}",
            f.display()
        );
    }
}

/// Write `t` to `p` (its tables first), calling `add(writer, i)` before event i: optional
/// sections in the middle of the events, as the recorder writes them.
fn write_with(p: &std::path::Path, t: &MemTrace, mut add: impl FnMut(&mut TraceWriter, usize)) {
    let mut w = TraceWriter::create(p, &t.meta, opts(500)).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    for (i, e) in t.events.iter().enumerate() {
        add(&mut w, i);
        w.push(e).unwrap();
    }
    w.finish(&t.meta).unwrap();
}

/// `p` without its trailer, read by scanning.
fn read_scanned(dir: &TempDir, p: &std::path::Path) -> MemTrace {
    let mut b = std::fs::read(p).unwrap();
    b.truncate(b.len() - 32);
    let q = dir.file("scan.zst");
    std::fs::write(&q, &b).unwrap();
    let (r, m) = read_back(&q);
    assert!(r.recovery().is_some());
    m
}

/// A flight ring (chunks of 500 events) holding `full`.
fn ring_of(full: &MemTrace) -> FlightRing {
    let mut ring = FlightRing::new(FlightOptions {
        chunk_events: 500,
        ..FlightOptions::default()
    })
    .unwrap();
    full.replay_into(&mut ring).unwrap();
    ring
}

/// Throttling records (optional kind 0x81) survive the indexed and the scanned read and a
/// flight dump, written in the middle of the events as the recorder does.
#[test]
fn throttle_sections_round_trip() {
    use chainrec_format::{ThrottleDelta, ThrottleEvent, ThrottleGroup, ThrottleKind};
    let dir = TempDir::new("throttles");
    let p = dir.file("t.zst");
    let t = mem_trace(5, 3_000);
    let event_ts: Vec<u64> = t.events.iter().map(Event::ts).collect();
    let g = ThrottleGroup {
        hierarchy: 1,
        cgroup: 17,
    };
    let rec = |ts: u64, tid: u32, kind: ThrottleKind| ThrottleEvent {
        ts,
        cpu: 1,
        tid,
        kind,
        group: g,
    };
    let first = ThrottleDelta {
        events: vec![rec(event_ts[100], 2, ThrottleKind::SwitchOut)],
        names: vec![(g, "/spin".into())],
    };
    let second = ThrottleDelta {
        events: vec![rec(event_ts[1200], 0, ThrottleKind::Refill)],
        names: vec![],
    };
    write_with(&p, &t, |w, i| match i {
        700 => w.add_throttles(&first).unwrap(),
        1600 => w.add_throttles(&second).unwrap(),
        _ => {}
    });
    let check = |tb: &chainrec_format::Tables| {
        assert_eq!(tb.throttling.switch_out(2, event_ts[100]), Some(g));
        assert_eq!(tb.throttling.switch_out(2, event_ts[101]), None);
        assert_eq!(
            tb.throttling.refill_in(g, event_ts[100], event_ts[2000]),
            Some(event_ts[1200])
        );
        assert_eq!(tb.throttle_group_name(g), "/spin");
    };
    let (r, m) = read_back(&p);
    assert!(r.recovery().is_none(), "{:?}", r.recovery());
    assert!(r.section_bytes().throttles > 0);
    assert_eq!(r.section_bytes().other, 0);
    check(&m.tables);
    assert_eq!(m.events, t.events);

    check(&read_scanned(&dir, &p).tables);

    // A flight dump carries them.
    let mut full = t.clone();
    full.add_throttles(&first).unwrap();
    full.add_throttles(&second).unwrap();
    let mut ring = ring_of(&full);
    let d = dir.file("dump.zst");
    ring.dump(&d, &t.meta, event_ts[2000], u64::MAX, opts(500))
        .unwrap();
    let (_, m) = read_back(&d);
    check(&m.tables);
}

/// Goroutine records (optional kind 0x83, format 2.2) survive the indexed and the scanned
/// read, come back in time order with their process's wait reasons, and a flight dump
/// keeps the ones inside its window; a reader that does not know the kind skips it. Their
/// executes (optional kind 0x84, format 2.3) too, and a 2.2 reader skips those alone.
#[test]
fn goroutine_sections_round_trip() {
    let dir = TempDir::new("goroutines");
    let p = dir.file("t.zst");
    let t = mem_trace(5, 3_000);
    let event_ts: Vec<u64> = t.events.iter().map(Event::ts).collect();
    let rec = |i: usize, goid: u64, kind: GoEventKind| GoEvent {
        ts: event_ts[i],
        cpu: 1,
        tid: 2,
        tgid: 2,
        kind,
        goid,
        waker: if kind == GoEventKind::Ready { 7 } else { 0 },
        reason: if kind == GoEventKind::Park { 3 } else { 0 },
        stack: StackId::NONE,
    };
    let process = GoProcess {
        tgid: 2,
        version: "1.19.8".into(),
        reasons: vec!["".into(), "".into(), "".into(), "chan receive".into()],
        capped_ns: 0,
    };
    let first = GoDelta {
        events: vec![
            rec(100, 5, GoEventKind::Park),
            rec(90, 6, GoEventKind::Park),
        ],
        processes: vec![process.clone()],
        executes: vec![],
        stws: vec![],
    };
    let exec = |i: usize, goid: u64| GoExecute {
        ts: event_ts[i],
        cpu: 1,
        tid: 3,
        tgid: 2,
        goid,
    };
    let stw = |i: usize, stop: bool, reason: u8| GoStw {
        ts: event_ts[i],
        cpu: 1,
        tid: 3,
        tgid: 2,
        goid: 5,
        stop,
        reason,
    };
    let second = GoDelta {
        events: vec![rec(2900, 5, GoEventKind::Ready)],
        processes: vec![],
        executes: vec![exec(2910, 5), exec(95, 6)],
        stws: vec![stw(2920, true, 1), stw(2930, false, 0)],
    };
    write_with(&p, &t, |w, i| match i {
        700 => w.add_goroutines(&first).unwrap(),
        2950 => w.add_goroutines(&second).unwrap(),
        _ => {}
    });
    let check = |tb: &Tables| {
        let g = &tb.goroutines;
        let seen: Vec<(u64, u64)> = g.events().iter().map(|e| (e.ts, e.goid)).collect();
        assert_eq!(
            seen,
            [(event_ts[90], 6), (event_ts[100], 5), (event_ts[2900], 5)]
        );
        assert_eq!(g.events()[2].waker, 7);
        assert_eq!(g.reason_name(2, 3), "chan receive");
        assert_eq!(
            g.processes().cloned().collect::<Vec<_>>(),
            std::slice::from_ref(&process)
        );
        assert_eq!(g.executes(), [exec(95, 6), exec(2910, 5)]);
        assert_eq!(g.stws(), [stw(2920, true, 1), stw(2930, false, 0)]);
        assert_eq!(g.stw_periods(2), [(event_ts[2920], event_ts[2930], 1)]);
    };
    let (r, m) = read_back(&p);
    assert!(r.recovery().is_none(), "{:?}", r.recovery());
    assert!(r.section_bytes().goroutines > 0);
    assert_eq!(r.section_bytes().other, 0);
    check(&m.tables);
    assert_eq!(m.events, t.events);

    // A 2.2 reader does not know kind 0x84 (executes): it skips those sections and reads
    // the goroutine sections unchanged (their payload has no executes).
    let (b, patched) = relabel_sections(&p, 0x84);
    assert_eq!(patched, 1, "one execute section");
    let q = dir.file("old.zst");
    std::fs::write(&q, &b).unwrap();
    let (r, m) = read_back(&q);
    assert!(r.recovery().is_none());
    assert!(r.section_bytes().other > 0);
    assert!(m.tables.goroutines.executes().is_empty());
    assert_eq!(m.tables.goroutines.events().len(), 3);
    assert_eq!(m.events, t.events);

    // A 2.3 reader does not know kind 0x85 (stop-the-world records): it skips those and
    // reads the rest.
    let (b, patched) = relabel_sections(&p, 0x85);
    assert_eq!(patched, 1, "one stop-the-world section");
    std::fs::write(&q, &b).unwrap();
    let (r, m) = read_back(&q);
    assert!(r.recovery().is_none());
    assert!(m.tables.goroutines.stws().is_empty());
    assert_eq!(m.tables.goroutines.executes().len(), 2);
    assert_eq!(m.events, t.events);

    check(&read_scanned(&dir, &p).tables);

    // A flight dump of the last part: only the ready inside its window.
    let mut full = t.clone();
    full.add_goroutines(&first).unwrap();
    full.add_goroutines(&second).unwrap();
    let mut ring = ring_of(&full);
    let d = dir.file("dump.zst");
    ring.dump(&d, &t.meta, event_ts[2800], u64::MAX, opts(500))
        .unwrap();
    let (_, m) = read_back(&d);
    let first_ts = m.events.first().map(Event::ts).unwrap();
    assert!(first_ts > event_ts[100], "the dump starts after the parks");
    let kept: Vec<u64> = m.tables.goroutines.events().iter().map(|e| e.ts).collect();
    assert_eq!(kept, [event_ts[2900]]);
    assert_eq!(m.tables.goroutines.executes(), [exec(2910, 5)]);
    assert_eq!(m.tables.goroutines.stws().len(), 2);
    assert_eq!(m.tables.goroutines.processes().count(), 1);
}

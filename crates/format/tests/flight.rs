//! The flight ring and the rotating writer: what a dump or a rotated file holds, the
//! bounds, and that each file reads alone.

mod common;
use chainrec_format::*;
use common::*;

fn ring(window_ns: u64, max_bytes: u64, chunk_events: usize) -> FlightRing {
    FlightRing::new(FlightOptions {
        window_ns,
        max_bytes,
        chunk_events,
        zstd_level: 1,
    })
    .unwrap()
}

fn read_all(path: &std::path::Path) -> (TraceReader, MemTrace) {
    let r = TraceReader::open(path).unwrap();
    assert!(r.recovery().is_none(), "{:?}", r.recovery());
    let m = r.to_mem().unwrap();
    (r, m)
}

/// Where `part` sits inside `whole` as one contiguous run, if it does.
fn position_of(part: &[Event], whole: &[Event]) -> Option<usize> {
    let first = part.first()?;
    (0..whole.len())
        .filter(|&i| whole[i] == *first)
        .find(|&i| whole.get(i..i + part.len()) == Some(part))
}

#[test]
fn dump_holds_every_event_of_the_window_and_every_table() {
    let dir = TempDir::new("flight-dump");
    let t = mem_trace(21, 30_000);
    let span = t.events.last().unwrap().ts() - t.events[0].ts();
    // No bound: the ring holds all; the dump picks a middle window.
    let mut r = ring(0, 0, 1_000);
    t.replay_into(&mut r).unwrap();
    let from = t.events[0].ts() + span / 3;
    let to = t.events[0].ts() + 2 * span / 3;
    let path = dir.file("dump.zst");
    let s = r.dump(&path, &t.meta, from, to, opts(1_000)).unwrap();
    let (reader, m) = read_all(&path);
    assert_eq!(s.events, m.events.len() as u64);
    // Whole chunks: a contiguous run of the original covering [from, to].
    let at = position_of(&m.events, &t.events).expect("dump is a contiguous run");
    assert!(m.events[0].ts() <= from && m.events.last().unwrap().ts() >= to);
    let wanted = t
        .events
        .iter()
        .filter(|e| (from..=to).contains(&e.ts()))
        .count();
    assert!(m.events.len() >= wanted && m.events.len() <= wanted + 2_000 + 2);
    assert!(at > 0, "the window starts after the first chunk");
    assert_tables_eq(&m.tables, &t.tables);
    assert_eq!(m.meta.start_ns, m.events[0].ts());
    assert_eq!(m.meta.end_ns, m.events.last().unwrap().ts());
    assert_eq!(m.meta.host, t.meta.host);
    let v = reader.verify().unwrap();
    assert_eq!(v.events, m.events.len() as u64);
    let mut by_kind = [0u64; EventKind::COUNT];
    for e in &m.events {
        by_kind[e.kind() as usize] += 1;
    }
    assert_eq!(v.events_by_kind, by_kind);
    // Nothing left under a temporary name.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("dump.zst")]);
}

#[test]
fn time_window_and_size_bound_evict_oldest_chunks_and_count_them() {
    let t = mem_trace(5, 40_000);
    let (first, last) = (t.events[0].ts(), t.events.last().unwrap().ts());
    let window = (last - first) / 4;
    let mut r = ring(window, 0, 500);
    t.replay_into(&mut r).unwrap();
    r.seal().unwrap();
    let s = r.stats();
    assert_eq!(s.events + s.evicted_events, 40_000);
    assert!(s.evicted_chunks > 0);
    assert_eq!(s.newest_ts, last);
    // Every chunk kept ends inside the window; the one before it did not.
    assert!(s.oldest_ts <= last - window, "window fully covered");
    let dir = TempDir::new("flight-evict");
    let path = dir.file("all.zst");
    r.dump(&path, &t.meta, 0, u64::MAX, opts(500)).unwrap();
    let (_, m) = read_all(&path);
    assert_eq!(m.events.len() as u64, s.events);
    assert_eq!(
        position_of(&m.events, &t.events),
        Some(s.evicted_events as usize)
    );

    // Size bound: compressed chunks never exceed it after a seal.
    let mut r = ring(0, 64 << 10, 500);
    for chunk in t.events.chunks(500) {
        if chunk[0] == t.events[0] {
            let mut tables_only = t.clone();
            tables_only.events.clear();
            tables_only.replay_into(&mut r).unwrap();
        }
        for e in chunk {
            r.push(e).unwrap();
        }
        r.seal().unwrap();
        assert!(r.stats().chunk_bytes <= 64 << 10);
    }
    let s = r.stats();
    assert!(s.evicted_chunks > 0 && s.chunks > 0);
    assert_eq!(s.events + s.evicted_events, 40_000);
    assert_eq!(s.evicted_pinned_chunks, 0);
}

#[test]
fn a_pin_keeps_the_pending_window_and_the_size_bound_still_wins() {
    let t = mem_trace(9, 20_000);
    let (first, last) = (t.events[0].ts(), t.events.last().unwrap().ts());
    let pin_at = first + (last - first) / 10;
    let mut r = ring(1, 0, 500);
    r.pin(Some(pin_at));
    t.replay_into(&mut r).unwrap();
    r.seal().unwrap();
    let s = r.stats();
    assert!(
        s.oldest_ts <= pin_at,
        "pinned chunks stay beyond the time window"
    );
    r.pin(None);
    r.seal().unwrap();
    assert!(
        r.stats().oldest_ts > pin_at,
        "released pin lets the window apply"
    );

    let mut r = ring(1, 16 << 10, 500);
    r.pin(Some(first));
    t.replay_into(&mut r).unwrap();
    r.seal().unwrap();
    let s = r.stats();
    assert!(s.chunk_bytes <= 16 << 10);
    assert!(s.evicted_pinned_chunks > 0, "{s:?}");
}

#[test]
fn rotated_files_each_read_alone_and_together_hold_every_event() {
    let dir = TempDir::new("rotate");
    let t = mem_trace(13, 30_000);
    let (first, last) = (t.events[0].ts(), t.events.last().unwrap().ts());
    let mut meta = t.meta.clone();
    meta.start_ns = first;
    let limit = RotateLimit {
        bytes: 0,
        ns: (last - first) / 5,
    };
    let base = dir.file("rec.zst");
    let mut w = RotatingWriter::create(&base, &meta, limit, opts(1_000)).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    let mut rotated = Vec::new();
    for chunk in t.events.chunks(1_000) {
        for e in chunk {
            w.push(e).unwrap();
        }
        if let Some(p) = w.flush().unwrap() {
            rotated.push(p);
        }
    }
    let mut end = meta.clone();
    end.end_ns = last;
    let files = w.finish(&end).unwrap();
    assert!(files.len() >= 5, "{} files", files.len());
    assert_eq!(
        rotated,
        files[..files.len() - 1]
            .iter()
            .map(|f| f.0.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(files[0].0, dir.file("rec.0000.zst"));
    let mut all = Vec::new();
    for (i, (path, summary)) in files.iter().enumerate() {
        let (_, m) = read_all(path);
        assert_eq!(m.events.len() as u64, summary.events);
        assert_tables_eq(&m.tables, &t.tables);
        assert!(m.meta.start_ns <= m.events[0].ts(), "file {i}");
        assert!(m.meta.end_ns >= m.events.last().unwrap().ts(), "file {i}");
        all.extend(m.events);
    }
    assert_eq!(all, t.events);
}

/// As the recorder does it: the output is created before the start is known (0), and the
/// start is set by `update_meta` at attach time. The first file then spans the rotation
/// limit from that start (it rotated at its first flush and said it spanned the whole
/// uptime: `duration 25188.744 s` for 0.48 s of events).
#[test]
fn the_first_rotated_file_starts_when_the_recording_starts() {
    let dir = TempDir::new("rotate-start");
    let t = mem_trace(5, 10_000);
    let (first, last) = (t.events[0].ts(), t.events.last().unwrap().ts());
    assert!(first > 0);
    let mut meta = t.meta.clone();
    meta.start_ns = 0;
    let limit = RotateLimit {
        bytes: 0,
        ns: (last - first) / 2 + 1,
    };
    let base = dir.file("rec.zst");
    let mut w = RotatingWriter::create(&base, &meta, limit, opts(1_000)).unwrap();
    meta.start_ns = first;
    w.update_meta(&meta).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    for chunk in t.events.chunks(1_000) {
        for e in chunk {
            w.push(e).unwrap();
        }
        w.flush().unwrap();
    }
    let mut end = meta.clone();
    end.end_ns = last;
    let files = w.finish(&end).unwrap();
    assert_eq!(files.len(), 2, "{files:?}");
    let (_, m) = read_all(&files[0].0);
    assert_eq!(m.meta.start_ns, first);
    let spanned = m.events.last().unwrap().ts() - first;
    assert!(
        spanned >= limit.ns && m.meta.end_ns - m.meta.start_ns < limit.ns * 2,
        "first file spans {spanned} ns of events, meta {}..{}",
        m.meta.start_ns,
        m.meta.end_ns
    );
}

#[test]
fn a_failed_dump_leaves_nothing_behind() {
    let dir = TempDir::new("flight-fail");
    let t = mem_trace(2, 2_000);
    let mut r = ring(0, 0, 500);
    t.replay_into(&mut r).unwrap();
    let path = dir.file("missing-dir/dump.zst");
    let err = r.dump(&path, &t.meta, 0, u64::MAX, opts(500)).unwrap_err();
    assert!(matches!(err, FormatError::Io { .. }), "{err}");
    assert!(!path.exists());
    // The ring is intact: a later dump to a good path works.
    let good = dir.file("dump.zst");
    let s = r.dump(&good, &t.meta, 0, u64::MAX, opts(500)).unwrap();
    assert_eq!(s.events, 2_000);
}

#[test]
fn a_trigger_round_trips_through_metadata_and_damage_is_named() {
    let mut meta = common::meta("trig");
    assert_eq!(FlightTrigger::from_meta(&meta).unwrap(), None);
    let t = FlightTrigger {
        kind: TriggerKind::Wait,
        rule: "wait>50ms".into(),
        tid: 4_000_000,
        tgid: 77,
        comm: "cr-stall".into(),
        start_ns: 5_000,
        end_ns: 205_000_005_000,
    };
    meta.extra.extend(t.to_extra());
    assert_eq!(FlightTrigger::from_meta(&meta).unwrap(), Some(t.clone()));
    assert_eq!(t.duration_ns(), 205_000_000_000);
    for (k, v) in meta.extra.iter_mut() {
        if k == "flight.trigger.tid" {
            *v = "-1".into();
        }
    }
    let err = FlightTrigger::from_meta(&meta).unwrap_err().to_string();
    assert!(
        err.contains("flight.trigger.tid") && err.contains("`-1`"),
        "{err}"
    );
}

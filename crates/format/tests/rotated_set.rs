//! The numbered files of one rotated recording read as one (`TraceReader::open_files`):
//! the same events, tables and metadata as the recording written as one file, and a
//! clear refusal of sets that are not one recording's consecutive files.

mod common;
use chainrec_format::*;
use common::*;
use std::path::PathBuf;

/// `t` written as a rotated set of at least `min_files` files in `dir`.
fn rotated(t: &MemTrace, dir: &TempDir, name: &str, min_files: usize) -> Vec<PathBuf> {
    let (first, last) = (t.events[0].ts(), t.events.last().unwrap().ts());
    let limit = RotateLimit {
        bytes: 0,
        ns: (last - first) / (min_files as u64 + 1),
    };
    let files = t
        .write_rotated(&dir.file(name), limit, 500, opts(200))
        .unwrap();
    assert!(files.len() >= min_files, "{} files", files.len());
    files.into_iter().map(|f| f.0).collect()
}

fn trace(seed: u64) -> MemTrace {
    let mut t = mem_trace(seed, 20_000);
    t.meta.start_ns = t.events[0].ts();
    t.meta.end_ns = t.events.last().unwrap().ts() + 1;
    t
}

#[test]
fn a_rotated_set_reads_as_the_recording_it_was_split_from() {
    let dir = TempDir::new("set-whole");
    let t = trace(3);
    let mut files = rotated(&t, &dir, "rec.zst", 4);
    // Stacks are added when first referenced: the first file holds only those its
    // events use (this trace's 40 stacks are all used early, so it may hold all).
    let first = TraceReader::open(&files[0]).unwrap();
    let last = TraceReader::open(files.last().unwrap()).unwrap();
    assert!(first.tables().stacks.len() <= last.tables().stacks.len());
    assert_eq!(last.tables().stacks.len(), t.tables.stacks.len());
    let per_file: Vec<TraceReader> = files
        .iter()
        .map(|f| TraceReader::open(f).unwrap())
        .collect();
    // Given in any order (a shell glob sorts by name; a user may not).
    files.reverse();
    let set = TraceReader::open_files(&files).unwrap();
    let m = set.to_mem().unwrap();
    assert_eq!(m.events, t.events);
    assert_tables_eq(&m.tables, &t.tables);
    assert_eq!(set.event_count(), t.events.len() as u64);
    assert_eq!(
        set.chunks().len(),
        per_file.iter().map(|r| r.chunks().len()).sum::<usize>()
    );
    assert_eq!(
        set.file_len(),
        per_file.iter().map(|r| r.file_len()).sum::<u64>()
    );
    assert_eq!(set.paths().len(), files.len());
    assert_eq!(set.path(), per_file[0].path());
    // The metadata spans the set; the lost counts of the files add up to the recording's.
    assert_eq!(set.meta().start_ns, t.meta.start_ns);
    assert_eq!(set.meta().end_ns, t.meta.end_ns);
    assert_eq!(set.meta().lost, t.meta.lost);
    assert_eq!(set.meta().host, t.meta.host);
    assert_eq!(
        set.meta().extra(ROTATE_FILES_KEY),
        Some(&*files.len().to_string())
    );
    assert_eq!(set.meta().extra(ROTATE_SEQ_KEY), None);
    // Counts by kind from the indexes, summed; and they agree with decoding everything.
    let indexed = set.indexed_stats().unwrap().clone();
    let verified = set.verify().unwrap();
    assert_eq!(indexed.events_by_kind, verified.events_by_kind);
    assert_eq!(indexed.events, t.events.len() as u64);
    // Each file starts where the one before it ended, and says which file it is.
    for (i, pair) in per_file.windows(2).enumerate() {
        assert_eq!(pair[1].meta().start_ns, pair[0].meta().end_ns, "file {i}");
        assert_eq!(pair[0].meta().extra(ROTATE_SEQ_KEY), Some(&*i.to_string()));
    }
    // A directory holding the set is the set.
    let by_dir = TraceReader::open_files(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(by_dir.to_mem().unwrap().events, t.events);
    // Window lookups run over the whole set.
    let (a, b) = (t.events[100].ts(), t.events[19_000].ts());
    let r = set.chunks_in_window(a, b);
    assert!(r.end < set.chunks().len(), "{r:?}");
    let mut inside = Vec::new();
    for i in r {
        set.decode_chunk(i, &mut inside).unwrap();
    }
    inside.retain(|e| (a..=b).contains(&e.ts()));
    let want: Vec<Event> = (t.events.iter())
        .filter(|e| (a..=b).contains(&e.ts()))
        .copied()
        .collect();
    assert_eq!(inside, want);
}

#[test]
fn each_file_counts_its_own_losses_and_the_set_sums_them() {
    let dir = TempDir::new("set-lost");
    let t = trace(4);
    let mut meta = t.meta.clone();
    meta.lost = LostCounts::default();
    let base = dir.file("rec.zst");
    let limit = RotateLimit { bytes: 0, ns: 1 };
    let mut w = RotatingWriter::create(&base, &meta, limit, opts(100)).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    let thirds: Vec<&[Event]> = t.events.chunks(t.events.len() / 3 + 1).collect();
    for (i, part) in thirds.iter().enumerate() {
        for e in *part {
            w.push(e).unwrap();
        }
        // The recorder's periodic update: lost counts of the recording so far.
        meta.lost.ringbuf_full = 5 * (i as u64 + 1);
        w.update_meta(&meta).unwrap();
        if i + 1 < thirds.len() {
            w.flush().unwrap();
        }
    }
    meta.lost.ringbuf_full = 17;
    let files = w.finish(&meta).unwrap();
    let paths: Vec<PathBuf> = files.iter().map(|f| f.0.clone()).collect();
    assert_eq!(paths.len(), 3);
    let lost: Vec<u64> = paths
        .iter()
        .map(|p| TraceReader::open(p).unwrap().meta().lost.ringbuf_full)
        .collect();
    assert_eq!(lost, [5, 5, 7]);
    let set = TraceReader::open_files(&paths).unwrap();
    assert_eq!(set.meta().lost.ringbuf_full, 17);
}

#[track_caller]
fn refused(paths: &[PathBuf], phrases: &[&str]) {
    let err = match TraceReader::open_files(paths) {
        Ok(_) => panic!("{paths:?} read as one recording"),
        Err(e) => e.to_string(),
    };
    for p in phrases {
        assert!(err.contains(p), "error lacks {p:?}: {err}");
    }
}

#[test]
fn sets_that_are_not_one_recordings_consecutive_files_are_refused_naming_the_files() {
    let dir = TempDir::new("set-refused");
    let t = trace(5);
    let files = rotated(&t, &dir, "rec.zst", 4);
    let name = |i: usize| files[i].display().to_string();
    // A file missing in the middle.
    refused(
        &[files[0].clone(), files[2].clone()],
        &[&name(0), &name(2), "gap", "file number 1 is missing"],
    );
    refused(
        &[files[0].clone(), files[3].clone()],
        &["files number 1..=2 are missing"],
    );
    // One file twice.
    refused(
        &[files[1].clone(), files[1].clone()],
        &["overlap", "both are file number 1"],
    );
    // Another recording of the same host (it started at another time).
    let mut other = trace(6);
    other.meta.start_ns += 1;
    let others = rotated(&other, &dir, "other.zst", 2);
    refused(
        &[files[0].clone(), others[1].clone()],
        &["not files of one recording", "recording start"],
    );
    // Another host.
    let mut far = trace(7);
    far.meta.host = "elsewhere".into();
    let far_files = rotated(&far, &dir, "far.zst", 2);
    refused(
        &[files[0].clone(), far_files[0].clone()],
        &["several hosts", "host-mem", "elsewhere"],
    );
    // Plain (not rotated) traces that overlap in time: e.g. the same recording twice.
    let a = dir.file("a.zst");
    let b = dir.file("b.zst");
    t.write_to(&a, opts(500)).unwrap();
    t.write_to(&b, opts(500)).unwrap();
    refused(&[a.clone(), b.clone()], &["overlap"]);
    // Plain traces with a gap between them: the first half and the last third.
    let mut early = t.clone();
    early.events.truncate(10_000);
    early.meta.end_ns = early.events.last().unwrap().ts();
    let mut late = t.clone();
    late.events.drain(..14_000);
    late.meta.start_ns = late.events[0].ts();
    let (e, l) = (dir.file("early.zst"), dir.file("late.zst"));
    early.write_to(&e, opts(500)).unwrap();
    late.write_to(&l, opts(500)).unwrap();
    refused(&[e.clone(), l.clone()], &["gap between", "in neither file"]);
    // ... and the two halves that meet exactly read as one.
    let mut second = t.clone();
    second.events.drain(..10_000);
    second.meta.start_ns = early.meta.end_ns;
    let s = dir.file("second.zst");
    second.write_to(&s, opts(500)).unwrap();
    let joined = TraceReader::open_files(&[s, e]).unwrap();
    assert_eq!(joined.to_mem().unwrap().events, t.events);
    // An empty directory, and a damaged file in a set: errors, not panics.
    let empty = dir.file("empty");
    std::fs::create_dir(&empty).unwrap();
    refused(&[empty], &["no trace files"]);
    let junk = dir.file("junk.zst");
    std::fs::write(&junk, b"not a trace").unwrap();
    refused(
        &[files[0].clone(), junk],
        &["junk.zst", "not a chainrec trace"],
    );
}

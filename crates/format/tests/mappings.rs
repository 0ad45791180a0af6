//! Mapping sections (format 2.1): written between chunks, not indexed, read back from
//! an intact file (the gaps between indexed sections) and from a scan, merged by id, and
//! carried into every rotated file.

mod common;
use chainrec_format::*;
use common::*;

fn entry(id: u64, tgid: Tid, start: u64, path: &str, until_ns: u64) -> MappingEntry {
    MappingEntry {
        id,
        tgid,
        start,
        end: start + 0x1000,
        pgoff: 0x2000,
        path: path.into(),
        build_id: Some(vec![0xab; 20]),
        dev: 0xfd01,
        inode: 77,
        vaddr_delta: Some(0x1000),
        from_ns: 5,
        until_ns,
    }
}

#[test]
fn mapping_sections_round_trip_intact_and_scanned_and_later_entries_win() {
    let dir = TempDir::new("mappings");
    let p = dir.file("m.zst");
    let t = mem_trace(9, 600);
    let mut w = TraceWriter::create(&p, &t.meta, opts(100)).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    for (i, e) in t.events.iter().enumerate() {
        match i {
            50 => w
                .add_mappings(&[
                    entry(0, 7, 0x40_0000, "/usr/bin/a", MappingEntry::OPEN),
                    entry(1, 7, 0x7f00_0000, "/lib/libc.so.6", MappingEntry::OPEN),
                ])
                .unwrap(),
            // The process exec'd: entry 0 ends (written again), a new one follows.
            350 => w
                .add_mappings(&[
                    entry(0, 7, 0x40_0000, "/usr/bin/a", 300),
                    entry(2, 7, 0x40_0000, "/usr/bin/b", MappingEntry::OPEN),
                ])
                .unwrap(),
            _ => {}
        }
        w.push(e).unwrap();
    }
    w.finish(&t.meta).unwrap();
    let check = |r: &TraceReader| {
        let h = &r.tables().mappings;
        assert_eq!(h.len(), 3);
        assert_eq!(h.lookup(7, 0x40_0010, 100).unwrap().path, "/usr/bin/a");
        assert_eq!(h.lookup(7, 0x40_0010, 100).unwrap().until_ns, 300);
        assert_eq!(h.lookup(7, 0x40_0010, 400).unwrap().id, 2);
        let libc = h.lookup(7, 0x7f00_0010, 400).unwrap();
        assert_eq!(libc.file_offset(0x7f00_0010), 0x2010);
        assert_eq!(
            libc,
            &entry(1, 7, 0x7f00_0000, "/lib/libc.so.6", MappingEntry::OPEN)
        );
        assert!(r.section_bytes().mappings > 0);
        assert_eq!(r.to_mem().unwrap().events, t.events);
    };
    let r = TraceReader::open(&p).unwrap();
    assert!(r.recovery().is_none());
    assert_eq!(
        r.section_bytes().other,
        0,
        "mapping sections counted as unknown"
    );
    check(&r);
    // Without the trailer: the scan reads them in order.
    let mut b = std::fs::read(&p).unwrap();
    b.truncate(b.len() - 32);
    let r = TraceReader::from_bytes(b).unwrap();
    assert!(r.recovery().is_some());
    check(&r);
}

#[test]
fn every_rotated_file_carries_the_mappings_seen_so_far() {
    let dir = TempDir::new("mappings-rotate");
    let base = dir.file("r.zst");
    let t = mem_trace(3, 400);
    let limit = RotateLimit { bytes: 1, ns: 0 };
    let mut w = RotatingWriter::create(&base, &t.meta, limit, opts(100)).unwrap();
    w.add_mappings(&[entry(0, 9, 0x1000, "/bin/x", MappingEntry::OPEN)])
        .unwrap();
    for (i, e) in t.events.iter().enumerate() {
        w.push(e).unwrap();
        if i % 100 == 99 {
            w.flush().unwrap();
        }
    }
    let files = w.finish(&t.meta).unwrap();
    assert!(files.len() >= 3, "{} files", files.len());
    for (f, _) in &files {
        let r = TraceReader::open(f).unwrap();
        assert_eq!(
            r.tables()
                .mappings
                .lookup(9, 0x1800, 10)
                .map(|m| m.path.as_str()),
            Some("/bin/x"),
            "{}",
            f.display()
        );
    }
}

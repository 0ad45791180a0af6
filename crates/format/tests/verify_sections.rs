//! `verify` checks every section of a file (issue 34 item 5): one flipped bit in any byte of
//! any section the index lists (every metadata section, superseded ones included, every
//! table section, every event chunk, the index), of the optional sections between them,
//! of the file header or of the trailer makes a check shaped like `chainrec info --verify`
//! fail, and for a listed section the error names its kind and offset.

mod common;
use chainrec_format::*;
use common::*;

/// A section as this test finds it by walking the frames itself (not with the reader).
#[derive(Clone, Copy, Debug)]
struct Found {
    offset: usize,
    len: usize,
    kind: u8,
}

/// The sections of a finished file, in file order (file header and trailer excluded).
fn sections(b: &[u8]) -> Vec<Found> {
    let le32 = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let le64 = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let end = b.len() - 32;
    let mut off = 28;
    let mut out = Vec::new();
    while off < end {
        assert_eq!(le32(off), 0x184D_2A5C, "section magic at {off}");
        assert_eq!(le32(off + 4), 48, "section header size at {off}");
        let len = 56 + le64(off + 16) as usize;
        out.push(Found {
            offset: off,
            len,
            kind: b[off + 8],
        });
        off += len;
    }
    assert_eq!(off, end, "sections end where the trailer starts");
    out
}

/// What the errors call a section of `kind`.
fn kind_name(kind: u8) -> &'static str {
    match kind {
        1 => "metadata section",
        2 => "table section",
        3 => "event chunk",
        4 => "index section",
        0x80 => "cgroup section",
        0x81 => "throttle section",
        0x82 => "mapping section",
        k => panic!("unexpected section kind {k}"),
    }
}

/// What `chainrec info --verify` does: open, verify, and refuse a file that had to be
/// recovered by scanning. Err is the message it would print.
fn verify_like_info(bytes: Vec<u8>) -> std::result::Result<VerifyReport, String> {
    let r = TraceReader::from_bytes(bytes).map_err(|e| e.to_string())?;
    let rep = r.verify().map_err(|e| e.to_string())?;
    if let Some(rec) = r.recovery() {
        return Err(format!("damaged: {}", rec.reason));
    }
    Ok(rep)
}

/// A trace with five metadata sections (the first, three updates, the final one), several
/// table sections, chunks, a mapping section, a cgroup section and the index.
fn trace_with_meta_updates(dir: &TempDir) -> (Vec<u8>, MemTrace) {
    let p = dir.file("v.zst");
    let t = mem_trace(34, 700);
    let mut w = TraceWriter::create(&p, &t.meta, opts(90)).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    let some_stack = t.tables.stacks.values().next().unwrap().clone();
    for (i, e) in t.events.iter().enumerate() {
        if i > 0 && i % 200 == 0 {
            let mut m = t.meta.clone();
            m.extra.push(("update".into(), i.to_string()));
            m.lost.ringbuf_full += i as u64;
            w.update_meta(&m).unwrap();
            w.flush().unwrap();
        }
        match i {
            // A later table section (an entry written again replaces the earlier one).
            300 => w.add_stacks(std::slice::from_ref(&some_stack)).unwrap(),
            350 => w
                .add_mappings(&[MappingEntry {
                    id: 1,
                    tgid: 100,
                    start: 0x40_0000,
                    end: 0x41_0000,
                    pgoff: 0,
                    path: "/usr/bin/x".into(),
                    build_id: Some(vec![0xab; 20]),
                    dev: 0xfd01,
                    inode: 7,
                    vaddr_delta: Some(0),
                    from_ns: 0,
                    until_ns: MappingEntry::OPEN,
                }])
                .unwrap(),
            500 => w
                .add_cgroups(
                    &[CgroupEntry {
                        id: 42,
                        path: "/system.slice/x.service".into(),
                    }],
                    &[TaskCgroup {
                        ts: e.ts(),
                        tid: 7,
                        cgroup: 42,
                    }],
                )
                .unwrap(),
            _ => {}
        }
        w.push(e).unwrap();
    }
    let mut last = t.meta.clone();
    last.end_ns = t.events.last().unwrap().ts();
    w.finish(&last).unwrap();
    (std::fs::read(&p).unwrap(), t)
}

#[test]
fn a_flipped_bit_in_any_section_fails_verify_naming_it() {
    let dir = TempDir::new("verify-sections");
    let (full, t) = trace_with_meta_updates(&dir);
    let rep = verify_like_info(full.clone()).expect("the untouched trace verifies");
    assert_eq!(rep.events, t.events.len() as u64);

    let secs = sections(&full);
    let count = |k: u8| secs.iter().filter(|s| s.kind == k).count();
    assert_eq!(count(1), 5, "metadata sections: {secs:?}");
    assert!(count(2) >= 2, "table sections: {secs:?}");
    assert!(count(3) >= 8, "event chunks: {secs:?}");
    assert_eq!(count(4), 1, "index: {secs:?}");
    assert_eq!(count(0x80), 1, "cgroup section: {secs:?}");
    assert_eq!(count(0x82), 1, "mapping section: {secs:?}");

    let mut flips = 0;
    let mut fail = |at: usize| -> String {
        let mut b = full.clone();
        b[at] ^= 1 << (at % 8);
        flips += 1;
        match verify_like_info(b) {
            Ok(_) => panic!("a flipped bit at byte {at} passed verify"),
            Err(e) => e,
        }
    };
    for s in &secs {
        let name = kind_name(s.kind);
        let listed = s.kind <= 4;
        for at in s.offset..s.offset + s.len {
            // The frame size of an optional section (bytes 4..8) is not covered by any
            // checksum: a reader skips a skippable frame of another size (a newer minor's),
            // and one size in a few (the section's own payload length plus 48) skips the
            // section whole. The index lists the others, so their size must be 48.
            if !listed && (s.offset + 4..s.offset + 8).contains(&at) {
                continue;
            }
            let e = fail(at);
            let off = s.offset;
            let named = e.contains(&format!("{name} at offset {off}"))
                || e.contains(&format!("{name} header at offset {off}"));
            if listed {
                assert!(
                    named,
                    "byte {at} of the {name} at offset {off}: the error does not name it: {e}"
                );
            } else {
                assert!(
                    e.contains(&format!("offset {off}")),
                    "byte {at} of the {name} at offset {off}: the error does not name its offset: {e}"
                );
            }
        }
    }
    // The file header and the trailer are not sections, but no byte of them may pass.
    for at in (0..28).chain(full.len() - 32..full.len()) {
        fail(at);
    }
    assert!(
        flips > full.len() - 40,
        "{flips} flips of {} bytes",
        full.len()
    );
}

/// The superseded metadata sections are the ones reading never decodes: a flipped payload
/// byte in one leaves the trace readable, and only `verify` finds it.
#[test]
fn damage_in_a_superseded_metadata_section_is_found_only_by_verify() {
    let dir = TempDir::new("verify-old-meta");
    let (full, t) = trace_with_meta_updates(&dir);
    let secs = sections(&full);
    let metas: Vec<Found> = secs.iter().copied().filter(|s| s.kind == 1).collect();
    let old = metas[1];
    let mut b = full.clone();
    b[old.offset + old.len - 5] ^= 0x04;
    let r = TraceReader::from_bytes(b.clone()).unwrap();
    assert!(r.recovery().is_none(), "{:?}", r.recovery());
    assert_eq!(r.to_mem().unwrap().events, t.events);
    let e = verify_like_info(b).unwrap_err();
    assert_eq!(
        e,
        format!(
            "checksum mismatch in metadata section at offset {}",
            old.offset
        )
    );
}

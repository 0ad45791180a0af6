//! Damaged files: truncation at every offset, random byte flips. Each open either fails
//! with a typed error or recovers a prefix of the events (documented in FORMAT.md);
//! nothing panics and decoding never yields events that were not written.

mod common;
use chainrec_format::*;
use chainrec_testkit::sections::crc32;
use common::*;

/// Open and fully read a possibly damaged file. Ok((events, recovered)) or Err.
fn read_all(path: &std::path::Path) -> Result<(Vec<Event>, bool, TraceReader)> {
    let r = TraceReader::open(path)?;
    let mut ev = Vec::new();
    for i in 0..r.chunks().len() {
        r.decode_chunk(i, &mut ev)?;
    }
    // Parallel decode and verify must not panic either.
    let _ = r.for_each_chunk(0..r.chunks().len(), true, |_| -> Result<()> { Ok(()) });
    let _ = r.verify();
    let rec = r.recovery().is_some();
    Ok((ev, rec, r))
}

fn small_trace(dir: &TempDir) -> (std::path::PathBuf, MemTrace) {
    let p = dir.file("small.zst");
    let t = MemTrace {
        meta: meta("s"),
        tables: tables(6),
        events: events(9, 120, 6),
    };
    // Several chunks and table sections: tables are added between chunks.
    let mut w = TraceWriter::create(&p, &t.meta, opts(25)).unwrap();
    let stacks: Vec<StackEntry> = {
        let mut v: Vec<_> = t.tables.stacks.values().cloned().collect();
        v.sort_by_key(|s| s.id);
        v
    };
    let mut irqs: Vec<_> = t.tables.irq_sources.values().cloned().collect();
    irqs.sort_by_key(|s| s.id);
    w.add_irq_sources(&irqs).unwrap();
    w.add_stacks(&stacks).unwrap();
    let mut syms: Vec<_> = t.tables.symbols.iter().map(|s| s.to_entry()).collect();
    syms.sort_by_key(|s| s.addr);
    w.add_symbols(&syms).unwrap();
    for (i, e) in t.events.iter().enumerate() {
        if i == 60 {
            let mut tasks: Vec<_> = t.tables.tasks.values().cloned().collect();
            tasks.sort_by_key(|t| t.tid);
            w.add_tasks(&tasks).unwrap();
            w.flush().unwrap();
        }
        w.push(e).unwrap();
    }
    w.finish(&t.meta).unwrap();
    (p, t)
}

#[test]
fn truncation_at_every_offset() {
    let dir = TempDir::new("trunc");
    let (p, t) = small_trace(&dir);
    let full = std::fs::read(&p).unwrap();
    let q = dir.file("cut.zst");
    let (mut errors, mut recovered) = (0, 0);
    let mut best = 0;
    for len in 0..full.len() {
        std::fs::write(&q, &full[..len]).unwrap();
        match read_all(&q) {
            Ok((ev, rec, r)) => {
                assert!(
                    rec,
                    "a truncated file ({len} of {}) must be flagged as recovered",
                    full.len()
                );
                assert_eq!(ev[..], t.events[..ev.len()], "not a prefix at len {len}");
                let rv = r.recovery().unwrap();
                assert!(rv.trailing_bytes <= len as u64);
                // A cut file is what a killed writer leaves: recovered, not damaged.
                assert!(
                    !rv.damaged,
                    "len {len}: truncation flagged as damage: {}",
                    rv.reason
                );
                // Monotone: a longer prefix never recovers fewer events.
                assert!(ev.len() >= best, "len {len}: {} < {best}", ev.len());
                best = ev.len();
                recovered += 1;
            }
            Err(e) => {
                assert!(
                    matches!(
                        e,
                        FormatError::Truncated { .. }
                            | FormatError::NotChainrec
                            | FormatError::Empty
                    ),
                    "len {len}: unexpected {e}"
                );
                // Only files too short to hold the initial metadata fail.
                assert!(len < 400, "len {len} failed: {e}");
                errors += 1;
            }
        }
    }
    assert!(errors > 0 && recovered > 0);
    // Everything but the index + trailer gives all events back.
    assert_eq!(best, t.events.len());
    // The full file is not "recovered".
    let (ev, rec, _) = read_all(&p).unwrap();
    assert!(!rec);
    assert_eq!(ev, t.events);
}

#[test]
fn random_byte_flips() {
    let dir = TempDir::new("flip");
    let (p, t) = small_trace(&dir);
    let full = std::fs::read(&p).unwrap();
    let q = dir.file("flip.zst");
    let mut rng = Rng(0xC0FFEE);
    let mut outcomes = [0usize; 3];
    for round in 0..1500 {
        let mut b = full.clone();
        let flips = 1 + rng.below(3);
        for _ in 0..flips {
            let at = rng.below(b.len() as u64) as usize;
            let bit = 1u8 << rng.below(8);
            b[at] ^= bit;
        }
        std::fs::write(&q, &b).unwrap();
        match read_all(&q) {
            Ok((ev, rec, _)) => {
                // Checksums cover every byte that matters: whatever decodes is original.
                assert!(ev.len() <= t.events.len());
                // Fewer events without a recovery would be data lost silently.
                assert!(
                    rec || ev.len() == t.events.len(),
                    "round {round}: {} of {} events, not flagged as recovered",
                    ev.len(),
                    t.events.len()
                );
                assert_eq!(
                    ev[..],
                    t.events[..ev.len()],
                    "round {round}: decoded events differ"
                );
                outcomes[if rec { 1 } else { 0 }] += 1;
            }
            Err(_) => outcomes[2] += 1,
        }
    }
    eprintln!(
        "flips: clean {} recovered {} error {}",
        outcomes[0], outcomes[1], outcomes[2]
    );
    assert!(outcomes[1] + outcomes[2] > 0);
}

#[test]
fn random_garbage_and_spliced_files() {
    let dir = TempDir::new("garbage");
    let (p, _) = small_trace(&dir);
    let full = std::fs::read(&p).unwrap();
    let q = dir.file("g.zst");
    let mut rng = Rng(42);
    for _ in 0..300 {
        // A valid header followed by random bytes, or random slices of a real file.
        let mut b: Vec<u8> = full[..28].to_vec();
        match rng.below(3) {
            0 => b.extend((0..rng.below(4000)).map(|_| rng.next() as u8)),
            1 => {
                let a = rng.below(full.len() as u64) as usize;
                let e = a + rng.below((full.len() - a) as u64) as usize;
                b.extend_from_slice(&full[a..e]);
            }
            _ => {
                b = full.clone();
                let a = rng.below(full.len() as u64) as usize;
                let n = rng.below(64) as usize;
                b.drain(a..(a + n).min(full.len()));
            }
        }
        std::fs::write(&q, &b).unwrap();
        let _ = read_all(&q);
    }
}

#[test]
fn damaged_chunk_payload_is_a_checksum_error() {
    let dir = TempDir::new("chk");
    let (p, _) = small_trace(&dir);
    let r = TraceReader::open(&p).unwrap();
    let c = r.chunks()[1];
    drop(r);
    let mut b = std::fs::read(&p).unwrap();
    let at = (c.offset + c.len - 3) as usize;
    b[at] ^= 0x10;
    let q = dir.file("c.zst");
    std::fs::write(&q, &b).unwrap();
    let r = TraceReader::open(&q).unwrap();
    let mut ev = Vec::new();
    r.decode_chunk(0, &mut ev).unwrap();
    let n = ev.len();
    let e = r.decode_chunk(1, &mut ev).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::Checksum {
                what: "event chunk",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(ev.len(), n, "a failed decode appends nothing");
    assert!(r.verify().is_err());
}

/// Regression (found by `fuzz/fuzz_targets/payload.rs`): a comm whose name bytes run past
/// the end of the misc column is an error, not a panic.
#[test]
fn short_comm_name_is_an_error() {
    // n=1, first_ts=0, dict=[5]; columns kind=[3 (comm)], ts=[0], flags=[], tid=[0],
    // stack=[], misc=[tgid 1, reason 0, len 10, "ab"].
    let raw = [
        1u8, 0, 1, 5, 1, 3, 1, 0, 0, 1, 0, 0, 5, 1, 0, 10, b'a', b'b',
    ];
    let e = chainrec_format::__fuzz::decode_chunk_payload(&raw).unwrap_err();
    assert!(e.contains("inconsistent"), "{e}");
    // The same with the full name decodes.
    let raw = [1u8, 0, 1, 5, 1, 3, 1, 0, 0, 1, 0, 0, 5, 1, 0, 2, b'a', b'b'];
    let ev = chainrec_format::__fuzz::decode_chunk_payload(&raw).unwrap();
    assert!(
        matches!(ev[0], Event::Comm(c) if c.tid == 5 && c.tgid == 1 && c.comm.as_str() == "ab")
    );
}

/// In-tree fuzzing of the column decoder below the checksums (cargo-fuzz is not part of
/// `cargo test`): seeded mutations of real chunk payloads never panic, and whatever
/// decodes re-encodes to the same events.
#[test]
fn mutated_chunk_payloads_never_panic() {
    use chainrec_format::__fuzz::*;
    let ev = events(77, 3000, 40);
    let mut rng = Rng(1234);
    let seeds: Vec<Vec<u8>> = [(0usize, 40usize), (100, 500), (1000, 2000)]
        .iter()
        .map(|&(a, n)| encode_chunk_payload(&ev[a..a + n]))
        .collect();
    for s in &seeds {
        assert!(decode_chunk_payload(s).is_ok());
    }
    let (mut ok, mut err) = (0, 0);
    for _ in 0..6000 {
        let mut b = seeds[rng.below(3) as usize].clone();
        for _ in 0..1 + rng.below(4) {
            match rng.below(4) {
                0 => {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] ^= 1 << rng.below(8);
                }
                1 => {
                    let i = rng.below(b.len() as u64) as usize;
                    b[i] = rng.next() as u8;
                }
                2 => {
                    let n = rng.below(b.len() as u64) as usize;
                    b.truncate(n.max(1));
                }
                _ => {
                    let i = rng.below(b.len() as u64) as usize;
                    b.insert(i, rng.next() as u8);
                }
            }
        }
        match decode_chunk_payload(&b) {
            Ok(evs) => {
                ok += 1;
                if !evs.is_empty() {
                    assert_eq!(
                        decode_chunk_payload(&encode_chunk_payload(&evs)).unwrap(),
                        evs
                    );
                }
            }
            Err(_) => err += 1,
        }
        let _ = decode_tables_payload(&b);
    }
    eprintln!("mutated payloads: {ok} decoded, {err} rejected");
    assert!(err > 0);
}

/// Compatibility rules (FORMAT.md): unknown optional sections and foreign skippable frames
/// are skipped, with or without the index; a reserved (required) kind stops a scan.
#[test]
fn unknown_optional_sections_are_skipped() {
    let dir = TempDir::new("compat");
    let p = dir.file("opt.zst");
    let t = mem_trace(4, 600);
    let mut w = TraceWriter::create(&p, &t.meta, opts(100)).unwrap();
    let mut tables_only = t.clone();
    tables_only.events.clear();
    tables_only.replay_into(&mut w).unwrap();
    assert!(w.write_optional_section(0x05, b"x").is_err());
    for (i, e) in t.events.iter().enumerate() {
        if i % 250 == 0 {
            w.write_optional_section(
                0x90 + (i / 250) as u8,
                format!("future data {i}").as_bytes(),
            )
            .unwrap();
        }
        w.push(e).unwrap();
    }
    w.finish(&t.meta).unwrap();
    // Indexed.
    let r = TraceReader::open(&p).unwrap();
    assert!(r.recovery().is_none());
    assert!(r.section_bytes().other > 0);
    assert_eq!(r.to_mem().unwrap().events, t.events);
    // Scanned (no trailer), plus a foreign skippable frame spliced in after the header.
    let mut b = std::fs::read(&p).unwrap();
    b.truncate(b.len() - 32);
    let mut foreign = 0x184D_2A50u32.to_le_bytes().to_vec();
    foreign.extend_from_slice(&5u32.to_le_bytes());
    foreign.extend_from_slice(b"hello");
    b.splice(28..28, foreign);
    let q = dir.file("scan.zst");
    std::fs::write(&q, &b).unwrap();
    let r = TraceReader::open(&q).unwrap();
    let rec = r.recovery().unwrap();
    assert_eq!(rec.trailing_bytes, 0, "{}", rec.reason);
    assert_eq!(r.to_mem().unwrap().events, t.events);
    // A reserved kind (here 0x05, written by patching an optional section's kind and
    // header checksum) stops the scan there: only a prefix is read.
    let mut b = std::fs::read(&p).unwrap();
    b.truncate(b.len() - 32);
    let mut at = None;
    let mut off = 28usize;
    while off + 56 <= b.len() {
        let size = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap()) as usize;
        let payload = u64::from_le_bytes(b[off + 16..off + 24].try_into().unwrap()) as usize;
        if b[off + 8] == 0x91 {
            at = Some(off);
            break;
        }
        off += 8 + size + payload;
    }
    let at = at.expect("optional section 0x91");
    b[at + 8] = 0x05;
    let crc = crc32(&b[at + 8..at + 52]);
    b[at + 52..at + 56].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&q, &b).unwrap();
    let r = TraceReader::open(&q).unwrap();
    let rec = r.recovery().unwrap();
    assert!(
        rec.reason.contains("unknown required section kind 5"),
        "{}",
        rec.reason
    );
    let got = r.to_mem().unwrap().events;
    assert!(got.len() < t.events.len());
    assert_eq!(got[..], t.events[..got.len()]);
}

#[test]
fn damage_in_the_middle_is_flagged_as_damage() {
    let dir = TempDir::new("middle");
    let (p, t) = small_trace(&dir);
    let full = std::fs::read(&p).unwrap();
    let r = TraceReader::open(&p).unwrap();
    // Flip one byte inside the payload of the second event chunk: the index no longer
    // matches (its checksum fails at decode), and a scan stops there.
    let second = r.chunks()[1];
    let mut bad = full.clone();
    let at = (second.offset + second.len - 3) as usize;
    bad[at] ^= 0x40;
    // Also break the trailer, so that the reader has to scan.
    let n = bad.len();
    bad[n - 5] ^= 0x01;
    let q = dir.file("bad.zst");
    std::fs::write(&q, &bad).unwrap();
    let r = TraceReader::open(&q).unwrap();
    let rv = r.recovery().expect("scanned");
    assert!(
        rv.damaged,
        "checksum failure mid-file must be damage: {}",
        rv.reason
    );
    // Exactly the first chunk survives, and it is a prefix of what was written.
    assert_eq!(r.chunks().len(), 1);
    let mut ev = Vec::new();
    r.decode_chunk(0, &mut ev).unwrap();
    assert_eq!(ev[..], t.events[..ev.len()]);
    // Only the trailer broken: everything is readable and nothing counts as damage.
    let mut tail_only = full.clone();
    let n = tail_only.len();
    tail_only[n - 5] ^= 0x01;
    std::fs::write(&q, &tail_only).unwrap();
    let r = TraceReader::open(&q).unwrap();
    assert!(!r.recovery().expect("scanned").damaged);
    assert_eq!(r.event_count(), t.events.len() as u64);
}

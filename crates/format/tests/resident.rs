//! The reader keeps the trace file out of the process's resident set: a read of the
//! mapping maps more than the bytes read (the kernel's fault-around, large page-cache
//! folios), so opening a trace (every chunk's header and table section is read) or
//! streaming it (each chunk decoded once) must give those pages back, or a 3.6 GB trace
//! holds ~1 GB of it in RSS (docs/BENCHMARKS.md, "Session 26").

mod common;
use chainrec_format::*;
use common::*;

/// Resident kB of this process's mappings of `path` (from /proc/self/smaps).
fn resident_kb_of(path: &std::path::Path) -> u64 {
    let name = path.to_str().unwrap();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let mut mine = false;
    let mut kb = 0;
    for line in smaps.lines() {
        if line.contains('-') && line.split_whitespace().count() >= 5 && !line.ends_with("kB") {
            mine = line.ends_with(name);
        } else if mine && line.starts_with("Rss:") {
            kb += line
                .split_whitespace()
                .nth(1)
                .unwrap()
                .parse::<u64>()
                .unwrap();
        }
    }
    kb
}

#[test]
fn opening_and_streaming_a_trace_leaves_little_of_it_resident() {
    let dir = TempDir::new("resident");
    let p = dir.path().join("many-chunks.zst");
    // 4,000 small chunks (a table section before many of them): a file of ~15 MB whose
    // sections are all a few kB apart, as a long recording's are.
    mem_trace(7, 2_000_000).write_to(&p, opts(500)).unwrap();
    // Read it once so that the page cache holds it, as it would after recording.
    let file_kb = std::fs::read(&p).unwrap().len() as u64 / 1024;
    assert!(
        file_kb > 8 * 1024,
        "a trace of {file_kb} kB is too small to tell"
    );

    let r = TraceReader::open(&p).unwrap();
    assert!(r.chunks().len() >= 4000, "{} chunks", r.chunks().len());
    let opened = resident_kb_of(&p);
    let mut events = 0usize;
    r.for_each_chunk(0..r.chunks().len(), false, |ev| {
        events += ev.len();
        Ok::<_, FormatError>(())
    })
    .unwrap();
    let streamed = resident_kb_of(&p);
    assert_eq!(events, 2_000_000);
    // At most two 2 MiB windows stay mapped (the last chunk's), out of the whole file.
    assert!(
        opened <= 4096 && streamed <= 4096,
        "resident of a {file_kb} kB trace: {opened} kB after opening, {streamed} kB after \
         decoding every chunk"
    );
}

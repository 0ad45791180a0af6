//! Fuzz the trace reader: open arbitrary bytes, decode every chunk (sequentially and in
//! parallel), verify, and read everything. Nothing may panic, hang or allocate without
//! bound; whatever decodes must be self-consistent.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run reader -- -rss_limit_mb=2048`
//! Seed corpus: `chainrec synth --scenario pipe-relay --events 200 -o fuzz/corpus/reader/relay.zst`
//! (small traces; `corpus/` is git-ignored).
#![no_main]

use chainrec_format::{Result, TraceReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(r) = TraceReader::from_bytes(data.to_vec()) else { return };
    let mut events = Vec::new();
    let mut ok = true;
    for i in 0..r.chunks().len() {
        let before = events.len();
        if r.decode_chunk(i, &mut events).is_err() {
            // A failed decode appends nothing.
            assert_eq!(events.len(), before);
            ok = false;
            break;
        }
    }
    let mut n = 0usize;
    let par = r.for_each_chunk(0..r.chunks().len(), true, |ev| -> Result<()> {
        n += ev.len();
        Ok(())
    });
    if ok {
        assert!(par.is_ok());
        assert_eq!(n as u64, r.event_count());
        assert_eq!(events.len() as u64, r.event_count());
        assert!(events.windows(2).all(|w| w[0].ts() <= w[1].ts()));
    }
    let _ = r.verify();
    let _ = r.to_mem();
    let w = r.chunks_in_window(0, u64::MAX);
    assert!(w.end <= r.chunks().len());
});

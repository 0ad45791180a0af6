//! Fuzz the payload decoders below the checksums: raw event-chunk columns and raw table
//! sections. Decoding must never panic; a decoded chunk must re-encode to a payload that
//! decodes to the same events.
//!
//! Run: `cd fuzz && cargo +nightly fuzz run payload -- -rss_limit_mb=2048`
#![no_main]

use chainrec_format::__fuzz::*;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (sel, body) = match data.split_first() {
        Some((s, b)) => (*s, b),
        None => return,
    };
    if sel & 1 == 0 {
        if let Ok(events) = decode_chunk_payload(body) {
            if !events.is_empty() {
                let again = encode_chunk_payload(&events);
                assert_eq!(decode_chunk_payload(&again).as_deref(), Ok(&events[..]));
            }
        }
    } else {
        let _ = decode_tables_payload(body);
    }
});

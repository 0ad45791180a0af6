//! Entry points for fuzzing the payload decoders below the checksums (not a stable API).

use crate::{Event, Result, Tables};

/// Decode a raw (decompressed) event chunk payload (format 2: samples allowed).
pub fn decode_chunk_payload(raw: &[u8]) -> std::result::Result<Vec<Event>, String> {
    let mut out = Vec::new();
    let mut scratch = crate::chunk::DecodeScratch::default();
    crate::chunk::decode(raw, &mut out, &mut scratch, true)?;
    Ok(out)
}

/// Encode events as a raw chunk payload (for round-trip checks).
pub fn encode_chunk_payload(events: &[Event]) -> Vec<u8> {
    let mut out = Vec::new();
    crate::chunk::ChunkEncoder::default().encode(events, &mut out);
    out
}

/// Decode a raw table-section payload and merge it into empty tables.
pub fn decode_tables_payload(raw: &[u8]) -> Result<Tables> {
    crate::reader::decode_tables_for_fuzz(raw)
}

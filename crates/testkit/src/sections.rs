//! A trace's section headers patched on purpose: the CRC-32 (IEEE) the format puts in
//! them, and sections relabelled to a kind no reader knows (how an older reader sees a
//! newer trace). Bit by bit: tests patch a few headers, and need no crc crate for it.

/// CRC-32 (IEEE 802.3, reflected, as `crc32fast` computes it) of `b`.
pub fn crc32(b: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &x in b {
        crc ^= x as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// The bytes of the trace file at `p` with its sections of kind `kind` relabelled to an
/// optional kind no reader knows (0x9f, header checksum redone), and how many there were.
/// Walks the file's frames from the 28-byte file header: 56-byte section headers (size
/// 48 after the frame prefix, payload length at 16, kind at 8, CRC of bytes 8..52 at 52),
/// and stops at the first frame that is not a section (the trailer).
pub fn relabel_sections(p: &std::path::Path, kind: u8) -> (Vec<u8>, usize) {
    let mut b = std::fs::read(p).unwrap();
    let mut off = 28usize;
    let mut patched = 0;
    while off + 56 <= b.len() {
        let size = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap());
        if size != 48 {
            break;
        }
        let payload = u64::from_le_bytes(b[off + 16..off + 24].try_into().unwrap()) as usize;
        if b[off + 8] == kind {
            b[off + 8] = 0x9f;
            let crc = crc32(&b[off + 8..off + 52]);
            b[off + 52..off + 56].copy_from_slice(&crc.to_le_bytes());
            patched += 1;
        }
        off += 56 + payload;
    }
    (b, patched)
}

#[cfg(test)]
mod tests {
    #[test]
    fn check_value() {
        // The standard check value of CRC-32/ISO-HDLC.
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
    }
}

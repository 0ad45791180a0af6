//! Byte-level framing shared by the writer and the reader (see `docs/FORMAT.md`).
//!
//! Every structure in a file is a zstd *skippable frame* (`magic, LE u32 size, content`),
//! optionally followed by one regular zstd frame (the section payload), so the whole file
//! is a valid zstd stream: `zstd -t` checks it and `zstd -d` decodes it (to the
//! concatenated raw payloads).

use crate::{FormatError, Result};

/// Skippable-frame magic of the file header and of section headers.
pub(crate) const SECTION_MAGIC: u32 = 0x184D_2A5C;
/// Skippable-frame magic of the trailer (distinct, so a scan recognises it).
pub(crate) const TRAILER_MAGIC: u32 = 0x184D_2A5D;
/// Any skippable frame: `magic & SKIPPABLE_MASK == SKIPPABLE_BASE`.
pub(crate) const SKIPPABLE_MASK: u32 = 0xFFFF_FFF0;
/// Base of the skippable-frame magic range.
pub(crate) const SKIPPABLE_BASE: u32 = 0x184D_2A50;

/// File magic inside the file-header frame.
pub(crate) const FILE_MAGIC: &[u8; 8] = b"CHAINREC";
/// Major version written by this build (2: on-CPU samples, event kind 7).
pub const FORMAT_MAJOR: u16 = 2;
/// Minor version written by this build (readers accept any minor of a major they read;
/// minor 1 added the optional cgroup, throttle and mapping sections, kinds 0x80..=0x82;
/// minor 2 the optional goroutine sections, kind 0x83; minor 3 the goroutine executes,
/// kind 0x84; minor 4 the Go stop-the-world records, kind 0x85).
pub const FORMAT_MINOR: u16 = 4;
/// Oldest major version this build reads (1: no samples, 7 per-kind counts in the index).
pub const FORMAT_MIN_MAJOR: u16 = 1;

/// Content size of the file-header frame.
pub(crate) const FILE_HEADER_CONTENT: usize = 20;
/// Total bytes of the file header (frame prefix + content).
pub(crate) const FILE_HEADER_LEN: usize = 8 + FILE_HEADER_CONTENT;
/// Content size of a section-header frame.
pub(crate) const SECTION_HEADER_CONTENT: usize = 48;
/// Total bytes of a section header (frame prefix + content).
pub(crate) const SECTION_HEADER_LEN: usize = 8 + SECTION_HEADER_CONTENT;
/// Content size of the trailer frame.
pub(crate) const TRAILER_CONTENT: usize = 24;
/// Total bytes of the trailer.
pub(crate) const TRAILER_LEN: usize = 8 + TRAILER_CONTENT;
/// Magic inside the trailer content ("CRTR").
pub(crate) const TRAILER_TAG: &[u8; 4] = b"CRTR";

/// Section kinds. Kinds >= [`KIND_OPTIONAL_MIN`] may be skipped by readers that do not
/// know them; an unknown kind below it makes the section unreadable.
pub(crate) const KIND_META: u8 = 1;
pub(crate) const KIND_TABLES: u8 = 2;
pub(crate) const KIND_CHUNK: u8 = 3;
pub(crate) const KIND_INDEX: u8 = 4;
pub(crate) const KIND_OPTIONAL_MIN: u8 = 0x80;
/// Optional (format 2.1): CPU-quota throttling records (`ThrottleDelta`).
pub(crate) const KIND_THROTTLES: u8 = 0x81;
/// Optional (format 2.1): cgroup paths and threads' cgroup memberships.
pub(crate) const KIND_CGROUPS: u8 = 0x80;
/// Optional (format 2.1): executable mappings of user processes.
pub(crate) const KIND_MAPPINGS: u8 = 0x82;
/// Optional (format 2.2): goroutine parks and readies of Go programs (`GoDelta`).
pub(crate) const KIND_GOROUTINES: u8 = 0x83;
/// Optional (format 2.3): goroutine executes (`Vec<GoExecute>`), beside the goroutine
/// sections so that 2.2 readers skip them.
pub(crate) const KIND_GO_EXECUTES: u8 = 0x84;
/// Optional (format 2.4): Go stop-the-world stops and starts (`Vec<GoStw>`).
pub(crate) const KIND_GO_STWS: u8 = 0x85;

/// Largest decompressed payload of an event chunk a reader accepts.
pub(crate) const MAX_CHUNK_RAW: u64 = 64 << 20;
/// Largest decompressed payload of any other section a reader accepts.
pub(crate) const MAX_SECTION_RAW: u64 = 1 << 30;
/// Most events one chunk may hold (the writer clamps `chunk_events` to this).
pub(crate) const MAX_CHUNK_EVENTS: u32 = 1 << 20;

/// Human name of a section kind.
pub(crate) fn kind_name(kind: u8) -> &'static str {
    match kind {
        KIND_META => "metadata section",
        KIND_TABLES => "table section",
        KIND_CHUNK => crate::error::EVENT_CHUNK,
        KIND_INDEX => "index section",
        KIND_MAPPINGS => "mapping section",
        KIND_THROTTLES => "throttle section",
        KIND_GOROUTINES => "goroutine section",
        KIND_GO_EXECUTES => "goroutine execute section",
        KIND_GO_STWS => "Go stop-the-world section",
        KIND_CGROUPS => "cgroup section",
        _ => "section",
    }
}

/// What the header of a section of `kind` is called in errors (a damaged header no longer
/// tells its kind; whoever expects a kind at an offset, from the index, names it).
pub(crate) fn header_name(kind: u8) -> &'static str {
    match kind {
        KIND_META => "metadata section header",
        KIND_TABLES => "table section header",
        KIND_CHUNK => "event chunk header",
        KIND_INDEX => "index section header",
        KIND_MAPPINGS => "mapping section header",
        KIND_THROTTLES => "throttle section header",
        KIND_GOROUTINES => "goroutine section header",
        KIND_GO_EXECUTES => "goroutine execute section header",
        KIND_GO_STWS => "Go stop-the-world section header",
        KIND_CGROUPS => "cgroup section header",
        _ => "section header",
    }
}

/// The decoded 48-byte section header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct SectionHeader {
    pub kind: u8,
    pub flags: u8,
    pub events: u32,
    pub payload_len: u64,
    pub raw_len: u64,
    pub first_ts: u64,
    pub last_ts: u64,
    pub payload_crc: u32,
}

impl SectionHeader {
    /// Bytes of the whole section (header + payload frame).
    pub fn section_len(&self) -> u64 {
        SECTION_HEADER_LEN as u64 + self.payload_len
    }

    /// Append header bytes (frame prefix included) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&SECTION_MAGIC.to_le_bytes());
        out.extend_from_slice(&(SECTION_HEADER_CONTENT as u32).to_le_bytes());
        let start = out.len();
        out.push(self.kind);
        out.push(self.flags);
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.events.to_le_bytes());
        out.extend_from_slice(&self.payload_len.to_le_bytes());
        out.extend_from_slice(&self.raw_len.to_le_bytes());
        out.extend_from_slice(&self.first_ts.to_le_bytes());
        out.extend_from_slice(&self.last_ts.to_le_bytes());
        out.extend_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32fast::hash(&out[start..]);
        out.extend_from_slice(&crc.to_le_bytes());
    }
}

/// Little-endian field readers over a slice known to be long enough.
pub(crate) fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// The file header frame.
pub(crate) fn file_header_bytes() -> Vec<u8> {
    let mut out = Vec::with_capacity(FILE_HEADER_LEN);
    out.extend_from_slice(&SECTION_MAGIC.to_le_bytes());
    out.extend_from_slice(&(FILE_HEADER_CONTENT as u32).to_le_bytes());
    out.extend_from_slice(FILE_MAGIC);
    out.extend_from_slice(&FORMAT_MAJOR.to_le_bytes());
    out.extend_from_slice(&FORMAT_MINOR.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    let crc = crc32fast::hash(&out[8..]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Check the file header at the start of `data`; returns (major, minor).
pub(crate) fn parse_file_header(data: &[u8]) -> Result<(u16, u16)> {
    // Magic first (a short prefix of a valid header is "truncated", anything else is
    // "not chainrec"), then the version (so a newer major with a different header layout
    // is reported as such), then size and checksum.
    let mut expect = [0u8; 16];
    expect[..4].copy_from_slice(&SECTION_MAGIC.to_le_bytes());
    expect[4..8].copy_from_slice(&(FILE_HEADER_CONTENT as u32).to_le_bytes());
    expect[8..].copy_from_slice(FILE_MAGIC);
    let n = data.len().min(16);
    // Bytes 4..8 (the size) are allowed to differ in a newer major version.
    let magic_ok = data[..n]
        .iter()
        .zip(expect.iter())
        .enumerate()
        .all(|(i, (a, b))| (4..8).contains(&i) || a == b);
    if !magic_ok {
        return Err(FormatError::NotChainrec);
    }
    // Magic (16 bytes incl. the frame size) + major (2) + minor (2).
    if data.len() < 20 {
        return Err(FormatError::Truncated {
            offset: 0,
            needed: FILE_HEADER_LEN as u64,
            available: data.len() as u64,
        });
    }
    let major = le_u16(data, 16);
    let minor = le_u16(data, 18);
    if !(FORMAT_MIN_MAJOR..=FORMAT_MAJOR).contains(&major) {
        return Err(FormatError::UnsupportedVersion {
            found: major,
            min: FORMAT_MIN_MAJOR,
            max: FORMAT_MAJOR,
        });
    }
    if le_u32(data, 4) as usize != FILE_HEADER_CONTENT {
        return Err(FormatError::Corrupt {
            what: "file header",
            offset: 0,
            detail: format!(
                "header size {} (expected {FILE_HEADER_CONTENT})",
                le_u32(data, 4)
            ),
        });
    }
    if data.len() < FILE_HEADER_LEN {
        return Err(FormatError::Truncated {
            offset: 0,
            needed: FILE_HEADER_LEN as u64,
            available: data.len() as u64,
        });
    }
    if crc32fast::hash(&data[8..24]) != le_u32(data, 24) {
        return Err(FormatError::Checksum {
            what: "file header",
            offset: 0,
        });
    }
    Ok((major, minor))
}

/// Trailer bytes pointing at the index section.
pub(crate) fn trailer_bytes(index_offset: u64, index_len: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(TRAILER_LEN);
    out.extend_from_slice(&TRAILER_MAGIC.to_le_bytes());
    out.extend_from_slice(&(TRAILER_CONTENT as u32).to_le_bytes());
    out.extend_from_slice(&index_offset.to_le_bytes());
    out.extend_from_slice(&index_len.to_le_bytes());
    out.extend_from_slice(TRAILER_TAG);
    let crc = crc32fast::hash(&out[8..28]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Parse the trailer at the end of `data`: Ok(None) when there is none, Err(reason) when
/// there is one but it is damaged.
pub(crate) fn parse_trailer(data: &[u8]) -> std::result::Result<Option<(u64, u64)>, String> {
    if data.len() < FILE_HEADER_LEN + TRAILER_LEN {
        return Ok(None);
    }
    let at = data.len() - TRAILER_LEN;
    let t = &data[at..];
    if le_u32(t, 0) != TRAILER_MAGIC
        || le_u32(t, 4) as usize != TRAILER_CONTENT
        || &t[24..28] != TRAILER_TAG
    {
        return Ok(None);
    }
    if crc32fast::hash(&t[8..28]) != le_u32(t, 28) {
        return Err(format!("trailer checksum mismatch at offset {at}"));
    }
    Ok(Some((le_u64(t, 8), le_u64(t, 16))))
}

/// What is at `offset` of a file.
pub(crate) enum Frame<'a> {
    /// A section: its header and payload bytes (checksummed).
    Section(SectionHeader, &'a [u8]),
    /// The trailer.
    Trailer,
    /// A skippable frame that is neither (written by a newer version): skip `len` bytes.
    Foreign(u64),
}

/// Read the frame at `offset`. Errors are typed; a frame that does not fit in the file is
/// [`FormatError::Truncated`].
pub(crate) fn read_frame(data: &[u8], offset: u64) -> Result<Frame<'_>> {
    let len = data.len() as u64;
    let avail = len.saturating_sub(offset);
    if avail < 8 {
        return Err(FormatError::Truncated {
            offset,
            needed: 8,
            available: avail,
        });
    }
    let at = offset as usize;
    let magic = le_u32(data, at);
    let size = le_u32(data, at + 4) as u64;
    if magic & SKIPPABLE_MASK != SKIPPABLE_BASE {
        return Err(FormatError::Corrupt {
            what: "section",
            offset,
            detail: format!("bad frame magic {magic:#010x}"),
        });
    }
    if avail < 8 + size {
        return Err(FormatError::Truncated {
            offset,
            needed: 8 + size,
            available: avail,
        });
    }
    if magic == TRAILER_MAGIC && size as usize == TRAILER_CONTENT {
        return Ok(Frame::Trailer);
    }
    if magic != SECTION_MAGIC || size as usize != SECTION_HEADER_CONTENT {
        return Ok(Frame::Foreign(8 + size));
    }
    let h = &data[at + 8..at + SECTION_HEADER_LEN];
    if crc32fast::hash(&h[..44]) != le_u32(h, 44) {
        return Err(FormatError::Checksum {
            what: "section header",
            offset,
        });
    }
    let header = SectionHeader {
        kind: h[0],
        flags: h[1],
        events: le_u32(h, 4),
        payload_len: le_u64(h, 8),
        raw_len: le_u64(h, 16),
        first_ts: le_u64(h, 24),
        last_ts: le_u64(h, 32),
        payload_crc: le_u32(h, 40),
    };
    let pavail = avail - SECTION_HEADER_LEN as u64;
    if header.payload_len > pavail {
        return Err(FormatError::Truncated {
            offset,
            needed: header.section_len(),
            available: avail,
        });
    }
    let pstart = at + SECTION_HEADER_LEN;
    let payload = &data[pstart..pstart + header.payload_len as usize];
    Ok(Frame::Section(header, payload))
}

/// Check a section's payload checksum.
pub(crate) fn check_payload(header: &SectionHeader, payload: &[u8], offset: u64) -> Result<()> {
    if crc32fast::hash(payload) != header.payload_crc {
        return Err(FormatError::Checksum {
            what: kind_name(header.kind),
            offset,
        });
    }
    Ok(())
}

/// Decompress a non-chunk payload; output growth is bounded by the data actually
/// decompressed and by `raw_len` (itself capped), never preallocated from the header.
pub(crate) fn decompress_section(
    header: &SectionHeader,
    payload: &[u8],
    offset: u64,
) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    SectionDecompressor::new().decompress(header, payload, offset, &mut out)?;
    Ok(out)
}

/// Decompresses non-chunk sections one after another with one zstd context: a trace
/// holds a table section per recorder flush (92 in a 60 s recording of fork churn), and a
/// context of its own for each, freed at once, was two in three of `chains`' mmap calls
/// at open.
pub(crate) struct SectionDecompressor {
    ctx: zstd::zstd_safe::DCtx<'static>,
}

impl SectionDecompressor {
    /// A decompressor. Like the streaming decoder it replaces, it aborts only when zstd
    /// cannot allocate its context (out of memory), never on a file's contents.
    pub(crate) fn new() -> Self {
        SectionDecompressor {
            ctx: zstd::zstd_safe::DCtx::create(),
        }
    }

    /// Decompress the section at `offset` into `out` (replacing what it held), as
    /// [`decompress_section`] does.
    pub(crate) fn decompress(
        &mut self,
        header: &SectionHeader,
        payload: &[u8],
        offset: u64,
        out: &mut Vec<u8>,
    ) -> Result<()> {
        use std::io::Read;
        let what = kind_name(header.kind);
        if header.raw_len > MAX_SECTION_RAW {
            return Err(FormatError::Corrupt {
                what,
                offset,
                detail: format!("payload size {} exceeds limit", header.raw_len),
            });
        }
        let corrupt = |detail: String| FormatError::Corrupt {
            what,
            offset,
            detail,
        };
        let dec = zstd::stream::read::Decoder::with_context(payload, &mut self.ctx);
        out.clear();
        out.reserve(
            (header.raw_len as usize)
                .min(payload.len().saturating_mul(4))
                .min(1 << 20),
        );
        dec.take(header.raw_len + 1)
            .read_to_end(out)
            .map_err(|e| corrupt(format!("zstd: {e}")))?;
        if out.len() as u64 != header.raw_len {
            return Err(corrupt(format!(
                "payload decompressed to {} bytes, header says {}",
                out.len(),
                header.raw_len
            )));
        }
        Ok(())
    }
}

/// Compress `raw` as one zstd frame with content checksum.
pub(crate) fn compress(
    cctx: &mut zstd::bulk::Compressor<'static>,
    raw: &[u8],
) -> std::io::Result<Vec<u8>> {
    cctx.compress(raw)
}

/// Build a whole section (header + payload frame) from a raw payload.
pub(crate) fn build_section(
    cctx: &mut zstd::bulk::Compressor<'static>,
    kind: u8,
    events: u32,
    first_ts: u64,
    last_ts: u64,
    raw: &[u8],
) -> std::io::Result<Vec<u8>> {
    let payload = compress(cctx, raw)?;
    let header = SectionHeader {
        kind,
        flags: 0,
        events,
        payload_len: payload.len() as u64,
        raw_len: raw.len() as u64,
        first_ts,
        last_ts,
        payload_crc: crc32fast::hash(&payload),
    };
    let mut out = Vec::with_capacity(SECTION_HEADER_LEN + payload.len());
    header.write(&mut out);
    out.extend_from_slice(&payload);
    Ok(out)
}

/// New compressor with the options every section uses.
pub(crate) fn new_compressor(level: i32) -> std::io::Result<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::new(level)?;
    c.include_checksum(true)?;
    c.include_contentsize(true)?;
    Ok(c)
}

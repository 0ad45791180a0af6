//! Jitdump files (`jit-PID.dump`): the binary format perf defines for JITs (V8 with
//! `--perf-prof`, the JVM with perf's `libperf-jvmti.so` agent). The JIT maps the file
//! executable so that a profiler finds it among the process's mappings; each
//! `JIT_CODE_LOAD` record names a code range, `JIT_CODE_MOVE` moves one. Read here into a
//! [`PerfMap`] (later records win, as in perf map files).
//!
//! Layout (tools/perf/Documentation/jitdump-specification.txt): a header (magic
//! `JiTD` = 0x4A695444 in the writer's byte order, version, header size, ...), then
//! records of `{ id: u32, total_size: u32, timestamp: u64 }` and a body:
//! `JIT_CODE_LOAD` (0) `{ pid: u32, tid: u32, vma: u64, code_addr: u64, code_size: u64,
//! code_index: u64, name: NUL-terminated, code bytes }`; `JIT_CODE_MOVE` (1) `{ pid, tid,
//! vma, old_code_addr, new_code_addr, code_size, code_index }`; other records are skipped.

use crate::PerfMap;
use std::path::{Path, PathBuf};

const MAGIC: u32 = 0x4A69_5444;
const CODE_LOAD: u32 = 0;
const CODE_MOVE: u32 = 1;
/// Record header: id, total size, timestamp.
const RECORD_HEADER: usize = 16;

/// Little reader over the file's bytes in the writer's byte order.
struct Bytes<'a> {
    b: &'a [u8],
    swap: bool,
}

impl Bytes<'_> {
    fn u32(&self, at: usize) -> Option<u32> {
        let v = u32::from_le_bytes(self.b.get(at..at + 4)?.try_into().ok()?);
        Some(if self.swap { v.swap_bytes() } else { v })
    }

    fn u64(&self, at: usize) -> Option<u64> {
        let v = u64::from_le_bytes(self.b.get(at..at + 8)?.try_into().ok()?);
        Some(if self.swap { v.swap_bytes() } else { v })
    }
}

/// Parse a jitdump file's bytes: the code ranges it names (None when it is not a jitdump
/// file). A truncated last record (the JIT still writing) ends the parse.
pub fn parse(b: &[u8]) -> Option<PerfMap> {
    let magic = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
    let swap = match magic {
        MAGIC => false,
        m if m.swap_bytes() == MAGIC => true,
        _ => return None,
    };
    let r = Bytes { b, swap };
    let header_size = r.u32(8)? as usize;
    let mut syms: Vec<(u64, u64, String)> = Vec::new();
    let mut at = header_size;
    while let (Some(id), Some(size)) = (r.u32(at), r.u32(at + 4)) {
        let size = size as usize;
        if size < RECORD_HEADER || at + size > b.len() {
            break;
        }
        let body = at + RECORD_HEADER;
        match id {
            CODE_LOAD => {
                // pid, tid (4 + 4), vma, code_addr, code_size, code_index (4 x 8), name.
                let (Some(addr), Some(len)) = (r.u64(body + 16), r.u64(body + 24)) else {
                    break;
                };
                let name_at = body + 40;
                let rest = &b[name_at.min(at + size)..at + size];
                let end = rest.iter().position(|&c| c == 0).unwrap_or(rest.len());
                let name = String::from_utf8_lossy(&rest[..end]).into_owned();
                if !name.is_empty() {
                    syms.push((addr, len, name));
                }
            }
            CODE_MOVE => {
                let (Some(old), Some(new), Some(len)) =
                    (r.u64(body + 16), r.u64(body + 24), r.u64(body + 32))
                else {
                    break;
                };
                if let Some(name) = syms.iter().rev().find(|s| s.0 == old).map(|s| s.2.clone()) {
                    syms.push((new, len, name));
                }
            }
            _ => {}
        }
        at += size;
    }
    Some(PerfMap::from_symbols(syms))
}

/// Read and parse `path` (None when missing, unreadable or not a jitdump file).
pub fn read(path: &Path) -> Option<PerfMap> {
    std::fs::read(path).ok().and_then(|b| parse(&b))
}

/// The jitdump file of live process `tgid`: the file named `jit-TGID.dump` that it maps
/// (the JIT maps it for profilers to find; V8 writes it in its working directory, the JVM
/// agent under `~/.debug/jit/`), read through `/proc/TGID/root` so that a process in a
/// container is found too.
pub fn find(tgid: u32) -> Option<PathBuf> {
    let maps = std::fs::read_to_string(format!("/proc/{tgid}/maps")).ok()?;
    let want = format!("/jit-{tgid}.dump");
    let path = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.ends_with(&want))?;
    Some(PathBuf::from(format!("/proc/{tgid}/root{path}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: u32, body: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&id.to_le_bytes());
        r.extend_from_slice(&((RECORD_HEADER + body.len()) as u32).to_le_bytes());
        r.extend_from_slice(&7u64.to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    fn load(addr: u64, size: u64, name: &str) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&42u32.to_le_bytes()); // pid
        b.extend_from_slice(&43u32.to_le_bytes()); // tid
        for v in [addr, addr, size, 1] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(name.as_bytes());
        b.push(0);
        b.extend_from_slice(&[0xcc; 5]); // the code
        record(CODE_LOAD, &b)
    }

    fn file(records: &[Vec<u8>]) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&MAGIC.to_le_bytes());
        f.extend_from_slice(&1u32.to_le_bytes()); // version
        f.extend_from_slice(&40u32.to_le_bytes()); // header size
        f.resize(40, 0);
        for r in records {
            f.extend_from_slice(r);
        }
        f
    }

    #[test]
    fn code_loads_and_moves_name_their_ranges() {
        let mut mv = Vec::new();
        mv.extend_from_slice(&42u32.to_le_bytes());
        mv.extend_from_slice(&43u32.to_le_bytes());
        for v in [0x1000u64, 0x1000, 0x9000, 0x40, 2] {
            mv.extend_from_slice(&v.to_le_bytes());
        }
        let f = file(&[
            load(0x1000, 0x40, "LazyCompile:*hot /tmp/a.js:1"),
            record(2, &[0u8; 24]), // debug info: skipped
            load(0x2000, 0x10, "Builtin:Add"),
            record(CODE_MOVE, &mv),
        ]);
        let m = parse(&f).unwrap();
        assert_eq!(
            m.lookup(0x1010),
            Some(("LazyCompile:*hot /tmp/a.js:1", 0x10))
        );
        assert_eq!(m.lookup(0x200f), Some(("Builtin:Add", 0xf)));
        assert_eq!(m.lookup(0x9004), Some(("LazyCompile:*hot /tmp/a.js:1", 4)));
        assert_eq!(m.lookup(0x3000), None);
        // Truncated while the JIT writes: the records before the cut are kept.
        let cut = &f[..f.len() - 10];
        assert_eq!(parse(cut).unwrap().len(), 2);
        // Not a jitdump file.
        assert_eq!(parse(b"7f00 10 not a jitdump\n"), None);
    }
}

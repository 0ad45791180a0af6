//! User stacks unwound in the consumer from copies of the stack (`--user-unwind cfi`): the
//! BPF side copies up to 16 KiB of the user stack from the user sp, with ip/sp/bp, wherever
//! a user stack is taken; here framehop walks it with the `.eh_frame`/`.debug_frame` CFI of
//! the objects mapped in the process (frame pointers where an object has no CFI), while the
//! process is alive. Only the resulting frames go into the stack table.
//!
//! Which object (and at which address) holds a pc is asked of an [`AddressSpaces`]: the first
//! implementation, [`ProcMaps`], reads `/proc/PID/maps` (cached per process, re-read on a
//! miss and after an exec); a history of the mappings recorded as they are made can replace
//! it without touching the unwinder.

use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use hashbrown::HashMap;
use std::ops::{Deref, Range};
#[cfg(test)]
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chainrec_format::MappingHistory;

/// An executable mapping of a process: `[start, end)` maps the file from `offset` on, or
/// is anonymous executable memory (JIT code, `anon`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset mapped at `start`.
    pub offset: u64,
    /// The path the process mapped (`[vdso]` for the vDSO).
    pub path: String,
    /// Where this process can open the object (`/proc/PID/map_files/...`), None for the
    /// vDSO.
    pub open: Option<PathBuf>,
    /// Identity of the file (device, inode), so each object is parsed once.
    pub file_id: (u64, u64),
    /// Anonymous executable memory (JIT code: the JVM's code cache, V8, LuaJIT, ...): no
    /// object and no CFI, unwound by frame pointers (`-XX:+PreserveFramePointer`,
    /// `--perf-basic-prof`, ...).
    pub anon: bool,
}

impl Mapping {
    /// An anonymous executable mapping `[start, end)` (path `//anon`, as perf spells it).
    pub fn anonymous(start: u64, end: u64) -> Mapping {
        Mapping {
            start,
            end,
            offset: 0,
            path: "//anon".to_string(),
            open: None,
            file_id: (0, 0),
            anon: true,
        }
    }
}

/// Which executable mapping holds an address of a process at a time.
pub trait AddressSpaces {
    /// The executable mapping holding `addr` in process `tgid` at time `ts_ns` (the trace
    /// clock), or None when no object is mapped there (then unwinding falls back to frame
    /// pointers for that frame).
    fn mapping(&mut self, tgid: u32, ts_ns: u64, addr: u64) -> Option<Mapping>;
    /// `tgid` exec'd (or exited): what is known of its mappings is stale.
    fn forget(&mut self, tgid: u32);
}

/// [`AddressSpaces`] from `/proc/PID/maps`, cached per process and re-read on a miss (at
/// most every 50 ms of trace time per process, so garbage addresses cost no re-read each).
#[derive(Default)]
pub struct ProcMaps {
    procs: HashMap<u32, ProcEntry>,
}

struct ProcEntry {
    maps: Vec<Mapping>,
    read_at: u64,
}

const REREAD_NS: u64 = 50_000_000;

impl ProcMaps {
    fn read(tgid: u32) -> Vec<Mapping> {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{tgid}/maps")) else {
            return Vec::new();
        };
        let mut out: Vec<Mapping> = text
            .lines()
            .filter_map(|l| parse_maps_line(tgid, l))
            .collect();
        out.sort_by_key(|m| m.start);
        out
    }
}

/// One executable line of `/proc/PID/maps`: `start-end perms offset dev inode path`.
fn parse_maps_line(tgid: u32, line: &str) -> Option<Mapping> {
    let mut f = line.split_ascii_whitespace();
    let range = f.next()?;
    let perms = f.next()?;
    let offset = u64::from_str_radix(f.next()?, 16).ok()?;
    let dev = f.next()?;
    let inode: u64 = f.next()?.parse().ok()?;
    let path = f.collect::<Vec<_>>().join(" ");
    if perms.as_bytes().get(2) != Some(&b'x') {
        return None;
    }
    let (s, e) = range.split_once('-')?;
    let (start, end) = (
        u64::from_str_radix(s, 16).ok()?,
        u64::from_str_radix(e, 16).ok()?,
    );
    if path == "[vdso]" {
        return Some(Mapping {
            start,
            end,
            offset: 0,
            path,
            open: None,
            file_id: (0, 0),
            anon: false,
        });
    }
    if inode == 0 || !path.starts_with('/') {
        // Anonymous executable memory (JIT code, `[anon:...]`, `[vsyscall]`): registered
        // without an object, so the walk continues through it by frame pointer.
        return Some(Mapping::anonymous(start, end));
    }
    let (maj, min) = dev.split_once(':')?;
    let dev = (u64::from_str_radix(maj, 16).ok()? << 32) | u64::from_str_radix(min, 16).ok()?;
    Some(Mapping {
        start,
        end,
        offset,
        open: Some(PathBuf::from(format!("/proc/{tgid}/map_files/{s}-{e}"))),
        path,
        file_id: (dev, inode),
        anon: false,
    })
}

/// The mapping of `addr` in `tgid` at `ts` from the recording's mapping history (perf
/// MMAP2 records and `/proc` scans, kept after the process exited), opened by its path when
/// the file there is still the one that was mapped (same device and inode).
fn mapping_from_history(h: &MappingHistory, tgid: u32, ts: u64, addr: u64) -> Option<Mapping> {
    use std::os::unix::fs::MetadataExt;
    let e = h.lookup(tgid, addr, ts)?;
    if e.path == "[vdso]" {
        return Some(Mapping {
            start: e.start,
            end: e.end,
            offset: 0,
            path: e.path.clone(),
            open: None,
            file_id: (0, 0),
            anon: false,
        });
    }
    if e.is_anon() || !e.path.starts_with('/') {
        // Anonymous executable memory (JIT code; perf spells it `//anon`): frame pointers.
        return Some(Mapping::anonymous(e.start, e.end));
    }
    let md = std::fs::metadata(&e.path).ok()?;
    if e.inode != 0 && md.ino() != e.inode {
        return None; // replaced since (an upgrade): its CFI is not the mapped code's
    }
    // The device as /proc/PID/maps spells it (major << 32 | minor), so an object opened
    // here and through /proc is parsed once.
    let (major, minor) = dev_major_minor(md.dev());
    Some(Mapping {
        start: e.start,
        end: e.end,
        offset: e.pgoff,
        path: e.path.clone(),
        open: Some(PathBuf::from(&e.path)),
        file_id: (major << 32 | minor, md.ino()),
        anon: false,
    })
}

/// glibc's `major()` and `minor()` of a `dev_t`.
fn dev_major_minor(dev: u64) -> (u64, u64) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major, minor)
}

fn find(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    let i = maps.partition_point(|m| m.start <= addr);
    maps[..i].last().filter(|m| addr < m.end)
}

impl AddressSpaces for ProcMaps {
    fn mapping(&mut self, tgid: u32, ts_ns: u64, addr: u64) -> Option<Mapping> {
        if let Some(p) = self.procs.get(&tgid) {
            if let Some(m) = find(&p.maps, addr) {
                return Some(m.clone());
            }
            if ts_ns.saturating_sub(p.read_at) < REREAD_NS {
                return None;
            }
        }
        let maps = Self::read(tgid);
        let found = find(&maps, addr).cloned();
        if !maps.is_empty() {
            self.procs.insert(
                tgid,
                ProcEntry {
                    maps,
                    read_at: ts_ns,
                },
            );
        }
        found
    }

    fn forget(&mut self, tgid: u32) {
        self.procs.remove(&tgid);
    }
}

/// Bytes of an object's section, shared (the object file is mapped once).
#[derive(Clone)]
pub struct SectionBytes {
    data: Arc<ObjectData>,
    range: Range<usize>,
}

enum ObjectData {
    File(memmap2::Mmap),
    Bytes(Vec<u8>),
}

impl Deref for ObjectData {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ObjectData::File(m) => m,
            ObjectData::Bytes(b) => b,
        }
    }
}

impl Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data[self.range.clone()]
    }
}

/// What the unwinder needs of one ELF object: its unwind sections and load segments.
struct Object {
    data: Arc<ObjectData>,
    /// (vaddr, file offset, file size, executable) of each PT_LOAD.
    loads: Vec<(u64, u64, u64, bool)>,
    sections: HashMap<&'static str, (u64, Range<usize>)>,
    /// The object has `.eh_frame` or `.debug_frame`.
    has_cfi: bool,
    /// Address ranges (object addresses) of functions that begin a thread with no caller
    /// above them but whose CFI does not say so: Go's `runtime.mstart` (every M but the
    /// first starts there, on a stack the runtime allocated) and `runtime.rt0_go`. From
    /// `.symtab` (a stripped binary has none: its stacks keep their label).
    entries: Vec<Range<u64>>,
    /// CPython's `_PyRuntime` and `_PyEval_EvalFrameDefault` (object addresses), when the
    /// object is an interpreter (`python3.11`, `libpython3.11.so`).
    python: Option<(u64, Range<u64>)>,
    /// HotSpot's VMStructs exports ([`crate::java::EXPORTS`], object addresses), when the
    /// object is a JVM (`libjvm.so`).
    jvm: Option<[u64; crate::java::EXPORTS.len()]>,
}

/// [`Object::entries`]: Go's thread entry functions, by their symbol names.
const THREAD_ENTRIES: [&[u8]; 4] = [
    b"runtime.mstart.abi0",
    b"runtime.mstart",
    b"runtime.rt0_go.abi0",
    b"runtime.rt0_go",
];

const WANTED: [&str; 5] = [
    ".text",
    ".eh_frame",
    ".eh_frame_hdr",
    ".debug_frame",
    ".got",
];

/// What a symbol table tells the unwinder: [`THREAD_ENTRIES`] functions and CPython's
/// interpreter symbols (object addresses).
#[derive(Default)]
struct SymbolFinds {
    entries: Vec<Range<u64>>,
    /// `_PyRuntime` (the runtime state) and `_PyEval_EvalFrameDefault` (the function that
    /// runs Python frames).
    py_runtime: Option<u64>,
    py_eval: Option<Range<u64>>,
    /// HotSpot's VMStructs exports, in [`crate::java::EXPORTS`] order.
    jvm: [Option<u64>; crate::java::EXPORTS.len()],
}

/// Scan a symbol table (section header at `symtab`, its string table's header at
/// `strtab`) into `finds`.
fn scan_symbols(b: &[u8], symtab: usize, strtab: usize, finds: &mut SymbolFinds) -> Option<()> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
    let (off, size) = (
        u64_at(symtab + 0x18)? as usize,
        u64_at(symtab + 0x20)? as usize,
    );
    let str_off = u64_at(strtab + 0x18)? as usize;
    for sym in (off..off.checked_add(size)?).step_by(24) {
        // Defined functions (STT_FUNC) and objects (STT_OBJECT) only.
        let kind = *b.get(sym + 4)? & 0xf;
        if !(kind == 1 || kind == 2) || u16_at(sym + 6)? == 0 {
            continue;
        }
        let name = b.get(str_off.checked_add(u32_at(sym)? as usize)?..)?;
        let name = &name[..name.iter().position(|&c| c == 0)?];
        let (value, len) = (u64_at(sym + 8)?, u64_at(sym + 16)?);
        if kind == 2 && THREAD_ENTRIES.contains(&name) {
            finds.entries.push(value..value + len.max(1));
        } else if kind == 2 && name == b"_PyEval_EvalFrameDefault" {
            finds.py_eval = Some(value..value + len.max(1));
        } else if kind == 1 && name == b"_PyRuntime" {
            finds.py_runtime = Some(value);
        } else if kind == 1 && name.starts_with(b"gHotSpotVM") {
            if let Some(i) = crate::java::EXPORTS.iter().position(|&e| e == name) {
                finds.jvm[i] = Some(value);
            }
        }
    }
    Some(())
}

impl Object {
    fn parse(data: Arc<ObjectData>) -> Option<Object> {
        let b: &[u8] = &data;
        let u16_at = |o: usize| Some(u16::from_le_bytes(b.get(o..o + 2)?.try_into().ok()?));
        let u32_at = |o: usize| Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?));
        let u64_at = |o: usize| Some(u64::from_le_bytes(b.get(o..o + 8)?.try_into().ok()?));
        // ELF64, little endian only (x86_64).
        if b.get(0..4)? != b"\x7fELF" || *b.get(4)? != 2 || *b.get(5)? != 1 {
            return None;
        }
        let phoff = u64_at(0x20)? as usize;
        let shoff = u64_at(0x28)? as usize;
        let phentsize = u16_at(0x36)? as usize;
        let phnum = u16_at(0x38)? as usize;
        let shentsize = u16_at(0x3a)? as usize;
        let shnum = u16_at(0x3c)? as usize;
        let shstrndx = u16_at(0x3e)? as usize;
        let mut loads = Vec::new();
        for i in 0..phnum {
            let p = phoff.checked_add(i.checked_mul(phentsize)?)?;
            if u32_at(p)? == 1 {
                let exec = u32_at(p + 4)? & 1 != 0;
                loads.push((
                    u64_at(p + 0x10)?,
                    u64_at(p + 0x08)?,
                    u64_at(p + 0x20)?,
                    exec,
                ));
            }
        }
        let mut sections = HashMap::new();
        let mut finds = SymbolFinds::default();
        if shoff != 0 && shentsize >= 0x40 {
            let sh = |i: usize| shoff.checked_add(i.checked_mul(shentsize)?);
            let strtab_off = u64_at(sh(shstrndx)? + 0x18)? as usize;
            for i in 0..shnum {
                let s = sh(i)?;
                let name_at = strtab_off.checked_add(u32_at(s)? as usize)?;
                let name_bytes = b.get(name_at..)?;
                let name = &name_bytes[..name_bytes.iter().position(|&c| c == 0)?];
                let sh_type = u32_at(s + 4)?;
                // .symtab and .dynsym (a symbol found in both is the same address).
                if sh_type == 2 || sh_type == 11 {
                    let strtab = sh(u32_at(s + 0x28)? as usize)?;
                    let before = finds.entries.len();
                    if scan_symbols(b, s, strtab, &mut finds).is_none() {
                        finds.entries.truncate(before);
                    }
                    continue;
                }
                let Some(wanted) = WANTED.iter().find(|w| w.as_bytes() == name) else {
                    continue;
                };
                let addr = u64_at(s + 0x10)?;
                let off = u64_at(s + 0x18)? as usize;
                let size = u64_at(s + 0x20)? as usize;
                let range = if sh_type == 8 {
                    0..0 // NOBITS: address only
                } else {
                    off..off.checked_add(size).filter(|&e| e <= b.len())?
                };
                sections.insert(*wanted, (addr, range));
            }
        }
        let has_cfi = sections.contains_key(".eh_frame") || sections.contains_key(".debug_frame");
        finds.entries.sort_unstable_by_key(|r| (r.start, r.end));
        finds.entries.dedup();
        Some(Object {
            data,
            loads,
            sections,
            has_cfi,
            entries: finds.entries,
            python: finds.py_runtime.zip(finds.py_eval),
            jvm: finds
                .jvm
                .iter()
                .copied()
                .collect::<Option<Vec<u64>>>()
                .and_then(|v| v.try_into().ok()),
        })
    }

    /// The load bias of an executable mapping of this object: `start` maps file offset
    /// `offset` (page-aligned: linkers such as lld do not page-align a segment's file
    /// offset, only keep it congruent to its address, so the mapping may start before the
    /// segment, inside the previous one's pages).
    fn bias(&self, start: u64, offset: u64) -> Option<u64> {
        let covers = |&&(_, foff, fsize, _): &&(u64, u64, u64, bool)| {
            offset >= foff & !0xfff && offset < foff + fsize.max(1)
        };
        let &(vaddr, foff, _, _) = self
            .loads
            .iter()
            .filter(|l| l.3)
            .find(covers)
            .or_else(|| self.loads.iter().find(covers))
            .or_else(|| self.loads.first())?;
        Some(start.wrapping_sub(vaddr.wrapping_add(offset.wrapping_sub(foff))))
    }

    fn section_info(&self) -> ExplicitModuleSectionInfo<SectionBytes> {
        let bytes = |n: &str| {
            self.sections
                .get(n)
                .filter(|(_, r)| !r.is_empty())
                .map(|(_, r)| SectionBytes {
                    data: self.data.clone(),
                    range: r.clone(),
                })
        };
        let svma = |n: &str| {
            self.sections
                .get(n)
                .map(|(a, r)| *a..*a + (r.end - r.start) as u64)
        };
        ExplicitModuleSectionInfo {
            base_svma: 0,
            text_svma: svma(".text"),
            text: bytes(".text"),
            got_svma: self.sections.get(".got").map(|(a, _)| *a..*a + 8),
            eh_frame_svma: svma(".eh_frame"),
            eh_frame: bytes(".eh_frame"),
            eh_frame_hdr_svma: svma(".eh_frame_hdr"),
            eh_frame_hdr: bytes(".eh_frame_hdr"),
            debug_frame: bytes(".debug_frame"),
            stubs_svma: None,
            stub_helper_svma: None,
            unwind_info: None,
            text_segment_svma: None,
            text_segment: None,
        }
    }
}

/// How an unwound stack ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnwindEnd {
    /// At the thread's entry (the CFI marks the return address undefined: `_start`,
    /// `clone3`'s child), or at a null return address.
    Complete,
    /// Not finished: why, as the label frame that ends the stack says.
    Incomplete(IncompleteReason),
}

/// Why an unwound stack stops short (each counted in the summary and metadata).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IncompleteReason {
    /// The next frame lies above the copied stack bytes.
    CopyTooShort,
    /// A return address in no mapped object (after a frame without CFI, or garbage).
    BadReturnAddress,
    /// The frame's object has no CFI, and frame pointers led nowhere.
    NoCfi,
    /// The process was gone before its stack could be unwound (its objects unknown).
    ProcessGone,
    /// The walk did not advance, or went backwards.
    NoProgress,
    /// More frames than a stack may hold.
    TooDeep,
}

impl IncompleteReason {
    /// All reasons, in counter order.
    pub const ALL: [IncompleteReason; 6] = [
        IncompleteReason::CopyTooShort,
        IncompleteReason::BadReturnAddress,
        IncompleteReason::NoCfi,
        IncompleteReason::ProcessGone,
        IncompleteReason::NoProgress,
        IncompleteReason::TooDeep,
    ];

    /// Short key (metadata, summary).
    pub fn key(self) -> &'static str {
        match self {
            IncompleteReason::CopyTooShort => "stack_copy_short",
            IncompleteReason::BadReturnAddress => "bad_return_address",
            IncompleteReason::NoCfi => "no_cfi",
            IncompleteReason::ProcessGone => "process_gone",
            IncompleteReason::NoProgress => "no_progress",
            IncompleteReason::TooDeep => "too_deep",
        }
    }
}

/// Counts of unwound user stacks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindCounts {
    /// Stacks unwound from a copy.
    pub unwound: u64,
    /// ... that reached the thread's entry.
    pub complete: u64,
    /// ... that stopped short, by reason ([`IncompleteReason::ALL`] order).
    pub incomplete: [u64; 6],
    /// Objects parsed for their CFI, and objects that could not be opened or parsed.
    pub objects: u64,
    /// See [`UnwindCounts::objects`].
    pub objects_failed: u64,
    /// Bytes of unwind sections (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`) of the
    /// objects parsed (mapped, shared across processes).
    pub cfi_bytes: u64,
    /// Mappings taken from the recording's mapping history because the process's
    /// `/proc/PID/maps` could not tell (it had exited before its stacks were unwound).
    pub from_history: u64,
    /// Copies the recorder did not take because the ring buffer was over half full (those
    /// stacks keep their frame-pointer walk): counted in BPF, set when the recording ends.
    pub copies_skipped_busy: u64,
    /// Anonymous executable mappings (JIT code) registered: walked by frame pointer.
    pub anon_mappings: u64,
    /// Return addresses found by frame pointer in code without CFI (JIT code, objects
    /// without `.eh_frame`/`.debug_frame`).
    pub fp_frames: u64,
    /// Unfinished unwinds whose stack is the BPF frame-pointer walk of the same record
    /// instead, because that walk got further (more frames, all in mapped code).
    pub fp_walk_kept: u64,
    /// JIT frames named from the process's perf map (`/tmp/perf-PID.map`) read again at
    /// the process's exit (a map written at exit, `-XX:+DumpPerfMapAtExit`, or after the
    /// frames were first symbolized).
    pub jit_named_at_exit: u64,
    /// Unwinds that read a window copied apart (a frame larger than the copy, bridged by
    /// what an earlier unwind of the thread learned), and those of them that reached the
    /// thread's entry.
    pub window_read: u64,
    /// See [`UnwindCounts::window_read`].
    pub window_complete: u64,
    /// Copies too short whose thread was still blocked where the copy was taken, so the
    /// rest of its stack was read live ([`LiveStack`]), and the unwinds that kept it.
    pub live_tried: u64,
    /// See [`UnwindCounts::live_tried`].
    pub live_used: u64,
    /// CPython processes whose threads' Python frames are read, and interpreters of a
    /// version this recorder cannot read (their stacks keep `_PyEval_EvalFrameDefault`).
    pub python_procs: u64,
    /// See [`UnwindCounts::python_procs`].
    pub python_unsupported: u64,
    /// Python frames put in place of `_PyEval_EvalFrameDefault` frames, and stacks of
    /// CPython processes with such frames that carried no Python frames (taken before the
    /// process was found, or its thread state not found).
    pub python_frames: u64,
    /// See [`UnwindCounts::python_frames`].
    pub python_missing: u64,
    /// JVM processes (`libjvm.so` with VMStructs) whose layout was read (their
    /// interpreted frames are named), and those whose VMStructs lack what this recorder
    /// reads (their frames stay `Interpreter`).
    pub java_procs: u64,
    /// See [`UnwindCounts::java_procs`].
    pub java_unsupported: u64,
    /// Why the first JVM not supported was not (`not supported: VMStructs lack ...`).
    pub java_unsupported_why: Option<String>,
    /// Interpreted Java frames named from their `Method*`, and those left `Interpreter`
    /// (the word not in the copy, or not a method that could be read).
    pub java_frames: u64,
    /// See [`UnwindCounts::java_frames`].
    pub java_missing: u64,
}

impl std::fmt::Display for UnwindCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short: u64 = self.incomplete.iter().sum();
        write!(
            f,
            "{} unwound from stack copies, {} reached the thread's entry, {} unfinished",
            self.unwound, self.complete, short
        )?;
        if short > 0 {
            let parts: Vec<String> = IncompleteReason::ALL
                .iter()
                .zip(self.incomplete)
                .filter(|(_, n)| *n > 0)
                .map(|(r, n)| format!("{} {n}", r.key()))
                .collect();
            write!(f, " ({})", parts.join(", "))?;
        }
        write!(
            f,
            "; {} objects parsed ({} KiB of CFI), {} could not be read",
            self.objects,
            self.cfi_bytes / 1024,
            self.objects_failed
        )?;
        if self.copies_skipped_busy > 0 {
            write!(
                f,
                "; {} copies not taken while the ring buffer was over half full (frame-pointer walks kept)",
                self.copies_skipped_busy
            )?;
        }
        if self.from_history > 0 {
            write!(
                f,
                "; {} mappings of exited processes from the mapping history",
                self.from_history
            )?;
        }
        if self.anon_mappings > 0 || self.fp_frames > 0 {
            write!(
                f,
                "; {} frames by frame pointer in code without CFI ({} anonymous executable mappings)",
                self.fp_frames, self.anon_mappings
            )?;
        }
        if self.fp_walk_kept > 0 {
            write!(
                f,
                "; {} unfinished unwinds replaced by the longer frame-pointer walk",
                self.fp_walk_kept
            )?;
        }
        if self.window_read > 0 {
            write!(
                f,
                "; {} read windows copied farther up the stack ({} of them reached the thread's entry)",
                self.window_read, self.window_complete
            )?;
        }
        if self.live_tried > 0 {
            write!(
                f,
                "; {} copies too short finished from the live stack of a thread still in those frames (of {} tried)",
                self.live_used, self.live_tried
            )?;
        }
        if self.python_procs + self.python_unsupported > 0 {
            write!(
                f,
                "; Python: {} processes read, {} of versions not supported, {} Python frames, {} stacks without them",
                self.python_procs, self.python_unsupported, self.python_frames, self.python_missing
            )?;
        }
        if self.java_procs + self.java_unsupported + self.java_frames + self.java_missing > 0 {
            write!(
                f,
                "; Java: {} processes, {} not supported{}, {} interpreted frames named, {} not named",
                self.java_procs,
                self.java_unsupported,
                self.java_unsupported_why
                    .as_ref()
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default(),
                self.java_frames,
                self.java_missing
            )?;
        }
        if self.jit_named_at_exit > 0 {
            write!(
                f,
                "; {} JIT frames named from perf maps at process exit",
                self.jit_named_at_exit
            )?;
        }
        Ok(())
    }
}

/// Maximal frames of an unwound stack (the frame-pointer walk's 127).
pub const MAX_UNWIND_FRAMES: usize = 127;

/// The user stack copy of one record.
#[derive(Clone, Copy, Debug)]
pub struct StackCopy<'a> {
    /// User registers at the point the stack was taken.
    pub ip: u64,
    /// See [`StackCopy::ip`].
    pub sp: u64,
    /// See [`StackCopy::ip`].
    pub bp: u64,
    /// Stack bytes from `sp` up.
    pub bytes: &'a [u8],
    /// Windows farther up the stack, copied apart (address, bytes; unused ones empty):
    /// where an earlier unwind of the thread found the copy too short (a frame larger
    /// than the copy).
    pub windows: [(u64, &'a [u8]); MAX_WINDOWS],
    /// The thread's Python frames (a `UCOPY_PY_FRAMES` window; empty: none).
    pub python: &'a [u8],
}

/// The live stack of a thread still blocked where its stack copy was taken: the bytes a
/// copy lacked (a frame larger than the copy, a stack deeper than it) read from
/// `/proc/PID/mem`, as a debugger reads them. "Where the copy was taken" is checked, not
/// assumed: `/proc/PID/task/TID/syscall` must show the thread blocked in a system call at
/// the copy's sp and ip before the reads, and after the walk every word it used must read
/// the same again ([`LiveStack::still_there`]): a thread that ran since and left those
/// frames has overwritten them. (A thread in a loop around the same read, blocking for
/// microseconds at a time, is rarely found blocked twice.)
pub struct LiveStack {
    tid: u32,
    tgid: u32,
    sp: u64,
    mem: std::fs::File,
    /// Pages read (by page address; None: unreadable), and the words served (address,
    /// value).
    pages: HashMap<u64, Option<Box<[u8; 4096]>>>,
    served: Vec<(u64, u64)>,
}

/// The consumer's time for waiting on running threads to block again, per half second of
/// recording (its counter period): 2 %.
pub const LIVE_BUDGET: Duration = Duration::from_millis(10);

/// Pages a [`LiveStack`] reads for one stack at most (256 KiB).
const LIVE_MAX_PAGES: usize = 64;

impl LiveStack {
    /// The live stack of `tid`, if it is blocked in a system call at `sp` and `ip`. A
    /// thread running now (a loop around the same read, between two of them) is asked
    /// again a few times, 250 µs apart, out of `budget` (the consumer's time for this).
    pub fn attach(tgid: u32, tid: u32, sp: u64, ip: u64, budget: &mut Duration) -> Option<Self> {
        const PAUSE: Duration = Duration::from_micros(250);
        let mut tries = 0;
        loop {
            match syscall_state(tgid, tid) {
                Some(SyscallState::Blocked { sp: s, ip: i }) if (s, i) == (sp, ip) => break,
                Some(SyscallState::Running) if tries < 4 && *budget >= PAUSE => {
                    std::thread::sleep(PAUSE);
                    *budget -= PAUSE;
                    tries += 1;
                }
                _ => return None,
            }
        }
        let mem = std::fs::File::open(format!("/proc/{tgid}/task/{tid}/mem")).ok()?;
        Some(LiveStack {
            tid,
            tgid,
            sp,
            mem,
            pages: HashMap::new(),
            served: Vec::new(),
        })
    }

    /// The u64 at `addr` of the live stack (above the copy's sp only).
    fn read_u64(&mut self, addr: u64) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        if addr < self.sp || addr % 8 != 0 {
            return None;
        }
        let page = addr & !4095;
        if !self.pages.contains_key(&page) {
            if self.pages.len() >= LIVE_MAX_PAGES {
                return None;
            }
            let mut buf = Box::new([0u8; 4096]);
            let ok = self.mem.read_exact_at(&mut buf[..], page).is_ok();
            self.pages.insert(page, ok.then_some(buf));
        }
        let p = self.pages.get(&page)?.as_ref()?;
        let off = (addr - page) as usize;
        let v = u64::from_le_bytes(p[off..off + 8].try_into().ok()?);
        self.served.push((addr, v));
        Some(v)
    }

    /// Whether every word the walk used still reads the same (the thread has not left
    /// the frames they belong to), and the thread still exists.
    pub fn still_there(&self) -> bool {
        use std::os::unix::fs::FileExt;
        syscall_state(self.tgid, self.tid).is_some()
            && self.served.iter().all(|&(addr, v)| {
                let mut b = [0u8; 8];
                self.mem.read_exact_at(&mut b, addr).is_ok() && u64::from_le_bytes(b) == v
            })
    }

    /// The addresses read, sorted.
    fn served(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.served.iter().map(|&(a, _)| a).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// What `/proc/TGID/task/TID/syscall` says of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SyscallState {
    Running,
    /// Blocked (in a system call, or -1 for none) with these user registers.
    Blocked {
        sp: u64,
        ip: u64,
    },
}

/// The thread's state from `/proc/TGID/task/TID/syscall` (None: gone, or unreadable).
fn syscall_state(tgid: u32, tid: u32) -> Option<SyscallState> {
    let text = std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/syscall")).ok()?;
    parse_syscall_state(&text)
}

/// `running`, or `NR args... sp pc` (hex with 0x), or `-1 sp pc`.
fn parse_syscall_state(text: &str) -> Option<SyscallState> {
    if text.trim() == "running" {
        return Some(SyscallState::Running);
    }
    let mut fields = text.split_ascii_whitespace().rev();
    let mut hex = || {
        fields
            .next()
            .and_then(|f| f.strip_prefix("0x"))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
    };
    let (ip, sp) = (hex()?, hex()?);
    Some(SyscallState::Blocked { sp, ip })
}

/// Windows a copy can carry (`UCOPY_WINDOWS` of the BPF side; raw.rs holds the two equal:
/// this module does not import raw, which imports it).
pub const MAX_WINDOWS: usize = 4;

impl<'a> StackCopy<'a> {
    /// A copy of `bytes` from `sp` up, without windows.
    pub fn new(ip: u64, sp: u64, bp: u64, bytes: &'a [u8]) -> Self {
        StackCopy {
            ip,
            sp,
            bp,
            bytes,
            windows: [(0, &[]); MAX_WINDOWS],
            python: &[],
        }
    }

    /// Add a window of `bytes` at `at` (ignored when all are taken).
    pub fn add_window(&mut self, at: u64, bytes: &'a [u8]) {
        if let Some(w) = self.windows.iter_mut().find(|w| w.1.is_empty()) {
            *w = (at, bytes);
        }
    }

    /// The u64 at stack address `addr`, if the copy has it.
    pub fn read_u64(&self, addr: u64) -> Option<u64> {
        let from = |base: u64, bytes: &[u8]| {
            let off = usize::try_from(addr.checked_sub(base)?).ok()?;
            let b = bytes.get(off..off.checked_add(8)?)?;
            Some(u64::from_le_bytes(b.try_into().ok()?))
        };
        from(self.sp, self.bytes)
            .or_else(|| self.windows.iter().find_map(|&(at, bytes)| from(at, bytes)))
    }

    /// Into `out`, the frame pointer of each of `frames` (a frame-pointer walk of this
    /// stack: the ip, then return addresses; the BPF side's walk) as the walk had it: the
    /// copy's bp, then the saved rbp of each frame record, as far as the copy holds the
    /// records and their return addresses are the walk's.
    pub fn frame_pointers(&self, frames: &[u64], out: &mut Vec<u64>) {
        out.clear();
        let mut bp = self.bp;
        for (i, &f) in frames.iter().enumerate() {
            if i > 0 {
                if self.read_u64(bp.wrapping_add(8)) != Some(f) {
                    break;
                }
                match self.read_u64(bp) {
                    Some(saved) => bp = saved,
                    None => break,
                }
            }
            out.push(bp);
        }
    }

    /// The end of everything copied (the copy's, or its highest window's).
    fn end(&self) -> u64 {
        self.windows
            .iter()
            .map(|&(at, b)| at + b.len() as u64)
            .fold(self.sp + self.bytes.len() as u64, u64::max)
    }
}

struct ProcUnwinder {
    unwinder: UnwinderX86_64<SectionBytes>,
    /// framehop's rule cache (509 slots, direct-mapped by address), one per process: shared
    /// by every process of a whole-system recording, the slots were evicted by the other
    /// processes' addresses (ASLR gives each its own) nearly every time, and each miss
    /// parses CFI again.
    cache: CacheX86_64,
    /// The mappings known (sorted by start), and whether their object has CFI (file
    /// objects with CFI are framehop modules; other mappings are only listed, and framehop
    /// walks them by frame pointer).
    modules: Vec<(Range<u64>, Code)>,
    /// Where a thread begins with nothing above it ([`Object::entries`], at their
    /// addresses in this process): a walk that reaches one is complete.
    entries: Vec<Range<u64>>,
    /// A CPython process: where `_PyEval_EvalFrameDefault` is (its frames are replaced by
    /// the Python frames they ran), and its structures' layout.
    python: Option<(Range<u64>, crate::python::Layout)>,
    /// A JVM: where its VMStructs exports are (its interpreted frames are named from them).
    java: Option<crate::java::JvmExports>,
}

/// What a known mapping of a process holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code {
    /// An object with CFI.
    Cfi,
    /// An object without CFI (or that could not be read).
    NoCfi,
    /// Anonymous executable memory (JIT code).
    Anon,
}

/// Unwinds user stack copies, per process, with objects parsed once.
pub struct UserUnwinder<A: AddressSpaces> {
    spaces: A,
    procs: HashMap<u32, ProcUnwinder>,
    objects: HashMap<(u64, u64), Option<Arc<Object>>>,
    /// The highest stack address the last unwind read (its outermost frame's saved
    /// registers): for a complete stack, the top of that thread's stack.
    last_top: u64,
    /// The last unwind, if short of copy, needed bytes above everything copied (not only
    /// below a window): the top it was copied to is too low.
    last_beyond_copy: bool,
    /// Where the last unwind, short of copy, first needed a byte the copy did not have.
    last_short_at: Option<u64>,
    /// Time left for waiting on running threads to block again ([`LiveStack::attach`]);
    /// refilled each half second by [`UserUnwinder::refill_live_budget`].
    live_budget: Duration,
    /// The frame pointer (rbp) of each frame of the last unwind, as the walk restored it:
    /// an interpreted Java frame's fp locates its `Method*`.
    frame_bps: Vec<u64>,
    /// CPython processes not yet told to the BPF side ([`UserUnwinder::take_new_python`]).
    new_python: Vec<(u32, Vec<u8>)>,
    /// See [`UserUnwinder::python_unsupported`].
    python_unsupported: std::collections::BTreeSet<String>,
    /// Counts so far.
    pub counts: UnwindCounts,
}

impl<A: AddressSpaces> UserUnwinder<A> {
    /// An unwinder over `spaces`.
    pub fn new(spaces: A) -> Self {
        UserUnwinder {
            spaces,
            procs: HashMap::new(),
            objects: HashMap::new(),
            last_top: 0,
            last_beyond_copy: false,
            last_short_at: None,
            live_budget: LIVE_BUDGET,
            frame_bps: Vec::new(),
            new_python: Vec::new(),
            python_unsupported: Default::default(),
            counts: UnwindCounts::default(),
        }
    }

    /// After a complete unwind: the top of the thread's stack it read up to.
    pub fn last_top(&self) -> u64 {
        self.last_top
    }

    /// Whether the last unwind, short of copy, needed bytes above the whole copy (a top it
    /// was copied to that is too low), not only bytes below one of its windows.
    pub fn last_beyond_copy(&self) -> bool {
        self.last_beyond_copy
    }

    /// A new half second of recording: the time [`LiveStack::attach`] may spend waiting for
    /// running threads to block again is [`LIVE_BUDGET`] again.
    pub fn refill_live_budget(&mut self) {
        self.live_budget = LIVE_BUDGET;
    }

    /// Where the last unwind, if it ended short of copy, first needed a byte it lacked.
    pub fn last_short_at(&self) -> Option<u64> {
        self.last_short_at
    }

    /// `addr` of `tgid` as `object+0xFILE_OFFSET` (or the bare address outside any object),
    /// for the label of an unfinished stack.
    pub fn describe(&mut self, tgid: u32, ts: u64, addr: u64) -> String {
        match self.spaces.mapping(tgid, ts, addr) {
            Some(m) if m.anon => format!("anonymous code 0x{addr:x}"),
            Some(m) => {
                let name = m.path.rsplit('/').next().unwrap_or(&m.path);
                format!("{name}+0x{:x}", addr - m.start + m.offset)
            }
            None => format!("0x{addr:x}"),
        }
    }

    /// Whether `addr` lies in anonymous executable memory (JIT code) of `tgid`, as far as
    /// its unwinds so far have seen.
    pub fn is_anon(&self, tgid: u32, addr: u64) -> bool {
        self.procs
            .get(&tgid)
            .and_then(|p| p.module_at(addr))
            .is_some_and(|(_, c)| *c == Code::Anon)
    }

    /// After an unwind that stopped short with `unwound` frames (its label frame not
    /// counted): whether the BPF frame-pointer walk `fp` of the same record got further.
    /// Returns how many of its frames to keep, the frames up to the first that lies in no
    /// executable mapping of `tgid` (a frame-pointer walk through code without frame
    /// pointers ends in garbage), when those are more than the unwind found; counted in
    /// [`UnwindCounts::fp_walk_kept`].
    pub fn fp_walk_better(
        &mut self,
        tgid: u32,
        ts: u64,
        unwound: usize,
        fp: &[u64],
        history: Option<&MappingHistory>,
    ) -> Option<usize> {
        if fp.len() <= unwound {
            return None;
        }
        let mut valid = 0;
        for (i, &a) in fp.iter().enumerate() {
            // A return address is looked up by its call instruction.
            let at = if i == 0 { a } else { a.wrapping_sub(1) };
            if !self.ensure(tgid, ts, at, history) {
                break;
            }
            valid += 1;
        }
        (valid > unwound).then(|| {
            self.counts.fp_walk_kept += 1;
            valid
        })
    }

    /// `tgid` exec'd or exited: its modules are dropped (objects stay cached).
    pub fn forget(&mut self, tgid: u32) {
        self.procs.remove(&tgid);
        self.spaces.forget(tgid);
    }

    /// Where `_PyEval_EvalFrameDefault` is in `tgid`, if it is a CPython process this
    /// recorder reads Python frames of.
    pub fn python_eval(&self, tgid: u32) -> Option<&(Range<u64>, crate::python::Layout)> {
        self.procs.get(&tgid)?.python.as_ref()
    }

    /// Where the VMStructs exports of `tgid` are, if it is a JVM.
    pub fn java(&self, tgid: u32) -> Option<&crate::java::JvmExports> {
        self.procs.get(&tgid)?.java.as_ref()
    }

    /// Each frame's rbp in the last unwind (parallel to its frames, label not counted):
    /// where a frame-pointer frame keeps its saved registers and, in the JVM's
    /// interpreter, its method.
    pub fn frame_bps(&self) -> &[u64] {
        &self.frame_bps
    }

    /// CPython processes found since the last call, with their `struct py_proc` for the
    /// BPF side's `py_procs` map.
    pub fn take_new_python(&mut self) -> Vec<(u32, Vec<u8>)> {
        std::mem::take(&mut self.new_python)
    }

    /// Python versions seen that this recorder cannot read frames of (`3.12` ...).
    pub fn python_unsupported(&self) -> impl Iterator<Item = &str> {
        self.python_unsupported.iter().map(String::as_str)
    }

    fn object(&mut self, m: &Mapping) -> Option<Arc<Object>> {
        if let Some(o) = self.objects.get(&m.file_id) {
            return o.clone();
        }
        let data = match &m.open {
            Some(p) => std::fs::File::open(p)
                .or_else(|_| std::fs::File::open(&m.path))
                .ok()
                // SAFETY: the object file is mapped read-only; a file truncated while mapped
                // could fault the consumer, as with any mmap-based reader (objects mapped
                // by running programs are not truncated in place by package managers,
                // which replace them by rename).
                .and_then(|f| unsafe { memmap2::Mmap::map(&f) }.ok())
                .map(ObjectData::File),
            None => vdso_image().map(ObjectData::Bytes),
        };
        let obj = data.and_then(|d| Object::parse(Arc::new(d))).map(Arc::new);
        match &obj {
            Some(o) => {
                self.counts.objects += 1;
                self.counts.cfi_bytes += [".eh_frame", ".eh_frame_hdr", ".debug_frame"]
                    .iter()
                    .filter_map(|n| o.sections.get(n))
                    .map(|(_, r)| (r.end - r.start) as u64)
                    .sum::<u64>();
            }
            None => self.counts.objects_failed += 1,
        }
        // The vDSO is cached under (0, 0), a file only once it parsed (a file missing now
        // may be a process that exited: another process may map it later).
        if obj.is_some() || m.open.is_none() {
            self.objects.insert(m.file_id, obj.clone());
        }
        obj
    }

    /// Make sure the mapping holding `addr` is a module of `tgid`'s unwinder. Returns
    /// whether some object is mapped there.
    fn ensure(&mut self, tgid: u32, ts: u64, addr: u64, history: Option<&MappingHistory>) -> bool {
        let known = self
            .procs
            .get(&tgid)
            .is_some_and(|p| p.unwinder_covers(addr));
        if known {
            return true;
        }
        let m = match self.spaces.mapping(tgid, ts, addr) {
            Some(m) => m,
            None => match history.and_then(|h| mapping_from_history(h, tgid, ts, addr)) {
                Some(m) => {
                    self.counts.from_history += 1;
                    m
                }
                None => return false,
            },
        };
        // Anonymous executable memory has no object: it is only listed, and framehop,
        // finding no module there, walks it by frame pointer.
        let obj = if m.anon { None } else { self.object(&m) };
        let p = self.procs.entry(tgid).or_insert_with(|| ProcUnwinder {
            unwinder: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            modules: Vec::new(),
            entries: Vec::new(),
            python: None,
            java: None,
        });
        let at = p.modules.partition_point(|(r, _)| r.start < m.start);
        if p.modules
            .get(at)
            .is_some_and(|(r, _)| r.start == m.start && r.end == m.end)
        {
            return true;
        }
        // A mapping that overlaps a known one replaced it (munmap + mmap), or grew (a JIT
        // code cache committing more of its reservation): drop the old.
        p.modules.retain(|(r, code)| {
            let overlaps = r.start < m.end && m.start < r.end;
            if overlaps && *code != Code::Anon {
                p.unwinder.remove_module(r.start);
            }
            !overlaps
        });
        p.entries.retain(|r| r.end <= m.start || m.end <= r.start);
        let code = if m.anon {
            self.counts.anon_mappings += 1;
            Code::Anon
        } else if obj.as_ref().is_some_and(|o| o.has_cfi) {
            Code::Cfi
        } else {
            Code::NoCfi
        };
        if let Some(o) = obj {
            let bias = o.bias(m.start, m.offset).unwrap_or(m.start);
            p.entries.extend(
                o.entries
                    .iter()
                    .map(|r| r.start.wrapping_add(bias)..r.end.wrapping_add(bias))
                    .filter(|r| m.start <= r.start && r.end <= m.end),
            );
            if let Some((runtime, eval)) = &o.python {
                match crate::python::Layout::for_object(&m.path) {
                    Ok(layout) if p.python.is_none() => {
                        let interp_head = runtime.wrapping_add(bias) + layout.runtime_interp_head;
                        let eval = eval.start.wrapping_add(bias)..eval.end.wrapping_add(bias);
                        p.python = Some((eval, layout));
                        self.new_python.push((tgid, layout.bpf_value(interp_head)));
                        self.counts.python_procs += 1;
                    }
                    Ok(_) => {}
                    Err(version) => {
                        self.counts.python_unsupported += 1;
                        self.python_unsupported.insert(version);
                    }
                }
            }
            if let (Some(exports), None) = (&o.jvm, &p.java) {
                p.java = Some(crate::java::JvmExports(
                    exports.map(|a| a.wrapping_add(bias)),
                ));
            }
            p.unwinder.add_module(Module::new(
                m.path.clone(),
                m.start..m.end,
                bias,
                o.section_info(),
            ));
        }
        let at = p.modules.partition_point(|(r, _)| r.start < m.start);
        p.modules.insert(at, (m.start..m.end, code));
        true
    }

    /// Unwind `copy` of a stack of `tgid` taken at `ts` into `out` (leaf first, the ip then
    /// return addresses, as a frame-pointer walk gives them). Returns how it ended and, when
    /// short, the address the label should name (the last frame's).
    /// `history`: the recording's mapping history, asked when the address spaces cannot
    /// tell (a process that exited before its stacks were unwound).
    pub fn unwind(
        &mut self,
        tgid: u32,
        ts: u64,
        copy: StackCopy<'_>,
        out: &mut Vec<u64>,
        history: Option<&MappingHistory>,
    ) -> UnwindEnd {
        out.clear();
        self.counts.unwound += 1;
        let end = self.unwind_inner(tgid, ts, copy, out, history, None);
        self.count_end(&end);
        end
    }

    /// [`UserUnwinder::unwind`], and when the copy was too short, again with the missing
    /// bytes read from the thread's live stack, if it is still blocked where the copy was
    /// taken (see [`LiveStack`]). `live_read` receives the addresses read live (sorted).
    #[allow(clippy::too_many_arguments)]
    pub fn unwind_or_peek(
        &mut self,
        tgid: u32,
        tid: u32,
        ts: u64,
        copy: StackCopy<'_>,
        out: &mut Vec<u64>,
        history: Option<&MappingHistory>,
        live_read: &mut Vec<u64>,
    ) -> UnwindEnd {
        out.clear();
        live_read.clear();
        self.counts.unwound += 1;
        let mut end = self.unwind_inner(tgid, ts, copy, out, history, None);
        if end == UnwindEnd::Incomplete(IncompleteReason::CopyTooShort) {
            let (short_at, beyond) = (self.last_short_at, self.last_beyond_copy);
            let budget = &mut self.live_budget;
            if let Some(mut live) = LiveStack::attach(tgid, tid, copy.sp, copy.ip, budget) {
                self.counts.live_tried += 1;
                let mut again = Vec::with_capacity(out.len() * 2);
                let e = self.unwind_inner(tgid, ts, copy, &mut again, history, Some(&mut live));
                // Kept only if the thread stayed put while its stack was read.
                if live.still_there() && (e == UnwindEnd::Complete || again.len() > out.len()) {
                    self.counts.live_used += 1;
                    *out = again;
                    end = e;
                    *live_read = live.served();
                } else {
                    (self.last_short_at, self.last_beyond_copy) = (short_at, beyond);
                }
            }
        }
        self.count_end(&end);
        end
    }

    fn count_end(&mut self, end: &UnwindEnd) {
        match end {
            UnwindEnd::Complete => self.counts.complete += 1,
            UnwindEnd::Incomplete(r) => {
                let i = IncompleteReason::ALL
                    .iter()
                    .position(|x| x == r)
                    .unwrap_or(0);
                self.counts.incomplete[i] += 1;
            }
        }
    }

    fn unwind_inner(
        &mut self,
        tgid: u32,
        ts: u64,
        copy: StackCopy<'_>,
        out: &mut Vec<u64>,
        history: Option<&MappingHistory>,
        mut live: Option<&mut LiveStack>,
    ) -> UnwindEnd {
        let mut highest = copy.sp;
        let mut used_window = false;
        let bottom_end = copy.sp + copy.bytes.len() as u64;
        let copy_end = copy.end();
        let mut short_at = None;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let Some(v) = copy
                .read_u64(addr)
                .or_else(|| live.as_deref_mut()?.read_u64(addr))
            else {
                if addr >= bottom_end {
                    short_at.get_or_insert(addr);
                }
                return Err(());
            };
            highest = highest.max(addr + 8);
            used_window |= addr >= bottom_end;
            Ok(v)
        };
        let end = self.walk(tgid, ts, copy, out, &mut read_stack, history);
        self.last_top = highest;
        self.last_short_at =
            short_at.filter(|_| end == UnwindEnd::Incomplete(IncompleteReason::CopyTooShort));
        self.last_beyond_copy = short_at.is_some_and(|a| a >= copy_end);
        if used_window {
            self.counts.window_read += 1;
            if end == UnwindEnd::Complete {
                self.counts.window_complete += 1;
            }
        }
        end
    }

    fn walk(
        &mut self,
        tgid: u32,
        ts: u64,
        copy: StackCopy<'_>,
        out: &mut Vec<u64>,
        read_stack: &mut impl FnMut(u64) -> Result<u64, ()>,
        history: Option<&MappingHistory>,
    ) -> UnwindEnd {
        let (sp0, bytes) = (copy.sp, copy.bytes);
        let mut regs = UnwindRegsX86_64::new(copy.ip, copy.sp, copy.bp);
        let mut address = FrameAddress::InstructionPointer(copy.ip);
        out.push(copy.ip);
        self.frame_bps.clear();
        self.frame_bps.push(copy.bp);
        if !self.ensure(tgid, ts, copy.ip, history) {
            return UnwindEnd::Incomplete(if self.procs.contains_key(&tgid) {
                IncompleteReason::BadReturnAddress
            } else {
                IncompleteReason::ProcessGone
            });
        }
        loop {
            let lookup = address.address_for_lookup();
            let Some(p) = self.procs.get_mut(&tgid) else {
                return UnwindEnd::Incomplete(IncompleteReason::ProcessGone);
            };
            if p.entries.iter().any(|r| r.contains(&lookup)) {
                // A thread's first function (Go's runtime.mstart): nothing called it.
                return UnwindEnd::Complete;
            }
            let no_cfi = !p.has_cfi_at(lookup);
            let next = p
                .unwinder
                .unwind_frame(address, &mut regs, &mut p.cache, read_stack);
            match next {
                Ok(None) => return UnwindEnd::Complete,
                Ok(Some(ra)) => {
                    let Some(a) = FrameAddress::from_return_address(ra) else {
                        return UnwindEnd::Complete;
                    };
                    if !self.ensure(tgid, ts, ra - 1, history) {
                        return UnwindEnd::Incomplete(if no_cfi {
                            IncompleteReason::NoCfi
                        } else {
                            IncompleteReason::BadReturnAddress
                        });
                    }
                    if out.len() >= MAX_UNWIND_FRAMES {
                        return UnwindEnd::Incomplete(IncompleteReason::TooDeep);
                    }
                    if no_cfi {
                        self.counts.fp_frames += 1;
                    }
                    out.push(ra);
                    self.frame_bps.push(regs.bp());
                    address = a;
                }
                Err(framehop::Error::CouldNotReadStack(addr))
                    if addr >= sp0 + bytes.len() as u64 && !no_cfi =>
                {
                    return UnwindEnd::Incomplete(IncompleteReason::CopyTooShort);
                }
                Err(framehop::Error::ReturnAddressIsNull) => return UnwindEnd::Complete,
                Err(framehop::Error::DidNotAdvance)
                | Err(framehop::Error::FramepointerUnwindingMovedBackwards) => {
                    return UnwindEnd::Incomplete(if no_cfi {
                        IncompleteReason::NoCfi
                    } else {
                        IncompleteReason::NoProgress
                    });
                }
                Err(_) => {
                    return UnwindEnd::Incomplete(if no_cfi {
                        IncompleteReason::NoCfi
                    } else {
                        IncompleteReason::BadReturnAddress
                    });
                }
            }
        }
    }
}

impl ProcUnwinder {
    fn module_at(&self, addr: u64) -> Option<&(Range<u64>, Code)> {
        let i = self.modules.partition_point(|(r, _)| r.start <= addr);
        self.modules[..i].last().filter(|(r, _)| addr < r.end)
    }

    fn unwinder_covers(&self, addr: u64) -> bool {
        self.module_at(addr).is_some()
    }

    fn has_cfi_at(&self, addr: u64) -> bool {
        self.module_at(addr).is_some_and(|(_, c)| *c == Code::Cfi)
    }
}

/// This process's vDSO image (the same code in every process of this kernel): the ELF
/// image at `AT_SYSINFO_EHDR`, as long as `/proc/self/maps` says its mapping is.
fn vdso_image() -> Option<Vec<u8>> {
    // SAFETY: getauxval only reads the auxiliary vector.
    let base = unsafe { libc::getauxval(libc::AT_SYSINFO_EHDR) };
    if base == 0 {
        return None;
    }
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let (s, rest) = line.split_once('-')?;
    let e = rest.split_ascii_whitespace().next()?;
    let (start, end) = (
        u64::from_str_radix(s, 16).ok()?,
        u64::from_str_radix(e, 16).ok()?,
    );
    if start != base || end <= start || end - start > 1 << 20 {
        return None;
    }
    let mut v = vec![0u8; (end - start) as usize];
    // SAFETY: [start, end) is this process's vDSO mapping (checked against
    // /proc/self/maps above), readable and never unmapped while the process lives.
    unsafe { std::ptr::copy_nonoverlapping(start as *const u8, v.as_mut_ptr(), v.len()) };
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Address spaces of one process given as a list (no /proc).
    struct Fixed(Vec<Mapping>);

    impl AddressSpaces for Fixed {
        fn mapping(&mut self, _tgid: u32, _ts_ns: u64, addr: u64) -> Option<Mapping> {
            find(&self.0, addr).cloned()
        }
        fn forget(&mut self, _tgid: u32) {}
    }

    /// A stack copy at `sp` holding `words` (8 bytes each).
    fn stack_bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }

    #[test]
    fn anonymous_executable_mappings_are_registered_and_walked_by_frame_pointer() {
        assert_eq!(
            parse_maps_line(7, "7f00a000-7f00b000 rwxp 00000000 00:00 0"),
            Some(Mapping::anonymous(0x7f00a000, 0x7f00b000))
        );
        let mut history = MappingHistory::new();
        for m in crate::mappings::parse_proc_maps(9, "10000-20000 rwxp 00000000 00:00 0\n", 0) {
            history.map(m);
        }
        assert_eq!(
            mapping_from_history(&history, 9, 5, 0x10100),
            Some(Mapping::anonymous(0x10000, 0x20000))
        );

        // JIT code at [0x10000, 0x20000) with frame pointers: ip, then two frame records
        // (bp -> [caller's bp, return address]), the outermost with a null bp.
        let sp = 0x7000_0000u64;
        // The leaf's locals, then frame records at sp + 0x20 and sp + 0x30.
        let words = [0, 0, 0, 0, sp + 0x30, 0x10100, 0, 0x10200];
        let bytes = stack_bytes(&words);
        let copy = StackCopy::new(0x10050, sp, sp + 0x20, &bytes);
        let mut u = UserUnwinder::new(Fixed(vec![Mapping::anonymous(0x10000, 0x20000)]));
        let mut out = Vec::new();
        let end = u.unwind(9, 0, copy, &mut out, None);
        assert_eq!(end, UnwindEnd::Complete, "{out:x?} {:?}", u.counts);
        assert_eq!(out, vec![0x10050, 0x10100, 0x10200]);
        assert_eq!((u.counts.anon_mappings, u.counts.fp_frames), (1, 2));
        assert!(u.is_anon(9, 0x10100) && !u.is_anon(9, 0x30000));
        assert_eq!(u.describe(9, 0, 0x10100), "anonymous code 0x10100");

        // Before: anonymous code was in no mapping, so the walk stopped at its first frame.
        let mut u = UserUnwinder::new(Fixed(Vec::new()));
        let end = u.unwind(9, 0, copy, &mut out, None);
        assert_eq!(end, UnwindEnd::Incomplete(IncompleteReason::ProcessGone));

        // A code cache that grew (same start, larger end) replaces the smaller mapping.
        let mut u = UserUnwinder::new(Fixed(vec![Mapping::anonymous(0x10000, 0x10180)]));
        u.unwind(9, 0, copy, &mut out, None);
        assert!(!u.is_anon(9, 0x10200));
        u.spaces = Fixed(vec![Mapping::anonymous(0x10000, 0x20000)]);
        assert!(u.ensure(9, 0, 0x10200, None));
        assert!(u.is_anon(9, 0x10200) && u.is_anon(9, 0x10100));
    }

    #[test]
    fn proc_syscall_lines_parse() {
        use SyscallState::*;
        assert_eq!(parse_syscall_state("running\n"), Some(Running));
        assert_eq!(
            parse_syscall_state("0 0x3 0x55d0 0x4000 0x0 0x0 0x0 0x7ffd28518ac8 0x7f8fc72b62ad\n"),
            Some(Blocked {
                sp: 0x7ffd28518ac8,
                ip: 0x7f8fc72b62ad
            })
        );
        assert_eq!(
            parse_syscall_state("-1 0x7ffd0 0x401000\n"),
            Some(Blocked {
                sp: 0x7ffd0,
                ip: 0x401000
            })
        );
        assert_eq!(parse_syscall_state(""), None);
        // A thread blocked elsewhere, or gone, is not attached.
        let mut budget = LIVE_BUDGET;
        assert!(LiveStack::attach(u32::MAX, u32::MAX, 1, 2, &mut budget).is_none());
        let me = std::process::id();
        assert!(LiveStack::attach(me, me, 1, 2, &mut budget).is_none());
    }

    #[test]
    fn a_frame_larger_than_the_copy_is_bridged_by_a_window_copied_apart() {
        // JIT code with frame pointers whose middle frame spans 64 KiB (a big local
        // buffer): the leaf's frame record points to the caller's, which lies in a window
        // 64 KiB above the copy; the outermost record has a null bp.
        let sp = 0x7000_0000u64;
        let at = sp + 0x10000;
        let bottom = stack_bytes(&[0, 0, 0, 0, at + 0x10, 0x10100]);
        let window = stack_bytes(&[0, 0, 0, 0x10200, 0, 0]);
        let spaces = || Fixed(vec![Mapping::anonymous(0x10000, 0x20000)]);
        let mut out = Vec::new();

        // Without the window the walk stops at the big frame, and says where it needed
        // the stack: the caller's frame record.
        let mut copy = StackCopy::new(0x10050, sp, sp + 0x20, &bottom);
        let mut u = UserUnwinder::new(spaces());
        let end = u.unwind(9, 0, copy, &mut out, None);
        assert_ne!(end, UnwindEnd::Complete, "{out:x?}");
        assert_eq!(out, vec![0x10050, 0x10100]);
        assert_eq!(u.counts.window_read, 0);

        copy.add_window(at, &window);
        let mut u = UserUnwinder::new(spaces());
        let end = u.unwind(9, 0, copy, &mut out, None);
        assert_eq!(end, UnwindEnd::Complete, "{out:x?} {:?}", u.counts);
        assert_eq!(out, vec![0x10050, 0x10100, 0x10200]);
        assert_eq!((u.counts.window_read, u.counts.window_complete), (1, 1));
        assert_eq!(u.last_top(), at + 0x20);
        assert!(u
            .counts
            .to_string()
            .contains("; 1 read windows copied farther up the stack (1 of them"));
    }

    #[test]
    fn a_frame_pointer_walk_gets_its_frame_pointers_from_the_copy() {
        // Frame records at sp + 0x20 and sp + 0x30 (the outermost with a null bp).
        let sp = 0x7000_0000u64;
        let bytes = stack_bytes(&[0, 0, 0, 0, sp + 0x30, 0x10100, 0, 0x10200]);
        let copy = StackCopy::new(0x10050, sp, sp + 0x20, &bytes);
        let mut bps = vec![1];
        copy.frame_pointers(&[0x10050, 0x10100, 0x10200], &mut bps);
        assert_eq!(bps, vec![sp + 0x20, sp + 0x30, 0]);
        // A return address that is not the record's: the chain is not the walk's.
        copy.frame_pointers(&[0x10050, 0x99, 0x10200], &mut bps);
        assert_eq!(bps, vec![sp + 0x20]);
    }

    #[test]
    fn the_frame_pointer_walk_is_kept_when_it_got_further() {
        let spaces = Fixed(vec![
            Mapping::anonymous(0x10000, 0x20000),
            Mapping::anonymous(0x40000, 0x50000),
        ]);
        let mut u = UserUnwinder::new(spaces);
        // The unwind found 2 frames; the walk 4 in mapped code, then garbage: 4 kept.
        let fp = [0x10050, 0x10100, 0x40100, 0x40200, 0xdead_0000];
        assert_eq!(u.fp_walk_better(9, 0, 2, &fp, None), Some(4));
        assert_eq!(u.counts.fp_walk_kept, 1);
        // Not further: as many mapped frames as the unwind, or fewer frames at all.
        assert_eq!(u.fp_walk_better(9, 0, 4, &fp, None), None);
        assert_eq!(u.fp_walk_better(9, 0, 5, &fp, None), None);
        // A walk that went wrong at once (the leaf had no frame record) is not kept.
        assert_eq!(
            u.fp_walk_better(9, 0, 1, &[0x10050, 0x99, 0x10100, 0x10200], None),
            None
        );
        assert_eq!(u.counts.fp_walk_kept, 1);
        assert!(u
            .counts
            .to_string()
            .contains("1 unfinished unwinds replaced"));
    }

    #[test]
    fn maps_lines_parse_executable_file_mappings_and_the_vdso() {
        let m = parse_maps_line(
            7,
            "7f00a000-7f00b000 r-xp 00002000 fd:01 1234   /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!((m.start, m.end, m.offset), (0x7f00a000, 0x7f00b000, 0x2000));
        assert_eq!(m.file_id, ((0xfd << 32) | 1, 1234));
        assert_eq!(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(
            m.open.as_deref(),
            Some(Path::new("/proc/7/map_files/7f00a000-7f00b000"))
        );
        assert!(parse_maps_line(7, "7f00a000-7f00b000 r--p 00000000 fd:01 1234 /x").is_none());
        assert!(
            parse_maps_line(7, "7f00a000-7f00b000 r-xp 00000000 00:00 0").is_some_and(|m| m.anon)
        );
        let v = parse_maps_line(7, "7ffd1000-7ffd3000 r-xp 00000000 00:00 0   [vdso]").unwrap();
        assert!(v.open.is_none() && v.path == "[vdso]");
        let maps = [m.clone(), v.clone()];
        assert_eq!(find(&maps, 0x7f00a800), Some(&m));
        assert_eq!(find(&maps, 0x7f00b000), None);
    }

    /// This test's own stack (a Rust binary without frame pointers, through std's test
    /// harness thread) unwinds to the thread's entry (`clone3`), as a recorded one must.
    #[test]
    #[inline(never)]
    fn own_stack_unwinds_to_the_thread_entry() {
        let (ip, sp, bp): (u64, u64, u64);
        // SAFETY: reads the instruction, stack and frame pointers; writes only the outputs.
        unsafe {
            std::arch::asm!("lea {ip}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp",
                ip = out(reg) ip, sp = out(reg) sp, bp = out(reg) bp);
        }
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let top = maps
            .lines()
            .filter_map(|l| {
                let (s, rest) = l.split_once('-')?;
                let e = rest.split_whitespace().next()?;
                Some((
                    u64::from_str_radix(s, 16).ok()?,
                    u64::from_str_radix(e, 16).ok()?,
                ))
            })
            .find(|(s, e)| (*s..*e).contains(&sp))
            .unwrap()
            .1;
        let len = (top - sp).min(256 << 10) as usize;
        let mut bytes = vec![0u8; len];
        // SAFETY: [sp, sp + len) lies in this thread's stack mapping (found above), below
        // its end; this frame is live while it is copied.
        unsafe { std::ptr::copy_nonoverlapping(sp as *const u8, bytes.as_mut_ptr(), len) };
        let mut u = UserUnwinder::new(ProcMaps::default());
        let mut out = Vec::new();
        let copy = StackCopy::new(ip, sp, bp, &bytes);
        let end = u.unwind(std::process::id(), 0, copy, &mut out, None);
        assert_eq!(
            end,
            UnwindEnd::Complete,
            "frames {out:x?}, counts {:?}",
            u.counts
        );
        assert!(out.len() >= 4, "{out:x?}");
        assert_eq!(u.counts.complete, 1);

        // The same stack as if its process had exited before the consumer unwound it: no
        // /proc/PID/maps (a tgid above pid_max), its mappings only in the mapping history.
        let gone = 0x7fff_fff0;
        let mut u = UserUnwinder::new(ProcMaps::default());
        let mut out_gone = Vec::new();
        let end = u.unwind(gone, 0, copy, &mut out_gone, None);
        assert_eq!(end, UnwindEnd::Incomplete(IncompleteReason::ProcessGone));
        let mut history = MappingHistory::new();
        for m in crate::mappings::parse_proc_maps(gone, &maps, 0) {
            history.map(m);
        }
        let end = u.unwind(gone, 0, copy, &mut out_gone, Some(&history));
        assert_eq!(end, UnwindEnd::Complete, "counts {:?}", u.counts);
        assert_eq!(out_gone, out, "the history gives the frames /proc gave");
        assert!(u.counts.from_history >= 2, "{:?}", u.counts);
    }
}

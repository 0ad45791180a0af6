//! Goroutine waits and wakings of Go programs (issue 38; docs/RECORDER.md "Goroutines").
//!
//! A Go program's threads (Ms) park in `runtime.futex` whatever their goroutines wait for,
//! so thread-level chains show the runtime's idle machinery. The BPF side
//! (bpf/goroutines.bpf.h) probes the entries of `runtime.gopark` (a goroutine parks: its
//! goid, wait reason and stack) and `runtime.ready` (a goroutine is readied: its goid, the
//! waker's goid and stack). This module finds Go binaries (automatically, from the
//! executables of the processes the recording sees, or named with `--go`), reads what the
//! probes need from each binary (its Go version from the build information, the offsets of
//! `g.goid`, `g.m` and `m.curg` from its DWARF, or the table of known versions when the
//! DWARF was stripped, the names of its wait reasons), attaches the probes per binary, and
//! detaches them again when their rate passes the cap (`--go-max-rate`): that binary's
//! processes then have thread-level chains only, which is counted and written into the
//! trace (`GoProcess::capped_ns`).

use chainrec_format::{GoDelta, GoEvent, GoExecute, GoProcess, GoStw, Tid};
use std::collections::{HashMap, HashSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Why a binary's goroutines are not recorded.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum GoError {
    /// The file could not be read.
    #[error("cannot read {path}: {error}")]
    Read {
        /// The binary.
        path: PathBuf,
        /// What failed.
        error: String,
    },
    /// Not an ELF file this reader understands (64-bit little endian).
    #[error("not a 64-bit little-endian ELF file")]
    NotElf,
    /// An ELF file without Go's build information.
    #[error("not a Go binary (no .go.buildinfo section)")]
    NotGo,
    /// A Go binary without a version this recorder knows how to probe.
    #[error("not supported: Go {version} (goroutine probes know Go 1.19 and 1.24 only)")]
    Version {
        /// `1.21.3`.
        version: String,
    },
    /// A runtime function or variable the probes need is not in the symbol table.
    #[error("symbol {0} not found (a stripped binary?)")]
    Symbol(&'static str),
    /// Neither DWARF nor the table of known versions gave the runtime's field offsets.
    #[error("field offsets of Go {version}: {why}")]
    Offsets {
        /// The Go version.
        version: String,
        /// What was missing.
        why: String,
    },
    /// The kernel refused a uprobe.
    #[error("attaching the uprobe on {symbol}: {error}")]
    Attach {
        /// The function.
        symbol: &'static str,
        /// libbpf's error.
        error: String,
    },
    /// Every probe slot is taken.
    #[error("more than {0} Go binaries: not probed")]
    Slots(usize),
}

/// The offsets the probes read (`struct go_layout` of bpf/chainrec_abi.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GoLayout {
    /// `runtime.g.goid`.
    pub g_goid: u16,
    /// `runtime.g.m`.
    pub g_m: u16,
    /// `runtime.m.curg`.
    pub m_curg: u16,
    /// `runtime.pollDesc.rg`.
    pub pd_rg: u16,
    /// `runtime.pollDesc.wg`.
    pub pd_wg: u16,
    /// `runtime.m.preemptoff` for Go before 1.22 (the stop-the-world reason is that
    /// string); 0 from 1.22 on (it is `stopTheWorldWithSema`'s argument).
    pub m_preemptoff: u16,
}

/// Where the offsets of a binary came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutSource {
    /// The binary's own DWARF (`runtime.g`, `runtime.m`).
    Dwarf,
    /// The table of known versions (the binary has no DWARF: `-ldflags=-w`).
    Table,
}

/// Go versions whose probes were checked against the execution tracer (tests/
/// real_go_goroutines.rs) with their offsets, the same for every patch release of a minor
/// version (`runtime.g`, `runtime.m` and `runtime.pollDesc` do not change within one):
/// 1.19 from the DWARF of Debian 12's go1.19.8, 1.24 from that of Debian 13's go1.24.4
/// (`g.goid` is 8 bytes further: a `syscallbp` field came before it; so are
/// `pollDesc.rg`/`wg`: an `fdseq` word came before them). A version missing here is not
/// supported even with
/// DWARF: the probes also depend on the argument registers of `gopark` (the wait reason in
/// `cl`), `ready` and `execute` (`gp` in `rax`) and `netpollready` (`pd` in `rbx`, the mode
/// in `ecx`), the same in both, which only a run against the tracer shows. The message of
/// [`GoError::Version`] lists these versions.
const KNOWN: &[(&str, GoLayout)] = &[
    (
        "1.19",
        GoLayout {
            g_goid: 152,
            g_m: 48,
            m_curg: 192,
            pd_rg: 24,
            pd_wg: 32,
            m_preemptoff: 248,
        },
    ),
    (
        "1.24",
        GoLayout {
            g_goid: 160,
            g_m: 48,
            m_curg: 192,
            pd_rg: 32,
            pd_wg: 40,
            m_preemptoff: 0,
        },
    ),
];

/// The runtime functions probed: `go_park`, `go_ready`, `go_netpoll`, `go_execute`,
/// `go_stw_stop`, `go_stw_start` of bpf/goroutines.bpf.h, in that order.
const PROBED: [&str; 6] = [
    "runtime.gopark",
    "runtime.ready",
    "runtime.netpollready",
    "runtime.execute",
    "runtime.stopTheWorldWithSema",
    "runtime.startTheWorldWithSema",
];

/// What the probes need from one Go binary.
#[derive(Clone, Debug)]
pub struct GoBinary {
    /// `1.19.8`.
    pub version: String,
    /// The runtime's field offsets.
    pub layout: GoLayout,
    /// Where they came from.
    pub source: LayoutSource,
    /// Wait reason names by value (`runtime.waitReasonStrings`).
    pub reasons: Vec<String>,
    /// Where the world has started again: the offset in `runtime.startTheWorldWithSema`
    /// of its call of `runtime.wakep`, after the Ps were handed to their Ms and woken (the
    /// execution tracer's end of a stop-the-world is just before it); 0 when not found
    /// (the function's entry is probed instead).
    pub started_at: u64,
}

/// The offset in function `func` of its last `call rel32` (e8) of function `callee`, 0
/// when there is none.
fn call_site(elf: &Elf<'_>, func: &str, callee: &str) -> u64 {
    let (Some((addr, size)), Some((target, _))) = (elf.symbol(func), elf.symbol(callee)) else {
        return 0;
    };
    let Some(code) = elf.at(addr, size) else {
        return 0;
    };
    (0..code.len().saturating_sub(4))
        .rev()
        .find(|&i| {
            code[i] == 0xe8
                && u32_at(code, i + 1).is_some_and(|rel| {
                    (addr + i as u64 + 5).wrapping_add(rel as i32 as i64 as u64) == target
                })
        })
        .map_or(0, |i| i as u64)
}

/// A minimal ELF64 reader: sections by name, symbols by name, bytes by address.
struct Elf<'a> {
    data: &'a [u8],
    sections: Vec<Section>,
}

#[derive(Clone, Debug)]
struct Section {
    name: String,
    kind: u32,
    flags: u64,
    addr: u64,
    offset: u64,
    size: u64,
    link: u32,
}

const SHT_NOBITS: u32 = 8;
const SHT_SYMTAB: u32 = 2;
const SHF_COMPRESSED: u64 = 0x800;

fn u16_at(d: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(d.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(d: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(d: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(d.get(at..at + 8)?.try_into().ok()?))
}

impl<'a> Elf<'a> {
    fn parse(data: &'a [u8]) -> Option<Elf<'a>> {
        // ELF64 (class 2), little endian (data 1).
        if data.get(..6)? != b"\x7fELF\x02\x01" {
            return None;
        }
        let shoff = u64_at(data, 0x28)? as usize;
        let shentsize = u16_at(data, 0x3a)? as usize;
        let shnum = u16_at(data, 0x3c)? as usize;
        let shstrndx = u16_at(data, 0x3e)? as usize;
        if shentsize < 64 || shnum > 4096 {
            return None;
        }
        let raw = |i: usize| -> Option<Section> {
            let h = shoff.checked_add(i.checked_mul(shentsize)?)?;
            Some(Section {
                name: u32_at(data, h)?.to_string(),
                kind: u32_at(data, h + 4)?,
                flags: u64_at(data, h + 8)?,
                addr: u64_at(data, h + 16)?,
                offset: u64_at(data, h + 24)?,
                size: u64_at(data, h + 32)?,
                link: u32_at(data, h + 40)?,
            })
        };
        let mut sections: Vec<Section> = (0..shnum).map(raw).collect::<Option<_>>()?;
        let strtab = sections.get(shstrndx)?.clone();
        for s in &mut sections {
            let off: usize = s.name.parse().ok()?;
            s.name = cstr(data, (strtab.offset as usize).checked_add(off)?)?;
        }
        Some(Elf { data, sections })
    }

    fn section(&self, name: &str) -> Option<&Section> {
        self.sections.iter().find(|s| s.name == name)
    }

    fn bytes(&self, s: &Section) -> Option<&'a [u8]> {
        if s.kind == SHT_NOBITS {
            return None;
        }
        let start = s.offset as usize;
        self.data.get(start..start.checked_add(s.size as usize)?)
    }

    /// A section's contents, decompressed when it is `SHF_COMPRESSED` (zlib: Go's linker
    /// compresses its DWARF).
    fn contents(&self, name: &str) -> Option<std::borrow::Cow<'a, [u8]>> {
        let s = self.section(name)?;
        let b = self.bytes(s)?;
        if s.flags & SHF_COMPRESSED == 0 {
            return Some(b.into());
        }
        // Elf64_Chdr: ch_type (1 = zlib), reserved, ch_size, ch_addralign.
        if u32_at(b, 0)? != 1 {
            return None;
        }
        let size = u64_at(b, 8)?.min(256 << 20) as usize;
        let mut out = Vec::with_capacity(size);
        use std::io::Read;
        flate2::read::ZlibDecoder::new(b.get(24..)?)
            .take(size as u64)
            .read_to_end(&mut out)
            .ok()?;
        Some(out.into())
    }

    /// Address and size of symbol `name` (`.symtab`).
    fn symbol(&self, name: &str) -> Option<(u64, u64)> {
        let symtab = self.sections.iter().find(|s| s.kind == SHT_SYMTAB)?;
        let strtab = self.sections.get(symtab.link as usize)?;
        let syms = self.bytes(symtab)?;
        let strs = self.bytes(strtab)?;
        syms.chunks_exact(24).find_map(|sym| {
            let off = u32_at(sym, 0)? as usize;
            let n = name.as_bytes();
            (strs.get(off..off + n.len())? == n && strs.get(off + n.len()) == Some(&0))
                .then(|| Some((u64_at(sym, 8)?, u64_at(sym, 16)?)))?
        })
    }

    /// `len` bytes at virtual address `addr` (from the section holding them).
    fn at(&self, addr: u64, len: u64) -> Option<&'a [u8]> {
        let s = self.sections.iter().find(|s| {
            s.kind != SHT_NOBITS && s.addr != 0 && s.addr <= addr && addr + len <= s.addr + s.size
        })?;
        let start = (s.offset + (addr - s.addr)) as usize;
        self.data.get(start..start + len as usize)
    }

    /// A Go string header (pointer, length) at `addr`, and its text.
    fn go_string(&self, addr: u64) -> Option<String> {
        let h = self.at(addr, 16)?;
        let (ptr, len) = (u64_at(h, 0)?, u64_at(h, 8)?);
        if len > 4096 {
            return None;
        }
        if len == 0 {
            return Some(String::new());
        }
        Some(String::from_utf8_lossy(self.at(ptr, len)?).into_owned())
    }
}

fn cstr(d: &[u8], at: usize) -> Option<String> {
    let rest = d.get(at..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    Some(String::from_utf8_lossy(&rest[..end]).into_owned())
}

/// True when the file at `path` is a Go binary (has `.go.buildinfo`), without reading it
/// all: the section headers only.
pub fn is_go_binary(path: &Path) -> bool {
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    // SAFETY: a read-only private mapping; a file truncated under us could fault the
    // reader, as with every mapped object the symbolizer reads (docs/FORMAT.md notes the
    // same for traces). Executables being run cannot be written (ETXTBSY).
    let Ok(map) = (unsafe { memmap2::Mmap::map(&f) }) else {
        return false;
    };
    Elf::parse(&map).is_some_and(|e| e.section(".go.buildinfo").is_some())
}

/// The Go version of a binary: `.go.buildinfo` (Go 1.18+: the version string inline after
/// the 32-byte header), else the `runtime.buildVersion` string.
fn go_version(elf: &Elf<'_>) -> Option<String> {
    let inline = elf
        .section(".go.buildinfo")
        .and_then(|s| elf.bytes(s))
        .filter(|b| b.starts_with(b"\xff Go buildinf:") && b.get(15).is_some_and(|f| f & 2 != 0))
        .and_then(|b| {
            let (len, n) = uvarint(b.get(32..)?)?;
            let v = b.get(32 + n..32 + n + len as usize)?;
            Some(String::from_utf8_lossy(v).into_owned())
        });
    inline.or_else(|| {
        let (addr, _) = elf.symbol("runtime.buildVersion")?;
        elf.go_string(addr)
    })
}

fn uvarint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &c) in b.iter().take(10).enumerate() {
        v |= u64::from(c & 0x7f) << (7 * i);
        if c & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// `go1.19.8` → `1.19.8`; `1.19.8` → its minor `1.19`.
fn minor_of(version: &str) -> String {
    version.splitn(3, '.').take(2).collect::<Vec<_>>().join(".")
}

/// Offsets of `runtime.g.goid`, `runtime.g.m`, `runtime.m.curg` from the binary's DWARF.
fn dwarf_layout(elf: &Elf<'_>) -> Result<GoLayout, String> {
    let empty: std::borrow::Cow<'_, [u8]> = (&[][..]).into();
    let load = |id: gimli::SectionId| -> Result<std::borrow::Cow<'_, [u8]>, gimli::Error> {
        Ok(elf.contents(id.name()).unwrap_or_else(|| empty.clone()))
    };
    if elf.contents(".debug_info").is_none_or(|d| d.is_empty()) {
        return Err("no DWARF (built with -ldflags=-w?)".into());
    }
    let owned = gimli::DwarfSections::load(load).map_err(|e: gimli::Error| e.to_string())?;
    let dwarf = owned.borrow(|s| gimli::EndianSlice::new(s, gimli::LittleEndian));
    let mut want: HashMap<(&str, &str), Option<u64>> = [
        (("runtime.g", "goid"), None),
        (("runtime.g", "m"), None),
        (("runtime.m", "curg"), None),
        (("runtime.pollDesc", "rg"), None),
        (("runtime.pollDesc", "wg"), None),
        (("runtime.m", "preemptoff"), None),
    ]
    .into_iter()
    .collect();
    let mut units = dwarf.units();
    let err = |e: gimli::Error| e.to_string();
    while let Some(header) = units.next().map_err(err)? {
        let unit = dwarf.unit(header).map_err(err)?;
        let mut tree = unit.entries_tree(None).map_err(err)?;
        let root = tree.root().map_err(err)?;
        let mut children = root.children();
        while let Some(child) = children.next().map_err(err)? {
            let e = child.entry();
            if e.tag() != gimli::DW_TAG_structure_type {
                continue;
            }
            let Some(name) = e.attr_value(gimli::DW_AT_name) else {
                continue;
            };
            let name = dwarf.attr_string(&unit, name).map_err(err)?;
            let sname = match name.slice() {
                b"runtime.g" => "runtime.g",
                b"runtime.m" => "runtime.m",
                b"runtime.pollDesc" => "runtime.pollDesc",
                _ => continue,
            };
            let mut members = child.children();
            while let Some(m) = members.next().map_err(err)? {
                let me = m.entry();
                let (Some(n), Some(loc)) = (
                    me.attr_value(gimli::DW_AT_name),
                    me.attr_value(gimli::DW_AT_data_member_location),
                ) else {
                    continue;
                };
                let n = dwarf.attr_string(&unit, n).map_err(err)?;
                let Ok(n) = std::str::from_utf8(n.slice()) else {
                    continue;
                };
                for (k, v) in want.iter_mut() {
                    if k.0 == sname && k.1 == n {
                        *v = loc.udata_value();
                    }
                }
            }
        }
    }
    let get = |k: (&str, &str)| -> Result<u16, String> {
        want.get(&k)
            .copied()
            .flatten()
            .and_then(|v| u16::try_from(v).ok())
            .ok_or_else(|| format!("{}.{} not in the DWARF", k.0, k.1))
    };
    Ok(GoLayout {
        g_goid: get(("runtime.g", "goid"))?,
        g_m: get(("runtime.g", "m"))?,
        m_curg: get(("runtime.m", "curg"))?,
        pd_rg: get(("runtime.pollDesc", "rg"))?,
        pd_wg: get(("runtime.pollDesc", "wg"))?,
        m_preemptoff: get(("runtime.m", "preemptoff"))?,
    })
}

impl GoBinary {
    /// Inspect the Go binary at `path`: its version, offsets and wait reasons, or why its
    /// goroutines cannot be recorded.
    pub fn inspect(path: &Path) -> Result<GoBinary, GoError> {
        let read = |error: String| GoError::Read {
            path: path.to_path_buf(),
            error,
        };
        let f = std::fs::File::open(path).map_err(|e| read(e.to_string()))?;
        // SAFETY: as in `is_go_binary`: read-only, and a running executable cannot be
        // written.
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|e| read(e.to_string()))?;
        let elf = Elf::parse(&map).ok_or(GoError::NotElf)?;
        if elf.section(".go.buildinfo").is_none() {
            return Err(GoError::NotGo);
        }
        let version = go_version(&elf)
            .map(|v| v.trim_start_matches("go").to_string())
            .ok_or(GoError::Symbol("runtime.buildVersion"))?;
        let minor = minor_of(&version);
        let Some(&(_, table)) = KNOWN.iter().find(|(v, _)| *v == minor) else {
            return Err(GoError::Version { version });
        };
        for sym in PROBED {
            elf.symbol(sym).ok_or(GoError::Symbol(sym))?;
        }
        let (mut layout, source) = match dwarf_layout(&elf) {
            Ok(l) => (l, LayoutSource::Dwarf),
            Err(_) => (table, LayoutSource::Table),
        };
        if table.m_preemptoff == 0 {
            // Go 1.22+: the stop-the-world reason is in a register, not m.preemptoff.
            layout.m_preemptoff = 0;
        }
        Ok(GoBinary {
            version,
            layout,
            source,
            reasons: wait_reasons(&elf),
            started_at: call_site(&elf, PROBED[5], "runtime.wakep"),
        })
    }

    /// The BPF side's `struct go_layout`.
    fn bpf_value(&self) -> Vec<u8> {
        let l = self.layout;
        [l.g_goid, l.g_m, l.m_curg, l.pd_rg, l.pd_wg, l.m_preemptoff]
            .iter()
            .flat_map(|x| x.to_ne_bytes())
            .collect()
    }
}

/// `runtime.waitReasonStrings` (an array of Go strings), by wait reason value.
fn wait_reasons(elf: &Elf<'_>) -> Vec<String> {
    let Some((addr, size)) = elf.symbol("runtime.waitReasonStrings") else {
        return Vec::new();
    };
    (0..(size / 16).min(256))
        .map(|i| elf.go_string(addr + 16 * i).unwrap_or_default())
        .collect()
}

/// `--go` and the cap (parts of `RecordOptions`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoOptions {
    /// Probe the Go binaries of the processes the recording sees (default).
    pub auto: bool,
    /// Binaries named with `--go`, probed from the start.
    pub binaries: Vec<PathBuf>,
    /// Probe hits per second (park, ready, netpoll and execute, per binary) above which that binary's probes
    /// are detached (0: no cap).
    pub max_rate: u64,
}

impl Default for GoOptions {
    fn default() -> Self {
        GoOptions {
            auto: true,
            binaries: Vec::new(),
            max_rate: DEFAULT_MAX_RATE,
        }
    }
}

/// The default cap: 50,000 probe hits per second and binary. A hit costs the traced
/// threads about 4 µs here (the uprobe trap, the program and its stack walk:
/// docs/BENCHMARKS.md, "Session 24"), so a binary just under the cap pays up to ~0.2 CPU;
/// the test program's goroutines, waiting >= 1 ms, make ~4,000 hits per second.
pub const DEFAULT_MAX_RATE: u64 = 50_000;

/// The rate is judged over windows of this long (from the first poll that sees a hit): a
/// window's budget is the cap times its length (2,500 hits at the default cap), and the
/// probes go at the first poll (every 20 ms) that finds the budget spent, before the window
/// ends. Short, because until the cap acts a program over it runs many times slower (the
/// channel ping-pong: ~75x); long enough that a short burst does not end the probing.
const RATE_WINDOW_NS: u64 = 50_000_000;

/// One probed binary.
struct Slot {
    path: PathBuf,
    binary: GoBinary,
    /// When the cap detached its probes (0: not).
    capped_ns: u64,
}

/// What the cap thread saw of one slot: hits (summed over CPUs), the highest rate of a
/// window, and when it detached the probes (0: not).
#[derive(Clone, Copy, Debug, Default)]
struct SlotRate {
    hits: u64,
    max_rate: f64,
    capped_ns: u64,
}

/// A probed binary as the cap thread holds it: its links and its current window.
struct Watched {
    slot: usize,
    links: Vec<libbpf_rs::Link>,
    window_at: u64,
    hits_at: u64,
}

/// The cap's own thread: it reads the hit counts every 10 ms and drops a binary's links
/// when a window's budget is spent. Not the consumer's loop: that one may spend a few
/// hundred ms symbolizing a big binary first seen, while a program over the cap runs
/// ~25x slower.
struct Capper {
    tx: std::sync::mpsc::Sender<(usize, Vec<libbpf_rs::Link>)>,
    rates: std::sync::Arc<std::sync::Mutex<Vec<SlotRate>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How often the cap thread reads the hit counts.
const CAP_PERIOD: std::time::Duration = std::time::Duration::from_millis(10);

impl Capper {
    fn start(map: libbpf_rs::MapHandle, max_rate: u64) -> std::io::Result<Capper> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::{Arc, Mutex};
        let (tx, rx) = std::sync::mpsc::channel::<(usize, Vec<libbpf_rs::Link>)>();
        let rates = Arc::new(Mutex::new(vec![SlotRate::default(); raw_slots()]));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, st) = (rates.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("chainrec-go-cap".into())
            .spawn(move || {
                let mut watched: Vec<Watched> = Vec::new();
                let mut dropping = Vec::new();
                while !st.load(Ordering::Relaxed) {
                    watched.extend(rx.try_iter().map(|(slot, links)| Watched {
                        slot,
                        links,
                        window_at: 0,
                        hits_at: 0,
                    }));
                    let now = crate::workload::monotonic_ns();
                    for w in watched.iter_mut().filter(|w| !w.links.is_empty()) {
                        let Some(hits) = slot_hits(&map, w.slot) else {
                            continue;
                        };
                        let Ok(mut rates) = r.lock() else {
                            return;
                        };
                        let rate = &mut rates[w.slot];
                        rate.hits = hits;
                        if !window(w, rate, hits, now, max_rate) {
                            continue;
                        }
                        rate.capped_ns = now;
                        // Each link's drop waits for the kernel to take its probe out of
                        // every process (~0.1 s here): one thread each, both at once.
                        for link in w.links.drain(..) {
                            if let Ok(t) = std::thread::Builder::new()
                                .name("chainrec-go-detach".into())
                                .spawn(move || drop(link))
                            {
                                dropping.push(t);
                            }
                        }
                    }
                    std::thread::sleep(CAP_PERIOD);
                }
                drop(watched);
                for t in dropping {
                    let _ = t.join();
                }
            })?;
        Ok(Capper {
            tx,
            rates,
            stop,
            thread: Some(thread),
        })
    }

    /// The rates as last read.
    fn rates(&self) -> Vec<SlotRate> {
        self.rates.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Stop the thread; every link it holds is dropped (the probes detached).
    fn stop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Hits of `slot`, summed over CPUs.
fn slot_hits(map: &libbpf_rs::MapHandle, slot: usize) -> Option<u64> {
    use libbpf_rs::MapCore;
    let per_cpu = map
        .lookup_percpu(&(slot as u32).to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .ok()??;
    Some(
        per_cpu
            .iter()
            .filter_map(|v| Some(u64::from_ne_bytes(v.get(..8)?.try_into().ok()?)))
            .sum(),
    )
}

/// One reading of a binary's hits at `now`: true when its window's budget (the cap times
/// the window's length) is spent, i.e. the probes must go. A window starts at the first
/// reading that sees a hit and is renewed once it has lasted its length.
fn window(w: &mut Watched, rate: &mut SlotRate, hits: u64, now: u64, max_rate: u64) -> bool {
    if w.window_at == 0 {
        if hits > 0 {
            (w.window_at, w.hits_at) = (now, hits);
        }
        return false;
    }
    let dt = now.saturating_sub(w.window_at);
    let in_window = hits - w.hits_at.min(hits);
    let budget = max_rate as f64 * RATE_WINDOW_NS as f64 * 1e-9;
    let spent = max_rate > 0 && in_window as f64 > budget;
    if dt < RATE_WINDOW_NS && !spent {
        return false;
    }
    rate.max_rate = rate
        .max_rate
        .max(in_window as f64 * 1e9 / dt.max(RATE_WINDOW_NS / 5) as f64);
    (w.window_at, w.hits_at) = (now, hits);
    spent
}

/// What the goroutine probes did (summary, `--summary-json` `goroutines`, metadata).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GoCounts {
    /// Binaries probed: (path, Go version, offsets from DWARF or the table).
    pub binaries: Vec<(String, String, &'static str)>,
    /// Go binaries not probed, with why ("not supported: Go 1.21.3", ...).
    pub unsupported: Vec<(String, String)>,
    /// Go processes whose records the trace holds.
    pub processes: u64,
    /// Parks and readies written.
    pub parks: u64,
    /// See [`GoCounts::parks`].
    pub readies: u64,
    /// Executes written (a goroutine started running; format 2.3).
    pub executes: u64,
    /// Stop-the-world stops and starts written (format 2.4).
    pub stws: u64,
    /// Probe hits (all binaries).
    pub hits: u64,
    /// The highest hit rate of a binary over a window (per second).
    pub max_rate: f64,
    /// Binaries whose probes were detached by the cap: (path, trace time).
    pub capped: Vec<(String, u64)>,
    /// Records without a stack (scratch held by a preempted probe on the same CPU).
    pub no_stack: u64,
    /// Records dropped: the goroutine was unreadable.
    pub read_failed: u64,
    /// Records lost to a full ring buffer.
    pub lost: u64,
    /// Bytes the records took in the ring buffer (header, argument word, frames; the
    /// ring's own 8-byte record header not included).
    pub ring_bytes: u64,
}

impl std::fmt::Display for GoCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} binaries probed, {} not supported, {} processes; {} parks, {} readies, \
             {} executes, {} stop-the-world records ({} probe hits, at most {:.0}/s per binary); {} capped (thread-level chains \
             from then on); {:.0} ring bytes per record; {} without stack, {} unreadable, \
             {} lost (ring buffer full)",
            self.binaries.len(),
            self.unsupported.len(),
            self.processes,
            self.parks,
            self.readies,
            self.executes,
            self.stws,
            self.hits,
            self.max_rate,
            self.capped.len(),
            self.ring_bytes as f64 / (self.parks + self.readies + self.executes + self.stws).max(1) as f64,
            self.no_stack,
            self.read_failed,
            self.lost
        )?;
        for (path, version, source) in &self.binaries {
            write!(f, "; {path}: Go {version}, offsets from {source}")?;
        }
        for (path, why) in &self.unsupported {
            write!(f, "; {path}: {why}")?;
        }
        for (path, ts) in &self.capped {
            write!(f, "; {path} capped at {ts} ns")?;
        }
        Ok(())
    }
}

impl GoCounts {
    /// As `--summary-json`'s `goroutines` object.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "binaries": self.binaries.iter().map(|(p, v, s)| serde_json::json!({
                "path": p, "version": v, "offsets": s,
            })).collect::<Vec<_>>(),
            "unsupported": self.unsupported.iter().map(|(p, w)| serde_json::json!({
                "path": p, "why": w,
            })).collect::<Vec<_>>(),
            "processes": self.processes,
            "parks": self.parks,
            "readies": self.readies,
            "executes": self.executes,
            "stws": self.stws,
            "probe_hits": self.hits,
            "max_rate_per_s": self.max_rate,
            "capped": self.capped.iter().map(|(p, t)| serde_json::json!({
                "path": p, "ts": t,
            })).collect::<Vec<_>>(),
            "no_stack": self.no_stack,
            "read_failed": self.read_failed,
            "lost": self.lost,
            "ring_bytes": self.ring_bytes,
        })
    }
}

/// The goroutine probes of a recording: binaries found, slots, the cap, the records
/// waiting for the next goroutine section.
pub(crate) struct GoProbes {
    opts: GoOptions,
    slots: Vec<Slot>,
    /// Binaries already looked at, by (device, inode): their slot, or None.
    seen_files: HashMap<(u64, u64), Option<usize>>,
    /// Processes already looked at.
    seen_tgids: HashSet<Tid>,
    /// Processes to look at (first sightings since the last poll).
    new_tgids: Vec<Tid>,
    /// Processes whose `GoProcess` entry went out, with their binary's slot.
    described: HashMap<Tid, usize>,
    pub(crate) pending: GoDelta,
    pub(crate) counts: GoCounts,
    /// The cap's thread, holding the probes' links (started with the first probe).
    capper: Option<Capper>,
}

impl Drop for GoProbes {
    fn drop(&mut self) {
        self.stop();
    }
}

impl GoProbes {
    pub(crate) fn new(opts: GoOptions) -> Self {
        GoProbes {
            opts,
            slots: Vec::new(),
            seen_files: HashMap::new(),
            seen_tgids: HashSet::new(),
            new_tgids: Vec::new(),
            described: HashMap::new(),
            pending: GoDelta::default(),
            counts: GoCounts::default(),
            capper: None,
        }
    }

    /// Whether the goroutine programs are needed at all.
    pub(crate) fn wanted(opts: &GoOptions) -> bool {
        opts.auto || !opts.binaries.is_empty()
    }

    /// Probe the binaries named with `--go` (before the command starts). A binary that is
    /// not a supported Go binary is an error: the user asked for it.
    pub(crate) fn attach_named(
        &mut self,
        skel: &crate::skel::ChainrecSkel<'_>,
    ) -> Result<(), (PathBuf, GoError)> {
        for path in self.opts.binaries.clone() {
            self.probe_file(skel, &path, &path)
                .map_err(|e| (path.clone(), e))?;
        }
        Ok(())
    }

    /// A process seen for the first time (its comm record): looked at in the next poll.
    pub(crate) fn saw_process(&mut self, tgid: Tid) {
        if self.opts.auto && tgid != 0 && self.seen_tgids.insert(tgid) {
            self.new_tgids.push(tgid);
        }
    }

    /// A process exec'd: its new program is looked at.
    pub(crate) fn exec(&mut self, tgid: Tid) {
        self.seen_tgids.remove(&tgid);
        self.described.remove(&tgid);
        self.saw_process(tgid);
    }

    /// Look at the processes seen since the last poll (attach to new Go binaries), and
    /// apply the cap.
    pub(crate) fn poll(&mut self, skel: &crate::skel::ChainrecSkel<'_>, now: u64) {
        for tgid in std::mem::take(&mut self.new_tgids) {
            let exe = PathBuf::from(format!("/proc/{tgid}/exe"));
            let Ok(path) = std::fs::read_link(&exe) else {
                continue; // exited, or a kernel thread
            };
            // Attach through /proc/PID/exe: the same inode whatever mount namespace or
            // deleted path the process has.
            if let Err(e) = self.probe_file(skel, &exe, &path) {
                if !matches!(e, GoError::NotElf | GoError::NotGo | GoError::Read { .. }) {
                    self.counts
                        .unsupported
                        .push((path.display().to_string(), e.to_string()));
                }
            }
        }
        let _ = now; // the cap has its own thread and clock (Capper)
        self.take_capped();
    }

    /// Detach every probe (the recording is stopping).
    pub(crate) fn stop(&mut self) {
        if let Some(c) = self.capper.as_mut() {
            c.stop();
        }
    }

    /// Probe the file at `open` (named `path` in reports) if it is a Go binary not yet
    /// looked at. Ok also when it is not a Go binary (nothing to do) or already probed.
    fn probe_file(
        &mut self,
        skel: &crate::skel::ChainrecSkel<'_>,
        open: &Path,
        path: &Path,
    ) -> Result<(), GoError> {
        let md = std::fs::metadata(open).map_err(|e| GoError::Read {
            path: path.to_path_buf(),
            error: e.to_string(),
        })?;
        let key = (md.dev(), md.ino());
        if self.seen_files.contains_key(&key) {
            return Ok(());
        }
        self.seen_files.insert(key, None);
        if !is_go_binary(open) {
            return if self.opts.binaries.iter().any(|b| b == path) {
                Err(GoError::NotGo)
            } else {
                Ok(())
            };
        }
        let binary = GoBinary::inspect(open)?;
        if self.slots.len() >= raw_slots() {
            return Err(GoError::Slots(raw_slots()));
        }
        let slot = self.slots.len();
        use libbpf_rs::MapCore;
        skel.maps
            .go_layouts
            .update(
                &(slot as u32).to_ne_bytes(),
                &binary.bpf_value(),
                libbpf_rs::MapFlags::ANY,
            )
            .map_err(|e| GoError::Attach {
                symbol: "go_layouts",
                error: e.to_string(),
            })?;
        let mut links = Vec::new();
        for ((prog, symbol), offset) in [
            &skel.progs.go_park,
            &skel.progs.go_ready,
            &skel.progs.go_netpoll,
            &skel.progs.go_execute,
            &skel.progs.go_stw_stop,
            &skel.progs.go_stw_start,
        ]
        .into_iter()
        .zip(PROBED)
        .zip([0, 0, 0, 0, 0, binary.started_at as usize])
        {
            let opts = libbpf_rs::UprobeOpts {
                cookie: slot as u64,
                func_name: Some(symbol.to_string()),
                ..Default::default()
            };
            links.push(
                prog.attach_uprobe_with_opts(-1, open, offset, opts)
                    .map_err(|e| GoError::Attach {
                        symbol,
                        error: e.to_string(),
                    })?,
            );
        }
        self.counts.binaries.push((
            path.display().to_string(),
            binary.version.clone(),
            match binary.source {
                LayoutSource::Dwarf => "DWARF",
                LayoutSource::Table => "the table of known versions",
            },
        ));
        if self.capper.is_none() {
            let map = libbpf_rs::MapHandle::try_from(&skel.maps.go_hits).map_err(|e| {
                GoError::Attach {
                    symbol: "go_hits",
                    error: e.to_string(),
                }
            })?;
            self.capper =
                Some(
                    Capper::start(map, self.opts.max_rate).map_err(|e| GoError::Attach {
                        symbol: "the cap thread",
                        error: e.to_string(),
                    })?,
                );
        }
        if let Some(c) = &self.capper {
            // A send fails only when the thread has ended: the links are then dropped.
            let _ = c.tx.send((slot, links));
        }
        self.slots.push(Slot {
            path: path.to_path_buf(),
            binary,
            capped_ns: 0,
        });
        self.seen_files.insert(key, Some(slot));
        Ok(())
    }

    /// Binaries the cap thread detached since the last call: counted, and their processes'
    /// entries written again with the time (a later entry replaces the earlier one).
    pub(crate) fn take_capped(&mut self) {
        let Some(c) = &self.capper else {
            return;
        };
        for (i, rate) in c.rates().iter().enumerate() {
            let Some(s) = self.slots.get_mut(i) else {
                break;
            };
            if rate.capped_ns == 0 || s.capped_ns != 0 {
                continue;
            }
            s.capped_ns = rate.capped_ns;
            self.counts
                .capped
                .push((s.path.display().to_string(), rate.capped_ns));
            for (&tgid, _) in self.described.iter().filter(|(_, &slot)| slot == i) {
                self.pending.processes.push(s.process(tgid));
            }
        }
    }

    /// A goroutine record of slot `slot`: kept for the next section (with its process's
    /// description the first time).
    pub(crate) fn record(&mut self, slot: usize, ev: GoEvent, ring_bytes: u64) {
        self.counts.ring_bytes += ring_bytes;
        let Some(s) = self.slots.get(slot) else {
            return;
        };
        if self.described.insert(ev.tgid, slot).is_none() {
            self.counts.processes += 1;
            self.pending.processes.push(s.process(ev.tgid));
        }
        match ev.kind {
            chainrec_format::GoEventKind::Park => self.counts.parks += 1,
            chainrec_format::GoEventKind::Ready => self.counts.readies += 1,
        }
        self.pending.events.push(ev);
    }

    /// An execute record of slot `slot`, kept for the next execute section.
    pub(crate) fn record_execute(&mut self, slot: usize, x: GoExecute, ring_bytes: u64) {
        self.counts.ring_bytes += ring_bytes;
        if self.slots.get(slot).is_none() {
            return;
        }
        self.counts.executes += 1;
        self.pending.executes.push(x);
    }

    /// A stop-the-world record of slot `slot`, kept for the next stop-the-world section.
    pub(crate) fn record_stw(&mut self, slot: usize, x: GoStw, ring_bytes: u64) {
        self.counts.ring_bytes += ring_bytes;
        if self.slots.get(slot).is_none() {
            return;
        }
        self.counts.stws += 1;
        self.pending.stws.push(x);
    }

    /// The records for the next section, sorted by time.
    pub(crate) fn take_pending(&mut self) -> GoDelta {
        let mut d = std::mem::take(&mut self.pending);
        d.events.sort_by_key(|e| e.ts);
        d.executes.sort_by_key(|e| e.ts);
        d.stws.sort_by_key(|e| e.ts);
        d
    }

    /// The final counts, with the BPF side's counters (`C_GO_*`).
    pub(crate) fn final_counts(&self, no_stack: u64, read_failed: u64, lost: u64) -> GoCounts {
        let mut c = self.counts.clone();
        let rates = self.capper.as_ref().map(Capper::rates).unwrap_or_default();
        c.hits = rates.iter().map(|r| r.hits).sum();
        c.max_rate = rates.iter().map(|r| r.max_rate).fold(0.0, f64::max);
        c.no_stack = no_stack;
        c.read_failed = read_failed;
        c.lost = lost;
        c
    }
}

impl Slot {
    /// The trace's description of process `tgid` of this binary.
    fn process(&self, tgid: Tid) -> GoProcess {
        GoProcess {
            tgid,
            version: self.binary.version.clone(),
            reasons: self.binary.reasons.clone(),
            capped_ns: self.capped_ns,
        }
    }
}

fn raw_slots() -> usize {
    crate::raw::GO_SLOTS as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_varints() {
        assert_eq!(minor_of("1.19.8"), "1.19");
        assert_eq!(minor_of("1.24"), "1.24");
        assert_eq!(uvarint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(uvarint(&[0x80; 11]), None);
        let e = GoError::Version {
            version: "1.21.3".into(),
        };
        assert_eq!(
            e.to_string(),
            "not supported: Go 1.21.3 (goroutine probes know Go 1.19 and 1.24 only)"
        );
        // The message names every version of the table, and nothing else.
        let said: Vec<&str> = "1.19 and 1.24".split(" and ").collect();
        let known: Vec<&str> = KNOWN.iter().map(|(v, _)| *v).collect();
        assert_eq!(said, known);
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        let dir = std::env::temp_dir().join(format!("chainrec-go-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("junk");
        for bytes in [&b""[..], b"\x7fELF\x02\x01", &[0xffu8; 200][..]] {
            std::fs::write(&p, bytes).unwrap();
            assert!(!is_go_binary(&p));
            assert!(GoBinary::inspect(&p).is_err());
        }
        let mut elf = b"\x7fELF\x02\x01".to_vec();
        elf.resize(64, 0);
        elf[0x3c] = 0xff; // 255 sections, none there
        elf[0x3a] = 64;
        std::fs::write(&p, &elf).unwrap();
        assert!(matches!(GoBinary::inspect(&p), Err(GoError::NotElf)));
        assert!(matches!(
            GoBinary::inspect(&dir.join("missing")),
            Err(GoError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! User-space symbols from where users keep them: the object's own symbol tables and
//! DWARF (inlined functions included), its `.gnu_debuglink` next to it or under the debug
//! directories, a debug file found by build id (`DIR/.build-id/xx/rest.debug`, also for
//! an object that is not on this machine: analysis with `--debug-dir`), and perf map
//! files (`/tmp/perf-PID.map`, written by JITs) for anonymous executable memory.
//!
//! Objects are addressed by file offset (what a recorded mapping gives for a frame), so a
//! process need not be alive. The recorder (`chainrec-record`) and the analysis
//! commands share this crate; it is pure Rust (blazesym, gimli).

mod elf;
pub mod jitdump;
mod perfmap;

pub use elf::{build_id_of, vaddr_delta};
pub use perfmap::PerfMap;

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Reason, Symbolized, Symbolizer as Blaze};
use chainrec_format::{MappingEntry, StackKind, Symbol, SymbolEntry, Tables, Tid};
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Debug directories searched after the ones given (as gdb and perf do).
pub const DEFAULT_DEBUG_DIRS: [&str; 2] = ["/usr/lib/debug", "/lib/debug"];

/// Why a user frame has no name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unresolved {
    /// The address is in no known mapping of its process (mostly stale values a
    /// frame-pointer walk read past code without frame pointers).
    NoMapping,
    /// The mapped file is gone (or unreadable) and no debug file matches its build id.
    FileGone,
    /// Anonymous executable memory (JIT code) that no perf map file names.
    Jit,
    /// The object (and its debug files) has no symbol covering the address.
    NoSymbol,
}

impl Unresolved {
    /// Every reason, in the order summaries list them.
    pub const ALL: [Unresolved; 4] = [
        Unresolved::NoMapping,
        Unresolved::FileGone,
        Unresolved::Jit,
        Unresolved::NoSymbol,
    ];

    /// Short label: `no mapping`, `file gone`, `jit without perf map`, `no symbol`.
    pub fn label(self) -> &'static str {
        match self {
            Unresolved::NoMapping => "no mapping",
            Unresolved::FileGone => "file gone",
            Unresolved::Jit => "jit without perf map",
            Unresolved::NoSymbol => "no symbol",
        }
    }
}

/// Counts of unresolved user frames by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnresolvedCounts {
    /// By [`Unresolved`] (indexed as [`Unresolved::ALL`]).
    pub by_reason: [u64; 4],
}

impl UnresolvedCounts {
    /// Count one.
    pub fn add(&mut self, r: Unresolved) {
        self.by_reason[r as usize] += 1;
    }

    /// Total.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().sum()
    }

    /// `no mapping N, file gone N, jit without perf map N, no symbol N`.
    pub fn by_reason_text(&self) -> String {
        Unresolved::ALL
            .iter()
            .map(|r| format!("{} {}", r.label(), self.by_reason[*r as usize]))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A resolved frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSymbol {
    /// Function name (demangled). With inlined functions (DWARF), the innermost call
    /// sits at the address: see [`FrameSymbol::inlined`].
    pub name: String,
    /// Address minus the function's start.
    pub offset: u64,
    /// Functions inlined at the address, outermost first (the innermost is where the
    /// address really is). Empty without DWARF.
    pub inlined: Vec<String>,
}

impl FrameSymbol {
    /// The name the trace stores for the address (one name per address in its symbol
    /// table): the function, then each inlined function marked `[inlined]`, outermost
    /// first, separated by `;` like folded frames (perf shows inlined functions as frames
    /// of their own the same way). Readers split it into frames of their own, leaf first
    /// (`chainrec_chain::split_inlined`, through `stack_frames`), so that each view puts
    /// them in its own stack order: a waker's level, written leaf to root, shows
    /// `inner [inlined];outer [inlined];function`.
    pub fn display_name(&self) -> String {
        let mut s = self.name.clone();
        for f in &self.inlined {
            s.push(';');
            s.push_str(f);
            s.push_str(" [inlined]");
        }
        s
    }
}

/// The object behind a frame, as a recorded mapping describes it.
#[derive(Clone, Copy, Debug)]
pub struct ObjectRef<'a> {
    /// Path on the recording machine.
    pub path: &'a str,
    /// GNU build id, when known.
    pub build_id: Option<&'a [u8]>,
    /// ELF virtual address minus file offset of the mapped segment
    /// ([`vaddr_delta`]; 0 for most objects), needed to use a debug file found by build
    /// id alone.
    pub vaddr_delta: Option<u64>,
}

/// Resolves user frames by object and file offset. Caches parsed files; not `Send`
/// (blazesym's caches are single-threaded).
pub struct Symbolizer {
    blaze: Blaze,
    debug_dirs: Vec<PathBuf>,
    /// Debug file by build id (None: none in any debug directory).
    by_build_id: RefCell<HashMap<Vec<u8>, Option<PathBuf>>>,
    /// Perf map files by process, with the size they had when read.
    perf_maps: RefCell<HashMap<Tid, (u64, Option<PerfMap>)>>,
    /// Where perf map files are (`/tmp`).
    perf_map_dir: PathBuf,
    /// Jitdump files by process.
    jitdumps: RefCell<HashMap<Tid, JitDump>>,
    /// Start of this process's own `[vdso]`.
    own_vdso: std::cell::OnceCell<Option<u64>>,
    /// PLT stubs by object file (None: no PLT, or unreadable).
    plts: RefCell<HashMap<PathBuf, Option<std::rc::Rc<elf::PltTable>>>>,
}

/// A process's jitdump file as last read.
struct JitDump {
    /// None: the process maps none.
    path: Option<PathBuf>,
    /// Its size when read.
    size: u64,
    symbols: Option<PerfMap>,
}

impl Symbolizer {
    /// A symbolizer searching `extra_debug_dirs` first, then the default debug
    /// directories ([`DEFAULT_DEBUG_DIRS`]).
    pub fn new(extra_debug_dirs: &[PathBuf]) -> Self {
        let mut debug_dirs: Vec<PathBuf> = extra_debug_dirs.to_vec();
        debug_dirs.extend(DEFAULT_DEBUG_DIRS.iter().map(PathBuf::from));
        let blaze = Blaze::builder()
            .set_debug_dirs(Some(&debug_dirs))
            // Inlined functions come with the line tables (blazesym looks both up together).
            .enable_inlined_fns(true)
            .enable_code_info(true)
            .build();
        Symbolizer {
            blaze,
            debug_dirs,
            by_build_id: RefCell::new(HashMap::new()),
            perf_maps: RefCell::new(HashMap::new()),
            perf_map_dir: PathBuf::from("/tmp"),
            jitdumps: RefCell::new(HashMap::new()),
            own_vdso: std::cell::OnceCell::new(),
            plts: RefCell::new(HashMap::new()),
        }
    }

    /// Read perf map files from `dir` instead of `/tmp` (tests).
    pub fn with_perf_map_dir(mut self, dir: &Path) -> Self {
        self.perf_map_dir = dir.to_path_buf();
        self
    }

    /// The debug file of `build_id` in the debug directories
    /// (`DIR/.build-id/xx/rest.debug`), if one exists.
    pub fn debug_file_by_build_id(&self, build_id: &[u8]) -> Option<PathBuf> {
        if build_id.len() < 2 {
            return None;
        }
        let mut cache = self.by_build_id.borrow_mut();
        cache
            .entry(build_id.to_vec())
            .or_insert_with(|| {
                let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
                self.debug_dirs
                    .iter()
                    .map(|d| {
                        d.join(".build-id")
                            .join(&hex[..2])
                            .join(format!("{}.debug", &hex[2..]))
                    })
                    .find(|p| p.is_file())
            })
            .clone()
    }

    /// Resolve file offsets of one object: from a debug file with its build id when one
    /// is installed (the most complete names: `.symtab` and DWARF), else from the file
    /// itself (symbol tables, its own DWARF, and the debug file its `.gnu_debuglink`
    /// names, next to it or under the debug directories). One result per offset.
    pub fn resolve_object(
        &self,
        obj: &ObjectRef<'_>,
        file_offsets: &[u64],
    ) -> Vec<Result<FrameSymbol, Unresolved>> {
        let mut out: Vec<Result<FrameSymbol, Unresolved>> =
            vec![Err(Unresolved::FileGone); file_offsets.len()];
        if file_offsets.is_empty() {
            return out;
        }
        let file = Path::new(obj.path);
        let file_ok = file.is_file()
            && match (obj.build_id, build_id_of(file)) {
                (Some(want), Some(have)) => want == have.as_slice(),
                _ => true,
            };
        let debug = obj.build_id.and_then(|b| self.debug_file_by_build_id(b));
        if let (Some(debug), Some(delta)) = (&debug, obj.vaddr_delta) {
            let vaddrs: Vec<u64> = file_offsets.iter().map(|o| o.wrapping_add(delta)).collect();
            let src = Source::Elf(Elf::new(debug));
            if let Ok(syms) = self.blaze.symbolize(&src, Input::VirtOffset(&vaddrs)) {
                fill(&mut out, syms);
            }
        }
        if file_ok && out.iter().any(|r| r.is_err()) {
            let src = Source::Elf(Elf::new(file));
            if let Ok(syms) = self.blaze.symbolize(&src, Input::FileOffset(file_offsets)) {
                let mut from_file = vec![Err(Unresolved::NoSymbol); file_offsets.len()];
                fill(&mut from_file, syms);
                for (o, f) in out.iter_mut().zip(from_file) {
                    if o.is_err() {
                        *o = f;
                    }
                }
            }
        }
        if file_ok {
            // Stubs of the PLT: symbol tables have nothing there, so a lookup gives the
            // symbol before the table (`_init`); name them as perf does (`read@plt`).
            let plt = self
                .plts
                .borrow_mut()
                .entry(file.to_path_buf())
                .or_insert_with(|| elf::plt_table(file).map(std::rc::Rc::new))
                .clone();
            if let Some(plt) = plt {
                for (o, &off) in out.iter_mut().zip(file_offsets) {
                    if let Some(name) = plt.name_at(off) {
                        *o = Ok(FrameSymbol {
                            name,
                            offset: 0,
                            inlined: Vec::new(),
                        });
                    }
                }
            }
        }
        if file_ok || debug.is_some() {
            for o in out.iter_mut() {
                if *o == Err(Unresolved::FileGone) {
                    *o = Err(Unresolved::NoSymbol);
                }
            }
        }
        out
    }

    /// Resolve an offset into a process's `[vdso]`: every process of this kernel maps the
    /// same image, so this process's own copy names it.
    fn resolve_vdso(&self, offset: u64) -> Option<FrameSymbol> {
        let base = *self.own_vdso.get_or_init(|| {
            let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
            let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
            u64::from_str_radix(line.split('-').next()?, 16).ok()
        });
        let addr = base? + offset;
        let src = Source::Process(blazesym::symbolize::source::Process::new(
            blazesym::Pid::Slf,
        ));
        match self
            .blaze
            .symbolize_single(&src, Input::AbsAddr(addr))
            .ok()?
        {
            Symbolized::Sym(s) => Some(FrameSymbol {
                name: s.name.into_owned(),
                offset: s.offset as u64,
                inlined: Vec::new(),
            }),
            Symbolized::Unknown(_) => None,
        }
    }

    /// Resolve an address of anonymous executable memory of `tgid` from its perf map file
    /// (`/tmp/perf-TGID.map`), else from its jitdump file (`jit-TGID.dump`, which the
    /// process maps: [`jitdump::find`]), each re-read when it grew. The jitdump file is
    /// looked for once per process, at its first JIT frame (V8 and perf's JVM agent open
    /// it at start).
    pub fn resolve_jit(&self, tgid: Tid, addr: u64) -> Result<FrameSymbol, Unresolved> {
        let symbol = |(name, offset): (&str, u64)| FrameSymbol {
            name: name.to_string(),
            offset,
            inlined: Vec::new(),
        };
        let path = self.perf_map_dir.join(format!("perf-{tgid}.map"));
        {
            let mut maps = self.perf_maps.borrow_mut();
            let size = std::fs::metadata(&path).map_or(0, |m| m.len());
            let entry = maps.entry(tgid).or_insert((u64::MAX, None));
            if entry.0 != size {
                *entry = (size, PerfMap::read(&path));
            }
            if let Some(s) = entry.1.as_ref().and_then(|m| m.lookup(addr)) {
                return Ok(symbol(s));
            }
        }
        let mut dumps = self.jitdumps.borrow_mut();
        let d = dumps.entry(tgid).or_insert_with(|| JitDump {
            path: jitdump::find(tgid),
            size: u64::MAX,
            symbols: None,
        });
        let Some(path) = &d.path else {
            return Err(Unresolved::Jit);
        };
        let now = std::fs::metadata(path).map_or(0, |m| m.len());
        if d.size != now {
            (d.size, d.symbols) = (now, jitdump::read(path));
        }
        d.symbols
            .as_ref()
            .and_then(|m| m.lookup(addr))
            .map(symbol)
            .ok_or(Unresolved::Jit)
    }

    /// Resolve the user addresses `addrs` of process `tgid` through the mapping
    /// `history` at time `ts` (addresses of one object are resolved together); a return
    /// address (`is_caller[i]`) is named by its call instruction (`addr - 1`: the right
    /// function after a call that ends one, and the right inlined function). Returns
    /// one symbol entry per address (name None when unresolved) and the reason for each
    /// unresolved one. Mappings used are marked for the trace.
    pub fn resolve_user(
        &self,
        history: &mut chainrec_format::MappingHistory,
        tgid: Tid,
        addrs: &[u64],
        is_caller: &[bool],
        ts: u64,
    ) -> (Vec<SymbolEntry>, Vec<Option<Unresolved>>) {
        let mut entries: Vec<SymbolEntry> = addrs
            .iter()
            .map(|&addr| SymbolEntry {
                kind: StackKind::User,
                tgid,
                addr,
                name: None,
                offset: 0,
                module: None,
                build_id: None,
                file_offset: None,
            })
            .collect();
        let mut why: Vec<Option<Unresolved>> = vec![Some(Unresolved::NoMapping); addrs.len()];
        // Group by mapping: (mapping id) -> indexes.
        let mut groups: HashMap<u64, (MappingEntry, Vec<usize>)> = HashMap::new();
        for (i, &a) in addrs.iter().enumerate() {
            if let Some(m) = history.lookup_used(tgid, a, ts) {
                groups
                    .entry(m.id)
                    .or_insert_with(|| (m.clone(), Vec::new()))
                    .1
                    .push(i);
            } else if let Ok(s) = self.resolve_jit(tgid, a) {
                // Perf map names stand even without a recorded mapping.
                entries[i].name = Some(s.name);
                entries[i].offset = s.offset;
                why[i] = None;
            }
        }
        for (_, (m, idx)) in groups {
            if m.is_anon() {
                for &i in &idx {
                    match self.resolve_jit(tgid, addrs[i]) {
                        Ok(s) => {
                            entries[i].name = Some(s.name);
                            entries[i].offset = s.offset;
                            why[i] = None;
                        }
                        Err(r) => why[i] = Some(r),
                    }
                }
                continue;
            }
            let offsets: Vec<u64> = idx.iter().map(|&i| m.file_offset(addrs[i])).collect();
            for (&i, &off) in idx.iter().zip(&offsets) {
                let e = &mut entries[i];
                e.module = Some(m.path.clone());
                e.build_id = m.build_id.clone();
                e.file_offset = Some(off);
            }
            if m.path == "[vdso]" {
                for &i in &idx {
                    match self.resolve_vdso(addrs[i] - m.start) {
                        Some(s) => {
                            entries[i].name = Some(s.name);
                            entries[i].offset = s.offset;
                            why[i] = None;
                        }
                        None => why[i] = Some(Unresolved::NoSymbol),
                    }
                }
                continue;
            }
            if !m.is_file() {
                // [vsyscall] and the like: no file to read.
                for &i in &idx {
                    why[i] = Some(Unresolved::NoSymbol);
                }
                continue;
            }
            let obj = ObjectRef {
                path: &m.path,
                build_id: m.build_id.as_deref(),
                vaddr_delta: m.vaddr_delta,
            };
            let lookup: Vec<u64> = idx
                .iter()
                .zip(&offsets)
                .map(|(&i, &o)| o.saturating_sub(is_caller.get(i).copied().unwrap_or(false) as u64))
                .collect();
            for ((&i, r), (&o, &l)) in idx
                .iter()
                .zip(self.resolve_object(&obj, &lookup))
                .zip(offsets.iter().zip(&lookup))
            {
                match r {
                    Ok(s) => {
                        entries[i].name = Some(s.display_name());
                        entries[i].offset = s.offset + (o - l);
                        why[i] = None;
                    }
                    Err(r) => why[i] = Some(r),
                }
            }
        }
        (entries, why)
    }
}

/// Copy blazesym's answers into `out` (unknown addresses stay as they were).
fn fill(out: &mut [Result<FrameSymbol, Unresolved>], syms: Vec<Symbolized<'_>>) {
    for (o, s) in out.iter_mut().zip(syms) {
        match s {
            Symbolized::Sym(s) if !s.name.is_empty() => {
                // blazesym lists inlined functions outermost first, the function itself
                // being the outermost of all.
                *o = Ok(FrameSymbol {
                    name: s.name.into_owned(),
                    offset: s.offset as u64,
                    inlined: s.inlined.iter().map(|f| f.name.to_string()).collect(),
                });
            }
            Symbolized::Unknown(Reason::Unmapped | Reason::InvalidFileOffset) => {}
            _ => {}
        }
    }
}

/// What [`resymbolize`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resymbolized {
    /// User symbols looked at (those with a module and file offset).
    pub examined: u64,
    /// Named now, unnamed before.
    pub newly_named: u64,
    /// Named before, named differently now (a debug file knows more than `.dynsym`).
    pub renamed: u64,
    /// Still without a name, by reason.
    pub unresolved: UnresolvedCounts,
}

/// Re-symbolize the user symbols of `tables` with debug files of this machine (the
/// `extra_debug_dirs` of `--debug-dir`, then the default ones): each symbol with a module,
/// build id and file offset is resolved again by build id (the recorded mapping gives the
/// address translation) and by the module's path when that file is here with the same
/// build id. A name found this way replaces the recorded one.
pub fn resymbolize(tables: &mut Tables, extra_debug_dirs: &[PathBuf]) -> Resymbolized {
    let sym = Symbolizer::new(extra_debug_dirs);
    let mut out = Resymbolized::default();
    // Return addresses (below the innermost frame of some stack): named by their call.
    let callers: std::collections::HashSet<(Tid, u64)> = tables
        .stacks
        .values()
        .filter(|s| s.kind == StackKind::User)
        .flat_map(|s| s.frames.iter().skip(1).map(move |&a| (s.tgid, a)))
        .collect();
    // Group by object: (path, build id, delta) -> symbol keys + offsets.
    type Key = (StackKind, Tid, u64);
    type Object = (String, Option<Vec<u8>>, Option<u64>);
    let mut groups: HashMap<Object, Vec<(Key, u64)>> = HashMap::new();
    for s in tables.symbols.iter() {
        if s.kind != StackKind::User {
            continue;
        }
        let (Some(module), Some(off)) = (s.module, s.file_offset) else {
            if s.name.is_none() {
                out.unresolved.add(Unresolved::NoMapping);
            }
            continue;
        };
        out.examined += 1;
        let delta =
            mapping_delta(&tables.mappings, &s).or_else(|| vaddr_delta(Path::new(module), off));
        groups
            .entry((module.to_string(), s.build_id.map(<[u8]>::to_vec), delta))
            .or_default()
            .push(((s.kind, s.tgid, s.addr), off));
    }
    for ((path, build_id, delta), items) in groups {
        let obj = ObjectRef {
            path: &path,
            build_id: build_id.as_deref(),
            vaddr_delta: delta,
        };
        let offsets: Vec<u64> = items
            .iter()
            .map(|((_, tgid, addr), o)| o.saturating_sub(callers.contains(&(*tgid, *addr)) as u64))
            .collect();
        for (((key, off), r), looked) in items
            .iter()
            .zip(sym.resolve_object(&obj, &offsets))
            .zip(&offsets)
        {
            let &(kind, tgid, addr) = key;
            let Some(s) = tables.symbols.get(kind, tgid, addr) else {
                continue;
            };
            match r {
                Ok(f) => {
                    let name = f.display_name();
                    match s.name {
                        None => out.newly_named += 1,
                        Some(old) if old != name => out.renamed += 1,
                        Some(_) => {}
                    }
                    let mut e = s.to_entry();
                    e.name = Some(name);
                    e.offset = f.offset + (off - looked);
                    tables.symbols.insert(&e);
                }
                Err(r) => {
                    if s.name.is_none() {
                        out.unresolved.add(r);
                    }
                }
            }
        }
    }
    out
}

/// The address translation of the recorded mapping behind symbol `s`.
fn mapping_delta(h: &chainrec_format::MappingHistory, s: &Symbol<'_>) -> Option<u64> {
    h.lookup(s.tgid, s.addr, u64::MAX - 1)
        .filter(|m| m.file_offset(s.addr) == s.file_offset.unwrap_or(u64::MAX))
        .and_then(|m| m.vaddr_delta)
}

//! User-space symbols, resolved with blazesym while the processes are alive.

use blazesym::normalize::{Normalizer, UserMeta};
use blazesym::symbolize::source::{Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::Pid;
use chainrec_format::{StackKind, SymbolEntry, Tid};

/// Resolves user addresses of live processes (name, module path, build id, file offset).
pub struct UserSymbolizer {
    symbolizer: Symbolizer,
    normalizer: Normalizer,
}

impl Default for UserSymbolizer {
    fn default() -> Self {
        Self::new()
    }
}

impl UserSymbolizer {
    /// New symbolizer (caches parsed ELF files across calls).
    pub fn new() -> Self {
        UserSymbolizer {
            symbolizer: Symbolizer::new(),
            normalizer: Normalizer::new(),
        }
    }

    /// Resolve `addrs` of process `tgid`. Always returns one entry per address (name None
    /// when unresolved, e.g. because the process already exited).
    pub fn resolve(&self, tgid: Tid, addrs: &[u64]) -> Vec<SymbolEntry> {
        let mut out: Vec<SymbolEntry> = addrs
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
        if addrs.is_empty() {
            return out;
        }
        let pid = Pid::from(tgid);
        if let Ok(norm) = self.normalizer.normalize_user_addrs(pid, addrs) {
            for (entry, (file_off, meta_idx)) in out.iter_mut().zip(norm.outputs.iter()) {
                if let Some(UserMeta::Elf(elf)) = norm.meta.get(*meta_idx) {
                    entry.module = Some(elf.path.to_string_lossy().into_owned());
                    entry.build_id = elf.build_id.as_ref().map(|b| b.to_vec());
                    entry.file_offset = Some(*file_off);
                }
            }
        }
        let mut proc_src = Process::new(pid);
        // ELF symbol tables only: DWARF parsing of big binaries would stall the consumer
        // for seconds (names are what the trace needs; build id + file offset allow a
        // full re-symbolization later).
        proc_src.debug_syms = false;
        let src = Source::Process(proc_src);
        if let Ok(syms) = self.symbolizer.symbolize(&src, Input::AbsAddr(addrs)) {
            for (entry, sym) in out.iter_mut().zip(syms) {
                if let Symbolized::Sym(s) = sym {
                    entry.name = Some(s.name.into_owned());
                    entry.offset = s.offset as u64;
                    if entry.module.is_none() {
                        entry.module = s.module.map(|m| m.to_string_lossy().into_owned());
                    }
                }
            }
        }
        out
    }
}

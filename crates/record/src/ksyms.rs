//! Kernel symbols from a `/proc/kallsyms` snapshot.

use chainrec_format::{StackKind, SymbolEntry};
use std::io;

/// A sorted snapshot of the kernel's text symbols.
#[derive(Debug, Default)]
pub struct KernelSymbols {
    /// (address, name, module), sorted by address.
    syms: Vec<(u64, String, Option<String>)>,
}

impl KernelSymbols {
    /// Parse kallsyms text (`addr type name [module]` lines); keeps text symbols only.
    pub fn parse(text: &str) -> KernelSymbols {
        let mut syms = Vec::with_capacity(200_000);
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(ty), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(ty, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            if addr == 0 {
                continue;
            }
            let module = it
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']').to_string());
            syms.push((addr, name.to_string(), module));
        }
        syms.sort_by_key(|s| s.0);
        KernelSymbols { syms }
    }

    /// Read `/proc/kallsyms`. All-zero addresses (no privilege) give an empty table.
    pub fn load() -> io::Result<KernelSymbols> {
        Ok(Self::parse(&std::fs::read_to_string("/proc/kallsyms")?))
    }

    /// Address ranges of the kernel's scheduler and spinlock text (`.sched.text`,
    /// `.spinlock.text`: `__sched_text_start..__sched_text_end`,
    /// `__lock_text_start..__lock_text_end`), i.e. what the kernel's `in_sched_functions()`
    /// tests. Empty when the snapshot lacks the markers (no privilege).
    pub fn scheduler_text(&self) -> Vec<(u64, u64)> {
        let addr = |name: &str| self.syms.iter().find(|s| s.1 == name).map(|s| s.0);
        [
            ("__sched_text_start", "__sched_text_end"),
            ("__lock_text_start", "__lock_text_end"),
        ]
        .iter()
        .filter_map(|(a, b)| Some((addr(a)?, addr(b)?)))
        .filter(|(a, b)| a < b)
        .collect()
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// True when the snapshot has no symbols.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }

    /// Address range `[start, end)` of the vmlinux text symbol `name` (end = the next
    /// symbol's address); None when absent or when the name is not unique.
    pub fn range(&self, name: &str) -> Option<(u64, u64)> {
        let mut hits = self
            .syms
            .iter()
            .enumerate()
            .filter(|(_, s)| s.1 == name && s.2.is_none());
        let (i, s) = hits.next()?;
        if hits.next().is_some() {
            return None;
        }
        let end = self.syms[i + 1..].iter().find(|n| n.0 > s.0)?.0;
        Some((s.0, end))
    }

    /// Resolve one kernel address (the entry has `name == None` when it falls outside
    /// every known symbol).
    pub fn resolve(&self, addr: u64) -> SymbolEntry {
        let i = self.syms.partition_point(|s| s.0 <= addr);
        let hit = if i == 0 {
            None
        } else {
            Some(&self.syms[i - 1])
        };
        match hit {
            Some((start, name, module)) => SymbolEntry {
                kind: StackKind::Kernel,
                tgid: 0,
                addr,
                name: Some(name.clone()),
                offset: addr - start,
                module: module.clone(),
                build_id: None,
                file_offset: None,
            },
            None => SymbolEntry {
                kind: StackKind::Kernel,
                tgid: 0,
                addr,
                name: None,
                offset: 0,
                module: None,
                build_id: None,
                file_offset: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_by_nearest_lower_symbol() {
        let k = KernelSymbols::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t pipe_read\nffffffff81000200 D some_data\n\
             ffffffff81000300 T pipe_write\nffffffffc0000000 t mod_fn\t[virtio_net]\n",
        );
        assert_eq!(k.len(), 4);
        let s = k.resolve(0xffffffff81000150);
        assert_eq!(s.name.as_deref(), Some("pipe_read"));
        assert_eq!(s.offset, 0x50);
        assert_eq!(s.module, None);
        // data symbols are skipped: 0x...250 is still inside pipe_read's range
        assert_eq!(
            k.resolve(0xffffffff81000250).name.as_deref(),
            Some("pipe_read")
        );
        let m = k.resolve(0xffffffffc0000010);
        assert_eq!(m.name.as_deref(), Some("mod_fn"));
        assert_eq!(m.module.as_deref(), Some("virtio_net"));
        assert_eq!(k.resolve(0x1000).name, None);
    }
}

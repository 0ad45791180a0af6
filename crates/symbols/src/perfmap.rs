//! Perf map files (`/tmp/perf-PID.map`): `START SIZE NAME` lines (hex, with or without
//! `0x`), which JITs (the JVM with an agent, Node with `--perf-basic-prof`, LuaJIT, ...)
//! write for their generated code. They outlive the process, so frames of an exited JIT
//! process are named at the end of the recording as well.

use std::path::Path;

/// The symbols of one perf map file, sorted by start address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerfMap {
    syms: Vec<(u64, u64, String)>,
}

fn hex(s: &str) -> Option<u64> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

impl PerfMap {
    /// Parse the file's text (malformed lines are skipped).
    pub fn parse(text: &str) -> PerfMap {
        let syms: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.splitn(3, ' ');
                let start = hex(it.next()?)?;
                let size = hex(it.next()?)?;
                let name = it.next()?.trim();
                (!name.is_empty()).then(|| (start, size, name.to_string()))
            })
            .collect();
        Self::from_symbols(syms)
    }

    /// `(start, size, name)` in the order a JIT wrote them: a later one for the same start
    /// wins (JITs re-emit recompiled code).
    pub fn from_symbols(mut syms: Vec<(u64, u64, String)>) -> PerfMap {
        syms.reverse();
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        PerfMap { syms }
    }

    /// Read and parse `path` (None when it does not exist or is unreadable).
    pub fn read(path: &Path) -> Option<PerfMap> {
        std::fs::read_to_string(path).ok().map(|t| Self::parse(&t))
    }

    /// The symbol covering `addr`, with the offset into it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, size, name) = &self.syms[i];
        (addr - start < (*size).max(1)).then(|| (name.as_str(), addr - start))
    }

    /// Number of symbols.
    pub fn len(&self) -> usize {
        self.syms.len()
    }

    /// No symbols.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_map_lines_name_their_ranges_and_later_lines_win() {
        let m = PerfMap::parse(
            "7f0000001000 40 LazyCompile:~main app.js:1\n\
             0x7f0000002000 0x10 Builtin:Add\n\
             garbage\n\
             7f0000001000 40 LazyCompile:*main app.js:1\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(
            m.lookup(0x7f0000001010),
            Some(("LazyCompile:*main app.js:1", 0x10))
        );
        assert_eq!(m.lookup(0x7f000000200f), Some(("Builtin:Add", 0xf)));
        assert_eq!(m.lookup(0x7f0000002010), None);
        assert_eq!(m.lookup(0x1000), None);
    }
}

//! The two facts about an ELF file the symbolizer needs beyond blazesym: its build id and
//! the address translation of a mapped segment (read from the program headers).

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// GNU build id of the ELF file at `path` (None: unreadable, not ELF, or no note).
pub fn build_id_of(path: &Path) -> Option<Vec<u8>> {
    blazesym::helper::read_elf_build_id(path)
        .ok()
        .flatten()
        .map(|b| b.to_vec())
}

/// `p_vaddr - p_offset` (wrapping) of the `PT_LOAD` segment of the ELF file at `path` that
/// a mapping at file offset `pgoff` maps: the segment whose page-aligned offset is
/// `pgoff`, else the one whose file bytes contain it. None when the file is unreadable,
/// not ELF, or no segment fits.
pub fn vaddr_delta(path: &Path, pgoff: u64) -> Option<u64> {
    let mut f = std::fs::File::open(path).ok()?;
    let mut eh = [0u8; 64];
    f.read_exact(&mut eh).ok()?;
    if &eh[..4] != b"\x7fELF" || eh[5] != 1 {
        return None; // not ELF, or big-endian (not a target chainrec records)
    }
    let u16_at = |b: &[u8], i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as u64;
    let u32_at = |b: &[u8], i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap()) as u64;
    let u64_at = |b: &[u8], i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
    let is64 = match eh[4] {
        2 => true,
        1 => false,
        _ => return None,
    };
    let (phoff, phentsize, phnum) = if is64 {
        (u64_at(&eh, 0x20), u16_at(&eh, 0x36), u16_at(&eh, 0x38))
    } else {
        (u32_at(&eh, 0x1c), u16_at(&eh, 0x2a), u16_at(&eh, 0x2c))
    };
    let min = if is64 { 56 } else { 32 };
    if phentsize < min || phnum == 0 || phnum > 4096 {
        return None;
    }
    let mut ph = vec![0u8; (phentsize * phnum) as usize];
    f.seek(SeekFrom::Start(phoff)).ok()?;
    f.read_exact(&mut ph).ok()?;
    // (p_offset, p_vaddr, p_filesz) of each PT_LOAD.
    let loads: Vec<(u64, u64, u64)> = ph
        .chunks_exact(phentsize as usize)
        .filter(|p| u32_at(p, 0) == 1)
        .map(|p| {
            if is64 {
                (u64_at(p, 8), u64_at(p, 16), u64_at(p, 32))
            } else {
                (u32_at(p, 4), u32_at(p, 8), u32_at(p, 16))
            }
        })
        .collect();
    let page = |o: u64| o & !0xfff;
    loads
        .iter()
        .find(|(off, _, _)| page(*off) == pgoff)
        .or_else(|| {
            loads
                .iter()
                .find(|(off, _, sz)| page(*off) <= pgoff && pgoff < off + sz)
        })
        .map(|(off, vaddr, _)| vaddr.wrapping_sub(*off))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_executable_has_a_text_segment_and_missing_files_have_none() {
        let exe = std::env::current_exe().unwrap();
        // Offset 0 is the first PT_LOAD of every executable.
        assert!(vaddr_delta(&exe, 0).is_some());
        assert_eq!(vaddr_delta(Path::new("/nonexistent/x"), 0), None);
        assert_eq!(build_id_of(Path::new("/nonexistent/x")), None);
    }
}

/// The procedure linkage table of an ELF file, by file offset: which function each stub
/// calls, so a frame in a stub reads `clock_gettime@plt` as perf names it, not the symbol
/// that precedes the table (`_init`, which is what a symbol table lookup gives).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PltTable {
    /// (file offset, size, entry size, index of its first entry in `names`, or None when
    /// its entries are not in `.rela.plt` order: `.plt.got`) per PLT section.
    sections: Vec<(u64, u64, u64, Option<i64>)>,
    /// Function of each `.rela.plt` relocation, in order.
    names: Vec<String>,
}

impl PltTable {
    /// The frame name at `file_offset` when it lies in a PLT section: `name@plt`, or
    /// `[plt]` for the resolver stub and entries whose target is not known.
    pub fn name_at(&self, file_offset: u64) -> Option<String> {
        let &(off, _, entry, first) = self
            .sections
            .iter()
            .find(|(off, size, _, _)| *off <= file_offset && file_offset < off + size)?;
        let name = first.and_then(|first| {
            let i = ((file_offset - off) / entry) as i64 + first;
            usize::try_from(i).ok().and_then(|i| self.names.get(i))
        });
        Some(match name {
            Some(n) => format!("{n}@plt"),
            None => "[plt]".to_string(),
        })
    }
}

/// The PLT of the ELF file at `path` (x86_64: 16-byte entries; `.plt` entry 0 is the
/// resolver, entry i + 1 calls `.rela.plt` relocation i; `.plt.sec` entry i calls
/// relocation i). None when the file is unreadable, not a 64-bit little-endian ELF, or has
/// no PLT.
pub fn plt_table(path: &Path) -> Option<PltTable> {
    let file = std::fs::File::open(path).ok()?;
    // SAFETY: the map is read-only and private to this function; a file truncated under it
    // by another process could fault, the same risk blazesym takes for the same objects.
    let data = unsafe { memmap2::Mmap::map(&file) }.ok()?;
    let d: &[u8] = &data;
    let u16_at = |i: usize| -> Option<u64> {
        Some(u16::from_le_bytes(d.get(i..i + 2)?.try_into().ok()?) as u64)
    };
    let u32_at = |i: usize| -> Option<u64> {
        Some(u32::from_le_bytes(d.get(i..i + 4)?.try_into().ok()?) as u64)
    };
    let u64_at =
        |i: usize| -> Option<u64> { u64::from_le_bytes(d.get(i..i + 8)?.try_into().ok()?).into() };
    if d.get(..4)? != b"\x7fELF" || d[4] != 2 || d[5] != 1 {
        return None;
    }
    let (shoff, shentsize, shnum, shstrndx) =
        (u64_at(0x28)?, u16_at(0x3a)?, u16_at(0x3c)?, u16_at(0x3e)?);
    if shentsize < 64 || shnum == 0 || shnum > 65_000 {
        return None;
    }
    // (name offset, type, offset, size, link, entsize) of each section.
    let sh = |i: u64| -> Option<(u64, u64, u64, u64, u64, u64)> {
        let b = (shoff + i * shentsize) as usize;
        Some((
            u32_at(b)?,
            u32_at(b + 4)?,
            u64_at(b + 0x18)?,
            u64_at(b + 0x20)?,
            u32_at(b + 0x28)?,
            u64_at(b + 0x38)?,
        ))
    };
    let strtab = sh(shstrndx)?.2 as usize;
    let name_of = |off: u64| -> Option<&[u8]> {
        let s = d.get(strtab + off as usize..)?;
        Some(&s[..s.iter().position(|&c| c == 0)?])
    };
    let mut plt = None;
    let mut plt_sec = None;
    let mut plt_got = None;
    let mut rela_plt = None;
    for i in 0..shnum {
        let s = sh(i)?;
        match name_of(s.0)? {
            b".plt" => plt = Some(s),
            b".plt.sec" => plt_sec = Some(s),
            b".plt.got" => plt_got = Some(s),
            b".rela.plt" => rela_plt = Some(s),
            _ => {}
        }
    }
    let mut names = Vec::new();
    if let Some((_, _, off, size, link, _)) = rela_plt {
        let (_, _, symoff, symsize, strlink, _) = sh(link)?;
        let dynstr = sh(strlink)?.2 as usize;
        for r in 0..size / 24 {
            let info = u64_at((off + r * 24 + 8) as usize)?;
            let sym = info >> 32;
            let name = if sym * 24 < symsize {
                let st_name = u32_at((symoff + sym * 24) as usize)? as usize;
                let s = d.get(dynstr + st_name..)?;
                String::from_utf8_lossy(&s[..s.iter().position(|&c| c == 0)?]).into_owned()
            } else {
                String::new()
            };
            names.push(if name.is_empty() {
                "[plt]".into()
            } else {
                name
            });
        }
    }
    let mut sections = Vec::new();
    if let Some((_, _, off, size, _, _)) = plt {
        sections.push((off, size, 16, Some(-1)));
    }
    if let Some((_, _, off, size, _, _)) = plt_sec {
        sections.push((off, size, 16, Some(0)));
    }
    if let Some((_, _, off, size, _, ent)) = plt_got {
        sections.push((off, size, ent.max(8), None));
    }
    if sections.is_empty() {
        return None;
    }
    Some(PltTable { sections, names })
}

#[cfg(test)]
mod plt_tests {
    use super::*;

    /// Every stub objdump names in `/usr/bin/true`'s `.plt` (file offsets equal addresses
    /// in its first segments) gets the same name here.
    #[test]
    fn plt_names_agree_with_objdump() {
        let path = Path::new("/usr/bin/true");
        let out = match std::process::Command::new("objdump")
            .args(["-d", "-j", ".plt"])
            .arg(path)
            .output()
        {
            Ok(o) if o.status.success() => o,
            _ => {
                eprintln!("SKIPPED: plt_names_agree_with_objdump: no objdump (binutils)");
                return;
            }
        };
        let text = String::from_utf8_lossy(&out.stdout);
        let table = plt_table(path).expect("/usr/bin/true has a PLT");
        let mut checked = 0;
        for line in text.lines() {
            // "0000000000002030 <getenv@plt>:"
            let Some((addr, rest)) = line.split_once(" <") else {
                continue;
            };
            let Some(name) = rest.strip_suffix(">:") else {
                continue;
            };
            let addr = u64::from_str_radix(addr, 16).unwrap();
            let want = if name.ends_with("@plt") && !name.contains('-') {
                name.to_string()
            } else {
                "[plt]".to_string() // the resolver, "<first@plt-0x10>"
            };
            // The stub's first and last byte.
            assert_eq!(table.name_at(addr), Some(want.clone()), "at {addr:#x}");
            assert_eq!(table.name_at(addr + 15), Some(want), "at {addr:#x} + 15");
            checked += 1;
        }
        assert!(
            checked > 10,
            "only {checked} stubs in objdump's output:\n{text}"
        );
        assert_eq!(table.name_at(0), None);
    }
}

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

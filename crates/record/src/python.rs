//! CPython frames (issue 35, item 4): where the BPF side finds a thread's Python frames
//! (`struct py_proc`, per Python version), and the names of their code objects.
//!
//! The BPF side walks, for the current thread, the first interpreter's thread states to
//! the one whose native thread id is the tid, then its frame chain (`cframe->current_frame`,
//! then `previous`), and records each frame's code object address and `is_entry` flag
//! (`UCOPY_PY_FRAMES`). The consumer names each code object by reading its `co_qualname`,
//! `co_filename` and `co_firstlineno` from the live process (code objects live as long as
//! their function), and puts the Python frames in place of the `_PyEval_EvalFrameDefault`
//! frames that ran them: a frame with `is_entry` is the first one its evaluator call ran.

use std::collections::HashMap;
use std::os::unix::fs::FileExt;

/// Offsets of the structures the walk reads, for one Python version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `_PyRuntimeState.interpreters.head`.
    pub runtime_interp_head: u64,
    threads_head: u16,
    ts_next: u16,
    ts_native_tid: u16,
    ts_cframe: u16,
    cframe_current: u16,
    fr_code: u16,
    fr_previous: u16,
    fr_is_entry: u16,
    code_filename: u64,
    code_qualname: u64,
    code_firstlineno: u64,
}

/// CPython 3.11 (Debian 12's), from `offsetof` over its headers (`Py_BUILD_CORE`:
/// `internal/pycore_runtime.h`, `pycore_interp.h`, `pycore_frame.h`); the same for every
/// 3.11.x (the structures are part of its ABI). Checked against the installed headers by
/// tests/real_python.rs when `python3.11-dev` is there.
pub const PY311: Layout = Layout {
    runtime_interp_head: 40,
    threads_head: 16,
    ts_next: 8,
    ts_native_tid: 160,
    ts_cframe: 56,
    cframe_current: 8,
    fr_code: 32,
    fr_previous: 48,
    fr_is_entry: 68,
    code_filename: 112,
    code_qualname: 128,
    code_firstlineno: 72,
};

/// The Python version an interpreter object's file name says (`python3.11`,
/// `libpython3.11.so.1.0` → `3.11`).
fn version_of(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next()?;
    let rest = name
        .strip_prefix("libpython")
        .or_else(|| name.strip_prefix("python"))?;
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let v = rest[..end].trim_end_matches('.');
    (v.matches('.').count() == 1).then_some(v)
}

impl Layout {
    /// The layout of the interpreter in the object at `path`, or the version it is (Err)
    /// when this recorder cannot read it.
    pub fn for_object(path: &str) -> Result<Layout, String> {
        match version_of(path) {
            Some("3.11") => Ok(PY311),
            Some(v) => Err(v.to_string()),
            None => Err(format!("? ({path})")),
        }
    }

    /// The BPF side's `struct py_proc` for an interpreter whose list head is at
    /// `interp_head`.
    pub fn bpf_value(&self, interp_head: u64) -> Vec<u8> {
        let mut v = interp_head.to_ne_bytes().to_vec();
        for x in [
            self.threads_head,
            self.ts_next,
            self.ts_native_tid,
            self.ts_cframe,
            self.cframe_current,
            self.fr_code,
            self.fr_previous,
            self.fr_is_entry,
        ] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        v
    }
}

/// One frame of a `UCOPY_PY_FRAMES` window: a code object, and whether its frame was the
/// first one its `_PyEval_EvalFrameDefault` call ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PyFrame {
    pub code: u64,
    pub entry: bool,
}

/// The frames of a `UCOPY_PY_FRAMES` window, innermost first.
pub fn frames(window: &[u8]) -> Vec<PyFrame> {
    window
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
        .take_while(|&w| w != 0)
        .map(|w| PyFrame {
            code: w & !1,
            entry: w & 1 != 0,
        })
        .collect()
}

/// Replace each native frame in `eval` (the `_PyEval_EvalFrameDefault` frames, leaf
/// first) by the Python frames it ran: from the innermost Python frame up to and
/// including the next one with `entry`. `name` gives a Python frame's address. Python
/// frames left over (an evaluator frame the unwind did not reach) are dropped; evaluator
/// frames left over keep their native frame. Returns how many Python frames went in.
pub fn splice(
    out: &mut Vec<u64>,
    eval: &std::ops::Range<u64>,
    py: &[PyFrame],
    mut name: impl FnMut(u64) -> u64,
) -> usize {
    let mut rest = py;
    let mut spliced = Vec::with_capacity(out.len() + py.len());
    let mut n = 0;
    for (i, &a) in out.iter().enumerate() {
        // Return addresses point after the call: look up a - 1 (the leaf's ip as is).
        let pc = if i == 0 { a } else { a.wrapping_sub(1) };
        if !eval.contains(&pc) || rest.is_empty() {
            spliced.push(a);
            continue;
        }
        let run = rest
            .iter()
            .position(|f| f.entry)
            .map_or(rest.len(), |k| k + 1);
        for f in &rest[..run] {
            spliced.push(name(f.code));
        }
        n += run;
        rest = &rest[run..];
    }
    *out = spliced;
    n
}

/// Names of code objects read from live processes, cached per (process, code object).
#[derive(Default)]
pub struct CodeNames {
    names: HashMap<(u32, u64), Option<String>>,
}

impl CodeNames {
    /// `qualname (file.py:line)` of the code object at `code` in `tgid` (None when the
    /// process cannot be read: exited, or not ours to read).
    pub fn name(&mut self, tgid: u32, code: u64, layout: &Layout) -> Option<String> {
        self.names
            .entry((tgid, code))
            .or_insert_with(|| read_code_name(tgid, code, layout))
            .clone()
    }

    /// Forget the names of an exited process (its code objects' addresses may be reused).
    pub fn forget(&mut self, tgid: u32) {
        self.names.retain(|&(t, _), _| t != tgid);
    }
}

fn read_code_name(tgid: u32, code: u64, l: &Layout) -> Option<String> {
    let mem = std::fs::File::open(format!("/proc/{tgid}/mem")).ok()?;
    let u64_at = |a: u64| {
        let mut b = [0u8; 8];
        mem.read_exact_at(&mut b, a).ok()?;
        Some(u64::from_ne_bytes(b))
    };
    let qualname = read_str(&mem, u64_at(code + l.code_qualname)?)?;
    let file = read_str(&mem, u64_at(code + l.code_filename)?).unwrap_or_default();
    let line = u64_at(code + l.code_firstlineno)? as u32;
    let file = file.rsplit('/').next().unwrap_or("");
    Some(format!("{qualname} ({file}:{line})"))
}

/// A `str` object's text: compact ASCII or one-byte (latin-1) strings, at most 256
/// characters (PyASCIIObject: length at 16, state at 32, ASCII data at 48; a compact
/// non-ASCII string's data at 72).
fn read_str(mem: &std::fs::File, s: u64) -> Option<String> {
    let mut head = [0u8; 40];
    mem.read_exact_at(&mut head, s).ok()?;
    let len = u64::from_ne_bytes(head[16..24].try_into().ok()?) as usize;
    let state = u32::from_ne_bytes(head[32..36].try_into().ok()?);
    let (kind, compact, ascii) = ((state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1);
    if compact == 0 || kind != 1 || len > 256 {
        return None;
    }
    let mut data = vec![0u8; len];
    mem.read_exact_at(&mut data, s + if ascii == 1 { 48 } else { 72 })
        .ok()?;
    Some(data.iter().map(|&b| b as char).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_from_file_names() {
        assert_eq!(version_of("/usr/bin/python3.11"), Some("3.11"));
        assert_eq!(
            version_of("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"),
            Some("3.11")
        );
        assert_eq!(version_of("/usr/bin/python3.12"), Some("3.12"));
        assert_eq!(version_of("/usr/bin/python3"), None);
        assert_eq!(Layout::for_object("/x/python3.11"), Ok(PY311));
        assert_eq!(Layout::for_object("/x/python3.13"), Err("3.13".into()));
        assert_eq!(PY311.bpf_value(0x1000).len(), 24);
    }

    #[test]
    fn python_frames_replace_the_evaluator_frames_that_ran_them() {
        let w: Vec<u8> = [0x1000u64, 0x2001, 0x3000, 0x4001, 0]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        let py = frames(&w);
        assert_eq!(
            py,
            [
                PyFrame {
                    code: 0x1000,
                    entry: false
                },
                PyFrame {
                    code: 0x2000,
                    entry: true
                },
                PyFrame {
                    code: 0x3000,
                    entry: false
                },
                PyFrame {
                    code: 0x4000,
                    entry: true
                },
            ]
        );
        // leaf (futex), evaluator, C call, evaluator, main; evaluator at [0x500, 0x600).
        let mut out = vec![0x10, 0x520, 0x30, 0x540, 0x50];
        let n = splice(&mut out, &(0x500..0x600), &py, |c| c + 7);
        assert_eq!(n, 4);
        assert_eq!(out, vec![0x10, 0x1007, 0x2007, 0x30, 0x3007, 0x4007, 0x50]);
        // An evaluator frame beyond the Python frames keeps its native frame.
        let mut out = vec![0x10, 0x520, 0x540, 0x560];
        splice(&mut out, &(0x500..0x600), &py[..2], |c| c + 7);
        assert_eq!(out, vec![0x10, 0x1007, 0x2007, 0x540, 0x560]);
    }
}

//! Java interpreted frames (issue 35, item 2): HotSpot's template interpreter runs every
//! interpreted method in the same code (the perf map calls it all `Interpreter`), so the
//! method of such a frame is read from the frame itself, and named from the JVM's own
//! structures, as the JVM's serviceability agent does.
//!
//! * Where the structures' fields are: `libjvm.so` exports `gHotSpotVMStructs` and
//!   `gHotSpotVMTypes` (tables of every field's offset and every type's size, with the
//!   layout of their entries in `gHotSpotVMStructEntry*Offset` and friends). They are read
//!   once per process from its memory ([`Layout::read`]): no offset of a HotSpot structure
//!   is hard-coded, so every JDK whose tables have the fields works.
//! * Where the interpreter is: `AbstractInterpreter::_code` (a `StubQueue`) →
//!   `[_stub_buffer, _stub_buffer + _buffer_limit)`.
//! * Which method a frame runs: an interpreted frame keeps the rbp chain, and its
//!   `Method*` sits at fp - 24 (`frame::interpreter_frame_method_offset` = -3 words on
//!   x86_64; the frame layout is not in VMStructs, so this one is a per-architecture
//!   constant). The unwinder knows each frame's fp; the word is in the stack copy.
//! * Its name: `Method::_constMethod` → `ConstMethod { _constants, _name_index,
//!   _signature_index }`, the constant pool's `Symbol*` entries (after the `ConstantPool`
//!   object, `sizeof(ConstantPool)` from the types table), `_pool_holder` →
//!   `Klass::_name`, each a `Symbol { _length, _body }`. Written as the perf map writes
//!   compiled methods (`void QueueDemo.sink()`), so both kinds of frame merge.
//!
//! Names are read at consume time from `/proc/PID/mem` of the live process, cached per
//! (process, `Method*`): a method's metadata lives as long as its class. The cache outlives
//! the process until its pid is seen again ([`MethodFrames`]). Checked against jstack by
//! tests/real_java.rs.

use std::collections::HashMap;
use std::ops::Range;
use std::os::unix::fs::FileExt;

/// `Method*` of an interpreted frame at its frame pointer + this (x86_64:
/// `frame::interpreter_frame_method_offset` is -3 words; HotSpot's VMStructs do not give
/// it).
pub const FRAME_METHOD_OFFSET: i64 = -24;

/// The `libjvm.so` exports the layout is read through, in [`JvmExports`] order.
pub const EXPORTS: [&[u8]; 10] = [
    b"gHotSpotVMStructs",
    b"gHotSpotVMStructEntryArrayStride",
    b"gHotSpotVMStructEntryTypeNameOffset",
    b"gHotSpotVMStructEntryFieldNameOffset",
    b"gHotSpotVMStructEntryOffsetOffset",
    b"gHotSpotVMStructEntryAddressOffset",
    b"gHotSpotVMTypes",
    b"gHotSpotVMTypeEntryArrayStride",
    b"gHotSpotVMTypeEntryTypeNameOffset",
    b"gHotSpotVMTypeEntrySizeOffset",
];

/// Addresses, in the process, of the [`EXPORTS`] (each a variable: a pointer to a table,
/// or a `uint64_t` offset or stride).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JvmExports(
    /// The addresses, in [`EXPORTS`] order.
    pub [u64; EXPORTS.len()],
);

/// Why a JVM's frames cannot be named.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JvmError {
    /// Its memory could not be read there (the process exited, or a bad pointer).
    #[error("memory unreadable at {0:#x}")]
    Unreadable(u64),
    /// Its VMStructs lack a field or type this reader needs (another JVM version).
    #[error("not supported: VMStructs lack {0}")]
    Missing(String),
    /// The interpreter is not generated yet (the JVM is starting).
    #[error("interpreter not generated yet")]
    NotYet,
}

/// Reads a process's memory (`/proc/PID/mem`; a byte buffer in tests).
pub trait Memory {
    /// Fill `buf` from `addr`; false when any of it cannot be read.
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool;

    /// The u64 at `addr`.
    fn u64_at(&self, addr: u64) -> Result<u64, JvmError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)
            .then(|| u64::from_le_bytes(b))
            .ok_or(JvmError::Unreadable(addr))
    }

    /// The u16 at `addr`.
    fn u16_at(&self, addr: u64) -> Result<u16, JvmError> {
        let mut b = [0u8; 2];
        self.read(addr, &mut b)
            .then(|| u16::from_le_bytes(b))
            .ok_or(JvmError::Unreadable(addr))
    }

    /// The u32 at `addr`.
    fn u32_at(&self, addr: u64) -> Result<u32, JvmError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)
            .then(|| u32::from_le_bytes(b))
            .ok_or(JvmError::Unreadable(addr))
    }

    /// The NUL-terminated string at `addr` (at most 80 bytes: VMStructs' names are short).
    fn c_str(&self, addr: u64) -> Result<Vec<u8>, JvmError> {
        let mut b = [0u8; 80];
        // A name near the end of a mapping: read less.
        let n = [80usize, 40, 16]
            .into_iter()
            .find(|&n| self.read(addr, &mut b[..n]))
            .ok_or(JvmError::Unreadable(addr))?;
        let end = b[..n].iter().position(|&c| c == 0).unwrap_or(n);
        Ok(b[..end].to_vec())
    }
}

impl Memory for std::fs::File {
    fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
        self.read_exact_at(buf, addr).is_ok()
    }
}

/// The offsets and sizes of the HotSpot structures a method's name is read through, and
/// where the interpreter's code is, read from one JVM's VMStructs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    method_const_method: u64,
    const_method_constants: u64,
    const_method_name_index: u64,
    const_method_signature_index: u64,
    pool_holder: u64,
    pool_length: u64,
    pool_size: u64,
    klass_name: u64,
    instance_klass_constants: u64,
    symbol_length: u64,
    symbol_body: u64,
    /// The template interpreter's code (all of its codelets).
    pub interpreter: Range<u64>,
}

/// (type, field) pairs read from VMStructs: [`Layout`]'s offsets in its field order,
/// then the interpreter's (`AbstractInterpreter::_code` is static: its address is used).
const FIELDS: [(&str, &str); 13] = [
    ("Method", "_constMethod"),
    ("ConstMethod", "_constants"),
    ("ConstMethod", "_name_index"),
    ("ConstMethod", "_signature_index"),
    ("ConstantPool", "_pool_holder"),
    ("ConstantPool", "_length"),
    ("Klass", "_name"),
    ("InstanceKlass", "_constants"),
    ("Symbol", "_length"),
    ("Symbol", "_body"),
    ("StubQueue", "_stub_buffer"),
    ("StubQueue", "_buffer_limit"),
    ("AbstractInterpreter", "_code"),
];

/// [`FIELDS`] indices of the interpreter's fields.
const STUB_BUFFER: usize = 10;
const BUFFER_LIMIT: usize = 11;
const INTERPRETER_CODE: usize = 12;

/// VMStructs entries and types tables end at an entry whose type name is null; a table
/// longer than this is not one.
const MAX_TABLE_ENTRIES: u64 = 20_000;

impl Layout {
    /// The layout of the JVM in `mem`, through its exports at `exports`.
    pub fn read(mem: &impl Memory, exports: &JvmExports) -> Result<Layout, JvmError> {
        let var = |i: usize| mem.u64_at(exports.0[i]);
        let (structs, stride) = (var(0)?, var(1)?);
        let (type_name_at, field_name_at, offset_at, address_at) =
            (var(2)?, var(3)?, var(4)?, var(5)?);
        let (types, type_stride, type_type_name_at, type_size_at) =
            (var(6)?, var(7)?, var(8)?, var(9)?);
        if stride == 0 || type_stride == 0 {
            return Err(JvmError::Missing("entry strides".into()));
        }
        // One pass over the fields table: (offset, static address) of each wanted field.
        let mut found = [None; FIELDS.len()];
        for i in 0..MAX_TABLE_ENTRIES {
            let e = structs + i * stride;
            let type_name = mem.u64_at(e + type_name_at)?;
            if type_name == 0 {
                break;
            }
            let field = mem.c_str(mem.u64_at(e + field_name_at)?)?;
            if !FIELDS.iter().any(|w| w.1.as_bytes() == field) {
                continue;
            }
            // Several types have a field of that name: the type is compared only then.
            let ty = mem.c_str(type_name)?;
            if let Some(k) = FIELDS
                .iter()
                .position(|w| w.1.as_bytes() == field && w.0.as_bytes() == ty)
            {
                found[k] = Some((mem.u64_at(e + offset_at)?, mem.u64_at(e + address_at)?));
            }
        }
        let field = |k: usize| {
            found[k].ok_or_else(|| JvmError::Missing(format!("{}::{}", FIELDS[k].0, FIELDS[k].1)))
        };
        let offset = |k: usize| field(k).map(|f| f.0);
        let pool_size = type_size(mem, types, type_stride, type_type_name_at, type_size_at)?;
        let (_, code_at) = field(INTERPRETER_CODE)?;
        let queue = mem.u64_at(code_at)?;
        if queue == 0 {
            return Err(JvmError::NotYet);
        }
        let buffer = mem.u64_at(queue + offset(STUB_BUFFER)?)?;
        let limit = u64::from(mem.u32_at(queue + offset(BUFFER_LIMIT)?)?);
        if buffer == 0 || limit == 0 {
            return Err(JvmError::NotYet);
        }
        Ok(Layout {
            method_const_method: offset(0)?,
            const_method_constants: offset(1)?,
            const_method_name_index: offset(2)?,
            const_method_signature_index: offset(3)?,
            pool_holder: offset(4)?,
            pool_length: offset(5)?,
            pool_size,
            klass_name: offset(6)?,
            instance_klass_constants: offset(7)?,
            symbol_length: offset(8)?,
            symbol_body: offset(9)?,
            interpreter: buffer..buffer + limit,
        })
    }

    /// Whether the frame at `pc` (the leaf's ip, or a return address less one) runs in
    /// the interpreter.
    pub fn interprets(&self, pc: u64) -> bool {
        self.interpreter.contains(&pc)
    }

    /// The name of the method at `method`, as the perf map writes compiled methods:
    /// `void QueueDemo.sink()`, `java.lang.Object java.util.concurrent.ArrayBlockingQueue.take()`.
    pub fn method_name(&self, mem: &impl Memory, method: u64) -> Result<String, JvmError> {
        let const_method = mem.u64_at(method + self.method_const_method)?;
        let pool = mem.u64_at(const_method + self.const_method_constants)?;
        let holder = mem.u64_at(pool + self.pool_holder)?;
        // A word that is not a Method* rarely leads to a class whose constant pool is
        // the one it started from.
        if mem.u64_at(holder + self.instance_klass_constants)? != pool {
            return Err(JvmError::Unreadable(method));
        }
        let entries = u64::from(mem.u32_at(pool + self.pool_length)?);
        let entry = |index: u64| -> Result<u64, JvmError> {
            if index == 0 || index >= entries {
                return Err(JvmError::Unreadable(pool));
            }
            mem.u64_at(pool + self.pool_size + index * 8)
        };
        let name_index = u64::from(mem.u16_at(const_method + self.const_method_name_index)?);
        let sig_index = u64::from(mem.u16_at(const_method + self.const_method_signature_index)?);
        let name = self.symbol(mem, entry(name_index)?)?;
        let signature = self.symbol(mem, entry(sig_index)?)?;
        let class = self.symbol(mem, mem.u64_at(holder + self.klass_name)?)?;
        let class = external_class_name(&class);
        let name = String::from_utf8_lossy(&name);
        let (params, ret) = java_signature(&signature).ok_or(JvmError::Unreadable(method))?;
        Ok(format!("{ret} {class}.{name}({})", params.join(", ")))
    }

    /// A `Symbol`'s bytes (modified UTF-8; at most 4 KiB).
    fn symbol(&self, mem: &impl Memory, symbol: u64) -> Result<Vec<u8>, JvmError> {
        let len = usize::from(mem.u16_at(symbol + self.symbol_length)?);
        if len > 4096 {
            return Err(JvmError::Unreadable(symbol));
        }
        let mut body = vec![0u8; len];
        if !mem.read(symbol + self.symbol_body, &mut body) {
            return Err(JvmError::Unreadable(symbol));
        }
        Ok(body)
    }
}

/// A class's internal name as Java prints it: `java/lang/Thread` → `java.lang.Thread`; a
/// hidden class's `QueueDemo$$Lambda$14+0x0000000800c01200` →
/// `QueueDemo$$Lambda$14/0x0000000800c01200` (as `Klass::external_name` and so the perf
/// map and jstack write it).
fn external_class_name(internal: &[u8]) -> String {
    let mut name = String::from_utf8_lossy(internal).replace('/', ".");
    if let Some(plus) = name.rfind("+0x") {
        name.replace_range(plus..plus + 1, "/");
    }
    name
}

/// `sizeof(ConstantPool)` from the types table (its entries follow the object).
fn type_size(
    mem: &impl Memory,
    types: u64,
    stride: u64,
    name_at: u64,
    size_at: u64,
) -> Result<u64, JvmError> {
    for i in 0..MAX_TABLE_ENTRIES {
        let e = types + i * stride;
        let name = mem.u64_at(e + name_at)?;
        if name == 0 {
            break;
        }
        if mem.c_str(name)? == b"ConstantPool" {
            return mem.u64_at(e + size_at);
        }
    }
    Err(JvmError::Missing("the type ConstantPool".into()))
}

/// A method descriptor (`(JLjava/lang/Object;[I)V`) as Java spells it: the parameter
/// types, and the return type (`long`, `java.lang.Object`, `int[]`; `void`).
pub fn java_signature(descriptor: &[u8]) -> Option<(Vec<String>, String)> {
    let rest = descriptor.strip_prefix(b"(")?;
    let close = rest.iter().position(|&c| c == b')')?;
    let (mut params, ret) = (&rest[..close], &rest[close + 1..]);
    let mut out = Vec::new();
    while !params.is_empty() {
        let (t, n) = java_type(params)?;
        out.push(t);
        params = &params[n..];
    }
    let (r, n) = java_type(ret)?;
    (n == ret.len()).then_some((out, r))
}

/// The first field type of `d` as Java spells it, and how many bytes it took.
fn java_type(d: &[u8]) -> Option<(String, usize)> {
    let base = match *d.first()? {
        b'B' => "byte",
        b'C' => "char",
        b'D' => "double",
        b'F' => "float",
        b'I' => "int",
        b'J' => "long",
        b'S' => "short",
        b'Z' => "boolean",
        b'V' => "void",
        b'L' => {
            let end = d.iter().position(|&c| c == b';')?;
            let class = String::from_utf8_lossy(&d[1..end]).replace('/', ".");
            return Some((class, end + 1));
        }
        b'[' => {
            let (t, n) = java_type(&d[1..])?;
            return Some((t + "[]", n + 1));
        }
        _ => return None,
    };
    Some((base.to_string(), 1))
}

/// The frames of interpreted methods, read from live JVMs: each process's [`Layout`]
/// (read at its first stack with JVM frames), and the frame each `Method*` became (a
/// label frame naming it; None: not a method that could be read), cached per (process,
/// `Method*`). Kept after the process exits until its pid is seen again: stacks taken
/// before the exit are still converted after it (the ring buffer is read behind), and
/// their methods can no longer be read.
#[derive(Default)]
pub struct MethodFrames {
    layouts: HashMap<u32, Result<Layout, JvmError>>,
    frames: HashMap<(u32, u64), Option<u64>>,
    exited: std::collections::HashSet<u32>,
    /// JVMs whose layout was read.
    pub read: u64,
    /// JVMs whose VMStructs lack what this reader needs (their frames stay
    /// `Interpreter`), and what the first of them lacked.
    pub unsupported: u64,
    /// See [`MethodFrames::unsupported`].
    pub first_unsupported: Option<String>,
}

impl MethodFrames {
    /// The layout of the JVM `tgid` (exports at `exports`), read once; a JVM still
    /// starting (no interpreter yet) is asked again next time.
    pub fn layout(&mut self, tgid: u32, exports: &JvmExports) -> Option<&Layout> {
        let stale = matches!(self.layouts.get(&tgid), None | Some(Err(JvmError::NotYet)));
        if stale {
            let l = match std::fs::File::open(format!("/proc/{tgid}/mem")) {
                Ok(mem) => Layout::read(&mem, exports),
                Err(_) => Err(JvmError::Unreadable(0)),
            };
            match &l {
                Ok(_) => self.read += 1,
                Err(e @ JvmError::Missing(_)) => {
                    self.unsupported += 1;
                    self.first_unsupported.get_or_insert_with(|| e.to_string());
                }
                // Gone (its frames are counted unnamed), or not started (asked again).
                Err(_) => {}
            }
            self.layouts.insert(tgid, l);
        }
        self.layouts.get(&tgid)?.as_ref().ok()
    }

    /// In the stack `frames` of `tgid` (leaf first: its ip, then return addresses), put
    /// `label(name)` in place of each frame that runs in the interpreter: its `Method*` is
    /// `read_stack(fp + FRAME_METHOD_OFFSET)`, with the frame's fp from `bps` (parallel to
    /// `frames`; empty when unknown). `label` is called once per method. Returns how many
    /// interpreted frames were named, and how many were left as they were.
    pub fn name_interpreted(
        &mut self,
        tgid: u32,
        exports: &JvmExports,
        frames: &mut [u64],
        bps: &[u64],
        read_stack: impl Fn(u64) -> Option<u64>,
        mut label: impl FnMut(String) -> u64,
    ) -> (u64, u64) {
        let (mut named, mut unnamed) = (0, 0);
        if self.layout(tgid, exports).is_none() {
            return (named, unnamed);
        }
        let Some(Ok(layout)) = self.layouts.get(&tgid) else {
            return (named, unnamed);
        };
        for (i, a) in frames.iter_mut().enumerate() {
            // Return addresses point after the call: look up a - 1 (the leaf's ip as is).
            let pc = if i == 0 { *a } else { a.wrapping_sub(1) };
            if !layout.interprets(pc) {
                continue;
            }
            let method = bps
                .get(i)
                .and_then(|&bp| read_stack(bp.wrapping_add_signed(FRAME_METHOD_OFFSET)));
            let frame = method.and_then(|m| {
                *self.frames.entry((tgid, m)).or_insert_with(|| {
                    let name = std::fs::File::open(format!("/proc/{tgid}/mem"))
                        .ok()
                        .and_then(|mem| layout.method_name(&mem, m).ok());
                    name.map(&mut label)
                })
            });
            match frame {
                Some(f) => {
                    *a = f;
                    named += 1;
                }
                None => unnamed += 1,
            }
        }
        (named, unnamed)
    }

    /// Process `tgid` exited: what is known of it serves its stacks still to come, until
    /// the pid is seen again ([`MethodFrames::seen`]).
    pub fn exited(&mut self, tgid: u32) {
        if self.layouts.contains_key(&tgid) {
            self.exited.insert(tgid);
        }
    }

    /// Process `tgid` was seen (created, or a thread of it first seen): if that pid had
    /// exited, it is another process now.
    pub fn seen(&mut self, tgid: u32) {
        if self.exited.remove(&tgid) {
            self.forget(tgid);
        }
    }

    /// Forget a process (it exec'd, or its pid is another process's now): its metadata's
    /// addresses may be reused.
    pub fn forget(&mut self, tgid: u32) {
        self.frames.retain(|&(t, _), _| t != tgid);
        self.layouts.remove(&tgid);
        self.exited.remove(&tgid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory of a fake process: one buffer at `base`.
    struct Buffer {
        base: u64,
        bytes: Vec<u8>,
    }

    impl Memory for Buffer {
        fn read(&self, addr: u64, buf: &mut [u8]) -> bool {
            let Some(off) = addr.checked_sub(self.base) else {
                return false;
            };
            match self.bytes.get(off as usize..off as usize + buf.len()) {
                Some(b) => {
                    buf.copy_from_slice(b);
                    true
                }
                None => false,
            }
        }
    }

    impl Buffer {
        fn put(&mut self, addr: u64, b: &[u8]) {
            let off = (addr - self.base) as usize;
            if self.bytes.len() < off + b.len() {
                self.bytes.resize(off + b.len(), 0);
            }
            self.bytes[off..off + b.len()].copy_from_slice(b);
        }
        fn put_u64(&mut self, addr: u64, v: u64) {
            self.put(addr, &v.to_le_bytes());
        }
        /// A string somewhere after everything: its address.
        fn string(&mut self, s: &str) -> u64 {
            let at = self.base + self.bytes.len() as u64;
            self.put(at, s.as_bytes());
            // NUL, and room for a reader that reads names 80 bytes at a time.
            self.put(at + s.len() as u64, &[0; 80]);
            at
        }
    }

    #[test]
    fn signatures_read_as_java_spells_them() {
        assert_eq!(java_signature(b"()V"), Some((vec![], "void".to_string())));
        assert_eq!(
            java_signature(b"(JLjava/lang/Object;[[I)Ljava/lang/String;"),
            Some((
                vec!["long".into(), "java.lang.Object".into(), "int[][]".into()],
                "java.lang.String".into()
            ))
        );
        assert_eq!(java_signature(b"(Q)V"), None);
        assert_eq!(
            external_class_name(b"QueueDemo$$Lambda$14+0x0000000800c01200"),
            "QueueDemo$$Lambda$14/0x0000000800c01200"
        );
        assert_eq!(external_class_name(b"java/lang/Thread"), "java.lang.Thread");
        assert_eq!(java_signature(b"()VV"), None);
        assert_eq!(java_signature(b"V"), None);
    }

    /// A JVM's tables and one method laid out in a buffer as HotSpot 17 lays them out
    /// (entry strides and offsets as libjvm 17's: 48-byte field entries, name at 0, field
    /// name at 8, offset at 32, address at 40; 48-byte type entries, size at 40).
    #[test]
    fn a_method_is_named_through_the_tables() {
        let mut m = Buffer {
            base: 0x1000,
            bytes: vec![0; 0x4000],
        };
        let exports = JvmExports(std::array::from_fn(|i| 0x1000 + 8 * i as u64));
        let (structs, types) = (0x1100u64, 0x1900u64);
        for (i, v) in [structs, 48, 0, 8, 32, 40, types, 48, 0, 40]
            .into_iter()
            .enumerate()
        {
            m.put_u64(exports.0[i], v);
        }
        m.bytes.resize(0x4000, 0);
        let fields: [(&str, &str, u64, u64); 14] = [
            ("Method", "_constMethod", 8, 0),
            ("ConstMethod", "_constants", 8, 0),
            ("ConstMethod", "_name_index", 34, 0),
            ("ConstMethod", "_signature_index", 36, 0),
            ("ConstantPool", "_pool_holder", 24, 0),
            ("ConstantPool", "_length", 60, 0),
            ("Klass", "_name", 24, 0),
            ("InstanceKlass", "_constants", 232, 0),
            ("Symbol", "_length", 4, 0),
            ("Symbol", "_body", 6, 0),
            ("StubQueue", "_stub_buffer", 8, 0),
            ("StubQueue", "_buffer_limit", 20, 0),
            ("AbstractInterpreter", "_code", 0, 0x3000),
            // Same field name, another type: not taken for Klass::_name.
            ("Other", "_name", 99, 0),
        ];
        let mut e = structs;
        for (ty, f, off, addr) in fields.iter().rev() {
            let (ty, f) = (m.string(ty), m.string(f));
            m.put_u64(e, ty);
            m.put_u64(e + 8, f);
            m.put_u64(e + 32, *off);
            m.put_u64(e + 40, *addr);
            e += 48;
        }
        let name = m.string("ConstantPool");
        m.put_u64(types + 48, name);
        m.put_u64(types + 48 + 40, 72);
        let name = m.string("Symbol");
        m.put_u64(types, name);
        // Not generated yet: asked again later.
        assert_eq!(Layout::read(&m, &exports), Err(JvmError::NotYet));
        // The interpreter: a StubQueue at 0x3100, its buffer at 0x7000, 0x500 long.
        m.put_u64(0x3000, 0x3100);
        m.put_u64(0x3108, 0x7000);
        m.put(0x3114, &0x500u32.to_le_bytes());
        let l = Layout::read(&m, &exports).unwrap();
        assert_eq!(l.interpreter, 0x7000..0x7500);
        assert_eq!((l.klass_name, l.pool_size), (24, 72));
        assert!(l.interprets(0x7010) && !l.interprets(0x7500));

        // Method 0x3200 → ConstMethod 0x3300 (name #1, signature #2) → pool 0x3400,
        // held by 0x3600.
        let sym = |m: &mut Buffer, at: u64, s: &str| {
            m.put(at + 4, &(s.len() as u16).to_le_bytes());
            m.put(at + 6, s.as_bytes());
            at
        };
        m.put_u64(0x3200 + 8, 0x3300);
        m.put_u64(0x3300 + 8, 0x3400);
        m.put(0x3300 + 34, &1u16.to_le_bytes());
        m.put(0x3300 + 36, &2u16.to_le_bytes());
        m.put_u64(0x3400 + 24, 0x3600);
        m.put(0x3400 + 60, &3u32.to_le_bytes());
        let (n, s) = (
            sym(&mut m, 0x3800, "take"),
            sym(&mut m, 0x3880, "(J)Ljava/lang/Object;"),
        );
        m.put_u64(0x3400 + 72 + 8, n);
        m.put_u64(0x3400 + 72 + 16, s);
        let class = sym(&mut m, 0x3900, "java/util/concurrent/ArrayBlockingQueue");
        m.put_u64(0x3600 + 24, class);
        m.put_u64(0x3600 + 232, 0x3400);
        assert_eq!(
            l.method_name(&m, 0x3200).unwrap(),
            "java.lang.Object java.util.concurrent.ArrayBlockingQueue.take(long)"
        );
        // A class whose pool is another: not a Method*.
        m.put_u64(0x3600 + 232, 0x3500);
        assert!(l.method_name(&m, 0x3200).is_err());

        // Tables without a field: not supported, by name.
        let mut short = Buffer {
            base: m.base,
            bytes: m.bytes.clone(),
        };
        // End the table before its last entries (Method::_constMethod is written last).
        short.put_u64(structs + 13 * 48, 0);
        assert_eq!(
            Layout::read(&short, &exports),
            Err(JvmError::Missing("Method::_constMethod".into()))
        );
        assert_eq!(
            JvmError::Missing("Method::_constMethod".into()).to_string(),
            "not supported: VMStructs lack Method::_constMethod"
        );
    }
}

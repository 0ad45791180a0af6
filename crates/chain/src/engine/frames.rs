//! How stacks and frames are named: the one naming every view, the chain graph and the
//! node table share.

use chainrec_format::{StackEntry, StackId, Symbol, SymbolNames, SymbolStr, Tables};
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

/// Frames of stack `id`, leaf first. Reserved ids: NONE → nothing; SKIPPED →
/// `[no stack: wait < Nus]`; FAILED, dangling or unknown reserved → `[missing stack]`;
/// USER_PREEMPTED → `[no user stack: preempted]`; USER_EXITING → `[no user stack: exiting]`;
/// USER_EXEC → `[no user stack: exec]`;
/// NOT_CAPTURED → `[no stack: not captured]`. Unnamed addresses print as
/// `[MODULE+0xOFFSET]` or `[unknown]` (see `FrameName`). This is how every view names
/// frames; `threshold_ns` is the recording's lazy-stack threshold.
///
/// An address with functions inlined at it (DWARF) gives several frames, leaf first like
/// the rest: the innermost inlined function first, each marked [`INLINED_MARK`], the
/// function the address is in last ([`split_inlined`]). Every consumer that reverses a
/// stack to print it root first thus reverses the inlined frames with it.
pub fn stack_frames(tables: &Tables, id: StackId, threshold_ns: u64) -> Vec<String> {
    match id {
        StackId::NONE => Vec::new(),
        StackId::SKIPPED => vec![if threshold_ns == 0 {
            "[no stack: skipped]".to_string()
        } else if threshold_ns % 1000 == 0 {
            format!("[no stack: wait < {}us]", threshold_ns / 1000)
        } else {
            format!("[no stack: wait < {}ns]", threshold_ns)
        }],
        StackId::USER_PREEMPTED => vec!["[no user stack: preempted]".to_string()],
        StackId::USER_EXITING => vec!["[no user stack: exiting]".to_string()],
        StackId::USER_EXEC => vec!["[no user stack: exec]".to_string()],
        StackId::NOT_CAPTURED => vec!["[no stack: not captured]".to_string()],
        _ => match tables.stacks.get(&id) {
            Some(st) if id.is_real() => {
                let mut out = Vec::with_capacity(st.frames.len());
                for &a in &st.frames {
                    match frame_name(tables.symbol(st, a)) {
                        FrameName::Symbol(n) => {
                            out.extend(split_inlined(n).map(str::to_string));
                        }
                        other => out.push(other.to_string()),
                    }
                }
                out
            }
            _ => vec!["[missing stack]".to_string()],
        },
    }
}

/// The mark of a function inlined at an address: `write1 [inlined]`.
pub const INLINED_MARK: &str = " [inlined]";

/// Whether frame `name` (as [`stack_frames`] gives it) is a function inlined into the
/// frame on its caller's side (the next one leaf first).
pub fn is_inlined(name: &str) -> bool {
    name.ends_with(INLINED_MARK)
}

/// The frames of one address's symbol name, leaf first. The recorder (and
/// `chainrec_symbols::resymbolize`) store an address with inlined functions as one name,
/// outermost first, `;`-separated like folded frames: `fn;outer [inlined];inner
/// [inlined]` (`FrameSymbol::display_name`); this gives `inner [inlined]`, `outer
/// [inlined]`, `fn`. Only trailing `;`-parts that end in [`INLINED_MARK`] are split off, so
/// a name with a `;` of its own (a JIT's perf-map name such as `LFoo;.bar`) stays whole.
pub fn split_inlined(name: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(name);
    std::iter::from_fn(move || {
        let r = rest?;
        match r.rsplit_once(';') {
            Some((head, last)) if is_inlined(last) && !head.is_empty() => {
                rest = Some(head);
                Some(last)
            }
            _ => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// Real stack ids that render the same frames as a lower id, mapped to the lowest such id.
/// Distinct stacks often render alike (return addresses at different call sites of one
/// function, stale frame pointers that all become `[unknown]`): interned apart, they
/// would print as duplicate folded lines, one per raw stack. Frames are compared by
/// [`FrameKey`] (names as the symbol table's string ids), so this reads no function name;
/// each stack's rendering is hashed once, in parallel (the symbol lookups of every frame
/// of every stack are most of the cost: ~0.1 s on a recording with 89 k stacks), and only
/// stacks whose hashes are equal are compared.
pub(crate) fn same_rendering_stacks(tables: &Tables) -> FxHashMap<StackId, StackId> {
    use rayon::prelude::*;
    let ids: Vec<StackId> = tables
        .stacks
        .keys()
        .copied()
        .filter(|s| s.is_real())
        .collect();
    let mut hashed: Vec<(u64, StackId)> = ids
        .into_par_iter()
        .map(|id| {
            let st = &tables.stacks[&id];
            let mut h = FxHasher::default();
            st.kind.hash(&mut h);
            frame_keys(tables, st).for_each(|k| k.hash(&mut h));
            (h.finish(), id)
        })
        .collect();
    // By hash, then id: each run of equal hashes in id order.
    hashed.par_sort_unstable();
    let runs: Vec<&[(u64, StackId)]> = hashed
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|run| run.len() > 1)
        .collect();
    let pairs: Vec<(StackId, StackId)> = runs
        .into_par_iter()
        .flat_map_iter(|run| {
            // The first stack of each rendering in this run (a collision of distinct
            // renderings costs a comparison).
            let mut firsts: Vec<(StackId, &StackEntry)> = Vec::new();
            let mut same = Vec::new();
            for &(_, id) in run {
                let st = &tables.stacks[&id];
                let first = firsts.iter().find(|(_, f)| {
                    f.kind == st.kind && frame_keys(tables, f).eq(frame_keys(tables, st))
                });
                match first {
                    Some(&(f, _)) => same.push((id, f)),
                    None => firsts.push((id, st)),
                }
            }
            same
        })
        .collect();
    pairs.into_iter().collect()
}

/// A frame's [`FrameName`] with its function name as the symbol table's string id: equal
/// keys, equal names, and the other way round.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum FrameKey<'a> {
    Symbol(SymbolStr),
    InModule(&'a str, u64),
    Unknown,
}

fn frame_keys<'a>(tables: &'a Tables, st: &'a StackEntry) -> impl Iterator<Item = FrameKey<'a>> {
    let syms = &tables.symbols;
    st.frames
        .iter()
        .map(move |&a| match syms.names(st.kind, st.tgid, a) {
            Some(SymbolNames {
                name: Some(name), ..
            }) => FrameKey::Symbol(name),
            Some(SymbolNames {
                name: None,
                module: Some(module),
                file_offset: Some(off),
            }) => FrameKey::InModule(module_file(syms.str(module)), off),
            _ => FrameKey::Unknown,
        })
}

/// The file name of a module path, as unnamed frames print it.
fn module_file(module: &str) -> &str {
    module.rsplit('/').next().unwrap_or(module)
}

/// How a frame address prints: its function name; without one, `[MODULE+0xOFFSET]` (file
/// offset in the module, stable across processes and enough to re-symbolize), or
/// `[unknown]` for an address in no known module. Unnamed addresses are mostly what a
/// frame-pointer walk reads past code built without frame pointers: printing each as a
/// raw address would split one stack into as many flame-graph towers as there were
/// stale values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum FrameName<'a> {
    Symbol(&'a str),
    InModule(&'a str, u64),
    Unknown,
}

fn frame_name(sym: Option<Symbol<'_>>) -> FrameName<'_> {
    match sym {
        Some(s) => match (s.name, s.module, s.file_offset) {
            (Some(name), _, _) => FrameName::Symbol(name),
            (None, Some(module), Some(off)) => FrameName::InModule(module_file(module), off),
            _ => FrameName::Unknown,
        },
        None => FrameName::Unknown,
    }
}

impl std::fmt::Display for FrameName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameName::Symbol(n) => f.write_str(n),
            FrameName::InModule(m, off) => write!(f, "[{m}+0x{off:x}]"),
            FrameName::Unknown => f.write_str("[unknown]"),
        }
    }
}

/// The frame that opens the sampled frames of a thread inside a chain or a hot/cold
/// graph: `[on cpu];user frames root→leaf;-;kernel frames root→leaf`.
pub(crate) const ONCPU_FRAME: &str = "[on cpu]";
/// The frame of on-CPU time without a sample in it (`[on cpu: no sample]`).
pub(crate) const ONCPU_NO_SAMPLE: &str = "[on cpu: no sample]";
/// The frame that opens the frames of on-CPU time estimated from the thread's samples
/// nearest in time, none of which fell inside it: `[on cpu: estimated];user;-;kernel`.
pub(crate) const ONCPU_ESTIMATED: &str = "[on cpu: estimated]";

/// The frames of one sample, root first: user frames root→leaf, then `-` and the kernel
/// frames root→leaf when there are any (a sample in user mode has none, and its line does
/// not end in a bare `-`). Reserved stack ids print as in every view
/// ([`stack_frames`]).
pub fn sample_frames(
    tables: &Tables,
    meta: &chainrec_format::RecordingMeta,
    k: StackId,
    u: StackId,
) -> Vec<String> {
    let th = meta.stack_threshold_ns;
    let kf = stack_frames(tables, k, th);
    let uf = stack_frames(tables, u, th);
    let mut out: Vec<String> = uf.into_iter().rev().collect();
    if !kf.is_empty() {
        out.push("-".into());
    }
    out.extend(kf.into_iter().rev());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainrec_format::{StackKind, SymbolEntry};

    #[test]
    fn inlined_names_split_leaf_first() {
        let split = |n| split_inlined(n).collect::<Vec<_>>();
        assert_eq!(split("read"), ["read"]);
        assert_eq!(
            split("main;outer [inlined];inner [inlined]"),
            ["inner [inlined]", "outer [inlined]", "main"]
        );
        // Only trailing inlined parts: a `;` of the name's own stays.
        assert_eq!(split("LFoo;.bar"), ["LFoo;.bar"]);
        assert_eq!(
            split("LFoo;.bar;baz [inlined]"),
            ["baz [inlined]", "LFoo;.bar"]
        );
        assert_eq!(split("x [inlined]"), ["x [inlined]"]);
        assert_eq!(split(";x [inlined]"), [";x [inlined]"]);
        assert!(is_inlined("x [inlined]") && !is_inlined("x"));
    }

    /// A sample prints root first: the inlined frames after the function they are in.
    #[test]
    fn sample_frames_put_inlined_frames_root_first() {
        let mut t = Tables::default();
        let id = StackId(StackId::FIRST_REAL);
        t.stacks.insert(
            id,
            StackEntry {
                id,
                kind: StackKind::User,
                tgid: 7,
                frames: vec![0x1000, 0x2000],
            },
        );
        for (addr, name) in [(0x1000, "spin"), (0x2000, "main;work [inlined]")] {
            let s = SymbolEntry {
                kind: StackKind::User,
                tgid: 7,
                addr,
                name: Some(name.to_string()),
                offset: 0,
                module: None,
                build_id: None,
                file_offset: None,
            };
            t.symbols.insert(&s);
        }
        assert_eq!(stack_frames(&t, id, 0), ["spin", "work [inlined]", "main"]);
        let meta = chainrec_format::RecordingMeta::default();
        assert_eq!(
            sample_frames(&t, &meta, StackId::NONE, id),
            ["main", "work [inlined]", "spin"]
        );
    }

    /// Unnamed frames render alike by module file name and offset, whatever the path.
    #[test]
    fn unnamed_frames_in_modules_of_one_file_name_render_alike() {
        let mut t = Tables::default();
        let sym = |tgid, addr, module: &str, off| SymbolEntry {
            kind: StackKind::User,
            tgid,
            addr,
            name: None,
            offset: 0,
            module: Some(module.to_string()),
            build_id: None,
            file_offset: Some(off),
        };
        for s in [
            sym(7, 0x1000, "/usr/lib/libc.so.6", 0x800),
            sym(8, 0x5000, "/opt/other/libc.so.6", 0x800),
            sym(8, 0x6000, "/opt/other/libc.so.6", 0x900),
            sym(9, 0x1000, "/usr/lib/libm.so.6", 0x800),
        ] {
            t.symbols.insert(&s);
        }
        for (id, tgid, addr) in [
            (16, 7, 0x1000),
            (17, 8, 0x5000),
            (18, 8, 0x6000),
            (19, 9, 0x1000),
        ] {
            let id = StackId(id);
            let frames = vec![addr, 0xdead];
            let st = StackEntry {
                id,
                kind: StackKind::User,
                tgid,
                frames,
            };
            t.stacks.insert(id, st);
        }
        let same = same_rendering_stacks(&t);
        let pairs: Vec<(u32, u32)> = same.iter().map(|(a, b)| (a.0, b.0)).collect();
        assert_eq!(pairs, [(17, 16)]);
        assert_eq!(
            stack_frames(&t, StackId(17), 0),
            ["[libc.so.6+0x800]", "[unknown]"]
        );
    }

    #[test]
    fn unresolved_frames_name_their_module_or_say_unknown() {
        let mut t = Tables::default();
        let id = StackId(StackId::FIRST_REAL);
        t.stacks.insert(
            id,
            StackEntry {
                id,
                kind: StackKind::User,
                tgid: 7,
                frames: vec![0x1000, 0x2000, 0x3000, 0x4000],
            },
        );
        let sym = |addr, name: Option<&str>, module: Option<&str>| SymbolEntry {
            kind: StackKind::User,
            tgid: 7,
            addr,
            name: name.map(str::to_string),
            offset: 0,
            module: module.map(str::to_string),
            build_id: None,
            file_offset: module.map(|_| addr - 0x800),
        };
        for s in [
            sym(0x1000, Some("__write"), Some("/usr/lib/libc.so.6")),
            sym(0x2000, None, Some("/usr/lib/libc.so.6")),
            sym(0x3000, None, None),
        ] {
            t.symbols.insert(&s);
        }
        // 0x4000 has no symbol entry at all.
        assert_eq!(
            stack_frames(&t, id, 0),
            ["__write", "[libc.so.6+0x1800]", "[unknown]", "[unknown]"]
        );
    }
}

//! Prove that the modules of a crate form a DAG: no import circle among them.
//!
//! ```text
//! cargo run -p chainrec-modcycles -- crates/*/src src
//! ```
//!
//! Each argument is a crate's source root (the folder of `lib.rs` or `main.rs`). Every
//! `.rs` file is a module (`a.rs` and `a/mod.rs` are `a`, `a/b.rs` is `a::b`, `lib.rs` and
//! `main.rs` the root). An edge goes from a module to every module a path in its code names:
//! `crate::…`, `super::…` and `child::…` paths, with items re-exported by a `pub use`
//! resolved to the module that defines them. Not edges: comments, `#[cfg(test)]` items
//! (unit tests may reach anywhere), and the root's `mod` and `pub use` lines (the root is
//! the crate's facade). Prints the edges with `-v`; exits 1 and prints each circle found.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path inside its crate, segments joined by `::` ("" for the root).
type Mod = String;

struct Source {
    module: Mod,
    /// Code without comments and `#[cfg(test)]` items.
    code: String,
}

fn main() {
    let mut verbose = false;
    let mut roots = Vec::new();
    for a in std::env::args().skip(1) {
        if a == "-v" {
            verbose = true;
        } else {
            roots.push(PathBuf::from(a));
        }
    }
    if roots.is_empty() {
        eprintln!("usage: modcycles [-v] SRC_DIR...");
        std::process::exit(2);
    }
    let mut failed = false;
    for root in &roots {
        match check(root, verbose) {
            Ok(0) => println!("{}: no import circle", root.display()),
            Ok(n) => {
                println!("{}: {n} import circle(s)", root.display());
                failed = true;
            }
            Err(e) => {
                eprintln!("modcycles: {}: {e}", root.display());
                std::process::exit(2);
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
}

/// Check one crate; returns the number of circles (strongly connected sets of modules).
fn check(root: &Path, verbose: bool) -> std::io::Result<usize> {
    let mut files = Vec::new();
    collect(root, &mut files)?;
    files.sort();
    let mut sources = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(root).unwrap_or(f);
        let mut segs: Vec<String> = rel
            .with_extension("")
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if segs.last().is_some_and(|s| s == "mod")
            || (segs.len() == 1 && (segs[0] == "lib" || segs[0] == "main"))
        {
            segs.pop();
        }
        let text = std::fs::read_to_string(f)?;
        sources.push(Source {
            module: segs.join("::"),
            code: strip(&text),
        });
    }
    let modules: BTreeSet<Mod> = sources.iter().map(|s| s.module.clone()).collect();
    // Re-exports: (module, name) -> the module the name comes from.
    let mut reexports: BTreeMap<(Mod, String), Mod> = BTreeMap::new();
    for s in &sources {
        for stmt in statements(&s.code) {
            if let Some(rest) = strip_vis_use(&stmt) {
                for path in expand(rest) {
                    let name = path.last().cloned().unwrap_or_default();
                    if let Some((target, _)) = resolve(&s.module, &path, &modules, &reexports) {
                        reexports.insert((s.module.clone(), name), target);
                    }
                }
            }
        }
    }
    let mut edges: BTreeMap<Mod, BTreeSet<Mod>> = BTreeMap::new();
    for s in &sources {
        let out = edges.entry(s.module.clone()).or_default();
        for stmt in statements(&s.code) {
            let facade = s.module.is_empty()
                && (stmt.starts_with("mod ")
                    || stmt.starts_with("pub mod ")
                    || strip_vis_use(&stmt).is_some());
            if facade {
                continue;
            }
            for path in paths_in(&stmt, &s.module, &modules) {
                if let Some((target, _)) = resolve(&s.module, &path, &modules, &reexports) {
                    if target != s.module {
                        out.insert(target);
                    }
                }
            }
        }
    }
    if verbose {
        for (m, out) in &edges {
            let name = if m.is_empty() { "(root)" } else { m };
            let to: Vec<&str> = out
                .iter()
                .map(|t| if t.is_empty() { "(root)" } else { t.as_str() })
                .collect();
            println!("  {name} -> {}", to.join(", "));
        }
    }
    let sccs = tarjan(&edges);
    let circles: Vec<_> = sccs.into_iter().filter(|c| c.len() > 1).collect();
    for c in &circles {
        let names: Vec<&str> = c
            .iter()
            .map(|m| if m.is_empty() { "(root)" } else { m.as_str() })
            .collect();
        println!("  circle: {}", names.join(" <-> "));
        for a in c {
            for b in &edges[a] {
                if c.contains(b) {
                    println!("    {a} -> {b}");
                }
            }
        }
    }
    Ok(circles.len())
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            collect(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// The code without `//` comments and without the item after each `#[cfg(test)]`.
fn strip(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<i64> = None;
    let mut pending_test = false;
    for line in text.lines() {
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        let t = code.trim();
        if let Some(d) = skip_depth.as_mut() {
            *d += braces(code);
            if *d <= 0 {
                skip_depth = None;
            }
            continue;
        }
        if t == "#[cfg(test)]" {
            pending_test = true;
            continue;
        }
        if pending_test && !t.is_empty() && !t.starts_with("#[") {
            pending_test = false;
            let d = braces(code);
            if d > 0 {
                skip_depth = Some(d);
            }
            // A one-line item (`mod tests;`, `use …;`) ends here.
            continue;
        }
        out.push_str(code);
        out.push('\n');
    }
    out
}

fn braces(s: &str) -> i64 {
    s.chars()
        .map(|c| match c {
            '{' => 1,
            '}' => -1,
            _ => 0,
        })
        .sum()
}

/// Statements, roughly: text split at `;` and at line ends outside `use` groups. Good
/// enough to tell `mod`/`use` lines from the rest.
fn statements(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0i64;
    let mut in_use = false;
    for line in code.lines() {
        let t = line.trim();
        if cur.is_empty()
            && (t.starts_with("use ")
                || t.starts_with("pub use ")
                || t.starts_with("pub(crate) use "))
        {
            in_use = true;
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(t);
        depth += braces(t);
        if !in_use || (depth <= 0 && t.ends_with(';')) {
            out.push(std::mem::take(&mut cur));
            in_use = false;
            depth = 0;
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The tree of a `pub use` / `pub(crate) use` statement, or None.
fn strip_vis_use(stmt: &str) -> Option<&str> {
    let rest = stmt
        .strip_prefix("pub use ")
        .or_else(|| stmt.strip_prefix("pub(crate) use "))?;
    Some(rest.trim_end_matches(';').trim())
}

/// Expand a use tree (`a::{b, c::{d, e}}`) into paths; `self` names the prefix, `as`
/// renames are dropped, `*` ends a path.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let prefix = tree[..open].trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base: Vec<String> = split_path(prefix);
        let mut out = Vec::new();
        for item in split_top(inner) {
            if item.trim() == "self" {
                out.push(base.clone());
                continue;
            }
            for mut p in expand(&item) {
                let mut full = base.clone();
                full.append(&mut p);
                out.push(full);
            }
        }
        out
    } else {
        let t = tree.split(" as ").next().unwrap_or("").trim();
        vec![split_path(t)]
    }
}

fn split_path(p: &str) -> Vec<String> {
    p.split("::")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s != "*")
        .collect()
}

fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out
}

/// Paths named in a statement: `crate::`, `super::` and `child::` paths (a child module
/// of `module`), use groups expanded.
fn paths_in(stmt: &str, module: &str, modules: &BTreeSet<Mod>) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = stmt.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < bytes.len() {
        if !ident(bytes[i]) || (i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && ident(bytes[i]) {
            i += 1;
        }
        let word = &stmt[start..i];
        if !stmt[i..].starts_with("::") {
            continue;
        }
        let known = word == "crate" || word == "super" || modules.contains(&join(module, word));
        if !known {
            continue;
        }
        // The path runs on through `::ident` and a `{…}` group.
        let mut j = i;
        loop {
            if stmt[j..].starts_with("::{") {
                let mut depth = 0;
                let mut k = j + 2;
                while k < bytes.len() {
                    match bytes[k] {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                k += 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                    k += 1;
                }
                j = k;
                break;
            } else if stmt[j..].starts_with("::")
                && j + 2 < bytes.len()
                && (ident(bytes[j + 2]) || bytes[j + 2] == b'*')
            {
                j += 2;
                while j < bytes.len() && (ident(bytes[j]) || bytes[j] == b'*') {
                    j += 1;
                }
            } else {
                break;
            }
        }
        out.extend(expand(&stmt[start..j]));
        i = j;
    }
    out
}

fn join(a: &str, b: &str) -> String {
    if a.is_empty() {
        b.to_string()
    } else {
        format!("{a}::{b}")
    }
}

fn parent(m: &str) -> Mod {
    m.rfind("::")
        .map(|i| m[..i].to_string())
        .unwrap_or_default()
}

/// The module a path leads to: its longest module prefix, then through one re-export.
fn resolve(
    from: &str,
    path: &[String],
    modules: &BTreeSet<Mod>,
    reexports: &BTreeMap<(Mod, String), Mod>,
) -> Option<(Mod, usize)> {
    let mut cur: Mod = from.to_string();
    let mut i = 0;
    match path.first().map(String::as_str) {
        Some("crate") => {
            cur = String::new();
            i = 1;
        }
        Some("super") => {
            while path.get(i).map(String::as_str) == Some("super") {
                cur = parent(&cur);
                i += 1;
            }
        }
        Some("self") => i = 1,
        Some(_) => {}
        None => return None,
    }
    while let Some(seg) = path.get(i) {
        let next = join(&cur, seg);
        if modules.contains(&next) {
            cur = next;
            i += 1;
        } else {
            if let Some(t) = reexports.get(&(cur.clone(), seg.clone())) {
                return Some((t.clone(), i + 1));
            }
            break;
        }
    }
    Some((cur, i))
}

/// Strongly connected components (Tarjan).
fn tarjan(edges: &BTreeMap<Mod, BTreeSet<Mod>>) -> Vec<Vec<Mod>> {
    struct St<'a> {
        edges: &'a BTreeMap<Mod, BTreeSet<Mod>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<Mod>>,
    }
    fn visit<'a>(s: &mut St<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        if let Some(out) = s.edges.get(v) {
            for w in out {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    if !s.edges.contains_key(w) {
                        continue;
                    }
                    visit(s, w);
                    let lw = s.low[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(lw));
                } else if s.on.contains(w) {
                    let iw = s.index[w];
                    let lv = s.low[v];
                    s.low.insert(v, lv.min(iw));
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            c.reverse();
            s.out.push(c);
        }
    }
    let mut s = St {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

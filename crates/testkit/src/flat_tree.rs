//! The explorer's chain trees (`/api/chains`: `nodes` in preorder, each with its parent's
//! index; node 0 the root; or, with `px=`, the compact `rows` with their string lists),
//! read back as folded paths for comparing with `chains`.

use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// One frame of a served tree: (name, parent index, value, own weight, kind).
type Node = (String, Option<usize>, u64, u64, String);

/// The frames of an answer, in its preorder, whichever form it has.
fn nodes(tree: &Value) -> Vec<Node> {
    if let Some(rows) = tree["rows"].as_array() {
        let s = |list: &str, i: &Value| {
            tree[list][i.as_u64().expect("an index") as usize]
                .as_str()
                .expect("a string of the list")
                .to_string()
        };
        return rows
            .iter()
            .map(|r| {
                (
                    s("names", &r[0]),
                    r[1].as_u64().map(|p| p as usize),
                    r[2].as_u64().expect("a value"),
                    r[3].as_u64().expect("an own weight"),
                    s("kinds", &r[5]),
                )
            })
            .collect();
    }
    tree["nodes"]
        .as_array()
        .expect("a tree has nodes")
        .iter()
        .map(|n| {
            (
                n["name"].as_str().expect("a node has a name").to_string(),
                n["parent"].as_u64().map(|p| p as usize),
                n["value"].as_u64().expect("a node has a value"),
                n["self"].as_u64().expect("a node has its own weight"),
                n["kind"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

/// Every frame below the root with its folded path (`a;b;c`), value and own weight.
pub fn frames(tree: &Value) -> Vec<(String, u64, u64)> {
    let mut paths: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (name, parent, value, own, _) in nodes(tree) {
        let path = match parent {
            None => String::new(),
            Some(0) => name,
            Some(i) => format!("{};{name}", paths[i]),
        };
        if parent.is_some() {
            out.push((path.clone(), value, own));
        }
        paths.push(path);
    }
    out
}

/// Folded `lines` (the un-merged graph, e.g. `chains --window`'s) summed into a tree whose
/// frames narrower than a pixel were merged (`/api/chains?px=`): each line walks down the
/// tree's frames; where its next frame is not a child of the frame it is at, the rest of
/// the line is one of that frame's merged children, and its weight goes to the frame's
/// `[N frames below a pixel]` child (kind `merged`). The lines per path of the tree, or
/// why a line does not fit it (no remainder where one is needed, or a line ending inside
/// a merged frame's place).
pub fn merge_into(
    tree: &Value,
    lines: &BTreeMap<String, u64>,
) -> Result<BTreeMap<String, u64>, String> {
    let nodes = nodes(tree);
    let mut paths: Vec<String> = Vec::new();
    let mut child: HashMap<(usize, &str), usize> = HashMap::new();
    let mut rest: HashMap<usize, usize> = HashMap::new();
    for (i, (name, parent, _, _, kind)) in nodes.iter().enumerate() {
        paths.push(match parent {
            None => String::new(),
            Some(0) => name.clone(),
            Some(p) => format!("{};{name}", paths[*p]),
        });
        if let Some(p) = parent {
            if kind == "merged" {
                if rest.insert(*p, i).is_some() {
                    return Err(format!("two remainders under {}", paths[*p]));
                }
            } else {
                child.insert((*p, name.as_str()), i);
            }
        }
    }
    let mut out = BTreeMap::new();
    for (line, &w) in lines {
        let mut at = 0usize;
        for f in line.split(';') {
            match child.get(&(at, f)) {
                Some(&c) => at = c,
                None => {
                    at = *rest.get(&at).ok_or_else(|| {
                        format!(
                            "{line}: {f} is neither a frame nor merged under {}",
                            paths[at]
                        )
                    })?;
                    break;
                }
            }
        }
        *out.entry(paths[at].clone()).or_insert(0) += w;
    }
    Ok(out)
}

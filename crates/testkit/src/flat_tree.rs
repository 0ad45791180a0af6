//! The explorer's chain trees (`/api/chains`: `nodes` in preorder, each with its parent's
//! index; node 0 the root), read back as folded paths for comparing with `chains`.

use serde_json::Value;

/// Every frame below the root with its folded path (`a;b;c`), value and own weight.
pub fn frames(tree: &Value) -> Vec<(String, u64, u64)> {
    let mut paths: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for n in tree["nodes"].as_array().expect("a tree has nodes") {
        let name = n["name"].as_str().expect("a node has a name");
        let path = match n["parent"].as_u64() {
            None => String::new(),
            Some(0) => name.to_string(),
            Some(i) => format!("{};{name}", paths[i as usize]),
        };
        if n["parent"].is_u64() {
            out.push((
                path.clone(),
                n["value"].as_u64().expect("a node has a value"),
                n["self"].as_u64().expect("a node has its own weight"),
            ));
        }
        paths.push(path);
    }
    out
}

//! User symbols of a trace by process name: how many, how many unnamed, and whether the
//! unnamed ones were in a known object (docs/BENCHMARKS.md, "User symbols"):
//! `cargo run --release -p chainrec-symbols --example unresolved -- TRACE [COMM_REGEX]`.
use chainrec_format::{Event, StackKind, TraceReader};
use std::collections::HashMap;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: unresolved TRACE [COMM_SUBSTRING...]");
        std::process::exit(2);
    };
    let r = TraceReader::open(path.as_ref()).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    let mut names: HashMap<u32, Vec<String>> = HashMap::new();
    for t in r.tables().tasks.values() {
        names
            .entry(t.tgid)
            .or_default()
            .push(t.comm.as_str().into_owned());
    }
    for e in &r.to_mem().expect("events").events {
        if let Event::Comm(c) = e {
            names
                .entry(c.tgid)
                .or_default()
                .push(c.comm.as_str().into_owned());
        }
    }
    let wanted = |tgid: u32| {
        args.len() < 2
            || names
                .get(&tgid)
                .is_some_and(|v| v.iter().any(|n| args[1..].iter().any(|w| n == w)))
    };
    let verbose = std::env::var("VERBOSE").is_ok();
    let mut by_module: HashMap<String, u64> = HashMap::new();
    let (mut total, mut unnamed, mut in_object, mut plausible) = (0u64, 0u64, 0u64, 0u64);
    for s in r.tables().symbols.iter() {
        if s.kind != StackKind::User || !wanted(s.tgid) {
            continue;
        }
        total += 1;
        if s.name.is_none() {
            unnamed += 1;
            if let Some(m) = &s.module {
                in_object += 1;
                *by_module.entry(m.to_string()).or_default() += 1;
            } else if (0x1000..0x8000_0000_0000).contains(&s.addr) {
                plausible += 1;
                if verbose {
                    println!(
                        "no mapping: tgid {} {:?} addr {:#x}",
                        s.tgid,
                        names.get(&s.tgid),
                        s.addr
                    );
                }
            }
        }
    }
    println!(
        "{total} user symbols, {unnamed} unnamed ({:.1} %): {in_object} in a known object, {} in none ({plausible} of them user-space addresses)",
        100.0 * unnamed as f64 / total.max(1) as f64,
        unnamed - in_object
    );
    let mut v: Vec<_> = by_module.into_iter().collect();
    v.sort_by_key(|x| std::cmp::Reverse(x.1));
    for (m, n) in v.iter().take(8) {
        println!("  unnamed in {m}: {n}");
    }
    if let Some(x) = r.meta().extra("unresolved_user_frames") {
        println!("recorder (all processes): {x}");
    }
}

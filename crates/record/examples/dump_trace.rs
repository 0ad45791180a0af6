//! Print every event of a trace, one per line, with task names (debugging aid).
//! `cargo run -p chainrec-record --example dump_trace -- trace.zst`
use chainrec_format::*;
use std::collections::HashMap;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: dump_trace TRACE");
        std::process::exit(2);
    };
    let mem = match TraceReader::open(path.as_ref()).and_then(|r| r.to_mem()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("dump_trace: {e}");
            std::process::exit(1);
        }
    };
    if std::env::args().nth(2).as_deref() == Some("--unresolved") {
        for s in mem.tables.symbols.iter().filter(|s| s.name.is_none()) {
            println!(
                "{:?} tgid {} {:#x} module {:?} file_offset {:?}",
                s.kind, s.tgid, s.addr, s.module, s.file_offset
            );
        }
        return;
    }
    let mut names: HashMap<Tid, String> = HashMap::new();
    for e in &mem.events {
        if let Event::Comm(c) = e {
            names.insert(c.tid, c.comm.to_string());
        }
        let n = |t: Tid| format!("{}({t})", names.get(&t).map(String::as_str).unwrap_or("?"));
        match e {
            Event::Switch(s) => println!(
                "{} cpu{} switch {} state {} -> {} k{} u{}",
                s.ts,
                s.cpu,
                n(s.prev_tid),
                s.prev_state,
                n(s.next_tid),
                s.prev_kstack.0,
                s.prev_ustack.0
            ),
            Event::Waking(w) => println!(
                "{} cpu{} waking {} -> {} {} src{} k{} u{}",
                w.ts,
                w.cpu,
                n(w.waker_tid),
                n(w.target_tid),
                w.context.label(),
                w.source,
                w.waker_kstack.0,
                w.waker_ustack.0
            ),
            other => println!("{other:?}"),
        }
    }
}

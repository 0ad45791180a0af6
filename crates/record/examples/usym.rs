//! Resolve user addresses of a live process (debugging aid):
//! `cargo run -p chainrec-record --example usym -- PID ADDR...` (hex addresses).
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(pid) = args.first().and_then(|p| p.parse::<u32>().ok()) else {
        eprintln!("usage: usym PID ADDR...");
        std::process::exit(2);
    };
    let addrs: Vec<u64> = args[1..]
        .iter()
        .filter_map(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
        .collect();
    // Without mapping events: the process's /proc maps, as now.
    let mut s = chainrec_record::usyms::UserSymbolizer::new(&[], &[]);
    let now = chainrec_record::workload::monotonic_ns();
    s.tracker.scan_pid(pid, 0);
    for e in s.resolve(pid, &addrs, &vec![false; addrs.len()], now, now) {
        println!("{e:?}");
    }
    println!("unresolved: {}", s.unresolved.by_reason_text());
}

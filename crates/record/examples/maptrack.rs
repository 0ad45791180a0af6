//! Watch the mapping tracker (debugging aid): `cargo run -p chainrec-record --example
//! maptrack -- COMMAND...` runs COMMAND and prints the mappings recorded for its processes.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cpus: Vec<u32> =
        (0..std::thread::available_parallelism().map_or(1, |n| n.get() as u32)).collect();
    let mut t = chainrec_record::mappings::MappingTracker::start(&cpus).expect("events");
    let child = std::process::Command::new(&args[0])
        .args(&args[1..])
        .status();
    let now = chainrec_record::workload::monotonic_ns();
    t.poll(now);
    println!("{child:?}; {}", t.summary());
    let me = std::process::id();
    for m in t.history.entries() {
        if m.tgid > me && m.tgid < me + 1000 {
            println!(
                "{} {:#x}-{:#x} {} from {} until {}",
                m.tgid, m.start, m.end, m.path, m.from_ns, m.until_ns
            );
        }
    }
}

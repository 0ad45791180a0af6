//! Debug aid: dump a scenario's folded output (SCEN=name EV=n [VIEW=..] [MODE=..]).
mod common;
#[test]
#[ignore]
fn dump() {
    let name = std::env::var("SCEN").unwrap();
    let n: u64 = std::env::var("EV").unwrap().parse().unwrap();
    let m = common::gen(&name, n);
    let view = match std::env::var("VIEW").as_deref() {
        Ok("offcpu") => chainrec_chain::View::OffCpu,
        Ok("wakeup") => chainrec_chain::View::Wakeup,
        Ok("offwake") => chainrec_chain::View::OffWake,
        _ => chainrec_chain::View::Chains,
    };
    let cfg = match std::env::var("MODE").as_deref() {
        Ok("last") => common::last(),
        Ok("nodedup") => common::nodedup(),
        _ => common::cfg(),
    };
    let r = common::run(&m, cfg, view);
    print!("{}", common::show(&r));
    println!("{:?}", r.stats);
}

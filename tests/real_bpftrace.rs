//! Every hop checked independently (issue 23, item 5): a real multi-level workload (pipes,
//! futex, TCP over loopback, disk writes with fsync) is recorded by the recorder and, at
//! the same time, by a bpftrace script on the same tracepoints (`sched_switch`,
//! `sched_waking`, Debian's `bpftrace`). For every level of every chain of the workload's
//! waits (`chainrec waits --json --no-dedup`), the waker chainrec names must be the task
//! bpftrace saw wake that thread last (the waking that ended its blocked interval), at the
//! same time, and the waker's own wait must have the same boundaries, all within ±50 µs.
//! At least 97 % of the hops of every level must agree; the disagreements are printed.
//! The reference and the check are `chainrec_testkit::bpftrace` (shared with
//! tests/real_iouring.rs).
//!
//! Needs root and bpftrace. Without them the test prints a loud SKIP and passes, unless
//! `CHAINREC_REQUIRE_BPF=1`, in which case it fails.

mod common;
use chainrec_record::RecordOptions;
use chainrec_testkit::bpf::can_record;
use chainrec_testkit::bpftrace::Bpftrace;
use common::{record_while, tmpdir, waits_json};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How long the workload runs.
const WORK: Duration = Duration::from_secs(3);

/// The workload: four chains of two or more levels, each on its own threads, for `WORK`.
/// Pipes (timer -> relay -> sink), a futex (condition variable signalled after a sleep),
/// TCP request/response over loopback (the server sleeps before it answers), and 4 KiB
/// writes with fsync (the block device's interrupt).
fn workload(dir: &Path) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(f)
            .expect("spawn")
    };
    // Pipes.
    let (r1, w1) = pipe();
    let (r2, w2) = pipe();
    {
        let stop = stop.clone();
        threads.push(spawn(
            "cr-bt-timer",
            Box::new(move || {
                let mut w = w1;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(2));
                    w.write_all(b"x").expect("write pipe 1");
                }
            }),
        ));
    }
    threads.push(spawn(
        "cr-bt-relay",
        Box::new(move || {
            let (mut r, mut w) = (r1, w2);
            let mut b = [0u8; 1];
            while r.read(&mut b).expect("read pipe 1") == 1 {
                w.write_all(&b).expect("write pipe 2");
            }
        }),
    ));
    threads.push(spawn(
        "cr-bt-sink",
        Box::new(move || {
            let mut r = r2;
            let mut b = [0u8; 1];
            while r.read(&mut b).expect("read pipe 2") == 1 {}
        }),
    ));
    // Earlier waits: the collector's read spans four 1 ms sleeps of the batcher, three of
    // them before the one its chain follows (branches of the DAG, ended by the timer).
    let (r3, w3) = pipe();
    {
        let stop = stop.clone();
        threads.push(spawn(
            "cr-bt-batch",
            Box::new(move || {
                let mut w = w3;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..4 {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    w.write_all(b"x").expect("write pipe 3");
                }
            }),
        ));
    }
    threads.push(spawn(
        "cr-bt-collect",
        Box::new(move || {
            let mut r = r3;
            let mut b = [0u8; 1];
            while r.read(&mut b).expect("read pipe 3") == 1 {}
        }),
    ));
    // Futex: a condition variable signalled after a 1 ms sleep.
    let pair = Arc::new((Mutex::new(0u64), Condvar::new()));
    {
        let (stop, pair) = (stop.clone(), pair.clone());
        threads.push(spawn(
            "cr-bt-signal",
            Box::new(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                    *pair.0.lock().unwrap() += 1;
                    pair.1.notify_one();
                }
                *pair.0.lock().unwrap() = u64::MAX;
                pair.1.notify_one();
            }),
        ));
    }
    threads.push(spawn(
        "cr-bt-waiter",
        Box::new(move || {
            let mut seen = 0;
            let mut g = pair.0.lock().unwrap();
            while *g != u64::MAX {
                while *g == seen {
                    g = pair.1.wait(g).unwrap();
                }
                seen = *g;
            }
        }),
    ));
    // TCP over loopback.
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    threads.push(spawn(
        "cr-bt-server",
        Box::new(move || {
            let (mut c, _) = l.accept().expect("accept");
            c.set_nodelay(true).expect("nodelay");
            let mut b = [0u8; 1];
            while c.read(&mut b).expect("server read") == 1 {
                std::thread::sleep(Duration::from_millis(1));
                c.write_all(&b).expect("server write");
            }
        }),
    ));
    {
        let stop = stop.clone();
        threads.push(spawn(
            "cr-bt-client",
            Box::new(move || {
                let mut c = TcpStream::connect(addr).expect("connect");
                c.set_nodelay(true).expect("nodelay");
                let mut b = [7u8; 1];
                while !stop.load(Ordering::Relaxed) {
                    c.write_all(&b).expect("client write");
                    c.read_exact(&mut b).expect("client read");
                }
            }),
        ));
    }
    // Disk: 4 KiB written and fsync'ed, every 2 ms.
    {
        let (stop, path) = (stop.clone(), dir.join("fsync.dat"));
        threads.push(spawn(
            "cr-bt-fsync",
            Box::new(move || {
                let mut f = std::fs::File::create(&path).expect("create");
                let block = [0x5au8; 4096];
                while !stop.load(Ordering::Relaxed) {
                    f.write_all(&block).expect("write");
                    f.sync_data().expect("fsync");
                    std::thread::sleep(Duration::from_millis(2));
                }
            }),
        ));
    }
    std::thread::sleep(WORK);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("workload thread");
    }
}

fn pipe() -> (std::fs::File, std::fs::File) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints for pipe to fill.
    let r = unsafe { libc::pipe(fds.as_mut_ptr()) };
    assert_eq!(r, 0, "pipe: {}", std::io::Error::last_os_error());
    use std::os::fd::FromRawFd;
    // SAFETY: both fds were just created by pipe and are owned by nobody else.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

#[test]
fn every_hop_agrees_with_bpftrace() {
    const TEST: &str = "every_hop_agrees_with_bpftrace";
    if !can_record(TEST) {
        return;
    }
    if !chainrec_testkit::bpftrace::available(TEST) {
        return;
    }
    let dir = tmpdir("bpftrace");
    let bt = Bpftrace::start(&dir).expect("start bpftrace");
    let (trace, ()) = record_while(&dir, RecordOptions::default(), || workload(&dir));
    let reference = bt.stop(TEST);
    let waits = waits_json(&trace, &[]);
    let me = std::process::id() as u64;
    let agreement = reference.check(&waits, |w| w["tgid"].as_u64() == Some(me));
    agreement.print(TEST);
    let roots = agreement.roots;
    let levels = &agreement.levels;
    assert!(roots >= 1000, "only {roots} waits of the workload");
    agreement.assert_at_least(TEST, 97);
    assert!(
        levels.get(&2).is_some_and(|l| l.0 >= 100),
        "too few level-2 hops: {levels:?}"
    );
    // The collector's waits show the batcher's earlier sleeps as branches.
    assert!(
        agreement.earlier.0 >= 100,
        "too few earlier-wait branches: {:?}",
        agreement.earlier
    );
}

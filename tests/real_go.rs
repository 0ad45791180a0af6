//! Real-kernel test of Go stacks (issue 35, item 3): a channel pipeline
//! (testdata/go/chanpipe.go: receiver <- relay <- producer, the producer sleeping 5 ms),
//! built with each Go the goroutine probes support (frame pointers on, `.symtab` kept):
//! Debian 12's 1.19 (the machine's `go`) and Debian 13's 1.24 (`CHAINREC_GO124`), one
//! test each. Go 1.24 inlines the goroutines' functions into the `go` statements'
//! wrappers (`main.main.gowrap3`): frames are compared without their ` [inlined]` mark.
//!
//! Checked:
//! - a parked goroutine's stack, taken on its M's g0 stack, goes through `runtime.mcall`
//!   into the goroutine's own frames (the frame-pointer walk kept where CFI stops): at
//!   least 90 % of the level-0 waits through `runtime.chanrecv` name `main.receiver` or
//!   `main.relay` and reach `runtime.goexit`;
//! - the receiver goroutine as the runtime's own goroutine dump shows it blocked (taken
//!   half-way through by the program, `pprof.Lookup("goroutine").WriteTo(stderr, 2)`) is
//!   in the recorded waits with the same frames in the same order, above
//!   `runtime.chanrecv`;
//! - an M's stack ends at `runtime.mstart`, the thread's entry, with no `[unwind: ...]`
//!   label (it read `[unwind: stack copy too short above …]` before): at least 90 % of the
//!   waits through `runtime.sysmon`.
//!
//!
//! And issue 38's HTTP criterion (`go_http_handler_waits_end_at_the_clients_write`):
//! testdata/go/httpload.go, a net/http server loaded by a client process over loopback;
//! the server's connection goroutines' waits for the next request end at netpoll, joined
//! to the thread that woke the poller out of epoll_wait: the client's thread in its write
//! with `[softirq: NET_RX]` on top, its user stack the client's write loop goroutine, and
//! that goroutine's own chain below.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON): without BPF it skips loudly unless
//! `CHAINREC_REQUIRE_BPF=1`. Needs `go` (apt-get install golang-go) and Go 1.24
//! (`CHAINREC_GO124`, set by `./x.sh test`): without one, its tests skip loudly unless
//! `CHAINREC_REQUIRE_TOOLS=1`.

mod common;
use chainrec_testkit::bpf::can_record;
use common::{bin, ok, GoVersion};

/// Whether the folded `level` (frames joined by `;`) has the function `name`, inlined or
/// not.
fn has_frame(level: &str, name: &str) -> bool {
    level
        .split(';')
        .any(|f| f.strip_suffix(" [inlined]").unwrap_or(f) == name)
}

#[test]
fn go_stacks_reach_goroutine_frames_and_thread_entries_go1_19() {
    go_stacks_reach_goroutine_frames_and_thread_entries(GoVersion::Go119);
}

#[test]
fn go_stacks_reach_goroutine_frames_and_thread_entries_go1_24() {
    go_stacks_reach_goroutine_frames_and_thread_entries(GoVersion::Go124);
}

fn go_stacks_reach_goroutine_frames_and_thread_entries(version: GoVersion) {
    let Some(t) = common::go_test("real_go", version, "chanpipe") else {
        return;
    };
    let (test, dir, exe) = (t.name.as_str(), &t.dir, &t.exe);
    if !can_record(test) {
        return;
    }
    let trace = dir.join("g.zst");
    let dump = dir.join("goroutines.txt");
    // Goroutine probes on this binary only: the HTTP test's Go processes may run
    // meanwhile (this recording would find their binary too, and their goroutines would
    // count in the width below).
    ok(
        bin()
            .args(["record", "--no-samples", "--no-go", "--go"])
            .arg(exe)
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .args(["sh", "-c", "exec \"$0\" 2>\"$1\""])
            .arg(exe)
            .arg(&dump),
        "chainrec record",
    );
    // The runtime's own goroutine dump (debug=2: one block per goroutine, `goroutine N
    // [chan receive]:` then function lines and file lines).
    let dump = std::fs::read_to_string(&dump).unwrap();
    let chains = ok(
        bin()
            .args(["chains", "--unit", "ns", "--comm", "^chanpipe$"])
            .arg(&trace),
        "chainrec chains",
    );
    let folded = String::from_utf8_lossy(&chains.stdout);
    let [mut recv, mut recv_named, mut sysmon, mut sysmon_clean] = [0u64; 4];
    for (path, w) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let root = path.split(";--;").next().unwrap();
        let w: u64 = w.parse().unwrap();
        if root.contains("runtime.chanrecv") {
            recv += w;
            if (has_frame(root, "main.receiver") || has_frame(root, "main.relay"))
                && root.contains("runtime.goexit")
            {
                recv_named += w;
            }
        }
        if root.contains("runtime.sysmon") {
            sysmon += w;
            if !root.contains("[unwind:") && root.contains("runtime.mstart") {
                sysmon_clean += w;
            }
        }
    }
    eprintln!(
        "{test}: chanpipe: {recv_named} of {recv} ns through chanrecv name main.*; \
         {sysmon_clean} of {sysmon} ns through sysmon end at runtime.mstart"
    );
    // The receiver, as the runtime's dump shows it blocked (`goroutine N [chan receive]:`
    // then its frames, leaf first; Go's traceback leaves the runtime's own frames out), is
    // in the recorded waits: its frames in the same order, above runtime.chanrecv. Only the
    // receiver: the relay and main.main park too, but their M goes on running other
    // goroutines, and a thread-level recording sees a goroutine's stack only when its park
    // puts the M to sleep (issue #38 records the parks themselves).
    let receiver: Vec<String> = dump
        .split("\n\n")
        .find(|b| {
            b.lines()
                .next()
                .is_some_and(|h| h.contains("[chan receive]"))
                && b.lines().any(|l| l.starts_with("main.receiver("))
        })
        .map(|b| {
            b.lines()
                .skip(1)
                .filter(|l| !l.starts_with('\t') && !l.starts_with("created by"))
                .map(|l| l.split('(').next().unwrap().to_string())
                .filter(|f| f != "runtime.gopark")
                .collect()
        })
        .unwrap_or_default();
    assert!(
        receiver.iter().any(|f| f == "main.receiver"),
        "no receiver in the runtime's dump:\n{dump}"
    );
    let in_order = |root: &str| {
        // Root first in the folded line: the dump's frames reversed, as a subsequence,
        // then the channel receive.
        let frames: Vec<&str> = root
            .split(';')
            .map(|f| f.strip_suffix(" [inlined]").unwrap_or(f))
            .collect();
        let mut at = 0;
        receiver
            .iter()
            .rev()
            .all(|f| match frames[at..].iter().position(|x| x == f) {
                Some(i) => {
                    at += i + 1;
                    true
                }
                None => false,
            })
            && frames[at..].contains(&"runtime.chanrecv")
    };
    let matching: u64 = folded
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(p, _)| in_order(p.split(";--;").next().unwrap()))
        .map(|(_, w)| w.parse::<u64>().unwrap())
        .sum();
    eprintln!(
        "the receiver as the runtime shows it ({receiver:?}): {matching} ns of recorded waits"
    );
    assert!(
        matching > 0,
        "no recorded wait has the receiver's frames {receiver:?} in order:\n{folded}"
    );
    assert!(
        recv > 100_000_000,
        "few channel waits ({recv} ns):\n{folded}"
    );
    assert!(
        recv_named * 10 >= recv * 9,
        "{recv_named} of {recv} ns of channel waits reach the goroutine's frames:\n{folded}"
    );
    assert!(sysmon > 0, "no sysmon wait:\n{folded}");
    assert!(
        sysmon_clean * 10 >= sysmon * 9,
        "{sysmon_clean} of {sysmon} ns of sysmon's waits end at runtime.mstart:\n{folded}"
    );
    // Goroutine chains (issue #38, done when: at least half of the receiver's waiting time
    // shows the relay at level 1, the producer below it, then the runtime's timer).
    let chains = ok(
        bin()
            .args(["chains", "--goroutines", "--unit", "ns"])
            .arg(&trace),
        "chainrec chains --goroutines",
    );
    let folded = String::from_utf8_lossy(&chains.stdout);
    let (mut waited, mut through) = (0u64, 0u64);
    // Issue #35's Go criterion, on the goroutine-level graph: the program's chain width
    // whose level 0 has main.* frames (at thread level an M parked in stopm has no
    // goroutine, and 33 % was all it gave).
    let (mut width, mut main_at_0) = (0u64, 0u64);
    // The runnable parts (session 25, runtime.execute): the roots' own, and all.
    let (mut root_rq, mut rq) = (0u64, 0u64);
    for (path, w) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let levels: Vec<&str> = path.split(";--;").collect();
        let w: u64 = w.parse().unwrap();
        width += w;
        if levels.last() == Some(&"[run queue]") {
            rq += w;
            if levels.len() == 2 {
                root_rq += w;
            }
        }
        if levels[0].contains(";main.") {
            main_at_0 += w;
        }
        if !has_frame(levels[0], "main.receiver") {
            continue;
        }
        waited += w;
        if levels.len() == 4
            && has_frame(levels[1], "main.relay")
            && has_frame(levels[2], "main.producer")
            && levels[3].ends_with("[go runtime: timer]")
        {
            through += w;
        }
    }
    eprintln!("{test}: goroutine chains: {through} of {waited} ns of the receiver's waits go relay <- producer <- timer");
    assert!(
        waited > 100_000_000,
        "few receiver waits ({waited} ns):\n{folded}"
    );
    eprintln!("{test}: goroutine chains: {main_at_0} of {width} ns have main.* frames at level 0");
    eprintln!(
        "{test}: goroutine chains: runnable (ready -> execute) {rq} ns ({:.3} %), the roots' own \
         {root_rq} ns ({:.3} %)",
        100.0 * rq as f64 / width.max(1) as f64,
        100.0 * root_rq as f64 / width.max(1) as f64
    );
    assert!(root_rq > 0, "no runnable part:\n{folded}");
    assert!(
        main_at_0 * 10 >= width * 8,
        "{main_at_0} of {width} ns of goroutine chains have main.* at level 0:\n{folded}"
    );
    assert!(
        through * 2 >= waited,
        "{through} of {waited} ns of the receiver's waits go relay <- producer <- timer:\n{folded}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Issue 38's last "done when": a Go HTTP server under load (net/http, a client over
/// loopback, testdata/go/httpload.go): handler goroutines' waits end at netpoll <-
/// `[softirq: NET_RX]` through the client's goroutine.
///
/// Of the handler goroutines' (`net/http.(*conn).serve`) IO waits, as `chains
/// --goroutines --no-dedup` shows them, the time behind a netpoll level splits into: the
/// poller thread's own time after its wakeup (`[go runtime: netpoll]` alone, or its
/// `[run queue]` under it: machine load decides that part), readiness found by a
/// non-blocking poll (`[go runtime: netpoll, polled]`), and the level of the thread that
/// woke the poller. Checked: at least 90 % of that last part is the client's write
/// (`[softirq: NET_RX]` first, the client's goroutine in its frames: its write loop, or
/// at the end its read loop closing an idle connection, or its chain going on below), at least 10 % of all of it (the rest is the machine's
/// load), and the client goroutine's chain goes on into the goroutine that sent it the
/// request (main.client's, through `persistConn.roundTrip`) for at least half of the
/// NET_RX part.
///
/// Recorded with `--stack-threshold 10us`: the waker's stacks are taken only when the
/// woken thread waited longer than the threshold, and a loaded poller's epoll waits are
/// often shorter than the default 100 µs (then the client's frames are `[no stack: …]`);
/// and `--go-max-rate 0`: the load makes over 100 000 probe hits a second.
#[test]
fn go_http_handler_waits_end_at_the_clients_write_go1_19() {
    go_http_handler_waits_end_at_the_clients_write(GoVersion::Go119);
}

#[test]
fn go_http_handler_waits_end_at_the_clients_write_go1_24() {
    go_http_handler_waits_end_at_the_clients_write(GoVersion::Go124);
}

fn go_http_handler_waits_end_at_the_clients_write(version: GoVersion) {
    let Some(t) = common::go_test("real_go", version, "httpload") else {
        return;
    };
    let (test, dir, exe) = (t.name.as_str(), &t.dir, &t.exe);
    if !can_record(test) {
        return;
    }
    let trace = dir.join("h.zst");
    ok(
        bin()
            .args([
                "record",
                "--no-samples",
                "--go-max-rate",
                "0",
                "--stack-threshold",
                "10us",
                "--go",
            ])
            .arg(exe)
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(exe),
        "chainrec record",
    );
    let chains = ok(
        bin()
            .args(["chains", "--goroutines", "--no-dedup", "--unit", "ns"])
            .arg(&trace),
        "chainrec chains --goroutines",
    );
    let folded = String::from_utf8_lossy(&chains.stdout);
    eprintln!("{}", String::from_utf8_lossy(&chains.stderr));
    let [mut netpoll, mut poller, mut polled, mut woke, mut client, mut sender] = [0u64; 6];
    // The handlers' runnable parts (session 25, runtime.execute): their own (the root's
    // `[run queue]`), and their whole IO wait time.
    let (mut handler, mut handler_rq) = (0u64, 0u64);
    for (path, w) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let levels: Vec<&str> = path.split(";--;").collect();
        let w: u64 = w.parse().unwrap();
        let handler_wait =
            has_frame(levels[0], "net/http.(*conn).serve") && levels[0].ends_with("wait: IO wait");
        if handler_wait {
            handler += w;
            if levels.len() == 2 && levels[1] == "[run queue]" {
                handler_rq += w;
            }
        }
        if !handler_wait {
            continue;
        }
        let Some(i) = levels
            .iter()
            .position(|l| l.contains("[go runtime: netpoll"))
        else {
            continue;
        };
        netpoll += w;
        if levels[i].ends_with("[go runtime: netpoll, polled]") {
            polled += w;
            continue;
        }
        match levels.get(i + 1) {
            None => poller += w,
            Some(&"[run queue]") => poller += w,
            Some(l) => {
                woke += w;
                let below = &levels[i + 2..];
                // The client's goroutine: its frames (the write loop's write; at the end the
                // read loop's close of an idle connection), or its chain below.
                let frames = l.contains(";net/http.(*persistConn).");
                if l.starts_with("[softirq: NET_RX];") && (frames || !below.is_empty()) {
                    client += w;
                    if below.first().is_some_and(|g| {
                        has_frame(g, "net/http.(*persistConn).roundTrip")
                            && has_frame(g, "main.client.func1")
                    }) {
                        sender += w;
                    }
                }
            }
        }
    }
    let pct = |a: u64, b: u64| 100.0 * a as f64 / b.max(1) as f64;
    eprintln!(
        "{test}: httpload: handler IO waits behind netpoll: {netpoll} ns; the poller thread's own time \
         after its wakeup {poller} ns ({:.1} %), non-blocking polls {polled} ns ({:.1} %), the \
         thread that woke the poller {woke} ns ({:.1} %), of which the client's write \
         ([softirq: NET_RX] through the client's goroutine) {client} ns ({:.1} % of it, \
         {:.1} % of all), going on into main.client's goroutine {sender} ns ({:.1} % of \
         the client's part)",
        pct(poller, netpoll),
        pct(polled, netpoll),
        pct(woke, netpoll),
        pct(client, woke),
        pct(client, netpoll),
        pct(sender, client)
    );
    eprintln!(
        "{test}: httpload: handler IO waits {handler} ns, their own runnable part (ready -> execute) \
         {handler_rq} ns ({:.2} %)",
        pct(handler_rq, handler)
    );
    assert!(handler_rq > 0, "no runnable part:\n{folded}");
    assert!(
        netpoll > 500_000_000,
        "few handler waits behind netpoll ({netpoll} ns):\n{folded}"
    );
    assert!(
        client * 10 >= woke * 9,
        "{client} of {woke} ns woken by a thread are the client's write:\n{folded}"
    );
    assert!(
        client * 10 >= netpoll,
        "{client} of {netpoll} ns behind netpoll are the client's write:\n{folded}"
    );
    assert!(
        sender * 2 >= client,
        "{sender} of {client} ns go on into main.client's goroutine:\n{folded}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

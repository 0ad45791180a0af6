//! Real-kernel test of goroutine waits and wakings (issue 38, the recorder's half):
//! testdata/go/gowaits.go, built with each Go the probes support (Debian 12's 1.19, the
//! machine's `go`; Debian 13's 1.24, `CHAINREC_GO124`: one test each), runs goroutines
//! that wait >= 1 ms on channels, a sync.Mutex, a WaitGroup, in time.Sleep and on a
//! loopback TCP connection (readied by the network poller), with Go's
//! own execution tracer on (runtime/trace); chainrec records the same run with `--go`.
//!
//! Checked:
//! - against the execution tracer (its parsed events: `go tool trace -d` of Go 1.19,
//!   `go tool trace -d=parsed` of Go 1.24, whose tracer has the new format of Go 1.22):
//!   every goroutine wait of >= 1 ms it shows (1.19: a GoBlock* or GoSleep to the
//!   GoUnblock of that goroutine; 1.24: its Running->Waiting to its Waiting->Runnable)
//!   has a recorded park of that goroutine and a recorded ready of it by the same
//!   goroutine (0 on both sides: the runtime's own context, e.g. the timers that end
//!   sleeps), for at least 97 % of the waits (the bar); the tracer's times are put
//!   on chainrec's clock by the CLOCK_MONOTONIC readings the program logs into its trace;
//! - the parks carry the wait reason and a stack through the goroutine's own frames
//!   (`main.receiver` waiting in `chan receive` above `runtime.chanrecv`), the readies the
//!   waker's stack (`main.relay` sending above `runtime.chansend`);
//! - `--summary-json` counts them (`goroutines`: one binary, of the test's Go version,
//!   offsets from DWARF,
//!   parks and readies as many as the trace holds, nothing capped or lost);
//! - found without `--go` (the Go binary of a process the recording sees) and capped: the
//!   channel ping-pong goes far over `--go-max-rate`, so its probes are detached, which the
//!   summary counts and the trace's process entry marks (`capped_ns`);
//! - `--go` with a binary that is not Go, or of a Go version the probes do not know (a
//!   copy whose build information says go1.99), fails before recording with a clear
//!   message (no BPF needed);
//! - the table of known versions gives the offsets the DWARF gives: the same program
//!   built with `-ldflags=-w` (no DWARF) is inspected with its offsets from the table,
//!   equal to the DWARF build's (no BPF needed);
//! - GC stop-the-world (testdata/go/gcstw.go): the recorded stop → start periods against the
//!   tracer's (≥ 90 % within 0.5 ms), runnable time inside them shown as `[go runtime: GC
//!   stop-the-world (...)]`, the same lines as without those records once put back into
//!   `[run queue]`.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON): without BPF the recording parts skip loudly
//! unless `CHAINREC_REQUIRE_BPF=1`. Needs `go` (apt-get install golang-go) and Go 1.24
//! (`CHAINREC_GO124`, set by `./x.sh test`): without one, its test skips loudly unless
//! `CHAINREC_REQUIRE_TOOLS=1`. No timing bound: the run may share the machine with a build.

use chainrec_format::{GoEventKind, TraceReader};
use std::collections::HashMap;
use std::path::Path;
mod common;
use chainrec_testkit::bpf::can_record;
use chainrec_testkit::sections::relabel_sections;
use common::{bin, ok, stderr, GoToolchain, GoVersion};

const TEST: &str = "real_go_goroutines";

/// One goroutine wait as the execution tracer shows it.
#[derive(Debug)]
struct TracerWait {
    goid: u64,
    /// What it blocked in (Go 1.19: `GoBlockRecv`, `GoSleep`, ...; Go 1.24: the reason,
    /// `chan receive`, `sleep`, ...).
    kind: String,
    /// Block and unblock, on chainrec's clock.
    block: f64,
    unblock: f64,
    /// The goroutine that unblocked it (0: none, the runtime).
    unblocker: u64,
    /// When it then started running (GoStart), on chainrec's clock, if in the trace.
    start: Option<f64>,
}

/// The waits of >= 1 ms in `go tool trace -d`'s event list (`TS TYPE p=P g=G off=O
/// ARGS...`, TS in ns from the trace's start; GoUnblock's `g=` args: the unblocker is the
/// event's G, the target the first argument), with times put on CLOCK_MONOTONIC by the
/// first and last `UserLog ... category=clock message=NS`.
fn tracer_waits(dump: &str) -> Vec<TracerWait> {
    let mut clock = Vec::new();
    let mut blocked: HashMap<u64, (u64, String)> = HashMap::new();
    // Waits unblocked and not started yet, by goroutine: their index in raw.
    let mut runnable: HashMap<u64, usize> = HashMap::new();
    let mut raw: Vec<RawWait> = Vec::new();
    for line in dump.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(ts), Some(kind)) = (f.first().and_then(|t| t.parse::<u64>().ok()), f.get(1))
        else {
            continue;
        };
        let args: Vec<(&str, &str)> = f[2..].iter().filter_map(|a| a.split_once('=')).collect();
        let num = |i: usize| args.get(i).and_then(|(_, v)| v.parse::<u64>().ok());
        if *kind == "UserLog" && line.contains("category=clock") {
            let m = args.iter().find(|(k, _)| *k == "message").unwrap().1;
            clock.push((ts, m.parse::<u64>().unwrap()));
        } else if kind.starts_with("GoBlock") || *kind == "GoSleep" {
            blocked.insert(num(1).unwrap(), (ts, kind.to_string()));
        } else if *kind == "GoUnblock" {
            // p=, g= (the unblocker), off=, g= (the target), seq=
            let (unblocker, target) = (num(1).unwrap(), num(3).unwrap());
            if let Some((b, kind)) = blocked.remove(&target) {
                if ts - b >= 1_000_000 {
                    runnable.insert(target, raw.len());
                    raw.push((target, kind, b, ts, unblocker, None));
                }
            }
        } else if *kind == "GoStart" {
            // p=, g= (the goroutine started), off=, g= (the same), seq=
            if let Some(i) = num(3).and_then(|g| runnable.remove(&g)) {
                raw[i].5 = Some(ts);
            }
        }
    }
    on_trace_clock(&clock, raw)
}

/// A tracer wait on the tracer's clock: goroutine, what it blocked in, block, unblock,
/// unblocker, start.
type RawWait = (u64, String, u64, u64, u64, Option<u64>);

/// The waits with their times put on CLOCK_MONOTONIC by the first and last `clock` logs
/// (tracer time, CLOCK_MONOTONIC).
fn on_trace_clock(clock: &[(u64, u64)], raw: Vec<RawWait>) -> Vec<TracerWait> {
    assert!(clock.len() >= 2, "no clock logs in the execution trace");
    let ((t0, m0), (t1, m1)) = (clock[0], clock[clock.len() - 1]);
    let scale = (m1 - m0) as f64 / (t1 - t0) as f64;
    let conv = |t: u64| m0 as f64 + (t as f64 - t0 as f64) * scale;
    raw.into_iter()
        .map(|(goid, kind, b, u, unblocker, start)| TracerWait {
            goid,
            kind,
            block: conv(b),
            unblock: conv(u),
            unblocker,
            start: start.map(conv),
        })
        .collect()
}

/// The waits of >= 1 ms in `go tool trace -d=parsed`'s event list, Go 1.22's tracer (1.24
/// here): one line per event, `M=M P=P G=G KIND Time=T ...` (G: the goroutine the thread
/// runs, -1 none), then for a goroutine's state change `Resource=Goroutine(N) Reason="R"
/// GoID=N FROM->TO`, for a user log `Task=0 Category="clock" Message="NS"`; stacks on the
/// lines below. A wait is Running->Waiting (its reason) to Waiting->Runnable (the
/// unblocker: that event's G, 0 for -1 as the probes say the runtime), then
/// Runnable->Running (started). T in ns; put on CLOCK_MONOTONIC by the `clock` logs.
fn tracer_waits_parsed(dump: &str) -> Vec<TracerWait> {
    // The value of `KEY=...` in line: up to the next space, or the quoted string.
    fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
        let at = line.find(&format!(" {key}="))? + key.len() + 2;
        let rest = &line[at..];
        match rest.strip_prefix('"') {
            Some(q) => q.split('"').next(),
            None => rest.split(' ').next(),
        }
    }
    let mut events: Vec<(u64, &str)> = dump
        .lines()
        .filter(|l| l.starts_with("M="))
        .filter_map(|l| Some((field(l, "Time")?.parse().ok()?, l)))
        .collect();
    events.sort_by_key(|e| e.0);
    let mut clock = Vec::new();
    let mut blocked: HashMap<u64, (u64, String)> = HashMap::new();
    let mut runnable: HashMap<u64, usize> = HashMap::new();
    let mut raw: Vec<RawWait> = Vec::new();
    for (ts, line) in events {
        let kind = line.split(' ').nth(3).unwrap_or("");
        if kind == "Log" && field(line, "Category") == Some("clock") {
            clock.push((ts, field(line, "Message").unwrap().parse::<u64>().unwrap()));
            continue;
        }
        if kind != "StateTransition" {
            continue;
        }
        let (Some(goid), Some(change)) = (
            field(line, "GoID").and_then(|g| g.parse::<u64>().ok()),
            line.rsplit(' ').next(),
        ) else {
            continue;
        };
        match change {
            "Running->Waiting" => {
                blocked.insert(goid, (ts, field(line, "Reason").unwrap().to_string()));
            }
            "Waiting->Runnable" => {
                let g: i64 = line
                    .split(' ')
                    .nth(2)
                    .and_then(|g| g.strip_prefix("G="))
                    .unwrap()
                    .parse()
                    .unwrap();
                if let Some((b, kind)) = blocked.remove(&goid) {
                    if ts - b >= 1_000_000 {
                        runnable.insert(goid, raw.len());
                        raw.push((goid, kind, b, ts, g.max(0) as u64, None));
                    }
                }
            }
            "Runnable->Running" => {
                if let Some(i) = runnable.remove(&goid) {
                    raw[i].5 = Some(ts);
                }
            }
            _ => {}
        }
    }
    on_trace_clock(&clock, raw)
}

/// The execution tracer's event list of `gotrace`: `go tool trace -d` (Go 1.19), `-d=parsed`
/// (Go 1.22's format, 1.24).
fn tracer_dump(go: &GoToolchain, dir: &Path, version: GoVersion, gotrace: &Path) -> String {
    let out = ok(
        go.command(dir)
            .args(["tool", "trace"])
            .arg(if version.new_tracer() {
                "-d=parsed"
            } else {
                "-d"
            })
            .arg(gotrace),
        "go tool trace -d",
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn goroutine_waits_agree_with_the_execution_tracer_go1_19() {
    goroutine_waits_agree_with_the_execution_tracer(GoVersion::Go119);
}

#[test]
fn goroutine_waits_agree_with_the_execution_tracer_go1_24() {
    goroutine_waits_agree_with_the_execution_tracer(GoVersion::Go124);
}

fn goroutine_waits_agree_with_the_execution_tracer(version: GoVersion) {
    let Some(t) = common::go_test(TEST, version, "gowaits") else {
        return;
    };
    let (test, dir, go, exe) = (t.name.as_str(), &t.dir, &t.go, &t.exe);
    refuses_binaries_it_cannot_probe(dir, exe, version);
    the_table_gives_the_dwarf_offsets(dir, go, exe);
    if !can_record(test) {
        return;
    }
    let trace = dir.join("g.zst");
    let gotrace = dir.join("go.trace");
    let summary = dir.join("summary.json");
    ok(
        bin()
            .args(["record", "--no-samples", "--go"])
            .arg(exe)
            .arg("--summary-json")
            .arg(&summary)
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(exe)
            .arg("trace")
            .arg(&gotrace),
        "chainrec record",
    );
    let dump = tracer_dump(go, dir, version, &gotrace);
    let waits = if version.new_tracer() {
        tracer_waits_parsed(&dump)
    } else {
        tracer_waits(&dump)
    };
    assert!(waits.len() >= 500, "only {} tracer waits", waits.len());

    let reader = TraceReader::open(&trace).unwrap();
    let g = &reader.tables().goroutines;
    let (mut parks, mut readies) = (HashMap::<u64, Vec<_>>::new(), HashMap::<u64, Vec<_>>::new());
    for e in g.events() {
        match e.kind {
            GoEventKind::Park => parks.entry(e.goid).or_default().push(e),
            GoEventKind::Ready => readies.entry(e.goid).or_default().push(e),
        }
    }
    // Each tracer wait: a park of the goroutine near its block (the probe fires at
    // gopark's entry, the tracer writes the block a few µs later in park_m), a ready near
    // its unblock (both in runtime.ready), the nearest one's waker compared.
    let (mut agree, mut no_park, mut no_ready, mut other) = (0, 0, 0, Vec::new());
    // The runnable part: the recorded execute after the ready near the unblock, against the
    // tracer's GoStart (both in runtime.execute: the probe at its entry, the tracer's event
    // a few µs later).
    let (mut started, mut start_agree, mut runnable_ns) = (0, 0, 0.0);
    for w in &waits {
        fn near<'a>(
            evs: Option<&Vec<&'a chainrec_format::GoEvent>>,
            at: f64,
        ) -> Option<&'a chainrec_format::GoEvent> {
            evs.into_iter()
                .flatten()
                .filter(|e| (e.ts as f64 - at).abs() < 500_000.0)
                .min_by_key(|e| (e.ts as f64 - at).abs() as u64)
                .copied()
        }
        if near(parks.get(&w.goid), w.block).is_none() {
            no_park += 1;
        }
        let ready = near(readies.get(&w.goid), w.unblock);
        match ready {
            None => no_ready += 1,
            Some(r) if r.waker == w.unblocker => agree += 1,
            Some(r) => other.push((w, r.waker)),
        }
        let (Some(r), Some(start)) = (ready, w.start) else {
            continue;
        };
        started += 1;
        runnable_ns += start - w.unblock;
        let x = g
            .executes()
            .iter()
            .find(|x| x.goid == w.goid && x.ts >= r.ts);
        if x.is_some_and(|x| (x.ts as f64 - start).abs() < 500_000.0) {
            start_agree += 1;
        }
    }
    eprintln!(
        "{test}: {started} tracer waits with a GoStart after the unblock ({:.1} µs runnable \
         on average); the recorded execute after the ready within 0.5 ms of it: \
         {start_agree} ({:.1} %)",
        runnable_ns / started.max(1) as f64 / 1e3,
        100.0 * start_agree as f64 / started.max(1) as f64
    );
    assert!(
        started * 10 >= waits.len() * 9 && start_agree * 100 >= started * 97,
        "{start_agree} of {started} GoStarts have the recorded execute"
    );
    let n = waits.len();
    let pct = 100.0 * agree as f64 / n as f64;
    let mut kinds: HashMap<&str, usize> = HashMap::new();
    for w in &waits {
        *kinds.entry(&w.kind).or_default() += 1;
    }
    eprintln!(
        "{test}: {n} tracer waits >= 1 ms ({kinds:?}); same unblocker {agree} ({pct:.1} %), \
         other unblocker {}, no ready {no_ready}, no park {no_park}; first others: {:?}",
        other.len(),
        &other[..other.len().min(5)]
    );
    assert!(pct >= 97.0, "{pct:.1} % of the tracer's waits agree");
    // The network poller's readies are in (runtime.netpollready): the reader's waits
    // (Go 1.19's event, Go 1.24's reason).
    let net = ["GoBlockNet", "network"];
    assert!(
        net.iter().filter_map(|k| kinds.get(k)).sum::<usize>() >= 100,
        "{kinds:?}"
    );
    assert!(
        no_park * 100 <= n * 3,
        "{no_park} of {n} tracer waits have no recorded park"
    );

    // Wait reasons and stacks, as `chainrec script --goroutines -F` prints them.
    let text = ok(
        bin().args(["script", "--goroutines", "-F"]).arg(&trace),
        "chainrec script --goroutines",
    );
    let text = String::from_utf8_lossy(&text.stdout);
    let blocks: Vec<&str> = text.split("\n0").collect();
    let receiver_parked = blocks.iter().any(|b| {
        b.contains("go_park")
            && b.contains("chan receive")
            && b.contains("runtime.chanrecv")
            && b.contains("main.receiver")
            && b.contains("runtime.goexit")
    });
    let relay_readied = blocks.iter().any(|b| {
        b.contains("go_ready")
            && b.contains("runtime.ready")
            && b.contains("runtime.chansend")
            && b.contains("main.relay")
    });
    let poller_readied = blocks
        .iter()
        .any(|b| b.contains("go_ready") && b.contains("runtime.netpollready"));
    assert!(
        receiver_parked && relay_readied && poller_readied && text.contains("go_execute    "),
        "no receiver park / relay ready with their stacks in:\n{}",
        &text[..text.len().min(4000)]
    );

    // The summary counts what the trace holds.
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let gs = &s["goroutines"];
    eprintln!("{test}: summary {gs}");
    let count = |k: GoEventKind| g.events().iter().filter(|e| e.kind == k).count() as u64;
    assert_eq!(gs["parks"], count(GoEventKind::Park), "{gs}");
    assert_eq!(gs["readies"], count(GoEventKind::Ready), "{gs}");
    assert_eq!(gs["executes"], g.executes().len() as u64, "{gs}");
    // The recording probes every Go binary it sees: another Go program running on the
    // machine (a second test, a daemon) is probed too, and is not this test's to check.
    let is_ours = |b: &&serde_json::Value| b["path"].as_str().unwrap().ends_with("/gowaits");
    let ours: Vec<_> = gs["binaries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(is_ours)
        .collect();
    assert_eq!(ours.len(), 1, "{gs}");
    assert!(
        ours[0]["version"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}.", version.minor())),
        "{gs}"
    );
    assert_eq!(ours[0]["offsets"], "DWARF", "{gs}");
    assert!(
        !gs["capped"].as_array().unwrap().iter().any(|c| is_ours(&c)),
        "{gs}"
    );
    assert_eq!(gs["lost"], 0, "{gs}");
    let procs: Vec<_> = g.processes().collect();
    assert!(
        procs.iter().any(|p| p.capped_ns == 0
            && p.version.starts_with(&format!("{}.", version.minor()))
            && p.reasons.iter().any(|r| r == "chan receive")),
        "{procs:?}"
    );

    chains_add_up_to_park_to_execute(test, &trace, g);
    found_without_go_option_and_capped(test, dir, exe);
}

/// `chains --goroutines --no-dedup`: every wait is a root whose lines add up to park →
/// execute (park → ready when no execute follows), so the whole width is their sum, worked
/// out here from the records; the roots' own `[run queue]` lines are the ready → execute
/// parts, and there are some.
fn chains_add_up_to_park_to_execute(test: &str, trace: &Path, g: &chainrec_format::Goroutines) {
    // Per goroutine: its open park, then the ready that ended it.
    let mut open: HashMap<u64, (u64, Option<u64>)> = HashMap::new();
    let (mut total, mut runnable) = (0u64, 0u64);
    let close = |p: (u64, Option<u64>), x: Option<u64>, total: &mut u64, runnable: &mut u64| {
        if let (a, Some(r)) = p {
            let end = x.unwrap_or(r);
            *total += end - a;
            *runnable += end - r;
        }
    };
    let (events, executes) = (g.events(), g.executes());
    let mut xi = 0;
    for e in events {
        // Executes before this record (one at the same time as a ready comes after it).
        while let Some(x) = executes.get(xi).filter(|x| x.ts < e.ts) {
            if let Some(p) = open.remove(&x.goid) {
                if p.1.is_some() {
                    close(p, Some(x.ts), &mut total, &mut runnable);
                } else {
                    open.insert(x.goid, p);
                }
            }
            xi += 1;
        }
        match e.kind {
            GoEventKind::Park => {
                if let Some(p) = open.insert(e.goid, (e.ts, None)) {
                    close(p, None, &mut total, &mut runnable);
                }
            }
            // A second ready: the first one's wait ends there (no execute in between).
            GoEventKind::Ready => match open.remove(&e.goid) {
                Some((a, None)) => {
                    open.insert(e.goid, (a, Some(e.ts)));
                }
                Some(p) => close(p, None, &mut total, &mut runnable),
                None => {}
            },
        }
    }
    for x in &executes[xi..] {
        if let Some(p) = open.remove(&x.goid) {
            if p.1.is_some() {
                close(p, Some(x.ts), &mut total, &mut runnable);
            } else {
                open.insert(x.goid, p);
            }
        }
    }
    for (_, p) in open {
        close(p, None, &mut total, &mut runnable);
    }
    let out = ok(
        bin()
            .args(["chains", "--goroutines", "--no-dedup", "--unit", "ns"])
            .arg(trace),
        "chainrec chains --goroutines",
    );
    let folded = String::from_utf8_lossy(&out.stdout);
    let (mut width, mut rq) = (0u64, 0u64);
    for (path, w) in folded.lines().filter_map(|l| l.rsplit_once(' ')) {
        let w: u64 = w.parse().unwrap();
        width += w;
        let levels: Vec<&str> = path.split(";--;").collect();
        if levels.len() == 2 && levels[1] == "[run queue]" {
            rq += w;
        }
    }
    eprintln!(
        "{test}: chains --goroutines: width {width} ns, of which the roots' [run queue] \
         {rq} ns ({:.2} %); from the records: park -> execute {total} ns, ready -> execute \
         {runnable} ns; {}",
        100.0 * rq as f64 / width.max(1) as f64,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    assert_eq!((width, rq), (total, runnable));
    assert!(rq > 0, "no runnable part");
}

/// Without `--go`: the binary is found from its process; the ping-pong's hit rate is far
/// over the cap (given low, 20,000/s, so that even a slow machine passes it), so the probes
/// are detached and the trace says from when.
fn found_without_go_option_and_capped(test: &str, dir: &Path, exe: &Path) {
    let trace = dir.join("pp.zst");
    let summary = dir.join("pp.json");
    let out = ok(
        bin()
            .args(["record", "--no-samples", "--go-max-rate", "20000"])
            .arg("--summary-json")
            .arg(&summary)
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(exe)
            .args(["pingpong", "1.5"]),
        "chainrec record (ping-pong)",
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let gs = &s["goroutines"];
    eprintln!(
        "{test}: ping-pong {} summary {gs}",
        String::from_utf8_lossy(&out.stdout).trim()
    );
    assert!(
        gs["binaries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["path"].as_str().unwrap().ends_with("/gowaits")),
        "{gs}"
    );
    assert!(
        gs["capped"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["path"].as_str().unwrap().ends_with("/gowaits")),
        "{gs}"
    );
    assert!(gs["parks"].as_u64().unwrap() > 0, "{gs}");
    let reader = TraceReader::open(&trace).unwrap();
    let g = &reader.tables().goroutines;
    let capped: Vec<u64> = g.processes().map(|p| p.capped_ns).collect();
    assert!(capped.iter().any(|&c| c > 0), "{capped:?}");
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("goroutines: ") && text.contains(" binaries probed"),
        "{text}"
    );
}

/// The program built without DWARF (`-ldflags=-w`) has its offsets from the table of known
/// versions, and they are those of the DWARF of `exe` (the same program with DWARF).
fn the_table_gives_the_dwarf_offsets(dir: &Path, go: &GoToolchain, exe: &Path) {
    use chainrec_record::golang::{GoBinary, LayoutSource};
    let stripped_dir = dir.join("no-dwarf");
    std::fs::create_dir_all(&stripped_dir).unwrap();
    let stripped = go.build("gowaits", &stripped_dir, &["-ldflags=-w"]);
    let (with, without) = (
        GoBinary::inspect(exe).unwrap(),
        GoBinary::inspect(&stripped).unwrap(),
    );
    eprintln!(
        "{TEST}: Go {}: offsets {:?} from the DWARF, {:?} from the table",
        with.version, with.layout, without.layout
    );
    assert_eq!(with.source, LayoutSource::Dwarf);
    assert_eq!(without.source, LayoutSource::Table);
    assert_eq!(with.layout, without.layout);
    assert_eq!(with.version, without.version);
    assert!(with.reasons.iter().any(|r| r == "chan receive"), "{with:?}");
}

/// `--go` with what cannot be probed: refused before anything is recorded.
fn refuses_binaries_it_cannot_probe(dir: &Path, exe: &Path, version: GoVersion) {
    let out = bin()
        .args(["record", "-o"])
        .arg(dir.join("never.zst"))
        .args(["--go", "/bin/true", "--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("--go /bin/true: not a Go binary"), "{e}");
    // A copy whose build information names a Go version the probes do not know.
    let mut bytes = std::fs::read(exe).unwrap();
    let mut patched = 0;
    let said = format!("go{}.", version.minor());
    let said = said.as_bytes();
    for at in 0..bytes.len() - said.len() {
        if &bytes[at..at + said.len()] == said {
            bytes[at..at + 6].copy_from_slice(b"go1.99");
            patched += 1;
        }
    }
    assert!(patched > 0, "no {said:?} in the binary");
    let fake = dir.join("gofake");
    std::fs::write(&fake, &bytes).unwrap();
    let out = bin()
        .args(["record", "-o"])
        .arg(dir.join("never.zst"))
        .arg("--go")
        .arg(&fake)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let e = stderr(&out);
    assert!(e.contains("not supported: Go 1.99"), "{e}");
    assert!(!dir.join("never.zst").exists());
}

#[test]
fn gc_stop_the_world_in_goroutine_chains_go1_19() {
    gc_stop_the_world_in_goroutine_chains(GoVersion::Go119);
}

#[test]
fn gc_stop_the_world_in_goroutine_chains_go1_24() {
    gc_stop_the_world_in_goroutine_chains(GoVersion::Go124);
}

/// The execution tracer's stop-the-world periods (begin, end) on chainrec's clock: Go
/// 1.19's `GCSTWStart` / `GCSTWDone` (`go tool trace -d`: `TS KIND p= g= off= ...`, the
/// GC's two only), Go 1.24's `RangeBegin` / `RangeEnd` named `stop-the-world (REASON)`
/// (`-d=parsed`, every reason); put on CLOCK_MONOTONIC by the program's `clock` logs.
fn tracer_stws(dump: &str, parsed: bool) -> Vec<(f64, f64)> {
    let mut clock = Vec::new();
    let mut raw = Vec::new();
    let mut open: Option<u64> = None;
    let field = |line: &str, key: &str| -> Option<u64> {
        let at = line.find(&format!(" {key}="))? + key.len() + 2;
        line[at..].split([' ', '"']).next()?.parse().ok()
    };
    let mut lines: Vec<(u64, &str)> = dump
        .lines()
        .filter_map(|l| {
            let ts = if parsed {
                field(l, "Time")?
            } else {
                l.split_whitespace().next()?.parse().ok()?
            };
            Some((ts, l))
        })
        .collect();
    lines.sort_by_key(|l| l.0);
    for (ts, line) in lines {
        let clock_log = if parsed {
            line.contains(" Log ") && line.contains("Category=\"clock\"")
        } else {
            line.contains(" UserLog ") && line.contains("category=clock")
        };
        if clock_log {
            let key = if parsed { "Message=\"" } else { "message=" };
            let at = line.find(key).unwrap() + key.len();
            let ns: u64 = line[at..]
                .split(['"', ' '])
                .next()
                .unwrap()
                .parse()
                .unwrap();
            clock.push((ts, ns));
            continue;
        }
        let (begin, end) = if parsed {
            let stw = line.contains("Name=\"stop-the-world");
            (
                stw && line.contains(" RangeBegin "),
                stw && line.contains(" RangeEnd "),
            )
        } else {
            (line.contains(" GCSTWStart "), line.contains(" GCSTWDone "))
        };
        if begin {
            open = Some(ts);
        } else if end {
            if let Some(b) = open.take() {
                raw.push((b, ts));
            }
        }
    }
    assert!(clock.len() >= 2, "no clock logs in the execution trace");
    let ((t0, m0), (t1, m1)) = (clock[0], clock[clock.len() - 1]);
    let scale = (m1 - m0) as f64 / (t1 - t0) as f64;
    let conv = |t: u64| m0 as f64 + (t as f64 - t0 as f64) * scale;
    raw.into_iter().map(|(b, e)| (conv(b), conv(e))).collect()
}

/// The trace at `p` with its Go stop-the-world sections (kind 0x85) relabelled to an
/// optional kind no reader knows (0x9f, header checksum redone): the same trace as a
/// reader before format 2.4 sees it. Returns how many sections were relabelled.
fn without_stw_sections(p: &Path, q: &Path) -> usize {
    let (b, patched) = relabel_sections(p, 0x85);
    std::fs::write(q, &b).unwrap();
    patched
}

/// `chains --goroutines --no-dedup --unit ns` of `trace`: line → weight.
fn goroutine_lines(trace: &Path) -> HashMap<String, u64> {
    let out = ok(
        bin()
            .args(["chains", "--goroutines", "--no-dedup", "--unit", "ns"])
            .arg(trace),
        "chainrec chains --goroutines",
    );
    let mut lines = HashMap::new();
    for (path, w) in String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.rsplit_once(' '))
    {
        *lines.entry(path.to_string()).or_default() += w.parse::<u64>().unwrap();
    }
    lines
}

/// Issue #38, "the M/P machinery shown where it is the cause": testdata/go/gcstw.go
/// (channel ping-pong beside a goroutine forcing a GC every 2 ms) recorded with `--go`
/// and its execution tracer on. Checked: stop-the-world periods are recorded (stop →
/// start, each short), ≥ 90 % of the tracer's are matched by a recorded one within 0.5 ms
/// at both ends; `chains --goroutines` shows some runnable time as `[go runtime: GC
/// stop-the-world (...)]`, and the same trace without its stop-the-world sections (as a
/// reader before format 2.4 sees it) gives the same lines once those are put back into
/// `[run queue]`: the same total, each nanosecond once.
fn gc_stop_the_world_in_goroutine_chains(version: GoVersion) {
    let Some(t) = common::go_test(TEST, version, "gcstw") else {
        return;
    };
    let (test, dir, go, exe) = (t.name.as_str(), &t.dir, &t.go, &t.exe);
    if !can_record(test) {
        return;
    }
    let trace = dir.join("stw.zst");
    let gotrace = dir.join("stw.trace");
    let run = ok(
        bin()
            .args(["record", "--no-samples", "--go-max-rate", "0", "--go"])
            .arg(exe)
            .arg("-o")
            .arg(&trace)
            .arg("--")
            .arg(exe)
            .arg("3")
            .arg(&gotrace),
        "chainrec record",
    );
    eprintln!("{test}: {}", String::from_utf8_lossy(&run.stdout).trim());
    let reader = TraceReader::open(&trace).unwrap();
    let g = &reader.tables().goroutines;
    let tgid = g.processes().next().expect("a Go process").tgid;
    let periods = g.stw_periods(tgid);
    let mut lens: Vec<u64> = periods.iter().map(|p| p.1 - p.0).collect();
    lens.sort_unstable();
    let gc = periods.iter().filter(|p| p.2 == 1 || p.2 == 2).count();
    eprintln!(
        "{test}: {} stop-the-world periods recorded ({gc} with a GC reason), length median \
         {} µs, max {} µs",
        periods.len(),
        lens.get(lens.len() / 2).copied().unwrap_or(0) / 1000,
        lens.last().copied().unwrap_or(0) / 1000
    );
    assert!(periods.len() >= 10, "{periods:?}");
    assert!(gc * 10 >= periods.len() * 8, "{periods:?}");

    // Against the execution tracer.
    let dump = tracer_dump(go, dir, version, &gotrace);
    let stws = tracer_stws(&dump, version.new_tracer());
    // Short: no stop paired with a much later start. Measured against the tracer's own
    // periods of the same run, not against a fixed bound: a loaded machine stretches
    // both (an absolute 10 ms failed beside other builds at 10.4 ms).
    let mut theirs: Vec<f64> = stws.iter().map(|(b, e)| e - b).collect();
    theirs.sort_unstable_by(f64::total_cmp);
    if let Some(&their_p90) = theirs.get(theirs.len() * 9 / 10) {
        let ours_p90 = lens[lens.len() * 9 / 10] as f64;
        assert!(
            ours_p90 <= their_p90 + 1_000_000.0,
            "90th percentile {ours_p90} ns against the tracer's {their_p90} ns: {lens:?}"
        );
    }
    let matched = stws
        .iter()
        .filter(|(b, e)| {
            periods
                .iter()
                .any(|p| (p.0 as f64 - b).abs() < 500_000.0 && (p.1 as f64 - e).abs() < 500_000.0)
        })
        .count();
    let pct = 100.0 * matched as f64 / stws.len().max(1) as f64;
    eprintln!(
        "{test}: the tracer's stop-the-world periods: {}; matched by a recorded one within \
         0.5 ms at both ends: {matched} ({pct:.1} %)",
        stws.len()
    );
    let unmatched = stws.iter().filter(|(b, e)| {
        !periods
            .iter()
            .any(|p| (p.0 as f64 - b).abs() < 500_000.0 && (p.1 as f64 - e).abs() < 500_000.0)
    });
    for (b, e) in unmatched.take(10) {
        let near = periods
            .iter()
            .min_by_key(|p| (p.0 as f64 - b).abs() as u64)
            .map(|p| ((p.0 as f64 - b) / 1e3, (p.1 as f64 - e) / 1e3, p.2));
        eprintln!(
            "{test}: unmatched: the tracer's {:.0} µs long; the nearest recorded: (Δbegin, Δend µs, reason) {near:?}",
            (e - b) / 1e3
        );
    }
    assert!(
        stws.len() >= 10 && pct >= 90.0,
        "{matched} of {}",
        stws.len()
    );

    // Runnable time inside them, and the same total without the split.
    let with = goroutine_lines(&trace);
    let old = dir.join("stw-old.zst");
    assert!(without_stw_sections(&trace, &old) >= 1);
    let without = goroutine_lines(&old);
    let stw_ns: u64 = (with.iter())
        .filter(|(l, _)| l.contains("[go runtime: GC stop-the-world ("))
        .map(|(_, w)| w)
        .sum();
    let total: u64 = with.values().sum();
    let total_old: u64 = without.values().sum();
    eprintln!(
        "{test}: chains --goroutines: {total} ns in all, {stw_ns} ns ({:.3} %) inside GC \
         stop-the-world; without the stop-the-world records {total_old} ns",
        100.0 * stw_ns as f64 / total.max(1) as f64
    );
    assert!(stw_ns > 0, "no [go runtime: GC stop-the-world] line");
    assert_eq!(total, total_old, "time attributed once");
    assert!(without.keys().all(|l| !l.contains("stop-the-world")));
    let mut merged: HashMap<String, u64> = HashMap::new();
    for (l, w) in &with {
        let mut levels: Vec<&str> = l.split(";--;").collect();
        for lv in levels.iter_mut() {
            if lv.starts_with("[go runtime:") && lv.contains("stop-the-world") {
                *lv = "[run queue]";
            }
        }
        *merged.entry(levels.join(";--;")).or_default() += w;
    }
    assert_eq!(
        merged, without,
        "the split lines add up to the [run queue] lines"
    );
}

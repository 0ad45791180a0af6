//! The pprof export as `go tool pprof` reads it (Debian's golang-go; `x.sh test` installs
//! it): no warnings, real function names (no `-`/`--` separator frames, Rust names not cut
//! by pprof's C++ simplifier), values that add up to the `chains` view to the nanosecond,
//! and the pid/tid/comm/level labels usable with `-tagfocus`. Without `go` the pprof runs
//! are skipped loudly, unless CHAINREC_REQUIRE_TOOLS=1 (CI), which makes that a failure;
//! the in-process checks always run.

use chainrec_chain::{Collected, Config, Engine, FoldedSink, Graph, Mode, TraceRef, View};
use chainrec_format::synth::{find, SynthParams};
use chainrec_format::*;
use chainrec_report::pprof::{self, Profile, ProfileInfo, ProfileSink};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn scenario(name: &str, events: u64) -> MemTrace {
    let sc = find(name).unwrap();
    let mut t = MemTrace::default();
    t.meta.stack_threshold_ns = 100_000;
    (sc.generate)(&SynthParams { events, seed: 1 }, &mut t).unwrap();
    t
}

/// The profile and the `chains` view (exact ns per folded line) of one run.
fn export(t: &MemTrace) -> (Profile, BTreeMap<String, u64>) {
    export_dedup(t, true)
}

/// [`export`] with subchain dedup on or off.
fn export_dedup(t: &MemTrace, dedup: bool) -> (Profile, BTreeMap<String, u64>) {
    let cfg = Config {
        mode: Mode::Bounded,
        max_depth: chainrec_chain::DEFAULT_MAX_DEPTH,
        dedup,
        filter: Default::default(),
        runqueue: true,
        oncpu: Default::default(),
        cgroup_frames: false,
        process_frames: false,
    };
    let mut engine = Engine::new(&t.tables, &t.meta, cfg);
    let mut sinks = (FoldedSink::new(View::Chains), ProfileSink::new());
    engine.process(&t.events, &mut sinks);
    engine.finish(&mut sinks);
    let trace = TraceRef {
        tables: &t.tables,
        meta: &t.meta,
        start_ns: t.meta.start_ns,
    };
    let (graph, samples) = Collected::new(sinks, engine.into_nodes(), trace).unzip();
    let folded = Graph::from(graph).folded_ns();
    let info = ProfileInfo {
        time_nanos: 1_795_000_000_000_000_000,
        duration_nanos: 3_000_000_000,
        comments: vec!["chainrec test".into()],
    };
    let p = Profile::of(&samples, &info).unwrap();
    // The samples are spliced into prost's encoding of the other fields: the bytes must be
    // exactly prost's encoding of the whole profile (field order, lengths).
    let encoded = pprof::EncodedProfile::of(&samples, &info).unwrap();
    assert_eq!(encoded.bytes, prost::Message::encode_to_vec(&p));
    assert_eq!(
        (encoded.samples, encoded.locations),
        (p.sample.len(), p.location.len())
    );
    (p, folded)
}

fn go() -> Option<PathBuf> {
    let found = ["/usr/bin/go", "/usr/lib/go/bin/go", "/usr/local/go/bin/go"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        if std::env::var("CHAINREC_REQUIRE_TOOLS").as_deref() == Ok("1") {
            panic!("go missing and CHAINREC_REQUIRE_TOOLS=1 (apt-get install golang-go)");
        }
        eprintln!("SKIPPED: go tool pprof checks: go not installed (apt-get install golang-go)");
    }
    found
}

/// `go tool pprof ARGS FILE`: stdout; fails on a non-zero exit or anything on stderr
/// (pprof's warnings go there) other than its note on how it read a numeric `-tagfocus`.
fn pprof_run(go: &Path, args: &[&str], file: &Path) -> String {
    let out = Command::new(go)
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .env("HOME", std::env::temp_dir())
        .env("PPROF_TMPDIR", std::env::temp_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pprof {args:?} failed: {stderr}");
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("tagfocus:Interpreted '3' as range"))
        .collect();
    assert!(warnings.is_empty(), "pprof {args:?} warned: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

/// Sample values of `-raw` output (lines `   VALUE: loc loc ...`).
fn raw_values(raw: &str) -> Vec<u64> {
    raw.lines()
        .skip_while(|l| !l.starts_with("Samples:"))
        .take_while(|l| !l.starts_with("Locations"))
        .filter_map(|l| {
            let (v, rest) = l.trim().split_once(':')?;
            rest.trim()
                .split(' ')
                .all(|x| x.parse::<u64>().is_ok())
                .then_some(())?;
            v.parse().ok()
        })
        .collect()
}

/// A sample's frames, leaf first: every line of every location (a location's lines are
/// leaf first too).
fn sample_names<'a>(p: &'a Profile, s: &pprof::Sample) -> Vec<&'a str> {
    let st = &p.string_table;
    s.location_id
        .iter()
        .flat_map(|&l| &p.location[l as usize - 1].line)
        .map(|line| st[p.function[line.function_id as usize - 1].name as usize].as_str())
        .collect()
}

/// The folded lines without separators, and the profile's samples as such lines (root
/// first), summed.
fn lines_of(p: &Profile, folded: &BTreeMap<String, u64>) -> [BTreeMap<String, u64>; 2] {
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for (l, w) in folded {
        let k: Vec<&str> = l.split(';').filter(|f| *f != "-" && *f != "--").collect();
        *want.entry(k.join(";")).or_default() += w;
    }
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.sample {
        let mut k = sample_names(p, s);
        k.reverse();
        *got.entry(k.join(";")).or_default() += s.value[0] as u64;
    }
    [want, got]
}

fn names(p: &Profile) -> Vec<&str> {
    p.function
        .iter()
        .map(|f| p.string_table[f.name as usize].as_str())
        .collect()
}

#[test]
fn profile_matches_chains_and_has_no_separators() {
    for name in ["pipe-relay", "busy-server"] {
        let t = scenario(name, if name == "busy-server" { 60_000 } else { 3_000 });
        let (p, folded) = export(&t);
        let total: u64 = folded.values().sum();
        assert_eq!(
            p.sample.iter().map(|s| s.value[0] as u64).sum::<u64>(),
            total,
            "{name}"
        );
        let n = names(&p);
        assert!(!n.contains(&"-") && !n.contains(&"--"), "{name}: {n:?}");
        // Every function unmangled (system_name empty) and in the one mapping.
        assert!(p.function.iter().all(|f| f.system_name == 0));
        assert!(p.location.iter().all(|l| l.mapping_id == 1));
        assert_eq!(p.mapping.len(), 1);
        assert!(p.mapping[0].has_functions);
        // Each sample's frames are its folded line without the separators, and every
        // folded line is covered: sum per separator-free line agrees.
        let st = &p.string_table;
        let [want, got] = lines_of(&p, &folded);
        for s in &p.sample {
            let keys: Vec<&str> = s
                .label
                .iter()
                .map(|l| st[l.key as usize].as_str())
                .collect();
            assert_eq!(keys, ["pid", "tid", "comm", "level", "attributed_to"]);
        }
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn go_tool_pprof_reads_it() {
    let t = scenario("pipe-relay", 3_000);
    let (p, folded) = export(&t);
    let total: u64 = folded.values().sum();
    let Some(go) = go() else { return };
    let dir = std::env::temp_dir().join(format!("chainrec-pprof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chains.pb.gz");
    let mut f = std::fs::File::create(&file).unwrap();
    pprof::write_gz(&p, &mut f).unwrap();
    drop(f);

    // Totals to the nanosecond.
    let raw = pprof_run(&go, &["-raw"], &file);
    assert_eq!(raw_values(&raw).iter().sum::<u64>(), total, "{raw}");

    // -top: real functions, threads and interrupts; no separator hubs; names intact.
    let top = pprof_run(&go, &["-top", "-nodecount=100"], &file);
    let rows: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(5))
        .collect();
    for want in [
        "cr-sink",
        "cr-relay",
        "cr-timer",
        "pipe_read",
        "pipe_write",
        "[hardirq:",
    ] {
        assert!(rows.iter().any(|r| r.starts_with(want)), "{want}: {top}");
    }
    assert!(!rows.contains(&"-") && !rows.contains(&"--"), "{top}");
    assert!(!top.contains("Main binary"), "{top}");

    // -peek: pipe_write's callers and callees are real frames.
    let peek = pprof_run(&go, &["-peek", "^pipe_write$"], &file);
    assert!(peek.contains("| pipe_write"), "{peek}");
    assert!(!peek.contains(" -\n") && !peek.contains(" --\n"), "{peek}");

    // -traces: labels on every sample.
    let traces = pprof_run(&go, &["-traces"], &file);
    let labels: Vec<String> = traces
        .lines()
        .filter(|l| l.contains(":  "))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for label in [
        "comm: cr-sink",
        "level: 3",
        "attributed_to: [hardirq: timer]",
        "pid: 100",
        "tid: 103",
    ] {
        assert!(labels.iter().any(|l| l == label), "{label}: {traces}");
    }

    // -tagfocus on a label: exactly the samples attributed to level 3.
    let st = &p.string_table;
    let level3: u64 = p
        .sample
        .iter()
        .filter(|s| {
            s.label
                .iter()
                .any(|l| st[l.key as usize] == "level" && l.num == 3)
        })
        .map(|s| s.value[0] as u64)
        .sum();
    assert!(level3 > 0 && level3 < total);
    let focused = pprof_run(&go, &["-raw", "-tagfocus=level=3"], &file);
    assert_eq!(
        raw_values(&focused).iter().sum::<u64>(),
        level3,
        "{focused}"
    );
    let by_comm = pprof_run(&go, &["-raw", "-tagfocus=comm=cr-sink"], &file);
    assert_eq!(raw_values(&by_comm).iter().sum::<u64>(), total);
    let none = Command::new(&go)
        .args(["tool", "pprof", "-raw", "-tagfocus=comm=nosuchthread"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(raw_values(&String::from_utf8_lossy(&none.stdout)).len(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// pipe-relay with cr-relay's `relay_loop` an address in `relay_main` where `relay_loop`
/// and, inside it, `relay_io` are inlined (named as the recorder names such an address).
fn inlined_relay() -> MemTrace {
    let mut t = scenario("pipe-relay", 3_000);
    chainrec_testkit::scenario::rename_user_function(
        &mut t,
        "relay_loop",
        "relay_main;relay_loop [inlined];relay_io [inlined]",
    );
    t
}

/// Where a sample lists a level's frames in call order (the waiting thread's stack, leaf
/// first), a function and the functions inlined into it are one location, its lines leaf
/// first, as pprof represents inlining; in a waker's level, where the sample runs from
/// callers to callees, each is a location of its own (pprof would mark the wrong lines
/// `(inline)`). Either way the frames read as the folded lines do.
#[test]
fn inlined_functions_are_lines_of_one_location_in_call_order() {
    let t = inlined_relay();
    let (p, folded) = export_dedup(&t, false);
    let [want, got] = lines_of(&p, &folded);
    assert_eq!(got, want);
    let st = &p.string_table;
    let fname = |f: u64| st[p.function[f as usize - 1].name as usize].as_str();
    let mut relay: Vec<Vec<&str>> = p
        .location
        .iter()
        .map(|l| {
            l.line
                .iter()
                .map(|x| fname(x.function_id))
                .collect::<Vec<_>>()
        })
        .filter(|names| names.iter().any(|n| n.starts_with("relay_")))
        .collect();
    relay.sort();
    assert_eq!(
        relay,
        [
            // cr-relay waking cr-sink: a location each.
            vec!["relay_io [inlined]"],
            // cr-relay's own waits: one location, leaf first.
            vec!["relay_io [inlined]", "relay_loop [inlined]", "relay_main"],
            vec!["relay_loop [inlined]"],
            vec!["relay_main"],
        ]
    );
    // Every other location is one frame.
    assert_eq!(p.location.iter().filter(|l| l.line.len() > 1).count(), 1);
    let (mut waiter, mut waker) = (0, 0);
    for s in &p.sample {
        let names = sample_names(&p, s);
        let at = |f: &str| names.iter().position(|n| *n == f);
        if names.last() == Some(&"cr-relay") {
            // Leaf first: read is called by relay_io, inlined into relay_loop, inlined
            // into relay_main.
            let r = at("read").unwrap();
            assert_eq!(
                names[r..],
                [
                    "read",
                    "relay_io [inlined]",
                    "relay_loop [inlined]",
                    "relay_main",
                    "cr-relay"
                ]
            );
            waiter += 1;
        } else if let Some(c) = at("cr-relay") {
            // The waker level, callers first.
            assert_eq!(
                names[c..c + 5],
                [
                    "cr-relay",
                    "relay_main",
                    "relay_loop [inlined]",
                    "relay_io [inlined]",
                    "write"
                ]
            );
            waker += 1;
        }
    }
    assert!(waiter > 0 && waker > 0, "{waiter} {waker}");

    // go tool pprof -traces: the inlined functions of cr-relay's waits marked `(inline)`,
    // leaf first above the function they are in.
    let Some(go) = go() else { return };
    let dir = std::env::temp_dir().join(format!("chainrec-pprof-inl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("chains.pb.gz");
    let mut f = std::fs::File::create(&file).unwrap();
    pprof::write_gz(&p, &mut f).unwrap();
    drop(f);
    let traces = pprof_run(&go, &["-traces"], &file);
    let frames: Vec<&str> = traces
        .lines()
        .filter(|l| !l.contains(":  ") && !l.starts_with("---"))
        .map(|l| l.get(13..).unwrap_or("").trim_end())
        .collect();
    let has = |seq: &[&str]| frames.windows(seq.len()).any(|w| w == seq);
    assert!(
        has(&[
            "read",
            "relay_io [inlined] (inline)",
            "relay_loop [inlined] (inline)",
            "relay_main",
            "cr-relay",
        ]),
        "{traces}"
    );
    assert!(
        has(&[
            "cr-relay",
            "relay_main",
            "relay_loop [inlined]",
            "relay_io [inlined]",
            "write",
        ]),
        "{traces}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

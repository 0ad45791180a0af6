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
    let cfg = Config {
        mode: Mode::Bounded,
        max_depth: chainrec_chain::DEFAULT_MAX_DEPTH,
        dedup: true,
        filter: Default::default(),
        runqueue: true,
        oncpu: Default::default(),
        cgroup_frames: false,
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
        let fname = |loc: u64| st[p.function[loc as usize - 1].name as usize].as_str();
        let mut want: BTreeMap<String, u64> = BTreeMap::new();
        for (l, w) in &folded {
            let k: Vec<&str> = l.split(';').filter(|f| *f != "-" && *f != "--").collect();
            *want.entry(k.join(";")).or_default() += w;
        }
        let mut got: BTreeMap<String, u64> = BTreeMap::new();
        for s in &p.sample {
            let mut k: Vec<&str> = s.location_id.iter().map(|&l| fname(l)).collect();
            k.reverse();
            *got.entry(k.join(";")).or_default() += s.value[0] as u64;
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

//! `chainrec export --parquet` read back with third-party readers (pyarrow and DuckDB, from
//! the venv `./x.sh test` sets up) and checked against `chainrec waits --json` on every
//! synthetic scenario: the same waits in the same order with the same values, every level
//! and run-queue part, and stack tables whose frames are those `waits -F` prints. Without
//! the Python packages the readback is skipped loudly (CHAINREC_REQUIRE_TOOLS=1: a failure).

mod common;
use common::{bin, fails_with, split_rotated, stderr, tmpdir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn run_ok(args: &[&str]) -> std::process::Output {
    let out = bin().args(args).output().unwrap();
    assert!(out.status.success(), "chainrec {args:?}: {}", stderr(&out));
    out
}

fn synth(dir: &Path, scenario: &str, events: u64) -> PathBuf {
    let p = dir.join(format!("{scenario}.zst"));
    let ev = events.to_string();
    run_ok(&[
        "synth",
        "--scenario",
        scenario,
        "--events",
        &ev,
        "-o",
        p.to_str().unwrap(),
    ]);
    p
}

/// `waits --json` lines (with `--hidden`: every wait, as the export has them).
fn waits_json(trace: &Path, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["waits", trace.to_str().unwrap(), "--json", "--hidden", "-F"];
    args.extend(extra);
    let out = run_ok(&args);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// JSON values equal, numbers compared as numbers (1 == 1.0), objects: every key of
/// `want` present and equal in `got` (the table has more columns than the JSON).
fn same(want: &Value, got: &Value, at: &str) {
    match (want, got) {
        (Value::Number(a), Value::Number(b)) => {
            if a.is_f64() || b.is_f64() {
                assert_eq!(a.as_f64(), b.as_f64(), "{at}");
            } else {
                assert_eq!(a, b, "{at}");
            }
        }
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                if k == "kframes" || k == "uframes" {
                    continue; // in the stacks table, checked by stack id
                }
                let g = b.get(k).unwrap_or_else(|| panic!("{at}: no column {k}"));
                same(v, g, &format!("{at}.{k}"));
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}: lengths");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                same(x, y, &format!("{at}[{i}]"));
            }
        }
        _ => assert_eq!(want, got, "{at}"),
    }
}

/// The level kind the export derives from `metal` and `context`, or the JSON's own
/// `kind` of a branch level (`earlier wait`, `blocked: not followed`).
fn kind(h: &Value) -> &str {
    if let Some(k) = h["kind"].as_str() {
        return k;
    }
    match (
        h["metal"].as_bool().unwrap(),
        h["context"].as_str().unwrap(),
    ) {
        (false, _) => "thread",
        (true, "task") => "idle",
        (true, "softirq-task") => "softirq",
        (true, c) => c,
    }
}

/// Check one reader's tables against the JSON waits (rows in order, values, stacks).
fn check(reader: &str, tables: &Value, want: &[Value], what: &str) {
    let rows = tables["waits"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), want.len(), "{what} {reader}: rows");
    let stacks: BTreeMap<u64, &Value> = tables["stacks"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["stack_id"].as_u64().unwrap(), &s["frames"]))
        .collect();
    let mut used = BTreeSet::new();
    for (i, (w, r)) in want.iter().zip(rows).enumerate() {
        let at = format!("{what} {reader} wait {i}");
        same(w, r, &at);
        assert_eq!(r["host"], "synthetic", "{at}");
        assert!(
            r["trace"].as_str().unwrap().starts_with("synthetic@boot+"),
            "{at}"
        );
        assert!(
            r["switch_out_time"].is_null(),
            "{at}: a synthetic trace has no wall clock"
        );
        let nodes = std::iter::once((w, r)).chain(
            w["hops"]
                .as_array()
                .unwrap()
                .iter()
                .zip(r["hops"].as_array().unwrap()),
        );
        for (j, (n, rn)) in nodes.enumerate() {
            if j > 0 {
                assert_eq!(rn["kind"], kind(n), "{at} level {j}");
            }
            for (id, frames) in [("kstack", "kframes"), ("ustack", "uframes")] {
                let sid = n[id].as_u64().unwrap();
                used.insert(sid);
                let got = stacks
                    .get(&sid)
                    .unwrap_or_else(|| panic!("{at}: stack {sid} missing"));
                assert_eq!(*got, &n[frames], "{at} level {j} {id} {sid}");
            }
        }
    }
    assert_eq!(
        stacks.keys().copied().collect::<BTreeSet<_>>(),
        used,
        "{what} {reader}: the stacks table holds exactly the stacks the waits use"
    );
}

/// Export `trace` (with `filter`) and check it against `waits --json`; false when the
/// readers are missing (skipped).
fn export_and_check(py: &Path, dir: &Path, trace: &Path, filter: &[&str], what: &str) {
    let want = waits_json(trace, filter);
    let out = dir.join(format!("{what}.parquet"));
    let mut args = vec![
        "export",
        trace.to_str().unwrap(),
        "--parquet",
        out.to_str().unwrap(),
        "-q",
    ];
    args.extend(filter);
    let o = run_ok(&args);
    let note = stderr(&o);
    assert!(
        note.contains(&format!(
            "wrote {} ({} waits in 1 row group(s)",
            out.display(),
            want.len()
        )),
        "{what}: {note}"
    );
    let stacks = dir.join(format!("{what}.stacks.parquet"));
    assert!(stacks.exists(), "{what}: no {}", stacks.display());
    let rb = std::process::Command::new(py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parquet/readback.py"))
        .args([&out, &stacks])
        .output()
        .unwrap();
    assert!(rb.status.success(), "{what}: readback.py: {}", stderr(&rb));
    let got: Value = serde_json::from_slice(&rb.stdout).unwrap();
    for reader in ["pyarrow", "duckdb"] {
        check(reader, &got[reader], &want, what);
    }
    let pa = &got["pyarrow"]["waits"];
    assert_eq!(pa["metadata"]["chainrec.table"], "waits", "{what}");
    assert_eq!(
        got["pyarrow"]["stacks"]["metadata"]["chainrec.table"], "stacks",
        "{what}"
    );
    let types = &got["duckdb"]["waits"]["types"];
    assert_eq!(types["tid"], "BIGINT", "{what}");
    assert_eq!(types["time_s"], "DOUBLE", "{what}");
    assert_eq!(
        types["switch_out_time"], "TIMESTAMP WITH TIME ZONE",
        "{what}"
    );
    assert!(
        types["hops"].as_str().unwrap().ends_with("[]"),
        "{what}: {}",
        types["hops"]
    );
}

#[test]
fn parquet_matches_waits_json_on_every_scenario() {
    let Some(py) = chainrec_testkit::tools::python_with(
        "parquet_matches_waits_json_on_every_scenario",
        &["duckdb", "pyarrow"],
    ) else {
        return;
    };
    let dir = tmpdir("parquet");
    for sc in chainrec_format::synth::scenarios() {
        let trace = synth(&dir, sc.name, 3000);
        export_and_check(&py, &dir, &trace, &[], sc.name);
    }
    // A filter selects the same waits in both commands (a thread filter: dedup off).
    let relay = dir.join("pipe-relay.zst");
    export_and_check(&py, &dir, &relay, &["--comm", "^cr-sink$"], "relay-sink");
    export_and_check(&py, &dir, &relay, &["-m", "5000"], "relay-5ms");
}

#[test]
fn parquet_outputs_must_not_collide() {
    let dir = tmpdir("parquet-collide");
    let t = synth(&dir, "pipe-relay", 500);
    let t = t.to_str().unwrap();
    let w = dir.join("w.parquet");
    let s = dir.join("w.stacks.parquet");
    for other in [&w, &s] {
        let o = bin()
            .args(["export", t, "--parquet", w.to_str().unwrap(), "--pprof"])
            .arg(other)
            .output()
            .unwrap();
        fails_with(&o, "another output names");
        assert!(
            !w.exists() && !s.exists(),
            "nothing written on a refused export"
        );
    }
}

/// A synthetic trace of `host` (with a wall clock from `wall_clock`, Unix seconds).
fn synth_host(dir: &Path, scenario: &str, host: &str, wall_clock: Option<u32>) -> PathBuf {
    let p = dir.join(format!("{}-{scenario}.zst", host.replace('/', "_")));
    let mut args = vec![
        "synth".to_string(),
        "--scenario".into(),
        scenario.into(),
        "--events".into(),
        "3000".into(),
        "--host".into(),
        host.into(),
        "-o".into(),
        p.to_str().unwrap().into(),
    ];
    if let Some(s) = wall_clock {
        args.extend(["--wall-clock".into(), s.to_string()]);
    }
    run_ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    p
}

fn export_dir(dir: &Path, traces: &[&PathBuf]) -> String {
    let mut args = vec!["export".to_string()];
    args.extend(traces.iter().map(|t| t.to_str().unwrap().to_string()));
    args.extend([
        "--parquet-dir".into(),
        dir.to_str().unwrap().into(),
        "-q".into(),
    ]);
    stderr(&run_ok(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    ))
}

/// The `*.parquet` files under `dir`, relative, sorted.
fn parquet_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().to_str().unwrap().to_string();
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// `chains --unit ns` of one trace summed by root frame (the waiting thread): what the
/// fleet's "top chains" query must give for that trace.
fn chain_roots(trace: &Path) -> BTreeMap<String, u64> {
    let out = run_ok(&["chains", trace.to_str().unwrap(), "--unit", "ns"]);
    let mut by_root = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let (stack, w) = line.rsplit_once(' ').unwrap();
        let root = stack.split(';').next().unwrap().to_string();
        *by_root.entry(root).or_insert(0) += w.parse::<u64>().unwrap();
    }
    by_root
}

/// Unix second 1_795_000_000 is 2026-11-18 11:06:40 UTC; a synthetic trace starts 1 s
/// after its clock's zero.
const DAY1: u32 = 1_795_000_000;

#[test]
fn parquet_dir_adds_one_part_per_recording_and_never_overwrites() {
    let dir = tmpdir("parquet-dir");
    let fleet = dir.join("fleet");
    let web_a = synth_host(&dir, "pipe-relay", "web1", Some(DAY1));
    let db = synth_host(&dir, "disk-irq", "db/7", None);
    let web_b = synth_host(&dir, "deep-chain", "web1", Some(DAY1 + 86_400));
    let note = export_dir(&fleet, &[&web_a, &db]);
    assert!(note.contains("2 recording(s) written, 0 skipped"), "{note}");
    // Host names are escaped as Hive does (`/` is %2F, never a directory); a trace
    // without a wall clock has the NULL date.
    let first = vec![
        "stacks/host=db%2F7/date=__HIVE_DEFAULT_PARTITION__/boot+1000000000ns.parquet",
        "stacks/host=web1/date=2026-11-18/20261118T110641.000000000Z.parquet",
        "waits/host=db%2F7/date=__HIVE_DEFAULT_PARTITION__/boot+1000000000ns.parquet",
        "waits/host=web1/date=2026-11-18/20261118T110641.000000000Z.parquet",
    ];
    assert_eq!(parquet_files(&fleet), first);
    let before: Vec<_> = first
        .iter()
        .map(|f| {
            std::fs::metadata(fleet.join(f))
                .unwrap()
                .modified()
                .unwrap()
        })
        .collect();
    // Again with another recording of web1: its part is added, the others skipped.
    let note = export_dir(&fleet, &[&web_a, &db, &web_b]);
    assert!(note.contains("1 recording(s) written, 2 skipped"), "{note}");
    assert_eq!(
        note.matches("skipped, its part is already there").count(),
        2
    );
    let files = parquet_files(&fleet);
    assert_eq!(files.len(), 6, "{files:?}");
    assert!(files.contains(
        &"waits/host=web1/date=2026-11-19/20261119T110641.000000000Z.parquet".to_string()
    ));
    for (f, t) in first.iter().zip(before) {
        let now = std::fs::metadata(fleet.join(f))
            .unwrap()
            .modified()
            .unwrap();
        assert_eq!(now, t, "{f} was rewritten");
    }
    // Half a part (an interrupted export): refused, named.
    std::fs::remove_file(fleet.join(first[1])).unwrap();
    let o = bin()
        .args(["export", web_a.to_str().unwrap(), "--parquet-dir"])
        .arg(&fleet)
        .output()
        .unwrap();
    fails_with(&o, "exists but");
    // Two synthetic recordings of one host start at the same time: one part, refused.
    let db2 = dir.join("db2.zst");
    std::fs::copy(&db, &db2).unwrap();
    let o = bin()
        .args([
            "export",
            db.to_str().unwrap(),
            db2.to_str().unwrap(),
            "--parquet-dir",
        ])
        .arg(dir.join("other"))
        .output()
        .unwrap();
    fails_with(&o, "started at the same time");
    assert!(
        !dir.join("other").exists(),
        "nothing written on a refused export"
    );
    // The single-file outputs take one host; they say what takes several.
    let o = bin()
        .args([
            "export",
            web_a.to_str().unwrap(),
            db.to_str().unwrap(),
            "--pprof",
        ])
        .arg(dir.join("x.pb.gz"))
        .output()
        .unwrap();
    fails_with(&o, "--parquet-dir DIR writes the tables of every host");
    let o = bin()
        .args([
            "export",
            db.to_str().unwrap(),
            "--pprof",
            "x.pb.gz",
            "--parquet-dir",
        ])
        .arg(&fleet)
        .output()
        .unwrap();
    fails_with(&o, "cannot be used with");
}

/// `export --parquet-dir` of a rotated set (the numbered files of one `record --rotate`,
/// split here by the recorder's own RotatingWriter): one part, the recording's, whose
/// tables are those of the same recording made as one file, byte for byte. Messages name
/// the set by its first and last file.
#[test]
fn parquet_dir_of_a_rotated_set_is_one_recording() {
    let dir = tmpdir("parquet-dir-rotated");
    let single = synth_host(&dir, "busy-server", "web1", Some(DAY1));
    let set = split_rotated(&single, &dir.join("r.zst"), 6, 200);
    assert!(set.len() >= 4, "{set:?}");
    let (one_dir, set_dir) = (dir.join("one"), dir.join("set"));
    export_dir(&one_dir, &[&single]);
    let refs: Vec<&PathBuf> = set.iter().collect();
    let note = export_dir(&set_dir, &refs);
    assert!(note.contains("1 recording(s) written, 0 skipped"), "{note}");
    let files = parquet_files(&set_dir);
    assert_eq!(files.len(), 2, "{files:?}");
    assert_eq!(files, parquet_files(&one_dir));
    for f in &files {
        let (a, b) = (set_dir.join(f), one_dir.join(f));
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{f}: the set's table differs from the single file's"
        );
    }
    // Again: skipped, and the message names the whole set.
    let name = format!(
        "{} … {} ({} files)",
        set[0].display(),
        set.last().unwrap().file_name().unwrap().to_str().unwrap(),
        set.len()
    );
    let note = export_dir(&set_dir, &refs);
    assert!(
        note.contains(&format!("{name}: skipped, its part is already there")),
        "{note}"
    );
}

#[test]
fn parquet_dir_reads_as_one_table_in_duckdb_and_spark() {
    let test = "parquet_dir_reads_as_one_table_in_duckdb_and_spark";
    let Some(py) = chainrec_testkit::tools::python_with(test, &["duckdb", "pyspark"]) else {
        return;
    };
    let java = std::process::Command::new("java").arg("-version").output();
    if !java.is_ok_and(|o| o.status.success()) {
        chainrec_testkit::tools::skip(
            test,
            "no Java runtime for Spark (apt-get install default-jre-headless)",
        );
        return;
    }
    let dir = tmpdir("parquet-fleet");
    let fleet = dir.join("fleet");
    let web_a = synth_host(&dir, "pipe-relay", "web1", Some(DAY1));
    let web_b = synth_host(&dir, "deep-chain", "web1", Some(DAY1 + 86_400));
    let db = synth_host(&dir, "disk-irq", "db/7", None);
    export_dir(&fleet, &[&web_a, &web_b, &db]);
    let got = chainrec_testkit::tools::run_python_json(
        &py,
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/parquet/fleet.py"),
        &[fleet],
    );
    // The readers agree with each other on every query...
    for q in ["top", "parts", "join"] {
        assert_eq!(got["duckdb"][q], got["spark"][q], "{q}: DuckDB vs Spark");
    }
    // ... the partition columns are typed (the date a DATE: Spark's `date`)...
    assert_eq!(got["duckdb"]["types"]["date"], "DATE");
    assert_eq!(got["spark"]["types"]["date"], "date");
    assert_eq!(got["spark"]["types"]["host"], "string");
    let parts: Vec<(String, Value)> = got["duckdb"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_str().unwrap().to_string(), r[1].clone()))
        .collect();
    assert_eq!(
        parts,
        [
            ("db/7".to_string(), Value::Null),
            ("web1".to_string(), "2026-11-18".into()),
            ("web1".to_string(), "2026-11-19".into()),
        ]
    );
    // ... and the top chains are those `chains` gives for each trace, summed per host.
    let mut want: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (host, trace) in [("web1", &web_a), ("web1", &web_b), ("db/7", &db)] {
        for (root, ns) in chain_roots(trace) {
            *want.entry((host.to_string(), root)).or_default() += ns;
        }
    }
    let mut want: Vec<(String, String, u64)> =
        want.into_iter().map(|((h, c), ns)| (h, c, ns)).collect();
    want.sort_by(|a, b| b.2.cmp(&a.2).then_with(|| (&a.0, &a.1).cmp(&(&b.0, &b.1))));
    want.truncate(10);
    let top: Vec<(String, String, u64)> = got["spark"]["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r[0].as_str().unwrap().to_string(),
                r[1].as_str().unwrap().to_string(),
                r[2].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(want.len() >= 3, "{want:?}");
    assert_eq!(top, want);
}

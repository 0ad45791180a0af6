//! `chainrec export --parquet` read back with third-party readers (pyarrow and DuckDB, from
//! the venv `./x.sh test` sets up) and checked against `chainrec waits --json` on every
//! synthetic scenario: the same waits in the same order with the same values, every level
//! and run-queue part, and stack tables whose frames are those `waits -F` prints. Without
//! the Python packages the readback is skipped loudly (CHAINREC_REQUIRE_TOOLS=1: a failure).

mod common;
use common::{bin, fails_with, stderr, tmpdir};
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

/// The level kind the export derives from `metal` and `context`.
fn kind(h: &Value) -> &str {
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

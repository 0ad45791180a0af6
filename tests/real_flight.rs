//! Real-kernel flight-recorder tests (`record --flight`): one 200 ms stall among thousands
//! of millisecond waits gives exactly one trigger dump holding the stall's chain down to
//! the timer interrupt; a trigger storm is rate limited with every skipped trigger
//! counted; SIGKILL while dumping leaves complete dumps or none (a hidden partial file at
//! most), never a damaged one.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON). Without it the tests print a loud SKIP and
//! pass, unless `CHAINREC_REQUIRE_BPF=1`, in which case they fail.

mod common;
use chainrec_format::{FlightTrigger, TraceReader, TriggerKind};
use chainrec_testkit::bpf::{can_record, skip as skip_bpf};
use common::{bin, fails_with, stderr, tmpdir};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// `chainrec record -q -o PREFIX ARGS --summary-json S -- chainrec workload WORKLOAD`; None
/// (after a SKIP) when BPF is not permitted.
fn record(test: &str, dir: &Path, args: &[&str], workload: &[&str]) -> Option<serde_json::Value> {
    let summary = dir.join("summary.json");
    let out: Output = bin()
        .args(["record", "-q", "-o"])
        .arg(dir.join("dump"))
        .args(args)
        .arg("--summary-json")
        .arg(&summary)
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_chainrec"))
        .arg("workload")
        .args(workload)
        .output()
        .expect("run chainrec record");
    if !out.status.success() {
        let err = stderr(&out);
        if err.contains("ermission") || err.contains("EPERM") || err.contains("not permitted") {
            skip_bpf(test, &format!("BPF not permitted: {}", err.trim()));
            return None;
        }
        panic!("chainrec record failed: {err}");
    }
    let text = std::fs::read_to_string(&summary).expect("summary json");
    Some(serde_json::from_str(&text).expect("summary is JSON"))
}

/// Dump files (not hidden partial files) in `dir`, sorted.
fn dumps(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("dump-") && name.ends_with(".zst")
        })
        .collect();
    v.sort();
    v
}

/// Open and fully verify a dump: complete (index and trailer), every reference good.
fn verified(path: &Path) -> TraceReader {
    let r = TraceReader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        r.recovery().is_none(),
        "{}: {:?}",
        path.display(),
        r.recovery()
    );
    r.verify()
        .unwrap_or_else(|e| panic!("{}: verify: {e}", path.display()));
    r
}

fn u64_at(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn one_stall_gives_one_dump_with_its_chain_to_the_timer() {
    if !can_record("real_flight") {
        return;
    }
    let dir = tmpdir("stall");
    let wl_json = dir.join("workload.json");
    let Some(summary) = record(
        "real_flight",
        &dir,
        &[
            "--flight",
            "10s",
            "--trigger",
            "wait>50ms",
            "--comm",
            "^cr-victim$",
            "--post",
            "300ms",
        ],
        &[
            "--duration",
            "2",
            "--stall-ms",
            "200",
            "--json",
            wl_json.to_str().unwrap(),
        ],
    ) else {
        return;
    };
    let wl: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&wl_json).unwrap()).unwrap();
    let victim = u64_at(&wl["stall"]["victim"], "tid") as u32;
    // Thousands of millisecond waits around the stall (the chain workload's 2 ms ticks).
    assert!(u64_at(&wl["timer"], "calls") > 500, "{wl}");

    let flight = &summary["flight"];
    // One dump for the stall; any other trigger of the victim falls inside its window.
    assert_eq!(
        u64_at(flight, "triggers"),
        1 + u64_at(flight, "in_pending_dump"),
        "{flight}"
    );
    let listed = flight["dumps"].as_array().unwrap();
    let kinds: Vec<&str> = listed
        .iter()
        .map(|d| d["trigger"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["wait", "stop"], "{flight}");
    assert_eq!(u64_at(flight, "failed"), 0);
    assert!(
        u64_at(flight, "filtered_out") > 0,
        "other threads' long waits: {flight}"
    );
    assert_eq!(dumps(&dir).len(), 2);

    let dump = PathBuf::from(listed[0]["path"].as_str().unwrap());
    assert!(
        dump.to_string_lossy().ends_with(&format!("-{victim}.zst")),
        "{}",
        dump.display()
    );
    let r = verified(&dump);
    let t = FlightTrigger::from_meta(r.meta())
        .unwrap()
        .expect("trigger in metadata");
    assert_eq!(
        (t.kind, t.tid, t.comm.as_str()),
        (TriggerKind::Wait, victim, "cr-victim")
    );
    assert!(
        (190_000_000..2_000_000_000).contains(&t.duration_ns()),
        "stall of {} ns",
        t.duration_ns()
    );
    let (first, last) = r.time_span().unwrap();
    assert!(first <= t.start_ns && last >= t.end_ns + 300_000_000 - 50_000_000);

    // The stall's chain, to metal: cr-victim ← cr-holder ← the timer interrupt.
    let out = bin()
        .args(["chains", "--trigger", "--unit", "ns"])
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let (line, ns) = text
        .lines()
        .filter_map(|l| {
            let (stack, n) = l.rsplit_once(' ')?;
            Some((stack.to_string(), n.parse::<u64>().ok()?))
        })
        .max_by_key(|(_, n)| *n)
        .expect("chains of the trigger");
    let levels: Vec<&str> = line.split(";--;").collect();
    assert!(levels[0].starts_with("cr-victim;"), "{line}");
    assert!(levels.len() >= 3, "{line}");
    assert!(levels[1].ends_with(";cr-holder"), "{line}");
    assert!(levels[2].ends_with("[hardirq: timer]"), "{line}");
    assert!(ns >= 100_000_000, "{ns} ns on {line}");

    // top of the dump names the trigger first.
    let out = bin().args(["top", "-n", "2"]).arg(&dump).output().unwrap();
    let top = String::from_utf8(out.stdout).unwrap();
    assert!(
        top.starts_with("Flight trigger: wait>50ms — cr-victim"),
        "{top}"
    );
}

#[test]
fn a_trigger_storm_is_rate_limited_and_every_trigger_counted() {
    if !can_record("real_flight") {
        return;
    }
    let dir = tmpdir("storm");
    let Some(summary) = record(
        "real_flight",
        &dir,
        &[
            "--flight",
            "2s",
            "--trigger",
            "wait>1ms",
            "--comm",
            "^cr-",
            "--post",
            "0",
            "--min-interval",
            "300ms",
            "--max-dumps",
            "3",
        ],
        &["--duration", "2"],
    ) else {
        return;
    };
    let f = &summary["flight"];
    let triggers = u64_at(f, "triggers");
    let dumped = f["dumps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["trigger"]["kind"] == "wait")
        .count() as u64;
    assert!(triggers > 300, "the 2 ms ticks trigger: {f}");
    assert_eq!(dumped, 3, "{f}");
    assert!(u64_at(f, "skipped_max_dumps") > 0, "{f}");
    assert!(u64_at(f, "skipped_interval") > 0, "{f}");
    assert_eq!(
        triggers,
        dumped
            + u64_at(f, "in_pending_dump")
            + u64_at(f, "skipped_interval")
            + u64_at(f, "skipped_max_dumps")
            + u64_at(f, "skipped_quota"),
        "every trigger accounted for: {f}"
    );
    // Three trigger dumps and the stop dump, each complete.
    let files = dumps(&dir);
    assert_eq!(files.len(), 4, "{files:?}");
    for p in &files {
        verified(p);
    }
    // The stop dump has no triggering wait: `chains --trigger` on it says so and fails.
    let stop = (files.iter())
        .find(|p| {
            let meta = verified(p).meta().clone();
            FlightTrigger::from_meta(&meta).unwrap().unwrap().tid == 0
        })
        .expect("the stop dump among the files");
    fails_with(
        &bin()
            .args(["chains", "--trigger"])
            .arg(stop)
            .output()
            .unwrap(),
        "not because of a wait",
    );
}

#[test]
fn sigkill_while_dumping_leaves_complete_dumps_or_none() {
    if !can_record("real_flight") {
        return;
    }
    let dir = tmpdir("kill");
    // A dump at nearly every drain: the kill lands in or near one.
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(env!("CARGO_BIN_EXE_chainrec"))
            .args(["record", "-q", "-o"])
            .arg(dir.join("dump"))
            .args([
                "--flight",
                "5s",
                "--trigger",
                "wait>1ms",
                "--comm",
                "^cr-",
                "--post",
                "0",
                "--min-interval",
                "0",
                "--max-dumps",
                "1000000",
                "--dump-quota",
                "0",
                "--",
            ])
            .arg(env!("CARGO_BIN_EXE_chainrec"))
            .args(["workload", "--duration", "30"])
            .process_group(0)
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn chainrec record")
    };
    let t0 = Instant::now();
    while dumps(&dir).len() < 5 && t0.elapsed() < Duration::from_secs(30) {
        if let Ok(Some(st)) = child.try_wait() {
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            if err.contains("ermission") || err.contains("EPERM") {
                skip_bpf("real_flight", &format!("BPF not permitted: {}", err.trim()));
                return;
            }
            panic!("recorder exited early ({st}): {err}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: kill has no memory preconditions; the negative pid is the process group
    // made above (the recorder and its workload).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
    let _ = child.wait();
    let files = dumps(&dir);
    assert!(files.len() >= 5, "dumps before the kill: {files:?}");
    for p in &files {
        verified(p);
    }
}

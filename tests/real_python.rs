//! Real-kernel test of Python frames in user stacks (issue 35, item 4): a three-thread
//! pipeline on `queue.Queue` (testdata/python/queue_demo.py: `ticker` sleeps and puts,
//! `relay` takes and puts on, `sink`, the main thread, takes) run by Debian's CPython 3.11
//! (`/usr/bin/python3`). The BPF side reads each thread's Python frames with its stack,
//! and the recorder puts them in place of the `_PyEval_EvalFrameDefault` frames that ran
//! them, named `qualname (file.py:first line)`.
//!
//! Checked:
//! * at least 80 % of the sink's chain width names `sink (queue_demo.py:…)` in its own
//!   level (level 0), and the relay's level (the sink's waker) names `relay (…)`;
//! * against py-spy (`py-spy dump`, an independent reader of the same interpreter
//!   structures): the Python stack py-spy prints for the blocked sink, function and file
//!   of each frame in order, equals the Python frames of a recorded stack of the sink.
//!
//! Before: every Python frame was `_PyEval_EvalFrameDefault`. Needs root (or CAP_BPF +
//! CAP_PERFMON): without BPF it skips loudly unless `CHAINREC_REQUIRE_BPF=1`. Needs
//! `/usr/bin/python3` 3.11 and py-spy (`./x.sh test` installs it into target/pyvenv):
//! without them it skips loudly unless `CHAINREC_REQUIRE_TOOLS=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
mod common;
use chainrec_testkit::bpf::can_record;
use chainrec_testkit::tools::{available, skip};
use common::{bin, tmpdir, wait_for_pidfile};

const PYTHON: &str = "/usr/bin/python3";

/// py-spy beside the tests' Python (`CHAINREC_PYTHON`, or the workspace's venv).
fn py_spy() -> Option<PathBuf> {
    let venv_python = std::env::var_os("CHAINREC_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyvenv/bin/python"));
    let spy = venv_python.with_file_name("py-spy");
    spy.exists().then_some(spy)
}

/// A Python frame as both tools print it: `qualname (file.py:line)` → (qualname, file).
fn python_frame(f: &str) -> Option<(&str, &str)> {
    let (name, rest) = f.trim().split_once(" (")?;
    let (file, line) = rest.strip_suffix(')')?.rsplit_once(':')?;
    (line.parse::<u32>().is_ok() && file.ends_with(".py")).then_some((name, file))
}

/// The MainThread's frames in `py-spy dump` output, innermost first.
fn spy_main_thread(dump: &str) -> Vec<(String, String)> {
    dump.lines()
        .skip_while(|l| !(l.starts_with("Thread ") && l.contains("\"MainThread\"")))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .filter_map(python_frame)
        .map(|(n, f)| (n.to_string(), f.to_string()))
        .collect()
}

#[test]
fn python_pipeline_names_its_functions() {
    if !can_record("real_python") {
        return;
    }
    let version = Command::new(PYTHON).arg("--version").output();
    let version = version.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    if !version
        .as_deref()
        .is_ok_and(|v| v.starts_with("Python 3.11"))
    {
        skip(
            "real_python",
            &format!("{PYTHON} is not Python 3.11 ({version:?})"),
        );
        return;
    }
    let Some(spy) = py_spy().filter(|s| available(s.to_str().unwrap_or(""), "--version")) else {
        skip(
            "real_python",
            "py-spy missing (./x.sh test installs it into target/pyvenv)",
        );
        return;
    };
    let dir = tmpdir("python-pipeline");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/python/queue_demo.py");
    let trace = dir.join("py.zst");
    let pidfile = dir.join("pid");
    let summary_json = dir.join("summary.json");
    let record = bin()
        .args(["record", "--no-samples", "-o"])
        .arg(&trace)
        .arg("--summary-json")
        .arg(&summary_json)
        .arg("--")
        .arg(PYTHON)
        .arg(&script)
        .args(["500", "5"])
        .env("QUEUE_DEMO_PIDFILE", &pidfile)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // py-spy's view of the sink, blocked in Queue.get, while the pipeline runs.
    let pid = wait_for_pidfile(&pidfile).to_string();
    std::thread::sleep(Duration::from_millis(700));
    let dump = Command::new(&spy)
        .args(["dump", "--pid", &pid])
        .output()
        .unwrap();
    let dump = String::from_utf8_lossy(&dump.stdout).into_owned();
    let out = record.wait_with_output().unwrap();
    let summary = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "record failed: {summary}");
    eprintln!("{summary}\npy-spy:\n{dump}");

    let chains = bin().arg("chains").arg(&trace).output().unwrap();
    assert!(chains.status.success());
    let folded = String::from_utf8_lossy(&chains.stdout);
    // The sink is the main thread: its level 0 starts at _start.
    let (mut sink, mut sink_named, mut relay, mut relay_named) = (0u64, 0u64, 0u64, 0u64);
    let mut sink_stacks: Vec<Vec<(String, String)>> = Vec::new();
    for line in folded.lines() {
        let Some((stack, w)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(w) = w.parse::<u64>() else { continue };
        let levels: Vec<&str> = stack.split(";--;").collect();
        if !levels[0].contains(";_start;") || !levels[0].contains("PyThread_acquire_lock") {
            continue;
        }
        sink += w;
        if levels[0].contains(";sink (queue_demo.py:") {
            sink_named += w;
            let user = levels[0].split(";-;").next().unwrap_or("");
            let mut py: Vec<(String, String)> = user
                .split(';')
                .filter_map(python_frame)
                .map(|(n, f)| (n.to_string(), f.to_string()))
                .collect();
            py.reverse(); // innermost first, as py-spy prints
            sink_stacks.push(py);
        }
        if let Some(l) = levels.get(1) {
            relay += w;
            if l.contains(";relay (queue_demo.py:") {
                relay_named += w;
            }
        }
    }
    eprintln!(
        "sink: {sink_named} of {sink} us name sink at level 0; its waker's level: \
         {relay_named} of {relay} us name relay"
    );
    assert!(
        sink > 0,
        "no chain of the sink (main thread) waiting in Queue.get:\n{folded}"
    );
    assert!(
        sink_named * 100 >= sink * 80,
        "{sink_named} of {sink} us of the sink's chains name sink at level 0:\n{folded}"
    );
    assert!(
        relay_named * 100 >= relay * 80,
        "{relay_named} of {relay} us of the sink's waker levels name relay:\n{folded}"
    );
    let spy_main = spy_main_thread(&dump);
    assert!(
        spy_main.iter().any(|(n, _)| n == "sink"),
        "py-spy did not show the sink blocked:\n{dump}"
    );
    assert!(
        sink_stacks.contains(&spy_main),
        "no recorded stack of the sink has py-spy's Python frames {spy_main:?}; recorded: {:?}",
        sink_stacks.first()
    );
    assert!(summary.contains("Python: 1 processes read"), "{summary}");
    // The same counts in `--summary-json`, for scripts.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&summary_json).unwrap()).unwrap();
    let py = &json["user_unwind"]["python"];
    assert_eq!(py["processes"], 1, "{py}");
    assert!(py["frames"].as_u64().unwrap() > 0, "{py}");
}

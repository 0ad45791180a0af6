//! `chainrec critical-path` on synthetic traces: exact text, JSON and folded output, and
//! clear errors on bad input. Runs without root (traces from `chainrec synth`).

mod common;
use common::{bin, fails_with, stderr, tmpdir};
use std::path::PathBuf;
use std::sync::OnceLock;

/// `oncpu-worker`, three iterations (see crates/chain/tests/critpath.rs for the numbers).
fn trace() -> &'static str {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| {
        let p = tmpdir("critpath").join("ow.zst");
        let out = bin()
            .args([
                "synth",
                "--scenario",
                "oncpu-worker",
                "--events",
                "51",
                "-o",
            ])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        p
    })
    .to_str()
    .unwrap()
}

fn stdout(args: &[&str]) -> String {
    let o = bin()
        .arg("critical-path")
        .arg(trace())
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

const TEXT: &str = r#"critical path of cr-client (tid 1301, pid 1300)
window +0.000000..+0.029000 s from the trace start: 29.00 ms
  running    13.91 ms  48.0%  4 segments, 11 samples (1.00 ms each)
  runnable    60.0 us   0.2%  3 segments
  blocked    15.03 ms  51.8%  3 segments
  unknown      0.0 us   0.0%  1 segment

Who and what the time went to:
   13.91 ms  48.0%  cr-client  on cpu: render
    6.00 ms  20.7%  cr-worker  on cpu: parse
    6.00 ms  20.7%  cr-worker  on cpu: spin_compute
    3.00 ms  10.3%  cr-worker  on cpu: clear_page
    90.0 us   0.3%  [run queue]  behind [idle]
     0.0 us   0.0%  [unknown]  [off cpu since before the trace]

Biggest segments (of 11; time from the trace start, s):
+0.000110   5.01 ms  blocked (S) in pipe_read
      <- cr-worker (1302)  5.01 ms
         on cpu 5.00 ms: parse 40.0%, spin_compute 40.0%, clear_page 20.0%
         run queue 10.0 us: behind [idle] 100.0%
+0.005140   4.97 ms  running: render 100.0%
+0.010110   5.01 ms  blocked (S) in pipe_read
      <- cr-worker (1302)  5.01 ms
         on cpu 5.00 ms: parse 40.0%, spin_compute 40.0%, clear_page 20.0%
         run queue 10.0 us: behind [idle] 100.0%
+0.015140   4.97 ms  running: render 100.0%
+0.020110   5.01 ms  blocked (S) in pipe_read
      <- cr-worker (1302)  5.01 ms
         on cpu 5.00 ms: parse 40.0%, spin_compute 40.0%, clear_page 20.0%
         run queue 10.0 us: behind [idle] 100.0%
"#;

#[test]
fn text_of_the_client() {
    let got = stdout(&["-t", "1301"]);
    assert_eq!(got, TEXT);
    assert!(got.lines().all(|l| l.chars().count() <= 80));
}

const FOLDED: &str = r#"cr-client;[running];client_loop;render 13909990
cr-client;[off cpu since before the trace] 10
cr-client;[blocked];client_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;worker_loop;cr-worker;--;[run queue];[idle] 30000
cr-client;[blocked];client_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;worker_loop;cr-worker;--;[on cpu];worker_loop;handle;spin_compute 6000000
cr-client;[blocked];client_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;worker_loop;cr-worker;--;[on cpu];worker_loop;handle;parse 6000000
cr-client;[blocked];client_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;worker_loop;cr-worker;--;[on cpu];worker_loop;handle;spin_compute;-;exc_page_fault;handle_mm_fault;clear_page 3000000
cr-client;[runnable];behind [idle] 60000
"#;

/// Folded lines in ns: they add up to the window's wall time (29 ms).
#[test]
fn folded_of_the_client() {
    let got = stdout(&["-t", "1301", "--folded"]);
    assert_eq!(got, FOLDED);
    let sum: u64 = got
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    assert_eq!(sum, 29_000_000);
}

const JSON: &str = r#"{
  "blocked_ns": 1890000,
  "comm": "cr-client",
  "end_ns": 1012000000,
  "period_ns": 1000000,
  "runnable_ns": 0,
  "running_ns": 3110000,
  "segments": [
    {
      "cut_from": {
        "end_ns": 1010110000,
        "start_ns": 1005140000
      },
      "end_ns": 1010110000,
      "kind": "running",
      "ns": 3110000,
      "stacks": [
        {
          "frames": [
            "client_loop",
            "render"
          ],
          "ns": 3110000,
          "samples": 3
        }
      ],
      "start_ns": 1007000000
    },
    {
      "cut_from": {
        "end_ns": 1015120000,
        "start_ns": 1010110000
      },
      "end_ns": 1012000000,
      "kind": "blocked",
      "levels": [
        {
          "frames": [
            "try_to_wake_up",
            "pipe_write",
            "ksys_write",
            "-",
            "write",
            "worker_loop",
            "cr-worker"
          ],
          "metal": false,
          "name": "cr-worker",
          "ns": 1890000,
          "on_cpu": [
            {
              "frames": [
                "[on cpu]",
                "worker_loop",
                "handle",
                "spin_compute"
              ],
              "ns": 754491
            },
            {
              "frames": [
                "[on cpu]",
                "worker_loop",
                "handle",
                "parse"
              ],
              "ns": 754491
            },
            {
              "frames": [
                "[on cpu]",
                "worker_loop",
                "handle",
                "spin_compute",
                "-",
                "exc_page_fault",
                "handle_mm_fault",
                "clear_page"
              ],
              "ns": 377246
            }
          ],
          "own_ns": 0,
          "run_queue": [
            {
              "holder": "[idle]",
              "ns": 3772
            }
          ],
          "tid": 1302
        }
      ],
      "lost": false,
      "ns": 1890000,
      "stack": [
        "client_loop",
        "read",
        "-",
        "ksys_read",
        "pipe_read",
        "schedule"
      ],
      "start_ns": 1010110000,
      "state": "S",
      "truncated": false
    }
  ],
  "start_ns": 1007000000,
  "stats": {
    "cut_segments": 2,
    "inconsistent_switches": 0,
    "lost_events": 0,
    "samples": 3,
    "samples_off_cpu": 0,
    "unmatched_waits": 0
  },
  "tgid": 1300,
  "tid": 1301,
  "trace_start_ns": 1000000000,
  "unknown_ns": 0,
  "wall_ns": 5000000
}
"#;

/// `-t A,B`: every thread's report from one engine run, each the same as its own run's
/// (text one after the other, a blank line between; JSON an array; folded lines together).
#[test]
fn several_threads_equal_their_own_runs() {
    for extra in [&[][..], &["--window", "0.007..0.012", "--timeline"]] {
        let with = |t: &'static str| [&["-t", t][..], extra].concat();
        let (a, b) = (stdout(&with("1302")), stdout(&with("1301")));
        assert_eq!(stdout(&with("1302,1301")), format!("{a}\n{b}"), "{extra:?}");
    }
    let both = stdout(&["-t", "1302,1301", "--folded"]);
    let alone = stdout(&["-t", "1302", "--folded"]) + &stdout(&["-t", "1301", "--folded"]);
    assert_eq!(both, alone);
    let json: serde_json::Value =
        serde_json::from_str(&stdout(&["-t", "1302,1301", "--json"])).unwrap();
    let one: serde_json::Value = serde_json::from_str(&stdout(&["-t", "1301", "--json"])).unwrap();
    assert_eq!(json.as_array().map(|a| a.len()), Some(2));
    assert_eq!(json[1], one);
}

/// JSON of a window cutting a running and a blocked segment.
#[test]
fn json_of_a_window() {
    assert_eq!(
        stdout(&["-t", "1301", "--window", "0.007..0.012", "--json"]),
        JSON
    );
}

#[test]
fn bad_input_is_refused() {
    let run = |args: &[&str]| {
        bin()
            .arg("critical-path")
            .arg(trace())
            .args(args)
            .output()
            .unwrap()
    };
    fails_with(
        &run(&["-t", "4242"]),
        "thread 4242 does not appear in this trace",
    );
    fails_with(
        &run(&["-t", "1301", "--window", "5..6"]),
        "outside the trace",
    );
    fails_with(
        &run(&["-t", "1301", "--window", "0.01..0.01"]),
        "window is empty",
    );
    fails_with(&run(&[]), "needs a thread: -t TID (or several: -t A,B)");
    fails_with(
        &run(&["-t", "1301,4242"]),
        "thread 4242 does not appear in this trace",
    );
    fails_with(&run(&["-t", "1301", "-p", "1300"]), "-p, --comm");
    fails_with(&run(&["-t", "1301", "--max-depth", "0"]), "at least 1");
}

/// `export --perfetto --critical-path TID`: one slice per segment on a `critical path`
/// track of the thread, named as the timeline names them (protobuf keeps strings as they
/// are, so the names are found in the file's bytes); mistakes fail before writing.
#[test]
fn critical_path_as_a_perfetto_track() {
    let out = tmpdir("critpath-perfetto").join("cp.pftrace");
    let o = bin()
        .args(["export", trace(), "--perfetto"])
        .arg(&out)
        .args(["--critical-path", "1301", "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&out).unwrap();
    let count = |s: &str| {
        bytes
            .windows(s.len())
            .filter(|w| *w == s.as_bytes())
            .count()
    };
    assert_eq!(count("critical path"), 1, "one track");
    // 3 blocked segments behind the worker, 4 running ones (the first has no sample).
    assert_eq!(count("blocked (S) in pipe_read <- cr-worker"), 3);
    assert_eq!(count("running: render"), 3);
    assert_eq!(count("runnable (woken) behind [idle]"), 3);
    assert_eq!(count("unknown: "), 1);
    let missing = tmpdir("critpath-perfetto").join("none.pftrace");
    let refused = |args: &[&str], phrase: &str| {
        let o = bin().args(["export", trace()]).args(args).output().unwrap();
        fails_with(&o, phrase);
        assert!(!missing.exists(), "{args:?} wrote {}", missing.display());
    };
    let m = missing.to_str().unwrap();
    refused(&["--critical-path", "1301", "--pprof", m], "add --perfetto");
    refused(
        &["--perfetto", m, "--critical-path", "4242"],
        "--critical-path 4242",
    );
}

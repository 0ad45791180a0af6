//! io_uring and kernel workers on the real kernel (issue 23, item 4): fio workloads recorded
//! by the recorder and, at the same time, by bpftrace (`chainrec_testkit::bpftrace`, as
//! tests/real_bpftrace.rs). Each scenario runs as its own fio process (`--thread`: the job
//! and its io_uring threads share one tgid), one second each, on a file of the real disk
//! (`CARGO_TARGET_TMPDIR`, under target/: O_DIRECT needs a block-backed file system):
//!
//! * `direct-read`: `--direct=1 --rw=randread`: fio's waits in `io_uring_enter`
//!   (`io_cqring_wait`) end at the block completion, `fio ← [softirq: BLOCK]`.
//! * `dio-write-kworker`: `--direct=1 --rw=randwrite`: iomap completes O_DIRECT writes in a
//!   workqueue (`iomap_dio_bio_end_io` → `queue_work`), whose kworker posts the completion:
//!   `fio ← kworker/N:M ← [softirq: BLOCK]`.
//! * `io-wq`: buffered writes with `--fsync=8`: the fsyncs (and the writes ext4 cannot do
//!   without blocking) are punted to io-wq, whose `iou-wrk-*` worker waits for the disk:
//!   `fio ← iou-wrk-N ← [softirq: BLOCK]`.
//! * `sqpoll`: the same with `--sqthread_poll=1`: the `iou-sqp-*` thread submits and hands
//!   the punted requests to io-wq: `iou-wrk-N ← iou-sqp-N`. fio (3.33) never blocks in the
//!   kernel with sqpoll (it spins on the completion ring) and the sqp thread sleeps only
//!   after `sq_thread_idle` (1 s, not settable in fio) without work, so most chains end at
//!   the sqp thread on CPU: correct, it was running. Two 1.3 s pauses (`--thinktime`,
//!   3 s run) make it sleep: then fio's submission wakes it and the chains go on below
//!   it, `iou-wrk-N ← iou-sqp-N ← fio ← [hardirq: timer]`.
//!
//! For each: the shape and labels of the chains (asserted shares, measured and printed), the
//! `[waker unknown]` share, and the bpftrace agreement of every level (≥ 97 %).
//!
//! Needs root, bpftrace and fio. Without them the test prints a loud SKIP and passes, unless
//! `CHAINREC_REQUIRE_BPF=1`, in which case it fails.

mod common;
use chainrec_record::RecordOptions;
use chainrec_testkit::bpf::{can_record, skip};
use chainrec_testkit::bpftrace::Bpftrace;
use common::{record_while, waits_json};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const TEST: &str = "io_uring_chains_agree_with_bpftrace";

/// One fio run: a name, its arguments (besides the common ones) and its file.
struct Scenario {
    name: &'static str,
    args: &'static [&'static str],
    file: &'static str,
}

const SCENARIOS: [Scenario; 4] = [
    Scenario {
        name: "direct-read",
        args: &["--direct=1", "--rw=randread"],
        file: "data",
    },
    Scenario {
        name: "dio-write-kworker",
        args: &["--direct=1", "--rw=randwrite"],
        file: "data",
    },
    Scenario {
        name: "io-wq",
        args: &["--rw=write", "--fsync=8"],
        file: "buffered",
    },
    Scenario {
        name: "sqpoll",
        // Two pauses of 1.3 s (after every 64 blocks): longer than the sqp thread's idle
        // time (1 s), so it sleeps and fio's next submission must wake it.
        args: &[
            "--rw=write",
            "--fsync=8",
            "--sqthread_poll=1",
            "--thinktime=1300ms",
            "--thinktime_blocks=64",
            "--runtime=3",
        ],
        file: "buffered",
    },
];

/// Size of each file fio works on.
const FILE_MIB: usize = 32;

/// Run one scenario's fio to its end; its pid (the tgid of all its threads).
fn run_fio(dir: &Path, s: &Scenario) -> u32 {
    let file = dir.join(s.file);
    let mut child = Command::new("fio")
        .args([
            &format!("--name={}", s.name),
            &format!("--filename={}", file.display()),
            &format!("--size={FILE_MIB}M"),
            "--thread",
            "--ioengine=io_uring",
            "--bs=4k",
            "--iodepth=4",
            "--runtime=1",
            "--time_based",
        ])
        // A later --runtime (sqpoll's) overrides the one above.
        .args(s.args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn fio");
    let pid = child.id();
    let mut out = String::new();
    let mut err = String::new();
    use std::io::Read;
    child.stdout.take().unwrap().read_to_string(&mut out).ok();
    child.stderr.take().unwrap().read_to_string(&mut err).ok();
    let status = child.wait().expect("wait fio");
    assert!(status.success(), "fio {}: {out}\n{err}", s.name);
    let iops: Vec<&str> = out.lines().filter(|l| l.contains("IOPS=")).collect();
    eprintln!(
        "{TEST}: fio {} (pid {pid}): {}",
        s.name,
        iops.join("; ").trim()
    );
    pid
}

/// A file of `FILE_MIB` MiB, written and synced before the recording starts.
fn lay_out(path: &Path) {
    let mut f = std::fs::File::create(path).expect("create data file");
    let block = vec![0xa5u8; 1 << 20];
    for _ in 0..FILE_MIB {
        f.write_all(&block).expect("write data file");
    }
    f.sync_all().expect("sync data file");
}

/// A waiting thread's view of its chain: the node of each level of the main chain, in
/// order (earlier-wait branches left out).
fn nodes(w: &Value) -> Vec<&str> {
    w["hops"]
        .as_array()
        .map(|h| {
            chainrec_testkit::bpftrace::main_chain(h)
                .into_iter()
                .map(|h| h["node"].as_str().unwrap_or(""))
                .collect()
        })
        .unwrap_or_default()
}

fn in_kernel_stack(w: &Value, frame: &str) -> bool {
    w["kframes"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f.as_str() == Some(frame)))
}

fn is_block_metal(node: &str) -> bool {
    node.starts_with("[softirq: BLOCK") || node.starts_with("[hardirq")
}

fn pct(n: usize, of: usize) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

/// The share of `waits` whose chain `shape` accepts; printed, asserted ≥ `min` % of at
/// least `min_n` waits.
#[track_caller]
fn assert_share(
    label: &str,
    waits: &[&Value],
    min_n: usize,
    min: f64,
    shape: impl Fn(&[&str]) -> bool,
) {
    let n = waits.len();
    let ok = waits.iter().filter(|w| shape(&nodes(w))).count();
    eprintln!("{TEST}: {label}: {ok} of {n} waits ({:.1} %)", pct(ok, n));
    let mut other: std::collections::BTreeMap<String, usize> = Default::default();
    for w in waits.iter().filter(|w| !shape(&nodes(w))) {
        *other.entry(nodes(w).join(" <- ")).or_default() += 1;
    }
    let mut other: Vec<_> = other.into_iter().collect();
    other.sort_by_key(|o| std::cmp::Reverse(o.1));
    for (chain, k) in other.iter().take(5) {
        eprintln!("{TEST}:   {label}: other shape: {k} x {chain}");
    }
    assert!(n >= min_n, "{label}: only {n} waits (want ≥ {min_n})");
    assert!(
        pct(ok, n) >= min,
        "{label}: {ok} of {n} waits ({:.1} %) < {min} %",
        pct(ok, n)
    );
}

#[test]
fn io_uring_chains_agree_with_bpftrace() {
    if !can_record(TEST) || !chainrec_testkit::bpftrace::available(TEST) {
        return;
    }
    if Command::new("fio").arg("--version").output().is_err() {
        skip(TEST, "fio is not installed (Debian package fio)");
        return;
    }
    // Under target/ (the worktree's file system): /tmp may be a tmpfs, where O_DIRECT fails.
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("iouring-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    lay_out(&dir.join("data"));
    lay_out(&dir.join("buffered"));

    let bt = Bpftrace::start(&dir).expect("start bpftrace");
    // Lazy stacks with no threshold: every wait carries its kernel stack (to tell fio's
    // io_uring waits apart) and its user stack (to check the io workers have none). Eager
    // user stacks (copied at every event) would fill the ring buffer at these rates; user
    // stacks are walked by frame pointers here (no 16 KiB copies) for the same reason.
    let opts = RecordOptions {
        stack_threshold_ns: 0,
        user_stack_copy_bytes: 0,
        ..RecordOptions::default()
    };
    let (trace, pids) = record_while(&dir, opts, || {
        SCENARIOS
            .iter()
            .map(|s| run_fio(&dir, s))
            .collect::<Vec<u32>>()
    });
    let reference = bt.stop(TEST);
    let waits = waits_json(&trace, &["--frames"]);

    for (s, pid) in SCENARIOS.iter().zip(&pids) {
        let label = format!("{TEST} [{}]", s.name);
        let mine: Vec<&Value> = waits
            .iter()
            .filter(|w| w["tgid"].as_u64() == Some(*pid as u64))
            .collect();
        let comm =
            |w: &Value, prefix: &str| w["comm"].as_str().is_some_and(|c| c.starts_with(prefix));
        // The job thread's waits for completions (io_uring_enter → io_cqring_wait), woken.
        let cq_waits: Vec<&Value> = mine
            .iter()
            .copied()
            .filter(|w| {
                comm(w, "fio") && in_kernel_stack(w, "io_cqring_wait") && w["wake_ns"].is_u64()
            })
            .collect();
        // Waits with no waking seen ([waker unknown]) among the scenario's blocked waits
        // that were switched in, and how many of them bpftrace saw woken.
        let blocked = mine
            .iter()
            .filter(|w| w["state"].as_u64() != Some(0) && w["switch_in_ns"].is_u64())
            .count();
        let unknown: Vec<&Value> = mine
            .iter()
            .copied()
            .filter(|w| {
                w["state"].as_u64() != Some(0)
                    && w["switch_in_ns"].is_u64()
                    && !w["wake_ns"].is_u64()
            })
            .collect();
        let seen_by_bpftrace = unknown
            .iter()
            .filter(|w| {
                reference.woken(
                    w["tid"].as_u64().unwrap() as u32,
                    w["switch_out_ns"].as_u64().unwrap(),
                )
            })
            .count();
        eprintln!(
            "{label}: {} waits of pid {pid} ({blocked} blocked, {} in io_cqring_wait), [waker unknown] {} ({:.2} %), of which bpftrace saw woken {seen_by_bpftrace}",
            mine.len(),
            cq_waits.len(),
            unknown.len(),
            pct(unknown.len(), blocked)
        );
        // A waking the recorder missed and bpftrace saw is a recorder defect: at most 0.5 %.
        // Wakings neither tool saw: 0-3 % of fio's waits here, the most when fio shared a
        // CPU with bpftrace (likely, not proven: a BPF program does not run inside itself,
        // so a waking by an interrupt that hit a sched_waking program is not traced).
        // Bounded at 5 %.
        assert!(
            pct(unknown.len() - seen_by_bpftrace, blocked) <= 0.5,
            "{label}: {} of {blocked} waits without a waking that bpftrace saw",
            unknown.len() - seen_by_bpftrace
        );
        assert!(
            pct(unknown.len(), blocked) <= 5.0,
            "{label}: {} of {blocked} waits without a waking",
            unknown.len()
        );
        // io_uring's workers never run in user mode: their nodes carry no user frames (no
        // `[missing stack]`, no `[unknown]` from the registers of their creation).
        let worker_user_frames: Vec<String> = mine
            .iter()
            .flat_map(|w| {
                let own = comm(w, "iou-").then_some(&w["uframes"]);
                let hops = w["hops"].as_array().into_iter().flatten().filter(|h| {
                    h["waker_comm"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("iou-"))
                        && h["metal"] == false
                });
                own.into_iter()
                    .chain(hops.map(|h| &h["uframes"]))
                    .flat_map(|f| f.as_array().into_iter().flatten())
                    .filter_map(|f| f.as_str().map(str::to_string))
            })
            .collect();
        assert!(
            worker_user_frames.is_empty(),
            "{label}: io_uring workers with user frames: {:?}",
            &worker_user_frames[..worker_user_frames.len().min(10)]
        );
        match s.name {
            "direct-read" => assert_share(&label, &cq_waits, 300, 90.0, |n| {
                n.len() == 1 && is_block_metal(n[0])
            }),
            "dio-write-kworker" => {
                // The kworker was either running all through fio's wait (completing the
                // writes before: the chain ends there) or slept and was woken by the disk
                // inside it. How many of each depends on the load beside the test
                // (99 % via the disk on a quiet machine, 70 % with a build beside it,
                // 11 % at load 6 with two builds and a benchmark): the second check asks
                // only that the disk level is there in more than a stray wait or two;
                // the per-level agreement with bpftrace checks that each one is right.
                assert_share(&label, &cq_waits, 300, 90.0, |n| {
                    n[0].starts_with("kworker/") && (n.len() == 1 || is_block_metal(n[1]))
                });
                assert_share(&format!("{label} via the disk"), &cq_waits, 300, 2.0, |n| {
                    n.len() == 2 && n[0].starts_with("kworker/") && is_block_metal(n[1])
                });
            }
            "io-wq" => {
                let workers = mine.iter().filter(|w| comm(w, "iou-wrk-")).count();
                eprintln!("{label}: {workers} waits of iou-wrk threads");
                assert!(
                    workers >= 100,
                    "{label}: io-wq workers barely ran ({workers} waits)"
                );
                // fio waits for a worker; the worker was running (the buffered write's
                // copy into the page cache: the chain ends there) or itself waited for
                // the disk inside fio's wait (the fsyncs, one write in 8: 6-17 % of the
                // waits measured, fewer the busier the machine).
                assert_share(&label, &cq_waits, 100, 90.0, |n| {
                    n[0].starts_with("iou-wrk-") && (n.len() == 1 || is_block_metal(n[1]))
                });
                assert_share(&format!("{label} via the disk"), &cq_waits, 100, 2.0, |n| {
                    n.len() == 2 && n[0].starts_with("iou-wrk-") && is_block_metal(n[1])
                });
                // The workers' own waits in the fsync end at the disk.
                let fsyncs: Vec<&Value> = mine
                    .iter()
                    .copied()
                    .filter(|w| {
                        comm(w, "iou-wrk-")
                            && in_kernel_stack(w, "io_fsync")
                            && w["wake_ns"].is_u64()
                    })
                    .collect();
                assert_share(
                    &format!("{label} iou-wrk in io_fsync"),
                    &fsyncs,
                    50,
                    90.0,
                    |n| n.len() == 1 && is_block_metal(n[0]),
                );
            }
            "sqpoll" => {
                let sqp = mine.iter().filter(|w| comm(w, "iou-sqp-")).count();
                eprintln!("{label}: {sqp} waits of the iou-sqp thread; fio's own io_cqring_wait waits: {}", cq_waits.len());
                // Woken idle io-wq workers: their waker is the sqp thread, which submits.
                let idle_workers: Vec<&Value> = mine
                    .iter()
                    .copied()
                    .filter(|w| {
                        comm(w, "iou-wrk-")
                            && !in_kernel_stack(w, "io_fsync")
                            && w["wake_ns"].is_u64()
                            && w["hops"]
                                .as_array()
                                .is_some_and(|h| !h.is_empty() && h[0]["metal"] == false)
                    })
                    .collect();
                assert_share(
                    &format!("{label} iou-wrk woken by a task"),
                    &idle_workers,
                    30,
                    90.0,
                    |n| n[0].starts_with("iou-sqp-"),
                );
                // After each pause the sqp thread slept; fio's io_uring_enter
                // (IORING_ENTER_SQ_WAKEUP) woke it, and chains through the sqp thread go
                // on below it: `iou-wrk ← iou-sqp ← fio ← [hardirq: timer]` (fio's pause).
                let sqp_woken_by_fio = mine
                    .iter()
                    .filter(|w| comm(w, "iou-sqp-") && nodes(w).first() == Some(&"fio"))
                    .count();
                // Waits of other threads whose chain has the sqp thread as a level and goes
                // on below it to fio (which woke it).
                let through_sqp: Vec<String> = mine
                    .iter()
                    .filter(|w| !comm(w, "iou-sqp-"))
                    .filter_map(|w| {
                        let n = nodes(w);
                        let below = n
                            .iter()
                            .position(|l| l.starts_with("iou-sqp-"))
                            .is_some_and(|i| n.get(i + 1) == Some(&"fio"));
                        below.then(|| {
                            format!("{} <- {}", w["comm"].as_str().unwrap_or(""), n.join(" <- "))
                        })
                    })
                    .collect();
                eprintln!(
                    "{label}: sqp thread woken by fio {sqp_woken_by_fio} times; chains going on below the sqp thread: {} (first: {:?})",
                    through_sqp.len(),
                    through_sqp.first()
                );
                assert!(sqp_woken_by_fio >= 1, "{label}: the sqp thread never slept");
                assert!(
                    !through_sqp.is_empty(),
                    "{label}: no chain continues below the sqp thread"
                );
            }
            _ => unreachable!(),
        }
        let agreement = reference.check(&waits, |w| w["tgid"].as_u64() == Some(*pid as u64));
        agreement.print(&label);
        assert!(
            agreement.roots >= 100,
            "{label}: only {} waits checked",
            agreement.roots
        );
        agreement.assert_at_least(&label, 97);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

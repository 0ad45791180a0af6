//! Cgroups in the analysis: `--cgroup REGEX` selects threads by their cgroup path in every
//! view, `--cgroup-frames` puts the cgroup (or pod and container) above the waiting thread,
//! `top`/`waits`/Parquet/Perfetto carry it. Exact outputs on the `containers` scenario
//! (synthetic), then a real recording of a workload placed in a cgroup created while
//! recording.

mod common;
use chainrec_testkit::bpf::{can_record, skip as skip_bpf};
use common::{bin, fails_with, stderr, tmpdir};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The containers scenario, 100 events: 12 periods of 10 ms. cr-web (docker container) <-
/// cr-db (pod's container) <- cr-cron (cron.service, in /user.slice from the switch-out of
/// period 5 on) <- [hardirq: timer].
fn trace() -> &'static str {
    static T: OnceLock<PathBuf> = OnceLock::new();
    T.get_or_init(|| {
        let p = tmpdir("cgroups-synth").join("containers.zst");
        let out = bin()
            .args(["synth", "--scenario", "containers", "--events", "100", "-o"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        p
    })
    .to_str()
    .unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = bin().args(args).output().unwrap();
    assert!(out.status.success(), "chainrec {args:?}: {}", stderr(&out));
    String::from_utf8(out.stdout).unwrap()
}

/// Dedup shows cr-web's waits only (the others are inner levels of its chains): every line
/// starts with its container's frame. cr-web blocks 5049.7 us once and 9970 us 11 times
/// (114 719.7 us), waits 20 us for a CPU each time (240 us).
#[test]
fn cgroup_frames_put_the_container_above_the_thread() {
    let want = CHAINS_FRAMES;
    assert_eq!(stdout_of(&["chains", trace(), "--cgroup-frames"]), want);
    // Without the flag: the same lines without the frame (the default output is unchanged).
    let plain: String = want
        .lines()
        .map(|l| {
            format!(
                "{}\n",
                l.strip_prefix("[container: 4fa6e0f0c678];").unwrap()
            )
        })
        .collect();
    assert_eq!(stdout_of(&["chains", trace()]), plain);
}

/// `--cgroup` selects cr-cron by either of its cgroups (dedup off: a thread filter); each
/// wait is drawn under the cgroup it began in: 4999.9 us + 5 x 9970 us in cron.service,
/// 6 x 9970 us in /user.slice (the 12th is open at the end), 10 us of run queue each.
#[test]
fn cgroup_filter_follows_a_thread_that_moved() {
    assert_eq!(
        stdout_of(&[
            "chains",
            trace(),
            "--cgroup",
            "cron|user",
            "--cgroup-frames"
        ]),
        CHAINS_CRON
    );
    // The pod's thread alone, off-CPU: 5040 us + 11 x 9980 us.
    assert_eq!(
        stdout_of(&["offcpu", trace(), "--cgroup", "pod", "--cgroup-frames"]),
        OFFCPU_POD
    );
    // Only the move's new group: cr-cron's waits from period 5 on.
    let lines = stdout_of(&[
        "chains",
        trace(),
        "--cgroup",
        "^/user.slice$",
        "--cgroup-frames",
    ]);
    assert!(
        lines
            .lines()
            .all(|l| l.starts_with("[cgroup: /user.slice];cr-cron;")),
        "{lines}"
    );
    assert_eq!(lines.lines().count(), 2, "{lines}");
}

/// `top` and `waits` print the cgroup, its container and pod (text and JSON); a waker's
/// cgroup is in its level.
#[test]
fn top_and_waits_carry_the_cgroup() {
    let web = "4fa6e0f0c6786287e131c3852c58a2e01cc697a68231826813597e4994f1d6e2";
    let top: Value = serde_json::from_str(&stdout_of(&[
        "top",
        trace(),
        "--json",
        "-q",
        "--cgroup",
        "docker",
    ]))
    .unwrap();
    let e = &top["entries"][0];
    assert_eq!(e["comm"], "cr-web");
    assert_eq!(e["cgroup"], format!("/system.slice/docker-{web}.scope"));
    assert_eq!(e["container_id"], web);
    assert!(e.get("pod_uid").is_none(), "{e}");
    let text = stdout_of(&["top", trace(), "-q", "-n", "1", "--cgroup", "docker"]);
    assert!(
        text.contains("\n     cgroup /system.slice/docker-4fa6e0f0c67")
            && text.contains("\n     container 4fa6e0f0c678\n"),
        "{text}"
    );
    let waits = stdout_of(&["waits", trace(), "--json", "--cgroup", "pod"]);
    let rows: Vec<Value> = waits
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 12);
    for w in &rows {
        assert_eq!(w["comm"], "cr-db");
        assert_eq!(w["pod_uid"], "8dd3a1e9-2f9a-4d3b-9a36-2f4c4f1b7c11");
        assert_eq!(
            w["container_id"],
            "9b1f3c0d2e4a5b6c7d8e9f00112233445566778899aabbccddeeff0011223344"
        );
        assert_eq!(w["hops"][0]["waker_comm"], "cr-cron");
        let c = w["hops"][0]["waker_cgroup"].as_str().unwrap();
        assert!(
            c == "/system.slice/cron.service" || c == "/user.slice",
            "{c}"
        );
        assert!(
            w["hops"][1].get("waker_cgroup").is_none(),
            "metal has no cgroup"
        );
    }
    let text = stdout_of(&["waits", trace(), "--cgroup", "pod"]);
    assert_eq!(
        text.matches("\n    cgroup /kubepods.slice/").count(),
        12,
        "{text}"
    );
    assert!(text.contains("(container 9b1f3c0d2e4a, pod 8dd3a1e9-2f9a-4d3b-9a36-2f4c4f1b7c11)"));
    // `script` keeps the events of which a task was in the group at the time: cr-db's own
    // (comm, its switches, the wakings it took part in).
    let script = stdout_of(&["script", trace(), "--cgroup", "pod"]);
    assert!(
        script.lines().all(|l| l.contains("cr-db 1201/1200")),
        "{script}"
    );
    assert_eq!(script.lines().count(), 50);
}

/// Mistakes get a clear error: a trace without cgroups, the wakeup view, a bad regex.
#[test]
fn cgroup_flags_say_what_is_wrong() {
    let p = tmpdir("cgroups-synth").join("relay.zst");
    let out = bin()
        .args(["synth", "--scenario", "pipe-relay", "--events", "100", "-o"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(out.status.success());
    let relay = p.to_str().unwrap();
    let run = |args: &[&str]| bin().args(args).output().unwrap();
    fails_with(
        &run(&["chains", relay, "--cgroup", "x"]),
        "--cgroup: this trace records no cgroups",
    );
    fails_with(
        &run(&["chains", relay, "--cgroup-frames"]),
        "--cgroup-frames: this trace records no cgroups",
    );
    fails_with(
        &run(&["heatmap", relay, "-o", "/dev/null", "--cgroup", "x"]),
        "records no cgroups",
    );
    fails_with(
        &run(&["wakeup", trace(), "--cgroup-frames"]),
        "the wakeup view's lines start at the waker",
    );
    fails_with(
        &run(&["chains", trace(), "--cgroup", "("]),
        "bad --cgroup regex",
    );
}

const CHAINS_FRAMES: &str = r#"[container: 4fa6e0f0c678];cr-web;web_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;db_loop;cr-db 120
[container: 4fa6e0f0c678];cr-web;web_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;db_loop;cr-db;--;try_to_wake_up;pipe_write;ksys_write;-;write;cron_loop;cr-cron 120
[container: 4fa6e0f0c678];cr-web;web_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;db_loop;cr-db;--;try_to_wake_up;pipe_write;ksys_write;-;write;cron_loop;cr-cron;--;try_to_wake_up;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;[hardirq: timer] 114120
[container: 4fa6e0f0c678];cr-web;web_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;db_loop;cr-db;--;try_to_wake_up;pipe_write;ksys_write;-;write;cron_loop;cr-cron;--;[run queue];[idle] 120
[container: 4fa6e0f0c678];cr-web;web_loop;read;-;ksys_read;pipe_read;schedule;--;try_to_wake_up;pipe_write;ksys_write;-;write;db_loop;cr-db;--;[run queue];[idle] 240
[container: 4fa6e0f0c678];cr-web;web_loop;read;-;ksys_read;pipe_read;schedule;--;[run queue];[idle] 240
"#;
const CHAINS_CRON: &str = r#"[cgroup: /system.slice/cron.service];cr-cron;cron_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule;--;try_to_wake_up;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;[hardirq: timer] 54850
[cgroup: /system.slice/cron.service];cr-cron;cron_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule;--;[run queue];[idle] 60
[cgroup: /user.slice];cr-cron;cron_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule;--;try_to_wake_up;hrtimer_wakeup;__hrtimer_run_queues;hrtimer_interrupt;[hardirq: timer] 59820
[cgroup: /user.slice];cr-cron;cron_loop;clock_nanosleep;-;__x64_sys_clock_nanosleep;do_nanosleep;schedule;--;[run queue];[idle] 60
"#;
const OFFCPU_POD: &str = r#"[pod: 8dd3a1e9-2f9a-4d3b-9a36-2f4c4f1b7c11];[container: 9b1f3c0d2e4a];cr-db;db_loop;read;-;ksys_read;pipe_read;schedule 114820
"#;

/// A cgroup v2 group for the test, removed on drop (its processes moved to the parent
/// first, should the test have failed while they ran).
struct TestCgroup {
    dir: PathBuf,
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        let parent = self.dir.parent().unwrap().join("cgroup.procs");
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.lines() {
                let _ = std::fs::write(&parent, pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// The cgroup2 mount point (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid host).
fn cgroup2_mount() -> Option<PathBuf> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .ok()?
        .lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            (post.split_whitespace().next()? == "cgroup2")
                .then(|| PathBuf::from(pre.split_whitespace().nth(4).unwrap()))
        })
}

/// Record the chain workload in a cgroup created by the workload's shell after recording
/// began (`mkdir`, then `echo $$ > cgroup.procs`, then exec): every thread of the workload
/// carries its path, the shell's thread its move into it, and `--cgroup` selects exactly
/// the waits of those threads.
#[test]
fn real_threads_carry_their_cgroup_and_the_filter_selects_them() {
    if !can_record("cgroups_real") {
        return;
    }
    let Some(mount) = cgroup2_mount() else {
        skip_bpf("cgroups_real", "no cgroup2 file system mounted");
        return;
    };
    let name = format!("chainrec-test-{}", std::process::id());
    let guard = TestCgroup {
        dir: mount.join(&name),
    };
    let chainrec = env!("CARGO_BIN_EXE_chainrec");
    let dir = tmpdir("cgroups-real");
    let trace = dir.join("cg.zst");
    let script = format!(
        "mkdir {d} && echo $$ > {d}/cgroup.procs && exec {chainrec} workload --duration 1",
        d = guard.dir.display()
    );
    let out = bin()
        .args(["record", "-q", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    if !out.status.success() {
        let err = stderr(&out);
        if err.contains("ermission") || err.contains("EPERM") || err.contains("not permitted") {
            skip_bpf(
                "cgroups_real",
                &format!("BPF not permitted: {}", err.trim()),
            );
            return;
        }
        panic!("chainrec record failed: {err}");
    }
    let path = format!("/{name}");
    let r = chainrec_format::TraceReader::open(&trace).unwrap();
    let t = r.tables();
    let id = t
        .cgroups
        .values()
        .find(|c| c.path == path)
        .unwrap_or_else(|| panic!("{path} not resolved: {:?}", r.meta().extra("cgroups")))
        .id;
    // The shell moved into it (from the test's own group): its list ends there.
    let in_group: BTreeSet<u32> = t
        .task_cgroups
        .iter()
        .filter(|(_, l)| l.iter().any(|&(_, c)| c == id))
        .map(|(&tid, _)| tid)
        .collect();
    let movers: Vec<u32> = in_group
        .iter()
        .copied()
        .filter(|tid| t.cgroups_of(*tid).count() > 1)
        .collect();
    assert_eq!(
        movers.len(),
        1,
        "one move into the group (the shell): {movers:?}"
    );
    let shell = movers[0];
    assert_eq!(t.cgroups_of(shell).last(), Some(id));
    // The workload (the shell exec'd it: same process) started its threads (cr-sink,
    // cr-relay, cr-timer; first seen at their creation, still named after the process) in
    // the group, and they never left it. (Other tests may run workloads at the same time:
    // only this process's threads count.)
    let workers: BTreeSet<u32> = t
        .tasks
        .values()
        .filter(|x| x.tgid == shell && x.tid != shell)
        .map(|x| x.tid)
        .collect();
    assert!(workers.len() >= 3, "{workers:?}");
    for tid in &workers {
        assert_eq!(
            t.cgroups_of(*tid).collect::<Vec<_>>(),
            vec![id],
            "tid {tid}"
        );
    }
    // `--cgroup` keeps exactly the waits whose thread was in the group then.
    let tr = trace.to_str().unwrap();
    let waits = |extra: &[&str]| -> Vec<Value> {
        let mut a = vec!["waits", tr, "--json", "--hidden"];
        a.extend(extra);
        stdout_of(&a)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let key = |w: &Value| {
        (
            w["tid"].as_u64().unwrap(),
            w["switch_out_ns"].as_u64().unwrap(),
        )
    };
    let all = waits(&[]);
    let want: BTreeSet<(u64, u64)> = all
        .iter()
        .filter(|w| w["cgroup"] == path.as_str())
        .map(key)
        .collect();
    let re = format!("^{path}$");
    let got: BTreeSet<(u64, u64)> = waits(&["--cgroup", &re]).iter().map(key).collect();
    assert_eq!(got, want);
    let tids: BTreeSet<u32> = got.iter().map(|&(t, _)| t as u32).collect();
    assert!(tids.is_subset(&in_group), "{tids:?} {in_group:?}");
    assert!(
        workers.iter().filter(|w| tids.contains(w)).count() >= 3,
        "the workload's threads' waits are selected: {tids:?} {workers:?}"
    );
    drop(guard);
    assert!(
        !Path::new(&mount.join(&name)).exists(),
        "test cgroup removed"
    );
}

//! Real-kernel throttling test (CHAINS.md "Throttling"): a CPU-bound spinner in a cgroup
//! with a 20 ms / 100 ms CPU quota, and a reader outside it that waits on a pipe the
//! spinner writes every 10 ms, recorded with BPF for ~2 s. The spinner is off-CPU about
//! 80 % of the time because its group ran out of quota, so at least 90 % of its off-CPU
//! time must be `[throttled: <its group>]` levels (ended by the quota timer) and less than
//! 5 % `[run queue];[idle]`; the same must hold one level down, for the spinner's off-CPU
//! time inside the reader's waits.
//!
//! The group gets the highest CPU weight (v1 `cpu.shares`, v2 `cpu.weight`), so that on a
//! machine busy with builds the spinner, when its quota allows, runs at once instead of
//! sharing a CPU: its off-CPU time is then throttling, as the test means, and the bounds
//! hold beside a release build. Only the spinner is moved into the group; the group is
//! removed by a Drop guard.
//!
//! Needs root (or CAP_BPF + CAP_PERFMON) and a cgroup `cpu` controller (v1 or v2). Without
//! them the test prints a loud SKIP and passes, unless `CHAINREC_REQUIRE_BPF=1`.

use chainrec_chain::{Analysis, Dedup, NodeKind, RunqHolder, Setup, View, WaitRecord};
use chainrec_format::TraceReader;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
mod common;
use chainrec_testkit::bpf::{can_record, skip as skip_bpf};
use common::tmpdir;
use std::process::Command;

/// A cpu-controller group created for the test, removed on drop.
struct Group {
    dir: PathBuf,
    /// Its path below the hierarchy's mount, as throttled levels name it.
    name: String,
}

impl Drop for Group {
    fn drop(&mut self) {
        // The spinner may take a moment to leave after it exits.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        eprintln!("could not remove test cgroup {}", self.dir.display());
    }
}

/// The mount points of cgroup v2 and of the v1 `cpu` controller, from mountinfo.
fn cpu_mounts() -> (Option<PathBuf>, Option<PathBuf>) {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let (mut v2, mut v1) = (None, None);
    for l in info.lines() {
        let Some((left, right)) = l.split_once(" - ") else {
            continue;
        };
        let mut r = right.split_whitespace();
        let fstype = r.next().unwrap_or("");
        let opts = r.nth(1).unwrap_or("");
        let point = left.split_whitespace().nth(4).map(PathBuf::from);
        if fstype == "cgroup2" && v2.is_none() {
            v2 = point;
        } else if fstype == "cgroup" && opts.split(',').any(|o| o == "cpu") {
            v1 = point;
        }
    }
    (v2, v1)
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("write {value:?} to {}: {e}", path.display()))
}

/// A group with a 20 ms / 100 ms quota and the highest weight: cgroup v2 when its `cpu`
/// controller is available, else the v1 `cpu` hierarchy.
fn make_group() -> Result<Group, String> {
    let leaf = format!("chainrec-throttle-{}", std::process::id());
    let (v2, v1) = cpu_mounts();
    if let Some(root) = v2 {
        let controllers = std::fs::read_to_string(root.join("cgroup.controllers"));
        if controllers.is_ok_and(|c| c.split_whitespace().any(|x| x == "cpu")) {
            // The root's children get the cpu controller (harmless when already on).
            write(&root.join("cgroup.subtree_control"), "+cpu")?;
            let dir = root.join(&leaf);
            std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
            let g = Group {
                dir,
                name: format!("/{leaf}"),
            };
            write(&g.dir.join("cpu.max"), "20000 100000")?;
            write(&g.dir.join("cpu.weight"), "10000")?;
            return Ok(g);
        }
    }
    let Some(root) = v1 else {
        return Err("no cgroup cpu controller (v1 or v2) is mounted".into());
    };
    let dir = root.join(&leaf);
    std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    let g = Group {
        dir,
        name: format!("/{leaf}"),
    };
    write(&g.dir.join("cpu.cfs_period_us"), "100000")?;
    write(&g.dir.join("cpu.cfs_quota_us"), "20000")?;
    write(&g.dir.join("cpu.shares"), "262144")?;
    Ok(g)
}

/// The workload: the spinner (`cr-tspin`, perl) moves itself into the group ("$1": its
/// `cgroup.procs`/`tasks` file), spins for 2 s and writes a byte to the pipe every 10 ms;
/// the reader (`cr-treader`) drains the pipe. Names come from symlinks.
const WORKLOAD: &str = r#"set -e
D="$1"; PROCS="$2"
ln -sf "$(command -v perl)" "$D/cr-tspin"
ln -sf "$(command -v perl)" "$D/cr-treader"
sh -c 'echo $$ > "$1"; exec "$2/cr-tspin" -MTime::HiRes=time -e '"'"'
    $| = 1; my $end = time + 2; my $next = time;
    while ((my $t = time) < $end) {
        if ($t >= $next) { syswrite STDOUT, "x"; $next = $t + 0.01; }
    }'"'"'' spin "$PROCS" "$D" | "$D/cr-treader" -e 'while (sysread STDIN, my $b, 64) {}'
"#;

/// Per level of a wait (0 = the thread itself): the throttled time naming the group, and
/// the run-queue time behind `[idle]`, over all off-CPU (throttled + run-queue) time.
#[derive(Default, Debug)]
struct Shares {
    throttled_in_group: u64,
    throttled_other: BTreeMap<String, u64>,
    behind_idle: u64,
    runnable: u64,
    behind: BTreeMap<String, u64>,
}

#[test]
fn throttled_spinner_and_its_reader() {
    if !can_record("real_throttle") {
        return;
    }
    let group = match make_group() {
        Ok(g) => g,
        Err(e) => {
            skip_bpf("real_throttle", &format!("cannot set up a CPU quota: {e}"));
            return;
        }
    };
    let procs = ["cgroup.procs", "tasks"]
        .iter()
        .map(|f| group.dir.join(f))
        .find(|p| p.exists())
        .expect("group has cgroup.procs or tasks");
    let bin = env!("CARGO_BIN_EXE_chainrec");
    let dir = tmpdir("throttle");
    let trace = dir.join("throttle.zst");
    let out = Command::new(bin)
        .args(["record", "-o"])
        .arg(&trace)
        .args(["--", "sh", "-c", WORKLOAD, "workload"])
        .arg(&dir)
        .arg(&procs)
        .output()
        .expect("run chainrec record");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("ermission") || err.contains("EPERM") || err.contains("not permitted") {
            skip_bpf(
                "real_throttle",
                &format!("BPF not permitted: {}", err.trim()),
            );
            return;
        }
        panic!("chainrec record failed: {err}");
    }

    let an = Analysis::from_reader(TraceReader::open(&trace).expect("open trace"));
    // Level 0 of the spinner's own waits; level 1 of the reader's waits (the spinner).
    let mut spinner = Shares::default();
    let mut reader = Shares::default();
    let mut reader_waits = 0u64;
    {
        let mut sink = |w: &WaitRecord, nodes: &chainrec_chain::NodeTable| {
            let comm = w.comm.to_string();
            let (sh, level) = match comm.as_str() {
                "cr-tspin" => (&mut spinner, 0),
                "cr-treader" => {
                    reader_waits += 1;
                    if w.hops
                        .first()
                        .is_none_or(|h| h.waker_comm.to_string() != "cr-tspin")
                    {
                        return;
                    }
                    (&mut reader, 1)
                }
                _ => return,
            };
            for p in w.runq_of(level) {
                sh.runnable += p.ns;
                match &nodes.get(p.holder).kind {
                    NodeKind::RunQueue {
                        holder: RunqHolder::Throttled { group: g, .. },
                    } => {
                        if *g == group.name {
                            sh.throttled_in_group += p.ns;
                        } else {
                            *sh.throttled_other.entry(g.clone()).or_insert(0) += p.ns;
                        }
                    }
                    NodeKind::RunQueue {
                        holder: RunqHolder::Idle,
                    } => sh.behind_idle += p.ns,
                    n => *sh.behind.entry(format!("{n:?}")).or_insert(0) += p.ns,
                }
            }
        };
        let setup = Setup {
            dedup: Dedup::Off,
            ..Setup::default()
        };
        an.run(setup, &mut sink, |_| {}).expect("analyse");
    }
    // The spinner's off-CPU time (all of it: it never blocks).
    let offcpu: u64 = {
        let mut f = chainrec_chain::FoldedSink::new(View::OffCpu);
        let done = an.run(
            Setup {
                dedup: Dedup::Off,
                filter: chainrec_chain::Filter {
                    threads: chainrec_format::ThreadSelector {
                        comm: Some(chainrec_chain::regex::Regex::new("^cr-tspin$").unwrap()),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                ..Setup::default()
            },
            &mut f,
            |_| {},
        );
        let done = done.expect("analyse offcpu");
        f.folded_ns(done.nodes(), an.tables(), an.meta())
            .values()
            .sum()
    };
    assert!(
        offcpu > 1_000_000_000,
        "spinner off-CPU only {offcpu} ns in ~2 s: the quota did not hold it ({spinner:?})"
    );
    let ratio = |x: u64, of: u64| x as f64 / of.max(1) as f64;
    eprintln!(
        "spinner off-CPU {offcpu} ns: throttled in {} {:.4}, [idle] {:.4}: {spinner:?}\n\
         one level down: {reader_waits} reader waits, throttled {:.4}, [idle] {:.4}: {reader:?}",
        group.name,
        ratio(spinner.throttled_in_group, offcpu),
        ratio(spinner.behind_idle, offcpu),
        ratio(reader.throttled_in_group, reader.runnable),
        ratio(reader.behind_idle, reader.runnable),
    );
    assert!(
        ratio(spinner.throttled_in_group, offcpu) >= 0.90,
        "throttled [{}] {} of {offcpu} ns off-CPU: {spinner:?}",
        group.name,
        spinner.throttled_in_group
    );
    assert!(
        ratio(spinner.behind_idle, offcpu) < 0.05,
        "[run queue];[idle] {} of {offcpu} ns off-CPU: {spinner:?}",
        spinner.behind_idle
    );
    // One level down: the spinner's off-CPU time inside the reader's waits.
    assert!(reader_waits > 20, "reader waited only {reader_waits} times");
    assert!(
        reader.runnable > 500_000_000,
        "spinner off-CPU inside the reader's waits only {} ns: {reader:?}",
        reader.runnable
    );
    assert!(
        ratio(reader.throttled_in_group, reader.runnable) >= 0.90,
        "one level down: throttled {} of {} ns: {reader:?}",
        reader.throttled_in_group,
        reader.runnable
    );
    assert!(
        ratio(reader.behind_idle, reader.runnable) < 0.05,
        "one level down: [idle] {} of {} ns: {reader:?}",
        reader.behind_idle,
        reader.runnable
    );

    // The CLI shows it: a root line and a reader line through the spinner end in
    // `[throttled: <group>];[hardirq: timer]`.
    let o = Command::new(bin)
        .arg("chains")
        .arg(&trace)
        .args(["--unit", "ns"])
        .output()
        .expect("run chainrec chains");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).expect("utf-8");
    let frame = format!(";--;[throttled: {}];[hardirq: timer] ", group.name);
    assert!(
        text.lines()
            .any(|l| l.starts_with("cr-tspin;") && l.contains(&frame)),
        "no spinner line with {frame:?}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("cr-treader;")
            && l.contains(";cr-tspin;--;[throttled: ")
            && l.contains(&frame)),
        "no reader line through the spinner with {frame:?}"
    );
}

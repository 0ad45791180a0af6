//! Real-kernel tests of whole user stacks without frame pointers (`--user-unwind cfi`, the
//! default): the recorder copies the user stack and unwinds it with the objects' CFI.
//!
//! * A stock Debian `gzip` (no frame pointers, stripped, only `.eh_frame`) blocked reading
//!   a pipe: the user stack chainrec records for that wait must equal, address by address,
//!   the backtrace `gdb -batch -p PID` prints for it while it is blocked there (gdb unwinds
//!   with the same CFI, independently), from `read` down to `_start`.
//! * A program built *with* frame pointers spinning in `burn()` around `clock_gettime()`
//!   (a libc wrapper and the vDSO, neither of which sets up a frame): `burn` must be in its
//!   samples, under `clock_gettime`, and in the `[on cpu]` level of the chain of the thread
//!   that waits for it. A frame-pointer walk loses `burn` there: the leaf did not push a
//!   frame, so the first return address read is `burn`'s caller's.
//!
//! Loaded-machine safe: the waits are made long by sleeps, and the checks are about which
//! frames the stacks hold, not about time. Needs root (or CAP_BPF + CAP_PERFMON), gdb and
//! cc (x.sh ensure_packages test installs them); without BPF the tests skip loudly unless
//! `CHAINREC_REQUIRE_BPF=1`.

use chainrec_format::{Event, TraceReader};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
mod common;
use chainrec_testkit::bpf::can_record;
use common::{bin, tmpdir};

/// Environment variable that turns [`gzip_gdb_child`] into the workload (its value: the
/// directory where it writes gzip's pid and gdb's output).
const CHILD_ENV: &str = "CHAINREC_UNWIND_CHILD";

/// The workload, run under `chainrec record` (this test binary re-run with [`CHILD_ENV`]):
/// a gzip reading a pipe blocks in `read`; gdb prints its backtrace while it is blocked;
/// then the pipe is fed and closed.
#[test]
fn gzip_gdb_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let mut gzip = Command::new("gzip")
        .arg("-c")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("gzip");
    let mut input = gzip.stdin.take().unwrap();
    let pid = gzip.id();
    std::fs::write(dir.join("pid"), pid.to_string()).unwrap();
    // A first read, then gzip blocks in the next one: a recorded wait, long (> 100 us).
    input.write_all(&[b'a'; 1000]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let gdb = Command::new("gdb")
        .args([
            "-batch",
            "-nx",
            "-ex",
            "set pagination off",
            "-ex",
            "set width 0",
        ])
        .args(["-ex", "thread apply all bt", "-p"])
        .arg(pid.to_string())
        .output()
        .expect("gdb (x.sh ensure_packages test installs it)");
    std::fs::write(dir.join("gdb.txt"), &gdb.stdout).unwrap();
    // gdb's detach restarts the read: one more long wait, then the end of input.
    std::thread::sleep(Duration::from_millis(300));
    input.write_all(&[b'b'; 1000]).unwrap();
    drop(input);
    gzip.wait().unwrap();
}

/// The frame addresses of gdb's backtrace (`#N  0xADDR in ...`), frame 0 first.
fn gdb_frames(text: &str) -> Vec<u64> {
    text.lines()
        .filter(|l| l.starts_with('#'))
        .filter_map(|l| {
            let a = l.split_whitespace().nth(1)?;
            u64::from_str_radix(a.strip_prefix("0x")?, 16).ok()
        })
        .collect()
}

/// The user stacks of `tid`'s off-CPU waits in `trace` (frames, leaf first).
fn offcpu_user_stacks(trace: &Path, tid: u32) -> (Vec<Vec<u64>>, chainrec_format::Tables) {
    let mem = TraceReader::open(trace).unwrap().to_mem().unwrap();
    let stacks = mem
        .events
        .iter()
        .filter_map(|e| match e {
            Event::OffCpuStacks(o) if o.tid == tid && o.ustack.is_real() => {
                Some(mem.tables.stacks[&o.ustack].frames.clone())
            }
            _ => None,
        })
        .collect();
    (stacks, mem.tables)
}

#[test]
fn blocked_gzip_user_stack_equals_gdb_backtrace() {
    if std::env::var(CHILD_ENV).is_ok() || !can_record("real_unwind") {
        return;
    }
    let dir = tmpdir("unwind-gdb");
    let trace = dir.join("gzip.zst");
    let out = bin()
        .args(["record", "-q", "--no-samples", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "gzip_gdb_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: u32 = std::fs::read_to_string(dir.join("pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let gdb_text = std::fs::read_to_string(dir.join("gdb.txt")).unwrap();
    let want = gdb_frames(&gdb_text);
    assert!(
        want.len() >= 4,
        "gdb printed no whole backtrace of gzip: {gdb_text}"
    );
    let (stacks, tables) = offcpu_user_stacks(&trace, pid);
    assert!(
        !stacks.is_empty(),
        "no user stack recorded for gzip ({pid})"
    );
    assert!(
        stacks.contains(&want),
        "no recorded user stack of gzip equals gdb's backtrace\ngdb: {want:x?}\n{gdb_text}\nrecorded: {stacks:x?}"
    );
    // Named as every view names them: the libc wrapper at the leaf, libc's start code
    // near the root (gzip itself is stripped: its frames are [gzip+0x...]).
    let matching = tables
        .stacks
        .values()
        .find(|s| s.tgid == pid && s.frames == want)
        .unwrap();
    let names = chainrec_chain::stack_frames(&tables, matching.id, 0);
    assert!(
        names[0].contains("read"),
        "leaf is not the read wrapper: {names:?}"
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("__libc_start_main") || n.contains("libc.so.6+")),
        "no libc start frame: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.starts_with("[unwind:")),
        "{names:?}"
    );
}

/// `src` built in `dir` as `cr-NAME` (`-O2 -pthread` and `frame_flag`).
fn compile_c(dir: &Path, name: &str, src: &str, frame_flag: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let exe = dir.join(format!("cr-{name}"));
    let cc = Command::new("cc")
        .args(["-O2", frame_flag, "-pthread", "-o"])
        .arg(&exe)
        .arg(&c)
        .output()
        .expect("cc (x.sh ensure_packages test installs gcc)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    exe
}

/// A worker built with frame pointers spinning in `burn()` around `clock_gettime()`, and
/// its main thread waiting for it on a pipe.
const BURN_C: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static int fds[2];

__attribute__((noinline)) void burn(long ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

__attribute__((noinline)) static void *worker(void *arg)
{
	for (long i = 0; i < (long)arg; i++) {
		burn(20);
		if (write(fds[1], "x", 1) != 1)
			exit(1);
	}
	close(fds[1]);
	return NULL;
}

__attribute__((noinline)) void wait_for_worker(void)
{
	char c;
	while (read(fds[0], &c, 1) == 1)
		;
}

int main(int argc, char **argv)
{
	pthread_t t;
	if (pipe(fds))
		return 1;
	pthread_create(&t, NULL, worker, (void *)atol(argv[1]));
	wait_for_worker();
	pthread_join(t, NULL);
	return 0;
}
"#;

#[test]
fn frame_pointer_leaf_callers_are_kept() {
    if !can_record("real_unwind") {
        return;
    }
    let dir = tmpdir("unwind-burn");
    let exe = compile_c(&dir, "burn", BURN_C, "-fno-omit-frame-pointer");
    let trace = dir.join("burn.zst");
    let out = bin()
        .args(["record", "-q", "--sample-freq", "499", "-o"])
        .arg(&trace)
        .arg("--")
        .arg(&exe)
        .arg("40")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "record failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folded = |cmd: &str| {
        let o = bin()
            .args([cmd, "--comm", "^cr-burn$"])
            .arg(&trace)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // Samples inside clock_gettime (the libc wrapper or the vDSO): burn is their caller.
    let oncpu = folded("oncpu");
    let (mut in_leaf, mut with_burn) = (0u64, 0u64);
    for line in oncpu.lines() {
        let (frames, n) = line.rsplit_once(' ').unwrap();
        let n: u64 = n.parse().unwrap();
        let user = frames.split(";-;").next().unwrap();
        if user.ends_with(";clock_gettime") {
            in_leaf += n;
            // The caller of the clock_gettime frames (the vDSO's, and libc's wrapper under
            // whatever name its debug file gives it, inlined parts included).
            let caller = user
                .split(';')
                .rev()
                .find(|f| !f.contains("clock_gettime"))
                .unwrap_or("");
            if caller == "burn" {
                with_burn += n;
            }
        }
    }
    assert!(in_leaf > 0, "no sample inside clock_gettime:\n{oncpu}");
    // A sample in the PLT stub burn calls clock_gettime through is named as perf names it,
    // not after the symbol before the table.
    assert!(
        !oncpu.contains(";burn;_init"),
        "a PLT stub named _init:\n{oncpu}"
    );
    assert!(
        with_burn * 100 >= in_leaf * 95,
        "{with_burn} of {in_leaf} samples in clock_gettime have burn as caller:\n{oncpu}"
    );
    // The main thread waits for the worker: its chain's [on cpu] level names burn, and the
    // waker's (the worker's) user stack names worker.
    let chains = folded("chains");
    let on_cpu_burn = chains
        .lines()
        .filter(|l| l.contains("wait_for_worker"))
        .filter_map(|l| {
            l.split_once(";[on cpu];")
                .or_else(|| l.split_once(";[on cpu: estimated];"))
        })
        // burn, then the clock_gettime frames (libc's under its debug name, the vDSO's).
        .any(|(_, oncpu)| {
            oncpu.split_once(";burn;").is_some_and(|(_, rest)| {
                rest.split(';')
                    .next()
                    .unwrap_or("")
                    .contains("clock_gettime")
            })
        });
    assert!(
        on_cpu_burn,
        "no [on cpu] level with burn;clock_gettime:\n{chains}"
    );
    // The waker's level reads kernel frames, `-`, then its user stack leaf first: libc's
    // write wrapper (under its debug name when libc6-dbg is installed, inlined parts
    // included), then worker.
    let waker_worker = chains.lines().any(|l| {
        l.split(";--;").skip(1).any(|level| {
            level.split_once(";-;").is_some_and(|(_, user)| {
                let mut frames = user.split(';').skip_while(|f| f.contains("write"));
                user.contains("write") && frames.next() == Some("worker")
            })
        })
    });
    assert!(
        waker_worker,
        "the waker's user stack lost worker above write:\n{chains}"
    );
}

/// A reader whose stack frame is larger than the recorder's copy (16 KiB): `bigframe` keeps
/// 40 KiB on the stack, touched, like coreutils' `wc` with its 16 KiB buffers. A copy from
/// the blocked `read` ends inside the buffer, short of `bigframe`'s return address. argv:
/// waits, milliseconds between the writer's bytes.
const BIG_C: &str = r#"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fds[2];
static long waits, gap_ms;

static void *writer(void *arg)
{
	struct timespec ts = { gap_ms / 1000, (gap_ms % 1000) * 1000000 };
	for (long i = 0; i < waits; i++) {
		nanosleep(&ts, NULL);
		if (write(fds[1], "x", 1) != 1)
			exit(1);
	}
	return NULL;
}

__attribute__((noinline)) static long bigframe(void)
{
	volatile char buf[40960];
	long n = 0;
	memset((char *)buf, 1, sizeof buf);
	for (long i = 0; i < waits; i++) {
		if (read(fds[0], (char *)buf + (i % 64), 1) != 1)
			exit(1);
		n += buf[(i * 4096) % sizeof buf];
	}
	return n;
}

int main(int argc, char **argv)
{
	pthread_t t;
	waits = atol(argv[1]);
	gap_ms = atol(argv[2]);
	if (pipe(fds))
		return 1;
	pthread_create(&t, NULL, writer, NULL);
	long n = bigframe();
	pthread_join(t, NULL);
	return n > 0 ? 0 : 2;
}
"#;

/// Frames larger than the copy (issue 35, item 5). Two ways past them, both checked:
/// * few long waits: the rest of the stack is read live from the thread, still blocked in
///   the same `read` when the recorder unwinds the previous wait's copy (words read twice
///   must agree), and the addresses it needed become windows of the next copies;
/// * many short waits: windows learned where a copy fell short.
///
/// Each way: at least 90 % of the reader's waits of 1 ms or more reach `main` and libc's
/// start (before: none, every stack `[unwind: stack copy too short above …]`).
#[test]
fn frames_larger_than_the_copy_reach_main() {
    if !can_record("real_unwind") {
        return;
    }
    let dir = tmpdir("unwind-big");
    let exe = compile_c(&dir, "big", BIG_C, "-fomit-frame-pointer");
    for (waits, gap_ms, way) in [
        ("4", "300", "from the live stack"),
        ("40", "20", "read windows"),
    ] {
        let trace = dir.join(format!("big-{waits}.zst"));
        let out = bin()
            .args(["record", "--no-samples", "-o"])
            .arg(&trace)
            .arg("--")
            .arg(&exe)
            .args([waits, gap_ms])
            .output()
            .unwrap();
        let summary = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "record failed: {summary}");
        let cfi = summary
            .lines()
            .find(|l| l.contains("user stacks (CFI)"))
            .unwrap_or("");
        assert!(cfi.contains(way), "{waits} waits: no stack {way}: {cfi}");
        let o = bin()
            .args(["offcpu", "--comm", "^cr-big$", "-m", "1000"])
            .arg(&trace)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let folded = String::from_utf8(o.stdout).unwrap();
        let (mut all, mut whole) = (0u64, 0u64);
        for line in folded.lines().filter(|l| l.contains("bigframe")) {
            let (frames, n) = line.rsplit_once(' ').unwrap();
            let n: u64 = n.parse().unwrap();
            all += n;
            let user: Vec<&str> = frames.split(";-;").next().unwrap().split(';').collect();
            if user.contains(&"main") && user.iter().any(|f| f.starts_with("__libc_start")) {
                whole += n;
            }
        }
        assert!(all > 0, "{waits} waits: no wait in bigframe:\n{folded}");
        assert!(
            whole * 10 >= all * 9,
            "{waits} waits: {whole} of {all} ns of bigframe's waits reach main:\n{folded}\n{cfi}"
        );
    }
}

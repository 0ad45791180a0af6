//! User symbols from real recordings: frames of processes that exited before the consumer
//! read their stacks are still named (the mapping history), and a stripped program is
//! named at analysis time from a debug file found by build id (`--debug-dir`).
//!
//! Need root and BPF (skip loudly otherwise; fail under `CHAINREC_REQUIRE_BPF=1`); the
//! `--debug-dir` test also needs a C compiler, objcopy and strip (binutils).

mod common;
use chainrec_format::{Event, StackKind, TraceReader};
use chainrec_testkit::bpf::can_record;
use common::{bin, stderr, tmpdir};
use std::collections::HashSet;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

/// Two recorders at once would see each other's events (and share 2 CPUs).
static SERIAL: Mutex<()> = Mutex::new(());

fn record(trace: &Path, cmd: &[&str]) {
    let o = bin()
        .args(["record", "-q", "--stacks", "eager", "-o"])
        .arg(trace)
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    assert!(o.status.success(), "record failed: {}", stderr(&o));
}

/// Short-lived `gzip` processes (each blocks ~5 ms in `read` on its pipe, then exits, mostly
/// before the consumer's next poll) keep named user frames: every leaf of theirs in libc (a
/// system call wrapper: the frame-pointer walk is reliable there even through Debian's
/// code without frame pointers; `.dynsym` names them without libc6-dbg) has a name.
#[test]
fn frames_of_processes_that_exited_before_the_consumer_polled_are_named() {
    if !can_record("frames_of_processes_that_exited_before_the_consumer_polled_are_named") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let d = tmpdir("short-lived-syms");
    let trace = d.join("t.zst");
    record(
        &trace,
        &[
            "sh",
            "-c",
            "for i in $(seq 40); do (sleep 0.005; echo hello) | gzip -c > /dev/null; done",
        ],
    );
    let r = TraceReader::open(&trace).unwrap();
    let t = r.tables();
    // The processes that became gzip (first seen as the forking shell, renamed at exec).
    let gzip: HashSet<u32> = r
        .to_mem()
        .unwrap()
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Comm(c) if c.comm.as_str() == "gzip" => Some(c.tgid),
            _ => None,
        })
        .collect();
    assert!(gzip.len() >= 20, "only {} gzip processes seen", gzip.len());
    let (mut leaves, mut named) = (0, 0);
    let mut procs_with_stacks = HashSet::new();
    for st in t.stacks.values() {
        if st.kind != StackKind::User || !gzip.contains(&st.tgid) || st.frames.is_empty() {
            continue;
        }
        let s = t
            .symbol(st, st.frames[0])
            .expect("every frame has a symbol entry");
        // Leaves in libc (a stack taken before the exec, in the stripped dash, has no
        // name to find).
        if !s.module.is_some_and(|m| m.contains("/libc.so")) {
            continue;
        }
        procs_with_stacks.insert(st.tgid);
        leaves += 1;
        if s.name.is_some() {
            named += 1;
        } else {
            eprintln!("unnamed leaf: {s:?}");
        }
    }
    assert!(
        procs_with_stacks.len() >= 10,
        "libc leaves of only {} gzip processes",
        procs_with_stacks.len()
    );
    assert_eq!(named, leaves, "{named} of {leaves} gzip leaf frames named");
    // The mappings those frames used are in the trace, with their build ids (the leaves
    // are in libc), and say where each leaf is.
    for st in t.stacks.values() {
        if st.kind != StackKind::User || !gzip.contains(&st.tgid) || st.frames.is_empty() {
            continue;
        }
        let s = t.symbol(st, st.frames[0]).unwrap();
        let m = t
            .mappings
            .lookup(st.tgid, st.frames[0], u64::MAX - 1)
            .unwrap_or_else(|| panic!("no stored mapping for {s:?}"));
        assert_eq!(s.module, Some(m.path.as_str()));
        assert_eq!(s.file_offset, Some(m.file_offset(st.frames[0])));
        assert!(m.build_id.is_some() && m.vaddr_delta.is_some(), "{m:?}");
    }
    assert!(
        r.meta().extra("unresolved_user_frames").is_some(),
        "{:?}",
        r.meta().extra
    );
}

/// A stripped program whose debug file sits only in a scratch build-id directory: its
/// functions are unnamed in the trace, and named by `--debug-dir` at analysis time, an
/// inlined function as a frame of its own.
#[test]
fn debug_dir_names_the_functions_of_a_stripped_program() {
    if !can_record("debug_dir_names_the_functions_of_a_stripped_program") {
        return;
    }
    let d = tmpdir("debug-dir");
    let src = d.join("waiter.c");
    std::fs::write(
        &src,
        r#"#include <unistd.h>
#include <stdlib.h>
__attribute__((noinline)) static int inner_leaf(int fd, char *b) { return read(fd, b, 1); }
__attribute__((noinline)) int middle_wait(int fd) { char b; int r = inner_leaf(fd, &b); return r + 1; }
static inline __attribute__((always_inline)) int once(int fd) { return middle_wait(fd); }
int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20;
    for (int i = 0; i < n; i++) {
        int p[2];
        if (pipe(p)) return 1;
        if (fork() == 0) { usleep(3000); if (write(p[1], "x", 1) != 1) _exit(1); _exit(0); }
        if (once(p[0]) != 2) return 1;
        close(p[0]); close(p[1]);
    }
    return 0;
}
"#,
    )
    .unwrap();
    let full = d.join("waiter.full");
    let stripped = d.join("waiter");
    let dbg = d.join("waiter.debug");
    let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
    if !ok(Command::new("cc")
        .args([
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-Wl,--build-id",
            "-o",
        ])
        .arg(&full)
        .arg(&src))
        || !ok(Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&full)
            .arg(&dbg))
        || !ok(Command::new("strip")
            .arg("--strip-all")
            .arg(&full)
            .arg("-o")
            .arg(&stripped))
    {
        chainrec_testkit::bpf::skip(
            "debug_dir_names_the_functions_of_a_stripped_program",
            "cc, objcopy or strip failed",
        );
        return;
    }
    let bid = chainrec_symbols::build_id_of(&stripped).expect("a build id");
    let hex: String = bid.iter().map(|b| format!("{b:02x}")).collect();
    let dbgdir = d.join("dbg");
    let at = dbgdir.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::rename(&dbg, at.join(format!("{}.debug", &hex[2..]))).unwrap();

    let trace = d.join("t.zst");
    {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        record(&trace, &[stripped.to_str().unwrap(), "30"]);
    }
    let folded = |extra: &[&str]| {
        let o = bin()
            .arg("offcpu")
            .arg(&trace)
            .args(["--comm", "^waiter$"])
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        (String::from_utf8_lossy(&o.stdout).into_owned(), stderr(&o))
    };
    let (without, _) = folded(&[]);
    assert!(!without.is_empty(), "no off-CPU stacks of waiter");
    assert!(
        !without.contains("middle_wait"),
        "named without its debug file:\n{without}"
    );
    assert!(without.contains("[waiter+0x"), "{without}");
    let (with, err) = folded(&["--debug-dir", dbgdir.to_str().unwrap()]);
    // `once` is inlined into main: its own frame, marked, from the debug file's DWARF.
    assert!(
        with.lines()
            .any(|l| l.contains("main;once [inlined];middle_wait;")),
        "--debug-dir did not name the frames:\n{with}\n{err}"
    );
    assert!(err.contains("newly named"), "{err}");
    // A --debug-dir that is not a directory is refused.
    let o = bin()
        .arg("offcpu")
        .arg(&trace)
        .args(["--debug-dir", "/nonexistent/dbg"])
        .output()
        .unwrap();
    common::fails_with(&o, "not a directory");
}

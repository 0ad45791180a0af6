//! Helpers shared by the binary's integration tests (each test file uses a part).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The built `chainrec` binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chainrec"))
}

/// A fresh directory for one test, under cargo's per-target scratch space; the test file's
/// name and the pid keep test files and concurrent runs apart.
pub fn tmpdir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{}-{name}-{}",
        env!("CARGO_CRATE_NAME"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Assert a clean failure: non-zero exit, `phrase` in stderr, no panic.
#[track_caller]
pub fn fails_with(o: &Output, phrase: &str) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert_ne!(o.status.code(), Some(101), "panic exit code; stderr: {err}");
    assert!(err.contains(phrase), "stderr lacks {phrase:?}: {err}");
    assert!(!err.contains("panicked"), "panicked: {err}");
}

/// `CHAINREC_REQUIRE_BPF=1` (set by `.ci/run`) turns a BPF test's skip into a failure.
pub fn require_bpf() -> bool {
    std::env::var("CHAINREC_REQUIRE_BPF").is_ok_and(|v| v == "1")
}

/// A BPF test that cannot run: a loud SKIP, or a failure when BPF is required.
pub fn skip_bpf(test: &str, why: &str) {
    if require_bpf() {
        panic!("CHAINREC_REQUIRE_BPF=1 but {test} cannot run: {why}");
    }
    eprintln!(
        "\n*** SKIP {test}: needs root/BPF ({why}); CHAINREC_REQUIRE_BPF=1 makes this a failure ***\n"
    );
}

/// True when this process can record (root, kernel BTF); otherwise [`skip_bpf`].
pub fn can_record(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let why = if unsafe { libc::geteuid() } != 0 {
        "not root"
    } else if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        "no kernel BTF"
    } else {
        return true;
    };
    skip_bpf(test, why);
    false
}

//! Helpers shared by the binary's integration tests (each test file uses a part).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The built `chainrec` binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_chainrec"))
}

/// A fresh directory for one test (the test kit's scratch directory).
pub fn tmpdir(name: &str) -> PathBuf {
    chainrec_testkit::scratch::dir(name)
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

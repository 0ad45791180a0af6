//! The gate of tests that read chainrec's exports with third-party tools (the way users
//! do: DuckDB and pyarrow for Parquet, Perfetto's generated protos, go tool pprof): a
//! missing tool is a loud skip, and a failure when `CHAINREC_REQUIRE_TOOLS=1` (set by
//! `.ci/run`). Python packages live in the one venv `./x.sh test` sets up
//! (`target/pyvenv`, passed as `CHAINREC_PYTHON`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `CHAINREC_REQUIRE_TOOLS=1`: a tool test's skip is a failure.
pub fn require_tools() -> bool {
    std::env::var("CHAINREC_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

/// Whether `cmd ARG` runs and succeeds (`go version`, `node --version`, `java -version`).
pub fn available(cmd: &str, arg: &str) -> bool {
    Command::new(cmd)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A tool test that cannot run: a loud SKIP, or a panic when tools are required.
pub fn skip(test: &str, why: &str) {
    if require_tools() {
        panic!("CHAINREC_REQUIRE_TOOLS=1 but {test} cannot run: {why}");
    }
    eprintln!(
        "\n*** SKIP {test}: {why}; ./x.sh test installs it, CHAINREC_REQUIRE_TOOLS=1 makes this a failure ***\n"
    );
}

/// A Python interpreter that can import every module of `modules`: `CHAINREC_PYTHON`, else
/// the workspace's `target/pyvenv` (made by `./x.sh test`), else `python3` on the PATH.
/// None (after [`skip`]ping `test`) when none can.
pub fn python_with(test: &str, modules: &[&str]) -> Option<PathBuf> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/pyvenv/bin/python");
    let candidates = std::env::var_os("CHAINREC_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([venv, PathBuf::from("python3")]);
    let import = format!("import {}", modules.join(", "));
    for py in candidates {
        let ok = Command::new(&py)
            .args(["-c", &import])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    skip(
        test,
        &format!(
            "no Python with {} (pip install {} in a venv, CHAINREC_PYTHON=its python)",
            modules.join(", "),
            modules.join(" ")
        ),
    );
    None
}

/// Run `py script args...` and parse its standard output as JSON; panics, with its output,
/// when it fails.
pub fn run_python_json(py: &Path, script: &Path, args: &[PathBuf]) -> serde_json::Value {
    let out = Command::new(py)
        .arg(script)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", py.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{} failed ({}): {stdout}\n{}",
        script.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("{} printed no JSON ({e}): {stdout}", script.display()))
}

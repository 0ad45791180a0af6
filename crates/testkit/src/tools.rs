//! Third-party readers of chainrec's outputs (Perfetto's Python protos, ...) that tests
//! run as users would. `x.sh test` installs them; a test that lacks one skips loudly, and
//! fails instead when `CHAINREC_REQUIRE_TOOLS=1` (set by `.ci/run`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// `CHAINREC_REQUIRE_TOOLS=1`: a missing tool is a failure, not a skip.
pub fn required() -> bool {
    std::env::var("CHAINREC_REQUIRE_TOOLS").is_ok_and(|v| v == "1")
}

/// The skip (or, under [`required`], the failure) of `test`, which needs `what`.
pub fn missing(test: &str, what: &str, install: &str) {
    if required() {
        panic!("CHAINREC_REQUIRE_TOOLS=1 but {test} cannot run: {what} is missing ({install})");
    }
    eprintln!(
        "\n*** SKIP {test}: {what} is missing ({install}); CHAINREC_REQUIRE_TOOLS=1 makes this a failure ***\n"
    );
}

/// The virtual environment `x.sh test` installs the PyPI tools into.
pub fn py_tools_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/py-tools")
}

/// A Python interpreter that can `import module`: `$CHAINREC_PYTHON` if set, else the
/// interpreter of [`py_tools_dir`]. `None` (after [`missing`]) when neither can.
pub fn python_with(test: &str, module: &str) -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var_os("CHAINREC_PYTHON") {
        Some(p) => vec![PathBuf::from(p)],
        None => vec![py_tools_dir().join("bin/python3")],
    };
    for py in candidates {
        let ok = Command::new(&py)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    missing(
        test,
        &format!("a Python with the `{module}` module"),
        "./x.sh test installs it into target/py-tools; or set CHAINREC_PYTHON",
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

//! Shared by the Perfetto tests: tests/perfetto_check.py run with a Python that has
//! Perfetto's generated protos.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The Python that has Perfetto's generated protos, or `None` after the loud skip.
pub fn perfetto_python(test: &str) -> Option<PathBuf> {
    chainrec_testkit::tools::python_with(
        test,
        &["perfetto.protos.perfetto.trace.perfetto_trace_pb2"],
    )
}

/// Run tests/perfetto_check.py on `files`: its JSON summary by file. Panics on unknown
/// fields (the script's exit status 1).
pub fn check(py: &Path, files: &[PathBuf]) -> BTreeMap<String, Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/perfetto_check.py");
    let v = chainrec_testkit::tools::run_python_json(py, &script, files);
    serde_json::from_value(v).unwrap()
}

//! The one gate of real-kernel (BPF) tests: a test that cannot record here skips loudly,
//! and fails instead when `CHAINREC_REQUIRE_BPF=1` (set by `.ci/run` and for runs that must
//! prove the recorder works).

use std::path::Path;

/// `CHAINREC_REQUIRE_BPF=1`: a BPF test's skip is a failure.
pub fn require_bpf() -> bool {
    std::env::var("CHAINREC_REQUIRE_BPF").is_ok_and(|v| v == "1")
}

/// Why BPF recording is not possible in this process (not root, no kernel BTF), or None.
pub fn unavailable() -> Option<&'static str> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        Some("not root")
    } else if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        Some("no kernel BTF")
    } else {
        None
    }
}

/// A BPF test that cannot run: a loud SKIP, or a panic when BPF is required.
pub fn skip(test: &str, why: &str) {
    if require_bpf() {
        panic!("CHAINREC_REQUIRE_BPF=1 but {test} cannot run: {why}");
    }
    eprintln!(
        "\n*** SKIP {test}: needs root/BPF ({why}); CHAINREC_REQUIRE_BPF=1 makes this a failure ***\n"
    );
}

/// True when this process can record; otherwise [`skip`]s `test` and returns false.
pub fn can_record(test: &str) -> bool {
    match unavailable() {
        None => true,
        Some(why) => {
            skip(test, why);
            false
        }
    }
}

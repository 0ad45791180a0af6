//! Scratch directories for tests: one fresh directory per test and process (the pid keeps
//! concurrent runs apart), under the system temporary directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// `$TMPDIR/chainrec-test-{tag}-{pid}-{n}` (`n` counts the calls of this process, so that
/// two tests may share a tag), emptied and created. It stays after the test (to look at
/// after a failure); [`ScratchDir`] is the one that cleans up.
pub fn dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("chainrec-test-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating {}: {e}", d.display()));
    d
}

/// A [`dir`] removed (with its contents) when dropped.
#[derive(Debug)]
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A fresh directory for `tag`.
    pub fn new(tag: &str) -> Self {
        ScratchDir(dir(tag))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// `name` inside it.
    pub fn file(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

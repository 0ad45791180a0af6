//! Golden files: committed expected outputs, compared byte for byte.

use std::path::Path;

/// Environment variable that makes [`expected`] write the actual output first (then look at
/// the diff before committing).
pub const UPDATE_ENV: &str = "CHAINREC_UPDATE_GOLDEN";

/// The committed contents of the golden file `path`, for the caller to compare with
/// `actual`. With `CHAINREC_UPDATE_GOLDEN` set, `actual` is written there first. A missing
/// file panics with how to create it.
pub fn expected(path: &Path, actual: &str) -> String {
    if std::env::var_os(UPDATE_ENV).is_some() {
        std::fs::write(path, actual).unwrap();
    }
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e} ({UPDATE_ENV}=1 writes it)", path.display()))
}

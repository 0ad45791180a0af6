//! The Parquet tables of many traces in a Hive-style layout, which Spark, DuckDB, Trino and
//! Hive read as two partitioned tables (partition discovery gives `host` and `date`
//! columns):
//!
//! ```text
//! DIR/waits/host=H/date=YYYY-MM-DD/START.parquet
//! DIR/stacks/host=H/date=YYYY-MM-DD/START.parquet
//! ```
//!
//! One part per recording: H is its host (Hive-escaped), the date the UTC date its
//! recording started, START the start in [`TraceKey::start`] (`20261124T021502.123456789Z`).
//! The two tables live in trees of their own because their columns differ: a reader given
//! `DIR/waits` finds only waits. A trace without a wall clock (synthetic) has no date: its
//! parts go under `date=__HIVE_DEFAULT_PARTITION__`, which every reader reads as NULL, and
//! START is `boot+NSns`.

use crate::{ParquetError, Result, TraceKey};
use std::path::{Path, PathBuf};

/// The directory name Hive, Spark and DuckDB read as a NULL partition value.
pub const NULL_PARTITION: &str = "__HIVE_DEFAULT_PARTITION__";

/// The longest file name Linux file systems take.
const NAME_MAX: usize = 255;

/// `value` as a Hive partition value in a path: the characters Hive and Spark escape
/// (`ExternalCatalogUtils.escapePathName`: controls, `"#%'*/:=?\{[]^`, DEL) as `%XX`, so
/// that no value can name another directory (`/`, `..` stays inside `host=`) and readers
/// decode it back; an empty value is [`NULL_PARTITION`].
pub fn escape(value: &str) -> String {
    if value.is_empty() {
        return NULL_PARTITION.to_string();
    }
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        let escaped = matches!(c, '\0'..='\x1f' | '\x7f')
            || matches!(
                c,
                '"' | '#' | '%' | '\'' | '*' | '/' | ':' | '=' | '?' | '\\' | '{' | '[' | ']' | '^'
            );
        match escaped {
            true => out.push_str(&format!("%{:02X}", c as u32)),
            false => out.push(c),
        }
    }
    out
}

/// Where one recording's two tables go in a Hive layout rooted at a directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    /// `DIR/waits/host=H/date=D/START.parquet`.
    pub waits: PathBuf,
    /// `DIR/stacks/host=H/date=D/START.parquet`.
    pub stacks: PathBuf,
}

impl Part {
    /// The part of the recording `key` under `dir`.
    pub fn new(dir: &Path, key: &TraceKey) -> Result<Part> {
        let host = format!("host={}", escape(&key.host));
        if host.len() > NAME_MAX {
            return Err(ParquetError::HostTooLong {
                host: key.host.clone(),
                bytes: host.len(),
            });
        }
        let date = format!(
            "date={}",
            key.utc_date().as_deref().unwrap_or(NULL_PARTITION)
        );
        // START is digits, `T`, `Z`, `.`, `boot+`, `ns`: a file name as it is.
        let file = format!("{}.parquet", key.start);
        let at = |table: &str| dir.join(table).join(&host).join(&date).join(&file);
        Ok(Part {
            waits: at("waits"),
            stacks: at("stacks"),
        })
    }

    /// Both files: the waits table, then the stacks table.
    pub fn files(&self) -> [&Path; 2] {
        [&self.waits, &self.stacks]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chainrec_format::RecordingMeta;

    #[test]
    fn host_names_are_escaped_as_hive_does() {
        assert_eq!(escape("db7.example.com"), "db7.example.com");
        assert_eq!(escape("a/b"), "a%2Fb");
        assert_eq!(escape(".."), "..");
        assert_eq!(escape("x=1%"), "x%3D1%25");
        assert_eq!(escape("tab\there\n"), "tab%09here%0A");
        assert_eq!(escape("ü-host"), "ü-host");
        assert_eq!(escape(""), NULL_PARTITION);
    }

    #[test]
    fn parts_stay_inside_the_directory() {
        let dir = Path::new("/fleet");
        for host in ["../../etc", "/abs", "..", "a/../../b", "."] {
            let meta = RecordingMeta {
                host: host.into(),
                ..RecordingMeta::default()
            };
            let p = Part::new(dir, &TraceKey::new(&meta)).unwrap();
            for f in p.files() {
                let parts: Vec<_> = f.strip_prefix(dir).unwrap().components().collect();
                assert_eq!(parts.len(), 4, "{host}: {}", f.display());
                assert!(
                    parts
                        .iter()
                        .all(|c| matches!(c, std::path::Component::Normal(_))),
                    "{host}: {}",
                    f.display()
                );
            }
        }
        let long = RecordingMeta {
            host: "/".repeat(100),
            ..RecordingMeta::default()
        };
        let e = Part::new(dir, &TraceKey::new(&long)).unwrap_err();
        assert!(e.to_string().contains("305 bytes"), "{e}");
    }

    #[test]
    fn the_date_is_the_utc_date_of_the_start_or_null() {
        let mut meta = RecordingMeta {
            host: "db7".into(),
            start_ns: 5_000_000_000,
            ..RecordingMeta::default()
        };
        let dir = Path::new("d");
        let p = Part::new(dir, &TraceKey::new(&meta)).unwrap();
        assert_eq!(
            p.waits,
            Path::new("d/waits/host=db7/date=__HIVE_DEFAULT_PARTITION__/boot+5000000000ns.parquet")
        );
        // Started 2026-11-29 23:59:59.5 UTC: the date of the start, even if it ends the
        // next day.
        meta.clock_offset_ns = 1_795_996_799_500_000_000 - 5_000_000_000;
        let p = Part::new(dir, &TraceKey::new(&meta)).unwrap();
        assert_eq!(
            p.stacks,
            Path::new("d/stacks/host=db7/date=2026-11-29/20261129T235959.500000000Z.parquet")
        );
    }
}

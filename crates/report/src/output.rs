//! Outputs that appear whole or not at all.

use std::path::{Path, PathBuf};

/// Why an output could not be created or moved into place.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// The file (or its temporary sibling) could not be created.
    #[error("cannot create {}", .path.display())]
    Create {
        /// The destination.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The temporary file next to the destination could not be created.
    #[error("cannot create {} (in directory {})", .path.display(), .dir.display())]
    CreateIn {
        /// The destination.
        path: PathBuf,
        /// Its directory.
        dir: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The destination is a directory.
    #[error("{}: is a directory", .0.display())]
    IsADirectory(PathBuf),
    /// The destination has no file name (`..`, `/`).
    #[error("{}: not a file name", .0.display())]
    NotAFileName(PathBuf),
    /// [`TempOutput::file`] was called twice (a bug).
    #[error("{}: written twice", .0.display())]
    WrittenTwice(PathBuf),
    /// The finished file could not be renamed over the destination.
    #[error("renaming {} to {}", .from.display(), .to.display())]
    Rename {
        /// The temporary file.
        from: PathBuf,
        /// The destination.
        to: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// An output written to a temporary file in the destination's directory and renamed
/// over the destination by [`TempOutput::commit`]; dropped uncommitted, it is removed, so
/// a failure never leaves a partial file that looks like a result. Only for a new or
/// regular file: a device, pipe or socket (`--perfetto /dev/stdout`) is written directly
/// (renaming over it would replace the node), a symlink is followed to its target, and a
/// replaced file keeps its mode.
pub struct TempOutput {
    /// Where the result goes (a symlink resolved).
    dest: PathBuf,
    /// The temporary file; empty when writing `dest` directly or once committed.
    tmp: PathBuf,
    file: Option<std::fs::File>,
}

impl TempOutput {
    /// Create the output for `dest` (checked and opened now, before any long work).
    pub fn create(dest: &Path) -> Result<TempOutput, OutputError> {
        let creating = |p: &Path| {
            let path = p.to_path_buf();
            move |source| OutputError::Create { path, source }
        };
        let existing = match std::fs::metadata(dest) {
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(creating(dest)(e)),
        };
        let direct = |path: &Path| -> Result<TempOutput, OutputError> {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .open(path)
                .map_err(creating(path))?;
            Ok(TempOutput {
                dest: path.to_path_buf(),
                tmp: PathBuf::new(),
                file: Some(file),
            })
        };
        let dest = match &existing {
            Some(m) if m.is_dir() => return Err(OutputError::IsADirectory(dest.to_path_buf())),
            Some(m) if !m.is_file() => return direct(dest),
            Some(_) => std::fs::canonicalize(dest).map_err(creating(dest))?,
            // A dangling symlink: creating through it is what the user asked for.
            None if dest.is_symlink() => return direct(dest),
            None => dest.to_path_buf(),
        };
        let name = dest
            .file_name()
            .ok_or_else(|| OutputError::NotAFileName(dest.clone()))?;
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".tmp.{}", std::process::id()));
        let tmp = dir.join(tmp_name);
        let file = std::fs::File::create(&tmp).map_err(|source| OutputError::CreateIn {
            path: dest.clone(),
            dir: dir.to_path_buf(),
            source,
        })?;
        // From here on, dropping `out` on a failure removes the temporary file.
        let mut out = TempOutput {
            dest,
            tmp,
            file: None,
        };
        if let Some(m) = existing {
            file.set_permissions(m.permissions())
                .map_err(creating(&out.dest))?;
        }
        out.file = Some(file);
        Ok(out)
    }

    /// Where the result goes (a symlink resolved).
    pub fn dest(&self) -> &Path {
        &self.dest
    }

    /// The open output file (once).
    pub fn file(&mut self) -> Result<std::fs::File, OutputError> {
        self.file
            .take()
            .ok_or_else(|| OutputError::WrittenTwice(self.dest.clone()))
    }

    /// Move the finished file into place (nothing to do when written directly).
    pub fn commit(&mut self) -> Result<(), OutputError> {
        if self.tmp.as_os_str().is_empty() {
            return Ok(());
        }
        std::fs::rename(&self.tmp, &self.dest).map_err(|source| OutputError::Rename {
            from: self.tmp.clone(),
            to: self.dest.clone(),
            source,
        })?;
        self.tmp = PathBuf::new();
        Ok(())
    }
}

impl Drop for TempOutput {
    fn drop(&mut self) {
        if !self.tmp.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Whether two stats or two paths are of one file: kept in chainrec_format (the recorder
/// checks its outputs with them too), re-exported beside the atomic outputs they protect.
pub use chainrec_format::{same_file, same_inode};

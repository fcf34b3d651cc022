//! The folder walk: which files under a dataset or calibration folder are read. One rule for
//! every command (`validate`, `compare --dataset`, `bench`, `calibrate`, `quantize`):
//!
//! - image files (extensions in [`IMAGE_EXTENSIONS`], any case) at any depth under the folder
//!   are read; other files are ignored without a word;
//! - entries whose name starts with `.` (hidden files and folders, such as
//!   `.ipynb_checkpoints/`) are not read;
//! - symbolic links are followed; a link to a folder already on the way down or already read
//!   (same canonical path) is a loop: skipped and listed; a broken link whose name has an image
//!   extension or no extension is skipped and listed;
//! - a sub-folder or file that cannot be read (permission, I/O error) is skipped and listed with
//!   the system's reason; only the folder itself being unreadable is an error;
//! - the order is fixed: entries sorted by name within each folder, depth first (for a flat
//!   folder: the files sorted by name).
//!
//! Everything skipped comes back with its reason in [`Walk::skipped`], for the command to list.

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

/// File extensions taken as images (case-insensitive).
pub(crate) const IMAGE_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png"];

/// A file or folder that was skipped, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The file (or folder).
    pub path: PathBuf,
    /// What went wrong (one line).
    pub reason: String,
}

/// What a walk found: the image files to read, in order, and what it skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Walk {
    /// Image files, sorted by name within each folder, depth first.
    pub files: Vec<PathBuf>,
    /// Links, folders and files that were not read, each with its reason.
    pub skipped: Vec<Failure>,
}

/// True when `path`'s extension is one of [`IMAGE_EXTENSIONS`] (any case).
pub(crate) fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// True for a hidden name (starting with `.`), which the walk does not read.
pub(crate) fn is_hidden(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(b".")
}

/// Walks `root` by the module's rule. An error only when `root` itself cannot be read.
pub fn walk(root: &Path) -> Result<Walk> {
    walk_with(root, &RealFs)
}

/// What the walk asks of the file system beyond metadata: the seam that lets tests make a
/// folder or a file unreadable even when they run as root.
pub(crate) trait Reader {
    /// The entries of `dir` (full paths, any order).
    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>>;
    /// Ok when `file` can be opened for reading.
    fn open(&self, file: &Path) -> io::Result<()>;
}

/// The real file system.
pub(crate) struct RealFs;

impl Reader for RealFs {
    fn read_dir(&self, dir: &Path) -> io::Result<Vec<PathBuf>> {
        std::fs::read_dir(dir)?
            .map(|e| e.map(|e| e.path()))
            .collect()
    }

    fn open(&self, file: &Path) -> io::Result<()> {
        std::fs::File::open(file).map(drop)
    }
}

/// [`walk`] through `reader`.
pub(crate) fn walk_with(root: &Path, reader: &dyn Reader) -> Result<Walk> {
    let canonical = match root.canonicalize() {
        Ok(c) => c,
        Err(e) => bail!("{}: cannot read the folder: {e}", root.display()),
    };
    let entries = match reader.read_dir(root) {
        Ok(v) => v,
        Err(e) => bail!("{}: cannot read the folder: {e}", root.display()),
    };
    let mut walker = Walker {
        reader,
        walk: Walk::default(),
        visited: HashSet::from([canonical.clone()]),
        way_down: vec![canonical],
    };
    walker.entries(entries);
    Ok(walker.walk)
}

/// The state of one walk.
struct Walker<'a> {
    reader: &'a dyn Reader,
    walk: Walk,
    /// Canonical paths of every folder entered so far.
    visited: HashSet<PathBuf>,
    /// Canonical paths of the folders from the root down to the current one.
    way_down: Vec<PathBuf>,
}

impl Walker<'_> {
    fn skip(&mut self, path: &Path, reason: String) {
        self.walk.skipped.push(Failure {
            path: path.to_path_buf(),
            reason,
        });
    }

    /// Reads the entries of one folder, sorted by name.
    fn entries(&mut self, mut entries: Vec<PathBuf>) {
        entries.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        for path in entries {
            if path.file_name().is_none_or(is_hidden) {
                continue;
            }
            self.entry(&path);
        }
    }

    fn entry(&mut self, path: &Path) {
        let own = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) => return self.skip(path, format!("cannot read: {e}")),
        };
        let link = own.file_type().is_symlink();
        let meta = if link {
            match std::fs::metadata(path) {
                Ok(m) => m,
                Err(e) => return self.broken_link(path, &e),
            }
        } else {
            own
        };
        if meta.is_dir() {
            self.folder(path, link);
        } else if is_image(path) {
            if !meta.is_file() {
                return self.skip(path, "not a regular file".into());
            }
            match self.reader.open(path) {
                Ok(()) => self.walk.files.push(path.to_path_buf()),
                Err(e) => self.skip(path, format!("cannot read: {e}")),
            }
        }
    }

    /// A link that cannot be followed: listed when it may have been an image or a folder.
    fn broken_link(&mut self, path: &Path, error: &io::Error) {
        if !is_image(path) && path.extension().is_some() {
            return;
        }
        let target = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        let reason = if error.kind() == io::ErrorKind::NotFound {
            format!("broken symbolic link: its target {target} does not exist")
        } else {
            format!("symbolic link to {target} cannot be followed: {error}")
        };
        self.skip(path, reason);
    }

    fn folder(&mut self, path: &Path, link: bool) {
        let canonical = match path.canonicalize() {
            Ok(c) => c,
            Err(e) => return self.skip(path, format!("cannot read the folder: {e}")),
        };
        if self.way_down.contains(&canonical) {
            let what = if link { "link to" } else { "is" };
            return self.skip(
                path,
                format!(
                    "{what} a folder above it ({}): a loop, not followed",
                    canonical.display()
                ),
            );
        }
        if !self.visited.insert(canonical.clone()) {
            let what = if link { "link to" } else { "is" };
            return self.skip(
                path,
                format!(
                    "{what} a folder already read ({}), not read twice",
                    canonical.display()
                ),
            );
        }
        let entries = match self.reader.read_dir(path) {
            Ok(v) => v,
            Err(e) => return self.skip(path, format!("cannot read the folder: {e}")),
        };
        self.way_down.push(canonical);
        self.entries(entries);
        self.way_down.pop();
    }
}

#[cfg(test)]
mod tests;

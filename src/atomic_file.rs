//! Writing files so that an interrupted run never leaves a half-written file behind.
//!
//! Every file trtkit produces (models, engines, caches, reports) goes through [`write_atomic`]:
//! the bytes land in a temporary file in the destination folder, are flushed to disk, and the
//! temporary file is renamed over the destination in one step.
//!
//! A temporary file's name carries the process that writes it (`.trtkit-tmp-PID@HOST-…`): the
//! first write of a process into a folder removes the temporary files there of processes of this
//! host that are gone (killed mid-write), and leaves those of live processes and other hosts alone.

use anyhow::{Context, Result};
use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// How every temporary file's name starts.
const TMP_PREFIX: &str = ".trtkit-tmp-";

/// This host's name where it can stand in a temporary file's name (no `/` or `@`).
fn host_name() -> Option<&'static str> {
    Some(crate::this_host::name()).filter(|n| !n.contains(['/', '@']) && *n != "unknown")
}

/// The start of this process's temporary file names: `.trtkit-tmp-PID@HOST-`.
fn tmp_prefix() -> String {
    format!(
        "{TMP_PREFIX}{}@{}-",
        std::process::id(),
        host_name().unwrap_or("unknown")
    )
}

/// The process that wrote the temporary file `name`, when `name` is one of trtkit's and was
/// written on the host `host`.
fn tmp_owner(name: &str, host: &str) -> Option<u32> {
    let (pid, rest) = name.strip_prefix(TMP_PREFIX)?.split_once('@')?;
    let (written_on, _random) = rest.rsplit_once('-')?;
    if written_on != host {
        return None;
    }
    pid.parse().ok()
}

/// Removes the temporary files in `dir` left by processes of this host that no longer run
/// (once per folder and process; best effort: a file that cannot be removed stays).
fn sweep_orphans(dir: &Path) {
    static SWEPT: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let Ok(mut swept) = SWEPT.lock() else {
        return;
    };
    if !swept
        .get_or_insert_with(HashSet::new)
        .insert(dir.to_path_buf())
    {
        return;
    }
    drop(swept);
    // Where no process can be seen alive, nothing is removed.
    let (Some(host), Some(_)) = (host_name(), crate::this_host::process_alive(0)) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| tmp_owner(n, host)) else {
            continue;
        };
        if crate::this_host::process_alive(pid) != Some(false) {
            continue;
        }
        match std::fs::remove_file(entry.path()) {
            Ok(()) => tracing::info!(
                "removed {}, left by process {pid}, which is gone",
                entry.path().display()
            ),
            Err(e) => tracing::debug!("cannot remove {}: {e}", entry.path().display()),
        }
    }
}

/// Writes `bytes` to `path` through a temporary sibling file and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |w| w.write_all(bytes).map_err(Into::into))
}

/// Like [`write_atomic`], without flushing the file to disk before the rename: for files whose
/// reader verifies them (an engine is checked against the SHA-256 in its sidecar before any
/// reuse), so that a power loss can at worst leave bytes that fail that check. A killed process
/// still never leaves a half file under `path`.
pub(crate) fn write_atomic_unsynced(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_inner(path, false, |w| w.write_all(bytes).map_err(Into::into))
}

/// Like [`write_atomic`], but lets `fill` stream the content into the temporary file.
pub(crate) fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    write_atomic_inner(path, true, fill)
}

fn write_atomic_inner(
    path: &Path,
    sync: bool,
    fill: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> Result<()> {
    stage_inner(path, sync, buffered(fill))?.commit()
}

/// Like [`write_atomic_with`], for content that must seek as it is written (a zip archive
/// whose entry headers are completed after their data): `fill` gets the temporary file itself.
pub(crate) fn write_atomic_seekable(
    path: &Path,
    fill: impl FnOnce(&mut std::fs::File) -> Result<()>,
) -> Result<()> {
    stage_inner(path, true, fill)?.commit()
}

/// `fill` of a plain writer, given the temporary file through a buffer flushed at the end.
fn buffered(
    fill: impl FnOnce(&mut dyn Write) -> Result<()>,
) -> impl FnOnce(&mut std::fs::File) -> Result<()> {
    |file| {
        let mut w = std::io::BufWriter::new(file);
        fill(&mut w)?;
        w.flush()?;
        Ok(())
    }
}

/// A file written in full to a temporary sibling of its destination, not yet in place:
/// [`StagedFile::commit`] renames it over the destination in one step; dropping it instead
/// removes the temporary file and leaves the destination as it was.
pub(crate) struct StagedFile {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
}

impl StagedFile {
    /// Puts the file in place (one rename).
    pub(crate) fn commit(self) -> Result<()> {
        let path = self.path;
        self.tmp
            .persist(&path)
            .map_err(|e| e.error)
            .with_context(|| {
                format!(
                    "{}: cannot rename the temporary file into place",
                    path.display()
                )
            })?;
        Ok(())
    }

    /// Puts the file in place after removing the one it replaces, for a file no reader trusts
    /// until a later step vouches for it (an engine and its graph, once their sidecar is gone).
    /// A rename over an existing file makes ext4 write the new file's data out at once
    /// (`auto_da_alloc`): tens of milliseconds for an engine, where otherwise the kernel writes it
    /// back in its own time. A process killed between the two steps leaves no file under the
    /// path, never a half one.
    pub(crate) fn commit_replacing(self) -> Result<()> {
        remove_if_present(&self.path)?;
        self.commit()
    }
}

/// Removes `path` if it exists; a missing file is not an error.
pub(crate) fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("{}: cannot replace", path.display())),
    }
}

/// Writes `bytes` beside `path` without flushing them to disk (as [`write_atomic_unsynced`])
/// and without putting them in place yet: for a file that must land only once a later step
/// has succeeded, written while that step runs.
pub(crate) fn stage_unsynced(path: &Path, bytes: &[u8]) -> Result<StagedFile> {
    stage_inner(
        path,
        false,
        buffered(|w| w.write_all(bytes).map_err(Into::into)),
    )
}

fn stage_inner(
    path: &Path,
    sync: bool,
    fill: impl FnOnce(&mut std::fs::File) -> Result<()>,
) -> Result<StagedFile> {
    // A link is written through (the file it names is replaced); a device, FIFO or folder is
    // refused rather than replaced.
    let path = &crate::output_path::write_target(path)?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
    }
    sweep_orphans(dir);
    let mut tmp = tempfile::Builder::new()
        .prefix(&tmp_prefix())
        .tempfile_in(dir)
        .with_context(|| format!("{}: cannot create a temporary file", dir.display()))?;
    fill(tmp.as_file_mut()).with_context(|| format!("{}: write failed", path.display()))?;
    // A temporary file is private (0600); what trtkit writes is an ordinary file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644))
            .with_context(|| format!("{}: cannot set permissions", path.display()))?;
    }
    if sync {
        tmp.as_file()
            .sync_all()
            .with_context(|| format!("{}: sync failed", path.display()))?;
    }
    Ok(StagedFile {
        tmp,
        path: path.to_path_buf(),
    })
}

/// An exclusive advisory lock on a file (`flock`), held until dropped: how processes sharing a
/// results folder (the cells of a several-GPU run, the tasks of a cluster array) take turns to
/// make a file only one of them should make, or to append to one file.
pub(crate) struct FileLock {
    _file: std::fs::File,
    /// Seconds spent waiting for another holder.
    pub(crate) waited_s: f64,
}

impl FileLock {
    /// Locks `path` (created if missing), waiting for any other holder.
    pub(crate) fn acquire(path: &Path) -> Result<FileLock> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("{}: cannot open the lock file", path.display()))?;
        Self::lock(file, path)
    }

    /// Locks an open file, waiting for any other holder.
    fn lock(file: std::fs::File, path: &Path) -> Result<FileLock> {
        let start = std::time::Instant::now();
        file.lock()
            .with_context(|| format!("{}: cannot lock", path.display()))?;
        Ok(FileLock {
            _file: file,
            waited_s: start.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_atomic(&path, b"hello").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"hello");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_staged_file_replaces_the_old_one_and_a_dropped_one_leaves_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_atomic(&path, b"old").unwrap();
        drop(stage_unsynced(&path, b"dropped").unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        stage_unsynced(&path, b"new")
            .unwrap()
            .commit_replacing()
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let other = dir.path().join("fresh.bin");
        stage_unsynced(&other, b"first")
            .unwrap()
            .commit_replacing()
            .unwrap();
        assert_eq!(std::fs::read(&other).unwrap(), b"first");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn temporary_files_name_their_writer_and_those_of_gone_writers_are_swept() {
        let host = host_name().expect("this host has a name");
        let dir = tempfile::tempdir().unwrap();
        let staged = stage_unsynced(&dir.path().join("a.bin"), b"x").unwrap();
        let name = staged.tmp.path().file_name().unwrap().to_str().unwrap();
        assert_eq!(tmp_owner(name, host), Some(std::process::id()), "{name}");
        assert_eq!(tmp_owner(name, "elsewhere"), None);
        assert_eq!(tmp_owner(".trtkit-tmp-AbC123", host), None);
        // A process that has exited, this one's parent (alive), and a process of another host.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        let other = tempfile::tempdir().unwrap();
        let plant = |pid: u32, host: &str| {
            let p = other
                .path()
                .join(format!("{TMP_PREFIX}{pid}@{host}-xY12z9"));
            std::fs::write(&p, b"half").unwrap();
            p
        };
        let dead = plant(gone, host);
        let live = plant(std::os::unix::process::parent_id(), host);
        let foreign = plant(gone, "another-host");
        write_atomic(&other.path().join("out.bin"), b"whole").unwrap();
        assert!(!dead.exists(), "the file of a gone process stays");
        assert!(live.exists() && foreign.exists());
    }

    #[test]
    fn failed_fill_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        write_atomic(&path, b"old").unwrap();
        let err = write_atomic_with(&path, |w| {
            w.write_all(b"partial")?;
            anyhow::bail!("interrupted")
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn a_staged_file_lands_on_commit_and_vanishes_when_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("graph.onnx");
        write_atomic(&path, b"old").unwrap();
        let staged = stage_unsynced(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        drop(staged);
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        stage_unsynced(&path, b"new").unwrap().commit().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}

//! The results folder's lock: one `bench` run over a results folder at a time, counting the cells
//! it started. The run takes `bench.lock` in the folder and lends the locked handle to each cell's
//! process, so the lock stays held while any of them lives, even one whose `bench` was killed.
//! The file says who took it (PID, host, start), and a second run refuses to start in one line
//! that says so.
//!
//! Not [`crate::atomic_file::FileLock`], which waits for the holder: this one refuses at once,
//! names the holder, and its handle is read-only, so a cell's process can hold it as its stdout
//! without anything it prints landing in the file.

use super::key::CellKey;
use super::record::now_unix_s;
use crate::this_host;
use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a run waits for the cells of a run that is gone to end.
const GRACE: Duration = Duration::from_secs(5);

/// The lock file's name in a results folder.
pub(crate) const LOCK_FILE: &str = "bench.lock";

/// Who holds the lock, as its file says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Holder {
    /// The `bench` process.
    pub pid: u32,
    /// The machine it runs on.
    pub host: String,
    /// When it took the lock, seconds since the Unix epoch.
    pub started_unix_s: f64,
}

/// The lock of one results folder, held until it is dropped (and while a cell's process that
/// holds a handle on it lives).
#[derive(Debug)]
pub(crate) struct FolderLock {
    file: File,
    path: PathBuf,
}

impl FolderLock {
    /// Takes the lock of `folder` (which exists), or says in one line who holds it.
    pub fn take(folder: &Path) -> Result<FolderLock> {
        let path = folder.join(LOCK_FILE);
        let cannot = |what: &str| {
            format!(
                "{}: cannot {what} the results folder's lock",
                path.display()
            )
        };
        // Made if missing, never truncated here: the words of a holder stay readable.
        OpenOptions::new()
            .append(true)
            .create(true)
            .open(&path)
            .with_context(|| cannot("create"))?;
        let file = File::open(&path).with_context(|| cannot("open"))?;
        let start = Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => break,
                // The cells of a run that is gone end as soon as they see it: a run started right
                // after gives them a moment.
                Err(TryLockError::WouldBlock) if holder_gone(&path) && start.elapsed() < GRACE => {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(TryLockError::WouldBlock) => return Err(anyhow!(refusal(&path))),
                Err(TryLockError::Error(e)) => return Err(e).with_context(|| cannot("take")),
            }
        }
        let holder = Holder {
            pid: std::process::id(),
            host: this_host::name().into(),
            started_unix_s: now_unix_s(),
        };
        let mut words = serde_json::to_string(&holder)?;
        words.push('\n');
        // Rewritten in place, not renamed over: the lock belongs to this file's inode.
        let mut w = OpenOptions::new()
            .write(true)
            .open(&path)
            .with_context(|| cannot("write"))?;
        w.set_len(0)
            .and_then(|_| w.write_all(words.as_bytes()))
            .with_context(|| cannot("write"))?;
        Ok(FolderLock { file, path })
    }

    /// The locked handle, to lend a cell's process (see [`super::supervise::Supervisor`]).
    pub(crate) fn handle(&self) -> &File {
        &self.file
    }
}

impl Drop for FolderLock {
    /// Clears the holder's words (the file stays: removing a lock file races with a run that
    /// has just opened it).
    fn drop(&mut self) {
        if let Ok(f) = OpenOptions::new().write(true).open(&self.path) {
            let _ = f.set_len(0);
        }
    }
}

/// The locks of a run of one cell (`bench --cell`): the results folder's lock, shared (no whole
/// run starts while it lives, and it starts while none runs; the runs of other cells, such as the
/// tasks of a cluster array, go on beside it), and the cell's own lock, alone (two runs never
/// measure one cell of one folder at once: the second is refused in one line).
#[derive(Debug)]
pub(crate) struct CellLock {
    folder: File,
    _cell: File,
}

impl CellLock {
    /// Takes the locks of the cell labelled `label` whose lock file is `cell_path`, in `folder`
    /// (which exists), or says in one line who holds them.
    pub fn take(folder: &Path, cell_path: &Path, label: &str) -> Result<CellLock> {
        let path = folder.join(LOCK_FILE);
        let folder_file = open_lock_file(&path)?;
        match folder_file.try_lock_shared() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(anyhow!(refusal(&path))),
            Err(TryLockError::Error(e)) => {
                return Err(e).with_context(|| format!("{}: cannot take the lock", path.display()))
            }
        }
        let cell = open_lock_file(cell_path)?;
        match cell.try_lock() {
            Ok(()) => Ok(CellLock {
                folder: folder_file,
                _cell: cell,
            }),
            Err(TryLockError::WouldBlock) => Err(anyhow!(
                "{}: another bench run is measuring cell {label} of this results folder; wait for it to end or stop it",
                cell_path.display()
            )),
            Err(TryLockError::Error(e)) => {
                Err(e).with_context(|| format!("{}: cannot take the lock", cell_path.display()))
            }
        }
    }

    /// The results folder's locked handle, to lend the cell's process.
    pub(crate) fn handle(&self) -> &File {
        &self.folder
    }
}

/// The lock file of the cell keyed `key` in the results folder `folder`.
pub(crate) fn cell_lock_path(folder: &Path, key: &CellKey) -> PathBuf {
    folder.join(format!("cell-{}.lock", key.site_free_id()))
}

/// What a bench run holds while it runs: the whole folder, or one cell of it.
#[derive(Debug)]
pub(crate) enum Lock {
    /// A whole run.
    Folder(FolderLock),
    /// A run of one cell.
    Cell(CellLock),
}

impl Lock {
    /// The locked handle of the results folder, to lend each cell's process.
    pub(crate) fn handle(&self) -> &File {
        match self {
            Lock::Folder(l) => l.handle(),
            Lock::Cell(l) => l.handle(),
        }
    }
}

/// Opens the lock file at `path` for reading, made if missing and never truncated.
fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("{}: cannot create the lock file", path.display()))?;
    File::open(path).with_context(|| format!("{}: cannot open the lock file", path.display()))
}

/// Who holds the lock at `path`, as its file says.
fn holder(path: &Path) -> Option<Holder> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Whether the run that holds the lock at `path` ran on this machine and is gone (its cells
/// may still hold the lock for a moment).
fn holder_gone(path: &Path) -> bool {
    holder(path).is_some_and(|h| {
        h.host == this_host::name() && this_host::process_alive(h.pid) == Some(false)
    })
}

/// The line that refuses a second run: who holds the lock at `path`.
fn refusal(path: &Path) -> String {
    let who = match holder(path) {
        Some(h) => {
            let ago = (now_unix_s() - h.started_unix_s).max(0.0);
            let gone =
                h.host == this_host::name() && this_host::process_alive(h.pid) == Some(false);
            format!(
                "trtkit bench pid {} on {}, started {ago:.0} s ago{}",
                h.pid,
                h.host,
                if gone {
                    "; that process is gone but a cell it started still runs"
                } else {
                    ""
                }
            )
        }
        None => "a bench --cell run, or a process that has not said who it is".into(),
    };
    format!(
        "{}: another bench is using this results folder ({who}); wait for it to end or stop it",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second taker is refused with the holder's PID until the first lets go; then the file no
    /// longer names it.
    #[test]
    fn a_second_taker_is_refused_by_name_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = FolderLock::take(dir.path()).unwrap();
        let err = FolderLock::take(dir.path()).unwrap_err().to_string();
        let pid = format!("pid {} on {}", std::process::id(), this_host::name());
        assert!(err.contains(&pid) && err.contains(LOCK_FILE), "{err}");
        assert!(!err.contains("is gone"), "{err}");
        // A handle lent to a cell keeps the lock after the run's own handle closes.
        let lent = first.handle().try_clone().unwrap();
        drop(first);
        assert!(FolderLock::take(dir.path()).is_err());
        drop(lent);
        let again = FolderLock::take(dir.path()).unwrap();
        drop(again);
        let words = std::fs::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(words, "");
    }

    /// A run whose `bench` is gone but whose cell still holds the lock for a moment is waited
    /// for; one that holds it longer is refused with the line saying its `bench` is gone.
    #[test]
    fn the_cells_of_a_gone_run_are_given_a_moment() {
        let dir = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let words = Holder {
            pid,
            host: this_host::name().into(),
            started_unix_s: now_unix_s(),
        };
        std::fs::write(&path, serde_json::to_string(&words).unwrap()).unwrap();
        // The "cell": a handle on the lock, let go after 300 ms.
        let cell = File::open(&path).unwrap();
        cell.try_lock().unwrap();
        let started = Instant::now();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(cell);
        });
        drop(FolderLock::take(dir.path()).unwrap());
        assert!(started.elapsed() >= Duration::from_millis(250));
        releaser.join().unwrap();
        // Held past the grace: refused, saying the run is gone.
        std::fs::write(&path, serde_json::to_string(&words).unwrap()).unwrap();
        let cell = File::open(&path).unwrap();
        cell.try_lock().unwrap();
        let err = FolderLock::take(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains("is gone but a cell it started still runs"),
            "{err}"
        );
        assert!(err.contains(&format!("pid {pid}")), "{err}");
        drop(cell);
    }
}

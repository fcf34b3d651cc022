//! One build at a time of one engine file: an exclusive lock on a hidden file beside the engine
//! (`.NAME.engine.lock`, holding the holder's process id), taken before the engine is looked up
//! and held until it has landed. A second build of the same engine waits, says for whom, and
//! then finds the engine the first one made (reused when its key matches, else rebuilt and why).
//! The lock file goes when the build ends; one left by a killed build is simply locked again.
//! [`reuse_engine`] is that finding: reuse on a matching key, or the reasons to build again.

use super::report::BuildReport;
use crate::keyed_artifact::Lookup;
use crate::trt::engine_file::{lookup, EngineKey};
use anyhow::{Context, Result};
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The environment variable that, in debug builds only, holds a build this many milliseconds
/// after TensorRT has built the engine and before it lands (tests use it to make two builds of
/// one engine overlap).
const HOLD_ENV: &str = "TRTKIT_TEST_HOLD_LANDING_MS";

/// The held lock of one engine's build; dropping it removes the lock file (and the folders made
/// for it, where nothing else landed in them) and lets the next build in.
pub(super) struct BuildLock {
    file: File,
    path: PathBuf,
    /// Folders made for the lock, deepest first.
    made: Vec<PathBuf>,
}

/// The lock file of the engine at `engine`.
fn lock_path(engine: &Path) -> PathBuf {
    let name = engine
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "engine".into());
    engine.with_file_name(format!(".{name}.lock"))
}

/// The folders above `path` that do not exist yet, deepest first.
fn missing_folders(path: &Path) -> Vec<PathBuf> {
    path.ancestors()
        .skip(1)
        .filter(|p| !p.as_os_str().is_empty())
        .take_while(|p| !p.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Whether `file` is still the file under `path` (a build that ends removes its lock file: a
/// waiter that opened it before must open the new one).
fn still_there(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

impl BuildLock {
    /// Locks the build of the engine at `engine`, waiting for another build of it; `note` is
    /// told once when there is one to wait for.
    pub(super) fn acquire(engine: &Path, note: &dyn Fn(&str)) -> Result<BuildLock> {
        let path = lock_path(engine);
        let mut told = false;
        let mut retries = 0;
        loop {
            let made = missing_folders(&path);
            if let Some(dir) = made.first() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("{}: cannot create the folder", dir.display()))?;
            }
            let file = match OpenOptions::new()
                .create(true)
                .truncate(false)
                .read(true)
                .write(true)
                .open(&path)
            {
                Ok(f) => f,
                // A build that failed removed the folders it made, just now: make them again.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && retries < 3 => {
                    retries += 1;
                    continue;
                }
                Err(e) => {
                    return Err(e)
                        .with_context(|| format!("{}: cannot open the lock file", path.display()))
                }
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    if !told {
                        note(&waiting_line(engine, &path));
                        told = true;
                    }
                    file.lock()
                        .with_context(|| format!("{}: cannot lock", path.display()))?;
                }
                Err(TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("{}: cannot lock", path.display()))
                }
            }
            if still_there(&file, &path) {
                let mut lock = BuildLock { file, path, made };
                lock.record_holder()?;
                return Ok(lock);
            }
        }
    }

    /// Writes this process's id into the lock file, for a build that waits to name.
    fn record_holder(&mut self) -> Result<()> {
        self.file.set_len(0)?;
        write!(self.file, "{}", std::process::id())
            .with_context(|| format!("{}: cannot write", self.path.display()))
    }
}

/// "waiting for another build of ENGINE (pid N)", the pid where the holder wrote it already.
fn waiting_line(engine: &Path, lock: &Path) -> String {
    let holder = std::fs::read_to_string(lock)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    match holder {
        Some(pid) => format!(
            "waiting for another build of {} (pid {pid})",
            engine.display()
        ),
        None => format!("waiting for another build of {}", engine.display()),
    }
}

impl Drop for BuildLock {
    fn drop(&mut self) {
        // Removed while still held, so that no build can lock this file after it is gone.
        let _ = std::fs::remove_file(&self.path);
        for dir in &self.made {
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
        }
    }
}

/// Whether the engine at `path` is reused: its key matches and `rebuild` is not asked. Then
/// `report` takes the found engine's facts; otherwise it says why the engine is built again.
pub(super) fn reuse_engine(
    rebuild: bool,
    path: &Path,
    key: &EngineKey,
    report: &mut BuildReport,
) -> bool {
    if rebuild {
        if path.exists() {
            report.rebuilt_because.push("--rebuild given".into());
        }
        return false;
    }
    match lookup(path, key) {
        Lookup::Hit(found) => {
            report.reused = true;
            report.engine_bytes = found.facts.engine_bytes;
            report.facts = found.facts;
            true
        }
        Lookup::Missing => false,
        Lookup::Stale(why) => {
            report.rebuilt_because = why.reasons();
            false
        }
    }
}

/// In debug builds, holds the build as long as [`HOLD_ENV`] says (nothing in release builds).
pub(super) fn hold_before_landing() {
    if cfg!(debug_assertions) {
        if let Some(ms) = std::env::var(HOLD_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_second_lock_waits_names_the_holder_and_nothing_is_left() {
        let dir = tempfile::tempdir().unwrap();
        let engine = dir.path().join("new/sub/m.engine");
        let first = BuildLock::acquire(&engine, &|_| panic!("nobody to wait for")).unwrap();
        assert!(dir.path().join("new/sub/.m.engine.lock").is_file());
        let (tx, rx) = mpsc::channel::<String>();
        let waiter = {
            let engine = engine.clone();
            std::thread::spawn(move || {
                let tx2 = tx.clone();
                let lock = BuildLock::acquire(&engine, &move |l| tx2.send(l.into()).unwrap());
                tx.send("locked".into()).unwrap();
                drop(lock.unwrap());
            })
        };
        let said = rx.recv().unwrap();
        assert!(
            said.contains("waiting for another build of")
                && said.contains(&format!("(pid {})", std::process::id())),
            "{said}"
        );
        assert!(rx
            .recv_timeout(std::time::Duration::from_millis(200))
            .is_err());
        drop(first);
        assert_eq!(rx.recv().unwrap(), "locked");
        waiter.join().unwrap();
        assert!(!dir.path().join("new").exists(), "the folders made stay");
    }
}

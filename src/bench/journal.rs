//! The journal: one JSON line per finished cell, appended and flushed as each cell ends, so a run
//! killed at any moment loses at most the cell in flight. A results folder may hold several
//! journals (`journal.jsonl`, and `journal-<cell>.jsonl` from cells run one by one elsewhere);
//! reading merges them, and the last line for a key wins.

use super::key::CellKey;
use super::record::{CellRecord, Status};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The journal a `bench` run appends to in its results folder.
pub(crate) fn main_journal(results: &Path) -> PathBuf {
    results.join("journal.jsonl")
}

/// The journal of one cell run on its own (`bench --cell ID`), named by the cell whatever GPU
/// model measures it ([`CellKey::site_free_id`]), so the machine that handed the cell to a
/// cluster node finds it.
pub(crate) fn cell_journal(results: &Path, key: &CellKey) -> PathBuf {
    results.join(format!("journal-{}.jsonl", key.site_free_id()))
}

/// Appends one record as one line and flushes it to disk before returning. Several writers (the
/// lanes of a several-GPU run, cells run one by one into their own journals) take turns through
/// a lock on the file, so no line is ever cut by another's; a line always starts on a line of its
/// own, even after a last line that a crash cut short.
pub(crate) fn append(journal: &Path, record: &CellRecord) -> Result<()> {
    let mut line = serde_json::to_string(record)?;
    line.push('\n');
    let mut f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(journal)
        .with_context(|| format!("{}: cannot open the journal", journal.display()))?;
    // The lock is released when `f` closes; the line goes in one write under it.
    f.lock()
        .with_context(|| format!("{}: cannot lock the journal", journal.display()))?;
    if !ends_a_line(&mut f)
        .with_context(|| format!("{}: cannot read the journal", journal.display()))?
    {
        line.insert(0, '\n');
    }
    f.write_all(line.as_bytes())
        .and_then(|_| f.sync_data())
        .with_context(|| format!("{}: cannot append to the journal", journal.display()))
}

/// Whether `f` is empty or ends with a newline.
fn ends_a_line(f: &mut File) -> std::io::Result<bool> {
    let len = f.metadata()?.len();
    if len == 0 {
        return Ok(true);
    }
    let mut last = [0u8];
    f.seek(SeekFrom::Start(len - 1))?;
    f.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// Where [`mend_tail`] keeps the cut lines of `journal` (`journal.jsonl.torn`).
pub(crate) fn torn_file(journal: &Path) -> PathBuf {
    let mut name = journal.as_os_str().to_owned();
    name.push(".torn");
    PathBuf::from(name)
}

/// Mends the tail of `journal` before a run appends to it: a last line without its newline that
/// is a whole record gets its newline; one that is not (a write cut short by a crash or a full
/// disk) is moved to [`torn_file`] and cut off the journal, so every whole record is kept and the
/// next line starts a line of its own. Says what it did in one line (`None`: nothing to mend).
pub(crate) fn mend_tail(journal: &Path) -> Result<Option<String>> {
    let cannot = |what: &str| format!("{}: cannot {what}", journal.display());
    let mut f = match OpenOptions::new().read(true).append(true).open(journal) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| cannot("open the journal")),
    };
    // Under the journal's lock: no line is half-way in while the tail is read and cut.
    f.lock().with_context(|| cannot("lock the journal"))?;
    let mut text = vec![];
    f.read_to_end(&mut text)
        .with_context(|| cannot("read the journal"))?;
    if text.is_empty() || text.ends_with(b"\n") {
        return Ok(None);
    }
    let whole = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let tail = &text[whole..];
    if serde_json::from_slice::<CellRecord>(tail).is_ok() {
        f.write_all(b"\n")
            .and_then(|_| f.sync_data())
            .with_context(|| cannot("end the journal's last line"))?;
        return Ok(None);
    }
    let torn = torn_file(journal);
    let mut kept = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&torn)
        .with_context(|| format!("{}: cannot keep the journal's cut line", torn.display()))?;
    kept.write_all(tail)
        .and_then(|_| kept.write_all(b"\n"))
        .and_then(|_| kept.sync_data())
        .with_context(|| format!("{}: cannot keep the journal's cut line", torn.display()))?;
    f.set_len(whole as u64)
        .and_then(|_| f.sync_data())
        .with_context(|| cannot("cut the journal's torn line"))?;
    Ok(Some(format!(
        "{}: its last line was cut short ({} bytes, not a record); kept in {} and left out",
        journal.display(),
        tail.len(),
        torn.display()
    )))
}

/// What reading journals found.
#[derive(Debug, Default)]
pub struct Journal {
    /// Every record, in file order (files in name order).
    pub records: Vec<CellRecord>,
    /// Lines that were not records (a line cut by a crash mid-write, a hand edit), said as
    /// `file:line: why`.
    pub skipped: Vec<String>,
    /// The journal files read.
    pub files: Vec<PathBuf>,
}

impl Journal {
    /// The last record of each key, in the order keys first appeared. An interrupted cell that
    /// was measured later (on another GPU model's key, as a cluster's resubmitted task may be)
    /// is left out.
    pub(crate) fn latest(&self) -> Vec<&CellRecord> {
        let mut order: Vec<&str> = vec![];
        let mut last: BTreeMap<&str, &CellRecord> = BTreeMap::new();
        for r in &self.records {
            if last.insert(&r.id, r).is_none() {
                order.push(&r.id);
            }
        }
        let latest: Vec<&CellRecord> = order.iter().map(|id| last[id]).collect();
        let superseded = |r: &CellRecord| {
            r.interrupted()
                && latest.iter().any(|o| {
                    o.id != r.id
                        && o.started_unix_s >= r.started_unix_s
                        && o.key.site_free_id() == r.key.site_free_id()
                })
        };
        latest.iter().copied().filter(|r| !superseded(r)).collect()
    }

    /// The ids a run should skip: every measured cell, and failed ones unless they are retried
    /// (an interrupted cell is never skipped: nothing about the cell stopped it).
    pub fn done(&self, retry_failed: bool) -> std::collections::BTreeSet<String> {
        self.done_by(retry_failed, |r| r.id.clone())
    }

    /// [`Journal::done`] by [`crate::bench::key::CellKey::site_free_id`]: for a plan made on a
    /// machine other than the ones that measure it.
    pub(crate) fn done_site_free(&self, retry_failed: bool) -> std::collections::BTreeSet<String> {
        self.done_by(retry_failed, |r| r.key.site_free_id())
    }

    fn done_by(
        &self,
        retry_failed: bool,
        id: impl Fn(&CellRecord) -> String,
    ) -> std::collections::BTreeSet<String> {
        self.latest()
            .into_iter()
            .filter(|r| r.status == Status::Ok || !(retry_failed || r.interrupted()))
            .map(id)
            .collect()
    }
}

/// The journal files of a results folder (`journal*.jsonl`), in name order.
pub(crate) fn journal_files(results: &Path) -> Result<Vec<PathBuf>> {
    let mut files = vec![];
    let entries = std::fs::read_dir(results)
        .with_context(|| format!("{}: cannot read the results folder", results.display()))?;
    for e in entries {
        let path = e?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with("journal") && name.ends_with(".jsonl") && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Reads every journal of a results folder (none yet is an empty journal).
pub(crate) fn read_folder(results: &Path) -> Result<Journal> {
    if !results.exists() {
        return Ok(Journal::default());
    }
    read_files(&journal_files(results)?)
}

/// Reads these journal files (a file or a results folder each) into one journal.
pub fn read_files(paths: &[PathBuf]) -> Result<Journal> {
    let mut journal = Journal::default();
    for path in paths {
        if path.is_dir() {
            let inner = journal_files(path)?;
            if inner.is_empty() {
                anyhow::bail!(
                    "{}: no journal*.jsonl in this folder (is it a `trtkit bench` results folder?)",
                    path.display()
                );
            }
            let j = read_files(&inner)?;
            journal.records.extend(j.records);
            journal.skipped.extend(j.skipped);
            journal.files.extend(j.files);
            continue;
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("{}: cannot read the journal", path.display()))?;
        journal.read_text(path, &text);
    }
    Ok(journal)
}

impl Journal {
    /// Adds the records of the journal file `path` whose text is `text`; a line that is not a
    /// record is skipped, said as `file:line: why`.
    pub(crate) fn read_text(&mut self, path: &Path, text: &str) {
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<CellRecord>(line) {
                Ok(r) => self.records.push(r),
                Err(e) => self
                    .skipped
                    .push(format!("{}:{}: {e}", path.display(), i + 1)),
            }
        }
        self.files.push(path.to_path_buf());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::select::Runtime;
    use crate::bench::record::FailureKind;
    use crate::tensor::Precision;

    /// Lines far longer than a pipe buffer, appended by several writers at once with their own
    /// handles, all come back whole.
    #[test]
    fn concurrent_appends_never_cut_a_line() {
        let dir = tempfile::tempdir().unwrap();
        let journal = main_journal(dir.path());
        std::thread::scope(|s| {
            for writer in 0..6 {
                let journal = &journal;
                s.spawn(move || {
                    for n in 0..40 {
                        let mut r = crate::bench::record::fixtures::failed(
                            &format!("m{writer}"),
                            Precision::Fp32,
                            n + 1,
                            Runtime::TractCpu,
                            FailureKind::Error,
                        );
                        r.failure.as_mut().unwrap().stderr_tail = "x".repeat(70_000);
                        append(journal, &r).unwrap();
                    }
                });
            }
        });
        let read = read_folder(dir.path()).unwrap();
        assert!(read.skipped.is_empty(), "{:?}", read.skipped.first());
        assert_eq!(read.records.len(), 240);
        assert_eq!(read.latest().len(), 240);
    }

    /// An append after a last line cut short starts a line of its own, so the new record reads;
    /// mending sets the cut line aside and keeps the whole records.
    #[test]
    fn appends_start_a_fresh_line_and_mending_sets_the_cut_line_aside() {
        use crate::bench::record::fixtures::ok;
        let dir = tempfile::tempdir().unwrap();
        let journal = main_journal(dir.path());
        let record = |batch| ok("m", Precision::Fp32, batch, Runtime::TractCpu, 1.0);
        append(&journal, &record(1)).unwrap();
        append(&journal, &record(2)).unwrap();
        let text = std::fs::read(&journal).unwrap();
        std::fs::write(&journal, &text[..text.len() - 30]).unwrap();
        append(&journal, &record(3)).unwrap();
        let read = read_folder(dir.path()).unwrap();
        let batches: Vec<usize> = read.records.iter().map(|r| r.key.batch).collect();
        assert_eq!((batches, read.skipped.len()), (vec![1, 3], 1));
        // Cut again, then mend: the cut line goes to the side file, the records stay.
        let text = std::fs::read(&journal).unwrap();
        std::fs::write(&journal, &text[..text.len() - 30]).unwrap();
        let said = mend_tail(&journal).unwrap().unwrap();
        assert!(said.contains("journal.jsonl.torn"), "{said}");
        let read = read_folder(dir.path()).unwrap();
        assert_eq!((read.records.len(), read.skipped.len()), (1, 1));
        assert!(std::fs::read(&journal).unwrap().ends_with(b"\n"));
        let torn = std::fs::read_to_string(torn_file(&journal)).unwrap();
        assert_eq!(torn.lines().count(), 1);
        assert_eq!(mend_tail(&journal).unwrap(), None, "nothing left to mend");
    }

    /// An interrupted cell is run again; a failed one only with `retry_failed`.
    #[test]
    fn interrupted_cells_are_not_done() {
        use crate::bench::record::fixtures::{failed, ok};
        let j = Journal {
            records: vec![
                ok("a", Precision::Fp32, 1, Runtime::TractCpu, 1.0),
                failed("b", Precision::Fp32, 1, Runtime::TractCpu, FailureKind::Oom),
                failed(
                    "c",
                    Precision::Fp32,
                    1,
                    Runtime::TractCpu,
                    FailureKind::Interrupted,
                ),
            ],
            ..Default::default()
        };
        let names = |retry| {
            let done = j.done(retry);
            let mut m: Vec<&str> = j
                .records
                .iter()
                .filter(|r| done.contains(&r.id))
                .map(|r| r.model.as_str())
                .collect();
            m.sort();
            m
        };
        assert_eq!(names(false), ["a", "b"]);
        assert_eq!(names(true), ["a"]);
    }

    /// A cell handed to a cluster node with another GPU model writes the journal that the
    /// machine that handed it reads; another cell does not.
    #[test]
    fn a_cells_journal_is_named_whatever_gpu_measures_it() {
        use crate::bench::record::fixtures::key;
        let planned = key("m", Precision::Fp16, 8, Runtime::OrtCuda);
        let measured = crate::bench::key::CellKey {
            gpu: "NVIDIA H100 80GB HBM3".into(),
            ..planned.clone()
        };
        assert_ne!(planned.id(), measured.id());
        let dir = Path::new("/r");
        assert_eq!(cell_journal(dir, &planned), cell_journal(dir, &measured));
        let other = key("m", Precision::Fp16, 16, Runtime::OrtCuda);
        assert_ne!(cell_journal(dir, &planned), cell_journal(dir, &other));
    }
}

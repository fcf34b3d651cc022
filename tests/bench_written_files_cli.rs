//! A bench run written by an earlier release still resumes and reports: its journal's cells
//! are found by today's keys (skipped, not run again), and `trtkit report` reads every record.
//! The files are under `tests/fixtures/bench_written_by_<version>/` (see its README).

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use support::trtkit_in;

/// A copy of a written run's folder, so that resuming it leaves the fixture as it is.
fn copy_of(fixture: &str) -> tempfile::TempDir {
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), &target).unwrap();
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let from: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", fixture]
        .iter()
        .collect();
    copy(&from, dir.path());
    dir
}

fn journal_lines(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("results/written/journal.jsonl"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_run_written_by_0_1_0_resumes_without_rerunning_and_reports() {
    let dir = copy_of("bench_written_by_0.1.0");
    let before = journal_lines(dir.path());
    assert_eq!(before.len(), 24);

    let out = trtkit_in(dir.path(), &["bench", "plan.toml", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["cells"], 24, "{report}");
    assert_eq!(report["already_done"], 24, "{report}");
    assert_eq!(report["ran"], 0, "{report}");
    assert_eq!(
        journal_lines(dir.path()),
        before,
        "the journal was appended to"
    );

    // Retrying the failed cells runs the eight trt cells and only those: the measured ones are
    // still found.
    let cells = trtkit_in(
        dir.path(),
        &["bench", "plan.toml", "--retry-failed", "--print-cells"],
    );
    let text = String::from_utf8_lossy(&cells.stdout).to_string();
    let commands: Vec<&str> = text.lines().collect();
    assert_eq!(commands.len(), 8, "{text}");
    assert!(commands.iter().all(|c| c.ends_with("/trt")), "{text}");

    let csv = trtkit_in(dir.path(), &["report", "results/written", "--csv"]);
    assert!(
        csv.status.success(),
        "{}",
        String::from_utf8_lossy(&csv.stderr)
    );
    let csv = String::from_utf8_lossy(&csv.stdout).to_string();
    assert_eq!(csv.lines().count(), 25, "{csv}");
    assert_eq!(
        csv.lines().filter(|l| l.contains(",ok,")).count(),
        16,
        "{csv}"
    );
    assert!(csv.contains("bert,") && csv.contains("tract-cpu"), "{csv}");

    let md = trtkit_in(dir.path(), &["report", "results/written", "--markdown"]);
    assert!(
        md.status.success(),
        "{}",
        String::from_utf8_lossy(&md.stderr)
    );
    let md = String::from_utf8_lossy(&md.stdout);
    assert!(md.contains("ort-cpu") && md.contains("seq 16"), "{md}");
}

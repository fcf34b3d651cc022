//! The `report` job: reads bench journals (results folders or journal files, merged; the last
//! line for a cell wins), checks the cell the page plots over time, and writes the HTML page
//! with plots when asked. Its report is what was read; [`super::bench`] renders its tables for
//! the terminal, markdown and CSV.

use crate::atomic_file::write_atomic;
use crate::bench::journal::read_files;
use crate::report::bench::{BenchTables, JournalReport};
use crate::report::{html, plots};
use anyhow::{bail, Context, Result};
use std::path::PathBuf;

/// What `report` reads and writes.
#[derive(Clone, Debug, Default)]
pub struct ReportConfig {
    /// Results folders of `trtkit bench`, or journal files; several are merged.
    pub results: Vec<PathBuf>,
    /// Where to write the self-contained HTML page with plots, if anywhere.
    pub html: Option<PathBuf>,
    /// The cell whose NVML readings over time the page plots: its label, its id or the start
    /// of it; `None`: the GPU cell with the most readings.
    pub cell: Option<String>,
}

/// Reads the journals `config` names and writes the HTML page it asks for.
pub fn report(config: &ReportConfig) -> Result<JournalReport> {
    for p in &config.results {
        if !p.exists() {
            bail!("{}: no such results folder or journal file", p.display());
        }
    }
    let journal = read_files(&config.results)?;
    for s in &journal.skipped {
        tracing::warn!("skipped a journal line that is not a cell record: {s}");
    }
    if journal.records.is_empty() {
        let names: Vec<String> = config
            .results
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        bail!(
            "{}: no cell records in the journal (has `trtkit bench` finished a cell yet?)",
            names.join(", ")
        );
    }
    let view = JournalReport::new(&journal);
    let cell = plots::pick_cell(&view.cells, config.cell.as_deref())?;
    if let Some(path) = &config.html {
        let page = html::render(&view, &BenchTables::new(&view.cells), cell);
        write_atomic(path, page.as_bytes())
            .with_context(|| format!("{}: cannot write the report", path.display()))?;
    }
    Ok(view)
}

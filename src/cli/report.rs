//! `trtkit report RESULTS...`: the tables of one or more bench journals (merged; the last line for
//! a cell wins) on stdout as text, markdown, CSV or JSON, and with `-o` the HTML page with plots,
//! rendered by [`crate::report::bench`] and [`crate::report::html`].

use crate::atomic_file::write_atomic;
use crate::bench::journal::read_files;
use crate::cli::args::output::OutputArgs;
use crate::report::bench::{render, render_csv, BenchTables, JournalReport};
use crate::report::{html, plots};
use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;

/// Flags of `report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Results folders of `trtkit bench`, or journal files; several are merged.
    #[arg(required = true, value_name = "RESULTS")]
    pub results: Vec<PathBuf>,
    /// Also write the report as one self-contained HTML page with plots.
    #[arg(short, long, value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// The cell whose power, SM utilisation and memory over time the page plots: its label
    /// (`resnet50/fp16/b32/tract-cuda`), its id or the start of it; default: the GPU cell with
    /// the most NVML readings.
    #[arg(long, value_name = "ID")]
    pub cell: Option<String>,
    /// Print one CSV row per cell (every metric a column).
    #[arg(long, conflicts_with_all = ["json", "markdown"])]
    pub csv: bool,
    /// Output format.
    #[command(flatten)]
    pub format: OutputArgs,
}

/// Runs `report`.
pub fn run(args: ReportArgs) -> Result<()> {
    for p in &args.results {
        if !p.exists() {
            bail!("{}: no such results folder or journal file", p.display());
        }
    }
    let journal = read_files(&args.results)?;
    for s in &journal.skipped {
        tracing::warn!("skipped a journal line that is not a cell record: {s}");
    }
    let names = || {
        args.results
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if journal.records.is_empty() {
        bail!(
            "{}: no cell records in the journal (has `trtkit bench` finished a cell yet?)",
            names()
        );
    }
    let report = JournalReport::new(&journal);
    let tables = BenchTables::new(&report.cells);
    let cell = plots::pick_cell(&report.cells, args.cell.as_deref())?;
    if let Some(path) = &args.output {
        let page = html::render(&report, &tables, cell);
        write_atomic(path, page.as_bytes())
            .with_context(|| format!("{}: cannot write the report", path.display()))?;
    }
    if args.csv {
        print!("{}", render_csv(&report));
        return Ok(());
    }
    let wrote = match (&args.output, args.format.quiet()) {
        (Some(p), false) => format!("\nwrote {}\n", p.display()),
        _ => String::new(),
    };
    args.format.print(&report, |markdown| {
        render(&report, &tables, markdown) + &wrote
    })
}

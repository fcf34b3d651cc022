//! `trtkit report RESULTS...`: flags into a [`ReportConfig`]; the tables of the journals read
//! go to stdout as text, markdown, CSV or JSON, rendered by [`crate::report::bench`] (with `-o`
//! the job also writes the HTML page with plots).

use crate::bench::journal::main_journal;
use crate::cli::args::output::OutputArgs;
use crate::cli::outputs::{check_outputs, MaybePath};
use crate::report::bench::{render, render_csv, BenchTables};
use crate::report::job::{report, ReportConfig};
use anyhow::Result;
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

/// The report these flags describe.
pub fn config(args: &ReportArgs) -> ReportConfig {
    ReportConfig {
        results: args.results.clone(),
        html: args.output.clone(),
        cell: args.cell.clone(),
    }
}

/// Runs `report`.
pub fn run(args: ReportArgs) -> Result<()> {
    // A results folder is read through its journal.
    let journals: Vec<PathBuf> = args.results.iter().map(|r| main_journal(r)).collect();
    let inputs: Vec<MaybePath> = (args.results.iter().chain(&journals))
        .map(|p| ("RESULTS", Some(p.as_path())))
        .collect();
    check_outputs(&[("-o", args.output.as_deref())], &inputs)?;
    let report = report(&config(&args))?;
    if args.csv {
        return crate::cli::stdout::print(&render_csv(&report));
    }
    let tables = BenchTables::new(&report.cells);
    let wrote = match (&args.output, args.format.quiet()) {
        (Some(p), false) => format!("\nwrote {}\n", p.display()),
        _ => String::new(),
    };
    args.format.print(&report, |markdown| {
        render(&report, &tables, markdown) + &wrote
    })
}

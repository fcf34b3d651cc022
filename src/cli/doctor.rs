//! `trtkit doctor`: what this machine offers for trtkit ([`crate::trt::support`]), rendered by
//! [`crate::report::doctor`].

use crate::cli::args::output::print_report;
use crate::report::doctor::render;
use crate::trt::support::collect;
use clap::Args;

/// Flags of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `doctor`; it succeeds on a machine with no GPU and says so.
pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let report = collect();
    print_report(args.json, &report, || render(&report))
}

//! `trtkit doctor`: what this machine offers for trtkit ([`crate::trt::support`]), rendered by
//! [`crate::report::doctor`].

use crate::cli::args::output::JsonArgs;
use crate::report::doctor::render;
use crate::trt::support::collect;
use clap::Args;

/// Flags of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// Runs `doctor`; it succeeds on a machine with no GPU and says so.
pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    let report = collect();
    args.format.print(&report, || render(&report))
}

//! `trtkit doctor`: what this machine offers for trtkit ([`crate::jobs::doctor`]), rendered by
//! [`crate::report::doctor`]; with `--check`, a small network through every GPU backend on every
//! GPU ([`crate::jobs::doctor::check`]).

use crate::cli::args::output::JsonArgs;
use crate::jobs::doctor::check::{check_gpus, DoctorCheck};
use crate::jobs::doctor::{collect, gpu0_needs};
use crate::report::doctor::{render, render_check};
use clap::Args;
use std::path::PathBuf;

/// Flags of `doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Also run a small classifier end to end through every GPU backend on every GPU (a
    /// TensorRT engine, ONNX Runtime's CUDA provider, tract's CUDA runtime) and compare each
    /// with tract on the CPU; exits 1 when a backend that can run here fails.
    #[arg(long)]
    pub check: bool,
    /// Folder holding the TensorRT libraries, for the check's engine (default: the usual
    /// places, as `build` searches them).
    #[arg(long, value_name = "DIR")]
    pub tensorrt_dir: Option<PathBuf>,
    /// Print only the TensorRT that GPU 0 needs, as one word: `tensorrt-rtx` (the default
    /// build), `tensorrt` (a build with `--features tensorrt`) or `none` (no GPU, or one neither
    /// runs on); what `scripts/install.sh` builds by.
    #[arg(long, conflicts_with_all = ["check", "json"])]
    pub tensorrt_flavour: bool,
    /// Output format.
    #[command(flatten)]
    pub format: JsonArgs,
}

/// Runs `doctor`; it succeeds on a machine with no GPU and says so. With `--check` it fails
/// when a GPU backend that can run here gives wrong answers or errors.
pub fn run(args: DoctorArgs) -> anyhow::Result<()> {
    if args.tensorrt_flavour {
        return crate::cli::stdout::println(gpu0_needs().word());
    }
    let report = collect();
    if !args.check {
        return args.format.print(&report, || render(&report));
    }
    let both = DoctorCheck {
        check: check_gpus(args.tensorrt_dir.clone())?,
        doctor: report,
    };
    args.format.print(&both, || {
        format!("{}\n{}", render(&both.doctor), render_check(&both.check))
    })?;
    if both.check.failed() {
        anyhow::bail!("doctor --check: a GPU backend failed (see the FAIL lines above)");
    }
    Ok(())
}
